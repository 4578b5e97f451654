// fs/src/buffer_pool.h — memory for the chunk cache's decoded chunks
// (private to fs/).
//
// A decoded chunk (64-256 KiB, a few up to 1-4 MiB) used to be a fresh
// new[] buffer, freed on eviction. It landed in pages the process had not
// touched (always on a cold read; after evictions too, as malloc hands many
// blocks of that size back to the kernel), and each 4 KiB page cost a
// fault, even when pre-faulted in one call: about 12% of the daemon's CPU
// on a cold sequential read of an 88 MB model, mostly page table lock and
// memcg charge per page, little of it zeroing (perf).
// The pool keeps that memory instead:
//  - Regions are anonymous mappings aligned to 2 MiB. With huge_pages (the
//    mount's -o hugepages; off by default) they are advised MADV_HUGEPAGE,
//    so where transparent huge pages are enabled (even only in "madvise"
//    mode) the first touch maps 2 MiB at once, not 4 KiB:
//    88 MB pre-faulted in 10 ms instead of 27-31 ms, and that cold read
//    costs the daemon 175 ms of CPU instead of 198 (the share of
//    pre-faulting drops from 12% to 6%, nearly all of it zeroing). But in
//    a VM whose balloon takes free 2 MiB blocks back from the guest (free
//    page reporting), a huge page the host has reclaimed costs the host's
//    faults on first touch: 88 MB then took 90-300 ms, and the cold read up
//    to 370 ms of CPU, and over ten interleaved cold reads of that model
//    the median went from 640 to 609 MB/s. Hence off unless asked for.
//  - Freed ranges go back to the pool (4 KiB granularity, coalesced with
//    free neighbours) and are handed out again by best fit, so memory of
//    evicted chunks is reused with its pages still mapped: no fault at all.
//  - Only ranges never handed out before are pre-faulted (one
//    MADV_POPULATE_WRITE call); reused ones already are.
//  - A region that becomes entirely free is unmapped, except one kept as a
//    spare, so a streaming reader that evicts and allocates in turn does not
//    map and unmap a region every few chunks.
//
// Thread-safety: allocate() and the buffers' destructors may run on any
// thread. mu_ guards the regions and free ranges; it is a leaf lock (no
// other lock is taken under it; ChunkCache releases evicted entries after
// its own lock). Page population and munmap happen without it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

namespace wcodecfs {

class BufferPool;

// One buffer of a BufferPool: returns its range to the pool on destruction
// (the buffer holds the pool, so it may outlive whoever created it).
// Move-only; empty when default-constructed or when allocation failed.
class PoolBuffer {
 public:
  PoolBuffer() = default;
  ~PoolBuffer() { reset(); }
  PoolBuffer(PoolBuffer&& o) noexcept
      : pool_(std::move(o.pool_)), data_(std::exchange(o.data_, nullptr)), region_(o.region_), bytes_(o.bytes_) {}
  PoolBuffer& operator=(PoolBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      pool_ = std::move(o.pool_);
      data_ = std::exchange(o.data_, nullptr);
      region_ = o.region_;
      bytes_ = o.bytes_;
    }
    return *this;
  }
  PoolBuffer(const PoolBuffer&) = delete;
  PoolBuffer& operator=(const PoolBuffer&) = delete;

  uint8_t* get() const { return data_; }
  // Bytes reserved for the buffer: the request rounded up to 4 KiB.
  size_t capacity() const { return bytes_; }
  explicit operator bool() const { return data_ != nullptr; }
  // Returns the range to the pool; the buffer is empty afterwards.
  void reset();

