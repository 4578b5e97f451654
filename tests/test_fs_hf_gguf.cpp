// tests/test_fs_hf_gguf.cpp — the GGUF view of Hugging Face Llama
// directories (wcodecfs/hf_gguf_kind.h), in process.
//
// Real directories (stories260K's weights under Hugging Face names, the
// committed SentencePiece tokenizer; scripts/make_hf_llama.py), F32 and
// BF16, one file or two shards, stored plain or as .wcodec: the view's
// metadata and every tensor equal what llama.cpp's convert_hf_to_gguf.py
// writes for the same directory and outtype; listing and stat decode
// nothing. Then the refusals, one test per rule: an unsupported
// architecture or a missing tokenizer gets no view and one log line; bad
// config, tokenizer, index and weight values are named by the planner.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "hf_gguf_testutil.h"
#include "fs_view_testutil.h"
#include "testutil.h"
#include "wcodec/safetensors.h"
#include "wcodecfs/filesystem.h"
#include "wcodecfs/fs_log.h"
#include "wcodecfs/hf_gguf.h"
#include "wcodecfs/hf_gguf_kind.h"

namespace sfs = std::filesystem;
using namespace wcodecfs;

namespace {

using fsview::LogLines;
using fsview::names_in;
using fsview::open_store;
using fsview::view_of;

// Every variant of one directory (plain / .wcodec, one file / 2 shards)
// against the converter's file for the plain directory of the same layout
// (the converter orders tensors shard by shard).
void check_variants(const std::string& weights, const std::string& outtype) {
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  hfgguf::make_dir(store / "one", weights, 1);
  hfgguf::make_dir(store / "two", weights, 2);
  ASSERT_TRUE(sfs::exists(store / "two" / "model.safetensors.index.json"));
  std::string skip;
  const sfs::path c1 = hfgguf::converted(store / "one", outtype, &skip);
  if (c1.empty()) GTEST_SKIP() << "SKIPPED: " << skip;
  const sfs::path c2 = hfgguf::converted(store / "two", outtype, &skip);
  if (c2.empty()) GTEST_SKIP() << "SKIPPED: " << skip;
  const std::vector<uint8_t> conv1 = wctest::read_file(c1), conv2 = wctest::read_file(c2);
  ASSERT_FALSE(conv1.empty());
  ASSERT_FALSE(conv2.empty());
  hfgguf::make_dir(store / "one-w", weights, 1);
  hfgguf::store_as_wcodec(store / "one-w");
  hfgguf::make_dir(store / "two-w", weights, 2);
  hfgguf::store_as_wcodec(store / "two-w");
  for (const char* d : {"one", "two", "one-w", "two-w"}) {
    SCOPED_TRACE(d);
    const auto view = view_of(store, d);
    ASSERT_FALSE(view.empty());
    EXPECT_EQ(hfgguf::same_gguf(view, d[1] == 'n' ? conv1 : conv2), "");
  }
  // A view is never written to the store.
  for (const auto& e : sfs::recursive_directory_iterator(store))
    EXPECT_NE(e.path().extension(), ".gguf") << e.path();
}

// A directory's small files and shard headers, for the planner.
struct Planned {
  HfDirFiles files;
  std::vector<HfShard> shards;
};

std::string slurp(const sfs::path& p) {
  const auto b = wctest::read_file(p);
  return std::string(b.begin(), b.end());
}

Planned planned(const sfs::path& dir) {
  Planned p;
  p.files.dir_name = dir.filename().string();
  p.files.config = slurp(dir / "config.json");
  p.files.tokenizer_model = slurp(dir / "tokenizer.model");
  p.files.tokenizer_config = slurp(dir / "tokenizer_config.json");
  auto h = wcodec::read_safetensors_header_file((dir / "model.safetensors").string());
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  if (h.ok()) p.shards.push_back(HfShard{"model.safetensors", *h});
  return p;
}

// Plans with config.json changed by `edit`; returns the error message ("" if accepted).
std::string plan_with_config(const Planned& base, const std::function<void(nlohmann::json&)>& edit) {
  Planned p = base;
  auto j = nlohmann::json::parse(p.files.config);
  edit(j);
  p.files.config = j.dump();
  auto r = plan_hf_gguf(p.files, p.shards);
  return r.ok() ? "" : r.status().ToString();
}

class HfGgufRefused : public ::testing::Test {
 protected:
  void SetUp() override {
    hfgguf::make_dir(scratch_.path() / "m");
    base_ = planned(scratch_.path() / "m");
    auto ok = plan_hf_gguf(base_.files, base_.shards);
    ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  }
  wctest::ScratchDir scratch_;
  Planned base_;
};

}  // namespace

