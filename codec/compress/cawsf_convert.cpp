// codec/compress/cawsf_convert.cpp — the NDSQ converter (wcodec/cawsf_convert.h):
// safetensors in, CAWSF version 2 out.
//
// Per matrix: truncated SVD (LAPACKE_sgesdd, the thin factors), L factors
// rounded to fp16 (A = U·√Σ, B = V·√Σ: balanced, so neither leaves the fp16
// range), residue W' = W − L̂; outliers |W'| ≥ quantile q go to S and are
// zeroed; the diagonal goes to D (fp16) and D̂ is taken out; what is left is
// product-quantized (blocks of d values of the row-major matrix, m
// sub-spaces, k-means from FAISS with k centroids each). The S values are
// computed last as W − (L̂ + D̂ + R̂) at their coordinates. The error is
// measured on the matrix rebuilt by densify_rows, the reader's arithmetic.
// Thread-safety: tensors are converted on a pool of worker threads, each on
// its own buffers; results are gathered in input order.
#include <fcntl.h>
#include <faiss/Clustering.h>
#include <faiss/IndexFlat.h>
#include <lapacke.h>
#include <omp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>

#include "wcodec/cawsf.h"
#include "wcodec/cawsf_convert.h"
#include "wcodec/safetensors.h"

namespace wcodec::cawsf {

namespace {

float h16(float x) { return half_to_float(float_to_half(x)); }

struct Mapped {
  std::string path;
  const uint8_t* p = nullptr;
  size_t n = 0;
  SafetensorsHeader header;
  ~Mapped() {
    if (p) ::munmap(const_cast<uint8_t*>(p), n);
  }
};

Status map_file(const std::string& path, Mapped* m) {
  m->path = path;
  WC_ASSIGN_OR_RETURN(m->header, read_safetensors_header_file(path));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(path + ": open: " + std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  m->n = static_cast<size_t>(st.st_size);
  void* p = m->n ? ::mmap(nullptr, m->n, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  ::close(fd);
  if (m->n && p == MAP_FAILED) return Status::IOError(path + ": mmap: " + std::strerror(errno));
  m->p = static_cast<const uint8_t*>(p);
  return Status::OK();
}

std::vector<float> to_f32(const uint8_t* p, uint64_t n, DType t) {
  std::vector<float> v(n);
  for (uint64_t i = 0; i < n; ++i) {
    switch (t) {
      case DType::kF32: std::memcpy(&v[i], p + 4 * i, 4); break;
      case DType::kF64: {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        v[i] = static_cast<float>(d);
        break;
      }
      case DType::kF16: v[i] = half_to_float(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8)); break;
      default: {  // BF16
        const uint32_t u = static_cast<uint32_t>(p[2 * i] | p[2 * i + 1] << 8) << 16;
        std::memcpy(&v[i], &u, 4);
      }
    }
  }
  return v;
}

struct Job {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
  const uint8_t* data;
  uint64_t nbytes;
  bool decompose;
};

Status decompose(const Job& job, const ConvertOptions& opt, uint32_t seed, TensorOut* out, ConvertRow* row) {
  const uint32_t rows = static_cast<uint32_t>(job.shape[0]);
  uint64_t numel = 1;
  for (uint64_t d : job.shape) numel *= d;
  const uint32_t cols = static_cast<uint32_t>(numel / rows);
  const uint64_t elems = numel;
  const std::vector<float> w = to_f32(job.data, elems, job.dtype);
  for (float x : w)
    if (!std::isfinite(x)) return Status::Invalid(job.name + ": holds a non-finite value; NDSQ needs finite weights");
  const uint32_t mn = std::min(rows, cols), r = std::min(opt.rank, mn);
  // L: thin SVD.
  std::vector<float> a(w), s(mn), u(uint64_t{rows} * mn), vt(uint64_t{mn} * cols);
  const lapack_int info = LAPACKE_sgesdd(LAPACK_ROW_MAJOR, 'S', static_cast<lapack_int>(rows),
                                         static_cast<lapack_int>(cols), a.data(), static_cast<lapack_int>(cols),
                                         s.data(), u.data(), static_cast<lapack_int>(mn), vt.data(),
                                         static_cast<lapack_int>(cols));
  if (info != 0) return Status::Internal(job.name + ": LAPACKE_sgesdd failed (info " + std::to_string(info) + ")");
  std::vector<float> fa(uint64_t{rows} * r), fb(uint64_t{cols} * r);
  for (uint32_t t = 0; t < r; ++t) {
    const float sq = std::sqrt(s[t]);
    for (uint32_t i = 0; i < rows; ++i) fa[uint64_t{i} * r + t] = h16(u[uint64_t{i} * mn + t] * sq);
    for (uint32_t j = 0; j < cols; ++j) fb[uint64_t{j} * r + t] = h16(vt[uint64_t{t} * cols + j] * sq);
  }
  Components c;
  c.rows = rows;
  c.cols = cols;
  c.rank = r;
  c.l_a = fa;
  c.l_b = fb;
  std::vector<float> resid = densify_rows(c, 0, rows);  // L̂
  for (uint64_t i = 0; i < elems; ++i) resid[i] = w[i] - resid[i];
  // S: outliers by quantile (the reference's index rule: ⌊(n−1)·q⌋ of the sorted magnitudes).
  std::vector<float> mag(elems);
  for (uint64_t i = 0; i < elems; ++i) mag[i] = std::fabs(resid[i]);
  const uint64_t qi = static_cast<uint64_t>(static_cast<double>(elems - 1) * opt.outlier_q);
  std::nth_element(mag.begin(), mag.begin() + static_cast<ptrdiff_t>(qi), mag.end());
  const float th = mag[qi];
  std::vector<uint64_t> outl;
  for (uint64_t i = 0; i < elems; ++i)
    if (resid[i] != 0.0f && std::fabs(resid[i]) >= th) {
      outl.push_back(i);
      resid[i] = 0.0f;
    }
  // D: the diagonal, rounded, taken out.
  c.d_diag.resize(mn);
  for (uint32_t i = 0; i < mn; ++i) {
    c.d_diag[i] = h16(resid[uint64_t{i} * cols + i]);
    resid[uint64_t{i} * cols + i] -= c.d_diag[i];
  }
  // R: product quantization of the rest.
  Components::Pq q;
  q.d = opt.pq_d;
  q.m = opt.pq_m;
  const uint32_t dsub = q.d / q.m;
  q.n = static_cast<uint32_t>((elems + q.d - 1) / q.d);
  q.k = std::min<uint32_t>(opt.pq_k, q.n);
  std::vector<float> blocks(uint64_t{q.n} * q.d, 0.0f);
  std::copy(resid.begin(), resid.end(), blocks.begin());
  q.codebook.resize(uint64_t{q.m} * q.k * dsub);
  q.codes.resize(uint64_t{q.n} * q.m);
  std::vector<float> sub(uint64_t{q.n} * dsub), dist(q.n);
  std::vector<faiss::Index::idx_t> label(q.n);
  for (uint32_t sp = 0; sp < q.m; ++sp) {
    for (uint64_t b = 0; b < q.n; ++b)
      std::memcpy(&sub[b * dsub], &blocks[b * q.d + uint64_t{sp} * dsub], dsub * sizeof(float));
    faiss::ClusteringParameters cp;
    cp.niter = opt.kmeans_iters;
    cp.seed = static_cast<int>(seed * 131 + sp);
    cp.verbose = false;
    cp.min_points_per_centroid = 1;
    faiss::Clustering clus(static_cast<int>(dsub), q.k, cp);
    faiss::IndexFlatL2 index(static_cast<faiss::Index::idx_t>(dsub));
    try {
      clus.train(q.n, sub.data(), index);
      index.reset();
      index.add(q.k, clus.centroids.data());
      index.search(q.n, sub.data(), 1, dist.data(), label.data());
    } catch (const std::exception& e) {
      return Status::Internal(job.name + ": FAISS k-means: " + e.what());
    }
    std::copy(clus.centroids.begin(), clus.centroids.end(), q.codebook.begin() + uint64_t{sp} * q.k * dsub);
    for (uint64_t b = 0; b < q.n; ++b) q.codes[b * q.m + sp] = static_cast<uint8_t>(label[b]);
  }
  c.r.push_back(q);
  // S values: what L̂ + D̂ + R̂ leave at the outlier coordinates.
  const std::vector<float> partial = densify_rows(c, 0, rows);
  for (uint64_t i : outl) {
    c.s_row.push_back(static_cast<uint32_t>(i / cols));
    c.s_col.push_back(static_cast<uint32_t>(i % cols));
    c.s_val.push_back(w[i] - partial[i]);
  }
  const std::vector<float> rebuilt = densify_rows(c, 0, rows);
  double num = 0, den = 0;
  for (uint64_t i = 0; i < elems; ++i) {
    // The tensor is served in its dtype: measure what is served.
    float v = rebuilt[i];
    if (job.dtype == DType::kF16) v = h16(v);
    if (job.dtype == DType::kBF16) {
      const uint32_t bits = static_cast<uint32_t>(float_to_bf16(v)) << 16;
      std::memcpy(&v, &bits, 4);
    }
    const double e = double{w[i]} - v;
    num += e * e;
    den += double{w[i]} * w[i];
  }
  row->rel_error = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  row->rank = r;
  row->pq_k = q.k;
  row->outliers = outl.size();
  out->rows = rows;
  out->cols = cols;
  out->rel_error = row->rel_error;
  out->shards = {{kShardL, payload_l_factors(rows, cols, r, fa, fb)},
                 {kShardD, payload_d_diag(rows, cols, c.d_diag)},
                 {kShardR, payload_r_embedded(rows, cols, q)},
                 {kShardS, payload_s(rows, cols, c.s_row, c.s_col, c.s_val)}};
  return Status::OK();
}

}  // namespace

Result<std::vector<ConvertRow>> convert_to_cawsf(const std::vector<std::string>& inputs, const std::string& out,
                                                 const ConvertOptions& opt, const std::string& extra_meta_json) {
  if (opt.rank < 1) return Status::Invalid("--rank: " + std::to_string(opt.rank) + " (at least 1)");
  if (!(opt.outlier_q > 0 && opt.outlier_q <= 1)) return Status::Invalid("--outlier-q: must be in (0, 1]");
  if (opt.pq_d < 1 || opt.pq_d > 65535 || opt.pq_m < 1 || opt.pq_m > opt.pq_d || opt.pq_d % opt.pq_m != 0)
    return Status::Invalid("--pq-m: " + std::to_string(opt.pq_m) + " must divide the block length " +
                           std::to_string(opt.pq_d));
  if (opt.pq_k < 1 || opt.pq_k > 256) return Status::Invalid("--pq-k: " + std::to_string(opt.pq_k) + " (1..256)");
  if (inputs.empty()) return Status::Invalid("no input .safetensors files");
  std::vector<std::unique_ptr<Mapped>> files;
  std::vector<Job> jobs;
  uint32_t decomposed = 0;
  for (const std::string& path : inputs) {
    files.push_back(std::make_unique<Mapped>());
    WC_RETURN_IF_ERROR(map_file(path, files.back().get()));
    const Mapped& m = *files.back();
    for (const TensorInfo& t : m.header.tensors) {
      for (const Job& j : jobs)
        if (j.name == t.name) return Status::Invalid(path + ": tensor " + t.name + " appears in two input files");
      const uint64_t numel = t.numel();
      bool dec = t.shape.size() >= 2 && numel > 0 && t.shape[0] <= 0xffffffffu && numel / t.shape[0] <= 0xffffffffu &&
                 (t.dtype == DType::kF32 || t.dtype == DType::kF16 || t.dtype == DType::kBF16 || t.dtype == DType::kF64);
      if (dec && opt.max_elems && numel > opt.max_elems) dec = false;
      if (dec && opt.max_layers && decomposed >= opt.max_layers) dec = false;
      if (dec) ++decomposed;
      jobs.push_back({t.name, t.dtype, t.shape, m.p + m.header.data_start + t.begin, t.nbytes(), dec});
    }
  }
  if (jobs.size() > 0x10000) return Status::Invalid("more than 65536 tensors");
  std::vector<TensorOut> outs(jobs.size());
  std::vector<ConvertRow> rows(jobs.size());
  std::vector<Status> errs(jobs.size());
  std::atomic<size_t> next{0}, done{0};
  std::mutex mu;
  auto work = [&] {
    // Parallel over tensors; FAISS's OpenMP loops run on this thread alone
    // (nested teams spinning on a busy machine cost 50x).
    omp_set_num_threads(1);
    for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
      const Job& j = jobs[i];
      TensorOut& o = outs[i];
      ConvertRow& r = rows[i];
      o.name = r.name = j.name;
      o.dtype = j.dtype;
      r.dtype = dtype_name(j.dtype);
      o.shape = r.shape = j.shape;
      r.orig_bytes = j.nbytes;
      if (j.decompose) {
        errs[i] = decompose(j, opt, static_cast<uint32_t>(i), &o, &r);
      } else {
        o.raw = r.raw = true;
        o.shards = {{kShardRaw, std::vector<uint8_t>(j.data, j.data + j.nbytes)}};
      }
      {
        // Counted and reported under one lock: calls in increasing order.
        std::lock_guard<std::mutex> lk(mu);
        const size_t d = ++done;
        if (opt.progress) opt.progress(d, jobs.size());
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::max(1, opt.threads); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const Status& s : errs) WC_RETURN_IF_ERROR(s);
  WriteOptions wo;
  wo.extra_meta_json = extra_meta_json;
  std::vector<uint64_t> stored;
  WC_RETURN_IF_ERROR(write_v2(out, outs, wo, &stored));
  for (size_t i = 0; i < rows.size(); ++i) rows[i].stored_bytes = stored[i];
  return rows;
}

}  // namespace wcodec::cawsf
