// codec/decompress/chunk_decode_simd.h — the AVX-512 decoders of
// model-coded chunks (chunk_decode_simd*.cpp) and the rules for which
// chunks they decode together.
//
// Thread-safety: pure functions over their arguments and the caller's
// scratch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "chunk_decode.h"

namespace wcodec {

// Vector (AVX-512) decoders of a model-coded chunk: the same result as the
// reference decoders (decode_float_chunk; decode_int_residuals followed by
// int_finish_chunk) into out. Return 1 on success, 0 for a malformed chunk,
// -1 when this CPU or model configuration is not handled (the caller then
// uses the reference decoder). WCODEC_NO_SIMD=1 in the environment disables
// them. lm: scratch of simd_lane_major_bytes(cv) bytes; res, tmp_tile as for
// int_finish_chunk.
size_t simd_lane_major_bytes(const ChunkView& cv);
int decode_float_chunk_simd(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                            const uint8_t* raw, uint64_t raw_len, uint8_t* out, uint8_t* lm,
                            bool tail = false);
// One of the chunks decode_group_simd decodes together: its tile map (int;
// null for none), stream, raw bit section (float), output and lane-major
// scratch (simd_lane_major_bytes).
struct GroupSide {
  const uint8_t* map;
  const uint8_t* rans;
  uint32_t rans_len;
  const uint8_t* raw;
  uint64_t raw_len;
  bool tail;
  uint8_t* out;
  uint8_t* lm;
  uint64_t col0;  // the chunk's first tensor column (kernel contexts' phases, column classes)
  uint64_t row0;  // the chunk's first tensor row (row classes)
};
// n (2..kMaxChunkGroup) chunks with the same rectangle size (cv: h, w)
// decoded with their lanes' state chains interleaved, chunk i with
// models[i]: 1- and 2-byte floats (models that share a step loop, see
// models_group), and int8 / uint8 / 4-bit codes of one model with activity
// or kernel contexts, no tile map and no zero points (model_groups; models
// with scale classes group only with themselves). 1: all decoded; 0: a
// stream is malformed (decode each alone to learn which); -1: no grouped
// loop for these models or geometry.
int decode_group_simd(const ModelView* models, const ChunkView& cv, const GroupSide* sides, int n);
// Whether a float model's sign / high mantissa symbols have contexts.
inline bool float_sm_contexts(const FloatParams& p) { return p.nm > 1 || p.sign_ctx; }
// Whether chunks of float models a and b can share a step loop: one element
// size, exponent context mode and sign / mantissa context form (their tables
// and other parameters may differ).
inline bool float_loop_compatible(const FloatParams& a, const FloatParams& b) {
  return a.elem_bytes == b.elem_bytes && a.emode == b.emode && a.sign_ctx == b.sign_ctx &&
         float_sm_contexts(a) == float_sm_contexts(b);
}
// The activity form of an int model's step loop: 0 none (nb = 1), 1 one
// 128-entry table, 2 two tables (thresholds < 256), 3 compares.
inline int int_act_mode(const IntParams& p) {
  const uint32_t nthr = p.nb > 1 ? p.nb - 1u : 0u;
  uint32_t max_thr = 0;
  for (uint32_t i = 0; i < nthr; ++i) max_thr = p.thr[i] > max_thr ? p.thr[i] : max_thr;
  return nthr == 0 ? 0 : (max_thr < 128 ? 1 : (max_thr < 256 ? 2 : 3));
}
// Whether chunks of int8 / uint8 models a and b can share a step loop:
// activity contexts or kernel contexts with one scale class, the same code
// type, extra neighbour (kernel shape) and activity form (tables and
// thresholds may differ).
inline bool int_loop_compatible(const IntParams& a, const IntParams& b) {
  return a.sub == b.sub && (a.nbr_mode == 0 || a.nbr_mode == 3) && a.nbr_mode == b.nbr_mode && a.ns == 1 &&
         b.ns == 1 && a.off_a == b.off_a && (a.nbr_mode == 0 || a.period == b.period) &&
         int_act_mode(a) == int_act_mode(b);
}
int decode_int_chunk_simd(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
                          uint32_t rans_len, uint8_t* out, int32_t* res, int32_t* tmp_tile, uint8_t* lm);

}  // namespace wcodec
