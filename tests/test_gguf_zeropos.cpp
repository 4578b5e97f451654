// tests/test_gguf_zeropos.cpp — the forced zero apart (format 2.9,
// docs/wcodec-format.md §8.6, recode 4): llama.cpp's Q4_0 quantizer maps
// every block's weight of the largest magnitude to code 0, so each group
// of 32 codes holds a 0; the position of the first one and the other 31
// codes are coded as two derived streams. The split and join are one to
// one on every group with a 0; Q4_0 tensors quantized as llama.cpp does
// from real weights (many chunks and a partial last one, one row, one
// block, an empty tensor; blocks whose 0 is at each position, blocks of
// all zeros) round trip byte for byte through the reader, the device plan
// and every CPU decoder path; the derived streams measure smaller than the
// nibbles; a tensor with a group without a 0 keeps the nibbles; damaged
// chunks are refused, never served wrong; a catalogue of refused records
// and data, one test per rule.
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

constexpr uint32_t kQ4Block = 18;

// Real weights (isnet-medium's, 2^21 of them: no test tensor repeats them).
const std::vector<float>& weights() { return wctest::isnet_weights(); }

std::vector<uint8_t> q4_0_file(const std::vector<wctest::QTensor>& ts) {
  auto file = wctest::make_quant_gguf(ts, weights());
  wctest::requantize_q4_0(file, weights());
  return file;
}

std::vector<uint8_t> encode(const std::vector<uint8_t>& file, uint64_t chunk_bytes, bool recode = true) {
  return wctest::encode_gguf_chunks(file, chunk_bytes, recode);
}

std::unique_ptr<Reader> read_back(const std::vector<uint8_t>& enc, const std::vector<uint8_t>& file) {
  return wctest::read_back_gguf(enc, file, "t.gguf.wcodec", wctest::ReadBack::kEveryChunkAndPlan);
}

bool has_zeropos(const Reader& rd, size_t t) { return wctest::split_recodes(rd, t) & (1u << kRecodeZeroPos); }

// Code e (0..31) of a 16-byte group in ggml's Q4_0 layout.
int code_at(const uint8_t* g, uint32_t e) { return e < 16 ? g[e] & 15 : g[e - 16] >> 4; }

}  // namespace

// The split follows ggml's element order (element e < 16 in the low nibble
// of byte e, e >= 16 in the high nibble of byte e − 16), the position is
// the first 0's, the rest keeps the other codes in order, and the join is
// its inverse; a group without a 0 is refused.
TEST(ZeroPos, SplitFollowsGgmlAndJoinIsItsInverse) {
  std::mt19937 rng(11);
  constexpr uint64_t kGroups = 40 * 32;
  std::vector<uint8_t> in(kGroups * 16), pos(kGroups), rest(kGroups * 31), back(kGroups * 16);
  for (auto& b : in) b = static_cast<uint8_t>(rng());
  for (uint64_t g = 0; g < kGroups; ++g) {
    uint8_t* p = in.data() + 16 * g;
    // Group g: its first 0 at element g % 32 (codes before it nonzero).
    const uint32_t z = g % 32;
    for (uint32_t e = 0; e < z; ++e) {
      uint8_t& b = p[e % 16];
      const uint8_t c = static_cast<uint8_t>(1 + rng() % 15);
      b = static_cast<uint8_t>(e < 16 ? (b & 0xf0) | c : (b & 0x0f) | c << 4);
    }
    p[z % 16] = static_cast<uint8_t>(z < 16 ? p[z % 16] & 0xf0 : p[z % 16] & 0x0f);
  }
  std::memset(in.data() + 16 * 7, 0, 16);  // all zeros: position 0
  ASSERT_TRUE(zero_pos_split(in.data(), kGroups, pos.data(), rest.data()));
  for (uint64_t g = 0; g < kGroups; ++g) {
    const uint8_t* p = in.data() + 16 * g;
    const uint32_t z = g == 7 ? 0 : g % 32;
    ASSERT_EQ(pos[g], z) << g;
    for (uint32_t e = 0, k = 0; e < 32; ++e) {
      if (e == z) {
        ASSERT_EQ(code_at(p, e), 0);
        continue;
      }
      ASSERT_EQ(rest[31 * g + k++], code_at(p, e)) << g << " " << e;
    }
  }
  ASSERT_TRUE(zero_pos_join(pos.data(), rest.data(), kGroups, back.data(), "x").ok());
  EXPECT_TRUE(back == in);
  std::vector<uint8_t> one(16, 0x11);
  EXPECT_FALSE(zero_pos_split(one.data(), 1, pos.data(), rest.data())) << "a group without a 0";
}

