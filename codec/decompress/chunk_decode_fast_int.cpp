// codec/decompress/chunk_decode_fast_int.cpp — the portable fast decoder of
// int chunks (scalar decoder path; method in chunk_decode_fast.h): int8,
// uint8, 4-bit and ternary codes with activity contexts (nbr_mode 0),
// exact-neighbour contexts (nbr_modes 1, 2) or kernel contexts (nbr_mode
// 3), any scale classes, escapes, zero points and tile maps. Ternary chunks
// whose tables code only 0, -1, +1 go to the ternary loop first
// (chunk_decode_fast_tern.cpp); this loop takes what it declines.
//
// The residual tokens are decoded with the 32 lanes stepped together, each
// lane's neighbours in small local arrays (the last three values of its
// row, its column phase, its row's scale term) and its top neighbour read
// from the residual grid, where each lane writes its elements in place
// (a lane owns its rectangle). The step is specialised by context form,
// the activity neighbour's distance and whether column classes vary the
// scale class per element. Escaped tokens (rare) take their extra-bit
// symbols in a second pass over the step's lanes, in the reference's
// order. The grid is then finished as the reference's int_finish_chunk
// does (tile reconstruction, packing of the codes; 8-bit unsigned codes in
// one pass).
// Thread-safety: pure functions over their arguments and the caller's
// scratch.
#include <cstdint>
#include <cstring>

#include "chunk_decode_fast_i.h"
#include "chunk_decode_krow.h"

