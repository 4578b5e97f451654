// codec/decompress/chunk_decode_simd_none.cpp — the entry points of
// chunk_decode_simd.h where the AVX-512 decoders are not built (CPUs other
// than x86-64; codec/CMakeLists.txt picks this file or chunk_decode_simd*.cpp).
// On the scalar path the portable fast decoders (chunk_decode_fast.h) take
// the chunks they handle; the rest is declined (-1), so callers take the
// reference decoders. The
// Highway float, ternary and int decoders of the avx2 path
// (chunk_decode_hwy.h) are x86-64 code for now too; their entry points
// decline here as well.
// Thread-safety: pure functions.
#include "chunk_decode_fast.h"
#include "chunk_decode_hwy.h"
#include "chunk_decode_simd.h"
#include "wcodec/cpu.h"

namespace wcodec {

// The lane-major scratch of the fast decoders.
size_t simd_lane_major_bytes(const ChunkView& cv) { return fast_lane_major_bytes(cv); }

int decode_float_chunk_simd(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                            const uint8_t* raw, uint64_t raw_len, uint8_t* out, uint8_t* lm, bool tail) {
  if (cpu_path() == CpuPath::kScalar) return decode_float_chunk_fast(m, cv, rans, rans_len, raw, raw_len, out, lm, tail);
  return -1;
}

int decode_float_chunk_hwy(const ModelView&, const ChunkView&, const uint8_t*, uint32_t, const uint8_t*, uint64_t,
                           uint8_t*, uint8_t*, bool) {
  return -1;
}

int decode_tern_chunk_hwy(const ModelView&, const ChunkView&, const uint8_t*, const uint8_t*, uint32_t, uint8_t*,
                          uint8_t*) {
  return -1;
}
int decode_float_group_hwy(const ModelView*, const ChunkView&, const GroupSide*, int) { return -1; }
int decode_int_chunk_hwy(const ModelView&, const ChunkView&, const uint8_t*, const uint8_t*, uint32_t, uint8_t*,
                         uint8_t*) {
  return -1;
}

int decode_int_group_hwy(const ModelView*, const ChunkView&, const GroupSide*, int) { return -1; }

int decode_group_simd(const ModelView*, const ChunkView&, const GroupSide*, int) { return -1; }

int decode_int_chunk_simd(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
                          uint32_t rans_len, uint8_t* out, int32_t* res, int32_t* tmp_tile, uint8_t* lm) {
  if (cpu_path() == CpuPath::kScalar)
    return decode_int_chunk_fast(m, cv, tile_map, rans, rans_len, out, res, tmp_tile, lm);
  return -1;
}

}  // namespace wcodec
