// codec/compress/rans_encoder.h — the 32-lane interleaved rANS encoder
// (stream format: common/rans.h, docs/wcodec-format.md "Entropy coder").
// Thread-safety: a RansEncoder is a single-threaded object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "rans.h"
#include "raw_vector.h"

namespace wcodec {
// Encoder: symbols are pushed in decode order; finish() writes the stream.
//
// Storage is by *group*: a run of symbols of strictly increasing lanes (a
// decode step's phase, or part of one), one u32 (start | freq << 16) per
// lane and a lane mask per group. A group decodes lane by lane in lane
// order, so finish() can encode a whole group at once (in reverse: last
// group first), 16 lanes per AVX-512 vector where the CPU has it. Words
// are written from the end of the word buffer backwards, so they come out
// in the order the decoder consumes them.
class RansEncoder {
 public:
  RansEncoder() = default;
  RansEncoder(const RansEncoder&) = delete;
  RansEncoder& operator=(const RansEncoder&) = delete;
  // Every table has precision kMaxProbBits (the decoders' slot width).
  void put(int lane, const FreqTable& t, uint32_t s) {
    push(lane, uint32_t{t.start[s]} | uint32_t{t.freq[s]} << 16);
  }
  // A symbol given as start | freq << 16 (a packed table entry).
  void put_sf(int lane, uint32_t sf) { push(lane, sf); }
  // Uniform k-bit value, k <= 12: frequency 2^(12-k), start v << (12-k).
  void put_bits(int lane, uint32_t v, uint32_t k) { push(lane, bits_entry(v, k)); }
  static uint32_t bits_entry(uint32_t v, uint32_t k) { return (v << (12 - k)) | (1u << (28 - k)); }

  // Reverse mode, for walkers that can produce groups last first (reverse
  // decode order): each group is encoded as soon as a block of them is
  // complete, so the chunk's symbols are never stored. max_symbols bounds
  // the symbols to come (one word each at most).
  void begin_reverse(const uint32_t* init, size_t max_symbols);
  // The group before the previous one: entries sf[l * stride] of the lanes
  // in mask.
  void put_group_reverse(uint32_t mask, const uint32_t* sf, size_t stride = 1) {
    if (rev_next_ == 0) flush_reverse();
    --rev_next_;
    mask_[rev_next_] = mask;
    for (int l = 0; l < kLanes; ++l) sf_[rev_next_ * kLanes + l] = sf[l * stride];
  }
  // Groups 0 .. n-1 of all kLanes lanes, entries sf[g * kLanes + l], given
  // after every later group: the first n groups of the stream, encoded
  // straight from sf.
  void put_full_groups_reverse(const uint32_t* sf, size_t n);
  // Appends the states and words as finish() does; returns bytes written.
  size_t finish_reverse(std::vector<uint8_t>& out);
  // Appends 32 u32 states + the u16 word stream to out; returns bytes written.
  // init: the lanes' initial encoder states (= the decoder's final states),
  // each in [kRansL, 2 kRansL); null: kRansL. vector = false: the scalar
  // pass even where AVX-512 is available (same bytes; for tests).
  size_t finish(std::vector<uint8_t>& out, const uint32_t* init = nullptr, bool vector = true);
  void clear() {
    ngroups_ = 0;
    last_ = kLanes;
  }

 private:
  void push(int lane, uint32_t sf) {
    if (lane <= last_) new_group();
    sf_[(ngroups_ - 1) * kLanes + lane] = sf;
    mask_[ngroups_ - 1] |= 1u << lane;
    last_ = lane;
  }
  void new_group() {
    if (ngroups_ == mask_.size()) grow();
    mask_[ngroups_++] = 0;
  }
  void grow();
  void flush_reverse();
  std::vector<uint32_t> mask_;  // lanes of each group
  std::vector<uint32_t> sf_;    // kLanes entries per group; only masked lanes are set
  size_t ngroups_ = 0;
  int last_ = kLanes;  // lane of the last symbol; kLanes: start a group
  // Reverse mode: a block of kRevBlock groups filled from the end; the
  // states; the word buffer, filled from the end.
  static constexpr size_t kRevBlock = 64;
  size_t rev_next_ = 0;
  uint32_t rev_x_[kLanes] = {};
  RawVector<uint16_t> words_;  // written before read
  size_t rev_pos_ = 0;
};

// The encoder's group pass with AVX-512 (rans_encode_avx512.cpp): encodes
// groups ngroups-1 .. 0 into states x, writing words backwards from *pos.
// False (nothing done) where the CPU lacks AVX-512 or WCODEC_NO_SIMD is set.
bool rans_encode_groups_avx512(const uint32_t* mask, const uint32_t* sf, size_t ngroups, uint32_t* x,
                               uint16_t** pos);
// The same pass with Highway (rans_encode_hwy.cpp: AVX2), for the avx2
// path. False (nothing done) where the avx2 path is not in use (scalar path,
// or the avx512 path, which takes rans_encode_groups_avx512) or not built.
bool rans_encode_groups_hwy(const uint32_t* mask, const uint32_t* sf, size_t ngroups, uint32_t* x, uint16_t** pos);

}  // namespace wcodec
