// codec/decompress/chunk_decode_simd_float.cpp — AVX-512 decoders of float
// chunks: the same-rectangle loops over N chunks, the joint-symbol form,
// any-geometry and ragged lanes, and the raw mantissa bits.
// Layout and method: chunk_decode_simd.cpp.
// Thread-safety: pure functions over their arguments and the caller's
// scratch.
#include <immintrin.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "chunk_decode_fast.h"
#include "chunk_decode_hwy.h"
#include "simd_avx512_i.h"
#include "simd_env.h"  // vector_gathers
#include "wcodec/cpu.h"

namespace wcodec {
using namespace avx512;

namespace {

// End-of-stream state check of a float chunk: every lane back at kRansL, or
// (x_tail non-null: a raw tail chunk) at kRansL plus 16 bits, returned in
// x_tail (the reference's rans_closed).
WC_AVX512 WC_INLINE bool float_states_closed(__m512i X0, __m512i X1, uint32_t* x_tail) {
  const __m512i vL = _mm512_set1_epi32(static_cast<int32_t>(kRansL));
  if (!x_tail) return !(_mm512_cmpneq_epu32_mask(X0, vL) | _mm512_cmpneq_epu32_mask(X1, vL));
  const __m512i d0 = _mm512_sub_epi32(X0, vL), d1 = _mm512_sub_epi32(X1, vL);
  const __m512i lim = _mm512_set1_epi32(0xFFFF);
  if (_mm512_cmpgt_epu32_mask(d0, lim) | _mm512_cmpgt_epu32_mask(d1, lim)) return false;
  _mm512_storeu_si512(x_tail, d0);
  _mm512_storeu_si512(x_tail + 16, d1);
  return true;
}

// ---- float (1- and 2-byte elements)
struct FloatFastConsts {
  const uint32_t *slots_e, *slots_s;
  uint32_t W;
  __m512i elo16, ne1_16, emask16;  // 16-bit
  __m512i mlo, nm1;                // 32-bit
  __m128i sh_e, sh_sign, sh_mh, sh_k, sh_ek;
  __m512i mh16;
};

struct FloatFastState {
  __m512i X0, X1;
  __m512i LE;        // left exponents (16-bit, 32 lanes)
  __m512i LS0, LS1;  // left sign + 1, 0 for none (32-bit halves)
};

template <int E>
WC_AVX512 WC_INLINE __m512i load_exps16(const uint8_t* row, const FloatFastConsts& c) {
  __m512i v;
  if constexpr (E == 1) v = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)));
  else v = _mm512_loadu_si512(row);
  return _mm512_and_si512(_mm512_srl_epi16(v, c.sh_e), c.emask16);
}

WC_AVX512 WC_INLINE __m512i clamp_sub16(__m512i v, const FloatFastConsts& c) {
  return _mm512_min_epi16(_mm512_max_epi16(_mm512_subs_epi16(v, c.elo16), _mm512_setzero_si512()), c.ne1_16);
}

// One step's symbols come in three phases, so that a loop over two chunks
// can issue both chunks' gathers of a phase back to back:
//   float_sm_slots: the sign / high mantissa slot indices from the decoded
//     exponents (ee0, ee1) and the left sign + 1 (ls0, ls1; 0 for none);
//   float_store: the element bits at step t; s.LE and s.LS0 / LS1 take this
//     step's.
template <bool SMC>
WC_AVX512 WC_INLINE void float_sm_slots(const FloatParams& p, const FloatFastConsts& c, const FloatFastState& s,
                                        __m512i ee0, __m512i ee1, __m512i ls0, __m512i ls1, __m512i* j0,
                                        __m512i* j1) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i m4095 = _mm512_set1_epi32(4095);
  if constexpr (SMC) {
    __m512i c0 = _mm512_min_epi32(_mm512_max_epi32(_mm512_sub_epi32(ee0, c.mlo), zero), c.nm1);
    __m512i c1 = _mm512_min_epi32(_mm512_max_epi32(_mm512_sub_epi32(ee1, c.mlo), zero), c.nm1);
    if (p.sign_ctx) {
      c0 = _mm512_add_epi32(_mm512_add_epi32(c0, _mm512_slli_epi32(c0, 1)), ls0);
      c1 = _mm512_add_epi32(_mm512_add_epi32(c1, _mm512_slli_epi32(c1, 1)), ls1);
    }
    *j0 = _mm512_ternarylogic_epi32(_mm512_slli_epi32(c0, 12), s.X0, m4095, 0xF8);
    *j1 = _mm512_ternarylogic_epi32(_mm512_slli_epi32(c1, 12), s.X1, m4095, 0xF8);
  } else {
    *j0 = _mm512_and_si512(s.X0, m4095);
    *j1 = _mm512_and_si512(s.X1, m4095);
  }
}

template <int E, bool SMC>
WC_AVX512 WC_INLINE void float_store(const FloatFastConsts& c, FloatFastState& s, __m512i ee0, __m512i ee1,
                                     __m512i se0, __m512i se1, uint32_t t, uint8_t* lm) {
  const __m512i E16 = lo_bytes16(ee0, ee1);  // exponents are below 256
  const __m512i S16 = lo_bytes16(se0, se1);
  const __m512i sign = _mm512_srl_epi16(S16, c.sh_k);
  const __m512i hi = _mm512_ternarylogic_epi32(_mm512_sll_epi16(sign, c.sh_sign), _mm512_sll_epi16(E16, c.sh_e),
                                               _mm512_sll_epi16(_mm512_and_si512(S16, c.mh16), c.sh_mh), 0xFE);
  if constexpr (E == 1) _mm256_storeu_si256(reinterpret_cast<__m256i*>(lm + uint64_t{t} * 32), _mm512_cvtepi16_epi8(hi));
  else _mm512_storeu_si512(lm + uint64_t{t} * 64, hi);
  s.LE = E16;
  if constexpr (SMC) {
    const __m512i one = _mm512_set1_epi32(1);
    s.LS0 = _mm512_add_epi32(_mm512_srl_epi32(_mm512_and_si512(se0, _mm512_set1_epi32(0xFF)), c.sh_k), one);
    s.LS1 = _mm512_add_epi32(_mm512_srl_epi32(_mm512_and_si512(se1, _mm512_set1_epi32(0xFF)), c.sh_k), one);
  }
}

