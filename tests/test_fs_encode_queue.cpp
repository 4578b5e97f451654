// tests/test_fs_encode_queue.cpp — wcodecfs::EncodeQueue on real model files:
// in-place encoding of a tree (what is encoded, what is left alone, metadata
// kept), the quiet period, writers, cancellation by changes and by Holds,
// stop(), crash recovery from every constructed on-disk state and from real
// crashes (a forked child killed at each point of an encode), two owners on
// one directory, stale lock takeover, materialize, and `wcodec encode STORE`
// / `wcodec status` as subprocesses.
//
// Protocol under test: docs/staging.md.
// Thread-safety: test code; hooks run on queue workers and use atomics or a
// mutex.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fs_view_testutil.h"
#include "testutil.h"
#include "wcodec/container.h"
#include "wcodecfs/encode_queue.h"
#include "wcodecfs/fs_log.h"

using namespace wcodecfs;
namespace sfs = std::filesystem;
using std::chrono::milliseconds;

namespace {

// Small real models (../shared/data/README.md), smallest first.
const char* const kTernary = "stories260K.rtn-ternary.safetensors";  // 155 KiB
const char* const kInt4 = "stories260K.rtn-int4.safetensors";        // 235 KiB
const char* const kInt8 = "stories260K.rtn-int8.safetensors";        // 330 KiB
const char* const kBf16 = "stories260K.bf16.safetensors";            // 513 KiB
const char* const kSilero = "silero_vad_16k.bf16.safetensors";       // 606 KiB

const std::vector<uint8_t>& model(const char* name) {
  static std::mutex mu;
  static std::map<std::string, std::vector<uint8_t>> cache;
  std::lock_guard<std::mutex> lk(mu);
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, wctest::read_file(wctest::data_dir() / name)).first;
  return it->second;
}

// Writes `bytes` to `p` (creating directories), with mode `mode`.
void put(const sfs::path& p, const std::vector<uint8_t>& bytes, mode_t mode = 0644) {
  sfs::create_directories(p.parent_path());
  wctest::write_file(p, bytes);
  ASSERT_EQ(::chmod(p.c_str(), mode), 0);
}

void set_mtime(const sfs::path& p, time_t sec, long nsec) {
  struct timespec t[2] = {{sec, nsec}, {sec, nsec}};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), t, AT_SYMLINK_NOFOLLOW), 0);
}

sfs::path encoded_of(const sfs::path& plain) {
  sfs::path p = plain;
  p.replace_extension(".wcodec");
  return p;
}

// SHA-256 (hex) of the original bytes a container decodes to; "" on error.
std::string decoded_sha(const sfs::path& container) {
  auto rd = wcodec::Reader::open(container.string());
  if (!rd.ok()) {
    ADD_FAILURE() << container << ": " << rd.status().ToString();
    return "";
  }
  std::vector<uint8_t> buf((*rd)->original_size());
  wcodec::Status st = (*rd)->read(0, buf.size(), buf.data());
  if (!st.ok()) {
    ADD_FAILURE() << container << ": " << st.ToString();
    return "";
  }
  return wctest::sha256_hex(buf);
}

std::string sha_of(const char* name) { return wctest::sha256_hex(model(name)); }

// Every name below `root` that begins with ".wcodecfs-".
std::vector<std::string> internal_names(const sfs::path& root) {
  std::vector<std::string> out;
  for (auto& e : sfs::recursive_directory_iterator(root))
    if (e.path().filename().string().rfind(".wcodecfs-", 0) == 0) out.push_back(sfs::relative(e.path(), root).string());
  return out;
}

bool exists_nofollow(const sfs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

EncodeQueueOptions test_options(const std::string& owner = "test-owner") {
  EncodeQueueOptions o;
  o.quiet = milliseconds(0);
  o.threads = 1;
  o.low_priority = false;  // the test machine is shared; do not starve ourselves
  o.owner_id = owner;
  o.codec.tool_search = false;  // the container is the same format; keeps ASan runs short
  return o;
}

std::unique_ptr<EncodeQueue> make_queue(const sfs::path& area, EncodeQueueOptions o) {
  auto q = EncodeQueue::create(area.string(), std::move(o));
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  return q.ok() ? std::move(q).value() : nullptr;
}

// Runs a queue over `area` until everything is encoded.
void encode_all(const sfs::path& area, EncodeQueueOptions o) {
  auto q = make_queue(area, std::move(o));
  ASSERT_TRUE(q);
  ASSERT_TRUE(q->recover().ok());
  q->start();
  ASSERT_TRUE(q->drain(true).ok());
  q->stop();
}

// A lock file as another owner would leave it.
void put_lock(const sfs::path& dir, const std::string& file, const std::string& owner, const std::string& boot_id,
              int64_t pid, time_t age_seconds = 0) {
  nlohmann::json j = {{"owner", owner}, {"host", "elsewhere"}, {"boot_id", boot_id}, {"pid", pid}};
  const sfs::path p = dir / (".wcodecfs-lock." + file);
  const std::string s = j.dump();
  put(p, std::vector<uint8_t>(s.begin(), s.end()));
  if (age_seconds) set_mtime(p, ::time(nullptr) - age_seconds, 0);
}

// Sets mtime to now (a holder refreshing its lock).
void touch(const sfs::path& p) {
  struct timespec t[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), t, AT_SYMLINK_NOFOLLOW), 0);
}

std::string boot_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  f >> id;
  return id;
}

// A pid that is not running (a child that has been reaped).
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return pid;
}

// A one-shot gate a hook waits on.
class Gate {
 public:
  void open() {
    std::lock_guard<std::mutex> lk(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return open_; });
  }
  bool wait_for(milliseconds d) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, d, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// ------------------------------------------------------------------ names

TEST(EncodeQueue, InternalNames) {
  EXPECT_TRUE(is_queue_internal_name(".wcodecfs-lock.a.safetensors"));
  EXPECT_TRUE(is_queue_internal_name(".wcodecfs-tmp.a.safetensors.host.1"));
  EXPECT_TRUE(is_queue_internal_name(".wcodecfs-staging"));
  EXPECT_FALSE(is_queue_internal_name(".wcodecfs"));
  EXPECT_FALSE(is_queue_internal_name("a.wcodecfs-lock"));
  EXPECT_FALSE(is_queue_internal_name("model.safetensors"));
}

