// tests/test_packed_ternary.cpp — packed ternary weights (seed 001) and
// TQ2_0 blocks (wcodec/packed_ternary.h): the seed's example bytes, both
// layouts and the choice between them, the refusals (reserved code 11 with
// its byte offset, non-zero padding, wrong shapes), ggml's TQ2_0 code order,
// and every packed tensor of the real ternary files unpacked and packed back
// byte for byte.
// Thread-safety: single-threaded test code.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testutil.h"
#include "wcodec/packed_ternary.h"
#include "wcodec/safetensors.h"

namespace {

using namespace wcodec;

// The seed's (2, 6) example. Its row 1, [0, +1, +1, -1 | 0, -1], packs to
// 0b10_01_01_00 as the seed's binary says, which is 0x94: the seed's hex
// 0x64 (0b01_10_01_00) is an arithmetic slip and decodes to [0, +1, -1, +1]
// (docs/packed-ternary.md). Both of the seed's byte pairs are vectors here.
const std::vector<int8_t> kSeedValues = {1, -1, 0, 1, -1, 0, 0, 1, 1, -1, 0, -1};
const std::vector<uint8_t> kPackedBytes = {0x49, 0x02, 0x94, 0x08};

TEST(PackedTernary, SeedExampleBytes) {
  PackedTernary p{2, 6, TernaryLayout::kRowMajor};
  auto packed = pack_ternary(kSeedValues.data(), p, "seed");
  ASSERT_TRUE(packed.ok());
  EXPECT_EQ(*packed, kPackedBytes);
  std::vector<int8_t> back(12, 9);
  ASSERT_TRUE(unpack_ternary(kPackedBytes.data(), 4, p, back.data(), "seed").ok());
  EXPECT_EQ(back, kSeedValues);
  // The seed's bytes as printed: row 0 (0x49 0x02) is its row 0; row 1
  // (0x64 0x08) is [0, +1, -1, +1, 0, -1].
  const std::vector<uint8_t> printed = {0x49, 0x02, 0x64, 0x08};
  ASSERT_TRUE(unpack_ternary(printed.data(), 4, p, back.data(), "seed").ok());
  EXPECT_EQ(back, (std::vector<int8_t>{1, -1, 0, 1, -1, 0, 0, 1, -1, 1, 0, -1}));
}

TEST(PackedTernary, TransposedLayout) {
  // [ceil(6/4)][2]: byte (j, r) at j * 2 + r.
  PackedTernary p{2, 6, TernaryLayout::kTransposed};
  auto packed = pack_ternary(kSeedValues.data(), p, "seed");
  ASSERT_TRUE(packed.ok());
  EXPECT_EQ(*packed, (std::vector<uint8_t>{0x49, 0x94, 0x02, 0x08}));
  std::vector<int8_t> back(12, 9);
  ASSERT_TRUE(unpack_ternary(packed->data(), 4, p, back.data(), "seed").ok());
  EXPECT_EQ(back, kSeedValues);
}

TEST(PackedTernary, DetectsTheLayoutFromTheShape) {
  auto a = detect_packed_ternary({2, 2}, 2, 6, false, "w");  // 2 = ceil(6/4): both fit
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->layout, TernaryLayout::kRowMajor);
  auto b = detect_packed_ternary({2, 2}, 2, 6, true, "w");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->layout, TernaryLayout::kTransposed);
  auto c = detect_packed_ternary({64, 16}, 64, 64, false, "w");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->layout, TernaryLayout::kRowMajor);
  auto d = detect_packed_ternary({16, 64}, 64, 64, false, "w");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->layout, TernaryLayout::kTransposed);
  auto e = detect_packed_ternary({64, 17}, 64, 64, false, "w");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("[64, 17]"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("expected [64, 16] or [16, 64]"), std::string::npos);
  EXPECT_FALSE(detect_packed_ternary({64}, 64, 64, false, "w").ok());
  EXPECT_FALSE(detect_packed_ternary({4, 0}, 4, 0, false, "w").ok());
}

TEST(PackedTernary, ReservedCodeRefusedWithItsByteOffset) {
  PackedTernary p{2, 6, TernaryLayout::kRowMajor};
  auto bytes = kPackedBytes;
  bytes[2] = 0x24 | 0xC0;  // weight (1, 3) = 11
  std::vector<int8_t> v(12);
  const Status s = unpack_ternary(bytes.data(), 4, p, v.data(), "m.weight_packed");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("m.weight_packed: byte 2 (0xe4): reserved code 11 for weight (1, 3)"), std::string::npos)
      << s.message();
  // Transposed: the same byte is weight (1, 0..3) at offset 1.
  PackedTernary t{2, 6, TernaryLayout::kTransposed};
  std::vector<uint8_t> tb = {0x49, 0x67, 0x02, 0x08};  // (1, 0) = 11
  const Status s2 = unpack_ternary(tb.data(), 4, t, v.data(), "w");
  ASSERT_FALSE(s2.ok());
  EXPECT_NE(s2.message().find("byte 1 (0x67): reserved code 11 for weight (1, 0)"), std::string::npos)
      << s2.message();
}

