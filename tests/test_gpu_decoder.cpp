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
#include "wcodec/cawsf.h"
#include "wcodec/safetensors.h"
#include "wcodec_gpu/cawsf_apply.h"
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

// ---------------------------------------------------------------- CAWSF apply
// y = W·x on the GPU (cuBLAS + kernels) against the CPU's apply_components
// and a float64 sum of the dense reconstruction: the two float32 results
// differ only by rounding, bounded by the sum of |terms|.
struct ApplyCheck {
  double max_err = 0;  // max |gpu - cpu| / (1 + Σ|W_ij x_j|) over rows
};

ApplyCheck check_apply(const wcodec::cawsf::Components& c, const std::vector<float>& x) {
  ApplyCheck out;
  auto gy = wcodec::gpu::apply_components_cuda(c, x);
  EXPECT_TRUE(gy.ok()) << gy.status().ToString();
  if (!gy.ok()) return out;
  const std::vector<float> cy = wcodec::cawsf::apply_components(c, x);
  EXPECT_EQ(gy->size(), cy.size());
  if (gy->size() != cy.size()) return out;
  // Σ|W_ij x_j| per row from the dense reconstruction (float64 reference too).
  const std::vector<float> w = wcodec::cawsf::densify_rows(c, 0, c.rows);
  for (uint32_t i = 0; i < c.rows; ++i) {
    double ref = 0, mag = 0;
    for (uint32_t j = 0; j < c.cols; ++j) {
      ref += double{w[uint64_t{i} * c.cols + j]} * x[j];
      mag += std::abs(double{w[uint64_t{i} * c.cols + j]} * x[j]);
    }
    const double eg = std::abs((*gy)[i] - ref) / (1 + mag), ec = std::abs(cy[i] - ref) / (1 + mag);
    EXPECT_LT(ec, 1e-5) << "row " << i << ": the CPU's apply is off the reconstruction";
    EXPECT_LT(eg, 1e-5) << "row " << i << ": gpu " << (*gy)[i] << ", reconstruction " << ref;
    out.max_err = std::max(out.max_err, std::abs(double{(*gy)[i]} - cy[i]) / (1 + mag));
  }
  return out;
}

std::vector<float> test_x(uint32_t n) {
  std::vector<float> x(n);
  for (uint32_t j = 0; j < n; ++j) x[j] = std::sin(static_cast<float>(j + 1));
  return x;
}

// Components of every form from a real matrix W (rows x cols) of the data
// set: L from its first columns and rows (factors), D its diagonal, R a PQ
// codebook of its own sub-vectors with codes that cover all but the tail,
// S its largest entries; and the version 1 forms (dense L and D).
std::vector<wcodec::cawsf::Components> components_from(const std::vector<float>& w, uint32_t rows, uint32_t cols) {
  std::mt19937 rng(7);
  std::vector<wcodec::cawsf::Components> out;
  wcodec::cawsf::Components c;
  c.rows = rows;
  c.cols = cols;
  c.rank = 5;
  c.l_a.resize(uint64_t{rows} * c.rank);
  c.l_b.resize(uint64_t{cols} * c.rank);
  for (uint32_t i = 0; i < rows; ++i)
    for (uint32_t t = 0; t < c.rank; ++t) c.l_a[i * c.rank + t] = w[uint64_t{i} * cols + t % cols];
  for (uint32_t j = 0; j < cols; ++j)
    for (uint32_t t = 0; t < c.rank; ++t) c.l_b[j * c.rank + t] = w[uint64_t{t % rows} * cols + j];
  for (uint32_t i = 0; i < std::min(rows, cols); ++i) c.d_diag.push_back(w[uint64_t{i} * cols + i]);
  wcodec::cawsf::Components::Pq q;
  q.d = 24;
  q.m = 4;
  q.k = 16;
  const uint64_t elems = uint64_t{rows} * cols;
  q.n = (elems - 7) / q.d;  // the last elements have no residue
  for (uint64_t e = 0; e < uint64_t{q.k} * q.d; ++e) q.codebook.push_back(w[e % elems] * 0.25f);
  for (uint64_t b = 0; b < q.n * q.m; ++b) q.codes.push_back(static_cast<uint8_t>(rng() % q.k));
  c.r.push_back(q);
  q.d = 128;  // a second residue, sub-vectors crossing rows
  q.m = 8;
  q.k = 4;
  q.n = elems / q.d;
  q.codebook.assign(uint64_t{q.k} * q.d, 0.0f);
  for (uint64_t e = 0; e < q.codebook.size(); ++e) q.codebook[e] = w[(e * 7) % elems] * 0.1f;
  q.codes.clear();
  for (uint64_t b = 0; b < q.n * q.m; ++b) q.codes.push_back(static_cast<uint8_t>(rng() % q.k));
  c.r.push_back(q);
  for (uint64_t e = 0; e < elems; e += 97) {
    c.s_row.push_back(static_cast<uint32_t>(e / cols));
    c.s_col.push_back(static_cast<uint32_t>(e % cols));
    c.s_val.push_back(w[e]);
  }
  out.push_back(c);
  wcodec::cawsf::Components v1 = c;  // version 1: dense L and D
  v1.rank = 0;
  v1.l_a.clear();
  v1.l_b.clear();
  v1.l_dense = w;
  v1.d_diag.clear();
  v1.d_dense.assign(elems, 0.0f);
  for (uint32_t i = 0; i < std::min(rows, cols); ++i) v1.d_dense[uint64_t{i} * cols + i] = w[uint64_t{i} * cols + i];
  out.push_back(v1);
  wcodec::cawsf::Components bare;  // no L, only outliers
  bare.rows = rows;
  bare.cols = cols;
  bare.s_row = c.s_row;
  bare.s_col = c.s_col;
  bare.s_val = c.s_val;
  out.push_back(bare);
  return out;
}

