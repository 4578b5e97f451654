// codec/common/file_read.h — reading the files the codec opens itself: a
// regular file opened read-only with its size, and exact reads at an
// offset that retry short reads and EINTR. Every error names the file and
// the offset.
// Thread-safety: pread_exact may run on one descriptor from many threads;
// a ReadFile is owned by one object.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "wcodec/status.h"

namespace wcodec {

// n bytes at off of fd into out. A failed read is an IOError; a file that
// ends first (it shrank since its size was taken) is a Status of code
// `on_short`. `what` names the file in both.
inline Status pread_exact(int fd, uint64_t off, uint64_t n, uint8_t* out, const std::string& what,
                          Code on_short = Code::kIOError) {
  constexpr uint64_t kMaxOff = static_cast<uint64_t>(std::numeric_limits<off_t>::max());
  if (n > kMaxOff || off > kMaxOff - n)
    return Status::IOError(what + ": read of " + std::to_string(n) + " bytes at offset " + std::to_string(off) +
                           " is past the largest file offset");
  uint64_t got = 0;
  while (got < n) {
    const uint64_t left = n - got;
    const size_t step = left < (uint64_t{1} << 30) ? static_cast<size_t>(left) : size_t{1} << 30;
    const ssize_t r = ::pread(fd, out + got, step, static_cast<off_t>(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0)
      return Status::IOError(what + ": read at offset " + std::to_string(off + got) + " failed: " +
                             std::strerror(errno));
    if (r == 0)
      return Status(on_short, what + ": file shrank while reading: end of file at offset " +
                                  std::to_string(off + got) + ", " + std::to_string(n) + " bytes wanted at " +
                                  std::to_string(off));
    got += static_cast<uint64_t>(r);
  }
  return Status::OK();
}

// A regular file opened read-only, and its size when opened; closed with
// the object.
class ReadFile {
 public:
  ReadFile() = default;
  ReadFile(ReadFile&& o) noexcept : fd_(std::exchange(o.fd_, -1)), size_(o.size_) {}
  ReadFile& operator=(ReadFile&& o) noexcept {
    if (this != &o) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(o.fd_, -1);
      size_ = o.size_;
    }
    return *this;
  }
  ReadFile(const ReadFile&) = delete;
  ReadFile& operator=(const ReadFile&) = delete;
  ~ReadFile() {
    if (fd_ >= 0) ::close(fd_);
  }

  // path, or an IOError naming it (cannot open, cannot stat, not a regular
  // file).
  static Result<ReadFile> open(const std::string& path) {
    ReadFile f;
    f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.fd_ < 0) return Status::IOError(path + ": open failed: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(f.fd_, &st) != 0) return Status::IOError(path + ": stat failed: " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return Status::IOError(path + ": not a regular file");
    f.size_ = static_cast<uint64_t>(st.st_size);
    return f;
  }

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace wcodec
