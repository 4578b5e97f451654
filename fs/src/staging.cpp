// fs/src/staging.cpp — see staging.h.
#include "staging.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <unordered_set>

#include "fs_util.h"
#include "wcodecfs/fs_log.h"

namespace wcodecfs {

namespace {

// Passthrough length of a plain staged file: reads see its size at read
// time (short at end of file), not at open.
constexpr uint64_t kUnbounded = static_cast<uint64_t>(std::numeric_limits<off_t>::max()) / 2;

bool exists_at(int dirfd, const std::string& name, struct stat* st = nullptr) {
  struct stat tmp;
  return ::fstatat(dirfd, name.c_str(), st ? st : &tmp, AT_SYMLINK_NOFOLLOW) == 0;
}

Status fsync_dir(int dirfd, const std::string& rel) {
  Fd d(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.get() < 0) return from_errno(errno, "staging: open directory of " + rel);
  if (::fsync(d.get()) != 0) return from_errno(errno, "staging: fsync directory of " + rel);
  return Status::OK();
}

}  // namespace

std::string Staging::encoded_name_of(std::string_view presented) const {
  for (const StagingCodec* c : codecs_) {
    std::string e = c->encoded_name(presented);
    if (!e.empty()) return e;
  }
  return {};
}

std::string Staging::presented_name_of(std::string_view stored) const {
  for (const StagingCodec* c : codecs_) {
    std::string p = c->plain_name(stored);
    if (!p.empty()) return p;
  }
  return {};
}

bool Staging::reserved(std::string_view name) const {
  return is_queue_internal_name(std::string(name)) || !presented_name_of(name).empty();
}

// New names must not be reserved ones.
Status Staging::check_new_name(std::string_view name, const std::string& rel) const {
  WCFS_RETURN_IF_ERROR(check_name(name));
  if (reserved(name))
    return Status(Code::kPermission, "staging: " + rel +
                                         ": encoded file names (such as X.wcodec) and names beginning with "
                                         ".wcodecfs- are reserved");
  return Status::OK();
}

struct Staging::Node {
  enum class Kind { kDir, kFile, kSymlink, kOther };
  NodeId id = 0;
  Kind kind = Kind::kOther;
  int dirfd = -1;     // kDir: O_PATH directory fd, owned (follows renames)
  struct stat st {};  // identity when made (dev/ino for kDir/kSymlink/kOther)
  // Guarded by Staging::mu_:
  std::shared_ptr<Node> parent;  // null for the root
  std::string name;              // presented name in the parent
  uint64_t nlookup = 0;
  unsigned writers = 0;          // open write handles registered with the queue
  bool detached = false;         // unlinked or replaced: writers were released from the queue
  std::shared_ptr<const VirtualFile> view;  // encoded file's view, for view_st
  struct stat view_st {};

  ~Node() {
    if (dirfd >= 0) ::close(dirfd);
  }
};

// What a presented file name stands for now.
struct Staging::Backing {
  bool encoded = false;
  std::string stored;  // name in the directory (X.safetensors or X.wcodec)
  struct stat st {};
};

Result<std::unique_ptr<Staging>> Staging::create(int store_fd, const std::string& store_path,
                                                  const std::string& presented_name, EncodeQueueOptions encode,
                                                  std::vector<const StagingCodec*> codecs, BuildEncoded build,
                                                  uint64_t readahead_cap) {
  WCFS_RETURN_IF_ERROR(check_name(presented_name));
  std::unique_ptr<Staging> s(new Staging());
  s->codecs_ = std::move(codecs);
  s->name_ = presented_name;
  s->store_fd_ = store_fd;
  s->readahead_cap_ = readahead_cap;
  s->build_ = std::move(build);
  s->area_path_ = store_path + "/" + kStagingAreaName;

  struct stat st;
  if (::fstatat(store_fd, kStagingAreaName, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno != ENOENT) return from_errno(errno, "stat " + s->area_path_);
    if (::mkdirat(store_fd, kStagingAreaName, 0700) != 0 && errno != EEXIST)
      return from_errno(errno, "create the staging area " + s->area_path_);
    // mkdir applies the umask; the mode is set explicitly.
    if (::fchmodat(store_fd, kStagingAreaName, 01777, 0) != 0)
      return from_errno(errno, "chmod the staging area " + s->area_path_);
    log_info("created the staging area " + s->area_path_);
  } else if (!S_ISDIR(st.st_mode)) {
    return Status(Code::kNotDirectory, s->area_path_ + " exists and is not a directory");
  }

  auto root = std::make_shared<Node>();
  root->id = kRootId;
  root->kind = Node::Kind::kDir;
  root->name = presented_name;
  root->dirfd = ::openat(store_fd, kStagingAreaName, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root->dirfd < 0) return from_errno(errno, "open the staging area " + s->area_path_);
  if (::fstat(root->dirfd, &root->st) != 0) return from_errno(errno, "stat the staging area " + s->area_path_);
  s->nodes_[kRootId] = root;

  WCFS_ASSIGN_OR_RETURN(s->queue_, EncodeQueue::create(s->area_path_, std::move(encode)));
  return s;
}

Staging::~Staging() {
  if (queue_) queue_->stop();
}

size_t Staging::node_count() const {
  std::lock_guard<std::mutex> lk(mu_);
  return nodes_.size();
}

Result<std::shared_ptr<Staging::Node>> Staging::get(NodeId id) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return Status(Code::kStale, "staging node " + std::to_string(id) + " is not known");
  return it->second;
}

