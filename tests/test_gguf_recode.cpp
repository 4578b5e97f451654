// tests/test_gguf_recode.cpp — recoded split streams (format 2.7,
// docs/wcodec-format.md §8.6): Q4_1 tensors quantized as llama.cpp does
// from bf16 weights (every block holds codes 0 and 15; m an fp16 with 3
// low zero mantissa bits) round trip byte for byte with their codes
// rotated by each block's zero point and their m coded as bf16 (many
// chunks and a partial last one, one row, one block, blocks with a zero,
// negative, infinite or NaN d, NaN, infinite, subnormal or negative-zero
// m), through the reader, the device plan and every CPU decoder path; the
// recoded streams measure smaller than without them; damaged chunks are
// refused, never served wrong; the fp16 <-> bf16 map is exact and one to
// one; and a catalogue of refused records and data, one test per rule.
//
// Thread-safety: single-threaded tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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

const std::vector<float>& weights() { return wctest::split_test_weights<13>(); }

std::vector<uint8_t> q4_1_file(const std::vector<wctest::QTensor>& ts) {
  auto file = wctest::make_quant_gguf(ts, weights());
  wctest::requantize_q4_1_from_bf16(file, weights());
  return file;
}

std::vector<uint8_t> encode(const std::vector<uint8_t>& file, uint64_t chunk_bytes, bool recode = true) {
  return wctest::encode_gguf_chunks(file, chunk_bytes, recode);
}

std::unique_ptr<Reader> read_back(const std::vector<uint8_t>& enc, const std::vector<uint8_t>& file) {
  return wctest::read_back_gguf(enc, file, "t.gguf.wcodec", wctest::ReadBack::kEveryChunkAndPlan);
}

unsigned recodes(const Reader& rd, size_t t) { return wctest::split_recodes(rd, t); }
constexpr unsigned kBoth = (1u << kRecodeZeroShift) | (1u << kRecodeF16AsBf16);

float half_value(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const float v = e == 0 ? std::ldexp(static_cast<float>(m), -24) : std::ldexp(static_cast<float>(1024 + m), e - 25);
  return (h & 0x8000) ? -v : v;
}

}  // namespace

// Every fp16 value with 3 low zero mantissa bits maps to the bf16 of the
// same value and back; exactly those 8192 bf16 values map back.
TEST(Recode, Bf16MapIsExactAndOneToOne) {
  int accepted = 0;
  for (uint32_t h = 0; h < 65536; h += 8) {
    const uint16_t b = f16_to_bf16_exact(static_cast<uint16_t>(h));
    uint16_t back = 0;
    ASSERT_TRUE(bf16_to_f16_exact(b, &back)) << h;
    EXPECT_EQ(back, h);
    if (((h >> 10) & 31) != 31) {
      const uint32_t u = static_cast<uint32_t>(b) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      EXPECT_EQ(f, half_value(static_cast<uint16_t>(h))) << std::hex << h;
    }
  }
  for (uint32_t b = 0; b < 65536; ++b) {
    uint16_t h;
    if (bf16_to_f16_exact(static_cast<uint16_t>(b), &h)) {
      ++accepted;
      EXPECT_EQ(f16_to_bf16_exact(h), b) << std::hex << b;
    }
  }
  EXPECT_EQ(accepted, 8192);
}

// The zero point: round(-m / d) clamped to 0..15, no rotation for a d that
// is not a positive finite number or an m that is not finite; rotations
// undo exactly.
// The vector paths' zero shifts (eight blocks a division) against the
// scalar rule: every fp16 d with scales m of every kind, in 20-byte blocks
// (Q4_1's d at 0, m at 2) and in blocks with d and m elsewhere; a block
// count that leaves a tail.
TEST(Recode, VectorZeroShiftsEqualTheScalarOnes) {
  const ZeroShiftsFn vx = zero_shifts_vector();
  if (!vx) {
    EXPECT_EQ(cpu_path(), CpuPath::kScalar) << "only the scalar path keeps the scalar loop";
    return;
  }
  constexpr uint64_t kBlocks = 65536 + 5;
  for (const uint32_t bb : {20u, 24u}) {
    const uint32_t d_off = bb == 20 ? 0 : 10, m_off = bb == 20 ? 2 : 4;
    for (const uint16_t m : {0x0000, 0x8001, 0x83ff, 0xbc00, 0xc200, 0xc780, 0xd640, 0x3c00, 0xfc00, 0x7e00, 0xfbff}) {
      std::vector<uint8_t> blocks(kBlocks * bb, 0x5a), want(kBlocks), got(kBlocks, 0xee);
      for (uint64_t b = 0; b < kBlocks; ++b) {
        const uint16_t d = static_cast<uint16_t>(b * 40503u);  // every value once in the first 65536
        blocks[b * bb + d_off] = static_cast<uint8_t>(d);
        blocks[b * bb + d_off + 1] = static_cast<uint8_t>(d >> 8);
        blocks[b * bb + m_off] = static_cast<uint8_t>(m);
        blocks[b * bb + m_off + 1] = static_cast<uint8_t>(m >> 8);
      }
      zero_shifts_of(blocks.data(), kBlocks, bb, d_off, m_off, want.data());
      vx(blocks.data(), kBlocks, bb, d_off, m_off, got.data());
      for (uint64_t b = 0; b < kBlocks; ++b)
        ASSERT_EQ(got[b], want[b]) << "block " << b << " m " << std::hex << m << " block bytes " << std::dec << bb;
    }
  }
}

