// codec/compress/encode_model_i.h — internals shared by the tensor
// encoder's files (tensor_encode.cpp, chunk_encode.cpp, choose_float.cpp,
// choose_int.cpp): the walkers that visit a chunk's symbols in decode
// order, the symbol statistics and cost estimates, chunk access, and the
// model choosers' entry points. Not part of any interface.
//
// Thread-safety: pure functions over their arguments.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "chunk_model.h"
#include "int_rows.h"
#include "rans_encoder.h"
#include "tensor_encode.h"

namespace wcodec {

// ------------------------------------------------------------------ walkers
// The walkers visit symbols in decode order and call emit(lane, set, ctx,
// sym) for coded symbols and bits(lane, value, nbits) for uniform bits.
// They mirror chunk_decode.h exactly (same context functions).

struct FloatChunkData {
  std::vector<uint16_t> e;
  std::vector<uint8_t> sm;
  std::vector<uint32_t> raw;
};

// Element i of a float chunk (little-endian, B bytes).
template <uint32_t B>
inline uint32_t float_elem(const uint8_t* bytes, uint64_t i) {
  const uint8_t* q = bytes + i * B;
  if constexpr (B == 1) return q[0];
  else if constexpr (B == 2) return uint32_t{q[0]} | uint32_t{q[1]} << 8;
  else return uint32_t{q[0]} | uint32_t{q[1]} << 8 | uint32_t{q[2]} << 16 | uint32_t{q[3]} << 24;
}

// An element's coded fields: exponent, sign with the k high mantissa bits,
// and the raw low mantissa bits.
struct FloatFields {
  uint32_t e, sm, raw;
};
inline FloatFields float_fields(const FloatParams& p, uint32_t v) {
  const uint32_t mb = p.mb, rawb = mb - p.k;
  const uint32_t m = v & ((1u << mb) - 1);
  return {(v >> mb) & ((1u << p.eb) - 1), ((v >> (p.eb + mb)) << p.k) | (m >> rawb),
          rawb ? (m & ((1u << rawb) - 1)) : 0u};
}

template <uint32_t B>
inline void split_float_b(const FloatParams& p, const uint8_t* bytes, uint64_t n, FloatChunkData* d) {
  d->e.resize(n);
  d->sm.resize(n);
  d->raw.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    const FloatFields f = float_fields(p, float_elem<B>(bytes, i));
    d->e[i] = static_cast<uint16_t>(f.e);
    d->sm[i] = static_cast<uint8_t>(f.sm);
    d->raw[i] = f.raw;
  }
}

inline void split_float(const FloatParams& p, const uint8_t* bytes, uint64_t n, FloatChunkData* d) {
  switch (p.elem_bytes) {
    case 1: split_float_b<1>(p, bytes, n, d); break;
    case 2: split_float_b<2>(p, bytes, n, d); break;
    default: split_float_b<4>(p, bytes, n, d); break;
  }
}

// The raw mantissa section: rb-bit fields (rb <= 24), LSB first, as
// BitWriter::put would write them, 32 bits at a time.
inline void pack_raw_bits(const uint32_t* v, uint64_t n, uint32_t rb, std::vector<uint8_t>* out) {
  WC_CHECK(rb >= 1 && rb <= 24);
  out->assign((n * rb + 7) / 8, 0);
  uint8_t* o = out->data();
  uint64_t acc = 0;
  uint32_t fill = 0;
  const uint32_t mask = (1u << rb) - 1;
  for (uint64_t i = 0; i < n; ++i) {
    acc |= uint64_t{v[i] & mask} << fill;
    fill += rb;
    if (fill >= 32) {
      for (int b = 0; b < 4; ++b) *o++ = static_cast<uint8_t>(acc >> (8 * b));
      acc >>= 32;
      fill -= 32;
    }
  }
  for (; fill > 0; fill = fill > 8 ? fill - 8 : 0, acc >>= 8) *o++ = static_cast<uint8_t>(acc);
  out->resize(static_cast<size_t>(o - out->data()));
}

// A model's tables for the encoder: start | freq << 16 per (context,
// symbol), symbols lo .. lo + n - 1 only (the span any table uses: a float
// exponent table's few hundred symbols shrink to the exponents present, so
// the lookups stay in cache).
struct PackedTables {
  std::vector<uint32_t> sf;
  uint32_t lo = 0, n = 0;
  explicit PackedTables(const std::vector<FreqTable>& ts) {
    uint32_t hi = 0;
    lo = UINT32_MAX;
    for (const FreqTable& t : ts)
      for (uint32_t s = 0; s < t.freq.size(); ++s)
        if (t.freq[s]) {
          lo = std::min(lo, s);
          hi = std::max(hi, s);
        }
    if (lo == UINT32_MAX) lo = 0;
    n = lo <= hi ? hi - lo + 1 : 0;
    sf.assign(ts.size() * n, 0);
    for (size_t c = 0; c < ts.size(); ++c)
      for (uint32_t s = lo; s < lo + n && s < ts[c].freq.size(); ++s)
        sf[c * n + s - lo] = uint32_t{ts[c].start[s]} | uint32_t{ts[c].freq[s]} << 16;
  }
  uint32_t at(uint32_t ctx, uint32_t sym) const { return sf[uint64_t{ctx} * n + sym - lo]; }
};

