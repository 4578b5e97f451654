// tests/fuzz/fuzz_hf_gguf.cpp — libFuzzer target for the GGUF view's planner
// (wcodecfs/hf_gguf.h): config.json, the tokenizer files, the index and the
// safetensors headers of a Hugging Face directory.
//
// Input: parts separated by the four bytes 00 FF 'h' 'f':
//   0 config.json
//   1 a safetensors header: a u32 LE count of data bytes, then the JSON text
//     (the file is the 8-byte length, the JSON and that many data bytes)
//   2 tokenizer_config.json, 3 added_tokens.json, 4 tokenizer.json,
//     5 NAME.safetensors.index.json (absent or empty: not given)
//   6 tokenizer.model (absent or empty: the committed 512-piece test model;
//     the three bytes "bpe": none, so the BPE tokenizer of part 4 is used)
// Oracles:
//   - nothing crashes or reads outside its input (ASan/UBSan); a refusal is
//     a non-empty message of kCorruption, kNotSupported or kInvalidArgument;
//   - an accepted plan's header parses with wcodec's strict GGUF reader to
//     the planned pairs and tensors, every tensor's GGUF bytes equal its
//     planned size, its source range lies inside the weight file's data,
//     and a row order is a permutation of the rows;
//   - an accepted index names single .safetensors files, sorted, unique;
//   - tokenizer.json's fingerprint is 64 hex digits or a clean refusal, and
//     an accepted BPE plan writes tokenizer.ggml.model "gpt2" and the
//     table's pre-tokenizer name for that fingerprint.
// Thread-safety: single-threaded harness.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wcodec/gguf.h"
#include "wcodec/safetensors.h"
#include "wcodecfs/hf_gguf.h"

namespace {

[[noreturn]] void die(const std::string& m) {
  std::fprintf(stderr, "fuzz_hf_gguf: %s\n", m.c_str());
  std::abort();
}

const std::string& test_tokenizer() {
  static const std::string bytes = [] {
#ifdef WCODEC_FUZZ_TOKENIZER
    std::ifstream f(WCODEC_FUZZ_TOKENIZER, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
#else
    return std::string();
#endif
  }();
  return bytes;
}

void check_refusal(const wcodecfs::Status& st) {
  if (st.message().empty()) die("refusal without a message");
  const auto c = st.code();
  if (c != wcodecfs::Code::kCorruption && c != wcodecfs::Code::kNotSupported && c != wcodecfs::Code::kInvalidArgument)
    die("unexpected refusal: " + st.ToString());
}

}  // namespace

#ifndef WCODEC_FUZZ_ENTRY
#define WCODEC_FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif
extern "C" int WCODEC_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::string_view sep("\x00\xffhf", 4);
  std::vector<std::string> parts;
  for (size_t at = 0;;) {
    const size_t n = in.find(sep, at);
    parts.emplace_back(in.substr(at, n == std::string_view::npos ? std::string_view::npos : n - at));
    if (n == std::string_view::npos) break;
    at = n + sep.size();
  }
  parts.resize(std::max<size_t>(parts.size(), 7));

  // The index.
  if (!parts[5].empty()) {
    auto idx = wcodecfs::parse_hf_index(parts[5], "fuzz/model.safetensors.index.json");
    if (!idx.ok()) {
      check_refusal(idx.status());
    } else {
      for (size_t i = 0; i < idx->size(); ++i) {
        const std::string& s = (*idx)[i];
        if (s.find('/') != std::string::npos || s.size() <= 12 || s.substr(s.size() - 12) != ".safetensors")
          die("index accepted a bad shard name: " + s);
        if (i && !((*idx)[i - 1] < s)) die("index shard names not sorted and unique");
      }
    }
  }

  // The BPE tokenizer's fingerprint.
  std::string fingerprint;
  if (!parts[4].empty()) {
    std::optional<std::string_view> tc;
    if (!parts[2].empty()) tc = parts[2];
    auto fp = wcodecfs::bpe_fingerprint(parts[4], tc, "fuzz/tokenizer.json");
    if (!fp.ok()) {
      check_refusal(fp.status());
    } else {
      if (fp->size() != 64 || fp->find_first_not_of("0123456789abcdef") != std::string::npos)
        die("fingerprint is not 64 hex digits: " + *fp);
      fingerprint = *fp;
    }
  }

  // The weight file's header.
  if (parts[1].size() < 4) return 0;
  const uint32_t extra = static_cast<uint8_t>(parts[1][0]) | static_cast<uint8_t>(parts[1][1]) << 8 |
                         static_cast<uint32_t>(static_cast<uint8_t>(parts[1][2])) << 16 |
                         static_cast<uint32_t>(static_cast<uint8_t>(parts[1][3])) << 24;
  const std::string json = parts[1].substr(4);
  std::vector<uint8_t> prefix(8 + json.size());
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<uint8_t>(uint64_t{json.size()} >> (8 * i));
  std::copy(json.begin(), json.end(), prefix.begin() + 8);
  auto h = wcodec::parse_safetensors_header(prefix.data(), prefix.size(), prefix.size() + extra, "fuzz/model.safetensors");
  if (!h.ok()) return 0;