TEST(CawsfApplyGpu, EveryFormOnRealMatricesEqualsTheCpu) {
  REQUIRE_GPU();
  const std::string path = (wctest::data_dir() / "stories260K.f32.safetensors").string();
  auto h = wcodec::read_safetensors_header_file(path);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  const std::vector<uint8_t> bytes = wctest::read_file(path);
  int matrices = 0;
  for (const wcodec::TensorInfo& t : h->tensors) {
    if (t.shape.size() != 2 || t.dtype != wcodec::DType::kF32) continue;
    const uint32_t rows = static_cast<uint32_t>(t.shape[0]), cols = static_cast<uint32_t>(t.shape[1]);
    std::vector<float> w(uint64_t{rows} * cols);
    std::memcpy(w.data(), bytes.data() + h->data_start + t.begin, w.size() * 4);
    for (const wcodec::cawsf::Components& c : components_from(w, rows, cols)) {
      const ApplyCheck r = check_apply(c, test_x(cols));
      EXPECT_LT(r.max_err, 1e-5) << t.name;
    }
    ++matrices;
  }
  EXPECT_GE(matrices, 5);
}

// Every decomposed tensor of the *.cawsf files in the data directory (the
// GPU bundle converts a real model with the converter) and of a version 2
// file written here from a real matrix.
TEST(CawsfApplyGpu, EveryTensorOfRealFilesEqualsTheCpu) {
  REQUIRE_GPU();
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(wctest::data_dir()))
    if (e.path().extension() == ".cawsf") files.push_back(e.path().string());
  wctest::ScratchDir dir;
  {
    const std::string path = (wctest::data_dir() / "stories260K.f32.safetensors").string();
    auto h = wcodec::read_safetensors_header_file(path);
    ASSERT_TRUE(h.ok());
    const std::vector<uint8_t> bytes = wctest::read_file(path);
    std::vector<wcodec::cawsf::TensorOut> ts;
    for (const wcodec::TensorInfo& t : h->tensors) {
      if (t.shape.size() != 2 || t.dtype != wcodec::DType::kF32) continue;
      const uint32_t rows = static_cast<uint32_t>(t.shape[0]), cols = static_cast<uint32_t>(t.shape[1]);
      std::vector<float> w(uint64_t{rows} * cols);
      std::memcpy(w.data(), bytes.data() + h->data_start + t.begin, w.size() * 4);
      const wcodec::cawsf::Components c = components_from(w, rows, cols)[0];
      wcodec::cawsf::TensorOut o;
      o.name = t.name;
      o.shape = t.shape;
      o.rows = rows;
      o.cols = cols;
      o.shards.push_back({wcodec::cawsf::kShardL, wcodec::cawsf::payload_l_factors(rows, cols, c.rank, c.l_a, c.l_b)});
      o.shards.push_back({wcodec::cawsf::kShardD, wcodec::cawsf::payload_d_diag(rows, cols, c.d_diag)});
      o.shards.push_back({wcodec::cawsf::kShardR, wcodec::cawsf::payload_r_embedded(rows, cols, c.r[1])});
      o.shards.push_back({wcodec::cawsf::kShardS, wcodec::cawsf::payload_s(rows, cols, c.s_row, c.s_col, c.s_val)});
      ts.push_back(std::move(o));
    }
    const std::string out = (dir.path() / "written.cawsf").string();
    ASSERT_TRUE(wcodec::cawsf::write_v2(out, ts, {}).ok());
    files.push_back(out);
  }
  size_t tensors = 0;
  for (const std::string& f : files) {
    auto file = wcodec::cawsf::CawsfFile::open(f);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    for (size_t t = 0; t < (*file)->tensors().size(); ++t) {
      if ((*file)->tensors()[t].raw) continue;
      auto c = (*file)->components(t);
      ASSERT_TRUE(c.ok()) << f << ": " << c.status().ToString();
      const ApplyCheck r = check_apply(*c, test_x(c->cols));
      EXPECT_LT(r.max_err, 1e-5) << f << ": " << (*file)->tensors()[t].name;
      ++tensors;
    }
  }
  std::printf("CAWSF apply on the GPU: %zu tensors of %zu files equal the CPU's to rounding\n", tensors, files.size());
  EXPECT_GT(tensors, 0u);
}

TEST(CawsfApplyGpu, RejectsComponentsThatLeaveTheirArrays) {
  REQUIRE_GPU();
  wcodec::cawsf::Components c;
  c.rows = 4;
  c.cols = 3;
  c.s_row = {4};
  c.s_col = {0};
  c.s_val = {1.0f};
  auto r = wcodec::gpu::apply_components_cuda(c, test_x(3));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("outlier 0 at (4, 0)"), std::string::npos) << r.status().ToString();
  c.s_row = {0};
  wcodec::cawsf::Components::Pq q;
  q.d = 8;
  q.m = 2;
  q.k = 2;
  q.n = 1;
  q.codebook.assign(16, 1.0f);
  q.codes = {0, 2};
  c.r.push_back(q);
  r = wcodec::gpu::apply_components_cuda(c, test_x(3));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("code 2 >= k"), std::string::npos) << r.status().ToString();
  r = wcodec::gpu::apply_components_cuda(c, test_x(2));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("x has 2 values"), std::string::npos) << r.status().ToString();
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
