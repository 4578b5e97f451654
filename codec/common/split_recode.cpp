// codec/common/split_recode.cpp — recoded split streams (format 2.7,
// docs/wcodec-format.md §8.6). See split_recode.h.
//
// Thread-safety: pure functions over their arguments.
#include "split_recode.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace wcodec {

namespace {

// The exact value of fp16 bits (every fp16 value is a float32 value): a
// subnormal m x 2^-24 is a product of exact floats (m < 1024, a power of
// two), so no library call is needed.
inline float f16_value(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16, e = (h >> 10) & 31, m = h & 1023;
  if (e == 0) {
    const float v = static_cast<float>(m) * 0x1p-24f;
    return sign ? -v : v;
  }
  const uint32_t u = sign | (e == 31 ? 0x7f800000u : (e + 112) << 23) | (m << 13);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

uint8_t zero_shift_of(uint16_t d_bits, uint16_t m_bits) {
  const float d = f16_value(d_bits), m = f16_value(m_bits);
  // Without branches on the values (they vary from block to block): an
  // invalid d or m divides by 1 and is then replaced by zr 8. Below 0.5 (or
  // NaN) z counts as 0, from 14.5 on as 14.5; in [0.5, 14.5) z + 0.5 is
  // positive, so truncation is floor.
  const bool valid = std::isfinite(d) && d > 0 && std::isfinite(m);
  const float z = -m / (valid ? d : 1.0f);  // may be ±inf for a tiny d
  const float zc = z >= 0.5f ? std::min(z, 14.5f) : 0.0f;
  const uint32_t zr = valid ? static_cast<uint32_t>(zc + 0.5f) : 8u;
  return static_cast<uint8_t>((8 - zr) & 15);
}

void zero_shifts_of(const uint8_t* blocks, uint64_t n, uint32_t block_bytes, uint32_t d_off, uint32_t m_off,
                    uint8_t* shifts) {
  for (uint64_t b = 0; b < n; ++b) {
    const uint8_t* blk = blocks + b * block_bytes;
    shifts[b] = zero_shift_of(static_cast<uint16_t>(blk[d_off] | blk[d_off + 1] << 8),
                              static_cast<uint16_t>(blk[m_off] | blk[m_off + 1] << 8));
  }
}

void rotate_nibbles(uint8_t* p, uint32_t n, uint8_t shift, bool forward) {
  const uint8_t s = forward ? (shift & 15) : ((16 - shift) & 15);
  if (s == 0) return;
  // Eight bytes at a time: each nibble plus s stays below 32, within its
  // byte's lane once masked.
  constexpr uint64_t kLo = 0x0f0f0f0f0f0f0f0full;
  const uint64_t add = 0x0101010101010101ull * s;
  uint32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x;
    std::memcpy(&x, p + i, 8);
    x = (((x & kLo) + add) & kLo) | (((((x >> 4) & kLo) + add) & kLo) << 4);
    std::memcpy(p + i, &x, 8);
  }
  for (; i < n; ++i)
    p[i] = static_cast<uint8_t>(((p[i] + s) & 15) | ((((p[i] >> 4) + s) & 15) << 4));
}

void unrotate_blocks(uint8_t* p, uint64_t blocks, uint32_t n, const uint8_t* shifts) {
  if (n != 16) {
    for (uint64_t b = 0; b < blocks; ++b) rotate_nibbles(p + b * n, n, shifts[b], false);
    return;
  }
  // 16-byte blocks (Q4_1's codes): two words a block, every block rotated
  // (a shift of 0 adds 0), without a call or a branch per block.
  constexpr uint64_t kLo = 0x0f0f0f0f0f0f0f0full;
  for (uint64_t b = 0; b < blocks; ++b, p += 16) {
    const uint64_t add = 0x0101010101010101ull * ((16 - shifts[b]) & 15);
    uint64_t x[2];
    std::memcpy(x, p, 16);
    for (uint64_t& w : x) w = (((w & kLo) + add) & kLo) | (((((w >> 4) & kLo) + add) & kLo) << 4);
    std::memcpy(p, x, 16);
  }
}

uint16_t f16_to_bf16_exact(uint16_t h) {
  const uint16_t sign = h & 0x8000;
  const uint32_t e = (h >> 10) & 31, m = (h & 1023) >> 3;  // 7 mantissa bits
  if (e == 31) return static_cast<uint16_t>(sign | 0x7f80 | m);
  if (e != 0) return static_cast<uint16_t>(sign | ((e + 112) << 7) | m);
  if (m == 0) return sign;
  // A subnormal fp16: m × 2^-21 with m in 1..127, normalized for bf16.
  uint32_t p = 0;
  while ((m >> (p + 1)) != 0) ++p;  // m = 1.f × 2^p
  return static_cast<uint16_t>(sign | ((p + 106) << 7) | ((m << (7 - p)) & 127));
}

bool bf16_to_f16_exact(uint16_t b, uint16_t* h) {
  const uint16_t sign = b & 0x8000;
  const uint32_t e = (b >> 7) & 255, m = b & 127;
  if (e == 255) {
    *h = static_cast<uint16_t>(sign | 0x7c00 | (m << 3));
  } else if (e == 0) {
    if (m) return false;  // bf16 subnormals are below fp16's range
    *h = sign;
  } else if (e >= 113 && e <= 142) {
    *h = static_cast<uint16_t>(sign | ((e - 112) << 10) | (m << 3));
  } else if (e >= 106 && e <= 112) {
    // fp16 subnormal j × 2^-21 (j < 128): the bits below 2^-21 must be zero.
    const uint32_t p = e - 106, full = (128 | m);  // value = full × 2^(p - 7 - 21)
    if (full & ((1u << (7 - p)) - 1)) return false;
    const uint32_t j = full >> (7 - p);
    if (j >= 128) return false;  // 2^-14 and up are normal (e >= 113)
    *h = static_cast<uint16_t>(sign | (j << 3));
  } else {
    return false;
  }
  return true;
}

bool f16_low3_zero(const uint8_t* p, uint64_t n) {
  uint8_t acc = 0;
  for (uint64_t i = 0; i < n; i += 2) acc |= p[i];
  return (acc & 7) == 0;
}

void f16_to_bf16_inplace(uint8_t* p, uint64_t n) {
  for (uint64_t i = 0; i + 1 < n; i += 2) {
    const uint16_t b = f16_to_bf16_exact(static_cast<uint16_t>(p[i] | p[i + 1] << 8));
    p[i] = static_cast<uint8_t>(b);
    p[i + 1] = static_cast<uint8_t>(b >> 8);
  }
}

Status bf16_to_f16_inplace(uint8_t* p, uint64_t n, const std::string& what) {
  for (uint64_t i = 0; i + 1 < n; i += 2) {
    const uint16_t b = static_cast<uint16_t>(p[i] | p[i + 1] << 8);
    uint16_t h;
    if (!bf16_to_f16_exact(b, &h)) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%04x", b);
      return Status::Corruption(what + ": recoded bf16 value " + hex + " of element " + std::to_string(i / 2) +
                                " is no fp16 value with 3 low zero mantissa bits");
    }
    p[i] = static_cast<uint8_t>(h);
    p[i + 1] = static_cast<uint8_t>(h >> 8);
  }
  return Status::OK();
}

