// tests/test_cpu_paths.cpp — the decoder paths (include/wcodec/cpu.h):
// WCODEC_CPU parsing and fallback, and every path this CPU runs (scalar;
// avx2 and neon = the Highway decoders' AVX2 and NEON instances; avx512)
// decoding exactly like the reference:
// chunk by chunk on the real model files (also on damaged streams: the same
// accept / reject on every path), and whole files through the wcodec tool
// forced onto each path (SHA-256 of the decoded file = the original's).
// Thread-safety: single-threaded test code.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bytes.h"
#include "chunk_decode_hwy.h"
#include "chunk_decode_simd.h"
#include "chunk_model.h"
#include "sanitizer.h"
#include "tensor_encode.h"
#include "tensor_model.h"
#include "chunk_payload_testutil.h"
#include "testutil.h"
#include "wcodec/container.h"
#include "wcodec/cpu.h"
#include "wcodec/safetensors.h"

#ifndef WCODEC_TEST_EMULATED
#define WCODEC_TEST_EMULATED 0
#endif

namespace {

using namespace wcodec;
namespace fs = std::filesystem;

// ------------------------------------------------------------ WCODEC_CPU

TEST(CpuPaths, ParseNames) {
  CpuPath p;
  EXPECT_TRUE(parse_cpu_path("scalar", &p) && p == CpuPath::kScalar);
  EXPECT_TRUE(parse_cpu_path("AVX2", &p) && p == CpuPath::kAvx2);
  EXPECT_TRUE(parse_cpu_path("avx512", &p) && p == CpuPath::kAvx512);
  EXPECT_TRUE(parse_cpu_path("neon", &p) && p == CpuPath::kNeon);
  EXPECT_FALSE(parse_cpu_path("sse2", &p));
  EXPECT_FALSE(parse_cpu_path("", &p));
  EXPECT_FALSE(parse_cpu_path(nullptr, &p));
  for (CpuPath q : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512, CpuPath::kNeon}) {
    ASSERT_TRUE(parse_cpu_path(cpu_path_name(q), &p));
    EXPECT_EQ(p, q);
  }
}

TEST(CpuPaths, Resolve) {
  const CpuPath best = cpu_path_best();
  EXPECT_TRUE(cpu_path_supported(CpuPath::kScalar));
  EXPECT_TRUE(cpu_path_supported(best));
  // Unset, empty, "auto": the best path, nothing to say.
  for (const char* v : {static_cast<const char*>(nullptr), "", "auto", "AUTO"}) {
    const CpuPathChoice c = resolve_cpu_path(v, nullptr);
    EXPECT_EQ(c.effective, best);
    EXPECT_FALSE(c.forced);
    EXPECT_TRUE(c.note.empty()) << c.note;
  }
  // Unknown value: ignored (the best path), with a note for the tool.
  {
    const CpuPathChoice c = resolve_cpu_path("sse9", nullptr);
    EXPECT_EQ(c.effective, best);
    EXPECT_FALSE(c.forced);
    EXPECT_NE(c.note.find("sse9"), std::string::npos) << c.note;
  }
  // Scalar always runs; WCODEC_NO_SIMD=1 is its alias and wins.
  EXPECT_EQ(resolve_cpu_path("scalar", nullptr).effective, CpuPath::kScalar);
  EXPECT_EQ(resolve_cpu_path("avx512", "1").effective, CpuPath::kScalar);
  EXPECT_EQ(resolve_cpu_path(nullptr, "1").effective, CpuPath::kScalar);
  EXPECT_EQ(resolve_cpu_path(nullptr, "0").effective, best);
  // A path the CPU runs is honoured; one it cannot falls back, with a note.
  for (CpuPath p : {CpuPath::kAvx2, CpuPath::kAvx512, CpuPath::kNeon}) {
    const CpuPathChoice c = resolve_cpu_path(cpu_path_name(p), nullptr);
    EXPECT_EQ(c.requested, p);
    EXPECT_TRUE(c.forced);
    if (cpu_path_supported(p)) {
      EXPECT_EQ(c.effective, p);
      EXPECT_TRUE(c.note.empty());
    } else {
      EXPECT_TRUE(cpu_path_supported(c.effective));
      EXPECT_NE(c.effective, p);
      EXPECT_FALSE(c.note.empty());
    }
  }
  EXPECT_FALSE(cpu_model().empty());
}

// The avx2 decoders' gather form: vpgatherdd on Intel CPUs the kernel
// reports free of Gather Data Sampling's microcode slowdown, scalar loads
// elsewhere and under AddressSanitizer; WCODEC_GATHER forces either.
TEST(CpuPaths, GatherFormChoice) {
  const GatherForm kV = GatherForm::kVector, kS = GatherForm::kScalarLoads;
  EXPECT_EQ(resolve_gather_form("GenuineIntel", "Not affected", nullptr), kV);
  EXPECT_EQ(resolve_gather_form("GenuineIntel", "Vulnerable: No microcode", nullptr), kV);
  EXPECT_EQ(resolve_gather_form("GenuineIntel", "Mitigation: Microcode", nullptr), kS);
  EXPECT_EQ(resolve_gather_form("GenuineIntel", "Unknown: Dependent on hypervisor status", nullptr), kS);
  EXPECT_EQ(resolve_gather_form("GenuineIntel", nullptr, nullptr), kS);  // no sysfs entry: old kernel
  EXPECT_EQ(resolve_gather_form("AuthenticAMD", "Not affected", nullptr), kS);
  EXPECT_EQ(resolve_gather_form("", nullptr, nullptr), kS);
  EXPECT_EQ(resolve_gather_form("AuthenticAMD", "Not affected", "vector"), kV);
  EXPECT_EQ(resolve_gather_form("GenuineIntel", "Not affected", "scalar"), kS);
  EXPECT_EQ(resolve_gather_form("GenuineIntel", "Not affected", "bogus"), kV);  // ignored
  // AddressSanitizer builds: the scalar loads, whose indexes it checks,
  // unless forced.
  EXPECT_EQ(resolve_gather_form("GenuineIntel", "Not affected", nullptr, true), kS);
  EXPECT_EQ(resolve_gather_form("GenuineIntel", "Not affected", "vector", true), kV);
  EXPECT_STREQ(gather_form_name(kV), "vpgatherdd");
  EXPECT_STREQ(gather_form_name(kS), "scalar loads");
  // The process's form follows WCODEC_GATHER, and the tool says which.
  const char* env = std::getenv("WCODEC_GATHER");
  if (env && !std::strcmp(env, "vector")) {
    EXPECT_EQ(gather_form(), kV);
  }
  if (env && !std::strcmp(env, "scalar")) {
    EXPECT_EQ(gather_form(), kS);
  }
#if WCODEC_ASAN
  if (!env) {
    EXPECT_EQ(gather_form(), kS);
  }
#endif
#if defined(__x86_64__)
  for (const char* f : {"vector", "scalar"}) {
    std::string out;
    ASSERT_EQ(wctest::run_command(std::string("WCODEC_GATHER=") + f + " " + WCODEC_TOOL + " --version", &out), 0)
        << out;
    EXPECT_NE(out.find(std::string("table gathers: ") + (f[0] == 'v' ? "vpgatherdd" : "scalar loads")),
              std::string::npos)
        << out;
  }
#endif
}

