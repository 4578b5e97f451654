// cuda/gpu_decoder.cu — see wcodec_gpu/gpu_decoder.h.
//
// One kernel launch per plan. Each warp decodes one chunk at a time with
// run_plan_chunk_g (codec/decompress/device_plan.h) over a WarpGroup
// (warp_group.cuh), the same decoder bodies as the CPU reference decoder,
// lane l of the warp decoding lane l of the chunk's stream; the warp then
// checks the chunk's XXH3-64. The grid is persistent (as many blocks as fit
// on the device at once): a block takes the next kWarpsPerBlock chunks of
// the plan from a counter, one per warp, so that neighbouring chunks (mostly
// of one tensor, one model) decode side by side on one SM and share its
// cache for the model's decoding tables, and no partial last wave idles the
// device. (Measured on an H100 against two alternatives: each warp taking
// single chunks in plan order cut into one run per SM was faster on models
// of many small tensors (BF16 55 -> 100 GB/s) but slower on the large
// tensors of isnet (F16 21 -> 14, INT8 15 -> 10); longest-first order was
// slower still; so was a block whose warps take the chunks of its group
// one at a time without waiting at a barrier (F16 14, INT8 9.5, ternary 1.9
// against 20, 14, 2.4, though BF16 101 against 55): warps of a block that
// move in step decode the large tensors faster.) The plan's arena is
// relocated for its device address on the host, then copied once; views and
// chunk records follow.
// Thread-safety: see the header.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <thread>
#include <cstdlib>
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

// WCODEC_GPU_PATHS bit for the kernel's schedule rather than a decoder:
// each warp takes chunks alone from the counter instead of a block taking
// kWarpsPerBlock chunks together and waiting at a barrier for its slowest
// warp (benchmarks compare the two; see the comment at the top).
constexpr uint32_t kSchedWarpChunks = 16;

// Six blocks of 4 warps per SM (at most 80 registers). Measured on an H100:
// 24 warps per SM beat 32 (64 registers, with spills), 16 and 8 on every
// kind of model but BF16; groups of 4 warps were as fast as or faster than
// groups of 8 (BF16 67 against 55 GB/s, INT4 14 against 12.6, the rest
// within 5%) and of 24 (F16 20, INT8 13.6).
__global__ void __launch_bounds__(32 * kWarpsPerBlock, 24 / kWarpsPerBlock)
    run_plan_kernel(const PlanChunk* chunks, uint32_t n, const ModelView* views, const uint8_t* in, uint8_t* out,
                    uint8_t* scratch, int* results, uint32_t* next, uint32_t paths) {
  __shared__ uint32_t group;
  // Each warp's fast memory for the direct float decoder's starts tables
  // (kStartsCap entries a warp), when the launch gives dynamic shared
  // memory (kPathFastStarts).
  extern __shared__ uint16_t starts[];
  WarpGroup g{threadIdx.x & 31u};
  uint16_t* fast = (paths & kPathFastStarts) ? starts + (threadIdx.x / 32) * kStartsCap : nullptr;
  if (paths & kSchedWarpChunks) {
    // Every warp takes the next chunk alone: no block barrier.
    for (;;) {
      uint32_t i = 0;
      if (g.lane == 0) i = atomicAdd(next, 1u);
      i = __shfl_sync(WarpGroup::kAll, i, 0);
      if (i >= n) return;
      const int r = run_plan_chunk_g(g, chunks[i], views, in, out, scratch, c_secret, paths, fast);
      if (g.lane == 0) results[i] = r;
    }
  }
  for (;;) {
    if (threadIdx.x == 0) group = atomicAdd(next, kWarpsPerBlock);
    __syncthreads();
    const uint32_t first = group, i = first + threadIdx.x / 32;
    __syncthreads();  // every warp has read `group` before it changes
    if (first >= n) return;  // the whole block leaves together
    if (i < n) {
      const PlanChunk c = chunks[i];
      const int r = run_plan_chunk_g(g, c, views, in, out, scratch, c_secret, paths, fast);
      if (g.lane == 0) results[i] = r;
    }
  }
}

