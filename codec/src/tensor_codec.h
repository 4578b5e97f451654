// codec/src/tensor_codec.h — per-tensor modelling: choosing a model and its
// parameters from the data, encoding chunks, and decoding them on the CPU.
//
// Thread-safety: TensorModel is immutable once built and may be shared by
// concurrent decoders; each decoding thread brings its own DecodeScratch.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "chunk_decode.h"
#include "rans.h"
#include "raw_vector.h"
#include "wcodec/container.h"
#include "wcodec/safetensors.h"
#include "wcodec/status.h"

namespace wcodec {

// Chunk coding methods (stored per chunk).
enum class ChunkMethod : uint8_t { kRaw = 0, kZstd = 1, kModel = 2 };

// How a tensor's bytes are viewed as an element grid.
struct TensorGeometry {
  uint64_t rows = 0, cols = 0;  // element grid (cols in elements/codes)
  uint32_t elem_bits = 8;       // bits per element (2, 4, 8, 16, 32, ...)
  uint64_t chunk_rows = 0;      // rows per chunk when chunk_cols == cols
  uint64_t chunk_cols = 0;      // elements per chunk row segment
  uint64_t row_bytes() const { return cols * elem_bits / 8; }
  uint64_t chunk_bytes() const { return chunk_rows * chunk_cols * elem_bits / 8; }
  uint64_t num_chunks() const;
  // The rectangle of chunk i.
  void chunk_rect(uint64_t i, uint64_t* row0, uint64_t* col0, uint64_t* h, uint64_t* w) const;
};

struct TensorModel {
  ModelKind kind = ModelKind::kBytes;
  FloatParams fp{};
  IntParams ip{};
  BytesParams bp{};
  std::vector<FreqTable> t0, t1;
  std::vector<uint8_t> rc, cc;  // int side information
  IntLuts luts{};
  // Padded copies of the side information for the vector decoder.
  std::vector<uint8_t> rc_pad, cc_pad;
  // Flattened tables for the vector decoder (see ModelView), built on the
  // first view() so that opening a file does not pay for them. They live in
  // a process-wide cache with a byte budget (set_vector_table_budget): a
  // reader of many tensors keeps only the recently used ones, and a table
  // evicted while a decode uses it stays alive through the decode's hold.
  struct VectorTables {
    // Default-initialising storage: build_vector_tables writes every entry.
    using Slots = RawVector<uint32_t>;
    VectorTables() = default;
    VectorTables(const VectorTables&) = delete;
    VectorTables& operator=(const VectorTables&) = delete;
    ~VectorTables();  // hands the slot storage to the next build
    Slots slot_all, slot1_all;
    // The reference decoder's tables (DecTable: slot -> symbol bytes and
    // 256 freq | start << 16 entries per context), t0 then t1.
    // Int models of at most 32 symbols decode from these (ModelView::
    // sym_small / fs_small: 4 KiB per context instead of 16, so many
    // contexts stay in cache) and get no slot_all.
    RawVector<uint8_t> lut_all;  // + 4 bytes of padding
    std::vector<uint32_t> fs_all;
    std::vector<DecTable> d0, d1;
    // Ternary slot bounds per context (ModelView::tern3), or empty.
    std::vector<uint32_t> tern3;
    // Whether d0 / d1 (and lut_all / fs_all) were built: views for the
    // vector decoders skip them (a fifth of the tables' bytes) unless the
    // model decodes only from them.
    bool reference = false;
    size_t bytes() const;
  };
  // The model's entry in the table cache, shared by copies of the model.
  struct TableSlot;
  std::shared_ptr<TableSlot> vt;

