// tests/test_fs_kinds.cpp — the store-kind seam, in process.
//
// A kind that exists only in the tests (joined_kind.h) presents, at
// directory scope, one file made of two stored inputs that stay visible,
// served from a chunk source that is not a .wcodec container. These tests
// read it through the Filesystem beside the wcodec kind's files, change
// either input and check that nothing cached for the old inputs is served
// for the new ones, and check the Filesystem's rules around kinds (a plain
// entry wins over a presentation, the first of two kinds presenting a name
// wins, inputs of a replacement are hidden, a view's are not).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>

#include "joined_kind.h"
#include "test_fs_store.h"
#include "testutil.h"
#include "wcodecfs/filesystem.h"
#include "wcodecfs/wcodec_kind.h"

namespace sfs = std::filesystem;
using namespace wcodecfs;

namespace {

FsOptions options_with_joined() {
  FsOptions o;
  o.staging = "";
  o.kinds = default_kinds();
  o.kinds.push_back(std::make_shared<joinedkind::JoinedKind>());
  return o;
}

std::set<std::string> names_of(const std::vector<DirEntry>& entries) {
  std::set<std::string> out;
  for (const DirEntry& e : entries) out.insert(e.name);
  return out;
}

// Reads [off, off + len) of `path` through `fs` with a fresh handle.
std::vector<uint8_t> read_range(Filesystem& fs, NodeId id, uint64_t off, uint64_t len) {
  auto fh = fs.open(id, O_RDONLY);
  EXPECT_TRUE(fh.ok()) << fh.status().ToString();
  if (!fh.ok()) return {};
  auto r = fs.read(**fh, off, len);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->gather() : std::vector<uint8_t>{};
}

// Sets the mtime of `p` to `sec` seconds (so a rewrite is a new version even
// within one timestamp tick).
void set_mtime(const sfs::path& p, time_t sec) {
  struct timespec ts[2] = {{sec, 0}, {sec, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), ts, 0), 0) << p;
}

class FsKinds : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = scratch_.path() / "store";
    sfs::create_directories(store_ / "models");
    // Real bytes: a safetensors checkpoint and a GGUF file of ../shared/data.
    left_ = wctest::read_file(fstest::original_of("stories260K.bf16"));
    right_ = wctest::read_file(wctest::data_dir() / "stories260K.f32.gguf");
    ASSERT_FALSE(left_.empty());
    ASSERT_FALSE(right_.empty());
    wctest::write_file(store_ / "models" / "pair.left", left_);
    wctest::write_file(store_ / "models" / "pair.right", right_);
    fstest::place(fstest::encoded({"stories260K.rtn-int8", 0}), store_ / "models" / "int8.wcodec");
    auto fs = Filesystem::create(store_.string(), options_with_joined());
    ASSERT_TRUE(fs.ok()) << fs.status().ToString();
    fs_ = std::move(fs).value();
  }

  Entry lookup(const std::string& path) {
    auto e = fs_->lookup_path(path);
    EXPECT_TRUE(e.ok()) << path << ": " << e.status().ToString();
    return e.ok() ? *e : Entry{};
  }

  wctest::ScratchDir scratch_;
  sfs::path store_;
  std::vector<uint8_t> left_, right_;
  std::unique_ptr<Filesystem> fs_;
};

}  // namespace

TEST_F(FsKinds, ViewOfTwoInputsIsListedBesideThemAndServesTheirBytes) {
  auto models = lookup("models");
  auto listing = fs_->readdir(models.id);
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  // The view and both its inputs; the wcodec replacement without its input.
  EXPECT_EQ(names_of(*listing), (std::set<std::string>{".", "..", "pair.left", "pair.right", "pair.joined",
                                                       "int8.safetensors"}));
  const std::vector<uint8_t> want = joinedkind::expected_joined(left_, right_);
  const Entry joined = lookup("models/pair.joined");
  EXPECT_EQ(static_cast<uint64_t>(joined.attr.st_size), want.size());
  EXPECT_TRUE(S_ISREG(joined.attr.st_mode));
  EXPECT_EQ(read_range(*fs_, joined.id, 0, want.size() + 100), want);
  // Ranges across the inline / zero / decoded boundaries and chunk edges.
  const uint64_t split = 64 + left_.size();  // where the right input begins
  for (uint64_t off : {uint64_t{0}, uint64_t{20}, uint64_t{63}, uint64_t{64}, uint64_t{4095}, uint64_t{4160},
                       split - 3, split, static_cast<uint64_t>(want.size() - 1)}) {
    for (uint64_t len : {uint64_t{1}, uint64_t{7}, uint64_t{4096}, uint64_t{10000}}) {
      const uint64_t end = std::min<uint64_t>(want.size(), off + len);
      EXPECT_EQ(read_range(*fs_, joined.id, off, len), std::vector<uint8_t>(want.begin() + off, want.begin() + end))
          << "[" << off << ", +" << len << ")";
    }
  }
  // The inputs stay readable as they are, and the wcodec file beside them.
  EXPECT_EQ(read_range(*fs_, lookup("models/pair.left").id, 0, left_.size()), left_);
  EXPECT_EQ(read_range(*fs_, lookup("models/int8.safetensors").id, 0, 1u << 30),
            wctest::read_file(fstest::original_of("stories260K.rtn-int8")));
  // The test source was decoded by the CPU pool (it declares no device
  // container and no grouping).
  EXPECT_GE(Stats::get(fs_->stats().chunks_decoded), (left_.size() + right_.size()) / joinedkind::kChunk);
  EXPECT_EQ(Stats::get(fs_->stats().decode_errors), 0u);
}

