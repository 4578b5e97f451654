// tests/test_fs_extents.cpp — the extents of a VirtualFile and its read
// path, in-process (no FUSE, no store): passthrough ranges as fd slices
// (copied with ReadResult::gather / copy_to), backing files that shrink or
// grow after open, zero extents, reads across every kind of boundary, and
// explicit segments (validation, readahead stopping at a segment's end).
//
// Layouts are built by hand from a scratch backing file, inline buffers and
// a synthetic ChunkSource whose chunk bytes are a function of the stream
// position, so every byte of a read has one expected value.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "testutil.h"
#include "wcodecfs/batch_decoder.h"
#include "wcodecfs/chunk_cache.h"
#include "wcodecfs/fs_stats.h"
#include "wcodecfs/virtual_file.h"

using namespace wcodecfs;
namespace sfs = std::filesystem;

namespace {

constexpr uint64_t K = 1024, M = 1024 * K;

uint8_t file_byte(uint64_t pos) { return static_cast<uint8_t>((pos * 2654435761u) >> 13); }
uint8_t stream_byte(uint64_t pos) { return static_cast<uint8_t>(pos * 131 + 7); }

std::vector<uint8_t> file_bytes(uint64_t n) {
  std::vector<uint8_t> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = file_byte(i);
  return v;
}

// A stream [begin, end) in chunks of `chunk` bytes whose byte at position p
// is stream_byte(p). Counts decodes per chunk.
class PatternSource final : public ChunkSource {
 public:
  PatternSource(uint64_t begin, uint64_t end, uint32_t chunk)
      : begin_(begin), end_(end), chunk_(chunk), decoded_((end - begin + chunk - 1) / chunk) {}
  size_t num_chunks() const override { return decoded_.size(); }
  uint64_t chunk_offset(size_t i) const override { return begin_ + i * chunk_; }
  uint32_t chunk_size(size_t i) const override {
    return static_cast<uint32_t>(std::min<uint64_t>(chunk_, end_ - chunk_offset(i)));
  }
  uint64_t stream_begin() const override { return begin_; }
  uint64_t stream_end() const override { return end_; }
  size_t chunk_at(uint64_t pos) const override {
    return pos < begin_ || pos >= end_ ? SIZE_MAX : static_cast<size_t>((pos - begin_) / chunk_);
  }
  Status decode(size_t i, uint8_t* out) const override {
    const uint64_t o = chunk_offset(i);
    for (uint32_t k = 0; k < chunk_size(i); ++k) out[k] = stream_byte(o + k);
    decoded_[i].fetch_add(1);
    return Status::OK();
  }
  const std::string& name() const override { return name_; }
  // Highest chunk index decoded so far, or -1.
  long last_decoded() const {
    long last = -1;
    for (size_t i = 0; i < decoded_.size(); ++i)
      if (decoded_[i].load()) last = static_cast<long>(i);
    return last;
  }
  uint64_t total_decodes() const {
    uint64_t n = 0;
    for (const auto& d : decoded_) n += d.load();
    return n;
  }

 private:
  const uint64_t begin_, end_;
  const uint32_t chunk_;
  mutable std::vector<std::atomic<uint64_t>> decoded_;
  const std::string name_ = "pattern";
};

// A cache with a one-thread CPU decoder.
std::shared_ptr<ChunkCache> make_cache() {
  auto stats = std::make_shared<Stats>();
  return ChunkCache::create(64 * M, std::make_shared<CpuBatchDecoder>(1, stats), stats);
}

// A scratch backing file of n pattern bytes (file_byte), opened read-only.
struct Backing {
  wctest::ScratchDir dir;
  sfs::path path;
  std::shared_ptr<const BackingFile> file;
  explicit Backing(uint64_t n, int flags = O_RDONLY) {
    path = dir / "backing.bin";
    wctest::write_file(path, file_bytes(n));
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    file = std::make_shared<const BackingFile>(fd, "backing.bin");
  }
  void truncate(uint64_t n) const { ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(n)), 0); }
};

std::shared_ptr<const VirtualFile> make_or_fail(std::string name, std::vector<Extent> ex,
                                                std::vector<uint64_t> segs = {}) {
  auto r = VirtualFile::make(std::move(name), std::move(ex), std::move(segs));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : nullptr;
}

