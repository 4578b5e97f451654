#!/usr/bin/env bash
# bench/llama_perplexity.sh — llama.cpp's llama-perplexity, built on demand
# for the benches (bench/cawsf_table.py --perplexity), never by CI or the
# tests. It goes into the same versioned cache directory as the tools of
# scripts/llama_cpp.sh ($WCODEC_CACHE/llama.cpp-<version>/bin), from the
# same vendored tree (scripts/llama_cpp.sh fetches it first when needed),
# with the same portable CPU build options. Prints the binary's path.
#
#   bash bench/llama_perplexity.sh
#
# Environment: LLAMA_CPP_PYTHON_VERSION (default 0.3.36), WCODEC_CACHE.
# Thread-safety: a script; two runs at once build in separate directories
# and the second copy of the binary wins.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
dir=$(bash "$here/../scripts/llama_cpp.sh")
bin=$dir/bin/llama-perplexity
if [[ -x $bin ]]; then
  echo "$bin"
  exit 0
fi
build=$dir/build-perplexity.$$
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
echo "llama_perplexity.sh: building llama-perplexity (a few minutes) ..." >&2
cmake -S "$dir/src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_LLAMAFILE=OFF \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON "${launcher[@]}" > "$build.configure.log" 2>&1 ||
  { tail -20 "$build.configure.log" >&2; exit 1; }
ninja -C "$build" llama-perplexity > "$build.log" 2>&1 || { tail -30 "$build.log" >&2; exit 1; }
cp "$build/bin/llama-perplexity" "$bin.tmp$$"
mv "$bin.tmp$$" "$bin"
rm -rf "$build" "$build.configure.log" "$build.log"
echo "$bin"
