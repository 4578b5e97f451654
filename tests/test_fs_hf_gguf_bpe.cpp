// tests/test_fs_hf_gguf_bpe.cpp — the GGUF view of Hugging Face Llama
// directories with a BPE tokenizer (tokenizer.json, no tokenizer.model), in
// process.
//
// The real model is SmolLM2-135M-Instruct (49152 BPE tokens, BF16, three
// shards; scripts/smollm2.sh, WCODEC_SMOLLM2_HF): stored as three shards or
// one file, plain or .wcodec, every tensor and every llama.* / tokenizer.*
// key of the view equals what llama.cpp's convert_hf_to_gguf.py writes for
// it (--outtype bf16); its tokenizer's fingerprint names the pre-tokenizer
// the converter finds by running the tokenizer; both merges forms of
// tokenizer.json give the same view. Then the refusals, one test per rule,
// on a small tokenizer.json beside stories260K's weights (no SmolLM2
// needed): an unknown fingerprint (no view, one log line naming file and
// fingerprint), and every malformed field the planner names.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "hf_gguf_testutil.h"
#include "fs_view_testutil.h"
#include "sanitizer.h"
#include "testutil.h"
#include "wcodec/gguf.h"
#include "wcodec/safetensors.h"
#include "wcodecfs/filesystem.h"
#include "wcodecfs/fs_log.h"
#include "wcodecfs/hf_gguf.h"
#include "wcodecfs/hf_gguf_kind.h"

namespace sfs = std::filesystem;
using namespace wcodecfs;
using nlohmann::json;

namespace {

using fsview::LogLines;
using fsview::names_in;
using fsview::open_store;
using fsview::view_of;

constexpr bool kSanitized = wcodec::kAddressSanitizer;

std::string slurp(const sfs::path& p) {
  const auto b = wctest::read_file(p);
  return std::string(b.begin(), b.end());
}

void spit(const sfs::path& p, const std::string& s) { wctest::write_file(p, std::vector<uint8_t>(s.begin(), s.end())); }

std::string str_key(const wcodec::GgufFile& g, const char* key) {
  std::string s;
  const wcodec::GgufKv* kv = g.find(key);
  if (kv) kv->value.get_string(&s);
  return s;
}

// The SmolLM2 directory and the converter's file for it, or a skip reason.
struct Smol {
  sfs::path dir, converted;
  std::string skip;
};

Smol smollm2() {
  Smol s;
  s.dir = hfgguf::smollm2_dir(&s.skip);
  if (s.dir.empty()) return s;
  s.converted = hfgguf::converted(s.dir, "bf16", &s.skip);
  return s;
}

}  // namespace

// Three shards and one file, plain and .wcodec: each view equals the
// converter's file (the one-file directory holds the same tensors in the
// same order, so the converter writes the same file for it).
TEST(HfGgufBpe, Smollm2EqualsTheConverter) {
  const Smol s = smollm2();
  if (s.converted.empty()) GTEST_SKIP() << "SKIPPED: " << s.skip;
  const auto conv = wctest::read_file(s.converted);
  auto g = wcodec::parse_gguf(conv.data(), conv.size(), conv.size(), "converter");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(str_key(*g, "tokenizer.ggml.model"), "gpt2");
  ASSERT_EQ(str_key(*g, "tokenizer.ggml.pre"), "smollm");
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  // (Under the sanitizers, one plain and one .wcodec variant: they decode
  // and compare 270 MB per variant.)
  std::vector<std::string> dirs = {"three", "one-w"};
  if (!kSanitized) dirs = {"three", "one", "three-w", "one-w"};
  for (const std::string& d : dirs) {
    hfgguf::copy_smollm2(s.dir, store / d, d.rfind("one", 0) == 0);
    if (d.size() > 2 && d.substr(d.size() - 2) == "-w") hfgguf::store_as_wcodec(store / d, 1 << 20, /*fast=*/true);
  }
  for (const std::string& d : dirs) {
    SCOPED_TRACE(d);
    const auto view = view_of(store, d);
    ASSERT_FALSE(view.empty());
    EXPECT_EQ(hfgguf::same_gguf(view, conv), "");
    // The keys come in the converter's order too (same_gguf compares values).
    auto v = wcodec::parse_gguf(view.data(), view.size(), view.size(), "view");
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    auto order = [](const wcodec::GgufFile& f) {
      std::vector<std::string> keys;
      for (const auto& kv : f.kv)
        if (hfgguf::compared_key(kv.key, false)) keys.push_back(kv.key);
      return keys;
    };
    EXPECT_EQ(order(*v), order(*g));
  }
}

