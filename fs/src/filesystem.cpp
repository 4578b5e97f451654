// fs/src/filesystem.cpp — see wcodecfs/filesystem.h.
#include "wcodecfs/filesystem.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "staging.h"
#include "fs_util.h"
#include "wcodecfs/fs_log.h"

#ifndef WCODECFS_VERSION
#define WCODECFS_VERSION "unknown"
#endif

namespace wcodecfs {

namespace {

constexpr NodeId kControlDirId = 2;
constexpr NodeId kStatsFileId = 3;
constexpr NodeId kFirstDynamicId = 16;
constexpr uint64_t kMinTableBudget = 8ull << 20;  // decoding tables of a few tensors
// Inode numbers shown for the control entries (no store inode behind them).
constexpr ino_t kControlDirIno = 0x7763666300000002ull;
constexpr ino_t kStatsFileIno = 0x7763666300000003ull;
// Preferred IO size reported for virtual files: the largest FUSE read.
constexpr blksize_t kVirtualBlksize = 1 << 20;


Status check_name(std::string_view name) {
  if (name.empty() || name == "." || name == "..")
    return Status::Invalid("name \"" + std::string(name) + "\" is not an entry name");
  if (name.size() > NAME_MAX)
    return Status(Code::kNameTooLong, "name of " + std::to_string(name.size()) + " bytes (NAME_MAX " +
                                          std::to_string(NAME_MAX) + ")");
  if (name.find('/') != std::string_view::npos || name.find('\0') != std::string_view::npos)
    return Status::Invalid("name contains '/' or NUL");
  return Status::OK();
}

bool same_object(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && (a.st_mode & S_IFMT) == (b.st_mode & S_IFMT);
}

bool same_content(const struct stat& a, const struct stat& b) {
  return same_object(a, b) && a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
         a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

}  // namespace

uint64_t default_cache_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
  const uint64_t one_gib = 1ull << 30;
  if (pages <= 0 || psize <= 0) return one_gib;
  return std::min<uint64_t>(one_gib, static_cast<uint64_t>(pages) * static_cast<uint64_t>(psize) / 4);
}

struct Filesystem::Node {
  enum class Kind { kDir, kFile, kSymlink, kOther, kVirtual, kControlDir, kStatsFile };

  NodeId id = 0;
  Kind kind = Kind::kOther;
  // Keeps the parent's dirfd open while this node lives; null for the root
  // and the control entries.
  std::shared_ptr<Node> parent;
  std::string name;         // name presented in the parent (X.safetensors)
  std::string stored_name;  // name in the parent's store directory (X.wcodec)
  std::string path;         // store-relative path of the stored entry, for messages
  int dirfd = -1;           // kDir: O_PATH directory fd, owned
  struct stat st {};        // stat of the stored entry when the node was made
  std::shared_ptr<const VirtualFile> vfile;  // kVirtual
  uint64_t nlookup = 0;     // guarded by Filesystem::mu_

