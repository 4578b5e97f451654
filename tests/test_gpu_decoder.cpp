// tests/test_gpu_decoder.cpp — the CUDA batch decoder (cuda/) against the
// CPU decoder on every real model file: byte-identical output to host and
// to device memory, damaged chunks reported and never returned as good, and
// the mount's GPU BatchDecoder. Without a CUDA build or a device every test
// says so in its skip line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "edge_cases.h"
#include "testutil.h"
#include "wcodec/container.h"

#if WCODEC_HAVE_CUDA
#include "device_plan.h"
#include "wcodecfs/gpu_batch_decoder.h"
#include "wcodec_gpu/gpu_decoder.h"
#include "wcodecfs/chunk_source.h"
#include "wcodecfs/wcodec_kind.h"
#endif

namespace {

namespace fs = std::filesystem;

#if WCODEC_HAVE_CUDA

#define REQUIRE_GPU()                                                                         \
  do {                                                                                        \
    const auto info = wcodec::gpu::probe();                                                   \
    if (!info.usable) GTEST_SKIP() << "GPU tests did not run: " << info.why_not;              \
  } while (0)

struct Encoded {
  std::vector<uint8_t> original;
  std::unique_ptr<wcodec::Reader> reader;
};

Encoded encode_bytes(std::vector<uint8_t> original, const std::string& file, const wctest::ScratchDir& dir) {
  Encoded e;
  e.original = std::move(original);
  e.reader = wctest::encode_and_open(e.original, file, dir);
  return e;
}

Encoded encode(const fs::path& file, const wctest::ScratchDir& dir) {
  return encode_bytes(wctest::read_file(file), file.filename().string(), dir);
}

// Every model file of the data directory (WCODEC_DATA overrides it, so a
// machine with a GPU but without the whole set can run a subset).
std::vector<fs::path> model_files() {
  auto files = wctest::data_safetensors_files();
  EXPECT_FALSE(files.empty()) << "no *.safetensors in " << wctest::data_dir();
  return files;
}

// Every chunk of `e` decoded on the GPU to the host equals the original.
void expect_gpu_equals_file(wcodec::gpu::GpuDecoder& dec, const Encoded& e, const std::string& what) {
  const wcodec::Reader& rd = *e.reader;
  std::vector<size_t> all(rd.num_chunks());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  wcodec::DevicePlan plan;
  ASSERT_TRUE(wcodec::plan_chunks(rd, all, &plan).ok()) << what;
  std::vector<uint8_t> out(plan.out_bytes);
  std::vector<int> results;
  ASSERT_TRUE(dec.run_to_host(plan, out.data(), &results).ok()) << what;
  for (size_t k = 0; k < plan.chunks.size(); ++k) {
    const auto& c = rd.chunk(plan.chunk_index[k]);
    ASSERT_EQ(results[k], wcodec::kPlanOk) << what << " " << rd.describe_chunk(plan.chunk_index[k]);
    ASSERT_EQ(0, std::memcmp(out.data() + plan.chunks[k].out, e.original.data() + c.decoded_offset, c.decoded_size))
        << what << " " << rd.describe_chunk(plan.chunk_index[k]);
  }
}

// Runs on every CUDA build: the probe a daemon makes before it forks agrees
// with asking in this process, and says why when there is no device.
TEST(GpuDecoder, ProbeInAChildAgreesAndSaysWhy) {
  const std::string why = wcodecfs::probe_gpu_in_child();
  const auto info = wcodec::gpu::probe();
  EXPECT_EQ(why.empty(), info.usable) << why;
  if (!info.usable) {
    EXPECT_FALSE(why.empty());
    EXPECT_FALSE(wcodec::gpu::GpuDecoder::create().ok());
  }
}

TEST(GpuDecoder, EveryRealFileToHostAndToDeviceEqualsTheCpu) {
  REQUIRE_GPU();
  auto dec = wcodec::gpu::GpuDecoder::create();
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  wctest::ScratchDir dir;
  for (const fs::path& file : model_files()) {
    SCOPED_TRACE(file.string());
    Encoded e = encode(file, dir);
    ASSERT_TRUE(e.reader);
    expect_gpu_equals_file(**dec, e, file.filename().string());
    const wcodec::Reader& rd = *e.reader;
    auto dbuf = wcodec::gpu::decode_file_to_device(rd, **dec);
    ASSERT_TRUE(dbuf.ok()) << dbuf.status().ToString();
    std::vector<uint8_t> back(dbuf->size());
    ASSERT_TRUE(dbuf->copy_to_host(0, back.size(), back.data()).ok());
    ASSERT_EQ(back.size(), e.original.size() - rd.data_start());
    EXPECT_EQ(0, std::memcmp(back.data(), e.original.data() + rd.data_start(), back.size()));
  }
}

// The codec tests' edge-case set and a tensor whose tiles use prediction
// and transforms (the warp's tile wavefront).
TEST(GpuDecoder, EdgeCasesEqualTheCpu) {
  REQUIRE_GPU();
  auto dec = wcodec::gpu::GpuDecoder::create();
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  wctest::ScratchDir dir;
  auto cases = wctest::make_edge_cases();
  cases.push_back({"smooth_int8", wctest::make_smooth_int8_file()});
  for (auto& ec : cases) {
    Encoded e = encode_bytes(std::move(ec.file), ec.name, dir);
    ASSERT_TRUE(e.reader) << ec.name;
    expect_gpu_equals_file(**dec, e, ec.name);
  }
}

TEST(GpuDecoder, DamagedChunksAreReportedNotReturned) {
  REQUIRE_GPU();
  auto dec = wcodec::gpu::GpuDecoder::create();
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  wctest::ScratchDir dir;
  Encoded e = encode(wctest::data_dir() / "stories260K.rtn-int8.safetensors", dir);
  ASSERT_TRUE(e.reader);
  const wcodec::Reader& rd = *e.reader;
  std::vector<size_t> all(rd.num_chunks());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  std::mt19937 rng(11);
  size_t caught = 0;
  for (int trial = 0; trial < 20; ++trial) {
    wcodec::DevicePlan plan;
    ASSERT_TRUE(wcodec::plan_chunks(rd, all, &plan).ok());
    const size_t k = rng() % plan.chunks.size();
    const auto& c = plan.chunks[k];
    const uint64_t at = c.kind == wcodec::PlanKind::kModel && c.rans_len > 128 ? c.rans + 128 + rng() % (c.rans_len - 128)
                                                                                : c.raw + rng() % std::max<uint64_t>(1, c.raw_len);
    plan.arena[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
    std::vector<uint8_t> out(plan.out_bytes);
    std::vector<int> results;
    ASSERT_TRUE((*dec)->run_to_host(plan, out.data(), &results).ok());
    for (size_t j = 0; j < plan.chunks.size(); ++j) {
      const auto& ce = rd.chunk(plan.chunk_index[j]);
      const bool same = std::memcmp(out.data() + plan.chunks[j].out, e.original.data() + ce.decoded_offset,
                                    ce.decoded_size) == 0;
      if (results[j] == wcodec::kPlanOk) {
        ASSERT_TRUE(same) << "wrong bytes reported good";
      } else {
        ASSERT_EQ(j, k);
        ++caught;
      }
    }
  }
  EXPECT_GT(caught, 15u);
}

// The mount's batch decoder, fed the chunks of two containers interleaved
// in one batch (decoded in one launch from the merged plans): the largest
// model file and the smallest.
TEST(GpuDecoder, MountBatchDecoderServesChunks) {
  REQUIRE_GPU();
  wctest::ScratchDir dir;
  struct File {
    Encoded e;
    std::shared_ptr<wcodecfs::ChunkSource> src;
  };
  std::vector<File> files;
  auto all = model_files();
  ASSERT_FALSE(all.empty());
  const auto by_size = [](const fs::path& a, const fs::path& b) { return fs::file_size(a) < fs::file_size(b); };
  const fs::path largest = *std::max_element(all.begin(), all.end(), by_size);
  const fs::path smallest = *std::min_element(all.begin(), all.end(), by_size);
  for (const fs::path& f : {largest, smallest}) {
    File file{encode(f, dir), nullptr};
    ASSERT_TRUE(file.e.reader) << f;
    std::shared_ptr<const wcodec::Reader> reader(std::move(file.e.reader));
    auto src = wcodecfs::WcodecChunkSource::make(reader, f.stem().string() + ".wcodec");
    ASSERT_TRUE(src.ok());
    file.src = *src;
    files.push_back(std::move(file));
  }
  wcodecfs::GpuBatchOptions o;
  o.auto_mode = false;
  auto stats = std::make_shared<wcodecfs::Stats>();
  auto dec = wcodecfs::make_gpu_batch_decoder(o, stats);
  ASSERT_TRUE(dec);
  struct Want {
    size_t file, index;
  };
  std::vector<Want> want;
  for (size_t i = 0;; ++i) {
    bool any = false;
    for (size_t f = 0; f < files.size(); ++f)
      if (i < files[f].src->num_chunks()) {
        want.push_back({f, i});
        any = true;
      }
    if (!any) break;
  }
  const size_t n = want.size();
  std::vector<std::vector<uint8_t>> bufs(n);
  std::vector<wcodecfs::Status> st(n);
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  std::vector<wcodecfs::DecodeRequest> batch;
  for (size_t k = 0; k < n; ++k) {
    const auto& src = files[want[k].file].src;
    bufs[k].resize(src->chunk_size(want[k].index));
    wcodecfs::DecodeRequest r;
    r.source = src;
    r.index = want[k].index;
    r.out = bufs[k].data();
    r.done = [&, k](const wcodecfs::Status& s) {
      std::lock_guard<std::mutex> lk(mu);
      st[k] = s;
      ++done;
      cv.notify_all();
    };
    batch.push_back(std::move(r));
  }
  dec->submit(std::move(batch));
  std::unique_lock<std::mutex> lk(mu);
  ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(120), [&] { return done == n; }));
  for (size_t k = 0; k < n; ++k) {
    const File& f = files[want[k].file];
    ASSERT_TRUE(st[k].ok()) << st[k].ToString();
    ASSERT_EQ(0, std::memcmp(bufs[k].data(), f.e.original.data() + f.src->chunk_offset(want[k].index), bufs[k].size()));
  }
  EXPECT_EQ(wcodecfs::Stats::get(stats->chunks_decoded), n);
  dec->shutdown();
}

#else

TEST(GpuDecoder, NotBuilt) {
  GTEST_SKIP() << "GPU tests did not run: this build has no CUDA decoder (configured without CUDA: no nvcc, or WCODEC_CUDA=OFF as in the ASan configuration)";
}

#endif

}  // namespace