// cpu.cpp checks the features of Highway's targets itself (so that the
// codec does not load libhwy.so, whose initializer times the clock at
// every process start); its answer equals Highway's on this CPU.
TEST(CpuPaths, TargetChecksAgreeWithHighway) {
#if defined(__x86_64__)
  EXPECT_EQ(cpu_path_supported(CpuPath::kAvx2), (hwy::SupportedTargets() & HWY_AVX2) != 0);
#elif defined(__aarch64__)
  EXPECT_EQ(cpu_path_supported(CpuPath::kNeon), (hwy::SupportedTargets() & HWY_NEON) != 0);
#else
  GTEST_SKIP() << "no Highway target the codec checks on this architecture";
#endif
}

// ------------------------------------------------------------ chunks

// The path the Highway decoders (chunk_decode_hwy.h) serve in this build:
// their AVX2 instance on x86-64, their NEON instance on aarch64.
CpuPath hwy_path() {
#if defined(__aarch64__)
  return CpuPath::kNeon;
#else
  return CpuPath::kAvx2;
#endif
}

// The real files compared: all of them, but under emulation (the aarch64
// build under qemu, scripts/test_aarch64.sh: WCODEC_TEST_EMULATED) or with
// WCODEC_TEST_SMALL_FILES=1 the small ones (stories260K, silero_vad: up to
// 2 MB; the isnet-medium files take minutes each under qemu).
bool small_files_only() {
  const char* small = std::getenv("WCODEC_TEST_SMALL_FILES");
  return WCODEC_TEST_EMULATED || (small && *small && std::string(small) != "0");
}
std::vector<fs::path> compared_files() {
  std::vector<fs::path> v = wctest::data_safetensors_files();
  if (small_files_only()) std::erase_if(v, [](const fs::path& p) { return fs::file_size(p) > (2u << 20); });
  return v;
}
// The encoder's options for the chunk comparisons: the default, but with
// the small files only, chunks of 4 KiB (their tensors then give as many
// chunks, groups and chunk shapes as the large files do at 256 KiB).
EncodeOptions compared_options() {
  EncodeOptions o;
  if (small_files_only()) o.chunk_bytes = 4 * 1024;
  return o;
}

// encode_tensor with compared_options, except that every other model that
// may take 9-bit tables (*count: such models so far) is encoded with exact
// 12-bit tables, so that the decoders' two table kinds (slot tables and
// 1/8-slot entries, ModelView::ent8) are both compared.
Result<EncodedTensor> encode_both_table_kinds(const TensorInfo& t, const uint8_t* data, int* count) {
  auto r = encode_tensor(t, data, AuxInput{}, compared_options());
  if (!r.ok()) return r;
  const TensorModel& m = r->model;
  const bool x8able = m.kind == ModelKind::kFloat || (m.kind == ModelKind::kInt && m.ip.sub != kIntI8 &&
                                                     m.ip.sub != kIntTernary && m.ip.nbr_mode != 4);
  if (!x8able || ++*count % 2) return r;
  EncodeOptions o = compared_options();
  o.x8_tables = false;
  return encode_tensor(t, data, AuxInput{}, o);
}

using Parsed = wctest::ChunkPayload;
bool parse_payload(const TensorGeometry& g, uint64_t index, const std::vector<uint8_t>& p, Parsed* out) {
  return wctest::parse_chunk_payload(g, index, p, out);
}

// The view of chunk i of a tensor of geometry g (its rectangle).
ChunkView chunk_view(const TensorGeometry& g, uint64_t i) {
  uint64_t row0, col0, h, w;
  g.chunk_rect(i, &row0, &col0, &h, &w);
  return ChunkView{static_cast<uint32_t>(h), static_cast<uint32_t>(w), static_cast<uint32_t>(row0),
                   static_cast<uint32_t>(col0), static_cast<uint32_t>(g.cols)};
}

#if WCODEC_ASAN
constexpr uint64_t kMaxTensor = 1u << 20;
// Under the sanitizers (encoding is most of these suites' time there) the
// real-file comparisons stop at the first tensor after which every
// condition they assert already holds; the release build compares every
// tensor.
constexpr bool kStopWhenCovered = true;
#else
constexpr uint64_t kMaxTensor = 8u << 20;
constexpr bool kStopWhenCovered = false;
#endif

struct Counts {
  int chunks = 0;   // chunks the Highway decoder decoded
  int same = 0;     // of them, 16-bit floats whose lanes share one rectangle
  int ragged = 0;   // 16-bit floats whose lanes differ in size
  int f32 = 0;      // 4-byte floats
  int tails = 0;    // raw tail chunks
  int damaged = 0;  // damaged streams compared
  int rejected = 0;
  int centers = 0;    // int chunks decoded under another center
  int center_ok = 0;  // ... that the reference accepted
  int ent8 = 0;       // int chunks decoded from 1/8-slot entries (ModelView::ent8)
  int u8_slots = 0;   // uint8 / 4-bit chunks decoded from 4096-slot tables
};

// Reference, Highway (AVX2 / NEON) and, where the process runs it, AVX-512 on
// one float chunk and on damaged copies of its stream.
void compare_float_chunk(const ModelView& mv, const ChunkView& cv, const Parsed& ps, uint64_t xxh3,
                         uint64_t decoded_size, const std::string& what, Counts* k) {
  const uint64_t n = uint64_t{cv.h} * cv.w;
  std::vector<uint16_t> e(n);
  std::vector<uint8_t> sm(n), lm(simd_lane_major_bytes(cv));
  std::vector<uint8_t> ref(decoded_size, 0x11), hw(decoded_size, 0x22), v5(decoded_size, 0x33);
  ASSERT_TRUE(decode_float_chunk(mv, cv, ps.rans, ps.rans_len, ps.raw, ps.raw_len, ref.data(), e.data(), sm.data(),
                                 ps.tail))
      << what;
  ASSERT_EQ(chunk_hash(ref.data(), ref.size()), xxh3) << what;
  const int h = decode_float_chunk_hwy(mv, cv, ps.rans, ps.rans_len, ps.raw, ps.raw_len, hw.data(), lm.data(),
                                       ps.tail);
  if (h < 0) return;
  ASSERT_EQ(h, 1) << what << ": the Highway decoder rejected a valid chunk";
  ASSERT_EQ(ref, hw) << what << ": the Highway decoder differs from the reference";
  ++k->chunks;
  k->ent8 += mv.ent8 != nullptr;
  k->tails += ps.tail;
  k->f32 += mv.fp.elem_bytes == 4;
  if (mv.fp.elem_bytes == 2) {
    bool same = true;
    for (uint32_t l = 1; l < kLanes; ++l) {
      const LaneRect a = lane_rect(cv.h, cv.w, 0), b = lane_rect(cv.h, cv.w, l);
      same &= a.w == b.w && a.h == b.h;
    }
    (same ? k->same : k->ragged) += 1;
  }
  const bool avx512 = cpu_path() == CpuPath::kAvx512;
  // Damage: one byte flipped in the lane states, early, middle and last
  // words; a truncated stream (shorter by 2 and by 64 bytes).
  const uint32_t L = ps.rans_len;
  const uint32_t spots[] = {3, 4 * kLanes + 1, L / 3, L / 2, L - 3};
  for (int v = 0; v < 7; ++v) {
    std::vector<uint8_t> bad(ps.rans, ps.rans + L);
    uint32_t len = L;
    if (v < 5) {
      bad[spots[v] % L] ^= static_cast<uint8_t>(0x5a + v);
    } else {
      const uint32_t cut = v == 5 ? 2 : 64;
      if (len < 4 * kLanes + cut) continue;
      len -= cut;
    }
    const bool r_ok = decode_float_chunk(mv, cv, bad.data(), len, ps.raw, ps.raw_len, ref.data(), e.data(),
                                         sm.data(), ps.tail);
    const int h_ok = decode_float_chunk_hwy(mv, cv, bad.data(), len, ps.raw, ps.raw_len, hw.data(), lm.data(),
                                            ps.tail);
    EXPECT_EQ(r_ok ? 1 : 0, h_ok) << what << " damage " << v << ": Highway decoder and reference disagree";
    if (r_ok && h_ok == 1) {
      EXPECT_EQ(ref, hw) << what << " damage " << v;
    }
    if (avx512) {
      const int s_ok = decode_float_chunk_simd(mv, cv, bad.data(), len, ps.raw, ps.raw_len, v5.data(), lm.data(),
                                               ps.tail);
      if (s_ok >= 0) {
        EXPECT_EQ(r_ok ? 1 : 0, s_ok) << what << " damage " << v << ": AVX-512 and reference disagree";
      }
    }
    ++k->damaged;
    k->rejected += !r_ok;
  }
}

