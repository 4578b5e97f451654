// codec/decompress/chunk_decode_krow.h — decoders of kernel-row chunks (int
// nbr_mode 4, format 2.10; chunk_model.h): the portable one
// (chunk_decode_krow.cpp) for every path, and the Highway one
// (chunk_decode_hwy_krow.cpp) for the avx2, avx512 and neon paths.
//
// Each returns 1 decoded (the same bytes as decode_int_residuals +
// int_finish_chunk), 0 malformed (where those reject), -1 not handled (the
// view lacks the small-alphabet tables, or a geometry the reader refuses).
// Thread-safety: pure functions over their arguments.
#pragma once

#include <cstdint>
#include <cstring>

#include "chunk_decode.h"

namespace wcodec {

// A step's 32 kernels as its 72 output bytes: kernel l's 18 bits (bits[l],
// zero for the lanes without a kernel) at bit 18 l, four kernels (9 bytes)
// at a time. Writes buf[0, 72) and nothing past it (krow_store_step packs in
// place on that).
inline void krow_pack_step(const uint32_t* bits, uint8_t* buf) {
  for (uint32_t q = 0; q < 8; ++q) {
    const uint64_t b0 = bits[4 * q], b1 = bits[4 * q + 1], b2 = bits[4 * q + 2], b3 = bits[4 * q + 3];
    const uint64_t v = b0 | b1 << 18 | b2 << 36 | b3 << 54;
    std::memcpy(buf + 9 * q, &v, 8);
    buf[9 * q + 8] = static_cast<uint8_t>(b3 >> 10);
  }
}

// The step at output byte `at` of out_len: packed in place where the 72
// bytes fit (every step but a chunk's last; a copy of variable length cost
// as much as the packing), else through a buffer, cut at out_len.
inline void krow_store_step(const uint32_t* bits, uint8_t* out, uint64_t at, uint64_t out_len) {
  if (out_len - at >= 72) {
    krow_pack_step(bits, out + at);
    return;
  }
  uint8_t buf[80];
  krow_pack_step(bits, buf);
  std::memcpy(out + at, buf, static_cast<size_t>(out_len - at));
}

int decode_krow_chunk_fast(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                           uint8_t* out);

// The Highway decoder (AVX2 instance on x86-64, NEON on aarch64; -1 where
// this build has neither).
int decode_krow_chunk_hwy(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                          uint8_t* out);

// decode_group_simd's contract (chunk_decode_simd.h) for kernel-row chunks:
// n (2 or 3) chunks of one size whose models have entry tables
// (ModelView::krow_ent), decoded by the Highway decoder with their state
// chains interleaved. 1 all decoded, 0 a stream is malformed (decode each
// alone to learn which), -1 not handled here (the scalar path, a model
// without entry tables, or a build without the Highway decoder).
struct GroupSide;
int decode_krow_group_hwy(const ModelView* ms, const ChunkView& cv, const GroupSide* sides, int n);
int decode_krow_group(const ModelView* ms, const ChunkView& cv, const GroupSide* sides, int n);

// The decoder of the CPU path in use (include/wcodec/cpu.h): the Highway
// one on the vector paths where this build has it, else the portable one.
int decode_krow_chunk(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                      uint8_t* out);

}  // namespace wcodec
