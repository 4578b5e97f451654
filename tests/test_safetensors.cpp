// tests/test_safetensors.cpp — safetensors parser/writer: the real files in
// ../shared/data, the generated edge cases, a catalogue of malformed headers
// (one test per defect, checking the error code and the message), and a
// randomized robustness test over mutated real headers.
// Thread-safety: single-threaded test code.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "edge_cases.h"
#include "file_read.h"
#include "testutil.h"
#include "wcodec/safetensors.h"

namespace {

using wcodec::Code;
using wcodec::DType;
using wcodec::SafetensorsHeader;
using wcodec::TensorData;

// 8-byte length of `header` (or `len_override`) + header + `data_len` zero bytes.
std::vector<uint8_t> make_file(const std::string& header, uint64_t data_len,
                               std::optional<uint64_t> len_override = std::nullopt) {
  // Sized once and filled in place (GCC 12 warns, wrongly, about an insert
  // into the 8-byte vector when it is inlined here).
  std::vector<uint8_t> f(8 + header.size() + data_len, 0);
  const uint64_t n = len_override.value_or(header.size());
  for (int i = 0; i < 8; ++i) f[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(f.data() + 8, header.data(), header.size());
  return f;
}

wcodec::Result<SafetensorsHeader> parse(const std::vector<uint8_t>& f,
                                        const std::string& what = "bad.safetensors") {
  return wcodec::parse_safetensors_header(f.data(), f.size(), f.size(), what);
}

std::vector<uint8_t> header_bytes(const std::vector<uint8_t>& file, const SafetensorsHeader& h) {
  return std::vector<uint8_t>(file.begin(), file.begin() + static_cast<ptrdiff_t>(h.data_start));
}

// Structural invariants every successfully parsed header satisfies.
void check_invariants(const SafetensorsHeader& h, uint64_t file_size) {
  EXPECT_EQ(h.data_start, 8 + h.header_len);
  EXPECT_EQ(h.data_start + h.data_len, file_size);
  uint64_t pos = 0;
  std::set<std::string> names;
  for (const auto& t : h.tensors) {
    EXPECT_EQ(t.begin, pos) << t.name;
    EXPECT_LE(t.begin, t.end) << t.name;
    EXPECT_EQ(t.nbytes(), (t.numel() * wcodec::dtype_bits(t.dtype) + 7) / 8) << t.name;
    EXPECT_TRUE(names.insert(t.name).second) << "duplicate " << t.name;
    pos = t.end;
  }
  EXPECT_EQ(pos, h.data_len);
}

// ---------------------------------------------------------------- dtypes

TEST(SafetensorsDType, NamesBitsRoundTrip) {
  const std::vector<std::pair<std::string, unsigned>> expected = {
      {"BOOL", 8},  {"U8", 8},   {"I8", 8},       {"F8_E5M2", 8},  {"F8_E4M3", 8},
      {"I16", 16},  {"U16", 16}, {"F16", 16},     {"BF16", 16},    {"I32", 32},
      {"U32", 32},  {"F32", 32}, {"F64", 64},     {"I64", 64},     {"U64", 64},
      {"F8_E8M0", 8}, {"F4", 4}, {"F6_E2M3", 6}, {"F6_E3M2", 6},   {"C64", 64}};
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto t = static_cast<DType>(i);
    ASSERT_NE(wcodec::dtype_name(t), nullptr) << i;
    EXPECT_EQ(wcodec::dtype_name(t), expected[i].first);
    EXPECT_EQ(wcodec::dtype_bits(t), expected[i].second) << expected[i].first;
    EXPECT_EQ(wcodec::parse_dtype(expected[i].first), t);
  }
  EXPECT_EQ(wcodec::dtype_name(static_cast<DType>(20)), nullptr);
  EXPECT_EQ(wcodec::dtype_name(static_cast<DType>(255)), nullptr);
  EXPECT_EQ(wcodec::dtype_bits(static_cast<DType>(200)), 0u);
  EXPECT_FALSE(wcodec::parse_dtype("F17"));
  EXPECT_FALSE(wcodec::parse_dtype("f32"));
  EXPECT_FALSE(wcodec::parse_dtype(""));
}

TEST(SafetensorsDType, NumelOfScalarAndZeroSize) {
  wcodec::TensorInfo t;
  EXPECT_EQ(t.numel(), 1u);
  t.shape = {3, 0};
  EXPECT_EQ(t.numel(), 0u);
  t.shape = {7, 13};
  EXPECT_EQ(t.numel(), 91u);
}

TEST(SafetensorsDType, FloatConversions) {
  EXPECT_EQ(wctest::float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(wctest::float_to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(wctest::float_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(wctest::float_to_f16(-2.0f), 0xC000);
  EXPECT_EQ(wctest::float_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(wctest::float_to_f16(65520.0f), 0x7C00);
  EXPECT_EQ(wctest::float_to_f16(0x1.0p-24f), 0x0001);
  EXPECT_EQ(wctest::float_to_f16(0x1.0p-14f), 0x0400);
  EXPECT_EQ(wctest::float_to_f16(0.0f), 0x0000);
  EXPECT_EQ(wctest::float_to_f16(1.0f + 0x1.0p-11f), 0x3C00);  // tie → even
  EXPECT_EQ(wctest::float_to_f16(1.0f + 0x1.8p-11f), 0x3C01);
}

// ---------------------------------------------------------------- writer

TEST(SafetensorsWriter, CompactLikeReferenceWriter) {
  SafetensorsHeader h;
  wcodec::TensorInfo t;
  t.name = "name";
  t.dtype = DType::kF32;
  t.shape = {2, 3};
  t.begin = 0;
  t.end = 24;
  h.tensors.push_back(t);
  const auto bytes = wcodec::write_safetensors_header(h);
  std::string js = R"({"name":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
  js.append((8 - js.size() % 8) % 8, ' ');
  ASSERT_EQ(bytes.size(), 8 + js.size());
  EXPECT_EQ(bytes, make_file(js, 0));
  EXPECT_EQ(js.size() % 8, 0u);

  h.metadata = std::map<std::string, std::string>{{"format", "pt"}};
  const auto with_meta = wcodec::write_safetensors_header(h);
  const std::string s(with_meta.begin() + 8, with_meta.end());
  EXPECT_EQ(s.rfind(R"({"__metadata__":{"format":"pt"},"name":{"dtype")", 0), 0u) << s;
}

TEST(SafetensorsWriter, BuildAssignsContiguousOffsets) {
  std::vector<TensorData> ts = {{"a", DType::kF32, {2}, std::vector<uint8_t>(8, 1)},
                                {"z", DType::kF16, {0}, {}},
                                {"b", DType::kF4, {3}, std::vector<uint8_t>(2, 2)},
                                {"s", DType::kF6_E2M3, {}, std::vector<uint8_t>(1, 3)}};
  auto f = wcodec::build_safetensors(ts, std::nullopt);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto h = parse(*f);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->tensors.size(), 4u);
  EXPECT_EQ(h->tensors[0].name, "a");
  EXPECT_EQ(h->tensors[0].end, 8u);
  EXPECT_EQ(h->tensors[1].name, "z");
  EXPECT_EQ(h->tensors[1].begin, 8u);
  EXPECT_EQ(h->tensors[1].end, 8u);
  EXPECT_EQ(h->tensors[2].name, "b");
  EXPECT_EQ(h->tensors[2].end, 10u);
  EXPECT_EQ(h->tensors[3].nbytes(), 1u);
  EXPECT_EQ(h->data_len, 11u);
  EXPECT_FALSE(h->metadata.has_value());
  const std::vector<uint8_t> data(f->begin() + static_cast<ptrdiff_t>(h->data_start), f->end());
  EXPECT_EQ(data, (std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3}));
}

TEST(SafetensorsWriter, BuildRejectsSizeMismatch) {
  auto f = wcodec::build_safetensors({{"w.weight", DType::kBF16, {2, 3}, std::vector<uint8_t>(10)}},
                                     std::nullopt);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kInvalidArgument);
  EXPECT_NE(f.status().message().find("\"w.weight\""), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("12"), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("10"), std::string::npos) << f.status().message();
}

TEST(SafetensorsWriter, BuildRejectsDuplicateAndReservedNames) {
  auto dup = wcodec::build_safetensors({{"a", DType::kU8, {1}, {0}}, {"a", DType::kU8, {1}, {0}}},
                                       std::nullopt);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), Code::kInvalidArgument);
  EXPECT_NE(dup.status().message().find("duplicate"), std::string::npos);