TEST(EncodeQueue, CreateRejectsBadArguments) {
  wctest::ScratchDir dir;
  EXPECT_FALSE(EncodeQueue::create((dir / "missing").string(), test_options()).ok());
  EXPECT_FALSE(EncodeQueue::create(dir.path().string(), test_options("a/b")).ok());
  auto q = EncodeQueue::create(dir.path().string(), test_options());
  ASSERT_TRUE(q.ok());
  EXPECT_EQ((*q)->area(), sfs::canonical(dir.path()).string());
  EXPECT_FALSE((*q)->drain(true).ok()) << "drain before start must fail, not block";
}

// ------------------------------------------------------------------ a whole tree

TEST(EncodeQueue, EncodesTreeInPlaceAndLeavesOthersAlone) {
  wctest::ScratchDir dir;
  const sfs::path area = dir / "area", outside = dir / "outside";
  struct F {
    const char* rel;
    const char* model;
    mode_t mode;
  };
  const std::vector<F> files = {{"a.safetensors", kTernary, 0640},
                                {"sub/b.safetensors", kInt4, 0600},
                                {"sub/deeper/c.safetensors", kSilero, 0444}};
  for (const auto& f : files) {
    put(area / f.rel, model(f.model), f.mode);
    set_mtime(area / f.rel, 1000000000, 123456789);
  }
  put(area / "notes.txt", {'h', 'i', '\n'});
  put(area / "bad.safetensors", {'n', 'o', 't', ' ', 'a', ' ', 'm', 'o', 'd', 'e', 'l'});
  put(area / "x.gguf.safetensors", model(kTernary));  // would vanish from the mount once encoded: left plain
  put(area / ".wcodecfs-staging" / "inner.safetensors", model(kTernary));  // internal: never entered
  put(outside / "o.safetensors", model(kTernary));
  sfs::create_symlink(outside / "o.safetensors", area / "link.safetensors");
  sfs::create_directory_symlink(outside, area / "linkdir");

  fsview::LogLines log;
  auto q = make_queue(area, test_options());
  ASSERT_TRUE(q);
  ASSERT_TRUE(q->recover().ok());
  q->start();
  ASSERT_TRUE(q->drain(true).ok());

  for (const auto& f : files) {
    SCOPED_TRACE(f.rel);
    const sfs::path plain = area / f.rel, enc = encoded_of(plain);
    EXPECT_FALSE(exists_nofollow(plain));
    ASSERT_TRUE(sfs::exists(enc));
    EXPECT_EQ(decoded_sha(enc), sha_of(f.model));
    struct stat st {};
    ASSERT_EQ(::stat(enc.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, f.mode);
    EXPECT_EQ(st.st_mtim.tv_sec, 1000000000);
    EXPECT_EQ(st.st_mtim.tv_nsec, 123456789);
    EXPECT_EQ(st.st_uid, ::getuid());
    EXPECT_EQ(log.count("encoded " + q->area() + "/" + f.rel + ": "), 1) << log.all();
  }
  EXPECT_EQ(wctest::read_file(area / "notes.txt"), (std::vector<uint8_t>{'h', 'i', '\n'}));
  EXPECT_TRUE(sfs::exists(area / "bad.safetensors"));
  EXPECT_TRUE(sfs::exists(area / "x.gguf.safetensors"));
  EXPECT_TRUE(sfs::exists(area / ".wcodecfs-staging" / "inner.safetensors"));
  EXPECT_TRUE(sfs::is_symlink(area / "link.safetensors"));
  EXPECT_EQ(wctest::read_file(outside / "o.safetensors"), model(kTernary)) << "a symlink was followed";
  EXPECT_FALSE(sfs::exists(outside / "o.wcodec"));
  EXPECT_EQ(log.count("not encoded (stays plain): " + q->area() + "/bad.safetensors"), 1) << log.all();
  std::vector<std::string> internal = internal_names(area);
  EXPECT_EQ(internal, std::vector<std::string>{".wcodecfs-staging"});

  EncodeQueueStats s = q->stats();
  EXPECT_EQ(s.done, 3u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_EQ(s.pending, 0u);
  EXPECT_EQ(s.encoding, 0u);
  uint64_t in = 0;
  for (const auto& f : files) in += model(f.model).size();
  EXPECT_EQ(s.bytes_in, in);
  EXPECT_GT(s.bytes_in, s.bytes_out);
  EXPECT_GT(s.seconds, 0.0);
  int done_items = 0, failed_items = 0;
  for (const auto& it : s.recent) {
    if (it.state == "done") {
      ++done_items;
      EXPECT_GT(it.encoded, 0u);
    }
    if (it.state == "failed") {
      ++failed_items;
      EXPECT_EQ(it.path, "bad.safetensors");
      EXPECT_FALSE(it.error.empty());
    }
  }
  EXPECT_EQ(done_items, 3);
  EXPECT_EQ(failed_items, 1);

  // An invalid file is not retried while unchanged, even when its directory
  // is reported changed; it is once it changed.
  q->changed("");
  ASSERT_TRUE(q->drain(true).ok());
  EXPECT_EQ(q->stats().failed, 1u);
  put(area / "bad.safetensors", {'s', 't', 'i', 'l', 'l', ' ', 'n', 'o', 't'});
  q->changed("bad.safetensors");
  ASSERT_TRUE(q->drain(true).ok());
  EXPECT_EQ(q->stats().failed, 2u);
  EXPECT_TRUE(sfs::exists(area / "bad.safetensors"));
  q->stop();
}

TEST(EncodeQueue, ChangedDirectoryIsScanned) {
  wctest::ScratchDir dir;
  auto q = make_queue(dir.path(), test_options());
  ASSERT_TRUE(q);
  ASSERT_TRUE(q->recover().ok());
  q->start();
  put(dir / "new" / "deep" / "m.safetensors", model(kTernary));
  q->changed("new");  // e.g. a directory renamed into place
  ASSERT_TRUE(q->drain(true).ok());
  EXPECT_EQ(decoded_sha(dir / "new" / "deep" / "m.wcodec"), sha_of(kTernary));
  EXPECT_FALSE(sfs::exists(dir / "new" / "deep" / "m.safetensors"));
}

// ------------------------------------------------------------------ scheduling

TEST(EncodeQueue, QuietPeriodIsRespected) {
  wctest::ScratchDir dir;
  EncodeQueueOptions o = test_options();
  o.quiet = milliseconds(900);
  auto q = make_queue(dir.path(), o);
  ASSERT_TRUE(q);
  q->start();
  const sfs::path plain = dir / "m.safetensors";
  put(plain, model(kTernary));
  const auto t0 = std::chrono::steady_clock::now();
  q->changed("m.safetensors");
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_TRUE(sfs::exists(plain)) << "encoded before the quiet period ended";
  EXPECT_EQ(q->stats().pending, 1u);
  // Another change restarts the period.
  q->changed("m.safetensors");
  const auto t1 = std::chrono::steady_clock::now();
  ASSERT_TRUE(q->drain().ok());
  const double since_last = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  const double since_first = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(since_last, 0.85);
  EXPECT_GE(since_first, 1.25);
  EXPECT_FALSE(sfs::exists(plain));
  EXPECT_EQ(decoded_sha(encoded_of(plain)), sha_of(kTernary));
}

TEST(EncodeQueue, RecoverWaitsForRecentlyChangedFiles) {
  // A file written just now (by another host, say: no report reaches us)
  // waits for the quiet period by its ctime.
  wctest::ScratchDir dir;
  EncodeQueueOptions o = test_options();
  o.quiet = milliseconds(800);
  put(dir / "m.safetensors", model(kTernary));
  const auto t0 = std::chrono::steady_clock::now();
  auto q = make_queue(dir.path(), o);
  ASSERT_TRUE(q);
  ASSERT_TRUE(q->recover().ok());
  q->start();
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_TRUE(sfs::exists(dir / "m.safetensors"));
  ASSERT_TRUE(q->drain().ok());
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.75);
  EXPECT_EQ(decoded_sha(dir / "m.wcodec"), sha_of(kTernary));
}

TEST(EncodeQueue, OpenWriterBlocksEncoding) {
  wctest::ScratchDir dir;
  auto q = make_queue(dir.path(), test_options());
  ASSERT_TRUE(q);
  q->start();
  const sfs::path plain = dir / "w.safetensors";
  q->opened_for_write("w.safetensors");
  put(plain, model(kInt4));
  q->changed("w.safetensors");
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_TRUE(sfs::exists(plain)) << "encoded while a writer had it open";
  EXPECT_EQ(q->stats().pending, 1u);
  ASSERT_TRUE(q->drain(true).ok()) << "drain does not wait for files with a writer open";
  EXPECT_TRUE(sfs::exists(plain));
  q->opened_for_write("w.safetensors");  // a second writer
  q->closed_for_write("w.safetensors");
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_TRUE(sfs::exists(plain)) << "encoded while the second writer had it open";
  q->closed_for_write("w.safetensors");
  ASSERT_TRUE(q->drain(true).ok());
  EXPECT_FALSE(sfs::exists(plain));
  EXPECT_EQ(decoded_sha(encoded_of(plain)), sha_of(kInt4));
}

// ------------------------------------------------------------------ cancellation

// The plain file is rewritten at `point` of the first encode; with `report`
// the filesystem's change report arrives too, else only the file's identity
// shows it. Either way the old content is never swapped in and the new
// content is encoded afterwards.
void change_during_encode(const char* point, bool report) {
  wctest::ScratchDir dir;
  const sfs::path plain = dir / "m.safetensors";
  put(plain, model(kTernary));
  std::atomic<int> hits{0};
  EncodeQueue* qp = nullptr;
  EncodeQueueOptions o = test_options();
  o.hook = [&](const char* p, const std::string& rel) {
    if (std::strcmp(p, point) != 0 || hits++ != 0) return;
    wctest::write_file(plain, model(kInt8));
    if (report) qp->changed(rel);
  };
  auto q = make_queue(dir.path(), o);
  ASSERT_TRUE(q);
  qp = q.get();
  ASSERT_TRUE(q->recover().ok());
  q->start();
  ASSERT_TRUE(q->drain(true).ok());
  q->stop();
  EXPECT_EQ(hits.load(), 2) << "the hook point was reached once per encode";
  EXPECT_FALSE(sfs::exists(plain));
  EXPECT_EQ(decoded_sha(encoded_of(plain)), sha_of(kInt8)) << "the last written content is what is stored";
  const EncodeQueueStats s = q->stats();
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.done, 1u);
  EXPECT_TRUE(internal_names(dir.path()).empty());
}

