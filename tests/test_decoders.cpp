// tests/test_decoders.cpp — the vector (AVX-512) chunk decoders must produce
// exactly what the scalar reference decoders (chunk_decode.h, the code the
// CUDA decoder shares) produce, on every model-coded chunk of the real
// model files and the edge cases, and both must reject damaged streams.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <utility>

#include "bytes.h"
#include "chunk_decode_simd.h"
#include "chunk_model.h"
#include "edge_cases.h"
#include "int_rows.h"
#include "rans_encoder.h"
#include "sanitizer.h"
#include "tensor_decode.h"
#include "tensor_encode.h"
#include "chunk_payload_testutil.h"
#include "testutil.h"
#include "wcodec/cpu.h"
#include "wcodec/container.h"
#include "wcodec/safetensors.h"

namespace {

using namespace wcodec;

// Whether the AVX-512 decoders run: the avx512 decoder path is in use
// (a CPU with AVX-512 on which WCODEC_CPU forces avx2 or scalar runs others).
bool cpu_has_avx512() { return wcodec::cpu_path() == wcodec::CpuPath::kAvx512; }

using Parsed = wctest::ChunkPayload;
bool parse_payload(const TensorGeometry& g, uint64_t index, const std::vector<uint8_t>& p, Parsed* out) {
  return wctest::parse_chunk_payload(g, index, p, out);
}

int g_tail_chunks = 0;  // raw tail chunks seen by compare_tensor

// Adds the number of chunks compared to *compared.
void compare_tensor(const TensorInfo& t, const uint8_t* data, const std::string& what, int* compared_out) {
  int& compared = *compared_out;
  auto r = encode_tensor(t, data, AuxInput{}, EncodeOptions{});
  EXPECT_TRUE(r.ok()) << what << ": " << r.status().ToString();
  if (!r.ok()) return;
  const EncodedTensor& et = *r;
  for (uint64_t i = 0; i < et.chunks.size(); ++i) {
    const auto& c = et.chunks[i];
    if (c.method != ChunkMethod::kModel) continue;
    Parsed ps;
    EXPECT_TRUE(parse_payload(et.geom, i, c.payload, &ps)) << what;
    uint64_t row0, col0, h, w;
    et.geom.chunk_rect(i, &row0, &col0, &h, &w);
    ChunkView cv{static_cast<uint32_t>(h), static_cast<uint32_t>(w), static_cast<uint32_t>(row0),
                 static_cast<uint32_t>(col0), static_cast<uint32_t>(et.geom.cols)};
    std::shared_ptr<const TensorModel::VectorTables> hold;
    const ModelView mv = et.model.view(&hold);
    const uint64_t n = h * w;
    std::vector<uint8_t> lm(simd_lane_major_bytes(cv));
    if (et.model.kind == ModelKind::kInt) {
      std::vector<int32_t> res(n), tile(kTile * kTile);
      std::vector<uint8_t> a(c.decoded_size, 0x11), b(c.decoded_size, 0x22);
      ASSERT_TRUE(decode_int_residuals(mv, cv, ps.rans, ps.rans_len, res.data()) &&
                  int_finish_chunk(mv, cv, ps.map, a.data(), res.data(), tile.data()))
          << what << " chunk " << i;
      const int simd =
          decode_int_chunk_simd(mv, cv, ps.map, ps.rans, ps.rans_len, b.data(), res.data(), tile.data(), lm.data());
      if (cpu_has_avx512()) {
        EXPECT_GE(simd, 0) << what << " chunk " << i << ": vector decoder declined an int chunk";
      }
      if (simd < 0) continue;  // not handled on this CPU: nothing to compare
      ASSERT_EQ(simd, 1) << what << " chunk " << i;
      ASSERT_EQ(a, b) << what << " chunk " << i << ": vector decoder differs from the reference";
      ASSERT_EQ(chunk_hash(b.data(), b.size()), c.xxh3) << what << " chunk " << i;
      ++compared;
      // A damaged stream: both decoders must reject it (or, for a flip that
      // happens to keep the stream valid, agree).
      std::vector<uint8_t> bad(ps.rans, ps.rans + ps.rans_len);
      bad[bad.size() / 2] ^= 0x5a;
      const bool ok_ref = decode_int_residuals(mv, cv, bad.data(), ps.rans_len, res.data()) &&
                          int_finish_chunk(mv, cv, ps.map, a.data(), res.data(), tile.data());
      const int ok_simd =
          decode_int_chunk_simd(mv, cv, ps.map, bad.data(), ps.rans_len, b.data(), res.data(), tile.data(), lm.data());
      EXPECT_EQ(ok_ref ? 1 : 0, ok_simd) << what << " chunk " << i << ": decoders disagree on a damaged stream";
      if (ok_ref && ok_simd == 1) {
        EXPECT_EQ(a, b);
      }
    } else if (et.model.kind == ModelKind::kFloat) {
      std::vector<uint16_t> e(n);
      std::vector<uint8_t> sm(n);
      std::vector<uint8_t> out_ref(c.decoded_size, 0x11), out_simd(c.decoded_size, 0x22);
      ASSERT_TRUE(decode_float_chunk(mv, cv, ps.rans, ps.rans_len, ps.raw, ps.raw_len, out_ref.data(), e.data(),
                                     sm.data(), ps.tail))
          << what << " chunk " << i;
      // The raw tail is not optional: without it the lanes do not end at
      // their initial state.
      if (ps.tail) {
        EXPECT_FALSE(decode_float_chunk(mv, cv, ps.rans, ps.rans_len, ps.raw, ps.raw_len, out_simd.data(), e.data(),
                                        sm.data(), false))
            << what << " chunk " << i;
        ++g_tail_chunks;
      }
      const int simd = decode_float_chunk_simd(mv, cv, ps.rans, ps.rans_len, ps.raw, ps.raw_len, out_simd.data(),
                                               lm.data(), ps.tail);
      if (cpu_has_avx512()) {
        EXPECT_GE(simd, 0) << what << " chunk " << i << ": vector decoder declined a float chunk";
      }
      if (simd < 0) continue;
      ASSERT_EQ(simd, 1) << what << " chunk " << i;
      ASSERT_EQ(out_ref, out_simd) << what << " chunk " << i << ": vector decoder differs from the reference";
      ASSERT_EQ(chunk_hash(out_ref.data(), out_ref.size()), c.xxh3) << what << " chunk " << i;
      ++compared;
      std::vector<uint8_t> bad(ps.rans, ps.rans + ps.rans_len);
      bad[bad.size() / 2] ^= 0x5a;
      const bool ok_ref = decode_float_chunk(mv, cv, bad.data(), ps.rans_len, ps.raw, ps.raw_len, out_ref.data(),
                                             e.data(), sm.data(), ps.tail);
      const int ok_simd = decode_float_chunk_simd(mv, cv, bad.data(), ps.rans_len, ps.raw, ps.raw_len,
                                                  out_simd.data(), lm.data(), ps.tail);
      EXPECT_EQ(ok_ref ? 1 : 0, ok_simd) << what << " chunk " << i << ": decoders disagree on a damaged stream";
      if (ok_ref && ok_simd == 1) {
        EXPECT_EQ(out_ref, out_simd);
      }
    }
  }
}

int compare_file(const std::vector<uint8_t>& f, const std::string& what, uint64_t max_tensor_bytes) {
  auto h = parse_safetensors_header(f.data(), f.size(), f.size(), what);
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  if (!h.ok()) return 0;
  int n = 0;
  for (const auto& t : h->tensors) {
    if (t.nbytes() > max_tensor_bytes) continue;
    compare_tensor(t, f.data() + h->data_start + t.begin, what + ": " + t.name, &n);
  }
  return n;
}

#if WCODEC_ASAN
constexpr uint64_t kMaxTensor = 1u << 20;
#else
constexpr uint64_t kMaxTensor = 8u << 20;
#endif

TEST(VectorDecoders, EqualReferenceOnRealFiles) {
  int compared = 0;
  for (const auto& p : wctest::data_safetensors_files()) {
    const auto f = wctest::read_file(p);
    compared += compare_file(f, p.filename().string(), kMaxTensor);
  }
  // The small float files have chunks whose raw tail is in the lane states.
  EXPECT_GT(g_tail_chunks, 20);
  if (compared == 0) GTEST_SKIP() << "no AVX-512 on this CPU: vector decoders not compared";
  EXPECT_GT(compared, 50);
}

TEST(VectorDecoders, EqualReferenceOnEdgeCases) {
  int compared = 0;
  for (const auto& c : wctest::make_edge_cases()) compared += compare_file(c.file, c.name, kMaxTensor);
  if (compared == 0) GTEST_SKIP() << "no AVX-512 on this CPU: vector decoders not compared";
}

// The reference decoders' result for one model-coded chunk (false:
// rejected).
bool reference_decode(const ModelView& mv, const ChunkView& cv, const Parsed& ps, const uint8_t* rans,
                      std::vector<uint8_t>* out) {
  const uint64_t n = uint64_t{cv.h} * cv.w;
  if (mv.kind == ModelKind::kFloat) {
    std::vector<uint16_t> e(n);
    std::vector<uint8_t> sm(n);
    return decode_float_chunk(mv, cv, rans, ps.rans_len, ps.raw, ps.raw_len, out->data(), e.data(), sm.data(),
                              ps.tail);
  }
  std::vector<int32_t> res(n), tile(kTile * kTile);
  return decode_int_residuals(mv, cv, rans, ps.rans_len, res.data()) &&
         int_finish_chunk(mv, cv, ps.map, out->data(), res.data(), tile.data());
}

// Groups of two and three chunks decoded together (decode_group_simd:
// floats, and int8 codes with activity contexts) must give what the
// reference decoder gives for each, and a damaged stream in any member must
// fail the group (the caller then decodes each alone).
TEST(VectorDecoders, ChunkGroupsEqualReference) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU: the group decoder is not used";
  std::map<std::pair<ModelKind, int>, int> groups, damaged;
  int nibble_groups = 0, scale_groups = 0, joint_groups = 0;
  // Small chunks give several per tensor; int8 and int4 tensors of 64 KiB
  // chunks (smaller ones fall back to zstd), tensors of at most 1 MiB. The
  // F16 tensors take joint symbols (float emode 5).
  const std::pair<const char*, uint64_t> files[] = {{"stories260K.bf16.safetensors", 4096},
                                                    {"silero_vad_16k.bf16.safetensors", 4096},
                                                    {"isnet-medium.f16.safetensors", 16384},
                                                    {"isnet-medium.rtn-int8.safetensors", 64 * 1024},
                                                    {"isnet-medium.rtn-int4.safetensors", 64 * 1024}};
  for (const auto& [name, chunk] : files) {
    const auto f = wctest::read_file(wctest::data_dir() / name);
    auto h = parse_safetensors_header(f.data(), f.size(), f.size(), name);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    for (const auto& t : h->tensors) {
      if (t.nbytes() > (1u << 20) || t.nbytes() < 2 * chunk) continue;
      EncodeOptions o;
      o.chunk_bytes = chunk;
      auto r = encode_tensor(t, f.data() + h->data_start + t.begin, AuxInput{}, o);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      const EncodedTensor& et = *r;
      if (!et.has_model || !model_groups(et.model)) continue;
      std::shared_ptr<const TensorModel::VectorTables> hold;
      const ModelView mv = et.model.view(&hold);
      for (int n = 2; n <= kMaxChunkGroup; ++n) {
        for (uint64_t i = 0; i + static_cast<uint64_t>(n) <= et.chunks.size(); i += static_cast<uint64_t>(n)) {
          const std::string what =
              std::string(name) + ": " + t.name + " chunks " + std::to_string(i) + " +" + std::to_string(n - 1);
          uint64_t r0, c0, h0, w0;
          et.geom.chunk_rect(i, &r0, &c0, &h0, &w0);
          bool same = true;
          Parsed ps[kMaxChunkGroup];
          ChunkView cvs[kMaxChunkGroup];  // each member's place (row and column classes, kernel phases)
          for (int k = 0; k < n && same; ++k) {
            const auto& c = et.chunks[i + static_cast<uint64_t>(k)];
            uint64_t rk, ck, hk, wk;
            et.geom.chunk_rect(i + static_cast<uint64_t>(k), &rk, &ck, &hk, &wk);
            same = c.method == ChunkMethod::kModel && hk == h0 && wk == w0;
            cvs[k] = ChunkView{static_cast<uint32_t>(hk), static_cast<uint32_t>(wk), static_cast<uint32_t>(rk),
                               static_cast<uint32_t>(ck), static_cast<uint32_t>(et.geom.cols)};
            if (same) {
              ASSERT_TRUE(parse_payload(et.geom, i + static_cast<uint64_t>(k), c.payload, &ps[k])) << what;
            }
          }
          if (!same) continue;
          const ChunkView cv{static_cast<uint32_t>(h0), static_cast<uint32_t>(w0), static_cast<uint32_t>(r0),
                             static_cast<uint32_t>(c0), static_cast<uint32_t>(et.geom.cols)};
          std::vector<std::vector<uint8_t>> ref(static_cast<size_t>(n)), out(static_cast<size_t>(n)),
              lm(static_cast<size_t>(n));
          GroupSide sides[kMaxChunkGroup];
          for (int k = 0; k < n; ++k) {
            const size_t sz = et.chunks[i + static_cast<uint64_t>(k)].decoded_size;
            ref[static_cast<size_t>(k)].resize(sz);
            ASSERT_TRUE(reference_decode(mv, cvs[k], ps[k], ps[k].rans, &ref[static_cast<size_t>(k)])) << what;
            out[static_cast<size_t>(k)].assign(sz, static_cast<uint8_t>(0x33 + k));
            lm[static_cast<size_t>(k)].resize(simd_lane_major_bytes(cv));
            sides[k] = GroupSide{ps[k].map,    ps[k].rans,  ps[k].rans_len, ps[k].raw, ps[k].raw_len, ps[k].tail,
                                 out[static_cast<size_t>(k)].data(), lm[static_cast<size_t>(k)].data(), cvs[k].col0,
                                 cvs[k].row0};
          }
          const ModelView mvs[kMaxChunkGroup] = {mv, mv, mv};
          const int rc = decode_group_simd(mvs, cv, sides, n);
          if (rc < 0) continue;  // a geometry or tile map the grouped loops do not take
          ASSERT_EQ(rc, 1) << what;
          for (int k = 0; k < n; ++k)
            ASSERT_EQ(out[static_cast<size_t>(k)], ref[static_cast<size_t>(k)])
                << what << ": member " << k << " differs from the reference";
          ++groups[{mv.kind, n}];
          nibble_groups += mv.kind == ModelKind::kInt && mv.ip.sub == kIntNibble;
          scale_groups += mv.kind == ModelKind::kInt && mv.ip.ns > 1;
          joint_groups += mv.kind == ModelKind::kFloat && float_joint(mv.fp);
          // Damage one member's stream: the group fails unless the
          // reference also accepts the damaged stream (then both agree).
          for (int k = 0; k < n; ++k) {
            std::vector<uint8_t> bad(ps[k].rans, ps[k].rans + ps[k].rans_len);
            bad[bad.size() / 2] ^= 0x5a;
            std::vector<uint8_t> ref_bad(ref[static_cast<size_t>(k)].size());
            const bool ok_ref = reference_decode(mv, cvs[k], ps[k], bad.data(), &ref_bad);
            GroupSide dmg[kMaxChunkGroup];
            std::copy(sides, sides + n, dmg);
            dmg[k].rans = bad.data();
            const int rc_bad = decode_group_simd(mvs, cv, dmg, n);
            EXPECT_EQ(ok_ref ? 1 : 0, rc_bad) << what << ": damaged member " << k;
            if (ok_ref && rc_bad == 1) {
              EXPECT_EQ(out[static_cast<size_t>(k)], ref_bad) << what;
            }
            damaged[{mv.kind, n}] += !ok_ref;
          }
        }
      }
    }
  }
  for (ModelKind kind : {ModelKind::kFloat, ModelKind::kInt}) {
    for (int n = 2; n <= kMaxChunkGroup; ++n) {
      EXPECT_GT((groups[{kind, n}]), 10) << "too few groups of " << n << " chunks of model kind "
                                         << static_cast<int>(kind) << " in the real files";
      EXPECT_GT((damaged[{kind, n}]), 10) << "model kind " << static_cast<int>(kind) << ", groups of " << n;
    }
  }
  EXPECT_GT(nibble_groups, 10) << "too few groups of 4-bit code chunks";
  EXPECT_GT(scale_groups, 10) << "too few groups of chunks whose model has row or column scale classes";
  EXPECT_GT(joint_groups, 10) << "too few groups of float chunks with joint symbols";
}


