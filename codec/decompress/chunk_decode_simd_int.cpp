// codec/decompress/chunk_decode_simd_int.cpp — AVX-512 decoders of int
// chunks: any-geometry lanes (decode_int_lanes) and the same-rectangle
// loops of int8 / uint8 / 4-bit codes over N chunks (decode_int_fast), and
// decode_int_chunk_simd, which picks one. Layout and method:
// chunk_decode_simd.cpp.
// Thread-safety: pure functions over their arguments and the caller's
// scratch.
#include <immintrin.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "chunk_decode_fast.h"
#include "chunk_decode_hwy.h"
#include "chunk_decode_krow.h"
#include "simd_avx512_i.h"
#include "simd_env.h"  // vector_gathers
#include "wcodec/cpu.h"

namespace wcodec {
using namespace avx512;

namespace {

// ------------------------------------------------------------ int chunks
// Lane-major element forms of the int decoder: int8 codes (the byte of the
// value), uint8 codes (value + center), or int32 residuals (everything else;
// tile reconstruction and packing then run on the raster grid).
enum class IntForm { kI8, kU8, kRes32 };

template <IntForm F>
constexpr int form_bytes() {
  return F == IntForm::kRes32 ? 4 : 1;
}

// Residual value of a lane-major element.
template <IntForm F>
WC_AVX512 inline __m512i elem_value(__m512i e, __m512i center) {
  if constexpr (F == IntForm::kI8) return _mm512_srai_epi32(_mm512_slli_epi32(e, 24), 24);
  if constexpr (F == IntForm::kU8) return _mm512_sub_epi32(e, center);
  if constexpr (F == IntForm::kRes32) return e;
}

// The residual off columns back in each lane's row (0 where that is outside
// the lane's rectangle).
template <IntForm F>
WC_AVX512 inline __m512i back_value(const uint8_t* lm, uint32_t t, int k, __mmask16 act, __m512i J, uint32_t off,
                                    __m512i center) {
  const __mmask16 has = _mm512_mask_cmpge_epi32_mask(act, J, _mm512_set1_epi32(static_cast<int32_t>(off)));
  if (!has) return _mm512_setzero_si512();
  const __m512i e = load_elems<form_bytes<F>()>(lm, static_cast<int64_t>(t) - off, k);
  return _mm512_maskz_mov_epi32(has, elem_value<F>(e, center));
}

// Activity class of 16 activities a (32-bit): vpermi2b over the 128-byte
// class table (actA, actB) when every threshold is below 128 (act_perm;
// activity clamped to 127 then classifies the same), else compares with
// the nthr thresholds.
WC_AVX512 WC_INLINE __m512i act_class32(__m512i a, bool act_perm, __m512i actA, __m512i actB, const __m512i* thr,
                                        uint32_t nthr) {
  if (act_perm) {
    a = _mm512_min_epu32(a, _mm512_set1_epi32(127));
    return _mm512_and_si512(_mm512_permutex2var_epi8(actA, a, actB), _mm512_set1_epi32(0xFF));
  }
  a = _mm512_min_epu32(a, _mm512_set1_epi32(1023));
  __m512i cls = _mm512_setzero_si512();
  for (uint32_t i = 0; i < nthr; ++i)
    cls = _mm512_mask_add_epi32(cls, _mm512_cmpge_epu32_mask(a, thr[i]), cls, _mm512_set1_epi32(1));
  return cls;
}

template <IntForm F>
WC_AVX512 int decode_int_lanes(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                               const LaneGeom& g, uint8_t* lm) {
  constexpr int E = form_bytes<F>();
  const IntParams& p = m.ip;
  WordCursor wc;
  alignas(64) uint8_t pad[kPadBytes];
  LaneVectors lv;
  init_lane_vectors(rans, rans_len, g, &lv, &wc, pad);
  __m512i(&X)[2] = lv.X;
  __m512i(&J)[2] = lv.J;
  __m512i RP[2], H1[2], H2[2], ROW[2];
  for (int k = 0; k < 2; ++k) {
    alignas(64) int32_t a_rp[16];
    for (int l = 0; l < 16; ++l)
      a_rp[l] = p.use_rc && g.n[16 * k + l] ? m.rc_pad[cv.row0 + static_cast<uint32_t>(g.r0[16 * k + l])] : 0;
    RP[k] = _mm512_load_si512(a_rp);
    ROW[k] = _mm512_add_epi32(_mm512_load_si512(g.r0 + 16 * k), _mm512_set1_epi32(static_cast<int32_t>(cv.row0)));
    H1[k] = H2[k] = _mm512_setzero_si512();
  }
  const __m512i vL = _mm512_set1_epi32(static_cast<int32_t>(kRansL));
  const __m512i vOne = _mm512_set1_epi32(1);
  const __m512i vNb = _mm512_set1_epi32(p.nb);
  const __m512i vEsc = _mm512_set1_epi32(p.esc);
  const __m512i vCenter = _mm512_set1_epi32(p.center);
  const __m512i zero = _mm512_setzero_si512();
  const uint8_t* scale_lut = m.luts->scale;
  const uint8_t* ccol = p.use_cc ? m.cc_pad + cv.col0 : nullptr;
  const bool need_scale = p.ns > 1;
  const uint32_t nthr = p.nb > 1 ? p.nb - 1u : 0u;
  // Activity class: vpermi2b over 128 bytes when every threshold is below
  // 128 (activity clamped to 127 then classifies the same), else compares.
  bool act_perm = true;
  for (uint32_t i = 0; i < nthr; ++i) act_perm &= p.thr[i] < 128;
  const __m512i actA = _mm512_loadu_si512(m.luts->act), actB = _mm512_loadu_si512(m.luts->act + 64);
  __m512i thr[7];
  for (uint32_t i = 0; i < 7; ++i) thr[i] = _mm512_set1_epi32(i < nthr ? p.thr[i] : 0);
  const __m512i lane_c0[2] = {_mm512_load_si512(g.c0), _mm512_load_si512(g.c0 + 16)};
  __mmask16 bad = 0;
  // Kernel contexts (nbr_mode 3): each lane's phase in its kernel (KP, 0 ..
  // period - 1) and in its kernel row (KX, 0 .. off_a - 1), reset to the
  // lane's start phases (KP0, KX0) at the start of its rows.
  const bool kern = p.nbr_mode == 3;
  __m512i KP[2], KX[2], KP0[2], KX0[2];
  const __m512i vPeriod = _mm512_set1_epi32(kern ? p.period : 1), vKw = _mm512_set1_epi32(kern ? p.off_a : 1);
  for (int k = 0; k < 2; ++k) {
    alignas(64) int32_t kp[16], kx[16];
    for (int l = 0; l < 16; ++l) {
      kp[l] = kern ? static_cast<int32_t>((cv.col0 + static_cast<uint32_t>(g.c0[16 * k + l])) % p.period) : 0;
      kx[l] = kern ? kp[l] % p.off_a : 0;
    }
    KP[k] = KP0[k] = _mm512_load_si512(kp);
    KX[k] = KX0[k] = _mm512_load_si512(kx);
  }

  for (uint32_t t = 0; t < g.steps; ++t) {
    if (__builtin_expect(wc.pos + kStepWords > wc.n, 0) && !words_tail(&wc)) return 0;
    const __m512i vT = _mm512_set1_epi32(static_cast<int32_t>(t));
    __m512i V[2], SYM[2];
    __mmask16 ACT[2], ESC[2];
#pragma GCC unroll 2
    for (int k = 0; k < 2; ++k) {
      const __mmask16 act = _mm512_cmpgt_epi32_mask(lv.N[k], vT);
      ACT[k] = act;
      const __mmask16 ht = lv.HT[k] & act;
      const __mmask16 hl = _mm512_mask_cmpgt_epi32_mask(act, J[k], zero);
      const __m512i top = elem_value<F>(load_top<E>(lm, g, lv, t, k, ht), vCenter);
      const __m512i topz = _mm512_maskz_mov_epi32(ht, top);
      __m512i sc = zero;
      if (need_scale) {
        __m512i idx = RP[k];
        if (ccol) idx = _mm512_add_epi32(idx, gather_bytes(act, _mm512_add_epi32(lane_c0[k], J[k]), ccol));
        sc = gather_bytes(act, idx, scale_lut);
      }
      __m512i ctx;
      if (kern) {
        const __m512i lk = _mm512_maskz_mov_epi32(_mm512_mask_cmpneq_epi32_mask(hl, KX[k], zero), H1[k]);
        const __mmask16 hu = _mm512_mask_cmpge_epi32_mask(act, KP[k], vKw);
        const __m512i uk = _mm512_maskz_mov_epi32(hu, back_value<F>(lm, t, k, hu, J[k], p.off_a, vCenter));
        ctx = need_scale ? _mm512_mullo_epi32(sc, vNb) : zero;
        if (nthr) {
          const __m512i a = _mm512_add_epi32(_mm512_abs_epi32(lk), _mm512_abs_epi32(uk));
          ctx = _mm512_add_epi32(ctx, act_class32(a, act_perm, actA, actB, thr, nthr));
        }
        const __m512i three = _mm512_set1_epi32(3);
        ctx = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_add_epi32(_mm512_mullo_epi32(ctx, three), sign3(lk)), three),
                               sign3(uk));
      } else if (p.nbr_mode == 1) {
        const __m512i three = _mm512_set1_epi32(3);
        __m512i kk = _mm512_add_epi32(_mm512_mullo_epi32(sign3(H1[k]), three), sign3(H2[k]));
        kk = _mm512_add_epi32(_mm512_mullo_epi32(kk, three),
                              sign3(back_value<F>(lm, t, k, act, J[k], p.off_a, vCenter)));
        kk = _mm512_add_epi32(_mm512_mullo_epi32(kk, three), sign3(topz));
        if (p.off_b) {
          kk = _mm512_add_epi32(_mm512_mullo_epi32(kk, three),
                                sign3(back_value<F>(lm, t, k, act, J[k], p.off_b, vCenter)));
          ctx = _mm512_add_epi32(_mm512_mullo_epi32(sc, _mm512_set1_epi32(243)), kk);
        } else {
          ctx = _mm512_add_epi32(_mm512_mullo_epi32(sc, _mm512_set1_epi32(81)), kk);
        }
      } else {
        ctx = need_scale ? _mm512_mullo_epi32(sc, vNb) : zero;
        if (nthr) {
          const __m512i at = _mm512_abs_epi32(topz);
          __m512i a = _mm512_add_epi32(_mm512_slli_epi32(_mm512_abs_epi32(H1[k]), 1),
                                       _mm512_add_epi32(at, _mm512_abs_epi32(H2[k])));
          if (p.off_a)
            a = _mm512_add_epi32(a, _mm512_abs_epi32(back_value<F>(lm, t, k, act, J[k], p.off_a, vCenter)));
          a = _mm512_mask_add_epi32(a, static_cast<__mmask16>(ht & ~hl), a, _mm512_slli_epi32(at, 1));
          ctx = _mm512_add_epi32(ctx, act_class32(a, act_perm, actA, actB, thr, nthr));
        }
        ctx = _mm512_add_epi32(_mm512_add_epi32(ctx, _mm512_slli_epi32(ctx, 1)), sign3(H1[k]));
      }
      __m512i sym;
      if (m.sym_small) rans_step16_small(X[k], act, ctx, m.sym_small, m.fs_small, wc, &sym);
      else rans_step16(X[k], act, ctx, m.slot_all, wc, &sym);
      SYM[k] = sym;
      ESC[k] = _mm512_mask_cmpge_epu32_mask(act, sym, vEsc);
      // zz_decode: (u >> 1) ^ -(u & 1)
      V[k] = _mm512_xor_si512(_mm512_srli_epi32(sym, 1), _mm512_sub_epi32(zero, _mm512_and_si512(sym, vOne)));
    }
    if (ESC[0] | ESC[1]) {
      // Extra bits of escaped tokens, in scalar stream order.
      alignas(64) uint32_t xs[kLanes], ss[kLanes], extra[kLanes];
      alignas(64) int32_t vs[kLanes];
      _mm512_store_si512(xs, X[0]);
      _mm512_store_si512(xs + 16, X[1]);
      _mm512_store_si512(ss, SYM[0]);
      _mm512_store_si512(ss + 16, SYM[1]);
      _mm512_store_si512(vs, V[0]);
      _mm512_store_si512(vs + 16, V[1]);
      const uint32_t escm = static_cast<uint32_t>(ESC[0]) | (static_cast<uint32_t>(ESC[1]) << 16);
      const uint8_t zero_word[2] = {0, 0};
      WordSource ws{wc.n ? wc.p : zero_word, wc.n, wc.pos, 0};
      for (uint32_t l = 0; l < kLanes; ++l) {
        extra[l] = 0;
        if (!(escm >> l & 1)) continue;
        const uint32_t nb = ss[l] - p.esc;
        if (nb > kEscClasses - 1) return 0;
        if (nb < 2) continue;
        const uint32_t e = nb - 1, lo = e < 8 ? e : 8;
        extra[l] = rans_decode_bits(xs[l], lo);
        rans_renorm(xs[l], ws);
      }
      for (uint32_t l = 0; l < kLanes; ++l) {
        if (!(escm >> l & 1)) continue;
        const uint32_t nb = ss[l] - p.esc;
        if (nb < 10) continue;
        extra[l] |= rans_decode_bits(xs[l], nb - 9) << 8;
        rans_renorm(xs[l], ws);
      }
      if (ws.bad) return 0;
      wc.pos = ws.pos;
      for (uint32_t l = 0; l < kLanes; ++l) {
        if (!(escm >> l & 1)) continue;
        const uint32_t nb = ss[l] - p.esc;
        const uint32_t d = nb == 0 ? 0u : ((1u << (nb - 1)) | extra[l]);
        vs[l] = tile::zz_decode(static_cast<int32_t>(p.esc + d));
      }
      X[0] = _mm512_load_si512(xs);
      X[1] = _mm512_load_si512(xs + 16);
      V[0] = _mm512_load_si512(vs);
      V[1] = _mm512_load_si512(vs + 16);
    }
#pragma GCC unroll 2
    for (int k = 0; k < 2; ++k) {
      const __mmask16 act = ACT[k];
      if constexpr (F == IntForm::kI8) {
        bad |= _mm512_mask_cmpgt_epu32_mask(act, _mm512_add_epi32(V[k], _mm512_set1_epi32(128)),
                                            _mm512_set1_epi32(255));
        store_elems<E>(lm, t, k, V[k]);
      } else if constexpr (F == IntForm::kU8) {
        const __m512i code = _mm512_add_epi32(V[k], vCenter);
        bad |= _mm512_mask_cmpgt_epu32_mask(act, code, _mm512_set1_epi32(255));
        store_elems<E>(lm, t, k, code);
      } else {
        store_elems<E>(lm, t, k, V[k]);
      }
      H2[k] = _mm512_mask_mov_epi32(H2[k], act, H1[k]);
      H1[k] = _mm512_mask_mov_epi32(H1[k], act, V[k]);
      // Advance the cursors of active lanes; wrap to the next row.
      J[k] = _mm512_mask_add_epi32(J[k], act, J[k], vOne);
      if (kern) {
        KP[k] = _mm512_mask_add_epi32(KP[k], act, KP[k], vOne);
        KP[k] = _mm512_mask_mov_epi32(KP[k], _mm512_cmpeq_epi32_mask(KP[k], vPeriod), zero);
        KX[k] = _mm512_mask_add_epi32(KX[k], act, KX[k], vOne);
        KX[k] = _mm512_mask_mov_epi32(KX[k], _mm512_cmpeq_epi32_mask(KX[k], vKw), zero);
      }
      const __mmask16 wrap = _mm512_mask_cmpeq_epi32_mask(act, J[k], lv.W[k]);
      if (wrap) {
        J[k] = _mm512_mask_mov_epi32(J[k], wrap, zero);
        KP[k] = _mm512_mask_mov_epi32(KP[k], wrap, KP0[k]);
        KX[k] = _mm512_mask_mov_epi32(KX[k], wrap, KX0[k]);
        lv.HT[k] |= wrap;
        H1[k] = _mm512_mask_mov_epi32(H1[k], wrap, zero);
        H2[k] = _mm512_mask_mov_epi32(H2[k], wrap, zero);
        ROW[k] = _mm512_mask_add_epi32(ROW[k], wrap, ROW[k], vOne);
        if (p.use_rc) {
          // Lanes that finished their rectangle point one row past it: they
          // are inactive from now on, so read no row class for them.
          const __mmask16 live = _mm512_mask_cmpgt_epi32_mask(wrap, lv.N[k], _mm512_add_epi32(vT, vOne));
          RP[k] = _mm512_mask_mov_epi32(RP[k], live, gather_bytes(live, ROW[k], m.rc_pad));
        }
      }
    }
  }
  if (wc.pos != wc.n) return 0;
  const __mmask16 e0 = _mm512_cmpneq_epu32_mask(X[0], vL), e1 = _mm512_cmpneq_epu32_mask(X[1], vL);
  if (e0 | e1) return 0;
  if (bad) return 0;  // a value without a code: the reference's packing rejects it too
  return 1;
}

