// wcodecfs/filesystem.h — the mount's filesystem model, without FUSE.
//
// A Filesystem presents a store directory as a tree of nodes:
//  - the store's directories, symlinks and plain files, unchanged
//    (passthrough);
//  - in every directory, what the store kinds present there
//    (wcodecfs/store_kind.h): read-only virtual files built from stored
//    inputs, which are hidden (X.wcodec shown as X.safetensors) or stay
//    visible (views). A plain stored entry of a presented name wins over
//    the presentation, with a warning logged once;
//  - in the root, the directory ".wcodecfs" with the read-only file "stats"
//    (JSON counters; its content is generated at open time).
//
// Nodes are addressed by NodeId, as FUSE does: lookup() hands out an id and
// counts a reference, forget() drops references, and an id is never reused.
// The root is kRootId.
//
// Safety: every store path is resolved relative to a directory fd with
// O_NOFOLLOW / AT_SYMLINK_NOFOLLOW, one component at a time, so nothing
// outside the store is reachable through the daemon. Symlinks are presented
// as links (readlink returns the stored text) and never followed by the
// daemon; resolving them is the kernel's job, on the client side.
//
// Everything outside the staging tree is read-only: opening for writing and
// every modifying operation return kReadOnly.
//
// Stat, lookup, readdir and open decode nothing; read() decodes the chunks
// it touches (through the shared ChunkCache) plus the handle's readahead.
//
// Thread-safety: every member function may be called from any thread.
// Locks (all leaves, never two held at once): Filesystem::mu_ (node table),
// ChunkCache::mu_, CpuBatchDecoder::mu_, Readahead::mu_ (per handle), the
// logger's. No lock is held across a system call on the store except
// ChunkCache/decoder internals that are themselves leaves.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <deque>
#include <unordered_map>
#include <vector>

#include "wcodecfs/batch_decoder.h"
#include "wcodecfs/chunk_cache.h"
#include "wcodecfs/encode_queue.h"
#include "wcodecfs/fs_stats.h"
#include "wcodecfs/fs_status.h"
#include "wcodecfs/fs_types.h"
#include "wcodecfs/store_kind.h"
#include "wcodecfs/virtual_file.h"

namespace wcodecfs {

struct FsOptions {
  // Decoded-chunk cache budget; 0 selects default_cache_bytes().
  uint64_t cache_bytes = 0;
  // CPU decoder threads; 0 = one per online CPU plus one.
  unsigned decode_threads = 0;
  // Advise the chunk cache's memory for transparent huge pages (the mount's
  // -o hugepages; see fs/src/buffer_pool.h for when that pays).
  bool huge_pages = false;
  // Drop a decoded chunk from the cache once all its bytes were read through
  // keep_cache handles (ChunkCache::create; the mount sets it: there the
  // kernel's page cache keeps those bytes).
  bool drop_behind = false;
  // Readahead window cap per open file (bytes); 0 disables readahead. The
  // effective cap is also at most a quarter of the cache budget.
  uint64_t readahead_max = 64ull << 20;
  // Decoder to use instead of the CPU pool (tests, GPU).
  std::shared_ptr<BatchDecoder> decoder;
  // Or: builds the decoder given the filesystem's counters (the mount's
  // -o decoder=gpu|auto). Used when `decoder` is null.
  std::function<std::shared_ptr<BatchDecoder>(std::shared_ptr<Stats>)> make_decoder;
  // Name of the writable staging directory in the mount root (-o staging=);
  // empty: no staging tree, the whole mount is read-only. It is backed by
  // the hidden store directory kStagingArea.
  std::string staging = "staging";
  // The background encoder of the staging tree (its kinds default to the
  // mount's).
  EncodeQueueOptions encode;
  // The store kinds, in order of precedence; empty: default_kinds().
  StoreKinds kinds;
};

// min(1 GiB, 25% of physical memory).
uint64_t default_cache_bytes();

class Staging;

class Filesystem {
 public:
  static constexpr NodeId kRootId = 1;
  // Name of the control directory in the mount root and its stats file.
  static constexpr const char* kControlDir = ".wcodecfs";
  static constexpr const char* kStatsFile = "stats";
  // The hidden store directory behind the staging tree; never presented.
  static constexpr const char* kStagingArea = kStagingAreaName;

  // Opens the store directory. Starts no threads (the decoder pool starts at
  // the first decode), so a daemon may fork after this.
  static Result<std::unique_ptr<Filesystem>> create(const std::string& store_path, FsOptions options = {});
  ~Filesystem();
  Filesystem(const Filesystem&) = delete;
  Filesystem& operator=(const Filesystem&) = delete;

  // Looks `name` up in directory `parent`, counting one reference to the
  // returned node (release with forget). Names must be single components.
  Result<Entry> lookup(NodeId parent, std::string_view name);
  // Drops `n` references; the node is forgotten when none are left.
  void forget(NodeId id, uint64_t n);
  Result<Entry> getattr(NodeId id);
  // The entries of directory `id` (including "." and ".."), as presented.
  Result<std::vector<DirEntry>> readdir(NodeId id);
  Result<std::string> readlink(NodeId id);
  // Opens a file for reading (flags as for open(2); any write access or
  // O_TRUNC is kReadOnly).
  Result<std::shared_ptr<FileHandle>> open(NodeId id, int flags);
  Result<ReadResult> read(FileHandle& fh, uint64_t off, uint64_t len);
  Result<struct statvfs> statfs();
  // Every modifying operation outside the staging tree: returns kReadOnly
  // naming `op`.
  Status modify(const char* op) const;

  // Starts background work (the staging tree's crash recovery and encoder
  // workers). Call once, after any fork (daemonizing).
  Status start_background();

