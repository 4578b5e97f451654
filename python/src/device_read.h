// python/src/device_read.h — reads of a .wcodec container's original bytes
// straight into CUDA device memory, for the Python package's
// device="cuda" (the memory belongs to the caller: torch tensors).
//
// With CUDA in the build (WCODEC_PY_CUDA) the chunks are decoded by the
// GPU batch decoder (cuda/, wcodec_gpu), which checks every chunk's XXH3-64
// on the device. Chunks it cannot take (a plan the host cannot build, a
// result other than "ok") are decoded on the CPU, checksum checked, and
// copied; a chunk the CPU cannot decode either is an error naming the file,
// tensor and chunk, and no bytes of it count as read. Without CUDA,
// read_to_device reports NotSupported for a CUDA device.
//
// kHostDevice runs the same steps with host memory as the "device": the
// plans are run by the per-chunk step the GPU kernel runs
// (run_plan_chunk, device_plan.h) on the CPU, copies are memcpy. Builds
// without a GPU test the read's splitting, planning, scattering and
// fallbacks with it.
//
// Thread-safety: every function may be called from any thread. Reads of
// one device are serialized (one GPU decoder per device, used under a
// lock); the device current on the calling thread is restored on return.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wcodec/reader.h"
#include "wcodec/status.h"

namespace wcodec_py {

// Original bytes [offset, offset + len) of the file to device address dst.
struct DeviceTarget {
  uint64_t offset = 0;
  uint64_t len = 0;
  uint64_t dst = 0;
};

// Process-wide counters of read_to_device.
struct DeviceReadStats {
  uint64_t calls = 0;
  uint64_t gpu_chunks = 0;         // chunks decoded and checked on the GPU
  uint64_t gpu_bytes = 0;          // their decoded bytes
  uint64_t gpu_failed_chunks = 0;  // chunks the GPU reported malformed or mismatching
  uint64_t cpu_chunks = 0;         // chunks decoded on the CPU and copied (fallback)
  uint64_t copied_bytes = 0;       // bytes decoded on the CPU and copied to the device
};

// The "device" whose memory is host memory (see above).
inline constexpr int kHostDevice = -1;

// Whether the package was built with the GPU decoder.
bool device_read_built();
// "" when the GPU decoder can run here, else why not ("package built
// without CUDA", "no CUDA device", ...). `name` gets device 0's name.
std::string device_why_not(std::string* name = nullptr);
// Decodes every target's bytes into device memory of CUDA device `device`
// (the targets' memory must be on that device and not in use by other
// work until the call returns; the bytes are written when it returns), or,
// for kHostDevice, into host memory.
wcodec::Status read_to_device(const wcodec::Reader& rd, const std::vector<DeviceTarget>& targets, int device);
DeviceReadStats device_read_stats();
// Decoded bytes per plan (default 256 MiB; tests set it small). Returns the
// previous value.
uint64_t set_device_batch_bytes(uint64_t n);

}  // namespace wcodec_py
