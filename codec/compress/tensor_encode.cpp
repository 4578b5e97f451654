// codec/compress/tensor_encode.cpp — encoding one tensor: its geometry,
// the model search (choose_*), the tile tool search, chunk payloads and
// the zstd / raw fallback of each chunk. See tensor_encode.h and
// docs/wcodec-format.md.

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

namespace wcodec {

// Chunks of at most target bytes: bands of whole rows where a row fits,
// target / row_bytes rows each (the last band the rest), or with
// equal_bands as many bands of equal rows (the last at most n - 1 rows
// fewer): 1536 rows of 324 bytes in 256 KiB give 809 + 727 rows, or
// 768 + 768, whose chunks then decode together (Reader::pairable). The
// encoder takes equal bands for GGUF block-quantized tensors only: on
// silero_vad_16k.f32 they split the STFT basis (258 rows: 129 + 129)
// between the halves whose rows repeat each other, and its zstd chunks
// became model chunks twice as large (the file +12.7%).
static TensorGeometry make_geometry(uint64_t nbytes, uint64_t rows, uint32_t elem_bits, uint64_t target,
                                    bool equal_bands = false) {
  TensorGeometry g;
  g.elem_bits = elem_bits;
  if (nbytes == 0) return g;
  if (rows == 0 || nbytes % rows) rows = 1;
  g.rows = rows;
  g.cols = nbytes / rows * 8 / elem_bits;
  const uint64_t rb = g.row_bytes();
  if (rb <= target) {
    const uint64_t per = std::max<uint64_t>(1, target / rb), n = (rows + per - 1) / per;
    g.chunk_cols = g.cols;
    g.chunk_rows = std::min<uint64_t>(rows, equal_bands ? (rows + n - 1) / n : per);
  } else {
    g.chunk_rows = 1;
    uint64_t c = target * 8 / elem_bits;
    c -= c % 8;
    g.chunk_cols = std::max<uint64_t>(8, c);
    if (g.chunk_cols >= g.cols) g.chunk_cols = g.cols;
  }
  return g;
}

// Estimated bits of a residual block under a per-token cost table.
// cost holds the bits of each token; values with zig-zag code below esc
// are looked up directly.
static double block_cost(const int32_t* r, uint32_t n, const IntParams& p, const std::vector<double>& cost) {
  double b = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(tile::zz_encode(r[i]));
    if (u < p.esc) {
      b += cost[u];
    } else {
      IntToken t = make_token(p, r[i]);
      b += cost[t.tok] + (t.nb >= 2 ? t.nb - 1 : 0);
    }
  }
  return b;
}

