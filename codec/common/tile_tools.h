// codec/common/tile_tools.h — tile tools of the weight codec: exactly invertible
// integer 8x8 transforms (DCT-II, ADST), the coefficient scan (zig-zag, bands),
// the intra predictors and the per-tile residual <-> coefficient helpers.
//
// Everything is inline in this header and free of the STL, exceptions, heap
// and mutable globals, so the same code compiles for the host and, under nvcc,
// for CUDA device code (functions are WC_HD). Encoder and the CPU/CUDA
// decoders therefore share one bit-exact definition. All functions are pure
// (they touch only their arguments) and safe to call from any thread.
//
// Transforms
// ----------
// Both transforms are orthonormal 8-point transforms factored into plane
// rotations; every rotation R(t) = [[cos t, -sin t], [sin t, cos t]] acting on
// a pair (a, b) is done as three lifting steps
//     a += [p*b],  b += [u*a],  a += [p*b],   p = -tan(t/2), u = sin t,
// where [m*y] = (M*y + 2^12) >> 13 with M = round(m * 2^13) (kLiftBits = 13).
// Each lifting step is undone exactly by subtracting the same rounded amount,
// so inv8 runs the steps backwards and restores the input bit for bit for
// every int32 input whose intermediates do not overflow (see "Range").
// Negations and permutations are exact. Angles are written in units of pi/32.
//
// kXformDCT: orthonormal DCT-II, X_k = c_k * sum_n x_n cos(pi (2n+1) k / 16),
//   c_0 = sqrt(1/8), c_k = 1/2. Factorization (13 rotations, 39 lifts):
//   1. (x_k, x_{7-k}) -> R(8) -> (d_k, s_k), k = 0..3: d = (x_k - x_{7-k})/sqrt2,
//      s = (x_k + x_{7-k})/sqrt2.
//   2. even half = 4-point DCT-II of s: R(8) on (s0,s3) -> (t3,t0), R(8) on
//      (s1,s2) -> (t2,t1); R(8) on (t0,t1) -> (X4,X0); R(4) on (t2,t3) ->
//      (-X6, X2).
//   3. odd half = 4-point DCT-IV of d via a 2-point complex DFT:
//      v0 = d0 + i d3, v1 = (d2 + i d1) e^{-i pi/4} (R(-8)); unitary DFT-2 on
//      real and imaginary parts (R(8) each); post-twiddles W0 = Z0 e^{-i pi/16}
//      (R(-2)), W1 = Z1 e^{-i 5pi/16} (R(-10)); X1 = Re W0, X7 = -Im W0,
//      X5 = Re W1, X3 = -Im W1.
// kXformADST: orthonormal DST-IV ("ADST" as in VP9's 8-point ADST),
//   A_k = 1/2 * sum_n x_n sin(pi (2n+1)(2k+1) / 32). Its basis functions start
//   small at n = 0 (the predicted edge) and grow towards n = 7, which matches
//   intra-prediction residuals that grow with distance from the edge.
//   Uses DST-IV = J * DCT-IV * D (D negates odd inputs, J reverses outputs)
//   and an 8-point DCT-IV via a 4-point complex DFT (15 rotations, 45 lifts):
//   v_m = (x_{2m} + i x_{7-2m}) e^{-i pi m/8} (R(-4), R(-8), R(-12) for
//   m = 1..3); unitary radix-2 DFT-4 (two stages of R(8) butterflies, the
//   twiddle -i is a swap with negation); W_p = Z_p e^{-i pi (4p+1)/32}
//   (R(-1), R(-5), R(-9), R(-13)); A_{7-2p} = Re W_p, A_{2p} = -Im W_p.
// kXformNone (and any other value) is the identity.
// 2-D: fwd8x8 transforms rows, then columns; inv8x8 undoes columns, then rows.
// Coefficients are row-major: out[8*v + u] is vertical frequency v,
// horizontal frequency u.
//
// Range (proved by propagating |linear form| + accumulated rounding error
// through the lifting graph, and checked by tests/test_tile_tools.cpp):
//   inputs |x| <= kMaxInputMagnitude = 2^11 (8-bit residuals are <= 2^9):
//   1-D outputs |y| <= 5800; 2-D outputs |y| <= 16456 (DCT), <= 14389 (ADST),
//   every intermediate value <= 17173 (< 2^15) and every lifting product
//   |M*y| < 1.35e8 (< 2^28). The inverse on such coefficients retraces the
//   same values. Products are formed in int64 anyway, so inv8x8 stays free
//   of overflow for any coefficients with |c| <= 2^20 (intermediates grow at
//   most 8x), which keeps a decoder fed with corrupt data well defined.
#pragma once