std::shared_ptr<const std::vector<uint8_t>> inline_bytes(uint64_t n, uint8_t seed) {
  auto v = std::make_shared<std::vector<uint8_t>>(n);
  for (uint64_t i = 0; i < n; ++i) (*v)[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

// ------------------------------------------------------------ fd slices

TEST(fs_extents, PassthroughReadsAreFdSlicesThatGatherTheFileBytes) {
  const uint64_t n = 3 * M + 12345;
  Backing b(n);
  auto vf = make_or_fail("plain.bin", {Extent{0, n, PassthroughExtent{b.file, 0}}});
  ASSERT_TRUE(vf);
  auto cache = make_cache();
  const auto want = file_bytes(n);
  for (const auto& [off, len] : std::vector<std::pair<uint64_t, uint64_t>>{
           {0, 1}, {0, 128 * K}, {4095, 2}, {M - 3, M + 7}, {n - 10, 10}, {n - 10, 1000}, {0, n}, {n, 5}}) {
    auto r = vf->read(off, len, *cache, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const uint64_t expect = off >= n ? 0 : std::min(len, n - off);
    EXPECT_EQ(r->size(), expect);
    EXPECT_EQ(r->fd_bytes(), expect);
    if (expect) {
      ASSERT_EQ(r->slices().size(), 1u);
      const ReadSlice& s = r->slices()[0];
      EXPECT_TRUE(s.is_fd());
      EXPECT_EQ(s.data, nullptr);
      EXPECT_EQ(s.file->fd(), b.file->fd());
      EXPECT_EQ(s.offset, off);
      EXPECT_EQ(s.size, expect);
    }
    const auto got = r->gather();
    ASSERT_EQ(got.size(), expect);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin() + static_cast<std::ptrdiff_t>(off)))
        << "at " << off << " +" << len;
    std::vector<uint8_t> out(expect + 1, 0xEE);
    auto c = r->copy_to(out.data());
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(*c, expect);
    EXPECT_EQ(out[expect], 0xEE) << "copy_to wrote past size()";
  }
}

TEST(fs_extents, PassthroughAtAnOffsetOfItsFile) {
  Backing b(2 * M);
  // The virtual file is bytes [700000, 700000 + 1M) of the backing file.
  auto vf = make_or_fail("part.bin", {Extent{0, M, PassthroughExtent{b.file, 700000}}});
  ASSERT_TRUE(vf);
  auto cache = make_cache();
  auto r = vf->read(1000, 5000, *cache, nullptr);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->slices().size(), 1u);
  EXPECT_EQ(r->slices()[0].offset, 701000u);
  const auto got = r->gather();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], file_byte(701000 + i)) << i;
}

// A plain file that shrank since open: a short read at its end, of its own
// bytes only; nothing past its end.
TEST(fs_extents, ShrunkPlainFileGivesAShortReadOfItsBytes) {
  const uint64_t n = 2 * M;
  Backing b(n);
  auto vf = make_or_fail("plain.bin", {Extent{0, n, PassthroughExtent{b.file, 0}}});
  ASSERT_TRUE(vf);
  auto cache = make_cache();
  b.truncate(M + 100);
  auto r = vf->read(M, 128 * K, *cache, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->size(), 100u);
  const auto got = r->gather();
  ASSERT_EQ(got.size(), 100u);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], file_byte(M + i));
  // Wholly past the new end: nothing (not zeros).
  auto past = vf->read(M + 4096, 4096, *cache, nullptr);
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(past->size(), 0u);
  EXPECT_TRUE(past->slices().empty());
  EXPECT_TRUE(past->gather().empty());
  // Before the new end: unchanged.
  auto before = vf->read(0, M, *cache, nullptr);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->size(), M);
}

// In the middle of a layout a shrunk backing file is an error, not a hole.
TEST(fs_extents, ShrunkBackingFileInTheMiddleOfALayoutIsStale) {
  const uint64_t n = M;
  Backing b(n);
  auto tail = inline_bytes(4096, 3);
  auto vf = make_or_fail("layout.bin", {Extent{0, n, PassthroughExtent{b.file, 0}},
                                        Extent{n, 4096, InlineExtent{tail, 0}}});
  ASSERT_TRUE(vf);
  auto cache = make_cache();
  ASSERT_TRUE(vf->read(n - 10, 20, *cache, nullptr).ok());
  b.truncate(n / 2);
  auto r = vf->read(n - 10, 20, *cache, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kStale) << r.status().ToString();
  EXPECT_NE(r.status().ToString().find("backing.bin"), std::string::npos) << r.status().ToString();
  auto early = vf->read(0, 1000, *cache, nullptr);  // still inside the file
  ASSERT_TRUE(early.ok());
  EXPECT_EQ(early->size(), 1000u);
  auto in_tail = vf->read(n + 10, 100, *cache, nullptr);  // the inline part only
  ASSERT_TRUE(in_tail.ok());
  EXPECT_EQ(in_tail->size(), 100u);
}

