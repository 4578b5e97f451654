// tests/test_trellis.cpp — Trellis stores (wcodec/trellis.h, docs/trellis.md):
// the index layout against a reference decoder written from the document,
// the quantizer on real weights (../shared/data) at 2..8 bits with and
// without the Hadamard rotation, v2 and v3 stores written by `wcodec trellis
// quantize`, `validate`, `migrate` and the bytes it writes, the v3 variants
// of the reference code, and a catalogue of seeded defects, each of which
// validate must report naming the file, the tensor and the field.
// Thread-safety: single-threaded tests.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "testutil.h"
#include "wcodec/safetensors.h"
#include "wcodec/trellis.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string q(const std::string& s) { return "'" + s + "'"; }
const std::string& tool() {
  static const std::string t = q(WCODEC_TOOL);
  return t;
}
fs::path stories() { return wctest::data_dir() / "stories260K.f32.safetensors"; }
fs::path isnet() { return wctest::data_dir() / "isnet-medium.f16.safetensors"; }

int quantize(const fs::path& model, const fs::path& out, unsigned bits, bool hadamard, const char* layout,
             std::string* log = nullptr, const std::string& extra = "") {
  return wctest::run_command(tool() + " trellis quantize " + q(model) + " " + q(out) + " --bits " +
                                 std::to_string(bits) + (hadamard ? " --hadamard" : "") + " --layout " + layout + extra,
                             log);
}
int validate(const fs::path& dir, std::string* log = nullptr) {
  return wctest::run_command(tool() + " trellis validate " + q(dir), log);
}
int migrate(const fs::path& in, const fs::path& out, const std::string& shard = "", std::string* log = nullptr) {
  return wctest::run_command(
      tool() + " trellis migrate " + q(in) + " " + q(out) + (shard.empty() ? "" : " --shard-size " + shard), log);
}
wcodec::TrellisStore read_store(const fs::path& dir) { return wcodec::trellis_read(*wcodec::trellis_posix_dir(dir)); }

std::string problems(const wcodec::TrellisStore& st) {
  std::string s;
  for (const auto& p : st.problems) s += p.to_string() + "\n";
  return s;
}

// A problem naming `file` (suffix), `tensor` and `field` (empty: any).
bool has_problem(const wcodec::TrellisStore& st, const std::string& file, const std::string& tensor,
                 const std::string& field) {
  for (const auto& p : st.problems) {
    const bool f = p.file.size() >= file.size() && p.file.compare(p.file.size() - file.size(), file.size(), file) == 0;
    if (f && (tensor.empty() || p.tensor == tensor) && (field.empty() || p.field == field)) return true;
  }
  return false;
}

// The tensors of a safetensors file with their bytes.
std::vector<wcodec::TensorData> load_tensors(const fs::path& p, std::optional<std::map<std::string, std::string>>* md) {
  const auto bytes = wctest::read_file(p);
  auto h = wcodec::parse_safetensors_header(bytes.data(), bytes.size(), bytes.size(), p.string());
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  std::vector<wcodec::TensorData> out;
  if (!h.ok()) return out;
  if (md) *md = h->metadata;
  for (const auto& t : h->tensors) {
    const uint8_t* b = bytes.data() + h->data_start + t.begin;
    out.push_back({t.name, t.dtype, t.shape, std::vector<uint8_t>(b, b + t.nbytes())});
  }
  return out;
}
void rewrite_shard(const fs::path& p, const std::function<void(std::vector<wcodec::TensorData>&)>& edit) {
  std::optional<std::map<std::string, std::string>> md;
  auto t = load_tensors(p, &md);
  edit(t);
  auto b = wcodec::build_safetensors(t, md);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  wctest::write_file(p, *b);
}
json load_json(const fs::path& p) {
  const auto b = wctest::read_file(p);
  return json::parse(b.begin(), b.end());
}
void save_json(const fs::path& p, const json& j) {
  const std::string s = j.dump(2);
  wctest::write_file(p, std::vector<uint8_t>(s.begin(), s.end()));
}

