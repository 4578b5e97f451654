// codec/compress/rans_encode_none.cpp — rans_encode_groups_avx512 and
// rans_encode_groups_hwy where the vector encoder passes are not built (CPUs
// other than x86-64; codec/CMakeLists.txt picks this file or
// rans_encode_avx512.cpp and rans_encode_hwy.cpp): they do nothing and
// return false, so RansEncoder takes its scalar group pass.
// Thread-safety: pure function.
#include "rans_encoder.h"

namespace wcodec {

bool rans_encode_groups_avx512(const uint32_t*, const uint32_t*, size_t, uint32_t*, uint16_t**) { return false; }
bool rans_encode_groups_hwy(const uint32_t*, const uint32_t*, size_t, uint32_t*, uint16_t**) { return false; }

}  // namespace wcodec