// ---- int (int8 / uint8 / 4-bit codes, activity or kernel contexts, scale classes)
struct IntFastConsts {
  const uint32_t* slots;
  uint32_t W, oa;
  __m512i lut[4];     // activity (clamped) -> 3 * class (kernel contexts: 9 * class), bytes
  __m512i thr3[7];    // compare mode: thresholds (16-bit)
  uint32_t nthr;
  __m512i center;     // 16-bit
  __m512i esc;        // 16-bit
  // Kernel contexts (nbr_mode 3): which lanes have their left and their
  // upper kernel neighbour at column j of their rows (kmask[2j],
  // kmask[2j + 1]; bit l: lane l). A lane's phase at column j is (its start
  // column + j) mod period, so the masks are known before the loop.
  const uint32_t* kmask;
  // Scale classes (ns > 1): rc + cc (0..62) -> class (bytes), the context
  // offset of one class (nb * 3; kernel contexts nb * 9, 16-bit), and the
  // lanes' rc of each lane row (rcl, use_rc) and cc of each step of a row
  // (ccl, use_cc), 32 bytes each.
  bool scale;
  __m512i scale_lut, sc_mul;
  const uint8_t *rcl, *ccl;
  // Byte form (int8 codes, activity classes from tables): esc in every
  // byte.
  __m256i esc8;
};

