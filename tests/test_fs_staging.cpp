// tests/test_fs_staging.cpp — the staging tree of the filesystem core
// (fs/src/staging.cpp) in-process, no FUSE: the writable tree, its hidden
// backing area, the presentation of encoded files under their original
// names, and what happens to an encoded file when it is written, truncated
// or renamed. Real model files from ../shared/data throughout.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include <nlohmann/json.hpp>

#include "test_fs_store.h"
#include "testutil.h"
#include "wcodecfs/filesystem.h"

using namespace wcodecfs;
namespace sfs = std::filesystem;

namespace {

constexpr const char* kArea = ".wcodecfs-staging";

class StagingStore {
 public:
  StagingStore() {
    root_ = scratch_.path() / "store";
    sfs::create_directory(root_);
    fstest::build_store(root_, /*with_large=*/false);
    FsOptions o;
    o.encode.quiet = std::chrono::milliseconds(0);
    o.encode.low_priority = false;
    auto r = Filesystem::create(root_.string(), std::move(o));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) fs_ = std::move(r).value();
    if (fs_) {
      EXPECT_TRUE(fs_->start_background().ok());
    }
  }
  Filesystem& fs() { return *fs_; }
  const sfs::path& root() const { return root_; }
  sfs::path area() const { return root_ / kArea; }
  NodeId staging() {
    auto e = fs_->lookup(Filesystem::kRootId, "staging");
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? e->id : 0;
  }
  // Writes `bytes` as a new file `name` in directory `dir` (one handle).
  NodeId write_new(NodeId dir, const std::string& name, const std::vector<uint8_t>& bytes, mode_t mode = 0644) {
    auto c = fs_->create(dir, name, mode, O_WRONLY | O_CREAT | O_TRUNC, Caller{::getuid(), ::getgid()});
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) return 0;
    size_t off = 0;
    while (off < bytes.size()) {
      const size_t n = std::min<size_t>(1 << 20, bytes.size() - off);
      auto w = fs_->write(*c->second, off, bytes.data() + off, n);
      EXPECT_TRUE(w.ok()) << w.status().ToString();
      if (!w.ok()) break;
      off += *w;
    }
    return c->first.id;
  }
  std::vector<uint8_t> read_all(NodeId id) {
    auto h = fs_->open(id, O_RDONLY);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    if (!h.ok()) return {};
    std::vector<uint8_t> out;
    for (;;) {
      auto r = fs_->read(**h, out.size(), 1 << 20);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (!r.ok() || r->size() == 0) break;
      auto g = r->gather();
      out.insert(out.end(), g.begin(), g.end());
    }
    return out;
  }
  void drain() {
    ASSERT_NE(fs_->encode_queue(), nullptr);
    auto st = fs_->encode_queue()->drain(true);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

 private:
  wctest::ScratchDir scratch_;
  sfs::path root_;
  std::unique_ptr<Filesystem> fs_;
};

std::set<std::string> names_of(const std::vector<DirEntry>& v) {
  std::set<std::string> s;
  for (const auto& d : v) s.insert(d.name);
  return s;
}

TEST(fs_staging, RootShowsStagingAndHidesTheArea) {
  StagingStore s;
  auto r = s.fs().readdir(Filesystem::kRootId);
  ASSERT_TRUE(r.ok());
  const auto names = names_of(*r);
  EXPECT_EQ(names.count("staging"), 1u);
  EXPECT_EQ(names.count(kArea), 0u);
  EXPECT_EQ(s.fs().lookup(Filesystem::kRootId, kArea).status().code(), Code::kNotFound);
  EXPECT_TRUE(sfs::is_directory(s.area()));
  struct stat st {};
  ASSERT_EQ(::stat(s.area().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 01777u);
  auto st_fs = s.fs().statfs();
  ASSERT_TRUE(st_fs.ok());
  EXPECT_EQ(st_fs->f_flag & ST_RDONLY, 0u) << "the staging tree is writable";
}

TEST(fs_staging, WrittenFileIsEncodedAndReadsTheSame) {
  StagingStore s;
  const NodeId dir = s.staging();
  const auto orig = wctest::read_file(fstest::original_of("stories260K.rtn-int8"));
  const NodeId f = s.write_new(dir, "m.safetensors", orig, 0640);
  ASSERT_NE(f, 0u);
  EXPECT_TRUE(s.read_all(f) == orig) << "plain read-back";
  auto before = s.fs().getattr(f);
  ASSERT_TRUE(before.ok());
  s.drain();
  EXPECT_FALSE(sfs::exists(s.area() / "m.safetensors"));
  ASSERT_TRUE(sfs::exists(s.area() / "m.wcodec"));
  EXPECT_LT(sfs::file_size(s.area() / "m.wcodec"), orig.size());
  // Same node, bytes and attributes; the listing shows the original name.
  auto after = s.fs().getattr(f);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->attr.st_size, before->attr.st_size);
  EXPECT_EQ(after->attr.st_mode, before->attr.st_mode);
  EXPECT_EQ(after->attr.st_mtim.tv_sec, before->attr.st_mtim.tv_sec);
  EXPECT_EQ(after->attr.st_mtim.tv_nsec, before->attr.st_mtim.tv_nsec);
  EXPECT_TRUE(s.read_all(f) == orig) << "encoded read-back";
  auto l = s.fs().readdir(dir);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(names_of(*l), (std::set<std::string>{".", "..", "m.safetensors"}));
  auto j = nlohmann::json::parse(s.fs().stats_json());
  EXPECT_EQ(j["staging"]["done"].get<uint64_t>(), 1u);
  EXPECT_EQ(j["staging"]["bytes_in"].get<uint64_t>(), orig.size());
}

