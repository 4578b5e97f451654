// fs/src/kinds/wcodec_kind.cpp — see wcodecfs/wcodec_kind.h.
#include "wcodecfs/wcodec_kind.h"

#include <algorithm>
#include <string_view>

namespace wcodecfs {
namespace {

constexpr std::string_view kWcodecExt = ".wcodec";
constexpr std::string_view kSafetensorsExt = ".safetensors";
constexpr std::string_view kGgufWcodecExt = ".gguf.wcodec";
constexpr uint64_t kDecodePiece = 8u << 20;  // bytes handed to a decode sink at once

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

// ------------------------------------------------------------ the container

Result<std::shared_ptr<const wcodec::Reader>> open_container(int fd, const std::string& what) {
  auto rd = wcodec::Reader::open_fd(fd, what);
  if (!rd.ok()) return from_codec(rd.status());
  return std::shared_ptr<const wcodec::Reader>(std::move(rd).value());
}

// ------------------------------------------------------------- chunk source

Result<std::shared_ptr<WcodecChunkSource>> WcodecChunkSource::make(std::shared_ptr<const wcodec::Reader> reader,
                                                                   std::string name, uint64_t id, bool packed) {
  const wcodec::Reader& rd = *reader;
  const uint64_t begin = packed ? 0 : rd.data_start();
  uint64_t end = rd.original_size();
  if (packed) {
    end = 0;
    for (size_t i = 0; i < rd.num_chunks(); ++i) end += rd.chunk(i).decoded_size;
  }
  if (begin > end)
    return Status::Corruption(name + ": data start " + std::to_string(begin) + " beyond original size " +
                              std::to_string(end));
  std::shared_ptr<WcodecChunkSource> src(new WcodecChunkSource(std::move(reader), std::move(name), id));
  src->packed_ = packed;
  const size_t n = rd.num_chunks();
  src->offsets_.reserve(n + 1);
  uint64_t pos = begin;
  for (size_t i = 0; i < n; ++i) {
    const wcodec::ChunkEntry& e = rd.chunk(i);
    if ((!packed && e.decoded_offset != pos) || e.decoded_size == 0 || e.decoded_size > wcodec::kMaxChunkDecoded ||
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

int WcodecChunkSource::max_group() const {
  static_assert(wcodec::kMaxChunkGroup <= ChunkSource::kMaxGroup);
  return wcodec::kMaxChunkGroup;
}

int WcodecChunkSource::group_size(size_t avail) const { return wcodec::Reader::group_size(avail); }

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

// ---------------------------------------------------------------- the kind

void WcodecKind::present(const StoreDir& dir, std::vector<Presentation>* out) const {
  for (const StoreEntry& e : dir.entries()) {
    if (e.type != S_IFREG) continue;
    const std::string plain = codec_.plain_name(e.name);
    if (!plain.empty()) out->push_back(Presentation{plain, {e.name}, /*hides_inputs=*/true});
  }
}

Result<std::shared_ptr<const VirtualFile>> WcodecKind::build(const StoreDir& dir, const Presentation& /*p*/,
                                                             const BuildContext& ctx) const {
  (void)dir;
  if (ctx.inputs().size() != 1)
    return Status::Internal(ctx.presented_path() + ": a .wcodec presentation has one input, got " +
                            std::to_string(ctx.inputs().size()));
  const StoredInput& in = ctx.inputs().front();
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<const wcodec::Reader> reader, open_container(in.file->fd(), in.path));
  if (reader->source_is_gguf())
    return Status::Corruption(in.path + ": a container of a GGUF file (it is presented when named X.gguf.wcodec)");
  const uint64_t data_start = reader->data_start();
  const uint64_t size = reader->original_size();
  if (data_start > size || data_start > wcodec::kMaxSafetensorsHeader + 8)
    return Status::Corruption(in.path + ": data start " + std::to_string(data_start) + " (original size " +
                              std::to_string(size) + ")");
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<WcodecChunkSource> source,
                        WcodecChunkSource::make(reader, in.path, ctx.source_id(0)));

  std::vector<Extent> extents;
  std::vector<uint64_t> segments;
  if (data_start > 0) {
    auto header = std::make_shared<std::vector<uint8_t>>(data_start);
    const wcodec::Status st = reader->read(0, data_start, header->data());
    if (!st.ok()) return Status(Code::kCorruption, rename_in_message(st.message(), reader->path(), in.path));
    extents.push_back(Extent{0, data_start, InlineExtent{std::move(header), 0}});
  }
  if (size > data_start) {
    extents.push_back(Extent{data_start, size - data_start, DecodedExtent{source, data_start}});
    // Every tensor is a segment: readahead stops at the end of the tensor a
    // loader reads (Readahead::on_read).
    segments.push_back(data_start);
    for (const wcodec::TensorInfo& t : reader->header().tensors) {
      const uint64_t at = data_start + t.begin;
      if (t.begin <= size - data_start && at > data_start && at < size) segments.push_back(at);
    }
    std::sort(segments.begin(), segments.end());
    segments.erase(std::unique(segments.begin(), segments.end()), segments.end());
  }
  return VirtualFile::make(ctx.presented_path(), std::move(extents), std::move(segments));
}

// ----------------------------------------------------------- staging codec

std::string WcodecStagingCodec::encoded_name(std::string_view plain) const {
  if (!ends_with(plain, kSafetensorsExt) || plain.size() == kSafetensorsExt.size()) return {};
  std::string stored = std::string(plain.substr(0, plain.size() - kSafetensorsExt.size())) + std::string(kWcodecExt);
  // X.gguf.safetensors would be stored as X.gguf.wcodec, the GGUF kind's name.
  if (ends_with(stored, kGgufWcodecExt)) return {};
  return stored;
}

std::string WcodecStagingCodec::plain_name(std::string_view stored) const {
  if (!ends_with(stored, kWcodecExt) || stored.size() == kWcodecExt.size() || ends_with(stored, kGgufWcodecExt))
    return {};
  return std::string(stored.substr(0, stored.size() - kWcodecExt.size())) + std::string(kSafetensorsExt);
}

Status WcodecStagingCodec::encode(int in_fd, uint64_t size, int out_fd, const wcodec::EncodeConfig& cfg,
                                  const std::string& what) const {
  return from_codec(wcodec::encode_safetensors_fd(in_fd, size, out_fd, cfg, what));
}

Result<EncodedInfo> WcodecStagingCodec::inspect(int fd, const std::string& what) const {
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<const wcodec::Reader> rd, open_container(fd, what));
  EncodedInfo info;
  info.original_size = rd->original_size();
  info.original_sha256 = rd->original_sha256();
  info.encoded_size = rd->file_size();
  return info;
}

Status WcodecStagingCodec::verify(int fd, const std::string& what) const {
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<const wcodec::Reader> rd, open_container(fd, what));
  return from_codec(rd->verify(true));
}

Status WcodecStagingCodec::decode(int fd, const std::string& what,
                                  const std::function<Status(const uint8_t*, size_t)>& sink) const {
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<const wcodec::Reader> rd, open_container(fd, what));
  const uint64_t total = rd->original_size();
  std::vector<uint8_t> buf(std::min<uint64_t>(kDecodePiece, std::max<uint64_t>(1, total)));
  for (uint64_t off = 0; off < total; off += buf.size()) {
    const uint64_t n = std::min<uint64_t>(buf.size(), total - off);
    WCFS_RETURN_IF_ERROR(from_codec(rd->read(off, n, buf.data())));
    WCFS_RETURN_IF_ERROR(sink(buf.data(), static_cast<size_t>(n)));
  }
  return Status::OK();
}

}  // namespace wcodecfs
