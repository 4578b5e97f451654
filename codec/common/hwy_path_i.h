// codec/common/hwy_path_i.h — which Highway instance of the Highway
// decoders and encoder pass (chunk_decode_hwy_*.cpp, rans_encode_hwy.cpp)
// serves this build's Highway decoder path: N_AVX2 for the avx2 path on
// x86-64, N_NEON for the neon path on aarch64 (include/wcodec/cpu.h).
// Included in those files' HWY_ONCE sections, after foreach_target.h has
// set HWY_TARGETS; WCODEC_HWY_PATH is left undefined where neither target
// is compiled (the entry points then decline).
// Thread-safety: macros only.
#pragma once

#include <hwy/highway.h>

#if HWY_ARCH_X86 && (HWY_TARGETS & HWY_AVX2)
#define WCODEC_HWY_PATH N_AVX2
#elif HWY_ARCH_ARM_A64 && (HWY_TARGETS & HWY_NEON)
#define WCODEC_HWY_PATH N_NEON
#endif

#include "wcodec/cpu.h"

namespace wcodec {
// Whether the CPU's decoder path runs that instance: the avx2 and avx512
// paths (the vector helpers that only the avx2 path's decoders have are
// shared by the avx512 path) and the neon path.
inline bool hwy_path_runs() {
  const CpuPath p = cpu_path();
  return p == CpuPath::kAvx2 || p == CpuPath::kAvx512 || p == CpuPath::kNeon;
}
}  // namespace wcodec

// &WCODEC_HWY_PATH::fn where the CPU runs that instance, else null (and
// null in builds without it): the getters of the vector helpers.
#if defined(WCODEC_HWY_PATH)
#define WCODEC_HWY_PATH_FN(fn) (::wcodec::hwy_path_runs() ? &WCODEC_HWY_PATH::fn : nullptr)
#else
#define WCODEC_HWY_PATH_FN(fn) nullptr
#endif
