// tests/test_kernel_rows.cpp — kernel-row symbols (int nbr_mode 4, format
// 2.10; docs/wcodec-format.md §8.2, §9.3, vector 5): the real ternary
// convolutions of isnet-medium take them; every decoder (the reference, the
// portable one with and without its entry tables, the Highway one alone and
// in groups) decodes their chunks to the same bytes and accepts or rejects
// the same damaged streams; the model record's rules each refuse a broken
// record naming the field; a file that uses them says 2.10 and one that
// does not says less; the worked example of the format document.
// Thread-safety: single-threaded test code.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "chunk_decode.h"
#include "chunk_decode_krow.h"
#include "chunk_decode_simd.h"
#include "chunk_payload_testutil.h"
#include "checksums.h"
#include "gguf_split_testutil.h"
#include "kernel_rows_testutil.h"
#include "sanitizer.h"
#include "tensor_encode.h"
#include "testutil.h"
#include "wcodec/cpu.h"
#include "wcodec/encode.h"
#include "wcodec/reader.h"
#include "wcodec/safetensors.h"

namespace {

using namespace wcodec;
namespace fs = std::filesystem;

#ifndef WCODEC_TEST_EMULATED
#define WCODEC_TEST_EMULATED 0
#endif
// Encoding is most of these suites' time under the sanitizers and under
// qemu (the aarch64 build): a few real tensors there, every one here.
#if WCODEC_ASAN || WCODEC_TEST_EMULATED
constexpr size_t kMaxTensors = 4;
constexpr bool kWholeFiles = false;
#else
constexpr size_t kMaxTensors = 1000;
constexpr bool kWholeFiles = true;
#endif

const fs::path kTernary = "isnet-medium.rtn-ternary.safetensors";

// The file's ternary convolutions, encoded with the default options.
struct Encoded {
  std::string name;
  EncodedTensor et;
  std::vector<uint8_t> original;
};
const std::vector<Encoded>& encoded_ternary() {
  static const std::vector<Encoded> all = [] {
    std::vector<Encoded> v;
    const auto path = wctest::data_dir() / kTernary;
    if (!fs::exists(path)) return v;
    const auto f = wctest::read_file(path);
    auto hd = parse_safetensors_header(f.data(), f.size(), f.size(), path.string());
    if (!hd.ok()) return v;
    EncodeOptions opt;
    opt.chunk_bytes = 16 * 1024;  // several chunks a tensor: rows of whole kernels, last steps partial
    for (const auto& t : hd->tensors) {
      if (t.name.find("_packed") == std::string::npos || t.nbytes() < 2304) continue;
      const uint8_t* p = f.data() + hd->data_start + t.begin;
      auto r = encode_tensor(t, p, AuxInput{}, opt);
      if (!r.ok()) continue;
      if (r->model.kind != ModelKind::kInt || r->model.ip.nbr_mode != 4) continue;
      v.push_back({t.name, std::move(*r), std::vector<uint8_t>(p, p + t.nbytes())});
      if (v.size() >= kMaxTensors) break;
    }
    // The real rows hold 32 or 64 kernels, a whole number of steps; rows of
    // four kernels leave lanes idle in each chunk's last step.
    const auto four = wctest::kernel_rows_file(f);
    auto h2 = parse_safetensors_header(four.data(), four.size(), four.size(), "rows_of_four");
    if (h2.ok()) {
      const uint8_t* p = four.data() + h2->data_start + h2->tensors[0].begin;
      auto r = encode_tensor(h2->tensors[0], p, AuxInput{}, opt);
      if (r.ok()) v.push_back({"rows_of_four", std::move(*r), std::vector<uint8_t>(p, p + h2->tensors[0].nbytes())});
    }
    return v;
  }();
  return all;
}

ChunkView chunk_view(const TensorGeometry& g, uint64_t i) {
  uint64_t row0, col0, h, w;
  g.chunk_rect(i, &row0, &col0, &h, &w);
  return ChunkView{static_cast<uint32_t>(h), static_cast<uint32_t>(w), static_cast<uint32_t>(row0),
                   static_cast<uint32_t>(col0), static_cast<uint32_t>(g.cols)};
}

// The reference decoder: 1 decoded, 0 rejected.
int reference(const ModelView& mv, const ChunkView& cv, const uint8_t* rans, uint32_t len, std::vector<uint8_t>* out) {
  std::vector<int32_t> res(uint64_t{cv.h} * cv.w), tile(kTile * kTile);
  return decode_int_residuals(mv, cv, rans, len, res.data()) &&
                 int_finish_chunk(mv, cv, nullptr, out->data(), res.data(), tile.data())
             ? 1
             : 0;
}

TEST(KernelRows, RealConvolutionsTakeThemWithinOnePercent) {
  const auto path = wctest::data_dir() / kTernary;
  if (!fs::exists(path)) GTEST_SKIP() << "no " << path;
  if (!kWholeFiles) GTEST_SKIP() << "whole-file encodes: native release build only";
  // The same file with and without kernel-row symbols: smaller than zstd
  // -19 either way, at most 1% larger with them (the bound against
  // format 2.3), and far fewer rANS steps.
  const auto f = wctest::read_file(path);
  std::map<bool, uint64_t> sizes;
  for (bool rows : {true, false}) {
    EncodeConfig cfg;
    cfg.kernel_rows = rows;
    cfg.zstd_groups = false;  // the version the models need (zstd groups would say 2.11)
    auto enc = encode_safetensors(f.data(), f.size(), cfg, "isnet ternary");
    ASSERT_TRUE(enc.ok()) << enc.status().ToString();
    const std::vector<uint8_t>& out = *enc;
    sizes[rows] = out.size();
    auto rd = Reader::open_memory(out.data(), out.size(), "k");
    ASSERT_TRUE(rd.ok());
    EXPECT_EQ(wctest::format_version(**rd), rows ? "2.10" : "2.2") << "rows " << rows;
    std::vector<uint8_t> back(f.size());
    ASSERT_TRUE((*rd)->read(0, back.size(), back.data()).ok());
    EXPECT_TRUE(back == f) << "rows " << rows;
  }
  std::printf("isnet-medium.rtn-ternary: %llu bytes with kernel-row symbols, %llu without (%.4f / %.4f)\n",
              static_cast<unsigned long long>(sizes[true]), static_cast<unsigned long long>(sizes[false]),
              static_cast<double>(sizes[true]) / static_cast<double>(f.size()),
              static_cast<double>(sizes[false]) / static_cast<double>(f.size()));
  EXPECT_LE(static_cast<double>(sizes[true]), 1.01 * static_cast<double>(sizes[false]));
  EXPECT_LT(static_cast<double>(sizes[true]), 0.7463 * static_cast<double>(f.size()));  // zstd -19 (README)
}

TEST(KernelRows, EveryDecoderAgreesOnRealChunksAndDamage) {
  const auto& all = encoded_ternary();
  if (all.empty()) GTEST_SKIP() << "no kernel-row tensors from " << wctest::data_dir() / kTernary;
  int chunks = 0, damaged = 0, rejected = 0, hwy = 0, partial = 0;
  for (const auto& e : all) {
    std::shared_ptr<const TensorModel::VectorTables> hold;
    const ModelView mv = e.et.model.view(&hold, nullptr, 0, TensorModel::TableUse::kAll);
    ASSERT_NE(mv.krow_ent, nullptr) << e.name << " (" << e.et.model.describe()
                                    << "): the encoder writes frequencies in multiples of 8";
    ModelView two = mv;  // without the entry tables: the two-lookup form of both fast decoders
    two.krow_ent = nullptr;
    uint64_t at = 0;
    for (uint64_t i = 0; i < e.et.chunks.size(); ++i) {
      const auto& c = e.et.chunks[i];
      const ChunkView cv = chunk_view(e.et.geom, i);
      const uint64_t n = c.decoded_size;
      if (c.method != ChunkMethod::kModel) {
        at += n;
        continue;
      }
      wctest::ChunkPayload ps;
      ASSERT_TRUE(wctest::parse_chunk_payload(e.et.geom, i, c.payload, &ps));
      const std::string what = e.name + " chunk " + std::to_string(i);
      std::vector<uint8_t> ref(n, 0x11), out(n, 0x22);
      ASSERT_EQ(reference(mv, cv, ps.rans, ps.rans_len, &ref), 1) << what;
      ASSERT_TRUE(std::equal(ref.begin(), ref.end(), e.original.begin() + static_cast<ptrdiff_t>(at))) << what;
      ASSERT_EQ(chunk_hash(ref.data(), ref.size()), c.xxh3) << what;
      for (const ModelView* m : {static_cast<const ModelView*>(&mv), static_cast<const ModelView*>(&two)}) {
        std::fill(out.begin(), out.end(), 0x22);
        ASSERT_EQ(decode_krow_chunk_fast(*m, cv, ps.rans, ps.rans_len, out.data()), 1) << what;
        ASSERT_EQ(out, ref) << what << ": portable decoder" << (m->krow_ent ? "" : " (no entry tables)");
        std::fill(out.begin(), out.end(), 0x22);
        const int h = decode_krow_chunk_hwy(*m, cv, ps.rans, ps.rans_len, out.data());
        if (h >= 0) {
          ASSERT_EQ(h, 1) << what;
          ASSERT_EQ(out, ref) << what << ": Highway decoder" << (m->krow_ent ? "" : " (no entry tables)");
          ++hwy;
        }
      }
      partial += (uint64_t{cv.h} * cv.w / kKernRowCodes) % kLanes != 0;
      ++chunks;
      // Damage: a flipped byte in the lane states, the first words, the
      // middle and the last word; shorter by 2 and by 64 bytes; odd length;
      // the lane states alone.
      const uint32_t L = ps.rans_len;
      const uint32_t spots[] = {3, 4 * kLanes + 1, L / 3, L / 2, L - 1};
      for (int v = 0; v < 9; ++v) {
        std::vector<uint8_t> bad(ps.rans, ps.rans + L);
        uint32_t len = L;
        if (v < 5) {
          bad[spots[v] % L] ^= static_cast<uint8_t>(0x5a + v);
        } else if (v < 7) {
          const uint32_t cut = v == 5 ? 2 : 64;
          if (len < 4 * kLanes + cut) continue;
          len -= cut;
        } else {
          len = v == 7 ? L - 1 : 4 * kLanes;
        }
        std::vector<uint8_t> r(n, 0), o(n, 0);
        const int r_ok = reference(mv, cv, bad.data(), len, &r);
        for (const ModelView* m : {static_cast<const ModelView*>(&mv), static_cast<const ModelView*>(&two)}) {
          EXPECT_EQ(decode_krow_chunk_fast(*m, cv, bad.data(), len, o.data()), r_ok) << what << " damage " << v;
          if (r_ok) {
            EXPECT_EQ(o, r) << what << " damage " << v;
          }
          const int h = decode_krow_chunk_hwy(*m, cv, bad.data(), len, o.data());
          if (h >= 0) {
            EXPECT_EQ(h, r_ok) << what << " damage " << v << ": Highway decoder and reference disagree";
            if (r_ok) {
              EXPECT_EQ(o, r) << what << " damage " << v;
            }
          }
        }
        ++damaged;
        rejected += !r_ok;
      }
      at += n;
      if (HasFailure()) return;
    }
  }
  std::printf("kernel-row chunks: %d (%d with a partial last step), %d Highway decodes, %d damaged streams, %d "
              "rejected\n",
              chunks, partial, hwy, damaged, rejected);
  EXPECT_GE(chunks, 6);
  EXPECT_GT(partial, 0) << "no chunk whose last step leaves lanes idle";
  EXPECT_GT(rejected, damaged * 3 / 4) << "the damage should mostly be detected";
  if (cpu_path_supported(CpuPath::kAvx2) || cpu_path_supported(CpuPath::kNeon)) {
    EXPECT_GT(hwy, 0) << "the Highway decoder declined every chunk";
  }
}

TEST(KernelRows, GroupsDecodeAsSingleChunks) {
  const auto& all = encoded_ternary();
  if (all.empty()) GTEST_SKIP() << "no kernel-row tensors";
  if (!cpu_path_supported(CpuPath::kAvx2) && !cpu_path_supported(CpuPath::kNeon))
    GTEST_SKIP() << "no Highway decoder path here: nothing grouped";
  // Chunks of one size from different tensors (different models), 2 and 3
  // at a time; then the same with one stream damaged.
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::pair<const Encoded*, uint64_t>>> by_size;
  for (const auto& e : all)
    for (uint64_t i = 0; i < e.et.chunks.size(); ++i)
      if (e.et.chunks[i].method == ChunkMethod::kModel) {
        const ChunkView cv = chunk_view(e.et.geom, i);
        by_size[{cv.h, cv.w}].push_back({&e, i});
      }
  int groups = 0, damaged = 0;
  for (const auto& [size, list] : by_size) {
    for (size_t k = 0; k + 3 <= list.size() && k < 12; k += 3) {
      for (int n : {2, 3}) {
        std::shared_ptr<const TensorModel::VectorTables> hold[3];
        ModelView mv[3];
        GroupSide sides[3];
        std::vector<uint8_t> outs[3], refs[3];
        wctest::ChunkPayload ps[3];
        ChunkView cv0{};
        for (int i = 0; i < n; ++i) {
          const auto& [e, ci] = list[k + static_cast<size_t>(i)];
          mv[i] = e->et.model.view(&hold[i], nullptr, 0, TensorModel::TableUse::kAll);
          ASSERT_TRUE(wctest::parse_chunk_payload(e->et.geom, ci, e->et.chunks[ci].payload, &ps[i]));
          const ChunkView cv = chunk_view(e->et.geom, ci);
          if (i == 0) cv0 = cv;
          refs[i].assign(e->et.chunks[ci].decoded_size, 0);
          ASSERT_EQ(reference(mv[i], cv, ps[i].rans, ps[i].rans_len, &refs[i]), 1);
          outs[i].assign(refs[i].size(), 0x33);
          sides[i] = GroupSide{nullptr, ps[i].rans, ps[i].rans_len, nullptr, 0, false, outs[i].data(), nullptr,
                               cv.col0, cv.row0};
        }
        ASSERT_EQ(decode_krow_group_hwy(mv, cv0, sides, n), 1);
        for (int i = 0; i < n; ++i) EXPECT_EQ(outs[i], refs[i]) << "group of " << n << ", chunk " << i;
        ++groups;
        // One damaged stream: the group is refused (each chunk then alone).
        std::vector<uint8_t> bad(ps[n - 1].rans, ps[n - 1].rans + ps[n - 1].rans_len);
        bad[bad.size() / 2] ^= 0x40;
        sides[n - 1].rans = bad.data();
        std::vector<uint8_t> r(refs[n - 1].size());
        const int r_ok = reference(mv[n - 1], cv0, bad.data(), static_cast<uint32_t>(bad.size()), &r);
        const int g_ok = decode_krow_group_hwy(mv, cv0, sides, n);
        if (r_ok == 0) {
          EXPECT_EQ(g_ok, 0);
          ++damaged;
        }
      }
    }
  }
  std::printf("kernel-row groups: %d decoded, %d refused for a damaged stream\n", groups, damaged);
  EXPECT_GE(groups, 4);
  EXPECT_GE(damaged, 2);
}

TEST(KernelRows, ModelRecordRules) {
  const auto& all = encoded_ternary();
  if (all.empty()) GTEST_SKIP() << "no kernel-row tensors";
  const EncodedTensor& et = all.front().et;
  const auto good = et.model.serialize(kTablesCompact);
  ASSERT_TRUE(TensorModel::deserialize(good.data(), good.size(), et.geom, "t", kTablesCompact).ok());
  // One field at a time, as an encoder that broke the rule would write it.
  struct Case {
    const char* field;
    void (*edit)(TensorModel*, TensorGeometry*);
  };
  const Case cases[] = {
      {"period", [](TensorModel* m, TensorGeometry*) { m->ip.period = 25; }},
      {"off_a", [](TensorModel* m, TensorGeometry*) { m->ip.off_a = 9; }},
      {"off_b", [](TensorModel* m, TensorGeometry*) { m->ip.off_b = 9; }},
      {"esc", [](TensorModel* m, TensorGeometry*) {
         m->ip.esc = 8;
         m->ip.nsym = 26;
       }},
      {"nb", [](TensorModel* m, TensorGeometry*) { m->ip.nb = 2; }},
      {"use_cc", [](TensorModel* m, TensorGeometry*) {
         m->ip.use_cc = 1;
         m->cc.assign(1, 0);
       }},
      {"tools", [](TensorModel* m, TensorGeometry*) { m->ip.tools = 1; }},
      {"zgroup", [](TensorModel* m, TensorGeometry*) { m->ip.zgroup = 32; }},
      {"cols", [](TensorModel*, TensorGeometry* g) {
         g->cols = 144 * 4 / 3;
         g->chunk_cols = g->cols;
       }},
      {"chunk_cols", [](TensorModel*, TensorGeometry* g) {
         g->chunk_cols = 8;
         g->chunk_rows = 1;
       }},
  };
  for (const auto& c : cases) {
    TensorModel m = et.model;
    TensorGeometry g = et.geom;
    c.edit(&m, &g);
    const auto bytes = m.serialize(kTablesCompact);
    auto r = TensorModel::deserialize(bytes.data(), bytes.size(), g, "t", kTablesCompact);
    ASSERT_FALSE(r.ok()) << c.field;
    EXPECT_NE(r.status().ToString().find(std::string("field ") + c.field), std::string::npos)
        << c.field << ": " << r.status().ToString();
  }
  // Not for other code types: an 8-bit tensor's record with nbr_mode 4.
  {
    TensorModel m = et.model;
    TensorGeometry g = et.geom;
    m.ip.sub = kIntI8;
    g.elem_bits = 8;
    const auto bytes = m.serialize(kTablesCompact);
    auto r = TensorModel::deserialize(bytes.data(), bytes.size(), g, "t", kTablesCompact);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().ToString().find("nbr_mode"), std::string::npos) << r.status().ToString();
  }
  // And nbr_mode 5 does not exist.
  {
    TensorModel m = et.model;
    m.ip.nbr_mode = 5;
    const auto bytes = m.serialize(kTablesCompact);
    auto r = TensorModel::deserialize(bytes.data(), bytes.size(), et.geom, "t", kTablesCompact);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().ToString().find("nbr_mode = 5"), std::string::npos) << r.status().ToString();
  }
}

