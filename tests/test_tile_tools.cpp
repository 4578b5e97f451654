// tests/test_tile_tools.cpp — the tile tools (codec/common/tile_tools.h):
// exactness and range of the integer DCT/ADST, agreement with the real
// transforms, energy compaction, the zig-zag scan and bands, the predictors
// on literal examples (every fallback), zz integers, and the tile
// residual <-> coefficient round trip over every tile shape the codec uses.
#include "tile_tools.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <set>
#include <vector>

namespace {

using namespace wcodec::tile;

constexpr double kPi = 3.14159265358979323846;
constexpr int32_t kIn = kMaxInputMagnitude;
const Xform kTransforms[] = {kXformDCT, kXformADST};

using Mat8 = std::array<std::array<double, 8>, 8>;

// Orthonormal DCT-II: X_k = c_k sum_n x_n cos(pi (2n+1) k / 16).
Mat8 DctMatrix() {
  Mat8 m{};
  for (int k = 0; k < 8; ++k)
    for (int n = 0; n < 8; ++n)
      m[k][n] = (k == 0 ? std::sqrt(1.0 / 8) : 0.5) * std::cos(kPi * (2 * n + 1) * k / 16);
  return m;
}

// Orthonormal DST-IV: A_k = 1/2 sum_n x_n sin(pi (2n+1)(2k+1) / 32).
Mat8 AdstMatrix() {
  Mat8 m{};
  for (int k = 0; k < 8; ++k)
    for (int n = 0; n < 8; ++n) m[k][n] = 0.5 * std::sin(kPi * (2 * n + 1) * (2 * k + 1) / 32);
  return m;
}

Mat8 MatrixOf(Xform t) { return t == kXformDCT ? DctMatrix() : AdstMatrix(); }

using Block = std::array<int32_t, 64>;

Block RandomBlock(std::mt19937_64& rng, int32_t lo, int32_t hi) {
  std::uniform_int_distribution<int32_t> d(lo, hi);
  Block b;
  for (auto& v : b) v = d(rng);
  return b;
}

// Records the largest lifting operand and product seen.
struct RangeObserver {
  int64_t max_operand = 0;
  int64_t max_product = 0;
  void operator()(int32_t y, int32_t m) {
    max_operand = std::max<int64_t>(max_operand, std::llabs(y));
    max_product = std::max<int64_t>(max_product, std::llabs(int64_t{y} * m));
  }
};

int MaxAbs(const Block& b) {
  int m = 0;
  for (int32_t v : b) m = std::max(m, std::abs(v));
  return m;
}

// Extreme inputs: for every 2-D basis function, the block of +-2^11 with its
// signs (and the negation), which drives that coefficient to its maximum;
// plus constant, checkerboard and stripe blocks at +-2^11.
std::vector<Block> ExtremeBlocks(Xform t) {
  std::vector<Block> out;
  const Mat8 m = MatrixOf(t);
  for (int v = 0; v < 8; ++v) {
    for (int u = 0; u < 8; ++u) {
      Block b;
      for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 8; ++j) b[8 * i + j] = (m[v][i] * m[u][j] >= 0) ? kIn : -kIn;
      out.push_back(b);
      for (auto& x : b) x = -x;
      out.push_back(b);
    }
  }
  for (int s : {1, -1}) {
    Block c, cb, rows, cols;
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 8; ++j) {
        c[8 * i + j] = s * kIn;
        cb[8 * i + j] = ((i + j) % 2 ? -1 : 1) * s * kIn;
        rows[8 * i + j] = (i % 2 ? -1 : 1) * s * kIn;
        cols[8 * i + j] = (j < 4 ? -1 : 1) * s * kIn;
      }
    }
    out.insert(out.end(), {c, cb, rows, cols});
  }
  return out;
}

// ---------------------------------------------------------------------------
// Transforms.

TEST(TileTransform, LiftingMultipliersMatchTheirAngles) {
  namespace d = wcodec::tile::detail;
  struct Row {
    int a;  // angle in units of pi/32
    int32_t p, u;
  };
  const Row rows[] = {{1, d::kP1, d::kU1},   {2, d::kP2, d::kU2},   {4, d::kP4, d::kU4},
                      {5, d::kP5, d::kU5},   {8, d::kP8, d::kU8},   {9, d::kP9, d::kU9},
                      {10, d::kP10, d::kU10}, {12, d::kP12, d::kU12}, {13, d::kP13, d::kU13}};
  const double scale = 1 << kLiftBits;
  for (const Row& r : rows) {
    const double t = r.a * kPi / 32;
    EXPECT_EQ(r.p, std::lround(-std::tan(t / 2) * scale)) << "angle " << r.a;
    EXPECT_EQ(r.u, std::lround(std::sin(t) * scale)) << "angle " << r.a;
  }
}