TEST(HfGguf, F32DirectoriesEqualTheConverter) {
  check_variants("stories260K.f32.safetensors", "f32");
}

TEST(HfGguf, Bf16DirectoriesEqualTheConverter) {
  check_variants("stories260K.bf16.safetensors", "bf16");
}

// Per-row int8 weights (stories260K.rtn-int8: NAME I8 + NAME_scale F16,
// small tensors F32): rows of whole 32-blocks become Q8_0, the others F32
// values; dequantized, every tensor equals the converter's F32 file of the
// dequantized directory (Q/K permutation included). Plain and .wcodec.
TEST(HfGguf, Int8WeightsAreQ8_0WithTheConvertersValues) {
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  hfgguf::make_dir(store / "int8", "stories260K.rtn-int8.safetensors");
  hfgguf::make_dequantized(store / "int8", scratch.path() / "deq");
  hfgguf::make_dir(store / "int8-w", "stories260K.rtn-int8.safetensors", 2);
  hfgguf::store_as_wcodec(store / "int8-w");
  std::string skip;
  const sfs::path c = hfgguf::converted(scratch.path() / "deq", "f32", &skip);
  if (c.empty()) GTEST_SKIP() << "SKIPPED: " << skip;
  const auto conv = wctest::read_file(c);
  const auto view = view_of(store, "int8");
  EXPECT_EQ(hfgguf::same_gguf(view, conv, /*q8=*/true), "");
  auto g = wcodec::parse_gguf(view.data(), view.size(), view.size(), "view");
  ASSERT_TRUE(g.ok());
  std::map<std::string, uint32_t> type;
  for (const auto& t : g->tensors) type[t.name] = t.type;
  EXPECT_EQ(type["blk.0.attn_q.weight"], wcodec::kGgmlTypeQ8_0);   // 64 columns
  EXPECT_EQ(type["blk.0.ffn_gate.weight"], wcodec::kGgmlTypeQ8_0);  // 64 columns
  EXPECT_EQ(type["blk.0.ffn_down.weight"], wcodec::kGgmlTypeF32);   // 172 columns
  EXPECT_EQ(type["blk.0.attn_k.weight"], wcodec::kGgmlTypeF32);     // stored F32
  uint32_t ft = 0;
  ASSERT_TRUE(g->find("general.file_type")->value.get_u32(&ft));
  EXPECT_EQ(ft, 7u);
  // The sharded .wcodec copy has the same tensors (in its shard order).
  const auto view2 = view_of(store, "int8-w");
  auto g2 = wcodec::parse_gguf(view2.data(), view2.size(), view2.size(), "view2");
  ASSERT_TRUE(g2.ok());
  ASSERT_EQ(g2->tensors.size(), g->tensors.size());
  for (const auto& t2 : g2->tensors) {
    const auto it = std::find_if(g->tensors.begin(), g->tensors.end(), [&](const auto& t) { return t.name == t2.name; });
    ASSERT_NE(it, g->tensors.end()) << t2.name;
    EXPECT_TRUE(std::equal(view2.begin() + static_cast<std::ptrdiff_t>(g2->data_offset + t2.offset),
                           view2.begin() + static_cast<std::ptrdiff_t>(g2->data_offset + t2.offset + t2.nbytes),
                           view.begin() + static_cast<std::ptrdiff_t>(g->data_offset + it->offset)))
        << t2.name;
  }
}

