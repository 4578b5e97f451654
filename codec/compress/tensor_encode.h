// codec/compress/tensor_encode.h — per-tensor encoding: choosing a model
// and its parameters from the data, encoding the chunks, dropping models
// that do not pay and sharing models between small tensors.
//
// Thread-safety: the functions are re-entrant; a SharedStats is used by
// one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "split_model.h"
#include "tensor_model.h"
#include "wcodec/safetensors.h"
#include "wcodec/status.h"

namespace wcodec {

// The fixed bytes of a model-coded chunk beyond its symbols: flags, stream
// length and the 32 lane states (4 bytes each), less the 64 bytes a raw
// tail may carry.
inline constexpr uint64_t kModelChunkFixed = 1 + 4 + 4 * 32 - 64;

struct EncodeOptions {
  uint64_t chunk_bytes = 256 * 1024;  // target decoded chunk size
  int zstd_level = 9;                 // fallback chunks
  bool tool_search = true;            // evaluate tile tools (prediction/transform)
  bool exhaustive_tools = false;      // evaluate tools on every tile (slow profile)
  bool format_2_1 = true;             // may use models of formats 2.1-2.3 (int nbr_modes 2, 3; float emode 5)
  bool split_models = true;           // GGUF sources: may use split models (format 2.5, split_encode.cpp)
  bool split_palette = true;          // split models may use palette streams (format 2.6, split_encode.cpp)
  bool split_recode = true;           // split models may use recoded streams (format 2.7, split_encode.cpp)
  bool kernel_rows = true;            // ternary 3x3 kernels may take kernel-row symbols (format 2.10, choose_int)
  bool x8_tables = true;              // 4-bit / uint8 codes and floats may take 9-bit tables (encode_model_i.h)
  double min_model_gain = 0;          // EncodeConfig::min_model_gain
  uint64_t band_rows = 0;             // > 0: chunks are bands of this many rows (a split model's streams)
  bool equal_bands = false;           // bands of equal rows (make_geometry; GGUF block tensors)
  // A chunk under 16 KiB that zstd level 1 already takes leaves its
  // higher level for later (EncodedChunk::zstd_deferred): the container
  // codes such tensors in zstd groups (format 2.11), whose frame replaces
  // the chunk's own, and finish_zstd runs the level for those that stay
  // apart.
  bool zstd_defer = false;
  bool keep_stats = false;  // EncodedTensor::stats
};

// What the encoder decided for a tensor (for `wcodec inspect`).
struct TensorChoice {
  std::string kind_name;   // "bf16", "int8", "int4", "ternary", "bytes", "raw"
  std::string model_desc;  // parameters chosen
  uint32_t tiles_with_tools = 0, tiles_total = 0;
  uint32_t tools_hist[6] = {0, 0, 0, 0, 0, 0};  // predictor usage
  uint32_t xform_hist[3] = {0, 0, 0};           // 8x8 transform usage
};

struct EncodedChunk {
  ChunkMethod method;
  std::vector<uint8_t> payload;
  uint64_t decoded_size;
  uint64_t xxh3;
  // The bytes the chunk takes without a model: the smaller of raw and the
  // zstd output the encoder tried (model-coded chunks; an upper bound, as
  // the higher zstd level runs only where the model is within reach).
  uint64_t fallback_size = 0;
  // A zstd chunk coded at level 1 whose configured level pick_chunk left
  // for finish_zstd (EncodeOptions::zstd_defer). Not stored.
  bool zstd_deferred = false;
};

struct Stats;  // a model's symbol counts (encode_model_i.h)

struct EncodedTensor {
  TensorGeometry geom;
  bool has_model = false;
  TensorModel model;
  int32_t aux_tensor = -1;  // index of the zero-point tensor (nibble codes)
  int32_t model_ref = -1;   // >= 0: uses the model of that (earlier) tensor
  // The model's symbol counts over the tensor, where EncodeOptions::keep_stats
  // asked for them and no chunk keeps a tile map (SharedStats::add reuses
  // them); null otherwise.
  std::shared_ptr<const Stats> stats;
  uint32_t zgroup = 0;
  std::vector<EncodedChunk> chunks;
  TensorChoice choice;
  // Set: the tensor is coded with this split model (model flag 3, format
  // 2.5); has_model is then false and model unused.
  std::shared_ptr<const SplitModel> split;
};

// Context the encoder may use from sibling tensors (zero points).
struct AuxInput {
  int32_t index = -1;
  const uint8_t* bytes = nullptr;  // the aux tensor's original bytes
  uint64_t rows = 0, cols = 0;     // its grid (U8 [rows, cols])
  uint32_t group = 0;              // codes per zero point along a row
};

// Encodes one tensor's bytes.
Result<EncodedTensor> encode_tensor(const TensorInfo& info, const uint8_t* data, const AuxInput& aux,
                                    const EncodeOptions& opt);

// Models whose record costs more than they save: the bytes of a tensor's
// chunk payloads, and what they would take if no chunk used the model
// (EncodedChunk::fallback_size). drop_model stores every model-coded chunk
// as zstd or raw instead (data: the tensor's original bytes) and leaves the
// tensor without a model.
// One zstd frame of p[0, n) at `level` through this thread's reused
// compression context (the same bytes as ZSTD_compress, without a context
// made and freed per call: 7-11 us each on small inputs); empty on error.
std::vector<uint8_t> zstd_compress(const uint8_t* p, size_t n, int level);

uint64_t payload_bytes(const EncodedTensor& et);
uint64_t fallback_bytes(const EncodedTensor& et);
// The configured zstd level for the chunks of et whose level pick_chunk
// deferred (EncodedChunk::zstd_deferred; data: the tensor's bytes); each
// keeps the smaller frame.
void finish_zstd(const uint8_t* data, const EncodeOptions& opt, EncodedTensor* et);
// Whether a model whose record and payloads take `with_model` bytes is worth
// keeping against `without` bytes of zstd / raw chunks: it must save at least
// the fraction opt.min_model_gain of them (with 0: cost no more).
inline bool model_pays(uint64_t with_model, uint64_t without, const EncodeOptions& opt) {
  return with_model <= without &&
         static_cast<double>(with_model) <= static_cast<double>(without) * (1.0 - opt.min_model_gain);
}
void drop_model(const uint8_t* data, const EncodeOptions& opt, EncodedTensor* et);

// Shared models: small tensors of one kind can share one model (tables
// stored once). The shape of a shared model drops per-tensor side
// information (int: row/column classes, tools, zero points).
bool shareable(const EncodedTensor& et);
// Tensors with equal signatures may share a model.
std::string share_signature(const EncodedTensor& et);
TensorModel shared_model_shape(const TensorModel& base);

class SharedStats {
 public:
  explicit SharedStats(const TensorModel& shape);
  ~SharedStats();
  // A member's counts under the shape: its own counts (et.stats) where its
  // model counts symbols as the shape does, else counted again from data.
  void add(const EncodedTensor& et, const uint8_t* data);
  TensorModel build() const;  // shape + tables, finalized
  // A lower bound, in bytes, of the members' payloads under `built` (the
  // model build() returned): the counted symbols at their table costs plus
  // a float model's raw mantissa bits. Chunk headers, lane states and escape
  // extra bits are left out.
  double coded_bytes_lower_bound(const TensorModel& built) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  TensorModel model_;
};

// Split models (split_encode.cpp): whether ggml_type has a block layout to
// split, and the split of a GGUF tensor of that type whose ordinary coding
// is *et (data: its bytes). *et becomes the split coding where that
// measures smaller (its record and payloads against the ordinary model's),
// and is left as it is otherwise.
bool split_candidate(uint32_t ggml_type);
void try_split(uint32_t ggml_type, const uint8_t* data, const EncodeOptions& opt, TableCoding coding,
               EncodedTensor* et);

// Encodes a tensor's chunks with a given (finalized) model.
EncodedTensor encode_with_model(const TensorGeometry& g, const uint8_t* data, const TensorModel& m,
                                const EncodeOptions& opt);

}  // namespace wcodec
