// wcodecfs/gguf_kind.h — the store kind of GGUF files stored losslessly.
//
// "X.gguf.wcodec" (a .wcodec container of a GGUF source, format 2.4,
// docs/wcodec-format.md §4.9, made from X.gguf) is presented as "X.gguf",
// byte-identical to the original, and hidden itself. Layout of the presented
// file: the GGUF header up to the data section as an inline extent (the
// container stores it verbatim); then, tensor by tensor, a decoded extent
// over the tensor's chunks (a packed chunk stream: the tensors back to back)
// and a zero extent for the padding after it (and between the last tensor
// and the end of the file). Every tensor's start is a segment boundary for
// readahead. llama.cpp maps the file and reads tensors where it needs them:
// only the chunks it touches are decoded.
//
// The kind's staging codec encodes "X.gguf" (a GGUF file: the magic is
// checked, and padding outside the tensors must be zeros) to
// "X.gguf.wcodec"; anything it cannot store stays a plain file.
//
// Thread-safety: immutable; every function may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "wcodecfs/store_kind.h"
#include "wcodecfs/wcodec_kind.h"

namespace wcodecfs {

class GgufStagingCodec final : public StagingCodec {
 public:
  std::string_view name() const override { return "gguf"; }
  std::string encoded_name(std::string_view plain) const override;
  std::string plain_name(std::string_view stored) const override;
  Status encode(int in_fd, uint64_t size, int out_fd, const wcodec::EncodeConfig& cfg,
                const std::string& what) const override;
  Result<EncodedInfo> inspect(int fd, const std::string& what) const override { return container_.inspect(fd, what); }
  Status verify(int fd, const std::string& what) const override { return container_.verify(fd, what); }
  Status decode(int fd, const std::string& what,
                const std::function<Status(const uint8_t*, size_t)>& sink) const override {
    return container_.decode(fd, what, sink);
  }

 private:
  WcodecStagingCodec container_;  // the container's inspect / verify / decode
};

class GgufKind final : public StoreKind {
 public:
  std::string_view name() const override { return "gguf"; }
  void present(const StoreDir& dir, std::vector<Presentation>* out) const override;
  Result<std::shared_ptr<const VirtualFile>> build(const StoreDir& dir, const Presentation& p,
                                                   const BuildContext& ctx) const override;
  const StagingCodec* staging() const override { return &codec_; }

 private:
  GgufStagingCodec codec_;
};

}  // namespace wcodecfs
