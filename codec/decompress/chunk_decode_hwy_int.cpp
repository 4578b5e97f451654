// codec/decompress/chunk_decode_hwy_int.cpp — the int chunk decoder of the
// avx2 and neon decoder paths (include/wcodec/cpu.h) for 8-bit and 4-bit
// codes (int model sub 0 int8, 1 uint8, 2 4-bit; docs/wcodec-format.md
// §8.2, §9.3), written with Google Highway: one source, an AVX2 instance
// (x86-64) and a NEON one (aarch64: 128-bit byte vectors, 4-lane states).
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
// order; 4-bit codes are then packed two to a byte. Scale classes add a
// per-lane context offset looked up from rc + cc (16-byte table lookups).
//
// Groups: every lane's state is a serial chain through a gather, so one
// chunk leaves the core waiting on gather latency; 2 or 3 chunks of one
// geometry whose models share the loop (decode_group_simd; with scale
// classes in all of them or in none) are stepped together, phase by phase
// across the chunks (contexts, gathers, state updates, values), so that
// their chains overlap. The step's constants live in Consts, so that the
// loop reads them as memory operands instead of rebuilding them in AVX2's
// 16 registers (docs/decoder-paths.md, "The avx2 int decoder").
//
// Bounds: the stream's last words are read from a zero-padded copy; a
// stream that runs short or ends with words left, a lane that does not end
// in its initial state, or a value without a code is rejected (0), as the
// reference rejects it. Configurations not handled here (tile maps, zero
// points, thresholds of 256 or more, nbr_modes 1 and 2, lanes of unequal
// rectangles, ternary codes) are declined (-1) and take the reference
// decoder.
//
// Static dispatch: foreach_target.h compiles the body once per enabled
// Highway target; the entry points call the AVX2 instance (x86-64) or the
// NEON one (aarch64) explicitly (hwy_path_i.h).
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
#include "chunk_decode_hwy_int_i.h"
#include "chunk_decode_hwy_words.h"
#include "simd_env.h"  // vector_gathers

HWY_BEFORE_NAMESPACE();
namespace wcodec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#include "chunk_decode_hwy_gather-inl.h"

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

// (Explicit constructors carry the target attribute: GCC builds implicit
// ones without it, and the vector members' constructors then fail to
// inline on some targets.)
struct Consts {
  HWY_ATTR Consts() {}
  // Slot entries: slot_all (4096 a context), or with e8 ent8 (512 a
  // context; the loops' E8 parameter).
  const uint32_t* slots;
  bool e8;
  uint32_t W, oa, nthr;
  V8 thr[7];          // activity thresholds (< 256)
  V8 esc, center;     // first escape token; the center of uint8 / 4-bit codes
  // Constants of the step, held here so that the loop reads them as memory
  // operands instead of rebuilding them in its short register file.
  V8 one8, lo7;        // bytes 1, 0x7F
  V32 one32, m4095, m255;
  bool u8check;       // uint8: some plain token's value has no code
  const uint8_t* kmask;  // nbr_mode 3: per column j, 32 bytes left mask, 32 bytes upper mask
  // Scale classes (ns > 1): the class of rc + cc (0..62) in four 16-byte
  // tables, the context offset of one class (nb x 3; kernel contexts
  // nb x 9), the lanes' rc by lane row (rc_rows, rows x 32 bytes; null
  // without row classes) and cc by column (ccl, W x 32 bytes; zeros
  // without column classes).
  V8 stab[4];
  uint32_t sc_mul;
  const uint8_t *rc_rows, *ccl;
};

struct State {
  HWY_ATTR State() {}
  V32 X[kV];
  V8 A1[kB], A2[kB], LS[kB];  // |left|, |left 2|, left sign class (x 3 for kernel contexts)
  V8 bad[kB];
  V8 RC[kB];  // scale classes: the lanes' rc in this lane row
};

// The scale classes of the 32 lanes at column j of the current lane row.
HWY_INLINE V8 ScaleClass(const Consts& c, const State& s, size_t b, uint32_t j) {
  const D8 d8;
  const V8 sv = hn::Add(s.RC[b], hn::LoadU(d8, c.ccl + uint64_t{j} * 32 + b * kN8));
  const V8 lo = hn::And(sv, hn::Set(d8, 15));
  const V8 hi = hn::ShiftRight<4>(sv);
  const V8 r01 = hn::IfThenElse(hn::Eq(hi, hn::Zero(d8)), hn::TableLookupBytes(c.stab[0], lo),
                                hn::TableLookupBytes(c.stab[1], lo));
  const V8 r23 = hn::IfThenElse(hn::Eq(hi, hn::Set(d8, 2)), hn::TableLookupBytes(c.stab[2], lo),
                                hn::TableLookupBytes(c.stab[3], lo));
  return hn::IfThenElse(hn::Lt(hi, hn::Set(d8, 2)), r01, r23);
}

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
  const V8 one = c.one8;
  if constexpr (U8) {
    const V8 m2 = hn::Min(hn::SaturatedSub(c.center, code), one);
    return hn::Add(hn::Min(hn::SaturatedSub(code, c.center), one), hn::Add(m2, m2));
  } else {
#if HWY_TARGET == HWY_AVX2
    // sign(1, code) is 1, 0 or -1 (255); min(., 2) maps 255 to 2.
    (void)d8;
    return V8{_mm256_min_epu8(_mm256_sign_epi8(one.raw, code.raw), _mm256_set1_epi8(2))};
#else
    const hn::RebindToSigned<D8> di8;
    const V8 neg = hn::VecFromMask(d8, hn::RebindMask(d8, hn::Lt(hn::BitCast(di8, code), hn::Zero(di8))));
    return hn::Add(hn::Min(code, one), hn::And(neg, one));
#endif
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
      if (c.nthr) a = hn::SaturatedAdd(a, hn::And(AbsCodes<U8>(c, u), mu));
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

// The lane bits of a state-vector mask (lane i at bit i).
HWY_INLINE uint32_t MaskBits(M32 m) {
#if HWY_TARGET == HWY_AVX2
  return static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(m.raw)));
#else
  const D32 d32;
  uint8_t bits[8] = {};
  hn::StoreMaskBits(d32, m, bits);
  return bits[0];
#endif
}

// The low bytes of the 32 slot entries, in lane order.
HWY_INLINE void TokenBytes(const Consts& c, const V32* E, V8* tok) {
  const D32 d32;
  const D8 d8;
#if HWY_TARGET == HWY_AVX2
  (void)d32;
  const __m256i m = c.m255.raw;
  const __m256i a = _mm256_packus_epi32(_mm256_and_si256(E[0].raw, m), _mm256_and_si256(E[1].raw, m));
  const __m256i b = _mm256_packus_epi32(_mm256_and_si256(E[2].raw, m), _mm256_and_si256(E[3].raw, m));
  // Dwords: E0[0-3] E1[0-3] E2[0-3] E3[0-3] | E0[4-7] E1[4-7] E2[4-7] E3[4-7].
  const __m256i p = _mm256_packus_epi16(a, b);
  tok[0] = V8{_mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))};
  (void)d8;
