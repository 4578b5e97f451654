// tests/test_mount_cawsf.cpp — CAWSF files through a real mount
// (wcodecfs/cawsf_kind.h): a real checkpoint converted with `wcodec cawsf
// convert` is presented as X.safetensors; Python's safetensors.safe_open
// loads every tensor with its original name, dtype and shape, each equal to
// `wcodec cawsf export` of the same file (the reader's rebuild) and, for the
// decomposed ones, with the relative error the converter recorded in META;
// a damaged shard is EIO, never wrong bytes, and the other tensors still read.
// Thread-safety: single-threaded test code (the daemon is another process).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "mount_fixture.h"
#include "test_fs_store.h"
#include "testutil.h"

namespace sfs = std::filesystem;

namespace {

using namespace mounttest;

bool have_python() { return sh("python3 -c 'import safetensors, numpy' >/dev/null 2>&1") == 0; }

TEST(mount_cawsf, ConvertedCheckpointLoadsEveryTensorWithTheReportedError) {
  REQUIRE_FUSE();
  if (!have_python()) GTEST_SKIP() << "SKIPPED: python3 with the safetensors and numpy packages is not available";
  MountFixture fx;
  const std::string src = std::string(WCODEC_DATA_DIR) + "/stories260K.f32.safetensors";
  const sfs::path cawsf = fx.store() / "stories.cawsf";
  std::string out;
  ASSERT_EQ(sh(std::string(WCODEC_TOOL) + " cawsf convert --model " + q(src) + " --out " + q(cawsf.string()) +
                   " --rank 8 --pq-k 16 -j 2",
               &out),
            0)
      << out;
  const sfs::path exported = fx.scratch() / "exported.safetensors";
  ASSERT_EQ(sh(std::string(WCODEC_TOOL) + " cawsf export " + q(cawsf.string()) + " " + q(exported.string()), &out), 0)
      << out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  const sfs::path script = fx.scratch() / "load.py";
  fstest::write_text(script,
                     "import json, struct, numpy as np\n"
                     "from safetensors import safe_open\n"
                     "raw = open(" + q(cawsf.string()) + ", 'rb').read()\n"
                     "t, off, size, fl = struct.unpack_from('<IQQI', raw, 20)\n"
                     "assert t == 1 and fl == 0\n"
                     "meta = json.loads(raw[off:off + size])\n"
                     "err = {t['name']: t.get('rel_error') for t in meta['tensors']}\n"
                     "n = dec = 0\n"
                     "with safe_open(" + q((fx.mnt() / "stories.safetensors").string()) + ", framework='numpy') as m, \\\n"
                     "     safe_open(" + q(exported.string()) + ", framework='numpy') as e, \\\n"
                     "     safe_open(" + q(src) + ", framework='numpy') as o:\n"
                     "    assert sorted(m.keys()) == sorted(o.keys())\n"
                     "    for k in o.keys():\n"
                     "        x, y, z = m.get_tensor(k), e.get_tensor(k), o.get_tensor(k)\n"
                     "        assert x.dtype == z.dtype and x.shape == z.shape, k\n"
                     "        assert x.tobytes() == y.tobytes(), k\n"
                     "        if err[k] is None:\n"
                     "            assert x.tobytes() == z.tobytes(), k\n"
                     "        else:\n"
                     "            d = x.astype(np.float64) - z.astype(np.float64)\n"
                     "            rel = np.sqrt((d * d).sum() / (z.astype(np.float64) ** 2).sum())\n"
                     "            assert abs(rel - err[k]) <= 1e-9 * rel + 1e-12, (k, rel, err[k])\n"
                     "            assert 0 < rel < 1.0, (k, rel)\n"
                     "            dec += 1\n"
                     "        n += 1\n"
                     "print('tensors', n, 'decomposed', dec)\n");
  ASSERT_EQ(sh("timeout 120 python3 " + q(script.string()), &out), 0) << out;
  EXPECT_NE(out.find("tensors 47 decomposed 36"), std::string::npos) << out;
  std::cout << "[ python    ] " << out;
}

TEST(mount_cawsf, DamagedShardIsEIOAndTheRestReads) {
  REQUIRE_FUSE();
  MountFixture fx;
  const std::string src = std::string(WCODEC_DATA_DIR) + "/stories260K.f32.safetensors";
  const sfs::path cawsf = fx.store() / "s.cawsf";
  std::string out;
  ASSERT_EQ(sh(std::string(WCODEC_TOOL) + " cawsf convert --model " + q(src) + " --out " + q(cawsf.string()) +
                   " --rank 4 --pq-k 16 --max-layers 2 -j 1",
               &out),
            0)
      << out;
  // Flip a byte in the last 1 MiB chunk of the shard bank (the tail of the checkpoint's tensors).
  auto bytes = wctest::read_file(cawsf);
  uint64_t bank_off, bank_size;
  std::memcpy(&bank_off, bytes.data() + 20 + 2 * 24 + 4, 8);
  std::memcpy(&bank_size, bytes.data() + 20 + 2 * 24 + 12, 8);
  bytes[bank_off + bank_size - 100] ^= 0x40;
  {
    std::ofstream o(cawsf, std::ios::binary | std::ios::trunc);
    o.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  const sfs::path file = fx.mnt() / "s.safetensors";
  const int fd = ::open(file.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  // The header and the first tensor (in the first chunk of the bank) read; the end is EIO.
  std::vector<uint8_t> buf(4096);
  EXPECT_EQ(::pread(fd, buf.data(), buf.size(), 0), 4096);
  errno = 0;
  EXPECT_EQ(::pread(fd, buf.data(), 256, st.st_size - 256), -1);
  EXPECT_EQ(errno, EIO);
  ::close(fd);
}

}  // namespace