TEST(TileTransform, NoneIsIdentity) {
  std::mt19937_64 rng(1);
  for (int it = 0; it < 100; ++it) {
    Block x = RandomBlock(rng, -kIn, kIn), c, y;
    fwd8x8(kXformNone, x.data(), 8, c.data());
    EXPECT_EQ(c, x);
    inv8x8(kXformNone, c.data(), y.data(), 8);
    EXPECT_EQ(y, x);
    int32_t v[8];
    std::copy(x.begin(), x.begin() + 8, v);
    fwd8(kXformNone, v);
    inv8(kXformNone, v);
    EXPECT_TRUE(std::equal(v, v + 8, x.begin()));
  }
}

TEST(TileTransform, OneDimensionalRoundTripIsExact) {
  std::mt19937_64 rng(2);
  std::uniform_int_distribution<int32_t> d(-kIn, kIn);
  for (Xform t : kTransforms) {
    int bad = 0;
    for (int it = 0; it < 100000; ++it) {
      int32_t x[8], v[8];
      for (int i = 0; i < 8; ++i) x[i] = v[i] = d(rng);
      fwd8(t, v);
      for (int i = 0; i < 8; ++i) EXPECT_LE(std::abs(v[i]), 5800);
      inv8(t, v);
      bad += !std::equal(v, v + 8, x);
    }
    // Every +-2^11 sign pattern, and every pattern of {-2^11, 0, 2^11}.
    for (int pattern = 0; pattern < 6561; ++pattern) {
      int32_t x[8], v[8];
      int p = pattern;
      for (int i = 0; i < 8; ++i, p /= 3) x[i] = v[i] = (p % 3 - 1) * kIn;
      fwd8(t, v);
      for (int i = 0; i < 8; ++i) EXPECT_LE(std::abs(v[i]), 5800);
      inv8(t, v);
      bad += !std::equal(v, v + 8, x);
    }
    EXPECT_EQ(bad, 0) << "transform " << int(t);
  }
}

TEST(TileTransform, RoundTripExactOn100kRandomBlocksWithinCoefficientBound) {
  std::mt19937_64 rng(3);
  for (Xform t : kTransforms) {
    int bad = 0, max_coeff = 0;
    // The source block lives in a wider buffer (stride 11) to exercise strides.
    std::vector<int32_t> src(8 * 11), dst(8 * 13, 7777);
    std::uniform_int_distribution<int32_t> d(-kIn, kIn);
    for (int it = 0; it < 100000; ++it) {
      for (auto& v : src) v = d(rng);
      Block c;
      fwd8x8(t, src.data(), 11, c.data());
      max_coeff = std::max(max_coeff, MaxAbs(c));
      inv8x8(t, c.data(), dst.data(), 13);
      for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 8; ++j) bad += dst[13 * i + j] != src[11 * i + j];
    }
    EXPECT_EQ(bad, 0) << "transform " << int(t);
    EXPECT_LE(max_coeff, kMaxCoeffMagnitude);
    // Columns 8..12 of the output buffer were never written.
    for (int i = 0; i < 8; ++i)
      for (int j = 8; j < 13; ++j) EXPECT_EQ(dst[13 * i + j], 7777);
  }
}

TEST(TileTransform, ExtremeBlocksRoundTripAndRespectTheBound) {
  for (Xform t : kTransforms) {
    int max_coeff = 0;
    for (const Block& x : ExtremeBlocks(t)) {
      Block c, y;
      fwd8x8(t, x.data(), 8, c.data());
      max_coeff = std::max(max_coeff, MaxAbs(c));
      inv8x8(t, c.data(), y.data(), 8);
      EXPECT_EQ(y, x);
    }
    EXPECT_LE(max_coeff, kMaxCoeffMagnitude) << "transform " << int(t);
    // The sign blocks reach the orthonormal maximum (8 * 2^11 for the DCT's
    // DC); the bound is not loose by more than rounding.
    // The ADST's largest basis L1 norm is smaller: 2^11 * 6.5.
    if (t == kXformDCT) {
      EXPECT_GE(max_coeff, 16384 - 16);
      EXPECT_LE(kMaxCoeffMagnitude - max_coeff, 256);
    } else {
      EXPECT_GE(max_coeff, 13000);
    }
  }
  // Random +-2^11 sign blocks.
  std::mt19937_64 rng(4);
  for (Xform t : kTransforms) {
    for (int it = 0; it < 20000; ++it) {
      Block x = RandomBlock(rng, 0, 1), c, y;
      for (auto& v : x) v = v ? kIn : -kIn;
      fwd8x8(t, x.data(), 8, c.data());
      EXPECT_LE(MaxAbs(c), kMaxCoeffMagnitude);
      inv8x8(t, c.data(), y.data(), 8);
      ASSERT_EQ(y, x);
    }
  }
}

