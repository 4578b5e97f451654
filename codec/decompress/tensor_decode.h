// codec/decompress/tensor_decode.h — decoding one chunk of a tensor on the
// CPU: splitting a model-coded payload, running the vector decoders where
// the CPU has them (else the reference decoders of chunk_decode.h),
// decoding pairable chunks together, and checking the checksums.
//
// Thread-safety: pure functions over their arguments; each decoding thread
// brings its own DecodeScratch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "raw_vector.h"
#include "split_model.h"
#include "tensor_model.h"
#include "wcodec/status.h"

namespace wcodec {

// What a chunk's messages name ("FILE: tensor \"T\" chunk N"), built only
// when a message is: a reader decodes its chunks (but split chunks, whose
// streams' names are still made up front: about 256 KiB each, where the
// strings do not show) without making the string (for chunks of a few KiB
// that took about 4% of the decode). A parameter
// type only: made from a string it refers to that string, which must
// outlive it, as a temporary argument does.
class What {
 public:
  What(const std::string& s) : s_(&s) {}  // NOLINT(google-explicit-constructor): every string names
  // make(obj, i) builds the name.
  What(std::string (*make)(const void*, size_t), const void* obj, size_t i) : make_(make), obj_(obj), i_(i) {}
  std::string str() const { return s_ ? *s_ : make_(obj_, i_); }

 private:
  const std::string* s_ = nullptr;
  std::string (*make_)(const void*, size_t) = nullptr;
  const void* obj_ = nullptr;
  size_t i_ = 0;
};

// Checks that a shared model fits a tensor's geometry (element size, no
// per-tensor side information).
Status check_shared_model(const TensorModel& m, const TensorGeometry& g, const std::string& what);

// Per-thread scratch for decode_chunk.
struct DecodeScratch {
  ScratchBytes lm;  // lane-major elements of the vector decoders
  ScratchBytes lm_group[2];  // the other members' of a group (decode_chunk_group)
  std::vector<uint16_t> e;
  std::vector<uint8_t> sm;
  std::vector<int32_t> res;
  std::vector<int32_t> tile;
  std::vector<uint8_t> zbuf;
  std::vector<uint8_t> split_buf;  // one stream of a split chunk (decode_split_chunk)
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
                           size_t payload_len, uint64_t decoded_size, const What& what, ModelPayload* out);

// Decodes chunk `index` into out (chunk's decoded size bytes) and checks its
// XXH3-64. `zp` points at the decoded zero-point tensor when the model needs
// one. Errors name `what` (store file / tensor / chunk).
Status decode_chunk(const TensorGeometry& g, const TensorModel* model, uint64_t index, ChunkMethod method,
                    const uint8_t* payload, size_t payload_len, uint64_t decoded_size, uint64_t xxh3,
                    const uint8_t* zp, uint32_t zcols, uint32_t zgroup, uint8_t* out, DecodeScratch& scratch,
                    const What& what);

// decode_chunk without the checksum check (the streams of a split chunk,
// whose checksum covers the whole chunk).
Status decode_chunk_unchecked(const TensorGeometry& g, const TensorModel* model, uint64_t index, ChunkMethod method,
                              const uint8_t* payload, size_t payload_len, uint64_t decoded_size, const uint8_t* zp,
                              uint32_t zcols, uint8_t* out, DecodeScratch& scratch, const What& what);
// zstd data (payload_len bytes at payload) into out, which it must fill
// exactly (decoded_size bytes); Corruption naming `what` and `noun` ("zstd
// chunk") otherwise. One decompression context per thread.
Status zstd_decode_exact(const uint8_t* payload, size_t payload_len, uint8_t* out, uint64_t decoded_size,
                         const What& what, const char* noun);
// Corruption naming `what` unless XXH3-64 of out[0, decoded_size) is xxh3.
Status check_chunk_hash(const uint8_t* out, uint64_t decoded_size, uint64_t xxh3, const What& what);

// Decodes chunk `index` of a tensor coded with a split model (§6.1):
// each stream's part with decode_chunk_unchecked, then scattered into out,
// then the checksum. The parts run on whatever decoder their models route
// to (vector or reference), so every CPU path decodes split chunks.
Status decode_split_chunk(const TensorGeometry& g, const SplitModel& m, uint64_t index, const uint8_t* payload,
                          size_t payload_len, uint64_t decoded_size, uint64_t xxh3, uint8_t* out,
                          DecodeScratch& scratch, const std::string& what);

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
// decode_chunk_group without the checksums (the streams of split chunks,
// whose checksums cover the whole chunks; xxh3 is not read).
bool decode_chunk_group_unchecked(const GroupChunk* chunks, int n, DecodeScratch& scratch);

// Decodes n (2..kMaxChunkGroup) chunks of one split tensor (indexes index[i],
// rectangles of one size) together: each stream's parts of the n chunks as
// one group where their models group (decode_chunk_group_unchecked), the
// others one by one, then each chunk's recodes, scatter and checksum as
// decode_split_chunk. True: all decoded and their checksums match. False:
// decode each with decode_split_chunk, which names the chunk at fault.
bool decode_split_group(const TensorGeometry& g, const SplitModel& m, const uint64_t* index,
                        const uint8_t* const* payload, const size_t* payload_len, const uint64_t* decoded_size,
                        const uint64_t* xxh3, uint8_t* const* out, int n, DecodeScratch& scratch);

// Whether chunks of this model may decode in groups (decode_chunk_group).
bool model_groups(const TensorModel& m);
// Whether chunks of models a and b may decode in one group: the same model
// (model_groups), or models whose chunks share a step loop
// (float_loop_compatible, int_loop_compatible; their tables differ).
bool models_group(const TensorModel& a, const TensorModel& b);
}  // namespace wcodec
