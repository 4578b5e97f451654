// tests/fuzz/fuzz_encode.cpp — libFuzzer target for the encoder: every
// valid safetensors file must encode, and decode to the same bytes.
//
// The input describes one tensor (and, for packed 4-bit codes, its scale and
// zero-point tensors, so that the zero-point model runs):
//   byte 0     dtype / kind (I8, U8, packed U8 named "w_packed", F16, BF16,
//              F32, F8 E4M3, F8 E5M2, I32 named "qweight", I16, F64, BOOL)
//   byte 1     value style: 0 the input bytes cycled; 1 small magnitudes
//              (|v| <= byte 2); 2 weight-like (a smooth random walk plus
//              noise, scaled by byte 2); 3 a constant with sparse spikes
//   byte 2     the style's parameter
//   bytes 3-6  rows, cols (16-bit each, 1..600)
//   byte 7     chunk size: 4 KiB << (byte 7 % 5)
//   the rest   the bytes cycled (style 0) or the random seed
// Oracle: encode_safetensors succeeds, the container opens, every byte
// reads back equal, and verify(full) passes (SHA-256, tensor CRCs).
//
// Build and run as fuzz_container (see README.md):
//   build-fuzz/tests/fuzz/fuzz_encode -max_len=4096 -max_total_time=900
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "edge_cases.h"
#include "fuzz_util.h"
#include "wcodec/container.h"
#include "wcodec/safetensors.h"

namespace {

using wcodec::DType;

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "fuzz_encode: %s\n", msg.c_str());
  std::abort();
}

struct Kind {
  DType dtype;
  const char* name;
  unsigned bytes;  // per stored element
};
constexpr Kind kKinds[] = {
    {DType::kI8, "w", 1},         {DType::kU8, "w", 1},          {DType::kU8, "w_packed", 1},
    {DType::kF16, "w", 2},        {DType::kBF16, "w", 2},        {DType::kF32, "w", 4},
    {DType::kF8_E4M3, "w", 1},    {DType::kF8_E5M2, "w", 1},     {DType::kI32, "qweight", 4},
    {DType::kI16, "w", 2},        {DType::kF64, "w", 8},         {DType::kBOOL, "w", 1},
};

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The element bytes of one value (little-endian) for the kind.
void put_value(const Kind& k, double v, uint8_t* out) {
  switch (k.dtype) {
    case DType::kF16: {
      const uint16_t h = wctest::float_to_f16(static_cast<float>(v));
      std::memcpy(out, &h, 2);
      break;
    }
    case DType::kBF16: {
      const uint16_t h = wctest::float_to_bf16(static_cast<float>(v));
      std::memcpy(out, &h, 2);
      break;
    }
    case DType::kF32: {
      const float f = static_cast<float>(v);
      std::memcpy(out, &f, 4);
      break;
    }
    case DType::kF64:
      std::memcpy(out, &v, 8);
      break;
    default: {
      const int64_t q = static_cast<int64_t>(v);
      for (unsigned b = 0; b < k.bytes; ++b) out[b] = static_cast<uint8_t>(static_cast<uint64_t>(q) >> (8 * b));
    }
  }
}

