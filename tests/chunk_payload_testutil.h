// tests/chunk_payload_testutil.h — the parts of a model-coded chunk's
// payload (docs/wcodec-format.md §9: flags, the int tile map, the rANS
// word stream, raw bits), for the suites that hand a chunk's parts to the
// chunk decoders directly (test_decoders, test_cpu_paths,
// test_fast_decoders).
//
// Thread-safety: pure functions.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "bytes.h"
#include "chunk_model.h"
#include "tensor_model.h"
#include "wcodec/safetensors.h"

namespace wctest {

struct ChunkPayload {
  const uint8_t* map = nullptr;  // int tile map (flag bit 0), or null
  const uint8_t* rans = nullptr;
  uint32_t rans_len = 0;
  const uint8_t* raw = nullptr;
  size_t raw_len = 0;
  bool tail = false;  // flag bit 1: raw tail in the lane states
};

// Chunk `index` of a tensor of geometry `g`, payload `p`; false when the
// payload is shorter than its fields say.
inline bool parse_chunk_payload(const wcodec::TensorGeometry& g, uint64_t index, const std::vector<uint8_t>& p,
                                ChunkPayload* out) {
  using wcodec::kTile;
  uint64_t row0, col0, h, w;
  g.chunk_rect(index, &row0, &col0, &h, &w);
  wcodec::ByteReader r(p.data(), p.size());
  const uint8_t flags = r.u8();
  if (flags & 1) out->map = r.take(2 * ((h + kTile - 1) / kTile) * ((w + kTile - 1) / kTile));
  out->tail = (flags & 2) != 0;
  out->rans_len = r.u32();
  out->rans = r.take(out->rans_len);
  out->raw = r.cur();
  out->raw_len = r.remaining();
  return r.ok();
}

// Synthetic packed ternary tensors (2-bit codes, four a byte, as U8
// [rows][cols / 4]) from Gaussian weights cut at 0.6: gen 0 i.i.d.; gen 1
// scaled by a row and a column factor (codes whose density follows the
// row and the column: scale classes); gen 2 weighted by the column's
// place in a flattened 3x3 kernel (conv-like rows: the periodic forms).
// cols is a multiple of 4. One generator draws the tensors of a test in
// sequence from one seed.
struct SyntheticTernary {
  wcodec::TensorInfo info;
  std::vector<uint8_t> bytes;
};
class SyntheticTernaryGen {
 public:
  explicit SyntheticTernaryGen(uint32_t seed) : rng_(seed) {}
  SyntheticTernary next(uint64_t rows, uint64_t cols, int gen) {
    SyntheticTernary s;
    s.bytes.assign(rows * cols / 4, 0);
    std::vector<double> rs(rows), cs(cols);
    for (auto& v : rs) v = 0.3 + 2.5 * uni_(rng_);
    for (auto& v : cs) v = 0.3 + 2.5 * uni_(rng_);
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t c = 0; c < cols; ++c) {
        double w = gauss_(rng_);
        if (gen == 1) w *= rs[r] * cs[c];
        if (gen == 2) w *= c % 9 == 4 ? 2.0 : (c % 3 == 1 ? 1.5 : 0.7);
        const unsigned code = std::fabs(w) < 0.6 ? 0 : (w > 0 ? 1 : 2);
        s.bytes[(r * cols + c) / 4] |= static_cast<uint8_t>(code << (2 * (c % 4)));
      }
    s.info.name = "synthetic_packed";
    s.info.dtype = wcodec::DType::kU8;
    s.info.shape = {rows, cols / 4};
    s.info.begin = 0;
    s.info.end = s.bytes.size();
    return s;
  }

 private:
  std::mt19937 rng_;
  std::normal_distribution<double> gauss_{0.0, 1.0};
  std::uniform_real_distribution<double> uni_{0.0, 1.0};
};

}  // namespace wctest