#else
  (void)d32;
  const hn::RebindToSigned<D32> di32;
  const hn::Rebind<uint8_t, D32> d8q;
  HWY_ALIGN uint8_t buf[kLanes];
  for (size_t k = 0; k < kV; ++k)
    hn::StoreU(hn::DemoteTo(d8q, hn::BitCast(di32, hn::And(E[k], c.m255))), d8q, buf + k * kN32);
  for (size_t b = 0; b < kB; ++b) tok[b] = hn::Load(d8, buf + b * kN8);
#endif
}

// Escaped tokens of one step (escm: 32 lane bits): the extra bits in the
// reference's order through the scalar step, then the values, their codes'
// validity and the lanes' context inputs. False: a malformed stream.
template <bool U8, bool KERN>
HWY_NOINLINE bool Escapes(const IntParams& p, uint32_t escm, uint32_t* xs, const uint8_t* ts, uint8_t* vs,
                          uint8_t* as, uint8_t* ls, const uint8_t* wp, uint32_t wn, uint32_t* pos) {
  uint32_t extra[kLanes];
  const uint8_t zero_word[2] = {0, 0};
  WordSource ws{wn ? wp : zero_word, wn, *pos, 0};
  // The escaped lanes in lane order (lowest bit first).
  for (uint32_t m = escm; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    const uint32_t nb = ts[l] - p.esc;
    if (nb > kEscClasses - 1) return false;
    extra[l] = 0;
    if (nb < 2) continue;
    const uint32_t e = nb - 1;
    extra[l] = rans_decode_bits(xs[l], e < 8 ? e : 8);
    rans_renorm(xs[l], ws);
  }
  for (uint32_t m = escm; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    const uint32_t nb = ts[l] - p.esc;
    if (nb < 10) continue;
    extra[l] |= rans_decode_bits(xs[l], nb - 9) << 8;
    rans_renorm(xs[l], ws);
  }
  if (ws.bad) return false;
  *pos = ws.pos;
  for (uint32_t m = escm; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
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
  return true;
}

// The values of one step from its slot entries E: escapes resolved, the
// codes stored at lane-major row t, the left neighbours advanced. act
// (ragged lanes): the lanes that decoded a symbol this step (bytes 0xFF),
// or null for all; the others' tokens are neither escapes nor checked.
template <bool U8, bool KERN>
HWY_INLINE bool StepValues(const IntParams& p, const Consts& c, State& s, const V32* E, uint32_t t, Words& w,
                           uint8_t* lm, const V8* act = nullptr) {
  const D8 d8;
  // zz^-1(u) = (u >> 1) ^ -(u & 1); |value| = (u + 1) >> 1; sign class
  // min(u, 1) + (u & 1).
  V8 tok[kB], V[kB], A1n[kB], LSn[kB];
  TokenBytes(c, E, tok);
  const V8 one = c.one8;
  const hn::Repartition<uint16_t, D8> d16;
  uint32_t escm = 0;
  for (size_t b = 0; b < kB; ++b) {
    const V8 odd = hn::And(tok[b], one);
    const V8 half = hn::And(hn::BitCast(d8, hn::ShiftRight<1>(hn::BitCast(d16, tok[b]))), c.lo7);
    V[b] = hn::Xor(half, hn::Sub(hn::Zero(d8), odd));
    A1n[b] = hn::AverageRound(tok[b], hn::Zero(d8));
    LSn[b] = hn::Add(hn::Min(tok[b], one), odd);
    if constexpr (KERN) LSn[b] = hn::Add(hn::Add(LSn[b], LSn[b]), LSn[b]);
    auto em = hn::Eq(hn::Max(tok[b], c.esc), tok[b]);
    if (act) em = hn::And(em, hn::MaskFromVec(act[b]));
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
        const V8 over = hn::IfThenElse(hn::Eq(odd, one), hn::SaturatedSub(code, c.center),
                                       hn::SaturatedSub(c.center, code));
        s.bad[b] = hn::Or(s.bad[b], hn::IfThenZeroElse(em, act ? hn::And(over, act[b]) : over));
      }
    }
  }
  if (HWY_UNLIKELY(escm != 0)) {
    // Through memory, so that no vector's address is taken on the common
    // path (the loop keeps its state in registers).
    const D32 d32;
    HWY_ALIGN uint32_t xs[kLanes];
    HWY_ALIGN uint8_t ts[kLanes], vs[kLanes], as[kLanes], ls[kLanes];
    for (size_t k = 0; k < kV; ++k) hn::Store(s.X[k], d32, xs + k * kN32);
    for (size_t b = 0; b < kB; ++b) {
      hn::Store(tok[b], d8, ts + b * kN8);
      hn::Store(V[b], d8, vs + b * kN8);
      hn::Store(A1n[b], d8, as + b * kN8);
      hn::Store(LSn[b], d8, ls + b * kN8);
    }
    uint32_t pos = w.pos;
    if (!Escapes<U8, KERN>(p, escm, xs, ts, vs, as, ls, w.p, w.n, &pos)) return false;
    w.pos = pos;
    for (size_t k = 0; k < kV; ++k) s.X[k] = hn::Load(d32, xs + k * kN32);
    for (size_t b = 0; b < kB; ++b) {
      V[b] = hn::Load(d8, vs + b * kN8);
      A1n[b] = hn::Load(d8, as + b * kN8);
      LSn[b] = hn::Load(d8, ls + b * kN8);
    }
  }
  for (size_t b = 0; b < kB; ++b) {
    hn::StoreU(U8 ? hn::Add(V[b], c.center) : V[b], d8, lm + uint64_t{t} * 32 + b * kN8);
    s.A2[b] = s.A1[b];
    s.A1[b] = A1n[b];
    s.LS[b] = LSn[b];
  }
  return true;
}

// NC chunks' word streams opened and lane states loaded (the stream's
// first 32 words); left neighbours and checks cleared.
template <int NC>
HWY_INLINE void Begin(const uint8_t* const* rans, const uint32_t* rans_len, uint8_t (*pad)[hwy_int_detail::kPadBytes],
                      Words* w, State* s) {
  const D32 d32;
  const D8 d8;
  for (int n = 0; n < NC; ++n) {
    hwy_int_detail::words_open(&w[n], rans[n], rans_len[n], pad[n]);
    for (size_t k = 0; k < kV; ++k) s[n].X[k] = hn::BitCast(d32, hn::LoadU(d8, rans[n] + 4 * kN32 * k));
    for (size_t b = 0; b < kB; ++b) s[n].bad[b] = s[n].A1[b] = s[n].A2[b] = s[n].LS[b] = hn::Zero(d8);
  }
}

// Whether NC chunks ended as the reference requires: every stream consumed
// exactly, every lane back in its initial state, no value without a code.
template <int NC>
HWY_INLINE bool Ended(const State* s, const Words* w) {
  const D32 d32;
  const D8 d8;
  for (int n = 0; n < NC; ++n) {
    if (w[n].pos != w[n].n) return false;
    for (size_t k = 0; k < kV; ++k)
      if (!hn::AllTrue(d32, hn::Eq(s[n].X[k], hn::Set(d32, kRansL)))) return false;
    for (size_t b = 0; b < kB; ++b)
      if (!hn::AllTrue(d8, hn::Eq(s[n].bad[b], hn::Zero(d8)))) return false;
  }
  return true;
}

