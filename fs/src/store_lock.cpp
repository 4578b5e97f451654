// fs/src/store_lock.cpp — see store_lock.h.
#include "store_lock.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "wcodecfs/fs_log.h"

namespace wcodecfs::queue_io {
namespace {

bool pid_alive(int64_t pid) {
  if (pid <= 0 || pid > INT32_MAX) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  // A killed holder stays a zombie until its parent reaps it: it holds
  // nothing any more. /proc/PID/stat is "PID (COMM) STATE ..."; COMM may
  // contain ')' so the state follows the last one.
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return true;  // no procfs: trust kill()
  char buf[512];
  const ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return true;
  const std::string stat(buf, static_cast<size_t>(n));
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return true;
  const char state = stat[close + 2];
  return state != 'Z' && state != 'X';
}

double seconds_since(const struct timespec& t) {
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec - t.tv_sec) + static_cast<double>(now.tv_nsec - t.tv_nsec) * 1e-9;
}

std::string random_hex() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^ (static_cast<uint64_t>(::getpid()) << 32)};
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(rng()));
  return b;
}

Status write_all(int fd, const std::string& s, const std::string& what) {
  size_t put = 0;
  while (put < s.size()) {
    const ssize_t w = ::write(fd, s.data() + put, s.size() - put);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return from_errno(errno, "write " + what);
    put += static_cast<size_t>(w);
  }
  return Status::OK();
}

}  // namespace

std::string lock_name(const std::string& name) { return kLockPrefix + name; }
std::string temp_name(const std::string& name, const std::string& owner) { return kTempPrefix + name + "." + owner; }

FileId FileId::of(const struct stat& st) {
  FileId id;
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  id.size = st.st_size;
  id.mtime = st.st_mtim;
  id.ctime = st.st_ctim;
  return id;
}

bool FileId::operator==(const FileId& o) const {
  return dev == o.dev && ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
         mtime.tv_nsec == o.mtime.tv_nsec && ctime.tv_sec == o.ctime.tv_sec && ctime.tv_nsec == o.ctime.tv_nsec;
}

std::pair<std::string, std::string> split_rel(const std::string& rel) {
  const size_t slash = rel.rfind('/');
  if (slash == std::string::npos) return {"", rel};
  return {rel.substr(0, slash), rel.substr(slash + 1)};
}

bool valid_rel(const std::string& rel) {
  if (rel.empty()) return true;
  if (rel.find('\0') != std::string::npos) return false;
  size_t start = 0;
  for (;;) {
    const size_t slash = rel.find('/', start);
    const std::string comp = rel.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (comp.empty() || comp == "." || comp == "..") return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

bool covers(const std::string& prefix, const std::string& rel) {
  if (prefix.empty() || prefix == rel) return true;
  return rel.size() > prefix.size() && rel.compare(0, prefix.size(), prefix) == 0 && rel[prefix.size()] == '/';
}

Result<Fd> open_dir_below(int root, const std::string& rel_dir) {
  Fd cur(::openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!cur.valid()) return from_errno(errno, "open the area");
  if (rel_dir.empty()) return cur;
  if (!valid_rel(rel_dir)) return Status::Invalid("path \"" + rel_dir + "\" is not an area-relative path");
  size_t start = 0;
  for (;;) {
    const size_t slash = rel_dir.find('/', start);
    const std::string comp = rel_dir.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    Fd next(::openat(cur.get(), comp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.valid()) return from_errno(errno, "open directory " + rel_dir.substr(0, slash));
    cur = std::move(next);
    if (slash == std::string::npos) return cur;
    start = slash + 1;
  }
}

Result<Fd> open_regular(int dirfd, const std::string& name, struct stat* st) {
  Fd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return from_errno(errno, "open " + name);
  if (::fstat(fd.get(), st) != 0) return from_errno(errno, "fstat " + name);
  if (!S_ISREG(st->st_mode)) return Status::Invalid(name + " is not a regular file");
  return fd;
}

Status fsync_fd(int fd, const std::string& what) {
  if (::fsync(fd) != 0) return from_errno(errno, "fsync " + what);
  return Status::OK();
}

Status unlink_if_exists(int dirfd, const std::string& name, const std::string& what) {
  if (::unlinkat(dirfd, name.c_str(), 0) != 0 && errno != ENOENT) return from_errno(errno, "unlink " + what);
  return Status::OK();
}

Result<std::array<uint8_t, 32>> sha256_fd(int fd, const std::string& what) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    return Status::Internal("SHA-256 unavailable");
  std::vector<uint8_t> buf(1 << 20);
  off_t off = 0;
  for (;;) {
    const ssize_t r = ::pread(fd, buf.data(), buf.size(), off);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return from_errno(errno, "read " + what);
    if (r == 0) break;
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(r));
    off += r;
  }
  std::array<uint8_t, 32> md{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md.data(), &len);
  return md;
}


std::string this_host() {
  char b[256] = {};
  if (::gethostname(b, sizeof b - 1) != 0 || b[0] == '\0') return "localhost";
  std::string h(b);
  for (char& c : h)
    if (c == '/' || c == '\0') c = '_';
  return h;
}

std::string this_boot_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(f >> id)) return "";
  return id;
}

