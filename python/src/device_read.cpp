// python/src/device_read.cpp — see device_read.h.
//
// A read is split into chunks: a chunk a target covers whole is decoded
// straight to its place in the target's memory; a chunk a target covers in
// part (the ends of a slice's byte range) is decoded once into scratch
// memory and the parts copied from there. The chunks go to the decoder in
// plans of at most 256 MiB of decoded bytes, one launch each; each plan's
// chunk outputs point into the callers' allocations (one base, the lowest
// destination, and per-chunk offsets from it). Chunks the GPU does not
// decode are decoded on the CPU into host memory and copied up.
//
// Where the work runs is a Backend: the CUDA device (the GPU batch decoder;
// copies on a stream of our own, not the legacy default stream, so they do
// not wait for a framework's work; the call waits for that stream before
// returning), or the host (kHostDevice: the plans run by run_plan_chunk on
// the CPU, memcpy for copies).
// Thread-safety: see the header.
#include "device_read.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "device_plan.h"

#ifndef WCODEC_PY_CUDA
#define WCODEC_PY_CUDA 0
#endif
#if WCODEC_PY_CUDA
#include <cuda_runtime_api.h>

#include "wcodec_gpu/gpu_decoder.h"
#endif

namespace wcodec_py {

namespace {

// Decoded bytes per plan (tests make it small to split reads into many).
std::atomic<uint64_t> g_batch_bytes{256ull << 20};

struct Counters {
  std::atomic<uint64_t> calls{0}, gpu_chunks{0}, gpu_bytes{0}, gpu_failed_chunks{0}, cpu_chunks{0}, copied_bytes{0};
};
Counters& counters() {
  static Counters* c = new Counters();  // never destroyed: read until the interpreter exits
  return *c;
}

enum class Copy { kHostToDevice, kDeviceToDevice };

// Where plans run and bytes are copied. Used under the caller's lock.
class Backend {
 public:
  virtual ~Backend() = default;
  // Runs every chunk of `plan`: chunk k's bytes to base + plan.chunks[k].out.
  virtual wcodec::Status run(wcodec::DevicePlan& plan, uint8_t* base, std::vector<int>* results) = 0;
  // Scratch memory of at least n bytes (valid until the next call).
  virtual wcodec::Result<uint8_t*> scratch(uint64_t n) = 0;
  // Queues a copy; `src` (host) may be reused when it returns.
  virtual wcodec::Status copy(uint8_t* dst, const uint8_t* src, uint64_t n, Copy kind) = 0;
  // Waits for every queued copy.
  virtual wcodec::Status finish() = 0;
};

class HostBackend final : public Backend {
 public:
  wcodec::Status run(wcodec::DevicePlan& plan, uint8_t* base, std::vector<int>* results) override {
    std::vector<wcodec::ModelView> views;
    wcodec::relocate(plan, plan.arena.data(), &views);
    std::vector<uint8_t> work(plan.scratch_bytes + 16);
    results->clear();
    for (const wcodec::PlanChunk& c : plan.chunks)
      results->push_back(
          wcodec::run_plan_chunk(c, views.data(), plan.arena.data(), base, work.data(), wcodec::kXxh3Secret));
    return wcodec::Status::OK();
  }
  wcodec::Result<uint8_t*> scratch(uint64_t n) override {
    if (n > scratch_.size()) scratch_.resize(n);
    return scratch_.data();
  }
  wcodec::Status copy(uint8_t* dst, const uint8_t* src, uint64_t n, Copy) override {
    std::memcpy(dst, src, n);
    return wcodec::Status::OK();
  }
  wcodec::Status finish() override { return wcodec::Status::OK(); }