struct IntFastState {
  __m512i X0, X1;
  __m512i A1, A2, LS;  // |left|, |left 2|, sign class of left (16-bit, 32 lanes)
  __m256i a1b, a2b, lsb;  // the same in the byte form (lsb: weighted sign class)
  __m512i E0, E1;         // slot entries of the last step, its values pending
  __m512i RP;          // scale classes: the lanes' rc in this row (16-bit)
  __mmask32 bad;
};

// |value| of the 32 lane-major codes at step s (16-bit).
template <bool U8>
WC_AVX512 WC_INLINE __m512i abs_codes(const uint8_t* row, __m512i center) {
  const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row));
  if constexpr (U8) return _mm512_abs_epi16(_mm512_sub_epi16(_mm512_cvtepu8_epi16(c), center));
  return _mm512_cvtepu8_epi16(_mm256_abs_epi8(c));  // |-128| = 0x80 read unsigned
}

// Escaped tokens of one step: extra bits in scalar stream order, then the
// values, their codes' validity and the context inputs of the escaped lanes.
template <bool U8>
WC_AVX512 __attribute__((noinline, cold)) bool int_fast_escapes(const IntParams& p, __mmask32 escm, __m512i tok,
                                                                 __m512i* X0, __m512i* X1, __m512i* V, __m512i* A1n,
                                                                 __m512i* LSn, const WordCursor* wc_in,
                                                                 uint32_t* pos_out) {
  const WordCursor& wc = *wc_in;
  alignas(64) uint32_t xs[kLanes];
  alignas(64) uint16_t ts[kLanes], a1[kLanes], ls[kLanes];
  alignas(64) int16_t vs[kLanes];
  uint32_t extra[kLanes] = {};
  _mm512_store_si512(xs, *X0);
  _mm512_store_si512(xs + 16, *X1);
  _mm512_store_si512(ts, tok);
  _mm512_store_si512(vs, *V);
  _mm512_store_si512(a1, *A1n);
  _mm512_store_si512(ls, *LSn);
  const uint8_t zero_word[2] = {0, 0};
  WordSource ws{wc.n ? wc.p : zero_word, wc.n, wc.pos, 0};
  for (uint32_t l = 0; l < kLanes; ++l) {
    if (!(escm >> l & 1)) continue;
    const uint32_t nb = ts[l] - p.esc;
    if (nb > kEscClasses - 1) return false;
    if (nb < 2) continue;
    const uint32_t e = nb - 1, lo = e < 8 ? e : 8;
    extra[l] = rans_decode_bits(xs[l], lo);
    rans_renorm(xs[l], ws);
  }
  for (uint32_t l = 0; l < kLanes; ++l) {
    if (!(escm >> l & 1)) continue;
    const uint32_t nb = ts[l] - p.esc;
    if (nb < 10) continue;
    extra[l] |= rans_decode_bits(xs[l], nb - 9) << 8;
    rans_renorm(xs[l], ws);
  }
  if (ws.bad) return false;
  *pos_out = ws.pos;
  for (uint32_t l = 0; l < kLanes; ++l) {
    if (!(escm >> l & 1)) continue;
    const uint32_t nb = ts[l] - p.esc;
    const uint32_t d = nb == 0 ? 0u : ((1u << (nb - 1)) | extra[l]);
    const int32_t v = tile::zz_decode(static_cast<int32_t>(p.esc + d));
    // A value without a code: the reference's packing rejects the chunk.
    if (U8 ? (v + p.center < 0 || v + p.center > 255) : (v < -128 || v > 127)) return false;
    vs[l] = static_cast<int16_t>(v);
    a1[l] = static_cast<uint16_t>(v < 0 ? -v : v);
    ls[l] = static_cast<uint16_t>(v > 0 ? 1 : (v < 0 ? 2 : 0));
  }
  *X0 = _mm512_load_si512(xs);
  *X1 = _mm512_load_si512(xs + 16);
  *V = _mm512_load_si512(vs);
  *A1n = _mm512_load_si512(a1);
  *LSn = _mm512_load_si512(ls);
  return true;
}

// Activity class (times the table's factor) of the clamped activity a by
// the loop's activity form AM; f: 3 (activity contexts) or 9 (kernel).
template <int AM>
WC_AVX512 WC_INLINE __m512i int_act_class(const IntFastConsts& c, __m512i a, int f) {
  if constexpr (AM == 0) {
    return _mm512_setzero_si512();
  } else if constexpr (AM == 1) {
    a = _mm512_min_epu16(a, _mm512_set1_epi16(127));
    return _mm512_and_si512(_mm512_permutex2var_epi8(c.lut[0], a, c.lut[1]), _mm512_set1_epi16(0xFF));
  } else if constexpr (AM == 2) {
    a = _mm512_min_epu16(a, _mm512_set1_epi16(255));
    const __m512i lo = _mm512_permutex2var_epi8(c.lut[0], a, c.lut[1]);
    const __m512i hi = _mm512_permutex2var_epi8(c.lut[2], a, c.lut[3]);
    return _mm512_and_si512(_mm512_mask_mov_epi16(lo, _mm512_cmpge_epu16_mask(a, _mm512_set1_epi16(128)), hi),
                            _mm512_set1_epi16(0xFF));
  } else {
    a = _mm512_min_epu16(a, _mm512_set1_epi16(1023));
    __m512i ctx = _mm512_setzero_si512();
    const __m512i step = _mm512_set1_epi16(static_cast<int16_t>(f));
    for (uint32_t i = 0; i < c.nthr; ++i)
      ctx = _mm512_mask_add_epi16(ctx, _mm512_cmpge_epu16_mask(a, c.thr3[i]), ctx, step);
    return ctx;
  }
}

