// tests/hf_gguf_testutil.h — Hugging Face Llama directories and the files
// llama.cpp's convert_hf_to_gguf.py makes of them, for the GGUF view's suites
// (test_fs_hf_gguf.cpp, test_mount_hf_gguf.cpp).
//
// Directories come from scripts/make_hf_llama.py (stories260K's real
// weights, the committed SentencePiece test tokenizer), as one file or as
// shards, and can be stored as .wcodec containers. The converter's file for
// a directory is made once per content and outtype and kept in the build
// tree's test cache (it takes seconds). converter_unavailable() names what
// is missing (llama.cpp's tree, Python packages) so that suites skip
// visibly. same_gguf() compares a view with the converter's file: every
// llama.* and tokenizer.* key and the general.* keys the view writes, and
// every tensor's name, type, shape and bytes.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "testutil.h"
#include "wcodec/container.h"
#include "wcodec/gguf.h"

namespace hfgguf {

namespace sfs = std::filesystem;

inline std::string q(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

// llama.cpp's CPU tools and tree (scripts/llama_cpp.sh), or "" when absent.
inline sfs::path llama_dir() {
  std::string cache;
  if (const char* c = std::getenv("WCODEC_CACHE")) cache = c;
  else if (const char* x = std::getenv("XDG_CACHE_HOME")) cache = std::string(x) + "/wcodecfs";
  else if (const char* h = std::getenv("HOME")) cache = std::string(h) + "/.cache/wcodecfs";
  const sfs::path d = sfs::path(cache) / "llama.cpp-0.3.36";
  std::error_code ec;
  if (!sfs::exists(d / "src" / "convert_hf_to_gguf.py", ec)) return {};
  return d;
}

// Why the converter cannot run here, or "".
inline std::string converter_unavailable() {
  if (llama_dir().empty())
    return "llama.cpp's tree is not in the cache (bash scripts/llama_cpp.sh builds it): convert_hf_to_gguf.py missing";
  std::string out;
  if (wctest::run_command("python3 -c 'import torch, transformers, sentencepiece, numpy, safetensors' 2>&1", &out) != 0)
    return "the converter's Python packages are missing (torch, transformers, sentencepiece, numpy, safetensors): " +
           out.substr(0, 200);
  return "";
}

inline sfs::path source_dir() {
#ifdef WCODECFS_SOURCE_DIR
  return WCODECFS_SOURCE_DIR;
#else
  return sfs::current_path();
#endif
}

// Makes a Llama directory at `dir` from ../shared/data/<weights>.
inline void make_dir(const sfs::path& dir, const std::string& weights = "stories260K.f32.safetensors",
                     int shards = 1) {
  std::string out;
  const std::string cmd = "python3 " + q((source_dir() / "scripts" / "make_hf_llama.py").string()) + " " +
                          q(dir.string()) + " --shards " + std::to_string(shards) + " --weights " +
                          q((wctest::data_dir() / weights).string()) + " 2>&1";
  ASSERT_EQ(wctest::run_command(cmd, &out), 0) << cmd << "\n" << out;
}

// Replaces every *.safetensors weight file of `dir` by its .wcodec container.
inline void store_as_wcodec(const sfs::path& dir, uint64_t chunk_bytes = 8192) {
  std::vector<sfs::path> ws;
  for (const auto& e : sfs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") ws.push_back(e.path());
  ASSERT_FALSE(ws.empty()) << dir;
  for (const sfs::path& w : ws) {
    const auto orig = wctest::read_file(w);
    wcodec::EncodeConfig cfg;
    cfg.chunk_bytes = chunk_bytes;
    auto enc = wcodec::encode_safetensors(orig.data(), orig.size(), cfg, w.string());
    ASSERT_TRUE(enc.ok()) << enc.status().ToString();
    sfs::path out = w;
    out.replace_extension(".wcodec");
    wctest::write_file(out, *enc);
    sfs::remove(w);
  }
}

inline sfs::path cache_root() {
#ifdef WCODECFS_TEST_CACHE
  return sfs::path(WCODECFS_TEST_CACHE) / "hf-gguf";
#else
  return sfs::temp_directory_path() / "wcodecfs-test-cache" / "hf-gguf";
#endif
}

// The converter's file for `dir` (plain weights) with `outtype`; cached by
// the content of the directory's files. Empty, with *skip saying what is
// missing, when it is not cached and the converter cannot run; fails the
// test when the converter fails.
inline sfs::path converted(const sfs::path& dir, const std::string& outtype, std::string* skip) {
  std::vector<sfs::path> files;
  for (const auto& e : sfs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<uint8_t> all(outtype.begin(), outtype.end());
  for (const auto& f : files) {
    const std::string n = f.filename().string();
    all.insert(all.end(), n.begin(), n.end());
    const auto b = wctest::read_file(f);
    const std::string h = wctest::sha256_hex(b);
    all.insert(all.end(), h.begin(), h.end());
  }
  const sfs::path out = cache_root() / (wctest::sha256_hex(all).substr(0, 24) + "." + outtype + ".gguf");
  std::error_code ec;
  if (sfs::exists(out, ec)) return out;
  *skip = converter_unavailable();
  if (!skip->empty()) return {};
  sfs::create_directories(cache_root(), ec);
  const sfs::path tmp = out.string() + ".tmp" + std::to_string(::getpid());
  const sfs::path L = llama_dir();
  std::string log;
  const std::string cmd = "PYTHONPATH=" + q((L / "src" / "gguf-py").string()) + " python3 " +
                          q((L / "src" / "convert_hf_to_gguf.py").string()) + " " + q(dir.string()) +
                          " --outtype " + outtype + " --outfile " + q(tmp.string()) + " 2>&1";
  EXPECT_EQ(wctest::run_command(cmd, &log), 0) << cmd << "\n" << log;
  sfs::rename(tmp, out, ec);
  EXPECT_FALSE(ec) << ec.message();
  return out;
}

inline bool compared_key(const std::string& k) {
  return k.rfind("llama.", 0) == 0 || k.rfind("tokenizer.", 0) == 0 || k == "general.architecture" ||
         k == "general.type" || k == "general.file_type" || k == "general.quantization_version";
}

inline std::string value_text(const wcodec::GgufValue& v) {
  std::string s = std::string(wcodec::gguf_type_name(v.type)) + (v.is_array ? "[]" : "") + " x" +
                  std::to_string(v.count());
  if (!v.strings.empty()) s += " \"" + v.strings[0].substr(0, 40) + "\"";
  return s;
}

// Compares a view with the converter's file; returns "" when they agree,
// else what differs.
inline std::string same_gguf(const std::vector<uint8_t>& view, const std::vector<uint8_t>& conv) {
  auto a = wcodec::parse_gguf(view.data(), view.size(), view.size(), "view");
  if (!a.ok()) return "view: " + a.status().ToString();
  auto b = wcodec::parse_gguf(conv.data(), conv.size(), conv.size(), "converter");
  if (!b.ok()) return "converter: " + b.status().ToString();
  if (a->alignment != b->alignment) return "alignment differs";
  for (const auto& kv : b->kv) {
    if (!compared_key(kv.key)) continue;
    const wcodec::GgufKv* mine = a->find(kv.key);
    if (!mine) return "key " + kv.key + " missing in the view";
    if (mine->value.type != kv.value.type || mine->value.is_array != kv.value.is_array ||
        mine->value.bytes != kv.value.bytes || mine->value.strings != kv.value.strings)
      return "key " + kv.key + " differs: view " + value_text(mine->value) + ", converter " + value_text(kv.value);
  }
  for (const auto& kv : a->kv)
    if (compared_key(kv.key) && !b->find(kv.key)) return "key " + kv.key + " only in the view";
  if (a->tensors.size() != b->tensors.size())
    return "tensor count " + std::to_string(a->tensors.size()) + " vs " + std::to_string(b->tensors.size());
  for (size_t i = 0; i < a->tensors.size(); ++i) {
    const auto& x = a->tensors[i];
    const auto& y = b->tensors[i];
    if (x.name != y.name) return "tensor " + std::to_string(i) + ": " + x.name + " vs " + y.name;
    if (x.type != y.type || x.n_dims != y.n_dims || !std::equal(x.ne, x.ne + 4, y.ne) || x.nbytes != y.nbytes)
      return "tensor " + x.name + ": type or shape differs";
    if (!std::equal(view.begin() + static_cast<std::ptrdiff_t>(a->data_offset + x.offset),
                    view.begin() + static_cast<std::ptrdiff_t>(a->data_offset + x.offset + x.nbytes),
                    conv.begin() + static_cast<std::ptrdiff_t>(b->data_offset + y.offset)))
      return "tensor " + x.name + ": bytes differ";
  }
  return "";
}

}  // namespace hfgguf
