// codec/compress/int_rows.cpp — see int_rows.h.
#include "int_rows.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define WCODEC_INT_ROWS_AVX2 1  // the AVX2 row loops (x86-64 only)
#endif

#include <algorithm>
#include <type_traits>
#include <vector>

#include "simd_env.h"

namespace wcodec {

namespace {

// Branch-free (signs of weights are unpredictable).
inline uint32_t q(int32_t v) { return static_cast<uint32_t>(v > 0) | static_cast<uint32_t>(v < 0) << 1; }

#ifdef WCODEC_INT_ROWS_AVX2
bool avx2_enabled() {
  static const bool on = [] {
    if (simd_disabled_by_env()) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return on;
}

#define WC_AVX2 __attribute__((target("avx2")))

// Sign classes of eight residuals: 1 positive, 2 negative, 0 zero.
WC_AVX2 inline __m256i q8(__m256i v) {
  const __m256i z = _mm256_setzero_si256();
  return _mm256_or_si256(_mm256_and_si256(_mm256_cmpgt_epi32(v, z), _mm256_set1_epi32(1)),
                         _mm256_and_si256(_mm256_cmpgt_epi32(z, v), _mm256_set1_epi32(2)));
}
WC_AVX2 inline __m256i times3(__m256i v) { return _mm256_add_epi32(v, _mm256_add_epi32(v, v)); }
WC_AVX2 inline __m256i load8(const int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// The class tables of IntLuts (build_int_luts) as comparisons: entry a is
// the number of thresholds <= a. (Gathers from the tables were over half of
// this loop's time where gathers are slow.)
struct Classes8 {
  __m256i thr_less1[16];  // threshold - 1, as int32: a >= thr is a > thr - 1
  uint32_t n = 0;
  WC_AVX2 void init(const uint16_t* thr, uint32_t count) {
    n = count;
    for (uint32_t i = 0; i < n; ++i) thr_less1[i] = _mm256_set1_epi32(static_cast<int>(thr[i]) - 1);
  }
  WC_AVX2 void init(const uint8_t* thr, uint32_t count) {
    n = count;
    for (uint32_t i = 0; i < n; ++i) thr_less1[i] = _mm256_set1_epi32(static_cast<int>(thr[i]) - 1);
  }
  // a: values in [0, 2^31) (the table's index range, clamped by the caller).
  WC_AVX2 __m256i of(__m256i a) const {
    __m256i k = _mm256_setzero_si256();
    for (uint32_t i = 0; i < n; ++i) k = _mm256_sub_epi32(k, _mm256_cmpgt_epi32(a, thr_less1[i]));
    return k;
  }
};

WC_AVX2 void row_contexts_avx2(const IntRowArgs& a, uint32_t c, uint32_t c_end, uint32_t* out) {
  const IntParams& p = *a.p;
  const IntLuts& L = *a.L;
  const int32_t* row = a.row;
  const uint32_t oa = p.off_a, ob = p.nbr_mode == 1 ? p.off_b : 0u;
  const uint32_t sc_row = L.scale[a.rowpart];
  const __m256i rowpart = _mm256_set1_epi32(static_cast<int>(a.rowpart));
  const __m256i sc_const = _mm256_set1_epi32(static_cast<int>(sc_row));
  const __m256i zero = _mm256_setzero_si256();
  const __m256i one = _mm256_set1_epi32(1), two = _mm256_set1_epi32(2);
  // nbr_mode 3: each column's kernel neighbours (int_kernel_nbrs of its
  // phase), looked up before the loop (a gather was its slowest step).
  uint32_t nbrs[64] = {};
  thread_local std::vector<int32_t> kflags;
  if (p.nbr_mode == 3) {
    for (uint32_t k = 0; k < p.period && k < 64; ++k) nbrs[k] = int_kernel_nbrs(p, k);
    if (kflags.size() < c_end) kflags.resize(c_end);
    for (uint32_t k = c; k < c_end; ++k)
      kflags[k] = static_cast<int32_t>(a.kp[k] < 64 ? nbrs[a.kp[k]] : int_kernel_nbrs(p, a.kp[k]));
  }
  // Activity classes (L.act, indices clamped to 1023) and scale classes
  // (L.scale) by comparisons.
  Classes8 act_cls, scale_cls;
  act_cls.init(p.thr, p.nb > 1 ? std::min<uint32_t>(p.nb - 1u, 7u) : 0u);
  scale_cls.init(p.sthr, p.ns > 1 ? std::min<uint32_t>(p.ns - 1u, 15u) : 0u);
  const uint32_t c0 = c;
  for (; c + 8 <= c_end; c += 8) {
    const __m256i l1 = load8(row + c - 1);
    const __m256i la = oa ? load8(row + c - oa) : zero;
    const __m256i sc =
        a.ccs ? scale_cls.of(_mm256_add_epi32(rowpart, _mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                  reinterpret_cast<const __m128i*>(a.ccs + c)))))
              : sc_const;
    __m256i ctx;
    if (p.nbr_mode == 0) {
      const __m256i l2 = load8(row + c - 2);
      __m256i act = _mm256_add_epi32(_mm256_slli_epi32(_mm256_abs_epi32(l1), 1), _mm256_abs_epi32(l2));
      if (a.up) act = _mm256_add_epi32(act, _mm256_abs_epi32(load8(a.up + c)));
      act = _mm256_add_epi32(act, _mm256_abs_epi32(la));
      act = _mm256_min_epu32(act, _mm256_set1_epi32(1023));
      const __m256i cls = _mm256_add_epi32(_mm256_mullo_epi32(sc, _mm256_set1_epi32(p.nb)), act_cls.of(act));
      ctx = _mm256_add_epi32(times3(cls), q8(l1));
    } else if (p.nbr_mode == 1) {
      __m256i k = _mm256_add_epi32(times3(q8(l1)), q8(load8(row + c - 2)));
      k = _mm256_add_epi32(times3(k), oa ? q8(la) : zero);
      k = _mm256_add_epi32(times3(k), a.up ? q8(load8(a.up + c)) : zero);
      if (ob) {
        ctx = _mm256_add_epi32(_mm256_mullo_epi32(sc, _mm256_set1_epi32(243)),
                               _mm256_add_epi32(times3(k), q8(load8(row + c - ob))));
      } else {
        ctx = _mm256_add_epi32(_mm256_mullo_epi32(sc, _mm256_set1_epi32(81)), k);
      }
    } else if (p.nbr_mode == 3) {
      // Kernel neighbours: bit 0 / 1 of the phase's entry in nbrs.
      const __m256i f = load8(kflags.data() + c);
      const __m256i lk = _mm256_and_si256(l1, _mm256_cmpeq_epi32(_mm256_and_si256(f, one), one));
      const __m256i uk = _mm256_and_si256(la, _mm256_cmpeq_epi32(_mm256_and_si256(f, two), two));
      const __m256i act =
          _mm256_min_epu32(_mm256_add_epi32(_mm256_abs_epi32(lk), _mm256_abs_epi32(uk)), _mm256_set1_epi32(1023));
      const __m256i cls = _mm256_add_epi32(_mm256_mullo_epi32(sc, _mm256_set1_epi32(p.nb)), act_cls.of(act));
      ctx = _mm256_add_epi32(times3(_mm256_add_epi32(times3(cls), q8(lk))), q8(uk));
    } else {
      const __m256i ph = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.kp + c));
      const __m256i base = _mm256_add_epi32(_mm256_mullo_epi32(sc, _mm256_set1_epi32(p.period)), ph);
      ctx = _mm256_add_epi32(_mm256_mullo_epi32(base, _mm256_set1_epi32(9)),
                             _mm256_add_epi32(times3(q8(l1)), oa ? q8(la) : zero));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (c - c0)), ctx);
  }
  if (c < c_end) int_row_contexts_scalar(a, c, c_end, out + (c - c0));
}
#endif