// The vector join (avx2, avx512, neon) against the portable loop, on
// groups whose 0 sits at every position and on groups that break each rule
// once (a position above 31, a code above 15, a 0 before the position, at
// every place in the group): the same bytes, the same refusals.
TEST(ZeroPos, VectorJoinEqualsThePortableOne) {
  std::mt19937 rng(5);
  int valid = 0, refused = 0, vector_trials = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const uint64_t groups = 1 + rng() % 40;
    std::vector<uint8_t> pos(groups), rest(groups * 31);
    for (uint64_t g = 0; g < groups; ++g) {
      pos[g] = static_cast<uint8_t>(rng() % 32);
      for (uint32_t e = 0; e < 31; ++e)
        rest[31 * g + e] = static_cast<uint8_t>(e < pos[g] ? 1 + rng() % 15 : rng() % 16);
    }
    const uint64_t g = rng() % groups;
    const uint32_t e = rng() % 31;
    switch (trial % 5) {
      case 0: pos[g] = static_cast<uint8_t>(32 + rng() % 224); break;
      case 1: rest[31 * g + e] = static_cast<uint8_t>(16 + rng() % 240); break;
      case 2:
        pos[g] = static_cast<uint8_t>(1 + rng() % 31);
        rest[31 * g + rng() % pos[g]] = 0;
        break;
      default: break;
    }
    std::vector<uint8_t> want(groups * 16, 0xEE), got(groups * 16, 0xEE);
    const Status ws = zero_pos_join(pos.data(), rest.data(), groups, want.data(), "f");
    (ws.ok() ? valid : refused)++;
    if (ZeroPosJoinFn vx = zero_pos_join_vector()) {
      const Status gs = zero_pos_join(pos.data(), rest.data(), groups, got.data(), "f", vx);
      ASSERT_EQ(gs.ToString(), ws.ToString()) << "trial " << trial;
      if (ws.ok()) {
        ASSERT_EQ(got, want) << "trial " << trial;
      }
      EXPECT_EQ(vx(pos.data(), rest.data(), groups, got.data()), ws.ok()) << "trial " << trial;
      ++vector_trials;
    }
  }
  EXPECT_GT(valid, 1000);
  EXPECT_GT(refused, 1000);
  if (cpu_path() == CpuPath::kScalar) {
    EXPECT_EQ(vector_trials, 0) << "the scalar path keeps the portable loop";
  } else {
    EXPECT_EQ(vector_trials, 3000) << "the vector paths join with Highway";
  }
}

TEST(ZeroPos, RoundTripQ4_0) {
  const auto file = q4_0_file({{"blk.0.ffn_gate.weight", kGgmlTypeQ4_0, 576, 301},
                               {"blk.0.one_row.weight", kGgmlTypeQ4_0, 576, 1},
                               {"blk.0.one_block.weight", kGgmlTypeQ4_0, 32, 1},
                               {"blk.0.empty.weight", kGgmlTypeQ4_0, 576, 0},
                               {"output_norm.weight", kGgmlTypeF32, 576, 1}});
  ASSERT_FALSE(file.empty());
  const auto enc = encode(file, 16 * 1024);
  auto rd = read_back(enc, file);
  ASSERT_TRUE(rd);
  EXPECT_GT(rd->num_chunks(), 6u);
  ASSERT_TRUE(ReaderAccess::tensor(*rd, 0).split);
  EXPECT_TRUE(has_zeropos(*rd, 0)) << ReaderAccess::tensor(*rd, 0).split->describe();
  EXPECT_EQ(wctest::format_version(*rd), "2.9");
}