// Kernel context (nbr_mode 3) of one step: the left neighbour (the lane's
// registers) and the one off_a back (lane-major row t - off_a), each where
// the phase's kernel has it.
template <bool U8, int AM, bool HL, bool HA>
WC_AVX512 WC_INLINE __m512i int_step_ctx_kern(const IntFastConsts& c, const IntFastState& s, uint32_t t, uint32_t j,
                                              const uint8_t* lm) {
  const __m512i zero = _mm512_setzero_si512();
  const __mmask32 ml = HL ? _cvtu32_mask32(c.kmask[2 * j]) : 0;
  const __mmask32 mu = HA ? _cvtu32_mask32(c.kmask[2 * j + 1]) : 0;
  __m512i a = _mm512_maskz_mov_epi16(ml, s.A1);
  __m512i ctx = _mm512_maskz_mov_epi16(ml, _mm512_add_epi16(s.LS, _mm512_add_epi16(s.LS, s.LS)));
  if constexpr (HA) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lm + (uint64_t{t} - c.oa) * 32));
    const __m512i u = U8 ? _mm512_sub_epi16(_mm512_cvtepu8_epi16(b), c.center) : _mm512_cvtepi8_epi16(b);
    a = _mm512_add_epi16(a, _mm512_maskz_mov_epi16(mu, _mm512_abs_epi16(u)));
    const __m512i qu = _mm512_or_si512(_mm512_maskz_mov_epi16(_mm512_cmpgt_epi16_mask(u, zero), _mm512_set1_epi16(1)),
                                       _mm512_maskz_mov_epi16(_mm512_cmplt_epi16_mask(u, zero), _mm512_set1_epi16(2)));
    ctx = _mm512_add_epi16(ctx, _mm512_maskz_mov_epi16(mu, qu));
  }
  return _mm512_add_epi16(ctx, int_act_class<AM>(c, a, 9));
}

// The context of one step (32 symbols) at lane-major row t. HT: rows above
// exist; HL: the left neighbour exists; HA: the off_a neighbour exists. AM:
// activity classes: 0 none (nb = 1), 1 one 128-byte table, 2 two tables
// (< 256), 3 compares.
template <bool U8, int AM, bool HT, bool HL, bool HA>
WC_AVX512 WC_INLINE __m512i int_step_ctx(const IntFastConsts& c, const IntFastState& s, uint32_t t,
                                         const uint8_t* lm) {
  __m512i ctx = _mm512_setzero_si512();
  if constexpr (AM != 0) {
    __m512i a = _mm512_add_epi16(_mm512_slli_epi16(s.A1, 1), s.A2);
    if constexpr (HT) {
      const __m512i at = abs_codes<U8>(lm + (uint64_t{t} - c.W) * 32, c.center);
      a = _mm512_add_epi16(a, at);
      if constexpr (!HL) a = _mm512_add_epi16(a, _mm512_slli_epi16(at, 1));
    }
    if constexpr (HA) a = _mm512_add_epi16(a, abs_codes<U8>(lm + (uint64_t{t} - c.oa) * 32, c.center));
    ctx = int_act_class<AM>(c, a, 3);
  }
  return _mm512_add_epi16(ctx, s.LS);
}

// k (1..12) uniform bits of the lanes in m (rans_decode_bits: a symbol of
// frequency 2^(12 - k)), their states renormalized in lane order; 0 in the
// other lanes.
WC_AVX512 WC_INLINE __m512i uniform_bits16(__m512i& X, __m512i k, __mmask16 m, WordCursor& wc) {
  const __m512i sh = _mm512_sub_epi32(_mm512_set1_epi32(12), k);
  const __m512i slot = _mm512_and_si512(X, _mm512_set1_epi32(0xFFF));
  const __m512i v = _mm512_srlv_epi32(slot, sh);
  const __m512i nx = _mm512_add_epi32(_mm512_sllv_epi32(_mm512_srli_epi32(X, 12), sh),
                                      _mm512_sub_epi32(slot, _mm512_sllv_epi32(v, sh)));
  X = _mm512_mask_mov_epi32(X, m, nx);
  renorm16(X, m, wc);
  return _mm512_maskz_mov_epi32(m, v);
}

// Escaped tokens of one step in the vector registers when each has at most
// 8 extra bits (escape class nb <= 9; the scalar int_fast_escapes takes the
// rest): the extra bits are uniform rANS symbols (rans_decode_bits), decoded
// for the lanes with nb >= 2 and renormalized in lane order, the reference's
// order. Sets the escaped lanes of V, A1n and LSn. False (nothing consumed)
// when some escape needs more bits or is invalid: the scalar path then
// decodes it or reports the damage.
template <bool U8>
WC_AVX512 WC_INLINE bool int_vector_escapes(const IntFastConsts& c, __mmask32 escm, __m512i tok, IntFastState& s,
                                            WordCursor& wc, __m512i* V, __m512i* A1n, __m512i* LSn) {
  const __m512i nb = _mm512_maskz_sub_epi16(escm, tok, c.esc);
  if (_mm512_mask_cmpgt_epu16_mask(escm, nb, _mm512_set1_epi16(9))) return false;
  const __m512i one16 = _mm512_set1_epi16(1);
  const __mmask32 m2 = _mm512_mask_cmpge_epu16_mask(escm, nb, _mm512_set1_epi16(2));
  __m512i extra = _mm512_setzero_si512();
  if (m2) {
    const __m512i k = _mm512_sub_epi16(nb, one16);  // extra bits, 1..8 where m2
    const __m512i k0 = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(k));
    const __m512i k1 = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(k, 1));
    const __m512i v0 = uniform_bits16(s.X0, k0, static_cast<__mmask16>(m2), wc);
    const __m512i v1 = uniform_bits16(s.X1, k1, static_cast<__mmask16>(m2 >> 16), wc);
    extra = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(v0)), _mm512_cvtepi32_epi16(v1), 1);
  }
  // d = 0 for nb = 0, else 2^(nb - 1) | extra; value = zz^-1(esc + d).
  const __m512i d = _mm512_maskz_mov_epi16(_mm512_mask_cmpge_epu16_mask(escm, nb, one16),
                                           _mm512_or_si512(_mm512_sllv_epi16(one16, _mm512_sub_epi16(nb, one16)), extra));
  const __m512i u = _mm512_add_epi16(c.esc, d);
  const __m512i v = _mm512_xor_si512(_mm512_srli_epi16(u, 1), _mm512_sub_epi16(_mm512_setzero_si512(),
                                                                               _mm512_and_si512(u, one16)));
  // A value without a code: the reference's packing rejects the chunk (for
  // U8 the caller's range check on value + center does).
  if constexpr (!U8) {
    if (_mm512_mask_cmpgt_epi16_mask(escm, v, _mm512_set1_epi16(127)) |
        _mm512_mask_cmplt_epi16_mask(escm, v, _mm512_set1_epi16(-128)))
      s.bad |= escm;
  }
  *V = _mm512_mask_mov_epi16(*V, escm, v);
  *A1n = _mm512_mask_mov_epi16(*A1n, escm, _mm512_abs_epi16(v));
  const __mmask32 pos = _mm512_cmpgt_epi16_mask(v, _mm512_setzero_si512());
  const __mmask32 neg = _mm512_cmplt_epi16_mask(v, _mm512_setzero_si512());
  *LSn = _mm512_mask_mov_epi16(*LSn, escm,
                               _mm512_or_si512(_mm512_maskz_mov_epi16(pos, one16),
                                               _mm512_maskz_mov_epi16(neg, _mm512_set1_epi16(2))));
  return true;
}

