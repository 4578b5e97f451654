// wcodecfs/derived.h — files of the mount whose bytes are computed from
// other stored files: the tools a view kind needs when its bytes are not a
// plain range of its inputs (a dtype conversion, a dequantization, a
// rebuilt matrix).
//
//  - open_content(): the content of a stored input as the mount presents it
//    (a plain file unchanged, X.wcodec as the safetensors file it holds,
//    X.gguf.wcodec as its GGUF file), as a VirtualFile a kind can cut into
//    its own extents (a decoded range stays a decoded extent: served from
//    the chunk cache, decoded only when read).
//  - ComputedSource: a ChunkSource whose chunk i is made by a function (for
//    example: read a range of a source tensor with read_uncached() and
//    convert it). A view refers to it with DecodedExtents like any other
//    source, so computed chunks are cached, read ahead and decoded by the
//    CPU pool; nothing is computed before a read touches it.
//  - read_uncached(): reads a range of a VirtualFile without the chunk
//    cache. A ComputedSource's function runs on a decoder thread, which must
//    never wait on the cache it is filling; it reads its inputs with this.
//
// Every failure is a Status naming the stored file: a computed chunk whose
// input cannot be read correctly is an error (the read is EIO), never
// zeros or stale bytes.
//
// Thread-safety: ComputedSource is immutable; decode() may run on many
// threads at once, so its function must be thread-safe (pure functions of
// immutable inputs are). read_uncached() and open_content() are reentrant.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "wcodecfs/chunk_source.h"
#include "wcodecfs/fs_status.h"
#include "wcodecfs/store_kind.h"
#include "wcodecfs/virtual_file.h"

namespace wcodecfs {

// Reads [off, off + n) of `vf` into out: inline and zero extents copied,
// passthrough ranges read with pread (a backing file that shrank is
// kStale), decoded ranges by decoding, once each, the chunks the range
// touches (every chunk verified by its source). InvalidArgument when the
// range is not inside the file.
Status read_uncached(const VirtualFile& vf, uint64_t off, uint64_t n, uint8_t* out);

// The content of stored input `in` as the mount shows it: "X.gguf.wcodec"
// as the GGUF file it holds, "X.wcodec" as its safetensors file, anything
// else as a passthrough of its bytes. `source_id` keys the decoded chunks
// in the cache (BuildContext::source_id of the view; 0: a fresh id).
// Opens container indexes only; decodes nothing.
Result<std::shared_ptr<const VirtualFile>> open_content(const StoredInput& in, uint64_t source_id);

class ComputedSource final : public ChunkSource {
 public:
  // Fills out[0, chunk_size(chunk)) with chunk `chunk`'s bytes.
  using Compute = std::function<Status(size_t chunk, uint8_t* out)>;
  // The largest computed chunk (the decoders' buffers hold chunks of at
  // most this size).
  static constexpr uint32_t kMaxChunk = 4u << 20;

  // A stream of chunks of the given sizes (each 1..kMaxChunk), back to back
  // from stream position `begin`. `name` is the store-relative path of the
  // view, for messages. InvalidArgument for an empty list, a size out of
  // range, or a stream end that overflows.
  static Result<std::shared_ptr<const ComputedSource>> make(std::string name, std::vector<uint32_t> chunk_sizes,
                                                            Compute compute, uint64_t id = 0,
                                                            uint64_t begin = 0);
  // Chunks of `chunk` bytes (the last one shorter) covering `total` bytes.
  static Result<std::shared_ptr<const ComputedSource>> make_uniform(std::string name, uint64_t total,
                                                                    uint32_t chunk, Compute compute,
                                                                    uint64_t id = 0);

  size_t num_chunks() const override { return offsets_.size() - 1; }
  uint64_t chunk_offset(size_t i) const override { return offsets_[i]; }
  uint32_t chunk_size(size_t i) const override { return static_cast<uint32_t>(offsets_[i + 1] - offsets_[i]); }
  uint64_t stream_begin() const override { return offsets_.front(); }
  uint64_t stream_end() const override { return offsets_.back(); }
  size_t chunk_at(uint64_t pos) const override;
  // Runs the function; an error it returns is prefixed with the view's name
  // and the chunk unless it already names the view.
  Status decode(size_t i, uint8_t* out) const override;
  const std::string& name() const override { return name_; }

 private:
  ComputedSource(std::string name, std::vector<uint64_t> offsets, Compute compute, uint64_t id)
      : ChunkSource(id), name_(std::move(name)), offsets_(std::move(offsets)), compute_(std::move(compute)) {}

  std::string name_;
  std::vector<uint64_t> offsets_;  // offsets_[i]: start of chunk i; back(): stream end
  Compute compute_;
};

}  // namespace wcodecfs
