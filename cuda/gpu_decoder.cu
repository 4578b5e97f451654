// cuda/gpu_decoder.cu — see wcodec_gpu/gpu_decoder.h.
//
// One kernel launch per plan: warp i decodes chunk i with run_plan_chunk_g
// (codec/src/device_plan.h) over a WarpGroup (warp_group.cuh), the same
// decoder bodies as the CPU reference decoder, lane l of the warp decoding
// lane l of the chunk's stream; the warp then checks the chunk's XXH3-64. The plan's arena is relocated for its device
// address on the host, then copied once; views and chunk records follow.
// Thread-safety: see the header.
#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "device_plan.h"
#include "warp_group.cuh"
#include "wcodec_gpu/gpu_decoder.h"

namespace wcodec::gpu {

namespace {

__constant__ uint8_t c_secret[kXxh3SecretSize] = WCODEC_XXH3_SECRET_BYTES;

constexpr uint32_t kWarpsPerBlock = 4;

__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    run_plan_kernel(const PlanChunk* chunks, uint32_t n, const ModelView* views, const uint8_t* in, uint8_t* out,
                    uint8_t* scratch, int* results) {
  const uint32_t i = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  if (i >= n) return;  // whole warps leave together
  WarpGroup g{threadIdx.x & 31u};
  const int r = run_plan_chunk_g(g, chunks[i], views, in, out, scratch, c_secret);
  if (g.lane == 0) results[i] = r;
}

std::string cuda_error(cudaError_t e, const char* what) {
  return std::string("CUDA ") + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

#define WGPU_CHECK(expr, what)                                         \
  do {                                                                 \
    const cudaError_t wgpu_err = (expr);                               \
    if (wgpu_err != cudaSuccess) return Status::IOError(cuda_error(wgpu_err, what)); \
  } while (0)

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Device memory freed at scope exit.
struct Scoped {
  void* p = nullptr;
  ~Scoped() {
    if (p) cudaFree(p);
  }
};

}  // namespace

DeviceInfo probe() {
  DeviceInfo info;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    info.why_not = e == cudaErrorNoDevice ? std::string("no CUDA device")
                   : e == cudaErrorInsufficientDriver
                       ? std::string("no usable NVIDIA driver (none loaded, or older than the CUDA runtime; no GPU?)")
                       : cuda_error(e, "device query");
    (void)cudaGetLastError();
    return info;
  }
  info.count = n;
  if (n == 0) {
    info.why_not = "no CUDA device";
    return info;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) info.name = prop.name;
  info.usable = true;
  return info;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  DeviceBuffer b;
  if (bytes) WGPU_CHECK(cudaMalloc(&b.ptr_, bytes), "allocate device memory");
  b.bytes_ = bytes;
  return std::move(b);
}

Status DeviceBuffer::copy_to_host(size_t off, size_t n, void* dst) const {
  if (off > bytes_ || n > bytes_ - off) return Status::OutOfRange("device buffer copy beyond its size");
  WGPU_CHECK(cudaMemcpy(dst, static_cast<const uint8_t*>(ptr_) + off, n, cudaMemcpyDeviceToHost), "copy to host");
  return Status::OK();
}

struct GpuDecoder::Impl {
  int device = 0;
  std::string name;
  cudaStream_t stream = nullptr;
  cudaEvent_t ev[4] = {};