// The file shrinks after the read was made, before its bytes are copied:
// the copy stops at the file's end (fewer bytes than size(), no padding).
TEST(fs_extents, ShrinkAfterTheReadCopiesOnlyTheFileBytes) {
  const uint64_t n = 2 * M;
  Backing b(n);
  auto head = inline_bytes(100, 9);
  auto vf = make_or_fail("layout.bin", {Extent{0, 100, InlineExtent{head, 0}},
                                        Extent{100, n, PassthroughExtent{b.file, 0}}});
  ASSERT_TRUE(vf);
  auto cache = make_cache();
  auto r = vf->read(0, 100 + M, *cache, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 100 + M);
  EXPECT_EQ(r->fd_bytes(), M);
  b.truncate(5000);
  const auto got = r->gather();
  ASSERT_EQ(got.size(), 5100u);
  EXPECT_TRUE(std::equal(got.begin(), got.begin() + 100, head->begin()));
  for (size_t i = 100; i < got.size(); ++i) ASSERT_EQ(got[i], file_byte(i - 100)) << i;
  std::vector<uint8_t> out(r->size(), 0xEE);
  auto c = r->copy_to(out.data());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, 5100u);
  EXPECT_EQ(out[5100], 0xEE);
}

// A backing file that cannot be read (here: a write-only descriptor):
// copy_to is the error, gather() the bytes before it.
TEST(fs_extents, UnreadableBackingFileIsAnErrorOfTheCopy) {
  Backing b(64 * K, O_WRONLY);
  auto head = inline_bytes(10, 4);
  auto vf = make_or_fail("wo.bin", {Extent{0, 10, InlineExtent{head, 0}},
                                    Extent{10, 64 * K, PassthroughExtent{b.file, 0}}});
  ASSERT_TRUE(vf);
  auto cache = make_cache();
  auto r = vf->read(0, 1000, *cache, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();  // checked by size, copied later
  std::vector<uint8_t> out(r->size());
  auto c = r->copy_to(out.data());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().ToString().find("backing.bin"), std::string::npos) << c.status().ToString();
  const auto got = r->gather();
  EXPECT_EQ(got, *head);
}

// A passthrough extent longer than its file (how the staging directory
// serves a file being written): reads see the file as it is now, its own
// latest writes included.
TEST(fs_extents, UnboundedPassthroughSeesTheFileAsItGrows) {
  Backing b(1000, O_RDWR);
  constexpr uint64_t kUnbounded = uint64_t{1} << 61;
  auto vf = make_or_fail("staged.bin", {Extent{0, kUnbounded, PassthroughExtent{b.file, 0}}});
  ASSERT_TRUE(vf);
  auto cache = make_cache();
  auto r = vf->read(0, M, *cache, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 1000u);
  const auto more = file_bytes(300 * K);
  ASSERT_EQ(::pwrite(b.file->fd(), more.data(), more.size(), 1000), static_cast<ssize_t>(more.size()));
  auto r2 = vf->read(500, M, *cache, nullptr);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->size(), 500 + more.size());
  const auto got = r2->gather();
  ASSERT_EQ(got.size(), r2->size());
  for (size_t i = 0; i < 500; ++i) ASSERT_EQ(got[i], file_byte(500 + i));
  EXPECT_TRUE(std::equal(got.begin() + 500, got.end(), more.begin()));
}

// ------------------------------------------------------------ zero extents

