// codec/decompress/chunk_decode_fast_float.cpp — the portable fast decoder
// of float chunks (scalar decoder path; method in chunk_decode_fast.h).
//
// Two forms: joint symbols (emode 5: sign, exponent and high mantissa bits
// as one symbol per element; F16 / BF16 / FP8) and exponent + sign/mantissa
// symbols (emodes 0-4; any element size). Per model a few small lookup
// tables replace the context arithmetic: the joint symbol of the left
// neighbour -> the next context, exponent -> context class, sign/mantissa
// symbol -> the element's high bits and the left-sign context. The
// same-rectangle loop is specialised by (first row, first column); chunks
// whose lanes differ in size take a loop with per-lane column counters.
// The lane-major elements then go to raster order with the raw low
// mantissa bits ORed in.
// Thread-safety: pure functions over their arguments and the caller's
// scratch.
#include <cstdint>
#include <cstring>

#include "chunk_decode_fast_i.h"

namespace wcodec {
namespace {
using namespace fast;

// Per-model constants of the float loops.
struct FloatCfg {
  const uint8_t* sym0;  // exponent / joint tables
  const uint32_t* fs0;
  const uint8_t* sym1;  // sign/mantissa tables
  const uint32_t* fs1;
  uint32_t mb, emask;
  uint16_t jctx[257];    // joint: previous symbol -> context (256: none, context 0)
  uint8_t ecls[256];     // exponent -> class (clamp(e - elo, 0, ne - 1))
  uint8_t jq[256];       // exponent -> emode 4 class (clamp(e - elo, 0, 5))
  uint32_t ne;
  uint16_t smc[256];     // exponent -> sign/mantissa context base
  uint8_t lsg[256];      // sign/mantissa symbol -> the right neighbour's left-sign term
  uint32_t smhi[256];    // sign/mantissa symbol -> sign and high mantissa bits in place
  uint32_t jshift;       // joint: symbol -> element high bits (the raw bits)
};

WC_FAST_INLINE uint32_t ctx_index(int v, int lo, int n) {
  return static_cast<uint32_t>(clampi(v - lo, 0, n - 1));
}

void float_cfg(const ModelView& m, FloatCfg* c) {
  const FloatParams& p = m.fp;
  c->mb = p.mb;
  c->emask = (1u << p.eb) - 1;
  c->ne = p.ne;
  c->jshift = float_raw_bits(p);
  for (uint32_t v = 0; v < 256; ++v) {
    c->ecls[v] = static_cast<uint8_t>(ctx_index(static_cast<int>(v), p.elo, p.ne));
    c->jq[v] = static_cast<uint8_t>(ctx_index(static_cast<int>(v), p.elo, kJointClasses));
    if (float_joint(p)) {
      // Symbols past the alphabet (no table codes them) keep context 0.
      const uint32_t e = float_joint_e(p, v), sign = float_joint_sm(p, v) >> p.k;
      c->jctx[v] = v < float_e_nsym(p) ? static_cast<uint16_t>(float_joint_ctx(p, static_cast<int>(e), sign)) : 0;
    } else {
      c->smc[v] = static_cast<uint16_t>(float_sm_ctx(p, v, 0));
      c->lsg[v] = static_cast<uint8_t>(p.sign_ctx ? 1 + ((v >> p.k) & 1) : 0);
      const uint32_t sign = (v >> p.k) & 1, mh = v & ((1u << p.k) - 1);
      c->smhi[v] = sign << (p.eb + p.mb) | mh << float_raw_bits(p);
    }
  }
  c->jctx[256] = 0;
}

// The exponent's context from its left (le, hl) and top (te, ht)
// neighbours (float_e_ctx_lt).
template <int EM>
WC_FAST_INLINE uint32_t exp_ctx(const FloatCfg& c, bool hl, bool ht, uint32_t le, uint32_t te) {
  if constexpr (EM == 0) {
    return 0;
  } else if constexpr (EM == 1) {
    return hl ? c.ecls[le] : (ht ? c.ecls[te] : 0u);
  } else if constexpr (EM == 3) {
    return ht ? c.ecls[te] : (hl ? c.ecls[le] : 0u);
  } else if constexpr (EM == 2) {
    if (hl && ht) {
      const uint32_t far = le - te + 1 > 2u;  // |le - te| > 1
      return far * c.ne + c.ecls[(le + te + 1) >> 1];
    }
    return hl ? c.ecls[le] : (ht ? c.ecls[te] : 0u);
  } else {  // EM == 4
    constexpr uint32_t J = kJointClasses;
    if (hl && ht) return 1 + c.jq[le] * J + c.jq[te];
    if (hl) return 1 + J * J + c.jq[le];
    return ht ? 1 + J * J + J + c.jq[te] : 0u;
  }
}

// Lane state of the two-symbol loops.
struct TwoLanes {
  uint32_t x[kLanes];
  uint32_t le[kLanes];   // left exponent
  uint32_t ls[kLanes];   // left-sign term of the sign/mantissa context
  uint32_t ee[kLanes];   // this step's exponent
};

// One step of lane range [l0, l1) of the two-symbol form: exponents (all
// lanes), then sign/mantissa symbols. lm: this step's row; top: the row W
// steps back (lane l's top at top[l], read when ht).
template <int EM, class T, bool HL, bool HT>
WC_FAST_INLINE void two_step(const FloatCfg& c, TwoLanes& L, const T* top, T* row, const uint8_t* p, uint32_t& pos) {
  for (uint32_t l = 0; l < kLanes; ++l) {
    const uint32_t te = HT ? (static_cast<uint32_t>(top[l]) >> c.mb) & c.emask : 0u;
    const uint32_t ctx = exp_ctx<EM>(c, HL, HT, L.le[l], te);
    L.ee[l] = decode_renorm(L.x[l], c.sym0 + ctx * 4096, c.fs0 + ctx * 256, p, pos);
  }
  for (uint32_t l = 0; l < kLanes; ++l) {
    const uint32_t e = L.ee[l];
    const uint32_t ctx = c.smc[e] + (HL ? L.ls[l] : 0u);
    const uint32_t s = decode_renorm(L.x[l], c.sym1 + ctx * 4096, c.fs1 + ctx * 256, p, pos);
    row[l] = static_cast<T>(c.smhi[s] | e << c.mb);
    L.le[l] = e;
    L.ls[l] = c.lsg[s];
  }
}

// Same-rectangle lanes (R rows of W steps each).
template <int EM, class T>
int two_same(const FloatCfg& c, Words& ws, TwoLanes& L, uint32_t R, uint32_t W, T* lm) {
  for (uint32_t r = 0; r < R; ++r) {
    for (uint32_t j = 0; j < W; ++j) {
      if (!words_ready(&ws, 2 * kLanes)) return 0;
      const uint64_t t = uint64_t{r} * W + j;
      T* row = lm + t * kLanes;
      const T* top = r ? row - uint64_t{W} * kLanes : row;
      uint32_t pos = ws.pos;
      if (r == 0 && j == 0) two_step<EM, T, false, false>(c, L, top, row, ws.p, pos);
      else if (r == 0) two_step<EM, T, true, false>(c, L, top, row, ws.p, pos);
      else if (j == 0) two_step<EM, T, false, true>(c, L, top, row, ws.p, pos);
      else two_step<EM, T, true, true>(c, L, top, row, ws.p, pos);
      ws.pos = pos;
    }
  }
  return 1;
}

// Lanes of different sizes: per-lane column counters; lanes past their
// element count skip their symbols (as the reference's inactive lanes).
template <int EM, class T>
int two_ragged(const FloatCfg& c, Words& ws, TwoLanes& L, const Geom& g, T* lm) {
  uint32_t col[kLanes] = {};
  for (uint32_t t = 0; t < g.steps; ++t) {
    if (!words_ready(&ws, 2 * kLanes)) return 0;
    T* row = lm + uint64_t{t} * kLanes;
    uint32_t pos = ws.pos;
    const uint8_t* p = ws.p;
    for (uint32_t l = 0; l < kLanes; ++l) {
      if (t >= g.n[l]) continue;
      const bool hl = col[l] != 0, ht = t >= g.w[l];
      // The top neighbour: this lane's element w[l] steps back (indexed from
      // lm: a negative offset from row in unsigned arithmetic would wrap).
      const uint32_t te =
          ht ? (static_cast<uint32_t>(lm[uint64_t{t - g.w[l]} * kLanes + l]) >> c.mb) & c.emask : 0u;
      uint32_t ctx;
      if (hl) ctx = ht ? exp_ctx<EM>(c, true, true, L.le[l], te) : exp_ctx<EM>(c, true, false, L.le[l], te);
      else ctx = ht ? exp_ctx<EM>(c, false, true, L.le[l], te) : exp_ctx<EM>(c, false, false, L.le[l], te);
      L.ee[l] = decode_renorm(L.x[l], c.sym0 + ctx * 4096, c.fs0 + ctx * 256, p, pos);
    }
    for (uint32_t l = 0; l < kLanes; ++l) {
      if (t >= g.n[l]) continue;
      const uint32_t e = L.ee[l];
      const uint32_t ctx = c.smc[e] + (col[l] ? L.ls[l] : 0u);
      const uint32_t s = decode_renorm(L.x[l], c.sym1 + ctx * 4096, c.fs1 + ctx * 256, p, pos);
      row[l] = static_cast<T>(c.smhi[s] | e << c.mb);
      L.le[l] = e;
      L.ls[l] = c.lsg[s];
      col[l] = col[l] + 1 == g.w[l] ? 0u : col[l] + 1;
    }
    ws.pos = pos;
  }
  return 1;
}

// Joint symbols: one per element, the context from the left neighbour's
// symbol (jctx; 256 at a row start).
template <class T>
int joint_same(const FloatCfg& c, Words& ws, uint32_t* x, uint32_t R, uint32_t W, T* lm) {
  uint32_t j[kLanes];
  for (uint32_t r = 0; r < R; ++r) {
    for (uint32_t l = 0; l < kLanes; ++l) j[l] = 256;
    for (uint32_t k = 0; k < W; ++k) {
      if (!words_ready(&ws, kLanes)) return 0;
      T* row = lm + (uint64_t{r} * W + k) * kLanes;
      uint32_t pos = ws.pos;
      const uint8_t* p = ws.p;
      for (uint32_t l = 0; l < kLanes; ++l) {
        const uint32_t ctx = c.jctx[j[l]];
        const uint32_t s = decode_renorm(x[l], c.sym0 + ctx * 4096, c.fs0 + ctx * 256, p, pos);
        j[l] = s;
        row[l] = static_cast<T>(s << c.jshift);
      }
      ws.pos = pos;
    }
  }
  return 1;
}

template <class T>
int joint_ragged(const FloatCfg& c, Words& ws, uint32_t* x, const Geom& g, T* lm) {
  uint32_t j[kLanes], col[kLanes] = {};
  for (uint32_t l = 0; l < kLanes; ++l) j[l] = 256;
  for (uint32_t t = 0; t < g.steps; ++t) {
    if (!words_ready(&ws, kLanes)) return 0;
    T* row = lm + uint64_t{t} * kLanes;
    uint32_t pos = ws.pos;
    const uint8_t* p = ws.p;
    for (uint32_t l = 0; l < kLanes; ++l) {
      if (t >= g.n[l]) continue;
      const uint32_t ctx = c.jctx[j[l]];
      const uint32_t s = decode_renorm(x[l], c.sym0 + ctx * 4096, c.fs0 + ctx * 256, p, pos);
      row[l] = static_cast<T>(s << c.jshift);
      const bool end = col[l] + 1 == g.w[l];
      j[l] = end ? 256u : s;
      col[l] = end ? 0u : col[l] + 1;
    }
    ws.pos = pos;
  }
  return 1;
}

// The raw bits of element i: from the stored section below ns, else from
// the tail buffer (its first element at bit bit0 of the section).
struct RawSrc {
  const uint8_t* raw;
  const uint8_t* buf;
  uint64_t ns, bit0;
  uint32_t rawb;
};
// get_bits with one 4-byte load (the section has 4 readable bytes past its
// last field: float_raw_ok; the tail buffer ends with 4 zero bytes).
WC_FAST_INLINE uint32_t bits_at(const uint8_t* p, uint64_t pos, uint32_t n) {
  uint32_t v;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, p + (pos >> 3), 4);
  } else {
    v = load_elem(p + (pos >> 3), 4);
  }
  return (v >> (pos & 7)) & ((1u << n) - 1);
}
template <int RB>
WC_FAST_INLINE uint32_t raw_at(const RawSrc& s, uint64_t i) {
  if constexpr (RB == 0) {
    return 0;
  } else if constexpr (RB == 8) {
    return i < s.ns ? s.raw[i] : s.buf[i - s.bit0 / 8];
  } else {
    return i < s.ns ? bits_at(s.raw, i * s.rawb, s.rawb) : bits_at(s.buf, i * s.rawb - s.bit0, s.rawb);
  }
}