TEST(CpuPaths, HighwayFloatEqualsReferenceOnRealFiles) {
  if (!cpu_path_supported(hwy_path())) GTEST_SKIP() << "no Highway decoder path (avx2, neon) here: not compared";
  Counts k;
  int x8able = 0;
  for (const auto& p : compared_files()) {
    const auto f = wctest::read_file(p);
    auto hd = parse_safetensors_header(f.data(), f.size(), f.size(), p.string());
    ASSERT_TRUE(hd.ok()) << hd.status().ToString();
    for (const auto& t : hd->tensors) {
      if (t.nbytes() > kMaxTensor) continue;
      auto r = encode_both_table_kinds(t, f.data() + hd->data_start + t.begin, &x8able);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      const EncodedTensor& et = *r;
      if (et.model.kind != ModelKind::kFloat) continue;
      std::shared_ptr<const TensorModel::VectorTables> hold;
      const ModelView mv = et.model.view(&hold);
      for (uint64_t i = 0; i < et.chunks.size(); ++i) {
        const auto& c = et.chunks[i];
        if (c.method != ChunkMethod::kModel) continue;
        Parsed ps;
        ASSERT_TRUE(parse_payload(et.geom, i, c.payload, &ps));
        const ChunkView cv = chunk_view(et.geom, i);
        compare_float_chunk(mv, cv, ps, c.xxh3, c.decoded_size,
                            p.filename().string() + ": " + t.name + " chunk " + std::to_string(i), &k);
        if (HasFatalFailure()) return;
      }
    }
  }
  if (!vector_decoder_available()) GTEST_SKIP() << "scalar path forced: no vector tables, nothing compared";
  EXPECT_GT(k.chunks, 50);
  EXPECT_GT(k.same, 20) << "same-rectangle 16-bit chunks (the lane-major loop)";
  EXPECT_GT(k.ragged, 5) << "16-bit chunks with ragged lanes";
  EXPECT_GT(k.f32, 5) << "4-byte float chunks";
  EXPECT_GT(k.ent8, 20) << "float chunks whose tables are read as 1/8-slot entries";
  EXPECT_GT(k.chunks - k.ent8, 20) << "float chunks read from 4096-slot tables";
  EXPECT_GT(k.rejected, k.damaged / 2) << "the damage should mostly be detected";
}

// Groups of 2 and 3 chunks of one 16-bit float tensor and geometry through
// decode_group_simd on the avx2 path (decode_float_group_hwy): the same
// bytes as the reference, and, with one stream of the group damaged, 0
// exactly when the reference rejects that chunk.
TEST(CpuPaths, HighwayFloatGroupsEqualReference) {
  if (!cpu_path_supported(hwy_path())) GTEST_SKIP() << "no Highway decoder path (avx2, neon) here: not compared";
  int groups = 0, ent8_groups = 0, damaged = 0, rejected = 0, x8able = 0;
  for (const auto& p : compared_files()) {
    const auto f = wctest::read_file(p);
    auto hd = parse_safetensors_header(f.data(), f.size(), f.size(), p.string());
    ASSERT_TRUE(hd.ok()) << hd.status().ToString();
    for (const auto& t : hd->tensors) {
      // Tensors of several chunks (larger than kMaxTensor under the
      // sanitizers); enough groups once 16 are compared.
      if (t.nbytes() > (8u << 20) || groups >= 16) continue;
      auto r = encode_both_table_kinds(t, f.data() + hd->data_start + t.begin, &x8able);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      const EncodedTensor& et = *r;
      if (et.model.kind != ModelKind::kFloat || et.model.fp.elem_bytes != 2) continue;
      std::shared_ptr<const TensorModel::VectorTables> hold;
      const ModelView mv = et.model.view(&hold);
      if (!mv.slot_all && !mv.ent8) continue;
      for (uint64_t i0 = 0; i0 + 1 < et.chunks.size(); i0 += 3) {
        const int n = i0 + 2 < et.chunks.size() && (i0 / 3) % 2 == 0 ? 3 : 2;
        Parsed ps[3];
        ChunkView cv[3];
        bool ok = true;
        for (int j = 0; j < n && ok; ++j) {
          const auto& c = et.chunks[i0 + j];
          ok = c.method == ChunkMethod::kModel && parse_payload(et.geom, i0 + j, c.payload, &ps[j]);
          cv[j] = chunk_view(et.geom, i0 + j);
          ok = ok && cv[j].h == cv[0].h && cv[j].w == cv[0].w;
        }
        if (!ok) continue;
        const uint64_t nel = uint64_t{cv[0].h} * cv[0].w;
        const std::string what = p.filename().string() + ": " + t.name + " chunks " + std::to_string(i0) + "+" +
                                 std::to_string(n);
        // The reference's bytes (and verdicts, for the damaged streams).
        std::vector<uint16_t> e(nel);
        std::vector<uint8_t> sm(nel);
        std::vector<uint8_t> ref[3], out[3], lm[3];
        const ModelView ms[3] = {mv, mv, mv};
        for (int v = -1; v < 3; ++v) {  // -1: intact; else damage: a flipped word, a cut of 2 bytes, of 64
          std::vector<uint8_t> bad(ps[1].rans, ps[1].rans + ps[1].rans_len);
          uint32_t bad_len = ps[1].rans_len;
          if (v == 0) bad[bad_len / 2] ^= 0x5a;
          if (v >= 1) {
            const uint32_t cut = v == 1 ? 2 : 64;
            if (bad_len < 4 * kLanes + cut) continue;
            bad_len -= cut;
          }
          GroupSide side[3];
          bool ref_ok = true;
          for (int j = 0; j < n; ++j) {
            const uint8_t* rs = j == 1 ? bad.data() : ps[j].rans;
            const uint32_t rl = j == 1 ? bad_len : ps[j].rans_len;
            ref[j].assign(2 * nel, 0x11);
            out[j].assign(2 * nel, 0x22);
            lm[j].assign(simd_lane_major_bytes(cv[0]), 0);
            ref_ok &= decode_float_chunk(mv, cv[j], rs, rl, ps[j].raw, ps[j].raw_len, ref[j].data(), e.data(),
                                         sm.data(), ps[j].tail);
            side[j] = GroupSide{nullptr, rs, rl, ps[j].raw, ps[j].raw_len, ps[j].tail, out[j].data(), lm[j].data(),
                                cv[j].col0, cv[j].row0};
          }
          if (v < 0) {
            ASSERT_TRUE(ref_ok) << what;
          }
          const int g = decode_float_group_hwy(ms, cv[0], side, n);
          if (g < 0) break;  // not a loop this decoder groups
          EXPECT_EQ(ref_ok ? 1 : 0, g) << what << " damage " << v;
          if (ref_ok && g == 1) {
            for (int j = 0; j < n; ++j) EXPECT_EQ(ref[j], out[j]) << what << " chunk " << j << " damage " << v;
          }
          if (v < 0) {
            ++groups;
            ent8_groups += mv.ent8 != nullptr;
          } else {
            ++damaged;
            rejected += !ref_ok;
          }
        }
        if (HasFailure()) return;
      }
    }
  }
  if (!vector_decoder_available()) GTEST_SKIP() << "scalar path forced: no vector tables, nothing compared";
  EXPECT_GT(groups, 10);
  EXPECT_GT(ent8_groups, 1) << "groups of chunks whose tables are read as 1/8-slot entries";
  EXPECT_GT(groups - ent8_groups, 1) << "groups of chunks read from 4096-slot tables";
  EXPECT_GT(rejected, damaged / 2) << "the damage should mostly be detected";
}

