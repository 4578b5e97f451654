// codec/common/cawsf_i.h — what the CAWSF reader, the shard decoders and the
// writer share inside the codec (wcodec/cawsf.h is the public API):
// little-endian loads and stores, the bounded decompressors and XXH3.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "wcodec/status.h"

namespace wcodec::cawsf::detail {

inline uint16_t ld16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t ld32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
inline uint64_t ld64(const uint8_t* p) { return ld32(p) | (static_cast<uint64_t>(ld32(p + 4)) << 32); }
inline float ldf32(const uint8_t* p) {
  const uint32_t u = ld32(p);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline void put16(std::vector<uint8_t>& o, uint16_t v) {
  o.push_back(static_cast<uint8_t>(v));
  o.push_back(static_cast<uint8_t>(v >> 8));
}
inline void put32(std::vector<uint8_t>& o, uint32_t v) {
  for (int i = 0; i < 4; ++i) o.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void put64(std::vector<uint8_t>& o, uint64_t v) {
  for (int i = 0; i < 8; ++i) o.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void putf32(std::vector<uint8_t>& o, float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  put32(o, u);
}

uint64_t xxh3(const uint8_t* p, size_t n);
std::string hex16(uint64_t v);  // 16 lowercase hex digits

// Decompresses a zstd (kind 1) or LZ4 frame (kind 2) stream; more than `cap`
// output bytes, a truncated or malformed stream, or trailing bytes are
// kCorruption naming `field`. kind 0 copies.
Result<std::vector<uint8_t>> decompress(int kind, const uint8_t* src, size_t n, uint64_t cap,
                                        const std::string& field);
Result<std::vector<uint8_t>> compress(int kind, const uint8_t* src, size_t n, int zstd_level);

}  // namespace wcodec::cawsf::detail