// Lane-major elements -> raster order, raw bits ORed in. Per lane row of
// the lanes, all lanes: the rows' lines of lm stay in cache.
template <class T, int RB>
void to_raster(const Geom& g, uint32_t w, const T* lm, const RawSrc& rs, uint8_t* out) {
  uint32_t rows = 0;
  for (uint32_t l = 0; l < kLanes; ++l) rows = g.h[l] > rows ? g.h[l] : rows;
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t l = 0; l < kLanes; ++l) {
      if (r >= g.h[l]) continue;
      const uint32_t W = g.w[l];
      const uint64_t i0 = uint64_t{g.r0[l] + r} * w + g.c0[l];
      const T* src = lm + uint64_t{r} * W * kLanes + l;
      uint8_t* o = out + i0 * sizeof(T);
      for (uint32_t k = 0; k < W; ++k)
        store_le<T>(o + k * sizeof(T), static_cast<T>(src[uint64_t{k} * kLanes] | raw_at<RB>(rs, i0 + k)));
    }
  }
}

template <class T>
int float_chunk_t(const ModelView& m, const FloatCfg& c, const ChunkView& cv, const uint8_t* rans,
                  uint32_t rans_len, const uint8_t* raw, uint8_t* out, uint8_t* lmb, bool tail) {
  const FloatParams& p = m.fp;
  Geom g;
  lane_geometry(cv, &g);
  Words ws;
  words_open(&ws, rans, rans_len);
  T* lm = reinterpret_cast<T*>(lmb);
  TwoLanes L;
  for (uint32_t l = 0; l < kLanes; ++l) {
    L.x[l] = load_elem(rans + 4 * l, 4);
    L.le[l] = L.ls[l] = L.ee[l] = 0;
  }
  int ok = 0;
  if (float_joint(p)) {
    ok = g.same ? joint_same<T>(c, ws, L.x, g.h[0], g.w[0], lm) : joint_ragged<T>(c, ws, L.x, g, lm);
  } else {
#define WC_FAST_TWO(EMv)                                                                               \
  case EMv:                                                                                            \
    ok = g.same ? two_same<EMv, T>(c, ws, L, g.h[0], g.w[0], lm) : two_ragged<EMv, T>(c, ws, L, g, lm); \
    break;
    switch (p.emode) {
      WC_FAST_TWO(0)
      WC_FAST_TWO(1)
      WC_FAST_TWO(2)
      WC_FAST_TWO(3)
      WC_FAST_TWO(4)
      default: return -1;
    }
#undef WC_FAST_TWO
  }
  if (!ok || !words_done(ws)) return 0;
  // Every lane back at the encoder's initial state (a raw tail chunk:
  // plus its 16-bit tail word).
  uint32_t x_tail[kLanes];
  for (uint32_t l = 0; l < kLanes; ++l) {
    if (L.x[l] < kRansL || L.x[l] - kRansL > (tail ? 0xFFFFu : 0u)) return 0;
    x_tail[l] = L.x[l] - kRansL;
  }
  const uint64_t n = uint64_t{cv.h} * cv.w;
  RawSrc rs{raw, nullptr, n, 0, float_raw_bits(p)};
  uint8_t buf[kRawTailBuf];
  if (tail) {
    float_raw_tail(p, n, raw, x_tail, buf, &rs.ns, &rs.bit0);
    rs.buf = buf;
  }
  if (rs.rawb == 0) to_raster<T, 0>(g, cv.w, lm, rs, out);
  else if (rs.rawb == 8) to_raster<T, 8>(g, cv.w, lm, rs, out);
  else to_raster<T, 1>(g, cv.w, lm, rs, out);
  return 1;
}

}  // namespace