// Encoder walkers. They hand the groups of chunk_decode.h's decode order to
// RansEncoder's reverse mode last first (last step first; within a step the
// phases last first, each phase one group of the lanes that code a symbol
// in it). A lane's position at step t is element t of its rectangle in
// raster order.
// The lanes' symbol counts per phase: lane l codes at steps 0 .. n[l] - 1;
// every lane codes at steps below nmin.
struct LaneSteps {
  uint32_t n[kLanes];
  uint32_t steps = 0, nmin = UINT32_MAX;
  LaneSteps(uint32_t h, uint32_t w) {
    for (uint32_t l = 0; l < kLanes; ++l) {
      const LaneRect rect = lane_rect(h, w, l);
      n[l] = rect.h * rect.w;
      steps = std::max(steps, n[l]);
      nmin = std::min(nmin, n[l]);
    }
  }
  // The lanes that code at step t.
  uint32_t mask(uint32_t t) const {
    if (t < nmin) return 0xFFFFFFFFu;
    uint32_t m = 0;
    for (uint32_t l = 0; l < kLanes; ++l) m |= static_cast<uint32_t>(t < n[l]) << l;
    return m;
  }
};

// Float chunk: per step, the exponent group then the sign/mantissa group
// (joint symbols: one group). The entries are computed in raster order,
// lane rectangle row by row, into one step-major array (step t's exponent
// group at row 2t, its sign/mantissa group at row 2t + 1, or its joint
// group at row t; lane l at column l); the steps where every lane codes are
// then encoded straight from it, the others group by group.
inline void encode_float_reverse(const FloatParams& p, uint32_t h, uint32_t w, const FloatChunkData& d,
                                 const PackedTables& t0, const PackedTables& t1, RansEncoder* enc) {
  uint32_t lx, ly;
  lane_grid(h, w, &lx, &ly);
  const LaneSteps ls(h, w);
  const uint32_t steps = ls.steps, nmin = ls.nmin;
  // Groups per step: exponent and sign/mantissa, or one joint symbol.
  const uint32_t gps = float_joint(p) ? 1 : 2;
  thread_local RawVector<uint32_t> ent;
  if (ent.size() < size_t{gps} * steps * kLanes) ent.resize(size_t{gps} * steps * kLanes);
  uint32_t* const G = ent.data();
  const uint16_t* E = d.e.data();
  const uint8_t* SM = d.sm.data();
  for (uint32_t iy = 0; iy < ly; ++iy) {
    const uint32_t r0 = static_cast<uint32_t>(uint64_t{h} * iy / ly);
    const uint32_t r1 = static_cast<uint32_t>(uint64_t{h} * (iy + 1) / ly);
    for (uint32_t ix = 0; ix < lx; ++ix) {
      const uint32_t c0 = static_cast<uint32_t>(uint64_t{w} * ix / lx);
      const uint32_t c1 = static_cast<uint32_t>(uint64_t{w} * (ix + 1) / lx);
      const uint32_t l = iy * lx + ix;
      uint32_t* g = G + l;
      for (uint32_t r = r0; r < r1; ++r) {
        const uint64_t row = uint64_t{r} * w;
        const bool ht = r > r0;
        if (gps == 1) {
          for (uint32_t c = c0; c < c1; ++c, g += kLanes) {
            const uint64_t i = row + c;
            const uint32_t ctx = c > c0 ? float_joint_ctx(p, E[i - 1], SM[i - 1] >> p.k) : 0u;
            g[0] = t0.at(ctx, float_joint_sym(p, E[i], SM[i]));
          }
          continue;
        }
        for (uint32_t c = c0; c < c1; ++c, g += 2 * kLanes) {
          const uint64_t i = row + c;
          const bool hl = c > c0;
          const uint32_t e = E[i];
          g[0] = t0.at(float_e_ctx_lt(p, hl ? E[i - 1] : -1, ht ? E[i - w] : -1), e);
          g[kLanes] = t1.at(float_sm_ctx(p, e, hl ? 1 + (SM[i - 1] >> p.k) : 0), SM[i]);
        }
      }
    }
  }
  for (uint32_t t = steps; t-- > nmin;) {
    if (gps == 2) enc->put_group_reverse(ls.mask(t), G + (size_t{2} * t + 1) * kLanes);
    enc->put_group_reverse(ls.mask(t), G + size_t{gps} * t * kLanes);
  }
  enc->put_full_groups_reverse(G, size_t{gps} * nmin);
}

// Column phases of a chunk's columns: kp[c] = (col0 + c) % period for
// nbr_modes 2 and 3, else 0.
inline void int_col_phases(const IntParams& p, uint64_t col0, uint32_t w, std::vector<uint32_t>* kp) {
  kp->assign(w, 0);
  if (p.nbr_mode < 2 || !p.period) return;
  uint32_t k = static_cast<uint32_t>(col0 % p.period);
  for (uint32_t c = 0; c < w; ++c) {
    (*kp)[c] = k;
    k = k + 1 == p.period ? 0 : k + 1;
  }
}

struct IntToken {
  uint32_t tok, extra, nb;
};
inline __attribute__((always_inline)) IntToken make_token(const IntParams& p, int32_t v) {
  const uint32_t u = static_cast<uint32_t>(tile::zz_encode(v));
  if (__builtin_expect(u < p.esc, 1)) return {u, 0, 0};
  const uint32_t d = u - p.esc;
  const uint32_t nb = bit_width32(d);
  const uint32_t extra = nb >= 2 ? d - (1u << (nb - 1)) : 0;
  return {p.esc + nb, extra, nb};
}

