#!/usr/bin/env bash
# Runs on a GPU machine from a folder made by scripts/gpu_bundle.sh (in the
# repository root, .dev/ beside it): the GPU tests, the GPU benchmark (every
# file, then a 4 GB synthetic batch per kind of model), a decode into device
# memory compared with the original, compute-sanitizer's memcheck and
# racecheck over the edge cases, the consecutive-lane layout study
# (bench/gpu_layout_study.cu), and (when the bundle holds the Python
# package, .dev/python) python/tests/test_cuda.py with the device's python3
# and torch: every tensor of every bundled file read with device="cuda"
# (whole, sliced, load_file) equals the CPU's byte for byte, decoded by the
# GPU decoder, and a damaged chunk raises. Writes gpu_check.log to $OUT (or
# /tmp).
set -uo pipefail
R=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
if [[ -f "$R/bin.tar.xz" && ! -d "$R/bin" ]]; then
  tar -C "$R" -xJf "$R/bin.tar.xz" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$R/bin.tar.xz" "$R"
fi
# cuBLAS (cawsf apply) is loaded at run time from the device's toolkit.
export LD_LIBRARY_PATH=$R/lib:/usr/local/cuda/lib64 WCODEC_DATA=$R/data
B=$R/bin D=$R/data W=$(mktemp -d)
exec > >(tee "${OUT:-/tmp}/gpu_check.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
nvcc --version 2>/dev/null | tail -1; ls /usr/local/cuda/lib64/libcublas.so* 2>/dev/null | head -3
for f in "$D"/*.safetensors; do
  "$B"/wcodec encode -j "$(nproc)" "$f" "$W/$(basename "$f" .safetensors).wcodec" >/dev/null || echo "encode failed: $f"
done
echo "== GPU tests (t=${SECONDS}s)"
timeout 300 "$B"/test_gpu_decoder >"${OUT:-/tmp}/test_gpu_decoder.log" 2>&1
echo "test_gpu_decoder exit $?"
grep -E -A6 "Failure" "${OUT:-/tmp}/test_gpu_decoder.log" | head -60
grep -E "PASSED|FAILED|skip|did not run|CAWSF apply" "${OUT:-/tmp}/test_gpu_decoder.log"
timeout 60 "$B"/test_xxh3_hd 2>&1 | tail -1
SYN_GB=8
[[ -n "${GPU_CHECK_QUICK:-}" ]] && SYN_GB=2
echo "== every file, then all files repeated into a synthetic batch (t=${SECONDS}s)"
timeout 200 "$B"/wcodec bench --device cuda -j "$(nproc)" "$W"/*.wcodec --synthetic-gb "$SYN_GB"
echo "== decoders side by side (WCODEC_GPU_PATHS: 7 the default, 23 the default with warps taking chunks alone, 15 with starts tables in shared memory, 5 direct float with slot tables, 0 grid decoders only), 2 GB each (t=${SECONDS}s)"
for f in isnet-medium.f16.head stories260K.bf16 silero_vad_16k.f32 isnet-medium.rtn-int8.head isnet-medium.rtn-int4.head \
         isnet-medium.rtn-ternary stories260K.rtn-ternary; do
  case $f in *rtn*) variants="7 23 0" ;; *) variants="7 23 15 5 0" ;; esac
  for v in $variants; do
    echo "$f (paths $v):"
    WCODEC_GPU_PATHS=$v timeout 60 "$B"/wcodec bench --device cuda -j "$(nproc)" "$W/$f.wcodec" --synthetic-gb 2 | grep "^synthetic (all"
  done
done
echo "== the consecutive-lane layout study (bench/gpu_layout_study.cu), 4 GB batches (t=${SECONDS}s)"
timeout 150 "$B"/gpu_layout_study --gb 4 --reps 5 "$D"/isnet-medium.f16.head.safetensors "$D"/stories260K.bf16.safetensors \
  "$D"/silero_vad_16k.f32.safetensors "$D"/stories260K.f32.safetensors "$D"/isnet-medium.rtn-int8.head.safetensors \
  "$D"/isnet-medium.rtn-int4.head.safetensors "$D"/isnet-medium.rtn-ternary.safetensors
echo "== per kind of model: 4 GB synthetic batch (t=${SECONDS}s)"
[[ -n "${GPU_CHECK_QUICK:-}" ]] && echo "(GPU_CHECK_QUICK: skipped)"
[[ -n "${GPU_CHECK_QUICK:-}" ]] || for f in isnet-medium.f16.head isnet-medium.rtn-int8.head isnet-medium.rtn-int4.head isnet-medium.rtn-ternary \
         stories260K.bf16 silero_vad_16k.f32; do
  echo "$f:"
  timeout 60 "$B"/wcodec bench --device cuda -j "$(nproc)" "$W/$f.wcodec" --synthetic-gb 4 | grep "^synthetic"
done
echo "== cawsf apply --device cuda (cuBLAS), against the CPU (t=${SECONDS}s)"
for f in "$D"/*.cawsf; do
  [[ -f "$f" ]] || continue
  for scope in 0 2 8; do
    "$B"/wcodec cawsf apply "$f" --scope $scope --device cuda | head -4
    "$B"/wcodec cawsf apply "$f" --scope $scope | head -4
  done
done
echo "== decode --device cuda (t=${SECONDS}s)"
timeout 60 "$B"/wcodec decode --device cuda "$W/isnet-medium.rtn-int8.head.wcodec" "$W/out" &&
  cmp "$W/out" "$D/isnet-medium.rtn-int8.head.safetensors" && echo "decode --device cuda: equal to the original"
echo "== compute-sanitizer (t=${SECONDS}s)"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$B"/test_gpu_decoder --gtest_filter='*EdgeCases*:*Damaged*' 2>&1 | tail -1
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 "$B"/test_gpu_decoder --gtest_filter='*EdgeCases*' 2>&1 | tail -1
if [[ -d "$R/python/wcodec" ]]; then
  echo "== Python package: device=\"cuda\" (test_cuda) (t=${SECONDS}s)"
  (cd "$R/pytests" && PYTHONPATH="$R/python" WCODEC_DATA_DIR="$D" WCODEC_TEST_TMP="$W/py" WCODEC_TEST_CACHE="$W/pycache" \
     timeout 300 "${PYTHON:-python3}" -m unittest -v test_cuda 2>&1)
else
  echo "== Python package: not in the bundle (no Python 3.12 where it was made)"
fi
echo "== done (t=${SECONDS}s)"
rm -rf "$W"