// ---- reference decoder, written from docs/trellis.md §2 (double precision)
std::vector<double> reference_dequantize(const std::vector<uint8_t>& idx, const std::vector<uint8_t>& scales,
                                         const std::vector<uint8_t>& su, const std::vector<uint8_t>& sv, uint64_t out,
                                         uint64_t in, unsigned bits, bool hadamard) {
  auto f32 = [](const std::vector<uint8_t>& v, uint64_t k) {
    float f;
    std::memcpy(&f, v.data() + 4 * k, 4);
    return static_cast<double>(f);
  };
  const uint64_t tin = (in + 15) / 16;
  std::vector<double> w(out * in);
  for (uint64_t o = 0; o < out; ++o)
    for (uint64_t i = 0; i < in; ++i) {
      const uint64_t p = ((o / 16) * tin + i / 16) * 256 + (o % 16) * 16 + i % 16;
      unsigned k = 0;
      for (unsigned j = 0; j < bits; ++j) {
        const uint64_t bit = p * bits + j;
        k |= ((idx[1 + bit / 8] >> (bit % 8)) & 1u) << j;
      }
      const double grid = (k - ((1 << bits) - 1) / 2.0) * 1.24371088;
      w[o * in + i] = grid * f32(scales, (i / 128) * out + o) * f32(su, i) * f32(sv, o);
    }
  if (!hadamard) return w;
  std::vector<uint64_t> blocks(in / 128, 128);
  for (uint64_t b = 64; b >= 1; b /= 2)
    if ((in % 128) & b) blocks.push_back(b);
  std::vector<double> r(out * in);
  for (uint64_t o = 0; o < out; ++o) {
    uint64_t at = 0;
    for (uint64_t n : blocks) {
      for (uint64_t a = 0; a < n; ++a) {
        double s = 0;
        for (uint64_t b = 0; b < n; ++b)
          s += (__builtin_popcountll(a & b) & 1 ? -1.0 : 1.0) * w[o * in + at + b];
        r[o * in + at + a] = s / std::sqrt(static_cast<double>(n));
      }
      at += n;
    }
  }
  return r;
}

// The original float values of tensor `name` of a data file.
std::vector<double> original_values(const fs::path& file, const std::string& name) {
  auto t = load_tensors(file, nullptr);
  for (const auto& x : t) {
    if (x.name != name) continue;
    std::vector<double> v;
    if (x.dtype == wcodec::DType::kF32) {
      for (size_t k = 0; k < x.bytes.size(); k += 4) {
        float f;
        std::memcpy(&f, x.bytes.data() + k, 4);
        v.push_back(f);
      }
    } else {  // F16
      for (size_t k = 0; k < x.bytes.size(); k += 2) {
        const unsigned h = x.bytes[k] | (x.bytes[k + 1] << 8);
        const unsigned e = (h >> 10) & 31, m = h & 1023;
        double d = e == 0 ? std::ldexp(m, -24) : std::ldexp(m | 1024, static_cast<int>(e) - 25);
        v.push_back(h >> 15 ? -d : d);
      }
    }
    return v;
  }
  ADD_FAILURE() << name << " not in " << file;
  return {};
}

std::vector<uint8_t> component_bytes(const fs::path& dir, const wcodec::TrellisStore& st, size_t k) {
  const auto& t = st.tensors[k];
  std::vector<uint8_t> b(t.info.nbytes());
  EXPECT_TRUE(wcodec::trellis_posix_dir(dir.string())->read(t.file, t.offset, b.size(), b.data()).ok());
  return b;
}

// ---------------------------------------------------------------- layout

TEST(TrellisLayout, SizesGridAndBlocks) {
  EXPECT_EQ(wcodec::trellis_indices_bytes(16, 16, 3), 1u + 96u);
  EXPECT_EQ(wcodec::trellis_indices_bytes(172, 64, 2), 1u + 11u * 4u * 64u);
  EXPECT_EQ(wcodec::trellis_indices_bytes(17, 1, 8), 1u + 2u * 256u);
  EXPECT_EQ(wcodec::trellis_indices_bytes(16, 16, 1), 0u);
  EXPECT_EQ(wcodec::trellis_indices_bytes(16, 16, 9), 0u);
  EXPECT_EQ(wcodec::trellis_indices_bytes(0, 16, 4), 0u);
  EXPECT_DOUBLE_EQ(wcodec::trellis_grid(2, 0), -1.5 * 1.24371088);
  EXPECT_DOUBLE_EQ(wcodec::trellis_grid(3, 7), 3.5 * 1.24371088);
  EXPECT_EQ(wcodec::trellis_hadamard_blocks(172), (std::vector<uint64_t>{128, 32, 8, 4}));
  EXPECT_EQ(wcodec::trellis_hadamard_blocks(64), (std::vector<uint64_t>{64}));
  EXPECT_EQ(wcodec::trellis_hadamard_blocks(257), (std::vector<uint64_t>{128, 128, 1}));
  // Orthonormal and its own inverse.
  std::vector<float> row(172), orig;
  for (size_t i = 0; i < row.size(); ++i) row[i] = std::sin(0.37 * i) + 0.1f * i;
  orig = row;
  double n0 = 0, n1 = 0;
  for (float v : row) n0 += v * v;
  wcodec::trellis_hadamard_row(row.data(), row.size());
  for (float v : row) n1 += v * v;
  EXPECT_NEAR(n0, n1, 1e-3 * n0);
  wcodec::trellis_hadamard_row(row.data(), row.size());
  for (size_t i = 0; i < row.size(); ++i) EXPECT_NEAR(row[i], orig[i], 1e-4);
}

