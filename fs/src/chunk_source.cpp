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

std::string rename_in_message(const std::string& msg, const std::string& from, const std::string& to) {
  if (from.empty() || msg.compare(0, from.size(), from) != 0) return msg;
  return to + msg.substr(from.size());
}

Result<std::shared_ptr<WcodecChunkSource>> WcodecChunkSource::make(std::shared_ptr<const wcodec::Reader> reader,
                                                                   std::string name, uint64_t id) {
  const wcodec::Reader& rd = *reader;
  const uint64_t begin = rd.data_start();
  const uint64_t end = rd.original_size();
  if (begin > end)
    return Status::Corruption(name + ": data start " + std::to_string(begin) + " beyond original size " +
                              std::to_string(end));
  std::shared_ptr<WcodecChunkSource> src(new WcodecChunkSource(std::move(reader), std::move(name), id));
  const size_t n = rd.num_chunks();
  src->offsets_.reserve(n + 1);
  uint64_t pos = begin;
  for (size_t i = 0; i < n; ++i) {
    const wcodec::ChunkEntry& e = rd.chunk(i);
    if (e.decoded_offset != pos || e.decoded_size == 0 || e.decoded_size > wcodec::kMaxChunkDecoded ||
        e.decoded_size > end - pos)
      return Status::Corruption(src->name_ + ": chunk " + std::to_string(i) + " covers [" +
                                std::to_string(e.decoded_offset) + ", +" + std::to_string(e.decoded_size) +
                                ") (expected to start at " + std::to_string(pos) + ", 1.." +
                                std::to_string(std::min<uint64_t>(wcodec::kMaxChunkDecoded, end - pos)) +
                                " bytes)");
    src->offsets_.push_back(pos);
    pos += e.decoded_size;
  }
  if (pos != end)
    return Status::Corruption(src->name_ + ": chunks end at " + std::to_string(pos) + ", original size is " +
                              std::to_string(end));
  src->offsets_.push_back(end);
  return src;
}

size_t WcodecChunkSource::chunk_at(uint64_t pos) const {
  if (pos < offsets_.front() || pos >= offsets_.back()) return SIZE_MAX;
  auto it = std::upper_bound(offsets_.begin(), offsets_.end(), pos);
  return static_cast<size_t>(it - offsets_.begin()) - 1;
}

Status WcodecChunkSource::renamed(const wcodec::Status& st) const {
  if (st.ok()) return Status::OK();
  Status fs = from_codec(st);
  return Status(fs.code(), rename_in_message(fs.message(), reader_->path(), name_));
}

Status WcodecChunkSource::decode(size_t i, uint8_t* out) const {
  if (i >= num_chunks()) return Status::Internal(name_ + ": chunk index " + std::to_string(i) + " out of range");
  return renamed(reader_->decode_chunk(i, out));
}

void WcodecChunkSource::decode_group(const size_t* idx, uint8_t* const* outs, int n, Status* sts) const {
  bool in_range = n >= 1 && n <= wcodec::kMaxChunkGroup;
  for (int i = 0; i < n && in_range; ++i) in_range = idx[i] < num_chunks();
  if (!in_range) {
    for (int i = 0; i < n; ++i) sts[i] = decode(idx[i], outs[i]);
    return;
  }
  wcodec::Status cs[wcodec::kMaxChunkGroup];
  reader_->decode_chunk_group(idx, outs, n, cs);
  for (int i = 0; i < n; ++i) sts[i] = renamed(cs[i]);
}

}  // namespace wcodecfs
