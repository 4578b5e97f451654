#!/usr/bin/env bash
# bench/gather_forms_bench.sh — the x86 vector decoders' two table-gather forms
# (vpgatherdd against eight scalar loads; include/wcodec/cpu.h,
# WCODEC_GATHER) on this CPU: every file encoded once, then decoded from
# memory by build/bench/read_loop with WCODEC_GATHER=scalar and =vector in
# turn, ROUNDS rounds (default 6) of PASSES passes (default 3), one process
# per form and round so that the two alternate through the machine's noisy
# minutes; each form's best pass (thread CPU time) per file. One Markdown
# table per decoder path (PATHS, default "avx2 avx512": the avx512 path runs
# the Highway decoders for the chunks its own loops decline), with the CPU
# and the form this CPU picks by itself.
#
#   bash bench/gather_forms_bench.sh [FILES...]   (default ../shared/data/*.safetensors)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ -x build/wcodec && -x build/bench/read_loop ]] || bash scripts/build.sh release
files=("$@")
[[ ${#files[@]} -gt 0 ]] || files=(../shared/data/*.safetensors)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
encoded=()
for f in "${files[@]}"; do
  b=$(basename "$f" .safetensors)
  build/wcodec encode -q "$f" "$work/$b.wcodec"
  encoded+=("$work/$b.wcodec")
done
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "this CPU's own choice: $(build/wcodec --version | sed -n 's/^table gathers: //p')"
for p in ${PATHS:-avx2 avx512}; do
  for r in $(seq "${ROUNDS:-6}"); do
    for form in scalar vector; do
      WCODEC_CPU=$p WCODEC_GATHER=$form build/bench/read_loop --passes "${PASSES:-3}" --rounds 1 "${encoded[@]}" \
        | sed "s|^|$form |" >> "$work/$p.txt"
    done
  done
  got=$(sed -n 's/.*decoder path: \([a-z0-9]*\).*/\1/p' "$work/$p.txt" | head -1)
  echo
  echo "decoder path $got (WCODEC_CPU=$p); MB/s, best of ${ROUNDS:-6} rounds per form; x = vpgatherdd / scalar loads"
  echo "| file | scalar loads | vpgatherdd | x |"
  echo "|---|---:|---:|---:|"
  python3 - "$work/$p.txt" <<'PY'
import os, sys
best = {}
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) != 4 or parts[3] != "MB/s":
        continue
    form, path, mbs = parts[0], parts[1], float(parts[2])
    key = (os.path.basename(path)[: -len(".wcodec")], form)
    best[key] = max(best.get(key, 0.0), mbs)
for name in dict.fromkeys(k[0] for k in best):
    s, v = best[(name, "scalar")], best[(name, "vector")]
    print(f"| {name} | {s:.0f} | {v:.0f} | {v / s:.2f} |")
PY
done
