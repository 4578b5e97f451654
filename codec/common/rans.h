// codec/common/rans.h — 32-lane interleaved rANS: frequency tables and
// the per-symbol decode step shared by the CPU and CUDA decoders (the
// encoder: compress/rans_encoder.h).
//
// Parameters (docs/wcodec-format.md, "Entropy coder"):
//   state: u32, normalized interval [2^16, 2^32); renormalization moves one
//   16-bit little-endian word; probability precision P <= 12 bits per table.
//   A chunk stream is: 32 u32 initial states, then the u16 word stream in the
//   order the decoder consumes it. Decoding visits symbols in "decode order"
//   (the model defines it); every lane's state must end at 2^16, which the
//   decoder checks, so truncation and most corruption are detected for free.
// Thread-safety: tables are immutable after construction; encoders are
// single-threaded objects.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hd.h"
#include "raw_vector.h"

namespace wcodec {

inline constexpr int kLanes = 32;
inline constexpr uint32_t kRansL = 1u << 16;
inline constexpr int kMaxProbBits = 12;

// Decoding view of one table (device-copyable: plain pointers): a slot ->
// symbol map (4 KiB) and per-symbol frequency/start pairs packed as
// freq | start << 16, small enough that many context tables stay in cache.
struct DecTable {
  const uint8_t* sym;   // [1 << kMaxProbBits]
  const uint32_t* fs;   // [256]
};

// One rANS decode step for lane state x (no renormalization).
WC_HD inline uint32_t rans_decode_sym(uint32_t& x, const DecTable& t) {
  const uint32_t slot = x & ((1u << kMaxProbBits) - 1);
  const uint32_t s = t.sym[slot];
  const uint32_t e = t.fs[s];
  x = (e & 0xFFFFu) * (x >> kMaxProbBits) + slot - (e >> 16);
  return s;
}

// Uniform k-bit value (k <= 12) coded as a symbol of frequency 2^(12-k).
WC_HD inline uint32_t rans_decode_bits(uint32_t& x, uint32_t k) {
  const uint32_t v = (x & 0xFFFu) >> (12 - k);
  x = (1u << (12 - k)) * (x >> 12) + (x & 0xFFFu) - (v << (12 - k));
  return v;
}

// Word source with bounds: reading past the end sets `bad` and yields 0.
struct WordSource {
  const uint8_t* p;
  uint32_t n;    // words available
  uint32_t pos;  // next word
  uint32_t bad;
};

// Branch-free: the word at min(pos, n - 1) is always loaded (REQUIRES n >= 1
// or p pointing at two readable bytes).
WC_HD inline void rans_renorm(uint32_t& x, WordSource& ws) {
  const uint32_t need = x < kRansL;
  const uint32_t avail = ws.pos < ws.n;
  const uint32_t idx = avail ? ws.pos : (ws.n ? ws.n - 1 : 0);
  const uint32_t w = static_cast<uint32_t>(ws.p[2 * idx]) | (static_cast<uint32_t>(ws.p[2 * idx + 1]) << 8);
  ws.bad |= need & !avail;
  x = need ? ((x << 16) | w) : x;
  ws.pos += need;
}

// A normalized frequency table (host side).
struct FreqTable {
  uint32_t P = kMaxProbBits;
  std::vector<uint16_t> freq;   // nsym entries, sum == 1 << P (or all 0 if unused)
  std::vector<uint16_t> start;  // cumulative (build_start)
  // Table coding precision (compact coding, §7.3): 0 = every frequency
  // exact; 1..6: every coded frequency keeps q - 1 bits below its leading
  // one (the encoder chose frequencies that are representable); 7
  // (kQGamma): frequencies as Elias-gamma codes, as in format 1.x.
  uint8_t q = 0;

  size_t nsym() const { return freq.size(); }
  // The cumulative starts. Decoders build their lookup tables from freq
  // (TensorModel::VectorTables), so a table holds nothing more.
  void build_start();
};

// Normalizes counts to sum 2^P, keeping every non-zero count >= 1.
// An all-zero histogram gives an unused table (encoding from it is a bug).
FreqTable normalize_counts(const std::vector<uint64_t>& counts, uint32_t P);

// Estimated cost in bits of coding `counts` with table `t` (inf if a symbol
// with a count has zero frequency).
double table_cost_bits(const std::vector<uint64_t>& counts, const FreqTable& t);
// Empirical entropy (bits) of counts.
double entropy_bits(const std::vector<uint64_t>& counts);

class BitWriter;
class BitReader;
// Serialization of a table. Two codings (docs/wcodec-format.md §7.3):
// kTablesGamma (format 1.x: gap and frequency Elias-gamma codes) and
// kTablesCompact (2.x: frequencies as gamma-coded exponent plus a per-table
// number of mantissa bits).
enum TableCoding : int { kTablesGamma = 0, kTablesCompact = 1 };
inline constexpr uint32_t kQGamma = 7;
void write_table(BitWriter& bw, const FreqTable& t, TableCoding coding = kTablesCompact);
// Reads a table of alphabet `nsym` and precision P; false on malformed input.
bool read_table(BitReader& br, uint32_t nsym, uint32_t P, FreqTable* t, TableCoding coding);
// Serialized size in bits.
double table_size_bits(const FreqTable& t, TableCoding coding = kTablesCompact);
// Encoder: the table for `counts` (exact normalization: `exact`) that
// minimizes coded bits of the counts plus compact table bits, over the
// precisions q = 0 (exact), 1..6 and 7 (gamma).
FreqTable choose_compact_table(const std::vector<uint64_t>& counts, const FreqTable& exact);

// Bit-level writer/reader (LSB-first) for tables and model side information.
class BitWriter {
 public:
  void put(uint64_t v, uint32_t n) {  // n <= 57
    acc_ |= (n ? (v & ((1ull << n) - 1)) : 0) << fill_;
    fill_ += n;
    while (fill_ >= 8) {
      out_.push_back(static_cast<uint8_t>(acc_));
      acc_ >>= 8;
      fill_ -= 8;
    }
  }
  void gamma(uint64_t v);  // v >= 1
  std::vector<uint8_t> finish() {
    if (fill_) out_.push_back(static_cast<uint8_t>(acc_));
    acc_ = 0;
    fill_ = 0;
    return std::move(out_);
  }
  size_t bits() const { return out_.size() * 8 + fill_; }

 private:
  std::vector<uint8_t> out_;
  uint64_t acc_ = 0;
  uint32_t fill_ = 0;
};

class BitReader {
 public:
  BitReader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  uint64_t get(uint32_t n) {  // n <= 57
    uint64_t v = 0;
    for (uint32_t i = 0; i < n; ++i) {
      size_t byte = bitpos_ >> 3;
      if (byte >= n_) {
        ok_ = false;
        return 0;
      }
      v |= static_cast<uint64_t>((p_[byte] >> (bitpos_ & 7)) & 1) << i;
      ++bitpos_;
    }
    return v;
  }
  uint64_t gamma();
  bool ok() const { return ok_; }
  size_t bytes_used() const { return (bitpos_ + 7) >> 3; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t bitpos_ = 0;
  bool ok_ = true;
};

}  // namespace wcodec
