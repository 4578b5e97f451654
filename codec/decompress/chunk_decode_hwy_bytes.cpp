// codec/decompress/chunk_decode_hwy_bytes.cpp — the bytes-model chunk
// decoder (chunk_model.h: one symbol per byte plane, context the plane and,
// with ctx_mode 1, the class of the left element's byte in that plane) of
// the vector decoder paths, written with Google Highway: an AVX2 instance
// (x86-64, 8 lanes per vector; the avx2 and avx512 paths) and a NEON one
// (aarch64, 4 lanes).
//
// Why: bytes models code what no float or int model fits (U16/I32/I64
// tensors, GGUF fields of unknown types, and fp16 block scales that take few
// distinct values, split_encode.cpp), and the reference decoder
// (decode_bytes_chunk_g) takes them one lane and one byte at a time, about
// 150 MB/s on an Intel Xeon.
//
// Method (the reference's order exactly): the 32 lanes' states are
// kLanes / N vectors. A step decodes one element of every lane, plane by
// plane; a plane is two phases: every vector's context (the plane, and the
// class of the lane's previous symbol of that plane, a register, where the
// lane is not at the first column of its rectangle), slot, symbol (a
// gather from the context's 4 KiB slot table), frequency and start (a
// gather from its 256 entries) and next state; then renormalization in lane
// order (a prefix-count table indexes a lane permutation of the next N
// words, as in the other Highway decoders). Lanes may have rectangles of
// different sizes: a lane past its element count keeps its state and takes
// no words. The step's symbols are written at each lane's output position
// by a scalar loop. Every read is bounded (the stream's last words come from
// a zero-padded copy); a stream that runs short or ends with words left, or
// a lane not back at its initial state, is rejected (0) where the reference
// rejects it.
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
#define HWY_TARGET_INCLUDE "chunk_decode_hwy_bytes.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "chunk_decode_hwy.h"
#include "chunk_decode_hwy_words.h"
#include "simd_env.h"  // vector_gathers

#ifndef WCODEC_HWY_BYTES_ONCE
#define WCODEC_HWY_BYTES_ONCE
namespace wcodec {
namespace hwy_bytes {

// What the step loop needs of the model and the chunk.
struct BytesSetup {
  uint32_t w;                // chunk columns (elements)
  uint32_t steps;            // the largest lane element count
  const uint8_t* lut;        // ModelView::sym_small: slot -> symbol, 4 KiB a context
  const int32_t* fs;         // ModelView::fs_small: freq | start << 16, 256 a context
  uint32_t n[kLanes];        // lane element counts
  uint32_t lw[kLanes];       // lane rectangle widths
  uint64_t first[kLanes];    // element index (row-major in the chunk) of each lane's first element
};

}  // namespace hwy_bytes
}  // namespace wcodec
#endif

HWY_BEFORE_NAMESPACE();
namespace wcodec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#include "chunk_decode_hwy_gather-inl.h"

#include "chunk_decode_hwy_lanes-inl.h"

