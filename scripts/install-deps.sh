#!/usr/bin/env bash
# Installs the Debian 12 packages needed to build, test and package wcodecfs.
# Idempotent: when every package is already installed it does nothing, so
# re-runs take well under a second. Runs apt-get as root, or through sudo.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libzstd-dev liblz4-dev libxxhash-dev nlohmann-json3-dev libhwy-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev
  liblapacke-dev libopenblas-dev libfaiss-dev
  libspdlog-dev libfmt-dev libssl-dev zlib1g-dev libfuse3-dev fuse3
  zstd lz4 python3 python3-pip python3-venv python3-dev pybind11-dev
  squashfs-tools squashfuse libsentencepiece-dev ccache
)

# The mount tests load models with the Python safetensors package (numpy
# framework), as users do; the Python package's suites (python/tests) compare
# against safetensors and load a Llama directory with torch + transformers;
# llama.cpp's convert_hf_to_gguf.py (the GGUF test files,
# scripts/make_gguf_files.sh, and the GGUF view's tests) imports torch and
# reads the test tokenizer with sentencepiece and protobuf. Tests skip
# visibly when these cannot be installed. (torch from the package index
# brings its CUDA libraries: about a minute here.)
pip_install() {
  python3 -m pip install --quiet "$@" >/dev/null 2>&1 ||
    python3 -m pip install --quiet --break-system-packages "$@" >/dev/null 2>&1
}
install_python_packages() {
  if ! python3 -c 'import safetensors, numpy' >/dev/null 2>&1; then
    pip_install safetensors numpy ||
      echo "install-deps: could not install the Python safetensors/numpy packages (mount tests will skip that part)"
  fi
  if ! python3 -c 'import torch, transformers, sentencepiece, google.protobuf' >/dev/null 2>&1; then
    pip_install torch transformers sentencepiece protobuf ||
      echo "install-deps: could not install the Python torch/transformers/sentencepiece/protobuf packages (the tests that need them skip)"
  fi
  # The gguf package's distribution metadata: transformers (5.x) reads its
  # version before it loads a GGUF tokenizer (bench/make_smollm2_hf.py) and
  # fails on llama.cpp's gguf-py, which the scripts put on PYTHONPATH but
  # which has no metadata.
  if ! python3 -c 'import importlib.metadata as m; m.version("gguf")' >/dev/null 2>&1; then
    pip_install gguf ||
      echo "install-deps: could not install the Python gguf package (the SmolLM2 directory is then not made)"
  fi
}

# The native (or architecture-independent) package: with another
# architecture added (scripts/test_aarch64.sh adds arm64), a library may be
# known for both.
arch=$(dpkg --print-architecture)
missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Architecture} ${db:Status-Status}\n' "$pkg" 2>/dev/null |
             awk -v a="$arch" '$1 == a || $1 == "all" { print $2; exit }' || true)
  if [[ "$status" != "installed" ]]; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  install_python_packages
  exit 0
fi

echo "install-deps: missing: ${missing[*]}"

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-deps: not root and sudo is not available; install these as root: ${missing[*]}" >&2
    exit 1
  fi
  SUDO=(sudo -n)
fi

export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${PACKAGES[@]}"
install_python_packages
echo "install-deps: done"
