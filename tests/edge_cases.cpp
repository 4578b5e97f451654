// tests/edge_cases.cpp — see edge_cases.h.
// Randomness comes from std::mt19937_64 with fixed seeds and a hand-written
// Box–Muller transform, so the bytes are the same with every standard library.
// Thread-safety: no shared state.
#include "edge_cases.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <numbers>
#include <optional>
#include <random>
#include <stdexcept>

#include "wcodec/safetensors.h"

namespace wctest {

using wcodec::DType;
using wcodec::TensorData;

namespace {

class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  uint64_t u64() { return g_(); }
  uint8_t byte() { return static_cast<uint8_t>(g_() >> 56); }
  double uniform() { return static_cast<double>(g_() >> 11) * 0x1.0p-53; }  // [0, 1)
  uint64_t below(uint64_t n) { return n ? g_() % n : 0; }
  double gauss() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    double u1 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    const double u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * std::numbers::pi * u2);
    have_spare_ = true;
    return r * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  std::mt19937_64 g_;
  bool have_spare_ = false;
  double spare_ = 0;
};

uint64_t numel_of(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

uint64_t bytes_of(DType t, const std::vector<uint64_t>& shape) {
  return (numel_of(shape) * wcodec::dtype_bits(t) + 7) / 8;
}

template <typename T>
void put(std::vector<uint8_t>* out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out->insert(out->end(), b, b + sizeof(T));  // little-endian host assumed (x86-64, aarch64)
}

// A sub-byte or byte-sized float format: sign, `ebits` exponent bits with
// `bias`, `mbits` mantissa bits. `top_is_special` marks the all-ones
// exponent as inf/NaN (E5M2); `fn_nan` marks only all-ones exp+mantissa as
// NaN (E4M3 "fn"). Encoding picks the nearest finite code, saturating.
struct MiniFloat {
  int ebits, mbits, bias;
  bool top_is_special, fn_nan;

  std::optional<double> decode_magnitude(unsigned code) const {
    const unsigned e = code >> mbits, m = code & ((1u << mbits) - 1);
    const unsigned emax = (1u << ebits) - 1;
    if (top_is_special && e == emax) return std::nullopt;
    if (fn_nan && e == emax && m == (1u << mbits) - 1) return std::nullopt;
    if (e == 0) return std::ldexp(static_cast<double>(m) / (1 << mbits), 1 - bias);
    return std::ldexp(1.0 + static_cast<double>(m) / (1 << mbits), static_cast<int>(e) - bias);
  }

  unsigned encode(double x) const {
    const unsigned sign_bit = 1u << (ebits + mbits);
    const unsigned sign = std::signbit(x) ? sign_bit : 0;
    const double a = std::fabs(x);
    unsigned best = 0;
    double best_err = INFINITY;
    for (unsigned c = 0; c < sign_bit; ++c) {
      const auto v = decode_magnitude(c);
      if (!v) continue;
      const double err = std::fabs(*v - a);
      if (err < best_err) {
        best_err = err;
        best = c;
      }
    }
    return sign | best;
  }
};

constexpr MiniFloat kE4M3{4, 3, 7, false, true};
constexpr MiniFloat kE5M2{5, 2, 15, true, false};
constexpr MiniFloat kE2M3{2, 3, 1, false, false};
constexpr MiniFloat kE3M2{3, 2, 3, false, false};
constexpr MiniFloat kE2M1{2, 1, 1, false, false};

// Packs `bits`-bit codes LSB first into ceil(n*bits/8) bytes.
std::vector<uint8_t> pack_bits(const std::vector<unsigned>& codes, unsigned bits) {
  std::vector<uint8_t> out((codes.size() * bits + 7) / 8, 0);
  uint64_t pos = 0;
  for (unsigned c : codes) {
    for (unsigned b = 0; b < bits; ++b, ++pos) {
      if ((c >> b) & 1) out[pos / 8] |= static_cast<uint8_t>(1u << (pos % 8));
    }
  }
  return out;
}

std::vector<uint8_t> random_bytes(Rng& r, size_t n) {
  std::vector<uint8_t> v(n);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t x = r.u64();
    std::memcpy(v.data() + i, &x, 8);
  }
  for (; i < n; ++i) v[i] = r.byte();
  return v;
}