Result<std::shared_ptr<Staging::Node>> Staging::get_dir(NodeId id) const {
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> n, get(id));
  if (n->kind != Node::Kind::kDir) return Status(Code::kNotDirectory, name_ + "/" + rel_path(*n) + " is not a directory");
  return n;
}

std::pair<std::shared_ptr<Staging::Node>, std::string> Staging::where(const Node& n) const {
  std::lock_guard<std::mutex> lk(mu_);
  return {n.parent, n.name};
}

std::string Staging::rel_path_locked(const Node& n) const {
  std::vector<const std::string*> parts;
  for (const Node* p = &n; p && p->parent; p = p->parent.get()) parts.push_back(&p->name);
  std::string out;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (!out.empty()) out += '/';
    out += **it;
  }
  return out;
}

std::string Staging::rel_path(const Node& n) const {
  std::lock_guard<std::mutex> lk(mu_);
  return rel_path_locked(n);
}

std::string Staging::child_rel(const Node& dir, std::string_view name) const { return join(rel_path(dir), name); }

Result<Staging::Backing> Staging::resolve(int dirfd, const std::string& name, const std::string& rel) const {
  Backing b;
  if (::fstatat(dirfd, name.c_str(), &b.st, AT_SYMLINK_NOFOLLOW) == 0) {
    b.stored = name;
    return b;
  }
  if (errno != ENOENT) return from_errno(errno, "staging: stat " + rel);
  const std::string enc = encoded_name_of(name);
  if (!enc.empty() && ::fstatat(dirfd, enc.c_str(), &b.st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(b.st.st_mode)) {
    b.encoded = true;
    b.stored = enc;
    return b;
  }
  return Status::NotFound(name_ + "/" + rel);
}

Result<std::shared_ptr<const VirtualFile>> Staging::view_of(Node& n, int dirfd, const Backing& b,
                                                           const std::string& rel) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    const struct stat& v = n.view_st;
    if (n.view && v.st_dev == b.st.st_dev && v.st_ino == b.st.st_ino && v.st_size == b.st.st_size &&
        v.st_mtim.tv_sec == b.st.st_mtim.tv_sec && v.st_mtim.tv_nsec == b.st.st_mtim.tv_nsec)
      return n.view;
  }
  const size_t slash = rel.rfind('/');
  const std::string dir_rel = slash == std::string::npos ? std::string() : rel.substr(0, slash);
  const std::string presented = slash == std::string::npos ? rel : rel.substr(slash + 1);
  WCFS_ASSIGN_OR_RETURN(EncodedView built, build_(dirfd, join(kStagingAreaName, dir_rel), b.stored, presented));
  std::lock_guard<std::mutex> lk(mu_);
  n.view = built.vfile;
  n.view_st = built.st;
  return std::move(built.vfile);
}

Result<struct stat> Staging::stat_of(Node& n) {
  auto [parent, name] = where(n);
  struct stat st {};
  if (!parent) {  // the root
    if (::fstat(n.dirfd, &st) != 0) return from_errno(errno, "staging: stat " + area_path_);
    return st;
  }
  const std::string rel = rel_path(n);
  switch (n.kind) {
    case Node::Kind::kDir:
      if (::fstat(n.dirfd, &st) != 0) return from_errno(errno, "staging: stat " + rel);
      return st;
    case Node::Kind::kSymlink:
    case Node::Kind::kOther:
      if (::fstatat(parent->dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
        return from_errno(errno, "staging: stat " + rel);
      return st;
    case Node::Kind::kFile: {
      WCFS_ASSIGN_OR_RETURN(Backing b, resolve(parent->dirfd, name, rel));
      if (!S_ISREG(b.st.st_mode)) return Status(Code::kStale, name_ + "/" + rel + " is no longer a regular file");
      if (!b.encoded) return b.st;
      WCFS_ASSIGN_OR_RETURN(auto vf, view_of(n, parent->dirfd, b, rel));
      st = b.st;
      st.st_size = static_cast<off_t>(vf->size());
      st.st_blocks = static_cast<blkcnt_t>((vf->size() + 511) / 512);
      return st;
    }
  }
  return Status::Internal("unknown staging node kind");
}

Result<Entry> Staging::entry_of(Node& n) {
  WCFS_ASSIGN_OR_RETURN(struct stat st, stat_of(n));
  Entry e;
  e.id = n.id;
  e.attr = st;
  e.cache = Cacheability::kMutable;
  return e;
}

Result<Entry> Staging::root_entry() {
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> root, get(kRootId));
  WCFS_ASSIGN_OR_RETURN(Entry e, entry_of(*root));
  std::lock_guard<std::mutex> lk(mu_);
  ++root->nlookup;
  return e;
}

// --------------------------------------------------------------- lookups

Result<Entry> Staging::lookup(NodeId parent_id, std::string_view name_view) {
  WCFS_RETURN_IF_ERROR(check_name(name_view));
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> parent, get_dir(parent_id));
  return lookup_locked_out(parent, std::string(name_view), true);
}

