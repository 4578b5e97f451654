// wcodec/trellis.h — Trellis stores: trellis-quantized weights in the v2
// layout (one directory per layer) and the v3 layout (flat Hugging Face
// style shards). The layout, every rule and every point where the seed and
// the reference code disagree are in docs/trellis.md.
//
// Four parts:
//   - the quantized-weight layout (bit packing, grid, block Hadamard) and a
//     reference quantizer / dequantizer over float32 matrices;
//   - readers for v2 and v3 directories (every variant of v3 names and
//     metadata files), which collect every problem they meet (validate);
//   - the v2 -> v3 migration as a plan of output files made of inline bytes
//     and ranges of the v2 files (written by migrate, served by the mount);
//   - writers of v2 and v3 stores from quantized weights (the quantizer CLI).
// Directory access goes through TrellisDir, so the mount can read a store
// through its own safe descriptors.
// Thread-safety: pure functions and values; a TrellisDir is used by one
// thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wcodec/safetensors.h"
#include "wcodec/status.h"

namespace wcodec {

// ---------------------------------------------------------------- layout
inline constexpr unsigned kTrellisMinBits = 2;
inline constexpr unsigned kTrellisMaxBits = 8;
inline constexpr uint64_t kTrellisTile = 16;         // tiles of 16 x 16 indices
inline constexpr uint64_t kTrellisScaleGroup = 128;  // one scale per 128 inputs and output
inline constexpr uint64_t kTrellisHadamardBlock = 128;
inline constexpr double kTrellisGridStep = 1.24371088;  // grid[k] = (k - (2^bits - 1) / 2) * step
inline constexpr uint64_t kTrellisMaxDim = uint64_t{1} << 31;

// Whether `name` is a Trellis v2 layer directory's name (layer_NNNN, 4 to 6
// digits), and whether a safetensors index's text marks a Trellis v3 store
// ("trellis_v3" in its metadata): such directories are Trellis stores (the
// mount's GGUF view of Hugging Face directories leaves them to the trellis
// store kind).
inline bool is_trellis_layer_dir_name(std::string_view name) {
  if (name.size() < 10 || name.size() > 12 || name.rfind("layer_", 0) != 0) return false;
  for (size_t i = 6; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return false;
  return true;
}
inline bool is_trellis_v3_index(std::string_view index_json) {
  return index_json.find("\"trellis_v3\"") != std::string_view::npos;
}

// Bytes of the indices tensor of an [out, in] weight: the header byte plus
// 32 * bits bytes per 16 x 16 tile. 0 on overflow or bits out of range.
uint64_t trellis_indices_bytes(uint64_t out, uint64_t in, unsigned bits);
// grid[k] for bits.
double trellis_grid(unsigned bits, unsigned k);
// The blocks of the input axis the Hadamard rotation works on: 128 each,
// then the rest split into powers of two, largest first (docs/trellis.md).
std::vector<uint64_t> trellis_hadamard_blocks(uint64_t in);
// In place, along one row of `in` values: the orthonormal (Sylvester)
// Hadamard transform of every block. Its own inverse.
void trellis_hadamard_row(float* row, uint64_t in);

// A quantized weight in memory.
struct TrellisQuantized {
  unsigned bits = 0;
  uint64_t out = 0, in = 0;
  std::vector<uint8_t> indices;  // header byte + bitstream
  std::vector<float> scales;     // [ceil(in/128)][out]
  std::vector<float> su;         // [in]
  std::vector<float> sv;         // [out]
  bool hadamard = false;
  double mse = 0;  // against the input, over out * in
};

// Quantizes row-major float32 [out][in] at `bits` (2..8); su/sv are ±1 signs
// drawn from a fixed seed and `name` (deterministic). Rejects bits out of
// range, zero or huge dims, non-finite values.
Result<TrellisQuantized> trellis_quantize(const float* w, uint64_t out, uint64_t in, unsigned bits, bool hadamard,
                                          const std::string& name);

// Views of a weight's four components (as stored: little-endian bytes).
struct TrellisComponents {
  const uint8_t* indices = nullptr;
  uint64_t indices_len = 0;
  const uint8_t* scales = nullptr;  // f32 LE [ceil(in/128)][out]
  const uint8_t* su = nullptr;      // f32 LE [in]
  const uint8_t* sv = nullptr;      // f32 LE [out]
};
// Dequantizes rows [row_begin, row_end) of an [out, in] weight into `dst`
// (row-major, (row_end - row_begin) * in floats). Checks the indices length
// and header byte against bits; the other lengths are the caller's contract.
Status trellis_dequantize_rows(const TrellisComponents& c, uint64_t out, uint64_t in, unsigned bits, bool hadamard,
                               uint64_t row_begin, uint64_t row_end, float* dst);

// The same, from a part of the weight: rows [row_begin, row_end), with
// row_begin a multiple of 16; `stream` holds the bitstream from tile row
// row_begin / 16 on (no header byte; stream_len bytes, at least through the
// tile row of row_end - 1); `scales` holds scales[g][row_begin .. row_end)
// for every group g (row_end - row_begin floats per group); su and sv whole.
// The dense view computes its chunks with it.
Status trellis_dequantize_part(const uint8_t* stream, uint64_t stream_len, const float* scales, const float* su,
                               const float* sv, uint64_t out, uint64_t in, unsigned bits, bool hadamard,
                               uint64_t row_begin, uint64_t row_end, float* dst);

// ---------------------------------------------------------------- directory access
struct TrellisDirEntry {
  std::string name;
  bool is_dir = false;
};
class TrellisDir {
 public:
  virtual ~TrellisDir() = default;
  // Entries of directory `rel` ("" for the root), sorted by name, without
  // "." and "..", symbolic links and other non-regular non-directories.
  virtual Result<std::vector<TrellisDirEntry>> list(const std::string& rel) const = 0;
  // Size of regular file `rel`; kIOError (message naming it) when missing.
  virtual Result<uint64_t> size(const std::string& rel) const = 0;
  // Reads exactly `len` bytes at `off` of file `rel`.
  virtual Status read(const std::string& rel, uint64_t off, uint64_t len, uint8_t* dst) const = 0;
};
// A TrellisDir over a directory of the host filesystem.
std::unique_ptr<TrellisDir> trellis_posix_dir(const std::string& root);

// ---------------------------------------------------------------- stores
enum class TrellisLayout { kNone, kV2, kV3 };
enum class TrellisPart : uint8_t { kIndices = 0, kScales = 1, kSu = 2, kSv = 3 };
const char* trellis_part_name(TrellisPart p);

// One tensor of a stored safetensors file.
struct TrellisTensor {
  std::string file;      // relative path of its file ("layer_0000/tensor_0000.safetensors")
  std::string name;      // as stored
  std::string v3_name;   // dotted (what v3 and the dense view call it)
  TensorInfo info;       // dtype, shape, offsets in the file's data buffer
  uint64_t offset = 0;   // absolute offset of its bytes in the file
};

struct TrellisWeightInfo {
  std::string name;       // dotted weight name ("model.layers.0.mlp.up_proj.weight")
  unsigned bits = 0;
  uint64_t out = 0, in = 0;
  std::optional<double> mse;
  std::optional<uint64_t> original_bytes;
  std::vector<uint64_t> weight_shape;  // the original shape when it had more than 2 dims
  int layer = -1;                      // v2: its layer directory
  size_t parts[4] = {SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX};  // indexes into TrellisStore::tensors
};

struct TrellisProblem {
  std::string file, tensor, field, message;
  std::string to_string() const;
};

struct TrellisStore {
  TrellisLayout layout = TrellisLayout::kNone;
  std::string variant;  // v3: "dotted" / "underscored" + metadata file; v2: "tensor" / "batch"
  std::vector<TrellisTensor> tensors;      // every stored tensor, in file order then data order
  std::vector<TrellisWeightInfo> weights;  // quantized weights, in the order of their indices tensors
  std::vector<std::string> files;          // safetensors files read (relative)
  std::vector<std::string> other_files;    // top-level regular files that are not Trellis data (config, tokenizer)
  std::vector<uint64_t> other_sizes;       // their sizes
  bool hadamard = false;
  std::string method = "trellis_ldlq";
  std::optional<unsigned> target_bits;
  std::vector<TrellisProblem> problems;  // empty when valid
};

// The name of the dense view the mount adds to a store (docs/trellis.md §7):
// a Hugging Face weight variant ("dense"), which validate does not count as
// an orphan shard.
inline constexpr const char* kTrellisDenseName = "model.dense.safetensors";

// Which layout `dir` holds: v2 when it has a layer_NNNN directory, v3 when
// it has model.safetensors.index.json or a model-*-of-*.safetensors shard.
TrellisLayout trellis_detect(const TrellisDir& dir);
// Reads and checks a store, collecting every problem (validate's rules,
// docs/trellis.md). An unreadable top level is still a problem, not a
// failure: the returned store is then empty apart from its problems.
TrellisStore trellis_read(const TrellisDir& dir);
// trellis_read, failing with the first problems when there are any.
Result<TrellisStore> trellis_open(const TrellisDir& dir, const std::string& what);

// ---------------------------------------------------------------- migration
// One output file: pieces of inline bytes or ranges of a stored file.
struct TrellisPiece {
  std::shared_ptr<const std::vector<uint8_t>> bytes;  // inline when set
  std::string file;                                   // else: this stored file's range
  uint64_t offset = 0, length = 0;
};
struct TrellisOutFile {
  std::string name;
  std::vector<TrellisPiece> pieces;
  std::vector<uint64_t> segments;  // offsets where tensors begin (readahead)
  uint64_t size = 0;
};
inline constexpr uint64_t kTrellisDefaultShard = 2'000'000'000;  // "2GB"
// Parses "2GB", "500MB", "1GiB", "12345" (bytes).
Result<uint64_t> trellis_parse_size(const std::string& s);
// The v3 files of a v2 store (which must have no problems): shards, index,
// quantization_config.json, and every other top-level file unchanged.
Result<std::vector<TrellisOutFile>> trellis_plan_v3(const TrellisStore& v2, uint64_t shard_size);
// Writes the plan into directory `out` (created; must not exist or be
// empty), reading the ranges from `dir`.
Status trellis_write_plan(const TrellisDir& dir, const std::vector<TrellisOutFile>& plan, const std::string& out);

// ---------------------------------------------------------------- writing stores
struct TrellisNamedWeight {
  std::string name;  // dotted
  TrellisQuantized q;
  std::vector<uint64_t> weight_shape;  // when the source had more than 2 dims
  uint64_t original_bytes = 0;
};
// Writes a v2 or v3 store of `weights` and unquantized `base` tensors into
// `out` (a new directory), with a config.json.
Status trellis_write_store(const std::string& out, TrellisLayout layout, const std::vector<TrellisNamedWeight>& weights,
                           const std::vector<TensorData>& base, unsigned target_bits, bool hadamard);

}  // namespace wcodec
