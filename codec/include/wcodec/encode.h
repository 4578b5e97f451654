// wcodec/encode.h — encoding a safetensors file into the .wcodec container
// (docs/wcodec-format.md).
//
// Thread-safety: the encoder functions are re-entrant; each call runs its
// own encoding threads (EncodeConfig::threads) and joins them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "wcodec/format.h"
#include "wcodec/safetensors.h"
#include "wcodec/status.h"

namespace wcodec {

struct EncodeConfig {
  uint64_t chunk_bytes = 256 * 1024;  // decoded bytes per chunk (target)
  int threads = 1;
  bool tool_search = true;        // evaluate tile prediction/transform tools
  bool exhaustive_tools = false;  // evaluate them on every tile (slow)
  bool split_models = true;       // GGUF sources: split models per ggml block type (format 2.5)
  bool split_palette = true;      // split int8 codes as palettes and 4-bit indices where they fit (format 2.6)
  bool split_recode = true;       // recoded split streams: Q4_1 zero-point shift, fp16 as bf16 (format 2.7)
  bool kernel_rows = true;        // ternary 3x3 convolutions: kernel-row symbols (format 2.10)
  // 4-bit / uint8 codes and floats: tables at 9-bit precision where they
  // cost at most 1% more bits in a tensor (decoders read them as 2 KiB a
  // context instead of 16: faster on the vector paths); false: exact
  // 12-bit tables everywhere.
  bool x8_tables = true;
  // A model (a tensor's, or a GGUF split stream's) is kept only where its
  // record and payloads come to at most (1 - min_model_gain) of the zstd or
  // raw coding of the same bytes. 0 (default): every model that pays for
  // itself, the smallest files. 0.01 (`wcodec encode --fast-decode`): models
  // that save under 1% give way to zstd / raw chunks, which decode several
  // times faster (GGUF 4-bit code streams: docs/gguf.md). 0 <= value < 1.
  double min_model_gain = 0;
  int zstd_level = 9;             // fallback chunks
  // Small tensors stored as zstd chunks, of one dtype, in file order: as
  // one zstd frame per group of up to 64 KiB where that is smaller than
  // their frames apart (format 2.11, zstd groups); a group decodes once for
  // all its chunks, and one frame costs less to decode than many small ones.
  bool zstd_groups = true;
  // Container version to write: kVersionMajor, or 1 for readers of format
  // 1.x (gamma-coded frequency tables; otherwise the same bytes).
  uint16_t format_major = kVersionMajor;
  // Called with (bytes done, bytes total) from encoding threads, one call at
  // a time, `done` increasing; the last call has done == total.
  std::function<void(uint64_t, uint64_t)> progress;
  // Asked between tensors (from encoding threads); true stops the encode
  // with an error that says it was cancelled.
  std::function<bool()> cancelled;
};

struct EncodeReport {
  uint64_t original_size = 0;
  uint64_t encoded_size = 0;
  double seconds = 0;
  std::vector<TensorSummary> tensors;
};

// Encodes a safetensors file held in memory. `what` names it in errors.
Result<std::vector<uint8_t>> encode_safetensors(const uint8_t* data, size_t size, const EncodeConfig& cfg,
                                                const std::string& what, EncodeReport* report = nullptr);

// Fills order0_bits of every tensor of `report` (made by encode_safetensors
// of the same file): the order-0 entropy of its codes, the reference line of
// the benchmark. Encoding does not compute it.
Status add_order0_entropy(const uint8_t* data, size_t size, EncodeReport* report);

// Encodes file `in` into `out` (written to a temporary file in the same
// directory, fsynced and renamed: `out` is never left half-written).
// Memory stays bounded for any file size: tensors are read, encoded and
// written a few at a time (about threads + 2 tensors, plus the small
// tensors that may share a model, at most 256 MiB of them).
Status encode_safetensors_file(const std::string& in, const std::string& out, const EncodeConfig& cfg,
                               EncodeReport* report = nullptr);
// The same between open descriptors: reads bytes [0, size) of in_fd
// (pread) and writes the container to out_fd from offset 0 (pwrite; out_fd
// is neither truncated, synced nor closed). `what` names the input in
// errors.
Status encode_safetensors_fd(int in_fd, uint64_t size, int out_fd, const EncodeConfig& cfg, const std::string& what,
                             EncodeReport* report = nullptr);

}  // namespace wcodec
