#!/usr/bin/env bash
# Configures and builds wcodecfs with Ninja.
#   scripts/build.sh [release|asan]
#     release -> build/       (CMAKE_BUILD_TYPE=Release)
#     asan    -> build-asan/  (ASan+UBSan, Debug at -O1, no benchmarks)
# Environment:
#   WCODEC_CUDA  AUTO (default: build the CUDA decoder when nvcc is found), ON, OFF
#   WCODEC_CCACHE 0 to compile without ccache (scripts/ccache_env.sh)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

config=${1:-release}
cuda=${WCODEC_CUDA:-AUTO}
jobs=$(nproc)

case "$config" in
  release)
    build_dir=build
    args=(-DCMAKE_BUILD_TYPE=Release -DWCODEC_BUILD_BENCH=ON)
    ;;
  asan)
    build_dir=build-asan
    # The CUDA code is compiled (and its build checked) by the release
    # configuration; the sanitized one leaves it out unless asked.
    cuda=${WCODEC_CUDA:-OFF}
    args=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1"
          -DWCODEC_SANITIZE=ON -DWCODEC_BUILD_BENCH=OFF)
    ;;
  *)
    echo "usage: $0 [release|asan]" >&2
    exit 2
    ;;
esac

# Folders whose CMake code has not landed yet are left out rather than
# breaking the configure step (the top-level CMakeLists adds them by option).
if [[ ! -f bench/CMakeLists.txt ]]; then
  echo "build: bench/CMakeLists.txt not present; configuring with WCODEC_BUILD_BENCH=OFF"
  args+=(-DWCODEC_BUILD_BENCH=OFF)
fi
if [[ ! -f cuda/CMakeLists.txt && "$cuda" == "AUTO" ]]; then
  echo "build: cuda/CMakeLists.txt not present; configuring with WCODEC_CUDA=OFF"
  cuda=OFF
fi

# shellcheck source=scripts/ccache_env.sh
source scripts/ccache_env.sh
echo "build: configuring $config in $build_dir/ (WCODEC_CUDA=$cuda${CCACHE_DIR:+, ccache in $CCACHE_DIR})"
cmake -S . -B "$build_dir" -G Ninja "${args[@]}" "${CCACHE_LAUNCHER_ARGS[@]+"${CCACHE_LAUNCHER_ARGS[@]}"}" "-DWCODEC_CUDA=$cuda"

echo "build: building $config with $jobs jobs"
[[ -n "${CCACHE_DIR:-}" ]] && ccache --zero-stats >/dev/null 2>&1 || true
t0=$SECONDS
cmake --build "$build_dir" -j"$jobs"
echo "build: $config OK ($build_dir/, $((SECONDS - t0)) s)"
if [[ -n "${CCACHE_DIR:-}" ]]; then
  ccache --show-stats 2>/dev/null | grep -iE '^ *(hits|misses|cache hit|cache miss)' | sed 's/^ */build: ccache: /' || true
fi
