// mount/fuse_binding.cpp — see fuse_binding.h.
#include "fuse_binding.h"

#include <fcntl.h>
#include <sys/uio.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <sstream>
#include <vector>

#include "wcodecfs/fs_log.h"

namespace wcodecfs::mount {
namespace {

// Kernel cache lifetimes (seconds) per Cacheability. Virtual files are
// immutable: the kernel may keep their entries and attributes for an hour.
// Passthrough entries may change in the store behind the mount.
constexpr double kImmutableTimeout = 3600.0;
constexpr double kMutableTimeout = 1.0;

// Largest read the kernel sends (max_pages = 256) and the size we ask for.
constexpr unsigned kMaxWrite = 1u << 20;
// Concurrent background requests (async readahead) the kernel may queue.
constexpr unsigned kMaxBackground = 64;
// Beyond this many slices a read reply is gathered into one buffer.
constexpr size_t kMaxIov = 256;

MountContext& ctx_of(fuse_req_t req) { return *static_cast<MountContext*>(fuse_req_userdata(req)); }
Filesystem& fs_of(fuse_req_t req) { return *ctx_of(req).fs; }

double attr_timeout(Cacheability c) {
  switch (c) {
    case Cacheability::kImmutable: return kImmutableTimeout;
    case Cacheability::kMutable: return kMutableTimeout;
    case Cacheability::kVolatile: return 0.0;
  }
  return 0.0;
}
double entry_timeout(Cacheability c) { return c == Cacheability::kImmutable ? kImmutableTimeout : kMutableTimeout; }

void reply_status(fuse_req_t req, const Status& st) { fuse_reply_err(req, errno_of(st)); }

// The first request after INIT: the kernel has applied our INIT reply, so
// the bdi readahead can be raised now without being reset by it.
void tune_once(fuse_req_t req) {
  MountContext& ctx = ctx_of(req);
  std::call_once(ctx.tune_once, [&ctx] {
    if (ctx.mountpoint.empty() || ctx.max_readahead_kb == 0) return;
    log_debug(raise_bdi_readahead(ctx.mountpoint, ctx.max_readahead_kb));
  });
}

// Every operation body runs inside this: an exception (allocation failure)
// becomes an errno instead of terminating the daemon.
template <typename F>
void guarded(fuse_req_t req, F&& body) {
  try {
    body();
  } catch (const std::bad_alloc&) {
    fuse_reply_err(req, ENOMEM);
  } catch (const std::exception& e) {
    log_error(std::string("internal error: ") + e.what());
    fuse_reply_err(req, EIO);
  }
}

struct DirSnapshot {
  std::vector<DirEntry> entries;
};

// fi->fh of an open file: a heap shared_ptr so in-flight reads keep the
// handle alive independently of release().
using HandleBox = std::shared_ptr<FileHandle>;

// fi->fh values are registered in MountContext while the kernel holds them.
template <typename T>
uint64_t keep_handle(MountContext& ctx, std::unordered_set<uint64_t>& set, std::unique_ptr<T> p) {
  const uint64_t fh = reinterpret_cast<uint64_t>(p.get());
  {
    std::lock_guard<std::mutex> lk(ctx.handles_mu);
    set.insert(fh);
  }
  p.release();  // owned by the set now
  return fh;
}
template <typename T>
void drop_handle(MountContext& ctx, std::unordered_set<uint64_t>& set, uint64_t fh) {
  {
    std::lock_guard<std::mutex> lk(ctx.handles_mu);
    set.erase(fh);
  }
  delete reinterpret_cast<T*>(fh);
}

void fill_entry(const Entry& e, fuse_entry_param* out) {
  std::memset(out, 0, sizeof(*out));
  out->ino = e.id;
  out->generation = 1;  // ids are never reused
  out->attr = e.attr;
  out->attr_timeout = attr_timeout(e.cache);
  out->entry_timeout = entry_timeout(e.cache);
}

// ---------------------------------------------------------------- ops

void op_init(void* userdata, struct fuse_conn_info* conn) {
  (void)userdata;
  auto want = [conn](unsigned cap) {
    if (conn->capable & cap) conn->want |= cap;
  };
  want(FUSE_CAP_ASYNC_READ);
  want(FUSE_CAP_PARALLEL_DIROPS);
  // Read replies with file ranges (fuse_reply_data) are spliced from the
  // backing file into /dev/fuse: its page-cache pages go through a pipe,
  // copied once, by the kernel, into the request's pages.
  want(FUSE_CAP_SPLICE_WRITE);
  // Not SPLICE_MOVE: moving a spliced page would take it out of the backing
  // file's page cache (the store's, which other readers use), and replies
  // never ask for it (no FUSE_BUF_SPLICE_MOVE). Not SPLICE_READ either: it
  // pays off only with a write_buf operation, and costs every request a
  // splice and a read.
  conn->want &= ~static_cast<unsigned>(FUSE_CAP_SPLICE_MOVE | FUSE_CAP_SPLICE_READ);
  conn->want &= ~static_cast<unsigned>(FUSE_CAP_WRITEBACK_CACHE);
  // max_write also sets max_pages (libfuse: max_write / page size), which
  // bounds read requests: 1 MiB reads when the kernel allows.
  conn->max_write = kMaxWrite;
  conn->max_readahead = 16u << 20;
  conn->max_background = kMaxBackground;
  conn->congestion_threshold = kMaxBackground * 3 / 4;
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  guarded(req, [&] {
    tune_once(req);
    auto r = fs_of(req).lookup(parent, name);
    if (!r.ok()) return reply_status(req, r.status());
    fuse_entry_param e;
    fill_entry(*r, &e);
    // If the reply does not reach the kernel (interrupted), it holds no
    // reference for this lookup.
    if (fuse_reply_entry(req, &e) != 0) fs_of(req).forget(r->id, 1);
  });
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  ctx_of(req).fs->forget(ino, nlookup);
  fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data* forgets) {
  for (size_t i = 0; i < count; ++i) ctx_of(req).fs->forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  (void)fi;
  guarded(req, [&] {
    tune_once(req);
    auto r = fs_of(req).getattr(ino);
    if (!r.ok()) return reply_status(req, r.status());
    fuse_reply_attr(req, &r->attr, attr_timeout(r->cache));
  });
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
  guarded(req, [&] {
    auto r = fs_of(req).readlink(ino);
    if (!r.ok()) return reply_status(req, r.status());
    fuse_reply_readlink(req, r->c_str());
  });
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  guarded(req, [&] {
    tune_once(req);
    auto r = fs_of(req).readdir(ino);
    if (!r.ok()) return reply_status(req, r.status());
    MountContext& ctx = ctx_of(req);
    fi->fh = keep_handle(ctx, ctx.open_dirs, std::make_unique<DirSnapshot>(DirSnapshot{std::move(r).value()}));
    if (fuse_reply_open(req, fi) != 0) drop_handle<DirSnapshot>(ctx, ctx.open_dirs, fi->fh);
  });
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi) {
  (void)ino;
  guarded(req, [&] {
    const auto* snap = reinterpret_cast<const DirSnapshot*>(fi->fh);
    std::vector<char> buf(size);
    size_t used = 0;
    for (size_t i = off < 0 ? 0 : static_cast<size_t>(off); i < snap->entries.size(); ++i) {
      const DirEntry& d = snap->entries[i];
      struct stat st {};
      st.st_ino = d.ino;
      st.st_mode = d.type;
      const size_t need = fuse_add_direntry(req, buf.data() + used, size - used, d.name.c_str(), &st,
                                            static_cast<off_t>(i + 1));
      if (need > size - used) break;
      used += need;
    }
    fuse_reply_buf(req, buf.data(), used);
  });
}

void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  (void)ino;
  MountContext& ctx = ctx_of(req);
  drop_handle<DirSnapshot>(ctx, ctx.open_dirs, fi->fh);
  fuse_reply_err(req, 0);
}

void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  guarded(req, [&] {
    auto r = fs_of(req).open(ino, fi->flags);
    if (!r.ok()) return reply_status(req, r.status());
    MountContext& ctx = ctx_of(req);
    const HandleBox& h = r.value();
    fi->keep_cache = h->keep_cache();
    fi->direct_io = h->direct_io();
    fi->noflush = 1;
    fi->fh = keep_handle(ctx, ctx.open_files, std::make_unique<HandleBox>(std::move(r).value()));
    if (fuse_reply_open(req, fi) != 0) drop_handle<HandleBox>(ctx, ctx.open_files, fi->fh);
  });
}

