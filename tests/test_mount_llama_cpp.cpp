// tests/test_mount_llama_cpp.cpp — llama.cpp as the real client of stored
// GGUF files: GGUF files of every type llama.cpp makes from stories260K's
// real weights (convert_hf_to_gguf.py --outtype f32/f16/bf16/q8_0 and
// llama-quantize Q8_0 ... TQ2_0; scripts/make_gguf_files.sh, made into a
// scratch directory at test time) are stored with `wcodec encode`, decoded
// back byte for byte, read back through a real FUSE mount byte for byte, and
// llama-simple (greedy) loads each one through the mount and prints exactly
// the text it prints from the plain file.
//
// Needs llama.cpp's cache (scripts/llama_cpp.sh: WCODEC_LLAMA_CPP, or the
// default cache path), python3 with torch, numpy and sentencepiece (the
// converter), ../shared/data/stories260K.f32.safetensors and /dev/fuse; each
// missing one skips the test, saying which. Single-threaded test body.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <sstream>

#include "mount_fixture.h"
#include "testutil.h"
#include "wcodec/gguf.h"

namespace sfs = std::filesystem;
using namespace mounttest;

namespace {

const char* const kLlamaCppVersion = "0.3.36";  // scripts/llama_cpp.sh's default
const char* const kPrompt = "Once upon a time";

// The llama.cpp cache directory: $WCODEC_LLAMA_CPP, else
// ($WCODEC_CACHE | $XDG_CACHE_HOME/wcodecfs | ~/.cache/wcodecfs)/llama.cpp-<ver>,
// as scripts/llama_cpp.sh places it.
sfs::path llama_cpp_dir() {
  if (const char* d = std::getenv("WCODEC_LLAMA_CPP"); d && *d) return d;
  sfs::path cache;
  if (const char* c = std::getenv("WCODEC_CACHE"); c && *c) cache = c;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) cache = sfs::path(x) / "wcodecfs";
  else if (const char* h = std::getenv("HOME"); h && *h) cache = sfs::path(h) / ".cache" / "wcodecfs";
  return cache / (std::string("llama.cpp-") + kLlamaCppVersion);
}

std::string tool() { return WCODEC_TOOL; }

// "Q4_0 x30, F16 x5, F32 x12": the tensor types a GGUF file really holds.
std::string tensor_types(const sfs::path& p) {
  auto g = wcodec::read_gguf_file(p.string());
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return "?";
  std::map<std::string, int> n;
  for (const auto& t : g->tensors) {
    const auto* info = wcodec::ggml_type_info(t.type);
    ++n[info ? info->name : "type " + std::to_string(t.type)];
  }
  std::string s;
  for (const auto& [name, count] : n) s += (s.empty() ? "" : ", ") + name + " x" + std::to_string(count);
  return s;
}

// llama-simple's output (the prompt and 32 greedy tokens) for `model`.
std::string generate(const sfs::path& llama, const sfs::path& model, const sfs::path& err) {
  std::string out;
  // (sh() adds 2>&1 after the command: the braces keep stderr in `err`.)
  const int rc = sh("{ " + q((llama / "bin" / "llama-simple").string()) + " -m " + q(model.string()) + " -n 32 " +
                        q(kPrompt) + " 2>" + q(err.string()) + "; }",
                    &out);
  if (rc != 0) {
    const auto e = wctest::read_file(err);
    ADD_FAILURE() << "llama-simple on " << model << " exited " << rc << ":\n"
                  << out << std::string(e.begin(), e.end());
    return "";
  }
  return out;
}

}  // namespace

TEST(llama_cpp, GeneratesTheSameTextFromEveryStoredGgufType) {
  const sfs::path llama = llama_cpp_dir();
  for (const char* f : {"bin/llama-simple", "bin/llama-quantize", "src/convert_hf_to_gguf.py"})
    if (!sfs::exists(llama / f))
      GTEST_SKIP() << "SKIPPED: llama.cpp's tools are not built: no " << (llama / f)
                   << " (bash scripts/llama_cpp.sh builds them; WCODEC_LLAMA_CPP names the directory)";
  REQUIRE_FUSE();
  MountFixture fx;
  const sfs::path made = fx.scratch() / "gguf";
  std::string out;
  const int rc = sh("WCODEC_LLAMA_CPP=" + q(llama.string()) + " WCODEC_DATA=" + q(wctest::data_dir().string()) +
                        " bash " + q(std::string(WCODECFS_SOURCE_DIR) + "/scripts/make_gguf_files.sh") + " " +
                        q(made.string()),
                    &out);
  if (rc == 3) GTEST_SKIP() << "SKIPPED: " << out;
  ASSERT_EQ(rc, 0) << out;

  std::vector<std::string> names;
  {
    std::istringstream in(std::string(std::istreambuf_iterator<char>(std::ifstream(made / "files.txt").rdbuf()), {}));
    for (std::string n; std::getline(in, n);) names.push_back(n);
  }
  ASSERT_EQ(names.size(), 13u) << "scripts/make_gguf_files.sh makes 4 converter and 9 llama-quantize files";

  // Store each file; decode it back (byte for byte).
  std::map<std::string, std::string> sha;
  for (const auto& n : names) {
    const sfs::path src = made / n;
    const auto bytes = wctest::read_file(src);
    sha[n] = wctest::sha256_hex(bytes);
    const sfs::path stored = fx.store() / (n + ".wcodec");
    ASSERT_EQ(sh(q(tool()) + " encode " + q(src.string()) + " " + q(stored.string()), &out), 0) << out;
    const sfs::path back = fx.scratch() / (n + ".decoded");
    ASSERT_EQ(sh(q(tool()) + " decode " + q(stored.string()) + " " + q(back.string()), &out), 0) << out;
    EXPECT_EQ(wctest::sha256_hex(wctest::read_file(back)), sha[n]) << n << ": wcodec decode differs from the original";
    sfs::remove(back);
    std::printf("[ stored   ] %-26s %8zu -> %8ju bytes  tensors: %s\n", n.c_str(), bytes.size(),
                static_cast<uintmax_t>(sfs::file_size(stored)), tensor_types(src).c_str());
  }

  ASSERT_EQ(fx.mount("", &out), 0) << out;
  for (const auto& n : names) {
    const sfs::path through = fx.mnt() / n;
    ASSERT_TRUE(sfs::exists(through)) << n << " is not presented by the mount";
    EXPECT_EQ(wctest::sha256_hex(wctest::read_file(through)), sha[n]) << n << ": bytes through the mount differ";
    const std::string plain = generate(llama, made / n, fx.scratch() / "err-plain.txt");
    const std::string mounted = generate(llama, through, fx.scratch() / "err-mount.txt");
    EXPECT_EQ(mounted, plain) << n << ": llama-simple prints other text through the mount";
    // The prompt (after the BOS piece "<s> ") and 32 generated tokens.
    const size_t at = plain.find(kPrompt);
    EXPECT_TRUE(at != std::string::npos && at <= 4) << n << ": " << plain;
    EXPECT_GT(plain.size(), at + std::string(kPrompt).size() + 16) << n << ": llama-simple generated nothing: " << plain;
    std::printf("[ llama.cpp] %-26s through the mount: %s\n", n.c_str(),
                mounted.substr(0, mounted.find('\n')).c_str());
  }
}
