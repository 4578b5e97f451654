// tests/test_format_vectors.cpp — the annotated test vectors of
// docs/wcodec-format.md ("Test vectors"), checked byte for byte against the
// encoder and reader, so the spec's tables cannot drift from the code.
//
// Vector 1 is a tiny safetensors file (144 bytes): tensor "a" F32 [2] =
// [1.0, -2.0] and tensor "b" I8 [4,4] = -8..7, built in memory with
// build_safetensors and encoded with the default EncodeConfig (threads = 1).
// Every fixed field of the 128-byte header, the 32-byte footer, the index
// section (decompressed) and the chunk table is read at its documented
// offset. Fields whose bytes depend on the zstd build or on the encoder's
// version string (index size, the three CRC32 values, metadata length) are
// checked by recomputing them from the documented coverage, not by value.
//
// Vector 2 is the frequency-table code example (Elias-gamma, LSB-first) and
// vector 3 the lane-rectangle example; both use the codec's own functions.
// CRC32 is computed here with a plain bitwise implementation (CRC-32/ISO-HDLC)
// so the test does not depend on zlib.
// Thread-safety: single-threaded test code.
#include <gtest/gtest.h>
#include <xxhash.h>
#include <zstd.h>

#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "chunk_model.h"
#include "rans.h"
#include "rans_encoder.h"
#include "testutil.h"
#include "wcodec/container.h"
#include "wcodec/safetensors.h"

namespace {

using wcodec::Code;
using wcodec::DType;

// ------------------------------------------------------------ helpers

uint16_t U16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t U32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t U64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// CRC-32/ISO-HDLC (the zlib crc32): reflected polynomial 0xEDB88320,
// initial value and final xor 0xFFFFFFFF.
uint32_t Crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

std::string Hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

// Bounded little-endian cursor over the decompressed index (LEB128 varints).
class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return n_ - pos_; }
  const uint8_t* take(size_t k) {
    if (k > n_ - pos_) {
      ADD_FAILURE() << "index ends early at " << pos_ << " (need " << k << " bytes)";
      pos_ = n_;
      static const uint8_t zeros[64] = {};
      return zeros;
    }
    const uint8_t* r = p_ + pos_;
    pos_ += k;
    return r;
  }
  uint8_t u8() { return *take(1); }
  uint32_t u32() { return U32(take(4)); }
  int32_t i32() { return static_cast<int32_t>(u32()); }
  uint64_t u64() { return U64(take(8)); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t b = u8();
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ADD_FAILURE() << "varint longer than 10 bytes";
    return 0;
  }
  std::string str() {
    const uint64_t len = varint();
    const uint8_t* s = take(len);
    return std::string(reinterpret_cast<const char*>(s), len);
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

// ------------------------------------------------------------ vector 1

// The documented tiny input: 8-byte length 0x70, 112 bytes of JSON (109
// bytes padded with three spaces), 8 bytes of "a", 16 bytes of "b".
const char kTinyJson[] =
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
    "\"b\":{\"dtype\":\"I8\",\"shape\":[4,4],\"data_offsets\":[8,24]}}   ";
const char kTinySha256[] = "dd18ef396d34c8b7c3d0582c1d8c58e49181acf2b54af0908c2bfa81138d04e7";
const std::vector<uint8_t> kTensorA = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0};  // 1.0f, -2.0f
std::vector<uint8_t> TensorB() {
  std::vector<uint8_t> b;
  for (int i = 0; i < 16; ++i) b.push_back(static_cast<uint8_t>(i - 8));  // f8 f9 .. 07
  return b;
}

std::vector<uint8_t> TinyInput() {
  std::vector<wcodec::TensorData> t;
  t.push_back({"a", DType::kF32, {2}, kTensorA});
  t.push_back({"b", DType::kI8, {4, 4}, TensorB()});
  auto r = wcodec::build_safetensors(t, std::nullopt);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : std::vector<uint8_t>{};
}

std::vector<uint8_t> Encode(const std::vector<uint8_t>& in) {
  wcodec::EncodeConfig cfg;
  cfg.threads = 1;
  auto r = wcodec::encode_safetensors(in.data(), in.size(), cfg, "tiny.safetensors");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : std::vector<uint8_t>{};
}

// Documented layout of vector 1.
constexpr uint64_t kOrigSize = 144;
constexpr uint64_t kOrigHeaderLen = 120;  // 8 + N, N = 112
constexpr uint64_t kPayloadA = 0x100;     // first payload: data region starts at 256
constexpr uint64_t kPayloadB = 0x110;     // next 16-byte boundary after 8 bytes
constexpr uint64_t kIndexOff = 0x180;     // payloads end at 0x120, padded to 128
constexpr uint64_t kRawIndexSize = 0x1ac; // 120 + 8 + 146 + 154
constexpr uint64_t kXxh3A = 0x28a0ba9c345d3723ull;
constexpr uint64_t kXxh3B = 0x9c9636b969a1a4c1ull;
constexpr uint32_t kCrcA = 0xc3872656u;
constexpr uint32_t kCrcB = 0xcd7459eau;

