// tests/test_gguf_q3codes.cpp — 3-bit code streams (format 2.8,
// docs/wcodec-format.md §8.6, recode 3): a Q3_K block's codes, which ggml
// splits over 32 bytes of high bits (hmask) and 64 bytes of 2-bit pairs
// (qs), coded as one stream of whole codes. The code map follows ggml's
// dequantization order and is one to one on every 96 bytes; Q3_K tensors
// quantized from real weights (many chunks and a partial last one, one
// row, one block, an empty tensor) and blocks of every byte pattern round
// trip byte for byte through the reader, the device plan and every CPU
// decoder path; the stream measures smaller than hmask and qs coded apart;
// damaged chunks are refused, never served wrong; a catalogue of refused
// records and data, one test per rule.
//
// Thread-safety: single-threaded tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "device_plan.h"
#include "gguf_split_testutil.h"
#include "reader_i.h"
#include "split_model.h"
#include "split_recode.h"
#include "tensor_decode.h"
#include "testutil.h"
#include "wcodec/container.h"
#include "wcodec/cpu.h"
#include "wcodec/encode.h"
#include "wcodec/gguf.h"

using namespace wcodec;

namespace {

constexpr uint32_t kQ3Block = 110;

const std::vector<float>& weights() { return wctest::isnet_weights(); }

// ggml's dequantize_row_q3_K walk: the signed value (−4..3) of element e of
// a Q3_K block (hmask at 0, qs at 32).
int ggml_q3_value(const uint8_t* blk, uint32_t e) {
  const uint8_t* hm = blk;
  const uint8_t* q = blk + 32;
  uint8_t m = 1;
  uint32_t i = 0;
  for (uint32_t n = 0; n < 256; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (uint32_t l = 0; l < 32; ++l, ++i)
        if (i == e) return ((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4);
      m = static_cast<uint8_t>(m << 1);
    }
    q += 32;
  }
  return 99;
}

std::vector<uint8_t> q3k_file(const std::vector<wctest::QTensor>& ts) {
  auto file = wctest::make_quant_gguf(ts, weights());
  wctest::requantize_q3_k(file, weights());
  return file;
}

std::vector<uint8_t> encode(const std::vector<uint8_t>& file, uint64_t chunk_bytes, bool recode = true) {
  return wctest::encode_gguf_chunks(file, chunk_bytes, recode);
}

std::unique_ptr<Reader> read_back(const std::vector<uint8_t>& enc, const std::vector<uint8_t>& file) {
  return wctest::read_back_gguf(enc, file, "t.gguf.wcodec", wctest::ReadBack::kEveryChunkAndPlan);
}

bool has_q3codes(const Reader& rd, size_t t) { return wctest::split_recodes(rd, t) & (1u << kRecodeQ3Codes); }

}  // namespace

// The codes are ggml's values plus 4, in ggml's element order, and the map
// is one to one on every 96 bytes of hmask and qs.
TEST(Q3Codes, MapFollowsGgmlAndIsOneToOne) {
  std::mt19937 rng(7);
  std::vector<uint8_t> blk(kQ3Block * 64), stream(96 * 64), codes(256 * 64), back(96 * 64);
  for (auto& b : blk) b = static_cast<uint8_t>(rng());
  for (int i = 0; i < 96; ++i) blk[i] = 0, blk[kQ3Block + i] = 0xff;  // all-zero and all-one blocks
  for (int b = 0; b < 64; ++b) std::memcpy(stream.data() + 96 * b, blk.data() + kQ3Block * b, 96);
  q3_codes_unpack(stream.data(), 64, codes.data());
  for (int b = 0; b < 64; ++b)
    for (uint32_t e = 0; e < 256; ++e)
      ASSERT_EQ(static_cast<int>(codes[256 * b + e]) - 4, ggml_q3_value(blk.data() + kQ3Block * b, e)) << b << " " << e;
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[256], 7);
  ASSERT_TRUE(q3_codes_pack(codes.data(), 64, back.data(), "x").ok());
  EXPECT_TRUE(back == stream);
}

TEST(Q3Codes, RoundTripQ3_K) {
  const auto file = q3k_file({{"blk.0.ffn_down.weight", kGgmlTypeQ3_K, 1536, 301},
                              {"blk.0.one_row.weight", kGgmlTypeQ3_K, 1536, 1},
                              {"blk.0.one_block.weight", kGgmlTypeQ3_K, 256, 1},
                              {"blk.0.empty.weight", kGgmlTypeQ3_K, 1536, 0},
                              {"output_norm.weight", kGgmlTypeF32, 576, 1}});
  ASSERT_FALSE(file.empty());
  const auto enc = encode(file, 32 * 1024);
  auto rd = read_back(enc, file);
  ASSERT_TRUE(rd);
  EXPECT_GT(rd->num_chunks(), 6u);
  ASSERT_TRUE(ReaderAccess::tensor(*rd, 0).split);
  EXPECT_TRUE(has_q3codes(*rd, 0)) << ReaderAccess::tensor(*rd, 0).split->describe();
  EXPECT_EQ(wctest::format_version(*rd), "2.8");
}

