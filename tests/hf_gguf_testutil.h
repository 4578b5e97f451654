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

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "testutil.h"
#include "wcodec/container.h"
#include "wcodec/gguf.h"
#include "wcodec/safetensors.h"

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

// The prompt the llama.cpp tests generate from.
inline constexpr const char* kLlamaPrompt = "Once upon a time there was";

// llama-simple's greedy text for `model` (a GGUF file): the prompt and 32
// generated tokens, what it prints between its loading log and "main:
// decoded". Empty, with a failed EXPECT, when it fails or prints neither.
inline std::string llama_simple_text(const sfs::path& model, const std::string& prompt = kLlamaPrompt) {
  const sfs::path bin = llama_dir() / "bin" / "llama-simple";
  std::string out;
  const int rc =
      wctest::run_command("timeout 120 " + q(bin.string()) + " -m " + q(model.string()) + " -n 32 " + q(prompt), &out);
  EXPECT_EQ(rc, 0) << out;
  const size_t b = out.find("<s> " + prompt);
  const size_t e = out.find("main: decoded 32 tokens", b == std::string::npos ? 0 : b);
  EXPECT_NE(b, std::string::npos) << out;
  EXPECT_NE(e, std::string::npos) << out;
  if (b == std::string::npos || e == std::string::npos) return {};
  return out.substr(b, e - b);
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

// Replaces every *.safetensors weight file of `dir` by its .wcodec container
// (`fast`: without the tile tool search, on two threads, for large models).
inline void store_as_wcodec(const sfs::path& dir, uint64_t chunk_bytes = 8192, bool fast = false) {
  std::vector<sfs::path> ws;
  for (const auto& e : sfs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") ws.push_back(e.path());
  ASSERT_FALSE(ws.empty()) << dir;
  for (const sfs::path& w : ws) {
    const auto orig = wctest::read_file(w);
    wcodec::EncodeConfig cfg;
    cfg.chunk_bytes = chunk_bytes;
    if (fast) {
      cfg.tool_search = false;
      cfg.threads = 2;
    }
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

// The SmolLM2-135M-Instruct Hugging Face directory (BPE tokenizer, BF16,
// three shards; scripts/smollm2.sh, exported by scripts/test.sh as
// WCODEC_SMOLLM2_HF), or "" with *skip saying why it is not here.
inline sfs::path smollm2_dir(std::string* skip) {
  const char* e = std::getenv("WCODEC_SMOLLM2_HF");
  std::error_code ec;
  if (e && *e && sfs::exists(sfs::path(e) / "model.safetensors.index.json", ec)) return e;
  *skip = e && *e ? std::string("WCODEC_SMOLLM2_HF=") + e + " holds no model.safetensors.index.json"
                  : "WCODEC_SMOLLM2_HF is not set (bash scripts/smollm2.sh fetches SmolLM2-135M-Instruct and prints "
                    "its directory; scripts/test.sh exports it)";
  return {};
}

// Copies (hard links where it can) the SmolLM2 directory `src` to `dst`:
// as it is (three shards), or with `single`, its shards joined into one
// model.safetensors (same tensors, same sorted order, no index).
inline void copy_smollm2(const sfs::path& src, const sfs::path& dst, bool single) {
  sfs::create_directories(dst);
  std::vector<sfs::path> shards;
  for (const auto& e : sfs::directory_iterator(src)) {
    const std::string n = e.path().filename().string();
    const bool weights = e.path().extension() == ".safetensors";
    if (weights) shards.push_back(e.path());
    if (single && (weights || n == "model.safetensors.index.json")) continue;
    std::error_code ec;
    sfs::create_hard_link(e.path(), dst / n, ec);
    if (ec) sfs::copy_file(e.path(), dst / n, sfs::copy_options::overwrite_existing);
  }
  if (!single) return;
  std::sort(shards.begin(), shards.end());
  std::vector<wcodec::TensorData> all;
  for (const auto& sh : shards) {
    const auto bytes = wctest::read_file(sh);
    auto h = wcodec::parse_safetensors_header(bytes.data(), bytes.size(), bytes.size(), sh.string());
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    for (const auto& t : h->tensors) {
      const uint8_t* p = bytes.data() + h->data_start + t.begin;
      all.push_back({t.name, t.dtype, t.shape, std::vector<uint8_t>(p, p + t.nbytes())});
    }
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  auto built = wcodec::build_safetensors(all, std::map<std::string, std::string>{{"format", "pt"}});
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  wctest::write_file(dst / "model.safetensors", *built);
}

inline bool compared_key(const std::string& k, bool q8) {
  return k.rfind("llama.", 0) == 0 || k.rfind("tokenizer.", 0) == 0 || k == "general.architecture" ||
         k == "general.type" || (k == "general.file_type" && !q8) || k == "general.quantization_version";
}

// IEEE half to float, written independently of the product's conversion.
inline float half_to_float(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float v;
  if (e == 0) v = std::ldexp(static_cast<float>(m), -24);
  else if (e == 31) v = m ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else v = std::ldexp(static_cast<float>(m + 1024), e - 25);
  return (h & 0x8000) ? -v : v;
}

// Q8_0 blocks (f16 scale, 32 int8) as the F32 values ggml dequantizes.
inline std::vector<uint8_t> dequantize_q8_0(const uint8_t* p, uint64_t nbytes) {
  std::vector<uint8_t> out;
  for (uint64_t b = 0; b + 34 <= nbytes; b += 34) {
    const float d = half_to_float(static_cast<uint16_t>(p[b] | (p[b + 1] << 8)));
    for (int j = 0; j < 32; ++j) {
      const float f = d * static_cast<float>(static_cast<int8_t>(p[b + 2 + j]));
      const auto* fb = reinterpret_cast<const uint8_t*>(&f);
      out.insert(out.end(), fb, fb + 4);
    }
  }
  return out;
}

// Writes to `out` a copy of Llama directory `int8_dir` (per-row int8
// weights NAME + NAME_scale, or packed ternary NAME_packed + NAME_scale)
// whose model.safetensors holds the F32 values code x scale instead (the
// other tensors unchanged). A ternary row's length is the row length of the
// same tensor in ../shared/data/stories260K.f32.safetensors.
inline void make_dequantized(const sfs::path& int8_dir, const sfs::path& out) {
  auto f32 = wcodec::read_safetensors_header_file((wctest::data_dir() / "stories260K.f32.safetensors").string());
  ASSERT_TRUE(f32.ok()) << f32.status().ToString();
  std::map<std::string, uint64_t> cols_of;
  for (const auto& t : f32->tensors)
    if (t.shape.size() == 2) cols_of[t.name] = t.shape[1];
  sfs::create_directories(out);
  for (const auto& e : sfs::directory_iterator(int8_dir))
    if (e.path().filename() != "model.safetensors") sfs::copy_file(e.path(), out / e.path().filename());
  const auto bytes = wctest::read_file(int8_dir / "model.safetensors");
  auto h = wcodec::parse_safetensors_header(bytes.data(), bytes.size(), bytes.size(), "int8");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  std::map<std::string, const wcodec::TensorInfo*> by;
  for (const auto& t : h->tensors) by[t.name] = &t;
  std::vector<wcodec::TensorData> ts;
  for (const auto& t : h->tensors) {
    if (t.name.size() > 6 && t.name.substr(t.name.size() - 6) == "_scale") continue;
    const uint8_t* p = bytes.data() + h->data_start + t.begin;
    wcodec::TensorData d{t.name, t.dtype, t.shape, std::vector<uint8_t>(p, p + t.nbytes())};
    if (t.dtype == wcodec::DType::kU8 && t.name.size() > 7 && t.name.substr(t.name.size() - 7) == "_packed") {
      const std::string base = t.name.substr(0, t.name.size() - 7);
      const wcodec::TensorInfo* sc = by.at(base + "_scale");
      const uint8_t* s = bytes.data() + h->data_start + sc->begin;
      const uint64_t cols = cols_of.at(base), per_row = t.shape[1];
      d.name = base;
      d.dtype = wcodec::DType::kF32;
      d.shape = {t.shape[0], cols};
      d.bytes.clear();
      for (uint64_t r = 0; r < t.shape[0]; ++r)
        for (uint64_t c = 0; c < cols; ++c) {
          const int code = (p[r * per_row + c / 4] >> (2 * (c % 4))) & 3;
          const float v = code == 1 ? 1.0f : code == 2 ? -1.0f : 0.0f;
          const float f = half_to_float(static_cast<uint16_t>(s[2 * r] | (s[2 * r + 1] << 8))) * v;
          const auto* fb = reinterpret_cast<const uint8_t*>(&f);
          d.bytes.insert(d.bytes.end(), fb, fb + 4);
        }
    } else if (t.dtype == wcodec::DType::kI8) {
      const wcodec::TensorInfo* sc = by.at(t.name + "_scale");
      const uint8_t* s = bytes.data() + h->data_start + sc->begin;
      d.dtype = wcodec::DType::kF32;
      d.bytes.clear();
      const uint64_t cols = t.shape[1];
      for (uint64_t i = 0; i < t.nbytes(); ++i) {
        const uint64_t r = i / cols;
        const float f = half_to_float(static_cast<uint16_t>(s[2 * r] | (s[2 * r + 1] << 8))) *
                        static_cast<float>(static_cast<int8_t>(p[i]));
        const auto* fb = reinterpret_cast<const uint8_t*>(&f);
        d.bytes.insert(d.bytes.end(), fb, fb + 4);
      }
    }
    ts.push_back(std::move(d));
  }
  auto built = wcodec::build_safetensors(ts, h->metadata);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  wctest::write_file(out / "model.safetensors", *built);
}

inline std::string value_text(const wcodec::GgufValue& v) {
  std::string s = std::string(wcodec::gguf_type_name(v.type)) + (v.is_array ? "[]" : "") + " x" +
                  std::to_string(v.count());
  if (!v.strings.empty()) s += " \"" + v.strings[0].substr(0, 40) + "\"";
  return s;
}

// Compares a view with the converter's file; returns "" when they agree,
// else what differs.
// With `q8`, a Q8_0 tensor of the view is compared, dequantized, with the
// converter's F32 tensor (and general.file_type is not compared).
inline std::string same_gguf(const std::vector<uint8_t>& view, const std::vector<uint8_t>& conv, bool q8 = false) {
  auto a = wcodec::parse_gguf(view.data(), view.size(), view.size(), "view");
  if (!a.ok()) return "view: " + a.status().ToString();
  auto b = wcodec::parse_gguf(conv.data(), conv.size(), conv.size(), "converter");
  if (!b.ok()) return "converter: " + b.status().ToString();
  if (a->alignment != b->alignment) return "alignment differs";
  for (const auto& kv : b->kv) {
    if (!compared_key(kv.key, q8)) continue;
    const wcodec::GgufKv* mine = a->find(kv.key);
    if (!mine) return "key " + kv.key + " missing in the view";
    if (mine->value.type != kv.value.type || mine->value.is_array != kv.value.is_array ||
        mine->value.bytes != kv.value.bytes || mine->value.strings != kv.value.strings)
      return "key " + kv.key + " differs: view " + value_text(mine->value) + ", converter " + value_text(kv.value);
  }
  for (const auto& kv : a->kv)
    if (compared_key(kv.key, q8) && !b->find(kv.key)) return "key " + kv.key + " only in the view";
  size_t q8_tensors = 0;
  if (a->tensors.size() != b->tensors.size())
    return "tensor count " + std::to_string(a->tensors.size()) + " vs " + std::to_string(b->tensors.size());
  for (size_t i = 0; i < a->tensors.size(); ++i) {
    const auto& x = a->tensors[i];
    const auto& y = b->tensors[i];
    if (x.name != y.name) return "tensor " + std::to_string(i) + ": " + x.name + " vs " + y.name;
    if (q8 && x.type == wcodec::kGgmlTypeQ8_0 && y.type == wcodec::kGgmlTypeF32) {
      if (!std::equal(x.ne, x.ne + 4, y.ne)) return "tensor " + x.name + ": shape differs";
      const auto deq = dequantize_q8_0(view.data() + a->data_offset + x.offset, x.nbytes);
      if (deq.size() != y.nbytes ||
          !std::equal(deq.begin(), deq.end(), conv.begin() + static_cast<std::ptrdiff_t>(b->data_offset + y.offset)))
        return "tensor " + x.name + ": dequantized Q8_0 values differ";
      ++q8_tensors;
      continue;
    }
    if (x.type != y.type || x.n_dims != y.n_dims || !std::equal(x.ne, x.ne + 4, y.ne) || x.nbytes != y.nbytes)
      return "tensor " + x.name + ": type or shape differs";
    if (!std::equal(view.begin() + static_cast<std::ptrdiff_t>(a->data_offset + x.offset),
                    view.begin() + static_cast<std::ptrdiff_t>(a->data_offset + x.offset + x.nbytes),
                    conv.begin() + static_cast<std::ptrdiff_t>(b->data_offset + y.offset)))
      return "tensor " + x.name + ": bytes differ";
  }
  if (q8 && q8_tensors == 0) return "no Q8_0 tensor in the view";
  return "";
}

}  // namespace hfgguf
