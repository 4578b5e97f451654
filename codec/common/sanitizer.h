// codec/common/sanitizer.h — whether this translation unit is built with
// AddressSanitizer: GCC defines __SANITIZE_ADDRESS__, Clang answers
// __has_feature(address_sanitizer). WCODEC_ASAN (0 or 1) for the
// preprocessor, wcodec::kAddressSanitizer for code. The codec takes its
// scalar table loads under it (cpu.cpp), and the test suites size their
// real-file work by it.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define WCODEC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WCODEC_ASAN 1
#endif
#endif
#ifndef WCODEC_ASAN
#define WCODEC_ASAN 0
#endif

namespace wcodec {
inline constexpr bool kAddressSanitizer = WCODEC_ASAN != 0;
}  // namespace wcodec