// Annotated vector: a 16 x 16 weight at 3 bits whose codes are known.
TEST(TrellisLayout, PackingVector) {
  std::vector<uint8_t> idx(1 + 96, 0);
  idx[0] = 3;
  // Codes of row 0: 5, 2, 7 -> bits 101 010 111 from bit 0 of byte 1:
  // byte 1 = 0b11'010'101 = 0xD5, byte 2 bit 0 = 1 (the top bit of the 7).
  idx[1] = 0xD5;
  idx[2] = 0x01;
  std::vector<float> scales(16, 1.0f), su(16, 1.0f), sv(16, 1.0f);
  wcodec::TrellisComponents c{idx.data(), idx.size(), reinterpret_cast<const uint8_t*>(scales.data()),
                              reinterpret_cast<const uint8_t*>(su.data()), reinterpret_cast<const uint8_t*>(sv.data())};
  std::vector<float> w(256);
  ASSERT_TRUE(wcodec::trellis_dequantize_rows(c, 16, 16, 3, false, 0, 16, w.data()).ok());
  EXPECT_FLOAT_EQ(w[0], static_cast<float>((5 - 3.5) * 1.24371088));
  EXPECT_FLOAT_EQ(w[1], static_cast<float>((2 - 3.5) * 1.24371088));
  EXPECT_FLOAT_EQ(w[2], static_cast<float>((7 - 3.5) * 1.24371088));
  EXPECT_FLOAT_EQ(w[3], static_cast<float>((0 - 3.5) * 1.24371088));
  idx[0] = 4;  // header byte != bits
  auto st = wcodec::trellis_dequantize_rows(c, 16, 16, 3, false, 0, 16, w.data());
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("header byte 4 != bits 3"), std::string::npos) << st.message();
  idx[0] = 3;
  c.indices_len = 96;  // truncated
  EXPECT_FALSE(wcodec::trellis_dequantize_rows(c, 16, 16, 3, false, 0, 16, w.data()).ok());
}

// Every bit width, with and without the rotation, on real weights: the
// library decoder equals the reference decoder, the recorded mse is the
// error against the real weights, and more bits mean less error.
TEST(TrellisQuantizer, RealWeightsEveryBitWidth) {
  const auto all = load_tensors(stories(), nullptr);
  for (const char* name : {"model.layers.0.mlp.down_proj.weight", "model.layers.1.self_attn.k_proj.weight"}) {
    std::vector<float> w;
    uint64_t out = 0, in = 0;
    for (const auto& t : all)
      if (t.name == name) {
        w.resize(t.bytes.size() / 4);
        std::memcpy(w.data(), t.bytes.data(), t.bytes.size());
        out = t.shape[0], in = t.shape[1];
      }
    ASSERT_FALSE(w.empty()) << name;
    double var = 0;
    for (float v : w) var += static_cast<double>(v) * v;
    var /= static_cast<double>(w.size());
    for (bool had : {false, true}) {
      double prev = 1e30;
      for (unsigned bits = 2; bits <= 8; ++bits) {
        SCOPED_TRACE(std::string(name) + " bits " + std::to_string(bits) + (had ? " hadamard" : ""));
        auto qr = wcodec::trellis_quantize(w.data(), out, in, bits, had, name);
        ASSERT_TRUE(qr.ok()) << qr.status().ToString();
        const auto& qq = *qr;
        ASSERT_EQ(qq.indices.size(), wcodec::trellis_indices_bytes(out, in, bits));
        EXPECT_EQ(qq.indices[0], bits);
        for (float s : qq.su) EXPECT_TRUE(s == 1.0f || s == -1.0f);
        auto bytes = [](const std::vector<float>& v) {
          std::vector<uint8_t> b(v.size() * 4);
          std::memcpy(b.data(), v.data(), b.size());
          return b;
        };
        const auto ref = reference_dequantize(qq.indices, bytes(qq.scales), bytes(qq.su), bytes(qq.sv), out, in, bits, had);
        wcodec::TrellisComponents c{qq.indices.data(), qq.indices.size(),
                                    reinterpret_cast<const uint8_t*>(qq.scales.data()),
                                    reinterpret_cast<const uint8_t*>(qq.su.data()),
                                    reinterpret_cast<const uint8_t*>(qq.sv.data())};
        std::vector<float> lib(out * in);
        ASSERT_TRUE(wcodec::trellis_dequantize_rows(c, out, in, bits, had, 0, out, lib.data()).ok());
        double sse = 0, maxdiff = 0;
        for (size_t k = 0; k < lib.size(); ++k) {
          maxdiff = std::max(maxdiff, std::fabs(lib[k] - ref[k]));
          sse += (ref[k] - w[k]) * (ref[k] - w[k]);
        }
        EXPECT_LT(maxdiff, 1e-5) << "library and reference decoders disagree";
        const double mse = sse / static_cast<double>(w.size());
        EXPECT_NEAR(qq.mse, mse, 1e-4 * mse + 1e-12);
        EXPECT_LT(qq.mse, prev) << "more bits, no less error";
        EXPECT_LT(qq.mse, var * 0.3 * std::pow(0.33, bits - 2)) << "mse " << qq.mse << " var " << var;
        prev = qq.mse;
      }
    }
  }
  // Deterministic: the same input gives the same bytes.
  std::vector<float> w(64 * 48);
  for (size_t k = 0; k < w.size(); ++k) w[k] = std::cos(0.01 * k);
  auto a = wcodec::trellis_quantize(w.data(), 64, 48, 5, true, "x");
  auto b = wcodec::trellis_quantize(w.data(), 64, 48, 5, true, "x");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->indices, b->indices);
  EXPECT_EQ(a->su, b->su);
  w[3] = NAN;
  EXPECT_FALSE(wcodec::trellis_quantize(w.data(), 64, 48, 5, true, "x").ok());
}

