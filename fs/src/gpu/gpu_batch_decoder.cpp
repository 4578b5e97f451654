// fs/src/gpu/gpu_batch_decoder.cpp — see wcodecfs/gpu_batch_decoder.h.
// Built only with CUDA (fs/CMakeLists.txt); it adapts the codec's GPU
// decoder (cuda/, wcodec_gpu) to fs's BatchDecoder.
#include "wcodecfs/gpu_batch_decoder.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "device_plan.h"
#include "wcodec_gpu/gpu_decoder.h"
#include "wcodecfs/chunk_source.h"
#include "wcodecfs/fs_log.h"

namespace wcodecfs {

namespace {

class GpuBatchDecoder final : public BatchDecoder {
 public:
  // The device is opened by the batch thread on the first submit: a daemon
  // builds its decoder before it forks, and a CUDA context does not survive
  // a fork.
  GpuBatchDecoder(const GpuBatchOptions& o, std::shared_ptr<Stats> stats)
      : opt_(o), stats_(stats), cpu_(std::make_shared<CpuBatchDecoder>(o.cpu_threads, stats)) {}
  ~GpuBatchDecoder() override { shutdown(); }

  void submit(std::vector<DecodeRequest> batch) override {
    if (batch.empty()) return;
    std::vector<DecodeRequest> to_gpu, to_cpu;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (!stopping_ && !thread_.joinable()) thread_ = std::thread([this] { loop(); });
    }
    for (auto& r : batch)
      (r.source->device_container() ? to_gpu : to_cpu).push_back(std::move(r));
    if (!queue_.push(to_gpu))
      for (auto& r : to_gpu) r.done(Status::Internal(kDecoderShutDown));
    if (!to_cpu.empty()) cpu_->submit(std::move(to_cpu));
  }

  void promote(uint64_t source_id, size_t index) override {
    if (!queue_.promote(source_id, index)) cpu_->promote(source_id, index);
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stopping_ = true;
    }
    std::vector<DecodeRequest> left = queue_.close();
    if (thread_.joinable()) thread_.join();
    for (auto& r : left) r.done(Status::Internal(kDecoderShutDown));
    cpu_->shutdown();
  }

  std::string describe() const override {
    std::string gpu;
    {
      std::lock_guard<std::mutex> lk(mu_);
      gpu = gpu_ ? gpu_->describe() : (gpu_error_.empty() ? "cuda (not opened yet)" : "cuda unavailable, all on cpu");
    }
    return gpu + (opt_.auto_mode ? ", small batches on " + cpu_->describe() : "");
  }

 private:
  void loop() {
    {
      auto g = wcodec::gpu::GpuDecoder::create(opt_.device);
      std::lock_guard<std::mutex> lk(mu_);
      if (g.ok()) {
        gpu_ = std::move(g).value();
        log_info("decoding on " + gpu_->describe());
      } else {
        gpu_error_ = g.status().ToString();
        log_error("the GPU decoder is unavailable, decoding on the CPU: " + gpu_error_);
      }
    }
    for (;;) {
      // Demand first, then readahead, up to the batch limit.
      std::vector<DecodeRequest> batch;
      if (!queue_.pop(opt_.max_batch_chunks, &batch)) return;
      if (!gpu_ || (opt_.auto_mode && batch.size() < opt_.min_gpu_chunks)) {
        cpu_->submit(std::move(batch));
        continue;
      }
      run(batch);
    }
  }

