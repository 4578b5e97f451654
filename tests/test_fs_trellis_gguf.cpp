// tests/test_fs_trellis_gguf.cpp — the GGUF form of a Trellis store's dense
// view (model.dense.gguf, docs/trellis.md §7), through an in-process
// Filesystem.
//
// Stores of a real Llama model (stories260K quantized by `wcodec trellis
// quantize`, v2 with the Hadamard rotation and v3, plain and as .wcodec,
// with a Llama config.json and the test tokenizer; trellis_gguf_testutil.h):
// the view equals what convert_hf_to_gguf.py --outtype f16 writes for a
// directory holding the dense checkpoint (made on the host by the codec's
// reference dequantizer) and the store's small files, byte for byte from
// the tensor data on and in every llama.* / tokenizer.* key and tensor
// info; listing and stat compute nothing; the .wcodec stores' views equal
// the plain ones'. Stores whose model has no GGUF form (no architecture, an
// unsupported one, no tokenizer.model, a file the converter treats
// otherwise) get none and one log line
// naming the file and the value.
//
// The converter comparison needs llama.cpp's tree and the converter's
// Python packages (skipped visibly without them); the rest needs nothing.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "fs_view_testutil.h"
#include "testutil.h"
#include "trellis_gguf_testutil.h"
#include "wcodecfs/filesystem.h"
#include "wcodecfs/fs_log.h"

namespace sfs = std::filesystem;
using namespace wcodecfs;

namespace {

using fsview::LogLines;
using fsview::names_in;
using fsview::open_store;
std::vector<uint8_t> read_all(Filesystem& fs, const std::string& path) { return fsview::read_path(fs, path); }

constexpr const char* kGguf = "model.dense.gguf";

}  // namespace

TEST(TrellisGguf, DenseGgufEqualsTheConverter) {
  wctest::ScratchDir scratch;
  const sfs::path hf = scratch.path() / "hf", store = scratch.path() / "store";
  hfgguf::make_dir(hf);
  struct Case {
    const char* name;
    const char* args;
  };
  const Case cases[] = {{"v2", "--bits 6 --hadamard --layout v2"}, {"v3", "--bits 4 --layout v3"}};
  std::vector<sfs::path> conv;
  for (const Case& c : cases) {
    trellisgguf::make_store(store / c.name, c.args, hf);
    // (The same directory name: general.name is the directory's.)
    sfs::create_directories(store / "enc");
    sfs::copy(store / c.name, store / "enc" / c.name, sfs::copy_options::recursive);
    trellisgguf::encode_store(store / "enc" / c.name);
    std::string skip;
    conv.push_back(trellisgguf::converted(store / c.name, scratch.path() / (std::string("ref-") + c.name), &skip));
    if (conv.back().empty()) GTEST_SKIP() << "SKIPPED: " << skip;
  }
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  for (const Case& c : cases) {
    for (const std::string& d : {std::string(c.name), "enc/" + std::string(c.name)}) {
      const auto names = names_in(*fs, d);
      EXPECT_TRUE(names.count(kGguf)) << d;
      EXPECT_TRUE(names.count(wcodec::kTrellisDenseName)) << d;
      // The Hugging Face GGUF view leaves Trellis stores alone (no model.gguf
      // or base_weights.gguf beside the dense form).
      for (const std::string& n : names) {
        if (n.size() > 5 && n.compare(n.size() - 5, 5, ".gguf") == 0) {
          EXPECT_EQ(n, kGguf) << d << ": a second GGUF file in a Trellis store";
        }
      }
      auto e = fs->lookup_path(d + "/" + kGguf);
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      EXPECT_GT(e->attr.st_size, 500000) << d;
    }
  }
  EXPECT_EQ(Stats::get(fs->stats().chunks_decoded), 0u) << "listing and stat computed or decoded something";

  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto view = read_all(*fs, std::string(c.name) + "/" + kGguf);
    const auto want = wctest::read_file(conv[&c - cases]);
    EXPECT_EQ(trellisgguf::same_as_converter(view, want), "");
    EXPECT_EQ(read_all(*fs, "enc/" + std::string(c.name) + "/" + kGguf), view) << "the .wcodec store's GGUF form differs";
    // The dense safetensors view is the host's reference dense checkpoint.
    EXPECT_EQ(read_all(*fs, std::string(c.name) + "/" + wcodec::kTrellisDenseName),
              wctest::read_file(scratch.path() / (std::string("ref-") + c.name) / wcodec::kTrellisDenseName))
        << "(the reference lists tensors in another order only if the stores' orders differ)";
  }
  EXPECT_GT(Stats::get(fs->stats().chunks_decoded), 0u);
  EXPECT_EQ(Stats::get(fs->stats().decode_errors), 0u);
}