// Blocks whose first 0 sits at every position, blocks of all zeros and of
// one 0 among 15s, among real ones: byte for byte.
TEST(ZeroPos, EdgeBlocks) {
  auto file = q4_0_file({{"blk.0.ffn_gate.weight", kGgmlTypeQ4_0, 576, 160}});
  auto f = parse_gguf(file.data(), file.size(), file.size(), "t.gguf");
  ASSERT_TRUE(f.ok());
  uint8_t* p = file.data() + f->data_offset + f->tensors[0].offset;
  for (uint32_t z = 0; z < 32; ++z) {
    uint8_t* qs = p + kQ4Block * (7 * z + 3) + 2;
    for (uint32_t e = 0; e < 32; ++e) {
      const uint8_t c = e == z ? 0 : e < z ? 15 : static_cast<uint8_t>((e * 7) % 16);
      qs[e % 16] = static_cast<uint8_t>(e < 16 ? (qs[e % 16] & 0xf0) | c : (qs[e % 16] & 0x0f) | c << 4);
    }
  }
  std::memset(p + kQ4Block * 250 + 2, 0, 16);
  const auto enc = encode(file, 16 * 1024);
  auto rd = read_back(enc, file);
  ASSERT_TRUE(rd);
  ASSERT_TRUE(ReaderAccess::tensor(*rd, 0).split);
  EXPECT_TRUE(has_zeropos(*rd, 0)) << ReaderAccess::tensor(*rd, 0).split->describe();
}

// The derived streams cost less than the nibbles (the 0 of each block is
// not coded: about 4 bits a block less, here over 0.5% of the codes).
TEST(ZeroPos, SmallerThanWithout) {
  const auto file = q4_0_file({{"blk.0.ffn_gate.weight", kGgmlTypeQ4_0, 576, 1536}});
  const auto with = encode(file, 1 << 20), without = encode(file, 1 << 20, false);
  auto a = read_back(with, file), b = read_back(without, file);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(has_zeropos(*a, 0));
  EXPECT_FALSE(has_zeropos(*b, 0));
  EXPECT_LT(with.size(), without.size() - file.size() / 200) << with.size() << " vs " << without.size();
}

// One group without a 0 anywhere in the tensor: the codes stay nibbles.
TEST(ZeroPos, GroupWithoutZeroKeepsTheNibbles) {
  auto file = q4_0_file({{"blk.0.ffn_gate.weight", kGgmlTypeQ4_0, 576, 200}});
  auto f = parse_gguf(file.data(), file.size(), file.size(), "t.gguf");
  ASSERT_TRUE(f.ok());
  uint8_t* qs = file.data() + f->data_offset + f->tensors[0].offset + kQ4Block * 1000 + 2;
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(qs[j] | 0x11);
  const auto enc = encode(file, 16 * 1024);
  auto rd = read_back(enc, file);
  ASSERT_TRUE(rd);
  EXPECT_FALSE(has_zeropos(*rd, 0));
}

// The wcodec tool decodes the file on every decoder path this CPU runs.
TEST(ZeroPos, EveryCpuPathDecodes) {
  const auto file = q4_0_file({{"blk.0.ffn_gate.weight", kGgmlTypeQ4_0, 576, 333},
                               {"output_norm.weight", kGgmlTypeF32, 576, 1}});
  auto rd = read_back(encode(file, 16 * 1024), file);  // as the tool encodes it
  ASSERT_TRUE(rd);
  EXPECT_TRUE(has_zeropos(*rd, 0));
  EXPECT_GE(wctest::decode_on_every_cpu_path(file), 1);
}

// A damaged chunk is an error, never wrong bytes: bits flipped across the
// first chunk's payload (part methods and lengths, the position and code
// parts).
TEST(ZeroPos, DamagedChunksAreDetected) {
  const auto file = q4_0_file({{"blk.0.ffn_gate.weight", kGgmlTypeQ4_0, 576, 400}});
  auto enc = encode(file, 64 * 1024);
  read_back(enc, file);
  wctest::expect_first_chunk_damage_refused(enc, file, 1u << kRecodeZeroPos);
}

// fuzz_container's Q4_0 seed, encoded as it encodes it (16 KiB chunks),
// takes the forced zero apart, so the fuzzer's edits reach it.
TEST(ZeroPos, FuzzSeedTakesTheDerivedStreams) {
  const auto file = wctest::q4_0_fuzz_seed();
  const auto enc = encode(file, 16 * 1024);
  auto rd = read_back(enc, file);
  ASSERT_TRUE(rd);
  ASSERT_TRUE(ReaderAccess::tensor(*rd, 0).split);
  EXPECT_TRUE(has_zeropos(*rd, 0)) << ReaderAccess::tensor(*rd, 0).split->describe();
}