// Blocks of every byte pattern in hmask and qs (all zero, all one, random,
// alternating) among real ones: byte for byte.
TEST(Q3Codes, EdgeBlocks) {
  auto file = q3k_file({{"blk.0.ffn_down.weight", kGgmlTypeQ3_K, 1536, 32}});
  auto f = parse_gguf(file.data(), file.size(), file.size(), "t.gguf");
  ASSERT_TRUE(f.ok());
  uint8_t* p = file.data() + f->data_offset + f->tensors[0].offset;
  std::mt19937 rng(3);
  for (int i = 0; i < 12; ++i) {
    uint8_t* blk = p + kQ3Block * (13 * i + 5);
    for (int k = 0; k < 96; ++k)
      blk[k] = i % 4 == 0 ? 0 : i % 4 == 1 ? 0xff : i % 4 == 2 ? static_cast<uint8_t>(rng()) : (k & 1 ? 0x55 : 0xaa);
  }
  const auto enc = encode(file, 32 * 1024);
  auto rd = read_back(enc, file);
  ASSERT_TRUE(rd);
  EXPECT_TRUE(has_q3codes(*rd, 0));
}

// The 3-bit code stream costs less than hmask and qs coded apart.
TEST(Q3Codes, SmallerThanWithout) {
  const auto file = q3k_file({{"blk.0.ffn_down.weight", kGgmlTypeQ3_K, 1536, 576}});
  const auto with = encode(file, 1 << 20), without = encode(file, 1 << 20, false);
  auto a = read_back(with, file), b = read_back(without, file);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(has_q3codes(*a, 0));
  EXPECT_FALSE(has_q3codes(*b, 0));
  EXPECT_LT(with.size(), without.size() - file.size() / 100) << with.size() << " vs " << without.size();
}

// The wcodec tool decodes the file on every decoder path this CPU runs.
TEST(Q3Codes, EveryCpuPathDecodes) {
  const auto file = q3k_file({{"blk.0.ffn_down.weight", kGgmlTypeQ3_K, 1536, 61},
                              {"output_norm.weight", kGgmlTypeF32, 576, 1}});
  EXPECT_GE(wctest::decode_on_every_cpu_path(file), 1);
}

// A damaged chunk is an error, never wrong bytes: bits flipped across the
// first chunk's payload (part methods and lengths, the code part).
TEST(Q3Codes, DamagedChunksAreDetected) {
  const auto file = q3k_file({{"blk.0.ffn_down.weight", kGgmlTypeQ3_K, 1536, 384}});
  auto enc = encode(file, 64 * 1024);
  read_back(enc, file);
  wctest::expect_first_chunk_damage_refused(enc, file, 1u << kRecodeQ3Codes);
}

// fuzz_container's Q3_K seed, encoded as it encodes it (16 KiB chunks),
// takes the 3-bit code stream, so the fuzzer's edits reach it.
TEST(Q3Codes, FuzzSeedTakesTheCodeStream) {
  const auto file = wctest::q3_k_fuzz_seed();
  const auto enc = encode(file, 16 * 1024);
  auto rd = read_back(enc, file);
  ASSERT_TRUE(rd);
  EXPECT_TRUE(has_q3codes(*rd, 0)) << ReaderAccess::tensor(*rd, 0).split->describe();
}

// ------------------------------------------------------------------ refused records
namespace {

// Q3_K (110-byte blocks): hmask + qs as 3-bit codes (no model), the scales
// and d plain; a tensor of 2 rows of 2 blocks in bands of 1 row. Record
// bytes: 5 of header; stream 0 at 5 (range 0..96, elem_bits 10, flag 11,
// recode 12, model flag 13); stream 1 at 14 (7 bytes); stream 2 at 21 (7
// bytes); 28 in all.
TensorGeometry parent() { return wctest::split_parent(2, 2 * kQ3Block, 1); }
SplitModel q3_model() {
  SplitModel m;
  m.ggml_type = kGgmlTypeQ3_K;
  m.block_bytes = kQ3Block;
  SplitStream c, s, d;
  c.ranges = {{0, 96}};
  c.elem_bits = 8;
  c.recode = kRecodeQ3Codes;
  s.ranges = {{96, 12}};
  s.elem_bits = 8;
  d.ranges = {{108, 2}};
  d.elem_bits = 16;
  m.streams = {c, s, d};
  return m;
}
Status parse(const std::vector<uint8_t>& rec) { return wctest::parse_split_record(rec, parent()); }
void expect_refused(const std::vector<uint8_t>& rec, const std::string& needle) {
  wctest::expect_split_refused(rec, needle, parent());
}

}  // namespace