// Random bytes of the right size; BOOL gets only 0/1 so it stays a valid bool.
TensorData random_tensor(Rng& r, std::string name, DType t, std::vector<uint64_t> shape) {
  TensorData td{std::move(name), t, std::move(shape), {}};
  td.bytes = random_bytes(r, bytes_of(t, td.shape));
  if (t == DType::kBOOL) {
    for (auto& b : td.bytes) b &= 1;
  }
  return td;
}

// Values as a trained layer would hold them: gaussian weights of std `scale`,
// converted or quantized to `t` the way real checkpoints are.
TensorData realistic_tensor(Rng& r, std::string name, DType t, std::vector<uint64_t> shape,
                            double scale = 0.02) {
  const uint64_t n = numel_of(shape);
  std::vector<uint8_t> b;
  b.reserve(bytes_of(t, shape));
  std::vector<unsigned> codes;
  switch (t) {
    case DType::kBOOL:
      for (uint64_t i = 0; i < n; ++i) b.push_back(r.gauss() > 0.5 ? 1 : 0);
      break;
    case DType::kU8: {  // int4 nibbles, two per byte, low nibble first
      for (uint64_t i = 0; i < n; ++i) {
        const int lo = std::clamp(static_cast<int>(std::lround(8 + 2.5 * r.gauss())), 0, 15);
        const int hi = std::clamp(static_cast<int>(std::lround(8 + 2.5 * r.gauss())), 0, 15);
        b.push_back(static_cast<uint8_t>(lo | (hi << 4)));
      }
      break;
    }
    case DType::kI8:
      for (uint64_t i = 0; i < n; ++i) {
        const long q = std::clamp(std::lround(r.gauss() * 127.0 / 3.5), -127L, 127L);
        b.push_back(static_cast<uint8_t>(static_cast<int8_t>(q)));
      }
      break;
    case DType::kF8_E5M2:
    case DType::kF8_E4M3: {
      const MiniFloat& f = t == DType::kF8_E5M2 ? kE5M2 : kE4M3;
      for (uint64_t i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(f.encode(r.gauss() * scale)));
      break;
    }
    case DType::kF8_E8M0:  // power-of-two block scales around 2^-8
      for (uint64_t i = 0; i < n; ++i) {
        b.push_back(static_cast<uint8_t>(std::clamp(127 - 8 + static_cast<int>(std::lround(r.gauss())), 0, 254)));
      }
      break;
    case DType::kF4:
      for (uint64_t i = 0; i < n; ++i) codes.push_back(kE2M1.encode(r.gauss() * 2.0));
      b = pack_bits(codes, 4);
      break;
    case DType::kF6_E2M3:
    case DType::kF6_E3M2: {
      const MiniFloat& f = t == DType::kF6_E2M3 ? kE2M3 : kE3M2;
      for (uint64_t i = 0; i < n; ++i) codes.push_back(f.encode(r.gauss() * 2.0));
      b = pack_bits(codes, 6);
      break;
    }
    case DType::kI16:
      for (uint64_t i = 0; i < n; ++i) {
        put(&b, static_cast<int16_t>(std::clamp(std::lround(r.gauss() * 3000.0), -32767L, 32767L)));
      }
      break;
    case DType::kU16:  // token ids
      for (uint64_t i = 0; i < n; ++i) put(&b, static_cast<uint16_t>(r.below(32000)));
      break;
    case DType::kF16:
      for (uint64_t i = 0; i < n; ++i) put(&b, float_to_f16(static_cast<float>(r.gauss() * scale)));
      break;
    case DType::kBF16:
      for (uint64_t i = 0; i < n; ++i) put(&b, float_to_bf16(static_cast<float>(r.gauss() * scale)));
      break;
    case DType::kI32:  // position ids
      for (uint64_t i = 0; i < n; ++i) put(&b, static_cast<int32_t>(i % 2048));
      break;
    case DType::kU32:  // small counts
      for (uint64_t i = 0; i < n; ++i) put(&b, static_cast<uint32_t>(std::fabs(r.gauss()) * 100));
      break;
    case DType::kF32:
      for (uint64_t i = 0; i < n; ++i) put(&b, static_cast<float>(r.gauss() * scale));
      break;
    case DType::kF64:
      for (uint64_t i = 0; i < n; ++i) put(&b, r.gauss() * scale);
      break;
    case DType::kI64:  // token ids, as torch stores index buffers
      for (uint64_t i = 0; i < n; ++i) put(&b, static_cast<int64_t>(r.below(50257)));
      break;
    case DType::kU64: {  // monotone offsets
      uint64_t acc = 0;
      for (uint64_t i = 0; i < n; ++i) put(&b, acc += r.below(4096));
      break;
    }
    case DType::kC64:  // complex64: (re, im) float pairs
      for (uint64_t i = 0; i < n; ++i) {
        put(&b, static_cast<float>(r.gauss() * scale));
        put(&b, static_cast<float>(r.gauss() * scale));
      }
      break;
  }
  return TensorData{std::move(name), t, std::move(shape), std::move(b)};
}

