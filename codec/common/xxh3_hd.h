// codec/common/xxh3_hd.h — XXH3-64 (seed 0, default secret) for host and CUDA
// device: the chunk checksum of the .wcodec container, computed where the
// chunk was decoded. The host build checks it against libxxhash's
// XXH3_64bits over every length class (tests/test_xxh3_hd.cpp).
//
// The secret is passed in (device code reads a __constant__ copy made from
// WCODEC_XXH3_SECRET_BYTES; host code uses kXxh3Secret).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hd.h"

namespace wcodec {

// The 192-byte default secret of XXH3 (part of the XXH3 specification).
#define WCODEC_XXH3_SECRET_BYTES                                                                                      \
  {0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c, 0xde, 0xd4, 0x6d,  \
   0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f, 0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0,  \
   0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21, 0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0,  \
   0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c, 0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b,  \
   0x1b, 0x53, 0x2e, 0xa3, 0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac,  \
   0xd8, 0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d, 0x8a, 0x51,  \
   0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64, 0xea, 0xc5, 0xac, 0x83, 0x34,  \
   0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb, 0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49,  \
   0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e, 0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8,  \
   0xd1, 0x7a, 0xd0, 0x31, 0xce, 0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b,  \
   0x40, 0x7e}

inline constexpr size_t kXxh3SecretSize = 192;
#ifndef __CUDA_ARCH__
inline constexpr uint8_t kXxh3Secret[kXxh3SecretSize] = WCODEC_XXH3_SECRET_BYTES;
#endif

namespace xxh3_detail {

inline constexpr uint64_t kP32_1 = 0x9E3779B1u, kP32_2 = 0x85EBCA77u, kP32_3 = 0xC2B2AE3Du;
inline constexpr uint64_t kP64_1 = 0x9E3779B185EBCA87ull, kP64_2 = 0xC2B2AE3D27D4EB4Full,
                          kP64_3 = 0x165667B19E3779F9ull, kP64_4 = 0x85EBCA77C2B2AE63ull,
                          kP64_5 = 0x27D4EB2F165667C5ull;
inline constexpr uint64_t kMx1 = 0x165667919E3779F9ull, kMx2 = 0x9FB21C651E98DF25ull;

WC_HD inline uint64_t r64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
WC_HD inline uint32_t r32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}
WC_HD inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
WC_HD inline uint64_t swap64(uint64_t x) {
  uint64_t r = 0;
  for (int i = 0; i < 8; ++i) r = (r << 8) | ((x >> (8 * i)) & 0xFF);
  return r;
}
WC_HD inline uint64_t mul_fold(uint64_t a, uint64_t b) {
#ifdef __CUDA_ARCH__
  return (a * b) ^ __umul64hi(a, b);
#else
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
#endif
}
WC_HD inline uint64_t avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= kMx1;
  return h ^ (h >> 32);
}
WC_HD inline uint64_t avalanche64(uint64_t h) {
  h ^= h >> 33;
  h *= kP64_2;
  h ^= h >> 29;
  h *= kP64_3;
  return h ^ (h >> 32);
}
WC_HD inline uint64_t rrmxmx(uint64_t h, uint64_t len) {
  h ^= rotl(h, 49) ^ rotl(h, 24);
  h *= kMx2;
  h ^= (h >> 35) + len;
  h *= kMx2;
  return h ^ (h >> 28);
}
WC_HD inline uint64_t mix16(const uint8_t* in, const uint8_t* sec) {
  return mul_fold(r64(in) ^ r64(sec), r64(in + 8) ^ r64(sec + 8));
}
WC_HD inline void accumulate_stripe(uint64_t* acc, const uint8_t* in, const uint8_t* sec) {
  for (int i = 0; i < 8; ++i) {
    const uint64_t v = r64(in + 8 * i);
    const uint64_t k = v ^ r64(sec + 8 * i);
    acc[i ^ 1] += v;
    acc[i] += (k & 0xFFFFFFFFull) * (k >> 32);
  }
}
WC_HD inline void scramble(uint64_t* acc, const uint8_t* sec) {
  for (int i = 0; i < 8; ++i) {
    uint64_t a = acc[i];
    a ^= a >> 47;
    a ^= r64(sec + 8 * i);
    acc[i] = a * kP32_1;
  }
}

}  // namespace xxh3_detail

