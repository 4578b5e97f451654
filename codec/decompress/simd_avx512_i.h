// codec/decompress/simd_avx512_i.h — the building blocks of the AVX-512
// chunk decoders (chunk_decode_simd*.cpp): lane geometry, the lane-major to
// raster transposition, word cursors and rANS steps over 16 lanes, and the
// same-size-lanes helpers; and the loops one decoder file runs for another.
// Everything here is inline or a template, so each decoder file compiles the
// steps into its own loops exactly as when they shared one unit.
//
// Thread-safety: pure functions over their arguments and the caller's
// scratch.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "avx512_target.h"
#include "chunk_decode_simd.h"
#include "tensor_decode.h"

namespace wcodec::avx512 {

// ------------------------------------------------------------ transposition
// A block of 16 steps x L lanes x E bytes is a 2^B-byte array with address
// a = s * L * E + l * E + e; the raster runs want b = l * 16 * E + s * E + e.
// Registers hold 64 bytes, so address bits 0..5 are positions in a register
// and bits 6.. the register number. Each vpermt2b stage exchanges one
// register bit with one position bit (an output register draws from exactly
// two input registers); the plan is computed at compile time.
struct TPlan {
  int nregs = 0, nstages = 0;
  std::array<std::array<std::array<uint8_t, 2>, 16>, 4> src{};       // [stage][reg] -> input regs
  std::array<std::array<std::array<uint8_t, 64>, 16>, 4> idx{};      // [stage][reg] -> vpermt2b index
};

constexpr TPlan make_plan(int eps, int lam) {
  const int B = eps + lam + 4;
  TPlan P;
  P.nregs = 1 << (B - 6);
  // Logical bit ids: e bits 0..eps-1, lane bits eps.., step bits eps+lam..
  // (the input layout is the identity). Layout arrays map physical -> logical.
  std::array<int, 12> cur{}, out{};
  for (int q = 0; q < B; ++q) cur[q] = q;
  for (int q = 0; q < eps; ++q) out[q] = q;
  for (int q = 0; q < 4; ++q) out[eps + q] = eps + lam + q;
  for (int q = 0; q < lam; ++q) out[eps + 4 + q] = eps + q;
  auto in_out_regs = [&](int logical) {
    for (int q = 6; q < B; ++q)
      if (out[q] == logical) return true;
    return false;
  };
  for (;;) {
    int i = -1, j = -1;
    for (int q = 6; q < B && i < 0; ++q)
      if (!in_out_regs(cur[q])) i = q;
    if (i < 0) break;
    for (int q = 0; q < 6 && j < 0; ++q)
      if (in_out_regs(cur[q])) j = q;
    std::array<int, 12> nxt = cur;
    nxt[i] = cur[j];
    nxt[j] = cur[i];
    bool last = true;
    for (int q = 6; q < B; ++q)
      if (!in_out_regs(nxt[q])) last = false;
    if (last) nxt = out;
    const int st = P.nstages++;
    for (int R = 0; R < P.nregs; ++R) {
      int s0 = -1, s1 = -1;
      for (int p = 0; p < 64; ++p) {
        const int a2 = R * 64 + p;
        int L = 0;
        for (int q = 0; q < B; ++q)
          if ((a2 >> q) & 1) L |= 1 << nxt[q];
        int a = 0;
        for (int q = 0; q < B; ++q)
          if ((L >> cur[q]) & 1) a |= 1 << q;
        const int r = a >> 6, pos = a & 63;
        int slot;
        if (s0 < 0 || s0 == r) {
          s0 = r;
          slot = 0;
        } else {
          if (s1 < 0) s1 = r;
          slot = 1;  // a third source cannot occur for a one-bit exchange
        }
        P.idx[st][R][p] = static_cast<uint8_t>(pos + 64 * slot);
      }
      P.src[st][R][0] = static_cast<uint8_t>(s0);
      P.src[st][R][1] = static_cast<uint8_t>(s1 < 0 ? s0 : s1);
    }
    cur = nxt;
  }
  return P;
}

// E = 1, 2: blocks of 32 lanes; E = 4: blocks of 16 lanes (one half).
template <int E>
struct PlanFor {
  static constexpr int kLanes = E == 4 ? 16 : 32;
  static constexpr TPlan plan = make_plan(E == 1 ? 0 : (E == 2 ? 1 : 2), E == 4 ? 4 : 5);
};

template <int E, int ST>
WC_AVX512 inline void run_stage(__m512i* v) {
  constexpr const TPlan& P = PlanFor<E>::plan;
  constexpr int NR = 8 * E / (E == 4 ? 2 : 1);
  static_assert(NR == P.nregs || ST >= P.nstages, "plan size");
  if constexpr (ST < P.nstages) {
    __m512i nv[NR];
#pragma GCC unroll 16
    for (int R = 0; R < NR; ++R) {
      const __m512i ix = _mm512_loadu_si512(P.idx[ST][R].data());
      nv[R] = _mm512_permutex2var_epi8(v[P.src[ST][R][0]], ix, v[P.src[ST][R][1]]);
    }
#pragma GCC unroll 16
    for (int R = 0; R < NR; ++R) v[R] = nv[R];
  }
}

// Per-lane geometry of a chunk.
struct LaneGeom {
  uint32_t steps;
  uint32_t wa;         // narrowest lane width among non-empty lanes
  uint32_t wide;       // lanes of width wa + 1 (bit l)
  bool uniform;        // all non-empty lanes have width wa
  bool same_rect;      // all 32 lanes have the same non-empty rectangle size
  uint32_t rows;       // rows per lane when same_rect
  alignas(64) int32_t r0[kLanes], c0[kLanes], w[kLanes], n[kLanes];
};

inline void lane_geom(const ChunkView& cv, LaneGeom* g) {
  LaneCursor cur[kLanes];
  g->steps = init_cursors(cv.h, cv.w, cur);
  uint32_t wa = ~0u;
  for (uint32_t l = 0; l < kLanes; ++l) {
    g->r0[l] = static_cast<int32_t>(cur[l].rect.r0);
    g->c0[l] = static_cast<int32_t>(cur[l].rect.c0);
    g->w[l] = static_cast<int32_t>(cur[l].rect.w);
    g->n[l] = static_cast<int32_t>(cur[l].n);
    if (cur[l].n && cur[l].rect.w < wa) wa = cur[l].rect.w;
  }
  if (wa == ~0u) wa = 1;
  g->wa = wa;
  g->wide = 0;
  for (uint32_t l = 0; l < kLanes; ++l)
    if (cur[l].n && cur[l].rect.w != wa) g->wide |= 1u << l;
  g->uniform = g->wide == 0;
  g->same_rect = true;
  for (uint32_t l = 0; l < kLanes; ++l)
    g->same_rect &= cur[l].n != 0 && cur[l].n == cur[0].n && cur[l].rect.w == cur[0].rect.w;
  g->rows = g->same_rect ? cur[0].rect.h : 0;
}

// Lane-major elements (E bytes, step t lane l at (t * 32 + l) * E) -> raster
// chunk order (element (r, c) at (r * w + c) * E). lm must be readable for
// 16 steps past g.steps.
template <int E>
WC_AVX512 void lane_major_to_raster(const uint8_t* lm, const LaneGeom& g, uint32_t w, uint8_t* out) {
  constexpr int LB = PlanFor<E>::kLanes;  // lanes per block
  constexpr int NR = E == 4 ? 16 : 8 * E;
  constexpr int LPR = 64 / (16 * E);      // lanes per output register
  static_assert(E == 1 || E == 2 || E == 4, "element sizes 1, 2, 4");
  uint32_t lr[kLanes] = {}, lc[kLanes] = {};  // lane-local row / column at step t0
  for (uint32_t t0 = 0; t0 < g.steps; t0 += 16) {
    for (int half = 0; half < kLanes / LB; ++half) {
      __m512i v[NR];
      if constexpr (E == 4) {
#pragma GCC unroll 16
        for (int s = 0; s < 16; ++s) v[s] = _mm512_loadu_si512(lm + (uint64_t{t0} + s) * 128 + 64 * half);
      } else {
#pragma GCC unroll 16
        for (int R = 0; R < NR; ++R) v[R] = _mm512_loadu_si512(lm + uint64_t{t0} * 32 * E + 64 * R);
      }
      run_stage<E, 0>(v);
      run_stage<E, 1>(v);
      run_stage<E, 2>(v);
      run_stage<E, 3>(v);
#pragma GCC unroll 32
      for (int li = 0; li < LB; ++li) {
        const int l = half * LB + li;
        const uint32_t nl = static_cast<uint32_t>(g.n[l]);
        if (nl <= t0) continue;
        const uint32_t W = static_cast<uint32_t>(g.w[l]);
        uint32_t rem = nl - t0 < 16 ? nl - t0 : 16;
        uint32_t r = lr[l], c = lc[l], j = 0;
        const __m512i y = v[li / LPR];
        const int q = li % LPR;
        // The lane's part of the register, stored at its own width (see
        // same_rect_to_raster).
        [[maybe_unused]] __m128i x1;
        [[maybe_unused]] __m256i x2;
        if constexpr (E == 1)
          x1 = q == 0 ? _mm512_castsi512_si128(y)
               : q == 1 ? _mm512_extracti32x4_epi32(y, 1)
               : q == 2 ? _mm512_extracti32x4_epi32(y, 2)
                        : _mm512_extracti32x4_epi32(y, 3);
        if constexpr (E == 2) x2 = q == 0 ? _mm512_castsi512_si256(y) : _mm512_extracti64x4_epi64(y, 1);
        while (rem) {
          const uint32_t len = W - c < rem ? W - c : rem;
          uint8_t* dst = out + ((uint64_t{static_cast<uint32_t>(g.r0[l]) + r} * w + static_cast<uint32_t>(g.c0[l]) + c) * E);
          const uint32_t nbits = len * E;
          const uint64_t m = (nbits >= 64 ? ~0ull : ((1ull << nbits) - 1)) << (j * E);
          if constexpr (E == 1) _mm_mask_storeu_epi8(dst - j * E, static_cast<__mmask16>(m), x1);
          else if constexpr (E == 2) _mm256_mask_storeu_epi8(dst - j * E, static_cast<__mmask32>(m), x2);
          else _mm512_mask_storeu_epi8(dst - j * E, m, y);
          j += len;
          rem -= len;
          c += len;
          if (c == W) {
            c = 0;
            ++r;
          }
        }
        lr[l] = r;
        lc[l] = c;
      }
    }
  }
}

// The same for lanes with the same rectangle (W x rows): blocks of up to 16
// steps never cross a lane row, so each lane's run is one store.
template <int E>
WC_AVX512 void same_rect_to_raster(const uint8_t* lm, const LaneGeom& g, uint32_t w, uint8_t* out) {
  constexpr int LB = PlanFor<E>::kLanes;
  constexpr int NR = E == 4 ? 16 : 8 * E;
  constexpr int LPR = 64 / (16 * E);
  const uint32_t W = static_cast<uint32_t>(g.w[0]);
  uint8_t* base[kLanes];
  for (uint32_t l = 0; l < kLanes; ++l)
    base[l] = out + (uint64_t{static_cast<uint32_t>(g.r0[l])} * w + static_cast<uint32_t>(g.c0[l])) * E;
  for (uint32_t r = 0; r < g.rows; ++r) {
    for (uint32_t j0 = 0; j0 < W; j0 += 16) {
      const uint32_t len = W - j0 < 16 ? W - j0 : 16;
      const uint64_t t0 = uint64_t{r} * W + j0;
      const uint64_t off = (uint64_t{r} * w + j0) * E;
      const uint64_t m0 = len * E >= 64 ? ~0ull : (1ull << (len * E)) - 1;
      for (int half = 0; half < kLanes / LB; ++half) {
        __m512i v[NR];
        if constexpr (E == 4) {
#pragma GCC unroll 16
          for (int s = 0; s < 16; ++s) v[s] = _mm512_loadu_si512(lm + (t0 + s) * 128 + 64 * half);
        } else {
#pragma GCC unroll 16
          for (int R = 0; R < NR; ++R) v[R] = _mm512_loadu_si512(lm + t0 * 32 * E + 64 * R);
        }
        run_stage<E, 0>(v);
        run_stage<E, 1>(v);
        run_stage<E, 2>(v);
        run_stage<E, 3>(v);
        // Each lane's run is stored from its part of the register at the
        // width of that part (a 64-byte masked store at the run's address
        // would touch two cache lines nearly every time); whole runs with
        // plain stores.
#pragma GCC unroll 32
        for (int li = 0; li < LB; ++li) {
          const int q = li % LPR;
          uint8_t* dst = base[half * LB + li] + off;
          const __m512i y = v[li / LPR];
          if constexpr (E == 1) {
            // The register's halves: the low 16 bytes of each stored
            // plainly, the high 16 with a 32-byte masked store from the
            // run's address - 16 (one extract per register, not three).
            const __m256i h = q < 2 ? _mm512_castsi512_si256(y) : _mm512_extracti64x4_epi64(y, 1);
            if (q % 2 == 0) {
              if (len == 16) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(h));
              else _mm_mask_storeu_epi8(dst, static_cast<__mmask16>(m0), _mm256_castsi256_si128(h));
            } else {
              _mm256_mask_storeu_epi8(dst - 16, static_cast<__mmask32>(m0 << 16), h);
            }
          } else if constexpr (E == 2) {
            const __m256i x = q == 0 ? _mm512_castsi512_si256(y) : _mm512_extracti64x4_epi64(y, 1);
            if (len == 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), x);
            else _mm256_mask_storeu_epi8(dst, static_cast<__mmask32>(m0), x);
          } else {
            if (len == 16) _mm512_storeu_si512(dst, y);
            else _mm512_mask_storeu_epi8(dst, m0, y);
          }
        }
      }
    }
  }
}