// Packed ternary weights: 2-bit codes (00=0, 01=+1, 10=-1), 4 per byte, LSB first.
TensorData ternary_tensor(Rng& r, std::string name, uint64_t rows, uint64_t cols) {
  const uint64_t packed_cols = (cols + 3) / 4;
  std::vector<uint8_t> b(rows * packed_cols, 0);
  for (uint64_t i = 0; i < rows; ++i) {
    for (uint64_t j = 0; j < cols; ++j) {
      const double w = r.gauss();
      const unsigned code = std::fabs(w) < 0.6 ? 0 : (w > 0 ? 1 : 2);
      b[i * packed_cols + j / 4] |= static_cast<uint8_t>(code << (2 * (j % 4)));
    }
  }
  return TensorData{std::move(name), DType::kU8, {rows, packed_cols}, std::move(b)};
}

std::vector<uint8_t> build(const std::vector<TensorData>& ts,
                           const std::optional<std::map<std::string, std::string>>& meta) {
  auto r = wcodec::build_safetensors(ts, meta);
  if (!r.ok()) throw std::logic_error("edge case generator: " + r.status().ToString());
  return std::move(r).value();
}

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v = {
      DType::kBOOL,     DType::kU8,      DType::kI8,      DType::kF8_E5M2, DType::kF8_E4M3,
      DType::kF8_E8M0,  DType::kF4,      DType::kF6_E2M3, DType::kF6_E3M2, DType::kI16,
      DType::kU16,      DType::kF16,     DType::kBF16,    DType::kI32,     DType::kU32,
      DType::kF32,      DType::kF64,     DType::kI64,     DType::kU64,     DType::kC64};
  return v;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