// ---------------------------------------------------------------- stores

// Every bit width and both layouts from real weights: validate passes, the
// stored components decode (reference decoder) to the recorded mse against
// the real weights, and migrate's output passes validate and equals the v3
// store the quantizer writes.
TEST(TrellisStore, QuantizeValidateMigrateEveryBitWidth) {
  wctest::ScratchDir d;
  for (unsigned bits = 2; bits <= 8; ++bits) {
    const bool had = bits % 2 == 1;
    SCOPED_TRACE("bits " + std::to_string(bits));
    const fs::path v2 = d / ("v2-" + std::to_string(bits)), v3 = d / ("v3-" + std::to_string(bits)),
                   m = d / ("m-" + std::to_string(bits));
    std::string log;
    ASSERT_EQ(quantize(stories(), v2, bits, had, "v2", &log), 0) << log;
    ASSERT_EQ(quantize(stories(), v3, bits, had, "v3", &log), 0) << log;
    EXPECT_EQ(validate(v2, &log), 0) << log;
    EXPECT_EQ(validate(v3, &log), 0) << log;
    EXPECT_NE(log.find("valid Trellis v3 store"), std::string::npos) << log;
    ASSERT_EQ(migrate(v2, m, "", &log), 0) << log;
    EXPECT_EQ(validate(m, &log), 0) << log;
    for (const auto& e : fs::directory_iterator(v3))
      EXPECT_EQ(wctest::read_file(e.path()), wctest::read_file(m / e.path().filename())) << e.path();

    const auto st = read_store(m);
    ASSERT_TRUE(st.problems.empty()) << problems(st);
    EXPECT_EQ(st.hadamard, had);
    ASSERT_EQ(st.weights.size(), 36u);
    for (const auto& w : st.weights) {
      if (w.name != "model.layers.2.mlp.up_proj.weight" && w.name != "model.embed_tokens.weight") continue;
      SCOPED_TRACE(w.name);
      ASSERT_EQ(w.bits, bits);
      ASSERT_TRUE(w.mse.has_value());
      const auto ref = reference_dequantize(component_bytes(m, st, w.parts[0]), component_bytes(m, st, w.parts[1]),
                                            component_bytes(m, st, w.parts[2]), component_bytes(m, st, w.parts[3]),
                                            w.out, w.in, w.bits, st.hadamard);
      const auto orig = original_values(stories(), w.name);
      ASSERT_EQ(orig.size(), ref.size());
      double sse = 0;
      for (size_t k = 0; k < ref.size(); ++k) sse += (ref[k] - orig[k]) * (ref[k] - orig[k]);
      EXPECT_NEAR(*w.mse, sse / static_cast<double>(ref.size()), 1e-4 * *w.mse);
    }
  }
}

