// wcodecfs/chunk_source.h — a stream of bytes stored as independently
// decodable chunks.
//
// A ChunkSource describes a decoded byte stream cut into chunks: chunk i
// covers stream positions [chunk_offset(i), chunk_offset(i) + chunk_size(i)).
// Chunks are contiguous, non-empty and in order; the stream covers
// [stream_begin(), stream_end()). Virtual files refer to ranges of a source
// with "decoded" extents, and the ChunkCache keys decoded chunks by
// (source id, chunk index).
//
// WcodecChunkSource is the source of a .wcodec container: its stream
// positions are offsets in the original safetensors file (the container's
// ChunkEntry::decoded_offset), so the stream begins at data_start().
//
// Thread-safety: immutable after construction; decode() may be called from
// many threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wcodec/container.h"
#include "wcodecfs/fs_status.h"

namespace wcodecfs {

class ChunkSource {
 public:
  // A fresh id, unique in this process.
  static uint64_t new_id();
  // `id` keys the source's chunks in the cache: two sources with the same id
  // must decode to the same bytes (the Filesystem gives every version of a
  // stored file its own id, and the same id again when the same unchanged
  // file is opened anew, so its cached chunks survive the kernel forgetting
  // the inode). 0 selects new_id().
  explicit ChunkSource(uint64_t id = 0);
  virtual ~ChunkSource() = default;
  ChunkSource(const ChunkSource&) = delete;
  ChunkSource& operator=(const ChunkSource&) = delete;

  // The cache key of the source's chunks.
  uint64_t id() const { return id_; }

  virtual size_t num_chunks() const = 0;
  // REQUIRES: i < num_chunks().
  virtual uint64_t chunk_offset(size_t i) const = 0;
  virtual uint32_t chunk_size(size_t i) const = 0;
  virtual uint64_t stream_begin() const = 0;
  virtual uint64_t stream_end() const = 0;
  // Index of the chunk containing stream position `pos`, or SIZE_MAX when
  // pos lies outside [stream_begin(), stream_end()).
  virtual size_t chunk_at(uint64_t pos) const = 0;
  // Decodes chunk i into out[0, chunk_size(i)) and verifies it against its
  // checksum. A mismatch is Corruption whose message names the store file,
  // the tensor and the chunk.
  virtual Status decode(size_t i, uint8_t* out) const = 0;
  // Whether chunks a and b may decode together with decode_group (the
  // default: never).
  virtual bool pairable(size_t a, size_t b) const {
    (void)a;
    (void)b;
    return false;
  }
  // Decodes chunks idx[0..n) (n <= wcodec::kMaxChunkGroup) into outs[i] (as
  // decode() each), together where all are pairable with idx[0]; chunk i's
  // result goes to sts[i].
  virtual void decode_group(const size_t* idx, uint8_t* const* outs, int n, Status* sts) const {
    for (int i = 0; i < n; ++i) sts[i] = decode(idx[i], outs[i]);
  }
  // The store-relative name of the backing file, for messages.
  virtual const std::string& name() const = 0;

 private:
  const uint64_t id_;
};

// The chunks of a .wcodec container (whole tensor data region).
class WcodecChunkSource final : public ChunkSource {
 public:
  // Validates the reader's chunk table against hostile input: chunks
  // contiguous from data_start() to original_size(), each non-empty and at
  // most wcodec::kMaxChunkDecoded bytes. `name` is the store-relative path
  // used in messages instead of the path the reader was opened with.
  static Result<std::shared_ptr<WcodecChunkSource>> make(std::shared_ptr<const wcodec::Reader> reader,
                                                         std::string name, uint64_t id = 0);

  size_t num_chunks() const override { return offsets_.size() - 1; }
  uint64_t chunk_offset(size_t i) const override { return offsets_[i]; }
  uint32_t chunk_size(size_t i) const override { return static_cast<uint32_t>(offsets_[i + 1] - offsets_[i]); }
  uint64_t stream_begin() const override { return offsets_.front(); }
  uint64_t stream_end() const override { return offsets_.back(); }
  size_t chunk_at(uint64_t pos) const override;
  Status decode(size_t i, uint8_t* out) const override;
  bool pairable(size_t a, size_t b) const override { return reader_->pairable(a, b); }
  void decode_group(const size_t* idx, uint8_t* const* outs, int n, Status* sts) const override;
  const std::string& name() const override { return name_; }

  const wcodec::Reader& reader() const { return *reader_; }

 private:
  WcodecChunkSource(std::shared_ptr<const wcodec::Reader> reader, std::string name, uint64_t id)
      : ChunkSource(id), reader_(std::move(reader)), name_(std::move(name)) {}

  // A codec status as this source reports it (messages name the store file).
  Status renamed(const wcodec::Status& st) const;

  std::shared_ptr<const wcodec::Reader> reader_;
  std::string name_;
  // offsets_[i] = stream offset of chunk i; offsets_.back() = stream end.
  std::vector<uint64_t> offsets_;
};

// Replaces a leading `from` in a codec message with `to` (the reader may have
// been opened through /proc/self/fd/N; messages should name the store file).
std::string rename_in_message(const std::string& msg, const std::string& from, const std::string& to);

}  // namespace wcodecfs