// The plan's table entries (PlanTable offsets, as uploaded) rewritten as
// DecTables for the arena at `in`: lists holds (arena offset, count) pairs
// (plan_table_lists). Runs before the decode kernel on the same stream, so
// that the host never rewrites (or copies) the arena.
__global__ void relocate_tables_kernel(const uint64_t* lists, uint32_t n, uint8_t* in) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    PlanTable* e = reinterpret_cast<PlanTable*>(in + lists[2 * i]);
    DecTable* d = reinterpret_cast<DecTable*>(e);
    for (uint64_t j = 0; j < lists[2 * i + 1]; ++j) {
      const PlanTable t = e[j];
      d[j] = relocated_table(t, in);
    }
  }
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

// Grow-only memory kept across batches: device memory (cudaMalloc and
// cudaFree are slow, and cudaFree synchronizes the device), or pinned
// (page-locked) host memory, whose copies run asynchronously at full link
// speed.
cudaError_t malloc_device(void** p, size_t n) { return cudaMalloc(p, n); }
cudaError_t malloc_pinned(void** p, size_t n) { return cudaMallocHost(p, n); }

template <cudaError_t (*Alloc)(void**, size_t), cudaError_t (*Free)(void*)>
struct GrowMem {
  void* p = nullptr;
  size_t cap = 0;
  cudaError_t reserve(size_t n) {
    n = std::max<size_t>(n, 16);
    if (n <= cap) return cudaSuccess;
    if (p) Free(p);
    p = nullptr;
    cap = 0;
    const cudaError_t e = Alloc(&p, n + n / 4);
    if (e == cudaSuccess) cap = n + n / 4;
    return e;
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
  ~GrowMem() {
    if (p) Free(p);
  }
};
using DevMem = GrowMem<malloc_device, cudaFree>;
using PinnedMem = GrowMem<malloc_pinned, cudaFreeHost>;

// Whether p is page-locked host memory (cudaMallocHost, cudaHostRegister):
// then the device copies from it directly, at full link speed.
bool page_locked(const void* p) {
  cudaPointerAttributes a{};
  if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

void* pinned_alloc(size_t n) {
  void* p = nullptr;
  if (cudaMallocHost(&p, std::max<size_t>(n, 1)) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return p;
}
void pinned_release(void* p) { cudaFreeHost(p); }
const ArenaMemory kPinnedArenas{pinned_alloc, pinned_release};

// memcpy split over threads for large copies (staging a pageable plan
// arena into pinned memory is the host's share of such a batch).
void stage_copy(void* dst, const void* src, size_t n) {
  constexpr size_t kPart = 32u << 20;
  const size_t parts = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), (n + kPart - 1) / kPart);
  if (parts <= 1) {
    std::memcpy(dst, src, n);
    return;
  }
  std::vector<std::thread> th;
  const size_t per = (n + parts - 1) / parts;
  for (size_t k = 0; k < parts; ++k) {
    const size_t a = k * per, b = std::min(n, a + per);
    if (a >= b) break;
    th.emplace_back([=] { std::memcpy(static_cast<uint8_t*>(dst) + a, static_cast<const uint8_t*>(src) + a, b - a); });
  }
  for (auto& t : th) t.join();
}

}  // namespace

const ArenaMemory* pinned_arena_memory() { return &kPinnedArenas; }

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

// One batch in flight: its stream, events, device buffers and pinned
// staging. Two slots alternate, so the upload of one batch overlaps the
// kernel of the other and the host stages the next plan meanwhile.
struct Slot {
  cudaStream_t stream = nullptr;
  cudaEvent_t ev[4] = {};  // start, uploaded, decoded, done
  DevMem in, views, chunks, scratch, res, out, lists;
  PinnedMem arena_h, views_h, chunks_h, res_h, lists_h;
  uint32_t n = 0;
  uint64_t batch = 0;
  std::chrono::steady_clock::time_point t0;
};

