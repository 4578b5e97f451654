// tests/test_gguf_split.cpp — split models (format 2.5, docs/wcodec-format.md
// §6.1, §8.4): GGUF tensors of every block-quantized ggml type the encoder
// splits, round trip byte for byte (many chunks with a partial last one,
// one-row and zero-size tensors) on the CPU decoders and through the device
// plan; split chosen where it measures smaller; damaged split chunks
// detected; and a catalogue of refused split records and payloads, one test
// per rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bytes.h"
#include "device_plan.h"
#include "reader_i.h"
#include "gguf_split_testutil.h"
#include "split_model.h"
#include "tensor_decode.h"
#include "testutil.h"
#include "wcodec/container.h"
#include "wcodec/encode.h"
#include "wcodec/gguf.h"

using namespace wcodec;

namespace {

const std::vector<float>& weights() { return wctest::split_test_weights<7>(); }

std::vector<uint8_t> encode(const std::vector<uint8_t>& file, uint64_t chunk_bytes, bool split = true) {
  EncodeConfig cfg;
  cfg.chunk_bytes = chunk_bytes;
  cfg.split_models = split;
  return wctest::encode_gguf(file, cfg, "test.gguf");
}

std::unique_ptr<Reader> read_back(const std::vector<uint8_t>& enc, const std::vector<uint8_t>& file) {
  return wctest::read_back_gguf(enc, file, "test.gguf.wcodec", wctest::ReadBack::kBytes);
}

std::string type_name(uint32_t t) { return ggml_type_info(t)->name; }

}  // namespace

// Every block type: a tensor of many chunks (rows not a multiple of the
// chunk's rows: a partial last chunk), a one-row tensor and a zero-size
// tensor, read back byte for byte; the many-chunk tensor is split.
class SplitTypes : public ::testing::TestWithParam<uint32_t> {};

TEST_P(SplitTypes, RoundTripByteForByte) {
  const uint32_t type = GetParam();
  const auto* spec = wctest::quant_spec(type);
  ASSERT_NE(spec, nullptr);
  const int64_t ne0 = spec->block == 32 ? 576 : 1536;
  const auto file = wctest::make_quant_gguf({{"blk.0.ffn_up.weight", type, ne0, 203},
                                             {"blk.0.one_row.weight", type, ne0, 1},
                                             {"blk.0.empty.weight", type, ne0, 0},
                                             {"output_norm.weight", kGgmlTypeF32, 576, 1}},
                                            weights());
  ASSERT_FALSE(file.empty());
  const auto enc = encode(file, 16 * 1024);
  auto rd = read_back(enc, file);
  ASSERT_TRUE(rd);
  const TensorSummary s = rd->tensor_summary(0);
  EXPECT_GT(s.chunks_model + s.chunks_zstd + s.chunks_raw, 2u);
  EXPECT_EQ(s.kind, "split " + type_name(type)) << s.model;
  // Every chunk also through Reader::decode_chunk and the device plan
  // (which decodes split chunks on the host: they arrive ready).
  std::vector<size_t> all;
  for (size_t i = 0; i < rd->num_chunks(); ++i) {
    std::vector<uint8_t> out(rd->chunk(i).decoded_size);
    ASSERT_TRUE(rd->decode_chunk(i, out.data()).ok());
    EXPECT_EQ(0, std::memcmp(out.data(), file.data() + rd->chunk(i).decoded_offset, out.size()));
    all.push_back(i);
  }
  DevicePlan plan;
  ASSERT_TRUE(plan_chunks(*rd, all, &plan).ok());
  for (size_t k = 0; k < all.size(); ++k) {
    const PlanChunk& c = plan.chunks[k];
    if (c.kind != PlanKind::kReady) continue;
    EXPECT_EQ(0, std::memcmp(plan.arena.data() + c.raw, file.data() + rd->chunk(all[k]).decoded_offset, c.raw_len));
  }
  // The format revision is marked.
  const auto meta = rd->metadata_json();
  EXPECT_NE(meta.find("\"version\":\"2.5\""), std::string::npos) << meta;
}

INSTANTIATE_TEST_SUITE_P(GgmlTypes, SplitTypes,
                         ::testing::Values(2u, 3u, 6u, 7u, 8u, 10u, 11u, 12u, 13u, 14u, 20u, 23u, 34u, 35u),
                         [](const ::testing::TestParamInfo<uint32_t>& i) { return type_name(i.param); });