class FormatVector1 : public ::testing::Test {
 protected:
  void SetUp() override {
    in_ = TinyInput();
    ASSERT_EQ(in_.size(), kOrigSize);
    enc_ = Encode(in_);
    ASSERT_GE(enc_.size(), size_t{wcodec::kHeaderSize + wcodec::kFooterSize});
    h_ = enc_.data();
    f_ = enc_.data() + enc_.size() - wcodec::kFooterSize;
  }
  // The decompressed index: [original safetensors header][u64 count][records].
  std::vector<uint8_t> RawIndex() const {
    const uint64_t off = U64(h_ + 32), size = U64(h_ + 40);
    EXPECT_LE(off + size, enc_.size());
    const uint64_t raw = U64(h_ + off);
    std::vector<uint8_t> ix(raw);
    const size_t r = ZSTD_decompress(ix.data(), ix.size(), h_ + off + 8, size - 8);
    EXPECT_FALSE(ZSTD_isError(r)) << ZSTD_getErrorName(r);
    EXPECT_EQ(r, raw);
    return ix;
  }

  std::vector<uint8_t> in_, enc_;
  const uint8_t* h_ = nullptr;  // header
  const uint8_t* f_ = nullptr;  // footer
};

TEST_F(FormatVector1, InputIsTheDocumentedSafetensorsFile) {
  EXPECT_EQ(U64(in_.data()), 112u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(in_.data() + 8), 112), std::string(kTinyJson));
  EXPECT_EQ(std::vector<uint8_t>(in_.begin() + 120, in_.begin() + 128), kTensorA);
  EXPECT_EQ(std::vector<uint8_t>(in_.begin() + 128, in_.end()), TensorB());
  EXPECT_EQ(wctest::sha256_hex(in_), kTinySha256);
}

TEST_F(FormatVector1, HeaderFieldsAtTheirOffsets) {
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(h_), 4), "WCDC");  // 0: magic
  EXPECT_EQ(Hex(h_, 4), "57434443");
  EXPECT_EQ(U16(h_ + 4), 2u);                                   // 4: major
  EXPECT_EQ(U16(h_ + 6), 0u);                                   // 6: minor
  EXPECT_EQ(U32(h_ + 8), 0u);                                   // 8: flags
  const uint32_t meta_len = U32(h_ + 12);                       // 12: metadata length
  EXPECT_EQ(U64(h_ + 16), kOrigSize);                           // 16: original size
  EXPECT_EQ(U64(h_ + 24), kOrigHeaderLen);                      // 24: original header length
  EXPECT_EQ(U64(h_ + 32), kIndexOff);                           // 32: index offset
  const uint64_t index_size = U64(h_ + 40);                     // 40: index size
  EXPECT_EQ(Hex(h_ + 48, 32), kTinySha256);                     // 48: SHA-256 of the input
  EXPECT_EQ(Hex(h_ + 48, 32), wctest::sha256_hex(in_));
  for (int i = 84; i < 124; ++i) EXPECT_EQ(h_[i], 0) << "reserved header byte " << i;  // 84..123
  // The metadata JSON starts right after the header and ends before the
  // first payload; the index section runs from its offset to the footer.
  EXPECT_GT(meta_len, 0u);
  EXPECT_LE(wcodec::kHeaderSize + meta_len, kPayloadA);
  EXPECT_EQ(kIndexOff + index_size, enc_.size() - wcodec::kFooterSize);
  EXPECT_EQ(kIndexOff % wcodec::kAlign, 0u);
}

TEST_F(FormatVector1, FooterRepeatsTheHeader) {
  EXPECT_EQ(U64(f_ + 0), U64(h_ + 32));   // index offset
  EXPECT_EQ(U64(f_ + 8), U64(h_ + 40));   // index size
  EXPECT_EQ(U32(f_ + 16), U32(h_ + 80));  // index CRC32
  EXPECT_EQ(U32(f_ + 20), U32(h_ + 124)); // header CRC32
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f_ + 28), 4), "CDCW");
  EXPECT_EQ(Hex(f_ + 28, 4), "43444357");
}

TEST_F(FormatVector1, ChecksumsCoverTheDocumentedRanges) {
  EXPECT_EQ(Crc32(nullptr, 0), 0u);
  EXPECT_EQ(Crc32(reinterpret_cast<const uint8_t*>("123456789"), 9), 0xCBF43926u);  // check value
  // Header CRC32: bytes 0..123.
  EXPECT_EQ(U32(h_ + 124), Crc32(h_, 124));
  // Index CRC32: the whole index section (u64 raw size + zstd frame).
  EXPECT_EQ(U32(h_ + 80), Crc32(h_ + U64(h_ + 32), U64(h_ + 40)));
  // File CRC32: every byte before the footer.
  EXPECT_EQ(U32(f_ + 24), Crc32(enc_.data(), enc_.size() - wcodec::kFooterSize));
}

