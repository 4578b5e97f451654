// wcodecfs/chunk_cache.h — decoded chunks shared by every reader of the mount.
//
// The cache maps (source id, chunk index) to the decoded bytes of that chunk.
//  - Byte budget with LRU eviction of entries nobody uses.
//  - Single-flight: concurrent misses on one chunk start one decode; the
//    other readers wait for it (and count as hits).
//  - Pinning: get() returns ChunkPins; a pinned entry is never evicted and
//    its bytes stay valid until the pin is released, so a FUSE reply can point
//    into the cache (iovec) without copying. Releasing the last pin of an
//    entry trims the cache back to its budget, so at rest
//    bytes() <= budget(); while readers hold pins the pinned bytes may exceed
//    it.
//  - Failed decodes are not cached: every reader waiting on it gets the
//    error, and the next read tries again (and fails again for corrupt data).
//
// Thread-safety: every member function may be called from any thread. One
// mutex (mu_) guards the map, the LRU list and each entry's state, pins and
// flags; it is a leaf lock (the decoder is called and done-callbacks run
// without it; the decoder never calls back into the cache while holding its
// own lock). An entry's bytes are written only by the decoder while the
// entry is pending and only read after it became ready (published under mu_).
//
// Memory: entries' buffers come from a BufferPool (fs/src/buffer_pool.h)
// that reuses the pages of evicted chunks instead of faulting in new ones.
// Each buffer holds the pool, so entries outliving the cache (pinned, or
// still with the decoder) keep their memory valid.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "wcodecfs/batch_decoder.h"
#include "wcodecfs/chunk_source.h"
#include "wcodecfs/fs_stats.h"
#include "wcodecfs/fs_status.h"

namespace wcodecfs {

class BufferPool;
class ChunkCache;
struct CacheEntry;

// A reference to one decoded chunk that keeps it in memory. Move-only.
class ChunkPin {
 public:
  ChunkPin() = default;
  ~ChunkPin() { reset(); }
  ChunkPin(ChunkPin&& o) noexcept = default;
  ChunkPin& operator=(ChunkPin&& o) noexcept {
    if (this != &o) {
      reset();
      cache_ = std::move(o.cache_);
      entry_ = std::move(o.entry_);
    }
    return *this;
  }
  ChunkPin(const ChunkPin&) = delete;
  ChunkPin& operator=(const ChunkPin&) = delete;

  // REQUIRES: the pin came from a successful ChunkCache::get().
  const uint8_t* data() const;
  uint32_t size() const;
  explicit operator bool() const { return entry_ != nullptr; }
  void reset();
  // Records that bytes [lo, hi) of the chunk go to a reader whose file the
  // kernel caches; the cache counts them when the pin is released (see
  // ChunkCache::create, drop_behind).
  void set_served(uint32_t lo, uint32_t hi) {
    served_lo_ = lo;
    served_hi_ = hi;
  }

 private:
  friend class ChunkCache;
  ChunkPin(std::shared_ptr<ChunkCache> c, std::shared_ptr<CacheEntry> e) : cache_(std::move(c)), entry_(std::move(e)) {}
  std::shared_ptr<ChunkCache> cache_;
  std::shared_ptr<CacheEntry> entry_;
  uint32_t served_lo_ = 0, served_hi_ = 0;
};

class ChunkCache : public std::enable_shared_from_this<ChunkCache> {
 public:
  // `budget_bytes` of decoded chunks kept when unpinned. `stats` receives
  // cache_hits, cache_misses, cache_evictions and readahead counters.
  // `huge_pages`: advise the chunk memory for transparent huge pages.
  // `drop_behind`: an entry whose every byte was served to readers of
  // kernel-cached files (ChunkPin::set_served) is dropped when its last pin
  // goes, instead of waiting in the LRU list: the kernel's page cache holds
  // those bytes now, and the entry's memory, still mapped, takes the next
  // chunk. A cold sequential read then cycles through a few MB of memory
  // instead of faulting in the whole file (the mount; stats
  // cache_drop_behind).
  static std::shared_ptr<ChunkCache> create(uint64_t budget_bytes, std::shared_ptr<BatchDecoder> decoder,
                                            std::shared_ptr<Stats> stats, bool huge_pages = false,
                                            bool drop_behind = false);
  ~ChunkCache();
  ChunkCache(const ChunkCache&) = delete;
  ChunkCache& operator=(const ChunkCache&) = delete;