// The split measures smaller than the ordinary coding of the same file, on
// the types the issue names (Q8_0, Q4_0, Q4_1 and the K-quants).
TEST(Split, SmallerThanTheOrdinaryCoding) {
  for (uint32_t type : {8u, 2u, 3u, 10u, 12u, 14u}) {
    const auto* spec = wctest::quant_spec(type);
    const int64_t ne0 = spec->block == 32 ? 576 : 1536;
    const auto file = wctest::make_quant_gguf({{"blk.0.ffn_up.weight", type, ne0, 256}}, weights());
    const auto with = encode(file, 256 * 1024), without = encode(file, 256 * 1024, false);
    EXPECT_LT(with.size(), without.size()) << type_name(type);
    read_back(with, file);
    read_back(without, file);
    // Without splits the file stays 2.4 (readers of 2.4 read it).
    auto rd = Reader::open_memory(without.data(), without.size(), "x");
    ASSERT_TRUE(rd.ok());
    EXPECT_NE((*rd)->metadata_json().find("\"version\":\"2.4\""), std::string::npos);
  }
}

// A damaged split chunk is an error, never wrong bytes: every byte of the
// first chunk's payload flipped in turn (method bytes, lengths, stream data).
TEST(Split, DamagedChunksAreDetected) {
  const auto file = wctest::make_quant_gguf({{"blk.0.ffn_up.weight", kGgmlTypeQ4_K, 1536, 256}}, weights());
  auto enc = encode(file, 64 * 1024);
  auto rd0 = Reader::open_memory(enc.data(), enc.size(), "x");
  ASSERT_TRUE(rd0.ok());
  ASSERT_EQ((*rd0)->tensor_summary(0).kind, "split Q4_K");
  const ChunkEntry e = (*rd0)->chunk(0);
  ASSERT_EQ(e.method, 2);
  // The reader decodes the container in place: each flip is undone after
  // its decode.
  int tried = 0;
  const int refused = wctest::refused_bit_flips(enc, file, **rd0, 0, &tried);
  // A flipped bit of the first stream's method byte, its length or its
  // coded bytes changes what decodes: nearly every flip is refused.
  EXPECT_GT(refused, tried * 9 / 10) << refused << " of " << tried;
}

