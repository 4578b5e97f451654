// codec/decompress/chunk_decode_hwy_float.cpp — the float chunk decoder of
// the avx2 and neon decoder paths (include/wcodec/cpu.h), written with
// Google Highway: one source, an AVX2 instance (x86-64) and a NEON one
// (aarch64; 4-lane vectors, 128-bit transposes in the output stage).
//
// Why: the AVX-512 decoders (chunk_decode_simd*.cpp) need VBMI2; without
// them a float chunk took the scalar reference decoder (chunk_decode.h).
//
// Method (2- and 4-byte floats; the layout of chunk_decode_simd.cpp): the
// 32 lanes' states are 4 vectors of 8 lanes, unrolled; each step's 32
// elements (their bits but the raw mantissa bits) are one row of a
// lane-major buffer, so a lane's left neighbour stays in registers and its
// top one is a plain load W steps back (W or W + 1 for ragged lanes); the
// only gathers are the table lookups (ModelView::slot_all / slot1_all:
// packed 32-bit slot entries, symbol | freq - 1 | bias). Renormalization
// hands the next stream words to the lanes that need one in lane order:
// per vector, the 8 words at the cursor permuted by a 256-entry table of
// each mask's prefix counts (the expand of vpexpandd). Joint symbols (emode
// 5) take one lookup per element. Same-rectangle chunks of one geometry
// and model family decode 2 or 3 at a time (decode_float_group_hwy, phase
// by phase, so that their lookups overlap). A pass then transposes blocks
// of 8 steps x 8 lanes into raster order, and one ORs in the raw bits (a
// byte shuffle per 8 fields up to 15 bits, else 4-byte gathers).
//
// Other chunks (1-byte floats) keep the first form of this decoder: lane
// arrays processed as vectors, contexts with a gather of the exponent grid,
// word indices from a prefix-count table and a gather, the grids assembled
// by the reference code.
//
// Every read is bounded: the stream's last words are read from a
// zero-padded copy, the buffers carry padding for the loads past their end,
// a stream that runs short or ends with words left, or a lane that does not
// end in its initial state, is rejected (0), as the reference rejects it.
//
// Static dispatch: foreach_target.h compiles the body once per enabled
// Highway target; the entry points call the AVX2 instance on x86-64 and the
// NEON one on aarch64 explicitly (hwy_path_i.h; the path is chosen by
// cpu_path(), not by Highway's best target).
// Thread-safety: pure functions over their arguments and the caller's
// scratch.
#include <cstdint>
#include <cstring>
#include <type_traits>