  auto reserved = wcodec::build_safetensors({{"__metadata__", DType::kU8, {1}, {0}}}, std::nullopt);
  ASSERT_FALSE(reserved.ok());
  EXPECT_EQ(reserved.status().code(), Code::kInvalidArgument);

  auto bad_utf8 = wcodec::build_safetensors({{"\xC0\xAF", DType::kU8, {1}, {0}}}, std::nullopt);
  ASSERT_FALSE(bad_utf8.ok());
  EXPECT_EQ(bad_utf8.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad_utf8.status().message().find("UTF-8"), std::string::npos);
}

// ---------------------------------------------------------------- real files

TEST(SafetensorsRealFiles, ParseAndReserialize) {
  const auto files = wctest::data_safetensors_files();
  ASSERT_FALSE(files.empty()) << "no *.safetensors in " << wctest::data_dir();
  int identical = 0;
  for (const auto& path : files) {
    SCOPED_TRACE(path.string());
    auto h = wcodec::read_safetensors_header_file(path.string());
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    const uint64_t file_size = std::filesystem::file_size(path);
    EXPECT_GT(h->tensors.size(), 0u);
    check_invariants(*h, file_size);
    uint64_t sum = 0;
    for (const auto& t : h->tensors) sum += t.nbytes();
    EXPECT_EQ(sum, h->data_len);

    std::vector<uint8_t> original(h->data_start);
    {
      std::ifstream in(path, std::ios::binary);
      in.read(reinterpret_cast<char*>(original.data()), static_cast<std::streamsize>(original.size()));
      ASSERT_TRUE(in) << "short read";
    }
    auto mem = wcodec::parse_safetensors_header(original.data(), original.size(), file_size,
                                                path.string());
    ASSERT_TRUE(mem.ok()) << mem.status().ToString();
    EXPECT_EQ(mem->tensors.size(), h->tensors.size());

    const auto rewritten = wcodec::write_safetensors_header(*h);
    const std::string orig_json(original.begin() + 8, original.end());
    const std::string new_json(rewritten.begin() + 8, rewritten.end());
    const auto orig_doc = nlohmann::ordered_json::parse(orig_json);
    EXPECT_EQ(nlohmann::json::parse(orig_json), nlohmann::json::parse(new_json));

    // The original is "reference-writer shaped" when it is compact and its
    // order is the one our writer produces: __metadata__ first with sorted
    // keys, tensors by offset. Only then must the bytes be identical.
    std::string trimmed = orig_json;
    trimmed.erase(trimmed.find_last_not_of(' ') + 1);
    const bool compact = orig_doc.dump() == trimmed;
    bool canonical_order = true;
    auto it = orig_doc.begin();
    if (orig_doc.contains("__metadata__")) {
      canonical_order = it.key() == "__metadata__";
      const auto& m = orig_doc["__metadata__"];
      std::vector<std::string> keys;
      for (auto mi = m.begin(); mi != m.end(); ++mi) keys.push_back(mi.key());
      canonical_order = canonical_order && std::is_sorted(keys.begin(), keys.end());
    }
    std::vector<std::string> order;
    for (const auto& [k, v] : orig_doc.items()) {
      if (k != "__metadata__") order.push_back(k);
    }
    for (size_t i = 0; i < order.size() && canonical_order; ++i) {
      canonical_order = order[i] == h->tensors[i].name;
    }
    if (compact) {
      EXPECT_EQ(rewritten.size(), original.size());
    }
    if (compact && canonical_order) {
      EXPECT_EQ(rewritten, original);
    }
    if (rewritten == original) ++identical;
    std::cout << "  " << path.filename().string() << ": " << h->tensors.size() << " tensors, header "
              << h->header_len << " B, compact=" << compact << " canonical=" << canonical_order
              << " identical=" << (rewritten == original) << "\n";

    auto reparsed = wcodec::parse_safetensors_header(rewritten.data(), rewritten.size(),
                                                     rewritten.size() + h->data_len, "rewritten");
    ASSERT_TRUE(reparsed.ok()) << reparsed.status().ToString();
    ASSERT_EQ(reparsed->tensors.size(), h->tensors.size());
    for (size_t i = 0; i < h->tensors.size(); ++i) {
      EXPECT_EQ(reparsed->tensors[i].name, h->tensors[i].name);
      EXPECT_EQ(reparsed->tensors[i].dtype, h->tensors[i].dtype);
      EXPECT_EQ(reparsed->tensors[i].shape, h->tensors[i].shape);
      EXPECT_EQ(reparsed->tensors[i].begin, h->tensors[i].begin);
      EXPECT_EQ(reparsed->tensors[i].end, h->tensors[i].end);
    }
    EXPECT_EQ(reparsed->metadata, h->metadata);
  }
  std::cout << "  " << identical << "/" << files.size() << " headers reproduced byte for byte\n";
}

