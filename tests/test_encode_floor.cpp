// tests/test_encode_floor.cpp — the encoder skips the model of a small int
// tensor where zstd level 1 is already at or below the model's floor (the
// tokens' entropy given the left neighbour's sign plus a model chunk's fixed
// bytes), and keeps it where the model can win.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

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
// they go to zstd without a model search, and the file still decodes to
// the original bytes.
TEST(EncodeFloor, NearUniformSmallTernaryTensorsSkipTheModel) {
  const fs::path path = wctest::data_dir() / "stories260K.rtn-ternary.safetensors";
  if (!fs::exists(path)) GTEST_SKIP() << "no " << path;
  const auto f = wctest::read_file(path);
  auto hd = parse_safetensors_header(f.data(), f.size(), f.size(), path.string());
  ASSERT_TRUE(hd.ok()) << hd.status().message();
  int floored = 0;
  for (const auto& t : hd->tensors) {
    if (t.name.find("_packed") == std::string::npos) continue;
    auto r = encode_tensor(t, f.data() + hd->data_start + t.begin, AuxInput{}, EncodeOptions{});
    ASSERT_TRUE(r.ok()) << t.name << ": " << r.status().message();
    // (The q and o projections, 1 KiB each, are below the model's minimum
    // and stored as raw bytes: kind "raw".)
    if (r->choice.kind_name != "ternary" || r->choice.model_desc != kFloorDesc) continue;
    ++floored;
    EXPECT_FALSE(r->has_model) << t.name;
    ASSERT_EQ(r->chunks.size(), 1u) << t.name;
    EXPECT_EQ(r->chunks[0].method, ChunkMethod::kZstd) << t.name;
    EXPECT_EQ(r->chunks[0].decoded_size, t.nbytes()) << t.name;
    EXPECT_LT(r->chunks[0].payload.size(), t.nbytes()) << t.name;
  }
  EXPECT_EQ(floored, 15);  // the gate, up and down weights of 5 layers (not the embedding)

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

}  // namespace