// ------------------------------------------------------------ rANS steps
// The shared word stream. Reads are unchecked: while more than kStepWords
// words remain, a step cannot run past the end; before the last steps the
// remaining words move to a zero-padded buffer (tail), so reads stay in
// bounds and a stream that runs short decodes zeros and fails the final
// check (all words consumed, every state back at 2^16).
inline constexpr uint32_t kStepWords = 64;  // most words one step can take

struct WordCursor {
  const uint8_t* p;  // word 0 of the current base
  uint32_t n, pos;   // words at p; next word
  bool in_pad;
  uint8_t* pad;      // kPadBytes, owned by the caller
};
inline constexpr size_t kPadBytes = 4 * kStepWords + 64;

inline void words_open(WordCursor* wc, const uint8_t* rans, uint32_t rans_len, uint8_t* pad) {
  wc->p = rans + 4 * kLanes;
  wc->n = (rans_len - 4 * kLanes) / 2;
  wc->pos = 0;
  wc->in_pad = false;
  wc->pad = pad;
}

// Call before a step when pos + kStepWords > n. False: the stream ran short.
WC_INLINE bool words_tail(WordCursor* wc) {
  if (wc->pos > wc->n) return false;
  if (!wc->in_pad) {
    std::memset(wc->pad, 0, kPadBytes);
    std::memcpy(wc->pad, wc->p + 2 * uint64_t{wc->pos}, 2 * uint64_t{wc->n - wc->pos});
    wc->p = wc->pad;
    wc->n -= wc->pos;
    wc->pos = 0;
    wc->in_pad = true;
  }
  return true;
}