// The symbols of one step once the exponent slot indices (i0, i1: 32-bit
// halves) are known: the exponents, then sign / high mantissa.
template <int E, bool SMC, bool VG>
WC_AVX512 WC_INLINE void float_symbols(const FloatParams& p, const FloatFastConsts& c, FloatFastState& s, __m512i i0,
                                       __m512i i1, __m512i ls0, __m512i ls1, uint32_t t, WordCursor& wc, uint8_t* lm) {
  const __m512i ee0 = _mm512_and_si512(rans_all16<VG>(s.X0, i0, c.slots_e, wc), _mm512_set1_epi32(0xFF));
  const __m512i ee1 = _mm512_and_si512(rans_all16<VG>(s.X1, i1, c.slots_e, wc), _mm512_set1_epi32(0xFF));
  __m512i j0, j1;
  float_sm_slots<SMC>(p, c, s, ee0, ee1, ls0, ls1, &j0, &j1);
  const __m512i se0 = rans_all16<VG>(s.X0, j0, c.slots_s, wc);
  const __m512i se1 = rans_all16<VG>(s.X1, j1, c.slots_s, wc);
  float_store<E, SMC>(c, s, ee0, ee1, se0, se1, t, lm);
}

// The exponent slot indices of a same-rectangle step: the context from the
// left (s.LE, HL) and top (step t - W of lm, HT) exponents.
template <int E, int EM, bool HT, bool HL>
WC_AVX512 WC_INLINE void float_exp_slots(const FloatFastConsts& c, const FloatFastState& s, uint32_t t,
                                         const uint8_t* lm, __m512i* i0, __m512i* i1) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i one16 = _mm512_set1_epi16(1);
  __m512i ctx = zero;
  if constexpr (EM != 0 && (HT || HL)) {
    __m512i tv = zero;
    if constexpr (HT) tv = load_exps16<E>(lm + (uint64_t{t} - c.W) * 32 * E, c);
    const __m512i lv = s.LE;
    if constexpr (EM == 1) {
      ctx = clamp_sub16(HL ? lv : tv, c);
    } else if constexpr (EM == 3) {
      ctx = clamp_sub16(HT ? tv : lv, c);
    } else if constexpr (EM == 2) {
      if constexpr (HL && HT) {
        const __m512i q = clamp_sub16(_mm512_avg_epu16(lv, tv), c);
        const __mmask32 far = _mm512_cmpgt_epu16_mask(_mm512_abs_epi16(_mm512_sub_epi16(lv, tv)), one16);
        ctx = _mm512_mask_add_epi16(q, far, q, _mm512_add_epi16(c.ne1_16, one16));
      } else {
        ctx = clamp_sub16(HL ? lv : tv, c);
      }
    } else {  // EM == 4: joint classes
      const int J = kJointClasses;
      const __m512i j1 = _mm512_set1_epi16(J - 1);
      const __m512i ql = _mm512_min_epi16(_mm512_max_epi16(_mm512_subs_epi16(lv, c.elo16), zero), j1);
      const __m512i qt = _mm512_min_epi16(_mm512_max_epi16(_mm512_subs_epi16(tv, c.elo16), zero), j1);
      if constexpr (HL && HT) ctx = _mm512_add_epi16(_mm512_add_epi16(_mm512_mullo_epi16(ql, _mm512_set1_epi16(J)), qt), one16);
      else if constexpr (HL) ctx = _mm512_add_epi16(ql, _mm512_set1_epi16(1 + J * J));
      else ctx = _mm512_add_epi16(qt, _mm512_set1_epi16(1 + J * J + J));
    }
    slot_index(ctx, s.X0, s.X1, i0, i1);
  } else {
    *i0 = _mm512_and_si512(s.X0, _mm512_set1_epi32(4095));
    *i1 = _mm512_and_si512(s.X1, _mm512_set1_epi32(4095));
  }
}

// One same-rectangle step of N chunks decoded together (N = 1..3; one
// model, one geometry), phase by phase across the chunks: every chunk's
// lanes are an independent chain of gathers, and issuing the chunks'
// gathers of a phase together lets them overlap.
template <int N, int E, int EM, bool SMC, bool VG, bool HT, bool HL>
WC_AVX512 WC_INLINE bool float_fast_step(const FloatParams& p, const FloatFastConsts* c, FloatFastState* s,
                                         uint32_t t, WordCursor* wc, uint8_t* const* lm) {
  for (int n = 0; n < N; ++n)
    if (__builtin_expect(wc[n].pos + kStepWords > wc[n].n, 0) && !words_tail(&wc[n])) return false;
  __m512i i0[N], i1[N], ee0[N], ee1[N], se0[N], se1[N];
  for (int n = 0; n < N; ++n) float_exp_slots<E, EM, HT, HL>(c[n], s[n], t, lm[n], &i0[n], &i1[n]);
  for (int n = 0; n < N; ++n) {
    ee0[n] = _mm512_and_si512(rans_all16<VG>(s[n].X0, i0[n], c[n].slots_e, wc[n]), _mm512_set1_epi32(0xFF));
    ee1[n] = _mm512_and_si512(rans_all16<VG>(s[n].X1, i1[n], c[n].slots_e, wc[n]), _mm512_set1_epi32(0xFF));
  }
  for (int n = 0; n < N; ++n) {
    __m512i j0, j1;
    float_sm_slots<SMC>(p, c[n], s[n], ee0[n], ee1[n], s[n].LS0, s[n].LS1, &j0, &j1);
    se0[n] = rans_all16<VG>(s[n].X0, j0, c[n].slots_s, wc[n]);
    se1[n] = rans_all16<VG>(s[n].X1, j1, c[n].slots_s, wc[n]);
  }
  for (int n = 0; n < N; ++n) float_store<E, SMC>(c[n], s[n], ee0[n], ee1[n], se0[n], se1[n], t, lm[n]);
  return true;
}

template <int N, int E, int EM, bool SMC, bool VG, bool HT>
WC_AVX512 WC_INLINE bool float_fast_row(const FloatParams& p, const FloatFastConsts* c, FloatFastState* s, uint32_t t0,
                                        WordCursor* wc, uint8_t* const* lm) {
  for (int n = 0; n < N; ++n) s[n].LS0 = s[n].LS1 = _mm512_setzero_si512();
  if (!float_fast_step<N, E, EM, SMC, VG, HT, false>(p, c, s, t0, wc, lm)) return false;
  for (uint32_t j = 1; j < c[0].W; ++j)
    if (!float_fast_step<N, E, EM, SMC, VG, HT, true>(p, c, s, t0 + j, wc, lm)) return false;
  return true;
}

