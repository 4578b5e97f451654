// codec/common/chunk_model.h — the symbol models of the weight codec and the
// chunk decoder, in code that compiles for host and CUDA device.
//
// A tensor is viewed as a grid of elements [rows, cols] (for packed 4-bit and
// 2-bit codes an element is one code). A chunk is a rectangle of that grid
// whose bytes are contiguous in the original file: a band of whole rows, or a
// segment of one row. The chunk is split into 32 lane rectangles (lane_rect);
// lane l walks its rectangle in raster order, one element per step, so every
// context a lane needs (left, top neighbours) was decoded by that lane
// itself: the 32 lanes are independent except for sharing one rANS word
// stream. Symbol decode order: for each step t, for each symbol slot of an
// element, for lane 0..31 (lanes past their element count skip).
//
// Three models (docs/wcodec-format.md, "Models"):
//   float : exponent (context: predicted from left/top exponents), then
//           sign + k high mantissa bits (context: exponent, left sign), then
//           the remaining mantissa bits stored raw in a packed bit section.
//   int   : codes mapped to signed values (int8, uint8, 4-bit, ternary),
//           optional per-tile intra prediction and 8x8 integer transforms,
//           residual tokens (zig-zag, escape classes + extra bits) with
//           contexts from a scale class (row/column side information) and
//           the lane's left/top neighbours.
//   bytes : any other element type, one symbol per byte plane with the plane
//           index and the left element's byte as context.
// Thread-safety: all functions are pure over the views passed in.
#pragma once

#include <cstdint>

#include "hd.h"
#include "rans.h"
#include "tile_tools.h"

