// tests/test_fs_cawsf_gguf.cpp — the GGUF view of CAWSF files
// (wcodecfs/cawsf_kind.h) and `wcodec cawsf export-gguf`, in process.
//
// A real Llama model (stories260K's weights under Hugging Face names with
// the committed SentencePiece test tokenizer, scripts/make_hf_llama.py),
// F32 and BF16, converted with `wcodec cawsf convert` and stored as
// model.cawsf beside its config.json and tokenizer: the store shows
// model.gguf, listing and stat decode nothing, and its bytes equal
// `wcodec cawsf export-gguf` of the same file, the hf-gguf kind's view of a
// directory holding the rebuilt model.safetensors (`wcodec cawsf export`)
// instead, and (tensor data byte for byte, metadata key by key) what
// llama.cpp's convert_hf_to_gguf.py writes for that directory. Then the
// rules, one test each: which kind wins where a directory also holds
// stored weights or a stored GGUF, refusals with one log line, a damaged
// shard (EIO, never wrong bytes; export-gguf exits 1 and writes nothing),
// and export-gguf's usage errors.
//
// Needs the wcodec tool built with the CAWSF converter (LAPACKE, FAISS);
// the converter comparison needs llama.cpp's tree and its Python packages.
// Each missing piece skips visibly.
// Thread-safety: single-threaded test code.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "hf_gguf_testutil.h"
#include "fs_view_testutil.h"
#include "testutil.h"
#include "wcodec/gguf.h"
#include "wcodecfs/filesystem.h"
#include "wcodecfs/fs_log.h"

namespace sfs = std::filesystem;
using namespace wcodecfs;
using hfgguf::q;

namespace {

using fsview::LogLines;
using fsview::names_in;
using fsview::open_store;
using fsview::view_of;

const char* const kSmall[] = {"config.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json",
                              "generation_config.json"};

std::string tool() { return WCODEC_TOOL; }

int run(const std::string& cmd, std::string* out) { return wctest::run_command(cmd + " 2>&1", out); }

// Whether the tool can convert (built with the CAWSF converter).
std::string converter_missing() {
  std::string out;
  if (run(tool() + " cawsf convert --help", &out) != 0) return "wcodec cawsf convert: " + out;
  wctest::ScratchDir s;
  const int rc = run(tool() + " cawsf convert --model /nonexistent.safetensors --out " + q((s.path() / "x.cawsf").string()), &out);
  if (rc == 2 && out.find("not built") != std::string::npos) return out;
  return "";
}

#define REQUIRE_CAWSF_CONVERT()                                                   \
  do {                                                                            \
    const std::string why = converter_missing();                                  \
    if (!why.empty()) GTEST_SKIP() << "SKIPPED: the CAWSF converter is not built: " << why; \
  } while (0)

// A Llama directory at `dir` whose weights are model.cawsf (converted from
// model.safetensors, which is then removed unless `keep_plain`).
void make_cawsf_dir(const sfs::path& dir, const std::string& weights = "stories260K.f32.safetensors",
                    const std::string& opts = "--rank 8 --pq-k 16", bool keep_plain = false) {
  hfgguf::make_dir(dir, weights, 1);
  std::string out;
  const std::string cmd = tool() + " cawsf convert --model " + q((dir / "model.safetensors").string()) + " --out " +
                          q((dir / "model.cawsf").string()) + " " + opts + " -j 2";
  ASSERT_EQ(run(cmd, &out), 0) << cmd << "\n" << out;
  if (!keep_plain) sfs::remove(dir / "model.safetensors");
}

bool has(const std::set<std::string>& v, const std::string& s) { return v.count(s) == 1; }

// Reads a presented file whole; the status of the first failed read.
Result<std::vector<uint8_t>> read_all(Filesystem& fs, const std::string& path) {
  WCFS_ASSIGN_OR_RETURN(Entry e, fs.lookup_path(path));
  WCFS_ASSIGN_OR_RETURN(auto fh, fs.open(e.id, O_RDONLY));
  std::vector<uint8_t> out;
  const uint64_t size = static_cast<uint64_t>(e.attr.st_size);
  while (out.size() < size) {
    WCFS_ASSIGN_OR_RETURN(auto r, fs.read(*fh, out.size(), 1 << 20));
    if (r.size() == 0) break;
    auto b = r.gather();
    out.insert(out.end(), b.begin(), b.end());
  }
  if (out.size() != size) return Status::Internal(path + ": read " + std::to_string(out.size()) + " of " + std::to_string(size));
  return out;
}

// The whole chain for one dtype: view == export-gguf == hf-gguf view of the
// rebuilt safetensors; == converter (data byte for byte, keys compared).
void check_chain(const std::string& weights, const std::string& outtype) {
  REQUIRE_CAWSF_CONVERT();
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store", rebuilt = scratch.path() / "rebuilt";
  make_cawsf_dir(store / "llama", weights);
  const auto view = view_of(store, "llama", "model.gguf");
  ASSERT_FALSE(view.empty());
  auto g = wcodec::parse_gguf(view.data(), view.size(), view.size(), "view");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->tensors.size(), 47u);