// Renormalization of the active lanes whose state fell below 2^16: they take
// the next words of the stream in lane order (vpexpandd), exactly the scalar
// order.
// (GCC 12's sanitizer build, at -O1, also reports -Wuninitialized inside
// the widening and shift intrinsics here: the same _mm512_undefined_*().)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
WC_AVX512 inline void renorm16(__m512i& nx, __mmask16 act, WordCursor& wc) {
  const __mmask16 need = _mm512_mask_cmplt_epu32_mask(act, nx, _mm512_set1_epi32(static_cast<int32_t>(kRansL)));
  const __m256i w16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wc.p + 2 * uint64_t{wc.pos}));
  const __m512i wv = _mm512_maskz_expand_epi32(need, _mm512_cvtepu16_epi32(w16));
  nx = _mm512_mask_or_epi32(nx, need, _mm512_slli_epi32(nx, 16), wv);
  wc.pos += static_cast<uint32_t>(__builtin_popcount(need));
}
#pragma GCC diagnostic pop

// Both halves at one symbol slot, all lanes active (lanes 0..15 in A,
// 16..31 in B): the 32 words at the cursor are loaded once and vpexpandw
// hands them to the renormalizing lanes of both halves in lane order, so
// B's words do not wait on A's count.
WC_AVX512 WC_INLINE void renorm32(__m512i& A, __m512i& B, WordCursor& wc) {
  const __m512i L = _mm512_set1_epi32(static_cast<int32_t>(kRansL));
  const __mmask16 na = _mm512_cmplt_epu32_mask(A, L);
  const __mmask16 nb = _mm512_cmplt_epu32_mask(B, L);
  const __mmask32 need = _mm512_kunpackw(nb, na);
  const __m512i w = _mm512_maskz_expand_epi16(need, _mm512_loadu_si512(wc.p + 2 * uint64_t{wc.pos}));
  // Words 0..15 and 16..31 zero-extended, each by one zero-masked word
  // permute (shorter than widening, extracting and widening).
  alignas(64) static constexpr uint16_t kLo[32] = {0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0,
                                                   8, 0, 9, 0, 10, 0, 11, 0, 12, 0, 13, 0, 14, 0, 15, 0};
  alignas(64) static constexpr uint16_t kHi[32] = {16, 0, 17, 0, 18, 0, 19, 0, 20, 0, 21, 0, 22, 0, 23, 0,
                                                   24, 0, 25, 0, 26, 0, 27, 0, 28, 0, 29, 0, 30, 0, 31, 0};
  const __m512i wa = _mm512_maskz_permutexvar_epi16(0x55555555u, _mm512_load_si512(kLo), w);
  const __m512i wb = _mm512_maskz_permutexvar_epi16(0x55555555u, _mm512_load_si512(kHi), w);
  A = _mm512_mask_or_epi32(A, na, _mm512_slli_epi32(A, 16), wa);
  B = _mm512_mask_or_epi32(B, nb, _mm512_slli_epi32(B, 16), wb);
  wc.pos += static_cast<uint32_t>(__builtin_popcount(need));
}

