// codec/decompress/chunk_decode_hwy_float_out-inl.h — the output stage of
// the avx2 path's float decoder (chunk_decode_hwy_float.cpp): lane-major
// steps to the chunk's raster order (8x8 transposes of 16- and 32-bit
// elements) and the raw mantissa bits ORed in.
//
// Why a file of its own: chunk_decode_hwy_float.cpp stays below the
// codec's file length limit (scripts/check_layering.py). This is a Highway
// "-inl" part: it has no include guard and is included once per Highway
// target from inside that file's HWY_NAMESPACE (in its AVX2 / NEON
// section), where hn, DU, VU, kN and the helpers it uses are defined. The
// transposes have a 256-bit form (AVX2: two 8x8 blocks per register) and a
// 128-bit one (NEON: 8x8 blocks of 16-bit, 4x4 of 32-bit elements).
// Thread-safety: pure functions over their arguments.

// Lane-major 16-bit elements -> the chunk's raster order (h x w, lanes of
// W x rows). Blocks of 8 steps of a lane row: each 128-bit block of 8
// lanes is transposed (three interleave stages) so that a lane's 8
// elements are one 16-byte store. A lane row's blocks go from the last to
// the first: a short last block is stored whole, its excess landing on the
// next lane's first columns, which that lane's first block (stored later)
// overwrites; lanes at the chunk's right edge store short blocks exactly.
// lm must be readable for 8 steps past the last.
#if HWY_MAX_BYTES >= 32
void lane_major_to_raster16(const uint16_t* lm, uint32_t h, uint32_t w, uint32_t W, uint32_t rows, uint16_t* out) {
  const hn::Full256<uint16_t> d;
  const hn::Full256<uint32_t> d32;
  const hn::Full256<uint64_t> d64;
  const hn::Full128<uint16_t> dh;
  uint64_t base[kLanes];
  bool edge[kLanes];
  for (uint32_t l = 0; l < kLanes; ++l) {
    const LaneRect rc = lane_rect(h, w, l);
    base[l] = uint64_t{rc.r0} * w + rc.c0;
    edge[l] = rc.c0 + rc.w == w;
  }
  const uint32_t last = (W - 1) / 8 * 8;
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t j0 = last + 8; j0 >= 8;) {
      j0 -= 8;
      const uint32_t len = W - j0 < 8 ? W - j0 : 8;
      const uint64_t t0 = uint64_t{r} * W + j0;
      const uint64_t off = uint64_t{r} * w + j0;
#pragma GCC unroll 2
      for (uint32_t half = 0; half < 2; ++half) {
        hn::Vec<decltype(d)> v[8];
        for (int j = 0; j < 8; ++j) v[j] = hn::LoadU(d, lm + (t0 + j) * kLanes + 16 * half);
        hn::Vec<decltype(d)> a[8];
        for (int j = 0; j < 4; ++j) {
          a[2 * j] = hn::InterleaveLower(d, v[2 * j], v[2 * j + 1]);
          a[2 * j + 1] = hn::InterleaveUpper(d, v[2 * j], v[2 * j + 1]);
        }
        hn::Vec<decltype(d32)> b[8];
        for (int q = 0; q < 2; ++q) {  // steps 4q .. 4q + 3
          const auto a0 = hn::BitCast(d32, a[4 * q]), a1 = hn::BitCast(d32, a[4 * q + 1]);
          const auto a2 = hn::BitCast(d32, a[4 * q + 2]), a3 = hn::BitCast(d32, a[4 * q + 3]);
          b[4 * q] = hn::InterleaveLower(d32, a0, a2);      // lanes 0, 1
          b[4 * q + 1] = hn::InterleaveUpper(d32, a0, a2);  // lanes 2, 3
          b[4 * q + 2] = hn::InterleaveLower(d32, a1, a3);  // lanes 4, 5
          b[4 * q + 3] = hn::InterleaveUpper(d32, a1, a3);  // lanes 6, 7
        }
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) {
          const auto lo = hn::BitCast(d64, b[i / 2]), hi = hn::BitCast(d64, b[4 + i / 2]);
          const auto c = hn::BitCast(d, (i & 1) ? hn::InterleaveUpper(d64, lo, hi) : hn::InterleaveLower(d64, lo, hi));
#pragma GCC unroll 2
          for (int blk = 0; blk < 2; ++blk) {
            const uint32_t l = 16 * half + 8 * blk + i;
            const auto x = blk ? hn::UpperHalf(dh, c) : hn::LowerHalf(dh, c);
            uint16_t* dst = out + base[l] + off;
            if (len == 8 || !edge[l]) {
              hn::StoreU(x, dh, dst);
            } else {
              HWY_ALIGN uint16_t tmp[8];
              hn::Store(x, dh, tmp);
              std::memcpy(dst, tmp, 2 * len);
            }
          }
        }
      }
    }
  }
}