 private:
  std::vector<uint8_t> scratch_;
};

#if WCODEC_PY_CUDA

std::string cuda_text(cudaError_t e, const char* what) {
  return std::string("CUDA ") + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

#define WPY_CUDA(expr, what)                                                              \
  do {                                                                                    \
    const cudaError_t wpy_err = (expr);                                                   \
    if (wpy_err != cudaSuccess) return wcodec::Status::IOError(cuda_text(wpy_err, what)); \
  } while (0)

// The GPU decoder of one device, a copy stream and scratch memory
// (grow-only).
class CudaBackend final : public Backend {
 public:
  static wcodec::Result<std::unique_ptr<CudaBackend>> create(int device) {
    std::unique_ptr<CudaBackend> b(new CudaBackend());
    WC_ASSIGN_OR_RETURN(b->dec_, wcodec::gpu::GpuDecoder::create(device));
    WPY_CUDA(cudaStreamCreateWithFlags(&b->stream_, cudaStreamNonBlocking), "create a copy stream");
    return b;
  }
  wcodec::Status run(wcodec::DevicePlan& plan, uint8_t* base, std::vector<int>* results) override {
    return dec_->run_to_device_ptr(plan, base, results);
  }
  wcodec::Result<uint8_t*> scratch(uint64_t n) override {
    if (n > scratch_.size()) {
      scratch_ = wcodec::gpu::DeviceBuffer();
      WC_ASSIGN_OR_RETURN(scratch_, wcodec::gpu::DeviceBuffer::allocate(n + n / 4));
    }
    return static_cast<uint8_t*>(scratch_.get());
  }
  wcodec::Status copy(uint8_t* dst, const uint8_t* src, uint64_t n, Copy kind) override {
    // From pageable host memory the call returns once `src` may be reused.
    WPY_CUDA(cudaMemcpyAsync(dst, src, n,
                             kind == Copy::kHostToDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice, stream_),
             kind == Copy::kHostToDevice ? "copy to the device" : "copy on the device");
    return wcodec::Status::OK();
  }
  wcodec::Status finish() override {
    WPY_CUDA(cudaStreamSynchronize(stream_), "device copies");
    return wcodec::Status::OK();
  }

 private:
  CudaBackend() = default;
  std::unique_ptr<wcodec::gpu::GpuDecoder> dec_;
  cudaStream_t stream_ = nullptr;
  wcodec::gpu::DeviceBuffer scratch_;
};

// Makes `device` current for the scope, restoring the caller's current
// device after (a framework keeps its own notion of it on the thread).
class DeviceScope {
 public:
  wcodec::Status enter(int device) {
    WPY_CUDA(cudaGetDevice(&prev_), "current device");
    WPY_CUDA(cudaSetDevice(device), "select device");
    set_ = true;
    return wcodec::Status::OK();
  }
  ~DeviceScope() {
    if (set_) cudaSetDevice(prev_);
  }

 private:
  int prev_ = 0;
  bool set_ = false;
};

#endif  // WCODEC_PY_CUDA

// A backend and the lock its users take. Created on first use and kept for
// the life of the process (never destroyed: the CUDA runtime may be torn
// down before static destructors run).
struct Entry {
  std::mutex mu;
  std::unique_ptr<Backend> backend;
};

wcodec::Result<Entry*> entry_for(int device) {
  static std::mutex mu;
  static auto* entries = new std::map<int, Entry*>();
  std::lock_guard<std::mutex> lk(mu);
  auto it = entries->find(device);
  if (it != entries->end()) return it->second;
  auto e = std::make_unique<Entry>();
  if (device == kHostDevice) {
    e->backend = std::make_unique<HostBackend>();
  } else {
#if WCODEC_PY_CUDA
    WC_ASSIGN_OR_RETURN(e->backend, CudaBackend::create(device));
#else
    return wcodec::Status::NotSupported("no GPU decoder: the package was built without CUDA");
#endif
  }
  Entry* raw = e.release();
  entries->emplace(device, raw);
  return raw;
}

// One chunk to decode and where its bytes go.
struct Item {
  size_t chunk = 0;
  uint8_t* dst = nullptr;  // address of the chunk's first decoded byte
  bool gpu_failed = false;
  int gpu_result = wcodec::kPlanOk;
};

// A part of a chunk decoded into scratch: bytes [skip, skip + len) of the
// chunk go to dst.
struct Piece {
  size_t item = 0;
  uint64_t skip = 0, len = 0;
  uint8_t* dst = nullptr;
};

const char* result_text(int r) {
  return r == wcodec::kPlanChecksum ? "checksum mismatch" : "entropy-coded stream is malformed";
}

// Decodes items[first, last) as one plan (or, if the host cannot plan them
// together, the chunks it can plan, leaving the others to the CPU, whose
// decoder says what is wrong with them). Items the decoder reports bad are
// marked for the CPU too.
wcodec::Status run_batch(const wcodec::Reader& rd, Backend& be, std::vector<Item>& items, size_t first, size_t last,
                         std::vector<bool>* to_cpu) {
  std::vector<size_t> which, gis;  // item indices of the plan, their chunks
  for (size_t k = first; k < last; ++k) which.push_back(k), gis.push_back(items[k].chunk);
  wcodec::DevicePlan plan;
  if (!wcodec::plan_chunks(rd, gis, &plan).ok()) {
    std::vector<size_t> good;
    for (size_t k : which) {
      wcodec::DevicePlan one;
      if (wcodec::plan_chunks(rd, {items[k].chunk}, &one).ok())
        good.push_back(k);
      else
        (*to_cpu)[k] = true;
    }
    which = good;
    gis.clear();
    for (size_t k : which) gis.push_back(items[k].chunk);
    if (which.empty()) return wcodec::Status::OK();
    WC_RETURN_IF_ERROR(wcodec::plan_chunks(rd, gis, &plan));
  }
  if (plan.chunks.size() != which.size()) return wcodec::Status::Internal(rd.path() + ": plan has a different chunk count");
  uint8_t* base = items[which.front()].dst;
  uint8_t* end = base;
  for (size_t k : which) {
    base = std::min(base, items[k].dst);
    end = std::max(end, items[k].dst + rd.chunk(items[k].chunk).decoded_size);
  }
  for (size_t j = 0; j < which.size(); ++j) plan.chunks[j].out = static_cast<uint64_t>(items[which[j]].dst - base);
  plan.out_bytes = static_cast<uint64_t>(end - base);
  std::vector<int> results;
  WC_RETURN_IF_ERROR(be.run(plan, base, &results));
  if (results.size() != which.size()) return wcodec::Status::Internal("GPU decoder: result count differs from the plan");
  Counters& c = counters();
  for (size_t j = 0; j < which.size(); ++j) {
    Item& it = items[which[j]];
    if (results[j] == wcodec::kPlanOk) {
      c.gpu_chunks++;
      c.gpu_bytes += rd.chunk(it.chunk).decoded_size;
    } else {
      c.gpu_failed_chunks++;
      it.gpu_failed = true;
      it.gpu_result = results[j];
      (*to_cpu)[which[j]] = true;
    }
  }
  return wcodec::Status::OK();
}

wcodec::Status read_with(const wcodec::Reader& rd, const std::vector<DeviceTarget>& targets, Backend& be) {
  Counters& c = counters();
  // Chunks to decode: whole ones to their place, partial ones (once each)
  // to scratch; header bytes (before the tensor data) read on the host.
  std::vector<std::pair<std::vector<uint8_t>, uint8_t*>> host_parts;
  std::vector<Item> items;
  std::vector<Piece> pieces;
  std::map<size_t, size_t> scratch_item;                 // chunk -> item decoding it into scratch
  std::vector<std::pair<size_t, uint64_t>> scratch_at;  // (item, offset in scratch)
  uint64_t scratch_bytes = 0;
  for (const DeviceTarget& t : targets) {
    uint64_t off = t.offset;
    const uint64_t stop = t.offset + t.len;
    uint8_t* const dst0 = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(t.dst));
    if (off < stop && off < rd.data_start()) {
      const uint64_t k = std::min(stop, rd.data_start()) - off;
      std::vector<uint8_t> h(k);
      WC_RETURN_IF_ERROR(rd.read(off, k, h.data()));
      host_parts.emplace_back(std::move(h), dst0);
      off += k;
    }
    while (off < stop) {
      const size_t gi = rd.chunk_at(off);
      if (gi == SIZE_MAX || gi >= rd.num_chunks())
        return wcodec::Status::Internal(rd.path() + ": no chunk holds offset " + std::to_string(off));
      const wcodec::ChunkEntry& ce = rd.chunk(gi);
      const uint64_t cend = ce.decoded_offset + ce.decoded_size;
      const uint64_t a = off, b = std::min(stop, cend);
      if (a < ce.decoded_offset || b <= a)
        return wcodec::Status::Internal(rd.path() + ": chunk " + std::to_string(gi) + " does not hold offset " +
                                        std::to_string(off));
      uint8_t* dst = dst0 + (a - t.offset);
      if (a == ce.decoded_offset && b == cend) {
        items.push_back(Item{gi, dst});
      } else {
        auto found = scratch_item.find(gi);
        if (found == scratch_item.end()) {
          found = scratch_item.emplace(gi, items.size()).first;
          scratch_at.emplace_back(items.size(), scratch_bytes);
          items.push_back(Item{gi, nullptr});  // in scratch, once it is allocated
          scratch_bytes += (uint64_t{ce.decoded_size} + 255) & ~uint64_t{255};
        }
        pieces.push_back(Piece{found->second, a - ce.decoded_offset, b - a, dst});
      }
      off = b;
    }
  }
  if (!scratch_at.empty()) {
    WC_ASSIGN_OR_RETURN(uint8_t* scratch, be.scratch(scratch_bytes));
    for (const auto& [item, at] : scratch_at) items[item].dst = scratch + at;
  }

  // Plans of at most batch_bytes decoded bytes (at least one chunk).
  const uint64_t batch_bytes = g_batch_bytes.load();
  std::vector<bool> to_cpu(items.size(), false);
  for (size_t first = 0; first < items.size();) {
    size_t last = first;
    uint64_t bytes = 0;
    while (last < items.size() && (last == first || bytes + rd.chunk(items[last].chunk).decoded_size <= batch_bytes))
      bytes += rd.chunk(items[last++].chunk).decoded_size;
    WC_RETURN_IF_ERROR(run_batch(rd, be, items, first, last, &to_cpu));
    first = last;
  }
  // The CPU decodes what the device did not, checking the checksum: bytes
  // that are right, or the CPU decoder's error.
  std::vector<uint8_t> host;
  for (size_t k = 0; k < items.size(); ++k) {
    if (!to_cpu[k]) continue;
    const Item& it = items[k];
    const uint32_t n = rd.chunk(it.chunk).decoded_size;
    host.resize(n);
    const wcodec::Status st = rd.decode_chunk(it.chunk, host.data());
    if (!st.ok()) {
      if (!it.gpu_failed) return st;
      return wcodec::Status(st.code(), st.message() + " (the GPU decoder found it damaged too: " +
                                           result_text(it.gpu_result) + ")");
    }
    WC_RETURN_IF_ERROR(be.copy(it.dst, host.data(), n, Copy::kHostToDevice));
    c.cpu_chunks++;
    c.copied_bytes += n;
  }
  for (const auto& [h, dst] : host_parts) {
    WC_RETURN_IF_ERROR(be.copy(dst, h.data(), h.size(), Copy::kHostToDevice));
    c.copied_bytes += h.size();
  }
  for (const Piece& p : pieces)
    WC_RETURN_IF_ERROR(be.copy(p.dst, items[p.item].dst + p.skip, p.len, Copy::kDeviceToDevice));
  return be.finish();
}

}  // namespace

DeviceReadStats device_read_stats() {
  const Counters& c = counters();
  DeviceReadStats s;
  s.calls = c.calls.load();
  s.gpu_chunks = c.gpu_chunks.load();
  s.gpu_bytes = c.gpu_bytes.load();
  s.gpu_failed_chunks = c.gpu_failed_chunks.load();
  s.cpu_chunks = c.cpu_chunks.load();
  s.copied_bytes = c.copied_bytes.load();
  return s;
}

uint64_t set_device_batch_bytes(uint64_t n) { return g_batch_bytes.exchange(std::max<uint64_t>(n, 1)); }

bool device_read_built() { return WCODEC_PY_CUDA != 0; }

std::string device_why_not(std::string* name) {
#if WCODEC_PY_CUDA
  const wcodec::gpu::DeviceInfo info = wcodec::gpu::probe();
  if (name) *name = info.name;
  return info.usable ? std::string() : info.why_not;
#else
  if (name) name->clear();
  return "package built without CUDA";
#endif
}

wcodec::Status read_to_device(const wcodec::Reader& rd, const std::vector<DeviceTarget>& targets, int device) {
  counters().calls++;
  if (device < 0 && device != kHostDevice) return wcodec::Status::Invalid("CUDA device " + std::to_string(device));
  const uint64_t size = rd.original_size();
  for (const DeviceTarget& t : targets) {
    if (t.offset > size || t.len > size - t.offset)
      return wcodec::Status::OutOfRange(rd.path() + ": read [" + std::to_string(t.offset) + ", +" +
                                        std::to_string(t.len) + ") beyond the size " + std::to_string(size));
    if (t.len && !t.dst) return wcodec::Status::Invalid(rd.path() + ": device read to a null address");
  }
  if (device == kHostDevice) {
    WC_ASSIGN_OR_RETURN(Entry * e, entry_for(device));
    std::lock_guard<std::mutex> lk(e->mu);
    return read_with(rd, targets, *e->backend);
  }
#if WCODEC_PY_CUDA
  DeviceScope scope;
  WC_RETURN_IF_ERROR(scope.enter(device));
  WC_ASSIGN_OR_RETURN(Entry * e, entry_for(device));
  std::lock_guard<std::mutex> lk(e->mu);
  return read_with(rd, targets, *e->backend);
#else
  return wcodec::Status::NotSupported(rd.path() + ": this build of the package has no GPU decoder (built without CUDA)");
#endif
}

}  // namespace wcodec_py
