// codec/common/trellis_layout.cpp — the Trellis quantized-weight layout
// (wcodec/trellis.h, docs/trellis.md §2-3): index bit packing in 16 x 16
// tiles, the uniform grid, the block Hadamard rotation, and the reference
// quantizer and dequantizer. The quantizer computes its recorded mse with
// the dequantizer below, so every reader that uses it (the dense view, the
// tests) reproduces exactly the values the mse was measured on.
// Thread-safety: pure functions.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "wcodec/trellis.h"

namespace wcodec {

namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Position of element (o, i) in the index stream: tiles [tiles_out][tiles_in],
// row-major inside each tile.
uint64_t stream_pos(uint64_t o, uint64_t i, uint64_t tiles_in) {
  return ((o / kTrellisTile) * tiles_in + i / kTrellisTile) * (kTrellisTile * kTrellisTile) +
         (o % kTrellisTile) * kTrellisTile + (i % kTrellisTile);
}

unsigned get_index(const uint8_t* stream, uint64_t stream_len, uint64_t pos, unsigned bits) {
  const uint64_t bit = pos * bits;
  const uint64_t byte = bit / 8;
  uint32_t v = stream[byte];
  if (byte + 1 < stream_len) v |= static_cast<uint32_t>(stream[byte + 1]) << 8;
  return (v >> (bit % 8)) & ((1u << bits) - 1);
}

void put_index(uint8_t* stream, uint64_t pos, unsigned bits, unsigned value) {
  const uint64_t bit = pos * bits;
  for (unsigned j = 0; j < bits; ++j) {
    const uint64_t b = bit + j;
    if ((value >> j) & 1u) stream[b / 8] = static_cast<uint8_t>(stream[b / 8] | (1u << (b % 8)));
  }
}

void fwht(float* x, uint64_t n) {
  for (uint64_t h = 1; h < n; h *= 2)
    for (uint64_t i = 0; i < n; i += 2 * h)
      for (uint64_t j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
  const float s = static_cast<float>(1.0 / std::sqrt(static_cast<double>(n)));
  for (uint64_t i = 0; i < n; ++i) x[i] *= s;
}

// splitmix64: the sign generator (docs/trellis.md §5).
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

float load_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

}  // namespace

uint64_t trellis_indices_bytes(uint64_t out, uint64_t in, unsigned bits) {
  if (bits < kTrellisMinBits || bits > kTrellisMaxBits || out == 0 || in == 0) return 0;
  if (out > kTrellisMaxDim || in > kTrellisMaxDim) return 0;
  const uint64_t tiles = ceil_div(out, kTrellisTile) * ceil_div(in, kTrellisTile);  // < 2^54
  const uint64_t per_tile = 32u * bits;
  if (tiles > (std::numeric_limits<uint64_t>::max() - 1) / per_tile) return 0;
  return 1 + tiles * per_tile;
}

double trellis_grid(unsigned bits, unsigned k) {
  return (static_cast<double>(k) - (std::ldexp(1.0, static_cast<int>(bits)) - 1.0) / 2.0) * kTrellisGridStep;
}

std::vector<uint64_t> trellis_hadamard_blocks(uint64_t in) {
  std::vector<uint64_t> b(in / kTrellisHadamardBlock, kTrellisHadamardBlock);
  for (uint64_t p = kTrellisHadamardBlock / 2; p >= 1; p /= 2)
    if ((in % kTrellisHadamardBlock) & p) b.push_back(p);
  return b;
}

void trellis_hadamard_row(float* row, uint64_t in) {
  uint64_t at = 0;
  for (uint64_t n : trellis_hadamard_blocks(in)) {
    if (n > 1) fwht(row + at, n);
    at += n;
  }
}

namespace {

// The one dequantization loop (docs/trellis.md §2). `stream` starts at tile
// row tr0; scales(g, o) and the signs come through the accessors.
template <typename ScaleAt, typename SuAt, typename SvAt>
void dequantize_loop(const uint8_t* stream, uint64_t stream_len, uint64_t tr0, uint64_t in, unsigned bits,
                     bool hadamard, uint64_t row_begin, uint64_t row_end, ScaleAt scale_at, SuAt su_at, SvAt sv_at,
                     float* dst) {
  float grid[256];
  for (unsigned k = 0; k < (1u << bits); ++k) grid[k] = static_cast<float>(trellis_grid(bits, k));
  const uint64_t tiles_in = ceil_div(in, kTrellisTile);
  const uint64_t base = tr0 * kTrellisTile;  // first row of the stream
  for (uint64_t o = row_begin; o < row_end; ++o) {
    float* r = dst + (o - row_begin) * in;
    const float sv = sv_at(o);
    for (uint64_t i = 0; i < in; ++i) {
      const unsigned k = get_index(stream, stream_len, stream_pos(o - base, i, tiles_in), bits);
      float v = grid[k] * scale_at(i / kTrellisScaleGroup, o);
      v *= su_at(i);
      r[i] = v * sv;
    }
    if (hadamard) trellis_hadamard_row(r, in);
  }
}

}  // namespace

Status trellis_dequantize_rows(const TrellisComponents& c, uint64_t out, uint64_t in, unsigned bits, bool hadamard,
                               uint64_t row_begin, uint64_t row_end, float* dst) {
  const uint64_t need = trellis_indices_bytes(out, in, bits);
  if (need == 0) return Status::Corruption("bits " + std::to_string(bits) + " or shape [" + std::to_string(out) + ", " +
                                           std::to_string(in) + "] out of range (bits 2..8, dims 1..2^31)");
  if (c.indices_len != need)
    return Status::Corruption("indices: " + std::to_string(c.indices_len) + " bytes, the layout needs " +
                              std::to_string(need));
  if (c.indices[0] != bits)
    return Status::Corruption("indices: header byte " + std::to_string(c.indices[0]) + " != bits " +
                              std::to_string(bits));
  if (row_begin > row_end || row_end > out) return Status::Invalid("rows out of range");
  dequantize_loop(
      c.indices + 1, need - 1, 0, in, bits, hadamard, row_begin, row_end,
      [&](uint64_t g, uint64_t o) { return load_f32(c.scales + 4 * (g * out + o)); },
      [&](uint64_t i) { return load_f32(c.su + 4 * i); }, [&](uint64_t o) { return load_f32(c.sv + 4 * o); }, dst);
  return Status::OK();
}

Status trellis_dequantize_part(const uint8_t* stream, uint64_t stream_len, const float* scales, const float* su,
                               const float* sv, uint64_t out, uint64_t in, unsigned bits, bool hadamard,
                               uint64_t row_begin, uint64_t row_end, float* dst) {
  if (trellis_indices_bytes(out, in, bits) == 0 || row_begin % kTrellisTile != 0 || row_begin >= row_end ||
      row_end > out)
    return Status::Invalid("dequantize_part: bits, shape or rows out of range");
  const uint64_t tile_rows = ceil_div(row_end, kTrellisTile) - row_begin / kTrellisTile;
  if (stream_len < tile_rows * ceil_div(in, kTrellisTile) * 32u * bits)
    return Status::Invalid("dequantize_part: the stream does not cover the rows");
  const uint64_t rows = row_end - row_begin;
  dequantize_loop(
      stream, stream_len, row_begin / kTrellisTile, in, bits, hadamard, row_begin, row_end,
      [&](uint64_t g, uint64_t o) { return scales[g * rows + (o - row_begin)]; }, [&](uint64_t i) { return su[i]; },
      [&](uint64_t o) { return sv[o]; }, dst);
  return Status::OK();
}

Result<TrellisQuantized> trellis_quantize(const float* w, uint64_t out, uint64_t in, unsigned bits, bool hadamard,
                                          const std::string& name) {
  const uint64_t nbytes = trellis_indices_bytes(out, in, bits);
  if (nbytes == 0)
    return Status::Invalid(name + ": cannot quantize shape [" + std::to_string(out) + ", " + std::to_string(in) +
                           "] at " + std::to_string(bits) + " bits (bits 2..8, dims 1..2^31)");
  if (out * in > (uint64_t{1} << 32)) return Status::Invalid(name + ": tensor too large for the reference quantizer");
  for (uint64_t k = 0; k < out * in; ++k)
    if (!std::isfinite(w[k])) return Status::Invalid(name + ": non-finite value at element " + std::to_string(k));
  TrellisQuantized q;
  q.bits = bits;
  q.out = out;
  q.in = in;
  q.hadamard = hadamard;
  q.su.resize(in);
  q.sv.resize(out);
  uint64_t seed = 0x5472656C6C697333ull ^ fnv1a(name);
  for (auto& s : q.su) s = (splitmix(seed) & 1) ? -1.0f : 1.0f;
  for (auto& s : q.sv) s = (splitmix(seed) & 1) ? -1.0f : 1.0f;

  // x = sign-flipped, rotated weight; the grid codes x / scale.
  std::vector<float> x(w, w + out * in);
  for (uint64_t o = 0; o < out; ++o) {
    float* r = x.data() + o * in;
    if (hadamard) trellis_hadamard_row(r, in);
    for (uint64_t i = 0; i < in; ++i) r[i] = r[i] * q.su[i] * q.sv[o];
  }
  const uint64_t groups = ceil_div(in, kTrellisScaleGroup);
  const unsigned levels = 1u << bits;
  const double mid = (levels - 1) / 2.0;
  const double gmax = mid * kTrellisGridStep;
  float grid[256];
  for (unsigned k = 0; k < levels; ++k) grid[k] = static_cast<float>(trellis_grid(bits, k));
  auto code = [&](float v, float inv) -> unsigned {  // inv = 1 / (scale * step)
    const float t = std::floor(v * inv + static_cast<float>(mid) + 0.5f);
    return static_cast<unsigned>(std::clamp(t, 0.0f, static_cast<float>(levels - 1)));
  };
  q.scales.assign(groups * out, 0.0f);
  std::vector<uint8_t> idx(out * in, static_cast<uint8_t>(levels / 2));
  for (uint64_t o = 0; o < out; ++o) {
    for (uint64_t g = 0; g < groups; ++g) {
      const uint64_t i0 = g * kTrellisScaleGroup, i1 = std::min(in, i0 + kTrellisScaleGroup);
      const float* r = x.data() + o * in;
      float amax = 0;
      for (uint64_t i = i0; i < i1; ++i) amax = std::max(amax, std::fabs(r[i]));
      if (amax == 0) continue;  // scale 0, codes nearest zero
      float best = 0;
      double best_err = std::numeric_limits<double>::infinity();
      for (int step = 0; step <= 12; ++step) {  // scale candidates amax/gmax * (1 - step/24)
        const float s = static_cast<float>(amax / gmax * (1.0 - step / 24.0));
        const float inv = static_cast<float>(1.0 / (static_cast<double>(s) * kTrellisGridStep));
        double err = 0;
        for (uint64_t i = i0; i < i1; ++i) {
          const float d = grid[code(r[i], inv)] * s - r[i];
          err += static_cast<double>(d) * d;
        }
        if (err < best_err) best_err = err, best = s;
      }
      q.scales[g * out + o] = best;
      const float inv = static_cast<float>(1.0 / (static_cast<double>(best) * kTrellisGridStep));
      for (uint64_t i = i0; i < i1; ++i) idx[o * in + i] = static_cast<uint8_t>(code(r[i], inv));
    }
  }
  // Pack; padding positions hold the code nearest zero (levels / 2).
  q.indices.assign(nbytes, 0);
  q.indices[0] = static_cast<uint8_t>(bits);
  const uint64_t tiles_out = ceil_div(out, kTrellisTile), tiles_in = ceil_div(in, kTrellisTile);
  for (uint64_t o = 0; o < tiles_out * kTrellisTile; ++o)
    for (uint64_t i = 0; i < tiles_in * kTrellisTile; ++i) {
      const unsigned v = (o < out && i < in) ? idx[o * in + i] : levels / 2;
      put_index(q.indices.data() + 1, stream_pos(o, i, tiles_in), bits, v);
    }

  // mse through the dequantizer.
  TrellisComponents c{q.indices.data(), q.indices.size(), reinterpret_cast<const uint8_t*>(q.scales.data()),
                      reinterpret_cast<const uint8_t*>(q.su.data()), reinterpret_cast<const uint8_t*>(q.sv.data())};
  std::vector<float> back(out * in);
  WC_RETURN_IF_ERROR(trellis_dequantize_rows(c, out, in, bits, hadamard, 0, out, back.data()));
  double sse = 0;
  for (uint64_t k = 0; k < out * in; ++k) {
    const double d = static_cast<double>(back[k]) - w[k];
    sse += d * d;
  }
  q.mse = sse / static_cast<double>(out * in);
  return q;
}

}  // namespace wcodec