// nbr_mode 4 (kernel-row symbols, chunk_model.h): the symbol of three
// values (digits 0: 0, 1: +1, 2: -1); kKernRowSyms for a value without a
// digit (the model search does not choose the mode then).
inline uint32_t kern_row_sym(const int32_t* v) {
  // Branch-free (the values are as unpredictable as the weights): digit
  // x + 3 [x < 0]; a value outside -1..1 has x + 1 above 2 as unsigned.
  auto digit = [](int32_t x) { return static_cast<uint32_t>(x + 3 * (x < 0)); };
  auto bad = [](int32_t x) { return static_cast<uint32_t>(x + 1) > 2u; };
  const uint32_t s = digit(v[0]) + 3 * digit(v[1]) + 9 * digit(v[2]);
  return bad(v[0]) | bad(v[1]) | bad(v[2]) ? kKernRowSyms : s;
}
// Every kernel row of an h x w chunk (w a multiple of 9) in kernel order:
// emit(l, t, j, r, c, ctx, sym) for row j of kernel k = 32 t + l, which
// starts at chunk row r, column c.
template <typename Emit>
inline void visit_kern_rows(const IntParams& p, const IntLuts& L, const uint8_t* rc, uint64_t row0, uint32_t h,
                            uint32_t w, const int32_t* res, Emit&& emit) {
  const uint32_t kpr = w / kKernRowCodes;
  for (uint32_t r = 0; r < h; ++r) {
    const uint32_t sc = p.use_rc ? L.scale[rc[row0 + r]] : 0u;
    const int32_t* row = res + uint64_t{r} * w;
    for (uint32_t kc = 0; kc < kpr; ++kc) {
      const uint64_t k = uint64_t{r} * kpr + kc;
      const uint32_t l = static_cast<uint32_t>(k % kLanes), t = static_cast<uint32_t>(k / kLanes);
      uint32_t above = 0;
      for (uint32_t j = 0; j < 3; ++j) {
        const uint32_t c = kc * kKernRowCodes + 3 * j;
        const uint32_t sym = kern_row_sym(row + c);
        emit(l, t, j, r, c, kern_rows_ctx(sc, j, above), sym);
        above = sym < kKernRowSyms ? sym : 0u;
      }
    }
  }
}

// nbr_mode 4: the chunk's symbols in the decoder's order (step t, kernel
// row j, lane l), handed to the encoder last first.
inline void encode_kern_rows_reverse(const IntParams& p, const uint8_t* rc, uint64_t row0, uint32_t h, uint32_t w,
                                     const int32_t* res, const PackedTables& t0, RansEncoder* enc) {
  IntLuts L;
  build_int_luts(p, &L);
  const uint64_t nk = uint64_t{h} * w / kKernRowCodes;
  const uint32_t steps = kern_rows_lane_n(nk, 0), nmin = kern_rows_lane_n(nk, kLanes - 1);
  thread_local RawVector<uint32_t> sm;
  if (sm.size() < size_t{steps} * 3 * kLanes) sm.resize(size_t{steps} * 3 * kLanes);
  std::fill(sm.data() + size_t{nmin} * 3 * kLanes, sm.data() + size_t{steps} * 3 * kLanes, 0u);
  visit_kern_rows(p, L, rc, row0, h, w, res,
                  [&](uint32_t l, uint32_t t, uint32_t j, uint32_t, uint32_t, uint32_t ctx, uint32_t sym) {
                    sm[(size_t{t} * 3 + j) * kLanes + l] = t0.at(ctx, sym);
                  });
  const uint32_t last = static_cast<uint32_t>(nk % kLanes);  // lanes of the last step when partial
  for (uint32_t gi = 3 * steps; gi-- > 3 * nmin;)
    enc->put_group_reverse((1u << last) - 1u, sm.data() + size_t{gi} * kLanes);
  enc->put_full_groups_reverse(sm.data(), size_t{nmin} * 3);
}

// The contexts of every element of an int chunk, in raster order of the
// chunk, a lane row at a time: emit_run(l, t, r, c0, c1, ctx) gets the
// lane, the step (position in the lane rectangle's raster order) of column
// c0, the chunk row, the run's columns [c0, c1) and their contexts
// (ctx[c - c0]). encode_int_reverse codes these symbols in the decode order
// (placing them by lane and step); the other visitors count them
// (statistics, cost estimates) or place them by lane and step.
template <typename EmitRun>
inline void visit_int_runs(const IntParams& p, const uint8_t* rc, const uint8_t* cc, uint64_t row0, uint64_t col0,
                           uint32_t h, uint32_t w, const int32_t* res, EmitRun&& emit_run) {
  IntLuts L;
  build_int_luts(p, &L);
  thread_local std::vector<uint32_t> kp, cbuf;
  int_col_phases(p, col0, w, &kp);
  if (cbuf.size() < w) cbuf.resize(w);
  uint32_t lx, ly;
  lane_grid(h, w, &lx, &ly);
  uint32_t cb[kLanes + 1];  // lane rectangle columns: [cb[ix], cb[ix + 1])
  for (uint32_t ix = 0; ix <= lx; ++ix) cb[ix] = static_cast<uint32_t>(uint64_t{w} * ix / lx);
  // Past the first `reach` columns of a lane rectangle every left neighbour
  // a mode reads exists, and int_ctx reduces to int_row_contexts (the same
  // contexts, without its per-element edge tests and mode dispatch): a row's
  // contexts are computed at once from column `reach` on, then the first
  // columns of each lane rectangle are computed (again) by int_ctx.
  const uint32_t reach = int_row_reach(p);
  for (uint32_t iy = 0; iy < ly; ++iy) {
    const uint32_t r0 = static_cast<uint32_t>(uint64_t{h} * iy / ly);
    const uint32_t r1 = static_cast<uint32_t>(uint64_t{h} * (iy + 1) / ly);
    for (uint32_t r = r0; r < r1; ++r) {
      const uint32_t rowpart = p.use_rc ? rc[row0 + r] : 0u;
      const int32_t* row = res + uint64_t{r} * w;
      if (w > reach) {
        const IntRowArgs ra{&p, &L, row, r > r0 ? row - w : nullptr, p.use_cc ? cc + col0 : nullptr, kp.data(),
                            rowpart};
        int_row_contexts(ra, reach, w, cbuf.data() + reach);
      }
      for (uint32_t ix = 0; ix < lx; ++ix) {
        const uint32_t c0 = cb[ix], c1 = cb[ix + 1], head = std::min(c0 + reach, c1);
        for (uint32_t c = c0; c < head; ++c) {
          const uint32_t sc = L.scale[rowpart + (p.use_cc ? cc[col0 + c] : 0u)];
          cbuf[c] = int_ctx(p, L, res, w, r, c, r0, c0, sc, kp[c]);
        }
        emit_run(iy * lx + ix, (r - r0) * (c1 - c0), r, c0, c1, cbuf.data() + c0);
      }
    }
  }
}

