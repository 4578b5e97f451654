// tests/test_fs_buffer_pool.cpp — the chunk cache's buffer pool
// (fs/src/buffer_pool.h) on its own.
//
// Checks that freed ranges are handed out again (same address, no new page
// population), that free neighbours coalesce, that buffers never overlap
// and keep their contents under random and multithreaded alloc/free, that
// wholly free regions are unmapped down to one spare, oversized and
// impossible requests, alignment, and buffers outliving the pool's owner.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "buffer_pool.h"

using wcodecfs::BufferPool;
using wcodecfs::PoolBuffer;

namespace {

constexpr size_t kKiB = 1024, kMiB = 1024 * 1024;
constexpr size_t kPage = BufferPool::kPage;

uintptr_t addr(const PoolBuffer& b) { return reinterpret_cast<uintptr_t>(b.get()); }

// Fills `n` bytes with a pattern of `seed` / checks it is still there.
void fill(uint8_t* p, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i += 8) p[i] = static_cast<uint8_t>(x >> 24), x = x * 1664525u + 1013904223u;
  p[n - 1] = static_cast<uint8_t>(seed);
}
bool intact(const uint8_t* p, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i += 8) {
    if (i != n - 1 && p[i] != static_cast<uint8_t>(x >> 24)) return false;
    x = x * 1664525u + 1013904223u;
  }
  return p[n - 1] == static_cast<uint8_t>(seed);
}

// Chunk-like sizes: mostly 64-256 KiB, some small tails, a few of 1-4 MiB.
size_t chunk_size(std::mt19937_64& rng) {
  const unsigned k = rng() % 100;
  if (k < 10) return 1 + rng() % (64 * kKiB);
  if (k < 97) return 64 * kKiB + rng() % (192 * kKiB);
  return 1 * kMiB + rng() % (3 * kMiB);
}

struct Live {
  PoolBuffer buf;
  size_t size;
  uint32_t seed;
};

// Live buffers by address, to check a new one overlaps none.
class Intervals {
 public:
  // False when [p, p + n) overlaps a live interval.
  bool add(uintptr_t p, size_t n) {
    auto it = by_start_.upper_bound(p);
    if (it != by_start_.end() && it->first < p + n) return false;
    if (it != by_start_.begin() && std::prev(it)->second > p) return false;
    by_start_.emplace(p, p + n);
    return true;
  }
  void remove(uintptr_t p) { by_start_.erase(p); }

 private:
  std::map<uintptr_t, uintptr_t> by_start_;
};

}  // namespace

TEST(fs_buffer_pool, RegionSizeFollowsTheBudget) {
  EXPECT_EQ(BufferPool::region_for_budget(0), 2 * kMiB);
  EXPECT_EQ(BufferPool::region_for_budget(4 * kMiB), 2 * kMiB);
  EXPECT_EQ(BufferPool::region_for_budget(8 * kMiB), 2 * kMiB);
  EXPECT_EQ(BufferPool::region_for_budget(10 * kMiB), 4 * kMiB);
  EXPECT_EQ(BufferPool::region_for_budget(64 * kMiB), 16 * kMiB);
  EXPECT_EQ(BufferPool::region_for_budget(1024 * kMiB), 32 * kMiB);
  EXPECT_EQ(BufferPool::region_for_budget(~uint64_t{0}), 32 * kMiB);
  // Nothing is mapped before the first buffer.
  auto pool = BufferPool::create(8 * kMiB, /*huge_pages=*/true);
  EXPECT_EQ(pool->region_bytes(), 2 * kMiB);
  EXPECT_EQ(pool->mapped_bytes(), 0u);
  auto b = pool->allocate(100 * kKiB);
  ASSERT_TRUE(b);
  EXPECT_EQ(pool->mapped_bytes(), 2 * kMiB) << "a small cache maps small regions";
  // Without the huge page advice the pool works the same.
  auto plain = BufferPool::create(8 * kMiB);
  PoolBuffer c = plain->allocate(100 * kKiB), d = plain->allocate(100 * kKiB);
  ASSERT_TRUE(c && d);
  EXPECT_EQ(addr(c) % BufferPool::kHugePage, 0u);
  EXPECT_EQ(addr(d), addr(c) + 100 * kKiB);
}