TEST(SafetensorsRealFiles, ReadErrorsNamePath) {
  auto missing = wcodec::read_safetensors_header_file("/nonexistent/dir/x.safetensors");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kIOError);
  EXPECT_NE(missing.status().message().find("/nonexistent/dir/x.safetensors"), std::string::npos);
  EXPECT_NE(missing.status().message().find(std::strerror(ENOENT)), std::string::npos)
      << missing.status().message();

  wctest::ScratchDir dir;
  auto d = wcodec::read_safetensors_header_file(dir.path().string());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kIOError);

  // A file truncated on disk is a format error, not an IO error.
  auto f = wcodec::build_safetensors({{"w", DType::kF32, {4}, std::vector<uint8_t>(16)}}, std::nullopt);
  ASSERT_TRUE(f.ok());
  f->resize(f->size() - 3);
  const auto p = dir / "trunc.safetensors";
  wctest::write_file(p, *f);
  auto t = wcodec::read_safetensors_header_file(p.string());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Code::kCorruption);
  EXPECT_NE(t.status().message().find(p.string()), std::string::npos);
  EXPECT_NE(t.status().message().find("truncated"), std::string::npos) << t.status().message();

  const auto tiny = dir / "tiny.safetensors";
  wctest::write_file(tiny, {1, 2, 3});
  auto s = wcodec::read_safetensors_header_file(tiny.string());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kCorruption);

  const auto huge = dir / "huge_len.safetensors";
  wctest::write_file(huge, make_file("{}", 0, uint64_t{1} << 62));
  auto hl = wcodec::read_safetensors_header_file(huge.string());
  ASSERT_FALSE(hl.ok());
  EXPECT_EQ(hl.status().code(), Code::kCorruption);
}

