// tests/mount_fixture.h — mounting the real wcodecfs daemon in tests
// (test_mount_*.cpp): the fixture that mounts a store exactly as a user
// would (`wcodecfs STORE MNT [-o ...]`, which daemonizes once the mount is
// live) and always unmounts with `fusermount3 -u -z`, then checks that no
// daemon for its mountpoint is left and that the daemon wrote no sanitizer
// report.
//
// Needs /dev/fuse and fusermount3 (CI runs as root); REQUIRE_FUSE() skips a
// test with the reason otherwise.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "testutil.h"

namespace mounttest {

namespace sfs = std::filesystem;

#ifdef WCODECFS_BIN
inline const char* const kDaemon = WCODECFS_BIN;
#else
inline const char* const kDaemon = nullptr;
#endif

inline std::string q(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

inline int sh(const std::string& cmd, std::string* out = nullptr) { return wctest::run_command(cmd, out); }

// Why real mounts cannot run here, or "" when they can.
inline std::string fuse_unavailable() {
  if (!kDaemon) return "wcodecfs was not built (WCODEC_BUILD_FUSE=OFF)";
  const int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) return std::string("/dev/fuse is not usable: ") + std::strerror(errno);
  ::close(fd);
  if (sh("command -v fusermount3 >/dev/null") != 0) return "fusermount3 is not installed";
  return "";
}

#define REQUIRE_FUSE()                                      \
  do {                                                      \
    const std::string why = fuse_unavailable();             \
    if (!why.empty()) GTEST_SKIP() << "SKIPPED: " << why;   \
  } while (0)

inline bool is_mounted(const sfs::path& mnt) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string a, b, c, d, mp;
    ls >> a >> b >> c >> d >> mp;
    if (mp == mnt.string()) return true;
  }
  return false;
}

// Daemons (programs called `program`) whose command line names `mnt`
// (scanned in /proc, so the test's own shell commands never match).
inline std::vector<pid_t> daemons_for(const sfs::path& mnt, const std::string& program = "wcodecfs") {
  std::vector<pid_t> pids;
  DIR* d = ::opendir("/proc");
  if (!d) return pids;
  while (struct dirent* e = ::readdir(d)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    // A process may exit while it is read (the read then fails with
    // ESRCH): such a process is no daemon of ours any more.
    std::string all;
    const int fd = ::open(("/proc/" + std::string(e->d_name) + "/cmdline").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) all.append(buf, static_cast<size_t>(n));
    ::close(fd);
    std::vector<std::string> argv;
    std::string cur;
    for (char c : all) {
      if (c == '\0') {
        argv.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    if (argv.empty() || sfs::path(argv[0]).filename() != program) continue;
    for (const auto& a : argv)
      if (a == mnt.string()) pids.push_back(pid);
  }
  ::closedir(d);
  return pids;
}

template <typename F>
bool wait_until(F&& cond, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

// A scratch directory with a store and a mountpoint; unmounts on
// destruction and checks that the daemon went away.
class MountFixture {
 public:
  // `daemon`: the program mounted (the wcodecfs daemon, or a tests' daemon
  // built on mount/daemon.h).
  explicit MountFixture(const char* daemon = kDaemon) : daemon_(daemon ? daemon : "") {
    store_ = scratch_.path() / "store";
    mnt_ = scratch_.path() / "mnt";
    sfs::create_directory(store_);
    sfs::create_directory(mnt_);
  }
  ~MountFixture() { unmount(); }
  const sfs::path& store() const { return store_; }
  const sfs::path& mnt() const { return mnt_; }
  const sfs::path& scratch() const { return scratch_.path(); }

  // `wcodecfs STORE MNT [-o opts]`; returns the daemon's exit status.
  // `env`: extra "NAME=value ..." assignments for the daemon.
  int mount(const std::string& opts = "", std::string* out = nullptr, const std::string& env = "") {
    // Sanitizer reports of the daemon (its stderr is /dev/null once it
    // daemonizes) go to files that unmount() checks.
    std::string cmd = "ASAN_OPTIONS=log_path=" + q((scratch_.path() / "asan").string()) +
                      " UBSAN_OPTIONS=log_path=" + q((scratch_.path() / "ubsan").string()) + " " + env + " timeout 60 " +
                      q(daemon_) + " " + q(store_) + " " + q(mnt_);
    if (!opts.empty()) cmd += " -o " + q(opts);
    const int rc = sh(cmd, out);
    mounted_ = mounted_ || is_mounted(mnt_);
    return rc;
  }
  void adopt() { mounted_ = true; }

  void unmount() {
    if (!mounted_) return;
    mounted_ = false;
    std::string out;
    if (is_mounted(mnt_)) {  // (a test may have ended the daemon itself)
      const int rc = sh("timeout 20 fusermount3 -u -z " + q(mnt_), &out);
      EXPECT_EQ(rc, 0) << out;
    }
    const std::string program = sfs::path(daemon_).filename().string();
    const bool gone = wait_until([&] { return daemons_for(mnt_, program).empty(); }, 15);
    EXPECT_TRUE(gone) << "a " << program << " daemon for " << mnt_ << " is still running after unmount";
    if (!gone)
      for (pid_t p : daemons_for(mnt_, program)) ::kill(p, SIGKILL);
    EXPECT_FALSE(is_mounted(mnt_));
    check_sanitizer_logs();
  }

  void check_sanitizer_logs() const {
    std::error_code ec;
    for (const auto& e : sfs::directory_iterator(scratch_.path(), ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("asan", 0) == 0 || name.rfind("ubsan", 0) == 0) {
        const auto bytes = wctest::read_file(e.path());
        ADD_FAILURE() << "sanitizer report from the daemon (" << name << "):\n" << std::string(bytes.begin(), bytes.end());
      }
    }
  }

  nlohmann::json stats() const {
    std::ifstream f(mnt_ / ".wcodecfs" / "stats");
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto j = nlohmann::json::parse(s, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << "stats is not JSON: " << s;
    return j;
  }

 private:
  std::string daemon_;
  wctest::ScratchDir scratch_;
  sfs::path store_, mnt_;
  bool mounted_ = false;
};

}  // namespace mounttest