// The same element by element: emit(l, t, r, c, ctx, v) with the
// element's residual v.
template <typename Emit>
inline void visit_int_elems(const IntParams& p, const uint8_t* rc, const uint8_t* cc, uint64_t row0, uint64_t col0,
                            uint32_t h, uint32_t w, const int32_t* res, Emit&& emit) {
  visit_int_runs(p, rc, cc, row0, col0, h, w, res,
                 [&](uint32_t l, uint32_t t, uint32_t r, uint32_t c0, uint32_t c1, const uint32_t* ctx) {
                   const int32_t* row = res + uint64_t{r} * w;
                   for (uint32_t c = c0; c < c1; ++c, ++t) emit(l, t, r, c, ctx[c - c0], row[c]);
                 });
}

// Where each lane's elements start when a chunk's elements are listed lane
// by lane, each in its rectangle's raster order (off[kLanes] = h * w).
inline void lane_offsets(uint32_t h, uint32_t w, uint64_t off[kLanes + 1]) {
  off[0] = 0;
  for (uint32_t l = 0; l < kLanes; ++l) {
    const LaneRect rect = lane_rect(h, w, l);
    off[l + 1] = off[l] + uint64_t{rect.h} * rect.w;
  }
}

// The (context, token) of every element; emit(r, c, ctx, token).
template <typename Emit>
inline void visit_int_tokens_at(const IntParams& p, const uint8_t* rc, const uint8_t* cc, uint64_t row0,
                                uint64_t col0, uint32_t h, uint32_t w, const int32_t* res, Emit&& emit) {
  if (p.nbr_mode == 4) {
    IntLuts L;
    build_int_luts(p, &L);
    visit_kern_rows(p, L, rc, row0, h, w, res,
                    [&](uint32_t, uint32_t, uint32_t, uint32_t r, uint32_t c, uint32_t ctx, uint32_t sym) {
                      emit(r, c, ctx, sym);
                    });
    return;
  }
  visit_int_elems(p, rc, cc, row0, col0, h, w, res,
                  [&](uint32_t, uint32_t, uint32_t r, uint32_t c, uint32_t ctx, int32_t v) {
                    emit(r, c, ctx, make_token(p, v).tok);
                  });
}

template <typename Emit>
inline void visit_int_tokens(const IntParams& p, const uint8_t* rc, const uint8_t* cc, uint64_t row0, uint64_t col0,
                             uint32_t h, uint32_t w, const int32_t* res, Emit&& emit) {
  visit_int_tokens_at(p, rc, cc, row0, col0, h, w, res,
                      [&](uint32_t, uint32_t, uint32_t ctx, uint32_t tok) { emit(ctx, tok); });
}