// Packed ternary weights (stories260K.rtn-ternary: NAME_packed U8 +
// NAME_scale F16; no row is a whole TQ2_0 block of 256, so every one is
// F32 values): every tensor equals the converter's F32 file of the
// dequantized directory. Plain and .wcodec.
TEST(HfGguf, TernaryWeightsEqualTheConvertersValues) {
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  for (const char* d : {"t", "t-w"}) {
    hfgguf::make_dir(store / d);  // config and tokenizer of the same model
    sfs::copy_file(wctest::data_dir() / "stories260K.rtn-ternary.safetensors", store / d / "model.safetensors",
                   sfs::copy_options::overwrite_existing);
  }
  hfgguf::store_as_wcodec(store / "t-w");
  hfgguf::make_dequantized(store / "t", scratch.path() / "deq");
  std::string skip;
  const sfs::path c = hfgguf::converted(scratch.path() / "deq", "f32", &skip);
  if (c.empty()) GTEST_SKIP() << "SKIPPED: " << skip;
  const auto conv = wctest::read_file(c);
  EXPECT_EQ(hfgguf::same_gguf(view_of(store, "t"), conv), "");
  EXPECT_EQ(hfgguf::same_gguf(view_of(store, "t-w"), conv), "");
}

TEST_F(HfGgufRefused, TernaryRowBytesNotTheModels) {
  Planned t = base_;
  auto h = wcodec::read_safetensors_header_file((wctest::data_dir() / "stories260K.rtn-ternary.safetensors").string());
  ASSERT_TRUE(h.ok());
  t.shards = {HfShard{"model.safetensors", *h}};
  auto cfg = nlohmann::json::parse(t.files.config);
  cfg["intermediate_size"] = 168;  // down_proj rows of 172 weights take 43 bytes, 168 take 42
  t.files.config = cfg.dump();
  auto r = plan_hf_gguf(t.files, t.shards);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("has 43 bytes per row, a row of model.layers.0.mlp.down_proj.weight has 168 weights"),
            std::string::npos)
      << r.status().ToString();
}

// A reserved ternary code (11) in the stored bytes: the view is listed and
// stat works (nothing is decoded), and a read of that tensor is an error,
// never zeros or other bytes.
TEST(HfGguf, ReservedTernaryCodeIsAReadError) {
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  hfgguf::make_dir(store / "t");
  auto bytes = wctest::read_file(wctest::data_dir() / "stories260K.rtn-ternary.safetensors");
  auto h = wcodec::parse_safetensors_header(bytes.data(), bytes.size(), bytes.size(), "t");
  ASSERT_TRUE(h.ok());
  const auto it = std::find_if(h->tensors.begin(), h->tensors.end(),
                               [](const auto& t) { return t.name == "model.layers.2.mlp.up_proj.weight_packed"; });
  ASSERT_NE(it, h->tensors.end());
  bytes[h->data_start + it->begin + 100] = 0xff;
  wctest::write_file(store / "t" / "model.safetensors", bytes);
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  auto e = fs->lookup_path("t/model.gguf");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  auto fh = fs->open(e->id, O_RDONLY);
  ASSERT_TRUE(fh.ok());
  auto r = fs->read(**fh, 0, static_cast<uint64_t>(e->attr.st_size));
  ASSERT_FALSE(r.ok()) << "a reserved code was served";
  EXPECT_NE(r.status().message().find("model.layers.2.mlp.up_proj.weight"), std::string::npos) << r.status().ToString();
  // The header and other tensors still read.
  auto head = fs->read(**fh, 0, 4096);
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->gather().size(), 4096u);
}

TEST_F(HfGgufRefused, PackedWithoutScale) {
  Planned p = base_;
  for (auto& t : p.shards[0].header.tensors)
    if (t.name == "model.layers.0.mlp.up_proj.weight") t.name += "_packed", t.dtype = wcodec::DType::kU8, t.shape = {172, 256};
  auto r = plan_hf_gguf(p.files, p.shards);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is U8 without a per-row F16 model.layers.0.mlp.up_proj.weight_scale"),
            std::string::npos)
      << r.status().ToString();
}

