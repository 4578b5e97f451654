// tests/fuzz/fuzz_util.h — helpers shared by the fuzz targets.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

namespace wcfuzz {

// An anonymous in-memory file holding `bytes`, for Reader::open(memfd_path(fd)).
// Returns the descriptor (the caller closes it), or -1 on failure.
inline int memfd_with(const std::vector<uint8_t>& bytes) {
  const int fd = memfd_create("fuzz.wcodec", 0);
  if (fd < 0) return -1;
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t w = write(fd, bytes.data() + done, bytes.size() - done);
    if (w <= 0) {
      close(fd);
      return -1;
    }
    done += static_cast<size_t>(w);
  }
  return fd;
}

inline std::string memfd_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

}  // namespace wcfuzz
