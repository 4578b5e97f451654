// codec/common/rans.cpp — table normalization and serialization.
// See rans.h for the stream format.
#include "rans.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "wcodec/status.h"

namespace wcodec {

void FreqTable::build_start() {
  start.resize(freq.size());
  uint32_t c = 0;
  for (size_t s = 0; s < freq.size(); ++s) {
    start[s] = static_cast<uint16_t>(c);
    c += freq[s];
  }
}

FreqTable normalize_counts(const std::vector<uint64_t>& counts, uint32_t P) {
  FreqTable t;
  t.P = P;
  t.freq.assign(counts.size(), 0);
  const uint64_t total = std::accumulate(counts.begin(), counts.end(), uint64_t{0});
  if (total == 0) {
    t.build_start();
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
  if (sum == target) {  // nothing to fix (the order below is not needed)
    t.build_start();
    return t;
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
  t.build_start();
  return t;
}

// log2(f) for every frequency f <= 2^kMaxProbBits (the same doubles
// std::log2 returns: a table, not an approximation).
static const double* log2_freqs() {
  static const std::vector<double> t = [] {
    std::vector<double> v((1u << kMaxProbBits) + 1, 0.0);
    for (uint32_t f = 1; f < v.size(); ++f) v[f] = std::log2(static_cast<double>(f));
    return v;
  }();
  return t.data();
}

double table_cost_bits(const std::vector<uint64_t>& counts, const FreqTable& t) {
  const double* lg = log2_freqs();
  double bits = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    if (!counts[s]) continue;
    if (s >= t.freq.size() || !t.freq[s]) return std::numeric_limits<double>::infinity();
    bits += static_cast<double>(counts[s]) * (t.P - lg[t.freq[s]]);
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
namespace {

// Compact coding of one frequency f (1 <= f < 4096): gamma(m + 1) for its
// exponent m = floor(log2 f), then kb = m (q == 0) or min(m, q - 1) bits
// below the leading one, LSB-first; the m - kb lowest bits are zero.
uint32_t compact_kb(uint32_t m, uint32_t q) { return q == 0 ? m : (m < q - 1 ? m : q - 1); }

bool representable(uint32_t f, uint32_t q) {
  const uint32_t m = 31 - static_cast<uint32_t>(__builtin_clz(f));
  const uint32_t drop = m - compact_kb(m, q);
  return (f & ((1u << drop) - 1)) == 0;
}

// Elias gamma length of v >= 1: 2 floor(log2 v) + 1.
double gamma_bits(uint64_t v) { return 2.0 * static_cast<double>(63 - __builtin_clzll(v)) + 1; }

// The same lengths as integers.
uint32_t gamma_len(uint64_t v) { return 2 * static_cast<uint32_t>(63 - __builtin_clzll(v)) + 1; }
uint32_t compact_freq_len(uint32_t f, uint32_t q) {
  const uint32_t m = 31 - static_cast<uint32_t>(__builtin_clz(f));
  return gamma_len(m + 1) + compact_kb(m, q);
}

double compact_freq_bits(uint32_t f, uint32_t q) {
  const uint32_t m = 31 - static_cast<uint32_t>(__builtin_clz(f));
  return gamma_bits(m + 1) + compact_kb(m, q);
}

// Largest representable value <= f (f >= 1), and the smallest >= f (may be
// 4096 or more: callers check).
uint32_t repr_down(uint32_t f, uint32_t q) {
  const uint32_t m = 31 - static_cast<uint32_t>(__builtin_clz(f));
  const uint32_t drop = m - compact_kb(m, q);
  return f >> drop << drop;
}
uint32_t repr_up(uint32_t f, uint32_t q) {
  const uint32_t d = repr_down(f, q);
  if (d == f) return f;
  const uint32_t m = 31 - static_cast<uint32_t>(__builtin_clz(f));
  const uint32_t drop = m - compact_kb(m, q);
  return d + (1u << drop);  // may be 2^(m+1): representable
}

}  // namespace

void write_table(BitWriter& bw, const FreqTable& t, TableCoding coding) {
  size_t nz = 0;
  for (auto f : t.freq) nz += f != 0;
  bw.gamma(nz + 1);
  if (coding == kTablesCompact && nz >= 2) bw.put(t.q, 3);
  size_t prev = 0;
  size_t seen = 0;
  for (size_t s = 0; s < t.freq.size(); ++s) {
    if (!t.freq[s]) continue;
    bw.gamma(s - prev + 1);
    prev = s + 1;
    if (++seen == nz) break;
    const uint32_t f = t.freq[s];
    if (coding == kTablesGamma || t.q == kQGamma) {
      bw.gamma(f);
      continue;
    }
    WC_CHECK(representable(f, t.q));
    const uint32_t m = 31 - static_cast<uint32_t>(__builtin_clz(f));
    const uint32_t kb = compact_kb(m, t.q);
    bw.gamma(m + 1);
    bw.put((f >> (m - kb)) & ((1u << kb) - 1), kb);
  }
}

bool read_table(BitReader& br, uint32_t nsym, uint32_t P, FreqTable* t, TableCoding coding) {
  t->P = P;
  t->freq.assign(nsym, 0);
  uint64_t nz = br.gamma() - 1;
  if (!br.ok() || nz > nsym) return false;
  uint32_t q = 0;
  if (coding == kTablesCompact && nz >= 2) q = br.get(3);
  t->q = static_cast<uint8_t>(q);
  uint64_t pos = 0, sum = 0;
  const uint64_t target = 1ull << P;
  for (uint64_t i = 0; i < nz; ++i) {
    uint64_t gap = br.gamma() - 1;
    if (!br.ok()) return false;
    pos += gap;
    if (pos >= nsym) return false;
    uint64_t f;
    if (i + 1 < nz) {
      if (coding == kTablesGamma || q == kQGamma) {
        f = br.gamma();
      } else {
        const uint64_t m = br.gamma() - 1;
        if (!br.ok() || m >= P) return false;
        const uint32_t kb = compact_kb(static_cast<uint32_t>(m), q);
        f = ((uint64_t{1} << kb) | br.get(kb)) << (m - kb);
      }
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
  t->build_start();
  return true;
}

double table_size_bits(const FreqTable& t, TableCoding coding) {
  double bits = 0;
  size_t prev = 0, nz = 0, total = 0;
  for (auto f : t.freq) total += f != 0;
  for (size_t s = 0; s < t.freq.size(); ++s) {
    if (!t.freq[s]) continue;
    bits += gamma_bits(s - prev + 1);
    prev = s + 1;
    if (++nz == total) break;
    bits += (coding == kTablesGamma || t.q == kQGamma) ? gamma_bits(t.freq[s]) : compact_freq_bits(t.freq[s], t.q);
  }
  return bits + gamma_bits(total + 1) + (coding == kTablesCompact && total >= 2 ? 3 : 0);
}

// The coding cost of counts cnt under frequencies f (precision P), summed in
// symbol order. Branch-free: a zero count adds +0.0 (every P - lg[f] is >= 0
// and finite), which leaves the sum as it is. Not inlined: in the caller
// the sum was kept in memory, a store and a load on its dependency chain.
__attribute__((noinline)) static double coding_cost(const double* cnt, const uint32_t* f, size_t n, uint32_t P,
                                                    const double* lg) {
  const double p = P;
  double cost = 0;
  for (size_t i = 0; i < n; ++i) cost += cnt[i] * (p - lg[f[i]]);
  return cost;
}

FreqTable choose_compact_table(const std::vector<uint64_t>& counts, const FreqTable& exact) {
  FreqTable best = exact;
  best.q = 0;
  std::vector<uint32_t> nzs;
  for (size_t s = 0; s < exact.freq.size(); ++s)
    if (exact.freq[s]) nzs.push_back(static_cast<uint32_t>(s));
  if (nzs.size() < 2) return best;
  // A symbol with a count but no frequency makes every candidate unusable.
  for (size_t s = 0; s < counts.size(); ++s)
    if (counts[s] && (s >= exact.freq.size() || !exact.freq[s])) return best;
  const double* lg = log2_freqs();
  // Every candidate has the same non-zero symbols (a frequency is rounded
  // to a representable one >= 1, never to 0): they differ only in the
  // frequencies, kept per non-zero symbol.
  const size_t n = nzs.size();
  std::vector<double> cnt(n);
  std::vector<uint32_t> fx(n);
  uint64_t gap_bits = gamma_len(n + 1) + 3;  // kTablesCompact, nz >= 2
  for (size_t i = 0, prev = 0; i < n; ++i) {
    const uint32_t s = nzs[i];
    cnt[i] = s < counts.size() ? static_cast<double>(counts[s]) : 0.0;
    fx[i] = exact.freq[s];
    gap_bits += gamma_len(s - prev + 1);
    prev = s + 1;
  }
  // Bits of a candidate: the coding cost, summed in symbol order as
  // table_cost_bits does (the same doubles), plus the table's size (the
  // gaps, then every frequency but the last one's), in whole bits.
  // The coding cost depends on the frequencies only: candidates whose
  // frequencies equal the exact ones or the previous candidate's take
  // that cost (the same double; the sum is the candidate pass's longest
  // dependency chain).
  auto cost_of = [&](const uint32_t* f) { return coding_cost(cnt.data(), f, n, exact.P, lg); };
  auto size_of = [&](const uint32_t* f, uint32_t q) {
    uint64_t size = gap_bits;
    for (size_t i = 0; i + 1 < n; ++i) size += q == kQGamma ? gamma_len(f[i]) : compact_freq_len(f[i], q);
    return size;
  };
  const double cost_fx = cost_of(fx.data());
  std::vector<uint32_t> prev_f;
  double prev_cost = 0;
  auto bits_of = [&](const std::vector<uint32_t>& f, uint32_t q) {
    double cost;
    if (f == fx) {
      cost = cost_fx;
    } else if (f == prev_f) {
      cost = prev_cost;
    } else {
      cost = cost_of(f.data());
      prev_f = f;
      prev_cost = cost;
    }
    return cost + static_cast<double>(size_of(f.data(), q));
  };
  double best_bits = bits_of(fx, 0);
  uint32_t best_q = 0;
  {
    const double bits = bits_of(fx, kQGamma);
    if (bits < best_bits) {
      best_bits = bits;
      best_q = kQGamma;
    }
  }
  const uint32_t target = 1u << exact.P;
  std::vector<uint32_t> f(n), best_f;
  // Max-heap of (frequency, -position): the largest frequency, the first
  // in symbol order among equals.
  std::vector<std::pair<uint32_t, int64_t>> heap;
  for (uint32_t q = 1; q < kQGamma; ++q) {
    int64_t sum = 0;
    for (size_t i = 0; i + 1 < n; ++i) {
      const uint32_t x = fx[i], d = repr_down(x, q), u = repr_up(x, q);
      f[i] = (x - d <= u - x || u >= target) ? d : u;
      sum += f[i];
    }
    // The last symbol takes the rest; keep it at least half its exact
    // frequency (and >= 1) by stepping the largest others down.
    const int64_t want = std::max<int64_t>(1, fx[n - 1] / 2);
    bool ok = true;
    if (target - sum < want) {
      heap.clear();
      for (size_t i = 0; i + 1 < n; ++i)
        if (f[i] > 1) heap.emplace_back(f[i], -static_cast<int64_t>(i));
      std::make_heap(heap.begin(), heap.end());
      while (target - sum < want) {
        if (heap.empty()) {
          ok = false;
          break;
        }
        std::pop_heap(heap.begin(), heap.end());
        const size_t big = static_cast<size_t>(-heap.back().second);
        heap.pop_back();
        const uint32_t d = repr_down(f[big] - 1, q);
        sum -= f[big] - d;
        f[big] = d;
        if (d > 1) {
          heap.emplace_back(d, -static_cast<int64_t>(big));
          std::push_heap(heap.begin(), heap.end());
        }
      }
    }
    if (!ok) continue;
    f[n - 1] = static_cast<uint32_t>(target - sum);
    const double bits = bits_of(f, q);
    if (bits < best_bits) {
      best_bits = bits;
      best_q = q;
      best_f = f;
    }
  }
  if (best_q != 0 && best_q != kQGamma) {
    for (size_t i = 0; i < n; ++i) best.freq[nzs[i]] = static_cast<uint16_t>(best_f[i]);
    best.build_start();
  }
  best.q = static_cast<uint8_t>(best_q);
  return best;
}

}  // namespace wcodec