// A read reply of memory slices only: one writev of the iovec. The pins in
// `r` are released after fuse_reply_iov has written the reply.
void reply_memory(fuse_req_t req, const ReadResult& r) {
  const auto& slices = r.slices();
  std::vector<struct iovec> iov(slices.size());
  for (size_t i = 0; i < slices.size(); ++i) {
    iov[i].iov_base = const_cast<uint8_t*>(slices[i].data);
    iov[i].iov_len = slices[i].size;
  }
  fuse_reply_iov(req, iov.data(), static_cast<int>(iov.size()));
}

// A read reply with file ranges: a fuse_bufvec of memory buffers and
// FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK buffers (the slice's fd, offset and
// size; `r` keeps the fd open). libfuse splices it into /dev/fuse when it
// can (SPLICE_WRITE, a reply of two pages or more, a pipe large enough:
// above 1 MiB, the default /proc/sys/fs/pipe-max-size, only with
// CAP_SYS_RESOURCE) and otherwise preads it into one buffer. Either way a
// file that is shorter than its slice by now (it shrank after
// VirtualFile::read checked it) ends the reply at the file's end: a short
// reply of the file's own bytes, never padding. A backing file's I/O error
// is an errno reply when it hits the reply's first bytes; after them,
// libfuse sends what it copied (a short reply).
void reply_with_files(fuse_req_t req, const ReadResult& r) {
  const auto& slices = r.slices();
  const size_t bytes = sizeof(struct fuse_bufvec) + (slices.size() - 1) * sizeof(struct fuse_buf);
  std::unique_ptr<void, void (*)(void*)> storage(::operator new(bytes), [](void* p) { ::operator delete(p); });
  std::memset(storage.get(), 0, bytes);
  auto* bv = static_cast<struct fuse_bufvec*>(storage.get());
  bv->count = slices.size();
  for (size_t i = 0; i < slices.size(); ++i) {
    struct fuse_buf& b = bv->buf[i];
    const ReadSlice& s = slices[i];
    b.size = s.size;
    if (s.is_fd()) {
      // RETRY: a splice or pread that comes back short is continued until
      // the file's end.
      b.flags = static_cast<enum fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY);
      b.fd = s.file->fd();
      b.pos = static_cast<off_t>(s.offset);
    } else {
      b.mem = const_cast<uint8_t*>(s.data);
      b.fd = -1;
    }
  }
  // No FUSE_BUF_SPLICE_MOVE (see op_init).
  fuse_reply_data(req, bv, static_cast<enum fuse_buf_copy_flags>(0));
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi) {
  (void)ino;
  guarded(req, [&] {
    if (off < 0) return (void)fuse_reply_err(req, EINVAL);
    HandleBox h = *reinterpret_cast<HandleBox*>(fi->fh);
    auto r = fs_of(req).read(*h, static_cast<uint64_t>(off), size);
    if (!r.ok()) return reply_status(req, r.status());
    const auto& slices = r->slices();
    if (slices.empty()) return (void)fuse_reply_buf(req, nullptr, 0);
    if (slices.size() > kMaxIov) {
      // Many small pieces: one buffer (file ranges pread into it; a file
      // that shrank meanwhile gives a short reply, as above).
      std::vector<uint8_t> all(r->size());
      auto n = r->copy_to(all.data());
      if (!n.ok()) return reply_status(req, n.status());
      fuse_reply_buf(req, reinterpret_cast<const char*>(all.data()), *n);
      return;
    }
    if (r->fd_bytes() == 0) return reply_memory(req, *r);
    reply_with_files(req, *r);
  });
}