Result<Entry> Staging::lookup_locked_out(const std::shared_ptr<Node>& parent, const std::string& name, bool count) {
  const std::string rel = child_rel(*parent, name);
  if (reserved(name)) return Status::NotFound(name_ + "/" + rel);
  WCFS_ASSIGN_OR_RETURN(Backing b, resolve(parent->dirfd, name, rel));
  Node::Kind kind = Node::Kind::kOther;
  if (S_ISDIR(b.st.st_mode)) kind = Node::Kind::kDir;
  else if (S_ISREG(b.st.st_mode)) kind = Node::Kind::kFile;
  else if (S_ISLNK(b.st.st_mode)) kind = Node::Kind::kSymlink;

  std::shared_ptr<Node> n;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = children_.find({parent->id, name});
    if (it != children_.end()) {
      const std::shared_ptr<Node>& cur = nodes_.at(it->second);
      // A file node stands for its name (plain or encoded); other kinds for
      // the stored object.
      if (cur->kind == kind && (kind == Node::Kind::kFile || (cur->st.st_dev == b.st.st_dev &&
                                                              cur->st.st_ino == b.st.st_ino)))
        n = cur;
    }
  }
  if (!n) {
    auto fresh = std::make_shared<Node>();
    fresh->kind = kind;
    fresh->st = b.st;
    if (kind == Node::Kind::kDir) {
      fresh->dirfd = ::openat(parent->dirfd, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fresh->dirfd < 0) return from_errno(errno, "staging: open directory " + rel);
      if (::fstat(fresh->dirfd, &fresh->st) != 0) return from_errno(errno, "staging: stat " + rel);
    }
    std::lock_guard<std::mutex> lk(mu_);
    auto key = std::make_pair(parent->id, name);
    auto it = children_.find(key);
    if (it != children_.end()) {
      const std::shared_ptr<Node>& cur = nodes_.at(it->second);
      if (cur->kind == kind && (kind == Node::Kind::kFile || (cur->st.st_dev == fresh->st.st_dev &&
                                                              cur->st.st_ino == fresh->st.st_ino)))
        n = cur;  // another thread published it meanwhile
    }
    if (!n) {
      fresh->id = next_id_++;
      fresh->parent = parent;
      fresh->name = name;
      nodes_[fresh->id] = fresh;
      children_[key] = fresh->id;
      n = fresh;
    }
  }
  auto e = entry_of(*n);
  if (!e.ok()) return e.status();
  if (count) {
    std::lock_guard<std::mutex> lk(mu_);
    ++n->nlookup;
  }
  return e;
}

void Staging::forget(NodeId id, uint64_t count) {
  if (id == kRootId) {
    std::lock_guard<std::mutex> lk(mu_);
    auto& root = nodes_.at(kRootId);
    root->nlookup -= std::min(count, root->nlookup);
    return;  // the root lives as long as the mount
  }
  std::shared_ptr<Node> dead;  // destroyed after unlocking
  std::lock_guard<std::mutex> lk(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return;
  Node& node = *it->second;
  node.nlookup -= std::min(count, node.nlookup);
  if (node.nlookup > 0) return;
  if (node.parent) {
    auto c = children_.find({node.parent->id, node.name});
    if (c != children_.end() && c->second == id) children_.erase(c);
  }
  dead = std::move(it->second);
  nodes_.erase(it);
}

void Staging::unmap(NodeId parent, const std::string& name) {
  std::vector<std::pair<std::string, unsigned>> release;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto c = children_.find({parent, name});
    if (c == children_.end()) return;
    auto n = nodes_.find(c->second);
    if (n != nodes_.end() && n->second->writers > 0 && !n->second->detached) {
      n->second->detached = true;
      release.emplace_back(rel_path_locked(*n->second), n->second->writers);
    }
    children_.erase(c);
  }
  for (auto& [rel, k] : release)
    for (unsigned i = 0; i < k; ++i) queue_->closed_for_write(rel);
}

Result<Entry> Staging::getattr(NodeId id) {
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> n, get(id));
  return entry_of(*n);
}

