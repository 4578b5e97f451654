// codec/common/split_palette.h — the palette transform of a split stream
// (format 2.6, docs/wcodec-format.md §8.5): a stream of byte codes cut into
// groups of `group` codes (a Q8_0 block's 32 int8 codes), each group with
// at most 16 distinct values written as its palette (the smallest value,
// then the gaps between consecutive values, zero after the last) and its
// codes as 4-bit indices into the palette. Files requantized from a 4-bit
// format (SmolLM2's Q4_1 weights written as Q8_0) hold at most 16 values
// per block, spread over the whole int8 range; the palette gives the
// stream models the 4-bit codes back. Shared by the encoder (build) and
// every decoder (reconstruct).
//
// Thread-safety: pure functions over their arguments.
#pragma once

#include <cstdint>
#include <string>

#include "wcodec/status.h"

namespace wcodec {

inline constexpr uint32_t kPaletteMaxValues = 16;
inline constexpr uint32_t kPaletteGaps = kPaletteMaxValues - 1;  // gap bytes per group
inline constexpr uint32_t kPaletteMinGroup = 2;
inline constexpr uint32_t kPaletteMaxGroup = 1024;

// What a palette stream's bytes hold (the record's `codes` field).
enum PaletteCodes : uint8_t {
  kPalCodesU8 = 0,  // one code a byte, ordered as uint8
  kPalCodesI8 = 1,  // one code a byte, ordered as int8
  kPalCodesQ5 = 2,  // ggml's 5-bit codes (Q5_0, Q5_1): per 32 codes 4 bytes of high bits, 16 of low nibbles
};
inline constexpr uint32_t kQ5Bytes = 20;  // bytes of 32 5-bit codes

// ggml's 5-bit codes: `blocks` runs of 20 bytes (u32 qh, little-endian,
// then 16 bytes qs) to 32 codes each (code j < 16: qs[j] low nibble, qh bit
// j; code j + 16: qs[j] high nibble, qh bit j + 16), and back.
void q5_unpack(const uint8_t* in, uint64_t blocks, uint8_t* codes);
void q5_pack(const uint8_t* codes, uint64_t blocks, uint8_t* out);

// Builds the three derived streams of `groups` groups of `group` codes
// (group even): first[groups], gaps[groups × 15], index[groups × group / 2]
// (two indices a byte, the even code in the low nibble). Values are ordered
// as int8 when is_signed, else as uint8. Returns false (outputs undefined)
// where a group has more than 16 distinct values.
bool palette_build(const uint8_t* codes, uint64_t groups, uint32_t group, bool is_signed, uint8_t* first,
                   uint8_t* gaps, uint8_t* index);

// The inverse: rebuilds the codes from the derived streams. Refuses (naming
// `what`, the group, the field and the value) a gap after the palette's
// end (zero gap then a non-zero one: entries not strictly increasing), a
// palette running past the largest value of its order, and an index at or
// beyond the palette's count. max_value: the largest code (255; 31 for
// 5-bit codes; as a rank: int8 codes rank -128..127 as 0..255).
// groups_fn: the reconstruction of a vector decoder path
// (palette_groups_vector), used for groups of a multiple of 32 codes, or
// null for the portable loop; the same codes and the same refusals either
// way.
using PaletteGroupsFn = bool (*)(const uint8_t* first, const uint8_t* gaps, const uint8_t* index, uint64_t groups,
                                 uint32_t group, bool is_signed, uint32_t max_value, uint8_t* codes);
Status palette_reconstruct(const uint8_t* first, const uint8_t* gaps, const uint8_t* index, uint64_t groups,
                           uint32_t group, bool is_signed, uint8_t* codes, const std::string& what,
                           uint32_t max_value = 255, PaletteGroupsFn groups_fn = nullptr);

// The vector reconstruction (codec/decompress/split_palette_hwy.cpp: group
// a multiple of 32; true when every group keeps the rules, false, codes
// partly written, where one does not), or null on the scalar path and in
// builds without a Highway decoder path.
PaletteGroupsFn palette_groups_vector();

}  // namespace wcodec
