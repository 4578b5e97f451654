// tests/test_mount_passthrough.cpp — plain files through a real mount: the
// read replies that carry ranges of backing files (spliced into /dev/fuse).
//
// Plain files of awkward sizes read whole, in pieces and at random offsets
// must equal the stored bytes; a stored file that shrinks under an open
// handle gives a short read of its own bytes; a file written in the staging
// directory reads back what was written through the same and other
// handles, as it grows.
//
// Needs /dev/fuse and fusermount3 (CI runs as root); skipped otherwise.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "mount_fixture.h"
#include "testutil.h"

namespace sfs = std::filesystem;

namespace {

using namespace mounttest;

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t x = rng();
    std::memcpy(v.data() + i, &x, std::min<size_t>(8, n - i));
  }
  return v;
}

// pread until n bytes or end of file; the bytes read.
std::vector<uint8_t> pread_all(int fd, uint64_t off, size_t n) {
  std::vector<uint8_t> out(n);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, out.data() + done, n - done, static_cast<off_t>(off + done));
    if (r < 0 && errno == EINTR) continue;
    EXPECT_GE(r, 0) << std::strerror(errno);
    if (r <= 0) break;
    done += static_cast<size_t>(r);
  }
  out.resize(done);
  return out;
}

bool same_range(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, uint64_t off) {
  return off + got.size() <= want.size() &&
         std::equal(got.begin(), got.end(), want.begin() + static_cast<std::ptrdiff_t>(off));
}

TEST(mount_passthrough, PlainFilesOfAwkwardSizesReadBackExactly) {
  REQUIRE_FUSE();
  MountFixture fx;
  const std::vector<size_t> sizes = {0, 1, 4095, 4097, 2 * 4096, 131071, (1u << 20) + 1, (5u << 20) + 12345};
  std::vector<std::vector<uint8_t>> files;
  for (size_t i = 0; i < sizes.size(); ++i) {
    files.push_back(random_bytes(sizes[i], i + 1));
    wctest::write_file(fx.store() / ("plain" + std::to_string(i) + ".bin"), files.back());
  }
  std::string out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    SCOPED_TRACE("size " + std::to_string(sizes[i]));
    const sfs::path p = fx.mnt() / ("plain" + std::to_string(i) + ".bin");
    EXPECT_EQ(sfs::file_size(p), sizes[i]);
    EXPECT_TRUE(wctest::read_file(p) == files[i]) << "whole-file read differs";
    // Uncached reads too (direct I/O is not needed: a fresh open of a plain
    // file drops its pages, keep_cache is off).
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    std::mt19937_64 rng(99 + i);
    for (int k = 0; k < 40 && sizes[i] > 0; ++k) {
      const uint64_t off = rng() % sizes[i];
      const size_t len = 1 + rng() % (3u << 20);
      const auto got = pread_all(fd, off, len);
      EXPECT_EQ(got.size(), std::min<uint64_t>(len, sizes[i] - off)) << "at " << off;
      EXPECT_TRUE(same_range(got, files[i], off)) << "at " << off << " +" << len;
    }
    EXPECT_TRUE(pread_all(fd, sizes[i], 4096).empty());
    ::close(fd);
  }
  // Through ordinary tools as well.
  ASSERT_EQ(sh("cmp " + q((fx.store() / "plain7.bin").string()) + " " + q((fx.mnt() / "plain7.bin").string()), &out),
            0)
      << out;
}

// A stored file cut short while a reader has it open: the reader gets the
// bytes that remain and then end of file, never zeros in their place.
TEST(mount_passthrough, StoredFileThatShrinksGivesAShortReadOfItsOwnBytes) {
  REQUIRE_FUSE();
  MountFixture fx;
  const size_t n = 4u << 20;
  const auto bytes = random_bytes(n, 42);
  wctest::write_file(fx.store() / "shrinks.bin", bytes);
  std::string out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  const sfs::path p = fx.mnt() / "shrinks.bin";
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(pread_all(fd, 0, 4096).size(), 4096u);
  const size_t cut = (1u << 20) + 777;
  ASSERT_EQ(::truncate((fx.store() / "shrinks.bin").c_str(), static_cast<off_t>(cut)), 0);
  // Past the new end (the kernel still believes the old size for a while).
  const auto got = pread_all(fd, 1u << 20, 2u << 20);
  EXPECT_LE(got.size(), cut - (1u << 20));
  EXPECT_TRUE(same_range(got, bytes, 1u << 20)) << "bytes not the file's";
  // From the start: what remains, exactly.
  const auto all = pread_all(fd, 0, n);
  EXPECT_LE(all.size(), cut);
  EXPECT_TRUE(same_range(all, bytes, 0)) << "bytes not the file's";
  ::close(fd);
  // A fresh open sees the new size and reads it whole.
  EXPECT_TRUE(wctest::read_file(p) == std::vector<uint8_t>(bytes.begin(), bytes.begin() + cut));
}

// A file being written in the staging directory reads back its own writes,
// through the writing handle and through another, as it grows.
TEST(mount_passthrough, StagedFileReadsBackItsOwnWrites) {
  REQUIRE_FUSE();
  MountFixture fx;
  std::string out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  const sfs::path p = fx.mnt() / "staging" / "notes.bin";  // not a checkpoint: never encoded
  const int w = ::open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(w, 0) << std::strerror(errno);
  std::vector<uint8_t> want;
  std::mt19937_64 rng(5);
  for (int step = 0; step < 12; ++step) {
    const size_t len = (step % 3 == 0) ? (1u << 20) + 4097 : 1 + rng() % 200000;
    const auto piece = random_bytes(len, 1000 + step);
    ASSERT_EQ(::pwrite(w, piece.data(), piece.size(), static_cast<off_t>(want.size())),
              static_cast<ssize_t>(piece.size()))
        << std::strerror(errno);
    want.insert(want.end(), piece.begin(), piece.end());
    // Overwrite a range in the middle, then read everything back.
    if (want.size() > 10000) {
      const uint64_t at = rng() % (want.size() - 5000);
      const auto patch = random_bytes(5000, 2000 + step);
      ASSERT_EQ(::pwrite(w, patch.data(), patch.size(), static_cast<off_t>(at)), 5000);
      std::copy(patch.begin(), patch.end(), want.begin() + static_cast<std::ptrdiff_t>(at));
    }
    EXPECT_TRUE(pread_all(w, 0, want.size() + 4096) == want) << "writer's handle, step " << step;
    const int r = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(r, 0) << std::strerror(errno);
    EXPECT_TRUE(pread_all(r, 0, want.size() + 4096) == want) << "second handle, step " << step;
    const uint64_t off = rng() % want.size();
    const auto part = pread_all(r, off, 300000);
    EXPECT_EQ(part.size(), std::min<uint64_t>(300000, want.size() - off));
    EXPECT_TRUE(same_range(part, want, off)) << "second handle at " << off;
    ::close(r);
  }
  ASSERT_EQ(::close(w), 0);
  EXPECT_TRUE(wctest::read_file(p) == want);
  EXPECT_TRUE(wctest::read_file(fx.store() / ".wcodecfs-staging" / "notes.bin") == want);
}

}  // namespace
