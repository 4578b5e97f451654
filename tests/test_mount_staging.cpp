// tests/test_mount_staging.cpp — the staging directory on a real mount:
// files written with ordinary tools are encoded in the background, stay
// readable at their path with the same bytes and attributes, survive the
// daemon being killed at any point of an encode, and always end up with
// what the user wrote last.
//
// The daemon is driven as a user would (`cp`, `mv`, `truncate`, Python
// `safetensors.save_file`) plus the test hooks of mount/wcodecfs_main.cpp
// (WCODECFS_FAILPOINT to kill or pause an encode at a named point,
// WCODECFS_EVENT_LOG to record the points each daemon passed).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "mount_fixture.h"
#include "test_fs_store.h"
#include "testutil.h"

namespace sfs = std::filesystem;

namespace {

using namespace mounttest;

constexpr const char* kArea = ".wcodecfs-staging";

// Real model files written into staging. Under sanitizers only the small
// ones (every dtype family is among them).
std::vector<sfs::path> staged_sources() {
  std::vector<sfs::path> out;
  for (const auto& p : wctest::data_safetensors_files()) {
    if (fstest::kSanitized && sfs::file_size(p) > 2u << 20) continue;
    out.push_back(p);
  }
  return out;
}

std::string sha_of(const sfs::path& p) { return wctest::sha256_hex(wctest::read_file(p)); }

nlohmann::json staging_stats(const MountFixture& fx) { return fx.stats()["staging"]; }

// Waits until the queue is idle with at least `done` files encoded.
bool wait_encoded(const MountFixture& fx, uint64_t done, double seconds) {
  return wait_until(
      [&] {
        auto s = staging_stats(fx);
        return s.is_object() && s["done"].get<uint64_t>() >= done && s["pending"].get<uint64_t>() == 0 &&
               s["encoding"].get<uint64_t>() == 0;
      },
      seconds);
}

// Names under `dir` (recursively) that the queue owns.
std::vector<std::string> internal_leftovers(const sfs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = sfs::recursive_directory_iterator(dir, ec); it != sfs::recursive_directory_iterator(); ++it)
    if (it->path().filename().string().rfind(".wcodecfs-", 0) == 0) out.push_back(it->path().string());
  return out;
}

uint64_t disk_bytes(const sfs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = sfs::recursive_directory_iterator(dir, ec); it != sfs::recursive_directory_iterator(); ++it) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return total;
}

bool python_safetensors() { return sh("python3 -c 'import safetensors, numpy' 2>/dev/null") == 0; }

struct Attrs {
  off_t size;
  mode_t mode;
  struct timespec mtime;
};
Attrs attrs_of(const sfs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return {st.st_size, st.st_mode, st.st_mtim};
}