// Only the targets a path uses (and the baseline, which foreach_target
// always compiles): x86 AVX2, Arm NEON.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS \
  (HWY_AVX3 | HWY_AVX3_DL | HWY_SSSE3 | HWY_SSE4 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "chunk_decode_hwy_float.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "chunk_decode_hwy.h"
#include "chunk_decode_hwy_words.h"
#include "chunk_decode_simd.h"
#include "simd_env.h"  // vector_gathers

#ifndef WCODEC_HWY_FLOAT_ONCE
#define WCODEC_HWY_FLOAT_ONCE
namespace wcodec {
namespace hwy_detail {
using hwy_words::kPrefix;

// Same-rectangle loop (FastSymbols): kExpand[m][i] is the index of the word
// lane i of a vector takes when the lanes of mask m renormalize (the count
// of set bits of m below bit i), the lane permutation that emulates
// vpexpandd.
struct ExpandTable {
  alignas(8) uint8_t v[256][8];
  constexpr ExpandTable() : v() {
    for (int m = 0; m < 256; ++m) {
      int c = 0;
      for (int i = 0; i < 8; ++i) {
        v[m][i] = static_cast<uint8_t>(c);
        c += (m >> i) & 1;
      }
    }
  }
};
inline constexpr ExpandTable kExpand{};

// The word stream of the same-rectangle loop. A step takes at most 64
// words (two renormalizations of 32 lanes) and each renormalizing vector
// reads 8 words at the cursor, so while pos + kStepRead <= n a step reads in
// bounds; before the last steps the remaining words move to the zeroed pad
// (a stream that runs short then decodes zeros and fails the final checks).
inline constexpr uint32_t kStepRead = 64 + 8;
struct StepWords {
  const uint8_t* p;  // word 0 of the current base
  uint32_t n, pos;   // words at p; next word
  bool in_pad;
  alignas(32) uint8_t pad[4 * kStepRead + 32];
};
inline void step_words_open(StepWords* w, const uint8_t* rans, uint32_t rans_len) {
  w->p = rans + 4 * kLanes;
  w->n = (rans_len - 4 * kLanes) / 2;
  w->pos = 0;
  w->in_pad = false;
}
// Before a step with pos + kStepRead > n. False: the stream ran short.
inline bool step_words_tail(StepWords* w) {
  if (w->pos > w->n) return false;
  if (!w->in_pad) {
    std::memset(w->pad, 0, sizeof w->pad);
    std::memcpy(w->pad, w->p + 2 * uint64_t{w->pos}, 2 * uint64_t{w->n - w->pos});
    w->p = w->pad;
    w->n -= w->pos;
    w->pos = 0;
    w->in_pad = true;
  }
  return true;
}

// The word stream of the general loop (reads up to 34 words past pos).
using hwy_words::Words;
using hwy_words::words_open;
inline bool words_ready(Words* w) { return hwy_words::words_ready(w, 40); }
}  // namespace hwy_detail
}  // namespace wcodec
#endif  // WCODEC_HWY_FLOAT_ONCE

HWY_BEFORE_NAMESPACE();
namespace wcodec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#include "chunk_decode_hwy_gather-inl.h"
using hwy_detail::Words;

// Lane state of the float loop (lane l at index l).
struct FloatLanes {
  HWY_ALIGN uint32_t x[kLanes];
  HWY_ALIGN int32_t r[kLanes], c[kLanes], r0[kLanes], c0[kLanes], cend[kLanes], n[kLanes];
  HWY_ALIGN int32_t le[kLanes], lsm[kLanes], oe[kLanes], err[kLanes], act[kLanes], pos[kLanes];
};

// Renormalizes lanes [b, b + N) whose act[] is set, taking words in lane
// order.
template <class D>
HWY_INLINE void renorm_vec(D d, FloatLanes& L, size_t b, Words& w) {
  const hn::RebindToUnsigned<D> du;
  const auto x = hn::Load(du, L.x + b);
  const auto act = hn::Ne(hn::Load(d, L.act + b), hn::Zero(d));
  const auto need = hn::And(act, hn::RebindMask(d, hn::Lt(x, hn::Set(du, kRansL))));
  const size_t N = hn::Lanes(d);
  HWY_ALIGN int32_t pre_buf[64];
  const int32_t* pre;
  if (N <= 8) {
    uint8_t bits[8] = {};
    hn::StoreMaskBits(d, need, bits);
    pre = hwy_detail::kPrefix.v[bits[0]];
  } else {
    HWY_ALIGN int32_t nv[64];
    hn::Store(hn::VecFromMask(d, need), d, nv);
    int32_t cnt = 0;
    for (size_t i = 0; i < N; ++i) {
      pre_buf[i] = cnt;
      cnt += nv[i] != 0;
    }
    pre = pre_buf;
  }
  const auto offs = hn::Add(hn::Set(d, static_cast<int32_t>(2 * (w.pos - w.off))),
                            hn::ShiftLeft<1>(hn::LoadU(d, pre)));
  const auto wv = hn::And(GatherOff32<false>(d, reinterpret_cast<const int32_t*>(w.p), offs), hn::Set(d, 0xFFFF));
  const auto nx = hn::Or(hn::ShiftLeft<16>(x), hn::BitCast(du, wv));
  hn::Store(hn::IfThenElse(hn::RebindMask(du, need), nx, x), du, L.x + b);
  w.pos += static_cast<uint32_t>(hn::CountTrue(d, need));
}

// One rANS step of lanes [b, b + N) with act[] set, contexts ctx, from
// packed slot entries; returns the entries' symbols (low byte).
template <class D>
HWY_INLINE hn::Vec<D> rans_vec(D d, FloatLanes& L, size_t b, hn::Vec<D> ctx, hn::Mask<D> act,
                               const uint32_t* slots, bool e8) {
  const hn::RebindToUnsigned<D> du;
  const auto x = hn::Load(du, L.x + b);
  const auto slot = hn::And(x, hn::Set(du, 4095u));
  const auto idx = e8 ? hn::Add(hn::ShiftLeft<9>(ctx), hn::BitCast(d, hn::ShiftRight<3>(slot)))
                      : hn::Add(hn::ShiftLeft<12>(ctx), hn::BitCast(d, slot));
  const auto e = hn::BitCast(du, GatherI32<false>(d, reinterpret_cast<const int32_t*>(slots), idx));
  const auto freq = hn::Add(hn::And(hn::ShiftRight<8>(e), hn::Set(du, 4095u)), hn::Set(du, 1u));
  // (ModelView::ent8: the entry holds 4096 - start, the offset is slot + that, mod 4096.)
  const auto off = e8 ? hn::And(hn::Add(slot, hn::ShiftRight<20>(e)), hn::Set(du, 4095u)) : hn::ShiftRight<20>(e);
  const auto nx = hn::Add((freq * hn::ShiftRight<12>(x)), off);
  hn::Store(hn::IfThenElse(hn::RebindMask(du, act), nx, x), du, L.x + b);
  return hn::BitCast(d, hn::And(e, hn::Set(du, 0xFFu)));
}

template <class D>
HWY_INLINE hn::Vec<D> clamp_vec(D d, hn::Vec<D> v, int32_t hi) {
  return hn::Min(hn::Max(v, hn::Zero(d)), hn::Set(d, hi));
}

// decode_float_symbols_g's result for this chunk, with e_grid padded by 2
// readable bytes. Returns false for a malformed stream.
bool FloatSymbols(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len, uint16_t* e_grid,
                  uint8_t* sm_grid, uint32_t* x_tail) {
  const hn::ScalableTag<int32_t> d;
  const size_t N = hn::Lanes(d);
  const FloatParams& p = m.fp;
  const int32_t w = static_cast<int32_t>(cv.w);
  FloatLanes L;
  Words ws;
  hwy_detail::words_open(&ws, rans, rans_len);
  int32_t steps = 0;
  for (uint32_t l = 0; l < kLanes; ++l) {
    const LaneCursor k = lane_cursor(cv.h, cv.w, l);
    L.x[l] = load_elem(rans + 4 * l, 4);
    L.r[l] = static_cast<int32_t>(k.r);
    L.c[l] = static_cast<int32_t>(k.c);
    L.r0[l] = static_cast<int32_t>(k.rect.r0);
    L.c0[l] = static_cast<int32_t>(k.rect.c0);
    L.cend[l] = static_cast<int32_t>(k.rect.c0 + k.rect.w);
    L.n[l] = static_cast<int32_t>(k.n);
    L.le[l] = L.lsm[l] = L.oe[l] = L.err[l] = L.act[l] = 0;
    steps = k.n > static_cast<uint32_t>(steps) ? static_cast<int32_t>(k.n) : steps;
  }
  const bool joint = float_joint(p);
  if (steps && (m.n0 == 0 || (!joint && m.n1 == 0))) return false;
  const auto v0 = hn::Zero(d);
  const auto vneg = hn::Set(d, -1);
  const auto vn0 = hn::Set(d, static_cast<int32_t>(m.n0));
  const auto vn1 = hn::Set(d, static_cast<int32_t>(m.n1));
  const auto vn0m1 = hn::Set(d, static_cast<int32_t>(m.n0) - 1);
  const auto vn1m1 = hn::Set(d, static_cast<int32_t>(m.n1) - 1);
  const auto vw = hn::Set(d, w);
  const int32_t elo = p.elo, ne = p.ne, k = p.k, eb = p.eb;
  auto renorm_all = [&]() -> bool {
    if (!hwy_detail::words_ready(&ws)) return false;
    for (size_t b = 0; b < kLanes; b += N) renorm_vec(d, L, b, ws);
    return true;
  };
  auto store_grid = [&](auto* grid, const int32_t* val) {
    for (uint32_t l = 0; l < kLanes; ++l)
      if (L.act[l]) grid[L.pos[l]] = static_cast<std::remove_reference_t<decltype(grid[0])>>(val[l]);
  };
  auto advance_all = [&]() {
    for (size_t b = 0; b < kLanes; b += N) {
      const auto act = hn::Ne(hn::Load(d, L.act + b), v0);
      const auto c1 = hn::Add(hn::Load(d, L.c + b), hn::Set(d, 1));
      const auto wrap = hn::Eq(c1, hn::Load(d, L.cend + b));
      const auto r = hn::Load(d, L.r + b);
      hn::Store(hn::IfThenElse(act, hn::IfThenElse(wrap, hn::Load(d, L.c0 + b), c1), hn::Load(d, L.c + b)), d,
                L.c + b);
      hn::Store(hn::IfThenElse(hn::And(act, wrap), hn::Add(r, hn::Set(d, 1)), r), d, L.r + b);
    }
  };
  for (int32_t t = 0; t < steps; ++t) {
    const auto vt = hn::Set(d, t);
    // Exponents (joint: whole symbols) of every lane.
    for (size_t b = 0; b < kLanes; b += N) {
      const auto act = hn::Lt(vt, hn::Load(d, L.n + b));
      hn::Store(hn::VecFromMask(d, act), d, L.act + b);
      const auto r = hn::Load(d, L.r + b), c = hn::Load(d, L.c + b);
      const auto has_l = hn::Gt(c, hn::Load(d, L.c0 + b));
      const auto le = hn::Load(d, L.le + b);
      const auto lsm = hn::Load(d, L.lsm + b);
      const auto at = hn::Add((r * vw), c);
      hn::Store(at, d, L.pos + b);
      hn::Vec<decltype(d)> ctx = v0;
      if (joint) {
        ctx = hn::IfThenElseZero(
            has_l, hn::Add(hn::Add(hn::Set(d, 1), hn::ShiftLeft<1>(clamp_vec(d, hn::Sub(le, hn::Set(d, elo)), ne - 1))),
                           hn::ShiftRightSame(lsm, k)));
      } else if (p.emode != 0) {
        const auto has_t = hn::And(act, hn::Gt(r, hn::Load(d, L.r0 + b)));
        const auto top_at = hn::IfThenElseZero(has_t, hn::Sub(at, vw));
        const auto top = hn::And(
            GatherOff32<false>(d, reinterpret_cast<const int32_t*>(e_grid), hn::ShiftLeft<1>(top_at)),
            hn::Set(d, 0xFFFF));
        const auto lv = hn::IfThenElse(has_l, le, vneg);
        const auto tv = hn::IfThenElse(has_t, top, vneg);
        const auto any = hn::Or(has_l, has_t);
        if (p.emode == 4) {
          const int32_t J = kJointClasses;
          const auto ql = clamp_vec(d, hn::Sub(lv, hn::Set(d, elo)), J - 1);
          const auto qt = clamp_vec(d, hn::Sub(tv, hn::Set(d, elo)), J - 1);
          const auto both = hn::Add(hn::Set(d, 1), hn::Add((ql * hn::Set(d, J)), qt));
          const auto one =
              hn::Add(hn::Set(d, 1 + J * J), hn::IfThenElse(has_l, ql, hn::Add(hn::Set(d, J), qt)));
          ctx = hn::IfThenElseZero(any, hn::IfThenElse(hn::And(has_l, has_t), both, one));
        } else {
          auto pred = p.emode == 3 ? hn::IfThenElse(has_t, tv, lv) : hn::IfThenElse(has_l, lv, tv);
          auto a = v0;
          if (p.emode != 1 && p.emode != 3) {
            const auto both = hn::And(has_l, has_t);
            pred = hn::IfThenElse(both, hn::ShiftRight<1>(hn::Add(hn::Add(lv, tv), hn::Set(d, 1))), pred);
            const auto diff = hn::Sub(lv, tv);
            const auto far = hn::Or(hn::Gt(diff, hn::Set(d, 1)), hn::Lt(diff, hn::Set(d, -1)));
            a = hn::IfThenElseZero(hn::And(both, far), hn::Set(d, ne));
          }
          ctx = hn::IfThenElseZero(any, hn::Add(a, clamp_vec(d, hn::Sub(pred, hn::Set(d, elo)), ne - 1)));
        }
      }
      const auto bad = hn::And(act, hn::Gt(ctx, vn0m1));
      hn::Store(hn::Or(hn::Load(d, L.err + b), hn::VecFromMask(d, bad)), d, L.err + b);
      ctx = hn::IfThenElseZero(hn::Lt(ctx, vn0), ctx);
      const auto s = rans_vec(d, L, b, ctx, act, m.ent8 ? m.ent8 : m.slot_all, m.ent8 != nullptr);
      if (joint) {
        const auto e = hn::And(hn::ShiftRightSame(s, k), hn::Set(d, (1 << eb) - 1));
        const auto sm = hn::Or(hn::ShiftLeftSame(hn::ShiftRightSame(s, eb + k), k), hn::And(s, hn::Set(d, (1 << k) - 1)));
        hn::Store(hn::IfThenElse(act, e, le), d, L.le + b);
        hn::Store(hn::IfThenElse(act, sm, lsm), d, L.lsm + b);
      } else {
        hn::Store(hn::IfThenElse(act, s, hn::Load(d, L.oe + b)), d, L.oe + b);
      }
    }
    if (joint) {
      store_grid(e_grid, L.le);
      store_grid(sm_grid, L.lsm);
    } else {
      store_grid(e_grid, L.oe);
    }
    if (!renorm_all()) return false;
    if (!joint) {
      // Sign / high mantissa symbols.
      for (size_t b = 0; b < kLanes; b += N) {
        const auto act = hn::Ne(hn::Load(d, L.act + b), v0);
        const auto has_l = hn::Gt(hn::Load(d, L.c + b), hn::Load(d, L.c0 + b));
        const auto oe = hn::Load(d, L.oe + b);
        const auto ls = hn::IfThenElseZero(has_l, hn::Add(hn::Set(d, 1), hn::ShiftRightSame(hn::Load(d, L.lsm + b), k)));
        auto ctx = clamp_vec(d, hn::Sub(oe, hn::Set(d, p.mlo)), p.nm - 1);
        if (p.sign_ctx) ctx = hn::Add((ctx * hn::Set(d, 3)), ls);
        const auto bad = hn::And(act, hn::Gt(ctx, vn1m1));
        hn::Store(hn::Or(hn::Load(d, L.err + b), hn::VecFromMask(d, bad)), d, L.err + b);
        ctx = hn::IfThenElseZero(hn::Lt(ctx, vn1), ctx);
        const auto s = rans_vec(d, L, b, ctx, act, m.ent8 ? m.ent8_1 : m.slot1_all, m.ent8 != nullptr);
        hn::Store(hn::IfThenElse(act, s, hn::Load(d, L.lsm + b)), d, L.lsm + b);
        hn::Store(hn::IfThenElse(act, oe, hn::Load(d, L.le + b)), d, L.le + b);
      }
      store_grid(sm_grid, L.lsm);
      if (!renorm_all()) return false;
    }
    advance_all();
  }
  if (ws.pos != ws.n) return false;
  for (uint32_t l = 0; l < kLanes; ++l) {
    if (L.err[l] || L.x[l] < kRansL || L.x[l] - kRansL > (x_tail ? 0xFFFFu : 0u)) return false;
    if (x_tail) x_tail[l] = L.x[l] - kRansL;
  }
  return true;
}

// float_assemble_range(p, 0, n, raw, 0, ...) in vectors: each lane's raw
// field by a 4-byte gather at its byte and a variable shift (the reads of
// get_bits, which float_raw_ok bounds), the rest by the reference.
void AssembleFloats(const FloatParams& p, uint64_t n, const uint8_t* raw, const uint16_t* e_grid,
                    const uint8_t* sm_grid, uint8_t* out) {
  const hn::ScalableTag<int32_t> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const hn::Rebind<uint16_t, decltype(d)> d16;
  const hn::Rebind<uint8_t, decltype(d)> d8;
  const size_t N = hn::Lanes(d);
  const uint32_t rawb = float_raw_bits(p);
  const int eb = p.eb, mb = p.mb, k = p.k;
  const auto jr = hn::Mul(hn::Iota(d, 0), hn::Set(d, static_cast<int32_t>(rawb)));
  const auto lo_mask = hn::Set(du, rawb >= 32 ? ~0u : (1u << rawb) - 1u);
  const auto mh_mask = hn::Set(d, (1 << k) - 1);
  uint64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto e = hn::PromoteTo(d, hn::LoadU(d16, e_grid + i));
    const auto sm = hn::PromoteTo(d, hn::LoadU(d8, sm_grid + i));
    auto v = hn::Or(hn::ShiftLeftSame(hn::ShiftRightSame(sm, k), eb + mb), hn::ShiftLeftSame(e, mb));
    v = hn::Or(v, hn::ShiftLeftSame(hn::And(sm, mh_mask), static_cast<int>(rawb)));
    if (rawb) {
      const uint64_t b0 = i * rawb;
      const auto bitpos = hn::Add(jr, hn::Set(d, static_cast<int32_t>(b0 & 7)));
      const auto word = hn::BitCast(du, GatherOff32<false>(d, reinterpret_cast<const int32_t*>(raw + (b0 >> 3)),
                                                         hn::ShiftRight<3>(bitpos)));
      const auto lo = hn::And(hn::Shr(word, hn::BitCast(du, hn::And(bitpos, hn::Set(d, 7)))), lo_mask);
      v = hn::Or(v, hn::BitCast(d, lo));
    }
    if (p.elem_bytes == 4) {
      hn::StoreU(v, d, reinterpret_cast<int32_t*>(out + 4 * i));
    } else if (p.elem_bytes == 2) {
      hn::StoreU(hn::DemoteTo(d16, v), d16, reinterpret_cast<uint16_t*>(out + 2 * i));
    } else {
      hn::StoreU(hn::DemoteTo(d8, v), d8, out + i);
    }
  }
  float_assemble_range(p, i, n, raw, 0, e_grid, sm_grid, out);
}


