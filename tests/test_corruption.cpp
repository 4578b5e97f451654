// tests/test_corruption.cpp — damaged .wcodec files: a named catalogue, each
// test with its own generator of damage (byte flips over sampled positions,
// truncations, appended garbage, targeted header/footer field edits, a
// damaged chunk payload). The rule every test checks: a damaged file is
// either rejected with a non-OK status that explains itself, or it yields the
// original bytes — never wrong bytes, never a crash.
//
// Only the documented header/footer fields are edited (not the index
// internals):
//   header (128 bytes): 0 magic "WCDC", 4 major u16, 6 minor u16, 8 flags u32,
//     12 metadata length u32, 16 original size u64, 24 original header length
//     u64, 32 index offset u64, 40 index size u64, 48 SHA-256 [32], 80 index
//     CRC32 u32, 84..123 reserved zero, 124 CRC32 of bytes 0..123.
//   footer (last 32 bytes): 0 index offset u64, 8 index size u64, 16 index
//     CRC32 u32, 20 header CRC32 u32, 24 file CRC32 u32 (all bytes before the
//     footer), 28 magic "CDCW".
// Thread-safety: single-threaded test code.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "edge_cases.h"
#include "testutil.h"
#include "wcodec/container.h"
#include "wcodec/safetensors.h"