TEST(Recode, ZeroShift) {
  const uint16_t one = 0x3c00;
  EXPECT_EQ(zero_shift_of(one, 0xc780), 0);       // m = -7.5: zr 8
  EXPECT_EQ(zero_shift_of(one, 0xc200), 5);       // m = -3: zr 3
  EXPECT_EQ(zero_shift_of(one, 0xc300), 4);       // m = -3.5: zr 4 (halves up)
  EXPECT_EQ(zero_shift_of(one, 0x3c00), 8);       // m = 1: zr 0
  EXPECT_EQ(zero_shift_of(one, 0xd640), 9);       // m = -100: zr 15
  EXPECT_EQ(zero_shift_of(0x0001, 0xbc00), 9);    // subnormal d: zr 15
  EXPECT_EQ(zero_shift_of(0x0000, 0xc200), 0);    // d = 0
  EXPECT_EQ(zero_shift_of(0xbc00, 0xc200), 0);    // d < 0
  EXPECT_EQ(zero_shift_of(0x7c00, 0xc200), 0);    // d = inf
  EXPECT_EQ(zero_shift_of(0x7e00, 0xc200), 0);    // d = NaN
  EXPECT_EQ(zero_shift_of(one, 0x7e00), 0);       // m = NaN
  EXPECT_EQ(zero_shift_of(one, 0xfc00), 0);       // m = -inf
  // Every fp16 d (subnormals, infinities, NaNs included) against the rule
  // computed here from libm's exact conversion, for scales m of every
  // kind: the decoder's conversion of fp16 bits must be exact.
  auto f16 = [](uint16_t h) {
    const int e = (h >> 10) & 31, mant = h & 1023;
    const float mag = e == 31 ? (mant ? NAN : INFINITY)
                              : e == 0 ? std::ldexp(static_cast<float>(mant), -24)
                                       : std::ldexp(static_cast<float>(1024 + mant), e - 25);
    return h & 0x8000 ? -mag : mag;
  };
  for (const uint16_t m : {0x0000, 0x8001, 0x83ff, 0xbc00, 0xc200, 0xc780, 0xd640, 0x3c00, 0xfc00, 0x7e00}) {
    for (uint32_t db = 0; db < 65536; ++db) {
      const float d = f16(static_cast<uint16_t>(db)), mv = f16(m);
      uint32_t zr = 8;
      if (std::isfinite(d) && d > 0 && std::isfinite(mv)) {
        const float z = -mv / d;
        zr = !(z >= 0.5f) ? 0 : z >= 14.5f ? 15 : static_cast<uint32_t>(z + 0.5f);
      }
      ASSERT_EQ(zero_shift_of(static_cast<uint16_t>(db), m), (8 - zr) & 15) << std::hex << db << " " << m;
    }
  }
  for (uint32_t s = 0; s < 16; ++s) {
    std::vector<uint8_t> v(256), w;
    for (uint32_t i = 0; i < 256; ++i) v[i] = static_cast<uint8_t>(i);
    w = v;
    rotate_nibbles(w.data(), 256, static_cast<uint8_t>(s), true);
    if (s) {
      EXPECT_NE(w, v);
    }
    EXPECT_EQ(w[0], static_cast<uint8_t>(s | s << 4));
    rotate_nibbles(w.data(), 256, static_cast<uint8_t>(s), false);
    EXPECT_EQ(w, v) << s;
  }
}