  wcodecfs::HfDirFiles f;
  f.dir_name = "fuzz";
  f.where = "fuzz/";
  f.config = parts[0];
  const bool bpe = parts[6] == "bpe";
  f.tokenizer_model = bpe ? std::string() : parts[6].empty() ? test_tokenizer() : parts[6];
  if (!parts[2].empty()) f.tokenizer_config = parts[2];
  if (!parts[3].empty()) f.added_tokens = parts[3];
  if (!parts[4].empty()) f.tokenizer_json = parts[4];
  const std::vector<wcodecfs::HfShard> shards = {{"fuzz/model.safetensors", *h}};
  auto plan = wcodecfs::plan_hf_gguf(f, shards);
  if (!plan.ok()) {
    check_refusal(plan.status());
    return 0;
  }
  const wcodecfs::HfGgufPlan& p = *plan;
  if (bpe) {
    std::string model, pre;
    const auto* m = p.gguf.find("tokenizer.ggml.model");
    const auto* r = p.gguf.find("tokenizer.ggml.pre");
    if (!m || !m->value.get_string(&model) || model != "gpt2") die("accepted BPE plan without tokenizer.ggml.model gpt2");
    if (fingerprint.empty() || !r || !r->value.get_string(&pre) || pre != wcodecfs::bpe_pre_for(fingerprint))
      die("accepted BPE plan whose tokenizer.ggml.pre is not the table's for its fingerprint");
  }
  if (p.header.size() != p.gguf.data_offset) die("header size differs from the data offset");
  auto g = wcodec::parse_gguf(p.header.data(), p.header.size(), p.header.size() + p.gguf.data_size, "fuzz.gguf");
  if (!g.ok()) die("planned header does not parse: " + g.status().ToString());
  if (g->kv.size() != p.gguf.kv.size() || g->tensors.size() != p.tensors.size() ||
      p.gguf.tensors.size() != p.tensors.size())
    die("planned header disagrees with the plan");
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const auto& t = g->tensors[i];
    const auto& s = p.tensors[i];
    if (t.name != p.gguf.tensors[i].name || t.type != p.gguf.tensors[i].type || t.offset != p.gguf.tensors[i].offset)
      die("tensor " + t.name + " differs from the plan");
    if (t.nbytes != s.out_bytes) die("tensor " + t.name + ": GGUF size differs from the planned bytes");
    uint64_t want = s.src_bytes;
    if (s.convert == wcodecfs::HfConvert::kBf16ToF32 || s.convert == wcodecfs::HfConvert::kF16ToF32) want *= 2;
    if (s.convert == wcodecfs::HfConvert::kI8ToF32) want *= 4;
    if (s.convert == wcodecfs::HfConvert::kI8ToQ8_0) want = want / 32 * 34;
    if (s.convert == wcodecfs::HfConvert::kTernaryToF32) want = s.rows * s.cols * 4;
    if (s.convert == wcodecfs::HfConvert::kTernaryToTq2_0) want = s.rows * (s.cols / 256) * 66;
    if ((s.convert == wcodecfs::HfConvert::kTernaryToF32 || s.convert == wcodecfs::HfConvert::kTernaryToTq2_0) &&
        (s.rows == 0 || (s.cols + 3) / 4 * s.rows != s.src_bytes))
      die("tensor " + t.name + ": packed rows do not match the row length");
    if (s.out_bytes != want) die("tensor " + t.name + ": planned bytes differ from the source's");
    if (s.convert >= wcodecfs::HfConvert::kI8ToQ8_0 &&
        (s.scale_shard != 0 || s.scale_begin > h->data_len || s.rows * 2 > h->data_len - s.scale_begin))
      die("tensor " + t.name + ": scale range outside the weight file");
    if (s.shard != 0 || s.src_begin > h->data_len || s.src_bytes > h->data_len - s.src_begin)
      die("tensor " + t.name + ": source range outside the weight file");
    if (!s.row_order.empty()) {
      if (s.row_order.size() != s.rows || s.rows == 0 || s.src_bytes % s.rows != 0)
        die("tensor " + t.name + ": row order of the wrong size");
      std::vector<bool> seen(s.rows);
      for (uint32_t r : s.row_order) {
        if (r >= s.rows || seen[r]) die("tensor " + t.name + ": row order is not a permutation");
        seen[r] = true;
      }
    }
  }
  return 0;
}
