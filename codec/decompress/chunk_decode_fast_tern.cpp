// codec/decompress/chunk_decode_fast_tern.cpp — the portable fast decoder of
// ternary chunks (scalar decoder path; method in chunk_decode_fast.h): int
// model sub 3 (2-bit codes) whose tables code only the tokens 0, 1, 2
// (values 0, -1, +1; ModelView::tern3 holds each context's two slot
// bounds), every context form the encoder writes for ternary codes:
// nbr_mode 0 (activity classes; the form of format 1 files), nbr_mode 1
// (exact neighbours, with or without off_b), nbr_mode 2 (column phase) and
// nbr_mode 3 (kernel contexts of flattened convolutions), each with or
// without row / column scale classes.
//
// Why: the reference decoder (decode_int_residuals + int_finish_chunk)
// spends a 4 KiB slot table per context, an int32 residual grid and a
// packing pass on what are 2-bit codes: about 5 MB/s on isnet-medium's
// ternary file. With the tokens limited to 0..2 a context is one 32-bit
// word (the slot bounds of tokens 1 and 2), the token two compares and a
// load of its frequency and start from a 16-byte row per context (built
// per chunk from tern3, in a thread-local buffer), and every neighbour a
// digit (0, +1 -> 1, -1 -> 2: the code itself), so the contexts come from
// small re-indexed tables.
//
// Method: the 32 lanes (one rectangle size) step together, one element of
// every lane per step, in the reference's order (lane order within a step,
// the renormalization words handed out in lane order). Each lane writes
// its codes as bytes into a raster grid of the chunk (it owns its
// rectangle), so the upper and off_a / off_b neighbours are plain reads of
// that grid and the left ones stay in small per-lane arrays; a last pass
// packs four codes a byte. Tokens outside 0..2 cannot occur (the tables do
// not code them), so there are no escapes and every code packs. Chunks with
// a tile map, lanes of unequal rectangles and rows that are not whole bytes
// are declined (-1): chunk_decode_fast_int.cpp's general int loop takes
// them.
//
// Every read is bounded (the word cursor of chunk_decode_fast_i.h); a
// stream that runs short, ends with words left or leaves a lane away from
// its initial state is rejected (0), as the reference rejects it.
// Thread-safety: pure functions over their arguments, the caller's scratch
// and a thread-local buffer (the per-context rows).
#include <cstdint>
#include <cstring>
#include <vector>

#include "chunk_decode_fast_i.h"