// The exact reads every reader of the codec uses (common/file_read.h): the
// bytes asked for, or an error naming the file and the offsets; a file
// that ends first is the caller's code (a reader of a .wcodec file calls
// it corruption), a directory is not a regular file.
TEST(FileRead, ExactReadsAndTheirErrors) {
  wctest::ScratchDir dir;
  std::vector<uint8_t> bytes(100);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(3 * i + 1);
  const auto p = dir / "hundred.bin";
  wctest::write_file(p, bytes);
  auto f = wcodec::ReadFile::open(p.string());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->size(), 100u);

  std::vector<uint8_t> got(50, 0);
  ASSERT_TRUE(wcodec::pread_exact(f->fd(), 10, 50, got.data(), p.string()).ok());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), bytes.begin() + 10));
  EXPECT_TRUE(wcodec::pread_exact(f->fd(), 100, 0, got.data(), p.string()).ok()) << "an empty read at the end";

  const wcodec::Status past = wcodec::pread_exact(f->fd(), 90, 20, got.data(), p.string());
  EXPECT_EQ(past.code(), Code::kIOError);
  EXPECT_NE(past.message().find(p.string()), std::string::npos) << past.message();
  EXPECT_NE(past.message().find("end of file at offset 100, 20 bytes wanted at 90"), std::string::npos)
      << past.message();
  EXPECT_EQ(wcodec::pread_exact(f->fd(), 90, 20, got.data(), "x", Code::kCorruption).code(), Code::kCorruption);
  const wcodec::Status far = wcodec::pread_exact(f->fd(), ~uint64_t{0} - 4, 8, got.data(), p.string());
  EXPECT_EQ(far.code(), Code::kIOError);
  EXPECT_NE(far.message().find("past the largest file offset"), std::string::npos) << far.message();
  // A length past the largest offset is refused before any read (60 is in
  // the file: a read would fill got's first 40 bytes, then find the end).
  const wcodec::Status huge = wcodec::pread_exact(f->fd(), 60, ~uint64_t{0}, got.data(), p.string());
  EXPECT_EQ(huge.code(), Code::kIOError);
  EXPECT_NE(huge.message().find("past the largest file offset"), std::string::npos) << huge.message();

  auto d = wcodec::ReadFile::open(dir.path().string());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("not a regular file"), std::string::npos) << d.status().message();
  auto m = wcodec::ReadFile::open((dir / "missing.bin").string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find(std::strerror(ENOENT)), std::string::npos) << m.status().message();

  // Moved: the descriptor goes with the object and closes once.
  wcodec::ReadFile moved = std::move(f).value();
  EXPECT_TRUE(wcodec::pread_exact(moved.fd(), 0, 1, got.data(), p.string()).ok());
  EXPECT_EQ(got[0], bytes[0]);
}

// ---------------------------------------------------------------- edge cases

TEST(SafetensorsEdgeCases, GeneratedCatalogue) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto cases = wctest::make_edge_cases();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t total = 0;
  std::set<std::string> names;
  std::set<DType> dtypes_seen;
  for (const auto& c : cases) {
    total += c.file.size();
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case name " << c.name;
    auto h = parse(c.file, c.name);
    ASSERT_TRUE(h.ok()) << c.name << ": " << h.status().ToString();
    for (const auto& t : h->tensors) dtypes_seen.insert(t.dtype);
  }
  std::cout << "  " << cases.size() << " edge cases, " << total << " bytes, generated in " << secs
            << " s\n";
  EXPECT_LT(total, 40u << 20);
  EXPECT_EQ(dtypes_seen.size(), 20u);
  for (const char* n : {"scalars_every_dtype", "zero_size_mixed", "zero_size_only", "row_vector_1xN",
                        "col_vector_Nx1", "odd_sizes", "large_metadata", "no_tensors", "all_zero",
                        "constant", "random_u8_1mib", "unicode_names", "many_tiny_tensors",
                        "packed_int4_nibbles", "packed_ternary", "model_like_int4"}) {
    EXPECT_TRUE(names.count(n)) << "missing edge case " << n;
  }
}

TEST(SafetensorsEdgeCases, ParseAndRoundTrip) {
  for (const auto& c : wctest::make_edge_cases()) {
    SCOPED_TRACE(c.name);
    auto h = parse(c.file, c.name);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    check_invariants(*h, c.file.size());
    const auto rewritten = wcodec::write_safetensors_header(*h);
    EXPECT_EQ(rewritten, header_bytes(c.file, *h));
    EXPECT_EQ((rewritten.size() - 8) % 8, 0u);
    std::vector<uint8_t> again = rewritten;
    again.insert(again.end(), c.file.begin() + static_cast<ptrdiff_t>(h->data_start), c.file.end());
    auto h2 = parse(again, c.name);
    ASSERT_TRUE(h2.ok()) << h2.status().ToString();
    EXPECT_EQ(h2->metadata, h->metadata);
    ASSERT_EQ(h2->tensors.size(), h->tensors.size());
    for (size_t i = 0; i < h->tensors.size(); ++i) {
      EXPECT_EQ(h2->tensors[i].name, h->tensors[i].name);
      EXPECT_EQ(h2->tensors[i].shape, h->tensors[i].shape);
      EXPECT_EQ(h2->tensors[i].dtype, h->tensors[i].dtype);
      EXPECT_EQ(h2->tensors[i].begin, h->tensors[i].begin);
    }
  }
}