  ~Node() {
    if (dirfd >= 0) ::close(dirfd);
  }
  int parent_fd() const { return parent->dirfd; }
};

Result<std::unique_ptr<Filesystem>> Filesystem::create(const std::string& store_path, FsOptions options) {
  std::unique_ptr<Filesystem> fs(new Filesystem());
  char* real = ::realpath(store_path.c_str(), nullptr);
  if (!real) return from_errno(errno, "store " + store_path);
  fs->store_path_ = real;
  ::free(real);

  auto root = std::make_shared<Node>();
  root->id = kRootId;
  root->kind = Node::Kind::kDir;
  root->dirfd = ::open(fs->store_path_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root->dirfd < 0) return from_errno(errno, "open store " + fs->store_path_);
  if (::fstat(root->dirfd, &root->st) != 0) return from_errno(errno, "stat store " + fs->store_path_);
  root->nlookup = 1;

  auto control = std::make_shared<Node>();
  control->id = kControlDirId;
  control->kind = Node::Kind::kControlDir;
  control->name = kControlDir;
  control->path = std::string(kControlDir) + " (virtual)";
  auto stats_file = std::make_shared<Node>();
  stats_file->id = kStatsFileId;
  stats_file->kind = Node::Kind::kStatsFile;
  stats_file->name = kStatsFile;
  stats_file->path = std::string(kControlDir) + "/" + kStatsFile + " (virtual)";

  fs->nodes_[kRootId] = std::move(root);
  fs->nodes_[kControlDirId] = std::move(control);
  fs->nodes_[kStatsFileId] = std::move(stats_file);
  fs->next_id_ = kFirstDynamicId;

  if (options.cache_bytes == 0) options.cache_bytes = default_cache_bytes();
  fs->stats_ = std::make_shared<Stats>();
  fs->decoder_ = options.decoder        ? options.decoder
                 : options.make_decoder ? options.make_decoder(fs->stats_)
                                        : std::make_shared<CpuBatchDecoder>(options.decode_threads, fs->stats_);
  fs->cache_ = ChunkCache::create(options.cache_bytes, fs->decoder_, fs->stats_, options.huge_pages);
  fs->readahead_cap_ = std::min(options.readahead_max, options.cache_bytes / 4);
  // The codec's decoding tables (built per tensor on first decode) count
  // against the memory of the mount too: an eighth of the chunk cache.
  // Decoding tables are rebuilt cheaply (a few hundred KB per tensor, next to
  // MBs of decoding), while memory touched for the first time is not: a
  // small budget lets a cold sequential read reuse the tables' memory of the
  // tensors behind it instead of faulting in fresh pages (cold read of a
  // 88 MB f16 model: 42k -> 30k page faults).
  wcodec::set_vector_table_budget(std::max<uint64_t>(kMinTableBudget, options.cache_bytes / 64));
  fs->adapters_ = default_adapters();
  fs->options_ = std::move(options);
  ::clock_gettime(CLOCK_REALTIME, &fs->started_);

  if (!fs->options_.staging.empty()) {
    Filesystem* self = fs.get();
    auto st = Staging::create(
        fs->nodes_.at(kRootId)->dirfd, fs->store_path_, fs->options_.staging, fs->options_.encode,
        [self](const StoredFile& f, const std::string& presented) { return self->build_stored(f, presented); },
        fs->readahead_cap_);
    if (!st.ok()) {
      if (st.status().code() != Code::kReadOnly && st.status().code() != Code::kPermission) return st.status();
      log_warn("no staging directory (the store is not writable): " + st.status().ToString());
    } else {
      fs->staging_ = std::move(st).value();
    }
  }
  return fs;
}

Status Filesystem::start_background() {
  if (!staging_) return Status::OK();
  WCFS_RETURN_IF_ERROR(staging_->queue().recover());
  staging_->queue().start();
  return Status::OK();
}

EncodeQueue* Filesystem::encode_queue() { return staging_ ? &staging_->queue() : nullptr; }

Result<std::shared_ptr<const VirtualFile>> Filesystem::build_stored(const StoredFile& file,
                                                                   const std::string& presented) {
  for (const auto& a : adapters_) {
    const auto names = a->presented_names(file.path.substr(file.path.rfind('/') + 1));
    if (std::find(names.begin(), names.end(), presented) == names.end()) continue;
    auto [source_id, known_vf] = source_for(file.st, presented);
    if (known_vf) return known_vf;
    StoredFile f = file;
    f.source_id = source_id;
    WCFS_ASSIGN_OR_RETURN(std::shared_ptr<const VirtualFile> vf, a->build(f, presented));
    remember(f.st, presented, vf);
    return vf;
  }
  return Status::NotFound(file.path + " is not presented as " + presented);
}

Filesystem::~Filesystem() {
  // The encoder first (it may be reading stored files), then decoding,
  // before the cache and nodes go: completions of queued work run (as
  // failures) now, while everything they touch is alive.
  if (staging_) staging_->queue().stop();
  if (decoder_) decoder_->shutdown();
  staging_.reset();
}

Result<std::shared_ptr<Filesystem::Node>> Filesystem::get_node(NodeId id) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return Status(Code::kStale, "node " + std::to_string(id) + " is not known");
  return it->second;
}

size_t Filesystem::node_count() const {
  const size_t staged = staging_ ? staging_->node_count() : 0;
  std::lock_guard<std::mutex> lk(mu_);
  return nodes_.size() + staged;
}

Status Filesystem::modify(const char* op) const {
  return Status::ReadOnly(std::string(op) + ": the mount is read-only");
}

// ------------------------------------------------------------------- lookup