struct GpuDecoder::Impl {
  int device = 0;
  std::string name;
  uint32_t resident_blocks = 1;  // blocks of the decode kernel the device holds at once
  // The decoders run_plan_chunk_g may take (kPath* bits): all but the
  // starts tables in shared memory by default (see kStartsCap);
  // WCODEC_GPU_PATHS=N (benchmarks) picks others, e.g. 0 for the grid
  // decoders of every chunk, 15 with the starts tables in shared memory,
  // and + 16 (kSchedWarpChunks) warps taking chunks alone.
  uint32_t paths = kPathsAll & ~kPathFastStarts;
  // Dynamic shared memory of a block of the decode kernel.
  size_t smem() const { return (paths & kPathFastStarts) ? size_t{kWarpsPerBlock} * kStartsCap * 2 : 0; }

  Slot slots[2];
  uint64_t next_batch = 0;
  std::deque<Slot*> in_flight;  // oldest first

  ~Impl() {
    for (Slot& s : slots) {
      if (s.stream) cudaStreamSynchronize(s.stream);
      for (auto& e : s.ev)
        if (e) cudaEventDestroy(e);
      if (s.stream) cudaStreamDestroy(s.stream);
    }
  }

  Status init() {
    int per_sm = 0, sms = 0;
    WGPU_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, run_plan_kernel, 32 * kWarpsPerBlock, smem()),
               "occupancy of the decode kernel");
    WGPU_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "multiprocessor count");
    resident_blocks = static_cast<uint32_t>(std::max(1, per_sm * sms));
    for (Slot& s : slots) {
      WGPU_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "create stream");
      for (auto& e : s.ev) WGPU_CHECK(cudaEventCreate(&e), "create event");
    }
    return Status::OK();
  }

  // Queues `plan`'s upload, decode into dst (device) and the results'
  // download on slot s. The arena is uploaded from the plan itself when it
  // is page-locked (then it must stay unchanged until the batch completes),
  // else from a pinned staging copy; either way as the plan holds it
  // (offsets), and relocate_tables_kernel turns its table entries into
  // pointers on the device. host_out: also queue the copy of the decoded
  // bytes from s.out to host memory (dst must then be s.out).
  Status submit(Slot& s, const DevicePlan& plan, uint8_t* dst, uint8_t* host_out) {
    WGPU_CHECK(cudaSetDevice(device), "select device");
    s.t0 = std::chrono::steady_clock::now();
    s.n = static_cast<uint32_t>(plan.chunks.size());
    s.batch = next_batch++;
    const size_t views_bytes = plan.models.size() * sizeof(ModelView);
    // The chunk records, then the counter of chunks taken (zero).
    const size_t records = s.n * sizeof(PlanChunk), chunk_bytes = records + sizeof(uint32_t);
    const std::vector<std::pair<uint64_t, uint64_t>> lists = plan_table_lists(plan);
    const size_t lists_bytes = lists.size() * 2 * sizeof(uint64_t);
    const bool direct = page_locked(plan.arena.data());
    WGPU_CHECK(s.in.reserve(plan.arena.size()), "allocate the plan arena");
    WGPU_CHECK(s.views.reserve(views_bytes), "allocate views");
    WGPU_CHECK(s.chunks.reserve(chunk_bytes), "allocate chunk records");
    WGPU_CHECK(s.lists.reserve(lists_bytes), "allocate table lists");
    WGPU_CHECK(s.scratch.reserve(plan.scratch_bytes), "allocate scratch");
    WGPU_CHECK(s.res.reserve(s.n * sizeof(int)), "allocate results");
    if (!direct) WGPU_CHECK(s.arena_h.reserve(plan.arena.size()), "allocate pinned staging");
    WGPU_CHECK(s.views_h.reserve(views_bytes), "allocate pinned staging");
    WGPU_CHECK(s.chunks_h.reserve(chunk_bytes), "allocate pinned staging");
    WGPU_CHECK(s.lists_h.reserve(lists_bytes), "allocate pinned staging");
    WGPU_CHECK(s.res_h.reserve(s.n * sizeof(int)), "allocate pinned staging");
    if (!direct) stage_copy(s.arena_h.p, plan.arena.data(), plan.arena.size());
    std::vector<ModelView> views;
    plan_views(plan, s.in.as<const uint8_t>(), &views);
    if (views_bytes) std::memcpy(s.views_h.p, views.data(), views_bytes);
    if (lists_bytes) std::memcpy(s.lists_h.p, lists.data(), lists_bytes);
    if (s.n) {
      std::memcpy(s.chunks_h.p, plan.chunks.data(), records);
      std::memset(s.chunks_h.as<uint8_t>() + records, 0, sizeof(uint32_t));
    }
    WGPU_CHECK(cudaEventRecord(s.ev[0], s.stream), "event");
    WGPU_CHECK(cudaMemcpyAsync(s.in.p, direct ? static_cast<const void*>(plan.arena.data()) : s.arena_h.p,
                               plan.arena.size(), cudaMemcpyHostToDevice, s.stream),
               "upload the plan arena");
    if (views_bytes)
      WGPU_CHECK(cudaMemcpyAsync(s.views.p, s.views_h.p, views_bytes, cudaMemcpyHostToDevice, s.stream),
                 "upload views");
    if (chunk_bytes)
      WGPU_CHECK(cudaMemcpyAsync(s.chunks.p, s.chunks_h.p, chunk_bytes, cudaMemcpyHostToDevice, s.stream),
                 "upload chunk records");
    if (lists_bytes) {
      WGPU_CHECK(cudaMemcpyAsync(s.lists.p, s.lists_h.p, lists_bytes, cudaMemcpyHostToDevice, s.stream),
                 "upload table lists");
      const uint32_t nl = static_cast<uint32_t>(lists.size());
      relocate_tables_kernel<<<std::min<uint32_t>((nl + 255) / 256, 1024), 256, 0, s.stream>>>(
          s.lists.as<const uint64_t>(), nl, s.in.as<uint8_t>());
      WGPU_CHECK(cudaGetLastError(), "launch the relocation kernel");
    }
    WGPU_CHECK(cudaEventRecord(s.ev[1], s.stream), "event");
    if (s.n) {
      const uint32_t groups = (s.n + kWarpsPerBlock - 1) / kWarpsPerBlock;
      run_plan_kernel<<<std::min(groups, resident_blocks), 32 * kWarpsPerBlock, smem(), s.stream>>>(
          s.chunks.as<const PlanChunk>(), s.n, s.views.as<const ModelView>(), s.in.as<const uint8_t>(), dst,
          s.scratch.as<uint8_t>(), s.res.as<int>(), reinterpret_cast<uint32_t*>(s.chunks.as<uint8_t>() + records),
          paths);
      WGPU_CHECK(cudaGetLastError(), "launch the decode kernel");
    }
    WGPU_CHECK(cudaEventRecord(s.ev[2], s.stream), "event");
    if (s.n)
      WGPU_CHECK(cudaMemcpyAsync(s.res_h.p, s.res.p, s.n * sizeof(int), cudaMemcpyDeviceToHost, s.stream),
                 "fetch results");
    if (host_out && plan.out_bytes)
      WGPU_CHECK(cudaMemcpyAsync(host_out, dst, plan.out_bytes, cudaMemcpyDeviceToHost, s.stream),
                 "copy decoded bytes to the host");
    WGPU_CHECK(cudaEventRecord(s.ev[3], s.stream), "event");
    in_flight.push_back(&s);
    return Status::OK();
  }

  // Waits for the oldest batch in flight; its per-chunk results go to
  // *results and its id to *batch.
  Status complete_oldest(std::vector<int>* results, uint64_t* batch, Timing* t) {
    Slot& s = *in_flight.front();
    in_flight.pop_front();
    WGPU_CHECK(cudaEventSynchronize(s.ev[3]), "decode");
    results->assign(s.res_h.as<int>(), s.res_h.as<int>() + s.n);
    *batch = s.batch;
    if (t) {
      float up = 0, k = 0, down = 0;
      cudaEventElapsedTime(&up, s.ev[0], s.ev[1]);
      cudaEventElapsedTime(&k, s.ev[1], s.ev[2]);
      cudaEventElapsedTime(&down, s.ev[2], s.ev[3]);
      t->upload_s += up * 1e-3;
      t->kernel_s += k * 1e-3;
      t->download_s += down * 1e-3;
    }
    return Status::OK();
  }

  // The slot not in flight (REQUIRES fewer than two in flight).
  Slot& free_slot() { return in_flight.empty() || in_flight.front() != &slots[0] ? slots[0] : slots[1]; }

  // Synchronous run on one slot (no pipelined batch may be in flight).
  Status run_sync(const DevicePlan& plan, uint8_t* dst, uint8_t* host_out, std::vector<int>* results, Timing* t) {
    if (!in_flight.empty())
      return Status::Invalid("GPU decoder: a synchronous run while pipelined batches are in flight (drain first)");
    const auto t0 = std::chrono::steady_clock::now();
    Slot& s = slots[0];
    if (host_out) {
      WGPU_CHECK(cudaSetDevice(device), "select device");
      WGPU_CHECK(s.out.reserve(plan.out_bytes), "allocate output");
      dst = s.out.as<uint8_t>();
    }
    WC_RETURN_IF_ERROR(submit(s, plan, dst, host_out));
    uint64_t batch = 0;
    WC_RETURN_IF_ERROR(complete_oldest(results, &batch, t));
    if (t) t->total_s += seconds_since(t0);
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
  if (const char* f = std::getenv("WCODEC_GPU_PATHS"))
    d->impl_->paths = static_cast<uint32_t>(std::strtoul(f, nullptr, 0)) & (kPathsAll | kSchedWarpChunks);
  cudaDeviceProp prop{};
  WGPU_CHECK(cudaGetDeviceProperties(&prop, device), "device properties");
  d->impl_->name = prop.name;
  WGPU_CHECK(cudaSetDevice(device), "select device");
  // A lane keeps one 16x16 tile of int32 on its stack while reconstructing.
  WGPU_CHECK(cudaDeviceSetLimit(cudaLimitStackSize, 4 * 1024), "stack size");
  WC_RETURN_IF_ERROR(d->impl_->init());
  return std::move(d);
}

