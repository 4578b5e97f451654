// wcodecfs/chunk_source.h — a stream of bytes stored as independently
// decodable chunks, and what a decoder may do with it.
//
// A ChunkSource describes a decoded byte stream cut into chunks: chunk i
// covers stream positions [chunk_offset(i), chunk_offset(i) + chunk_size(i)).
// Chunks are contiguous, non-empty and in order; the stream covers
// [stream_begin(), stream_end()). Virtual files refer to ranges of a source
// with "decoded" extents, and the ChunkCache keys decoded chunks by
// (source id, chunk index).
//
// A source knows nothing of the decoders that run it; it declares what it
// can do, and decoders use only what is declared:
//  - decode(i): every source (the CPU path);
//  - grouping: max_group() > 1 says that decode_group() decodes several of
//    its chunks faster together than one by one (pairable() says which);
//    the CPU pool groups only such sources;
//  - a device container: device_container() names the .wcodec container
//    whose chunk i is this source's chunk i; the GPU batch decoder plans
//    chunks of such sources and sends every other source to the CPU.
// Store kinds (wcodecfs/store_kind.h) make sources; the .wcodec one is in
// wcodecfs/wcodec_kind.h.
//
// Thread-safety: immutable after construction; decode() may be called from
// many threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wcodecfs/fs_status.h"

namespace wcodec {
class Reader;
}

namespace wcodecfs {

class ChunkSource {
 public:
  // The most chunks one decode_group call may take (decoders keep that many
  // requests on their stack).
  static constexpr int kMaxGroup = 4;

  // A fresh id, unique in this process.
  static uint64_t new_id();
  // `id` keys the source's chunks in the cache: two sources with the same id
  // must decode to the same bytes (the Filesystem gives every version of a
  // presented file's stored inputs its own ids, and the same ids again when
  // the same unchanged inputs are opened anew, so cached chunks survive the
  // kernel forgetting the inode). 0 selects new_id().
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
  // Decodes chunk i into out[0, chunk_size(i)) and verifies it. A chunk that
  // cannot be served correctly is an error (Corruption for a checksum
  // mismatch) whose message names the store file and the chunk.
  virtual Status decode(size_t i, uint8_t* out) const = 0;
  // The store-relative name of the (first) stored input, for messages.
  virtual const std::string& name() const = 0;

  // --- capability: grouped decoding (default: none) -----------------------
  // The most chunks decode_group takes at once (1..kMaxGroup); 1: the
  // source is never grouped.
  virtual int max_group() const { return 1; }
  // Whether chunks a and b may decode together with decode_group.
  virtual bool pairable(size_t a, size_t b) const {
    (void)a;
    (void)b;
    return false;
  }
  // Of `avail` waiting chunks pairable with a first one (the first
  // included), how many one group should take (1..max_group()). The
  // default takes as many as fit.
  virtual int group_size(size_t avail) const;
  // Decodes chunks idx[0..n) (n <= max_group()) into outs[i] (as decode()
  // each), together where all are pairable with idx[0]; chunk i's result
  // goes to sts[i].
  virtual void decode_group(const size_t* idx, uint8_t* const* outs, int n, Status* sts) const {
    for (int i = 0; i < n; ++i) sts[i] = decode(idx[i], outs[i]);
  }

  // --- capability: device decoding (default: none) -------------------------
  // The .wcodec container whose chunk i (wcodec::Reader::chunk(i)) is
  // exactly this source's chunk i, for decoders that plan containers'
  // chunks in their own memory (the GPU); null when there is none.
  virtual const wcodec::Reader* device_container() const { return nullptr; }

 private:
  const uint64_t id_;
};

// Replaces a leading `from` in a codec message with `to` (a codec object may
// name a path the store does not show; messages should name the store file).
std::string rename_in_message(const std::string& msg, const std::string& from, const std::string& to);

}  // namespace wcodecfs
