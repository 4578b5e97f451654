// codec/common/simd_env.cpp — see simd_env.h.
#include "simd_env.h"

#include "wcodec/cpu.h"

namespace wcodec {

bool simd_disabled_by_env() {
  static const bool off = cpu_path_choice().forced && cpu_path() == CpuPath::kScalar;
  return off;
}

bool simd_enabled() {
  static const bool on = cpu_path() == CpuPath::kAvx512;
  return on;
}

bool vector_gathers() {
#if defined(__x86_64__)
  static const bool on = gather_form() == GatherForm::kVector;
  return on;
#else
  return false;
#endif
}

bool vector_decoder_available() {
  static const bool on =
      cpu_path() == CpuPath::kAvx512 || cpu_path() == CpuPath::kAvx2 || cpu_path() == CpuPath::kNeon;
  return on;
}

}  // namespace wcodec
