// codec/decompress/chunk_decode_fast_int.cpp — the portable fast decoder of
// int chunks (scalar decoder path; method in chunk_decode_fast.h).
// Thread-safety: pure functions over their arguments and the caller's
// scratch.
#include "chunk_decode_fast_i.h"

namespace wcodec {

int decode_int_chunk_fast(const ModelView&, const ChunkView&, const uint8_t*, const uint8_t*, uint32_t, uint8_t*,
                          int32_t*, int32_t*, uint8_t*) {
  return -1;
}

}  // namespace wcodec