TEST(Q3CodesRefused, ValidRecordIsAccepted) {
  const auto rec = q3_model().serialize();
  ASSERT_EQ(rec.size(), 28u);
  EXPECT_EQ(rec[11], 3);
  EXPECT_EQ(rec[12], kRecodeQ3Codes);
  auto m = SplitModel::deserialize(rec.data(), rec.size(), parent(), "x");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->format_minor(), 8);
  EXPECT_EQ(m->streams[0].recode, kRecodeQ3Codes);
  EXPECT_EQ(m->streams[0].coded_bytes_per_block(), 256u);
  EXPECT_EQ(m->geometry_of(parent(), m->streams[0]).cols, 512u);
  EXPECT_EQ(m->serialize(), rec);
  // Two ranges of 32 and 64 bytes are one stream of 96 too.
  auto two = q3_model();
  two.streams[0].ranges = {{0, 32}, {32, 64}};
  EXPECT_TRUE(parse(two.serialize()).ok());
}
TEST(Q3CodesRefused, RecodeUnknown) {
  auto rec = q3_model().serialize();
  rec[12] = 5;
  expect_refused(rec, "stream 0 recode 5 (allowed 1 zero-point shift, 2 fp16 as bf16, 3 3-bit codes (format 2.8), "
                      "4 forced zero apart (format 2.9))");
}
TEST(Q3CodesRefused, StreamNot96Bytes) {
  auto m = q3_model();
  m.streams[0].ranges = {{0, 64}};
  m.streams[1].ranges = {{64, 44}};
  expect_refused(m.serialize(), "stream 0 bytes per block 64 (allowed 96 for 3-bit codes (hmask and qs))");
}
TEST(Q3CodesRefused, ElemBitsOfTheCodedStream) {
  // 256 codes of 8 bits: any of 2..32 divides 2048 bits; 12 is no size.
  auto rec = q3_model().serialize();
  rec[10] = 12;
  expect_refused(rec, "stream 0 elem_bits 12");
}
TEST(Q3CodesRefused, RecodedModelFlag) {
  auto rec = q3_model().serialize();
  rec[13] = 2;
  expect_refused(rec, "stream 0 recoded model flag 2 (allowed 0, 1)");
}
TEST(Q3CodesRefused, Truncated) {
  const auto rec = q3_model().serialize();
  for (size_t n = 0; n < rec.size(); ++n) {
    const Status st = parse(std::vector<uint8_t>(rec.begin(), rec.begin() + static_cast<long>(n)));
    EXPECT_EQ(st.code(), Code::kCorruption) << n;
  }
}

// ------------------------------------------------------------------ refused data
namespace {

// A split chunk of q3_model's tensor (band 0: 1 row of 2 blocks) with every
// part raw: 512 codes, 24 scale bytes, two fp16 d.
Status run(const std::vector<uint8_t>& codes, std::vector<uint8_t>* out) {
  return wctest::decode_raw_split_chunk(parent(), q3_model(),
                                        {codes, std::vector<uint8_t>(24, 0x21), {0x00, 0x3c, 0x00, 0x3c}},
                                        2 * kQ3Block, out);
}

}  // namespace

// The payload decodes up to the checksum (which the test does not know):
// the codes were packed back into hmask and qs.
TEST(Q3CodesDataRefused, ValidDataReachesTheChecksum) {
  std::vector<uint8_t> codes(512, 4), out;
  codes[0] = 5;          // element 0: qs[0] bits 0..1 = 1, hmask[0] bit 0
  codes[256 + 200] = 2;  // block 1, element 200 = 128 + 2·32 + 8: qs[32 + 8] bits 4..5 = 2, hmask[8] bit 6 clear
  const Status st = run(codes, &out);
  EXPECT_NE(st.ToString().find("checksum"), std::string::npos) << st.ToString();
  EXPECT_EQ(out[0], 0xff);       // hmask[0]: every code >= 4
  EXPECT_EQ(out[32], 0x01);      // qs[0]: codes 5, 4, 4, 4 -> low pairs 1, 0, 0, 0
  EXPECT_EQ(out[kQ3Block + 8], 0xbf);
  EXPECT_EQ(out[kQ3Block + 32 + 32 + 8], 0x20);
  for (int i = 96; i < 108; ++i) EXPECT_EQ(out[i], 0x21);
  EXPECT_EQ(out[109], 0x3c);
}
TEST(Q3CodesDataRefused, CodeAboveSeven) {
  std::vector<uint8_t> out;
  for (uint8_t bad : {uint8_t{8}, uint8_t{9}, uint8_t{0x80}, uint8_t{0xff}}) {
    std::vector<uint8_t> codes(512, 3);
    codes[300] = bad;
    const Status st = run(codes, &out);
    EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
    EXPECT_NE(st.ToString().find("recoded 3-bit code " + std::to_string(bad) + " of element 300 (allowed 0..7)"),
              std::string::npos)
        << st.ToString();
    EXPECT_NE(st.ToString().find("f: tensor 0 chunk 0 stream 0"), std::string::npos) << st.ToString();
  }
}