TEST(SafetensorsEdgeCases, SpecificContents) {
  const auto cases = wctest::make_edge_cases();
  const auto find = [&](const std::string& n) -> const wctest::EdgeCase& {
    for (const auto& c : cases) {
      if (c.name == n) return c;
    }
    throw std::runtime_error("no edge case " + n);
  };
  {
    const auto& c = find("packed_ternary");
    auto h = parse(c.file);
    ASSERT_TRUE(h.ok());
    const auto& w = h->tensors[0];
    ASSERT_EQ(w.name, "w_packed");
    for (uint64_t i = w.begin; i < w.end; ++i) {
      const uint8_t b = c.file[h->data_start + i];
      for (int k = 0; k < 4; ++k) ASSERT_LE((b >> (2 * k)) & 3, 2) << "byte " << i;
    }
  }
  {
    auto h = parse(find("scalars_every_dtype").file);
    ASSERT_TRUE(h.ok());
    ASSERT_EQ(h->tensors.size(), 20u);
    for (const auto& t : h->tensors) {
      EXPECT_TRUE(t.shape.empty());
      EXPECT_EQ(t.numel(), 1u);
      EXPECT_EQ(t.nbytes(), (wcodec::dtype_bits(t.dtype) + 7) / 8);
    }
  }
  {
    auto h = parse(find("unicode_names").file);
    ASSERT_TRUE(h.ok());
    std::set<std::string> names;
    for (const auto& t : h->tensors) names.insert(t.name);
    EXPECT_TRUE(names.count("модель.вес"));
    EXPECT_TRUE(names.count("emoji_🙂_weight"));
    EXPECT_TRUE(names.count("quote\"back\\slash\ttab\nnl/sl"));
    EXPECT_TRUE(names.count(""));
  }
  {
    const auto& c = find("large_metadata");
    auto h = parse(c.file);
    ASSERT_TRUE(h.ok());
    ASSERT_TRUE(h->metadata.has_value());
    EXPECT_GT(h->header_len, 200'000u);
    EXPECT_EQ(h->metadata->at("unicode"), "Grüße, 世界 🙂");
  }
  {
    auto h = parse(find("no_tensors").file);
    ASSERT_TRUE(h.ok());
    EXPECT_TRUE(h->tensors.empty());
    EXPECT_EQ(h->data_len, 0u);
  }
  {
    auto h = parse(find("many_tiny_tensors").file);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(h->tensors.size(), 1000u);
  }
  {
    auto h = parse(wctest::make_named_model_like_file());
    ASSERT_TRUE(h.ok());
    std::set<std::string> names;
    for (const auto& t : h->tensors) names.insert(t.name);
    EXPECT_TRUE(names.count("layers.0.w_packed"));
    EXPECT_TRUE(names.count("layers.0.w_scale"));
    EXPECT_TRUE(names.count("layers.0.w_zero"));
  }
  EXPECT_EQ(wctest::make_edge_cases()[5].file, cases[5].file) << "generation is not deterministic";
}

// ---------------------------------------------------------------- valid oddities

TEST(SafetensorsParser, AcceptsWhitespaceAndPadding) {
  const std::string js =
      " \t\n{ \"a\" : { \"dtype\" : \"U8\", \"shape\" : [ 2 ], \"data_offsets\" : [ 0 , 2 ] } }\r\n   ";
  auto h = parse(make_file(js, 2));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->tensors.size(), 1u);
  EXPECT_EQ(h->data_len, 2u);
}

TEST(SafetensorsParser, AcceptsKeysInAnyOrderAndZeroSizeAtSharedOffsets) {
  const std::string js =
      R"({"b":{"data_offsets":[8,16],"shape":[2],"dtype":"F32"},)"
      R"("z2":{"dtype":"F16","shape":[3,0],"data_offsets":[8,8]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("z1":{"dtype":"I8","shape":[0],"data_offsets":[8,8]},)"
      R"("z0":{"dtype":"I8","shape":[0],"data_offsets":[0,0]},)"
      R"("__metadata__":{"x":"y"}})";
  auto h = parse(make_file(js, 16));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->tensors.size(), 5u);
  EXPECT_EQ(h->tensors[0].name, "z0");
  EXPECT_EQ(h->tensors[1].name, "a");
  EXPECT_EQ(h->tensors[2].name, "z2");
  EXPECT_EQ(h->tensors[3].name, "z1");
  EXPECT_EQ(h->tensors[4].name, "b");
  ASSERT_TRUE(h->metadata.has_value());
  EXPECT_EQ(h->metadata->at("x"), "y");
}

TEST(SafetensorsParser, EmptyObjectAndNullMetadata) {
  auto e = parse(make_file("{}", 0));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE(e->tensors.empty());
  // The reference deserializes __metadata__ into an Option, so null is "absent".
  auto n = parse(make_file(R"({"__metadata__":null})", 0));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_FALSE(n->metadata.has_value());
}