#else
// 128-bit vectors: one 8x8 block of 16-bit elements per register (8 steps
// of 8 lanes), transposed by 16-, 32- and 64-bit interleaves, a lane's 8
// elements one 16-byte store. A short last block (W not a multiple of 8) is
// stored exactly.
void lane_major_to_raster16(const uint16_t* lm, uint32_t h, uint32_t w, uint32_t W, uint32_t rows, uint16_t* out) {
  const hn::Full128<uint16_t> d;
  const hn::Full128<uint32_t> d32;
  const hn::Full128<uint64_t> d64;
  uint64_t base[kLanes];
  for (uint32_t l = 0; l < kLanes; ++l) {
    const LaneRect rc = lane_rect(h, w, l);
    base[l] = uint64_t{rc.r0} * w + rc.c0;
  }
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t j0 = 0; j0 < W; j0 += 8) {
      const uint32_t len = W - j0 < 8 ? W - j0 : 8;
      const uint64_t t0 = uint64_t{r} * W + j0;
      const uint64_t off = uint64_t{r} * w + j0;
      for (uint32_t q = 0; q < kLanes / 8; ++q) {
        hn::Vec<decltype(d)> v[8], a[8];
        for (int j = 0; j < 8; ++j) v[j] = hn::LoadU(d, lm + (t0 + j) * kLanes + 8 * q);
        for (int j = 0; j < 4; ++j) {
          a[2 * j] = hn::InterleaveLower(d, v[2 * j], v[2 * j + 1]);      // lanes 0-3 of steps 2j, 2j + 1
          a[2 * j + 1] = hn::InterleaveUpper(d, v[2 * j], v[2 * j + 1]);  // lanes 4-7
        }
        hn::Vec<decltype(d32)> b[8];
        for (int g = 0; g < 2; ++g) {  // steps 4g .. 4g + 3
          const auto a0 = hn::BitCast(d32, a[4 * g]), a1 = hn::BitCast(d32, a[4 * g + 1]);
          const auto a2 = hn::BitCast(d32, a[4 * g + 2]), a3 = hn::BitCast(d32, a[4 * g + 3]);
          b[4 * g] = hn::InterleaveLower(d32, a0, a2);      // lanes 0, 1
          b[4 * g + 1] = hn::InterleaveUpper(d32, a0, a2);  // lanes 2, 3
          b[4 * g + 2] = hn::InterleaveLower(d32, a1, a3);  // lanes 4, 5
          b[4 * g + 3] = hn::InterleaveUpper(d32, a1, a3);  // lanes 6, 7
        }
        for (int i = 0; i < 8; ++i) {
          const auto lo = hn::BitCast(d64, b[i / 2]), hi = hn::BitCast(d64, b[4 + i / 2]);
          const auto x = hn::BitCast(d, (i & 1) ? hn::InterleaveUpper(d64, lo, hi) : hn::InterleaveLower(d64, lo, hi));
          uint16_t* dst = out + base[8 * q + static_cast<uint32_t>(i)] + off;
          if (len == 8) {
            hn::StoreU(x, d, dst);
          } else {
            HWY_ALIGN uint16_t tmp[8];
            hn::Store(x, d, tmp);
            std::memcpy(dst, tmp, 2 * len);
          }
        }
      }
    }
  }
}
#endif

