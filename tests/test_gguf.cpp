// tests/test_gguf.cpp — the GGUF header parser and writer (wcodec/gguf.h):
// the real GGUF file in ../shared/data parsed and written back byte for byte,
// a writer-made file with every value type read back, the ggml type table,
// and the catalogue of negative tests: one malformed header per rule
// (docs/gguf.md), each refused with the field and the value named, plus
// every truncation of a valid header refused cleanly.
// Thread-safety: single-threaded test code.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "testutil.h"
#include "wcodec/gguf.h"

namespace {

using namespace wcodec;

// Raw little-endian bytes, for headers the writer would refuse to write.
struct Raw {
  std::vector<uint8_t> b;
  template <class T>
  Raw& le(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  Raw& str(const std::string& s) {
    le<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Raw& head(uint32_t version, int64_t n_tensors, int64_t n_kv) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return le(version).le(n_tensors).le(n_kv);
  }
  // A pair "k" = u32 v.
  Raw& kv_u32(const std::string& k, uint32_t v) { return str(k).le<uint32_t>(4).le(v); }
  // A tensor info.
  Raw& tensor(const std::string& name, std::vector<int64_t> ne, uint32_t type, uint64_t off) {
    str(name).le<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (int64_t e : ne) le(e);
    return le(type).le(off);
  }
  Raw& pad(size_t to) {
    while (b.size() % to) b.push_back(0);
    return *this;
  }
  Raw& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

Result<GgufFile> parse(const std::vector<uint8_t>& b) { return parse_gguf(b.data(), b.size(), b.size(), "t.gguf"); }

// Expects a rejection whose message contains every one of `parts`.
void expect_refused(const std::vector<uint8_t>& b, std::initializer_list<const char*> parts) {
  auto r = parse(b);
  ASSERT_FALSE(r.ok()) << "accepted";
  EXPECT_EQ(r.status().code(), Code::kCorruption) << r.status().ToString();
  EXPECT_NE(r.status().message().find("t.gguf"), std::string::npos) << r.status().message();
  for (const char* p : parts) EXPECT_NE(r.status().message().find(p), std::string::npos) << r.status().message();
}

// A valid file of one F32 tensor of 8 elements (32 bytes) and one pair.
Raw valid_one() {
  Raw r;
  r.head(3, 1, 1).kv_u32("general.alignment", 32).tensor("w", {8}, kGgmlTypeF32, 0).pad(32).zeros(32);
  return r;
}

// ------------------------------------------------------------ real files

TEST(Gguf, RealFileParsesAndWritesBackByteForByte) {
  const std::string path = (wctest::data_dir() / "stories260K.f32.gguf").string();
  const auto bytes = wctest::read_file(path);
  auto r = read_gguf_file(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const GgufFile& f = *r;
  EXPECT_EQ(f.version, 3u);
  ASSERT_GT(f.tensors.size(), 0u);
  std::string arch;
  ASSERT_NE(f.find("general.architecture"), nullptr);
  ASSERT_TRUE(f.find("general.architecture")->value.get_string(&arch));
  EXPECT_EQ(arch, "llama");
  // 47 tensors and 11 pairs (../shared/data/README.md: llama metadata, no
  // tokenizer); the block count agrees with the tensor names.
  EXPECT_EQ(f.tensors.size(), 47u);
  EXPECT_EQ(f.kv.size(), 11u);
  const GgufKv* blocks = f.find("llama.block_count");
  ASSERT_NE(blocks, nullptr);
  uint64_t nblk = 0;
  ASSERT_TRUE(blocks->value.get_u64(&nblk));
  size_t attn_q = 0;
  for (const auto& t : f.tensors) attn_q += t.name.find(".attn_q.weight") != std::string::npos;
  EXPECT_EQ(attn_q, nblk);
  // Every tensor inside the file, F32 sized as ne product × 4.
  for (const auto& t : f.tensors) {
    EXPECT_LE(f.data_offset + t.offset + t.nbytes, bytes.size()) << t.name;
    if (t.type == kGgmlTypeF32) {
      EXPECT_EQ(t.nbytes, t.nelements() * 4) << t.name;
    }
  }
  EXPECT_LE(f.data_offset + f.data_size, bytes.size() + f.alignment);
  auto w = write_gguf_header(f);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(w->size(), f.data_offset);
  EXPECT_TRUE(std::equal(w->begin(), w->end(), bytes.begin())) << "header bytes differ";
  // The same parse from a prefix that ends inside the header: "need more".
  auto short_r = parse_gguf(bytes.data(), 100, bytes.size(), path);
  ASSERT_FALSE(short_r.ok());
  EXPECT_EQ(short_r.status().code(), Code::kOutOfRange);
  EXPECT_NE(short_r.status().message().find("need more header bytes"), std::string::npos);
}

// ------------------------------------------------------------ writer

TEST(Gguf, WriterRoundTripsEveryValueType) {
  GgufFile f;
  f.kv.push_back({"general.architecture", GgufValue::str("llama")});
  f.kv.push_back({"a.u8", GgufValue::u8(7)});
  f.kv.push_back({"a.i32", GgufValue::i32(-5)});
  f.kv.push_back({"a.u64", GgufValue::u64(1ull << 40)});
  f.kv.push_back({"a.f32", GgufValue::f32(0.5f)});
  f.kv.push_back({"a.bool", GgufValue::boolean(true)});
  f.kv.push_back({"a.strs", GgufValue::str_array({"x", "", "zz\n"})});
  f.kv.push_back({"a.i32s", GgufValue::i32_array({1, -2, 3})});
  f.kv.push_back({"a.empty", GgufValue::f32_array({})});
  f.kv.push_back({"general.alignment", GgufValue::u32(64)});
  f.alignment = 64;
  GgufTensor a, b, c;
  a.name = "token_embd.weight";
  a.n_dims = 2;
  a.ne[0] = 64;
  a.ne[1] = 3;
  a.type = kGgmlTypeQ8_0;  // 2 blocks of 34 bytes per row
  b.name = "blk.0.ffn_up.weight";
  b.n_dims = 2;
  b.ne[0] = 256;
  b.ne[1] = 2;
  b.type = kGgmlTypeQ4_K;
  c.name = "output_norm.weight";
  c.n_dims = 1;
  c.ne[0] = 5;
  c.type = kGgmlTypeF32;
  f.tensors = {a, b, c};
  auto w = write_gguf_header(f);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->size() % 64, 0u);
  const uint64_t data = 256 /* 204 padded */ + 320 /* 288 padded */ + 20;
  std::vector<uint8_t> file = *w;
  file.resize(file.size() + data, 0xAB);
  auto r = parse(file);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->kv.size(), f.kv.size());
  for (size_t i = 0; i < f.kv.size(); ++i) {
    EXPECT_EQ(r->kv[i].key, f.kv[i].key);
    EXPECT_EQ(r->kv[i].value.type, f.kv[i].value.type);
    EXPECT_EQ(r->kv[i].value.is_array, f.kv[i].value.is_array);
    EXPECT_EQ(r->kv[i].value.bytes, f.kv[i].value.bytes);
    EXPECT_EQ(r->kv[i].value.strings, f.kv[i].value.strings);
  }
  EXPECT_EQ(r->alignment, 64u);
  ASSERT_EQ(r->tensors.size(), 3u);
  EXPECT_EQ(r->tensors[0].nbytes, 204u);
  EXPECT_EQ(r->tensors[1].offset, 256u);
  EXPECT_EQ(r->tensors[1].nbytes, 288u);
  EXPECT_EQ(r->tensors[2].offset, 256u + 320u);
  EXPECT_EQ(r->data_size, data + 44);  // the last tensor padded too
  uint64_t u = 0;
  EXPECT_TRUE(r->find("a.u64")->value.get_u64(&u));
  EXPECT_EQ(u, 1ull << 40);
  EXPECT_FALSE(r->find("a.i32")->value.get_u64(&u));  // negative
  // Written again: the same bytes.
  auto w2 = write_gguf_header(*r);
  ASSERT_TRUE(w2.ok());
  EXPECT_EQ(*w2, *w);
}

TEST(Gguf, WriterRefusesWhatTheReaderRefuses) {
  GgufFile f;
  GgufTensor t;
  t.name = std::string(64, 'n');
  t.n_dims = 1;
  t.ne[0] = 32;
  f.tensors = {t};
  EXPECT_FALSE(write_gguf_header(f).ok());  // name too long
  f.tensors[0].name = "w";
  f.tensors[0].type = kGgmlTypeQ4_0;
  f.tensors[0].ne[0] = 33;
  auto r = write_gguf_header(f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("block size 32"), std::string::npos) << r.status().message();
  f.tensors[0].ne[0] = 32;
  f.tensors.push_back(f.tensors[0]);
  EXPECT_FALSE(write_gguf_header(f).ok());  // duplicate name
  f.tensors.pop_back();
  f.kv.push_back({"general.alignment", GgufValue::u32(16)});
  EXPECT_FALSE(write_gguf_header(f).ok());  // alignment field disagrees with the pair
  f.alignment = 16;
  EXPECT_TRUE(write_gguf_header(f).ok());
  f.kv.push_back({"general.alignment", GgufValue::u32(16)});
  EXPECT_FALSE(write_gguf_header(f).ok());  // duplicate key
}

TEST(Gguf, TypeTable) {
  EXPECT_STREQ(ggml_type_info(kGgmlTypeQ4_K)->name, "Q4_K");
  EXPECT_EQ(ggml_type_info(kGgmlTypeQ4_K)->type_size, 144u);
  EXPECT_EQ(ggml_type_info(kGgmlTypeQ6_K)->type_size, 210u);
  EXPECT_EQ(ggml_type_info(kGgmlTypeTQ2_0)->type_size, 66u);
  EXPECT_EQ(ggml_type_info(kGgmlTypeTQ1_0)->type_size, 54u);
  EXPECT_EQ(ggml_type_info(kGgmlTypeBF16)->block, 1u);
  EXPECT_EQ(ggml_type_info(42)->type_size, 18u);  // Q2_0
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 1000u}) EXPECT_EQ(ggml_type_info(removed), nullptr);
  int64_t ne[4] = {512, 3, 1, 1};
  uint64_t nb = 0;
  ASSERT_TRUE(ggml_tensor_nbytes(kGgmlTypeQ8_0, ne, 2, "x", &nb).ok());
  EXPECT_EQ(nb, 16u * 34 * 3);
}