// Chunks of different tensors of one shape decoded together, each with its
// own model (decode_group_simd with one view per chunk): every member must
// equal what the reference decoder gives with its model, and damage to any
// member must fail the group.
TEST(VectorDecoders, CrossTensorGroupsEqualReference) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU: the group decoder is not used";
  struct One {
    std::string what;
    EncodedTensor et;
    Parsed ps;
    ChunkView cv;
  };
  std::map<ModelKind, int> groups, differing_params, other_tables, damaged;
  for (const char* name :
       {"stories260K.bf16.safetensors", "silero_vad_16k.bf16.safetensors", "isnet-medium.rtn-int8.safetensors"}) {
    const auto f = wctest::read_file(wctest::data_dir() / name);
    auto h = parse_safetensors_header(f.data(), f.size(), f.size(), name);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    // One-chunk model-coded tensors by chunk rectangle.
    std::map<std::pair<uint64_t, uint64_t>, std::vector<One>> by_shape;
    for (const auto& t : h->tensors) {
      if (t.nbytes() > EncodeOptions{}.chunk_bytes) continue;
      auto r = encode_tensor(t, f.data() + h->data_start + t.begin, AuxInput{}, EncodeOptions{});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      if (!r->has_model || r->chunks.size() != 1 || r->chunks[0].method != ChunkMethod::kModel) continue;
      One o{std::string(name) + ": " + t.name, std::move(r).value(), {}, {}};
      uint64_t r0, c0, h0, w0;
      o.et.geom.chunk_rect(0, &r0, &c0, &h0, &w0);
      o.cv = ChunkView{static_cast<uint32_t>(h0), static_cast<uint32_t>(w0), 0, 0, static_cast<uint32_t>(o.et.geom.cols)};
      ASSERT_TRUE(parse_payload(o.et.geom, 0, o.et.chunks[0].payload, &o.ps)) << o.what;
      by_shape[{h0, w0}].push_back(std::move(o));
    }
    for (auto& [shape, list] : by_shape) {
      for (int n = 2; n <= kMaxChunkGroup; ++n) {
        for (size_t i = 0; i + static_cast<size_t>(n) <= list.size(); ++i) {
          const One* m[kMaxChunkGroup];
          bool together = true;
          for (int k = 0; k < n; ++k) {
            m[k] = &list[i + static_cast<size_t>(k)];
            together &= models_group(list[i].et.model, m[k]->et.model);
          }
          if (!together) continue;
          std::string what = m[0]->what;
          for (int k = 1; k < n; ++k) what += " + " + m[k]->what;
          std::shared_ptr<const TensorModel::VectorTables> hold[kMaxChunkGroup];
          ModelView mvs[kMaxChunkGroup];
          std::vector<uint8_t> ref[kMaxChunkGroup], out[kMaxChunkGroup], lm[kMaxChunkGroup];
          GroupSide sides[kMaxChunkGroup];
          bool params_differ = false, tables_differ = false;
          for (int k = 0; k < n; ++k) {
            mvs[k] = m[k]->et.model.view(&hold[k]);
            // (Slot tables, or 1/8-slot entries: ModelView::ent8.)
            tables_differ |= (mvs[k].slot_all ? mvs[k].slot_all : mvs[k].ent8) !=
                             (mvs[0].slot_all ? mvs[0].slot_all : mvs[0].ent8);
            if (mvs[0].kind == ModelKind::kFloat) {
              const FloatParams &a = mvs[0].fp, &b = mvs[k].fp;
              params_differ |= a.k != b.k || a.elo != b.elo || a.ne != b.ne || a.mlo != b.mlo || a.nm != b.nm;
            } else {
              const IntParams &a = mvs[0].ip, &b = mvs[k].ip;
              params_differ |= a.nb != b.nb || a.esc != b.esc || a.center != b.center ||
                               !std::equal(a.thr, a.thr + 7, b.thr);
            }
            const size_t sz = m[k]->et.chunks[0].decoded_size;
            ref[k].resize(sz);
            ASSERT_TRUE(reference_decode(mvs[k], m[k]->cv, m[k]->ps, m[k]->ps.rans, &ref[k])) << what;
            out[k].assign(sz, static_cast<uint8_t>(0x5C + k));
            lm[k].resize(simd_lane_major_bytes(m[k]->cv));
            const Parsed& ps = m[k]->ps;
            sides[k] = GroupSide{ps.map,        ps.rans,       ps.rans_len,  ps.raw,        ps.raw_len,
                                 ps.tail,       out[k].data(), lm[k].data(), m[k]->cv.col0, m[k]->cv.row0};
          }
          const int rc = decode_group_simd(mvs, m[0]->cv, sides, n);
          if (rc < 0) continue;  // lanes of a geometry the step loops do not take
          ASSERT_EQ(rc, 1) << what;
          for (int k = 0; k < n; ++k) ASSERT_EQ(out[k], ref[k]) << what << ": member " << k << " differs";
          const ModelKind kind = mvs[0].kind;
          ++groups[kind];
          differing_params[kind] += params_differ;
          other_tables[kind] += tables_differ;
          for (int k = 0; k < n; ++k) {
            std::vector<uint8_t> bad(m[k]->ps.rans, m[k]->ps.rans + m[k]->ps.rans_len);
            bad[bad.size() / 2] ^= 0x5a;
            std::vector<uint8_t> ref_bad(ref[k].size());
            const bool ok_ref = reference_decode(mvs[k], m[k]->cv, m[k]->ps, bad.data(), &ref_bad);
            GroupSide dmg[kMaxChunkGroup];
            std::copy(sides, sides + n, dmg);
            dmg[k].rans = bad.data();
            EXPECT_EQ(ok_ref ? 1 : 0, decode_group_simd(mvs, m[0]->cv, dmg, n)) << what << ": damaged member " << k;
            damaged[kind] += !ok_ref;
          }
        }
      }
    }
  }
  // stories260K and silero give 54 float groups (31 with differing
  // parameters, all with tables of their own) and 132 damaged members the
  // reference rejects; isnet int8 81 groups of models with their own tables
  // and 192 rejected damaged members.
  EXPECT_GE(groups[ModelKind::kFloat], 40) << "too few float groups of one-chunk tensors of one shape";
  EXPECT_GE(differing_params[ModelKind::kFloat], 20) << "too few float groups whose models' parameters differ";
  EXPECT_GE(other_tables[ModelKind::kFloat], 40) << "too few float groups of models with tables of their own";
  EXPECT_GE(damaged[ModelKind::kFloat], 80);
  EXPECT_GE(groups[ModelKind::kInt], 60) << "too few int8 groups of one-chunk tensors of one shape";
  EXPECT_GE(other_tables[ModelKind::kInt], 60) << "too few int8 groups of models with tables of their own";
  EXPECT_GE(damaged[ModelKind::kInt], 120);
}

}  // namespace