namespace {

namespace fs = std::filesystem;
using wcodec::Code;
using wcodec::Reader;
using wcodec::Status;

// ------------------------------------------------------------ helpers

const fs::path& scratch() {
  static wctest::ScratchDir dir;  // removed at exit
  return dir.path();
}

uint32_t crc32_bytes(const uint8_t* p, size_t n) {
  return static_cast<uint32_t>(::crc32(::crc32(0L, Z_NULL, 0), p, static_cast<uInt>(n)));
}

uint32_t get_u32(const std::vector<uint8_t>& b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | b[at + i];
  return v;
}
uint64_t get_u64(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[at + i];
  return v;
}
void put_u16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
  for (int i = 0; i < 2; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// Header/footer field offsets.
constexpr size_t kHdrVersionMajor = 4, kHdrVersionMinor = 6, kHdrFlags = 8, kHdrMetaLen = 12, kHdrOrigSize = 16,
                 kHdrOrigHdrLen = 24, kHdrIndexOff = 32, kHdrIndexSize = 40, kHdrSha = 48, kHdrIndexCrc = 80,
                 kHdrCrc = 124;
constexpr size_t kFtIndexOff = 0, kFtIndexSize = 8, kFtIndexCrc = 16, kFtHeaderCrc = 20, kFtFileCrc = 24,
                 kFtMagic = 28;
size_t footer(const std::vector<uint8_t>& b) { return b.size() - wcodec::kFooterSize; }

// Recomputes the header CRC (bytes 0..123) into the header and the footer.
void fix_header_crc(std::vector<uint8_t>& b) {
  const uint32_t c = crc32_bytes(b.data(), 124);
  put_u32(b, kHdrCrc, c);
  put_u32(b, footer(b) + kFtHeaderCrc, c);
}
// Recomputes the whole-file CRC (every byte before the footer).
void fix_file_crc(std::vector<uint8_t>& b) { put_u32(b, footer(b) + kFtFileCrc, crc32_bytes(b.data(), footer(b))); }

struct Source {
  std::string name;
  std::vector<uint8_t> orig;  // the safetensors file
  std::vector<uint8_t> enc;   // its .wcodec encoding
};

Source encode_source(const std::string& name, std::vector<uint8_t> orig, uint64_t chunk_bytes = 256 * 1024) {
  Source s;
  s.name = name;
  s.orig = std::move(orig);
  if (s.orig.empty()) {
    ADD_FAILURE() << name << ": empty input";
    return s;
  }
  wcodec::EncodeConfig cfg;
  cfg.threads = 2;
  cfg.chunk_bytes = chunk_bytes;
  auto r = wcodec::encode_safetensors(s.orig.data(), s.orig.size(), cfg, name);
  if (!r.ok()) {
    ADD_FAILURE() << name << ": " << r.status().ToString();
    return s;
  }
  s.enc = std::move(r).value();
  return s;
}

Source real_source(const std::string& file) {
  return encode_source(file, wctest::read_file(wctest::data_dir() / file));
}

Source edge_source(const std::string& name, uint64_t chunk_bytes) {
  for (auto& ec : wctest::make_edge_cases())
    if (ec.name == name) return encode_source(name, ec.file, chunk_bytes);
  ADD_FAILURE() << "no edge case " << name;
  return {};
}

fs::path write_scratch(const std::string& name, const std::vector<uint8_t>& bytes) {
  const fs::path p = scratch() / name;
  wctest::write_file(p, bytes);
  return p;
}

wcodec::Result<std::unique_ptr<Reader>> open_bytes(const std::string& name, const std::vector<uint8_t>& bytes) {
  return Reader::open(write_scratch(name, bytes).string());
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

// The encoded source must itself be sound before it is damaged.
void check_pristine(const Source& s) {
  ASSERT_FALSE(s.enc.empty()) << s.name;
  auto r = open_bytes(s.name + ".pristine.wcodec", s.enc);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<uint8_t> all(s.orig.size());
  const Status st = (*r)->read(0, all.size(), all.data());
  ASSERT_TRUE(st.ok()) << s.name << " does not round-trip before any damage: " << st.ToString();
  ASSERT_TRUE(all == s.orig) << s.name << " does not round-trip before any damage";
  const Status v = (*r)->verify(true);
  ASSERT_TRUE(v.ok()) << v.ToString();
}

// Expects `r` to be a rejection with `code` whose message contains `needle`.
template <typename R>
void expect_rejected(const R& r, Code code, const std::string& needle, const std::string& what) {
  ASSERT_FALSE(r.ok()) << what << ": the damaged file was accepted";
  EXPECT_EQ(r.status().code(), code) << what << ": " << r.status().ToString();
  EXPECT_TRUE(contains(r.status().message(), needle))
      << what << ": message lacks \"" << needle << "\": " << r.status().ToString();
}

// ------------------------------------------------------------ byte flips

struct FlipStats {
  int positions = 0, open_failed = 0, opened = 0, read_failed = 0, read_ok = 0;
};

// Flips bytes of `s.enc` one at a time at sampled positions (in place in one
// scratch file) and checks the rule at each.
void run_byte_flips(const Source& s, int random_positions, FlipStats* stats) {
  check_pristine(s);
  if (::testing::Test::HasFatalFailure()) return;
  const uint64_t size = s.enc.size();
  std::set<uint64_t> pos;
  for (uint64_t i = 0; i < std::min<uint64_t>(256, size); ++i) pos.insert(i);
  for (uint64_t i = size - std::min<uint64_t>(64, size); i < size; ++i) pos.insert(i);
  std::mt19937_64 rng(0xF11B5EEDULL ^ std::hash<std::string>{}(s.name));
  for (int i = 0; i < random_positions; ++i) pos.insert(rng() % size);

  const fs::path path = write_scratch(s.name + ".flip.wcodec", s.enc);
  const fs::path out = scratch() / (s.name + ".flip.decoded");
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> buf(s.orig.size());
  int n = 0;
  for (uint64_t p : pos) {
    // Alternate between single-bit flips and whole-byte inversions.
    const uint8_t mask = (n % 3 == 2) ? 0xFF : static_cast<uint8_t>(1u << ((p + n) % 8));
    ++n;
    const uint8_t bad = s.enc[p] ^ mask;
    ASSERT_EQ(::pwrite(fd, &bad, 1, static_cast<off_t>(p)), 1);
    const std::string what = s.name + ": byte " + std::to_string(p) + " ^= " + std::to_string(mask);
    stats->positions++;
    auto r = Reader::open(path.string());
    if (!r.ok()) {
      stats->open_failed++;
      const Status& st = r.status();
      EXPECT_TRUE(st.code() == Code::kCorruption || st.code() == Code::kNotSupported)
          << what << ": open: " << st.ToString();
      EXPECT_FALSE(st.message().empty()) << what;
      EXPECT_TRUE(contains(st.message(), path.filename().string()))
          << what << ": the message does not name the file: " << st.ToString();
    } else {
      stats->opened++;
      const Reader& rd = **r;
      const Status v = rd.verify(false);
      EXPECT_FALSE(v.ok()) << what << ": verify(false) passed on a damaged file";
      EXPECT_EQ(v.code(), Code::kCorruption) << what << ": " << v.ToString();
      std::fill(buf.begin(), buf.end(), 0);
      const Status rs = rd.read(0, buf.size(), buf.data());
      if (rs.ok()) {
        stats->read_ok++;
        EXPECT_TRUE(buf == s.orig) << what << ": read() returned wrong bytes without an error";
      } else {
        stats->read_failed++;
        EXPECT_TRUE(rs.code() == Code::kCorruption) << what << ": read: " << rs.ToString();
      }
      // decode_to_file on a sample (it is a full decode plus a write).
      if (n % 4 == 0 || p < 256 || p + 64 >= size) {
        std::error_code ec;
        fs::remove(out, ec);
        const Status ds = rd.decode_to_file(out.string());
        if (ds.ok()) {
          EXPECT_TRUE(wctest::read_file(out) == s.orig) << what << ": decode_to_file wrote wrong bytes";
        } else {
          EXPECT_FALSE(fs::exists(out)) << what << ": decode_to_file failed (" << ds.ToString()
                                        << ") but left an output file";
        }
      }
    }
    ASSERT_EQ(::pwrite(fd, &s.enc[p], 1, static_cast<off_t>(p)), 1);
    if (::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count() > 30)
      break;  // enough evidence; keep the log readable
  }
  ::close(fd);
  // The sample must reach both outcomes: damage caught at open, and damage
  // only found by checksums of the stored bytes.
  EXPECT_GT(stats->open_failed, 0) << s.name;
  EXPECT_GT(stats->opened, 0) << s.name;
  EXPECT_GT(stats->read_failed, 0) << s.name << ": no flip inside a chunk payload was detected by read()";
  ::testing::Test::RecordProperty("positions", stats->positions);
  ::testing::Test::RecordProperty("open_failed", stats->open_failed);
  ::testing::Test::RecordProperty("read_failed", stats->read_failed);
  ::testing::Test::RecordProperty("read_ok", stats->read_ok);
}

int random_flip_positions() { return 1500; }

TEST(ByteFlips, StoriesRtnInt8) {
  FlipStats st;
  run_byte_flips(real_source("stories260K.rtn-int8.safetensors"), random_flip_positions(), &st);
}

TEST(ByteFlips, StoriesBf16) {
  FlipStats st;
  run_byte_flips(real_source("stories260K.bf16.safetensors"), random_flip_positions(), &st);
}

// F16 weights whose chunks use joint sign/exponent/mantissa symbols (float
// emode 5, format 2.3): two 512 KiB slices of isnet-medium's largest
// tensor (too large to share a model), 16 KiB chunks.
TEST(ByteFlips, F16JointSymbolsSmallChunks) {
  const std::vector<uint8_t> w = wctest::largest_isnet_f16_tensor();
  ASSERT_GE(w.size(), 3u << 20);
  const uint8_t* src = w.data();
  std::vector<uint8_t> a(src, src + (512u << 10)), b(src + (2u << 20), src + (2u << 20) + (512u << 10));
  auto file = wcodec::build_safetensors(
      {{"a", wcodec::DType::kF16, {512, 512}, std::move(a)}, {"b", wcodec::DType::kF16, {256, 1024}, std::move(b)}},
      std::nullopt);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const Source s = encode_source("f16_joint", std::move(*file), 16384);
  ASSERT_GE(s.enc.size(), 8u);
  ASSERT_EQ(s.enc[6], 3) << "expected format 2.3 (joint float symbols)";
  FlipStats st;
  run_byte_flips(s, random_flip_positions(), &st);
}

TEST(ByteFlips, EdgeCaseModelLikeInt4SmallChunks) {
  FlipStats st;
  run_byte_flips(edge_source("model_like_int4", 4096), random_flip_positions(), &st);
}

// ------------------------------------------------------------ truncation

TEST(Truncation, EveryPrefixIsRejected) {
  const Source s = real_source("stories260K.rtn-int8.safetensors");
  check_pristine(s);
  if (HasFatalFailure()) return;
  const uint64_t size = s.enc.size();
  const uint64_t index_off = get_u64(s.enc, kHdrIndexOff);
  std::set<uint64_t> cuts = {0, 1, 7, 8, 31, 32, 64, 127, 128, 129, 159, 160, 161, 255, 256};
  for (uint64_t d : {1, 2, 4, 8, 12, 16, 20, 24, 28, 31, 32, 33, 40, 64, 128}) cuts.insert(size - d);
  for (int64_t d : {-9, -8, -1, 0, 1, 8, 9, 16}) cuts.insert(index_off + d);
  {
    auto r = open_bytes("trunc.pristine.wcodec", s.enc);
    ASSERT_TRUE(r.ok());
    for (size_t i = 0; i < (*r)->num_chunks(); i += std::max<size_t>(1, (*r)->num_chunks() / 10)) {
      cuts.insert((*r)->chunk(i).file_offset);
      cuts.insert((*r)->chunk(i).file_offset + (*r)->chunk(i).stored_size);
    }
  }
  std::mt19937_64 rng(0x7A7C);
  while (cuts.size() < 200) cuts.insert(rng() % size);
  const fs::path p = scratch() / "trunc.wcodec";
  for (uint64_t c : cuts) {
    ASSERT_LT(c, size);
    wctest::write_file(p, std::vector<uint8_t>(s.enc.begin(), s.enc.begin() + static_cast<ptrdiff_t>(c)));
    auto r = Reader::open(p.string());
    ASSERT_FALSE(r.ok()) << "truncated to " << c << " of " << size << " bytes but opened";
    EXPECT_TRUE(r.status().code() == Code::kCorruption || r.status().code() == Code::kIOError)
        << "truncated to " << c << ": " << r.status().ToString();
    EXPECT_FALSE(r.status().message().empty());
  }
}

TEST(Truncation, ShortFilesNameTheSize) {
  const Source s = real_source("stories260K.rtn-ternary.safetensors");
  ASSERT_FALSE(s.enc.empty());
  for (uint64_t c : {0, 1, 100, 159}) {
    auto r = open_bytes("short.wcodec", std::vector<uint8_t>(s.enc.begin(), s.enc.begin() + static_cast<ptrdiff_t>(c)));
    expect_rejected(r, Code::kCorruption, "size", "truncated to " + std::to_string(c));
  }
}

// ------------------------------------------------------------ appended garbage

TEST(AppendedGarbage, AnythingAfterTheFooterIsRejected) {
  const Source s = real_source("stories260K.rtn-ternary.safetensors");
  check_pristine(s);
  if (HasFatalFailure()) return;
  std::mt19937_64 rng(0xA99E);
  std::map<std::string, std::vector<uint8_t>> tails;
  tails["one zero byte"] = {0};
  tails["one random byte"] = {static_cast<uint8_t>(rng())};
  {
    std::vector<uint8_t> t(32);
    for (auto& x : t) x = static_cast<uint8_t>(rng());
    tails["32 random bytes"] = t;
  }
  {
    std::vector<uint8_t> t(4096);
    for (auto& x : t) x = static_cast<uint8_t>(rng());
    tails["4096 random bytes"] = t;
  }
  tails["a second copy of the footer"] =
      std::vector<uint8_t>(s.enc.end() - wcodec::kFooterSize, s.enc.end());
  tails["a second copy of the whole file"] = s.enc;
  for (auto& [what, tail] : tails) {
    std::vector<uint8_t> b = s.enc;
    b.insert(b.end(), tail.begin(), tail.end());
    auto r = open_bytes("appended.wcodec", b);
    ASSERT_FALSE(r.ok()) << "opened with " << what << " appended";
    EXPECT_EQ(r.status().code(), Code::kCorruption) << what << ": " << r.status().ToString();
  }
}

// ------------------------------------------------------------ header/footer fields

class FieldCorruption : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { src_ = new Source(real_source("stories260K.rtn-int8.safetensors")); }
  static void TearDownTestSuite() {
    delete src_;
    src_ = nullptr;
  }
  void SetUp() override {
    ASSERT_FALSE(src_->enc.empty());
    b_ = src_->enc;
  }
  wcodec::Result<std::unique_ptr<Reader>> open() {
    return open_bytes(std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ".wcodec", b_);
  }
  static Source* src_;
  std::vector<uint8_t> b_;
};
Source* FieldCorruption::src_ = nullptr;

TEST_F(FieldCorruption, PristineFileOpens) {
  // The control for every other test in this suite: the helpers that rewrite
  // CRCs reproduce exactly the encoder's values.
  std::vector<uint8_t> c = b_;
  fix_header_crc(c);
  fix_file_crc(c);
  EXPECT_TRUE(c == b_) << "recomputed header/file CRC32 differ from the encoder's";
  EXPECT_EQ(get_u32(b_, kHdrCrc), get_u32(b_, footer(b_) + kFtHeaderCrc));
  EXPECT_EQ(get_u64(b_, kHdrIndexOff), get_u64(b_, footer(b_) + kFtIndexOff));
  EXPECT_EQ(get_u64(b_, kHdrIndexSize), get_u64(b_, footer(b_) + kFtIndexSize));
  EXPECT_EQ(get_u32(b_, kHdrIndexCrc), get_u32(b_, footer(b_) + kFtIndexCrc));
  EXPECT_EQ(get_u64(b_, kHdrIndexOff) + get_u64(b_, kHdrIndexSize), footer(b_));
  EXPECT_EQ(get_u64(b_, kHdrOrigSize), src_->orig.size());
  EXPECT_EQ(std::memcmp(b_.data() + footer(b_) + kFtMagic, "CDCW", 4), 0);
  auto r = open();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE((*r)->verify(true).ok());
  EXPECT_EQ((*r)->original_size(), src_->orig.size());
  EXPECT_EQ((*r)->data_start(), get_u64(b_, kHdrOrigHdrLen));
}

TEST_F(FieldCorruption, BadMagic) {
  b_[0] = 'X';
  expect_rejected(open(), Code::kCorruption, "magic", "magic WCDC -> XCDC");
}

TEST_F(FieldCorruption, BadMagicWithValidCrc) {
  std::memcpy(b_.data(), "GGUF", 4);
  fix_header_crc(b_);
  expect_rejected(open(), Code::kCorruption, "magic", "magic GGUF");
}

TEST_F(FieldCorruption, SafetensorsFileIsNotAWcodecFile) {
  b_ = src_->orig;
  expect_rejected(open(), Code::kCorruption, "magic", "a .safetensors file");
}

TEST_F(FieldCorruption, FutureMajorVersion) {
  put_u16(b_, kHdrVersionMajor, 3);
  fix_header_crc(b_);
  fix_file_crc(b_);
  expect_rejected(open(), Code::kNotSupported, "version", "major version 3");
}

TEST_F(FieldCorruption, MajorVersionZero) {
  put_u16(b_, kHdrVersionMajor, 0);
  fix_header_crc(b_);
  fix_file_crc(b_);
  auto r = open();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.status().message(), "version")) << r.status().ToString();
}

