// codec/decompress/chunk_decode_hwy_krow.cpp — the kernel-row chunk decoder
// (int nbr_mode 4, format 2.10; chunk_model.h) of the vector decoder paths,
// written with Google Highway: an AVX2 instance (x86-64, 8 lanes per vector;
// the avx2 and avx512 paths) and a NEON one (aarch64, 4 lanes).
//
// Method (the reference's order exactly, decode_kern_rows_g): the 32 lanes'
// states are kLanes / N vectors; a step decodes three symbol groups (the
// rows of the lanes' kernels), each in two phases: every vector's context
// (the previous row's symbol, a register), slot, table entry and next
// state; then renormalization in lane order (a prefix-count table indexes a
// lane permutation of the next N words, as in the other Highway decoders).
// The entry is one gather from ModelView::krow_ent (the row's three 2-bit
// codes, frequency and start per 8 slots; the codes also index the next
// row's context), or, for models without it, two: the symbol from the
// context's 4 KiB slot table, then its frequency and start, the codes being
// the symbol's base-3 digits (d0 | d1 << 2 | d2 << 4 = symbol + d1 + 7 d2,
// digits by multiply-shift). A kernel's 18 bits go to bit 18 l of the
// step's 72 output bytes. A lone chunk waits on its gathers' latency: 2 or 3
// chunks of one size decode together with their state chains interleaved
// (decode_krow_group_hwy). Every read is bounded (the stream's last words
// come from a zero-padded copy); a stream that runs short or ends with
// words left, or a lane not back at its initial state, is rejected (0)
// where the reference rejects it.
//
// Static dispatch as in the other Highway decoders (hwy_path_i.h).
// Thread-safety: pure functions over their arguments.
#include <cstdint>
#include <cstring>

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS \
  (HWY_AVX3 | HWY_AVX3_DL | HWY_SSSE3 | HWY_SSE4 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "chunk_decode_hwy_krow.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "chunk_decode_hwy_words.h"
#include "chunk_decode_krow.h"
#include "chunk_decode_simd.h"
#include "simd_env.h"  // vector_gathers

#ifndef WCODEC_HWY_KROW_ONCE
#define WCODEC_HWY_KROW_ONCE
namespace wcodec {
namespace hwy_krow {

// What the step loop needs of the model and the chunk.
struct KrowSetup {
  uint64_t nk;       // kernels in the chunk
  uint64_t out_len;  // output bytes
  uint32_t kpr;      // kernels per chunk row
  const uint8_t* lut;    // ModelView::sym_small
  const int32_t* fs;     // ModelView::fs_small
  const int32_t* ent;    // ModelView::krow_ent, or null
  const uint8_t* rc;     // row classes from the chunk's first row, or null
  const uint8_t* scale;  // row class -> scale class
};

}  // namespace hwy_krow
}  // namespace wcodec
#endif

HWY_BEFORE_NAMESPACE();
namespace wcodec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#include "chunk_decode_hwy_gather-inl.h"

#include "chunk_decode_hwy_lanes-inl.h"

// NC chunks of one size (h, w) decoded together. ENT: s[c].ent (one gather
// a symbol); else the two-gather form. VG: the entry gathers' form
// (chunk_decode_hwy_gather-inl.h). False: some chunk is malformed.
template <bool ENT, size_t NC, bool VG>
bool KrowLanes(const hwy_krow::KrowSetup* s, const uint8_t* const* rans, const uint32_t* rans_len,
               uint8_t* const* out) {
  const hn::ScalableTag<int32_t> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  constexpr size_t N = hn::MaxLanes(d);
  static_assert(N <= 8 && kLanes % N == 0, "lane vectors of at most 8 lanes");
  constexpr size_t V = kLanes / N;
  using VI = hn::Vec<decltype(d)>;
  using VU = hn::Vec<decltype(du)>;

  hwy_words::Words ws[NC];
  VU X[NC][V];
  for (size_t c = 0; c < NC; ++c) {
    hwy_words::words_open(&ws[c], rans[c], rans_len[c]);
    LoadLaneStates(du, rans[c], X[c]);
  }
  const VU m4095 = hn::Set(du, 4095u), mffff = hn::Set(du, 0xFFFFu), mff = hn::Set(du, 0xFFu);
  const VU m63 = hn::Set(du, 63u), m1fff = hn::Set(du, 0x1FFFu);
  const VI v57 = hn::Set(d, 57), v11 = hn::Set(d, 11), v9 = hn::Set(d, 9), v7 = hn::Set(d, 7);
  const uint64_t nk = s[0].nk;
  const uint32_t steps = kern_rows_lane_n(nk, 0);
  // Lane l's kernel at the current step: chunk row krow[l], kernel column
  // kcol[l] (scale classes only); base: its context offset.
  HWY_ALIGN int32_t base[kLanes] = {};
  uint32_t krow[kLanes], kcol[kLanes];
  for (uint32_t l = 0; l < kLanes; ++l) {
    krow[l] = l / s[0].kpr;
    kcol[l] = l % s[0].kpr;
  }
  bool rows = false;  // some chunk has row classes
  for (size_t c = 0; c < NC; ++c) rows |= s[c].rc != nullptr;
  HWY_ALIGN uint32_t bits_out[kLanes];
  VI BASE[NC][V];
  for (size_t c = 0; c < NC; ++c)
    for (size_t v = 0; v < V; ++v) BASE[c][v] = hn::Zero(d);
  // Context offsets of rows 0, 1, 2 within a scale class (ENT: the entry
  // table's layout, 64 contexts a row, krow_ent).
  const int32_t row_off[3] = {0, 1, static_cast<int32_t>(1 + (ENT ? 64u : kKernRowSyms))};
  const int32_t per_class = static_cast<int32_t>(ENT ? kKrowEntCtx : kKernRowCtx);
  VU ACT[V];
  for (size_t v = 0; v < V; ++v) ACT[v] = hn::Set(du, ~0u);
  for (uint32_t t = 0; t < steps; ++t) {
    const uint64_t first = uint64_t{t} * kLanes;
    const uint32_t act = nk - first >= kLanes ? kLanes : static_cast<uint32_t>(nk - first);
    if (rows) {
      for (size_t c = 0; c < NC; ++c) {
        if (!s[c].rc) continue;
        for (uint32_t l = 0; l < kLanes; ++l)
          base[l] = l < act ? static_cast<int32_t>(s[c].scale[s[c].rc[krow[l]]]) * per_class : 0;
        for (size_t v = 0; v < V; ++v) BASE[c][v] = hn::Load(d, base + v * N);
      }
      for (uint32_t l = 0; l < kLanes; ++l) {
        kcol[l] += kLanes;
        while (kcol[l] >= s[0].kpr) {
          kcol[l] -= s[0].kpr;
          ++krow[l];
        }
      }
    }
    // A partial last step: the lanes below act decode; the others keep
    // their states and take no words.
    if (act < kLanes) {
      for (size_t v = 0; v < V; ++v) {
        HWY_ALIGN uint32_t a[N];
        for (size_t i = 0; i < N; ++i) a[i] = v * N + i < act ? ~0u : 0u;
        ACT[v] = hn::Load(du, a);
      }
    }
    VI ABOVE[NC][V], BITS[NC][V];
    for (uint32_t j = 0; j < 3; ++j) {
      const uint8_t* wp[NC];  // the next word of each chunk
      for (size_t c = 0; c < NC; ++c) {
        if (HWY_UNLIKELY(!hwy_words::words_ready(&ws[c], 2 * kLanes))) return false;
        wp[c] = ws[c].p + 2 * uint64_t{ws[c].pos - ws[c].off};
      }
      const VI roff = hn::Set(d, row_off[j]);
      VU NX[NC][V];
#pragma GCC unroll 24
      for (size_t cv = 0; cv < NC * V; ++cv) {
        const size_t c = cv / V, v = cv % V;
        VI ctx = BASE[c][v];
        if (j) ctx = hn::Add(ctx, hn::Add(ABOVE[c][v], roff));
        const VU x = X[c][v];
        const VU slot = hn::And(x, m4095);
        if constexpr (ENT) {
          // One gather: codes | freq << 6 | start << 19; the codes (6 bits)
          // also index the next row's context.
          const VI idx = hn::Add(hn::ShiftLeft<9>(ctx), hn::BitCast(d, hn::ShiftRight<3>(slot)));
          const VU e = hn::BitCast(du, GatherI32<VG>(d, s[c].ent, idx));
          const VI b = hn::BitCast(d, hn::And(e, m63));
          const VU f = hn::And(hn::ShiftRight<6>(e), m1fff);
          NX[c][v] = hn::Add(f * hn::ShiftRight<12>(x), hn::Sub(slot, hn::ShiftRight<19>(e)));
          BITS[c][v] = j == 0 ? b : hn::Or(BITS[c][v], hn::ShiftLeftSame(b, static_cast<int>(6 * j)));
          ABOVE[c][v] = b;
        } else {
          const int32_t* lut32 = reinterpret_cast<const int32_t*>(s[c].lut);
          const VI idx = hn::Add(hn::ShiftLeft<12>(ctx), hn::BitCast(d, slot));
          const VI sym = hn::And(hn::GatherOffset(d, lut32, idx), hn::BitCast(d, mff));
          const VU e = hn::BitCast(du, hn::GatherIndex(d, s[c].fs, hn::Add(hn::ShiftLeft<8>(ctx), sym)));
          NX[c][v] = hn::Add(hn::And(e, mffff) * hn::ShiftRight<12>(x), hn::Sub(slot, hn::ShiftRight<16>(e)));
          const VI d2 = hn::ShiftRight<9>(hn::Mul(sym, v57));
          const VI d1 = hn::ShiftRight<5>(hn::Mul(hn::Sub(sym, hn::Mul(d2, v9)), v11));
          const VI b = hn::Add(sym, hn::Add(d1, hn::Mul(d2, v7)));
          BITS[c][v] = j == 0 ? b : hn::Or(BITS[c][v], hn::ShiftLeftSame(b, static_cast<int>(6 * j)));
          ABOVE[c][v] = sym;
        }
      }
      // Renormalization in lane order, each chunk from its own words.
#pragma GCC unroll 24
      for (size_t cv = 0; cv < NC * V; ++cv) {
        const size_t c = cv / V, v = cv % V;
        const auto a = hn::MaskFromVec(ACT[v]);
        const VU nx = hn::IfThenElse(a, NX[c][v], X[c][v]);
        const auto need = hn::And(hn::Eq(hn::ShiftRight<16>(nx), hn::Zero(du)), a);
        X[c][v] = RenormLanes(du, need, nx, &wp[c]);
      }
      for (size_t c = 0; c < NC; ++c) ws[c].pos = static_cast<uint32_t>((wp[c] - ws[c].p) / 2) + ws[c].off;
    }
    const uint64_t at = first * kKernRowCodes / 4;
    for (size_t c = 0; c < NC; ++c) {
      for (size_t v = 0; v < V; ++v) hn::Store(hn::BitCast(du, BITS[c][v]), du, bits_out + v * N);
      for (uint32_t l = act; l < kLanes; ++l) bits_out[l] = 0;
      krow_store_step(bits_out, out[c], at, s[c].out_len);
    }
  }
  for (size_t c = 0; c < NC; ++c) {
    if (ws[c].pos != ws[c].n) return false;
    for (size_t v = 0; v < V; ++v)
      if (!hn::AllTrue(du, hn::Eq(X[c][v], hn::Set(du, kRansL)))) return false;
  }
  return true;
}

// vg: vpgatherdd for the entry gathers (the AVX2 instance only).
bool KrowDecode(bool ent, bool vg, const hwy_krow::KrowSetup& s, const uint8_t* rans, uint32_t rans_len,
                uint8_t* out) {
  if (!ent) return KrowLanes<false, 1, false>(&s, &rans, &rans_len, &out);
#if HWY_TARGET == HWY_AVX2
  if (vg) return KrowLanes<true, 1, true>(&s, &rans, &rans_len, &out);
#endif
  (void)vg;
  return KrowLanes<true, 1, false>(&s, &rans, &rans_len, &out);
}

// Groups: entry tables only (every chunk's model has them).
bool KrowDecodeGroup(const hwy_krow::KrowSetup* s, const uint8_t* const* rans, const uint32_t* rans_len,
                     uint8_t* const* out, int n, bool vg) {
#if HWY_TARGET == HWY_AVX2
  if (vg)
    return n == 2 ? KrowLanes<true, 2, true>(s, rans, rans_len, out) : KrowLanes<true, 3, true>(s, rans, rans_len, out);
#endif
  (void)vg;
  return n == 2 ? KrowLanes<true, 2, false>(s, rans, rans_len, out) : KrowLanes<true, 3, false>(s, rans, rans_len, out);
}

}  // namespace HWY_NAMESPACE
}  // namespace wcodec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy_path_i.h"
namespace wcodec {

// The setup of one chunk; false: not handled here.
static bool krow_setup(const ModelView& m, const ChunkView& cv, uint64_t row0, hwy_krow::KrowSetup* s) {
  const IntParams& p = m.ip;
  // The slot tables only without entries (a kVector view of a model with
  // entries has none).
  if (m.kind != ModelKind::kInt || p.nbr_mode != 4 || (!m.krow_ent && (!m.sym_small || !m.fs_small)) || !m.luts)
    return false;
  if (m.n0 < int_nctx(p) || (p.use_rc && !m.rc)) return false;
  if (cv.w % (4 * kKernRowCodes) != 0 || uint64_t{cv.h} * cv.w >= (1ull << 31)) return false;
  s->nk = uint64_t{cv.h} * cv.w / kKernRowCodes;
  s->out_len = uint64_t{cv.h} * cv.w / 4;
  s->kpr = cv.w / kKernRowCodes;
  s->lut = m.sym_small;
  s->fs = reinterpret_cast<const int32_t*>(m.fs_small);
  s->ent = reinterpret_cast<const int32_t*>(m.krow_ent);
  s->rc = p.use_rc && p.ns > 1 ? m.rc + row0 : nullptr;
  s->scale = m.luts->scale;
  return true;
}

int decode_krow_chunk_hwy(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                          uint8_t* out) {
#if defined(WCODEC_HWY_PATH)
  hwy_krow::KrowSetup s;
  if (!krow_setup(m, cv, cv.row0, &s)) return -1;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;
  return WCODEC_HWY_PATH::KrowDecode(m.krow_ent != nullptr, vector_gathers(), s, rans, rans_len, out) ? 1 : 0;
#else
  (void)m, (void)cv, (void)rans, (void)rans_len, (void)out;
  return -1;
#endif
}

int decode_krow_group_hwy(const ModelView* ms, const ChunkView& cv, const GroupSide* sides, int n) {
#if defined(WCODEC_HWY_PATH)
  if (n < 2 || n > 3) return -1;
  hwy_krow::KrowSetup s[3];
  const uint8_t* rans[3];
  uint32_t rans_len[3];
  uint8_t* out[3];
  for (int i = 0; i < n; ++i) {
    if (!krow_setup(ms[i], cv, sides[i].row0, &s[i]) || !ms[i].krow_ent || sides[i].map) return -1;
    rans[i] = sides[i].rans;
    rans_len[i] = sides[i].rans_len;
    out[i] = sides[i].out;
  }
  for (int i = 0; i < n; ++i)
    if (rans_len[i] < 4 * kLanes || (rans_len[i] & 1)) return 0;
  return WCODEC_HWY_PATH::KrowDecodeGroup(s, rans, rans_len, out, n, vector_gathers()) ? 1 : 0;
#else
  (void)ms, (void)cv, (void)sides, (void)n;
  return -1;
#endif
}

}  // namespace wcodec
#endif