// The values of one step from its slot entries (e0, e1: 32-bit halves):
// escapes resolved, codes stored at lane-major row t, neighbour state
// advanced.
template <bool U8>
WC_AVX512 WC_INLINE bool int_step_values(const IntParams& p, const IntFastConsts& c, IntFastState& s, __m512i e0,
                                         __m512i e1, uint32_t t, WordCursor& wc, uint8_t* lm) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i one = _mm512_set1_epi16(1);
  const __m512i tok = lo_bytes16(e0, e1);
  __m512i V = _mm512_xor_si512(_mm512_srli_epi16(tok, 1), _mm512_sub_epi16(zero, _mm512_and_si512(tok, one)));
  __m512i A1n = _mm512_avg_epu16(tok, zero);  // |zz^-1(u)| = (u + 1) >> 1
  __m512i LSn = _mm512_add_epi16(_mm512_min_epu16(tok, one), _mm512_and_si512(tok, one));
  const __mmask32 escm = _mm512_cmpge_epu16_mask(tok, c.esc);
  if (__builtin_expect(escm != 0, 0) && int_vector_escapes<U8>(c, escm, tok, s, wc, &V, &A1n, &LSn)) {
    // Escapes whose extra bits fit 8 (every int8 and uint8 value): done in
    // the vector registers.
  } else if (__builtin_expect(escm != 0, 0)) {
    __m512i x0 = s.X0, x1 = s.X1, v = V, a1 = A1n, ls = LSn;
    const WordCursor wcc = wc;
    uint32_t pos = 0;
    if (!int_fast_escapes<U8>(p, escm, tok, &x0, &x1, &v, &a1, &ls, &wcc, &pos)) return false;
    s.X0 = x0;
    s.X1 = x1;
    V = v;
    A1n = a1;
    LSn = ls;
    wc.pos = pos;
  }
  if constexpr (U8) {
    V = _mm512_add_epi16(V, c.center);
    s.bad |= _mm512_cmpgt_epu16_mask(V, _mm512_set1_epi16(255));
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lm + uint64_t{t} * 32), _mm512_cvtepi16_epi8(V));
  s.A2 = s.A1;
  s.A1 = A1n;
  s.LS = LSn;
  return true;
}

// The context offset of the lanes' scale classes at step j of a lane row
// (the reference's sc * nb * 3, kernel contexts sc * nb * 9).
WC_AVX512 WC_INLINE __m512i int_scale_term(const IntFastConsts& c, const IntFastState& s, uint32_t j) {
  __m512i sv = s.RP;
  if (c.ccl) sv = _mm512_add_epi16(sv, codes16(c.ccl + uint64_t{j} * 32));
  const __m512i sc = _mm512_and_si512(_mm512_permutexvar_epi8(sv, c.scale_lut), _mm512_set1_epi16(0xFF));
  return _mm512_mullo_epi16(sc, c.sc_mul);
}

// ---- the byte form of the int loop
// For int8 codes (not uint8 or 4-bit ones) whose activity classes come from
// the byte tables (AM 0..2), every per-element quantity of the context fits
// a byte: values are int8, |value| <= 128, the activity sums saturate at
// 255 (every class table reads min(a, 127) or min(a, 255), so saturation
// changes no class) and contexts without scale classes stay below 256
// (9 (nb - 1) + 8 <= 71). The 32 lanes then fit one 256-bit register and the
// step's context and value arithmetic takes about 40% fewer micro-ops than
// the 16-bit form.

// Table lookup of 32 byte indexes (low 7 bits) in a 128-byte table.
WC_AVX512 WC_INLINE __m256i perm128b(const __m512i* t, __m256i idx) {
  return _mm512_castsi512_si256(_mm512_permutex2var_epi8(t[0], _mm512_castsi256_si512(idx), t[1]));
}

template <int AM>
WC_AVX512 WC_INLINE __m256i int_act_class8(const IntFastConsts& c, __m256i a) {
  if constexpr (AM == 0) {
    return _mm256_setzero_si256();
  } else if constexpr (AM == 1) {
    return perm128b(c.lut, _mm256_min_epu8(a, _mm256_set1_epi8(127)));
  } else {
    static_assert(AM == 2, "the byte form takes table classes only");
    const __m256i lo = perm128b(c.lut, a);
    const __m256i hi = perm128b(c.lut + 2, a);
    return _mm256_mask_mov_epi8(lo, _mm256_movepi8_mask(a), hi);  // a >= 128: the upper table
  }
}

// |code| of the 32 lane-major int8 codes of a row (|-128| = 128 unsigned).
WC_AVX512 WC_INLINE __m256i abs_codes8(const uint8_t* row) {
  return _mm256_abs_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)));
}

// The context of one step in bytes (int_step_ctx, int_step_ctx_kern).
template <int AM, bool KERN, bool HT, bool HL, bool HA>
WC_AVX512 WC_INLINE __m256i int_step_ctx8(const IntFastConsts& c, const IntFastState& s, uint32_t t, uint32_t j,
                                          const uint8_t* lm) {
  if constexpr (KERN) {
    const __mmask32 ml = HL ? _cvtu32_mask32(c.kmask[2 * j]) : 0;
    __m256i a = _mm256_maskz_mov_epi8(ml, s.a1b);
    __m256i ctx = _mm256_maskz_mov_epi8(ml, s.lsb);  // 3 x the left sign class
    if constexpr (HA) {
      const __mmask32 mu = _cvtu32_mask32(c.kmask[2 * j + 1]);
      const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lm + (uint64_t{t} - c.oa) * 32));
      a = _mm256_mask_adds_epu8(a, mu, a, _mm256_abs_epi8(u));
      // Sign class of u: sign(1, u) is 1, 0 or -1 (255), and min(., 2) maps
      // 255 to 2.
      const __m256i q = _mm256_min_epu8(_mm256_sign_epi8(_mm256_set1_epi8(1), u), _mm256_set1_epi8(2));
      ctx = _mm256_mask_add_epi8(ctx, mu, ctx, q);
    }
    return _mm256_add_epi8(ctx, int_act_class8<AM>(c, a));
  } else {
    __m256i ctx = _mm256_setzero_si256();
    if constexpr (AM != 0) {
      __m256i a = _mm256_adds_epu8(_mm256_adds_epu8(s.a1b, s.a1b), s.a2b);
      if constexpr (HT) {
        const __m256i at = abs_codes8(lm + (uint64_t{t} - c.W) * 32);
        a = _mm256_adds_epu8(a, at);
        if constexpr (!HL) a = _mm256_adds_epu8(a, _mm256_adds_epu8(at, at));
      }
      if constexpr (HA) a = _mm256_adds_epu8(a, abs_codes8(lm + (uint64_t{t} - c.oa) * 32));
      ctx = int_act_class8<AM>(c, a);
    }
    return _mm256_add_epi8(ctx, s.lsb);
  }
}

// slot_index of 32 contexts held as bytes.
WC_AVX512 WC_INLINE void slot_index8(__m256i ctx8, __m512i X0, __m512i X1, __m512i* i0, __m512i* i1) {
  const __m512i m = _mm512_set1_epi32(4095);
  // Bytes 0..15 and 16..31 zero-extended to dwords, one zero-masked byte
  // permute each.
  alignas(64) static constexpr uint8_t kLo[64] = {0,  0, 0, 0, 1,  0, 0, 0, 2,  0, 0, 0, 3,  0, 0, 0,
                                                  4,  0, 0, 0, 5,  0, 0, 0, 6,  0, 0, 0, 7,  0, 0, 0,
                                                  8,  0, 0, 0, 9,  0, 0, 0, 10, 0, 0, 0, 11, 0, 0, 0,
                                                  12, 0, 0, 0, 13, 0, 0, 0, 14, 0, 0, 0, 15, 0, 0, 0};
  alignas(64) static constexpr uint8_t kHi[64] = {16, 0, 0, 0, 17, 0, 0, 0, 18, 0, 0, 0, 19, 0, 0, 0,
                                                  20, 0, 0, 0, 21, 0, 0, 0, 22, 0, 0, 0, 23, 0, 0, 0,
                                                  24, 0, 0, 0, 25, 0, 0, 0, 26, 0, 0, 0, 27, 0, 0, 0,
                                                  28, 0, 0, 0, 29, 0, 0, 0, 30, 0, 0, 0, 31, 0, 0, 0};
  const __m512i c = _mm512_castsi256_si512(ctx8);
  const __m512i c0 = _mm512_maskz_permutexvar_epi8(0x1111111111111111ull, _mm512_load_si512(kLo), c);
  const __m512i c1 = _mm512_maskz_permutexvar_epi8(0x1111111111111111ull, _mm512_load_si512(kHi), c);
  *i0 = _mm512_ternarylogic_epi32(_mm512_slli_epi32(c0, 12), X0, m, 0xF8);
  *i1 = _mm512_ternarylogic_epi32(_mm512_slli_epi32(c1, 12), X1, m, 0xF8);
}

