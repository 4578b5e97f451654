// tests/test_mount_kinds.cpp — a store kind that exists only in the tests,
// through a real FUSE mount.
//
// The tests' daemon (joined_daemon_main.cpp: the wcodecfs daemon plus the
// joined kind of joined_kind.h) mounts a store directory holding two real
// model files as X.left / X.right and a .wcodec container. Ordinary tools
// list and read the view beside its inputs, parallel readers pread random
// ranges, and a changed input is served anew once the kernel looks the name
// up again.
//
// Needs /dev/fuse and fusermount3 (CI runs as root); skipped otherwise.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "joined_kind.h"
#include "mount_fixture.h"
#include "test_fs_store.h"
#include "testutil.h"

namespace sfs = std::filesystem;
using namespace mounttest;

namespace {

#ifdef WCODECFS_JOINED_BIN
const char* const kJoinedDaemon = WCODECFS_JOINED_BIN;
#else
const char* const kJoinedDaemon = nullptr;
#endif

#define REQUIRE_JOINED_DAEMON()                                                              \
  do {                                                                                       \
    REQUIRE_FUSE();                                                                          \
    if (!kJoinedDaemon) GTEST_SKIP() << "SKIPPED: the tests' daemon was not built (no FUSE)"; \
  } while (0)

std::vector<uint8_t> pread_all(const sfs::path& p, uint64_t off, size_t len) {
  std::vector<uint8_t> buf(len);
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << p;
  if (fd < 0) return {};
  size_t got = 0;
  while (got < len) {
    const ssize_t r = ::pread(fd, buf.data() + got, len - got, static_cast<off_t>(off + got));
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  buf.resize(got);
  return buf;
}

}  // namespace

TEST(mount_kinds, TestKindIsServedBesideItsInputsToOrdinaryTools) {
  REQUIRE_JOINED_DAEMON();
  MountFixture fx(kJoinedDaemon);
  const auto left = wctest::read_file(fstest::original_of("stories260K.f32"));
  const auto right = wctest::read_file(wctest::data_dir() / "stories260K.f32.gguf");
  sfs::create_directory(fx.store() / "m");
  wctest::write_file(fx.store() / "m" / "w.left", left);
  wctest::write_file(fx.store() / "m" / "w.right", right);
  fstest::place(fstest::encoded({"stories260K.rtn-int8", 0}), fx.store() / "m" / "int8.wcodec");
  std::string out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;

  ASSERT_EQ(sh("ls -1 " + q((fx.mnt() / "m").string()), &out), 0) << out;
  EXPECT_EQ(out, "int8.safetensors\nw.joined\nw.left\nw.right\n");
  const std::vector<uint8_t> want = joinedkind::expected_joined(left, right);
  EXPECT_EQ(sfs::file_size(fx.mnt() / "m" / "w.joined"), want.size());
  // cp and sha256sum read it whole.
  ASSERT_EQ(sh("cp " + q((fx.mnt() / "m" / "w.joined").string()) + " " + q((fx.scratch() / "copy").string()), &out), 0)
      << out;
  EXPECT_EQ(wctest::read_file(fx.scratch() / "copy"), want);
  ASSERT_EQ(sh("sha256sum < " + q((fx.mnt() / "m" / "w.joined").string()), &out), 0) << out;
  EXPECT_EQ(out.substr(0, 64), wctest::sha256_hex(want));
  // The inputs and the wcodec file beside them read as they are.
  EXPECT_EQ(wctest::read_file(fx.mnt() / "m" / "w.right"), right);
  EXPECT_EQ(wctest::read_file(fx.mnt() / "m" / "int8.safetensors"),
            wctest::read_file(fstest::original_of("stories260K.rtn-int8")));

  // Parallel readers at random offsets.
  std::vector<std::thread> readers;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t) + 1);
      for (int k = 0; k < 40; ++k) {
        const uint64_t off = rng() % want.size();
        const size_t len = 1 + rng() % 20000;
        const auto got = pread_all(fx.mnt() / "m" / "w.joined", off, len);
        const size_t n = std::min<uint64_t>(len, want.size() - off);
        if (got != std::vector<uint8_t>(want.begin() + off, want.begin() + off + n)) bad.fetch_add(1);
      }
    });
  }
  for (auto& th : readers) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(fx.stats()["decode"]["errors"].get<uint64_t>(), 0u);
  // The stats name the kinds the daemon serves, in order of precedence.
  EXPECT_EQ(fx.stats()["kinds"], nlohmann::json::array({"wcodec", "gguf", "trellis", "hf-gguf", "cawsf", "joined (test)"}));
}

TEST(mount_kinds, ChangedInputIsServedAnewThroughTheMount) {
  REQUIRE_JOINED_DAEMON();
  if (::access("/proc/sys/vm/drop_caches", W_OK) != 0)
    GTEST_SKIP() << "SKIPPED: needs to drop the kernel's dentry cache (root)";
  MountFixture fx(kJoinedDaemon);
  const auto left = wctest::read_file(fstest::original_of("stories260K.rtn-int4"));
  auto right = wctest::read_file(fstest::original_of("stories260K.rtn-ternary"));
  wctest::write_file(fx.store() / "p.left", left);
  wctest::write_file(fx.store() / "p.right", right);
  std::string out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  const sfs::path joined = fx.mnt() / "p.joined";
  EXPECT_EQ(wctest::read_file(joined), joinedkind::expected_joined(left, right));
  const uint64_t decoded = fx.stats()["decode"]["chunks"].get<uint64_t>();
  EXPECT_GT(decoded, 0u);

  // Another version of the right input, written on the store side.
  for (size_t i = 0; i < right.size(); i += 31) right[i] ^= 0xFF;
  wctest::write_file(fx.store() / "p.right.new", right);
  sfs::rename(fx.store() / "p.right.new", fx.store() / "p.right");
  // The kernel forgets what it cached (entries and pages) and asks again.
  ASSERT_EQ(sh("sync && echo 3 > /proc/sys/vm/drop_caches", &out), 0) << out;
  EXPECT_EQ(wctest::read_file(joined), joinedkind::expected_joined(left, right));
  // Decoded again from the new inputs, not served from the chunk cache.
  EXPECT_GE(fx.stats()["decode"]["chunks"].get<uint64_t>(), 2 * decoded - 1);
}