Result<Entry> Filesystem::lookup(NodeId parent_id, std::string_view name) {
  Stats::add(stats_->lookups);
  WCFS_RETURN_IF_ERROR(check_name(name));
  if (Staging::owns(parent_id)) {
    if (!staging_) return Status(Code::kStale, "node " + std::to_string(parent_id) + " is not known");
    return staging_->lookup(parent_id, name);
  }
  if (parent_id == kRootId && name == kStagingArea) return Status::NotFound(std::string(name));
  if (parent_id == kRootId && staging_ && name == staging_->name()) return staging_->root_entry();
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> parent, get_node(parent_id));
  if (parent->kind == Node::Kind::kControlDir) {
    if (name != kStatsFile) return Status::NotFound(std::string(kControlDir) + "/" + std::string(name));
    WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> n, get_node(kStatsFileId));
    return entry_of(n);
  }
  if (parent->kind != Node::Kind::kDir) return Status(Code::kNotDirectory, parent->path + " is not a directory");
  if (parent_id == kRootId && name == kControlDir) {
    WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> n, get_node(kControlDirId));
    return entry_of(n);
  }
  return lookup_store(parent, name);
}

bool Filesystem::plain_exists(int dirfd, const std::string& name) const {
  struct stat st;
  return ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

Result<Entry> Filesystem::lookup_store(const std::shared_ptr<Node>& parent, std::string_view name) {
  const std::string key_name(name);
  // A virtual node already known under this name is reused without
  // re-opening its container when the stored file is unchanged (and has not
  // been shadowed by a plain file since).
  std::shared_ptr<Node> known;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = children_.find({parent->id, key_name});
    if (it != children_.end()) known = nodes_.at(it->second);
  }
  if (known && known->kind == Node::Kind::kVirtual && !plain_exists(parent->dirfd, key_name)) {
    struct stat st;
    if (::fstatat(parent->dirfd, known->stored_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        same_content(st, known->st)) {
      return publish(parent, name, known);
    }
  }
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> fresh, make_node(parent, name));
  return publish(parent, name, std::move(fresh));
}

