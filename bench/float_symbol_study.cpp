// bench/float_symbol_study.cpp — how fast could 16-bit floats decode with one
// rANS symbol per element instead of two?
//
// The float model codes each element as an exponent symbol (context: the
// left neighbour's exponent) and then a sign + high-mantissa symbol
// (context: the element's own exponent). The two symbols chain each lane's
// state through two table gathers per element. This study codes the same
// information (exponent, sign, two mantissa bits; the raw low mantissa bits
// are left out of both) as one joint symbol: the exponent relative to a
// 32-value window (clamped), times 8 sign/mantissa values, 256 symbols, with
// the same left-exponent contexts, and times both 32-lane AVX-512 decode
// loops on the same elements.
//
// It prints, for each file: the modeled bits per element of the split
// tables, of joint tables fitted to the data, and of joint tables formed as
// the product of the split tables (no extra table bytes in a file), the
// table sizes, and the decode rate of both loops (each checked against the
// source elements). Layout: every F16/BF16 tensor's elements in chunks of
// 32 lanes of 8 rows x 64 columns (a tensor's last partial chunk is left
// out); one set of tables per file (8 exponent contexts).
//
//   build/bench/float_symbol_study FILE.safetensors...
#include <immintrin.h>

// GCC 12's AVX-512 headers build some results from _mm512_undefined_*(),
// which its uninitialized-use warnings report at every inlined call site.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "wcodec/safetensors.h"

namespace {

constexpr uint32_t kL = 1u << 16;  // rANS lower bound, 16-bit words, 12-bit probabilities
constexpr int kW = 64, kRows = 8, kPer = kW * kRows, kChunk = 32 * kPer;
constexpr int kCtx = 8;

#define STUDY_AVX512 __attribute__((target("avx512f,avx512bw,popcnt")))

struct Table {
  std::vector<uint32_t> freq, start;
};

// Counts -> frequencies summing to 4096, every seen symbol at least 1.
Table normalize(const std::vector<uint64_t>& cnt) {
  Table t;
  t.freq.assign(cnt.size(), 0);
  t.start.assign(cnt.size(), 0);
  uint64_t tot = 0;
  for (auto c : cnt) tot += c;
  if (!tot) {
    t.freq[0] = 4096;
    return t;
  }
  int64_t sum = 0;
  for (size_t i = 0; i < cnt.size(); ++i) {
    if (!cnt[i]) continue;
    t.freq[i] = std::max<uint32_t>(1, static_cast<uint32_t>(std::llround(static_cast<double>(cnt[i]) * 4096 / tot)));
    sum += t.freq[i];
  }
  while (sum != 4096) {
    const size_t b = static_cast<size_t>(std::max_element(t.freq.begin(), t.freq.end()) - t.freq.begin());
    if (sum > 4096) {
      const uint32_t d = static_cast<uint32_t>(std::min<int64_t>(sum - 4096, t.freq[b] - 1));
      t.freq[b] -= d;
      sum -= d;
    } else {
      t.freq[b] += static_cast<uint32_t>(4096 - sum);
      sum = 4096;
    }
  }
  uint32_t c = 0;
  for (size_t i = 0; i < cnt.size(); ++i) {
    t.start[i] = c;
    c += t.freq[i];
  }
  return t;
}

// Slot entries as the product's vector decoder packs them:
// symbol | (freq - 1) << 8 | (slot - start) << 20.
std::vector<uint32_t> slot_tables(const std::vector<Table>& ts) {
  std::vector<uint32_t> out(ts.size() * 4096, 0);
  for (size_t i = 0; i < ts.size(); ++i)
    for (size_t s = 0; s < ts[i].freq.size(); ++s)
      for (uint32_t k = 0; k < ts[i].freq[s]; ++k)
        out[i * 4096 + ts[i].start[s] + k] = static_cast<uint32_t>(s) | ((ts[i].freq[s] - 1) << 8) | (k << 20);
  return out;
}

struct Symbol {
  uint32_t freq, start;
};

// One chunk's coded form: 32 final states and the words in decode order.
struct Coded {
  std::vector<uint32_t> x;
  std::vector<uint16_t> words;
};

// rANS-encodes groups of 16 symbols (lanes 0..15 or 16..31, alternating
// halves, in decode order) into the word order the decode loops read.
Coded encode_groups(const std::vector<std::vector<Symbol>>& groups) {
  Coded c;
  c.x.assign(32, kL);
  for (size_t g = groups.size(); g-- > 0;) {
    const int half = static_cast<int>(g % 2);
    for (int li = 15; li >= 0; --li) {
      const Symbol& s = groups[g][static_cast<size_t>(li)];
      uint32_t& x = c.x[static_cast<size_t>(16 * half + li)];
      if (x >= (uint64_t{s.freq} << 20)) {
        c.words.push_back(static_cast<uint16_t>(x & 0xFFFF));
        x >>= 16;
      }
      x = ((x / s.freq) << 12) + (x % s.freq) + s.start;
    }
  }
  std::reverse(c.words.begin(), c.words.end());
  c.words.resize(c.words.size() + 64, 0);  // the loops load 16 words at a time
  return c;
}

struct Loop {
  const uint32_t* exp_slots;  // split: exponent tables; joint: joint tables
  const uint32_t* sm_slots;   // split only
  int elo, jbase, mbits;
};

STUDY_AVX512 inline __m512i advance(__m512i x, __m512i e) {
  const __m512i f = _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(e, 8), _mm512_set1_epi32(4095)),
                                     _mm512_set1_epi32(1));
  return _mm512_add_epi32(_mm512_mullo_epi32(f, _mm512_srli_epi32(x, 12)), _mm512_srli_epi32(e, 20));
}