namespace {

TEST(TileTools, ChosenWhenTheyPayAndDecodeExactly) {
  const auto f = wctest::make_smooth_int8_file();
  ASSERT_FALSE(f.empty());
  wcodec::EncodeConfig with, without;
  without.tool_search = false;
  wcodec::EncodeReport rep_with, rep_without;
  auto a = wcodec::encode_safetensors(f.data(), f.size(), with, "smooth", &rep_with);
  auto b = wcodec::encode_safetensors(f.data(), f.size(), without, "smooth", &rep_without);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(rep_with.tensors.size(), 1u);
  EXPECT_GT(rep_with.tensors[0].tiles_with_tools, 0u) << "no tile chose a predictor or transform";
  EXPECT_LT(a->size(), b->size()) << "tools chosen but the file did not shrink";
  wctest::ScratchDir dir;
  wctest::write_file(dir / "s.wcodec", *a);
  auto rd = wcodec::Reader::open((dir / "s.wcodec").string());
  ASSERT_TRUE(rd.ok()) << rd.status().ToString();
  std::vector<uint8_t> back(f.size());
  ASSERT_TRUE((*rd)->read(0, back.size(), back.data()).ok());
  EXPECT_EQ(back, f);
  EXPECT_TRUE((*rd)->verify(true).ok());
  // The vector decoder agrees with the reference on these chunks too.
  auto h = wcodec::parse_safetensors_header(f.data(), f.size(), f.size(), "smooth");
  ASSERT_TRUE(h.ok());
  int compared = 0;
  compare_tensor(h->tensors[0], f.data() + h->data_start, "smooth", &compared);
}

}  // namespace