// Added tokens (added_tokens.json and added_tokens_decoder, special, looking
// special and plain), a chat template, add_prefix_space, add_eos and more
// special ids from config.json, with the view and the converter.
TEST(HfGguf, TokenizerExtrasEqualTheConverter) {
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  const sfs::path dir = store / "extras";
  hfgguf::make_dir(dir);
  auto tc = nlohmann::json::parse(slurp(dir / "tokenizer_config.json"));
  tc["add_prefix_space"] = false;
  tc["add_eos_token"] = true;
  tc["chat_template"] = "{% for m in messages %}{{ m['content'] }}{% endfor %}";
  tc["added_tokens_decoder"] = {{"300", {{"content", "<|im_start|>"}, {"special", false}}},
                                {"301", {{"content", "\u2581hello"}, {"special", false}}},
                                {"302", {{"content", "<tool>"}, {"special", true}}},
                                {"900", {{"content", "<beyond>"}, {"special", true}}}};
  auto cfg = nlohmann::json::parse(slurp(dir / "config.json"));
  cfg["pad_token_id"] = 0;
  cfg["unk_token_id"] = 0;
  for (auto& [name, j] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"tokenizer_config.json", tc}, {"config.json", cfg}, {"added_tokens.json", {{"<extra>", 303}, {"<far>", 4000}}}}) {
    const std::string t = j.dump(2);
    wctest::write_file(dir / name, std::vector<uint8_t>(t.begin(), t.end()));
  }
  std::string skip;
  const sfs::path c = hfgguf::converted(dir, "f32", &skip);
  if (c.empty()) GTEST_SKIP() << "SKIPPED: " << skip;
  const auto conv = wctest::read_file(c);
  const auto view = view_of(store, "extras");
  EXPECT_EQ(hfgguf::same_gguf(view, conv), "");
  auto g = wcodec::parse_gguf(view.data(), view.size(), view.size(), "view");
  ASSERT_TRUE(g.ok());
  for (const char* k : {"tokenizer.chat_template", "tokenizer.ggml.add_space_prefix", "tokenizer.ggml.padding_token_id",
                        "tokenizer.ggml.unknown_token_id"})
    EXPECT_TRUE(g->find(k)) << k;
  std::string piece;
  ASSERT_TRUE(g->find("tokenizer.ggml.tokens")->value.get_string(&piece, 301));
  EXPECT_EQ(piece, " hello");
}

TEST(HfGguf, ViewIsListedBesideItsInputsAndStatDecodesNothing) {
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  hfgguf::make_dir(store / "m", "stories260K.bf16.safetensors", 2);
  hfgguf::store_as_wcodec(store / "m");
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  EXPECT_EQ(names_in(*fs, "m"),
            (std::set<std::string>{".", "..", "config.json", "generation_config.json", "model-00001-of-00002.safetensors",
                                   "model-00002-of-00002.safetensors", "model.gguf", "model.safetensors.index.json",
                                   "special_tokens_map.json", "tokenizer.model", "tokenizer_config.json"}));
  auto e = fs->lookup_path("m/model.gguf");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE(S_ISREG(e->attr.st_mode));
  EXPECT_GT(e->attr.st_size, 500000);
  EXPECT_EQ(Stats::get(fs->stats().chunks_decoded), 0u);
  EXPECT_EQ(Stats::get(fs->stats().bytes_decoded), 0u);
  // The header parses and names the llama architecture.
  const auto bytes = fsview::read_path(*fs, "m/model.gguf");
  auto g = wcodec::parse_gguf(bytes.data(), bytes.size(), bytes.size(), "view");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::string arch;
  ASSERT_TRUE(g->find("general.architecture") && g->find("general.architecture")->value.get_string(&arch));
  EXPECT_EQ(arch, "llama");
  EXPECT_EQ(g->tensors.size(), 47u);
  EXPECT_GT(Stats::get(fs->stats().chunks_decoded), 0u);  // reading decodes the tensors
}

TEST(HfGguf, UnsupportedArchitectureHasNoViewAndOneLogLine) {
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  hfgguf::make_dir(store / "gpt");
  auto j = nlohmann::json::parse(slurp(store / "gpt" / "config.json"));
  j["architectures"] = {"GPT2LMHeadModel"};
  const std::string s = j.dump();
  wctest::write_file(store / "gpt" / "config.json", std::vector<uint8_t>(s.begin(), s.end()));
  LogLines logs;
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(names_in(*fs, "gpt").count("model.gguf"));
  EXPECT_FALSE(fs->lookup_path("gpt/model.gguf").ok());
  const auto lines = logs.matching("GPT2LMHeadModel");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("gpt/config.json"), std::string::npos) << lines[0];
}

TEST(HfGguf, MissingTokenizerHasNoViewAndOneLogLine) {
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  hfgguf::make_dir(store / "m");
  sfs::remove(store / "m" / "tokenizer.model");
  LogLines logs;
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  EXPECT_FALSE(names_in(*fs, "m").count("model.gguf"));
  EXPECT_FALSE(names_in(*fs, "m").count("model.gguf"));
  EXPECT_EQ(logs.matching("m/tokenizer.model: missing").size(), 1u);
}

