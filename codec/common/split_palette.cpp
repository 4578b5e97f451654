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
  for (uint64_t b = 0; b < blocks; ++b, out += kQ5Bytes, codes += 32) {
    uint32_t qh = 0;
    for (uint32_t j = 0; j < 16; ++j) {
      out[4 + j] = static_cast<uint8_t>((codes[j] & 15) | (codes[j + 16] & 15) << 4);
      qh |= uint32_t{codes[j] >> 4 & 1u} << j | uint32_t{codes[j + 16] >> 4 & 1u} << (j + 16);
    }
    for (int k = 0; k < 4; ++k) out[k] = static_cast<uint8_t>(qh >> (8 * k));
  }
}

Status palette_reconstruct(const uint8_t* first, const uint8_t* gaps, const uint8_t* index, uint64_t groups,
                           uint32_t group, bool is_signed, uint8_t* codes, const std::string& what,
                           uint32_t max_value) {
  uint8_t pal[kPaletteMaxValues] = {};
  for (uint64_t gi = 0; gi < groups; ++gi) {
    const uint8_t* gp = gaps + gi * kPaletteGaps;
    uint32_t r = rank_of(first[gi], is_signed), count = 1;
    if (r > max_value)
      return Status::Corruption(what + ": palette group " + std::to_string(gi) + " first value " +
                                std::to_string(first[gi]) + " (allowed 0.." + std::to_string(max_value) + ")");
    pal[0] = first[gi];
    for (uint32_t k = 0; k < kPaletteGaps; ++k) {
      if (gp[k] == 0) continue;
      if (count != k + 1)
        return Status::Corruption(what + ": palette group " + std::to_string(gi) + " gap " + std::to_string(k) +
                                  " value " + std::to_string(gp[k]) +
                                  " after the palette's end (allowed 0: entries strictly increasing)");
      r += gp[k];
      if (r > max_value)
        return Status::Corruption(what + ": palette group " + std::to_string(gi) + " entry " +
                                  std::to_string(k + 1) + " runs past the largest " +
                                  (is_signed ? "int8" : max_value == 255 ? "uint8" : "code") + " value (gap " +
                                  std::to_string(gp[k]) + ")");
      pal[count++] = value_of(r, is_signed);
    }
    const uint8_t* ip = index + gi * (group / 2);
    uint8_t* c = codes + gi * group;
    uint8_t bad = 0;
    for (uint32_t k = 0; k < group; k += 2) {
      const uint8_t lo = ip[k / 2] & 15, hi = ip[k / 2] >> 4;
      bad |= static_cast<uint8_t>((lo >= count) | (hi >= count));
      c[k] = pal[lo];
      c[k + 1] = pal[hi];
    }
    if (bad)
      for (uint32_t k = 0; k < group; ++k) {
        const uint32_t x = k & 1 ? ip[k / 2] >> 4 : ip[k / 2] & 15;
        if (x >= count)
          return Status::Corruption(what + ": palette group " + std::to_string(gi) + " code " + std::to_string(k) +
                                    " index " + std::to_string(x) + " (allowed 0.." + std::to_string(count - 1) +
                                    ": the palette's count)");
      }
  }
  return Status::OK();
}

}  // namespace wcodec
