// tests/gguf_quant_util.h — GGUF files of block-quantized ggml types for the
// split-model tests and the container fuzzer's seeds: every block's fields
// laid out as llama.cpp's block structs lay them (ggml-common.h), filled
// from real weights (stories260K's F32 tensors where the data directory has
// them): fp16 scales from each block's range, codes quantized from its
// weights. The bytes need not be what llama-quantize would write (the
// codec is lossless for any bytes); they have the statistics of real
// quantized blocks.
//
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "wcodec/gguf.h"
#include "wcodec/safetensors.h"

namespace wctest {

// A field of a block: bytes [off, off + len) holding one kind of value.
enum class QField { kF16Scale, kF16Min, kF32Scale, kI8, kNibbles, kCrumbs };
struct QFieldSpec {
  uint16_t off, len;
  QField kind;
};
struct QTypeSpec {
  uint32_t type;
  uint32_t block;  // elements per block
  uint32_t bytes;  // bytes per block
  std::vector<QFieldSpec> fields;
};

// llama.cpp's block layouts (ggml-common.h) of the types the tests cover.
inline const std::vector<QTypeSpec>& quant_specs() {
  using F = QField;
  static const std::vector<QTypeSpec> s = {
      {2, 32, 18, {{0, 2, F::kF16Scale}, {2, 16, F::kNibbles}}},                                       // Q4_0
      {3, 32, 20, {{0, 2, F::kF16Scale}, {2, 2, F::kF16Min}, {4, 16, F::kNibbles}}},                   // Q4_1
      {6, 32, 22, {{0, 2, F::kF16Scale}, {2, 4, F::kCrumbs}, {6, 16, F::kNibbles}}},                   // Q5_0
      {7, 32, 24, {{0, 2, F::kF16Scale}, {2, 2, F::kF16Min}, {4, 4, F::kCrumbs}, {8, 16, F::kNibbles}}},  // Q5_1
      {8, 32, 34, {{0, 2, F::kF16Scale}, {2, 32, F::kI8}}},                                            // Q8_0
      {10, 256, 84, {{0, 16, F::kNibbles}, {16, 64, F::kCrumbs}, {80, 2, F::kF16Scale}, {82, 2, F::kF16Min}}},  // Q2_K
      {11, 256, 110, {{0, 32, F::kCrumbs}, {32, 64, F::kCrumbs}, {96, 12, F::kNibbles}, {108, 2, F::kF16Scale}}},  // Q3_K
      {12, 256, 144, {{0, 2, F::kF16Scale}, {2, 2, F::kF16Min}, {4, 12, F::kNibbles}, {16, 128, F::kNibbles}}},  // Q4_K
      {13, 256, 176,
       {{0, 2, F::kF16Scale}, {2, 2, F::kF16Min}, {4, 12, F::kNibbles}, {16, 32, F::kCrumbs}, {48, 128, F::kNibbles}}},  // Q5_K
      {14, 256, 210, {{0, 128, F::kNibbles}, {128, 64, F::kCrumbs}, {192, 16, F::kI8}, {208, 2, F::kF16Scale}}},  // Q6_K
      {20, 32, 18, {{0, 2, F::kF16Scale}, {2, 16, F::kNibbles}}},                                      // IQ4_NL
      {23, 256, 136, {{0, 2, F::kF16Scale}, {2, 6, F::kNibbles}, {8, 128, F::kNibbles}}},              // IQ4_XS
      {34, 256, 54, {{0, 48, F::kCrumbs}, {48, 4, F::kCrumbs}, {52, 2, F::kF16Scale}}},                 // TQ1_0
      {35, 256, 66, {{0, 64, F::kCrumbs}, {64, 2, F::kF16Scale}}},                                     // TQ2_0
  };
  return s;
}

inline const QTypeSpec* quant_spec(uint32_t type) {
  for (const auto& s : quant_specs())
    if (s.type == type) return &s;
  return nullptr;
}

// IEEE half of a normal float (round to nearest even; flushes tiny values to 0).
inline uint16_t to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  int32_t e = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t m = x & 0x7fffff;
  if (e <= 0) return static_cast<uint16_t>(sign);
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7bff);
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (m >> 13);
  const uint32_t rest = m & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

