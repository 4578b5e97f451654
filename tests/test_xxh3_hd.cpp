// tests/test_xxh3_hd.cpp — the host/device XXH3-64 (codec/src/xxh3_hd.h)
// against libxxhash's XXH3_64bits: every length through the short, mid-size
// and long (block) paths, several alignments, and chunk-sized inputs of real
// model bytes. The CUDA decoder verifies chunk checksums with this code.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdint>
#include <random>
#include <vector>

#include "lane_group.h"
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

}  // namespace
