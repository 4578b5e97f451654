// tests/test_mount_real.cpp — the wcodecfs daemon on a real FUSE mount.
//
// Each test builds a store in its own scratch directory (test_fs_store.h),
// mounts it with the real daemon (WCODECFS_BIN) exactly as a user would
// (`wcodecfs STORE MNT`, which daemonizes once the mount is live), runs
// ordinary tools and syscalls against the mount, and always unmounts with
// `fusermount3 -u -z` (destructor, with timeouts), then checks that no
// daemon for its mountpoint is left.
//
// Needs /dev/fuse and fusermount3 (CI runs as root); without them every test
// is skipped with the reason.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "mount_fixture.h"
#include "test_fs_store.h"
#include "testutil.h"

namespace sfs = std::filesystem;

namespace {

using namespace mounttest;

uint64_t chunks_decoded(const nlohmann::json& j) { return j["decode"]["chunks"].get<uint64_t>(); }

// Every presented .safetensors of the standard store with its original.
std::vector<std::pair<std::string, sfs::path>> presented(const std::vector<fstest::ModelFile>& models) {
  std::vector<std::pair<std::string, sfs::path>> out;
  for (const auto& m : models) out.push_back({m.stem + ".safetensors", fstest::original_of(m.stem)});
  out.push_back({"sub/stories260K.rtn-int8.safetensors", fstest::original_of("stories260K.rtn-int8")});
  return out;
}

std::string sha_of_file(const sfs::path& p) { return wctest::sha256_hex(wctest::read_file(p)); }

// The mount of the standard store (no large files); its daemon's pid.
pid_t mount_small_store(MountFixture& fx) {
  fstest::build_store(fx.store(), /*with_large=*/false);
  std::string out;
  EXPECT_EQ(fx.mount("", &out), 0) << out;
  const auto pids = daemons_for(fx.mnt());
  EXPECT_EQ(pids.size(), 1u);
  return pids.size() == 1 ? pids[0] : -1;
}

// SIGTERM to the daemon; it exits within 15 s. `before_unmount` runs
// between its exit and the check that the mount went with it.
template <typename F>
void sigterm_expect_exit(MountFixture& fx, pid_t pid, F before_unmount) {
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_TRUE(wait_until([&] { return daemons_for(fx.mnt()).empty(); }, 15)) << "daemon did not exit on SIGTERM";
  before_unmount();
  EXPECT_TRUE(wait_until([&] { return !is_mounted(fx.mnt()); }, 5)) << "mount left behind after SIGTERM";
  if (is_mounted(fx.mnt())) fx.adopt();
}

}  // namespace

TEST(mount_real, DaemonReturnsOnlyWhenTheMountIsLive) {
  REQUIRE_FUSE();
  MountFixture fx;
  fstest::build_store(fx.store(), /*with_large=*/false);
  // The daemon forks after the mount exists: `ls` right after it returns
  // must see the presented files (not an empty mountpoint).
  std::string out;
  const int rc = sh("timeout 60 " + q(kDaemon) + " " + q(fx.store()) + " " + q(fx.mnt()) + " && ls -a " + q(fx.mnt()),
                    &out);
  if (is_mounted(fx.mnt())) fx.adopt();
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("stories260K.f32.safetensors"), std::string::npos) << out;
  EXPECT_NE(out.find(".wcodecfs"), std::string::npos) << out;
  EXPECT_EQ(out.find(".wcodec\n"), std::string::npos) << out;
  EXPECT_EQ(daemons_for(fx.mnt()).size(), 1u);
  std::string mounts;
  sh("grep " + q(fx.mnt().string()) + " /proc/self/mounts", &mounts);
  EXPECT_NE(mounts.find("fuse.wcodecfs"), std::string::npos) << mounts;
  fx.unmount();
  EXPECT_TRUE(daemons_for(fx.mnt()).empty());
}

