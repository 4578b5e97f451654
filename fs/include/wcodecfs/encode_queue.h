// wcodecfs/encode_queue.h — background encoding of a directory tree of plain
// files into their encoded forms, crash-safe and shared-store safe.
//
// An EncodeQueue manages one directory tree ("the area"): the mount's hidden
// staging area (STORE/.wcodecfs-staging) or, for `wcodec encode STORE`, a
// whole store. Which files are encoded, under which names and how, is said
// by the staging codecs of the store kinds (wcodecfs/store_kind.h); below,
// the wcodec kind's names stand for any: every regular file "X.safetensors"
// in the area is a candidate (not a symlink, X not empty and not ending in
// ".gguf", no ".wcodecfs-" name on the way); once it has been closed and unchanged for
// the quiet period (by the reports below and by its ctime, so files written
// by other hosts wait too) it is encoded, verified and swapped for
// "X.wcodec", which the mount presents as "X.safetensors" with the same size,
// mode, owner and mtime. The on-disk protocol, its crash matrix and the
// window left between hosts: docs/staging.md.
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
//   4. swap:   with no Hold on X (the swap marks X as swapping, which
//              hold() waits for), only if the encode was not cancelled, the
//              lock is still ours and the plain file's (dev, ino, size,
//              mtime, ctime) are those read in step 2: rename temp ->
//              X.wcodec, fsync the directory, unlink X.safetensors, fsync
//              the directory.
//   5. unlock.
// A crash leaves one of: only X.safetensors (+ a temp, + a lock); both
// X.safetensors and X.wcodec; only X.wcodec. recover() settles each: temps
// whose lock is not live are removed, stale locks are removed, and when both
// files exist (under the file's lock) the plain file is removed if its
// SHA-256 equals the one recorded in the container and the container
// verifies fully, else the container is removed (the plain file is what the
// user wrote last). Then every plain candidate is queued.
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
// Thread-safety: every member function may be called from any thread. One
// internal mutex (a leaf: no IO, no hook, no callback under it) guards the
// queue's state; hold() may block on it and on a running swap, so take
// Holds before the filesystem's own locks. Workers run with nice 19 and the
// idle IO priority when low_priority.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "wcodec/container.h"
#include "wcodecfs/fs_status.h"
#include "wcodecfs/store_kind.h"

namespace wcodecfs {

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
    std::string error;     // failed or cancelled: why
    double seconds = 0;    // done: wall time of the encode
  };
  std::vector<Item> recent;  // the pending/encoding items and the last 64 finished
};


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
  // Codec settings of every encode; `threads` (always 1: parallelism comes
  // from `threads` above) and `progress` are set by the queue.
  wcodec::EncodeConfig codec;
  // The kinds whose staging codecs decide which files are encoded, under
  // which names, and how (the first codec that names a file's encoded form
  // encodes it); empty: default_kinds().
  StoreKinds kinds;
  // Test hook: called from a worker at named points of an encode with the
  // file's area-relative path: "locked" (lock file created), "temp-written"
  // (temp complete and fsynced), "verified" (decoded and compared, metadata
  // copied), "renamed" (temp renamed to X.wcodec, directory fsynced),
  // "unlinked" (X.safetensors removed, directory fsynced), and "unlocking"
  // (after every "locked", whatever the outcome, just before the lock file
  // is removed). Tests use it to kill the process or to modify the file at
  // that point. "renamed" and "unlinked" run inside the swap: a hook there
  // must not call hold() for the same path (it would wait for itself).
  std::function<void(const char* point, const std::string& rel)> hook;
  // Called from a worker, no lock held, when a file is finished: done or
  // failed (cancelled files are retried and reported when they finish).
  // For `wcodec encode STORE`.
  std::function<void(const EncodeQueueStats::Item& item)> on_finished;
};



