// codec/src/chunk_decode_simd.cpp — AVX-512 decoder of int chunks.
//
// Decodes the same stream as decode_int_residuals (chunk_decode.h), which
// stays the reference: 32 lanes as two 16-wide vectors processed in lane
// order, so renormalization words are consumed in exactly the scalar order
// (vpexpandd hands consecutive words to the lanes that need one). Escaped
// tokens (rare) take their extra-bit symbols through the scalar step.
// Thread-safety: pure function over its arguments.
#include <immintrin.h>

// GCC 12's AVX-512 headers build some results from _mm512_undefined_*(),
// which -Wmaybe-uninitialized reports at every inlined call site.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cstdlib>
#include <cstring>

#include "tensor_codec.h"

namespace wcodec {

namespace {

bool simd_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("WCODEC_NO_SIMD");
    if (e && *e && *e != '0') return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }();
  return on;
}

#define WC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,popcnt")))

WC_AVX512 inline __m512i gather_bytes(__mmask16 k, __m512i idx, const uint8_t* base) {
  const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, idx, base, 1);
  return _mm512_and_si512(v, _mm512_set1_epi32(0xFF));
}

// Shared rANS step for one 16-lane half: decodes a symbol from the packed
// slot table at row ctx, renormalizes from the word stream. Returns false
// when the stream is exhausted.
struct WordCursor {
  const uint8_t* words;
  uint32_t n, pos;
  alignas(64) uint16_t pad[16];
};

// Renormalization of the active lanes whose state fell below 2^16: they take
// the next words of the stream in lane order (vpexpandd), exactly the scalar
// order. False when the stream has too few words.
WC_AVX512 inline bool renorm16(__m512i& nx, __mmask16 act, WordCursor& wc) {
  const __mmask16 need = _mm512_mask_cmplt_epu32_mask(act, nx, _mm512_set1_epi32(static_cast<int32_t>(kRansL)));
  const uint32_t cnt = static_cast<uint32_t>(__builtin_popcount(need));
  if (!cnt) return true;
  if (wc.pos + cnt > wc.n) return false;
  __m256i w16;
  if (wc.pos + 16 <= wc.n) {
    w16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wc.words + 2 * wc.pos));
  } else {
    std::memset(wc.pad, 0, sizeof wc.pad);
    std::memcpy(wc.pad, wc.words + 2 * wc.pos, 2 * (wc.n - wc.pos));
    w16 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wc.pad));
  }
  const __m512i wv = _mm512_maskz_expand_epi32(need, _mm512_cvtepu16_epi32(w16));
  nx = _mm512_mask_or_epi32(nx, need, _mm512_slli_epi32(nx, 16), wv);
  wc.pos += cnt;
  return true;
}

WC_AVX512 inline bool rans_step16(__m512i& X, __mmask16 act, __m512i ctx, const uint32_t* slots, WordCursor& wc,
                                  __m512i* sym_out) {
  const __m512i vMask = _mm512_set1_epi32(4095);
  const __m512i e = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), act,
                                                _mm512_add_epi32(_mm512_slli_epi32(ctx, 12), _mm512_and_si512(X, vMask)),
                                                slots, 4);
  const __m512i freq = _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(e, 8), vMask), _mm512_set1_epi32(1));
  __m512i nx = _mm512_add_epi32(_mm512_mullo_epi32(freq, _mm512_srli_epi32(X, 12)), _mm512_srli_epi32(e, 20));
  nx = _mm512_mask_mov_epi32(X, act, nx);
  if (!renorm16(nx, act, wc)) return false;
  X = nx;
  *sym_out = _mm512_and_si512(e, _mm512_set1_epi32(0xFF));
  return true;
}

// The same step with the two-level small-alphabet tables.
WC_AVX512 inline bool rans_step16_small(__m512i& X, __mmask16 act, __m512i ctx, const uint8_t* sym_tab,
                                        const uint32_t* fs_tab, WordCursor& wc, __m512i* sym_out) {
  const __m512i vMask = _mm512_set1_epi32(4095);
  const __m512i slot = _mm512_and_si512(X, vMask);
  const __m512i sym = gather_bytes(act, _mm512_add_epi32(_mm512_slli_epi32(ctx, 12), slot), sym_tab);
  const __m512i fs = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), act,
                                                 _mm512_add_epi32(_mm512_slli_epi32(ctx, 5), sym), fs_tab, 4);
  __m512i nx = _mm512_add_epi32(
      _mm512_mullo_epi32(_mm512_and_si512(fs, _mm512_set1_epi32(0xFFFF)), _mm512_srli_epi32(X, 12)),
      _mm512_sub_epi32(slot, _mm512_srli_epi32(fs, 16)));
  nx = _mm512_mask_mov_epi32(X, act, nx);
  if (!renorm16(nx, act, wc)) return false;
  X = nx;
  *sym_out = sym;
  return true;
}

