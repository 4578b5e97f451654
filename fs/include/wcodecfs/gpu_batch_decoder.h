// wcodecfs/gpu_batch_decoder.h — the mount's BatchDecoder on a GPU
// (-o decoder=gpu|auto). Built only when CUDA is (WCODEC_HAVE_CUDA): it
// adapts the codec's GPU decoder (cuda/, wcodec_gpu) to fs's BatchDecoder,
// so cuda/ needs nothing of fs/.
//
// Requests queue up while the GPU works on the previous batch, so
// concurrent misses and readahead are gathered into large batches. A batch
// of .wcodec chunks becomes one DevicePlan per container and one kernel
// launch each; decoded bytes come back to the requests' buffers. In auto
// mode a batch smaller than `min_gpu_chunks` goes to the CPU pool instead
// (a lone 256 KiB miss decodes faster on the CPU than a round trip to the
// device), and so do chunks of sources that declare no device container
// (ChunkSource::device_container()).
//
// Thread-safety: submit/promote/shutdown from any thread.
#pragma once

#include <memory>
#include <string>

#include "wcodecfs/batch_decoder.h"

namespace wcodecfs {

struct GpuBatchOptions {
  int device = 0;
  bool auto_mode = true;        // small batches on the CPU
  size_t min_gpu_chunks = 8;    // auto: smallest batch sent to the GPU
  size_t max_batch_chunks = 4096;
  unsigned cpu_threads = 0;     // the CPU pool (0: one per CPU)
};

// The device is opened on the first submit (after a daemon's fork); if it
// cannot be, the error is logged once and everything decodes on the CPU.
std::shared_ptr<BatchDecoder> make_gpu_batch_decoder(const GpuBatchOptions& o, std::shared_ptr<Stats> stats);

// "" when a usable CUDA device exists, else why not. Asks in a child
// process, so the caller's process does not initialize CUDA.
std::string probe_gpu_in_child();

}  // namespace wcodecfs
