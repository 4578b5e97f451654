// cuda/cawsf_apply.cu — see wcodec_gpu/cawsf_apply.h.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "wcodec_gpu/cawsf_apply.h"

namespace wcodec::gpu {

namespace {

// cuBLAS entry points, resolved once from the first library that loads.
struct Blas {
  std::string lib, why_not;
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSgemv_v2) sgemv = nullptr;
};

const Blas& blas() {
  static Blas b;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
      void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        const char* e = dlerror();
        tried += std::string(tried.empty() ? "" : "; ") + (e ? e : name);
        continue;
      }
      b.create = reinterpret_cast<decltype(b.create)>(dlsym(h, "cublasCreate_v2"));
      b.destroy = reinterpret_cast<decltype(b.destroy)>(dlsym(h, "cublasDestroy_v2"));
      b.set_stream = reinterpret_cast<decltype(b.set_stream)>(dlsym(h, "cublasSetStream_v2"));
      b.sgemv = reinterpret_cast<decltype(b.sgemv)>(dlsym(h, "cublasSgemv_v2"));
      if (b.create && b.destroy && b.set_stream && b.sgemv) {
        b.lib = name;
        return;
      }
      tried += std::string(tried.empty() ? "" : "; ") + name + ": lacks the cuBLAS v2 entry points";
      b = Blas{};
    }
    b.why_not = "cuBLAS not found (" + tried + ")";
  });
  return b;
}

std::string cuda_error(cudaError_t e, const char* what) {
  return std::string("CUDA ") + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

#define WAPPLY_CUDA(expr, what)                                                          \
  do {                                                                                   \
    const cudaError_t wapply_err = (expr);                                               \
    if (wapply_err != cudaSuccess) return Status::IOError(cuda_error(wapply_err, what)); \
  } while (0)
#define WAPPLY_BLAS(expr, what)                                                                                \
  do {                                                                                                         \
    const cublasStatus_t wapply_st = (expr);                                                                   \
    if (wapply_st != CUBLAS_STATUS_SUCCESS)                                                                    \
      return Status::IOError(std::string("cuBLAS ") + what + ": status " + std::to_string(static_cast<int>(wapply_st))); \
  } while (0)

// Device memory freed on scope exit.
struct Dev {
  void* p = nullptr;
  ~Dev() {
    if (p) cudaFree(p);
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

template <class T>
Status upload(Dev& d, const std::vector<T>& v, cudaStream_t s) {
  if (v.empty()) return Status::OK();
  WAPPLY_CUDA(cudaMalloc(&d.p, v.size() * sizeof(T)), "allocate device memory");
  WAPPLY_CUDA(cudaMemcpyAsync(d.p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, s), "upload");
  return Status::OK();
}

__global__ void diag_kernel(const float* d, const float* x, float* y, uint32_t n) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += d[i] * x[i];
}

// One thread per (PQ block b, sub-space s): the sub-vector's dsub values
// times x, added to their rows (a sub-vector may cross a row end).
__global__ void pq_kernel(const float* codebook, const uint8_t* codes, uint32_t d, uint32_t m, uint32_t k, uint64_t n,
                          uint64_t cols, uint64_t elems, const float* x, float* y) {
  const uint64_t t = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= n * m) return;
  const uint64_t b = t / m, s = t % m, dsub = d / m;
  const float* v = codebook + (s * k + codes[b * m + s]) * dsub;
  uint64_t flat = b * d + s * dsub, row = flat / cols, col = flat % cols;
  float acc = 0.0f;
  for (uint64_t j = 0; j < dsub && flat < elems; ++j, ++flat) {
    acc += v[j] * x[col];
    if (++col == cols) {
      atomicAdd(y + row, acc);
      acc = 0.0f;
      col = 0;
      ++row;
    }
  }
  if (acc != 0.0f) atomicAdd(y + row, acc);
}

__global__ void sparse_kernel(const uint32_t* r, const uint32_t* c, const float* v, uint64_t n, const float* x,
                              float* y) {
  const uint64_t e = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (e < n) atomicAdd(y + r[e], v[e] * x[c[e]]);
}

uint32_t blocks_for(uint64_t n, uint32_t threads) { return static_cast<uint32_t>((n + threads - 1) / threads); }

// Rejects components whose indices would leave their arrays (the reader
// validates them; this keeps the kernels safe for any caller).
Status check_components(const cawsf::Components& c, const std::vector<float>& x) {
  auto bad = [](const std::string& what) { return Status::Invalid("cawsf apply on the GPU: " + what); };
  if (x.size() != c.cols) return bad("x has " + std::to_string(x.size()) + " values, cols is " + std::to_string(c.cols));
  if (c.rows > (1u << 31) - 1 || c.cols > (1u << 31) - 1) return bad("matrix too large for cuBLAS");
  const uint64_t elems = uint64_t{c.rows} * c.cols;
  if (!c.l_dense.empty() && c.l_dense.size() != elems) return bad("dense L size " + std::to_string(c.l_dense.size()));
  if (c.l_dense.empty() && c.rank &&
      (c.l_a.size() != uint64_t{c.rows} * c.rank || c.l_b.size() != uint64_t{c.cols} * c.rank))
    return bad("L factors sizes " + std::to_string(c.l_a.size()) + ", " + std::to_string(c.l_b.size()) + " for rank " +
               std::to_string(c.rank));
  if (!c.d_dense.empty() && c.d_dense.size() != elems) return bad("dense D size " + std::to_string(c.d_dense.size()));
  if (c.d_diag.size() > std::min(c.rows, c.cols)) return bad("diagonal of " + std::to_string(c.d_diag.size()) + " values");
  for (size_t i = 0; i < c.r.size(); ++i) {
    const cawsf::Components::Pq& q = c.r[i];
    if (q.m == 0 || q.d % q.m || q.k == 0 || q.k > 256 || q.codes.size() != q.n * uint64_t{q.m} ||
        q.codebook.size() != uint64_t{q.k} * q.d)
      return bad("residue " + std::to_string(i) + ": d " + std::to_string(q.d) + ", m " + std::to_string(q.m) + ", k " +
                 std::to_string(q.k));
    for (uint8_t code : q.codes)
      if (code >= q.k) return bad("residue " + std::to_string(i) + ": code " + std::to_string(code) + " >= k");
  }
  if (c.s_row.size() != c.s_val.size() || c.s_col.size() != c.s_val.size()) return bad("outlier arrays differ in length");
  for (size_t e = 0; e < c.s_val.size(); ++e)
    if (c.s_row[e] >= c.rows || c.s_col[e] >= c.cols)
      return bad("outlier " + std::to_string(e) + " at (" + std::to_string(c.s_row[e]) + ", " +
                 std::to_string(c.s_col[e]) + ")");
  return Status::OK();
}

struct Handle {
  cublasHandle_t h = nullptr;
  cudaStream_t s = nullptr;
  cudaEvent_t ev[4] = {};
  ~Handle() {
    if (h) blas().destroy(h);
    for (cudaEvent_t e : ev)
      if (e) cudaEventDestroy(e);
    if (s) cudaStreamDestroy(s);
  }
};

}  // namespace