// Chooses a tile map for a chunk (nullopt when no tile benefits enough to
// pay for the map). Candidate tools per tile: every predictor, with the same
// transform on all full 8x8 sub-blocks.
//
// Default profile: the first eighth of the tiles (raster order, one
// contiguous band) is probed first. The rest is probed only when tools won
// on at least a quarter of the band's tiles and band_pays(map, band tiles)
// confirms it under the context model: the order-0 token costs used per
// tile overrate tools on weights whose neighbours the contexts already
// exploit. The rest then tries only the predictor and transform pairs that
// won a tile of the band. A contiguous band keeps tool tiles next to each
// other, as a full map would (a lone tool tile among plain ones misleads its
// neighbours' contexts). A band whose first kEarlyTiles tiles gain from no tool at all
// stops there: on the real int8 and int4 checkpoints no tile of any chunk
// keeps a tool, and probing the whole band was a tenth of their encode
// time.
template <typename BandPays>
static bool choose_tiles(const TensorGeometry& g, const IntGrid& vals, const ChunkRef& c,
                         const IntParams& p, const std::vector<double>& cost, bool exhaustive,
                         std::vector<uint8_t>* map, BandPays&& band_pays) {
  const uint32_t h = static_cast<uint32_t>(c.h), w = static_cast<uint32_t>(c.w);
  const uint32_t tr = (h + kTile - 1) / kTile, tc = (w + kTile - 1) / kTile;
  map->assign(2u * tr * tc, 0);
  std::vector<int32_t> grid(uint64_t{h} * w), out(kTile * kTile), blk(kTile * kTile);
  for (uint32_t r = 0; r < h; ++r)
    std::memcpy(grid.data() + uint64_t{r} * w, vals.data() + (c.row0 + r) * g.cols + c.col0, w * sizeof(int32_t));
  double saved = 0;
  uint32_t used = 0;
  int32_t left[kTile], top[kTile];
  const uint32_t ntiles = tr * tc;
  const uint32_t band = exhaustive ? ntiles : (ntiles + 7) / 8;
  uint32_t band_won = 0;  // bit pred * 3 + xf: the pair won a tile of the band
  for (uint32_t pass = 0; pass < 2; ++pass) {
    uint32_t probed = 0;
    for (uint32_t k = pass == 0 ? 0 : band; k < (pass == 0 ? band : ntiles); ++k) {
      const uint32_t ti = k / tc, tj = k % tc;
      const uint32_t r0 = ti * kTile, c0 = tj * kTile;
      const uint32_t th = std::min(kTile, h - r0), tw = std::min(kTile, w - c0);
      const bool hl = c0 > 0, ht = r0 > 0;
      for (uint32_t i = 0; i < th; ++i) left[i] = hl ? grid[(r0 + i) * w + c0 - 1] : 0;
      for (uint32_t j = 0; j < tw; ++j) top[j] = ht ? grid[(r0 - 1) * w + c0 + j] : 0;
      const int32_t tl = hl && ht ? grid[(r0 - 1) * w + c0 - 1] : 0;
      for (uint32_t i = 0; i < th; ++i)
        for (uint32_t j = 0; j < tw; ++j) blk[i * tw + j] = grid[(r0 + i) * w + c0 + j];
      const double base = block_cost(blk.data(), th * tw, p, cost);
      double best = base - 16.0;  // a tile must pay for its 2 map bytes
      uint8_t bp = 0, bx = 0, bxf = 0;
      for (uint8_t pred = 0; pred <= tile::kPredDC; ++pred) {
        for (uint8_t xf = 0; xf <= tile::kXformADST; ++xf) {
          if (pred == 0 && xf == 0) continue;
          // Default profile: every predictor alone, every transform alone,
          // and DC/planar prediction with each transform; after the band,
          // only the pairs that won a tile of it.
          if (!exhaustive && pred != 0 && xf != 0 && pred != tile::kPredDC && pred != tile::kPredPlanar) continue;
          if (!exhaustive && pass == 1 && !(band_won >> (pred * 3 + xf) & 1)) continue;
          uint8_t xmap[4] = {0, 0, 0, 0};
          uint8_t packed = 0;
          for (int s = 0; s < 4; ++s) {
            const uint32_t sr = (s / 2) * 8, sc = (s % 2) * 8;
            if (xf && sr + 8 <= th && sc + 8 <= tw) {
              xmap[s] = xf;
              packed |= static_cast<uint8_t>(xf << (2 * s));
            }
          }
          if (xf && !packed) continue;
          unpack_xform_map(packed, static_cast<int>(th), static_cast<int>(tw), xmap);
          tile::tile_forward(static_cast<tile::Pred>(pred), xmap, static_cast<int>(th), static_cast<int>(tw),
                             blk.data(), static_cast<int>(tw), hl ? left : nullptr, ht ? top : nullptr, tl,
                             out.data());
          const double cst = block_cost(out.data(), th * tw, p, cost);
          if (cst < best) {
            best = cst;
            bp = pred;
            bx = packed;
            bxf = xf;
          }
        }
      }
      if (bp || bx) {
        (*map)[2 * k] = bp;
        (*map)[2 * k + 1] = bx;
        saved += base - best;
        ++used;
        if (pass == 0) band_won |= 1u << (bp * 3 + bxf);
      }
      ++probed;
      constexpr uint32_t kEarlyTiles = 32;
      if (pass == 0 && !exhaustive && probed == kEarlyTiles && used == 0 && band > 2 * kEarlyTiles) return false;
    }
    if (pass == 0 && band < ntiles) {
      if (used * 4 < probed) break;
      if (!band_pays(*map, band)) return false;
    }
  }
  if (used == 0) return false;
  return saved > 0;
}

// ------------------------------------------------------------------ encode
std::vector<uint8_t> zstd_compress(const uint8_t* p, size_t n, int level) {
  std::vector<uint8_t> out(ZSTD_compressBound(n));
  // One compression context per thread, reused: ZSTD_compress would
  // allocate and initialise one per chunk (same output either way).
  struct CCtx {
    ZSTD_CCtx* p = ZSTD_createCCtx();
    ~CCtx() { ZSTD_freeCCtx(p); }
  };
  thread_local CCtx cctx;
  const size_t r = cctx.p ? ZSTD_compressCCtx(cctx.p, out.data(), out.size(), p, n, level)
                          : ZSTD_compress(out.data(), out.size(), p, n, level);
  if (ZSTD_isError(r)) return {};
  out.resize(r);
  return out;
}

void append_u32(std::vector<uint8_t>& v, uint32_t x) {
  for (int i = 0; i < 4; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * i)));
}

// Chooses the smallest of model payload (if any), zstd and raw.
// Whether the level 1 probe's output (z bytes) shows matches: it is under
// 97% of the bytes' order-0 entropy (what coding them as literals alone
// gives). Where it is not, the higher levels find no more matches than
// level 1 and code the literals alike: on weights they came out within
// 0.1% of level 1 (often larger) at a tenth of its speed.
bool lz_matters(const uint8_t* p, size_t n, size_t z) {
  uint32_t h[4][256] = {};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    h[0][p[i]]++;
    h[1][p[i + 1]]++;
    h[2][p[i + 2]]++;
    h[3][p[i + 3]]++;
  }
  for (; i < n; ++i) h[0][p[i]]++;
  double slog = 0;
  for (int b = 0; b < 256; ++b) slog += clog2c(uint64_t{h[0][b]} + h[1][b] + h[2][b] + h[3][b]);
  const double literal_bytes = (clog2c(n) - slog) / 8.0;
  return static_cast<double>(z) < 0.97 * literal_bytes;
}

