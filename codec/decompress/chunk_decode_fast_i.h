// codec/decompress/chunk_decode_fast_i.h — what the portable fast decoders
// (chunk_decode_fast_float.cpp, chunk_decode_fast_int.cpp) share: the
// bounded word cursor, the one-symbol rANS step with its renormalization,
// the lanes' geometry and the reference tables' contiguous layout.
// Internal to the codec; see chunk_decode_fast.h for the method.
// Thread-safety: plain values; a cursor belongs to one decode.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "chunk_decode_fast.h"

#if defined(__GNUC__)
#define WC_FAST_INLINE inline __attribute__((always_inline))
#else
#define WC_FAST_INLINE inline
#endif

namespace wcodec {
namespace fast {

// The word stream. A step reads at most kStepAhead words past pos (three
// symbol slots of 32 lanes: a float's two symbols, an int token and its
// two escape fields; each lane loads the word at the cursor whether it
// renormalizes or not); before a step that could read past the
// stream, its remaining words move to a zeroed pad. A stream that runs
// short then decodes zero words until the step check rejects it (the
// reference rejects such a stream too: its word source marks it bad).
inline constexpr uint32_t kStepAhead = 3 * kLanes;
struct Words {
  const uint8_t* p;  // word 0 at p
  uint32_t n, pos;   // words at p; next word
  bool in_pad;
  alignas(16) uint8_t pad[4 * kStepAhead + 16];
};
inline void words_open(Words* w, const uint8_t* rans, uint32_t rans_len) {
  w->p = rans + 4 * kLanes;
  w->n = (rans_len - 4 * kLanes) / 2;
  w->pos = 0;
  w->in_pad = false;
}
// Before a step that reads up to `ahead` (<= kStepAhead) words. False: the
// stream ran short (the chunk is malformed).
WC_FAST_INLINE bool words_ready(Words* w, uint32_t ahead) {
  if (uint64_t{w->pos} + ahead <= w->n) return true;
  if (w->in_pad) return w->pos <= w->n;
  std::memset(w->pad, 0, sizeof w->pad);
  std::memcpy(w->pad, w->p + 2 * uint64_t{w->pos}, 2 * uint64_t{w->n - w->pos});
  w->p = w->pad;
  w->n -= w->pos;
  w->pos = 0;
  w->in_pad = true;
  return true;
}
// Whether the stream was consumed exactly.
inline bool words_done(const Words& w) { return w.pos == w.n; }

WC_FAST_INLINE uint32_t word_at(const uint8_t* p, uint32_t i) {
  if constexpr (std::endian::native == std::endian::little) {
    uint16_t v;
    std::memcpy(&v, p + 2 * uint64_t{i}, 2);
    return v;
  } else {
    return static_cast<uint32_t>(p[2 * i]) | static_cast<uint32_t>(p[2 * i + 1]) << 8;
  }
}

// x renormalized from y: y << 16 | w when y < kRansL (pos moves on), else
// y. Written with masks: a branch here is mispredicted on most of the
// renormalizations (they are random), and compilers turn a conditional
// expression into one.
WC_FAST_INLINE uint32_t renorm_from(uint32_t y, const uint8_t* p, uint32_t& pos) {
  const uint32_t need = y < kRansL;
  const uint32_t w = word_at(p, pos);
  pos += need;
  return (y << (need << 4)) | (w & (0u - need));
}

// One symbol of lane state x from the table of one context (sym: 4096
// slot -> symbol bytes, fs: freq | start << 16 per symbol), then the
// lane's renormalization from word pos of p (the reference's
// rans_decode_sym + rans_renorm, without branches).
WC_FAST_INLINE uint32_t decode_renorm(uint32_t& x, const uint8_t* sym, const uint32_t* fs, const uint8_t* p,
                                      uint32_t& pos) {
  const uint32_t slot = x & ((1u << kMaxProbBits) - 1);
  const uint32_t s = sym[slot];
  const uint32_t e = fs[s];
  x = renorm_from((e & 0xFFFFu) * (x >> kMaxProbBits) + slot - (e >> 16), p, pos);
  return s;
}
// A uniform k-bit value (rans_decode_bits) with its renormalization.
WC_FAST_INLINE uint32_t decode_bits_renorm(uint32_t& x, uint32_t k, const uint8_t* p, uint32_t& pos) {
  const uint32_t v = rans_decode_bits(x, k);
  x = renorm_from(x, p, pos);
  return v;
}

// The reference tables of n contexts as one block each (TensorModel's
// lut_all / fs_all): context c at sym + 4096 c, fs + 256 c. False when the
// view's tables are laid out otherwise (the caller declines).
inline bool contiguous_tables(const DecTable* t, uint32_t n, const uint8_t** sym, const uint32_t** fs) {
  if (!t || n == 0) return false;
  for (uint32_t i = 0; i < n; ++i)
    if (t[i].sym != t[0].sym + uint64_t{i} * 4096 || t[i].fs != t[0].fs + uint64_t{i} * 256) return false;
  *sym = t[0].sym;
  *fs = t[0].fs;
  return true;
}

// The lanes' rectangles (lane_rect) and whether all 32 are one non-empty
// size (the same-rectangle loops).
struct Geom {
  uint32_t steps, min_n;
  bool same;
  uint32_t r0[kLanes], c0[kLanes], h[kLanes], w[kLanes], n[kLanes];
};
inline void lane_geometry(const ChunkView& cv, Geom* g) {
  g->steps = 0;
  g->min_n = ~0u;
  for (uint32_t l = 0; l < kLanes; ++l) {
    const LaneRect r = lane_rect(cv.h, cv.w, l);
    g->r0[l] = r.r0;
    g->c0[l] = r.c0;
    g->h[l] = r.h;
    g->w[l] = r.w;
    g->n[l] = r.h * r.w;
    g->steps = g->n[l] > g->steps ? g->n[l] : g->steps;
    g->min_n = g->n[l] < g->min_n ? g->n[l] : g->min_n;
  }
  g->same = g->min_n > 0;
  for (uint32_t l = 1; l < kLanes; ++l) g->same &= g->n[l] == g->n[0] && g->w[l] == g->w[0];
}

// Little-endian element stores.
template <class T>
WC_FAST_INLINE void store_le(uint8_t* p, T v) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &v, sizeof v);
  } else {
    for (size_t i = 0; i < sizeof v; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
  }
}

// The ternary loop (chunk_decode_fast_tern.cpp): decode_int_chunk_fast's
// result for models whose tables code only the tokens 0..2 (ModelView::
// tern3), chunks without a tile map whose lanes are one rectangle size and
// whose rows are whole bytes; -1 for anything else. res: h * w int32 of
// scratch (used as h * w bytes).
int decode_tern_chunk_fast(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
                           uint32_t rans_len, uint8_t* out, int32_t* res);

}  // namespace fast
}  // namespace wcodec
