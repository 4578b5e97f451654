// fs/src/encode_queue.cpp — see wcodecfs/encode_queue.h; the on-disk
// protocol is docs/staging.md, the lock files are store_lock.h.
//
// Threads: `threads` workers (each encodes one file at a time, the codec
// single-threaded) and one keeper (lock refresh every lock_stale / 4, scans
// of changed directories). Impl::mu is a leaf: no IO, hook or callback runs
// under it; everything that touches the disk runs on a worker, the keeper or
// the calling thread with mu released. A swap is announced under mu (path
// put into `swapping`) and hold() waits for it to leave that set.
#include "wcodecfs/encode_queue.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <openssl/evp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "store_lock.h"
#include "wcodecfs/fs_log.h"

namespace wcodecfs {

using namespace queue_io;

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kHistory = 64;            // finished items kept for stats()
constexpr size_t kIoPiece = 8u << 20;      // read/write/decode piece; cancel checked between pieces
constexpr int kMaxDepth = 256;             // deepest directory walked
constexpr size_t kMaxOwnerId = 128;        // keeps lock and temp names below NAME_MAX for sane names

std::atomic<int> g_queues{0};  // numbers default owner ids of a process

// "host.pid", plus ".n" for the n-th queue of a process (n >= 2).
std::string default_owner_id(int n) {
  std::string id = this_host() + "." + std::to_string(::getpid());
  if (n >= 2) id += "." + std::to_string(n);
  return id;
}

std::string join_rel(const std::string& dir, const std::string& name) { return dir.empty() ? name : dir + "/" + name; }

// nice 19 and IOPRIO_CLASS_IDLE for the calling thread (best effort).
void lower_priority() {
  const pid_t tid = static_cast<pid_t>(::syscall(SYS_gettid));
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), 19);
  constexpr int kIoprioWhoProcess = 1, kIoprioClassIdle = 3, kIoprioClassShift = 13;  // linux/ioprio.h
  (void)::syscall(SYS_ioprio_set, kIoprioWhoProcess, tid, kIoprioClassIdle << kIoprioClassShift);
}

std::string fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

// Seconds until `ctime + quiet` (<= 0: the file has been quiet long enough).
double quiet_left(const struct timespec& ctime, std::chrono::milliseconds quiet) {
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const double age =
      static_cast<double>(now.tv_sec - ctime.tv_sec) + static_cast<double>(now.tv_nsec - ctime.tv_nsec) * 1e-9;
  return std::chrono::duration<double>(quiet).count() - age;
}

Status write_all(int fd, const uint8_t* p, size_t n, const std::string& what) {
  size_t put = 0;
  while (put < n) {
    const ssize_t w = ::write(fd, p + put, std::min(n - put, kIoPiece));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return from_errno(errno, "write " + what);
    put += static_cast<size_t>(w);
  }
  return Status::OK();
}

// Copies owner (when permitted), mode and (with `times`) atime/mtime of
// `st` to `fd`.
Status copy_metadata(int fd, const struct stat& st, const std::string& what, bool times_too = true) {
  if (::fchown(fd, st.st_uid, st.st_gid) != 0 && errno != EPERM) return from_errno(errno, "fchown " + what);
  if (::fchmod(fd, st.st_mode & 07777) != 0) return from_errno(errno, "fchmod " + what);
  if (!times_too) return Status::OK();
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  if (::futimens(fd, times) != 0) return from_errno(errno, "futimens " + what);
  return Status::OK();
}

// A directory entry as listed by readdir.
struct DirEnt {
  std::string name;
  unsigned char type;  // DT_REG, DT_DIR, DT_LNK, ... (never DT_UNKNOWN)
};

Result<std::vector<DirEnt>> list_dir(int dirfd, const std::string& what) {
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return from_errno(errno, "open directory " + what);
  DIR* d = ::fdopendir(fd);
  if (!d) {
    const int err = errno;
    ::close(fd);
    return from_errno(err, "fdopendir " + what);
  }
  std::vector<DirEnt> out;
  for (;;) {
    errno = 0;
    const struct dirent* e = ::readdir(d);
    if (!e) break;
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    unsigned char type = e->d_type;
    if (type == DT_UNKNOWN) {
      struct stat st {};
      if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      type = S_ISREG(st.st_mode) ? DT_REG : S_ISDIR(st.st_mode) ? DT_DIR : S_ISLNK(st.st_mode) ? DT_LNK : DT_UNKNOWN;
    }
    out.push_back({std::move(name), type});
  }
  const int err = errno;
  ::closedir(d);
  if (err != 0) return from_errno(err, "readdir " + what);
  return out;
}

// Visits directory `dirfd` (area-relative `rel_dir`) and every directory
// below it that is neither a symlink nor a queue-internal name.
using Visit = std::function<void(int dirfd, const std::string& rel_dir, const std::vector<DirEnt>& ents)>;
Status walk(int dirfd, const std::string& rel_dir, int depth, const Visit& visit) {
  WCFS_ASSIGN_OR_RETURN(std::vector<DirEnt> ents, list_dir(dirfd, rel_dir.empty() ? "." : rel_dir));
  visit(dirfd, rel_dir, ents);
  Status first;
  for (const DirEnt& e : ents) {
    if (e.type != DT_DIR || is_queue_internal_name(e.name)) continue;
    const std::string rel = join_rel(rel_dir, e.name);
    if (depth >= kMaxDepth) {
      log_once(LogLevel::kWarn, "encode-depth:" + rel, "not scanning " + rel + ": deeper than " + std::to_string(kMaxDepth));
      continue;
    }
    Fd sub(::openat(dirfd, e.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub.valid()) {
      if (first.ok() && errno != ENOENT) first = from_errno(errno, "open directory " + rel);
      continue;
    }
    Status st = walk(sub.get(), rel, depth + 1, visit);
    if (first.ok() && !st.ok()) first = st;
  }
  return first;
}

// Removes a file of ours on scope exit unless disarmed.
class TempGuard {
 public:
  TempGuard(int dirfd, std::string name) : dirfd_(dirfd), name_(std::move(name)) {}
  ~TempGuard() {
    if (armed_) (void)::unlinkat(dirfd_, name_.c_str(), 0);
  }
  TempGuard(const TempGuard&) = delete;
  TempGuard& operator=(const TempGuard&) = delete;
  void disarm() { armed_ = false; }

 private:
  int dirfd_;
  std::string name_;
  bool armed_ = true;
};

}  // namespace

