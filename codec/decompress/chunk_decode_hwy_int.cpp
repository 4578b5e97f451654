// codec/decompress/chunk_decode_hwy_int.cpp — the int chunk decoder of the
// avx2 decoder path (include/wcodec/cpu.h) for 8-bit and 4-bit codes (int
// model sub 0 int8, 1 uint8, 2 4-bit; docs/wcodec-format.md §8.2, §9.3),
// written with Google Highway so that one source serves AVX2 now and NEON
// later.
//
// Why: the AVX-512 int decoders (chunk_decode_simd_int.cpp) need VBMI /
// VBMI2; without them every int chunk took the scalar reference decoder
// (decode_int_residuals + int_finish_chunk, chunk_decode.h), about 15x
// slower than zstd -d.
//
// Method (the AVX-512 decoder's, chunk_decode_simd.cpp): chunks whose 32
// lanes share one rectangle size (W columns x rows) are decoded step by
// step, step t = r * W + j being column j of row r of every lane. Each
// step's 32 codes are stored as one contiguous row of a lane-major buffer
// (step t, lane l at t * 32 + l; int8 codes, or uint8 / 4-bit codes as
// value + center bytes), so a lane's top neighbour is the vector load W
// rows back and its off_a neighbour off_a rows back; the left neighbours
// stay in registers. Every per-lane context quantity fits a byte (|value|
// <= 255, activity sums saturate at 255, which changes no class while the
// thresholds are below 256, contexts below 256), so the 32 contexts are one
// 256-bit vector of bytes on AVX2: activity class by compares with the
// thresholds, sign classes, kernel masks (nbr_mode 3) per column. The rANS
// step: contexts widened to 32-bit slot indexes, one gather of the
// flattened slot table (ModelView::slot_all) per 8 lanes, the state update,
// and renormalization in lane order: the need mask of the 32 lanes gives
// each vector its first word (the stream position plus the count of
// renormalizing lanes below it), and a prefix-count table (the expand of
// vpexpandd, emulated) permutes the next 8 words to the lanes that take
// one. Escaped tokens (rare) take their extra-bit symbols through the
// scalar step, in the reference's order. A last pass transposes blocks of
// 16 steps x 32 lanes (byte, 16-bit, 32-bit and 64-bit interleaves inside
// each 128-bit block) and stores each lane's run of 16 codes in raster
// order; 4-bit codes are then packed two to a byte.
//
// Bounds: the stream's last words are read from a zero-padded copy; a
// stream that runs short or ends with words left, a lane that does not end
// in its initial state, or a value without a code is rejected (0), as the
// reference rejects it. Configurations not handled here (tile maps, zero
// points, scale classes, thresholds of 256 or more, nbr_modes 1 and 2,
// lanes of unequal rectangles, ternary codes) are declined (-1) and take
// the reference decoder.
//
// Static dispatch: foreach_target.h compiles the body once per enabled
// Highway target; the avx2 path calls the AVX2 instance explicitly.
// Thread-safety: pure functions over their arguments and the caller's
// scratch.
#include <cstdint>
#include <cstring>