// Many chunks with a partial last one, one row, one block, a zero-size
// tensor: byte for byte, both recodes in use, the file marked 2.7.
TEST(Recode, RoundTripQ4_1) {
  const auto file = q4_1_file({{"blk.0.ffn_up.weight", kGgmlTypeQ4_1, 576, 203},
                               {"blk.0.one_row.weight", kGgmlTypeQ4_1, 576, 1},
                               {"blk.0.one_block.weight", kGgmlTypeQ4_1, 32, 1},
                               {"blk.0.empty.weight", kGgmlTypeQ4_1, 576, 0},
                               {"output_norm.weight", kGgmlTypeF32, 576, 1}});
  ASSERT_FALSE(file.empty());
  const auto enc = encode(file, 16 * 1024);
  auto rd = read_back(enc, file);
  ASSERT_TRUE(rd);
  EXPECT_GT(rd->num_chunks(), 6u);
  EXPECT_EQ(recodes(*rd, 0), kBoth) << ReaderAccess::tensor(*rd, 0).split->describe();
  EXPECT_EQ(wctest::format_version(*rd), "2.7");
}

// Blocks whose d is zero, negative, infinite or NaN, whose m is NaN,
// infinite, subnormal or negative zero (all with 3 low zero bits, so m
// stays bf16-coded), codes of every value: byte for byte.
TEST(Recode, EdgeBlocks) {
  auto file = q4_1_file({{"blk.0.ffn_up.weight", kGgmlTypeQ4_1, 576, 256}});
  auto f = parse_gguf(file.data(), file.size(), file.size(), "t.gguf");
  ASSERT_TRUE(f.ok());
  uint8_t* p = file.data() + f->data_offset + f->tensors[0].offset;
  const uint16_t dm[][2] = {{0x0000, 0xc200}, {0xbc00, 0xc200}, {0x7c00, 0xc200}, {0x7e00, 0xc200},
                            {0x3c00, 0x7e00}, {0x3c00, 0xfc00}, {0x3c00, 0x0008}, {0x3c00, 0x8000},
                            {0x0001, 0xbc00}, {0x2000, 0x7c00}};
  for (size_t i = 0; i < sizeof dm / sizeof dm[0]; ++i) {
    uint8_t* blk = p + 20 * (7 * i + 3);
    std::memcpy(blk, &dm[i][0], 2);
    std::memcpy(blk + 2, &dm[i][1], 2);
    for (int j = 0; j < 16; ++j) blk[4 + j] = static_cast<uint8_t>(j * 17 + i);
  }
  const auto enc = encode(file, 64 * 1024);
  auto rd = read_back(enc, file);
  ASSERT_TRUE(rd);
  EXPECT_EQ(recodes(*rd, 0), kBoth) << ReaderAccess::tensor(*rd, 0).split->describe();
}

// An m with a low mantissa bit set anywhere keeps the m stream fp16; the
// codes stay rotated.
TEST(Recode, OneInexactMinimumKeepsFp16) {
  auto file = q4_1_file({{"blk.0.ffn_up.weight", kGgmlTypeQ4_1, 576, 64}});
  auto f = parse_gguf(file.data(), file.size(), file.size(), "t.gguf");
  ASSERT_TRUE(f.ok());
  file[f->data_offset + f->tensors[0].offset + 20 * 100 + 2] |= 1;
  const auto enc = encode(file, 8 * 1024);
  auto rd = read_back(enc, file);
  ASSERT_TRUE(rd);
  EXPECT_EQ(recodes(*rd, 0), 1u << kRecodeZeroShift) << ReaderAccess::tensor(*rd, 0).split->describe();
}

// The recoded streams cost less than the split without them.
TEST(Recode, SmallerThanWithout) {
  const auto file = q4_1_file({{"blk.0.ffn_up.weight", kGgmlTypeQ4_1, 576, 256}});
  const auto with = encode(file, 64 * 1024), without = encode(file, 64 * 1024, false);
  auto a = read_back(with, file), b = read_back(without, file);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(recodes(*a, 0), kBoth);
  EXPECT_EQ(recodes(*b, 0), 0u);
  EXPECT_LT(with.size(), without.size() - file.size() / 100) << with.size() << " vs " << without.size();
}

// The wcodec tool decodes the file on every decoder path this CPU runs.
TEST(Recode, EveryCpuPathDecodes) {
  EXPECT_GE(wctest::decode_on_every_cpu_path(q4_1_file({{"blk.0.ffn_up.weight", kGgmlTypeQ4_1, 576, 203},
                                                        {"output_norm.weight", kGgmlTypeF32, 576, 1}})),
            1);
}

