// wcodec/reader.h — random-access reading of the original bytes of a
// .wcodec container (docs/wcodec-format.md), chunk by chunk.
//
// Thread-safety: Reader is immutable after open(); read(), decode_chunk() and
// verify() may be called from many threads at once (they use pread and
// per-call scratch).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "wcodec/format.h"
#include "wcodec/safetensors.h"
#include "wcodec/status.h"

namespace wcodec {

// Decoding tables of the models (built when a tensor is first decoded) are
// kept in one process-wide cache, least recently used first out, bounded by
// this many bytes (a table in use by a decode is freed when it finishes).
// The storage of evicted tables, up to half the budget, is kept for the
// next tables built.
inline constexpr uint64_t kDefaultVectorTableBudget = 64ull << 20;
void set_vector_table_budget(uint64_t bytes);
// Bytes of decoding tables held by that cache now.
uint64_t vector_table_bytes();
// Bytes of evicted tables' storage kept for reuse now.
uint64_t vector_table_spare_bytes();

// One chunk of a tensor as the reader sees it.
struct ChunkEntry {
  uint64_t file_offset;     // payload position in the .wcodec file
  uint32_t stored_size;     // payload bytes
  uint32_t decoded_size;    // original bytes
  uint64_t decoded_offset;  // position in the original file
  uint64_t xxh3;            // XXH3-64 of the decoded bytes
  uint8_t method;           // 0 raw, 1 zstd, 2 model, 3 zstd group (format 2.11)
  // Method 3: the chunk's bytes are [group_offset, + decoded_size) of its
  // group's frame (the payload, shared by the group's chunks), which
  // decodes to group_size bytes. Set by the reader; 0 for other methods.
  uint32_t group_offset;
  uint32_t group_size;
};

class Reader {
 public:
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // Opens and validates structure (header, footer, index CRC, index
  // consistency with the stored safetensors header). Decodes nothing.
  static Result<std::unique_ptr<Reader>> open(const std::string& path);
  // The same for a container open as `fd` (readable, positioned anywhere:
  // the reader uses pread). The Reader works on its own duplicate of fd
  // (F_DUPFD_CLOEXEC) and closes that; the caller keeps fd and may close it
  // at once. `name` names the container in every message.
  static Result<std::unique_ptr<Reader>> open_fd(int fd, std::string name);
  // The same for a container held in memory: [data, data + size), which
  // must stay unchanged and outlive the Reader. Nothing is copied: chunks
  // decode straight from it. `name` names it in errors.
  static Result<std::unique_ptr<Reader>> open_memory(const uint8_t* data, size_t size, const std::string& name);

  const std::string& path() const { return path_; }
  uint64_t original_size() const { return original_size_; }
  uint64_t file_size() const { return file_size_; }
  const std::array<uint8_t, 32>& original_sha256() const { return sha256_; }
  const std::string& metadata_json() const { return meta_json_; }
  // The original's tensors. For a GGUF source (source_is_gguf()) their
  // layout as gguf_tensor_layout (wcodec/gguf.h) gives it: gaps of zeros
  // between tensors, quantized types as U8 rows.
  const SafetensorsHeader& header() const { return header_; }
  // Whether the original is a GGUF file (header flag bit 0, format 2.4).
  bool source_is_gguf() const { return gguf_; }
  size_t num_tensors() const;
  // Summary of tensor i (from the index; no decoding).
  TensorSummary tensor_summary(size_t i) const;

  // Reads original bytes [offset, offset+length) into out, decoding only
  // the chunks touched. Reads past the end return OutOfRange.
  Status read(uint64_t offset, uint64_t length, uint8_t* out) const;

