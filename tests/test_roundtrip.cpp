// tests/test_roundtrip.cpp — lossless round trips through the .wcodec
// container: every real model file in ../shared/data (full reads, decode to
// file, verify, size against zstd -19, random-access reads around chunk,
// tensor and header boundaries), every generated edge case (default and
// 4 KiB chunks), concurrent reads from one Reader, the size bound on
// incompressible data and encoder determinism.
//
// Runtime: the two largest real files are encoded once, in a shared fixture
// (LargeRealFiles::SetUpTestSuite); every other real file is its own
// parameterized test, so under ctest (one process per test) no file is
// encoded more than once. Sanitizer builds only use real files below 2 MB.
// Thread-safety: single-threaded test code except the concurrency test.
#include <gtest/gtest.h>
#include <malloc.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <future>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "edge_cases.h"
#include "sanitizer.h"
#include "testutil.h"
#include "wcodec/container.h"
#include "wcodec/safetensors.h"


namespace {

namespace fs = std::filesystem;
using wcodec::Code;
using wcodec::EncodeConfig;
using wcodec::EncodeReport;
using wcodec::Reader;

constexpr bool kAsan = wcodec::kAddressSanitizer;
constexpr uint64_t kAsanMaxFile = 2u << 20;
// The two largest real files, encoded once in LargeRealFiles.
const char* const kLargeFiles[] = {"isnet-medium.f16.safetensors", "isnet-medium.rtn-int8.safetensors"};

bool is_large_file(const fs::path& p) {
  for (const char* n : kLargeFiles)
    if (p.filename() == n) return true;
  return false;
}

// Real files this build tests (all, or those below 2 MB under ASan).
std::vector<fs::path> real_files() {
  std::vector<fs::path> out;
  for (auto& p : wctest::data_safetensors_files()) {
    std::error_code ec;
    const auto sz = fs::file_size(p, ec);
    if (ec) continue;
    if (kAsan && sz >= kAsanMaxFile) continue;
    out.push_back(p);
  }
  return out;
}

std::vector<fs::path> regular_real_files() {
  std::vector<fs::path> out;
  for (auto& p : real_files())
    if (!is_large_file(p)) out.push_back(p);
  return out;
}

std::string sanitize(const std::string& s) {
  std::string o;
  for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return o;
}

EncodeConfig default_config() {
  EncodeConfig cfg;
  cfg.threads = 2;
  return cfg;
}

// A process-wide scratch directory for encoded files.
const fs::path& scratch() {
  static wctest::ScratchDir dir;  // removed at exit
  return dir.path();
}

uint64_t zstd19_size(const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out(ZSTD_compressBound(data.size()));
  const size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), 19);
  if (ZSTD_isError(n)) {
    ADD_FAILURE() << "ZSTD_compress: " << ZSTD_getErrorName(n);
    return 0;
  }
  return n;
}

struct EncodedFile {
  std::string name;
  std::vector<uint8_t> orig;
  std::vector<uint8_t> enc;
  fs::path enc_path;
  EncodeReport report;
  uint64_t zstd19 = 0;
};

// Reads `p` and starts zstd -19 of it on another thread.
std::shared_ptr<EncodedFile> load_real(const fs::path& p, std::future<uint64_t>* zstd) {
  auto e = std::make_shared<EncodedFile>();
  e->name = p.filename().string();
  e->orig = wctest::read_file(p);
  if (e->orig.empty()) return nullptr;
  *zstd = std::async(std::launch::async, [e] { return zstd19_size(e->orig); });
  return e;
}

// Encodes a loaded file and writes it to the scratch directory.
bool encode_loaded(EncodedFile* e) {
  auto r = wcodec::encode_safetensors(e->orig.data(), e->orig.size(), default_config(), e->name, &e->report);
  if (!r.ok()) {
    ADD_FAILURE() << "encode " << e->name << ": " << r.status().ToString();
    return false;
  }
  e->enc = std::move(r).value();
  e->enc_path = scratch() / (e->name + ".wcodec");
  wctest::write_file(e->enc_path, e->enc);
  return true;
}

// Encodes `p` while zstd -19 of it runs on a second thread. Failures are
// reported with ADD_FAILURE; returns nullptr then.
std::shared_ptr<EncodedFile> encode_real(const fs::path& p) {
  std::future<uint64_t> z;
  auto e = load_real(p, &z);
  if (!e) return nullptr;
  const bool ok = encode_loaded(e.get());
  e->zstd19 = z.get();
  return ok ? e : nullptr;
}

std::string hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

::testing::AssertionResult same_bytes(const uint8_t* got, const uint8_t* want, uint64_t n) {
  if (n == 0 || std::memcmp(got, want, n) == 0) return ::testing::AssertionSuccess();
  uint64_t i = 0;
  while (i < n && got[i] == want[i]) ++i;
  return ::testing::AssertionFailure() << "first difference at +" << i << " of " << n << " (got "
                                       << int(got[i]) << ", want " << int(want[i]) << ")";
}