 private:
  friend class BufferPool;
  PoolBuffer(std::shared_ptr<BufferPool> pool, uint8_t* data, void* region, size_t bytes)
      : pool_(std::move(pool)), data_(data), region_(region), bytes_(bytes) {}
  std::shared_ptr<BufferPool> pool_;
  uint8_t* data_ = nullptr;
  void* region_ = nullptr;  // the BufferPool::Region holding data_
  size_t bytes_ = 0;
};

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  static constexpr size_t kPage = size_t{4} << 10;
  static constexpr size_t kHugePage = size_t{2} << 20;
  static constexpr size_t kMaxRegion = size_t{32} << 20;

  // A pool whose regions suit a cache of `budget_bytes` (region_for_budget).
  // `huge_pages`: advise regions MADV_HUGEPAGE.
  static std::shared_ptr<BufferPool> create(uint64_t budget_bytes, bool huge_pages = false);
  // A pool with regions of `region_bytes` (rounded up to 2 MiB), for tests.
  static std::shared_ptr<BufferPool> with_region(size_t region_bytes, bool huge_pages = false);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // The region size for a cache budget: a quarter of the budget rounded up
  // to 2 MiB, at least 2 MiB (one huge page) and at most 32 MiB. A region
  // is mapped whole, and besides the regions in use the pool may hold one
  // partly used and one spare region, so a small cache (8 MiB) must not
  // map 32 MiB up front; a large one (the default is 1 GiB) amortizes
  // each mmap over a few hundred chunks.
  static size_t region_for_budget(uint64_t budget_bytes);

  // A buffer of at least `size` bytes, 4 KiB aligned, whose pages are
  // mapped (pre-faulted where never used before; see the .cpp), or an empty
  // one when memory cannot be mapped. Requests larger than a region get a
  // region of their own.
  PoolBuffer allocate(size_t size);

  size_t region_bytes() const { return region_bytes_; }
  // Bytes of all mapped regions (whether used or free).
  uint64_t mapped_bytes() const { return mapped_bytes_.load(std::memory_order_relaxed); }
  // Bytes handed out and not yet returned (4 KiB multiples).
  uint64_t used_bytes() const { return used_bytes_.load(std::memory_order_relaxed); }
  // Regions mapped so far (one mmap each) and bytes pre-faulted so far:
  // both stop growing once a workload runs within memory it touched before.
  uint64_t maps() const { return maps_.load(std::memory_order_relaxed); }
  uint64_t populated_bytes() const { return populated_bytes_.load(std::memory_order_relaxed); }

 private:
  friend class PoolBuffer;
  struct Region {
    uint8_t* base = nullptr;
    size_t size = 0;
    size_t used = 0;     // bytes handed out
    size_t touched = 0;  // [base, base + touched) has been handed out before
    std::list<Region>::iterator self;
  };
  struct FreeRange {
    size_t size;
    Region* region;
  };

  BufferPool(size_t region_bytes, bool huge_pages) : region_bytes_(region_bytes), huge_pages_(huge_pages) {}
  // Maps a region of `size` bytes (a 2 MiB multiple) and adds it, wholly
  // free. Returns null when mmap fails. REQUIRES: mu_ held.
  Region* map_region_locked(size_t size);
  void insert_free_locked(uint8_t* start, size_t size, Region* r);
  void erase_free_locked(std::map<uint8_t*, FreeRange>::iterator it);
  void release(uint8_t* data, Region* r, size_t bytes);

  const size_t region_bytes_;
  const bool huge_pages_;
  std::mutex mu_;
  std::list<Region> regions_;
  // Free ranges by address (to coalesce neighbours of one region) and by
  // (size, address) (best fit; among equal sizes the lowest address).
  std::map<uint8_t*, FreeRange> free_by_addr_;
  std::set<std::pair<size_t, uint8_t*>> free_by_size_;
  Region* spare_ = nullptr;  // the one wholly free region kept mapped
  std::atomic<uint64_t> mapped_bytes_{0};
  std::atomic<uint64_t> used_bytes_{0};
  std::atomic<uint64_t> maps_{0};
  std::atomic<uint64_t> populated_bytes_{0};
};

}  // namespace wcodecfs
