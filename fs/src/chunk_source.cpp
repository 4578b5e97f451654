// fs/src/chunk_source.cpp — see wcodecfs/chunk_source.h.
#include "wcodecfs/chunk_source.h"

#include <algorithm>
#include <atomic>

namespace wcodecfs {
namespace {
std::atomic<uint64_t> g_next_source_id{1};
}  // namespace

uint64_t ChunkSource::new_id() { return g_next_source_id.fetch_add(1, std::memory_order_relaxed); }

ChunkSource::ChunkSource(uint64_t id) : id_(id ? id : new_id()) {}

int ChunkSource::group_size(size_t avail) const {
  return static_cast<int>(std::clamp<size_t>(avail, 1, static_cast<size_t>(std::min(max_group(), kMaxGroup))));
}

std::string rename_in_message(const std::string& msg, const std::string& from, const std::string& to) {
  if (from.empty() || msg.compare(0, from.size(), from) != 0) return msg;
  return to + msg.substr(from.size());
}

}  // namespace wcodecfs