// The symbols of N same-rectangle chunks of one model and geometry
// (streams rans[n], rans_len[n]) into lane-major lm[n]. Returns 1 if all
// decoded, 0 otherwise (for N > 1 the caller then decodes each chunk
// alone, which names the chunk at fault).
template <int N, int E, int EM, bool SMC, bool VG>
WC_AVX512 int float_fast_lanes(const FloatParams& p, const FloatFastConsts* c, const uint8_t* const* rans,
                               const uint32_t* rans_len, const LaneGeom& g, uint8_t* const* lm,
                               uint32_t* const* x_tail) {
  WordCursor wc[N];
  alignas(64) uint8_t pad[N][kPadBytes];
  FloatFastState s[N];
  for (int n = 0; n < N; ++n) {
    open_chunk_state(rans[n], rans_len[n], pad[n], &wc[n], &s[n]);
    s[n].LE = _mm512_setzero_si512();
  }
  for (uint32_t r = 0; r < g.rows; ++r) {
    const bool ok = r ? float_fast_row<N, E, EM, SMC, VG, true>(p, c, s, r * c[0].W, wc, lm)
                      : float_fast_row<N, E, EM, SMC, VG, false>(p, c, s, 0, wc, lm);
    if (!ok) return 0;
  }
  for (int n = 0; n < N; ++n)
    if (wc[n].pos != wc[n].n || !float_states_closed(s[n].X0, s[n].X1, x_tail[n])) return 0;
  return 1;
}

WC_AVX512 FloatFastConsts float_fast_consts(const ModelView& m, const LaneGeom& g) {
  const FloatParams& p = m.fp;
  FloatFastConsts c;
  c.slots_e = m.slot_all;
  c.slots_s = m.slot1_all;
  c.W = static_cast<uint32_t>(g.w[0]);
  c.elo16 = _mm512_set1_epi16(p.elo);
  c.ne1_16 = _mm512_set1_epi16(static_cast<int16_t>(p.ne - 1));
  c.emask16 = _mm512_set1_epi16(static_cast<int16_t>((1u << p.eb) - 1));
  c.mlo = _mm512_set1_epi32(p.mlo);
  c.nm1 = _mm512_set1_epi32(p.nm - 1);
  c.sh_e = _mm_cvtsi32_si128(p.mb);
  c.sh_sign = _mm_cvtsi32_si128(p.eb + p.mb);
  c.sh_mh = _mm_cvtsi32_si128(static_cast<int>(float_raw_bits(p)));
  c.sh_k = _mm_cvtsi32_si128(p.k);
  c.sh_ek = _mm_cvtsi32_si128(p.eb + p.k);
  c.mh16 = _mm512_set1_epi16(static_cast<int16_t>((1u << p.k) - 1));
  return c;
}

// ---- float joint symbols (emode 5): one rANS step per element
// The context is the left neighbour's exponent class and sign (s.LE, and
// s.LS0 holding the 32 left signs as 16-bit words); a row's first element
// has context 0. The symbol J = sign | exponent | high mantissa bits is the
// element's lane-major form shifted right by its raw bits.
template <int N, int E, bool VG, bool HL>
WC_AVX512 WC_INLINE bool float_joint_step(const FloatFastConsts* c, FloatFastState* s, uint32_t t, WordCursor* wc,
                                          uint8_t* const* lm) {
  for (int n = 0; n < N; ++n)
    if (__builtin_expect(wc[n].pos + kStepWords > wc[n].n, 0) && !words_tail(&wc[n])) return false;
  __m512i i0[N], i1[N], e0[N], e1[N];
  for (int n = 0; n < N; ++n) {
    if constexpr (HL) {
      const __m512i q = clamp_sub16(s[n].LE, c[n]);
      const __m512i ctx = _mm512_add_epi16(_mm512_add_epi16(_mm512_add_epi16(q, q), s[n].LS0), _mm512_set1_epi16(1));
      slot_index(ctx, s[n].X0, s[n].X1, &i0[n], &i1[n]);
    } else {
      i0[n] = _mm512_and_si512(s[n].X0, _mm512_set1_epi32(4095));
      i1[n] = _mm512_and_si512(s[n].X1, _mm512_set1_epi32(4095));
    }
  }
  for (int n = 0; n < N; ++n) rans_all32<VG>(s[n].X0, s[n].X1, i0[n], i1[n], c[n].slots_e, wc[n], &e0[n], &e1[n]);
  for (int n = 0; n < N; ++n) {
    const __m512i J = lo_bytes16(e0[n], e1[n]);
    const __m512i hi = _mm512_sll_epi16(J, c[n].sh_mh);
    uint8_t* row = lm[n] + uint64_t{t} * 32 * E;
    if constexpr (E == 1) _mm256_storeu_si256(reinterpret_cast<__m256i*>(row), _mm512_cvtepi16_epi8(hi));
    else _mm512_storeu_si512(row, hi);
    s[n].LE = _mm512_and_si512(_mm512_srl_epi16(J, c[n].sh_k), c[n].emask16);
    s[n].LS0 = _mm512_srl_epi16(J, c[n].sh_ek);
  }
  return true;
}

// The joint symbols of N same-rectangle chunks (as float_fast_lanes).
template <int N, int E, bool VG>
WC_AVX512 int float_joint_lanes(const FloatFastConsts* c, const uint8_t* const* rans, const uint32_t* rans_len,
                                const LaneGeom& g, uint8_t* const* lm, uint32_t* const* x_tail) {
  WordCursor wc[N];
  alignas(64) uint8_t pad[N][kPadBytes];
  FloatFastState s[N];
  for (int n = 0; n < N; ++n) {
    open_chunk_state(rans[n], rans_len[n], pad[n], &wc[n], &s[n]);
    s[n].LE = s[n].LS0 = _mm512_setzero_si512();
  }
  const uint32_t W = c[0].W;
  for (uint32_t r = 0; r < g.rows; ++r) {
    const uint32_t t0 = r * W;
    if (!float_joint_step<N, E, VG, false>(c, s, t0, wc, lm)) return 0;
    for (uint32_t j = 1; j < W; ++j)
      if (!float_joint_step<N, E, VG, true>(c, s, t0 + j, wc, lm)) return 0;
  }
  for (int n = 0; n < N; ++n)
    if (wc[n].pos != wc[n].n || !float_states_closed(s[n].X0, s[n].X1, x_tail[n])) return 0;
  return 1;
}

