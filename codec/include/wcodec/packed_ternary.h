// wcodec/packed_ternary.h — packed ternary weights (seed 001, "Packed
// Ternary Weight Format"): four weights of {-1, 0, +1} per byte, 2 bits
// each, weight 0 in bits 0-1 (0 → 00, +1 → 01, -1 → 10, 11 reserved), rows
// padded with 00 codes to a multiple of 4 weights; and ggml's TQ2_0 blocks,
// the GGUF type such a matrix maps to exactly (with a per-row scale, rows a
// multiple of 256). Layouts, the choice between them and the refusals are
// in docs/packed-ternary.md.
// Thread-safety: pure functions over caller-owned memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "wcodec/status.h"

namespace wcodec {

enum class TernaryLayout : uint8_t {
  kRowMajor = 0,    // U8 [out_features][ceil(in_features / 4)] (the seed's storage layout)
  kTransposed = 1,  // U8 [ceil(in_features / 4)][out_features] (the inference layout)
};

struct PackedTernary {
  uint64_t out_features = 0;
  uint64_t in_features = 0;
  TernaryLayout layout = TernaryLayout::kRowMajor;
  uint64_t packed_cols() const { return (in_features + 3) / 4; }  // bytes per output row
  uint64_t nbytes() const { return out_features * packed_cols(); }
};

// The layout of a packed U8 tensor of `shape` holding an out × in matrix:
// row-major when shape = {out, ceil(in/4)}, transposed when shape =
// {ceil(in/4), out}. When both match (out = ceil(in/4)) the shape cannot
// tell them apart: `prefer_transposed` decides (false: row-major). Refused,
// naming `what` and the shapes: anything else (not 2-D, a zero dimension
// with a non-zero one, in = 0 with out > 0).
Result<PackedTernary> detect_packed_ternary(const std::vector<uint64_t>& shape, uint64_t out_features,
                                            uint64_t in_features, bool prefer_transposed, const std::string& what);

// Unpacks `n` = p.nbytes() bytes into values[out][in] (-1, 0, +1). Refused,
// naming `what`, the byte offset, the byte and the weight (row, column): a
// reserved 11 code, and a non-zero code in a row's padding; n ≠ p.nbytes().
Status unpack_ternary(const uint8_t* packed, uint64_t n, const PackedTernary& p, int8_t* values,
                      const std::string& what);

// Packs values[out][in] (each -1, 0 or +1; others refused) in layout p.
Result<std::vector<uint8_t>> pack_ternary(const int8_t* values, const PackedTernary& p, const std::string& what);

// ggml TQ2_0: a block of 256 weights is 64 bytes of 2-bit codes (value + 1:
// 0, 1, 2; byte 32·h + m holds weights 128·h + m + 32·k in bits 2k..2k+1)
// followed by the fp16 scale d (little-endian), 66 bytes in all.
inline constexpr uint64_t kTq2Block = 256, kTq2BlockBytes = 66;

// One row of `in` values (in a multiple of 256) with the fp16 scale
// `d_f16` as in / 256 TQ2_0 blocks (every block gets the row's scale).
Status ternary_row_to_tq2_0(const int8_t* row, uint64_t in, uint16_t d_f16, uint8_t* out, const std::string& what);

// The inverse, for checks: the values of in / 256 blocks and the scale of
// the first. Refused: a 3 code, blocks with different scales.
Status tq2_0_to_ternary_row(const uint8_t* blocks, uint64_t in, int8_t* row, uint16_t* d_f16,
                            const std::string& what);

}  // namespace wcodec
