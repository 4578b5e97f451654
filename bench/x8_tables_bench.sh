#!/usr/bin/env bash
# bench/x8_tables_bench.sh — what the 9-bit frequency tables cost in size
# and give in decode speed: every shared file encoded twice by the same
# build, with the default tables (9-bit where a tensor loses at most 1%)
# and with `wcodec encode --exact-tables` (12-bit everywhere), then both
# decoded from memory by build/bench/read_loop, alternated round by round
# (thread CPU time, best pass). Prints a Markdown table per decoder path
# (PATHS, default "avx2 avx512 scalar" where the CPU runs them).
#
#   bash bench/x8_tables_bench.sh [FILES...]   (default ../shared/data/*.safetensors)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ -x build/wcodec && -x build/bench/read_loop ]] || bash scripts/build.sh release
files=("$@")
[[ ${#files[@]} -gt 0 ]] || files=(../shared/data/*.safetensors)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for f in "${files[@]}"; do
  b=$(basename "$f" .safetensors)
  build/wcodec encode -q "$f" "$work/$b.x8.wcodec"
  build/wcodec encode -q --exact-tables "$f" "$work/$b.exact.wcodec"
done
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
for p in ${PATHS:-avx2 avx512 scalar}; do
  echo
  echo "decoder path $p (WCODEC_CPU=$p; a path the CPU lacks falls back, see the read_loop line)"
  echo "| file | exact tables | 9-bit tables | size | decode exact | decode 9-bit | x |"
  echo "|---|---|---|---|---|---|---|"
  for f in "${files[@]}"; do
    b=$(basename "$f" .safetensors)
    se=$(stat -c %s "$work/$b.exact.wcodec")
    s8=$(stat -c %s "$work/$b.x8.wcodec")
    out=$(WCODEC_CPU=$p build/bench/read_loop --passes "${PASSES:-10}" --rounds "${ROUNDS:-3}" \
      "$work/$b.exact.wcodec" "$work/$b.x8.wcodec")
    de=$(echo "$out" | awk -v f="$work/$b.exact.wcodec" '$1 == f {print $2}')
    d8=$(echo "$out" | awk -v f="$work/$b.x8.wcodec" '$1 == f {print $2}')
    path=$(echo "$out" | sed -n 's/.*decoder path: //p')
    python3 -c "
se, s8, de, d8 = $se, $s8, $de, $d8
print(f'| $b ($path) | {se} | {s8} | {(s8 / se - 1) * 100:+.3f}% | {de} | {d8} | {d8 / de:.2f} |')"
  done
done
