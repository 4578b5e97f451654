// tests/test_gguf_palette.cpp — palette streams of split models (format
// 2.6, docs/wcodec-format.md §8.5): Q8_0 tensors requantized from Q4_1 (at
// most 16 codes per block, as llama-quantize --allow-requantize writes
// them) round trip byte for byte with palettes (many chunks and a partial
// last one, one row, one block, blocks of exactly 16 values, all-equal
// blocks), through the reader and the device plan; a block of 17 values
// keeps the tensor off the palette; the palette measures smaller than the
// split without it; damaged palette chunks are refused, never served
// wrong; and a catalogue of refused palette records and palette data, one
// test per rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "bytes.h"
#include "device_plan.h"
#include "gguf_split_testutil.h"
#include "reader_i.h"
#include "split_model.h"
#include "split_palette.h"
#include "testutil.h"
#include "wcodec/container.h"
#include "wcodec/cpu.h"
#include "wcodec/encode.h"
#include "wcodec/gguf.h"

using namespace wcodec;

namespace {

const std::vector<float>& weights() { return wctest::split_test_weights<11>(); }

void requantize_q8_0(std::vector<uint8_t>& file) { wctest::requantize_q8_0_from_q4_1(file); }

// The codes of block b of the file's first tensor (a Q8_0 one).
int8_t* block_codes(std::vector<uint8_t>& file, uint64_t b) {
  auto f = parse_gguf(file.data(), file.size(), file.size(), "t.gguf");
  return reinterpret_cast<int8_t*>(file.data() + f->data_offset + f->tensors[0].offset + 34 * b + 2);
}

std::vector<uint8_t> encode(const std::vector<uint8_t>& file, uint64_t chunk_bytes, bool palette = true) {
  EncodeConfig cfg;
  cfg.chunk_bytes = chunk_bytes;
  cfg.split_palette = palette;
  return wctest::encode_gguf(file, cfg, "t.gguf");
}

std::unique_ptr<Reader> read_back(const std::vector<uint8_t>& enc, const std::vector<uint8_t>& file) {
  return wctest::read_back_gguf(enc, file, "t.gguf.wcodec", wctest::ReadBack::kEveryChunkAndPlan);
}

bool uses_palette(const Reader& rd, size_t t) {
  const auto& ti = ReaderAccess::tensor(rd, t);
  if (!ti.split) return false;
  for (const auto& s : ti.split->streams)
    if (s.palette()) return true;
  return false;
}

std::string version(const Reader& rd) {
  const auto meta = rd.metadata_json();
  const auto at = meta.find("\"version\":\"");
  return at == std::string::npos ? "" : meta.substr(at + 11, 3);
}

}  // namespace

// The palette itself: build then reconstruct, int8 and uint8 orders, on
// groups of 1, 2, 15, 16 values; 17 values do not build.
TEST(Palette, BuildAndReconstruct) {
  for (bool sgn : {true, false}) {
    for (uint32_t distinct : {1u, 2u, 15u, 16u, 17u}) {
      std::vector<uint8_t> codes(64);
      for (size_t i = 0; i < codes.size(); ++i)
        codes[i] = static_cast<uint8_t>((i * 7) % distinct * 13 + (i % 2 ? 0 : 0) - (sgn ? 100 : 0));
      std::vector<uint8_t> first(2), gaps(2 * kPaletteGaps), index(32), back(64);
      const bool ok = palette_build(codes.data(), 2, 32, sgn, first.data(), gaps.data(), index.data());
      if (distinct > 16) {
        EXPECT_FALSE(ok);
        continue;
      }
      ASSERT_TRUE(ok) << distinct;
      ASSERT_TRUE(palette_reconstruct(first.data(), gaps.data(), index.data(), 2, 32, sgn, back.data(), "p").ok());
      EXPECT_EQ(back, codes) << distinct << " " << sgn;
      // The count is the gaps before the first zero, plus one.
      uint32_t n = 1;
      while (n <= kPaletteGaps && gaps[n - 1]) ++n;
      EXPECT_EQ(n, distinct);
    }
  }
}