Result<std::vector<float>> apply_components_cuda(const cawsf::Components& c, const std::vector<float>& x, ApplyInfo* info,
                                                 int device) {
  WC_RETURN_IF_ERROR(check_components(c, x));
  const Blas& bl = blas();
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count <= device) {
    (void)cudaGetLastError();
    return Status::IOError("cawsf apply on the GPU: no CUDA device");
  }
  if (!bl.sgemv) return Status::IOError("cawsf apply on the GPU: " + bl.why_not);
  WAPPLY_CUDA(cudaSetDevice(device), "select device");
  Handle hd;
  WAPPLY_CUDA(cudaStreamCreateWithFlags(&hd.s, cudaStreamNonBlocking), "create stream");
  for (cudaEvent_t& e : hd.ev) WAPPLY_CUDA(cudaEventCreate(&e), "create event");
  WAPPLY_BLAS(bl.create(&hd.h), "create handle");
  WAPPLY_BLAS(bl.set_stream(hd.h, hd.s), "set stream");
  const int rows = static_cast<int>(c.rows), cols = static_cast<int>(c.cols), rank = static_cast<int>(c.rank);
  const uint64_t elems = uint64_t{c.rows} * c.cols;

  WAPPLY_CUDA(cudaEventRecord(hd.ev[0], hd.s), "record event");
  Dev dx, dy, dt, dl, dla, dlb, dd, ddiag, dsr, dsc, dsv;
  WC_RETURN_IF_ERROR(upload(dx, x, hd.s));
  WAPPLY_CUDA(cudaMalloc(&dy.p, std::max<size_t>(c.rows, 1) * sizeof(float)), "allocate device memory");
  WC_RETURN_IF_ERROR(upload(dl, c.l_dense, hd.s));
  WC_RETURN_IF_ERROR(upload(dla, c.l_a, hd.s));
  WC_RETURN_IF_ERROR(upload(dlb, c.l_b, hd.s));
  WC_RETURN_IF_ERROR(upload(dd, c.d_dense, hd.s));
  WC_RETURN_IF_ERROR(upload(ddiag, c.d_diag, hd.s));
  WC_RETURN_IF_ERROR(upload(dsr, c.s_row, hd.s));
  WC_RETURN_IF_ERROR(upload(dsc, c.s_col, hd.s));
  WC_RETURN_IF_ERROR(upload(dsv, c.s_val, hd.s));
  std::vector<Dev> dcb(c.r.size()), dcode(c.r.size());
  for (size_t i = 0; i < c.r.size(); ++i) {
    WC_RETURN_IF_ERROR(upload(dcb[i], c.r[i].codebook, hd.s));
    WC_RETURN_IF_ERROR(upload(dcode[i], c.r[i].codes, hd.s));
  }
  WAPPLY_CUDA(cudaEventRecord(hd.ev[1], hd.s), "record event");

  const float one = 1.0f, zero = 0.0f;
  bool y_set = false;
  if (rows && cols) {
    // Row-major rows×cols is column-major cols×rows: y = Aᵀ·x.
    if (!c.l_dense.empty()) {
      WAPPLY_BLAS(bl.sgemv(hd.h, CUBLAS_OP_T, cols, rows, &one, dl.as<float>(), cols, dx.as<float>(), 1, &zero,
                           dy.as<float>(), 1),
                  "SGEMV (dense L)");
      y_set = true;
    } else if (rank) {
      // l_b (cols×rank row-major) is column-major rank×cols: t = B·x; l_a
      // likewise rank×rows: y = Aᵀ·t.
      WAPPLY_CUDA(cudaMalloc(&dt.p, c.rank * sizeof(float)), "allocate device memory");
      WAPPLY_BLAS(bl.sgemv(hd.h, CUBLAS_OP_N, rank, cols, &one, dlb.as<float>(), rank, dx.as<float>(), 1, &zero,
                           dt.as<float>(), 1),
                  "SGEMV (Bᵀ·x)");
      WAPPLY_BLAS(bl.sgemv(hd.h, CUBLAS_OP_T, rank, rows, &one, dla.as<float>(), rank, dt.as<float>(), 1, &zero,
                           dy.as<float>(), 1),
                  "SGEMV (A·t)");
      y_set = true;
    }
  }
  if (!y_set) WAPPLY_CUDA(cudaMemsetAsync(dy.p, 0, std::max<size_t>(c.rows, 1) * sizeof(float), hd.s), "clear y");
  if (rows && cols && !c.d_dense.empty())
    WAPPLY_BLAS(bl.sgemv(hd.h, CUBLAS_OP_T, cols, rows, &one, dd.as<float>(), cols, dx.as<float>(), 1, &one,
                         dy.as<float>(), 1),
                "SGEMV (dense D)");
  constexpr uint32_t kThreads = 256;
  if (c.d_dense.empty() && !c.d_diag.empty()) {
    const uint32_t n = static_cast<uint32_t>(c.d_diag.size());
    diag_kernel<<<blocks_for(n, kThreads), kThreads, 0, hd.s>>>(ddiag.as<float>(), dx.as<float>(), dy.as<float>(), n);
  }
  for (size_t i = 0; i < c.r.size(); ++i) {
    const cawsf::Components::Pq& q = c.r[i];
    const uint64_t work = q.n * uint64_t{q.m};
    if (work && elems)
      pq_kernel<<<blocks_for(work, kThreads), kThreads, 0, hd.s>>>(dcb[i].as<float>(), dcode[i].as<uint8_t>(), q.d,
                                                                   q.m, q.k, q.n, c.cols, elems, dx.as<float>(),
                                                                   dy.as<float>());
  }
  if (!c.s_val.empty())
    sparse_kernel<<<blocks_for(c.s_val.size(), kThreads), kThreads, 0, hd.s>>>(
        dsr.as<uint32_t>(), dsc.as<uint32_t>(), dsv.as<float>(), c.s_val.size(), dx.as<float>(), dy.as<float>());
  WAPPLY_CUDA(cudaGetLastError(), "launch");
  WAPPLY_CUDA(cudaEventRecord(hd.ev[2], hd.s), "record event");
  std::vector<float> y(c.rows);
  if (!y.empty())
    WAPPLY_CUDA(cudaMemcpyAsync(y.data(), dy.p, y.size() * sizeof(float), cudaMemcpyDeviceToHost, hd.s), "download");
  WAPPLY_CUDA(cudaEventRecord(hd.ev[3], hd.s), "record event");
  WAPPLY_CUDA(cudaStreamSynchronize(hd.s), "apply");
  if (info) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) info->device = prop.name;
    info->blas = bl.lib;
    float ms[3] = {};
    for (int k = 0; k < 3; ++k) WAPPLY_CUDA(cudaEventElapsedTime(&ms[k], hd.ev[k], hd.ev[k + 1]), "event time");
    info->upload_s = ms[0] / 1e3;
    info->compute_s = ms[1] / 1e3;
    info->download_s = ms[2] / 1e3;
  }
  return y;
}

}  // namespace wcodec::gpu