TEST_F(FormatVector1, MetadataJson) {
  const uint32_t meta_len = U32(h_ + 12);
  const std::string meta(reinterpret_cast<const char*>(h_ + 128), meta_len);
  const auto j = nlohmann::json::parse(meta);
  EXPECT_EQ(j.at("format"), "wcodec");
  EXPECT_EQ(j.at("version"), "2.0");
  EXPECT_EQ(j.at("source_format"), "safetensors");
  EXPECT_EQ(j.at("tensors"), 2);
  EXPECT_EQ(j.at("chunk_bytes"), 262144);
  EXPECT_EQ(j.at("encoder").get<std::string>().rfind("wcodec ", 0), 0u);
  // Compact serialization, keys in byte order (the documented vector).
  EXPECT_EQ(meta, j.dump());
  // Padding after the metadata up to the first payload is zero.
  for (uint64_t i = 128 + meta_len; i < kPayloadA; ++i) EXPECT_EQ(h_[i], 0) << "padding byte " << i;
}

TEST_F(FormatVector1, ChunkPayloadsAndPadding) {
  // Both tensors are below the model threshold: one raw chunk each, stored
  // verbatim at 16-byte aligned offsets; everything else up to the index is
  // zero padding.
  EXPECT_EQ(std::vector<uint8_t>(enc_.begin() + kPayloadA, enc_.begin() + kPayloadA + 8), kTensorA);
  EXPECT_EQ(std::vector<uint8_t>(enc_.begin() + kPayloadB, enc_.begin() + kPayloadB + 16), TensorB());
  for (uint64_t i = kPayloadA + 8; i < kPayloadB; ++i) EXPECT_EQ(h_[i], 0) << i;
  for (uint64_t i = kPayloadB + 16; i < kIndexOff; ++i) EXPECT_EQ(h_[i], 0) << i;
}

TEST_F(FormatVector1, IndexSection) {
  EXPECT_EQ(U64(h_ + kIndexOff), kRawIndexSize);                  // u64 raw size
  EXPECT_EQ(U32(h_ + kIndexOff + 8), 0xFD2FB528u);                 // zstd frame magic
  const std::vector<uint8_t> ix = RawIndex();
  ASSERT_EQ(ix.size(), kRawIndexSize);
  // The original safetensors header, verbatim.
  EXPECT_EQ(std::vector<uint8_t>(ix.begin(), ix.begin() + kOrigHeaderLen),
            std::vector<uint8_t>(in_.begin(), in_.begin() + kOrigHeaderLen));
  Cursor c(ix.data() + kOrigHeaderLen, ix.size() - kOrigHeaderLen);
  EXPECT_EQ(c.u64(), 2u);  // tensor count

  struct Want {
    std::string name;
    uint8_t dtype;
    std::vector<uint64_t> shape;
    uint64_t begin, end;
    uint32_t crc;
    uint64_t payload;
    uint64_t xxh3;
    std::vector<uint8_t> bytes;
  };
  const Want want[2] = {{"a", 11, {2}, 0, 8, kCrcA, kPayloadA, kXxh3A, kTensorA},
                        {"b", 2, {4, 4}, 8, 24, kCrcB, kPayloadB, kXxh3B, TensorB()}};
  for (const Want& w : want) {
    SCOPED_TRACE("tensor " + w.name);
    const size_t rec_start = c.pos();
    EXPECT_EQ(c.str(), w.name);
    EXPECT_EQ(c.u8(), w.dtype);  // DType: F32 = 11, I8 = 2
    const uint8_t ndim = c.u8();
    ASSERT_EQ(ndim, w.shape.size());
    for (uint64_t d : w.shape) EXPECT_EQ(c.u64(), d);
    EXPECT_EQ(c.u64(), w.begin);
    EXPECT_EQ(c.u64(), w.end);
    const uint32_t crc = c.u32();
    EXPECT_EQ(crc, w.crc);
    EXPECT_EQ(crc, Crc32(w.bytes.data(), w.bytes.size()));
    const uint64_t n = w.end - w.begin;
    EXPECT_EQ(c.u64(), 1u);  // rows: a raw-only tensor is one row of bytes
    EXPECT_EQ(c.u64(), n);   // cols
    EXPECT_EQ(c.u64(), 1u);  // chunk rows
    EXPECT_EQ(c.u64(), n);   // chunk cols (== cols: a band of rows)
    EXPECT_EQ(c.u8(), 8u);   // elem bits
    EXPECT_EQ(c.i32(), -1);  // aux tensor: none
    EXPECT_EQ(c.u8(), 0u);   // model_flag: no model
    EXPECT_EQ(c.varint(), 1u);  // chunk count
    // Chunk entry (25 bytes).
    EXPECT_EQ(c.u64(), w.payload);  // file offset
    EXPECT_EQ(c.u32(), n);          // stored size
    EXPECT_EQ(c.u32(), n);          // decoded size
    EXPECT_EQ(c.u8(), 0u);          // method: raw
    const uint64_t xxh = c.u64();
    EXPECT_EQ(xxh, w.xxh3);
    EXPECT_EQ(xxh, XXH3_64bits(w.bytes.data(), w.bytes.size()));
    // Informative trailer: kind, model description, tool statistics.
    EXPECT_EQ(c.str(), "raw");
    EXPECT_EQ(c.str(), "-");
    for (int i = 0; i < 2 + 6 + 3; ++i) EXPECT_EQ(c.u32(), 0u);
    EXPECT_EQ(c.pos() - rec_start, w.name == "a" ? 146u : 154u);
  }
  EXPECT_EQ(c.remaining(), 0u);
}

