// codec/decompress/chunk_decode_hwy_tern.cpp — the ternary chunk decoder of
// the avx2 and neon decoder paths (include/wcodec/cpu.h): int model sub 3
// (2-bit codes), written with Google Highway: one source, an AVX2 instance
// (x86-64, 8 lanes per vector) and a NEON one (aarch64, 4 lanes).
//
// Why: without VBMI2 a ternary chunk took the scalar reference decoder
// (decode_int_residuals + int_finish_chunk in chunk_decode.h), about 14 MB/s.
//
// Scope: models whose tables code only the tokens 0, 1, 2 (values 0, -1,
// +1; ModelView::tern3 holds each context's two slot bounds), chunks
// without a tile map whose 32 lanes have the same rectangle, and every
// context form ternary models use: nbr_mode 0 (activity classes: with
// ternary neighbours the activity is a function of the neighbours'
// non-zero flags, so the tables are re-indexed by those flags and the left
// digit), nbr_mode 1 (off_b or not), nbr_mode 2 (column phase) and
// nbr_mode 3 (kernel contexts: re-indexed by 9 x scale class + the two
// digits), each with any scale classes. Anything else is declined (-1) and
// decoded by the reference.
//
// Method (the reference's order exactly): the 32 lanes' states are
// kLanes / N vectors processed in lane order, one step (one element of
// every lane) at a time, in phases: the contexts and table entries of all
// vectors, then their tokens and next states, then renormalization in lane
// order. A token is found by comparing the slot with its context's two
// bounds; the entries come from one gather of the table, or, when a step's
// contexts are 9 entries of one table (one scale class; nbr_mode 0 or 3, or
// nbr_mode 2 with every lane at the same column phase), from registers (a
// lane permutation plus a blend). A lane that renormalizes takes the
// stream word at the stream position plus the count of renormalizing lanes
// below it: a prefix-count table indexes a lane permutation of the next N
// words (vpexpandd emulated). Each step's codes (the sign digit q: 0,
// +1 -> 1, -1 -> 2, which is also the 2-bit code) are kept as int32 in a
// ring of steps (step t, lane l at (t mod ring) * 32 + l), so the left,
// upper and periodic neighbours of all lanes are plain vector loads a fixed
// number of steps back. The packed output is built in the lanes: each lane
// gathers up to 16 codes of its row in a 32-bit word and stores it at its
// byte (lanes that start on a byte), or ORs it into the zeroed output at
// its bit position. Every read is bounded: the stream's last words are read
// from a zero-padded copy; a stream that runs short or ends with words
// left, or a lane that does not end in its initial state, is rejected (0),
// as the reference rejects it.
//
// Static dispatch: foreach_target.h compiles the body once per enabled
// Highway target; the entry point calls the AVX2 instance (x86-64) or the
// NEON one (aarch64) explicitly (hwy_path_i.h; the path is chosen by
// cpu_path(), not by Highway's best target).
// Thread-safety: pure functions over their arguments and the caller's
// scratch.
#include <algorithm>
#include <cstdint>
#include <cstring>

