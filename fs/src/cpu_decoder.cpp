// fs/src/cpu_decoder.cpp — see wcodecfs/batch_decoder.h.
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <new>

#include "wcodecfs/batch_decoder.h"

namespace wcodecfs {
namespace {
unsigned online_cpus() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<unsigned>(n) : 1u;
}
// One thread more than CPUs: a decode thread also faults in its chunks'
// cache pages and waits for the store's bytes on a cold read, and the
// readers' own work (copying replies into the kernel) takes CPU beside
// the decoders'. Cold sequential read of isnet-medium.f16 on 2 CPUs,
// medians of 10 alternated runs: 2 threads 1035-1041 MB/s, 3 threads
// 1167-1195, 4 threads 1119; with the store already in the page cache,
// 2 threads 1208 and 3 threads 1219.
unsigned default_threads() { return online_cpus() + 1; }
}  // namespace

CpuBatchDecoder::CpuBatchDecoder(unsigned threads, std::shared_ptr<Stats> stats)
    : nthreads_(threads ? threads : default_threads()), stats_(std::move(stats)) {}

CpuBatchDecoder::~CpuBatchDecoder() { shutdown(); }

std::string CpuBatchDecoder::describe() const { return "cpu (" + std::to_string(nthreads_) + " threads)"; }

void CpuBatchDecoder::submit(std::vector<DecodeRequest> batch) {
  if (batch.empty()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!stopping_ && workers_.empty()) {
      workers_.reserve(nthreads_);
      for (unsigned i = 0; i < nthreads_; ++i) workers_.emplace_back([this] { worker(); });
    }
  }
  if (!queue_.push(batch))
    for (auto& r : batch) r.done(Status::Internal(kDecoderShutDown));
}

void CpuBatchDecoder::promote(uint64_t source_id, size_t index) { queue_.promote(source_id, index); }

void CpuBatchDecoder::worker() {
  // Shown by top -H / ps -L: decode time apart from the FUSE threads'.
  (void)pthread_setname_np(pthread_self(), "wcfs-decode");
  std::vector<DecodeRequest> reqs;
  while (queue_.pop_group(&reqs)) {
    run_group(reqs);
    reqs.clear();
  }
}

void CpuBatchDecoder::account(const DecodeRequest& r, const Status& st, uint64_t ns) {
  if (!stats_) return;
  Stats::add(stats_->decode_ns, ns);
  if (st.ok()) {
    Stats::add(stats_->chunks_decoded);
    Stats::add(stats_->bytes_decoded, r.source->chunk_size(r.index));
  } else {
    Stats::add(stats_->decode_errors);
  }
}

namespace {
uint64_t ns_since(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}
Status out_of_memory(const DecodeRequest& r) {
  return Status(Code::kNoResources, r.source->name() + ": out of memory decoding chunk " + std::to_string(r.index));
}
}  // namespace

Status no_buffer(const DecodeRequest& r) {
  return Status(Code::kNoResources, r.source->name() + ": cannot allocate " +
                                        std::to_string(r.source->chunk_size(r.index)) + " bytes for chunk " +
                                        std::to_string(r.index));
}

void CpuBatchDecoder::run_group(std::vector<DecodeRequest>& reqs) {
  // Requests without memory fail here and leave the group.
  for (size_t i = 0; i < reqs.size();) {
    if (reqs[i].output()) {
      ++i;
      continue;
    }
    reqs[i].done(no_buffer(reqs[i]));
    if (stats_) Stats::add(stats_->decode_errors);
    reqs.erase(reqs.begin() + static_cast<ptrdiff_t>(i));
  }
  if (reqs.empty()) return;
  const int n = static_cast<int>(reqs.size());
  WC_CHECK(n <= ChunkSource::kMaxGroup);
  size_t idx[ChunkSource::kMaxGroup];
  uint8_t* outs[ChunkSource::kMaxGroup];
  Status sts[ChunkSource::kMaxGroup];
  for (int i = 0; i < n; ++i) {
    idx[i] = reqs[static_cast<size_t>(i)].index;
    outs[i] = reqs[static_cast<size_t>(i)].out;
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    reqs.front().source->decode_group(idx, outs, n, sts);
  } catch (const std::bad_alloc&) {
    for (int i = 0; i < n; ++i) sts[i] = out_of_memory(reqs[static_cast<size_t>(i)]);
  }
  const uint64_t ns = ns_since(t0);
  for (int i = 0; i < n; ++i) account(reqs[static_cast<size_t>(i)], sts[i], ns / static_cast<uint64_t>(n));
  for (int i = 0; i < n; ++i) reqs[static_cast<size_t>(i)].done(sts[i]);
}