// The fingerprint table's entry for this tokenizer names what the converter
// finds by running it (its file's tokenizer.ggml.pre).
TEST(HfGgufBpe, FingerprintNamesTheConvertersPreTokenizer) {
  const Smol s = smollm2();
  if (s.converted.empty()) GTEST_SKIP() << "SKIPPED: " << s.skip;
  const auto conv = wctest::read_file(s.converted);
  auto g = wcodec::parse_gguf(conv.data(), conv.size(), conv.size(), "converter");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::string tc = slurp(s.dir / "tokenizer_config.json");
  auto fp = bpe_fingerprint(slurp(s.dir / "tokenizer.json"), tc, "smollm2/tokenizer.json");
  ASSERT_TRUE(fp.ok()) << fp.status().ToString();
  EXPECT_EQ(bpe_pre_for(*fp), str_key(*g, "tokenizer.ggml.pre"))
      << "fingerprint " << *fp << ": the converter says " << str_key(*g, "tokenizer.ggml.pre");
}

// tokenizer.json's two merges forms ("a b" strings; [a, b] pairs) describe
// the same tokenizer: same fingerprint, same view header.
TEST(HfGgufBpe, BothMergesFormsGiveTheSameView) {
  std::string skip;
  const sfs::path dir = hfgguf::smollm2_dir(&skip);
  if (dir.empty()) GTEST_SKIP() << "SKIPPED: " << skip;
  json tj = json::parse(slurp(dir / "tokenizer.json"));
  ASSERT_TRUE(tj["model"]["merges"][0].is_array());
  json strings = json::array();
  for (const auto& m : tj["model"]["merges"]) {
    const std::string a = m[0], b = m[1];
    ASSERT_EQ(a.find(' ') == std::string::npos && b.find(' ') == std::string::npos, true) << a << " " << b;
    strings.push_back(a + " " + b);
  }
  json tj2 = tj;
  tj2["model"]["merges"] = strings;
  HfDirFiles f;
  f.dir_name = "smol";
  f.config = slurp(dir / "config.json");
  f.tokenizer_config = slurp(dir / "tokenizer_config.json");
  f.chat_template = slurp(dir / "chat_template.jinja");
  std::vector<HfShard> shards;
  for (const char* n : {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                        "model-00003-of-00003.safetensors"}) {
    auto h = wcodec::read_safetensors_header_file((dir / n).string());
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    shards.push_back(HfShard{n, *h});
  }
  f.tokenizer_json = tj.dump();
  auto a = plan_hf_gguf(f, shards);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  f.tokenizer_json = tj2.dump();
  auto b = plan_hf_gguf(f, shards);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(a->header == b->header);
  const wcodec::GgufKv* m = b->gguf.find("tokenizer.ggml.merges");
  ASSERT_TRUE(m);
  std::string first;
  ASSERT_TRUE(m->value.get_string(&first, 0));
  EXPECT_EQ(first, strings[0].get<std::string>());
}

// ------------------------------------------------------------- refusals

