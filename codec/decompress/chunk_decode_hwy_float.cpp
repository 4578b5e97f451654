// codec/decompress/chunk_decode_hwy_float.cpp — the float chunk decoder of
// the avx2 decoder path (include/wcodec/cpu.h), written with Google Highway
// so that one source serves AVX2 now and NEON later.
//
// Why: the AVX-512 decoders (chunk_decode_simd*.cpp) need VBMI2; without
// them a float chunk took the scalar reference decoder (chunk_decode.h).
// This decoder keeps the reference's structure and order exactly: the 32
// lanes' states, cursors and left neighbours live in lane arrays processed
// as vectors of Lanes(d) lanes (8 on AVX2), one symbol slot at a time;
// contexts are computed in vectors (the top exponent by a gather from the
// exponent grid), the rANS step by one gather of the flattened slot tables
// (ModelView::slot_all / slot1_all), and renormalization hands consecutive
// stream words to the lanes that need one in lane order: vector by vector,
// each lane's word index is the stream position plus the count of
// renormalizing lanes below it in its vector (a 256-entry prefix-count
// table: the expand of vpexpandd, emulated) and the words are gathered. The
// grids (exponents, sign/mantissa symbols) are then assembled with the raw
// bits by the reference code. Every read is bounded: the stream's last
// words are read from a zero-padded copy, the grids carry padding for the
// 4-byte gathers, a stream that runs short or ends with words left, or a
// lane that does not end in its initial state, is rejected (0), as the
// reference rejects it.
//
// Static dispatch: foreach_target.h compiles the body once per enabled
// Highway target; the avx2 path calls the AVX2 instance explicitly (it is
// chosen by cpu_path(), not by Highway's best target).
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

#ifndef WCODEC_HWY_FLOAT_ONCE
#define WCODEC_HWY_FLOAT_ONCE
namespace wcodec {
namespace hwy_detail {
// kPrefix[m][i]: the number of set bits of m below bit i (i < 8).
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
// words are copied into pad (zeros after them), so that a vector's reads
// (up to 34 words past pos) stay in bounds.
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
// Before a renormalization of all lanes (at most 32 words). False: the
// stream ran short (the decode is rejected).
inline bool words_ready(Words* w) {
  if (w->in_pad) return w->pos <= w->n;
  if (uint64_t{w->pos} + 40 <= w->n) return true;
  if (w->pos > w->n) return false;
  std::memset(w->pad, 0, sizeof w->pad);
  std::memcpy(w->pad, w->src + 2 * uint64_t{w->pos}, 2 * uint64_t{w->n - w->pos});
  w->p = w->pad;
  w->off = w->pos;
  w->in_pad = true;
  return true;
}
}  // namespace hwy_detail
}  // namespace wcodec
#endif  // WCODEC_HWY_FLOAT_ONCE

HWY_BEFORE_NAMESPACE();
namespace wcodec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
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
  const auto wv = hn::And(hn::GatherOffset(d, reinterpret_cast<const int32_t*>(w.p), offs), hn::Set(d, 0xFFFF));
  const auto nx = hn::Or(hn::ShiftLeft<16>(x), hn::BitCast(du, wv));
  hn::Store(hn::IfThenElse(hn::RebindMask(du, need), nx, x), du, L.x + b);
  w.pos += static_cast<uint32_t>(hn::CountTrue(d, need));
}

// One rANS step of lanes [b, b + N) with act[] set, contexts ctx, from
// packed slot entries; returns the entries' symbols (low byte).
template <class D>
HWY_INLINE hn::Vec<D> rans_vec(D d, FloatLanes& L, size_t b, hn::Vec<D> ctx, hn::Mask<D> act,
                               const uint32_t* slots) {
  const hn::RebindToUnsigned<D> du;
  const auto x = hn::Load(du, L.x + b);
  const auto idx = hn::Add(hn::ShiftLeft<12>(ctx), hn::BitCast(d, hn::And(x, hn::Set(du, 4095u))));
  const auto e = hn::BitCast(du, hn::GatherIndex(d, reinterpret_cast<const int32_t*>(slots), idx));
  const auto freq = hn::Add(hn::And(hn::ShiftRight<8>(e), hn::Set(du, 4095u)), hn::Set(du, 1u));
  const auto nx = hn::Add((freq * hn::ShiftRight<12>(x)), hn::ShiftRight<20>(e));
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
            hn::GatherOffset(d, reinterpret_cast<const int32_t*>(e_grid), hn::ShiftLeft<1>(top_at)),
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
      const auto s = rans_vec(d, L, b, ctx, act, m.slot_all);
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
        const auto s = rans_vec(d, L, b, ctx, act, m.slot1_all);
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
      const auto word = hn::BitCast(du, hn::GatherOffset(d, reinterpret_cast<const int32_t*>(raw + (b0 >> 3)),
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

}  // namespace HWY_NAMESPACE
}  // namespace wcodec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wcodec {

int decode_float_chunk_hwy(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                           const uint8_t* raw, uint64_t raw_len, uint8_t* out, uint8_t* lm, bool tail) {
#if HWY_ARCH_X86 && (HWY_TARGETS & HWY_AVX2)
  if (m.kind != ModelKind::kFloat || !m.slot_all || (!m.slot1_all && !float_joint(m.fp))) return -1;
  const FloatParams& p = m.fp;
  if (p.eb > 8 || p.k > 7 || float_raw_bits(p) > 24 || float_e_nsym(p) > 256) return -1;
  const uint64_t n = uint64_t{cv.h} * cv.w;
  if (n >= (1ull << 29)) return -1;
  if (!float_raw_ok(p, n, raw_len, tail)) return 0;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;
  // Grids in the lane-major scratch (simd_lane_major_bytes >= 4n + 64).
  uint16_t* e_grid = reinterpret_cast<uint16_t*>(lm);
  uint8_t* sm_grid = lm + 2 * n + 8;
  std::memset(lm + 2 * n, 0, 8);
  uint32_t x_tail[kLanes];
  if (!N_AVX2::FloatSymbols(m, cv, rans, rans_len, e_grid, sm_grid, tail ? x_tail : nullptr)) return 0;
  if (tail) {
    uint8_t buf[kRawTailBuf];
    uint64_t ns = 0, bit0 = 0;
    float_raw_tail(p, n, raw, x_tail, buf, &ns, &bit0);
    N_AVX2::AssembleFloats(p, ns, raw, e_grid, sm_grid, out);
    float_assemble_range(p, ns, n, buf, bit0, e_grid, sm_grid, out);
  } else {
    N_AVX2::AssembleFloats(p, n, raw, e_grid, sm_grid, out);
  }
  return 1;
#else
  (void)m, (void)cv, (void)rans, (void)rans_len, (void)raw, (void)raw_len, (void)out, (void)lm, (void)tail;
  return -1;
#endif
}

}  // namespace wcodec
#endif  // HWY_ONCE
