#!/usr/bin/env bash
# Prepares .dev/ (git-ignored through .git/info/exclude) for a GPU machine
# that has the CUDA toolkit and driver but not the Debian -dev packages or
# ../shared/data: the codec + CUDA binaries built here (FUSE off), the
# shared libraries they link, a subset of the real model files that fits
# the 64 MiB a call may carry (the small files whole, isnet ternary whole,
# the first tensors of the other isnet files), and bench/gpu_check.sh; the
# programs, libraries and package packed into .dev/bin.tar.xz.
# With a Python of the device's version here (WCODEC_DEVICE_PYTHON, default
# the first python3.12 on PATH or under pyenv: the device's python3, which
# holds torch, is 3.12), also the Python package built with CUDA for it
# (.dev/python) and its tests (.dev/pytests), so that gpu_check.sh runs
# python/tests/test_cuda.py there.
# Then, on the device: bash .dev/gpu_check.sh (carrying .dev).
set -euo pipefail
cd "$(dirname "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")")"
DATA=${WCODEC_DATA:-../shared/data}
PYDEV=""
for p in ${WCODEC_DEVICE_PYTHON:-} "$(command -v python3.12 || true)" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12; do
  # (a pyenv shim exists but fails when 3.12 is not the active version)
  if [[ -n "$p" && -x "$p" ]] && "$p" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
    PYDEV=$p
    break
  fi
done
pyargs=() pytarget=()
if [[ -n "$PYDEV" ]]; then
  pyargs=(-DWCODEC_BUILD_PYTHON=ON "-DPython3_EXECUTABLE=$PYDEV")
  pytarget=(wcodec_python)
else
  echo "gpu_bundle: no Python 3.12 here (set WCODEC_DEVICE_PYTHON): the Python package's GPU test is left out"
fi
# Without the CAWSF converter (FAISS, LAPACK, OpenBLAS: 50 MB of libraries
# the checks do not use).
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DWCODEC_BUILD_FUSE=OFF -DWCODEC_CUDA=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_faiss=ON "${pyargs[@]}" >/dev/null
ninja -C build-gpu wcodec test_gpu_decoder test_device_plan test_xxh3_hd gpu_layout_study "${pytarget[@]}"
if [[ -d .git ]]; then
  mkdir -p .git/info && (grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo /.dev/ >>.git/info/exclude)
else
  echo "gpu_bundle: a git worktree: .dev/ is not ignored here (it travels without carry; do not commit it)"
fi
rm -rf .dev && mkdir -p .dev/bin .dev/lib .dev/data
for b in wcodec tests/test_gpu_decoder tests/test_xxh3_hd bench/gpu_layout_study; do cp build-gpu/$b .dev/bin/ && strip .dev/bin/"$(basename $b)"; done
mods=()
if [[ ${#pytarget[@]} -gt 0 ]]; then
  mkdir -p .dev/python .dev/pytests
  cp -r build-gpu/python-pkg/wcodec .dev/python/
  strip .dev/python/wcodec/_wcodec*.so
  cp python/tests/*.py .dev/pytests/
  mods=(.dev/python/wcodec/_wcodec*.so)
fi
for l in $(ldd build-gpu/wcodec build-gpu/tests/test_gpu_decoder "${mods[@]}" | awk '/=> \//{print $3}' | sort -u); do
  case "$(basename "$l")" in libc.so*|libm.so*|libstdc++*|libgcc_s*) ;; *) cp -L "$l" .dev/lib/ ;; esac
done
for f in stories260K.bf16 stories260K.f32 stories260K.rtn-int8 stories260K.rtn-int4 stories260K.rtn-ternary \
         silero_vad_16k.bf16 silero_vad_16k.f32 isnet-medium.rtn-ternary; do
  cp "$DATA/$f.safetensors" .dev/data/
done
python3 scripts/safetensors_head.py "$DATA/isnet-medium.f16.safetensors" .dev/data/isnet-medium.f16.head.safetensors 12e6
python3 scripts/safetensors_head.py "$DATA/isnet-medium.rtn-int8.safetensors" .dev/data/isnet-medium.rtn-int8.head.safetensors 9e6
python3 scripts/safetensors_head.py "$DATA/isnet-medium.rtn-int4.safetensors" .dev/data/isnet-medium.rtn-int4.head.safetensors 7e6
# A real model converted to CAWSF (the converter needs FAISS and LAPACK,
# which build-gpu leaves out: the main build's tool makes it), for the GPU
# apply test and `cawsf apply --device cuda`.
if [[ -x build/wcodec ]] && build/wcodec cawsf convert --model "$DATA/stories260K.f32.safetensors" \
     --out .dev/data/stories260K.f32.cawsf --rank 16 --pq-k 64 >/dev/null 2>&1; then
  echo "gpu_bundle: stories260K.f32.cawsf converted"
else
  rm -f .dev/data/stories260K.f32.cawsf
  echo "gpu_bundle: no CAWSF file converted (build/wcodec missing or built without the converter)"
fi
cp bench/gpu_check.sh .dev/
# Programs and libraries packed (a call carries at most 64 MiB); gpu_check.sh unpacks them.
tar -C .dev -cf - bin lib $([[ -d .dev/python ]] && echo python) | xz -T0 -6 >.dev/bin.tar.xz
rm -rf .dev/bin .dev/lib .dev/python
du -sh .dev
