// wcodec/safetensors.h — safetensors parsing, validation and writing.
//
// Format (huggingface/safetensors): u64 LE header length N, N bytes of UTF-8
// JSON, then the data buffer. The parser validates like the reference
// implementation and reports the field and value it rejects. It never reads
// outside the buffer it is given.
// Thread-safety: pure functions over caller-owned memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wcodec/status.h"

namespace wcodec {

// Every dtype the safetensors spec names. Values are stable (they are stored
// in .wcodec tensor records, see docs/wcodec-format.md).
enum class DType : uint8_t {
  kBOOL = 0,
  kU8 = 1,
  kI8 = 2,
  kF8_E5M2 = 3,
  kF8_E4M3 = 4,
  kI16 = 5,
  kU16 = 6,
  kF16 = 7,
  kBF16 = 8,
  kI32 = 9,
  kU32 = 10,
  kF32 = 11,
  kF64 = 12,
  kI64 = 13,
  kU64 = 14,
  kF8_E8M0 = 15,
  kF4 = 16,       // 4-bit float, 2 per byte: size is ceil(n/2)... see dtype_bits
  kF6_E2M3 = 17,  // 6-bit floats packed
  kF6_E3M2 = 18,
  kC64 = 19,
};

// Name as written in safetensors JSON ("BF16"). nullptr for out-of-range.
const char* dtype_name(DType t);
// Parses a safetensors dtype string. nullopt if unknown.
std::optional<DType> parse_dtype(std::string_view s);
// Bits per element (1 for BOOL stored as byte? no: BOOL is 8 bits).
// F4 = 4, F6_* = 6, all others a multiple of 8.
unsigned dtype_bits(DType t);

struct TensorInfo {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<uint64_t> shape;  // empty = scalar
  uint64_t begin = 0;           // data_offsets[0], relative to the data buffer
  uint64_t end = 0;             // data_offsets[1]

  uint64_t nbytes() const { return end - begin; }
  uint64_t numel() const;  // product of shape (1 for scalar)
};

struct SafetensorsHeader {
  uint64_t header_len = 0;  // N
  uint64_t data_start = 0;  // 8 + N (absolute file offset of the data buffer)
  uint64_t data_len = 0;    // total bytes of the data buffer
  // Tensors in file order of their data (sorted by begin offset).
  std::vector<TensorInfo> tensors;
  // __metadata__ (string -> string), if present.
  std::optional<std::map<std::string, std::string>> metadata;
};

// Limits (from the reference implementation).
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

// Parses and validates the header of a safetensors file.
// REQUIRES: `prefix` holds at least the first min(file_size, 8 + N) bytes.
// `file_size` is the full file length (checked: must equal 8 + N + last end).
// `what` names the file in error messages.
// Rejects: file shorter than 8 bytes, N > kMaxSafetensorsHeader, N beyond the
// file, non-UTF-8 or invalid JSON, a non-object top level, tensor entries that
// are not objects or lack dtype/shape/data_offsets, unknown dtype, negative or
// non-integer shape/offsets, duplicate names (including JSON duplicate keys),
// begin > end, offsets that overlap or leave holes (sorted by begin, first
// begins at 0, each begins where the previous ends), numel × bits ≠ bytes (with
// overflow detection), data_start + last end ≠ file_size, a __metadata__ that is
// not a string→string map.
Result<SafetensorsHeader> parse_safetensors_header(const uint8_t* prefix, size_t prefix_len,
                                                   uint64_t file_size, const std::string& what);

// Reads the first 8 + N bytes of a file and parses them.
Result<SafetensorsHeader> read_safetensors_header_file(const std::string& path);

// Serializes a header in the reference writer's way: JSON with
// "__metadata__" first when present, tensor entries in the order given,
// padded with spaces to a multiple of 8. Returns the full header bytes
// (8-byte length + JSON + padding). Tensors' begin/end are used as given.
std::vector<uint8_t> write_safetensors_header(const SafetensorsHeader& h);

// Builds a whole safetensors file from tensors with their data. Offsets are
// assigned contiguously in the order given. Used by tests and tools.
struct TensorData {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;
};
Result<std::vector<uint8_t>> build_safetensors(
    const std::vector<TensorData>& tensors,
    const std::optional<std::map<std::string, std::string>>& metadata);

}  // namespace wcodec