TEST(fs_extents, ZeroExtentsOfSeveralSizesServeTheSharedZeroBuffer) {
  auto cache = make_cache();
  for (const uint64_t n : {uint64_t{1}, uint64_t{4095}, uint64_t{4096}, M - 1, M, M + 1, 3 * M + 17}) {
    auto vf = make_or_fail("zeros", {Extent{0, n, ZeroExtent{}}});
    ASSERT_TRUE(vf);
    for (const auto& [off, len] : std::vector<std::pair<uint64_t, uint64_t>>{
             {0, n}, {0, 2 * n}, {n / 2, n}, {n - 1, 1}, {n / 3, n / 3 + 1}}) {
      auto r = vf->read(off, len, *cache, nullptr);
      ASSERT_TRUE(r.ok());
      const uint64_t expect = std::min(len, n - off);
      ASSERT_EQ(r->size(), expect) << n << " at " << off;
      EXPECT_EQ(r->fd_bytes(), 0u);
      EXPECT_EQ(r->slices().size(), (expect + kZeroBufferBytes - 1) / kZeroBufferBytes);
      for (const ReadSlice& s : r->slices()) {
        EXPECT_FALSE(s.is_fd());
        EXPECT_EQ(s.data, zero_bytes()) << "a zero slice outside the shared buffer";
        EXPECT_LE(s.size, kZeroBufferBytes);
      }
      const auto got = r->gather();
      ASSERT_EQ(got.size(), expect);
      EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](uint8_t c) { return c == 0; }));
    }
  }
  EXPECT_TRUE(std::all_of(zero_bytes(), zero_bytes() + kZeroBufferBytes, [](uint8_t c) { return c == 0; }));
}

TEST(fs_extents, ZeroExtentsAreValidatedAndNotPrefetched) {
  EXPECT_FALSE(VirtualFile::make("z", {Extent{0, 0, ZeroExtent{}}}).ok());  // empty
  EXPECT_FALSE(VirtualFile::make("z", {Extent{0, 10, ZeroExtent{}}, Extent{11, 10, ZeroExtent{}}}).ok());  // hole
  EXPECT_FALSE(VirtualFile::make("z", {Extent{0, UINT64_MAX, ZeroExtent{}}, Extent{UINT64_MAX, 1, ZeroExtent{}}})
                   .ok());  // overflow
  // A file of zeros decodes nothing: no chunk unit, no readahead.
  auto vf = make_or_fail("z", {Extent{0, 8 * M, ZeroExtent{}}});
  ASSERT_TRUE(vf);
  EXPECT_EQ(vf->chunk_unit(), 0u);
  EXPECT_EQ(vf->decoded_chunks(), 0u);
  auto cache = make_cache();
  EXPECT_EQ(vf->prefetch(0, 8 * M, *cache), 0u);
  Readahead ra(64 * M);
  for (uint64_t off = 0; off < 4 * M; off += 128 * K) ASSERT_TRUE(vf->read(off, 128 * K, *cache, &ra).ok());
  EXPECT_EQ(cache->bytes(), 0u);
}

// ------------------------------------------------------------ mixed layouts

