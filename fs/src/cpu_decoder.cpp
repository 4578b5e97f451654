// fs/src/cpu_decoder.cpp — see wcodecfs/batch_decoder.h.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <new>

#include "wcodecfs/batch_decoder.h"

namespace wcodecfs {
namespace {
unsigned online_cpus() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<unsigned>(n) : 1u;
}
}  // namespace

CpuBatchDecoder::CpuBatchDecoder(unsigned threads, std::shared_ptr<Stats> stats)
    : nthreads_(threads ? threads : online_cpus()), stats_(std::move(stats)) {}

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
  std::vector<DecodeRequest> reqs;
  while (queue_.pop_pair(&reqs)) {
    if (reqs.size() == 2) run_pair(reqs[0], reqs[1]);
    else run(reqs.front());
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

void CpuBatchDecoder::run(DecodeRequest& r) {
  const auto t0 = std::chrono::steady_clock::now();
  Status st;
  try {
    st = r.source->decode(r.index, r.out);
  } catch (const std::bad_alloc&) {
    st = out_of_memory(r);
  }
  account(r, st, ns_since(t0));
  r.done(st);
}

void CpuBatchDecoder::run_pair(DecodeRequest& a, DecodeRequest& b) {
  const auto t0 = std::chrono::steady_clock::now();
  Status sa, sb;
  try {
    a.source->decode_pair(a.index, a.out, b.index, b.out, &sa, &sb);
  } catch (const std::bad_alloc&) {
    sa = out_of_memory(a);
    sb = out_of_memory(b);
  }
  const uint64_t ns = ns_since(t0);
  account(a, sa, ns / 2);
  account(b, sb, ns - ns / 2);
  a.done(sa);
  b.done(sb);
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

bool DecodeQueue::pop_pair(std::vector<DecodeRequest>* out) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return closed_ || !demand_.empty() || !background_.empty(); });
  if (closed_) return false;
  std::deque<DecodeRequest>& q = demand_.empty() ? background_ : demand_;
  out->push_back(std::move(q.front()));
  q.pop_front();
  const DecodeRequest& first = out->front();
  // The partner is looked for among the first few waiting requests only:
  // readahead queues a file's chunks in order, so it is usually next.
  constexpr size_t kLook = 8;
  for (auto* pq : {&demand_, &background_}) {
    const size_t n = std::min(pq->size(), kLook);
    for (size_t i = 0; i < n; ++i) {
      DecodeRequest& r = (*pq)[i];
      if (r.source == first.source && first.source->pairable(first.index, r.index)) {
        out->push_back(std::move(r));
        pq->erase(pq->begin() + static_cast<ptrdiff_t>(i));
        return true;
      }
    }
  }
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