namespace wcodec {

enum class ModelKind : uint8_t { kFloat = 1, kInt = 2, kBytes = 3 };

// ---------------------------------------------------------------- geometry
struct LaneRect {
  uint32_t r0, c0, h, w;
};

WC_HD inline void lane_grid(uint32_t h, uint32_t w, uint32_t* lx, uint32_t* ly) {
  uint32_t x = kLanes;
  while (x > 1 && w / x < 8) x >>= 1;
  *lx = x;
  *ly = kLanes / x;
  (void)h;
}

WC_HD inline LaneRect lane_rect(uint32_t h, uint32_t w, uint32_t lane) {
  uint32_t lx, ly;
  lane_grid(h, w, &lx, &ly);
  const uint32_t ix = lane % lx, iy = lane / lx;
  const uint32_t c0 = static_cast<uint32_t>(uint64_t{w} * ix / lx);
  const uint32_t c1 = static_cast<uint32_t>(uint64_t{w} * (ix + 1) / lx);
  const uint32_t r0 = static_cast<uint32_t>(uint64_t{h} * iy / ly);
  const uint32_t r1 = static_cast<uint32_t>(uint64_t{h} * (iy + 1) / ly);
  return LaneRect{r0, c0, r1 - r0, c1 - c0};
}

// Lane cursors: position inside each lane's rectangle.
struct LaneCursor {
  LaneRect rect;
  uint32_t n;  // elements
  uint32_t r, c;
};

// Lane l's cursor at the start of its rectangle.
WC_HD inline LaneCursor lane_cursor(uint32_t h, uint32_t w, uint32_t l) {
  const LaneRect rect = lane_rect(h, w, l);
  return LaneCursor{rect, rect.h * rect.w, rect.r0, rect.c0};
}
WC_HD inline uint32_t init_cursors(uint32_t h, uint32_t w, LaneCursor* cur) {
  uint32_t steps = 0;
  for (uint32_t l = 0; l < kLanes; ++l) {
    cur[l] = lane_cursor(h, w, l);
    if (cur[l].n > steps) steps = cur[l].n;
  }
  return steps;
}
WC_HD inline void advance(LaneCursor& k) {
  if (++k.c == k.rect.c0 + k.rect.w) {
    k.c = k.rect.c0;
    ++k.r;
  }
}

// ---------------------------------------------------------------- float
struct FloatParams {
  uint8_t elem_bytes;  // 1, 2 or 4
  uint8_t eb, mb;      // exponent and mantissa bits (sign is the top bit)
  uint8_t k;           // high mantissa bits coded with the sign (0..7, <= mb)
  uint8_t emode;       // 0: order-0, 1: left, 2: left+top average, 3: top, 4: joint left x top,
                       // 5: one symbol per element (float_joint)
  uint8_t ne;          // exponent context classes (>= 1)
  uint8_t nm;          // sign/mantissa context classes by exponent (>= 1)
  uint8_t sign_ctx;    // 1: sign/mantissa context also uses the left sign
  int16_t elo;         // exponent mapped to context class 0
  int16_t mlo;         // exponent mapped to sign/mantissa class 0
};

inline constexpr int kJointClasses = 6;
inline constexpr uint8_t kFloatJointMode = 5;
// emode 5: sign, exponent and the k high mantissa bits are one symbol
// J = sign << (eb + k) | E << k | mh (at most 8 bits: 1 + eb + k <= 8), in
// the exponent tables; no sign/mantissa tables. One rANS step per element
// instead of two (F16 with k = 2: J is the element's high byte).
WC_HD inline bool float_joint(const FloatParams& p) { return p.emode == kFloatJointMode; }
WC_HD inline uint32_t float_e_nctx(const FloatParams& p) {
  if (p.emode == 4) return 1u + kJointClasses * kJointClasses + 2u * kJointClasses;
  if (float_joint(p)) return 1u + 2u * p.ne;
  return p.emode ? 2u * p.ne : 1u;
}
WC_HD inline uint32_t float_sm_nctx(const FloatParams& p) {
  return float_joint(p) ? 0u : p.nm * (p.sign_ctx ? 3u : 1u);
}
// Alphabet of the exponent tables: exponents, or joint symbols.
WC_HD inline uint32_t float_e_nsym(const FloatParams& p) {
  return float_joint(p) ? 1u << (1 + p.eb + p.k) : 1u << p.eb;
}
WC_HD inline uint32_t float_raw_bits(const FloatParams& p) { return p.mb - p.k; }

WC_HD inline int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Context of an exponent from its left and top neighbours' exponents (-1:
// no such neighbour in the lane's rectangle).
WC_HD inline uint32_t float_e_ctx_lt(const FloatParams& p, int l, int t) {
  if (p.emode == 0) return 0;
  if (l < 0 && t < 0) return 0;
  if (p.emode == 4) {
    const int ql = clampi(l - p.elo, 0, kJointClasses - 1), qt = clampi(t - p.elo, 0, kJointClasses - 1);
    if (l >= 0 && t >= 0) return static_cast<uint32_t>(1 + ql * kJointClasses + qt);
    return static_cast<uint32_t>(1 + kJointClasses * kJointClasses + (l >= 0 ? ql : kJointClasses + qt));
  }
  int pred;
  int act = 0;
  if (p.emode == 1) {
    pred = l >= 0 ? l : t;
  } else if (p.emode == 3) {
    pred = t >= 0 ? t : l;
  } else if (l >= 0 && t >= 0) {
    pred = (l + t + 1) >> 1;
    act = (l - t > 1 || t - l > 1) ? 1 : 0;
  } else {
    pred = l >= 0 ? l : t;
  }
  return static_cast<uint32_t>(act * p.ne + clampi(pred - p.elo, 0, p.ne - 1));
}

// Context of the exponent at chunk position (r, c); e_grid holds the
// exponents decoded so far at chunk positions, stride w.
WC_HD inline uint32_t float_e_ctx(const FloatParams& p, const uint16_t* e_grid, uint32_t w, uint32_t r,
                                  uint32_t c, bool has_l, bool has_t) {
  if (p.emode == 0) return 0;
  return float_e_ctx_lt(p, has_l ? e_grid[r * w + c - 1] : -1, has_t ? e_grid[(r - 1) * w + c] : -1);
}

WC_HD inline uint32_t float_sm_ctx(const FloatParams& p, uint32_t e, int left_sign /*0 none,1 +,2 -*/) {
  const uint32_t m = static_cast<uint32_t>(clampi(static_cast<int>(e) - p.mlo, 0, p.nm - 1));
  return p.sign_ctx ? m * 3 + static_cast<uint32_t>(left_sign) : m;
}

// Joint symbol context (emode 5) from the left neighbour's exponent and sign
// (left_e -1: none): 0 without one, else 1 + 2 * class + sign.
WC_HD inline uint32_t float_joint_ctx(const FloatParams& p, int left_e, uint32_t left_sign) {
  if (left_e < 0) return 0;
  return 1u + 2u * static_cast<uint32_t>(clampi(left_e - p.elo, 0, p.ne - 1)) + left_sign;
}
// Joint symbol <-> (exponent, sign/mantissa symbol S = sign << k | mh).
WC_HD inline uint32_t float_joint_sym(const FloatParams& p, uint32_t e, uint32_t sm) {
  return (sm >> p.k) << (p.eb + p.k) | e << p.k | (sm & ((1u << p.k) - 1));
}
WC_HD inline uint32_t float_joint_e(const FloatParams& p, uint32_t j) { return (j >> p.k) & ((1u << p.eb) - 1); }
WC_HD inline uint32_t float_joint_sm(const FloatParams& p, uint32_t j) {
  return (j >> (p.eb + p.k)) << p.k | (j & ((1u << p.k) - 1));
}

// ---------------------------------------------------------------- int
enum IntSub : uint8_t { kIntI8 = 0, kIntU8 = 1, kIntNibble = 2, kIntTernary = 3 };

struct IntParams {
  uint8_t sub;         // IntSub
  uint8_t center;      // U8 / nibble: value = code - center (when no zero points)
  uint16_t esc;        // tokens below esc are zig-zag values; esc + nb are escapes
  uint16_t nsym;       // token alphabet size (esc + kEscClasses)
  uint8_t nbr_mode;    // 0: activity classes + left sign; 1: exact ternary neighbours;
                       // 2: exact ternary neighbours 1 and off_a back x column phase
                       //    (col % period); 3: convolution kernels flattened along a
                       //    row (period elements, off_a wide): activity classes of the
                       //    left and upper neighbours inside the kernel x their signs;
                       // 4 (format 2.10, ternary): kernel-row symbols, three codes of
                       //    a 3x3 kernel's row as one symbol of 27, lanes on kernels
                       //    (kern_rows_* below)
  uint8_t nb;          // activity classes (mode 0), 1..8
  uint16_t thr[7];     // activity thresholds (ascending), nb - 1 used
  uint8_t ns;          // scale classes, 1..16
  uint8_t sthr[15];    // scale thresholds on rc + cc (ascending), ns - 1 used
  uint8_t use_rc, use_cc;
  uint8_t tools;       // 1: chunks may carry a tile mode map
  uint32_t zgroup;     // > 0: per-group zero points from an aux tensor (nibble)
  uint8_t off_a;       // mode 0: extra activity neighbour this many columns back (0: none);
                       // mode 1: third left neighbour offset (3..64); mode 3: kernel
                       // width (1..period, divides period)
  uint8_t off_b;       // mode 1: fourth left neighbour offset (0: none, else 3..64)
  uint8_t period;      // modes 2, 3: column period (2..64; e.g. 9 for 3x3 kernels
                       // flattened along a row); serialized only in modes 2, 3, 4
};

// nbr_mode 4 (format 2.10): ternary codes of 3x3 convolution kernels
// flattened along a row, coded a kernel row (three codes) per symbol:
// symbol = q0 + 3 q1 + 9 q2 with q the codes (0: 0, 1: +1, 2: -1; code 3
// has no symbol). A chunk's kernels (9 consecutive codes of a row; rows are
// whole kernels) go to the lanes in turn: lane l owns kernels l, l + 32,
// l + 64, ... and decodes each kernel's rows 0, 1, 2. The context of row j
// is 0 for j = 0, else 1 + 27 (j - 1) + the symbol of row j - 1 of the same
// kernel, plus kKernRowCtx x the kernel's scale class (row classes only).
inline constexpr uint32_t kKernRowSyms = 27;
inline constexpr uint32_t kKernRowCtx = 1 + 2 * kKernRowSyms;  // 55 per scale class
inline constexpr uint32_t kKernRowCodes = 9;                   // codes per kernel
inline constexpr uint32_t kKrowEntCtx = 1 + 2 * 64;  // ModelView::krow_ent's contexts per scale class
WC_HD inline uint32_t kern_rows_ctx(uint32_t sc, uint32_t j, uint32_t above) {
  return sc * kKernRowCtx + (j == 0 ? 0u : 1u + kKernRowSyms * (j - 1) + above);
}
// Kernels of lane l in a chunk of n kernels.
WC_HD inline uint32_t kern_rows_lane_n(uint64_t n, uint32_t l) {
  return n > l ? static_cast<uint32_t>((n - l + kLanes - 1) / kLanes) : 0u;
}

inline constexpr uint32_t kEscClasses = 18;
inline constexpr uint32_t kTile = 16;

WC_HD inline uint32_t int_nctx(const IntParams& p) {
  if (p.nbr_mode == 4) return p.ns * kKernRowCtx;
  if (p.nbr_mode == 2) return p.ns * p.period * 9u;
  if (p.nbr_mode == 3) return p.ns * p.nb * 9u;
  return p.nbr_mode == 1 ? p.ns * (p.off_b ? 243u : 81u) : p.ns * p.nb * 3u;
}

WC_HD inline uint32_t iabs32(int32_t v) { return v < 0 ? static_cast<uint32_t>(-v) : static_cast<uint32_t>(v); }

// Lookup tables derived from IntParams: activity -> class (activity is
// clamped to 1023) and scale value rc + cc (0..62) -> scale class.
struct IntLuts {
  uint8_t act[1024];
  uint8_t scale[64];
  uint8_t pad[4];  // 32-bit gathers of the last byte stay inside the struct
};

WC_HD inline void build_int_luts(const IntParams& p, IntLuts* L) {
  for (uint32_t a = 0; a < 1024; ++a) {
    uint32_t k = 0;
    for (uint32_t i = 0; i + 1 < p.nb; ++i) k += a >= p.thr[i];
    L->act[a] = static_cast<uint8_t>(k);
  }
  for (uint32_t s = 0; s < 64; ++s) {
    uint32_t k = 0;
    for (uint32_t i = 0; i + 1 < p.ns; ++i) k += s >= p.sthr[i];
    L->scale[s] = static_cast<uint8_t>(k);
  }
}

// nbr_mode 0 context from the activity a (clamped to 1023 here), the left
// sign class ls (0: none or zero, 1: positive, 2: negative) and the scale
// class sc.
WC_HD inline uint32_t int_ctx_act(const IntParams& p, const IntLuts& L, uint32_t a, uint32_t ls, uint32_t sc) {
  return (sc * p.nb + L.act[a > 1023 ? 1023 : a]) * 3u + ls;
}

// nbr_mode 3 context from the kernel neighbours: lk (left, same kernel row)
// and uk (above, same kernel column), 0 where the kernel has none.
WC_HD inline uint32_t int_ctx_kernel(const IntParams& p, const IntLuts& L, int32_t lk, int32_t uk, uint32_t sc) {
  auto q = [](int32_t v) { return v > 0 ? 1u : (v < 0 ? 2u : 0u); };
  const uint32_t a = iabs32(lk) + iabs32(uk);
  return ((sc * p.nb + L.act[a > 1023 ? 1023 : a]) * 3u + q(lk)) * 3u + q(uk);
}

// Whether the element at kernel phase kp (tensor column % period) has a left
// (bit 0) and an upper (bit 1) neighbour inside its kernel (nbr_mode 3).
WC_HD inline uint32_t int_kernel_nbrs(const IntParams& p, uint32_t kp) {
  return (kp % p.off_a != 0 ? 1u : 0u) | (kp >= p.off_a ? 2u : 0u);
}

// Context from the neighbours' residuals: l, l2 (1 and 2 columns back), la
// (off_a back), lb (off_b back), t (row above); absent ones are 0. hl/ht:
// whether the left / top neighbours exist. kp: the element's column phase
// (tensor column % period; modes 2 and 3 only).
WC_HD inline uint32_t int_ctx_vals(const IntParams& p, const IntLuts& L, int32_t l, int32_t l2, int32_t la,
                                   int32_t lb, int32_t t, bool hl, bool ht, uint32_t sc, uint32_t kp = 0) {
  if (p.nbr_mode == 2) {
    auto q = [](int32_t v) { return v > 0 ? 1u : (v < 0 ? 2u : 0u); };
    return (sc * p.period + kp) * 9u + q(l) * 3u + q(la);
  }
  if (p.nbr_mode == 3) {
    const uint32_t k = int_kernel_nbrs(p, kp);
    return int_ctx_kernel(p, L, k & 1 ? l : 0, k & 2 ? la : 0, sc);
  }
  if (p.nbr_mode == 1) {
    auto q = [](int32_t v) { return v > 0 ? 1u : (v < 0 ? 2u : 0u); };
    const uint32_t k = ((q(l) * 3u + q(l2)) * 3u + q(la)) * 3u + q(t);
    return p.off_b ? sc * 243u + k * 3u + q(lb) : sc * 81u + k;
  }
  uint32_t a = 2 * iabs32(l) + iabs32(t) + iabs32(l2) + iabs32(la);
  if (!hl && ht) a += 2 * iabs32(t);
  return int_ctx_act(p, L, a, l > 0 ? 1u : (l < 0 ? 2u : 0u), sc);
}

// Context of the residual token at chunk position (r, c) (lane-local
// rectangle starting at column c0 / row r0); res holds residuals decoded so
// far (stride w). sc is the scale class; kp the column phase (tensor column
// % period) for nbr_modes 2 and 3, else unused.
WC_HD inline uint32_t int_ctx(const IntParams& p, const IntLuts& L, const int32_t* res, uint32_t w, uint32_t r,
                              uint32_t c, uint32_t r0, uint32_t c0, uint32_t sc, uint32_t kp) {
  const int32_t* row = res + static_cast<uint64_t>(r) * w;
  const bool hl = c > c0, ht = r > r0;
  const int32_t l = hl ? row[c - 1] : 0;
  const int32_t l2 = c > c0 + 1 ? row[c - 2] : 0;
  const uint32_t oa = p.off_a, ob = p.nbr_mode == 1 ? p.off_b : 0u;
  const int32_t la = oa && c >= c0 + oa ? row[c - oa] : 0;
  const int32_t lb = ob && c >= c0 + ob ? row[c - ob] : 0;
  const int32_t t = ht ? row[static_cast<int64_t>(c) - static_cast<int64_t>(w)] : 0;
  return int_ctx_vals(p, L, l, l2, la, lb, t, hl, ht, sc, kp);
}

WC_HD inline uint32_t int_scale_class(const IntParams& p, const IntLuts& L, const uint8_t* rc, const uint8_t* cc,
                                      uint32_t row, uint32_t col) {
  return L.scale[(p.use_rc ? rc[row] : 0u) + (p.use_cc ? cc[col] : 0u)];
}

// Token <-> zig-zag value. Escape: d = u - esc, nb = bit width of d; extra
// nb - 1 bits (below the leading one) follow as uniform symbols.
WC_HD inline uint32_t bit_width32(uint32_t v) {
  uint32_t n = 0;
  while (v) {
    ++n;
    v >>= 1;
  }
  return n;
}
// The token of value v: its zig-zag value below esc, else esc + the bit
// width of the excess.
WC_HD inline uint32_t int_token(int32_t v, uint32_t esc) {
  const uint32_t u = static_cast<uint32_t>(tile::zz_encode(v));
  return u < esc ? u : esc + bit_width32(u - esc);
}

// Tile transform map: the chunk stores one byte per tile holding 2 bits per
// 8x8 sub-block, sub-block (by, bx) of the 2x2 grid at bits 2*(2*by + bx).
// tile_tools indexes its map by by * tile_blocks_x(w) + bx.
WC_HD inline void unpack_xform_map(uint8_t packed, int th, int tw, uint8_t* out /*4*/) {
  const int bx_n = tile::tile_blocks_x(tw), by_n = tile::tile_blocks_y(th);
  for (int i = 0; i < 4; ++i) out[i] = 0;
  for (int by = 0; by < by_n && by < 2; ++by)
    for (int bx = 0; bx < bx_n && bx < 2; ++bx) out[by * bx_n + bx] = (packed >> (2 * (2 * by + bx))) & 3;
}

// ---------------------------------------------------------------- bytes
struct BytesParams {
  uint8_t elem_bytes;  // 1..16
  uint8_t ctx_mode;    // 0: plane only, 1: plane x left-byte class
};
WC_HD inline uint32_t bytes_nctx(const BytesParams& p) { return p.elem_bytes * (p.ctx_mode ? 4u : 1u); }
// Class of a left byte that exists: 1 zero, 2 below 16 or from 240, 3
// otherwise (0: no left byte).
WC_HD inline uint32_t bytes_left_class(uint32_t left) {
  return left == 0 ? 1u : (left < 16 || left >= 240 ? 2u : 3u);
}
WC_HD inline uint32_t bytes_ctx(const BytesParams& p, uint32_t plane, int left /* -1 none */) {
  if (!p.ctx_mode) return plane;
  return plane * 4u + (left < 0 ? 0u : bytes_left_class(static_cast<uint32_t>(left)));
}

// The decoders' view of a chunk and of its model (chunk_decode.h,
// chunk_decode_simd.h, device_plan.h).
struct ChunkView {
  uint32_t h, w;        // chunk rectangle in elements
  uint32_t row0, col0;  // position in the tensor grid
  uint32_t grid_cols;   // tensor grid columns
};

struct ModelView {
  ModelKind kind;
  FloatParams fp;
  IntParams ip;
  BytesParams bp;
  const DecTable* t0;  // float exponent / int token / byte planes
  const DecTable* t1;  // float sign+mantissa
  uint32_t n0, n1;     // table counts
  const uint8_t* rc;   // int: row classes (tensor rows)
  const uint8_t* cc;   // int: column classes (tensor cols)
  const uint8_t* zp;   // int nibble: zero points [rows][zcols] or nullptr
  uint32_t zcols;
  const IntLuts* luts;  // int: derived lookup tables
  // Flattened tables for vector decoders (nullptr if not built):
  // slot_all[ctx * 4096 + slot] = symbol | (freq - 1) << 8 | offset << 20;
  // rc/cc copies padded by 4 bytes.
  const uint32_t* slot_all;   // t0 (int tokens, float exponents)
  const uint32_t* slot1_all;  // t1 (float sign/mantissa)
  // Small int alphabets (nsym <= 32) and bytes models: sym_small[ctx * 4096
  // + slot] (padded by 4 bytes), fs_small[ctx * 256 + sym] = freq | start
  // << 16 (the reference tables' storage).
  const uint8_t* sym_small;
  const uint32_t* fs_small;
  const uint8_t* rc_pad;
  const uint8_t* cc_pad;
  // Ternary models whose tables code only tokens 0..2 (values 0, -1, +1):
  // tern3[ctx] = s1 | s2 << 16 with s1 = freq(0), s2 = freq(0) + freq(1)
  // (the slot bounds of tokens 1 and 2); 0x20002000 for an unused (empty)
  // table. nullptr when some table codes another token.
  const uint32_t* tern3;
  // Kernel-row models (nbr_mode 4) whose frequencies are all multiples of
  // 8 (the encoder writes them so): one entry per 8 slots of a context,
  // krow_ent[c * 512 + (slot >> 3)] = codes | freq << 6 | start << 19 with
  // codes the symbol's three 2-bit codes (q0 | q1 << 2 | q2 << 4). The
  // contexts are laid out by codes rather than symbols: c = kKrowEntCtx x
  // scale class + (0 for row 0, else 1 + 64 (j - 1) + the codes of row
  // j - 1), so that a decoder takes the codes as output and context at
  // once. One lookup a symbol, 2 KiB a used context. Else null.
  const uint32_t* krow_ent;
  // 4-bit and uint8 code models (nbr_mode 0 or 3) and float models whose
  // frequencies are all multiples of 8 (the encoder writes them so where
  // that costs little, encode_model_i.h), on the vector paths: one entry
  // per 8 slots, ent8[ctx * 512 + (slot >> 3)] = symbol | (freq - 1) << 8
  // | ((4096 - start) mod 4096) << 20, so that the slot's offset in its
  // symbol is (slot + entry >> 20) mod 4096; 2 KiB a context instead of
  // slot_all's 16. Such models have no slot_all / slot1_all. ent8 holds t0,
  // ent8_1 t1 (float sign / mantissa; null when t1 is empty). Else null.
  const uint32_t* ent8;
  const uint32_t* ent8_1;
};

// Raw tail (payload flag bit 1, §9.2): the last kRawTailBytes bytes of the
// raw bit section are not stored; lane l's final state is kRansL plus
// bytes 2l, 2l + 1 of them (little-endian). Allowed when the section has at
// least kRawTailMin data bytes.
inline constexpr uint32_t kRawTailBytes = 2 * kLanes;  // 64
inline constexpr uint32_t kRawTailMin = 128;

// Maps a code of the stored representation to its signed value and back.
WC_HD inline int32_t int_code_to_value(uint32_t sub, uint32_t code, int32_t center) {
  switch (sub) {
    case kIntI8: return static_cast<int8_t>(code);
    case kIntTernary: return code == 0 ? 0 : (code == 1 ? 1 : (code == 2 ? -1 : 2));
    default: return static_cast<int32_t>(code) - center;
  }
}
WC_HD inline bool int_value_to_code(uint32_t sub, int32_t v, int32_t center, uint32_t* code) {
  switch (sub) {
    case kIntI8:
      if (v < -128 || v > 127) return false;
      *code = static_cast<uint32_t>(v) & 0xFF;
      return true;
    case kIntTernary:
      if (v == 0) *code = 0;
      else if (v == 1) *code = 1;
      else if (v == -1) *code = 2;
      else if (v == 2) *code = 3;
      else return false;
      return true;
    case kIntU8:
      if (v + center < 0 || v + center > 255) return false;
      *code = static_cast<uint32_t>(v + center);
      return true;
    default:
      if (v + center < 0 || v + center > 15) return false;
      *code = static_cast<uint32_t>(v + center);
      return true;
  }
}
WC_HD inline uint32_t int_codes_per_byte(uint32_t sub) {
  return sub == kIntNibble ? 2u : (sub == kIntTernary ? 4u : 1u);
}

}  // namespace wcodec