TEST_F(FsKinds, ChangingEitherInputServesTheNewBytesNeverCachedOldOnes) {
  const Entry first = lookup("models/pair.joined");
  const std::vector<uint8_t> before = joinedkind::expected_joined(left_, right_);
  // Read the first half only: the second half's chunks stay uncached.
  const uint64_t half = before.size() / 2;
  auto old_fh = fs_->open(first.id, O_RDONLY);
  ASSERT_TRUE(old_fh.ok());
  {
    auto r = fs_->read(**old_fh, 0, half);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->gather(), std::vector<uint8_t>(before.begin(), before.begin() + half));
  }

  // 1. The right input rewritten in place with other bytes of the same size.
  std::vector<uint8_t> right2 = right_;
  std::mt19937 rng(7);
  for (size_t i = 0; i < right2.size(); i += 97) right2[i] = static_cast<uint8_t>(rng());
  wctest::write_file(store_ / "models" / "pair.right", right2);
  set_mtime(store_ / "models" / "pair.right", 1700000000);
  const Entry second = lookup("models/pair.joined");
  EXPECT_NE(second.id, first.id) << "a changed input must make a new node";
  const std::vector<uint8_t> after = joinedkind::expected_joined(left_, right2);
  const uint64_t misses0 = Stats::get(fs_->stats().cache_misses);
  EXPECT_EQ(read_range(*fs_, second.id, 0, after.size()), after);
  // Every chunk decoded anew: none of the old source's cached chunks served.
  EXPECT_GE(Stats::get(fs_->stats().cache_misses) - misses0, (left_.size() + right2.size()) / joinedkind::kChunk);
  // The handle opened before the change never mixes old and new bytes: its
  // cached chunks are the old file's, an uncached chunk of a changed input
  // is refused.
  {
    auto r = fs_->read(**old_fh, 0, half);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->gather(), std::vector<uint8_t>(before.begin(), before.begin() + half));
    auto tail = fs_->read(**old_fh, before.size() - 4096, 4096);
    ASSERT_FALSE(tail.ok()) << "an uncached chunk of a changed input was served";
    EXPECT_EQ(tail.status().code(), Code::kStale) << tail.status().ToString();
    EXPECT_NE(tail.status().message().find("pair.right"), std::string::npos) << tail.status().ToString();
  }

  // 2. The left input replaced by a file of another size (a new inode).
  std::vector<uint8_t> left2(left_.begin(), left_.begin() + 12345);
  wctest::write_file(store_ / "models" / "pair.left.tmp", left2);
  sfs::rename(store_ / "models" / "pair.left.tmp", store_ / "models" / "pair.left");
  const Entry third = lookup("models/pair.joined");
  EXPECT_NE(third.id, second.id);
  const std::vector<uint8_t> after2 = joinedkind::expected_joined(left2, right2);
  EXPECT_EQ(static_cast<uint64_t>(third.attr.st_size), after2.size());
  EXPECT_EQ(read_range(*fs_, third.id, 0, after2.size()), after2);

  // 3. Unchanged inputs looked up again: the same node, nothing decoded.
  const uint64_t decoded = Stats::get(fs_->stats().chunks_decoded);
  EXPECT_EQ(lookup("models/pair.joined").id, third.id);
  EXPECT_EQ(read_range(*fs_, third.id, 0, after2.size()), after2);
  EXPECT_EQ(Stats::get(fs_->stats().chunks_decoded), decoded);

  // 4. An input removed: the presentation is gone, the other input stays.
  sfs::remove(store_ / "models" / "pair.right");
  auto gone = fs_->lookup_path("models/pair.joined");
  EXPECT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), Code::kNotFound);
  auto listing = fs_->readdir(lookup("models").id);
  ASSERT_TRUE(listing.ok());
  EXPECT_EQ(names_of(*listing), (std::set<std::string>{".", "..", "pair.left", "int8.safetensors"}));
}