void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  (void)ino;
  MountContext& ctx = ctx_of(req);
  drop_handle<HandleBox>(ctx, ctx.open_files, fi->fh);
  fuse_reply_err(req, 0);
}

void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  (void)ino;
  (void)fi;
  fuse_reply_err(req, 0);
}

void op_statfs(fuse_req_t req, fuse_ino_t ino) {
  (void)ino;
  guarded(req, [&] {
    auto r = fs_of(req).statfs();
    if (!r.ok()) return reply_status(req, r.status());
    fuse_reply_statfs(req, &r.value());
  });
}

// Modifying operations: the staging tree takes them; everywhere else the
// filesystem answers kReadOnly (EROFS).
void reply_rofs(fuse_req_t req, const char* op) { reply_status(req, fs_of(req).modify(op)); }

Caller caller_of(fuse_req_t req) {
  const struct fuse_ctx* c = fuse_req_ctx(req);
  Caller who;
  who.uid = c->uid;
  who.gid = c->gid;
  return who;
}

// Replies with a new entry (create/mkdir/symlink); drops the lookup the
// filesystem counted when the reply does not reach the kernel.
void reply_new_entry(fuse_req_t req, const Result<Entry>& r) {
  if (!r.ok()) return reply_status(req, r.status());
  fuse_entry_param e;
  fill_entry(*r, &e);
  if (fuse_reply_entry(req, &e) != 0) fs_of(req).forget(r->id, 1);
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, struct fuse_file_info* fi) {
  guarded(req, [&] {
    AttrChange c;
    c.set_mode = to_set & FUSE_SET_ATTR_MODE;
    c.mode = attr->st_mode;
    c.set_uid = to_set & FUSE_SET_ATTR_UID;
    c.uid = attr->st_uid;
    c.set_gid = to_set & FUSE_SET_ATTR_GID;
    c.gid = attr->st_gid;
    c.set_size = to_set & FUSE_SET_ATTR_SIZE;
    c.size = static_cast<uint64_t>(attr->st_size);
    if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
      c.set_atime = true;
      c.atime = {0, UTIME_NOW};
    } else if (to_set & FUSE_SET_ATTR_ATIME) {
      c.set_atime = true;
      c.atime = attr->st_atim;
    }
    if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
      c.set_mtime = true;
      c.mtime = {0, UTIME_NOW};
    } else if (to_set & FUSE_SET_ATTR_MTIME) {
      c.set_mtime = true;
      c.mtime = attr->st_mtim;
    }
    if (c.set_size && attr->st_size < 0) return (void)fuse_reply_err(req, EINVAL);
    FileHandle* fh = fi && fi->fh ? reinterpret_cast<HandleBox*>(fi->fh)->get() : nullptr;
    auto r = fs_of(req).setattr(ino, c, fh);
    if (!r.ok()) return reply_status(req, r.status());
    fuse_reply_attr(req, &r->attr, attr_timeout(r->cache));
  });
}
void op_mknod(fuse_req_t req, fuse_ino_t, const char*, mode_t, dev_t) { reply_rofs(req, "mknod"); }
void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  guarded(req, [&] { reply_new_entry(req, fs_of(req).mkdir(parent, name, mode, caller_of(req))); });
}
void op_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  guarded(req, [&] { reply_status(req, fs_of(req).unlink(parent, name)); });
}
void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  guarded(req, [&] { reply_status(req, fs_of(req).rmdir(parent, name)); });
}
void op_symlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  guarded(req, [&] { reply_new_entry(req, fs_of(req).symlink(parent, name, target, caller_of(req))); });
}
void op_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent, const char* new_name,
               unsigned int flags) {
  guarded(req, [&] { reply_status(req, fs_of(req).rename(parent, name, new_parent, new_name, flags)); });
}
void op_link(fuse_req_t req, fuse_ino_t, fuse_ino_t, const char*) { reply_rofs(req, "link"); }
void op_write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off, struct fuse_file_info* fi) {
  (void)ino;
  guarded(req, [&] {
    if (off < 0) return (void)fuse_reply_err(req, EINVAL);
    HandleBox h = *reinterpret_cast<HandleBox*>(fi->fh);
    auto r = fs_of(req).write(*h, static_cast<uint64_t>(off), reinterpret_cast<const uint8_t*>(buf), size);
    if (!r.ok()) return reply_status(req, r.status());
    fuse_reply_write(req, *r);
  });
}
void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, struct fuse_file_info* fi) {
  guarded(req, [&] {
    auto r = fs_of(req).create(parent, name, mode, fi->flags, caller_of(req));
    if (!r.ok()) return reply_status(req, r.status());
    auto& [entry, handle] = r.value();
    fuse_entry_param e;
    fill_entry(entry, &e);
    MountContext& ctx = ctx_of(req);
    fi->keep_cache = 0;
    fi->direct_io = 0;
    fi->noflush = 1;
    fi->fh = keep_handle(ctx, ctx.open_files, std::make_unique<HandleBox>(std::move(handle)));
    if (fuse_reply_create(req, &e, fi) != 0) {
      drop_handle<HandleBox>(ctx, ctx.open_files, fi->fh);
      fs_of(req).forget(entry.id, 1);
    }
  });
}
void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info* fi) {
  (void)ino;
  guarded(req, [&] {
    HandleBox h = *reinterpret_cast<HandleBox*>(fi->fh);
    reply_status(req, fs_of(req).fsync(*h, datasync != 0));
  });
}
void op_fsyncdir(fuse_req_t req, fuse_ino_t, int, struct fuse_file_info*) { fuse_reply_err(req, 0); }
void op_setxattr(fuse_req_t req, fuse_ino_t, const char*, const char*, size_t, int) { reply_rofs(req, "setxattr"); }
void op_removexattr(fuse_req_t req, fuse_ino_t, const char*) { reply_rofs(req, "removexattr"); }
void op_fallocate(fuse_req_t req, fuse_ino_t, int, off_t, off_t, struct fuse_file_info*) {
  reply_rofs(req, "fallocate");
}