// The symbols of N same-rectangle chunks of one geometry (models ms[n],
// streams rans[n], lane-major lm[n], raw tail words x_tail[n] or null): the
// loop for the models' exponent context mode. 1 / 0 as float_fast_lanes, -1
// when the lanes are not all the same rectangle or the models do not share
// a loop (float_loop_compatible).
template <int N, int E>
WC_AVX512 int decode_float_fast(const ModelView* ms, const uint8_t* const* rans, const uint32_t* rans_len,
                                const LaneGeom& g, uint8_t* const* lm, uint32_t* const* x_tail) {
  if (!g.same_rect) return -1;
  FloatFastConsts c[N];
  for (int n = 0; n < N; ++n) {
    if (n && !float_loop_compatible(ms[0].fp, ms[n].fp)) return -1;
    c[n] = float_fast_consts(ms[n], g);
  }
  const FloatParams& p = ms[0].fp;
  const bool vg = vector_gathers();
  if (float_joint(p))
    return vg ? float_joint_lanes<N, E, true>(c, rans, rans_len, g, lm, x_tail)
              : float_joint_lanes<N, E, false>(c, rans, rans_len, g, lm, x_tail);
  const bool smc = float_sm_contexts(p);
#define WC_FLOAT_FAST(EMv, S)                                                                      \
  if (p.emode == EMv && smc == S)                                                                  \
    return vg ? float_fast_lanes<N, E, EMv, S, true>(p, c, rans, rans_len, g, lm, x_tail)        \
              : float_fast_lanes<N, E, EMv, S, false>(p, c, rans, rans_len, g, lm, x_tail);
  WC_FLOAT_FAST(0, false) WC_FLOAT_FAST(1, false) WC_FLOAT_FAST(2, false) WC_FLOAT_FAST(3, false)
  WC_FLOAT_FAST(4, false) WC_FLOAT_FAST(0, true) WC_FLOAT_FAST(1, true) WC_FLOAT_FAST(2, true)
  WC_FLOAT_FAST(3, true) WC_FLOAT_FAST(4, true)
#undef WC_FLOAT_FAST
  return -1;
}

// ------------------------------------------------------------ float chunks
// Lane-major elements: the final element bits except the raw mantissa bits.
// Any lane geometry, steps t_begin.. of the chunk (lv, wc, LE and LS hold
// the lanes' state at t_begin: left exponent, left sign + 1, 0 for none).
template <int E>
WC_AVX512 int float_lanes_from(const ModelView& m, const LaneGeom& g, LaneVectors& lv, WordCursor& wc,
                               __m512i (&LE)[2], __m512i (&LS)[2], uint32_t t_begin, uint8_t* lm,
                               uint32_t* x_tail) {
  const FloatParams& p = m.fp;
  __m512i(&X)[2] = lv.X;
  __m512i(&J)[2] = lv.J;
  const __m512i vOne = _mm512_set1_epi32(1);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i vElo = _mm512_set1_epi32(p.elo), vMlo = _mm512_set1_epi32(p.mlo);
  const __m512i vNe = _mm512_set1_epi32(p.ne);
  const __m512i vEmask = _mm512_set1_epi32(static_cast<int32_t>((1u << p.eb) - 1));
  const __m512i vMh = _mm512_set1_epi32(static_cast<int32_t>((1u << p.k) - 1));
  const __m128i sh_sign = _mm_cvtsi32_si128(p.eb + p.mb), sh_e = _mm_cvtsi32_si128(p.mb),
                sh_mh = _mm_cvtsi32_si128(static_cast<int>(float_raw_bits(p))), sh_k = _mm_cvtsi32_si128(p.k);
  const int J6 = kJointClasses;
  for (uint32_t t = t_begin; t < g.steps; ++t) {
    if (__builtin_expect(wc.pos + kStepWords > wc.n, 0) && !words_tail(&wc)) return 0;
    const __m512i vT = _mm512_set1_epi32(static_cast<int32_t>(t));
    __m512i EXP[2];
    __mmask16 ACT[2];
    for (int k = 0; k < 2; ++k) {  // exponents
      const __mmask16 act = _mm512_cmpgt_epi32_mask(lv.N[k], vT);
      ACT[k] = act;
      __m512i ctx = zero;
      if (p.emode != 0) {
        const __mmask16 ht = lv.HT[k] & act;
        const __mmask16 hl = _mm512_mask_cmpgt_epi32_mask(act, J[k], zero);
        const __m512i tv =
            _mm512_and_si512(_mm512_srl_epi32(load_top<E>(lm, g, lv, t, k, ht), sh_e), vEmask);
        const __m512i lv_ = LE[k];
        const __mmask16 both = hl & ht, only_l = hl & ~ht, only_t = ht & ~hl;
        if (p.emode == 4) {
          const __m512i ql = clamp16(_mm512_sub_epi32(lv_, vElo), 0, J6 - 1);
          const __m512i qt = clamp16(_mm512_sub_epi32(tv, vElo), 0, J6 - 1);
          const __m512i jb =
              _mm512_add_epi32(_mm512_add_epi32(vOne, _mm512_mullo_epi32(ql, _mm512_set1_epi32(J6))), qt);
          ctx = _mm512_mask_mov_epi32(ctx, both, jb);
          ctx = _mm512_mask_mov_epi32(ctx, only_l, _mm512_add_epi32(_mm512_set1_epi32(1 + J6 * J6), ql));
          ctx = _mm512_mask_mov_epi32(ctx, only_t, _mm512_add_epi32(_mm512_set1_epi32(1 + J6 * J6 + J6), qt));
        } else {
          __m512i pred;
          __m512i actc = zero;
          if (p.emode == 1) {
            pred = _mm512_mask_mov_epi32(tv, hl, lv_);
          } else if (p.emode == 3) {
            pred = _mm512_mask_mov_epi32(lv_, ht, tv);
          } else {
            pred = _mm512_mask_mov_epi32(tv, hl, lv_);
            const __m512i avg = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(lv_, tv), vOne), 1);
            pred = _mm512_mask_mov_epi32(pred, both, avg);
            const __mmask16 far =
                _mm512_mask_cmpgt_epi32_mask(both, _mm512_abs_epi32(_mm512_sub_epi32(lv_, tv)), vOne);
            actc = _mm512_maskz_mov_epi32(far, vNe);
          }
          const __m512i q = _mm512_min_epi32(_mm512_max_epi32(_mm512_sub_epi32(pred, vElo), zero),
                                             _mm512_sub_epi32(vNe, vOne));
          ctx = _mm512_maskz_mov_epi32(static_cast<__mmask16>(hl | ht), _mm512_add_epi32(actc, q));
        }
      }
      __m512i sym;
      rans_step16(X[k], act, ctx, m.slot_all, wc, &sym);
      EXP[k] = sym;
    }
    for (int k = 0; k < 2; ++k) {  // sign + high mantissa
      const __mmask16 act = ACT[k];
      __m512i ctx = _mm512_min_epi32(_mm512_max_epi32(_mm512_sub_epi32(EXP[k], vMlo), zero),
                                     _mm512_set1_epi32(p.nm - 1));
      if (p.sign_ctx) ctx = _mm512_add_epi32(_mm512_mullo_epi32(ctx, _mm512_set1_epi32(3)), LS[k]);
      __m512i sym;
      rans_step16(X[k], act, ctx, m.slot1_all, wc, &sym);
      const __m512i sign = _mm512_srl_epi32(sym, sh_k);
      const __m512i hi = _mm512_or_si512(
          _mm512_or_si512(_mm512_sll_epi32(sign, sh_sign), _mm512_sll_epi32(EXP[k], sh_e)),
          _mm512_sll_epi32(_mm512_and_si512(sym, vMh), sh_mh));
      store_elems<E>(lm, t, k, hi);
      LE[k] = _mm512_mask_mov_epi32(LE[k], act, EXP[k]);
      LS[k] = _mm512_mask_mov_epi32(LS[k], act, _mm512_add_epi32(vOne, sign));
      J[k] = _mm512_mask_add_epi32(J[k], act, J[k], vOne);
      const __mmask16 wrap = _mm512_mask_cmpeq_epi32_mask(act, J[k], lv.W[k]);
      if (wrap) {
        J[k] = _mm512_mask_mov_epi32(J[k], wrap, zero);
        lv.HT[k] |= wrap;
        LS[k] = _mm512_mask_mov_epi32(LS[k], wrap, zero);
      }
    }
  }
  if (wc.pos != wc.n) return 0;
  return float_states_closed(X[0], X[1], x_tail) ? 1 : 0;
}