// Real weights: the F32 tensors of stories260K.f32.safetensors in `dir`
// (empty if missing).
inline std::vector<float> real_weights(const std::string& dir) {
  std::ifstream in(dir + "/stories260K.f32.safetensors", std::ios::binary);
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), {});
  std::vector<float> w;
  auto h = wcodec::parse_safetensors_header(file.data(), file.size(), file.size(), "weights");
  if (!h.ok()) return w;
  for (const auto& t : h->tensors) {
    if (t.dtype != wcodec::DType::kF32 || t.nbytes() < 4096) continue;
    const size_t n = t.nbytes() / 4;
    const size_t at = w.size();
    w.resize(at + n);
    std::memcpy(w.data() + at, file.data() + h->data_start + t.begin, n * 4);
  }
  return w;
}

// Gaussian weights (a seeded stand-in where the data directory is absent).
inline std::vector<float> gaussian_weights(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> w(n);
  for (auto& v : w) v = nd(rng);
  return w;
}

#ifdef WCODEC_DATA_DIR
// Real weights that do not repeat: the first 2^21 weights of the F16
// tensors of isnet-medium.f16.safetensors in WCODEC_DATA_DIR (seeded
// Gaussian ones where it is absent). Read once.
inline const std::vector<float>& isnet_weights() {
  static const std::vector<float> w = [] {
    std::vector<float> r;
    std::ifstream in(std::string(WCODEC_DATA_DIR) + "/isnet-medium.f16.safetensors", std::ios::binary);
    std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), {});
    auto h = wcodec::parse_safetensors_header(file.data(), file.size(), file.size(), "weights");
    if (h.ok())
      for (const auto& t : h->tensors) {
        if (t.dtype != wcodec::DType::kF16 || t.nbytes() < 4096) continue;
        const uint8_t* p = file.data() + h->data_start + t.begin;
        for (uint64_t i = 0; i < t.nbytes() / 2 && r.size() < (1u << 21); ++i) {
          const uint16_t v = static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8);
          const int e = (v >> 10) & 31, m = v & 1023;
          const float a = e == 0 ? std::ldexp(static_cast<float>(m), -24)
                                 : std::ldexp(static_cast<float>(1024 + m), e - 25);
          r.push_back(e == 31 ? 0.0f : (v & 0x8000) ? -a : a);
        }
      }
    return r.size() < (1u << 21) ? gaussian_weights(1 << 21, 17) : r;
  }();
  return w;
}
#endif

// The blocks of `rows` rows of `ne0` elements of ggml type `spec`, quantized
// from w (read cyclically from `*at`).
inline std::vector<uint8_t> quantize_rows(const QTypeSpec& spec, uint64_t ne0, uint64_t rows,
                                          const std::vector<float>& w, size_t* at) {
  const uint64_t blocks = ne0 / spec.block * rows;
  std::vector<uint8_t> out(blocks * spec.bytes);
  std::vector<float> x(spec.block);
  for (uint64_t b = 0; b < blocks; ++b) {
    float lo = 1e30f, hi = -1e30f, amax = 0;
    for (uint32_t i = 0; i < spec.block; ++i) {
      x[i] = w[(*at)++ % w.size()];
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
      amax = std::max(amax, std::fabs(x[i]));
    }
    if (amax == 0) amax = 1e-3f;
    uint8_t* blk = out.data() + b * spec.bytes;
    auto q = [&](uint32_t i, int levels) {  // x[i] on `levels` levels over [lo, hi]
      const float t = hi > lo ? (x[i % spec.block] - lo) / (hi - lo) : 0.5f;
      return std::clamp(static_cast<int>(std::lround(t * static_cast<float>(levels - 1))), 0, levels - 1);
    };
    for (const auto& f : spec.fields) {
      uint8_t* p = blk + f.off;
      switch (f.kind) {
        case QField::kF16Scale: {
          const uint16_t h = to_f16(amax / 127.0f);
          std::memcpy(p, &h, 2);
          break;
        }
        case QField::kF16Min: {
          const uint16_t h = to_f16(lo);
          std::memcpy(p, &h, 2);
          break;
        }
        case QField::kF32Scale: {
          const float s = amax / 127.0f;
          std::memcpy(p, &s, 4);
          break;
        }
        case QField::kI8:
          for (uint32_t j = 0; j < f.len; ++j)
            p[j] = static_cast<uint8_t>(static_cast<int8_t>(std::lround(x[j % spec.block] / amax * 127.0f)));
          break;
        case QField::kNibbles:
          for (uint32_t j = 0; j < f.len; ++j)
            p[j] = static_cast<uint8_t>(q(j, 16) | q(j + f.len, 16) << 4);
          break;
        case QField::kCrumbs:
          for (uint32_t j = 0; j < f.len; ++j)
            p[j] = static_cast<uint8_t>(q(j, 3) | q(j + f.len, 3) << 2 | q(j + 2 * f.len, 3) << 4 |
                                        q(j + 3 * f.len, 3) << 6);
          break;
      }
    }
  }
  return out;
}

