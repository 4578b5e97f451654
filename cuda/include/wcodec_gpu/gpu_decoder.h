// cuda/include/wcodec_gpu/gpu_decoder.h — the CUDA batch decoder of .wcodec
// chunks. Host C++ API; no CUDA headers needed by users.
//
// A batch is a DevicePlan (codec/decompress/device_plan.h; plan_chunks):
// every chunk of it is decoded on the GPU in one kernel launch with the same
// per-chunk code the CPU reference decoder runs, and its XXH3-64 is checked
// on the device. Results are per chunk: a chunk whose stream is malformed or
// whose checksum differs is reported, its bytes never handed out as good.
//
// Two ways out: run_to_host copies the decoded bytes back (the mount's
// decoder), run_to_device leaves them in device memory (loaders that want
// weights on the GPU).
//
// Batches go through two slots, each with its own stream, device buffers and
// pinned (page-locked) host staging, kept across batches: a plan is copied
// into pinned memory, relocated there, uploaded asynchronously and decoded;
// with submit() the host plans and stages the next batch while the GPU
// uploads and decodes the previous ones.
//
// Thread-safety: a GpuDecoder is used by one thread at a time; use one per
// thread for concurrency. probe() is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "wcodec/container.h"
#include "wcodec/status.h"

namespace wcodec {
struct DevicePlan;
struct ArenaMemory;
}

namespace wcodec::gpu {

struct DeviceInfo {
  bool usable = false;  // a device this build can run on
  int count = 0;
  std::string name;     // of device 0
  std::string why_not;  // when not usable: "no CUDA device", "driver too old", ...
};
// Looks for a CUDA device (never fails; says why when there is none).
DeviceInfo probe();

// Page-locked host memory for plan arenas (DevicePlan(pinned_arena_memory())):
// the decoder uploads such an arena from the plan itself, without a staging
// copy on the host. Allocating it is slow (cudaMallocHost), so keep such
// plans and reuse them (plan_chunks keeps a plan's arena memory).
const ArenaMemory* pinned_arena_memory();

// Seconds spent per phase of a run (host clock for host work, CUDA events
// for the device).
struct Timing {
  double plan_s = 0;      // building the plan on the host (callers that plan)
  double upload_s = 0;    // host -> device copies
  double kernel_s = 0;    // the decode kernel(s)
  double download_s = 0;  // device -> host copies
  double total_s = 0;     // wall time of the run
};

// Device memory owned by the caller.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  static Result<DeviceBuffer> allocate(size_t bytes);
  void* get() const { return ptr_; }
  size_t size() const { return bytes_; }
  // Copies [off, off+n) to host memory.
  Status copy_to_host(size_t off, size_t n, void* dst) const;

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class GpuDecoder {
 public:
  // Fails with a clear message when no usable device exists.
  static Result<std::unique_ptr<GpuDecoder>> create(int device = 0);
  ~GpuDecoder();
  GpuDecoder(const GpuDecoder&) = delete;
  GpuDecoder& operator=(const GpuDecoder&) = delete;

  // Decodes every chunk of `plan` (relocated into the staging copy) into
  // out[0, plan.out_bytes) on the host; results[k] is kPlanOk,
  // kPlanMalformed or kPlanChecksum for plan.chunks[k].
  Status run_to_host(DevicePlan& plan, uint8_t* out, std::vector<int>* results, Timing* t = nullptr);
  // The same, leaving the bytes in `out` (device memory, at least
  // plan.out_bytes) at out + dst_offset + chunk.out.
  Status run_to_device(DevicePlan& plan, DeviceBuffer& out, size_t dst_offset, std::vector<int>* results,
                       Timing* t = nullptr);
  // The same into device memory allocated elsewhere (a framework's
  // allocator, on the decoder's device): chunk k's bytes go to
  // dst + plan.chunks[k].out, so a caller may scatter the chunks over
  // several allocations by setting their `out` (dst the lowest of them).
  // Exactly out_len bytes are written per chunk, nothing else; the call
  // returns when they are written (and checked).
  Status run_to_device_ptr(DevicePlan& plan, void* dst, std::vector<int>* results, Timing* t = nullptr);

  // Pipelined decoding into device memory. submit() queues the upload of
  // `plan` and its decode into out + dst_offset + chunk.out and returns the
  // batch's id (0, 1, 2, ... in submission order) without waiting. A plan
  // whose arena is page-locked (pinned_arena_memory()) is uploaded from its
  // own memory and must stay unchanged until its batch completes (on_done);
  // any other plan is staged (copied) first and may be reused as soon as
  // submit returns. At most two batches are in flight: a third submit() first waits
  // for the oldest. Every completed batch's per-chunk results go to on_done
  // (in submission order); drain() completes all batches in flight. An
  // error from on_done is returned by the call that ran it. run_to_host and
  // run_to_device refuse to run while batches are in flight.
  using BatchDone = std::function<Status(uint64_t batch, const std::vector<int>& results)>;
  Result<uint64_t> submit(const DevicePlan& plan, DeviceBuffer& out, size_t dst_offset, const BatchDone& on_done,
                          Timing* t = nullptr);
  Status drain(const BatchDone& on_done, Timing* t = nullptr);

  std::string describe() const;

 private:
  GpuDecoder() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Decodes the tensor data of a whole .wcodec file into device memory: byte
// i of the returned buffer is byte data_start + i of the original file.
// Works in batches of about `batch_bytes` decoded bytes, pipelined (the next
// batch is planned and staged while the GPU decodes). Any chunk that
// fails is an error naming the file, tensor and chunk.
Result<DeviceBuffer> decode_file_to_device(const Reader& reader, GpuDecoder& dec, Timing* t = nullptr,
                                           uint64_t batch_bytes = 256ull << 20);

// The synthetic benchmark of `wcodec bench --device cuda` (gpu_synthetic.cpp):
// every chunk of `readers`, planned once per file and repeated into one
// batch of about min(1 GB, target_bytes) decoded bytes. One batch runs
// first, untimed (it allocates the decoder's device buffers and pinned
// staging); then the batch is submitted again and again through the
// pipeline into two alternating device outputs until target_bytes are
// decoded.
struct SyntheticRun {
  uint64_t batch_bytes = 0;  // decoded bytes of one batch
  double setup_s = 0;        // wall time of the first, untimed batch
  Timing warm;               // its phases
  double bytes = 0;          // decoded bytes of the timed batches
  double total_s = 0;        // their wall time
  Timing timing;             // their phases
  uint64_t bad = 0;          // chunks that failed on the GPU, all batches
};
Result<SyntheticRun> run_synthetic(GpuDecoder& dec, const std::vector<const Reader*>& readers, double target_bytes);

}  // namespace wcodec::gpu