// ---------------------------------------------------------------- same-rectangle loop
// When all 32 lanes have the same rectangle (W columns x rows; every lane
// active at every step, the geometry scalar: row t / W, column t % W of
// every lane), the lanes decode into a lane-major buffer, each step's 32
// elements (their bits but the raw mantissa bits) one contiguous row of
// 16-bit words: the left neighbour stays in registers, the top one is a
// plain load W steps back. The states are kNV vectors of kN lanes (4 x 8 on
// AVX2), unrolled; renormalization hands each vector its words with one
// lane permutation (kExpand) of the next 8 words. NC chunks of one geometry
// (a group) step together, phase by phase, so that their gathers overlap.
// A pass then transposes blocks of 8 steps x 8 lanes into the raster
// order, and one ORs in the raw bits.
// AVX2: 4 vectors of 8 lanes; NEON: 8 vectors of 4 lanes (the expand
// table's rows serve both: a 4-lane mask is below 16 and its first 4
// entries are its prefix counts).
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_NEON
#define WCODEC_HWY_FAST 1
using DU = hn::ScalableTag<uint32_t>;
using DI = hn::RebindToSigned<DU>;
using VU = hn::Vec<DU>;
using VI = hn::Vec<DI>;
constexpr size_t kN = hn::MaxLanes(DU());
constexpr size_t kNV = kLanes / kN;
static_assert((kN == 8 || kN == 4) && kNV * kN == kLanes, "the expand table serves 4- and 8-lane vectors");

