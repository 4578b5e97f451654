// wcodec/gguf.h — GGUF (llama.cpp's model file) header parsing, validation
// and writing.
//
// Format (ggml's gguf.cpp; rules and annotated vectors in docs/gguf.md):
// "GGUF", u32 version, i64 tensor count, i64 key/value count, the key/value
// pairs, the tensor infos, padding to `general.alignment` (default 32), then
// the data section, every tensor at the running sum of the padded sizes of
// the tensors before it. All integers little-endian.
//
// The parser enforces every rule llama.cpp's reader enforces (versions 2 and
// 3; key, string, array, name, dimension, type, block-size, alignment,
// offset and overflow rules) plus that every tensor's bytes lie inside the
// file, and names the field and value it rejects. It never reads outside the
// buffer it is given. The writer produces exactly the bytes the parser
// accepts: parse then write gives back the file's header byte for byte.
// Thread-safety: pure functions over caller-owned memory; values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "wcodec/safetensors.h"
#include "wcodec/status.h"

namespace wcodec {

// Value types of a key/value pair (enum gguf_type).
enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
inline constexpr uint32_t kGgufTypeCount = 13;
// "u32", "str", ...; "?" for an out-of-range value.
const char* gguf_type_name(GgufType t);
// Bytes of one element; 0 for kString and kArray (and out-of-range values).
size_t gguf_type_size(GgufType t);

// Limits of llama.cpp's reader.
inline constexpr uint64_t kGgufMaxString = uint64_t{1} << 30;         // bytes of one string
inline constexpr uint64_t kGgufMaxArray = uint64_t{1} << 30;          // elements of one array
inline constexpr size_t kGgmlMaxName = 64;                             // a tensor name is shorter
inline constexpr uint32_t kGgmlMaxDims = 4;
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr uint32_t kGgufVersion = 3;                            // the newest version

// The value of a key: one element, or an array of elements of one type
// (never arrays of arrays: llama.cpp refuses them). Fixed-size elements are
// kept as their little-endian bytes (so a bool byte other than 0/1, which
// llama.cpp accepts, is written back unchanged).
struct GgufValue {
  GgufType type = GgufType::kU8;  // element type, never kArray
  bool is_array = false;
  std::vector<uint8_t> bytes;        // count × gguf_type_size(type) bytes (not kString)
  std::vector<std::string> strings;  // the elements of kString

  uint64_t count() const;  // elements (1 for a non-array)

  static GgufValue u8(uint8_t v);
  static GgufValue i32(int32_t v);
  static GgufValue u32(uint32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue str(std::string v);
  static GgufValue str_array(std::vector<std::string> v);
  static GgufValue i32_array(const std::vector<int32_t>& v);
  static GgufValue f32_array(const std::vector<float>& v);

  // Element i read as the named type; false if the type differs or i is out
  // of range.
  bool get_u32(uint32_t* out, uint64_t i = 0) const;
  bool get_u64(uint64_t* out, uint64_t i = 0) const;  // any unsigned or non-negative signed integer type
  bool get_string(std::string* out, uint64_t i = 0) const;
};

struct GgufKv {
  std::string key;
  GgufValue value;
};

// ggml tensor types (enum ggml_type, as of the llama.cpp vendored by
// llama-cpp-python 0.3.36). Removed types (4, 5, 31..33, 36..38) and values
// past the table (43 on) are unknown.
struct GgmlTypeInfo {
  const char* name;    // "Q4_K"
  uint32_t block;      // elements per block
  uint32_t type_size;  // bytes per block
};
// nullptr for an unknown or removed type.
const GgmlTypeInfo* ggml_type_info(uint32_t type);
inline constexpr uint32_t kGgmlTypeF32 = 0, kGgmlTypeF16 = 1, kGgmlTypeQ4_0 = 2, kGgmlTypeQ4_1 = 3,
                          kGgmlTypeQ5_0 = 6, kGgmlTypeQ5_1 = 7, kGgmlTypeQ8_0 = 8, kGgmlTypeQ2_K = 10,
                          kGgmlTypeQ3_K = 11, kGgmlTypeQ4_K = 12, kGgmlTypeQ5_K = 13, kGgmlTypeQ6_K = 14,
                          kGgmlTypeBF16 = 30, kGgmlTypeTQ1_0 = 34, kGgmlTypeTQ2_0 = 35;

struct GgufTensor {
  std::string name;
  uint32_t n_dims = 0;
  int64_t ne[kGgmlMaxDims] = {1, 1, 1, 1};  // ne[0] is the fastest-varying (row) dimension
  uint32_t type = 0;                         // ggml type
  uint64_t offset = 0;                       // from the start of the data section
  uint64_t nbytes = 0;                       // unpadded
  uint64_t nelements() const;
};

struct GgufFile {
  uint32_t version = kGgufVersion;
  std::vector<GgufKv> kv;           // in file order
  std::vector<GgufTensor> tensors;  // in file order
  uint32_t alignment = kGgufDefaultAlignment;
  uint64_t info_end = 0;     // bytes of magic, counts, pairs and tensor infos
  uint64_t data_offset = 0;  // start of the data section (info_end padded; = info_end without tensors)
  uint64_t data_size = 0;    // sum of the padded tensor sizes

  // The pair with this key, or nullptr.
  const GgufKv* find(std::string_view key) const;
};

// Bytes of a tensor of ggml type `type` and shape `ne` (n_dims used);
// false (with a message naming `what`, the field and the value) for an
// unknown type, a row length that is not a multiple of the block, a
// negative dimension or a size that overflows.
Status ggml_tensor_nbytes(uint32_t type, const int64_t* ne, uint32_t n_dims, const std::string& what,
                          uint64_t* nbytes);

// Parses and validates a GGUF header.
// REQUIRES: `prefix` holds the first prefix_len bytes of a file of
// file_size bytes (prefix_len ≤ file_size). If the header runs past the
// prefix but not past the file, returns kOutOfRange with a message starting
// "need more header bytes" (read more and call again; read_gguf_file does).
// `what` names the file in error messages.
Result<GgufFile> parse_gguf(const uint8_t* prefix, size_t prefix_len, uint64_t file_size, const std::string& what);

// Reads as much of a file as its header needs and parses it.
Result<GgufFile> read_gguf_file(const std::string& path);

// The header bytes of `f`: magic through tensor infos, then zero padding to
// the data section (when there are tensors). Tensor offsets are recomputed
// as the running padded sum (f's offsets are ignored; `info_end`,
// `data_offset` and `data_size` likewise); `alignment` must equal the
// general.alignment pair's value when there is one. Rejects (naming the
// field) anything parse_gguf would reject.
Result<std::vector<uint8_t>> write_gguf_header(const GgufFile& f);

// The tensors of a GGUF file as the .wcodec container stores them (a
// container of a GGUF source, docs/wcodec-format.md §4.9): data_start = the
// data section's offset, every tensor at its GGUF offset (so the padding
// between tensors is a gap of zeros), in file order. F32, F16, BF16, F64 and
// the integer types keep their element type with the shape reversed (ne[0]
// last); block-quantized types become U8 [rows, bytes per row] (rows =
// ne[1]·ne[2]·ne[3]; [bytes per row] for one row), so that a row of blocks
// is a row of the grid.
SafetensorsHeader gguf_tensor_layout(const GgufFile& f, uint64_t file_size);

}  // namespace wcodec
