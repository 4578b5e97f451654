// codec/compress/rans_encode_hwy.cpp — the rANS encoder's group pass of the
// avx2 and neon paths (include/wcodec/cpu.h), written with Google Highway:
// an AVX2 instance (x86-64) and a NEON one (aarch64), chosen in
// hwy_path_i.h.
//
// Why: without AVX-512 the encoder took the scalar group pass, whose
// division per symbol was a fifth to a quarter of the int files' encode
// time. This pass computes the same states and words as the scalar one
// (rans_encoder.cpp, encode_groups_scalar): per group, the 32 lanes in
// vectors of N lanes (8 on AVX2), the last vector first; a lane whose state
// would leave the normalized range emits its low word first (the words of
// a vector's lanes land in lane order just below the previous ones: a
// table permutes the renormalizing lanes to the top of the vector, and its
// N narrowed words are stored ending at the write position, so the lanes
// below the count write only below it, where the next words go); the
// quotient x / freq comes from a single-precision division and one
// correction step (as in rans_encode_avx512.cpp).
//
// Static dispatch: foreach_target.h compiles the body once per enabled
// Highway target; the entry point calls the AVX2 instance (x86-64) or the
// NEON one (aarch64) explicitly (hwy_path_i.h; the path is chosen by
// cpu_path(), not by Highway's best target).
// Thread-safety: pure function over its arguments.
#include <cstddef>
#include <cstdint>