// Q8_0 requantized from Q4_1: many chunks (a partial last one), one row,
// one block; palettes chosen, read back byte for byte, format 2.6.
TEST(Palette, RoundTripRequantizedQ8_0) {
  auto file = wctest::make_quant_gguf({{"blk.0.ffn_up.weight", kGgmlTypeQ8_0, 576, 203},
                                       {"blk.0.one_row.weight", kGgmlTypeQ8_0, 4096, 1},
                                       {"blk.0.one_block.weight", kGgmlTypeQ8_0, 32, 1},
                                       {"blk.0.empty.weight", kGgmlTypeQ8_0, 576, 0},
                                       {"output_norm.weight", kGgmlTypeF32, 576, 1}},
                                      weights());
  ASSERT_FALSE(file.empty());
  requantize_q8_0(file);
  // Block 0: exactly 16 values (all of -120..105 step 15); blocks 1, 2:
  // all equal (0, then -128: the smallest int8).
  int8_t* q = block_codes(file, 0);
  for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(-120 + 15 * (i % 16));
  std::memset(block_codes(file, 1), 0, 32);
  std::memset(block_codes(file, 2), 0x80, 32);
  q = block_codes(file, 3);  // 16 values spanning the whole int8 range
  for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(i % 16 == 15 ? 127 : -128 + 17 * (i % 16));
  const auto enc = encode(file, 16 * 1024);
  auto rd = read_back(enc, file);
  ASSERT_TRUE(rd);
  const TensorSummary s = rd->tensor_summary(0);
  EXPECT_GT(s.chunks_model, 2u);
  EXPECT_EQ(s.kind, "split Q8_0");
  EXPECT_TRUE(uses_palette(*rd, 0)) << s.model;
  EXPECT_NE(s.model.find("palette/32 i8"), std::string::npos) << s.model;
  EXPECT_EQ(version(*rd), "2.6");
}

// One block of 17 values keeps the tensor off the palette (the split
// without it, format 2.5); the bytes still round trip.
TEST(Palette, SeventeenValuesInOneBlockKeepsThePlainSplit) {
  auto file = wctest::make_quant_gguf({{"blk.0.ffn_up.weight", kGgmlTypeQ8_0, 576, 64}}, weights());
  requantize_q8_0(file);
  int8_t* q = block_codes(file, 70);
  for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(-120 + 14 * (i % 17));
  const auto enc = encode(file, 16 * 1024);
  auto rd = read_back(enc, file);
  ASSERT_TRUE(rd);
  EXPECT_EQ(rd->tensor_summary(0).kind, "split Q8_0");
  EXPECT_FALSE(uses_palette(*rd, 0)) << rd->tensor_summary(0).model;
  EXPECT_EQ(version(*rd), "2.5");
}