WC_AVX512 inline __m512i gather_bytes(__mmask16 k, __m512i idx, const uint8_t* base) {
  const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, idx, base, 1);
  return _mm512_and_si512(v, _mm512_set1_epi32(0xFF));
}

// One decode step of 16 lanes with the packed slot table (row ctx).
WC_AVX512 inline void rans_step16(__m512i& X, __mmask16 act, __m512i ctx, const uint32_t* slots, WordCursor& wc,
                                  __m512i* sym_out) {
  const __m512i vMask = _mm512_set1_epi32(4095);
  const __m512i e = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), act,
                                                _mm512_add_epi32(_mm512_slli_epi32(ctx, 12), _mm512_and_si512(X, vMask)),
                                                slots, 4);
  const __m512i freq = _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(e, 8), vMask), _mm512_set1_epi32(1));
  __m512i nx = _mm512_add_epi32(_mm512_mullo_epi32(freq, _mm512_srli_epi32(X, 12)), _mm512_srli_epi32(e, 20));
  nx = _mm512_mask_mov_epi32(X, act, nx);
  renorm16(nx, act, wc);
  X = nx;
  *sym_out = _mm512_and_si512(e, _mm512_set1_epi32(0xFF));
}

// The same step with the two-level small-alphabet tables.
WC_AVX512 inline void rans_step16_small(__m512i& X, __mmask16 act, __m512i ctx, const uint8_t* sym_tab,
                                        const uint32_t* fs_tab, WordCursor& wc, __m512i* sym_out) {
  const __m512i vMask = _mm512_set1_epi32(4095);
  const __m512i slot = _mm512_and_si512(X, vMask);
  const __m512i sym = gather_bytes(act, _mm512_add_epi32(_mm512_slli_epi32(ctx, 12), slot), sym_tab);
  const __m512i fs = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), act,
                                                 _mm512_add_epi32(_mm512_slli_epi32(ctx, 8), sym), fs_tab, 4);
  __m512i nx = _mm512_add_epi32(
      _mm512_mullo_epi32(_mm512_and_si512(fs, _mm512_set1_epi32(0xFFFF)), _mm512_srli_epi32(X, 12)),
      _mm512_sub_epi32(slot, _mm512_srli_epi32(fs, 16)));
  nx = _mm512_mask_mov_epi32(X, act, nx);
  renorm16(nx, act, wc);
  X = nx;
  *sym_out = sym;
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