TEST(HfGguf, IndexNamingAMissingShardHasNoView) {
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  hfgguf::make_dir(store / "m", "stories260K.f32.safetensors", 2);
  sfs::remove(store / "m" / "model-00002-of-00002.safetensors");
  LogLines logs;
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  EXPECT_FALSE(names_in(*fs, "m").count("model.gguf"));
  EXPECT_EQ(logs.matching("names model-00002-of-00002.safetensors, which is not in the directory").size(), 1u);
}

TEST(HfGguf, PresentationListsItsInputs) {
  wctest::ScratchDir scratch;
  hfgguf::make_dir(scratch.path() / "m", "stories260K.f32.safetensors", 2);
  hfgguf::store_as_wcodec(scratch.path() / "m");
  const int fd = ::open((scratch.path() / "m").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto dir = StoreDir::list(fd, "m");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  auto p = hf_gguf_presentation(*dir);
  ::close(fd);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->name, "model.gguf");
  EXPECT_FALSE(p->hides_inputs);
  EXPECT_EQ(p->inputs, (std::vector<std::string>{"model-00001-of-00002.wcodec", "model-00002-of-00002.wcodec",
                                                 "config.json", "tokenizer.model", "tokenizer_config.json",
                                                 "model.safetensors.index.json"}));
}

// ------------------------------------------------------- planner refusals

TEST_F(HfGgufRefused, ConfigNotJson) {
  Planned p = base_;
  p.files.config = "{\"architectures\": [";
  auto r = plan_hf_gguf(p.files, p.shards);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("config.json: not valid JSON"), std::string::npos) << r.status().ToString();
}

TEST_F(HfGgufRefused, UnsupportedArchitecture) {
  const std::string m = plan_with_config(base_, [](auto& j) { j["architectures"] = {"Qwen3ForCausalLM"}; });
  EXPECT_NE(m.find("architecture Qwen3ForCausalLM has no GGUF view"), std::string::npos) << m;
}

TEST_F(HfGgufRefused, MissingArchitectures) {
  const std::string m = plan_with_config(base_, [](auto& j) { j.erase("architectures"); });
  EXPECT_NE(m.find("\"architectures\" is missing"), std::string::npos) << m;
}

TEST_F(HfGgufRefused, MissingHiddenSize) {
  const std::string m = plan_with_config(base_, [](auto& j) { j.erase("hidden_size"); });
  EXPECT_NE(m.find("config.json: \"hidden_size\" is missing"), std::string::npos) << m;
}

TEST_F(HfGgufRefused, NonIntegerCount) {
  const std::string m = plan_with_config(base_, [](auto& j) { j["num_hidden_layers"] = "5"; });
  EXPECT_NE(m.find("\"num_hidden_layers\" is \"5\" (expected a positive integer)"), std::string::npos) << m;
}

TEST_F(HfGgufRefused, ZeroHeads) {
  const std::string m = plan_with_config(base_, [](auto& j) { j["num_attention_heads"] = 0; });
  EXPECT_NE(m.find("\"num_attention_heads\" is 0"), std::string::npos) << m;
}

TEST_F(HfGgufRefused, HeadsNotDividingHidden) {
  const std::string m = plan_with_config(base_, [](auto& j) { j["num_attention_heads"] = 7; });
  EXPECT_NE(m.find("\"hidden_size\" 64 is not a multiple of \"num_attention_heads\" 7"), std::string::npos) << m;
}

TEST_F(HfGgufRefused, KvHeadsNotDividingHeads) {
  const std::string m = plan_with_config(base_, [](auto& j) { j["num_key_value_heads"] = 3; });
  EXPECT_NE(m.find("\"num_attention_heads\" 8 is not a multiple of \"num_key_value_heads\" 3"), std::string::npos) << m;
}

TEST_F(HfGgufRefused, KRowsNotMatchingKvHeads) {
  // q_proj's 64 rows cannot be 64 heads of rotary pairs.
  const std::string m = plan_with_config(base_, [](auto& j) { j["num_key_value_heads"] = 64; j["num_attention_heads"] = 64; j["head_dim"] = 1; });
  EXPECT_NE(m.find("rows, not a multiple of 2 x 64 heads"), std::string::npos) << m;
}