// Chunks of one split tensor decoded together (decode_split_group: each
// stream's parts as one group where the vector decoder interleaves them)
// give the bytes of the chunks decoded one by one, for every split type;
// a group with a damaged member is refused (the reader then decodes each
// and names that one), and the reader's group decode serves the others.
TEST(Split, GroupsOfChunksEqualTheChunksOneByOne) {
  int groups = 0, damaged = 0;
  for (uint32_t type : {2u, 3u, 6u, 8u, 10u, 11u, 12u, 14u}) {
    const auto* spec = wctest::quant_spec(type);
    const int64_t ne0 = spec->block == 32 ? 576 : 1536;
    const auto file = wctest::make_quant_gguf({{"blk.0.ffn_up.weight", type, ne0, 203}}, weights());
    auto enc = encode(file, 16 * 1024);
    auto rd = read_back(enc, file);
    ASSERT_TRUE(rd);
    const auto& t = ReaderAccess::tensor(*rd, 0);
    ASSERT_TRUE(t.split) << type_name(type);
    for (int n = 2; n <= kMaxChunkGroup; ++n) {
      for (size_t i = 0; i + n <= rd->num_chunks(); i += n) {
        size_t idx[kMaxChunkGroup];
        bool pairs = true;
        for (int k = 0; k < n; ++k) {
          idx[k] = i + k;
          pairs = pairs && (k == 0 || rd->pairable(i, i + k));
        }
        if (!pairs) continue;
        uint64_t index[kMaxChunkGroup], dsize[kMaxChunkGroup], xxh3[kMaxChunkGroup];
        size_t plen[kMaxChunkGroup];
        const uint8_t* pay[kMaxChunkGroup];
        std::vector<uint8_t> outs[kMaxChunkGroup];
        uint8_t* op[kMaxChunkGroup];
        for (int k = 0; k < n; ++k) {
          const ChunkEntry e = rd->chunk(idx[k]);
          index[k] = ReaderAccess::chunk_local(*rd, idx[k]);
          dsize[k] = e.decoded_size;
          xxh3[k] = e.xxh3;
          plen[k] = e.stored_size;
          pay[k] = enc.data() + e.file_offset;
          outs[k].assign(e.decoded_size, 0xEE);
          op[k] = outs[k].data();
        }
        DecodeScratch scratch;
        ASSERT_TRUE(decode_split_group(t.geom, *t.split, index, pay, plen, dsize, xxh3, op, n, scratch))
            << type_name(type) << " chunks " << i << ".." << i + n - 1;
        for (int k = 0; k < n; ++k)
          ASSERT_EQ(0, std::memcmp(op[k], file.data() + rd->chunk(idx[k]).decoded_offset, dsize[k]))
              << type_name(type) << " chunk " << idx[k];
        ++groups;
        // The last member damaged in the middle of its payload.
        const ChunkEntry last = rd->chunk(idx[n - 1]);
        uint8_t& b = enc[last.file_offset + last.stored_size / 2];
        b ^= 0x5a;
        EXPECT_FALSE(decode_split_group(t.geom, *t.split, index, pay, plen, dsize, xxh3, op, n, scratch))
            << type_name(type) << " chunks " << i << ".." << i + n - 1 << " (damaged)";
        Status sts[kMaxChunkGroup];
        for (int k = 0; k < n; ++k) std::fill(outs[k].begin(), outs[k].end(), 0xEE);
        rd->decode_chunk_group(idx, op, n, sts);
        for (int k = 0; k + 1 < n; ++k) {
          EXPECT_TRUE(sts[k].ok()) << sts[k].ToString();
          EXPECT_EQ(0, std::memcmp(op[k], file.data() + rd->chunk(idx[k]).decoded_offset, dsize[k]));
        }
        EXPECT_FALSE(sts[n - 1].ok()) << type_name(type) << " chunk " << idx[n - 1];
        EXPECT_NE(sts[n - 1].ToString().find("chunk " + std::to_string(idx[n - 1])), std::string::npos)
            << sts[n - 1].ToString();
        b ^= 0x5a;
        ++damaged;
      }
    }
  }
  std::printf("split chunk groups: %d decoded together, %d damaged groups refused\n", groups, damaged);
  EXPECT_GT(groups, 30);  // 35 with this data
}

// GGUF block-quantized tensors are cut in bands of equal rows (1536 rows
// of 324 bytes in 256 KiB chunks: 768 + 768, not 809 + 727), split or not,
// so that their chunks pair and decode together; other tensors (here F32,
// as every safetensors tensor) keep bands of target / row bytes rows.
TEST(Split, BlockTensorsTakeBandsOfEqualRows) {
  const auto file = wctest::make_quant_gguf(
      {{"blk.0.ffn_gate.weight", kGgmlTypeQ4_0, 576, 1536}, {"blk.0.ffn_norm.weight", kGgmlTypeF32, 576, 129}},
      weights());
  for (bool split : {true, false}) {
    auto enc = encode(file, 256 * 1024, split);
    auto rd = read_back(enc, file);
    ASSERT_TRUE(rd);
    ASSERT_EQ(rd->num_chunks(), 4u) << split;
    EXPECT_EQ(rd->chunk(0).decoded_size, 768u * 324) << split;
    EXPECT_EQ(rd->chunk(1).decoded_size, 768u * 324) << split;
    EXPECT_EQ(rd->chunk(2).decoded_size, 113u * 2304) << split;
    EXPECT_EQ(rd->chunk(3).decoded_size, 16u * 2304) << split;
    if (split) {
      EXPECT_TRUE(rd->pairable(0, 1));
    }
  }
}

// ------------------------------------------------------------------ refused records
namespace {

// A valid record: Q8_0 (34-byte blocks) in two streams without models, for
// a tensor of 4 rows of 2 blocks in bands of 2 rows.
TensorGeometry parent() { return wctest::split_parent(4, 68, 2); }
SplitModel base_model() {
  SplitModel m;
  m.ggml_type = 8;
  m.block_bytes = 34;
  SplitStream a, b;
  a.ranges = {{0, 2}};
  a.elem_bits = 16;
  b.ranges = {{2, 32}};
  b.elem_bits = 8;
  m.streams = {a, b};
  return m;
}
Status parse(const std::vector<uint8_t>& rec, const TensorGeometry& g = parent()) {
  return wctest::parse_split_record(rec, g);
}
void expect_refused(const std::vector<uint8_t>& rec, const std::string& needle, const TensorGeometry& g = parent()) {
  wctest::expect_split_refused(rec, needle, g);
}

}  // namespace