// Q5_0 and Q5_1 blocks whose 5-bit codes are an affine image of 4-bit ones
// (llama-quantize requantizing Q4_1 to Q5_0 / Q5_1: at most 16 of the 32
// values a block): the high bits and low nibbles as one palette stream of
// 5-bit codes (§8.5, codes 2), smaller than the two fields as streams; one
// block of 17 values keeps the two streams. Every byte read back.
TEST(Palette, FiveBitCodesRoundTrip) {
  for (uint32_t type : {uint32_t{kGgmlTypeQ5_0}, uint32_t{kGgmlTypeQ5_1}}) {
    for (bool seventeen : {false, true}) {
      auto file = wctest::make_quant_gguf({{"blk.0.ffn_up.weight", type, 576, 203},
                                           {"blk.0.one_block.weight", type, 32, 1}},
                                          wctest::gaussian_weights(1 << 20, 5));
      auto f = parse_gguf(file.data(), file.size(), file.size(), "t.gguf");
      ASSERT_TRUE(f.ok());
      const uint32_t bb = type == kGgmlTypeQ5_0 ? 22 : 24, off = bb - 20;
      for (const auto& t : f->tensors) {
        uint8_t* p = file.data() + f->data_offset + t.offset;
        for (uint64_t b = 0; b < t.nbytes / bb; ++b) {
          uint8_t* blk = p + b * bb + off;
          uint8_t codes[32];
          const uint32_t top = 20 + static_cast<uint32_t>(b % 12);  // the block's largest code
          for (int j = 0; j < 16; ++j) {  // the low nibbles as 4-bit codes, spread over 0..top
            codes[j] = static_cast<uint8_t>(((blk[4 + j] & 15) * top + 7) / 15);
            codes[j + 16] = static_cast<uint8_t>(((blk[4 + j] >> 4) * top + 7) / 15);
          }
          if (seventeen && b == 40)
            for (int j = 0; j < 32; ++j) codes[j] = static_cast<uint8_t>(j % 17);
          if (b == 3) std::memset(codes, 31, 32);  // all equal, the largest code
          q5_pack(codes, 1, blk);
        }
      }
      const auto enc = encode(file, 16 * 1024);
      auto rd = read_back(enc, file);
      ASSERT_TRUE(rd);
      EXPECT_EQ(rd->tensor_summary(0).kind, "split " + std::string(ggml_type_info(type)->name));
      EXPECT_EQ(uses_palette(*rd, 0), !seventeen) << rd->tensor_summary(0).model;
      if (!seventeen) {
        EXPECT_NE(rd->tensor_summary(0).model.find("palette/32 q5"), std::string::npos);
        EXPECT_EQ(version(*rd), "2.6");
        const auto without = encode(file, 16 * 1024, false);
        EXPECT_LT(enc.size(), without.size());
      }
    }
  }
}

// 5-bit codes unpack and pack back exactly.
TEST(Palette, FiveBitCodesPackBack) {
  std::vector<uint8_t> in(3 * kQ5Bytes), codes(96), back(in.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 37 + 11);
  q5_unpack(in.data(), 3, codes.data());
  for (uint8_t c : codes) EXPECT_LT(c, 32);
  q5_pack(codes.data(), 3, back.data());
  EXPECT_EQ(back, in);
  // Code 17 of the first run: high nibble of qs[1], qh bit 17.
  EXPECT_EQ(codes[17], static_cast<uint8_t>((in[5] >> 4) | ((in[2] >> 1) & 1) << 4));
}

// The palette measures smaller than the split without it on requantized
// Q8_0 (by more than a tenth of the file); directly quantized Q8_0 (blocks
// of up to 32 values) gets no palette.
TEST(Palette, SmallerThanThePlainSplit) {
  auto file = wctest::make_quant_gguf({{"blk.0.ffn_up.weight", kGgmlTypeQ8_0, 576, 256}}, weights());
  const auto direct = encode(file, 256 * 1024);
  {
    auto rd = read_back(direct, file);
    ASSERT_TRUE(rd);
    EXPECT_FALSE(uses_palette(*rd, 0));
  }
  requantize_q8_0(file);
  const auto with = encode(file, 256 * 1024), without = encode(file, 256 * 1024, false);
  read_back(with, file);
  read_back(without, file);
  EXPECT_LT(with.size(), without.size() - file.size() / 10) << with.size() << " vs " << without.size();
}

// Seeded Gaussian weights (no repeats for zstd to find) give the index
// stream a 4-bit model: model-coded derived parts round trip, and a
// damaged palette chunk is an error, never wrong bytes: bits flipped
// across the first chunk's payload (part methods, lengths, the three
// derived parts, the model-coded index part).
TEST(Palette, DamagedChunksAreDetected) {
  auto file = wctest::make_quant_gguf({{"blk.0.ffn_up.weight", kGgmlTypeQ8_0, 576, 256}},
                                      wctest::gaussian_weights(1 << 20, 11));
  requantize_q8_0(file);
  auto enc = encode(file, 64 * 1024);
  read_back(enc, file);
  auto rd0 = Reader::open_memory(enc.data(), enc.size(), "x");
  ASSERT_TRUE(rd0.ok());
  ASSERT_TRUE(uses_palette(**rd0, 0));
  const auto& split = *ReaderAccess::tensor(**rd0, 0).split;
  ASSERT_TRUE(split.streams[1].derived[kPalIndex].has_model) << split.describe();
  EXPECT_EQ(split.streams[1].derived[kPalIndex].elem_bits, 4);
  const ChunkEntry e = (*rd0)->chunk(0);
  ASSERT_EQ(e.method, 2);
  int tried = 0;
  const int refused = wctest::refused_bit_flips(enc, file, **rd0, 0, &tried);
  EXPECT_GT(refused, tried * 9 / 10) << refused << " of " << tried;
}