bool is_queue_internal_name(const std::string& name) { return name.rfind(kInternalPrefix, 0) == 0; }

// ----------------------------------------------------------------- Impl

struct EncodeQueue::Impl {
  struct Pending {
    Clock::time_point due;
    uint64_t size = 0;   // last known plain size
    bool retry = false;  // waiting for another owner's lock: the due time holds even under drain(true)
  };
  struct Job {
    explicit Job(std::string r) : rel(std::move(r)) {}
    const std::string rel;
    std::atomic<bool> cancelled{false};
    std::atomic<uint64_t> size{0};
    std::string why;  // first cancel reason (mu)
  };
  enum class ClaimState { kAcquiring, kHeld, kReleasing };
  // One lock file held by this queue, shared by an encode and a
  // materialize of the same path (reference counted).
  struct Claim {
    ClaimState state = ClaimState::kAcquiring;
    int refs = 0;
    std::shared_ptr<HeldLock> lock;
  };
  struct Outcome {
    enum Kind { kDone, kFailed, kCancelled, kBusy, kGone, kDefer } kind = kGone;
    Clock::time_point defer_until{};
    uint64_t size = 0, encoded = 0;
    double seconds = 0;
    std::string error;  // failed / cancelled / busy: why
    FileId id;          // failed: the content that failed
  };

  // A reference to a claim; releases it (and the lock file with the last
  // reference) on destruction.
  class ClaimRef {
   public:
    ClaimRef() = default;
    ClaimRef(Impl* impl, std::string rel, std::shared_ptr<HeldLock> lock)
        : impl_(impl), rel_(std::move(rel)), lock_(std::move(lock)) {}
    ~ClaimRef() { release(); }
    ClaimRef(ClaimRef&& o) noexcept : impl_(o.impl_), rel_(std::move(o.rel_)), lock_(std::move(o.lock_)) {
      o.impl_ = nullptr;
    }
    ClaimRef& operator=(ClaimRef&& o) noexcept {
      if (this != &o) {
        release();
        impl_ = o.impl_;
        rel_ = std::move(o.rel_);
        lock_ = std::move(o.lock_);
        o.impl_ = nullptr;
      }
      return *this;
    }
    bool held() const { return impl_ != nullptr; }
    bool still_ours() const { return lock_ && lock_->still_ours(); }
    void release() {
      if (impl_) impl_->release_claim(rel_);
      impl_ = nullptr;
      lock_.reset();
    }

   private:
    Impl* impl_ = nullptr;
    std::string rel_;
    std::shared_ptr<HeldLock> lock_;
  };
  struct ClaimResult {
    ClaimRef ref;                 // not held: busy
    LockInfo holder;              // busy: who holds it
    std::string taken_over_from;  // the previous (stale) owner
  };

  // Immutable after create().
  std::string area;
  Fd area_fd;
  EncodeQueueOptions opt;
  LockOwner me;

  // The codec that encodes plain file `name` (a single component), or null:
  // the first of the kinds' staging codecs that gives it an encoded name.
  const StagingCodec* codec_for(const std::string& name) const {
    return is_queue_internal_name(name) ? nullptr : wcodecfs::codec_for(opt.kinds, name);
  }
  bool is_candidate_name(const std::string& name) const { return codec_for(name) != nullptr; }
  bool is_candidate_rel(const std::string& rel) const {
    if (rel.empty() || !valid_rel(rel)) return false;
    size_t start = 0;
    for (;;) {
      const size_t slash = rel.find('/', start);
      const std::string comp = rel.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
      if (slash == std::string::npos) return is_candidate_name(comp);
      if (is_queue_internal_name(comp)) return false;
      start = slash + 1;
    }
  }
  // REQUIRES: is_candidate_name(name).
  std::string encoded_name(const std::string& name) const { return codec_for(name)->encoded_name(name); }

  // Guards every field below. Leaf: see the file comment.
  mutable std::mutex mu;
  std::condition_variable work_cv;    // workers: pending, writers, holds, stop
  std::condition_variable state_cv;   // drain (idle), hold() (swaps), claims
  std::condition_variable keeper_cv;  // keeper: rescans, stop
  std::map<std::string, Pending> pending;
  std::map<std::string, int> writers;  // open writers per path (any name)
  std::map<std::string, std::shared_ptr<Job>> running;
  // Files that failed, by path, with the content that failed: not retried
  // while their FileId is unchanged (any write, truncate, chmod or touch
  // changes it).
  std::map<std::string, FileId> failed;
  std::multiset<std::string> holds;
  std::set<std::string> swapping;
  std::map<std::string, Claim> claims;
  std::deque<std::string> rescan;  // changed paths the keeper scans
  int rescanning = 0;
  int drain_now = 0;
  bool started = false, stopping = false;
  int queue_number = 1;
  bool default_owner = false;  // owner id derived from the pid
  // Re-reads the pid (and a pid-derived owner id) after a fork; before start.
  void refresh_identity();
  uint64_t stop_gen = 0;
  uint64_t n_done = 0, n_failed = 0, n_cancelled = 0, bytes_in = 0, bytes_out = 0;
  double seconds = 0;
  std::deque<EncodeQueueStats::Item> history;
  std::vector<std::thread> workers;
  std::thread keeper;

  std::chrono::milliseconds refresh_interval() const {
    return std::max(std::chrono::milliseconds(10), opt.lock_stale / 4);
  }
  std::chrono::milliseconds retry_delay() const {
    return std::clamp(opt.lock_stale / 4, std::chrono::milliseconds(20), std::chrono::milliseconds(5000));
  }
  void hook(const char* point, const std::string& rel) const {
    if (opt.hook) opt.hook(point, rel);
  }