// Per-chunk lane state as vectors (two halves of 16 lanes).
struct LaneVectors {
  __m512i X[2], J[2], W[2], N[2];
  __mmask16 HT[2];  // lanes past their first row
  __mmask16 WIDE[2];
};

WC_AVX512 inline void init_lane_vectors(const uint8_t* rans, uint32_t rans_len, const LaneGeom& g, LaneVectors* v,
                                        WordCursor* wc, uint8_t* pad) {
  words_open(wc, rans, rans_len, pad);
  for (int k = 0; k < 2; ++k) {
    v->X[k] = _mm512_loadu_si512(rans + 64 * k);
    v->J[k] = _mm512_setzero_si512();
    v->W[k] = _mm512_load_si512(g.w + 16 * k);
    v->N[k] = _mm512_load_si512(g.n + 16 * k);
    v->HT[k] = 0;
    v->WIDE[k] = static_cast<__mmask16>(g.wide >> (16 * k));
  }
}

// Loads the 16 lane-major elements of half k at step s (s may be negative:
// then the result is unused and the load is clamped to step 0).
template <int E>
WC_AVX512 inline __m512i load_elems(const uint8_t* lm, int64_t s, int k) {
  if (s < 0) s = 0;
  const uint8_t* p = lm + (static_cast<uint64_t>(s) * 32 + 16 * k) * E;
  if constexpr (E == 1) return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  if constexpr (E == 2) return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  if constexpr (E == 4) return _mm512_loadu_si512(p);
}