// Writes the encoding `enc` of `original` under `name` in the scratch
// directory, reads the whole file back through a Reader and compares;
// with `full`, also verify(true). The file is removed afterwards.
void expect_reads_back(const std::vector<uint8_t>& enc, const std::vector<uint8_t>& original, const std::string& name,
                       bool full) {
  const fs::path p = scratch() / (name + ".wcodec");
  wctest::write_file(p, enc);
  auto r = Reader::open(p.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<uint8_t> all(original.size());
  const auto st = (*r)->read(0, all.size(), all.data());
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(same_bytes(all.data(), original.data(), all.size()));
  if (full) {
    EXPECT_TRUE((*r)->verify(true).ok());
  }
  fs::remove(p);
}

// Structural checks of the chunk table against the safetensors header.
void check_chunk_table(const Reader& rd, const std::vector<uint8_t>& orig) {
  auto h = wcodec::parse_safetensors_header(orig.data(), orig.size(), orig.size(), "orig");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(rd.data_start(), h->data_start);
  ASSERT_EQ(rd.num_tensors(), h->tensors.size());
  uint64_t pos = rd.data_start();
  for (size_t i = 0; i < rd.num_chunks(); ++i) {
    const auto& c = rd.chunk(i);
    ASSERT_EQ(c.decoded_offset, pos) << "chunk " << i << " is not contiguous with the previous one";
    ASSERT_GT(c.decoded_size, 0u) << "chunk " << i;
    ASSERT_LE(c.method, 3) << "chunk " << i;
    // A zstd group's chunk (format 2.11) lies inside its group's bytes.
    if (c.method == 3) ASSERT_LE(uint64_t{c.group_offset} + c.decoded_size, c.group_size) << "chunk " << i;
    else ASSERT_EQ(c.group_size, 0u) << "chunk " << i;
    ASSERT_EQ(rd.chunk_at(c.decoded_offset), i);
    ASSERT_EQ(rd.chunk_at(c.decoded_offset + c.decoded_size - 1), i);
    pos += c.decoded_size;
  }
  EXPECT_EQ(pos, orig.size()) << "chunks do not cover the data region";
  if (rd.data_start() > 0) {
    EXPECT_EQ(rd.chunk_at(rd.data_start() - 1), SIZE_MAX);
  }
  EXPECT_EQ(rd.chunk_at(0), SIZE_MAX);
  uint64_t chunks = 0;
  for (size_t i = 0; i < rd.num_tensors(); ++i) {
    const auto s = rd.tensor_summary(i);
    EXPECT_EQ(s.name, h->tensors[i].name);
    EXPECT_EQ(s.dtype, h->tensors[i].dtype);
    EXPECT_EQ(s.shape, h->tensors[i].shape);
    EXPECT_EQ(s.original_bytes, h->tensors[i].nbytes());
    EXPECT_EQ(s.chunks, s.chunks_model + s.chunks_zstd + s.chunks_raw) << s.name;
    chunks += s.chunks;
  }
  EXPECT_EQ(chunks, rd.num_chunks());
}

// `count` random (offset, length) reads including boundary cases; every
// result is compared with `orig`.
void check_random_reads(const Reader& rd, const std::vector<uint8_t>& orig, int count, uint64_t seed) {
  const uint64_t size = orig.size();
  ASSERT_GT(size, 0u);
  std::mt19937_64 rng(seed);
  auto below = [&](uint64_t n) { return n ? rng() % n : 0; };
  // Interesting offsets: header/data boundary, chunk and tensor boundaries.
  std::vector<uint64_t> marks = {0, 1, rd.data_start(), size - 1, size};
  for (size_t i = 0; i < rd.num_chunks(); ++i) {
    marks.push_back(rd.chunk(i).decoded_offset);
    marks.push_back(rd.chunk(i).decoded_offset + rd.chunk(i).decoded_size);
  }
  for (const auto& t : rd.header().tensors) {
    marks.push_back(rd.data_start() + t.begin);
    marks.push_back(rd.data_start() + t.end);
  }
  uint64_t max_chunk = 1;
  for (size_t i = 0; i < rd.num_chunks(); ++i) max_chunk = std::max<uint64_t>(max_chunk, rd.chunk(i).decoded_size);

  std::vector<std::pair<uint64_t, uint64_t>> reads;
  // Fixed cases: empty reads, the last byte, the header/data boundary, a read
  // exactly equal to a chunk, straddling the first chunk boundaries.
  reads.push_back({0, 0});
  reads.push_back({size, 0});
  reads.push_back({size / 2, 0});
  reads.push_back({size - 1, 1});
  reads.push_back({0, 1});
  if (rd.data_start() >= 3 && rd.data_start() + 3 <= size) reads.push_back({rd.data_start() - 3, 6});
  if (rd.data_start() < size) reads.push_back({rd.data_start(), 1});
  reads.push_back({rd.data_start() - 1, std::min<uint64_t>(2, size - rd.data_start() + 1)});
  for (size_t i = 0; i < std::min<size_t>(rd.num_chunks(), 8); ++i) {
    const auto& c = rd.chunk(i);
    reads.push_back({c.decoded_offset, c.decoded_size});  // whole chunk
    const uint64_t b = c.decoded_offset + c.decoded_size;
    if (b + 1 <= size) reads.push_back({b - 1, 2});  // straddles into the next chunk
  }
  if (rd.num_chunks() >= 3) {  // spans several whole chunks
    const auto& a = rd.chunk(0);
    const auto& c = rd.chunk(2);
    reads.push_back({a.decoded_offset + a.decoded_size / 2, c.decoded_offset + 1 - a.decoded_offset - a.decoded_size / 2});
  }
  while (static_cast<int>(reads.size()) < count) {
    uint64_t off;
    const uint64_t kind = below(10);
    if (kind < 6) {
      const uint64_t m = marks[below(marks.size())];
      const int64_t d = static_cast<int64_t>(below(129)) - 64;
      off = static_cast<uint64_t>(std::clamp<int64_t>(static_cast<int64_t>(m) + d, 0, static_cast<int64_t>(size)));
    } else {
      off = below(size + 1);
    }
    uint64_t len;
    const uint64_t lk = below(8);
    if (lk == 0) len = 0;
    else if (lk <= 3) len = 1 + below(64);
    else if (lk <= 5) len = 1 + below(8192);
    else len = 1 + below(2 * max_chunk + 1);
    len = std::min(len, size - off);
    reads.push_back({off, len});
  }
  std::vector<uint8_t> buf;
  for (auto [off, len] : reads) {
    buf.assign(len + 16, 0xA5);
    const auto st = rd.read(off, len, buf.data());
    ASSERT_TRUE(st.ok()) << "read(" << off << ", " << len << "): " << st.ToString();
    ASSERT_TRUE(same_bytes(buf.data(), orig.data() + off, len)) << "read(" << off << ", " << len << ")";
    for (size_t k = len; k < buf.size(); ++k) ASSERT_EQ(buf[k], 0xA5) << "read(" << off << ", " << len << ") wrote past the end";
  }
}

void check_out_of_range(const Reader& rd) {
  const uint64_t size = rd.original_size();
  std::vector<uint8_t> buf(64);
  const std::pair<uint64_t, uint64_t> bad[] = {
      {size, 1}, {size - 1, 2}, {size + 1, 0}, {0, size + 1}, {size + 1000, 5}, {1, UINT64_MAX}, {UINT64_MAX, 1},
      {UINT64_MAX, 0}};
  for (auto [off, len] : bad) {
    std::vector<uint8_t> big(len <= size + 1 ? len : 0);
    const auto st = rd.read(off, len, len <= 64 ? buf.data() : big.data());
    EXPECT_FALSE(st.ok()) << "read(" << off << ", " << len << ") past the end succeeded";
    EXPECT_EQ(st.code(), Code::kOutOfRange) << "read(" << off << ", " << len << "): " << st.ToString();
  }
}

// Every check of one real file.
void check_real_file(const EncodedFile& e) {
  SCOPED_TRACE(e.name);
  const uint64_t size = e.orig.size();
  EXPECT_EQ(e.report.original_size, size);
  EXPECT_EQ(e.report.encoded_size, e.enc.size());
  EXPECT_LT(e.enc.size(), size) << e.name << ": the encoded file is not smaller than the original";
  EXPECT_LT(e.enc.size(), e.zstd19) << e.name << ": wcodec " << e.enc.size() << " bytes vs zstd -19 " << e.zstd19
                                    << " bytes of the whole file (original " << size << ")";

  auto r = Reader::open(e.enc_path.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Reader& rd = **r;
  EXPECT_EQ(rd.original_size(), size);
  EXPECT_EQ(rd.file_size(), e.enc.size());
  const std::string want_sha = wctest::sha256_hex(e.orig);
  EXPECT_EQ(hex(rd.original_sha256().data(), 32), want_sha) << "stored SHA-256 of the original";
  check_chunk_table(rd, e.orig);

  {  // Full read.
    std::vector<uint8_t> all(size);
    const auto st = rd.read(0, size, all.data());
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(wctest::sha256_hex(all), want_sha);
  }
  {  // Decode to file.
    const fs::path out = scratch() / (e.name + ".decoded");
    const auto st = rd.decode_to_file(out.string());
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(fs::file_size(out), size);
    EXPECT_EQ(wctest::sha256_hex(wctest::read_file(out)), want_sha);
    fs::remove(out);
  }
  {
    const auto st = rd.verify(false);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  {
    const auto st = rd.verify(true);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  {  // A few chunks through decode_chunk directly.
    std::vector<uint8_t> buf;
    for (size_t i = 0; i < rd.num_chunks(); i += std::max<size_t>(1, rd.num_chunks() / 7)) {
      const auto& c = rd.chunk(i);
      buf.assign(c.decoded_size, 0);
      const auto st = rd.decode_chunk(i, buf.data());
      ASSERT_TRUE(st.ok()) << "chunk " << i << ": " << st.ToString();
      ASSERT_TRUE(same_bytes(buf.data(), e.orig.data() + c.decoded_offset, c.decoded_size)) << "chunk " << i;
    }
    std::vector<uint8_t> one(1);
    EXPECT_EQ(rd.decode_chunk(rd.num_chunks(), one.data()).code(), Code::kOutOfRange);
  }
  check_random_reads(rd, e.orig, 300, std::hash<std::string>{}(e.name) ^ 0x5eedULL);
  check_out_of_range(rd);
}

// 8 threads read random ranges (a third of them straddling a chunk
// boundary, lengths up to `max_len`) from one Reader at once, with an
// occasional verify(false) in between; every result is checked.
void concurrent_reads(const Reader& rd, const std::vector<uint8_t>& orig, uint64_t max_len, int per_thread) {
  constexpr int kThreads = 8;
  std::atomic<int> bad{0};
  std::atomic<int> reads{0};
  std::mutex mu;
  std::string first_error;
  std::latch start(kThreads);
  std::vector<std::thread> th;
  for (int t = 0; t < kThreads; ++t) {
    th.emplace_back([&, t] {
      std::mt19937_64 rng(4242 + t);
      std::vector<uint8_t> buf;
      start.arrive_and_wait();
      for (int k = 0; k < per_thread; ++k) {
        uint64_t off = rng() % orig.size();
        if (k % 3 == 0 && rd.num_chunks()) {  // straddle a chunk boundary
          const auto& c = rd.chunk(rng() % rd.num_chunks());
          off = std::max<uint64_t>(c.decoded_offset, 5) - 5;
        }
        const uint64_t len = std::min<uint64_t>(1 + rng() % (k % 2 ? 64 : max_len), orig.size() - off);
        buf.assign(len, 0);
        const auto st = rd.read(off, len, buf.data());
        reads.fetch_add(1);
        if (!st.ok() || std::memcmp(buf.data(), orig.data() + off, len) != 0) {
          std::lock_guard<std::mutex> lk(mu);
          if (first_error.empty())
            first_error = "read(" + std::to_string(off) + ", " + std::to_string(len) + "): " +
                          (st.ok() ? std::string("wrong bytes") : st.ToString());
          ++bad;
        }
        if (k % 50 == 49) {  // verify concurrently with reads
          const auto v = rd.verify(false);
          if (!v.ok()) {
            std::lock_guard<std::mutex> lk(mu);
            if (first_error.empty()) first_error = "verify: " + v.ToString();
            ++bad;
          }
        }
      }
    });
  }
  for (auto& x : th) x.join();
  EXPECT_EQ(reads.load(), kThreads * per_thread);
  EXPECT_EQ(bad.load(), 0) << first_error;
}


// ------------------------------------------------------------ real files

TEST(RealFiles, DataDirectoryHasTheModelFiles) {
  const auto all = wctest::data_safetensors_files();
  ASSERT_GE(all.size(), 10u) << "expected the real model files in " << wctest::data_dir();
  bool small = false;
  for (auto& p : all) small |= p.filename() == "stories260K.bf16.safetensors";
  EXPECT_TRUE(small);
  EXPECT_FALSE(real_files().empty());
}

class LargeRealFiles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    files_ = new std::vector<std::shared_ptr<EncodedFile>>();
    if (kAsan) return;
    // zstd -19 of both files runs in the background while they are encoded
    // one after the other.
    std::vector<std::pair<std::shared_ptr<EncodedFile>, std::future<uint64_t>>> jobs;
    for (const char* n : kLargeFiles) {
      const fs::path p = wctest::data_dir() / n;
      if (!fs::exists(p)) {
        ADD_FAILURE() << "missing " << p;
        continue;
      }
      std::future<uint64_t> z;
      auto e = load_real(p, &z);
      if (e) jobs.emplace_back(std::move(e), std::move(z));
    }
    for (auto& [e, z] : jobs) {
      const bool ok = encode_loaded(e.get());
      e->zstd19 = z.get();
      if (ok) files_->push_back(e);
    }
  }
  static void TearDownTestSuite() {
    for (auto& e : *files_) fs::remove(e->enc_path);
    delete files_;
    files_ = nullptr;
  }
  static std::vector<std::shared_ptr<EncodedFile>>* files_;
};
std::vector<std::shared_ptr<EncodedFile>>* LargeRealFiles::files_ = nullptr;

// One test for both files (under ctest every test is its own process, and
// each would run SetUpTestSuite again). Includes 8 threads reading the
// largest file concurrently.
TEST_F(LargeRealFiles, RoundTripVerifyRandomAccessConcurrentReads) {
  if (kAsan) GTEST_SKIP() << "real files of 2 MB and more are not used under AddressSanitizer";
  ASSERT_EQ(files_->size(), std::size(kLargeFiles));
  for (auto& e : *files_) check_real_file(*e);
  const EncodedFile& e = *files_->front();
  auto r = Reader::open(e.enc_path.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  concurrent_reads(**r, e.orig, 600 * 1024, 60);
}

class RealFileRoundTrip : public ::testing::TestWithParam<fs::path> {};

TEST_P(RealFileRoundTrip, RoundTripVerifyRandomAccess) {
  auto e = encode_real(GetParam());
  ASSERT_TRUE(e);
  check_real_file(*e);
  fs::remove(e->enc_path);
}

INSTANTIATE_TEST_SUITE_P(Data, RealFileRoundTrip, ::testing::ValuesIn(regular_real_files()),
                         [](const ::testing::TestParamInfo<fs::path>& i) {
                           return sanitize(i.param.stem().string());
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RealFileRoundTrip);

// A container held in memory (Reader::open_memory) reads exactly like the
// same container on disk: whole file, random ranges, every chunk, full
// verification; a truncated buffer is rejected at open and a damaged
// chunk fails its reads and the file checksum.
TEST(InMemory, ReaderOverMemoryMatchesTheFileReader) {
  const char* names[] = {"silero_vad_16k.bf16.safetensors", "stories260K.rtn-int8.safetensors",
                         "stories260K.rtn-int4.safetensors"};
  int all_groups = 0;
  for (const char* n : names) {
    SCOPED_TRACE(n);
    auto e = encode_real(wctest::data_dir() / n);
    ASSERT_TRUE(e);
    auto rf = Reader::open(e->enc_path.string());
    auto rm = Reader::open_memory(e->enc.data(), e->enc.size(), e->name);
    ASSERT_TRUE(rf.ok()) << rf.status().ToString();
    ASSERT_TRUE(rm.ok()) << rm.status().ToString();
    const Reader& f = **rf;
    const Reader& m = **rm;
    ASSERT_EQ(m.original_size(), e->orig.size());
    ASSERT_EQ(m.num_chunks(), f.num_chunks());
    std::vector<uint8_t> all(e->orig.size());
    ASSERT_TRUE(m.read(0, all.size(), all.data()).ok());
    EXPECT_TRUE(all == e->orig) << "whole-file read from memory differs from the original";
    std::mt19937_64 rng(7);
    for (int i = 0; i < 300; ++i) {
      const uint64_t off = rng() % e->orig.size();
      const uint64_t len = 1 + rng() % std::min<uint64_t>(e->orig.size() - off, 200000);
      std::vector<uint8_t> got(len);
      const auto st = m.read(off, len, got.data());
      ASSERT_TRUE(st.ok()) << "read(" << off << ", " << len << "): " << st.ToString();
      ASSERT_TRUE(std::equal(got.begin(), got.end(), e->orig.begin() + static_cast<ptrdiff_t>(off)))
          << "read(" << off << ", " << len << ") from memory differs";
    }
    for (size_t i = 0; i < m.num_chunks(); ++i) {
      const auto& c = m.chunk(i);
      std::vector<uint8_t> a(c.decoded_size), b(c.decoded_size);
      ASSERT_TRUE(m.decode_chunk(i, a.data()).ok());
      ASSERT_TRUE(f.decode_chunk(i, b.data()).ok());
      ASSERT_TRUE(a == b) << "chunk " << i;
    }
    // Groups decoded together, in place.
    int groups = 0;
    for (size_t i = 0; i + 1 < m.num_chunks(); ++i) {
      if (!m.pairable(i, i + 1)) continue;
      const size_t idx[2] = {i, i + 1};
      std::vector<uint8_t> a(m.chunk(i).decoded_size), b(m.chunk(i + 1).decoded_size);
      uint8_t* outs[2] = {a.data(), b.data()};
      wcodec::Status sts[2];
      m.decode_chunk_group(idx, outs, 2, sts);
      ASSERT_TRUE(sts[0].ok() && sts[1].ok()) << sts[0].ToString() << " " << sts[1].ToString();
      const auto at = [&](size_t c) {
        return e->orig.begin() + static_cast<ptrdiff_t>(m.chunk(c).decoded_offset);
      };
      ASSERT_TRUE(std::equal(a.begin(), a.end(), at(i)) && std::equal(b.begin(), b.end(), at(i + 1)))
          << "group " << i;
      ++groups;
    }
    all_groups += groups;
    EXPECT_TRUE(m.verify(true).ok());
    check_out_of_range(m);

    auto cut = Reader::open_memory(e->enc.data(), e->enc.size() - 1, e->name);
    ASSERT_FALSE(cut.ok()) << "a buffer one byte short opened";
    EXPECT_EQ(cut.status().code(), Code::kCorruption) << cut.status().ToString();

    // A byte flipped in the middle of the largest model-coded chunk.
    size_t big = SIZE_MAX;
    for (size_t i = 0; i < m.num_chunks(); ++i)
      if (m.chunk(i).method == 2 && (big == SIZE_MAX || m.chunk(i).stored_size > m.chunk(big).stored_size)) big = i;
    ASSERT_NE(big, SIZE_MAX);
    std::vector<uint8_t> bad = e->enc;
    const auto& c = m.chunk(big);
    bad[c.file_offset + c.stored_size / 2] ^= 0x40;
    auto rb = Reader::open_memory(bad.data(), bad.size(), e->name);
    ASSERT_TRUE(rb.ok()) << rb.status().ToString();
    std::vector<uint8_t> out(c.decoded_size);
    EXPECT_FALSE((*rb)->read(c.decoded_offset, c.decoded_size, out.data()).ok())
        << "a damaged chunk read from memory without an error";
    EXPECT_FALSE((*rb)->verify(false).ok()) << "the file checksum missed a damaged byte";
    fs::remove(e->enc_path);
  }
  EXPECT_GT(all_groups, 0) << "no pairable chunks were decoded as a group";
}

// Format 1.x files (gamma-coded frequency tables) stay readable: every small
// real file written as 1.0 decodes byte for byte, and its 2.0 encoding (the
// compact tables) is never larger, tables of the same precision compared
// (x8_tables off in both: the default 9-bit tables trade up to 1% of a
// tensor's bits for decode speed, checked against that bound).
TEST(RealFiles, Format1FilesDecodeAndFormat2IsNeverLarger) {
  wctest::ScratchDir dir;
  size_t n = 0;
  for (const auto& p : regular_real_files()) {
    if (fs::file_size(p) > (2u << 20)) continue;
    const auto orig = wctest::read_file(p);
    EncodeConfig v1, v2;
    v1.format_major = 1;
    v1.x8_tables = v2.x8_tables = false;
    auto e1 = wcodec::encode_safetensors(orig.data(), orig.size(), v1, p.string());
    auto e2 = wcodec::encode_safetensors(orig.data(), orig.size(), v2, p.string());
    auto e2d = wcodec::encode_safetensors(orig.data(), orig.size(), EncodeConfig{}, p.string());
    ASSERT_TRUE(e1.ok() && e2.ok() && e2d.ok()) << p;
    EXPECT_EQ((*e1)[4], 1) << p;
    EXPECT_EQ((*e2)[4], wcodec::kVersionMajor) << p;
    EXPECT_LE(e2->size(), e1->size()) << p;
    EXPECT_LE(static_cast<double>(e2d->size()), static_cast<double>(e2->size()) * 1.01) << p;
    const auto path = dir / (p.stem().string() + ".v1.wcodec");
    wctest::write_file(path, *e1);
    auto r = Reader::open(path.string());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::vector<uint8_t> back((*r)->original_size());
    ASSERT_TRUE((*r)->read(0, back.size(), back.data()).ok()) << p;
    EXPECT_EQ(wctest::sha256_hex(back), wctest::sha256_hex(orig)) << p;
    ++n;
  }
  EXPECT_GE(n, 5u);
  EncodeConfig bad;
  bad.format_major = 3;
  const auto orig = wctest::read_file(wctest::data_dir() / "stories260K.bf16.safetensors");
  auto e = wcodec::encode_safetensors(orig.data(), orig.size(), bad, "x");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("format version 3"), std::string::npos) << e.status().ToString();
}

// The minor version is the lowest the file's models need: 2.3 when a float
// model codes joint symbols (F16 weights), 2.2 when a model uses the kernel
// contexts (the conv-heavy ternary checkpoint: most of its tensors, and its
// ratio target), 2.1 when one uses the column-phase contexts and none the
// kernel contexts (5x5 kernels whose rows of 1000 codes are no multiple of
// 9), x.0 for the ternary and F16 files written for format 1 and for a file
// whose models need none of these; in the header and in the metadata, and
// all decode.
TEST(RealFiles, MinorVersionIsTheLowestTheModelsNeed) {
  wctest::ScratchDir dir;
  const auto tern = wctest::read_file(wctest::data_dir() / "isnet-medium.rtn-ternary.safetensors");
  const auto other = wctest::read_file(wctest::data_dir() / "stories260K.rtn-int8.safetensors");
  // Ternary codes whose distribution depends on the position in a 5x5
  // kernel: phases 0..7 mostly +1, 8..15 mostly -1, the rest mostly 0.
  std::mt19937 rng(11);
  const uint64_t rows = 64, cols = 1000;
  std::vector<uint8_t> packed(rows * cols / 4, 0);
  for (uint64_t i = 0; i < rows * cols; ++i) {
    const uint64_t ph = (i % cols) % 25;
    const uint32_t likely = ph < 8 ? 1u : (ph < 16 ? 2u : 0u);
    const uint32_t code = rng() % 8 ? likely : rng() % 3;
    packed[i / 4] |= static_cast<uint8_t>(code << (2 * (i % 4)));
  }
  auto phased = wcodec::build_safetensors({{"conv5x5_packed", wcodec::DType::kU8, {rows, cols / 4}, packed}}, std::nullopt);
  ASSERT_TRUE(phased.ok()) << phased.status().ToString();
  // 1 MiB of real F16 weights (the start of isnet-medium's largest tensor).
  std::vector<uint8_t> half;
  {
    std::vector<uint8_t> w = wctest::largest_isnet_f16_tensor();
    ASSERT_GE(w.size(), 1u << 20);
    w.resize(1u << 20);
    auto b = wcodec::build_safetensors({{"w", wcodec::DType::kF16, {512, 1024}, std::move(w)}}, std::nullopt);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    half = std::move(*b);
  }
  // The models' versions with zstd groups (2.11) off; the real ternary
  // file's small tensors take groups by default.
  EncodeConfig plain;
  plain.zstd_groups = false;
  EncodeConfig v1;
  v1.format_major = 1;
  EncodeConfig per_code = plain;  // kernel-row symbols (2.10) off: the kernel contexts of 2.2
  per_code.kernel_rows = false;
  struct Case {
    const char* name;
    const std::vector<uint8_t>* orig;
    EncodeConfig cfg;
    int major, minor;
  } cases[] = {{"tern", &tern, plain, 2, 10},         {"tern_per_code", &tern, per_code, 2, 2},
               {"tern_groups", &tern, EncodeConfig{}, 2, 11},
               {"phase25", &*phased, plain, 2, 1},
               {"tern_v1", &tern, v1, 1, 0},           {"int8", &other, plain, 2, 0},
               {"f16", &half, plain, 2, 3},           {"f16_v1", &half, v1, 1, 0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto e = wcodec::encode_safetensors(c.orig->data(), c.orig->size(), c.cfg, c.name);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_EQ((*e)[4] | ((*e)[5] << 8), c.major);
    EXPECT_EQ((*e)[6] | ((*e)[7] << 8), c.minor);
    const std::string meta(reinterpret_cast<const char*>(e->data()) + 128, 200);
    EXPECT_NE(meta.find("\"version\":\"" + std::to_string(c.major) + "." + std::to_string(c.minor) + "\""),
              std::string::npos)
        << meta;
    if (c.minor == 2 || c.minor == 10 || c.minor == 11) {
      EXPECT_LE(static_cast<double>(e->size()) / static_cast<double>(c.orig->size()), 0.70)
          << "ternary ratio target (0.7143 before the column-phase contexts)";
    }
    const auto path = dir / (std::string(c.name) + ".wcodec");
    wctest::write_file(path, *e);
    auto r = Reader::open(path.string());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    int kern = 0, phase = 0, joint = 0, krow = 0;
    for (size_t i = 0; i < (*r)->num_tensors(); ++i) {
      const std::string m = (*r)->tensor_summary(i).model;
      kern += m.find(" kern") != std::string::npos;
      phase += m.find(" phase") != std::string::npos;
      joint += m.find("joint") != std::string::npos;
      krow += m.find(" krow") != std::string::npos;
    }
    int grouped = 0;
    for (size_t i = 0; i < (*r)->num_chunks(); ++i) grouped += (*r)->chunk(i).method == 3;
    EXPECT_EQ(c.minor == 11, grouped > 0) << grouped << " chunks in zstd groups";
    EXPECT_EQ(c.minor == 3, joint > 0) << joint << " joint-symbol float models";
    EXPECT_EQ(c.minor == 10 || c.minor == 11, krow > 0) << krow << " kernel-row models";
    // The kernel contexts of 2.2 (the small convolutions keep them in 2.10).
    EXPECT_EQ(c.minor == 2 || c.minor == 10 || c.minor == 11, kern > 0) << kern << " kernel-context models";
    EXPECT_EQ(c.minor == 1, phase > 0 && kern == 0) << phase << " column-phase models";
    std::vector<uint8_t> back((*r)->original_size());
    ASSERT_TRUE((*r)->read(0, back.size(), back.data()).ok());
    EXPECT_EQ(wctest::sha256_hex(back), wctest::sha256_hex(*c.orig));
  }
}

// The progress callback (a progress bar in the tool and in Python) gets its
// calls one at a time, `done` never decreasing, the last at the total,
// whatever the encoding threads' timing: here every other call lingers
// before it records, so that calls made concurrently would record out of
// order.
TEST(Encoder, ProgressCallsAreOrderedAndEndAtTheTotal) {
  const auto f = wctest::read_file(wctest::data_dir() / "stories260K.f32.safetensors");
  ASSERT_FALSE(f.empty());
  EncodeConfig cfg;
  cfg.threads = 2;
  std::mutex mu;
  std::vector<std::pair<uint64_t, uint64_t>> seen;
  std::atomic<int> calls{0}, inside{0}, overlaps{0};
  cfg.progress = [&](uint64_t d, uint64_t t) {
    if (inside.fetch_add(1) > 0) overlaps.fetch_add(1);
    if (calls.fetch_add(1) % 2 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    {
      std::lock_guard<std::mutex> lk(mu);
      seen.emplace_back(d, t);
    }
    inside.fetch_sub(1);
  };
  auto r = encode_safetensors(f.data(), f.size(), cfg, "stories260K.f32.safetensors");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_GT(seen.size(), 2u);
  EXPECT_EQ(overlaps.load(), 0) << "progress was called from two threads at once";
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_LE(seen[i - 1].first, seen[i].first) << "call " << i;
    EXPECT_EQ(seen[i].second, seen[0].second) << "call " << i;
  }
  EXPECT_EQ(seen.back().first, seen.back().second);
}

// Small int tensors search fewer candidates (one activity class), but still
// the 3x3 kernel contexts: here each column of a kernel shares one sign, so
// only the upper neighbour inside the kernel predicts a sign (the left one
// lies in another kernel column) and the kernel model must win at any size.
TEST(EncoderSearch, SmallTensorsKeepKernelContexts) {
  std::mt19937 rng(5);
  auto kernels = [&](uint64_t rows, uint64_t cols) {
    std::vector<uint8_t> v(rows * cols);
    for (uint64_t r = 0; r < rows; ++r) {
      for (uint64_t k = 0; k < cols / 9; ++k) {
        const int sign[3] = {rng() % 2 ? 1 : -1, rng() % 2 ? 1 : -1, rng() % 2 ? 1 : -1};
        for (uint64_t e = 0; e < 9; ++e) {
          const int mag = static_cast<int>(1 + rng() % 3);
          v[r * cols + k * 9 + e] = static_cast<uint8_t>(static_cast<int8_t>(sign[e % 3] * mag));
        }
      }
    }
    return v;
  };
  // 16 x 288 = 4608 elements (the reduced search) and 64 x 288 = 18432.
  auto f = wcodec::build_safetensors({{"small.weight", wcodec::DType::kI8, {16, 288}, kernels(16, 288)},
                                      {"large.weight", wcodec::DType::kI8, {64, 288}, kernels(64, 288)}},
                                     std::nullopt);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  wctest::ScratchDir dir;
  auto r = wctest::encode_and_open(*f, "kernels", dir);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->num_tensors(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto ts = r->tensor_summary(i);
    EXPECT_NE(ts.model.find(" kern"), std::string::npos) << ts.name << ": " << ts.model;
  }
  std::vector<uint8_t> back(r->original_size());
  ASSERT_TRUE(r->read(0, back.size(), back.data()).ok());
  EXPECT_EQ(back, *f);
}

// A model must save more than its record costs. Int8 values drawn
// independently (a two-sided geometric distribution over most of the byte
// range): contexts gain nothing, so a model-coded chunk beats zstd by a few
// tens of bytes (rANS against Huffman), less than a record with tables of
// ~200 symbols. One chunk: the tensor goes without a model; 64 chunks of
// the same data: the gains add up and the model stays.
TEST(EncoderSearch, ModelsPayForTheirRecords) {
  std::mt19937 rng(9);
  std::geometric_distribution<int> mag(0.05);
  auto values = [&](uint64_t n) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) {
      const int m = std::min(mag(rng), 120);
      b = static_cast<uint8_t>(static_cast<int8_t>(rng() % 2 ? m : -m));
    }
    return v;
  };
  for (const uint64_t rows : {16u, 1024u}) {
    SCOPED_TRACE(rows);
    auto f = wcodec::build_safetensors({{"w.weight", wcodec::DType::kI8, {rows, 256}, values(rows * 256)}},
                                       std::nullopt);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EncodeConfig cfg;
    cfg.chunk_bytes = 4096;
    wctest::ScratchDir dir;
    auto r = wctest::encode_and_open(*f, "geometric", dir, cfg);
    ASSERT_TRUE(r);
    const auto ts = r->tensor_summary(0);
    if (rows == 16) EXPECT_EQ(ts.chunks_model, 0u) << ts.model;
    else EXPECT_EQ(ts.chunks_model, ts.chunks) << ts.model;
    std::vector<uint8_t> back(r->original_size());
    ASSERT_TRUE(r->read(0, back.size(), back.data()).ok());
    EXPECT_EQ(back, *f);
  }
}

// Tile tools predict from neighbours; exact repeats are zstd's. A smooth
// tensor (tools pay; make_smooth_int8_file) whose first 64 rows repeat
// four times: zstd level 1 codes it in a fraction of the tool-free model's
// bits, so the tool search is skipped (no tile keeps a tool) and zstd
// stores it. The same rows without repeats still get their tools.
TEST(EncoderSearch, RepeatsThatZstdFindsSkipTheToolSearch) {
  const auto smooth = wctest::make_smooth_int8_file();
  ASSERT_FALSE(smooth.empty());
  auto h = wcodec::parse_safetensors_header(smooth.data(), smooth.size(), smooth.size(), "smooth");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  const uint8_t* w = smooth.data() + h->data_start + h->tensors[0].begin;
  constexpr uint64_t kRows = 256, kCols = 256, kPeriod = 64;
  ASSERT_EQ(h->tensors[0].nbytes(), kRows * kCols);
  std::vector<uint8_t> repeated(kRows * kCols);
  for (uint64_t r = 0; r < kRows; ++r) std::memcpy(&repeated[r * kCols], w + (r % kPeriod) * kCols, kCols);
  auto f = wcodec::build_safetensors({{"repeated.weight", wcodec::DType::kI8, {kRows, kCols}, repeated}},
                                     std::nullopt);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  wctest::ScratchDir dir;
  auto rep = wctest::encode_and_open(*f, "repeated", dir);
  auto plain = wctest::encode_and_open(smooth, "smooth", dir);
  ASSERT_TRUE(rep && plain);
  const auto tr = rep->tensor_summary(0), tp = plain->tensor_summary(0);
  EXPECT_GT(tp.tiles_with_tools, 0u) << "the smooth rows alone: " << tp.model;
  EXPECT_EQ(tr.tiles_with_tools, 0u) << tr.model;
  EXPECT_EQ(tr.chunks_zstd, tr.chunks) << tr.model;
  std::vector<uint8_t> back(rep->original_size());
  ASSERT_TRUE(rep->read(0, back.size(), back.data()).ok());
  EXPECT_EQ(back, *f);
}

// Opening a container (what `ls -l` / `stat` through the mount does) keeps
// the frequency tables only: the decoding tables (4 KiB + 1 KiB per context)
// are built on first decode, in the budgeted table cache. silero's 15
// tensors have over 100 contexts (more than 500 KB of decoding tables).
TEST(RealFiles, OpeningAContainerBuildsNoDecodingTables) {
  wctest::ScratchDir dir;
  const auto orig = wctest::read_file(wctest::data_dir() / "silero_vad_16k.bf16.safetensors");
  auto e = wcodec::encode_safetensors(orig.data(), orig.size(), EncodeConfig{}, "silero");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  const auto path = dir / "silero.wcodec";
  wctest::write_file(path, *e);
  const uint64_t tables_before = wcodec::vector_table_bytes();
  const struct mallinfo2 a = mallinfo2();
  auto r = Reader::open(path.string());
  const struct mallinfo2 b = mallinfo2();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const size_t delta = (b.uordblks + b.hblkhd) - (a.uordblks + a.hblkhd);
  EXPECT_LT(delta, size_t{256} << 10) << "heap bytes held by an open reader";
  EXPECT_EQ(wcodec::vector_table_bytes(), tables_before);
  // The first decode builds them (and decodes correctly).
  std::vector<uint8_t> back(orig.size());
  ASSERT_TRUE((*r)->read(0, back.size(), back.data()).ok());
  EXPECT_EQ(back, orig);
  // (About 250 KB: silero's models take 9-bit tables, 2 KiB a context.)
  EXPECT_GT(wcodec::vector_table_bytes(), tables_before + (size_t{150} << 10));
}

// The smallest real int4 case: one packed tensor and its zero-point tensor
// (2.4 KB), taken from stories260K.rtn-int4.
TEST(RealFiles, Int4PackedWithZeroPointTensorPair) {
  const fs::path src = wctest::data_dir() / "stories260K.rtn-int4.safetensors";
  const auto orig = wctest::read_file(src);
  ASSERT_FALSE(orig.empty());
  auto h = wcodec::parse_safetensors_header(orig.data(), orig.size(), orig.size(), src.string());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  const std::string p = "model.layers.0.self_attn.q_proj.weight";
  std::vector<wcodec::TensorData> ts;
  for (const std::string& n : {p + "_packed", p + "_zero"}) {
    for (auto& t : h->tensors) {
      if (t.name != n) continue;
      const auto* b = orig.data() + h->data_start + t.begin;
      ts.push_back({t.name, t.dtype, t.shape, std::vector<uint8_t>(b, b + t.nbytes())});
    }
  }
  ASSERT_EQ(ts.size(), 2u);
  auto file = wcodec::build_safetensors(ts, std::nullopt);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto enc = wcodec::encode_safetensors(file->data(), file->size(), default_config(), "int4_pair");
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  expect_reads_back(*enc, *file, "int4_pair", true);
}

// The encoder codes 4-bit codes as distances from their group's zero point
// only where that is smaller: weights quantized around zero points that
// vary from group to group (clustered) take them; codes that fill [0, 15]
// alike whatever the zero point (spread) are coded as codes less 8. Both
// decode exactly.
TEST(Int4ZeroPoints, UsedWhereTheyPay) {
  std::mt19937 rng(11);
  const uint64_t rows = 96, cols = 256, group = 32;  // codes per row, per zero point
  std::vector<wcodec::TensorData> ts;
  for (const std::string kind : {"clustered", "spread"}) {
    std::vector<uint8_t> zero(rows * (cols / group)), packed(rows * cols / 2);
    for (auto& z : zero) z = static_cast<uint8_t>(rng() % 2 ? 1 + rng() % 3 : 12 + rng() % 3);
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t c = 0; c < cols; ++c) {
        const int z = zero[r * (cols / group) + c / group];
        const int code = kind == "clustered" ? std::clamp(z + static_cast<int>(rng() % 5) - 2, 0, 15)
                                             : static_cast<int>(rng() % 16);
        packed[(r * cols + c) / 2] |= static_cast<uint8_t>(code << (4 * (c % 2)));
      }
    ts.push_back({kind + ".weight_packed", wcodec::DType::kU8, {rows, cols / 2}, packed});
    ts.push_back({kind + ".weight_zero", wcodec::DType::kU8, {rows, cols / group}, zero});
  }
  auto file = wcodec::build_safetensors(ts, std::nullopt);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EncodeReport rep;
  auto enc = wcodec::encode_safetensors(file->data(), file->size(), default_config(), "zero_points", &rep);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  std::map<std::string, std::string> model;
  for (const auto& t : rep.tensors) model[t.name] = t.model;
  EXPECT_NE(model["clustered.weight_packed"].find(" zp"), std::string::npos) << model["clustered.weight_packed"];
  EXPECT_EQ(model["spread.weight_packed"].find(" zp"), std::string::npos) << model["spread.weight_packed"];
  expect_reads_back(*enc, *file, "zero_points", true);
}

// ------------------------------------------------------------ edge cases

const std::vector<wctest::EdgeCase>& edge_cases() {
  static const auto* cases = new std::vector<wctest::EdgeCase>(wctest::make_edge_cases());
  return *cases;
}

std::vector<std::string> edge_case_names() {
  std::vector<std::string> n;
  for (auto& c : edge_cases()) n.push_back(c.name);
  return n;
}

const wctest::EdgeCase& edge_case(const std::string& name) {
  for (auto& c : edge_cases())
    if (c.name == name) return c;
  static const wctest::EdgeCase none{};
  ADD_FAILURE() << "no edge case " << name;
  return none;
}

void check_edge_case(const wctest::EdgeCase& ec, uint64_t chunk_bytes) {
  SCOPED_TRACE(ec.name + " chunk_bytes=" + std::to_string(chunk_bytes));
  auto h = wcodec::parse_safetensors_header(ec.file.data(), ec.file.size(), ec.file.size(), ec.name);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EncodeConfig cfg = default_config();
  cfg.chunk_bytes = chunk_bytes;
  EncodeReport rep;
  auto enc = wcodec::encode_safetensors(ec.file.data(), ec.file.size(), cfg, ec.name, &rep);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  EXPECT_EQ(rep.tensors.size(), h->tensors.size());
  const fs::path p = scratch() / (ec.name + "." + std::to_string(chunk_bytes) + ".wcodec");
  wctest::write_file(p, *enc);
  auto r = Reader::open(p.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Reader& rd = **r;
  ASSERT_EQ(rd.original_size(), ec.file.size());
  EXPECT_EQ(rd.num_tensors(), h->tensors.size());
  check_chunk_table(rd, ec.file);
  for (size_t i = 0; i < rd.num_chunks(); ++i)
    ASSERT_LE(rd.chunk(i).decoded_size, chunk_bytes) << "chunk " << i << " exceeds the configured chunk size";
  std::vector<uint8_t> all(ec.file.size());
  const auto st = rd.read(0, all.size(), all.data());
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(same_bytes(all.data(), ec.file.data(), all.size()));
  const auto v = rd.verify(true);
  EXPECT_TRUE(v.ok()) << v.ToString();
  check_random_reads(rd, ec.file, 60, 77 + chunk_bytes);
  check_out_of_range(rd);
  fs::remove(p);
}

class EdgeCaseRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(EdgeCaseRoundTrip, DefaultChunks) { check_edge_case(edge_case(GetParam()), EncodeConfig{}.chunk_bytes); }

TEST_P(EdgeCaseRoundTrip, SmallChunks4096) { check_edge_case(edge_case(GetParam()), 4096); }

INSTANTIATE_TEST_SUITE_P(Generated, EdgeCaseRoundTrip, ::testing::ValuesIn(edge_case_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return sanitize(i.param); });

// A 1×N tensor wider than a chunk must be cut into row segments: several
// chunks for one row, each within the chunk size.
TEST(EdgeCases, RowWiderThanChunkIsSplitIntoSegments) {
  const auto& ec = edge_case("row_vector_1xN");
  ASSERT_FALSE(ec.file.empty());
  EncodeConfig cfg = default_config();
  cfg.chunk_bytes = 4096;
  auto enc = wcodec::encode_safetensors(ec.file.data(), ec.file.size(), cfg, ec.name);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  const fs::path p = scratch() / "row_segments.wcodec";
  wctest::write_file(p, *enc);
  auto r = Reader::open(p.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Reader& rd = **r;
  ASSERT_EQ(rd.num_tensors(), 1u);
  const auto s = rd.tensor_summary(0);
  ASSERT_EQ(s.shape, (std::vector<uint64_t>{1, 4099}));
  EXPECT_GE(s.chunks, 4u) << "a 16396-byte row with 4096-byte chunks";
  EXPECT_EQ(rd.num_chunks(), s.chunks);
  // Reads across every segment boundary.
  std::vector<uint8_t> buf(64);
  for (size_t i = 1; i < rd.num_chunks(); ++i) {
    const uint64_t b = rd.chunk(i).decoded_offset;
    ASSERT_TRUE(rd.read(b - 7, 14, buf.data()).ok());
    ASSERT_TRUE(same_bytes(buf.data(), ec.file.data() + b - 7, 14)) << "boundary " << i;
  }
  EXPECT_TRUE(rd.verify(true).ok());
  fs::remove(p);
}

// A wide U8 row (1 × 300000) much wider than the default chunk.
TEST(EdgeCases, WideU8RowDefaultChunks) {
  std::mt19937_64 rng(99);
  std::vector<uint8_t> bytes(300000);
  for (auto& b : bytes) b = static_cast<uint8_t>(128 + static_cast<int>(rng() % 9) - 4);
  auto file = wcodec::build_safetensors({{"wide", wcodec::DType::kU8, {1, bytes.size()}, bytes}}, std::nullopt);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto enc = wcodec::encode_safetensors(file->data(), file->size(), default_config(), "wide");
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  const fs::path p = scratch() / "wide.wcodec";
  wctest::write_file(p, *enc);
  auto r = Reader::open(p.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GE((*r)->num_chunks(), 2u);
  EXPECT_LT(enc->size(), file->size() / 2) << "9 distinct byte values compress to well under half";
  check_random_reads(**r, *file, 100, 5);
  EXPECT_TRUE((*r)->verify(true).ok());
  fs::remove(p);
}

// ------------------------------------------------------------ concurrency

void concurrent_reads(const std::vector<uint8_t>& orig, const std::string& name, uint64_t chunk_bytes) {
  EncodeConfig cfg = default_config();
  cfg.chunk_bytes = chunk_bytes;
  auto enc = wcodec::encode_safetensors(orig.data(), orig.size(), cfg, name);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  const fs::path p = scratch() / (name + ".concurrent.wcodec");
  wctest::write_file(p, *enc);
  // A fresh Reader: lazily decoded zero-point tensors are loaded under contention.
  auto r = Reader::open(p.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  concurrent_reads(**r, orig, 3 * chunk_bytes, 150);
  fs::remove(p);
}

TEST(Concurrency, EightThreadsReadRealInt4File) {
  // rtn-int4: packed tensors depend on lazily decoded zero-point tensors.
  const auto orig = wctest::read_file(wctest::data_dir() / "stories260K.rtn-int4.safetensors");
  ASSERT_FALSE(orig.empty());
  concurrent_reads(orig, "stories260K.rtn-int4", 16384);
}

TEST(Concurrency, EightThreadsReadRealBf16File) {
  const auto orig = wctest::read_file(wctest::data_dir() / "stories260K.bf16.safetensors");
  ASSERT_FALSE(orig.empty());
  concurrent_reads(orig, "stories260K.bf16", EncodeConfig{}.chunk_bytes);
}

TEST(Concurrency, EightThreadsReadModelLikeInt4EdgeCase) {
  concurrent_reads(wctest::make_named_model_like_file(), "model_like_int4", 4096);
}

// Eight readers over all tensors of a real file while the decoding-table
// cache may hold almost nothing: tables are evicted under the readers and
// rebuilt, bytes stay right, and the cache keeps to its budget.
TEST(Concurrency, DecodingTablesStayWithinTheirBudget) {
  const auto orig = wctest::read_file(wctest::data_dir() / "stories260K.bf16.safetensors");
  ASSERT_FALSE(orig.empty());
  auto enc = wcodec::encode_safetensors(orig.data(), orig.size(), default_config(), "budget");
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  const fs::path p = scratch() / "budget.wcodec";
  wctest::write_file(p, *enc);
  auto r = Reader::open(p.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Without a budget every tensor's tables stay: find the largest one.
  wcodec::set_vector_table_budget(UINT64_MAX);
  const uint64_t before = wcodec::vector_table_bytes();
  std::vector<uint8_t> all(orig.size());
  ASSERT_TRUE((*r)->read(0, orig.size(), all.data()).ok());
  ASSERT_TRUE(all == orig);
  const uint64_t everything = wcodec::vector_table_bytes() - before;
  ASSERT_GT(everything, 0u);
  // A budget of a tenth of that: reads stay correct, the cache stays within
  // the budget (plus the one table a reader just used).
  const uint64_t budget = everything / 10;
  wcodec::set_vector_table_budget(budget);
  EXPECT_LE(wcodec::vector_table_bytes(), budget);
  concurrent_reads(**r, orig, 3 * EncodeConfig{}.chunk_bytes, 150);
  EXPECT_LE(wcodec::vector_table_bytes(), budget + everything / 2);
  wcodec::set_vector_table_budget(wcodec::kDefaultVectorTableBudget);
  fs::remove(p);
}

// ------------------------------------------------------------ size bound

TEST(SizeBound, RandomBytesExpandByAtMostOnePercentPlus4KiB) {
  std::mt19937_64 rng(0xC0FFEE);
  std::vector<uint8_t> noise(1u << 20);
  for (size_t i = 0; i < noise.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(noise.data() + i, &v, 8);
  }
  auto file = wcodec::build_safetensors({{"noise", wcodec::DType::kU8, {noise.size()}, noise}}, std::nullopt);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  for (uint64_t chunk : {uint64_t{4096}, uint64_t{256 * 1024}}) {
    EncodeConfig cfg = default_config();
    cfg.chunk_bytes = chunk;
    auto enc = wcodec::encode_safetensors(file->data(), file->size(), cfg, "noise");
    ASSERT_TRUE(enc.ok()) << enc.status().ToString();
    const uint64_t bound = file->size() + file->size() / 100 + 4096;
    EXPECT_LE(enc->size(), bound) << "chunk_bytes " << chunk << ": " << enc->size() << " bytes for " << file->size()
                                  << " random bytes";
    expect_reads_back(*enc, *file, "noise." + std::to_string(chunk), false);
  }
}

TEST(SizeBound, RandomF32AndBf16ExpandByAtMostOnePercentPlus4KiB) {
  std::mt19937_64 rng(0xBADC0DE);
  std::vector<uint8_t> a(1u << 20), b(1u << 19);
  for (auto& x : a) x = static_cast<uint8_t>(rng());
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  auto file = wcodec::build_safetensors({{"f32", wcodec::DType::kF32, {512, 512}, a},
                                         {"bf16", wcodec::DType::kBF16, {512, 512}, b}},
                                        std::nullopt);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto enc = wcodec::encode_safetensors(file->data(), file->size(), default_config(), "noise-float");
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  EXPECT_LE(enc->size(), file->size() + file->size() / 100 + 4096);
}

// ------------------------------------------------------------ determinism

TEST(Determinism, SameFileTwiceGivesIdenticalBytes) {
  for (const char* n : {"stories260K.bf16.safetensors", "stories260K.rtn-int4.safetensors"}) {
    const auto orig = wctest::read_file(wctest::data_dir() / n);
    ASSERT_FALSE(orig.empty());
    auto a = wcodec::encode_safetensors(orig.data(), orig.size(), default_config(), n);
    auto b = wcodec::encode_safetensors(orig.data(), orig.size(), default_config(), n);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->size(), b->size()) << n;
    EXPECT_TRUE(*a == *b) << n << ": two encodings differ";
  }
}

TEST(Determinism, ThreadCountDoesNotChangeTheOutput) {
  const auto orig = wctest::read_file(wctest::data_dir() / "stories260K.rtn-int8.safetensors");
  ASSERT_FALSE(orig.empty());
  EncodeConfig one = default_config();
  one.threads = 1;
  EncodeConfig four = default_config();
  four.threads = 4;
  auto a = wcodec::encode_safetensors(orig.data(), orig.size(), one, "x");
  auto b = wcodec::encode_safetensors(orig.data(), orig.size(), four, "x");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(*a == *b) << "1 thread: " << a->size() << " bytes, 4 threads: " << b->size() << " bytes";
}

// The file encoder (tensors read, encoded and written a few at a time) and
// the in-memory one give the same bytes, with one thread and with several.
TEST(Determinism, FileEncoderMatchesInMemoryEncoder) {
  for (const char* name : {"stories260K.rtn-ternary.safetensors", "stories260K.rtn-int4.safetensors",
                           "silero_vad_16k.bf16.safetensors"}) {
    const fs::path in = wctest::data_dir() / name;
    const auto orig = wctest::read_file(in);
    ASSERT_FALSE(orig.empty());
    auto mem = wcodec::encode_safetensors(orig.data(), orig.size(), default_config(), in.string());
    ASSERT_TRUE(mem.ok()) << mem.status().ToString();
    for (int threads : {1, 3}) {
      EncodeConfig cfg = default_config();
      cfg.threads = threads;
      const fs::path out = scratch() / "file_encoder.wcodec";
      EncodeReport rep;
      const auto st = wcodec::encode_safetensors_file(in.string(), out.string(), cfg, &rep);
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_EQ(rep.encoded_size, mem->size()) << name;
      EXPECT_EQ(rep.tensors.size(), 0u + wcodec::parse_safetensors_header(orig.data(), orig.size(), orig.size(), name)
                                            ->tensors.size());
      const auto disk = wctest::read_file(out);
      EXPECT_TRUE(disk == *mem) << name << ", " << threads << " threads: encode_safetensors_file wrote "
                                << disk.size() << " bytes, in memory " << mem->size();
      fs::remove(out);
    }
  }
}

// Malformed files given to the file encoder: an error naming the file, and
// neither the output nor a temporary file left behind.
TEST(EncoderInput, FileEncoderRejectsMalformedFilesAndLeavesNothing) {
  const auto good = edge_case("int8_quant").file;
  ASSERT_GT(good.size(), 64u);
  std::vector<std::pair<std::string, std::vector<uint8_t>>> bad = {
      {"empty", {}},
      {"five bytes", std::vector<uint8_t>(good.begin(), good.begin() + 5)},
      {"header only", std::vector<uint8_t>(good.begin(), good.begin() + 16)},
      {"one byte short", std::vector<uint8_t>(good.begin(), good.end() - 1)},
      {"one byte long", good},
  };
  bad.back().second.push_back(0);
  std::vector<uint8_t> huge = good;  // header length far beyond the file
  for (int i = 0; i < 8; ++i) huge[static_cast<size_t>(i)] = i == 5 ? 0x01 : 0x00;
  bad.emplace_back("header length beyond the file", huge);
  const fs::path dir = scratch() / "malformed";
  fs::create_directories(dir);
  for (const auto& [what, bytes] : bad) {
    const fs::path in = dir / "in.safetensors", out = dir / "out.wcodec";
    wctest::write_file(in, bytes);
    const auto st = wcodec::encode_safetensors_file(in.string(), out.string(), default_config(), nullptr);
    EXPECT_FALSE(st.ok()) << what;
    EXPECT_NE(st.message().find("in.safetensors"), std::string::npos) << what << ": " << st.ToString();
    for (const auto& e : fs::directory_iterator(dir))
      EXPECT_EQ(e.path().filename(), "in.safetensors") << what << ": left behind " << e.path();
  }
  fs::remove_all(dir);
}

// ------------------------------------------------------------ bad input to the encoder

TEST(EncoderInput, RejectsChunkSizesOutsideTheRange) {
  const auto& ec = edge_case("int8_quant");
  for (uint64_t c : {uint64_t{0}, uint64_t{4095}, wcodec::kMaxChunkDecoded + 1}) {
    EncodeConfig cfg = default_config();
    cfg.chunk_bytes = c;
    auto r = wcodec::encode_safetensors(ec.file.data(), ec.file.size(), cfg, "x");
    EXPECT_FALSE(r.ok()) << "chunk_bytes " << c;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().ToString();
  }
}

TEST(EncoderInput, RejectsAnInvalidSafetensorsFile) {
  auto ec = edge_case("int8_quant").file;
  ASSERT_GT(ec.size(), 16u);
  ec.pop_back();  // data shorter than the header says
  auto r = wcodec::encode_safetensors(ec.data(), ec.size(), default_config(), "short.safetensors");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("short.safetensors"), std::string::npos) << r.status().ToString();
}

}  // namespace