TEST(TileTransform, IntermediatesStayWellInsideInt32) {
  // Forward on in-range inputs: documented as <= 17173 (< 2^15) with lifting
  // products < 2^28.
  std::mt19937_64 rng(5);
  for (Xform t : kTransforms) {
    RangeObserver obs;
    Block c;
    for (const Block& x : ExtremeBlocks(t)) wcodec::tile::detail::fwd8x8(t, x.data(), 8, c.data(), obs);
    for (int it = 0; it < 20000; ++it) {
      Block x = RandomBlock(rng, -kIn, kIn);
      wcodec::tile::detail::fwd8x8(t, x.data(), 8, c.data(), obs);
    }
    EXPECT_LE(obs.max_operand, 17173) << "transform " << int(t);
    EXPECT_LT(obs.max_product, int64_t{1} << 28) << "transform " << int(t);
  }
  // Inverse on arbitrary (e.g. corrupt) coefficients: no overflow up to
  // |c| <= 2^20 (UBSan would flag signed overflow), intermediates < 2^24.
  for (Xform t : kTransforms) {
    RangeObserver obs;
    const Mat8 m = MatrixOf(t);
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 8; ++j) {
        Block c, y;  // sign pattern maximising output (i, j)
        for (int v = 0; v < 8; ++v)
          for (int u = 0; u < 8; ++u) c[8 * v + u] = (m[v][i] * m[u][j] >= 0) ? (1 << 20) : -(1 << 20);
        wcodec::tile::detail::inv8x8(t, c.data(), y.data(), 8, obs);
      }
    }
    for (int it = 0; it < 2000; ++it) {
      Block c = RandomBlock(rng, -(1 << 20), 1 << 20), y;
      wcodec::tile::detail::inv8x8(t, c.data(), y.data(), 8, obs);
    }
    EXPECT_LT(obs.max_operand, int64_t{1} << 24);
  }
}

TEST(TileTransform, AgreesWithTheRealTransforms) {
  std::mt19937_64 rng(6);
  std::uniform_int_distribution<int32_t> d(-kIn, kIn);
  for (Xform t : kTransforms) {
    const Mat8 m = MatrixOf(t);
    double max_err1 = 0, max_err2 = 0;
    for (int it = 0; it < 20000; ++it) {
      int32_t v[8];
      double x[8];
      for (int i = 0; i < 8; ++i) x[i] = v[i] = d(rng);
      fwd8(t, v);
      for (int k = 0; k < 8; ++k) {
        double ref = 0;
        for (int n = 0; n < 8; ++n) ref += m[k][n] * x[n];
        max_err1 = std::max(max_err1, std::fabs(ref - v[k]));
      }
    }
    for (int it = 0; it < 2000; ++it) {
      Block x = RandomBlock(rng, -kIn, kIn), c;
      fwd8x8(t, x.data(), 8, c.data());
      for (int v = 0; v < 8; ++v) {
        for (int u = 0; u < 8; ++u) {
          double ref = 0;
          for (int i = 0; i < 8; ++i)
            for (int j = 0; j < 8; ++j) ref += m[v][i] * m[u][j] * x[8 * i + j];
          max_err2 = std::max(max_err2, std::fabs(ref - c[8 * v + u]));
        }
      }
    }
    // Only lifting rounding separates the integer from the real transform.
    EXPECT_LE(max_err1, 5.0) << "transform " << int(t);
    EXPECT_LE(max_err2, 8.0) << "transform " << int(t);
  }
}

TEST(TileTransform, TwoDimensionalIsRowsThenColumns) {
  std::mt19937_64 rng(7);
  for (Xform t : kTransforms) {
    for (int it = 0; it < 200; ++it) {
      Block x = RandomBlock(rng, -kIn, kIn), ref = x, c;
      for (int r = 0; r < 8; ++r) fwd8(t, ref.data() + 8 * r);
      for (int col = 0; col < 8; ++col) {
        int32_t v[8];
        for (int r = 0; r < 8; ++r) v[r] = ref[8 * r + col];
        fwd8(t, v);
        for (int r = 0; r < 8; ++r) ref[8 * r + col] = v[r];
      }
      fwd8x8(t, x.data(), 8, c.data());
      ASSERT_EQ(c, ref);
      // In place (out aliases in, and out aliases coeffs) works too.
      Block inplace = x;
      fwd8x8(t, inplace.data(), 8, inplace.data());
      ASSERT_EQ(inplace, ref);
      inv8x8(t, inplace.data(), inplace.data(), 8);
      ASSERT_EQ(inplace, x);
    }
  }
}