// Chunks below this size take the level 1 probe only: on the real
// checkpoints the configured level never changed the size of one (level 9
// costs 35-180 us on a 1-6 KB input, mostly its table setup).
inline constexpr size_t kZstdHigherMin = 4096;
// Chunks below kZstdSmallChunk take at most level kZstdSmallLevel: on the
// real checkpoints' 4-16 KB tensors it came within 4 bytes of level 9 in
// all (level 3: 1.6% larger on one), at half level 9's time (on a 6 KB
// input level 9 took 117 us, level 5 62 us, level 1 18 us).
inline constexpr size_t kZstdSmallChunk = 16384;
inline constexpr int kZstdSmallLevel = 5;
// The level a chunk of n bytes gets past the level 1 probe.
static int higher_zstd_level(size_t n, const EncodeOptions& opt) {
  return n < kZstdSmallChunk ? std::min(opt.zstd_level, kZstdSmallLevel) : opt.zstd_level;
}

// z1: the chunk's level 1 zstd output where the caller has it (empty: not
// made yet); taken.
EncodedChunk pick_chunk(const ChunkRef& c, std::vector<uint8_t>&& model_payload, const EncodeOptions& opt,
                        std::vector<uint8_t>* z1) {
  EncodedChunk e;
  e.decoded_size = c.nbytes;
  e.xxh3 = chunk_hash(c.bytes, c.nbytes);
  e.method = ChunkMethod::kRaw;
  size_t best = c.nbytes;
  if (!model_payload.empty() && model_payload.size() < best) {
    best = model_payload.size();
    e.method = ChunkMethod::kModel;
  }
  // A fast zstd probe on every chunk (repetitive tensors, e.g. fixed
  // bases or untrained embedding rows, favour LZ); the configured level
  // only where the probe comes within 1/64 of the best so far (1/32 for
  // chunks under 64 KiB, where the higher levels gain more and cost
  // little). On the real checkpoints level 1 comes within 0.3% of level 3
  // on weights at 1.4-2.7x its speed, and level 9 never beat the best on a
  // large chunk where level 1 missed it by more than 1/64; with 1/32 it ran
  // on three quarters of the int4 chunks (a tenth of their encode time).
  auto z = z1 && !z1->empty() ? std::move(*z1) : zstd_compress(c.bytes, c.nbytes, 1);
  const size_t near = c.nbytes < (16u << 10) ? best / 32 : best / 64;
  bool deferred = false;
  if (!z.empty() && opt.zstd_level > 1 && c.nbytes >= kZstdHigherMin && z.size() < best + near &&
      lz_matters(c.bytes, c.nbytes, z.size())) {
    // Level 1 wins already: a higher level changes the frame's size, not
    // the choice, and a zstd group's frame may replace it (finish_zstd).
    deferred = opt.zstd_defer && z.size() < best && c.nbytes < kZstdSmallChunk;
    if (!deferred) {
      const int level = higher_zstd_level(c.nbytes, opt);
      auto z2 = zstd_compress(c.bytes, c.nbytes, level);
      if (!z2.empty() && z2.size() < z.size()) z = std::move(z2);
    }
  }
  if (!z.empty() && z.size() < best) {
    e.method = ChunkMethod::kZstd;
    e.payload = std::move(z);
    e.fallback_size = e.payload.size();
    e.zstd_deferred = deferred;
    return e;
  }
  if (e.method == ChunkMethod::kModel) {
    e.payload = std::move(model_payload);
    e.fallback_size = z.empty() ? c.nbytes : std::min<uint64_t>(z.size(), c.nbytes);
  } else {
    e.payload.assign(c.bytes, c.bytes + c.nbytes);
    e.fallback_size = c.nbytes;
  }
  return e;
}

void finish_zstd(const uint8_t* data, const EncodeOptions& opt, EncodedTensor* et) {
  for (uint64_t i = 0; i < et->chunks.size(); ++i) {
    EncodedChunk& e = et->chunks[i];
    if (!e.zstd_deferred) continue;
    e.zstd_deferred = false;
    if (e.method != ChunkMethod::kZstd) continue;
    const ChunkRef c = chunk_ref(et->geom, data, i);
    const int level = higher_zstd_level(c.nbytes, opt);
    auto z = zstd_compress(c.bytes, c.nbytes, level);
    if (!z.empty() && z.size() < e.payload.size()) {
      e.payload = std::move(z);
      e.fallback_size = e.payload.size();
    }
  }
}