TEST(EncodeQueue, ChangeAfterTempWrittenCancels) { change_during_encode("temp-written", true); }
TEST(EncodeQueue, ChangeAfterVerifiedCancels) { change_during_encode("verified", true); }
TEST(EncodeQueue, UnreportedChangeAfterVerifiedIsDetected) { change_during_encode("verified", false); }
TEST(EncodeQueue, UnreportedChangeAfterLockedIsDetected) { change_during_encode("locked", false); }

// A Hold taken while an encode is between verify and swap cancels it; while
// held, nothing is swapped; after release the file is encoded.
void hold_blocks_swap(const std::string& held_path) {
  wctest::ScratchDir dir;
  const sfs::path plain = dir / "sub" / "m.safetensors";
  put(plain, model(kTernary));
  Gate reached, go;
  std::atomic<int> hits{0};
  EncodeQueueOptions o = test_options();
  o.hook = [&](const char* p, const std::string&) {
    if (std::strcmp(p, "verified") != 0 || hits++ != 0) return;
    reached.open();
    go.wait();
  };
  auto q = make_queue(dir.path(), o);
  ASSERT_TRUE(q);
  ASSERT_TRUE(q->recover().ok());
  q->start();
  ASSERT_TRUE(reached.wait_for(std::chrono::seconds(60)));
  {
    EncodeQueue::Hold h = q->hold(held_path);
    EXPECT_TRUE(h.valid());
    EXPECT_EQ(h.path(), held_path);
    go.open();
    std::this_thread::sleep_for(milliseconds(400));
    EXPECT_TRUE(sfs::exists(plain)) << "swapped while held";
    EXPECT_FALSE(sfs::exists(encoded_of(plain)));
    EXPECT_EQ(q->stats().cancelled, 1u);
    EXPECT_EQ(hits.load(), 1) << "an encode started while the path was held";
    EncodeQueue::Hold moved = std::move(h);
    EXPECT_TRUE(moved.valid());
    EXPECT_FALSE(h.valid());  // NOLINT(bugprone-use-after-move): moved-from Holds hold nothing
  }
  ASSERT_TRUE(q->drain(true).ok());
  EXPECT_FALSE(sfs::exists(plain));
  EXPECT_EQ(decoded_sha(encoded_of(plain)), sha_of(kTernary));
  EXPECT_TRUE(internal_names(dir.path()).empty());
}

