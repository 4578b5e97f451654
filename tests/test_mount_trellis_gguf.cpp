// tests/test_mount_trellis_gguf.cpp — real clients of a Trellis store's
// dense views through a real FUSE mount (docs/trellis.md §7).
//
// Stores of a real Llama model (stories260K quantized by `wcodec trellis
// quantize`, a v2 store with the Hadamard rotation and a v3 store, each
// plain and as .wcodec, with a Llama config.json and the 512-piece test
// tokenizer; trellis_gguf_testutil.h):
//  - llama.cpp (llama-simple, greedy, 32 tokens, a fixed prompt) loads
//    model.dense.gguf of each store through the mount and prints exactly
//    what it prints for convert_hf_to_gguf.py's file of the dense
//    checkpoint (made on the host by the codec's reference dequantizer),
//    which the view equals from the tensor data on (and in every llama.* /
//    tokenizer.* key); stat decodes nothing.
//  - transformers loads model.dense.safetensors through the mount with
//    from_pretrained(DIR, variant="dense"): every weight present (no
//    missing or unexpected key), each equal to the file's tensor, and the
//    quantized model's loss on a text the original model generated is close
//    to the original's.
//
// Needs /dev/fuse and fusermount3; llama.cpp's cache (scripts/llama_cpp.sh)
// and the converter's Python packages for the first test; python3 with
// torch, transformers and safetensors for the second. Each missing one
// skips visibly.
#include <gtest/gtest.h>

#include "mount_fixture.h"
#include "testutil.h"
#include "trellis_gguf_testutil.h"

namespace sfs = std::filesystem;
using namespace mounttest;

TEST(mount_trellis_gguf, LlamaCppGeneratesFromTheDenseGgufView) {
  REQUIRE_FUSE();
  if (hfgguf::llama_dir().empty() || !sfs::exists(hfgguf::llama_dir() / "bin" / "llama-simple"))
    GTEST_SKIP() << "SKIPPED: llama.cpp's tools are not in the cache (bash scripts/llama_cpp.sh builds them)";
  MountFixture fx;
  const sfs::path hf = fx.scratch() / "hf";
  hfgguf::make_dir(hf);
  struct Case {
    const char* name;
    const char* args;
  };
  const Case cases[] = {{"v2", "--bits 6 --hadamard --layout v2"}, {"v3", "--bits 4 --layout v3"}};
  std::vector<sfs::path> conv;
  for (const Case& c : cases) {
    trellisgguf::make_store(fx.store() / c.name, c.args, hf);
    // The same store with every safetensors file as X.wcodec (the same
    // directory name: general.name is the directory's).
    sfs::create_directories(fx.store() / "enc");
    sfs::copy(fx.store() / c.name, fx.store() / "enc" / c.name, sfs::copy_options::recursive);
    trellisgguf::encode_store(fx.store() / "enc" / c.name);
    std::string skip;
    conv.push_back(trellisgguf::converted(fx.store() / c.name, fx.scratch() / (std::string("ref-") + c.name), &skip));
    if (conv.back().empty()) GTEST_SKIP() << "SKIPPED: " << skip;
  }
  std::string out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  for (const Case& c : cases)
    for (const std::string& d : {std::string(c.name), "enc/" + std::string(c.name)}) {
      ASSERT_EQ(sh("ls -1 " + q((fx.mnt() / d).string()), &out), 0) << out;
      EXPECT_NE(out.find("model.dense.gguf"), std::string::npos) << out;
      EXPECT_GT(sfs::file_size(fx.mnt() / d / "model.dense.gguf"), 500000u);
    }
  EXPECT_EQ(fx.stats()["decode"]["chunks"].get<uint64_t>(), 0u) << "ls and stat computed or decoded something";

  for (const Case& c : cases) {
    const std::string want = hfgguf::llama_simple_text(conv[static_cast<size_t>(&c - cases)]);
    EXPECT_GT(want.size(), std::string(hfgguf::kLlamaPrompt).size() + 10) << want;
    for (const std::string& d : {std::string(c.name), "enc/" + std::string(c.name)}) {
      SCOPED_TRACE(d);
      const sfs::path view = fx.mnt() / d / "model.dense.gguf";
      EXPECT_EQ(trellisgguf::same_as_converter(wctest::read_file(view),
                                               wctest::read_file(conv[static_cast<size_t>(&c - cases)])),
                "");
      const std::string got = hfgguf::llama_simple_text(view);
      EXPECT_EQ(got, want) << "llama.cpp prints other text for the view than for the converter's file";
      std::printf("[ llama.cpp] %s/model.dense.gguf through the mount: %s\n", d.c_str(),
                  got.substr(0, got.find('\n')).c_str());
    }
  }
  EXPECT_GT(fx.stats()["decode"]["chunks"].get<uint64_t>(), 0u);
  EXPECT_EQ(fx.stats()["decode"]["errors"].get<uint64_t>(), 0u);
  fx.unmount();
  for (const auto& e : sfs::recursive_directory_iterator(fx.store()))
    EXPECT_NE(e.path().extension(), ".gguf") << "a view was written to the store: " << e.path();
}

