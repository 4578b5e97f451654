// codec/decompress/chunk_decode_simd_none.cpp — the entry points of
// chunk_decode_simd.h where the AVX-512 decoders are not built (CPUs other
// than x86-64; codec/CMakeLists.txt picks this file or chunk_decode_simd*.cpp).
// Every chunk is declined (-1), so callers take the reference decoders. The
// Highway float, ternary and int decoders of the avx2 path
// (chunk_decode_hwy.h) are x86-64 code for now too; their entry points
// decline here as well.
// Thread-safety: pure functions.
#include "chunk_decode_hwy.h"
#include "chunk_decode_simd.h"

namespace wcodec {

// No vector decoder, so no lane-major scratch.
size_t simd_lane_major_bytes(const ChunkView&) { return 0; }

int decode_float_chunk_simd(const ModelView&, const ChunkView&, const uint8_t*, uint32_t, const uint8_t*, uint64_t,
                            uint8_t*, uint8_t*, bool) {
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

int decode_int_chunk_simd(const ModelView&, const ChunkView&, const uint8_t*, const uint8_t*, uint32_t, uint8_t*,
                          int32_t*, int32_t*, uint8_t*) {
  return -1;
}

}  // namespace wcodec
