// codec/compress/rans_encoder.cpp — the 32-lane interleaved rANS encoder:
// the scalar group pass and the reverse mode. See rans_encoder.h.
// Thread-safety: a RansEncoder is a single-threaded object.
#include "rans_encoder.h"

#include <algorithm>
#include <cstring>

#include "wcodec/status.h"

namespace wcodec {

void RansEncoder::grow() {
  const size_t n = std::max<size_t>(1024, mask_.size() * 2);
  mask_.resize(n);
  sf_.resize(n * kLanes);
}

// Exact division by a frequency f in [1, 2^kMaxProbBits] without a divide
// instruction: q = (x * M) >> 44 with M = ceil(2^44 / f). With M = 2^44 / f
// + e (0 <= e < 1), x * M / 2^44 = x / f + x e / 2^44, and x e / 2^44 <
// x / 2^44 <= 1 / f for x < 2^32 (x f < 2^44): the excess stays below the
// distance 1 / f from x / f to the next integer above its floor.
namespace {
struct Reciprocals {
  uint64_t m[(1u << kMaxProbBits) + 1];
  Reciprocals() : m() {
    for (uint64_t f = 1; f <= (1u << kMaxProbBits); ++f) m[f] = ((uint64_t{1} << 44) + f - 1) / f;
  }
};
inline uint32_t div_freq(const Reciprocals& rcp, uint32_t x, uint32_t f) {
  return static_cast<uint32_t>((static_cast<unsigned __int128>(x) * rcp.m[f]) >> 44);
}
}  // namespace

// One group, lanes from high to low: a lane whose state would leave the
// normalized range after coding emits its low word first, then the state
// takes the symbol. Scalar form of rans_encode_groups_avx512. Writes one
// word below the last word kept.
static void encode_groups_scalar(const uint32_t* mask, const uint32_t* sf, size_t ngroups, uint32_t* x,
                                 uint16_t** pos) {
  static const Reciprocals rcp;
  uint16_t* w = *pos;
  for (size_t g = ngroups; g-- > 0;) {
    const uint32_t m = mask[g];
    const uint32_t* e = sf + g * kLanes;
    for (int l = kLanes - 1; l >= 0; --l) {
      if (!(m >> l & 1)) continue;
      const uint32_t freq = e[l] >> 16, start = e[l] & 0xFFFFu;
      uint32_t st = x[l];
      // Branch-free (renormalization is unpredictable): the word is stored
      // below the position whether or not it is kept.
      const uint32_t need = (st >> (32 - kMaxProbBits)) >= freq;
      w[-1] = static_cast<uint16_t>(st);
      w -= need;
      st >>= 16 * need;
      const uint32_t q = div_freq(rcp, st, freq);
      x[l] = (q << kMaxProbBits) + (st - q * freq) + start;
    }
  }
  *pos = w;
}

// The group pass of the process's path: AVX-512, Highway (avx2 path) or
// scalar (all give the same states and words). *pos needs 16 words of room
// below the last word written (the vector passes' stores).
static void encode_groups(const uint32_t* mask, const uint32_t* sf, size_t ngroups, uint32_t* x, uint16_t** pos,
                          bool vector) {
  if (vector && rans_encode_groups_avx512(mask, sf, ngroups, x, pos)) return;
  if (vector && rans_encode_groups_hwy(mask, sf, ngroups, x, pos)) return;
  encode_groups_scalar(mask, sf, ngroups, x, pos);
}

static size_t append_stream(std::vector<uint8_t>& out, const uint32_t* x, const uint16_t* w, size_t nw) {
  const size_t before = out.size();
  out.resize(before + 4 * kLanes + 2 * nw);
  uint8_t* o = out.data() + before;
  for (int l = 0; l < kLanes; ++l)
    for (int b = 0; b < 4; ++b) *o++ = static_cast<uint8_t>(x[l] >> (8 * b));
  for (size_t i = 0; i < nw; ++i) {
    *o++ = static_cast<uint8_t>(w[i]);
    *o++ = static_cast<uint8_t>(w[i] >> 8);
  }
  return out.size() - before;
}

// The lanes' initial encoder states: init, or kRansL where null.
static void initial_states(const uint32_t* init, uint32_t* x) {
  for (uint32_t l = 0; l < kLanes; ++l) {
    x[l] = init ? init[l] : kRansL;
    WC_CHECK(x[l] >= kRansL && x[l] < 2 * kRansL);
  }
}

void RansEncoder::begin_reverse(const uint32_t* init, size_t max_symbols) {
  initial_states(init, rev_x_);
  if (mask_.size() < kRevBlock) {
    mask_.resize(kRevBlock);
    sf_.resize(kRevBlock * kLanes);
  }
  ngroups_ = 0;
  last_ = kLanes;
  rev_next_ = kRevBlock;
  if (words_.size() < max_symbols + 16) words_.resize(max_symbols + 16);
  rev_pos_ = words_.size();
}

void RansEncoder::flush_reverse() {
  const size_t n = kRevBlock - rev_next_;
  if (n) {
    uint16_t* pos = words_.data() + rev_pos_;
    // Groups rev_next_ .. kRevBlock-1, the last (first given) first.
    encode_groups(mask_.data() + rev_next_, sf_.data() + rev_next_ * kLanes, n, rev_x_, &pos, true);
    WC_CHECK(pos >= words_.data());
    rev_pos_ = static_cast<size_t>(pos - words_.data());
  }
  rev_next_ = kRevBlock;
}

void RansEncoder::put_full_groups_reverse(const uint32_t* sf, size_t n) {
  flush_reverse();
  static const std::vector<uint32_t> all(kRevBlock, 0xFFFFFFFFu);
  uint16_t* pos = words_.data() + rev_pos_;
  for (size_t end = n; end > 0;) {
    const size_t b = std::min(end, kRevBlock), start = end - b;
    WC_CHECK(pos - words_.data() >= static_cast<ptrdiff_t>(b * kLanes));
    encode_groups(all.data(), sf + start * kLanes, b, rev_x_, &pos, true);
    end = start;
  }
  rev_pos_ = static_cast<size_t>(pos - words_.data());
}

size_t RansEncoder::finish_reverse(std::vector<uint8_t>& out) {
  flush_reverse();
  return append_stream(out, rev_x_, words_.data() + rev_pos_, words_.size() - rev_pos_);
}

size_t RansEncoder::finish(std::vector<uint8_t>& out, const uint32_t* init, bool vector) {
  uint32_t x[kLanes];
  initial_states(init, x);
  // At most one word per symbol; 16 words of slack for the vector stores.
  std::vector<uint16_t> words(ngroups_ * kLanes + 16);
  uint16_t* const end = words.data() + words.size();
  uint16_t* pos = end;
  encode_groups(mask_.data(), sf_.data(), ngroups_, x, &pos, vector);
  return append_stream(out, x, pos, static_cast<size_t>(end - pos));
}

}  // namespace wcodec