TEST(SplitRefused, ValidBaseIsAccepted) {
  const auto rec = base_model().serialize();
  EXPECT_TRUE(parse(rec).ok()) << parse(rec).ToString();
  // Annotated bytes of the base record (§8.4).
  const std::vector<uint8_t> want = {0x08, 0x00,              // ggml_type 8 (Q8_0), informative
                                     0x22, 0x00,              // block_bytes 34
                                     0x02,                    // 2 streams
                                     0x01, 0x00, 0x00, 0x02, 0x00,  // stream 0: 1 range [0, 2)
                                     0x10, 0x00,              // elem_bits 16, no model
                                     0x01, 0x02, 0x00, 0x20, 0x00,  // stream 1: 1 range [2, 34)
                                     0x08, 0x00};             // elem_bits 8, no model
  EXPECT_EQ(rec, want);
}
TEST(SplitRefused, BlockBytes) {
  auto m = base_model();
  auto rec = m.serialize();
  rec[2] = 1;
  rec[3] = 0;
  expect_refused(rec, "block_bytes 1");
  rec[2] = 0x01;
  rec[3] = 0x20;  // 8193
  expect_refused(rec, "block_bytes 8193");
}
TEST(SplitRefused, StreamCount) {
  auto rec = base_model().serialize();
  rec[4] = 1;
  expect_refused(rec, "stream count 1");
  rec[4] = 17;
  expect_refused(rec, "stream count 17");
}
TEST(SplitRefused, RangeCount) {
  auto rec = base_model().serialize();
  rec[5] = 0;
  expect_refused(rec, "stream 0 range count 0");
}
TEST(SplitRefused, RangeEmptyOrOutsideTheBlock) {
  auto m = base_model();
  m.streams[1].ranges = {{2, 0}};
  expect_refused(m.serialize(), "stream 1 range [2, 2) is empty");
  m.streams[1].ranges = {{2, 33}};
  expect_refused(m.serialize(), "stream 1 range [2, 35) is empty or outside the block of 34 bytes");
}
TEST(SplitRefused, RangesOverlap) {
  auto m = base_model();
  m.streams[1].ranges = {{1, 33}};
  expect_refused(m.serialize(), "stream 1 range covers block byte 1");
}
TEST(SplitRefused, ByteCoveredByNoStream) {
  auto m = base_model();
  m.streams[1].ranges = {{2, 31}};
  expect_refused(m.serialize(), "block byte 33");
}
TEST(SplitRefused, ElemBits) {
  auto m = base_model();
  m.streams[1].elem_bits = 3;
  expect_refused(m.serialize(), "stream 1 elem_bits 3");
  m.streams[0].elem_bits = 32;  // 16 bits per block
  m.streams[1].elem_bits = 8;
  expect_refused(m.serialize(), "stream 0 elem_bits 32");
}
TEST(SplitRefused, StreamModelFlag) {
  auto rec = base_model().serialize();
  rec[11] = 4;  // 2 is a palette stream (format 2.6, test_gguf_palette.cpp), 3 a recoded one (2.7, test_gguf_recode.cpp)
  expect_refused(rec, "stream 0 model flag 4");
}
TEST(SplitRefused, StreamModelOfTheWrongElementSize) {
  // The real float model of a Q8_0 tensor's fp16 scales (stream 0) put on
  // its stream of 8-bit codes.
  const auto file = wctest::make_quant_gguf({{"blk.0.ffn_up.weight", kGgmlTypeQ8_0, 576, 256}}, weights());
  const auto enc = encode(file, 256 * 1024);
  auto rd = Reader::open_memory(enc.data(), enc.size(), "x");
  ASSERT_TRUE(rd.ok());
  const auto& t = ReaderAccess::tensor(**rd, 0);
  ASSERT_TRUE(t.split);
  SplitModel m = *t.split;
  ASSERT_TRUE(m.streams[0].has_model) << m.describe();
  EXPECT_TRUE(parse(m.serialize(), t.geom).ok());
  m.streams[1].has_model = true;
  m.streams[1].model = m.streams[0].model;
  expect_refused(m.serialize(), "split model stream 1", t.geom);
}
TEST(SplitRefused, Truncated) {
  const auto rec = base_model().serialize();
  for (size_t n = 0; n < rec.size(); ++n) {
    const std::vector<uint8_t> cut(rec.begin(), rec.begin() + static_cast<long>(n));
    EXPECT_EQ(parse(cut).code(), Code::kCorruption) << n;
  }
}
TEST(SplitRefused, TrailingBytes) {
  auto rec = base_model().serialize();
  rec.push_back(0);
  expect_refused(rec, "record trailing bytes 1");
}
TEST(SplitRefused, ParentNotBytes) {
  auto g = parent();
  g.elem_bits = 16;
  g.cols = 34;
  g.chunk_cols = 34;
  expect_refused(base_model().serialize(), "16-bit elements", g);
}
TEST(SplitRefused, ParentInRowSegments) {
  auto g = parent();
  g.chunk_rows = 1;
  g.chunk_cols = 34;
  expect_refused(base_model().serialize(), "row segments", g);
}
TEST(SplitRefused, RowNotWholeBlocks) {
  auto g = parent();
  g.cols = 70;
  g.chunk_cols = 70;
  expect_refused(base_model().serialize(), "does not divide the row of 70 bytes", g);
}