TEST_F(FieldCorruption, NewerMinorVersionIsReadable) {
  // Minor versions are backward compatible ("this reader supports 1.x").
  put_u16(b_, kHdrVersionMinor, 7);
  fix_header_crc(b_);
  fix_file_crc(b_);
  auto r = open();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<uint8_t> all(src_->orig.size());
  ASSERT_TRUE((*r)->read(0, all.size(), all.data()).ok());
  EXPECT_TRUE(all == src_->orig);
  EXPECT_TRUE((*r)->verify(true).ok());
}

TEST_F(FieldCorruption, NonZeroFlags) {
  for (uint32_t flags : {1u, 0x80000000u, 0x100u}) {
    b_ = src_->enc;
    put_u32(b_, kHdrFlags, flags);
    fix_header_crc(b_);
    fix_file_crc(b_);
    expect_rejected(open(), Code::kCorruption, "flags", "flags " + std::to_string(flags));
  }
}

TEST_F(FieldCorruption, NonZeroReservedBytes) {
  for (size_t at : {84u, 100u, 123u}) {
    b_ = src_->enc;
    b_[at] = 0x5A;
    fix_header_crc(b_);
    fix_file_crc(b_);
    expect_rejected(open(), Code::kCorruption, "reserved", "reserved byte " + std::to_string(at));
  }
}