// The same for 32-bit elements: blocks of 8 steps x 8 lanes (one vector
// per step) transposed in three stages, a lane's 8 elements one 32-byte
// store.
#if HWY_MAX_BYTES >= 32
void lane_major_to_raster32(const uint32_t* lm, uint32_t h, uint32_t w, uint32_t W, uint32_t rows, uint32_t* out) {
  const hn::Full256<uint32_t> d;
  const hn::Full256<uint64_t> d64;
  uint64_t base[kLanes];
  bool edge[kLanes];
  for (uint32_t l = 0; l < kLanes; ++l) {
    const LaneRect rc = lane_rect(h, w, l);
    base[l] = uint64_t{rc.r0} * w + rc.c0;
    edge[l] = rc.c0 + rc.w == w;
  }
  const uint32_t last = (W - 1) / 8 * 8;
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t j0 = last + 8; j0 >= 8;) {
      j0 -= 8;
      const uint32_t len = W - j0 < 8 ? W - j0 : 8;
      const uint64_t t0 = uint64_t{r} * W + j0;
      const uint64_t off = uint64_t{r} * w + j0;
#pragma GCC unroll 4
      for (uint32_t q = 0; q < kLanes / 8; ++q) {
        hn::Vec<decltype(d)> v[8], a[8];
        for (int j = 0; j < 8; ++j) v[j] = hn::LoadU(d, lm + (t0 + j) * kLanes + 8 * q);
        for (int j = 0; j < 4; ++j) {
          a[2 * j] = hn::InterleaveLower(d, v[2 * j], v[2 * j + 1]);      // lanes 0, 1 | 4, 5
          a[2 * j + 1] = hn::InterleaveUpper(d, v[2 * j], v[2 * j + 1]);  // lanes 2, 3 | 6, 7
        }
        hn::Vec<decltype(d)> b[8];
        for (int g = 0; g < 2; ++g) {  // steps 4g .. 4g + 3
          const auto a0 = hn::BitCast(d64, a[4 * g]), a1 = hn::BitCast(d64, a[4 * g + 1]);
          const auto a2 = hn::BitCast(d64, a[4 * g + 2]), a3 = hn::BitCast(d64, a[4 * g + 3]);
          b[4 * g] = hn::BitCast(d, hn::InterleaveLower(d64, a0, a2));      // lane 0 | 4
          b[4 * g + 1] = hn::BitCast(d, hn::InterleaveUpper(d64, a0, a2));  // lane 1 | 5
          b[4 * g + 2] = hn::BitCast(d, hn::InterleaveLower(d64, a1, a3));  // lane 2 | 6
          b[4 * g + 3] = hn::BitCast(d, hn::InterleaveUpper(d64, a1, a3));  // lane 3 | 7
        }
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) {
          const auto x = i < 4 ? hn::ConcatLowerLower(d, b[4 + i], b[i]) : hn::ConcatUpperUpper(d, b[i], b[i - 4]);
          const uint32_t l = 8 * q + static_cast<uint32_t>(i);
          uint32_t* dst = out + base[l] + off;
          if (len == 8 || !edge[l]) {
            hn::StoreU(x, d, dst);
          } else {
            HWY_ALIGN uint32_t tmp[8];
            hn::Store(x, d, tmp);
            std::memcpy(dst, tmp, 4 * len);
          }
        }
      }
    }
  }
}