std::vector<uint8_t> make_file(const uint8_t* data, size_t size, uint64_t* chunk_bytes) {
  const Kind& k = kKinds[data[0] % (sizeof kKinds / sizeof kKinds[0])];
  const int style = data[1] % 4;
  const uint32_t param = data[2];
  const uint64_t rows = 1 + (data[3] | data[4] << 8) % 600;
  uint64_t cols = 1 + (data[5] | data[6] << 8) % 600;
  *chunk_bytes = uint64_t{4096} << (data[7] % 5);
  const bool packed = std::strcmp(k.name, "w_packed") == 0;
  if (packed && cols % 16) cols += 16 - cols % 16;  // whole groups of 32 codes (16 bytes)
  const uint8_t* rest = data + 8;
  const size_t nrest = size - 8;
  uint64_t seed = 0x1234;
  for (size_t i = 0; i < nrest; ++i) seed = seed * 1099511628211ull ^ rest[i];
  const uint64_t n = rows * cols;
  std::vector<uint8_t> bytes(n * k.bytes);
  double walk = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint8_t* e = bytes.data() + i * k.bytes;
    switch (style) {
      case 0:
        for (unsigned b = 0; b < k.bytes; ++b) e[b] = nrest ? rest[(i * k.bytes + b) % nrest] : 0;
        break;
      case 1: {
        const int64_t m = static_cast<int64_t>(param % 128);
        const int64_t v = static_cast<int64_t>(splitmix(seed) % static_cast<uint64_t>(2 * m + 1)) - m;
        const bool is_float = k.dtype == DType::kF16 || k.dtype == DType::kBF16 || k.dtype == DType::kF32 ||
                              k.dtype == DType::kF64;
        if (is_float) put_value(k, static_cast<double>(v) / 64.0, e);
        else if (k.dtype == DType::kU8) e[0] = static_cast<uint8_t>(packed ? (v & 0xFF) : v + 128);
        else put_value(k, static_cast<double>(v), e);
        break;
      }
      case 2: {
        const double noise = static_cast<double>(splitmix(seed) % 2001) / 1000.0 - 1.0;
        walk = 0.95 * walk + 0.05 * noise;
        const double v = (walk + 0.3 * noise) * (1 + param);
        if (k.dtype == DType::kU8) e[0] = static_cast<uint8_t>(static_cast<int64_t>(v) + 128);
        else if (k.dtype == DType::kF16 || k.dtype == DType::kBF16 || k.dtype == DType::kF32 ||
                 k.dtype == DType::kF64)
          put_value(k, v / 256.0, e);
        else put_value(k, v, e);
        break;
      }
      default: {
        const bool spike = splitmix(seed) % 97 < param % 8;
        for (unsigned b = 0; b < k.bytes; ++b) e[b] = spike ? static_cast<uint8_t>(splitmix(seed)) : (nrest ? rest[0] : 0);
      }
    }
    if (k.dtype == DType::kBOOL) e[0] &= 1;
  }
  std::vector<wcodec::TensorData> ts;
  ts.push_back({k.name, k.dtype, {rows, cols}, std::move(bytes)});
  if (packed) {
    // 4-bit codes, two per byte, groups of 32 codes: scale F16 and zero U8
    // [rows, cols * 2 / 32].
    const uint64_t groups = cols * 2 / 32;
    std::vector<uint8_t> scale(rows * groups * 2), zero(rows * groups);
    for (uint64_t i = 0; i < rows * groups; ++i) {
      const uint16_t h = wctest::float_to_f16(0.01f * static_cast<float>(1 + splitmix(seed) % 16));
      std::memcpy(scale.data() + 2 * i, &h, 2);
      zero[i] = static_cast<uint8_t>(param % 3 == 0 ? 8 : splitmix(seed) % 16);
    }
    ts.push_back({"w_scale", DType::kF16, {rows, groups}, std::move(scale)});
    ts.push_back({"w_zero", DType::kU8, {rows, groups}, std::move(zero)});
  }
  auto file = wcodec::build_safetensors(ts, std::nullopt);
  if (!file.ok()) die("cannot build the input file: " + file.status().ToString());
  return std::move(*file);
}

}  // namespace

// The libFuzzer entry point; the replay test links both targets under other
// names (WCODEC_FUZZ_ENTRY).
#ifndef WCODEC_FUZZ_ENTRY
#define WCODEC_FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif
extern "C" int WCODEC_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t chunk_bytes = 0;
  const std::vector<uint8_t> original = make_file(data, size, &chunk_bytes);
  wcodec::EncodeConfig cfg;
  cfg.chunk_bytes = chunk_bytes;
  auto enc = wcodec::encode_safetensors(original.data(), original.size(), cfg, "fuzz input");
  if (!enc.ok()) die("a valid file did not encode: " + enc.status().ToString());
  const int fd = wcfuzz::memfd_with(*enc);
  if (fd < 0) die("cannot write the encoding to a memfd");
  auto r = wcodec::Reader::open(wcfuzz::memfd_path(fd));
  if (!r.ok()) die("the encoding does not open: " + r.status().ToString());
  std::vector<uint8_t> back(original.size());
  const auto st = (*r)->read(0, back.size(), back.data());
  if (!st.ok()) die("the encoding does not read back: " + st.ToString());
  if (back != original) die("the encoding reads back different bytes");
  const auto vst = (*r)->verify(true);
  if (!vst.ok()) die("verify(full) failed: " + vst.ToString());
  close(fd);
  return 0;
}