// EB byte planes; CTX: contexts by the left byte's class (ctx_mode 1).
template <uint32_t EB, bool CTX, bool VG>
bool BytesLanes(const hwy_bytes::BytesSetup& s, const uint8_t* rans, uint32_t rans_len, uint8_t* out) {
  const hn::ScalableTag<int32_t> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  constexpr size_t N = hn::MaxLanes(d);
  static_assert(N <= 8 && kLanes % N == 0, "lane vectors of at most 8 lanes");
  constexpr size_t V = kLanes / N;
  using VI = hn::Vec<decltype(d)>;
  using VU = hn::Vec<decltype(du)>;

  hwy_words::Words ws;
  hwy_words::words_open(&ws, rans, rans_len);
  VU X[V], NL[V], LW[V], COL[V], LEFT[EB][V];
  LoadLaneStates(du, rans, X);
  for (size_t v = 0; v < V; ++v) {
    NL[v] = hn::LoadU(du, s.n + v * N);
    LW[v] = hn::LoadU(du, s.lw + v * N);
    COL[v] = hn::Zero(du);
    for (uint32_t b = 0; b < EB; ++b) LEFT[b][v] = hn::Zero(du);
  }
  const VU m4095 = hn::Set(du, 4095u), mffff = hn::Set(du, 0xFFFFu), mff = hn::Set(du, 0xFFu);
  const VU one = hn::Set(du, 1u), two = hn::Set(du, 2u), three = hn::Set(du, 3u), v16 = hn::Set(du, 16u),
           v224 = hn::Set(du, 224u);
  const int32_t* lut32 = reinterpret_cast<const int32_t*>(s.lut);
  // Each lane's next output byte and column in its rectangle.
  uint8_t* dst[kLanes];
  uint32_t col[kLanes];
  uint32_t min_n = s.steps;
  for (uint32_t l = 0; l < kLanes; ++l) {
    dst[l] = out + s.first[l] * EB;
    col[l] = 0;
    if (s.n[l] < min_n) min_n = s.n[l];
  }
  const uint64_t skip = uint64_t{s.w} * EB;  // one chunk row of bytes
  HWY_ALIGN uint32_t syms[EB][kLanes];
  for (uint32_t t = 0; t < s.steps; ++t) {
    // Lanes past their element count neither decode nor take words.
    const VU tv = hn::Set(du, t);
    for (uint32_t b = 0; b < EB; ++b) {
      if (HWY_UNLIKELY(!hwy_words::words_ready(&ws, 2 * kLanes))) return false;
      const uint8_t* wp = ws.p + 2 * uint64_t{ws.pos - ws.off};
      VU NX[V], SYM[V];
#pragma GCC unroll 8
      for (size_t v = 0; v < V; ++v) {
        VU ctx = hn::Set(du, CTX ? 4 * b : b);
        if constexpr (CTX) {
          // Class of the left byte: 0 none, 1 zero, 2 below 16 or from 240,
          // 3 otherwise (bytes_ctx).
          const VU left = LEFT[b][v];
          const VU mid = hn::IfThenElse(hn::Lt(hn::Sub(left, v16), v224), three, two);
          const VU cls = hn::IfThenElse(hn::Eq(left, hn::Zero(du)), one, mid);
          ctx = hn::Add(ctx, hn::IfThenElseZero(hn::Ne(COL[v], hn::Zero(du)), cls));
        }
        const VU x = X[v];
        const VU slot = hn::And(x, m4095);
        const VI off = hn::BitCast(d, hn::Add(hn::ShiftLeft<12>(ctx), slot));
        const VU sym = hn::And(hn::BitCast(du, GatherOff32<VG>(d, lut32, off)), mff);
        const VI idx = hn::BitCast(d, hn::Add(hn::ShiftLeft<8>(ctx), sym));
        const VU e = hn::BitCast(du, GatherI32<VG>(d, s.fs, idx));
        NX[v] = hn::Add(hn::Mul(hn::And(e, mffff), hn::ShiftRight<12>(x)), hn::Sub(slot, hn::ShiftRight<16>(e)));
        SYM[v] = sym;
      }
#pragma GCC unroll 8
      for (size_t v = 0; v < V; ++v) {
        const VU nx = NX[v];
        if (t < min_n) {
          const auto need = hn::Eq(hn::ShiftRight<16>(nx), hn::Zero(du));
          X[v] = RenormLanes(du, need, nx, &wp);
        } else {
          const auto a = hn::Lt(tv, NL[v]);
          const VU kept = hn::IfThenElse(a, nx, X[v]);
          const auto need = hn::And(hn::Eq(hn::ShiftRight<16>(kept), hn::Zero(du)), a);
          X[v] = RenormLanes(du, need, kept, &wp);
        }
        LEFT[b][v] = SYM[v];
        hn::Store(SYM[v], du, syms[b] + v * N);
      }
      ws.pos = static_cast<uint32_t>((wp - ws.p) / 2) + ws.off;
    }
    for (size_t v = 0; v < V; ++v) {
      const VU c = hn::Add(COL[v], one);
      COL[v] = hn::IfThenZeroElse(hn::Eq(c, LW[v]), c);
    }
    const uint32_t act = t < min_n ? kLanes : 0;
    for (uint32_t l = 0; l < kLanes; ++l) {
      if (act == 0 && t >= s.n[l]) continue;
      uint8_t* p = dst[l];
      for (uint32_t b = 0; b < EB; ++b) p[b] = static_cast<uint8_t>(syms[b][l]);
      p += EB;
      if (++col[l] == s.lw[l]) {
        col[l] = 0;
        p += skip - uint64_t{s.lw[l]} * EB;
      }
      dst[l] = p;
    }
  }
  if (ws.pos != ws.n) return false;
  for (size_t v = 0; v < V; ++v)
    if (!hn::AllTrue(du, hn::Eq(X[v], hn::Set(du, kRansL)))) return false;
  return true;
}

