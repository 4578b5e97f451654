// codec/decompress/chunk_decode_simd_tern.cpp — the AVX-512 decoder of
// ternary chunks (2-bit codes, sign contexts). Layout and method:
// chunk_decode_simd.cpp.
// Thread-safety: pure functions over their arguments and the caller's
// scratch.
#include <immintrin.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "simd_avx512_i.h"
#include "simd_env.h"  // vector_gathers

namespace wcodec {
using namespace avx512;

namespace {

// ---- ternary (2-bit codes, sign contexts, tables of tokens 0..2)
// Every table codes only the tokens 0, 1, 2 (values 0, -1, +1), so a
// token is found by comparing the slot with the two bounds s1, s2 of its
// context (ModelView::tern3) instead of looking it up, and the lane-major
// buffer holds one code byte (0, +1 -> 1, -1 -> 2, which is also the sign
// digit q of the contexts) per element. Contexts: nbr_mode 1 (any scale
// classes, off_b), nbr_mode 2 (column phase: each lane keeps its phase
// col % period, reset at the start of its rows) and nbr_mode 0 with one
// activity class.
struct TernConsts {
  uint32_t W, oa, ob;
  bool mode1, mode2, scale, cc;
  uint32_t period;
  __m512i kp0;  // mode 2: 9 x each lane's phase at the start of its rows (16-bit)
  const uint32_t* tab;  // gather table (tern3)
  __m512i s1t[8], s2t[8];  // register tables (contexts < 128, or < 256 with 8)
  __m512i scale_lut;       // sv (0..63) -> scale class, bytes
  const uint8_t* ccl;      // lane-major column classes: [j * 32 + lane]
};

struct TernState {
  __m512i X0, X1;
  __m512i D1, D2;  // digits of the left and second-left codes (16-bit, 32 lanes)
  __m512i RP;      // row class part of the scale value (16-bit)
  __m512i KP;      // mode 2: 9 x column phase (16-bit)
};

// Slot bounds of 128 contexts held in four registers.
WC_AVX512 WC_INLINE __m512i perm128(const __m512i* t, __m512i ctx) {
  const __m512i lo = _mm512_permutex2var_epi16(t[0], ctx, t[1]);
  const __m512i hi = _mm512_permutex2var_epi16(t[2], ctx, t[3]);
  return _mm512_mask_mov_epi16(lo, _mm512_test_epi16_mask(ctx, _mm512_set1_epi16(64)), hi);
}
// 256 contexts in eight registers.
WC_AVX512 WC_INLINE __m512i perm256(const __m512i* t, __m512i ctx) {
  return _mm512_mask_mov_epi16(perm128(t, ctx), _mm512_test_epi16_mask(ctx, _mm512_set1_epi16(128)),
                               perm128(t + 4, ctx));
}

// rANS step of 16 lanes from their slot bounds (32-bit); returns the masks
// of slot >= s1 and slot >= s2.
WC_AVX512 WC_INLINE void tern_step16(__m512i& X, __m512i s1, __m512i s2, WordCursor& wc, __mmask16* g1,
                                     __mmask16* g2) {
  const __m512i slot = _mm512_and_si512(X, _mm512_set1_epi32(4095));
  const __mmask16 ge1 = _mm512_cmpge_epu32_mask(slot, s1);
  const __mmask16 ge2 = _mm512_cmpge_epu32_mask(slot, s2);
  // An unused table (s1 = s2 = 0x2000) decodes token 0 with frequency 0
  // and start 0, as the reference does with its all-zero table.
  __m512i f = _mm512_mask_sub_epi32(_mm512_and_si512(s1, _mm512_set1_epi32(0x1FFF)), ge1, s2, s1);
  f = _mm512_mask_sub_epi32(f, ge2, _mm512_set1_epi32(4096), s2);
  __m512i st = _mm512_maskz_mov_epi32(ge1, s1);
  st = _mm512_mask_mov_epi32(st, ge2, s2);
  __m512i nx = _mm512_add_epi32(_mm512_mullo_epi32(f, _mm512_srli_epi32(X, 12)), _mm512_sub_epi32(slot, st));
  renorm16(nx, 0xFFFF, wc);
  X = nx;
  *g1 = ge1;
  *g2 = ge2;
}

// PERM: 0 gathers from c.tab, 4 or 8: register tables of 128 or 256 contexts.
template <int PERM, bool HT, bool VG>
WC_AVX512 WC_INLINE bool tern_step(const TernConsts& c, TernState& s, uint32_t t, uint32_t j, WordCursor& wc,
                                   uint8_t* lm) {
  if (__builtin_expect(wc.pos + kStepWords > wc.n, 0) && !words_tail(&wc)) return false;
  __m512i sc = _mm512_setzero_si512();
  if (c.scale) {
    __m512i sv = s.RP;
    if (c.cc) sv = _mm512_add_epi16(sv, codes16(c.ccl + uint64_t{j} * 32));
    sc = _mm512_and_si512(_mm512_permutexvar_epi8(sv, c.scale_lut), _mm512_set1_epi16(0xFF));
  }
  __m512i ctx;
  if (c.mode1) {
    __m512i k = _mm512_add_epi16(_mm512_mullo_epi16(s.D1, _mm512_set1_epi16(27)),
                                 _mm512_mullo_epi16(s.D2, _mm512_set1_epi16(9)));
    if (c.oa && j >= c.oa) k = _mm512_add_epi16(k, _mm512_mullo_epi16(codes16(lm + (uint64_t{t} - c.oa) * 32), _mm512_set1_epi16(3)));
    if constexpr (HT) k = _mm512_add_epi16(k, codes16(lm + (uint64_t{t} - c.W) * 32));
    if (c.ob) {
      k = _mm512_add_epi16(k, _mm512_add_epi16(k, k));
      if (j >= c.ob) k = _mm512_add_epi16(k, codes16(lm + (uint64_t{t} - c.ob) * 32));
      ctx = _mm512_add_epi16(_mm512_mullo_epi16(sc, _mm512_set1_epi16(243)), k);
    } else {
      ctx = _mm512_add_epi16(_mm512_mullo_epi16(sc, _mm512_set1_epi16(81)), k);
    }
  } else if (c.mode2) {
    __m512i k = _mm512_add_epi16(s.D1, _mm512_add_epi16(s.D1, s.D1));
    if (j >= c.oa) k = _mm512_add_epi16(k, codes16(lm + (uint64_t{t} - c.oa) * 32));
    // s.KP holds 9 * phase.
    ctx = _mm512_add_epi16(s.KP, k);
    if (c.scale) ctx = _mm512_add_epi16(ctx, _mm512_mullo_epi16(sc, _mm512_set1_epi16(static_cast<int16_t>(9 * c.period))));
    const __m512i nk = _mm512_add_epi16(s.KP, _mm512_set1_epi16(9));
    s.KP = _mm512_mask_mov_epi16(
        nk, _mm512_cmpeq_epi16_mask(nk, _mm512_set1_epi16(static_cast<int16_t>(9 * c.period))), _mm512_setzero_si512());
  } else {
    ctx = _mm512_add_epi16(_mm512_add_epi16(sc, _mm512_add_epi16(sc, sc)), s.D1);
  }
  __m512i a0, a1, b0, b1;
  if constexpr (PERM != 0) {
    const __m512i S1 = PERM == 4 ? perm128(c.s1t, ctx) : perm256(c.s1t, ctx);
    const __m512i S2 = PERM == 4 ? perm128(c.s2t, ctx) : perm256(c.s2t, ctx);
    a0 = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(S1));
    a1 = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(S1, 1));
    b0 = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(S2));
    b1 = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(S2, 1));
  } else {
    const __m512i i0 = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(ctx));
    const __m512i i1 = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(ctx, 1));
    const __m512i e0 = gather16_form<VG>(i0, c.tab);
    const __m512i e1 = gather16_form<VG>(i1, c.tab);
    const __m512i m16 = _mm512_set1_epi32(0xFFFF);
    a0 = _mm512_and_si512(e0, m16);
    a1 = _mm512_and_si512(e1, m16);
    b0 = _mm512_srli_epi32(e0, 16);
    b1 = _mm512_srli_epi32(e1, 16);
  }
  __mmask16 g10, g20, g11, g21;
  tern_step16(s.X0, a0, b0, wc, &g10, &g20);
  tern_step16(s.X1, a1, b1, wc, &g11, &g21);
  const __mmask32 ge1 = static_cast<__mmask32>(g10) | (static_cast<__mmask32>(g11) << 16);
  const __mmask32 ge2 = static_cast<__mmask32>(g20) | (static_cast<__mmask32>(g21) << 16);
  // token 0 -> code 0, token 1 (-1) -> code 2, token 2 (+1) -> code 1
  const __m512i code =
      _mm512_sub_epi16(_mm512_maskz_mov_epi16(ge1, _mm512_set1_epi16(2)), _mm512_maskz_mov_epi16(ge2, _mm512_set1_epi16(1)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lm + uint64_t{t} * 32), _mm512_cvtepi16_epi8(code));
  s.D2 = s.D1;
  s.D1 = code;
  return true;
}