// ------------------------------------------------------------------ refused records
namespace {

// Q8_0 (34-byte blocks): an fp16 stream and a palette stream of groups of
// 32 int8 codes, nothing model-coded; a tensor of 4 rows of 2 blocks in
// bands of 2 rows.
TensorGeometry parent() { return wctest::split_parent(4, 68, 2); }
SplitModel pal_model() {
  SplitModel m;
  m.ggml_type = 8;
  m.block_bytes = 34;
  SplitStream a, b;
  a.ranges = {{0, 2}};
  a.elem_bits = 16;
  b.ranges = {{2, 32}};
  b.elem_bits = 8;
  b.pal_group = 32;
  b.pal_signed = true;
  for (uint32_t k = 0; k < kPalDerivedCount; ++k) {
    SplitStream d;
    d.derived_bpb = b.derived_bytes_per_block(k);
    d.elem_bits = k == kPalIndex ? 4 : 8;
    b.derived.push_back(d);
  }
  m.streams = {a, b};
  return m;
}
Status parse(const std::vector<uint8_t>& rec) { return wctest::parse_split_record(rec, parent()); }
void expect_refused(const std::vector<uint8_t>& rec, const std::string& needle) {
  wctest::expect_split_refused(rec, needle, parent());
}

}  // namespace