  // export-gguf: the same bytes.
  std::string out;
  const sfs::path exported = scratch.path() / "export.gguf";
  ASSERT_EQ(run(tool() + " cawsf export-gguf " + q((store / "llama" / "model.cawsf").string()) + " --config " +
                    q((store / "llama").string()) + " --out " + q(exported.string()),
                &out),
            0)
      << out;
  EXPECT_TRUE(wctest::read_file(exported) == view) << "export-gguf differs from the view";

  // The hf-gguf view of a directory of the same name with the rebuilt dense file.
  sfs::create_directories(rebuilt / "llama");
  for (const char* f : kSmall) sfs::copy_file(store / "llama" / f, rebuilt / "llama" / f);
  ASSERT_EQ(run(tool() + " cawsf export " + q((store / "llama" / "model.cawsf").string()) + " " +
                    q((rebuilt / "llama" / "model.safetensors").string()),
                &out),
            0)
      << out;
  // The dense view is the export, byte for byte.
  EXPECT_TRUE(view_of(store, "llama", "model.safetensors") == wctest::read_file(rebuilt / "llama" / "model.safetensors"));
  const auto hf_view = view_of(rebuilt, "llama", "model.gguf");
  EXPECT_EQ(hf_view.size(), view.size());
  EXPECT_TRUE(hf_view == view) << "the hf-gguf view of the rebuilt file differs";

  // The converter's file for that directory.
  std::string skip;
  const sfs::path conv = hfgguf::converted(rebuilt / "llama", outtype, &skip);
  if (conv.empty()) GTEST_SKIP() << "SKIPPED (the converter comparison): " << skip;
  const auto cb = wctest::read_file(conv);
  EXPECT_EQ(hfgguf::same_gguf(view, cb), "");
  auto c = wcodec::parse_gguf(cb.data(), cb.size(), cb.size(), "converter");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(view.size() - g->data_offset, cb.size() - c->data_offset);
  EXPECT_TRUE(std::equal(view.begin() + static_cast<std::ptrdiff_t>(g->data_offset), view.end(),
                         cb.begin() + static_cast<std::ptrdiff_t>(c->data_offset)))
      << "tensor data differs from the converter's";
  // The only keys of the converter the view does not write the same are the
  // general.* display keys of docs/gguf-view.md.
  for (const auto& kv : c->kv) {
    const wcodec::GgufKv* mine = g->find(kv.key);
    const bool same = mine && mine->value.type == kv.value.type && mine->value.bytes == kv.value.bytes &&
                      mine->value.strings == kv.value.strings;
    if (!same) {
      EXPECT_TRUE(kv.key == "general.name" || kv.key == "general.size_label") << kv.key;
    }
  }
}

}  // namespace

TEST(CawsfGguf, F32ViewEqualsExportTheRebuiltFilesViewAndTheConverter) {
  check_chain("stories260K.f32.safetensors", "f32");
}

// BF16: the decomposed matrices rebuilt in BF16, the 1-D norms widened to
// F32 by the view's computed sources over the rebuilt file.
TEST(CawsfGguf, Bf16ViewEqualsExportTheRebuiltFilesViewAndTheConverter) {
  check_chain("stories260K.bf16.safetensors", "bf16");
}

TEST(CawsfGguf, NoConfigNoViewAndNoLogLine) {
  REQUIRE_CAWSF_CONVERT();
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  make_cawsf_dir(store / "noconfig", "stories260K.f32.safetensors", "--rank 4 --pq-k 16 --max-layers 2");
  sfs::remove(store / "noconfig" / "config.json");
  LogLines logs;
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  const auto names = names_in(*fs, "noconfig");
  EXPECT_TRUE(has(names, "model.safetensors"));
  EXPECT_FALSE(has(names, "model.gguf"));
  EXPECT_EQ(logs.matching("noconfig").size(), 0u);
}

