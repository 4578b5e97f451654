// codec/decompress/chunk_decode_hwy_words.h — what the Highway decoders of
// the avx2 path (chunk_decode_hwy_{float,int,tern}.cpp) share: the
// prefix-count table that hands renormalization words to the lanes of an
// 8-lane vector in lane order, a bounded cursor over a chunk's word
// stream, and a copy of short runs.
// Thread-safety: constant tables; a Words cursor belongs to one decode.
#pragma once

#include <cstdint>
#include <cstring>

#include "chunk_model.h"

namespace wcodec {
namespace hwy_words {

// kPrefix.v[m][i]: the number of set bits of m below bit i (i < 8): the
// index of lane i's word among the next words when the lanes in m
// renormalize.
struct PrefixTable {
  alignas(32) int32_t v[256][8];
  constexpr PrefixTable() : v() {
    for (int m = 0; m < 256; ++m) {
      int c = 0;
      for (int i = 0; i < 8; ++i) {
        v[m][i] = c;
        c += (m >> i) & 1;
      }
    }
  }
};
inline constexpr PrefixTable kPrefix{};

// The word stream: word i at p + 2 * (i - off); near the end the remaining
// words are copied into pad (zeros after them), so that reads up to
// `ahead` words past pos (words_ready's argument, at most 128) stay in
// bounds.
struct Words {
  const uint8_t* src;  // word 0 of the stream
  const uint8_t* p;
  uint32_t off, n, pos;
  bool in_pad;
  alignas(32) uint8_t pad[256];
};
inline void words_open(Words* w, const uint8_t* rans, uint32_t rans_len) {
  w->src = rans + 4 * kLanes;
  w->p = w->src;
  w->off = 0;
  w->n = (rans_len - 4 * kLanes) / 2;
  w->pos = 0;
  w->in_pad = false;
}
// Before reading up to `ahead` words past pos. False: the stream ran short
// (the decode is rejected).
inline bool words_ready(Words* w, uint32_t ahead) {
  if (w->in_pad) return w->pos <= w->n;
  if (uint64_t{w->pos} + ahead <= w->n) return true;
  if (w->pos > w->n) return false;
  std::memset(w->pad, 0, sizeof w->pad);
  std::memcpy(w->pad, w->src + 2 * uint64_t{w->pos}, 2 * uint64_t{w->n - w->pos});
  w->p = w->pad;
  w->off = w->pos;
  w->in_pad = true;
  return true;
}

// n (1..16) bytes from src to dst without a call: two overlapping 8-, 4-
// or 1-2-byte copies (a libc memcpy of a run this short costs more than
// the copy; runs are up to 16 bytes, one per lane and 16 steps).
inline void copy_run(uint8_t* dst, const uint8_t* src, uint32_t n) {
  if (n >= 8) {
    uint64_t a, b;
    std::memcpy(&a, src, 8);
    std::memcpy(&b, src + n - 8, 8);
    std::memcpy(dst, &a, 8);
    std::memcpy(dst + n - 8, &b, 8);
  } else if (n >= 4) {
    uint32_t a, b;
    std::memcpy(&a, src, 4);
    std::memcpy(&b, src + n - 4, 4);
    std::memcpy(dst, &a, 4);
    std::memcpy(dst + n - 4, &b, 4);
  } else {
    const uint8_t a = src[0], b = src[n / 2], c = src[n - 1];
    dst[0] = a;
    dst[n / 2] = b;
    dst[n - 1] = c;
  }
}

}  // namespace hwy_words
}  // namespace wcodec