namespace {

// A small, well-formed BPE tokenizer.json for stories260K's 512-token
// vocabulary: byte-level pieces, a few merges, one special added token. It
// is not a tokenizer the converter knows (its fingerprint is not in the
// table), so it is the base the refusal tests break one field of.
json small_tokenizer() {
  json vocab = json::object();
  vocab["<|endoftext|>"] = 0;
  for (int i = 1; i < 512; ++i) vocab["t" + std::to_string(i)] = i;
  json merges = json::array();
  for (int i = 1; i < 9; ++i) merges.push_back(json::array({"t", std::to_string(i)}));
  return json{{"version", "1.0"},
              {"added_tokens", json::array({json{{"id", 0}, {"content", "<|endoftext|>"}, {"special", true},
                                                 {"normalized", false}}})},
              {"normalizer", nullptr},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
              {"post_processor", nullptr},
              {"decoder", {{"type", "ByteLevel"}}},
              {"model", {{"type", "BPE"}, {"byte_fallback", false}, {"vocab", vocab}, {"merges", merges}}}};
}

class HfGgufBpeRefused : public ::testing::Test {
 protected:
  void SetUp() override {
    const sfs::path d = scratch_.path() / "m";
    hfgguf::make_dir(d);
    files_.dir_name = "m";
    files_.where = "m/";
    files_.config = slurp(d / "config.json");
    files_.tokenizer_config = R"({"bos_token": "<|endoftext|>"})";
    auto h = wcodec::read_safetensors_header_file((d / "model.safetensors").string());
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    shards_.push_back(HfShard{"m/model.safetensors", *h});
  }
  // The planner's message for the small tokenizer changed by `edit`.
  Status plan(const std::function<void(json&)>& edit) {
    json t = small_tokenizer();
    edit(t);
    HfDirFiles f = files_;
    f.tokenizer_json = t.dump();
    auto r = plan_hf_gguf(f, shards_);
    return r.ok() ? Status::OK() : r.status();
  }
  void expect(const std::function<void(json&)>& edit, Code code, const std::string& part) {
    const Status st = plan(edit);
    ASSERT_FALSE(st.ok()) << "accepted";
    EXPECT_EQ(st.code(), code) << st.ToString();
    EXPECT_NE(st.message().find("m/tokenizer.json: "), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find(part), std::string::npos) << st.ToString();
  }
  wctest::ScratchDir scratch_;
  HfDirFiles files_;
  std::vector<HfShard> shards_;
};

}  // namespace

TEST_F(HfGgufBpeRefused, UnknownFingerprint) {
  const Status st = plan([](json&) {});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kNotSupported);
  auto fp = bpe_fingerprint(small_tokenizer().dump(), *files_.tokenizer_config, "x");
  ASSERT_TRUE(fp.ok()) << fp.status().ToString();
  EXPECT_EQ(fp->size(), 64u);
  EXPECT_NE(st.message().find("m/tokenizer.json: pre-tokenizer fingerprint " + *fp + " is not a known tokenizer"),
            std::string::npos)
      << st.ToString();
}

// Every part of the fingerprint changes it: a tokenizer that differs from
// a known one anywhere is not taken for it.
TEST_F(HfGgufBpeRefused, FingerprintCoversEveryPart) {
  const std::string tc = *files_.tokenizer_config;
  auto fp = [&](const std::function<void(json&)>& edit, const std::string& config) {
    json t = small_tokenizer();
    edit(t);
    auto r = bpe_fingerprint(t.dump(), config, "x");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::string();
  };
  const std::string base = fp([](json&) {}, tc);
  std::set<std::string> seen = {base};
  const std::vector<std::function<void(json&)>> edits = {
      [](json& t) { t["normalizer"] = {{"type", "NFC"}}; },
      [](json& t) { t["pre_tokenizer"]["add_prefix_space"] = true; },
      [](json& t) { t["post_processor"] = {{"type", "ByteLevel"}}; },
      [](json& t) { t["model"]["ignore_merges"] = true; },
      [](json& t) { t["model"]["vocab"].erase("t5"); },
      [](json& t) { t["model"]["merges"].erase(t["model"]["merges"].begin()); },
      [](json& t) { t["added_tokens"][0]["special"] = false; },
  };
  for (size_t i = 0; i < edits.size(); ++i) EXPECT_TRUE(seen.insert(fp(edits[i], tc)).second) << "edit " << i;
  EXPECT_TRUE(seen.insert(fp([](json&) {}, R"({"add_bos_token": true})")).second);
  // The merges form is not part of it.
  EXPECT_EQ(fp([](json& t) {
              json m = json::array();
              for (const auto& p : t["model"]["merges"]) m.push_back(p[0].get<std::string>() + " " + p[1].get<std::string>());
              t["model"]["merges"] = m;
            },
            tc),
            base);
}