#else
// 128-bit vectors: blocks of 4 steps x 4 lanes (one vector per step)
// transposed by 32- and 64-bit interleaves, a lane's 4 elements one 16-byte
// store; a short last block is stored exactly.
void lane_major_to_raster32(const uint32_t* lm, uint32_t h, uint32_t w, uint32_t W, uint32_t rows, uint32_t* out) {
  const hn::Full128<uint32_t> d;
  const hn::Full128<uint64_t> d64;
  uint64_t base[kLanes];
  for (uint32_t l = 0; l < kLanes; ++l) {
    const LaneRect rc = lane_rect(h, w, l);
    base[l] = uint64_t{rc.r0} * w + rc.c0;
  }
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t j0 = 0; j0 < W; j0 += 4) {
      const uint32_t len = W - j0 < 4 ? W - j0 : 4;
      const uint64_t t0 = uint64_t{r} * W + j0;
      const uint64_t off = uint64_t{r} * w + j0;
      for (uint32_t q = 0; q < kLanes / 4; ++q) {
        hn::Vec<decltype(d)> v[4];
        for (int j = 0; j < 4; ++j) v[j] = hn::LoadU(d, lm + (t0 + j) * kLanes + 4 * q);
        const auto a0 = hn::BitCast(d64, hn::InterleaveLower(d, v[0], v[1]));  // lanes 0, 1 of steps 0, 1
        const auto a1 = hn::BitCast(d64, hn::InterleaveUpper(d, v[0], v[1]));  // lanes 2, 3
        const auto a2 = hn::BitCast(d64, hn::InterleaveLower(d, v[2], v[3]));  // lanes 0, 1 of steps 2, 3
        const auto a3 = hn::BitCast(d64, hn::InterleaveUpper(d, v[2], v[3]));
        const hn::Vec<decltype(d)> x[4] = {
            hn::BitCast(d, hn::InterleaveLower(d64, a0, a2)), hn::BitCast(d, hn::InterleaveUpper(d64, a0, a2)),
            hn::BitCast(d, hn::InterleaveLower(d64, a1, a3)), hn::BitCast(d, hn::InterleaveUpper(d64, a1, a3))};
        for (int i = 0; i < 4; ++i) {
          uint32_t* dst = out + base[4 * q + static_cast<uint32_t>(i)] + off;
          if (len == 4) {
            hn::StoreU(x[i], d, dst);
          } else {
            HWY_ALIGN uint32_t tmp[4];
            hn::Store(x[i], d, tmp);
            std::memcpy(dst, tmp, 4 * len);
          }
        }
      }
    }
  }
}
#endif

// ORs the raw mantissa bits (rawb bits each, field i at bit i * rawb of
// raw, raw_len readable bytes) into the low bits of the n 16-bit elements
// at out. 8 fields start at a whole byte: up to 15 bits each they lie in
// the 16 bytes from there, which a byte shuffle spreads to the fields'
// 32-bit lanes and a variable shift aligns; wider fields by 4-byte gathers
// at each field's byte; the last fields as the reference reads them
// (float_raw_ok bounds all reads).
// out[0, kN) |= lo (fields below 2^16 for 16-bit T).
template <class T>
HWY_INLINE void or_store(T* out, VU lo) {
  if constexpr (sizeof(T) == 2) {
    const hn::Rebind<uint16_t, DI> d16;
    hn::StoreU(hn::Or(hn::LoadU(d16, out), hn::DemoteTo(d16, hn::BitCast(DI(), lo))), d16, out);
  } else {
    hn::StoreU(hn::Or(hn::LoadU(DU(), out), lo), DU(), out);
  }
}

