// mount/fuse_binding.h — the libfuse3 low-level operations of wcodecfs.
//
// A thin layer: each FUSE request becomes one wcodecfs::Filesystem call, and
// the Status it returns becomes an errno here and nowhere else. Read replies
// point into the filesystem's buffers (pinned cache entries, inline bytes,
// the zero buffer) with an iovec (fuse_reply_iov), or, when they hold ranges
// of backing files, with a fuse_bufvec that libfuse splices from those files
// into /dev/fuse (fuse_reply_data); the ReadResult keeps buffers pinned and
// files open until the reply has been written.
//
// Thread-safety: the operations run on libfuse's worker threads
// (fuse_session_loop_mt); they share only the Filesystem (thread-safe) and
// MountContext, whose mutable parts are atomics, std::once_flag and the
// handle sets under handles_mu.
#pragma once

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_set>

#include "wcodecfs/filesystem.h"

namespace wcodecfs::mount {

struct MountContext {
  Filesystem* fs = nullptr;
  std::string mountpoint;           // absolute
  // Kernel readahead per file (/sys/class/bdi/<dev>/read_ahead_kb), set
  // after INIT when permitted. 128 KiB: the daemon's own decode-ahead keeps
  // sequential readers fed, and a larger kernel window mostly makes mmap
  // page faults and reads near a tensor's end decode more than they use
  // (bench/mount_bench.sh, isnet-medium.f16, one 9.4 MB tensor via
  // safetensors: 1.05 B/B at 128 KiB, 1.37 at 1 MiB; sequential cold MB/s
  // the same). INIT still offers 16 MiB, so -o kernel_readahead= can raise it.
  unsigned max_readahead_kb = 128;
  std::once_flag tune_once;          // raise the bdi readahead after INIT, once

  // The handles the kernel holds (fi->fh of open files and directories).
  // The kernel sends RELEASE / RELEASEDIR for each, but asynchronously: a
  // session that ends first (the mount unmounted right after a process
  // closed a file, a lazy unmount, the daemon stopped while files are open)
  // never gets some of them. release_open_handles frees those.
  std::mutex handles_mu;
  std::unordered_set<uint64_t> open_files;  // HandleBox*
  std::unordered_set<uint64_t> open_dirs;   // DirSnapshot*
};

// Frees the handles no RELEASE came for; call once the session can send no
// more requests (after fuse_session_destroy), before the Filesystem goes.
// Returns how many there were.
size_t release_open_handles(MountContext& ctx);

// The operations table. userdata passed to fuse_session_new must be a
// MountContext* that outlives the session.
const struct fuse_lowlevel_ops& operations();

// The errno reported to the kernel for a filesystem error.
int errno_of(const Status& st);

// Raises /sys/class/bdi/<dev>/read_ahead_kb of the mount at `mountpoint`
// (best effort; the kernel caps FUSE readahead at its default otherwise).
// Returns what it did, for the log.
std::string raise_bdi_readahead(const std::string& mountpoint, unsigned kb);

}  // namespace wcodecfs::mount