// Reference and the Highway (AVX2 / NEON) ternary decoder on one ternary chunk
// and on damaged copies of its stream: the same bytes, the same accept /
// reject.
void compare_tern_chunk(const ModelView& mv, const ChunkView& cv, const Parsed& ps, const uint8_t* map, uint64_t xxh3,
                        uint64_t decoded_size, const std::string& what, Counts* k) {
  const uint64_t n = uint64_t{cv.h} * cv.w;
  std::vector<int32_t> res(n), tile(kTile * kTile);
  std::vector<uint8_t> lm(simd_lane_major_bytes(cv));
  std::vector<uint8_t> ref(decoded_size, 0x11), hw(decoded_size, 0x22);
  ASSERT_TRUE(decode_int_residuals(mv, cv, ps.rans, ps.rans_len, res.data()) &&
              int_finish_chunk(mv, cv, map, ref.data(), res.data(), tile.data()))
      << what;
  ASSERT_EQ(chunk_hash(ref.data(), ref.size()), xxh3) << what;
  const int h = decode_tern_chunk_hwy(mv, cv, map, ps.rans, ps.rans_len, hw.data(), lm.data());
  if (h < 0) return;
  ASSERT_EQ(h, 1) << what << ": the Highway decoder rejected a valid chunk";
  ASSERT_EQ(ref, hw) << what << ": the Highway decoder differs from the reference";
  ++k->chunks;
  // Damage: one byte flipped in the lane states, early, middle and last
  // words; a truncated stream (shorter by 2 and by 64 bytes); an odd
  // length; the lane states alone.
  const uint32_t L = ps.rans_len;
  const uint32_t spots[] = {3, 4 * kLanes + 1, L / 3, L / 2, L - 3, 4 * kLanes + 7, L - 1};
  for (int v = 0; v < 11; ++v) {
    std::vector<uint8_t> bad(ps.rans, ps.rans + L);
    uint32_t len = L;
    if (v < 7) {
      bad[spots[v] % L] ^= static_cast<uint8_t>(0x5a + v);
    } else if (v < 9) {
      const uint32_t cut = v == 7 ? 2 : 64;
      if (len < 4 * kLanes + cut) continue;
      len -= cut;
    } else if (v == 9) {
      len -= 1;
    } else {
      len = 4 * kLanes;
    }
    const bool r_ok = decode_int_residuals(mv, cv, bad.data(), len, res.data()) &&
                      int_finish_chunk(mv, cv, map, ref.data(), res.data(), tile.data());
    const int h_ok = decode_tern_chunk_hwy(mv, cv, map, bad.data(), len, hw.data(), lm.data());
    EXPECT_EQ(r_ok ? 1 : 0, h_ok) << what << " damage " << v << ": Highway decoder and reference disagree";
    if (r_ok && h_ok == 1) {
      EXPECT_EQ(ref, hw) << what << " damage " << v;
    }
    ++k->damaged;
    k->rejected += !r_ok;
  }
}

TEST(CpuPaths, HighwayTernaryEqualsReferenceOnRealFiles) {
  if (!cpu_path_supported(hwy_path())) GTEST_SKIP() << "no Highway decoder path (avx2, neon) here: not compared";
  Counts k;
  int modes = 0;  // bit m: a chunk of nbr_mode m decoded
  bool scaled = false;
  bool f1_decoded = false;  // a format 1 model's chunk decoded
  const auto covered = [&] {
    return kStopWhenCovered && k.chunks > 50 && (modes & 0xE) == 0xE && scaled && f1_decoded &&
           k.rejected > k.damaged / 2;
  };
  for (const auto& p : compared_files()) {
    if (p.filename().string().find("ternary") == std::string::npos) continue;
    const auto f = wctest::read_file(p);
    auto hd = parse_safetensors_header(f.data(), f.size(), f.size(), p.string());
    ASSERT_TRUE(hd.ok()) << hd.status().ToString();
    for (const auto& t : hd->tensors)
      for (bool f21 : {true, false}) {  // the models of format 2.1+ and of format 1
      if (covered()) break;
      if (t.nbytes() > kMaxTensor) continue;
      EncodeOptions opt = compared_options();
      opt.format_2_1 = f21;
      auto r = encode_tensor(t, f.data() + hd->data_start + t.begin, AuxInput{}, opt);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      const EncodedTensor& et = *r;
      if (et.model.kind != ModelKind::kInt || et.model.ip.sub != kIntTernary) continue;
      std::shared_ptr<const TensorModel::VectorTables> hold;
      const ModelView mv = et.model.view(&hold);
      for (uint64_t i = 0; i < et.chunks.size(); ++i) {
        const auto& c = et.chunks[i];
        if (c.method != ChunkMethod::kModel) continue;
        Parsed ps;
        ASSERT_TRUE(parse_payload(et.geom, i, c.payload, &ps));
        const uint8_t* map = (c.payload[0] & 1) ? c.payload.data() + 1 : nullptr;
        const ChunkView cv = chunk_view(et.geom, i);
        const int before = k.chunks;
        compare_tern_chunk(mv, cv, ps, map, c.xxh3, c.decoded_size,
                           p.filename().string() + ": " + t.name + " (" + et.model.describe() + ") chunk " +
                               std::to_string(i),
                           &k);
        if (HasFatalFailure()) return;
        if (k.chunks > before) {
          modes |= 1 << mv.ip.nbr_mode;
          scaled |= mv.ip.ns > 1;
          f1_decoded |= !f21;
        }
      }
    }
  }
  if (k.chunks == 0 && modes == 0) GTEST_SKIP() << "no ternary model chunks in " << wctest::data_dir();
  std::printf("Highway ternary decoder: %d chunks (%d damaged streams, %d rejected), nbr_modes 0x%x%s\n", k.chunks,
              k.damaged, k.rejected, modes, covered() ? " (stopped once covered)" : "");
  EXPECT_GT(k.chunks, 50);
  EXPECT_TRUE(f1_decoded) << "no format 1 ternary model decoded";
  // isnet-medium.rtn-ternary: column-phase, kernel and sign-neighbour
  // contexts, some with scale classes.
  EXPECT_EQ(modes & 0xE, 0xE) << "nbr_modes decoded: " << modes;
  EXPECT_TRUE(scaled);
  EXPECT_GT(k.rejected, k.damaged / 2) << "the damage should mostly be detected";
}

