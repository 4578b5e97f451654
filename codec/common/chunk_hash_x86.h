// codec/common/chunk_hash_x86.h — XXH3-64 builds for x86-64 vector extensions.
//
// Debian's libxxhash is built for baseline x86-64 (SSE2): 17 GB/s on a
// 256 KiB chunk on the reference machine, where the AVX2 build of the same
// function runs at 36 GB/s and the AVX-512 build at 47 GB/s. Every decoded
// chunk is hashed before it is served, so the checksum was 5% of a whole
// file's decode time (isnet-medium.rtn-int8) and 3% of the mount daemon's
// CPU on a cold read. chunk_hash (tensor_model.cpp) picks the widest build
// the CPU runs; all of them compute the same XXH3_64bits.
#pragma once

#include <cstddef>
#include <cstdint>

namespace wcodec {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define WCODEC_XXH3_X86 1
// Each is compiled in its own translation unit with that unit's -m flags
// (codec/CMakeLists.txt); call only where the CPU has the extension.
uint64_t xxh3_64_avx2(const uint8_t* p, size_t n);
uint64_t xxh3_64_avx512(const uint8_t* p, size_t n);
#endif

}  // namespace wcodec
