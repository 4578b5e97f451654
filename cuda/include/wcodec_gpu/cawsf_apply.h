// cuda/include/wcodec_gpu/cawsf_apply.h — y = W·x on the GPU from a CAWSF
// matrix's decomposed components (`wcodec cawsf apply --device cuda`),
// never forming W: L and a dense D (version 1) with cuBLAS SGEMV (factored L
// of version 2: t = Bᵀ·x, then y = A·t), the diagonal D, the
// product-quantized residues R and the sparse outliers S with kernels of
// this library. Host C++ API; no CUDA headers needed by users.
//
// cuBLAS is loaded at run time (libcublas.so.13, .12 or libcublas.so), so
// the `wcodec` tool keeps running on machines without it and says why it
// cannot apply on the GPU there.
//
// The sums run in float32 in another order than the CPU's
// apply_components (cuBLAS's blocking, atomic adds for R and S), so results
// agree to rounding, not bit for bit.
// Thread-safety: calls are independent; each creates its own handle.
#pragma once

#include <string>
#include <vector>

#include "wcodec/cawsf.h"
#include "wcodec/status.h"

namespace wcodec::gpu {

struct ApplyInfo {
  std::string device;  // GPU name
  std::string blas;    // the cuBLAS library loaded
  double upload_s = 0, compute_s = 0, download_s = 0;
};

// y = W·x (y: c.rows values). REQUIRES x.size() == c.cols. Fails with a
// clear message without a device or cuBLAS, or on a CUDA error.
Result<std::vector<float>> apply_components_cuda(const cawsf::Components& c, const std::vector<float>& x,
                                                 ApplyInfo* info = nullptr, int device = 0);

}  // namespace wcodec::gpu
