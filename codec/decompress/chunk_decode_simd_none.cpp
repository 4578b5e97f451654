// codec/decompress/chunk_decode_simd_none.cpp — the entry points of
// chunk_decode_simd.h where the AVX-512 decoders are not built (CPUs other
// than x86-64; codec/CMakeLists.txt picks this file or chunk_decode_simd*.cpp).
// On the neon path (aarch64, include/wcodec/cpu.h) they route to the NEON
// instances of the Highway decoders (chunk_decode_hwy.h), as the x86 entry
// points do for the avx2 path; on the scalar path the portable fast
// decoders (chunk_decode_fast.h) take the chunks they handle. What those
// decline gets -1, and callers take the reference decoders.
// Thread-safety: pure functions.
#include "chunk_decode_fast.h"
#include "chunk_decode_hwy.h"
#include "chunk_decode_krow.h"
#include "chunk_decode_simd.h"
#include "wcodec/cpu.h"

namespace wcodec {

// The lane-major scratch of the Highway and the fast decoders (the same
// bound as on x86-64: steps <= h * w / 32 + h + w, 16 steps of padding, 4
// bytes per element).
size_t simd_lane_major_bytes(const ChunkView& cv) { return fast_lane_major_bytes(cv); }

int decode_float_chunk_simd(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                            const uint8_t* raw, uint64_t raw_len, uint8_t* out, uint8_t* lm, bool tail) {
  if (cpu_path() == CpuPath::kNeon) return decode_float_chunk_hwy(m, cv, rans, rans_len, raw, raw_len, out, lm, tail);
  if (cpu_path() == CpuPath::kScalar) return decode_float_chunk_fast(m, cv, rans, rans_len, raw, raw_len, out, lm, tail);
  return -1;
}

int decode_group_simd(const ModelView* ms, const ChunkView& cv, const GroupSide* s, int n) {
  // Kernel-row chunks (format 2.10): chunk_decode_krow.h.
  if (ms[0].kind == ModelKind::kInt && ms[0].ip.nbr_mode == 4) return decode_krow_group(ms, cv, s, n);
  if (cpu_path() == CpuPath::kNeon) {
    if (ms[0].kind == ModelKind::kInt) return decode_int_group_hwy(ms, cv, s, n);
    if (ms[0].kind == ModelKind::kFloat) return decode_float_group_hwy(ms, cv, s, n);
  }
  return -1;
}

int decode_int_chunk_simd(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
                          uint32_t rans_len, uint8_t* out, int32_t* res, int32_t* tmp_tile, uint8_t* lm) {
  // Kernel-row chunks (format 2.10) on every path: chunk_decode_krow.h.
  if (m.kind == ModelKind::kInt && m.ip.nbr_mode == 4) return decode_krow_chunk(m, cv, rans, rans_len, out);
  if (cpu_path() == CpuPath::kNeon && m.kind == ModelKind::kInt) {
    const int r = m.ip.sub == kIntTernary ? decode_tern_chunk_hwy(m, cv, tile_map, rans, rans_len, out, lm)
                                          : decode_int_chunk_hwy(m, cv, tile_map, rans, rans_len, out, lm);
    if (r >= 0) return r;
  }
  if (cpu_path() == CpuPath::kScalar)
    return decode_int_chunk_fast(m, cv, tile_map, rans, rans_len, out, res, tmp_tile, lm);
  return -1;
}

}  // namespace wcodec