// XXH3_64bits(p, n) with seed 0; `secret` is the 192-byte default secret.
WC_HD inline uint64_t xxh3_64(const uint8_t* p, size_t n, const uint8_t* secret) {
  using namespace xxh3_detail;
  const uint8_t* s = secret;
  const uint64_t len = n;
  if (n <= 16) {
    if (n > 8) {
      const uint64_t lo = r64(p) ^ (r64(s + 24) ^ r64(s + 32));
      const uint64_t hi = r64(p + n - 8) ^ (r64(s + 40) ^ r64(s + 48));
      return avalanche(len + swap64(lo) + hi + mul_fold(lo, hi));
    }
    if (n >= 4) {
      const uint64_t in = static_cast<uint64_t>(r32(p + n - 4)) + (static_cast<uint64_t>(r32(p)) << 32);
      return rrmxmx(in ^ (r64(s + 8) ^ r64(s + 16)), len);
    }
    if (n > 0) {
      const uint32_t c = static_cast<uint32_t>(p[0]) << 16 | static_cast<uint32_t>(p[n >> 1]) << 24 |
                         static_cast<uint32_t>(p[n - 1]) | static_cast<uint32_t>(n) << 8;
      return avalanche64(static_cast<uint64_t>(c) ^ static_cast<uint64_t>(r32(s) ^ r32(s + 4)));
    }
    return avalanche64(r64(s + 56) ^ r64(s + 64));
  }
  if (n <= 128) {
    uint64_t acc = len * kP64_1;
    if (n > 32) {
      if (n > 64) {
        if (n > 96) {
          acc += mix16(p + 48, s + 96);
          acc += mix16(p + n - 64, s + 112);
        }
        acc += mix16(p + 32, s + 64);
        acc += mix16(p + n - 48, s + 80);
      }
      acc += mix16(p + 16, s + 32);
      acc += mix16(p + n - 32, s + 48);
    }
    acc += mix16(p, s);
    acc += mix16(p + n - 16, s + 16);
    return avalanche(acc);
  }
  if (n <= 240) {
    uint64_t acc = len * kP64_1;
    for (size_t i = 0; i < 8; ++i) acc += mix16(p + 16 * i, s + 16 * i);
    acc = avalanche(acc);
    const size_t rounds = n / 16;
    for (size_t i = 8; i < rounds; ++i) acc += mix16(p + 16 * i, s + 16 * (i - 8) + 3);
    acc += mix16(p + n - 16, s + 136 - 17);
    return avalanche(acc);
  }
  uint64_t acc[8] = {kP32_3, kP64_1, kP64_2, kP64_3, kP64_4, kP32_2, kP64_5, kP32_1};
  constexpr size_t kStripes = (kXxh3SecretSize - 64) / 8;  // per block
  constexpr size_t kBlock = 64 * kStripes;
  const size_t blocks = (n - 1) / kBlock;
  for (size_t b = 0; b < blocks; ++b) {
    for (size_t st = 0; st < kStripes; ++st) accumulate_stripe(acc, p + b * kBlock + st * 64, s + st * 8);
    scramble(acc, s + kXxh3SecretSize - 64);
  }
  const size_t last = ((n - 1) - kBlock * blocks) / 64;
  for (size_t st = 0; st < last; ++st) accumulate_stripe(acc, p + blocks * kBlock + st * 64, s + st * 8);
  accumulate_stripe(acc, p + n - 64, s + kXxh3SecretSize - 64 - 7);
  uint64_t h = len * kP64_1;
  for (int i = 0; i < 4; ++i) h += mul_fold(acc[2 * i] ^ r64(s + 11 + 16 * i), acc[2 * i + 1] ^ r64(s + 11 + 16 * i + 8));
  return avalanche(h);
}

// One half of a stripe's accumulation: the contributions of the four data
// words v (secret words key) to accumulators 4 * half .. 4 * half + 3,
// added to c.
WC_HD inline void xxh3_half_words(uint64_t* c, const uint64_t* v, const uint64_t* key) {
  for (uint32_t j = 0; j < 4; ++j) {
    const uint64_t k = v[j] ^ key[j];
    c[j ^ 1] += v[j];
    c[j] += (k & 0xFFFFFFFFull) * (k >> 32);
  }
}

// The same for the stripe at `in` with secret `sec`, both read here.
WC_HD inline void xxh3_stripe_half(uint64_t* c, const uint8_t* in, const uint8_t* sec, uint32_t half) {
  uint64_t v[4], k[4];
  for (uint32_t j = 0; j < 4; ++j) {
    v[j] = xxh3_detail::r64(in + 8 * (4 * half + j));
    k[j] = xxh3_detail::r64(sec + 8 * (4 * half + j));
  }
  xxh3_half_words(c, v, k);
}

// The four 8-byte words at p (little-endian). On the device, with `aligned`
// (p a multiple of 8), as two 16-byte loads or four 8-byte ones instead of
// 32 byte loads.
WC_HD inline void xxh3_load4(const uint8_t* p, bool aligned, uint64_t* v) {
#ifdef __CUDA_ARCH__
  if (aligned) {
    if (!(reinterpret_cast<uintptr_t>(p) & 15)) {
      const ulonglong2 a = reinterpret_cast<const ulonglong2*>(p)[0], b = reinterpret_cast<const ulonglong2*>(p)[1];
      v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
    } else {
      for (uint32_t j = 0; j < 4; ++j) v[j] = reinterpret_cast<const uint64_t*>(p)[j];
    }
    return;
  }
#else
  (void)aligned;
#endif
  for (uint32_t j = 0; j < 4; ++j) v[j] = xxh3_detail::r64(p + 8 * j);
}

