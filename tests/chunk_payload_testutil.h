// tests/chunk_payload_testutil.h — the parts of a model-coded chunk's
// payload (docs/wcodec-format.md §9: flags, the int tile map, the rANS
// word stream, raw bits), for the suites that hand a chunk's parts to the
// chunk decoders directly (test_decoders, test_cpu_paths,
// test_fast_decoders).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "bytes.h"
#include "chunk_model.h"
#include "tensor_model.h"

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

}  // namespace wctest