// A damaged chunk is an error, never wrong bytes: bits flipped across the
// first chunk's payload (part methods and lengths, the bf16 m part, the
// rotated codes part).
TEST(Recode, DamagedChunksAreDetected) {
  const auto file = q4_1_file({{"blk.0.ffn_up.weight", kGgmlTypeQ4_1, 576, 256}});
  auto enc = encode(file, 64 * 1024);
  {
    auto rd = read_back(enc, file);
    ASSERT_TRUE(rd);
    ASSERT_EQ(recodes(*rd, 0), kBoth);
  }
  wctest::expect_first_chunk_damage_refused(enc, file, kBoth);
}

// ------------------------------------------------------------------ refused records
namespace {

// Q4_1 (20-byte blocks): d plain, m bf16-recoded, the codes rotated by the
// zero point of d at 0 and m at 2; a tensor of 4 rows of 2 blocks in bands
// of 2 rows. Record bytes: 5 of header, stream 0 at 5 (7 bytes), stream 1
// at 12 (flag 18, recode 19, model flag 20), stream 2 at 21 (flag 27,
// recode 28, d_off 29, m_off 31, model flag 33); 34 in all.
TensorGeometry parent() { return wctest::split_parent(4, 40, 2); }
SplitModel rc_model() {
  SplitModel m;
  m.ggml_type = kGgmlTypeQ4_1;
  m.block_bytes = 20;
  SplitStream d, mn, c;
  d.ranges = {{0, 2}};
  d.elem_bits = 16;
  mn.ranges = {{2, 2}};
  mn.elem_bits = 16;
  mn.recode = kRecodeF16AsBf16;
  c.ranges = {{4, 16}};
  c.elem_bits = 4;
  c.recode = kRecodeZeroShift;
  c.rc_d_off = 0;
  c.rc_m_off = 2;
  m.streams = {d, mn, c};
  return m;
}
Status parse(const std::vector<uint8_t>& rec) { return wctest::parse_split_record(rec, parent()); }
void expect_refused(const std::vector<uint8_t>& rec, const std::string& needle) {
  wctest::expect_split_refused(rec, needle, parent());
}

}  // namespace

TEST(RecodeRefused, ValidRecordIsAccepted) {
  const auto rec = rc_model().serialize();
  ASSERT_EQ(rec.size(), 34u);
  EXPECT_EQ(rec[18], 3);
  EXPECT_EQ(rec[19], kRecodeF16AsBf16);
  EXPECT_EQ(rec[27], 3);
  EXPECT_EQ(rec[28], kRecodeZeroShift);
  auto m = SplitModel::deserialize(rec.data(), rec.size(), parent(), "x");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->format_minor(), 7);
  EXPECT_EQ(m->streams[1].recode, kRecodeF16AsBf16);
  EXPECT_EQ(m->streams[2].recode, kRecodeZeroShift);
  EXPECT_EQ(m->streams[2].rc_m_off, 2);
  EXPECT_EQ(m->serialize(), rec);
}
TEST(RecodeRefused, StreamFlag) {
  auto rec = rc_model().serialize();
  rec[27] = 4;
  expect_refused(rec, "stream 2 model flag 4");
}
TEST(RecodeRefused, RecodeNone) {
  auto rec = rc_model().serialize();
  rec[19] = 0;
  expect_refused(rec, "stream 1 recode 0 (allowed 1 zero-point shift, 2 fp16 as bf16, 3 3-bit codes (format 2.8), "
                      "4 forced zero apart (format 2.9))");
}
TEST(RecodeRefused, RecodeUnknown) {
  auto rec = rc_model().serialize();
  rec[28] = 5;  // 3 is 3-bit codes (format 2.8), 4 the forced zero apart (2.9)
  expect_refused(rec, "stream 2 recode 5");
}
TEST(RecodeRefused, ScaleOutsideTheBlock) {
  auto rec = rc_model().serialize();
  rec[29] = 19;
  expect_refused(rec, "stream 2 recode d_off 19 (allowed an fp16 inside the block of 20 bytes)");
}
TEST(RecodeRefused, MinimumInTheStreamItself) {
  auto rec = rc_model().serialize();
  rec[31] = 4;
  expect_refused(rec, "stream 2 recode m_off 4 (allowed bytes held by an earlier stream)");
}
TEST(RecodeRefused, ScaleStraddlingAnEarlierAndThisStream) {
  auto rec = rc_model().serialize();
  rec[29] = 3;  // bytes 3 (stream 1) and 4 (this stream)
  expect_refused(rec, "stream 2 recode d_off 3 (allowed bytes held by an earlier stream)");
}
TEST(RecodeRefused, ScaleInALaterStream) {
  auto m = rc_model();
  std::swap(m.streams[1], m.streams[2]);  // the codes before m
  expect_refused(m.serialize(), "stream 1 recode m_off 2 (allowed bytes held by an earlier stream)");
}
TEST(RecodeRefused, Bf16OfAnOddStream) {
  auto m = rc_model();
  m.streams[0].ranges = {{0, 3}};
  m.streams[0].elem_bits = 8;
  m.streams[0].recode = kRecodeF16AsBf16;
  m.streams[1].ranges = {{3, 1}};
  m.streams[1].elem_bits = 8;
  m.streams[1].recode = kRecodeNone;
  m.streams[2].rc_d_off = 3;  // keep the rotation's fields valid: held by streams 0 and 1
  m.streams[2].rc_m_off = 0;
  expect_refused(m.serialize(), "stream 0 bytes per block 3 (allowed even for fp16 as bf16)");
}
TEST(RecodeRefused, RecodedModelFlag) {
  auto rec = rc_model().serialize();
  rec[20] = 2;
  expect_refused(rec, "stream 1 recoded model flag 2 (allowed 0, 1)");
}
TEST(RecodeRefused, Truncated) {
  const auto rec = rc_model().serialize();
  for (size_t n = 0; n < rec.size(); ++n) {
    const Status st = parse(std::vector<uint8_t>(rec.begin(), rec.begin() + static_cast<long>(n)));
    EXPECT_EQ(st.code(), Code::kCorruption) << n;
  }
}

