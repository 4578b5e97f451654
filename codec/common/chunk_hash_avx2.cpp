// codec/common/chunk_hash_avx2.cpp — XXH3-64 compiled for AVX2 (see
// chunk_hash_x86.h). This unit includes nothing but xxhash.h, whose
// functions XXH_INLINE_ALL makes static here: no inline function of a
// shared header is compiled with these flags and picked by the linker for
// code that runs on CPUs without them.
#include "chunk_hash_x86.h"

#ifdef WCODEC_XXH3_X86
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace wcodec {
uint64_t xxh3_64_avx2(const uint8_t* p, size_t n) { return XXH3_64bits(p, n); }
}  // namespace wcodec
#endif