TEST_F(FormatVector1, EncoderIsDeterministic) { EXPECT_EQ(Encode(in_), enc_); }

TEST_F(FormatVector1, DecodesToTheInput) {
  wctest::ScratchDir dir;
  const auto path = dir / "tiny.wcodec";
  wctest::write_file(path, enc_);
  auto rd = wcodec::Reader::open(path.string());
  ASSERT_TRUE(rd.ok()) << rd.status().ToString();
  const auto& r = *rd.value();
  EXPECT_EQ(r.original_size(), kOrigSize);
  EXPECT_EQ(r.file_size(), enc_.size());
  EXPECT_EQ(Hex(r.original_sha256().data(), 32), kTinySha256);
  EXPECT_EQ(r.metadata_json(), std::string(reinterpret_cast<const char*>(h_ + 128), U32(h_ + 12)));
  ASSERT_EQ(r.num_tensors(), 2u);
  ASSERT_EQ(r.num_chunks(), 2u);
  EXPECT_EQ(r.data_start(), kOrigHeaderLen);
  EXPECT_EQ(r.chunk(0).file_offset, kPayloadA);
  EXPECT_EQ(r.chunk(0).decoded_offset, kOrigHeaderLen);
  EXPECT_EQ(r.chunk(1).file_offset, kPayloadB);
  EXPECT_EQ(r.chunk(1).decoded_offset, kOrigHeaderLen + 8);
  EXPECT_EQ(r.tensor_summary(0).crc32, kCrcA);
  EXPECT_EQ(r.tensor_summary(1).crc32, kCrcB);
  std::vector<uint8_t> out(kOrigSize);
  ASSERT_TRUE(r.read(0, out.size(), out.data()).ok());
  EXPECT_EQ(out, in_);
  // A read straddling the header/data boundary and both chunks.
  std::vector<uint8_t> part(20);
  ASSERT_TRUE(r.read(110, part.size(), part.data()).ok());
  EXPECT_EQ(part, std::vector<uint8_t>(in_.begin() + 110, in_.begin() + 130));
  EXPECT_TRUE(r.verify(true).ok());
}

// "Reserved bits and bytes must be zero and decoders must reject them", and
// the version rules: an edited header (with its CRC32 and the footer's copy
// recomputed, so only the edited field is wrong) must be rejected or, for a
// newer minor version, accepted.
TEST_F(FormatVector1, HeaderEditsAreJudgedByTheDocumentedRules) {
  wctest::ScratchDir dir;
  auto open_edited = [&](size_t off, uint8_t value) {
    std::vector<uint8_t> e = enc_;
    e[off] = value;
    const uint32_t crc = Crc32(e.data(), 124);
    PutU32(e.data() + 124, crc);
    PutU32(e.data() + e.size() - wcodec::kFooterSize + 20, crc);
    // The file CRC is only checked by verify(); keep it right anyway.
    PutU32(e.data() + e.size() - wcodec::kFooterSize + 24, Crc32(e.data(), e.size() - wcodec::kFooterSize));
    const auto path = dir / ("edit_" + std::to_string(off) + "_" + std::to_string(value) + ".wcodec");
    wctest::write_file(path, e);
    return wcodec::Reader::open(path.string());
  };
  {
    auto r = open_edited(0, 'X');  // magic
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kCorruption);
  }
  {
    auto r = open_edited(4, 3);  // major version 3
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kNotSupported);
  }
  {
    auto r = open_edited(6, 1);  // minor version 1: a 2.x reader accepts it
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  {
    auto r = open_edited(4, 1);  // major version 1 (no model tables here): readable
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  for (size_t off : {size_t{8}, size_t{11}}) {  // flags
    auto r = open_edited(off, 0x80);
    ASSERT_FALSE(r.ok()) << off;
    EXPECT_EQ(r.status().code(), Code::kCorruption);
    EXPECT_NE(r.status().message().find("flags"), std::string::npos) << r.status().ToString();
  }
  for (size_t off : {size_t{84}, size_t{100}, size_t{123}}) {  // reserved bytes
    auto r = open_edited(off, 1);
    ASSERT_FALSE(r.ok()) << off;
    EXPECT_EQ(r.status().code(), Code::kCorruption);
    EXPECT_NE(r.status().message().find("reserved"), std::string::npos) << r.status().ToString();
  }
  {
    // A flipped bit anywhere in bytes 0..123 without fixing the CRC.
    std::vector<uint8_t> e = enc_;
    e[20] ^= 0x01;
    const auto path = dir / "bad_crc.wcodec";
    wctest::write_file(path, e);
    auto r = wcodec::Reader::open(path.string());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("header CRC32"), std::string::npos) << r.status().ToString();
  }
}

// ------------------------------------------------------------ vector 2