// Synthetic ternary tensors for the context forms the real files lack:
// i.i.d. codes and codes whose density follows the row and the column
// (scale classes), with format 2.0 models (nbr_modes 0, 1) and with 2.1+
// models; conv-like rows (3x3 kernels flattened) for the periodic forms;
// narrow shapes whose lanes do not start on a byte.
TEST(CpuPaths, HighwayTernaryEqualsReferenceOnSyntheticTensors) {
  if (!cpu_path_supported(hwy_path())) GTEST_SKIP() << "no Highway decoder path (avx2, neon) here: not compared";
  wctest::SyntheticTernaryGen synth(3);
  Counts k;
  std::set<int> forms;  // 16 x nbr_mode + (ns > 1) + 2 (nb > 1)
  const uint64_t shapes[][2] = {{96, 576}, {64, 36}, {40, 1000}, {7, 4096}};
  for (int gen = 0; gen < 3; ++gen)
    for (const auto& shape : shapes)
      for (bool f21 : {false, true}) {
        const uint64_t rows = shape[0], cols = shape[1];
        const wctest::SyntheticTernary st = synth.next(rows, cols, gen);
        EncodeOptions opt;
        opt.chunk_bytes = 4096;
        opt.format_2_1 = f21;
        auto r = encode_tensor(st.info, st.bytes.data(), AuxInput{}, opt);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        const EncodedTensor& et = *r;
        if (et.model.kind != ModelKind::kInt || et.model.ip.sub != kIntTernary) continue;
        std::shared_ptr<const TensorModel::VectorTables> hold;
        const ModelView mv = et.model.view(&hold);
        for (uint64_t i = 0; i < et.chunks.size(); ++i) {
          const auto& c = et.chunks[i];
          if (c.method != ChunkMethod::kModel) continue;
          Parsed ps;
          ASSERT_TRUE(parse_payload(et.geom, i, c.payload, &ps));
          const uint8_t* map = (c.payload[0] & 1) ? c.payload.data() + 1 : nullptr;
          const ChunkView cv = chunk_view(et.geom, i);
          const int before = k.chunks;
          compare_tern_chunk(mv, cv, ps, map, c.xxh3, c.decoded_size,
                             "gen " + std::to_string(gen) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                                 " " + et.model.describe() + " chunk " + std::to_string(i),
                             &k);
          if (HasFatalFailure()) return;
          if (k.chunks > before) forms.insert(16 * mv.ip.nbr_mode + (mv.ip.ns > 1) + 2 * (mv.ip.nb > 1));
        }
      }
  std::string seen;
  for (int f : forms) seen += " " + std::to_string(f);
  EXPECT_GT(k.chunks, 10);
  // Activity contexts (nbr_mode 0) with one and with several activity
  // classes, with scale classes; column-phase contexts (2).
  EXPECT_TRUE(forms.count(1)) << seen;
  EXPECT_TRUE(forms.count(3)) << seen;
  EXPECT_TRUE(forms.count(32) || forms.count(33)) << seen;
  EXPECT_GT(k.rejected, k.damaged / 2) << "the damage should mostly be detected";
  std::printf("ternary forms decoded (16 x nbr_mode + scaled):%s; %d chunks, %d damaged copies\n", seen.c_str(),
              k.chunks, k.damaged);
}

// Reference and the Highway (AVX2 / NEON) int decoder on one int chunk and on damaged
// copies of its stream.
void compare_int_chunk(const ModelView& mv, const ChunkView& cv, const Parsed& ps, uint64_t xxh3,
                       uint64_t decoded_size, const std::string& what, Counts* k) {
  const uint64_t n = uint64_t{cv.h} * cv.w;
  std::vector<int32_t> res(n), tmp(kTile * kTile);
  std::vector<uint8_t> lm(simd_lane_major_bytes(cv));
  std::vector<uint8_t> ref(decoded_size, 0x11), hw(decoded_size, 0x22);
  auto reference = [&](const uint8_t* rans, uint32_t len) {
    return decode_int_residuals(mv, cv, rans, len, res.data()) &&
           int_finish_chunk(mv, cv, ps.map, ref.data(), res.data(), tmp.data());
  };
  ASSERT_TRUE(reference(ps.rans, ps.rans_len)) << what;
  ASSERT_EQ(chunk_hash(ref.data(), ref.size()), xxh3) << what;
  const int h = decode_int_chunk_hwy(mv, cv, ps.map, ps.rans, ps.rans_len, hw.data(), lm.data());
  if (h < 0) return;
  ASSERT_EQ(h, 1) << what << ": the Highway decoder rejected a valid chunk";
  ASSERT_EQ(ref, hw) << what << ": the Highway decoder differs from the reference";
  ++k->chunks;
  k->ent8 += mv.ent8 != nullptr;
  k->u8_slots += !mv.ent8 && mv.ip.sub != kIntI8;
  // Damage: one byte flipped in the lane states, early, middle and last
  // words; a truncated stream (shorter by 2 and by 64 bytes); an odd
  // length.
  const uint32_t L = ps.rans_len;
  const uint32_t spots[] = {3, 4 * kLanes + 1, L / 3, L / 2, L - 3};
  for (int v = 0; v < 8; ++v) {
    std::vector<uint8_t> bad(ps.rans, ps.rans + L);
    uint32_t len = L;
    if (v < 5) {
      bad[spots[v] % L] ^= static_cast<uint8_t>(0x5a + v);
    } else {
      const uint32_t cut = v == 5 ? 2 : (v == 6 ? 64 : 1);
      if (len < 4 * kLanes + cut) continue;
      len -= cut;
    }
    const bool r_ok = reference(bad.data(), len);
    const int h_ok = decode_int_chunk_hwy(mv, cv, ps.map, bad.data(), len, hw.data(), lm.data());
    EXPECT_EQ(r_ok ? 1 : 0, h_ok) << what << " damage " << v << ": Highway decoder and reference disagree";
    if (r_ok && h_ok == 1) {
      EXPECT_EQ(ref, hw) << what << " damage " << v;
    }
    ++k->damaged;
    k->rejected += !r_ok;
  }
  // uint8 and 4-bit codes under other centers: values that leave the
  // code range (rejected when packing) must be rejected alike.
  if (mv.ip.sub == kIntU8 || mv.ip.sub == kIntNibble) {
    for (int center : {0, 3, 15, 200, 255}) {
      if (mv.ip.sub == kIntNibble && center > 15) continue;
      ModelView m2 = mv;
      m2.ip.center = static_cast<uint8_t>(center);
      const bool r_ok = decode_int_residuals(m2, cv, ps.rans, ps.rans_len, res.data()) &&
                        int_finish_chunk(m2, cv, ps.map, ref.data(), res.data(), tmp.data());
      const int h_ok = decode_int_chunk_hwy(m2, cv, ps.map, ps.rans, ps.rans_len, hw.data(), lm.data());
      EXPECT_EQ(r_ok ? 1 : 0, h_ok) << what << " center " << center << ": Highway decoder and reference disagree";
      if (r_ok && h_ok == 1) {
        EXPECT_EQ(ref, hw) << what << " center " << center;
      }
      ++k->centers;
      k->center_ok += r_ok;
    }
  }
}