  // ---- state helpers (REQUIRES: mu held)
  bool held_locked(const std::string& rel) const {
    for (const auto& h : holds)
      if (covers(h, rel)) return true;
    return false;
  }
  void cancel_locked(const std::string& prefix, const std::string& why) {
    for (auto& [rel, job] : running) {
      if (!covers(prefix, rel)) continue;
      if (!job->cancelled.exchange(true)) job->why = why;
    }
  }
  void enqueue_locked(const std::string& rel, Clock::time_point due, uint64_t size, bool retry = false) {
    auto [it, fresh] = pending.try_emplace(rel, Pending{due, size, retry});
    if (!fresh) {
      it->second.due = std::max(it->second.due, due);
      it->second.retry = retry;
      if (size) it->second.size = size;
    }
  }
  // Restarts the quiet period of every pending path under `prefix`.
  void touch_locked(const std::string& prefix, Clock::time_point due) {
    for (auto it = pending.lower_bound(prefix); it != pending.end(); ++it) {
      if (!covers(prefix, it->first)) {
        if (it->first.compare(0, prefix.size(), prefix) != 0) break;  // past the prefix range
        continue;
      }
      it->second.due = std::max(it->second.due, due);
      it->second.retry = false;
    }
  }
  bool has_writer_locked(const std::string& rel) const {
    auto w = writers.find(rel);
    return w != writers.end() && w->second > 0;
  }
  bool idle_locked() const {
    if (!running.empty() || !rescan.empty() || rescanning > 0) return false;
    for (const auto& [rel, p] : pending)
      if (!has_writer_locked(rel)) return false;
    return true;
  }
  void remember_locked(EncodeQueueStats::Item item) {
    // Repeated cancellations of one path (another owner's lock) fold into one line.
    if (!history.empty() && history.back().path == item.path && history.back().state == item.state &&
        item.state == "cancelled") {
      history.back() = std::move(item);
      return;
    }
    history.push_back(std::move(item));
    while (history.size() > kHistory) history.pop_front();
  }
  bool ignore_quiet() const {
    if (opt.quiet.count() == 0) return true;
    std::lock_guard<std::mutex> lk(mu);
    return drain_now > 0;
  }

  // ---- claims (lock files)
  Result<ClaimResult> acquire_claim(const std::string& rel, int dirfd, const std::string& name) {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      auto it = claims.find(rel);
      if (it == claims.end()) break;
      if (it->second.state == ClaimState::kHeld) {
        ++it->second.refs;
        ClaimResult r;
        r.ref = ClaimRef(this, rel, it->second.lock);
        return r;
      }
      state_cv.wait(lk);
    }
    claims[rel].refs = 1;
    lk.unlock();
    auto attempt = acquire_lock(dirfd, name, me);
    lk.lock();
    if (!attempt.ok() || !attempt->held) {
      claims.erase(rel);
      state_cv.notify_all();
      if (!attempt.ok()) return attempt.status();
      ClaimResult r;
      r.holder = std::move(attempt->holder);
      return r;
    }
    Claim& c = claims[rel];
    c.state = ClaimState::kHeld;
    c.lock = std::shared_ptr<HeldLock>(std::move(attempt->held));
    state_cv.notify_all();
    ClaimResult r;
    r.ref = ClaimRef(this, rel, c.lock);
    r.taken_over_from = std::move(attempt->taken_over_from);
    return r;
  }
  void release_claim(const std::string& rel) {
    std::shared_ptr<HeldLock> lock;
    {
      std::lock_guard<std::mutex> lk(mu);
      auto it = claims.find(rel);
      if (it == claims.end()) return;
      if (--it->second.refs > 0) return;
      it->second.state = ClaimState::kReleasing;
      lock = it->second.lock;
    }
    if (lock) lock->release();
    std::lock_guard<std::mutex> lk(mu);
    claims.erase(rel);
    state_cv.notify_all();
  }

  // ---- the work
  void worker_main();
  void keeper_main();
  Outcome run_job(Job& job);
  void finish(const std::shared_ptr<Job>& job, Outcome o);
  void scan_changed(const std::string& rel);
  void recover_dir(int dirfd, const std::string& rel_dir, const std::vector<DirEnt>& ents, Status* first);
  void resolve_both(int dirfd, const std::string& rel_dir, const std::string& name);
};

struct EncodeQueue::Hold::Token {
  Token(std::shared_ptr<Impl> i, std::string r) : impl(std::move(i)), rel(std::move(r)) {}
  ~Token() {
    std::lock_guard<std::mutex> lk(impl->mu);
    auto it = impl->holds.find(rel);
    if (it != impl->holds.end()) impl->holds.erase(it);
    impl->work_cv.notify_all();
  }
  Token(const Token&) = delete;
  Token& operator=(const Token&) = delete;
  std::shared_ptr<Impl> impl;
  std::string rel;
};

const std::string& EncodeQueue::Hold::path() const {
  static const std::string none;
  return token_ ? token_->rel : none;
}

// ----------------------------------------------------------------- workers

void EncodeQueue::Impl::worker_main() {
  (void)pthread_setname_np(pthread_self(), "wcfs-encode");
  if (opt.low_priority) lower_priority();
  std::unique_lock<std::mutex> lk(mu);
  while (!stopping) {
    const auto now = Clock::now();
    std::optional<Clock::time_point> next;
    const std::string* pick = nullptr;
    Clock::time_point pick_due{};
    for (const auto& [rel, p] : pending) {
      if (running.count(rel) || has_writer_locked(rel) || held_locked(rel)) continue;
      const bool due = p.due <= now || (drain_now > 0 && !p.retry);
      if (!due) {
        if (!next || p.due < *next) next = p.due;
        continue;
      }
      if (!pick || p.due < pick_due) {
        pick = &rel;
        pick_due = p.due;
      }
    }
    if (!pick) {
      if (next)
        work_cv.wait_until(lk, *next);
      else
        work_cv.wait(lk);
      continue;
    }
    auto job = std::make_shared<Job>(*pick);
    job->size = pending[*pick].size;
    pending.erase(job->rel);
    running[job->rel] = job;
    lk.unlock();
    Outcome o = run_job(*job);
    finish(job, std::move(o));
    lk.lock();
  }
}

