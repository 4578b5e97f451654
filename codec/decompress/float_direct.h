// codec/decompress/float_direct.h — float chunks decoded straight into their
// output elements, for the CUDA warp decoder (and its host emulation).
//
// decode_float_chunk_g (chunk_decode.h) decodes every symbol into two
// scratch grids (exponents, sign/mantissa symbols), reading the top
// neighbour back from the grid, and then assembles the elements in a second
// pass. On a GPU each lane walks its own rectangle, so those grid accesses
// hit 32 different cache lines per warp instruction. This decoder reads the
// same stream with the same arithmetic and assembles each element as soon as
// its symbols are known:
//   - the left neighbour is in registers; the top neighbour's exponent comes
//     from a ring of one rectangle row per lane laid out column-major by lane
//     (ring[(c - c0) * 32 + lane]), so a warp's accesses are 32 consecutive
//     bytes when the lanes' rectangles have one width;
//   - each lane reads its raw mantissa bits with a bit cursor (a 64-bit
//     buffer refilled 4 bytes at a time, repositioned at each row of its
//     rectangle) instead of a 4-byte gather per element;
//   - raw tail chunks (payload flag bit 1): the elements whose raw bits are
//     in the tail (in the lanes' final states) keep their exponent and
//     sign/mantissa symbol in two small arrays and are assembled after the
//     stream ends.
// The output bytes equal decode_float_chunk_g's (tests/test_device_plan.cpp
// runs both over the real files on the host).
// Thread-safety: pure over the views passed in; writes only out and scratch.
#pragma once

#include <cstdint>

#include "chunk_decode.h"

namespace wcodec {

// Elements whose raw bits may lie in a tail: the last kRawTailBytes bytes
// plus the rounding of float_raw_tail_split (at most 8 elements) and one.
inline constexpr uint32_t kDirectTailMax = kRawTailBytes * 8 + 16;

// Whether chunk cv of float model p can take this decoder with `cap`
// scratch bytes: the ring, the tail elements' exponents and symbols, the
// raw tail buffer (kFloatTailShared, 4-aligned). Sets *ring_w (the widest
// lane rectangle).
WC_HD inline bool float_direct_fits(const FloatParams& p, const ChunkView& cv, bool tail, uint64_t cap,
                                    uint32_t* ring_w) {
  if (p.eb > 8 || p.k > 7) return false;  // exponents and symbols kept in bytes
  uint32_t lx, ly;
  lane_grid(cv.h, cv.w, &lx, &ly);
  *ring_w = (cv.w + lx - 1) / lx;
  const uint64_t n = uint64_t{cv.h} * cv.w;
  if (tail) {
    if (!float_raw_bits(p) || float_raw_data_bytes(p, n) < kRawTailMin) return false;
    uint64_t ns, b0;
    float_raw_tail_split(p, n, &ns, &b0);
    if (n - ns > kDirectTailMax) return false;
  }
  const uint64_t ring = (uint64_t{*ring_w} * kLanes + 3) & ~uint64_t{3};
  return ring + 2 * kDirectTailMax + kFloatTailShared <= cap;
}

// LSB-first bit reader over one lane's raw bits.
struct BitCursor {
  // Reads aligned 32-bit words (one load a refill; the plan's arena has
  // readable bytes around every section, device_plan.cpp).
  const uint8_t* p;  // 4-aligned
  uint64_t buf;
  uint32_t have;
  WC_HD void seek(const uint8_t* raw, uint64_t bit) {
    const uint8_t* at = raw + (bit >> 3);
    const uint32_t mis = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(at) & 3);
    p = at - mis;
    buf = 0;
    have = 0;
    const uint32_t skip = 8 * mis + static_cast<uint32_t>(bit & 7);
    if (skip) {
      fill();
      buf >>= skip;
      have -= skip;
    }
  }
  WC_HD void fill() {
#ifdef __CUDA_ARCH__
    const uint32_t v = *reinterpret_cast<const uint32_t*>(p);
#else
    const uint32_t v = static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                       static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
#endif
    buf |= static_cast<uint64_t>(v) << have;
    have += 32;
    p += 4;
  }
  WC_HD uint32_t get(uint32_t n) {
    if (have < n) fill();
    const uint32_t v = static_cast<uint32_t>(buf & ((uint64_t{1} << n) - 1));
    buf >>= n;
    have -= n;
    return v;
  }
};

// One rANS decode step that finds the slot's symbol by binary search over
// the table's starts (fs[s] >> 16, non-decreasing over fs[0 .. 2^lg): the
// plan's tables, device_plan.cpp) instead of the 4 KiB slot table: lg
// loads from one small array instead of a gather over 32 cache lines.
// Same symbol as rans_decode_sym for every slot of a valid table (the
// largest s whose start is at most the slot).
WC_HD inline uint32_t rans_decode_sym_search(uint32_t& x, const DecTable& t, uint32_t lg) {
  const uint32_t slot = x & ((1u << kMaxProbBits) - 1);
  uint32_t s = 0;
  for (uint32_t step = (1u << lg) >> 1; step; step >>= 1)
    if ((t.fs[s + step] >> 16) <= slot) s += step;
  const uint32_t e = t.fs[s];
  x = (e & 0xFFFFu) * (x >> kMaxProbBits) + slot - (e >> 16);
  return s;
}

