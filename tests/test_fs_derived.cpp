// tests/test_fs_derived.cpp — bytes computed from stored files
// (wcodecfs/derived.h): open_content() of plain, .wcodec and .gguf.wcodec
// inputs read back with read_uncached() against the original files; a
// ComputedSource (BF16 -> F32 of a real tensor) read through a VirtualFile
// and the chunk cache; and every failure path: a damaged container chunk, a
// computed function's error, a backing file that shrank, ranges out of
// bounds, bad chunk lists.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "testutil.h"
#include "wcodec/encode.h"
#include "wcodec/safetensors.h"
#include "wcodecfs/batch_decoder.h"
#include "wcodecfs/chunk_cache.h"
#include "wcodecfs/derived.h"
#include "wcodecfs/fs_stats.h"

using namespace wcodecfs;
namespace sfs = std::filesystem;

namespace {

// Opens `dir`/`rel` as a StoredInput the way the Filesystem does.
StoredInput open_input(const sfs::path& dir, const std::string& rel) {
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  EXPECT_GE(dfd, 0);
  auto listed = StoreDir::list(dfd, "store");
  EXPECT_TRUE(listed.ok());
  auto in = listed.value().open(rel);
  ::close(dfd);
  EXPECT_TRUE(in.ok()) << in.status().message();
  return in.value();
}

std::shared_ptr<ChunkCache> make_cache() {
  auto stats = std::make_shared<Stats>();
  return ChunkCache::create(64 << 20, std::make_shared<CpuBatchDecoder>(1, stats), stats);
}

float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

class Derived : public ::testing::Test {
 protected:
  void SetUp() override {
    src_ = wctest::data_dir() / "stories260K.bf16.safetensors";
    if (!sfs::exists(src_)) GTEST_SKIP() << "missing " << src_;
    dir_ = sfs::temp_directory_path() / ("wcodecfs-derived-" + std::to_string(::getpid()));
    sfs::remove_all(dir_);
    sfs::create_directories(dir_);
    sfs::copy_file(src_, dir_ / "plain.safetensors");
    wcodec::EncodeConfig cfg;
    cfg.chunk_bytes = 64 * 1024;  // several chunks per tensor
    ASSERT_TRUE(wcodec::encode_safetensors_file(src_, (dir_ / "m.wcodec").string(), cfg).ok());
    original_ = wctest::read_file(src_);
  }
  void TearDown() override {
    if (!dir_.empty()) sfs::remove_all(dir_);
  }
  sfs::path src_, dir_;
  std::vector<uint8_t> original_;
};

TEST_F(Derived, OpenContentOfPlainAndContainerEqualsTheOriginal) {
  for (const char* rel : {"plain.safetensors", "m.wcodec"}) {
    SCOPED_TRACE(rel);
    auto vf = open_content(open_input(dir_, rel), 0);
    ASSERT_TRUE(vf.ok()) << vf.status().message();
    ASSERT_EQ(vf.value()->size(), original_.size());
    std::vector<uint8_t> got(original_.size());
    ASSERT_TRUE(read_uncached(*vf.value(), 0, got.size(), got.data()).ok());
    EXPECT_EQ(wctest::sha256_hex(got), wctest::sha256_hex(original_));
    // Ranges that start and end inside chunks, and across chunk and
    // extent boundaries.
    for (uint64_t off : {uint64_t{0}, uint64_t{7}, uint64_t{65535}, uint64_t{100001}, original_.size() - 3}) {
      const uint64_t n = std::min<uint64_t>(150000, original_.size() - off);
      std::vector<uint8_t> part(n);
      ASSERT_TRUE(read_uncached(*vf.value(), off, n, part.data()).ok());
      EXPECT_EQ(0, std::memcmp(part.data(), original_.data() + off, n)) << "offset " << off;
    }
    std::vector<uint8_t> one(1);
    EXPECT_EQ(read_uncached(*vf.value(), original_.size(), 1, one.data()).code(), Code::kInvalidArgument);
    EXPECT_EQ(read_uncached(*vf.value(), 1, UINT64_MAX, one.data()).code(), Code::kInvalidArgument);
  }
  // The container is presented through decoded extents (nothing decoded
  // by open_content itself).
  auto vf = open_content(open_input(dir_, "m.wcodec"), 0);
  ASSERT_TRUE(vf.ok());
  EXPECT_GT(vf.value()->decoded_chunks(), 4u);
}

TEST_F(Derived, DamagedContainerChunkIsAnErrorNotWrongBytes) {
  std::vector<uint8_t> enc = wctest::read_file(dir_ / "m.wcodec");
  // Flip a byte in the middle of the chunk payloads.
  enc[enc.size() / 2] ^= 0x40;
  {
    std::ofstream f(dir_ / "bad.wcodec", std::ios::binary);
    f.write(reinterpret_cast<const char*>(enc.data()), static_cast<std::streamsize>(enc.size()));
  }
  auto vf = open_content(open_input(dir_, "bad.wcodec"), 0);
  if (!vf.ok()) {
    SUCCEED() << "refused at open: " << vf.status().message();
    return;
  }
  std::vector<uint8_t> got(original_.size());
  const Status st = read_uncached(*vf.value(), 0, got.size(), got.data());
  ASSERT_FALSE(st.ok()) << "a damaged chunk was served";
  EXPECT_NE(st.message().find("bad.wcodec"), std::string::npos) << st.message();
}

TEST_F(Derived, ShrunkPlainInputIsStale) {
  auto in = open_input(dir_, "plain.safetensors");
  auto vf = open_content(in, 0);
  ASSERT_TRUE(vf.ok());
  ASSERT_EQ(::truncate((dir_ / "plain.safetensors").c_str(), 1000), 0);
  std::vector<uint8_t> got(5000);
  EXPECT_EQ(read_uncached(*vf.value(), 0, got.size(), got.data()).code(), Code::kStale);
}

// A view of one BF16 tensor as F32, computed in chunks of an odd size
// from the stored container, read through the cache.
TEST_F(Derived, ComputedSourceConvertsARealTensorThroughTheCache) {
  auto header = wcodec::parse_safetensors_header(original_.data(), original_.size(), original_.size(), "orig");
  ASSERT_TRUE(header.ok());
  const wcodec::TensorInfo* t = nullptr;
  for (const auto& ti : header.value().tensors)
    if (ti.name == "model.layers.1.mlp.down_proj.weight") t = &ti;
  ASSERT_NE(t, nullptr);
  const uint64_t data_start = header.value().data_start;
  const uint64_t elems = t->nbytes() / 2;
  auto content = open_content(open_input(dir_, "m.wcodec"), 0);
  ASSERT_TRUE(content.ok());
  std::shared_ptr<const VirtualFile> vf_in = content.value();
  const uint64_t tensor_at = data_start + t->begin;
  constexpr uint32_t kChunk = 4096 * 3;  // 3072 floats per chunk
  auto src = ComputedSource::make_uniform(
      "store/view.bin", elems * 4, kChunk, [vf_in, tensor_at](size_t i, uint8_t* out) -> Status {
        const uint64_t first = uint64_t{i} * (kChunk / 4);
        const uint64_t count = std::min<uint64_t>(kChunk / 4, (vf_in->size() - tensor_at) / 2 - first);
        std::vector<uint8_t> raw(count * 2);
        WCFS_RETURN_IF_ERROR(read_uncached(*vf_in, tensor_at + first * 2, raw.size(), raw.data()));
        for (uint64_t k = 0; k < count; ++k) {
          uint16_t h;
          std::memcpy(&h, raw.data() + 2 * k, 2);
          const float f = bf16_to_f32(h);
          std::memcpy(out + 4 * k, &f, 4);
        }
        return Status::OK();
      });
  ASSERT_TRUE(src.ok()) << src.status().message();
  EXPECT_EQ(src.value()->num_chunks(), (elems * 4 + kChunk - 1) / kChunk);
  auto vf = VirtualFile::make("store/view.bin", {Extent{0, elems * 4, DecodedExtent{src.value(), 0}}});
  ASSERT_TRUE(vf.ok()) << vf.status().message();
  auto cache = make_cache();
  auto rr = vf.value()->read(0, elems * 4, *cache, nullptr);
  ASSERT_TRUE(rr.ok()) << rr.status().message();
  const std::vector<uint8_t> got = rr.value().gather();
  ASSERT_EQ(got.size(), elems * 4);
  for (uint64_t k = 0; k < elems; ++k) {
    uint16_t h;
    std::memcpy(&h, original_.data() + tensor_at + 2 * k, 2);
    const float want = bf16_to_f32(h);
    float have;
    std::memcpy(&have, got.data() + 4 * k, 4);
    ASSERT_EQ(std::memcmp(&want, &have, 4), 0) << "element " << k;
  }
}

TEST(ComputedSource, FunctionErrorsNameTheViewAndChunk) {
  auto src = ComputedSource::make("store/v.bin", {10, 20, 30},
                                  [](size_t i, uint8_t* out) -> Status {
                                    if (i == 1) return Status::Corruption("input x.wcodec: chunk 4 checksum");
                                    std::memset(out, static_cast<int>(i), i == 0 ? 10 : 30);
                                    return Status::OK();
                                  });
  ASSERT_TRUE(src.ok());
  EXPECT_EQ(src.value()->stream_end(), 60u);
  EXPECT_EQ(src.value()->chunk_at(0), 0u);
  EXPECT_EQ(src.value()->chunk_at(10), 1u);
  EXPECT_EQ(src.value()->chunk_at(59), 2u);
  EXPECT_EQ(src.value()->chunk_at(60), SIZE_MAX);
  std::vector<uint8_t> buf(30);
  const Status st = src.value()->decode(1, buf.data());
  EXPECT_EQ(st.code(), Code::kCorruption);
  EXPECT_NE(st.message().find("store/v.bin: computed chunk 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("x.wcodec"), std::string::npos) << st.message();
  // Through a VirtualFile and the cache the error surfaces as the read's.
  auto vf = VirtualFile::make("store/v.bin", {Extent{0, 60, DecodedExtent{src.value(), 0}}});
  ASSERT_TRUE(vf.ok());
  auto cache = make_cache();
  auto rr = vf.value()->read(5, 20, *cache, nullptr);
  EXPECT_FALSE(rr.ok());
  auto good = vf.value()->read(40, 20, *cache, nullptr);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good.value().gather(), std::vector<uint8_t>(20, 2));
}

TEST(ComputedSource, RejectsBadChunkLists) {
  auto f = [](size_t, uint8_t*) { return Status::OK(); };
  EXPECT_FALSE(ComputedSource::make("v", {}, f).ok());
  EXPECT_FALSE(ComputedSource::make("v", {0}, f).ok());
  EXPECT_FALSE(ComputedSource::make("v", {ComputedSource::kMaxChunk + 1}, f).ok());
  EXPECT_FALSE(ComputedSource::make("v", {1}, nullptr).ok());
  EXPECT_FALSE(ComputedSource::make("v", {16}, f, 0, UINT64_MAX - 8).ok());
  EXPECT_FALSE(ComputedSource::make_uniform("v", 0, 16, f).ok());
  EXPECT_FALSE(ComputedSource::make_uniform("v", 100, 0, f).ok());
  auto u = ComputedSource::make_uniform("v", 100, 16, f);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u.value()->num_chunks(), 7u);
  EXPECT_EQ(u.value()->chunk_size(6), 4u);
}

}  // namespace
