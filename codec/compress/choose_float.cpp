// codec/compress/choose_float.cpp — the float model search: element layout,
// exponent / sign / mantissa context candidates counted once per key, and
// the joint-symbol form. See encode_model_i.h.

#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <list>
#include <mutex>
#include <numeric>
#include <type_traits>
#include <unordered_map>

#include "bytes.h"
#include "encode_model_i.h"

namespace wcodec {

// ------------------------------------------------------------------ float
bool float_layout(DType t, FloatLayout* f) {
  switch (t) {
    case DType::kBF16: *f = {2, 8, 7}; return true;
    case DType::kF16: *f = {2, 5, 10}; return true;
    case DType::kF32: *f = {4, 8, 23}; return true;
    case DType::kF8_E4M3: *f = {1, 4, 3}; return true;
    case DType::kF8_E5M2: *f = {1, 5, 2}; return true;
    default: return false;
  }
}

// Candidate statistics of the float model search. Every candidate's
// contexts are functions of few values: the exponent's of its left and top
// neighbours' exponents (-1: none), the sign/mantissa symbol's of the
// exponent and the left sign. So the sample is counted once, per such key,
// and each candidate sums these counts into its contexts (the same
// statistics as walking the sample).
// Keys are counted over the exponents that occur (dense ids), so a tensor
// with a few dozen exponents keeps a few dozen counts per key.
struct FloatKeyCounts {
  uint32_t nu = 0, nsm = 0;  // exponents that occur; sign + top mantissa bits symbols
  std::vector<int32_t> dense;                       // exponent -> dense id, -1: absent
  std::vector<uint32_t> used;                       // dense id -> exponent (ascending)
  std::vector<int32_t> pair_at, sm_at;              // key (dense ids) -> index, -1: not seen
  std::vector<std::pair<int, int>> pairs;           // (left, top) exponents
  std::vector<std::pair<uint32_t, int>> sms;        // (exponent, left sign class)
  std::vector<uint64_t> pair_n, sm_n;               // flat: [index * nu + id], [index * nsm + s]
  std::vector<uint64_t> eh;                         // exponent histogram
  uint64_t elems = 0;
};

template <uint32_t B>
void count_float_exps(const FloatLayout& fl, const ChunkRef& c, FloatKeyCounts* k) {
  const uint32_t mb = fl.mb, emask = (1u << fl.eb) - 1, ne = emask + 1;
  const uint64_t n = c.h * c.w;
  // Four interleaved histograms: runs of one exponent (most of a tensor's
  // elements share a few) would chain every count on the previous store.
  // 32-bit counts (a chunk holds fewer than 2^32 elements), kept per thread:
  // on a small tensor the histograms' allocation and clearing cost as much
  // as the counting.
  thread_local std::vector<uint32_t> h;
  h.assign(4 * size_t{ne}, 0);
  uint64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (uint32_t j = 0; j < 4; ++j) h[j * ne + ((float_elem<B>(c.bytes, i + j) >> mb) & emask)]++;
  for (; i < n; ++i) h[(float_elem<B>(c.bytes, i) >> mb) & emask]++;
  for (uint32_t e = 0; e < ne; ++e) k->eh[e] += uint64_t{h[e]} + h[ne + e] + h[2 * ne + e] + h[3 * ne + e];
  k->elems += n;
}

template <uint32_t B>
void count_float_keys(const FloatLayout& fl, uint32_t top_bits, const ChunkRef& c, FloatKeyCounts* k) {
  const uint32_t mb = fl.mb, eb = fl.eb, emask = (1u << eb) - 1, drop = mb - top_bits, mmask = (1u << mb) - 1;
  const uint32_t h = static_cast<uint32_t>(c.h), w = static_cast<uint32_t>(c.w);
  const int32_t* dense = k->dense.data();
  for (uint32_t r = 0; r < h; ++r) {
    int le = -1, ls = 0;
    int32_t dl = -1;  // dense[le], -1 without a left neighbour
    for (uint32_t col = 0; col < w; ++col) {
      const uint64_t i = uint64_t{r} * w + col;
      const uint32_t v = float_elem<B>(c.bytes, i);
      const uint32_t e = (v >> mb) & emask;
      const int t = r > 0 ? static_cast<int>((float_elem<B>(c.bytes, i - w) >> mb) & emask) : -1;
      const int32_t d = dense[e], dt = t < 0 ? -1 : dense[t];
      int32_t& pk = k->pair_at[static_cast<size_t>(dl + 1) * (k->nu + 1) + static_cast<size_t>(dt + 1)];
      if (pk < 0) {
        pk = static_cast<int32_t>(k->pairs.size());
        k->pairs.emplace_back(le, t);
        k->pair_n.resize(k->pair_n.size() + k->nu, 0);
      }
      k->pair_n[static_cast<size_t>(pk) * k->nu + static_cast<size_t>(d)]++;
      int32_t& sk = k->sm_at[static_cast<size_t>(d) * 3 + static_cast<size_t>(ls)];
      if (sk < 0) {
        sk = static_cast<int32_t>(k->sms.size());
        k->sms.emplace_back(e, ls);
        k->sm_n.resize(k->sm_n.size() + k->nsm, 0);
      }
      const uint32_t sign = v >> (eb + mb);
      k->sm_n[static_cast<size_t>(sk) * k->nsm + (((sign << mb) | (v & mmask)) >> drop)]++;
      le = static_cast<int>(e);
      dl = d;
      ls = 1 + static_cast<int>(sign);
    }
  }
}

// How much larger (estimated bits) a joint-symbol float model may be than
// the two-step model and still be chosen for its decode speed.
inline constexpr double kJointSlack = 0.002;

// Joint symbol statistics of the sample: counts by (left exponent, left
// sign) of the symbols J with kj high mantissa bits.
template <uint32_t B>
void count_float_joint(const FloatLayout& fl, uint32_t kj, const ChunkRef& c, const FloatKeyCounts& kc,
                              uint32_t nj, uint64_t* cnt) {
  const uint32_t mb = fl.mb, eb = fl.eb, emask = (1u << eb) - 1, kmask = (1u << kj) - 1;
  const uint32_t h = static_cast<uint32_t>(c.h), w = static_cast<uint32_t>(c.w);
  for (uint32_t r = 0; r < h; ++r) {
    uint32_t key = 0;  // (dense id of the left exponent + 1) * 2 + left sign; 0: no left
    for (uint32_t col = 0; col < w; ++col) {
      const uint32_t v = float_elem<B>(c.bytes, uint64_t{r} * w + col);
      const uint32_t e = (v >> mb) & emask, sign = v >> (eb + mb);
      cnt[uint64_t{key} * nj + (sign << (eb + kj) | e << kj | ((v >> (mb - kj)) & kmask))]++;
      key = (static_cast<uint32_t>(kc.dense[e]) + 1) * 2 + sign;
    }
  }
}

// The best joint-symbol model (emode 5, kj high mantissa bits) on the
// sample and its estimated cost in bits (*cost).
FloatParams choose_float_joint(const TensorGeometry& g, const uint8_t* data, FloatLayout fl, uint32_t kj,
                                      const std::vector<uint64_t>& sample, const FloatKeyCounts& kc, int mode,
                                      double scale, double* cost) {
  const uint32_t nj = 1u << (1 + fl.eb + kj);
  const uint32_t nkeys = (kc.nu + 1) * 2;
  std::vector<uint64_t> jc(uint64_t{nkeys} * nj, 0);
  for (auto ci : sample) {
    const ChunkRef c = chunk_ref(g, data, ci);
    if (fl.bytes == 1) count_float_joint<1>(fl, kj, c, kc, nj, jc.data());
    else count_float_joint<2>(fl, kj, c, kc, nj, jc.data());
  }
  const double total = static_cast<double>(g.rows * g.cols);
  FloatParams best{};
  *cost = std::numeric_limits<double>::infinity();
  std::vector<uint64_t> cnt;
  for (uint8_t ne : {8, 16}) {
    for (int shift : {3, 4}) {
      FloatParams p{};
      p.elem_bytes = fl.bytes;
      p.eb = fl.eb;
      p.mb = fl.mb;
      p.k = static_cast<uint8_t>(kj);
      p.emode = kFloatJointMode;
      p.ne = ne;
      p.nm = 1;
      p.sign_ctx = 0;
      p.elo = static_cast<int16_t>(mode - ne + shift);
      p.mlo = 0;
      const uint32_t nctx = float_e_nctx(p);
      cnt.assign(uint64_t{nctx} * nj, 0);
      for (uint32_t key = 0; key < nkeys; ++key) {
        const int le = key < 2 ? -1 : static_cast<int>(kc.used[key / 2 - 1]);
        uint64_t* dst = cnt.data() + uint64_t{float_joint_ctx(p, le, key & 1)} * nj;
        const uint64_t* src = jc.data() + uint64_t{key} * nj;
        for (uint32_t j = 0; j < nj; ++j) dst[j] += src[j];
      }
      double bits = total * float_raw_bits(p);
      for (uint32_t c = 0; c < nctx; ++c) bits += context_cost(cnt.data() + uint64_t{c} * nj, nj, scale);
      if (bits < *cost) {
        *cost = bits;
        best = p;
      }
    }
  }
  return best;
}

void choose_float(const TensorGeometry& g, const uint8_t* data, FloatLayout fl, bool format_2_x,
                         TensorModel* m) {
  auto sample = sample_chunks(g, 1u << 18);
  const uint64_t total = g.rows * g.cols;
  FloatParams base{};
  base.elem_bytes = fl.bytes;
  base.eb = fl.eb;
  base.mb = fl.mb;
  // Candidates are evaluated on the sample with contexts computed over the
  // whole chunk (lane edges ignored: an estimate). Exponent and
  // sign/mantissa costs are separable: each part is chosen on its own.
  const uint32_t nes = 1u << fl.eb;
  const uint32_t top_bits = std::min<uint32_t>(fl.mb, 7);  // sign + this many mantissa bits kept
  FloatKeyCounts kc;
  kc.nsm = 2u << top_bits;
  kc.eh.assign(nes, 0);
  for (auto ci : sample) {
    const ChunkRef c = chunk_ref(g, data, ci);
    switch (fl.bytes) {
      case 1: count_float_exps<1>(fl, c, &kc); break;
      case 2: count_float_exps<2>(fl, c, &kc); break;
      default: count_float_exps<4>(fl, c, &kc); break;
    }
  }
  kc.dense.assign(nes, -1);
  for (uint32_t e = 0; e < nes; ++e)
    if (kc.eh[e]) {
      kc.dense[e] = static_cast<int32_t>(kc.used.size());
      kc.used.push_back(e);
    }
  kc.nu = static_cast<uint32_t>(kc.used.size());
  kc.pair_at.assign(static_cast<size_t>(kc.nu + 1) * (kc.nu + 1), -1);
  kc.sm_at.assign(static_cast<size_t>(kc.nu) * 3, -1);
  for (auto ci : sample) {
    const ChunkRef c = chunk_ref(g, data, ci);
    switch (fl.bytes) {
      case 1: count_float_keys<1>(fl, top_bits, c, &kc); break;
      case 2: count_float_keys<2>(fl, top_bits, c, &kc); break;
      default: count_float_keys<4>(fl, top_bits, c, &kc); break;
    }
  }
  // Mode exponent.
  const int mode = static_cast<int>(std::max_element(kc.eh.begin(), kc.eh.end()) - kc.eh.begin());
  const double scale = static_cast<double>(total) / static_cast<double>(std::max<uint64_t>(1, kc.elems));
  // The counts that are not zero, as (symbol, count) lists per key, all in
  // one array: a small tensor's keys hold a few symbols each.
  struct Nonzero {
    std::vector<uint32_t> off{0};                       // key k: entries [off[k], off[k + 1])
    std::vector<std::pair<uint32_t, uint64_t>> e;
    void add(const uint64_t* n, uint32_t size) {
      for (uint32_t j = 0; j < size; ++j)
        if (n[j]) e.emplace_back(j, n[j]);
      off.push_back(static_cast<uint32_t>(e.size()));
    }
    size_t keys() const { return off.size() - 1; }
    const std::pair<uint32_t, uint64_t>* begin(size_t k) const { return e.data() + off[k]; }
    const std::pair<uint32_t, uint64_t>* end(size_t k) const { return e.data() + off[k + 1]; }
  };
  Nonzero pair_nz, sm_nz;
  for (size_t k = 0; k < kc.pairs.size(); ++k) pair_nz.add(kc.pair_n.data() + k * kc.nu, kc.nu);
  for (auto& [sym, n] : pair_nz.e) sym = kc.used[sym];  // dense id -> exponent
  for (size_t k = 0; k < kc.sms.size(); ++k) sm_nz.add(kc.sm_n.data() + k * kc.nsm, kc.nsm);
  // The exponents that occur: the candidates' exponent statistics span
  // only these (symbols that never occur add nothing to a cost).
  uint32_t emin = nes, emax = 0;
  for (const auto& [sym, n] : pair_nz.e) {
    emin = std::min(emin, sym);
    emax = std::max(emax, sym);
  }
  const uint32_t espan = emin <= emax ? emax - emin + 1 : 1;
  if (emin > emax) emin = 0;
  // sm_nz reduced to sm_k high mantissa bits (symbols sym >> (top_bits -
  // sm_k), equal ones merged), once the mantissa split is chosen: the
  // context-shape candidates then add a few entries per key, not up to 256.
  Nonzero sm_red;
  uint32_t sm_k = UINT32_MAX;
  std::vector<uint64_t> cnt;  // nctx x nsym counts of one candidate, reused
  auto eval = [&](const FloatParams& p, bool part_e) {
    const uint32_t nctx = part_e ? float_e_nctx(p) : float_sm_nctx(p), nsym = part_e ? espan : 2u << p.k;
    cnt.assign(uint64_t{nctx} * nsym, 0);
    if (part_e) {
      for (size_t k = 0; k < kc.pairs.size(); ++k) {
        uint64_t* dst = cnt.data() + uint64_t{float_e_ctx_lt(p, kc.pairs[k].first, kc.pairs[k].second)} * nsym;
        for (auto it = pair_nz.begin(k); it != pair_nz.end(k); ++it) dst[it->first - emin] += it->second;
      }
    } else {
      // The lists at p.k high mantissa bits, where reduced to them (below).
      const bool reduced = p.k == sm_k;
      const uint32_t drop = reduced ? 0 : top_bits - p.k;  // p.k <= top_bits
      const Nonzero& lists = reduced ? sm_red : sm_nz;
      for (size_t k = 0; k < kc.sms.size(); ++k) {
        uint64_t* dst = cnt.data() + uint64_t{float_sm_ctx(p, kc.sms[k].first, kc.sms[k].second)} * nsym;
        for (auto it = lists.begin(k); it != lists.end(k); ++it) dst[it->first >> drop] += it->second;
      }
    }
    double bits = 0;
    for (uint32_t c = 0; c < nctx; ++c) bits += context_cost(cnt.data() + uint64_t{c} * nsym, nsym, scale);
    if (!part_e) bits += static_cast<double>(total) * float_raw_bits(p);
    return bits;
  };
  FloatParams best = base;
  best.ne = 1;
  best.nm = 1;
  best.k = static_cast<uint8_t>(std::min<int>(3, fl.mb));
  double best_e = std::numeric_limits<double>::infinity();
  for (uint8_t emode : {0, 1, 2, 3, 4}) {
    for (uint8_t ne : {8, 16}) {
      if ((emode == 0 || emode == 4) && ne != 8) continue;
      FloatParams p = best;
      p.emode = emode;
      p.ne = emode ? ne : 1;
      p.elo = static_cast<int16_t>(emode == 4 ? mode - kJointClasses + 2 : mode - p.ne + 3);
      double c = eval(p, true);
      // Decode speed: the joint mode's 49 exponent tables (16 KiB each) do
      // not stay in the L2 cache beside the sign/mantissa tables, and its
      // chunks decode about a quarter slower. It is taken only where it
      // saves at least 1% of the exponent bits (on isnet-medium.f16 it
      // saved under 1% on the tensors that chose it: 0.02% of the file).
      if (emode == 4) c *= 1.01;
      if (c < best_e) {
        best_e = c;
        best.emode = p.emode;
        best.ne = p.ne;
        best.elo = p.elo;
      }
    }
  }
  double best_sm = std::numeric_limits<double>::infinity();
  FloatParams bsm = best;
  std::vector<uint8_t> ks;
  for (uint8_t k : {0, 2, 3, 4, 5, 7})
    if (k <= fl.mb && fl.mb - k <= 24) ks.push_back(k);
  // Greedy: the mantissa split first, then the context shape.
  for (uint8_t k : ks) {
    FloatParams p = best;
    p.k = k;
    p.nm = 8;
    p.mlo = static_cast<int16_t>(mode - p.nm + 2);
    p.sign_ctx = 0;
    const double c = eval(p, false);
    if (c < best_sm) {
      best_sm = c;
      bsm = p;
    }
  }
  {
    const uint32_t drop = top_bits - bsm.k;
    sm_red.e.reserve(sm_nz.e.size());
    for (size_t k = 0; k < sm_nz.keys(); ++k) {
      const size_t first = sm_red.e.size();
      for (auto it = sm_nz.begin(k); it != sm_nz.end(k); ++it) {  // symbols ascending
        const uint32_t r = it->first >> drop;
        if (sm_red.e.size() > first && sm_red.e.back().first == r) sm_red.e.back().second += it->second;
        else sm_red.e.emplace_back(r, it->second);
      }
      sm_red.off.push_back(static_cast<uint32_t>(sm_red.e.size()));
    }
    sm_k = bsm.k;
  }
  for (uint8_t nm : {1, 8, 16}) {
    for (uint8_t sc : {0, 1}) {
      if (nm == 8 && sc == 0) continue;
      FloatParams p = bsm;
      p.nm = nm;
      p.mlo = static_cast<int16_t>(mode - nm + 2);
      p.sign_ctx = sc;
      const double c = eval(p, false);
      if (c < best_sm) {
        best_sm = c;
        bsm = p;
      }
    }
  }
  best.k = bsm.k;
  best.nm = bsm.nm;
  best.mlo = bsm.mlo;
  best.sign_ctx = bsm.sign_ctx;
  // The joint symbol (emode 5) where sign, exponent and some high mantissa
  // bits fit one byte (F16, F8): one rANS step per element instead of two.
  // On isnet-medium.f16 its contexts (left exponent class x left sign) make
  // the file smaller than the two-step model (0.8452 against 0.8464 of the
  // original), and its chunks decode about 1.6 times as fast; it is taken
  // unless it costs more than kJointSlack of the two-step model's bits.
  const int kj = std::min<int>(fl.mb, 7 - fl.eb);
  if (format_2_x && kj >= 0) {
    double cj = 0;
    const FloatParams pj = choose_float_joint(g, data, fl, static_cast<uint32_t>(kj), sample, kc, mode, scale, &cj);
    if (cj <= (best_e + best_sm) * (1 + kJointSlack)) best = pj;
  }
  m->kind = ModelKind::kFloat;
  m->fp = best;
}

}  // namespace wcodec
