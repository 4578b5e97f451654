// codec/decompress/int_direct.h — int chunks decoded straight into their
// output bytes, for the CUDA warp decoder (and its host emulation).
//
// The reference path (decode_int_residuals_g, then int_finish_chunk_g)
// writes every value into a residual grid of int32 and packs the grid into
// bytes in a second pass; on a GPU each lane walks its own rectangle, so
// the grid's stores and its top-neighbour reads touch 32 cache lines per
// warp instruction. For chunks without tile tools (no prediction or
// transform to undo) this decoder runs the same value decoder
// (decode_int_values_g) with another keeper of the values:
//   - neighbours (top, and left beyond the three the lanes keep in
//     registers) come from a ring of one rectangle row per lane, laid out
//     column-major by lane (ring[(c - c0) * 32 + lane]), so that a warp's
//     accesses are consecutive when the lanes' rectangles have one width;
//   - each value, once final, becomes its code, packed with the lane's
//     neighbours of the same byte (4-bit: 2 a byte, ternary: 4) in a
//     register and stored when the byte is complete. This needs every
//     lane's rectangle to start and end on byte boundaries (int_direct_fits).
// Kernel-row chunks (nbr_mode 4) and chunks with a tile map take the
// reference path. The output bytes equal it (tests/test_device_plan.cpp).
// Thread-safety: pure over the views passed in; writes only out and scratch.
#pragma once

#include <cstdint>

#include "chunk_decode.h"

namespace wcodec {

// Whether int chunk cv of model m (tile map: tiles) can take this decoder
// with `cap` scratch bytes for its ring; sets *ring_w (the widest lane
// rectangle).
WC_HD inline bool int_direct_fits(const ModelView& m, const ChunkView& cv, bool tiles, uint64_t cap,
                                  uint32_t* ring_w) {
  if (tiles || m.ip.nbr_mode == 4) return false;
  uint32_t lx, ly;
  lane_grid(cv.h, cv.w, &lx, &ly);
  *ring_w = (cv.w + lx - 1) / lx;
  if (uint64_t{*ring_w} * kLanes * 4 > cap) return false;
  const uint32_t cpb = int_codes_per_byte(m.ip.sub);
  if (cv.w % cpb) return false;
  for (uint32_t l = 0; cpb > 1 && l < kLanes; ++l) {
    const LaneRect r = lane_rect(cv.h, cv.w, l);
    if (r.h && r.w && (r.c0 % cpb || r.w % cpb)) return false;
  }
  return true;
}

// The ring and the output as decode_int_values_g's keeper of values.
template <class G>
struct IntDirectCells {
  const ModelView& m;
  const ChunkView& cv;
  int32_t* ring;  // [ring_w][32]
  uint8_t* out;
  uint32_t cpb, bits;
  typename G::template Lanes<uint32_t> acc, bad;

  WC_HD int32_t top(uint32_t l, const LaneCursor& k) const { return ring[(k.c - k.rect.c0) * kLanes + l]; }
  WC_HD int32_t left(uint32_t l, const LaneCursor& k, uint32_t off) const {
    return ring[(k.c - off - k.rect.c0) * kLanes + l];
  }
  WC_HD void put(uint32_t l, const LaneCursor& k, int32_t v) { ring[(k.c - k.rect.c0) * kLanes + l] = v; }
  WC_HD void done(uint32_t l, const LaneCursor& k, int32_t v) {
    const uint64_t i = uint64_t{k.r} * cv.w + k.c;
    const uint32_t sub = m.ip.sub;
    uint32_t code;
    if (sub == kIntI8) {
      bad[l] |= static_cast<uint32_t>(v + 128) > 255u;
      out[i] = static_cast<uint8_t>(v);
      return;
    }
    if (sub == kIntTernary) {
      // value -> code: 0 -> 0, +1 -> 1, -1 -> 2, +2 -> 3 (reserved code).
      const uint32_t u = static_cast<uint32_t>(v + 1);
      bad[l] |= u > 3u;
      code = (0xD2u >> (2 * (u & 3u))) & 3u;
    } else if (!int_value_to_code(sub, v, int_center(m, cv.row0 + k.r, cv.col0 + k.c), &code)) {
      bad[l] = 1;
      code = 0;
    }
    const uint32_t j = k.c % cpb;
    acc[l] |= code << (j * bits);
    if (j == cpb - 1) {
      out[i / cpb] = static_cast<uint8_t>(acc[l]);
      acc[l] = 0;
    }
  }
};

// Decodes int chunk cv into out with lane group g. scratch: the ring
// (ring_w * 32 int32, as int_direct_fits set ring_w), which all lanes can
// read and write. Returns false for a malformed stream or a value out of
// its type's range (as decode_int_residuals_g + int_finish_chunk_g).
template <class G>
WC_HD inline bool decode_int_direct_g(G& g, const ModelView& m, const ChunkView& cv, const uint8_t* rans,
                                      uint32_t rans_len, uint8_t* out, uint8_t* scratch) {
  const uint32_t cpb = int_codes_per_byte(m.ip.sub);
  IntDirectCells<G> cells{m, cv, reinterpret_cast<int32_t*>(scratch), out, cpb, 8 / cpb, {}, {}};
  g.each([&](uint32_t l) { cells.acc[l] = cells.bad[l] = 0; });
  if (!decode_int_values_g(g, m, cv, rans, rans_len, cells)) return false;
  return !g.any([&](uint32_t l) { return cells.bad[l] != 0; });
}

}  // namespace wcodec
