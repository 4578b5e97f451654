// tests/trellis_gguf_testutil.h — Trellis stores of a real Llama model and
// the files the GGUF form of their dense view is checked against, for
// test_fs_trellis_gguf.cpp and test_mount_trellis_gguf.cpp.
//
// A store is stories260K (../shared/data) quantized with `wcodec trellis
// quantize` (v2 or v3 layout), with the small files of the Hugging Face
// directory scripts/make_hf_llama.py makes (Llama config.json, the 512-piece
// test tokenizer, tokenizer_config.json, ...) copied in, and optionally with
// every safetensors file stored as X.wcodec. The reference dense checkpoint
// of a store is made here on the host, independently of the mount: every
// quantized weight dequantized by the codec's reference dequantizer
// (trellis_dequantize_rows) and rounded to F16 by the compiler's half type,
// every base tensor copied; convert_hf_to_gguf.py run on a directory holding
// it and the store's small files (hf_gguf_testutil.h, cached) is what the
// GGUF form must equal.
//
// Thread-safety: test helpers; one thread.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "hf_gguf_testutil.h"
#include "testutil.h"
#include "wcodec/safetensors.h"
#include "wcodec/trellis.h"

namespace trellisgguf {

namespace sfs = std::filesystem;
using hfgguf::q;

// The small files of a Hugging Face Llama directory that a store gets.
inline const char* const kSmallFiles[] = {"config.json", "generation_config.json", "special_tokens_map.json",
                                          "tokenizer.model", "tokenizer_config.json"};

// Quantizes stories260K into `store` (`args`: "--bits 6 --layout v2 ...")
// and copies in the small files of Llama directory `hf` (made once with
// hfgguf::make_dir), replacing the quantizer's config.json.
inline void make_store(const sfs::path& store, const std::string& args, const sfs::path& hf) {
  std::string out;
  const std::string cmd = q(WCODEC_TOOL) + " trellis quantize " +
                          q((wctest::data_dir() / "stories260K.f32.safetensors").string()) + " " + q(store.string()) +
                          " " + args + " 2>&1";
  ASSERT_EQ(wctest::run_command(cmd, &out), 0) << cmd << "\n" << out;
  for (const char* f : kSmallFiles) sfs::copy_file(hf / f, store / f, sfs::copy_options::overwrite_existing);
}

// Replaces every X.safetensors below `store` by X.wcodec (`wcodec encode`).
inline void encode_store(const sfs::path& store) {
  std::vector<sfs::path> files;
  for (const auto& e : sfs::recursive_directory_iterator(store))
    if (e.path().extension() == ".safetensors") files.push_back(e.path());
  ASSERT_FALSE(files.empty()) << store;
  for (const sfs::path& f : files) {
    sfs::path enc = f;
    enc.replace_extension(".wcodec");
    std::string out;
    ASSERT_EQ(wctest::run_command(q(WCODEC_TOOL) + " encode -q " + q(f.string()) + " " + q(enc.string()) + " 2>&1", &out), 0)
        << out;
    sfs::remove(f);
  }
}

// The dense checkpoint of plain store `store`, made on the host (see above).
inline std::vector<uint8_t> reference_dense(const sfs::path& store) {
  auto dir = wcodec::trellis_posix_dir(store.string());
  const wcodec::TrellisStore st = wcodec::trellis_read(*dir);
  EXPECT_TRUE(st.problems.empty()) << st.problems.front().to_string();
  if (!st.problems.empty()) return {};
  std::set<size_t> parts;
  std::vector<wcodec::TensorData> ts;
  for (const auto& w : st.weights) {
    std::vector<uint8_t> part[4];
    for (int p = 0; p < 4; ++p) {
      parts.insert(w.parts[p]);
      const auto& t = st.tensors[w.parts[p]];
      part[p].resize(t.info.nbytes());
      EXPECT_TRUE(dir->read(t.file, t.offset, part[p].size(), part[p].data()).ok()) << t.file;
    }
    const wcodec::TrellisComponents c{part[0].data(), part[0].size(), part[1].data(), part[2].data(), part[3].data()};
    std::vector<float> v(w.out * w.in);
    const auto s = wcodec::trellis_dequantize_rows(c, w.out, w.in, w.bits, st.hadamard, 0, w.out, v.data());
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::vector<uint8_t> bytes(v.size() * 2);
    for (size_t k = 0; k < v.size(); ++k) {
      const _Float16 h = static_cast<_Float16>(v[k]);
      std::memcpy(bytes.data() + 2 * k, &h, 2);
    }
    ts.push_back({w.name, wcodec::DType::kF16, w.weight_shape.empty() ? std::vector<uint64_t>{w.out, w.in} : w.weight_shape,
                  std::move(bytes)});
  }
  for (size_t k = 0; k < st.tensors.size(); ++k) {
    if (parts.count(k)) continue;
    const auto& t = st.tensors[k];
    std::vector<uint8_t> bytes(t.info.nbytes());
    EXPECT_TRUE(dir->read(t.file, t.offset, bytes.size(), bytes.data()).ok()) << t.file;
    ts.push_back({t.v3_name, t.info.dtype, t.info.shape, std::move(bytes)});
  }
  auto built = wcodec::build_safetensors(ts, std::map<std::string, std::string>{{"format", "pt"}});
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  return built.ok() ? *built : std::vector<uint8_t>{};
}

// The converter's GGUF (--outtype f16) of a directory `ref` made of the
// reference dense checkpoint of plain store `store` and its small files.
// Empty, with *skip saying what is missing, when the converter cannot run.
inline sfs::path converted(const sfs::path& store, const sfs::path& ref, std::string* skip) {
  sfs::create_directories(ref);
  const auto dense = reference_dense(store);
  if (dense.empty()) return {};
  wctest::write_file(ref / wcodec::kTrellisDenseName, dense);
  for (const char* f : kSmallFiles) sfs::copy_file(store / f, ref / f, sfs::copy_options::overwrite_existing);
  return hfgguf::converted(ref, "f16", skip);
}

// Where two GGUF files' tensor data sections begin (the header's padded
// end), or 0 when `bytes` is not a GGUF file.
inline uint64_t data_offset(const std::vector<uint8_t>& bytes) {
  auto g = wcodec::parse_gguf(bytes.data(), bytes.size(), bytes.size(), "gguf");
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? g->data_offset : 0;
}

// "" when `view` equals the converter's file `conv` in every llama.* and
// tokenizer.* key, every tensor's name, type and shape, and byte for byte
// from the start of the tensor data to the end (the only difference being
// the general.* keys of docs/gguf-view.md); else what differs.
inline std::string same_as_converter(const std::vector<uint8_t>& view, const std::vector<uint8_t>& conv) {
  const std::string s = hfgguf::same_gguf(view, conv);
  if (!s.empty()) return s;
  const uint64_t a = data_offset(view), b = data_offset(conv);
  if (a == 0 || b == 0) return "not GGUF";
  if (view.size() - a != conv.size() - b)
    return "data sections of " + std::to_string(view.size() - a) + " and " + std::to_string(conv.size() - b) + " bytes";
  if (!std::equal(view.begin() + static_cast<std::ptrdiff_t>(a), view.end(), conv.begin() + static_cast<std::ptrdiff_t>(b)))
    return "the data sections differ";
  return "";
}

}  // namespace trellisgguf