namespace wcodec {
namespace {
using namespace fast;

struct IntLanes {
  uint32_t x[kLanes];
  int32_t h1[kLanes], h2[kLanes], h3[kLanes];  // left neighbours, 1-3 back (0 before the row start)
  int32_t* at[kLanes];                         // the lane's next element in the residual grid
  uint32_t col[kLanes], row[kLanes];           // position in the lane's rectangle
  uint32_t phase[kLanes];                      // (tensor column) % period
  uint32_t scb[kLanes];                        // the row's scale term (row class; with CC the row part)
  const uint8_t* ccl[kLanes];                  // CC: the column classes from the lane's first column
  uint32_t tok[kLanes];
};

struct IntCfg {
  const uint8_t* sym;
  const uint32_t* fs;
  const uint8_t* act;    // activity -> class (IntLuts::act)
  const uint8_t* scale;  // rc + cc -> scale class
  const uint8_t* rc;     // row classes of the chunk's rows (null: none)
  const uint8_t* cc;     // column classes from the chunk's first column (null: none)
  uint32_t smul;  // contexts per scale class (nb: modes 0 and 3)
  uint32_t esc, period, oa, ob, w;
  int32_t lmask[64], umask[64];  // nbr_mode 3: kernel neighbours by phase (all ones: present)
};

WC_FAST_INLINE uint32_t sign_class(int32_t v) { return (v > 0 ? 1u : 0u) | (v < 0 ? 2u : 0u); }
WC_FAST_INLINE uint32_t mag(int32_t v) { return iabs32(v); }

// The residual token of lane l at element e (column col of its row; ht:
// not the lane's first row), no escape handling: writes the value, shifts
// the left neighbours and (PH) steps the column phase. MODE: 0 activity,
// 3 kernel. OA: the extra neighbour's distance (0 none, 1-3 from the
// registers, 4 any: read from the row). CC: column classes. ACT: the
// model has activity classes (nb > 1; with one class the activity is not
// needed: its class is 0).
// POS: the element's place when the caller knows it (kPosAny: from col and
// ht at run time; kPosInner: a later column of a later row; kPosRow0: a
// later column of the lane's first row), so that the steady state has no
// tests of either.
enum : int { kPosAny = 0, kPosInner = 1, kPosRow0 = 2 };
template <int MODE, int OA, bool CC, bool PH, bool ACT = true, int POS = kPosAny>
WC_FAST_INLINE void int_lane(const IntCfg& c, IntLanes& L, uint32_t l, int32_t* e, uint32_t col, bool ht,
                             const uint8_t* p, uint32_t& pos) {
  if constexpr (POS == kPosInner) ht = true;
  else if constexpr (POS == kPosRow0) ht = false;
  const int32_t h1 = L.h1[l], h2 = L.h2[l], h3 = L.h3[l];
  int32_t la;
  if constexpr (OA == 0) la = 0;
  else if constexpr (OA == 1) la = h1;
  else if constexpr (OA == 2) la = h2;
  else if constexpr (OA == 3) la = h3;
  else la = col >= c.oa ? e[-static_cast<int64_t>(c.oa)] : 0;
  uint32_t sb = L.scb[l];
  if constexpr (CC) sb = c.scale[sb + L.ccl[l][col]] * c.smul;
  uint32_t ctx;
  if constexpr (MODE == 3) {
    const uint32_t kp = L.phase[l];
    const int32_t lk = h1 & c.lmask[kp], uk = la & c.umask[kp];
    uint32_t ac = 0;
    if constexpr (ACT) {
      const uint32_t a = mag(lk) + mag(uk);
      ac = c.act[a < 1023u ? a : 1023u];
    }
    ctx = ((sb + ac) * 3u + sign_class(lk)) * 3u + sign_class(uk);
    if constexpr (PH) L.phase[l] = kp + 1 == c.period ? 0u : kp + 1;
  } else if constexpr (MODE == 2) {
    const uint32_t kp = L.phase[l];
    ctx = sb + kp * 9u + sign_class(h1) * 3u + sign_class(la);
    if constexpr (PH) L.phase[l] = kp + 1 == c.period ? 0u : kp + 1;
  } else if constexpr (MODE == 1) {
    const int32_t t = ht ? e[-static_cast<int64_t>(c.w)] : 0;
    ctx = ((sign_class(h1) * 3u + sign_class(h2)) * 3u + sign_class(la)) * 3u + sign_class(t);
    if (c.ob) ctx = ctx * 3u + sign_class(col >= c.ob ? e[-static_cast<int64_t>(c.ob)] : 0);
    ctx += sb;
  } else {
    uint32_t ac = 0;
    if constexpr (ACT) {
      int32_t t = 0;
      if constexpr (POS == kPosInner) t = e[-static_cast<int64_t>(c.w)];
      else if constexpr (POS == kPosAny) t = ht ? e[-static_cast<int64_t>(c.w)] : 0;
      uint32_t a = 2 * mag(h1) + mag(t) + mag(h2) + mag(la);
      if constexpr (POS == kPosAny)
        if (col == 0) a += 2 * mag(t);  // no left neighbour: the top counts three times
      ac = c.act[a < 1023u ? a : 1023u];
    }
    ctx = (sb + ac) * 3u + sign_class(h1);
  }
  const uint32_t tk = decode_renorm(L.x[l], c.sym + ctx * 4096, c.fs + ctx * 256, p, pos);
  const int32_t v = tile::zz_decode(static_cast<int32_t>(tk));
  *e = v;
  L.h3[l] = h2;
  L.h2[l] = h1;
  L.h1[l] = v;
  L.tok[l] = tk;
}

// Moves lane l to its next element (row wrap: neighbours cleared, phase
// and scale term of the new row).
struct LaneRows {
  uint32_t w[kLanes], h[kLanes], c0[kLanes], r0[kLanes];
  uint32_t phase0[kLanes];
};
template <bool CC>
WC_FAST_INLINE void int_advance(const IntCfg& c, const LaneRows& g, IntLanes& L, uint32_t l) {
  L.at[l] += 1;
  L.phase[l] = L.phase[l] + 1 == c.period ? 0u : L.phase[l] + 1;
  if (++L.col[l] == g.w[l]) {
    L.col[l] = 0;
    L.at[l] += c.w - g.w[l];
    L.h1[l] = L.h2[l] = L.h3[l] = 0;
    L.phase[l] = g.phase0[l];
    const uint32_t r = ++L.row[l];
    if (c.rc && r < g.h[l]) {
      const uint32_t rp = c.rc[g.r0[l] + r];
      L.scb[l] = CC ? rp : static_cast<uint32_t>(c.scale[rp]) * c.smul;
    }
  }
}

// The extra bits of the step's escaped tokens (the reference's order: the
// low 8 bits of every escaping lane, then the rest), then their values.
// False for an escape class past the last.
bool int_escapes(const IntCfg& c, IntLanes& L, const uint32_t* act_mask, const uint8_t* p, uint32_t& pos) {
  uint32_t e[kLanes], extra[kLanes];
  for (uint32_t l = 0; l < kLanes; ++l) {
    e[l] = 0;
    if (act_mask[l] && L.tok[l] >= c.esc) {
      const uint32_t nb = L.tok[l] - c.esc;
      e[l] = nb < 2 || nb > kEscClasses - 1 ? 0u : nb - 1;
    }
  }
  for (uint32_t l = 0; l < kLanes; ++l) extra[l] = e[l] ? decode_bits_renorm(L.x[l], e[l] < 8 ? e[l] : 8, p, pos) : 0u;
  for (uint32_t l = 0; l < kLanes; ++l)
    if (e[l] > 8) extra[l] |= decode_bits_renorm(L.x[l], e[l] - 8, p, pos) << 8;
  bool ok = true;
  for (uint32_t l = 0; l < kLanes; ++l) {
    if (!act_mask[l] || L.tok[l] < c.esc) continue;
    const uint32_t nb = L.tok[l] - c.esc;
    ok &= nb <= kEscClasses - 1;
    const uint32_t d = nb == 0 || nb > kEscClasses - 1 ? 0u : ((1u << (nb - 1)) | extra[l]);
    const int32_t v = tile::zz_decode(static_cast<int32_t>(c.esc + d));
    // The element just decoded (before the advance) and the lane's left
    // neighbour for its next one.
    L.at[l][0] = v;
    L.h1[l] = v;
  }
  return ok;
}

template <int MODE, int OA, bool CC>
int int_lanes(const IntCfg& c, const Geom& g, const LaneRows& rows, IntLanes& L, Words& ws) {
  uint32_t all[kLanes];
  for (uint32_t l = 0; l < kLanes; ++l) all[l] = 1;
  uint32_t act[kLanes];
  for (uint32_t t = 0; t < g.steps; ++t) {
    if (!words_ready(&ws, 3 * kLanes)) return 0;
    uint32_t pos = ws.pos;
    const uint8_t* p = ws.p;
    const uint32_t* am = all;
    uint32_t any_esc = 0;
    if (t < g.min_n) {
      for (uint32_t l = 0; l < kLanes; ++l) {
        int_lane<MODE, OA, CC, false>(c, L, l, L.at[l], L.col[l], L.row[l] != 0, p, pos);
        any_esc |= L.tok[l] >= c.esc;
      }
    } else {
      for (uint32_t l = 0; l < kLanes; ++l) {
        act[l] = t < g.n[l];
        if (!act[l]) continue;
        int_lane<MODE, OA, CC, false>(c, L, l, L.at[l], L.col[l], L.row[l] != 0, p, pos);
        any_esc |= L.tok[l] >= c.esc;
      }
      am = act;
    }
    if (any_esc && !int_escapes(c, L, am, p, pos)) return 0;
    for (uint32_t l = 0; l < kLanes; ++l)
      if (am[l]) int_advance<CC>(c, rows, L, l);
    ws.pos = pos;
  }
  return 1;
}

// One step of the same-rectangle loop: every lane's element at base[l] +
// off (column j; ht: not the first row), then the step's escapes.
template <int MODE, int OA, bool CC, bool ACT, int POS>
WC_FAST_INLINE bool int_same_step(const IntCfg& c, IntLanes& L, int32_t* const* base, uint64_t off, uint32_t j,
                                  bool ht, const uint32_t* all, Words& ws) {
  if (!words_ready(&ws, 3 * kLanes)) return false;
  uint32_t pos = ws.pos;
  const uint8_t* p = ws.p;
  uint32_t any_esc = 0;
  for (uint32_t l = 0; l < kLanes; ++l) {
    int_lane<MODE, OA, CC, true, ACT, POS>(c, L, l, base[l] + off, j, ht, p, pos);
    any_esc |= L.tok[l] >= c.esc;
  }
  if (any_esc) {
    for (uint32_t l = 0; l < kLanes; ++l) L.at[l] = base[l] + off;
    if (!int_escapes(c, L, all, p, pos)) return false;
  }
  ws.pos = pos;
  return true;
}

// Lanes of one rectangle size (R rows of W): one position for all lanes,
// lane l's element at base[l] + r * w + j; no per-lane counters.
template <int MODE, int OA, bool CC, bool ACT>
int int_same(const IntCfg& c, const Geom& g, const LaneRows& rows, IntLanes& L, Words& ws) {
  static const uint32_t all[kLanes] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                       1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  int32_t* base[kLanes];
  for (uint32_t l = 0; l < kLanes; ++l) base[l] = L.at[l];
  const uint32_t W = g.w[0], R = g.h[0];
  for (uint32_t r = 0; r < R; ++r) {
    for (uint32_t l = 0; l < kLanes; ++l) {
      L.h1[l] = L.h2[l] = L.h3[l] = 0;
      L.phase[l] = rows.phase0[l];
      if (c.rc) {
        const uint32_t rp = c.rc[g.r0[l] + r];
        L.scb[l] = CC ? rp : static_cast<uint32_t>(c.scale[rp]) * c.smul;
      }
    }
    // Column 0 with the run-time tests, then the row's other columns
    // without them (activity contexts read the top and left neighbours).
    if (!int_same_step<MODE, OA, CC, ACT, kPosAny>(c, L, base, uint64_t{r} * c.w, 0, r != 0, all, ws)) return 0;
    if (r != 0) {
      for (uint32_t j = 1; j < W; ++j)
        if (!int_same_step<MODE, OA, CC, ACT, kPosInner>(c, L, base, uint64_t{r} * c.w + j, j, true, all, ws))
          return 0;
    } else {
      for (uint32_t j = 1; j < W; ++j)
        if (!int_same_step<MODE, OA, CC, ACT, kPosRow0>(c, L, base, j, j, false, all, ws)) return 0;
    }
  }
  return 1;
}

// The reference's int_finish_chunk, with 8-bit unsigned codes without zero
// points (one byte a value: value + center) packed in one pass over the
// grid; a value outside 0..255 takes the reference's packing, which
// refuses it (and writes what it writes).
bool finish_chunk(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, uint8_t* out, int32_t* res,
                  int32_t* tmp_tile) {
  if (m.ip.sub != kIntU8 || m.zp) return int_finish_chunk(m, cv, tile_map, out, res, tmp_tile);
  if (tile_map) {
    const uint32_t tr = (cv.h + kTile - 1) / kTile, tc = (cv.w + kTile - 1) / kTile;
    for (uint32_t ti = 0; ti < tr; ++ti)
      for (uint32_t tj = 0; tj < tc; ++tj)
        if (!int_tile_inverse(cv, tile_map, ti, tj, res, tmp_tile)) return false;
  }
  const uint64_t n = uint64_t{cv.h} * cv.w;
  const int32_t center = m.ip.center;
  uint32_t bad = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(res[i] + center);
    bad |= u > 255u;
    out[i] = static_cast<uint8_t>(u);
  }
  if (!bad) return true;
  for (uint32_t r = 0; r < cv.h; ++r)
    if (!int_pack_row(m, cv, r, res, out)) return false;
  return true;
}

}  // namespace