TEST(PaletteRefused, ValidRecordIsAccepted) {
  const auto rec = pal_model().serialize();
  ASSERT_TRUE(parse(rec).ok()) << parse(rec).ToString();
  // Annotated bytes (§8.5).
  const std::vector<uint8_t> want = {0x08, 0x00, 0x22, 0x00, 0x02,     // Q8_0, block_bytes 34, 2 streams
                                     0x01, 0x00, 0x00, 0x02, 0x00,     // stream 0: [0, 2)
                                     0x10, 0x00,                       // elem_bits 16, no model
                                     0x01, 0x02, 0x00, 0x20, 0x00,     // stream 1: [2, 34)
                                     0x08, 0x02,                       // elem_bits 8, palette
                                     0x20, 0x00, 0x01,                 // group 32, int8 order
                                     0x08, 0x00,                       // first: 8-bit, no model
                                     0x08, 0x00,                       // gaps: 8-bit, no model
                                     0x04, 0x00};                      // index: 4-bit, no model
  EXPECT_EQ(rec, want);
  auto m = SplitModel::deserialize(rec.data(), rec.size(), parent(), "x");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->num_parts(), 4u);
  EXPECT_EQ(m->format_minor(), 6);
  EXPECT_EQ(m->geometry_of(parent(), m->streams[1].derived[kPalGaps]).cols, 30u);
  EXPECT_EQ(m->geometry_of(parent(), m->streams[1].derived[kPalIndex]).cols, 64u);
}
TEST(PaletteRefused, StreamFlag) {
  auto rec = pal_model().serialize();
  rec[18] = 4;  // 3 is a recoded stream (format 2.7, test_gguf_recode.cpp)
  expect_refused(rec, "stream 1 model flag 4");
}
TEST(PaletteRefused, StreamNotBytes) {
  auto m = pal_model();
  m.streams[1].elem_bits = 16;
  expect_refused(m.serialize(), "stream 1 elem_bits 16 (allowed 8 for a palette stream)");
}
TEST(PaletteRefused, GroupOutOfRange) {
  auto rec = pal_model().serialize();
  rec[19] = 0;
  expect_refused(rec, "stream 1 palette group 0");
  auto m = pal_model();
  m.streams[1].pal_group = 1;
  expect_refused(m.serialize(), "stream 1 palette group 1");
  m.streams[1].pal_group = 2048;
  expect_refused(m.serialize(), "stream 1 palette group 2048");
}
TEST(PaletteRefused, GroupOdd) {
  auto rec = pal_model().serialize();
  rec[19] = 31;
  expect_refused(rec, "stream 1 palette group 31 (allowed even");
}
TEST(PaletteRefused, GroupNotDividingTheStream) {
  auto rec = pal_model().serialize();
  rec[19] = 12;
  expect_refused(rec, "stream 1 palette group 12 (allowed a divisor of the stream's 32 codes per block)");
}
TEST(PaletteRefused, Codes) {
  auto rec = pal_model().serialize();
  rec[21] = 3;
  expect_refused(rec, "stream 1 palette codes 3");
}
// 5-bit codes come 32 in 20 bytes: a stream of 32 bytes per block is not.
TEST(PaletteRefused, FiveBitCodesOfAStreamNotOf20ByteRuns) {
  auto rec = pal_model().serialize();
  rec[21] = 2;
  expect_refused(rec, "stream 1 bytes per block 32 (allowed a multiple of 20 for 5-bit codes)");
}
TEST(PaletteRefused, DerivedElemBits) {
  auto m = pal_model();
  m.streams[1].derived[kPalGaps].elem_bits = 3;
  expect_refused(m.serialize(), "stream 1 derived 1 elem_bits 3");
  m = pal_model();
  m.streams[1].derived[kPalFirst].elem_bits = 16;  // one byte per block
  expect_refused(m.serialize(), "stream 1 derived 0 elem_bits 16");
}
TEST(PaletteRefused, DerivedModelFlag) {
  auto rec = pal_model().serialize();
  rec[25] = 2;
  expect_refused(rec, "stream 1 derived 1 model flag 2");
}
TEST(PaletteRefused, Truncated) {
  const auto rec = pal_model().serialize();
  for (size_t n = 0; n < rec.size(); ++n) {
    const std::vector<uint8_t> cut(rec.begin(), rec.begin() + static_cast<long>(n));
    EXPECT_EQ(parse(cut).code(), Code::kCorruption) << n;
  }
}
TEST(PaletteRefused, TrailingBytes) {
  auto rec = pal_model().serialize();
  rec.push_back(0);
  expect_refused(rec, "record trailing bytes 1");
}
// The parts of a palette chunk: three per palette stream; a derived part
// that is model-coded without a model is refused, as is one part missing.
TEST(PaletteRefused, Payloads) {
  const SplitModel m = pal_model();
  std::vector<SplitPart> parts;
  auto payload = [](std::vector<std::pair<uint8_t, std::vector<uint8_t>>> ps) {
    ByteWriter w;
    for (auto& p : ps) {
      w.u8(p.first);
      w.u32(static_cast<uint32_t>(p.second.size()));
      w.bytes(p.second.data(), p.second.size());
    }
    return w.buf();
  };
  const auto ok = payload({{0, {1, 2, 3, 4}}, {0, {1, 2}}, {0, {3}}, {1, {4}}});
  EXPECT_TRUE(parse_split_payload(m, ok.data(), ok.size(), "c", &parts).ok());
  EXPECT_EQ(parts.size(), 4u);
  auto expect = [&](const std::vector<uint8_t>& p, const std::string& needle) {
    const Status st = parse_split_payload(m, p.data(), p.size(), "c", &parts);
    EXPECT_EQ(st.code(), Code::kCorruption);
    EXPECT_NE(st.ToString().find(needle), std::string::npos) << st.ToString();
  };
  expect(payload({{0, {1}}, {0, {1}}, {2, {1}}, {0, {1}}}),
         "stream 1 derived 1 is model-coded but the stream has no model");
  expect(payload({{0, {1}}, {0, {1}}, {0, {1}}}), "truncated in stream 1 derived 2");
  expect(payload({{0, {1}}, {0, {1}}, {0, {1}}, {4, {1}}}), "stream 1 derived 2 method 4");
}