// The slot entries of the 32 lanes of NC chunks, from their context bytes
// ctxb (plus, SC, their scale classes scb times the class's context
// offset): one gather per 8 lanes, all chunks' gathers in flight together.
template <int NC, bool SC, bool E8, bool VG>
HWY_INLINE void GatherSlots(const Consts* c, const State* s, const uint8_t (*ctxb)[kLanes],
                            const uint8_t (*scb)[SC ? kLanes : 1], V32 (*E)[kV]) {
  const D32 d32;
  const hn::RebindToSigned<D32> di32;
  const hn::Rebind<uint8_t, D32> d8q;
  for (int n = 0; n < NC; ++n)
    for (size_t k = 0; k < kV; ++k) {
      V32 cx = hn::PromoteTo(d32, hn::LoadU(d8q, ctxb[n] + k * kN32));
      if constexpr (SC)
        cx = hn::Add(cx, hn::PromoteTo(d32, hn::LoadU(d8q, scb[n] + k * kN32)) * hn::Set(d32, c[n].sc_mul));
      const V32 slot = hn::And(s[n].X[k], c[n].m4095);
      const V32 idx = E8 ? hn::Or(hn::ShiftLeft<9>(cx), hn::ShiftRight<3>(slot)) : hn::Or(hn::ShiftLeft<12>(cx), slot);
      // Entries: the process's form (VG); 12-bit slot tables: the vector
      // gather (chunk_decode_hwy_gather-inl.h says why).
      const hn::Vec<decltype(di32)> ii = hn::BitCast(di32, idx);
      const int32_t* const tab = reinterpret_cast<const int32_t*>(c[n].slots);
      E[n][k] = hn::BitCast(d32, E8 ? GatherI32<VG>(di32, tab, ii) : hn::GatherIndex(di32, tab, ii));
    }
}

// The new states of one chunk's lanes from their slot entries E, then
// renormalization in lane order: the need mask of the 32 lanes gives each
// vector its first word (the stream position plus the count of
// renormalizing lanes below it), and the prefix-count table permutes the
// next 8 words to the lanes that take one. ACT: only the lanes of act
// decode a symbol (ragged lanes); the others keep their state and take no
// word.
template <bool ACT, bool E8>
HWY_INLINE void Advance(const Consts& c, State& s, const V32* E, Words& w, const M32* act) {
  const D32 d32;
  const hn::Rebind<uint16_t, D32> d16h;
  const hn::Repartition<uint8_t, decltype(d16h)> d8h;
  M32 need[kV];
  uint32_t mks[kV];
  for (size_t k = 0; k < kV; ++k) {
    // x' = freq * (x >> 12) + offset with freq = f0 + 1 (the entry holds
    // freq - 1). The offset: slot_all entries hold it; ent8 entries
    // hold (4096 - start) mod 4096, and the offset is (slot + that) mod 4096.
    const V32 q = hn::ShiftRight<12>(s.X[k]);
    const V32 f = hn::Add(hn::And(hn::ShiftRight<8>(E[k]), c.m4095), c.one32);
    const V32 off = E8 ? hn::And(hn::Add(s.X[k], hn::ShiftRight<20>(E[k])), c.m4095) : hn::ShiftRight<20>(E[k]);
    V32 nx = hn::Add(f * q, off);
    if constexpr (ACT) nx = hn::IfThenElse(act[k], nx, s.X[k]);
    s.X[k] = nx;
    need[k] = hn::Eq(hn::ShiftRight<16>(nx), hn::Zero(d32));
    if constexpr (ACT) need[k] = hn::And(act[k], need[k]);
    mks[k] = MaskBits(need[k]);
  }
  uint32_t pos = w.pos;
  for (size_t k = 0; k < kV; ++k) {
    const uint32_t mk = mks[k];
    const V32 words = hn::PromoteTo(d32, hn::BitCast(d16h, hn::LoadU(d8h, w.p + 2 * uint64_t{pos})));
    const V32 wv = hn::TableLookupLanes(words, hn::SetTableIndices(d32, hwy_int_detail::kPrefix.v[mk]));
    s.X[k] = hn::IfThenElse(need[k], hn::Or(hn::ShiftLeft<16>(s.X[k]), wv), s.X[k]);
    pos += static_cast<uint32_t>(__builtin_popcount(mk));
  }
  w.pos = pos;
}

// One step of NC chunks decoded together (one geometry, models that share
// the loop), phase by phase across the chunks so that their gathers are in
// flight together: the 32 lanes' contexts, tokens, renormalization in lane
// order and values of each; the codes go to lane-major row t.
template <int NC, bool U8, bool KERN, bool SC, bool E8, bool VG, bool HT, bool HL, bool HA>
HWY_INLINE bool Step(const IntParams* const* p, const Consts* c, State* s, uint32_t t, uint32_t j, Words* w,
                     uint8_t* const* lm) {
  const D8 d8;
  for (int n = 0; n < NC; ++n)
    if (HWY_UNLIKELY(w[n].pos + hwy_int_detail::kStepWords > w[n].n) && !hwy_int_detail::words_tail(&w[n]))
      return false;
  HWY_ALIGN uint8_t ctxb[NC][kLanes];
  HWY_ALIGN uint8_t scb[NC][SC ? kLanes : 1];
  for (int n = 0; n < NC; ++n)
    for (size_t b = 0; b < kB; ++b) {
      hn::Store(StepCtx<U8, KERN, HT, HL, HA>(c[n], s[n], b, t, j, lm[n]), d8, ctxb[n] + b * kN8);
      if constexpr (SC) hn::Store(ScaleClass(c[n], s[n], b, j), d8, scb[n] + b * kN8);
    }
  // The rANS step: slot entries, new states, renormalization in lane order.
  V32 E[NC][kV];
  GatherSlots<NC, SC, E8, VG>(c, s, ctxb, scb, E);
  for (int n = 0; n < NC; ++n) Advance<false, E8>(c[n], s[n], E[n], w[n], nullptr);
  for (int n = 0; n < NC; ++n)
    if (!StepValues<U8, KERN>(*p[n], c[n], s[n], E[n], t, w[n], lm[n])) return false;
  return true;
}