namespace wcodec {
namespace fast {
namespace {

struct TernCfg {
  const uint32_t* tab;    // context -> s1 | s2 << 16 (tern3 or a re-indexed copy)
  const uint32_t* fs4;    // context c -> [4 c + token] freq | start << 16, [4 c + 3] its tab entry s1 | s2 << 16
  uint32_t smul;          // entries of tab per scale class
  uint32_t W, R, w;       // lane rectangle columns, rows; chunk columns
  uint32_t oa, ob, period;
  const uint8_t* scale;   // IntLuts::scale
  const uint8_t* rc;      // row classes from the chunk's first row (null: none)
  const uint8_t* cc;      // column classes from the chunk's first column (null: none)
  uint8_t* base[kLanes];  // the lane's first element in the code grid
  uint32_t r0[kLanes], c0[kLanes];
  // The lanes' column phases, by the step's column j (jj = j % period, lane
  // l at jj * 32 + l): nbr_mode 2: 9 x the phase; nbr_mode 3: 3 where the
  // kernel has a left (pl) / an upper (pu) neighbour, else 0.
  uint32_t p9[64 * kLanes];
  uint8_t pl[64 * kLanes], pu[64 * kLanes];
  uint32_t re[16 * 32];          // nbr_modes 0 and 3: re-indexed tables
};

// Whether a digit (0, 1, 2) is non-zero.
WC_FAST_INLINE uint32_t nz(uint32_t q) { return (q + 1) >> 1; }

// One ternary symbol of lane state x from its context's row f of fs4
// (token 0 below s1, 1 below s2, else 2: two compares, no branch; the
// compares are random, a branch would be mispredicted about every other
// symbol), then the lane's renormalization. Returns the code: token 0 -> 0,
// token 1 (value -1) -> 2, token 2 (+1) -> 1.
WC_FAST_INLINE uint32_t tern_renorm(uint32_t& x, const uint32_t* f, const uint8_t* p, uint32_t& pos) {
  const uint32_t e = f[3];
  const uint32_t s1 = e & 0xFFFFu, s2 = e >> 16;
  const uint32_t xv = x;
  const uint32_t slot = xv & ((1u << kMaxProbBits) - 1);
  const uint32_t g1 = slot >= s1, g2 = slot >= s2;
  const uint32_t fs = f[g1 + g2];
  x = renorm_from((fs & 0xFFFFu) * (xv >> kMaxProbBits) + slot - (fs >> 16), p, pos);
  return 2 * g1 - g2;
}
// MODE: nbr_mode. SC: 1 a scale term per lane and row (row classes, or
// none), 2 per element (column classes).
template <int MODE, int SC>
int tern_same(const TernCfg& c, uint32_t* x, Words& ws) {
  uint32_t q1[kLanes], q2[kLanes], sb[kLanes];
  const uint64_t w = c.w, oa = c.oa, ob = c.ob;
  for (uint32_t r = 0; r < c.R; ++r) {
    for (uint32_t l = 0; l < kLanes; ++l) {
      q1[l] = q2[l] = 0;
      const uint32_t rp = c.rc ? c.rc[c.r0[l] + r] : 0u;
      sb[l] = SC == 2 ? rp : c.scale[rp] * c.smul;
    }
    const bool ht = r != 0;
    uint32_t jj = 0;  // j % period
    for (uint32_t j = 0; j < c.W; ++j) {
      if (!words_ready(&ws, kLanes)) return 0;
      uint32_t pos = ws.pos;
      const uint8_t* p = ws.p;
      const uint64_t off = uint64_t{r} * w + j;
      const bool ha = oa && j >= oa, hb = ob && j >= ob, hl = j != 0;
      for (uint32_t l = 0; l < kLanes; ++l) {
        uint8_t* e = c.base[l] + off;
        uint32_t s = sb[l];
        if constexpr (SC == 2) s = c.scale[sb[l] + c.cc[c.c0[l] + j]] * c.smul;
        const uint32_t a = ha ? e[-static_cast<int64_t>(oa)] : 0u;
        uint32_t ctx;
        if constexpr (MODE == 0) {
          // Activity 2|L1| + |T| + |L2| + |La| from the digits' non-zero
          // flags, 3|T| in a row's first column (re: 32 per scale class).
          const uint32_t t = ht ? e[-static_cast<int64_t>(w)] : 0u;
          ctx = s + (hl ? q1[l] + 3 * (nz(t) + 2 * nz(q2[l]) + 4 * nz(a)) : 24 + nz(t));
        } else if constexpr (MODE == 1) {
          const uint32_t t = ht ? e[-static_cast<int64_t>(w)] : 0u;
          uint32_t k = ((q1[l] * 3 + q2[l]) * 3 + a) * 3 + t;
          if (ob) k = k * 3 + (hb ? e[-static_cast<int64_t>(ob)] : 0u);
          ctx = s + k;
        } else if constexpr (MODE == 2) {
          ctx = s + c.p9[jj * kLanes + l] + q1[l] * 3 + a;
        } else {
          ctx = s + 3 * (q1[l] & c.pl[jj * kLanes + l]) + (a & c.pu[jj * kLanes + l]);
        }
        const uint32_t code = tern_renorm(x[l], c.fs4 + 4 * uint64_t{ctx}, p, pos);
        *e = static_cast<uint8_t>(code);
        q2[l] = q1[l];
        q1[l] = code;
      }
      ws.pos = pos;
      jj = jj + 1 == c.period ? 0u : jj + 1;
    }
  }
  return 1;
}

template <int MODE>
int tern_mode(int sc, const TernCfg& c, uint32_t* x, Words& ws) {
  return sc == 2 ? tern_same<MODE, 2>(c, x, ws) : tern_same<MODE, 1>(c, x, ws);
}

}  // namespace

int decode_tern_chunk_fast(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
                           uint32_t rans_len, uint8_t* out, int32_t* res) {
  const IntParams& p = m.ip;
  if (m.kind != ModelKind::kInt || p.sub != kIntTernary || tile_map || !m.tern3 || !m.luts) return -1;
  if (p.nbr_mode > 3 || p.nb < 1 || p.nb > 8 || p.ns < 1 || p.ns > 16) return -1;
  if (m.n0 < int_nctx(p)) return -1;  // every context the loop forms has a table
  if ((p.use_rc && !m.rc) || (p.use_cc && !m.cc)) return -1;
  if (p.nbr_mode >= 2 && (p.period < 1 || p.period > 64)) return -1;
  if (p.nbr_mode == 3 && p.off_a < 1) return -1;
  const uint64_t nel = uint64_t{cv.h} * cv.w;
  if (nel == 0 || nel >= (1ull << 31) || cv.w % 4) return -1;
  Geom g;
  lane_geometry(cv, &g);
  if (!g.same) return -1;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;

  TernCfg c;
  c.W = g.w[0];
  c.R = g.h[0];
  c.w = cv.w;
  c.oa = p.nbr_mode == 0 && p.nb == 1 ? 0u : p.off_a;  // one activity class: La unused
  c.ob = p.nbr_mode == 1 ? p.off_b : 0u;
  c.period = p.nbr_mode >= 2 ? p.period : 1u;
  c.scale = m.luts->scale;
  c.rc = p.use_rc ? m.rc + cv.row0 : nullptr;
  c.cc = p.use_cc ? m.cc + cv.col0 : nullptr;
  // The codes, a byte each, in the caller's residual grid.
  uint8_t* grid = reinterpret_cast<uint8_t*>(res);
  for (uint32_t l = 0; l < kLanes; ++l) {
    c.r0[l] = g.r0[l];
    c.c0[l] = g.c0[l];
    c.base[l] = grid + uint64_t{g.r0[l]} * cv.w + g.c0[l];
  }
  const IntLuts& L = *m.luts;
  switch (p.nbr_mode) {
    case 0:
      // Context 3 (nb sc + act) + q(L1) by index q(L1) + 3 (nzT + 2 nzL2 +
      // 4 nzLa), or 24 + nzT in a row's first column (activity 3 |T|).
      for (uint32_t sc = 0; sc < p.ns; ++sc)
        for (uint32_t i = 0; i < 32; ++i) {
          uint32_t a = 0, ql = 0;
          if (i < 24) {
            ql = i % 3;
            a = 2 * (ql != 0) + ((i / 3) & 1) + ((i / 6) & 1) + ((i / 12) & 1);
          } else {
            a = 3 * ((i - 24) & 1);
          }
          c.re[32 * sc + i] = i < 26 ? m.tern3[3 * (p.nb * sc + L.act[a]) + ql] : 0u;
        }
      c.tab = c.re;
      c.smul = 32;
      break;
    case 1:
      c.tab = m.tern3;
      c.smul = p.off_b ? 243u : 81u;
      break;
    case 2:
      c.tab = m.tern3;
      c.smul = 9u * p.period;
      break;
    default:
      // Context 9 (nb sc + act) + 3 q(Lk) + q(Uk), the activity |Lk| + |Uk|
      // a function of the digits: index 9 sc + 3 q(Lk) + q(Uk).
      for (uint32_t sc = 0; sc < p.ns; ++sc)
        for (uint32_t ql = 0; ql < 3; ++ql)
          for (uint32_t qu = 0; qu < 3; ++qu)
            c.re[9 * sc + 3 * ql + qu] = m.tern3[9 * (p.nb * sc + L.act[(ql != 0) + (qu != 0)]) + 3 * ql + qu];
      c.tab = c.re;
      c.smul = 9;
      break;
  }
  if (p.nbr_mode >= 2)
    for (uint32_t jj = 0; jj < c.period; ++jj)
      for (uint32_t l = 0; l < kLanes; ++l) {
        const uint32_t kp = (cv.col0 + g.c0[l] + jj) % c.period;
        const uint32_t k = p.nbr_mode == 3 ? int_kernel_nbrs(p, kp) : 0u;
        c.p9[jj * kLanes + l] = 9 * kp;
        c.pl[jj * kLanes + l] = k & 1 ? 3 : 0;
        c.pu[jj * kLanes + l] = k & 2 ? 3 : 0;
      }
  // Each context's three tokens' frequency and start, and its bounds.
  const uint32_t ntab = p.nbr_mode == 0 ? 32u * p.ns : p.nbr_mode == 3 ? 9u * p.ns : int_nctx(p);
  thread_local std::vector<uint32_t> fs4;
  if (fs4.size() < 4 * uint64_t{ntab}) fs4.resize(4 * uint64_t{ntab});
  for (uint32_t i = 0; i < ntab; ++i) {
    const uint32_t e = c.tab[i], s1 = e & 0xFFFFu, s2 = e >> 16;
    uint32_t* f = fs4.data() + 4 * uint64_t{i};
    f[0] = s1 & 0x1FFFu;  // an unused table (s1 = s2 = 0x2000): token 0, frequency 0
    f[1] = ((s2 - s1) & 0xFFFFu) | s1 << 16;
    f[2] = (((1u << kMaxProbBits) - s2) & 0xFFFFu) | (s2 & 0xFFFFu) << 16;
    f[3] = e;
  }
  c.fs4 = fs4.data();
  uint32_t x[kLanes];
  for (uint32_t l = 0; l < kLanes; ++l) x[l] = load_elem(rans + 4 * l, 4);
  Words ws;
  words_open(&ws, rans, rans_len);
  const int sc = p.use_cc && p.ns > 1 ? 2 : 1;
  int ok;
  switch (p.nbr_mode) {
    case 0: ok = tern_mode<0>(sc, c, x, ws); break;
    case 1: ok = tern_mode<1>(sc, c, x, ws); break;
    case 2: ok = tern_mode<2>(sc, c, x, ws); break;
    default: ok = tern_mode<3>(sc, c, x, ws); break;
  }
  if (!ok || !words_done(ws)) return 0;
  for (uint32_t l = 0; l < kLanes; ++l)
    if (x[l] != kRansL) return 0;
  // Four codes a byte (rows are whole bytes: w is a multiple of 4).
  const uint64_t nb = nel / 4;
  for (uint64_t i = 0; i < nb; ++i) {
    const uint8_t* q = grid + 4 * i;
    out[i] = static_cast<uint8_t>(q[0] | q[1] << 2 | q[2] << 4 | q[3] << 6);
  }
  return 1;
}

}  // namespace fast
}  // namespace wcodec
