// codec/decompress/chunk_decode_simd.cpp — AVX-512 decoders of int and float
// chunks.
//
// They decode the same streams as the scalar reference decoders
// (chunk_decode.h), which stay the reference: 32 lanes as two 16-wide
// vectors processed in lane order, so renormalization words are consumed in
// exactly the scalar order (vpexpandd hands consecutive words to the lanes
// that need one). Escaped int tokens (rare) take their extra-bit symbols
// through the scalar step.
//
// Layout: the decode loop writes each step's 32 elements as one contiguous
// row of a lane-major buffer (step t, lane l at t * 32 + l), already in
// their final form where one exists (int8 / uint8 codes, float elements
// without their raw mantissa bits). A lane's neighbours are then plain
// vector loads: left is in registers, top is W steps back (W = lane width,
// at most two distinct widths per chunk), the periodic neighbours are off_a
// / off_b steps back. One pass then transposes blocks of 16 steps x 32 lanes
// with a vpermt2b network and stores each lane's run of 16 elements into the
// chunk's raster order; a last pass ORs in the float raw bits. No gathers
// other than the rANS table lookups, no scatters.
//
// Pairs: every lane's state is a serial chain (slot -> table gather ->
// next state -> renormalization), so one chunk's 32 lanes leave the core
// waiting on gather latency. The same-rectangle float and int8 loops are
// written over N chunks of one model and geometry (N = 1, 2 or 3), each
// step phase by phase across the chunks (contexts of all, then the gathers
// of all, ...), so that their gathers are in flight together: two chunks
// decode at about 1.3-1.6x the symbols per second of one, three at about
// 1.1x (float) and 1.15x (int8) that of two (decode_group_simd).
//
// Files: the decoders live in chunk_decode_simd_int.cpp,
// chunk_decode_simd_tern.cpp and chunk_decode_simd_float.cpp, over the
// building blocks of simd_avx512_i.h; this file holds the entry points that
// serve both kinds (decode_group_simd, simd_lane_major_bytes).
// Thread-safety: pure functions over their arguments and the caller's
// scratch.
#include <immintrin.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "chunk_decode_hwy.h"
#include "chunk_decode_krow.h"
#include "simd_avx512_i.h"
#include "wcodec/cpu.h"

namespace wcodec {
using namespace avx512;

size_t simd_lane_major_bytes(const ChunkView& cv) {
  // steps <= ceil(h / ly) * ceil(w / lx) <= h * w / 32 + h + w; 16 steps of
  // padding for the transposition's last block; 4 bytes per element.
  const uint64_t steps = uint64_t{cv.h} * cv.w / kLanes + cv.h + cv.w + 1;
  return static_cast<size_t>((steps + 16) * kLanes * 4 + 64);
}

int decode_group_simd(const ModelView* ms, const ChunkView& cv, const GroupSide* s, int n) {
  // Kernel-row chunks (format 2.10): chunk_decode_krow.h.
  if (ms[0].kind == ModelKind::kInt && ms[0].ip.nbr_mode == 4) return decode_krow_group(ms, cv, s, n);
  // The avx2 path: the Highway decoders' groups (int groups here, float
  // groups in the float section below).
  const bool avx2 = cpu_path() == CpuPath::kAvx2;
  if ((avx2 || ms[0].ent8) && ms[0].kind == ModelKind::kInt) return decode_int_group_hwy(ms, cv, s, n);
  if ((!simd_enabled() && !avx2) || n < 2 || n > kMaxChunkGroup) return -1;
  if (uint64_t{cv.h} * cv.w >= (1ull << 31)) return -1;
  const uint64_t nel = uint64_t{cv.h} * cv.w;
  const ModelView& m = ms[0];
  if (m.kind == ModelKind::kFloat && (avx2 || (m.ent8 && !m.slot_all))) return decode_float_group_hwy(ms, cv, s, n);
  if (!m.slot_all) return -1;
  if (m.kind == ModelKind::kFloat) {
    for (int i = 0; i < n; ++i) {
      const ModelView& mi = ms[i];
      if (mi.kind != ModelKind::kFloat || !mi.slot_all || (!mi.slot1_all && !float_joint(mi.fp)) || mi.fp.eb > 8 ||
          mi.fp.k > 7 || float_raw_bits(mi.fp) > 24 || !float_loop_compatible(m.fp, mi.fp))
        return -1;
    }
    for (int i = 0; i < n; ++i)
      if (!float_raw_ok(ms[i].fp, nel, s[i].raw_len, s[i].tail) || s[i].rans_len < 4 * kLanes || (s[i].rans_len & 1))
        return 0;
    LaneGeom g;
    lane_geom(cv, &g);
    switch (m.fp.elem_bytes) {
      case 1: return decode_float_group_e<1>(ms, cv, s, n, g);
      case 2: return decode_float_group_e<2>(ms, cv, s, n, g);
      default: return -1;
    }
  }
  if (!simd_enabled()) return -1;
  for (int i = 1; i < n; ++i)
    if (ms[i].kind != ModelKind::kInt || !ms[i].luts || ms[i].zp) return -1;
  if (m.kind != ModelKind::kInt || !m.luts || m.zp) return -1;
  const bool nibble = m.ip.sub == kIntNibble;
  if (m.ip.sub != kIntI8 && m.ip.sub != kIntU8 && !nibble) return -1;
  if (nibble && (uint64_t{cv.h} * cv.w) % 2) return -1;
  for (int i = 0; i < n; ++i) {
    if (s[i].map) return -1;
    if (s[i].rans_len < 4 * kLanes || (s[i].rans_len & 1) || s[i].raw_len) return 0;
  }
  LaneGeom g;
  lane_geom(cv, &g);
  const uint8_t* rans[kMaxChunkGroup];
  uint32_t rans_len[kMaxChunkGroup];
  uint8_t* lms[kMaxChunkGroup];
  uint64_t col0[kMaxChunkGroup], row0[kMaxChunkGroup];
  for (int i = 0; i < n; ++i) {
    rans[i] = s[i].rans;
    rans_len[i] = s[i].rans_len;
    lms[i] = s[i].lm;
    col0[i] = s[i].col0;
    row0[i] = s[i].row0;
  }
  const int r = n == 2 ? decode_int_fast<2>(ms, rans, rans_len, g, col0, row0, lms)
                       : decode_int_fast<3>(ms, rans, rans_len, g, col0, row0, lms);
  if (r != 1) return r;
  if (nibble) {
    int ok = 1;
    for (int i = 0; i < n; ++i) ok &= pack_nibble_chunk(cv, g, s[i].lm, s[i].out);
    return ok;
  }
  for (int i = 0; i < n; ++i) same_rect_to_raster<1>(s[i].lm, g, cv.w, s[i].out);
  return 1;
}

}  // namespace wcodec