struct FastConsts {
  // Packed slot entries: exponents (joint symbols), sign / mantissa; with
  // e8 1/8-slot entries (ModelView::ent8, the loops' E8 parameter).
  const uint32_t *se, *ss;
  int32_t elo, ne, mlo, nm, eb, mb, k, rawb;
  bool sign_ctx, e8;
};

// (Explicit constructors carry the target attribute: GCC builds implicit
// ones without it, and the vector members' constructors then fail to
// inline on NEON.)
struct FastState {
  HWY_ATTR FastState() {}
  VU X[kNV];
  VI LE[kNV];  // left exponent
  VI LS[kNV];  // left sign + 1 (joint: the left sign)
};

HWY_INLINE FastConsts fast_consts(const ModelView& m) {
  const FloatParams& p = m.fp;
  const bool e8 = m.ent8 != nullptr;
  return FastConsts{e8 ? m.ent8 : m.slot_all,
                    e8 ? m.ent8_1 : m.slot1_all,
                    p.elo,
                    p.ne,
                    p.mlo,
                    p.nm,
                    p.eb,
                    p.mb,
                    p.k,
                    static_cast<int32_t>(float_raw_bits(p)),
                    p.sign_ctx != 0,
                    e8};
}

HWY_INLINE VI clamp_lo_hi(VI v, int32_t lo, int32_t hi) {
  const DI di;
  return hn::Min(hn::Max(hn::Sub(v, hn::Set(di, lo)), hn::Zero(di)), hn::Set(di, hi));
}

// Slot index ctx * 4096 + (x & 4095); E8: entry index ctx * 512 +
// (x & 4095) / 8.
template <bool E8>
HWY_INLINE VI slot_of(VI ctx, VU x) {
  const DU du;
  const DI di;
  const VU slot = hn::And(x, hn::Set(du, 4095u));
  if constexpr (E8) return hn::BitCast(di, hn::Or(hn::ShiftLeft<9>(hn::BitCast(du, ctx)), hn::ShiftRight<3>(slot)));
  return hn::BitCast(di, hn::Or(hn::ShiftLeft<12>(hn::BitCast(du, ctx)), slot));
}

template <bool VG>
HWY_INLINE VU gather_slot(const uint32_t* slots, VI idx) {
  return hn::BitCast(DU(), GatherI32<VG>(DI(), reinterpret_cast<const int32_t*>(slots), idx));
}

// The state update from packed slot entries (before renormalization); E8:
// from 1/8-slot entries, whose offset is (slot + entry >> 20) mod 4096.
template <bool E8>
HWY_INLINE VU rans_advance(VU x, VU e) {
  const DU du;
  const VU freq = hn::Add(hn::And(hn::ShiftRight<8>(e), hn::Set(du, 4095u)), hn::Set(du, 1u));
  const VU off = E8 ? hn::And(hn::Add(x, hn::ShiftRight<20>(e)), hn::Set(du, 4095u)) : hn::ShiftRight<20>(e);
  return hn::Add(hn::Mul(freq, hn::ShiftRight<12>(x)), off);
}

// Renormalization of all 32 lanes in lane order.
HWY_INLINE void renorm_all32(VU* X, hwy_detail::StepWords& w) {
  const DU du;
  const hn::Rebind<uint16_t, DU> d16;
  const hn::Rebind<uint8_t, DU> d8;
  uint32_t pos = w.pos;
  for (size_t k = 0; k < kNV; ++k) {
    const auto need = hn::Eq(hn::ShiftRight<16>(X[k]), hn::Zero(du));
    uint8_t bits[8] = {};
    hn::StoreMaskBits(du, need, bits);
    const unsigned m = bits[0];
    const VU words = hn::PromoteTo(du, hn::LoadU(d16, reinterpret_cast<const uint16_t*>(w.p + 2 * uint64_t{pos})));
    const auto idx = hn::IndicesFromVec(du, hn::PromoteTo(du, hn::LoadU(d8, hwy_detail::kExpand.v[m])));
    X[k] = hn::IfThenElse(need, hn::Or(hn::ShiftLeft<16>(X[k]), hn::TableLookupLanes(words, idx)), X[k]);
    pos += static_cast<uint32_t>(hwy::PopCount(m));
  }
  w.pos = pos;
}

// The exponent context of a same-rectangle step (HL: the lanes have a
// left neighbour, HT: a top one) from the left (le) and top (tv) exponents.
template <int EM, bool HT, bool HL>
HWY_INLINE VI exp_ctx(const FastConsts& c, VI le, VI tv) {
  const DI di;
  if constexpr (EM == 0 || (!HT && !HL)) {
    return hn::Zero(di);
  } else if constexpr (EM == 1) {
    return clamp_lo_hi(HL ? le : tv, c.elo, c.ne - 1);
  } else if constexpr (EM == 3) {
    return clamp_lo_hi(HT ? tv : le, c.elo, c.ne - 1);
  } else if constexpr (EM == 2) {
    if constexpr (HL && HT) {
      const VI q = clamp_lo_hi(hn::ShiftRight<1>(hn::Add(hn::Add(le, tv), hn::Set(di, 1))), c.elo, c.ne - 1);
      const auto far = hn::Gt(hn::Abs(hn::Sub(le, tv)), hn::Set(di, 1));
      return hn::Add(q, hn::IfThenElseZero(far, hn::Set(di, c.ne)));
    } else {
      return clamp_lo_hi(HL ? le : tv, c.elo, c.ne - 1);
    }
  } else {  // EM == 4: joint classes
    const int32_t J = kJointClasses;
    if constexpr (HL && HT) {
      const VI ql = clamp_lo_hi(le, c.elo, J - 1), qt = clamp_lo_hi(tv, c.elo, J - 1);
      return hn::Add(hn::Add(hn::Mul(ql, hn::Set(di, J)), qt), hn::Set(di, 1));
    } else if constexpr (HL) {
      return hn::Add(clamp_lo_hi(le, c.elo, J - 1), hn::Set(di, 1 + J * J));
    } else {
      return hn::Add(clamp_lo_hi(tv, c.elo, J - 1), hn::Set(di, 1 + J * J + J));
    }
  }
}

// Stores a step's 32 elements (32-bit lanes) as T (16- or 32-bit words) at
// row t.
template <class T>
HWY_INLINE void store_row(T* lm, uint32_t t, const VI* hi) {
  for (size_t k = 0; k < kNV; ++k) {
    if constexpr (sizeof(T) == 2) {
      const hn::Rebind<uint16_t, DI> d16;
      hn::StoreU(hn::DemoteTo(d16, hi[k]), d16, lm + uint64_t{t} * kLanes + k * kN);
    } else {
      hn::StoreU(hn::BitCast(DU(), hi[k]), DU(), lm + uint64_t{t} * kLanes + k * kN);
    }
  }
}

// The exponents of row t (32-bit lanes, vector k).
template <class T>
HWY_INLINE VI load_exps(const T* lm, uint64_t t, size_t k, const FastConsts& c) {
  const DI di;
  VI v;
  if constexpr (sizeof(T) == 2) {
    const hn::Rebind<uint16_t, DI> d16;
    v = hn::BitCast(di, hn::PromoteTo(DU(), hn::LoadU(d16, lm + t * kLanes + k * kN)));
  } else {
    v = hn::BitCast(di, hn::LoadU(DU(), lm + t * kLanes + k * kN));
  }
  return hn::And(hn::ShiftRightSame(v, c.mb), hn::Set(di, (1 << c.eb) - 1));
}