// The bytes migrate writes: names, shard sizes, the index, total_size,
// every tensor (base weights included) with its v2 bytes, the metadata.
TEST(TrellisStore, MigrateOutputBytes) {
  wctest::ScratchDir d;
  const fs::path v2 = d / "v2", m = d / "m";
  std::string log;
  ASSERT_EQ(quantize(stories(), v2, 4, true, "v2", &log), 0) << log;
  const uint64_t limit = 40000;
  ASSERT_EQ(migrate(v2, m, "40KB", &log), 0) << log;
  EXPECT_EQ(validate(m, &log), 0) << log;
  const auto src = read_store(v2);
  ASSERT_TRUE(src.problems.empty()) << problems(src);
  std::map<std::string, std::vector<uint8_t>> v2_bytes;  // v3 name -> bytes
  for (size_t k = 0; k < src.tensors.size(); ++k) v2_bytes[src.tensors[k].v3_name] = component_bytes(v2, src, k);

  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(m)) names.insert(e.path().filename().string());
  size_t n = 0;
  for (const auto& s : names) n += s.rfind("model-", 0) == 0;
  ASSERT_GE(n, 3u) << "40KB shards of a 160 KB store";
  char buf[64];
  for (size_t i = 1; i <= n; ++i) {
    std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i, n);
    EXPECT_TRUE(names.count(buf)) << buf;
  }
  EXPECT_EQ(names.size(), n + 3) << "shards, index, quantization_config.json, config.json";
  EXPECT_TRUE(names.count("config.json") && names.count("quantization_config.json") &&
              names.count("model.safetensors.index.json"));
  EXPECT_EQ(wctest::read_file(m / "config.json"), wctest::read_file(v2 / "config.json"));

  const json idx = load_json(m / "model.safetensors.index.json");
  EXPECT_EQ(idx["metadata"]["format"], "trellis_v3");
  EXPECT_EQ(idx["metadata"]["quantization"]["hadamard_transform"], true);
  uint64_t total = 0;
  size_t tensors = 0;
  for (size_t i = 1; i <= n; ++i) {
    std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i, n);
    uint64_t in_shard = 0;
    const auto t = load_tensors(m / buf, nullptr);
    for (const auto& x : t) {
      ++tensors;
      in_shard += x.bytes.size();
      EXPECT_EQ(idx["weight_map"][x.name], buf) << x.name;
      ASSERT_TRUE(v2_bytes.count(x.name)) << x.name;
      EXPECT_EQ(x.bytes, v2_bytes[x.name]) << x.name;
      EXPECT_EQ(x.name.find("__"), std::string::npos) << x.name;
    }
    EXPECT_TRUE(in_shard <= limit || t.size() == 1) << buf << ": " << in_shard << " tensor bytes";
    total += in_shard;
  }
  EXPECT_EQ(tensors, src.tensors.size());
  EXPECT_EQ(idx["weight_map"].size(), src.tensors.size());
  EXPECT_EQ(idx["metadata"]["total_size"].get<uint64_t>(), total);
  EXPECT_EQ(idx["weight_map"]["model.norm.weight"].is_string(), true) << "base weights in the weight_map";
  EXPECT_TRUE(idx["weight_map"].contains("model.layers.3.mlp.up_proj.weight.indices"));

  const json qc = load_json(m / "quantization_config.json");
  EXPECT_EQ(qc["quantization_version"], "trellis_v3");
  EXPECT_EQ(qc["global_config"]["target_bits"], 4);
  EXPECT_EQ(qc["global_config"]["tile_size"], 16);
  EXPECT_EQ(qc["global_config"]["hadamard_transform"], true);
  EXPECT_EQ(qc["layer_allocation"]["0"]["mlp.down_proj"], 4);
  EXPECT_EQ(qc["layer_allocation"]["5"]["model.embed_tokens"], 4);
  const json l0 = load_json(v2 / "layer_0000" / "index.json");
  for (const auto& e : l0["tensors"]) {
    const json& t = qc["tensor_metadata"][e["name"].get<std::string>()];
    EXPECT_EQ(t["bits"], e["bits"]);
    EXPECT_EQ(t["mse"], e["mse"]);
    EXPECT_EQ(t["shape"], e["shape"]);
    const uint64_t out = e["shape"][0], in = e["shape"][1];
    EXPECT_EQ(t["original_bytes"], out * in * 4);
    EXPECT_EQ(t["compressed_bytes"], wcodec::trellis_indices_bytes(out, in, 4) + 4 * ((in + 127) / 128 * out + in + out));
  }
  // A second migration into a non-empty directory is refused; bad sizes are usage errors.
  EXPECT_EQ(migrate(v2, m, "", &log), 1) << log;
  EXPECT_EQ(migrate(v2, d / "x", "12XB", &log), 2) << log;
  EXPECT_EQ(migrate(m, d / "y", "", &log), 1) << "a v3 store is not migrated";
  EXPECT_EQ(wctest::run_command(tool() + " trellis validate", &log), 2) << log;
}

// Conv weights (isnet-medium F16, 4-D) keep their shape in weight_shape.
TEST(TrellisStore, ConvWeightsF16) {
  wctest::ScratchDir d;
  std::string log;
  // The first 40 conv weights (4.6 M values): the whole model takes seconds.
  ASSERT_EQ(quantize(isnet(), d / "v2", 6, false, "v2", &log, " --max-weights 40"), 0) << log;
  EXPECT_EQ(validate(d / "v2", &log), 0) << log;
  ASSERT_EQ(migrate(d / "v2", d / "m", "20MB", &log), 0) << log;
  EXPECT_EQ(validate(d / "m", &log), 0) << log;
  const auto st = read_store(d / "m");
  ASSERT_EQ(st.weights.size(), 40u);
  size_t four_d = 0;
  for (const auto& w : st.weights)
    if (w.weight_shape.size() == 4) {
      ++four_d;
      EXPECT_EQ(w.weight_shape[0] * w.weight_shape[1] * w.weight_shape[2] * w.weight_shape[3], w.out * w.in);
    }
  EXPECT_EQ(four_d, 40u);
  EXPECT_EQ(st.tensors.size(), 4 * 40u + 79 + 119) << "the other weights and the biases are base tensors";
  const auto& w = st.weights[7];
  const auto ref = reference_dequantize(component_bytes(d / "m", st, w.parts[0]), component_bytes(d / "m", st, w.parts[1]),
                                        component_bytes(d / "m", st, w.parts[2]), component_bytes(d / "m", st, w.parts[3]),
                                        w.out, w.in, w.bits, false);
  const auto orig = original_values(isnet(), w.name);
  double sse = 0;
  for (size_t k = 0; k < ref.size(); ++k) sse += (ref[k] - orig[k]) * (ref[k] - orig[k]);
  EXPECT_NEAR(*w.mse, sse / static_cast<double>(ref.size()), 1e-4 * *w.mse);
}

