// codec/decompress/split_palette_hwy.cpp — the reconstruction of palette
// streams (format 2.6, docs/wcodec-format.md §8.5) on the vector decoder
// paths: a group's palette (a first value and 15 gaps) is a prefix sum in
// one 128-bit register, its rules byte masks, and each byte of the group's
// index stream holds two 4-bit indexes into it, so 16 index bytes become 32
// codes with two byte-table lookups and an interleave, instead of a load
// and a store per code. Written with
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
// The palette_reconstruct of `groups` groups of `group` codes (a multiple
// of 32) without a scalar step per code or per entry: a group's first
// value and 15 gaps are one 16-byte vector, whose byte-wise prefix sum is
// the palette's ranks. The rules become byte masks: the ranks never wrap
// (non-decreasing bytes), none above max_value, and the entries from the
// first zero gap on (zero gaps repeat the last entry) hold only zero gaps;
// an index must not reach those entries, which a table lookup of that mask
// tells. True when every group keeps them; false (codes partly written)
// where one does not.
bool PaletteGroups(const uint8_t* first, const uint8_t* gaps, const uint8_t* index, uint64_t groups,
                   uint32_t group, bool is_signed, uint32_t max_value, uint8_t* codes) {
  const hn::Full128<uint8_t> d;
  const auto zero = hn::Zero(d);
  const auto low4 = hn::Set(d, 15);
  const auto lane0 = hn::FirstN(d, 1);
  const auto flip = hn::Set(d, static_cast<uint8_t>(is_signed ? 0x80 : 0));
  const auto flip0 = hn::IfThenElseZero(lane0, flip);  // the first value's rank; gaps are differences
  const auto vmax = hn::Set(d, static_cast<uint8_t>(max_value));
  auto bad = zero;
  HWY_ALIGN uint8_t head[16] = {};
  for (uint64_t gi = 0; gi < groups; ++gi) {
    // Bytes 1..15: the group's gaps (the load starts one byte early, at
    // the previous group's last gap; group 0 from a copy); byte 0: first.
    hn::Vec<decltype(d)> raw;
    if (gi == 0) {
      std::memcpy(head + 1, gaps, kPaletteGaps);
      raw = hn::Load(d, head);
    } else {
      raw = hn::LoadU(d, gaps + gi * kPaletteGaps - 1);
    }
    const auto v = hn::IfThenElse(lane0, hn::Set(d, first[gi]), raw);
    auto r = hn::Xor(v, flip0);
    r = hn::Add(r, hn::ShiftLeftBytes<1>(d, r));
    r = hn::Add(r, hn::ShiftLeftBytes<2>(d, r));
    r = hn::Add(r, hn::ShiftLeftBytes<4>(d, r));
    r = hn::Add(r, hn::ShiftLeftBytes<8>(d, r));
    // Entries past the count: from the first zero gap on.
    auto past = hn::IfThenZeroElse(lane0, hn::VecFromMask(d, hn::Eq(v, zero)));
    past = hn::Or(past, hn::ShiftLeftBytes<1>(d, past));
    past = hn::Or(past, hn::ShiftLeftBytes<2>(d, past));
    past = hn::Or(past, hn::ShiftLeftBytes<4>(d, past));
    past = hn::Or(past, hn::ShiftLeftBytes<8>(d, past));
    const auto wrapped = hn::VecFromMask(d, hn::Lt(r, hn::ShiftLeftBytes<1>(d, r)));
    const auto above = hn::VecFromMask(d, hn::Gt(r, vmax));
    const auto gap_after_end = hn::AndNot(hn::VecFromMask(d, hn::Eq(v, zero)), past);
    bad = hn::Or(bad, hn::Or(hn::Or(wrapped, above), gap_after_end));
    const auto pal = hn::Xor(r, flip);
    const uint8_t* ip = index + gi * (group / 2);
    uint8_t* c = codes + gi * group;
    for (uint32_t k = 0; k < group / 2; k += 16) {
      const auto x = hn::LoadU(d, ip + k);
      const auto lo = hn::And(x, low4);
      const auto hi = hn::And(hn::ShiftRight<4>(x), low4);
      bad = hn::Or(bad, hn::Or(hn::TableLookupBytes(past, lo), hn::TableLookupBytes(past, hi)));
      const auto a = hn::TableLookupBytes(pal, lo), b = hn::TableLookupBytes(pal, hi);
      hn::StoreU(hn::InterleaveLower(d, a, b), d, c + 2 * k);
      hn::StoreU(hn::InterleaveUpper(d, a, b), d, c + 2 * k + 16);
    }
  }
  return hn::AllTrue(d, hn::Eq(bad, zero));
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace wcodec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy_path_i.h"
namespace wcodec {

PaletteGroupsFn palette_groups_vector() { return WCODEC_HWY_PATH_FN(PaletteGroups); }

}  // namespace wcodec
#endif
