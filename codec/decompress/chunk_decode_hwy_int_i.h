// codec/decompress/chunk_decode_hwy_int_i.h — the scalar helpers of the
// Highway int decoder (chunk_decode_hwy_int.cpp; private to it, outside its
// per-target body): the chunk's word-stream cursor with its zero-padded
// tail, and the lane geometry of chunks whose 32 lane rectangles share one
// size.
// Thread-safety: a Words cursor belongs to one decode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "chunk_model.h"
#include "chunk_decode_hwy_words.h"

namespace wcodec {
namespace hwy_int_detail {
using hwy_words::kPrefix;

// Most words one step takes: 32 tokens, 32 low and 32 high extra-bit
// symbols (the escapes' words are read through a bounded WordSource).
inline constexpr uint32_t kStepWords = 96;

// The word stream: word i at p + 2 * i, n words; before the last steps the
// remaining words move to the zero-padded pad (kPadBytes, the caller's),
// so that a step's vector reads (up to 32 words past pos) stay in bounds.
inline constexpr size_t kPadBytes = 2 * kStepWords + 128;
struct Words {
  const uint8_t* p;
  uint32_t n, pos;
  bool in_pad;
  uint8_t* pad;
};
inline void words_open(Words* w, const uint8_t* rans, uint32_t rans_len, uint8_t* pad) {
  w->p = rans + 4 * kLanes;
  w->n = (rans_len - 4 * kLanes) / 2;
  w->pos = 0;
  w->in_pad = false;
  w->pad = pad;
}
// Call before a step when pos + kStepWords > n. False: the stream ran short.
// (Always inlined, so that the cursor stays in registers.)
__attribute__((always_inline)) inline bool words_tail(Words* w) {
  if (w->pos > w->n) return false;
  if (!w->in_pad) {
    std::memset(w->pad, 0, kPadBytes);
    std::memcpy(w->pad, w->p + 2 * uint64_t{w->pos}, 2 * uint64_t{w->n - w->pos});
    w->p = w->pad;
    w->n -= w->pos;
    w->pos = 0;
    w->in_pad = true;
  }
  return true;
}

// The lanes of a chunk whose 32 lane rectangles have one size.
struct Geom {
  uint32_t W, rows;
  uint32_t r0[kLanes], c0[kLanes];
};
inline bool same_rect(const ChunkView& cv, Geom* g) {
  for (uint32_t l = 0; l < kLanes; ++l) {
    const LaneCursor k = lane_cursor(cv.h, cv.w, l);
    if (k.n == 0) return false;
    if (l == 0) {
      g->W = k.rect.w;
      g->rows = k.rect.h;
    } else if (k.rect.w != g->W || k.rect.h != g->rows) {
      return false;
    }
    g->r0[l] = k.rect.r0;
    g->c0[l] = k.rect.c0;
  }
  return true;
}
}  // namespace hwy_int_detail
}  // namespace wcodec