  // Copies the plan to the device, decodes into dst (device) at dst_offset,
  // fetches per-chunk results.
  Status run(DevicePlan& plan, uint8_t* dst, size_t dst_offset, std::vector<int>* results, Timing* t) {
    WGPU_CHECK(cudaSetDevice(device), "select device");
    const auto t0 = std::chrono::steady_clock::now();
    const uint32_t n = static_cast<uint32_t>(plan.chunks.size());
    results->assign(n, kPlanMalformed);
    if (n == 0) return Status::OK();
    Scoped in, views_d, chunks_d, scratch, res;
    WGPU_CHECK(cudaMalloc(&in.p, plan.arena.size()), "allocate the plan arena");
    std::vector<ModelView> views;
    relocate(plan, static_cast<const uint8_t*>(in.p), &views);
    WGPU_CHECK(cudaMalloc(&views_d.p, std::max<size_t>(1, views.size()) * sizeof(ModelView)), "allocate views");
    WGPU_CHECK(cudaMalloc(&chunks_d.p, n * sizeof(PlanChunk)), "allocate chunk records");
    WGPU_CHECK(cudaMalloc(&scratch.p, std::max<uint64_t>(16, plan.scratch_bytes)), "allocate scratch");
    WGPU_CHECK(cudaMalloc(&res.p, n * sizeof(int)), "allocate results");
    WGPU_CHECK(cudaEventRecord(ev[0], stream), "event");
    WGPU_CHECK(cudaMemcpyAsync(in.p, plan.arena.data(), plan.arena.size(), cudaMemcpyHostToDevice, stream),
               "upload the plan arena");
    if (!views.empty())
      WGPU_CHECK(cudaMemcpyAsync(views_d.p, views.data(), views.size() * sizeof(ModelView), cudaMemcpyHostToDevice,
                                 stream),
                 "upload views");
    WGPU_CHECK(cudaMemcpyAsync(chunks_d.p, plan.chunks.data(), n * sizeof(PlanChunk), cudaMemcpyHostToDevice, stream),
               "upload chunk records");
    WGPU_CHECK(cudaEventRecord(ev[1], stream), "event");
    run_plan_kernel<<<(n + kWarpsPerBlock - 1) / kWarpsPerBlock, 32 * kWarpsPerBlock, 0, stream>>>(
        static_cast<const PlanChunk*>(chunks_d.p), n, static_cast<const ModelView*>(views_d.p),
        static_cast<const uint8_t*>(in.p), dst + dst_offset, static_cast<uint8_t*>(scratch.p),
        static_cast<int*>(res.p));
    WGPU_CHECK(cudaGetLastError(), "launch the decode kernel");
    WGPU_CHECK(cudaEventRecord(ev[2], stream), "event");
    WGPU_CHECK(cudaMemcpyAsync(results->data(), res.p, n * sizeof(int), cudaMemcpyDeviceToHost, stream),
               "fetch results");
    WGPU_CHECK(cudaStreamSynchronize(stream), "decode");
    if (t) {
      float up = 0, k = 0;
      cudaEventElapsedTime(&up, ev[0], ev[1]);
      cudaEventElapsedTime(&k, ev[1], ev[2]);
      t->upload_s += up * 1e-3;
      t->kernel_s += k * 1e-3;
      t->total_s += seconds_since(t0);
    }
    return Status::OK();
  }
};

Result<std::unique_ptr<GpuDecoder>> GpuDecoder::create(int device) {
  const DeviceInfo info = probe();
  if (!info.usable) return Status::NotSupported("no GPU decoder: " + info.why_not);
  if (device < 0 || device >= info.count)
    return Status::Invalid("CUDA device " + std::to_string(device) + " (have " + std::to_string(info.count) + ")");
  std::unique_ptr<GpuDecoder> d(new GpuDecoder());
  d->impl_ = std::make_unique<Impl>();
  d->impl_->device = device;
  cudaDeviceProp prop{};
  WGPU_CHECK(cudaGetDeviceProperties(&prop, device), "device properties");
  d->impl_->name = prop.name;
  WGPU_CHECK(cudaSetDevice(device), "select device");
  // A lane keeps one 16x16 tile of int32 on its stack while reconstructing.
  WGPU_CHECK(cudaDeviceSetLimit(cudaLimitStackSize, 4 * 1024), "stack size");
  WGPU_CHECK(cudaStreamCreateWithFlags(&d->impl_->stream, cudaStreamNonBlocking), "create stream");
  for (auto& e : d->impl_->ev) WGPU_CHECK(cudaEventCreate(&e), "create event");
  return std::move(d);
}

GpuDecoder::~GpuDecoder() {
  if (!impl_) return;
  for (auto& e : impl_->ev)
    if (e) cudaEventDestroy(e);
  if (impl_->stream) cudaStreamDestroy(impl_->stream);
}

std::string GpuDecoder::describe() const { return "cuda (" + impl_->name + ")"; }

Status GpuDecoder::run_to_host(DevicePlan& plan, uint8_t* out, std::vector<int>* results, Timing* t) {
  Scoped dst;
  WGPU_CHECK(cudaSetDevice(impl_->device), "select device");
  WGPU_CHECK(cudaMalloc(&dst.p, std::max<uint64_t>(16, plan.out_bytes)), "allocate output");
  WC_RETURN_IF_ERROR(impl_->run(plan, static_cast<uint8_t*>(dst.p), 0, results, t));
  const auto t0 = std::chrono::steady_clock::now();
  WGPU_CHECK(cudaMemcpy(out, dst.p, plan.out_bytes, cudaMemcpyDeviceToHost), "copy decoded bytes to the host");
  if (t) {
    const double s = seconds_since(t0);
    t->download_s += s;
    t->total_s += s;
  }
  return Status::OK();
}

Status GpuDecoder::run_to_device(DevicePlan& plan, DeviceBuffer& out, size_t dst_offset, std::vector<int>* results,
                                 Timing* t) {
  if (dst_offset > out.size() || plan.out_bytes > out.size() - dst_offset)
    return Status::OutOfRange("device output buffer too small for the batch");
  return impl_->run(plan, static_cast<uint8_t*>(out.get()), dst_offset, results, t);
}

Result<DeviceBuffer> decode_file_to_device(const Reader& reader, GpuDecoder& dec, Timing* t, uint64_t batch_bytes) {
  const uint64_t base = reader.data_start();
  const uint64_t total = reader.original_size() - base;
  WC_ASSIGN_OR_RETURN(DeviceBuffer out, DeviceBuffer::allocate(total));
  // Batches of consecutive chunks; each chunk is decoded straight to its
  // place (its offset in the original file minus data_start).
  size_t gi = 0;
  const size_t nchunks = reader.num_chunks();
  while (gi < nchunks) {
    std::vector<size_t> batch;
    uint64_t bytes = 0;
    while (gi < nchunks && (batch.empty() || bytes + reader.chunk(gi).decoded_size <= batch_bytes)) {
      bytes += reader.chunk(gi).decoded_size;
      batch.push_back(gi++);
    }
    const auto tp = std::chrono::steady_clock::now();
    DevicePlan plan;
    WC_RETURN_IF_ERROR(reader.plan_chunks(batch, &plan));
    const uint64_t first = reader.chunk(batch.front()).decoded_offset;
    for (size_t k = 0; k < plan.chunks.size(); ++k)
      plan.chunks[k].out = reader.chunk(plan.chunk_index[k]).decoded_offset - first;
    plan.out_bytes = bytes;
    if (t) t->plan_s += seconds_since(tp);
    std::vector<int> results;
    WC_RETURN_IF_ERROR(dec.run_to_device(plan, out, first - base, &results, t));
    for (size_t k = 0; k < plan.chunks.size(); ++k) {
      if (results[k] != kPlanOk)
        return Status::Corruption(reader.describe_chunk(plan.chunk_index[k]) +
                                  (results[k] == kPlanChecksum ? ": checksum mismatch (GPU decode)"
                                                               : ": entropy-coded stream is malformed (GPU decode)"));
    }
  }
  return std::move(out);
}

}  // namespace wcodec::gpu
