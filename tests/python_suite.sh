#!/usr/bin/env bash
# tests/python_suite.sh — runs the Python package's suites (python/tests)
# under ctest.
#
#   python_suite.sh module PYTHON SRC BUILD   the package as the build made it
#                                             (BUILD/python-pkg: the native
#                                             module beside python/wcodec)
#   python_suite.sh pip PYTHON SRC BUILD      `pip install SRC` into a venv
#                                             (BUILD/python-venv, with the
#                                             system's site packages for
#                                             numpy / torch) and the suites
#                                             against that install
#
# Environment from ctest: WCODEC_DATA_DIR, WCODEC_TOOL, WCODECFS_BIN,
# WCODEC_SANITIZED=1 in a sanitizer build (the module is instrumented: the
# sanitizer runtimes are preloaded into Python, leak checks off because the
# interpreter keeps its memory until exit; the suites take the small model
# files only). Exit 77 (ctest: skipped) with a SKIPPED line when Python,
# numpy or pip is missing.
set -uo pipefail

mode=$1 py=$2 src=$3 build=$4
skip() {
  echo "SKIPPED: $*"
  exit 77
}

"$py" -c 'import numpy' 2>/dev/null || skip "the numpy Python package is not installed ($py)"
export WCODEC_TEST_TMP="$build/python-tmp"
export WCODEC_TEST_CACHE="$build/python-test-cache-$mode"
mkdir -p "$WCODEC_TEST_TMP"
suites=(test_read test_checkpoint test_model_dir test_cuda)

if [[ "$mode" == module ]]; then
  export PYTHONPATH="$build/python-pkg"
  if [[ "${WCODEC_SANITIZED:-0}" == 1 ]]; then
    cxx=${CXX:-c++}
    preload=""
    for lib in libasan.so libubsan.so; do
      p=$("$cxx" -print-file-name="$lib" 2>/dev/null)
      [[ -f "$p" ]] && preload="$preload $p"
    done
    [[ -n "$preload" ]] || skip "the sanitizer runtimes (libasan.so) were not found to preload into Python"
    export LD_PRELOAD="${preload# }"
    # Reports also go to files (printed below when the run fails): a
    # report on stderr of a process the suite started is easy to lose.
    san_log="$WCODEC_TEST_TMP/sanitizer"
    rm -f "$san_log".*
    export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:log_path=$san_log"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$san_log"
    export WCODEC_TEST_QUICK=1
    # The model directory suite exercises the daemon and transformers, not
    # the module's memory use; the others cover the module (test_cuda: the
    # GPU read path's steps on the host).
    suites=(test_read test_checkpoint test_cuda)
  fi
elif [[ "$mode" == pip ]]; then
  venv="$build/python-venv"
  if [[ ! -x "$venv/bin/python" ]]; then
    "$py" -m venv --system-site-packages "$venv" >/dev/null 2>&1 || skip "cannot make a venv with $py (python3-venv missing?)"
  fi
  "$venv/bin/python" -m pip --version >/dev/null 2>&1 || skip "pip is not available in the venv"
  args=(install --quiet --no-deps --force-reinstall "$src"
        "--config-settings=build-dir=$build-wheel")
  # The same compiler cache as the build scripts (scripts/ccache_env.sh):
  # the package's codec objects are the release build's. The wheel's build
  # directory is a sibling of BUILD (BUILD-wheel), at the same depth under
  # the source tree, so that the compile commands ccache hashes (paths made
  # relative to the build directory) are the release build's.
  source "$src/scripts/ccache_env.sh"
  if [[ ${#CCACHE_LAUNCHER_ARGS[@]} -gt 0 ]]; then
    args+=("--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache")
    # The release build's compiler by the same path (the CMake that pip
    # runs may pick g++ where the build has c++: another ccache key).
    cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null)
    [[ -n "$cxx" ]] && args+=("--config-settings=cmake.define.CMAKE_CXX_COMPILER=$cxx")
  fi
  echo "python_suite: $venv/bin/python -m pip ${args[*]}"
  log="$build/python-pip.log"
  t0=$SECONDS
  if ! "$venv/bin/python" -m pip "${args[@]}" >"$log" 2>&1; then
    if grep -qiE 'could not find a version|No matching distribution|Failed to establish|Temporary failure in name resolution' "$log"; then
      tail -5 "$log"
      skip "pip could not download the build requirements (scikit-build-core, pybind11): no package index reachable"
    fi
    cat "$log"
    echo "python_suite: pip install failed"
    exit 1
  fi
  echo "python_suite: pip install took $((SECONDS - t0)) s"
  py="$venv/bin/python"
  unset PYTHONPATH
  where=$(cd / && "$py" -c 'import wcodec, os; print(os.path.dirname(wcodec.__file__))')
  case "$where" in
    "$venv"/*) echo "python_suite: wcodec imported from $where" ;;
    *) echo "python_suite: wcodec imported from $where, not from the venv"; exit 1 ;;
  esac
  # The build's own module is tested by the module suite; here the
  # installed package reads and writes the real files.
  suites=(test_checkpoint test_read.Errors)
else
  echo "usage: $0 module|pip PYTHON SRC BUILD" >&2
  exit 2
fi

cd "$src/python/tests" || exit 1
# What ran: the decoder path the module picked and the CPU's SIMD flags
# (a failure on another host is read against these).
"$py" -c 'import wcodec; print("python_suite: decoder path", wcodec.cpu_path())' 2>&1 | tail -n 3
echo "python_suite: CPU $(grep -m1 '^model name' /proc/cpuinfo | sed 's/.*: //'):" \
  "$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512bw|avx512_?vbmi2?)$' | tr '\n' ' ')"
"$py" -m unittest -v "${suites[@]}" 2>&1 | tee "$WCODEC_TEST_TMP/last-$mode.log"
rc=${PIPESTATUS[0]}
if [[ "$rc" -ne 0 ]]; then
  echo "python_suite: the suites exited $rc"
  for f in "${san_log:-/nonexistent}".*; do
    [[ -f "$f" ]] || continue
    echo "python_suite: sanitizer report $f:"
    head -n 60 "$f"
  done
fi
# Skips are part of the result: say them where ctest shows them.
grep -E "skipped '" "$WCODEC_TEST_TMP/last-$mode.log" | sed 's/^/python_suite: /'
exit "$rc"