Result<std::vector<DirEntry>> Staging::readdir(NodeId id) {
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> n, get_dir(id));
  const std::string rel = rel_path(*n);
  WCFS_ASSIGN_OR_RETURN(const StoreDir listing,
                        StoreDir::list(n->dirfd, join(kStagingAreaName, rel),
                                       [](const std::string& name) { return is_queue_internal_name(name); }));
  std::vector<DirEntry> out;
  out.push_back({".", S_IFDIR, static_cast<uint64_t>(n->st.st_ino)});
  out.push_back({"..", S_IFDIR, 0});
  std::vector<DirEntry> encoded;
  std::unordered_set<std::string> plain;
  for (const StoreEntry& e : listing.entries()) {
    if (const std::string p = presented_name_of(e.name); !p.empty()) {
      if (e.type == S_IFREG) encoded.push_back({p, S_IFREG, e.ino});
      continue;
    }
    plain.insert(e.name);
    out.push_back({e.name, e.type, e.ino});
  }
  for (DirEntry& e : encoded)
    if (!plain.count(e.name)) out.push_back(std::move(e));  // the plain file wins (mid-swap)
  return out;
}

Result<std::string> Staging::readlink(NodeId id) {
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> n, get(id));
  if (n->kind != Node::Kind::kSymlink) return Status::Invalid(name_ + "/" + rel_path(*n) + " is not a symbolic link");
  auto [parent, name] = where(*n);
  std::string buf(PATH_MAX + 1, '\0');
  const ssize_t r = ::readlinkat(parent->dirfd, name.c_str(), buf.data(), buf.size());
  if (r < 0) return from_errno(errno, "staging: readlink " + rel_path(*n));
  if (static_cast<size_t>(r) >= buf.size()) return Status(Code::kNameTooLong, "staging: link text longer than PATH_MAX");
  buf.resize(static_cast<size_t>(r));
  return buf;
}

// ------------------------------------------------------------ open, create

std::shared_ptr<void> Staging::writer_token(const std::shared_ptr<Node>& n, const std::string& rel) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++n->writers;
  }
  queue_->opened_for_write(rel);
  struct Token {
    Token(Staging* st, std::shared_ptr<Node> node) : s(st), n(std::move(node)) {}
    Token(const Token&) = delete;
    Token& operator=(const Token&) = delete;
    Staging* s;
    std::shared_ptr<Node> n;
    ~Token() {
      std::string rel;
      bool tell = false;
      {
        std::lock_guard<std::mutex> lk(s->mu_);
        --n->writers;
        tell = !n->detached;
        rel = s->rel_path_locked(*n);
      }
      if (tell) s->queue_->closed_for_write(rel);
    }
  };
  return std::make_shared<Token>(this, n);
}

Status Staging::make_plain(int dirfd, const std::string& name, const std::string& rel, bool empty,
                           const EncodeQueue::Hold& held) {
  if (!empty) return queue_->materialize(rel, held);
  // An empty plain file replaces the encoded one: create it with the
  // encoded file's mode and owner, then remove the encoded file. A crash in
  // between leaves both, and recovery keeps the plain file (its content
  // differs from the container's).
  const std::string enc = encoded_name_of(name);
  struct stat est;
  if (::fstatat(dirfd, enc.c_str(), &est, AT_SYMLINK_NOFOLLOW) != 0) return from_errno(errno, "staging: stat " + rel);
  Fd fd(::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, est.st_mode & 07777));
  if (fd.get() < 0) return from_errno(errno, "staging: create " + rel);
  (void)::fchmod(fd.get(), est.st_mode & 07777);
  if (::geteuid() == 0) (void)::fchown(fd.get(), est.st_uid, est.st_gid);
  if (::fsync(fd.get()) != 0) return from_errno(errno, "staging: fsync " + rel);
  WCFS_RETURN_IF_ERROR(fsync_dir(dirfd, rel));
  if (::unlinkat(dirfd, enc.c_str(), 0) != 0 && errno != ENOENT) return from_errno(errno, "staging: unlink encoded " + rel);
  return fsync_dir(dirfd, rel);
}