// Joint symbols (emode 5) on any lane geometry: float_joint_lanes with
// per-lane masks (active lanes, lanes past their row's first element).
template <int E>
WC_AVX512 int float_joint_lanes_any(const ModelView& m, const uint8_t* rans, uint32_t rans_len, const LaneGeom& g,
                                    uint8_t* lm, uint32_t* x_tail) {
  const FloatParams& p = m.fp;
  WordCursor wc;
  alignas(64) uint8_t pad[kPadBytes];
  LaneVectors lv;
  init_lane_vectors(rans, rans_len, g, &lv, &wc, pad);
  const __m512i zero = _mm512_setzero_si512(), vOne = _mm512_set1_epi32(1);
  const __m512i vElo = _mm512_set1_epi32(p.elo), vNe1 = _mm512_set1_epi32(p.ne - 1);
  const __m512i vEmask = _mm512_set1_epi32(static_cast<int32_t>((1u << p.eb) - 1));
  const __m128i sh_k = _mm_cvtsi32_si128(p.k), sh_ek = _mm_cvtsi32_si128(p.eb + p.k),
                sh_mh = _mm_cvtsi32_si128(static_cast<int>(float_raw_bits(p)));
  __m512i LE[2] = {zero, zero}, LSB[2] = {zero, zero};
  for (uint32_t t = 0; t < g.steps; ++t) {
    if (__builtin_expect(wc.pos + kStepWords > wc.n, 0) && !words_tail(&wc)) return 0;
    const __m512i vT = _mm512_set1_epi32(static_cast<int32_t>(t));
    for (int k = 0; k < 2; ++k) {
      const __mmask16 act = _mm512_cmpgt_epi32_mask(lv.N[k], vT);
      const __mmask16 hl = _mm512_mask_cmpgt_epi32_mask(act, lv.J[k], zero);
      const __m512i q = _mm512_min_epi32(_mm512_max_epi32(_mm512_sub_epi32(LE[k], vElo), zero), vNe1);
      const __m512i ctx =
          _mm512_maskz_mov_epi32(hl, _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(q, q), LSB[k]), vOne));
      __m512i sym;
      rans_step16(lv.X[k], act, ctx, m.slot_all, wc, &sym);
      store_elems<E>(lm, t, k, _mm512_sll_epi32(sym, sh_mh));
      LE[k] = _mm512_mask_mov_epi32(LE[k], act, _mm512_and_si512(_mm512_srl_epi32(sym, sh_k), vEmask));
      LSB[k] = _mm512_mask_mov_epi32(LSB[k], act, _mm512_srl_epi32(sym, sh_ek));
      lv.J[k] = _mm512_mask_add_epi32(lv.J[k], act, lv.J[k], vOne);
      const __mmask16 wrap = _mm512_mask_cmpeq_epi32_mask(act, lv.J[k], lv.W[k]);
      lv.J[k] = _mm512_mask_mov_epi32(lv.J[k], wrap, zero);
    }
  }
  if (wc.pos != wc.n) return 0;
  return float_states_closed(lv.X[0], lv.X[1], x_tail) ? 1 : 0;
}

template <int E>
WC_AVX512 int decode_float_lanes(const ModelView& m, const uint8_t* rans, uint32_t rans_len, const LaneGeom& g,
                                 uint8_t* lm, uint32_t* x_tail) {
  WordCursor wc;
  alignas(64) uint8_t pad[kPadBytes];
  LaneVectors lv;
  init_lane_vectors(rans, rans_len, g, &lv, &wc, pad);
  __m512i LE[2], LS[2];
  for (int k = 0; k < 2; ++k) LE[k] = LS[k] = _mm512_setzero_si512();
  return float_lanes_from<E>(m, g, lv, wc, LE, LS, 0, lm, x_tail);
}

// Lanes of unequal rectangles (widths wa or wa + 1, row counts that may
// differ): while every lane is active (t below the shortest lane's element
// count) a lane's left neighbour is the previous step unless the lane
// starts a row, and its top neighbour lies wa or wa + 1 steps back. These
// steps run on all 32 lanes at once with per-lane masks for both
// neighbours (the contexts of float_fast_step, selected by mask); the
// longer lanes' remaining elements then go to the masked loop above.
struct FloatRaggedState : FloatFastState {  // LS0, LS1: the previous step's, row start or not
  __m512i J;  // column within the lane's row (16-bit, 32 lanes)
};

