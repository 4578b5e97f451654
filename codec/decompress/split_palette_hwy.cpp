// codec/decompress/split_palette_hwy.cpp — the index expansion of palette
// streams (format 2.6, docs/wcodec-format.md §8.5) on the vector decoder
// paths: each byte of a group's index stream holds two 4-bit indexes into
// the group's palette of at most 16 values, so 16 index bytes become 32
// codes with two byte-table lookups (the palette in one 128-bit register)
// and an interleave, instead of a load and a store per code. Written with
// Google Highway, compiled for the paths' instances (AVX2 on x86-64, NEON
// on aarch64: hwy_path_i.h); the scalar path keeps palette_reconstruct's
// portable loop.
// Thread-safety: pure functions over their arguments.
#include <cstdint>
#include <cstring>

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS \
  (HWY_AVX3 | HWY_AVX3_DL | HWY_SSSE3 | HWY_SSE4 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "split_palette_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "split_palette.h"
#include "wcodec/cpu.h"

HWY_BEFORE_NAMESPACE();
namespace wcodec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE
// pal: 16 palette entries; idx: n index bytes (index 2k in the low nibble
// of byte k); out: 2n codes. True when every index is below count.
bool PaletteExpand(const uint8_t* pal, const uint8_t* idx, uint32_t n, uint32_t count, uint8_t* out) {
  const hn::Full128<uint8_t> d;
  const auto tab = hn::LoadU(d, pal);
  const auto low4 = hn::Set(d, 15);
  auto top = hn::Zero(d);  // the largest index seen, per byte lane
  uint32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const auto x = hn::LoadU(d, idx + i);
    const auto lo = hn::And(x, low4);
    const auto hi = hn::And(hn::ShiftRight<4>(x), low4);
    top = hn::Max(top, hn::Max(lo, hi));
    const auto a = hn::TableLookupBytes(tab, lo), b = hn::TableLookupBytes(tab, hi);
    hn::StoreU(hn::InterleaveLower(d, a, b), d, out + 2 * i);
    hn::StoreU(hn::InterleaveUpper(d, a, b), d, out + 2 * i + 16);
  }
  uint8_t tail_top = 0;
  for (; i < n; ++i) {
    const uint8_t lo = idx[i] & 15, hi = idx[i] >> 4;
    tail_top = lo > tail_top ? lo : tail_top;
    tail_top = hi > tail_top ? hi : tail_top;
    out[2 * i] = pal[lo];
    out[2 * i + 1] = pal[hi];
  }
  // count is 1..16: every index below it when no lane exceeds count - 1.
  const auto lim = hn::Set(d, static_cast<uint8_t>(count - 1));
  return hn::AllTrue(d, hn::Eq(hn::Min(top, lim), top)) && tail_top < count;
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace wcodec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy_path_i.h"
namespace wcodec {

PaletteExpandFn palette_expand_vector() {
#if defined(WCODEC_HWY_PATH)
  const CpuPath p = cpu_path();
  if (p == CpuPath::kAvx2 || p == CpuPath::kAvx512 || p == CpuPath::kNeon) return &WCODEC_HWY_PATH::PaletteExpand;
#endif
  return nullptr;
}

}  // namespace wcodec
#endif
