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
// loops on the same elements, and the split loop stepping two chunks at
// once (independent state chains whose gathers overlap; the codec's
// decoder does this for groups of two or three chunks).
//
// It prints, for each file: the modeled bits per element of the split
// tables, of joint tables fitted to the data, and of joint tables formed as
// the product of the split tables (no extra table bytes in a file), the
// table sizes, and the decode rate of both loops (each checked against the
// source elements). Layout: every F16/BF16 tensor's elements in chunks of
// 32 lanes of 8 rows x 64 columns (a tensor's last partial chunk is left
// out); one set of tables per file (8 exponent contexts). Tables, slot
// tables and streams come from the codec (normalize_counts, the vector
// decoder's tables, RansEncoder); only the two decode loops are the study's.
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

#include "rans.h"
#include "chunk_decode_simd.h"
#include "rans_encoder.h"
#include "tensor_encode.h"
#include "wcodec/safetensors.h"

namespace {

constexpr uint32_t kL = 1u << 16;  // rANS lower bound, 16-bit words, 12-bit probabilities
constexpr int kW = 64, kRows = 8, kPer = kW * kRows, kChunk = 32 * kPer;
constexpr int kCtx = 8;

#define STUDY_AVX512 __attribute__((target("avx512f,avx512bw,popcnt")))

using wcodec::FreqTable;

FreqTable table_of(const std::vector<uint64_t>& counts) { return wcodec::normalize_counts(counts, 12); }

// One chunk's coded form as the codec writes it: 32 final states (u32),
// then the 16-bit words in decode order (padded: the loops load 16 at once).
struct Coded {
  std::vector<uint8_t> bytes;
  const uint32_t* x() const { return reinterpret_cast<const uint32_t*>(bytes.data()); }
  const uint16_t* words() const { return reinterpret_cast<const uint16_t*>(bytes.data() + 128); }
};

// The vector decoder's slot tables (16 KiB per context) of a float model
// with these exponent (t0) and sign/mantissa (t1) tables, built by the codec.
struct Slots {
  wcodec::TensorModel model;
  std::shared_ptr<const wcodec::TensorModel::VectorTables> hold;
  wcodec::ModelView view;
};

Slots slots_of(std::vector<FreqTable> t0, std::vector<FreqTable> t1) {
  Slots s;
  s.model.kind = wcodec::ModelKind::kFloat;
  s.model.t0 = std::move(t0);
  s.model.t1 = std::move(t1);
  s.model.finalize();
  s.view = s.model.view(&s.hold);
  return s;
}

Coded finish(wcodec::RansEncoder& enc) {
  Coded c;
  enc.finish(c.bytes);
  c.bytes.resize(c.bytes.size() + 64, 0);
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
  const uint16_t* w = c.words();
  uint32_t pos = 0;
  __m512i x0 = _mm512_loadu_si512(c.x()), x1 = _mm512_loadu_si512(c.x() + 16);
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

// The split loop over two chunks at once (a, b): four independent lane
// state chains per step instead of two.
STUDY_AVX512 void decode_pair(const Loop& lp, const Coded& ca, const Coded& cb, uint16_t* oa, uint16_t* ob) {
  const uint16_t* wa = ca.words();
  const uint16_t* wb = cb.words();
  uint32_t pa = 0, pb = 0;
  __m512i x0 = _mm512_loadu_si512(ca.x()), x1 = _mm512_loadu_si512(ca.x() + 16);
  __m512i x2 = _mm512_loadu_si512(cb.x()), x3 = _mm512_loadu_si512(cb.x() + 16);
  const __m512i three = _mm512_set1_epi32(3);
  const __m512i pick = _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28, 26,
                                        24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  auto bits = [&](__m512i e, __m512i s) STUDY_AVX512 {
    return _mm512_or_si512(
        _mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(s, 2), 15), _mm512_sll_epi32(e, _mm_cvtsi32_si128(lp.mbits))),
        _mm512_sll_epi32(_mm512_and_si512(s, three), _mm_cvtsi32_si128(lp.mbits - 2)));
  };
  for (int r = 0; r < kRows; ++r) {
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0;
    for (int j = 0; j < kW; ++j) {
      const __m512i e0 = step(x0, c0, lp.exp_slots, wa, pa);
      const __m512i e2 = step(x2, c2, lp.exp_slots, wb, pb);
      const __m512i e1 = step(x1, c1, lp.exp_slots, wa, pa);
      const __m512i e3 = step(x3, c3, lp.exp_slots, wb, pb);
      const __m512i s0 = step(x0, exp_ctx(e0, lp.elo), lp.sm_slots, wa, pa);
      const __m512i s2 = step(x2, exp_ctx(e2, lp.elo), lp.sm_slots, wb, pb);
      const __m512i s1 = step(x1, exp_ctx(e1, lp.elo), lp.sm_slots, wa, pa);
      const __m512i s3 = step(x3, exp_ctx(e3, lp.elo), lp.sm_slots, wb, pb);
      _mm512_storeu_si512(oa + (r * kW + j) * 32, _mm512_permutex2var_epi16(bits(e0, s0), pick, bits(e1, s1)));
      _mm512_storeu_si512(ob + (r * kW + j) * 32, _mm512_permutex2var_epi16(bits(e2, s2), pick, bits(e3, s3)));
      c0 = exp_ctx(e0, lp.elo);
      c1 = exp_ctx(e1, lp.elo);
      c2 = exp_ctx(e2, lp.elo);
      c3 = exp_ctx(e3, lp.elo);
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
  std::vector<FreqTable> te, ts, tj, tp;
  for (int c = 0; c < kCtx; ++c) {
    te.push_back(table_of(ce[static_cast<size_t>(c)]));
    ts.push_back(table_of(cs[static_cast<size_t>(c)]));
    tj.push_back(table_of(cj[static_cast<size_t>(c)]));
  }
  // Product tables: P(e | ctx) * P(sm | e), quantized like the others.
  for (int c = 0; c < kCtx; ++c) {
    std::vector<uint64_t> prod(256, 0);
    for (int e = 0; e < (1 << ebits); ++e)
      for (int s = 0; s < 8; ++s)
        prod[static_cast<size_t>(jw(e) << 3 | s)] +=
            uint64_t{te[static_cast<size_t>(c)].freq[static_cast<size_t>(e)]} *
            ts[static_cast<size_t>(sm_ctx(e))].freq[static_cast<size_t>(s)];
    tp.push_back(table_of(prod));
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
    wcodec::RansEncoder es, ej;  // symbols in decode order
    for (int k = 0; k < kPer; ++k) {
      for (int l = 0; l < 32; ++l) {
        const size_t i = at(ch, l, k);
        es.put(l, te[static_cast<size_t>(ctx_of(left_exp(i, k, false)))], static_cast<uint32_t>(ex[i]));
      }
      for (int l = 0; l < 32; ++l) {
        const size_t i = at(ch, l, k);
        es.put(l, ts[static_cast<size_t>(sm_ctx(ex[i]))], static_cast<uint32_t>(sm[i]));
        ej.put(l, tj[static_cast<size_t>(ctx_of(left_exp(i, k, true)))], static_cast<uint32_t>(joint(i)));
      }
      for (int l = 0; l < 32; ++l) {
        const size_t i = at(ch, l, k), o = ch * kChunk + static_cast<size_t>(k) * 32 + static_cast<size_t>(l);
        const auto low = static_cast<uint16_t>((sm[i] >> 2) << 15 | (sm[i] & 3) << (mbits - 2));
        want_split[o] = static_cast<uint16_t>(low | ex[i] << mbits);
        want_joint[o] = static_cast<uint16_t>(low | (jw(ex[i]) + jbase) << mbits);
      }
    }
    split[ch] = finish(es);
    jnt[ch] = finish(ej);
  }
  const Slots split_slots = slots_of(te, ts), joint_slots = slots_of(tj, {});
  std::vector<uint16_t> out(n);
  auto time = [&](bool joint_loop, double* rate) {
    const Loop lp{joint_loop ? joint_slots.view.slot_all : split_slots.view.slot_all, split_slots.view.slot1_all, elo,
                  jbase, mbits};
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
  double r_split = 0, r_joint = 0, r_pair = 0;
  const bool ok_split = time(false, &r_split), ok_joint = time(true, &r_joint);
  bool ok_pair = true;
  {
    const Loop lp{split_slots.view.slot_all, split_slots.view.slot1_all, elo, jbase, mbits};
    double best = 1e30;
    for (int it = 0; it < 20; ++it) {
      std::fill(out.begin(), out.end(), 0);
      const auto t0 = std::chrono::steady_clock::now();
      size_t ch = 0;
      for (; ch + 1 < nch; ch += 2)
        decode_pair(lp, split[ch], split[ch + 1], out.data() + ch * kChunk, out.data() + (ch + 1) * kChunk);
      if (ch < nch) decode_chunk<false>(lp, split[ch], out.data() + ch * kChunk);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    r_pair = static_cast<double>(n) / best / 1e6;
    ok_pair = std::memcmp(out.data(), want_split.data(), n * 2) == 0;
  }
  size_t clamped = 0;
  for (size_t i = 0; i < n; ++i) clamped += jw(ex[i]) + jbase != ex[i];
  const double ne = static_cast<double>(n);
  std::printf("\n%s: %zu elements (%s), exponent window %d..%d (%zu elements outside, clamped)\n", path.c_str(), n,
              ebits == 8 ? "BF16" : "F16", jbase, jbase + 31, clamped);
  std::printf("| tables | modeled bits/element | table KiB (decoder) | decode M elements/s | check |\n");
  std::printf("|---|---|---|---|---|\n");
  std::printf("| split: exponent, then sign+2 mantissa bits | %.4f | %zu | %.0f | %s |\n", b_split / ne,
              (te.size() + ts.size()) * 16, r_split, ok_split ? "exact" : "MISMATCH");
  std::printf("| split, two chunks interleaved | %.4f | %zu | %.0f (%.2fx) | %s |\n", b_split / ne,
              (te.size() + ts.size()) * 16, r_pair, r_pair / r_split, ok_pair ? "exact" : "MISMATCH");
  std::printf("| joint, fitted | %.4f | %zu | %.0f (%.2fx) | %s |\n", b_joint / ne, tj.size() * 16, r_joint,
              r_joint / r_split, ok_joint ? "exact" : "MISMATCH");
  std::printf("| joint, product of the split tables | %.4f (%+.2f%%) | %zu | as fitted | |\n", b_prod / ne,
              100 * (b_prod - b_split) / b_split, tp.size() * 16);
  return ok_split && ok_joint && ok_pair ? 0 : 1;
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
