// wcodecfs/fs_types.h — the values the filesystem core hands to its front
// ends and shares with the staging tree: node ids, entries, attribute
// changes, callers and open-file handles.
//
// Split from filesystem.h so that the staging tree (fs/src/staging.h), which
// the Filesystem owns, depends on these types and not on the Filesystem.
//
// Thread-safety: values, except FileHandle (shared between the FUSE layer
// and in-flight reads; its Readahead has its own lock).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "wcodecfs/virtual_file.h"

namespace wcodecfs {

using NodeId = uint64_t;

// The hidden store directory behind the staging tree; never presented.
inline constexpr const char* kStagingAreaName = ".wcodecfs-staging";

// Who asks for a modifying operation (new entries belong to them).
struct Caller {
  uid_t uid = 0;
  gid_t gid = 0;
};

// A setattr request: the fields flagged are changed.
struct AttrChange {
  bool set_mode = false, set_uid = false, set_gid = false, set_size = false;
  bool set_atime = false, set_mtime = false;  // with UTIME_NOW in tv_nsec for "now"
  mode_t mode = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  uint64_t size = 0;
  struct timespec atime {}, mtime {};
};

// How long the kernel may cache an entry or its attributes.
enum class Cacheability {
  kImmutable,  // virtual files of the store: cache for a long time
  kMutable,    // passthrough entries: may change behind the mount
  kVolatile,   // generated files (stats): never cache attributes
};

struct Entry {
  NodeId id = 0;
  struct stat attr {};
  Cacheability cache = Cacheability::kMutable;
};

struct DirEntry {
  std::string name;
  mode_t type = 0;  // S_IFDIR, S_IFREG, S_IFLNK, ... (type bits only)
  uint64_t ino = 0;
};

// An open file. Shared between the FUSE layer and in-flight reads.
class FileHandle {
 public:
  FileHandle(std::shared_ptr<const VirtualFile> f, uint64_t ra_max, bool keep_cache, bool direct_io)
      : file_(std::move(f)), ra_(ra_max), keep_cache_(keep_cache), direct_io_(direct_io) {}
  // A plain file of the staging tree opened for writing: reads and writes go
  // to `file`; `writer` is released (ending the writer's claim on the file
  // for the background encoder) when the handle is destroyed.
  FileHandle(std::shared_ptr<const VirtualFile> f, std::shared_ptr<const BackingFile> file,
             std::shared_ptr<void> writer)
      : file_(std::move(f)), ra_(0), keep_cache_(false), direct_io_(false), writable_(std::move(file)),
        writer_(std::move(writer)) {}
  const VirtualFile& file() const { return *file_; }
  // The backing file of a handle open for writing; null otherwise.
  const BackingFile* writable() const { return writable_.get(); }
  Readahead& readahead() { return ra_; }
  // Keep the kernel page cache across opens (immutable content).
  bool keep_cache() const { return keep_cache_; }
  // Bypass the page cache (generated content; such a file cannot be mmapped).
  bool direct_io() const { return direct_io_; }

 private:
  std::shared_ptr<const VirtualFile> file_;
  Readahead ra_;
  bool keep_cache_;
  bool direct_io_;
  std::shared_ptr<const BackingFile> writable_;
  std::shared_ptr<void> writer_;
};

}  // namespace wcodecfs
