// fs/src/kinds/gguf_kind.cpp — see wcodecfs/gguf_kind.h.
#include "wcodecfs/gguf_kind.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "wcodec/container.h"

namespace wcodecfs {
namespace {

constexpr std::string_view kGgufExt = ".gguf";
constexpr std::string_view kGgufWcodecExt = ".gguf.wcodec";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

// ---------------------------------------------------------------- the kind

void GgufKind::present(const StoreDir& dir, std::vector<Presentation>* out) const {
  for (const StoreEntry& e : dir.entries()) {
    if (e.type != S_IFREG) continue;
    const std::string plain = codec_.plain_name(e.name);
    if (!plain.empty()) out->push_back(Presentation{plain, {e.name}, /*hides_inputs=*/true});
  }
}

Result<std::shared_ptr<const VirtualFile>> GgufKind::build(const StoreDir& /*dir*/, const Presentation& /*p*/,
                                                           const BuildContext& ctx) const {
  if (ctx.inputs().size() != 1)
    return Status::Internal(ctx.presented_path() + ": a .gguf.wcodec presentation has one input, got " +
                            std::to_string(ctx.inputs().size()));
  const StoredInput& in = ctx.inputs().front();
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<const wcodec::Reader> reader, open_container(in.file->fd(), in.path));
  if (!reader->source_is_gguf())
    return Status::Corruption(in.path + ": not a container of a GGUF file (header flag bit 0 clear; a container of "
                                        "a safetensors file is named X.wcodec)");
  const uint64_t data_start = reader->data_start();
  const uint64_t size = reader->original_size();
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<WcodecChunkSource> source,
                        WcodecChunkSource::make(reader, in.path, ctx.source_id(0), /*packed=*/true));
  std::vector<Extent> extents;
  std::vector<uint64_t> segments;
  if (data_start > 0) {
    auto header = std::make_shared<std::vector<uint8_t>>(data_start);
    const wcodec::Status st = reader->read(0, data_start, header->data());
    if (!st.ok()) return Status(Code::kCorruption, rename_in_message(st.message(), reader->path(), in.path));
    extents.push_back(Extent{0, data_start, InlineExtent{std::move(header), 0}});
  }
  // Tensors in file order (the reader checked the layout against the
  // stored header): decoded ranges on the packed stream, zeros between.
  uint64_t pos = data_start, packed = 0;
  for (const wcodec::TensorInfo& t : reader->header().tensors) {
    const uint64_t at = data_start + t.begin;
    if (at < pos || t.end < t.begin || data_start + t.end > size)
      return Status::Corruption(in.path + ": tensor \"" + t.name + "\" at [" + std::to_string(at) + ", " +
                                std::to_string(data_start + t.end) + ") is out of order or beyond the file");
    if (at > pos) extents.push_back(Extent{pos, at - pos, ZeroExtent{}});
    if (t.nbytes() > 0) {
      extents.push_back(Extent{at, t.nbytes(), DecodedExtent{source, packed}});
      segments.push_back(at);
    }
    packed += t.nbytes();
    pos = data_start + t.end;
  }
  if (packed != source->stream_end())
    return Status::Corruption(in.path + ": the tensors hold " + std::to_string(packed) + " bytes, the chunks " +
                              std::to_string(source->stream_end()));
  if (size > pos) extents.push_back(Extent{pos, size - pos, ZeroExtent{}});
  return VirtualFile::make(ctx.presented_path(), std::move(extents), std::move(segments));
}

// ----------------------------------------------------------- staging codec

std::string GgufStagingCodec::encoded_name(std::string_view plain) const {
  if (!ends_with(plain, kGgufExt) || plain.size() == kGgufExt.size()) return {};
  return std::string(plain) + ".wcodec";
}

std::string GgufStagingCodec::plain_name(std::string_view stored) const {
  if (!ends_with(stored, kGgufWcodecExt) || stored.size() == kGgufWcodecExt.size()) return {};
  return std::string(stored.substr(0, stored.size() - std::string_view(".wcodec").size()));
}

Status GgufStagingCodec::encode(int in_fd, uint64_t size, int out_fd, const wcodec::EncodeConfig& cfg,
                                const std::string& what) const {
  char magic[4] = {};
  if (size < 4 || ::pread(in_fd, magic, 4, 0) != 4 || std::memcmp(magic, "GGUF", 4) != 0)
    return from_codec(wcodec::Status::NotSupported(what + ": not a GGUF file (no GGUF magic); it is not encoded"));
  return from_codec(wcodec::encode_safetensors_fd(in_fd, size, out_fd, cfg, what));
}

}  // namespace wcodecfs
