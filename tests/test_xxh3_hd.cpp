// tests/test_xxh3_hd.cpp — the host/device XXH3-64 (codec/common/xxh3_hd.h)
// against libxxhash's XXH3_64bits: every length through the short, mid-size
// and long (block) paths, several alignments, and chunk-sized inputs of real
// model bytes. The CUDA decoder verifies chunk checksums with this code.
// Also the CPU's chunk_hash and its AVX2 / AVX-512 builds
// (codec/common/chunk_hash_x86.h) against the same reference.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "chunk_hash_x86.h"
#include "lane_group.h"
#include "tensor_model.h"
#include "testutil.h"
#include "xxh3_hd.h"

namespace {

TEST(Xxh3Hd, EqualsLibxxhashForEveryLengthUpTo4KiB) {
  std::mt19937_64 rng(42);
  std::vector<uint8_t> buf(4096 + 64);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t offset : {0u, 1u, 3u, 7u}) {
    for (size_t n = 0; n <= 4096; ++n) {
      const uint8_t* p = buf.data() + offset;
      ASSERT_EQ(wcodec::xxh3_64(p, n, wcodec::kXxh3Secret), XXH3_64bits(p, n)) << "length " << n << " offset " << offset;
    }
  }
}

// The lane-group form the GPU warp runs (stripes of a block spread over the
// lanes, contributions summed by a butterfly) equals the serial hash.
TEST(Xxh3Hd, LaneGroupFormEqualsLibxxhash) {
  std::mt19937_64 rng(43);
  std::vector<uint8_t> buf(70000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  wcodec::HostGroup g;
  for (size_t n = 0; n <= 4200; ++n)
    ASSERT_EQ(wcodec::xxh3_64_g(g, buf.data() + 1, n, wcodec::kXxh3Secret), XXH3_64bits(buf.data() + 1, n))
        << "length " << n;
  for (size_t n : {8191u, 8192u, 8193u, 65535u, 65536u, 69999u})
    ASSERT_EQ(wcodec::xxh3_64_g(g, buf.data(), n, wcodec::kXxh3Secret), XXH3_64bits(buf.data(), n)) << n;
}

TEST(Xxh3Hd, EqualsLibxxhashOnChunkSizedRealBytes) {
  const auto bytes = wctest::read_file(wctest::data_dir() / "stories260K.bf16.safetensors");
  ASSERT_GT(bytes.size(), 300000u);
  for (size_t n : {1023u, 1024u, 1025u, 65536u, 262143u, 262144u, 262145u, 300000u}) {
    EXPECT_EQ(wcodec::xxh3_64(bytes.data(), n, wcodec::kXxh3Secret), XXH3_64bits(bytes.data(), n)) << n;
  }
  std::vector<uint8_t> zeros(1 << 20, 0);
  EXPECT_EQ(wcodec::xxh3_64(zeros.data(), zeros.size(), wcodec::kXxh3Secret), XXH3_64bits(zeros.data(), zeros.size()));
}

// Every XXH3 build the CPU runs, and the dispatching chunk_hash, equal
// libxxhash: all lengths to 4 KiB (short, mid-size and the first blocks),
// odd offsets, and long inputs whose last stripe and block are partial.
TEST(ChunkHash, EveryBuildEqualsLibxxhash) {
  std::mt19937_64 rng(44);
  std::vector<uint8_t> buf((1 << 20) + 4096);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  using Fn = uint64_t (*)(const uint8_t*, size_t);
  std::vector<std::pair<const char*, Fn>> fns = {{"chunk_hash", wcodec::chunk_hash}};
#ifdef WCODEC_XXH3_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2"))
    fns.push_back({"avx2", wcodec::xxh3_64_avx2});
  else
    std::printf("[ SKIPPED ] the AVX2 build: this CPU has no AVX2\n");
  if (__builtin_cpu_supports("avx512f"))
    fns.push_back({"avx512", wcodec::xxh3_64_avx512});
  else
    std::printf("[ SKIPPED ] the AVX-512 build: this CPU has no AVX-512F\n");
#endif
  for (const auto& [name, fn] : fns) {
    for (size_t offset : {0u, 1u, 5u})
      for (size_t n = 0; n <= 4096; ++n)
        ASSERT_EQ(fn(buf.data() + offset, n), XXH3_64bits(buf.data() + offset, n)) << name << " length " << n;
    for (size_t n : {65535u, 65536u, 262143u, 262144u, 262209u, 1048576u + 4095u})
      ASSERT_EQ(fn(buf.data() + 1, n), XXH3_64bits(buf.data() + 1, n)) << name << " length " << n;
  }
}

}  // namespace