// Whether 4-bit codes taken relative to their group's zero point code
// smaller than the codes less 8: the entropy of each, counted on rows
// spread over the tensor). Asymmetric quantizers put a group's weights
// around its zero point, but on isnet's RTN int4 checkpoint the codes less
// 8 code 1.3% smaller: where the codes fill [0, 15] alike in every group,
// the distance to a varying zero point only spreads them.
static bool zero_points_pay(const TensorGeometry& g, const uint8_t* data, const AuxInput& aux) {
  uint64_t pairs[16 * 16] = {};  // make_aux: zero points fit 4 bits
  const uint64_t row_step = std::max<uint64_t>(1, g.rows * g.cols >> 18);
  for (uint64_t r = 0; r < g.rows; r += row_step) {
    const uint8_t* zrow = aux.bytes + r * aux.cols;
    // Group by group (a division per element was a twentieth of
    // stories260K int4's encode time).
    for (uint64_t c0 = 0, q = 0; c0 < g.cols; c0 += aux.group, ++q) {
      const uint32_t z = zrow[q] & 15u;
      const uint64_t c1 = std::min<uint64_t>(g.cols, c0 + aux.group);
      for (uint64_t c = c0; c < c1; ++c) pairs[code_at(kIntNibble, data, r * g.cols + c) * 16u + z]++;
    }
  }
  auto entropy = [](const std::vector<uint64_t>& h) {
    uint64_t n = 0;
    double slog = 0;
    for (auto x : h) {
      n += x;
      slog += clog2c(x);
    }
    return n ? clog2c(n) - slog : 0.0;
  };
  std::vector<uint64_t> with(32, 0), without(32, 0);
  for (uint32_t code = 0; code < 16; ++code)
    for (uint32_t z = 0; z < 16; ++z) {
      const uint64_t k = pairs[code * 16 + z];
      if (!k) continue;
      with[tile::zz_encode(static_cast<int32_t>(code) - static_cast<int32_t>(z))] += k;
      without[tile::zz_encode(static_cast<int32_t>(code) - 8)] += k;
    }
  return entropy(with) < entropy(without);
}

// Per-thread scratch vectors of encode_tensor (the value grid, the token
// cache), reused from one tensor to the next: allocated afresh, their
// pages were mapped and faulted in again for every tensor (a twentieth of
// the encode time of isnet-medium.rtn-ternary, whose grid holds 16 bytes
// per input byte). One larger than kScratchKeep bytes is released when the
// tensor is done, so that an encoder thread does not hold the grid of the
// largest tensor it met. encode_tensor does not call itself, so one use
// per thread at a time.
namespace {
constexpr size_t kScratchKeep = size_t{64} << 20;
template <typename V>
class ScratchUse {
 public:
  explicit ScratchUse(V& v) : v_(v) { v_.clear(); }
  ~ScratchUse() {
    if (v_.capacity() * sizeof(typename V::value_type) > kScratchKeep) V().swap(v_);
    else v_.clear();
  }
  ScratchUse(const ScratchUse&) = delete;
  ScratchUse& operator=(const ScratchUse&) = delete;

 private:
  V& v_;
};
}  // namespace