// Inline | zero | decoded | passthrough | zero (> 1 MiB) | passthrough |
// decoded | zero | inline, with every read across its boundaries equal to
// the expected bytes.
TEST(fs_extents, ReadsAcrossZeroInlineDecodedAndPassthroughBoundaries) {
  Backing b(4 * M);
  auto src = std::make_shared<PatternSource>(1000, 1000 + 3 * M, 64 * 1024);
  auto head = inline_bytes(777, 1), tail = inline_bytes(5000, 2);
  struct Part {
    uint64_t len;
    int kind;  // 0 inline head, 1 zero, 2 decoded, 3 passthrough, 4 inline tail
    uint64_t src;
  };
  const std::vector<Part> parts = {{777, 0, 0},          {33, 1, 0},        {M + 5, 2, 1000},
                                   {300 * K + 1, 3, 10}, {M + 4099, 1, 0},  {2 * M, 3, M + 77},
                                   {M / 2, 2, 1000 + 2 * M}, {1, 1, 0},     {5000, 4, 0}};
  std::vector<Extent> ex;
  std::vector<uint8_t> want;
  uint64_t pos = 0;
  for (const Part& p : parts) {
    Extent e{pos, p.len, ZeroExtent{}};
    for (uint64_t i = 0; i < p.len; ++i) {
      switch (p.kind) {
        case 0: want.push_back((*head)[i]); break;
        case 1: want.push_back(0); break;
        case 2: want.push_back(stream_byte(p.src + i)); break;
        case 3: want.push_back(file_byte(p.src + i)); break;
        case 4: want.push_back((*tail)[i]); break;
      }
    }
    if (p.kind == 0) e.what = InlineExtent{head, 0};
    if (p.kind == 2) e.what = DecodedExtent{src, p.src};
    if (p.kind == 3) e.what = PassthroughExtent{b.file, p.src};
    if (p.kind == 4) e.what = InlineExtent{tail, 0};
    ex.push_back(std::move(e));
    pos += p.len;
  }
  auto vf = make_or_fail("mixed.bin", ex);
  ASSERT_TRUE(vf);
  ASSERT_EQ(vf->size(), want.size());
  auto cache = make_cache();
  auto check = [&](uint64_t off, uint64_t len) {
    auto r = vf->read(off, len, *cache, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const uint64_t expect = off >= want.size() ? 0 : std::min<uint64_t>(len, want.size() - off);
    ASSERT_EQ(r->size(), expect);
    const auto got = r->gather();
    ASSERT_EQ(got.size(), expect);
    ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin() + static_cast<std::ptrdiff_t>(off)))
        << "read at " << off << " +" << len;
    uint64_t fd = 0;
    for (const ReadSlice& s : r->slices()) {
      if (s.is_fd()) fd += s.size;
      EXPECT_GT(s.size, 0u);
    }
    EXPECT_EQ(fd, r->fd_bytes());
  };
  // Around every boundary, reads of 1 byte to a few pages either side.
  for (const Extent& e : vf->extents()) {
    for (const uint64_t before : {uint64_t{0}, uint64_t{1}, uint64_t{4096}, uint64_t{70000}}) {
      for (const uint64_t len : {uint64_t{1}, uint64_t{2}, uint64_t{8192}, 128 * K, M + 3}) {
        if (e.offset < before) continue;
        check(e.offset - before, len);
      }
    }
  }
  // The whole file at once and in kernel-sized pieces.
  check(0, want.size());
  for (uint64_t off = 0; off < want.size(); off += 128 * K) check(off, 128 * K);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200; ++i) {
    const uint64_t off = rng() % want.size();
    check(off, 1 + rng() % (3 * M));
  }
}

// ------------------------------------------------------------ segments

TEST(fs_extents, SegmentsDefaultToOnePerExtent) {
  auto a = inline_bytes(100, 1), c = inline_bytes(300, 3);
  auto vf = make_or_fail("f", {Extent{0, 100, InlineExtent{a, 0}}, Extent{100, 50, ZeroExtent{}},
                               Extent{150, 300, InlineExtent{c, 0}}});
  ASSERT_TRUE(vf);
  EXPECT_EQ(vf->segments(), (std::vector<uint64_t>{0, 100, 150}));
  EXPECT_EQ(vf->segment_at(0), (std::pair<uint64_t, uint64_t>{0, 100}));
  EXPECT_EQ(vf->segment_at(99), (std::pair<uint64_t, uint64_t>{0, 100}));
  EXPECT_EQ(vf->segment_at(100), (std::pair<uint64_t, uint64_t>{100, 150}));
  EXPECT_EQ(vf->segment_at(449), (std::pair<uint64_t, uint64_t>{150, 450}));
  auto empty = make_or_fail("e", {});
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->segments().empty());
}

TEST(fs_extents, ExplicitSegmentsAreIndependentOfExtents) {
  auto vf = make_or_fail("f", {Extent{0, 1000, ZeroExtent{}}, Extent{1000, 1000, ZeroExtent{}}}, {10, 500, 1999});
  ASSERT_TRUE(vf);
  EXPECT_EQ(vf->segments(), (std::vector<uint64_t>{0, 10, 500, 1999}));  // 0 implied
  EXPECT_EQ(vf->segment_at(9), (std::pair<uint64_t, uint64_t>{0, 10}));
  EXPECT_EQ(vf->segment_at(10), (std::pair<uint64_t, uint64_t>{10, 500}));
  EXPECT_EQ(vf->segment_at(1000), (std::pair<uint64_t, uint64_t>{500, 1999}));  // spans the extent boundary
  EXPECT_EQ(vf->segment_at(1999), (std::pair<uint64_t, uint64_t>{1999, 2000}));
  auto with0 = make_or_fail("f", {Extent{0, 1000, ZeroExtent{}}}, {0, 600});
  ASSERT_TRUE(with0);
  EXPECT_EQ(with0->segments(), (std::vector<uint64_t>{0, 600}));
}