// ------------------------------------------------------------ negative catalogue

TEST(GgufRefused, ValidBaseIsAccepted) {
  auto r = parse(valid_one().b);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->data_offset % 32, 0u);
  EXPECT_EQ(r->tensors[0].nbytes, 32u);
}

// The annotated vector of docs/gguf.md and the messages it quotes.
TEST(GgufRefused, DocumentedVector) {
  const auto b = valid_one().b;
  ASSERT_EQ(b.size(), 0x80u);
  EXPECT_EQ(b[0x31], 4);
  EXPECT_EQ(b[0x41], 'w');
  auto q = b;
  q[0x4e] = 2;
  expect_refused(q, {"tensor 0 'w': ne[0] = 8 is not a multiple of the Q4_0 block size 32"});
  auto o = b;
  o[0x52] = 0x20;
  expect_refused(o, {"tensor 0 'w': offset 32 (expected 0, the padded sizes of the tensors before it)"});
  const std::vector<uint8_t> cut(b.begin(), b.begin() + 0x70);
  expect_refused(cut, {"tensor 'w': data [96, 128) ends past the end of the file (112 bytes)"});
}

TEST(GgufRefused, Magic) {
  auto b = valid_one().b;
  b[0] = 'X';
  expect_refused(b, {"magic", "XGUF"});
  expect_refused({'G', 'G'}, {"2 bytes"});
}

