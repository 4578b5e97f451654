#!/usr/bin/env bash
# bench/fast_decode_bench.sh — what `wcodec encode --fast-decode` costs in
# size and gives in decode speed: each file encoded twice by the same build
# (default: every model that pays for itself; --fast-decode: a model kept
# only where it saves at least 1% against zstd / raw chunks), both decoded
# from memory by build/bench/read_loop (thread CPU time, best of 2 rounds
# of 2 passes, the two files alternated), next to `zstd -d` of the file's
# zstd -19 compression (`zstd -b1 -d`, one thread) and the distance of
# each wcodec file to zstd -19 (fractions of the original). One table per
# decoder path (PATHS, default "avx2 avx512 scalar").
#
#   bash bench/fast_decode_bench.sh [FILES...]
#
# Default files: SmolLM2-135M-Instruct's Q4_1 GGUF (scripts/smollm2.sh's
# cache) and llama-quantize's Q2_K, Q3_K_M, Q4_0, Q4_K_M, Q5_K_M, Q6_K,
# Q8_0 and TQ2_0 of it (scripts/llama_cpp.sh's build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ -x build/wcodec && -x build/bench/read_loop ]] || bash scripts/build.sh release
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
files=("$@")
if [[ ${#files[@]} -eq 0 ]]; then
  q41=$HOME/.cache/wcodecfs/smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf
  [[ -f $q41 ]] || bash scripts/smollm2.sh > /dev/null
  llama=${WCODEC_LLAMA_CPP:-$(bash scripts/llama_cpp.sh)}
  files=("$q41")
  for q in Q2_K Q3_K_M Q4_0 Q4_K_M Q5_K_M Q6_K Q8_0 TQ2_0; do
    "$llama/bin/llama-quantize" --allow-requantize "$q41" "$work/SmolLM2-135M-Instruct.$q.gguf" "$q" > /dev/null 2>&1
    files+=("$work/SmolLM2-135M-Instruct.$q.gguf")
  done
fi
for f in "${files[@]}"; do
  b=$(basename "$f")
  build/wcodec encode -q "$f" "$work/$b.default.wcodec"
  build/wcodec encode -q --fast-decode "$f" "$work/$b.fast.wcodec"
  zstd -19 -T0 -q -f "$f" -o "$work/$b.zst"
done
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
python3 - "$work" "${PATHS:-avx2 avx512 scalar}" "${files[@]}" <<'PY'
import os, re, subprocess, sys
work, paths, files = sys.argv[1], sys.argv[2].split(), sys.argv[3:]

def read_loop(path, f):
    r = subprocess.run(["build/bench/read_loop", "--passes", "2", "--rounds", "1", f],
                       env=dict(os.environ, WCODEC_CPU=path), capture_output=True, text=True)
    ran = re.findall(r"decoder path: (\S+)", r.stdout + r.stderr)
    return float(re.findall(r"(\d+) MB/s", r.stdout)[-1]), (ran[-1] if ran else "?")

def zstd_d(f):
    r = subprocess.run(["zstd", "-b1", "-d", f], capture_output=True, text=True)
    return float(re.findall(r"([\d.]+) MB/s", r.stdout + r.stderr)[-1])

for p in paths:
    print(f"\ndecoder path {p} (WCODEC_CPU={p})")
    print("| file | default − zstd -19 | --fast-decode − zstd -19 | size | zstd -d MB/s | default MB/s | x | --fast-decode MB/s | x |")
    print("|---|---|---|---|---|---|---|---|---|")
    for f in files:
        b = os.path.basename(f)
        o = os.path.getsize(f)
        z = os.path.getsize(f"{work}/{b}.zst")
        d = os.path.getsize(f"{work}/{b}.default.wcodec")
        s = os.path.getsize(f"{work}/{b}.fast.wcodec")
        zd = zstd_d(f"{work}/{b}.zst")
        best = {"default": 0.0, "fast": 0.0}
        ran = "?"
        for _ in range(2):
            for k in best:
                v, ran = read_loop(p, f"{work}/{b}.{k}.wcodec")
                best[k] = max(best[k], v)
        print(f"| {b} ({ran}) | {(d - z) / o:+.4f} | {(s - z) / o:+.4f} | {100 * (s - d) / d:+.2f}% | {zd:.0f} | "
              f"{best['default']:.0f} | {best['default'] / zd:.2f} | {best['fast']:.0f} | {best['fast'] / zd:.2f} |", flush=True)
PY