// The same step over a context's starts in fast memory (stage_starts):
// tab[0 .. 2^lg) the symbols' starts, tab[2^lg] the context's total.
WC_HD inline uint32_t rans_decode_sym_starts(uint32_t& x, const uint16_t* tab, uint32_t lg) {
  const uint32_t slot = x & ((1u << kMaxProbBits) - 1);
  uint32_t s = 0;
  for (uint32_t step = (1u << lg) >> 1; step; step >>= 1)
    if (tab[s + step] <= slot) s += step;
  const uint32_t start = tab[s];
  x = (tab[s + 1] - start) * (x >> kMaxProbBits) + slot - start;
  return s;
}

// Fast memory for a chunk's starts tables (a warp's slice of shared
// memory on the GPU): kStartsCap 16-bit entries, enough for the models of
// 4- and 5-bit exponents (F16: 16 contexts of 33 entries and the sign /
// mantissa contexts); 8-bit exponents (BF16, F32) with more than two
// contexts search in place. Shared memory comes out of the SM's L1 cache,
// which the in-place tables rely on: measured on an H200, 32 KiB a block
// slowed every decoder more than the staged tables gained.
inline constexpr uint32_t kStartsCap = 1024;

// Entries the starts tables of n contexts of 2^lg symbols take.
WC_HD inline uint32_t starts_entries(uint32_t n, uint32_t lg) { return n * ((1u << lg) + 1); }

// Copies the starts of tables t[0 .. n) (2^lg symbols each; the plan's
// non-decreasing starts) into tab, context c at c * (2^lg + 1), with lane
// group g; the caller syncs before reading.
template <class G>
WC_HD inline void stage_starts(G& g, const DecTable* t, uint32_t n, uint32_t lg, uint16_t* tab) {
  const uint32_t per = (1u << lg) + 1;
  g.each([&](uint32_t l) {
    for (uint32_t i = l; i < n * per; i += kLanes) {
      const uint32_t c = i / per, s = i % per;
      const uint32_t e = t[c].fs[s < per - 1 ? s : per - 2];
      tab[i] = static_cast<uint16_t>(s < per - 1 ? e >> 16 : (e >> 16) + (e & 0xFFFFu));
    }
  });
}

WC_HD inline void store_elem_aligned(uint8_t* p, uint32_t bytes, uint32_t v) {
#ifdef __CUDA_ARCH__
  if (bytes == 2 && !(reinterpret_cast<uintptr_t>(p) & 1)) {
    *reinterpret_cast<uint16_t*>(p) = static_cast<uint16_t>(v);
    return;
  }
  if (bytes == 4 && !(reinterpret_cast<uintptr_t>(p) & 3)) {
    *reinterpret_cast<uint32_t*>(p) = v;
    return;
  }
#endif
  store_elem(p, bytes, v);
}

// decode_float_values_g's keeper for the direct decoder: top neighbours
// from the ring, symbols by binary search (over fast memory when the
// starts tables are staged there), elements assembled into out as they are
// decoded; tail elements kept for after the stream.
template <class G>
struct FloatDirectCells {
  const ModelView& m;
  const uint8_t* raw;
  uint8_t* out;
  uint8_t* ring;  // [ring_w][32]: the exponent last decoded in each column
  uint8_t* tail_e;
  uint8_t* tail_sm;
  uint16_t* fast;
  uint64_t ns;  // elements whose raw bits are stored (the rest: the tail)
  uint32_t w, rawb, ebytes, lg0, lg1;
  bool search, need_top;
  uint16_t* tab0 = nullptr;  // staged starts tables, or null
  uint16_t* tab1 = nullptr;
  typename G::template Lanes<BitCursor> bits{};

