// wcodecfs/encode_queue.h — background encoding of a directory tree of
// safetensors files into .wcodec containers, crash-safe and shared-store safe.
//
// An EncodeQueue manages one directory tree ("the area"): the mount's hidden
// staging area (STORE/.wcodecfs-staging) or, for `wcodec encode STORE`, a
// whole store. Every regular file "X.safetensors" in the area is a
// candidate; once it has been closed and unchanged for the quiet period it is
// encoded, verified and swapped for "X.wcodec", which the mount presents as
// "X.safetensors" with the same size, mode, owner and mtime.
//
// The life of one encode (all files in the same directory as X):
//   1. lock:   create ".wcodecfs-lock.X.safetensors" with O_EXCL (owner id,
//              pid, boot id inside; mtime refreshed while held). A lock whose
//              holder is dead (same boot id, pid gone) or whose mtime is
//              older than lock_stale is stale and is taken over.
//   2. encode: X.safetensors -> ".wcodecfs-tmp.X.safetensors.<owner>"
//              (the codec validates the safetensors file; an invalid file
//              stays plain and is logged once).
//   3. verify: decode the temp fully and compare its SHA-256 with the SHA-256
//              of the plain file read for step 2; fsync the temp; copy mode,
//              owner (when permitted) and atime/mtime of the plain file.
//   4. swap:   under the queue's swap lock, and only if the encode was not
//              cancelled and the plain file's (dev, ino, size, mtime, ctime)
//              are those read in step 2: rename temp -> X.wcodec, fsync the
//              directory, unlink X.safetensors, fsync the directory.
//   5. unlock.
// A crash leaves one of: only X.safetensors (+ a temp, + a lock); both
// X.safetensors and X.wcodec; only X.wcodec. recover() settles each: temps
// whose lock is not live are removed, stale locks are removed, and when both
// files exist the plain file is removed if its SHA-256 equals the one
// recorded in the container, else the container is removed (the plain file
// is what the user wrote last). Then every plain candidate is queued.
//
// Names beginning with ".wcodecfs-" are the queue's own; the mount hides them
// and refuses to create them.
//
// Cancellation: the filesystem reports every change to a file in the area
// (opened for writing, written, truncated, renamed, unlinked, and the same
// for a directory above it). Reports that can race with a swap are made
// while holding a Hold on the path: taking one cancels encodes of that path
// (and, for a directory, of everything under it) and keeps any swap from
// starting until it is released, so after the modifying operation completes
// no encode started from the old content can ever be swapped in.
//
// Thread-safety: every member function may be called from any thread.
// Workers run with nice 19 and the idle IO priority when low_priority.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "wcodecfs/fs_status.h"

namespace wcodecfs {

struct EncodeQueueOptions {
  // A file is encoded once it has been closed (no writer open through this
  // queue's user) and unchanged for this long (-o encode_delay=).
  std::chrono::milliseconds quiet{std::chrono::seconds(10)};
  // Encoder worker threads (-o encode_threads=); each encodes one file at a
  // time, single-threaded.
  unsigned threads = 1;
  // nice 19 + IOPRIO_CLASS_IDLE for the workers.
  bool low_priority = true;
  // A lock whose file was not refreshed for this long is stale even when its
  // holder runs on another host. Holders refresh every lock_stale / 4.
  std::chrono::milliseconds lock_stale{std::chrono::minutes(2)};
  // Identifies this queue's owner in lock and temp names: "<host>.<pid>" by
  // default. Tests set distinct ids to model two hosts.
  std::string owner_id;
  // Test hook: called at named points of an encode ("locked", "temp-written",
  // "verified", "renamed", "unlinked") with the file's area-relative path.
  // Tests use it to kill the process or to modify the file at that point.
  std::function<void(const char* point, const std::string& rel)> hook;
};

// One line of the queue's state, for the stats file and `wcodec status`.
struct EncodeQueueStats {
  uint64_t pending = 0;    // candidates waiting (quiet period or a free worker)
  uint64_t encoding = 0;   // encodes running now
  uint64_t done = 0;       // swapped in since start
  uint64_t failed = 0;     // not safetensors / invalid / error (stay plain)
  uint64_t cancelled = 0;  // cancelled by a change or by another host's lock
  uint64_t bytes_in = 0;   // plain bytes of the files done
  uint64_t bytes_out = 0;  // their encoded bytes
  double seconds = 0;      // wall time spent in done encodes
  struct Item {
    std::string path;      // area-relative
    std::string state;     // "pending", "encoding", "done", "failed", "cancelled"
    uint64_t size = 0;     // plain size
    uint64_t encoded = 0;  // encoded size (done)
    std::string error;     // failed: why
  };
  std::vector<Item> recent;  // the pending/encoding items and the last 64 finished
};

class EncodeQueue {
 public:
  // `area` is an existing directory (absolute or relative path).
  static Result<std::unique_ptr<EncodeQueue>> create(const std::string& area, EncodeQueueOptions options);
  ~EncodeQueue();  // stop()
  EncodeQueue(const EncodeQueue&) = delete;
  EncodeQueue& operator=(const EncodeQueue&) = delete;

  // Crash recovery over the whole area (see above), then queues every plain
  // candidate. Call once before start().
  Status recover();
  // Starts the workers and the quiet-period timer.
  void start();
  // Cancels running encodes (their temps are removed), joins the workers.
  void stop();
  // Blocks until nothing is pending or encoding (ignoring the quiet period of
  // files already queued when `now` is true). For `wcodec encode STORE` and
  // tests. Returns an error if stop() was called meanwhile.
  Status drain(bool now = false);

  // ---- reports from the filesystem; `rel` is area-relative, "/"-separated.
  // A writer opened `rel`: cancels its encode; it is not eligible until every
  // writer closed it.
  void opened_for_write(const std::string& rel);
  // A writer closed `rel`: its quiet period starts now.
  void closed_for_write(const std::string& rel);
  // `rel` (a file, or a directory: everything under it) changed in any other
  // way: cancel, and restart the quiet period of what is still there.
  void changed(const std::string& rel);

  // Keeps swaps off `rel` (a file or a directory prefix) while alive; taking
  // it cancels encodes of those paths. Move-only.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&&) = default;
    Hold& operator=(Hold&&) = default;
   private:
    friend class EncodeQueue;
    std::unique_lock<std::mutex> lk_;
  };
  Hold hold(const std::string& rel);

  // The encoded file of `rel` (X.safetensors) becomes a plain file again,
  // durably: decode X.wcodec to a temp, fsync, rename to X.safetensors, fsync
  // the directory, unlink X.wcodec, fsync. The caller holds a Hold on `rel`
  // (pass it in). Used before opening an encoded file for writing.
  Status materialize(const std::string& rel, const Hold& held);

  EncodeQueueStats stats() const;
  // The absolute path of the area.
  const std::string& area() const;

 private:
  EncodeQueue() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// True for names the queue owns (".wcodecfs-..."): hidden and reserved.
bool is_queue_internal_name(const std::string& name);

}  // namespace wcodecfs