void EncodeQueue::Impl::finish(const std::shared_ptr<Job>& job, Outcome o) {
  const std::string& rel = job->rel;
  std::optional<EncodeQueueStats::Item> report;
  {
    std::lock_guard<std::mutex> lk(mu);
    running.erase(rel);
    const auto now = Clock::now();
    EncodeQueueStats::Item item;
    item.path = rel;
    item.size = o.size ? o.size : job->size.load();
    switch (o.kind) {
      case Outcome::kDone:
        ++n_done;
        bytes_in += o.size;
        bytes_out += o.encoded;
        seconds += o.seconds;
        failed.erase(rel);
        item.state = "done";
        item.encoded = o.encoded;
        item.seconds = o.seconds;
        report = item;
        remember_locked(std::move(item));
        break;
      case Outcome::kFailed:
        ++n_failed;
        failed[rel] = o.id;
        item.state = "failed";
        item.error = o.error;
        report = item;
        remember_locked(std::move(item));
        break;
      case Outcome::kCancelled:
      case Outcome::kBusy:
        ++n_cancelled;
        item.state = "cancelled";
        item.error = o.kind == Outcome::kBusy ? o.error : (job->why.empty() ? o.error : job->why);
        remember_locked(std::move(item));
        // Queued again (also when stopping: a later start() picks it up).
        if (o.kind == Outcome::kBusy)
          enqueue_locked(rel, now + retry_delay(), o.size, /*retry=*/true);
        else
          enqueue_locked(rel, now + opt.quiet, o.size);
        break;
      case Outcome::kDefer:
        enqueue_locked(rel, o.defer_until, o.size);
        break;
      case Outcome::kGone:
        if (!o.id.ino) failed.erase(rel);  // the file is not there any more
        break;
    }
    state_cv.notify_all();
    work_cv.notify_all();
  }
  if (report && opt.on_finished) opt.on_finished(*report);
}

EncodeQueue::Impl::Outcome EncodeQueue::Impl::run_job(Job& job) {
  const std::string& rel = job.rel;
  const std::string shown = area + "/" + rel;
  Outcome out;
  auto fail = [&](const Status& st, const FileId& id) {
    out.kind = Outcome::kFailed;
    out.error = st.ToString();
    out.id = id;
    return out;
  };
  auto cancelled = [&](const std::string& why) {
    out.kind = Outcome::kCancelled;
    out.error = why;
    return out;
  };
  auto gone = [&]() {
    out.kind = Outcome::kGone;
    return out;
  };
  auto [dir_rel, name] = split_rel(rel);
  auto dir_or = open_dir_below(area_fd.get(), dir_rel);
  if (!dir_or.ok()) {
    const Code c = dir_or.status().code();
    if (c == Code::kNotFound || c == Code::kNotDirectory || c == Code::kLoop) return gone();
    return fail(dir_or.status(), FileId{});
  }
  const Fd dir = std::move(dir_or).value();
  const int dfd = dir.get();

  struct stat st {};
  if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return gone();
    return fail(from_errno(errno, "stat " + rel), FileId{});
  }
  if (!S_ISREG(st.st_mode)) return gone();
  const FileId id0 = FileId::of(st);
  out.size = static_cast<uint64_t>(st.st_size);
  job.size = out.size;
  {
    std::lock_guard<std::mutex> lk(mu);
    auto f = failed.find(rel);
    if (f != failed.end() && f->second == id0) {
      out.id = id0;  // still the content that failed: keep the record
      return gone();
    }
  }
  if (!ignore_quiet()) {
    const double left = quiet_left(st.st_ctim, opt.quiet);
    if (left > 0) {
      out.kind = Outcome::kDefer;
      out.defer_until = Clock::now() + std::min<Clock::duration>(opt.quiet, std::chrono::duration_cast<Clock::duration>(
                                                                                  std::chrono::duration<double>(left)));
      return out;
    }
  }

  // 1. lock
  auto claim_or = acquire_claim(rel, dfd, name);
  if (!claim_or.ok()) return fail(claim_or.status(), id0);
  ClaimResult claim = std::move(claim_or).value();
  if (!claim.ref.held()) {
    out.kind = Outcome::kBusy;
    out.error = "locked by " + (claim.holder.body.valid ? claim.holder.body.owner : std::string("another owner"));
    return out;
  }
  hook("locked", rel);
  struct Unlock {
    const Impl* impl;
    const std::string& rel;
    ClaimRef& ref;
    ~Unlock() {
      impl->hook("unlocking", rel);
      ref.release();
    }
  } unlock{this, rel, claim.ref};
  const std::string tmp = temp_name(name, me.owner);
  // Temps of a stale owner we took over, and our own from an earlier run.
  if (!claim.taken_over_from.empty()) {
    (void)unlink_if_exists(dfd, temp_name(name, claim.taken_over_from), rel);
    (void)unlink_if_exists(dfd, temp_name(name, claim.taken_over_from) + kDecodeTempSuffix, rel);
  }
  if (Status s = unlink_if_exists(dfd, tmp, tmp); !s.ok()) return fail(s, id0);
  if (job.cancelled) return cancelled("cancelled");

  // 2. encode, reading the file and writing the temp as it goes (memory
  // stays at a few tensors for any file size)
  struct stat st0 {};
  auto pf_or = open_regular(dfd, name, &st0);
  if (!pf_or.ok()) {
    const Code c = pf_or.status().code();
    if (c == Code::kNotFound || c == Code::kLoop || c == Code::kInvalidArgument) return gone();
    return fail(pf_or.status(), id0);
  }
  const Fd pf = std::move(pf_or).value();
  if (FileId::of(st0) != id0) return cancelled("changed before it was read");
  const uint64_t size = static_cast<uint64_t>(st0.st_size);
  Fd tf(::openat(dfd, tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!tf.valid()) return fail(from_errno(errno, "create " + join_rel(dir_rel, tmp)), id0);
  TempGuard temp_guard(dfd, tmp);
  const auto t0 = Clock::now();
  wcodec::EncodeConfig cfg = opt.codec;
  cfg.threads = 1;
  cfg.progress = nullptr;
  cfg.cancelled = [&job] { return job.cancelled.load(); };
  const StagingCodec& codec = *codec_for(name);
  const Status est = codec.encode(pf.get(), size, tf.get(), cfg, rel);
  if (job.cancelled) return cancelled("cancelled while encoding");
  // The file must be the one read from start to end: a writer changes its
  // identity (size, times), and the encoding is dropped.
  struct stat st1 {};
  if (::fstat(pf.get(), &st1) != 0) return fail(from_errno(errno, "fstat " + rel), id0);
  if (FileId::of(st1) != id0) return cancelled("changed while it was read");
  uint8_t extra;
  if (::pread(pf.get(), &extra, 1, static_cast<off_t>(size)) > 0) return cancelled("grew while it was read");
  if (!est.ok()) {
    const Status& st_enc = est;
    log_once(LogLevel::kWarn,
             "encode-failed:" + shown + ":" + std::to_string(id0.ino) + ":" + std::to_string(id0.mtime.tv_sec) + "." +
                 std::to_string(id0.mtime.tv_nsec),
             "not encoded (stays plain): " + shown + ": " + st_enc.ToString());
    return fail(st_enc, id0);
  }
  if (Status s = fsync_fd(tf.get(), tmp); !s.ok()) return fail(s, id0);
  hook("temp-written", rel);
  if (job.cancelled) return cancelled("cancelled after writing");

  // 3. verify: decode everything, compare with what was read
  uint64_t encoded_size = 0;
  {
    auto info = codec.inspect(tf.get(), join_rel(dir_rel, tmp));
    Status vs = info.ok() ? Status::OK() : info.status();
    if (vs.ok() && info->original_size != size)
      vs = Status::Internal("the encoded file records another size than the file read");
    if (vs.ok()) vs = codec.verify(tf.get(), join_rel(dir_rel, tmp));
    if (!vs.ok()) {
      log_error("encode of " + shown + " did not verify (stays plain): " + vs.ToString());
      return fail(Status(vs.code(), "verification failed: " + vs.message()), id0);
    }
    encoded_size = info->encoded_size;
  }
  if (Status s = copy_metadata(tf.get(), st0, tmp); !s.ok()) return fail(s, id0);
  if (Status s = fsync_fd(tf.get(), tmp); !s.ok()) return fail(s, id0);
  hook("verified", rel);

  // 4. swap
  {
    std::lock_guard<std::mutex> lk(mu);
    if (job.cancelled) return cancelled(job.why.empty() ? "cancelled" : job.why);
    if (stopping) return cancelled("stopped");
    if (held_locked(rel)) return cancelled("held");
    swapping.insert(rel);
  }
  struct SwapMark {
    Impl* impl;
    const std::string& rel;
    ~SwapMark() {
      std::lock_guard<std::mutex> lk(impl->mu);
      impl->swapping.erase(rel);
      impl->state_cv.notify_all();
      impl->work_cv.notify_all();
    }
  } swap_mark{this, rel};
  if (!claim.ref.still_ours()) return cancelled("lost its lock to another owner");
  struct stat st2 {};
  if (::fstatat(dfd, name.c_str(), &st2, AT_SYMLINK_NOFOLLOW) != 0 || FileId::of(st2) != id0)
    return cancelled("changed during the encode");
  const std::string wname = codec.encoded_name(name);
  if (::renameat(dfd, tmp.c_str(), dfd, wname.c_str()) != 0)
    return fail(from_errno(errno, "rename " + tmp + " to " + join_rel(dir_rel, wname)), id0);
  temp_guard.disarm();
  if (Status s = fsync_fd(dfd, dir_rel.empty() ? "." : dir_rel); !s.ok()) log_warn(s.ToString());
  hook("renamed", rel);
  if (::unlinkat(dfd, name.c_str(), 0) != 0 && errno != ENOENT) {
    // Both files stay; the plain one wins and recover() settles them.
    return fail(from_errno(errno, "unlink " + rel + " after encoding it"), id0);
  }
  if (Status s = fsync_fd(dfd, dir_rel.empty() ? "." : dir_rel); !s.ok()) log_warn(s.ToString());
  hook("unlinked", rel);

  out.kind = Outcome::kDone;
  out.encoded = encoded_size;
  out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  log_info("encoded " + shown + ": " + std::to_string(size) + " -> " + std::to_string(encoded_size) + " bytes (" +
           fixed(static_cast<double>(encoded_size) / static_cast<double>(std::max<size_t>(1, size)), 4) + ") in " +
           fixed(out.seconds, 2) + " s");
  return out;
}