TEST(fs_buffer_pool, SizesRoundToPagesAndBuffersAreAligned) {
  auto pool = BufferPool::with_region(4 * kMiB);
  std::vector<PoolBuffer> bufs;
  for (size_t n : {size_t{1}, size_t{0}, kPage - 1, kPage, kPage + 1, size_t{12345}, 64 * kKiB, 256 * kKiB + 7}) {
    PoolBuffer b = pool->allocate(n);
    ASSERT_TRUE(b) << n;
    EXPECT_EQ(addr(b) % kPage, 0u) << n;
    EXPECT_EQ(b.capacity(), std::max<size_t>(1, (n + kPage - 1) / kPage) * kPage) << n;
    if (n) fill(b.get(), n, static_cast<uint32_t>(n));
    bufs.push_back(std::move(b));
  }
  EXPECT_EQ(addr(bufs[0]) % BufferPool::kHugePage, 0u) << "regions start at a huge page boundary";
  uint64_t used = 0;
  for (const auto& b : bufs) used += b.capacity();
  EXPECT_EQ(pool->used_bytes(), used);
  // Cut one after the other from the fresh region, without gaps or overlap.
  for (size_t i = 1; i < bufs.size(); ++i) EXPECT_EQ(addr(bufs[i]), addr(bufs[i - 1]) + bufs[i - 1].capacity());
  bufs.clear();
  EXPECT_EQ(pool->used_bytes(), 0u);
}

TEST(fs_buffer_pool, FreedRangeIsReusedWithoutPopulating) {
  auto pool = BufferPool::with_region(8 * kMiB);
  PoolBuffer left = pool->allocate(64 * kKiB);
  PoolBuffer mid = pool->allocate(100000);
  PoolBuffer right = pool->allocate(64 * kKiB);
  ASSERT_TRUE(left && mid && right);
  fill(mid.get(), 100000, 7);
  const uintptr_t hole = addr(mid);
  const uint64_t populated = pool->populated_bytes();
  EXPECT_EQ(populated, 64 * kKiB + mid.capacity() + 64 * kKiB) << "fresh ranges are pre-faulted";
  mid.reset();
  EXPECT_FALSE(mid);

  // Best fit: the hole, not the large never-used rest of the region.
  PoolBuffer again = pool->allocate(100000);
  ASSERT_TRUE(again);
  EXPECT_EQ(addr(again), hole);
  EXPECT_EQ(pool->populated_bytes(), populated) << "a recycled range is already mapped";
  again.reset();
  PoolBuffer smaller = pool->allocate(40 * kKiB);
  EXPECT_EQ(addr(smaller), hole) << "a smaller request also fits the hole best";
  PoolBuffer rest = pool->allocate(100000 - 40 * kKiB - 1);
  EXPECT_EQ(addr(rest), hole + 40 * kKiB) << "and the hole's remainder next";
  EXPECT_EQ(pool->populated_bytes(), populated);
  EXPECT_EQ(pool->maps(), 1u);
}

TEST(fs_buffer_pool, FreeNeighboursCoalesce) {
  auto pool = BufferPool::with_region(8 * kMiB);
  std::vector<PoolBuffer> b;
  for (int i = 0; i < 6; ++i) b.push_back(pool->allocate(64 * kKiB));
  std::vector<uintptr_t> at;
  for (const auto& x : b) at.push_back(addr(x));
  // Two neighbours freed one after the other: their combined size fits in place.
  b[1].reset();
  b[2].reset();
  PoolBuffer two = pool->allocate(128 * kKiB);
  EXPECT_EQ(addr(two), at[1]);
  // Freed with a free range on either side: all three join.
  two.reset();
  b[4].reset();
  b[3].reset();
  PoolBuffer four = pool->allocate(256 * kKiB);
  EXPECT_EQ(addr(four), at[1]);
  // The last buffer freed merges with the never-used rest of the region.
  four.reset();
  b[5].reset();
  PoolBuffer big = pool->allocate(7 * kMiB);
  EXPECT_EQ(addr(big), at[1]);
  EXPECT_EQ(pool->maps(), 1u);
  // Freed in the middle of two used buffers: no join, so a request larger
  // than the hole goes elsewhere.
  big.reset();
  PoolBuffer a = pool->allocate(64 * kKiB), c = pool->allocate(64 * kKiB), d = pool->allocate(64 * kKiB);
  const uintptr_t hole = addr(c);
  c.reset();
  PoolBuffer e = pool->allocate(128 * kKiB);
  EXPECT_NE(addr(e), hole);
}