// Only the targets a path uses (and the baseline, which foreach_target
// always compiles): x86 AVX2, Arm NEON.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS \
  (HWY_AVX3 | HWY_AVX3_DL | HWY_SSSE3 | HWY_SSE4 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "chunk_decode_hwy_int.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "chunk_decode_hwy.h"

#ifndef WCODEC_HWY_INT_ONCE
#define WCODEC_HWY_INT_ONCE
namespace wcodec {
namespace hwy_int_detail {
// kPrefix.v[m][i]: the number of set bits of m below bit i (i < 8).
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

// Most words one step takes: 32 tokens, 32 low and 32 high extra-bit
// symbols (the escapes' words are read through a bounded WordSource).
inline constexpr uint32_t kStepWords = 96;

// The word stream: word i at p + 2 * i, n words; before the last steps the
// remaining words move to the zero-padded pad, so that a step's vector
// reads (up to 32 words past pos) stay in bounds.
struct Words {
  const uint8_t* p;
  uint32_t n, pos;
  bool in_pad;
  alignas(32) uint8_t pad[2 * kStepWords + 128];
};
inline void words_open(Words* w, const uint8_t* rans, uint32_t rans_len) {
  w->p = rans + 4 * kLanes;
  w->n = (rans_len - 4 * kLanes) / 2;
  w->pos = 0;
  w->in_pad = false;
}
// Call before a step when pos + kStepWords > n. False: the stream ran short.
inline bool words_tail(Words* w) {
  if (w->pos > w->n) return false;
  if (!w->in_pad) {
    std::memset(w->pad, 0, sizeof w->pad);
    std::memcpy(w->pad, w->p + 2 * uint64_t{w->pos}, 2 * uint64_t{w->n - w->pos});
    w->p = w->pad;
    w->n -= w->pos;
    w->pos = 0;
    w->in_pad = true;
  }
  return true;
}

// The lanes of a chunk whose 32 lane rectangles have one size.
struct Geom {
  uint32_t W, rows;
  uint32_t r0[kLanes], c0[kLanes];
};
inline bool same_rect(const ChunkView& cv, Geom* g) {
  for (uint32_t l = 0; l < kLanes; ++l) {
    const LaneCursor k = lane_cursor(cv.h, cv.w, l);
    if (k.n == 0) return false;
    if (l == 0) {
      g->W = k.rect.w;
      g->rows = k.rect.h;
    } else if (k.rect.w != g->W || k.rect.h != g->rows) {
      return false;
    }
    g->r0[l] = k.rect.r0;
    g->c0[l] = k.rect.c0;
  }
  return true;
}
}  // namespace hwy_int_detail
}  // namespace wcodec
#endif  // WCODEC_HWY_INT_ONCE

HWY_BEFORE_NAMESPACE();
namespace wcodec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE
namespace int_hwy {
using hwy_int_detail::Geom;
using hwy_int_detail::Words;

using D32 = hn::ScalableTag<uint32_t>;
using D8 = hn::ScalableTag<uint8_t>;
using V32 = hn::Vec<D32>;
using V8 = hn::Vec<D8>;
using M32 = hn::Mask<D32>;
constexpr size_t kN32 = HWY_LANES(uint32_t);
constexpr size_t kN8 = HWY_LANES(uint8_t);
constexpr size_t kV = kLanes / kN32;  // state vectors
constexpr size_t kB = kLanes / kN8;   // byte vectors of a step
static_assert(kN8 == 16 || kN8 == 32, "128- or 256-bit vectors");

struct Consts {
  const uint32_t* slots;
  uint32_t W, oa, nthr;
  V8 thr[7];          // activity thresholds (< 256)
  V8 esc, center;     // first escape token; the center of uint8 / 4-bit codes
  bool u8check;       // uint8: some plain token's value has no code
  const uint8_t* kmask;  // nbr_mode 3: per column j, 32 bytes left mask, 32 bytes upper mask
};

struct State {
  V32 X[kV];
  V8 A1[kB], A2[kB], LS[kB];  // |left|, |left 2|, left sign class (x 3 for kernel contexts)
  V8 bad[kB];
};

// |value| of 32 lane-major codes.
template <bool U8>
HWY_INLINE V8 AbsCodes(const Consts& c, V8 code) {
  const D8 d8;
  if constexpr (U8) {
    return hn::Or(hn::SaturatedSub(code, c.center), hn::SaturatedSub(c.center, code));
  } else {
    const hn::RebindToSigned<D8> di8;
    return hn::BitCast(d8, hn::Abs(hn::BitCast(di8, code)));  // |-128| = 0x80 read unsigned
  }
}

// Sign class of 32 lane-major codes: 0 zero, 1 positive, 2 negative.
template <bool U8>
HWY_INLINE V8 SignCodes(const Consts& c, V8 code) {
  const D8 d8;
  const V8 one = hn::Set(d8, 1);
  if constexpr (U8) {
    const V8 m2 = hn::Min(hn::SaturatedSub(c.center, code), one);
    return hn::Add(hn::Min(hn::SaturatedSub(code, c.center), one), hn::Add(m2, m2));
  } else {
    const hn::RebindToSigned<D8> di8;
    const V8 neg = hn::VecFromMask(d8, hn::RebindMask(d8, hn::Lt(hn::BitCast(di8, code), hn::Zero(di8))));
    return hn::Add(hn::Min(code, one), hn::And(neg, one));
  }
}

// The number of thresholds at or below a, times f (3 or 9).
HWY_INLINE V8 ActClass(const Consts& c, V8 a, int f) {
  const D8 d8;
  V8 cnt = hn::Zero(d8);
  for (uint32_t i = 0; i < c.nthr; ++i) cnt = hn::Sub(cnt, hn::VecFromMask(d8, hn::Eq(hn::Max(a, c.thr[i]), a)));
  const V8 c3 = hn::Add(hn::Add(cnt, cnt), cnt);
  return f == 3 ? c3 : hn::Add(hn::Add(c3, c3), c3);
}

// The contexts of step t (column j of the lane rows) as bytes. HT: a row
// above exists; HL: the left neighbour exists; HA: the off_a neighbour
// exists.
template <bool U8, bool KERN, bool HT, bool HL, bool HA>
HWY_INLINE V8 StepCtx(const Consts& c, const State& s, size_t b, uint32_t t, uint32_t j, const uint8_t* lm) {
  const D8 d8;
  const size_t ob = b * kN8;
  if constexpr (KERN) {
    V8 a = hn::Zero(d8), ctx = hn::Zero(d8);
    if constexpr (HL) {
      const V8 ml = hn::LoadU(d8, c.kmask + uint64_t{j} * 64 + ob);
      a = hn::And(s.A1[b], ml);
      ctx = hn::And(s.LS[b], ml);
    }
    if constexpr (HA) {
      const V8 mu = hn::LoadU(d8, c.kmask + uint64_t{j} * 64 + 32 + ob);
      const V8 u = hn::LoadU(d8, lm + (uint64_t{t} - c.oa) * 32 + ob);
      a = hn::SaturatedAdd(a, hn::And(AbsCodes<U8>(c, u), mu));
      ctx = hn::Add(ctx, hn::And(SignCodes<U8>(c, u), mu));
    }
    return c.nthr ? hn::Add(ctx, ActClass(c, a, 9)) : ctx;
  } else {
    if (!c.nthr) return s.LS[b];
    V8 a = hn::SaturatedAdd(hn::SaturatedAdd(s.A1[b], s.A1[b]), s.A2[b]);
    if constexpr (HT) {
      const V8 at = AbsCodes<U8>(c, hn::LoadU(d8, lm + (uint64_t{t} - c.W) * 32 + ob));
      a = hn::SaturatedAdd(a, at);
      if constexpr (!HL) a = hn::SaturatedAdd(a, hn::SaturatedAdd(at, at));
    }
    if constexpr (HA) a = hn::SaturatedAdd(a, AbsCodes<U8>(c, hn::LoadU(d8, lm + (uint64_t{t} - c.oa) * 32 + ob)));
    return hn::Add(ActClass(c, a, 3), s.LS[b]);
  }
}

// The low bytes of the 32 slot entries, in lane order.
HWY_INLINE void TokenBytes(const V32* E, V8* tok) {
  const D32 d32;
  const D8 d8;
#if HWY_TARGET == HWY_AVX2
  (void)d32;
  const __m256i m = _mm256_set1_epi32(0xFF);
  const __m256i a = _mm256_packus_epi32(_mm256_and_si256(E[0].raw, m), _mm256_and_si256(E[1].raw, m));
  const __m256i b = _mm256_packus_epi32(_mm256_and_si256(E[2].raw, m), _mm256_and_si256(E[3].raw, m));
  // Dwords: E0[0-3] E1[0-3] E2[0-3] E3[0-3] | E0[4-7] E1[4-7] E2[4-7] E3[4-7].
  const __m256i p = _mm256_packus_epi16(a, b);
  tok[0] = V8{_mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))};
  (void)d8;
#else
  const hn::RebindToSigned<D32> di32;
  const hn::Rebind<uint8_t, D32> d8q;
  HWY_ALIGN uint8_t buf[kLanes];
  for (size_t k = 0; k < kV; ++k)
    hn::StoreU(hn::DemoteTo(d8q, hn::BitCast(di32, hn::And(E[k], hn::Set(d32, 0xFFu)))), d8q, buf + k * kN32);
  for (size_t b = 0; b < kB; ++b) tok[b] = hn::Load(d8, buf + b * kN8);
#endif
}

