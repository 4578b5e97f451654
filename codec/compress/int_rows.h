// codec/compress/int_rows.h — contexts of a run of int elements in one lane row,
// for the encoder's passes over whole tensors (statistics, chunk encoding,
// shared-model statistics).
//
// The encoder knows every residual before it codes any, so the contexts of a
// row's interior elements (those past the first few columns of their lane
// rectangle, where every left neighbour a mode reads exists) do not depend
// on each other and are computed eight at a time (AVX2). They are the values
// int_ctx (chunk_model.h) gives at those positions; the scalar loop below is
// the fallback where AVX2 is missing or WCODEC_NO_SIMD is set, and the
// reference the tests compare the vector loop against.
#pragma once

#include <cstdint>

#include "chunk_model.h"

namespace wcodec {

struct IntRowArgs {
  const IntParams* p;
  const IntLuts* L;
  const int32_t* row;  // the element's row of residuals (chunk columns)
  const int32_t* up;   // the row above inside the lane rectangle, or null
  const uint8_t* ccs;  // column scale values by chunk column, or null (use_cc off)
  const uint32_t* kp;  // column phases by chunk column (nbr_modes 2, 3)
  uint32_t rowpart;    // the row's scale value (0 when use_rc is off)
};

// Contexts of columns [c_begin, c_end) of a lane row into out[0 ..
// c_end - c_begin). Requires c_begin - c0 >= the mode's reach (see
// int_row_reach) for the lane rectangle starting at column c0.
void int_row_contexts(const IntRowArgs& a, uint32_t c_begin, uint32_t c_end, uint32_t* out);

// The scalar form (always available; the tests' reference).
void int_row_contexts_scalar(const IntRowArgs& a, uint32_t c_begin, uint32_t c_end, uint32_t* out);

// keys[i] = ctx[i] * nsym + token of v[i] (the zig-zag value below esc, else
// esc + the bit width of its excess: make_token's token), for n elements.
// Returns whether any token is an escape (zig-zag value >= esc).
// REQUIRES: every key fits 16 bits.
bool int_row_keys(const uint32_t* ctx, const int32_t* v, uint32_t n, uint32_t esc, uint32_t nsym, uint16_t* keys);

// |v[i]| of a row added to col[i] (32-bit sums), *max_abs raised to the
// largest; returns the row's sum.
uint64_t int_abs_sums(const int32_t* v, uint64_t n, uint32_t* col, uint32_t* max_abs);

// Columns from the start of a lane row after which int_row_contexts applies.
inline uint32_t int_row_reach(const IntParams& p) {
  const uint32_t oa = p.off_a, ob = p.nbr_mode == 1 ? p.off_b : 0u;
  if (p.nbr_mode >= 2) return oa > 1 ? oa : 1u;
  uint32_t r = 2;
  if (oa > r) r = oa;
  if (ob > r) r = ob;
  return r;
}

}  // namespace wcodec
