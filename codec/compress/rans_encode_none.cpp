// codec/compress/rans_encode_none.cpp — rans_encode_groups_avx512 where the
// AVX-512 encoder pass is not built (CPUs other than x86-64;
// codec/CMakeLists.txt picks this file or rans_encode_avx512.cpp): it does
// nothing and returns false, so RansEncoder takes its Highway group pass
// (rans_encode_hwy.cpp, NEON on aarch64) or its scalar one.
// Thread-safety: pure function.
#include "rans_encoder.h"

namespace wcodec {

bool rans_encode_groups_avx512(const uint32_t*, const uint32_t*, size_t, uint32_t*, uint16_t**) { return false; }

}  // namespace wcodec
