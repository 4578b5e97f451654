// codec/src/chunk_decode_simd.cpp — AVX-512 decoders of int and float chunks.
//
// They decode the same streams as the scalar reference decoders
// (chunk_decode.h), which stay the reference: 32 lanes as two 16-wide
// vectors processed in lane order, so renormalization words are consumed in
// exactly the scalar order (vpexpandd hands consecutive words to the lanes
// that need one). Escaped int tokens (rare) take their extra-bit symbols
// through the scalar step.
//
// Layout: the decode loop writes each step's 32 elements as one contiguous
// row of a lane-major buffer (step t, lane l at t * 32 + l), already in
// their final form where one exists (int8 / uint8 codes, float elements
// without their raw mantissa bits). A lane's neighbours are then plain
// vector loads: left is in registers, top is W steps back (W = lane width,
// at most two distinct widths per chunk), the periodic neighbours are off_a
// / off_b steps back. One pass then transposes blocks of 16 steps x 32 lanes
// with a vpermt2b network and stores each lane's run of 16 elements into the
// chunk's raster order; a last pass ORs in the float raw bits. No gathers
// other than the rANS table lookups, no scatters.
//
// Pairs: every lane's state is a serial chain (slot -> table gather ->
// next state -> renormalization), so one chunk's 32 lanes leave the core
// waiting on gather latency. The same-rectangle float and int8 loops are
// written over N chunks of one model and geometry (N = 1, 2 or 3), each
// step phase by phase across the chunks (contexts of all, then the gathers
// of all, ...), so that their gathers are in flight together: two chunks
// decode at about 1.3-1.6x the symbols per second of one, three at about
// 1.1x (float) and 1.15x (int8) that of two (decode_group_simd).
// Thread-safety: pure functions over their arguments and the caller's
// scratch.
#include <immintrin.h>

// GCC 12's AVX-512 headers build some results from _mm512_undefined_*(),
// which -Wmaybe-uninitialized reports at every inlined call site.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <array>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "tensor_codec.h"