GpuDecoder::~GpuDecoder() = default;

std::string GpuDecoder::describe() const {
  const uint32_t p = impl_->paths;
  if (p == (kPathsAll & ~kPathFastStarts)) return "cuda (" + impl_->name + ")";
  return "cuda (" + impl_->name + "; decoders " + ((p & kPathFloatDirect) ? "float direct" : "float grid") +
         ((p & kPathFloatDirect) ? ((p & kPathFloatSearch) ? " with searched symbols" : " with slot tables") : "") +
         ((p & kPathIntDirect) ? ", int direct" : ", int grid") +
         ((p & kPathFastStarts) ? ", starts in shared memory)" : ")");
}

namespace {
Status check_fits(const DevicePlan& plan, const DeviceBuffer& out, size_t dst_offset) {
  if (dst_offset > out.size() || plan.out_bytes > out.size() - dst_offset)
    return Status::OutOfRange("device output buffer too small for the batch");
  return Status::OK();
}
}  // namespace

Status GpuDecoder::run_to_host(DevicePlan& plan, uint8_t* out, std::vector<int>* results, Timing* t) {
  return impl_->run_sync(plan, nullptr, out, results, t);
}

Status GpuDecoder::run_to_device(DevicePlan& plan, DeviceBuffer& out, size_t dst_offset, std::vector<int>* results,
                                 Timing* t) {
  WC_RETURN_IF_ERROR(check_fits(plan, out, dst_offset));
  return impl_->run_sync(plan, static_cast<uint8_t*>(out.get()) + dst_offset, nullptr, results, t);
}