// The Highway int decoder's groups (decode_int_group_hwy) on n chunks of one
// tensor: the reference's bytes, and 0 when one member's stream is
// damaged so that the reference rejects it.
void compare_int_group(const ModelView& mv, const ChunkView* cvs, const Parsed* ps, int n, const std::string& what,
                       int* groups, int* scaled) {
  std::vector<std::vector<uint8_t>> ref(n), hw(n), lm(n);
  std::vector<int32_t> res(uint64_t{cvs[0].h} * cvs[0].w), tmp(kTile * kTile);
  GroupSide sd[3];
  for (int i = 0; i < n; ++i) {
    const uint64_t bytes = uint64_t{cvs[i].h} * cvs[i].w / int_codes_per_byte(mv.ip.sub);
    ref[i].assign(bytes, 0x11);
    hw[i].assign(bytes, 0x22);
    lm[i].assign(simd_lane_major_bytes(cvs[i]), 0);
    ASSERT_TRUE(decode_int_residuals(mv, cvs[i], ps[i].rans, ps[i].rans_len, res.data()) &&
                int_finish_chunk(mv, cvs[i], nullptr, ref[i].data(), res.data(), tmp.data()))
        << what;
    sd[i] = GroupSide{nullptr, ps[i].rans, ps[i].rans_len, nullptr, 0, false, hw[i].data(), lm[i].data(),
                      cvs[i].col0, cvs[i].row0};
  }
  const std::vector<ModelView> ms(n, mv);
  const int r = decode_int_group_hwy(ms.data(), cvs[0], sd, n);
  if (r < 0) return;
  ASSERT_EQ(r, 1) << what << ": the Highway group decoder rejected valid chunks";
  for (int i = 0; i < n; ++i) ASSERT_EQ(ref[i], hw[i]) << what << " member " << i << ": differs from the reference";
  ++*groups;
  *scaled += mv.ip.ns > 1;
  // The last member's stream damaged in the middle.
  std::vector<uint8_t> bad(ps[n - 1].rans, ps[n - 1].rans + ps[n - 1].rans_len);
  bad[bad.size() / 2] ^= 0x5a;
  const bool r_ok = decode_int_residuals(mv, cvs[n - 1], bad.data(), ps[n - 1].rans_len, res.data()) &&
                    int_finish_chunk(mv, cvs[n - 1], nullptr, ref[n - 1].data(), res.data(), tmp.data());
  sd[n - 1].rans = bad.data();
  const int rb = decode_int_group_hwy(ms.data(), cvs[0], sd, n);
  EXPECT_EQ(r_ok ? 1 : 0, rb) << what << " (damaged member): Highway group and reference disagree";
}

// compare_int_group on every run of 2 and of 3 consecutive model-coded
// chunks of et of one size without tile maps; *ragged counts the groups
// the Highway decoder took whose lanes differ in size.
void compare_int_groups_of(const EncodedTensor& et, const ModelView& mv, const std::string& what, int* groups,
                           int* scaled_groups, int* ragged) {
  for (int gn = 2; gn <= 3; ++gn)
    for (uint64_t i = 0; i + gn <= et.chunks.size(); i += gn) {
      ChunkView cvs[3];
      Parsed ps[3];
      bool same = true;
      for (int q = 0; q < gn && same; ++q) {
        const auto& c = et.chunks[i + q];
        same = c.method == ChunkMethod::kModel && parse_payload(et.geom, i + q, c.payload, &ps[q]) && !ps[q].map &&
               !ps[q].raw_len;
        cvs[q] = chunk_view(et.geom, i + q);
        same = same && cvs[q].h == cvs[0].h && cvs[q].w == cvs[0].w;
      }
      if (!same) continue;
      const int before = *groups;
      compare_int_group(mv, cvs, ps, gn, what + " group at " + std::to_string(i), groups, scaled_groups);
      if (::testing::Test::HasFatalFailure()) return;
      bool even = true;
      for (uint32_t l = 1; l < kLanes; ++l) {
        const LaneRect a = lane_rect(cvs[0].h, cvs[0].w, 0), b = lane_rect(cvs[0].h, cvs[0].w, l);
        even &= a.w == b.w && a.h == b.h;
      }
      *ragged += *groups > before && !even;
    }
}

TEST(CpuPaths, HighwayIntEqualsReferenceOnRealFiles) {
  if (!cpu_path_supported(hwy_path())) GTEST_SKIP() << "no Highway decoder path (avx2, neon) here: not compared";
  Counts k;
  int int_chunks = 0, groups = 0, scaled_groups = 0, u8_models = 0;
  const auto covered = [&] {
    return kStopWhenCovered && !small_files_only() && k.chunks > 50 && groups > 10 && scaled_groups > 0 &&
           k.center_ok > 0 && k.center_ok < k.centers && k.rejected > k.damaged / 2 && k.ent8 > 10 &&
           k.u8_slots > 10;
  };
  for (const auto& p : compared_files()) {
    const auto f = wctest::read_file(p);
    auto hd = parse_safetensors_header(f.data(), f.size(), f.size(), p.string());
    ASSERT_TRUE(hd.ok()) << hd.status().ToString();
    for (const auto& t : hd->tensors) {
      if (covered()) break;
      if (t.nbytes() > kMaxTensor) continue;
      // Under the sanitizers only integer tensors are encoded (a float
      // tensor never gets an int model; encoding it costs seconds there).
      const bool float_dtype = t.dtype == DType::kF16 || t.dtype == DType::kBF16 || t.dtype == DType::kF32 ||
                               t.dtype == DType::kF64;
      if (kStopWhenCovered && float_dtype) continue;
      auto r = encode_both_table_kinds(t, f.data() + hd->data_start + t.begin, &u8_models);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      const EncodedTensor& et = *r;
      if (et.model.kind != ModelKind::kInt) continue;
      std::shared_ptr<const TensorModel::VectorTables> hold;
      const ModelView mv = et.model.view(&hold);
      if (mv.zp) continue;  // zero points: the tensor's aux input is not supplied here
      // Groups of 2 and 3 consecutive model-coded chunks of one size and
      // no tile map.
      int ragged_groups = 0;
      compare_int_groups_of(et, mv, p.filename().string() + ": " + t.name, &groups, &scaled_groups, &ragged_groups);
      if (HasFatalFailure()) return;
      for (uint64_t i = 0; i < et.chunks.size(); ++i) {
        const auto& c = et.chunks[i];
        if (c.method != ChunkMethod::kModel) continue;
        Parsed ps;
        ASSERT_TRUE(parse_payload(et.geom, i, c.payload, &ps));
        if (ps.raw_len) continue;
        const ChunkView cv = chunk_view(et.geom, i);
        ++int_chunks;
        compare_int_chunk(mv, cv, ps, c.xxh3, c.decoded_size,
                          p.filename().string() + ": " + t.name + " chunk " + std::to_string(i), &k);
        if (HasFatalFailure()) return;
      }
    }
  }
  if (!vector_decoder_available()) GTEST_SKIP() << "scalar path forced: no vector tables, nothing compared";
  std::printf("Highway int decoder: %d of %d int chunks (%d from 1/8-slot entries, %d uint8 / 4-bit from slot "
              "tables; %d damaged streams, %d rejected), %d groups (%d with scale classes), %d of %d under other "
              "centers accepted%s\n",
              k.chunks, int_chunks, k.ent8, k.u8_slots, k.damaged, k.rejected, groups, scaled_groups, k.center_ok,
              k.centers, covered() ? " (stopped once covered)" : "");
  if (small_files_only()) {
    // stories260K's int tensors: 17 model-coded chunks at 4 KiB, no two
    // consecutive of one size, no center under which a code stays in
    // range; the full run (every file) covers groups and centers.
    EXPECT_GT(k.chunks, 5);
  } else {
    EXPECT_GT(k.chunks, 50);
    EXPECT_GT(k.ent8, 10) << "isnet-medium.rtn-int4's 4-bit codes: 9-bit tables, read as 1/8-slot entries";
    EXPECT_GT(k.u8_slots, 10) << "4-bit codes with 12-bit tables";
    EXPECT_GT(groups, 10);  // 20 with the sanitizers' 1 MiB tensor limit
    EXPECT_GT(scaled_groups, 0);  // groups of chunks with scale classes (row or column classes)
    // Both outcomes occur under the other centers.
    EXPECT_GT(k.centers, 0);
    EXPECT_GT(k.center_ok, 0);
    EXPECT_LT(k.center_ok, k.centers);
  }
  EXPECT_GT(k.rejected, k.damaged / 2) << "the damage should mostly be detected";
}