template <int E, int EM, bool SMC>
WC_AVX512 bool float_ragged_steps(const FloatParams& p, const FloatFastConsts& c, const LaneGeom& g, uint32_t t_end,
                                  FloatRaggedState& s, WordCursor& wc, uint8_t* lm) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i one16 = _mm512_set1_epi16(1);
  const __m512i m4095 = _mm512_set1_epi32(4095);
  alignas(64) uint16_t wl[kLanes];
  for (uint32_t l = 0; l < kLanes; ++l) wl[l] = static_cast<uint16_t>(g.w[l]);
  const __m512i W16 = _mm512_load_si512(wl);
  const __mmask32 wide = g.wide;
  const uint32_t wa = g.wa;
  for (uint32_t t = 0; t < t_end; ++t) {
    if (__builtin_expect(wc.pos + kStepWords > wc.n, 0) && !words_tail(&wc)) return false;
    const __mmask32 hl = _mm512_test_epi16_mask(s.J, s.J);
    const __mmask32 ht = t > wa ? ~0u : (t == wa ? ~wide : 0u);  // t >= the lane's width
    __m512i i0, i1;
    if constexpr (EM != 0) {
      __m512i tv = zero;
      if (ht) {
        tv = load_exps16<E>(lm + uint64_t{t - wa} * 32 * E, c);
        if (t > wa && wide) tv = _mm512_mask_mov_epi16(tv, wide, load_exps16<E>(lm + uint64_t{t - wa - 1} * 32 * E, c));
      }
      const __m512i lv = s.LE;
      const __mmask32 both = hl & ht;
      __m512i ctx;
      if constexpr (EM == 1) {
        ctx = clamp_sub16(_mm512_mask_mov_epi16(tv, hl, lv), c);
      } else if constexpr (EM == 3) {
        ctx = clamp_sub16(_mm512_mask_mov_epi16(lv, ht, tv), c);
      } else if constexpr (EM == 2) {
        const __m512i one = clamp_sub16(_mm512_mask_mov_epi16(tv, hl, lv), c);
        const __m512i q = clamp_sub16(_mm512_avg_epu16(lv, tv), c);
        const __mmask32 far = _mm512_mask_cmpgt_epu16_mask(both, _mm512_abs_epi16(_mm512_sub_epi16(lv, tv)), one16);
        ctx = _mm512_mask_mov_epi16(one, both, _mm512_mask_add_epi16(q, far, q, _mm512_add_epi16(c.ne1_16, one16)));
      } else {  // EM == 4: joint classes
        const int Jc = kJointClasses;
        const __m512i j1 = _mm512_set1_epi16(Jc - 1);
        const __m512i ql = _mm512_min_epi16(_mm512_max_epi16(_mm512_subs_epi16(lv, c.elo16), zero), j1);
        const __m512i qt = _mm512_min_epi16(_mm512_max_epi16(_mm512_subs_epi16(tv, c.elo16), zero), j1);
        const __m512i cb =
            _mm512_add_epi16(_mm512_add_epi16(_mm512_mullo_epi16(ql, _mm512_set1_epi16(Jc)), qt), one16);
        const __m512i cl = _mm512_add_epi16(ql, _mm512_set1_epi16(1 + Jc * Jc));
        const __m512i ct = _mm512_add_epi16(qt, _mm512_set1_epi16(1 + Jc * Jc + Jc));
        ctx = _mm512_mask_mov_epi16(_mm512_mask_mov_epi16(ct, hl, cl), both, cb);
      }
      slot_index(_mm512_maskz_mov_epi16(hl | ht, ctx), s.X0, s.X1, &i0, &i1);
    } else {
      i0 = _mm512_and_si512(s.X0, m4095);
      i1 = _mm512_and_si512(s.X1, m4095);
    }
    __m512i ls0 = s.LS0, ls1 = s.LS1;
    if (SMC && p.sign_ctx) {  // no left sign at a row start
      ls0 = _mm512_maskz_mov_epi32(static_cast<__mmask16>(hl), ls0);
      ls1 = _mm512_maskz_mov_epi32(static_cast<__mmask16>(hl >> 16), ls1);
    }
    float_symbols<E, SMC, false>(p, c, s, i0, i1, ls0, ls1, t, wc, lm);
    s.J = _mm512_add_epi16(s.J, one16);
    s.J = _mm512_maskz_mov_epi16(_mm512_cmpneq_epi16_mask(s.J, W16), s.J);
  }
  return true;
}

template <int E, int EM, bool SMC>
WC_AVX512 int float_ragged_lanes(const ModelView& m, const FloatFastConsts& c, const uint8_t* rans, uint32_t rans_len,
                                 const LaneGeom& g, uint32_t t_all, uint8_t* lm, uint32_t* x_tail) {
  WordCursor wc;
  alignas(64) uint8_t pad[kPadBytes];
  LaneVectors lv;
  init_lane_vectors(rans, rans_len, g, &lv, &wc, pad);
  const __m512i zero = _mm512_setzero_si512();
  FloatRaggedState s;
  s.X0 = lv.X[0];
  s.X1 = lv.X[1];
  s.LE = s.LS0 = s.LS1 = s.J = zero;
  if (!float_ragged_steps<E, EM, SMC>(m.fp, c, g, t_all, s, wc, lm)) return 0;
  // The masked loop's state at step t_all.
  lv.X[0] = s.X0;
  lv.X[1] = s.X1;
  const __m512i vT = _mm512_set1_epi32(static_cast<int32_t>(t_all));
  __m512i LE[2], LS[2];
  for (int k = 0; k < 2; ++k) {
    const __m256i jh = k ? _mm512_extracti64x4_epi64(s.J, 1) : _mm512_castsi512_si256(s.J);
    const __m256i eh = k ? _mm512_extracti64x4_epi64(s.LE, 1) : _mm512_castsi512_si256(s.LE);
    lv.J[k] = _mm512_cvtepu16_epi32(jh);
    LE[k] = _mm512_cvtepu16_epi32(eh);
    LS[k] = SMC ? _mm512_maskz_mov_epi32(_mm512_test_epi32_mask(lv.J[k], lv.J[k]), k ? s.LS1 : s.LS0) : zero;
    lv.HT[k] = _mm512_cmple_epi32_mask(lv.W[k], vT);
  }
  return float_lanes_from<E>(m, g, lv, wc, LE, LS, t_all, lm, x_tail);
}