// ----------------------------------------------------------------- keeper

void EncodeQueue::Impl::keeper_main() {
  (void)pthread_setname_np(pthread_self(), "wcfs-keeper");
  std::unique_lock<std::mutex> lk(mu);
  auto next_refresh = Clock::now() + refresh_interval();
  while (!stopping) {
    if (!rescan.empty()) {
      const std::string rel = std::move(rescan.front());
      rescan.pop_front();
      ++rescanning;
      lk.unlock();
      scan_changed(rel);
      lk.lock();
      --rescanning;
      state_cv.notify_all();
      work_cv.notify_all();
      continue;
    }
    if (Clock::now() >= next_refresh) {
      std::vector<std::pair<std::string, std::shared_ptr<HeldLock>>> held;
      for (auto& [rel, c] : claims)
        if (c.state == ClaimState::kHeld && c.lock) held.emplace_back(rel, c.lock);
      lk.unlock();
      std::vector<std::string> lost;
      for (auto& [rel, lock] : held) {
        lock->refresh();
        if (!lock->still_ours()) lost.push_back(rel);
      }
      lk.lock();
      for (const auto& rel : lost) {
        log_warn("lost the lock of " + area + "/" + rel + " to another owner: its encode is cancelled");
        cancel_locked(rel, "lost its lock to another owner");
      }
      next_refresh = Clock::now() + refresh_interval();
      continue;
    }
    keeper_cv.wait_until(lk, next_refresh);
  }
}