// The Highway int decoder on chunks whose lanes differ in size (ragged
// lanes: widths that 32 lanes do not divide, as in the streams GGUF blocks
// are split into), one by one and in groups of 2 and 3. Codes from stories260K's real float weights, quantized
// per row: 3- and 4-bit codes one per byte (uint8) and int8 codes, laid
// out as rows of 97, 279 and 324 codes, in chunks of 4 KiB.
TEST(CpuPaths, HighwayIntRaggedLanes) {
  if (!cpu_path_supported(hwy_path())) GTEST_SKIP() << "no Highway decoder path (avx2, neon) here: not compared";
  const fs::path p = wctest::data_dir() / "stories260K.f32.safetensors";
  if (!fs::exists(p)) GTEST_SKIP() << p << " not found";
  const auto f = wctest::read_file(p);
  auto hd = parse_safetensors_header(f.data(), f.size(), f.size(), p.string());
  ASSERT_TRUE(hd.ok()) << hd.status().ToString();
  // The weights of the 2-D tensors, in file order.
  std::vector<float> w;
  for (const auto& t : hd->tensors) {
    if (t.dtype != DType::kF32 || t.shape.size() != 2) continue;
    const size_t n = t.nbytes() / 4, at = w.size();
    w.resize(at + n);
    std::memcpy(w.data() + at, f.data() + hd->data_start + t.begin, n * 4);
  }
  ASSERT_GT(w.size(), 100000u);
  Counts k;
  int ragged = 0, scaled = 0, nib = 0, groups = 0, scaled_groups = 0, ragged_groups = 0;
  for (const uint32_t cols : {97u, 279u, 324u}) {
    for (const int bits : {3, 4, 8, -3, -4}) {  // negative: 12-bit tables (EncodeOptions::x8_tables off)
      const bool x8 = bits > 0;
      const int nbits = bits > 0 ? bits : -bits;
      const bool nibble_codes = nbits < 8;
      const uint32_t rows = static_cast<uint32_t>(std::min<size_t>(w.size() / cols, 600));
      std::vector<uint8_t> codes(uint64_t{rows} * cols);
      for (uint32_t r = 0; r < rows; ++r) {
        float mx = 1e-12f;
        for (uint32_t c = 0; c < cols; ++c) mx = std::max(mx, std::fabs(w[uint64_t{r} * cols + c]));
        for (uint32_t c = 0; c < cols; ++c) {
          const float x = w[uint64_t{r} * cols + c] / mx;
          codes[uint64_t{r} * cols + c] =
              nibble_codes ? static_cast<uint8_t>(std::clamp(
                                 static_cast<int>(std::lround(x * ((1 << (nbits - 1)) - 1))) + (1 << (nbits - 1)), 0,
                                 (1 << nbits) - 1))
                           : static_cast<uint8_t>(static_cast<int8_t>(std::lround(x * 127)));
        }
      }
      TensorInfo info;
      info.name = "codes";
      info.dtype = nibble_codes ? DType::kU8 : DType::kI8;
      info.shape = {rows, cols};
      info.end = codes.size();
      EncodeOptions o;
      o.chunk_bytes = 4 * 1024;  // many chunks, each with its own lane geometry
      o.x8_tables = x8;
      auto r = encode_tensor(info, codes.data(), AuxInput{}, o);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      const EncodedTensor& et = *r;
      if (et.model.kind != ModelKind::kInt) continue;
      std::shared_ptr<const TensorModel::VectorTables> hold;
      const ModelView mv = et.model.view(&hold);
      // Groups of 2 and 3 consecutive chunks of one (ragged) size.
      compare_int_groups_of(et, mv, std::to_string(cols) + " " + std::to_string(bits) + "-bit", &groups,
                            &scaled_groups, &ragged_groups);
      if (HasFatalFailure()) return;
      for (uint64_t i = 0; i < et.chunks.size(); ++i) {
        const auto& c = et.chunks[i];
        if (c.method != ChunkMethod::kModel) continue;
        Parsed ps;
        ASSERT_TRUE(parse_payload(et.geom, i, c.payload, &ps));
        const ChunkView cv = chunk_view(et.geom, i);
        const int before = k.chunks;
        compare_int_chunk(mv, cv, ps, c.xxh3, c.decoded_size,
                          std::to_string(cols) + " " + std::to_string(bits) + "-bit " + et.model.describe() +
                              " chunk " + std::to_string(i),
                          &k);
        if (HasFatalFailure()) return;
        if (k.chunks == before) continue;
        bool same = true;
        for (uint32_t l = 1; l < kLanes; ++l) {
          const LaneRect a = lane_rect(cv.h, cv.w, 0), b = lane_rect(cv.h, cv.w, l);
          same &= a.w == b.w && a.h == b.h;
        }
        ragged += !same;
        scaled += !same && mv.ip.ns > 1;
        nib += !same && nbits < 8;
      }
    }
  }
  std::printf("Highway int decoder: %d chunks, %d with ragged lanes (%d with scale classes, %d of 3- or 4-bit "
              "codes; %d from 1/8-slot entries, %d uint8 from slot tables); %d damaged streams, %d rejected; %d "
              "groups of ragged chunks (%d with scale classes)\n",
              k.chunks, ragged, scaled, nib, k.ent8, k.u8_slots, k.damaged, k.rejected, ragged_groups, scaled_groups);
  EXPECT_GT(ragged_groups, 20);
  EXPECT_GT(scaled_groups, 2);
  EXPECT_GT(ragged, 50);
  EXPECT_GT(scaled, 5);
  EXPECT_GT(nib, 20);
  EXPECT_GT(k.ent8, 20) << "uint8 codes of 3 and 4 bits: 9-bit tables, read as 1/8-slot entries";
  EXPECT_GT(k.u8_slots, 20) << "uint8 codes of 3 and 4 bits with 12-bit tables (4096-slot tables)";
  EXPECT_GT(k.rejected, k.damaged / 2) << "the damage should mostly be detected";
}