// Int chunk: per step, the token group, the low extra bits of escaped
// tokens (nb >= 2), their high extra bits (nb >= 10). The entries are
// computed lane rectangle by lane rectangle (visit_int_elems: sequential
// rows, no per-lane cursor) into one run per lane (lane l's step t at
// l * steps + t, so the stores stay sequential and the tables stay in L1);
// the reverse pass hands them over a step at a time. cached: when not null,
// the chunk's ctx * stride + token lane by lane, each lane's steps in order
// (the statistics pass stored them), entries from flat[ctx * stride +
// token]; the contexts are then not computed again. plain: cached, and no
// token is an escape.
inline void encode_int_reverse(const IntParams& p, const uint8_t* rc, const uint8_t* cc, uint64_t row0,
                               uint64_t col0, uint32_t h, uint32_t w, const int32_t* res, const PackedTables& t0,
                               const uint16_t* cached, const uint32_t* flat, bool plain, RansEncoder* enc) {
  if (p.nbr_mode == 4) {
    encode_kern_rows_reverse(p, rc, row0, h, w, res, t0, enc);
    return;
  }
  const LaneSteps ls(h, w);
  const uint32_t* n = ls.n;
  const uint32_t steps = ls.steps, nmin = ls.nmin;
  if (plain) {
    // No escapes: one group per step, entries step-major (step t, lane l
    // at t * kLanes + l), filled 64 steps at a time so that the transposed
    // stores stay in L1. The steps where every lane takes a symbol are
    // then encoded straight from these entries.
    thread_local RawVector<uint32_t> sm;
    if (sm.size() < size_t{steps} * kLanes) sm.resize(size_t{steps} * kLanes);
    uint64_t off[kLanes + 1];
    lane_offsets(h, w, off);
    constexpr uint32_t kBlock = 64;
    const uint16_t* src_l[kLanes];
    for (uint32_t l = 0; l < kLanes; ++l) src_l[l] = cached + off[l];
    for (uint32_t t0 = 0; t0 < steps; t0 += kBlock) {
      const uint32_t t1 = std::min(steps, t0 + kBlock);
      if (t1 <= nmin) {
        // Every lane codes at these steps: sequential stores, each lane's
        // keys read in order.
        uint32_t* dst = sm.data() + size_t{t0} * kLanes;
        for (uint32_t t = t0; t < t1; ++t, dst += kLanes)
          for (uint32_t l = 0; l < kLanes; ++l) dst[l] = flat[src_l[l][t]];
        continue;
      }
      for (uint32_t l = 0; l < kLanes; ++l) {
        const uint16_t* src = cached + off[l];
        const uint32_t te = std::min(t1, n[l]);
        uint32_t t = t0;
        for (; t < te; ++t) sm[size_t{t} * kLanes + l] = flat[src[t]];
        for (; t < t1; ++t) sm[size_t{t} * kLanes + l] = 0;
      }
    }
    for (uint32_t t = steps; t-- > nmin;) enc->put_group_reverse(ls.mask(t), sm.data() + size_t{t} * kLanes);
    enc->put_full_groups_reverse(sm.data(), nmin);
    return;
  }
  // Escaped tokens are rare: their extra-bit entries go to a list.
  struct Esc {
    uint32_t t, l, lo, hi;  // hi: 0 when nb < 10
  };
  thread_local std::vector<uint32_t> ea;
  thread_local std::vector<Esc> esc;
  if (ea.size() < size_t{steps} * kLanes) ea.resize(size_t{steps} * kLanes);
  esc.clear();
  auto escape = [&](uint32_t l, uint32_t t, const IntToken& tk) {
    if (__builtin_expect(tk.nb < 2, 1)) return;
    const uint32_t lo = tk.nb - 1 < 8 ? tk.nb - 1 : 8;
    esc.push_back({t, l, RansEncoder::bits_entry(tk.extra & ((1u << lo) - 1), lo),
                   tk.nb >= 10 ? RansEncoder::bits_entry(tk.extra >> 8, tk.nb - 9) : 0u});
  };
  if (cached) {
    size_t k = 0;
    for (uint32_t l = 0; l < kLanes; ++l) {
      const LaneRect rect = lane_rect(h, w, l);
      uint32_t* el = ea.data() + size_t{l} * steps;
      uint32_t t = 0;
      for (uint32_t r = rect.r0; r < rect.r0 + rect.h; ++r) {
        const int32_t* row = res + uint64_t{r} * w;
        for (uint32_t c = rect.c0; c < rect.c0 + rect.w; ++c, ++t, ++k) {
          el[t] = flat[cached[k]];
          escape(l, t, make_token(p, row[c]));
        }
      }
    }
  } else {
    visit_int_elems(p, rc, cc, row0, col0, h, w, res,
                    [&](uint32_t l, uint32_t t, uint32_t, uint32_t, uint32_t ctx, int32_t v) {
                      const IntToken tk = make_token(p, v);
                      ea[size_t{l} * steps + t] = t0.at(ctx, tk.tok);
                      escape(l, t, tk);
                    });
  }
  std::sort(esc.begin(), esc.end(), [](const Esc& a, const Esc& b) { return a.t > b.t; });
  size_t k = 0;
  alignas(64) uint32_t sb[kLanes] = {}, sc[kLanes] = {};
  for (uint32_t t = steps; t-- > 0;) {
    const uint32_t ma = ls.mask(t);
    uint32_t mb = 0, mc = 0;
    for (; k < esc.size() && esc[k].t == t; ++k) {
      const Esc& e = esc[k];
      sb[e.l] = e.lo;
      mb |= 1u << e.l;
      if (e.hi) {
        sc[e.l] = e.hi;
        mc |= 1u << e.l;
      }
    }
    if (mc) enc->put_group_reverse(mc, sc);
    if (mb) enc->put_group_reverse(mb, sb);
    enc->put_group_reverse(ma, &ea[t], steps);
  }
}

template <typename Emit>
inline void walk_bytes(const BytesParams& p, uint32_t h, uint32_t w, const uint8_t* data, Emit&& emit) {
  LaneCursor cur[kLanes];
  const uint32_t eb = p.elem_bytes;
  const uint32_t steps = init_cursors(h, w, cur);
  for (uint32_t t = 0; t < steps; ++t) {
    for (uint32_t b = 0; b < eb; ++b) {
      for (uint32_t l = 0; l < kLanes; ++l) {
        if (t >= cur[l].n) continue;
        const uint64_t pos = (uint64_t{cur[l].r} * w + cur[l].c) * eb + b;
        const int left = cur[l].c > cur[l].rect.c0 ? data[pos - eb] : -1;
        emit(l, 0, bytes_ctx(p, b, left), data[pos]);
      }
    }
    for (uint32_t l = 0; l < kLanes; ++l)
      if (t < cur[l].n) advance(cur[l]);
  }
}

// ------------------------------------------------------------------ stats
// c * log2(c), from a table for the small counts most contexts hold: the
// entropy of counts c_i with total T is T log2 T - sum c_i log2 c_i.
inline double clog2c(uint64_t c) {
  constexpr size_t kN = 4096;
  static const std::array<double, kN> table = [] {
    std::array<double, kN> t{};
    for (size_t i = 1; i < kN; ++i) t[i] = static_cast<double>(i) * std::log2(static_cast<double>(i));
    return t;
  }();
  return c < kN ? table[c] : static_cast<double>(c) * std::log2(static_cast<double>(c));
}