size_t fast_lane_major_bytes(const ChunkView& cv) {
  // steps <= ceil(h / ly) * ceil(w / lx) <= h * w / 32 + h + w; up to 4
  // bytes per element (the same bound as simd_lane_major_bytes).
  const uint64_t steps = uint64_t{cv.h} * cv.w / kLanes + cv.h + cv.w + 1;
  return static_cast<size_t>((steps + 16) * kLanes * 4 + 64);
}

int decode_float_chunk_fast(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                            const uint8_t* raw, uint64_t raw_len, uint8_t* out, uint8_t* lm, bool tail) {
  if (m.kind != ModelKind::kFloat) return -1;
  const FloatParams& p = m.fp;
  const uint32_t E = p.elem_bytes;
  if (E != 1 && E != 2 && E != 4) return -1;
  // Configurations the encoder writes (others: the reference decides).
  if (p.eb == 0 || p.eb > 8 || p.k > 7 || p.k > p.mb || 1u + p.eb + p.mb != 8 * E || p.ne == 0 || p.nm == 0)
    return -1;
  const bool joint = float_joint(p);
  if (joint && 1u + p.eb + p.k > 8) return -1;
  if (!joint && p.emode > 4) return -1;
  const uint64_t n = uint64_t{cv.h} * cv.w;
  if (n == 0 || n >= (1ull << 31)) return -1;
  // Every context the loops can form has a table.
  if (m.n0 < float_e_nctx(p) || (!joint && m.n1 < float_sm_nctx(p))) return -1;
  FloatCfg c;
  if (!contiguous_tables(m.t0, m.n0, &c.sym0, &c.fs0)) return -1;
  if (!joint && !contiguous_tables(m.t1, m.n1, &c.sym1, &c.fs1)) return -1;
  if (!float_raw_ok(p, n, raw_len, tail)) return 0;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;
  float_cfg(m, &c);
  switch (E) {
    case 1: return float_chunk_t<uint8_t>(m, c, cv, rans, rans_len, raw, out, lm, tail);
    case 2: return float_chunk_t<uint16_t>(m, c, cv, rans, rans_len, raw, out, lm, tail);
    default: return float_chunk_t<uint32_t>(m, c, cv, rans, rans_len, raw, out, lm, tail);
  }
}

}  // namespace wcodec