WC_AVX512 inline __m512i clamp16(__m512i v, int lo, int hi) {
  return _mm512_min_epi32(_mm512_max_epi32(v, _mm512_set1_epi32(lo)), _mm512_set1_epi32(hi));
}

// 0 for v == 0, 1 for v > 0, 2 for v < 0.
WC_AVX512 inline __m512i sign3(__m512i v) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i q = _mm512_maskz_mov_epi32(_mm512_cmpgt_epi32_mask(v, zero), _mm512_set1_epi32(1));
  return _mm512_mask_mov_epi32(q, _mm512_cmplt_epi32_mask(v, zero), _mm512_set1_epi32(2));
}

// The residual `off` columns back in each lane's row (0 where that is
// outside the lane's rectangle).
WC_AVX512 inline __m512i back_gather(__mmask16 act, __m512i c, __m512i c0, __m512i pos, uint32_t off,
                                     const int32_t* res) {
  const __m512i vO = _mm512_set1_epi32(static_cast<int32_t>(off));
  const __mmask16 has = _mm512_mask_cmpge_epi32_mask(act, _mm512_sub_epi32(c, c0), vO);
  return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), has, _mm512_sub_epi32(pos, vO), res, 4);
}

// Lane geometry of a chunk as vectors (two halves of 16 lanes) plus the
// initial rANS states and the word cursor. Returns the number of steps.
struct LaneVectors {
  __m512i X[2], R[2], C[2], R0[2], C0[2], CEND[2], N[2];
};

WC_AVX512 inline uint32_t init_lanes(const ChunkView& cv, const uint8_t* rans, uint32_t rans_len, LaneVectors* v,
                                     WordCursor* wc) {
  wc->words = rans + 4 * kLanes;
  wc->n = (rans_len - 4 * kLanes) / 2;
  wc->pos = 0;
  LaneCursor cur[kLanes];
  const uint32_t steps = init_cursors(cv.h, cv.w, cur);
  alignas(64) int32_t a_r0[kLanes], a_c0[kLanes], a_cend[kLanes], a_n[kLanes];
  for (uint32_t l = 0; l < kLanes; ++l) {
    a_r0[l] = static_cast<int32_t>(cur[l].rect.r0);
    a_c0[l] = static_cast<int32_t>(cur[l].rect.c0);
    a_cend[l] = static_cast<int32_t>(cur[l].rect.c0 + cur[l].rect.w);
    a_n[l] = static_cast<int32_t>(cur[l].n);
  }
  for (int k = 0; k < 2; ++k) {
    v->X[k] = _mm512_loadu_si512(rans + 64 * k);
    v->R[k] = v->R0[k] = _mm512_load_si512(a_r0 + 16 * k);
    v->C[k] = v->C0[k] = _mm512_load_si512(a_c0 + 16 * k);
    v->CEND[k] = _mm512_load_si512(a_cend + 16 * k);
    v->N[k] = _mm512_load_si512(a_n + 16 * k);
  }
  return steps;
}