TEST(TileTransform, ConstantBlockConcentratesInDc) {
  // Every constant block in range: DCT puts it (all but lifting rounding) in
  // the DC coefficient, which is 8 * value up to rounding.
  int max_ac = 0, max_dc_err = 0, with_ac = 0;
  for (int32_t v = -kIn; v <= kIn; ++v) {
    Block x, c;
    x.fill(v);
    fwd8x8(kXformDCT, x.data(), 8, c.data());
    bool any = false;
    for (int p = 1; p < 64; ++p) {
      max_ac = std::max(max_ac, std::abs(c[p]));
      any |= c[p] != 0;
    }
    with_ac += any;
    max_dc_err = std::max(max_dc_err, std::abs(c[0] - 8 * v));
  }
  EXPECT_LE(max_ac, 2);
  EXPECT_LT(with_ac, (2 * kIn + 1) / 10) << "at least 90% have all-zero AC";
  EXPECT_LE(max_dc_err, 8);
  // ADST: most of the energy still lands in coefficient (0, 0).
  Block x, c;
  x.fill(1000);
  fwd8x8(kXformADST, x.data(), 8, c.data());
  double total = 0;
  for (int32_t y : c) total += double(y) * y;
  EXPECT_GT(double(c[0]) * c[0], 0.6 * total);
}

TEST(TileTransform, RampHasSmallHighBand) {
  for (int a : {1, 3, 16, 100}) {
    for (int b : {0, 2, -5, 40}) {
      Block x, c;
      for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 8; ++j) x[8 * i + j] = a * i + b * j + 7;
      fwd8x8(kXformDCT, x.data(), 8, c.data());
      double e[3] = {0, 0, 0};
      int max_high = 0;
      for (int p = 1; p < 64; ++p) {
        e[band8x8(p)] += double(c[p]) * c[p];
        if (band8x8(p) == 2) max_high = std::max(max_high, std::abs(c[p]));
      }
      const double ac = e[0] + e[1] + e[2];
      SCOPED_TRACE(testing::Message() << "a=" << a << " b=" << b);
      EXPECT_GT(e[0], 0.95 * ac);
      // 1% of the AC energy, plus a floor for lifting rounding (|c| <= 1
      // in each of the 36 high positions).
      EXPECT_LT(e[2], 0.01 * ac + 36);
      // The real DCT puts 0.14 * slope at (0, 7) / (7, 0); the rest is rounding.
      EXPECT_LE(max_high, 0.15 * (std::abs(a) + std::abs(b)) + 4);
    }
  }
}

TEST(TileTransform, AdstCompactsRampsGrowingFromThePredictedEdge) {
  // 1-D ramp x_n = s (n + 1): the real DST-IV puts 99.2% of the energy in A_0
  // (slope 1 loses a little more to rounding).
  for (int s : {1, 5, 37, 250}) {
    int32_t v[8];
    for (int n = 0; n < 8; ++n) v[n] = s * (n + 1);
    fwd8(kXformADST, v);
    double total = 0;
    for (int32_t y : v) total += double(y) * y;
    EXPECT_GT(double(v[0]) * v[0], (s == 1 ? 0.95 : 0.98) * total) << "slope " << s;
  }
  // 2-D random walks anchored at the top-left edges (the residual model the
  // ADST is for): ADST beats DCT on coefficient magnitude, DCT beats ADST on
  // blocks with an offset (constant part). Both beat no transform.
  std::mt19937_64 rng(8);
  std::normal_distribution<double> noise(0, 6);
  double l1_none = 0, l1_dct = 0, l1_adst = 0;
  for (int it = 0; it < 5000; ++it) {
    Block x;
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 8; ++j) {
        double acc = noise(rng);
        if (i > 0) acc += x[8 * (i - 1) + j];
        if (j > 0) acc += x[8 * i + j - 1];
        if (i > 0 && j > 0) acc -= x[8 * (i - 1) + j - 1];
        x[8 * i + j] = static_cast<int32_t>(std::lround(acc));
      }
    }
    Block cd, ca;
    fwd8x8(kXformDCT, x.data(), 8, cd.data());
    fwd8x8(kXformADST, x.data(), 8, ca.data());
    for (int p = 0; p < 64; ++p) {
      l1_none += std::abs(x[p]);
      l1_dct += std::abs(cd[p]);
      l1_adst += std::abs(ca[p]);
    }
  }
  EXPECT_LT(l1_adst, 0.95 * l1_dct);
  EXPECT_LT(l1_dct, 0.7 * l1_none);
}