// Estimated cost in bits of a context whose symbol counts total `total`
// over `nz` used symbols with sum c log2 c = `slog`: data at empirical
// entropy, scaled by `scale`, plus the table description. total log2 total
// is clog2c(total) (the same double: the same product, from the table below
// 4096).
inline double context_cost_of(uint64_t total, size_t nz, double slog, double scale) {
  if (nz == 0) return 1;
  const double ent = clog2c(total) - slog;
  // table: ~ (gap + compact frequency) codes per used symbol
  return ent * scale + (static_cast<double>(nz) * 9.0 + 4);
}

// The same from one context's n symbol counts.
template <typename T>
inline double context_cost(const T* c, size_t n, double scale) {
  uint64_t total = 0;
  size_t nz = 0;
  double slog = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!c[i]) continue;
    total += c[i];
    ++nz;
    slog += clog2c(c[i]);
  }
  return context_cost_of(total, nz, slog, scale);
}

// Symbol counts per (context, symbol) of a model's two table sets, each set
// one flat array.
struct Stats {
  std::vector<uint64_t> f0, f1;
  uint32_t n0 = 0, ns0 = 0, n1 = 0, ns1 = 0;  // contexts and alphabet of each set
  void init(uint32_t nctx0, uint32_t nsym0, uint32_t nctx1, uint32_t nsym1) {
    n0 = nctx0;
    ns0 = nsym0;
    n1 = nctx1;
    ns1 = nsym1;
    f0.assign(uint64_t{n0} * ns0, 0);
    f1.assign(uint64_t{n1} * ns1, 0);
  }
  void add(uint32_t set, uint32_t ctx, uint32_t sym) {
    if (set) f1[uint64_t{ctx} * ns1 + sym]++;
    else f0[uint64_t{ctx} * ns0 + sym]++;
  }
  // Context k's counts of a set.
  const uint64_t* at(uint32_t set, uint32_t k) const {
    return set ? f1.data() + uint64_t{k} * ns1 : f0.data() + uint64_t{k} * ns0;
  }
  std::vector<uint64_t> counts(uint32_t set, uint32_t k) const {
    const uint64_t* p = at(set, k);
    return std::vector<uint64_t>(p, p + (set ? ns1 : ns0));
  }
  uint32_t contexts(uint32_t set) const { return set ? n1 : n0; }
  // Estimated cost in bits of every context (context_cost).
  double cost(double scale) const {
    double bits = 0;
    for (uint32_t k = 0; k < n0; ++k) bits += context_cost(at(0, k), ns0, scale);
    for (uint32_t k = 0; k < n1; ++k) bits += context_cost(at(1, k), ns1, scale);
    return bits;
  }
};

// The statistics walk_float's symbols give, counted in raster order straight
// from the chunk's elements (counts do not depend on the order): an element
// has a left (top) neighbour unless its column (row) starts a lane
// rectangle (lane_rect). The contexts are float_e_ctx_lt's, float_sm_ctx's
// and float_joint_ctx's, looked up in per-exponent class tables for the
// elements with both neighbours (their class clamps are unpredictable
// branches), computed by those functions at the lane rectangles' edges.
template <uint32_t B>
inline void count_float_b(const FloatParams& p, uint32_t h, uint32_t w, const uint8_t* bytes, Stats* st) {
  std::vector<uint8_t> col_start(w, 0), row_start(h, 0);
  for (uint32_t l = 0; l < kLanes; ++l) {
    const LaneRect rect = lane_rect(h, w, l);
    if (rect.c0 < w) col_start[rect.c0] = 1;
    if (rect.r0 < h) row_start[rect.r0] = 1;
  }
  const uint32_t nes = 1u << p.eb, mb = p.mb, emask = nes - 1;
  // cls[x]: the class of exponent x (or of the rounded mean of two, emode
  // 2): clampi(x - elo, 0, classes - 1), kJointClasses classes in emode 4.
  // smc[e * 3 + left sign class]: float_sm_ctx.
  thread_local std::vector<uint32_t> cls, smc;
  cls.resize(nes);
  const int ncls = p.emode == 4 ? kJointClasses : p.ne;
  for (uint32_t x = 0; x < nes; ++x) cls[x] = static_cast<uint32_t>(clampi(static_cast<int>(x) - p.elo, 0, ncls - 1));
  uint64_t* const f0 = st->f0.data();
  uint64_t* const f1 = st->f1.data();
  const uint64_t ns0 = st->ns0, ns1 = st->ns1;
  if (float_joint(p)) {
    for (uint32_t r = 0; r < h; ++r) {
      const uint64_t row = uint64_t{r} * w;
      uint32_t left_ctx = 0;  // float_joint_ctx of the next element's left neighbour
      for (uint32_t c = 0; c < w; ++c) {
        const FloatFields f = float_fields(p, float_elem<B>(bytes, row + c));
        f0[(col_start[c] ? 0u : left_ctx) * ns0 + float_joint_sym(p, f.e, f.sm)]++;
        left_ctx = 1u + 2u * cls[f.e] + (f.sm >> p.k);
      }
    }
    return;
  }
  smc.resize(size_t{nes} * 3);
  for (uint32_t e = 0; e < nes; ++e)
    for (int ls = 0; ls < 3; ++ls) smc[e * 3 + static_cast<uint32_t>(ls)] = float_sm_ctx(p, e, ls);
  const uint32_t ne = p.ne;
  // float_e_ctx_lt for l, t >= 0.
  auto ectx_both = [&](uint32_t l, uint32_t t) -> uint32_t {
    switch (p.emode) {
      case 0: return 0;
      case 1: return cls[l];
      case 3: return cls[t];
      case 4: return 1u + cls[l] * kJointClasses + cls[t];
      default: {
        const uint32_t act = static_cast<uint32_t>(l - t + 1) > 2u;  // |l - t| > 1
        return act * ne + cls[(l + t + 1) >> 1];
      }
    }
  };
  for (uint32_t r = 0; r < h; ++r) {
    const bool has_t = !row_start[r];
    const uint64_t row = uint64_t{r} * w;
    int left_e = -1;
    uint32_t left_sign = 0;
    for (uint32_t c = 0; c < w; ++c) {
      const uint64_t i = row + c;
      const bool has_l = !col_start[c];
      const FloatFields f = float_fields(p, float_elem<B>(bytes, i));
      const uint32_t e = f.e;
      uint32_t ectx;
      if (__builtin_expect(has_l && has_t, 1)) {
        ectx = ectx_both(static_cast<uint32_t>(left_e), (float_elem<B>(bytes, i - w) >> mb) & emask);
      } else {
        ectx = p.emode == 0 ? 0u
                            : float_e_ctx_lt(p, has_l ? left_e : -1,
                                             has_t ? static_cast<int>((float_elem<B>(bytes, i - w) >> mb) & emask) : -1);
      }
      f0[ectx * ns0 + e]++;
      f1[smc[e * 3 + (has_l ? left_sign : 0u)] * ns1 + f.sm]++;
      left_e = static_cast<int>(e);
      left_sign = 1 + (f.sm >> p.k);
    }
  }
}