TEST(mount_staging, CopiedAndSavedFilesAreEncodedAndReadBackIdentical) {
  REQUIRE_FUSE();
  MountFixture fx;
  std::string out;
  ASSERT_EQ(fx.mount("encode_delay=300ms,encode_threads=2", &out), 0) << out;
  const sfs::path staging = fx.mnt() / "staging";
  ASSERT_TRUE(sfs::is_directory(staging));
  ASSERT_EQ(sh("mkdir " + q((staging / "cp").string())), 0);

  // cp: read back immediately, before any encode.
  std::map<std::string, std::string> want;  // mount-relative path -> sha
  uint64_t plain_bytes = 0;
  for (const auto& src : staged_sources()) {
    const sfs::path dst = staging / "cp" / src.filename();
    ASSERT_EQ(sh("cp " + q(src.string()) + " " + q(dst.string()), &out), 0) << out;
    want["cp/" + src.filename().string()] = sha_of(src);
    EXPECT_EQ(sha_of(dst), want["cp/" + src.filename().string()]) << dst;
    plain_bytes += sfs::file_size(src);
  }

  // Python safetensors.save_file (numpy) of every file numpy can hold.
  if (python_safetensors()) {
    const sfs::path ref = fx.scratch() / "ref";
    sfs::create_directory(ref);
    ASSERT_EQ(sh("mkdir " + q((staging / "py").string())), 0);
    std::string files;
    for (const auto& src : staged_sources()) files += " " + q(src.string());
    const std::string script =
        "import sys, os\n"
        "from safetensors.numpy import save_file\n"
        "from safetensors import safe_open\n"
        "dst, ref = sys.argv[1], sys.argv[2]\n"
        "for src in sys.argv[3:]:\n"
        "    try:\n"
        "        with safe_open(src, framework='numpy') as f:\n"
        "            t = {k: f.get_tensor(k) for k in f.keys()}\n"
        "    except Exception as e:\n"
        "        continue  # a dtype numpy lacks (bfloat16)\n"
        "    name = os.path.basename(src)\n"
        "    save_file(t, os.path.join(dst, name))\n"
        "    save_file(t, os.path.join(ref, name))\n"
        "    print(name)\n";
    wctest::write_file(fx.scratch() / "save.py", std::vector<uint8_t>(script.begin(), script.end()));
    ASSERT_EQ(sh("python3 " + q((fx.scratch() / "save.py").string()) + " " + q((staging / "py").string()) + " " +
                     q(ref.string()) + files,
                 &out),
              0)
        << out;
    std::istringstream names(out);
    std::string name;
    int saved = 0;
    while (std::getline(names, name)) {
      if (name.empty()) continue;
      want["py/" + name] = sha_of(ref / name);
      EXPECT_EQ(sha_of(staging / "py" / name), want["py/" + name]) << name;
      plain_bytes += sfs::file_size(ref / name);
      ++saved;
    }
    EXPECT_GE(saved, 3) << out;
  } else {
    std::cout << "SKIPPED part: python3 with safetensors+numpy not available\n";
  }

  std::map<std::string, Attrs> before;
  for (const auto& [rel, sha] : want) before[rel] = attrs_of(staging / rel);

  ASSERT_TRUE(wait_encoded(fx, want.size(), fstest::kSanitized ? 600 : 300)) << staging_stats(fx).dump(2);
  const auto st = staging_stats(fx);
  EXPECT_EQ(st["failed"].get<uint64_t>(), 0u) << st.dump(2);

  // The store holds the encoded form; the plain files are gone.
  const sfs::path area = fx.store() / kArea;
  for (const auto& [rel, sha] : want) {
    const sfs::path stored = area / rel;
    EXPECT_FALSE(sfs::exists(stored)) << stored << " is still plain";
    EXPECT_TRUE(sfs::exists(sfs::path(stored).replace_extension(".wcodec"))) << stored;
  }
  const uint64_t on_disk = disk_bytes(area);
  EXPECT_LT(on_disk, plain_bytes) << "store area " << on_disk << " B for " << plain_bytes << " B written";
  std::cout << "staged " << plain_bytes << " B, stored " << on_disk << " B ("
            << static_cast<double>(on_disk) / static_cast<double>(plain_bytes) << ")\n";
  EXPECT_TRUE(internal_leftovers(area).empty());

  // Same bytes, size, mode and mtime through the mount.
  for (const auto& [rel, sha] : want) {
    EXPECT_EQ(sha_of(staging / rel), sha) << rel;
    const Attrs a = attrs_of(staging / rel), b = before[rel];
    EXPECT_EQ(a.size, b.size) << rel;
    EXPECT_EQ(a.mode, b.mode) << rel;
    EXPECT_EQ(a.mtime.tv_sec, b.mtime.tv_sec) << rel;
    EXPECT_EQ(a.mtime.tv_nsec, b.mtime.tv_nsec) << rel;
  }
  // And after a remount (no state in the daemon).
  fx.unmount();
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  for (const auto& [rel, sha] : want) EXPECT_EQ(sha_of(staging / rel), sha) << rel;
}