template <int PERM, bool VG>
WC_AVX512 int tern_lanes(const ModelView& m, const ChunkView& cv, const TernConsts& c, const uint8_t* rans,
                         uint32_t rans_len, const LaneGeom& g, uint8_t* lm) {
  WordCursor wc;
  alignas(64) uint8_t pad[kPadBytes];
  words_open(&wc, rans, rans_len, pad);
  TernState s;
  s.X0 = _mm512_loadu_si512(rans);
  s.X1 = _mm512_loadu_si512(rans + 64);
  s.RP = _mm512_setzero_si512();
  const bool use_rc = c.scale && m.ip.use_rc;
  for (uint32_t r = 0; r < g.rows; ++r) {
    if (use_rc) {
      alignas(64) uint16_t rp[kLanes];
      for (uint32_t l = 0; l < kLanes; ++l) rp[l] = m.rc_pad[cv.row0 + static_cast<uint32_t>(g.r0[l]) + r];
      s.RP = _mm512_load_si512(rp);
    }
    s.D1 = s.D2 = _mm512_setzero_si512();
    s.KP = c.kp0;
    const uint32_t t0 = r * c.W;
    if (r) {
      for (uint32_t j = 0; j < c.W; ++j)
        if (!tern_step<PERM, true, VG>(c, s, t0 + j, j, wc, lm)) return 0;
    } else {
      for (uint32_t j = 0; j < c.W; ++j)
        if (!tern_step<PERM, false, VG>(c, s, t0 + j, j, wc, lm)) return 0;
    }
  }
  if (wc.pos != wc.n) return 0;
  const __m512i vL = _mm512_set1_epi32(static_cast<int32_t>(kRansL));
  if (_mm512_cmpneq_epu32_mask(s.X0, vL) | _mm512_cmpneq_epu32_mask(s.X1, vL)) return 0;
  return 1;
}