// Frequency table {2048, 1024, 0, 1024} over a 4-symbol alphabet, gamma
// coding (format 1.0): gamma(4) gamma(1) gamma(2048) gamma(1) gamma(1024)
// gamma(2), 54 bits, LSB-first: 24 00 02 20 00 01 10.
TEST(FormatVectors, FrequencyTableCode) {
  wcodec::FreqTable t;
  t.P = wcodec::kMaxProbBits;
  t.freq = {2048, 1024, 0, 1024};
  t.build_start();
  wcodec::BitWriter bw;
  wcodec::write_table(bw, t, wcodec::kTablesGamma);
  EXPECT_EQ(bw.bits(), 54u);
  const std::vector<uint8_t> bytes = bw.finish();
  EXPECT_EQ(bytes, (std::vector<uint8_t>{0x24, 0x00, 0x02, 0x20, 0x00, 0x01, 0x10}));
  wcodec::BitReader br(bytes.data(), bytes.size());
  wcodec::FreqTable back;
  ASSERT_TRUE(wcodec::read_table(br, 4, wcodec::kMaxProbBits, &back, wcodec::kTablesGamma));
  EXPECT_EQ(back.freq, t.freq);
  // Cumulative starts of the documented decode example.
  EXPECT_EQ(back.start, (std::vector<uint16_t>{0, 2048, 3072, 3072}));
  // Rejections: an explicit frequency of 4096 (gamma(4096) for symbol 0).
  wcodec::BitWriter bad;
  bad.gamma(3);     // nz = 2
  bad.gamma(1);     // symbol 0
  bad.gamma(4096);  // frequency >= 2^12
  bad.gamma(1);     // symbol 1
  const auto bb = bad.finish();
  wcodec::BitReader br2(bb.data(), bb.size());
  EXPECT_FALSE(wcodec::read_table(br2, 4, wcodec::kMaxProbBits, &back, wcodec::kTablesGamma));
}

// The same table in the compact coding (format 1.1) at q = 1 (no bits below
// the leading one): gamma(4) q:3 bits=1, gamma(1) gamma(12) [2^11],
// gamma(1) gamma(11) [2^10], gamma(2): 27 bits, LSB-first: 24 91 71 02.
TEST(FormatVectors, CompactFrequencyTableCode) {
  wcodec::FreqTable t;
  t.P = wcodec::kMaxProbBits;
  t.freq = {2048, 1024, 0, 1024};
  t.q = 1;
  t.build_start();
  wcodec::BitWriter bw;
  wcodec::write_table(bw, t, wcodec::kTablesCompact);
  EXPECT_EQ(bw.bits(), 27u);
  EXPECT_DOUBLE_EQ(wcodec::table_size_bits(t, wcodec::kTablesCompact), 27.0);
  const std::vector<uint8_t> bytes = bw.finish();
  EXPECT_EQ(bytes, (std::vector<uint8_t>{0x24, 0x91, 0x71, 0x02}));
  wcodec::BitReader br(bytes.data(), bytes.size());
  wcodec::FreqTable back;
  ASSERT_TRUE(wcodec::read_table(br, 4, wcodec::kMaxProbBits, &back, wcodec::kTablesCompact));
  EXPECT_EQ(back.freq, t.freq);
  EXPECT_EQ(back.q, 1);
  // q = 0 keeps every bit: 1000 = 2^9 + 488 costs gamma(10) + 9 bits.
  wcodec::FreqTable e;
  e.P = wcodec::kMaxProbBits;
  e.freq = {1000, 3096};
  e.build_start();
  wcodec::BitWriter bw2;
  wcodec::write_table(bw2, e, wcodec::kTablesCompact);
  EXPECT_EQ(bw2.bits(), 3u + 3u + 1u + 7u + 9u + 1u);
  const auto b2 = bw2.finish();
  wcodec::BitReader br2(b2.data(), b2.size());
  ASSERT_TRUE(wcodec::read_table(br2, 2, wcodec::kMaxProbBits, &back, wcodec::kTablesCompact));
  EXPECT_EQ(back.freq, e.freq);
  // Rejections: an exponent of 12 (a frequency >= 2^12).
  wcodec::BitWriter bad;
  bad.gamma(3);   // nz = 2
  bad.put(0, 3);  // q = 0
  bad.gamma(1);   // symbol 0
  bad.gamma(13);  // exponent 12
  bad.put(0, 12);
  bad.gamma(1);  // symbol 1
  const auto bb = bad.finish();
  wcodec::BitReader br3(bb.data(), bb.size());
  EXPECT_FALSE(wcodec::read_table(br3, 4, wcodec::kMaxProbBits, &back, wcodec::kTablesCompact));
}