STUDY_AVX512 inline __m512i step(__m512i& x, __m512i ctx, const uint32_t* slots, const uint16_t* w, uint32_t& pos) {
  const __m512i idx = _mm512_ternarylogic_epi32(_mm512_slli_epi32(ctx, 12), x, _mm512_set1_epi32(4095), 0xF8);
  const __m512i e = _mm512_i32gather_epi32(idx, slots, 4);
  x = advance(x, e);
  const __mmask16 need = _mm512_cmplt_epu32_mask(x, _mm512_set1_epi32(static_cast<int>(kL)));
  const __m512i wv = _mm512_maskz_expand_epi32(
      need, _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + pos))));
  x = _mm512_mask_or_epi32(x, need, _mm512_slli_epi32(x, 16), wv);
  pos += static_cast<uint32_t>(__builtin_popcount(need));
  return _mm512_and_si512(e, _mm512_set1_epi32(0xFF));
}

STUDY_AVX512 inline __m512i exp_ctx(__m512i e, int elo) {
  return _mm512_min_epi32(_mm512_max_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(elo)), _mm512_setzero_si512()),
                          _mm512_set1_epi32(kCtx - 1));
}

// Decodes one chunk into 16-bit sign | exponent | two mantissa bits, lane
// major (step * 32 + lane). Joint: one symbol per element.
template <bool kJoint>
STUDY_AVX512 void decode_chunk(const Loop& lp, const Coded& c, uint16_t* out) {
  const uint16_t* w = c.words.data();
  uint32_t pos = 0;
  __m512i x0 = _mm512_loadu_si512(c.x.data()), x1 = _mm512_loadu_si512(c.x.data() + 16);
  const __m512i seven = _mm512_set1_epi32(7), three = _mm512_set1_epi32(3);
  const __m512i pick = _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28, 26,
                                        24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  for (int r = 0; r < kRows; ++r) {
    __m512i c0 = _mm512_setzero_si512(), c1 = _mm512_setzero_si512();  // row start: context 0
    for (int j = 0; j < kW; ++j) {
      const __m512i a0 = step(x0, c0, lp.exp_slots, w, pos);
      const __m512i a1 = step(x1, c1, lp.exp_slots, w, pos);
      __m512i e0, e1, s0, s1;
      if constexpr (kJoint) {
        const __m512i jb = _mm512_set1_epi32(lp.jbase);
        e0 = _mm512_add_epi32(_mm512_srli_epi32(a0, 3), jb);
        e1 = _mm512_add_epi32(_mm512_srli_epi32(a1, 3), jb);
        s0 = _mm512_and_si512(a0, seven);
        s1 = _mm512_and_si512(a1, seven);
      } else {
        e0 = a0;
        e1 = a1;
        s0 = step(x0, exp_ctx(e0, lp.elo), lp.sm_slots, w, pos);
        s1 = step(x1, exp_ctx(e1, lp.elo), lp.sm_slots, w, pos);
      }
      auto bits = [&](__m512i e, __m512i s) STUDY_AVX512 {
        return _mm512_or_si512(
            _mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(s, 2), 15), _mm512_sll_epi32(e, _mm_cvtsi32_si128(lp.mbits))),
            _mm512_sll_epi32(_mm512_and_si512(s, three), _mm_cvtsi32_si128(lp.mbits - 2)));
      };
      _mm512_storeu_si512(out + (r * kW + j) * 32, _mm512_permutex2var_epi16(bits(e0, s0), pick, bits(e1, s1)));
      c0 = exp_ctx(e0, lp.elo);
      c1 = exp_ctx(e1, lp.elo);
    }
  }
}