TEST(CawsfGguf, UnsupportedArchitectureHasNoViewAndOneLogLine) {
  REQUIRE_CAWSF_CONVERT();
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  make_cawsf_dir(store / "gptarch", "stories260K.f32.safetensors", "--rank 4 --pq-k 16 --max-layers 2");
  auto j = nlohmann::json::parse(std::ifstream(store / "gptarch" / "config.json"));
  j["architectures"] = {"GPT2LMHeadModel"};
  const std::string s = j.dump();
  wctest::write_file(store / "gptarch" / "config.json", std::vector<uint8_t>(s.begin(), s.end()));
  LogLines logs;
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(has(names_in(*fs, "gptarch"), "model.gguf"));
  EXPECT_TRUE(has(names_in(*fs, "gptarch"), "model.safetensors"));
  EXPECT_FALSE(fs->lookup_path("gptarch/model.gguf").ok());
  const auto lines = logs.matching("GPT2LMHeadModel");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("gptarch/config.json"), std::string::npos) << lines[0];
}

TEST(CawsfGguf, MissingTokenizerHasNoViewAndOneLogLine) {
  REQUIRE_CAWSF_CONVERT();
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  make_cawsf_dir(store / "notok", "stories260K.f32.safetensors", "--rank 4 --pq-k 16 --max-layers 2");
  sfs::remove(store / "notok" / "tokenizer.model");
  LogLines logs;
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  EXPECT_FALSE(has(names_in(*fs, "notok"), "model.gguf"));
  EXPECT_FALSE(has(names_in(*fs, "notok"), "model.gguf"));
  EXPECT_EQ(logs.matching("notok/tokenizer.model: missing").size(), 1u);
}

TEST(CawsfGguf, Version1FileHasNoViewAndOneLogLine) {
  REQUIRE_CAWSF_CONVERT();
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  make_cawsf_dir(store / "v1", "stories260K.f32.safetensors", "--rank 4 --pq-k 16 --max-layers 2");
  // The listing reads the version field only (bytes 8..11).
  auto b = wctest::read_file(store / "v1" / "model.cawsf");
  b[8] = 1;
  wctest::write_file(store / "v1" / "model.cawsf", b);
  LogLines logs;
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  EXPECT_FALSE(has(names_in(*fs, "v1"), "model.gguf"));
  EXPECT_EQ(logs.matching("CAWSF version 1").size(), 1u);
}

// A directory with weights of its own (a plain model.safetensors beside
// model.cawsf): the stored file is served as model.safetensors and the
// hf-gguf kind's view of it as model.gguf; the cawsf kind presents neither
// (one log line, no clash between kinds).
TEST(CawsfGguf, StoredWeightsWinAndTheHfViewIsTheirs) {
  REQUIRE_CAWSF_CONVERT();
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  make_cawsf_dir(store / "both", "stories260K.f32.safetensors", "--rank 4 --pq-k 16 --max-layers 2", true);
  LogLines logs;
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  const auto names = names_in(*fs, "both");
  EXPECT_TRUE(has(names, "model.safetensors"));
  EXPECT_TRUE(has(names, "model.gguf"));
  auto st = read_all(*fs, "both/model.safetensors");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_TRUE(*st == wctest::read_file(store / "both" / "model.safetensors"));
  // model.gguf is the hf-gguf view of the plain file: its token embedding is
  // the original's bytes (the cawsf rebuild of it would differ).
  auto gg = read_all(*fs, "both/model.gguf");
  ASSERT_TRUE(gg.ok()) << gg.status().ToString();
  auto g = wcodec::parse_gguf(gg->data(), gg->size(), gg->size(), "view");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto h = wcodec::read_safetensors_header_file((store / "both" / "model.safetensors").string());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  const auto plain = wctest::read_file(store / "both" / "model.safetensors");
  const wcodec::TensorInfo* emb = nullptr;
  for (const auto& t : h->tensors)
    if (t.name == "model.embed_tokens.weight") emb = &t;
  ASSERT_TRUE(emb);
  bool found = false;
  for (const auto& t : g->tensors)
    if (t.name == "token_embd.weight") {
      found = true;
      EXPECT_TRUE(std::equal(plain.begin() + static_cast<std::ptrdiff_t>(h->data_start + emb->begin),
                             plain.begin() + static_cast<std::ptrdiff_t>(h->data_start + emb->end),
                             gg->begin() + static_cast<std::ptrdiff_t>(g->data_offset + t.offset)));
    }
  EXPECT_TRUE(found);
  EXPECT_EQ(logs.matching("two store kinds present").size(), 0u);
  EXPECT_EQ(logs.matching("both/model.safetensors and").size(), 0u);  // no "plain wins" clash
  EXPECT_EQ(logs.matching("own model.safetensors has the hf-gguf kind's view").size(), 1u);
  EXPECT_EQ(logs.matching("the stored model.safetensors (or model.wcodec) is served").size(), 1u);
}