TEST_F(HfGgufRefused, NegativeEps) {
  const std::string m = plan_with_config(base_, [](auto& j) { j["rms_norm_eps"] = -1.0; });
  EXPECT_NE(m.find("\"rms_norm_eps\" is -1.0 (expected a positive number)"), std::string::npos) << m;
}

TEST_F(HfGgufRefused, RopeScaling) {
  const std::string m =
      plan_with_config(base_, [](auto& j) { j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}}; });
  EXPECT_NE(m.find("\"rope_scaling\".\"rope_type\" is \"linear\" (only unscaled rope is supported)"), std::string::npos)
      << m;
}

TEST_F(HfGgufRefused, QuantizationConfig) {
  const std::string m = plan_with_config(base_, [](auto& j) { j["quantization_config"] = {{"quant_method", "fp8"}}; });
  EXPECT_NE(m.find("\"quantization_config\""), std::string::npos) << m;
}

TEST_F(HfGgufRefused, Experts) {
  const std::string m = plan_with_config(base_, [](auto& j) { j["num_local_experts"] = 8; });
  EXPECT_NE(m.find("\"num_local_experts\" (8) is not supported"), std::string::npos) << m;
}

TEST_F(HfGgufRefused, CodeLlamaVocab) {
  const std::string m = plan_with_config(base_, [](auto& j) { j["vocab_size"] = 32016; });
  EXPECT_NE(m.find("\"vocab_size\" 32016"), std::string::npos) << m;
}

TEST_F(HfGgufRefused, VocabSizeNotTheEmbeddingRows) {
  const std::string m = plan_with_config(base_, [](auto& j) { j["vocab_size"] = 2000000000; });
  EXPECT_NE(m.find("config.json: \"vocab_size\" is 2000000000, model.embed_tokens.weight has 512 rows"),
            std::string::npos)
      << m;
}

TEST_F(HfGgufRefused, NegativeSpecialTokenId) {
  const std::string m = plan_with_config(base_, [](auto& j) { j["pad_token_id"] = -1; });
  EXPECT_NE(m.find("config.json: special token pad has id -1"), std::string::npos) << m;
}

TEST_F(HfGgufRefused, TokenizerNotSentencePiece) {
  Planned p = base_;
  p.files.tokenizer_model = "not a protobuf at all";
  auto r = plan_hf_gguf(p.files, p.shards);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tokenizer.model: not a SentencePiece model"), std::string::npos)
      << r.status().ToString();
}

TEST_F(HfGgufRefused, AddedTokenWithBadId) {
  Planned p = base_;
  p.files.added_tokens = R"({"<extra>": -3})";
  auto r = plan_hf_gguf(p.files, p.shards);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("added_tokens.json: token \"<extra>\" has id -3"), std::string::npos)
      << r.status().ToString();
}

TEST_F(HfGgufRefused, AddedTokensDecoderBadKey) {
  Planned p = base_;
  p.files.tokenizer_config = R"({"added_tokens_decoder": {"x1": {"content": "<a>"}}})";
  auto r = plan_hf_gguf(p.files, p.shards);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("\"added_tokens_decoder\" key \"x1\" is not a token id"), std::string::npos)
      << r.status().ToString();
}

TEST_F(HfGgufRefused, TokenizerJsonPostProcessor) {
  Planned p = base_;
  p.files.tokenizer_json = R"({"post_processor": {"type": "TemplateProcessing"}})";
  auto r = plan_hf_gguf(p.files, p.shards);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotSupported);
  EXPECT_NE(r.status().message().find("tokenizer.json: \"post_processor\""), std::string::npos) << r.status().ToString();
}

TEST_F(HfGgufRefused, Int8WithoutScale) {
  Planned p = base_;
  for (auto& t : p.shards[0].header.tensors)
    if (t.name == "model.layers.0.mlp.up_proj.weight") t.dtype = wcodec::DType::kI8, t.shape = {172, 256};
  auto r = plan_hf_gguf(p.files, p.shards);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor \"model.layers.0.mlp.up_proj.weight\" is I8 without a per-row F16 "
                                      "model.layers.0.mlp.up_proj.weight_scale"),
            std::string::npos)
      << r.status().ToString();
}

