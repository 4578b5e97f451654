// codec/decompress/split_zero_shift_hwy.cpp — Q4_1's zero shifts
// (kRecodeZeroShift, docs/wcodec-format.md §8) on the vector decoder
// paths: the rotation of each block's codes, (8 − round(−m / d)) mod 16,
// for eight blocks at a time (the fp16 d and m widened exactly, one vector
// division, the clamps as masks) instead of one scalar division per block.
// The same shifts as zero_shift_of, bit for bit: the widening is exact and
// a float32 division is correctly rounded on every path. Written with
// Google Highway, compiled for the paths' instances (AVX2 on x86-64, NEON
// on aarch64: hwy_path_i.h); the scalar path keeps zero_shifts_of's loop.
// Thread-safety: pure functions over their arguments.
#include <cstdint>
#include <cstring>

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS \
  (HWY_AVX3 | HWY_AVX3_DL | HWY_SSSE3 | HWY_SSE4 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "split_zero_shift_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "split_recode.h"

HWY_BEFORE_NAMESPACE();
namespace wcodec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE
// zero_shifts_of's contract.
void ZeroShifts(const uint8_t* blocks, uint64_t n, uint32_t block_bytes, uint32_t d_off, uint32_t m_off,
                uint8_t* shifts) {
  const hn::Full128<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> d8;
  const size_t lanes = hn::Lanes(df);
  const auto zero = hn::Zero(df), half = hn::Set(df, 0.5f), top = hn::Set(df, 14.5f), one = hn::Set(df, 1.0f);
  const auto eight = hn::Set(di, 8), low4 = hn::Set(di, 15);
  uint64_t b = 0;
  for (; b + lanes <= n; b += lanes) {
    HWY_ALIGN uint16_t dbits[8], mbits[8];
    for (size_t k = 0; k < lanes; ++k) {
      const uint8_t* blk = blocks + (b + k) * block_bytes;
      dbits[k] = static_cast<uint16_t>(blk[d_off] | blk[d_off + 1] << 8);
      mbits[k] = static_cast<uint16_t>(blk[m_off] | blk[m_off + 1] << 8);
    }
    const auto d = hn::PromoteTo(df, hn::Load(dh, reinterpret_cast<const hwy::float16_t*>(dbits)));
    const auto m = hn::PromoteTo(df, hn::Load(dh, reinterpret_cast<const hwy::float16_t*>(mbits)));
    const auto valid = hn::And(hn::And(hn::IsFinite(d), hn::Gt(d, zero)), hn::IsFinite(m));
    const auto z = hn::Div(hn::Neg(m), hn::IfThenElse(valid, d, one));
    // Below 0.5 (or NaN) 0, from 14.5 on 14.5; then + 0.5 truncated.
    const auto zc = hn::IfThenElseZero(hn::Ge(z, half), hn::Min(z, top));
    const auto zr = hn::IfThenElse(hn::RebindMask(di, valid), hn::ConvertTo(di, hn::Add(zc, half)), eight);
    const auto s = hn::And(hn::Sub(eight, zr), low4);
    HWY_ALIGN uint8_t out[16];
    hn::Store(hn::DemoteTo(d8, s), d8, out);
    std::memcpy(shifts + b, out, lanes);
  }
  for (; b < n; ++b) {
    const uint8_t* blk = blocks + b * block_bytes;
    shifts[b] = zero_shift_of(static_cast<uint16_t>(blk[d_off] | blk[d_off + 1] << 8),
                              static_cast<uint16_t>(blk[m_off] | blk[m_off + 1] << 8));
  }
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace wcodec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy_path_i.h"
namespace wcodec {

ZeroShiftsFn zero_shifts_vector() { return WCODEC_HWY_PATH_FN(ZeroShifts); }

}  // namespace wcodec
#endif