namespace {

// Decodes damaged copies of every model chunk of et (round 0: intact) with
// the reference and the vector decoder: both must accept and reject the
// same streams, with the same bytes. decode(mv, cv, ps, rans, a, b) runs
// both on stream `rans` into a (reference) and b (vector) and returns the
// reference's verdict and the vector decoder's result (-1: not handled).
// Adds to *compared and *rejected.
template <class Decode>
void vector_agrees_on_damage(const EncodedTensor& et, std::mt19937& rng, int rounds, int* compared, int* rejected,
                             Decode&& decode) {
  std::shared_ptr<const TensorModel::VectorTables> hold;
  const ModelView mv = et.model.view(&hold);
  for (uint64_t i = 0; i < et.chunks.size(); ++i) {
    const auto& c = et.chunks[i];
    if (c.method != ChunkMethod::kModel) continue;
    Parsed ps;
    ASSERT_TRUE(parse_payload(et.geom, i, c.payload, &ps));
    uint64_t row0, col0, h, w;
    et.geom.chunk_rect(i, &row0, &col0, &h, &w);
    ChunkView cv{static_cast<uint32_t>(h), static_cast<uint32_t>(w), static_cast<uint32_t>(row0),
                 static_cast<uint32_t>(col0), static_cast<uint32_t>(et.geom.cols)};
    std::vector<uint8_t> a(c.decoded_size), b(c.decoded_size);
    for (int k = 0; k < rounds; ++k) {
      std::vector<uint8_t> bad(ps.rans, ps.rans + ps.rans_len);
      if (k) bad[128 + rng() % (bad.size() - 128)] ^= static_cast<uint8_t>(1 + rng() % 255);
      const auto [ok_ref, ok_simd] = decode(mv, cv, ps, bad.data(), a, b);
      if (ok_simd < 0) GTEST_SKIP() << "no AVX-512 on this CPU";
      ASSERT_EQ(ok_ref ? 1 : 0, ok_simd) << et.model.describe() << " chunk " << i << " damage " << k;
      if (ok_ref) {
        ASSERT_EQ(a, b) << et.model.describe() << " chunk " << i << " damage " << k;
      }
      if (k == 0) {
        ASSERT_TRUE(ok_ref);
        ASSERT_EQ(chunk_hash(a.data(), a.size()), c.xxh3);
      }
      *rejected += !ok_ref;
      ++*compared;
    }
  }
}

void int_vector_agrees_on_damage(const EncodedTensor& et, std::mt19937& rng, int rounds, int* compared,
                                 int* rejected) {
  std::vector<int32_t> res, tile(kTile * kTile);
  std::vector<uint8_t> lm;
  vector_agrees_on_damage(et, rng, rounds, compared, rejected,
                          [&](const ModelView& mv, const ChunkView& cv, const Parsed& ps, const uint8_t* rans,
                              std::vector<uint8_t>& a, std::vector<uint8_t>& b) {
                            res.resize(uint64_t{cv.h} * cv.w);
                            lm.resize(simd_lane_major_bytes(cv));
                            const bool ok_ref = decode_int_residuals(mv, cv, rans, ps.rans_len, res.data()) &&
                                                int_finish_chunk(mv, cv, ps.map, a.data(), res.data(), tile.data());
                            const int ok_simd = decode_int_chunk_simd(mv, cv, ps.map, rans, ps.rans_len, b.data(),
                                                                      res.data(), tile.data(), lm.data());
                            return std::pair{ok_ref, ok_simd};
                          });
}

void float_vector_agrees_on_damage(const EncodedTensor& et, std::mt19937& rng, int rounds, int* compared,
                                   int* rejected) {
  std::vector<uint16_t> e;
  std::vector<uint8_t> sm, lm;
  vector_agrees_on_damage(et, rng, rounds, compared, rejected,
                          [&](const ModelView& mv, const ChunkView& cv, const Parsed& ps, const uint8_t* rans,
                              std::vector<uint8_t>& a, std::vector<uint8_t>& b) {
                            e.resize(uint64_t{cv.h} * cv.w);
                            sm.resize(uint64_t{cv.h} * cv.w);
                            lm.resize(simd_lane_major_bytes(cv));
                            const bool ok_ref = decode_float_chunk(mv, cv, rans, ps.rans_len, ps.raw, ps.raw_len,
                                                                   a.data(), e.data(), sm.data(), ps.tail);
                            const int ok_simd = decode_float_chunk_simd(mv, cv, rans, ps.rans_len, ps.raw, ps.raw_len,
                                                                        b.data(), lm.data(), ps.tail);
                            return std::pair{ok_ref, ok_simd};
                          });
}

// Ternary chunks take a vector path of their own (slot bounds instead of
// table lookups, one code byte per element): on many damaged copies of
// every chunk it must accept and reject exactly what the reference does,
// with the same bytes, including streams that reach unused contexts.
// Encodes a conv-like ternary tensor (3x3 kernels flattened along a row:
// the code statistics repeat with the column) and checks the vector decoder
// against the reference on damaged copies of every chunk. phase: format 2.1
// models allowed (the encoder must pick the column-phase contexts, nbr_mode
// 2), else the format 2.0 contexts.
void check_ternary_vector_decoder(bool phase) {
  using namespace wcodec;
  std::mt19937 rng(11);
  std::normal_distribution<double> gauss(0.0, 1.0);
  // Periodic structure (3x3 kernels flattened along a row) so that the
  // encoder picks neighbour contexts with an off_a of 3.
  const uint64_t rows = 96, cols = 576;
  std::vector<uint8_t> bytes(rows * cols / 4, 0);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c) {
      // With phase: kernel centres (column 4 of 9) carry larger weights.
      const double w = gauss(rng) * (phase && c % 9 == 4 ? 2.0 : (c % 3 == 1 ? 1.5 : 0.7));
      const unsigned code = std::fabs(w) < 0.6 ? 0 : (w > 0 ? 1 : 2);
      bytes[(r * cols + c) / 4] |= static_cast<uint8_t>(code << (2 * (c % 4)));
    }
  TensorInfo t;
  t.name = "conv_packed";
  t.dtype = DType::kU8;
  t.shape = {rows, cols / 4};
  t.begin = 0;
  t.end = bytes.size();
  EncodeOptions opt;
  opt.chunk_bytes = 4096;
  opt.format_2_1 = phase;
  auto r = encode_tensor(t, bytes.data(), AuxInput{}, opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const EncodedTensor& et = *r;
  ASSERT_EQ(et.model.kind, ModelKind::kInt);
  ASSERT_EQ(et.model.ip.sub, kIntTernary);
  if (phase) {
    ASSERT_EQ(et.model.ip.nbr_mode, 2) << et.model.describe();
    EXPECT_EQ(et.model.ip.period, 9) << et.model.describe();
  } else {
    ASSERT_LT(et.model.ip.nbr_mode, 2) << et.model.describe();
  }
  int compared = 0, rejected = 0;
  int_vector_agrees_on_damage(et, rng, 300, &compared, &rejected);
  if (::testing::Test::HasFatalFailure() || ::testing::Test::IsSkipped()) return;
  EXPECT_GT(compared, 300);
  EXPECT_GT(rejected, 0);
}

TEST(VectorDecoders, TernaryAgreesWithReferenceOnDamagedStreams) { check_ternary_vector_decoder(false); }

TEST(VectorDecoders, TernaryColumnPhaseAgreesWithReferenceOnDamagedStreams) { check_ternary_vector_decoder(true); }

// The int8 loop (both halves' renormalization words handed out by one
// vpexpandw) against the reference on damaged streams of real int8 tensors:
// the first of each shape up to 320 KB (in every build configuration) whose
// model is an activity or a 3x3 kernel-context model with one scale class,
// the forms the fast loop takes; both kinds are among them.
TEST(VectorDecoders, Int8AgreesWithReferenceOnDamagedStreams) {
  const auto f = wctest::read_file(wctest::data_dir() / "isnet-medium.rtn-int8.safetensors");
  auto h = parse_safetensors_header(f.data(), f.size(), f.size(), "isnet-medium.rtn-int8");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  std::mt19937 rng(5);
  std::set<std::vector<uint64_t>> shapes;
  std::set<int> classes;
  int compared = 0, rejected = 0;
  for (const auto& t : h->tensors) {
    if (t.dtype != DType::kI8 || t.nbytes() > 320000 || !shapes.insert(t.shape).second) continue;
    auto r = encode_tensor(t, f.data() + h->data_start + t.begin, AuxInput{}, EncodeOptions{});
    ASSERT_TRUE(r.ok()) << t.name << ": " << r.status().ToString();
    const IntParams& ip = r->model.ip;
    if (r->model.kind != ModelKind::kInt || (ip.nbr_mode != 0 && ip.nbr_mode != 3) || ip.ns != 1) continue;
    classes.insert(ip.nbr_mode * 16 + ip.nb);
    int_vector_agrees_on_damage(*r, rng, 40, &compared, &rejected);
    if (HasFatalFailure() || IsSkipped()) return;
  }
  // Activity and kernel contexts (nbr_mode 0 and 3), several class counts.
  EXPECT_GE(classes.size(), 2u);
  EXPECT_TRUE(classes.count(3 * 16 + 1) || classes.count(3 * 16 + 2)) << "no kernel-context model";
  EXPECT_GT(compared, 400);
  EXPECT_GT(rejected, 0);
}

// Float chunks whose 32 lane rectangles differ in width (wa and wa + 1
// columns) or in rows take a loop of their own while every lane is active,
// then the general masked loop for the longer lanes' last elements. Real
// F16 weights (and their high bytes as F8 E5M2) in such shapes, under every
// exponent context mode with and without sign/mantissa contexts, against
// the reference on intact and damaged streams.
TEST(VectorDecoders, FloatLanesOfUnequalSizeAgreeWithReference) {
  const std::vector<uint8_t> big = wctest::largest_isnet_f16_tensor();
  ASSERT_GE(big.size(), 2u * 256 * 387);  // the largest shape below
  const uint8_t* src = big.data();
  std::mt19937 rng(17);
  int compared = 0, rejected = 0;
  std::set<std::tuple<int, int, int>> covered;  // element bytes, emode, nm > 1 || sign_ctx
  // {rows, cols}: widths 12/13 in one band of rows; widths 12/13 and rows
  // 181/182 in four bands; equal widths, rows 90/91 in eight bands.
  const std::pair<uint64_t, uint64_t> shapes[] = {{256, 387}, {725, 100}, {724, 40}};
  for (const DType dt : {DType::kF16, DType::kF8_E5M2}) {
    for (const auto& [rows, cols] : shapes) {
      const uint64_t n = rows * cols;
      std::vector<uint8_t> bytes(dt == DType::kF16 ? 2 * n : n);
      if (dt == DType::kF16) std::memcpy(bytes.data(), src, bytes.size());
      else
        for (uint64_t i = 0; i < n; ++i) bytes[i] = src[2 * i + 1];  // sign, exponent, 2 mantissa bits
      TensorInfo t;
      t.name = "w";
      t.dtype = dt;
      t.shape = {rows, cols};
      t.begin = 0;
      t.end = bytes.size();
      auto base = encode_tensor(t, bytes.data(), AuxInput{}, EncodeOptions{});
      ASSERT_TRUE(base.ok()) << base.status().ToString();
      ASSERT_EQ(base->model.kind, ModelKind::kFloat) << dtype_name(dt) << " " << rows << "x" << cols;
      ASSERT_EQ(base->geom.chunk_rows * base->geom.chunk_cols, n) << "one chunk";
      // Lanes of unequal size with every lane at least two rows long.
      uint32_t wmin = ~0u, wmax = 0, nmin = ~0u, nmax = 0;
      for (uint32_t l = 0; l < kLanes; ++l) {
        const LaneRect r = lane_rect(static_cast<uint32_t>(rows), static_cast<uint32_t>(cols), l);
        wmin = std::min(wmin, r.w), wmax = std::max(wmax, r.w);
        nmin = std::min(nmin, r.w * r.h), nmax = std::max(nmax, r.w * r.h);
      }
      ASSERT_LT(nmin, nmax);
      ASSERT_LE(wmax - wmin, 1u);
      ASSERT_GE(nmin, 2 * (wmin + 1));
      const int mode = base->model.fp.elo + 5;  // near the common exponents
      for (const auto& [emode, ne] : {std::pair{0, 1}, {1, 8}, {2, 8}, {3, 16}, {4, 8}, {5, 8}, {5, 16}}) {
        for (const auto& [nm, sign_ctx] : {std::pair{1, 0}, {8, 0}, {8, 1}}) {
          // Joint symbols (emode 5): no sign/mantissa contexts; sign,
          // exponent and high mantissa bits in one byte.
          if (emode == kFloatJointMode && (nm != 1 || sign_ctx)) continue;
          TensorModel shape = shared_model_shape(base->model);
          FloatParams& p = shape.fp;
          p.emode = static_cast<uint8_t>(emode);
          p.ne = static_cast<uint8_t>(ne);
          p.elo = static_cast<int16_t>(emode == 4 ? mode - kJointClasses + 2 : mode - ne + 3);
          p.nm = static_cast<uint8_t>(nm);
          p.sign_ctx = static_cast<uint8_t>(sign_ctx);
          p.mlo = static_cast<int16_t>(mode - nm + 2);
          if (emode == kFloatJointMode) p.k = static_cast<uint8_t>(std::min(int{p.mb}, 7 - p.eb));
          SharedStats st(shape);
          st.add(*base, bytes.data());  // base counts under its own model: counted again
          const EncodedTensor et = encode_with_model(base->geom, bytes.data(), st.build(), EncodeOptions{});
          const int before = compared;
          float_vector_agrees_on_damage(et, rng, 12, &compared, &rejected);
          if (HasFatalFailure() || IsSkipped()) return;
          if (compared > before) covered.insert({static_cast<int>(bytes.size() / n), emode, nm > 1 || sign_ctx});
        }
      }
    }
  }
  // Model-coded chunks in every mode and context form for F16 (joint
  // symbols have no sign/mantissa contexts); for F8 the order-0 and
  // top-only exponents without sign/mantissa contexts lose to zstd on this
  // data.
  std::set<int> f8_modes;
  size_t f16_forms = 0;
  for (const auto& [eb, em, smc] : covered) {
    if (eb == 1) f8_modes.insert(em);
    else ++f16_forms;
  }
  EXPECT_EQ(f16_forms, 5u * 2 + 1);
  EXPECT_EQ(f8_modes.size(), 6u);
  EXPECT_GT(rejected, 100);
}

// An int model record with all-zero-but-one tables for rows x cols codes
// of `sub` (the parameters as set in ip; nsym = esc + 18), and its geometry.
struct IntModelRecord {
  TensorModel m;
  TensorGeometry g;
  std::vector<uint8_t> bytes;
};
IntModelRecord int_model_record(const IntParams& ip, uint32_t elem_bits) {
  IntModelRecord r;
  r.m.kind = ModelKind::kInt;
  r.m.ip = ip;
  r.m.ip.nsym = static_cast<uint16_t>(ip.esc + kEscClasses);
  FreqTable t;
  t.freq.assign(r.m.ip.nsym, 0);
  t.freq[0] = 4096;
  r.m.t0.assign(int_nctx(r.m.ip), t);
  r.g.rows = 4;
  r.g.cols = 36;
  r.g.elem_bits = elem_bits;
  r.g.chunk_rows = 4;
  r.g.chunk_cols = 36;
  r.bytes = r.m.serialize(kTablesCompact);
  return r;
}

// Deserializing `bytes` (a record for geometry g) with byte `at` set to v
// fails, and the error names `field` and the value.
void expect_bad_field(const std::vector<uint8_t>& bytes, const TensorGeometry& g, size_t at, uint8_t v,
                      const std::string& field) {
  auto b = bytes;
  b[at] = v;
  auto r = TensorModel::deserialize(b.data(), b.size(), g, "t", kTablesCompact);
  ASSERT_FALSE(r.ok()) << field << " " << int{v};
  EXPECT_NE(r.status().message().find(field + " = " + std::to_string(v)), std::string::npos) << r.status().ToString();
}

// Int parameters of a model with a column period of 9 (nbr_mode 2 or 3,
// off_a 3: 3x3 kernels), one scale class.
IntParams period_params(uint8_t sub, uint16_t esc, uint8_t mode, uint8_t nb) {
  IntParams ip{};
  ip.sub = sub;
  ip.esc = esc;
  ip.nbr_mode = mode;
  ip.nb = nb;
  ip.ns = 1;
  ip.off_a = 3;
  ip.period = 9;
  return ip;
}

// Offsets in an int model record: kind, then the int parameters (§8.2).
constexpr size_t kModeAt = 7, kOffAAt = 46, kPeriodAt = 48;

// A column-phase model's period is checked when the model is read, and the
// mode is refused for anything but ternary codes; the error names the field
// and the value.
TEST(ModelFields, ColumnPhasePeriodAndSubtypeAreChecked) {
  IntParams ip = period_params(kIntTernary, 3, 2, 1);
  const IntModelRecord rec = int_model_record(ip, 2);
  auto ok = TensorModel::deserialize(rec.bytes.data(), rec.bytes.size(), rec.g, "t", kTablesCompact);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->ip.period, 9);
  ASSERT_EQ(rec.bytes[kPeriodAt], 9);
  for (uint8_t bad : {0, 1, 65, 255}) expect_bad_field(rec.bytes, rec.g, kPeriodAt, bad, "period");
  ip.sub = kIntI8;
  ip.esc = 200;
  const IntModelRecord i8 = int_model_record(ip, 8);
  auto r = TensorModel::deserialize(i8.bytes.data(), i8.bytes.size(), i8.g, "t", kTablesCompact);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nbr_mode = 2"), std::string::npos) << r.status().ToString();
}