TEST(TileTransform, DecorrelatesSmoothBlocks) {
  // Sums of a few low-frequency waves plus noise: >90% of the AC energy of
  // the DCT is in the low band, and sum |coeff| is well below sum |x - mean|.
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> amp(-200, 200), phase(0, 2 * kPi);
  std::uniform_int_distribution<int> jitter(-1, 1);
  double e_low = 0, e_ac = 0, l1_c = 0, l1_x = 0;
  for (int it = 0; it < 2000; ++it) {
    const double a1 = amp(rng), a2 = amp(rng), p1 = phase(rng), p2 = phase(rng);
    Block x, c;
    double mean = 0;
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 8; ++j) {
        x[8 * i + j] = static_cast<int32_t>(std::lround(a1 * std::cos(0.15 * i + p1) +
                                                        a2 * std::cos(0.12 * j + p2))) +
                       jitter(rng);
        mean += x[8 * i + j] / 64.0;
      }
    }
    fwd8x8(kXformDCT, x.data(), 8, c.data());
    for (int p = 0; p < 64; ++p) {
      l1_x += std::fabs(x[p] - mean);
      if (p == 0) continue;
      l1_c += std::abs(c[p]);
      e_ac += double(c[p]) * c[p];
      if (band8x8(p) == 0) e_low += double(c[p]) * c[p];
    }
  }
  EXPECT_GT(e_low, 0.9 * e_ac);
  EXPECT_LT(l1_c, 0.5 * l1_x);
}

// ---------------------------------------------------------------------------
// Scan order and zz integers.