// xxh3_64 computed by a lane group (lane_group.h); every lane gets the
// value. Inputs over 240 bytes: within a block of 16 stripes every
// accumulator only adds, so lane l takes stripe slot l / 2 and accumulators
// 4 * (l % 2) .. + 3, and the lanes' contributions are summed before the
// block's scramble. Shorter inputs: every lane hashes them alone.
// A lane's secret words (its stripe slot's, and the scramble's for its
// accumulators) are the same in every block, so they are read once into
// registers: on a GPU the secret sits in constant memory, which serves the
// lanes' different addresses one at a time.
template <class G>
WC_HD inline uint64_t xxh3_64_g(G& g, const uint8_t* p, size_t n, const uint8_t* secret) {
  using namespace xxh3_detail;
  if (n <= 240) return xxh3_64(p, n, secret);
  const uint8_t* s = secret;
  constexpr size_t kStripes = (kXxh3SecretSize - 64) / 8;  // per block
  constexpr size_t kBlock = 64 * kStripes;
  static_assert(2 * kStripes == 32, "two lanes of a 32-lane group per stripe of a block");
  typename G::template Lanes<uint64_t> a[4], c[4], key[4], skey[4];
  const bool aligned = !(reinterpret_cast<uintptr_t>(p) & 7);
  g.each([&](uint32_t l) {
    const uint64_t init[8] = {kP32_3, kP64_1, kP64_2, kP64_3, kP64_4, kP32_2, kP64_5, kP32_1};
    const uint32_t slot = l >> 1, h = l & 1;
    for (uint32_t j = 0; j < 4; ++j) {
      a[j][l] = init[4 * h + j];
      key[j][l] = r64(s + slot * 8 + 8 * (4 * h + j));
      skey[j][l] = r64(s + kXxh3SecretSize - 64 + 8 * (4 * h + j));
    }
  });
  const size_t blocks = (n - 1) / kBlock;
  const size_t last = ((n - 1) - kBlock * blocks) / 64;  // stripes of the last block before the final one
  for (size_t b = 0; b < blocks; ++b) {
    g.each([&](uint32_t l) {
      uint64_t cl[4] = {0, 0, 0, 0}, v[4], k[4];
      xxh3_load4(p + b * kBlock + (l >> 1) * 64 + 32 * (l & 1), aligned, v);
      for (uint32_t j = 0; j < 4; ++j) k[j] = key[j][l];
      xxh3_half_words(cl, v, k);
      for (uint32_t j = 0; j < 4; ++j) c[j][l] = cl[j];
    });
    for (uint32_t j = 0; j < 4; ++j) g.butterfly_add(c[j], 2);
    g.each([&](uint32_t l) {
      for (uint32_t j = 0; j < 4; ++j) {  // scramble
        uint64_t v = a[j][l] + c[j][l];
        v ^= v >> 47;
        v ^= skey[j][l];
        a[j][l] = v * kP32_1;
      }
    });
  }
  // The last block's stripes and the final stripe (secret offsets of its own).
  g.each([&](uint32_t l) {
    uint64_t cl[4] = {0, 0, 0, 0};
    const uint32_t slot = l >> 1;
    if (slot < last) xxh3_stripe_half(cl, p + blocks * kBlock + slot * 64, s + slot * 8, l & 1);
    else if (slot == last) xxh3_stripe_half(cl, p + n - 64, s + kXxh3SecretSize - 64 - 7, l & 1);
    for (uint32_t j = 0; j < 4; ++j) c[j][l] = cl[j];
  });
  for (uint32_t j = 0; j < 4; ++j) g.butterfly_add(c[j], 2);
  g.each([&](uint32_t l) {
    for (uint32_t j = 0; j < 4; ++j) a[j][l] += c[j][l];
  });
  // Merge: lanes 0 and 1 hold accumulators 0-3 and 4-7.
  typename G::template Lanes<uint64_t> part;
  g.each([&](uint32_t l) {
    const uint32_t h = l & 1;
    part[l] = l > 1 ? 0
                    : mul_fold(a[0][l] ^ r64(s + 11 + 32 * h), a[1][l] ^ r64(s + 11 + 32 * h + 8)) +
                          mul_fold(a[2][l] ^ r64(s + 11 + 32 * h + 16), a[3][l] ^ r64(s + 11 + 32 * h + 24));
  });
  g.butterfly_add(part, 1);
  return avalanche(static_cast<uint64_t>(n) * kP64_1 + part[0]);
}

}  // namespace wcodec