TEST(mount_real, FilesMatchOriginalsAndStatDecodesNothing) {
  REQUIRE_FUSE();
  MountFixture fx;
  const auto models = fstest::build_store(fx.store(), /*with_large=*/true);
  std::string out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;

  const uint64_t before = chunks_decoded(fx.stats());
  ASSERT_EQ(sh("ls -laR " + q(fx.mnt()) + " >/dev/null && stat " + q(fx.mnt()) + "/* " + q(fx.mnt()) +
                   "/sub/* >/dev/null && find " + q(fx.mnt()) + " -type f -size +1k >/dev/null",
               &out),
            0)
      << out;
  for (const auto& [name, original] : presented(models)) {
    struct stat st {};
    ASSERT_EQ(::stat((fx.mnt() / name).c_str(), &st), 0) << name;
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), sfs::file_size(original)) << name;
  }
  const auto after = fx.stats();
  EXPECT_EQ(chunks_decoded(after), before) << "listing and stat must decode nothing";
  EXPECT_EQ(before, 0u);

  for (const auto& [name, original] : presented(models)) {
    ASSERT_EQ(sh("sha256sum " + q((fx.mnt() / name).string()), &out), 0) << out;
    EXPECT_EQ(out.substr(0, 64), sha_of_file(original)) << name;
  }
  EXPECT_GT(chunks_decoded(fx.stats()), 0u);
  EXPECT_EQ(fx.stats()["errors"].get<uint64_t>(), 0u);
  // Plain files pass through.
  ASSERT_EQ(sh("cat " + q((fx.mnt() / "notes.txt").string()), &out), 0);
  EXPECT_EQ(out, "plain file in the store\n");
  ASSERT_EQ(sh("readlink " + q((fx.mnt() / "escape").string()), &out), 0);
  EXPECT_EQ(out, "/etc\n");
}

// The daemon drops a decoded chunk once the kernel has read all of it (its
// page cache holds the bytes now; the chunk's memory takes the next
// chunks); -o keep_read_chunks keeps every chunk within the budget.
TEST(mount_real, ChunksTheKernelReadAreDroppedUnlessKept) {
  REQUIRE_FUSE();
  for (const std::string opts : {"", "keep_read_chunks"}) {
    SCOPED_TRACE(opts.empty() ? "default" : opts);
    MountFixture fx;
    const auto models = fstest::build_store(fx.store(), /*with_large=*/true);
    std::string out;
    ASSERT_EQ(fx.mount(opts, &out), 0) << out;
    for (const auto& [name, original] : presented(models)) {
      ASSERT_EQ(sh("cat " + q((fx.mnt() / name).string()) + " | sha256sum", &out), 0) << out;
      EXPECT_EQ(out.substr(0, 64), sha_of_file(original)) << name;
    }
    const auto s = fx.stats();
    const uint64_t decoded = s["decode"]["bytes"].get<uint64_t>(), dropped = s["cache"]["dropped_behind"].get<uint64_t>();
    ASSERT_GT(decoded, 1u << 20);
    if (opts.empty()) {
      EXPECT_GT(dropped, 0u);
      EXPECT_LT(s["cache"]["bytes"].get<uint64_t>(), decoded);
      EXPECT_LT(s["cache"]["populated_bytes"].get<uint64_t>(), decoded);
    } else {
      EXPECT_EQ(dropped, 0u);
      EXPECT_EQ(s["cache"]["bytes"].get<uint64_t>(), decoded);
    }
    EXPECT_EQ(s["errors"].get<uint64_t>(), 0u);
  }
}