// The reference code's v3 variants: "__" component names, the metadata in
// quantization_index.json, or no metadata file at all.
TEST(TrellisStore, V3Variants) {
  wctest::ScratchDir d;
  std::string log;
  ASSERT_EQ(quantize(stories(), d / "base", 5, true, "v3", &log), 0) << log;
  const auto want = read_store(d / "base");
  ASSERT_TRUE(want.problems.empty()) << problems(want);
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    const fs::path v = d / (std::string("v").append(std::to_string(variant)));
    fs::copy(d / "base", v);
    const fs::path shard = v / "model-00001-of-00001.safetensors";
    json idx = load_json(v / "model.safetensors.index.json");
    if (variant == 0) {  // underscored names
      json wm = json::object();
      rewrite_shard(shard, [&](std::vector<wcodec::TensorData>& t) {
        for (auto& x : t)
          for (const char* p : {".indices", ".scales", ".su", ".sv"}) {
            const std::string suf = p;
            if (x.name.size() > suf.size() && x.name.compare(x.name.size() - suf.size(), suf.size(), suf) == 0) {
              x.name = x.name.substr(0, x.name.size() - suf.size()) + "__" + suf.substr(1);
              break;
            }
          }
        for (auto& x : t) wm[x.name] = shard.filename().string();
      });
      idx["weight_map"] = wm;
      save_json(v / "model.safetensors.index.json", idx);
    } else if (variant == 1) {
      fs::rename(v / "quantization_config.json", v / "quantization_index.json");
    } else {
      fs::remove(v / "quantization_config.json");
    }
    const auto st = read_store(v);
    if (variant == 0) {
      EXPECT_TRUE(st.problems.empty()) << problems(st);
      EXPECT_EQ(st.variant.rfind("underscored", 0), 0u) << st.variant;
    } else {
      ASSERT_EQ(st.problems.size(), 1u) << problems(st);
      EXPECT_TRUE(has_problem(st, "quantization_config.json", "", "")) << problems(st);
    }
    ASSERT_EQ(st.weights.size(), want.weights.size());
    for (size_t k = 0; k < st.weights.size(); ++k) {
      EXPECT_EQ(st.weights[k].name, want.weights[k].name);
      EXPECT_EQ(st.weights[k].bits, 5u);
      EXPECT_EQ(st.weights[k].out, want.weights[k].out);
      EXPECT_EQ(st.weights[k].in, want.weights[k].in);
    }
    EXPECT_TRUE(st.hadamard) << "the flag comes from the index's metadata.quantization without a metadata file";
  }
}

// ---------------------------------------------------------------- defect catalogue

struct Defect {
  const char* name;
  std::function<void(const fs::path&)> seed;
  const char* file;
  const char* tensor;
  const char* field;
};

const char* kShard = "model-00001-of-00002.safetensors";
const char* kW = "model.layers.1.mlp.gate_proj.weight";