template <int NC, bool U8, bool KERN, bool SC, bool E8, bool VG, bool HT>
HWY_INLINE bool Row(const IntParams* const* p, const Consts* c, State* s, uint32_t r, Words* w, uint8_t* const* lm) {
  const D8 d8;
  for (int n = 0; n < NC; ++n)
    for (size_t b = 0; b < kB; ++b) {
      s[n].A1[b] = s[n].A2[b] = s[n].LS[b] = hn::Zero(d8);
      if constexpr (SC)
        s[n].RC[b] = c[n].rc_rows ? hn::LoadU(d8, c[n].rc_rows + uint64_t{r} * 32 + b * kN8) : hn::Zero(d8);
    }
  const uint32_t W = c[0].W, oa = c[0].oa, t0 = r * W;
  if (!Step<NC, U8, KERN, SC, E8, VG, HT, false, false>(p, c, s, t0, 0, w, lm)) return false;
  const uint32_t ja = oa ? (oa < W ? oa : W) : W;
  for (uint32_t j = 1; j < ja; ++j)
    if (!Step<NC, U8, KERN, SC, E8, VG, HT, true, false>(p, c, s, t0 + j, j, w, lm)) return false;
  for (uint32_t j = ja; j < W; ++j)
    if (!Step<NC, U8, KERN, SC, E8, VG, HT, true, true>(p, c, s, t0 + j, j, w, lm)) return false;
  return true;
}

// The codes of NC same-rectangle chunks (rows lane rows each) into
// lane-major lm[n]. 1 all decoded, 0 otherwise.
template <int NC, bool U8, bool KERN, bool SC, bool E8, bool VG>
HWY_NOINLINE int Lanes(const IntParams* const* p, const Consts* c, const uint8_t* const* rans,
                       const uint32_t* rans_len, uint32_t rows, uint8_t* const* lm) {
  Words w[NC];
  State s[NC];
  HWY_ALIGN uint8_t pad[NC][hwy_int_detail::kPadBytes];
  Begin<NC>(rans, rans_len, pad, w, s);
  if (!Row<NC, U8, KERN, SC, E8, VG, false>(p, c, s, 0, w, lm)) return 0;
  for (uint32_t r = 1; r < rows; ++r)
    if (!Row<NC, U8, KERN, SC, E8, VG, !KERN>(p, c, s, r, w, lm)) return 0;
  return Ended<NC>(s, w) ? 1 : 0;
}

#include "chunk_decode_hwy_transpose-inl.h"

// Lane-major codes (step t, lane l at t * 32 + l) to raster order: per
// lane row and block of 16 columns, the block's 16 steps transposed
// (Transpose16); each lane's run of 16 codes then goes to its row. NIB:
// 4-bit codes packed two to a byte on the way (code 2i in the low nibble;
// whole blocks before their transpose, TransposePacked), for chunks whose
// runs start on a byte (NibblesAligned); false when a code exceeds 15. lm
// must be readable for 16 steps past the last.
template <bool NIB>
bool ToRaster(const uint8_t* lm, const Geom& g, uint32_t w, uint8_t* out) {
  const D8 d8;
  const hn::Full128<uint8_t> d128;
  V8 high = hn::Zero(d8);
  uint32_t high_tail = 0;
  for (uint32_t r = 0; r < g.rows; ++r) {
    for (uint32_t j0 = 0; j0 < g.W; j0 += 16) {
      const uint32_t len = g.W - j0 < 16 ? g.W - j0 : 16;
      const uint64_t t0 = uint64_t{r} * g.W + j0;
      for (size_t b = 0; b < kB; ++b) {
        if (NIB && len == 16) {
          // Packed before the transpose: each lane's 16 codes are 8 bytes.
          V8 P[8];
          TransposePacked(lm, t0, b, &high, P);
          HWY_ALIGN uint8_t pk[8 * kN8];
          for (int v = 0; v < 8; ++v) hn::Store(P[v], d8, pk + v * kN8);
          for (uint32_t i = 0; i < 16; ++i)
            for (size_t q = 0; q < kN8 / 16; ++q) {
              const uint32_t l = static_cast<uint32_t>(b * kN8 + q * 16 + i);
              const uint64_t at = uint64_t{g.r0[l] + r} * w + g.c0[l] + j0;
              std::memcpy(out + at / 2, pk + PackedVec(i) * kN8 + q * 16 + (i & 1) * 8, 8);
            }
          continue;
        }
        V8 T[16];
        Transpose16(lm, t0, b, T);
        for (int i = 0; i < 16; ++i) {
          for (size_t q = 0; q < kN8 / 16; ++q) {
            const uint32_t l = static_cast<uint32_t>(b * kN8 + q * 16 + i);
            const uint64_t at = uint64_t{g.r0[l] + r} * w + g.c0[l] + j0;
#if HWY_MAX_BYTES == 16
            const hn::Vec<decltype(d128)> x = T[i];
#else
            const hn::Vec<decltype(d128)> x = q == 0 ? hn::LowerHalf(d128, T[i]) : hn::UpperHalf(d128, T[i]);
#endif
            HWY_ALIGN uint8_t tmp[16];
            if (len == 16) {
              hn::StoreU(x, d128, out + at);
            } else if (NIB) {
              hn::Store(x, d128, tmp);
              for (uint32_t k = 0; k < len; k += 2) {
                high_tail |= tmp[k] | tmp[k + 1];
                out[(at + k) / 2] = static_cast<uint8_t>((tmp[k] & 15) | (tmp[k + 1] << 4));
              }
            } else {
              hn::Store(x, d128, tmp);
              std::memcpy(out + at, tmp, len);
            }
          }
        }
      }
    }
  }
  return (high_tail & 0xF0) == 0 && hn::AllTrue(d8, hn::Eq(hn::And(high, hn::Set(d8, 0xF0)), hn::Zero(d8)));
}