TEST(EncodeQueue, HoldOnFileBlocksSwap) { hold_blocks_swap("sub/m.safetensors"); }
TEST(EncodeQueue, HoldOnDirectoryBlocksSwap) { hold_blocks_swap("sub"); }
TEST(EncodeQueue, HoldOnAreaBlocksSwap) { hold_blocks_swap(""); }

TEST(EncodeQueue, HoldOnOtherPathDoesNotBlock) {
  wctest::ScratchDir dir;
  put(dir / "a" / "m.safetensors", model(kTernary));
  auto q = make_queue(dir.path(), test_options());
  ASSERT_TRUE(q);
  EncodeQueue::Hold h = q->hold("b");
  EncodeQueue::Hold h2 = q->hold("a/m.safetensorsX");  // a sibling name, not a prefix directory
  ASSERT_TRUE(q->recover().ok());
  q->start();
  ASSERT_TRUE(q->drain(true).ok());
  EXPECT_EQ(decoded_sha(dir / "a" / "m.wcodec"), sha_of(kTernary));
}

TEST(EncodeQueue, HoldWaitsForARunningSwap) {
  wctest::ScratchDir dir;
  const sfs::path plain = dir / "m.safetensors";
  put(plain, model(kTernary));
  Gate reached, go;
  EncodeQueueOptions o = test_options();
  o.hook = [&](const char* p, const std::string&) {
    if (std::strcmp(p, "renamed") != 0) return;
    reached.open();
    go.wait();
  };
  auto q = make_queue(dir.path(), o);
  ASSERT_TRUE(q);
  ASSERT_TRUE(q->recover().ok());
  q->start();
  ASSERT_TRUE(reached.wait_for(std::chrono::seconds(60)));
  std::atomic<bool> got{false};
  std::thread t([&] {
    EncodeQueue::Hold h = q->hold("m.safetensors");
    got = true;
    // After the Hold, the swap is complete: the file is in its encoded form.
    EXPECT_FALSE(sfs::exists(plain));
    EXPECT_TRUE(sfs::exists(encoded_of(plain)));
  });
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_FALSE(got.load()) << "hold() returned in the middle of a swap";
  go.open();
  t.join();
  EXPECT_TRUE(got.load());
  ASSERT_TRUE(q->drain(true).ok());
  EXPECT_EQ(q->stats().done, 1u);
}

TEST(EncodeQueue, StopCancelsAndRemovesTheTemp) {
  wctest::ScratchDir dir;
  const sfs::path plain = dir / "m.safetensors";
  put(plain, model(kTernary));
  Gate reached, go;
  EncodeQueueOptions o = test_options();
  o.hook = [&](const char* p, const std::string&) {
    if (std::strcmp(p, "temp-written") != 0) return;
    reached.open();
    go.wait();
  };
  auto q = make_queue(dir.path(), o);
  ASSERT_TRUE(q);
  ASSERT_TRUE(q->recover().ok());
  q->start();
  ASSERT_TRUE(reached.wait_for(std::chrono::seconds(60)));
  EXPECT_EQ(internal_names(dir.path()).size(), 2u) << "lock and temp exist mid-encode";
  std::thread stopper([&] { q->stop(); });
  std::this_thread::sleep_for(milliseconds(100));
  go.open();
  stopper.join();
  EXPECT_TRUE(sfs::exists(plain));
  EXPECT_FALSE(sfs::exists(encoded_of(plain)));
  EXPECT_TRUE(internal_names(dir.path()).empty());
  EXPECT_EQ(q->stats().cancelled, 1u);
  EXPECT_FALSE(q->drain(true).ok()) << "drain of a stopped queue";
  q->start();  // starts again: the file is still queued
  ASSERT_TRUE(q->drain(true).ok());
  EXPECT_EQ(decoded_sha(encoded_of(plain)), sha_of(kTernary));
}

// ------------------------------------------------------------------ recovery