  // Chunk-level access (used by the mount's cache): all chunks of the file
  // in original-offset order.
  size_t num_chunks() const { return all_chunks_.size(); }
  const ChunkEntry& chunk(size_t global_index) const;
  // Index of the chunk containing original offset `off` (which must lie in
  // the tensor data region), or SIZE_MAX for the header region.
  size_t chunk_at(uint64_t off) const;
  uint64_t data_start() const { return header_.data_start; }
  // Decodes chunk `global_index` into out (chunk(i).decoded_size bytes),
  // verifying its checksum.
  Status decode_chunk(size_t global_index, uint8_t* out) const;
  // Whether chunks a and b may decode together (decode_chunk_group):
  // model-coded chunks of one rectangle size whose models the grouped
  // decoder runs together: chunks of one tensor (1- and 2-byte floats; int8
  // / uint8 codes with activity contexts), or float chunks of two tensors
  // whose models share a step loop.
  bool pairable(size_t a, size_t b) const;
  // Decodes chunks idx[0..n) (n <= kMaxChunkGroup) into outs[i] (each
  // chunk's decoded size), verifying every checksum: together where they
  // are all pairable with idx[0], else one after the other. Chunk i's
  // result goes to sts[i], as decode_chunk would report it.
  void decode_chunk_group(const size_t* idx, uint8_t* const* outs, int n, Status* sts) const;
  // How many of the next chunks from `first` (at most `avail` of them, all
  // pairable with it) one group should take: 1 (alone), 2 or 3, so that a
  // run of pairable chunks splits into groups of 3 and 2 without a single
  // left over.
  static int group_size(size_t avail) { return avail < 2 ? 1 : (avail == 2 || avail == 4 ? 2 : 3); }

  // Checks the whole-file CRC32 (every stored byte); with full, decodes
  // everything and checks per-tensor CRC32 and the SHA-256 of the original.
  Status verify(bool full) const;
  // Writes the original file to `out_path` (atomic rename), checking SHA-256.
  Status decode_to_file(const std::string& out_path) const;

  // Store-level description of chunk `global_index` for messages.
  std::string describe_chunk(size_t global_index) const { return chunk_what(global_index); }

 private:
  Reader() = default;
  struct Tensor;
  // The library's own code beside the reader (decompress/reader_i.h: device
  // planning, stored bytes) reaches the fields below through this.
  friend struct ReaderAccess;
  Status pread_exact(uint64_t off, uint64_t len, uint8_t* out) const;
  // open / open_fd / open_memory after the file size (and the descriptor or the
  // memory) are set: validates and loads the header, footer and index.
  static Result<std::unique_ptr<Reader>> load(std::unique_ptr<Reader> rd);
  Status load_aux(size_t tensor) const;
  // Whether chunk `global_index` decodes with its tensor's zero points.
  bool uses_zero_points(size_t global_index) const;
  // decode_chunk with the chunk's stored bytes already read (payload).
  Status decode_chunk_from(size_t global_index, const uint8_t* payload, uint8_t* out) const;
  // Whether chunks idx[0..n) (2 <= n <= kMaxChunkGroup) are all pairable
  // with idx[0].
  bool groupable(const size_t* idx, int n) const;
  // decode_chunk_group with the chunks' stored bytes already read.
  void decode_group_from(const size_t* idx, const uint8_t* const* payloads, uint8_t* const* outs, int n,
                         Status* sts) const;
  // Chunks pairable with gi among the next few (at most kMaxChunkGroup + 1,
  // within 8 chunks, each ending at or before `end`), ascending, into cand;
  // returns how many.
  size_t partners(size_t gi, uint64_t end, size_t* cand) const;
  std::string chunk_what(size_t global_index) const;
  struct ZstdGroupCache;
  // A chunk of a zstd group (method 3): the group's decoded bytes from
  // `cache` (null: the reader's), or its frame (`frame`, or read when null)
  // decoded and kept there.
  Status decode_group_member(size_t global_index, const uint8_t* frame, uint8_t* out, ZstdGroupCache* cache) const;

  std::string path_;
  int fd_ = -1;
  const uint8_t* mem_ = nullptr;  // in-memory container (open_memory), else null
  int table_coding_ = 0;  // TableCoding of the model records (header flags)
  bool gguf_ = false;     // the original is a GGUF file (kFlagGgufSource)
  uint64_t file_size_ = 0;
  uint64_t original_size_ = 0;
  std::array<uint8_t, 32> sha256_{};
  uint32_t file_crc_ = 0;
  std::string meta_json_;
  std::vector<uint8_t> orig_header_;  // safetensors 8 + N bytes; GGUF: through the data section's start
  SafetensorsHeader header_;
  std::vector<std::unique_ptr<Tensor>> tensors_;
  std::vector<ChunkEntry> all_chunks_;
  std::vector<uint32_t> chunk_tensor_;  // global chunk -> tensor
  std::vector<uint64_t> chunk_local_;   // global chunk -> index within tensor
  mutable std::mutex aux_mu_;           // guards lazy decoding of aux tensors
  // The decoded bytes of the zstd groups read last (internally locked).
  std::unique_ptr<ZstdGroupCache> zgroups_;
};

}  // namespace wcodec
