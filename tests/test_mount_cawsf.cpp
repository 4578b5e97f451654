// tests/test_mount_cawsf.cpp — CAWSF files through a real mount
// (wcodecfs/cawsf_kind.h): a real checkpoint converted with `wcodec cawsf
// convert` is presented as X.safetensors; Python's safetensors.safe_open
// loads every tensor with its original name, dtype and shape, each equal to
// `wcodec cawsf export` of the same file (the reader's rebuild) and, for the
// decomposed ones, with the relative error the converter recorded in META;
// a damaged shard is EIO, never wrong bytes, and the other tensors still read.
// The GGUF view: a real Llama model (stories260K under Hugging Face names,
// scripts/make_hf_llama.py) stored as model.cawsf beside its config.json and
// tokenizer shows model.gguf; llama.cpp (llama-simple, greedy) loads it from
// the mount and `wcodec cawsf export-gguf`'s file (the same bytes), and both
// print what it prints for the converter's GGUF of the rebuilt safetensors.
// Thread-safety: single-threaded test code (the daemon is another process).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "hf_gguf_testutil.h"
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

TEST(mount_cawsf, GgufViewAndExportGgufLoadInLlamaCpp) {
  REQUIRE_FUSE();
  if (hfgguf::llama_dir().empty() || !sfs::exists(hfgguf::llama_dir() / "bin" / "llama-simple"))
    GTEST_SKIP() << "SKIPPED: llama.cpp's tools are not in the cache (bash scripts/llama_cpp.sh builds them)";
  MountFixture fx;
  std::string out;
  const sfs::path dir = fx.store() / "llama";
  hfgguf::make_dir(dir);
  const int rc = sh(std::string(WCODEC_TOOL) + " cawsf convert --model " + q((dir / "model.safetensors").string()) +
                        " --out " + q((dir / "model.cawsf").string()) + " --rank 8 --pq-k 16 -j 2",
                    &out);
  if (rc == 2 && out.find("not built") != std::string::npos) GTEST_SKIP() << "SKIPPED: " << out;
  ASSERT_EQ(rc, 0) << out;
  sfs::remove(dir / "model.safetensors");
  // The converter's file of the rebuilt checkpoint with the same small files.
  const sfs::path rebuilt = fx.scratch() / "rebuilt" / "llama";
  sfs::create_directories(rebuilt);
  for (const auto& e : sfs::directory_iterator(dir))
    if (e.path().extension() != ".cawsf") sfs::copy_file(e.path(), rebuilt / e.path().filename());
  ASSERT_EQ(sh(std::string(WCODEC_TOOL) + " cawsf export " + q((dir / "model.cawsf").string()) + " " +
                   q((rebuilt / "model.safetensors").string()),
               &out),
            0)
      << out;
  std::string skip;
  const sfs::path conv = hfgguf::converted(rebuilt, "f32", &skip);
  if (conv.empty()) GTEST_SKIP() << "SKIPPED: " << skip;
  const sfs::path exported = fx.scratch() / "export.gguf";
  ASSERT_EQ(sh(std::string(WCODEC_TOOL) + " cawsf export-gguf " + q((dir / "model.cawsf").string()) + " --config " +
                   q(dir.string()) + " --out " + q(exported.string()),
               &out),
            0)
      << out;

  ASSERT_EQ(fx.mount("", &out), 0) << out;
  ASSERT_EQ(sh("ls -1 " + q((fx.mnt() / "llama").string()), &out), 0) << out;
  EXPECT_EQ(out,
            "config.json\ngeneration_config.json\nmodel.cawsf\nmodel.gguf\nmodel.safetensors\nspecial_tokens_map.json\n"
            "tokenizer.model\ntokenizer_config.json\n");
  const sfs::path view = fx.mnt() / "llama" / "model.gguf";
  EXPECT_EQ(sfs::file_size(view), sfs::file_size(exported));
  EXPECT_EQ(fx.stats()["decode"]["bytes"].get<uint64_t>(), 0u) << "stat and ls decoded something";
  const auto vb = wctest::read_file(view);
  EXPECT_TRUE(vb == wctest::read_file(exported)) << "the view and export-gguf differ";
  EXPECT_EQ(hfgguf::same_gguf(vb, wctest::read_file(conv)), "");

  const std::string c = hfgguf::llama_simple_text(conv);
  EXPECT_GT(c.size(), std::string(hfgguf::kLlamaPrompt).size() + 10) << c;
  EXPECT_EQ(hfgguf::llama_simple_text(view), c);
  EXPECT_EQ(hfgguf::llama_simple_text(exported), c);
  std::cout << "[ llama.cpp ] " << c << "\n";
  fx.unmount();
  for (const auto& e : sfs::recursive_directory_iterator(fx.store()))
    EXPECT_NE(e.path().extension(), ".gguf") << "a view was written to the store: " << e.path();
}

}  // namespace