TEST(EncodeQueue, RecoverSettlesEveryCrashState) {
  wctest::ScratchDir dir;
  const sfs::path a = dir / "area";
  const std::string me = "test-owner", boot = boot_id();
  const pid_t dead = dead_pid();
  const std::string f = "m.safetensors";
  auto tmp = [&](const std::string& owner) { return ".wcodecfs-tmp." + f + "." + owner; };
  const std::vector<uint8_t> junk = {1, 2, 3};
  auto encode_to = [&](const char* name, const sfs::path& out) {
    sfs::create_directories(out.parent_path());
    ASSERT_TRUE(wcodec::encode_safetensors_file((wctest::data_dir() / name).string(), out.string(), {}).ok());
  };

  // d1: a temp without a lock (crash of an owner whose lock was removed).
  put(a / "d1" / f, model(kTernary));
  put(a / "d1" / tmp("gone-owner"), junk);
  // d2: lock of a dead process of this boot + its temp.
  put(a / "d2" / f, model(kTernary));
  put_lock(a / "d2", f, "dead-owner", boot, dead);
  put(a / "d2" / tmp("dead-owner"), junk);
  // d3: crash between rename and unlink: both files, same content.
  put(a / "d3" / f, model(kInt4), 0640);
  set_mtime(a / "d3" / f, 1100000000, 0);
  encode_to(kInt4, a / "d3" / "m.wcodec");
  // d4: both files, different content: the plain one was written last.
  put(a / "d4" / f, model(kInt4));
  encode_to(kTernary, a / "d4" / "m.wcodec");
  // d5: lock of a live other owner (this process, another id) + its temp.
  put(a / "d5" / f, model(kTernary));
  put_lock(a / "d5", f, "other-owner", boot, ::getpid());
  put(a / "d5" / tmp("other-owner"), junk);
  put(a / "d5" / tmp("third-owner"), junk);  // not the lock holder's: removed
  // d6: lock of another host not refreshed for an hour, only the container.
  encode_to(kTernary, a / "d6" / "m.wcodec");
  put_lock(a / "d6", f, "far-host", "another-boot", 1, 3600);
  // d7: lock of another host, fresh: live (by its mtime) + its temp.
  put(a / "d7" / f, model(kTernary));
  put_lock(a / "d7", f, "far-host", "another-boot", 1);
  put(a / "d7" / tmp("far-host"), junk);
  // d8: a lock moved aside by an interrupted takeover.
  put(a / "d8" / ".wcodecfs-stale.0123456789abcdef.42", junk);
  // d9: both files, the container records the plain file's SHA-256 but is damaged.
  put(a / "d9" / f, model(kInt8));
  encode_to(kInt8, a / "d9" / "m.wcodec");
  {
    std::vector<uint8_t> c = wctest::read_file(a / "d9" / "m.wcodec");
    c[c.size() / 2] ^= 0x55;
    wctest::write_file(a / "d9" / "m.wcodec", c);
  }
  // d10: a lock left by an earlier run of this very owner id.
  put(a / "d10" / f, model(kTernary));
  put_lock(a / "d10", f, me, "another-boot", 1);
  put(a / "d10" / tmp(me), junk);

  EncodeQueueOptions o = test_options(me);
  o.lock_stale = milliseconds(3000);
  auto q = make_queue(a, o);
  ASSERT_TRUE(q);
  fsview::LogLines log;
  // The live locks are fresh when recovery looks at them, however long the
  // set-up above took (sanitized builds encode slowly).
  for (const char* d : {"d5", "d7"}) touch(a / d / (".wcodecfs-lock." + f));
  ASSERT_TRUE(q->recover().ok());

  auto has = [&](const char* d, const std::string& name) { return exists_nofollow(a / d / name); };
  EXPECT_TRUE(has("d1", f));
  EXPECT_FALSE(has("d1", tmp("gone-owner")));
  EXPECT_TRUE(has("d2", f));
  EXPECT_FALSE(has("d2", ".wcodecfs-lock." + f));
  EXPECT_FALSE(has("d2", tmp("dead-owner")));
  EXPECT_FALSE(has("d3", f));
  EXPECT_EQ(decoded_sha(a / "d3" / "m.wcodec"), sha_of(kInt4));
  {
    struct stat st {};
    ASSERT_EQ(::stat((a / "d3" / "m.wcodec").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0640u) << "the plain file's metadata moves to the container";
    EXPECT_EQ(st.st_mtim.tv_sec, 1100000000);
  }
  EXPECT_TRUE(has("d4", f));
  EXPECT_FALSE(has("d4", "m.wcodec"));
  EXPECT_EQ(wctest::read_file(a / "d4" / f), model(kInt4));
  EXPECT_TRUE(has("d5", f));
  EXPECT_TRUE(has("d5", ".wcodecfs-lock." + f));
  EXPECT_TRUE(has("d5", tmp("other-owner")));
  EXPECT_FALSE(has("d5", tmp("third-owner")));
  EXPECT_FALSE(has("d6", ".wcodecfs-lock." + f));
  EXPECT_TRUE(has("d6", "m.wcodec"));
  EXPECT_TRUE(has("d7", ".wcodecfs-lock." + f));
  EXPECT_TRUE(has("d7", tmp("far-host")));
  EXPECT_TRUE(internal_names(a / "d8").empty());
  EXPECT_TRUE(has("d9", f));
  EXPECT_FALSE(has("d9", "m.wcodec"));
  EXPECT_FALSE(has("d10", ".wcodecfs-lock." + f));
  EXPECT_FALSE(has("d10", tmp(me)));
  EXPECT_GE(log.count("recover: "), 8) << log.all();

  std::set<std::string> pending;
  for (const auto& it : q->stats().recent)
    if (it.state == "pending") pending.insert(it.path);
  EXPECT_EQ(pending, (std::set<std::string>{"d1/" + f, "d10/" + f, "d2/" + f, "d4/" + f, "d5/" + f, "d7/" + f,
                                            "d9/" + f}));

  // The live locks of d5 and d7 go stale once not refreshed for lock_stale;
  // they are then taken over (their temps removed) and everything encodes.
  for (const char* d : {"d5", "d7"}) touch(a / d / (".wcodecfs-lock." + f));
  const auto t0 = std::chrono::steady_clock::now();
  q->start();
  ASSERT_TRUE(q->drain(true).ok());
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0)
      << "a live lock was taken over early";  // 3 s after the touch
  q->stop();
  EXPECT_GE(q->stats().cancelled, 2u) << "files locked by a live owner count as cancelled while they wait";
  EXPECT_EQ(log.count("took over the stale lock"), 2) << log.all();
  const std::map<std::string, const char*> expect = {{"d1", kTernary}, {"d2", kTernary}, {"d3", kInt4},
                                                     {"d4", kInt4},    {"d5", kTernary}, {"d6", kTernary},
                                                     {"d7", kTernary}, {"d9", kInt8},    {"d10", kTernary}};
  for (const auto& [d, m] : expect) {
    SCOPED_TRACE(d);
    EXPECT_FALSE(has(d.c_str(), f));
    EXPECT_EQ(decoded_sha(a / d / "m.wcodec"), sha_of(m));
  }
  EXPECT_TRUE(internal_names(a).empty());
}

// A real crash: a child process runs a queue and dies at `point` of the
// first encode; the parent checks the state on disk, recovers, and every file
// ends up encoded with its original bytes.
void crash_at(const char* point, bool sigkill) {
  wctest::ScratchDir dir;
  const sfs::path a = dir / "area";
  struct F {
    const char* rel;
    const char* model;
  };
  const std::vector<F> files = {{"one.safetensors", kTernary}, {"sub/two.safetensors", kInt4}};
  for (const auto& f : files) put(a / f.rel, model(f.model));
  const std::string died = a / ".died";  // the child writes the path it died on

  fflush(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    EncodeQueueOptions o = test_options("child-owner");
    o.hook = [&](const char* p, const std::string& rel) {
      if (std::strcmp(p, point) != 0) return;
      const int fd = ::open(died.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        (void)!::write(fd, rel.data(), rel.size());
        ::close(fd);
      }
      if (sigkill) ::raise(SIGKILL);
      ::_exit(42);
    };
    auto q = EncodeQueue::create(a.string(), o);
    if (!q.ok()) ::_exit(2);
    (void)(*q)->recover();
    (*q)->start();
    (void)(*q)->drain(true);
    ::_exit(3);  // the point was never reached
  }
  int wst = 0;
  ASSERT_EQ(::waitpid(pid, &wst, 0), pid);
  if (sigkill) {
    ASSERT_TRUE(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL) << "status " << wst;
  } else {
    ASSERT_TRUE(WIFEXITED(wst) && WEXITSTATUS(wst) == 42) << "status " << wst;
  }
  const std::vector<uint8_t> rel_bytes = wctest::read_file(died);
  const std::string rel(rel_bytes.begin(), rel_bytes.end());
  sfs::remove(died);
  const sfs::path plain = a / rel, enc = encoded_of(plain);
  const sfs::path lock = plain.parent_path() / (".wcodecfs-lock." + plain.filename().string());
  const sfs::path temp = plain.parent_path() / (".wcodecfs-tmp." + plain.filename().string() + ".child-owner");
  // The crash matrix of docs/staging.md.
  const std::string p = point;
  EXPECT_TRUE(sfs::exists(lock));
  EXPECT_EQ(sfs::exists(plain), p != "unlinked");
  EXPECT_EQ(sfs::exists(temp), p == "temp-written" || p == "verified");
  EXPECT_EQ(sfs::exists(enc), p == "renamed" || p == "unlinked");

  EncodeQueueOptions o = test_options("parent-owner");
  encode_all(a, o);
  for (const auto& f : files) {
    SCOPED_TRACE(f.rel);
    EXPECT_FALSE(sfs::exists(a / f.rel));
    EXPECT_EQ(decoded_sha(encoded_of(a / f.rel)), sha_of(f.model));
  }
  EXPECT_TRUE(internal_names(a).empty()) << internal_names(a).front();
}

