// codec/common/simd_env.cpp — see simd_env.h.
#include "simd_env.h"

#include <cstdlib>

namespace wcodec {

bool simd_disabled_by_env() {
  static const bool off = [] {
    const char* e = std::getenv("WCODEC_NO_SIMD");
    return e && *e && *e != '0';
  }();
  return off;
}

bool simd_enabled() {
  static const bool on = [] {
    if (simd_disabled_by_env()) return false;
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vbmi2");
#else
    return false;  // the vector code is AVX-512 (x86-64 only)
#endif
  }();
  return on;
}

bool vector_decoder_available() { return simd_enabled(); }

}  // namespace wcodec
