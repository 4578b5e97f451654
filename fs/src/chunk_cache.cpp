// fs/src/chunk_cache.cpp — see wcodecfs/chunk_cache.h.
#include "wcodecfs/chunk_cache.h"

#include <algorithm>
#include <cstdint>

#include "buffer_pool.h"
#include "wcodecfs/fs_log.h"

namespace wcodecfs {

// One cached chunk. Fields other than key/size/data are guarded by
// ChunkCache::mu_.
struct CacheEntry {
  enum class State { kPending, kReady, kFailed };
  CacheEntry(uint64_t src, uint64_t idx, uint32_t sz) : source(src), index(idx), size(sz) {}

  const uint64_t source;
  const uint64_t index;
  const uint32_t size;
  // Allocated (DecodeRequest::buffer) and written by the decoder while
  // pending; immutable once ready. Returned to the pool when the entry dies
  // (or when its decode failed).
  PoolBuffer data;

  State state = State::kPending;
  Status error;             // when failed
  uint32_t pins = 0;        // live ChunkPins
  bool prefetched = false;  // submitted by readahead and not yet used by a demand read
  bool in_map = true;       // false once evicted or failed
  bool in_lru = false;
  std::list<CacheEntry*>::iterator lru_it;
  // The bytes of the chunk handed to readers of kernel-cached files, as one
  // interval [served_lo, served_hi) (ChunkPin::set_served): a range that
  // neither touches nor overlaps it is not counted, so the interval never
  // claims bytes that were not served.
  uint32_t served_lo = 0, served_hi = 0;
};

const uint8_t* ChunkPin::data() const { return entry_->data.get(); }
uint32_t ChunkPin::size() const { return entry_->size; }

void ChunkPin::reset() {
  if (entry_) {
    cache_->unpin(entry_.get(), served_lo_, served_hi_);
    served_lo_ = served_hi_ = 0;
    entry_.reset();
    cache_.reset();
  }
}

std::shared_ptr<ChunkCache> ChunkCache::create(uint64_t budget_bytes, std::shared_ptr<BatchDecoder> decoder,
                                               std::shared_ptr<Stats> stats, bool huge_pages, bool drop_behind) {
  return std::shared_ptr<ChunkCache>(
      new ChunkCache(budget_bytes, std::move(decoder), std::move(stats), huge_pages, drop_behind));
}

ChunkCache::ChunkCache(uint64_t budget, std::shared_ptr<BatchDecoder> decoder, std::shared_ptr<Stats> stats,
                       bool huge_pages, bool drop_behind)
    : budget_(budget),
      drop_behind_(drop_behind),
      decoder_(std::move(decoder)),
      stats_(stats ? std::move(stats) : std::make_shared<Stats>()),
      pool_(BufferPool::create(budget, huge_pages)) {}

ChunkCache::~ChunkCache() {
  // Every submitted request calls done() exactly once (decoded, failed, or
  // refused at shutdown); their callbacks use this object until then.
  std::unique_lock<std::mutex> lk(mu_);
  idle_cv_.wait(lk, [this] { return inflight_ == 0; });
}

uint64_t ChunkCache::mapped_bytes() const { return pool_->mapped_bytes(); }
uint64_t ChunkCache::populated_bytes() const { return pool_->populated_bytes(); }

void ChunkCache::publish_gauges_locked() {
  bytes_mirror_.store(bytes_, std::memory_order_relaxed);
  entries_mirror_.store(map_.size(), std::memory_order_relaxed);
}

Result<std::vector<ChunkPin>> ChunkCache::get(const std::shared_ptr<const ChunkSource>& source,
                                              const std::vector<size_t>& indices) {
  std::vector<ChunkPin> pins;
  pins.reserve(indices.size());
  std::vector<std::shared_ptr<CacheEntry>> fresh;
  std::vector<size_t> promote;  // pending readahead entries a reader now waits for
  bool any_pending = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (size_t i : indices) {
      WC_CHECK(i < source->num_chunks());
      const Key key{source->id(), i};
      auto it = map_.find(key);
      std::shared_ptr<CacheEntry> e;
      if (it != map_.end()) {
        e = it->second;
        Stats::add(stats_->cache_hits);
        if (e->prefetched) {
          e->prefetched = false;
          Stats::add(stats_->readahead_hits);
          if (e->state == CacheEntry::State::kPending) promote.push_back(i);
        }
        if (e->in_lru) lru_.splice(lru_.begin(), lru_, e->lru_it);
      } else {
        e = std::make_shared<CacheEntry>(key.source, key.index, source->chunk_size(i));
        map_.emplace(key, e);
        fresh.push_back(e);
        Stats::add(stats_->cache_misses);
      }
      if (e->state == CacheEntry::State::kPending) any_pending = true;
      ++e->pins;
      pins.push_back(ChunkPin(shared_from_this(), std::move(e)));
    }
    publish_gauges_locked();
  }
  for (size_t i : promote) decoder_->promote(source->id(), i);
  if (!fresh.empty()) submit(source, std::move(fresh), /*background=*/false);
  if (any_pending) {
    std::unique_lock<std::mutex> lk(mu_);
    for (const ChunkPin& p : pins) {
      cv_.wait(lk, [&] { return p.entry_->state != CacheEntry::State::kPending; });
    }
  }
  // States are final now (ready or failed) and published under mu_ above.
  for (const ChunkPin& p : pins) {
    if (p.entry_->state == CacheEntry::State::kFailed) {
      std::lock_guard<std::mutex> lk(mu_);
      return p.entry_->error;
    }
  }
  return pins;
}