// ------------------------------------------------------------------ refused data
namespace {

// A split chunk of rc_model's tensor (band 0: 2 rows of 2 blocks) with
// every part raw: d, m as bf16 (four values), the codes.
std::vector<uint8_t> raw_payload(const std::vector<uint16_t>& bf16_m) {
  std::vector<uint8_t> m;
  for (uint16_t v : bf16_m) m.push_back(static_cast<uint8_t>(v)), m.push_back(static_cast<uint8_t>(v >> 8));
  return wctest::raw_split_payload(
      {{0x00, 0x3c, 0x00, 0x3c, 0x00, 0x3c, 0x00, 0x3c} /* d = 1 */, m, std::vector<uint8_t>(64, 0x5a)});
}
Status run(const std::vector<uint16_t>& bf16_m, std::vector<uint8_t>* out) {
  const TensorGeometry g = parent();
  const auto rec = rc_model().serialize();
  auto m = SplitModel::deserialize(rec.data(), rec.size(), g, "f");
  if (!m.ok()) return m.status();
  const auto p = raw_payload(bf16_m);
  out->assign(80, 0);
  DecodeScratch scratch;
  // The checksum is that of the expected bytes where given, else of zeros.
  return decode_split_chunk(g, *m, 0, p.data(), p.size(), 80, 0, out->data(), scratch, "f: tensor 0 chunk 0");
}

}  // namespace

// The payload decodes up to the checksum (which the test does not know):
// the rotation and the bf16 map ran; blocks rebuilt as d, m, rotated codes.
TEST(RecodeDataRefused, ValidDataReachesTheChecksum) {
  std::vector<uint8_t> out;
  const Status st = run({0xc040, 0xc040, 0x0000, 0x8000}, &out);  // m = -3, -3, 0, -0
  EXPECT_NE(st.ToString().find("checksum"), std::string::npos) << st.ToString();
  EXPECT_EQ(out[2], 0x00);  // fp16 -3 = 0xc200
  EXPECT_EQ(out[3], 0xc2);
  // Block 0: zr 3, rotation 5: stored nibble 0xa (0x5a) back to 0xa - 5 = 5,
  // 0x5 back to 0.
  EXPECT_EQ(out[4], 0x05);
  // Block 2: m = 0, zr 0, rotation 8: 0xa -> 2, 0x5 -> 0xd.
  EXPECT_EQ(out[40 + 4], 0xd2);
}
TEST(RecodeDataRefused, Bf16ValueNoFp16) {
  std::vector<uint8_t> out;
  for (uint16_t bad : {uint16_t{0x0001}, uint16_t{0x4780}, uint16_t{0x3501}, uint16_t{0x3481}}) {
    const Status st = run({0xc040, bad, 0x0000, 0x8000}, &out);
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%04x", bad);
    EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
    EXPECT_NE(st.ToString().find(std::string("recoded bf16 value ") + hex + " of element 1"), std::string::npos)
        << st.ToString();
    EXPECT_NE(st.ToString().find("f: tensor 0 chunk 0 stream 1"), std::string::npos) << st.ToString();
  }
}