// Whether every lane's runs of 4-bit codes start on a byte of the packed
// chunk (ToRaster<true>): even rows, lane widths and first columns.
bool NibblesAligned(const Geom& g, uint32_t w) {
  uint32_t odd = w | g.W;
  for (uint32_t l = 0; l < kLanes; ++l) odd |= g.c0[l];
  return (odd & 1) == 0;
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

// Whether this decoder handles chunks of model m (geometry aside).
bool ModelHandled(const ModelView& m) {
  const IntParams& p = m.ip;
  if (m.kind != ModelKind::kInt || !(m.slot_all || m.ent8) || !m.luts || m.zp) return false;
  if (p.sub != kIntI8 && p.sub != kIntU8 && p.sub != kIntNibble) return false;
  if (m.ent8 && p.sub == kIntI8) return false;  // entries only in the U8 loops
  if ((p.nbr_mode != 0 && p.nbr_mode != 3) || m.n0 < int_nctx(p) || p.esc > 238) return false;
  if (p.ns > 1 && ((p.use_rc && !m.rc) || (p.use_cc && !m.cc))) return false;
  if (p.nbr_mode == 3 && (p.off_a == 0 || p.period == 0)) return false;
  const uint32_t nthr = p.nb > 1 ? p.nb - 1u : 0u;
  if (nthr > 7) return false;
  for (uint32_t i = 0; i < nthr; ++i)
    if (p.thr[i] > 255) return false;
  return true;
}

// Scratch bytes the decode of a chunk of model m needs in lm: the codes
// and the transposition's 16 rows of padding, then the kernel masks and
// the scale classes' side information.
uint64_t ScratchBytes(const IntParams& p, const Geom& g) {
  uint64_t b = (uint64_t{g.rows} * g.W + 16) * 32;
  if (p.nbr_mode == 3) b += uint64_t{g.W} * 64;
  if (p.ns > 1) b += uint64_t{g.W} * 32 + uint64_t{g.rows} * 32;
  return b;
}

// The loop constants of a chunk of model m at tensor row row0, column
// col0; kernel masks and scale side information go to lm after the codes.
void SetConsts(const ModelView& m, const Geom& g, uint64_t row0, uint64_t col0, uint8_t* lm, Consts* c) {
  const D8 d8;
  const IntParams& p = m.ip;
  const uint32_t nthr = p.nb > 1 ? p.nb - 1u : 0u;
  const bool ent8 = m.ent8 != nullptr;
  c->slots = ent8 ? m.ent8 : m.slot_all;
  c->e8 = ent8;
  c->W = g.W;
  c->oa = p.off_a;
  c->nthr = nthr;
  for (uint32_t i = 0; i < 7; ++i) c->thr[i] = hn::Set(d8, static_cast<uint8_t>(i < nthr ? p.thr[i] : 0));
  c->esc = hn::Set(d8, static_cast<uint8_t>(p.esc));
  {
    const D32 d32;
    c->one8 = hn::Set(d8, 1);
    c->lo7 = hn::Set(d8, 0x7F);
    c->one32 = hn::Set(d32, 1u);
    c->m4095 = hn::Set(d32, 4095u);
    c->m255 = hn::Set(d32, 255u);
  }
  c->center = hn::Set(d8, p.center);
  c->u8check = false;
  if (p.sub == kIntU8)
    for (uint32_t u = 0; u < p.esc; ++u) {
      const int32_t v = tile::zz_decode(static_cast<int32_t>(u)) + p.center;
      c->u8check |= v < 0 || v > 255;
    }
  c->kmask = nullptr;
  if (p.nbr_mode == 3) {
    // Per column j of the lane rows, which lanes have their left and their
    // upper kernel neighbour there, after the codes and the
    // transposition's 16 rows of padding.
    uint8_t* km = lm + (uint64_t{g.rows} * g.W + 16) * 32;
    uint32_t nbrs[64], kp[kLanes];
    for (uint32_t k = 0; k < p.period; ++k) nbrs[k] = int_kernel_nbrs(p, k);
    for (uint32_t l = 0; l < kLanes; ++l) kp[l] = static_cast<uint32_t>((col0 + g.c0[l]) % p.period);
    // The masks repeat with the period: one period computed, the rest
    // copied.
    const uint32_t once = g.W < p.period ? g.W : p.period;
    for (uint32_t j = 0; j < once; ++j)
      for (uint32_t l = 0; l < kLanes; ++l) {
        km[j * 64 + l] = nbrs[kp[l]] & 1 ? 0xFF : 0;
        km[j * 64 + 32 + l] = nbrs[kp[l]] & 2 ? 0xFF : 0;
        if (++kp[l] == p.period) kp[l] = 0;
      }
    for (uint32_t j = once; j < g.W; ++j) std::memcpy(km + j * 64, km + (j - p.period) * 64, 64);
    c->kmask = km;
  }
  c->rc_rows = c->ccl = nullptr;
  c->sc_mul = 0;
  if (p.ns > 1) {
    uint8_t* side = lm + (uint64_t{g.rows} * g.W + 16) * 32 + (p.nbr_mode == 3 ? uint64_t{g.W} * 64 : 0);
    HWY_ALIGN uint8_t tab[16];
    for (int q = 0; q < 4; ++q) {
      for (int i = 0; i < 16; ++i) tab[i] = m.luts->scale[16 * q + i];
      c->stab[q] = hn::LoadDup128(d8, tab);
    }
    c->sc_mul = p.nb * (p.nbr_mode == 3 ? 9u : 3u);
    uint8_t* ccl = side;
    for (uint32_t j = 0; j < g.W; ++j)
      for (uint32_t l = 0; l < kLanes; ++l)
        ccl[j * 32 + l] = p.use_cc ? m.cc[col0 + g.c0[l] + j] : 0;
    c->ccl = ccl;
    if (p.use_rc) {
      uint8_t* rcr = side + uint64_t{g.W} * 32;
      for (uint32_t r = 0; r < g.rows; ++r)
        for (uint32_t l = 0; l < kLanes; ++l) rcr[r * 32 + l] = m.rc[row0 + g.r0[l] + r];
      c->rc_rows = rcr;
    }
  }
}

template <int NC>
int LanesFor(const IntParams& p0, const IntParams* const* p, const Consts* c, const uint8_t* const* rans,
             const uint32_t* rans_len, uint32_t rows, uint8_t* const* lm) {
  const bool u8 = p0.sub != kIntI8, kern = p0.nbr_mode == 3;
  if (c[0].e8) {
    // 1/8-slot entries (4-bit codes: the U8 loops; ModelHandled), read in
    // the process's gather form.
#if HWY_TARGET == HWY_AVX2
    if (vector_gathers()) {
      if (p0.ns > 1)
        return kern ? Lanes<NC, true, true, true, true, true>(p, c, rans, rans_len, rows, lm)
                    : Lanes<NC, true, false, true, true, true>(p, c, rans, rans_len, rows, lm);
      return kern ? Lanes<NC, true, true, false, true, true>(p, c, rans, rans_len, rows, lm)
                  : Lanes<NC, true, false, false, true, true>(p, c, rans, rans_len, rows, lm);
    }
#endif
    if (p0.ns > 1)
      return kern ? Lanes<NC, true, true, true, true, false>(p, c, rans, rans_len, rows, lm)
                  : Lanes<NC, true, false, true, true, false>(p, c, rans, rans_len, rows, lm);
    return kern ? Lanes<NC, true, true, false, true, false>(p, c, rans, rans_len, rows, lm)
                : Lanes<NC, true, false, false, true, false>(p, c, rans, rans_len, rows, lm);
  }
  if (p0.ns > 1) {
    if (u8) {
      return kern ? Lanes<NC, true, true, true, false, false>(p, c, rans, rans_len, rows, lm)
                  : Lanes<NC, true, false, true, false, false>(p, c, rans, rans_len, rows, lm);
    }
    return kern ? Lanes<NC, false, true, true, false, false>(p, c, rans, rans_len, rows, lm)
                : Lanes<NC, false, false, true, false, false>(p, c, rans, rans_len, rows, lm);
  }
  if (u8) {
    return kern ? Lanes<NC, true, true, false, false, false>(p, c, rans, rans_len, rows, lm)
                : Lanes<NC, true, false, false, false, false>(p, c, rans, rans_len, rows, lm);
  }
  return kern ? Lanes<NC, false, true, false, false, false>(p, c, rans, rans_len, rows, lm)
              : Lanes<NC, false, false, false, false, false>(p, c, rans, rans_len, rows, lm);
}

// The decoded lane-major codes of a chunk to its bytes. 1, or 0 for a
// 4-bit code above 15.
int Finish(const IntParams& p, const ChunkView& cv, const Geom& g, uint8_t* lm, uint8_t* out) {
  if (p.sub != kIntNibble) return ToRaster<false>(lm, g, cv.w, out) ? 1 : 0;
  if (NibblesAligned(g, cv.w)) return ToRaster<true>(lm, g, cv.w, out) ? 1 : 0;
  // Other 4-bit chunks: raster bytes above the lane-major rows, then packed.
  uint8_t* codes = lm + (((uint64_t{g.rows} * g.W + 16) * 32 + 63) & ~uint64_t{63});
  ToRaster<false>(lm, g, cv.w, codes);
  return PackNibbles(codes, uint64_t{cv.h} * cv.w, out) ? 1 : 0;
}

// ---------------------------------------------------------------- ragged lanes
// Chunks whose 32 lane rectangles differ (widths wa or wa + 1, row counts
// that may differ; the streams split GGUF blocks into have such widths) with
// activity contexts (nbr_mode 0): the same lane-major buffer and step, with
// the geometry per lane. A lane is active while t is below its element
// count (inactive lanes keep their state and take no words); it has a left
// neighbour past its row's first column (J), a top one from its second row
// on (t >= its width; wa or wa + 1 steps back) and its off_a neighbour
// where J >= off_a. Scale classes are looked up per lane and step.
struct RGeom {
  uint32_t steps, wa;
  bool any_wide;
  uint32_t r0[kLanes], c0[kLanes], w[kLanes], h[kLanes], n[kLanes];
};

bool RaggedGeom(const ChunkView& cv, RGeom* g) {
  uint32_t wa = ~0u, wmax = 0;
  g->steps = 0;
  for (uint32_t l = 0; l < kLanes; ++l) {
    const LaneCursor k = lane_cursor(cv.h, cv.w, l);
    g->r0[l] = k.rect.r0;
    g->c0[l] = k.rect.c0;
    g->w[l] = k.rect.w;
    g->h[l] = k.rect.h;
    g->n[l] = k.n;
    if (k.n == 0) continue;
    wa = k.rect.w < wa ? k.rect.w : wa;
    wmax = k.rect.w > wmax ? k.rect.w : wmax;
    g->steps = k.n > g->steps ? k.n : g->steps;
  }
  if (g->steps == 0 || wmax > wa + 1) return false;
  // Lanes without elements never read a neighbour: any width will do.
  for (uint32_t l = 0; l < kLanes; ++l)
    if (g->n[l] == 0) g->w[l] = wa;
  g->wa = wa;
  g->any_wide = wmax > wa;
  return true;
}

// The low bytes of 32 lane masks (one per 32-bit lane), in lane order.
HWY_INLINE void MaskBytes(const Consts& c, const M32* m, V8* out) {
  const D32 d32;
  V32 v[kV];
  for (size_t k = 0; k < kV; ++k) v[k] = hn::VecFromMask(d32, m[k]);
  TokenBytes(c, v, out);
}

template <int NC, bool U8, bool SC, bool E8, bool VG>
HWY_NOINLINE int RaggedLanes(const ModelView* const* m, const Consts* c, const RGeom& g, const uint64_t* row0,
                             const uint64_t* col0, const uint8_t* const* rans, const uint32_t* rans_len,
                             uint8_t* const* lm) {
  const D32 d32;
  const D8 d8;
  // The chunks share the geometry and the loop's form (sub, off_a, scale
  // classes or none); their models, streams and states are their own.
  const IntParams& p0 = m[0]->ip;
  Words w[NC];
  State s[NC];
  HWY_ALIGN uint8_t pad[NC][hwy_int_detail::kPadBytes];
  Begin<NC>(rans, rans_len, pad, w, s);
  V32 J[kV], Wl[kV], N[kV];
  for (size_t k = 0; k < kV; ++k) {
    J[k] = hn::Zero(d32);
    Wl[k] = hn::LoadU(d32, g.w + k * kN32);
    N[k] = hn::LoadU(d32, g.n + k * kN32);
  }
  V8 wide[kB];
  {
    M32 wm[kV];
    for (size_t k = 0; k < kV; ++k) wm[k] = hn::Eq(Wl[k], hn::Set(d32, g.wa + 1));
    MaskBytes(c[0], wm, wide);
  }
  // Scale classes: each lane's column and row, for the lookups.
  uint32_t jl[kLanes] = {}, rl[kLanes] = {};
  const V32 voa = hn::Set(d32, p0.off_a);
  for (uint32_t t = 0; t < g.steps; ++t) {
    for (int n = 0; n < NC; ++n)
      if (HWY_UNLIKELY(w[n].pos + hwy_int_detail::kStepWords > w[n].n) && !hwy_int_detail::words_tail(&w[n]))
        return 0;
    const V32 vt = hn::Set(d32, t);
    M32 act[kV], mm[kV];
    V8 actb[kB], hlb[kB], htb[kB], hab[kB];
    for (size_t k = 0; k < kV; ++k) act[k] = hn::Lt(vt, N[k]);
    MaskBytes(c[0], act, actb);
    for (size_t k = 0; k < kV; ++k) mm[k] = hn::Gt(J[k], hn::Zero(d32));
    MaskBytes(c[0], mm, hlb);
    for (size_t k = 0; k < kV; ++k) mm[k] = hn::Not(hn::Lt(vt, Wl[k]));
    MaskBytes(c[0], mm, htb);
    if (p0.off_a) {
      for (size_t k = 0; k < kV; ++k) mm[k] = hn::Not(hn::Lt(J[k], voa));
      MaskBytes(c[0], mm, hab);
    }
    HWY_ALIGN uint8_t ctxb[NC][kLanes];
    HWY_ALIGN uint8_t scb[NC][SC ? kLanes : 1];
    for (int n = 0; n < NC; ++n) {
      for (size_t b = 0; b < kB; ++b) {
        // A lane at its row's first column has no left neighbours.
        s[n].A1[b] = hn::And(s[n].A1[b], hlb[b]);
        s[n].A2[b] = hn::And(s[n].A2[b], hlb[b]);
        s[n].LS[b] = hn::And(s[n].LS[b], hlb[b]);
        V8 ctx = s[n].LS[b];
        if (c[n].nthr) {
          const size_t ob = b * kN8;
          V8 a = hn::SaturatedAdd(hn::SaturatedAdd(s[n].A1[b], s[n].A1[b]), s[n].A2[b]);
          if (t >= g.wa) {
            V8 top = hn::LoadU(d8, lm[n] + (uint64_t{t} - g.wa) * 32 + ob);
            if (g.any_wide && t > g.wa)
              top = hn::IfThenElse(hn::MaskFromVec(wide[b]), hn::LoadU(d8, lm[n] + (uint64_t{t} - g.wa - 1) * 32 + ob),
                                   top);
            const V8 at = hn::And(AbsCodes<U8>(c[n], top), htb[b]);
            a = hn::SaturatedAdd(a, at);
            // No left neighbour: the top counts three times.
            a = hn::SaturatedAdd(a, hn::IfThenZeroElse(hn::MaskFromVec(hlb[b]), hn::SaturatedAdd(at, at)));
          }
          if (p0.off_a && t >= p0.off_a)
            a = hn::SaturatedAdd(
                a, hn::And(AbsCodes<U8>(c[n], hn::LoadU(d8, lm[n] + (uint64_t{t} - p0.off_a) * 32 + ob)), hab[b]));
          ctx = hn::Add(ActClass(c[n], a, 3), ctx);
        }
        hn::Store(ctx, d8, ctxb[n] + b * kN8);
      }
      if constexpr (SC) {
        const IntParams& p = m[n]->ip;
        for (uint32_t l = 0; l < kLanes; ++l) {
          uint32_t v = 0;
          if (t < g.n[l]) {
            if (p.use_rc) v += m[n]->rc[row0[n] + g.r0[l] + rl[l]];
            if (p.use_cc) v += m[n]->cc[col0[n] + g.c0[l] + jl[l]];
          }
          scb[n][l] = m[n]->luts->scale[v];
        }
      }
    }
    // The rANS step of every chunk, gathers first (their chains overlap).
    V32 E[NC][kV];
    GatherSlots<NC, SC, E8, VG>(c, s, ctxb, scb, E);
    for (int n = 0; n < NC; ++n) Advance<true, E8>(c[n], s[n], E[n], w[n], act);
    for (int n = 0; n < NC; ++n)
      if (!StepValues<U8, false>(m[n]->ip, c[n], s[n], E[n], t, w[n], lm[n], actb)) return 0;
    for (size_t k = 0; k < kV; ++k) {
      const V32 j1 = hn::Add(J[k], c[0].one32);
      J[k] = hn::IfThenZeroElse(hn::Eq(j1, Wl[k]), j1);
    }
    if constexpr (SC)
      for (uint32_t l = 0; l < kLanes; ++l)
        if (++jl[l] == g.w[l]) {
          jl[l] = 0;
          ++rl[l];
        }
  }
  return Ended<NC>(s, w) ? 1 : 0;
}

// Scratch of a ragged chunk in lm: the lane-major codes and the 16 steps
// the transposition reads past the last (lm_bytes), then first SetConsts'
// side tables for one lane row (scale classes), later the raster codes of
// 4-bit chunks: the larger of the two. 0 when lm is too small.
uint64_t RaggedLmBytes(const IntParams& p, const RGeom& g, const ChunkView& cv) {
  const uint64_t n = uint64_t{cv.h} * cv.w;
  const uint64_t lm_bytes = (uint64_t{g.steps} + 16) * 32;
  const uint64_t side = (uint64_t{g.wa} + 16) * 32 + uint64_t{g.wa} * 32 + 32;
  const uint64_t after = 64 + (p.sub == kIntNibble ? n : 0);
  return lm_bytes + (side > after ? side : after) > simd_lane_major_bytes(cv) ? 0 : lm_bytes;
}

// The loop constants of a ragged chunk of model m: SetConsts over one lane
// row of the narrowest width (no kernel masks; its per-column scale side
// tables go after the lane-major rows, unused: RaggedLanes looks the
// classes up itself).
void RaggedConsts(const ModelView& m, const RGeom& g, uint64_t row0, uint64_t col0, uint8_t* lm, uint64_t lm_bytes,
                  Consts* c) {
  Geom sg;
  sg.W = g.wa;
  sg.rows = 1;
  for (uint32_t l = 0; l < kLanes; ++l) sg.r0[l] = sg.c0[l] = 0;
  SetConsts(m, sg, row0, col0, lm + lm_bytes, c);
}

template <int NC>
int RaggedLanesFor(const IntParams& p0, const ModelView* const* m, const Consts* c, const RGeom& g,
                   const uint64_t* row0, const uint64_t* col0, const uint8_t* const* rans, const uint32_t* rans_len,
                   uint8_t* const* lm) {
  if (c[0].e8) {
#if HWY_TARGET == HWY_AVX2
    if (vector_gathers())
      return p0.ns > 1 ? RaggedLanes<NC, true, true, true, true>(m, c, g, row0, col0, rans, rans_len, lm)
                       : RaggedLanes<NC, true, false, true, true>(m, c, g, row0, col0, rans, rans_len, lm);
#endif
    return p0.ns > 1 ? RaggedLanes<NC, true, true, true, false>(m, c, g, row0, col0, rans, rans_len, lm)
                     : RaggedLanes<NC, true, false, true, false>(m, c, g, row0, col0, rans, rans_len, lm);
  }
  if (p0.sub == kIntI8)
    return p0.ns > 1 ? RaggedLanes<NC, false, true, false, false>(m, c, g, row0, col0, rans, rans_len, lm)
                     : RaggedLanes<NC, false, false, false, false>(m, c, g, row0, col0, rans, rans_len, lm);
  return p0.ns > 1 ? RaggedLanes<NC, true, true, false, false>(m, c, g, row0, col0, rans, rans_len, lm)
                   : RaggedLanes<NC, true, false, false, false>(m, c, g, row0, col0, rans, rans_len, lm);
}

// The decoded lane-major codes of a ragged chunk to its bytes: 16 steps at
// a time transposed (Transpose16), each lane's 16 codes then copied as
// runs that break at its row's end; 4-bit codes raster above the lane-major
// rows, then packed. 1, or 0 for a 4-bit code above 15.
int RaggedFinish(const IntParams& p, const ChunkView& cv, const RGeom& g, uint8_t* lm, uint64_t lm_bytes,
                 uint8_t* out) {
  uint8_t* codes = p.sub == kIntNibble ? lm + lm_bytes + 64 : out;
  uint32_t rr[kLanes] = {}, jj[kLanes] = {};
  HWY_ALIGN uint8_t tmp[kLanes][16];
  const hn::Full128<uint8_t> d128;
  for (uint64_t t0 = 0; t0 < g.steps; t0 += 16) {
    for (size_t b = 0; b < kB; ++b) {
      V8 T[16];
      Transpose16(lm, t0, b, T);
      for (int i = 0; i < 16; ++i)
        for (size_t q = 0; q < kN8 / 16; ++q) {
#if HWY_MAX_BYTES == 16
          const hn::Vec<decltype(d128)> x = T[i];
#else
          const hn::Vec<decltype(d128)> x = q == 0 ? hn::LowerHalf(d128, T[i]) : hn::UpperHalf(d128, T[i]);
#endif
          hn::Store(x, d128, tmp[b * kN8 + q * 16 + i]);
        }
    }
    for (uint32_t l = 0; l < kLanes; ++l) {
      if (t0 >= g.n[l]) continue;
      uint32_t left = g.n[l] - t0 < 16 ? static_cast<uint32_t>(g.n[l] - t0) : 16u;
      const uint8_t* src = tmp[l];
      while (left) {
        const uint32_t run = g.w[l] - jj[l] < left ? g.w[l] - jj[l] : left;
        hwy_words::copy_run(codes + uint64_t{g.r0[l] + rr[l]} * cv.w + g.c0[l] + jj[l], src, run);
        src += run;
        left -= run;
        jj[l] += run;
        if (jj[l] == g.w[l]) {
          jj[l] = 0;
          ++rr[l];
        }
      }
    }
  }
  if (p.sub != kIntNibble) return 1;
  return PackNibbles(codes, uint64_t{cv.h} * cv.w, out) ? 1 : 0;
}

// A ragged chunk of model m (nbr_mode 0, no tile map, no zero points):
// decode_int_chunk_hwy's contract.
int RaggedInt(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len, uint8_t* out,
              uint8_t* lm) {
  const IntParams& p = m.ip;
  RGeom g;
  const uint64_t n = uint64_t{cv.h} * cv.w;
  if (p.nbr_mode != 0 || n >= (1ull << 31) || (p.sub == kIntNibble && n % 2) || !RaggedGeom(cv, &g)) return -1;
  const uint64_t lm_bytes = RaggedLmBytes(p, g, cv);
  if (lm_bytes == 0) return -1;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;
  Consts c;
  RaggedConsts(m, g, cv.row0, cv.col0, lm, lm_bytes, &c);
  const ModelView* ms[1] = {&m};
  const uint64_t row0[1] = {cv.row0}, col0[1] = {cv.col0};
  uint8_t* const lms[1] = {lm};
  const int r = RaggedLanesFor<1>(p, ms, &c, g, row0, col0, &rans, &rans_len, lms);
  return r == 1 ? RaggedFinish(p, cv, g, lm, lm_bytes, out) : r;
}

// n (2..3) ragged chunks of one geometry decoded together
// (decode_int_group_hwy's contract).
int RaggedGroup(const ModelView* ms, const ChunkView& cv, const GroupSide* sd, int n) {
  const IntParams& p0 = ms[0].ip;
  RGeom g;
  const uint64_t ne = uint64_t{cv.h} * cv.w;
  if (p0.nbr_mode != 0 || ne >= (1ull << 31) || (p0.sub == kIntNibble && ne % 2) || !RaggedGeom(cv, &g)) return -1;
  const uint64_t lm_bytes = RaggedLmBytes(p0, g, cv);
  if (lm_bytes == 0) return -1;
  for (int i = 0; i < n; ++i)
    if (sd[i].rans_len < 4 * kLanes || (sd[i].rans_len & 1) || sd[i].raw_len) return 0;
  Consts c[3];
  const ModelView* mp[3];
  uint64_t row0[3], col0[3];
  const uint8_t* rans[3];
  uint32_t rans_len[3];
  uint8_t* lms[3];
  for (int i = 0; i < n; ++i) {
    RaggedConsts(ms[i], g, sd[i].row0, sd[i].col0, sd[i].lm, lm_bytes, &c[i]);
    mp[i] = &ms[i];
    row0[i] = sd[i].row0;
    col0[i] = sd[i].col0;
    rans[i] = sd[i].rans;
    rans_len[i] = sd[i].rans_len;
    lms[i] = sd[i].lm;
  }
  const int r = n == 2 ? RaggedLanesFor<2>(p0, mp, c, g, row0, col0, rans, rans_len, lms)
                       : RaggedLanesFor<3>(p0, mp, c, g, row0, col0, rans, rans_len, lms);
  if (r != 1) return r;
  int ok = 1;
  for (int i = 0; i < n; ++i) ok &= RaggedFinish(ms[i].ip, cv, g, sd[i].lm, lm_bytes, sd[i].out);
  return ok;
}

bool GeomHandled(const IntParams& p, const ChunkView& cv, Geom* g) {
  const uint64_t n = uint64_t{cv.h} * cv.w;
  if (n >= (1ull << 31) || (p.sub == kIntNibble && n % 2)) return false;
  return hwy_int_detail::same_rect(cv, g);
}

int DecodeInt(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
              uint32_t rans_len, uint8_t* out, uint8_t* lm) {
  Geom g;
  if (tile_map || !ModelHandled(m)) return -1;
  if (!GeomHandled(m.ip, cv, &g)) return RaggedInt(m, cv, rans, rans_len, out, lm);
  if (ScratchBytes(m.ip, g) > simd_lane_major_bytes(cv)) return -1;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;
  Consts c;
  SetConsts(m, g, cv.row0, cv.col0, lm, &c);
  const IntParams* ps[1] = {&m.ip};
  uint8_t* const lms[1] = {lm};
  const int r = LanesFor<1>(m.ip, ps, &c, &rans, &rans_len, g.rows, lms);
  return r == 1 ? Finish(m.ip, cv, g, lm, out) : r;
}

int DecodeGroup(const ModelView* ms, const ChunkView& cv, const GroupSide* sd, int n) {
  if (n < 2 || n > 3) return -1;
  Geom g;
  const IntParams& p0 = ms[0].ip;
  for (int i = 0; i < n; ++i) {
    const IntParams& p = ms[i].ip;
    // (Scale classes or none in every chunk: SC is a parameter of the loop.)
    if (!ModelHandled(ms[i]) || sd[i].map || p.sub != p0.sub || p.nbr_mode != p0.nbr_mode || p.off_a != p0.off_a ||
        (p.ns > 1) != (p0.ns > 1) || !ms[i].ent8 != !ms[0].ent8)
      return -1;
  }
  if (!GeomHandled(p0, cv, &g)) return RaggedGroup(ms, cv, sd, n);
  if (ScratchBytes(p0, g) > simd_lane_major_bytes(cv)) return -1;
  for (int i = 0; i < n; ++i)
    if (sd[i].rans_len < 4 * kLanes || (sd[i].rans_len & 1) || sd[i].raw_len) return 0;
  Consts c[3];
  const IntParams* ps[3];
  const uint8_t* rans[3];
  uint32_t rans_len[3];
  uint8_t* lms[3];
  for (int i = 0; i < n; ++i) {
    SetConsts(ms[i], g, sd[i].row0, sd[i].col0, sd[i].lm, &c[i]);
    ps[i] = &ms[i].ip;
    rans[i] = sd[i].rans;
    rans_len[i] = sd[i].rans_len;
    lms[i] = sd[i].lm;
  }
  const int r = n == 2 ? LanesFor<2>(p0, ps, c, rans, rans_len, g.rows, lms)
                       : LanesFor<3>(p0, ps, c, rans, rans_len, g.rows, lms);
  if (r != 1) return r;
  int ok = 1;
  for (int i = 0; i < n; ++i) ok &= Finish(ms[i].ip, cv, g, sd[i].lm, sd[i].out);
  return ok;
}
}  // namespace int_hwy
#endif  // HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE

}  // namespace HWY_NAMESPACE
}  // namespace wcodec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy_path_i.h"
namespace wcodec {

int decode_int_chunk_hwy(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
                         uint32_t rans_len, uint8_t* out, uint8_t* lm) {
#if defined(WCODEC_HWY_PATH)
  return WCODEC_HWY_PATH::int_hwy::DecodeInt(m, cv, tile_map, rans, rans_len, out, lm);
#else
  (void)m, (void)cv, (void)tile_map, (void)rans, (void)rans_len, (void)out, (void)lm;
  return -1;
#endif
}

int decode_int_group_hwy(const ModelView* ms, const ChunkView& cv, const GroupSide* sides, int n) {
#if defined(WCODEC_HWY_PATH)
  return WCODEC_HWY_PATH::int_hwy::DecodeGroup(ms, cv, sides, n);
#else
  (void)ms, (void)cv, (void)sides, (void)n;
  return -1;
#endif
}

}  // namespace wcodec
#endif  // HWY_ONCE