TEST_F(FieldCorruption, HeaderCrcMismatch) {
  b_[kHdrOrigSize] ^= 1;  // a field changed, CRC left alone
  expect_rejected(open(), Code::kCorruption, "header CRC32", "original size changed");
  b_ = src_->enc;
  b_[kHdrCrc] ^= 0x10;  // the CRC itself (header and footer copies now disagree too)
  auto r = open();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCorruption);
}

TEST_F(FieldCorruption, IndexBytesDamaged) {
  const uint64_t off = get_u64(b_, kHdrIndexOff), size = get_u64(b_, kHdrIndexSize);
  ASSERT_GT(size, 0u);
  for (uint64_t at : {off, off + size / 2, off + size - 1}) {
    b_ = src_->enc;
    b_[at] ^= 0x01;
    expect_rejected(open(), Code::kCorruption, "index CRC32", "index byte " + std::to_string(at));
  }
}

TEST_F(FieldCorruption, IndexCrcFieldWrong) {
  const uint32_t bad = get_u32(b_, kHdrIndexCrc) ^ 0x00010000u;
  put_u32(b_, kHdrIndexCrc, bad);
  put_u32(b_, footer(b_) + kFtIndexCrc, bad);
  fix_header_crc(b_);
  fix_file_crc(b_);
  expect_rejected(open(), Code::kCorruption, "index CRC32", "index CRC32 field");
}

TEST_F(FieldCorruption, FooterDoesNotMatchHeader) {
  struct Edit {
    const char* what;
    size_t at;
  };
  for (Edit e : {Edit{"footer index offset", kFtIndexOff}, Edit{"footer index size", kFtIndexSize},
                 Edit{"footer index CRC32", kFtIndexCrc}, Edit{"footer header CRC32", kFtHeaderCrc}}) {
    b_ = src_->enc;
    b_[footer(b_) + e.at] ^= 0x04;
    expect_rejected(open(), Code::kCorruption, "footer", e.what);
  }
}