struct QTensor {
  std::string name;
  uint32_t type;
  int64_t ne0, ne1;
};

// A GGUF file (alignment 32, one pair) of the given tensors, their data
// quantized from w; padding zero.
inline std::vector<uint8_t> make_quant_gguf(const std::vector<QTensor>& ts, const std::vector<float>& w) {
  wcodec::GgufFile f;
  f.kv.push_back({"general.architecture", wcodec::GgufValue::str("llama")});
  uint64_t off = 0;
  std::vector<std::vector<uint8_t>> data;
  size_t at = 0;
  for (const auto& q : ts) {
    wcodec::GgufTensor t;
    t.name = q.name;
    t.n_dims = 2;
    t.ne[0] = q.ne0;
    t.ne[1] = q.ne1;
    t.type = q.type;
    t.offset = off;
    const QTypeSpec* spec = quant_spec(q.type);
    std::vector<uint8_t> d;
    if (spec) {
      d = quantize_rows(*spec, static_cast<uint64_t>(q.ne0), static_cast<uint64_t>(q.ne1), w, &at);
    } else {  // F32
      d.resize(static_cast<size_t>(q.ne0 * q.ne1) * 4);
      for (size_t i = 0; i < d.size() / 4; ++i) std::memcpy(d.data() + 4 * i, &w[(at++) % w.size()], 4);
    }
    t.nbytes = d.size();
    off += (d.size() + 31) / 32 * 32;
    f.tensors.push_back(t);
    data.push_back(std::move(d));
  }
  auto hdr = wcodec::write_gguf_header(f);
  if (!hdr.ok()) return {};
  std::vector<uint8_t> file = *hdr;
  for (auto& d : data) {
    file.insert(file.end(), d.begin(), d.end());
    file.resize((file.size() + 31) / 32 * 32, 0);
  }
  return file;
}

// Rewrites the codes of every Q8_0 block of a GGUF file's Q8_0 tensors as
// llama-quantize does when it requantizes a Q4_1 file to Q8_0 (SmolLM2's
// Q8_0): the block's values on 16 levels between its min and max (Q4_1),
// then on the int8 grid of their largest magnitude (Q8_0). At most 16
// distinct codes per block (the palette streams' case, format 2.6).
inline void requantize_q8_0_from_q4_1(std::vector<uint8_t>& file) {
  auto f = wcodec::parse_gguf(file.data(), file.size(), file.size(), "requantize");
  if (!f.ok()) return;
  for (const auto& t : f->tensors) {
    if (t.type != wcodec::kGgmlTypeQ8_0) continue;
    uint8_t* p = file.data() + f->data_offset + t.offset;
    for (uint64_t b = 0; b < t.nbytes / 34; ++b) {
      int8_t* q = reinterpret_cast<int8_t*>(p + 34 * b + 2);
      float lo = 1e9f, hi = -1e9f;
      for (int i = 0; i < 32; ++i) lo = std::min(lo, float(q[i])), hi = std::max(hi, float(q[i]));
      const float d = (hi - lo) / 15.0f;
      float y[32], amax = 0;
      for (int i = 0; i < 32; ++i) {
        y[i] = d > 0 ? lo + d * std::round((q[i] - lo) / d) : lo;
        amax = std::max(amax, std::fabs(y[i]));
      }
      for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(amax > 0 ? std::lround(y[i] / amax * 127.0f) : 0);
    }
  }
}

