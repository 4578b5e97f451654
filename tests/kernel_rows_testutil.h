// tests/kernel_rows_testutil.h — a safetensors file whose ternary tensor
// takes kernel-row symbols (format 2.10) with chunks whose last step leaves
// lanes idle: isnet-medium.rtn-ternary's largest convolution, its first
// 8001 x 4 kernels in rows of four (36 codes, 9 bytes a row), so that a
// chunk's kernel count is not a multiple of the 32 lanes. Used by
// test_kernel_rows and as a fuzz_container seed.
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "wcodec/safetensors.h"

namespace wctest {

inline constexpr uint64_t kKernelRowsRows = 8001;

// Empty when isnet_ternary is not the expected file.
inline std::vector<uint8_t> kernel_rows_file(const std::vector<uint8_t>& isnet_ternary) {
  using namespace wcodec;
  auto hd = parse_safetensors_header(isnet_ternary.data(), isnet_ternary.size(), isnet_ternary.size(), "isnet");
  if (!hd.ok()) return {};
  const TensorInfo* big = nullptr;
  for (const auto& t : hd->tensors)
    if (t.dtype == DType::kU8 && t.name.find("_packed") != std::string::npos && (!big || t.nbytes() > big->nbytes()))
      big = &t;
  if (!big || big->nbytes() < kKernelRowsRows * 9) return {};
  const uint8_t* p = isnet_ternary.data() + hd->data_start + big->begin;
  auto st = build_safetensors({{"rows_of_four_packed", DType::kU8, {kKernelRowsRows, 9},
                                std::vector<uint8_t>(p, p + kKernelRowsRows * 9)}},
                              std::nullopt);
  return st.ok() ? std::move(*st) : std::vector<uint8_t>{};
}

}  // namespace wctest
