// fs/src/fs_util.h — private to fs/: small helpers the filesystem core, the
// staging tree and the encode queue share (an owned file descriptor, entry
// names, path joining, dirent types).
#pragma once

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <string>
#include <string_view>

#include "wcodecfs/fs_status.h"

namespace wcodecfs {

// Whether name can be a directory entry: not empty, "." or "..", at most
// NAME_MAX bytes, no '/' or NUL (Invalid / kNameTooLong naming why).
inline Status check_name(std::string_view name) {
  if (name.empty() || name == "." || name == "..")
    return Status::Invalid("name \"" + std::string(name) + "\" is not an entry name");
  if (name.size() > NAME_MAX)
    return Status(Code::kNameTooLong, "name of " + std::to_string(name.size()) + " bytes (NAME_MAX " +
                                          std::to_string(NAME_MAX) + ")");
  if (name.find('/') != std::string_view::npos || name.find('\0') != std::string_view::npos)
    return Status::Invalid("name contains '/' or NUL");
  return Status::OK();
}

// "dir/name", or "name" at the top (dir empty).
inline std::string join(const std::string& dir, std::string_view name) {
  return dir.empty() ? std::string(name) : dir + "/" + std::string(name);
}

// The file type bits of a dirent's d_type (0 when unknown).
inline mode_t dtype_to_mode(unsigned char t) {
  switch (t) {
    case DT_DIR: return S_IFDIR;
    case DT_REG: return S_IFREG;
    case DT_LNK: return S_IFLNK;
    case DT_FIFO: return S_IFIFO;
    case DT_SOCK: return S_IFSOCK;
    case DT_CHR: return S_IFCHR;
    case DT_BLK: return S_IFBLK;
    default: return 0;
  }
}

// An owned file descriptor (closed on destruction).
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership.
  int release() {
    const int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

}  // namespace wcodecfs