TEST(fs_buffer_pool, RandomAllocFreeNeverOverlaps) {
  auto pool = BufferPool::with_region(16 * kMiB);
  std::mt19937_64 rng(42);
  std::vector<Live> live;
  Intervals iv;
  uint32_t seed = 0;
  uint64_t live_bytes = 0, peak_mapped = 0, peak_live = 0;
  for (int op = 0; op < 20000; ++op) {
    // Grow to ~40 MiB of live buffers, then hover around it.
    const bool alloc = live.empty() || (live_bytes < (40 * kMiB) ? rng() % 3 != 0 : rng() % 3 == 0);
    if (alloc) {
      const size_t n = chunk_size(rng);
      PoolBuffer b = pool->allocate(n);
      ASSERT_TRUE(b);
      ASSERT_EQ(addr(b) % kPage, 0u);
      ASSERT_GE(b.capacity(), n);
      ASSERT_TRUE(iv.add(addr(b), b.capacity())) << "buffer overlaps a live one at op " << op;
      fill(b.get(), n, ++seed);
      live_bytes += b.capacity();
      live.push_back(Live{std::move(b), n, seed});
    } else {
      const size_t i = rng() % live.size();
      ASSERT_TRUE(intact(live[i].buf.get(), live[i].size, live[i].seed)) << "contents changed at op " << op;
      iv.remove(addr(live[i].buf));
      live_bytes -= live[i].buf.capacity();
      std::swap(live[i], live.back());
      live.pop_back();
    }
    ASSERT_EQ(pool->used_bytes(), live_bytes);
    peak_mapped = std::max(peak_mapped, pool->mapped_bytes());
    peak_live = std::max(peak_live, live_bytes);
  }
  for (auto& l : live) ASSERT_TRUE(intact(l.buf.get(), l.size, l.seed));
  // Random frees (of any buffer, not the oldest as the cache does) fragment
  // the regions, and a 4 MiB buffer needs 4 MiB in one piece; still, freed
  // ranges are used again (80 MiB mapped at most for 48 MiB live, of 2.2 GB
  // allocated over the run).
  EXPECT_LE(peak_mapped, 2 * peak_live) << "peak live " << peak_live;
  live.clear();
  EXPECT_EQ(pool->used_bytes(), 0u);
  EXPECT_LE(pool->mapped_bytes(), 16 * kMiB) << "everything free: at most one spare region";
}

TEST(fs_buffer_pool, ConcurrentAllocFreeKeepsContents) {
  auto pool = BufferPool::with_region(8 * kMiB);
  // Buffers cross threads, as a chunk allocated by a reader is freed by
  // whichever thread drops the entry last.
  std::mutex mu;
  std::deque<Live> shared;
  std::atomic<int> bad{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      std::vector<Live> mine;
      uint32_t seed = static_cast<uint32_t>(t) << 24;
      for (int op = 0; op < 4000; ++op) {
        const unsigned k = rng() % 10;
        if (k < 5 || mine.empty()) {
          const size_t n = chunk_size(rng);
          PoolBuffer b = pool->allocate(n);
          if (!b) {
            ++failed;
            continue;
          }
          fill(b.get(), n, ++seed);
          mine.push_back(Live{std::move(b), n, seed});
          if (mine.size() > 24) {
            if (!intact(mine.front().buf.get(), mine.front().size, mine.front().seed)) ++bad;
            mine.erase(mine.begin());
          }
        } else if (k < 8) {
          const size_t i = rng() % mine.size();
          if (!intact(mine[i].buf.get(), mine[i].size, mine[i].seed)) ++bad;
          std::swap(mine[i], mine.back());
          mine.pop_back();
        } else if (k == 8) {
          std::lock_guard<std::mutex> lk(mu);
          shared.push_back(std::move(mine.back()));
          mine.pop_back();
        } else {
          Live l;
          {
            std::lock_guard<std::mutex> lk(mu);
            if (shared.empty()) continue;
            l = std::move(shared.front());
            shared.pop_front();
          }
          if (!intact(l.buf.get(), l.size, l.seed)) ++bad;
        }
      }
      for (auto& l : mine)
        if (!intact(l.buf.get(), l.size, l.seed)) ++bad;
    });
  }
  for (auto& th : threads) th.join();
  for (auto& l : shared) EXPECT_TRUE(intact(l.buf.get(), l.size, l.seed));
  shared.clear();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(pool->used_bytes(), 0u);
  EXPECT_LE(pool->mapped_bytes(), 8 * kMiB);
}