// The catalogue of bad segment lists: each rejected as Internal, naming
// the file and the offending value.
TEST(fs_extents, BadSegmentStartsAreRejected) {
  struct Bad {
    const char* what;
    std::vector<uint64_t> starts;
    std::string value;
  };
  const std::vector<Bad> bad = {
      {"unsorted", {10, 500, 200}, "200"},
      {"duplicate", {10, 10}, "10"},
      {"duplicate zero", {0, 0}, "0"},
      {"at the size", {10, 2000}, "2000"},
      {"past the size", {123456}, "123456"},
      {"huge", {UINT64_MAX}, std::to_string(UINT64_MAX)},
  };
  for (const Bad& b : bad) {
    auto r = VirtualFile::make("dir/model.gguf", {Extent{0, 2000, ZeroExtent{}}}, b.starts);
    ASSERT_FALSE(r.ok()) << b.what;
    EXPECT_EQ(r.status().code(), Code::kInternal) << b.what;
    const std::string m = r.status().ToString();
    EXPECT_NE(m.find("dir/model.gguf"), std::string::npos) << b.what << ": " << m;
    EXPECT_NE(m.find(b.value), std::string::npos) << b.what << ": " << m;
  }
  // Any segment of an empty file is past its end.
  EXPECT_FALSE(VirtualFile::make("empty", {}, {0}).ok());
}

// Decodes in flight (prefetch) have finished.
void settle(const PatternSource& src) {
  uint64_t last = src.total_decodes();
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const uint64_t now = src.total_decodes();
    if (now == last) return;
    last = now;
  }
}

// One decoded extent holding several tensors: with explicit segments, a
// loader of the tensor [1M, 3M) prefetches up to its end and no further;
// without them (the whole extent one segment) the same reads prefetch on.
TEST(fs_extents, ReadaheadStopsAtAnExplicitSegmentEnd) {
  constexpr uint64_t kHeader = 4096, kSize = 8 * M, kChunk = 64 * K;
  const uint64_t seg_b = M, seg_e = 3 * M;
  for (const bool explicit_segments : {true, false}) {
    SCOPED_TRACE(explicit_segments ? "explicit segments" : "one segment per extent");
    auto src = std::make_shared<PatternSource>(kHeader, kSize, kChunk);
    auto head = inline_bytes(kHeader, 5);
    std::vector<Extent> ex = {Extent{0, kHeader, InlineExtent{head, 0}},
                              Extent{kHeader, kSize - kHeader, DecodedExtent{src, kHeader}}};
    auto vf = make_or_fail("t.bin", ex,
                           explicit_segments ? std::vector<uint64_t>{kHeader, seg_b, seg_e, 6 * M}
                                             : std::vector<uint64_t>{});
    ASSERT_TRUE(vf);
    using Seg = std::pair<uint64_t, uint64_t>;
    const Seg want_seg = explicit_segments ? Seg{seg_b, seg_e} : Seg{kHeader, kSize};
    EXPECT_EQ(vf->segment_at(2 * M), want_seg);
    auto cache = make_cache();
    Readahead ra(64 * M);
    // The header, then the tensor from the page before it (the kernel
    // rounds to pages), in 128 KiB reads.
    ASSERT_TRUE(vf->read(0, kHeader, *cache, &ra).ok());
    for (uint64_t off = seg_b - 4096; off < seg_e; off += 128 * K) {
      auto r = vf->read(off, std::min<uint64_t>(128 * K, seg_e - off), *cache, &ra);
      ASSERT_TRUE(r.ok());
      const auto got = r->gather();
      for (size_t i = 0; i < got.size(); i += 997) ASSERT_EQ(got[i], stream_byte(off + i));
    }
    settle(*src);
    const long last_in_tensor = static_cast<long>(src->chunk_at(seg_e - 1));
    if (explicit_segments) {
      EXPECT_LE(src->last_decoded(), last_in_tensor) << "prefetch passed the segment's end";
      EXPECT_EQ(src->last_decoded(), last_in_tensor);
    } else {
      EXPECT_GT(src->last_decoded(), last_in_tensor + 2) << "one extent: the window runs on";
    }
  }
}

}  // namespace