Status GpuDecoder::run_to_device_ptr(DevicePlan& plan, void* dst, std::vector<int>* results, Timing* t) {
  if (!dst && plan.out_bytes) return Status::Invalid("GPU decoder: no device output address");
  return impl_->run_sync(plan, static_cast<uint8_t*>(dst), nullptr, results, t);
}

Result<uint64_t> GpuDecoder::submit(const DevicePlan& plan, DeviceBuffer& out, size_t dst_offset,
                                    const BatchDone& on_done, Timing* t) {
  WC_RETURN_IF_ERROR(check_fits(plan, out, dst_offset));
  if (impl_->in_flight.size() == 2) {
    std::vector<int> results;
    uint64_t batch = 0;
    WC_RETURN_IF_ERROR(impl_->complete_oldest(&results, &batch, t));
    WC_RETURN_IF_ERROR(on_done(batch, results));
  }
  Slot& s = impl_->free_slot();
  WC_RETURN_IF_ERROR(impl_->submit(s, plan, static_cast<uint8_t*>(out.get()) + dst_offset, nullptr));
  return s.batch;
}

Status GpuDecoder::drain(const BatchDone& on_done, Timing* t) {
  Status first;
  while (!impl_->in_flight.empty()) {
    std::vector<int> results;
    uint64_t batch = 0;
    const Status waited = impl_->complete_oldest(&results, &batch, t);
    const Status done = waited.ok() ? on_done(batch, results) : waited;
    if (first.ok() && !done.ok()) first = done;
  }
  return first;
}

