// wcodecfs/wcodec_kind.h — the store kind of .wcodec containers.
//
// "X.wcodec" (a container made from X.safetensors) is presented as
// "X.safetensors", byte-identical to the original, and hidden itself.
// Layout of the presented file: the safetensors header [0, data_start) as
// an inline extent (the container stores it verbatim), then the tensor data
// as one decoded extent over all chunks, with every tensor's start given to
// readahead as a segment boundary. "X.gguf.wcodec" is left to the GGUF kind.
//
// The kind's staging codec encodes "X.safetensors" to "X.wcodec" (except
// X = *.gguf, whose encoded name belongs to the GGUF kind).
//
// WcodecChunkSource is the chunk source of a container: its stream positions
// are offsets in the original safetensors file (ChunkEntry::decoded_offset),
// so the stream begins at data_start(). It declares grouped decoding (float
// chunks of one tensor decode faster together) and a device container.
//
// Thread-safety: immutable; every function may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "wcodec/container.h"
#include "wcodecfs/chunk_source.h"
#include "wcodecfs/store_kind.h"

namespace wcodecfs {

class WcodecChunkSource final : public ChunkSource {
 public:
  // Validates the reader's chunk table against hostile input: chunks
  // contiguous from data_start() to original_size(), each non-empty and at
  // most wcodec::kMaxChunkDecoded bytes. `name` is the store-relative path
  // used in messages instead of the path the reader was opened with.
  // `packed`: stream positions are the chunks' running sum from 0 (the
  // tensors back to back, without the gaps a GGUF source has between them:
  // the GGUF kind maps each tensor's range onto it); otherwise chunks must
  // be contiguous from data_start() to original_size() and positions are
  // offsets in the original.
  static Result<std::shared_ptr<WcodecChunkSource>> make(std::shared_ptr<const wcodec::Reader> reader,
                                                         std::string name, uint64_t id = 0, bool packed = false);

  size_t num_chunks() const override { return offsets_.size() - 1; }
  uint64_t chunk_offset(size_t i) const override { return offsets_[i]; }
  uint32_t chunk_size(size_t i) const override { return static_cast<uint32_t>(offsets_[i + 1] - offsets_[i]); }
  uint64_t stream_begin() const override { return offsets_.front(); }
  uint64_t stream_end() const override { return offsets_.back(); }
  size_t chunk_at(uint64_t pos) const override;
  Status decode(size_t i, uint8_t* out) const override;
  const std::string& name() const override { return name_; }
  int max_group() const override;
  bool pairable(size_t a, size_t b) const override { return reader_->pairable(a, b); }
  int group_size(size_t avail) const override;
  void decode_group(const size_t* idx, uint8_t* const* outs, int n, Status* sts) const override;
  // Packed streams stay on the CPU decoders (the GPU batch decoder places
  // chunks by their offsets in the original).
  const wcodec::Reader* device_container() const override { return packed_ ? nullptr : reader_.get(); }

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
  bool packed_ = false;
};

class WcodecStagingCodec final : public StagingCodec {
 public:
  std::string_view name() const override { return "wcodec"; }
  std::string encoded_name(std::string_view plain) const override;
  std::string plain_name(std::string_view stored) const override;
  Status encode(int in_fd, uint64_t size, int out_fd, const wcodec::EncodeConfig& cfg,
                const std::string& what) const override;
  Result<EncodedInfo> inspect(int fd, const std::string& what) const override;
  Status verify(int fd, const std::string& what) const override;
  Status decode(int fd, const std::string& what,
                const std::function<Status(const uint8_t*, size_t)>& sink) const override;
};

class WcodecKind final : public StoreKind {
 public:
  std::string_view name() const override { return "wcodec"; }
  void present(const StoreDir& dir, std::vector<Presentation>* out) const override;
  Result<std::shared_ptr<const VirtualFile>> build(const StoreDir& dir, const Presentation& p,
                                                   const BuildContext& ctx) const override;
  const StagingCodec* staging() const override { return &codec_; }

 private:
  WcodecStagingCodec codec_;
};

// Opens the container behind descriptor `fd` (not taken over); messages name
// `what`.
Result<std::shared_ptr<const wcodec::Reader>> open_container(int fd, const std::string& what);

}  // namespace wcodecfs