// Chunk payload framing (§6.1).
TEST(SplitRefused, Payloads) {
  const SplitModel m = base_model();
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
  const auto ok = payload({{0, {1, 2, 3, 4}}, {1, {5}}});
  EXPECT_TRUE(parse_split_payload(m, ok.data(), ok.size(), "c", &parts).ok());
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].len, 4u);
  auto expect = [&](const std::vector<uint8_t>& p, const std::string& needle) {
    const Status st = parse_split_payload(m, p.data(), p.size(), "c", &parts);
    EXPECT_EQ(st.code(), Code::kCorruption);
    EXPECT_NE(st.ToString().find(needle), std::string::npos) << st.ToString();
  };
  expect(payload({{3, {1}}, {0, {1}}}), "stream 0 method 3");
  expect(payload({{0, {1}}, {2, {1}}}), "stream 1 is model-coded but the stream has no model");
  expect(payload({{0, {1}}}), "truncated in stream 1");
  auto trailing = ok;
  trailing.push_back(9);
  expect(trailing, "1 trailing bytes");
  auto cut = ok;
  cut.resize(cut.size() - 1);
  expect(cut, "truncated in stream 1");
}

// --- EncodeConfig::min_model_gain (wcodec encode --fast-decode) -------------

namespace {

// Models in tensor ti: its own (non-split) model, or every split stream's
// and derived stream's model.
int models_in(const Reader& rd, size_t ti) {
  const auto& t = ReaderAccess::tensor(rd, ti);
  if (!t.split) return t.has_model ? 1 : 0;
  int n = 0;
  for (const SplitStream& s : t.split->streams) {
    n += s.has_model ? 1 : 0;
    for (const SplitStream& d : s.derived) n += d.has_model ? 1 : 0;
  }
  return n;
}

int models_in(const Reader& rd) {
  int n = 0;
  for (size_t ti = 0; ti < rd.num_tensors(); ++ti) n += models_in(rd, ti);
  return n;
}

std::vector<uint8_t> encode_with_gain(const std::vector<uint8_t>& file, double gain) {
  EncodeConfig cfg;
  cfg.chunk_bytes = 64 * 1024;
  cfg.min_model_gain = gain;
  return wctest::encode_gguf(file, cfg, "test.gguf");
}

}  // namespace

