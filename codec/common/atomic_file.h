// codec/common/atomic_file.h — a file written under a temporary name and
// renamed over its path once complete and flushed (the encoder's output,
// Reader::decode_to_file), and errno messages.
// Thread-safety: an AtomicFile is used by one thread at a time.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "wcodec/status.h"

namespace wcodec {

inline std::string errno_msg(const std::string& what) { return what + ": " + std::strerror(errno); }

// A file written under a temporary name next to `path` and renamed over it
// once complete and flushed: readers of `path` never see it half-written.
// Dropped without commit(), the temporary file is removed.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp." + std::to_string(::getpid())) {}
  ~AtomicFile() {
    if (fd_ >= 0) {
      ::close(fd_);
      ::unlink(tmp_.c_str());
    }
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  Status open() {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    return fd_ < 0 ? Status::IOError(errno_msg("cannot create " + tmp_)) : Status::OK();
  }
  Status append(const uint8_t* p, size_t n) {
    for (size_t put = 0; put < n;) {
      const ssize_t r = ::write(fd_, p + put, n - put);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return Status::IOError(errno_msg("cannot write " + tmp_));
      put += static_cast<size_t>(r);
    }
    return Status::OK();
  }
  int fd() const { return fd_; }
  const std::string& temp_path() const { return tmp_; }
  // Flushes, renames over `path` and flushes the directory.
  Status commit() {
    const int fd = fd_;
    fd_ = -1;
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
      Status s = Status::IOError(errno_msg("cannot flush " + tmp_));
      ::unlink(tmp_.c_str());
      return s;
    }
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
      Status s = Status::IOError(errno_msg("cannot rename " + tmp_ + " to " + path_));
      ::unlink(tmp_.c_str());
      return s;
    }
    const size_t slash = path_.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path_.substr(0, slash));
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
    return Status::OK();
  }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};

}  // namespace wcodec
