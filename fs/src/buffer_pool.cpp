// fs/src/buffer_pool.cpp — see buffer_pool.h.
#include "buffer_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <iterator>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

namespace wcodecfs {
namespace {

constexpr uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

// `size` bytes (a 2 MiB multiple) mapped at a 2 MiB boundary, or null. mmap
// aligns to 4 KiB only and a huge page can back only an aligned 2 MiB of a
// mapping, so this maps 2 MiB more and unmaps the ends. MADV_HUGEPAGE lets
// the kernel use huge pages here when transparent huge pages are in
// "madvise" mode (the distributions' default); kernels without them answer
// EINVAL and the region works with 4 KiB pages.
uint8_t* map_region(size_t size, bool huge_pages) {
  constexpr uintptr_t kAlign = BufferPool::kHugePage;
  const size_t span = size + kAlign;
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
  const uintptr_t base = (lo + kAlign - 1) & ~(kAlign - 1);
  if (base > lo) ::munmap(p, base - lo);
  if (lo + span > base + size) ::munmap(reinterpret_cast<void*>(base + size), lo + span - (base + size));
  auto* r = reinterpret_cast<uint8_t*>(base);
  if (huge_pages) (void)::madvise(r, size, MADV_HUGEPAGE);
  return r;
}

}  // namespace

void PoolBuffer::reset() {
  if (data_) {
    pool_->release(data_, static_cast<BufferPool::Region*>(region_), bytes_);
    data_ = nullptr;
  }
  pool_.reset();
}

std::shared_ptr<BufferPool> BufferPool::create(uint64_t budget_bytes, bool huge_pages) {
  return with_region(region_for_budget(budget_bytes), huge_pages);
}

std::shared_ptr<BufferPool> BufferPool::with_region(size_t region_bytes, bool huge_pages) {
  const size_t r = round_up(std::clamp<uint64_t>(region_bytes, kHugePage, uint64_t{1} << 40), kHugePage);
  return std::shared_ptr<BufferPool>(new BufferPool(r, huge_pages));
}

size_t BufferPool::region_for_budget(uint64_t budget_bytes) {
  return std::clamp<uint64_t>(round_up(budget_bytes / 4, kHugePage), kHugePage, kMaxRegion);
}

// Every buffer holds the pool, so none is out: the regions left are wholly
// free (the spare, or ones freed while it existed were unmapped already).
BufferPool::~BufferPool() {
  for (const Region& r : regions_) ::munmap(r.base, r.size);
}

BufferPool::Region* BufferPool::map_region_locked(size_t size) {
  uint8_t* base = map_region(size, huge_pages_);
  if (!base) return nullptr;
  regions_.push_back(Region{base, size, 0, 0, {}});
  Region* r = &regions_.back();
  r->self = std::prev(regions_.end());
  insert_free_locked(base, size, r);
  mapped_bytes_.fetch_add(size, std::memory_order_relaxed);
  maps_.fetch_add(1, std::memory_order_relaxed);
  return r;
}

void BufferPool::insert_free_locked(uint8_t* start, size_t size, Region* r) {
  free_by_addr_.emplace(start, FreeRange{size, r});
  free_by_size_.emplace(size, start);
}

void BufferPool::erase_free_locked(std::map<uint8_t*, FreeRange>::iterator it) {
  free_by_size_.erase({it->second.size, it->first});
  free_by_addr_.erase(it);
}

PoolBuffer BufferPool::allocate(size_t size) {
  if (size > (uint64_t{1} << 48)) return {};  // no such mapping; keeps the rounding below from overflowing
  const size_t n = round_up(std::max<size_t>(size, 1), kPage);
  uint8_t* p = nullptr;
  Region* r = nullptr;
  uint8_t* fresh = nullptr;
  size_t fresh_bytes = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    // Best fit: the smallest free range that holds n bytes, so the large
    // never-touched tail of a region is cut only when no recycled range fits.
    auto best = free_by_size_.lower_bound({n, nullptr});
    if (best == free_by_size_.end()) {
      Region* nr = map_region_locked(std::max<size_t>(region_bytes_, round_up(n, kHugePage)));
      if (!nr) return {};
      best = free_by_size_.find({nr->size, nr->base});
    }
    p = best->second;
    auto range = free_by_addr_.find(p);
    r = range->second.region;
    const size_t have = range->second.size;
    erase_free_locked(range);
    if (have > n) insert_free_locked(p + n, have - n, r);
    if (r == spare_) spare_ = nullptr;
    r->used += n;
    // Ranges are cut from the start of a free range, and all of a region
    // above `touched` is one free range, so a buffer reaching past it
    // starts at or below it: its part above `touched` is new.
    const size_t off = static_cast<size_t>(p - r->base);
    if (off + n > r->touched) {
      const size_t from = std::max(off, r->touched);
      fresh = r->base + from;
      fresh_bytes = off + n - from;
      r->touched = off + n;
    }
  }
  used_bytes_.fetch_add(n, std::memory_order_relaxed);
  // Pages never handed out before are mapped in one call
  // (MADV_POPULATE_WRITE) rather than faulted in one by one while the
  // decoder writes them: about a third less kernel time per page on a cold
  // read, when every chunk lands in memory the process has not touched
  // before. Recycled ranges are mapped already and skip the call. Kernels
  // without it (EINVAL) fault on first write.
  if (fresh_bytes) {
    (void)::madvise(fresh, fresh_bytes, MADV_POPULATE_WRITE);
    populated_bytes_.fetch_add(fresh_bytes, std::memory_order_relaxed);
  }
  return PoolBuffer(shared_from_this(), p, r, n);
}

void BufferPool::release(uint8_t* data, Region* r, size_t bytes) {
  uint8_t* unmap = nullptr;
  size_t unmap_bytes = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    r->used -= bytes;
    uint8_t* start = data;
    size_t size = bytes;
    // Coalesce with the free neighbours in the same region (two regions
    // may be adjacent in the address space; their ranges stay apart).
    auto next = free_by_addr_.lower_bound(data);
    if (next != free_by_addr_.end() && next->first == data + bytes && next->second.region == r) {
      size += next->second.size;
      erase_free_locked(next);
    }
    auto after = free_by_addr_.lower_bound(data);
    if (after != free_by_addr_.begin()) {
      auto prev = std::prev(after);
      if (prev->second.region == r && prev->first + prev->second.size == data) {
        start = prev->first;
        size += prev->second.size;
        erase_free_locked(prev);
      }
    }
    if (r->used == 0 && spare_ && spare_ != r) {
      // Wholly free and a spare is kept already: unmap it (below, without
      // mu_: unmapping a region's pages takes a while).
      unmap = r->base;
      unmap_bytes = r->size;
      mapped_bytes_.fetch_sub(r->size, std::memory_order_relaxed);
      regions_.erase(r->self);
    } else {
      insert_free_locked(start, size, r);
      if (r->used == 0) spare_ = r;
    }
  }
  used_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  if (unmap) ::munmap(unmap, unmap_bytes);
}

}  // namespace wcodecfs