bool avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}

int study(const std::string& path) {
  auto hdr = wcodec::read_safetensors_header_file(path);
  if (!hdr.ok()) {
    std::fprintf(stderr, "float_symbol_study: %s\n", hdr.status().ToString().c_str());
    return 1;
  }
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), {});
  // Elements of every F16 / BF16 tensor, whole chunks only.
  std::vector<uint16_t> v;
  int ebits = 0;
  for (const auto& t : hdr->tensors) {
    const int eb = t.dtype == wcodec::DType::kBF16 ? 8 : (t.dtype == wcodec::DType::kF16 ? 5 : 0);
    if (!eb || (ebits && eb != ebits)) continue;
    ebits = eb;
    const uint64_t n = (t.end - t.begin) / 2 / kChunk * kChunk;
    const auto* p = reinterpret_cast<const uint16_t*>(file.data() + hdr->data_start + t.begin);
    v.insert(v.end(), p, p + n);
  }
  if (v.empty()) {
    std::printf("%s: no F16/BF16 tensor of %d elements or more\n", path.c_str(), kChunk);
    return 0;
  }
  const int mbits = 15 - ebits;
  const size_t n = v.size(), nch = n / kChunk;
  std::vector<int> ex(n), sm(n);
  std::vector<uint64_t> eh(1u << ebits, 0);
  for (size_t i = 0; i < n; ++i) {
    ex[i] = (v[i] >> mbits) & ((1 << ebits) - 1);
    sm[i] = (v[i] >> 15) << 2 | ((v[i] >> (mbits - 2)) & 3);
    eh[static_cast<size_t>(ex[i])]++;
  }
  const int emode = static_cast<int>(std::max_element(eh.begin(), eh.end()) - eh.begin());
  const int elo = emode - kCtx / 2, jbase = std::max(0, emode - 24);
  auto ctx_of = [&](int left) { return left < 0 ? 0 : std::clamp(left - elo, 0, kCtx - 1); };
  auto sm_ctx = [&](int e) { return std::clamp(e - elo, 0, kCtx - 1); };
  auto jw = [&](int e) { return std::clamp(e - jbase, 0, 31); };  // window position
  auto joint = [&](size_t i) { return static_cast<size_t>(jw(ex[i]) << 3 | sm[i]); };
  // Element k of lane l of chunk ch.
  auto at = [](size_t ch, int l, int k) { return ch * kChunk + static_cast<size_t>(l) * kPer + static_cast<size_t>(k); };
  auto left_exp = [&](size_t i, int k, bool window) {
    if (k % kW == 0) return -1;
    return window ? jw(ex[i - 1]) + jbase : ex[i - 1];
  };
  std::vector<std::vector<uint64_t>> ce(kCtx, std::vector<uint64_t>(1u << ebits)), cs(kCtx, std::vector<uint64_t>(8)),
      cj(kCtx, std::vector<uint64_t>(256));
  for (size_t ch = 0; ch < nch; ++ch)
    for (int l = 0; l < 32; ++l)
      for (int k = 0; k < kPer; ++k) {
        const size_t i = at(ch, l, k);
        ce[static_cast<size_t>(ctx_of(left_exp(i, k, false)))][static_cast<size_t>(ex[i])]++;
        cs[static_cast<size_t>(sm_ctx(ex[i]))][static_cast<size_t>(sm[i])]++;
        cj[static_cast<size_t>(ctx_of(left_exp(i, k, true)))][joint(i)]++;
      }
  std::vector<Table> te, ts, tj, tp;
  for (int c = 0; c < kCtx; ++c) {
    te.push_back(normalize(ce[static_cast<size_t>(c)]));
    ts.push_back(normalize(cs[static_cast<size_t>(c)]));
    tj.push_back(normalize(cj[static_cast<size_t>(c)]));
  }
  // Product tables: P(e | ctx) * P(sm | e), quantized like the others.
  for (int c = 0; c < kCtx; ++c) {
    std::vector<uint64_t> prod(256, 0);
    for (int e = 0; e < (1 << ebits); ++e)
      for (int s = 0; s < 8; ++s)
        prod[static_cast<size_t>(jw(e) << 3 | s)] +=
            uint64_t{te[static_cast<size_t>(c)].freq[static_cast<size_t>(e)]} *
            ts[static_cast<size_t>(sm_ctx(e))].freq[static_cast<size_t>(s)];
    tp.push_back(normalize(prod));
  }
  // Modeled bits per element under each set of tables.
  double b_split = 0, b_joint = 0, b_prod = 0;
  for (size_t ch = 0; ch < nch; ++ch)
    for (int l = 0; l < 32; ++l)
      for (int k = 0; k < kPer; ++k) {
        const size_t i = at(ch, l, k);
        const auto c = static_cast<size_t>(ctx_of(left_exp(i, k, false)));
        const auto cw = static_cast<size_t>(ctx_of(left_exp(i, k, true)));
        b_split += 24 - std::log2(te[c].freq[static_cast<size_t>(ex[i])]) -
                   std::log2(ts[static_cast<size_t>(sm_ctx(ex[i]))].freq[static_cast<size_t>(sm[i])]);
        b_joint += 12 - std::log2(tj[cw].freq[joint(i)]);
        b_prod += 12 - std::log2(tp[cw].freq[joint(i)]);
      }
  // Both loops' streams, and the elements each must reproduce.
  std::vector<Coded> split(nch), jnt(nch);
  std::vector<uint16_t> want_split(n), want_joint(n);
  for (size_t ch = 0; ch < nch; ++ch) {
    std::vector<std::vector<Symbol>> gs, gj;
    for (int k = 0; k < kPer; ++k) {
      for (int pass = 0; pass < 2; ++pass)
        for (int h = 0; h < 2; ++h) {
          std::vector<Symbol> g;
          for (int l = 16 * h; l < 16 * h + 16; ++l) {
            const size_t i = at(ch, l, k);
            if (pass == 0) {
              const Table& t = te[static_cast<size_t>(ctx_of(left_exp(i, k, false)))];
              g.push_back({t.freq[static_cast<size_t>(ex[i])], t.start[static_cast<size_t>(ex[i])]});
            } else {
              const Table& t = ts[static_cast<size_t>(sm_ctx(ex[i]))];
              g.push_back({t.freq[static_cast<size_t>(sm[i])], t.start[static_cast<size_t>(sm[i])]});
            }
          }
          gs.push_back(std::move(g));
        }
      for (int h = 0; h < 2; ++h) {
        std::vector<Symbol> g;
        for (int l = 16 * h; l < 16 * h + 16; ++l) {
          const size_t i = at(ch, l, k);
          const Table& t = tj[static_cast<size_t>(ctx_of(left_exp(i, k, true)))];
          g.push_back({t.freq[joint(i)], t.start[joint(i)]});
        }
        gj.push_back(std::move(g));
      }
      for (int l = 0; l < 32; ++l) {
        const size_t i = at(ch, l, k), o = ch * kChunk + static_cast<size_t>(k) * 32 + static_cast<size_t>(l);
        const auto low = static_cast<uint16_t>((sm[i] >> 2) << 15 | (sm[i] & 3) << (mbits - 2));
        want_split[o] = static_cast<uint16_t>(low | ex[i] << mbits);
        want_joint[o] = static_cast<uint16_t>(low | (jw(ex[i]) + jbase) << mbits);
      }
    }
    split[ch] = encode_groups(gs);
    jnt[ch] = encode_groups(gj);
  }
  const auto se = slot_tables(te), ss = slot_tables(ts), sj = slot_tables(tj);
  std::vector<uint16_t> out(n);
  auto time = [&](bool joint_loop, double* rate) {
    const Loop lp{joint_loop ? sj.data() : se.data(), ss.data(), elo, jbase, mbits};
    double best = 1e30;
    for (int it = 0; it < 20; ++it) {
      const auto t0 = std::chrono::steady_clock::now();
      for (size_t ch = 0; ch < nch; ++ch) {
        if (joint_loop) decode_chunk<true>(lp, jnt[ch], out.data() + ch * kChunk);
        else decode_chunk<false>(lp, split[ch], out.data() + ch * kChunk);
      }
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    *rate = static_cast<double>(n) / best / 1e6;
    return std::memcmp(out.data(), (joint_loop ? want_joint : want_split).data(), n * 2) == 0;
  };
  double r_split = 0, r_joint = 0;
  const bool ok_split = time(false, &r_split), ok_joint = time(true, &r_joint);
  size_t clamped = 0;
  for (size_t i = 0; i < n; ++i) clamped += jw(ex[i]) + jbase != ex[i];
  const double ne = static_cast<double>(n);
  std::printf("\n%s: %zu elements (%s), exponent window %d..%d (%zu elements outside, clamped)\n", path.c_str(), n,
              ebits == 8 ? "BF16" : "F16", jbase, jbase + 31, clamped);
  std::printf("| tables | modeled bits/element | table KiB (decoder) | decode M elements/s | check |\n");
  std::printf("|---|---|---|---|---|\n");
  std::printf("| split: exponent, then sign+2 mantissa bits | %.4f | %zu | %.0f | %s |\n", b_split / ne,
              (se.size() + ss.size()) * 4 / 1024, r_split, ok_split ? "exact" : "MISMATCH");
  std::printf("| joint, fitted | %.4f | %zu | %.0f (%.2fx) | %s |\n", b_joint / ne, sj.size() * 4 / 1024, r_joint,
              r_joint / r_split, ok_joint ? "exact" : "MISMATCH");
  std::printf("| joint, product of the split tables | %.4f (%+.2f%%) | %zu | as fitted | |\n", b_prod / ne,
              100 * (b_prod - b_split) / b_split, sj.size() * 4 / 1024);
  return ok_split && ok_joint ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: float_symbol_study FILE.safetensors...\n");
    return 2;
  }
  if (!avx512()) {
    std::printf("float_symbol_study: skipped, this CPU has no AVX-512\n");
    return 0;
  }
  int rc = 0;
  for (int i = 1; i < argc; ++i) rc |= study(argv[i]);
  return rc;
}