class EncodeQueue {
 public:
  // `area` is an existing directory (absolute or relative path).
  // options.owner_id must not contain '/' (default "<host>.<pid>", with
  // ".<n>" appended for the n-th queue of a process, n >= 2).
  static Result<std::unique_ptr<EncodeQueue>> create(const std::string& area, EncodeQueueOptions options);
  ~EncodeQueue();  // stop()
  EncodeQueue(const EncodeQueue&) = delete;
  EncodeQueue& operator=(const EncodeQueue&) = delete;

  // Crash recovery over the whole area (see above), then queues every plain
  // candidate. Call once before start(). A file whose lock is live and held
  // by another owner is left as it is (its temps too) and queued; its encode
  // waits for the lock. Errors on single entries are logged and skipped;
  // the returned error is the first one, after the whole area was visited.
  Status recover();
  // Starts the workers and the quiet-period timer. Idempotent; start() after
  // stop() starts again.
  void start();
  // Cancels running encodes (their temps are removed), joins the workers.
  // The codec has no abort point: a worker inside the codec finishes that
  // call first, then drops its result.
  void stop();
  // Blocks until nothing is pending or encoding (ignoring the quiet period of
  // files already queued when `now` is true). For `wcodec encode STORE` and
  // tests. Returns an error if stop() was called meanwhile or the queue was
  // not started. Files with a writer open are not waited for.
  Status drain(bool now = false);

  // ---- reports from the filesystem; `rel` is area-relative, "/"-separated.
  // Writers are counted per path: when a file open for writing is renamed,
  // report closed_for_write(old) and opened_for_write(new) (under a Hold on
  // both) so that the writer's claim follows the file.
  // A writer opened `rel`: cancels its encode; it is not eligible until every
  // writer closed it.
  void opened_for_write(const std::string& rel);
  // A writer closed `rel`: its quiet period starts now.
  void closed_for_write(const std::string& rel);
  // `rel` (a file, or a directory: everything under it) changed in any other
  // way: cancel, and restart the quiet period of what is still there. A
  // directory (or a file that appeared there) is scanned by the queue's
  // timer thread, not by the caller.
  void changed(const std::string& rel);

  // Keeps swaps off `rel` (a file or a directory prefix; "" is the whole
  // area) while alive; taking it cancels encodes of those paths and waits
  // for a swap of one of them that is under way (a rename, an unlink and
  // two fsyncs). Holds on unrelated paths do not block each other, and no
  // worker starts an encode of a held path. Move-only; a default-constructed
  // Hold holds nothing. A Hold must not outlive its queue's stop().
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&&) = default;
    Hold& operator=(Hold&&) = default;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    bool valid() const { return token_ != nullptr; }
    // The path held ("" for the whole area).
    const std::string& path() const;

   private:
    friend class EncodeQueue;
    struct Token;
    std::shared_ptr<Token> token_;
  };
  Hold hold(const std::string& rel);

  // The encoded file of `rel` (X.safetensors) becomes a plain file again,
  // durably: decode X.wcodec to a temp, check its SHA-256, copy mode, owner
  // and times, fsync, rename to X.safetensors, fsync the directory, unlink
  // X.wcodec, fsync. The caller holds a Hold on `rel` or a directory above
  // it (pass it in; kInvalidArgument otherwise). Used before opening an
  // encoded file for writing. OK without doing anything when X.safetensors
  // exists (the plain file wins); kNotFound when neither exists. Takes the
  // file's lock: when another owner holds it live, waits up to lock_stale /
  // 4 and then fails with kIOError ("busy"). Afterwards `rel` is queued
  // again (quiet period from now). With `empty` (an open with O_TRUNC) the
  // plain file is created empty instead of decoded, by the same steps.
  Status materialize(const std::string& rel, const Hold& held, bool empty = false);

  EncodeQueueStats stats() const;
  // The absolute path of the area.
  const std::string& area() const;

 private:
  EncodeQueue() = default;
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared with outstanding Holds
};

// True for names the queue owns (".wcodecfs-..."): hidden and reserved.
bool is_queue_internal_name(const std::string& name);

}  // namespace wcodecfs
