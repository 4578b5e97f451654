// tests/fuzz/fuzz_packed_ternary.cpp — libFuzzer target for the packed
// ternary reader (wcodec/packed_ternary.h).
//
// Input: byte 0 out_features (0..63), byte 1 in_features (0..255), byte 2
// bit 0 the layout, bit 1 the layout preference; the rest the packed bytes.
// Oracles: detect_packed_ternary accepts the shape it is given for its own
// layout; unpack_ternary either refuses (kCorruption) or returns values that
// pack_ternary turns back into exactly the input bytes; rows whose length is
// a multiple of 256 survive TQ2_0 and back.
// Thread-safety: single-threaded harness.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "wcodec/packed_ternary.h"

namespace {
[[noreturn]] void die(const std::string& m) {
  std::fprintf(stderr, "fuzz_packed_ternary: %s\n", m.c_str());
  std::abort();
}
}  // namespace

#ifndef WCODEC_FUZZ_ENTRY
#define WCODEC_FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif
extern "C" int WCODEC_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  wcodec::PackedTernary p;
  p.out_features = data[0] % 64;
  p.in_features = data[1];
  p.layout = (data[2] & 1) ? wcodec::TernaryLayout::kTransposed : wcodec::TernaryLayout::kRowMajor;
  if (p.out_features && !p.in_features) return 0;
  const std::vector<uint64_t> shape = p.layout == wcodec::TernaryLayout::kRowMajor
                                          ? std::vector<uint64_t>{p.out_features, p.packed_cols()}
                                          : std::vector<uint64_t>{p.packed_cols(), p.out_features};
  auto d = wcodec::detect_packed_ternary(shape, p.out_features, p.in_features, p.layout == wcodec::TernaryLayout::kTransposed, "f");
  if (!d.ok() || d->layout != p.layout) die("own shape not detected");
  std::vector<uint8_t> in(data + 3, data + size);  // exact size: ASan sees overreads
  std::vector<int8_t> v(p.out_features * p.in_features + 1);
  const wcodec::Status s = wcodec::unpack_ternary(in.data(), in.size(), p, v.data(), "f");
  if (!s.ok()) {
    if (s.code() != wcodec::Code::kCorruption) die("unexpected refusal: " + s.ToString());
    return 0;
  }
  auto back = wcodec::pack_ternary(v.data(), p, "f");
  if (!back.ok() || *back != in) die("accepted bytes do not pack back");
  return 0;
}