// The values of one step in the byte form (int_step_values). f: the sign
// class weight of the contexts (1; kernel contexts 3).
WC_AVX512 WC_INLINE bool int_step_values8(const IntParams& p, const IntFastConsts& c, IntFastState& s, __m512i e0,
                                          __m512i e1, uint32_t t, WordCursor& wc, uint8_t* lm, int f) {
  alignas(64) static constexpr uint8_t kIdx[64] = {0,  4,  8,  12, 16, 20, 24, 28, 32, 36, 40, 44, 48,
                                                   52, 56, 60, 64, 68, 72, 76, 80, 84, 88, 92, 96, 100,
                                                   104, 108, 112, 116, 120, 124};
  const __m256i tok = _mm512_castsi512_si256(_mm512_permutex2var_epi8(e0, _mm512_load_si512(kIdx), e1));
  // zz^-1(u) = (u >> 1) ^ -(u & 1) in bytes (no byte shift: a 16-bit one
  // and the bit shifted in from the next byte masked off); sign class
  // min(u, 1) + (u & 1), weighted by f with a 16-entry shuffle.
  const __m256i odd = _mm256_and_si256(tok, _mm256_set1_epi8(1));
  __m256i V = _mm256_ternarylogic_epi32(_mm256_srli_epi16(tok, 1), _mm256_set1_epi8(0x7F),
                                        _mm256_sub_epi8(_mm256_setzero_si256(), odd), 0x6A);  // (a & b) ^ c
  __m256i LSn = _mm256_add_epi8(_mm256_min_epu8(tok, _mm256_set1_epi8(1)), odd);
  if (f == 3) LSn = _mm256_shuffle_epi8(_mm256_setr_epi8(0, 3, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 6, 0, 0, 0,
                                                         0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
                                        LSn);
  const __mmask32 escm = _mm256_cmpge_epu8_mask(tok, c.esc8);
  if (__builtin_expect(escm != 0, 0)) {
    // Escapes: resolved in the 16-bit form, then back to bytes.
    const __m512i tok16 = _mm512_cvtepu8_epi16(tok);
    __m512i V16 = _mm512_cvtepi8_epi16(V), A16 = _mm512_abs_epi16(V16), L16 = _mm512_setzero_si512();
    if (!int_vector_escapes<false>(c, escm, tok16, s, wc, &V16, &A16, &L16)) {
      __m512i x0 = s.X0, x1 = s.X1;
      const WordCursor wcc = wc;
      uint32_t pos = 0;
      if (!int_fast_escapes<false>(p, escm, tok16, &x0, &x1, &V16, &A16, &L16, &wcc, &pos)) return false;
      s.X0 = x0;
      s.X1 = x1;
      wc.pos = pos;
    }
    // An escape's value outside int8 has marked the chunk bad; its byte
    // here is never served.
    V = _mm512_cvtepi16_epi8(V16);
    const __m256i q = _mm256_min_epu8(_mm256_sign_epi8(_mm256_set1_epi8(1), V), _mm256_set1_epi8(2));
    LSn = f == 3 ? _mm256_add_epi8(q, _mm256_add_epi8(q, q)) : q;
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lm + uint64_t{t} * 32), V);
  s.a2b = s.a1b;
  s.a1b = _mm256_abs_epi8(V);
  s.lsb = LSn;
  return true;
}

// The values of step t from the slot entries the step left in s.E0, s.E1.
template <bool U8, int AM, bool KERN>
WC_AVX512 WC_INLINE bool int_pending_values(const IntParams& p, const IntFastConsts& c, IntFastState& s, uint32_t t,
                                            WordCursor& wc, uint8_t* lm) {
  if constexpr (!U8 && AM <= 2) return int_step_values8(p, c, s, s.E0, s.E1, t, wc, lm, KERN ? 3 : 1);
  return int_step_values<U8>(p, c, s, s.E0, s.E1, t, wc, lm);
}

// One step of N chunks decoded together (N = 1..3; one model, one
// geometry): per chunk, the previous step's values and this step's tokens.
// KERN: kernel contexts (nbr_mode 3), whose phase advances each step; j:
// the step's column in its lane row.
template <int N, bool U8, int AM, bool KERN, bool VG, bool HT, bool HL, bool HA, bool PV>
WC_AVX512 WC_INLINE bool int_fast_step(const IntParams* const* p, const IntFastConsts* c, IntFastState* s, uint32_t t,
                                       uint32_t j, WordCursor* wc, uint8_t* const* lm) {
  for (int n = 0; n < N; ++n)
    if (__builtin_expect(wc[n].pos + kStepWords > wc[n].n, 0) && !words_tail(&wc[n])) return false;
  constexpr bool B = !U8 && AM <= 2;  // the byte form
#pragma GCC unroll 3
  for (int n = 0; n < N; ++n) {
    // The previous step's values (PV), then this step's context and tokens.
    if constexpr (PV) {
      if (!int_pending_values<U8, AM, KERN>(*p[n], c[n], s[n], t - 1, wc[n], lm[n])) return false;
    }
    __m512i i0, i1;
    if constexpr (!HL) {  // a row starts: no left neighbours
      s[n].A1 = s[n].A2 = s[n].LS = _mm512_setzero_si512();
      s[n].a1b = s[n].a2b = s[n].lsb = _mm256_setzero_si256();
    }
    if constexpr (B) {
      const __m256i ctx8 = int_step_ctx8<AM, KERN, HT, HL, HA>(c[n], s[n], t, j, lm[n]);
      if (c[n].scale) {
        const __m512i ctx = _mm512_add_epi16(_mm512_cvtepu8_epi16(ctx8), int_scale_term(c[n], s[n], j));
        slot_index(ctx, s[n].X0, s[n].X1, &i0, &i1);
      } else {
        slot_index8(ctx8, s[n].X0, s[n].X1, &i0, &i1);
      }
    } else {
      __m512i ctx;
      if constexpr (KERN) {
        ctx = int_step_ctx_kern<U8, AM, HL, HA>(c[n], s[n], t, j, lm[n]);
      } else {
        ctx = int_step_ctx<U8, AM, HT, HL, HA>(c[n], s[n], t, lm[n]);
      }
      if (c[n].scale) ctx = _mm512_add_epi16(ctx, int_scale_term(c[n], s[n], j));
      slot_index(ctx, s[n].X0, s[n].X1, &i0, &i1);
    }
    rans_all32<VG>(s[n].X0, s[n].X1, i0, i1, c[n].slots, wc[n], &s[n].E0, &s[n].E1);
  }
  return true;
}

template <int N, bool U8, int AM, bool KERN, bool VG, bool HT, bool FIRST>
WC_AVX512 WC_INLINE bool int_fast_row(const IntParams* const* p, const IntFastConsts* c, IntFastState* s, uint32_t r,
                                      WordCursor* wc, uint8_t* const* lm) {
  for (int n = 0; n < N; ++n) s[n].RP = c[n].rcl ? codes16(c[n].rcl + uint64_t{r} * 32) : _mm512_setzero_si512();
  const uint32_t W = c[0].W, oa = c[0].oa, t0 = r * W;
  if (!int_fast_step<N, U8, AM, KERN, VG, HT, false, false, !FIRST>(p, c, s, t0, 0, wc, lm)) return false;
  const uint32_t ja = oa ? (oa < W ? oa : W) : W;
  for (uint32_t j = 1; j < ja; ++j)
    if (!int_fast_step<N, U8, AM, KERN, VG, HT, true, false, true>(p, c, s, t0 + j, j, wc, lm)) return false;
  for (uint32_t j = ja; j < W; ++j)
    if (!int_fast_step<N, U8, AM, KERN, VG, HT, true, true, true>(p, c, s, t0 + j, j, wc, lm)) return false;
  return true;
}

