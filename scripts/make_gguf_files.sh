#!/usr/bin/env bash
# scripts/make_gguf_files.sh — GGUF files of every type llama.cpp makes,
# from stories260K's real weights: the test files of
# tests/test_mount_llama_cpp.cpp and of bench/gguf_bench.sh (made at test
# time, never committed).
#
#   bash scripts/make_gguf_files.sh OUT_DIR
#
# OUT_DIR/hf is the Hugging Face Llama directory of scripts/make_hf_llama.py
# (stories260K's tensors, the committed test tokenizer). From it, llama.cpp's
# own converter (convert_hf_to_gguf.py) writes
#   stories260K.hf-f32.gguf  hf-f16  hf-bf16  hf-q8_0      (--outtype ...)
# and llama-quantize, from stories260K.hf-f32.gguf,
#   stories260K.Q8_0.gguf  Q4_0  Q4_1  Q5_0  Q5_1  Q2_K  Q4_K_M  Q6_K  TQ2_0
# stories260K's rows are 64 wide: the 256-wide K and ternary types do not fit
# them, so llama-quantize writes those tensors in a fallback type (the test
# and the bench print the tensor types each file really holds).
# OUT_DIR/files.txt lists the files made, one name a line.
#
# Needs llama.cpp's cache (scripts/llama_cpp.sh; WCODEC_LLAMA_CPP names its
# directory) and python3 with torch, numpy and sentencepiece (the
# converter's imports). Exits 3, naming what is missing, when one is absent.
# Environment: WCODEC_LLAMA_CPP, WCODEC_DATA (default ../shared/data beside
# the repository).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
out=${1:?usage: make_gguf_files.sh OUT_DIR}
data=${WCODEC_DATA:-$(dirname "$repo")/shared/data}
cache=${WCODEC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wcodecfs}
llama=${WCODEC_LLAMA_CPP:-$cache/llama.cpp-${LLAMA_CPP_PYTHON_VERSION:-0.3.36}}

missing() { echo "make_gguf_files: missing: $*" >&2; exit 3; }
for f in bin/llama-quantize src/convert_hf_to_gguf.py src/gguf-py; do
  [[ -e $llama/$f ]] || missing "$llama/$f (llama.cpp's cache: bash scripts/llama_cpp.sh)"
done
weights=$data/stories260K.f32.safetensors
[[ -f $weights ]] || missing "$weights"
python3 -c 'import torch, numpy, sentencepiece' 2>/dev/null ||
  missing "python3 packages torch, numpy, sentencepiece (convert_hf_to_gguf.py imports them)"

mkdir -p "$out"
python3 "$repo/scripts/make_hf_llama.py" "$out/hf" --weights "$weights"
files=()
for t in f32 f16 bf16 q8_0; do
  name=stories260K.hf-$t.gguf
  PYTHONPATH=$llama/src/gguf-py python3 "$llama/src/convert_hf_to_gguf.py" "$out/hf" --outtype "$t" \
    --outfile "$out/$name" > "$out/convert-$t.log" 2>&1 || { tail -20 "$out/convert-$t.log" >&2; exit 1; }
  files+=("$name")
done
for q in Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q4_K_M Q6_K TQ2_0; do
  name=stories260K.$q.gguf
  "$llama/bin/llama-quantize" "$out/stories260K.hf-f32.gguf" "$out/$name" "$q" 1 > "$out/quantize-$q.log" 2>&1 ||
    { tail -20 "$out/quantize-$q.log" >&2; exit 1; }
  files+=("$name")
done
printf '%s\n' "${files[@]}" > "$out/files.txt"
echo "make_gguf_files: ${#files[@]} GGUF files in $out" >&2