// One step (two symbols per element) of NC chunks.
template <int NC, int EM, bool SMC, bool E8, bool VG, bool HT, bool HL, class T>
HWY_INLINE bool fast_step(const FastConsts* c, FastState* s, uint32_t t, uint32_t W, hwy_detail::StepWords* w,
                          T* const* lm) {
  const DU du;
  const DI di;
  for (int n = 0; n < NC; ++n)
    if (HWY_UNLIKELY(w[n].pos + hwy_detail::kStepRead > w[n].n) && !hwy_detail::step_words_tail(&w[n])) return false;
  VU e[NC][kNV];
  for (int n = 0; n < NC; ++n) {
    for (size_t k = 0; k < kNV; ++k) {
      VI tv = hn::Zero(di);
      if constexpr (EM != 0 && HT) tv = load_exps(lm[n], uint64_t{t} - W, k, c[n]);
      e[n][k] = gather_slot<VG>(c[n].se, slot_of<E8>(exp_ctx<EM, HT, HL>(c[n], s[n].LE[k], tv), s[n].X[k]));
    }
  }
  VI ee[NC][kNV];
  for (int n = 0; n < NC; ++n) {
    for (size_t k = 0; k < kNV; ++k) {
      s[n].X[k] = rans_advance<E8>(s[n].X[k], e[n][k]);
      ee[n][k] = hn::BitCast(di, hn::And(e[n][k], hn::Set(du, 0xFFu)));
    }
    renorm_all32(s[n].X, w[n]);
  }
  for (int n = 0; n < NC; ++n) {
    for (size_t k = 0; k < kNV; ++k) {
      VI ctx = hn::Zero(di);
      if constexpr (SMC) {
        ctx = clamp_lo_hi(ee[n][k], c[n].mlo, c[n].nm - 1);
        if (c[n].sign_ctx && HL) ctx = hn::Add(hn::Add(hn::ShiftLeft<1>(ctx), ctx), s[n].LS[k]);
        else if (c[n].sign_ctx) ctx = hn::Add(hn::ShiftLeft<1>(ctx), ctx);
      }
      e[n][k] = gather_slot<VG>(c[n].ss, slot_of<E8>(ctx, s[n].X[k]));
    }
  }
  for (int n = 0; n < NC; ++n) {
    VI hi[kNV];
    for (size_t k = 0; k < kNV; ++k) {
      s[n].X[k] = rans_advance<E8>(s[n].X[k], e[n][k]);
      const VI sm = hn::BitCast(di, hn::And(e[n][k], hn::Set(du, 0xFFu)));
      const VI sign = hn::ShiftRightSame(sm, c[n].k);
      hi[k] = hn::Or(hn::Or(hn::ShiftLeftSame(sign, c[n].eb + c[n].mb), hn::ShiftLeftSame(ee[n][k], c[n].mb)),
                     hn::ShiftLeftSame(hn::And(sm, hn::Set(di, (1 << c[n].k) - 1)), c[n].rawb));
      s[n].LE[k] = ee[n][k];
      if constexpr (SMC) s[n].LS[k] = hn::Add(sign, hn::Set(di, 1));
    }
    renorm_all32(s[n].X, w[n]);
    store_row(lm[n], t, hi);
  }
  return true;
}

// One step of joint symbols (emode 5) of NC chunks.
template <int NC, bool E8, bool VG, bool HL, class T>
HWY_INLINE bool joint_step(const FastConsts* c, FastState* s, uint32_t t, hwy_detail::StepWords* w,
                           T* const* lm) {
  const DU du;
  const DI di;
  for (int n = 0; n < NC; ++n)
    if (HWY_UNLIKELY(w[n].pos + hwy_detail::kStepRead > w[n].n) && !hwy_detail::step_words_tail(&w[n])) return false;
  VU e[NC][kNV];
  for (int n = 0; n < NC; ++n) {
    for (size_t k = 0; k < kNV; ++k) {
      VI ctx = hn::Zero(di);
      if constexpr (HL) {
        const VI q = clamp_lo_hi(s[n].LE[k], c[n].elo, c[n].ne - 1);
        ctx = hn::Add(hn::Add(hn::Add(q, q), s[n].LS[k]), hn::Set(di, 1));
      }
      e[n][k] = gather_slot<VG>(c[n].se, slot_of<E8>(ctx, s[n].X[k]));
    }
  }
  for (int n = 0; n < NC; ++n) {
    VI hi[kNV];
    for (size_t k = 0; k < kNV; ++k) {
      s[n].X[k] = rans_advance<E8>(s[n].X[k], e[n][k]);
      const VI J = hn::BitCast(di, hn::And(e[n][k], hn::Set(du, 0xFFu)));
      hi[k] = hn::ShiftLeftSame(J, c[n].rawb);
      s[n].LE[k] = hn::And(hn::ShiftRightSame(J, c[n].k), hn::Set(di, (1 << c[n].eb) - 1));
      s[n].LS[k] = hn::ShiftRightSame(J, c[n].eb + c[n].k);
    }
    renorm_all32(s[n].X, w[n]);
    store_row(lm[n], t, hi);
  }
  return true;
}

// The symbols of NC same-rectangle chunks (rows x W steps) into their
// lane-major buffers; x_tail[n]: null, or the lanes' tail words. 1 all
// decoded, 0 a stream is malformed.
template <int NC, int EM, bool SMC, bool E8, bool VG, class T>
HWY_NOINLINE int fast_lanes(const FastConsts* c, const uint8_t* const* rans, const uint32_t* rans_len, uint32_t W,
                            uint32_t rows, T* const* lm, uint32_t* const* x_tail) {
  const DU du;
  const DI di;
  hwy_detail::StepWords w[NC];
  FastState s[NC];
  for (int n = 0; n < NC; ++n) {
    hwy_detail::step_words_open(&w[n], rans[n], rans_len[n]);
    for (size_t k = 0; k < kNV; ++k) {
      s[n].X[k] = hn::LoadU(du, reinterpret_cast<const uint32_t*>(rans[n] + 4 * kN * k));
      s[n].LE[k] = s[n].LS[k] = hn::Zero(di);
    }
  }
  for (uint32_t r = 0; r < rows; ++r) {
    const uint32_t t0 = r * W;
    if constexpr (EM == 5) {
      if (!joint_step<NC, E8, VG, false>(c, s, t0, w, lm)) return 0;
      for (uint32_t j = 1; j < W; ++j)
        if (!joint_step<NC, E8, VG, true>(c, s, t0 + j, w, lm)) return 0;
    } else if (r == 0) {
      if (!fast_step<NC, EM, SMC, E8, VG, false, false>(c, s, t0, W, w, lm)) return 0;
      for (uint32_t j = 1; j < W; ++j)
        if (!fast_step<NC, EM, SMC, E8, VG, false, true>(c, s, t0 + j, W, w, lm)) return 0;
    } else {
      if (!fast_step<NC, EM, SMC, E8, VG, true, false>(c, s, t0, W, w, lm)) return 0;
      for (uint32_t j = 1; j < W; ++j)
        if (!fast_step<NC, EM, SMC, E8, VG, true, true>(c, s, t0 + j, W, w, lm)) return 0;
    }
  }
  const VU vL = hn::Set(du, kRansL);
  for (int n = 0; n < NC; ++n) {
    if (w[n].pos != w[n].n) return 0;
    const VU lim = hn::Set(du, x_tail[n] ? 0xFFFFu : 0u);
    for (size_t k = 0; k < kNV; ++k) {
      // x - kRansL <= lim, unsigned (x < kRansL wraps above lim).
      const VU d = hn::Sub(s[n].X[k], vL);
      if (!hn::AllTrue(du, hn::Eq(hn::Min(d, lim), d))) return 0;
      if (x_tail[n]) hn::StoreU(d, du, x_tail[n] + k * kN);
    }
  }
  return 1;
}