// Only the targets a path uses (and the baseline, which foreach_target
// always compiles): x86 AVX2, Arm NEON.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS \
  (HWY_AVX3 | HWY_AVX3_DL | HWY_SSSE3 | HWY_SSE4 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "chunk_decode_hwy_tern.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "chunk_decode_hwy.h"
#include "chunk_decode_hwy_words.h"
#include "chunk_decode_simd.h"
#include "simd_env.h"  // vector_gathers

#ifndef WCODEC_HWY_TERN_ONCE
#define WCODEC_HWY_TERN_ONCE
namespace wcodec {
namespace hwy_tern {

// The word stream (a step reads up to 32 + 8 words past pos).
using hwy_words::Words;
using hwy_words::words_open;
inline bool words_ready(Words* w) { return hwy_words::words_ready(w, 48); }

// What the step loop needs of the model and the chunk (same-rectangle
// lanes: W columns x rows each).
struct TernSetup {
  uint32_t W, rows, w;
  uint32_t oa, ob, period;
  const uint32_t* tab;  // context -> s1 | s2 << 16
  bool use_rc, use_cc;
  const uint8_t* rc;    // row classes from the chunk's first row
  const uint8_t* ccl;   // lane-major column classes [j * 32 + l] (use_cc)
  int32_t scb[64];      // scale value rc + cc -> context base of its class
  uint32_t r0[kLanes];  // lane rectangle's first row
  uint64_t base[kLanes];  // chunk raster position of the lane's first element
  // Periodic per-lane columns (period steps, [jj * 32 + l]): nbr_mode 2:
  // 9 x column phase; nbr_mode 3: -1 where the kernel has a left (pa) / an
  // upper (pb) neighbour, else 0.
  alignas(32) int32_t pa[64 * kLanes];
  alignas(32) int32_t pb[64 * kLanes];
  // Re-indexed tables: nbr_mode 3: 9 per scale class; nbr_mode 0 with
  // activity classes: 32 per scale class (act0).
  alignas(32) uint32_t tab3[16 * 32];
  bool act0;
  // One scale class, and nbr_mode 0 or 3 or every lane at the same column
  // phase (nbr_mode 2): the contexts of a step are 9 entries (from
  // tab + 9 x lut_phase[jj] in nbr_mode 2), looked up in registers.
  bool lut;
  uint8_t lut_phase[64];
  uint64_t ring;  // steps of codes kept (a power of two)
  bool aligned;   // every lane's first element starts a byte (W and base[] multiples of 4)
};

}  // namespace hwy_tern
}  // namespace wcodec
#endif  // WCODEC_HWY_TERN_ONCE

HWY_BEFORE_NAMESPACE();
namespace wcodec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#include "chunk_decode_hwy_gather-inl.h"

#include "chunk_decode_hwy_lanes-inl.h"
using hwy_tern::TernSetup;
using hwy_tern::Words;

template <class V>
HWY_INLINE V Times3(V v) {
  return hn::Add(v, hn::Add(v, v));
}

// Bytes (N lanes from p) as int32.
template <class D>
HWY_INLINE hn::Vec<D> LoadBytes(D d, const uint8_t* p) {
  const hn::Rebind<uint8_t, D> d8;
  return hn::PromoteTo(d, hn::LoadU(d8, p));
}

// Decodes every lane's codes into lm (lane-major) and ORs the packed codes
// into out (zeroed, out_len bytes). MODE: nbr_mode; SCALE: ns > 1.
template <int MODE, bool SCALE, bool LUT, bool VG>
bool TernLanes(const TernSetup& s, const uint8_t* rans, uint32_t rans_len, uint8_t* lm, uint8_t* out,
               uint64_t out_len) {
  const hn::ScalableTag<int32_t> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  constexpr size_t N = hn::MaxLanes(d);
  static_assert(N <= 8 && kLanes % N == 0, "lane vectors of at most 8 lanes");
  constexpr size_t V = kLanes / N;
  using VI = hn::Vec<decltype(d)>;
  using VU = hn::Vec<decltype(du)>;

  Words ws;
  hwy_tern::words_open(&ws, rans, rans_len);
  VU X[V];
  LoadLaneStates(du, rans, X);
  const uint32_t W = s.W, oa = s.oa, ob = s.ob, period = s.period;
  const int32_t* tab = reinterpret_cast<const int32_t*>(s.tab);
  const VU m4095 = hn::Set(du, 4095u), m1fff = hn::Set(du, 0x1FFFu), mffff = hn::Set(du, 0xFFFFu);
  const VU v4096 = hn::Set(du, 4096u);
  const VI one = hn::Set(d, 1);
  [[maybe_unused]] const VI v7 = hn::Set(d, 7), v8 = hn::Set(d, 8);
  // The codes of the last s.ring steps, int32 (step t at t & rmask).
  int32_t* ring = reinterpret_cast<int32_t*>(lm);
  const uint64_t rmask = s.ring - 1;
  HWY_ALIGN int32_t rowpart[kLanes] = {};
  HWY_ALIGN uint32_t acc_out[kLanes];
  for (uint32_t r = 0; r < s.rows; ++r) {
    VI D1[V], D2[V], ACC[V], RP[V];
    for (size_t v = 0; v < V; ++v) D1[v] = D2[v] = ACC[v] = hn::Zero(d);
    if constexpr (SCALE) {
      if (s.use_rc)
        for (uint32_t l = 0; l < kLanes; ++l) rowpart[l] = s.rc[s.r0[l] + r];
      for (size_t v = 0; v < V; ++v) RP[v] = hn::Load(d, rowpart + v * N);
    }
    const uint64_t t0 = uint64_t{r} * W;
    uint32_t jj = 0;  // column phase index (nbr_modes 2, 3)
    for (uint32_t j = 0; j < W; ++j) {
      if (HWY_UNLIKELY(!hwy_tern::words_ready(&ws))) return false;
      const uint8_t* wp = ws.p + 2 * uint64_t{ws.pos - ws.off};
      const uint64_t t = t0 + j;
      int32_t* row = ring + (t & rmask) * kLanes;
      auto back = [&](uint32_t k, size_t v) { return hn::LoadU(d, ring + ((t - k) & rmask) * kLanes + v * N); };
      const bool ha = j >= oa;
      [[maybe_unused]] VU T8, T9;
      if constexpr (LUT) {
        const uint32_t* tp = s.tab + (MODE == 2 ? 9 * s.lut_phase[jj] : 0);
        T8 = hn::LoadU(du, tp);
        T9 = hn::Set(du, tp[8]);
      }
      // Phase 1: contexts and table entries of every vector.
      VU E[V];
#pragma GCC unroll 8
      for (size_t v = 0; v < V; ++v) {
        VI ctx;
        if constexpr (MODE == 0) {
          ctx = D1[v];
          if (s.act0) {
            // Activity 2|L1| + |T| + |L2| + |La| from the digits' non-zero
            // flags (q + 1) >> 1: index q(L1) + 3 (nzT + 2 nzL2 + 4 nzLa),
            // or 24 + nzT in a row's first column.
            VI nz = r ? hn::ShiftRight<1>(hn::Add(back(W, v), one)) : hn::Zero(d);
            if (j) {
              nz = hn::Add(nz, hn::ShiftLeft<1>(hn::ShiftRight<1>(hn::Add(D2[v], one))));
              if (oa && ha) nz = hn::Add(nz, hn::ShiftLeft<2>(hn::ShiftRight<1>(hn::Add(back(oa, v), one))));
              ctx = hn::Add(ctx, Times3(nz));
            } else {
              ctx = hn::Add(nz, hn::Set(d, 24));
            }
          }
        } else if constexpr (MODE == 1) {
          VI k = hn::Add(Times3(D1[v]), D2[v]);
          k = Times3(k);
          if (ha) k = hn::Add(k, back(oa, v));
          k = Times3(k);
          if (r) k = hn::Add(k, back(W, v));
          if (ob) {
            k = Times3(k);
            if (j >= ob) k = hn::Add(k, back(ob, v));
          }
          ctx = k;
        } else if constexpr (MODE == 2) {
          ctx = Times3(D1[v]);
          if constexpr (!LUT) ctx = hn::Add(ctx, hn::Load(d, s.pa + jj * kLanes + v * N));
          if (ha) ctx = hn::Add(ctx, back(oa, v));
        } else {
          ctx = Times3(hn::And(D1[v], hn::Load(d, s.pa + jj * kLanes + v * N)));
          if (ha)
            ctx = hn::Add(ctx, hn::And(back(oa, v),
                                       hn::Load(d, s.pb + jj * kLanes + v * N)));
        }
        if constexpr (SCALE) {
          VI sv = RP[v];
          if (s.use_cc) sv = hn::Add(sv, LoadBytes(d, s.ccl + uint64_t{j} * kLanes + v * N));
          ctx = hn::Add(ctx, GatherI32<VG>(d, s.scb, sv));
        }
        if constexpr (LUT) {
          // ctx 0..8: entries 0..7 by a lane permutation, entry 8 by a blend.
          E[v] = hn::IfThenElse(hn::RebindMask(du, hn::Eq(ctx, v8)), T9,
                                hn::TableLookupLanes(T8, hn::IndicesFromVec(du, hn::And(ctx, v7))));
        } else {
          E[v] = hn::BitCast(du, GatherI32<VG>(d, tab, ctx));
        }
      }
      // Phase 2: tokens and next states. lt1: token 0 (slot < s1); lt2:
      // token 0 or 1 (slot < s2). Bounds and slots are below 2^14: signed
      // compares.
      VU NX[V];
      VI CODE[V];
#pragma GCC unroll 8
      for (size_t v = 0; v < V; ++v) {
        const VU e = E[v];
        const VU s1 = hn::And(e, mffff), s2 = hn::ShiftRight<16>(e);
        const VU x = X[v];
        const VU slot = hn::And(x, m4095);
        const auto lt1 = hn::Lt(hn::BitCast(d, slot), hn::BitCast(d, s1));
        const auto lt2 = hn::Lt(hn::BitCast(d, slot), hn::BitCast(d, s2));
        const auto l1 = hn::RebindMask(du, lt1), l2 = hn::RebindMask(du, lt2);
        // An unused table (s1 = s2 = 0x2000) decodes token 0 with frequency
        // 0 and start 0, as the reference does with its all-zero table.
        const VU f = hn::IfThenElse(l1, hn::And(s1, m1fff), hn::IfThenElse(l2, hn::Sub(s2, s1), hn::Sub(v4096, s2)));
        const VU st = hn::IfThenElseZero(hn::Not(l1), hn::IfThenElse(l2, s1, s2));
        NX[v] = hn::Add((f * hn::ShiftRight<12>(x)), hn::Sub(slot, st));
        // token 0 -> code 0, token 1 (-1) -> code 2, token 2 (+1) -> code 1:
        // 1 + 2 lt1 - lt2 with the masks as 0 / -1.
        const VI m1 = hn::VecFromMask(d, lt1), m2 = hn::VecFromMask(d, lt2);
        CODE[v] = hn::Sub(hn::Add(one, hn::Add(m1, m1)), m2);
      }
      // Phase 3: renormalization in lane order.
#pragma GCC unroll 8
      for (size_t v = 0; v < V; ++v) {
        const VU nx = NX[v];
        X[v] = RenormLanes(du, hn::Eq(hn::ShiftRight<16>(nx), hn::Zero(du)), nx, &wp);
      }
#pragma GCC unroll 8
      for (size_t v = 0; v < V; ++v) {
        const VI code = CODE[v];
        hn::StoreU(code, d, row + v * N);
        ACC[v] = hn::Or(ACC[v], hn::ShiftLeftSame(code, static_cast<int>(2 * (j & 15))));
        if constexpr (MODE <= 1) D2[v] = D1[v];
        D1[v] = code;
      }
      ws.pos = static_cast<uint32_t>((wp - ws.p) / 2) + ws.off;
      if constexpr (MODE >= 2) jj = jj + 1 == period ? 0 : jj + 1;
      if ((j & 15) == 15 || j + 1 == W) {
        // Each lane's codes j0..j of row r into the output.
        for (size_t v = 0; v < V; ++v) {
          hn::Store(hn::BitCast(du, ACC[v]), du, acc_out + v * N);
          ACC[v] = hn::Zero(d);
        }
        const uint64_t rel = uint64_t{r} * s.w + (j & ~15u);
        if (s.aligned) {
          // Every lane's run starts on a byte: whole bytes, each written once.
          uint8_t* o = out + rel / 4;
          const uint32_t nb = ((j & 15) + 1) / 4;
          if (HWY_LIKELY(nb == 4)) {
            for (uint32_t l = 0; l < kLanes; ++l) std::memcpy(o + s.base[l] / 4, acc_out + l, 4);
          } else {
            for (uint32_t l = 0; l < kLanes; ++l)
              for (uint32_t i = 0; i < nb; ++i) o[s.base[l] / 4 + i] = static_cast<uint8_t>(acc_out[l] >> (8 * i));
          }
          continue;
        }
        for (uint32_t l = 0; l < kLanes; ++l) {
          const uint64_t p = s.base[l] + rel;
          const uint64_t byte = p >> 2;
          const uint64_t val = uint64_t{acc_out[l]} << (2 * (p & 3));
          if (HWY_LIKELY(byte + 8 <= out_len)) {
            uint64_t cur;
            std::memcpy(&cur, out + byte, 8);
            cur |= val;
            std::memcpy(out + byte, &cur, 8);
          } else {
            for (uint64_t i = 0; byte + i < out_len; ++i) out[byte + i] |= static_cast<uint8_t>(val >> (8 * i));
          }
        }
      }
    }
  }
  if (ws.pos != ws.n) return false;
  for (size_t v = 0; v < V; ++v)
    if (!hn::AllTrue(du, hn::Eq(X[v], hn::Set(du, kRansL)))) return false;
  return true;
}

template <bool VG>
bool TernDecodeForm(int mode, bool scale, bool lut, const TernSetup& s, const uint8_t* rans, uint32_t rans_len,
                    uint8_t* lm, uint8_t* out, uint64_t out_len) {
  // The register lookup needs 8 lanes a vector.
  lut = lut && hn::MaxLanes(hn::ScalableTag<int32_t>()) == 8;
  switch (mode * 2 + (scale ? 1 : 0)) {
    case 0:
      return lut ? TernLanes<0, false, true, VG>(s, rans, rans_len, lm, out, out_len)
                 : TernLanes<0, false, false, VG>(s, rans, rans_len, lm, out, out_len);
    case 1: return TernLanes<0, true, false, VG>(s, rans, rans_len, lm, out, out_len);
    case 2: return TernLanes<1, false, false, VG>(s, rans, rans_len, lm, out, out_len);
    case 3: return TernLanes<1, true, false, VG>(s, rans, rans_len, lm, out, out_len);
    case 4:
      return lut ? TernLanes<2, false, true, VG>(s, rans, rans_len, lm, out, out_len)
                 : TernLanes<2, false, false, VG>(s, rans, rans_len, lm, out, out_len);
    case 5: return TernLanes<2, true, false, VG>(s, rans, rans_len, lm, out, out_len);
    case 6:
      return lut ? TernLanes<3, false, true, VG>(s, rans, rans_len, lm, out, out_len)
                 : TernLanes<3, false, false, VG>(s, rans, rans_len, lm, out, out_len);
    default: return TernLanes<3, true, false, VG>(s, rans, rans_len, lm, out, out_len);
  }
}

// vg: vpgatherdd for the table gathers (the AVX2 instance only).
bool TernDecode(int mode, bool scale, bool lut, bool vg, const TernSetup& s, const uint8_t* rans, uint32_t rans_len,
                uint8_t* lm, uint8_t* out, uint64_t out_len) {
#if HWY_TARGET == HWY_AVX2
  if (vg) return TernDecodeForm<true>(mode, scale, lut, s, rans, rans_len, lm, out, out_len);
#endif
  (void)vg;
  return TernDecodeForm<false>(mode, scale, lut, s, rans, rans_len, lm, out, out_len);
}

}  // namespace HWY_NAMESPACE
}  // namespace wcodec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy_path_i.h"
namespace wcodec {

int decode_tern_chunk_hwy(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
                          uint32_t rans_len, uint8_t* out, uint8_t* lm) {
#if defined(WCODEC_HWY_PATH)
  const IntParams& p = m.ip;
  if (m.kind != ModelKind::kInt || p.sub != kIntTernary || tile_map || !m.tern3 || !m.luts) return -1;
  if (p.nbr_mode > 3 || p.nb < 1 || p.nb > 8) return -1;
  if (p.ns < 1 || p.ns > 16 || m.n0 < int_nctx(p)) return -1;
  if ((p.use_rc && !m.rc) || (p.use_cc && !m.cc)) return -1;
  if (p.nbr_mode >= 2 && (p.period < 2 || p.period > 64)) return -1;
  if (p.nbr_mode == 3 && (p.off_a < 1 || p.nb < 1 || p.nb > 8)) return -1;
  if ((p.nbr_mode == 1 || p.nbr_mode == 2) && p.off_a < 3) return -1;
  const uint64_t nel = uint64_t{cv.h} * cv.w;
  if (nel == 0 || nel >= (1ull << 31) || cv.w % 4) return -1;
  // Same-rectangle lanes only.
  hwy_tern::TernSetup s;
  LaneCursor cur[kLanes];
  init_cursors(cv.h, cv.w, cur);
  for (uint32_t l = 0; l < kLanes; ++l)
    if (cur[l].n == 0 || cur[l].n != cur[0].n || cur[l].rect.w != cur[0].rect.w) return -1;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;
  s.W = cur[0].rect.w;
  s.rows = cur[0].rect.h;
  s.w = cv.w;
  s.oa = p.nbr_mode == 0 && p.nb == 1 ? 0 : p.off_a;  // one activity class: no La
  s.ob = p.nbr_mode == 1 ? p.off_b : 0;
  s.period = p.nbr_mode >= 2 ? p.period : 1;
  for (uint32_t l = 0; l < kLanes; ++l) {
    s.r0[l] = cur[l].rect.r0;
    s.base[l] = uint64_t{cur[l].rect.r0} * cv.w + cur[l].rect.c0;
  }
  const bool scale = p.ns > 1;
  s.use_rc = scale && p.use_rc;
  s.use_cc = scale && p.use_cc;
  s.rc = s.use_rc ? m.rc + cv.row0 : nullptr;
  s.ccl = nullptr;
  const uint64_t steps = uint64_t{s.rows} * s.W;
  // The codes of the steps the contexts look back at (up to W, off_a,
  // off_b), int32 in a ring of a power of two steps, or of every step when
  // that is as many (lm holds 4 bytes per element).
  {
    const uint32_t back = p.nbr_mode <= 1 ? std::max<uint32_t>(s.W, std::max<uint32_t>(s.oa, s.ob)) : s.oa;
    uint64_t ring = 64;
    while (ring < uint64_t{back} + 1) ring *= 2;
    s.ring = ring < steps ? ring : uint64_t{1} << 62;  // no wrap: every step kept
  }
  if (s.use_cc) {
    // After the codes.
    uint8_t* ccl = lm + std::min<uint64_t>(s.ring, steps) * kLanes * 4;
    for (uint32_t j = 0; j < s.W; ++j)
      for (uint32_t l = 0; l < kLanes; ++l) ccl[j * kLanes + l] = m.cc[cv.col0 + cur[l].rect.c0 + j];
    s.ccl = ccl;
  }
  // Context base of each scale class.
  s.act0 = p.nbr_mode == 0 && p.nb > 1;
  const uint32_t per_class = p.nbr_mode == 0   ? (s.act0 ? 32u : 3u)
                             : p.nbr_mode == 1 ? (p.off_b ? 243u : 81u)
                             : p.nbr_mode == 2 ? 9u * p.period
                                               : 9u;
  for (uint32_t sv = 0; sv < 64; ++sv) s.scb[sv] = static_cast<int32_t>(per_class * m.luts->scale[sv]);
  s.tab = m.tern3;
  if (p.nbr_mode >= 2) {
    uint32_t kp[kLanes];
    for (uint32_t l = 0; l < kLanes; ++l) kp[l] = (cv.col0 + cur[l].rect.c0) % p.period;
    for (uint32_t jj = 0; jj < p.period; ++jj)
      for (uint32_t l = 0; l < kLanes; ++l) {
        const uint32_t k = (kp[l] + jj) % p.period;
        if (p.nbr_mode == 2) {
          s.pa[jj * kLanes + l] = static_cast<int32_t>(9 * k);
        } else {
          const uint32_t nb = int_kernel_nbrs(p, k);
          s.pa[jj * kLanes + l] = nb & 1 ? -1 : 0;
          s.pb[jj * kLanes + l] = nb & 2 ? -1 : 0;
        }
      }
  }
  s.lut = !scale && ((p.nbr_mode == 0 && !s.act0) || p.nbr_mode == 3);
  if (s.act0) {
    // Context 3 x (nb x sc + act) + q(L1), the activity a function of the
    // digits' non-zero flags (and of the first column: a = 3 |T| there).
    for (uint32_t sc = 0; sc < p.ns; ++sc)
      for (uint32_t i = 0; i < 32; ++i) {
        uint32_t a = 0, ql = 0;
        if (i < 24) {
          ql = i % 3;
          a = 2 * (ql != 0) + ((i / 3) & 1) + ((i / 6) & 1) + ((i / 12) & 1);
        } else {
          a = 3 * ((i - 24) & 1);
        }
        s.tab3[32 * sc + i] = i < 26 ? m.tern3[3 * (p.nb * sc + m.luts->act[a]) + ql] : 0;
      }
    s.tab = s.tab3;
  }
  if (p.nbr_mode == 0 && !scale && !s.act0) {
    // One activity class: 3 contexts, read as 9 (with several, the
    // activity table above stays).
    for (uint32_t i = 0; i < 16; ++i) s.tab3[i] = i < 3 ? m.tern3[i] : 0;
    s.tab = s.tab3;
  }
  if (p.nbr_mode == 2 && !scale) {
    uint32_t kp0 = (cv.col0 + cur[0].rect.c0) % p.period;
    bool same = true;
    for (uint32_t l = 1; l < kLanes; ++l) same &= (cv.col0 + cur[l].rect.c0) % p.period == kp0;
    s.lut = same;
    for (uint32_t jj = 0; jj < p.period; ++jj) s.lut_phase[jj] = static_cast<uint8_t>((kp0 + jj) % p.period);
  }
  if (p.nbr_mode == 3) {
    // Context 9 x (nb x sc + act) + 3 q(Lk) + q(Uk), act a function of the
    // digits (|Lk| + |Uk|) -> index 9 x sc + 3 q(Lk) + q(Uk).
    for (uint32_t sc = 0; sc < p.ns; ++sc)
      for (uint32_t ql = 0; ql < 3; ++ql)
        for (uint32_t qu = 0; qu < 3; ++qu) {
          const uint32_t a = (ql != 0) + (qu != 0);
          s.tab3[9 * sc + 3 * ql + qu] = m.tern3[9 * (p.nb * sc + m.luts->act[a]) + 3 * ql + qu];
        }
    s.tab = s.tab3;
  }
  const uint64_t out_len = nel / 4;
  s.aligned = s.W % 4 == 0;
  for (uint32_t l = 0; l < kLanes; ++l) s.aligned &= s.base[l] % 4 == 0;
  if (!s.aligned) std::memset(out, 0, out_len);  // the lanes OR their codes in
  return WCODEC_HWY_PATH::TernDecode(p.nbr_mode, scale, s.lut, vector_gathers(), s, rans, rans_len, lm, out,
                                     out_len)
             ? 1
             : 0;
#else
  (void)m, (void)cv, (void)tile_map, (void)rans, (void)rans_len, (void)out, (void)lm;
  return -1;
#endif
}

}  // namespace wcodec
#endif  // HWY_ONCE