void EncodeQueue::Impl::scan_changed(const std::string& rel) {
  if (!valid_rel(rel)) return;
  Fd target;
  if (rel.empty()) {
    target = Fd(::openat(area_fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  } else {
    auto [dir_rel, name] = split_rel(rel);
    auto dir = open_dir_below(area_fd.get(), dir_rel);
    if (!dir.ok()) return;
    struct stat st {};
    if (::fstatat(dir->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
    if (S_ISREG(st.st_mode)) {
      if (!is_candidate_rel(rel)) return;
      std::lock_guard<std::mutex> lk(mu);
      auto f = failed.find(rel);
      if (f == failed.end() || f->second != FileId::of(st))
        enqueue_locked(rel, Clock::now() + opt.quiet, static_cast<uint64_t>(st.st_size));
      return;
    }
    if (!S_ISDIR(st.st_mode) || is_queue_internal_name(name)) return;
    target = Fd(::openat(dir->get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  }
  if (!target.valid()) return;
  (void)walk(target.get(), rel, 0, [&](int dirfd, const std::string& rel_dir, const std::vector<DirEnt>& ents) {
    for (const DirEnt& e : ents) {
      if (e.type != DT_REG || !is_candidate_name(e.name)) continue;
      struct stat st {};
      if (::fstatat(dirfd, e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
      const std::string r = join_rel(rel_dir, e.name);
      std::lock_guard<std::mutex> lk(mu);
      auto f = failed.find(r);
      if (f == failed.end() || f->second != FileId::of(st))
        enqueue_locked(r, Clock::now() + opt.quiet, static_cast<uint64_t>(st.st_size));
    }
  });
}

// ----------------------------------------------------------------- recovery

void EncodeQueue::Impl::recover_dir(int dirfd, const std::string& rel_dir, const std::vector<DirEnt>& ents,
                                    Status* first) {
  auto note = [&](const Status& s) {
    if (s.ok()) return;
    log_warn("recover: " + s.ToString());
    if (first->ok()) *first = s;
  };
  auto shown = [&](const std::string& name) { return area + "/" + join_rel(rel_dir, name); };
  const size_t lock_len = std::strlen(kLockPrefix);
  std::set<std::string> names;
  for (const DirEnt& e : ents) names.insert(e.name);

  // Locks: remove the stale ones; remember the live ones of other owners.
  std::vector<std::pair<std::string, std::string>> live;  // (file name, owner)
  for (const DirEnt& e : ents) {
    if (e.name.rfind(kLockPrefix, 0) != 0) continue;
    const std::string file = e.name.substr(lock_len);
    {
      // Ours, held now (recover() called on a running queue): live.
      std::lock_guard<std::mutex> lk(mu);
      if (claims.count(join_rel(rel_dir, file))) {
        live.emplace_back(file, me.owner);
        continue;
      }
    }
    auto info = inspect_lock(dirfd, e.name, me);
    if (!info.ok()) {
      if (info.status().code() != Code::kNotFound) note(info.status());
      continue;
    }
    if (!info->stale) {
      live.emplace_back(file, info->body.owner);
      continue;
    }
    auto removed = remove_stale_lock(dirfd, e.name, *info, me);
    if (!removed.ok()) {
      note(removed.status());
    } else if (*removed) {
      log_info("recover: removed the stale lock " + shown(e.name) + " (" + info->why + ")");
    }
  }
  // Temps: kept only while their file's lock is live and held by their owner.
  for (const DirEnt& e : ents) {
    if (e.name.rfind(kTempPrefix, 0) != 0) continue;
    bool keep = false;
    for (const auto& [file, owner] : live) {
      if (owner.empty()) continue;
      const std::string t = temp_name(file, owner);
      if (e.name == t || e.name == t + kDecodeTempSuffix) keep = true;
    }
    if (keep) continue;
    if (e.type == DT_DIR) continue;  // not something we made; leave it
    Status s = unlink_if_exists(dirfd, e.name, shown(e.name));
    note(s);
    if (s.ok()) log_info("recover: removed the unfinished temporary file " + shown(e.name));
  }
  // Locks moved aside by an interrupted takeover.
  for (const DirEnt& e : ents) {
    if (e.name.rfind(kStalePrefix, 0) != 0 || e.type == DT_DIR) continue;
    note(unlink_if_exists(dirfd, e.name, shown(e.name)));
  }
  // Both X.safetensors and X.wcodec: keep the one the user wrote last.
  for (const DirEnt& e : ents) {
    if (e.type != DT_REG || !is_candidate_name(e.name) || !names.count(encoded_name(e.name))) continue;
    resolve_both(dirfd, rel_dir, e.name);
  }
  // Queue every plain candidate.
  const auto now = Clock::now();
  for (const DirEnt& e : ents) {
    if (e.type != DT_REG || !is_candidate_name(e.name)) continue;
    struct stat st {};
    if (::fstatat(dirfd, e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    std::lock_guard<std::mutex> lk(mu);
    enqueue_locked(join_rel(rel_dir, e.name), now, static_cast<uint64_t>(st.st_size));
  }
}

void EncodeQueue::Impl::resolve_both(int dirfd, const std::string& rel_dir, const std::string& name) {
  const std::string rel = join_rel(rel_dir, name);
  const StagingCodec& codec = *codec_for(name);
  const std::string wname = codec.encoded_name(name);
  const std::string shown = area + "/" + rel;
  const std::string dir_what = rel_dir.empty() ? "." : rel_dir;
  auto claim = acquire_claim(rel, dirfd, name);
  if (!claim.ok()) {
    log_warn("recover: " + claim.status().ToString());
    return;
  }
  if (!claim->ref.held()) return;  // another owner is at work on it
  struct stat pst {}, wst {};
  auto pf = open_regular(dirfd, name, &pst);
  auto wf = open_regular(dirfd, wname, &wst);
  if (!pf.ok() || !wf.ok()) return;
  auto sha = sha256_fd(pf->get(), rel);
  if (!sha.ok()) {
    log_warn("recover: " + sha.status().ToString());
    return;
  }
  bool same = false;
  std::string why;
  {
    const std::string wrel = join_rel(rel_dir, wname);
    auto info = codec.inspect(wf->get(), wrel);
    if (!info.ok()) {
      why = info.status().ToString();
    } else if (info->original_size != static_cast<uint64_t>(pst.st_size) || info->original_sha256 != *sha) {
      why = "it holds other content";
    } else {
      const Status v = codec.verify(wf->get(), wrel);
      same = v.ok();
      if (!same) why = v.ToString();
    }
  }
  struct stat now_st {};
  if (same) {
    if (::fstatat(dirfd, name.c_str(), &now_st, AT_SYMLINK_NOFOLLOW) != 0 || FileId::of(now_st) != FileId::of(pst))
      return;  // changed meanwhile: the plain file stays and is queued
    (void)copy_metadata(wf->get(), pst, wname);  // the plain file's metadata is the latest
    (void)fsync_fd(wf->get(), wname);
    if (::unlinkat(dirfd, name.c_str(), 0) != 0 && errno != ENOENT) {
      log_warn("recover: " + from_errno(errno, "unlink " + shown).ToString());
      return;
    }
    (void)fsync_fd(dirfd, dir_what);
    log_info("recover: removed " + shown + ": " + wname + " holds the same bytes");
  } else {
    if (::fstatat(dirfd, wname.c_str(), &now_st, AT_SYMLINK_NOFOLLOW) != 0 || now_st.st_ino != wst.st_ino) return;
    if (::unlinkat(dirfd, wname.c_str(), 0) != 0 && errno != ENOENT) {
      log_warn("recover: " + from_errno(errno, "unlink " + area + "/" + join_rel(rel_dir, wname)).ToString());
      return;
    }
    (void)fsync_fd(dirfd, dir_what);
    log_info("recover: removed " + area + "/" + join_rel(rel_dir, wname) + ": it does not hold the bytes of " + name +
             ", which was written last (" + why + ")");
  }
}

// ----------------------------------------------------------------- public

Result<std::unique_ptr<EncodeQueue>> EncodeQueue::create(const std::string& area, EncodeQueueOptions options) {
  const int n = g_queues.fetch_add(1) + 1;
  const bool default_owner = options.owner_id.empty();
  if (default_owner) options.owner_id = default_owner_id(n);
  if (options.owner_id.size() > kMaxOwnerId || options.owner_id.find('/') != std::string::npos ||
      options.owner_id.find('\0') != std::string::npos)
    return Status::Invalid("owner id \"" + options.owner_id + "\": at most " + std::to_string(kMaxOwnerId) +
                           " characters, no '/'");
  if (options.threads == 0) options.threads = 1;
  char* real = ::realpath(area.c_str(), nullptr);
  if (!real) return from_errno(errno, "area " + area);
  std::string abs(real);
  std::free(real);
  Fd fd(::open(abs.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return from_errno(errno, "open area " + abs);

  std::unique_ptr<EncodeQueue> q(new EncodeQueue());
  q->impl_ = std::make_shared<Impl>();
  Impl& im = *q->impl_;
  im.area = std::move(abs);
  im.area_fd = std::move(fd);
  im.me.owner = options.owner_id;
  im.me.host = this_host();
  im.me.boot_id = this_boot_id();
  im.me.pid = ::getpid();
  im.me.stale = options.lock_stale;
  im.queue_number = n;
  im.default_owner = default_owner;
  im.opt = std::move(options);
  if (im.opt.kinds.empty()) im.opt.kinds = default_kinds();
  return q;
}

void EncodeQueue::Impl::refresh_identity() {
  // A daemon creates its queue before it forks into the background: the
  // pid in lock bodies (and a default owner id, which embeds it) must be
  // the process that holds the locks, or other daemons judge them stale.
  if (me.pid == ::getpid()) return;
  me.pid = ::getpid();
  if (default_owner) {
    me.owner = default_owner_id(queue_number);
    opt.owner_id = me.owner;
  }
}

EncodeQueue::~EncodeQueue() {
  if (impl_) stop();
}

Status EncodeQueue::recover() {
  Impl& im = *impl_;
  {
    std::lock_guard<std::mutex> lk(im.mu);
    if (!im.started) im.refresh_identity();
  }
  Status first;
  Status walked = walk(im.area_fd.get(), "", 0, [&](int dirfd, const std::string& rel_dir, const std::vector<DirEnt>& ents) {
    im.recover_dir(dirfd, rel_dir, ents, &first);
  });
  {
    std::lock_guard<std::mutex> lk(im.mu);
    im.work_cv.notify_all();
  }
  if (!first.ok()) return first;
  return walked;
}

void EncodeQueue::start() {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lk(im.mu);
  if (im.started) return;
  im.refresh_identity();
  im.started = true;
  im.stopping = false;
  for (unsigned i = 0; i < im.opt.threads; ++i) im.workers.emplace_back([&im] { im.worker_main(); });
  im.keeper = std::thread([&im] { im.keeper_main(); });
}

void EncodeQueue::stop() {
  Impl& im = *impl_;
  std::vector<std::thread> workers;
  std::thread keeper;
  {
    std::lock_guard<std::mutex> lk(im.mu);
    if (!im.started || im.stopping) return;
    im.stopping = true;
    ++im.stop_gen;
    im.cancel_locked("", "stopped");
    workers.swap(im.workers);
    keeper.swap(im.keeper);
    im.work_cv.notify_all();
    im.state_cv.notify_all();
    im.keeper_cv.notify_all();
  }
  for (auto& t : workers) t.join();
  if (keeper.joinable()) keeper.join();
  std::lock_guard<std::mutex> lk(im.mu);
  im.started = false;
  im.stopping = false;
}

Status EncodeQueue::drain(bool now) {
  Impl& im = *impl_;
  std::unique_lock<std::mutex> lk(im.mu);
  if (!im.started || im.stopping) return Status::Invalid("drain: the encode queue of " + im.area + " is not running");
  const uint64_t gen = im.stop_gen;
  if (now) ++im.drain_now;
  im.work_cv.notify_all();
  im.state_cv.wait(lk, [&] { return im.stop_gen != gen || im.idle_locked(); });
  if (now) --im.drain_now;
  if (im.stop_gen != gen) return Status::Invalid("drain: the encode queue of " + im.area + " was stopped");
  return Status::OK();
}

void EncodeQueue::opened_for_write(const std::string& rel) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lk(im.mu);
  ++im.writers[rel];
  im.cancel_locked(rel, "opened for writing");
  if (im.is_candidate_rel(rel)) im.enqueue_locked(rel, Clock::now() + im.opt.quiet, 0);
}

void EncodeQueue::closed_for_write(const std::string& rel) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lk(im.mu);
  auto it = im.writers.find(rel);
  if (it != im.writers.end() && --it->second <= 0) im.writers.erase(it);
  const auto due = Clock::now() + im.opt.quiet;
  im.touch_locked(rel, due);
  if (im.is_candidate_rel(rel)) im.enqueue_locked(rel, due, 0);
  im.work_cv.notify_all();
  im.state_cv.notify_all();
}

void EncodeQueue::changed(const std::string& rel) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lk(im.mu);
  const auto due = Clock::now() + im.opt.quiet;
  im.cancel_locked(rel, "changed");
  im.touch_locked(rel, due);
  if (im.is_candidate_rel(rel)) im.enqueue_locked(rel, due, 0);
  im.rescan.push_back(rel);
  im.keeper_cv.notify_all();
  im.work_cv.notify_all();
}

EncodeQueue::Hold EncodeQueue::hold(const std::string& rel) {
  Impl& im = *impl_;
  Hold h;
  std::unique_lock<std::mutex> lk(im.mu);
  im.state_cv.wait(lk, [&] {
    for (const auto& s : im.swapping)
      if (covers(rel, s)) return false;
    return true;
  });
  im.holds.insert(rel);
  im.cancel_locked(rel, "held by a change");
  h.token_ = std::make_shared<Hold::Token>(impl_, rel);
  return h;
}

Status EncodeQueue::materialize(const std::string& rel, const Hold& held, bool empty) {
  Impl& im = *impl_;
  if (!held.valid() || held.token_->impl != impl_ || !covers(held.path(), rel))
    return Status::Invalid("materialize " + rel + ": the caller must hold it");
  if (!im.is_candidate_rel(rel)) return Status::Invalid("materialize " + rel + ": not an encodable file name");
  auto [dir_rel, name] = split_rel(rel);
  WCFS_ASSIGN_OR_RETURN(Fd dir, open_dir_below(im.area_fd.get(), dir_rel));
  const int dfd = dir.get();
  const StagingCodec& codec = *im.codec_for(name);
  const std::string wname = codec.encoded_name(name);
  const std::string dir_what = dir_rel.empty() ? "." : dir_rel;
  struct stat st {};
  if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return Status::OK();  // the plain file wins
  struct stat wst {};
  auto wf_or = open_regular(dfd, wname, &wst);
  if (!wf_or.ok()) {
    if (wf_or.status().code() == Code::kNotFound) return Status::NotFound(rel + ": neither a plain nor an encoded file");
    return wf_or.status();
  }
  const Fd wf = std::move(wf_or).value();

  // The file's lock: the same protocol as an encode, so no other owner
  // encodes or materializes it meanwhile.
  const auto deadline = Clock::now() + std::max(std::chrono::milliseconds(100), im.opt.lock_stale / 4);
  Impl::ClaimResult claim;
  for (;;) {
    WCFS_ASSIGN_OR_RETURN(claim, im.acquire_claim(rel, dfd, name));
    if (claim.ref.held()) break;
    if (Clock::now() >= deadline)
      return Status::IOError("materialize " + rel + ": busy, locked by " +
                             (claim.holder.body.valid ? claim.holder.body.owner : std::string("another owner")));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return Status::OK();

  const std::string tmp = temp_name(name, im.me.owner) + kDecodeTempSuffix;
  WCFS_RETURN_IF_ERROR(unlink_if_exists(dfd, tmp, tmp));
  Fd tf(::openat(dfd, tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!tf.valid()) return from_errno(errno, "create " + join_rel(dir_rel, tmp));
  TempGuard temp_guard(dfd, tmp);
  uint64_t size = 0;
  if (!empty) {
    const std::string wrel = join_rel(dir_rel, wname);
    WCFS_ASSIGN_OR_RETURN(const EncodedInfo info, codec.inspect(wf.get(), wrel));
    size = info.original_size;
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) return Status::Internal("SHA-256 unavailable");
    uint64_t written = 0;
    WCFS_RETURN_IF_ERROR(codec.decode(wf.get(), wrel, [&](const uint8_t* p, size_t n) {
      EVP_DigestUpdate(ctx.get(), p, n);
      written += n;
      return write_all(tf.get(), p, n, tmp);
    }));
    std::array<uint8_t, 32> md{};
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx.get(), md.data(), &len);
    if (written != info.original_size || md != info.original_sha256)
      return Status::Corruption(im.area + "/" + wrel + ": the decoded bytes do not have the recorded SHA-256");
  }
  // Truncated content is new content: its times are now.
  WCFS_RETURN_IF_ERROR(copy_metadata(tf.get(), wst, tmp, /*times_too=*/!empty));
  WCFS_RETURN_IF_ERROR(fsync_fd(tf.get(), tmp));
  if (::renameat2(dfd, tmp.c_str(), dfd, name.c_str(), RENAME_NOREPLACE) != 0) {
    if (errno == EEXIST) return Status::OK();  // a plain file appeared: it wins
    if (errno != EINVAL && errno != ENOSYS) return from_errno(errno, "rename " + tmp + " to " + rel);
    // The filesystem has no RENAME_NOREPLACE (we hold the lock and checked above).
    if (::renameat(dfd, tmp.c_str(), dfd, name.c_str()) != 0) return from_errno(errno, "rename " + tmp + " to " + rel);
  }
  temp_guard.disarm();
  WCFS_RETURN_IF_ERROR(fsync_fd(dfd, dir_what));
  struct stat now_st {};
  if (::fstatat(dfd, wname.c_str(), &now_st, AT_SYMLINK_NOFOLLOW) == 0 && now_st.st_ino == wst.st_ino) {
    if (::unlinkat(dfd, wname.c_str(), 0) != 0 && errno != ENOENT)
      return from_errno(errno, "unlink " + join_rel(dir_rel, wname));
    WCFS_RETURN_IF_ERROR(fsync_fd(dfd, dir_what));
  }
  {
    std::lock_guard<std::mutex> lk(im.mu);
    im.failed.erase(rel);
    im.enqueue_locked(rel, Clock::now() + im.opt.quiet, size);
    im.work_cv.notify_all();
  }
  return Status::OK();
}

EncodeQueueStats EncodeQueue::stats() const {
  const Impl& im = *impl_;
  EncodeQueueStats s;
  std::lock_guard<std::mutex> lk(im.mu);
  s.pending = im.pending.size();
  s.encoding = im.running.size();
  s.done = im.n_done;
  s.failed = im.n_failed;
  s.cancelled = im.n_cancelled;
  s.bytes_in = im.bytes_in;
  s.bytes_out = im.bytes_out;
  s.seconds = im.seconds;
  for (const auto& [rel, job] : im.running) {
    EncodeQueueStats::Item it;
    it.path = rel;
    it.state = "encoding";
    it.size = job->size;
    s.recent.push_back(std::move(it));
  }
  for (const auto& [rel, p] : im.pending) {
    EncodeQueueStats::Item it;
    it.path = rel;
    it.state = "pending";
    it.size = p.size;
    s.recent.push_back(std::move(it));
  }
  s.recent.insert(s.recent.end(), im.history.begin(), im.history.end());
  return s;
}

const std::string& EncodeQueue::area() const { return impl_->area; }

}  // namespace wcodecfs