std::string lock_body_json(const LockOwner& me) {
  nlohmann::json j = {{"owner", me.owner}, {"host", me.host}, {"boot_id", me.boot_id}, {"pid", me.pid}};
  return j.dump() + "\n";
}

LockBody parse_lock_body(const std::string& text) {
  LockBody b;
  if (text.size() > kMaxLockBody) return b;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return b;
  auto str = [&](const char* k, std::string* out) {
    auto it = j.find(k);
    if (it == j.end() || !it->is_string()) return false;
    *out = it->get<std::string>();
    return true;
  };
  auto pid = j.find("pid");
  if (!str("owner", &b.owner) || !str("host", &b.host) || !str("boot_id", &b.boot_id) || pid == j.end() ||
      !pid->is_number_integer())
    return b;
  b.pid = pid->get<int64_t>();
  b.valid = !b.owner.empty();
  return b;
}

Result<LockInfo> inspect_lock(int dirfd, const std::string& lock_file, const LockOwner& me) {
  LockInfo info;
  struct stat st {};
  Fd fd(::openat(dirfd, lock_file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    if (err == ELOOP) {  // not a lock we could have made: stale by definition
      if (::fstatat(dirfd, lock_file.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return from_errno(errno, "stat " + lock_file);
      info.ino = st.st_ino;
      info.mtime = st.st_mtim;
      info.stale = true;
      info.why = "a symbolic link";
      return info;
    }
    return from_errno(err, "open " + lock_file);
  }
  if (::fstat(fd.get(), &st) != 0) return from_errno(errno, "fstat " + lock_file);
  info.ino = st.st_ino;
  info.mtime = st.st_mtim;
  std::string text;
  if (S_ISREG(st.st_mode)) {
    text.resize(kMaxLockBody + 1);
    size_t got = 0;
    while (got < text.size()) {
      const ssize_t r = ::pread(fd.get(), text.data() + got, text.size() - got, static_cast<off_t>(got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    text.resize(got);
    info.body = parse_lock_body(text);
  }
  const double age = seconds_since(st.st_mtim);
  const double limit = std::chrono::duration<double>(me.stale).count();
  char why[160];
  if (!S_ISREG(st.st_mode)) {
    info.stale = true;
    info.why = "not a regular file";
  } else if (age > limit) {
    info.stale = true;
    std::snprintf(why, sizeof why, "not refreshed for %.0f s (limit %.0f s)", age, limit);
    info.why = why;
  } else if (info.body.valid && info.body.owner == me.owner) {
    info.stale = true;
    info.why = "left by an earlier run of this owner";
  } else if (info.body.valid && !me.boot_id.empty() && info.body.boot_id == me.boot_id && !pid_alive(info.body.pid)) {
    info.stale = true;
    info.why = "holder pid " + std::to_string(info.body.pid) + " is gone";
  }
  return info;
}

Result<bool> remove_stale_lock(int dirfd, const std::string& lock_file, const LockInfo& info, const LockOwner& me) {
  (void)me;
  const std::string aside = std::string(kStalePrefix) + random_hex() + "." + std::to_string(::getpid());
  if (::renameat(dirfd, lock_file.c_str(), dirfd, aside.c_str()) != 0) {
    if (errno == ENOENT) return false;  // someone else removed it
    return from_errno(errno, "rename stale lock " + lock_file);
  }
  struct stat st {};
  if (::fstatat(dirfd, aside.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    // Another recoverer deleted our aside name: the lock name is free.
    return errno == ENOENT ? Result<bool>(true) : Result<bool>(from_errno(errno, "stat " + aside));
  }
  if (st.st_ino == info.ino) {
    if (S_ISDIR(st.st_mode) ? ::unlinkat(dirfd, aside.c_str(), AT_REMOVEDIR) != 0
                            : ::unlinkat(dirfd, aside.c_str(), 0) != 0) {
      if (errno != ENOENT) return from_errno(errno, "unlink stale lock " + aside);
    }
    return true;
  }
  // We moved a lock created after we judged the old one: give it back. If
  // the name was taken again meanwhile, drop it; its holder sees the loss
  // (HeldLock::still_ours) before it swaps.
  if (::renameat2(dirfd, aside.c_str(), dirfd, lock_file.c_str(), RENAME_NOREPLACE) != 0) {
    if (::unlinkat(dirfd, aside.c_str(), 0) != 0 && errno != ENOENT) return from_errno(errno, "unlink " + aside);
  }
  return false;
}

HeldLock::~HeldLock() = default;

void HeldLock::refresh() const {
  // Best effort: a failed refresh only makes the lock look stale sooner.
  (void)::futimens(fd_.get(), nullptr);
}

bool HeldLock::still_ours() const {
  struct stat st {}, mine {};
  if (::fstatat(dir_.get(), file_.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  if (::fstat(fd_.get(), &mine) != 0) return false;
  return st.st_ino == mine.st_ino && st.st_dev == mine.st_dev;
}

void HeldLock::release() {
  if (released_) return;
  released_ = true;
  if (still_ours()) (void)::unlinkat(dir_.get(), file_.c_str(), 0);
}

Result<LockAttempt> acquire_lock(int dirfd, const std::string& name, const LockOwner& me) {
  const std::string lf = lock_name(name);
  LockAttempt out;
  for (int attempt = 0; attempt < 4; ++attempt) {
    Fd fd(::openat(dirfd, lf.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd.valid()) {
      Status st = write_all(fd.get(), lock_body_json(me), lf);
      struct stat sb {};
      if (st.ok() && ::fstat(fd.get(), &sb) != 0) st = from_errno(errno, "fstat " + lf);
      if (!st.ok()) {
        (void)::unlinkat(dirfd, lf.c_str(), 0);
        return st;
      }
      std::unique_ptr<HeldLock> h(new HeldLock());
      h->dir_ = Fd(::fcntl(dirfd, F_DUPFD_CLOEXEC, 0));
      if (!h->dir_.valid()) {
        const int err = errno;
        (void)::unlinkat(dirfd, lf.c_str(), 0);
        return from_errno(err, "dup directory of " + lf);
      }
      h->fd_ = std::move(fd);
      h->file_ = lf;
      h->ino_ = sb.st_ino;
      out.held = std::move(h);
      return out;
    }
    if (errno != EEXIST) return from_errno(errno, "create " + lf);
    auto info = inspect_lock(dirfd, lf, me);
    if (!info.ok()) {
      if (info.status().code() == Code::kNotFound) continue;  // released meanwhile
      return info.status();
    }
    if (!info->stale) {
      out.holder = std::move(info).value();
      return out;
    }
    WCFS_ASSIGN_OR_RETURN(const bool removed, remove_stale_lock(dirfd, lf, *info, me));
    if (removed) {
      if (info->body.valid) out.taken_over_from = info->body.owner;
      log_info("took over the stale lock " + lf + " of " + (info->body.valid ? info->body.owner : "an unknown owner") +
               ": " + info->why);
    }
    out.holder = std::move(info).value();
  }
  return out;  // contended: busy for now
}

}  // namespace wcodecfs::queue_io