TEST(SafetensorsParser, ShortPrefixIsCallerError) {
  const auto f = make_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1);
  auto r = wcodec::parse_safetensors_header(f.data(), 20, f.size(), "p.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  auto r2 = wcodec::parse_safetensors_header(f.data(), f.size(), 4, "p.safetensors");
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.status().code(), Code::kInvalidArgument);
}

// ---------------------------------------------------------------- negative catalogue

struct BadCase {
  std::string name;
  std::vector<uint8_t> file;
  Code code;
  std::vector<std::string> needles;  // substrings the message must contain
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

std::string tensor_json(const std::string& name, const std::string& dtype, const std::string& shape,
                        const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":" + dtype + ",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

std::vector<BadCase> bad_cases() {
  const Code C = Code::kCorruption;
  const auto one = [](const std::string& dtype, const std::string& shape, const std::string& off) {
    std::string h = "{";
    h += tensor_json("a.weight", dtype, shape, off);
    h += '}';
    return h;
  };
  std::vector<BadCase> v;
  v.push_back({"FileShorterThan8", {1, 0, 0, 0, 0}, C, {"file size 5", "8-byte"}});
  v.push_back({"HeaderLengthOverLimit", make_file("{}", 0, 100'000'001), C,
               {"header length 100000001", "100000000"}});
  v.push_back({"HeaderLengthBeyondFile", make_file("{}", 0, 1000), C,
               {"header length 1000", "file size 10"}});
  v.push_back({"HeaderLengthHuge", make_file("{}", 0, ~uint64_t{0}), C,
               {"header length 18446744073709551615"}});
  v.push_back({"EmptyHeader", make_file("", 0), C, {"not valid JSON"}});
  v.push_back({"Utf8Overlong", make_file("{\"\xC0\xAF\":1}", 0), C,
               {"UTF-8", "overlong", "header byte 2", "0xC0"}});
  v.push_back({"Utf8Overlong3Byte", make_file("{\"\xE0\x80\xAF\":1}", 0), C, {"UTF-8", "overlong"}});
  v.push_back({"Utf8LoneContinuation", make_file("{\"\x80\":1}", 0), C,
               {"UTF-8", "lone continuation", "0x80"}});
  v.push_back({"Utf8Surrogate", make_file("{\"\xED\xA0\x80\":1}", 0), C, {"UTF-8", "surrogate"}});
  v.push_back({"Utf8AboveMax", make_file("{\"\xF4\x90\x80\x80\":1}", 0), C, {"UTF-8", "U+10FFFF"}});
  v.push_back({"Utf8Truncated", make_file("{\"a\":1}\xE4\xB8", 0), C, {"UTF-8", "truncated"}});
  v.push_back({"Utf8InvalidLead", make_file("{\"\xFF\":1}", 0), C, {"UTF-8", "0xFF"}});
  v.push_back({"ByteOrderMark", make_file("\xEF\xBB\xBF{}", 0), C, {"byte order mark"}});
  v.push_back({"EscapedLoneSurrogate", make_file(R"({"\ud800":1})", 0), C, {"not valid JSON"}});
  v.push_back({"NotJson", make_file("hello world", 0), C, {"not valid JSON"}});
  v.push_back({"TrailingGarbage", make_file("{} x", 0), C, {"not valid JSON"}});
  v.push_back({"UnterminatedObject", make_file(R"({"a":{"dtype":"U8")", 0), C, {"not valid JSON"}});
  v.push_back({"TopLevelArray", make_file("[1,2]", 0), C, {"not a JSON object", "array"}});
  v.push_back({"TopLevelString", make_file("\"x\"", 0), C, {"not a JSON object", "\"x\""}});
  v.push_back({"DuplicateTensorName",
               make_file("{" + tensor_json("a.weight", "\"U8\"", "[1]", "[0,1]") + "," +
                             tensor_json("a.weight", "\"U8\"", "[1]", "[1,2]") + "}",
                         2),
               C, {"duplicate", "\"a.weight\""}});
  v.push_back({"DuplicateMetadata",
               make_file(R"({"__metadata__":{},"__metadata__":{}})", 0), C,
               {"duplicate", "__metadata__"}});
  v.push_back({"DuplicateMetadataKey", make_file(R"({"__metadata__":{"k":"1","k":"2"}})", 0), C,
               {"__metadata__", "duplicate key \"k\""}});
  v.push_back({"MissingDtype",
               make_file(R"({"a.weight":{"shape":[1],"data_offsets":[0,1]}})", 1), C,
               {"tensor \"a.weight\"", "missing field dtype"}});
  v.push_back({"MissingShape",
               make_file(R"({"a.weight":{"dtype":"U8","data_offsets":[0,1]}})", 1), C,
               {"tensor \"a.weight\"", "missing field shape"}});
  v.push_back({"MissingDataOffsets", make_file(R"({"a.weight":{"dtype":"U8","shape":[1]}})", 1), C,
               {"tensor \"a.weight\"", "missing field data_offsets"}});
  v.push_back({"UnknownDtype", make_file(one("\"F17\"", "[1]", "[0,4]"), 4), C,
               {"tensor \"a.weight\" field dtype", "\"F17\"", "allowed: BOOL"}});
  v.push_back({"DtypeNotString", make_file(one("32", "[1]", "[0,4]"), 4), C,
               {"tensor \"a.weight\" field dtype", "32"}});
  v.push_back({"ShapeNegative", make_file(one("\"F32\"", "[2,-3]", "[0,24]"), 24), C,
               {"tensor \"a.weight\" field shape", "entry 1", "-3", "[0, 2^64-1]"}});
  v.push_back({"ShapeFloat", make_file(one("\"F32\"", "[2.5]", "[0,8]"), 8), C,
               {"tensor \"a.weight\" field shape", "2.5"}});
  v.push_back({"ShapeString", make_file(one("\"F32\"", "[\"4\"]", "[0,16]"), 16), C,
               {"tensor \"a.weight\" field shape", "\"4\""}});
  v.push_back({"ShapeNested", make_file(one("\"F32\"", "[[4]]", "[0,16]"), 16), C,
               {"tensor \"a.weight\" field shape", "array"}});
  v.push_back({"ShapeTooLargeInteger",
               make_file(one("\"F32\"", "[18446744073709551616]", "[0,16]"), 16), C,
               {"tensor \"a.weight\" field shape", "18446744073709551616"}});
  v.push_back({"ShapeNotArray", make_file(one("\"F32\"", "4", "[0,16]"), 16), C,
               {"tensor \"a.weight\" field shape", "not an array", "4"}});
  v.push_back({"OffsetsOneEntry", make_file(one("\"F32\"", "[1]", "[0]"), 4), C,
               {"tensor \"a.weight\" field data_offsets", "1 entry", "exactly 2"}});
  v.push_back({"OffsetsThreeEntries", make_file(one("\"F32\"", "[1]", "[0,4,8]"), 4), C,
               {"tensor \"a.weight\" field data_offsets", "more than 2", "8"}});
  v.push_back({"OffsetsNegative", make_file(one("\"F32\"", "[1]", "[-1,3]"), 4), C,
               {"tensor \"a.weight\" field data_offsets", "-1"}});
  v.push_back({"OffsetsNotArray", make_file(one("\"F32\"", "[1]", "\"0-4\""), 4), C,
               {"tensor \"a.weight\" field data_offsets", "\"0-4\""}});
  v.push_back({"BeginAfterEnd", make_file(one("\"F32\"", "[1]", "[8,4]"), 4), C,
               {"tensor \"a.weight\" field data_offsets", "begin 8 > end 4"}});
  v.push_back({"OverlappingTensors",
               make_file("{" + tensor_json("a.weight", "\"F32\"", "[2]", "[0,8]") + "," +
                             tensor_json("b.weight", "\"F32\"", "[2]", "[4,12]") + "}",
                         12),
               C, {"tensor \"b.weight\" field data_offsets", "begins at 4, expected 8", "overlaps"}});
  v.push_back({"HoleBetweenTensors",
               make_file("{" + tensor_json("a.weight", "\"F32\"", "[2]", "[0,8]") + "," +
                             tensor_json("b.weight", "\"F32\"", "[2]", "[12,20]") + "}",
                         20),
               C, {"tensor \"b.weight\" field data_offsets", "begins at 12, expected 8", "hole"}});
  v.push_back({"FirstNotAtZero", make_file(one("\"F32\"", "[2]", "[4,12]"), 12), C,
               {"tensor \"a.weight\" field data_offsets", "begins at 4, expected 0"}});
  v.push_back({"SizeMismatch", make_file(one("\"F32\"", "[2,3]", "[0,20]"), 20), C,
               {"tensor \"a.weight\" field data_offsets", "spans 20 bytes", "[2,3]", "F32",
                "needs 24"}});
  v.push_back({"SizeMismatchF4", make_file(one("\"F4\"", "[3]", "[0,1]"), 1), C,
               {"tensor \"a.weight\"", "needs 2"}});
  v.push_back({"ShapeProductOverflow",
               make_file(one("\"F32\"", "[1099511627776,1099511627776]", "[0,4]"), 4), C,
               {"tensor \"a.weight\" field shape", "[1099511627776,1099511627776]", "overflows"}});
  v.push_back({"ShapeBitsOverflow", make_file(one("\"F64\"", "[2305843009213693952]", "[0,8]"), 8),
               C, {"tensor \"a.weight\" field shape", "2305843009213693952", "overflows 64 bits"}});
  v.push_back({"FileLongerThanDeclared", make_file(one("\"F32\"", "[2]", "[0,8]"), 9), C,
               {"file size", "data length 8", "longer", "1 bytes"}});
  v.push_back({"FileTruncated", make_file(one("\"F32\"", "[2]", "[0,8]"), 5), C,
               {"file size", "data length 8", "truncated", "3 bytes"}});
  v.push_back({"NoTensorsButData", make_file("{}", 3), C, {"data length 0", "longer"}});
  v.push_back({"MetadataNonString", make_file(R"({"__metadata__":{"k":1}})", 0), C,
               {"__metadata__ key \"k\"", "non-string", "1"}});
  v.push_back({"MetadataNestedObject", make_file(R"({"__metadata__":{"k":{"x":"y"}}})", 0), C,
               {"__metadata__ key \"k\"", "non-string", "object"}});
  v.push_back({"MetadataNotObject", make_file(R"({"__metadata__":"pt"})", 0), C,
               {"__metadata__ is not an object", "\"pt\""}});
  v.push_back({"TensorNotObject", make_file(R"({"a.weight":5})", 0), C,
               {"tensor \"a.weight\" is not an object", "5"}});
  v.push_back({"TensorIsArray", make_file(R"({"a.weight":[0,4]})", 0), C,
               {"tensor \"a.weight\" is not an object", "array"}});
  v.push_back({"UnknownFieldInTensor",
               make_file(R"({"a.weight":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"foo":1}})", 1),
               C, {"tensor \"a.weight\"", "unknown field \"foo\""}});
  v.push_back({"DuplicateFieldInTensor",
               make_file(R"({"a.weight":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})",
                         1),
               C, {"tensor \"a.weight\"", "duplicate field \"dtype\""}});
  return v;
}

class SafetensorsBad : public ::testing::TestWithParam<BadCase> {};

TEST_P(SafetensorsBad, RejectedWithCodeAndMessage) {
  const BadCase& c = GetParam();
  auto r = parse(c.file, "bad.safetensors");
  ASSERT_FALSE(r.ok()) << c.name << " was accepted";
  EXPECT_EQ(r.status().code(), c.code) << r.status().ToString();
  const std::string& msg = r.status().message();
  EXPECT_EQ(msg.rfind("bad.safetensors: ", 0), 0u) << msg;
  for (const auto& n : c.needles) {
    EXPECT_NE(msg.find(n), std::string::npos) << "message lacks \"" << n << "\": " << msg;
  }
}

INSTANTIATE_TEST_SUITE_P(Catalogue, SafetensorsBad, ::testing::ValuesIn(bad_cases()),
                         [](const ::testing::TestParamInfo<BadCase>& i) { return i.param.name; });

// ---------------------------------------------------------------- robustness

TEST(SafetensorsRobustness, MutatedRealHeaderNeverCrashes) {
  const auto path = wctest::data_dir() / "stories260K.bf16.safetensors";
  const std::vector<uint8_t> orig = wctest::read_file(path);
  ASSERT_GT(orig.size(), 8u);
  auto base = parse(orig, path.string());
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  const size_t hdr_end = base->data_start;

  std::mt19937_64 rng(12345);
  const auto below = [&](uint64_t n) { return n ? rng() % n : 0; };
  static const char kTokens[] = "{}[]\",:-.0123456789eE \\u";
  std::vector<uint8_t> buf = orig;
  int ok = 0, rejected = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    size_t len = buf.size();
    std::vector<size_t> touched;
    switch (below(5)) {
      case 0:  // flip random bits in the header
        for (uint64_t k = 0, n = 1 + below(4); k < n; ++k) {
          const size_t pos = below(hdr_end);
          buf[pos] ^= static_cast<uint8_t>(1u << below(8));
          touched.push_back(pos);
        }
        break;
      case 1:  // truncate anywhere, mostly inside the header
        len = below(4) == 0 ? below(orig.size() + 1) : below(hdr_end + 1);
        break;
      case 2:  // replace a header byte by a JSON token character
        for (uint64_t k = 0, n = 1 + below(3); k < n; ++k) {
          const size_t pos = 8 + below(hdr_end - 8);
          buf[pos] = static_cast<uint8_t>(kTokens[below(sizeof(kTokens) - 1)]);
          touched.push_back(pos);
        }
        break;
      case 3: {  // change a digit (offsets and shapes)
        for (int tries = 0; tries < 50; ++tries) {
          const size_t pos = 8 + below(hdr_end - 8);
          if (buf[pos] >= '0' && buf[pos] <= '9') {
            buf[pos] = static_cast<uint8_t>('0' + below(10));
            touched.push_back(pos);
            break;
          }
        }
        break;
      }
      default:  // corrupt the length field
        for (uint64_t k = 0, n = 1 + below(2); k < n; ++k) {
          const size_t pos = below(8);
          buf[pos] = static_cast<uint8_t>(rng());
          touched.push_back(pos);
        }
        break;
    }
    auto r = wcodec::parse_safetensors_header(buf.data(), len, len, "fuzz");
    if (r.ok()) {
      ++ok;
      check_invariants(*r, len);
      (void)wcodec::write_safetensors_header(*r);
    } else {
      ++rejected;
      EXPECT_FALSE(r.status().message().empty());
      EXPECT_NE(r.status().code(), Code::kInternal) << r.status().ToString();
    }
    for (size_t p : touched) buf[p] = orig[p];
  }
  std::cout << "  mutations accepted: " << ok << ", rejected: " << rejected << "\n";
  EXPECT_GT(rejected, 0);
  EXPECT_EQ(buf, orig);
}

}  // namespace
