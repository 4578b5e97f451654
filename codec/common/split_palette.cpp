// codec/common/split_palette.cpp — the palette transform of a split stream
// (docs/wcodec-format.md §8.5). See split_palette.h.
//
// Thread-safety: pure functions over their arguments.
#include "split_palette.h"

#include <cstring>

namespace wcodec {

namespace {

// A code's rank in its order: int8 codes are ranked -128..127 as 0..255.
inline uint32_t rank_of(uint8_t v, bool is_signed) { return is_signed ? uint32_t{uint8_t(v ^ 0x80)} : v; }
inline uint8_t value_of(uint32_t rank, bool is_signed) { return static_cast<uint8_t>(is_signed ? rank ^ 0x80 : rank); }

}  // namespace

bool palette_build(const uint8_t* codes, uint64_t groups, uint32_t group, bool is_signed, uint8_t* first,
                   uint8_t* gaps, uint8_t* index) {
  uint8_t slot[256];
  for (uint64_t gi = 0; gi < groups; ++gi) {
    const uint8_t* c = codes + gi * group;
    uint64_t seen[4] = {0, 0, 0, 0};
    for (uint32_t k = 0; k < group; ++k) {
      const uint32_t r = rank_of(c[k], is_signed);
      seen[r >> 6] |= uint64_t{1} << (r & 63);
    }
    uint32_t count = 0, prev = 0;
    uint8_t* gp = gaps + gi * kPaletteGaps;
    std::memset(gp, 0, kPaletteGaps);
    for (uint32_t w = 0; w < 4; ++w) {
      uint64_t bits = seen[w];
      while (bits) {
        const uint32_t r = w * 64 + static_cast<uint32_t>(__builtin_ctzll(bits));
        bits &= bits - 1;
        if (count == kPaletteMaxValues) return false;
        if (count == 0) first[gi] = value_of(r, is_signed);
        else gp[count - 1] = static_cast<uint8_t>(r - prev);
        slot[r] = static_cast<uint8_t>(count++);
        prev = r;
      }
    }
    uint8_t* ip = index + gi * (group / 2);
    for (uint32_t k = 0; k < group; k += 2)
      ip[k / 2] = static_cast<uint8_t>(slot[rank_of(c[k], is_signed)] |
                                       slot[rank_of(c[k + 1], is_signed)] << 4);
  }
  return true;
}

void q5_unpack(const uint8_t* in, uint64_t blocks, uint8_t* codes) {
  for (uint64_t b = 0; b < blocks; ++b, in += kQ5Bytes, codes += 32) {
    const uint32_t qh = uint32_t{in[0]} | uint32_t{in[1]} << 8 | uint32_t{in[2]} << 16 | uint32_t{in[3]} << 24;
    for (uint32_t j = 0; j < 16; ++j) {
      codes[j] = static_cast<uint8_t>((in[4 + j] & 15) | ((qh >> j) & 1) << 4);
      codes[j + 16] = static_cast<uint8_t>((in[4 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
    }
  }
}

void q5_pack(const uint8_t* codes, uint64_t blocks, uint8_t* out) {
  // Eight codes a 64-bit word: the low nibbles of codes j and j + 16 meet
  // in one byte; bit 4 of each of eight codes is gathered into one byte by
  // a multiply (code k's bit lands on bit 56 + k; no two partial products
  // share a bit, so nothing carries).
  constexpr uint64_t kLo = 0x0f0f0f0f0f0f0f0full, kBit = 0x0101010101010101ull, kGather = 0x0102040810204080ull;
  for (uint64_t b = 0; b < blocks; ++b, out += kQ5Bytes, codes += 32) {
    uint64_t w[4];
    std::memcpy(w, codes, 32);
    const uint64_t q0 = (w[0] & kLo) | (w[2] & kLo) << 4, q1 = (w[1] & kLo) | (w[3] & kLo) << 4;
    std::memcpy(out + 4, &q0, 8);
    std::memcpy(out + 12, &q1, 8);
    for (int k = 0; k < 4; ++k) out[k] = static_cast<uint8_t>((((w[k] >> 4) & kBit) * kGather) >> 56);
  }
}

namespace {

// Rebuilds one group's codes, checking every rule in order and naming the
// first broken one (the exact path, taken where the fast one finds fault).
Status reconstruct_group_checked(uint64_t gi, uint8_t first, const uint8_t* gp, const uint8_t* ip, uint32_t group,
                                 bool is_signed, uint8_t* c, const std::string& what, uint32_t max_value) {
  uint8_t pal[kPaletteMaxValues] = {};
  uint32_t r = rank_of(first, is_signed), count = 1;
  if (r > max_value)
    return Status::Corruption(what + ": palette group " + std::to_string(gi) + " first value " +
                              std::to_string(first) + " (allowed 0.." + std::to_string(max_value) + ")");
  pal[0] = first;
  for (uint32_t k = 0; k < kPaletteGaps; ++k) {
    if (gp[k] == 0) continue;
    if (count != k + 1)
      return Status::Corruption(what + ": palette group " + std::to_string(gi) + " gap " + std::to_string(k) +
                                " value " + std::to_string(gp[k]) +
                                " after the palette's end (allowed 0: entries strictly increasing)");
    r += gp[k];
    if (r > max_value)
      return Status::Corruption(what + ": palette group " + std::to_string(gi) + " entry " + std::to_string(k + 1) +
                                " runs past the largest " +
                                (is_signed ? "int8" : max_value == 255 ? "uint8" : "code") + " value (gap " +
                                std::to_string(gp[k]) + ")");
    pal[count++] = value_of(r, is_signed);
  }
  for (uint32_t k = 0; k < group; ++k) {
    const uint32_t x = k & 1 ? ip[k / 2] >> 4 : ip[k / 2] & 15;
    if (x >= count)
      return Status::Corruption(what + ": palette group " + std::to_string(gi) + " code " + std::to_string(k) +
                                " index " + std::to_string(x) + " (allowed 0.." + std::to_string(count - 1) +
                                ": the palette's count)");
    c[k] = pal[x];
  }
  return Status::OK();
}

}  // namespace

Status palette_reconstruct(const uint8_t* first, const uint8_t* gaps, const uint8_t* index, uint64_t groups,
                           uint32_t group, bool is_signed, uint8_t* codes, const std::string& what,
                           uint32_t max_value, PaletteGroupsFn groups_fn) {
  static_assert(kPaletteGaps == 15, "the gaps are read as 15 bytes of two words");
  // A group the vector reconstruction refuses is found (and named) by the
  // loop below, which writes every group again.
  if (groups_fn && group % 32 == 0 && groups_fn(first, gaps, index, groups, group, is_signed, max_value, codes))
    return Status::OK();
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  uint8_t pal[kPaletteMaxValues];
  for (uint64_t gi = 0; gi < groups; ++gi) {
    const uint8_t* gp = gaps + gi * kPaletteGaps;
    const uint8_t* ip = index + gi * (group / 2);
    uint8_t* c = codes + gi * group;
    // The palette without branches: every gap added (a zero gap repeats
    // the last entry, which no valid index reaches), then the count from
    // the first zero gap, and the rules checked at once: the first value
    // and the last entry within range, no nonzero gap after a zero one.
    uint32_t r = rank_of(first[gi], is_signed);
    const bool first_ok = r <= max_value;
    pal[0] = first[gi];
    for (uint32_t k = 0; k < kPaletteGaps; ++k) {
      r += gp[k];
      pal[k + 1] = value_of(r & 255, is_signed);
    }
    uint64_t w0, w1 = 0;
    std::memcpy(&w0, gp, 8);
    std::memcpy(&w1, gp + 8, 7);  // byte 7 stays 0: a zero after the last gap
    // The first zero byte (exact for the lowest one): z gaps are nonzero.
    const uint64_t m0 = (w0 - kOnes) & ~w0 & kHigh, m1 = (w1 - kOnes) & ~w1 & kHigh;
    const uint32_t z = m0 ? static_cast<uint32_t>(__builtin_ctzll(m0)) / 8
                          : 8 + static_cast<uint32_t>(__builtin_ctzll(m1)) / 8;
    const uint32_t count = z + 1;
    // Gaps after the first zero one (bytes z + 1 .. 14) must be zero.
    const uint64_t tail = z >= 7 ? (z >= 14 ? 0 : w1 >> (8 * (z - 7))) : (w0 >> (8 * (z + 1))) | w1;
    uint8_t bad = static_cast<uint8_t>(!first_ok || r > max_value || tail != 0);
    for (uint32_t k = 0; k < group; k += 2) {
      const uint8_t lo = ip[k / 2] & 15, hi = ip[k / 2] >> 4;
      bad |= static_cast<uint8_t>((lo >= count) | (hi >= count));
      c[k] = pal[lo];
      c[k + 1] = pal[hi];
    }
    if (bad) WC_RETURN_IF_ERROR(reconstruct_group_checked(gi, first[gi], gp, ip, group, is_signed, c, what, max_value));
  }
  return Status::OK();
}

}  // namespace wcodec