TEST(GgufRefused, Versions) {
  for (uint32_t v : {0u, 1u, 4u, 0x03000000u}) {
    Raw r;
    r.head(v, 0, 0);
    expect_refused(r.b, {"version", std::to_string(v).c_str()});
  }
  Raw be;
  be.head(0x03000000u, 0, 0);
  expect_refused(be.b, {"big-endian"});
  Raw v2;
  v2.head(2, 0, 0);
  EXPECT_TRUE(parse(v2.b).ok());
}

TEST(GgufRefused, Counts) {
  Raw a;
  a.head(3, -1, 0);
  expect_refused(a.b, {"tensor count -1"});
  Raw b;
  b.head(3, 0, -5);
  expect_refused(b.b, {"key/value count -5"});
  Raw c;
  c.head(3, 1000000, 0);
  expect_refused(c.b, {"tensor count 1000000"});
  Raw d;
  d.head(3, 0, 1ll << 40);
  expect_refused(d.b, {"key/value count 1099511627776"});
}

TEST(GgufRefused, Keys) {
  {
    Raw r;
    r.head(3, 0, 1).str("").le<uint32_t>(4).le<uint32_t>(1);
    expect_refused(r.b, {"key 0 is empty"});
  }
  {
    Raw r;
    r.head(3, 0, 2).kv_u32("a.b", 1).kv_u32("a.b", 2);
    expect_refused(r.b, {"'a.b'", "twice"});
  }
  {
    Raw r;
    r.head(3, 0, 1).str("a.b").le<uint32_t>(13).le<uint32_t>(0);
    expect_refused(r.b, {"'a.b'", "type 13"});
  }
  {
    Raw r;
    r.head(3, 0, 1).str("a.b").le<uint32_t>(9).le<uint32_t>(9).le<uint64_t>(0);
    expect_refused(r.b, {"'a.b'", "array of arrays"});
  }
  {
    Raw r;
    r.head(3, 0, 1).str("a.b").le<uint32_t>(9).le<uint32_t>(0).le<uint64_t>((1ull << 30) + 1);
    expect_refused(r.b, {"'a.b'", "array length 1073741825"});
  }
  {
    Raw r;
    r.head(3, 0, 1).str("a.b").le<uint32_t>(9).le<uint32_t>(4).le<uint64_t>(1000).zeros(16);
    expect_refused(r.b, {"'a.b'", "1000 elements"});
  }
  {
    Raw r;  // a string array longer than the file could hold
    r.head(3, 0, 1).str("a.b").le<uint32_t>(9).le<uint32_t>(8).le<uint64_t>(1000).zeros(16);
    expect_refused(r.b, {"'a.b'", "1000 strings"});
  }
  {
    Raw r;
    r.head(3, 0, 1).str("a.b").le<uint32_t>(8).le<uint64_t>((1ull << 30) + 1);
    expect_refused(r.b, {"'a.b'", "length 1073741825 exceeds"});
  }
  {
    Raw r;
    r.head(3, 0, 1).str("a.b").le<uint32_t>(8).le<uint64_t>(100).zeros(10);
    expect_refused(r.b, {"'a.b'", "needs 100 bytes"});
  }
  {
    Raw r;  // a key length beyond the file
    r.head(3, 0, 1).le<uint64_t>(1000).zeros(8);
    expect_refused(r.b, {"key 0", "needs 1000 bytes"});
  }
}