Result<std::shared_ptr<Filesystem::Node>> Filesystem::make_node(const std::shared_ptr<Node>& parent,
                                                                std::string_view name_view) {
  const std::string name(name_view);
  const std::string path = join(parent->path, name);
  auto node = std::make_shared<Node>();
  node->parent = parent;
  node->name = name;
  node->stored_name = name;
  node->path = path;

  struct stat st;
  if (::fstatat(parent->dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISREG(st.st_mode)) {
      for (const auto& a : adapters_) {
        if (!a->presented_names(name).empty()) return Status::NotFound(path + " is presented under another name");
      }
    }
    for (const auto& a : adapters_) {
      for (const std::string& s : a->stored_names(name)) {
        struct stat sst;
        if (::fstatat(parent->dirfd, s.c_str(), &sst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sst.st_mode)) {
          log_once(LogLevel::kWarn, "plain-wins:" + path,
                   "both " + path + " and " + join(parent->path, s) + " exist: serving the plain file");
        }
      }
    }
    if (S_ISDIR(st.st_mode)) {
      node->kind = Node::Kind::kDir;
      node->dirfd = ::openat(parent->dirfd, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (node->dirfd < 0) return from_errno(errno, "open directory " + path);
      if (::fstat(node->dirfd, &st) != 0) return from_errno(errno, "stat directory " + path);
    } else if (S_ISREG(st.st_mode)) {
      node->kind = Node::Kind::kFile;
    } else if (S_ISLNK(st.st_mode)) {
      node->kind = Node::Kind::kSymlink;
    } else {
      node->kind = Node::Kind::kOther;
    }
    node->st = st;
    return node;
  }
  if (errno != ENOENT) return from_errno(errno, "stat " + path);

  for (const auto& a : adapters_) {
    for (const std::string& stored : a->stored_names(name)) {
      Fd fd(::openat(parent->dirfd, stored.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      if (fd.get() < 0) {
        if (errno == ENOENT || errno == ELOOP || errno == ENXIO) continue;
        return from_errno(errno, "open " + join(parent->path, stored));
      }
      StoredFile f;
      if (::fstat(fd.get(), &f.st) != 0) return from_errno(errno, "stat " + join(parent->path, stored));
      if (!S_ISREG(f.st.st_mode)) continue;
      const auto names = a->presented_names(stored);
      if (std::find(names.begin(), names.end(), name) == names.end()) continue;
      f.fd = fd.get();
      f.path = join(parent->path, stored);
      f.abs_path = store_path_ + "/" + f.path;
      auto [source_id, known_vf] = source_for(f.st, name);
      std::shared_ptr<const VirtualFile> vf = std::move(known_vf);
      if (!vf) {
        f.source_id = source_id;
        auto built = a->build(f, name);
        if (!built.ok()) {
          log_warn("cannot present " + join(parent->path, name) + ": " + built.status().ToString());
          return built.status();
        }
        vf = std::move(built).value();
        remember(f.st, name, vf);
      }
      node->kind = Node::Kind::kVirtual;
      node->stored_name = stored;
      node->path = f.path;
      node->st = f.st;
      node->vfile = std::move(vf);
      return node;
    }
  }
  return Status::NotFound(path);
}

std::pair<uint64_t, std::shared_ptr<const VirtualFile>> Filesystem::source_for(const struct stat& st,
                                                                               const std::string& presented) {
  std::lock_guard<std::mutex> lk(mu_);
  auto [it, fresh] = sources_.try_emplace(SourceKey(st.st_dev, st.st_ino, st.st_size,
                                                    static_cast<int64_t>(st.st_mtim.tv_sec),
                                                    static_cast<int64_t>(st.st_mtim.tv_nsec), presented));
  if (fresh) it->second.id = ChunkSource::new_id();
  return {it->second.id, it->second.vfile.lock()};
}

void Filesystem::remember(const struct stat& st, const std::string& presented,
                          const std::shared_ptr<const VirtualFile>& vf) {
  std::shared_ptr<const VirtualFile> dropped;  // released after unlocking
  std::lock_guard<std::mutex> lk(mu_);
  auto it = sources_.find(SourceKey(st.st_dev, st.st_ino, st.st_size, static_cast<int64_t>(st.st_mtim.tv_sec),
                                    static_cast<int64_t>(st.st_mtim.tv_nsec), presented));
  if (it != sources_.end()) it->second.vfile = vf;
  recent_.push_back(vf);
  if (recent_.size() > kRecentFiles) {
    dropped = std::move(recent_.front());
    recent_.pop_front();
  }
}

Entry Filesystem::publish(const std::shared_ptr<Node>& parent, std::string_view name, std::shared_ptr<Node> fresh) {
  std::shared_ptr<Node> n;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto key = std::make_pair(parent->id, std::string(name));
    auto it = children_.find(key);
    if (it != children_.end()) {
      const std::shared_ptr<Node>& cur = nodes_.at(it->second);
      const bool same = cur == fresh || (cur->kind == fresh->kind &&
                                         (cur->kind == Node::Kind::kVirtual ? same_content(cur->st, fresh->st)
                                                                            : same_object(cur->st, fresh->st)));
      if (same) n = cur;
      // Otherwise the stored entry changed: the old node stays valid for
      // the kernel until forgotten; new lookups get the new node.
    }
    if (!n) {
      if (fresh->id != 0) {
        // A known node that was forgotten meanwhile: publish a copy under a
        // new id (other threads may still read the old node's fields).
        // Only virtual nodes are reused this way; they own no fd.
        WC_CHECK(fresh->kind == Node::Kind::kVirtual && fresh->dirfd < 0);
        auto copy = std::make_shared<Node>();
        copy->kind = fresh->kind;
        copy->parent = fresh->parent;
        copy->name = fresh->name;
        copy->stored_name = fresh->stored_name;
        copy->path = fresh->path;
        copy->st = fresh->st;
        copy->vfile = fresh->vfile;
        fresh = std::move(copy);
      }
      fresh->id = next_id_++;
      nodes_[fresh->id] = fresh;
      children_[key] = fresh->id;
      n = fresh;
    }
    ++n->nlookup;
  }
  Entry e;
  e.id = n->id;
  auto st = stat_node(*n);
  // A passthrough entry that vanished since make_node keeps the attributes
  // of that first stat; the next getattr reports it gone.
  e.attr = st.ok() ? st.value() : fresh->st;
  e.cache = n->kind == Node::Kind::kVirtual ? Cacheability::kImmutable : Cacheability::kMutable;
  return e;
}

Result<Entry> Filesystem::entry_of(const std::shared_ptr<Node>& n) const {
  WCFS_ASSIGN_OR_RETURN(struct stat st, stat_node(*n));
  Entry e;
  e.id = n->id;
  e.attr = st;
  switch (n->kind) {
    case Node::Kind::kVirtual: e.cache = Cacheability::kImmutable; break;
    case Node::Kind::kStatsFile: e.cache = Cacheability::kVolatile; break;
    default: e.cache = Cacheability::kMutable; break;
  }
  return e;
}

void Filesystem::forget(NodeId id, uint64_t n) {
  if (Staging::owns(id)) {
    if (staging_) staging_->forget(id, n);
    return;
  }
  if (id < kFirstDynamicId) return;  // root and control entries live forever
  std::shared_ptr<Node> dead;        // destroyed after unlocking
  std::lock_guard<std::mutex> lk(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return;
  Node& node = *it->second;
  node.nlookup -= std::min(n, node.nlookup);
  if (node.nlookup > 0) return;
  auto c = children_.find({node.parent->id, node.name});
  if (c != children_.end() && c->second == id) children_.erase(c);
  dead = std::move(it->second);
  nodes_.erase(it);
}

// ------------------------------------------------------------------ getattr

struct stat Filesystem::control_dir_attr() const {
  struct stat st {};
  const Node& root = *nodes_.at(kRootId);  // immutable entry, map never rehashes it away
  st.st_mode = S_IFDIR | 0555;
  st.st_nlink = 2;
  st.st_uid = root.st.st_uid;
  st.st_gid = root.st.st_gid;
  st.st_ino = kControlDirIno;
  st.st_atim = st.st_mtim = st.st_ctim = started_;
  st.st_blksize = 4096;
  return st;
}

Result<struct stat> Filesystem::stat_node(const Node& n) const {
  struct stat st {};
  switch (n.kind) {
    case Node::Kind::kDir:
      if (::fstat(n.dirfd, &st) != 0) return from_errno(errno, "stat " + (n.path.empty() ? "." : n.path));
      return st;
    case Node::Kind::kFile:
    case Node::Kind::kSymlink:
    case Node::Kind::kOther:
      if (::fstatat(n.parent_fd(), n.stored_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
        return from_errno(errno, "stat " + n.path);
      if (!same_object(st, n.st)) return Status(Code::kStale, n.path + " was replaced in the store");
      return st;
    case Node::Kind::kVirtual:
      st = n.st;
      st.st_mode = S_IFREG | (n.st.st_mode & 0444);
      st.st_nlink = 1;
      st.st_size = static_cast<off_t>(n.vfile->size());
      st.st_blocks = static_cast<blkcnt_t>((n.vfile->size() + 511) / 512);
      st.st_blksize = kVirtualBlksize;
      return st;
    case Node::Kind::kControlDir: {
      std::lock_guard<std::mutex> lk(mu_);
      return control_dir_attr();
    }
    case Node::Kind::kStatsFile: {
      {
        std::lock_guard<std::mutex> lk(mu_);
        st = control_dir_attr();
      }
      st.st_mode = S_IFREG | 0444;
      st.st_nlink = 1;
      st.st_ino = kStatsFileIno;
      st.st_size = static_cast<off_t>(stats_json().size());
      ::clock_gettime(CLOCK_REALTIME, &st.st_mtim);
      st.st_ctim = st.st_mtim;
      return st;
    }
  }
  return Status::Internal("unknown node kind");
}

Result<Entry> Filesystem::getattr(NodeId id) {
  if (Staging::owns(id)) {
    if (!staging_) return Status(Code::kStale, "node " + std::to_string(id) + " is not known");
    return staging_->getattr(id);
  }
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> n, get_node(id));
  return entry_of(n);
}

// ------------------------------------------------------------------ readdir

Result<std::vector<DirEntry>> Filesystem::readdir(NodeId id) {
  if (Staging::owns(id)) {
    if (!staging_) return Status(Code::kStale, "node " + std::to_string(id) + " is not known");
    return staging_->readdir(id);
  }
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> n, get_node(id));
  std::vector<DirEntry> out;
  if (n->kind == Node::Kind::kControlDir) {
    out.push_back({".", S_IFDIR, kControlDirIno});
    out.push_back({"..", S_IFDIR, 0});
    out.push_back({kStatsFile, S_IFREG, kStatsFileIno});
    return out;
  }
  if (n->kind != Node::Kind::kDir) return Status(Code::kNotDirectory, n->path + " is not a directory");

  int fd = ::openat(n->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return from_errno(errno, "open directory " + (n->path.empty() ? "." : n->path));
  DIR* dir = ::fdopendir(fd);
  if (!dir) {
    const int err = errno;
    ::close(fd);
    return from_errno(err, "open directory " + n->path);
  }
  struct Raw {
    std::string name;
    mode_t type;
    uint64_t ino;
  };
  std::vector<Raw> raw;
  std::unordered_set<std::string> names;
  for (;;) {
    errno = 0;
    struct dirent* d = ::readdir(dir);
    if (!d) {
      if (errno != 0) {
        const int err = errno;
        ::closedir(dir);
        return from_errno(err, "read directory " + n->path);
      }
      break;
    }
    std::string name = d->d_name;
    if (name == "." || name == "..") continue;
    mode_t type = dtype_to_mode(d->d_type);
    if (type == 0) {
      struct stat st;
      if (::fstatat(::dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // vanished
      type = st.st_mode & S_IFMT;
    }
    names.insert(name);
    raw.push_back({std::move(name), type, static_cast<uint64_t>(d->d_ino)});
  }
  ::closedir(dir);

  const bool is_root = n->id == kRootId;
  out.push_back({".", S_IFDIR, static_cast<uint64_t>(n->st.st_ino)});
  out.push_back({"..", S_IFDIR, 0});
  if (is_root) out.push_back({kControlDir, S_IFDIR, kControlDirIno});
  if (is_root && staging_) {
    auto se = staging_->getattr(Staging::kRootId);
    out.push_back({staging_->name(), S_IFDIR, se.ok() ? static_cast<uint64_t>(se->attr.st_ino) : 0});
  }
  for (Raw& r : raw) {
    if (is_root && r.name == kControlDir) {
      log_once(LogLevel::kWarn, "control-hidden",
               std::string("the store has an entry named ") + kControlDir + ": it is hidden by the mount's own");
      continue;
    }
    if (is_root && r.name == kStagingArea) continue;
    if (is_root && staging_ && r.name == staging_->name()) {
      log_once(LogLevel::kWarn, "staging-hidden",
               "the store has an entry named " + r.name + ": it is hidden by the staging directory");
      continue;
    }
    bool adapted = false;
    if (r.type == S_IFREG) {
      for (const auto& a : adapters_) {
        for (std::string& v : a->presented_names(r.name)) {
          adapted = true;
          if (names.count(v)) {
            log_once(LogLevel::kWarn, "plain-wins:" + join(n->path, v),
                     "both " + join(n->path, v) + " and " + join(n->path, r.name) + " exist: serving the plain file");
            continue;
          }
          out.push_back({std::move(v), S_IFREG, r.ino});
        }
      }
    }
    if (!adapted) out.push_back({std::move(r.name), r.type, r.ino});
  }
  return out;
}

Result<std::string> Filesystem::readlink(NodeId id) {
  if (Staging::owns(id)) {
    if (!staging_) return Status(Code::kStale, "node " + std::to_string(id) + " is not known");
    return staging_->readlink(id);
  }
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> n, get_node(id));
  if (n->kind != Node::Kind::kSymlink) return Status::Invalid(n->path + " is not a symbolic link");
  std::string buf(256, '\0');
  for (;;) {
    const ssize_t r = ::readlinkat(n->parent_fd(), n->stored_name.c_str(), buf.data(), buf.size());
    if (r < 0) return from_errno(errno, "readlink " + n->path);
    if (static_cast<size_t>(r) < buf.size()) {
      buf.resize(static_cast<size_t>(r));
      return buf;
    }
    if (buf.size() > PATH_MAX) return Status(Code::kNameTooLong, n->path + ": link text longer than PATH_MAX");
    buf.resize(buf.size() * 2);
  }
}

// --------------------------------------------------------------- open, read

Result<std::shared_ptr<FileHandle>> Filesystem::open(NodeId id, int flags) {
  if (Staging::owns(id)) {
    if (!staging_) return Status(Code::kStale, "node " + std::to_string(id) + " is not known");
    Stats::add(stats_->opens);
    return staging_->open(id, flags);
  }
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> n, get_node(id));
  if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)) return modify("open for writing");
  Stats::add(stats_->opens);
  switch (n->kind) {
    case Node::Kind::kDir:
    case Node::Kind::kControlDir: return Status(Code::kIsDirectory, n->path + " is a directory");
    case Node::Kind::kSymlink: return Status(Code::kLoop, n->path + " is a symbolic link (not followed)");
    case Node::Kind::kOther: return Status(Code::kNotSupported, n->path + " is not a regular file");
    case Node::Kind::kVirtual:
      return std::make_shared<FileHandle>(n->vfile, readahead_cap_, /*keep_cache=*/true, /*direct_io=*/false);
    case Node::Kind::kStatsFile: {
      const std::string json = stats_json();
      WCFS_ASSIGN_OR_RETURN(auto vf, make_inline_file(n->path, std::vector<uint8_t>(json.begin(), json.end())));
      return std::make_shared<FileHandle>(std::move(vf), 0, /*keep_cache=*/false, /*direct_io=*/true);
    }
    case Node::Kind::kFile: {
      Fd fd(::openat(n->parent_fd(), n->stored_name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      if (fd.get() < 0) return from_errno(errno, "open " + n->path);
      struct stat st;
      if (::fstat(fd.get(), &st) != 0) return from_errno(errno, "stat " + n->path);
      if (!S_ISREG(st.st_mode) || !same_object(st, n->st))
        return Status(Code::kStale, n->path + " was replaced in the store");
      const int fl = ::fcntl(fd.get(), F_GETFL);
      if (fl >= 0) (void)::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
      auto backing = std::make_shared<const BackingFile>(fd.release(), n->path);
      WCFS_ASSIGN_OR_RETURN(auto vf, make_passthrough_file(std::move(backing), static_cast<uint64_t>(st.st_size)));
      return std::make_shared<FileHandle>(std::move(vf), 0, /*keep_cache=*/false, /*direct_io=*/false);
    }
  }
  return Status::Internal("unknown node kind");
}

Result<ReadResult> Filesystem::read(FileHandle& fh, uint64_t off, uint64_t len) {
  Stats::add(stats_->reads);
  auto r = fh.file().read(off, len, *cache_, &fh.readahead());
  if (!r.ok()) {
    Stats::add(stats_->read_errors);
    // Decode failures were logged by the cache, once per failed decode.
    if (r.status().code() != Code::kCorruption) log_warn("read " + fh.file().name() + ": " + r.status().ToString());
    return r.status();
  }
  Stats::add(stats_->bytes_read, r->size());
  return r;
}

Result<struct statvfs> Filesystem::statfs() {
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> root, get_node(kRootId));
  struct statvfs sv;
  if (::fstatvfs(root->dirfd, &sv) != 0) return from_errno(errno, "statfs store");
  if (!staging_) sv.f_flag |= ST_RDONLY;
  return sv;
}

// ---------------------------------------------------------- modifications

#define WCFS_STAGED_OR_ROFS(id, op)                                                     \
  do {                                                                                  \
    if (!Staging::owns(id)) return modify(op);                                          \
    if (!staging_) return Status(Code::kStale, "node " + std::to_string(id) + " is not known"); \
  } while (0)

Result<std::pair<Entry, std::shared_ptr<FileHandle>>> Filesystem::create(NodeId parent, std::string_view name,
                                                                         mode_t mode, int flags, const Caller& who) {
  WCFS_STAGED_OR_ROFS(parent, "create");
  Stats::add(stats_->opens);
  return staging_->create(parent, name, mode, flags, who);
}

Result<Entry> Filesystem::mkdir(NodeId parent, std::string_view name, mode_t mode, const Caller& who) {
  WCFS_STAGED_OR_ROFS(parent, "mkdir");
  return staging_->mkdir(parent, name, mode, who);
}

Result<Entry> Filesystem::symlink(NodeId parent, std::string_view name, const std::string& target,
                                  const Caller& who) {
  WCFS_STAGED_OR_ROFS(parent, "symlink");
  return staging_->symlink(parent, name, target, who);
}

Status Filesystem::unlink(NodeId parent, std::string_view name) {
  WCFS_STAGED_OR_ROFS(parent, "unlink");
  return staging_->unlink(parent, name);
}

Status Filesystem::rmdir(NodeId parent, std::string_view name) {
  WCFS_STAGED_OR_ROFS(parent, "rmdir");
  return staging_->rmdir(parent, name);
}

Status Filesystem::rename(NodeId parent, std::string_view name, NodeId new_parent, std::string_view new_name,
                          unsigned flags) {
  if (Staging::owns(parent) != Staging::owns(new_parent))
    return Status(Code::kCrossDevice, "rename between the staging directory and the read-only store");
  WCFS_STAGED_OR_ROFS(parent, "rename");
  return staging_->rename(parent, name, new_parent, new_name, flags);
}

Result<Entry> Filesystem::setattr(NodeId id, const AttrChange& change, FileHandle* fh) {
  WCFS_STAGED_OR_ROFS(id, "setattr");
  return staging_->setattr(id, change, fh);
}

#undef WCFS_STAGED_OR_ROFS

Result<size_t> Filesystem::write(FileHandle& fh, uint64_t off, const uint8_t* data, size_t len) {
  const BackingFile* f = fh.writable();
  if (!f) return fh.keep_cache() ? modify("write") : Status::Invalid(fh.file().name() + ": not open for writing");
  if (off > static_cast<uint64_t>(std::numeric_limits<off_t>::max()) - len)
    return Status(Code::kTooLarge, f->name() + ": write beyond the largest file offset");
  size_t done = 0;
  while (done < len) {
    const ssize_t w = ::pwrite(f->fd(), data + done, len - done, static_cast<off_t>(off + done));
    if (w < 0) {
      if (errno == EINTR) continue;
      if (done > 0) break;  // a short write; the kernel retries the rest
      return from_errno(errno, "write " + f->name());
    }
    if (w == 0) break;
    done += static_cast<size_t>(w);
  }
  Stats::add(stats_->bytes_written, done);
  return done;
}

Status Filesystem::fsync(FileHandle& fh, bool datasync) {
  const BackingFile* f = fh.writable();
  if (!f) return Status::OK();  // nothing of ours to flush
  if ((datasync ? ::fdatasync(f->fd()) : ::fsync(f->fd())) != 0) return from_errno(errno, "fsync " + f->name());
  return Status::OK();
}

Result<Entry> Filesystem::lookup_path(std::string_view path) {
  NodeId cur = kRootId;
  Result<Entry> last = getattr(kRootId);
  size_t i = 0;
  while (i < path.size()) {
    const size_t j = std::min(path.find('/', i), path.size());
    const std::string_view comp = path.substr(i, j - i);
    i = j + 1;
    if (comp.empty()) continue;
    last = lookup(cur, comp);
    if (!last.ok()) return last;
    cur = last->id;
  }
  return last;
}

std::string Filesystem::stats_json() const {
  const Stats& s = *stats_;
  nlohmann::json j;
  j["version"] = WCODECFS_VERSION;
  j["store"] = store_path_;
  j["cache"] = {{"bytes", cache_->bytes()},
                {"budget", cache_->budget()},
                {"entries", cache_->entries()},
                {"mapped_bytes", cache_->mapped_bytes()},
                {"hits", Stats::get(s.cache_hits)},
                {"misses", Stats::get(s.cache_misses)},
                {"evictions", Stats::get(s.cache_evictions)}};
  j["decode"] = {{"backend", decoder_->describe()},
                 {"chunks", Stats::get(s.chunks_decoded)},
                 {"bytes", Stats::get(s.bytes_decoded)},
                 {"seconds", static_cast<double>(Stats::get(s.decode_ns)) * 1e-9},
                 {"errors", Stats::get(s.decode_errors)},
                 {"table_bytes", wcodec::vector_table_bytes()}};
  j["readahead"] = {{"chunks", Stats::get(s.readahead_chunks)},
                    {"hits", Stats::get(s.readahead_hits)},
                    {"max_window", readahead_cap_}};
  j["reads"] = {{"count", Stats::get(s.reads)},
                {"bytes", Stats::get(s.bytes_read)},
                {"errors", Stats::get(s.read_errors)}};
  j["writes"] = {{"bytes", Stats::get(s.bytes_written)}};
  if (staging_) {
    const EncodeQueueStats q = staging_->queue().stats();
    nlohmann::json items = nlohmann::json::array();
    for (const auto& it : q.recent)
      items.push_back({{"path", it.path}, {"state", it.state}, {"size", it.size}, {"encoded", it.encoded},
                       {"error", it.error}});
    j["staging"] = {{"area", staging_->queue().area()},
                    {"directory", staging_->name()},
                    {"pending", q.pending},
                    {"encoding", q.encoding},
                    {"done", q.done},
                    {"failed", q.failed},
                    {"cancelled", q.cancelled},
                    {"bytes_in", q.bytes_in},
                    {"bytes_out", q.bytes_out},
                    {"bytes_saved", q.bytes_in >= q.bytes_out ? q.bytes_in - q.bytes_out : 0},
                    {"seconds", q.seconds},
                    {"items", std::move(items)}};
  }
  j["lookups"] = Stats::get(s.lookups);
  j["opens"] = Stats::get(s.opens);
  j["errors"] = Stats::get(s.decode_errors) + Stats::get(s.read_errors);
  return j.dump(2) + "\n";
}

}  // namespace wcodecfs