TEST_F(HfGgufBpeRefused, ModelNotBpe) {
  expect([](json& t) { t["model"]["type"] = "WordPiece"; }, Code::kNotSupported,
         "\"model\".\"type\" is \"WordPiece\" (the GGUF view presents BPE tokenizers)");
}

TEST_F(HfGgufBpeRefused, ModelMissing) {
  expect([](json& t) { t.erase("model"); }, Code::kCorruption, "\"model\" is missing or not an object");
}

TEST_F(HfGgufBpeRefused, LlamaByteFallbackBpe) {
  expect(
      [](json& t) {
        t["model"]["byte_fallback"] = true;
        t["decoder"] = {{"type", "Sequence"}, {"decoders", json::array()}};
      },
      Code::kNotSupported, "\"byte_fallback\" and a Sequence decoder");
}

TEST_F(HfGgufBpeRefused, VocabNotAnObject) {
  expect([](json& t) { t["model"]["vocab"] = json::array({"a", "b"}); }, Code::kCorruption,
         "\"model\".\"vocab\" is [\"a\",\"b\"] (expected an object of token -> id)");
}

TEST_F(HfGgufBpeRefused, VocabIdNotAnInteger) {
  expect([](json& t) { t["model"]["vocab"]["t7"] = "7"; }, Code::kCorruption,
         "\"model\".\"vocab\".\"t7\" is \"7\" (expected a non-negative integer id)");
}

TEST_F(HfGgufBpeRefused, VocabIdNegative) {
  expect([](json& t) { t["model"]["vocab"]["t7"] = -7; }, Code::kCorruption,
         "\"model\".\"vocab\".\"t7\" is -7 (expected a non-negative integer id)");
}

TEST_F(HfGgufBpeRefused, VocabIdOutOfRange) {
  expect([](json& t) { t["model"]["vocab"]["t7"] = 512; }, Code::kCorruption,
         "\"model\".\"vocab\".\"t7\" is 512 (config.json \"vocab_size\" is 512)");
}

TEST_F(HfGgufBpeRefused, DuplicateVocabIds) {
  expect([](json& t) { t["model"]["vocab"]["t8"] = 7; }, Code::kCorruption,
         "\"model\".\"vocab\" gives id 7 to both \"t7\" and \"t8\"");
}

TEST_F(HfGgufBpeRefused, MergesNotAList) {
  expect([](json& t) { t["model"]["merges"] = "t 1"; }, Code::kCorruption,
         "\"model\".\"merges\" is \"t 1\" (expected a list)");
}

TEST_F(HfGgufBpeRefused, MergesOfMixedForms) {
  expect([](json& t) { t["model"]["merges"].push_back("t 9"); }, Code::kCorruption,
         "\"model\".\"merges\"[8] is \"t 9\" (expected a pair of strings, as entry 0)");
}

TEST_F(HfGgufBpeRefused, MergePairOfThree) {
  expect([](json& t) { t["model"]["merges"][2] = json::array({"t", "3", "x"}); }, Code::kCorruption,
         "\"model\".\"merges\"[2] is [\"t\",\"3\",\"x\"] (expected a pair of strings");
}

TEST_F(HfGgufBpeRefused, MergeStringWithoutASpace) {
  expect([](json& t) { t["model"]["merges"] = json::array({"t 1", "t2"}); }, Code::kCorruption,
         "\"model\".\"merges\"[1] is \"t2\" (expected two tokens separated by a space)");
}

TEST_F(HfGgufBpeRefused, AddedTokensNotAList) {
  expect([](json& t) { t["added_tokens"] = json::object(); }, Code::kCorruption,
         "\"added_tokens\" is {} (expected a list)");
}

TEST_F(HfGgufBpeRefused, AddedTokenIdOutOfRange) {
  expect([](json& t) { t["added_tokens"].push_back({{"id", 600}, {"content", "<x>"}}); }, Code::kCorruption,
         "\"added_tokens\"[1].\"id\" is 600 (config.json \"vocab_size\" is 512)");
}