Result<std::shared_ptr<FileHandle>> Staging::open(NodeId id, int flags) {
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> n, get(id));
  const std::string rel = rel_path(*n);
  switch (n->kind) {
    case Node::Kind::kDir: return Status(Code::kIsDirectory, name_ + "/" + rel + " is a directory");
    case Node::Kind::kSymlink: return Status(Code::kLoop, name_ + "/" + rel + " is a symbolic link (not followed)");
    case Node::Kind::kOther: return Status(Code::kNotSupported, name_ + "/" + rel + " is not a regular file");
    case Node::Kind::kFile: break;
  }
  auto [parent, name] = where(*n);
  if (!parent) return Status::Internal("staging: file node without a parent");
  const bool writing = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);

  if (!writing) {
    WCFS_ASSIGN_OR_RETURN(Backing b, resolve(parent->dirfd, name, rel));
    if (b.encoded) {
      WCFS_ASSIGN_OR_RETURN(auto vf, view_of(*n, parent->dirfd, b, rel));
      return std::make_shared<FileHandle>(std::move(vf), readahead_cap_, /*keep_cache=*/false, /*direct_io=*/false);
    }
    Fd fd(::openat(parent->dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (fd.get() < 0) return from_errno(errno, "staging: open " + rel);
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return from_errno(errno, "staging: stat " + rel);
    if (!S_ISREG(st.st_mode)) return Status(Code::kStale, name_ + "/" + rel + " is no longer a regular file");
    const int fl = ::fcntl(fd.get(), F_GETFL);
    if (fl >= 0) (void)::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
    auto backing = std::make_shared<const BackingFile>(fd.release(), std::string(kStagingAreaName) + "/" + rel);
    WCFS_ASSIGN_OR_RETURN(auto vf, make_passthrough_file(std::move(backing), kUnbounded));
    return std::make_shared<FileHandle>(std::move(vf), 0, /*keep_cache=*/false, /*direct_io=*/false);
  }

  // Writing: no encode of this file may swap from now on until it is closed.
  EncodeQueue::Hold held = queue_->hold(rel);
  WCFS_ASSIGN_OR_RETURN(Backing b, resolve(parent->dirfd, name, rel));
  if (!S_ISREG(b.st.st_mode)) return Status(Code::kStale, name_ + "/" + rel + " is no longer a regular file");
  if (b.encoded) WCFS_RETURN_IF_ERROR(make_plain(parent->dirfd, name, rel, (flags & O_TRUNC) != 0, held));
  // O_APPEND is left to the kernel (it sends writes at the end of file);
  // the descriptor is opened for reading too (the kernel may read a handle
  // opened write-only, e.g. for partial pages of a writable mapping).
  const int oflags = O_NOFOLLOW | O_CLOEXEC | (flags & O_TRUNC);
  int raw = ::openat(parent->dirfd, name.c_str(), O_RDWR | oflags);
  if (raw < 0 && errno == EACCES) raw = ::openat(parent->dirfd, name.c_str(), O_WRONLY | oflags);
  if (raw < 0) return from_errno(errno, "staging: open for writing " + rel);
  Fd fd(raw);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return from_errno(errno, "staging: stat " + rel);
  if (!S_ISREG(st.st_mode)) return Status(Code::kStale, name_ + "/" + rel + " is no longer a regular file");
  auto token = writer_token(n, rel);
  if (flags & O_TRUNC) queue_->changed(rel);
  auto backing = std::make_shared<const BackingFile>(fd.release(), std::string(kStagingAreaName) + "/" + rel);
  WCFS_ASSIGN_OR_RETURN(auto vf, make_passthrough_file(backing, kUnbounded));
  return std::make_shared<FileHandle>(std::move(vf), std::move(backing), std::move(token));
}

Status Staging::own(int dirfd, const std::string& name, const Caller& who, bool is_dir) const {
  (void)is_dir;
  if (::geteuid() != 0) return Status::OK();  // entries belong to the daemon's user
  struct stat parent_st;
  const bool setgid_dir = ::fstat(dirfd, &parent_st) == 0 && (parent_st.st_mode & S_ISGID);
  const gid_t gid = setgid_dir ? static_cast<gid_t>(-1) : who.gid;
  if (::fchownat(dirfd, name.c_str(), who.uid, gid, AT_SYMLINK_NOFOLLOW) != 0)
    return from_errno(errno, "staging: chown " + name);
  return Status::OK();
}

Result<std::pair<Entry, std::shared_ptr<FileHandle>>> Staging::create(NodeId parent_id, std::string_view name_view,
                                                                      mode_t mode, int flags, const Caller& who) {
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> parent, get_dir(parent_id));
  const std::string name(name_view);
  const std::string rel = child_rel(*parent, name);
  WCFS_RETURN_IF_ERROR(check_new_name(name, rel));
  // The new file counts as open for writing from before it exists until the
  // handle below has registered its own writer: the encoder never sees it
  // empty and unwritten.
  queue_->opened_for_write(rel);
  struct Unregister {
    EncodeQueue* q;
    const std::string& rel;
    ~Unregister() { q->closed_for_write(rel); }
  } unregister{queue_.get(), rel};
  {
    EncodeQueue::Hold held = queue_->hold(rel);
    const std::string enc = encoded_name_of(name);
    const bool encoded_exists = !enc.empty() && exists_at(parent->dirfd, enc);
    if (encoded_exists && !exists_at(parent->dirfd, name)) {
      if (flags & O_EXCL) return Status(Code::kExists, name_ + "/" + rel + " exists");
      // Opening an existing (encoded) file: the open path below does it.
    } else {
      Fd fd(::openat(parent->dirfd, name.c_str(),
                     O_CREAT | O_RDWR | O_NOFOLLOW | O_CLOEXEC | (flags & (O_EXCL | O_TRUNC)), mode & 07777));
      if (fd.get() < 0) return from_errno(errno, "staging: create " + rel);
      WCFS_RETURN_IF_ERROR(own(parent->dirfd, name, who, false));
    }
  }
  WCFS_ASSIGN_OR_RETURN(Entry e, lookup_locked_out(parent, name, true));
  auto fh = open(e.id, (flags & ~(O_CREAT | O_EXCL | O_ACCMODE)) | O_RDWR);
  if (!fh.ok()) {
    forget(e.id, 1);
    return fh.status();
  }
  // Attributes after the open (an O_TRUNC open changes size and mtime).
  auto e2 = getattr(e.id);
  if (e2.ok()) e = e2.value();
  return std::make_pair(e, std::move(fh).value());
}