// Chunks whose lanes differ in size, when every lane holds at least two
// rows' worth of steps; -1 when not handled.
template <int E>
WC_AVX512 int decode_float_ragged(const ModelView& m, const uint8_t* rans, uint32_t rans_len, const LaneGeom& g,
                                  uint8_t* lm, uint32_t* x_tail) {
  if (g.same_rect) return -1;
  uint32_t t_all = g.steps;
  for (uint32_t l = 0; l < kLanes; ++l) t_all = std::min(t_all, static_cast<uint32_t>(g.n[l]));
  if (t_all < 2 * (g.wa + 1)) return -1;
  const FloatFastConsts c = float_fast_consts(m, g);
  const FloatParams& p = m.fp;
  const bool smc = float_sm_contexts(p);
#define WC_FLOAT_RAGGED(EMv, S) \
  if (p.emode == EMv && smc == S) return float_ragged_lanes<E, EMv, S>(m, c, rans, rans_len, g, t_all, lm, x_tail);
  WC_FLOAT_RAGGED(0, false) WC_FLOAT_RAGGED(1, false) WC_FLOAT_RAGGED(2, false) WC_FLOAT_RAGGED(3, false)
  WC_FLOAT_RAGGED(4, false) WC_FLOAT_RAGGED(0, true) WC_FLOAT_RAGGED(1, true) WC_FLOAT_RAGGED(2, true)
  WC_FLOAT_RAGGED(3, true) WC_FLOAT_RAGGED(4, true)
#undef WC_FLOAT_RAGGED
  return -1;
}

// ORs the raw mantissa bits into the raster elements (E bytes each). Field
// i (rawb bits at bit i * rawb of the section) goes to the low bits of
// element i. Blocks of 32 fields (16-bit intermediates, when a field plus
// its bit shift fits 16 bits) or 16 fields (32-bit intermediates) start at
// whole bytes of the section; vpermb brings each field's bytes into its
// element, a variable shift aligns it.
template <int E, int I>
WC_AVX512 void or_raw_bits(uint64_t n, const uint8_t* raw, uint64_t raw_len, uint32_t rawb, uint8_t* out) {
  constexpr int NB = 512 / I;  // fields per block
  alignas(64) uint8_t idx[64];
  alignas(64) uint32_t sh32[16];
  alignas(64) uint16_t sh16[32];
  for (int i = 0; i < NB; ++i) {
    const uint32_t bit = static_cast<uint32_t>(i) * rawb;
    for (int b = 0; b < I / 8; ++b) idx[i * (I / 8) + b] = static_cast<uint8_t>((bit >> 3) + b);
    if constexpr (I == 16) sh16[i] = static_cast<uint16_t>(bit & 7);
    else sh32[i] = bit & 7;
  }
  const __m512i vIdx = _mm512_load_si512(idx);
  const __m512i vSh = I == 16 ? _mm512_load_si512(sh16) : _mm512_load_si512(sh32);
  const __m512i vMask = I == 16 ? _mm512_set1_epi16(static_cast<int16_t>((1u << rawb) - 1))
                                : _mm512_set1_epi32(static_cast<int32_t>((1u << rawb) - 1));
  const uint64_t blk_bytes = uint64_t{NB} * rawb / 8;
  for (uint64_t i = 0; i < n; i += NB) {
    const uint64_t base = i / NB * blk_bytes;
    const uint64_t avail = raw_len - base;  // raw_len >= ceil(n * rawb / 8) + 4 > base
    const __m512i src = avail >= 64 ? _mm512_loadu_si512(raw + base)
                                    : _mm512_maskz_loadu_epi8((1ull << avail) - 1, raw + base);
    const __m512i perm = _mm512_permutexvar_epi8(vIdx, src);
    __m512i f;
    if constexpr (I == 16) f = _mm512_and_si512(_mm512_srlv_epi16(perm, vSh), vMask);
    else f = _mm512_and_si512(_mm512_srlv_epi32(perm, vSh), vMask);
    const uint64_t cnt = n - i < NB ? n - i : NB;
    uint8_t* o = out + i * E;
    if constexpr (E * 8 == I) {
      const uint64_t m = cnt * E >= 64 ? ~0ull : (1ull << (cnt * E)) - 1;
      const __m512i cur = _mm512_maskz_loadu_epi8(m, o);
      _mm512_mask_storeu_epi8(o, m, _mm512_or_si512(cur, f));
    } else if constexpr (E == 1 && I == 16) {
      const __mmask32 m = cnt >= 32 ? ~0u : (1u << cnt) - 1;
      const __m256i cur = _mm256_maskz_loadu_epi8(m, o);
      _mm256_mask_storeu_epi8(o, m, _mm256_or_si256(cur, _mm512_cvtepi16_epi8(f)));
    } else {  // E == 2, I == 32
      const __mmask16 m = cnt >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << cnt) - 1);
      const __m256i cur = _mm256_maskz_loadu_epi16(m, o);
      _mm256_mask_storeu_epi16(o, m, _mm256_or_si256(cur, _mm512_cvtepi32_epi16(f)));
    }
  }
}

// 2-byte elements with 8 raw bits (F16 joint symbols, k = 2): each element's
// raw field is one byte of the section, its low byte.
WC_AVX512 void or_raw_bytes16(uint64_t n, const uint8_t* raw, uint8_t* out) {
  uint64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i f = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(raw + i)));
    _mm512_storeu_si512(out + 2 * i, _mm512_or_si512(_mm512_loadu_si512(out + 2 * i), f));
  }
  if (i < n) {
    const __mmask32 m = static_cast<__mmask32>((1u << (n - i)) - 1);
    const __m512i f = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, raw + i));
    _mm512_mask_storeu_epi16(out + 2 * i, m, _mm512_or_si512(_mm512_maskz_loadu_epi16(m, out + 2 * i), f));
  }
}