// The element above each lane's current one (W_l steps back), raw lane-major
// form, zero where there is none.
template <int E>
WC_AVX512 inline __m512i load_top(const uint8_t* lm, const LaneGeom& g, const LaneVectors& lv, uint32_t t, int k,
                                  __mmask16 ht) {
  if (!ht) return _mm512_setzero_si512();
  const __m512i a = load_elems<E>(lm, static_cast<int64_t>(t) - g.wa, k);
  if (g.uniform) return _mm512_maskz_mov_epi32(ht, a);
  const __m512i b = load_elems<E>(lm, static_cast<int64_t>(t) - g.wa - 1, k);
  return _mm512_maskz_mov_epi32(ht, _mm512_mask_mov_epi32(a, lv.WIDE[k], b));
}

template <int E>
WC_AVX512 inline void store_elems(uint8_t* lm, uint32_t t, int k, __m512i v) {
  uint8_t* p = lm + (uint64_t{t} * 32 + 16 * k) * E;
  if constexpr (E == 1) _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v));
  if constexpr (E == 2) _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(v));
  if constexpr (E == 4) _mm512_storeu_si512(p, v);
}

// ------------------------------------------------------------ same-size lanes
// When all 32 lanes have the same rectangle size (W x H), every lane is
// active at every step and has (or lacks) its left / top neighbours at the
// same steps, so the geometry is scalar: row r, column j of every lane at
// step r * W + j. The context arithmetic then runs once for all 32 lanes in
// 16-bit elements; only the rANS states need two 16-lane vectors.