#include <cstdint>

#include "hd.h"

namespace wcodec::tile {

// Predictor mode ids (tile metadata, docs/wcodec-format.md).
enum Pred : uint8_t {
  kPredNone = 0,
  kPredLeft = 1,
  kPredTop = 2,
  kPredAvg = 3,
  kPredPlanar = 4,
  kPredDC = 5,
};

// Per 8x8 sub-block transform ids (2 bits in the transform map).
enum Xform : uint8_t {
  kXformNone = 0,
  kXformDCT = 1,
  kXformADST = 2,
};

// Largest |input| for which the coefficient bound below is guaranteed.
inline constexpr int32_t kMaxInputMagnitude = 1 << 11;
// Every coefficient of fwd8x8 / tile_forward on inputs (residuals) with
// |x| <= kMaxInputMagnitude satisfies |c| <= kMaxCoeffMagnitude. The proved
// bound is 16456 (DCT DC of a constant block is 8 * 2^11 = 16384 plus
// rounding); 2^14 + 2^7 leaves margin. The entropy coder sizes escapes by it.
inline constexpr int32_t kMaxCoeffMagnitude = (1 << 14) + (1 << 7);
// zz_encode(c) < 2^kCoeffZzBits for every |c| <= kMaxCoeffMagnitude.
inline constexpr int kCoeffZzBits = 16;
// Fraction bits of the lifting multipliers.
inline constexpr int kLiftBits = 13;
// Largest tile side the codec uses (the functions work for any h, w >= 1).
inline constexpr int kMaxTileDim = 32;
inline constexpr int kBlock = 8;

static_assert(2 * kMaxCoeffMagnitude < (1 << kCoeffZzBits), "zz-coded coefficient must fit");

// ---------------------------------------------------------------------------
// Zig-zag integers and the coefficient scan.

// Maps a signed value to a non-negative one: 0,-1,1,-2,2 -> 0,1,2,3,4.
// REQUIRES: -2^30 <= v < 2^30 (so the result is a non-negative int32).
WC_HD inline int32_t zz_encode(int32_t v) {
  const uint32_t u = (static_cast<uint32_t>(v) << 1) ^ static_cast<uint32_t>(v >> 31);
  return static_cast<int32_t>(u);
}

// Inverse of zz_encode for every z >= 0.
WC_HD inline int32_t zz_decode(int32_t z) {
  const uint32_t u = static_cast<uint32_t>(z);
  return static_cast<int32_t>((u >> 1) ^ (0u - (u & 1u)));
}

// JPEG zig-zag scan: raster position (row*8 + col) of scan index i, 0..63.
// Anti-diagonal d = row + col is walked upwards (row decreasing) when d is
// even, downwards when d is odd. REQUIRES: 0 <= i < 64.
WC_HD inline int zigzag8x8(int i) {
  constexpr uint8_t kScan[64] = {
      0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,
      12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28,
      35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
      58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};
  return kScan[i];
}

// Scan index of raster position pos: unzigzag8x8(zigzag8x8(i)) == i.
// REQUIRES: 0 <= pos < 64.
WC_HD inline int unzigzag8x8(int pos) {
  constexpr uint8_t kIndex[64] = {
      0,  1,  5,  6,  14, 15, 27, 28, 2,  4,  7,  13, 16, 26, 29, 42,
      3,  8,  12, 17, 25, 30, 41, 43, 9,  11, 18, 24, 31, 40, 44, 53,
      10, 19, 23, 32, 39, 45, 52, 54, 20, 22, 33, 38, 46, 51, 55, 60,
      21, 34, 37, 47, 50, 56, 59, 61, 35, 36, 48, 49, 57, 58, 62, 63};
  return kIndex[pos];
}

// Frequency band of raster position pos: 0 = low (scan index 0..5: DC and the
// first 5 AC positions), 1 = mid (scan index 6..27), 2 = high (28..63).
// REQUIRES: 0 <= pos < 64.
WC_HD inline int band8x8(int pos) {
  const int i = unzigzag8x8(pos);
  return i <= 5 ? 0 : (i <= 27 ? 1 : 2);
}

// ---------------------------------------------------------------------------
// Lifting machinery.

namespace detail {

// Lifting multipliers of R(a * pi/32): kPa = round(-tan(a*pi/64) * 2^13),
// kUa = round(sin(a*pi/32) * 2^13). R(-a) uses (-kPa, -kUa).
inline constexpr int32_t kP1 = -402, kU1 = 803;     // pi/32
inline constexpr int32_t kP2 = -807, kU2 = 1598;    // pi/16
inline constexpr int32_t kP4 = -1629, kU4 = 3135;   // pi/8
inline constexpr int32_t kP5 = -2052, kU5 = 3862;   // 5pi/32
inline constexpr int32_t kP8 = -3393, kU8 = 5793;   // pi/4
inline constexpr int32_t kP9 = -3875, kU9 = 6333;   // 9pi/32
inline constexpr int32_t kP10 = -4379, kU10 = 6811; // 5pi/16
inline constexpr int32_t kP12 = -5474, kU12 = 7568; // 3pi/8
inline constexpr int32_t kP13 = -6076, kU13 = 7839; // 13pi/32

// Observer hooks let tests see every lifting operand; the default is empty
// and compiles away.
struct NoObserver {
  WC_HD void operator()(int32_t /*operand*/, int32_t /*multiplier*/) const {}
};

// [m*y]: y * M / 2^13 rounded half up (arithmetic shift = floor).
WC_HD inline int32_t lift_mul(int32_t y, int32_t m) {
  return static_cast<int32_t>((static_cast<int64_t>(m) * y + (int64_t{1} << (kLiftBits - 1))) >>
                              kLiftBits);
}

// (a, b) <- R(t) (a, b): a' ~ a cos t - b sin t, b' ~ a sin t + b cos t.
template <class Obs>
WC_HD inline void rot(int32_t& a, int32_t& b, int32_t p, int32_t u, Obs& obs) {
  obs(b, p);
  a += lift_mul(b, p);
  obs(a, u);
  b += lift_mul(a, u);
  obs(b, p);
  a += lift_mul(b, p);
}

// Exact inverse of rot with the same (p, u).
template <class Obs>
WC_HD inline void unrot(int32_t& a, int32_t& b, int32_t p, int32_t u, Obs& obs) {
  obs(b, p);
  a -= lift_mul(b, p);
  obs(a, u);
  b -= lift_mul(a, u);
  obs(b, p);
  a -= lift_mul(b, p);
}

template <class Obs>
WC_HD inline void fdct8(int32_t v[8], Obs& o) {
  int32_t x0 = v[0], x1 = v[1], x2 = v[2], x3 = v[3];
  int32_t x4 = v[4], x5 = v[5], x6 = v[6], x7 = v[7];
  // Stage 1: x0..x3 = d0..d3, x7..x4 = s0..s3.
  rot(x0, x7, kP8, kU8, o);
  rot(x1, x6, kP8, kU8, o);
  rot(x2, x5, kP8, kU8, o);
  rot(x3, x4, kP8, kU8, o);
  // Even half (4-point DCT-II).
  rot(x7, x4, kP8, kU8, o);  // x7 = t3, x4 = t0
  rot(x6, x5, kP8, kU8, o);  // x6 = t2, x5 = t1
  rot(x4, x5, kP8, kU8, o);  // x4 = X4, x5 = X0
  rot(x6, x7, kP4, kU4, o);  // x6 = -X6, x7 = X2
  // Odd half (4-point DCT-IV): v0 = (x0, x3), v1 = (x2, x1).
  rot(x2, x1, -kP8, -kU8, o);   // v1 *= e^{-i pi/4}
  rot(x0, x2, kP8, kU8, o);     // re: x0 = Z1.re, x2 = Z0.re
  rot(x3, x1, kP8, kU8, o);     // im: x3 = Z1.im, x1 = Z0.im
  rot(x2, x1, -kP2, -kU2, o);   // W0 = Z0 e^{-i pi/16}
  rot(x0, x3, -kP10, -kU10, o); // W1 = Z1 e^{-i 5pi/16}
  v[0] = x5;
  v[1] = x2;
  v[2] = x7;
  v[3] = -x3;
  v[4] = x4;
  v[5] = x0;
  v[6] = -x6;
  v[7] = -x1;
}

template <class Obs>
WC_HD inline void idct8(int32_t v[8], Obs& o) {
  int32_t x5 = v[0], x2 = v[1], x7 = v[2], x3 = -v[3];
  int32_t x4 = v[4], x0 = v[5], x6 = -v[6], x1 = -v[7];
  unrot(x0, x3, -kP10, -kU10, o);
  unrot(x2, x1, -kP2, -kU2, o);
  unrot(x3, x1, kP8, kU8, o);
  unrot(x0, x2, kP8, kU8, o);
  unrot(x2, x1, -kP8, -kU8, o);
  unrot(x6, x7, kP4, kU4, o);
  unrot(x4, x5, kP8, kU8, o);
  unrot(x6, x5, kP8, kU8, o);
  unrot(x7, x4, kP8, kU8, o);
  unrot(x3, x4, kP8, kU8, o);
  unrot(x2, x5, kP8, kU8, o);
  unrot(x1, x6, kP8, kU8, o);
  unrot(x0, x7, kP8, kU8, o);
  v[0] = x0;
  v[1] = x1;
  v[2] = x2;
  v[3] = x3;
  v[4] = x4;
  v[5] = x5;
  v[6] = x6;
  v[7] = x7;
}

template <class Obs>
WC_HD inline void fadst8(int32_t v[8], Obs& o) {
  // D: negate odd inputs. Then v_m = (x_{2m}, x_{7-2m}):
  // v0 = (x0, x7), v1 = (x2, x5), v2 = (x4, x3), v3 = (x6, x1).
  int32_t x0 = v[0], x1 = -v[1], x2 = v[2], x3 = -v[3];
  int32_t x4 = v[4], x5 = -v[5], x6 = v[6], x7 = -v[7];
  rot(x2, x5, -kP4, -kU4, o);    // v1 *= e^{-i pi/8}
  rot(x4, x3, -kP8, -kU8, o);    // v2 *= e^{-i pi/4}
  rot(x6, x1, -kP12, -kU12, o);  // v3 *= e^{-i 3pi/8}
  // DFT-2 of (v0, v2) -> E1 = (x0, x7), E0 = (x4, x3).
  rot(x0, x4, kP8, kU8, o);
  rot(x7, x3, kP8, kU8, o);
  // DFT-2 of (v1, v3) -> O1 = (x2, x5), O0 = (x6, x1).
  rot(x2, x6, kP8, kU8, o);
  rot(x5, x1, kP8, kU8, o);
  // O1 *= -i: (re, im) -> (im, -re), i.e. O1 = (x5, -x2).
  x2 = -x2;
  // (E0, O0) -> Z2 = (x4, x3), Z0 = (x6, x1).
  rot(x4, x6, kP8, kU8, o);
  rot(x3, x1, kP8, kU8, o);
  // (E1, O1) -> Z3 = (x0, x7), Z1 = (x5, x2).
  rot(x0, x5, kP8, kU8, o);
  rot(x7, x2, kP8, kU8, o);
  // Post-twiddles W_p = Z_p e^{-i pi (4p+1)/32}.
  rot(x6, x1, -kP1, -kU1, o);
  rot(x5, x2, -kP5, -kU5, o);
  rot(x4, x3, -kP9, -kU9, o);
  rot(x0, x7, -kP13, -kU13, o);
  // A_{7-2p} = Re W_p, A_{2p} = -Im W_p.
  v[0] = -x1;
  v[1] = x0;
  v[2] = -x2;
  v[3] = x4;
  v[4] = -x3;
  v[5] = x5;
  v[6] = -x7;
  v[7] = x6;
}

template <class Obs>
WC_HD inline void iadst8(int32_t v[8], Obs& o) {
  int32_t x1 = -v[0], x0 = v[1], x2 = -v[2], x4 = v[3];
  int32_t x3 = -v[4], x5 = v[5], x7 = -v[6], x6 = v[7];
  unrot(x0, x7, -kP13, -kU13, o);
  unrot(x4, x3, -kP9, -kU9, o);
  unrot(x5, x2, -kP5, -kU5, o);
  unrot(x6, x1, -kP1, -kU1, o);
  unrot(x7, x2, kP8, kU8, o);
  unrot(x0, x5, kP8, kU8, o);
  unrot(x3, x1, kP8, kU8, o);
  unrot(x4, x6, kP8, kU8, o);
  x2 = -x2;
  unrot(x5, x1, kP8, kU8, o);
  unrot(x2, x6, kP8, kU8, o);
  unrot(x7, x3, kP8, kU8, o);
  unrot(x0, x4, kP8, kU8, o);
  unrot(x6, x1, -kP12, -kU12, o);
  unrot(x4, x3, -kP8, -kU8, o);
  unrot(x2, x5, -kP4, -kU4, o);
  v[0] = x0;
  v[1] = -x1;
  v[2] = x2;
  v[3] = -x3;
  v[4] = x4;
  v[5] = -x5;
  v[6] = x6;
  v[7] = -x7;
}

// floor(a / b) for b > 0.
WC_HD inline int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

template <class Obs>
WC_HD inline void fwd8(Xform t, int32_t v[8], Obs& o) {
  if (t == kXformDCT) {
    fdct8(v, o);
  } else if (t == kXformADST) {
    fadst8(v, o);
  }
}

template <class Obs>
WC_HD inline void inv8(Xform t, int32_t v[8], Obs& o) {
  if (t == kXformDCT) {
    idct8(v, o);
  } else if (t == kXformADST) {
    iadst8(v, o);
  }
}

template <class Obs>
WC_HD inline void fwd8x8(Xform t, const int32_t* in, int in_stride, int32_t* out, Obs& o) {
  int32_t tmp[64];
  for (int r = 0; r < 8; ++r) {
    int32_t* row = tmp + 8 * r;
    for (int c = 0; c < 8; ++c) row[c] = in[r * in_stride + c];
    fwd8(t, row, o);
  }
  for (int c = 0; c < 8; ++c) {
    int32_t col[8];
    for (int r = 0; r < 8; ++r) col[r] = tmp[8 * r + c];
    fwd8(t, col, o);
    for (int r = 0; r < 8; ++r) out[8 * r + c] = col[r];
  }
}

template <class Obs>
WC_HD inline void inv8x8(Xform t, const int32_t* coeffs, int32_t* out, int out_stride, Obs& o) {
  int32_t tmp[64];
  for (int c = 0; c < 8; ++c) {
    int32_t col[8];
    for (int r = 0; r < 8; ++r) col[r] = coeffs[8 * r + c];
    inv8(t, col, o);
    for (int r = 0; r < 8; ++r) tmp[8 * r + c] = col[r];
  }
  for (int r = 0; r < 8; ++r) {
    int32_t* row = tmp + 8 * r;
    inv8(t, row, o);
    for (int c = 0; c < 8; ++c) out[r * out_stride + c] = row[c];
  }
}

}  // namespace detail

// ---------------------------------------------------------------------------
// Transforms (see the file comment for the factorizations and the range).

// In-place forward 8-point transform. kXformNone and unknown ids: identity.
WC_HD inline void fwd8(Xform t, int32_t v[8]) {
  detail::NoObserver o;
  detail::fwd8(t, v, o);
}

// In-place inverse: inv8(t, fwd8(t, v)) restores v exactly.
WC_HD inline void inv8(Xform t, int32_t v[8]) {
  detail::NoObserver o;
  detail::inv8(t, v, o);
}

// Separable 2-D forward transform of the 8x8 block at `in` (row r at
// in + r * in_stride): rows first, then columns. Writes 64 coefficients to
// `out`, row-major (out[8*v + u]). `out` may alias the input block.
WC_HD inline void fwd8x8(Xform t, const int32_t* in, int in_stride, int32_t* out) {
  detail::NoObserver o;
  detail::fwd8x8(t, in, in_stride, out, o);
}

// Inverse of fwd8x8: columns first, then rows; writes the block to
// out + r * out_stride. `out` may alias `coeffs`.
WC_HD inline void inv8x8(Xform t, const int32_t* coeffs, int32_t* out, int out_stride) {
  detail::NoObserver o;
  detail::inv8x8(t, coeffs, out, out_stride, o);
}

// ---------------------------------------------------------------------------
// Intra prediction.
//
// Neighbours: left[i] (i < h) is the reconstructed column left of the tile,
// top[j] (j < w) the reconstructed row above, topleft the sample above-left
// (read only by PLANAR, and only when left and top are both present). A
// missing neighbour is nullptr.
//
//   kPredNone    pred = 0.
//   kPredLeft    pred[i][j] = left[i].           No left: as kPredTop.
//   kPredTop     pred[i][j] = top[j].            No top: as kPredLeft.
//   kPredAvg     pred[i][j] = (left[i] + top[j]) >> 1 (floor).
//   kPredPlanar  pred[i][j] = left[i] + top[j] - topleft: the gradient plane
//                through the edges (exact for a tile of the form r_i + c_j,
//                which per-row and per-column offsets of weights produce).
//                AVG / PLANAR with one side missing: as the mode of the side
//                present (kPredLeft or kPredTop).
//   kPredDC      pred = floor(mean of the h + w available edge samples,
//                topleft excluded); only one side present: its mean.
// With no neighbour at all every mode predicts 0. Unknown mode ids predict 0
// (the container parser rejects them; this keeps the decoder well defined).
// Arithmetic is exact in int64 and the result is truncated to int32, which is
// exact whenever the prediction fits (e.g. all samples |v| <= 2^29).

// A prediction resolved once per tile (fallbacks applied, DC mean computed),
// then evaluated per sample, so no h*w prediction buffer is needed.
struct Predictor {
  uint8_t mode;  // resolved: kPredNone, kPredLeft, kPredTop, kPredAvg, kPredPlanar or kPredDC
  int32_t dc;
  int32_t topleft;
  const int32_t* left;
  const int32_t* top;