template <int NC, bool E8, bool VG, class T>
int fast_lanes_for(const FastConsts* c, const FloatParams& p, const uint8_t* const* rans, const uint32_t* rans_len,
                   uint32_t W, uint32_t rows, T* const* lm, uint32_t* const* x_tail) {
  if (float_joint(p)) return fast_lanes<NC, 5, false, E8, VG, T>(c, rans, rans_len, W, rows, lm, x_tail);
  const bool smc = float_sm_contexts(p);
#define WCODEC_FAST(EMv, S) \
  if (p.emode == EMv && smc == S) return fast_lanes<NC, EMv, S, E8, VG, T>(c, rans, rans_len, W, rows, lm, x_tail);
  WCODEC_FAST(0, false) WCODEC_FAST(1, false) WCODEC_FAST(2, false) WCODEC_FAST(3, false) WCODEC_FAST(4, false)
  WCODEC_FAST(0, true) WCODEC_FAST(1, true) WCODEC_FAST(2, true) WCODEC_FAST(3, true) WCODEC_FAST(4, true)
#undef WCODEC_FAST
  return -1;
}

// The output stage: raster order and raw bits (a per-target part).
#include "chunk_decode_hwy_float_out-inl.h"  // NOLINT(build/include)

// Whether the chunk's lanes share one rectangle; its size.
bool same_rect_geom(const ChunkView& cv, uint32_t* W, uint32_t* rows) {
  const LaneRect r0 = lane_rect(cv.h, cv.w, 0);
  for (uint32_t l = 1; l < kLanes; ++l) {
    const LaneRect r = lane_rect(cv.h, cv.w, l);
    if (r.w != r0.w || r.h != r0.h) return false;
  }
  if (!r0.w || !r0.h) return false;
  *W = r0.w;
  *rows = r0.h;
  return true;
}

// NC same-rectangle chunks of 16-bit floats (decode_float_group_hwy's and
// decode_float_chunk_hwy's contract; -1: not this loop).
template <int NC, class T>
int FastChunks(const ModelView* ms, const ChunkView& cv, const uint8_t* const* rans, const uint32_t* rans_len,
                 const uint8_t* const* raw, const uint64_t* raw_len, const bool* tail, uint8_t* const* lm,
                 uint8_t* const* out, bool vg) {
  uint32_t W, rows;
  if (!same_rect_geom(cv, &W, &rows)) return -1;
  FastConsts c[NC];
  T* lms[NC];
  uint32_t xt[NC][kLanes];
  uint32_t* xts[NC];
  for (int n = 0; n < NC; ++n) {
    c[n] = fast_consts(ms[n]);
    if (c[n].e8 != c[0].e8) return -1;  // the entry kind is a parameter of the loop
    lms[n] = reinterpret_cast<T*>(lm[n]);
    xts[n] = tail[n] ? xt[n] : nullptr;
  }
  int r;
#if HWY_TARGET == HWY_AVX2
  if (vg)
    r = c[0].e8 ? fast_lanes_for<NC, true, true, T>(c, ms[0].fp, rans, rans_len, W, rows, lms, xts)
                : fast_lanes_for<NC, false, true, T>(c, ms[0].fp, rans, rans_len, W, rows, lms, xts);
  else
#endif
    r = c[0].e8 ? fast_lanes_for<NC, true, false, T>(c, ms[0].fp, rans, rans_len, W, rows, lms, xts)
                : fast_lanes_for<NC, false, false, T>(c, ms[0].fp, rans, rans_len, W, rows, lms, xts);
  (void)vg;
  if (r != 1) return r;
  for (int n = 0; n < NC; ++n) fast_finish<T>(ms[n].fp, cv, W, rows, lms[n], raw[n], raw_len[n], tail[n], xts[n], out[n]);
  return 1;
}

// ---------------------------------------------------------------- ragged lanes
// Lanes of unequal rectangles (widths wa or wa + 1, row counts that may
// differ; 16-bit floats): the same lane-major buffer and vectors, with the
// geometry per lane: a lane is active while t is below its element count
// (inactive lanes keep their state and take no words), has a left
// neighbour past its row's first column (J, its column) and a top one from
// its second row on (t >= its width), which lies wa or wa + 1 steps back.
struct RaggedLanes {
  HWY_ATTR RaggedLanes() {}
  VI J[kNV], Wv[kNV], Nv[kNV];
  hn::Mask<DI> wide[kNV];
};

// The exponent context from masks: hl (left), ht (top) per lane.
template <int EM>
HWY_INLINE VI exp_ctx_masked(const FastConsts& c, VI le, VI tv, hn::Mask<DI> hl, hn::Mask<DI> ht) {
  const DI di;
  if constexpr (EM == 0) {
    return hn::Zero(di);
  } else {
    const auto both = hn::And(hl, ht);
    const auto any = hn::Or(hl, ht);
    VI ctx;
    if constexpr (EM == 1) {
      ctx = clamp_lo_hi(hn::IfThenElse(hl, le, tv), c.elo, c.ne - 1);
    } else if constexpr (EM == 3) {
      ctx = clamp_lo_hi(hn::IfThenElse(ht, tv, le), c.elo, c.ne - 1);
    } else if constexpr (EM == 2) {
      const VI one = clamp_lo_hi(hn::IfThenElse(hl, le, tv), c.elo, c.ne - 1);
      const VI q = clamp_lo_hi(hn::ShiftRight<1>(hn::Add(hn::Add(le, tv), hn::Set(di, 1))), c.elo, c.ne - 1);
      const auto far = hn::Gt(hn::Abs(hn::Sub(le, tv)), hn::Set(di, 1));
      ctx = hn::IfThenElse(both, hn::Add(q, hn::IfThenElseZero(far, hn::Set(di, c.ne))), one);
    } else {  // EM == 4
      const int32_t J = kJointClasses;
      const VI ql = clamp_lo_hi(le, c.elo, J - 1), qt = clamp_lo_hi(tv, c.elo, J - 1);
      const VI cb = hn::Add(hn::Add(hn::Mul(ql, hn::Set(di, J)), qt), hn::Set(di, 1));
      const VI cl = hn::Add(ql, hn::Set(di, 1 + J * J));
      const VI ct = hn::Add(qt, hn::Set(di, 1 + J * J + J));
      ctx = hn::IfThenElse(both, cb, hn::IfThenElse(hl, cl, ct));
    }
    return hn::IfThenElseZero(any, ctx);
  }
}

// Renormalization of the active lanes (act) in lane order.
HWY_INLINE void renorm_active32(VU* X, const hn::Mask<DU>* act, hwy_detail::StepWords& w) {
  const DU du;
  const hn::Rebind<uint16_t, DU> d16;
  const hn::Rebind<uint8_t, DU> d8;
  uint32_t pos = w.pos;
  for (size_t k = 0; k < kNV; ++k) {
    const auto need = hn::And(act[k], hn::Eq(hn::ShiftRight<16>(X[k]), hn::Zero(du)));
    uint8_t bits[8] = {};
    hn::StoreMaskBits(du, need, bits);
    const unsigned m = bits[0];
    const VU words = hn::PromoteTo(du, hn::LoadU(d16, reinterpret_cast<const uint16_t*>(w.p + 2 * uint64_t{pos})));
    const auto idx = hn::IndicesFromVec(du, hn::PromoteTo(du, hn::LoadU(d8, hwy_detail::kExpand.v[m])));
    X[k] = hn::IfThenElse(need, hn::Or(hn::ShiftLeft<16>(X[k]), hn::TableLookupLanes(words, idx)), X[k]);
    pos += static_cast<uint32_t>(hwy::PopCount(m));
  }
  w.pos = pos;
}