Result<EncodedTensor> encode_tensor(const TensorInfo& info, const uint8_t* data, const AuxInput& aux,
                                    const EncodeOptions& opt) {
  EncodedTensor et;
  const uint64_t nbytes = info.nbytes();
  const uint64_t rows = info.shape.size() >= 2 ? info.shape[0] : 1;
  FloatLayout fl{};
  const bool is_float = float_layout(info.dtype, &fl);
  // Decide the element view.
  enum { kRawOnly, kFloatK, kIntK, kBytesK } kind = kRawOnly;
  IntParams ip{};
  uint32_t elem_bits = 8;
  const bool small = nbytes < 2048;
  if (small) {
    kind = kRawOnly;
  } else if (is_float) {
    kind = kFloatK;
    elem_bits = fl.bytes * 8;
  } else if (info.dtype == DType::kI8) {
    kind = kIntK;
    ip.sub = kIntI8;
  } else if (info.dtype == DType::kU8 || info.dtype == DType::kI32 || info.dtype == DType::kU32) {
    // Probe the packing: ternary when no 2-bit field holds 3 (the reserved
    // code) in U8 data named as packed, nibbles when named packed/qweight,
    // otherwise plain bytes.
    const std::string& nm = info.name;
    const bool named_packed = nm.find("packed") != std::string::npos || nm.find("qweight") != std::string::npos;
    bool tern_ok = info.dtype == DType::kU8;
    if (tern_ok) {
      // A field holds 3 where both its bits are set: bit 2k of b & b >> 1.
      uint8_t both = 0;
      for (uint64_t i = 0; i < nbytes; ++i) both |= static_cast<uint8_t>(data[i] & (data[i] >> 1));
      tern_ok = (both & 0x55) == 0;
    }
    if (named_packed && tern_ok) {
      kind = kIntK;
      ip.sub = kIntTernary;
      elem_bits = 2;
    } else if (named_packed) {
      kind = kIntK;
      ip.sub = kIntNibble;
      elem_bits = 4;
    } else if (info.dtype == DType::kU8) {
      kind = kIntK;
      ip.sub = kIntU8;
    } else {
      kind = kBytesK;
      elem_bits = 32;
    }
  } else {
    const unsigned bits = dtype_bits(info.dtype);
    if (bits % 8 == 0 && bits / 8 <= 16) {
      kind = kBytesK;
      elem_bits = bits;
    }
  }
  et.geom = make_geometry(nbytes, rows, elem_bits, opt.chunk_bytes, opt.equal_bands);
  if (opt.band_rows && et.geom.rows) {
    et.geom.chunk_cols = et.geom.cols;
    et.geom.chunk_rows = std::min<uint64_t>(et.geom.rows, opt.band_rows);
  }
  const TensorGeometry& g = et.geom;
  const uint64_t nchunks = g.num_chunks();
  thread_local IntGrid vals;  // see ScratchUse
  const ScratchUse<IntGrid> vals_use(vals);
  uint32_t max_abs = 0;         // int: the largest magnitude of a value
  std::vector<uint8_t> lz_probe;  // int, one chunk: its level 1 zstd output
  if (kind == kFloatK) {
    choose_float(g, data, fl, opt.format_2_1, &et.model);
    et.choice.kind_name = dtype_name(info.dtype);
  } else if (kind == kIntK) {
    switch (ip.sub) {
      case kIntI8: ip.esc = 236; et.choice.kind_name = "int8"; break;
      case kIntU8: ip.esc = 236; ip.center = 128; et.choice.kind_name = "uint8"; break;
      case kIntNibble: ip.esc = 32; ip.center = 8; et.choice.kind_name = "int4"; break;
      default: ip.esc = 8; et.choice.kind_name = "ternary"; break;
    }
    if (ip.sub == kIntNibble && aux.index >= 0 && aux.bytes && aux.rows == g.rows && aux.group &&
        (g.cols + aux.group - 1) / aux.group == aux.cols && zero_points_pay(g, data, aux)) {
      ip.zgroup = aux.group;
      et.aux_tensor = aux.index;
      et.zgroup = aux.group;
    }
    if (ip.sub == kIntU8) {
      // Center on the median byte.
      std::vector<uint64_t> h(256, 0);
      for (uint64_t i = 0; i < nbytes; ++i) h[data[i]]++;
      uint64_t acc = 0;
      for (int b = 0; b < 256; ++b) {
        acc += h[b];
        if (acc * 2 >= nbytes) {
          ip.center = static_cast<uint8_t>(b);
          break;
        }
      }
    }
    ip.nsym = static_cast<uint16_t>(ip.esc + kEscClasses);
    int_values(ip, g, data, aux, &vals);
    // Tensors whose model cannot win go to zstd (or raw bytes) without a
    // model search, tile probe, tables or shared-model trial; the level 1
    // probe's output goes to pick_chunk. A tensor coded without a model
    // has no zero-point tensor either.
    auto without_model = [&]() {
      et.aux_tensor = -1;
      et.zgroup = 0;
      et.chunks.push_back(pick_chunk(chunk_ref(g, data, 0), {}, opt, &lz_probe));
      et.choice.model_desc = "-";  // as a tensor without a model
    };
    // A small one-chunk tensor without kernel candidates has one candidate
    // model (choose_int), whose payload comes to at least about the
    // entropy of its tokens given the left neighbour's sign (the lanes see
    // a little less: each starts its rows without one), plus each model
    // chunk's fixed bytes (flags, stream length, 32 lane states less the
    // 64 bytes a raw tail may carry), before any table. Where what the
    // tensor takes without a model (zstd level 1, or its raw bytes where
    // zstd cannot shrink them) is within kSmallFloorSlack of that floor, the
    // model is not built. The floor counts no tables (a shared model
    // amortizes them, so they bound nothing here), and a model that beats
    // the fallback by under 1% before its tables has rarely paid for
    // them: on stories260K's quantized files every tensor this takes (MLP
    // weights, and the int4 o projections that go to raw bytes: 2-11 KiB
    // of near-uniform codes) ended as a zstd or raw chunk after the whole
    // search before, which was a fifth of the int4 and int8 files' encode
    // instructions.
    if (nchunks == 1 && g.rows * g.cols < kSmallIntElems && !(opt.format_2_1 && g.cols % 9 == 0)) {
      lz_probe = zstd_compress(data, nbytes, 1);
      const size_t fallback = lz_probe.empty() ? nbytes : std::min<size_t>(lz_probe.size(), nbytes);
      if (static_cast<double>(fallback) <= (1 + kSmallFloorSlack) * (int_left_sign_bytes(ip, g, vals) +
                                                                     static_cast<double>(kModelChunkFixed))) {
        without_model();
        return et;
      }
    }
    // A one-chunk tensor that zstd level 1 already takes well below the
    // order-0 entropy of its codes (an embedding with repeated rows,
    // untrained weights) keeps zstd whatever the model. Over the real
    // checkpoints' one-chunk tensors, the smallest model payload (before
    // its tables) came to 0.91 of order-0 for 8-bit codes, 0.81 for 4-bit
    // and 0.62 for ternary (a 3x3 convolution with kernel contexts); the
    // thresholds keep a margin below those. The tensors under them are the
    // stories260K embeddings (zstd level 1 at 0.67, 0.55 and 0.52 of
    // order-0).
    if (nchunks == 1 && g.rows * g.cols >= kSmallIntElems) {
      const double below = ip.sub == kIntTernary ? 0.55 : (ip.sub == kIntNibble ? 0.6 : 0.75);
      lz_probe = zstd_compress(data, nbytes, 1);
      if (!lz_probe.empty() && static_cast<double>(lz_probe.size()) < below * int_order0_bytes(ip, vals, data)) {
        without_model();
        return et;
      }
    }
    choose_int(g, vals, ip, opt.format_2_1, &et.model, &et.model.rc, &et.model.cc, &max_abs, false,
               opt.kernel_rows);
  } else if (kind == kBytesK) {
    choose_bytes(g, data, elem_bits / 8, &et.model);
    et.choice.kind_name = "bytes";
  } else {
    et.choice.kind_name = "raw";
  }

  if (kind == kRawOnly) {
    // One chunk per target size over the bytes.
    et.geom = make_geometry(nbytes, 1, 8, opt.chunk_bytes);
    for (uint64_t i = 0; i < et.geom.num_chunks(); ++i) {
      ChunkRef c = chunk_ref(et.geom, data, i);
      et.chunks.push_back(pick_chunk(c, {}, opt));
    }
    et.choice.model_desc = "-";
    return et;
  }

  TensorModel& m = et.model;
  // Tile tools (int): decide tile maps per chunk using a token cost table
  // from the untransformed residuals.
  std::vector<std::vector<uint8_t>> maps(nchunks);
  std::vector<std::vector<uint8_t>> z1(nchunks);  // level 1 zstd of the searched chunks, for pick_chunk
  if (!lz_probe.empty()) z1[0] = std::move(lz_probe);
  std::vector<char> has_map(nchunks, 0);
  std::optional<TensorModel> tool_free_model;  // the model with tables from the tool-free statistics
  thread_local RawVector<uint16_t> tok_cache;  // see the tool-free statistics below; see ScratchUse
  const ScratchUse<RawVector<uint16_t>> tok_cache_use(tok_cache);
  std::vector<char> cache_escapes;  // per chunk: whether its cached tokens include escapes
  uint32_t cache_stride = 0;        // the cache's keys: ctx * cache_stride + token
  if (kind == kIntK && opt.tool_search) {
    // Default profile: search a sample of chunks; the rest only if some
    // sampled chunk keeps a map. Ternary codes are not searched: a predicted
    // or transformed tile of -1/0/+1 codes has residuals over a wider
    // alphabet than the codes themselves, and the tool probe was an eighth
    // of their encode time for nothing. Neither are small tensors (under
    // kSmallIntElems elements): a map there pays for 2 bytes per 16x16
    // tile out of a few KB; no tensor of the data set keeps one, nor do
    // smooth synthetic ones of 32x32 to 96x96 (make_smooth_int8_file's
    // pattern), and their probes were a seventh of stories260K int8's
    // encode time.
    std::vector<uint64_t> probe;
    if (opt.exhaustive_tools) probe = sample_chunks(g, UINT64_MAX);
    else if (m.ip.sub != kIntTernary && g.rows * g.cols >= kSmallIntElems)
      probe = sample_chunks(g, 1u << 16);
    // Order-0 token costs of the probe's tiles, from a sample of the values.
    std::vector<double> cost(m.ip.nsym);
    if (!probe.empty()) {
      std::vector<uint64_t> hist(m.ip.nsym, 1);
      const uint64_t hstep = std::max<uint64_t>(1, vals.size() >> 16);
      for (uint64_t i = 0; i < vals.size(); i += hstep) hist[make_token(m.ip, vals[i]).tok]++;
      double tot = 0;
      for (auto hc : hist) tot += static_cast<double>(hc);
      for (size_t s = 0; s < cost.size(); ++s) cost[s] = -std::log2(static_cast<double>(hist[s]) / tot);
    }
    for (uint64_t i = 0; i < nchunks; ++i) {
      ChunkRef c = chunk_ref(g, data, i);
      const uint32_t tr = static_cast<uint32_t>((c.h + kTile - 1) / kTile), tc = static_cast<uint32_t>((c.w + kTile - 1) / kTile);
      et.choice.tiles_total += tr * tc;
    }
    // Statistics and tables of every chunk without tools first: the exact
    // measure of a map (below), and the final statistics if no chunk keeps
    // one (real weights: none does).
    // Each element's ctx * stride + token is kept (2 bytes, half its
    // residual's size) for the chunk encoder when it fits 16 bits; stride:
    // the tokens the values can give (ternary: 3 of 26), so that the keys
    // and their counts stay compact.
    Stats sa;
    sa.init(int_nctx(m.ip), m.ip.nsym, 0, 0);
    std::vector<int32_t> rbuf;
    const uint32_t nsym = std::min<uint32_t>(
        m.ip.nsym, make_token(m.ip, -static_cast<int32_t>(std::min<uint32_t>(max_abs, 1u << 29))).tok + 2);
    const bool keep = m.ip.nbr_mode != 4 && uint64_t{int_nctx(m.ip)} * nsym <= 65536;
    if (keep) {
      tok_cache.resize(vals.size());
      cache_escapes.assign(nchunks, 1);
      cache_stride = nsym;
    }
    uint16_t* kc = tok_cache.data();
    // The cached keys are counted as each run of them is written (in the L1
    // cache still), into four interleaved copies: runs of one (context,
    // token) pair, common in real weights, would otherwise chain every count
    // on the previous store.
    const size_t nk = keep ? size_t{int_nctx(m.ip)} * nsym : 0;
    std::vector<uint64_t> kh(4 * nk, 0);
    for (uint64_t i = 0; i < nchunks; ++i) {
      ChunkRef c = chunk_ref(g, data, i);
      const int32_t* rp = residuals_of(g, vals, c, nullptr, &rbuf);
      if (keep) {
        // In encode_int_reverse's order: lane by lane, each lane's steps.
        const uint32_t h = static_cast<uint32_t>(c.h), w = static_cast<uint32_t>(c.w);
        uint64_t off[kLanes + 1];
        lane_offsets(h, w, off);
        bool escapes = false;
        visit_int_runs(m.ip, m.rc.data(), m.cc.data(), c.row0, c.col0, h, w, rp,
                       [&](uint32_t l, uint32_t t, uint32_t r, uint32_t c0, uint32_t c1, const uint32_t* ctx) {
                         uint16_t* keys = kc + off[l] + t;
                         const uint32_t n = c1 - c0;
                         escapes |= int_row_keys(ctx, rp + uint64_t{r} * w + c0, n, m.ip.esc, nsym, keys);
                         uint32_t j = 0;
                         for (; j + 4 <= n; j += 4) {
                           kh[keys[j]]++;
                           kh[nk + keys[j + 1]]++;
                           kh[2 * nk + keys[j + 2]]++;
                           kh[3 * nk + keys[j + 3]]++;
                         }
                         for (; j < n; ++j) kh[keys[j]]++;
                       });
        cache_escapes[i] = escapes;
        kc += off[kLanes];
      } else {
        visit_int_tokens(m.ip, m.rc.data(), m.cc.data(), c.row0, c.col0, static_cast<uint32_t>(c.h),
                         static_cast<uint32_t>(c.w), rp, [&](uint32_t ctx, uint32_t sym) { sa.add(0, ctx, sym); });
      }
    }
    if (keep)
      for (size_t k = 0; k < nk; ++k)
        sa.f0[k / nsym * m.ip.nsym + k % nsym] += kh[k] + kh[nk + k] + kh[2 * nk + k] + kh[3 * nk + k];
    TensorModel& ma = tool_free_model.emplace(m);
    build_tables(sa, &ma, opt.x8_tables);
    // Measure, don't assume: a chunk keeps its tile map only if it codes
    // smaller with it under these tables. A token the tool-free tables never
    // saw would get a frequency once tables are rebuilt: charge it as a rare
    // symbol, not as impossible.
    static const std::array<double, 4097> nlog = [] {
      std::array<double, 4097> t{};
      t[0] = 14.0;
      for (uint32_t f = 1; f <= 4096; ++f) t[f] = 12.0 - std::log2(static_cast<double>(f));
      return t;
    }();
    // Bits of the chunk's tokens and their uniform extra bits (nb - 1 for
    // escape class nb >= 2), the map not counted.
    const uint32_t esc2 = m.ip.esc + 2;
    auto cost_of = [&](const ChunkRef& c, const std::vector<uint8_t>* mp) {
      const int32_t* rp = residuals_of(g, vals, c, mp, &rbuf);
      double bits = 0.0;
      visit_int_tokens(m.ip, m.rc.data(), m.cc.data(), c.row0, c.col0, static_cast<uint32_t>(c.h),
                       static_cast<uint32_t>(c.w), rp, [&](uint32_t ctx, uint32_t tok) {
                         bits += nlog[ma.t0[ctx].freq[tok]] + (tok >= esc2 ? tok - esc2 + 1 : 0u);
                       });
      return bits;
    };
    // Whether chunk c codes smaller with its map mp (charged in full) under
    // the tool-free tables: the final check of a map.
    auto pays = [&](const ChunkRef& c, const std::vector<uint8_t>& mp) {
      return cost_of(c, &mp) + 8.0 * static_cast<double>(mp.size()) < cost_of(c, nullptr);
    };
    // The token bits of the chunk's first `tiles` tiles (raster order) at
    // the empirical entropy of their own contexts: tables fitted to these
    // residuals alone, as if the whole chunk looked like them. The band
    // check; tables fitted to the whole chunk (or the tool-free tables)
    // would be dominated by the untransformed rest and bias it against tools.
    auto band_bits = [&](const ChunkRef& c, const std::vector<uint8_t>* mp, uint32_t tiles) {
      const int32_t* rp = residuals_of(g, vals, c, mp, &rbuf);
      const uint32_t tc = static_cast<uint32_t>((c.w + kTile - 1) / kTile);
      Stats fs;
      fs.init(int_nctx(m.ip), m.ip.nsym, 0, 0);
      double bits = 0.0;
      visit_int_tokens_at(m.ip, m.rc.data(), m.cc.data(), c.row0, c.col0, static_cast<uint32_t>(c.h),
                          static_cast<uint32_t>(c.w), rp,
                          [&](uint32_t r, uint32_t col, uint32_t ctx, uint32_t tok) {
                            if ((r / kTile) * tc + col / kTile >= tiles) return;
                            fs.add(0, ctx, tok);
                            if (tok >= esc2) bits += tok - esc2 + 1;
                          });
      for (uint32_t k = 0; k < fs.contexts(0); ++k) bits += entropy_bits(fs.counts(0, k));
      return bits;
    };
    // Whether zstd's fast level already codes chunk c in under 4/5 of its
    // share of the tensor's bits under the tool-free tables: exact repeats,
    // which an LZ coder finds and tile tools (predicting from neighbours)
    // do not; the chunk is stored by zstd whatever its map. Such chunks
    // are not searched: on stories260K's int8 embedding (zstd at 0.75 of
    // the tool-free model; rows of tokens that barely moved in training)
    // the search was a tenth of the file's encode time, for a map that
    // came within 1% of the tool-free model. On smooth weights, where tools
    // pay, zstd finds no matches.
    double tensor_bits = 0.0;  // (only probed tensors need it)
    for (uint32_t k = 0; k < sa.contexts(0) && !probe.empty(); ++k) {
      const uint64_t* n = sa.at(0, k);
      for (uint32_t t = 0; t < m.ip.nsym; ++t)
        if (n[t])
          tensor_bits += static_cast<double>(n[t]) * (nlog[ma.t0[k].freq[t]] + (t >= esc2 ? t - esc2 + 1 : 0u));
    }
    // *z may hold the chunk's level 1 output already (a one-chunk tensor's
    // probe before choose_int).
    auto lz_wins = [&](const ChunkRef& c, std::vector<uint8_t>* z) {
      if (z->empty()) *z = zstd_compress(c.bytes, c.nbytes, 1);
      const double share = tensor_bits * static_cast<double>(c.h * c.w) / static_cast<double>(g.rows * g.cols);
      return !z->empty() && 10.0 * static_cast<double>(z->size()) < share;
    };
    // keep_z1: the zstd probe's output is kept for pick_chunk (the probed
    // sample only: a whole tensor's outputs would hold a second copy of it).
    auto search = [&](uint64_t i, bool keep_z1) {
      ChunkRef c = chunk_ref(g, data, i);
      std::vector<uint8_t> z;
      if (!opt.exhaustive_tools && lz_wins(c, keep_z1 ? &z1[i] : &z)) return;
      has_map[i] = choose_tiles(g, vals, c, m.ip, cost, opt.exhaustive_tools, &maps[i],
                                [&](const std::vector<uint8_t>& mp, uint32_t tiles) {
                                  return band_bits(c, &mp, tiles) + 16.0 * tiles < band_bits(c, nullptr, tiles);
                                });
      if (has_map[i] && !pays(c, maps[i])) has_map[i] = 0;
    };
    bool search_rest = false;
    for (auto i : probe) {
      search(i, true);
      search_rest |= has_map[i] != 0;
    }
    if (search_rest && probe.size() < nchunks) {
      std::vector<char> probed(nchunks, 0);
      for (auto i : probe) probed[i] = 1;
      for (uint64_t i = 0; i < nchunks; ++i)
        if (!probed[i]) search(i, false);
    }
    for (uint64_t i = 0; i < nchunks; ++i) {
      if (!has_map[i]) continue;
      m.ip.tools = 1;
      for (size_t k = 0; k < maps[i].size(); k += 2) {
        if (!maps[i][k] && !maps[i][k + 1]) continue;
        et.choice.tiles_with_tools++;
        et.choice.tools_hist[maps[i][k]]++;
        for (int sb = 0; sb < 4; ++sb) {
          const uint8_t x = (maps[i][k + 1] >> (2 * sb)) & 3;
          if (x) et.choice.xform_hist[x]++;
        }
      }
    }
  }

  // Statistics over every chunk in its final form, then tables: without
  // a kept map, those of the tool search.
  bool kept_map = false;
  for (auto hm : has_map) kept_map |= hm != 0;
  if (tool_free_model && !kept_map) {
    m = std::move(*tool_free_model);
  } else {
    Stats st;
    init_stats(m, &st);
    add_tensor_stats(g, data, vals, m, maps, has_map, &st);
    build_tables(st, &m, opt.x8_tables);
    if (opt.keep_stats && !kept_map) et.stats = std::make_shared<const Stats>(std::move(st));
  }
  et.choice.model_desc = m.describe();
  encode_chunks(g, data, vals, m, maps, has_map, opt, &et, tok_cache.empty() ? nullptr : tok_cache.data(),
                cache_escapes.data(), cache_stride, &z1);
  return et;
}

}  // namespace wcodec