bool row_keys_scalar(const uint32_t* ctx, const int32_t* v, uint32_t n, uint32_t esc, uint32_t nsym, uint16_t* keys) {
  bool escapes = false;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t tok = int_token(v[i], esc);
    escapes |= tok >= esc;
    keys[i] = static_cast<uint16_t>(ctx[i] * nsym + tok);
  }
  return escapes;
}

#ifdef WCODEC_INT_ROWS_AVX2
WC_AVX2 bool row_keys_avx2(const uint32_t* ctx, const int32_t* v, uint32_t n, uint32_t esc, uint32_t nsym,
                           uint16_t* keys) {
  bool escapes = false;
  const __m256i vesc = _mm256_set1_epi32(static_cast<int>(esc - 1)), vnsym = _mm256_set1_epi32(static_cast<int>(nsym));
  uint32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = load8(v + i);
    const __m256i u = _mm256_xor_si256(_mm256_slli_epi32(x, 1), _mm256_srai_epi32(x, 31));
    // u > esc - 1 (unsigned: u fits 31 bits for the values the kinds hold,
    // and a wider one fails the signed test as well) takes the scalar path.
    if (!_mm256_testz_si256(_mm256_cmpgt_epi32(u, vesc), _mm256_cmpgt_epi32(u, vesc)) ||
        !_mm256_testz_si256(u, _mm256_set1_epi32(INT32_MIN))) {
      escapes |= row_keys_scalar(ctx + i, v + i, 8, esc, nsym, keys + i);
      continue;
    }
    const __m256i k = _mm256_add_epi32(
        _mm256_mullo_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ctx + i)), vnsym), u);
    const __m128i k16 = _mm_packus_epi32(_mm256_castsi256_si128(k), _mm256_extracti128_si256(k, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(keys + i), k16);
  }
  return row_keys_scalar(ctx + i, v + i, n - i, esc, nsym, keys + i) || escapes;
}
#endif