TEST(fs_buffer_pool, FreeRegionsAreUnmappedButOneSpare) {
  auto pool = BufferPool::with_region(2 * kMiB);
  std::vector<PoolBuffer> bufs;
  for (int i = 0; i < 40; ++i) bufs.push_back(pool->allocate(256 * kKiB));  // 5 regions of 8
  EXPECT_EQ(pool->mapped_bytes(), 10 * kMiB);
  EXPECT_EQ(pool->maps(), 5u);
  bufs.clear();
  EXPECT_EQ(pool->mapped_bytes(), 2 * kMiB) << "one wholly free region stays mapped";
  EXPECT_EQ(pool->used_bytes(), 0u);

  // A streaming reader: allocates, frees the oldest, and so on. It runs in
  // the spare and one more region without mapping another.
  const uint64_t maps = pool->maps();
  const uint64_t populated = pool->populated_bytes();
  std::deque<PoolBuffer> window;
  for (int i = 0; i < 500; ++i) {
    window.push_back(pool->allocate(200 * kKiB));
    ASSERT_TRUE(window.back());
    if (window.size() > 12) window.pop_front();
  }
  EXPECT_LE(pool->maps(), maps + 1);
  EXPECT_LE(pool->populated_bytes(), populated + 2 * kMiB) << "the window runs in memory touched before";
  window.clear();
  EXPECT_EQ(pool->mapped_bytes(), 2 * kMiB);
}

TEST(fs_buffer_pool, OversizedRequestGetsItsOwnRegion) {
  auto pool = BufferPool::with_region(2 * kMiB);
  PoolBuffer small = pool->allocate(64 * kKiB);
  const size_t n = 5 * kMiB + 123;
  PoolBuffer big = pool->allocate(n);
  ASSERT_TRUE(big);
  EXPECT_EQ(addr(big) % BufferPool::kHugePage, 0u);
  EXPECT_EQ(pool->mapped_bytes(), 2 * kMiB + 6 * kMiB);
  fill(big.get(), n, 99);
  EXPECT_TRUE(intact(big.get(), n, 99));
  // Its remainder serves other requests.
  PoolBuffer tail = pool->allocate(512 * kKiB);
  EXPECT_EQ(addr(tail), addr(big) + big.capacity());
  tail.reset();
  big.reset();
  small.reset();
  EXPECT_LE(pool->mapped_bytes(), 6 * kMiB) << "one spare region left";
  EXPECT_EQ(pool->used_bytes(), 0u);
}

TEST(fs_buffer_pool, ImpossibleRequestsFail) {
  auto pool = BufferPool::with_region(2 * kMiB);
  EXPECT_FALSE(pool->allocate(~size_t{0}));
  EXPECT_FALSE(pool->allocate(size_t{1} << 47)) << "more than the user address space";
  EXPECT_EQ(pool->mapped_bytes(), 0u);
  EXPECT_EQ(pool->used_bytes(), 0u);
  PoolBuffer b = pool->allocate(kPage);
  EXPECT_TRUE(b) << "the pool works after a failure";
}

TEST(fs_buffer_pool, BuffersOutliveTheirCreator) {
  auto pool = BufferPool::with_region(2 * kMiB);
  PoolBuffer b = pool->allocate(300 * kKiB);
  PoolBuffer moved;
  ASSERT_TRUE(b);
  const std::weak_ptr<BufferPool> weak = pool;
  pool.reset();
  EXPECT_FALSE(weak.expired()) << "the buffer holds the pool";
  fill(b.get(), 300 * kKiB, 5);
  moved = std::move(b);
  EXPECT_FALSE(b);
  EXPECT_TRUE(intact(moved.get(), 300 * kKiB, 5));
  moved.reset();
  EXPECT_TRUE(weak.expired());
}