TEST_F(HfGgufBpeRefused, AddedTokenWithoutContent) {
  expect([](json& t) { t["added_tokens"].push_back({{"id", 5}, {"content", 5}}); }, Code::kCorruption,
         "\"added_tokens\"[1] has no string \"content\"");
}

TEST_F(HfGgufBpeRefused, AddedTokensRepeatAnId) {
  expect([](json& t) { t["added_tokens"].push_back({{"id", 0}, {"content", "<|other|>"}}); }, Code::kCorruption,
         "\"added_tokens\"[1] repeats id 0");
}

TEST_F(HfGgufBpeRefused, AddedTokenDisagreesWithTheVocab) {
  expect([](json& t) { t["added_tokens"].push_back({{"id", 7}, {"content", "<x>"}}); }, Code::kCorruption,
         "\"added_tokens\"[1] gives id 7 to \"<x>\", \"model\".\"vocab\" to \"t7\"");
}

TEST_F(HfGgufBpeRefused, AddedTokenSpecialNotABool) {
  expect([](json& t) { t["added_tokens"][0]["special"] = "yes"; }, Code::kCorruption,
         "\"added_tokens\"[0].\"special\" is \"yes\" (expected a bool)");
}

TEST_F(HfGgufBpeRefused, AddedTokensDecoderDisagrees) {
  files_.tokenizer_config = R"({"added_tokens_decoder": {"0": {"content": "<|endoftext|>", "special": false}}})";
  const Status st = plan([](json&) {});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kNotSupported);
  EXPECT_NE(st.message().find("m/tokenizer_config.json: \"added_tokens_decoder\".\"0\""), std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find("differs from tokenizer.json's \"added_tokens\""), std::string::npos) << st.ToString();
}

TEST_F(HfGgufBpeRefused, NoTokenizerAtAll) {
  HfDirFiles f = files_;
  auto r = plan_hf_gguf(f, shards_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("m/tokenizer.model: missing, and no tokenizer.json either"), std::string::npos)
      << r.status().ToString();
}

// Through the filesystem: a directory whose tokenizer.json is not a known
// tokenizer gets no view and one log line naming the file and fingerprint.
TEST(HfGgufBpe, UnknownTokenizerHasNoViewAndOneLogLine) {
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  hfgguf::make_dir(store / "m");
  sfs::remove(store / "m" / "tokenizer.model");
  const std::string t = small_tokenizer().dump();
  spit(store / "m" / "tokenizer.json", t);
  auto fp = bpe_fingerprint(t, slurp(store / "m" / "tokenizer_config.json"), "x");
  ASSERT_TRUE(fp.ok()) << fp.status().ToString();
  LogLines logs;
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(names_in(*fs, "m").count("model.gguf"));
  EXPECT_FALSE(fs->lookup_path("m/model.gguf").ok());
  const auto lines = logs.matching("m/tokenizer.json: pre-tokenizer fingerprint " + *fp + " is not a known tokenizer");
  EXPECT_EQ(lines.size(), 1u);
}

// A directory with only tokenizer.json lists it among the view's inputs
// (and no tokenizer.model).
TEST(HfGgufBpe, PresentationListsTokenizerJson) {
  std::string skip;
  const sfs::path src = hfgguf::smollm2_dir(&skip);
  if (src.empty()) GTEST_SKIP() << "SKIPPED: " << skip;
  wctest::ScratchDir scratch;
  hfgguf::copy_smollm2(src, scratch.path() / "m", false);
  const int fd = ::open((scratch.path() / "m").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto dir = StoreDir::list(fd, "m");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  auto p = hf_gguf_presentation(*dir);
  ::close(fd);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->name, "model.gguf");
  EXPECT_EQ(p->inputs,
            (std::vector<std::string>{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                      "model-00003-of-00003.safetensors", "config.json", "tokenizer_config.json",
                                      "tokenizer.json", "chat_template.jinja", "model.safetensors.index.json"}));
}
