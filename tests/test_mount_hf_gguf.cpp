// tests/test_mount_hf_gguf.cpp — the GGUF view of Hugging Face Llama
// directories through a real FUSE mount.
//
// A store with two real Llama directories (stories260K's weights under
// Hugging Face names, scripts/make_hf_llama.py): F32 as two shards stored as
// .wcodec containers, and BF16 as one plain file. Through the mount: `ls`
// shows NAME.gguf beside the inputs and stat/ls decode nothing; every tensor
// and the llama.* / tokenizer.* keys of the view equal what llama.cpp's
// convert_hf_to_gguf.py writes for the same directory; llama.cpp
// (llama-simple, greedy, 32 tokens, a fixed prompt) loads the view from the
// mount and prints what it prints for the converter's file; a per-row int8
// directory's view (Q8_0) dequantizes to the converter's values and loads;
// nothing is written to the store. SmolLM2-135M-Instruct (a BPE
// tokenizer.json, BF16, three shards stored as .wcodec; scripts/smollm2.sh):
// the view through the mount equals the converter's file and llama.cpp
// prints the same greedy text from both.
//
// Needs /dev/fuse and fusermount3, llama.cpp's cache (scripts/llama_cpp.sh)
// and the converter's Python packages (and SmolLM2, WCODEC_SMOLLM2_HF, for
// its test); skipped visibly otherwise.
#include <gtest/gtest.h>

#include "hf_gguf_testutil.h"
#include "mount_fixture.h"
#include "testutil.h"

namespace sfs = std::filesystem;
using namespace mounttest;

TEST(mount_hf_gguf, ViewsLoadInLlamaCppAndEqualTheConverter) {
  REQUIRE_FUSE();
  if (hfgguf::llama_dir().empty() || !sfs::exists(hfgguf::llama_dir() / "bin" / "llama-simple"))
    GTEST_SKIP() << "SKIPPED: llama.cpp's tools are not in the cache (bash scripts/llama_cpp.sh builds them)";
  MountFixture fx;
  // The converter's files, from plain copies outside the store.
  struct Case {
    const char* dir;
    const char* weights;
    int shards;
    const char* outtype;
    bool wcodec;
  };
  const Case cases[] = {{"llama-f32", "stories260K.f32.safetensors", 2, "f32", true},
                        {"llama-bf16", "stories260K.bf16.safetensors", 1, "bf16", false}};
  std::vector<sfs::path> conv;
  for (const Case& c : cases) {
    const sfs::path plain = fx.scratch() / (std::string(c.dir) + "-plain");
    hfgguf::make_dir(plain, c.weights, c.shards);
    std::string skip;
    conv.push_back(hfgguf::converted(plain, c.outtype, &skip));
    if (conv.back().empty()) GTEST_SKIP() << "SKIPPED: " << skip;
    hfgguf::make_dir(fx.store() / c.dir, c.weights, c.shards);
    if (c.wcodec) hfgguf::store_as_wcodec(fx.store() / c.dir);
  }
  std::string out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  ASSERT_EQ(sh("ls -1 " + q((fx.mnt() / "llama-f32").string()), &out), 0) << out;
  EXPECT_EQ(out,
            "config.json\ngeneration_config.json\nmodel-00001-of-00002.safetensors\nmodel-00002-of-00002.safetensors\n"
            "model.gguf\nmodel.safetensors.index.json\nspecial_tokens_map.json\ntokenizer.model\ntokenizer_config.json\n");
  ASSERT_EQ(sh("ls -l " + q((fx.mnt() / "llama-bf16").string()) + " && stat " + q((fx.mnt() / "llama-bf16" / "model.gguf").string()), &out), 0) << out;
  EXPECT_NE(out.find("model.gguf"), std::string::npos) << out;
  for (size_t i = 0; i < 2; ++i)
    EXPECT_GT(sfs::file_size(fx.mnt() / cases[i].dir / "model.gguf"), 500000u);
  EXPECT_EQ(fx.stats()["decode"]["bytes"].get<uint64_t>(), 0u) << "stat and ls decoded something";

  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(cases[i].dir);
    const sfs::path view = fx.mnt() / cases[i].dir / "model.gguf";
    EXPECT_EQ(hfgguf::same_gguf(wctest::read_file(view), wctest::read_file(conv[i])), "");
    const std::string b = hfgguf::llama_simple_text(conv[i]);
    const std::string a = hfgguf::llama_simple_text(view);
    EXPECT_GT(b.size(), std::string(hfgguf::kLlamaPrompt).size() + 10) << b;
    EXPECT_EQ(a, b);
  }
  // Per-row int8 weights, .wcodec-stored: the view maps them to Q8_0, and
  // llama.cpp generates from it through the mount.
  hfgguf::make_dir(fx.scratch() / "int8-plain", "stories260K.rtn-int8.safetensors");
  hfgguf::make_dequantized(fx.scratch() / "int8-plain", fx.scratch() / "deq");
  std::string skip;
  const sfs::path deq = hfgguf::converted(fx.scratch() / "deq", "f32", &skip);
  ASSERT_FALSE(deq.empty()) << skip;
  hfgguf::make_dir(fx.store() / "llama-int8", "stories260K.rtn-int8.safetensors");
  hfgguf::store_as_wcodec(fx.store() / "llama-int8");
  const sfs::path q8 = fx.mnt() / "llama-int8" / "model.gguf";
  ASSERT_TRUE(wait_until([&] { return sfs::exists(q8); }, 10));
  EXPECT_EQ(hfgguf::same_gguf(wctest::read_file(q8), wctest::read_file(deq), /*q8=*/true), "");
  // (Its text is not compared with the F32 file's: llama.cpp's Q8_0 matrix
  // products quantize the activations too, so the logits differ slightly.)
  const std::string q8_text = hfgguf::llama_simple_text(q8);
  EXPECT_GT(q8_text.size(), std::string(hfgguf::kLlamaPrompt).size() + 10) << q8_text;
  EXPECT_GT(fx.stats()["decode"]["bytes"].get<uint64_t>(), 0u);  // the .wcodec shards were decoded by the reads
  fx.unmount();
  for (const auto& e : sfs::recursive_directory_iterator(fx.store()))
    EXPECT_NE(e.path().extension(), ".gguf") << "a view was written to the store: " << e.path();
}

