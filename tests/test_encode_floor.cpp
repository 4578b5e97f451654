// tests/test_encode_floor.cpp — the encoder skips the model of a small int
// tensor where its fallback (zstd level 1, or raw bytes) is within 1% of the
// model's floor (the tokens' entropy given the left neighbour's sign plus a
// model chunk's fixed bytes), and of a one-chunk tensor that zstd takes far
// below its codes' order-0 entropy; it keeps the model where the model can
// win. Where zstd groups may take a small tensor, pick_chunk leaves the
// higher zstd level to finish_zstd; the shared-model trial reuses a
// member's own symbol counts where its model counts as the shared one.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <zstd.h>

#include "tensor_encode.h"
#include "testutil.h"
#include "wcodec/encode.h"
#include "wcodec/reader.h"
#include "wcodec/safetensors.h"

namespace {

using namespace wcodec;
namespace fs = std::filesystem;

// The description of an int tensor coded without a model (a model that
// lost to zstd would say "... (unused: fallback)").
constexpr const char* kFloorDesc = "-";

// stories260K's ternary MLP weights (64 x 43 or 172 x 16 bytes of packed
// codes) are near-uniform: zstd level 1 codes them below the floor, so
// they go to zstd without a model search; so does the embedding, which zstd
// level 1 takes at half its order-0 entropy (repeated rows). The file
// still decodes to the original bytes.
TEST(EncodeFloor, NearUniformSmallTernaryTensorsSkipTheModel) {
  const fs::path path = wctest::data_dir() / "stories260K.rtn-ternary.safetensors";
  if (!fs::exists(path)) GTEST_SKIP() << "no " << path;
  const auto f = wctest::read_file(path);
  auto hd = parse_safetensors_header(f.data(), f.size(), f.size(), path.string());
  ASSERT_TRUE(hd.ok()) << hd.status().message();
  int floored = 0;
  bool embedding = false;
  for (const auto& t : hd->tensors) {
    if (t.name.find("_packed") == std::string::npos) continue;
    auto r = encode_tensor(t, f.data() + hd->data_start + t.begin, AuxInput{}, EncodeOptions{});
    ASSERT_TRUE(r.ok()) << t.name << ": " << r.status().message();
    // (The q and o projections, 1 KiB each, are below the model's minimum
    // and stored as raw bytes: kind "raw".)
    if (r->choice.kind_name != "ternary" || r->choice.model_desc != kFloorDesc) continue;
    if (t.name == "model.embed_tokens.weight_packed") embedding = true;
    else ++floored;
    EXPECT_FALSE(r->has_model) << t.name;
    ASSERT_EQ(r->chunks.size(), 1u) << t.name;
    EXPECT_EQ(r->chunks[0].method, ChunkMethod::kZstd) << t.name;
    EXPECT_EQ(r->chunks[0].decoded_size, t.nbytes()) << t.name;
    EXPECT_LT(r->chunks[0].payload.size(), t.nbytes()) << t.name;
  }
  EXPECT_EQ(floored, 15);  // the gate, up and down weights of 5 layers
  EXPECT_TRUE(embedding);

  EncodeConfig cfg;
  cfg.threads = 1;
  auto enc = encode_safetensors(f.data(), f.size(), cfg, path.string());
  ASSERT_TRUE(enc.ok()) << enc.status().message();
  auto rd = Reader::open_memory(enc->data(), enc->size(), "floor_ternary");
  ASSERT_TRUE(rd.ok()) << rd.status().message();
  ASSERT_EQ((*rd)->original_size(), f.size());
  std::vector<uint8_t> back(f.size());
  ASSERT_TRUE((*rd)->read(0, back.size(), back.data()).ok());
  EXPECT_TRUE(back == f) << "decoded bytes differ from " << path;
}

// A small ternary tensor whose codes repeat their left neighbour 9 times in
// 10 (entropy about 0.57 bits a code): its model beats zstd, so the floor
// must not take it.
TEST(EncodeFloor, StructuredSmallTernaryTensorKeepsItsModel) {
  constexpr uint64_t kRows = 64, kCols = 128;  // codes; 32 bytes a row
  std::mt19937 rng(7);
  std::vector<uint8_t> bytes(kRows * kCols / 4, 0);
  uint32_t code = 0;
  for (uint64_t i = 0; i < kRows * kCols; ++i) {
    if (rng() % 10 == 0) code = (code + 1 + rng() % 2) % 3;  // 0, 1 (+1), 2 (-1)
    bytes[i / 4] |= static_cast<uint8_t>(code << (2 * (i % 4)));
  }
  TensorInfo t;
  t.name = "layer.weight_packed";
  t.dtype = DType::kU8;
  t.shape = {kRows, kCols / 4};
  t.begin = 0;
  t.end = bytes.size();
  ASSERT_LT(kRows * kCols, 16384u);  // a small tensor (one candidate model)
  auto r = encode_tensor(t, bytes.data(), AuxInput{}, EncodeOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NE(r->choice.model_desc, kFloorDesc);
  ASSERT_EQ(r->chunks.size(), 1u);
  EXPECT_EQ(r->chunks[0].method, ChunkMethod::kModel) << r->choice.model_desc;
}

// stories260K's int4 weights: the MLP weights (zero points or not) are
// within 1% of their floor or below it and go to zstd; the o projections'
// codes are near-uniform 4-bit values that zstd cannot shrink, and go to raw
// bytes, which are within 1% of the floor. Neither keeps a zero-point
// tensor without a model.
TEST(EncodeFloor, SmallInt4TensorsSkipTheModelForZstdOrRawBytes) {
  const fs::path path = wctest::data_dir() / "stories260K.rtn-int4.safetensors";
  if (!fs::exists(path)) GTEST_SKIP() << "no " << path;
  const auto f = wctest::read_file(path);
  auto hd = parse_safetensors_header(f.data(), f.size(), f.size(), path.string());
  ASSERT_TRUE(hd.ok()) << hd.status().message();
  EncodeOptions opt;
  int mlp = 0, raw = 0, zero_point_mlp = 0;
  for (size_t i = 0; i < hd->tensors.size(); ++i) {
    const auto& t = hd->tensors[i];
    const bool is_mlp = t.name.find("mlp.") != std::string::npos, is_o = t.name.find("o_proj") != std::string::npos;
    if (t.name.find("_packed") == std::string::npos || !(is_mlp || is_o)) continue;
    // The zero points (the tensor named like the codes, "_zero" for
    // "_packed"), in groups of 32 codes as the file has them.
    AuxInput aux;
    const std::string zname = t.name.substr(0, t.name.size() - 7) + "_zero";
    for (size_t k = 0; k < hd->tensors.size(); ++k) {
      const auto& z = hd->tensors[k];
      if (z.name != zname) continue;
      aux.index = static_cast<int32_t>(k);
      aux.bytes = f.data() + hd->data_start + z.begin;
      aux.rows = z.shape[0];
      aux.cols = z.shape[1];
      aux.group = 32;
    }
    ASSERT_GE(aux.index, 0) << zname;
    auto r = encode_tensor(t, f.data() + hd->data_start + t.begin, aux, opt);
    ASSERT_TRUE(r.ok()) << t.name << ": " << r.status().message();
    if (is_mlp) {
      EXPECT_EQ(r->choice.model_desc, kFloorDesc) << t.name;
      ASSERT_EQ(r->chunks.size(), 1u) << t.name;
      EXPECT_EQ(r->chunks[0].method, ChunkMethod::kZstd) << t.name;
      ++mlp;
    } else if (r->choice.model_desc == kFloorDesc) {
      ASSERT_EQ(r->chunks.size(), 1u) << t.name;
      if (r->chunks[0].method == ChunkMethod::kRaw) ++raw;
    }
    if (r->choice.model_desc == kFloorDesc) {
      EXPECT_FALSE(r->has_model) << t.name;
      EXPECT_EQ(r->aux_tensor, -1) << t.name;
      if (is_mlp && t.name.find("down_proj") != std::string::npos) ++zero_point_mlp;
    }
  }
  EXPECT_EQ(mlp, 15);
  EXPECT_EQ(zero_point_mlp, 5);  // the down projections code with zero points
  EXPECT_GE(raw, 4);             // 4 of the 5 o projections
}

// A chunk of 4-16 KiB that zstd level 1 already takes: with zstd_defer it
// keeps level 1 and is marked; finish_zstd then gives exactly the frame
// that pick_chunk makes without deferring, and the frame decodes.
TEST(EncodeFloor, DeferredZstdLevelIsFinishedLater) {
  constexpr uint64_t kRows = 64, kCols = 128;  // int8 codes, 8 KiB
  std::mt19937 rng(11);
  std::vector<uint8_t> bytes(kRows * kCols);
  // Rows repeat in fours (LZ finds them), each row random int8 codes.
  for (uint64_t r = 0; r < kRows; ++r)
    for (uint64_t c = 0; c < kCols; ++c)
      bytes[r * kCols + c] = r % 4 == 0 ? static_cast<uint8_t>(rng() % 32 - 16) : bytes[(r - r % 4) * kCols + c];
  TensorInfo t;
  t.name = "rows.weight";
  t.dtype = DType::kI8;
  t.shape = {kRows, kCols};
  t.begin = 0;
  t.end = bytes.size();
  EncodeOptions now, later;
  later.zstd_defer = true;
  auto a = encode_tensor(t, bytes.data(), AuxInput{}, now);
  auto b = encode_tensor(t, bytes.data(), AuxInput{}, later);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->chunks.size(), 1u);
  ASSERT_EQ(b->chunks.size(), 1u);
  ASSERT_EQ(a->chunks[0].method, ChunkMethod::kZstd);
  ASSERT_EQ(b->chunks[0].method, ChunkMethod::kZstd);
  EXPECT_FALSE(a->chunks[0].zstd_deferred);
  EXPECT_TRUE(b->chunks[0].zstd_deferred);
  // Level 1's frame, larger than the configured level's on these rows.
  EXPECT_GT(b->chunks[0].payload.size(), a->chunks[0].payload.size());
  finish_zstd(bytes.data(), later, &*b);
  EXPECT_FALSE(b->chunks[0].zstd_deferred);
  EXPECT_EQ(b->chunks[0].payload, a->chunks[0].payload);
  EXPECT_EQ(b->chunks[0].fallback_size, a->chunks[0].fallback_size);
  std::vector<uint8_t> back(bytes.size());
  const size_t n = ZSTD_decompress(back.data(), back.size(), b->chunks[0].payload.data(), b->chunks[0].payload.size());
  ASSERT_FALSE(ZSTD_isError(n));
  EXPECT_EQ(n, bytes.size());
  EXPECT_TRUE(back == bytes);
}

// The shared-model trial: a member whose model counts symbols as the shared
// shape does adds its kept counts, and the shared model is the one that
// counting its bytes again gives; a member with other parameters is counted
// again from its bytes.
TEST(EncodeFloor, SharedTrialReusesAMembersOwnCounts) {
  const fs::path path = wctest::data_dir() / "stories260K.bf16.safetensors";
  if (!fs::exists(path)) GTEST_SKIP() << "no " << path;
  const auto f = wctest::read_file(path);
  auto hd = parse_safetensors_header(f.data(), f.size(), f.size(), path.string());
  ASSERT_TRUE(hd.ok()) << hd.status().message();
  EncodeOptions keep;
  keep.keep_stats = true;
  std::vector<EncodedTensor> with, without;
  std::vector<const uint8_t*> bytes;
  for (const auto& t : hd->tensors) {
    // Layer 0's weights (order-0 exponents) and the embedding (exponent
    // contexts from the top neighbour, 8 sign/mantissa classes).
    if ((t.name.find("layers.0.") == std::string::npos && t.name != "model.embed_tokens.weight") ||
        t.shape.size() != 2)
      continue;
    const uint8_t* b = f.data() + hd->data_start + t.begin;
    auto a = encode_tensor(t, b, AuxInput{}, keep);
    auto c = encode_tensor(t, b, AuxInput{}, EncodeOptions{});
    ASSERT_TRUE(a.ok() && c.ok()) << t.name;
    // (The embedding's model loses to zstd: its counts are kept all the same.)
    EXPECT_NE(a->stats, nullptr) << t.name;
    EXPECT_EQ(c->stats, nullptr) << t.name;
    with.push_back(std::move(a).value());
    without.push_back(std::move(c).value());
    bytes.push_back(b);
  }
  ASSERT_GE(with.size(), 8u);  // q, k, v, o, gate, up, down, the embedding
  int same = 0;
  for (size_t s = 0; s < with.size(); ++s) {
    const TensorModel shape = shared_model_shape(with[s].model);
    SharedStats reused(shape), counted(shape);
    for (size_t i = 0; i < with.size(); ++i) {
      reused.add(with[i], bytes[i]);
      counted.add(without[i], bytes[i]);
      same += i != s && with[i].model.describe() == with[s].model.describe();
    }
    const TensorModel a = reused.build(), b = counted.build();
    EXPECT_EQ(a.serialize(), b.serialize()) << "shape of tensor " << s;
    EXPECT_EQ(reused.coded_bytes_lower_bound(a), counted.coded_bytes_lower_bound(b)) << "shape of tensor " << s;
    // Shapes whose exponent or sign/mantissa classes start one higher: the
    // same table sizes, other contexts, so the member's own counts do not
    // apply.
    for (int which = 0; which < 2; ++which) {
      TensorModel shifted = shape;
      int16_t& lo = which ? shifted.fp.mlo : shifted.fp.elo;
      lo = static_cast<int16_t>(lo + 1);
      SharedStats r2(shifted), c2(shifted);
      r2.add(with[s], bytes[s]);
      c2.add(without[s], bytes[s]);
      EXPECT_EQ(r2.build().serialize(), c2.build().serialize()) << (which ? "mlo" : "elo") << " + 1, tensor " << s;
    }
  }
  EXPECT_GT(same, 0);  // some members share parameters (their counts are reused)
}

}  // namespace