TEST(fs_staging, WritingAnEncodedFileMakesItPlainAgain) {
  StagingStore s;
  const NodeId dir = s.staging();
  const auto a = wctest::read_file(fstest::original_of("stories260K.rtn-int8"));
  const NodeId f = s.write_new(dir, "m.safetensors", a);
  s.drain();
  ASSERT_TRUE(sfs::exists(s.area() / "m.wcodec"));
  {
    // Open for writing: decoded back to a plain file, then patched.
    auto h = s.fs().open(f, O_RDWR);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_TRUE(sfs::exists(s.area() / "m.safetensors"));
    EXPECT_FALSE(sfs::exists(s.area() / "m.wcodec"));
    const uint8_t x = 0x7f;
    ASSERT_TRUE(s.fs().write(**h, 100, &x, 1).ok());
  }
  auto want = a;
  want[100] = 0x7f;
  EXPECT_TRUE(s.read_all(f) == want);
  s.drain();  // encoded again, with the new content
  EXPECT_TRUE(sfs::exists(s.area() / "m.wcodec"));
  EXPECT_TRUE(s.read_all(f) == want);

  // O_TRUNC: the encoded file is replaced by an empty plain one.
  {
    auto h = s.fs().open(f, O_WRONLY | O_TRUNC);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
  }
  EXPECT_FALSE(sfs::exists(s.area() / "m.wcodec"));
  EXPECT_EQ(s.read_all(f).size(), 0u);
  // An empty file is not valid safetensors: it stays plain.
  s.drain();
  EXPECT_TRUE(sfs::exists(s.area() / "m.safetensors"));

  // setattr(size) of an encoded file.
  const NodeId g = s.write_new(dir, "g.safetensors", a);
  s.drain();
  ASSERT_TRUE(sfs::exists(s.area() / "g.wcodec"));
  AttrChange c;
  c.set_size = true;
  c.size = 10;
  auto e = s.fs().setattr(g, c, nullptr);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->attr.st_size, 10);
  EXPECT_TRUE(s.read_all(g) == std::vector<uint8_t>(a.begin(), a.begin() + 10));
}