// A kernel-context model (nbr_mode 3) carries its period (2..64) and a
// kernel width off_a that divides it; both are checked when the model is
// read, with errors naming the field and the value, and a mode past 3 is
// refused.
// A float model with joint symbols (emode 5) reads back; one whose symbol
// would not fit a byte, or that has sign/mantissa contexts, or an unknown
// exponent mode, is refused with the field and value named.
TEST(ModelFields, FloatJointSymbolFieldsAreChecked) {
  TensorModel m;
  m.kind = ModelKind::kFloat;
  m.fp = FloatParams{2, 5, 10, 2, kFloatJointMode, 8, 1, 0, 10, 0};
  FreqTable t;
  t.freq.assign(float_e_nsym(m.fp), 0);
  t.freq[0x3c] = 4096;
  m.t0.assign(float_e_nctx(m.fp), t);
  TensorGeometry g;
  g.rows = 4;
  g.cols = 36;
  g.elem_bits = 16;
  g.chunk_rows = 4;
  g.chunk_cols = 36;
  const std::vector<uint8_t> bytes = m.serialize(kTablesCompact);
  auto ok = TensorModel::deserialize(bytes.data(), bytes.size(), g, "t", kTablesCompact);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(float_joint(ok->fp));
  EXPECT_EQ(ok->t0.size(), 17u);
  EXPECT_TRUE(ok->t1.empty());
  // Offsets (§8.1): k 4, emode 5, nm 7, sign_ctx 8.
  expect_bad_field(bytes, g, 4, 3, "k");
  expect_bad_field(bytes, g, 5, 6, "emode");
  expect_bad_field(bytes, g, 7, 2, "nm");
  expect_bad_field(bytes, g, 8, 1, "sign_ctx");
}

