// codec/common/bytes.h — little-endian byte writing and bounded reading.
//
// ByteReader never reads past its end: every getter reports failure through
// ok() (sticky), so parsers check once after a group of reads and then name
// the field that was truncated. Thread-safety: instances are not shared.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace wcodec {

class ByteWriter {
 public:
  std::vector<uint8_t>& buf() { return b_; }
  const std::vector<uint8_t>& buf() const { return b_; }
  size_t size() const { return b_.size(); }
  void u8(uint8_t v) { b_.push_back(v); }
  void u16(uint16_t v) { le(v, 2); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void varint(uint64_t v) {
    while (v >= 0x80) {
      b_.push_back(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    b_.push_back(static_cast<uint8_t>(v));
  }
  void bytes(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b_.insert(b_.end(), c, c + n);
  }
  void str(std::string_view s) {
    varint(s.size());
    bytes(s.data(), s.size());
  }
  void pad_to(size_t align) {
    while (b_.size() % align) b_.push_back(0);
  }
  void put_u32_at(size_t pos, uint32_t v) {
    for (int i = 0; i < 4; ++i) b_[pos + i] = static_cast<uint8_t>(v >> (8 * i));
  }
  void put_u64_at(size_t pos, uint64_t v) {
    for (int i = 0; i < 8; ++i) b_[pos + i] = static_cast<uint8_t>(v >> (8 * i));
  }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> b_;
};

class ByteReader {
 public:
  ByteReader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool ok() const { return ok_; }
  size_t pos() const { return pos_; }
  size_t remaining() const { return ok_ ? n_ - pos_ : 0; }
  const uint8_t* cur() const { return p_ + pos_; }
  uint8_t u8() { return static_cast<uint8_t>(le(1)); }
  uint16_t u16() { return static_cast<uint16_t>(le(2)); }
  uint32_t u32() { return static_cast<uint32_t>(le(4)); }
  uint64_t u64() { return le(8); }
  int32_t i32() { return static_cast<int32_t>(u32()); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (!need(1)) return 0;
      uint8_t c = p_[pos_++];
      v |= static_cast<uint64_t>(c & 0x7f) << shift;
      if (!(c & 0x80)) {
        if (shift == 63 && c > 1) ok_ = false;  // overflow of 64 bits
        return v;
      }
    }
    ok_ = false;
    return 0;
  }
  // Returns a pointer to n bytes and advances, or nullptr (and !ok()).
  const uint8_t* take(size_t n) {
    if (!need(n)) return nullptr;
    const uint8_t* r = p_ + pos_;
    pos_ += n;
    return r;
  }
  // A length-prefixed string of at most max_len bytes.
  std::string str(size_t max_len) {
    uint64_t len = varint();
    if (!ok_ || len > max_len) {
      ok_ = false;
      return {};
    }
    const uint8_t* s = take(len);
    return s ? std::string(reinterpret_cast<const char*>(s), len) : std::string();
  }
  void fail() { ok_ = false; }

 private:
  bool need(size_t n) {
    if (!ok_ || n > n_ - pos_) {
      ok_ = false;
      return false;
    }
    return true;
  }
  uint64_t le(int n) {
    if (!need(n)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p_[pos_ + i]) << (8 * i);
    pos_ += n;
    return v;
  }
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  bool ok_ = true;
};

inline uint32_t load_u32le(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t load_u64le(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace wcodec