namespace wcodec {

bool simd_disabled_by_env() {
  static const bool off = [] {
    const char* e = std::getenv("WCODEC_NO_SIMD");
    return e && *e && *e != '0';
  }();
  return off;
}

namespace {

bool simd_enabled() {
  static const bool on = [] {
    if (simd_disabled_by_env()) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vbmi2");
  }();
  return on;
}

}  // namespace

bool vector_decoder_available() { return simd_enabled(); }

namespace {

#define WC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vbmi2,popcnt")))
#define WC_INLINE __attribute__((always_inline)) inline

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

// rANS step of 16 lanes, all active, from packed slot entries at idx.
// Returns the entries (symbol in the low byte).
WC_AVX512 WC_INLINE __m512i rans_all16(__m512i& X, __m512i idx, const uint32_t* slots, WordCursor& wc) {
  const __m512i e = _mm512_i32gather_epi32(idx, slots, 4);
  X = rans_advance16(X, e);
  renorm16(X, 0xFFFF, wc);
  return e;
}

// The same step for all 32 lanes (both halves), with one renormalization
// (renorm32). The int loop, one symbol per element, runs about 7% faster
// with it; the float loop, whose two symbols per element chain each lane's
// state through two gathers, is faster with two renorm16 (the second half
// then starts its words as soon as the first half's count is known).
WC_AVX512 WC_INLINE void rans_all32(__m512i& X0, __m512i& X1, __m512i i0, __m512i i1, const uint32_t* slots,
                                    WordCursor& wc, __m512i* e0, __m512i* e1) {
  *e0 = _mm512_i32gather_epi32(i0, slots, 4);
  *e1 = _mm512_i32gather_epi32(i1, slots, 4);
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
template <int N, bool U8, int AM, bool KERN, bool HT, bool HL, bool HA, bool PV>
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
    rans_all32(s[n].X0, s[n].X1, i0, i1, c[n].slots, wc[n], &s[n].E0, &s[n].E1);
  }
  return true;
}

template <int N, bool U8, int AM, bool KERN, bool HT, bool FIRST>
WC_AVX512 WC_INLINE bool int_fast_row(const IntParams* const* p, const IntFastConsts* c, IntFastState* s, uint32_t r,
                                      WordCursor* wc, uint8_t* const* lm) {
  for (int n = 0; n < N; ++n) s[n].RP = c[n].rcl ? codes16(c[n].rcl + uint64_t{r} * 32) : _mm512_setzero_si512();
  const uint32_t W = c[0].W, oa = c[0].oa, t0 = r * W;
  if (!int_fast_step<N, U8, AM, KERN, HT, false, false, !FIRST>(p, c, s, t0, 0, wc, lm)) return false;
  const uint32_t ja = oa ? (oa < W ? oa : W) : W;
  for (uint32_t j = 1; j < ja; ++j)
    if (!int_fast_step<N, U8, AM, KERN, HT, true, false, true>(p, c, s, t0 + j, j, wc, lm)) return false;
  for (uint32_t j = ja; j < W; ++j)
    if (!int_fast_step<N, U8, AM, KERN, HT, true, true, true>(p, c, s, t0 + j, j, wc, lm)) return false;
  return true;
}

// The codes of N same-rectangle chunks (parameters *p[n], constants c[n],
// streams rans[n], rans_len[n]) into lane-major lm[n]. 1: all decoded; 0
// otherwise. Software-pipelined: each chunk's step runs the previous step's
// values, then its own context and tokens, so that a chunk's gathers and
// the context work that feeds its next gathers lie close together in
// program order, with the other chunks' independent work between them.
template <int N, bool U8, int AM, bool KERN>
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
  if (!int_fast_row<N, U8, AM, KERN, false, true>(p, c, s, 0, wc, lm)) return 0;
  for (uint32_t r = 1; r < g.rows; ++r)
    if (!int_fast_row<N, U8, AM, KERN, !KERN, false>(p, c, s, r, wc, lm)) return 0;
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
#define WC_INT_FAST(U, A)                                                                     \
  if (u8 == U && am == A)                                                                     \
    return kern ? int_fast_lanes<N, U, A, true>(ps, c, rans, rans_len, g, lm)                 \
                : int_fast_lanes<N, U, A, false>(ps, c, rans, rans_len, g, lm);
  WC_INT_FAST(false, 0) WC_INT_FAST(false, 1) WC_INT_FAST(false, 2) WC_INT_FAST(false, 3)
  WC_INT_FAST(true, 0) WC_INT_FAST(true, 1) WC_INT_FAST(true, 2) WC_INT_FAST(true, 3)
#undef WC_INT_FAST
  return -1;
}

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
template <int PERM, bool HT>
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
    const __m512i e0 = _mm512_i32gather_epi32(i0, c.tab, 4);
    const __m512i e1 = _mm512_i32gather_epi32(i1, c.tab, 4);
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

