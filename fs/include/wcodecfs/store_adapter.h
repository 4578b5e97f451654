// wcodecfs/store_adapter.h — how kinds of stored files become virtual files.
//
// The store is a plain directory tree. Most entries are presented unchanged
// (passthrough). An adapter recognises one kind of stored file by its name
// and presents it under other names, as VirtualFiles whose size and layout
// come from the stored file's index alone (building one decodes nothing).
//
// WcodecAdapter: "X.wcodec" (a container made from X.safetensors) is
// presented as "X.safetensors", byte-identical to the original. Its layout:
// the safetensors header [0, data_start) as an inline extent (taken from the
// container, which stores it verbatim), then one decoded extent over all
// chunks. "X.gguf.wcodec" is left for the GGUF adapter (not here yet) and
// passes through unchanged.
//
// Names that come from inside a stored file (tensor names, metadata) never
// become paths: only the stored file's own name is mapped.
//
// Thread-safety: adapters are stateless; every function may be called from
// any thread.
#pragma once

#include <sys/stat.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wcodecfs/fs_status.h"
#include "wcodecfs/virtual_file.h"

namespace wcodecfs {

// A stored regular file handed to an adapter.
struct StoredFile {
  int fd = -1;            // O_RDONLY, opened O_NOFOLLOW relative to its directory; the adapter may dup it
  struct stat st {};      // fstat(fd)
  std::string path;       // store-relative path, for messages ("sub/x.wcodec")
  std::string abs_path;   // absolute path, used only where /proc/self/fd is unavailable
  uint64_t source_id = 0; // cache key for its chunks (see ChunkSource); 0 = fresh
};

class StoreAdapter {
 public:
  virtual ~StoreAdapter() = default;
  virtual const char* kind() const = 0;
  // The names under which a stored regular file called `stored` is
  // presented; empty when this adapter does not take the file.
  virtual std::vector<std::string> presented_names(std::string_view stored) const = 0;
  // The stored names that could be presented as `name` (the inverse map).
  virtual std::vector<std::string> stored_names(std::string_view name) const = 0;
  // Builds the virtual file `name` of `file`. Decodes nothing.
  virtual Result<std::shared_ptr<const VirtualFile>> build(const StoredFile& file, std::string_view name) const = 0;
};

class WcodecAdapter final : public StoreAdapter {
 public:
  const char* kind() const override { return "wcodec"; }
  std::vector<std::string> presented_names(std::string_view stored) const override;
  std::vector<std::string> stored_names(std::string_view name) const override;
  Result<std::shared_ptr<const VirtualFile>> build(const StoredFile& file, std::string_view name) const override;
};

// A plain stored file presented unchanged: one passthrough extent of `size`
// bytes (the size at open; reads past a shrunk end are short).
Result<std::shared_ptr<const VirtualFile>> make_passthrough_file(std::shared_ptr<const BackingFile> file, uint64_t size);

// In-memory bytes as a file (the stats snapshot).
Result<std::shared_ptr<const VirtualFile>> make_inline_file(std::string name, std::vector<uint8_t> bytes);

// The default adapter set of a mount.
std::vector<std::shared_ptr<const StoreAdapter>> default_adapters();

}  // namespace wcodecfs