TEST(mount_staging, OpenReaderKeepsCorrectBytesAcrossTheSwap) {
  REQUIRE_FUSE();
  MountFixture fx;
  std::string out;
  ASSERT_EQ(fx.mount("encode_delay=200ms", &out), 0) << out;
  const sfs::path src = fstest::original_of("stories260K.f32");
  const sfs::path dst = fx.mnt() / "staging" / "m.safetensors";
  ASSERT_EQ(sh("cp " + q(src.string()) + " " + q(dst.string())), 0);
  const auto orig = wctest::read_file(src);

  const int fd = ::open(dst.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> got(orig.size());
  const size_t half = orig.size() / 2;
  ASSERT_EQ(::pread(fd, got.data(), half, 0), static_cast<ssize_t>(half));
  void* map = ::mmap(nullptr, orig.size(), PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(map, MAP_FAILED);

  ASSERT_TRUE(wait_encoded(fx, 1, 120)) << staging_stats(fx).dump(2);
  ASSERT_TRUE(sfs::exists(fx.store() / kArea / "m.wcodec"));
  ASSERT_FALSE(sfs::exists(fx.store() / kArea / "m.safetensors"));

  ASSERT_EQ(::pread(fd, got.data() + half, orig.size() - half, static_cast<off_t>(half)),
            static_cast<ssize_t>(orig.size() - half));
  EXPECT_TRUE(got == orig) << "bytes read across the swap differ";
  EXPECT_EQ(std::memcmp(map, orig.data(), orig.size()), 0) << "mapped bytes differ";
  ::munmap(map, orig.size());
  ::close(fd);
  EXPECT_EQ(sha_of(dst), sha_of(src));
}

// -o encode_fast_decode: the staging encoder keeps a model only where it
// saves at least 1% (as `wcodec encode --fast-decode`): the stored file is
// the one the library writes with min_model_gain 0.01, not the default one
// (which differs on isnet-medium.rtn-ternary by about 1 KB).
TEST(mount_staging, EncodeFastDecodeOptionReachesTheStagingEncoder) {
  REQUIRE_FUSE();
  const sfs::path src = fstest::original_of("isnet-medium.rtn-ternary");
  MountFixture fx;
  std::string out;
  ASSERT_EQ(fx.mount("encode_delay=100ms,encode_fast_decode", &out), 0) << out;
  const sfs::path dst = fx.mnt() / "staging" / "t.safetensors";
  ASSERT_EQ(sh("cp " + q(src.string()) + " " + q(dst.string())), 0);
  ASSERT_TRUE(wait_encoded(fx, 1, fstest::kSanitized ? 600 : 120)) << staging_stats(fx).dump(2);
  const sfs::path stored = fx.store() / kArea / "t.wcodec";
  ASSERT_TRUE(sfs::exists(stored));
  EXPECT_EQ(sha_of(dst), sha_of(src));
  wcodec::EncodeConfig cfg;
  const sfs::path plain = fx.scratch() / "plain.wcodec", fast = fx.scratch() / "fast.wcodec";
  ASSERT_TRUE(wcodec::encode_safetensors_file(src.string(), plain.string(), cfg).ok());
  cfg.min_model_gain = 0.01;
  ASSERT_TRUE(wcodec::encode_safetensors_file(src.string(), fast.string(), cfg).ok());
  ASSERT_NE(sfs::file_size(plain), sfs::file_size(fast));
  EXPECT_EQ(sfs::file_size(stored), sfs::file_size(fast));
}

TEST(mount_staging, PosixOperationsInsideStagingAndReadOnlyOutside) {
  REQUIRE_FUSE();
  MountFixture fx;
  fstest::build_store(fx.store(), /*with_large=*/false);
  std::string out;
  // A long delay: nothing is encoded while this test works on plain files.
  ASSERT_EQ(fx.mount("encode_delay=600s", &out), 0) << out;
  const sfs::path s = fx.mnt() / "staging";
  auto run = [&](const std::string& cmd) {
    std::string o;
    const int rc = sh(cmd, &o);
    EXPECT_EQ(rc, 0) << cmd << "\n" << o;
    return o;
  };
  run("cd " + q(s.string()) + " && mkdir -p a/b && echo hello > a/b/f.txt && ln -s b/g.txt a/link && "
      "mv a/b/f.txt a/b/g.txt && chmod 600 a/b/g.txt && touch -d '2020-01-02 03:04:05' a/b/g.txt && "
      "truncate -s 3 a/b/g.txt && printf XY | dd of=a/b/g.txt bs=1 seek=1 conv=notrunc status=none && "
      "mkdir gone && rmdir gone");
  EXPECT_EQ(run("cat " + q((s / "a/link").string())), "hXY");
  struct stat st {};
  ASSERT_EQ(::stat((s / "a/b/g.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_size, 3);
  ASSERT_EQ(::lstat((s / "a/link").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_FALSE(sfs::exists(s / "gone"));
  // Backed by the hidden area, which the mount does not show.
  EXPECT_TRUE(sfs::exists(fx.store() / kArea / "a/b/g.txt"));
  EXPECT_FALSE(sfs::exists(fx.mnt() / kArea));
  run("ls -a " + q(fx.mnt().string()) + " | grep -vx " + q(kArea) + " >/dev/null");
  std::string listing = run("ls -a " + q(fx.mnt().string()));
  EXPECT_EQ(listing.find(kArea), std::string::npos) << listing;
  EXPECT_NE(listing.find("staging"), std::string::npos) << listing;
  // Random writes, fsync, and rename over an existing file.
  run("cd " + q(s.string()) + " && python3 -c \"import os\n"
      "fd = os.open('r.bin', os.O_CREAT | os.O_RDWR, 0o644)\n"
      "os.pwrite(fd, b'B' * 10, 100)\n"
      "os.pwrite(fd, b'A' * 10, 0)\n"
      "os.fsync(fd)\n"
      "os.close(fd)\" && echo old > t.txt && mv r.bin t.txt");
  const auto r = wctest::read_file(s / "t.txt");
  ASSERT_EQ(r.size(), 110u);
  EXPECT_EQ(r[0], 'A');
  EXPECT_EQ(r[50], 0);
  EXPECT_EQ(r[105], 'B');
  // Reserved names are refused.
  EXPECT_NE(sh("touch " + q((s / "x.wcodec").string()) + " 2>/dev/null"), 0);
  EXPECT_NE(sh("touch " + q((s / ".wcodecfs-lock.x").string()) + " 2>/dev/null"), 0);
  // Outside staging the mount stays read-only; moving in or out copies.
  errno = 0;
  EXPECT_NE(::mkdir((fx.mnt() / "newdir").c_str(), 0755), 0);
  EXPECT_EQ(errno, EROFS);
  errno = 0;
  EXPECT_NE(::rename((fx.mnt() / "notes.txt").c_str(), (s / "notes.txt").c_str()), 0);
  EXPECT_EQ(errno, EXDEV);
  run("mv " + q((s / "t.txt").string()) + " " + q((s / "a" / "t2.txt").string()));
  run("cp " + q((fx.mnt() / "notes.txt").string()) + " " + q(s.string()) + "/");
  EXPECT_EQ(sha_of(s / "notes.txt"), sha_of(fx.store() / "notes.txt"));
  run("rm -r " + q((s / "a").string()));
  EXPECT_FALSE(sfs::exists(fx.store() / kArea / "a"));
}

TEST(mount_staging, OwnershipIsKeptAndEnforced) {
  REQUIRE_FUSE();
  if (::geteuid() != 0) GTEST_SKIP() << "SKIPPED: needs root (to act as two other users)";
  if (sh("command -v setpriv >/dev/null") != 0) GTEST_SKIP() << "SKIPPED: setpriv is not installed";
  MountFixture fx;
  std::string out;
  // Other users reach the mount only with allow_other; the scratch
  // directory must be traversable for them.
  ::chmod(fx.scratch().c_str(), 0755);
  ASSERT_EQ(fx.mount("allow_other,encode_delay=600s", &out), 0) << out;
  const sfs::path s = fx.mnt() / "staging";
  auto as = [&](int uid, const std::string& cmd) {
    return sh("setpriv --reuid=" + std::to_string(uid) + " --regid=" + std::to_string(uid) +
                  " --clear-groups sh -c " + q(cmd) + " 2>&1",
              &out);
  };
  ASSERT_EQ(as(65534, "echo mine > " + s.string() + "/u1.txt && chmod 644 " + s.string() + "/u1.txt"), 0) << out;
  struct stat st {};
  ASSERT_EQ(::stat((fx.store() / kArea / "u1.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  ASSERT_EQ(::stat((s / "u1.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  // Another user may read but not write or remove it (sticky staging root).
  EXPECT_EQ(as(65533, "cat " + s.string() + "/u1.txt"), 0) << out;
  EXPECT_NE(as(65533, "echo theirs > " + s.string() + "/u1.txt"), 0);
  EXPECT_NE(as(65533, "rm -f " + s.string() + "/u1.txt"), 0);
  EXPECT_EQ(sha_of(s / "u1.txt"), wctest::sha256_hex(std::vector<uint8_t>{'m', 'i', 'n', 'e', '\n'}));
  // Nobody but root writes outside staging.
  EXPECT_NE(as(65534, "touch " + fx.mnt().string() + "/x"), 0);
}

// The daemon is SIGKILLed at one point of an encode; a remount recovers.
void crash_at(const std::string& point) {
  SCOPED_TRACE("failpoint " + point);
  MountFixture fx;
  std::string out;
  ASSERT_EQ(fx.mount("encode_delay=1s", &out, "WCODECFS_FAILPOINT=" + point + ":kill"), 0) << out;
  const std::vector<std::string> stems = {"stories260K.rtn-int8", "silero_vad_16k.bf16"};
  for (const auto& stem : stems)
    ASSERT_EQ(sh("cp " + q(fstest::original_of(stem).string()) + " " +
                 q((fx.mnt() / "staging" / (stem + ".safetensors")).string())),
              0);
  // The daemon dies at the failpoint.
  ASSERT_TRUE(wait_until([&] { return daemons_for(fx.mnt()).empty(); }, 120)) << "the failpoint was not reached";
  fx.unmount();  // (the mount is dead: lazy unmount)

  // On disk: each file is plain or encoded (verified), never neither.
  const sfs::path area = fx.store() / kArea;
  for (const auto& stem : stems) {
    const bool plain = sfs::exists(area / (stem + ".safetensors"));
    const bool enc = sfs::exists(area / (stem + ".wcodec"));
    EXPECT_TRUE(plain || enc) << stem << " vanished";
    if (plain) {
      EXPECT_EQ(sha_of(area / (stem + ".safetensors")), sha_of(fstest::original_of(stem))) << stem;
    }
  }

  ASSERT_EQ(fx.mount("encode_delay=100ms", &out), 0) << out;
  for (const auto& stem : stems)
    EXPECT_EQ(sha_of(fx.mnt() / "staging" / (stem + ".safetensors")), sha_of(fstest::original_of(stem))) << stem;
  // Unfinished files are encoded after the remount; nothing is left over.
  ASSERT_TRUE(wait_until(
      [&] {
        for (const auto& stem : stems)
          if (!sfs::exists(area / (stem + ".wcodec")) || sfs::exists(area / (stem + ".safetensors"))) return false;
        return true;
      },
      120))
      << staging_stats(fx).dump(2);
  ASSERT_TRUE(wait_encoded(fx, 0, 60));
  EXPECT_TRUE(internal_leftovers(area).empty()) << internal_leftovers(area).front();
  for (const auto& stem : stems)
    EXPECT_EQ(sha_of(fx.mnt() / "staging" / (stem + ".safetensors")), sha_of(fstest::original_of(stem))) << stem;
}

TEST(mount_staging, KillDuringEncodeAtEveryPointThenRemount) {
  REQUIRE_FUSE();
  for (const char* point : {"locked", "temp-written", "verified", "renamed", "unlinked"}) crash_at(point);
}

// A change made while the file is being encoded (the encode is paused after
// its temp is written) always wins.
void change_during_encode(const std::string& what) {
  SCOPED_TRACE(what);
  MountFixture fx;
  std::string out;
  ASSERT_EQ(fx.mount("encode_delay=100ms", &out, "WCODECFS_FAILPOINT=temp-written:sleep=1500"), 0) << out;
  const sfs::path s = fx.mnt() / "staging";
  const sfs::path a = fstest::original_of("stories260K.rtn-int8"), b = fstest::original_of("silero_vad_16k.bf16");
  ASSERT_EQ(sh("cp " + q(a.string()) + " " + q((s / "x.safetensors").string())), 0);
  ASSERT_TRUE(wait_until([&] { return staging_stats(fx)["encoding"].get<uint64_t>() == 1; }, 60));
  std::string want_path = "x.safetensors", want_sha;
  if (what == "rewrite") {
    ASSERT_EQ(sh("cp " + q(b.string()) + " " + q((s / "x.safetensors").string())), 0);
    want_sha = sha_of(b);
  } else if (what == "truncate") {
    ASSERT_EQ(::truncate((s / "x.safetensors").c_str(), 1000), 0);
    auto bytes = wctest::read_file(a);
    bytes.resize(1000);
    want_sha = wctest::sha256_hex(bytes);
  } else if (what == "rename") {
    ASSERT_EQ(::rename((s / "x.safetensors").c_str(), (s / "y.safetensors").c_str()), 0);
    want_path = "y.safetensors";
    want_sha = sha_of(a);
  } else if (what == "unlink") {
    ASSERT_EQ(::unlink((s / "x.safetensors").c_str()), 0);
  }
  ASSERT_TRUE(wait_until(
      [&] {
        auto st = staging_stats(fx);
        return st["encoding"].get<uint64_t>() == 0 && st["pending"].get<uint64_t>() == 0;
      },
      120));
  // Let a follow-up encode (quiet period) run to the end as well.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  ASSERT_TRUE(wait_encoded(fx, 0, 120));
  const sfs::path area = fx.store() / kArea;
  if (what == "unlink") {
    EXPECT_FALSE(sfs::exists(s / "x.safetensors"));
    EXPECT_FALSE(sfs::exists(area / "x.safetensors"));
    EXPECT_FALSE(sfs::exists(area / "x.wcodec"));
  } else {
    EXPECT_EQ(sha_of(s / want_path), want_sha);
    if (what == "rename") {
      EXPECT_FALSE(sfs::exists(s / "x.safetensors"));
      EXPECT_FALSE(sfs::exists(area / "x.wcodec"));
    }
  }
  EXPECT_TRUE(internal_leftovers(area).empty());
  // The same after a remount.
  fx.unmount();
  ASSERT_EQ(fx.mount("encode_delay=100ms", &out), 0) << out;
  if (what != "unlink") {
    EXPECT_EQ(sha_of(s / want_path), want_sha);
  }
}

TEST(mount_staging, RewriteTruncateRenameUnlinkDuringEncodeWin) {
  REQUIRE_FUSE();
  for (const char* what : {"rewrite", "truncate", "rename", "unlink"}) change_during_encode(what);
}

TEST(mount_staging, TwoDaemonsOverOneStoreNeverEncodeTheSameFileAtOnce) {
  REQUIRE_FUSE();
  MountFixture fx1;
  // The second daemon serves the same store at another mountpoint.
  const sfs::path area = fx1.store() / kArea;
  sfs::create_directory(area);
  std::vector<std::string> stems = {"stories260K.rtn-int8", "stories260K.bf16", "silero_vad_16k.bf16",
                                    "stories260K.rtn-int4", "silero_vad_16k.f32", "stories260K.rtn-ternary"};
  for (const auto& stem : stems) sfs::copy_file(fstest::original_of(stem), area / (stem + ".safetensors"));
  const sfs::path events = fx1.scratch() / "events";
  const std::string env = "WCODECFS_EVENT_LOG=" + q(events.string()) + " WCODECFS_FAILPOINT=temp-written:sleep=200";
  std::string out;
  MountFixture fx2;
  sfs::remove(fx2.store());
  sfs::create_directory_symlink(fx1.store(), fx2.store());
  ASSERT_EQ(fx1.mount("encode_delay=50ms,encode_threads=2", &out, env), 0) << out;
  ASSERT_EQ(fx2.mount("encode_delay=50ms,encode_threads=2", &out, env), 0) << out;
  ASSERT_TRUE(wait_until(
      [&] {
        for (const auto& stem : stems)
          if (!sfs::exists(area / (stem + ".wcodec")) || sfs::exists(area / (stem + ".safetensors"))) return false;
        return true;
      },
      180));
  ASSERT_TRUE(wait_encoded(fx1, 0, 60));
  ASSERT_TRUE(wait_encoded(fx2, 0, 60));
  for (const auto& stem : stems) {
    EXPECT_EQ(sha_of(fx1.mnt() / "staging" / (stem + ".safetensors")), sha_of(fstest::original_of(stem)));
    EXPECT_EQ(sha_of(fx2.mnt() / "staging" / (stem + ".safetensors")), sha_of(fstest::original_of(stem)));
  }
  // From the event log: per file, the lock holds of the two daemons never
  // overlap and exactly one swap happened.
  std::string log_text;
  {
    std::ifstream all(events);
    std::stringstream ss;
    ss << all.rdbuf();
    log_text = ss.str();
  }
  SCOPED_TRACE("event log:\n" + log_text);
  std::istringstream in(log_text);
  std::string line;
  std::map<std::string, pid_t> holder;
  std::map<std::string, int> swaps;
  std::set<pid_t> pids;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    pid_t pid;
    std::string point, rel;
    ls >> pid >> point >> rel;
    pids.insert(pid);
    if (point == "locked") {
      EXPECT_EQ(holder.count(rel), 0u) << rel << " locked by " << pid << " while held by " << holder[rel];
      holder[rel] = pid;
    } else if (point == "unlocking") {
      EXPECT_EQ(holder[rel], pid) << rel;
      holder.erase(rel);
    } else if (point == "renamed") {
      ++swaps[rel];
    }
  }
  EXPECT_EQ(pids.size(), 2u) << "both daemons should have taken part";
  for (const auto& stem : stems) EXPECT_EQ(swaps[stem + ".safetensors"], 1) << stem;
  fx2.unmount();
  fx1.unmount();
}

}  // namespace
