// wcodec/format.h — constants of the .wcodec container shared by the
// encoder and the reader (magic numbers, version, sizes, reader limits) and
// the per-tensor summary both report.
//
// Format: docs/wcodec-format.md. A .wcodec file keeps the original
// safetensors header bytes and every tensor's data cut into chunks that
// decode independently, with an XXH3-64 per chunk, a CRC32 per tensor and
// the SHA-256 of the whole original file.
//
// Thread-safety: constants and plain data.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "wcodec/safetensors.h"

namespace wcodec {

inline constexpr char kMagic[4] = {'W', 'C', 'D', 'C'};
inline constexpr char kFooterMagic[4] = {'C', 'D', 'C', 'W'};
// Written by this encoder. Readers also accept 1.x (the same layout with
// gamma-coded frequency tables, docs/wcodec-format.md §7.3).
inline constexpr uint16_t kVersionMajor = 2;
// The highest minor version this build reads and writes (`wcodec
// --version`); a file says the lowest its features need (container_encode.cpp),
// 2.1 to 2.11 as the changelog of docs/wcodec-format.md lists them (2.10:
// kernel-row symbols; 2.11: zstd groups).
inline constexpr uint16_t kVersionMinor = 11;
// Header flags (§4.1): bit 0, the original is a GGUF file (§4.9; format
// 2.4). Older readers refuse such a file (they require flags = 0).
inline constexpr uint32_t kFlagGgufSource = 1;
inline constexpr uint32_t kHeaderSize = 128;
inline constexpr uint32_t kFooterSize = 32;
inline constexpr uint32_t kAlign = 128;
// Reader limits (hostile input).
inline constexpr uint64_t kMaxIndexSize = 1ull << 31;
inline constexpr uint64_t kMaxTensors = 1u << 24;
inline constexpr uint64_t kMaxChunkDecoded = 64u << 20;
// Most chunks one call decodes together (Reader::decode_chunk_group).
inline constexpr int kMaxChunkGroup = 3;
// Format 2.11 (§6.2): the most decoded bytes of one zstd group (chunks of
// small tensors coded as one zstd frame, method 3) a reader accepts.
inline constexpr uint64_t kMaxZstdGroupDecoded = 1u << 20;
// A zstd group chunk's share of its group's stored bytes, for reports: the
// frame's `stored` bytes split in proportion to the decoded bytes (the
// chunk's [off, off + len) of the group's `total`); a group's shares add
// up to `stored`.
inline uint64_t zstd_group_share(uint64_t stored, uint64_t off, uint64_t len, uint64_t total) {
  return total ? stored * (off + len) / total - stored * off / total : 0;
}

struct TensorSummary {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
  uint64_t original_bytes = 0;
  uint64_t stored_bytes = 0;  // chunk payloads
  uint64_t chunks = 0;
  uint64_t chunks_model = 0, chunks_zstd = 0, chunks_raw = 0;
  std::string kind;   // int8, int4, ternary, BF16, bytes, raw
  std::string model;  // chosen model parameters
  uint32_t tiles_total = 0, tiles_with_tools = 0;
  std::array<uint32_t, 6> pred_hist{};   // none, left, top, avg, planar, dc
  std::array<uint32_t, 3> xform_hist{};  // none, dct, adst (8x8 blocks)
  double order0_bits = 0;  // order-0 entropy of the codes, bits per stored bit (add_order0_entropy)
  uint32_t crc32 = 0;
};

}  // namespace wcodec