// Low bytes of the 32 dwords of two vectors, in lane order, as 16-bit words
// (high bytes zero): one byte permute with a zeroing mask (a word permute
// and a mask take three times the micro-ops).
WC_AVX512 WC_INLINE __m512i lo_bytes16(__m512i a, __m512i b) {
  alignas(64) static constexpr uint8_t kIdx[64] = {
      0,  0, 4,  0, 8,  0, 12, 0, 16, 0, 20, 0, 24, 0, 28,  0, 32,  0, 36,  0, 40,  0, 44,  0, 48,  0, 52,  0, 56,  0, 60,  0,
      64, 0, 68, 0, 72, 0, 76, 0, 80, 0, 84, 0, 88, 0, 92, 0, 96, 0, 100, 0, 104, 0, 108, 0, 112, 0, 116, 0, 120, 0, 124, 0};
  return _mm512_maskz_permutex2var_epi8(0x5555555555555555ull, a, _mm512_load_si512(kIdx), b);
}

// Table index ctx * 4096 + (x & 4095) of the two halves; ctx16 holds the 32
// contexts as 16-bit words.
WC_AVX512 WC_INLINE void slot_index(__m512i ctx16, __m512i X0, __m512i X1, __m512i* i0, __m512i* i1) {
  const __m512i m = _mm512_set1_epi32(4095);
  const __m512i c0 = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(ctx16));
  const __m512i c1 = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(ctx16, 1));
  *i0 = _mm512_ternarylogic_epi32(_mm512_slli_epi32(c0, 12), X0, m, 0xF8);  // a | (b & c)
  *i1 = _mm512_ternarylogic_epi32(_mm512_slli_epi32(c1, 12), X1, m, 0xF8);
}

// The state update of 16 lanes from their packed slot entries e (before
// renormalization).
WC_AVX512 WC_INLINE __m512i rans_advance16(__m512i X, __m512i e) {
  const __m512i freq =
      _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(e, 8), _mm512_set1_epi32(4095)), _mm512_set1_epi32(1));
  return _mm512_add_epi32(_mm512_mullo_epi32(freq, _mm512_srli_epi32(X, 12)), _mm512_srli_epi32(e, 20));
}

// base[idx[i]] for the 16 lanes (every index valid): sixteen scalar loads,
// the indexes taken from the vector in 64-bit moves, instead of a zmm
// vpgatherdd. On an AMD EPYC (Zen 4 class) the AVX-512 loops ran up to
// 1.16x faster per file with them (docs/decoder-paths.md, "Scalar loads for
// the table gathers"); Intel CPUs whose gathers carry the Gather Data
// Sampling mitigation lose more to vpgatherdd. The masked gathers of
// partial steps stay vector gathers.
WC_AVX512 WC_INLINE __m512i gather16(__m512i idx, const uint32_t* base) {
  const __m128i ii[4] = {_mm512_castsi512_si128(idx), _mm512_extracti32x4_epi32(idx, 1),
                         _mm512_extracti32x4_epi32(idx, 2), _mm512_extracti32x4_epi32(idx, 3)};
  __m128i q[4];
  for (int h = 0; h < 4; ++h) {
    const uint64_t a = static_cast<uint64_t>(_mm_cvtsi128_si64(ii[h]));
    const uint64_t b = static_cast<uint64_t>(_mm_extract_epi64(ii[h], 1));
    __m128i v = _mm_cvtsi32_si128(static_cast<int>(base[static_cast<uint32_t>(a)]));
    v = _mm_insert_epi32(v, static_cast<int>(base[a >> 32]), 1);
    v = _mm_insert_epi32(v, static_cast<int>(base[static_cast<uint32_t>(b)]), 2);
    q[h] = _mm_insert_epi32(v, static_cast<int>(base[b >> 32]), 3);
  }
  const __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(q[0]), q[1], 1);
  const __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(q[2]), q[3], 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// base[idx[i]] for the 16 lanes in the process's form (VG: one zmm
