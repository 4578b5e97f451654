// tests/test_mount_trellis.cpp — Trellis stores through a real FUSE mount
// (docs/trellis.md §7): a v2 store quantized from real weights is shown as
// its v3 form, every file of which has the SHA-256 of the file `wcodec
// trellis migrate` writes for the same store (read with sha256sum, cp and
// parallel readers at random offsets); the v2 entries are hidden, the
// config and tokenizer files stay; a v3 store is shown unchanged; the
// view's files are passthrough and inline extents (nothing decoded); a
// changed v2 store is a changed view; the view passes `validate` read
// through the mount.
//
// Needs /dev/fuse and fusermount3 (CI runs as root); skipped otherwise.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "mount_fixture.h"
#include "testutil.h"

namespace sfs = std::filesystem;
using namespace mounttest;

namespace {

std::set<std::string> names(const sfs::path& d) {
  std::set<std::string> s;
  for (const auto& e : sfs::directory_iterator(d)) s.insert(e.path().filename().string());
  return s;
}

std::string tool() { return q(WCODEC_TOOL); }

}  // namespace

TEST(mount_trellis, V2StoreIsShownAsMigratesOutput) {
  REQUIRE_FUSE();
  MountFixture fx;
  const sfs::path v2 = fx.store() / "stories-v2", v3 = fx.store() / "stories-v3", isn = fx.store() / "isnet-v2";
  const sfs::path ref = fx.scratch() / "migrated", isref = fx.scratch() / "isnet-migrated";
  std::string out;
  const auto data = wctest::data_dir();
  ASSERT_EQ(sh(tool() + " trellis quantize " + q(data / "stories260K.f32.safetensors") + " " + q(v2) +
                   " --bits 3 --hadamard --layout v2",
               &out),
            0)
      << out;
  ASSERT_EQ(sh(tool() + " trellis quantize " + q(data / "isnet-medium.f16.safetensors") + " " + q(isn) +
                   " --bits 5 --layout v2 --max-weights 30",
               &out),
            0)
      << out;
  ASSERT_EQ(sh(tool() + " trellis quantize " + q(data / "stories260K.f32.safetensors") + " " + q(v3) +
                   " --bits 6 --layout v3",
               &out),
            0)
      << out;
  const std::string tok = "{\"model\": {\"type\": \"BPE\"}}\n";
  wctest::write_file(v2 / "tokenizer.json", std::vector<uint8_t>(tok.begin(), tok.end()));
  ASSERT_EQ(sh(tool() + " trellis migrate " + q(v2) + " " + q(ref), &out), 0) << out;
  ASSERT_EQ(sh(tool() + " trellis migrate " + q(isn) + " " + q(isref), &out), 0) << out;

  ASSERT_EQ(fx.mount("", &out), 0) << out;
  const sfs::path mv2 = fx.mnt() / "stories-v2", mv3 = fx.mnt() / "stories-v3", mis = fx.mnt() / "isnet-v2";
  // Names: exactly migrate's; the v2 entries hidden.
  EXPECT_EQ(names(mv2), names(ref));
  EXPECT_EQ(names(mis), names(isref));
  EXPECT_TRUE(names(ref).count("tokenizer.json"));
  EXPECT_EQ(names(mv3), names(v3)) << "a v3 store is shown unchanged";
  // stat decodes and copies nothing; sizes are known from the indexes.
  for (const auto& n : names(ref)) EXPECT_EQ(sfs::file_size(mv2 / n), sfs::file_size(ref / n)) << n;
  // Bytes: SHA-256 of every file, read through the mount by sha256sum.
  for (const auto& [view, want] : {std::pair{mv2, ref}, std::pair{mis, isref}, std::pair{mv3, v3}}) {
    for (const auto& n : names(want)) {
      SCOPED_TRACE(view / n);
      std::string a, b;
      ASSERT_EQ(sh("sha256sum < " + q(view / n), &a), 0) << a;
      ASSERT_EQ(sh("sha256sum < " + q(want / n), &b), 0) << b;
      EXPECT_EQ(a, b);
    }
  }
  // cp of the whole view, and validate of the view read through the mount.
  ASSERT_EQ(sh("cp -r " + q(mv2) + " " + q(fx.scratch() / "copy") + " && diff -r " + q(fx.scratch() / "copy") + " " +
                   q(ref),
               &out),
            0)
      << out;
  EXPECT_EQ(sh(tool() + " trellis validate " + q(mis), &out), 0) << out;
  EXPECT_NE(out.find("valid Trellis v3 store"), std::string::npos) << out;

  // Parallel readers at random offsets of the largest shard.
  const sfs::path shard = mis / "model-00001-of-00001.safetensors";
  const auto whole = wctest::read_file(isref / "model-00001-of-00001.safetensors");
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      const int fd = ::open(shard.c_str(), O_RDONLY);
      if (fd < 0) {
        ++bad;
        return;
      }
      std::mt19937_64 rng(t);
      std::vector<uint8_t> buf(200000);
      for (int k = 0; k < 50; ++k) {
        const uint64_t off = rng() % whole.size();
        const size_t n = std::min<uint64_t>(1 + rng() % buf.size(), whole.size() - off);
        if (::pread(fd, buf.data(), n, static_cast<off_t>(off)) != static_cast<ssize_t>(n) ||
            std::memcmp(buf.data(), whole.data() + off, n) != 0)
          ++bad;
      }
      ::close(fd);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(fx.stats()["decode"]["chunks"].get<uint64_t>(), 0u) << "the view decodes nothing";
}