std::vector<Defect> v3_defects() {
  auto edit = [](const char* shard, std::function<void(std::vector<wcodec::TensorData>&)> f) {
    return [shard, f](const fs::path& d) { rewrite_shard(d / shard, f); };
  };
  auto find = [](std::vector<wcodec::TensorData>& t, const std::string& n) -> wcodec::TensorData& {
    for (auto& x : t)
      if (x.name == n) return x;
    ADD_FAILURE() << n;
    return t[0];
  };
  const std::string W = kW;
  return {
      {"missing shard", [](const fs::path& d) { fs::remove(d / "model-00002-of-00002.safetensors"); },
       "model-00002-of-00002.safetensors", "", ""},
      {"orphan tensor",
       edit(kShard, [](auto& t) { t.push_back({"stray.weight", wcodec::DType::kF32, {2}, std::vector<uint8_t>(8, 0)}); }),
       kShard, "stray.weight", ""},
      {"weight_map entry not in shard",
       [](const fs::path& d) {
         json j = load_json(d / "model.safetensors.index.json");
         j["weight_map"]["ghost.weight"] = kShard;
         save_json(d / "model.safetensors.index.json", j);
       },
       kShard, "ghost.weight", ""},
      {"missing component",
       edit(kShard, [W](auto& t) { t.erase(std::remove_if(t.begin(), t.end(), [&](auto& x) { return x.name == W + ".sv"; }), t.end()); }),
       "", kW, "sv"},
      {"header byte != bits", edit(kShard, [find, W](auto& t) { find(t, W + ".indices").bytes[0] = 6; }),
       kShard, "model.layers.1.mlp.gate_proj.weight.indices", "header"},
      {"wrong scales shape",
       edit(kShard, [find, W](auto& t) { auto& s = find(t, W + ".scales"); std::swap(s.shape[0], s.shape[1]); }),
       kShard, "model.layers.1.mlp.gate_proj.weight.scales", "shape"},
      {"truncated indices",
       edit(kShard, [find, W](auto& t) { auto& s = find(t, W + ".indices"); s.bytes.pop_back(); s.shape[0] -= 1; }),
       kShard, "model.layers.1.mlp.gate_proj.weight.indices", "shape"},
      {"su of the wrong dtype",
       edit(kShard, [find, W](auto& t) { auto& s = find(t, W + ".su"); s.dtype = wcodec::DType::kI32; }),
       kShard, "model.layers.1.mlp.gate_proj.weight.su", "dtype"},
      {"bad JSON in quantization_config.json",
       [](const fs::path& d) { fs::resize_file(d / "quantization_config.json", 100); }, "quantization_config.json",
       "", ""},
      {"bad JSON in config.json",
       [](const fs::path& d) { wctest::write_file(d / "config.json", {'{', '"', 'a'}); }, "config.json", "", ""},
      {"bad JSON in the index",
       [](const fs::path& d) { wctest::write_file(d / "model.safetensors.index.json", {'[', '1', ']'}); },
       "model.safetensors.index.json", "", ""},
      {"missing config.json", [](const fs::path& d) { fs::remove(d / "config.json"); }, "config.json", "", ""},
      {"wrong total_size",
       [](const fs::path& d) {
         json j = load_json(d / "model.safetensors.index.json");
         j["metadata"]["total_size"] = j["metadata"]["total_size"].get<uint64_t>() + 1;
         save_json(d / "model.safetensors.index.json", j);
       },
       "model.safetensors.index.json", "", "metadata.total_size"},
      {"wrong format",
       [](const fs::path& d) {
         json j = load_json(d / "model.safetensors.index.json");
         j["metadata"]["format"] = "pt";
         save_json(d / "model.safetensors.index.json", j);
       },
       "model.safetensors.index.json", "", "metadata.format"},
      {"bits missing",
       [](const fs::path& d) {
         json j = load_json(d / "quantization_config.json");
         j["tensor_metadata"][kW].erase("bits");
         save_json(d / "quantization_config.json", j);
       },
       "quantization_config.json", kW, "bits"},
      {"bits differ from the header byte",
       [](const fs::path& d) {
         json j = load_json(d / "quantization_config.json");
         j["tensor_metadata"][kW]["bits"] = 3;
         save_json(d / "quantization_config.json", j);
       },
       kShard, "model.layers.1.mlp.gate_proj.weight.indices", "header"},
      {"mse missing",
       [](const fs::path& d) {
         json j = load_json(d / "quantization_config.json");
         j["tensor_metadata"][kW].erase("mse");
         save_json(d / "quantization_config.json", j);
       },
       "quantization_config.json", kW, "mse"},
      {"metadata of a weight not stored",
       [](const fs::path& d) {
         json j = load_json(d / "quantization_config.json");
         j["tensor_metadata"]["ghost.weight"] = j["tensor_metadata"][kW];
         save_json(d / "quantization_config.json", j);
       },
       "quantization_config.json", "ghost.weight", "tensor_metadata"},
      {"global_config incomplete",
       [](const fs::path& d) {
         json j = load_json(d / "quantization_config.json");
         j["global_config"].erase("tile_size");
         save_json(d / "quantization_config.json", j);
       },
       "quantization_config.json", "", "global_config.tile_size"},
      {"layer_allocation missing",
       [](const fs::path& d) {
         json j = load_json(d / "quantization_config.json");
         j.erase("layer_allocation");
         save_json(d / "quantization_config.json", j);
       },
       "quantization_config.json", "", "layer_allocation"},
      {"shard header corrupt", [](const fs::path& d) {
         auto b = wctest::read_file(d / kShard);
         b[12] = 0xff;
         wctest::write_file(d / kShard, b);
       },
       kShard, "", "header"},
      {"unnamed .safetensors file",
       [](const fs::path& d) { fs::copy_file(d / "model-00002-of-00002.safetensors", d / "extra.safetensors"); },
       "extra.safetensors", "", ""},
      {"shard name with a path",
       [](const fs::path& d) {
         json j = load_json(d / "model.safetensors.index.json");
         j["weight_map"]["model.norm.weight"] = "../model-00002-of-00002.safetensors";
         save_json(d / "model.safetensors.index.json", j);
       },
       "model.safetensors.index.json", "model.norm.weight", "weight_map"},
  };
}

