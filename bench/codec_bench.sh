#!/usr/bin/env bash
# Prints the codec comparison tables (wcodec vs zstd -3, zstd -19, lz4:
# ratio, encode and decode MB/s per core, order-0 entropy line) for every
# model file in ../shared/data (or the files given), measured in one run.
#   bash bench/codec_bench.sh [FILE.safetensors...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ -x build/wcodec ]] || bash scripts/build.sh release
if [[ $# -eq 0 ]]; then
  set -- "${WCODEC_DATA:-../shared/data}"/*.safetensors
fi
exec build/wcodec bench "$@"