TEST_F(FsKinds, PlainEntryWinsAndTheFirstKindWins) {
  // A plain file of the presented name wins over the presentation.
  wctest::write_file(store_ / "models" / "pair.joined", {'p', 'l', 'a', 'i', 'n'});
  const Entry e = lookup("models/pair.joined");
  EXPECT_EQ(read_range(*fs_, e.id, 0, 100), (std::vector<uint8_t>{'p', 'l', 'a', 'i', 'n'}));
  auto listing = fs_->readdir(lookup("models").id);
  ASSERT_TRUE(listing.ok());
  EXPECT_EQ(std::count_if(listing->begin(), listing->end(), [](const DirEntry& d) { return d.name == "pair.joined"; }),
            1);
  sfs::remove(store_ / "models" / "pair.joined");

  // Two kinds presenting one name: the first in the list is served, once.
  FsOptions o = options_with_joined();
  o.kinds.push_back(std::make_shared<joinedkind::JoinedKind>());
  auto fs2 = Filesystem::create(store_.string(), o);
  ASSERT_TRUE(fs2.ok());
  auto models = (*fs2)->lookup_path("models");
  ASSERT_TRUE(models.ok());
  auto l2 = (*fs2)->readdir(models->id);
  ASSERT_TRUE(l2.ok());
  EXPECT_EQ(std::count_if(l2->begin(), l2->end(), [](const DirEntry& d) { return d.name == "pair.joined"; }), 1);
  auto j = (*fs2)->lookup_path("models/pair.joined");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(read_range(**fs2, j->id, 0, 1u << 30), joinedkind::expected_joined(left_, right_));

  // Without the kind, nothing is presented and the inputs are plain files.
  FsOptions plain;
  plain.staging = "";
  auto fs3 = Filesystem::create(store_.string(), plain);
  ASSERT_TRUE(fs3.ok());
  EXPECT_FALSE((*fs3)->lookup_path("models/pair.joined").ok());
  EXPECT_TRUE((*fs3)->lookup_path("models/pair.left").ok());
  // A replacement's input is never found under its stored name.
  auto hidden = (*fs3)->lookup_path("models/int8.wcodec");
  EXPECT_FALSE(hidden.ok());
  EXPECT_EQ(hidden.status().code(), Code::kNotFound);
}

TEST_F(FsKinds, StoreDirOpensOnlyRegularFilesBelowItselfWithoutFollowingLinks) {
  sfs::create_directory(store_ / "models" / "deep");
  wctest::write_file(store_ / "models" / "deep" / "a.bin", {1, 2, 3});
  sfs::create_symlink("/etc/passwd", store_ / "models" / "link");
  sfs::create_symlink("deep", store_ / "models" / "dirlink");
  const int dfd = ::open((store_ / "models").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dfd, 0);
  auto dir = StoreDir::list(dfd, "models");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_NE(dir->find("pair.left"), nullptr);
  EXPECT_EQ(dir->find("nope"), nullptr);
  auto in = dir->open("deep/a.bin");
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(in->path, "models/deep/a.bin");
  EXPECT_EQ(in->st.st_size, 3);
  struct Case {
    const char* rel;
    Code code;
  };
  for (const Case& c : {Case{"link", Code::kLoop}, Case{"dirlink/a.bin", Code::kLoop}, Case{"deep", Code::kNotSupported},
                        Case{"../models/pair.left", Code::kInvalidArgument}, Case{"/etc/passwd", Code::kInvalidArgument},
                        Case{"deep/./a.bin", Code::kInvalidArgument}, Case{"", Code::kInvalidArgument},
                        Case{"missing", Code::kNotFound}, Case{"pair.left/x", Code::kNotFound}}) {
    auto r = dir->open(c.rel);
    ASSERT_FALSE(r.ok()) << c.rel;
    EXPECT_EQ(r.status().code(), c.code) << c.rel << ": " << r.status().ToString();
  }
  ::close(dfd);
}
