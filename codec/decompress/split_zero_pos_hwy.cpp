// codec/decompress/split_zero_pos_hwy.cpp — the join of zero-position
// streams (kRecodeZeroPos, docs/wcodec-format.md §8) on the vector decoder
// paths: a group's 31 stored codes with a 0 inserted at the group's
// position become 32 codes with two byte-table lookups (a shuffle pattern
// per position), and their two nibble halves one byte each with a shift and
// an OR, instead of eight 64-bit word steps. Written with Google Highway,
// compiled for the paths' instances (AVX2 on x86-64, NEON on aarch64:
// hwy_path_i.h); the scalar path keeps zero_pos_join's portable loop.
// Thread-safety: pure functions over their arguments; the shuffle patterns
// are constants.
#include <cstdint>
#include <cstring>

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS \
  (HWY_AVX3 | HWY_AVX3_DL | HWY_SSSE3 | HWY_SSE4 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "split_zero_pos_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "split_recode.h"
#include "wcodec/cpu.h"

#ifndef WCODEC_SPLIT_ZERO_POS_PATTERNS
#define WCODEC_SPLIT_ZERO_POS_PATTERNS
namespace wcodec {
namespace {
// For each position p (0..31) and code e (0..31) of a group, where code e
// comes from: the low half's codes 0..15 from a 16-byte load of the stored
// codes 0..15 (A), the high half's 16..31 from a load of stored codes
// 15..30 (B), so that both loads stay inside the group's 31 bytes. Before
// p code e is stored code e, at p it is 0 (index 0x80: a zero byte), after
// p stored code e - 1. `before` marks the codes before p (each must be
// non-zero: p is the first 0).
struct ZeroPosPatterns {
  alignas(16) uint8_t shuffle[kZpCodes][kZpCodes];
  alignas(16) uint8_t before[kZpCodes][kZpCodes];
};
constexpr ZeroPosPatterns make_patterns() {
  ZeroPosPatterns t{};
  for (uint32_t p = 0; p < kZpCodes; ++p) {
    for (uint32_t e = 0; e < kZpCodes; ++e) {
      const uint32_t base = e < 16 ? 0 : 15;  // A holds stored codes 0.., B 15..
      const uint32_t src = e < p ? e : e - 1;
      t.shuffle[p][e] = e == p ? 0x80 : static_cast<uint8_t>(src - base);
      t.before[p][e] = e < p ? 0xff : 0;
    }
  }
  return t;
}
constexpr ZeroPosPatterns kPatterns = make_patterns();
}  // namespace
}  // namespace wcodec
#endif

HWY_BEFORE_NAMESPACE();
namespace wcodec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE
// pos: one position per group; rest: 31 codes per group; out: 16 bytes per
// group (code j in the low nibble of byte j, code j + 16 in its high
// nibble). True when every group keeps the rules (position below 32, codes
// below 16, no 0 before the position); otherwise false, with out partly
// written.
bool ZeroPosJoin(const uint8_t* pos, const uint8_t* rest, uint64_t groups, uint8_t* out) {
  const hn::Full128<uint8_t> d;
  auto bad = hn::Zero(d);  // any byte with a broken rule, OR-ed over groups
  const auto high4 = hn::Set(d, 0xf0);
  const auto zero = hn::Zero(d);
  for (uint64_t g = 0; g < groups; ++g, rest += kZpCodes - 1, out += kZpGroupBytes) {
    const uint32_t p = pos[g];
    if (p >= kZpCodes) return false;
    const auto a = hn::LoadU(d, rest), b = hn::LoadU(d, rest + 15);
    const auto lo = hn::TableLookupBytesOr0(a, hn::Load(d, kPatterns.shuffle[p]));
    const auto hi = hn::TableLookupBytesOr0(b, hn::Load(d, kPatterns.shuffle[p] + 16));
    // Codes above 15 (every stored code is in lo or hi once) and zeros
    // before the position.
    const auto zlo = hn::And(hn::VecFromMask(d, hn::Eq(lo, zero)), hn::Load(d, kPatterns.before[p]));
    const auto zhi = hn::And(hn::VecFromMask(d, hn::Eq(hi, zero)), hn::Load(d, kPatterns.before[p] + 16));
    bad = hn::Or(bad, hn::Or(hn::And(hn::Or(lo, hi), high4), hn::Or(zlo, zhi)));
    hn::StoreU(hn::Or(lo, hn::ShiftLeft<4>(hi)), d, out);
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

ZeroPosJoinFn zero_pos_join_vector() { return WCODEC_HWY_PATH_FN(ZeroPosJoin); }

}  // namespace wcodec
#endif