TEST_F(HfGgufRefused, OtherQuantizedDtype) {
  Planned p = base_;
  for (auto& t : p.shards[0].header.tensors)
    if (t.name == "model.layers.0.mlp.up_proj.weight") t.dtype = wcodec::DType::kU8, t.shape = {172, 256};
  auto r = plan_hf_gguf(p.files, p.shards);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor \"model.layers.0.mlp.up_proj.weight\" is U8, earlier weights are F32"),
            std::string::npos)
      << r.status().ToString();
}

TEST_F(HfGgufRefused, MixedFloatWeights) {
  Planned p = base_;
  for (auto& t : p.shards[0].header.tensors)
    if (t.name == "model.layers.0.mlp.up_proj.weight") t.dtype = wcodec::DType::kF16, t.shape = {172, 128};
  auto r = plan_hf_gguf(p.files, p.shards);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is F16, earlier weights are F32 (mixed weight dtypes are not supported)"),
            std::string::npos)
      << r.status().ToString();
}

TEST_F(HfGgufRefused, UnknownTensorName) {
  Planned p = base_;
  p.shards[0].header.tensors[0].name = "model.layers.0.self_attn.rotary.weight";
  auto r = plan_hf_gguf(p.files, p.shards);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor \"model.layers.0.self_attn.rotary.weight\" has no llama GGUF name"),
            std::string::npos)
      << r.status().ToString();
}

TEST_F(HfGgufRefused, LayerBeyondBlockCount) {
  const std::string m = plan_with_config(base_, [](auto& j) { j["num_hidden_layers"] = 3; });
  EXPECT_NE(m.find("model.layers.3."), std::string::npos) << m;
  EXPECT_NE(m.find("has no llama GGUF name"), std::string::npos) << m;
}

TEST_F(HfGgufRefused, TensorInTwoShards) {
  Planned p = base_;
  p.shards.push_back(p.shards[0]);
  p.shards[1].what = "second.safetensors";
  auto r = plan_hf_gguf(p.files, p.shards);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("second.safetensors: tensor"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("is also in an earlier weight file"), std::string::npos);
}

TEST_F(HfGgufRefused, NoEmbedding) {
  Planned p = base_;
  auto& ts = p.shards[0].header.tensors;
  ts.erase(std::remove_if(ts.begin(), ts.end(), [](const auto& t) { return t.name == "model.embed_tokens.weight"; }),
           ts.end());
  auto r = plan_hf_gguf(p.files, p.shards);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no model.embed_tokens.weight"), std::string::npos) << r.status().ToString();
}

TEST_F(HfGgufRefused, IndexNamesOutsideTheDirectory) {
  auto r = parse_hf_index(R"({"weight_map": {"a": "../x.safetensors"}})", "m/model.safetensors.index.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("names \"../x.safetensors\""), std::string::npos) << r.status().ToString();
  auto r2 = parse_hf_index(R"({"metadata": {}})", "i.json");
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("\"weight_map\" is missing"), std::string::npos);
}

TEST(HfGgufConvert, HalfFloatsWidenExactly) {
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x0001), 5.9604644775390625e-08f);  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03ff), 6.097555160522461e-05f);   // largest subnormal
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(f16_to_f32(0xfc00)) && f16_to_f32(0xfc00) < 0);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_EQ(std::signbit(f16_to_f32(0x8000)), true);
}

// The fuzz target's committed corpus (tests/fuzz/fuzz_hf_gguf.cpp), replayed
// here because the planner is in fs/ (test_fuzz_replay is a codec suite).
extern "C" int fuzz_hf_gguf_one(const uint8_t* data, size_t size);

TEST(HfGgufFuzzReplay, CorpusPlansOrFailsCleanly) {
  std::vector<sfs::path> files;
  for (const auto& e : sfs::directory_iterator(WCODEC_FUZZ_HF_GGUF_CORPUS))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 50u) << "corpus at " << WCODEC_FUZZ_HF_GGUF_CORPUS << " is missing or nearly empty";
  for (const auto& f : files) {
    SCOPED_TRACE(f.filename().string());
    const auto bytes = wctest::read_file(f);
    EXPECT_EQ(fuzz_hf_gguf_one(bytes.data(), bytes.size()), 0);
  }
}