TEST(TileScan, ZigzagIsTheJpegScan) {
  const int head[] = {0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(zigzag8x8(i), head[i]);
  EXPECT_EQ(zigzag8x8(27), 6);
  EXPECT_EQ(zigzag8x8(28), 7);
  EXPECT_EQ(zigzag8x8(35), 56);
  EXPECT_EQ(zigzag8x8(63), 63);
  // Anti-diagonals in order; within one, row decreases on even diagonals.
  int i = 0;
  for (int d = 0; d <= 14; ++d) {
    std::vector<int> cells;
    for (int r = 0; r < 8; ++r)
      if (d - r >= 0 && d - r < 8) cells.push_back(8 * r + d - r);
    if (d % 2 == 0) std::reverse(cells.begin(), cells.end());
    for (int pos : cells) EXPECT_EQ(zigzag8x8(i++), pos) << "diagonal " << d;
  }
  EXPECT_EQ(i, 64);
}

TEST(TileScan, ZigzagIsAPermutationWithInverse) {
  std::set<int> seen;
  for (int i = 0; i < 64; ++i) {
    const int pos = zigzag8x8(i);
    ASSERT_GE(pos, 0);
    ASSERT_LT(pos, 64);
    seen.insert(pos);
    EXPECT_EQ(unzigzag8x8(pos), i);
  }
  EXPECT_EQ(seen.size(), 64u);
}

TEST(TileScan, BandsPartitionTheScan) {
  int count[3] = {0, 0, 0};
  int prev = 0;
  for (int i = 0; i < 64; ++i) {
    const int b = band8x8(zigzag8x8(i));
    ASSERT_GE(b, 0);
    ASSERT_LE(b, 2);
    EXPECT_GE(b, prev) << "bands follow the scan";
    prev = b;
    ++count[b];
    EXPECT_EQ(b, i <= 5 ? 0 : (i <= 27 ? 1 : 2)) << "scan index " << i;
  }
  EXPECT_EQ(count[0], 6);
  EXPECT_EQ(count[1], 22);
  EXPECT_EQ(count[2], 36);
  EXPECT_EQ(band8x8(0), 0);
  EXPECT_EQ(band8x8(2), 0);   // (0,2) is scan index 5
  EXPECT_EQ(band8x8(3), 1);   // (0,3) is scan index 6
  EXPECT_EQ(band8x8(6), 1);   // scan index 27
  EXPECT_EQ(band8x8(7), 2);   // scan index 28
  EXPECT_EQ(band8x8(63), 2);
}

TEST(TileZz, EncodesSignedIntegers) {
  const int32_t in[] = {0, -1, 1, -2, 2, -3, 3};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(zz_encode(in[i]), i);
  for (int32_t v = -(1 << 20); v <= (1 << 20); ++v) {
    const int32_t z = zz_encode(v);
    ASSERT_GE(z, 0);
    ASSERT_EQ(zz_decode(z), v);
  }
  const int32_t edge[] = {-(1 << 30), (1 << 30) - 1, -kMaxCoeffMagnitude, kMaxCoeffMagnitude};
  for (int32_t v : edge) {
    EXPECT_GE(zz_encode(v), 0);
    EXPECT_EQ(zz_decode(zz_encode(v)), v);
  }
  EXPECT_EQ(zz_encode((1 << 30) - 1), 0x7FFFFFFE);
  EXPECT_EQ(zz_encode(-(1 << 30)), 0x7FFFFFFF);
  EXPECT_LT(zz_encode(-kMaxCoeffMagnitude), 1 << kCoeffZzBits);
  EXPECT_LT(zz_encode(kMaxCoeffMagnitude), 1 << kCoeffZzBits);
}

// ---------------------------------------------------------------------------
// Predictors. Neighbours of a 3 x 4 tile:
//   topleft = 2, top = -4 1 6 -9, left = -3 7 0.

constexpr int kH = 3, kW = 4;
const int32_t kLeft[kH] = {-3, 7, 0};
const int32_t kTop[kW] = {-4, 1, 6, -9};
constexpr int32_t kTopLeft = 2;

using Tile34 = std::array<int32_t, kH * kW>;

Tile34 Predict(Pred mode, const int32_t* left, const int32_t* top, int32_t topleft = kTopLeft) {
  Tile34 p;
  p.fill(12345);
  predict(mode, kH, kW, left, top, topleft, p.data());
  return p;
}

const Tile34 kExpectLeft = {-3, -3, -3, -3,  //
                            7,  7,  7,  7,   //
                            0,  0,  0,  0};
const Tile34 kExpectTop = {-4, 1, 6, -9,  //
                           -4, 1, 6, -9,  //
                           -4, 1, 6, -9};
const Tile34 kZero = {};

TEST(TilePredict, Left) { EXPECT_EQ(Predict(kPredLeft, kLeft, kTop), kExpectLeft); }

TEST(TilePredict, Top) { EXPECT_EQ(Predict(kPredTop, kLeft, kTop), kExpectTop); }

TEST(TilePredict, AvgFloorsTheHalfSum) {
  // (-3 + -4) >> 1 = -4, (0 + -9) >> 1 = -5: floor, not truncation.
  const Tile34 expect = {-4, -1, 1, -6,  //
                         1,  4,  6, -1,  //
                         -2, 0,  3, -5};
  EXPECT_EQ(Predict(kPredAvg, kLeft, kTop), expect);
}

TEST(TilePredict, PlanarIsTheGradientPlane) {
  // left[i] + top[j] - topleft.
  const Tile34 expect = {-9, -4, 1, -14,  //
                         1,  6,  11, -4,  //
                         -6, -1, 4,  -11};
  EXPECT_EQ(Predict(kPredPlanar, kLeft, kTop), expect);
  // It reproduces any tile of the form row_offset[i] + col_offset[j].
  const int32_t r[4] = {100, -7, 3, 55};  // r[0] belongs to the row above
  const int32_t c[5] = {-20, 4, 9, -1, 30};  // c[0] belongs to the left column
  int32_t left[3], top[4];
  for (int i = 0; i < 3; ++i) left[i] = r[i + 1] + c[0];
  for (int j = 0; j < 4; ++j) top[j] = r[0] + c[j + 1];
  const Tile34 p = Predict(kPredPlanar, left, top, r[0] + c[0]);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(p[i * 4 + j], r[i + 1] + c[j + 1]);
}

TEST(TilePredict, DcIsTheFlooredMeanOfTheEdges) {
  // (-3 + 7 + 0 + -4 + 1 + 6 + -9) / 7 = -2/7 -> -1 (floor).
  Tile34 expect;
  expect.fill(-1);
  EXPECT_EQ(Predict(kPredDC, kLeft, kTop), expect);
  // Left only: 4/3 -> 1. Top only: -6/4 -> -2 (floor of -1.5).
  expect.fill(1);
  EXPECT_EQ(Predict(kPredDC, kLeft, nullptr), expect);
  expect.fill(-2);
  EXPECT_EQ(Predict(kPredDC, nullptr, kTop), expect);
  EXPECT_EQ(Predict(kPredDC, nullptr, nullptr), kZero);
}

TEST(TilePredict, NonePredictsZero) {
  EXPECT_EQ(Predict(kPredNone, kLeft, kTop), kZero);
  EXPECT_EQ(Predict(static_cast<Pred>(9), kLeft, kTop), kZero);  // unknown id
}

TEST(TilePredict, FallbacksWhenANeighbourIsMissing) {
  // LEFT without left: the top row; TOP without top: the left column.
  EXPECT_EQ(Predict(kPredLeft, nullptr, kTop), kExpectTop);
  EXPECT_EQ(Predict(kPredTop, kLeft, nullptr), kExpectLeft);
  // Present side only: no change.
  EXPECT_EQ(Predict(kPredLeft, kLeft, nullptr), kExpectLeft);
  EXPECT_EQ(Predict(kPredTop, nullptr, kTop), kExpectTop);
  // AVG and PLANAR with one side: that side's single-side mode (topleft is
  // not read).
  for (Pred m : {kPredAvg, kPredPlanar}) {
    EXPECT_EQ(Predict(m, kLeft, nullptr, 999), kExpectLeft);
    EXPECT_EQ(Predict(m, nullptr, kTop, 999), kExpectTop);
  }
  // No neighbours: every mode predicts 0.
  for (Pred m : {kPredNone, kPredLeft, kPredTop, kPredAvg, kPredPlanar, kPredDC})
    EXPECT_EQ(Predict(m, nullptr, nullptr), kZero) << "mode " << int(m);
}

TEST(TilePredict, SmallAndLargeShapes) {
  // 1 x 1.
  const int32_t l = 9, t = -4;
  int32_t p = 0;
  predict(kPredAvg, 1, 1, &l, &t, 0, &p);
  EXPECT_EQ(p, 2);  // 5 >> 1
  predict(kPredPlanar, 1, 1, &l, &t, 6, &p);
  EXPECT_EQ(p, -1);
  predict(kPredDC, 1, 1, &l, &t, 0, &p);
  EXPECT_EQ(p, 2);  // floor(5 / 2)
  // 32 x 32 DC of large samples: the sum does not overflow int32 arithmetic.
  std::vector<int32_t> left(32, 1 << 29), top(32, (1 << 29) - 64), pred(32 * 32);
  predict(kPredDC, 32, 32, left.data(), top.data(), 0, pred.data());
  for (int32_t v : pred) ASSERT_EQ(v, (1 << 29) - 32);
}

// ---------------------------------------------------------------------------
// Tiles.

struct TileCase {
  int h, w;
  Pred mode;
  bool has_left, has_top;
  std::vector<uint8_t> map;
};

std::vector<uint8_t> RandomMap(std::mt19937_64& rng, int h, int w) {
  const int nby = tile_blocks_y(h), nbx = tile_blocks_x(w);
  std::vector<uint8_t> map(nby * nbx, kXformNone);
  for (int by = 0; by < nby; ++by)
    for (int bx = 0; bx < nbx; ++bx)
      if ((by + 1) * 8 <= h && (bx + 1) * 8 <= w) map[by * nbx + bx] = rng() % 3;
  return map;
}

TEST(TileRoundTrip, EveryShapeModeAndTransformMap) {
  std::mt19937_64 rng(10);
  const int dims[] = {1, 3, 8, 15, 16, 32};
  for (int h : dims) {
    for (int w : dims) {
      SCOPED_TRACE(testing::Message() << "tile " << h << "x" << w);
      for (int it = 0; it < 60; ++it) {
        // Half the cases: 8-bit codes (residuals <= 2^9, the coefficient
        // bound must hold). Other half: wider samples, exactness only.
        const bool narrow = it % 2 == 0;
        const int32_t lo = narrow ? -128 : -(1 << 14), hi = narrow ? 127 : (1 << 14);
        std::uniform_int_distribution<int32_t> d(lo, hi);
        const Pred mode = static_cast<Pred>(rng() % 6);
        const bool has_left = rng() % 4 != 0, has_top = rng() % 4 != 0;
        const std::vector<uint8_t> map = RandomMap(rng, h, w);
        const int stride = w + 5, out_stride = w + 3;
        std::vector<int32_t> values(h * stride), left(h), top(w), coeffs(h * w);
        for (auto& v : values) v = d(rng);
        for (auto& v : left) v = d(rng);
        for (auto& v : top) v = d(rng);
        const int32_t topleft = d(rng);
        const int32_t* lp = has_left ? left.data() : nullptr;
        const int32_t* tp = has_top ? top.data() : nullptr;
        tile_forward(mode, map.data(), h, w, values.data(), stride, lp, tp, topleft, coeffs.data());
        if (narrow) {
          for (int32_t c : coeffs) ASSERT_LE(std::abs(c), kMaxCoeffMagnitude);
        }
        std::vector<int32_t> out(h * out_stride, -77777);
        tile_inverse(mode, map.data(), h, w, coeffs.data(), lp, tp, topleft, out.data(), out_stride);
        for (int i = 0; i < h; ++i) {
          for (int j = 0; j < out_stride; ++j) {
            const int32_t want = j < w ? values[i * stride + j] : -77777;
            ASSERT_EQ(out[i * out_stride + j], want)
                << "mode " << int(mode) << " at " << i << "," << j;
          }
        }
      }
    }
  }
}

TEST(TileRoundTrip, ForwardIsPredictThenPerBlockTransform) {
  std::mt19937_64 rng(11);
  for (int it = 0; it < 200; ++it) {
    const int h = 1 + rng() % 32, w = 1 + rng() % 32;
    const Pred mode = static_cast<Pred>(rng() % 6);
    const std::vector<uint8_t> map = RandomMap(rng, h, w);
    std::uniform_int_distribution<int32_t> d(-128, 127);
    std::vector<int32_t> values(h * w), left(h), top(w), pred(h * w), coeffs(h * w);
    for (auto& v : values) v = d(rng);
    for (auto& v : left) v = d(rng);
    for (auto& v : top) v = d(rng);
    tile_forward(mode, map.data(), h, w, values.data(), w, left.data(), top.data(), 5, coeffs.data());
    predict(mode, h, w, left.data(), top.data(), 5, pred.data());
    std::vector<int32_t> expect(h * w);
    for (int k = 0; k < h * w; ++k) expect[k] = values[k] - pred[k];
    for (int by = 0; by < h / 8; ++by) {
      for (int bx = 0; bx < w / 8; ++bx) {
        const Xform t = static_cast<Xform>(map[by * tile_blocks_x(w) + bx]);
        int32_t* blk = expect.data() + by * 8 * w + bx * 8;
        Block c;
        fwd8x8(t, blk, w, c.data());
        for (int i = 0; i < 8; ++i)
          for (int j = 0; j < 8; ++j) blk[i * w + j] = c[8 * i + j];
      }
    }
    ASSERT_EQ(coeffs, expect) << h << "x" << w << " mode " << int(mode);
  }
}

TEST(TileRoundTrip, NullMapAndPartialBlockEntriesMeanNoTransform) {
  std::mt19937_64 rng(12);
  const int h = 15, w = 20;  // 2 x 3 sub-blocks; only (0,0) and (0,1) are full
  std::uniform_int_distribution<int32_t> d(-128, 127);
  std::vector<int32_t> values(h * w), top(w), a(h * w), b(h * w), c(h * w);
  for (auto& v : values) v = d(rng);
  for (auto& v : top) v = d(rng);
  const uint8_t none[6] = {0, 0, 0, 0, 0, 0};
  const uint8_t junk[6] = {0, 0, kXformDCT, kXformADST, kXformDCT, 3};
  tile_forward(kPredTop, nullptr, h, w, values.data(), w, nullptr, top.data(), 0, a.data());
  tile_forward(kPredTop, none, h, w, values.data(), w, nullptr, top.data(), 0, b.data());
  tile_forward(kPredTop, junk, h, w, values.data(), w, nullptr, top.data(), 0, c.data());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  for (int i = 0; i < h; ++i)
    for (int j = 0; j < w; ++j) EXPECT_EQ(a[i * w + j], values[i * w + j] - top[j]);
  std::vector<int32_t> out(h * w);
  tile_inverse(kPredTop, junk, h, w, c.data(), nullptr, top.data(), 0, out.data(), w);
  EXPECT_EQ(out, values);
  EXPECT_EQ(tile_block_xform(junk, h, w, 0, 2), kXformNone);
  EXPECT_EQ(tile_block_xform(junk, h, w, 1, 0), kXformNone);
  EXPECT_EQ(tile_block_xform(junk, h, w, 0, 0), kXformNone);
}

TEST(TileRoundTrip, SmoothTileWithTransformsHasSmallCoefficients) {
  // A 16 x 16 tile of a smooth surface predicted with PLANAR: DCT sub-blocks
  // need far fewer bits (sum |c|) than the raw residual's magnitude.
  const int h = 16, w = 16;
  std::vector<int32_t> values(h * w), left(h), top(w), raw(h * w), xf(h * w);
  auto f = [](int i, int j) {
    return static_cast<int32_t>(std::lround(60 * std::sin(0.2 * i) + 40 * std::cos(0.15 * j)));
  };
  for (int i = 0; i < h; ++i)
    for (int j = 0; j < w; ++j) values[i * w + j] = f(i, j);
  for (int i = 0; i < h; ++i) left[i] = f(i, -1);
  for (int j = 0; j < w; ++j) top[j] = f(-1, j);
  const uint8_t none[4] = {0, 0, 0, 0}, dct[4] = {1, 1, 1, 1};
  tile_forward(kPredDC, none, h, w, values.data(), w, left.data(), top.data(), f(-1, -1), raw.data());
  tile_forward(kPredDC, dct, h, w, values.data(), w, left.data(), top.data(), f(-1, -1), xf.data());
  long l1_raw = 0, l1_xf = 0;
  for (int k = 0; k < h * w; ++k) {
    l1_raw += std::abs(raw[k]);
    l1_xf += std::abs(xf[k]);
  }
  EXPECT_LT(l1_xf * 2, l1_raw);
  std::vector<int32_t> out(h * w);
  tile_inverse(kPredDC, dct, h, w, xf.data(), left.data(), top.data(), f(-1, -1), out.data(), w);
  EXPECT_EQ(out, values);
}

}  // namespace