// The codes of N same-rectangle chunks (parameters *p[n], constants c[n],
// streams rans[n], rans_len[n]) into lane-major lm[n]. 1: all decoded; 0
// otherwise. Software-pipelined: each chunk's step runs the previous step's
// values, then its own context and tokens, so that a chunk's gathers and
// the context work that feeds its next gathers lie close together in
// program order, with the other chunks' independent work between them.
template <int N, bool U8, int AM, bool KERN, bool VG>
WC_AVX512 int int_fast_lanes(const IntParams* const* p, const IntFastConsts* c, const uint8_t* const* rans,
                             const uint32_t* rans_len, const LaneGeom& g, uint8_t* const* lm) {
  WordCursor wc[N];
  alignas(64) uint8_t pad[N][kPadBytes];
  IntFastState s[N];
  for (int n = 0; n < N; ++n) {
    open_chunk_state(rans[n], rans_len[n], pad[n], &wc[n], &s[n]);
    s[n].bad = 0;
  }
  if (!g.rows || !c[0].W) return 0;
  if (!int_fast_row<N, U8, AM, KERN, VG, false, true>(p, c, s, 0, wc, lm)) return 0;
  for (uint32_t r = 1; r < g.rows; ++r)
    if (!int_fast_row<N, U8, AM, KERN, VG, !KERN, false>(p, c, s, r, wc, lm)) return 0;
  const uint32_t last = g.rows * c[0].W - 1;
  for (int n = 0; n < N; ++n) {
    if (__builtin_expect(wc[n].pos + kStepWords > wc[n].n, 0) && !words_tail(&wc[n])) return 0;
    if (!int_pending_values<U8, AM, KERN>(*p[n], c[n], s[n], last, wc[n], lm[n])) return 0;
  }
  const __m512i vL = _mm512_set1_epi32(static_cast<int32_t>(kRansL));
  for (int n = 0; n < N; ++n) {
    if (wc[n].pos != wc[n].n || s[n].bad) return 0;
    if (_mm512_cmpneq_epu32_mask(s[n].X0, vL) | _mm512_cmpneq_epu32_mask(s[n].X1, vL)) return 0;
  }
  return 1;
}

// Handles int8 / uint8 / 4-bit codes without tile map or zero points, activity
// contexts (nbr_mode 0) or kernel contexts (nbr_mode 3), same-size lanes;
// -1 otherwise. Scale classes (ns > 1) need the chunks' first rows (row0,
// else null) and the models' padded side information; lm[n] then holds
// the lanes' rc and cc values after its codes.
// N chunks of one geometry at once (models ms[n], streams rans[n],
// lane-major lm[n]); their models must share a loop (int_loop_compatible).
}  // namespace

namespace avx512 {

template <int N>
WC_AVX512 int decode_int_fast(const ModelView* ms, const uint8_t* const* rans, const uint32_t* rans_len,
                              const LaneGeom& g, const uint64_t* col0, const uint64_t* row0, uint8_t* const* lm) {
  const IntParams& p0 = ms[0].ip;
  if (!g.same_rect || (p0.nbr_mode != 0 && p0.nbr_mode != 3) || (p0.ns != 1 && !row0)) return -1;
  const bool kern = p0.nbr_mode == 3;
  // 4-bit codes without zero points decode as bytes of code - center (the
  // U8 form); decode_int_chunk_simd packs them.
  const bool u8 = p0.sub == kIntU8 || p0.sub == kIntNibble;
  const int am = int_act_mode(p0);
  IntFastConsts c[N];
  const IntParams* ps[N];
  for (int n = 0; n < N; ++n) {
    const ModelView& m = ms[n];
    const IntParams& p = m.ip;
    // Members share the loop: one model (one table), or models whose
    // parameters give the same loop.
    if (!m.slot_all || !m.luts || (n && m.slot_all != ms[0].slot_all && !int_loop_compatible(p0, p))) return -1;
    ps[n] = &p;
    c[n].slots = m.slot_all;
    c[n].W = static_cast<uint32_t>(g.w[0]);
    c[n].oa = p.off_a;
    c[n].center = _mm512_set1_epi16(static_cast<int16_t>(p.center));
    c[n].esc = _mm512_set1_epi16(static_cast<int16_t>(p.esc));
    c[n].esc8 = _mm256_set1_epi8(static_cast<char>(p.esc));  // 2..238 (parse_model)
    c[n].nthr = p.nb > 1 ? p.nb - 1u : 0u;
    const uint32_t f = kern ? 9 : 3;
    alignas(64) uint8_t lut[256];
    for (uint32_t a = 0; a < 256; ++a) lut[a] = static_cast<uint8_t>(f * m.luts->act[a]);
    for (int i = 0; i < 4; ++i) c[n].lut[i] = _mm512_load_si512(lut + 64 * i);
    for (uint32_t i = 0; i < 7; ++i)
      c[n].thr3[i] = _mm512_set1_epi16(static_cast<int16_t>(i < c[n].nthr ? p.thr[i] : 0));
    c[n].kmask = nullptr;
    if (kern) {
      // The masks of every column of the lane rows, after the codes and the
      // transposition's padding (lm holds 4 bytes per element; the codes
      // use 1, the masks 8 per column and the scale classes' side
      // information 32 per row and column).
      uint32_t* km = reinterpret_cast<uint32_t*>(lm[n] + (uint64_t{g.rows} * c[n].W + 16) * 32);
      uint32_t nbrs[64];
      for (uint32_t k = 0; k < p.period; ++k) nbrs[k] = int_kernel_nbrs(p, k);
      uint32_t kp[kLanes];
      for (uint32_t l = 0; l < kLanes; ++l) kp[l] = (col0[n] + static_cast<uint32_t>(g.c0[l])) % p.period;
      // The masks repeat with the period: one period is computed, the
      // rest copied.
      const uint32_t once = std::min<uint32_t>(c[n].W, p.period);
      for (uint32_t j = 0; j < once; ++j) {
        uint32_t ml = 0, mu = 0;
        for (uint32_t l = 0; l < kLanes; ++l) {
          ml |= (nbrs[kp[l]] & 1u) << l;
          mu |= (nbrs[kp[l]] >> 1 & 1u) << l;
          if (++kp[l] == p.period) kp[l] = 0;
        }
        km[2 * j] = ml;
        km[2 * j + 1] = mu;
      }
      for (uint32_t j = once; j < c[n].W; ++j) {
        km[2 * j] = km[2 * (j - p.period)];
        km[2 * j + 1] = km[2 * (j - p.period) + 1];
      }
      c[n].kmask = km;
    }
    c[n].scale = p.ns > 1;
    c[n].rcl = c[n].ccl = nullptr;
    if (c[n].scale) {
      if ((p.use_rc && !m.rc_pad) || (p.use_cc && !m.cc_pad)) return -1;
      alignas(64) uint8_t sl[64];
      for (int i = 0; i < 64; ++i) sl[i] = m.luts->scale[i];
      c[n].scale_lut = _mm512_load_si512(sl);
      c[n].sc_mul = _mm512_set1_epi16(static_cast<int16_t>(p.nb * f));
      // After the codes, the transposition's padding and the kernel masks.
      uint8_t* side = lm[n] + (uint64_t{g.rows} * c[n].W + 16) * 32 + (kern ? 8 * uint64_t{c[n].W} : 0);
      if (p.use_rc) {
        for (uint32_t r = 0; r < g.rows; ++r)
          for (uint32_t l = 0; l < kLanes; ++l)
            side[r * 32 + l] = m.rc_pad[row0[n] + static_cast<uint32_t>(g.r0[l]) + r];
        c[n].rcl = side;
        side += uint64_t{g.rows} * 32;
      }
      if (p.use_cc) {
        for (uint32_t j = 0; j < c[n].W; ++j)
          for (uint32_t l = 0; l < kLanes; ++l)
            side[j * 32 + l] = m.cc_pad[col0[n] + static_cast<uint32_t>(g.c0[l]) + j];
        c[n].ccl = side;
      }
    }
  }
  const bool vg = vector_gathers();
#define WC_INT_FAST(U, A)                                                                       \
  if (u8 == U && am == A) {                                                                     \
    if (vg)                                                                                     \
      return kern ? int_fast_lanes<N, U, A, true, true>(ps, c, rans, rans_len, g, lm)           \
                  : int_fast_lanes<N, U, A, false, true>(ps, c, rans, rans_len, g, lm);         \
    return kern ? int_fast_lanes<N, U, A, true, false>(ps, c, rans, rans_len, g, lm)            \
                : int_fast_lanes<N, U, A, false, false>(ps, c, rans, rans_len, g, lm);          \
  }
  WC_INT_FAST(false, 0) WC_INT_FAST(false, 1) WC_INT_FAST(false, 2) WC_INT_FAST(false, 3)
  WC_INT_FAST(true, 0) WC_INT_FAST(true, 1) WC_INT_FAST(true, 2) WC_INT_FAST(true, 3)
#undef WC_INT_FAST
  return -1;
}

template int decode_int_fast<2>(const ModelView*, const uint8_t* const*, const uint32_t*, const LaneGeom&,
                                const uint64_t*, const uint64_t*, uint8_t* const*);
template int decode_int_fast<3>(const ModelView*, const uint8_t* const*, const uint32_t*, const LaneGeom&,
                                const uint64_t*, const uint64_t*, uint8_t* const*);

// 4-bit codes decoded as bytes (the U8 form, lane-major in lm) to the
// chunk's packed bytes: raster order into the unused upper part of lm (the
// byte form uses a quarter of it), then pairs packed, element 2i in the
// low nibble. 0 when a code exceeds 15 (a damaged stream).
int pack_nibble_chunk(const ChunkView& cv, const LaneGeom& g, uint8_t* lm, uint8_t* out) {
  const size_t upper = (simd_lane_major_bytes(cv) / 4 + 63) & ~size_t{63};
  uint8_t* codes = lm + upper;
  if (g.same_rect) same_rect_to_raster<1>(lm, g, cv.w, codes);
  else lane_major_to_raster<1>(lm, g, cv.w, codes);
  const uint64_t nb = uint64_t{cv.h} * cv.w / 2;
  uint8_t high = 0;
  for (uint64_t i = 0; i < nb; ++i) {
    const uint8_t a = codes[2 * i], b = codes[2 * i + 1];
    high |= static_cast<uint8_t>((a | b) & 0xF0);
    out[i] = static_cast<uint8_t>(a | b << 4);
  }
  return high ? 0 : 1;
}
}  // namespace avx512