  WC_HD void start(uint32_t l, const LaneCursor& kc) {
    const uint64_t i0 = uint64_t{kc.r} * w + kc.c;
    if (kc.n && i0 < ns) bits[l].seek(raw, i0 * rawb);
  }
  // The starts tables into fast memory when they fit.
  WC_HD void begin(G& g, uint32_t steps) {
    const bool joint = float_joint(m.fp);
    const uint32_t e0 = starts_entries(m.n0, lg0), e1 = joint ? 0u : starts_entries(m.n1, lg1);
    if (!search || !fast || !steps || e0 + e1 > kStartsCap) return;
    tab0 = fast;
    tab1 = fast + e0;
    stage_starts(g, m.t0, m.n0, lg0, tab0);
    if (!joint) stage_starts(g, m.t1, m.n1, lg1, tab1);
    g.sync();
  }
  WC_HD int top(uint32_t l, const LaneCursor& kc) const { return ring[uint64_t{kc.c - kc.rect.c0} * kLanes + l]; }
  WC_HD uint32_t sym0(uint32_t& x, uint32_t ctx) const {
    if (tab0) return rans_decode_sym_starts(x, tab0 + ctx * ((1u << lg0) + 1), lg0);
    return search ? rans_decode_sym_search(x, m.t0[ctx], lg0) : rans_decode_sym(x, m.t0[ctx]);
  }
  WC_HD uint32_t sym1(uint32_t& x, uint32_t ctx) const {
    if (tab1) return rans_decode_sym_starts(x, tab1 + ctx * ((1u << lg1) + 1), lg1);
    return search ? rans_decode_sym_search(x, m.t1[ctx], lg1) : rans_decode_sym(x, m.t1[ctx]);
  }
  // Assembles lane l's element at kc from e and sm, or keeps them for the
  // tail pass; at the end of a rectangle row, moves the bit cursor.
  WC_HD void done(uint32_t l, const LaneCursor& kc, uint32_t e, uint32_t sm) {
    const uint32_t r = kc.r, c = kc.c;
    if (need_top) ring[uint64_t{c - kc.rect.c0} * kLanes + l] = static_cast<uint8_t>(e);
    const uint64_t i = uint64_t{r} * w + c;
    if (i < ns) {
      const uint32_t lo = rawb ? bits[l].get(rawb) : 0u;
      store_elem_aligned(out + i * ebytes, ebytes, float_element(m.fp, e, sm, lo));
    } else {
      tail_e[i - ns] = static_cast<uint8_t>(e);
      tail_sm[i - ns] = static_cast<uint8_t>(sm);
    }
    if (c + 1 == kc.rect.c0 + kc.rect.w && r + 1 < kc.rect.r0 + kc.rect.h) {
      // The next row of the rectangle (its bits, when they are stored).
      const uint64_t i1 = uint64_t{r + 1} * w + kc.rect.c0;
      if (i1 < ns) bits[l].seek(raw, i1 * rawb);
    }
  }
};

// Decodes float chunk cv into out (h*w elements) with lane group g: the
// reference symbol decoder (decode_float_values_g) with FloatDirectCells.
// scratch: the bytes float_direct_fits counted (4-aligned), which all lanes
// can read and write; ring_w: as it set. search: symbols by binary search
// over the starts, else from the slot tables. fast: kStartsCap entries of
// fast memory for the starts tables (the GPU's shared memory), or null: the
// tables are searched where they are. Returns false for a malformed stream
// (as decode_float_chunk_g).
template <class G>
WC_HD inline bool decode_float_direct_g(G& g, const ModelView& m, const ChunkView& cv, const uint8_t* rans,
                                        uint32_t rans_len, const uint8_t* raw, uint64_t raw_len, uint8_t* out,
                                        bool tail, uint8_t* scratch, uint32_t ring_w, bool search = true,
                                        uint16_t* fast = nullptr) {
  const FloatParams& p = m.fp;
  const uint64_t n = uint64_t{cv.h} * cv.w;
  if (!float_raw_ok(p, n, raw_len, tail)) return false;
  uint64_t ns = n, b0 = 0;
  if (tail) float_raw_tail_split(p, n, &ns, &b0);
  if (n - ns > kDirectTailMax) return false;  // float_direct_fits rules it out
  const bool joint = float_joint(p);
  uint8_t* tail_e = scratch + ((uint64_t{ring_w} * kLanes + 3) & ~uint64_t{3});
  uint8_t* tail_sm = tail_e + kDirectTailMax;
  uint8_t* shared = tail_sm + kDirectTailMax;
  // Alphabets (powers of two): exponents or joint symbols; sign/mantissa.
  // Every exponent context but order-0 may read the top neighbour
  // (left-only contexts at a rectangle's first column).
  FloatDirectCells<G> cells{m,       raw,      out,  scratch,     tail_e, tail_sm, fast, ns, cv.w, float_raw_bits(p),
                            p.elem_bytes, joint ? 1u + p.eb + p.k : p.eb, 1u + p.k, search,
                            !joint && p.emode != 0};
  typename G::template Lanes<uint32_t> xt;
  if (!decode_float_values_g(g, m, cv, rans, rans_len, cells, tail ? &xt : nullptr)) return false;
  if (!tail) return true;
  // The tail: the stored bytes from b0 on, then the lanes' final states.
  const uint32_t rawb = cells.rawb, ebytes = p.elem_bytes;
  const uint8_t* tb = float_tail_buffer_g(g, p, n, raw, xt, shared);
  g.each([&](uint32_t l) {
    for (uint64_t i = ns + l; i < n; i += kLanes) {
      const uint32_t e = tail_e[i - ns], sm = tail_sm[i - ns];
      const uint32_t lo = get_bits(tb, i * rawb - 8 * b0, rawb);
      store_elem(out + i * ebytes, ebytes, float_element(p, e, sm, lo));
    }
  });
  return true;
}

}  // namespace wcodec