// The encoder's choice: never worse than the exact table, and cheaper on a
// small sample where 12-bit frequencies cost more than they save.
TEST(FormatVectors, CompactTableChoice) {
  std::vector<uint64_t> counts(40, 0);
  for (size_t s = 0; s < counts.size(); ++s) counts[s] = 1 + (s * 37) % 23;
  const wcodec::FreqTable exact = wcodec::normalize_counts(counts, wcodec::kMaxProbBits);
  const wcodec::FreqTable c = wcodec::choose_compact_table(counts, exact);
  uint32_t sum = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    EXPECT_GT(c.freq[s], 0u) << s;
    sum += c.freq[s];
  }
  EXPECT_EQ(sum, 4096u);
  const double exact_bits = wcodec::table_cost_bits(counts, exact) + wcodec::table_size_bits(exact);
  const double chosen_bits = wcodec::table_cost_bits(counts, c) + wcodec::table_size_bits(c);
  EXPECT_LT(chosen_bits, exact_bits);
  EXPECT_GT(c.q, 0);
  // Round trip of the chosen table.
  wcodec::BitWriter bw;
  wcodec::write_table(bw, c);
  const auto b = bw.finish();
  wcodec::BitReader br(b.data(), b.size());
  wcodec::FreqTable back;
  ASSERT_TRUE(wcodec::read_table(br, 40, wcodec::kMaxProbBits, &back, wcodec::kTablesCompact));
  EXPECT_EQ(back.freq, c.freq);
}

// ------------------------------------------------------------ vector 3

TEST(FormatVectors, LaneRectangles) {
  // 10 x 100 chunk: 8 lanes across (100 / 8 >= 8), 4 down.
  const wcodec::LaneRect r9 = wcodec::lane_rect(10, 100, 9);
  EXPECT_EQ(r9.r0, 2u);
  EXPECT_EQ(r9.c0, 12u);
  EXPECT_EQ(r9.h, 3u);
  EXPECT_EQ(r9.w, 13u);
  const wcodec::LaneRect r31 = wcodec::lane_rect(10, 100, 31);
  EXPECT_EQ(r31.r0, 7u);
  EXPECT_EQ(r31.c0, 87u);
  EXPECT_EQ(r31.h, 3u);
  EXPECT_EQ(r31.w, 13u);
  // 32 x 4096 band (a BF16 [*, 4096] matrix at 256 KiB): 32 lanes across.
  const wcodec::LaneRect b5 = wcodec::lane_rect(32, 4096, 5);
  EXPECT_EQ(b5.r0, 0u);
  EXPECT_EQ(b5.c0, 640u);
  EXPECT_EQ(b5.h, 32u);
  EXPECT_EQ(b5.w, 128u);
  // 4 x 8: one lane across, 32 down; only lanes 7, 15, 23, 31 hold a row.
  uint32_t total = 0;
  for (uint32_t l = 0; l < 32; ++l) {
    const wcodec::LaneRect r = wcodec::lane_rect(4, 8, l);
    const bool used = l % 8 == 7;
    EXPECT_EQ(r.h * r.w, used ? 8u : 0u) << "lane " << l;
    if (used) {
      EXPECT_EQ(r.r0, l / 8);
    }
    total += r.h * r.w;
  }
  EXPECT_EQ(total, 32u);
}

// Vector 4: the kernel contexts (nbr_mode 3) of one lane row holding two
// flattened 3x3 kernels, every column's context as the document's table
// gives it (nb = 2, thr[0] = 3, one scale class, chunk at column 0).
TEST(FormatVectors, KernelContexts) {
  wcodec::IntParams p{};
  p.nbr_mode = 3;
  p.period = 9;
  p.off_a = 3;
  p.nb = 2;
  p.thr[0] = 3;
  p.ns = 1;
  wcodec::IntLuts L;
  wcodec::build_int_luts(p, &L);
  const int32_t row[18] = {2, -1, 0, 3, 5, -2, 0, 1, -4, 1, 1, -3, 0, -6, 2, 7, 0, 0};
  const uint32_t want[18] = {0, 3, 6, 1, 14, 12, 10, 10, 14, 0, 3, 3, 1, 1, 17, 0, 14, 1};
  ASSERT_EQ(wcodec::int_nctx(p), 18u);
  for (uint32_t c = 0; c < 18; ++c)
    EXPECT_EQ(wcodec::int_ctx(p, L, row, 18, 0, c, 0, 0, 0, c % 9), want[c]) << "column " << c;
  // A chunk starting at tensor column 4 sees its first column at phase 4:
  // no left neighbour inside the lane yet, and the upper one is not there.
  EXPECT_EQ(wcodec::int_ctx(p, L, row, 18, 0, 0, 0, 0, 0, 4), 0u);
}

