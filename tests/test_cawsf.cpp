// tests/test_cawsf.cpp — the CAWSF container (wcodec/cawsf.h,
// docs/cawsf-format.md).
//
// A version 1 file is built here by an independent writer that follows the
// reference converter's byte layout (META JSON with layers and
// checksum_index, shared codebooks zstd-compressed, the shard bank as one LZ4
// frame, LCG routing keys), from real weights (stories260K). The reader must
// verify it, rebuild every scope bit for bit as the reference's arithmetic
// does (computed here with the compiler's _Float16), apply y = W·x without
// densifying, and route to the same shards as the reference's router
// (re-implemented here). A version 2 file is written and read back. Then the
// catalogue of damaged files, one per rule, each refused naming the field.
// Thread-safety: single-threaded test code.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <lz4frame.h>
#include <xxhash.h>
#include <zstd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "testutil.h"
#include "wcodec/cawsf.h"
#include "wcodec/safetensors.h"
#if WCODEC_HAVE_CAWSF_CONVERT
#include "wcodec/cawsf_convert.h"
#endif

namespace {

// The compiler's IEEE half type: _Float16 (x86-64), __fp16 (aarch64, where
// GCC 12 has no _Float16 in C++). Both round to nearest even.
#if defined(__aarch64__)
using Half = __fp16;
#else
using Half = _Float16;
#endif

using namespace wcodec;
using namespace wcodec::cawsf;
using json = nlohmann::json;

// ---------------------------------------------------------------- real weights
struct Weights {
  std::string name;
  uint32_t rows, cols;
  std::vector<float> w;
};

std::vector<Weights> stories_weights(size_t count) {
  const std::string path = std::string(WCODEC_DATA_DIR) + "/stories260K.f32.safetensors";
  auto h = read_safetensors_header_file(path);
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  const std::vector<uint8_t> file = wctest::read_file(path);
  std::vector<Weights> out;
  for (const auto& t : h->tensors) {
    if (t.shape.size() != 2 || out.size() >= count) continue;
    Weights w{t.name, static_cast<uint32_t>(t.shape[0]), static_cast<uint32_t>(t.shape[1]), {}};
    w.w.resize(t.numel());
    std::memcpy(w.w.data(), file.data() + h->data_start + t.begin, t.nbytes());
    out.push_back(std::move(w));
  }
  return out;
}

// ---------------------------------------------------------------- bytes
struct Bytes {
  std::vector<uint8_t> b;
  template <class T>
  Bytes& le(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  Bytes& half(float f) { return le(std::bit_cast<uint16_t>(static_cast<Half>(f))); }
  Bytes& raw(const std::vector<uint8_t>& v) {
    b.insert(b.end(), v.begin(), v.end());
    return *this;
  }
};
float from_half(uint16_t h) { return static_cast<float>(std::bit_cast<Half>(h)); }
float h16(float f) { return static_cast<float>(static_cast<Half>(f)); }

std::vector<uint8_t> zstd_of(const std::vector<uint8_t>& v) {
  std::vector<uint8_t> o(ZSTD_compressBound(v.size()));
  o.resize(ZSTD_compress(o.data(), o.size(), v.data(), v.size(), 3));
  return o;
}
std::vector<uint8_t> lz4_of(const std::vector<uint8_t>& v) {
  std::vector<uint8_t> o(LZ4F_compressFrameBound(v.size(), nullptr));
  o.resize(LZ4F_compressFrame(o.data(), o.size(), v.data(), v.size(), nullptr));
  return o;
}
std::string hex64(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}
json rolling_index(const std::vector<uint8_t>& d) {
  json hx = json::array();
  for (size_t i = 0; i < d.size(); i += 1 << 20) hx.push_back(hex64(XXH3_64bits(d.data() + i, std::min<size_t>(1 << 20, d.size() - i))));
  return {{"algo", "xxh3-64"}, {"chunk_size", 1 << 20}, {"count", hx.size()}, {"hashes_hex", hx}};
}

// ---------------------------------------------------------------- the reference layout
// One scope as the reference converter lays it out: D, L (dense fp16), R
// (PQ, d = 128), S; with what this test expects the reconstruction to be.
struct V1Scope {
  Weights src;
  std::vector<uint8_t> d, l, r_embedded, s;
  std::vector<float> cb;  // [m][k][dsub]
  uint16_t m = 8, k = 16;
  uint32_t n = 0;
  std::vector<uint8_t> codes;
  std::vector<uint32_t> srow, scol;
  std::vector<float> sval;
  std::vector<float> expected;  // the reference's arithmetic
};

V1Scope make_scope(const Weights& w, uint32_t seed) {
  V1Scope sc;
  sc.src = w;
  std::mt19937 rng(seed);
  const uint64_t elems = uint64_t{w.rows} * w.cols;
  Bytes d, l;
  d.le(w.rows).le(w.cols);
  l.le(w.rows).le(w.cols);
  for (uint32_t i = 0; i < w.rows; ++i)
    for (uint32_t j = 0; j < w.cols; ++j) {
      d.half(i == j ? w.w[i * w.cols + j] * 0.25f : 0.0f);
      l.half(w.w[i * w.cols + j] * 0.5f);
    }
  sc.d = d.b;
  sc.l = l.b;
  const uint16_t dd = 128, dsub = dd / sc.m;
  sc.n = static_cast<uint32_t>((elems + dd - 1) / dd);
  std::normal_distribution<float> nd(0.0f, 0.01f);
  sc.cb.resize(size_t{sc.m} * sc.k * dsub);
  for (float& f : sc.cb) f = nd(rng);
  sc.codes.resize(size_t{sc.n} * sc.m);
  for (uint8_t& c : sc.codes) c = static_cast<uint8_t>(rng() % sc.k);
  Bytes r;
  r.le(w.rows).le(w.cols).le(dd).le(sc.m).le(sc.k).le(sc.n);
  for (float f : sc.cb) r.le(f);
  r.raw(sc.codes);
  sc.r_embedded = r.b;
  for (uint32_t e = 0; e < 9; ++e) {
    sc.srow.push_back(static_cast<uint32_t>(rng() % w.rows));
    sc.scol.push_back(static_cast<uint32_t>(rng() % w.cols));
    sc.sval.push_back(nd(rng) * 100);
  }
  sc.srow.push_back(sc.srow[0]);  // a repeated coordinate adds up
  sc.scol.push_back(sc.scol[0]);
  sc.sval.push_back(0.5f);
  Bytes s;
  s.le(w.rows).le(w.cols).le(static_cast<uint32_t>(sc.sval.size()));
  for (size_t e = 0; e < sc.sval.size(); ++e) s.le(sc.srow[e]).le(sc.scol[e]);
  for (float v : sc.sval) s.le(v);
  sc.s = s.b;
  // zero, + L, + D, + R (0 past the last block), + S in order.
  sc.expected.assign(elems, 0.0f);
  for (uint64_t f = 0; f < elems; ++f) {
    const uint32_t i = static_cast<uint32_t>(f / w.cols), j = static_cast<uint32_t>(f % w.cols);
    sc.expected[f] += h16(w.w[f] * 0.5f);
    sc.expected[f] += i == j ? h16(w.w[f] * 0.25f) : 0.0f;
    const uint64_t blk = f / dd, within = f % dd, sub = within / dsub;
    sc.expected[f] += sc.cb[(sub * sc.k + sc.codes[blk * sc.m + sub]) * dsub + within % dsub];
  }
  for (size_t e = 0; e < sc.sval.size(); ++e) sc.expected[uint64_t{sc.srow[e]} * w.cols + sc.scol[e]] += sc.sval[e];
  return sc;
}

std::vector<uint8_t> shard(uint8_t type, uint16_t scope, const std::vector<uint8_t>& payload) {
  Bytes h;
  h.le(type).le(scope).le(uint8_t{0}).le(static_cast<uint32_t>(payload.size())).le(static_cast<uint32_t>(payload.size()));
  return h.raw(payload).b;
}

// The reference's ROUTING: dim 64, ids 0..n-1, cost = usize in MiB (≥ 0.001), LCG keys.
std::vector<uint8_t> reference_routing(const std::vector<uint32_t>& usizes) {
  const uint16_t dim = 64;
  Bytes b;
  b.le(dim).le(static_cast<uint32_t>(usizes.size()));
  for (uint32_t i = 0; i < usizes.size(); ++i) b.le(i);
  for (uint32_t u : usizes) b.le(std::max(0.001f, static_cast<float>(u) / (1024 * 1024)));
  for (uint32_t i = 0; i < usizes.size(); ++i) {
    std::vector<float> v(dim);
    double norm = 0;
    uint32_t s = 1469598103u ^ (i * 16777619u);
    for (auto& f : v) {
      s = s * 1664525u + 1013904223u;
      f = static_cast<float>(s % 1000) / 1000.0f;
      norm += double{f} * f;
    }
    const float inv = static_cast<float>(1.0 / (std::sqrt(norm) + 1e-8));
    for (float f : v) b.le(f * inv);
  }
  return b.b;
}

struct V1File {
  json meta = {{"format_version", 1}, {"author", "crow"}, {"tokenizer", "gpt2"}};
  std::vector<uint8_t> codebooks, bank, routing;
  uint32_t meta_flags = 0, cb_flags = kFlagZstd, bank_flags = kFlagLz4, routing_flags = 0;
  bool checksums = true;
  // The file, header and TOC in the reference's order (META, CODEBOOKS, SHARD_BANK, ROUTING).
  std::vector<uint8_t> bytes() const {
    json m = meta;
    if (checksums)
      m["checksum_index"] = {{"2", rolling_index(codebooks)}, {"3", rolling_index(bank)}, {"4", rolling_index(routing)}};
    const std::string ms = m.dump();
    const std::vector<uint8_t> metab(ms.begin(), ms.end());
    auto pack = [](const std::vector<uint8_t>& d, uint32_t fl) {
      return fl & kFlagZstd ? zstd_of(d) : fl & kFlagLz4 ? lz4_of(d) : d;
    };
    const std::vector<std::pair<uint32_t, std::vector<uint8_t>>> secs = {{meta_flags, pack(metab, meta_flags)},
                                                                         {cb_flags, pack(codebooks, cb_flags)},
                                                                         {bank_flags, pack(bank, bank_flags)},
                                                                         {routing_flags, pack(routing, routing_flags)}};
    Bytes f;
    f.b = {'C', 'A', 'W', 'S', 'F', 0, 0, 0};
    f.le(uint32_t{1}).le(uint32_t{4}).le(uint32_t{0});
    uint64_t off = 4096;
    std::vector<uint64_t> offs;
    for (size_t i = 0; i < secs.size(); ++i) {
      f.le(static_cast<uint32_t>(i + 1)).le(off).le(static_cast<uint64_t>(secs[i].second.size())).le(secs[i].first);
      offs.push_back(off);
      off = (off + secs[i].second.size() + 4095) / 4096 * 4096;
    }
    for (size_t i = 0; i < secs.size(); ++i) {
      f.b.resize(offs[i], 0);
      f.raw(secs[i].second);
    }
    return f.b;
  }
};

// Three scopes of real weights: scope 0 and 2 with shared codebooks (as the
// reference writes), scope 1 with its codebook embedded (as its reader also reads).
struct V1Model {
  std::vector<V1Scope> scopes;
  V1File file;
  std::vector<uint32_t> usizes;
};

V1Model reference_model() {
  V1Model m;
  const auto ws = stories_weights(3);
  json layers = json::array();
  Bytes cbs;
  cbs.le(uint16_t{2});
  uint16_t next_cb = 0;
  for (uint16_t sc = 0; sc < ws.size(); ++sc) {
    m.scopes.push_back(make_scope(ws[sc], 7 + sc));
    const V1Scope& s = m.scopes.back();
    layers.push_back({{"scope_id", sc}, {"name", s.src.name}, {"shape", {s.src.rows, s.src.cols}}});
    std::vector<uint8_t> r = s.r_embedded;
    if (sc != 1) {  // shared: header, cb_id, codes; the codebook into CODEBOOKS
      const uint16_t id = next_cb++;
      Bytes rr;
      rr.b.assign(r.begin(), r.begin() + 18);
      rr.le(id).raw(s.codes);
      r = rr.b;
      cbs.le(id).le(uint16_t{128}).le(s.m).le(s.k).le(static_cast<uint32_t>(s.cb.size() * 4));
      for (float f : s.cb) cbs.le(f);
    }
    for (auto [t, p] : {std::pair{kShardD, &s.d}, {kShardL, &s.l}, {kShardR, &r}, {kShardS, &s.s}}) {
      const auto b = shard(t, sc, *p);
      m.file.bank.insert(m.file.bank.end(), b.begin(), b.end());
      m.usizes.push_back(static_cast<uint32_t>(p->size()));
    }
  }
  m.file.meta["layers"] = layers;
  m.file.codebooks = cbs.b;
  m.file.routing = reference_routing(m.usizes);
  return m;
}

// The reference's router, written out: ASCII-whitespace tokens here.
std::vector<uint32_t> reference_route(const std::vector<uint8_t>& routing, const std::string& prompt, size_t k,
                                      double budget) {
  const uint16_t dim = static_cast<uint16_t>(routing[0] | routing[1] << 8);
  uint32_t n;
  std::memcpy(&n, routing.data() + 2, 4);
  std::vector<uint32_t> ids(n);
  std::vector<float> costs(n), keys(size_t{n} * dim);
  std::memcpy(ids.data(), routing.data() + 6, 4 * n);
  std::memcpy(costs.data(), routing.data() + 6 + 4 * n, 4 * n);
  std::memcpy(keys.data(), routing.data() + 6 + 8 * n, 4 * keys.size());
  for (uint32_t i = 0; i < n; ++i) {
    double norm = 0;
    for (int j = 0; j < dim; ++j) norm += double{keys[i * dim + j]} * keys[i * dim + j];
    const float inv = static_cast<float>(1.0 / (std::sqrt(norm) + 1e-8));
    for (int j = 0; j < dim; ++j) keys[i * dim + j] *= inv;
  }
  std::vector<float> q(dim, 0.0f);
  std::vector<std::string> toks;
  std::string cur;
  for (char c : prompt + " ") {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!cur.empty()) toks.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (toks.empty()) toks.emplace_back();
  for (const auto& t : toks) q[XXH3_64bits(t.data(), t.size()) % dim] += 1.0f;
  double qn = 0;
  for (float f : q) qn += double{f} * f;
  const float qi = static_cast<float>(1.0 / (std::sqrt(qn) + 1e-8));
  for (float& f : q) f *= qi;
  std::vector<double> sims(n);
  for (uint32_t i = 0; i < n; ++i)
    for (int j = 0; j < dim; ++j) sims[i] += double{keys[i * dim + j]} * double{q[j]};
  std::vector<size_t> idx(n);
  for (size_t i = 0; i < n; ++i) idx[i] = i;
  for (size_t i = 0; i < n; ++i) {
    size_t b = i;
    for (size_t j = i + 1; j < n; ++j)
      if (sims[idx[j]] > sims[idx[b]]) b = j;
    std::swap(idx[i], idx[b]);
  }
  std::vector<uint32_t> sel;
  double total = 0;
  for (size_t i : idx) {
    if (budget > 0 && total + costs[i] > budget) continue;
    sel.push_back(ids[i]);
    total += costs[i];
    if (sel.size() >= k) break;
  }
  return sel;
}

std::string tmp_path(const std::string& name) {
  const std::string dir = "/tmp/cawsf-test-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  return dir + "/" + name;
}

// ---------------------------------------------------------------- version 1
TEST(CawsfV1, ReferenceLayoutReadsVerifiesAndRebuildsBitExact) {
  V1Model m = reference_model();
  const auto bytes = m.file.bytes();
  const std::string path = tmp_path("ref.cawsf");
  {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  auto f = CawsfFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->version(), 1u);
  EXPECT_TRUE((*f)->verify().ok()) << (*f)->verify().ToString();
  ASSERT_EQ((*f)->tensors().size(), m.scopes.size());
  ASSERT_EQ((*f)->shards().size(), 4 * m.scopes.size());
  EXPECT_EQ((*f)->codebooks().size(), 2u);
  for (size_t t = 0; t < m.scopes.size(); ++t) {
    const TensorEntry& te = (*f)->tensors()[t];
    const V1Scope& s = m.scopes[t];
    EXPECT_EQ(te.name, s.src.name);
    EXPECT_EQ(te.rows, s.src.rows);
    EXPECT_EQ(te.cols, s.src.cols);
    EXPECT_EQ(te.dtype, DType::kF32);
    auto bytes_t = (*f)->tensor_bytes(t);
    ASSERT_TRUE(bytes_t.ok()) << bytes_t.status().ToString();
    ASSERT_EQ(bytes_t->size(), s.expected.size() * 4);
    EXPECT_EQ(std::memcmp(bytes_t->data(), s.expected.data(), bytes_t->size()), 0) << te.name;
    // A row band equals the same rows of the whole.
    auto band = (*f)->tensor_rows(t, 3, 7);
    ASSERT_TRUE(band.ok());
    EXPECT_EQ(std::memcmp(band->data(), s.expected.data() + 3 * s.src.cols, band->size() * 4), 0);
    // y = W·x without densifying equals the dense product (float sums differ in order).
    auto c = (*f)->components(t);
    ASSERT_TRUE(c.ok());
    std::vector<float> x(te.cols);
    for (size_t j = 0; j < x.size(); ++j) x[j] = std::sin(0.37f * static_cast<float>(j));
    const auto y = apply_components(*c, x);
    for (uint32_t i = 0; i < te.rows; ++i) {
      double want = 0, mag = 0;
      for (uint32_t j = 0; j < te.cols; ++j) {
        want += double{s.expected[uint64_t{i} * te.cols + j]} * x[j];
        mag += std::fabs(double{s.expected[uint64_t{i} * te.cols + j]} * x[j]);
      }
      EXPECT_NEAR(y[i], want, 1e-5 * mag + 1e-6) << te.name << " row " << i;
    }
  }
  std::filesystem::remove(path);
}

TEST(CawsfV1, RouteSelectsWhatTheReferenceRouterSelects) {
  V1Model m = reference_model();
  auto f = CawsfFile::from_memory(m.file.bytes(), "ref.cawsf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const Routing& r = (*f)->routing();
  EXPECT_EQ(r.dim, 64);
  ASSERT_EQ(r.shard_ids.size(), 12u);
  for (const std::string p : {"once upon a time", "the cat sat on the mat", "", "   ", "a b c d e f g h i j"})
    for (size_t k : {1, 3, 8, 20})
      for (double budget : {0.0, 0.01, 0.05}) {
        std::vector<uint32_t> ours;
        for (const RouteHit& h : route(r, p, k, budget)) ours.push_back(h.shard_id);
        EXPECT_EQ(ours, reference_route(m.file.routing, p, k, budget)) << "prompt '" << p << "' k " << k << " budget " << budget;
        if (budget == 0) {
          EXPECT_EQ(ours.size(), std::min<size_t>(k, 12));
        }
      }
}

TEST(CawsfV1, RawAndZstdBanksReadTheSame) {
  V1Model m = reference_model();
  for (uint32_t fl : {0u, kFlagZstd}) {
    m.file.bank_flags = fl;
    auto f = CawsfFile::from_memory(m.file.bytes(), "ref.cawsf");
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    auto b = (*f)->tensor_bytes(0);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(std::memcmp(b->data(), m.scopes[0].expected.data(), b->size()), 0);
  }
}

// ---------------------------------------------------------------- version 2
TEST(CawsfV2, WriteThenReadKeepsEveryTensor) {
  const auto ws = stories_weights(2);
  std::vector<TensorOut> ts;
  std::vector<std::vector<float>> want;
  std::mt19937 rng(5);
  for (const Weights& w : ws) {
    TensorOut t;
    t.name = w.name;
    t.dtype = DType::kF32;
    t.shape = {w.rows, w.cols};
    t.rows = w.rows;
    t.cols = w.cols;
    const uint32_t rank = 3;
    std::vector<float> a(size_t{w.rows} * rank), b(size_t{w.cols} * rank), diag(std::min(w.rows, w.cols));
    for (uint32_t i = 0; i < w.rows; ++i)
      for (uint32_t r = 0; r < rank; ++r) a[i * rank + r] = w.w[i * w.cols + r];
    for (uint32_t j = 0; j < w.cols; ++j)
      for (uint32_t r = 0; r < rank; ++r) b[j * rank + r] = 0.1f * w.w[r * w.cols + j];
    for (size_t i = 0; i < diag.size(); ++i) diag[i] = w.w[i * w.cols + i];
    Components::Pq q;
    q.d = 64;
    q.m = 4;
    q.k = 8;
    q.n = static_cast<uint32_t>((uint64_t{w.rows} * w.cols + 63) / 64);
    q.codebook.resize(4 * 8 * 16);
    for (float& f : q.codebook) f = static_cast<float>(rng() % 100) / 1000.0f;
    q.codes.resize(size_t{q.n} * q.m);
    for (auto& c : q.codes) c = static_cast<uint8_t>(rng() % 8);
    const std::vector<uint32_t> sr = {0, 1, w.rows - 1}, sc = {2, 0, w.cols - 1};
    const std::vector<float> sv = {1.5f, -2.0f, 3.25f};
    t.shards = {{kShardL, payload_l_factors(w.rows, w.cols, rank, a, b)},
                {kShardD, payload_d_diag(w.rows, w.cols, diag)},
                {kShardR, payload_r_embedded(w.rows, w.cols, q)},
                {kShardS, payload_s(w.rows, w.cols, sr, sc, sv)}};
    // Expected: Σ_t fp16(a)·fp16(b), + fp16(diag), + R, + S.
    std::vector<float> e(size_t{w.rows} * w.cols);
    for (uint32_t i = 0; i < w.rows; ++i)
      for (uint32_t j = 0; j < w.cols; ++j) {
        float s = 0;
        for (uint32_t r = 0; r < rank; ++r) s += h16(a[i * rank + r]) * h16(b[j * rank + r]);
        float v = 0.0f + s;
        if (i == j) v += h16(diag[i]);
        const uint64_t f = uint64_t{i} * w.cols + j, blk = f / 64, wi = f % 64;
        v += q.codebook[((wi / 16) * 8 + q.codes[blk * 4 + wi / 16]) * 16 + wi % 16];
        e[f] = v;
      }
    for (size_t k = 0; k < sv.size(); ++k) e[uint64_t{sr[k]} * w.cols + sc[k]] += sv[k];
    want.push_back(e);
    ts.push_back(std::move(t));
  }
  TensorOut raw;
  raw.name = "norm.weight";
  raw.dtype = DType::kBF16;
  raw.shape = {5};
  raw.raw = true;
  raw.shards = {{kShardRaw, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}};
  ts.push_back(raw);
  const std::string path = tmp_path("v2.cawsf");
  for (uint8_t comp : {kCompZstd, kCompLz4, kCompNone}) {
    WriteOptions opt;
    opt.shard_comp = comp;
    ASSERT_TRUE(write_v2(path, ts, opt).ok());
    auto f = CawsfFile::open(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ((*f)->version(), 2u);
    EXPECT_TRUE((*f)->verify().ok());
    ASSERT_EQ((*f)->tensors().size(), 3u);
    EXPECT_EQ((*f)->codebooks().size(), 2u);
    for (size_t t = 0; t < 2; ++t) {
      auto b = (*f)->tensor_bytes(t);
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      ASSERT_EQ(b->size(), want[t].size() * 4);
      EXPECT_EQ(std::memcmp(b->data(), want[t].data(), b->size()), 0) << ts[t].name;
    }
    const TensorEntry& r = (*f)->tensors()[2];
    EXPECT_EQ(r.name, "norm.weight");
    EXPECT_EQ(r.dtype, DType::kBF16);
    EXPECT_EQ(r.shape, std::vector<uint64_t>{5});
    auto rb = (*f)->tensor_bytes(2);
    ASSERT_TRUE(rb.ok());
    EXPECT_EQ(*rb, raw.shards[0].payload);
    EXPECT_EQ((*f)->routing().shard_ids.size(), 9u);
  }
  std::filesystem::remove(path);
}

TEST(CawsfHalf, ConversionsRoundToNearestEven) {
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_half(f), std::bit_cast<uint16_t>(static_cast<Half>(f))) << f;
  }
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = half_to_float(static_cast<uint16_t>(h)), b = from_half(static_cast<uint16_t>(h));
    if (std::isnan(b)) EXPECT_TRUE(std::isnan(a));
    else EXPECT_EQ(std::bit_cast<uint32_t>(a), std::bit_cast<uint32_t>(b)) << h;
  }
}

// ---------------------------------------------------------------- damaged files
void expect_refused(const std::vector<uint8_t>& b, std::initializer_list<const char*> parts) {
  auto f = CawsfFile::from_memory(b, "bad.cawsf");
  ASSERT_FALSE(f.ok()) << "accepted a damaged file";
  EXPECT_TRUE(f.status().code() == Code::kCorruption || f.status().code() == Code::kNotSupported) << f.status().ToString();
  for (const char* p : parts) EXPECT_NE(f.status().message().find(p), std::string::npos) << f.status().ToString() << " lacks " << p;
}
// Refused at open or when the tensors are read; never read back wrong.
void expect_refused_somewhere(const std::vector<uint8_t>& b, const char* part) {
  auto f = CawsfFile::from_memory(b, "bad.cawsf");
  if (!f.ok()) {
    EXPECT_NE(f.status().message().find(part), std::string::npos) << f.status().ToString();
    return;
  }
  bool refused = false;
  for (size_t t = 0; t < (*f)->tensors().size(); ++t) {
    auto r = (*f)->tensor_bytes(t);
    if (!r.ok()) {
      refused = true;
      EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().ToString();
    }
  }
  EXPECT_TRUE(refused) << "damage not detected: " << part;
}
void put32_at(std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
void put64_at(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

TEST(CawsfCorruption, HeaderAndToc) {
  const auto good = reference_model().file.bytes();
  auto b = good;
  expect_refused({good.begin(), good.begin() + 10}, {"header", "shorter than"});
  b[0] = 'X';
  expect_refused(b, {"magic"});
  b = good, put32_at(b, 8, 3);
  expect_refused(b, {"version: 3"});
  b = good, put32_at(b, 12, 0);
  expect_refused(b, {"section count: 0"});
  b = good, put32_at(b, 12, 17);
  expect_refused(b, {"section count: 17"});
  b = good, put32_at(b, 16, 1);
  expect_refused(b, {"reserved: 1"});
  b = good, put32_at(b, 20, 9);
  expect_refused(b, {"TOC entry 0", "type: 9"});
  b = good, put32_at(b, 20 + 24, 1);
  expect_refused(b, {"TOC entry 1", "appears twice"});
  b = good, put32_at(b, 20 + 20, 4);
  expect_refused(b, {"TOC entry 0", "flags: 4"});
  b = good, put32_at(b, 20 + 24 + 20, 3);
  expect_refused(b, {"TOC entry 1", "flags: 3"});
  b = good, put64_at(b, 20 + 4, 4097);
  expect_refused(b, {"TOC entry 0", "not a multiple of 4096"});
  b = good, put64_at(b, 20 + 4, 0);
  expect_refused(b, {"TOC entry 0", "inside the header"});
  b = good, put64_at(b, 20 + 3 * 24 + 12, uint64_t{1} << 62);
  expect_refused(b, {"TOC entry 3", "past the end"});
  b = good, put64_at(b, 20 + 12, 9000);  // META runs into CODEBOOKS
  expect_refused(b, {"overlaps"});
  b = good, put32_at(b, 20 + 2 * 24, 2), put32_at(b, 12, 2);
  expect_refused(b, {"no SHARD_BANK"});
  // Every truncation is refused (the last section ends the file).
  for (size_t n : {size_t{20}, size_t{100}, size_t{4096}, good.size() / 2, good.size() - 1}) {
    auto f = CawsfFile::from_memory({good.begin(), good.begin() + static_cast<ptrdiff_t>(n)}, "cut.cawsf");
    EXPECT_FALSE(f.ok()) << n;
  }
}

TEST(CawsfCorruption, MetaAndChecksums) {
  V1Model m = reference_model();
  auto file = m.file;
  file.checksums = false;
  expect_refused(file.bytes(), {"checksum_index: missing"});
  file = m.file;
  file.meta["checksum_index"] = {{"7", rolling_index(file.bank)}};
  file.checksums = false;
  expect_refused(file.bytes(), {"checksum_index[\"7\"]"});
  for (const char* field : {"algo", "chunk_size", "hashes_hex", "count"}) {
    file = m.file;
    file.checksums = false;
    json ci = {{"2", rolling_index(file.codebooks)}, {"3", rolling_index(file.bank)}, {"4", rolling_index(file.routing)}};
    if (std::string(field) == "hashes_hex") ci["3"][field] = json::array({"XYZ"});
    else ci["3"][field] = 0;
    file.meta["checksum_index"] = ci;
    expect_refused(file.bytes(), {field});
  }
  file = m.file;
  file.checksums = false;
  file.meta["checksum_index"] = {{"2", rolling_index(file.codebooks)}, {"4", rolling_index(file.routing)}};
  expect_refused(file.bytes(), {"no entry for section 3"});
  // META that is not JSON.
  auto b = file.bytes();
  b[4096] = '#';
  expect_refused(b, {"META", "not valid JSON"});
  // A flipped byte in each section, checksums left as they were.
  for (int sec : {2, 3, 4}) {
    file = m.file;
    file.meta["checksum_index"] = {{"2", rolling_index(file.codebooks)}, {"3", rolling_index(file.bank)},
                                   {"4", rolling_index(file.routing)}};
    file.checksums = false;
    auto& target = sec == 2 ? file.codebooks : sec == 3 ? file.bank : file.routing;
    target[target.size() / 2] ^= 0x10;
    expect_refused(file.bytes(), {"checksum mismatch"});
  }
  // A flipped byte in a compressed stored section.
  b = m.file.bytes();
  const uint64_t bank_off = b[20 + 2 * 24 + 4] | b[20 + 2 * 24 + 5] << 8;
  b[bank_off + 40] ^= 0x55;
  expect_refused(b, {"SHARD_BANK"});
  // layers malformed
  file = m.file;
  file.meta["layers"] = {{{"name", "x"}}};
  expect_refused(file.bytes(), {"layers[0]"});
}

TEST(CawsfCorruption, ShardBankAndPayloads) {
  V1Model m = reference_model();
  auto with_bank = [&](std::vector<uint8_t> bank) {
    V1File f = m.file;
    f.bank = std::move(bank);
    return f.bytes();
  };
  auto bank = m.file.bank;
  bank.push_back(0);
  expect_refused(with_bank(bank), {"1 bytes left, a shard header needs 12"});
  bank = m.file.bank, bank[0] = 4;
  expect_refused(with_bank(bank), {"shard 0", "type: 4"});
  bank = m.file.bank, bank[3] = 7;
  expect_refused(with_bank(bank), {"shard 0", "comp: 7"});
  bank = m.file.bank, put32_at(bank, 8, 0x7fffffff);
  expect_refused(with_bank(bank), {"shard 0", "csize"});
  bank = m.file.bank, put32_at(bank, 4, 5);
  expect_refused(with_bank(bank), {"shard 0", "usize: 5"});
  // A D payload whose shape disagrees with its scope's.
  const V1Scope& s0 = m.scopes[0];
  bank = m.file.bank, put32_at(bank, 12, s0.src.rows + 1);
  expect_refused(with_bank(bank), {"shard"});
  // Payload rules, one shard replaced at a time.
  auto replace = [&](uint8_t type, const std::vector<uint8_t>& payload) {
    std::vector<uint8_t> out;
    size_t off = 0;
    while (off < m.file.bank.size()) {
      uint32_t cs;
      std::memcpy(&cs, m.file.bank.data() + off + 8, 4);
      const uint8_t t = m.file.bank[off];
      const uint16_t sc = static_cast<uint16_t>(m.file.bank[off + 1] | m.file.bank[off + 2] << 8);
      if (sc == 0 && t == type) {
        const auto sh = shard(type, 0, payload);
        out.insert(out.end(), sh.begin(), sh.end());
      } else {
        out.insert(out.end(), m.file.bank.begin() + off, m.file.bank.begin() + off + 12 + cs);
      }
      off += 12 + cs;
    }
    return with_bank(out);
  };
  auto p = s0.l;
  p.pop_back();
  expect_refused_somewhere(replace(kShardL, p), "fp16 needs");
  p = s0.s;
  put32_at(p, 12, s0.src.rows);  // entry 0's row out of range
  expect_refused_somewhere(replace(kShardS, p), "entry 0");
  p = s0.s;
  put32_at(p, 8, 1000);
  expect_refused_somewhere(replace(kShardS, p), "n: 1000");
  p = s0.r_embedded;
  p.back() = 200;  // a code ≥ k
  expect_refused_somewhere(replace(kShardR, p), "k is 16");
  p = s0.r_embedded;
  p[10] = 3;  // m = 3 does not divide d = 128
  expect_refused_somewhere(replace(kShardR, p), "m divides d");
  p = s0.r_embedded;
  p.resize(p.size() - 3);
  expect_refused_somewhere(replace(kShardR, p), "fit neither");
  p.assign(s0.r_embedded.begin(), s0.r_embedded.begin() + 18);
  Bytes shared{p};
  shared.le(uint16_t{9}).raw(s0.codes);
  expect_refused_somewhere(replace(kShardR, shared.b), "cb_id: 9");
  // CODEBOOKS and ROUTING rules.
  V1File f = m.file;
  f.codebooks.pop_back();
  expect_refused(f.bytes(), {"CODEBOOKS", "entry 1"});
  f = m.file;
  f.codebooks.push_back(0);
  expect_refused(f.bytes(), {"CODEBOOKS", "after the last entry"});
  f = m.file;
  f.routing.push_back(0);
  expect_refused(f.bytes(), {"ROUTING", "n: 12"});
  f = m.file;
  f.routing[0] = 0;
  f.routing[1] = 0;
  expect_refused(f.bytes(), {"ROUTING", "dim: 0"});
}

TEST(CawsfCorruption, Version2HeaderCheckAndLazyChunks) {
  const auto ws = stories_weights(1);
  TensorOut t;
  t.name = ws[0].name;
  t.shape = {ws[0].rows, ws[0].cols};
  t.raw = true;
  t.shards = {{kShardRaw, std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(ws[0].w.data()),
                                               reinterpret_cast<const uint8_t*>(ws[0].w.data() + ws[0].w.size()))}};
  const std::string path = tmp_path("v2c.cawsf");
  WriteOptions opt;
  opt.shard_comp = kCompNone;
  ASSERT_TRUE(write_v2(path, {t}, opt).ok());
  const auto good = wctest::read_file(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(CawsfFile::from_memory(good, "v2").ok());
  auto b = good;
  b[4096 + 10] ^= 1;  // META
  expect_refused(b, {"header check"});
  b = good, b[20 + 2 * 24 + 20] = 1;  // TOC flags of the bank
  expect_refused(b, {"header check"});
  // A payload byte of the bank: opens (chunks are checked lazily), the read is refused.
  uint64_t bank_off;
  std::memcpy(&bank_off, good.data() + 20 + 2 * 24 + 4, 8);
  b = good, b[bank_off + 12 + 100] ^= 0x20;
  auto f = CawsfFile::from_memory(b, "v2");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto r = (*f)->tensor_bytes(0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("SHARD_BANK: chunk 0"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE((*f)->verify().ok());
}

// ---------------------------------------------------------------- the converter
#if WCODEC_HAVE_CAWSF_CONVERT
// Converts a real checkpoint, reads it back, and checks every tensor: stored
// ones byte for byte, decomposed ones against the error the converter
// reported (recomputed here from the rebuilt bytes).
void convert_and_check(const std::string& model, const ConvertOptions& opt, double full_rank_bound) {
  const std::string src = std::string(WCODEC_DATA_DIR) + "/" + model;
  const std::string out = tmp_path(model + ".cawsf");
  auto rows = convert_to_cawsf({src}, out, opt);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  auto h = read_safetensors_header_file(src);
  ASSERT_TRUE(h.ok());
  const auto orig = wctest::read_file(src);
  auto f = CawsfFile::open(out);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE((*f)->verify().ok());
  ASSERT_EQ((*f)->tensors().size(), h->tensors.size());
  ASSERT_EQ(rows->size(), h->tensors.size());
  const json meta = json::parse((*f)->meta_json());
  size_t decomposed = 0;
  for (size_t t = 0; t < h->tensors.size(); ++t) {
    const TensorInfo& ti = h->tensors[t];
    const TensorEntry& te = (*f)->tensors()[t];
    SCOPED_TRACE(ti.name);
    EXPECT_EQ(te.name, ti.name);
    EXPECT_EQ(te.dtype, ti.dtype);
    EXPECT_EQ(te.shape, ti.shape);
    auto b = (*f)->tensor_bytes(t);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    ASSERT_EQ(b->size(), ti.nbytes());
    const uint8_t* want = orig.data() + h->data_start + ti.begin;
    if (te.raw) {
      EXPECT_EQ(std::memcmp(b->data(), want, b->size()), 0);
      continue;
    }
    ++decomposed;
    ASSERT_EQ(ti.dtype, DType::kF32);
    double num = 0, den = 0;
    for (uint64_t i = 0; i < ti.numel(); ++i) {
      float x, y;
      std::memcpy(&x, want + 4 * i, 4);
      std::memcpy(&y, b->data() + 4 * i, 4);
      num += (double{x} - y) * (double{x} - y);
      den += double{x} * x;
    }
    const double err = std::sqrt(num / den);
    EXPECT_NEAR(err, (*rows)[t].rel_error, 1e-12 + 1e-9 * err);
    EXPECT_NEAR(meta["tensors"][t]["rel_error"].get<double>(), err, 1e-12 + 1e-9 * err);
    EXPECT_LT(err, 0.5);
    if ((*rows)[t].rank == std::min(te.rows, te.cols)) {
      EXPECT_LT(err, full_rank_bound) << "full rank";
    }
    EXPECT_GT((*rows)[t].stored_bytes, 0u);
  }
  EXPECT_GT(decomposed, 0u);
  std::filesystem::remove(out);
}

TEST(CawsfConvert, Stories260KReadsBackWithTheReportedError) {
  ConvertOptions opt;
  opt.rank = 64;
  opt.threads = 2;
  convert_and_check("stories260K.f32.safetensors", opt, 2e-3);
}

TEST(CawsfConvert, SileroVadConvAndLstmWeights) {
  ConvertOptions opt;
  opt.rank = 16;
  opt.pq_m = 16;
  opt.pq_k = 64;
  opt.max_layers = 4;
  convert_and_check("silero_vad_16k.f32.safetensors", opt, 2e-3);
}

TEST(CawsfConvert, RefusesOptionsOutOfRange) {
  ConvertOptions opt;
  opt.pq_m = 7;
  auto r = convert_to_cawsf({std::string(WCODEC_DATA_DIR) + "/stories260K.f32.safetensors"}, tmp_path("x.cawsf"), opt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--pq-m: 7"), std::string::npos);
}

// The tool end to end: convert, inspect, verify (0), a flipped byte (1, naming the chunk), route, export.
TEST(CawsfConvert, ToolConvertVerifyRouteExport) {
  const std::string out = tmp_path("tool.cawsf");
  const std::string src = std::string(WCODEC_DATA_DIR) + "/stories260K.f32.safetensors";
  auto run = [](const std::string& args, std::string* text) {
    const std::string cmd = std::string(WCODEC_TOOL) + " " + args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    char buf[4096];
    text->clear();
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) text->append(buf, n);
    return WEXITSTATUS(pclose(p));
  };
  std::string text;
  ASSERT_EQ(run("cawsf convert --model " + src + " --out " + out + " --rank 8 --max-layers 3 -j 2", &text), 0) << text;
  EXPECT_NE(text.find("rel.error"), std::string::npos) << text;
  EXPECT_NE(text.find("model.embed_tokens.weight"), std::string::npos) << text;
  ASSERT_EQ(run("cawsf inspect " + out, &text), 0) << text;
  EXPECT_NE(text.find("CAWSF version 2"), std::string::npos) << text;
  ASSERT_EQ(run("cawsf verify " + out, &text), 0) << text;
  EXPECT_NE(text.find("OK"), std::string::npos);
  ASSERT_EQ(run("cawsf route " + out + " -p 'once upon a time' --k 3", &text), 0) << text;
  EXPECT_NE(text.find("Selected 3/"), std::string::npos) << text;
  ASSERT_EQ(run("cawsf apply " + out + " --scope 0", &text), 0) << text;
  EXPECT_NE(text.find("y[15]="), std::string::npos) << text;
  const std::string exp = tmp_path("tool.safetensors");
  ASSERT_EQ(run("cawsf export " + out + " " + exp, &text), 0) << text;
  auto eh = read_safetensors_header_file(exp);
  ASSERT_TRUE(eh.ok()) << eh.status().ToString();
  EXPECT_EQ(eh->tensors.size(), read_safetensors_header_file(src)->tensors.size());
  auto bytes = wctest::read_file(out);
  uint64_t bank_off;
  std::memcpy(&bank_off, bytes.data() + 20 + 2 * 24 + 4, 8);
  bytes[bank_off + 5000] ^= 1;
  std::ofstream(out, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  EXPECT_EQ(run("cawsf verify " + out, &text), 1) << text;
  EXPECT_NE(text.find("section 3 (SHARD_BANK): chunk 0 mismatch"), std::string::npos) << text;
  std::filesystem::remove(out);
  std::filesystem::remove(exp);
}
#endif

// Writes the fuzz seed corpus when WCODEC_WRITE_CAWSF_CORPUS names a directory.
TEST(CawsfCorpus, WriteSeedsWhenAsked) {
  const char* dir = std::getenv("WCODEC_WRITE_CAWSF_CORPUS");
  if (!dir) GTEST_SKIP() << "WCODEC_WRITE_CAWSF_CORPUS not set (only needed to regenerate tests/fuzz/corpus-cawsf)";
  Weights w{"w", 8, 16, {}};
  for (int i = 0; i < 128; ++i) w.w.push_back(std::sin(static_cast<float>(i)));
  V1Scope s = make_scope(w, 1);
  V1File f;
  f.meta["layers"] = json::array({{{"scope_id", 0}, {"name", "w"}, {"shape", {8, 16}}}});
  for (auto [t, p] : {std::pair{kShardD, &s.d}, {kShardL, &s.l}, {kShardR, &s.r_embedded}, {kShardS, &s.s}}) {
    const auto b = shard(t, 0, *p);
    f.bank.insert(f.bank.end(), b.begin(), b.end());
  }
  f.codebooks = {0, 0};
  f.routing = reference_routing({1, 2, 3, 4});
  auto save = [&](const std::string& name, const std::vector<uint8_t>& b) {
    std::ofstream(std::string(dir) + "/" + name, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
  };
  f.bank_flags = 0;
  f.cb_flags = 0;
  save("v1-raw", f.bytes());
  f.bank_flags = kFlagLz4;
  f.cb_flags = kFlagZstd;
  save("v1-lz4", f.bytes());
  TensorOut t;
  t.name = "w";
  t.shape = {8, 16};
  t.rows = 8;
  t.cols = 16;
  Components::Pq q{16, 4, 4, 8, std::vector<float>(4 * 4 * 4, 0.25f), std::vector<uint8_t>(32, 1)};
  t.shards = {{kShardL, payload_l_factors(8, 16, 1, std::vector<float>(8, 1.0f), std::vector<float>(16, 0.5f))},
              {kShardD, payload_d_diag(8, 16, std::vector<float>(8, 2.0f))},
              {kShardR, payload_r_embedded(8, 16, q)},
              {kShardS, payload_s(8, 16, {1}, {2}, {3.0f})}};
  TensorOut raw{"b", DType::kF16, {3}, true, 0, 0, {{kShardRaw, {1, 2, 3, 4, 5, 6}}}, -1};
  for (uint8_t comp : {kCompNone, kCompZstd}) {
    WriteOptions opt;
    opt.shard_comp = comp;
    const std::string p = std::string(dir) + "/v2-" + std::to_string(comp);
    ASSERT_TRUE(write_v2(p, {t, raw}, opt).ok());
  }
}

}  // namespace