TEST(mount_real, MmapReadsMatch) {
  REQUIRE_FUSE();
  MountFixture fx;
  const auto models = fstest::build_store(fx.store(), /*with_large=*/true);
  std::string out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  for (const auto& [name, original] : presented(models)) {
    const int fd = ::open((fx.mnt() / name).c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << name << ": " << std::strerror(errno);
    struct stat st {};
    ASSERT_EQ(::fstat(fd, &st), 0);
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    ASSERT_NE(p, MAP_FAILED) << name << ": " << std::strerror(errno);
    // Touch pages out of order first (page faults land anywhere), then hash.
    const auto* bytes = static_cast<const uint8_t*>(p);
    const size_t n = static_cast<size_t>(st.st_size);
    const auto want = wctest::read_file(original);
    std::mt19937_64 rng(5);
    for (int i = 0; i < 64; ++i) {
      const size_t off = rng() % n;
      EXPECT_EQ(bytes[off], want[off]) << name << " at " << off;
    }
    EXPECT_EQ(wctest::sha256_hex(bytes, n), wctest::sha256_hex(want)) << name;
    ::munmap(p, n);
    ::close(fd);
  }
}

TEST(mount_real, PythonSafetensorsLoadsEveryTensor) {
  REQUIRE_FUSE();
  if (sh("python3 -c 'import safetensors, numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "SKIPPED: python3 with the safetensors and numpy packages is not available "
                    "(pip install safetensors numpy)";
  MountFixture fx;
  const auto models = fstest::build_store(fx.store(), /*with_large=*/true);
  std::string out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  // numpy has no bfloat16: BF16 files are compared by bytes in the other
  // tests; here every file whose dtypes numpy knows.
  std::string pairs;
  size_t files = 0;
  for (const auto& [name, original] : presented(models)) {
    if (name.find("bf16") != std::string::npos) continue;
    pairs += "(" + q((fx.mnt() / name).string()) + ", " + q(original.string()) + "),\n";
    ++files;
  }
  const sfs::path script = fx.scratch() / "load.py";
  fstest::write_text(script,
                     "from safetensors import safe_open\n"
                     "pairs = [\n" + pairs + "]\n"
                     "n = 0\n"
                     "for mounted, original in pairs:\n"
                     "    with safe_open(mounted, framework='numpy') as a, safe_open(original, framework='numpy') as b:\n"
                     "        assert sorted(a.keys()) == sorted(b.keys()), mounted\n"
                     "        assert a.metadata() == b.metadata(), mounted\n"
                     "        for k in a.keys():\n"
                     "            x, y = a.get_tensor(k), b.get_tensor(k)\n"
                     "            assert x.dtype == y.dtype and x.shape == y.shape, (mounted, k)\n"
                     "            assert x.tobytes() == y.tobytes(), (mounted, k)\n"
                     "            n += 1\n"
                     "print('tensors', n, 'files', len(pairs))\n");
  ASSERT_EQ(sh("timeout 120 python3 " + q(script.string()), &out), 0) << out;
  EXPECT_NE(out.find("files " + std::to_string(files)), std::string::npos) << out;
  std::cout << "[ python    ] " << out;
}

TEST(mount_real, CorruptChunkIsEIOAndTheRestReads) {
  REQUIRE_FUSE();
  MountFixture fx;
  const fstest::ModelFile m{"stories260K.f32", 32 * 1024};
  size_t nchunks = 0;
  {
    auto rd = wcodec::Reader::open(fstest::encoded(m).string());
    ASSERT_TRUE(rd.ok());
    nchunks = (*rd)->num_chunks();
  }
  const auto [bad_begin, bad_end] = fstest::corrupt_copy(fstest::encoded(m), fx.store() / "bad.wcodec", nchunks / 2);
  fstest::place(fstest::encoded({"stories260K.rtn-int8", 0}), fx.store() / "good.wcodec");
  std::string out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  const auto original = wctest::read_file(fstest::original_of(m.stem));

  const int fd = ::open((fx.mnt() / "bad.safetensors").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  // No kernel readahead on this descriptor: each read asks for its pages.
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  std::vector<uint8_t> buf(bad_end - bad_begin);
  errno = 0;
  EXPECT_EQ(::pread(fd, buf.data(), buf.size(), static_cast<off_t>(bad_begin)), -1);
  EXPECT_EQ(errno, EIO);
  // Far from the bad chunk (a page-cache page never spans it), bytes are right.
  const uint64_t safe_end = (bad_begin / 65536) * 65536 - 65536;
  ASSERT_GT(safe_end, 0u);
  std::vector<uint8_t> head(safe_end);
  ASSERT_EQ(::pread(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  EXPECT_TRUE(std::equal(head.begin(), head.end(), original.begin()));
  const uint64_t tail_begin = ((bad_end + 65535) / 65536) * 65536 + 65536;
  std::vector<uint8_t> tail(original.size() - tail_begin);
  ASSERT_EQ(::pread(fd, tail.data(), tail.size(), static_cast<off_t>(tail_begin)), static_cast<ssize_t>(tail.size()));
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), original.begin() + static_cast<ptrdiff_t>(tail_begin)));
  ::close(fd);

  // dd over the whole file fails; other files still read; the daemon lives.
  EXPECT_NE(sh("dd if=" + q((fx.mnt() / "bad.safetensors").string()) + " of=/dev/null bs=1M 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("Input/output error"), std::string::npos) << out;
  ASSERT_EQ(sh("sha256sum " + q((fx.mnt() / "good.safetensors").string()), &out), 0);
  EXPECT_EQ(out.substr(0, 64), sha_of_file(fstest::original_of("stories260K.rtn-int8")));
  EXPECT_GE(fx.stats()["errors"].get<uint64_t>(), 1u);
  EXPECT_EQ(daemons_for(fx.mnt()).size(), 1u);
}

TEST(mount_real, ParallelRandomReads) {
  REQUIRE_FUSE();
  MountFixture fx;
  const auto models = fstest::build_store(fx.store(), /*with_large=*/true);
  std::string out;
  // Huge-page advice on: the chunk memory (recycled under this small
  // cache) must serve the same bytes.
  ASSERT_EQ(fx.mount("cache_size=4M,threads=3,hugepages", &out), 0) << out;
  const auto files = presented(models);
  std::vector<std::vector<uint8_t>> originals;
  for (const auto& f : files) originals.push_back(wctest::read_file(f.second));
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(99 + t);
      for (int i = 0; i < 60; ++i) {
        const size_t fi = rng() % files.size();
        const auto& want = originals[fi];
        const int fd = ::open((fx.mnt() / files[fi].first).c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
          ++bad;
          continue;
        }
        const uint64_t off = rng() % want.size();
        const size_t len = 1 + rng() % (3u << 20);
        std::vector<uint8_t> buf(len);
        const ssize_t n = ::pread(fd, buf.data(), len, static_cast<off_t>(off));
        const size_t expect = std::min<uint64_t>(len, want.size() - off);
        if (n != static_cast<ssize_t>(expect) || !std::equal(buf.begin(), buf.begin() + n, want.begin() + off)) ++bad;
        ::close(fd);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  const auto s = fx.stats();
  EXPECT_EQ(s["errors"].get<uint64_t>(), 0u);
  EXPECT_EQ(s["cache"]["budget"].get<uint64_t>(), 4u << 20);
  EXPECT_EQ(s["decode"]["backend"].get<std::string>(), "cpu (3 threads)");
}

TEST(mount_real, WritesFailWithEROFS) {
  REQUIRE_FUSE();
  MountFixture fx;
  fstest::build_store(fx.store(), /*with_large=*/false);
  std::string out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  const sfs::path f = fx.mnt() / "stories260K.f32.safetensors";
  errno = 0;
  EXPECT_LT(::open(f.c_str(), O_WRONLY), 0);
  EXPECT_EQ(errno, EROFS);
  errno = 0;
  EXPECT_LT(::open((fx.mnt() / "notes.txt").c_str(), O_RDWR), 0);
  EXPECT_EQ(errno, EROFS);
  errno = 0;
  EXPECT_LT(::open((fx.mnt() / "new.txt").c_str(), O_WRONLY | O_CREAT, 0644), 0);
  EXPECT_EQ(errno, EROFS);
  errno = 0;
  EXPECT_NE(::mkdir((fx.mnt() / "d").c_str(), 0755), 0);
  EXPECT_EQ(errno, EROFS);
  errno = 0;
  EXPECT_NE(::unlink(f.c_str()), 0);
  EXPECT_EQ(errno, EROFS);
  errno = 0;
  EXPECT_NE(::truncate(f.c_str(), 0), 0);
  EXPECT_EQ(errno, EROFS);
  EXPECT_TRUE(sfs::exists(fx.store() / "stories260K.f32.wcodec"));
}

TEST(mount_real, SigtermUnmountsCleanly) {
  REQUIRE_FUSE();
  MountFixture fx;
  const pid_t pid = mount_small_store(fx);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(is_mounted(fx.mnt()));
  sigterm_expect_exit(fx, pid, [] {});
}

// Stopped while a file and a directory are open: the kernel sends no
// RELEASE for them, so the daemon frees their handles itself (the ASan
// build's leak check runs on the daemon's exit; see MountFixture).
TEST(mount_real, SigtermWithFilesOpenExitsCleanly) {
  REQUIRE_FUSE();
  MountFixture fx;
  const pid_t pid = mount_small_store(fx);
  ASSERT_GT(pid, 0);
  const int fd = ::open((fx.mnt() / "stories260K.f32.safetensors").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  char buf[4096];
  EXPECT_EQ(::pread(fd, buf, sizeof buf, 0), static_cast<ssize_t>(sizeof buf));
  DIR* d = ::opendir(fx.mnt().c_str());
  ASSERT_NE(d, nullptr) << std::strerror(errno);
  sigterm_expect_exit(fx, pid, [&] {
    ::closedir(d);
    ::close(fd);
  });
}

TEST(mount_real, MountHelperForFstab) {
  REQUIRE_FUSE();
  MountFixture fx;
  fstest::build_store(fx.store(), /*with_large=*/false);
  const std::string helper = std::string(WCODECFS_SOURCE_DIR) + "/packaging/mount.wcodecfs";
  std::string out;
  // mount -f (fake): nothing is mounted.
  ASSERT_EQ(sh("WCODECFS_BIN=" + q(kDaemon) + " sh " + q(helper) + " " + q(fx.store()) + " " + q(fx.mnt()) +
                   " -f -o defaults",
               &out),
            0)
      << out;
  EXPECT_FALSE(is_mounted(fx.mnt()));
  // As mount(8) calls it for "STORE MNT fuse.wcodecfs defaults,allow_other,nofail,cache_size=64M".
  const int rc = sh("timeout 60 env WCODECFS_BIN=" + q(kDaemon) + " sh " + q(helper) + " " + q(fx.store()) + " " +
                        q(fx.mnt()) + " -o rw,allow_other,nofail,_netdev,x-systemd.automount,cache_size=64M",
                    &out);
  if (is_mounted(fx.mnt())) fx.adopt();
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(is_mounted(fx.mnt()));
  std::string opts;
  sh("grep " + q(fx.mnt().string()) + " /proc/self/mounts", &opts);
  EXPECT_NE(opts.find("allow_other"), std::string::npos) << opts;
  EXPECT_NE(opts.find("default_permissions"), std::string::npos) << opts;
  EXPECT_EQ(fx.stats()["cache"]["budget"].get<uint64_t>(), 64u << 20);
  ASSERT_EQ(sh("sha256sum " + q((fx.mnt() / "stories260K.f32.safetensors").string()), &out), 0);
  EXPECT_EQ(out.substr(0, 64), sha_of_file(fstest::original_of("stories260K.f32")));
}

TEST(mount_real, BadArgumentsFailWithoutMounting) {
  REQUIRE_FUSE();
  MountFixture fx;
  fstest::build_store(fx.store(), /*with_large=*/false);
  std::string out;
  EXPECT_NE(fx.mount("cache_size=lots", &out), 0) << out;
  EXPECT_NE(out.find("cache_size"), std::string::npos) << out;
  EXPECT_NE(fx.mount("threads=0", &out), 0) << out;
  EXPECT_NE(fx.mount("no_such_option", &out), 0) << out;
  EXPECT_NE(sh("timeout 30 " + q(kDaemon) + " " + q((fx.scratch() / "missing").string()) + " " + q(fx.mnt()), &out),
            0);
  EXPECT_NE(out.find("missing"), std::string::npos) << out;
  EXPECT_FALSE(is_mounted(fx.mnt()));
  EXPECT_TRUE(daemons_for(fx.mnt()).empty());
  ASSERT_EQ(sh(q(kDaemon) + " --help", &out), 0);
  EXPECT_NE(out.find("cache_size"), std::string::npos);
}