// docs/wcodec-format.md, vector 5: h = 2, w = 36 (8 kernels); kernel 5 is
// +1 0 -1 | 0 0 0 | -1 -1 +1.
TEST(KernelRows, FormatDocumentVector) {
  EXPECT_EQ(kern_rows_lane_n(8, 0), 1u);
  EXPECT_EQ(kern_rows_lane_n(8, 7), 1u);
  EXPECT_EQ(kern_rows_lane_n(8, 8), 0u);
  EXPECT_EQ(kern_rows_lane_n(33, 0), 2u);
  EXPECT_EQ(kern_rows_lane_n(33, 1), 1u);
  EXPECT_EQ(kern_rows_ctx(0, 0, 7), 0u);
  EXPECT_EQ(kern_rows_ctx(0, 1, 19), 20u);
  EXPECT_EQ(kern_rows_ctx(0, 2, 0), 28u);
  EXPECT_EQ(kern_rows_ctx(2, 2, 26), 2u * 55u + 1u + 27u + 26u);
  // The kernel's codes in the packed chunk: elements 45..53.
  std::vector<uint8_t> chunk(2 * 36 / 4, 0);
  const int32_t kernel5[9] = {1, 0, -1, 0, 0, 0, -1, -1, 1};
  for (int i = 0; i < 9; ++i) {
    const uint32_t code = kernel5[i] == 0 ? 0 : (kernel5[i] == 1 ? 1 : 2);
    const uint32_t e = 45 + static_cast<uint32_t>(i);
    chunk[e / 4] |= static_cast<uint8_t>(code << (2 * (e % 4)));
  }
  // Bits 90..107 hold 1 0 2 | 0 0 0 | 2 2 1, first code lowest.
  uint64_t bits = 0;
  for (int b = 0; b < 4; ++b) bits |= uint64_t{chunk[11 + b]} << (8 * b);
  EXPECT_EQ((bits >> 2) & 0x3FFFF, 1u | 0u << 2 | 2u << 4 | 0u << 6 | 0u << 8 | 0u << 10 | 2u << 12 | 2u << 14 | 1u << 16);
}

// fuzz_container's isnet_kernel_rows seed, encoded as the fuzzer encodes it
// (16 KiB chunks), takes kernel-row symbols: its edits reach them.
TEST(KernelRows, FuzzSeedTakesThem) {
  const auto path = wctest::data_dir() / kTernary;
  if (!fs::exists(path)) GTEST_SKIP() << "no " << path;
  const auto four = wctest::kernel_rows_file(wctest::read_file(path));
  ASSERT_FALSE(four.empty());
  EncodeConfig cfg;
  cfg.chunk_bytes = 16 * 1024;
  auto enc = encode_safetensors(four.data(), four.size(), cfg, "seed");
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  auto rd = Reader::open_memory(enc->data(), enc->size(), "seed");
  ASSERT_TRUE(rd.ok());
  ASSERT_EQ((*rd)->num_tensors(), 1u);
  EXPECT_NE((*rd)->tensor_summary(0).model.find("krow3x3"), std::string::npos) << (*rd)->tensor_summary(0).model;
  EXPECT_EQ(wctest::format_version(**rd), "2.10");
}

}  // namespace
