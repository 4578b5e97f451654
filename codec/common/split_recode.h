// codec/common/split_recode.h — recoded split streams (format 2.7,
// docs/wcodec-format.md §8.6): a split stream whose bytes are transformed,
// block by block and losslessly, before its model codes them, so that an
// ordinary model sees a steadier distribution:
//   - zero-point shift (kRecodeZeroShift): every 4-bit code of a Q4_1-like
//     block (x = d × code + m) is rotated by 8 − round(−m / d) (mod 16), so
//     the code of x = 0 sits near 8 in every block instead of wherever the
//     block's range put it; d and m come from the block's fp16 fields,
//     which earlier streams hold;
//   - fp16 as bf16 (kRecodeF16AsBf16): fp16 values whose low 3 mantissa
//     bits are all zero (a minimum taken from bf16 weights) are coded as the
//     same values in bf16, whose 7 mantissa bits the float model codes
//     without 3 wasted bits each;
//   - 3-bit codes (kRecodeQ3Codes, format 2.8): a Q3_K block's 256 codes,
//     split by ggml over 32 bytes of high bits (hmask) and 64 bytes of
//     2-bit pairs (qs), coded as one code (0..7) per byte in element
//     order, so that the model sees each code whole;
//   - the forced zero apart (kRecodeZeroPos, format 2.9): 4-bit codes in
//     groups of 32 (ggml's Q4_0 layout: 16 bytes, element e < 16 in the low
//     nibble of byte e, element e >= 16 in the high nibble of byte e − 16)
//     where every group holds a code 0 (llama.cpp's Q4_0 quantizer maps
//     each block's largest |x| to code 0): the position of each group's
//     first 0 and the group's other 31 codes, one per byte, as two derived
//     streams, so that the 0 every group must hold is not coded as a code.
// Shared by the encoder (forward) and every decoder (inverse).
//
// Thread-safety: pure functions over their arguments.
#pragma once

#include <cstdint>
#include <string>

#include "wcodec/status.h"