TEST(ModelFields, KernelShapeIsChecked) {
  IntParams ip = period_params(kIntI8, 200, 3, 2);
  ip.thr[0] = 5;
  ASSERT_EQ(int_nctx(ip), 18u);
  const IntModelRecord rec = int_model_record(ip, 8);
  auto ok = TensorModel::deserialize(rec.bytes.data(), rec.bytes.size(), rec.g, "t", kTablesCompact);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->ip.period, 9);
  EXPECT_EQ(ok->ip.off_a, 3);
  EXPECT_EQ(ok->describe().find("i8 kern3x3 ns1 nb2"), 0u) << ok->describe();
  ASSERT_EQ(rec.bytes[kPeriodAt], 9);
  ASSERT_EQ(rec.bytes[kOffAAt], 3);
  for (uint8_t bad : {0, 1, 65, 255}) expect_bad_field(rec.bytes, rec.g, kPeriodAt, bad, "period");
  for (uint8_t bad : {0, 2, 4, 10}) expect_bad_field(rec.bytes, rec.g, kOffAAt, bad, "off_a");
  for (uint8_t bad : {4, 9, 255}) expect_bad_field(rec.bytes, rec.g, kModeAt, bad, "nbr_mode");
}

}  // namespace

// Payload flag bit 1 (raw tail in the lane states) is accepted only on
// float chunks with at least kRawTailMin bytes of raw bits; a tail chunk's
// damaged lane state is never decoded to wrong bytes.
TEST(RawTail, FlagOnlyOnLargeEnoughFloatChunksAndStatesAreChecked) {
  const auto f = wctest::read_file(wctest::data_dir() / "stories260K.f32.safetensors");
  auto h = parse_safetensors_header(f.data(), f.size(), f.size(), "stories260K.f32");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  int tails = 0;
  for (const auto& t : h->tensors) {
    if (t.nbytes() < 8192) continue;
    auto r = encode_tensor(t, f.data() + h->data_start + t.begin, AuxInput{}, EncodeOptions{});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const EncodedTensor& et = *r;
    const auto& c = et.chunks[0];
    if (c.method != ChunkMethod::kModel || !(c.payload[0] & 2)) continue;
    ++tails;
    ModelPayload mp;
    ASSERT_TRUE(parse_model_payload(et.geom, et.model, 0, c.payload.data(), c.payload.size(), c.decoded_size, t.name,
                                    &mp)
                    .ok());
    EXPECT_TRUE(mp.tail);
    DecodeScratch scratch;
    std::vector<uint8_t> out(c.decoded_size);
    ASSERT_TRUE(decode_chunk(et.geom, &et.model, 0, ChunkMethod::kModel, c.payload.data(), c.payload.size(),
                             c.decoded_size, c.xxh3, nullptr, 0, 0, out.data(), scratch, t.name)
                    .ok());
    EXPECT_EQ(0, std::memcmp(out.data(), f.data() + h->data_start + t.begin, out.size())) << t.name;
    // Every lane's initial state, bumped by one: never good bytes.
    const size_t states = 1 + 4;  // flags, rans_len
    for (uint32_t l = 0; l < kLanes; l += 7) {
      std::vector<uint8_t> bad = c.payload;
      bad[states + 4 * l] ^= 1;
      const Status s = decode_chunk(et.geom, &et.model, 0, ChunkMethod::kModel, bad.data(), bad.size(),
                                    c.decoded_size, c.xxh3, nullptr, 0, 0, out.data(), scratch, t.name);
      EXPECT_FALSE(s.ok()) << t.name << " lane " << l;
    }
    // The same payload claiming no tail: the lanes do not close.
    std::vector<uint8_t> no_tail = c.payload;
    no_tail[0] &= ~2;
    EXPECT_FALSE(decode_chunk(et.geom, &et.model, 0, ChunkMethod::kModel, no_tail.data(), no_tail.size(),
                              c.decoded_size, c.xxh3, nullptr, 0, 0, out.data(), scratch, t.name)
                     .ok());
  }
  EXPECT_GT(tails, 10);
  // An int chunk with the flag: rejected with the field named.
  const auto i8 = wctest::read_file(wctest::data_dir() / "stories260K.rtn-int8.safetensors");
  auto hi = parse_safetensors_header(i8.data(), i8.size(), i8.size(), "stories260K.rtn-int8");
  ASSERT_TRUE(hi.ok());
  bool checked = false;
  for (const auto& t : hi->tensors) {
    if (t.nbytes() < 4096) continue;
    auto r = encode_tensor(t, i8.data() + hi->data_start + t.begin, AuxInput{}, EncodeOptions{});
    ASSERT_TRUE(r.ok());
    const auto& c = r->chunks[0];
    if (c.method != ChunkMethod::kModel || r->model.kind != ModelKind::kInt || r->model.ip.zgroup) continue;
    std::vector<uint8_t> bad = c.payload;
    bad[0] |= 2;
    ModelPayload mp;
    const Status s =
        parse_model_payload(r->geom, r->model, 0, bad.data(), bad.size(), c.decoded_size, t.name, &mp);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("raw tail"), std::string::npos) << s.ToString();
    checked = true;
    break;
  }
  EXPECT_TRUE(checked);
}