Result<DeviceBuffer> decode_file_to_device(const Reader& reader, GpuDecoder& dec, Timing* t, uint64_t batch_bytes) {
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t base = reader.data_start();
  const uint64_t total = reader.original_size() - base;
  WC_ASSIGN_OR_RETURN(DeviceBuffer out, DeviceBuffer::allocate(total));
  // A GGUF source's padding between tensors is no chunk's: zeros (docs/wcodec-format.md §4.9).
  if (reader.source_is_gguf() && total) WGPU_CHECK(cudaMemset(out.get(), 0, total), "clear device memory");
  // Batches of consecutive chunks; each chunk is decoded straight to its
  // place (its offset in the original file minus data_start). While the GPU
  // decodes one batch, the next is planned and staged.
  std::deque<std::pair<uint64_t, std::vector<size_t>>> pending;  // batch id -> Reader chunk indices
  const GpuDecoder::BatchDone check = [&](uint64_t batch, const std::vector<int>& results) -> Status {
    while (!pending.empty() && pending.front().first < batch) pending.pop_front();
    if (pending.empty() || pending.front().first != batch) return Status::Internal("GPU decoder: unknown batch");
    const std::vector<size_t> idx = std::move(pending.front().second);
    pending.pop_front();
    for (size_t k = 0; k < idx.size() && k < results.size(); ++k) {
      if (results[k] != kPlanOk)
        return Status::Corruption(reader.describe_chunk(idx[k]) +
                                  (results[k] == kPlanChecksum ? ": checksum mismatch (GPU decode)"
                                                               : ": entropy-coded stream is malformed (GPU decode)"));
    }
    return Status::OK();
  };
  size_t gi = 0;
  const size_t nchunks = reader.num_chunks();
  Status st;
  // Plans in page-locked memory, uploaded without staging copies: three, so
  // that the one being built is neither of the two batches in flight.
  DevicePlan plans[3] = {DevicePlan(pinned_arena_memory()), DevicePlan(pinned_arena_memory()),
                         DevicePlan(pinned_arena_memory())};
  for (uint64_t k = 0; gi < nchunks && st.ok(); ++k) {
    DevicePlan& plan = plans[k % 3];
    std::vector<size_t> batch;
    uint64_t bytes = 0;
    while (gi < nchunks && (batch.empty() || bytes + reader.chunk(gi).decoded_size <= batch_bytes)) {
      bytes += reader.chunk(gi).decoded_size;
      batch.push_back(gi++);
    }
    const auto tp = std::chrono::steady_clock::now();
    if (Status planned = plan_chunks(reader, batch, &plan); !planned.ok()) {
      st = planned;
      break;
    }
    const uint64_t first = reader.chunk(batch.front()).decoded_offset;
    for (size_t k = 0; k < plan.chunks.size(); ++k)
      plan.chunks[k].out = reader.chunk(plan.chunk_index[k]).decoded_offset - first;
    plan.out_bytes = bytes;
    if (t) t->plan_s += seconds_since(tp);
    auto id = dec.submit(plan, out, first - base, check, t);
    if (!id.ok()) {
      st = id.status();
      break;
    }
    pending.emplace_back(*id, plan.chunk_index);
  }
  const Status drained = dec.drain(check, t);
  if (t) t->total_s += seconds_since(t0);
  WC_RETURN_IF_ERROR(st);
  WC_RETURN_IF_ERROR(drained);
  return std::move(out);
}

}  // namespace wcodec::gpu
