// codec/common/split_model.h — split models (format 2.5, docs/wcodec-format.md
// §8.4; palette streams: format 2.6, §8.5): a tensor of byte rows made of
// fixed-size blocks (a GGUF tensor of a block-quantized ggml type, one row of blocks per grid row) coded as
// several streams, each gathering some byte ranges of every block (a Q4_K
// block's fp16 d, its fp16 dmin, its 12 bytes of packed scales, its 128
// bytes of packed codes). Each stream is a tensor of its own with the same
// rows and chunk bands, coded with an ordinary model (float, int, bytes) or
// none (zstd or raw per chunk). The record and the chunk payload framing are
// shared by the encoder and every decoder.
//
// Thread-safety: a SplitModel is immutable once parsed or built and may be
// shared by concurrent decoders (its TensorModels are).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "split_recode.h"
#include "tensor_model.h"
#include "wcodec/status.h"

namespace wcodec {

// Limits of a split record (§8.4).
inline constexpr uint32_t kSplitMaxBlockBytes = 4096;  // the largest ggml block is 292 bytes
inline constexpr uint32_t kSplitMaxStreams = 16;
inline constexpr uint32_t kSplitMaxRanges = 16;  // byte ranges per stream

struct SplitRange {
  uint16_t off = 0, len = 0;  // bytes [off, off + len) of each block
};

// The derived streams of a palette stream (format 2.6, §8.5), in order.
enum PaletteDerived : uint32_t { kPalFirst = 0, kPalGaps = 1, kPalIndex = 2, kPalDerivedCount = 3 };

struct SplitStream {
  std::vector<SplitRange> ranges;  // in block order, gathered in this order
  uint8_t elem_bits = 8;           // the stream grid's element size: 2, 4, 8, 16 or 32
  bool has_model = false;
  TensorModel model;               // when has_model
  // Format 2.6 (§8.5): a palette stream (pal_group != 0) is not coded
  // itself; its codes, in groups of pal_group bytes, are coded as three
  // derived streams (first values, gaps, 4-bit indices: PaletteDerived),
  // each with the fields above and no ranges.
  uint16_t pal_group = 0;
  bool pal_signed = false;           // codes ordered as int8 (else uint8)
  bool pal_q5 = false;               // ggml 5-bit codes (kPalCodesQ5): 20 bytes per 32 codes
  std::vector<SplitStream> derived;  // kPalDerivedCount when pal_group
  uint32_t derived_bpb = 0;          // a derived stream's bytes per block
  // Format 2.7 (§8.6): a recoded stream (recode != 0, SplitRecode in
  // split_recode.h) is coded, with the fields above, after a lossless
  // per-block transform; rc_d_off / rc_m_off: the block's fp16 d and m
  // (kRecodeZeroShift), held by earlier streams.
  // Format 2.9: a kRecodeZeroPos stream is coded as two derived streams
  // (ZeroPosDerived: positions, other codes), each with the fields above
  // and no ranges, in `derived`.
  uint8_t recode = 0;
  uint16_t rc_d_off = 0, rc_m_off = 0;
  bool recoded() const { return recode != 0; }
  uint32_t bytes_per_block() const;
  // The bytes per block of the stream's coded tensor: bytes_per_block(),
  // or kQ3Codes for kRecodeQ3Codes (format 2.8).
  uint32_t coded_bytes_per_block() const;
  bool palette() const { return pal_group != 0; }
  // Whether the stream is coded as derived streams (a palette, or the
  // forced zero apart): one chunk part each instead of one for the stream.
  bool has_derived() const { return palette() || recode == kRecodeZeroPos; }
  // A palette stream's codes per block (its bytes, or 32 per 20 bytes of
  // 5-bit codes).
  uint32_t codes_per_block() const { return pal_q5 ? bytes_per_block() / 20 * 32 : bytes_per_block(); }
  // The bytes per block of derived stream k of a palette stream or of a
  // kRecodeZeroPos stream.
  uint32_t derived_bytes_per_block(uint32_t k) const;
};

struct SplitModel {
  uint32_t ggml_type = 0;  // informative (what the encoder split); decoders do not use it
  uint32_t block_bytes = 0;
  std::vector<SplitStream> streams;

  // The stream's tensor: the parent's rows and chunk bands, its columns
  // the stream's elements per row. REQUIRES: check_parent(g) succeeded.
  TensorGeometry stream_geometry(const TensorGeometry& parent, size_t s) const;
  // The tensor of any stream, derived ones included.
  TensorGeometry geometry_of(const TensorGeometry& parent, const SplitStream& st) const;
  // The parts of a chunk payload: one per stream, three per palette stream.
  size_t num_parts() const;
  // The lowest format minor version the record needs: 5, 6 with a palette,
  // 7 with a recoded stream, 8 with 3-bit codes (kRecodeQ3Codes), 9 with
  // the forced zero apart (kRecodeZeroPos).
  uint16_t format_minor() const;
  // Whether a split model may code a tensor of this geometry: 8-bit
  // elements, bands of rows (or an empty tensor), rows of whole blocks.
  Status check_parent(const TensorGeometry& g, const std::string& what) const;
  // Gathers stream s of the `rows` rows of blocks at `rows_bytes` (row
  // width row_bytes) into out (rows × the stream's row bytes).
  void gather(const uint8_t* rows_bytes, uint64_t rows, uint64_t row_bytes, size_t s, uint8_t* out) const;
  // The inverse: scatters stream s into the rows.
  void scatter(const uint8_t* in, uint64_t rows, uint64_t row_bytes, size_t s, uint8_t* rows_bytes) const;

  // The record stored after model flag 3 (§8.4).
  std::vector<uint8_t> serialize(TableCoding coding = kTablesCompact) const;
  // Parses and validates a record against the parent tensor's geometry
  // (every rule of §8.4; errors name `what`, the field and the value).
  static Result<SplitModel> deserialize(const uint8_t* p, size_t n, const TensorGeometry& parent,
                                        const std::string& what, TableCoding coding = kTablesCompact);
  std::string describe() const;
};

// One part of a split chunk payload (§6.1): a stream's, or a derived
// stream's of a palette or forced-zero stream (in stream order, derived
// streams in order).
struct SplitPart {
  uint8_t method = 0;  // ChunkMethod
  const uint8_t* data = nullptr;
  uint32_t len = 0;
};
// Splits a split chunk payload into its parts (count: num_parts()).
// Errors name `what`.
Status parse_split_payload(const SplitModel& m, const uint8_t* p, size_t n, const std::string& what,
                           std::vector<SplitPart>* parts);

}  // namespace wcodec