Result<Entry> Staging::mkdir(NodeId parent_id, std::string_view name_view, mode_t mode, const Caller& who) {
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> parent, get_dir(parent_id));
  const std::string name(name_view);
  const std::string rel = child_rel(*parent, name);
  WCFS_RETURN_IF_ERROR(check_new_name(name, rel));
  if (::mkdirat(parent->dirfd, name.c_str(), mode & 07777) != 0) return from_errno(errno, "staging: mkdir " + rel);
  WCFS_RETURN_IF_ERROR(own(parent->dirfd, name, who, true));
  return lookup_locked_out(parent, name, true);
}

Result<Entry> Staging::symlink(NodeId parent_id, std::string_view name_view, const std::string& target,
                               const Caller& who) {
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> parent, get_dir(parent_id));
  const std::string name(name_view);
  const std::string rel = child_rel(*parent, name);
  WCFS_RETURN_IF_ERROR(check_new_name(name, rel));
  if (::symlinkat(target.c_str(), parent->dirfd, name.c_str()) != 0) return from_errno(errno, "staging: symlink " + rel);
  WCFS_RETURN_IF_ERROR(own(parent->dirfd, name, who, false));
  return lookup_locked_out(parent, name, true);
}

// ------------------------------------------------------------------ removal

Status Staging::unlink(NodeId parent_id, std::string_view name_view) {
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> parent, get_dir(parent_id));
  const std::string name(name_view);
  const std::string rel = child_rel(*parent, name);
  WCFS_RETURN_IF_ERROR(check_name(name));
  if (reserved(name)) return Status::NotFound(name_ + "/" + rel);
  {
    EncodeQueue::Hold held = queue_->hold(rel);
    bool removed = false;
    struct stat st;
    if (exists_at(parent->dirfd, name, &st)) {
      if (S_ISDIR(st.st_mode)) return Status(Code::kIsDirectory, name_ + "/" + rel + " is a directory");
      if (::unlinkat(parent->dirfd, name.c_str(), 0) != 0) return from_errno(errno, "staging: unlink " + rel);
      removed = true;
    }
    const std::string enc = encoded_name_of(name);
    if (!enc.empty() && exists_at(parent->dirfd, enc)) {
      if (::unlinkat(parent->dirfd, enc.c_str(), 0) != 0 && errno != ENOENT)
        return from_errno(errno, "staging: unlink encoded " + rel);
      removed = true;
    }
    if (!removed) return Status::NotFound(name_ + "/" + rel);
    unmap(parent->id, name);
  }
  queue_->changed(rel);
  return Status::OK();
}