// The encoder's vector and scalar passes and its reverse mode write the
// same stream, and the reference decode step (rans_decode_sym /
// rans_decode_bits / rans_renorm, lanes in order within each group) reads
// every symbol back and ends at the initial states. Groups of random lane subsets (a decode step's phases
// are such runs), skewed and flat tables, frequency 4096 (a certain symbol:
// never renormalizes) and uniform bits of every width.
TEST(RansEncoder, VectorAndScalarPassesAgreeAndDecode) {
  std::mt19937 rng(11);
  std::vector<wcodec::FreqTable> tables;
  for (int k = 0; k < 6; ++k) {
    std::vector<uint64_t> counts(k == 5 ? 1 : 40 + 30 * k);
    for (size_t s = 0; s < counts.size(); ++s)
      counts[s] = k % 2 ? 1 + rng() % 1000 : (s < 3 ? 100000 : rng() % 3);
    tables.push_back(wcodec::normalize_counts(counts, wcodec::kMaxProbBits));
    tables.back().build_start();
  }
  ASSERT_EQ(tables[5].freq[0], 4096);
  // Decoding views: slot -> symbol, and freq | start << 16 per symbol.
  std::vector<std::vector<uint8_t>> sym8;
  std::vector<std::vector<uint32_t>> fs;
  for (const auto& t : tables) {
    sym8.emplace_back(4096);
    fs.emplace_back(256);
    for (size_t s = 0; s < t.freq.size(); ++s) {
      fs.back()[s] = t.freq[s] | uint32_t{t.start[s]} << 16;
      for (uint32_t i = 0; i < t.freq[s]; ++i) sym8.back()[t.start[s] + i] = static_cast<uint8_t>(s);
    }
  }
  struct Sym {
    int lane, table;  // table -1: uniform bits
    uint32_t v, k;
  };
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<std::vector<Sym>> groups(1 + rng() % 3000);
    for (auto& gr : groups) {
      const uint32_t mask = trial == 0 ? 0xFFFFFFFFu : static_cast<uint32_t>(rng()) & static_cast<uint32_t>(rng());
      for (int l = 0; l < wcodec::kLanes; ++l) {
        if (!(mask >> l & 1)) continue;
        Sym s{l, static_cast<int>(rng() % 7) - 1, 0, 0};
        if (s.table < 0) {
          s.k = 1 + rng() % 12;
          s.v = rng() & ((1u << s.k) - 1);
        } else {
          const auto& t = tables[s.table];
          do s.v = rng() % t.freq.size();
          while (!t.freq[s.v]);
        }
        gr.push_back(s);
      }
    }
    wcodec::RansEncoder enc;
    for (const auto& gr : groups) {
      for (const auto& s : gr) {
        if (s.table < 0) enc.put_bits(s.lane, s.v, s.k);
        else enc.put(s.lane, tables[s.table], s.v);
      }
    }
    uint32_t init[wcodec::kLanes];
    for (auto& x : init) x = wcodec::kRansL + rng() % wcodec::kRansL;
    std::vector<uint8_t> vec, sca;
    enc.finish(vec, init, true);
    enc.finish(sca, init, false);
    ASSERT_EQ(vec, sca) << "trial " << trial;
    // Reverse mode (what the float and int encoders use): the same groups
    // given last first, one entry per lane in its mask, write the same stream.
    wcodec::RansEncoder rev;
    size_t nsym = 0;
    for (const auto& gr : groups) nsym += gr.size();
    rev.begin_reverse(init, nsym);
    for (size_t gi = groups.size(); gi-- > 0;) {
      uint32_t mask = 0, sf[wcodec::kLanes] = {};
      for (const auto& s : groups[gi]) {
        mask |= 1u << s.lane;
        sf[s.lane] = s.table < 0 ? wcodec::RansEncoder::bits_entry(s.v, s.k)
                                 : uint32_t{tables[s.table].start[s.v]} | uint32_t{tables[s.table].freq[s.v]} << 16;
      }
      if (mask) rev.put_group_reverse(mask, sf);
    }
    std::vector<uint8_t> rv;
    rev.finish_reverse(rv);
    ASSERT_EQ(rv, vec) << "trial " << trial << ": reverse mode";
    // Groups of all lanes (trial 0) given at once, step-major, after the
    // last few one by one (the int encoder's plain chunks): the same stream.
    if (trial == 0) {
      std::vector<uint32_t> sm(groups.size() * wcodec::kLanes);
      for (size_t gi = 0; gi < groups.size(); ++gi)
        for (const auto& s : groups[gi])
          sm[gi * wcodec::kLanes + s.lane] =
              s.table < 0 ? wcodec::RansEncoder::bits_entry(s.v, s.k)
                          : uint32_t{tables[s.table].start[s.v]} | uint32_t{tables[s.table].freq[s.v]} << 16;
      const size_t one_by_one = std::min<size_t>(groups.size(), 5);
      wcodec::RansEncoder full;
      full.begin_reverse(init, nsym);
      for (size_t gi = groups.size(); gi-- > groups.size() - one_by_one;)
        full.put_group_reverse(0xFFFFFFFFu, sm.data() + gi * wcodec::kLanes);
      full.put_full_groups_reverse(sm.data(), groups.size() - one_by_one);
      std::vector<uint8_t> fv;
      full.finish_reverse(fv);
      ASSERT_EQ(fv, vec) << "full groups";
    }
    uint32_t x[wcodec::kLanes];
    for (int l = 0; l < wcodec::kLanes; ++l)
      x[l] = uint32_t{vec[4 * l]} | uint32_t{vec[4 * l + 1]} << 8 | uint32_t{vec[4 * l + 2]} << 16 |
             uint32_t{vec[4 * l + 3]} << 24;
    wcodec::WordSource ws{vec.data() + 4 * wcodec::kLanes, static_cast<uint32_t>((vec.size() - 4 * wcodec::kLanes) / 2),
                          0, 0};
    for (const auto& gr : groups) {
      for (const auto& s : gr) {
        uint32_t got;
        if (s.table < 0) {
          got = wcodec::rans_decode_bits(x[s.lane], s.k);
        } else {
          got = wcodec::rans_decode_sym(x[s.lane], wcodec::DecTable{sym8[s.table].data(), fs[s.table].data()});
        }
        ASSERT_EQ(got, s.v) << "trial " << trial;
        wcodec::rans_renorm(x[s.lane], ws);
      }
    }
    EXPECT_EQ(ws.bad, 0u);
    EXPECT_EQ(ws.pos, ws.n) << "words left over";
    for (int l = 0; l < wcodec::kLanes; ++l) EXPECT_EQ(x[l], init[l]) << "lane " << l;
  }
}