// Other weights of the directory's own (other.safetensors): the directory is
// that model's (hf-gguf presents other.gguf); model.cawsf keeps its dense
// view and gets no GGUF view.
TEST(CawsfGguf, OtherWeightsOfTheDirectoryTakeItsGgufView) {
  REQUIRE_CAWSF_CONVERT();
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  make_cawsf_dir(store / "otherw", "stories260K.f32.safetensors", "--rank 4 --pq-k 16 --max-layers 2", true);
  sfs::rename(store / "otherw" / "model.safetensors", store / "otherw" / "other.safetensors");
  LogLines logs;
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  const auto names = names_in(*fs, "otherw");
  EXPECT_TRUE(has(names, "other.gguf"));
  EXPECT_TRUE(has(names, "model.safetensors"));
  EXPECT_FALSE(has(names, "model.gguf"));
  EXPECT_EQ(logs.matching("own other.safetensors has the hf-gguf kind's view").size(), 1u);
  EXPECT_EQ(logs.matching("two store kinds present").size(), 0u);
}

// A stored model.gguf beside model.cawsf is served as it is; no view, one log line.
TEST(CawsfGguf, StoredGgufWins) {
  REQUIRE_CAWSF_CONVERT();
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  make_cawsf_dir(store / "storedgguf", "stories260K.f32.safetensors", "--rank 4 --pq-k 16 --max-layers 2");
  const std::vector<uint8_t> mine = {'n', 'o', 't', ' ', 'a', ' ', 'v', 'i', 'e', 'w'};
  wctest::write_file(store / "storedgguf" / "model.gguf", mine);
  LogLines logs;
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  EXPECT_TRUE(has(names_in(*fs, "storedgguf"), "model.gguf"));
  auto b = read_all(*fs, "storedgguf/model.gguf");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(*b == mine);
  EXPECT_EQ(logs.matching("both storedgguf/model.gguf and").size(), 0u);
  EXPECT_EQ(logs.matching("the stored model.gguf (or model.gguf.wcodec) is served").size(), 1u);
}

// Two checkpoints of one architecture side by side: each has its view.
TEST(CawsfGguf, EachCawsfFileOfADirectoryHasItsView) {
  REQUIRE_CAWSF_CONVERT();
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  make_cawsf_dir(store / "two", "stories260K.f32.safetensors", "--rank 4 --pq-k 16 --max-layers 2");
  sfs::copy_file(store / "two" / "model.cawsf", store / "two" / "other.cawsf");
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  const auto names = names_in(*fs, "two");
  for (const char* n : {"model.gguf", "model.safetensors", "other.gguf", "other.safetensors"}) EXPECT_TRUE(has(names, n)) << n;
  auto a = read_all(*fs, "two/model.gguf");
  auto b = read_all(*fs, "two/other.gguf");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(*a == *b);
}