  WC_HD int32_t at(int i, int j) const {
    switch (mode) {
      case kPredLeft:
        return left[i];
      case kPredTop:
        return top[j];
      case kPredAvg:
        return static_cast<int32_t>((static_cast<int64_t>(left[i]) + top[j]) >> 1);
      case kPredPlanar:
        return static_cast<int32_t>(static_cast<int64_t>(left[i]) + top[j] - topleft);
      case kPredDC:
        return dc;
      default:
        return 0;
    }
  }
};

// REQUIRES: h, w >= 1; left has h values and top w values when non-null.
WC_HD inline Predictor make_predictor(Pred mode, int h, int w, const int32_t* left,
                                      const int32_t* top, int32_t topleft) {
  Predictor p{kPredNone, 0, topleft, left, top};
  const bool hl = left != nullptr;
  const bool ht = top != nullptr;
  // Side-only modes fall back to the other side; two-sided ones to the side
  // present.
  const uint8_t side = hl ? kPredLeft : (ht ? kPredTop : kPredNone);
  switch (mode) {
    case kPredLeft:
      p.mode = hl ? kPredLeft : (ht ? kPredTop : kPredNone);
      break;
    case kPredTop:
      p.mode = ht ? kPredTop : (hl ? kPredLeft : kPredNone);
      break;
    case kPredAvg:
    case kPredPlanar:
      p.mode = (hl && ht) ? static_cast<uint8_t>(mode) : side;
      break;
    case kPredDC: {
      int64_t sum = 0;
      int n = 0;
      if (hl) {
        for (int i = 0; i < h; ++i) sum += left[i];
        n += h;
      }
      if (ht) {
        for (int j = 0; j < w; ++j) sum += top[j];
        n += w;
      }
      if (n > 0) {
        p.mode = kPredDC;
        p.dc = static_cast<int32_t>(detail::floor_div(sum, n));
      }
      break;
    }
    default:
      break;
  }
  return p;
}

// Writes the h x w prediction (row-major, stride w) to pred; modes and
// fallbacks as in the table above.
// REQUIRES: 1 <= h, w <= kMaxTileDim (any positive size works).
WC_HD inline void predict(Pred mode, int h, int w, const int32_t* left, const int32_t* top,
                          int32_t topleft, int32_t* pred) {
  const Predictor p = make_predictor(mode, h, w, left, top, topleft);
  for (int i = 0; i < h; ++i) {
    for (int j = 0; j < w; ++j) pred[i * w + j] = p.at(i, j);
  }
}

// ---------------------------------------------------------------------------
// Tile residual <-> coefficients.
//
// A tile of h x w samples is split into 8x8 sub-blocks in raster order
// (ceil(h/8) rows of ceil(w/8) blocks); xform_map[b] is the transform of
// sub-block b (nullptr: all kXformNone). Only full 8x8 sub-blocks are
// transformed; a partial sub-block at the right or bottom edge must have
// kXformNone, and any other entry there is ignored (treated as kXformNone) by
// both directions, so they always agree. The coefficient array is h x w,
// row-major with stride w; a transformed sub-block stores its 64
// coefficients in raster order (8*v + u) at its own sample positions.

WC_HD inline int tile_blocks_x(int w) { return (w + kBlock - 1) / kBlock; }
WC_HD inline int tile_blocks_y(int h) { return (h + kBlock - 1) / kBlock; }

// Transform that tile_forward / tile_inverse apply to sub-block (by, bx).
WC_HD inline Xform tile_block_xform(const uint8_t* xform_map, int h, int w, int by, int bx) {
  if (xform_map == nullptr) return kXformNone;
  if ((by + 1) * kBlock > h || (bx + 1) * kBlock > w) return kXformNone;
  return static_cast<Xform>(xform_map[by * tile_blocks_x(w) + bx]);
}

// Encoder direction: residual = values - pred, then the forward transform of
// each full sub-block whose map entry is a transform. values: sample (i, j)
// at values[i * stride + j]. left/top/topleft: reconstructed neighbours as
// for predict(). residual_out: h * w coefficients as described above.
// Coefficients obey kMaxCoeffMagnitude when |values - pred| <= 2^11 (always
// true for 8-bit codes: |residual| <= 510 with every mode). REQUIRES: the
// residual fits int32 (e.g. all samples |v| <= 2^29).
WC_HD inline void tile_forward(Pred p, const uint8_t* xform_map, int h, int w,
                               const int32_t* values, int stride, const int32_t* left,
                               const int32_t* top, int32_t topleft, int32_t* residual_out) {
  const Predictor pr = make_predictor(p, h, w, left, top, topleft);
  for (int by = 0; by < tile_blocks_y(h); ++by) {
    for (int bx = 0; bx < tile_blocks_x(w); ++bx) {
      const int r0 = by * kBlock, c0 = bx * kBlock;
      const int bh = h - r0 < kBlock ? h - r0 : kBlock;
      const int bw = w - c0 < kBlock ? w - c0 : kBlock;
      const Xform t = tile_block_xform(xform_map, h, w, by, bx);
      if (t == kXformDCT || t == kXformADST) {
        int32_t blk[64];
        for (int i = 0; i < 8; ++i) {
          for (int j = 0; j < 8; ++j) {
            blk[8 * i + j] = values[(r0 + i) * stride + c0 + j] - pr.at(r0 + i, c0 + j);
          }
        }
        fwd8x8(t, blk, 8, blk);
        for (int i = 0; i < 8; ++i) {
          for (int j = 0; j < 8; ++j) residual_out[(r0 + i) * w + c0 + j] = blk[8 * i + j];
        }
      } else {
        for (int i = r0; i < r0 + bh; ++i) {
          for (int j = c0; j < c0 + bw; ++j) {
            residual_out[i * w + j] = values[i * stride + j] - pr.at(i, j);
          }
        }
      }
    }
  }
}

// Decoder direction, the exact inverse of tile_forward: inverse transforms
// of the sub-blocks, then prediction added. coeffs: h * w (stride w) as
// produced by tile_forward; values_out: sample (i, j) at
// values_out[i * out_stride + j]. left/top must not overlap values_out.
WC_HD inline void tile_inverse(Pred p, const uint8_t* xform_map, int h, int w,
                               const int32_t* coeffs, const int32_t* left, const int32_t* top,
                               int32_t topleft, int32_t* values_out, int out_stride) {
  const Predictor pr = make_predictor(p, h, w, left, top, topleft);
  for (int by = 0; by < tile_blocks_y(h); ++by) {
    for (int bx = 0; bx < tile_blocks_x(w); ++bx) {
      const int r0 = by * kBlock, c0 = bx * kBlock;
      const int bh = h - r0 < kBlock ? h - r0 : kBlock;
      const int bw = w - c0 < kBlock ? w - c0 : kBlock;
      const Xform t = tile_block_xform(xform_map, h, w, by, bx);
      if (t == kXformDCT || t == kXformADST) {
        int32_t blk[64];
        for (int i = 0; i < 8; ++i) {
          for (int j = 0; j < 8; ++j) blk[8 * i + j] = coeffs[(r0 + i) * w + c0 + j];
        }
        inv8x8(t, blk, blk, 8);
        for (int i = 0; i < 8; ++i) {
          for (int j = 0; j < 8; ++j) {
            values_out[(r0 + i) * out_stride + c0 + j] = blk[8 * i + j] + pr.at(r0 + i, c0 + j);
          }
        }
      } else {
        for (int i = r0; i < r0 + bh; ++i) {
          for (int j = c0; j < c0 + bw; ++j) {
            values_out[i * out_stride + j] = coeffs[i * w + j] + pr.at(i, j);
          }
        }
      }
    }
  }
}

}  // namespace wcodec::tile