  // Pins chunks `indices` of `source`, submitting every missing one to the
  // decoder as one batch, and waits for all of them. On failure returns the
  // error of the first failed chunk (its message names file, tensor and
  // chunk). REQUIRES: every index < source->num_chunks().
  Result<std::vector<ChunkPin>> get(const std::shared_ptr<const ChunkSource>& source,
                                    const std::vector<size_t>& indices);

  // Readahead: submits the chunks among `indices` that are neither cached
  // nor being decoded as background work and returns without waiting. The
  // entries are marked so a later demand hit counts as a readahead hit.
  // Returns how many chunks were submitted.
  size_t prefetch(const std::shared_ptr<const ChunkSource>& source, const std::vector<size_t>& indices);

  uint64_t budget() const { return budget_; }
  uint64_t bytes() const { return bytes_mirror_.load(std::memory_order_relaxed); }
  uint64_t entries() const { return entries_mirror_.load(std::memory_order_relaxed); }
  // Memory the buffer pool has mapped for chunks: bytes() rounded up to
  // pages, plus free ranges between them, a partly used region and at
  // most one spare region.
  uint64_t mapped_bytes() const;
  // Memory the chunks have touched: pages handed out at least once (mapped
  // in when first used; reused ones count once).
  uint64_t populated_bytes() const;
  const BatchDecoder& decoder() const { return *decoder_; }

 private:
  friend class ChunkPin;
  struct Key {
    uint64_t source;
    uint64_t index;
    bool operator==(const Key& o) const { return source == o.source && index == o.index; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<uint64_t>()(k.source * 0x9E3779B97F4A7C15ull ^ k.index); }
  };

  ChunkCache(uint64_t budget, std::shared_ptr<BatchDecoder> decoder, std::shared_ptr<Stats> stats, bool huge_pages,
             bool drop_behind);
  // Allocates the entries' buffers (outside mu_) and submits them.
  void submit(const std::shared_ptr<const ChunkSource>& source, std::vector<std::shared_ptr<CacheEntry>> fresh,
              bool background);
  void complete(const std::shared_ptr<CacheEntry>& e, const Status& st);
  // served_lo/hi: the pin's served range (empty when none).
  void unpin(CacheEntry* e, uint32_t served_lo, uint32_t served_hi);
  // Drops e (ready, unpinned, already off lru_) from map_ into `dropped`.
  // REQUIRES: mu_ held
  void evict_locked(CacheEntry* e, std::vector<std::shared_ptr<CacheEntry>>& dropped);
  // Evicts unpinned entries until within budget. The evicted entries move
  // to `dropped`, for the caller to release after mu_: freeing a buffer may
  // unmap a pool region. REQUIRES: mu_ held
  void trim_locked(std::vector<std::shared_ptr<CacheEntry>>& dropped);
  void publish_gauges_locked();

  const uint64_t budget_;
  const bool drop_behind_;
  const std::shared_ptr<BatchDecoder> decoder_;
  const std::shared_ptr<Stats> stats_;
  const std::shared_ptr<BufferPool> pool_;

  // mu_ protects map_, lru_, bytes_ and every CacheEntry's state, error,
  // pins, prefetched and lru fields. cv_ is signalled when an entry leaves
  // the pending state.
  std::mutex mu_;
  std::condition_variable cv_;
  // Requests handed to the decoder whose done() has not finished yet. The
  // decoder's callbacks refer to the cache without owning it (an owning
  // reference dropped last on a decoder thread would destroy the decoder
  // on its own worker), so the destructor waits for this to reach 0;
  // idle_cv_ is signalled when it does. Guarded by mu_.
  uint64_t inflight_ = 0;
  std::condition_variable idle_cv_;
  std::unordered_map<Key, std::shared_ptr<CacheEntry>, KeyHash> map_;
  std::list<CacheEntry*> lru_;  // ready entries, most recently used first
  uint64_t bytes_ = 0;          // sum of ready entries' sizes in map_
  std::atomic<uint64_t> bytes_mirror_{0};
  std::atomic<uint64_t> entries_mirror_{0};
};

}  // namespace wcodecfs