// Packs raster code bytes (0..3) four to a byte, LSB first.
WC_AVX512 void pack_codes2(const uint8_t* codes, uint64_t nbytes, uint8_t* out) {
  const __m512i w14 = _mm512_set1_epi16(0x0401);
  const __m512i w116 = _mm512_set1_epi32(0x00100001);
  uint64_t i = 0;
  for (; i < nbytes; i += 16) {
    const uint64_t n = nbytes - i < 16 ? nbytes - i : 16;
    const __mmask64 lm = n == 16 ? ~0ull : (1ull << (4 * n)) - 1;
    const __m512i v = _mm512_maskz_loadu_epi8(lm, codes + 4 * i);
    const __m512i p = _mm512_madd_epi16(_mm512_maddubs_epi16(v, w14), w116);
    _mm_mask_storeu_epi8(out + i, static_cast<__mmask16>(n == 16 ? 0xFFFF : (1u << n) - 1), _mm512_cvtepi32_epi8(p));
  }
}

// Ternary chunks without tile map on same-size lanes; -1 when not handled.
}  // namespace

namespace avx512 {

WC_AVX512 int decode_tern_fast(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                               const LaneGeom& g, uint8_t* lm, uint8_t* codes, uint8_t* out) {
  const IntParams& p = m.ip;
  if (!g.same_rect || !m.tern3 || p.sub != kIntTernary) return -1;
  if (!(p.nbr_mode == 1 || p.nbr_mode == 2 || (p.nbr_mode == 0 && p.nb == 1))) return -1;
  TernConsts c;
  c.W = static_cast<uint32_t>(g.w[0]);
  c.mode1 = p.nbr_mode == 1;
  c.mode2 = p.nbr_mode == 2;
  c.oa = c.mode1 || c.mode2 ? p.off_a : 0;
  c.ob = c.mode1 ? p.off_b : 0;
  c.period = c.mode2 ? p.period : 1;
  {
    alignas(64) uint16_t kp[kLanes];
    for (uint32_t l = 0; l < kLanes; ++l)
      kp[l] = c.mode2 ? static_cast<uint16_t>(9 * ((cv.col0 + static_cast<uint32_t>(g.c0[l])) % c.period)) : 0;
    c.kp0 = _mm512_load_si512(kp);
  }
  c.scale = p.ns > 1;
  c.cc = c.scale && p.use_cc;
  c.tab = m.tern3;
  alignas(64) uint8_t sl[64];
  for (int i = 0; i < 64; ++i) sl[i] = m.luts->scale[i];
  c.scale_lut = _mm512_load_si512(sl);
  const uint64_t steps = uint64_t{g.rows} * c.W;
  c.ccl = nullptr;
  if (c.cc) {
    uint8_t* ccl = lm + (steps + 16) * 32;  // lm holds 4 bytes per element; codes use 1
    for (uint32_t j = 0; j < c.W; ++j)
      for (uint32_t l = 0; l < kLanes; ++l) ccl[j * 32 + l] = m.cc_pad[cv.col0 + static_cast<uint32_t>(g.c0[l]) + j];
    c.ccl = ccl;
  }
  const uint32_t nctx = int_nctx(p);
  int r;
  if (nctx <= 256) {
    alignas(64) uint16_t t1[256] = {}, t2[256] = {};
    for (uint32_t i = 0; i < nctx; ++i) {
      t1[i] = static_cast<uint16_t>(m.tern3[i]);
      t2[i] = static_cast<uint16_t>(m.tern3[i] >> 16);
    }
    for (int i = 0; i < 8; ++i) {
      c.s1t[i] = _mm512_load_si512(t1 + 32 * i);
      c.s2t[i] = _mm512_load_si512(t2 + 32 * i);
    }
    r = nctx <= 128 ? tern_lanes<4, false>(m, cv, c, rans, rans_len, g, lm)
                    : tern_lanes<8, false>(m, cv, c, rans, rans_len, g, lm);
  } else {
    r = vector_gathers() ? tern_lanes<0, true>(m, cv, c, rans, rans_len, g, lm)
                         : tern_lanes<0, false>(m, cv, c, rans, rans_len, g, lm);
  }
  if (r != 1) return r;
  same_rect_to_raster<1>(lm, g, cv.w, codes);
  pack_codes2(codes, uint64_t{cv.h} * cv.w / 4, out);
  return 1;
}
}  // namespace avx512
}  // namespace wcodec