uint64_t abs_sums_scalar(const int32_t* v, uint64_t n, uint32_t* col, uint32_t* max_abs) {
  uint64_t sum = 0;
  uint32_t mx = *max_abs;
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t a = iabs32(v[i]);
    sum += a;
    col[i] += a;
    mx = a > mx ? a : mx;
  }
  *max_abs = mx;
  return sum;
}

#ifdef WCODEC_INT_ROWS_AVX2
WC_AVX2 uint64_t abs_sums_avx2(const int32_t* v, uint64_t n, uint32_t* col, uint32_t* max_abs) {
  __m256i sum = _mm256_setzero_si256(), mx = _mm256_setzero_si256();
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i a = _mm256_abs_epi32(load8(v + i));
    __m256i* cp = reinterpret_cast<__m256i*>(col + i);
    _mm256_storeu_si256(cp, _mm256_add_epi32(_mm256_loadu_si256(cp), a));
    // 64-bit lanes of the sum: pairs of magnitudes (each below 2^31).
    sum = _mm256_add_epi64(sum, _mm256_add_epi64(_mm256_and_si256(a, _mm256_set1_epi64x(0xFFFFFFFF)),
                                                  _mm256_srli_epi64(a, 32)));
    mx = _mm256_max_epu32(mx, a);
  }
  alignas(32) uint64_t s4[4];
  alignas(32) uint32_t m8[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(s4), sum);
  _mm256_store_si256(reinterpret_cast<__m256i*>(m8), mx);
  uint32_t m = *max_abs;
  for (uint32_t k = 0; k < 8; ++k) m = m8[k] > m ? m8[k] : m;
  *max_abs = m;
  return s4[0] + s4[1] + s4[2] + s4[3] + abs_sums_scalar(v + i, n - i, col + i, max_abs);
}
#endif

}  // namespace

uint64_t int_abs_sums(const int32_t* v, uint64_t n, uint32_t* col, uint32_t* max_abs) {
#ifdef WCODEC_INT_ROWS_AVX2
  if (n >= 8 && avx2_enabled()) return abs_sums_avx2(v, n, col, max_abs);
#endif
  return abs_sums_scalar(v, n, col, max_abs);
}