Status Staging::rmdir(NodeId parent_id, std::string_view name_view) {
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> parent, get_dir(parent_id));
  const std::string name(name_view);
  const std::string rel = child_rel(*parent, name);
  WCFS_RETURN_IF_ERROR(check_name(name));
  if (reserved(name)) return Status::NotFound(name_ + "/" + rel);
  {
    EncodeQueue::Hold held = queue_->hold(rel);
    if (::unlinkat(parent->dirfd, name.c_str(), AT_REMOVEDIR) != 0) {
      if (errno != ENOTEMPTY && errno != EEXIST) return from_errno(errno, "staging: rmdir " + rel);
      // Only the queue's own entries left (a cancelled encode's temp or
      // lock)? The directory is empty as presented: remove them.
      Fd d(::openat(parent->dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (d.get() < 0) return from_errno(errno, "staging: rmdir " + rel);
      DIR* dir = ::fdopendir(d.get());
      if (!dir) return from_errno(errno, "staging: rmdir " + rel);
      d.release();
      std::vector<std::string> internal;
      bool other = false;
      while (struct dirent* e = ::readdir(dir)) {
        const std::string n = e->d_name;
        if (n == "." || n == "..") continue;
        if (is_queue_internal_name(n)) internal.push_back(n);
        else other = true;
      }
      if (!other)
        for (const std::string& n : internal) (void)::unlinkat(::dirfd(dir), n.c_str(), 0);
      ::closedir(dir);
      if (other) return Status(Code::kNotEmpty, name_ + "/" + rel + ": directory not empty");
      if (::unlinkat(parent->dirfd, name.c_str(), AT_REMOVEDIR) != 0) return from_errno(errno, "staging: rmdir " + rel);
    }
    unmap(parent->id, name);
  }
  queue_->changed(rel);
  return Status::OK();
}

// ------------------------------------------------------------------- rename

void Staging::move_writers(const std::string& from, const std::string& to) {
  // Open writers below `from` (or of `from` itself) now write `to`...: the
  // queue counts writers by path.
  std::vector<std::pair<std::string, unsigned>> moved;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [id, n] : nodes_) {
      if (n->kind != Node::Kind::kFile || n->writers == 0 || n->detached) continue;
      const std::string now = rel_path_locked(*n);  // after the rename
      if (now == to || now.rfind(to + "/", 0) == 0) moved.emplace_back(now, n->writers);
    }
  }
  for (auto& [now, k] : moved) {
    const std::string before = from + now.substr(to.size());
    for (unsigned i = 0; i < k; ++i) {
      queue_->opened_for_write(now);
      queue_->closed_for_write(before);
    }
  }
}

Status Staging::rename(NodeId parent_id, std::string_view name_view, NodeId new_parent_id,
                       std::string_view new_name_view, unsigned flags) {
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> parent, get_dir(parent_id));
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> new_parent, get_dir(new_parent_id));
  const std::string name(name_view), new_name(new_name_view);
  const std::string from = child_rel(*parent, name), to = child_rel(*new_parent, new_name);
  WCFS_RETURN_IF_ERROR(check_name(name));
  if (reserved(name)) return Status::NotFound(name_ + "/" + from);
  WCFS_RETURN_IF_ERROR(check_new_name(new_name, to));
#ifndef RENAME_NOREPLACE
  constexpr unsigned RENAME_NOREPLACE = 1, RENAME_EXCHANGE = 2;
#endif
  if (flags & ~static_cast<unsigned>(RENAME_NOREPLACE | RENAME_EXCHANGE))
    return Status(Code::kInvalidArgument, "staging: rename flags " + std::to_string(flags));
  if (from == to) return Status::OK();
  {
    EncodeQueue::Hold held_from = queue_->hold(from);
    EncodeQueue::Hold held_to = queue_->hold(to);
    WCFS_ASSIGN_OR_RETURN(Backing src, resolve(parent->dirfd, name, from));
    const std::string dst_enc = encoded_name_of(new_name);
    const bool dst_plain = exists_at(new_parent->dirfd, new_name);
    const bool dst_encoded = !dst_enc.empty() && exists_at(new_parent->dirfd, dst_enc);
    if ((flags & RENAME_NOREPLACE) && (dst_plain || dst_encoded))
      return Status(Code::kExists, name_ + "/" + to + " exists");
    if (flags & RENAME_EXCHANGE) {
      // Between two plain entries only (an encoded file's presented name
      // cannot be swapped atomically with another name).
      if (src.encoded || dst_encoded || !dst_plain)
        return Status(Code::kNotSupported, "staging: exchange of " + from + " and " + to +
                                               " (only plain entries can be exchanged)");
      if (::renameat2(parent->dirfd, name.c_str(), new_parent->dirfd, new_name.c_str(), RENAME_EXCHANGE) != 0)
        return from_errno(errno, "staging: exchange " + from + " and " + to);
    } else {
      if (src.encoded && dst_enc.empty()) {
        // X.safetensors -> Y (not .safetensors): the encoded form cannot be
        // presented as Y; make it plain first.
        WCFS_RETURN_IF_ERROR(make_plain(parent->dirfd, name, from, false, held_from));
        src.encoded = false;
        src.stored = name;
      }
      if (src.encoded) {
        // X.wcodec -> Y.wcodec. A plain Y goes first: a crash between the
        // two steps leaves no Y and X intact, never a stale plain Y that
        // recovery would prefer.
        if (dst_plain) {
          struct stat dst_st;
          if (exists_at(new_parent->dirfd, new_name, &dst_st) && S_ISDIR(dst_st.st_mode))
            return Status(Code::kIsDirectory, name_ + "/" + to + " is a directory");
          if (::unlinkat(new_parent->dirfd, new_name.c_str(), 0) != 0 && errno != ENOENT)
            return from_errno(errno, "staging: rename over " + to);
        }
        if (::renameat(parent->dirfd, src.stored.c_str(), new_parent->dirfd, dst_enc.c_str()) != 0)
          return from_errno(errno, "staging: rename " + from + " to " + to);
      } else {
        if (::renameat(parent->dirfd, name.c_str(), new_parent->dirfd, new_name.c_str()) != 0)
          return from_errno(errno, "staging: rename " + from + " to " + to);
        // A plain file replaced an encoded Y: remove it. A crash before this
        // leaves both; recovery keeps the plain file (different content).
        if (dst_encoded && S_ISREG(src.st.st_mode) &&
            ::unlinkat(new_parent->dirfd, dst_enc.c_str(), 0) != 0 && errno != ENOENT)
          return from_errno(errno, "staging: remove the replaced " + to);
      }
    }
    // The node table follows: the moved node now lives at (new_parent,
    // new_name); a node replaced there is detached.
    if (flags & RENAME_EXCHANGE) {
      std::lock_guard<std::mutex> lk(mu_);
      auto a = children_.find({parent->id, name});
      auto b = children_.find({new_parent->id, new_name});
      const NodeId ia = a != children_.end() ? a->second : 0, ib = b != children_.end() ? b->second : 0;
      if (a != children_.end()) children_.erase(a);
      b = children_.find({new_parent->id, new_name});
      if (b != children_.end()) children_.erase(b);
      if (ia) {
        nodes_.at(ia)->parent = new_parent;
        nodes_.at(ia)->name = new_name;
        children_[{new_parent->id, new_name}] = ia;
      }
      if (ib) {
        nodes_.at(ib)->parent = parent;
        nodes_.at(ib)->name = name;
        children_[{parent->id, name}] = ib;
      }
    } else {
      unmap(new_parent->id, new_name);
      std::lock_guard<std::mutex> lk(mu_);
      auto a = children_.find({parent->id, name});
      if (a != children_.end()) {
        const NodeId ia = a->second;
        children_.erase(a);
        nodes_.at(ia)->parent = new_parent;
        nodes_.at(ia)->name = new_name;
        children_[{new_parent->id, new_name}] = ia;
      }
    }
    move_writers(from, to);
    if (flags & RENAME_EXCHANGE) move_writers(to, from);
  }
  queue_->changed(from);
  queue_->changed(to);
  return Status::OK();
}