// Only the targets a path uses (and the baseline, which foreach_target
// always compiles): x86 AVX2, Arm NEON.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS \
  (HWY_AVX3 | HWY_AVX3_DL | HWY_SSSE3 | HWY_SSE4 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "rans_encode_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "rans_encoder.h"
#include "simd_env.h"

#ifndef WCODEC_RANS_ENCODE_HWY_ONCE
#define WCODEC_RANS_ENCODE_HWY_ONCE
namespace wcodec {
namespace hwy_enc_detail {
// kTop<N>.v[m]: the lanes of mask m (N bits) in increasing order, placed at
// the top of an N-lane index vector (entries N - popcount(m) .. N - 1); the
// entries below are 0.
template <int N>
struct TopTable {
  alignas(32) int32_t v[1 << N][N];
  constexpr TopTable() : v() {
    for (int m = 0; m < (1 << N); ++m) {
      const int cnt = __builtin_popcount(static_cast<unsigned>(m));
      int k = N - cnt;
      for (int i = 0; i < N; ++i)
        if (m >> i & 1) v[m][k++] = i;
    }
  }
};
}  // namespace hwy_enc_detail
}  // namespace wcodec
#endif  // WCODEC_RANS_ENCODE_HWY_ONCE

HWY_BEFORE_NAMESPACE();
namespace wcodec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The group pass: groups ngroups-1 .. 0 into states xs, words written
// backwards from *pos (at least N words of room below the last word).
template <class D>
HWY_INLINE void EncodeGroupsN(D d, const uint32_t* mask, const uint32_t* sf, size_t ngroups, uint32_t* xs,
                              uint16_t** pos) {
  constexpr size_t N = hn::MaxLanes(D());
  static_assert(N >= 1 && N <= 8 && kLanes % N == 0, "a mask byte per vector");
  constexpr size_t V = kLanes / N;
  static constexpr hwy_enc_detail::TopTable<static_cast<int>(N)> kTop{};
  const hn::RebindToSigned<D> di;
  const hn::RebindToFloat<D> df;
  const hn::Rebind<uint16_t, D> d16;
  using VU = hn::Vec<D>;
  VU X[V];
  for (size_t h = 0; h < V; ++h) X[h] = hn::LoadU(d, xs + h * N);
  const VU one = hn::Set(d, 1u), lo16 = hn::Set(d, 0xFFFFu);
  const auto half = hn::Set(df, 0.5f), magic = hn::Set(df, 12582912.0f);  // 1.5 * 2^23
  const VU magic_bits = hn::Set(d, 0x4B400000u);
  const uint32_t all = (1u << N) - 1;
  uint16_t* w = *pos;
  // One vector of lanes: e its entries, act its coding lanes (full: all).
  // Branch-free: the words are stored even where no lane renormalizes (the
  // count is then 0 and only words below the position are written).
  auto step = [&](VU& xv, const uint32_t* e_p, hn::Mask<D> act, bool full) HWY_ATTR {
    const VU e = hn::LoadU(d, e_p);
    // Inactive lanes divide by 1 (their entries may be anything).
    const VU freq = full ? hn::ShiftRight<16>(e) : hn::IfThenElse(act, hn::ShiftRight<16>(e), one);
    VU x = xv;
    // Both sides below 2^13: a signed comparison.
    const auto low = hn::Lt(hn::BitCast(di, hn::ShiftRight<32 - kMaxProbBits>(x)), hn::BitCast(di, freq));
    const auto need = full ? hn::Not(hn::RebindMask(d, low)) : hn::AndNot(hn::RebindMask(d, low), act);
    uint8_t need_bits = 0;
    hn::StoreMaskBits(d, need, &need_bits);
    const VU top = hn::TableLookupLanes(x, hn::SetTableIndices(d, kTop.v[need_bits]));
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, hn::And(top, lo16))), d16, w - N);
    w -= __builtin_popcount(need_bits);
    x = hn::IfThenElse(need, hn::ShiftRight<16>(x), x);
    // x < freq << (32 - kMaxProbBits): the quotient t = x / freq is below
    // 2^20. The estimate is (x >> 1) / (freq / 2) in single precision (a
    // signed conversion): x >> 1 < 2^31, freq / 2 exact; it is t less
    // (x & 1) / freq, within 1/8 (two roundings, relative 2^-24 each). For
    // freq >= 2 it lies in [t - 5/8, t + 1/8]; for freq 1 (x < 2^20) it is
    // exact, t or t - 1. Rounded to the nearest integer (by adding 1.5 *
    // 2^23: the sum's low mantissa bits are the integer) it is thus within
    // one of floor(t), and one correction step makes the quotient exact.
    const auto fx = hn::ConvertTo(df, hn::BitCast(di, hn::ShiftRight<1>(x)));
    const auto ff = hn::Mul(hn::ConvertTo(df, hn::BitCast(di, freq)), half);
    VU q = hn::Sub(hn::BitCast(d, hn::Add(hn::Div(fx, ff), magic)), magic_bits);
    auto r = hn::BitCast(di, hn::Sub(x, hn::Mul(q, freq)));  // in [-freq, 2 freq)
    // Masks as 0 / -1 lanes: q - 1 and r + freq where r < 0, then q + 1 and
    // r - freq where r >= freq.
    const auto negv = hn::BitCast(d, hn::VecFromMask(di, hn::Lt(r, hn::Zero(di))));
    q = hn::Add(q, negv);
    VU ru = hn::Add(hn::BitCast(d, r), hn::And(negv, freq));
    const auto highv = hn::BitCast(d, hn::VecFromMask(di, hn::Not(hn::Lt(hn::BitCast(di, ru), hn::BitCast(di, freq)))));
    q = hn::Sub(q, highv);
    ru = hn::Sub(ru, hn::And(highv, freq));
    const VU nx = hn::Add(hn::Add(hn::ShiftLeft<kMaxProbBits>(q), ru), hn::And(e, lo16));
    xv = full ? nx : hn::IfThenElse(act, nx, x);
  };
  const auto none = hn::FirstN(d, 0);
  for (size_t g = ngroups; g-- > 0;) {
    const uint32_t m = mask[g];
    const uint32_t* e_g = sf + g * kLanes;
    if (m == 0xFFFFFFFFu) {
      for (size_t h = V; h-- > 0;) step(X[h], e_g + h * N, none, true);
      continue;
    }
    for (size_t h = V; h-- > 0;) {
      const uint8_t act_bits = static_cast<uint8_t>((m >> (N * h)) & all);
      if (!act_bits) continue;
      step(X[h], e_g + h * N, hn::LoadMaskBits(d, &act_bits), false);
    }
  }
  for (size_t h = 0; h < V; ++h) hn::StoreU(X[h], d, xs + h * N);
  *pos = w;
}

HWY_NOINLINE void EncodeGroups(const uint32_t* mask, const uint32_t* sf, size_t ngroups, uint32_t* xs,
                               uint16_t** pos) {
  const hn::ScalableTag<uint32_t> d;
  EncodeGroupsN(d, mask, sf, ngroups, xs, pos);
}

}  // namespace HWY_NAMESPACE
}  // namespace wcodec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy_path_i.h"
namespace wcodec {

bool rans_encode_groups_hwy(const uint32_t* mask, const uint32_t* sf, size_t ngroups, uint32_t* x, uint16_t** pos) {
#if defined(WCODEC_HWY_PATH)
  if (!vector_decoder_available()) return false;
  WCODEC_HWY_PATH::EncodeGroups(mask, sf, ngroups, x, pos);
  return true;
#else
  (void)mask, (void)sf, (void)ngroups, (void)x, (void)pos;
  return false;
#endif
}

}  // namespace wcodec
#endif  // HWY_ONCE
