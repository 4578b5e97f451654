#!/usr/bin/env bash
# scripts/llama_cpp.sh — llama.cpp's CPU tools, built once per machine
# outside the clone, from the llama.cpp tree that the llama-cpp-python source
# distribution vendors (the real GGUF client of the tests and the demo).
#
#   bash scripts/llama_cpp.sh            # builds if needed; prints the directory
#
# The directory ($WCODEC_CACHE/llama.cpp-<version>, default
# ~/.cache/wcodecfs/llama.cpp-0.3.36) holds src/ (the vendored tree:
# convert_hf_to_gguf.py, gguf-py/) and bin/ with the two tools the tests and
# the demo run: llama-simple (greedy generation: the real GGUF client) and
# llama-quantize (the quantized test files). Only their targets are built
# (libllama, ggml-base, ggml-cpu, llama-common and the two programs). A build
# that did not finish leaves no .complete marker and is redone. Portable
# build (GGML_NATIVE=OFF), so a cache copied between machines of different
# CPUs still runs.
# Environment: LLAMA_CPP_PYTHON_VERSION (default 0.3.36), WCODEC_CACHE.
set -euo pipefail

ver=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
cache=${WCODEC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wcodecfs}
dir=$cache/llama.cpp-$ver
tools=(llama-simple llama-quantize)

if [[ -f $dir/.complete ]]; then
  echo "$dir"
  exit 0
fi
command -v cmake >/dev/null && command -v ninja >/dev/null || {
  echo "llama_cpp.sh: cmake and ninja are needed (bash scripts/install-deps.sh)" >&2
  exit 1
}
rm -rf "$dir"
mkdir -p "$dir/dl"
echo "llama_cpp.sh: fetching llama-cpp-python $ver (source distribution) ..." >&2
python3 -m pip download --quiet --no-deps --no-binary :all: --dest "$dir/dl" "llama-cpp-python==$ver" >&2
tar -xzf "$dir/dl"/llama_cpp_python-"$ver".tar.gz -C "$dir/dl"
mv "$dir/dl/llama_cpp_python-$ver/vendor/llama.cpp" "$dir/src"
rm -rf "$dir/dl"
echo "llama_cpp.sh: building ${tools[*]} ..." >&2
# GGML_LLAMAFILE=OFF: its sgemm kernels are one of the longest compiles and
# only speed up large matrix products.
cmake -S "$dir/src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_LLAMAFILE=OFF \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON > "$dir/configure.log" 2>&1 ||
  { tail -20 "$dir/configure.log" >&2; exit 1; }
ninja -C "$dir/build" "${tools[@]}" > "$dir/build.log" 2>&1 || { tail -30 "$dir/build.log" >&2; exit 1; }
mkdir -p "$dir/bin"
for t in "${tools[@]}"; do cp "$dir/build/bin/$t" "$dir/bin/"; done
rm -rf "$dir/build"
touch "$dir/.complete"
echo "$dir"