// The symbols of a chunk with ragged lanes (steps: the largest lane's
// element count; wa: the narrowest width) into lm. 1 / 0 as fast_lanes.
template <int EM, bool SMC, bool E8, bool VG, class T>
HWY_NOINLINE int ragged_lanes(const FastConsts& c, const uint8_t* rans, uint32_t rans_len, RaggedLanes& g,
                              uint32_t steps, uint32_t wa, bool any_wide, T* lm, uint32_t* x_tail) {
  const DU du;
  const DI di;
  hwy_detail::StepWords w;
  hwy_detail::step_words_open(&w, rans, rans_len);
  FastState s;
  for (size_t k = 0; k < kNV; ++k) {
    s.X[k] = hn::LoadU(du, reinterpret_cast<const uint32_t*>(rans + 4 * kN * k));
    s.LE[k] = s.LS[k] = hn::Zero(di);
  }
  for (uint32_t t = 0; t < steps; ++t) {
    if (HWY_UNLIKELY(w.pos + hwy_detail::kStepRead > w.n) && !hwy_detail::step_words_tail(&w)) return 0;
    const VI vt = hn::Set(di, static_cast<int32_t>(t));
    hn::Mask<DI> act[kNV], hl[kNV];
    hn::Mask<DU> actu[kNV];
    VU e[kNV];
    for (size_t k = 0; k < kNV; ++k) {
      act[k] = hn::Lt(vt, g.Nv[k]);
      actu[k] = hn::RebindMask(du, act[k]);
      hl[k] = hn::Gt(g.J[k], hn::Zero(di));
      VI ctx;
      if constexpr (EM == 5) {
        const VI q = clamp_lo_hi(s.LE[k], c.elo, c.ne - 1);
        ctx = hn::IfThenElseZero(hl[k], hn::Add(hn::Add(hn::Add(q, q), s.LS[k]), hn::Set(di, 1)));
      } else {
        const auto ht = hn::Gt(hn::Add(vt, hn::Set(di, 1)), g.Wv[k]);  // t >= the lane's width
        VI tv = hn::Zero(di);
        if (EM != 0 && t >= wa) {
          tv = load_exps(lm, t - wa, k, c);
          if (any_wide && t > wa) tv = hn::IfThenElse(g.wide[k], load_exps(lm, t - wa - 1, k, c), tv);
        }
        ctx = exp_ctx_masked<EM>(c, s.LE[k], tv, hl[k], ht);
      }
      e[k] = gather_slot<VG>(c.se, slot_of<E8>(ctx, s.X[k]));
    }
    VI ee[kNV];
    for (size_t k = 0; k < kNV; ++k) {
      s.X[k] = hn::IfThenElse(actu[k], rans_advance<E8>(s.X[k], e[k]), s.X[k]);
      ee[k] = hn::BitCast(di, hn::And(e[k], hn::Set(du, 0xFFu)));
    }
    renorm_active32(s.X, actu, w);
    VI hi[kNV];
    if constexpr (EM == 5) {
      for (size_t k = 0; k < kNV; ++k) {
        hi[k] = hn::ShiftLeftSame(ee[k], c.rawb);
        s.LE[k] = hn::And(hn::ShiftRightSame(ee[k], c.k), hn::Set(di, (1 << c.eb) - 1));
        s.LS[k] = hn::ShiftRightSame(ee[k], c.eb + c.k);
      }
    } else {
      for (size_t k = 0; k < kNV; ++k) {
        VI ctx = hn::Zero(di);
        if constexpr (SMC) {
          ctx = clamp_lo_hi(ee[k], c.mlo, c.nm - 1);
          if (c.sign_ctx) ctx = hn::Add(hn::Add(hn::ShiftLeft<1>(ctx), ctx), hn::IfThenElseZero(hl[k], s.LS[k]));
        }
        e[k] = gather_slot<VG>(c.ss, slot_of<E8>(ctx, s.X[k]));
      }
      for (size_t k = 0; k < kNV; ++k) {
        s.X[k] = hn::IfThenElse(actu[k], rans_advance<E8>(s.X[k], e[k]), s.X[k]);
        const VI sm = hn::BitCast(di, hn::And(e[k], hn::Set(du, 0xFFu)));
        const VI sign = hn::ShiftRightSame(sm, c.k);
        hi[k] = hn::Or(hn::Or(hn::ShiftLeftSame(sign, c.eb + c.mb), hn::ShiftLeftSame(ee[k], c.mb)),
                       hn::ShiftLeftSame(hn::And(sm, hn::Set(di, (1 << c.k) - 1)), c.rawb));
        s.LE[k] = ee[k];
        if constexpr (SMC) s.LS[k] = hn::Add(sign, hn::Set(di, 1));
      }
      renorm_active32(s.X, actu, w);
    }
    store_row(lm, t, hi);
    for (size_t k = 0; k < kNV; ++k) {
      const VI j1 = hn::Add(g.J[k], hn::Set(di, 1));
      g.J[k] = hn::IfThenElseZero(hn::Ne(j1, g.Wv[k]), j1);
    }
  }
  const VU vL = hn::Set(du, kRansL);
  if (w.pos != w.n) return 0;
  const VU lim = hn::Set(du, x_tail ? 0xFFFFu : 0u);
  for (size_t k = 0; k < kNV; ++k) {
    const VU d = hn::Sub(s.X[k], vL);
    if (!hn::AllTrue(du, hn::Eq(hn::Min(d, lim), d))) return 0;
    if (x_tail) hn::StoreU(d, du, x_tail + k * kN);
  }
  return 1;
}

// ragged_lanes for the model's form; -1: no loop for it.
template <bool E8, bool VG, class T>
int ragged_for(const FastConsts& c, const FloatParams& p, const uint8_t* rans, uint32_t rans_len, RaggedLanes& g,
               uint32_t steps, uint32_t wa, bool any_wide, T* lm, uint32_t* x_tail) {
  const bool smc = float_sm_contexts(p);
  if (float_joint(p)) return ragged_lanes<5, false, E8, VG, T>(c, rans, rans_len, g, steps, wa, any_wide, lm, x_tail);
#define WCODEC_RAGGED(EMv, S) \
  if (p.emode == EMv && smc == S) return ragged_lanes<EMv, S, E8, VG, T>(c, rans, rans_len, g, steps, wa, any_wide, lm, x_tail);
  WCODEC_RAGGED(0, false) WCODEC_RAGGED(1, false) WCODEC_RAGGED(2, false) WCODEC_RAGGED(3, false)
  WCODEC_RAGGED(4, false) WCODEC_RAGGED(0, true) WCODEC_RAGGED(1, true) WCODEC_RAGGED(2, true)
  WCODEC_RAGGED(3, true) WCODEC_RAGGED(4, true)
#undef WCODEC_RAGGED
  return -1;
}