// Rewrites every block of a GGUF file's Q4_1 tensors as llama.cpp's
// quantize_row_q4_1 writes them from a BF16 checkpoint (SmolLM2's Q4_1):
// the block's 32 weights of w (read cyclically, rounded to bf16), m = their
// minimum (an fp16 with 3 low zero mantissa bits), d = (max − min) / 15,
// code = (x − m) / d + 0.5 truncated, at most 15: every block holds codes 0
// and 15 (the recoded streams' case, format 2.7).
inline void requantize_q4_1_from_bf16(std::vector<uint8_t>& file, const std::vector<float>& w) {
  auto f = wcodec::parse_gguf(file.data(), file.size(), file.size(), "requantize");
  if (!f.ok()) return;
  size_t at = 0;
  for (const auto& t : f->tensors) {
    if (t.type != wcodec::kGgmlTypeQ4_1) continue;
    uint8_t* p = file.data() + f->data_offset + t.offset;
    for (uint64_t b = 0; b < t.nbytes / 20; ++b) {
      float x[32], lo = 1e30f, hi = -1e30f;
      for (float& v : x) {
        uint32_t u;
        const float src = w[(at++) % w.size()];
        std::memcpy(&u, &src, 4);
        u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;  // bf16, round to nearest even
        std::memcpy(&v, &u, 4);
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      const float d = (hi - lo) / 15.0f, id = d != 0 ? 1.0f / d : 0.0f;
      uint8_t* blk = p + 20 * b;
      const uint16_t dh = to_f16(d), mh = to_f16(lo);
      std::memcpy(blk, &dh, 2);
      std::memcpy(blk + 2, &mh, 2);
      for (int j = 0; j < 16; ++j) {
        const int c0 = std::min(15, static_cast<int>((x[j] - lo) * id + 0.5f));
        const int c1 = std::min(15, static_cast<int>((x[j + 16] - lo) * id + 0.5f));
        blk[4 + j] = static_cast<uint8_t>(c0 | c1 << 4);
      }
    }
  }
}

// A Q3_K block (110 bytes: hmask, qs, 12 bytes of scales, fp16 d) of the
// 256 weights at x: each 16-element group on 8 levels of its own step
// (signed codes −4..3, the step's sign putting the group's extreme at −4
// as llama.cpp's make_q3_quants does), a 6-bit step per group packed into
// the 12 scale bytes (not ggml's packing: filler of the right size), d
// the block's largest step in fp16; each code (value + 4) written bit by
// bit in ggml's layout.
inline void fill_q3_k_block(uint8_t* blk, const float* x) {
  std::memset(blk, 0, 110);
  float amax_all = 0;
  float steps[16];
  for (int g = 0; g < 16; ++g) {
    float amax = 0, mx = 0;
    for (int i = 0; i < 16; ++i)
      if (std::fabs(x[16 * g + i]) > amax) amax = std::fabs(x[16 * g + i]), mx = x[16 * g + i];
    // As llama.cpp's make_q3_quants: the group's extreme maps to −4.
    steps[g] = amax > 0 ? -mx / 4 : 1e-6f;
    amax_all = std::max(amax_all, std::fabs(steps[g]));
  }
  for (uint32_t e = 0; e < 256; ++e) {
    const int v = std::clamp(static_cast<int>(std::lround(x[e] / steps[e / 16])), -4, 3);
    const uint32_t code = static_cast<uint32_t>(v + 4);
    // Element e = 128h + 32j + l: qs[32h + l] bits 2j..2j+1, hmask[l] bit 4h + j.
    const uint32_t h = e / 128, j = (e % 128) / 32, l = e % 32;
    blk[32 + 32 * h + l] |= static_cast<uint8_t>((code & 3) << (2 * j));
    blk[l] |= static_cast<uint8_t>(((code >> 2) & 1) << (4 * h + j));
  }
  for (int g = 0; g < 16; ++g) {
    const uint32_t s6 =
        std::min<uint32_t>(63, static_cast<uint32_t>(std::lround(std::fabs(steps[g]) / amax_all * 63)));
    blk[96 + g % 12] ^= static_cast<uint8_t>(s6 << (g / 12) * 2);
  }
  const uint16_t d = to_f16(amax_all / 63);
  std::memcpy(blk + 108, &d, 2);
}

// Rewrites every block of a GGUF file's Q3_K tensors from the weights of w
// (read cyclically) as fill_q3_k_block does.
inline void requantize_q3_k(std::vector<uint8_t>& file, const std::vector<float>& w) {
  auto f = wcodec::parse_gguf(file.data(), file.size(), file.size(), "requantize");
  if (!f.ok()) return;
  size_t at = 0;
  std::vector<float> x(256);
  for (const auto& t : f->tensors) {
    if (t.type != wcodec::kGgmlTypeQ3_K) continue;
    uint8_t* p = file.data() + f->data_offset + t.offset;
    for (uint64_t b = 0; b < t.nbytes / 110; ++b) {
      for (auto& v : x) v = w[at++ % w.size()];
      fill_q3_k_block(p + b * 110, x.data());
    }
  }
}

// The fuzz_container seed of Q3_K blocks (Gaussian weights, which do not
// repeat: its 3-bit code stream takes a model).
inline std::vector<uint8_t> q3_k_fuzz_seed() {
  const auto w = gaussian_weights(1 << 18, 21);
  auto file = make_quant_gguf({{"blk.0.ffn_down.weight", wcodec::kGgmlTypeQ3_K, 1536, 96},
                               {"output_norm.weight", wcodec::kGgmlTypeF32, 576, 1}},
                              w);
  requantize_q3_k(file, w);
  return file;
}

// Rewrites every block of a GGUF file's Q4_0 tensors as llama.cpp's
// quantize_row_q4_0_ref writes them from the weights of w (read
// cyclically): max = the block's weight of the largest magnitude, d =
// max / −8, code = x / d + 8.5 truncated, at most 15. The weight `max`
// maps to code 0, so every block holds a 0 (the forced zero, format 2.9).
inline void requantize_q4_0(std::vector<uint8_t>& file, const std::vector<float>& w) {
  auto f = wcodec::parse_gguf(file.data(), file.size(), file.size(), "requantize");
  if (!f.ok()) return;
  size_t at = 0;
  for (const auto& t : f->tensors) {
    if (t.type != wcodec::kGgmlTypeQ4_0) continue;
    uint8_t* p = file.data() + f->data_offset + t.offset;
    for (uint64_t b = 0; b < t.nbytes / 18; ++b) {
      float x[32], amax = 0, max = 0;
      for (float& v : x) {
        v = w[(at++) % w.size()];
        if (std::fabs(v) > amax) amax = std::fabs(v), max = v;
      }
      const float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
      uint8_t* blk = p + 18 * b;
      const uint16_t dh = to_f16(d);
      std::memcpy(blk, &dh, 2);
      for (int j = 0; j < 16; ++j) {
        const int c0 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
        const int c1 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
        blk[2 + j] = static_cast<uint8_t>(c0 | c1 << 4);
      }
    }
  }
}

// The fuzz_container seed of Q4_0 blocks as llama.cpp quantizes them
// (Gaussian weights: its codes take the forced zero apart, format 2.9).
inline std::vector<uint8_t> q4_0_fuzz_seed() {
  const auto w = gaussian_weights(1 << 18, 23);
  auto file = make_quant_gguf({{"blk.0.ffn_gate.weight", wcodec::kGgmlTypeQ4_0, 576, 200},
                               {"output_norm.weight", wcodec::kGgmlTypeF32, 576, 1}},
                              w);
  requantize_q4_0(file, w);
  return file;
}

}  // namespace wctest