void q3_codes_unpack(const uint8_t* in, uint64_t blocks, uint8_t* codes) {
  for (uint64_t b = 0; b < blocks; ++b, in += kQ3StreamBytes, codes += kQ3Codes) {
    const uint8_t* hm = in;
    const uint8_t* qs = in + 32;
    for (uint32_t h = 0; h < 2; ++h)
      for (uint32_t j = 0; j < 4; ++j) {
        uint8_t* c = codes + 128 * h + 32 * j;
        const uint32_t hs = 4 * h + j, ls = 2 * j;
        for (uint32_t l = 0; l < 32; ++l)
          c[l] = static_cast<uint8_t>(((qs[32 * h + l] >> ls) & 3) | (((hm[l] >> hs) & 1) << 2));
      }
  }
}

Status q3_codes_pack(const uint8_t* codes, uint64_t blocks, uint8_t* out, const std::string& what) {
  // Eight elements l..l+7 at a time, one per byte lane of a 64-bit word
  // (every shifted field stays inside its lane once masked).
  constexpr uint64_t k1 = 0x0101010101010101ull, k3 = 0x0303030303030303ull;
  auto load = [](const uint8_t* p) {
    uint64_t x;
    std::memcpy(&x, p, 8);
    return x;
  };
  for (uint64_t b = 0; b < blocks; ++b, out += kQ3StreamBytes, codes += kQ3Codes) {
    uint64_t bad = 0;
    for (uint32_t l = 0; l < 32; l += 8) {
      uint64_t hm = 0;
      for (uint32_t h = 0; h < 2; ++h) {
        const uint8_t* c = codes + 128 * h + l;
        const uint64_t x0 = load(c), x1 = load(c + 32), x2 = load(c + 64), x3 = load(c + 96);
        bad |= x0 | x1 | x2 | x3;
        const uint64_t qs = (x0 & k3) | (x1 & k3) << 2 | (x2 & k3) << 4 | (x3 & k3) << 6;
        std::memcpy(out + 32 + 32 * h + l, &qs, 8);
        hm |= ((x0 >> 2) & k1) << (4 * h) | ((x1 >> 2) & k1) << (4 * h + 1) | ((x2 >> 2) & k1) << (4 * h + 2) |
              ((x3 >> 2) & k1) << (4 * h + 3);
      }
      std::memcpy(out + l, &hm, 8);
    }
    if (bad & 0xf8f8f8f8f8f8f8f8ull) {
      for (uint32_t e = 0; e < kQ3Codes; ++e)
        if (codes[e] > 7)
          return Status::Corruption(what + ": recoded 3-bit code " + std::to_string(codes[e]) + " of element " +
                                    std::to_string(b * kQ3Codes + e) + " (allowed 0..7)");
    }
  }
  return Status::OK();
}