template <int PERM>
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
        if (!tern_step<PERM, true>(c, s, t0 + j, j, wc, lm)) return 0;
    } else {
      for (uint32_t j = 0; j < c.W; ++j)
        if (!tern_step<PERM, false>(c, s, t0 + j, j, wc, lm)) return 0;
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
    r = nctx <= 128 ? tern_lanes<4>(m, cv, c, rans, rans_len, g, lm) : tern_lanes<8>(m, cv, c, rans, rans_len, g, lm);
  } else {
    r = tern_lanes<0>(m, cv, c, rans, rans_len, g, lm);
  }
  if (r != 1) return r;
  same_rect_to_raster<1>(lm, g, cv.w, codes);
  pack_codes2(codes, uint64_t{cv.h} * cv.w / 4, out);
  return 1;
}

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
template <int E, bool SMC>
WC_AVX512 WC_INLINE void float_symbols(const FloatParams& p, const FloatFastConsts& c, FloatFastState& s, __m512i i0,
                                       __m512i i1, __m512i ls0, __m512i ls1, uint32_t t, WordCursor& wc, uint8_t* lm) {
  const __m512i ee0 = _mm512_and_si512(rans_all16(s.X0, i0, c.slots_e, wc), _mm512_set1_epi32(0xFF));
  const __m512i ee1 = _mm512_and_si512(rans_all16(s.X1, i1, c.slots_e, wc), _mm512_set1_epi32(0xFF));
  __m512i j0, j1;
  float_sm_slots<SMC>(p, c, s, ee0, ee1, ls0, ls1, &j0, &j1);
  const __m512i se0 = rans_all16(s.X0, j0, c.slots_s, wc);
  const __m512i se1 = rans_all16(s.X1, j1, c.slots_s, wc);
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
template <int N, int E, int EM, bool SMC, bool HT, bool HL>
WC_AVX512 WC_INLINE bool float_fast_step(const FloatParams& p, const FloatFastConsts* c, FloatFastState* s,
                                         uint32_t t, WordCursor* wc, uint8_t* const* lm) {
  for (int n = 0; n < N; ++n)
    if (__builtin_expect(wc[n].pos + kStepWords > wc[n].n, 0) && !words_tail(&wc[n])) return false;
  __m512i i0[N], i1[N], ee0[N], ee1[N], se0[N], se1[N];
  for (int n = 0; n < N; ++n) float_exp_slots<E, EM, HT, HL>(c[n], s[n], t, lm[n], &i0[n], &i1[n]);
  for (int n = 0; n < N; ++n) {
    ee0[n] = _mm512_and_si512(rans_all16(s[n].X0, i0[n], c[n].slots_e, wc[n]), _mm512_set1_epi32(0xFF));
    ee1[n] = _mm512_and_si512(rans_all16(s[n].X1, i1[n], c[n].slots_e, wc[n]), _mm512_set1_epi32(0xFF));
  }
  for (int n = 0; n < N; ++n) {
    __m512i j0, j1;
    float_sm_slots<SMC>(p, c[n], s[n], ee0[n], ee1[n], s[n].LS0, s[n].LS1, &j0, &j1);
    se0[n] = rans_all16(s[n].X0, j0, c[n].slots_s, wc[n]);
    se1[n] = rans_all16(s[n].X1, j1, c[n].slots_s, wc[n]);
  }
  for (int n = 0; n < N; ++n) float_store<E, SMC>(c[n], s[n], ee0[n], ee1[n], se0[n], se1[n], t, lm[n]);
  return true;
}

template <int N, int E, int EM, bool SMC, bool HT>
WC_AVX512 WC_INLINE bool float_fast_row(const FloatParams& p, const FloatFastConsts* c, FloatFastState* s, uint32_t t0,
                                        WordCursor* wc, uint8_t* const* lm) {
  for (int n = 0; n < N; ++n) s[n].LS0 = s[n].LS1 = _mm512_setzero_si512();
  if (!float_fast_step<N, E, EM, SMC, HT, false>(p, c, s, t0, wc, lm)) return false;
  for (uint32_t j = 1; j < c[0].W; ++j)
    if (!float_fast_step<N, E, EM, SMC, HT, true>(p, c, s, t0 + j, wc, lm)) return false;
  return true;
}

// The symbols of N same-rectangle chunks of one model and geometry
// (streams rans[n], rans_len[n]) into lane-major lm[n]. Returns 1 if all
// decoded, 0 otherwise (for N > 1 the caller then decodes each chunk
// alone, which names the chunk at fault).
template <int N, int E, int EM, bool SMC>
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
    const bool ok = r ? float_fast_row<N, E, EM, SMC, true>(p, c, s, r * c[0].W, wc, lm)
                      : float_fast_row<N, E, EM, SMC, false>(p, c, s, 0, wc, lm);
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
template <int N, int E, bool HL>
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
  for (int n = 0; n < N; ++n) rans_all32(s[n].X0, s[n].X1, i0[n], i1[n], c[n].slots_e, wc[n], &e0[n], &e1[n]);
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
template <int N, int E>
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
    if (!float_joint_step<N, E, false>(c, s, t0, wc, lm)) return 0;
    for (uint32_t j = 1; j < W; ++j)
      if (!float_joint_step<N, E, true>(c, s, t0 + j, wc, lm)) return 0;
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
  if (float_joint(p)) return float_joint_lanes<N, E>(c, rans, rans_len, g, lm, x_tail);
  const bool smc = float_sm_contexts(p);
#define WC_FLOAT_FAST(EMv, S) \
  if (p.emode == EMv && smc == S) return float_fast_lanes<N, E, EMv, S>(p, c, rans, rans_len, g, lm, x_tail);
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
    float_symbols<E, SMC>(p, c, s, i0, i1, ls0, ls1, t, wc, lm);
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

}  // namespace

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

size_t simd_lane_major_bytes(const ChunkView& cv) {
  // steps <= ceil(h / ly) * ceil(w / lx) <= h * w / 32 + h + w; 16 steps of
  // padding for the transposition's last block; 4 bytes per element.
  const uint64_t steps = uint64_t{cv.h} * cv.w / kLanes + cv.h + cv.w + 1;
  return static_cast<size_t>((steps + 16) * kLanes * 4 + 64);
}

