// cuda/device_decode.cu — the shared chunk decoders compiled as device
// code: one thread decodes one model-coded chunk (all 32 lanes in order),
// exactly as the CPU reference in codec/src/chunk_decode.h does. This is the
// correctness baseline the warp-parallel GPU decoder is measured against.
// Thread-safety: kernels read their inputs and write disjoint outputs.
#include <cstdint>

#include "chunk_decode.h"

namespace wcodec::cuda {

struct DeviceChunk {
  ChunkView cv;
  const uint8_t* rans;
  uint32_t rans_len;
  const uint8_t* raw;
  uint64_t raw_len;
  const uint8_t* tile_map;
  uint8_t* out;
  int32_t* scratch_i32;  // h*w int32 (int: residuals; float: exponents)
  uint8_t* scratch_u8;   // h*w bytes (float: sign/mantissa)
  uint16_t* scratch_u16; // h*w (float exponents)
  int32_t* tile;         // 16*16 int32
};

__global__ void decode_chunks_reference(ModelView m, const DeviceChunk* chunks, uint32_t n, int* status) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const DeviceChunk& c = chunks[i];
  bool ok = false;
  switch (m.kind) {
    case ModelKind::kInt:
      ok = decode_int_residuals(m, c.cv, c.rans, c.rans_len, c.scratch_i32) &&
           int_finish_chunk(m, c.cv, c.tile_map, c.out, c.scratch_i32, c.tile);
      break;
    case ModelKind::kFloat:
      ok = decode_float_chunk(m, c.cv, c.rans, c.rans_len, c.raw, c.raw_len, c.out, c.scratch_u16, c.scratch_u8);
      break;
    case ModelKind::kBytes:
      ok = decode_bytes_chunk(m, c.cv, c.rans, c.rans_len, c.out);
      break;
  }
  status[i] = ok ? 1 : 0;
}

}  // namespace wcodec::cuda