// A ragged chunk of 16-bit floats (decode_float_chunk_hwy's contract).
template <class T>
int RaggedChunk(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                  const uint8_t* raw, uint64_t raw_len, bool tail, uint8_t* lm8, uint8_t* out, bool vg) {
  const DI di;
  const FloatParams& p = m.fp;
  HWY_ALIGN int32_t jw[kLanes], jn[kLanes], jwide[kLanes];
  LaneRect rc[kLanes];
  uint32_t steps = 0, wa = ~0u;
  for (uint32_t l = 0; l < kLanes; ++l) {
    rc[l] = lane_rect(cv.h, cv.w, l);
    const uint32_t n = rc[l].w * rc[l].h;
    if (n && rc[l].w < wa) wa = rc[l].w;
    steps = n > steps ? n : steps;
  }
  if (!steps) return -1;
  bool any_wide = false;
  for (uint32_t l = 0; l < kLanes; ++l) {
    const uint32_t n = rc[l].w * rc[l].h;
    if (n && rc[l].w != wa && rc[l].w != wa + 1) return -1;
    jw[l] = static_cast<int32_t>(n ? rc[l].w : 1);
    jn[l] = static_cast<int32_t>(n);
    jwide[l] = n && rc[l].w != wa ? -1 : 0;
    any_wide |= jwide[l] != 0;
  }
  RaggedLanes g;
  for (size_t k = 0; k < kNV; ++k) {
    g.J[k] = hn::Zero(di);
    g.Wv[k] = hn::Load(di, jw + k * kN);
    g.Nv[k] = hn::Load(di, jn + k * kN);
    g.wide[k] = hn::Ne(hn::Load(di, jwide + k * kN), hn::Zero(di));
  }
  const FastConsts c = fast_consts(m);
  T* lm = reinterpret_cast<T*>(lm8);
  uint32_t xt[kLanes];
  uint32_t* x_tail = tail ? xt : nullptr;
  int r;
#if HWY_TARGET == HWY_AVX2
  if (vg)
    r = c.e8 ? ragged_for<true, true, T>(c, p, rans, rans_len, g, steps, wa, any_wide, lm, x_tail)
             : ragged_for<false, true, T>(c, p, rans, rans_len, g, steps, wa, any_wide, lm, x_tail);
  else
#endif
    r = c.e8 ? ragged_for<true, false, T>(c, p, rans, rans_len, g, steps, wa, any_wide, lm, x_tail)
             : ragged_for<false, false, T>(c, p, rans, rans_len, g, steps, wa, any_wide, lm, x_tail);
  (void)vg;
  if (r != 1) return r;
  // Raster order: each lane's elements, row by row.
  T* o = reinterpret_cast<T*>(out);
  for (uint32_t l = 0; l < kLanes; ++l) {
    const T* src = lm + l;
    for (uint32_t rr = 0; rr < rc[l].h; ++rr) {
      T* dst = o + uint64_t{rc[l].r0 + rr} * cv.w + rc[l].c0;
      // (memcpy: out need not be aligned for T; a chunk may start at any byte.)
      for (uint32_t j = 0; j < rc[l].w; ++j, src += kLanes) std::memcpy(dst + j, src, sizeof(T));
    }
  }
  const uint32_t rawb = float_raw_bits(p);
  const uint64_t n = uint64_t{cv.h} * cv.w;
  if (!rawb) return 1;
  if (tail) {
    uint8_t buf[kRawTailBuf];
    uint64_t ns = 0, bit0 = 0;
    const uint32_t blen = float_raw_tail(p, n, raw, x_tail, buf, &ns, &bit0);
    or_raw(o, ns, raw, raw_len, rawb);
    or_raw(o + ns, n - ns, buf, blen, rawb);
  } else {
    or_raw(o, n, raw, raw_len, rawb);
  }
  return 1;
}
#endif  // HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_NEON

}  // namespace HWY_NAMESPACE
}  // namespace wcodec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy_path_i.h"
namespace wcodec {

int decode_float_chunk_hwy(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                           const uint8_t* raw, uint64_t raw_len, uint8_t* out, uint8_t* lm, bool tail) {
#if defined(WCODEC_HWY_PATH)
  if (m.kind != ModelKind::kFloat || !(m.slot_all || m.ent8) || (!(m.slot1_all || m.ent8_1) && !float_joint(m.fp)))
    return -1;
  const FloatParams& p = m.fp;
  if (p.eb > 8 || p.k > 7 || float_raw_bits(p) > 24 || float_e_nsym(p) > 256) return -1;
  const uint64_t n = uint64_t{cv.h} * cv.w;
  if (n >= (1ull << 29)) return -1;
  if (!float_raw_ok(p, n, raw_len, tail)) return 0;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;
#if defined(WCODEC_HWY_PATH)
  if (p.elem_bytes == 2) {
    const int r = WCODEC_HWY_PATH::FastChunks<1, uint16_t>(&m, cv, &rans, &rans_len, &raw, &raw_len, &tail, &lm, &out,
                                                           vector_gathers());
    if (r >= 0) return r;
    const int q = WCODEC_HWY_PATH::RaggedChunk<uint16_t>(m, cv, rans, rans_len, raw, raw_len, tail, lm, out,
                                                         vector_gathers());
    if (q >= 0) return q;
  } else if (p.elem_bytes == 4) {
    const int r = WCODEC_HWY_PATH::FastChunks<1, uint32_t>(&m, cv, &rans, &rans_len, &raw, &raw_len, &tail, &lm, &out,
                                                           vector_gathers());
    if (r >= 0) return r;
    const int q = WCODEC_HWY_PATH::RaggedChunk<uint32_t>(m, cv, rans, rans_len, raw, raw_len, tail, lm, out,
                                                         vector_gathers());
    if (q >= 0) return q;
  }
#endif
  // Grids in the lane-major scratch (simd_lane_major_bytes >= 4n + 64).
  uint16_t* e_grid = reinterpret_cast<uint16_t*>(lm);
  uint8_t* sm_grid = lm + 2 * n + 8;
  std::memset(lm + 2 * n, 0, 8);
  uint32_t x_tail[kLanes];
  if (!WCODEC_HWY_PATH::FloatSymbols(m, cv, rans, rans_len, e_grid, sm_grid, tail ? x_tail : nullptr)) return 0;
  if (tail) {
    uint8_t buf[kRawTailBuf];
    uint64_t ns = 0, bit0 = 0;
    float_raw_tail(p, n, raw, x_tail, buf, &ns, &bit0);
    WCODEC_HWY_PATH::AssembleFloats(p, ns, raw, e_grid, sm_grid, out);
    float_assemble_range(p, ns, n, buf, bit0, e_grid, sm_grid, out);
  } else {
    WCODEC_HWY_PATH::AssembleFloats(p, n, raw, e_grid, sm_grid, out);
  }
  return 1;
#else
  (void)m, (void)cv, (void)rans, (void)rans_len, (void)raw, (void)raw_len, (void)out, (void)lm, (void)tail;
  return -1;
#endif
}

int decode_float_group_hwy(const ModelView* ms, const ChunkView& cv, const GroupSide* s, int n) {
#if defined(WCODEC_HWY_PATH)
  if (n < 2 || n > 3) return -1;
  const uint64_t nel = uint64_t{cv.h} * cv.w;
  if (nel >= (1ull << 29)) return -1;
  for (int i = 0; i < n; ++i) {
    const ModelView& m = ms[i];
    const FloatParams& p = m.fp;
    if (m.kind != ModelKind::kFloat || !(m.slot_all || m.ent8) || (!(m.slot1_all || m.ent8_1) && !float_joint(p)) ||
        p.elem_bytes != 2 ||
        p.eb > 8 || p.k > 7 || float_raw_bits(p) > 24 || float_e_nsym(p) > 256 ||
        !float_loop_compatible(ms[0].fp, p))
      return -1;
  }
  for (int i = 0; i < n; ++i)
    if (!float_raw_ok(ms[i].fp, nel, s[i].raw_len, s[i].tail) || s[i].rans_len < 4 * kLanes || (s[i].rans_len & 1))
      return 0;
  const uint8_t* rans[3];
  uint32_t rans_len[3];
  const uint8_t* raw[3];
  uint64_t raw_len[3];
  bool tail[3];
  uint8_t *lm[3], *out[3];
  for (int i = 0; i < n; ++i) {
    rans[i] = s[i].rans;
    rans_len[i] = s[i].rans_len;
    raw[i] = s[i].raw;
    raw_len[i] = s[i].raw_len;
    tail[i] = s[i].tail;
    lm[i] = s[i].lm;
    out[i] = s[i].out;
  }
  const bool vg = vector_gathers();
  return n == 2 ? WCODEC_HWY_PATH::FastChunks<2, uint16_t>(ms, cv, rans, rans_len, raw, raw_len, tail, lm, out, vg)
                : WCODEC_HWY_PATH::FastChunks<3, uint16_t>(ms, cv, rans, rans_len, raw, raw_len, tail, lm, out, vg);
#else
  (void)ms, (void)cv, (void)s, (void)n;
  return -1;
#endif
}

}  // namespace wcodec
#endif  // HWY_ONCE
