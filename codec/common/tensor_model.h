// codec/common/tensor_model.h — a tensor's element grid and its model, as
// the encoder writes them and every decoder reads them: the chunk
// rectangles (TensorGeometry), the model parameters and frequency tables
// (TensorModel) with their record form (serialize / deserialize), the
// decoding tables built from them, and the chunk checksum.
//
// Thread-safety: TensorModel is immutable once built and may be shared by
// concurrent decoders (the table cache behind view() is internally locked).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "chunk_model.h"
#include "rans.h"
#include "raw_vector.h"
#include "simd_env.h"
#include "wcodec/reader.h"
#include "wcodec/safetensors.h"
#include "wcodec/status.h"

namespace wcodec {

// Chunk coding methods (stored per chunk).
// kZstdGroup (format 2.11, §6.2): the chunk is part of a zstd frame shared
// with other chunks (the container reader decodes it, not decode_chunk).
enum class ChunkMethod : uint8_t { kRaw = 0, kZstd = 1, kModel = 2, kZstdGroup = 3 };

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
    // contexts stay in cache) and get no slot_all; so do bytes models
    // (chunk_decode_hwy_bytes.cpp).
    RawVector<uint8_t> lut_all;  // + 4 bytes of padding
    std::vector<uint32_t> fs_all;
    std::vector<DecTable> d0, d1;
    // Ternary slot bounds per context (ModelView::tern3), or empty.
    std::vector<uint32_t> tern3;
    // Kernel-row entries at 1/8 slot resolution (ModelView::krow_ent), or
    // empty.
    std::vector<uint32_t> krow_ent;
    // Entries at 1/8 slot resolution of t0 and t1 (ModelView::ent8,
    // ent8_1), or empty.
    std::vector<uint32_t> ent8, ent8_1;
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

// XXH3-64 of a chunk's decoded bytes, with the widest XXH3 build this CPU
// runs (chunk_hash_x86.h).
uint64_t chunk_hash(const uint8_t* p, size_t n);

}  // namespace wcodec