  // Modifying operations. Allowed inside the staging tree only (kReadOnly
  // elsewhere; kCrossDevice for a rename between the two).
  Result<std::pair<Entry, std::shared_ptr<FileHandle>>> create(NodeId parent, std::string_view name, mode_t mode,
                                                               int flags, const Caller& who);
  Result<Entry> mkdir(NodeId parent, std::string_view name, mode_t mode, const Caller& who);
  Result<Entry> symlink(NodeId parent, std::string_view name, const std::string& target, const Caller& who);
  Status unlink(NodeId parent, std::string_view name);
  Status rmdir(NodeId parent, std::string_view name);
  // flags: 0 or RENAME_NOREPLACE (RENAME_EXCHANGE only between plain entries).
  Status rename(NodeId parent, std::string_view name, NodeId new_parent, std::string_view new_name, unsigned flags);
  // `fh` (may be null): the handle the change came through (ftruncate).
  Result<Entry> setattr(NodeId id, const AttrChange& change, FileHandle* fh);
  Result<size_t> write(FileHandle& fh, uint64_t off, const uint8_t* data, size_t len);
  Status fsync(FileHandle& fh, bool datasync);

  // The staging tree's encoder; null without a staging tree.
  EncodeQueue* encode_queue();

  // Convenience for tools and tests: looks up each component of a
  // "/"-separated path from the root (counting references like lookup).
  Result<Entry> lookup_path(std::string_view path);

  Stats& stats() { return *stats_; }
  const ChunkCache& cache() const { return *cache_; }
  // The JSON document served as /.wcodecfs/stats.
  std::string stats_json() const;
  // Number of live nodes (tests: forget bookkeeping).
  size_t node_count() const;

 private:
  struct Node;
  Filesystem() = default;
  Result<std::shared_ptr<Node>> get_node(NodeId id) const;
  Result<Entry> lookup_store(const std::shared_ptr<Node>& parent, std::string_view name);
  Result<std::shared_ptr<Node>> make_node(const std::shared_ptr<Node>& parent, std::string_view name);
  Entry publish(const std::shared_ptr<Node>& parent, std::string_view name, std::shared_ptr<Node> fresh);
  Result<Entry> entry_of(const std::shared_ptr<Node>& n) const;
  Result<struct stat> stat_node(const Node& n) const;
  struct stat control_dir_attr() const;
  bool plain_exists(int dirfd, const std::string& name) const;
  // What the kinds present in directory `dir_node` (cached while the
  // directory is unchanged; `fresh` lists it again).
  struct DirView;
  Result<std::shared_ptr<const DirView>> dir_view(const std::shared_ptr<Node>& dir_node, bool fresh);
  // The cache identity of a presented file: its kind, name and every input's
  // (device, inode, size, mtime).
  struct SourceKey {
    std::string kind;
    std::string presented;
    std::vector<std::array<int64_t, 5>> inputs;
    auto operator<=>(const SourceKey&) const = default;
  };
  static SourceKey source_key(const StoreKind& kind, const std::string& presented,
                              const std::vector<struct stat>& inputs);
  // The virtual file of `key` while someone still holds it, else null.
  std::shared_ptr<const VirtualFile> known_file(const SourceKey& key);
  // The cache id of the k-th chunk source of `key` (made on first use).
  uint64_t source_id(const SourceKey& key, size_t k);
  void remember(const SourceKey& key, const std::shared_ptr<const VirtualFile>& vf);
  // Attributes of a presented file made of `inputs` (at least one).
  static struct stat virtual_attr(const std::vector<struct stat>& inputs);
  // A presented file, built by its kind from its inputs (opened below
  // `dir`), or the one already built for the same unchanged inputs.
  struct Built {
    std::shared_ptr<const VirtualFile> vfile;
    std::vector<struct stat> input_st;
  };
  Result<Built> build_presented(const StoreDir& dir, const StoreKind& kind, const Presentation& p);
  // The presented file `presented` of encoded file `stored` in directory
  // `dirfd` (store-relative `dir_path`): the kind whose staging codec wrote
  // it builds it. Used by the staging tree.
  Result<Built> build_stored(int dirfd, const std::string& dir_path, const std::string& stored,
                             const std::string& presented);

  std::string store_path_;  // absolute
  FsOptions options_;
  std::unique_ptr<Staging> staging_;
  uint64_t readahead_cap_ = 0;
  StoreKinds kinds_;
  std::shared_ptr<Stats> stats_;
  std::shared_ptr<BatchDecoder> decoder_;
  std::shared_ptr<ChunkCache> cache_;
  struct timespec started_ {};

  // mu_ protects nodes_, children_, next_id_, sources_, recent_ and every Node's
  // nlookup and view. Leaf lock: held only for map updates, never across IO or
  // other locks.
  mutable std::mutex mu_;
  std::unordered_map<NodeId, std::shared_ptr<Node>> nodes_;
  std::map<std::pair<NodeId, std::string>, NodeId> children_;
  NodeId next_id_ = 0;
  // Per presented file version seen (SourceKey): the cache ids of its chunk
  // sources and its virtual file while anyone holds it. The same unchanged
  // inputs looked up again after the kernel forgot their node find their
  // decoded chunks still cached and, if recent, their virtual file still
  // built (building one parses indexes and builds decode tables:
  // milliseconds per tensor). A few dozen bytes per entry; recent_ keeps the
  // last kRecentFiles virtual files alive.
  struct SourceEntry {
    std::vector<uint64_t> ids;
    std::weak_ptr<const VirtualFile> vfile;
  };
  static constexpr size_t kRecentFiles = 32;
  std::map<SourceKey, SourceEntry> sources_;
  std::deque<std::shared_ptr<const VirtualFile>> recent_;
};

}  // namespace wcodecfs