int decode_int_chunk_simd(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
                          uint32_t rans_len, uint8_t* out, int32_t* res, int32_t* tmp_tile, uint8_t* lm) {
  // Kernel-row chunks (format 2.10) on every path: chunk_decode_krow.h.
  if (m.kind == ModelKind::kInt && m.ip.nbr_mode == 4) return decode_krow_chunk(m, cv, rans, rans_len, out);
  // The scalar path: the portable fast decoder (chunk_decode_fast.h).
  if (cpu_path() == CpuPath::kScalar)
    return decode_int_chunk_fast(m, cv, tile_map, rans, rans_len, out, res, tmp_tile, lm);
  // The avx2 path: the Highway decoders, ternary chunks
  // (chunk_decode_hwy_tern.cpp) and 8-bit and 4-bit codes
  // (chunk_decode_hwy_int.cpp); what they decline takes the reference.
  // The avx512 path takes the Highway decoder (its AVX2 instance) for
  // models with 1/8-slot entries (ModelView::ent8): the hand-written
  // loops here read the 16 KiB slot tables.
  if ((cpu_path() == CpuPath::kAvx2 || m.ent8) && m.kind == ModelKind::kInt) {
    const int r = m.ip.sub == kIntTernary ? decode_tern_chunk_hwy(m, cv, tile_map, rans, rans_len, out, lm)
                                          : decode_int_chunk_hwy(m, cv, tile_map, rans, rans_len, out, lm);
    if (r >= 0) return r;
  }
  if (!simd_enabled() || m.kind != ModelKind::kInt || m.ip.nbr_mode > 3 || !(m.slot_all || m.sym_small) || !m.luts)
    return -1;
  if ((m.ip.use_rc && !m.rc_pad) || (m.ip.use_cc && !m.cc_pad)) return -1;
  if (uint64_t{cv.h} * cv.w >= (1ull << 31)) return -1;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;
  LaneGeom g;
  lane_geom(cv, &g);
  if (!tile_map && m.ip.sub == kIntTernary) {
    int r = decode_tern_fast(m, cv, rans, rans_len, g, lm, reinterpret_cast<uint8_t*>(res), out);
    // What the AVX-512 ternary loop declines (kernel contexts, lanes of
    // unequal rectangles, several activity classes) takes the Highway
    // ternary decoder before the general loops: 1.13x on
    // isnet-medium.rtn-ternary (docs/decoder-paths.md).
    if (r < 0) r = decode_tern_chunk_hwy(m, cv, tile_map, rans, rans_len, out, lm);
    if (r >= 0) return r;
  }
  // Column-phase contexts have only the ternary path above.
  if (m.ip.nbr_mode == 2) return -1;
  const uint64_t col0 = cv.col0, row0 = cv.row0;
  if (!tile_map && !m.zp && m.ip.sub == kIntNibble && (uint64_t{cv.h} * cv.w) % 2 == 0) {
    // 4-bit codes without zero points: the U8 loops write each code as a
    // byte, then pack_nibble_chunk.
    uint8_t* const lms[1] = {lm};
    const int r = decode_int_fast<1>(&m, &rans, &rans_len, g, &col0, &row0, lms);
    if (r == 0) return 0;
    if (r < 0 && !decode_int_lanes<IntForm::kU8>(m, cv, rans, rans_len, g, lm)) return 0;
    return pack_nibble_chunk(cv, g, lm, out);
  }
  const bool direct = !tile_map && !m.zp && (m.ip.sub == kIntI8 || m.ip.sub == kIntU8);
  if (direct) {
    uint8_t* const lms[1] = {lm};
    const int r = decode_int_fast<1>(&m, &rans, &rans_len, g, &col0, &row0, lms);
    if (r == 0) return 0;
    if (r == 1) {
      same_rect_to_raster<1>(lm, g, cv.w, out);
      return 1;
    }
  }
  if (direct && m.ip.sub == kIntI8) {
    if (!decode_int_lanes<IntForm::kI8>(m, cv, rans, rans_len, g, lm)) return 0;
    if (g.same_rect) same_rect_to_raster<1>(lm, g, cv.w, out);
    else lane_major_to_raster<1>(lm, g, cv.w, out);
    return 1;
  }
  if (direct) {
    if (!decode_int_lanes<IntForm::kU8>(m, cv, rans, rans_len, g, lm)) return 0;
    if (g.same_rect) same_rect_to_raster<1>(lm, g, cv.w, out);
    else lane_major_to_raster<1>(lm, g, cv.w, out);
    return 1;
  }
  if (!decode_int_lanes<IntForm::kRes32>(m, cv, rans, rans_len, g, lm)) return 0;
  if (g.same_rect) same_rect_to_raster<4>(lm, g, cv.w, reinterpret_cast<uint8_t*>(res));
  else lane_major_to_raster<4>(lm, g, cv.w, reinterpret_cast<uint8_t*>(res));
  return int_finish_chunk(m, cv, tile_map, out, res, tmp_tile) ? 1 : 0;
}

}  // namespace wcodec