size_t ChunkCache::prefetch(const std::shared_ptr<const ChunkSource>& source, const std::vector<size_t>& indices) {
  std::vector<std::shared_ptr<CacheEntry>> fresh;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (size_t i : indices) {
      WC_CHECK(i < source->num_chunks());
      const Key key{source->id(), i};
      if (map_.count(key)) continue;
      auto e = std::make_shared<CacheEntry>(key.source, key.index, source->chunk_size(i));
      e->prefetched = true;
      map_.emplace(key, e);
      fresh.push_back(std::move(e));
    }
    publish_gauges_locked();
  }
  const size_t n = fresh.size();
  if (n) {
    Stats::add(stats_->readahead_chunks, n);
    submit(source, std::move(fresh), /*background=*/true);
  }
  return n;
}

void ChunkCache::submit(const std::shared_ptr<const ChunkSource>& source,
                        std::vector<std::shared_ptr<CacheEntry>> fresh, bool background) {
  std::vector<DecodeRequest> batch;
  batch.reserve(fresh.size());
  {
    std::lock_guard<std::mutex> lk(mu_);
    inflight_ += fresh.size();
  }
  for (auto& e : fresh) {
    DecodeRequest r;
    r.source = source;
    r.index = e->index;
    // A pending entry's buffer belongs to the decoder, which allocates it
    // right before decoding into it (see DecodeRequest::buffer).
    r.buffer = [pool = pool_, e]() -> uint8_t* {
      e->data = pool->allocate(e->size);
      return e->data ? e->data.get() : nullptr;
    };
    r.background = background;
    // Not owning: ~ChunkCache waits for every request's done() (inflight_).
    r.done = [this, e](const Status& st) { complete(e, st); };
    batch.push_back(std::move(r));
  }
  decoder_->submit(std::move(batch));
}

void ChunkCache::complete(const std::shared_ptr<CacheEntry>& e, const Status& st) {
  std::vector<std::shared_ptr<CacheEntry>> dropped;  // released after mu_
  PoolBuffer failed_data;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (st.ok()) {
      e->state = CacheEntry::State::kReady;
      if (e->in_map) {
        bytes_ += e->size;
        lru_.push_front(e.get());
        e->lru_it = lru_.begin();
        e->in_lru = true;
        trim_locked(dropped);
      }
    } else {
      e->state = CacheEntry::State::kFailed;
      e->error = st;
      failed_data = std::move(e->data);
      if (e->in_map) {
        map_.erase(Key{e->source, e->index});
        e->in_map = false;
      }
    }
    publish_gauges_locked();
  }
  cv_.notify_all();
  // One line per failed decode (not per waiting reader): it names the store
  // file, tensor and chunk.
  if (!st.ok() && st.message() != kDecoderShutDown) log_error(st.ToString());
  dropped.clear();
  failed_data = PoolBuffer();
  // Last: once inflight_ reaches 0 the destructor may run.
  std::lock_guard<std::mutex> lk(mu_);
  if (--inflight_ == 0) idle_cv_.notify_all();
}

void ChunkCache::unpin(CacheEntry* e, uint32_t served_lo, uint32_t served_hi) {
  std::vector<std::shared_ptr<CacheEntry>> dropped;  // released after mu_
  std::lock_guard<std::mutex> lk(mu_);
  WC_CHECK(e->pins > 0);
  if (served_hi > served_lo) {
    if (e->served_hi == e->served_lo) {
      e->served_lo = served_lo;
      e->served_hi = served_hi;
    } else if (served_lo <= e->served_hi && served_hi >= e->served_lo) {
      e->served_lo = std::min(e->served_lo, served_lo);
      e->served_hi = std::max(e->served_hi, served_hi);
    }
  }
  if (--e->pins != 0) return;
  if (drop_behind_ && e->in_lru && e->served_lo == 0 && e->served_hi >= e->size) {
    // Every byte of the chunk went to the kernel's page cache: drop it now,
    // so that its memory (mapped, and likely still in the CPU's caches)
    // takes the next chunk instead of fresh pages.
    lru_.erase(e->lru_it);
    evict_locked(e, dropped);
    Stats::add(stats_->cache_drop_behind);
    publish_gauges_locked();
  } else if (bytes_ > budget_) {
    trim_locked(dropped);
    publish_gauges_locked();
  }
}

void ChunkCache::evict_locked(CacheEntry* e, std::vector<std::shared_ptr<CacheEntry>>& dropped) {
  e->in_lru = false;
  e->in_map = false;
  bytes_ -= e->size;
  auto mit = map_.find(Key{e->source, e->index});
  dropped.push_back(std::move(mit->second));
  map_.erase(mit);
}

void ChunkCache::trim_locked(std::vector<std::shared_ptr<CacheEntry>>& dropped) {
  auto it = lru_.end();
  while (bytes_ > budget_ && it != lru_.begin()) {
    --it;
    CacheEntry* e = *it;
    if (e->pins != 0) continue;
    it = lru_.erase(it);
    evict_locked(e, dropped);
    Stats::add(stats_->cache_evictions);
  }
}

}  // namespace wcodecfs
