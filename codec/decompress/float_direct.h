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

// Decodes float chunk cv into out (h*w elements) with lane group g.
// fast: kStartsCap entries of fast memory for the starts tables (the GPU's
// shared memory), or null: the tables are searched where they are.
// scratch: the bytes float_direct_fits counted (4-aligned), which all lanes
// can read and write; ring_w: as it set. Returns false for a malformed stream (as decode_float_chunk_g).
template <class G>
WC_HD inline bool decode_float_direct_g(G& g, const ModelView& m, const ChunkView& cv, const uint8_t* rans,
                                        uint32_t rans_len, const uint8_t* raw, uint64_t raw_len, uint8_t* out,
                                        bool tail, uint8_t* scratch, uint32_t ring_w, bool search = true,
                                        uint16_t* fast = nullptr) {
  const FloatParams& p = m.fp;
  const uint64_t n = uint64_t{cv.h} * cv.w;
  if (!float_raw_ok(p, n, raw_len, tail)) return false;
  const uint32_t w = cv.w, rawb = float_raw_bits(p), eb = p.eb, mb = p.mb, k = p.k, ebytes = p.elem_bytes;
  uint64_t ns = n, b0 = 0;
  if (tail) float_raw_tail_split(p, n, &ns, &b0);
  if (n - ns > kDirectTailMax) return false;  // float_direct_fits rules it out
  uint8_t* ring = scratch;
  uint8_t* tail_e = scratch + ((uint64_t{ring_w} * kLanes + 3) & ~uint64_t{3});
  uint8_t* tail_sm = tail_e + kDirectTailMax;
  uint8_t* shared = tail_sm + kDirectTailMax;

  typename G::template Lanes<uint32_t> x, err, left_e, left_sm, own_e;
  typename G::template Lanes<LaneCursor> cur;
  typename G::template Lanes<BitCursor> bits;
  const uint8_t zero_word[2] = {0, 0};
  WordSource ws;
  const int64_t open = lanes_open(g, cv, rans, rans_len, x, err, cur, &ws, zero_word);
  if (open < 0) return false;
  const uint32_t steps = static_cast<uint32_t>(open);
  const bool joint = float_joint(p);
  if (steps && (m.n0 == 0 || (!joint && m.n1 == 0))) return false;
  // Every exponent context but order-0 may read the top neighbour (left-only
  // contexts at a rectangle's first column).
  const bool need_top = !joint && p.emode != 0;
  // Alphabets (powers of two): exponents or joint symbols; sign/mantissa.
  const uint32_t lg0 = joint ? 1 + eb + k : eb, lg1 = 1 + k;
  // search: symbols by binary search over the starts (staged in fast
  // memory when they fit); else the slot tables.
  const uint32_t e0 = starts_entries(m.n0, lg0), e1 = joint ? 0u : starts_entries(m.n1, lg1);
  uint16_t* tab0 = search && fast && steps && e0 + e1 <= kStartsCap ? fast : nullptr;
  uint16_t* tab1 = tab0 ? tab0 + e0 : nullptr;
  if (tab0) {
    stage_starts(g, m.t0, m.n0, lg0, tab0);
    if (!joint) stage_starts(g, m.t1, m.n1, lg1, tab1);
    g.sync();
  }
  auto dsym = [search](uint32_t& xs, const DecTable& t, uint32_t lg) {
    return search ? rans_decode_sym_search(xs, t, lg) : rans_decode_sym(xs, t);
  };
  auto dsym0 = [&](uint32_t& xs, uint32_t ctx) {
    return tab0 ? rans_decode_sym_starts(xs, tab0 + ctx * ((1u << lg0) + 1), lg0) : dsym(xs, m.t0[ctx], lg0);
  };
  auto dsym1 = [&](uint32_t& xs, uint32_t ctx) {
    return tab1 ? rans_decode_sym_starts(xs, tab1 + ctx * ((1u << lg1) + 1), lg1) : dsym(xs, m.t1[ctx], lg1);
  };
  g.each([&](uint32_t l) {
    left_e[l] = left_sm[l] = own_e[l] = 0;
    const uint64_t i0 = uint64_t{cur[l].r} * w + cur[l].c;
    if (cur[l].n && i0 < ns) bits[l].seek(raw, i0 * rawb);
  });
  // Assembles the lane's element (r, c) from its exponent e and symbol sm,
  // or keeps them for the tail pass.
  auto emit = [&](uint32_t l, uint32_t e, uint32_t sm) {
    const uint32_t r = cur[l].r, c = cur[l].c;
    const uint64_t i = uint64_t{r} * w + c;
    if (i < ns) {
      const uint32_t lo = rawb ? bits[l].get(rawb) : 0u;
      const uint32_t v = ((sm >> k) << (eb + mb)) | (e << mb) | ((sm & ((1u << k) - 1)) << rawb) | lo;
      store_elem_aligned(out + i * ebytes, ebytes, v);
    } else {
      tail_e[i - ns] = static_cast<uint8_t>(e);
      tail_sm[i - ns] = static_cast<uint8_t>(sm);
    }
    if (c + 1 == cur[l].rect.c0 + cur[l].rect.w && r + 1 < cur[l].rect.r0 + cur[l].rect.h) {
      // The next row of the rectangle (its bits, when they are stored).
      const uint64_t i1 = uint64_t{r + 1} * w + cur[l].rect.c0;
      if (i1 < ns) bits[l].seek(raw, i1 * rawb);
    }
    advance(cur[l]);
  };
  for (uint32_t t = 0; joint && t < steps; ++t) {
    auto active = [&](uint32_t l) { return t < cur[l].n; };
    g.each([&](uint32_t l) {
      if (!active(l)) return;
      uint32_t ctx = cur[l].c > cur[l].rect.c0 ? float_joint_ctx(p, static_cast<int>(left_e[l]), left_sm[l] >> k) : 0u;
      err[l] |= ctx >= m.n0;
      ctx = ctx < m.n0 ? ctx : 0;
      const uint32_t j = dsym0(x[l], ctx);
      left_e[l] = float_joint_e(p, j);
      left_sm[l] = float_joint_sm(p, j);
      emit(l, left_e[l], left_sm[l]);
    });
    g.renorm(x, ws, active);
  }
  for (uint32_t t = 0; !joint && t < steps; ++t) {
    auto active = [&](uint32_t l) { return t < cur[l].n; };
    g.each([&](uint32_t l) {
      if (!active(l)) return;
      const uint32_t r = cur[l].r, c = cur[l].c;
      const bool has_l = c > cur[l].rect.c0, has_t = r > cur[l].rect.r0;
      uint8_t* slot = ring + uint64_t{c - cur[l].rect.c0} * kLanes + l;
      uint32_t ctx = 0;
      if (p.emode)
        ctx = float_e_ctx_lt(p, has_l ? static_cast<int>(left_e[l]) : -1,
                             need_top && has_t ? static_cast<int>(*slot) : -1);
      err[l] |= ctx >= m.n0;
      ctx = ctx < m.n0 ? ctx : 0;
      own_e[l] = dsym0(x[l], ctx);
      if (need_top) *slot = static_cast<uint8_t>(own_e[l]);
    });
    g.renorm(x, ws, active);
    g.each([&](uint32_t l) {
      if (!active(l)) return;
      const int ls = cur[l].c > cur[l].rect.c0 ? static_cast<int>(1 + (left_sm[l] >> k)) : 0;
      uint32_t ctx = float_sm_ctx(p, own_e[l], ls);
      err[l] |= ctx >= m.n1;
      ctx = ctx < m.n1 ? ctx : 0;
      left_sm[l] = dsym1(x[l], ctx);
      left_e[l] = own_e[l];
      emit(l, own_e[l], left_sm[l]);
    });
    g.renorm(x, ws, active);
  }
  if (ws.bad || ws.pos != ws.n) return false;
  if (g.any([&](uint32_t l) { return err[l] || x[l] < kRansL || x[l] - kRansL > (tail ? 0xFFFFu : 0u); }))
    return false;
  if (!tail) return true;
  // The tail: the stored bytes from b0 on, then the lanes' final states.
  uint32_t* xs = reinterpret_cast<uint32_t*>(shared);
  uint8_t* tb = shared + 4 * kLanes;
  g.each([&](uint32_t l) { xs[l] = x[l] - kRansL; });
  g.sync();
  g.one([&] {
    uint64_t ns1, bit1;
    float_raw_tail(p, n, raw, xs, tb, &ns1, &bit1);
  });
  g.sync();
  g.each([&](uint32_t l) {
    for (uint64_t i = ns + l; i < n; i += kLanes) {
      const uint32_t e = tail_e[i - ns], sm = tail_sm[i - ns];
      const uint32_t lo = get_bits(tb, i * rawb - 8 * b0, rawb);
      store_elem(out + i * ebytes, ebytes,
                 ((sm >> k) << (eb + mb)) | (e << mb) | ((sm & ((1u << k) - 1)) << rawb) | lo);
    }
  });
  return true;
}

}  // namespace wcodec
