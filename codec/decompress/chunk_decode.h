// codec/decompress/chunk_decode.h — decoding one model-coded chunk, for host and
// device. The decoders are written once as templates over a lane group
// (lane_group.h; the *_g functions): the CPU reference decoder runs them
// with HostGroup (the lanes in a loop; the plain-named wrappers), the CUDA
// kernel with one warp per chunk (cuda/warp_group.cuh).
//
// All inputs are plain views; nothing allocates. Scratch buffers are sized by
// the caller (chunk_scratch_bytes). Every read of the payload is bounded; a
// malformed payload yields false, never an out-of-bounds access.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "chunk_model.h"
#include "lane_group.h"

namespace wcodec {

// Reads the n-bit little-endian field at bit position pos of a packed bit
// section (n <= 24).
WC_HD inline uint32_t get_bits(const uint8_t* p, uint64_t pos, uint32_t n) {
  uint64_t byte = pos >> 3;
  uint32_t shift = static_cast<uint32_t>(pos & 7);
  uint64_t v = 0;
  for (uint32_t i = 0; i < 4; ++i) v |= static_cast<uint64_t>(p[byte + i]) << (8 * i);
  return static_cast<uint32_t>((v >> shift) & ((1ull << n) - 1));
}

WC_HD inline uint32_t load_elem(const uint8_t* p, uint32_t bytes) {
  uint32_t v = 0;
  for (uint32_t i = 0; i < bytes; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
WC_HD inline void store_elem(uint8_t* p, uint32_t bytes, uint32_t v) {
  for (uint32_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Opens a chunk stream for lane group g: each lane's initial state x (the
// stream's first 32 words of 4 bytes), its cursor at the start of its
// rectangle, err cleared; ws over the rest of the stream (zero_word: two
// readable zero bytes for an empty word stream). Returns the number of steps
// (the largest lane's element count), or -1 for a stream too short or of odd
// length.
template <class G>
WC_HD inline int64_t lanes_open(G& g, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                                typename G::template Lanes<uint32_t>& x, typename G::template Lanes<uint32_t>& err,
                                typename G::template Lanes<LaneCursor>& cur, WordSource* ws,
                                const uint8_t* zero_word) {
  if (rans_len < 4 * kLanes || (rans_len & 1)) return -1;
  const uint32_t nwords = (rans_len - 4 * kLanes) / 2;
  *ws = WordSource{nwords ? rans + 4 * kLanes : zero_word, nwords, 0, 0};
  g.each([&](uint32_t l) {
    x[l] = load_elem(rans + 4 * l, 4);
    err[l] = 0;
    cur[l] = lane_cursor(cv.h, cv.w, l);
  });
  return g.max([&](uint32_t l) { return cur[l].n; });
}

// ---------------------------------------------------------------- float
// scratch: h*w uint16 exponents + h*w uint8 sign/mantissa.

// Data bytes of a chunk's raw bit section.
WC_HD inline uint64_t float_raw_data_bytes(const FloatParams& p, uint64_t n) {
  return (n * float_raw_bits(p) + 7) / 8;
}

// Size check of the raw bit section (+4: get_bits reads 4 bytes).
WC_HD inline bool float_raw_ok(const FloatParams& p, uint64_t n, uint64_t raw_len, bool tail = false) {
  const uint32_t rawb = float_raw_bits(p);
  const uint64_t d = float_raw_data_bytes(p, n);
  if (tail) return rawb && d >= kRawTailMin && raw_len >= d - kRawTailBytes + 4;
  return raw_len >= d + (rawb ? 4 : 0);
}

// Raw tail: elements [0, *n_stored) take their raw bits from the stored
// section as usual; the rest from buf (at least kRawTailBuf bytes), which
// gets the stored bytes from byte *bit0 / 8 on (element *n_stored starts at
// bit 0 of buf), then the tail from the lanes' final states (x_tail[l] =
// state - kRansL), then 4 zero bytes. Returns the bytes written to buf.
inline constexpr uint32_t kRawTailBuf = 2 * kRawTailBytes + 8;
// The split of a raw tail chunk: elements [0, *n_stored) read the stored
// section; the buffer starts at stored byte *b0.
WC_HD inline void float_raw_tail_split(const FloatParams& p, uint64_t n, uint64_t* n_stored, uint64_t* b0) {
  const uint32_t rawb = float_raw_bits(p);
  const uint64_t stored = float_raw_data_bytes(p, n) - kRawTailBytes;
  // Elements whose bits end in the stored bytes, rounded down so that the
  // first buffered element starts on a byte boundary.
  const uint32_t step = 8 / (rawb & 7 ? (rawb & 3 ? (rawb & 1 ? 1 : 2) : 4) : 8);
  uint64_t ns = stored * 8 / rawb;
  ns -= ns % step;
  *n_stored = ns;
  *b0 = ns * rawb / 8;
}
WC_HD inline uint32_t float_raw_tail(const FloatParams& p, uint64_t n, const uint8_t* raw, const uint32_t* x_tail,
                                     uint8_t* buf, uint64_t* n_stored, uint64_t* bit0) {
  const uint64_t stored = float_raw_data_bytes(p, n) - kRawTailBytes;
  uint64_t ns, b0;
  float_raw_tail_split(p, n, &ns, &b0);
  uint32_t k = 0;
  for (uint64_t i = b0; i < stored; ++i) buf[k++] = raw[i];
  for (uint32_t l = 0; l < kLanes; ++l) {
    buf[k++] = static_cast<uint8_t>(x_tail[l]);
    buf[k++] = static_cast<uint8_t>(x_tail[l] >> 8);
  }
  for (uint32_t i = 0; i < 4; ++i) buf[k++] = 0;
  *n_stored = ns;
  *bit0 = b0 * 8;
  return k;
}

// Where decode_float_values_g puts the symbols it decodes and finds the
// top neighbours it reads: the exponent and sign/mantissa grids (h*w each,
// raster order). Another keeper (float_direct.h: a lane-interleaved ring,
// elements assembled into the output as they are decoded) provides the
// same calls.
struct FloatGridCells {
  const ModelView* m;
  uint16_t* e_grid;
  uint8_t* sm_grid;
  uint32_t w;
  // Before the first step: lane l's cursor k at its start; then once, with
  // the step count.
  WC_HD void start(uint32_t, const LaneCursor&) {}
  template <class G>
  WC_HD void begin(G&, uint32_t) {}
  // The exponent above lane l's cursor k (inside its rectangle).
  WC_HD int top(uint32_t, const LaneCursor& k) const { return e_grid[(k.r - 1) * w + k.c]; }
  // One symbol of context ctx from the exponent (0) or sign/mantissa (1)
  // tables.
  WC_HD uint32_t sym0(uint32_t& x, uint32_t ctx) const { return rans_decode_sym(x, m->t0[ctx]); }
  WC_HD uint32_t sym1(uint32_t& x, uint32_t ctx) const { return rans_decode_sym(x, m->t1[ctx]); }
  // Lane l's element at k: exponent e, sign/mantissa symbol sm.
  WC_HD void done(uint32_t, const LaneCursor& k, uint32_t e, uint32_t sm) {
    e_grid[k.r * w + k.c] = static_cast<uint16_t>(e);
    sm_grid[k.r * w + k.c] = static_cast<uint8_t>(sm);
  }
};

// Entropy-decodes the symbols of a float chunk with lane group g
// (lane_group.h) into `cells` (FloatGridCells or another keeper). x_tail:
// null, or (raw tail chunks) receives each lane's tail word.
template <class G, class Cells>
WC_HD inline bool decode_float_values_g(G& g, const ModelView& m, const ChunkView& cv, const uint8_t* rans,
                                        uint32_t rans_len, Cells& cells,
                                        typename G::template Lanes<uint32_t>* x_tail = nullptr) {
  const FloatParams& p = m.fp;
  typename G::template Lanes<uint32_t> x, err;
  typename G::template Lanes<LaneCursor> cur;
  const uint8_t zero_word[2] = {0, 0};
  WordSource ws;
  const int64_t open = lanes_open(g, cv, rans, rans_len, x, err, cur, &ws, zero_word);
  if (open < 0) return false;
  const uint32_t steps = static_cast<uint32_t>(open);
  const bool joint = float_joint(p);
  if (steps && (m.n0 == 0 || (!joint && m.n1 == 0))) return false;  // no table to decode with
  // The lane's left neighbour (exponent; sign/mantissa symbol) and its own
  // exponent stay in registers; only the top neighbour is read back.
  typename G::template Lanes<uint32_t> left_e, left_sm, own_e;
  g.each([&](uint32_t l) {
    left_e[l] = left_sm[l] = own_e[l] = 0;
    cells.start(l, cur[l]);
  });
  cells.begin(g, steps);
  for (uint32_t t = 0; joint && t < steps; ++t) {
    // One symbol per element: sign, exponent and high mantissa bits.
    auto active = [&](uint32_t l) { return t < cur[l].n; };
    g.each([&](uint32_t l) {
      if (!active(l)) return;
      uint32_t ctx = cur[l].c > cur[l].rect.c0 ? float_joint_ctx(p, static_cast<int>(left_e[l]), left_sm[l] >> p.k) : 0u;
      err[l] |= ctx >= m.n0;
      ctx = ctx < m.n0 ? ctx : 0;
      const uint32_t j = cells.sym0(x[l], ctx);
      left_e[l] = float_joint_e(p, j);
      left_sm[l] = float_joint_sm(p, j);
      cells.done(l, cur[l], left_e[l], left_sm[l]);
    });
    g.renorm(x, ws, active);
    g.each([&](uint32_t l) {
      if (active(l)) advance(cur[l]);
    });
  }
  for (uint32_t t = 0; !joint && t < steps; ++t) {
    auto active = [&](uint32_t l) { return t < cur[l].n; };
    g.each([&](uint32_t l) {
      if (!active(l)) return;
      const bool has_l = cur[l].c > cur[l].rect.c0, has_t = cur[l].r > cur[l].rect.r0;
      uint32_t ctx = p.emode == 0 ? 0u
                                  : float_e_ctx_lt(p, has_l ? static_cast<int>(left_e[l]) : -1,
                                                   has_t ? cells.top(l, cur[l]) : -1);
      err[l] |= ctx >= m.n0;
      ctx = ctx < m.n0 ? ctx : 0;
      own_e[l] = cells.sym0(x[l], ctx);
    });
    g.renorm(x, ws, active);
    g.each([&](uint32_t l) {
      if (!active(l)) return;
      const int ls = cur[l].c > cur[l].rect.c0 ? static_cast<int>(1 + (left_sm[l] >> p.k)) : 0;
      uint32_t ctx = float_sm_ctx(p, own_e[l], ls);
      err[l] |= ctx >= m.n1;
      ctx = ctx < m.n1 ? ctx : 0;
      left_sm[l] = cells.sym1(x[l], ctx);
      left_e[l] = own_e[l];
      cells.done(l, cur[l], own_e[l], left_sm[l]);
    });
    g.renorm(x, ws, active);
    g.each([&](uint32_t l) {
      if (active(l)) advance(cur[l]);
    });
  }
  if (ws.bad || ws.pos != ws.n) return false;
  // Every lane back at the encoder's initial state (kRansL, or kRansL plus
  // its 16-bit tail word).
  if (g.any([&](uint32_t l) {
        return err[l] || x[l] < kRansL || x[l] - kRansL > (x_tail ? 0xFFFFu : 0u);
      }))
    return false;
  if (x_tail) g.each([&](uint32_t l) { (*x_tail)[l] = x[l] - kRansL; });
  return true;
}

// Entropy-decodes the exponent and sign/mantissa grids of a float chunk
// with lane group g (lane_group.h). x_tail: null, or (raw tail chunks)
// receives each lane's tail word.
template <class G>
WC_HD inline bool decode_float_symbols_g(G& g, const ModelView& m, const ChunkView& cv, const uint8_t* rans,
                                         uint32_t rans_len, uint16_t* e_grid, uint8_t* sm_grid,
                                         typename G::template Lanes<uint32_t>* x_tail = nullptr) {
  FloatGridCells cells{&m, e_grid, sm_grid, cv.w};
  return decode_float_values_g(g, m, cv, rans, rans_len, cells, x_tail);
}

WC_HD inline bool decode_float_symbols(const ModelView& m, const ChunkView& cv, const uint8_t* rans,
                                       uint32_t rans_len, uint16_t* e_grid, uint8_t* sm_grid,
                                       uint32_t* x_tail = nullptr) {
  HostGroup g;
  HostGroup::Lanes<uint32_t> xt;
  if (!decode_float_symbols_g(g, m, cv, rans, rans_len, e_grid, sm_grid, x_tail ? &xt : nullptr)) return false;
  if (x_tail)
    for (uint32_t l = 0; l < kLanes; ++l) x_tail[l] = xt[l];
  return true;
}

// An element's bits from its exponent e, sign/mantissa symbol sm (sign and
// k high mantissa bits) and raw low mantissa bits lo.
WC_HD inline uint32_t float_element(const FloatParams& p, uint32_t e, uint32_t sm, uint32_t lo) {
  return ((sm >> p.k) << (p.eb + p.mb)) | (e << p.mb) | ((sm & ((1u << p.k) - 1)) << float_raw_bits(p)) | lo;
}

// Assembles elements [i0, i1) from the exponent, sign/mantissa and raw bits
// (element i's raw field at bit i * rawb - bit0 of raw).
WC_HD inline void float_assemble_range(const FloatParams& p, uint64_t i0, uint64_t i1, const uint8_t* raw,
                                       uint64_t bit0, const uint16_t* e_grid, const uint8_t* sm_grid, uint8_t* out) {
  const uint32_t rawb = float_raw_bits(p);
  for (uint64_t i = i0; i < i1; ++i) {
    const uint32_t lo = rawb ? get_bits(raw, i * rawb - bit0, rawb) : 0u;
    store_elem(out + i * p.elem_bytes, p.elem_bytes, float_element(p, e_grid[i], sm_grid[i], lo));
  }
}
WC_HD inline void float_assemble(const FloatParams& p, uint64_t n, const uint8_t* raw, const uint16_t* e_grid,
                                 const uint8_t* sm_grid, uint8_t* out) {
  float_assemble_range(p, 0, n, raw, 0, e_grid, sm_grid, out);
}

// Assembly of a raw tail chunk (x_tail: the lanes' tail words).
WC_HD inline void float_assemble_tail(const FloatParams& p, uint64_t n, const uint8_t* raw, const uint32_t* x_tail,
                                      const uint16_t* e_grid, const uint8_t* sm_grid, uint8_t* out) {
  uint8_t buf[kRawTailBuf];
  uint64_t ns = 0, bit0 = 0;
  float_raw_tail(p, n, raw, x_tail, buf, &ns, &bit0);
  float_assemble_range(p, 0, ns, raw, 0, e_grid, sm_grid, out);
  float_assemble_range(p, ns, n, buf, bit0, e_grid, sm_grid, out);
}

WC_HD inline bool decode_float_chunk(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                                     const uint8_t* raw, uint64_t raw_len, uint8_t* out, uint16_t* e_grid,
                                     uint8_t* sm_grid, bool tail = false) {
  const uint64_t n = uint64_t{cv.h} * cv.w;
  if (!float_raw_ok(m.fp, n, raw_len, tail)) return false;
  uint32_t x_tail[kLanes];
  if (!decode_float_symbols(m, cv, rans, rans_len, e_grid, sm_grid, tail ? x_tail : nullptr)) return false;
  if (tail) float_assemble_tail(m.fp, n, raw, x_tail, e_grid, sm_grid, out);
  else float_assemble(m.fp, n, raw, e_grid, sm_grid, out);
  return true;
}

// Bytes of shared memory decode_float_chunk_g needs for a raw tail chunk.
inline constexpr uint32_t kFloatTailShared = 4 * kLanes + kRawTailBuf;

// The raw tail buffer of a tail chunk (float_raw_tail) built in `shared`
// (kFloatTailShared bytes, 4-aligned, all lanes can read) from the lanes'
// tail words xt by one lane; every lane may read it when this returns.
template <class G>
WC_HD inline const uint8_t* float_tail_buffer_g(G& g, const FloatParams& p, uint64_t n, const uint8_t* raw,
                                                typename G::template Lanes<uint32_t>& xt, uint8_t* shared) {
  uint32_t* xs = reinterpret_cast<uint32_t*>(shared);
  uint8_t* tb = shared + 4 * kLanes;
  g.each([&](uint32_t l) { xs[l] = xt[l]; });
  g.sync();
  g.one([&] {
    uint64_t ns1, bit1;
    float_raw_tail(p, n, raw, xs, tb, &ns1, &bit1);
  });
  g.sync();
  return tb;
}

// decode_float_chunk with lane group g: symbols by lanes, then elements
// assembled lane by lane (element i by lane i % 32). shared: for a raw tail
// chunk, kFloatTailShared bytes (4-aligned) all lanes can read.
template <class G>
WC_HD inline bool decode_float_chunk_g(G& g, const ModelView& m, const ChunkView& cv, const uint8_t* rans,
                                       uint32_t rans_len, const uint8_t* raw, uint64_t raw_len, uint8_t* out,
                                       uint16_t* e_grid, uint8_t* sm_grid, bool tail, uint8_t* shared) {
  const FloatParams& p = m.fp;
  const uint64_t n = uint64_t{cv.h} * cv.w;
  if (!float_raw_ok(p, n, raw_len, tail)) return false;
  typename G::template Lanes<uint32_t> xt;
  if (!decode_float_symbols_g(g, m, cv, rans, rans_len, e_grid, sm_grid, tail ? &xt : nullptr)) return false;
  uint64_t ns = n, b0 = 0;
  const uint8_t* buf = nullptr;
  if (tail) {
    buf = float_tail_buffer_g(g, p, n, raw, xt, shared);
    float_raw_tail_split(p, n, &ns, &b0);
  }
  g.sync();
  g.each([&](uint32_t l) {
    for (uint64_t i = l; i < n; i += kLanes) {
      if (i < ns) float_assemble_range(p, i, i + 1, raw, 0, e_grid, sm_grid, out);
      else float_assemble_range(p, i, i + 1, buf, 8 * b0, e_grid, sm_grid, out);
    }
  });
  return true;
}

// ---------------------------------------------------------------- int
WC_HD inline int32_t int_center(const ModelView& m, uint32_t row, uint32_t col) {
  if (m.zp) return m.zp[static_cast<uint64_t>(row) * m.zcols + col / m.ip.zgroup];
  return m.ip.center;
}

// Kernel-row symbols (nbr_mode 4, chunk_model.h): the value grid res (h*w
// int32) of a chunk of 3x3 ternary kernels with lane group g. Lane l owns
// kernels l, l + 32, ...; at step t every lane with a kernel t decodes its
// rows 0, 1, 2 in turn (three groups of symbols, words in lane order).
template <class G>
WC_HD inline bool decode_kern_rows_g(G& g, const ModelView& m, const ChunkView& cv, const uint8_t* rans,
                                     uint32_t rans_len, int32_t* res) {
  const IntParams& p = m.ip;
  if (cv.w % kKernRowCodes != 0 || rans_len < 4 * kLanes || (rans_len & 1)) return false;
  const uint64_t nk = uint64_t{cv.h} * cv.w / kKernRowCodes;
  const uint32_t kpr = cv.w / kKernRowCodes;  // kernels per chunk row
  typename G::template Lanes<uint32_t> x, err, above, sc, n;
  const uint8_t zero_word[2] = {0, 0};
  const uint32_t nwords = (rans_len - 4 * kLanes) / 2;
  WordSource ws{nwords ? rans + 4 * kLanes : zero_word, nwords, 0, 0};
  g.each([&](uint32_t l) {
    x[l] = load_elem(rans + 4 * l, 4);
    err[l] = 0;
    above[l] = 0;
    sc[l] = 0;
    n[l] = kern_rows_lane_n(nk, l);
  });
  const uint32_t steps = g.max([&](uint32_t l) { return n[l]; });
  if (steps && m.n0 < int_nctx(p)) return false;  // no table to decode with
  const IntLuts& L = *m.luts;
  for (uint32_t t = 0; t < steps; ++t) {
    auto active = [&](uint32_t l) { return t < n[l]; };
    g.each([&](uint32_t l) {
      if (active(l) && p.use_rc) {
        const uint64_t k = uint64_t{t} * kLanes + l;
        sc[l] = L.scale[m.rc[cv.row0 + k / kpr]];
      }
    });
    for (uint32_t j = 0; j < 3; ++j) {
      g.each([&](uint32_t l) {
        if (!active(l)) return;
        const uint32_t ctx = kern_rows_ctx(sc[l], j, above[l]);
        const uint32_t s = rans_decode_sym(x[l], m.t0[ctx]);
        err[l] |= s >= kKernRowSyms;
        above[l] = s < kKernRowSyms ? s : 0u;
        int32_t* out = res + (uint64_t{t} * kLanes + l) * kKernRowCodes + 3 * j;
        uint32_t q = above[l];
        for (uint32_t i = 0; i < 3; ++i, q /= 3) out[i] = q % 3 == 2 ? -1 : static_cast<int32_t>(q % 3);
      });
      g.renorm(x, ws, active);
    }
  }
  if (ws.bad || ws.pos != ws.n) return false;
  return !g.any([&](uint32_t l) { return err[l] || x[l] != kRansL; });
}

// Where decode_int_values_g keeps the values it decodes and finds the
// neighbours it reads: the residual grid (h*w int32, raster order).
// Another keeper (int_direct.h: a lane-interleaved ring, values packed into
// the output as they become final) provides the same four calls.
struct IntGridCells {
  int32_t* res;
  uint32_t w;
  // The value above (r - 1, c) and the value `off` columns left (r, c - off)
  // of lane l's cursor k (both inside its rectangle).
  WC_HD int32_t top(uint32_t, const LaneCursor& k) const { return res[(k.r - 1) * w + k.c]; }
  WC_HD int32_t left(uint32_t, const LaneCursor& k, uint32_t off) const { return res[k.r * w + k.c - off]; }
  // Lane l's value at k (an escape's value replaces its token's).
  WC_HD void put(uint32_t, const LaneCursor& k, int32_t v) { res[k.r * w + k.c] = v; }
  // Lane l's value at k is final (after its escape bits).
  WC_HD void done(uint32_t, const LaneCursor&, int32_t) {}
};

// Entropy-decodes the values of an int chunk (nbr_mode 0-3) with lane group
// g (lane_group.h) into `cells` (IntGridCells or another keeper).
template <class G, class Cells>
WC_HD inline bool decode_int_values_g(G& g, const ModelView& m, const ChunkView& cv, const uint8_t* rans,
                                      uint32_t rans_len, Cells& cells) {
  const IntParams& p = m.ip;
  typename G::template Lanes<uint32_t> x, err, tok, extra, rowpart;
  typename G::template Lanes<int32_t> h1, h2, h3;  // lane-local left neighbours (1, 2, 3 back)
  typename G::template Lanes<uint32_t> phase;       // nbr_modes 2, 3: (col0 + c) % period
  typename G::template Lanes<LaneCursor> cur;
  const uint8_t zero_word[2] = {0, 0};
  WordSource ws;
  const int64_t open = lanes_open(g, cv, rans, rans_len, x, err, cur, &ws, zero_word);
  if (open < 0) return false;
  const uint32_t steps = static_cast<uint32_t>(open);
  if (steps && (m.n0 == 0)) return false;  // no table to decode with
  const uint32_t oa = p.off_a, ob = p.nbr_mode == 1 ? p.off_b : 0u;
  const IntLuts& L = *m.luts;
  const uint8_t* ccol = p.use_cc ? m.cc + cv.col0 : nullptr;
  const uint32_t period = p.nbr_mode >= 2 ? p.period : 1u;
  g.each([&](uint32_t l) {
    rowpart[l] = p.use_rc && cur[l].n ? m.rc[cv.row0 + cur[l].r] : 0u;
    h1[l] = h2[l] = h3[l] = 0;
    phase[l] = (cv.col0 + cur[l].rect.c0) % period;
  });
  for (uint32_t t = 0; t < steps; ++t) {
    auto active = [&](uint32_t l) { return t < cur[l].n; };
    g.each([&](uint32_t l) {
      tok[l] = 0;
      if (!active(l)) return;
      const uint32_t r = cur[l].r, c = cur[l].c;
      const uint32_t sc = L.scale[rowpart[l] + (ccol ? ccol[c] : 0u)];
      const bool ht = r > cur[l].rect.r0;
      const int32_t top = ht ? cells.top(l, cur[l]) : 0;
      // Neighbours up to 3 back are the lane's registers (0 before the
      // rectangle's first column, as row[] would be absent).
      const int32_t la = oa == 0 ? 0
                         : oa <= 3 ? (oa == 1 ? h1[l] : oa == 2 ? h2[l] : h3[l])
                                   : (c >= cur[l].rect.c0 + oa ? cells.left(l, cur[l], oa) : 0);
      const int32_t lb = ob && c >= cur[l].rect.c0 + ob ? cells.left(l, cur[l], ob) : 0;
      uint32_t ctx = int_ctx_vals(p, L, h1[l], h2[l], la, lb, top, c > cur[l].rect.c0, ht, sc, phase[l]);
      err[l] |= ctx >= m.n0;
      ctx = ctx < m.n0 ? ctx : 0;
      const uint32_t tk = rans_decode_sym(x[l], m.t0[ctx]);
      const int32_t v = tile::zz_decode(static_cast<int32_t>(tk));
      cells.put(l, cur[l], v);
      h3[l] = h2[l];
      h2[l] = h1[l];
      h1[l] = v;
      tok[l] = tk;
    });
    g.renorm(x, ws, active);
    // Escapes: class nb = tok - esc; nb - 1 extra bits, low 8 then the rest.
    auto esc_bits = [&](uint32_t l) -> uint32_t {
      if (!active(l) || tok[l] < p.esc) return 0;
      const uint32_t nb = tok[l] - p.esc;
      return nb < 2 || nb > kEscClasses - 1 ? 0u : nb - 1;
    };
    if (g.any([&](uint32_t l) { return active(l) && tok[l] >= p.esc; })) {
      g.each([&](uint32_t l) {
        const uint32_t e = esc_bits(l);
        extra[l] = e ? rans_decode_bits(x[l], e < 8 ? e : 8) : 0u;
      });
      g.renorm(x, ws, [&](uint32_t l) { return esc_bits(l) != 0; });
      g.each([&](uint32_t l) {
        const uint32_t e = esc_bits(l);
        if (e > 8) extra[l] |= rans_decode_bits(x[l], e - 8) << 8;
      });
      g.renorm(x, ws, [&](uint32_t l) { return esc_bits(l) > 8; });
      g.each([&](uint32_t l) {
        if (!active(l) || tok[l] < p.esc) return;
        const uint32_t nb = tok[l] - p.esc;
        err[l] |= nb > kEscClasses - 1;
        const uint32_t d = nb == 0 || nb > kEscClasses - 1 ? 0u : ((1u << (nb - 1)) | extra[l]);
        h1[l] = tile::zz_decode(static_cast<int32_t>(p.esc + d));
        cells.put(l, cur[l], h1[l]);
      });
    }
    g.each([&](uint32_t l) {
      if (!active(l)) return;
      cells.done(l, cur[l], h1[l]);
      phase[l] = phase[l] + 1 == period ? 0u : phase[l] + 1;
      if (++cur[l].c == cur[l].rect.c0 + cur[l].rect.w) {
        cur[l].c = cur[l].rect.c0;
        ++cur[l].r;
        h1[l] = h2[l] = h3[l] = 0;
        phase[l] = (cv.col0 + cur[l].rect.c0) % period;
        if (p.use_rc && cur[l].r < cv.h) rowpart[l] = m.rc[cv.row0 + cur[l].r];
      }
    });
  }
  if (ws.bad || ws.pos != ws.n) return false;
  return !g.any([&](uint32_t l) { return err[l] || x[l] != kRansL; });
}

// Entropy-decodes the residual grid res (h*w int32) of an int chunk with
// lane group g (lane_group.h).
template <class G>
WC_HD inline bool decode_int_residuals_g(G& g, const ModelView& m, const ChunkView& cv, const uint8_t* rans,
                                         uint32_t rans_len, int32_t* res) {
  if (m.ip.nbr_mode == 4) return decode_kern_rows_g(g, m, cv, rans, rans_len, res);
  IntGridCells cells{res, cv.w};
  return decode_int_values_g(g, m, cv, rans, rans_len, cells);
}

WC_HD inline bool decode_int_residuals(const ModelView& m, const ChunkView& cv, const uint8_t* rans,
                                       uint32_t rans_len, int32_t* res) {
  HostGroup g;
  return decode_int_residuals_g(g, m, cv, rans, rans_len, res);
}

// Reconstructs tile (ti, tj) of a chunk in place: res holds residuals there
// and reconstructed values in the tiles to its left and above (its
// predictors read them). tmp_tile: kTile * kTile int32.
WC_HD inline bool int_tile_inverse(const ChunkView& cv, const uint8_t* tile_map, uint32_t ti, uint32_t tj,
                                   int32_t* res, int32_t* tmp_tile) {
  const uint32_t w = cv.w;
  const uint32_t tc = (w + kTile - 1) / kTile;
  const uint32_t r0 = ti * kTile, c0 = tj * kTile;
  const uint32_t th = cv.h - r0 < kTile ? cv.h - r0 : kTile;
  const uint32_t tw = w - c0 < kTile ? w - c0 : kTile;
  const uint8_t pred = tile_map[2 * (ti * tc + tj)];
  const uint8_t xf = tile_map[2 * (ti * tc + tj) + 1];
  if (pred > tile::kPredDC) return false;
  for (uint32_t s = 0; s < 4; ++s) {
    const uint8_t xs = (xf >> (2 * s)) & 3;
    if (xs > tile::kXformADST) return false;
    const uint32_t sr = (s / 2) * 8, sc2 = (s % 2) * 8;
    if (xs != tile::kXformNone && (sr + 8 > th || sc2 + 8 > tw)) return false;
  }
  if (pred == tile::kPredNone && xf == 0) return true;
  uint8_t xmap[4];
  unpack_xform_map(xf, static_cast<int>(th), static_cast<int>(tw), xmap);
  int32_t left[kTile], top[kTile];
  const bool hl = c0 > 0, ht = r0 > 0;
  for (uint32_t i = 0; i < th; ++i) left[i] = hl ? res[(r0 + i) * w + c0 - 1] : 0;
  for (uint32_t j = 0; j < tw; ++j) top[j] = ht ? res[(r0 - 1) * w + c0 + j] : 0;
  const int32_t tl = (hl && ht) ? res[(r0 - 1) * w + c0 - 1] : 0;
  for (uint32_t i = 0; i < th; ++i)
    for (uint32_t j = 0; j < tw; ++j) tmp_tile[i * tw + j] = res[(r0 + i) * w + c0 + j];
  tile::tile_inverse(static_cast<tile::Pred>(pred), xmap, static_cast<int>(th), static_cast<int>(tw), tmp_tile,
                     hl ? left : nullptr, ht ? top : nullptr, tl, res + r0 * w + c0, static_cast<int>(w));
  return true;
}

// Packs the codes of row r of the value grid res into out (rows are whole
// bytes: w * bits is a multiple of 8). False for a value outside the
// representation.
WC_HD inline bool int_pack_row(const ModelView& m, const ChunkView& cv, uint32_t r, const int32_t* res,
                               uint8_t* out) {
  const IntParams& p = m.ip;
  const uint32_t w = cv.w;
  const uint32_t cpb = int_codes_per_byte(p.sub);
  const uint32_t bits = 8 / cpb;
  const int32_t* vr = res + static_cast<uint64_t>(r) * w;
  uint8_t* orow = out + static_cast<uint64_t>(r) * w / cpb;
  if (p.sub == kIntI8) {
    uint32_t bad = 0;
    for (uint32_t c = 0; c < w; ++c) {
      const int32_t v = vr[c];
      bad |= static_cast<uint32_t>(v + 128) > 255u;
      orow[c] = static_cast<uint8_t>(v);
    }
    return !bad;
  }
  if (p.sub == kIntNibble) {
    // Zero point (or fixed center) per group of zgroup codes of the row.
    const uint8_t* zrow = m.zp ? m.zp + static_cast<uint64_t>(cv.row0 + r) * m.zcols : nullptr;
    uint32_t bad = 0;
    for (uint32_t c = 0; c < w; c += 2) {
      const uint32_t col = cv.col0 + c;
      const int32_t z0 = zrow ? zrow[col / p.zgroup] : p.center;
      const int32_t z1 = zrow ? zrow[(col + 1) / p.zgroup] : p.center;
      const uint32_t c0v = static_cast<uint32_t>(vr[c] + z0), c1v = static_cast<uint32_t>(vr[c + 1] + z1);
      bad |= (c0v > 15u) | (c1v > 15u);
      orow[c / 2] = static_cast<uint8_t>((c0v & 15u) | ((c1v & 15u) << 4));
    }
    return !bad;
  }
  if (p.sub == kIntTernary) {
    // value -> code: 0 -> 0, +1 -> 1, -1 -> 2, +2 -> 3 (reserved code).
    uint32_t bad = 0;
    for (uint32_t c = 0; c < w; c += 4) {
      uint32_t byte = 0;
      for (uint32_t k = 0; k < 4; ++k) {
        const uint32_t u = static_cast<uint32_t>(vr[c + k] + 1);
        bad |= u > 3u;
        byte |= ((0xD2u >> (2 * (u & 3u))) & 3u) << (2 * k);
      }
      orow[c / 4] = static_cast<uint8_t>(byte);
    }
    return !bad;
  }
  for (uint32_t c = 0; c < w; c += cpb) {
    uint32_t byte = 0;
    for (uint32_t k = 0; k < cpb; ++k) {
      uint32_t code;
      if (!int_value_to_code(p.sub, vr[c + k], int_center(m, cv.row0 + r, cv.col0 + c + k), &code)) return false;
      byte |= code << (k * bits);
    }
    orow[c / cpb] = static_cast<uint8_t>(byte);
  }
  return true;
}

// Output byte ob of a chunk (its codes_per_byte values from res: the
// chunk's output is its rows packed back to back). As int_pack_row does for
// the bytes of a row; returns false for a value out of range.
WC_HD inline bool int_pack_byte(const ModelView& m, const ChunkView& cv, uint64_t ob, const int32_t* res,
                                uint8_t* out) {
  const IntParams& p = m.ip;
  const uint32_t cpb = int_codes_per_byte(p.sub), bits = 8 / cpb;
  const uint64_t i = ob * cpb;
  const int32_t* v = res + i;
  if (p.sub == kIntI8) {
    out[ob] = static_cast<uint8_t>(v[0]);
    return static_cast<uint32_t>(v[0] + 128) <= 255u;
  }
  if (p.sub == kIntTernary) {
    uint32_t byte = 0, bad = 0;
    for (uint32_t k = 0; k < 4; ++k) {
      const uint32_t u = static_cast<uint32_t>(v[k] + 1);
      bad |= u > 3u;
      byte |= ((0xD2u >> (2 * (u & 3u))) & 3u) << (2 * k);
    }
    out[ob] = static_cast<uint8_t>(byte);
    return !bad;
  }
  const uint32_t r = static_cast<uint32_t>(i / cv.w), c = static_cast<uint32_t>(i % cv.w);
  uint32_t byte = 0;
  for (uint32_t k = 0; k < cpb; ++k) {
    uint32_t code;
    if (!int_value_to_code(p.sub, v[k], int_center(m, cv.row0 + r, cv.col0 + c + k), &code)) return false;
    byte |= code << (k * bits);
  }
  out[ob] = static_cast<uint8_t>(byte);
  return true;
}

// Reconstructs tiles (when a tile map is present) and packs the codes of
// the residual grid res into out.
WC_HD inline bool int_finish_chunk(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, uint8_t* out,
                                   int32_t* res, int32_t* tmp_tile) {
  if (tile_map) {
    // Tiles in raster order; reconstruct in place (res becomes values).
    const uint32_t tr = (cv.h + kTile - 1) / kTile, tc = (cv.w + kTile - 1) / kTile;
    for (uint32_t ti = 0; ti < tr; ++ti)
      for (uint32_t tj = 0; tj < tc; ++tj)
        if (!int_tile_inverse(cv, tile_map, ti, tj, res, tmp_tile)) return false;
  }
  for (uint32_t r = 0; r < cv.h; ++r)
    if (!int_pack_row(m, cv, r, res, out)) return false;
  return true;
}

// int_finish_chunk with lane group g: tiles by anti-diagonals (a tile's
// predictors read only tiles of earlier diagonals), the tiles of one
// diagonal spread over the lanes; then output bytes packed by the lanes in
// turn.
template <class G>
WC_HD inline bool int_finish_chunk_g(G& g, const ModelView& m, const ChunkView& cv, const uint8_t* tile_map,
                                     uint8_t* out, int32_t* res) {
  typename G::template Lanes<uint32_t> err;
  g.each([&](uint32_t l) { err[l] = 0; });
  if (tile_map) {
    const uint32_t tr = (cv.h + kTile - 1) / kTile, tc = (cv.w + kTile - 1) / kTile;
    for (uint32_t d = 0; d + 1 < tr + tc; ++d) {
      // Tiles (ti, d - ti) with ti in [lo, hi].
      const uint32_t lo = d >= tc ? d - tc + 1 : 0, hi = d < tr - 1 ? d : tr - 1;
      g.each([&](uint32_t l) {
        int32_t tmp_tile[kTile * kTile];
        for (uint32_t ti = lo + l; ti <= hi; ti += kLanes)
          err[l] |= !int_tile_inverse(cv, tile_map, ti, d - ti, res, tmp_tile);
      });
      g.sync();
    }
  }
  // Output bytes by lanes (lane l: bytes l, l + 32, ...): a warp's reads of
  // res and writes of out are consecutive.
  const uint64_t nb = uint64_t{cv.h} * cv.w / int_codes_per_byte(m.ip.sub);
  g.each([&](uint32_t l) {
    for (uint64_t ob = l; ob < nb; ob += kLanes) err[l] |= !int_pack_byte(m, cv, ob, res, out);
  });
  return !g.any([&](uint32_t l) { return err[l] != 0; });
}

WC_HD inline bool decode_int_chunk(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map,
                                   const uint8_t* rans, uint32_t rans_len, uint8_t* out, int32_t* res,
                                   int32_t* tmp_tile) {
  return decode_int_residuals(m, cv, rans, rans_len, res) && int_finish_chunk(m, cv, tile_map, out, res, tmp_tile);
}

// ---------------------------------------------------------------- bytes
template <class G>
WC_HD inline bool decode_bytes_chunk_g(G& g, const ModelView& m, const ChunkView& cv, const uint8_t* rans,
                                       uint32_t rans_len, uint8_t* out) {
  const uint32_t eb = m.bp.elem_bytes;
  const uint32_t w = cv.w;
  typename G::template Lanes<uint32_t> x, err;
  typename G::template Lanes<LaneCursor> cur;
  const uint8_t zero_word[2] = {0, 0};
  WordSource ws;
  const int64_t open = lanes_open(g, cv, rans, rans_len, x, err, cur, &ws, zero_word);
  if (open < 0) return false;
  const uint32_t steps = static_cast<uint32_t>(open);
  if (steps && (m.n0 == 0)) return false;  // no table to decode with
  for (uint32_t t = 0; t < steps; ++t) {
    auto active = [&](uint32_t l) { return t < cur[l].n; };
    for (uint32_t b = 0; b < eb; ++b) {
      g.each([&](uint32_t l) {
        if (!active(l)) return;
        const uint32_t r = cur[l].r, c = cur[l].c;
        const uint64_t pos = (uint64_t{r} * w + c) * eb + b;
        const int left = c > cur[l].rect.c0 ? out[pos - eb] : -1;
        uint32_t ctx = bytes_ctx(m.bp, b, left);
        err[l] |= ctx >= m.n0;
        ctx = ctx < m.n0 ? ctx : 0;
        out[pos] = static_cast<uint8_t>(rans_decode_sym(x[l], m.t0[ctx]));
      });
      g.renorm(x, ws, active);
    }
    g.each([&](uint32_t l) {
      if (active(l)) advance(cur[l]);
    });
  }
  if (ws.bad || ws.pos != ws.n) return false;
  return !g.any([&](uint32_t l) { return err[l] || x[l] != kRansL; });
}

WC_HD inline bool decode_bytes_chunk(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                                     uint8_t* out) {
  HostGroup g;
  return decode_bytes_chunk_g(g, m, cv, rans, rans_len, out);
}

}  // namespace wcodec