// Real weights quantized to the 4-bit and 8-bit types: a model whose saving
// against zstd / raw is under 1% gives way at min_model_gain 0.01 (the
// file grows a little, never by more than 1% of what those models coded),
// none survives 0.99, and every file reads back byte for byte.
TEST(MinModelGain, DropsTheModelsThatSaveLess) {
  const auto& w = wctest::isnet_weights();
  auto file = wctest::make_quant_gguf({{"blk.0.ffn_up.weight", kGgmlTypeQ4_0, 576, 768},
                                       {"blk.0.ffn_gate.weight", kGgmlTypeQ4_1, 576, 768},
                                       {"blk.0.ffn_down.weight", kGgmlTypeQ8_0, 576, 384},
                                       {"output_norm.weight", kGgmlTypeF32, 576, 1}},
                                      w);
  ASSERT_FALSE(file.empty());
  // As llama.cpp writes them (SmolLM2's Q4_1 from a BF16 checkpoint, its
  // Q4_0 and Q8_0 requantized from that).
  wctest::requantize_q4_1_from_bf16(file, w);
  wctest::requantize_q4_0(file, w);
  wctest::requantize_q8_0_from_q4_1(file);
  const auto all = encode_with_gain(file, 0), fast = encode_with_gain(file, 0.01), none = encode_with_gain(file, 0.99);
  auto a = read_back(all, file), f = read_back(fast, file), n = read_back(none, file);
  ASSERT_TRUE(a && f && n);
  const int ma = models_in(*a), mf = models_in(*f), mn = models_in(*n);
  EXPECT_GT(ma, mf) << "no model of these tensors saves under 1%: the option would test nothing";
  EXPECT_GT(mf, 0) << "the scales' and codes' models that save over 1% stay";
  EXPECT_EQ(mn, 0);
  EXPECT_LE(all.size(), fast.size());
  EXPECT_LE(fast.size(), none.size());
  EXPECT_LT(fast.size(), all.size() + file.size() / 100);
  // A model kept at 0.01 is kept at 0 too (the rule only removes).
  for (size_t ti = 0; ti < f->num_tensors(); ++ti) EXPECT_LE(models_in(*f, ti), models_in(*a, ti)) << ti;
}

// Out-of-range gains are refused, naming the field and the value.
TEST(MinModelGain, OutOfRangeIsRefused) {
  const auto file = wctest::make_quant_gguf({{"blk.0.ffn_up.weight", kGgmlTypeQ4_0, 576, 8}}, weights());
  for (double g : {-0.01, 1.0, 2.0, std::nan("")}) {
    EncodeConfig cfg;
    cfg.min_model_gain = g;
    auto r = encode_safetensors(file.data(), file.size(), cfg, "test.gguf");
    ASSERT_FALSE(r.ok()) << g;
    EXPECT_NE(r.status().message().find("min_model_gain"), std::string::npos) << r.status().ToString();
  }
}

// fp16 block scales are tried as byte planes too (a bytes model on the
// field) and keep the smaller coding. On SmolLM2's published Q4_1 file
// (scripts/smollm2.sh; CI fetches it), whose scales and minimums take few
// distinct values, most of them take byte planes; the file reads back byte
// for byte.
TEST(SplitScales, SmolLM2Q4_1ScalesTakeBytePlanes) {
  const char* hf = std::getenv("WCODEC_SMOLLM2_HF");
  if (!hf || !*hf) GTEST_SKIP() << "WCODEC_SMOLLM2_HF is not set (scripts/smollm2.sh makes SmolLM2)";
  const auto path = std::filesystem::path(hf).parent_path() / "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  const auto file = wctest::read_file(path);
  ASSERT_FALSE(file.empty());
  EncodeConfig cfg;
  cfg.threads = 2;
  auto enc = encode_safetensors(file.data(), file.size(), cfg, path.string());
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  auto rd = Reader::open_memory(enc->data(), enc->size(), "smollm2.gguf.wcodec");
  ASSERT_TRUE(rd.ok()) << rd.status().ToString();
  int q4_1 = 0, planes = 0;
  for (size_t t = 0; t < (*rd)->num_tensors(); ++t) {
    const std::string m = (*rd)->tensor_summary(t).model;
    if (m.find("split") == std::string::npos || m.find("[16B") == std::string::npos) continue;
    ++q4_1;
    planes += m.find("[2B planes") != std::string::npos;
  }
  EXPECT_GT(q4_1, 100);
  EXPECT_GT(planes, q4_1 / 2) << planes << " of " << q4_1 << " split tensors with a scale stream as byte planes";
  EXPECT_TRUE((*rd)->verify(true).ok());
  std::printf("SmolLM2 Q4_1: %zu -> %zu bytes (%.4f), %d of %d split tensors with byte-plane scales\n", file.size(),
              enc->size(), static_cast<double>(enc->size()) / static_cast<double>(file.size()), planes, q4_1);
}
