// fs/src/staging.h — the writable staging tree of a mount (private to fs/).
//
// MOUNT/<staging>/ is backed by the hidden store directory
// STORE/.wcodecfs-staging. Inside it every entry is a plain file, directory,
// symlink or special file of that area, except that an encoded file made by
// the EncodeQueue ("X.wcodec") is presented under its plain name
// ("X.safetensors"), as the StagingCodec that wrote it says. The usual
// modifying operations work; each one tells the EncodeQueue what changed, and
// those that could race with a swap run under an EncodeQueue::Hold of the
// paths they touch.
//
// A file node stands for a presented name, not for one stored inode: each
// operation resolves it again to the plain file (which wins when both exist)
// or the encoded one, so the background swap of a plain file for its
// encoded form is invisible to the kernel: same node, same size, mode,
// owner and mtime. Reads of a handle opened before the swap continue on the
// plain file's descriptor.
//
// Names beginning with ".wcodecfs-" (the queue's locks and temporaries) and
// the encoded names of every staging codec are reserved: hidden, never
// found, never created.
//
// Node ids are >= kBase, disjoint from the read-only tree's.
//
// Thread-safety: every member function may be called from any thread. mu_
// (a leaf) guards the node table and every node's location, lookup count,
// writer count and cached view; no IO happens under it. Holds are taken
// before mu_, never while holding it.
#pragma once

#include <sys/stat.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "wcodecfs/encode_queue.h"
#include "wcodecfs/fs_types.h"
#include "wcodecfs/store_kind.h"

namespace wcodecfs {

class Staging {
 public:
  static constexpr NodeId kBase = NodeId(1) << 62;
  static constexpr NodeId kRootId = kBase + 1;
  static bool owns(NodeId id) { return id >= kBase; }

  // The virtual file of an encoded stored file and the stat of the input it
  // was built from.
  struct EncodedView {
    std::shared_ptr<const VirtualFile> vfile;
    struct stat st {};
  };
  // Builds the view of encoded file `stored` in directory `dirfd`
  // (store-relative `dir_path`), presented as `presented` (the Filesystem's
  // kinds + chunk-source bookkeeping).
  using BuildEncoded = std::function<Result<EncodedView>(int dirfd, const std::string& dir_path,
                                                         const std::string& stored, const std::string& presented)>;

  // Creates the area below the store root (mode 01777, like /tmp: everyone
  // may create, only owners remove) when it does not exist yet.
  static Result<std::unique_ptr<Staging>> create(int store_fd, const std::string& store_path,
                                                 const std::string& presented_name, EncodeQueueOptions encode,
                                                 std::vector<const StagingCodec*> codecs, BuildEncoded build,
                                                 uint64_t readahead_cap);
  ~Staging();

  const std::string& name() const { return name_; }
  EncodeQueue& queue() { return *queue_; }

  // The staging root as an entry of the mount root (counts a lookup).
  Result<Entry> root_entry();
  Result<Entry> lookup(NodeId parent, std::string_view name);
  void forget(NodeId id, uint64_t n);
  Result<Entry> getattr(NodeId id);
  Result<std::vector<DirEntry>> readdir(NodeId id);
  Result<std::string> readlink(NodeId id);
  Result<std::shared_ptr<FileHandle>> open(NodeId id, int flags);

  Result<std::pair<Entry, std::shared_ptr<FileHandle>>> create(NodeId parent, std::string_view name, mode_t mode,
                                                               int flags, const Caller& who);
  Result<Entry> mkdir(NodeId parent, std::string_view name, mode_t mode, const Caller& who);
  Result<Entry> symlink(NodeId parent, std::string_view name, const std::string& target, const Caller& who);
  Status unlink(NodeId parent, std::string_view name);
  Status rmdir(NodeId parent, std::string_view name);
  // Both parents are staging nodes.
  Status rename(NodeId parent, std::string_view name, NodeId new_parent, std::string_view new_name, unsigned flags);
  Result<Entry> setattr(NodeId id, const AttrChange& change, FileHandle* fh);

  size_t node_count() const;

 private:
  struct Node;
  struct Backing;
  Staging() = default;

  Result<std::shared_ptr<Node>> get(NodeId id) const;
  Result<std::shared_ptr<Node>> get_dir(NodeId id) const;
  // The node's parent and name now (rename may change them).
  std::pair<std::shared_ptr<Node>, std::string> where(const Node& n) const;
  // Area-relative path ("" for the root).
  std::string rel_path(const Node& n) const;
  std::string rel_path_locked(const Node& n) const;
  std::string child_rel(const Node& dir, std::string_view name) const;
  // What a presented file name stands for in directory `dirfd` now.
  Result<Backing> resolve(int dirfd, const std::string& name, const std::string& rel) const;
  Result<std::shared_ptr<const VirtualFile>> view_of(Node& n, int dirfd, const Backing& b, const std::string& rel);
  Result<struct stat> stat_of(Node& n);
  Result<Entry> entry_of(Node& n);
  Result<Entry> lookup_locked_out(const std::shared_ptr<Node>& parent, const std::string& name, bool count);
  // Makes `name` in `dir` (which holds an encoded file) a plain file: empty
  // when `empty`, else with the decoded content. Called under a Hold.
  Status make_plain(int dirfd, const std::string& name, const std::string& rel, bool empty,
                    const EncodeQueue::Hold& held);
  // Drops the (parent, name) -> node mapping (the entry is gone).
  void unmap(NodeId parent, const std::string& name);
  // After a rename: re-registers open writers under their new paths.
  void move_writers(const std::string& from, const std::string& to);
  std::shared_ptr<void> writer_token(const std::shared_ptr<Node>& n, const std::string& rel);
  Status own(int dirfd, const std::string& name, const Caller& who, bool is_dir) const;
  // The stored name of plain `presented`'s encoded form ("" if none
  // encodes it), the plain name of encoded `stored` ("" if not encoded),
  // and whether `name` is reserved.
  std::string encoded_name_of(std::string_view presented) const;
  std::string presented_name_of(std::string_view stored) const;
  bool reserved(std::string_view name) const;
  Status check_new_name(std::string_view name, const std::string& rel) const;

  std::string name_;          // presented name in the mount root
  std::string area_path_;     // absolute path of the area
  int store_fd_ = -1;         // the store root (O_PATH), owned by the Filesystem
  uint64_t readahead_cap_ = 0;
  std::vector<const StagingCodec*> codecs_;  // owned by the Filesystem's kinds
  BuildEncoded build_;
  std::unique_ptr<EncodeQueue> queue_;

  mutable std::mutex mu_;
  std::unordered_map<NodeId, std::shared_ptr<Node>> nodes_;
  std::map<std::pair<NodeId, std::string>, NodeId> children_;
  NodeId next_id_ = kBase + 16;
};

}  // namespace wcodecfs