// Lane-major symbols (lm) -> the chunk's elements in raster order, with the
// raw low mantissa bits (x_tail: the lanes' tail words of a raw tail chunk).
template <int E>
WC_AVX512 void float_finish_e(const ModelView& m, const ChunkView& cv, const uint8_t* raw, uint64_t raw_len,
                              uint8_t* out, const uint8_t* lm, const LaneGeom& g, bool tail, const uint32_t* x_tail) {
  if (g.same_rect) same_rect_to_raster<E>(lm, g, cv.w, out);
  else lane_major_to_raster<E>(lm, g, cv.w, out);
  const uint32_t rawb = float_raw_bits(m.fp);
  uint64_t n = uint64_t{cv.h} * cv.w;
  if (!rawb) return;
  auto or_bits = [&](uint64_t cnt, const uint8_t* src, uint64_t rl, uint8_t* o) {
    // 1-byte floats have at most 6 mantissa bits: always the 16-bit form.
    if constexpr (E == 1) or_raw_bits<1, 16>(cnt, src, rl, rawb, o);
    if constexpr (E == 2) {
      if (rawb == 8) or_raw_bytes16(cnt, src, o);
      else if (rawb + 7 <= 16) or_raw_bits<2, 16>(cnt, src, rl, rawb, o);
      else or_raw_bits<2, 32>(cnt, src, rl, rawb, o);
    }
    if constexpr (E == 4) or_raw_bits<4, 32>(cnt, src, rl, rawb, o);
  };
  if (tail) {
    // Elements past the stored bytes take their raw bits from the tail
    // buffer (its first element starts at bit 0); the rest as usual.
    alignas(64) uint8_t buf[kRawTailBuf];
    uint64_t ns = 0, bit0 = 0;
    const uint32_t blen = float_raw_tail(m.fp, n, raw, x_tail, buf, &ns, &bit0);
    or_bits(n - ns, buf, blen, out + ns * E);
    n = ns;
  }
  or_bits(n, raw, raw_len, out);
}

template <int E>
WC_AVX512 int decode_float_chunk_e(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                                   const uint8_t* raw, uint64_t raw_len, uint8_t* out, uint8_t* lm,
                                   const LaneGeom& g, bool tail) {
  uint32_t x_tail[kLanes];
  uint32_t* xt = tail ? x_tail : nullptr;
  int r = -1;
  if constexpr (E <= 2) {
    uint8_t* const lms[1] = {lm};
    uint32_t* const xts[1] = {xt};
    r = decode_float_fast<1, E>(&m, &rans, &rans_len, g, lms, xts);
    if (r < 0 && float_joint(m.fp)) r = float_joint_lanes_any<E>(m, rans, rans_len, g, lm, xt);
    if (r < 0) r = decode_float_ragged<E>(m, rans, rans_len, g, lm, xt);
  } else if (float_joint(m.fp)) {
    return -1;  // 4-byte floats have no joint symbols
  }
  if (r == 0) return 0;
  if (r < 0 && !decode_float_lanes<E>(m, rans, rans_len, g, lm, xt)) return 0;
  float_finish_e<E>(m, cv, raw, raw_len, out, lm, g, tail, x_tail);
  return 1;
}

// The grouped loop of N chunks (N = 2 or 3), then each chunk's elements.
template <int N, int E>
WC_AVX512 int decode_float_group_n(const ModelView* ms, const ChunkView& cv, const GroupSide* s, const LaneGeom& g) {
  uint32_t xt[N][kLanes];
  const uint8_t* rans[N];
  uint32_t rans_len[N];
  uint8_t* lms[N];
  uint32_t* xts[N];
  for (int n = 0; n < N; ++n) {
    rans[n] = s[n].rans;
    rans_len[n] = s[n].rans_len;
    lms[n] = s[n].lm;
    xts[n] = s[n].tail ? xt[n] : nullptr;
  }
  const int r = decode_float_fast<N, E>(ms, rans, rans_len, g, lms, xts);
  if (r != 1) return r;
  for (int n = 0; n < N; ++n)
    float_finish_e<E>(ms[n], cv, s[n].raw, s[n].raw_len, s[n].out, s[n].lm, g, s[n].tail, xt[n]);
  return 1;
}

}  // namespace

namespace avx512 {

template <int E>
WC_AVX512 int decode_float_group_e(const ModelView* ms, const ChunkView& cv, const GroupSide* s, int n,
                                   const LaneGeom& g) {
  if constexpr (E > 2) {
    return -1;  // 4-byte floats have no step loop
  } else {
    if (n == 2) return decode_float_group_n<2, E>(ms, cv, s, g);
    if (n == 3) return decode_float_group_n<3, E>(ms, cv, s, g);
    return -1;
  }
}

template int decode_float_group_e<1>(const ModelView*, const ChunkView&, const GroupSide*, int, const LaneGeom&);
template int decode_float_group_e<2>(const ModelView*, const ChunkView&, const GroupSide*, int, const LaneGeom&);

}  // namespace avx512

int decode_float_chunk_simd(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                            const uint8_t* raw, uint64_t raw_len, uint8_t* out, uint8_t* lm, bool tail) {
  if (cpu_path() == CpuPath::kScalar) return decode_float_chunk_fast(m, cv, rans, rans_len, raw, raw_len, out, lm, tail);
  // The avx512 path too for models with 1/8-slot entries and no slot tables
  // (ModelView::ent8; the loops here read the 16 KiB slot tables).
  if (cpu_path() == CpuPath::kAvx2 || (m.ent8 && !m.slot_all))
    return decode_float_chunk_hwy(m, cv, rans, rans_len, raw, raw_len, out, lm, tail);
  if (!simd_enabled() || m.kind != ModelKind::kFloat || !m.slot_all || (!m.slot1_all && !float_joint(m.fp)))
    return -1;
  if (uint64_t{cv.h} * cv.w >= (1ull << 31)) return -1;
  if (m.fp.eb > 8 || m.fp.k > 7 || float_raw_bits(m.fp) > 24) return -1;
  const uint64_t n = uint64_t{cv.h} * cv.w;
  if (!float_raw_ok(m.fp, n, raw_len, tail)) return 0;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;
  LaneGeom g;
  lane_geom(cv, &g);
  switch (m.fp.elem_bytes) {
    case 1: return decode_float_chunk_e<1>(m, cv, rans, rans_len, raw, raw_len, out, lm, g, tail);
    case 2: return decode_float_chunk_e<2>(m, cv, rans, rans_len, raw, raw_len, out, lm, g, tail);
    case 4: return decode_float_chunk_e<4>(m, cv, rans, rans_len, raw, raw_len, out, lm, g, tail);
    default: return -1;
  }
}
}  // namespace wcodec