TEST(fs_staging, RenamesAndRemovalsFollowTheEncodedForm) {
  StagingStore s;
  const NodeId dir = s.staging();
  const Caller me{::getuid(), ::getgid()};
  const auto a = wctest::read_file(fstest::original_of("stories260K.rtn-int8"));
  const auto b = wctest::read_file(fstest::original_of("stories260K.bf16"));
  const NodeId fa = s.write_new(dir, "a.safetensors", a);
  s.write_new(dir, "b.safetensors", b);
  s.drain();
  // Rename an encoded file to another .safetensors name: still encoded.
  ASSERT_TRUE(s.fs().rename(dir, "a.safetensors", dir, "c.safetensors", 0).ok());
  EXPECT_TRUE(sfs::exists(s.area() / "c.wcodec"));
  EXPECT_FALSE(sfs::exists(s.area() / "a.wcodec"));
  EXPECT_TRUE(s.read_all(fa) == a) << "the node follows the rename";
  // ... over an existing encoded file: replaced.
  ASSERT_TRUE(s.fs().rename(dir, "c.safetensors", dir, "b.safetensors", 0).ok());
  EXPECT_FALSE(sfs::exists(s.area() / "c.wcodec"));
  auto lb = s.fs().lookup(dir, "b.safetensors");
  ASSERT_TRUE(lb.ok());
  EXPECT_TRUE(s.read_all(lb->id) == a);
  // NOREPLACE refuses.
  s.write_new(dir, "d.safetensors", b);
  EXPECT_EQ(s.fs().rename(dir, "d.safetensors", dir, "b.safetensors", RENAME_NOREPLACE).code(), Code::kExists);
  // To a name that cannot be presented encoded: made plain first.
  ASSERT_TRUE(s.fs().rename(dir, "b.safetensors", dir, "b.bin", 0).ok());
  EXPECT_TRUE(sfs::exists(s.area() / "b.bin"));
  EXPECT_FALSE(sfs::exists(s.area() / "b.wcodec"));
  auto lbin = s.fs().lookup(dir, "b.bin");
  ASSERT_TRUE(lbin.ok());
  EXPECT_TRUE(s.read_all(lbin->id) == a);
  // Directories, unlink, rmdir.
  auto d = s.fs().mkdir(dir, "ckpt", 0755, me);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_TRUE(s.fs().rename(dir, "d.safetensors", d->id, "d.safetensors", 0).ok());
  EXPECT_EQ(s.fs().rmdir(dir, "ckpt").code(), Code::kNotEmpty);
  ASSERT_TRUE(s.fs().unlink(d->id, "d.safetensors").ok());
  EXPECT_EQ(s.fs().unlink(d->id, "d.safetensors").code(), Code::kNotFound);
  ASSERT_TRUE(s.fs().rmdir(dir, "ckpt").ok());
  EXPECT_FALSE(sfs::exists(s.area() / "ckpt"));
  // Symlinks are created and read, never followed by the filesystem.
  auto l = s.fs().symlink(dir, "link", "../../etc/passwd", me);
  ASSERT_TRUE(l.ok());
  auto t = s.fs().readlink(l->id);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "../../etc/passwd");
  EXPECT_EQ(s.fs().open(l->id, O_RDONLY).status().code(), Code::kLoop);
}

TEST(fs_staging, ReservedNamesAndTheReadOnlyStore) {
  StagingStore s;
  const NodeId dir = s.staging();
  const Caller me{::getuid(), ::getgid()};
  for (const char* bad : {"x.wcodec", ".wcodecfs-lock.x.safetensors", ".wcodecfs-tmp.y"}) {
    EXPECT_EQ(s.fs().create(dir, bad, 0644, O_WRONLY | O_CREAT, me).status().code(), Code::kPermission) << bad;
    EXPECT_EQ(s.fs().mkdir(dir, bad, 0755, me).status().code(), Code::kPermission) << bad;
  }
  // Outside staging: read-only; between the two: cross-device (mv copies).
  EXPECT_EQ(s.fs().create(Filesystem::kRootId, "new.txt", 0644, O_WRONLY | O_CREAT, me).status().code(),
            Code::kReadOnly);
  EXPECT_EQ(s.fs().mkdir(Filesystem::kRootId, "d", 0755, me).status().code(), Code::kReadOnly);
  EXPECT_EQ(s.fs().unlink(Filesystem::kRootId, "notes.txt").code(), Code::kReadOnly);
  EXPECT_EQ(s.fs().rename(Filesystem::kRootId, "notes.txt", dir, "notes.txt", 0).code(), Code::kCrossDevice);
  EXPECT_TRUE(sfs::exists(s.root() / "notes.txt"));
  // A non-safetensors file and an invalid .safetensors stay plain.
  s.write_new(dir, "notes.md", {'h', 'i'});
  s.write_new(dir, "broken.safetensors", {1, 2, 3, 4, 5, 6, 7, 8, 9});
  s.drain();
  EXPECT_TRUE(sfs::exists(s.area() / "notes.md"));
  EXPECT_TRUE(sfs::exists(s.area() / "broken.safetensors"));
  EXPECT_FALSE(sfs::exists(s.area() / "broken.wcodec"));
}

TEST(fs_staging, ForgetReleasesStagingNodes) {
  StagingStore s;
  const NodeId dir = s.staging();
  const size_t base = s.fs().node_count();
  const NodeId f = s.write_new(dir, "x.txt", {'a'});
  EXPECT_EQ(s.fs().node_count(), base + 1);
  s.fs().forget(f, 1);
  EXPECT_EQ(s.fs().node_count(), base);
  auto again = s.fs().lookup(dir, "x.txt");
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->id, f);
  // After an unlink a new file of the same name gets a new node.
  ASSERT_TRUE(s.fs().unlink(dir, "x.txt").ok());
  const NodeId g = s.write_new(dir, "x.txt", {'b'});
  EXPECT_NE(g, again->id);
}

}  // namespace