// ------------------------------------------------------------------ refused palette data
namespace {

// Two groups of 4 codes: palettes {-3, 5} and {7}.
struct Data {
  std::vector<uint8_t> first{static_cast<uint8_t>(-3), 7};
  std::vector<uint8_t> gaps = std::vector<uint8_t>(2 * kPaletteGaps, 0);
  std::vector<uint8_t> index{0x10, 0x01, 0x00, 0x00};
  Data() { gaps[0] = 8; }
  Status run(std::vector<uint8_t>* out = nullptr) const {
    std::vector<uint8_t> c(8);
    const Status st = palette_reconstruct(first.data(), gaps.data(), index.data(), 2, 4, true, c.data(), "f: part");
    if (out) *out = c;
    return st;
  }
};
void expect_data_refused(const Data& d, const std::string& needle) {
  const Status st = d.run();
  EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
  EXPECT_NE(st.ToString().find(needle), std::string::npos) << st.ToString();
}

}  // namespace

TEST(PaletteDataRefused, ValidDataDecodes) {
  std::vector<uint8_t> c;
  ASSERT_TRUE(Data().run(&c).ok());
  const std::vector<uint8_t> want{0xFD, 5, 5, 0xFD, 7, 7, 7, 7};
  EXPECT_EQ(c, want);
}
// Entries not strictly increasing: a non-zero gap after a zero one (a
// duplicate entry, or one after the palette's end).
TEST(PaletteDataRefused, NotSortedOrDuplicate) {
  Data d;
  d.gaps[2] = 4;
  expect_data_refused(d, "palette group 0 gap 2 value 4 after the palette's end");
  Data e;
  e.gaps[kPaletteGaps + 14] = 1;
  expect_data_refused(e, "palette group 1 gap 14 value 1 after the palette's end");
}
// Entries past the largest value of the order (count out of range of the
// values: the palette wraps).
TEST(PaletteDataRefused, RunsPastTheLargestValue) {
  Data d;
  d.first[1] = 120;
  d.gaps[kPaletteGaps] = 8;
  expect_data_refused(d, "palette group 1 entry 1 runs past the largest int8 value (gap 8)");
  std::vector<uint8_t> c(4);
  const uint8_t first = 250, idx[2] = {0, 0};
  std::vector<uint8_t> gaps(kPaletteGaps, 0);
  gaps[0] = 6;
  const Status st = palette_reconstruct(&first, gaps.data(), idx, 1, 4, false, c.data(), "f");
  EXPECT_NE(st.ToString().find("runs past the largest uint8 value"), std::string::npos) << st.ToString();
}
// 5-bit codes: a palette entry above 31.
TEST(PaletteDataRefused, FiveBitCodeAbove31) {
  const uint8_t first = 30, idx[2] = {0x10, 0x00};
  std::vector<uint8_t> gaps(kPaletteGaps, 0), c(4);
  gaps[0] = 2;
  const Status st = palette_reconstruct(&first, gaps.data(), idx, 1, 4, false, c.data(), "f", 31);
  EXPECT_NE(st.ToString().find("palette group 0 entry 1 runs past the largest code value (gap 2)"), std::string::npos)
      << st.ToString();
  const uint8_t big = 32;
  gaps[0] = 0;
  const Status st2 = palette_reconstruct(&big, gaps.data(), idx, 1, 4, false, c.data(), "f", 31);
  EXPECT_NE(st2.ToString().find("palette group 0 first value 32 (allowed 0..31)"), std::string::npos)
      << st2.ToString();
}
// An index at or beyond the palette's count.
TEST(PaletteDataRefused, IndexBeyondCount) {
  Data d;
  d.index[1] = 0x21;  // group 0, code 3: index 2 of a 2-entry palette
  expect_data_refused(d, "palette group 0 code 3 index 2 (allowed 0..1");
  Data e;
  e.index[3] = 0xF0;  // group 1 (one entry), code 3: index 15
  expect_data_refused(e, "palette group 1 code 3 index 15 (allowed 0..0");
}

