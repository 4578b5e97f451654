// codec/compress/choose_int.cpp — the int and bytes model searches: values
// of the code grid, row / column classes, activity and kernel contexts,
// scale classes and thresholds, chunk residuals. See encode_model_i.h.

#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <list>
#include <mutex>
#include <numeric>
#include <type_traits>
#include <unordered_map>

#include "bytes.h"
#include "encode_model_i.h"
#include "int_rows.h"

namespace wcodec {

// ------------------------------------------------------------------ int
// Kernel-row symbols (nbr_mode 4) are taken when their estimated size is
// at most this fraction above the best per-code model's.
constexpr double kKernRowSlack = 0.01;

int32_t code_at(uint32_t sub, const uint8_t* bytes, uint64_t i) {
  switch (sub) {
    case kIntNibble: return (bytes[i >> 1] >> ((i & 1) * 4)) & 15;
    case kIntTernary: return (bytes[i >> 2] >> ((i & 3) * 2)) & 3;
    default: return bytes[i];
  }
}

// Values of the whole tensor grid (code -> signed value).
void int_values(const IntParams& p, const TensorGeometry& g, const uint8_t* data, const AuxInput& aux,
                       IntGrid* v) {
  const uint64_t n = g.rows * g.cols;
  v->resize(n);
  uint64_t i0 = 0;
  if (!p.zgroup && (p.sub == kIntI8 || p.sub == kIntU8)) {
    // One code per byte: a sign extension or a subtraction (vectorized).
    int32_t* out = v->data();
    const int32_t center = p.center;
    if (p.sub == kIntI8)
      for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<int8_t>(data[i]);
    else
      for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(data[i]) - center;
    i0 = n;
  } else if (!p.zgroup) {
    // Whole bytes through a table: byte -> its codes' values (LSB first).
    const uint32_t cpb = int_codes_per_byte(p.sub), bits = 8 / cpb;
    int32_t lut[256][4];
    for (uint32_t b = 0; b < 256; ++b)
      for (uint32_t k = 0; k < cpb; ++k)
        lut[b][k] = int_code_to_value(p.sub, (b >> (k * bits)) & ((1u << bits) - 1), p.center);
    const uint64_t nb = n / cpb;
    int32_t* out = v->data();
    // A byte's codes as one copy of cpb values (cpb a constant).
    auto expand = [&](auto k) {
      constexpr uint32_t K = decltype(k)::value;
      for (uint64_t i = 0; i < nb; ++i) std::memcpy(out + i * K, lut[data[i]], K * sizeof(int32_t));
    };
    if (cpb == 2) expand(std::integral_constant<uint32_t, 2>{});
    else if (cpb == 4) expand(std::integral_constant<uint32_t, 4>{});
    else
      for (uint64_t i = 0; i < nb; ++i)
        for (uint32_t k = 0; k < cpb; ++k) out[i * cpb + k] = lut[data[i]][k];
    i0 = nb * cpb;
  } else if (g.cols) {
    // Zero points per group of zgroup codes along a row (the code type
    // chosen outside the loop).
    int32_t* out = v->data();
    auto fill = [&](auto sub) {
      for (uint64_t r = 0; r < g.rows; ++r) {
        const uint8_t* zrow = aux.bytes + r * aux.cols;
        // Group by group: one zero point per run of zgroup codes.
        for (uint64_t c0 = 0, zi = 0; c0 < g.cols; c0 += p.zgroup, ++zi) {
          const uint8_t z = zrow[zi];
          uint64_t i = r * g.cols + c0;
          const uint64_t i1 = r * g.cols + std::min<uint64_t>(g.cols, c0 + p.zgroup);
          if constexpr (sub.value == kIntNibble) {
            // Whole bytes (two codes each) where the group holds them.
            if (i & 1) {
              out[i] = static_cast<int32_t>(code_at(kIntNibble, data, i)) - z;
              ++i;
            }
            for (; i + 2 <= i1; i += 2) {
              const uint8_t b = data[i >> 1];
              out[i] = static_cast<int32_t>(b & 15) - z;
              out[i + 1] = static_cast<int32_t>(b >> 4) - z;
            }
          }
          for (; i < i1; ++i)
            out[i] = int_code_to_value(sub.value, static_cast<uint32_t>(code_at(sub.value, data, i)), z);
        }
      }
    };
    switch (p.sub) {
      case kIntI8: fill(std::integral_constant<uint32_t, kIntI8>{}); break;
      case kIntU8: fill(std::integral_constant<uint32_t, kIntU8>{}); break;
      case kIntNibble: fill(std::integral_constant<uint32_t, kIntNibble>{}); break;
      default: fill(std::integral_constant<uint32_t, kIntTernary>{}); break;
    }
    i0 = n;
  }
  for (uint64_t i = i0; i < n; ++i) {
    int32_t center = p.center;
    if (p.zgroup) {
      const uint64_t r = i / g.cols, c = i % g.cols;
      center = aux.bytes[r * aux.cols + c / p.zgroup];
    }
    (*v)[i] = int_code_to_value(p.sub, static_cast<uint32_t>(code_at(p.sub, data, i)), center);
  }
}

uint8_t mag_class(double mean_abs) {
  // Half-octave classes of the mean magnitude: 0 for ~0, up to 31.
  const double l = 2.0 * std::log2(mean_abs + 1.0 / 64);
  return static_cast<uint8_t>(std::clamp(static_cast<int>(std::lround(l)) + 12, 0, 31));
}

void int_side_info(const TensorGeometry& g, const IntGrid& v, std::vector<uint8_t>* rc,
                          std::vector<uint8_t>* cc, uint32_t* max_abs) {
  // Integer sums (exact, as the double sums they replace were below 2^53).
  // Int values are at most 255 in magnitude (8-bit codes less a center or
  // zero point): column sums gather in 32 bits over blocks of 2^23 rows.
  std::vector<uint64_t> rs(g.rows, 0), cs(g.cols, 0);
  std::vector<uint32_t> cs32(g.cols, 0);
  uint32_t amax = 0;
  for (uint64_t r = 0; r < g.rows; ++r) {
    rs[r] = int_abs_sums(v.data() + r * g.cols, g.cols, cs32.data(), &amax);
    if ((r + 1) % (1u << 23) == 0 || r + 1 == g.rows)
      for (uint64_t c = 0; c < g.cols; ++c) {
        cs[c] += cs32[c];
        cs32[c] = 0;
      }
  }
  *max_abs = amax;
  rc->resize(g.rows);
  cc->resize(g.cols);
  for (uint64_t r = 0; r < g.rows; ++r)
    (*rc)[r] = mag_class(static_cast<double>(rs[r]) / static_cast<double>(g.cols));
  for (uint64_t c = 0; c < g.cols; ++c)
    (*cc)[c] = mag_class(static_cast<double>(cs[c]) / static_cast<double>(g.rows));
}

// Thresholds splitting the distribution of n values (histogram h over
// values 0..1023) into k classes (quantiles).
std::vector<uint32_t> hist_thresholds(const std::vector<uint64_t>& h, uint64_t n, uint32_t k) {
  std::vector<uint32_t> thr;
  if (n == 0 || k < 2) return thr;
  uint64_t acc = 0;
  uint32_t next = 1;
  for (uint32_t v = 0; v < 1024 && next < k; ++v) {
    acc += h[v];
    while (next < k && acc > n * next / k) {
      uint32_t t = v + 1 > 1 ? v + 1 : 1;
      if (!thr.empty() && t <= thr.back()) t = thr.back() + 1;
      thr.push_back(t);
      ++next;
    }
  }
  while (thr.size() + 1 < k) thr.push_back(thr.empty() ? 1 : thr.back() + 1);
  return thr;
}

// Residual grid of one chunk: values, transformed per tile when the chunk
// has a tile map.
void chunk_residuals(const TensorGeometry& g, const IntGrid& vals, const ChunkRef& c,
                            const std::vector<uint8_t>* tile_map, std::vector<int32_t>* res) {
  const uint32_t h = static_cast<uint32_t>(c.h), w = static_cast<uint32_t>(c.w);
  res->resize(uint64_t{h} * w);
  for (uint32_t r = 0; r < h; ++r)
    std::memcpy(res->data() + uint64_t{r} * w, vals.data() + (c.row0 + r) * g.cols + c.col0, w * sizeof(int32_t));
  if (!tile_map) return;
  std::vector<int32_t> orig = *res, out(kTile * kTile);
  const uint32_t tr = (h + kTile - 1) / kTile, tc = (w + kTile - 1) / kTile;
  int32_t left[kTile], top[kTile];
  for (uint32_t ti = 0; ti < tr; ++ti)
    for (uint32_t tj = 0; tj < tc; ++tj) {
      const uint8_t pred = (*tile_map)[2 * (ti * tc + tj)], xf = (*tile_map)[2 * (ti * tc + tj) + 1];
      if (pred == 0 && xf == 0) continue;
      const uint32_t r0 = ti * kTile, c0 = tj * kTile;
      const uint32_t th = std::min(kTile, h - r0), tw = std::min(kTile, w - c0);
      const bool hl = c0 > 0, ht = r0 > 0;
      for (uint32_t i = 0; i < th; ++i) left[i] = hl ? orig[(r0 + i) * w + c0 - 1] : 0;
      for (uint32_t j = 0; j < tw; ++j) top[j] = ht ? orig[(r0 - 1) * w + c0 + j] : 0;
      const int32_t tl = hl && ht ? orig[(r0 - 1) * w + c0 - 1] : 0;
      uint8_t xmap[4];
      unpack_xform_map(xf, static_cast<int>(th), static_cast<int>(tw), xmap);
      tile::tile_forward(static_cast<tile::Pred>(pred), xmap, static_cast<int>(th), static_cast<int>(tw),
                         orig.data() + r0 * w + c0, static_cast<int>(w), hl ? left : nullptr, ht ? top : nullptr, tl,
                         out.data());
      for (uint32_t i = 0; i < th; ++i)
        for (uint32_t j = 0; j < tw; ++j) (*res)[(r0 + i) * w + c0 + j] = out[i * tw + j];
    }
}

// The chunk's residuals: straight from vals for a chunk of whole rows
// without a tile map (stride w = g.cols), else chunk_residuals into *buf.
const int32_t* residuals_of(const TensorGeometry& g, const IntGrid& vals, const ChunkRef& c,
                                   const std::vector<uint8_t>* tile_map, std::vector<int32_t>* buf) {
  if (!tile_map && c.col0 == 0 && c.w == g.cols) return vals.data() + c.row0 * g.cols;
  chunk_residuals(g, vals, c, tile_map, buf);
  return buf->data();
}

// The order-0 entropy of the codes' tokens, in bytes. Without zero points
// a code's value depends on the code alone, so the token counts come from a
// histogram of the bytes (each byte's codes counted once per occurrence):
// the same counts as tokenizing every value, at a byte's cost rather than
// one token per code (ternary: 4 codes a byte).
double int_order0_bytes(const IntParams& p, const IntGrid& vals, const uint8_t* data) {
  const size_t ns = p.nsym;
  std::vector<uint64_t> h(ns, 0);
  const size_t n = vals.size();
  size_t i = 0;
  if (!p.zgroup && data) {
    const uint32_t cpb = int_codes_per_byte(p.sub), bits = 8 / cpb;
    const size_t nb = n / cpb;
    // Four interleaved histograms: runs of one byte (the zeros of ternary
    // codes) would chain every count on the previous store.
    std::vector<uint64_t> hb(4 * 256, 0);
    size_t k = 0;
    for (; k + 4 <= nb; k += 4)
      for (size_t j = 0; j < 4; ++j) hb[j * 256 + data[k + j]]++;
    for (; k < nb; ++k) hb[data[k]]++;
    for (uint32_t b = 0; b < 256; ++b) {
      const uint64_t c = hb[b] + hb[256 + b] + hb[512 + b] + hb[768 + b];
      if (!c) continue;
      for (uint32_t q = 0; q < cpb; ++q)
        h[make_token(p, int_code_to_value(p.sub, (b >> (q * bits)) & ((1u << bits) - 1), p.center)).tok] += c;
    }
    i = nb * cpb;
  } else {
    std::vector<uint64_t> h4(4 * ns, 0);
    for (; i + 4 <= n; i += 4)
      for (size_t j = 0; j < 4; ++j) h4[j * ns + make_token(p, vals[i + j]).tok]++;
    for (size_t t = 0; t < ns; ++t) h[t] = h4[t] + h4[ns + t] + h4[2 * ns + t] + h4[3 * ns + t];
  }
  for (; i < n; ++i) h[make_token(p, vals[i]).tok]++;
  double slog = 0;
  for (uint64_t c : h) slog += clog2c(c);
  return (clog2c(vals.size()) - slog) / 8.0;
}

double int_left_sign_bytes(const IntParams& p, const TensorGeometry& g, const IntGrid& vals) {
  // Token counts per context: the left neighbour's sign class (0 zero,
  // 1 positive, 2 negative; 0 at the start of a row). Escape tokens add
  // their raw bits.
  const size_t ns = p.nsym;
  std::vector<uint64_t> h[3] = {std::vector<uint64_t>(ns, 0), std::vector<uint64_t>(ns, 0),
                                std::vector<uint64_t>(ns, 0)};
  const uint64_t rows = g.rows, cols = g.cols;
  WC_CHECK(vals.size() == rows * cols);
  // Every code's value is within [-255, 255]: a value's histogram cell
  // (token) and the sign class it gives its right neighbour from tables.
  constexpr int32_t kOff = 256;
  uint16_t tok[2 * kOff];
  uint8_t sgn[2 * kOff];
  for (int32_t v = -kOff; v < kOff; ++v) {
    tok[v + kOff] = static_cast<uint16_t>(make_token(p, v).tok);
    sgn[v + kOff] = static_cast<uint8_t>(v > 0 ? 1 : (v < 0 ? 2 : 0));
  }
  for (uint64_t r = 0; r < rows; ++r) {
    const int32_t* v = vals.data() + r * cols;
    uint32_t ctx = 0;
    for (uint64_t c = 0; c < cols; ++c) {
      const uint32_t i = static_cast<uint32_t>(v[c] + kOff);
      if (__builtin_expect(i < 2 * kOff, 1)) {
        h[ctx][tok[i]]++;
        ctx = sgn[i];
      } else {
        h[ctx][make_token(p, v[c]).tok]++;
        ctx = v[c] > 0 ? 1u : 2u;
      }
    }
  }
  double bits = 0;
  for (const auto& hk : h) {
    bits += entropy_bits(hk);
    // An escape token esc + nb (nb >= 2) is followed by nb - 1 raw bits.
    for (size_t t = p.esc + 2u; t < ns; ++t) bits += static_cast<double>(hk[t]) * static_cast<double>(t - p.esc - 1);
  }
  return bits / 8.0;
}

// direct_counts: count every candidate from the features (no activity
// histograms; tests compare).
void choose_int(const TensorGeometry& g, const IntGrid& vals, IntParams base, bool allow_phase,
                       TensorModel* m, std::vector<uint8_t>* rc, std::vector<uint8_t>* cc, uint32_t* max_abs,
                       bool direct_counts, bool kernel_rows) {
  int_side_info(g, vals, rc, cc, max_abs);
  // Sampled elements per kind: 2^17 for 8-bit codes, 2^15 for 4-bit and
  // 2^14 for ternary codes. Halving the sample costs about 0.0001 of the
  // file in model fit: the 2- and 4-bit kinds take that for encode speed
  // (isnet: ternary 0.6887 -> 0.6889 at 1.12x the speed, int4 0.8978 ->
  // 0.8979 at 1.10x), int8 does not (its size target is the tighter one).
  const uint64_t kSampleElems = base.sub == kIntTernary ? 1u << 14 : (base.sub == kIntNibble ? 1u << 15 : 1u << 17);
  const uint64_t total = g.rows * g.cols;
  // Small tensors (under kSmallIntElems elements) try one activity class
  // only, with and without 3x3 kernel contexts: on the real checkpoints no
  // such tensor chose more classes, sign neighbours or scale classes (their
  // tables cost more than they save), and the other candidates (and the
  // distributions for their thresholds) were most of their encode time.
  const bool small = total < kSmallIntElems;
  const bool kernels = allow_phase && g.cols % 9 == 0;  // 3x3 kernels flattened along a row may fit
  IntParams best = base;
  best.nb = 1;
  best.ns = 1;
  auto done = [&] {
    m->kind = ModelKind::kInt;
    m->ip = best;
    if (!best.use_rc) rc->assign(1, 0);
    if (!best.use_cc) cc->assign(1, 0);
  };
  // A small tensor without kernel candidates has one candidate: nothing to
  // estimate.
  if (small && !kernels) return done();
  auto sample = sample_chunks(g, kSampleElems);
  // The sample is whole chunks, and one chunk of 2- or 4-bit codes holds far
  // more than kSampleElems elements: candidates are evaluated on every
  // row_step-th row of the sampled chunks (contexts still see the rows in
  // between), about kSampleElems elements in all.
  uint64_t sampled_full = 0;
  for (auto ci : sample) {
    uint64_t a, b, h, w;
    g.chunk_rect(ci, &a, &b, &h, &w);
    sampled_full += h * w;
  }
  const uint64_t row_step = std::max<uint64_t>(1, sampled_full / kSampleElems);
  uint64_t sampled = 0;
  for (auto ci : sample) {
    uint64_t a, b, h, w;
    g.chunk_rect(ci, &a, &b, &h, &w);
    sampled += (h + row_step - 1) / row_step * w;
  }
  const double scale = static_cast<double>(total) / static_cast<double>(std::max<uint64_t>(1, sampled));
  // Distributions for the thresholds, counted in one pass over every
  // third element of the evaluated rows: the activity without an extra
  // neighbour and with |L3| or |L9| added (act_hist[0..2]), and the scale
  // value of each side combination (scale_hist[sides]: 1 row, 2 column,
  // 3 both; 0 none, all at 0). Values are clamped to 1023.
  std::array<std::vector<uint64_t>, 3> act_hist;
  std::array<std::vector<uint64_t>, 4> scale_hist;
  for (auto& h : act_hist) h.assign(1024, 0);
  for (auto& h : scale_hist) h.assign(1024, 0);
  uint64_t n_hist = 0;
  for (auto ci : sample) {
    if (small) break;
    ChunkRef c = chunk_ref(g, nullptr, ci);
    for (uint64_t r = 0; r < c.h; r += row_step) {
      const uint32_t rv = (*rc)[c.row0 + r];
      for (uint64_t cc2 = 0; cc2 < c.w; cc2 += 3) {
        const uint64_t i = (c.row0 + r) * g.cols + c.col0 + cc2;
        const int32_t l = cc2 > 0 ? vals[i - 1] : 0, l2 = cc2 > 1 ? vals[i - 2] : 0;
        const int32_t t = r > 0 ? vals[i - g.cols] : 0;
        const uint32_t a = 2 * iabs32(l) + iabs32(t) + iabs32(l2);
        const uint32_t a3 = cc2 > 2 ? iabs32(vals[i - 3]) : 0, a9 = cc2 > 8 ? iabs32(vals[i - 9]) : 0;
        act_hist[0][std::min<uint32_t>(a, 1023)]++;
        act_hist[1][std::min<uint32_t>(a + a3, 1023)]++;
        act_hist[2][std::min<uint32_t>(a + a9, 1023)]++;
        const uint32_t cv = (*cc)[c.col0 + cc2];
        scale_hist[1][std::min<uint32_t>(rv, 1023)]++;
        scale_hist[2][std::min<uint32_t>(cv, 1023)]++;
        scale_hist[3][std::min<uint32_t>(rv + cv, 1023)]++;
        ++n_hist;
      }
    }
  }
  scale_hist[0][0] = n_hist;
  // Candidates are evaluated on the sample with contexts over the whole
  // chunk (lane edges ignored: an estimate).
  // Residuals without tools: the values themselves (a copy only for chunks
  // of partial rows).
  struct SampleChunk {
    ChunkRef c;
    std::vector<int32_t> buf;
    const int32_t* res;
  };
  std::vector<SampleChunk> sch;
  for (auto ci : sample) {
    SampleChunk sc2{chunk_ref(g, nullptr, ci), {}, nullptr};
    sc2.res = residuals_of(g, vals, sc2.c, nullptr, &sc2.buf);
    sch.push_back(std::move(sc2));
  }
  // Most candidates differ only in their thresholds, extra neighbours, column
  // period and scale classes: their contexts come from per-element features
  // computed once (the values int_ctx computes over the chunk as one
  // rectangle).
  // 16 bytes (the candidates stream the list a dozen times; at 28 bytes a
  // 2^17-element sample left the L2 cache): the magnitudes fit 16 bits as
  // values are at most 255 in magnitude (8-bit codes less a center or zero
  // point), and the column is kept modulo kColPeriods, which every column
  // period of the candidates (9, 25) divides.
  constexpr uint32_t kColPeriods = 225;
  WC_CHECK(*max_abs <= 255);
  struct Feat {
    uint16_t a0, la3, la9;  // activity without the extra neighbour; |L3|, |L9|
    uint16_t a1;            // |L1|
    uint16_t tok;
    uint16_t q;             // sign classes q() of L1, L2, T, L3, L9, 2 bits each from bit 0
    uint8_t col;            // tensor column % kColPeriods
    uint8_t ls, rcv, ccv;   // left sign class; row and column scale values
  };
  static_assert(sizeof(Feat) == 16, "a compact feature");
  auto qv = [](int32_t v) { return static_cast<uint32_t>(v > 0) | static_cast<uint32_t>(v < 0) << 1; };
  RawVector<Feat> feats(sampled);  // every entry written below
  size_t nfeat = 0;
  uint32_t nsym_used = 1;  // tokens below it occur (see the candidates below)
  // A feature from the element's neighbours (0 where the chunk has none:
  // hl, h2, h3, h9 for a column at least 1, 2, 3, 9 in, ht for a row below
  // the first); col is (col0 + c) % kColPeriods.
  auto feat_of = [&](const int32_t* row, uint32_t c, uint32_t w, bool hl, bool h2, bool h3, bool h9, bool ht,
                     uint32_t col, uint8_t rcv, uint8_t ccv) {
    const int32_t l = hl ? row[c - 1] : 0, l2 = h2 ? row[c - 2] : 0;
    const int32_t t = ht ? row[static_cast<int64_t>(c) - static_cast<int64_t>(w)] : 0;
    const int32_t l3 = h3 ? row[c - 3] : 0, l9 = h9 ? row[c - 9] : 0;
    Feat f;
    f.a0 = static_cast<uint16_t>(2 * iabs32(l) + iabs32(t) + iabs32(l2) + (!hl && ht ? 2 * iabs32(t) : 0u));
    f.la3 = static_cast<uint16_t>(iabs32(l3));
    f.la9 = static_cast<uint16_t>(iabs32(l9));
    f.a1 = static_cast<uint16_t>(iabs32(l));
    f.tok = static_cast<uint16_t>(make_token(base, row[c]).tok);
    f.col = static_cast<uint8_t>(col);
    f.q = static_cast<uint16_t>(qv(l) | qv(l2) << 2 | qv(t) << 4 | qv(l3) << 6 | qv(l9) << 8);
    f.ls = static_cast<uint8_t>(qv(l));
    f.rcv = rcv;
    f.ccv = ccv;
    return f;
  };
  for (const auto& ch : sch) {
    const uint32_t h = static_cast<uint32_t>(ch.c.h), w = static_cast<uint32_t>(ch.c.w);
    const uint32_t col_first = static_cast<uint32_t>(ch.c.col0 % kColPeriods);
    const uint32_t edge = std::min<uint32_t>(w, 9);  // columns with a missing left neighbour
    for (uint32_t r = 0; r < h; r += static_cast<uint32_t>(row_step)) {
      const int32_t* row = ch.res + uint64_t{r} * w;
      const uint8_t rcv = (*rc)[ch.c.row0 + r];
      const uint8_t* ccs = cc->data() + ch.c.col0;
      const bool ht = r > 0;
      uint32_t col = col_first;
      uint32_t tmax = 0;
      Feat* out = feats.data() + nfeat;
      for (uint32_t c = 0; c < edge; ++c) {
        out[c] = feat_of(row, c, w, c > 0, c > 1, c >= 3, c >= 9, ht, col, rcv, ccs[c]);
        tmax = std::max<uint32_t>(tmax, out[c].tok);
        col = col + 1 == kColPeriods ? 0 : col + 1;
      }
      // Every left neighbour exists: the same features without the edge
      // tests (the row above chosen outside the loop).
      auto interior = [&](auto has_top) {
        for (uint32_t c = edge; c < w; ++c) {
          out[c] = feat_of(row, c, w, true, true, true, true, has_top.value, col, rcv, ccs[c]);
          tmax = std::max<uint32_t>(tmax, out[c].tok);
          col = col + 1 == kColPeriods ? 0 : col + 1;
        }
      };
      if (ht) interior(std::true_type{});
      else interior(std::false_type{});
      nfeat += w;
      nsym_used = std::max<uint32_t>(nsym_used, tmax + 1u);
    }
  }
  WC_CHECK(nfeat == feats.size());
  // The activity distribution of the 3x3 kernel contexts (nbr_mode 3), over
  // the features: phases cycle with period 9, which the histogram pass above
  // (every third element) would not sample evenly.
  // A feature's 3x3 kernel neighbours (int_kernel_nbrs bits) and their
  // activity |Lk| + |Uk|.
  auto kern3x3 = [](const Feat& f, uint32_t* nbrs) {
    const uint32_t kp = f.col % 9, k = (kp % 3 != 0 ? 1u : 0u) | (kp >= 3 ? 2u : 0u);
    *nbrs = k;
    return (k & 1 ? f.a1 : 0u) + (k & 2 ? f.la3 : 0u);
  };
  std::vector<uint64_t> kern_hist;
  uint64_t n_kern = 0;
  if (kernels) {
    kern_hist.assign(1024, 0);
    uint32_t k;
    for (const Feat& f : feats) kern_hist[std::min<uint32_t>(kern3x3(f, &k), 1023)]++;
    n_kern = feats.size();
  }
  // Activity candidates (nbr_mode 0 with no extra neighbour or L3 / L9; 3x3
  // kernel contexts, nbr_mode 3) and sign-neighbour candidates (nbr_mode 1
  // with L3 and optionally L9; nbr_mode 2 with L3 and a column period), from
  // the features.
  // Counts per (context, token) cover the tokens that occur (ternary codes:
  // 3 of 26): the same costs (context_cost skips empty cells) from a
  // fraction of the cells.
  std::vector<uint32_t> fcnt;
  // use(f, ctx) for every feature under the params' context function (the
  // mode chosen outside the loop).
  auto each_ctx = [&](const IntParams& p, const IntLuts& L, auto&& use) {
    const uint32_t oa = p.off_a, use_rc = p.use_rc ? 0xFFu : 0u, use_cc = p.use_cc ? 0xFFu : 0u;
    auto loop = [&](auto&& ctx_of) {
      for (const Feat& f : feats) use(f, ctx_of(f, static_cast<uint32_t>(L.scale[(f.rcv & use_rc) + (f.ccv & use_cc)])));
    };
    auto q = [](const Feat& f, int k) { return static_cast<uint32_t>(f.q >> (2 * k) & 3); };  // L1 L2 T L3 L9
    if (p.nbr_mode == 0) {
      loop([&](const Feat& f, uint32_t sc) {
        return int_ctx_act(p, L, f.a0 + (oa == 3 ? f.la3 : (oa == 9 ? f.la9 : 0u)), f.ls, sc);
      });
    } else if (p.nbr_mode == 2) {
      WC_CHECK(p.period > 0 && kColPeriods % p.period == 0);
      uint8_t phase[kColPeriods];  // column % period from column % kColPeriods
      for (uint32_t c = 0; c < kColPeriods; ++c) phase[c] = static_cast<uint8_t>(c % p.period);
      loop([&](const Feat& f, uint32_t sc) { return (sc * p.period + phase[f.col]) * 9u + q(f, 0) * 3u + q(f, 3); });
    } else if (p.nbr_mode == 3) {  // 3x3 kernels: L1 and L3 inside the kernel
      loop([&](const Feat& f, uint32_t sc) {
        uint32_t k;
        const uint32_t a = kern3x3(f, &k);
        return ((sc * p.nb + L.act[std::min<uint32_t>(a, 1023)]) * 3u + (k & 1 ? q(f, 0) : 0u)) * 3u +
               (k & 2 ? q(f, 3) : 0u);
      });
    } else {
      loop([&](const Feat& f, uint32_t sc) {
        const uint32_t k = ((q(f, 0) * 3u + q(f, 1)) * 3u + q(f, 3)) * 3u + q(f, 2);
        return p.off_b ? sc * 243u + k * 3u + q(f, 4) : sc * 81u + k;
      });
    }
  };
  // Candidates with few (context, token) cells count into four interleaved
  // copies (fcnt4, feature i into copy i % 4), then summed into fcnt: runs
  // of one cell (ternary zeros among zeros) would chain every count on the
  // previous store.
  constexpr uint64_t kCopyCells = 4096;
  std::vector<uint32_t> fcnt4;
  auto sum_copies = [&](uint64_t cells) {
    fcnt.resize(cells);
    for (uint64_t k = 0; k < cells; ++k)
      fcnt[k] = fcnt4[k] + fcnt4[cells + k] + fcnt4[2 * cells + k] + fcnt4[3 * cells + k];
  };
  auto fcnt_bits = [&](uint32_t nctx, uint32_t nsym) {
    double bits = 0;
    for (uint32_t k = 0; k < nctx; ++k) bits += context_cost(fcnt.data() + uint64_t{k} * nsym, nsym, scale);
    return bits;
  };
  // Activity candidates with one scale class and no row or column classes
  // (nbr_mode 0: context act * 3 + left sign; nbr_mode 3: act * 9 + the
  // kernel neighbours' signs) differ only in their activity thresholds:
  // their counts are sums, over the activity values, of one histogram per
  // (activity value, sign part, token), made in one pass for every
  // candidate of a variant (nbr_mode 0 with off_a 0, 3 or 9; nbr_mode 3).
  // The same integers as counting each candidate's features; taken where
  // the histogram has fewer cells than half the features (ternary and 4-bit
  // codes, whose activities span a few dozen values; not 8-bit codes).
  struct ActHist {
    bool made = false;
    uint32_t amax = 0, width = 0;  // activities 0..amax; sign parts per activity (3 or 9)
    std::vector<uint32_t> h;       // (a * width + sign part) * nsym_used + token; empty: not taken
  };
  std::array<ActHist, 4> act_hists;  // [0, 1, 2]: nbr_mode 0 with off_a 0, 3, 9; [3]: nbr_mode 3
  auto act_variant = [](const IntParams& p) -> int {
    if (p.ns != 1 || p.use_rc || p.use_cc) return -1;
    if (p.nbr_mode == 3) return 3;
    if (p.nbr_mode == 0) return p.off_a == 3 ? 1 : (p.off_a == 9 ? 2 : 0);
    return -1;
  };
  // A feature's activity (clamped as int_ctx_act and int_ctx_kernel do) and
  // sign part under variant v, as each_ctx computes them.
  auto act_of = [&](int v, const Feat& f, uint32_t* part) -> uint32_t {
    if (v == 3) {
      uint32_t k;
      const uint32_t a = kern3x3(f, &k);
      *part = (k & 1 ? static_cast<uint32_t>(f.q & 3) : 0u) * 3u + (k & 2 ? static_cast<uint32_t>(f.q >> 6 & 3) : 0u);
      return std::min<uint32_t>(a, 1023);
    }
    *part = f.ls;
    return std::min<uint32_t>(f.a0 + (v == 1 ? f.la3 : (v == 2 ? f.la9 : 0u)), 1023);
  };
  auto make_act_hist = [&](int v, ActHist* ah) {
    ah->made = true;
    ah->width = v == 3 ? 9u : 3u;
    // The largest activity from the largest magnitude m (no pass over the
    // features): 2|L1| + |T| + |L2| (3|T| at a row's first column) is at
    // most 4m, 5m with |L3| or |L9|; a kernel's |Lk| + |Uk| at most 2m.
    const uint32_t m_abs = *max_abs;
    const uint32_t amax = std::min<uint32_t>(1023, v == 3 ? 2 * m_abs : (v == 0 ? 4 * m_abs : 5 * m_abs));
    uint32_t part;
    const uint64_t hcells = uint64_t{amax + 1} * ah->width * nsym_used;
    if (direct_counts || 2 * hcells > feats.size()) return;
    ah->amax = amax;
    // Four interleaved copies (runs of one cell, as in eval_feats).
    std::vector<uint32_t> h4(4 * hcells, 0);
    for (size_t i = 0; i < feats.size(); ++i) {
      const Feat& f = feats[i];
      const uint32_t a = act_of(v, f, &part);
      WC_CHECK(a <= amax);
      h4[(i & 3) * hcells + (uint64_t{a} * ah->width + part) * nsym_used + f.tok]++;
    }
    ah->h.resize(hcells);
    for (uint64_t k = 0; k < hcells; ++k) ah->h[k] = h4[k] + h4[hcells + k] + h4[2 * hcells + k] + h4[3 * hcells + k];
  };
  auto eval_feats = [&](const IntParams& p) {
    IntLuts L;
    build_int_luts(p, &L);
    const uint32_t nctx = int_nctx(p), nsym = nsym_used;
    const uint64_t cells = uint64_t{nctx} * nsym;
    const int v = act_variant(p);
    ActHist* ah = v >= 0 ? &act_hists[static_cast<size_t>(v)] : nullptr;
    if (ah && !ah->made) make_act_hist(v, ah);
    if (ah && !ah->h.empty()) {
      const uint64_t row = uint64_t{ah->width} * nsym;  // one activity value's cells
      WC_CHECK(cells == uint64_t{p.nb} * row);
      fcnt.assign(cells, 0);
      for (uint32_t a = 0; a <= ah->amax; ++a) {
        uint32_t* dst = fcnt.data() + L.act[a] * row;
        const uint32_t* src = ah->h.data() + a * row;
        for (uint64_t k = 0; k < row; ++k) dst[k] += src[k];
      }
    } else if (cells <= kCopyCells) {
      fcnt4.assign(4 * cells, 0);
      size_t i = 0;
      each_ctx(p, L, [&](const Feat& f, uint32_t ctx) { fcnt4[(i++ & 3) * cells + uint64_t{ctx} * nsym + f.tok]++; });
      sum_copies(cells);
    } else {
      fcnt.assign(cells, 0);
      each_ctx(p, L, [&](const Feat& f, uint32_t ctx) { fcnt[uint64_t{ctx} * nsym + f.tok]++; });
    }
    return fcnt_bits(nctx, nsym);
  };
  // Candidates that differ from params `from` (one scale class) only in
  // their scale classes: every context is sc * (contexts per class) + the
  // context at class 0, so each feature's class-0 context and token are
  // computed once (keys) and each candidate adds its scale class.
  std::vector<uint32_t> keys;
  auto make_keys = [&](const IntParams& from) {
    IntLuts L;
    build_int_luts(from, &L);
    keys.clear();
    keys.reserve(feats.size());
    each_ctx(from, L, [&](const Feat& f, uint32_t ctx) { keys.push_back(ctx * nsym_used + f.tok); });
  };
  auto eval_scaled = [&](const IntParams& p) {
    IntLuts L;
    build_int_luts(p, &L);
    const uint32_t nctx = int_nctx(p), nsym = nsym_used, stride = nctx / p.ns * nsym;
    const uint64_t cells = uint64_t{nctx} * nsym;
    const uint32_t use_rc = p.use_rc ? 0xFFu : 0u, use_cc = p.use_cc ? 0xFFu : 0u;
    if (cells <= kCopyCells) {
      fcnt4.assign(4 * cells, 0);
      for (size_t i = 0; i < feats.size(); ++i) {
        const Feat& f = feats[i];
        fcnt4[(i & 3) * cells + L.scale[(f.rcv & use_rc) + (f.ccv & use_cc)] * stride + keys[i]]++;
      }
      sum_copies(cells);
    } else {
      fcnt.assign(cells, 0);
      for (size_t i = 0; i < feats.size(); ++i) {
        const Feat& f = feats[i];
        fcnt[L.scale[(f.rcv & use_rc) + (f.ccv & use_cc)] * stride + keys[i]]++;
      }
    }
    double bits = fcnt_bits(nctx, nsym);
    if (p.use_rc) bits += 5.0 * static_cast<double>(g.rows);
    if (p.use_cc) bits += 5.0 * static_cast<double>(g.cols);
    return bits;
  };
  auto from_feats = [](const IntParams& p) {
    const bool act = (p.nbr_mode == 0 && (p.off_a == 0 || p.off_a == 3 || p.off_a == 9)) ||
                     (p.nbr_mode == 3 && p.period == 9 && p.off_a == 3);
    const bool signs = (p.nbr_mode == 1 || p.nbr_mode == 2) && p.off_a == 3 && (p.off_b == 0 || p.off_b == 9) &&
                       (p.nbr_mode == 1 || (p.off_b == 0 && p.period > 0));
    return act || signs;
  };
  bool scaled = false;  // candidates differ from the keys' params in scale classes only
  auto eval = [&](const IntParams& p) {
    if (scaled) return eval_scaled(p);
    if (from_feats(p)) {
      double bits = eval_feats(p);
      if (p.use_rc) bits += 5.0 * static_cast<double>(g.rows);
      if (p.use_cc) bits += 5.0 * static_cast<double>(g.cols);
      return bits;
    }
    Stats s;
    s.init(int_nctx(p), p.nsym, 0, 0);
    IntLuts L;
    build_int_luts(p, &L);
    for (const auto& ch : sch) {
      const uint32_t h = static_cast<uint32_t>(ch.c.h), w = static_cast<uint32_t>(ch.c.w);
      for (uint32_t r = 0; r < h; r += static_cast<uint32_t>(row_step)) {
        for (uint32_t c = 0; c < w; ++c) {
          const uint32_t scl = int_scale_class(p, L, rc->data(), cc->data(), static_cast<uint32_t>(ch.c.row0 + r),
                                               static_cast<uint32_t>(ch.c.col0 + c));
          s.add(0, int_ctx(p, L, ch.res, w, r, c, 0, 0, scl,
                           p.nbr_mode >= 2 ? static_cast<uint32_t>((ch.c.col0 + c) % p.period) : 0u),
                make_token(base, ch.res[uint64_t{r} * w + c]).tok);
        }
      }
    }
    double bits = s.cost(scale);
    if (p.use_rc) bits += 5.0 * static_cast<double>(g.rows);
    if (p.use_cc) bits += 5.0 * static_cast<double>(g.cols);
    return bits;
  };
  double best_cost = eval(best);
  auto set_thresholds = [&](IntParams& p) {
    const int oa = p.nbr_mode == 0 && (p.off_a == 3 || p.off_a == 9) ? p.off_a : 0;
    auto thr = p.nbr_mode == 3 ? hist_thresholds(kern_hist, n_kern, p.nb)
                               : hist_thresholds(act_hist[oa == 3 ? 1 : (oa == 9 ? 2 : 0)], n_hist, p.nb);
    for (size_t i = 0; i < thr.size(); ++i) p.thr[i] = static_cast<uint16_t>(std::min<uint32_t>(thr[i], 65535));
    if (p.ns > 1) {
      const int sides = (p.use_rc ? 1 : 0) | (p.use_cc ? 2 : 0);
      auto st = hist_thresholds(scale_hist[sides], n_hist, p.ns);
      for (size_t i = 0; i < st.size(); ++i) p.sthr[i] = static_cast<uint8_t>(std::min<uint32_t>(st[i], 255));
    }
  };
  auto consider = [&](IntParams p) {
    // Decode speed: context tables of large alphabets must stay in the L2
    // cache (5 KiB each).
    if (p.nsym > 64 && int_nctx(p) > kMaxWideContexts) return;
    set_thresholds(p);
    const double cst = eval(p);
    if (cst < best_cost) {
      best_cost = cst;
      best = p;
    }
  };
  // Greedy search: the neighbour model first, then the scale classes.
  for (uint8_t nb : {3, 6}) {
    if (small) break;
    IntParams p = base;
    p.nbr_mode = 0;
    p.nb = nb;
    p.ns = 1;
    consider(p);
  }
  if (base.sub == kIntTernary && !small) {
    // Exact neighbour signs: nbr_mode 1 (off_b: a fourth neighbour), or 2
    // with a column period (convolution kernels flattened along a row repeat
    // their statistics with the kernel size: 9 for 3x3, 25 for 5x5).
    auto signs = [&](uint8_t mode, uint8_t off_b, uint8_t period) {
      IntParams p = base;
      p.nbr_mode = mode;
      p.nb = 1;
      p.ns = 1;
      p.off_a = 3;
      p.off_b = off_b;
      p.period = period;
      consider(p);
    };
    signs(1, 0, 0);
    signs(1, 9, 0);
    if (allow_phase) {
      signs(2, 0, 9);
      signs(2, 0, 25);
    }
  }
  // A periodic neighbour (convolution kernels flattened along a row).
  for (uint8_t oa : {3, 9}) {
    IntParams p = best;
    if (p.nbr_mode != 0 || p.nb == 1) break;
    p.off_a = oa;
    consider(p);
  }
  // 3x3 kernels flattened along a row: the left and upper neighbours inside
  // each kernel (their signs x activity classes).
  if (kernels) {
    for (uint8_t nb : {1, 2, 3, 4}) {
      if (small && nb > 1) break;
      IntParams p = base;
      p.nbr_mode = 3;
      p.period = 9;
      p.off_a = 3;
      p.off_b = 0;
      p.nb = nb;
      p.ns = 1;
      consider(p);
    }
  }
  const IntParams stage1 = best;
  if (from_feats(stage1) && stage1.ns == 1 && !stage1.use_rc && !stage1.use_cc) {
    make_keys(stage1);
    scaled = true;
  }
  for (uint8_t ns : {4, 8}) {
    if (small) break;
    for (int sides = 1; sides < 4; ++sides) {
      IntParams p = stage1;
      p.ns = ns;
      p.use_rc = sides & 1;
      p.use_cc = (sides >> 1) & 1;
      consider(p);
    }
  }
  // Kernel-row symbols (nbr_mode 4, format 2.10): three codes of a 3x3
  // kernel row per rANS step instead of one. Taken when their estimate is
  // within kKernRowSlack of the best per-code model: they decode 2-3x
  // faster (docs/format-revision-study.md), for at most that much size.
  if (kernel_rows && kernels && base.sub == kIntTernary && *max_abs <= 1 && g.chunk_cols % kKernRowCodes == 0) {
    auto eval_rows = [&](const IntParams& p) {
      IntLuts L;
      build_int_luts(p, &L);
      Stats s;
      s.init(int_nctx(p), kKernRowSyms, 0, 0);
      for (const auto& ch : sch) {
        const uint32_t h = static_cast<uint32_t>(ch.c.h), w = static_cast<uint32_t>(ch.c.w);
        for (uint32_t r = 0; r < h; r += static_cast<uint32_t>(row_step)) {
          const uint32_t sc = p.use_rc ? L.scale[(*rc)[ch.c.row0 + r]] : 0u;
          const int32_t* row = ch.res + uint64_t{r} * w;
          for (uint32_t c = 0; c + kKernRowCodes <= w; c += kKernRowCodes) {
            uint32_t above = 0;
            for (uint32_t j = 0; j < 3; ++j) {
              const uint32_t sym = kern_row_sym(row + c + 3 * j);
              s.add(0, kern_rows_ctx(sc, j, above), sym);
              above = sym;
            }
          }
        }
      }
      return s.cost(scale) + (p.use_rc ? 5.0 * static_cast<double>(g.rows) : 0.0);
    };
    IntParams kr = base;
    kr.nbr_mode = 4;
    kr.esc = 9;
    kr.nsym = kKernRowSyms;
    kr.nb = 1;
    kr.ns = 1;
    kr.use_rc = kr.use_cc = 0;
    kr.tools = 0;
    kr.off_a = 3;
    kr.off_b = 0;
    kr.period = kKernRowCodes;
    IntParams krow = kr;
    double krow_cost = eval_rows(kr);
    for (uint8_t ns : {4, 8}) {
      if (small) break;
      IntParams p = kr;
      p.ns = ns;
      p.use_rc = 1;
      auto st = hist_thresholds(scale_hist[1], n_hist, p.ns);
      for (size_t i = 0; i < st.size(); ++i) p.sthr[i] = static_cast<uint8_t>(std::min<uint32_t>(st[i], 255));
      const double cst = eval_rows(p);
      if (cst < krow_cost) {
        krow_cost = cst;
        krow = p;
      }
    }
    if (krow_cost <= best_cost * (1.0 + kKernRowSlack)) best = krow;
  }
  done();
}

// ------------------------------------------------------------------ bytes
void choose_bytes(const TensorGeometry& g, const uint8_t* data, uint32_t eb, TensorModel* m) {
  auto sample = sample_chunks(g, 1u << 19);
  uint64_t sampled = 0;
  for (auto ci : sample) {
    uint64_t a, b, h, w;
    g.chunk_rect(ci, &a, &b, &h, &w);
    sampled += h * w;
  }
  const double scale = static_cast<double>(g.rows * g.cols) / static_cast<double>(std::max<uint64_t>(1, sampled));
  double best = std::numeric_limits<double>::infinity();
  for (uint8_t mode : {0, 1}) {
    BytesParams p{static_cast<uint8_t>(eb), mode};
    Stats s;
    s.init(bytes_nctx(p), 256, 0, 0);
    for (auto ci : sample) {
      ChunkRef c = chunk_ref(g, data, ci);
      walk_bytes(p, static_cast<uint32_t>(c.h), static_cast<uint32_t>(c.w), c.bytes,
                 [&](uint32_t, uint32_t set, uint32_t ctx, uint32_t sym) { s.add(set, ctx, sym); });
    }
    const double cst = s.cost(scale);
    if (cst < best) {
      best = cst;
      m->bp = p;
    }
  }
  m->kind = ModelKind::kBytes;
}

}  // namespace wcodec
