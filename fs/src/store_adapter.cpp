// fs/src/store_adapter.cpp — see wcodecfs/store_adapter.h.
#include "wcodecfs/store_adapter.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "wcodec/container.h"
#include "wcodecfs/chunk_source.h"
#include "wcodecfs/fs_log.h"

namespace wcodecfs {
namespace {

constexpr std::string_view kWcodecExt = ".wcodec";
constexpr std::string_view kSafetensorsExt = ".safetensors";
constexpr std::string_view kGgufWcodecExt = ".gguf.wcodec";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool have_proc_fd() {
  static const bool ok = ::access("/proc/self/fd", X_OK) == 0;
  return ok;
}

}  // namespace

std::vector<std::string> WcodecAdapter::presented_names(std::string_view stored) const {
  if (!ends_with(stored, kWcodecExt) || stored.size() == kWcodecExt.size() || ends_with(stored, kGgufWcodecExt))
    return {};
  std::string stem(stored.substr(0, stored.size() - kWcodecExt.size()));
  return {stem + std::string(kSafetensorsExt)};
}

std::vector<std::string> WcodecAdapter::stored_names(std::string_view name) const {
  if (!ends_with(name, kSafetensorsExt) || name.size() == kSafetensorsExt.size()) return {};
  std::string stem(name.substr(0, name.size() - kSafetensorsExt.size()));
  std::string stored = stem + std::string(kWcodecExt);
  if (ends_with(stored, kGgufWcodecExt)) return {};
  return {stored};
}

Result<std::shared_ptr<const VirtualFile>> WcodecAdapter::build(const StoredFile& file, std::string_view name) const {
  // The codec opens containers by path. /proc/self/fd/N names exactly the
  // file we opened relative to the store dirfd with O_NOFOLLOW, so nothing
  // can be swapped in between; without /proc we fall back to the path.
  std::string open_path = file.abs_path;
  if (have_proc_fd()) {
    open_path = "/proc/self/fd/" + std::to_string(file.fd);
  } else {
    log_once(LogLevel::kWarn, "no-proc", "/proc/self/fd is not available: opening containers by path");
  }
  auto rd = wcodec::Reader::open(open_path);
  if (!rd.ok()) {
    Status st = from_codec(rd.status());
    return Status(st.code(), rename_in_message(st.message(), open_path, file.path));
  }
  std::shared_ptr<const wcodec::Reader> reader(std::move(rd).value());
  const uint64_t data_start = reader->data_start();
  const uint64_t size = reader->original_size();
  if (data_start > size || data_start > wcodec::kMaxSafetensorsHeader + 8)
    return Status::Corruption(file.path + ": data start " + std::to_string(data_start) + " (original size " +
                              std::to_string(size) + ")");
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<WcodecChunkSource> source, WcodecChunkSource::make(reader, file.path, file.source_id));

  std::vector<Extent> extents;
  if (data_start > 0) {
    auto header = std::make_shared<std::vector<uint8_t>>(data_start);
    const wcodec::Status st = reader->read(0, data_start, header->data());
    if (!st.ok()) return Status(Code::kCorruption, rename_in_message(st.message(), reader->path(), file.path));
    extents.push_back(Extent{0, data_start, InlineExtent{std::move(header), 0}});
  }
  if (size > data_start) {
    // One extent per tensor (all of the same source): readahead stops at the
    // end of the tensor a loader reads (Readahead::on_read).
    std::vector<uint64_t> cuts;
    for (const wcodec::TensorInfo& t : reader->header().tensors) {
      const uint64_t at = data_start + t.begin;
      if (t.begin <= size - data_start && at > data_start && at < size) cuts.push_back(at);
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    cuts.push_back(size);
    uint64_t pos = data_start;
    for (const uint64_t cut : cuts) {
      extents.push_back(Extent{pos, cut - pos, DecodedExtent{source, pos}});
      pos = cut;
    }
  }
  std::string vname = file.path;
  const size_t slash = vname.rfind('/');
  vname = (slash == std::string::npos ? std::string() : vname.substr(0, slash + 1)) + std::string(name);
  return VirtualFile::make(std::move(vname), std::move(extents));
}

Result<std::shared_ptr<const VirtualFile>> make_passthrough_file(std::shared_ptr<const BackingFile> file,
                                                                 uint64_t size) {
  std::vector<Extent> extents;
  std::string name = file->name();
  if (size > 0) extents.push_back(Extent{0, size, PassthroughExtent{std::move(file), 0}});
  return VirtualFile::make(std::move(name), std::move(extents));
}

Result<std::shared_ptr<const VirtualFile>> make_inline_file(std::string name, std::vector<uint8_t> bytes) {
  std::vector<Extent> extents;
  const uint64_t n = bytes.size();
  if (n > 0) {
    extents.push_back(Extent{0, n, InlineExtent{std::make_shared<const std::vector<uint8_t>>(std::move(bytes)), 0}});
  }
  return VirtualFile::make(std::move(name), std::move(extents));
}

std::vector<std::shared_ptr<const StoreAdapter>> default_adapters() {
  return {std::make_shared<WcodecAdapter>()};
}

}  // namespace wcodecfs