TEST(mount_trellis_gguf, TransformersLoadsTheDenseView) {
  REQUIRE_FUSE();
  std::string why;
  if (sh("python3 -c 'import torch, transformers, safetensors' 2>&1", &why) != 0)
    GTEST_SKIP() << "SKIPPED: python3 with torch, transformers and safetensors is not available: " << why.substr(0, 200);
  MountFixture fx;
  const sfs::path hf = fx.scratch() / "hf";
  hfgguf::make_dir(hf);
  trellisgguf::make_store(fx.store() / "v2", "--bits 8 --hadamard --layout v2", hf);
  std::string out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  const sfs::path script = fx.scratch() / "load.py";
  const std::string py =
      "import sys, torch\n"
      "from transformers import AutoModelForCausalLM\n"
      "from safetensors import safe_open\n"
      "view, orig = sys.argv[1], sys.argv[2]\n"
      "m, info = AutoModelForCausalLM.from_pretrained(view, variant='dense', torch_dtype=torch.float32,\n"
      "                                               output_loading_info=True)\n"
      "bad = {k: v for k, v in info.items() if v}\n"
      "assert not bad, f'loading info: {bad}'\n"
      "sd = m.state_dict()\n"
      "n = 0\n"
      "with safe_open(view + '/model.dense.safetensors', framework='pt') as f:\n"
      "    for k in f.keys():\n"
      "        assert torch.equal(sd[k], f.get_tensor(k).float()), k\n"
      "        n += 1\n"
      "assert n == 47, n\n"
      "o = AutoModelForCausalLM.from_pretrained(orig, torch_dtype=torch.float32)\n"
      "ids = torch.tensor([[1, 400, 300, 200, 100]])\n"
      "seq = o.generate(ids, max_new_tokens=48, do_sample=False)\n"
      "with torch.no_grad():\n"
      "    lo = o(seq, labels=seq).loss.item()\n"
      "    lm = m(seq, labels=seq).loss.item()\n"
      "print(f'tensors {n}; loss of the original model {lo:.4f}, of the dense view {lm:.4f}')\n"
      // 8-bit weights: the loss moves by little (a wrong or misplaced
      // weight takes it towards ln(512) = 6.2).
      "assert abs(lm - lo) < 0.1, (lo, lm)\n";
  wctest::write_file(script, std::vector<uint8_t>(py.begin(), py.end()));
  const int rc = sh("timeout 300 python3 " + q(script.string()) + " " + q((fx.mnt() / "v2").string()) + " " +
                        q(hf.string()),
                    &out);
  EXPECT_EQ(rc, 0) << out;
  const size_t at = out.find("tensors 47;");
  EXPECT_NE(at, std::string::npos) << out;
  if (at != std::string::npos) std::printf("[ transformers] %s", out.substr(at).c_str());
  EXPECT_GT(fx.stats()["decode"]["chunks"].get<uint64_t>(), 0u) << "the weights were computed by the mount";
  EXPECT_EQ(fx.stats()["decode"]["errors"].get<uint64_t>(), 0u);
}