TEST(GgufRefused, Alignment) {
  {
    Raw r;
    r.head(3, 0, 1).str("general.alignment").le<uint32_t>(5).le<int32_t>(32);
    expect_refused(r.b, {"general.alignment", "i32", "must be u32"});
  }
  for (uint32_t a : {0u, 48u}) {
    Raw r;
    r.head(3, 0, 1).kv_u32("general.alignment", a);
    expect_refused(r.b, {"general.alignment", std::to_string(a).c_str(), "power of 2"});
  }
}

TEST(GgufRefused, TensorInfos) {
  auto one = [](const std::string& name, std::vector<int64_t> ne, uint32_t type, uint64_t off) {
    Raw r;
    r.head(3, 1, 0).tensor(name, std::move(ne), type, off).pad(32).zeros(4096);
    return r.b;
  };
  expect_refused(one(std::string(64, 'x'), {8}, 0, 0), {"name length 64"});
  EXPECT_TRUE(parse(one(std::string(63, 'x'), {8}, 0, 0)).ok());
  {
    Raw r;
    r.head(3, 2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad(32).zeros(64);
    expect_refused(r.b, {"'w'", "twice"});
  }
  {
    Raw r;
    r.head(3, 1, 0).str("w").le<uint32_t>(5);
    expect_refused(r.b, {"'w'", "n_dims 5"});
  }
  expect_refused(one("w", {8, -2}, 0, 0), {"'w'", "ne[1] = -2"});
  expect_refused(one("w", {1ll << 32, 1ll << 31}, 0, 0), {"'w'", "2^63"});
  expect_refused(one("w", {8}, 4, 0), {"'w'", "ggml type 4"});
  expect_refused(one("w", {8}, 43, 0), {"'w'", "ggml type 43"});
  expect_refused(one("w", {48}, kGgmlTypeQ4_0, 0), {"'w'", "ne[0] = 48", "Q4_0", "32"});
  expect_refused(one("w", {8}, 0, 32), {"'w'", "offset 32", "expected 0"});
  {
    Raw r;  // the second tensor must start at the first one's padded size
    r.head(3, 2, 0).tensor("a", {3}, 0, 0).tensor("b", {8}, 0, 12).pad(32).zeros(64);
    expect_refused(r.b, {"'b'", "offset 12", "expected 32"});
  }
  {
    Raw r;  // data past the end of the file
    r.head(3, 1, 0).tensor("w", {64}, 0, 0).pad(32).zeros(100);
    expect_refused(r.b, {"'w'", "past the end of the file"});
  }
  {
    Raw r;  // the data section itself past the end
    r.head(3, 1, 0).tensor("w", {0}, 0, 0);
    expect_refused(r.b, {"data section starts at"});
  }
}

TEST(GgufRefused, EveryTruncationIsRefused) {
  Raw r;
  r.head(3, 2, 3)
      .kv_u32("general.alignment", 32)
      .str("s")
      .le<uint32_t>(8)
      .str("hello")
      .str("arr")
      .le<uint32_t>(9)
      .le<uint32_t>(8)
      .le<uint64_t>(2)
      .str("a")
      .str("bc")
      .tensor("x", {32, 2}, kGgmlTypeQ8_0, 0)
      .tensor("y", {4}, kGgmlTypeF16, 96)
      .pad(32)
      .zeros(128);
  ASSERT_TRUE(parse(r.b).ok()) << parse(r.b).status().ToString();
  const size_t data_offset = parse(r.b)->data_offset;
  for (size_t n = 0; n < r.b.size(); ++n) {
    std::vector<uint8_t> cut(r.b.begin(), r.b.begin() + n);
    auto p = parse(cut);
    // The last tensor's padding is not data: cuts inside it are accepted.
    if (n >= data_offset + 96 + 8) {
      EXPECT_TRUE(p.ok()) << n << ": " << p.status().ToString();
      continue;
    }
    EXPECT_FALSE(p.ok()) << "cut at " << n;
    if (!p.ok()) {
      EXPECT_EQ(p.status().code(), Code::kCorruption) << n << ": " << p.status().ToString();
    }
  }
}

}  // namespace