// ------------------------------------------------------------------ setattr

Result<Entry> Staging::setattr(NodeId id, const AttrChange& c, FileHandle* fh) {
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<Node> n, get(id));
  auto [parent, name] = where(*n);
  const int dirfd = parent ? parent->dirfd : store_fd_;
  const std::string rel = rel_path(*n);
  const std::string shown = name_ + (rel.empty() ? "" : "/" + rel);
  {
    EncodeQueue::Hold held;
    std::string stored = parent ? name : std::string(kStagingAreaName);
    if (n->kind == Node::Kind::kFile) {
      held = queue_->hold(rel);
      WCFS_ASSIGN_OR_RETURN(Backing b, resolve(dirfd, name, rel));
      if (c.set_size && b.encoded) {
        WCFS_RETURN_IF_ERROR(make_plain(dirfd, name, rel, c.size == 0, held));
        b.encoded = false;
      }
      stored = b.encoded ? b.stored : name;
      if (c.set_size) {
        if (fh && fh->writable()) {
          if (::ftruncate(fh->writable()->fd(), static_cast<off_t>(c.size)) != 0)
            return from_errno(errno, "staging: truncate " + rel);
        } else {
          Fd fd(::openat(dirfd, name.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC));
          if (fd.get() < 0) return from_errno(errno, "staging: open for truncate " + rel);
          if (::ftruncate(fd.get(), static_cast<off_t>(c.size)) != 0) return from_errno(errno, "staging: truncate " + rel);
        }
      }
    } else if (c.set_size) {
      return Status(n->kind == Node::Kind::kDir ? Code::kIsDirectory : Code::kInvalidArgument,
                    shown + ": size of a non-regular file");
    }
    if (c.set_mode && n->kind != Node::Kind::kSymlink &&
        ::fchmodat(dirfd, stored.c_str(), c.mode & 07777, 0) != 0)
      return from_errno(errno, "staging: chmod " + shown);
    if ((c.set_uid || c.set_gid) &&
        ::fchownat(dirfd, stored.c_str(), c.set_uid ? c.uid : static_cast<uid_t>(-1),
                   c.set_gid ? c.gid : static_cast<gid_t>(-1), AT_SYMLINK_NOFOLLOW) != 0)
      return from_errno(errno, "staging: chown " + shown);
    if (c.set_atime || c.set_mtime) {
      struct timespec ts[2];
      ts[0] = c.set_atime ? c.atime : timespec{0, UTIME_OMIT};
      ts[1] = c.set_mtime ? c.mtime : timespec{0, UTIME_OMIT};
      if (::utimensat(dirfd, stored.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0)
        return from_errno(errno, "staging: set times of " + shown);
    }
  }
  if (n->kind == Node::Kind::kFile) queue_->changed(rel);
  return entry_of(*n);
}

}  // namespace wcodecfs