namespace wcodec {

enum SplitRecode : uint8_t {
  kRecodeNone = 0,
  kRecodeZeroShift = 1,  // 4-bit codes rotated by the block's zero point (u16 d_off, u16 m_off follow)
  kRecodeF16AsBf16 = 2,  // fp16 values with 3 low zero mantissa bits, coded as bf16
  kRecodeQ3Codes = 3,    // Q3_K's hmask + qs (96 bytes) coded as 256 bytes of 3-bit codes (format 2.8)
  kRecodeZeroPos = 4,    // 4-bit code groups of 32 with a 0 each: its position + 31 codes, derived streams (format 2.9)
};
inline constexpr uint8_t kRecodeLast = kRecodeZeroPos;
// kRecodeZeroPos: the stream's bytes per group of 32 codes, the group's
// codes, and the derived streams (positions, other codes) in order.
inline constexpr uint32_t kZpGroupBytes = 16;
inline constexpr uint32_t kZpCodes = 32;
enum ZeroPosDerived : uint32_t { kZpPos = 0, kZpRest = 1, kZpDerivedCount = 2 };
// kRecodeQ3Codes: the stream's bytes per block (32 of hmask, then 64 of
// qs) and its coded bytes per block (one code per element).
inline constexpr uint32_t kQ3StreamBytes = 96;
inline constexpr uint32_t kQ3Codes = 256;

// The rotation of a block's codes: (8 − zr) mod 16, zr = round(−m / d)
// clamped to 0..15 (float32 division of the exact fp16 values; 8 when d is
// not a positive finite number or m is not finite: no rotation).
uint8_t zero_shift_of(uint16_t d_bits, uint16_t m_bits);
// zero_shift_of of n blocks of block_bytes at `blocks` (d and m: the
// little-endian fp16 at d_off and m_off of each block) into shifts[n].
void zero_shifts_of(const uint8_t* blocks, uint64_t n, uint32_t block_bytes, uint32_t d_off, uint32_t m_off,
                    uint8_t* shifts);
// The same on a vector decoder path (codec/decompress/split_zero_shift_hwy.cpp:
// the same shifts bit for bit), or null on the scalar path and in builds
// without a Highway decoder path.
using ZeroShiftsFn = void (*)(const uint8_t* blocks, uint64_t n, uint32_t block_bytes, uint32_t d_off,
                              uint32_t m_off, uint8_t* shifts);
ZeroShiftsFn zero_shifts_vector();

// Rotates every nibble of the n bytes at p by `shift` (forward) or back.
void rotate_nibbles(uint8_t* p, uint32_t n, uint8_t shift, bool forward);
// rotate_nibbles(p + b * n, n, shifts[b], false) for the `blocks` blocks of
// n bytes at p, in one loop.
void unrotate_blocks(uint8_t* p, uint64_t blocks, uint32_t n, const uint8_t* shifts);

// fp16 bits with the low 3 mantissa bits zero -> the same value's bf16
// bits (exact). REQUIRES: (h & 7) == 0.
uint16_t f16_to_bf16_exact(uint16_t h);
// The inverse: false where the bf16 value is no such fp16 value (outside
// fp16's range, or more mantissa bits than the fp16 keeps).
bool bf16_to_f16_exact(uint16_t b, uint16_t* h);

// Whether every 16-bit little-endian element of the n bytes at p (n even)
// is an fp16 value with its low 3 mantissa bits zero.
bool f16_low3_zero(const uint8_t* p, uint64_t n);
// The forward / inverse transform of n bytes of 16-bit elements in place;
// the inverse refuses (naming `what`, the element and its value) a value
// that is no fp16 value with 3 low zero bits.
void f16_to_bf16_inplace(uint8_t* p, uint64_t n);
Status bf16_to_f16_inplace(uint8_t* p, uint64_t n, const std::string& what);

// kRecodeQ3Codes: the 96 stream bytes of each of `blocks` blocks (hmask,
// then qs) -> 256 codes each, element e = 128h + 32j + l (h < 2, j < 4,
// l < 32) holding ((qs[32h + l] >> 2j) & 3) | ((hmask[l] >> (4h + j)) & 1) << 2
// (ggml's value is the code − 4).
void q3_codes_unpack(const uint8_t* in, uint64_t blocks, uint8_t* codes);
// The inverse; refuses (naming `what`, the element and its value) a code
// above 7.
Status q3_codes_pack(const uint8_t* codes, uint64_t blocks, uint8_t* out, const std::string& what);

// kRecodeZeroPos: splits `groups` groups of 16 bytes at `in` into each
// group's first-0 position (0..31, one byte each, at pos) and its other 31
// codes in element order (one per byte, 31 per group, at rest). Returns
// false (writing partial output) where a group holds no code 0.
bool zero_pos_split(const uint8_t* in, uint64_t groups, uint8_t* pos, uint8_t* rest);
// The inverse; refuses (naming `what`, the group and the value) a position
// above 31, a code above 15, and a 0 before the group's position (the
// position is the first 0's: one encoding per group).
// join: the join of a vector decoder path (zero_pos_join_vector), or null
// for the portable loop; the same bytes and the same refusals either way.
using ZeroPosJoinFn = bool (*)(const uint8_t* pos, const uint8_t* rest, uint64_t groups, uint8_t* out);
Status zero_pos_join(const uint8_t* pos, const uint8_t* rest, uint64_t groups, uint8_t* out,
                     const std::string& what, ZeroPosJoinFn join = nullptr);
// The vector join (codec/decompress/split_zero_pos_hwy.cpp: true when every
// group keeps the rules; false, output partly written, where one does not),
// or null on the scalar path and in builds without a Highway decoder path.
ZeroPosJoinFn zero_pos_join_vector();

}  // namespace wcodec