uint16_t float_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00;
  if (ax >= 0x477ff000u) return sign | 0x7c00;  // ≥ 65520 rounds to inf
  if (ax < 0x38800000u) {                        // below 2^-14: subnormal (or 0)
    const float scaled = std::fabs(f) * 16777216.0f;  // exact: power-of-two scaling
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  const uint32_t e = (ax >> 23) - 127 + 15;
  const uint32_t mant = ax & 0x7fffffu;
  uint32_t h = (e << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

std::vector<uint8_t> make_named_model_like_file() {
  Rng r(0x6d6f64656cULL);
  constexpr uint64_t kRows = 64, kCols = 64, kGroup = 32;
  std::vector<TensorData> ts;
  ts.push_back(realistic_tensor(r, "embed.weight", DType::kF16, {128, kCols}));
  for (int l = 0; l < 3; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    ts.push_back(realistic_tensor(r, p + "norm.weight", DType::kF32, {kCols}, 1.0));
    ts.push_back(realistic_tensor(r, p + "w_packed", DType::kU8, {kRows, kCols / 2}));
    std::vector<uint8_t> scale;
    for (uint64_t i = 0; i < kRows * (kCols / kGroup); ++i) {
      put(&scale, float_to_f16(static_cast<float>(0.004 * (1.0 + 0.2 * r.gauss()))));
    }
    ts.push_back(TensorData{p + "w_scale", DType::kF16, {kRows, kCols / kGroup}, std::move(scale)});
    std::vector<uint8_t> zero(kRows * (kCols / kGroup));
    for (auto& z : zero) z = static_cast<uint8_t>(std::clamp(8 + static_cast<int>(std::lround(r.gauss())), 0, 15));
    ts.push_back(TensorData{p + "w_zero", DType::kU8, {kRows, kCols / kGroup}, std::move(zero)});
    ts.push_back(realistic_tensor(r, p + "bias", DType::kF16, {kRows}, 0.01));
  }
  std::map<std::string, std::string> meta = {
      {"format", "pt"},
      {"source", "synthetic test checkpoint"},
      {"quant", "int4 group32 asym, low nibble first"}};
  return build(ts, meta);
}

std::vector<uint8_t> make_model_kinds_file() {
  Rng r(0x6b696e6473ULL);
  std::vector<TensorData> ts;
  ts.push_back(realistic_tensor(r, "int8.weight", DType::kI8, {640, 1024}));
  ts.push_back(realistic_tensor(r, "int4.w_packed", DType::kU8, {640, 1024}));
  ts.push_back(realistic_tensor(r, "f8e5m2.weight", DType::kF8_E5M2, {640, 1024}));
  return build(ts, {});
}

std::vector<EdgeCase> make_edge_cases() {
  std::vector<EdgeCase> out;
  Rng r(20240601);
  const auto add = [&](std::string name, const std::vector<TensorData>& ts,
                       const std::optional<std::map<std::string, std::string>>& meta =
                           std::nullopt) { out.push_back({std::move(name), build(ts, meta)}); };

  for (DType t : all_dtypes()) {
    const std::string dn = lower(wcodec::dtype_name(t));
    add("dtype_" + dn + "_random", {random_tensor(r, "w", t, {37, 53})});
    add("dtype_" + dn + "_realistic", {realistic_tensor(r, "model.layer.weight", t, {64, 96})});
  }

  {
    std::vector<TensorData> ts;
    for (DType t : all_dtypes()) {
      ts.push_back(realistic_tensor(r, std::string("scalar_") + wcodec::dtype_name(t), t, {}, 1.0));
    }
    add("scalars_every_dtype", ts);
    add("scalar_only", {realistic_tensor(r, "step", DType::kI64, {})});
  }

  add("zero_size_mixed", {TensorData{"empty0", DType::kF32, {0}, {}},
                          realistic_tensor(r, "a", DType::kF32, {4, 4}),
                          TensorData{"empty_3x0", DType::kBF16, {3, 0}, {}},
                          TensorData{"empty_0x5x7", DType::kI8, {0, 5, 7}, {}},
                          TensorData{"empty_f4", DType::kF4, {0}, {}},
                          realistic_tensor(r, "b", DType::kF16, {3}),
                          TensorData{"empty_last", DType::kC64, {2, 0}, {}}});
  add("zero_size_only", {TensorData{"e1", DType::kF32, {0}, {}},
                         TensorData{"e2", DType::kU8, {3, 0}, {}},
                         TensorData{"e3", DType::kF64, {0, 0}, {}}});

  add("row_vector_1xN", {realistic_tensor(r, "row", DType::kF32, {1, 4099})});
  add("col_vector_Nx1", {realistic_tensor(r, "col", DType::kBF16, {4099, 1})});

  add("odd_sizes", {realistic_tensor(r, "m7x13", DType::kF16, {7, 13}),
                    realistic_tensor(r, "m1x1", DType::kF32, {1, 1}),
                    realistic_tensor(r, "m257x3", DType::kBF16, {257, 3}),
                    realistic_tensor(r, "m3x5x7", DType::kI8, {3, 5, 7}),
                    realistic_tensor(r, "f4_7x13", DType::kF4, {7, 13}),
                    realistic_tensor(r, "f6_1x3", DType::kF6_E2M3, {1, 3}),
                    realistic_tensor(r, "f6_5", DType::kF6_E3M2, {5}),
                    realistic_tensor(r, "rank5", DType::kF32, {2, 1, 3, 1, 2})});

  {
    std::map<std::string, std::string> meta;
    for (int i = 0; i < 2000; ++i) {
      std::string v;
      for (int k = 0; k < 90; ++k) v += static_cast<char>('a' + r.below(26));
      meta["key_" + std::to_string(i)] = v;
    }
    meta["json_like"] = R"({"nested": "json \"quoted\"", "tab":"\t"})";
    meta["unicode"] = "Grüße, 世界 🙂";
    add("large_metadata", {realistic_tensor(r, "w", DType::kBF16, {16, 16})}, meta);
  }
  add("empty_metadata", {realistic_tensor(r, "w", DType::kF32, {2, 3})},
      std::map<std::string, std::string>{});
  add("no_tensors", {});
  add("no_tensors_with_metadata", {}, std::map<std::string, std::string>{{"format", "pt"}});

  add("all_zero", {TensorData{"zeros", DType::kF32, {256, 256},
                              std::vector<uint8_t>(256 * 256 * 4, 0)}});
  {
    std::vector<uint8_t> c;
    for (int i = 0; i < 128 * 300; ++i) put(&c, float_to_bf16(1.0f));
    add("constant", {TensorData{"ones", DType::kBF16, {128, 300}, std::move(c)}});
  }
  add("random_u8_1mib", {TensorData{"noise", DType::kU8, {1u << 20}, random_bytes(r, 1u << 20)}});

  add("unicode_names", {realistic_tensor(r, "модель.вес", DType::kF16, {4, 4}),
                        realistic_tensor(r, "层.权重", DType::kBF16, {3}),
                        realistic_tensor(r, "emoji_🙂_weight", DType::kF32, {2}),
                        realistic_tensor(r, "quote\"back\\slash\ttab\nnl/sl", DType::kI8, {5}),
                        realistic_tensor(r, "", DType::kU8, {1})});

  {
    std::vector<TensorData> ts;
    for (int i = 0; i < 1000; ++i) {
      const DType t = all_dtypes()[static_cast<size_t>(i) % all_dtypes().size()];
      const std::vector<uint64_t> shape = {1 + r.below(4)};
      ts.push_back(realistic_tensor(r, "t." + std::to_string(i), t, shape, 1.0));
    }
    add("many_tiny_tensors", ts);
  }

  add("packed_int4_nibbles", {realistic_tensor(r, "w_packed", DType::kU8, {96, 64}),
                              realistic_tensor(r, "w_scale", DType::kF16, {96, 4}, 0.004)});
  add("packed_ternary", {ternary_tensor(r, "w_packed", 96, 130),
                         realistic_tensor(r, "w_scale", DType::kF16, {96}, 0.01)});
  add("int8_quant", {realistic_tensor(r, "w", DType::kI8, {128, 96}),
                     realistic_tensor(r, "w_scale", DType::kF16, {128}, 0.001)});
  out.push_back({"model_like_int4", make_named_model_like_file()});
  return out;
}

std::vector<uint8_t> make_smooth_int8_file() {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> noise(-1, 1);
  const uint64_t rows = 256, cols = 256;
  wcodec::TensorData t{"smooth.weight", wcodec::DType::kI8, {rows, cols}, {}};
  t.bytes.resize(rows * cols);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c) {
      const double v = 40 * std::sin(static_cast<double>(r) / 9.0) + 30 * std::cos(static_cast<double>(c) / 7.0);
      t.bytes[r * cols + c] = static_cast<uint8_t>(static_cast<int8_t>(std::lround(v) + noise(rng)));
    }
  auto f = wcodec::build_safetensors({t}, std::nullopt);
  return f.ok() ? std::move(f).value() : std::vector<uint8_t>{};
}

}  // namespace wctest
