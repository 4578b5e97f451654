// tests/test_reader_fd.cpp — Reader::open_fd: a container opened from a file
// descriptor reads the original bytes, works on its own duplicate of the
// descriptor (the caller's may be closed at once), and names the container
// by the name it was given in every message.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "testutil.h"
#include "wcodec/container.h"

namespace {

using wcodec::Reader;

// Opens `path` read-only; the test fails if it cannot.
int open_ro(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << "cannot open " << path;
  return fd;
}

bool names(const wcodec::Status& st, const std::string& name) {
  return st.ToString().find(name) != std::string::npos;
}

TEST(ReaderFd, RealFileReadsTheOriginalBytesAndNamesItsName) {
  const auto orig = wctest::read_file(wctest::data_dir() / "stories260K.rtn-int8.safetensors");
  ASSERT_FALSE(orig.empty());
  auto enc = wcodec::encode_safetensors(orig.data(), orig.size(), wcodec::EncodeConfig{}, "stories260K.rtn-int8");
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  wctest::ScratchDir dir;
  const auto path = dir / "on-disk-name.wcodec";
  wctest::write_file(path, *enc);

  const std::string name = "store/stories260K.rtn-int8.wcodec (fd)";
  const int fd = open_ro(path);
  ASSERT_GE(fd, 0);
  auto rd = Reader::open_fd(fd, name);
  // The reader keeps its own duplicate: closing ours must not matter.
  ASSERT_EQ(::close(fd), 0);
  ASSERT_TRUE(rd.ok()) << rd.status().ToString();
  const Reader& r = **rd;
  EXPECT_EQ(r.path(), name);
  ASSERT_EQ(r.original_size(), orig.size());
  std::vector<uint8_t> all(orig.size());
  ASSERT_TRUE(r.read(0, all.size(), all.data()).ok());
  EXPECT_TRUE(all == orig) << "bytes read through open_fd differ from the original";
  EXPECT_TRUE(r.verify(true).ok());

  // Messages name the container by `name`, not by the file's path.
  const auto past = r.read(orig.size(), 1, all.data());
  EXPECT_FALSE(past.ok());
  EXPECT_TRUE(names(past, name)) << past.ToString();
  EXPECT_FALSE(names(past, "on-disk-name")) << past.ToString();
  ASSERT_GT(r.num_chunks(), 0u);
  EXPECT_EQ(r.describe_chunk(0).rfind(name, 0), 0u) << r.describe_chunk(0);

  // A damaged container (its last byte cut off) fails to open, naming `name`.
  const auto cut_path = dir / "cut.wcodec";
  wctest::write_file(cut_path, std::vector<uint8_t>(enc->begin(), enc->end() - 1));
  const int cut_fd = open_ro(cut_path);
  ASSERT_GE(cut_fd, 0);
  auto cut = Reader::open_fd(cut_fd, name);
  ::close(cut_fd);
  ASSERT_FALSE(cut.ok());
  EXPECT_TRUE(names(cut.status(), name)) << cut.status().ToString();
}

TEST(ReaderFd, BadDescriptorIsAnErrorNamingTheName) {
  auto rd = Reader::open_fd(-1, "no-such-descriptor.wcodec");
  ASSERT_FALSE(rd.ok());
  EXPECT_TRUE(names(rd.status(), "no-such-descriptor.wcodec")) << rd.status().ToString();
}

}  // namespace