class CrashPoint : public ::testing::TestWithParam<std::tuple<const char*, bool>> {};

TEST_P(CrashPoint, RecoverAfterRealCrash) { crash_at(std::get<0>(GetParam()), std::get<1>(GetParam())); }

INSTANTIATE_TEST_SUITE_P(EncodeQueue, CrashPoint,
                         ::testing::Combine(::testing::Values("locked", "temp-written", "verified", "renamed",
                                                              "unlinked"),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param);
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n + (std::get<1>(info.param) ? "_sigkill" : "_exit");
                         });

TEST(EncodeQueue, LockFileBodyAndRefresh) {
  wctest::ScratchDir dir;
  put(dir / "m.safetensors", model(kTernary));
  EncodeQueueOptions o = test_options("body-owner");
  o.lock_stale = milliseconds(400);  // refreshed every 100 ms
  nlohmann::json body;
  struct timespec before {}, after {};
  o.hook = [&](const char* p, const std::string&) {
    if (std::strcmp(p, "locked") != 0) return;
    const sfs::path lock = dir / ".wcodecfs-lock.m.safetensors";
    const std::vector<uint8_t> b = wctest::read_file(lock);
    body = nlohmann::json::parse(std::string(b.begin(), b.end()), nullptr, false);
    struct stat st {};
    ::stat(lock.c_str(), &st);
    before = st.st_mtim;
    std::this_thread::sleep_for(milliseconds(600));  // longer than lock_stale: kept alive by refreshes
    ::stat(lock.c_str(), &st);
    after = st.st_mtim;
  };
  encode_all(dir.path(), o);
  ASSERT_TRUE(body.is_object()) << body;
  EXPECT_EQ(body.value("owner", ""), "body-owner");
  EXPECT_EQ(body.value("boot_id", ""), boot_id());
  EXPECT_EQ(body.value("pid", 0), ::getpid());
  EXPECT_FALSE(body.value("host", "").empty());
  const double advanced = static_cast<double>(after.tv_sec - before.tv_sec) + (after.tv_nsec - before.tv_nsec) * 1e-9;
  EXPECT_GT(advanced, 0.3) << "the lock's mtime was not refreshed while held";
  EXPECT_EQ(decoded_sha(dir / "m.wcodec"), sha_of(kTernary));
  EXPECT_TRUE(internal_names(dir.path()).empty());
}

// A daemon creates its queue, then forks into the background: the locks it
// takes must name the process that holds them (a lock naming the exited
// parent is judged stale by every other daemon on this host).
TEST(EncodeQueue, LocksNameTheProcessAfterAFork) {
  wctest::ScratchDir dir;
  put(dir / "m.safetensors", model(kTernary));
  const std::string report = dir / "report";
  EncodeQueueOptions o = test_options("");  // the default, pid-derived owner id
  o.hook = [&](const char* p, const std::string&) {
    if (std::strcmp(p, "locked") != 0) return;
    const std::vector<uint8_t> b = wctest::read_file(dir / ".wcodecfs-lock.m.safetensors");
    const auto body = nlohmann::json::parse(std::string(b.begin(), b.end()), nullptr, false);
    const bool pid_ok = body.is_object() && body.value("pid", 0) == ::getpid();
    const std::string owner = body.is_object() ? body.value("owner", "") : "";
    const bool owner_ok = owner.size() > std::to_string(::getpid()).size() &&
                          owner.find("." + std::to_string(::getpid())) != std::string::npos;
    std::ofstream(report) << (pid_ok ? "pid-ok" : "pid-wrong") << " " << (owner_ok ? "owner-ok" : "owner-wrong") << " "
                          << owner;
  };
  auto q = EncodeQueue::create(dir.path().string(), o);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  fflush(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    (void)(*q)->recover();
    (*q)->start();
    (void)(*q)->drain(true);
    (*q)->stop();
    ::_exit(0);
  }
  int wst = 0;
  ASSERT_EQ(::waitpid(pid, &wst, 0), pid);
  ASSERT_TRUE(WIFEXITED(wst) && WEXITSTATUS(wst) == 0) << "status " << wst;
  const std::vector<uint8_t> r = wctest::read_file(report);
  const std::string got(r.begin(), r.end());
  EXPECT_EQ(got.substr(0, 16), "pid-ok owner-ok ") << got;
  EXPECT_EQ(decoded_sha(dir / "m.wcodec"), sha_of(kTernary));
}

// A holder killed but not yet reaped (a zombie) holds nothing: its lock is
// stale at once, not after lock_stale.
TEST(EncodeQueue, LockOfAZombieHolderIsStale) {
  wctest::ScratchDir dir;
  put(dir / "m.safetensors", model(kTernary));
  fflush(nullptr);
  const pid_t zombie = ::fork();
  ASSERT_GE(zombie, 0);
  if (zombie == 0) ::_exit(0);
  // Not reaped yet: wait until it has exited.
  siginfo_t info {};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(zombie), &info, WEXITED | WNOWAIT), 0);
  put_lock(dir.path(), "m.safetensors", "dead-owner", boot_id(), zombie);
  EncodeQueueOptions o = test_options();
  o.lock_stale = std::chrono::minutes(10);
  encode_all(dir.path(), o);
  int wst = 0;
  EXPECT_EQ(::waitpid(zombie, &wst, 0), zombie);
  EXPECT_EQ(decoded_sha(dir / "m.wcodec"), sha_of(kTernary));
  EXPECT_FALSE(sfs::exists(dir / "m.safetensors"));
  EXPECT_TRUE(internal_names(dir.path()).empty());
}

