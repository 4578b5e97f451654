// codec/common/checksums.h — the container's CRC32 (zlib's polynomial, over
// inputs of any size) and the hex form of digests for messages.
// Thread-safety: pure functions.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

namespace wcodec {

inline uint32_t crc32_of(const uint8_t* p, size_t n, uint32_t crc = 0) {
  while (n) {
    const uInt step = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = static_cast<uint32_t>(::crc32(crc, p, step));
    p += step;
    n -= step;
  }
  return crc;
}

inline std::string hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

}  // namespace wcodec
