// codec/decompress/chunk_decode_fast.h — the portable fast decoders of the
// scalar decoder path (include/wcodec/cpu.h): plain C++ for every CPU (no
// intrinsics, no Highway), so that CPUs without AVX2 / AVX-512 (older x86,
// aarch64 today, RISC-V, POWER) and WCODEC_CPU=scalar decode at a useful
// speed. The reference decoders (chunk_decode.h) stay the reference and
// decode what these decline.
//
// Method (chunk_decode_fast_*.cpp): the 32 lanes step together, one symbol
// slot at a time, each lane's state chain independent of the others, so
// the core overlaps their table loads; the step is specialised per model
// configuration (templates over the context form; per-model lookup tables
// map a neighbour to its context's table offset); a lane's left neighbour
// stays in a small local array, its top neighbour is the element stored W
// steps back in a lane-major buffer (step t, lane l at t * 32 + l); a
// last pass moves the lane-major elements to raster order. The tables are
// the reference decoder's own (4 KiB slot -> symbol bytes and 1 KiB
// frequency / start words per context).
//
// Every read is bounded: the last words of the stream are read from a
// zero-padded copy, and a stream that runs short, ends with words left or
// leaves a lane away from its initial state is rejected (0) exactly where
// the reference rejects it.
// Thread-safety: pure functions over their arguments and the caller's
// scratch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "chunk_decode.h"

namespace wcodec {

// Scratch bytes the fast decoders need for a chunk (lane-major elements
// of up to 4 bytes, the int residuals' neighbour rows).
size_t fast_lane_major_bytes(const ChunkView& cv);

// decode_float_chunk's result with the fast decoder: 1 decoded (the same
// bytes as decode_float_chunk), 0 malformed (decode_float_chunk returns
// false), -1 not handled (the model's tables are not the reference
// decoder's contiguous tables, or a configuration it does not decode).
// m: a view with the reference tables (t0 / t1). lm: fast_lane_major_bytes
// (cv) bytes of scratch.
int decode_float_chunk_fast(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                            const uint8_t* raw, uint64_t raw_len, uint8_t* out, uint8_t* lm, bool tail);

// decode_int_residuals + int_finish_chunk with the fast decoder: 1 decoded
// (the same bytes), 0 malformed, -1 not handled (a configuration it does
// not decode: tables not laid out as the reference's, an invalid model).
// Ternary chunks whose tables code only 0, -1, +1 take the ternary loop
// (chunk_decode_fast_tern.cpp), the rest the general int loop. res,
// tmp_tile as for int_finish_chunk; lm: fast_lane_major_bytes(cv) bytes of
// scratch.
int decode_int_chunk_fast(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
                          uint32_t rans_len, uint8_t* out, int32_t* res, int32_t* tmp_tile, uint8_t* lm);

// decode_bytes_chunk with the fast decoder (chunk_decode_fast_bytes.cpp):
// 1 decoded (the same bytes), 0 malformed, -1 not handled (elements of
// other than 1, 2, 4 or 8 bytes, or a view without the flattened reference
// tables, ModelView::sym_small / fs_small).
int decode_bytes_chunk_fast(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                            uint8_t* out);

}  // namespace wcodec