TEST_F(FieldCorruption, BadFooterMagic) {
  b_[footer(b_) + kFtMagic + 3] = 'X';
  expect_rejected(open(), Code::kCorruption, "footer", "footer magic");
}

TEST_F(FieldCorruption, IndexOffsetOutsideTheFile) {
  for (uint64_t off : {uint64_t{0}, uint64_t{64}, uint64_t{b_.size()}, uint64_t{1} << 62}) {
    b_ = src_->enc;
    put_u64(b_, kHdrIndexOff, off);
    put_u64(b_, footer(b_) + kFtIndexOff, off);
    fix_header_crc(b_);
    fix_file_crc(b_);
    expect_rejected(open(), Code::kCorruption, "index", "index offset " + std::to_string(off));
  }
}

TEST_F(FieldCorruption, IndexSizeTooLarge) {
  const uint64_t size = get_u64(b_, kHdrIndexSize) + (uint64_t{1} << 40);
  put_u64(b_, kHdrIndexSize, size);
  put_u64(b_, footer(b_) + kFtIndexSize, size);
  fix_header_crc(b_);
  fix_file_crc(b_);
  expect_rejected(open(), Code::kCorruption, "index", "index size + 2^40");
}

TEST_F(FieldCorruption, MetadataLengthBeyondTheIndex) {
  for (uint32_t len : {0xFFFFFFFFu, static_cast<uint32_t>(get_u64(b_, kHdrIndexOff))}) {
    b_ = src_->enc;
    put_u32(b_, kHdrMetaLen, len);
    fix_header_crc(b_);
    fix_file_crc(b_);
    expect_rejected(open(), Code::kCorruption, "metadata length", "metadata length " + std::to_string(len));
  }
}

TEST_F(FieldCorruption, OriginalHeaderLengthWrong) {
  for (uint64_t len : {uint64_t{0}, uint64_t{7}, uint64_t{1} << 40}) {
    b_ = src_->enc;
    put_u64(b_, kHdrOrigHdrLen, len);
    fix_header_crc(b_);
    fix_file_crc(b_);
    expect_rejected(open(), Code::kCorruption, "original header length", "original header length " + std::to_string(len));
  }
  // Off by 8 either way: plausible values, still inconsistent with the stored header.
  for (int64_t d : {-8, 8}) {
    b_ = src_->enc;
    put_u64(b_, kHdrOrigHdrLen, get_u64(src_->enc, kHdrOrigHdrLen) + d);
    fix_header_crc(b_);
    fix_file_crc(b_);
    auto r = open();
    EXPECT_FALSE(r.ok()) << "original header length off by " << d << " accepted";
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kCorruption) << r.status().ToString();
    }
  }
}

TEST_F(FieldCorruption, OriginalSizeWrong) {
  for (int64_t d : {-1, 1, 4096}) {
    b_ = src_->enc;
    put_u64(b_, kHdrOrigSize, get_u64(src_->enc, kHdrOrigSize) + d);
    fix_header_crc(b_);
    fix_file_crc(b_);
    auto r = open();
    ASSERT_FALSE(r.ok()) << "original size off by " << d << " accepted";
    EXPECT_EQ(r.status().code(), Code::kCorruption) << r.status().ToString();
  }
}

TEST_F(FieldCorruption, StoredSha256Wrong) {
  // Every CRC consistent: only the full verification can tell.
  b_[kHdrSha + 5] ^= 0x20;
  fix_header_crc(b_);
  fix_file_crc(b_);
  auto r = open();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Reader& rd = **r;
  EXPECT_TRUE(rd.verify(false).ok()) << "the stored bytes are self-consistent";
  const Status v = rd.verify(true);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.code(), Code::kCorruption);
  EXPECT_TRUE(contains(v.message(), "SHA-256")) << v.ToString();
  const fs::path out = scratch() / "sha_wrong.decoded";
  const Status d = rd.decode_to_file(out.string());
  ASSERT_FALSE(d.ok()) << "decode_to_file ignored the SHA-256 mismatch";
  EXPECT_TRUE(contains(d.message(), "SHA-256")) << d.ToString();
  EXPECT_FALSE(fs::exists(out)) << "decode_to_file left an output file behind";
  // Chunks carry their own checksums: reads still give the original bytes.
  std::vector<uint8_t> all(src_->orig.size());
  ASSERT_TRUE(rd.read(0, all.size(), all.data()).ok());
  EXPECT_TRUE(all == src_->orig);
}

TEST_F(FieldCorruption, FileCrcWrong) {
  b_[footer(b_) + kFtFileCrc] ^= 0x80;
  auto r = open();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Status v = (*r)->verify(false);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.code(), Code::kCorruption);
  EXPECT_TRUE(contains(v.message(), "file CRC32")) << v.ToString();
  EXPECT_FALSE((*r)->verify(true).ok());
}

TEST_F(FieldCorruption, PaddingByteDamagedIsFoundByVerifyOnly) {
  // A zero byte between the metadata and the first chunk payload (alignment
  // padding) carries no data: reads are unaffected, verify(false) still fails.
  auto pr = open();
  ASSERT_TRUE(pr.ok());
  ASSERT_GT((*pr)->num_chunks(), 0u);
  uint64_t first = UINT64_MAX;
  for (size_t i = 0; i < (*pr)->num_chunks(); ++i) first = std::min(first, (*pr)->chunk(i).file_offset);
  const uint64_t meta_end = wcodec::kHeaderSize + get_u32(b_, kHdrMetaLen);
  if (first <= meta_end) GTEST_SKIP() << "no padding before the first chunk";
  ASSERT_EQ(b_[first - 1], 0) << "expected zero padding before the first chunk";
  b_[first - 1] = 0xEE;
  auto r = open();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE((*r)->verify(false).ok());
  std::vector<uint8_t> all(src_->orig.size());
  ASSERT_TRUE((*r)->read(0, all.size(), all.data()).ok());
  EXPECT_TRUE(all == src_->orig);
}