TEST(TrellisValidate, DefectCatalogueV3) {
  wctest::ScratchDir d;
  std::string log;
  ASSERT_EQ(quantize(stories(), d / "v2", 4, false, "v2", &log), 0) << log;
  uint64_t total = 0;
  for (const auto& t : read_store(d / "v2").tensors) total += t.info.nbytes();
  ASSERT_EQ(migrate(d / "v2", d / "good", std::to_string(total * 6 / 10), &log), 0) << log;
  ASSERT_TRUE(fs::exists(d / "good" / kShard)) << "two shards expected";
  ASSERT_TRUE(read_store(d / "good").problems.empty());
  int i = 0;
  for (const auto& defect : v3_defects()) {
    SCOPED_TRACE(defect.name);
    const fs::path v = d / (std::string("d").append(std::to_string(i++)));
    fs::copy(d / "good", v);
    defect.seed(v);
    const auto st = read_store(v);
    ASSERT_FALSE(st.problems.empty()) << "not caught";
    EXPECT_TRUE(has_problem(st, defect.file, defect.tensor, defect.field))
        << "want file " << defect.file << " tensor " << defect.tensor << " field " << defect.field << "; got\n"
        << problems(st);
    EXPECT_EQ(validate(v, &log), 1) << log;
    EXPECT_NE(log.find("INVALID"), std::string::npos) << log;
    EXPECT_EQ(migrate(v, d / (std::string("m").append(std::to_string(i))), "", &log), 1) << "not a v2 store";
  }
}

TEST(TrellisValidate, DefectCatalogueV2) {
  wctest::ScratchDir d;
  std::string log;
  ASSERT_EQ(quantize(stories(), d / "good", 3, true, "v2", &log), 0) << log;
  const fs::path l1 = "layer_0001";
  const std::string W = kW, key = "model__layers__1__mlp__gate_proj__weight";
  struct V2Defect {
    const char* name;
    std::function<void(const fs::path&)> seed;
    std::string file, tensor, field;
  };
  const std::vector<V2Defect> defects = {
      {"index.json lists a weight not stored",
       [&](const fs::path& v) {
         json j = load_json(v / l1 / "index.json");
         j["tensors"].push_back({{"name", "ghost.weight"}, {"bits", 3}, {"shape", {16, 16}}});
         save_json(v / l1 / "index.json", j);
       },
       "layer_0001/index.json", "ghost.weight", ""},
      {"weight stored but not listed",
       [&](const fs::path& v) {
         json j = load_json(v / l1 / "index.json");
         j["tensors"].erase(0);
         save_json(v / l1 / "index.json", j);
       },
       "layer_0001/index.json", "model.layers.1.self_attn.q_proj.weight", ""},
      {"missing component",
       [&](const fs::path& v) {
         rewrite_shard(v / l1 / "tensor_0000.safetensors", [&](auto& t) {
           t.erase(std::remove_if(t.begin(), t.end(), [&](auto& x) { return x.name == key + "__scales"; }), t.end());
         });
       },
       "layer_0001", W, "scales"},
      {"header byte != bits",
       [&](const fs::path& v) {
         rewrite_shard(v / l1 / "tensor_0000.safetensors", [&](auto& t) {
           for (auto& x : t)
             if (x.name == key + "__indices") x.bytes[0] = 2;
         });
       },
       "layer_0001/tensor_0000.safetensors", key + "__indices", "header"},
      {"stray tensor",
       [&](const fs::path& v) {
         rewrite_shard(v / l1 / "tensor_0000.safetensors", [&](auto& t) {
           t.push_back({"stray", wcodec::DType::kU8, {1}, {0}});
         });
       },
       "layer_0001/tensor_0000.safetensors", "stray", ""},
      {"bad index.json", [&](const fs::path& v) { fs::resize_file(v / l1 / "index.json", 30); },
       "layer_0001/index.json", "", ""},
      {"bits out of range",
       [&](const fs::path& v) {
         json j = load_json(v / l1 / "index.json");
         j["tensors"][0]["bits"] = 9;
         save_json(v / l1 / "index.json", j);
       },
       "layer_0001/index.json", "model.layers.1.self_attn.q_proj.weight", "bits"},
      {"truncated base weights", [&](const fs::path& v) { fs::resize_file(v / "base_weights.safetensors", 1000); },
       "base_weights.safetensors", "", "header"},
  };
  int i = 0;
  for (const auto& defect : defects) {
    SCOPED_TRACE(defect.name);
    const fs::path v = d / (std::string("d").append(std::to_string(i++)));
    fs::copy(d / "good", v, fs::copy_options::recursive);
    defect.seed(v);
    const auto st = read_store(v);
    ASSERT_FALSE(st.problems.empty()) << "not caught";
    EXPECT_TRUE(has_problem(st, defect.file, defect.tensor, defect.field))
        << "want file " << defect.file << " tensor " << defect.tensor << " field " << defect.field << "; got\n"
        << problems(st);
    EXPECT_EQ(validate(v, &log), 1) << log;
    EXPECT_EQ(migrate(v, d / (std::string("m").append(std::to_string(i))), "", &log), 1) << "an invalid v2 store is not migrated";
  }
}

}  // namespace