TEST(PackedTernary, PaddingMustBeZero) {
  PackedTernary p{2, 6, TernaryLayout::kRowMajor};
  auto bytes = kPackedBytes;
  bytes[1] |= 0x10;  // weight (0, 6): padding
  std::vector<int8_t> v(12);
  const Status s = unpack_ternary(bytes.data(), 4, p, v.data(), "w");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("byte 1 (0x12): padding weight (0, 6) is not 00"), std::string::npos) << s.message();
  const Status n = unpack_ternary(bytes.data(), 3, p, v.data(), "w");
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.message().find("3 packed bytes (expected 4"), std::string::npos) << n.message();
  const int8_t bad[2] = {1, 2};
  EXPECT_FALSE(pack_ternary(bad, PackedTernary{1, 2, TernaryLayout::kRowMajor}, "w").ok());
}

TEST(PackedTernary, Tq2CodeOrderIsGgmls) {
  // ggml's quantize_row_tq2_0_ref: byte 32h + m holds weights 128h + m + 32k
  // in bits 2k, as value + 1; the fp16 scale follows the 64 code bytes.
  std::vector<int8_t> row(256, 0);
  row[32] = 1;    // h 0, m 0, k 1: byte 0 bits 2-3 = 2
  row[129] = -1;  // h 1, m 1, k 0: byte 33 bits 0-1 = 0
  std::vector<uint8_t> blk(66);
  ASSERT_TRUE(ternary_row_to_tq2_0(row.data(), 256, 0x3C00, blk.data(), "r").ok());
  EXPECT_EQ(blk[0], 0x55 + 0x04);   // codes 1,2,1,1
  EXPECT_EQ(blk[33], 0x54);         // codes 0,1,1,1
  EXPECT_EQ(blk[1], 0x55);
  EXPECT_EQ(blk[64], 0x00);
  EXPECT_EQ(blk[65], 0x3C);
  std::vector<int8_t> back(256);
  uint16_t d = 0;
  ASSERT_TRUE(tq2_0_to_ternary_row(blk.data(), 256, back.data(), &d, "r").ok());
  EXPECT_EQ(back, row);
  EXPECT_EQ(d, 0x3C00);
  EXPECT_FALSE(ternary_row_to_tq2_0(row.data(), 128, 0, blk.data(), "r").ok());
}

// Every *_packed tensor of the real ternary files: unpacks (no reserved code,
// zero padding), packs back to the same bytes; rows that are multiples of
// 256 go through TQ2_0 and back.
TEST(PackedTernary, RealFilesUnpackAndPackBack) {
  size_t tensors = 0, tq2_rows = 0;
  for (const char* f : {"stories260K.rtn-ternary.safetensors", "isnet-medium.rtn-ternary.safetensors"}) {
    const auto bytes = wctest::read_file(wctest::data_dir() / f);
    auto h = parse_safetensors_header(bytes.data(), bytes.size(), bytes.size(), f);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    for (const auto& t : h->tensors) {
      const std::string suffix = "_packed";
      if (t.name.size() <= suffix.size() || t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      ASSERT_EQ(t.dtype, DType::kU8) << t.name;
      ASSERT_EQ(t.shape.size(), 2u) << t.name;
      const uint64_t out = t.shape[0], in = 4 * t.shape[1];
      auto p = detect_packed_ternary(t.shape, out, in, false, t.name);
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      const uint8_t* data = bytes.data() + h->data_start + t.begin;
      std::vector<int8_t> v(out * in);
      const Status s = unpack_ternary(data, t.nbytes(), *p, v.data(), t.name);
      ASSERT_TRUE(s.ok()) << s.ToString();
      auto again = pack_ternary(v.data(), *p, t.name);
      ASSERT_TRUE(again.ok());
      ASSERT_TRUE(std::equal(again->begin(), again->end(), data)) << t.name;
      if (in % 256 == 0) {
        std::vector<uint8_t> blocks(in / 256 * 66);
        std::vector<int8_t> row(in);
        for (uint64_t r = 0; r < out; ++r) {
          ASSERT_TRUE(ternary_row_to_tq2_0(v.data() + r * in, in, 0x3800, blocks.data(), t.name).ok());
          uint16_t d = 0;
          ASSERT_TRUE(tq2_0_to_ternary_row(blocks.data(), in, row.data(), &d, t.name).ok());
          ASSERT_TRUE(std::equal(row.begin(), row.end(), v.begin() + r * in)) << t.name << " row " << r;
          ++tq2_rows;
        }
      }
      ++tensors;
    }
  }
  EXPECT_GT(tensors, 100u);
  EXPECT_GT(tq2_rows, 0u);
}

}  // namespace