// A change to any v2 input is a changed view (new sizes, new bytes), and a
// v2 store that no longer validates is shown as it is.
TEST(mount_trellis, ChangedV2StoreIsAChangedView) {
  REQUIRE_FUSE();
  if (::access("/proc/sys/vm/drop_caches", W_OK) != 0)
    GTEST_SKIP() << "SKIPPED: needs to drop the kernel's dentry cache (root)";
  MountFixture fx;
  const sfs::path v2 = fx.store() / "m";
  std::string out;
  ASSERT_EQ(sh(tool() + " trellis quantize " + q(wctest::data_dir() / "stories260K.f32.safetensors") + " " + q(v2) +
                   " --bits 4 --layout v2",
               &out),
            0)
      << out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  const sfs::path idx = fx.mnt() / "m" / "model.safetensors.index.json";
  ASSERT_TRUE(sfs::exists(idx));
  const auto before = wctest::read_file(idx);
  // Requantize layer 0 at 2 bits with the same names (a new tensor file and index).
  const sfs::path tmp = fx.scratch() / "q2";
  ASSERT_EQ(sh(tool() + " trellis quantize " + q(wctest::data_dir() / "stories260K.f32.safetensors") + " " + q(tmp) +
                   " --bits 2 --layout v2",
               &out),
            0)
      << out;
  for (const char* f : {"tensor_0000.safetensors", "index.json"}) {
    sfs::copy_file(tmp / "layer_0000" / f, v2 / "layer_0000" / (std::string(f) + ".new"));
    sfs::rename(v2 / "layer_0000" / (std::string(f) + ".new"), v2 / "layer_0000" / f);
  }
  ASSERT_EQ(sh(tool() + " trellis migrate " + q(v2) + " " + q(fx.scratch() / "ref"), &out), 0) << out;
  // The kernel forgets what it cached (entries and pages) and asks again.
  auto drop = [&] { return sh("sync && echo 3 > /proc/sys/vm/drop_caches") == 0; };
  const bool changed = wait_until([&] { return drop() && wctest::read_file(idx) != before; }, 5);
  EXPECT_TRUE(changed) << "the view did not follow the store";
  for (const auto& n : names(fx.scratch() / "ref"))
    EXPECT_EQ(wctest::read_file(fx.mnt() / "m" / n), wctest::read_file(fx.scratch() / "ref" / n)) << n;
  // Break it: a component removed from layer 1's index -> the v2 store as it is.
  sfs::remove(v2 / "layer_0001" / "index.json");
  const bool shown_as_is = wait_until([&] { return drop() && sfs::exists(fx.mnt() / "m" / "layer_0001"); }, 5);
  EXPECT_TRUE(shown_as_is);
  EXPECT_FALSE(sfs::exists(fx.mnt() / "m" / "model.safetensors.index.json"));
}