// The avx2 path's group pass (rans_encode_groups_hwy, Highway) against the
// scalar pass (finish with vector = false): the same final states and words
// on groups of all lanes and of random lane subsets, with frequency 1
// symbols (the largest quotients), frequency 4096 ones (never renormalize),
// uniform bits and states up to 2^32 - 1. It runs wherever a vector path
// is in use (the AVX2 code runs on AVX-512 CPUs too).
TEST(RansEncoder, HighwayPassMatchesScalar) {
  std::mt19937 rng(29);
  uint32_t probe_x[wcodec::kLanes];
  for (auto& x : probe_x) x = wcodec::kRansL;
  uint16_t probe_w[32];
  uint16_t* probe_pos = probe_w + 32;
  const uint32_t probe_mask = 0;
  if (!wcodec::rans_encode_groups_hwy(&probe_mask, nullptr, 0, probe_x, &probe_pos))
    GTEST_SKIP() << "the Highway pass runs on the vector paths only";
  std::vector<wcodec::FreqTable> tables;
  for (int k = 0; k < 4; ++k) {
    std::vector<uint64_t> counts(k == 3 ? 1 : 200);
    for (size_t s = 0; s < counts.size(); ++s)
      counts[s] = k == 0 ? (s == 0 ? 1000000000ull : 1) : (k == 1 ? 1 + rng() % 1000 : (s < 3 ? 100000 : rng() % 3));
    tables.push_back(wcodec::normalize_counts(counts, wcodec::kMaxProbBits));
    tables.back().build_start();
  }
  ASSERT_EQ(tables[0].freq[1], 1);
  ASSERT_EQ(tables[3].freq[0], 4096);
  for (int trial = 0; trial < 12; ++trial) {
    const size_t ngroups = 1 + rng() % 4000;
    std::vector<uint32_t> mask(ngroups), sf(ngroups * wcodec::kLanes);
    wcodec::RansEncoder enc;
    for (size_t g = 0; g < ngroups; ++g) {
      mask[g] = trial % 3 == 0 || rng() % 4 == 0 ? 0xFFFFFFFFu : static_cast<uint32_t>(rng()) & static_cast<uint32_t>(rng());
      for (int l = 0; l < wcodec::kLanes; ++l) {
        sf[g * wcodec::kLanes + l] = static_cast<uint32_t>(rng());  // anything where the lane is not in the mask
        if (!(mask[g] >> l & 1)) continue;
        const int t = static_cast<int>(rng() % 5) - 1;
        uint32_t e;
        if (t < 0) {
          const uint32_t k = 1 + rng() % 12;
          e = wcodec::RansEncoder::bits_entry(rng() & ((1u << k) - 1), k);
        } else {
          const auto& tb = tables[t];
          uint32_t v;
          // Table 0: mostly its frequency 1 symbols.
          do v = t == 0 && rng() % 4 ? 1 + rng() % 199 : rng() % tb.freq.size();
          while (!tb.freq[v]);
          e = uint32_t{tb.start[v]} | uint32_t{tb.freq[v]} << 16;
        }
        sf[g * wcodec::kLanes + l] = e;
        enc.put_sf(l, e);
      }
    }
    uint32_t init[wcodec::kLanes];
    for (auto& x : init) x = wcodec::kRansL + rng() % wcodec::kRansL;
    std::vector<uint8_t> want;
    enc.finish(want, init, false);
    std::vector<uint16_t> words(ngroups * wcodec::kLanes + 16, 0xABCD);
    uint16_t* const end = words.data() + words.size();
    uint16_t* pos = end;
    uint32_t x[wcodec::kLanes];
    std::memcpy(x, init, sizeof(x));
    ASSERT_TRUE(wcodec::rans_encode_groups_hwy(mask.data(), sf.data(), ngroups, x, &pos));
    // finish() leaves out groups without lanes: its stream is the same.
    std::vector<uint8_t> got;
    for (int l = 0; l < wcodec::kLanes; ++l)
      for (int b = 0; b < 4; ++b) got.push_back(static_cast<uint8_t>(x[l] >> (8 * b)));
    for (const uint16_t* p = pos; p < end; ++p) {
      got.push_back(static_cast<uint8_t>(*p));
      got.push_back(static_cast<uint8_t>(*p >> 8));
    }
    ASSERT_EQ(got.size(), want.size()) << "trial " << trial;
    EXPECT_TRUE(got == want) << "trial " << trial;
  }
}

}  // namespace