template <bool VG>
bool BytesDecodeForm(uint32_t eb, bool ctx, const hwy_bytes::BytesSetup& s, const uint8_t* rans, uint32_t rans_len,
                     uint8_t* out) {
  switch (eb * 2 + (ctx ? 1 : 0)) {
    case 2: return BytesLanes<1, false, VG>(s, rans, rans_len, out);
    case 3: return BytesLanes<1, true, VG>(s, rans, rans_len, out);
    case 4: return BytesLanes<2, false, VG>(s, rans, rans_len, out);
    case 5: return BytesLanes<2, true, VG>(s, rans, rans_len, out);
    case 8: return BytesLanes<4, false, VG>(s, rans, rans_len, out);
    case 9: return BytesLanes<4, true, VG>(s, rans, rans_len, out);
    case 16: return BytesLanes<8, false, VG>(s, rans, rans_len, out);
    default: return BytesLanes<8, true, VG>(s, rans, rans_len, out);
  }
}

// vg: vpgatherdd for the table gathers (the AVX2 instance only).
bool BytesDecode(uint32_t eb, bool ctx, bool vg, const hwy_bytes::BytesSetup& s, const uint8_t* rans,
                 uint32_t rans_len, uint8_t* out) {
#if HWY_TARGET == HWY_AVX2
  if (vg) return BytesDecodeForm<true>(eb, ctx, s, rans, rans_len, out);
#endif
  (void)vg;
  return BytesDecodeForm<false>(eb, ctx, s, rans, rans_len, out);
}

}  // namespace HWY_NAMESPACE
}  // namespace wcodec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy_path_i.h"
namespace wcodec {

int decode_bytes_chunk_hwy(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                           uint8_t* out) {
#if defined(WCODEC_HWY_PATH)
  const BytesParams& p = m.bp;
  const uint32_t eb = p.elem_bytes;
  if (m.kind != ModelKind::kBytes || !m.sym_small || !m.fs_small) return -1;
  if ((eb != 1 && eb != 2 && eb != 4 && eb != 8) || p.ctx_mode > 1 || m.n0 < bytes_nctx(p)) return -1;
  const uint64_t nel = uint64_t{cv.h} * cv.w;
  if (nel == 0 || nel >= (1ull << 31)) return -1;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;
  hwy_bytes::BytesSetup s;
  s.w = cv.w;
  s.steps = 0;
  s.lut = m.sym_small;
  s.fs = reinterpret_cast<const int32_t*>(m.fs_small);
  for (uint32_t l = 0; l < kLanes; ++l) {
    const LaneRect r = lane_rect(cv.h, cv.w, l);
    s.n[l] = r.h * r.w;
    s.lw[l] = r.w ? r.w : 1;  // an empty lane never advances its column
    s.first[l] = uint64_t{r.r0} * cv.w + r.c0;
    if (s.n[l] > s.steps) s.steps = s.n[l];
  }
  return WCODEC_HWY_PATH::BytesDecode(eb, p.ctx_mode == 1, vector_gathers(), s, rans, rans_len, out) ? 1 : 0;
#else
  (void)m, (void)cv, (void)rans, (void)rans_len, (void)out;
  return -1;
#endif
}

}  // namespace wcodec
#endif  // HWY_ONCE