// ------------------------------------------------------------ chunk payloads

// Name of the tensor whose data holds original offset `off`.
std::string tensor_at(const Reader& rd, uint64_t off) {
  for (const auto& t : rd.header().tensors)
    if (off >= rd.data_start() + t.begin && off < rd.data_start() + t.end) return t.name;
  return {};
}

// Finds a chunk with `method` in `s` (the largest such chunk).
std::optional<size_t> find_chunk(const Reader& rd, uint8_t method) {
  std::optional<size_t> best;
  for (size_t i = 0; i < rd.num_chunks(); ++i) {
    if (rd.chunk(i).method != method || rd.chunk(i).stored_size < 8) continue;
    if (!best || rd.chunk(i).stored_size > rd.chunk(*best).stored_size) best = i;
  }
  return best;
}

// Damages one byte in the middle of chunk `ci`'s payload (no CRC fixed) and
// checks: open succeeds, verify fails, reads touching the chunk fail with a
// message naming the tensor and the chunk, every other chunk reads correctly.
// Chunks of tensors in `dependents` may also fail (they need the damaged one).
void check_damaged_chunk(const Source& s, size_t ci, const std::set<std::string>& dependents = {}) {
  auto pr = open_bytes(s.name + ".chunk.pristine.wcodec", s.enc);
  ASSERT_TRUE(pr.ok()) << pr.status().ToString();
  const wcodec::ChunkEntry c = (*pr)->chunk(ci);
  const std::string tname = tensor_at(**pr, c.decoded_offset);
  ASSERT_FALSE(tname.empty());
  SCOPED_TRACE(s.name + ": chunk " + std::to_string(ci) + " (method " + std::to_string(c.method) + ") of \"" +
               tname + "\"");

  std::vector<uint8_t> b = s.enc;
  b[c.file_offset + c.stored_size / 2] ^= 0x40;
  auto r = open_bytes(s.name + ".chunk.damaged.wcodec", b);
  ASSERT_TRUE(r.ok()) << "index and header are intact, open must succeed: " << r.status().ToString();
  const Reader& rd = **r;
  ASSERT_EQ(rd.num_chunks(), (*pr)->num_chunks());

  const Status v = rd.verify(false);
  EXPECT_FALSE(v.ok()) << "verify(false) missed a damaged chunk payload";
  EXPECT_EQ(v.code(), Code::kCorruption);
  EXPECT_FALSE(rd.verify(true).ok());
  {
    const fs::path out = scratch() / (s.name + ".chunk.decoded");
    EXPECT_FALSE(rd.decode_to_file(out.string()).ok());
    EXPECT_FALSE(fs::exists(out));
  }

  // Reads inside the damaged chunk: the whole chunk, one byte in the middle,
  // one byte each side of its start.
  std::vector<uint8_t> buf(c.decoded_size + 2);
  const std::pair<uint64_t, uint64_t> inside[] = {
      {c.decoded_offset, c.decoded_size}, {c.decoded_offset + c.decoded_size / 2, 1}, {c.decoded_offset, 1}};
  for (auto [off, len] : inside) {
    const Status st = rd.read(off, len, buf.data());
    ASSERT_FALSE(st.ok()) << "read(" << off << ", " << len << ") of a damaged chunk succeeded";
    EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
    EXPECT_TRUE(contains(st.message(), tname)) << "message does not name the tensor: " << st.ToString();
    EXPECT_TRUE(contains(st.message(), "chunk")) << st.ToString();
  }
  {
    // The message names the tensor and the chunk's index in it exactly
    // (the reader builds that name only when a chunk fails).
    size_t local = 0;
    for (size_t i = 0; i < ci; ++i) local += tensor_at(rd, rd.chunk(i).decoded_offset) == tname ? 1 : 0;
    const Status st = rd.decode_chunk(ci, buf.data());
    EXPECT_FALSE(st.ok());
    EXPECT_TRUE(contains(st.message(), "tensor \"" + tname + "\" chunk " + std::to_string(local) + ":"))
        << st.ToString();
  }
  // A read that starts in the previous chunk and ends inside the damaged one.
  if (c.decoded_offset > rd.data_start()) {
    EXPECT_FALSE(rd.read(c.decoded_offset - 1, 2, buf.data()).ok());
  }

  // Everything else is still readable and correct.
  std::vector<uint8_t> hdr(rd.data_start());
  ASSERT_TRUE(rd.read(0, hdr.size(), hdr.data()).ok());
  EXPECT_TRUE(std::equal(hdr.begin(), hdr.end(), s.orig.begin()));
  int others = 0;
  for (size_t i = 0; i < rd.num_chunks(); ++i) {
    if (i == ci) continue;
    const auto& o = rd.chunk(i);
    const std::string on = tensor_at(rd, o.decoded_offset);
    std::vector<uint8_t> ob(o.decoded_size);
    const Status st = rd.read(o.decoded_offset, o.decoded_size, ob.data());
    if (dependents.count(on)) {
      if (st.ok()) {
        EXPECT_TRUE(std::equal(ob.begin(), ob.end(), s.orig.begin() + static_cast<ptrdiff_t>(o.decoded_offset)))
            << "\"" << on << "\" read wrong bytes after its zero-point tensor was damaged";
      }
      continue;
    }
    ASSERT_TRUE(st.ok()) << "chunk " << i << " of \"" << on << "\": " << st.ToString();
    ASSERT_TRUE(std::equal(ob.begin(), ob.end(), s.orig.begin() + static_cast<ptrdiff_t>(o.decoded_offset)))
        << "chunk " << i << " of \"" << on << "\" read wrong bytes";
    ++others;
  }
  EXPECT_GT(others, 0) << "no other chunk to read";
}

