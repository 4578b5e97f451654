// codec/decompress/chunk_decode_simd_none.cpp — the entry points of
// chunk_decode_simd.h where the AVX-512 decoders are not built (CPUs other
// than x86-64; codec/CMakeLists.txt picks this file or chunk_decode_simd*.cpp).
// On the neon path (aarch64, include/wcodec/cpu.h) they route to the NEON
// instances of the Highway decoders (chunk_decode_hwy.h), as the x86 entry
// points do for the avx2 path; otherwise, and for what those decline, they
// return -1 and callers take the reference decoders.
// Thread-safety: pure functions.
#include "chunk_decode_hwy.h"
#include "chunk_decode_simd.h"
#include "wcodec/cpu.h"

namespace wcodec {

size_t simd_lane_major_bytes(const ChunkView& cv) {
  // As on x86-64 (chunk_decode_simd.cpp): steps <= h * w / 32 + h + w, 16
  // steps of padding for the transposition's last block, 4 bytes per
  // element.
  const uint64_t steps = uint64_t{cv.h} * cv.w / kLanes + cv.h + cv.w + 1;
  return static_cast<size_t>((steps + 16) * kLanes * 4 + 64);
}

int decode_float_chunk_simd(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                            const uint8_t* raw, uint64_t raw_len, uint8_t* out, uint8_t* lm, bool tail) {
  if (cpu_path() == CpuPath::kNeon) return decode_float_chunk_hwy(m, cv, rans, rans_len, raw, raw_len, out, lm, tail);
  return -1;
}

int decode_group_simd(const ModelView* ms, const ChunkView& cv, const GroupSide* s, int n) {
  if (cpu_path() == CpuPath::kNeon) {
    if (ms[0].kind == ModelKind::kInt) return decode_int_group_hwy(ms, cv, s, n);
    if (ms[0].kind == ModelKind::kFloat) return decode_float_group_hwy(ms, cv, s, n);
  }
  return -1;
}

int decode_int_chunk_simd(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
                          uint32_t rans_len, uint8_t* out, int32_t*, int32_t*, uint8_t* lm) {
  if (cpu_path() == CpuPath::kNeon && m.kind == ModelKind::kInt) {
    const int r = m.ip.sub == kIntTernary ? decode_tern_chunk_hwy(m, cv, tile_map, rans, rans_len, out, lm)
                                          : decode_int_chunk_hwy(m, cv, tile_map, rans, rans_len, out, lm);
    if (r >= 0) return r;
  }
  return -1;
}

}  // namespace wcodec
