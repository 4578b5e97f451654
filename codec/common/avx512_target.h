// codec/common/avx512_target.h — the function attributes of the AVX-512
// code (the chunk decoders and the rANS encoder's group pass): they are
// compiled for AVX-512 with target attributes, not per-file flags, and run
// only where simd_enabled() says the CPU has the features.
#pragma once

// GCC 12's AVX-512 headers build some results from _mm512_undefined_*(),
// which -Wmaybe-uninitialized reports at every inlined call site. Every file
// with AVX-512 code includes this header, so the warning is off in them
// (from here to the end of the file; clang does not report it).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define WC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vbmi2,popcnt")))
#define WC_INLINE __attribute__((always_inline)) inline