bool zero_pos_split(const uint8_t* in, uint64_t groups, uint8_t* pos, uint8_t* rest) {
  uint8_t codes[kZpCodes];
  for (uint64_t g = 0; g < groups; ++g, in += kZpGroupBytes, rest += kZpCodes - 1) {
    for (uint32_t j = 0; j < kZpGroupBytes; ++j) {
      codes[j] = in[j] & 15;
      codes[j + kZpGroupBytes] = in[j] >> 4;
    }
    uint32_t p = 0;
    while (p < kZpCodes && codes[p] != 0) ++p;
    if (p == kZpCodes) return false;
    pos[g] = static_cast<uint8_t>(p);
    std::memcpy(rest, codes, p);
    std::memcpy(rest + p, codes + p + 1, kZpCodes - 1 - p);
  }
  return true;
}

Status zero_pos_join(const uint8_t* pos, const uint8_t* rest, uint64_t groups, uint8_t* out,
                     const std::string& what, ZeroPosJoinFn join) {
  // A group the vector join refuses is found (and named) by the portable
  // loop, which writes every group again.
  if (join && join(pos, rest, groups, out)) return Status::OK();
  uint8_t codes[kZpCodes];
  for (uint64_t g = 0; g < groups; ++g, rest += kZpCodes - 1, out += kZpGroupBytes) {
    const uint32_t p = pos[g];
    if (p >= kZpCodes)
      return Status::Corruption(what + ": zero position " + std::to_string(p) + " of group " + std::to_string(g) +
                                " (allowed 0..31)");
    // Fixed-size, branch-free steps on four 64-bit words of 8 codes (the
    // position varies from group to group; loops that end at it were
    // mispredicted once a group): the codes with the 0 inserted at p, and
    // the rules checked at once (before p: codes 1..15, p being the first
    // 0; after: 0..15). Little-endian words: byte e of the group is byte
    // e % 8 of word e / 8.
    bool bad = false;
    if constexpr (std::endian::native == std::endian::little) {
      constexpr uint64_t kLo7 = 0x7f7f7f7f7f7f7f7full, kHi4 = 0xf0f0f0f0f0f0f0f0ull;
      uint64_t cur[4] = {0, 0, 0, 0};
      std::memcpy(cur, rest, kZpCodes - 1);  // byte 31: 0
      uint64_t w[4];
      for (uint32_t k = 0; k < 4; ++k) {
        const uint32_t nb = p > 8 * k ? (p - 8 * k < 8 ? p - 8 * k : 8) : 0;  // bytes of word k before p
        const uint64_t before = nb == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * nb)) - 1;
        const uint64_t at = p / 8 == k ? uint64_t{0xff} << (8 * (p % 8)) : 0;
        const uint64_t prev = cur[k] << 8 | (k ? cur[k - 1] >> 56 : 0);
        w[k] = (cur[k] & before) | (prev & ~(before | at));
        // A byte above 15; a zero byte before p (exact per-byte zero test).
        const uint64_t zero = ~(((cur[k] & kLo7) + kLo7) | cur[k] | kLo7);
        bad |= (cur[k] & kHi4) != 0 || (zero & before) != 0;
      }
      // Codes j and j + 16 of a byte: the low nibbles from words 0, 1, the
      // high ones from words 2, 3 (every code below 16 once checked).
      const uint64_t o[2] = {w[0] | w[2] << 4, w[1] | w[3] << 4};
      if (!bad) {
        std::memcpy(out, o, kZpGroupBytes);
        continue;
      }
    } else {
      uint8_t cur[kZpCodes], prev[kZpCodes];
      std::memcpy(cur, rest, kZpCodes - 1);
      cur[kZpCodes - 1] = 0;
      prev[0] = 0;
      std::memcpy(prev + 1, rest, kZpCodes - 1);
      for (uint32_t e = 0; e < kZpCodes; ++e) {
        const uint8_t before = e < p ? 0xff : 0, after = e > p ? 0xff : 0;
        codes[e] = static_cast<uint8_t>((cur[e] & before) | (prev[e] & after));
        bad |= cur[e] > 15 || (cur[e] == 0 && before);
      }
    }
    if (bad) {
      for (uint32_t e = 0; e < kZpCodes - 1; ++e)
        if (rest[e] > 15 || (e < p && rest[e] == 0))
          return Status::Corruption(what + ": recoded 4-bit code " + std::to_string(rest[e]) + " of group " +
                                    std::to_string(g) + " element " + std::to_string(e < p ? e : e + 1) +
                                    (rest[e] > 15 ? " (allowed 0..15)"
                                                  : " (allowed 1..15 before the group's zero position " +
                                                        std::to_string(p) + ")"));
      return Status::Internal(what + ": group " + std::to_string(g) + " flagged without a broken rule");
    }
    for (uint32_t j = 0; j < kZpGroupBytes; ++j)
      out[j] = static_cast<uint8_t>(codes[j] | codes[j + kZpGroupBytes] << 4);
  }
  return Status::OK();
}

}  // namespace wcodec