TEST(ChunkPayload, ModelCodedChunkOfRealInt8File) {
  const Source s = real_source("stories260K.rtn-int8.safetensors");
  check_pristine(s);
  if (HasFatalFailure()) return;
  auto r = open_bytes("find.wcodec", s.enc);
  ASSERT_TRUE(r.ok());
  const auto ci = find_chunk(**r, 2);
  ASSERT_TRUE(ci.has_value()) << "no model-coded chunk in " << s.name;
  check_damaged_chunk(s, *ci);
}

TEST(ChunkPayload, ModelCodedChunkOfRealBf16File) {
  const Source s = real_source("stories260K.bf16.safetensors");
  check_pristine(s);
  if (HasFatalFailure()) return;
  auto r = open_bytes("find.wcodec", s.enc);
  ASSERT_TRUE(r.ok());
  const auto ci = find_chunk(**r, 2);
  ASSERT_TRUE(ci.has_value()) << "no model-coded chunk in " << s.name;
  check_damaged_chunk(s, *ci);
}

// Float chunks decoded in groups (Reader::decode_chunk_group, and
// Reader::read over a group of neighbours): a damaged chunk fails with a
// message naming its tensor and chunk, the other members still decode to
// the original bytes. `across`: groups of chunks of three tensors (one
// shape, each tensor its own model; anywhere in the file, as the mount's
// decoder finds them among waiting requests); else three neighbouring
// chunks of one tensor.
void check_float_groups(const Source& s, bool across) {
  constexpr int kG = wcodec::kMaxChunkGroup;
  check_pristine(s);
  if (::testing::Test::HasFatalFailure()) return;
  auto pr = open_bytes("group.pristine.wcodec", s.enc);
  ASSERT_TRUE(pr.ok()) << pr.status().ToString();
  const Reader& pristine = **pr;
  auto tensor_of = [&](size_t ci) { return tensor_at(pristine, pristine.chunk(ci).decoded_offset); };
  std::vector<std::array<size_t, kG>> groups;
  for (size_t i = 0; i < pristine.num_chunks(); ++i) {
    std::array<size_t, kG> g{i, 0, 0};
    int n = 1;
    for (size_t j = i + 1; j < pristine.num_chunks() && n < kG && (across || j < i + kG); ++j) {
      if (!pristine.pairable(i, j)) continue;
      bool fits = true;
      for (int k = 0; k < n; ++k) fits &= across ? tensor_of(g[k]) != tensor_of(j) : tensor_of(g[k]) == tensor_of(j);
      if (fits) g[n++] = j;
    }
    if (n == kG) groups.push_back(g);
  }
  ASSERT_GE(groups.size(), 10u) << "too few groups of pairable float chunks in " << s.name;
  auto orig_of = [&](const wcodec::ChunkEntry& c) {
    return std::vector<uint8_t>(s.orig.begin() + static_cast<ptrdiff_t>(c.decoded_offset),
                                s.orig.begin() + static_cast<ptrdiff_t>(c.decoded_offset + c.decoded_size));
  };
  auto decode_group = [](const Reader& rd, const std::array<size_t, kG>& g, int n,
                         std::vector<std::vector<uint8_t>>* bufs, Status* sts) {
    uint8_t* outs[kG];
    bufs->assign(static_cast<size_t>(n), {});
    for (int k = 0; k < n; ++k) {
      (*bufs)[static_cast<size_t>(k)].assign(rd.chunk(g[static_cast<size_t>(k)]).decoded_size, 0xCC);
      outs[k] = (*bufs)[static_cast<size_t>(k)].data();
    }
    rd.decode_chunk_group(g.data(), outs, n, sts);
  };
  for (const auto& g : groups) {
    for (int n = 2; n <= kG; ++n) {
      std::vector<std::vector<uint8_t>> bufs;
      Status sts[kG];
      decode_group(pristine, g, n, &bufs, sts);
      for (int k = 0; k < n; ++k) {
        ASSERT_TRUE(sts[k].ok()) << sts[k].ToString();
        ASSERT_EQ(bufs[static_cast<size_t>(k)], orig_of(pristine.chunk(g[static_cast<size_t>(k)])))
            << "chunk " << g[static_cast<size_t>(k)];
      }
    }
  }
  // Reader::read over the span from a group's first member to its last
  // (the members and whatever lies between) gives the original bytes.
  auto span_of = [&](const Reader& rd, const std::array<size_t, kG>& g) {
    const uint64_t from = rd.chunk(g[0]).decoded_offset;
    const wcodec::ChunkEntry& last = rd.chunk(g[kG - 1]);
    return std::make_pair(from, last.decoded_offset + last.decoded_size - from);
  };
  for (size_t k = 0; k < groups.size(); k += 3) {
    const auto [from, len] = span_of(pristine, groups[k]);
    std::vector<uint8_t> got(len);
    ASSERT_TRUE(pristine.read(from, len, got.data()).ok());
    ASSERT_TRUE(std::equal(got.begin(), got.end(), s.orig.begin() + static_cast<ptrdiff_t>(from)))
        << "read over the group starting at chunk " << groups[k][0];
  }
  const auto& g = groups[groups.size() / 2];
  for (int bad_k = 0; bad_k < kG; ++bad_k) {
    const size_t bad = g[static_cast<size_t>(bad_k)];
    const wcodec::ChunkEntry c = pristine.chunk(bad);
    const std::string tname = tensor_at(pristine, c.decoded_offset);
    SCOPED_TRACE("damaged chunk " + std::to_string(bad) + " of \"" + tname + "\"");
    std::vector<uint8_t> dmg = s.enc;
    dmg[c.file_offset + c.stored_size / 2] ^= 0x40;
    auto r = open_bytes("group.damaged.wcodec", dmg);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const Reader& rd = **r;
    std::vector<std::vector<uint8_t>> bufs;
    Status sts[kG];
    decode_group(rd, g, kG, &bufs, sts);
    for (int k = 0; k < kG; ++k) {
      const size_t ci = g[static_cast<size_t>(k)];
      if (k == bad_k) {
        EXPECT_EQ(sts[k].code(), Code::kCorruption) << sts[k].ToString();
        EXPECT_TRUE(contains(sts[k].message(), tname)) << sts[k].ToString();
        EXPECT_TRUE(contains(sts[k].message(), "chunk")) << sts[k].ToString();
      } else {
        ASSERT_TRUE(sts[k].ok()) << sts[k].ToString();
        EXPECT_EQ(bufs[static_cast<size_t>(k)], orig_of(rd.chunk(ci))) << "an undamaged member read wrong bytes";
      }
    }
    // A read over the group fails naming the damaged chunk's tensor; each
    // undamaged member reads alone.
    {
      const auto [from, len] = span_of(rd, g);
      std::vector<uint8_t> all(len);
      const Status st = rd.read(from, len, all.data());
      EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
      EXPECT_TRUE(contains(st.message(), tname)) << st.ToString();
    }
    for (int k = 0; k < kG; ++k) {
      if (k == bad_k) continue;
      const wcodec::ChunkEntry& o = rd.chunk(g[static_cast<size_t>(k)]);
      std::vector<uint8_t> one(o.decoded_size);
      ASSERT_TRUE(rd.read(o.decoded_offset, one.size(), one.data()).ok());
      EXPECT_EQ(one, orig_of(o));
    }
  }
}

