// wcodecfs/batch_decoder.h — decoding many chunks at once.
//
// The chunk cache hands every miss of one read (and every readahead chunk)
// to a BatchDecoder as one batch. A decoder may run the requests in any
// order and on any thread; it calls each request's `done` exactly once, also
// when it is shut down before running it. The CPU implementation is a thread
// pool; the GPU one (wcodecfs/gpu_batch_decoder.h, built with CUDA) takes
// whole batches of the sources that declare a device container.
//
// Demand requests (a reader is waiting) run before background ones
// (readahead), so readahead never delays a read that is blocked.
//
// Thread-safety: submit() may be called from any thread, concurrently.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "wcodecfs/chunk_source.h"
#include "wcodecfs/fs_stats.h"

namespace wcodecfs {

// The message of requests failed because the decoder was shut down first.
inline constexpr const char* kDecoderShutDown = "decoder is shut down";

struct DecodeRequest {
  std::shared_ptr<const ChunkSource> source;
  size_t index = 0;
  // The memory the chunk decodes into: source->chunk_size(index) bytes,
  // owned by the caller until done. Given up front in `out`, or (out null)
  // obtained from `buffer` on the decoder's thread right before the chunk
  // decodes: the chunk cache maps and pre-faults a chunk's pages there, so
  // a reader that submits a large readahead window does not wait for the
  // pages of all of it (tens of MB at about 1.2 us per 4 KiB page).
  // `buffer` answers null when no memory can be had.
  uint8_t* out = nullptr;
  std::function<uint8_t*()> buffer;
  bool background = false;
  // Called once with the result of decoding (checksum verified). Must not
  // block for long: it runs on a decoder thread.
  std::function<void(const Status&)> done;

  // `out`, asking `buffer` for it first if not given yet; null when there
  // is no memory (complete the request with no_buffer()).
  uint8_t* output() {
    if (!out && buffer) out = buffer();
    return out;
  }
};

// The error of a request whose output() is null: names the store file, the
// chunk and its size.
Status no_buffer(const DecodeRequest& r);

class BatchDecoder {
 public:
  virtual ~BatchDecoder() = default;
  virtual void submit(std::vector<DecodeRequest> batch) = 0;
  // A reader now waits for a chunk submitted as background work: run it
  // with demand priority if it has not started. Optional (default: no-op).
  virtual void promote(uint64_t source_id, size_t index) {
    (void)source_id;
    (void)index;
  }
  // Stops accepting work; requests not yet started complete with an error.
  // Waits for running requests. Idempotent.
  virtual void shutdown() = 0;
  // "cpu (4 threads)" — for the stats file and logs.
  virtual std::string describe() const = 0;
};

// The requests waiting for a decoder's threads: demand before background,
// promote() moving a waiting background request to the demand queue. Both
// decoders (CPU pool, cuda/ batches) keep their work here.
// Thread-safety: all members may be called concurrently.
class DecodeQueue {
 public:
  // Queues the requests (moved out of `batch`); false, leaving them in
  // `batch`, once closed.
  bool push(std::vector<DecodeRequest>& batch);
  // True if the request was waiting here (it is now a demand request).
  bool promote(uint64_t source_id, size_t index);
  // Waits for requests and takes up to `max`, demand first; false once
  // closed (what is left belongs to close()).
  bool pop(size_t max, std::vector<DecodeRequest>* out);
  // pop(1, out), then, when the first request's source declares grouped
  // decoding (ChunkSource::max_group() > 1), up to max_group() - 1 more
  // requests waiting (among the first few of either queue) of the same
  // source and pairable with the first (ChunkSource::pairable): they decode
  // together. It takes as many as the source's group_size() says (the
  // wcodec source leaves no partner alone: of four waiting, two pairs).
  bool pop_group(std::vector<DecodeRequest>* out);
  // Closes the queue, wakes every pop() and returns the requests left.
  std::vector<DecodeRequest> close();
  bool closed() const;

 private:
  mutable std::mutex mu_;  // a leaf lock: no callback runs under it
  std::condition_variable cv_;
  std::deque<DecodeRequest> demand_, background_;
  bool closed_ = false;
};

// A pool of CPU threads, each decoding one chunk at a time with
// ChunkSource::decode, or several with ChunkSource::decode_group where the
// source declares that it decodes them faster together. Threads start at the first submit(), not in the
// constructor, so a daemon may construct the filesystem before it forks
// (fuse_daemonize) without losing the pool.
class CpuBatchDecoder final : public BatchDecoder {
 public:
  // threads == 0 means one per online CPU plus one. `stats` (may be null)
  // receives chunks_decoded, bytes_decoded, decode_ns and decode_errors.
  CpuBatchDecoder(unsigned threads, std::shared_ptr<Stats> stats);
  ~CpuBatchDecoder() override;

  void submit(std::vector<DecodeRequest> batch) override;
  void promote(uint64_t source_id, size_t index) override;
  void shutdown() override;
  std::string describe() const override;
  unsigned threads() const { return nthreads_; }

 private:
  void worker();
  // Decodes one request, or a group of them (ChunkSource::decode_group).
  void run_group(std::vector<DecodeRequest>& reqs);
  // Adds one decoded chunk's result to the stats.
  void account(const DecodeRequest& r, const Status& st, uint64_t ns);

  const unsigned nthreads_;
  const std::shared_ptr<Stats> stats_;

  DecodeQueue queue_;
  // mu_ protects stopping_ and workers_ (started lazily). A leaf lock: done
  // callbacks run with it released.
  std::mutex mu_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace wcodecfs