// Escaped tokens of one step (escm: 32 lane bits): the extra bits in the
// reference's order through the scalar step, then the values, their codes'
// validity and the lanes' context inputs. False: a malformed stream.
template <bool U8, bool KERN>
HWY_NOINLINE bool Escapes(const IntParams& p, State& s, uint32_t escm, const V8* tok, V8* V, V8* A1n, V8* LSn,
                          Words& w) {
  const D32 d32;
  const D8 d8;
  HWY_ALIGN uint32_t xs[kLanes];
  HWY_ALIGN uint8_t ts[kLanes], vs[kLanes], as[kLanes], ls[kLanes];
  uint32_t extra[kLanes] = {};
  for (size_t k = 0; k < kV; ++k) hn::Store(s.X[k], d32, xs + k * kN32);
  for (size_t b = 0; b < kB; ++b) {
    hn::Store(tok[b], d8, ts + b * kN8);
    hn::Store(V[b], d8, vs + b * kN8);
    hn::Store(A1n[b], d8, as + b * kN8);
    hn::Store(LSn[b], d8, ls + b * kN8);
  }
  const uint8_t zero_word[2] = {0, 0};
  WordSource ws{w.n ? w.p : zero_word, w.n, w.pos, 0};
  for (uint32_t l = 0; l < kLanes; ++l) {
    if (!(escm >> l & 1)) continue;
    const uint32_t nb = ts[l] - p.esc;
    if (nb > kEscClasses - 1) return false;
    if (nb < 2) continue;
    const uint32_t e = nb - 1;
    extra[l] = rans_decode_bits(xs[l], e < 8 ? e : 8);
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
  w.pos = ws.pos;
  for (uint32_t l = 0; l < kLanes; ++l) {
    if (!(escm >> l & 1)) continue;
    const uint32_t nb = ts[l] - p.esc;
    const uint32_t dd = nb == 0 ? 0u : ((1u << (nb - 1)) | extra[l]);
    const int32_t v = tile::zz_decode(static_cast<int32_t>(p.esc + dd));
    // A value without a code: the reference's packing rejects the chunk
    // (4-bit codes above 15 are caught when packing).
    if (U8 ? (v + p.center < 0 || v + p.center > 255) : (v < -128 || v > 127)) return false;
    vs[l] = static_cast<uint8_t>(v);
    as[l] = static_cast<uint8_t>(v < 0 ? -v : v);
    ls[l] = static_cast<uint8_t>((v > 0 ? 1 : (v < 0 ? 2 : 0)) * (KERN ? 3 : 1));
  }
  for (size_t k = 0; k < kV; ++k) s.X[k] = hn::Load(d32, xs + k * kN32);
  for (size_t b = 0; b < kB; ++b) {
    V[b] = hn::Load(d8, vs + b * kN8);
    A1n[b] = hn::Load(d8, as + b * kN8);
    LSn[b] = hn::Load(d8, ls + b * kN8);
  }
  return true;
}

// One step: the 32 lanes' contexts, tokens, renormalization and values;
// the codes go to lane-major row t.
template <bool U8, bool KERN, bool HT, bool HL, bool HA>
HWY_INLINE bool Step(const IntParams& p, const Consts& c, State& s, uint32_t t, uint32_t j, Words& w, uint8_t* lm) {
  const D32 d32;
  const D8 d8;
  const hn::RebindToSigned<D32> di32;
  if (HWY_UNLIKELY(w.pos + hwy_int_detail::kStepWords > w.n) && !hwy_int_detail::words_tail(&w)) return false;
  HWY_ALIGN uint8_t ctxb[kLanes];
  for (size_t b = 0; b < kB; ++b) hn::Store(StepCtx<U8, KERN, HT, HL, HA>(c, s, b, t, j, lm), d8, ctxb + b * kN8);
  // The rANS step: slot entries, new states, renormalization in lane order.
  const hn::Rebind<uint8_t, D32> d8q;
  V32 E[kV];
  M32 need[kV];
  uint32_t needbits = 0;
  for (size_t k = 0; k < kV; ++k) {
    const V32 cx = hn::PromoteTo(d32, hn::LoadU(d8q, ctxb + k * kN32));
    const V32 idx = hn::Or(hn::ShiftLeft<12>(cx), hn::And(s.X[k], hn::Set(d32, 4095u)));
    E[k] = hn::BitCast(d32, hn::GatherIndex(di32, reinterpret_cast<const int32_t*>(c.slots), hn::BitCast(di32, idx)));
    const V32 freq = hn::Add(hn::And(hn::ShiftRight<8>(E[k]), hn::Set(d32, 4095u)), hn::Set(d32, 1u));
    const V32 nx = hn::Add(freq * hn::ShiftRight<12>(s.X[k]), hn::ShiftRight<20>(E[k]));
    s.X[k] = nx;
    need[k] = hn::Eq(hn::ShiftRight<16>(nx), hn::Zero(d32));
    uint8_t bits[8] = {};
    hn::StoreMaskBits(d32, need[k], bits);
    needbits |= static_cast<uint32_t>(bits[0]) << (k * kN32);
  }
  {
    const hn::Rebind<uint16_t, D32> d16h;
    const hn::Repartition<uint8_t, decltype(d16h)> d8h;
    uint32_t pos = w.pos;
    for (size_t k = 0; k < kV; ++k) {
      const uint32_t mk = (needbits >> (k * kN32)) & ((1u << kN32) - 1);
      const V32 words = hn::PromoteTo(d32, hn::BitCast(d16h, hn::LoadU(d8h, w.p + 2 * uint64_t{pos})));
      const V32 wv = hn::TableLookupLanes(words, hn::SetTableIndices(d32, hwy_int_detail::kPrefix.v[mk]));
      s.X[k] = hn::IfThenElse(need[k], hn::Or(hn::ShiftLeft<16>(s.X[k]), wv), s.X[k]);
      pos += static_cast<uint32_t>(__builtin_popcount(mk));
    }
    w.pos = pos;
  }
  // Values: zz^-1(u) = (u >> 1) ^ -(u & 1); |value| = (u + 1) >> 1; sign
  // class min(u, 1) + (u & 1).
  V8 tok[kB], V[kB], A1n[kB], LSn[kB];
  TokenBytes(E, tok);
  const V8 one = hn::Set(d8, 1);
  uint32_t escm = 0;
  for (size_t b = 0; b < kB; ++b) {
    const V8 odd = hn::And(tok[b], one);
    V[b] = hn::Xor(hn::ShiftRight<1>(tok[b]), hn::Sub(hn::Zero(d8), odd));
    A1n[b] = hn::AverageRound(tok[b], hn::Zero(d8));
    LSn[b] = hn::Add(hn::Min(tok[b], one), odd);
    if constexpr (KERN) LSn[b] = hn::Add(hn::Add(LSn[b], LSn[b]), LSn[b]);
    const auto em = hn::Eq(hn::Max(tok[b], c.esc), tok[b]);
    if (HWY_UNLIKELY(!hn::AllFalse(d8, em))) {
      uint8_t bits[4] = {};
      hn::StoreMaskBits(d8, em, bits);
      uint32_t m = 0;
      std::memcpy(&m, bits, sizeof bits);
      escm |= (kN8 == 32 ? m : (m & 0xFFFFu)) << (b * kN8);
    }
    if constexpr (U8) {
      if (c.u8check) {
        // A plain token's value without a uint8 code: value + center wraps.
        const V8 code = hn::Add(V[b], c.center);
        const V8 over = hn::IfThenElse(hn::RebindMask(d8, hn::Eq(odd, one)), hn::SaturatedSub(code, c.center),
                                       hn::SaturatedSub(c.center, code));
        s.bad[b] = hn::Or(s.bad[b], hn::IfThenZeroElse(em, over));
      }
    }
  }
  if (HWY_UNLIKELY(escm != 0) && !Escapes<U8, KERN>(p, s, escm, tok, V, A1n, LSn, w)) return false;
  for (size_t b = 0; b < kB; ++b) {
    hn::StoreU(U8 ? hn::Add(V[b], c.center) : V[b], d8, lm + uint64_t{t} * 32 + b * kN8);
    s.A2[b] = s.A1[b];
    s.A1[b] = A1n[b];
    s.LS[b] = LSn[b];
  }
  return true;
}

template <bool U8, bool KERN, bool HT>
HWY_INLINE bool Row(const IntParams& p, const Consts& c, State& s, uint32_t r, Words& w, uint8_t* lm) {
  const D8 d8;
  for (size_t b = 0; b < kB; ++b) s.A1[b] = s.A2[b] = s.LS[b] = hn::Zero(d8);
  const uint32_t W = c.W, oa = c.oa, t0 = r * W;
  if (!Step<U8, KERN, HT, false, false>(p, c, s, t0, 0, w, lm)) return false;
  const uint32_t ja = oa ? (oa < W ? oa : W) : W;
  for (uint32_t j = 1; j < ja; ++j)
    if (!Step<U8, KERN, HT, true, false>(p, c, s, t0 + j, j, w, lm)) return false;
  for (uint32_t j = ja; j < W; ++j)
    if (!Step<U8, KERN, HT, true, true>(p, c, s, t0 + j, j, w, lm)) return false;
  return true;
}

// The codes of a same-rectangle chunk into lane-major lm. 1 decoded, 0
// malformed.
template <bool U8, bool KERN>
int Lanes(const IntParams& p, const Consts& c, const uint8_t* rans, uint32_t rans_len, uint32_t rows, uint8_t* lm) {
  const D32 d32;
  const D8 d8;
  Words w;
  hwy_int_detail::words_open(&w, rans, rans_len);
  State s;
  for (size_t k = 0; k < kV; ++k) s.X[k] = hn::BitCast(d32, hn::LoadU(d8, rans + 4 * kN32 * k));
  for (size_t b = 0; b < kB; ++b) s.bad[b] = hn::Zero(d8);
  if (!Row<U8, KERN, false>(p, c, s, 0, w, lm)) return 0;
  for (uint32_t r = 1; r < rows; ++r)
    if (!Row<U8, KERN, !KERN>(p, c, s, r, w, lm)) return 0;
  if (w.pos != w.n) return 0;
  for (size_t k = 0; k < kV; ++k)
    if (!hn::AllTrue(d32, hn::Eq(s.X[k], hn::Set(d32, kRansL)))) return 0;
  for (size_t b = 0; b < kB; ++b)
    if (!hn::AllTrue(d8, hn::Eq(s.bad[b], hn::Zero(d8)))) return 0;
  return 1;
}

// Lane-major codes (step t, lane l at t * 32 + l) to raster order: per
// lane row and block of 16 columns, 16 rows of 32 bytes transposed inside
// each 128-bit block (16 lanes) by byte, 16-, 32- and 64-bit interleaves;
// register i of block q then holds lane 16q + i's 16 codes. lm must be
// readable for 16 steps past the last.
void ToRaster(const uint8_t* lm, const Geom& g, uint32_t w, uint8_t* out) {
  const D8 d8;
  const hn::Repartition<uint16_t, D8> d16;
  const hn::Repartition<uint32_t, D8> d32;
  const hn::Repartition<uint64_t, D8> d64;
  for (uint32_t r = 0; r < g.rows; ++r) {
    for (uint32_t j0 = 0; j0 < g.W; j0 += 16) {
      const uint32_t len = g.W - j0 < 16 ? g.W - j0 : 16;
      const uint64_t t0 = uint64_t{r} * g.W + j0;
      for (size_t b = 0; b < kB; ++b) {
        V8 R[16], P[16], T[16];
        for (int i = 0; i < 16; ++i) R[i] = hn::LoadU(d8, lm + (t0 + i) * 32 + b * kN8);
        // Bytes: P[2g + h] holds lanes 8h.. of steps 2g, 2g + 1.
        for (int q = 0; q < 8; ++q) {
          P[2 * q] = hn::InterleaveLower(d8, R[2 * q], R[2 * q + 1]);
          P[2 * q + 1] = hn::InterleaveUpper(d8, R[2 * q], R[2 * q + 1]);
        }
        // 16-bit: R[(gg * 2 + h) * 2 + h2] holds lanes 8h + 4h2.. of steps
        // 4gg..4gg + 3.
        for (int gg = 0; gg < 4; ++gg)
          for (int h = 0; h < 2; ++h) {
            const auto a = hn::BitCast(d16, P[(2 * gg) * 2 + h]), bb = hn::BitCast(d16, P[(2 * gg + 1) * 2 + h]);
            R[(gg * 2 + h) * 2] = hn::BitCast(d8, hn::InterleaveLower(d16, a, bb));
            R[(gg * 2 + h) * 2 + 1] = hn::BitCast(d8, hn::InterleaveUpper(d16, a, bb));
          }
        // 32-bit: P[((g3 * 2 + h) * 2 + h2) * 2 + h3] holds lanes
        // 8h + 4h2 + 2h3.. of steps 8g3..8g3 + 7.
        for (int g3 = 0; g3 < 2; ++g3)
          for (int hh = 0; hh < 4; ++hh) {
            const auto a = hn::BitCast(d32, R[(2 * g3) * 4 + hh]), bb = hn::BitCast(d32, R[(2 * g3 + 1) * 4 + hh]);
            P[(g3 * 4 + hh) * 2] = hn::BitCast(d8, hn::InterleaveLower(d32, a, bb));
            P[(g3 * 4 + hh) * 2 + 1] = hn::BitCast(d8, hn::InterleaveUpper(d32, a, bb));
          }
        // 64-bit: T[8h + 4h2 + 2h3 + h4] holds that lane's 16 steps.
        for (int hh = 0; hh < 8; ++hh) {
          const auto a = hn::BitCast(d64, P[hh]), bb = hn::BitCast(d64, P[8 + hh]);
          T[2 * hh] = hn::BitCast(d8, hn::InterleaveLower(d64, a, bb));
          T[2 * hh + 1] = hn::BitCast(d8, hn::InterleaveUpper(d64, a, bb));
        }
        for (int i = 0; i < 16; ++i) {
          for (size_t q = 0; q < kN8 / 16; ++q) {
            const uint32_t l = static_cast<uint32_t>(b * kN8 + q * 16 + i);
            uint8_t* dst = out + (uint64_t{g.r0[l] + r} * w + g.c0[l] + j0);
            const hn::Full128<uint8_t> d128;
#if HWY_MAX_BYTES == 16
            const hn::Vec<decltype(d128)> x = T[i];
#else
            const hn::Vec<decltype(d128)> x = q == 0 ? hn::LowerHalf(d128, T[i]) : hn::UpperHalf(d128, T[i]);
#endif
            if (len == 16) {
              hn::StoreU(x, d128, dst);
            } else {
              HWY_ALIGN uint8_t tmp[16];
              hn::Store(x, d128, tmp);
              std::memcpy(dst, tmp, len);
            }
          }
        }
      }
    }
  }
}

// Raster 4-bit codes (one per byte) packed two to a byte, code 2i in the
// low nibble. False when a code exceeds 15.
bool PackNibbles(const uint8_t* codes, uint64_t n, uint8_t* out) {
  const D8 d8;
  const hn::Repartition<uint16_t, D8> d16;
  const hn::RebindToSigned<decltype(d16)> di16;
  const hn::Rebind<uint8_t, decltype(d16)> d8h;
  V8 high = hn::Zero(d8);
  uint64_t i = 0;
  for (; i + kN8 <= n; i += kN8) {
    const V8 v = hn::LoadU(d8, codes + i);
    high = hn::Or(high, v);
    const auto v16 = hn::BitCast(d16, v);
    const auto pk = hn::Or(hn::And(v16, hn::Set(d16, 0x0F)), hn::ShiftRight<4>(hn::And(v16, hn::Set(d16, 0x0F00))));
    hn::StoreU(hn::DemoteTo(d8h, hn::BitCast(di16, pk)), d8h, out + i / 2);
  }
  uint8_t hi = 0;
  for (; i < n; i += 2) {
    hi |= codes[i] | codes[i + 1];
    out[i / 2] = static_cast<uint8_t>((codes[i] & 15) | (codes[i + 1] << 4));
  }
  return (hi & 0xF0) == 0 && hn::AllTrue(d8, hn::Eq(hn::And(high, hn::Set(d8, 0xF0)), hn::Zero(d8)));
}

int DecodeInt(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
              uint32_t rans_len, uint8_t* out, uint8_t* lm) {
  const IntParams& p = m.ip;
  if (m.kind != ModelKind::kInt || !m.slot_all || !m.luts || tile_map || m.zp) return -1;
  if (p.sub != kIntI8 && p.sub != kIntU8 && p.sub != kIntNibble) return -1;
  if ((p.nbr_mode != 0 && p.nbr_mode != 3) || p.ns != 1 || m.n0 < int_nctx(p) || p.esc > 238) return -1;
  if (p.nbr_mode == 3 && (p.off_a == 0 || p.period == 0)) return -1;
  const uint32_t nthr = p.nb > 1 ? p.nb - 1u : 0u;
  if (nthr > 7) return -1;
  for (uint32_t i = 0; i < nthr; ++i)
    if (p.thr[i] > 255) return -1;
  const uint64_t n = uint64_t{cv.h} * cv.w;
  if (n >= (1ull << 31) || (p.sub == kIntNibble && n % 2)) return -1;
  Geom g;
  if (!hwy_int_detail::same_rect(cv, &g)) return -1;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;
  const D8 d8;
  const bool u8 = p.sub != kIntI8;
  const bool kern = p.nbr_mode == 3;
  Consts c;
  c.slots = m.slot_all;
  c.W = g.W;
  c.oa = p.off_a;
  c.nthr = nthr;
  for (uint32_t i = 0; i < 7; ++i) c.thr[i] = hn::Set(d8, static_cast<uint8_t>(i < nthr ? p.thr[i] : 0));
  c.esc = hn::Set(d8, static_cast<uint8_t>(p.esc));
  c.center = hn::Set(d8, p.center);
  c.u8check = false;
  if (p.sub == kIntU8)
    for (uint32_t u = 0; u < p.esc; ++u) {
      const int32_t v = tile::zz_decode(static_cast<int32_t>(u)) + p.center;
      c.u8check |= v < 0 || v > 255;
    }
  const uint64_t steps = uint64_t{g.rows} * g.W;
  c.kmask = nullptr;
  if (kern) {
    // Per column j of the lane rows, which lanes have their left and their
    // upper kernel neighbour there, after the codes and the
    // transposition's 16 rows of padding.
    uint8_t* km = lm + (steps + 16) * 32;
    for (uint32_t j = 0; j < g.W; ++j)
      for (uint32_t l = 0; l < kLanes; ++l) {
        const uint32_t nb = int_kernel_nbrs(p, (cv.col0 + g.c0[l] + j) % p.period);
        km[j * 64 + l] = nb & 1 ? 0xFF : 0;
        km[j * 64 + 32 + l] = nb & 2 ? 0xFF : 0;
      }
    c.kmask = km;
  }
  int r;
  if (u8) r = kern ? Lanes<true, true>(p, c, rans, rans_len, g.rows, lm) : Lanes<true, false>(p, c, rans, rans_len, g.rows, lm);
  else r = kern ? Lanes<false, true>(p, c, rans, rans_len, g.rows, lm) : Lanes<false, false>(p, c, rans, rans_len, g.rows, lm);
  if (r != 1) return r;
  if (p.sub != kIntNibble) {
    ToRaster(lm, g, cv.w, out);
    return 1;
  }
  // 4-bit codes: raster bytes above the lane-major rows, then packed.
  uint8_t* codes = lm + (((steps + 16) * 32 + 63) & ~uint64_t{63});
  ToRaster(lm, g, cv.w, codes);
  return PackNibbles(codes, n, out) ? 1 : 0;
}
}  // namespace int_hwy
#endif  // HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE

}  // namespace HWY_NAMESPACE
}  // namespace wcodec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace wcodec {

int decode_int_chunk_hwy(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
                         uint32_t rans_len, uint8_t* out, uint8_t* lm) {
#if HWY_ARCH_X86 && (HWY_TARGETS & HWY_AVX2)
  return N_AVX2::int_hwy::DecodeInt(m, cv, tile_map, rans, rans_len, out, lm);
#else
  (void)m, (void)cv, (void)tile_map, (void)rans, (void)rans_len, (void)out, (void)lm;
  return -1;
#endif
}

}  // namespace wcodec
#endif  // HWY_ONCE