  // Decodes a batch on the GPU in one launch: each container's chunks are
  // planned, the plans appended into one (append_plan), decoded, and the
  // bytes handed to the requests. A container whose chunks cannot be
  // planned (a framing error) goes to the CPU decoder, which decides chunk
  // by chunk and names the bad one; so does the whole batch if the device
  // fails.
  void run(std::vector<DecodeRequest>& batch) {
    const auto t0 = std::chrono::steady_clock::now();
    std::map<const wcodec::Reader*, std::vector<size_t>> by_reader;  // -> request indices
    for (size_t k = 0; k < batch.size(); ++k) by_reader[batch[k].source->device_container()].push_back(k);
    struct Part {
      const wcodec::Reader* reader;
      std::vector<size_t> reqs;  // request indices, in plan order
      size_t first = 0;          // index of its first chunk in the merged plan
    };
    std::vector<Part> parts;
    wcodec::DevicePlan merged;
    auto to_cpu = [&](const std::vector<size_t>& reqs) {
      std::vector<DecodeRequest> again;
      for (size_t k : reqs) again.push_back(std::move(batch[k]));
      cpu_->submit(std::move(again));
    };
    for (auto& [reader, reqs] : by_reader) {
      std::vector<size_t> chunks;
      for (size_t k : reqs) chunks.push_back(batch[k].index);
      wcodec::DevicePlan plan;
      const wcodec::Status st = wcodec::plan_chunks(*reader, chunks, &plan);
      if (!st.ok()) {
        const std::string& name = batch[reqs.front()].source->name();
        log_once(LogLevel::kWarn, "gpu-fallback:" + name,
                 "GPU decode of " + name + " failed, decoding on the CPU: " + st.ToString());
        to_cpu(reqs);
        continue;
      }
      parts.push_back(Part{reader, reqs, merged.chunks.size()});
      wcodec::append_plan(merged, plan);
    }
    if (parts.empty()) return;
    std::vector<uint8_t> out(merged.out_bytes);
    std::vector<int> results;
    const wcodec::Status st = gpu_->run_to_host(merged, out.data(), &results);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0);
    if (stats_) Stats::add(stats_->decode_ns, static_cast<uint64_t>(ns.count()));
    if (!st.ok()) {
      log_once(LogLevel::kWarn, "gpu-fallback:device", "GPU decode failed, decoding on the CPU: " + st.ToString());
      for (const Part& part : parts) to_cpu(part.reqs);
      return;
    }
    for (const Part& part : parts) {
      const std::string& name = batch[part.reqs.front()].source->name();
      for (size_t j = 0; j < part.reqs.size(); ++j) {
        DecodeRequest& r = batch[part.reqs[j]];
        const size_t k = part.first + j;
        const wcodec::PlanChunk& c = merged.chunks[k];
        Status s;
        if (results[k] == wcodec::kPlanOk && !r.output()) {
          s = no_buffer(r);
          if (stats_) Stats::add(stats_->decode_errors);
        } else if (results[k] == wcodec::kPlanOk) {
          std::memcpy(r.out, out.data() + c.out, c.out_len);
          if (stats_) {
            Stats::add(stats_->chunks_decoded);
            Stats::add(stats_->bytes_decoded, c.out_len);
          }
        } else {
          s = Status(Code::kCorruption,
                     rename_in_message(part.reader->describe_chunk(merged.chunk_index[k]), part.reader->path(), name) +
                         (results[k] == wcodec::kPlanChecksum ? ": checksum mismatch" : ": malformed stream") +
                         " (GPU decode)");
          if (stats_) Stats::add(stats_->decode_errors);
        }
        r.done(s);
      }
    }
  }

  std::unique_ptr<wcodec::gpu::GpuDecoder> gpu_;  // set once by the batch thread
  std::string gpu_error_;
  const GpuBatchOptions opt_;
  std::shared_ptr<Stats> stats_;
  std::shared_ptr<CpuBatchDecoder> cpu_;
  DecodeQueue queue_;
  mutable std::mutex mu_;  // gpu_, gpu_error_, stopping_, thread_
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

std::shared_ptr<BatchDecoder> make_gpu_batch_decoder(const GpuBatchOptions& o, std::shared_ptr<Stats> stats) {
  return std::make_shared<GpuBatchDecoder>(o, std::move(stats));
}

std::string probe_gpu_in_child() {
  // A throwaway child asks the driver, so this process never initializes
  // CUDA (it may fork into a daemon afterwards).
  int fds[2];
  if (::pipe(fds) != 0) return std::string("pipe: ") + std::strerror(errno);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return std::string("fork: ") + std::strerror(errno);
  }
  if (pid == 0) {
    ::close(fds[0]);
    const auto info = wcodec::gpu::probe();
    const std::string msg = info.usable ? std::string() : (info.why_not.empty() ? "unusable" : info.why_not);
    (void)!::write(fds[1], msg.data(), msg.size());
    ::_exit(info.usable ? 0 : 1);
  }
  ::close(fds[1]);
  std::string msg;
  char buf[256];
  for (;;) {
    const ssize_t r = ::read(fds[0], buf, sizeof buf);
    if (r > 0) {
      msg.append(buf, static_cast<size_t>(r));
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    break;
  }
  ::close(fds[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return "";
  return msg.empty() ? "the device probe failed" : msg;
}

}  // namespace wcodecfs
