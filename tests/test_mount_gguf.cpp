// tests/test_mount_gguf.cpp — GGUF files stored as X.gguf.wcodec through a
// real FUSE mount: presented as X.gguf (and the container hidden), read by
// cp and sha256sum and by parallel readers at random offsets byte for byte
// (padding gaps included), nothing decoded by stat or ls; and a .gguf copied
// into the staging directory is encoded in the background and reads back
// the same.
//
// Needs /dev/fuse and fusermount3 (CI runs as root); skipped otherwise.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "mount_fixture.h"
#include "testutil.h"
#include "wcodec/container.h"
#include "wcodec/gguf.h"

namespace sfs = std::filesystem;
using namespace mounttest;

namespace {

// A GGUF file with padding after most tensors and quantized blocks.
std::vector<uint8_t> made_gguf() {
  wcodec::GgufFile f;
  f.kv.push_back({"general.architecture", wcodec::GgufValue::str("llama")});
  std::vector<std::pair<uint32_t, int64_t>> ts = {{wcodec::kGgmlTypeF32, 4000}, {wcodec::kGgmlTypeQ8_0, 64},
                                                  {wcodec::kGgmlTypeF16, 3},    {wcodec::kGgmlTypeQ4_K, 2560},
                                                  {wcodec::kGgmlTypeF32, 7},    {wcodec::kGgmlTypeBF16, 2002}};
  int k = 0;
  for (auto [type, ne0] : ts) {
    wcodec::GgufTensor t;
    t.name = "t";
    t.name += std::to_string(k++);
    t.type = type;
    t.n_dims = 2;
    t.ne[0] = ne0;
    t.ne[1] = 5;
    f.tensors.push_back(t);
  }
  auto h = wcodec::write_gguf_header(f);
  EXPECT_TRUE(h.ok());
  std::vector<uint8_t> out = *h;
  std::mt19937 rng(5);
  for (const auto& t : f.tensors) {
    uint64_t nb = 0;
    EXPECT_TRUE(wcodec::ggml_tensor_nbytes(t.type, t.ne, t.n_dims, "t", &nb).ok());
    const size_t at = out.size();
    out.resize(at + (nb + 31) / 32 * 32, 0);
    for (uint64_t i = 0; i < nb; ++i) out[at + i] = static_cast<uint8_t>(i % 2 ? 0x3c : rng() % 16);
  }
  return out;
}

void encode_to(const std::vector<uint8_t>& orig, const sfs::path& dst) {
  wcodec::EncodeConfig cfg;
  cfg.chunk_bytes = 8192;
  auto enc = wcodec::encode_safetensors(orig.data(), orig.size(), cfg, dst.string());
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  wctest::write_file(dst, *enc);
}

}  // namespace

TEST(mount_gguf, StoredGgufIsServedByteForByte) {
  REQUIRE_FUSE();
  MountFixture fx;
  const auto real = wctest::read_file(wctest::data_dir() / "stories260K.f32.gguf");
  const auto made = made_gguf();
  encode_to(real, fx.store() / "stories.gguf.wcodec");
  encode_to(made, fx.store() / "made.gguf.wcodec");
  std::string out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  ASSERT_EQ(sh("ls -1 " + q(fx.mnt().string()), &out), 0) << out;
  EXPECT_EQ(out, "made.gguf\nstaging\nstories.gguf\n");
  EXPECT_EQ(sfs::file_size(fx.mnt() / "stories.gguf"), real.size());
  EXPECT_EQ(sfs::file_size(fx.mnt() / "made.gguf"), made.size());
  EXPECT_EQ(fx.stats()["decode"]["bytes"].get<uint64_t>(), 0u) << "stat and ls decoded something";
  ASSERT_EQ(sh("sha256sum < " + q((fx.mnt() / "stories.gguf").string()), &out), 0) << out;
  EXPECT_EQ(out.substr(0, 64), wctest::sha256_hex(real));
  ASSERT_EQ(sh("cp " + q((fx.mnt() / "made.gguf").string()) + " " + q((fx.scratch() / "made.copy").string()), &out),
            0)
      << out;
  EXPECT_EQ(wctest::read_file(fx.scratch() / "made.copy"), made);
  // Parallel readers at random offsets (gaps and chunk edges included).
  std::vector<std::thread> readers;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    readers.emplace_back([&, t] {
      const auto& want = t % 2 ? made : real;
      const sfs::path p = fx.mnt() / (t % 2 ? "made.gguf" : "stories.gguf");
      const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        ++bad;
        return;
      }
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<uint8_t> buf;
      for (int i = 0; i < 200; ++i) {
        const uint64_t off = rng() % want.size();
        const size_t len = 1 + rng() % std::min<uint64_t>(want.size() - off, 100000);
        buf.resize(len);
        if (::pread(fd, buf.data(), len, static_cast<off_t>(off)) != static_cast<ssize_t>(len) ||
            !std::equal(buf.begin(), buf.end(), want.begin() + static_cast<std::ptrdiff_t>(off)))
          ++bad;
      }
      ::close(fd);
    });
  for (auto& r : readers) r.join();
  EXPECT_EQ(bad.load(), 0);
  // The tool reads the presented file's GGUF header.
  ASSERT_EQ(sh(q(WCODEC_TOOL) + " inspect " + q((fx.mnt() / "stories.gguf").string()), &out), 0) << out;
  EXPECT_NE(out.find("47 tensors"), std::string::npos) << out;
}

TEST(mount_gguf, GgufCopiedIntoStagingIsEncodedAndReadsBackTheSame) {
  REQUIRE_FUSE();
  MountFixture fx;
  std::string out;
  ASSERT_EQ(fx.mount("encode_delay=300ms", &out), 0) << out;
  const sfs::path src = wctest::data_dir() / "stories260K.f32.gguf";
  const sfs::path dst = fx.mnt() / "staging" / "m.gguf";
  ASSERT_EQ(sh("cp " + q(src.string()) + " " + q(dst.string()), &out), 0) << out;
  const std::string want = wctest::sha256_hex(wctest::read_file(src));
  EXPECT_EQ(wctest::sha256_hex(wctest::read_file(dst)), want);
  const sfs::path stored = fx.store() / ".wcodecfs-staging" / "m.gguf.wcodec";
  ASSERT_TRUE(wait_until([&] { return sfs::exists(stored); }, 120)) << fx.stats().dump(2);
  ASSERT_TRUE(wait_until(
      [&] {
        auto s = fx.stats()["staging"];
        return s["pending"].get<uint64_t>() == 0 && s["encoding"].get<uint64_t>() == 0;
      },
      60));
  EXPECT_FALSE(sfs::exists(fx.store() / ".wcodecfs-staging" / "m.gguf"));
  EXPECT_LT(sfs::file_size(stored), sfs::file_size(src));
  EXPECT_EQ(wctest::sha256_hex(wctest::read_file(dst)), want);
  auto rd = wcodec::Reader::open(stored.string());
  ASSERT_TRUE(rd.ok()) << rd.status().ToString();
  EXPECT_TRUE((*rd)->source_is_gguf());
}
