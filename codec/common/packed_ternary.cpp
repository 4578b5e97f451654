// codec/common/packed_ternary.cpp — packed ternary weights and TQ2_0 blocks
// (see wcodec/packed_ternary.h and docs/packed-ternary.md).
// Thread-safety: pure functions; no shared state.
#include "wcodec/packed_ternary.h"

#include <cstdio>

namespace wcodec {

namespace {

std::string shape_str(const std::vector<uint64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

std::string hex2(uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", b);
  return buf;
}

// Byte offset of packed byte (row r, byte column j) of an out × ceil(in/4) matrix.
uint64_t byte_at(const PackedTernary& p, uint64_t r, uint64_t j) {
  return p.layout == TernaryLayout::kRowMajor ? r * p.packed_cols() + j : j * p.out_features + r;
}

}  // namespace

Result<PackedTernary> detect_packed_ternary(const std::vector<uint64_t>& shape, uint64_t out_features,
                                            uint64_t in_features, bool prefer_transposed, const std::string& what) {
  PackedTernary p;
  p.out_features = out_features;
  p.in_features = in_features;
  const uint64_t cols = p.packed_cols();
  const std::string want = " (expected [" + std::to_string(out_features) + ", " + std::to_string(cols) + "] or [" +
                           std::to_string(cols) + ", " + std::to_string(out_features) + "] for " +
                           std::to_string(out_features) + " x " + std::to_string(in_features) + " weights)";
  if (shape.size() != 2) return Status::Corruption(what + ": packed ternary shape " + shape_str(shape) + want);
  if (out_features > 0 && in_features == 0)
    return Status::Corruption(what + ": in_features 0 with out_features " + std::to_string(out_features));
  const bool row = shape[0] == out_features && shape[1] == cols;
  const bool tr = shape[0] == cols && shape[1] == out_features;
  if (!row && !tr) return Status::Corruption(what + ": packed ternary shape " + shape_str(shape) + want);
  p.layout = row && tr ? (prefer_transposed ? TernaryLayout::kTransposed : TernaryLayout::kRowMajor)
                       : (row ? TernaryLayout::kRowMajor : TernaryLayout::kTransposed);
  return p;
}

Status unpack_ternary(const uint8_t* packed, uint64_t n, const PackedTernary& p, int8_t* values,
                      const std::string& what) {
  if (n != p.nbytes())
    return Status::Corruption(what + ": " + std::to_string(n) + " packed bytes (expected " +
                              std::to_string(p.nbytes()) + " for " + std::to_string(p.out_features) + " x " +
                              std::to_string(p.in_features) + " weights)");
  static constexpr int8_t kValue[4] = {0, 1, -1, 0};
  const uint64_t cols = p.packed_cols();
  for (uint64_t r = 0; r < p.out_features; ++r) {
    for (uint64_t j = 0; j < cols; ++j) {
      const uint64_t off = byte_at(p, r, j);
      const uint8_t b = packed[off];
      for (uint64_t k = 0; k < 4; ++k) {
        const uint8_t code = (b >> (2 * k)) & 3;
        const uint64_t c = 4 * j + k;
        if (code == 3)
          return Status::Corruption(what + ": byte " + std::to_string(off) + " (" + hex2(b) +
                                    "): reserved code 11 for weight (" + std::to_string(r) + ", " +
                                    std::to_string(c) + ")");
        if (c >= p.in_features) {
          if (code != 0)
            return Status::Corruption(what + ": byte " + std::to_string(off) + " (" + hex2(b) + "): padding weight (" +
                                      std::to_string(r) + ", " + std::to_string(c) + ") is not 00");
          continue;
        }
        values[r * p.in_features + c] = kValue[code];
      }
    }
  }
  return Status::OK();
}

Result<std::vector<uint8_t>> pack_ternary(const int8_t* values, const PackedTernary& p, const std::string& what) {
  std::vector<uint8_t> out(static_cast<size_t>(p.nbytes()), 0);
  for (uint64_t r = 0; r < p.out_features; ++r) {
    for (uint64_t c = 0; c < p.in_features; ++c) {
      const int8_t v = values[r * p.in_features + c];
      if (v < -1 || v > 1)
        return Status::Invalid(what + ": weight (" + std::to_string(r) + ", " + std::to_string(c) + ") = " +
                               std::to_string(v) + " is not -1, 0 or +1");
      const uint8_t code = v == 1 ? 1 : v == -1 ? 2 : 0;
      out[byte_at(p, r, c / 4)] |= static_cast<uint8_t>(code << (2 * (c % 4)));
    }
  }
  return out;
}

Status ternary_row_to_tq2_0(const int8_t* row, uint64_t in, uint16_t d_f16, uint8_t* out, const std::string& what) {
  if (in % kTq2Block != 0)
    return Status::Invalid(what + ": row of " + std::to_string(in) + " weights is not a multiple of 256 (TQ2_0)");
  for (uint64_t b = 0; b < in / kTq2Block; ++b) {
    const int8_t* x = row + b * kTq2Block;
    uint8_t* y = out + b * kTq2BlockBytes;
    for (uint64_t h = 0; h < 2; ++h) {
      for (uint64_t m = 0; m < 32; ++m) {
        uint8_t q = 0;
        for (uint64_t k = 0; k < 4; ++k) {
          const int v = x[128 * h + m + 32 * k];
          if (v < -1 || v > 1)
            return Status::Invalid(what + ": weight " + std::to_string(b * kTq2Block + 128 * h + m + 32 * k) +
                                   " = " + std::to_string(v) + " is not -1, 0 or +1");
          q = static_cast<uint8_t>(q | (v + 1) << (2 * k));
        }
        y[32 * h + m] = q;
      }
    }
    y[64] = static_cast<uint8_t>(d_f16 & 0xFF);
    y[65] = static_cast<uint8_t>(d_f16 >> 8);
  }
  return Status::OK();
}

Status tq2_0_to_ternary_row(const uint8_t* blocks, uint64_t in, int8_t* row, uint16_t* d_f16,
                            const std::string& what) {
  if (in % kTq2Block != 0)
    return Status::Invalid(what + ": row of " + std::to_string(in) + " weights is not a multiple of 256 (TQ2_0)");
  for (uint64_t b = 0; b < in / kTq2Block; ++b) {
    const uint8_t* y = blocks + b * kTq2BlockBytes;
    const uint16_t d = static_cast<uint16_t>(y[64] | y[65] << 8);
    if (b == 0) *d_f16 = d;
    if (d != *d_f16)
      return Status::Corruption(what + ": block " + std::to_string(b) + " has scale " + std::to_string(d) +
                                ", block 0 " + std::to_string(*d_f16));
    for (uint64_t h = 0; h < 2; ++h)
      for (uint64_t m = 0; m < 32; ++m)
        for (uint64_t k = 0; k < 4; ++k) {
          const int q = (y[32 * h + m] >> (2 * k)) & 3;
          if (q == 3)
            return Status::Corruption(what + ": block " + std::to_string(b) + " byte " + std::to_string(32 * h + m) +
                                      ": code 3");
          row[b * kTq2Block + 128 * h + m + 32 * k] = static_cast<int8_t>(q - 1);
        }
  }
  return Status::OK();
}

}  // namespace wcodec
