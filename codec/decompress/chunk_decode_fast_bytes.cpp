// codec/decompress/chunk_decode_fast_bytes.cpp — the portable fast decoder
// of bytes-model chunks (scalar decoder path; method in chunk_decode_fast.h):
// one symbol per byte plane, the context the plane and, with ctx_mode 1,
// the class of the left element's byte in that plane.
//
// Why: the reference decoder (decode_bytes_chunk_g) walks each lane with a
// cursor, looks each context's table up through its DecTable and computes
// each byte's position from the cursor: about 150 MB/s on an Intel Xeon;
// bytes models code U16/I32/I64 tensors and the fp16 block scales of GGUF
// split models (docs/gguf.md).
//
// Method: the 32 lanes step together, one element of every lane per step,
// plane by plane in the reference's order (lane order within a plane, each
// lane's renormalization word taken as it decodes, which hands the words
// out in lane order as the reference does). Each lane writes its element
// straight into the chunk at its own output position (it owns its
// rectangle), so the left byte of a plane is the byte one element back.
// Lanes of any rectangle sizes; a lane past its element count is skipped.
// Thread-safety: pure functions over their arguments.
#include <cstdint>

#include "chunk_decode_fast.h"
#include "chunk_decode_fast_i.h"

namespace wcodec {
namespace {

using fast::Geom;
using fast::Words;

template <uint32_t EB, bool CTX>
bool bytes_lanes(const Geom& g, uint32_t w, const uint8_t* sym, const uint32_t* fs, const uint8_t* rans,
                 uint32_t rans_len, uint8_t* out) {
  Words ws;
  fast::words_open(&ws, rans, rans_len);
  uint32_t x[kLanes], col[kLanes];
  uint8_t* dst[kLanes];
  for (uint32_t l = 0; l < kLanes; ++l) {
    x[l] = load_elem(rans + 4 * l, 4);
    col[l] = 0;
    dst[l] = out + (uint64_t{g.r0[l]} * w + g.c0[l]) * EB;
  }
  const uint64_t row = uint64_t{w} * EB;
  for (uint32_t t = 0; t < g.steps; ++t) {
    const bool all = t < g.min_n;
    for (uint32_t b = 0; b < EB; ++b) {
      if (!fast::words_ready(&ws, kLanes)) return false;
      for (uint32_t l = 0; l < kLanes; ++l) {
        if (!all && t >= g.n[l]) continue;
        uint32_t ctx = b;
        if constexpr (CTX) ctx = 4 * b + (col[l] ? bytes_left_class((dst[l] - EB)[b]) : 0u);
        dst[l][b] = static_cast<uint8_t>(fast::decode_renorm(x[l], sym + 4096 * ctx, fs + 256 * ctx, ws.p, ws.pos));
      }
    }
    for (uint32_t l = 0; l < kLanes; ++l) {
      if (!all && t >= g.n[l]) continue;
      dst[l] += EB;
      if (++col[l] == g.w[l]) {
        col[l] = 0;
        dst[l] += row - uint64_t{g.w[l]} * EB;
      }
    }
  }
  if (!fast::words_done(ws)) return false;
  for (uint32_t l = 0; l < kLanes; ++l)
    if (x[l] != kRansL) return false;
  return true;
}

template <uint32_t EB>
bool bytes_mode(bool ctx, const Geom& g, uint32_t w, const uint8_t* sym, const uint32_t* fs, const uint8_t* rans,
                uint32_t rans_len, uint8_t* out) {
  return ctx ? bytes_lanes<EB, true>(g, w, sym, fs, rans, rans_len, out)
             : bytes_lanes<EB, false>(g, w, sym, fs, rans, rans_len, out);
}

}  // namespace

int decode_bytes_chunk_fast(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                            uint8_t* out) {
  const BytesParams& p = m.bp;
  if (m.kind != ModelKind::kBytes || !m.sym_small || !m.fs_small || p.ctx_mode > 1 || m.n0 < bytes_nctx(p))
    return -1;
  if (uint64_t{cv.h} * cv.w >= (1ull << 31)) return -1;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;
  Geom g;
  fast::lane_geometry(cv, &g);
  const bool ctx = p.ctx_mode == 1;
  bool ok;
  switch (p.elem_bytes) {
    case 1: ok = bytes_mode<1>(ctx, g, cv.w, m.sym_small, m.fs_small, rans, rans_len, out); break;
    case 2: ok = bytes_mode<2>(ctx, g, cv.w, m.sym_small, m.fs_small, rans, rans_len, out); break;
    case 4: ok = bytes_mode<4>(ctx, g, cv.w, m.sym_small, m.fs_small, rans, rans_len, out); break;
    case 8: ok = bytes_mode<8>(ctx, g, cv.w, m.sym_small, m.fs_small, rans, rans_len, out); break;
    default: return -1;
  }
  return ok ? 1 : 0;
}

}  // namespace wcodec
