# scripts/ccache_env.sh — sourced by the build scripts: compiles through
# ccache when it is installed, with its cache outside the clone
# ($WCODEC_CACHE/ccache, default ${XDG_CACHE_HOME:-~/.cache}/wcodecfs/ccache, unless
# CCACHE_DIR is set), so
# that a machine that keeps its home directory rebuilds only what changed,
# and the release build, the Python package's build (pip) and later clones
# share objects. Paths are hashed relative to the clone (CCACHE_BASEDIR), so
# another clone or build directory hits the same entries.
# Sets CCACHE_LAUNCHER_ARGS (CMake arguments; empty without ccache).
# Set WCODEC_CCACHE=0 to build without it.
CCACHE_LAUNCHER_ARGS=()
if [[ "${WCODEC_CCACHE:-1}" != 0 ]] && command -v ccache >/dev/null 2>&1; then
  export CCACHE_DIR=${CCACHE_DIR:-${WCODEC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wcodecfs}/ccache}
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
  export CCACHE_NOHASHDIR=1
  export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-6G}
  mkdir -p "$CCACHE_DIR"
  CCACHE_LAUNCHER_ARGS=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