// ------------------------------------------------------------------ refused records
namespace {

// Q4_0 (18-byte blocks): d plain (fp16), the codes with the forced zero
// apart (both derived streams without a model); a tensor of 2 rows of 2
// blocks in bands of 1 row. Record bytes: 5 of header; stream 0 at 5
// (range 0..2, elem_bits 10, model flag 11); stream 1 at 12 (range 2..18
// at 13, elem_bits 17, flag 18, recode 19, derived 0 elem_bits 20 and
// model flag 21, derived 1 elem_bits 22 and model flag 23); 24 in all.
TensorGeometry parent() { return wctest::split_parent(2, 2 * kQ4Block, 1); }
SplitModel zp_model() {
  SplitModel m;
  m.ggml_type = kGgmlTypeQ4_0;
  m.block_bytes = kQ4Block;
  SplitStream d, c;
  d.ranges = {{0, 2}};
  d.elem_bits = 16;
  c.ranges = {{2, 16}};
  c.elem_bits = 8;
  c.recode = kRecodeZeroPos;
  for (uint32_t k = 0; k < kZpDerivedCount; ++k) {
    SplitStream x;
    x.derived_bpb = c.derived_bytes_per_block(k);
    x.elem_bits = 8;
    c.derived.push_back(x);
  }
  m.streams = {d, c};
  return m;
}
Status parse(const std::vector<uint8_t>& rec) { return wctest::parse_split_record(rec, parent()); }
void expect_refused(const std::vector<uint8_t>& rec, const std::string& needle) {
  wctest::expect_split_refused(rec, needle, parent());
}

}  // namespace

TEST(ZeroPosRefused, ValidRecordIsAccepted) {
  const auto rec = zp_model().serialize();
  ASSERT_EQ(rec.size(), 24u);
  EXPECT_EQ(rec[18], 3);
  EXPECT_EQ(rec[19], kRecodeZeroPos);
  auto m = SplitModel::deserialize(rec.data(), rec.size(), parent(), "x");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->format_minor(), 9);
  EXPECT_EQ(m->num_parts(), 3u);
  ASSERT_EQ(m->streams[1].derived.size(), 2u);
  EXPECT_EQ(m->geometry_of(parent(), m->streams[1].derived[kZpPos]).cols, 2u);
  EXPECT_EQ(m->geometry_of(parent(), m->streams[1].derived[kZpRest]).cols, 62u);
  EXPECT_EQ(m->serialize(), rec);
  EXPECT_NE(m->describe().find("zeropos"), std::string::npos) << m->describe();
}
TEST(ZeroPosRefused, StreamNotWholeGroups) {
  auto m = zp_model();
  m.streams[0].ranges = {{0, 10}};
  m.streams[1].ranges = {{10, 8}};
  expect_refused(m.serialize(), "stream 1 bytes per block 8 (allowed a multiple of 16 for the forced zero apart)");
}
TEST(ZeroPosRefused, ElemBitsOfTheStream) {
  auto rec = zp_model().serialize();
  rec[17] = 4;
  expect_refused(rec, "stream 1 elem_bits 4 (allowed 8 for the forced zero apart)");
}
TEST(ZeroPosRefused, ElemBitsOfADerivedStream) {
  auto rec = zp_model().serialize();
  rec[22] = 12;
  expect_refused(rec, "stream 1 derived 1 elem_bits 12");
  rec = zp_model().serialize();
  rec[20] = 16;  // 1 byte per block: 16-bit elements do not divide it
  expect_refused(rec, "stream 1 derived 0 elem_bits 16");
}
TEST(ZeroPosRefused, DerivedModelFlag) {
  auto rec = zp_model().serialize();
  rec[21] = 2;
  expect_refused(rec, "stream 1 derived 0 model flag 2 (allowed 0, 1)");
  rec = zp_model().serialize();
  rec[23] = 1;  // a model record that is not there
  expect_refused(rec, "stream 1 derived 1 model record truncated");
}
TEST(ZeroPosRefused, Truncated) {
  const auto rec = zp_model().serialize();
  for (size_t n = 0; n < rec.size(); ++n) {
    const Status st = parse(std::vector<uint8_t>(rec.begin(), rec.begin() + static_cast<long>(n)));
    EXPECT_EQ(st.code(), Code::kCorruption) << n;
  }
}
TEST(ZeroPosRefused, PayloadWithoutTheDerivedParts) {
  // A chunk payload of two parts (d, codes as one stream) where the record
  // asks for three.
  auto m = SplitModel::deserialize(zp_model().serialize().data(), 24, parent(), "f");
  ASSERT_TRUE(m.ok());
  std::vector<uint8_t> p;
  for (uint32_t len : {4u, 32u}) {
    p.push_back(0);
    for (int i = 0; i < 4; ++i) p.push_back(static_cast<uint8_t>(len >> (8 * i)));
    p.insert(p.end(), len, 0);
  }
  std::vector<SplitPart> parts;
  const Status st = parse_split_payload(*m, p.data(), p.size(), "f: tensor 0 chunk 0", &parts);
  EXPECT_EQ(st.code(), Code::kCorruption);
  EXPECT_NE(st.ToString().find("truncated in stream 1 derived 1"), std::string::npos) << st.ToString();
}