  void finalize();
  // Which tables a view must point to: kVector, those of the vector
  // decoders (decode_*_simd; t0 and t1 may be null); kAll, also the
  // reference decoder's.
  enum class TableUse { kVector, kAll };
  // The decoder's view of the model. `hold` keeps the vector tables the
  // view points to alive; keep it while the view is in use.
  ModelView view(std::shared_ptr<const VectorTables>* hold, const uint8_t* zp = nullptr, uint32_t zcols = 0,
                 TableUse use = TableUse::kAll) const;
  // Serialized form stored in the tensor record.
  std::vector<uint8_t> serialize(TableCoding coding = kTablesCompact) const;
  static Result<TensorModel> deserialize(const uint8_t* p, size_t n, const TensorGeometry& g,
                                         const std::string& what, TableCoding coding = kTablesCompact);
  // Short human description ("float e:avg/16 k=3", "int8 ctx=8x4 tools").
  std::string describe() const;
};

struct EncodeOptions {
  uint64_t chunk_bytes = 256 * 1024;  // target decoded chunk size
  int zstd_level = 9;                 // fallback chunks
  bool tool_search = true;            // evaluate tile tools (prediction/transform)
  bool exhaustive_tools = false;      // evaluate tools on every tile (slow profile)
  bool format_2_1 = true;             // may use models of formats 2.1-2.3 (int nbr_modes 2, 3; float emode 5)
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
};

struct EncodedTensor {
  TensorGeometry geom;
  bool has_model = false;
  TensorModel model;
  int32_t aux_tensor = -1;  // index of the zero-point tensor (nibble codes)
  int32_t model_ref = -1;   // >= 0: uses the model of that (earlier) tensor
  uint32_t zgroup = 0;
  std::vector<EncodedChunk> chunks;
  TensorChoice choice;
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
uint64_t payload_bytes(const EncodedTensor& et);
uint64_t fallback_bytes(const EncodedTensor& et);
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
  void add(const TensorGeometry& g, const uint8_t* data);
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

// Checks that a shared model fits a tensor's geometry (element size, no
// per-tensor side information).
Status check_shared_model(const TensorModel& m, const TensorGeometry& g, const std::string& what);

// Encodes a tensor's chunks with a given (finalized) model.
EncodedTensor encode_with_model(const TensorGeometry& g, const uint8_t* data, const TensorModel& m,
                                const EncodeOptions& opt);

// Per-thread scratch for decode_chunk.
struct DecodeScratch {
  ScratchBytes lm;  // lane-major elements of the vector decoders
  ScratchBytes lm_group[2];  // the other members' of a group (decode_chunk_group)
  std::vector<uint16_t> e;
  std::vector<uint8_t> sm;
  std::vector<int32_t> res;
  std::vector<int32_t> tile;
  std::vector<uint8_t> zbuf;
};

// The parts of a model-coded chunk payload: optional tile map, the rANS
// stream (32 lane states + words) and the raw bit section.
struct ModelPayload {
  ChunkView cv;
  const uint8_t* map = nullptr;
  const uint8_t* rans = nullptr;
  uint32_t rans_len = 0;
  const uint8_t* raw = nullptr;
  size_t raw_len = 0;
  bool tail = false;  // flag bit 1: the raw section's tail is in the lane states
};
// Splits the payload of model-coded chunk `index` and checks its framing
// against the geometry and the model.
Status parse_model_payload(const TensorGeometry& g, const TensorModel& model, uint64_t index, const uint8_t* payload,
                           size_t payload_len, uint64_t decoded_size, const std::string& what, ModelPayload* out);

// Decodes chunk `index` into out (chunk's decoded size bytes) and checks its
// XXH3-64. `zp` points at the decoded zero-point tensor when the model needs
// one. Errors name `what` (store file / tensor / chunk).
Status decode_chunk(const TensorGeometry& g, const TensorModel* model, uint64_t index, ChunkMethod method,
                    const uint8_t* payload, size_t payload_len, uint64_t decoded_size, uint64_t xxh3,
                    const uint8_t* zp, uint32_t zcols, uint32_t zgroup, uint8_t* out, DecodeScratch& scratch,
                    const std::string& what);

// One chunk of a group for decode_chunk_group (arguments as for
// decode_chunk).
struct GroupChunk {
  const TensorGeometry* geom;
  const TensorModel* model;
  uint64_t index;
  const uint8_t* payload;
  size_t payload_len;
  uint64_t decoded_size;
  uint64_t xxh3;
  uint8_t* out;
};
// Decodes n (2..kMaxChunkGroup) model-coded chunks together where the
// vector decoder interleaves them: chunks of the same rectangle size whose
// models group (models_group; the chunks of one tensor, or of tensors of
// one shape). True: all decoded and their checksums match. False: nothing
// is written that the caller may use; decode each with decode_chunk, which
// also names the chunk at fault when one is damaged.
bool decode_chunk_group(const GroupChunk* chunks, int n, DecodeScratch& scratch);

uint64_t chunk_hash(const uint8_t* p, size_t n);

// Whether WCODEC_NO_SIMD (set, non-empty and not "0") turns every vector
// path off: the AVX-512 decoders and rANS encoder, the encoder's AVX2 row
// loops. Read once.
bool simd_disabled_by_env();
// Whether the vector decoders run on this CPU (AVX-512 with BW, VL, DQ,
// VBMI and VBMI2, and not turned off by WCODEC_NO_SIMD).
bool vector_decoder_available();

// Vector (AVX-512) decoders of a model-coded chunk: the same result as the
// reference decoders (decode_float_chunk; decode_int_residuals followed by
// int_finish_chunk) into out. Return 1 on success, 0 for a malformed chunk,
// -1 when this CPU or model configuration is not handled (the caller then
// uses the reference decoder). WCODEC_NO_SIMD=1 in the environment disables
// them. lm: scratch of simd_lane_major_bytes(cv) bytes; res, tmp_tile as for
// int_finish_chunk.
size_t simd_lane_major_bytes(const ChunkView& cv);
int decode_float_chunk_simd(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                            const uint8_t* raw, uint64_t raw_len, uint8_t* out, uint8_t* lm,
                            bool tail = false);
// One of the chunks decode_group_simd decodes together: its tile map (int;
// null for none), stream, raw bit section (float), output and lane-major
// scratch (simd_lane_major_bytes).
struct GroupSide {
  const uint8_t* map;
  const uint8_t* rans;
  uint32_t rans_len;
  const uint8_t* raw;
  uint64_t raw_len;
  bool tail;
  uint8_t* out;
  uint8_t* lm;
  uint64_t col0;  // the chunk's first tensor column (kernel contexts' phases, column classes)
  uint64_t row0;  // the chunk's first tensor row (row classes)
};
// n (2..kMaxChunkGroup) chunks with the same rectangle size (cv: h, w)
// decoded with their lanes' state chains interleaved, chunk i with
// models[i]: 1- and 2-byte floats (models that share a step loop, see
// models_group), and int8 / uint8 / 4-bit codes of one model with activity
// or kernel contexts, no tile map and no zero points (model_groups; models
// with scale classes group only with themselves). 1: all decoded; 0: a
// stream is malformed (decode each alone to learn which); -1: no grouped
// loop for these models or geometry.
int decode_group_simd(const ModelView* models, const ChunkView& cv, const GroupSide* sides, int n);
// Whether a float model's sign / high mantissa symbols have contexts.
inline bool float_sm_contexts(const FloatParams& p) { return p.nm > 1 || p.sign_ctx; }
// Whether chunks of float models a and b can share a step loop: one element
// size, exponent context mode and sign / mantissa context form (their tables
// and other parameters may differ).
inline bool float_loop_compatible(const FloatParams& a, const FloatParams& b) {
  return a.elem_bytes == b.elem_bytes && a.emode == b.emode && a.sign_ctx == b.sign_ctx &&
         float_sm_contexts(a) == float_sm_contexts(b);
}
// The activity form of an int model's step loop: 0 none (nb = 1), 1 one
// 128-entry table, 2 two tables (thresholds < 256), 3 compares.
inline int int_act_mode(const IntParams& p) {
  const uint32_t nthr = p.nb > 1 ? p.nb - 1u : 0u;
  uint32_t max_thr = 0;
  for (uint32_t i = 0; i < nthr; ++i) max_thr = p.thr[i] > max_thr ? p.thr[i] : max_thr;
  return nthr == 0 ? 0 : (max_thr < 128 ? 1 : (max_thr < 256 ? 2 : 3));
}
// Whether chunks of int8 / uint8 models a and b can share a step loop:
// activity contexts or kernel contexts with one scale class, the same code
// type, extra neighbour (kernel shape) and activity form (tables and
// thresholds may differ).
inline bool int_loop_compatible(const IntParams& a, const IntParams& b) {
  return a.sub == b.sub && (a.nbr_mode == 0 || a.nbr_mode == 3) && a.nbr_mode == b.nbr_mode && a.ns == 1 &&
         b.ns == 1 && a.off_a == b.off_a && (a.nbr_mode == 0 || a.period == b.period) &&
         int_act_mode(a) == int_act_mode(b);
}
// Whether chunks of this model may decode in groups (decode_chunk_group).
bool model_groups(const TensorModel& m);
// Whether chunks of models a and b may decode in one group: the same model
// (model_groups), or models whose chunks share a step loop
// (float_loop_compatible, int_loop_compatible; their tables differ).
bool models_group(const TensorModel& a, const TensorModel& b);
int decode_int_chunk_simd(const ModelView& m, const ChunkView& cv, const uint8_t* tile_map, const uint8_t* rans,
                          uint32_t rans_len, uint8_t* out, int32_t* res, int32_t* tmp_tile, uint8_t* lm);

}  // namespace wcodec
