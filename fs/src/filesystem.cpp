// fs/src/filesystem.cpp — see wcodecfs/filesystem.h.
#include "wcodecfs/filesystem.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "staging.h"
#include "fs_util.h"
#include "wcodecfs/fs_log.h"
#include "wcodec/cpu.h"

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

bool same_object(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && (a.st_mode & S_IFMT) == (b.st_mode & S_IFMT);
}

bool same_content(const struct stat& a, const struct stat& b) {
  return same_object(a, b) && a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
         a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

bool same_inputs(const std::vector<struct stat>& a, const std::vector<struct stat>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (!same_content(a[k], b[k])) return false;
  return true;
}

// How long a directory's presentations are reused while the directory itself
// looks unchanged (its own change time does not see names changing in the
// subdirectories a kind may look into).
constexpr auto kDirViewTtl = std::chrono::seconds(1);

}  // namespace

// What the mount shows in one store directory: its entries less those the
// kinds hide, plus what the kinds present. Made by dir_view, immutable.
struct Filesystem::DirView {
  struct stat dir_st {};  // the directory when listed: reused while its times are the same
  std::chrono::steady_clock::time_point made;
  StoreDir dir;
  struct Shown {
    Presentation p;
    const StoreKind* kind;
  };
  std::vector<Shown> shown;                // presented names the mount shows, sorted by name
  std::unordered_set<std::string> hidden;  // entries of `dir` hidden by a presentation
  const Shown* find_shown(std::string_view name) const {
    auto it = std::lower_bound(shown.begin(), shown.end(), name,
                               [](const Shown& a, std::string_view n) { return a.p.name < n; });
    return it != shown.end() && it->p.name == name ? &*it : nullptr;
  }
};

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
  std::string stored_name;  // name in the parent's store directory (X.wcodec; for kVirtual the first input)
  std::string path;         // store-relative path of the stored entry, for messages
  int dirfd = -1;           // kDir: O_PATH directory fd, owned
  struct stat st {};        // stat of the stored entry when the node was made (kVirtual: see virtual_attr)
  // kVirtual: the presented file, its stored inputs (relative to the parent
  // directory) and their stat when it was built.
  std::shared_ptr<const VirtualFile> vfile;
  std::vector<std::string> inputs;
  std::vector<struct stat> input_st;
  uint64_t nlookup = 0;     // guarded by Filesystem::mu_
  // kDir: what the store kinds present here (dir_view), guarded by
  // Filesystem::mu_.
  std::shared_ptr<const DirView> view;

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
  fs->cache_ =
      ChunkCache::create(options.cache_bytes, fs->decoder_, fs->stats_, options.huge_pages, options.drop_behind);
  fs->readahead_cap_ = std::min(options.readahead_max, options.cache_bytes / 4);
  // The codec's decoding tables (built per tensor on first decode) count
  // against the memory of the mount too: an eighth of the chunk cache.
  // Decoding tables are rebuilt cheaply (a few hundred KB per tensor, next to
  // MBs of decoding), while memory touched for the first time is not: a
  // small budget lets a cold sequential read reuse the tables' memory of the
  // tensors behind it instead of faulting in fresh pages (cold read of a
  // 88 MB f16 model: 42k -> 30k page faults).
  wcodec::set_vector_table_budget(std::max<uint64_t>(kMinTableBudget, options.cache_bytes / 64));
  fs->kinds_ = options.kinds.empty() ? default_kinds() : options.kinds;
  if (options.encode.kinds.empty()) options.encode.kinds = fs->kinds_;
  fs->options_ = std::move(options);
  ::clock_gettime(CLOCK_REALTIME, &fs->started_);

  if (!fs->options_.staging.empty()) {
    Filesystem* self = fs.get();
    auto st = Staging::create(
        fs->nodes_.at(kRootId)->dirfd, fs->store_path_, fs->options_.staging, fs->options_.encode,
        staging_codecs(fs->kinds_),
        [self](int dirfd, const std::string& dir_path, const std::string& stored,
               const std::string& presented) -> Result<Staging::EncodedView> {
          WCFS_ASSIGN_OR_RETURN(Built b, self->build_stored(dirfd, dir_path, stored, presented));
          return Staging::EncodedView{std::move(b.vfile), b.input_st.front()};
        },
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

Result<Filesystem::Built> Filesystem::build_stored(int dirfd, const std::string& dir_path,
                                                   const std::string& stored, const std::string& presented) {
  for (const auto& k : kinds_) {
    const StagingCodec* codec = k->staging();
    if (!codec || codec->plain_name(stored) != presented) continue;
    const StoreDir dir(dirfd, dir_path, {});
    return build_presented(dir, *k, Presentation{presented, {stored}, /*hides_inputs=*/true});
  }
  return Status::NotFound(join(dir_path, stored) + " is not presented as " + presented);
}

Result<Filesystem::Built> Filesystem::build_presented(const StoreDir& dir, const StoreKind& kind,
                                                      const Presentation& p) {
  if (p.inputs.empty()) return Status::Internal(dir.path_of(p.name) + ": kind " + std::string(kind.name()) +
                                                " presents it without inputs");
  std::vector<StoredInput> inputs;
  inputs.reserve(p.inputs.size());
  for (const std::string& rel : p.inputs) {
    WCFS_ASSIGN_OR_RETURN(StoredInput in, dir.open(rel));
    inputs.push_back(std::move(in));
  }
  Built out;
  for (const StoredInput& in : inputs) out.input_st.push_back(in.st);
  SourceKey key = source_key(kind, p.name, out.input_st);
  if (auto known = known_file(key)) {
    out.vfile = std::move(known);
    return out;
  }
  BuildContext ctx(std::move(inputs), dir.path_of(p.name), [this, key](size_t k) { return source_id(key, k); });
  auto built = kind.build(dir, p, ctx);
  if (!built.ok()) {
    log_warn("cannot present " + dir.path_of(p.name) + ": " + built.status().ToString());
    return built.status();
  }
  out.vfile = std::move(built).value();
  remember(key, out.vfile);
  return out;
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

Result<std::shared_ptr<const Filesystem::DirView>> Filesystem::dir_view(const std::shared_ptr<Node>& dir_node,
                                                                        bool fresh) {
  struct stat dst;
  if (::fstat(dir_node->dirfd, &dst) != 0) return from_errno(errno, "stat directory " + dir_node->path);
  const auto now = std::chrono::steady_clock::now();
  if (!fresh) {
    std::lock_guard<std::mutex> lk(mu_);
    const auto& v = dir_node->view;
    if (v && now - v->made < kDirViewTtl && same_content(v->dir_st, dst) &&
        v->dir_st.st_ctim.tv_sec == dst.st_ctim.tv_sec && v->dir_st.st_ctim.tv_nsec == dst.st_ctim.tv_nsec)
      return v;
  }
  const bool is_root = dir_node->id == kRootId;
  WCFS_ASSIGN_OR_RETURN(StoreDir listing, StoreDir::list(dir_node->dirfd, dir_node->path, [&](const std::string& n) {
                          return is_root && (n == kStagingArea || n == kControlDir ||
                                             (staging_ && n == staging_->name()));
                        }));
  auto view = std::make_shared<DirView>(DirView{dst, now, std::move(listing), {}, {}});
  std::vector<DirView::Shown> all;
  for (const auto& k : kinds_) {
    std::vector<Presentation> ps;
    k->present(view->dir, &ps);
    for (Presentation& p : ps) all.push_back({std::move(p), k.get()});
  }
  // Which kinds hide each name (the first component of a replacement's input).
  std::unordered_map<std::string, std::unordered_set<const StoreKind*>> hidden_by;
  for (const DirView::Shown& s : all) {
    if (!s.p.hides_inputs) continue;
    for (const std::string& in : s.p.inputs) {
      view->hidden.insert(in.substr(0, in.find('/')));
      hidden_by[in.substr(0, in.find('/'))].insert(s.kind);
    }
  }
  // A presentation all of whose inputs another kind's replacement consumes
  // is not shown (X.wcodec inside a Trellis v2 store is part of the store's
  // v3 view, not a file of its own).
  auto consumed = [&](const DirView::Shown& s) {
    for (const std::string& in : s.p.inputs) {
      auto it = hidden_by.find(in.substr(0, in.find('/')));
      if (it == hidden_by.end() || (it->second.size() == 1 && it->second.count(s.kind))) return false;
    }
    return !s.p.inputs.empty();
  };
  std::unordered_set<std::string> taken;
  for (DirView::Shown& s : all) {
    const std::string shown_path = join(dir_node->path, s.p.name);
    if (consumed(s)) continue;
    if (s.p.name.empty() || s.p.name == "." || s.p.name == ".." || s.p.name.find('/') != std::string::npos) {
      log_once(LogLevel::kWarn, "bad-presented:" + shown_path,
               "kind " + std::string(s.kind->name()) + " presents an invalid name \"" + s.p.name + "\" in " +
                   (dir_node->path.empty() ? "." : dir_node->path) + ": ignored");
      continue;
    }
    if (view->dir.find(s.p.name) && !view->hidden.count(s.p.name)) {
      log_once(LogLevel::kWarn, "plain-wins:" + shown_path,
               "both " + shown_path + " and " + join(dir_node->path, s.p.inputs.front()) +
                   " exist: serving the plain file");
      continue;
    }
    if (!taken.insert(s.p.name).second) {
      log_once(LogLevel::kWarn, "kinds-clash:" + shown_path,
               "two store kinds present " + shown_path + ": serving the first (" + std::string(s.kind->name()) +
                   " is ignored)");
      continue;
    }
    view->shown.push_back(std::move(s));
  }
  std::sort(view->shown.begin(), view->shown.end(),
            [](const DirView::Shown& a, const DirView::Shown& b) { return a.p.name < b.p.name; });
  std::lock_guard<std::mutex> lk(mu_);
  dir_node->view = view;
  return std::shared_ptr<const DirView>(std::move(view));
}

Result<Entry> Filesystem::lookup_store(const std::shared_ptr<Node>& parent, std::string_view name) {
  const std::string key_name(name);
  // A virtual node already known under this name is reused without
  // re-opening its inputs when they are unchanged (and it has not been
  // shadowed by a plain file since).
  std::shared_ptr<Node> known;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = children_.find({parent->id, key_name});
    if (it != children_.end()) known = nodes_.at(it->second);
  }
  if (known && known->kind == Node::Kind::kVirtual && !plain_exists(parent->dirfd, key_name)) {
    const StoreDir dir(parent->dirfd, parent->path, {});
    bool same = true;
    for (size_t k = 0; k < known->inputs.size() && same; ++k) {
      auto st = dir.stat(known->inputs[k]);
      same = st.ok() && same_content(*st, known->input_st[k]);
    }
    if (same) return publish(parent, name, known);
  }
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> fresh, make_node(parent, name));
  return publish(parent, name, std::move(fresh));
}

Result<std::shared_ptr<Filesystem::Node>> Filesystem::make_node(const std::shared_ptr<Node>& parent,
                                                                std::string_view name_view) {
  const std::string name(name_view);
  const std::string path = join(parent->path, name);
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<const DirView> view, dir_view(parent, false));
  const bool listed = view->dir.find(name) != nullptr;
  struct stat st;
  const bool on_disk = ::fstatat(parent->dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  if (!on_disk && errno != ENOENT) return from_errno(errno, "stat " + path);
  if (on_disk != listed) {
    // The directory changed within the same timestamp tick: list it again.
    WCFS_ASSIGN_OR_RETURN(view, dir_view(parent, true));
  }

  auto node = std::make_shared<Node>();
  node->parent = parent;
  node->name = name;
  node->stored_name = name;
  node->path = path;
  if (on_disk && !view->hidden.count(name)) {
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
  const DirView::Shown* shown = view->find_shown(name);
  if (!shown) {
    if (on_disk) return Status::NotFound(path + " is presented under another name");
    return Status::NotFound(path);
  }
  auto built = build_presented(view->dir, *shown->kind, shown->p);
  if (!built.ok()) {
    // An input that vanished since the listing: the name is gone.
    if (built.status().code() == Code::kNotFound) return Status::NotFound(path);
    return built.status();
  }
  node->kind = Node::Kind::kVirtual;
  node->inputs = shown->p.inputs;
  node->input_st = std::move(built->input_st);
  node->stored_name = node->inputs.front();
  node->path = shown->p.hides_inputs ? join(parent->path, node->inputs.front()) : path;
  node->st = virtual_attr(node->input_st);
  node->vfile = std::move(built->vfile);
  return node;
}

struct stat Filesystem::virtual_attr(const std::vector<struct stat>& inputs) {
  // The first input lends mode, owner and identity; the file changes when
  // any input does (the latest times).
  struct stat st = inputs.front();
  for (const struct stat& in : inputs) {
    auto later = [](const struct timespec& a, const struct timespec& b) {
      return a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec > b.tv_nsec;
    };
    if (later(in.st_mtim, st.st_mtim)) st.st_mtim = in.st_mtim;
    if (later(in.st_ctim, st.st_ctim)) st.st_ctim = in.st_ctim;
  }
  return st;
}

Filesystem::SourceKey Filesystem::source_key(const StoreKind& kind, const std::string& presented,
                                             const std::vector<struct stat>& inputs) {
  SourceKey key;
  key.kind = std::string(kind.name());
  key.presented = presented;
  for (const struct stat& st : inputs)
    key.inputs.push_back({static_cast<int64_t>(st.st_dev), static_cast<int64_t>(st.st_ino),
                          static_cast<int64_t>(st.st_size), static_cast<int64_t>(st.st_mtim.tv_sec),
                          static_cast<int64_t>(st.st_mtim.tv_nsec)});
  return key;
}

std::shared_ptr<const VirtualFile> Filesystem::known_file(const SourceKey& key) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = sources_.find(key);
  return it == sources_.end() ? nullptr : it->second.vfile.lock();
}

uint64_t Filesystem::source_id(const SourceKey& key, size_t k) {
  std::lock_guard<std::mutex> lk(mu_);
  SourceEntry& e = sources_[key];
  while (e.ids.size() <= k) e.ids.push_back(ChunkSource::new_id());
  return e.ids[k];
}

void Filesystem::remember(const SourceKey& key, const std::shared_ptr<const VirtualFile>& vf) {
  std::shared_ptr<const VirtualFile> dropped;  // released after unlocking
  std::lock_guard<std::mutex> lk(mu_);
  sources_[key].vfile = vf;
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
                                         (cur->kind == Node::Kind::kVirtual ? same_inputs(cur->input_st, fresh->input_st)
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
        copy->inputs = fresh->inputs;
        copy->input_st = fresh->input_st;
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
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<const DirView> view, dir_view(n, true));

  const bool is_root = n->id == kRootId;
  out.push_back({".", S_IFDIR, static_cast<uint64_t>(n->st.st_ino)});
  out.push_back({"..", S_IFDIR, 0});
  if (is_root) out.push_back({kControlDir, S_IFDIR, kControlDirIno});
  if (is_root && staging_) {
    auto se = staging_->getattr(Staging::kRootId);
    out.push_back({staging_->name(), S_IFDIR, se.ok() ? static_cast<uint64_t>(se->attr.st_ino) : 0});
  }
  if (is_root) {
    struct stat st;
    if (::fstatat(n->dirfd, kControlDir, &st, AT_SYMLINK_NOFOLLOW) == 0)
      log_once(LogLevel::kWarn, "control-hidden",
               std::string("the store has an entry named ") + kControlDir + ": it is hidden by the mount's own");
    if (staging_ && ::fstatat(n->dirfd, staging_->name().c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
      log_once(LogLevel::kWarn, "staging-hidden",
               "the store has an entry named " + staging_->name() + ": it is hidden by the staging directory");
  }
  for (const StoreEntry& e : view->dir.entries()) {
    if (!view->hidden.count(e.name)) out.push_back({e.name, e.type, e.ino});
  }
  for (const DirView::Shown& s : view->shown) {
    // A replacement shows the inode number of its first input; a view, whose
    // inputs stay visible, a number of its own (not a hard link of them).
    const StoreEntry* first = view->dir.find(s.p.inputs.front());
    const uint64_t own = std::hash<std::string>{}(join(n->path, s.p.name)) | (1ull << 63);
    out.push_back({s.p.name, S_IFREG, s.p.hides_inputs && first ? first->ino : own});
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
  // The kernel keeps what it reads of a keep_cache handle in its page cache.
  auto r = fh.file().read(off, len, *cache_, &fh.readahead(), fh.keep_cache() && !fh.direct_io());
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
                {"populated_bytes", cache_->populated_bytes()},
                {"hits", Stats::get(s.cache_hits)},
                {"misses", Stats::get(s.cache_misses)},
                {"evictions", Stats::get(s.cache_evictions)},
                {"dropped_behind", Stats::get(s.cache_drop_behind)}};
  j["decode"] = {{"backend", decoder_->describe()},
                 {"chunks", Stats::get(s.chunks_decoded)},
                 {"bytes", Stats::get(s.bytes_decoded)},
                 {"seconds", static_cast<double>(Stats::get(s.decode_ns)) * 1e-9},
                 {"errors", Stats::get(s.decode_errors)},
                 {"table_bytes", wcodec::vector_table_bytes()},
                 {"cpu_path", wcodec::cpu_path_name()}};
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
  nlohmann::json kinds = nlohmann::json::array();
  for (const auto& k : kinds_) kinds.push_back(std::string(k->name()));
  j["kinds"] = std::move(kinds);
  j["lookups"] = Stats::get(s.lookups);
  j["opens"] = Stats::get(s.opens);
  j["errors"] = Stats::get(s.decode_errors) + Stats::get(s.read_errors);
  return j.dump(2) + "\n";
}

}  // namespace wcodecfs