void CpuBatchDecoder::shutdown() {
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
    workers.swap(workers_);
  }
  std::vector<DecodeRequest> left = queue_.close();
  for (auto& t : workers) t.join();
  for (auto& r : left) r.done(Status::Internal(kDecoderShutDown));
}

bool DecodeQueue::push(std::vector<DecodeRequest>& batch) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (closed_) return false;
    for (auto& r : batch) (r.background ? background_ : demand_).push_back(std::move(r));
  }
  if (batch.size() == 1) cv_.notify_one();
  else cv_.notify_all();
  batch.clear();
  return true;
}

bool DecodeQueue::promote(uint64_t source_id, size_t index) {
  std::lock_guard<std::mutex> lk(mu_);
  for (auto it = background_.begin(); it != background_.end(); ++it) {
    if (it->index == index && it->source->id() == source_id) {
      demand_.push_back(std::move(*it));
      background_.erase(it);
      return true;
    }
  }
  return false;
}

bool DecodeQueue::pop(size_t max, std::vector<DecodeRequest>* out) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return closed_ || !demand_.empty() || !background_.empty(); });
  if (closed_) return false;
  for (auto* q : {&demand_, &background_}) {
    while (!q->empty() && out->size() < max) {
      out->push_back(std::move(q->front()));
      q->pop_front();
    }
  }
  return true;
}

bool DecodeQueue::pop_group(std::vector<DecodeRequest>* out) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return closed_ || !demand_.empty() || !background_.empty(); });
  if (closed_) return false;
  std::deque<DecodeRequest>& q = demand_.empty() ? background_ : demand_;
  out->push_back(std::move(q.front()));
  q.pop_front();
  const std::shared_ptr<const ChunkSource> src = out->front().source;
  const size_t first = out->front().index;
  // Only sources that declare grouped decoding are grouped.
  const int max_group = std::min(src->max_group(), ChunkSource::kMaxGroup);
  if (max_group <= 1) return true;
  // Members are looked for among the first few waiting requests only:
  // readahead queues a file's chunks in order, so they are usually next.
  // The group takes as many as leaves no partner alone for the next worker
  // (4 waiting: two pairs, not three and a single).
  constexpr size_t kLook = 8;
  struct Pos { std::deque<DecodeRequest>* q; size_t i; };
  Pos found[ChunkSource::kMaxGroup + 1];
  // One more partner than a group takes: whether a partner would be left
  // alone decides the group size.
  const size_t look_for = static_cast<size_t>(max_group) + 1;
  size_t nfound = 0;
  for (auto* pq : {&demand_, &background_}) {
    for (size_t i = 0; i < std::min(pq->size(), kLook) && nfound < look_for; ++i) {
      const DecodeRequest& r = (*pq)[i];
      if (r.source == src && src->pairable(first, r.index)) found[nfound++] = Pos{pq, i};
    }
  }
  const size_t take =
      static_cast<size_t>(std::clamp(src->group_size(nfound + 1), 1, max_group)) - 1;
  for (size_t k = 0; k < take; ++k) out->push_back(std::move((*found[k].q)[found[k].i]));
  for (size_t k = take; k-- > 0;) found[k].q->erase(found[k].q->begin() + static_cast<ptrdiff_t>(found[k].i));
  return true;
}

std::vector<DecodeRequest> DecodeQueue::close() {
  std::vector<DecodeRequest> left;
  {
    std::lock_guard<std::mutex> lk(mu_);
    closed_ = true;
    for (auto* q : {&demand_, &background_}) {
      for (auto& r : *q) left.push_back(std::move(r));
      q->clear();
    }
  }
  cv_.notify_all();
  return left;
}

bool DecodeQueue::closed() const {
  std::lock_guard<std::mutex> lk(mu_);
  return closed_;
}

}  // namespace wcodecfs