// ------------------------------------------------------------------ two owners

TEST(EncodeQueue, TwoOwnersNeverEncodeTheSameFileAtOnce) {
  wctest::ScratchDir dir;
  const std::vector<std::pair<std::string, const char*>> files = {
      {"a.safetensors", kTernary},    {"b.safetensors", kInt4},     {"c.safetensors", kTernary},
      {"d/e.safetensors", kInt8},     {"d/f.safetensors", kTernary}, {"d/g.safetensors", kInt4},
      {"stale.safetensors", kTernary}};
  for (const auto& [rel, m] : files) put(dir / rel, model(m));
  // One file starts with a stale lock that both owners want to take over.
  put_lock(dir.path(), "stale.safetensors", "dead-owner", boot_id(), dead_pid());

  std::mutex mu;
  std::set<std::string> in_flight;
  std::map<std::string, int> swaps;
  int overlaps = 0;
  auto hook = [&](const char* p, const std::string& rel) {
    std::unique_lock<std::mutex> lk(mu);
    if (std::strcmp(p, "locked") == 0) {
      if (!in_flight.insert(rel).second) ++overlaps;
      lk.unlock();
      std::this_thread::sleep_for(milliseconds(20));  // widen the window
    } else if (std::strcmp(p, "unlocking") == 0) {
      in_flight.erase(rel);
    } else if (std::strcmp(p, "renamed") == 0) {
      ++swaps[rel];
    }
  };
  std::unique_ptr<EncodeQueue> qs[2];
  for (int i = 0; i < 2; ++i) {
    EncodeQueueOptions o = test_options(i == 0 ? "host-a" : "host-b");
    o.threads = 2;
    o.lock_stale = milliseconds(800);
    o.hook = hook;
    qs[i] = make_queue(dir.path(), o);
    ASSERT_TRUE(qs[i]);
  }
  std::thread t[2];
  for (int i = 0; i < 2; ++i)
    t[i] = std::thread([&, i] {
      EXPECT_TRUE(qs[i]->recover().ok());
      qs[i]->start();
      EXPECT_TRUE(qs[i]->drain(true).ok());
    });
  for (auto& th : t) th.join();
  for (auto& q : qs) q->stop();
  EXPECT_EQ(overlaps, 0);
  EXPECT_EQ(qs[0]->stats().done + qs[1]->stats().done, files.size());
  for (const auto& [rel, m] : files) {
    SCOPED_TRACE(rel);
    EXPECT_EQ(swaps[rel], 1);
    EXPECT_FALSE(sfs::exists(dir / rel));
    EXPECT_EQ(decoded_sha(encoded_of(dir / rel)), sha_of(m));
  }
  EXPECT_TRUE(internal_names(dir.path()).empty());
}

// ------------------------------------------------------------------ materialize

