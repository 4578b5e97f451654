// cuda/gpu_synthetic.cpp — run_synthetic (gpu_decoder.h): the synthetic
// throughput run of `wcodec bench --device cuda`, which builds its batch
// from device plans (codec/decompress/device_plan.h) so that the tool needs
// only public headers.
// Thread-safety: uses the caller's GpuDecoder, which is not shared.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "device_plan.h"
#include "wcodec_gpu/gpu_decoder.h"

namespace wcodec::gpu {

namespace {
using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }
}  // namespace

Result<SyntheticRun> run_synthetic(GpuDecoder& dec, const std::vector<const Reader*>& readers, double target_bytes) {
  SyntheticRun run;
  std::vector<DevicePlan> one;  // per file, all chunks
  for (const Reader* r : readers) {
    std::vector<size_t> all(r->num_chunks());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    DevicePlan p;
    Status st = plan_chunks(*r, all, &p);
    if (!st.ok()) return st;
    one.push_back(std::move(p));
  }
  const double target = target_bytes;
  // One batch of about 1 GB (every file's chunks, repeated), submitted
  // again and again through the pipeline into two alternating outputs.
  // In page-locked memory (reserved once): the decoder uploads it as it is.
  DevicePlan batch(pinned_arena_memory());
  uint64_t per_round = 0, out_round = 0;
  for (const auto& p : one) {
    per_round += p.arena.size() + 128;
    out_round += p.out_bytes;
  }
  const double rounds = out_round ? std::ceil(std::min(1e9, target) / static_cast<double>(out_round)) : 1.0;
  try {
    batch.arena.reserve(static_cast<size_t>(rounds * static_cast<double>(per_round)));
  } catch (const std::bad_alloc&) {
    return Status::IOError("GPU benchmark: no page-locked memory for a batch of " +
                           std::to_string(static_cast<uint64_t>(rounds * static_cast<double>(per_round))) + " bytes");
  }
  while (static_cast<double>(batch.out_bytes) < std::min(1e9, target))
    for (const auto& p : one) append_plan(batch, p);
  run.batch_bytes = batch.out_bytes;
  DeviceBuffer outs[2];
  for (auto& o : outs) {
    auto b = DeviceBuffer::allocate(batch.out_bytes);
    if (!b.ok()) return b.status();
    o = std::move(b).value();
  }
  uint64_t& bad = run.bad;
  const GpuDecoder::BatchDone count = [&](uint64_t, const std::vector<int>& results) {
    for (int r : results) bad += r != kPlanOk;
    return Status::OK();
  };
  // One batch first, untimed: it allocates the decoder's device buffers
  // and pinned staging (a long-lived decoder, such as the mount's, does
  // that once).
  Timing& warm = run.warm;
  const auto tw = Clock::now();
  if (auto id = dec.submit(batch, outs[0], 0, count, &warm); !id.ok()) return id.status();
  if (Status st = dec.drain(count, &warm); !st.ok()) return st;
  run.setup_s = secs(tw);
  Timing& tm = run.timing;
  double& done = run.bytes;
  const auto t0 = Clock::now();
  for (uint64_t k = 0; done < target; ++k) {
    auto id = dec.submit(batch, outs[k % 2], 0, count, &tm);
    if (!id.ok()) return id.status();
    done += static_cast<double>(batch.out_bytes);
  }
  if (Status st = dec.drain(count, &tm); !st.ok()) return st;
  run.total_s = secs(t0);
  return run;
}

}  // namespace wcodec::gpu