TEST(ChunkPayload, DamagedChunkOfAFloatGroup) {
  check_float_groups(encode_source("stories260K.bf16.4k",
                                   wctest::read_file(wctest::data_dir() / "stories260K.bf16.safetensors"), 4096),
                     /*across=*/false);
}

// One-chunk tensors of one shape (the projections of every layer) decode in
// groups that span tensors.
TEST(ChunkPayload, DamagedChunkOfACrossTensorGroup) {
  check_float_groups(real_source("stories260K.bf16.safetensors"), /*across=*/true);
}

// Raw (method 0) and zstd (method 1) chunks: searched for in the real small
// files and the edge cases (incompressible bytes give raw chunks).
std::optional<std::pair<Source, size_t>> find_source_with_method(uint8_t method) {
  std::vector<std::pair<std::string, uint64_t>> edge = {
      {"random_u8_1mib", 256 * 1024}, {"constant", 4096}, {"all_zero", 4096}, {"dtype_c64_random", 4096},
      {"dtype_bool_random", 4096},    {"dtype_u64_realistic", 4096}, {"large_metadata", 4096}};
  for (const char* f : {"stories260K.rtn-int8.safetensors", "stories260K.bf16.safetensors"}) {
    Source s = real_source(f);
    auto r = open_bytes("probe.wcodec", s.enc);
    if (r.ok())
      if (auto ci = find_chunk(**r, method)) return std::make_pair(std::move(s), *ci);
  }
  for (auto& [name, cb] : edge) {
    Source s = edge_source(name, cb);
    auto r = open_bytes("probe.wcodec", s.enc);
    if (r.ok())
      if (auto ci = find_chunk(**r, method)) return std::make_pair(std::move(s), *ci);
  }
  return std::nullopt;
}

TEST(ChunkPayload, RawChunk) {
  auto f = find_source_with_method(0);
  ASSERT_TRUE(f.has_value()) << "no raw chunk found (1 MiB of random bytes should be stored raw)";
  check_pristine(f->first);
  if (HasFatalFailure()) return;
  check_damaged_chunk(f->first, f->second);
}

TEST(ChunkPayload, ZstdChunk) {
  auto f = find_source_with_method(1);
  if (!f) GTEST_SKIP() << "the encoder chose no zstd chunk for any candidate input";
  check_pristine(f->first);
  if (HasFatalFailure()) return;
  check_damaged_chunk(f->first, f->second);
}

TEST(ChunkPayload, ZeroPointChunkOfRealInt4File) {
  // rtn-int4: `*_packed` tensors are coded with their `*_zero` tensor as
  // context. Damaging a `_zero` chunk may make the packed tensor unreadable,
  // but never wrong.
  const Source s = real_source("stories260K.rtn-int4.safetensors");
  check_pristine(s);
  if (HasFatalFailure()) return;
  auto r = open_bytes("find.wcodec", s.enc);
  ASSERT_TRUE(r.ok());
  const Reader& rd = **r;
  std::optional<size_t> ci;
  std::string zname;
  for (size_t i = 0; i < rd.num_chunks() && !ci; ++i) {
    const std::string n = tensor_at(rd, rd.chunk(i).decoded_offset);
    if (n.size() > 5 && n.ends_with("_zero") && rd.chunk(i).stored_size >= 8) {
      ci = i;
      zname = n;
    }
  }
  ASSERT_TRUE(ci.has_value()) << "no *_zero tensor chunk";
  const std::string packed = zname.substr(0, zname.size() - 5) + "_packed";
  check_damaged_chunk(s, *ci, {packed});
}

}  // namespace