// vpgatherdd, else gather16's scalar loads; simd_env.h, vector_gathers()).
// On an Intel Xeon (Emerald Rapids) vpgatherdd made the AVX-512 loops up
// to 1.37x faster per file (docs/decoder-paths.md, "Two gather forms").
template <bool VG>
WC_AVX512 WC_INLINE __m512i gather16_form(__m512i idx, const uint32_t* base) {
  if constexpr (VG) return _mm512_i32gather_epi32(idx, base, 4);
  return gather16(idx, base);
}

// rANS step of 16 lanes, all active, from packed slot entries at idx.
// Returns the entries (symbol in the low byte).
template <bool VG>
WC_AVX512 WC_INLINE __m512i rans_all16(__m512i& X, __m512i idx, const uint32_t* slots, WordCursor& wc) {
  const __m512i e = gather16_form<VG>(idx, slots);
  X = rans_advance16(X, e);
  renorm16(X, 0xFFFF, wc);
  return e;
}

// The same step for all 32 lanes (both halves), with one renormalization
// (renorm32). The int loop, one symbol per element, runs about 7% faster
// with it; the float loop, whose two symbols per element chain each lane's
// state through two gathers, is faster with two renorm16 (the second half
// then starts its words as soon as the first half's count is known).
template <bool VG>
WC_AVX512 WC_INLINE void rans_all32(__m512i& X0, __m512i& X1, __m512i i0, __m512i i1, const uint32_t* slots,
                                    WordCursor& wc, __m512i* e0, __m512i* e1) {
  *e0 = gather16_form<VG>(i0, slots);
  *e1 = gather16_form<VG>(i1, slots);
  X0 = rans_advance16(X0, *e0);
  X1 = rans_advance16(X1, *e1);
  renorm32(X0, X1, wc);
}

// A chunk stream opened for a same-rectangle loop: the word cursor and the
// 32 lanes' initial states (S: a loop state with X0, X1).
template <class S>
WC_AVX512 WC_INLINE void open_chunk_state(const uint8_t* rans, uint32_t rans_len, uint8_t* pad, WordCursor* wc,
                                          S* s) {
  words_open(wc, rans, rans_len, pad);
  s->X0 = _mm512_loadu_si512(rans);
  s->X1 = _mm512_loadu_si512(rans + 64);
}

// The 32 lane-major bytes at row (codes, side information) as 16-bit lanes.
WC_AVX512 WC_INLINE __m512i codes16(const uint8_t* row) {
  return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)));
}

// ------------------------------------------------------------ across files
// chunk_decode_simd_int.cpp: N chunks of int8 / uint8 / 4-bit codes with
// one model configuration (N = 1, 2, 3; decode_group_simd and
// decode_int_chunk_simd), and 4-bit codes decoded as bytes packed into the
// chunk's bytes.
template <int N>
WC_AVX512 int decode_int_fast(const ModelView* ms, const uint8_t* const* rans, const uint32_t* rans_len,
                              const LaneGeom& g, const uint64_t* col0, const uint64_t* row0, uint8_t* const* lm);
int pack_nibble_chunk(const ChunkView& cv, const LaneGeom& g, uint8_t* lm, uint8_t* out);
// chunk_decode_simd_tern.cpp: ternary chunks (decode_int_chunk_simd).
WC_AVX512 int decode_tern_fast(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                               const LaneGeom& g, uint8_t* lm, uint8_t* codes, uint8_t* out);
// chunk_decode_simd_float.cpp: n float chunks of E-byte elements
// together (decode_group_simd).
template <int E>
WC_AVX512 int decode_float_group_e(const ModelView* ms, const ChunkView& cv, const GroupSide* s, int n,
                                   const LaneGeom& g);

}  // namespace wcodec::avx512