inline void count_float(const FloatParams& p, uint32_t h, uint32_t w, const uint8_t* bytes, Stats* st) {
  switch (p.elem_bytes) {
    case 1: count_float_b<1>(p, h, w, bytes, st); break;
    case 2: count_float_b<2>(p, h, w, bytes, st); break;
    default: count_float_b<4>(p, h, w, bytes, st); break;
  }
}

// A table at 9-bit precision, as multiples of 8 of the coder's 4096: the
// decoders then find a slot's entry among 512 a context (2 KiB instead of
// 16, so that a tensor's tables stay in cache). Kernel-row tables
// (nbr_mode 4, ModelView::krow_ent) always; 4-bit and uint8 code tables
// and float tables (ModelView::ent8) where they cost little (build_tables).
inline FreqTable x8_table(const std::vector<uint64_t>& c) {
  FreqTable t = normalize_counts(c, 9);
  for (auto& f : t.freq) f = static_cast<uint16_t>(f * 8);
  t.P = kMaxProbBits;
  t.build_start();
  FreqTable q = choose_compact_table(c, t);
  for (auto f : q.freq)
    if (f % 8) return t;
  return q;
}

// 4-bit and uint8 codes and floats take 9-bit tables (x8_table) when the
// tensor's tables and codes then cost at most this much more (estimated
// bits). Measured on the shared files: isnet-medium.rtn-int4 +0.01%
// (16-50 token alphabets lose almost nothing at 9 bits), 1.4x faster on
// the avx2 path; isnet-medium.f16 +0.14%, 1.23x faster (most of its
// tensors' joint 256-symbol tables pass; at a 0.3% slack few did: +0.001%,
// 1.10x); the other float files +0.1% or less. int8 codes keep 12-bit
// tables (their 256-value alphabets would cost 2.7%).
inline constexpr double kX8TableSlack = 0.01;

// Whether every table of s goes to 9 bits: 4-bit and uint8 codes of the
// forms the vector loops read entries for, and floats, within
// kX8TableSlack.
inline bool x8_tables_pay(const Stats& s, const TensorModel& m) {
  if (m.kind == ModelKind::kInt) {
    if (m.ip.nbr_mode != 0 && m.ip.nbr_mode != 3) return false;
    if (m.ip.sub != kIntNibble && m.ip.sub != kIntU8) return false;
  } else if (m.kind != ModelKind::kFloat) {
    return false;
  }
  double exact = 0, x8 = 0;
  for (uint32_t set = 0; set < 2; ++set)
    for (uint32_t k = 0; k < s.contexts(set); ++k) {
      const std::vector<uint64_t> c = s.counts(set, k);
      uint64_t n = 0;
      for (uint64_t v : c) n += v;
      if (n == 0) continue;  // the same empty table either way
      const FreqTable te = choose_compact_table(c, normalize_counts(c, kMaxProbBits));
      const FreqTable t8 = x8_table(c);
      exact += table_cost_bits(c, te) + table_size_bits(te);
      x8 += table_cost_bits(c, t8) + table_size_bits(t8);
    }
  return x8 <= exact * (1.0 + kX8TableSlack);
}

// x8_tables: the tables may go to 9 bits where that costs little (else
// only kernel-row tables do).
inline void build_tables(const Stats& s, TensorModel* m, bool x8_tables = true) {
  m->t0.clear();
  m->t1.clear();
  const bool x8 = (m->kind == ModelKind::kInt && m->ip.nbr_mode == 4) || (x8_tables && x8_tables_pay(s, *m));
  for (uint32_t set = 0; set < 2; ++set) {
    for (uint32_t k = 0; k < s.contexts(set); ++k) {
      const std::vector<uint64_t> c = s.counts(set, k);
      (set ? m->t1 : m->t0)
          .push_back(x8 ? x8_table(c) : choose_compact_table(c, normalize_counts(c, kMaxProbBits)));
    }
  }
  m->finalize();
}