namespace {
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
}  // namespace

int decode_float_chunk_simd(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                            const uint8_t* raw, uint64_t raw_len, uint8_t* out, uint8_t* lm, bool tail) {
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

int decode_group_simd(const ModelView* ms, const ChunkView& cv, const GroupSide* s, int n) {
  if (!simd_enabled() || n < 2 || n > kMaxChunkGroup) return -1;
  if (uint64_t{cv.h} * cv.w >= (1ull << 31)) return -1;
  const uint64_t nel = uint64_t{cv.h} * cv.w;
  const ModelView& m = ms[0];
  if (!m.slot_all) return -1;
  if (m.kind == ModelKind::kFloat) {
    for (int i = 0; i < n; ++i) {
      const ModelView& mi = ms[i];
      if (mi.kind != ModelKind::kFloat || !mi.slot_all || (!mi.slot1_all && !float_joint(mi.fp)) || mi.fp.eb > 8 ||
          mi.fp.k > 7 || float_raw_bits(mi.fp) > 24 || !float_loop_compatible(m.fp, mi.fp))
        return -1;
    }
    for (int i = 0; i < n; ++i)
      if (!float_raw_ok(ms[i].fp, nel, s[i].raw_len, s[i].tail) || s[i].rans_len < 4 * kLanes || (s[i].rans_len & 1))
        return 0;
    LaneGeom g;
    lane_geom(cv, &g);
    switch (m.fp.elem_bytes) {
      case 1: return decode_float_group_e<1>(ms, cv, s, n, g);
      case 2: return decode_float_group_e<2>(ms, cv, s, n, g);
      default: return -1;
    }
  }
  for (int i = 1; i < n; ++i)
    if (ms[i].kind != ModelKind::kInt || !ms[i].luts || ms[i].zp) return -1;
  if (m.kind != ModelKind::kInt || !m.luts || m.zp) return -1;
  const bool nibble = m.ip.sub == kIntNibble;
  if (m.ip.sub != kIntI8 && m.ip.sub != kIntU8 && !nibble) return -1;
  if (nibble && (uint64_t{cv.h} * cv.w) % 2) return -1;
  for (int i = 0; i < n; ++i) {
    if (s[i].map) return -1;
    if (s[i].rans_len < 4 * kLanes || (s[i].rans_len & 1) || s[i].raw_len) return 0;
  }
  LaneGeom g;
  lane_geom(cv, &g);
  const uint8_t* rans[kMaxChunkGroup];
  uint32_t rans_len[kMaxChunkGroup];
  uint8_t* lms[kMaxChunkGroup];
  uint64_t col0[kMaxChunkGroup], row0[kMaxChunkGroup];
  for (int i = 0; i < n; ++i) {
    rans[i] = s[i].rans;
    rans_len[i] = s[i].rans_len;
    lms[i] = s[i].lm;
    col0[i] = s[i].col0;
    row0[i] = s[i].row0;
  }
  const int r = n == 2 ? decode_int_fast<2>(ms, rans, rans_len, g, col0, row0, lms)
                       : decode_int_fast<3>(ms, rans, rans_len, g, col0, row0, lms);
  if (r != 1) return r;
  if (nibble) {
    int ok = 1;
    for (int i = 0; i < n; ++i) ok &= pack_nibble_chunk(cv, g, s[i].lm, s[i].out);
    return ok;
  }
  for (int i = 0; i < n; ++i) same_rect_to_raster<1>(s[i].lm, g, cv.w, s[i].out);
  return 1;
}

int decode_int_chunk_simd(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
                          uint32_t rans_len, uint8_t* out, int32_t* res, int32_t* tmp_tile, uint8_t* lm) {
  if (!simd_enabled() || m.kind != ModelKind::kInt || m.ip.nbr_mode > 3 || !(m.slot_all || m.sym_small) || !m.luts)
    return -1;
  if ((m.ip.use_rc && !m.rc_pad) || (m.ip.use_cc && !m.cc_pad)) return -1;
  if (uint64_t{cv.h} * cv.w >= (1ull << 31)) return -1;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;
  LaneGeom g;
  lane_geom(cv, &g);
  if (!tile_map && m.ip.sub == kIntTernary) {
    const int r = decode_tern_fast(m, cv, rans, rans_len, g, lm, reinterpret_cast<uint8_t*>(res), out);
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