struct fuse_lowlevel_ops make_ops() {
  struct fuse_lowlevel_ops ops;
  std::memset(&ops, 0, sizeof(ops));
  ops.init = op_init;
  ops.lookup = op_lookup;
  ops.forget = op_forget;
  ops.forget_multi = op_forget_multi;
  ops.getattr = op_getattr;
  ops.readlink = op_readlink;
  ops.opendir = op_opendir;
  ops.readdir = op_readdir;
  ops.releasedir = op_releasedir;
  ops.open = op_open;
  ops.read = op_read;
  ops.release = op_release;
  ops.flush = op_flush;
  ops.statfs = op_statfs;
  ops.setattr = op_setattr;
  ops.mknod = op_mknod;
  ops.mkdir = op_mkdir;
  ops.unlink = op_unlink;
  ops.rmdir = op_rmdir;
  ops.symlink = op_symlink;
  ops.rename = op_rename;
  ops.link = op_link;
  ops.write = op_write;
  ops.create = op_create;
  ops.fsync = op_fsync;
  ops.fsyncdir = op_fsyncdir;
  ops.setxattr = op_setxattr;
  ops.removexattr = op_removexattr;
  ops.fallocate = op_fallocate;
  return ops;
}

bool is_octal(char c) { return c >= '0' && c <= '7'; }