// The catalogue of stores without a GGUF form: each still has its dense
// safetensors view, gets no model.dense.gguf, and one log line (however
// often it is listed) naming the file and the value.
TEST(TrellisGguf, StoresWithoutAGgufFormGetOneLogLine) {
  wctest::ScratchDir scratch;
  const sfs::path hf = scratch.path() / "hf", store = scratch.path() / "store";
  hfgguf::make_dir(hf);
  struct Case {
    const char* dir;
    std::function<void(const sfs::path&)> change;
    const char* logged;
  };
  auto write = [](const sfs::path& p, const std::string& s) {
    wctest::write_file(p, std::vector<uint8_t>(s.begin(), s.end()));
  };
  const Case cases[] = {
      {"no-architecture", [&](const sfs::path& d) { write(d / "config.json", "{\"model_type\": \"trellis-reference\"}"); },
       "no-architecture/config.json: \"architectures\" is missing"},
      {"gpt2",
       [&](const sfs::path& d) {
         auto j = nlohmann::json::parse(wctest::read_file(d / "config.json"));
         j["architectures"] = {"GPT2LMHeadModel"};
         write(d / "config.json", j.dump());
       },
       "gpt2/config.json: architecture GPT2LMHeadModel has no GGUF view"},
      {"no-tokenizer", [](const sfs::path& d) { sfs::remove(d / "tokenizer.model"); },
       "no-tokenizer/tokenizer.model: missing"},
      {"tekken", [&](const sfs::path& d) { write(d / "tekken.json", "{}"); }, "tekken/tekken.json: present"},
  };
  for (const Case& c : cases) {
    trellisgguf::make_store(store / c.dir, "--bits 3 --layout v3", hf);
    c.change(store / c.dir);
  }
  // The control: the same store unchanged has the form.
  trellisgguf::make_store(store / "llama", "--bits 3 --layout v3", hf);
  LogLines logs;
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  EXPECT_TRUE(names_in(*fs, "llama").count(kGguf));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dir);
    for (int i = 0; i < 3; ++i) {
      const auto names = names_in(*fs, c.dir);
      EXPECT_FALSE(names.count(kGguf));
      EXPECT_TRUE(names.count(wcodec::kTrellisDenseName));
    }
    EXPECT_FALSE(fs->lookup_path(std::string(c.dir) + "/" + kGguf).ok());
    EXPECT_EQ(logs.matching(std::string("no model.dense.gguf in ") + c.dir + ": " + c.logged).size(), 1u)
        << "log lines naming " << c.logged;
  }
  EXPECT_EQ(logs.matching("no model.dense.gguf in llama").size(), 0u);
}

// A quantized weight whose values do not fit F16 (hostile scales; validate
// does not read values) makes reads of its bytes in the GGUF form fail with
// an error naming the file and the weight; never other bytes. The other
// tensors still read.
TEST(TrellisGguf, WeightBeyondF16IsAReadErrorOfTheGgufForm) {
  wctest::ScratchDir scratch;
  const sfs::path hf = scratch.path() / "hf", store = scratch.path() / "store";
  hfgguf::make_dir(hf);
  trellisgguf::make_store(store / "m", "--bits 4 --layout v3", hf);
  const sfs::path shard = store / "m" / "model-00001-of-00001.safetensors";
  auto bytes = wctest::read_file(shard);
  auto h = wcodec::parse_safetensors_header(bytes.data(), bytes.size(), bytes.size(), shard.string());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  bool hit = false;
  for (const auto& t : h->tensors)
    if (t.name == "model.layers.0.mlp.down_proj.weight.scales") {
      const float big = 1e30f;
      for (uint64_t o = h->data_start + t.begin; o + 4 <= h->data_start + t.end; o += 4) std::memcpy(&bytes[o], &big, 4);
      hit = true;
    }
  ASSERT_TRUE(hit);
  wctest::write_file(shard, bytes);
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  auto e = fs->lookup_path("m/model.dense.gguf");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  auto fh = fs->open(e->id, O_RDONLY);
  ASSERT_TRUE(fh.ok());
  // Where blk.0.ffn_down.weight lies in the form: from the header (inline, read first).
  auto head = fs->read(**fh, 0, 1 << 16);
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  const auto hb = head->gather();
  auto g = wcodec::parse_gguf(hb.data(), hb.size(), static_cast<uint64_t>(e->attr.st_size), "form");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const wcodec::GgufTensor* down = nullptr;
  const wcodec::GgufTensor* embd = nullptr;
  for (const auto& t : g->tensors) {
    if (t.name == "blk.0.ffn_down.weight") down = &t;
    if (t.name == "token_embd.weight") embd = &t;
  }
  ASSERT_TRUE(down && embd);
  auto bad = fs->read(**fh, g->data_offset + down->offset, down->nbytes);
  ASSERT_FALSE(bad.ok()) << "values beyond F16 were served";
  EXPECT_NE(bad.status().message().find("m/model.dense.gguf"), std::string::npos) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("model.layers.0.mlp.down_proj.weight"), std::string::npos)
      << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("not representable in F16"), std::string::npos) << bad.status().ToString();
  auto good = fs->read(**fh, g->data_offset + embd->offset, embd->nbytes);
  EXPECT_TRUE(good.ok()) << good.status().ToString();
}

