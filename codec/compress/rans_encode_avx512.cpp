// codec/compress/rans_encode_avx512.cpp — the rANS encoder's group pass
// with AVX-512 (16 lanes per vector). Compiled with target attributes like
// the vector decoders; runs only where simd_enabled().
// Thread-safety: pure function over its arguments.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "avx512_target.h"
#include "rans_encoder.h"
#include "simd_env.h"

namespace wcodec {

// ------------------------------------------------------------ rANS encoder
// RansEncoder's group pass (rans.cpp, encode_groups_scalar is the scalar
// form): per group, lanes 16..31 then 0..15, so that words land in lane
// order when each half's words are stored just below the previous ones.
// The quotient x / freq comes from a single-precision division and one
// correction step (divmod_u32_small).
namespace {
// Quotient and remainder of x / d for x < d << (32 - kMaxProbBits) (the
// renormalized state), so the quotient is below 2^20: the single-precision
// quotient is within 1/8 of x / d (both roundings are relative 2^-24), its
// truncation is off by at most one, and one correction step makes it exact.
WC_AVX512 WC_INLINE void divmod_u32_small(__m512i x, __m512i d, __m512i* q, __m512i* r) {
  __m512i qq = _mm512_cvttps_epu32(_mm512_div_ps(_mm512_cvtepu32_ps(x), _mm512_cvtepu32_ps(d)));
  __m512i rr = _mm512_sub_epi32(x, _mm512_mullo_epi32(qq, d));  // in [-d, 2d) as int32
  const __mmask16 low = _mm512_cmplt_epi32_mask(rr, _mm512_setzero_si512());
  qq = _mm512_mask_sub_epi32(qq, low, qq, _mm512_set1_epi32(1));
  rr = _mm512_mask_add_epi32(rr, low, rr, d);
  const __mmask16 high = _mm512_cmpge_epi32_mask(rr, d);
  *q = _mm512_mask_add_epi32(qq, high, qq, _mm512_set1_epi32(1));
  *r = _mm512_mask_sub_epi32(rr, high, rr, d);
}

WC_AVX512 void encode_groups16(const uint32_t* mask, const uint32_t* sf, size_t ngroups, uint32_t* xs,
                               uint16_t** pos) {
  __m512i X[2] = {_mm512_loadu_si512(xs), _mm512_loadu_si512(xs + 16)};
  const __m512i one = _mm512_set1_epi32(1), lo16 = _mm512_set1_epi32(0xFFFF);
  uint16_t* w = *pos;
  for (size_t g = ngroups; g-- > 0;) {
    const uint32_t m = mask[g];
    for (int h = 1; h >= 0; --h) {
      const __mmask16 act = static_cast<__mmask16>(m >> (16 * h));
      if (!act) continue;
      const __m512i e = _mm512_maskz_loadu_epi32(act, sf + g * kLanes + 16 * h);
      const __m512i freq = _mm512_mask_srli_epi32(one, act, e, 16);
      __m512i x = X[h];
      const __mmask16 need = _mm512_mask_cmpge_epu32_mask(act, _mm512_srli_epi32(x, 32 - kMaxProbBits), freq);
      if (need) {
        const int cnt = __builtin_popcount(need);
        w -= cnt;
        const __m256i words = _mm512_cvtepi32_epi16(_mm512_maskz_compress_epi32(need, x));
        _mm256_mask_storeu_epi16(w, static_cast<__mmask16>((1u << cnt) - 1), words);
        x = _mm512_mask_srli_epi32(x, need, x, 16);
      }
      __m512i q, r;
      divmod_u32_small(x, freq, &q, &r);
      const __m512i nx = _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(q, kMaxProbBits), r),
                                          _mm512_and_si512(e, lo16));
      X[h] = _mm512_mask_mov_epi32(x, act, nx);
    }
  }
  _mm512_storeu_si512(xs, X[0]);
  _mm512_storeu_si512(xs + 16, X[1]);
  *pos = w;
}
}  // namespace

bool rans_encode_groups_avx512(const uint32_t* mask, const uint32_t* sf, size_t ngroups, uint32_t* x,
                               uint16_t** pos) {
  if (!simd_enabled()) return false;
  encode_groups16(mask, sf, ngroups, x, pos);
  return true;
}

}  // namespace wcodec
