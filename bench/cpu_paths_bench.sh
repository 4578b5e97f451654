#!/usr/bin/env bash
# bench/cpu_paths_bench.sh — the codec on every decoder path this CPU runs,
# in one table: per file, decode MB/s per core on the scalar, avx2 and
# avx512 paths (WCODEC_CPU forced, one `wcodec bench` run per path, one
# thread), each next to `zstd -d` of the zstd -19 file measured in the same
# run, and encode MB/s per core, with the issue's targets checked:
#   decode on avx2 >= zstd -d on every file, >= 1000 MB/s on int8 / BF16 /
#   F16 files; scalar >= 300 MB/s; encode >= 30 MB/s.
#
#   bash bench/cpu_paths_bench.sh [FILE.safetensors...]   (default: ../shared/data)
#   PATHS="avx2 scalar" QUICK=1 bash bench/cpu_paths_bench.sh
#
# A path the CPU cannot run is left out (the tool falls back and says so;
# the row would repeat another path's figures). Speeds move by 15-25%
# between runs on a shared VM: compare figures from one run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${BUILD:-build}
[[ -x $BUILD/wcodec ]] || bash scripts/build.sh release
if [[ $# -eq 0 ]]; then
  set -- "${WCODEC_DATA:-../shared/data}"/*.safetensors
fi
PATHS=${PATHS:-scalar avx2 avx512}
quick=()
[[ ${QUICK:-0} = 1 ]] && quick=(--quick)
work=$(mktemp -d /tmp/wcodec-paths.XXXXXX)
trap 'rm -rf "$work"' EXIT

ran=()
for p in $PATHS; do
  # The path the tool really runs (a forced path the CPU lacks falls back).
  got=$(WCODEC_CPU=$p "$BUILD/wcodec" --version 2>/dev/null | sed -n 's/.*decoder path: *\([a-z0-9]*\).*/\1/p' | head -1)
  if [[ -n $got && $got != "$p" ]]; then
    echo "cpu_paths_bench: path $p not available on this CPU (it would run $got); left out" >&2
    continue
  fi
  echo "cpu_paths_bench: running wcodec bench on the $p path ..." >&2
  WCODEC_CPU=$p "$BUILD/wcodec" bench "$@" "${quick[@]}" --json "$work/$p.json" > "$work/$p.txt"
  ran+=("$p")
done

python3 - "$work" "${ran[@]}" <<'EOF'
import json, os, sys
work, paths = sys.argv[1], sys.argv[2:]
runs = {p: {os.path.basename(r["file"]): r for r in json.load(open(f"{work}/{p}.json"))} for p in paths}
files = list(next(iter(runs.values())).keys()) if runs else []
cpu = next(iter(next(iter(runs.values())).values()))["cpu"] if files else "?"
print(f"CPU: {cpu}; one thread; MB/s per core (MB = 10^6 bytes); x = wcodec decode / zstd -d of the zstd -19 file, same run")
head = "| file | ratio | zstd -19 ratio |" + "".join(f" {p} dec | x |" for p in paths) + "".join(f" {p} enc |" for p in paths) + " targets |"
print(head)
print("|" + "---|" * (head.count("|") - 1))
def codec(r, name):
    return next(c for c in r["codecs"] if c["codec"] == name)
misses = 0
for f in files:
    r0 = runs[paths[0]][f]
    w = codec(r0, "wcodec")
    z = codec(r0, "zstd -19")
    cells = [f.replace(".safetensors", ""), f"{w['ratio']:.4f}", f"{z['ratio']:.4f}"]
    notes = []
    is_fast = any(t in f for t in ("int8", "bf16", "f16"))
    for p in paths:
        r = runs[p][f]
        d, zd = codec(r, "wcodec")["dec_MBps"], codec(r, "zstd -19")["dec_MBps"]
        cells += [f"{d:.0f}", f"{d / zd:.2f}"]
        if p == "avx2":
            if d < zd: notes.append("avx2 < zstd -d")
            if is_fast and d < 1000: notes.append("avx2 < 1 GB/s")
        if p == "scalar" and d < 300: notes.append("scalar < 300")
        if p == "avx512" and d < zd: notes.append("avx512 < zstd -d")
    for p in paths:
        e = codec(runs[p][f], "wcodec")["enc_MBps"]
        cells.append(f"{e:.1f}")
        if e < 30: notes.append(f"{p} enc < 30")
    if w["ratio"] >= z["ratio"]: notes.append("ratio >= zstd -19")
    misses += bool(notes)
    cells.append("met" if not notes else "missed: " + ", ".join(notes))
    print("| " + " | ".join(cells) + " |")
print(f"\n{len(files) - misses} of {len(files)} files meet every target on the paths measured ({' '.join(paths)}).")
EOF