// ------------------------------------------------------------------ chunk access
struct ChunkRef {
  uint64_t index, row0, col0, h, w;
  const uint8_t* bytes;  // chunk's original bytes
  uint64_t nbytes;
};

inline ChunkRef chunk_ref(const TensorGeometry& g, const uint8_t* data, uint64_t i) {
  ChunkRef c{};
  c.index = i;
  g.chunk_rect(i, &c.row0, &c.col0, &c.h, &c.w);
  const uint64_t off = (c.row0 * g.cols + c.col0) * g.elem_bits / 8;
  c.bytes = data ? data + off : nullptr;  // callers that need only the rectangle pass null
  c.nbytes = c.h * c.w * g.elem_bits / 8;
  return c;
}

// Chunks used to choose parameters: spread across the tensor, up to
// ~max_elems elements.
inline std::vector<uint64_t> sample_chunks(const TensorGeometry& g, uint64_t max_elems) {
  const uint64_t n = g.num_chunks();
  const uint64_t per = std::max<uint64_t>(1, g.chunk_rows * g.chunk_cols);
  uint64_t want = std::max<uint64_t>(1, max_elems / per);
  std::vector<uint64_t> out;
  if (want >= n) {
    for (uint64_t i = 0; i < n; ++i) out.push_back(i);
  } else {
    for (uint64_t k = 0; k < want; ++k) out.push_back(k * n / want);
  }
  return out;
}

struct FloatLayout {
  uint8_t bytes, eb, mb;
};

inline constexpr uint32_t kMaxWideContexts = 24;
// Int tensors with fewer elements search a reduced candidate set (choose_int)
// and no tile tools (encode_tensor).
inline constexpr uint64_t kSmallIntElems = 16384;
// A small int tensor skips its model where its fallback (zstd level 1 or
// raw bytes) is within this fraction above the model's floor (encode_tensor).
inline constexpr double kSmallFloorSlack = 0.01;

// A tensor's values (codes -> signed values), row-major over its grid.
using IntGrid = RawVector<int32_t>;

// ------------------------------------------------------------------ entry points
// Model choice (choose_float.cpp, choose_int.cpp).
bool float_layout(DType t, FloatLayout* f);
void choose_float(const TensorGeometry& g, const uint8_t* data, FloatLayout fl, bool format_2_x, TensorModel* m);
int32_t code_at(uint32_t sub, const uint8_t* bytes, uint64_t i);
void int_values(const IntParams& p, const TensorGeometry& g, const uint8_t* data, const AuxInput& aux, IntGrid* v);
const int32_t* residuals_of(const TensorGeometry& g, const IntGrid& vals, const ChunkRef& c,
                            const std::vector<uint8_t>* tile_map, std::vector<int32_t>* buf);
// data: the tensor's codes (int_values' input), or null.
double int_order0_bytes(const IntParams& p, const IntGrid& vals, const uint8_t* data);
// The tokens' entropy given the left neighbour's sign class, in bytes: what
// the one-candidate model of a small tensor (choose_int) can at best code
// them in (escape bits included), before its tables.
double int_left_sign_bytes(const IntParams& p, const TensorGeometry& g, const IntGrid& vals);
// direct_counts: every candidate counted from the features, as the
// activity histograms would count them (tests compare the two).
void choose_int(const TensorGeometry& g, const IntGrid& vals, IntParams base, bool allow_phase,
                TensorModel* m, std::vector<uint8_t>* rc, std::vector<uint8_t>* cc, uint32_t* max_abs,
                bool direct_counts = false, bool kernel_rows = true);
void choose_bytes(const TensorGeometry& g, const uint8_t* data, uint32_t eb, TensorModel* m);
// Chunk encoding (tensor_encode.cpp, chunk_encode.cpp).
void append_u32(std::vector<uint8_t>& v, uint32_t x);
EncodedChunk pick_chunk(const ChunkRef& c, std::vector<uint8_t>&& model_payload, const EncodeOptions& opt,
                        std::vector<uint8_t>* z1 = nullptr);

void init_stats(const TensorModel& m, Stats* st);
void add_tensor_stats(const TensorGeometry& g, const uint8_t* data, const IntGrid& vals,
                      const TensorModel& m, const std::vector<std::vector<uint8_t>>& maps,
                             const std::vector<char>& has_map, Stats* st);
// Float chunks up to this many decoded bytes use the raw tail (flag bit 1).
constexpr uint64_t kRawTailMaxChunk = 128 * 1024;

// cached (int models, may be null): every element's ctx * nsym + token in
// visit_int_elems order, chunk after chunk, for chunks without a tile map.
// z1 (may be null): per chunk, its level 1 zstd output where the tool
// search made it (pick_chunk).
void encode_chunks(const TensorGeometry& g, const uint8_t* data, const IntGrid& vals,
                          const TensorModel& m, const std::vector<std::vector<uint8_t>>& maps,
                          const std::vector<char>& has_map, const EncodeOptions& opt, EncodedTensor* et,
                          const uint16_t* cached = nullptr, const char* cached_escapes = nullptr,
                          uint32_t cached_stride = 0, std::vector<std::vector<uint8_t>>* z1 = nullptr);

// Whether 4-bit codes coded as their distance from the group's zero point
// (aux) beat the codes less 8: the order-0 entropy of the tokens each gives,
// from the (code, zero point) pairs of up to ~2^18 elements (whole rows

}  // namespace wcodec
