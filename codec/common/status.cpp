// codec/common/status.cpp — see wcodec/status.h.
#include "wcodec/status.h"

#include <cstdio>

namespace wcodec {

const char* code_name(Code c) {
  switch (c) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "Invalid argument";
    case Code::kCorruption: return "Corruption";
    case Code::kNotSupported: return "Not supported";
    case Code::kIOError: return "IO error";
    case Code::kOutOfRange: return "Out of range";
    case Code::kInternal: return "Internal error";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(code_name(code())) + ": " + message();
}

namespace detail {
void check_failed(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "wcodec: internal invariant failed: %s at %s:%d\n", cond, file, line);
  std::abort();
}
}  // namespace detail

}  // namespace wcodec
