// tests/test_device_plan.cpp — DevicePlan (codec/decompress/device_plan.h), the
// layout the CUDA batch decoder uploads, run on the host: every chunk of
// every real model file and of the edge-case set is planned, relocated to
// the host arena and decoded with run_plan_chunk_g (the code the GPU kernel
// runs, one warp per chunk) over two lane groups: the host group, and a warp
// emulation that renormalizes from a ballot as the warp does and runs the
// lanes of every step in a scrambled order, so that a lane reading what
// another lane writes in the same step (a race on the GPU) changes the
// bytes. The bytes equal the Reader's, and damaged payload bytes are caught
// by the stream checks or the checksum, never returned as good.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "device_plan.h"
#include "edge_cases.h"
#include "testutil.h"
#include "wcodec/container.h"

namespace {

namespace fs = std::filesystem;
using wcodec::DevicePlan;

struct Planned {
  std::unique_ptr<wcodec::Reader> reader;
  std::vector<uint8_t> original;
};

Planned open_encoded(const std::string& file, const wctest::ScratchDir& dir) {
  Planned p;
  p.original = wctest::read_file(wctest::data_dir() / file);
  p.reader = wctest::encode_and_open(p.original, file, dir);
  return p;
}

// The warp group (cuda/warp_group.cuh) emulated on the host: lanes run in
// a scrambled order within each step, renormalization works from the ballot
// mask like the warp's.
struct EmulatedWarp : wcodec::HostGroup {
  uint32_t order[wcodec::kLanes];
  explicit EmulatedWarp(uint32_t seed) {
    for (uint32_t l = 0; l < wcodec::kLanes; ++l) order[l] = l;
    std::shuffle(order, order + wcodec::kLanes, std::mt19937(seed));
  }
  template <class F>
  void each(F&& f) {
    for (uint32_t k = 0; k < wcodec::kLanes; ++k) f(order[k]);
  }
  template <class F>
  void renorm(Lanes<uint32_t>& x, wcodec::WordSource& ws, F&& active) {
    bool need[wcodec::kLanes];
    uint32_t mask = 0;
    each([&](uint32_t l) {
      need[l] = active(l) && x[l] < wcodec::kRansL;
      mask |= uint32_t{need[l]} << l;
    });
    each([&](uint32_t l) { wcodec::ballot_renorm_lane(x[l], need[l], mask, l, ws); });
    wcodec::ballot_advance(ws, mask);
  }
};

// Runs the plan on the host (with the warp emulation when emulate is set);
// returns per-chunk results and the output region.
// float_direct: float chunks through decode_float_direct_g where they fit
// (else the grid decoder, decode_float_chunk_g).
std::vector<int> run_on_host(DevicePlan& plan, std::vector<uint8_t>* out, bool emulate = false,
                             uint32_t paths = wcodec::kPathsAll, bool fast = true) {
  std::vector<wcodec::ModelView> views;
  wcodec::relocate(plan, plan.arena.data(), &views);
  out->assign(plan.out_bytes, 0xEE);
  std::vector<uint8_t> scratch(plan.scratch_bytes + 16, 0xA5);
  std::vector<int> results;
  std::vector<uint16_t> fast_mem(wcodec::kStartsCap, 0x5A5A);
  uint16_t* f = fast ? fast_mem.data() : nullptr;
  uint32_t seed = 1;
  for (const auto& c : plan.chunks) {
    if (emulate) {
      EmulatedWarp g(seed++);
      results.push_back(wcodec::run_plan_chunk_g(g, c, views.data(), plan.arena.data(), out->data(), scratch.data(),
                                                 wcodec::kXxh3Secret, paths, f));
    } else {
      results.push_back(wcodec::run_plan_chunk(c, views.data(), plan.arena.data(), out->data(), scratch.data(),
                                               wcodec::kXxh3Secret, paths, f));
    }
  }
  return results;
}

// Chunks of the plan that decode_float_direct_g or decode_int_direct_g take.
size_t direct_chunks(const DevicePlan& plan) {
  size_t n = 0;
  for (const auto& c : plan.chunks) {
    if (c.kind != wcodec::PlanKind::kModel) continue;
    const wcodec::ModelView& mv = plan.models[c.model].mv;
    const uint64_t cap = wcodec::plan_scratch_bytes(mv.kind, uint64_t{c.cv.h} * c.cv.w);
    uint32_t ring_w = 0;
    if (mv.kind == wcodec::ModelKind::kFloat) n += wcodec::float_direct_fits(mv.fp, c.cv, c.tail != 0, cap, &ring_w);
    if (mv.kind == wcodec::ModelKind::kInt) n += wcodec::int_direct_fits(mv, c.cv, c.map != wcodec::kPlanNone, cap, &ring_w);
  }
  return n;
}

// Plans every chunk of `rd`, runs it five ways (host group and warp
// emulation with every decoder and fast memory for the starts tables; warp
// emulation without fast memory; with the direct float decoder on its slot
// tables; with the grid decoders only), compares with `original`. Returns
// the float and int chunks the direct decoders took.
size_t expect_plan_equals_file(const wcodec::Reader& rd, const std::vector<uint8_t>& original, const std::string& what) {
  std::vector<size_t> all(rd.num_chunks());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  size_t direct = 0;
  for (int mode = 0; mode < 5; ++mode) {
    const bool emulate = mode > 0, fast = mode < 2;
    const uint32_t paths = mode < 3    ? wcodec::kPathsAll
                           : mode == 3 ? wcodec::kPathFloatDirect | wcodec::kPathIntDirect
                                       : 0u;
    const char* how = mode == 0   ? " "
                      : mode == 1 ? " (warp emulation) "
                      : mode == 2 ? " (warp emulation, starts searched in place) "
                      : mode == 3 ? " (warp emulation, direct float decoder with slot tables) "
                                  : " (warp emulation, grid decoders) ";
    DevicePlan plan;
    EXPECT_TRUE(wcodec::plan_chunks(rd, all, &plan).ok()) << what;
    EXPECT_EQ(plan.chunks.size(), all.size());
    if (plan.chunks.size() != all.size()) return direct;
    direct = direct_chunks(plan);
    std::vector<uint8_t> out;
    const auto results = run_on_host(plan, &out, emulate, paths, fast);
    for (size_t k = 0; k < plan.chunks.size(); ++k) {
      const auto& e = rd.chunk(plan.chunk_index[k]);
      EXPECT_EQ(results[k], wcodec::kPlanOk) << what << how << rd.describe_chunk(plan.chunk_index[k]);
      EXPECT_EQ(0, std::memcmp(out.data() + plan.chunks[k].out, original.data() + e.decoded_offset, e.decoded_size))
          << what << how << rd.describe_chunk(plan.chunk_index[k]);
      if (results[k] != wcodec::kPlanOk) return direct;
    }
  }
  return direct;
}

class DevicePlanFile : public ::testing::TestWithParam<const char*> {};

TEST_P(DevicePlanFile, HostRunOfThePlanEqualsTheReader) {
  wctest::ScratchDir dir;
  Planned p = open_encoded(GetParam(), dir);
  ASSERT_TRUE(p.reader);
  const wcodec::Reader& rd = *p.reader;
  std::vector<size_t> all(rd.num_chunks());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  DevicePlan plan;
  ASSERT_TRUE(wcodec::plan_chunks(rd, all, &plan).ok());
  ASSERT_EQ(plan.chunks.size(), all.size());
  uint64_t model_bytes = 0, total = 0;
  for (const auto& c : plan.chunks) {
    total += c.out_len;
    if (c.kind == wcodec::PlanKind::kModel) model_bytes += c.out_len;
  }
  EXPECT_GT(model_bytes, total / 5) << "the weight matrices of a real model are model-coded";
  const size_t direct = expect_plan_equals_file(rd, p.original, GetParam());
  const std::string name = GetParam();
  EXPECT_GT(direct, 0u) << "float and int chunks take the direct decoders";
  size_t model_chunks = 0;
  for (const auto& c : plan.chunks) model_chunks += c.kind == wcodec::PlanKind::kModel;
  std::printf("%s: %zu of %zu model-coded chunks take the direct decoders\n", GetParam(), direct, model_chunks);
}

INSTANTIATE_TEST_SUITE_P(RealFiles, DevicePlanFile,
                         ::testing::Values("stories260K.bf16.safetensors", "stories260K.f32.safetensors",
                                           "stories260K.rtn-int8.safetensors", "stories260K.rtn-int4.safetensors",
                                           "stories260K.rtn-ternary.safetensors", "silero_vad_16k.bf16.safetensors",
                                           "silero_vad_16k.f32.safetensors",
                                           // column-phase ternary contexts (format 2.1)
                                           "isnet-medium.rtn-ternary.safetensors"));

// The edge-case set (every dtype, scalars, empty tensors, odd shapes,
// constant and random data), a smooth int8 tensor and large tensors of the
// kinds whose small edge cases go without a model, planned and run both
// ways. Tile maps (int
// chunks with prediction or transforms) and raw tails (small float chunks)
// occur in it, so the warp's tile wavefront and shared tail are exercised.
TEST(DevicePlan, EdgeCasesDecodeAsTheReaderDoes) {
  wctest::ScratchDir dir;
  size_t tiled = 0, tails = 0, model = 0;
  auto cases = wctest::make_edge_cases();
  cases.push_back({"smooth_int8", wctest::make_smooth_int8_file()});
  cases.push_back({"model_kinds", wctest::make_model_kinds_file()});
  for (const auto& ec : cases) {
    SCOPED_TRACE(ec.name);
    auto r = wctest::encode_and_open(ec.file, ec.name, dir);
    ASSERT_TRUE(r);
    std::vector<size_t> all(r->num_chunks());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    DevicePlan plan;
    ASSERT_TRUE(wcodec::plan_chunks(*r, all, &plan).ok());
    for (const auto& c : plan.chunks) {
      model += c.kind == wcodec::PlanKind::kModel;
      tiled += c.map != wcodec::kPlanNone;
      tails += c.tail != 0;
    }
    expect_plan_equals_file(*r, ec.file, ec.name);
  }
  EXPECT_GE(model, 20u);
  EXPECT_GT(tiled, 0u) << "no int chunk with a tile map: the tile wavefront went untested";
  EXPECT_GT(tails, 0u) << "no float chunk with a raw tail went through the shared tail buffer";
}

// Plans of several files appended into one (one launch for all of them):
// the host run of the merged plan equals each file's bytes at its place.
// Arenas from a caller's memory (the GPU decoder's page-locked memory, which
// is slow to allocate): plan_chunks sizes the arena once, keeps its memory
// when a plan is built again, and the plan decodes as a heap one does.
std::atomic<int> g_arena_allocs{0}, g_arena_live{0};
void* counting_alloc(size_t n) {
  ++g_arena_allocs;
  ++g_arena_live;
  return std::malloc(n);
}
void counting_release(void* p) {
  --g_arena_live;
  std::free(p);
}
const wcodec::ArenaMemory kCounting{counting_alloc, counting_release};

TEST(DevicePlan, ArenaMemoryIsAllocatedOnceAndKept) {
  wctest::ScratchDir dir;
  for (const char* file : {"silero_vad_16k.f32.safetensors", "stories260K.rtn-int4.safetensors"}) {
    Planned p = open_encoded(file, dir);
    ASSERT_TRUE(p.reader);
    const wcodec::Reader& rd = *p.reader;
    std::vector<size_t> all(rd.num_chunks());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    g_arena_allocs = 0;
    {
      DevicePlan plan(&kCounting);
      ASSERT_TRUE(wcodec::plan_chunks(rd, all, &plan).ok());
      EXPECT_EQ(g_arena_allocs.load(), 1) << file << ": the arena grew after its reservation";
      EXPECT_LE(plan.arena.size(), plan.arena.capacity());
      // Built again (a subset, then all): the same memory.
      std::vector<size_t> half(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(all.size() / 2));
      ASSERT_TRUE(wcodec::plan_chunks(rd, half, &plan).ok());
      ASSERT_TRUE(wcodec::plan_chunks(rd, all, &plan).ok());
      EXPECT_EQ(g_arena_allocs.load(), 1) << file;
      std::vector<uint8_t> out;
      const auto results = run_on_host(plan, &out);
      for (size_t k = 0; k < plan.chunks.size(); ++k) {
        const auto& e = rd.chunk(plan.chunk_index[k]);
        ASSERT_EQ(results[k], wcodec::kPlanOk) << file << " " << rd.describe_chunk(plan.chunk_index[k]);
        ASSERT_EQ(0, std::memcmp(out.data() + plan.chunks[k].out, p.original.data() + e.decoded_offset,
                                 e.decoded_size));
      }
    }
    EXPECT_EQ(g_arena_live.load(), 0) << "the arena went back to its memory";
  }
}

TEST(DevicePlan, AppendedPlansOfSeveralFilesDecodeAsOne) {
  wctest::ScratchDir dir;
  const char* files[] = {"stories260K.rtn-int8.safetensors", "stories260K.bf16.safetensors",
                         "stories260K.rtn-int4.safetensors", "stories260K.rtn-ternary.safetensors",
                         "stories260K.rtn-int8.safetensors"};
  std::vector<Planned> ps;
  DevicePlan merged;
  std::vector<uint64_t> base;
  for (const char* f : files) {
    ps.push_back(open_encoded(f, dir));
    ASSERT_TRUE(ps.back().reader);
    const wcodec::Reader& rd = *ps.back().reader;
    std::vector<size_t> all(rd.num_chunks());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    DevicePlan plan;
    ASSERT_TRUE(wcodec::plan_chunks(rd, all, &plan).ok());
    base.push_back(merged.chunks.size());
    wcodec::append_plan(merged, plan);
  }
  base.push_back(merged.chunks.size());
  std::vector<uint8_t> out;
  const auto results = run_on_host(merged, &out);
  for (size_t f = 0; f < ps.size(); ++f) {
    const wcodec::Reader& rd = *ps[f].reader;
    ASSERT_EQ(base[f + 1] - base[f], rd.num_chunks());
    for (size_t k = base[f]; k < base[f + 1]; ++k) {
      const auto& e = rd.chunk(merged.chunk_index[k]);
      ASSERT_EQ(results[k], wcodec::kPlanOk) << files[f] << " " << rd.describe_chunk(merged.chunk_index[k]);
      ASSERT_EQ(0, std::memcmp(out.data() + merged.chunks[k].out, ps[f].original.data() + e.decoded_offset,
                               e.decoded_size))
          << files[f] << " " << rd.describe_chunk(merged.chunk_index[k]);
    }
  }
}

TEST(DevicePlan, DamagedPayloadsAreNeverReturnedAsGood) {
  wctest::ScratchDir dir;
  Planned p = open_encoded("stories260K.rtn-int8.safetensors", dir);
  ASSERT_TRUE(p.reader);
  const wcodec::Reader& rd = *p.reader;
  std::vector<size_t> all(rd.num_chunks());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  std::mt19937 rng(7);
  size_t caught = 0;
  for (int trial = 0; trial < 40; ++trial) {
    DevicePlan plan;
    ASSERT_TRUE(wcodec::plan_chunks(rd, all, &plan).ok());
    const size_t k = rng() % plan.chunks.size();
    const auto& c = plan.chunks[k];
    // A byte of this chunk's coded stream (after the lane states) or of its
    // ready bytes.
    const uint64_t at = c.kind == wcodec::PlanKind::kModel && c.rans_len > 4 * 32
                            ? c.rans + 4 * 32 + rng() % (c.rans_len - 4 * 32)
                            : c.raw + rng() % std::max<uint64_t>(1, c.raw_len);
    plan.arena[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
    std::vector<uint8_t> out;
    const auto results = run_on_host(plan, &out);
    for (size_t j = 0; j < plan.chunks.size(); ++j) {
      const auto& e = rd.chunk(plan.chunk_index[j]);
      const bool same =
          std::memcmp(out.data() + plan.chunks[j].out, p.original.data() + e.decoded_offset, e.decoded_size) == 0;
      if (results[j] == wcodec::kPlanOk) {
        ASSERT_TRUE(same) << "wrong bytes reported good: chunk " << j;
      } else {
        ASSERT_EQ(j, k) << "an undamaged chunk failed";
        ++caught;
      }
    }
  }
  EXPECT_GT(caught, 30u) << "most single-bit flips must be detected";
}

}  // namespace
