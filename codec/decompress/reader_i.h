// codec/decompress/reader_i.h — Reader internals for the library's own code
// beside reader.cpp (device_plan.cpp): a tensor's index record and the
// narrow access ReaderAccess gives to it. Not part of any interface.
// Thread-safety: as Reader (immutable after open; aux tensors are decoded
// lazily under Reader's lock).
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "raw_vector.h"
#include "split_model.h"
#include "tensor_model.h"
#include "wcodec/reader.h"

namespace wcodec {

struct Reader::Tensor {
  TensorInfo info;
  uint32_t crc = 0;
  TensorGeometry geom;
  int32_t aux = -1;
  bool has_model = false;
  bool own_model = false;
  std::shared_ptr<const TensorModel> model;  // own or another tensor's
  // Model flag 3 (format 2.5): the tensor's split model; has_model is
  // true and model is null.
  std::shared_ptr<const SplitModel> split;
  // Its chunks: entries first_global .. first_global + num_chunks - 1 of
  // the reader's all_chunks_.
  size_t first_global = 0, num_chunks = 0;
  std::string kind, model_desc;
  uint32_t tiles_total = 0, tiles_with_tools = 0;
  std::array<uint32_t, 6> pred_hist{};
  std::array<uint32_t, 3> xform_hist{};
  // Decoded aux (zero-point) bytes of this tensor when another tensor needs them.
  mutable std::vector<uint8_t> decoded;
  mutable std::atomic<bool> decoded_ready{false};
};

// The decoded bytes of the zstd groups (format 2.11, §6.2) read last, so
// that the chunks of one group decode its frame once: a few groups, least
// recently used out. Entries are shared: a group evicted while a reader
// copies from it stays alive until that copy is done.
struct Reader::ZstdGroupCache {
  static constexpr size_t kEntries = 8;
  struct Entry {
    uint64_t frame_offset = 0;
    uint64_t used = 0;
    std::shared_ptr<const std::vector<uint8_t>> bytes;
  };
  std::mutex mu;
  uint64_t tick = 0;
  std::array<Entry, kEntries> entries;
};

// What the library's planners reach inside a Reader (Reader befriends this
// struct alone).
struct ReaderAccess {
  static const Reader::Tensor& tensor(const Reader& rd, size_t ti) { return *rd.tensors_[ti]; }
  // The tensor of global chunk gi and gi's index within it.
  static uint32_t chunk_tensor(const Reader& rd, size_t gi) { return rd.chunk_tensor_[gi]; }
  static uint64_t chunk_local(const Reader& rd, size_t gi) { return rd.chunk_local_[gi]; }
  static Status pread_exact(const Reader& rd, uint64_t off, uint64_t len, uint8_t* out) {
    return rd.pread_exact(off, len, out);
  }
  // Decodes aux (zero-point) tensor ti once; its bytes are then in
  // tensor(rd, ti).decoded.
  static Status load_aux(const Reader& rd, size_t ti) { return rd.load_aux(ti); }
  // Stored bytes [off, off + len): in place for an in-memory container,
  // else read into *buf (reader.cpp).
  static Result<const uint8_t*> stored_bytes(const Reader& rd, uint64_t off, uint64_t len, ScratchBytes* buf);
};

}  // namespace wcodec