// SmolLM2-135M-Instruct, a Llama with a BPE tokenizer (tokenizer.json only),
// its three BF16 shards stored as .wcodec: the view through the mount equals
// the converter's file, and llama.cpp's greedy text (stdout of llama-simple,
// 32 tokens) from the view is the text from the converter's file.
TEST(mount_hf_gguf, BpeModelViewGeneratesTheConvertersText) {
  REQUIRE_FUSE();
  if (hfgguf::llama_dir().empty() || !sfs::exists(hfgguf::llama_dir() / "bin" / "llama-simple"))
    GTEST_SKIP() << "SKIPPED: llama.cpp's tools are not in the cache (bash scripts/llama_cpp.sh builds them)";
  std::string skip;
  const sfs::path src = hfgguf::smollm2_dir(&skip);
  if (src.empty()) GTEST_SKIP() << "SKIPPED: " << skip;
  const sfs::path conv = hfgguf::converted(src, "bf16", &skip);
  if (conv.empty()) GTEST_SKIP() << "SKIPPED: " << skip;
  MountFixture fx;
  hfgguf::copy_smollm2(src, fx.store() / "smol", false);
  hfgguf::store_as_wcodec(fx.store() / "smol", 1 << 20, /*fast=*/true);
  std::string out;
  ASSERT_EQ(fx.mount("", &out), 0) << out;
  const sfs::path view = fx.mnt() / "smol" / "model.gguf";
  ASSERT_TRUE(sfs::exists(view));
  EXPECT_EQ(hfgguf::same_gguf(wctest::read_file(view), wctest::read_file(conv)), "");
  const sfs::path bin = hfgguf::llama_dir() / "bin" / "llama-simple";
  // What llama-simple prints from the prompt on, up to its closing log line.
  auto text = [&](const sfs::path& model) -> std::string {
    std::string o;
    EXPECT_EQ(sh("timeout 120 " + q(bin.string()) + " -m " + q(model.string()) + " -n 32 " +
                     q("The capital of France is"), &o),
              0)
        << o;
    const size_t b = o.find("The capital of France is");
    const size_t e = o.find("main: decoded", b == std::string::npos ? 0 : b);
    EXPECT_NE(b, std::string::npos) << o;
    EXPECT_NE(e, std::string::npos) << o;
    if (b == std::string::npos || e == std::string::npos) return {};
    return o.substr(b, e - b);
  };
  const std::string want = text(conv);
  EXPECT_NE(want.find("The capital of France is Paris"), std::string::npos) << want;
  EXPECT_EQ(text(view), want);
  EXPECT_GT(fx.stats()["decode"]["bytes"].get<uint64_t>(), 0u);  // served by decoding the .wcodec shards
  fx.unmount();
}