template <class T>
void or_raw(T* out, uint64_t n, const uint8_t* raw, uint64_t raw_len, uint32_t rawb) {
  if (!rawb) return;
  uint64_t i = 0;
  const DI di;
  const DU du;
  const VU mask = hn::Set(du, (1u << rawb) - 1u);
  if (sizeof(T) == 2 && rawb == 8) {
    // A byte per field: widened and ORed (16 or 8 at a time).
    const hn::ScalableTag<uint16_t> d16x;
    const hn::Rebind<uint8_t, decltype(d16x)> d8;
    const size_t n16 = hn::Lanes(d16x);
    for (; i + n16 <= n; i += n16)
      hn::StoreU(hn::Or(hn::LoadU(d16x, reinterpret_cast<uint16_t*>(out) + i), hn::PromoteTo(d16x, hn::LoadU(d8, raw + i))),
                 d16x, reinterpret_cast<uint16_t*>(out) + i);
  } else if (rawb <= 15) {
    // 8 fields per 16 source bytes: one vector of 8 lanes (AVX2) or two of
    // 4 (NEON), each with its own byte shuffle and shifts.
    constexpr size_t kG = 8 / kN;
    const hn::Repartition<uint8_t, DU> d8;
    HWY_ALIGN uint8_t idx[kG][4 * kN];
    HWY_ALIGN uint32_t sh[kG][kN];
    for (uint32_t f = 0; f < 8; ++f) {
      const uint32_t bit = f * rawb, g = f / kN, j = f % kN;
      sh[g][j] = bit & 7;
      for (uint32_t q = 0; q < 4; ++q) {
        const uint32_t b = (bit >> 3) + q;
        idx[g][4 * j + q] = static_cast<uint8_t>(b < 16 ? b : 0x80);
      }
    }
    hn::Vec<decltype(d8)> vidx[kG];
    VU vsh[kG];
    for (size_t g = 0; g < kG; ++g) {
      vidx[g] = hn::Load(d8, idx[g]);
      vsh[g] = hn::Load(du, sh[g]);
    }
    for (; i + 8 <= n && i / 8 * rawb + 16 <= raw_len; i += 8) {
      const auto src = hn::LoadDup128(d8, raw + i / 8 * rawb);
      for (size_t g = 0; g < kG; ++g) {
        const VU v = hn::BitCast(du, hn::TableLookupBytesOr0(src, vidx[g]));
        const VU lo = hn::And(hn::Shr(v, vsh[g]), mask);
        or_store(out + i + g * kN, lo);
      }
    }
  } else {
    const VI jr = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(rawb)));
    for (; i + kN <= n; i += kN) {
      const uint64_t b0 = i * rawb;
      const VI bitpos = hn::Add(jr, hn::Set(di, static_cast<int32_t>(b0 & 7)));
      const VU word = hn::BitCast(du, GatherOff32<false>(di, reinterpret_cast<const int32_t*>(raw + (b0 >> 3)),
                                                       hn::ShiftRight<3>(bitpos)));
      const VU lo = hn::And(hn::Shr(word, hn::BitCast(du, hn::And(bitpos, hn::Set(di, 7)))), mask);
      or_store(out + i, lo);
    }
  }
  // (memcpy: out need not be aligned for T.)
  for (; i < n; ++i) {
    T v;
    std::memcpy(&v, out + i, sizeof(T));
    v = static_cast<T>(v | get_bits(raw, i * rawb, rawb));
    std::memcpy(out + i, &v, sizeof(T));
  }
}

// A chunk's elements from its lane-major buffer: raster order, then the raw
// bits (x_tail: the lanes' tail words of a raw tail chunk).
template <class T>
void fast_finish(const FloatParams& p, const ChunkView& cv, uint32_t W, uint32_t rows, const T* lm, const uint8_t* raw,
                 uint64_t raw_len, bool tail, const uint32_t* x_tail, uint8_t* out) {
  T* o = reinterpret_cast<T*>(out);
  if constexpr (sizeof(T) == 2) lane_major_to_raster16(lm, cv.h, cv.w, W, rows, o);
  else lane_major_to_raster32(lm, cv.h, cv.w, W, rows, o);
  const uint32_t rawb = float_raw_bits(p);
  const uint64_t n = uint64_t{cv.h} * cv.w;
  if (!rawb) return;
  if (tail) {
    uint8_t buf[kRawTailBuf];
    uint64_t ns = 0, bit0 = 0;
    const uint32_t blen = float_raw_tail(p, n, raw, x_tail, buf, &ns, &bit0);
    or_raw(o, ns, raw, raw_len, rawb);
    or_raw(o + ns, n - ns, buf, blen, rawb);
  } else {
    or_raw(o, n, raw, raw_len, rawb);
  }
}