// ------------------------------------------------------------------ rules on random groups
namespace {

// The palette rules of §8.5 stated plainly, one group at a time, in the
// order the decoder checks them: the reconstruction must give the same
// codes, or the same first refusal, whatever its inner shortcuts.
Status reference_reconstruct(const std::vector<uint8_t>& first, const std::vector<uint8_t>& gaps,
                             const std::vector<uint8_t>& index, uint32_t group, bool sgn, uint32_t max_value,
                             std::vector<uint8_t>* codes) {
  auto rank = [&](uint8_t v) { return sgn ? uint32_t{uint8_t(v ^ 0x80)} : uint32_t{v}; };
  for (size_t g = 0; g < first.size(); ++g) {
    const std::string G = "f: palette group " + std::to_string(g);
    std::vector<uint32_t> ranks{rank(first[g])};
    if (ranks[0] > max_value)
      return Status::Corruption(G + " first value " + std::to_string(first[g]) + " (allowed 0.." +
                                std::to_string(max_value) + ")");
    bool ended = false;
    for (uint32_t k = 0; k < kPaletteGaps; ++k) {
      const uint32_t gap = gaps[g * kPaletteGaps + k];
      if (gap == 0) {
        ended = true;
        continue;
      }
      if (ended)
        return Status::Corruption(G + " gap " + std::to_string(k) + " value " + std::to_string(gap) +
                                  " after the palette's end (allowed 0: entries strictly increasing)");
      ranks.push_back(ranks.back() + gap);
      if (ranks.back() > max_value)
        return Status::Corruption(G + " entry " + std::to_string(k + 1) + " runs past the largest " +
                                  (sgn ? "int8" : max_value == 255 ? "uint8" : "code") + " value (gap " +
                                  std::to_string(gap) + ")");
    }
    for (uint32_t k = 0; k < group; ++k) {
      const uint32_t x = k & 1 ? index[g * group / 2 + k / 2] >> 4 : index[g * group / 2 + k / 2] & 15;
      if (x >= ranks.size())
        return Status::Corruption(G + " code " + std::to_string(k) + " index " + std::to_string(x) + " (allowed 0.." +
                                  std::to_string(ranks.size() - 1) + ": the palette's count)");
      (*codes)[g * group + k] = static_cast<uint8_t>(sgn ? ranks[x] ^ 0x80 : ranks[x]);
    }
  }
  return Status::OK();
}

}  // namespace