// A file of a v2 store rewritten in place (same inode, same size, a new
// mtime) makes the views new: the kind's cached reading of the store (the
// parsed indexes and the v3 plan) is not used for changed files. Here a
// layer index's recorded mse changes digits: the v3 view's
// quantization_config.json is then migrate's for the changed store; and
// the first layer's scales double: the dense checkpoint and its GGUF form
// are those of the new bytes.
TEST(TrellisGguf, StoreFileChangedInPlaceIsReadAnew) {
  wctest::ScratchDir scratch;
  const sfs::path hf = scratch.path() / "hf", store = scratch.path() / "store";
  hfgguf::make_dir(hf);
  trellisgguf::make_store(store / "m", "--bits 4 --layout v2", hf);
  auto fs = open_store(store);
  ASSERT_TRUE(fs);
  const auto before = read_all(*fs, "m/model.dense.safetensors");
  const auto gguf_before = read_all(*fs, "m/model.dense.gguf");
  const auto qc_before = read_all(*fs, "m/quantization_config.json");
  ASSERT_EQ(before, trellisgguf::reference_dense(store / "m"));
  auto rewrite = [](const sfs::path& f, const std::vector<uint8_t>& bytes) {
    std::FILE* out = std::fopen(f.c_str(), "r+b");
    ASSERT_TRUE(out);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), out), bytes.size());
    std::fclose(out);
    sfs::last_write_time(f, sfs::last_write_time(f) + std::chrono::seconds(5));
  };
  // The mse digits: "mse": 0.000123... -> every digit 1-8 one higher.
  const sfs::path idx = store / "m" / "layer_0000" / "index.json";
  auto text = wctest::read_file(idx);
  const std::string key = "\"mse\": ";
  std::string t(text.begin(), text.end());
  size_t changed = 0;
  for (size_t at = t.find(key); at != std::string::npos; at = t.find(key, at + 1))
    for (size_t k = at + key.size(); k < t.size() && (t[k] == '.' || (t[k] >= '0' && t[k] <= '9') || t[k] == 'e' || t[k] == '-'); ++k)
      if (t[k] >= '1' && t[k] <= '8') {
        ++t[k];
        ++changed;
      }
  ASSERT_GT(changed, 0u);
  rewrite(idx, std::vector<uint8_t>(t.begin(), t.end()));
  // Double every scale of the first layer's weights.
  const sfs::path f = store / "m" / "layer_0000" / "tensor_0000.safetensors";
  auto bytes = wctest::read_file(f);
  auto h = wcodec::parse_safetensors_header(bytes.data(), bytes.size(), bytes.size(), f.string());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  size_t scales = 0;
  for (const auto& x : h->tensors) {
    if (x.name.size() < 8 || x.name.substr(x.name.size() - 8) != "__scales") continue;
    for (uint64_t o = h->data_start + x.begin; o + 4 <= h->data_start + x.end; o += 4) {
      float v;
      std::memcpy(&v, &bytes[o], 4);
      v *= 2;
      std::memcpy(&bytes[o], &v, 4);
    }
    ++scales;
  }
  ASSERT_GT(scales, 0u);
  rewrite(f, bytes);

  std::string out;
  ASSERT_EQ(wctest::run_command(hfgguf::q(WCODEC_TOOL) + " trellis migrate " + hfgguf::q((store / "m").string()) + " " +
                                    hfgguf::q((scratch.path() / "ref").string()) + " 2>&1",
                                &out),
            0)
      << out;
  const auto qc = read_all(*fs, "m/quantization_config.json");
  EXPECT_NE(qc, qc_before);
  EXPECT_EQ(qc, wctest::read_file(scratch.path() / "ref" / "quantization_config.json"));
  const auto after = read_all(*fs, "m/model.dense.safetensors");
  EXPECT_NE(after, before);
  EXPECT_EQ(after, trellisgguf::reference_dense(store / "m"));
  EXPECT_NE(read_all(*fs, "m/model.dense.gguf"), gguf_before);
}