int decode_int_chunk_fast(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
                          uint32_t rans_len, uint8_t* out, int32_t* res, int32_t* tmp_tile, uint8_t* lm) {
  (void)lm;
  if (m.kind != ModelKind::kInt || !m.luts) return -1;
  const IntParams& p = m.ip;
  if (p.nbr_mode == 4) return decode_krow_chunk_fast(m, cv, rans, rans_len, out);
  if (p.sub > kIntTernary || p.nbr_mode > 3) return -1;
  if (p.nbr_mode >= 2 && (p.period == 0 || p.period > 64)) return -1;
  if (p.nbr_mode == 3 && p.off_a == 0) return -1;
  if ((p.nbr_mode == 1 || p.nbr_mode == 2) && (p.off_a == 1 || p.off_a == 2)) return -1;  // not a valid model
  if (p.ns == 0 || p.nb == 0) return -1;
  const uint64_t n = uint64_t{cv.h} * cv.w;
  if (n == 0 || n >= (1ull << 31)) return -1;
  if (m.n0 < int_nctx(p)) return -1;  // every context the loop forms has a table
  if ((p.use_rc && !m.rc) || (p.use_cc && !m.cc)) return -1;
  if (p.sub == kIntTernary) {
    // Tables of the tokens 0..2 only: the ternary loop (else this one).
    const int r = fast::decode_tern_chunk_fast(m, cv, tile_map, rans, rans_len, out, res);
    if (r >= 0) return r;
  }
  IntCfg c;
  if (!contiguous_tables(m.t0, m.n0, &c.sym, &c.fs)) return -1;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;
  c.act = m.luts->act;
  c.scale = m.luts->scale;
  c.rc = p.use_rc ? m.rc + cv.row0 : nullptr;
  c.cc = p.use_cc ? m.cc + cv.col0 : nullptr;
  c.smul = p.nbr_mode == 1 ? (p.off_b ? 243u : 81u) : p.nbr_mode == 2 ? 9u * p.period : p.nb;
  c.ob = p.nbr_mode == 1 ? p.off_b : 0u;
  c.esc = p.esc;
  c.period = p.nbr_mode >= 2 ? p.period : 1u;
  c.oa = p.off_a;
  c.w = cv.w;
  for (uint32_t kp = 0; kp < 64; ++kp) {
    const uint32_t k = p.nbr_mode == 3 && kp < c.period ? int_kernel_nbrs(p, kp) : 0u;
    c.lmask[kp] = k & 1 ? -1 : 0;
    c.umask[kp] = k & 2 ? -1 : 0;
  }
  Geom g;
  lane_geometry(cv, &g);
  LaneRows rows;
  IntLanes L;
  const bool cc = c.cc != nullptr;
  for (uint32_t l = 0; l < kLanes; ++l) {
    rows.w[l] = g.w[l];
    rows.h[l] = g.h[l];
    rows.c0[l] = g.c0[l];
    rows.r0[l] = g.r0[l];
    rows.phase0[l] = (cv.col0 + g.c0[l]) % c.period;
    L.x[l] = load_elem(rans + 4 * l, 4);
    L.h1[l] = L.h2[l] = L.h3[l] = 0;
    L.at[l] = res + uint64_t{g.r0[l]} * cv.w + g.c0[l];
    L.col[l] = L.row[l] = 0;
    L.phase[l] = rows.phase0[l];
    L.tok[l] = 0;
    L.ccl[l] = cc ? c.cc + g.c0[l] : nullptr;
    const uint32_t rp = c.rc && g.n[l] ? c.rc[g.r0[l]] : 0u;
    L.scb[l] = cc ? rp : static_cast<uint32_t>(c.scale[rp]) * c.smul;
  }
  Words ws;
  words_open(&ws, rans, rans_len);
  // The extra neighbour: from the registers up to 3 back, else the row.
  // (Mode 0 with one activity class does not read it.)
  const int oa = p.off_a == 0 || (p.nbr_mode == 0 && p.nb == 1) ? 0 : (p.off_a <= 3 ? p.off_a : 4);
  int ok = 0;
#define WC_FAST_INT(MODEv, OAv)                                                                             \
  if (p.nbr_mode == MODEv && oa == OAv) {                                                                   \
    if constexpr (MODEv == 3 || OAv == 0) {                                                                 \
      if (g.same && p.nb == 1)                                                                              \
        ok = cc ? int_same<MODEv, OAv, true, false>(c, g, rows, L, ws)                                      \
                : int_same<MODEv, OAv, false, false>(c, g, rows, L, ws);                                    \
    }                                                                                                       \
    if (g.same && p.nb > 1)                                                                                 \
      ok = cc ? int_same<MODEv, OAv, true, true>(c, g, rows, L, ws) : int_same<MODEv, OAv, false, true>(c, g, rows, L, ws); \
    if (!g.same)                                                                                            \
      ok = cc ? int_lanes<MODEv, OAv, true>(c, g, rows, L, ws) : int_lanes<MODEv, OAv, false>(c, g, rows, L, ws); \
  }
  WC_FAST_INT(0, 0)
  WC_FAST_INT(0, 1)
  WC_FAST_INT(0, 2)
  WC_FAST_INT(0, 3)
  WC_FAST_INT(0, 4)
  WC_FAST_INT(3, 1)
  WC_FAST_INT(3, 2)
  WC_FAST_INT(3, 3)
  WC_FAST_INT(3, 4)
#undef WC_FAST_INT
  // The exact-neighbour modes (no activity; off_a is 3..64 or unused).
#define WC_FAST_NBR(MODEv, OAv)                                                                              \
  if (p.nbr_mode == MODEv && oa == OAv) {                                                                    \
    if (g.same)                                                                                              \
      ok = cc ? int_same<MODEv, OAv, true, false>(c, g, rows, L, ws) : int_same<MODEv, OAv, false, false>(c, g, rows, L, ws); \
    else                                                                                                     \
      ok = cc ? int_lanes<MODEv, OAv, true>(c, g, rows, L, ws) : int_lanes<MODEv, OAv, false>(c, g, rows, L, ws); \
  }
  WC_FAST_NBR(1, 0)
  WC_FAST_NBR(1, 3)
  WC_FAST_NBR(1, 4)
  WC_FAST_NBR(2, 0)
  WC_FAST_NBR(2, 3)
  WC_FAST_NBR(2, 4)
#undef WC_FAST_NBR
  if (!ok || !words_done(ws)) return 0;
  for (uint32_t l = 0; l < kLanes; ++l)
    if (L.x[l] != kRansL) return 0;
  return finish_chunk(m, cv, tile_map, out, res, tmp_tile) ? 1 : 0;
}

}  // namespace wcodec
