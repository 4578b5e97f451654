// codec/common/simd_env.h — whether the vector code paths may run: the
// WCODEC_NO_SIMD switch and the AVX-512 features the vector decoders and
// the vector rANS encoder need. Both answers are computed once.
//
// Thread-safety: safe from any thread (function-local statics).
#pragma once

namespace wcodec {

// Whether WCODEC_NO_SIMD (set, non-empty and not "0") turns every vector
// path off: the AVX-512 decoders and rANS encoder, the encoder's AVX2 row
// loops. Read once.
bool simd_disabled_by_env();
// Whether the vector decoders run on this CPU (AVX-512 with BW, VL, DQ,
// VBMI and VBMI2, and not turned off by WCODEC_NO_SIMD).
bool vector_decoder_available();
// The same without the name of the decoders: AVX-512 with BW, VL, DQ, VBMI
// and VBMI2, and WCODEC_NO_SIMD not set (the vector rANS encoder's check).
bool simd_enabled();

}  // namespace wcodec