TEST(EncodeQueue, MaterializeRoundTrip) {
  wctest::ScratchDir dir;
  const sfs::path plain = dir / "sub" / "m.safetensors";
  put(plain, model(kSilero), 0604);
  set_mtime(plain, 1200000000, 5);
  encode_all(dir.path(), test_options());
  ASSERT_FALSE(sfs::exists(plain));
  ASSERT_TRUE(sfs::exists(encoded_of(plain)));

  auto q = make_queue(dir.path(), test_options());
  ASSERT_TRUE(q);
  EXPECT_EQ(q->materialize("sub/m.safetensors", EncodeQueue::Hold()).code(), Code::kInvalidArgument)
      << "materialize needs a Hold";
  {
    EncodeQueue::Hold other = q->hold("elsewhere");
    EXPECT_EQ(q->materialize("sub/m.safetensors", other).code(), Code::kInvalidArgument);
  }
  {
    EncodeQueue::Hold h = q->hold("sub");
    ASSERT_TRUE(q->materialize("sub/m.safetensors", h).ok());
    EXPECT_EQ(wctest::read_file(plain), model(kSilero));
    EXPECT_FALSE(sfs::exists(encoded_of(plain)));
    struct stat st {};
    ASSERT_EQ(::stat(plain.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0604u);
    EXPECT_EQ(st.st_mtim.tv_sec, 1200000000);
    EXPECT_EQ(st.st_mtim.tv_nsec, 5);
    EXPECT_TRUE(internal_names(dir.path()).empty());
    EXPECT_TRUE(q->materialize("sub/m.safetensors", h).ok()) << "a plain file is left as it is";
    EXPECT_EQ(q->materialize("sub/none.safetensors", h).code(), Code::kNotFound);
  }
  // It is queued again: unchanged, it is encoded again.
  q->start();
  ASSERT_TRUE(q->drain(true).ok());
  EXPECT_FALSE(sfs::exists(plain));
  EXPECT_EQ(decoded_sha(encoded_of(plain)), sha_of(kSilero));

  // An open with O_TRUNC: the plain file comes back empty, mode and owner kept.
  {
    EncodeQueue::Hold h = q->hold("sub/m.safetensors");
    ASSERT_TRUE(q->materialize("sub/m.safetensors", h, /*empty=*/true).ok());
    q->opened_for_write("sub/m.safetensors");
    struct stat st {};
    ASSERT_EQ(::stat(plain.c_str(), &st), 0);
    EXPECT_EQ(st.st_size, 0);
    EXPECT_EQ(st.st_mode & 07777, 0604u);
    EXPECT_GT(st.st_mtim.tv_sec, 1200000000);
    EXPECT_FALSE(sfs::exists(encoded_of(plain)));
    EXPECT_TRUE(internal_names(dir.path()).empty());
  }
  wctest::write_file(plain, model(kTernary));
  q->closed_for_write("sub/m.safetensors");
  ASSERT_TRUE(q->drain(true).ok());
  EXPECT_EQ(decoded_sha(encoded_of(plain)), sha_of(kTernary));
}

TEST(EncodeQueue, MaterializeWaitsForAnotherOwnersLock) {
  wctest::ScratchDir dir;
  put(dir / "m.safetensors", model(kTernary));
  encode_all(dir.path(), test_options());
  put_lock(dir.path(), "m.safetensors", "other-owner", boot_id(), ::getpid());
  EncodeQueueOptions o = test_options();
  o.lock_stale = milliseconds(2000);
  auto q = make_queue(dir.path(), o);
  ASSERT_TRUE(q);
  EncodeQueue::Hold h = q->hold("m.safetensors");
  const Status st = q->materialize("m.safetensors", h);
  EXPECT_EQ(st.code(), Code::kIOError) << st.ToString();
  EXPECT_NE(st.message().find("other-owner"), std::string::npos) << st.message();
  EXPECT_TRUE(sfs::exists(dir / "m.wcodec"));
  EXPECT_FALSE(sfs::exists(dir / "m.safetensors"));
}

// ------------------------------------------------------------------ the tool

std::string q(const sfs::path& p) {
  std::string s = "'";
  for (char c : p.string()) s += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return s + "'";
}

int wcodec_run(const std::string& args, std::string* out) {
  return wctest::run_command(q(WCODEC_TOOL) + " " + args, out);
}

bool contains(const std::string& h, const std::string& n) { return h.find(n) != std::string::npos; }

TEST(EncodeQueueCli, EncodeStoreInPlace) {
  wctest::ScratchDir dir;
  const sfs::path store = dir / "store";
  put(store / "a.safetensors", model(kTernary));
  put(store / "m" / "b.safetensors", model(kSilero));
  put(store / "readme.txt", {'x'});
  std::string out;
  ASSERT_EQ(wcodec_run("encode " + q(store) + " -j 2 --no-tools", &out), 0) << out;
  EXPECT_TRUE(contains(out, "a.safetensors")) << out;
  EXPECT_TRUE(contains(out, "m/b.safetensors")) << out;
  EXPECT_TRUE(contains(out, "total: 2 files encoded, " + std::to_string(model(kTernary).size() + model(kSilero).size()) +
                                " -> "))
      << out;
  EXPECT_TRUE(contains(out, "saved")) << out;
  EXPECT_EQ(decoded_sha(store / "a.wcodec"), sha_of(kTernary));
  EXPECT_EQ(decoded_sha(store / "m" / "b.wcodec"), sha_of(kSilero));
  EXPECT_FALSE(sfs::exists(store / "a.safetensors"));
  EXPECT_TRUE(sfs::exists(store / "readme.txt"));
  EXPECT_TRUE(internal_names(store).empty());

  // Again: nothing left to do.
  ASSERT_EQ(wcodec_run("encode " + q(store), &out), 0) << out;
  EXPECT_TRUE(contains(out, "total: 0 files encoded")) << out;
}

TEST(EncodeQueueCli, EncodeStoreReportsInvalidFiles) {
  wctest::ScratchDir dir;
  put(dir / "good.safetensors", model(kTernary));
  put(dir / "bad.safetensors", {'{', '}'});
  std::string out;
  EXPECT_EQ(wcodec_run("encode " + q(dir.path()) + " --no-tools", &out), 1) << out;
  EXPECT_TRUE(contains(out, "bad.safetensors")) << out;
  EXPECT_TRUE(contains(out, "FAILED")) << out;
  EXPECT_TRUE(contains(out, "1 failed")) << out;
  EXPECT_TRUE(sfs::exists(dir / "bad.safetensors"));
  EXPECT_TRUE(sfs::exists(dir / "good.wcodec"));
}

TEST(EncodeQueueCli, EncodeOneArgumentMustBeADirectory) {
  wctest::ScratchDir dir;
  put(dir / "a.safetensors", model(kTernary));
  std::string out;
  EXPECT_EQ(wcodec_run("encode " + q(dir / "a.safetensors"), &out), 2) << out;
  EXPECT_TRUE(contains(out, "OUT is required")) << out;
  EXPECT_TRUE(sfs::exists(dir / "a.safetensors"));
}

TEST(EncodeQueueCli, Status) {
  wctest::ScratchDir dir;
  std::string out;
  EXPECT_EQ(wcodec_run("status " + q(dir.path()), &out), 1) << out;
  EXPECT_TRUE(contains(out, "not a wcodecfs mount")) << out;

  put(dir / ".wcodecfs" / "stats", {'{', '}'});
  EXPECT_EQ(wcodec_run("status " + q(dir.path()), &out), 0) << out;
  EXPECT_TRUE(contains(out, "no staging area")) << out;

  using nlohmann::json;
  auto item = [](const char* path, const char* state, uint64_t size, uint64_t encoded, const char* error) {
    return json{{"path", path}, {"state", state}, {"size", size}, {"encoded", encoded}, {"error", error}};
  };
  json staging = {{"area", "/srv/store/.wcodecfs-staging"},
                  {"pending", 1},
                  {"encoding", 1},
                  {"done", 2},
                  {"failed", 1},
                  {"cancelled", 3},
                  {"bytes_in", 2000000},
                  {"bytes_out", 1500000},
                  {"bytes_saved", 500000},
                  {"seconds", 2.5}};
  staging["items"] = json::array({item("llm/w.safetensors", "done", 2000000, 1500000, ""),
                                  item("junk.safetensors", "failed", 9, 0, "Corruption: not a safetensors file"),
                                  item("new.safetensors", "pending", 10, 0, "")});
  json j = json::object();
  j["cache"] = json{{"hits", 1}};
  j["staging"] = staging;
  const std::string s = j.dump();
  put(dir / ".wcodecfs" / "stats", std::vector<uint8_t>(s.begin(), s.end()));
  EXPECT_EQ(wcodec_run("status " + q(dir.path()), &out), 0) << out;
  EXPECT_TRUE(contains(out, "/srv/store/.wcodecfs-staging")) << out;
  EXPECT_TRUE(contains(out, "1 pending, 1 encoding, 2 done, 1 failed, 3 cancelled")) << out;
  EXPECT_TRUE(contains(out, "llm/w.safetensors")) << out;
  EXPECT_TRUE(contains(out, "0.7500")) << out;
  EXPECT_TRUE(contains(out, "Corruption: not a safetensors file")) << out;
  EXPECT_TRUE(contains(out, "new.safetensors")) << out;

  put(dir / ".wcodecfs" / "stats", {'n', 'o', 'p', 'e'});
  EXPECT_EQ(wcodec_run("status " + q(dir.path()), &out), 1) << out;
}

}  // namespace