WC_AVX512 int decode_avx512(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                            int32_t* res) {
  const IntParams& p = m.ip;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;
  const uint32_t w = cv.w;
  WordCursor wc;
  LaneVectors lv;
  const uint32_t steps = init_lanes(cv, rans, rans_len, &lv, &wc);
  __m512i(&X)[2] = lv.X;
  __m512i(&R)[2] = lv.R;
  __m512i(&C)[2] = lv.C;
  const __m512i(&R0)[2] = lv.R0;
  const __m512i(&C0)[2] = lv.C0;
  const __m512i(&CEND)[2] = lv.CEND;
  const __m512i(&N)[2] = lv.N;
  __m512i RP[2], H1[2], H2[2];
  for (int k = 0; k < 2; ++k) {
    alignas(64) int32_t a_rp[16];
    alignas(64) int32_t r0s[16], ns[16];
    _mm512_store_si512(r0s, R0[k]);
    _mm512_store_si512(ns, N[k]);
    for (int l = 0; l < 16; ++l) a_rp[l] = p.use_rc && ns[l] ? m.rc_pad[cv.row0 + static_cast<uint32_t>(r0s[l])] : 0;
    RP[k] = _mm512_load_si512(a_rp);
    H1[k] = H2[k] = _mm512_setzero_si512();
  }
  const __m512i vW = _mm512_set1_epi32(static_cast<int32_t>(w));
  const __m512i vL = _mm512_set1_epi32(static_cast<int32_t>(kRansL));
  const __m512i v1023 = _mm512_set1_epi32(1023);
  const __m512i vOne = _mm512_set1_epi32(1);
  const __m512i vNb = _mm512_set1_epi32(p.nb);
  const __m512i vEsc = _mm512_set1_epi32(p.esc);
  const __m512i vRow0 = _mm512_set1_epi32(static_cast<int32_t>(cv.row0));
  const __m512i zero = _mm512_setzero_si512();
  const uint8_t* act_lut = m.luts->act;
  const uint8_t* scale_lut = m.luts->scale;
  const uint8_t* ccol = p.use_cc ? m.cc_pad + cv.col0 : nullptr;
  const bool need_scale = p.ns > 1;
  const bool need_act = p.nb > 1;

  for (uint32_t t = 0; t < steps; ++t) {
    const __m512i vT = _mm512_set1_epi32(static_cast<int32_t>(t));
    __m512i V[2], POS[2], SYM[2];
    __mmask16 ACT[2], ESC[2];
    for (int k = 0; k < 2; ++k) {
      const __mmask16 act = _mm512_cmpgt_epi32_mask(N[k], vT);
      ACT[k] = act;
      const __mmask16 ht = _mm512_mask_cmpgt_epi32_mask(act, R[k], R0[k]);
      const __mmask16 hl = _mm512_mask_cmpgt_epi32_mask(act, C[k], C0[k]);
      const __m512i pos = _mm512_add_epi32(_mm512_mullo_epi32(R[k], vW), C[k]);
      POS[k] = pos;
      const __m512i top = _mm512_mask_i32gather_epi32(zero, ht, _mm512_sub_epi32(pos, vW), res, 4);
      __m512i sc = zero;
      if (need_scale) {
        __m512i idx = RP[k];
        if (ccol) idx = _mm512_add_epi32(idx, gather_bytes(act, C[k], ccol));
        sc = gather_bytes(act, idx, scale_lut);
      }
      __m512i ctx;
      if (p.nbr_mode == 1) {
        const __m512i three = _mm512_set1_epi32(3);
        __m512i kk = _mm512_add_epi32(_mm512_mullo_epi32(sign3(H1[k]), three), sign3(H2[k]));
        kk = _mm512_add_epi32(_mm512_mullo_epi32(kk, three), sign3(back_gather(act, C[k], C0[k], pos, p.off_a, res)));
        kk = _mm512_add_epi32(_mm512_mullo_epi32(kk, three), sign3(top));
        if (p.off_b) {
          kk = _mm512_add_epi32(_mm512_mullo_epi32(kk, three), sign3(back_gather(act, C[k], C0[k], pos, p.off_b, res)));
          ctx = _mm512_add_epi32(_mm512_mullo_epi32(sc, _mm512_set1_epi32(243)), kk);
        } else {
          ctx = _mm512_add_epi32(_mm512_mullo_epi32(sc, _mm512_set1_epi32(81)), kk);
        }
      } else {
        ctx = _mm512_mullo_epi32(sc, vNb);
        if (need_act) {
          const __m512i at = _mm512_abs_epi32(top);
          __m512i a = _mm512_add_epi32(_mm512_slli_epi32(_mm512_abs_epi32(H1[k]), 1),
                                       _mm512_add_epi32(at, _mm512_abs_epi32(H2[k])));
          if (p.off_a) a = _mm512_add_epi32(a, _mm512_abs_epi32(back_gather(act, C[k], C0[k], pos, p.off_a, res)));
          a = _mm512_mask_add_epi32(a, static_cast<__mmask16>(ht & ~hl), a, _mm512_slli_epi32(at, 1));
          a = _mm512_min_epu32(a, v1023);
          ctx = _mm512_add_epi32(ctx, gather_bytes(act, a, act_lut));
        }
        ctx = _mm512_add_epi32(_mm512_add_epi32(ctx, _mm512_slli_epi32(ctx, 1)), sign3(H1[k]));
      }
      // rANS step.
      __m512i sym;
      if (m.sym_small ? !rans_step16_small(X[k], act, ctx, m.sym_small, m.fs_small, wc, &sym)
                      : !rans_step16(X[k], act, ctx, m.slot_all, wc, &sym))
        return 0;
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
      WordSource ws{wc.n ? wc.words : zero_word, wc.n, wc.pos, 0};
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
    for (int k = 0; k < 2; ++k) {
      _mm512_mask_i32scatter_epi32(res, ACT[k], POS[k], V[k], 4);
      H2[k] = _mm512_mask_mov_epi32(H2[k], ACT[k], H1[k]);
      H1[k] = _mm512_mask_mov_epi32(H1[k], ACT[k], V[k]);
      // Advance the cursors of active lanes; wrap to the next row.
      C[k] = _mm512_mask_add_epi32(C[k], ACT[k], C[k], vOne);
      const __mmask16 wrap = _mm512_mask_cmpeq_epi32_mask(ACT[k], C[k], CEND[k]);
      if (wrap) {
        C[k] = _mm512_mask_mov_epi32(C[k], wrap, C0[k]);
        R[k] = _mm512_mask_add_epi32(R[k], wrap, R[k], vOne);
        H1[k] = _mm512_mask_mov_epi32(H1[k], wrap, zero);
        H2[k] = _mm512_mask_mov_epi32(H2[k], wrap, zero);
        if (p.use_rc) {
          // Lanes that finished their rectangle point one row past it: they
          // are inactive from now on, so clamp the row read to a valid one.
          const __mmask16 live = _mm512_mask_cmpgt_epi32_mask(wrap, N[k], _mm512_add_epi32(vT, vOne));
          RP[k] = _mm512_mask_mov_epi32(RP[k], live, gather_bytes(live, _mm512_add_epi32(R[k], vRow0), m.rc_pad));
        }
      }
    }
  }
  if (wc.pos != wc.n) return 0;
  const __mmask16 e0 = _mm512_cmpneq_epu32_mask(X[0], vL), e1 = _mm512_cmpneq_epu32_mask(X[1], vL);
  if (e0 | e1) return 0;
  return 1;
}


// Float chunk: exponent and sign/mantissa grids as int32 (e32, sm32).
WC_AVX512 int decode_float_avx512(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                                  int32_t* e32, int32_t* sm32) {
  const FloatParams& p = m.fp;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;
  const uint32_t w = cv.w;
  WordCursor wc;
  LaneVectors lv;
  const uint32_t steps = init_lanes(cv, rans, rans_len, &lv, &wc);
  __m512i(&X)[2] = lv.X;
  __m512i(&R)[2] = lv.R;
  __m512i(&C)[2] = lv.C;
  const __m512i(&R0)[2] = lv.R0;
  const __m512i(&C0)[2] = lv.C0;
  const __m512i(&CEND)[2] = lv.CEND;
  const __m512i(&N)[2] = lv.N;
  __m512i LE[2], LS[2];  // left exponent, left sign + 1 (0: none)
  for (int k = 0; k < 2; ++k) LE[k] = LS[k] = _mm512_setzero_si512();
  const __m512i vW = _mm512_set1_epi32(static_cast<int32_t>(w));
  const __m512i vOne = _mm512_set1_epi32(1);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i vElo = _mm512_set1_epi32(p.elo), vMlo = _mm512_set1_epi32(p.mlo);
  const __m512i vNe = _mm512_set1_epi32(p.ne);
  const int J = kJointClasses;
  for (uint32_t t = 0; t < steps; ++t) {
    const __m512i vT = _mm512_set1_epi32(static_cast<int32_t>(t));
    __m512i POS[2], E[2];
    __mmask16 ACT[2];
    for (int k = 0; k < 2; ++k) {  // exponents
      const __mmask16 act = _mm512_cmpgt_epi32_mask(N[k], vT);
      ACT[k] = act;
      const __mmask16 ht = _mm512_mask_cmpgt_epi32_mask(act, R[k], R0[k]);
      const __mmask16 hl = _mm512_mask_cmpgt_epi32_mask(act, C[k], C0[k]);
      const __m512i pos = _mm512_add_epi32(_mm512_mullo_epi32(R[k], vW), C[k]);
      POS[k] = pos;
      __m512i ctx = zero;
      if (p.emode != 0) {
        const __m512i tv = _mm512_mask_i32gather_epi32(zero, ht, _mm512_sub_epi32(pos, vW), e32, 4);
        const __m512i lv = LE[k];
        const __mmask16 both = hl & ht, only_l = hl & ~ht, only_t = ht & ~hl;
        if (p.emode == 4) {
          const __m512i ql = clamp16(_mm512_sub_epi32(lv, vElo), 0, J - 1);
          const __m512i qt = clamp16(_mm512_sub_epi32(tv, vElo), 0, J - 1);
          const __m512i jb = _mm512_add_epi32(_mm512_add_epi32(vOne, _mm512_mullo_epi32(ql, _mm512_set1_epi32(J))), qt);
          ctx = _mm512_mask_mov_epi32(ctx, both, jb);
          ctx = _mm512_mask_mov_epi32(ctx, only_l, _mm512_add_epi32(_mm512_set1_epi32(1 + J * J), ql));
          ctx = _mm512_mask_mov_epi32(ctx, only_t, _mm512_add_epi32(_mm512_set1_epi32(1 + J * J + J), qt));
        } else {
          __m512i pred;
          __m512i actc = zero;
          if (p.emode == 1) {
            pred = _mm512_mask_mov_epi32(tv, hl, lv);
          } else if (p.emode == 3) {
            pred = _mm512_mask_mov_epi32(lv, ht, tv);
          } else {
            pred = _mm512_mask_mov_epi32(tv, hl, lv);
            const __m512i avg = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(lv, tv), vOne), 1);
            pred = _mm512_mask_mov_epi32(pred, both, avg);
            const __mmask16 far = _mm512_mask_cmpgt_epi32_mask(
                both, _mm512_abs_epi32(_mm512_sub_epi32(lv, tv)), vOne);
            actc = _mm512_maskz_mov_epi32(far, vNe);
          }
          const __m512i q = _mm512_min_epi32(_mm512_max_epi32(_mm512_sub_epi32(pred, vElo), zero),
                                             _mm512_sub_epi32(vNe, vOne));
          ctx = _mm512_maskz_mov_epi32(static_cast<__mmask16>(hl | ht), _mm512_add_epi32(actc, q));
        }
      }
      __m512i sym;
      if (!rans_step16(X[k], act, ctx, m.slot_all, wc, &sym)) return 0;
      E[k] = sym;
      _mm512_mask_i32scatter_epi32(e32, act, pos, sym, 4);
    }
    for (int k = 0; k < 2; ++k) {  // sign + high mantissa
      const __mmask16 act = ACT[k];
      __m512i ctx = _mm512_min_epi32(_mm512_max_epi32(_mm512_sub_epi32(E[k], vMlo), zero),
                                     _mm512_set1_epi32(p.nm - 1));
      if (p.sign_ctx) ctx = _mm512_add_epi32(_mm512_mullo_epi32(ctx, _mm512_set1_epi32(3)), LS[k]);
      __m512i sym;
      if (!rans_step16(X[k], act, ctx, m.slot1_all, wc, &sym)) return 0;
      _mm512_mask_i32scatter_epi32(sm32, act, POS[k], sym, 4);
      LE[k] = _mm512_mask_mov_epi32(LE[k], act, E[k]);
      LS[k] = _mm512_mask_mov_epi32(LS[k], act, _mm512_add_epi32(vOne, _mm512_srli_epi32(sym, p.k)));
      C[k] = _mm512_mask_add_epi32(C[k], act, C[k], vOne);
      const __mmask16 wrap = _mm512_mask_cmpeq_epi32_mask(act, C[k], CEND[k]);
      if (wrap) {
        C[k] = _mm512_mask_mov_epi32(C[k], wrap, C0[k]);
        R[k] = _mm512_mask_add_epi32(R[k], wrap, R[k], vOne);
        LS[k] = _mm512_mask_mov_epi32(LS[k], wrap, zero);
      }
    }
  }
  if (wc.pos != wc.n) return 0;
  const __m512i vL = _mm512_set1_epi32(static_cast<int32_t>(kRansL));
  if (_mm512_cmpneq_epu32_mask(X[0], vL) | _mm512_cmpneq_epu32_mask(X[1], vL)) return 0;
  return 1;
}
WC_AVX512 void float_assemble_avx512(const FloatParams& p, uint64_t n, const uint8_t* raw, const int32_t* e32,
                                     const int32_t* sm32, uint8_t* out) {
  const uint32_t rawb = float_raw_bits(p);
  const uint32_t k = p.k;
  const __m512i vIdx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i vMh = _mm512_set1_epi32(static_cast<int32_t>((1u << k) - 1));
  const __m512i vRawMask = _mm512_set1_epi32(static_cast<int32_t>(rawb ? (1u << rawb) - 1 : 0));
  const __m512i vRawb = _mm512_set1_epi32(static_cast<int32_t>(rawb));
  uint64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i e = _mm512_loadu_si512(e32 + i);
    const __m512i sm = _mm512_loadu_si512(sm32 + i);
    const __m512i sign = _mm512_srli_epi32(sm, k);
    const __m512i mh = _mm512_and_si512(sm, vMh);
    __m512i v = _mm512_or_si512(_mm512_sll_epi32(sign, _mm_cvtsi32_si128(p.eb + p.mb)),
                                _mm512_sll_epi32(e, _mm_cvtsi32_si128(p.mb)));
    v = _mm512_or_si512(v, _mm512_sll_epi32(mh, _mm_cvtsi32_si128(static_cast<int>(rawb))));
    if (rawb) {
      // Raw fields of the 16 elements: a 64-bit base byte plus small
      // relative bit offsets (at most 7 + 15 * 24), one 32-bit gather.
      const uint64_t base_bit = i * rawb;
      const uint8_t* base = raw + (base_bit >> 3);
      const __m512i rel = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(base_bit & 7)),
                                           _mm512_mullo_epi32(vIdx, vRawb));
      const __m512i words = _mm512_i32gather_epi32(_mm512_srli_epi32(rel, 3), base, 1);
      const __m512i lo = _mm512_and_si512(_mm512_srlv_epi32(words, _mm512_and_si512(rel, _mm512_set1_epi32(7))),
                                          vRawMask);
      v = _mm512_or_si512(v, lo);
    }
    switch (p.elem_bytes) {
      case 1: _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtepi32_epi8(v)); break;
      case 2: _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i), _mm512_cvtepi32_epi16(v)); break;
      default: _mm512_storeu_si512(out + 4 * i, v); break;
    }
  }
  for (; i < n; ++i) {
    const uint32_t sm = static_cast<uint32_t>(sm32[i]);
    const uint32_t lo = rawb ? get_bits(raw, i * rawb, rawb) : 0u;
    const uint32_t v = ((sm >> k) << (p.eb + p.mb)) | (static_cast<uint32_t>(e32[i]) << p.mb) |
                       ((sm & ((1u << k) - 1)) << rawb) | lo;
    store_elem(out + i * p.elem_bytes, p.elem_bytes, v);
  }
}

}  // namespace

void float_assemble_simd(const FloatParams& p, uint64_t n, const uint8_t* raw, const int32_t* e32,
                         const int32_t* sm32, uint8_t* out) {
  float_assemble_avx512(p, n, raw, e32, sm32, out);
}

int decode_float_symbols_simd(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                              int32_t* e32, int32_t* sm32) {
  if (!simd_enabled() || m.kind != ModelKind::kFloat || !m.slot_all || !m.slot1_all) return -1;
  if (uint64_t{cv.h} * cv.w >= (1ull << 31)) return -1;
  return decode_float_avx512(m, cv, rans, rans_len, e32, sm32);
}

int decode_int_residuals_simd(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                              int32_t* res) {
  if (!simd_enabled() || m.kind != ModelKind::kInt || m.ip.nbr_mode > 1 || !(m.slot_all || m.sym_small) || !m.luts)
    return -1;
  if ((m.ip.use_rc && !m.rc_pad) || (m.ip.use_cc && !m.cc_pad)) return -1;
  if (uint64_t{cv.h} * cv.w >= (1ull << 31)) return -1;
  return decode_avx512(m, cv, rans, rans_len, res);
}

}  // namespace wcodec
