// codec/src/rans.cpp — table normalization, serialization and the 32-lane
// interleaved rANS encoder. See rans.h for the stream format.
#include "rans.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "wcodec/status.h"

namespace wcodec {

void FreqTable::build_lut() {
  lut.assign(size_t{1} << P, 0);
  start.resize(freq.size());
  fs.assign(256, 0);
  uint32_t c = 0;
  for (size_t s = 0; s < freq.size(); ++s) {
    start[s] = static_cast<uint16_t>(c);
    for (uint32_t k = 0; k < freq[s]; ++k) lut[c + k] = static_cast<uint8_t>(s);
    fs[s] = static_cast<uint32_t>(freq[s]) | (static_cast<uint32_t>(start[s]) << 16);
    c += freq[s];
  }
}

FreqTable normalize_counts(const std::vector<uint64_t>& counts, uint32_t P) {
  FreqTable t;
  t.P = P;
  t.freq.assign(counts.size(), 0);
  const uint64_t total = std::accumulate(counts.begin(), counts.end(), uint64_t{0});
  if (total == 0) {
    t.build_lut();
    return t;
  }
  const uint32_t target = 1u << P;
  size_t nz = 0;
  for (auto c : counts) nz += c != 0;
  WC_CHECK(nz <= target);
  // Proportional allocation with floor 1, then fix the sum by adjusting the
  // entries where the change costs least (largest counts first).
  int64_t sum = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    if (!counts[s]) continue;
    double f = static_cast<double>(counts[s]) * target / static_cast<double>(total);
    uint32_t q = static_cast<uint32_t>(f + 0.5);
    if (q < 1) q = 1;
    t.freq[s] = static_cast<uint16_t>(std::min<uint32_t>(q, target));
    sum += t.freq[s];
  }
  std::vector<size_t> order;
  for (size_t s = 0; s < counts.size(); ++s)
    if (counts[s]) order.push_back(s);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return counts[a] > counts[b]; });
  while (sum != target) {
    bool changed = false;
    for (size_t s : order) {
      if (sum == target) break;
      if (sum > target) {
        if (t.freq[s] > 1) {
          --t.freq[s];
          --sum;
          changed = true;
        }
      } else {
        ++t.freq[s];
        ++sum;
        changed = true;
      }
    }
    WC_CHECK(changed);
  }
  t.build_lut();
  return t;
}

double table_cost_bits(const std::vector<uint64_t>& counts, const FreqTable& t) {
  double bits = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    if (!counts[s]) continue;
    if (s >= t.freq.size() || !t.freq[s]) return std::numeric_limits<double>::infinity();
    bits += static_cast<double>(counts[s]) * (t.P - std::log2(static_cast<double>(t.freq[s])));
  }
  return bits;
}

double entropy_bits(const std::vector<uint64_t>& counts) {
  double total = 0, bits = 0;
  for (auto c : counts) total += static_cast<double>(c);
  if (total == 0) return 0;
  for (auto c : counts)
    if (c) bits -= static_cast<double>(c) * std::log2(static_cast<double>(c) / total);
  return bits;
}

void BitWriter::gamma(uint64_t v) {
  WC_CHECK(v >= 1);
  uint32_t n = 63 - static_cast<uint32_t>(__builtin_clzll(v));
  put(0, n);
  put(1, 1);
  put(v & ((1ull << n) - 1), n);
}

uint64_t BitReader::gamma() {
  uint32_t n = 0;
  while (ok_ && get(1) == 0) {
    if (++n > 40) {
      ok_ = false;
      return 0;
    }
  }
  if (!ok_) return 0;
  return (1ull << n) | get(n);
}

// Table layout: for each non-zero symbol in increasing order, gamma(gap + 1)
// where gap is the number of zero-frequency symbols skipped, then
// gamma(freq). The last non-zero symbol's frequency is implied by the sum.
// Then gamma(tail zeros + 1) is not needed: the count of non-zero symbols
// comes first as gamma(nz + 1).
void write_table(BitWriter& bw, const FreqTable& t) {
  size_t nz = 0;
  for (auto f : t.freq) nz += f != 0;
  bw.gamma(nz + 1);
  size_t prev = 0;
  size_t seen = 0;
  for (size_t s = 0; s < t.freq.size(); ++s) {
    if (!t.freq[s]) continue;
    bw.gamma(s - prev + 1);
    prev = s + 1;
    if (++seen < nz) bw.gamma(t.freq[s]);
  }
}

bool read_table(BitReader& br, uint32_t nsym, uint32_t P, FreqTable* t) {
  t->P = P;
  t->freq.assign(nsym, 0);
  uint64_t nz = br.gamma() - 1;
  if (!br.ok() || nz > nsym) return false;
  uint64_t pos = 0, sum = 0;
  const uint64_t target = 1ull << P;
  for (uint64_t i = 0; i < nz; ++i) {
    uint64_t gap = br.gamma() - 1;
    if (!br.ok()) return false;
    pos += gap;
    if (pos >= nsym) return false;
    uint64_t f;
    if (i + 1 < nz) {
      f = br.gamma();
      if (!br.ok() || f >= target) return false;
    } else {
      if (sum >= target) return false;
      f = target - sum;
    }
    t->freq[pos] = static_cast<uint16_t>(f);
    sum += f;
    if (sum > target) return false;
    ++pos;
  }
  if (nz > 0 && sum != target) return false;
  t->build_lut();
  return true;
}

double table_size_bits(const FreqTable& t) {
  double bits = 0;
  size_t prev = 0, nz = 0;
  auto g = [](uint64_t v) { return 2.0 * std::floor(std::log2(static_cast<double>(v))) + 1; };
  for (size_t s = 0; s < t.freq.size(); ++s) {
    if (!t.freq[s]) continue;
    bits += g(s - prev + 1) + g(t.freq[s]);
    prev = s + 1;
    ++nz;
  }
  return bits + g(nz + 1);
}

size_t RansEncoder::finish(std::vector<uint8_t>& out) {
  uint32_t x[kLanes];
  for (auto& v : x) v = kRansL;
  std::vector<uint16_t> words;
  words.reserve(syms_.size() / 2 + 16);
  for (size_t i = syms_.size(); i-- > 0;) {
    const Sym& s = syms_[i];
    uint32_t& st = x[s.lane];
    const uint64_t x_max = static_cast<uint64_t>(s.freq) << (32 - s.P);
    if (st >= x_max) {
      words.push_back(static_cast<uint16_t>(st & 0xFFFF));
      st >>= 16;
    }
    st = ((st / s.freq) << s.P) + (st % s.freq) + s.start;
  }
  const size_t before = out.size();
  for (uint32_t v : x)
    for (int b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(v >> (8 * b)));
  for (size_t i = words.size(); i-- > 0;) {
    out.push_back(static_cast<uint8_t>(words[i]));
    out.push_back(static_cast<uint8_t>(words[i] >> 8));
  }
  return out.size() - before;
}

}  // namespace wcodec