// Random groups, valid and broken in every way (a gap after the end, a
// palette past the largest value, a first value out of range, an index at
// or past the count), of every palette size, signed, unsigned and 5-bit:
// the same codes or the same refusal as the plain statement of the rules.
TEST(PaletteRules, ReconstructionMatchesThePlainRules) {
  std::mt19937 rng(41);
  int valid = 0, refused = 0, vector_trials = 0, vector_alone = 0;
  for (int trial = 0; trial < 6000; ++trial) {
    const bool sgn = trial % 3 == 1;
    const uint32_t max_value = trial % 3 == 2 ? 31 : 255;
    const uint32_t group = trial % 5 == 0 ? 4 : trial % 7 == 0 ? 64 : 32;
    const size_t groups = 1 + rng() % 4;
    std::vector<uint8_t> first(groups), gaps(groups * kPaletteGaps, 0), index(groups * group / 2);
    for (size_t g = 0; g < groups; ++g) {
      const uint32_t count = 1 + rng() % kPaletteMaxValues;
      uint32_t r = rng() % (max_value / 2 + 1);
      first[g] = static_cast<uint8_t>(sgn ? r ^ 0x80 : r);
      for (uint32_t k = 0; k + 1 < count; ++k) {
        const uint32_t gap = 1 + rng() % 3;
        gaps[g * kPaletteGaps + k] = static_cast<uint8_t>(gap);
        r += gap;
      }
      for (uint32_t k = 0; k < group / 2; ++k)
        index[g * group / 2 + k] = static_cast<uint8_t>(rng() % count | (rng() % count) << 4);
    }
    // One damage in most trials.
    const size_t g = rng() % groups;
    switch (rng() % 6) {
      case 0: gaps[g * kPaletteGaps + rng() % kPaletteGaps] = static_cast<uint8_t>(1 + rng() % 255); break;
      case 1: gaps[g * kPaletteGaps + rng() % kPaletteGaps] = 0; break;
      case 2: index[g * group / 2 + rng() % (group / 2)] = static_cast<uint8_t>(rng()); break;
      case 3: first[g] = static_cast<uint8_t>(rng()); break;
      default: break;
    }
    std::vector<uint8_t> want(groups * group, 0xEE), got(groups * group, 0xEE);
    const Status ws = reference_reconstruct(first, gaps, index, group, sgn, max_value, &want);
    const Status gs =
        palette_reconstruct(first.data(), gaps.data(), index.data(), groups, group, sgn, got.data(), "f", max_value);
    ASSERT_EQ(gs.ToString(), ws.ToString()) << "trial " << trial;
    if (ws.ok()) {
      ASSERT_EQ(got, want) << "trial " << trial;
      ++valid;
    } else {
      ++refused;
    }
    // The vector path's reconstruction (avx2, avx512, neon): the same; by
    // itself (groups of a multiple of 32 codes) it accepts exactly the
    // valid groups, so that none reaches the portable loop's second pass.
    if (PaletteGroupsFn vx = palette_groups_vector()) {
      std::vector<uint8_t> vgot(groups * group, 0xEE);
      const Status vs = palette_reconstruct(first.data(), gaps.data(), index.data(), groups, group, sgn, vgot.data(),
                                            "f", max_value, vx);
      ASSERT_EQ(vs.ToString(), ws.ToString()) << "trial " << trial << " (vector reconstruction)";
      if (ws.ok()) {
        ASSERT_EQ(vgot, want) << "trial " << trial << " (vector reconstruction)";
      }
      if (group % 32 == 0) {
        std::vector<uint8_t> alone(groups * group, 0xEE);
        ASSERT_EQ(vx(first.data(), gaps.data(), index.data(), groups, group, sgn, max_value, alone.data()), ws.ok())
            << "trial " << trial;
        if (ws.ok()) {
          ASSERT_EQ(alone, want) << "trial " << trial << " (vector reconstruction alone)";
        }
        ++vector_alone;
      }
      ++vector_trials;
    }
  }
  EXPECT_GT(valid, 1000);
  EXPECT_GT(refused, 1000);
  if (cpu_path() == CpuPath::kScalar) {
    EXPECT_EQ(vector_trials, 0) << "the scalar path keeps the portable loop";
  } else {
    EXPECT_EQ(vector_trials, 6000) << "the vector paths reconstruct palettes with Highway";
    EXPECT_GT(vector_alone, 4000) << "groups of 32 and 64 codes";
  }
}

// 5-bit codes of every value pack as ggml lays them out (qh bit j: bit 4
// of code j; qs byte j: codes j and j + 16's low nibbles).
TEST(PaletteRules, FiveBitPackMatchesTheLayout) {
  std::mt19937 rng(43);
  std::vector<uint8_t> codes(64 * 32), out(64 * kQ5Bytes);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i < 32 ? 31 : i < 64 ? 0 : rng() % 32);
  q5_pack(codes.data(), 64, out.data());
  for (size_t b = 0; b < 64; ++b) {
    const uint8_t* c = codes.data() + 32 * b;
    const uint8_t* o = out.data() + kQ5Bytes * b;
    const uint32_t qh = uint32_t{o[0]} | uint32_t{o[1]} << 8 | uint32_t{o[2]} << 16 | uint32_t{o[3]} << 24;
    for (uint32_t j = 0; j < 32; ++j) ASSERT_EQ((qh >> j) & 1, static_cast<uint32_t>(c[j] >> 4)) << b << " " << j;
    for (uint32_t j = 0; j < 16; ++j) ASSERT_EQ(o[4 + j], (c[j] & 15) | (c[j + 16] & 15) << 4) << b << " " << j;
  }
}
