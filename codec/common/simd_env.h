// codec/common/simd_env.h — whether the vector code paths may run, from the
// process's decoder path (include/wcodec/cpu.h: the CPU, WCODEC_CPU and its
// alias WCODEC_NO_SIMD=1). The answers are computed once.
//
// Thread-safety: safe from any thread (function-local statics).
#pragma once

namespace wcodec {

// Whether the scalar path was forced (WCODEC_CPU=scalar or WCODEC_NO_SIMD
// set, non-empty and not "0"): every vector path off, the AVX-512 and AVX2
// decoders, the AVX-512 rANS encoder, the encoder's AVX2 row loops.
bool simd_disabled_by_env();
// Whether a vector decoder path (avx512, avx2 or neon) is in use: the model
// tables are then built in their flattened vector form, and the rANS
// encoder may take its Highway (AVX2 or NEON) pass where the AVX-512 one is
// off.
bool vector_decoder_available();
// Whether the avx512 path is in use (AVX-512 with BW, VL, DQ, VBMI and
// VBMI2): the AVX-512 decoders' and the vector rANS encoder's check.
bool simd_enabled();

// Whether the x86 vector decoders (the Highway decoders' AVX2 instance and
// the AVX-512 loops) read their tables with vpgatherdd (gather_form(),
// include/wcodec/cpu.h) rather than scalar loads; asked once per decode
// call, which then runs the loop compiled for that form. Always false
// outside x86-64.
bool vector_gathers();

}  // namespace wcodec
