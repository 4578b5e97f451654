// codec/decompress/chunk_decode_hwy.h — the decoders of the avx2 and neon
// decoder paths (include/wcodec/cpu.h), written with Google Highway
// (chunk_decode_hwy_*.cpp: float, ternary and int chunks). Each function
// runs the AVX2 instance on x86-64 and the NEON one on aarch64; where
// this build compiles neither, it returns -1. "x86" and "AVX2" below
// read "x86 or aarch64" and "AVX2 or NEON".
//
// Thread-safety: pure functions over their arguments and the caller's
// scratch.
#pragma once

#include <cstdint>

#include "chunk_decode.h"
#include "chunk_decode_simd.h"

namespace wcodec {

// decode_float_chunk_simd's contract with the AVX2 instance of the Highway
// decoder: 1 decoded (the same bytes as decode_float_chunk), 0 malformed,
// -1 not handled here (not x86, or a model configuration it does not
// decode). The caller checks that the CPU runs the avx2 path. lm: scratch
// of simd_lane_major_bytes(cv) bytes (the exponent and sign/mantissa
// grids).
int decode_float_chunk_hwy(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                           const uint8_t* raw, uint64_t raw_len, uint8_t* out, uint8_t* lm, bool tail);

// decode_int_chunk_simd's contract for ternary chunks (int model sub 3)
// with the AVX2 instance of the Highway ternary decoder
// (chunk_decode_hwy_tern.cpp): 1 decoded (the same bytes as
// decode_int_residuals + int_finish_chunk), 0 malformed, -1 not handled
// here (not x86, not ternary, a tile map, a table that codes a token other
// than 0..2, lanes of different rectangles, or a context form it does not
// decode). The caller checks that the CPU runs the avx2 path. lm: scratch
// of simd_lane_major_bytes(cv) bytes.
int decode_tern_chunk_hwy(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
                          uint32_t rans_len, uint8_t* out, uint8_t* lm);

// decode_group_simd's contract (chunk_decode_simd.h) on the avx2 path: n
// (2 or 3) chunks of 16-bit float models that share a step loop and of one
// same-rectangle geometry, decoded together by the AVX2 instance. 1 all
// decoded, 0 a stream is malformed (decode each alone to learn which), -1
// not handled here (the caller decodes each alone).
struct GroupSide;
int decode_float_group_hwy(const ModelView* models, const ChunkView& cv, const GroupSide* sides, int n);

// decode_int_chunk_simd's contract with the AVX2 instance of the Highway
// int decoder (chunk_decode_hwy_int.cpp): int8, uint8 and 4-bit codes
// without tile map or zero points, activity (nbr_mode 0) or kernel
// (nbr_mode 3) contexts with thresholds below 256, with or without scale
// classes, chunks whose 32 lanes share one rectangle size. 1 decoded (the same bytes as
// decode_int_residuals + int_finish_chunk), 0 malformed, -1 not handled
// here (not x86, ternary codes, or another configuration). The caller
// checks that the CPU runs the avx2 path. lm: scratch of
// simd_lane_major_bytes(cv) bytes.
int decode_int_chunk_hwy(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
                         uint32_t rans_len, uint8_t* out, uint8_t* lm);
// decode_group_simd's contract with the same decoder: n (2 or 3) chunks of
// one rectangle size whose models share a step loop (int_loop_compatible:
// no scale classes) decoded with their lanes' state chains interleaved. 1 all decoded, 0 a
// stream is malformed (decode each alone to learn which), -1 not handled
// here.
int decode_int_group_hwy(const ModelView* models, const ChunkView& cv, const GroupSide* sides, int n);

// The bytes-model chunk decoder (chunk_decode_hwy_bytes.cpp): elements of
// 1, 2, 4 or 8 bytes, either context mode, lanes of any rectangles. 1
// decoded (the same bytes as decode_bytes_chunk), 0 malformed, -1 not
// handled here (not x86 or aarch64, another element size, or a view
// without the flattened reference tables). The caller checks that the CPU
// runs a vector path.
int decode_bytes_chunk_hwy(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                           uint8_t* out);

}  // namespace wcodec