// The encoder computes the contexts of a lane row's interior eight at a time
// (int_rows.h); they must be exactly int_ctx's, the decoders' context, for
// every mode, neighbour offset, class count and side-information use, on
// residuals of every range the kinds produce (and beyond, up to 2^29).
TEST(IntRowContexts, EqualIntCtxForEveryMode) {
  std::mt19937 rng(7);
  const uint32_t w = 77, h = 3;
  int checked = 0;
  for (int trial = 0; trial < 600; ++trial) {
    IntParams p{};
    p.nbr_mode = static_cast<uint8_t>(trial % 4);
    p.nb = static_cast<uint8_t>(1 + rng() % 8);
    for (int i = 0; i < 7; ++i) p.thr[i] = static_cast<uint16_t>(1 + i * (1 + rng() % 150));
    p.ns = static_cast<uint8_t>(1 + rng() % 16);
    for (int i = 0; i < 15; ++i) p.sthr[i] = static_cast<uint8_t>(2 + i * 4);
    p.use_rc = rng() & 1;
    p.use_cc = rng() & 1;
    const uint8_t offs[] = {0, 3, 9, 25, 64};
    p.off_a = offs[rng() % 5];
    p.off_b = p.nbr_mode == 1 ? offs[rng() % 5] : 0;
    if (p.nbr_mode == 1 && !p.off_a) p.off_a = 3;
    p.period = p.nbr_mode == 2 ? static_cast<uint8_t>(2 + rng() % 63) : 0;
    if (p.nbr_mode == 3) {  // kernels of kw x kh elements, 2..64 of them
      const uint32_t kw = 1 + rng() % 8, kh = 1 + rng() % (64 / kw);
      p.off_a = static_cast<uint8_t>(kw);
      p.period = static_cast<uint8_t>(std::max<uint32_t>(2, kw * kh));
      if (p.period % kw) p.off_a = 1;
    }
    IntLuts L;
    build_int_luts(p, &L);
    const int32_t ranges[] = {1, 8, 128, 5000, 1 << 29};
    const int32_t range = ranges[trial % 5];
    std::vector<int32_t> res(uint64_t{h} * w);
    for (auto& v : res) v = static_cast<int32_t>(rng() % (2u * range + 1)) - range;
    std::vector<uint8_t> cc(w);
    for (auto& c : cc) c = static_cast<uint8_t>(rng() % 32);
    std::vector<uint32_t> kp(w);
    for (uint32_t c = 0; c < w; ++c) kp[c] = p.period ? (c + 5) % p.period : 0;
    const uint32_t reach = int_row_reach(p);
    if (reach >= w) continue;
    for (uint32_t r = 0; r < h; ++r) {
      const uint32_t rowpart = p.use_rc ? static_cast<uint32_t>(rng() % 32) : 0u;
      const IntRowArgs a{&p, &L, res.data() + uint64_t{r} * w, r ? res.data() + uint64_t{r - 1} * w : nullptr,
                         p.use_cc ? cc.data() : nullptr, kp.data(), rowpart};
      std::vector<uint32_t> vec(w), sca(w);
      int_row_contexts(a, reach, w, vec.data());
      int_row_contexts_scalar(a, reach, w, sca.data());
      for (uint32_t c = reach; c < w; ++c) {
        const uint32_t sc = L.scale[rowpart + (p.use_cc ? cc[c] : 0u)];
        const uint32_t want = int_ctx(p, L, res.data(), w, r, c, 0, 0, sc, kp[c]);
        ASSERT_EQ(vec[c - reach], want) << "trial " << trial << " mode " << int(p.nbr_mode) << " row " << r << " col " << c;
        ASSERT_EQ(sca[c - reach], want) << "trial " << trial << " mode " << int(p.nbr_mode) << " row " << r << " col " << c;
        ASSERT_LT(want, int_nctx(p));
        if (p.nbr_mode == 3) {  // the format document's formula (§9.3)
          const int32_t* row = res.data() + uint64_t{r} * w;
          const int32_t lk = kp[c] % p.off_a ? row[c - 1] : 0, uk = kp[c] >= p.off_a ? row[c - p.off_a] : 0;
          auto q = [](int32_t v) { return v > 0 ? 1u : (v < 0 ? 2u : 0u); };
          const uint32_t a = std::min<uint32_t>(static_cast<uint32_t>(std::abs(lk)) + static_cast<uint32_t>(std::abs(uk)), 1023);
          uint32_t act = 0;
          for (uint32_t i = 0; i + 1 < p.nb; ++i) act += a >= p.thr[i];
          ASSERT_EQ(want, 9 * (p.nb * sc + act) + 3 * q(lk) + q(uk)) << "trial " << trial << " col " << c;
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 90000);
}

// The side information's row and column magnitude sums (eight at a time
// where AVX2 is available) equal the plain sums, with the largest magnitude.
TEST(IntRowContexts, AbsSumsEqualPlainSums) {
  std::mt19937 rng(3);
  for (uint64_t n : {1u, 7u, 8u, 9u, 64u, 1000u}) {
    std::vector<int32_t> v(n);
    for (auto& x : v) x = static_cast<int32_t>(rng() % 511) - 255;
    std::vector<uint32_t> col(n, 5), want_col(n, 5);
    uint64_t want = 0;
    uint32_t want_max = 3, got_max = 3;
    for (uint64_t i = 0; i < n; ++i) {
      const uint32_t a = static_cast<uint32_t>(std::abs(v[i]));
      want += a;
      want_col[i] += a;
      want_max = std::max(want_max, a);
    }
    EXPECT_EQ(int_abs_sums(v.data(), n, col.data(), &got_max), want) << n;
    EXPECT_EQ(col, want_col) << n;
    EXPECT_EQ(got_max, want_max) << n;
  }
}

namespace {

// Decodes every model chunk of et with decode_chunk (the library's path:
// vector tables first, reference tables where a vector decoder declines)
// and compares with the original bytes.
void decode_all_chunks(const EncodedTensor& et, const uint8_t* orig, const std::string& what) {
  DecodeScratch scratch;
  for (uint64_t i = 0; i < et.chunks.size(); ++i) {
    const auto& c = et.chunks[i];
    std::vector<uint8_t> out(c.decoded_size);
    ASSERT_TRUE(decode_chunk(et.geom, &et.model, i, c.method, c.payload.data(), c.payload.size(), c.decoded_size,
                             c.xxh3, nullptr, 0, 0, out.data(), scratch, what)
                    .ok())
        << what << " chunk " << i;
    uint64_t row0, col0, h, w;
    et.geom.chunk_rect(i, &row0, &col0, &h, &w);
    ASSERT_EQ(et.geom.chunk_cols, et.geom.cols) << what;  // whole-row chunks: bytes are contiguous
    ASSERT_EQ(0, std::memcmp(out.data(), orig + row0 * et.geom.row_bytes(), out.size())) << what << " chunk " << i;
  }
}

// Views for the vector decoders carry no reference tables (t0 / t1) unless
// the CPU lacks the vector decoders; a full view adds them. Tables evicted
// by the budget leave their slot storage for the next build: a model
// rebuilt after eviction gets its own storage back, and decodes right.
TEST(DecodingTables, VectorViewsSkipReferenceTablesAndEvictedStorageIsReused) {
  const std::string name = "isnet-medium.f16.safetensors";
  const auto f = wctest::read_file(wctest::data_dir() / name);
  auto h = parse_safetensors_header(f.data(), f.size(), f.size(), name);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  // A float tensor whose model has at least 8 contexts in each table set
  // (16 KiB of slots each: storage large enough to be binned), encoded with
  // 12-bit tables (9-bit ones are read as 1/8-slot entries, no slot storage).
  EncodeOptions exact;
  exact.x8_tables = false;
  const TensorInfo* pick = nullptr;
  EncodedTensor et[3];
  for (const auto& t : h->tensors) {
    if (t.nbytes() < (256u << 10)) continue;
    auto r = encode_tensor(t, f.data() + h->data_start + t.begin, AuxInput{}, exact);
    ASSERT_TRUE(r.ok()) << t.name;
    if (r->model.kind == ModelKind::kFloat && r->model.t0.size() >= 8 && r->model.t1.size() >= 8 &&
        r->chunks[0].method == ChunkMethod::kModel) {
      pick = &t;
      et[0] = std::move(r).value();
      break;
    }
  }
  ASSERT_NE(pick, nullptr) << name << ": no float tensor with 8 contexts in each table set";
  const uint8_t* orig = f.data() + h->data_start + pick->begin;
  // Three models of the same tensor (three table slots of one size).
  for (int k = 1; k < 3; ++k) {
    auto r = encode_tensor(*pick, orig, AuxInput{}, exact);
    ASSERT_TRUE(r.ok());
    et[k] = std::move(r).value();
  }
  const bool vec = vector_decoder_available();  // any vector path: avx512, avx2, neon
  if (!vec) std::printf("[ NOTE ] no vector decoders on this CPU: every view carries the reference tables\n");

  set_vector_table_budget(0);  // empties the cache and the storage bin
  set_vector_table_budget(UINT64_MAX);
  uint64_t vector_only = 0;
  {
    std::shared_ptr<const TensorModel::VectorTables> hold;
    const uint64_t before = vector_table_bytes();
    const ModelView mv = et[0].model.view(&hold, nullptr, 0, TensorModel::TableUse::kVector);
    vector_only = vector_table_bytes() - before;
    if (vec) {
      EXPECT_NE(mv.slot_all, nullptr);
      EXPECT_NE(mv.slot1_all, nullptr);
      EXPECT_EQ(mv.t0, nullptr);
      EXPECT_EQ(mv.t1, nullptr);
    } else {
      EXPECT_EQ(mv.slot_all, nullptr);  // no vector decoder would read them
      EXPECT_EQ(mv.slot1_all, nullptr);
    }
    // The reference decoder's view rebuilds them with t0 / t1.
    std::shared_ptr<const TensorModel::VectorTables> hold2;
    const ModelView full = et[0].model.view(&hold2);
    ASSERT_NE(full.t0, nullptr);
    ASSERT_NE(full.t1, nullptr);
    if (vec) EXPECT_GT(vector_table_bytes() - before, vector_only + et[0].model.t0.size() * 4096);
    else EXPECT_EQ(vector_table_bytes() - before, vector_only);  // built with them the first time
  }
  decode_all_chunks(et[0], orig, pick->name);
  if (!vec) {
    std::printf("[ SKIPPED ] slot storage reuse: no slot tables are built without the vector decoders\n");
    set_vector_table_budget(kDefaultVectorTableBudget);
    return;
  }
  ASSERT_GE(vector_only, 2u * (128u << 10));

  // Room for two models' tables: the third evicts the oldest, whose storage
  // goes to the bin (half the budget) and back to that model's rebuild.
  set_vector_table_budget(0);
  set_vector_table_budget(vector_only * 5 / 2);
  const uint32_t* first_slots = nullptr;
  const uint32_t* first_slots1 = nullptr;
  for (int k = 0; k < 3; ++k) {
    std::shared_ptr<const TensorModel::VectorTables> hold;
    const ModelView mv = et[k].model.view(&hold, nullptr, 0, TensorModel::TableUse::kVector);
    if (k == 0) {
      first_slots = mv.slot_all;
      first_slots1 = mv.slot1_all;
    }
  }
  EXPECT_LE(vector_table_bytes(), vector_only * 5 / 2);  // the first model's tables are evicted
  const uint64_t slot_bytes = (et[0].model.t0.size() + et[0].model.t1.size()) * 4096 * sizeof(uint32_t);
  const uint64_t spare = vector_table_spare_bytes();
  EXPECT_EQ(spare, slot_bytes) << "the evicted tables' storage was not kept";
  // With room for all three, the first model's rebuild evicts nothing and
  // takes the kept storage.
  set_vector_table_budget(UINT64_MAX);
  {
    std::shared_ptr<const TensorModel::VectorTables> hold;
    const ModelView mv = et[0].model.view(&hold, nullptr, 0, TensorModel::TableUse::kVector);
    EXPECT_EQ(mv.slot_all, first_slots) << "the rebuilt tables did not reuse the evicted storage";
    EXPECT_EQ(mv.slot1_all, first_slots1) << "the rebuilt tables did not reuse the evicted storage";
  }
  EXPECT_EQ(vector_table_spare_bytes(), 0u);
  for (int k = 0; k < 3; ++k) decode_all_chunks(et[k], orig, pick->name);
  set_vector_table_budget(kDefaultVectorTableBudget);
}

}  // namespace