// A damaged shard: the view's read that needs it fails (EIO through a
// mount), the header still reads, and export-gguf exits 1 writing nothing.
TEST(CawsfGguf, DamagedShardIsAnErrorNeverWrongBytes) {
  REQUIRE_CAWSF_CONVERT();
  wctest::ScratchDir scratch;
  const sfs::path store = scratch.path() / "store";
  make_cawsf_dir(store / "bad", "stories260K.f32.safetensors", "--rank 4 --pq-k 16");
  auto bytes = wctest::read_file(store / "bad" / "model.cawsf");
  uint64_t bank_off, bank_size;  // TOC entry 3 (SHARD_BANK): offset, size
  std::memcpy(&bank_off, bytes.data() + 20 + 2 * 24 + 4, 8);
  std::memcpy(&bank_size, bytes.data() + 20 + 2 * 24 + 12, 8);
  ASSERT_LT(bank_off + bank_size, bytes.size() + 1);
  bytes[bank_off + bank_size / 2] ^= 0x40;
  wctest::write_file(store / "bad" / "model.cawsf", bytes);
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  auto e = fs->lookup_path("bad/model.gguf");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  auto fh = fs->open(e->id, O_RDONLY);
  ASSERT_TRUE(fh.ok());
  auto head = fs->read(**fh, 0, 4096);
  EXPECT_TRUE(head.ok()) << head.status().ToString();
  auto all = read_all(*fs, "bad/model.gguf");
  EXPECT_FALSE(all.ok());
  std::string out;
  const sfs::path dst = scratch.path() / "bad.gguf";
  EXPECT_EQ(run(tool() + " cawsf export-gguf " + q((store / "bad" / "model.cawsf").string()) + " --config " +
                    q((store / "bad").string()) + " --out " + q(dst.string()),
                &out),
            1)
      << out;
  EXPECT_NE(out.find("model.cawsf"), std::string::npos) << out;
  EXPECT_FALSE(sfs::exists(dst));
  for (const auto& f : sfs::directory_iterator(scratch.path())) EXPECT_EQ(f.path().string().find(".tmp"), std::string::npos) << f.path();
}

TEST(CawsfGguf, ExportGgufRefusesWhatTheViewRefuses) {
  REQUIRE_CAWSF_CONVERT();
  wctest::ScratchDir scratch;
  const sfs::path d = scratch.path() / "m";
  make_cawsf_dir(d, "stories260K.f32.safetensors", "--rank 4 --pq-k 16 --max-layers 2");
  const std::string f = q((d / "model.cawsf").string());
  const std::string o = q((scratch.path() / "o.gguf").string());
  std::string out;
  // Usage: no such config directory; a file that is not config.json; OUT not .gguf.
  EXPECT_EQ(run(tool() + " cawsf export-gguf " + f + " --config /nonexistent-dir --out " + o, &out), 2) << out;
  EXPECT_EQ(run(tool() + " cawsf export-gguf " + f + " --config " + q((d / "tokenizer.model").string()) + " --out " + o, &out), 2) << out;
  EXPECT_EQ(run(tool() + " cawsf export-gguf " + f + " --config " + q(d.string()) + " --out " + q((scratch.path() / "o.bin").string()), &out), 2) << out;
  // --config DIR/config.json is the directory.
  EXPECT_EQ(run(tool() + " cawsf export-gguf " + f + " --config " + q((d / "config.json").string()) + " --out " + o +
                    " --name llama",
                &out),
            0)
      << out;
  auto g = wcodec::read_gguf_file((scratch.path() / "o.gguf").string());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::string name;
  ASSERT_TRUE(g->find("general.name") && g->find("general.name")->value.get_string(&name));
  EXPECT_EQ(name, "llama");
  // Failures (exit 1, naming the file and the value).
  sfs::remove(d / "tokenizer.model");
  EXPECT_EQ(run(tool() + " cawsf export-gguf " + f + " --config " + q(d.string()) + " --out " + o, &out), 1) << out;
  EXPECT_NE(out.find("tokenizer.model: missing"), std::string::npos) << out;
  auto b = wctest::read_file(d / "model.cawsf");
  b[8] = 1;
  wctest::write_file(scratch.path() / "v1.cawsf", b);
  hfgguf::make_dir(scratch.path() / "ok");
  EXPECT_EQ(run(tool() + " cawsf export-gguf " + q((scratch.path() / "v1.cawsf").string()) + " --config " +
                    q((scratch.path() / "ok").string()) + " --out " + o,
                &out),
            1)
      << out;
  EXPECT_NE(out.find("v1.cawsf"), std::string::npos) << out;
  auto j = nlohmann::json::parse(std::ifstream(scratch.path() / "ok" / "config.json"));
  j["architectures"] = {"GPT2LMHeadModel"};
  const std::string s = j.dump();
  wctest::write_file(scratch.path() / "ok" / "config.json", std::vector<uint8_t>(s.begin(), s.end()));
  EXPECT_EQ(run(tool() + " cawsf export-gguf " + f + " --config " + q((scratch.path() / "ok").string()) + " --out " + o, &out), 1) << out;
  EXPECT_NE(out.find("GPT2LMHeadModel"), std::string::npos) << out;
}