// ------------------------------------------------------------------ refused data
namespace {

// A split chunk of zp_model's tensor (band 0: 1 row of 2 blocks) with every
// part raw: two fp16 d, two positions, 62 other codes.
Status run(const std::vector<uint8_t>& pos, const std::vector<uint8_t>& rest, std::vector<uint8_t>* out) {
  return wctest::decode_raw_split_chunk(parent(), zp_model(), {{0x00, 0x3c, 0x00, 0xbc}, pos, rest}, 2 * kQ4Block,
                                        out);
}

}  // namespace

// The payload decodes up to the checksum (which the test does not know):
// the codes were joined back into nibbles, the 0 at each position.
TEST(ZeroPosDataRefused, ValidDataReachesTheChecksum) {
  std::vector<uint8_t> rest(62, 9), out;
  rest[0] = 3;        // block 0, element 0 (before its 0 at 1)
  rest[31 + 20] = 4;  // block 1: its 0 at 20, so rest 20 is element 21
  const Status st = run({1, 20}, rest, &out);
  EXPECT_NE(st.ToString().find("checksum"), std::string::npos) << st.ToString();
  EXPECT_EQ(out[0], 0x00);
  EXPECT_EQ(out[1], 0x3c);
  EXPECT_EQ(out[2], 0x93);   // elements 0 (3) and 16 (9)
  EXPECT_EQ(out[3], 0x90);   // elements 1 (the 0) and 17
  EXPECT_EQ(out[kQ4Block + 1], 0xbc);
  EXPECT_EQ(out[kQ4Block + 2 + 4], 0x09);  // element 20: the 0 (high), element 4: 9
  EXPECT_EQ(out[kQ4Block + 2 + 5], 0x49);  // element 21: 4
}
TEST(ZeroPosDataRefused, PositionAbove31) {
  std::vector<uint8_t> out;
  for (uint8_t bad : {uint8_t{32}, uint8_t{200}, uint8_t{255}}) {
    const Status st = run({0, bad}, std::vector<uint8_t>(62, 5), &out);
    EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
    EXPECT_NE(st.ToString().find("zero position " + std::to_string(bad) + " of group 1 (allowed 0..31)"),
              std::string::npos)
        << st.ToString();
    EXPECT_NE(st.ToString().find("f: tensor 0 chunk 0 stream 1"), std::string::npos) << st.ToString();
  }
}
TEST(ZeroPosDataRefused, CodeAbove15) {
  std::vector<uint8_t> out;
  for (uint8_t bad : {uint8_t{16}, uint8_t{0x80}, uint8_t{0xff}}) {
    std::vector<uint8_t> rest(62, 5);
    rest[31 + 7] = bad;  // group 1 (0 at 3): element 8
    const Status st = run({0, 3}, rest, &out);
    EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
    EXPECT_NE(st.ToString().find("recoded 4-bit code " + std::to_string(bad) + " of group 1 element 8 (allowed 0..15)"),
              std::string::npos)
        << st.ToString();
  }
}
TEST(ZeroPosDataRefused, ZeroBeforeThePosition) {
  // The position is the first 0's: a 0 before it is a second encoding of
  // the same codes, refused.
  std::vector<uint8_t> rest(62, 5), out;
  rest[2] = 0;
  const Status st = run({6, 0}, rest, &out);
  EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
  EXPECT_NE(st.ToString().find("recoded 4-bit code 0 of group 0 element 2 (allowed 1..15 before the group's zero "
                               "position 6)"),
            std::string::npos)
      << st.ToString();
}