// The 1/8-slot entries (ModelView::ent8, ent8_1) against the reference's
// tables, slot by slot: the symbol, its frequency and the slot's offset in
// it. Real tensors whose tables the encoder writes at 9 bits (multiples of
// 8): 4-bit codes of isnet-medium.rtn-int4 and floats of
// isnet-medium.f16 and silero_vad_16k.bf16 (exponent and sign / mantissa
// tables).
void expect_entries_agree(const uint32_t* ent, const DecTable* ref, const std::vector<FreqTable>& ts,
                          const std::string& what, uint64_t* slots) {
  for (uint32_t c = 0; c < ts.size(); ++c) {
    uint32_t total = 0;
    for (uint16_t q : ts[c].freq) total += q;
    if (total == 0) continue;  // an unused context
    for (uint32_t slot = 0; slot < 4096; ++slot) {
      const uint32_t e = ent[c * 512 + slot / 8];
      const uint32_t sym = ref[c].sym[slot], fs = ref[c].fs[sym];
      ASSERT_EQ(e & 0xFF, sym) << what << " context " << c << " slot " << slot;
      ASSERT_EQ((e >> 8 & 4095) + 1, fs & 0xFFFF) << what << " context " << c << " slot " << slot;
      ASSERT_EQ((slot + (e >> 20)) & 4095, slot - (fs >> 16)) << what << " context " << c << " slot " << slot;
      ++*slots;
    }
  }
}

TEST(CpuPaths, EntriesAgreeWithTheReferenceTables) {
  if (!cpu_path_supported(hwy_path())) GTEST_SKIP() << "no Highway decoder path (avx2, neon) here: no entries";
  int ints = 0, floats = 0, sm_tables = 0;
  uint64_t slots = 0;
  for (const char* name : {"isnet-medium.rtn-int4", "isnet-medium.f16", "silero_vad_16k.bf16"}) {
    const fs::path p = wctest::data_dir() / (std::string(name) + ".safetensors");
    if (!fs::exists(p)) GTEST_SKIP() << p << " not found";
    const auto f = wctest::read_file(p);
    auto hd = parse_safetensors_header(f.data(), f.size(), f.size(), p.string());
    ASSERT_TRUE(hd.ok()) << hd.status().ToString();
    int here = 0;
    for (const auto& t : hd->tensors) {
      if (here >= 4 || t.nbytes() < 16384 || t.nbytes() > (1u << 20)) continue;
      auto r = encode_tensor(t, f.data() + hd->data_start + t.begin, AuxInput{}, compared_options());
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      const TensorModel& m = r->model;
      const bool nibble = m.kind == ModelKind::kInt && m.ip.sub == kIntNibble && !m.ip.zgroup;
      if (!nibble && m.kind != ModelKind::kFloat) continue;
      std::shared_ptr<const TensorModel::VectorTables> hold;
      const ModelView mv = m.view(&hold, nullptr, 0, TensorModel::TableUse::kAll);
      if (!mv.ent8) continue;  // a float tensor whose 9-bit tables cost too much
      const std::string what = std::string(name) + ": " + t.name + " " + m.describe();
      expect_entries_agree(mv.ent8, mv.t0, m.t0, what + " t0", &slots);
      if (HasFatalFailure()) return;
      if (!m.t1.empty()) {
        ASSERT_NE(mv.ent8_1, nullptr) << what;
        expect_entries_agree(mv.ent8_1, mv.t1, m.t1, what + " t1", &slots);
        if (HasFatalFailure()) return;
        ++sm_tables;
      }
      ++here;
      (nibble ? ints : floats) += 1;
    }
  }
  EXPECT_EQ(ints, 4);
  EXPECT_EQ(floats, 8);
  EXPECT_GT(sm_tables, 0) << "float models with sign / mantissa tables";
  EXPECT_GT(slots, 4096u * 30);
}

// ------------------------------------------------------------ whole files

// The path quoted for the shell (no quote characters in test paths).
std::string q(const fs::path& p) {
  std::string out = "'";
  out += p.string();
  out += '\'';
  return out;
}

TEST(CpuPaths, ToolReportsPath) {
  std::string out;
  ASSERT_EQ(wctest::run_command("WCODEC_CPU=scalar " + std::string(WCODEC_TOOL) + " --version", &out), 0) << out;
  EXPECT_NE(out.find("decoder path: scalar"), std::string::npos) << out;
  ASSERT_EQ(wctest::run_command("WCODEC_CPU=bogus " + std::string(WCODEC_TOOL) + " --version", &out), 0) << out;
  EXPECT_NE(out.find(std::string("decoder path: ") + cpu_path_name(cpu_path_best())), std::string::npos) << out;
  EXPECT_NE(out.find("bogus"), std::string::npos) << out;
  for (CpuPath p : {CpuPath::kAvx2, CpuPath::kAvx512, CpuPath::kNeon}) {
    ASSERT_EQ(wctest::run_command(std::string("WCODEC_CPU=") + cpu_path_name(p) + " " + WCODEC_TOOL + " --version",
                                  &out),
              0)
        << out;
    const CpuPath eff = resolve_cpu_path(cpu_path_name(p), nullptr).effective;
    EXPECT_NE(out.find(std::string("decoder path: ") + cpu_path_name(eff)), std::string::npos) << out;
  }
}

// Every real file decoded by the tool on every path this CPU runs equals
// the original.
TEST(CpuPaths, EveryPathDecodesRealFiles) {
  wctest::ScratchDir dir;
  int files = 0;
  for (const auto& p : compared_files()) {
#if WCODEC_ASAN
    if (fs::file_size(p) > (2u << 20)) continue;
#endif
    const auto orig = wctest::read_file(p);
    const std::string want = wctest::sha256_hex(orig);
    const fs::path enc = dir / (p.stem().string() + ".wcodec");
    std::string out;
    ASSERT_EQ(wctest::run_command(std::string(WCODEC_TOOL) + " encode -q " + q(p) + " " + q(enc) + " 2>&1", &out), 0)
        << out;
    for (CpuPath path : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512, CpuPath::kNeon}) {
      if (!cpu_path_supported(path)) continue;
      const fs::path dec = dir / (p.stem().string() + "." + cpu_path_name(path) + ".out");
      ASSERT_EQ(wctest::run_command(std::string("WCODEC_CPU=") + cpu_path_name(path) + " " + WCODEC_TOOL +
                                        " decode " + q(enc) + " " + q(dec) + " 2>&1",
                                    &out),
                0)
          << p << " on " << cpu_path_name(path) << ": " << out;
      EXPECT_EQ(wctest::sha256_hex(wctest::read_file(dec)), want) << p << " on " << cpu_path_name(path);
      fs::remove(dec);
    }
    fs::remove(enc);
    ++files;
  }
  if (files == 0) GTEST_SKIP() << "no model files in " << wctest::data_dir();
}

}  // namespace
