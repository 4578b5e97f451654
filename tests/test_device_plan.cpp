// tests/test_device_plan.cpp — DevicePlan (codec/src/device_plan.h), the
// layout the CUDA batch decoder uploads, run on the host: every chunk of
// every real model file is planned, relocated to the host arena and decoded
// with run_plan_chunk (the code the GPU kernel runs); the bytes equal the
// Reader's, and damaged payload bytes are caught by the stream checks or
// the checksum, never returned as good.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "device_plan.h"
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
  auto enc = wcodec::encode_safetensors(p.original.data(), p.original.size(), wcodec::EncodeConfig{}, file);
  EXPECT_TRUE(enc.ok()) << enc.status().ToString();
  if (!enc.ok()) return p;
  const fs::path path = dir / (file + ".wcodec");
  wctest::write_file(path, *enc);
  auto r = wcodec::Reader::open(path.string());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (r.ok()) p.reader = std::move(r).value();
  return p;
}

// Runs the plan on the host; returns per-chunk results and the output region.
std::vector<int> run_on_host(DevicePlan& plan, std::vector<uint8_t>* out) {
  std::vector<wcodec::ModelView> views;
  wcodec::relocate(plan, plan.arena.data(), &views);
  out->assign(plan.out_bytes, 0xEE);
  std::vector<uint8_t> scratch(plan.scratch_bytes + 16);
  std::vector<int> results;
  for (const auto& c : plan.chunks)
    results.push_back(wcodec::run_plan_chunk(c, views.data(), plan.arena.data(), out->data(), scratch.data(),
                                             wcodec::kXxh3Secret));
  return results;
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
  ASSERT_TRUE(rd.plan_chunks(all, &plan).ok());
  ASSERT_EQ(plan.chunks.size(), all.size());
  uint64_t model_bytes = 0, total = 0;
  for (const auto& c : plan.chunks) {
    total += c.out_len;
    if (c.kind == wcodec::PlanKind::kModel) model_bytes += c.out_len;
  }
  EXPECT_GT(model_bytes, total / 5) << "the weight matrices of a real model are model-coded";
  std::vector<uint8_t> out;
  const auto results = run_on_host(plan, &out);
  for (size_t k = 0; k < plan.chunks.size(); ++k) {
    const auto& e = rd.chunk(plan.chunk_index[k]);
    ASSERT_EQ(results[k], wcodec::kPlanOk) << rd.describe_chunk(plan.chunk_index[k]);
    ASSERT_EQ(0, std::memcmp(out.data() + plan.chunks[k].out, p.original.data() + e.decoded_offset, e.decoded_size))
        << rd.describe_chunk(plan.chunk_index[k]);
  }
}

INSTANTIATE_TEST_SUITE_P(RealFiles, DevicePlanFile,
                         ::testing::Values("stories260K.bf16.safetensors", "stories260K.f32.safetensors",
                                           "stories260K.rtn-int8.safetensors", "stories260K.rtn-int4.safetensors",
                                           "stories260K.rtn-ternary.safetensors", "silero_vad_16k.bf16.safetensors",
                                           "silero_vad_16k.f32.safetensors"));

// Plans of several files appended into one (one launch for all of them):
// the host run of the merged plan equals each file's bytes at its place.
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
    ASSERT_TRUE(rd.plan_chunks(all, &plan).ok());
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
    ASSERT_TRUE(rd.plan_chunks(all, &plan).ok());
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