// Undoes mountinfo's octal escapes (\040 for a space, ...).
std::string unescape_mountinfo(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && is_octal(s[i + 1]) && is_octal(s[i + 2]) && is_octal(s[i + 3])) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

size_t release_open_handles(MountContext& ctx) {
  std::unordered_set<uint64_t> files, dirs;
  {
    std::lock_guard<std::mutex> lk(ctx.handles_mu);
    files.swap(ctx.open_files);
    dirs.swap(ctx.open_dirs);
  }
  for (uint64_t fh : files) delete reinterpret_cast<HandleBox*>(fh);
  for (uint64_t fh : dirs) delete reinterpret_cast<DirSnapshot*>(fh);
  return files.size() + dirs.size();
}

const struct fuse_lowlevel_ops& operations() {
  static const struct fuse_lowlevel_ops ops = make_ops();
  return ops;
}

int errno_of(const Status& st) {
  switch (st.code()) {
    case Code::kOk: return 0;
    case Code::kNotFound: return ENOENT;
    case Code::kNotDirectory: return ENOTDIR;
    case Code::kIsDirectory: return EISDIR;
    case Code::kReadOnly: return EROFS;
    case Code::kPermission: return EACCES;
    case Code::kInvalidArgument: return EINVAL;
    case Code::kNameTooLong: return ENAMETOOLONG;
    case Code::kLoop: return ELOOP;
    case Code::kCorruption: return EIO;
    case Code::kIOError: return EIO;
    case Code::kNoResources: return ENOMEM;
    case Code::kNotSupported: return EOPNOTSUPP;
    case Code::kStale: return ESTALE;
    case Code::kInternal: return EIO;
    case Code::kExists: return EEXIST;
    case Code::kNotEmpty: return ENOTEMPTY;
    case Code::kCrossDevice: return EXDEV;
    case Code::kNoSpace: return ENOSPC;
    case Code::kTooLarge: return EFBIG;
  }
  return EIO;
}

std::string raise_bdi_readahead(const std::string& mountpoint, unsigned kb) {
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return "readahead: no /proc/self/mountinfo";
  std::string line, dev;
  while (std::getline(in, line)) {
    // id parent major:minor root mountpoint options... - fstype source ...
    std::istringstream ls(line);
    std::string id, parent, majmin, root, mp;
    ls >> id >> parent >> majmin >> root >> mp;
    const size_t sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::istringstream tail(line.substr(sep + 3));
    std::string fstype;
    tail >> fstype;
    if (unescape_mountinfo(mp) == mountpoint && fstype.rfind("fuse", 0) == 0) dev = majmin;  // last wins
  }
  if (dev.empty()) return "readahead: mount " + mountpoint + " not found in mountinfo";
  const std::string path = "/sys/class/bdi/" + dev + "/read_ahead_kb";
  std::ofstream out(path);
  out << kb << "\n";
  out.flush();
  if (!out) return "readahead: cannot write " + path + " (kernel default readahead stays)";
  return "readahead: " + path + " = " + std::to_string(kb);
}

}  // namespace wcodecfs::mount