bool int_row_keys(const uint32_t* ctx, const int32_t* v, uint32_t n, uint32_t esc, uint32_t nsym, uint16_t* keys) {
#ifdef WCODEC_INT_ROWS_AVX2
  if (n >= 8 && avx2_enabled()) return row_keys_avx2(ctx, v, n, esc, nsym, keys);
#endif
  return row_keys_scalar(ctx, v, n, esc, nsym, keys);
}

// One loop per mode, the neighbours a row lacks read as zeros by masks
// (branch-free bodies, vectorized by the compiler where they hold no table
// lookup).
void int_row_contexts_scalar(const IntRowArgs& a, uint32_t c_begin, uint32_t c_end, uint32_t* out) {
  const IntParams& p = *a.p;
  const IntLuts& L = *a.L;
  const int32_t* row = a.row;
  const uint32_t oa = p.off_a, ob = p.nbr_mode == 1 ? p.off_b : 0u;
  // The row above (the row itself, masked, where there is none) and the
  // off_a neighbour (likewise where off_a is 0).
  const int32_t* up = a.up ? a.up : row;
  const uint32_t um = a.up ? ~0u : 0u, am = oa ? ~0u : 0u;
  const int32_t* ra = row - oa;
  const uint32_t sc_row = L.scale[a.rowpart];
  auto sc_of = [&](uint32_t c) { return a.ccs ? L.scale[a.rowpart + a.ccs[c]] : sc_row; };
  auto qm = [](int32_t v, uint32_t m) { return q(v) & m; };
  if (p.nbr_mode == 0) {
    const uint32_t nb = p.nb;
    for (uint32_t c = c_begin; c < c_end; ++c) {
      const int32_t l1 = row[c - 1];
      const uint32_t act = 2 * iabs32(l1) + iabs32(row[c - 2]) + (iabs32(up[c]) & um) + (iabs32(ra[c]) & am);
      out[c - c_begin] = (sc_of(c) * nb + L.act[act > 1023 ? 1023 : act]) * 3u + q(l1);  // int_ctx_act
    }
  } else if (p.nbr_mode == 1) {
    auto loop = [&](auto has_ob, auto has_ccs) {
      for (uint32_t c = c_begin; c < c_end; ++c) {
        const uint32_t sc = has_ccs.value ? L.scale[a.rowpart + a.ccs[c]] : sc_row;
        const uint32_t k = ((q(row[c - 1]) * 3u + q(row[c - 2])) * 3u + qm(ra[c], am)) * 3u + qm(up[c], um);
        out[c - c_begin] = has_ob.value ? sc * 243u + k * 3u + q(row[c - ob]) : sc * 81u + k;
      }
    };
    using T = std::true_type;
    using F = std::false_type;
    if (ob) a.ccs ? loop(T{}, T{}) : loop(T{}, F{});
    else a.ccs ? loop(F{}, T{}) : loop(F{}, F{});
  } else if (p.nbr_mode == 3) {
    for (uint32_t c = c_begin; c < c_end; ++c) {
      const uint32_t k = int_kernel_nbrs(p, a.kp[c]);
      out[c - c_begin] = int_ctx_kernel(p, L, k & 1 ? row[c - 1] : 0, k & 2 ? ra[c] : 0, sc_of(c));
    }
  } else {
    const uint32_t period = p.period;
    for (uint32_t c = c_begin; c < c_end; ++c)
      out[c - c_begin] = (sc_of(c) * period + a.kp[c]) * 9u + q(row[c - 1]) * 3u + qm(ra[c], am);
  }
}

void int_row_contexts(const IntRowArgs& a, uint32_t c_begin, uint32_t c_end, uint32_t* out) {
#ifdef WCODEC_INT_ROWS_AVX2
  if (c_end - c_begin >= 8 && avx2_enabled()) {
    row_contexts_avx2(a, c_begin, c_end, out);
    return;
  }
#endif
  int_row_contexts_scalar(a, c_begin, c_end, out);
}

}  // namespace wcodec
