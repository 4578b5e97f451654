// tests/edge_cases.h — a generated catalogue of valid but unusual
// safetensors files (every dtype, scalars, zero-size tensors, odd shapes,
// huge metadata, many tiny tensors, quantized-checkpoint look-alikes) for
// round-trip tests of the parser and of the codec.
// Generation is deterministic (fixed seeds) and takes well under a second.
// Thread-safety: pure functions; each call builds fresh values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wctest {

struct EdgeCase {
  std::string name;           // unique, usable in a file name ([a-z0-9_])
  std::vector<uint8_t> file;  // a complete, valid safetensors file
};

// All edge cases, in a fixed order; about 2 MB in total.
std::vector<EdgeCase> make_edge_cases();

// A small file laid out like the rtn-int4 checkpoints in ../shared/data:
// for each of a few layers, `layers.N.w_packed` U8 [rows, cols/2] (two 4-bit
// codes per byte, low nibble first), `layers.N.w_scale` F16 [rows, cols/32],
// `layers.N.w_zero` U8 [rows, cols/32], plus F32 norms and an F16 bias, and a
// __metadata__ like the real files.
std::vector<uint8_t> make_named_model_like_file();

// Realistic tensors of kinds whose small edge cases go without a model (a
// model must save more than its record costs): I8, U8 (int4 nibbles named
// w_packed) and F8 E5M2, each [640, 1024] (three chunks of the default
// size), large enough that their models pay, so paths that decode
// model-coded chunks of these kinds stay tested.
std::vector<uint8_t> make_model_kinds_file();

// One smooth int8 tensor [256, 256] (slow waves plus a little noise): the
// encoder chooses intra prediction and the 8x8 transforms on it, so the tile
// tools that real weights rarely choose stay tested.
std::vector<uint8_t> make_smooth_int8_file();

// Conversions used by the generator, exposed for other tests.
uint16_t float_to_bf16(float f);  // round to nearest even; NaN stays NaN
uint16_t float_to_f16(float f);   // round to nearest even, subnormals, ±inf

}  // namespace wctest
