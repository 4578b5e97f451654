// tests/test_cli.cpp — the `wcodec` command-line tool (WCODEC_TOOL), run as
// a subprocess: version, encode/decode/verify/inspect on a real file,
// directory encoding, exit codes and messages of the error cases, and the
// bench report.
// Thread-safety: single-threaded test code.
#include <gtest/gtest.h>

#include <fstream>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "testutil.h"
#include "wcodec/container.h"
#include "wcodec/safetensors.h"

namespace {

namespace fs = std::filesystem;

std::string q(const fs::path& p) {
  std::string s = "'";
  for (char c : p.string()) s += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return s + "'";
}

const std::string& tool() {
  static const std::string t = q(WCODEC_TOOL);
  return t;
}

struct ToolRun {
  int rc;
  std::string out;
};

ToolRun wcodec_run(const std::string& args) {
  ToolRun r;
  r.rc = wctest::run_command(tool() + " " + args, &r.out);
  return r;
}

bool contains(const std::string& h, const std::string& n) { return h.find(n) != std::string::npos; }

// Small real files used here.
const char* const kFile = "stories260K.rtn-int8.safetensors";
const char* const kFile2 = "silero_vad_16k.bf16.safetensors";
const char* const kFile3 = "stories260K.rtn-ternary.safetensors";

fs::path data(const char* f) { return wctest::data_dir() / f; }

std::vector<std::string> tensor_names(const fs::path& safetensors) {
  auto h = wcodec::read_safetensors_header_file(safetensors.string());
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  std::vector<std::string> n;
  if (h.ok())
    for (auto& t : h->tensors) n.push_back(t.name);
  return n;
}

TEST(Cli, ToolExists) { ASSERT_TRUE(fs::exists(WCODEC_TOOL)) << WCODEC_TOOL; }

TEST(Cli, Version) {
  const ToolRun r = wcodec_run("--version");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "wcodec")) << r.out;
  EXPECT_TRUE(contains(r.out, std::to_string(wcodec::kVersionMajor) + "." + std::to_string(wcodec::kVersionMinor)))
      << "the version line names the container format: " << r.out;
}

TEST(Cli, EncodeDecodeRoundTrip) {
  wctest::ScratchDir dir;
  const fs::path enc = dir / "m.wcodec", dec = dir / "m.safetensors";
  ToolRun r = wcodec_run("encode " + q(data(kFile)) + " " + q(enc));
  ASSERT_EQ(r.rc, 0) << r.out;
  ASSERT_TRUE(fs::exists(enc));
  EXPECT_LT(fs::file_size(enc), fs::file_size(data(kFile)));
  EXPECT_TRUE(contains(r.out, kFile)) << "the summary table names the input: " << r.out;
  // No temporary files left next to the output.
  int entries = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
  r = wcodec_run("decode " + q(enc) + " " + q(dec));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(wctest::sha256_hex(wctest::read_file(dec)), wctest::sha256_hex(wctest::read_file(data(kFile))));
}

// --fast-decode keeps a model only where it saves at least 1% against zstd
// / raw: on isnet-medium.rtn-ternary one model saves less (the file grows by
// about 1 KB, far under 1%), and both files decode to the original.
TEST(Cli, EncodeFastDecode) {
  wctest::ScratchDir dir;
  const fs::path src = data("isnet-medium.rtn-ternary.safetensors");
  const fs::path a = dir / "a.wcodec", b = dir / "b.wcodec", dec = dir / "d.safetensors";
  ToolRun r = wcodec_run("encode -q " + q(src) + " " + q(a));
  ASSERT_EQ(r.rc, 0) << r.out;
  r = wcodec_run("encode -q --fast-decode " + q(src) + " " + q(b));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_GT(fs::file_size(b), fs::file_size(a));
  EXPECT_LT(fs::file_size(b), fs::file_size(a) + fs::file_size(a) / 100);
  const std::string want = wctest::sha256_hex(wctest::read_file(src));
  for (const fs::path& f : {a, b}) {
    r = wcodec_run("decode " + q(f) + " " + q(dec));
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(wctest::sha256_hex(wctest::read_file(dec)), want) << f;
  }
}

TEST(Cli, EncodeQuietPrintsNothing) {
  wctest::ScratchDir dir;
  const ToolRun r = wcodec_run("encode -q " + q(data(kFile3)) + " " + q(dir / "t.wcodec"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(fs::exists(dir / "t.wcodec"));
}

TEST(Cli, EncodeIntoDirectoryAndDecodeIntoDirectory) {
  wctest::ScratchDir dir;
  fs::create_directory(dir / "out");
  ToolRun r = wcodec_run("encode -q " + q(data(kFile3)) + " " + q(dir / "out"));
  ASSERT_EQ(r.rc, 0) << r.out;
  const fs::path enc = dir / "out" / "stories260K.rtn-ternary.wcodec";
  ASSERT_TRUE(fs::exists(enc)) << "encode FILE DIR writes DIR/<stem>.wcodec";
  fs::create_directory(dir / "back");
  r = wcodec_run("decode " + q(enc) + " " + q(dir / "back"));
  ASSERT_EQ(r.rc, 0) << r.out;
  const fs::path dec = dir / "back" / "stories260K.rtn-ternary.safetensors";
  ASSERT_TRUE(fs::exists(dec));
  EXPECT_EQ(wctest::sha256_hex(wctest::read_file(dec)), wctest::sha256_hex(wctest::read_file(data(kFile3))));
}

TEST(Cli, VerifyFull) {
  wctest::ScratchDir dir;
  const fs::path enc = dir / "m.wcodec";
  ASSERT_EQ(wcodec_run("encode -q " + q(data(kFile)) + " " + q(enc)).rc, 0);
  ToolRun r = wcodec_run("verify --full " + q(enc));
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "OK")) << r.out;
  EXPECT_FALSE(contains(r.out, "FAILED")) << r.out;
  r = wcodec_run("verify " + q(enc));
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "OK")) << r.out;
}

TEST(Cli, InspectTableNamesEveryTensor) {
  wctest::ScratchDir dir;
  const fs::path enc = dir / "m.wcodec";
  ASSERT_EQ(wcodec_run("encode -q " + q(data(kFile)) + " " + q(enc)).rc, 0);
  const ToolRun r = wcodec_run("inspect " + q(enc));
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto names = tensor_names(data(kFile));
  ASSERT_FALSE(names.empty());
  int missing = 0;
  std::string first;
  for (auto& n : names)
    if (!contains(r.out, n)) {
      if (!missing) first = n;
      ++missing;
    }
  EXPECT_EQ(missing, 0) << missing << " of " << names.size() << " tensor names are missing from the table, e.g. \""
                        << first << "\" (" << first.size() << " characters)";
  // One line per tensor plus the summary and the column headings.
  const auto lines = std::count(r.out.begin(), r.out.end(), '\n');
  EXPECT_GE(lines, static_cast<long>(names.size()) + 2) << r.out;
}

// inspect of a GGUF file: the header's pairs and tensors; a malformed one
// exits 1 naming the field and the value.
TEST(Cli, InspectGguf) {
  const fs::path gguf = wctest::data_dir() / "stories260K.f32.gguf";
  ToolRun r = wcodec_run("inspect " + q(gguf));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("GGUF v3, 11 pairs, 47 tensors"), std::string::npos) << r.out.substr(0, 400);
  EXPECT_NE(r.out.find("\"llama\""), std::string::npos);
  EXPECT_NE(r.out.find("blk.4.ffn_down.weight"), std::string::npos);
  r = wcodec_run("inspect --json " + q(gguf));
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out.substr(0, 400);
  EXPECT_EQ(j["tensors"].size(), 47u);
  EXPECT_EQ(j["kv"].size(), 11u);
  EXPECT_EQ(j["tensors"][0]["type"], "F32");
  wctest::ScratchDir dir;
  auto bytes = wctest::read_file(gguf);
  bytes[4] = 7;  // version 7
  const fs::path bad = dir / "bad.gguf";
  { std::ofstream(bad, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size()); }
  r = wcodec_run("inspect " + q(bad));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("version 7 (allowed 2, 3)"), std::string::npos) << r.out;
}

// encode / verify / decode of a GGUF file: X.gguf -> X.gguf.wcodec and back,
// byte for byte; bench takes GGUF files too.
TEST(Cli, GgufEncodeDecodeRoundTrip) {
  wctest::ScratchDir dir;
  const fs::path gguf = wctest::data_dir() / "stories260K.f32.gguf";
  const fs::path enc = dir / "s.gguf.wcodec", dec = dir / "s.gguf";
  ToolRun r = wcodec_run("encode -q " + q(gguf) + " " + q(enc));
  ASSERT_EQ(r.rc, 0) << r.out;
  r = wcodec_run("verify --full " + q(enc));
  EXPECT_EQ(r.rc, 0) << r.out;
  r = wcodec_run("decode " + q(enc) + " " + q(dec));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(wctest::read_file(dec), wctest::read_file(gguf));
  EXPECT_LT(fs::file_size(enc), fs::file_size(gguf) * 9 / 10);
  r = wcodec_run("bench --quick " + q(gguf));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("zstd -19"), std::string::npos) << r.out;
  // The tensor types the file holds, and wcodec's ratio against zstd -19.
  EXPECT_NE(r.out.find("ggml types: F32 x47\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vs zstd -19               -0."), std::string::npos) << r.out;
}

TEST(Cli, InspectJson) {
  wctest::ScratchDir dir;
  const fs::path enc = dir / "m.wcodec";
  ASSERT_EQ(wcodec_run("encode -q " + q(data(kFile)) + " " + q(enc)).rc, 0);
  const ToolRun r = wcodec_run("inspect --json " + q(enc));
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "not JSON: " << r.out.substr(0, 500);
  ASSERT_TRUE(j.contains("tensors") && j["tensors"].is_array()) << r.out.substr(0, 500);
  const auto names = tensor_names(data(kFile));
  ASSERT_EQ(j["tensors"].size(), names.size());
  uint64_t orig_total = 0, stored_total = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const auto& t = j["tensors"][i];
    EXPECT_EQ(t.value("name", ""), names[i]);
    ASSERT_TRUE(t.contains("original_bytes") && t.contains("stored_bytes"));
    orig_total += t["original_bytes"].get<uint64_t>();
    stored_total += t["stored_bytes"].get<uint64_t>();
  }
  EXPECT_EQ(j.value("original_size", uint64_t{0}), fs::file_size(data(kFile)));
  EXPECT_EQ(j.value("stored_size", uint64_t{0}), fs::file_size(enc));
  EXPECT_LT(orig_total, fs::file_size(data(kFile)));  // the header is not a tensor
  EXPECT_LT(stored_total, fs::file_size(enc));
  EXPECT_TRUE(j["metadata"].is_object()) << j["metadata"].dump();
}

TEST(Cli, EncodeDirectory) {
  wctest::ScratchDir dir;
  const fs::path in = dir / "in", out = dir / "out";
  fs::create_directories(in / "sub");
  fs::copy_file(data(kFile3), in / kFile3);
  fs::copy_file(data(kFile2), in / "sub" / kFile2);
  const std::vector<uint8_t> notes = {'n', 'o', 't', ' ', 'a', ' ', 'm', 'o', 'd', 'e', 'l', '\n'};
  wctest::write_file(in / "README.txt", notes);
  const ToolRun r = wcodec_run("encode " + q(in) + " " + q(out));
  ASSERT_EQ(r.rc, 0) << r.out;
  const fs::path e1 = out / "stories260K.rtn-ternary.wcodec";
  const fs::path e2 = out / "sub" / "silero_vad_16k.bf16.wcodec";
  ASSERT_TRUE(fs::exists(e1)) << r.out;
  ASSERT_TRUE(fs::exists(e2)) << r.out;
  ASSERT_TRUE(fs::exists(out / "README.txt"));
  EXPECT_TRUE(wctest::read_file(out / "README.txt") == notes) << "the non-safetensors file is copied unchanged";
  EXPECT_FALSE(fs::exists(out / kFile3)) << "safetensors files are not copied as well";
  EXPECT_TRUE(contains(r.out, "total")) << "two files: a total line\n" << r.out;
  for (auto [enc, orig] : {std::pair{e1, data(kFile3)}, std::pair{e2, data(kFile2)}}) {
    const fs::path dec = dir / (enc.stem().string() + ".safetensors");
    const ToolRun d = wcodec_run("decode " + q(enc) + " " + q(dec));
    ASSERT_EQ(d.rc, 0) << d.out;
    EXPECT_EQ(wctest::sha256_hex(wctest::read_file(dec)), wctest::sha256_hex(wctest::read_file(orig))) << enc;
  }
  const ToolRun v = wcodec_run("verify --full " + q(e1) + " " + q(e2));
  EXPECT_EQ(v.rc, 0) << v.out;
  EXPECT_EQ(std::count(v.out.begin(), v.out.end(), '\n'), 2) << v.out;
}

// ------------------------------------------------------------ errors

TEST(CliErrors, MissingInput) {
  wctest::ScratchDir dir;
  const fs::path missing = dir / "no_such_model.safetensors";
  ToolRun r = wcodec_run("encode " + q(missing) + " " + q(dir / "x.wcodec"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "no_such_model.safetensors")) << r.out;
  EXPECT_FALSE(fs::exists(dir / "x.wcodec"));
  r = wcodec_run("decode " + q(dir / "no_such.wcodec") + " " + q(dir / "y.safetensors"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "no_such.wcodec")) << r.out;
  r = wcodec_run("verify " + q(dir / "gone.wcodec"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "gone.wcodec")) << r.out;
  r = wcodec_run("inspect " + q(dir / "gone2.wcodec"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "gone2.wcodec")) << r.out;
}

// --device cuda without a usable GPU (CI) or without the CUDA build: a clear
// error naming why, exit 1, nothing half-done. With a GPU the GPU tests of
// test_gpu_decoder cover the decoder; this checks the tool's wiring.
TEST(CliErrors, DeviceCudaSaysWhyWhenItCannotRun) {
  wctest::ScratchDir dir;
  ToolRun r = wcodec_run("bench --device cuda --synthetic-gb 0 " + q(data(kFile)));
  if (r.rc == 0) GTEST_SKIP() << "a GPU is usable here: nothing to check (" << r.out << ")";
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "no usable GPU") || contains(r.out, "no CUDA decoder")) << r.out;
  ToolRun e = wcodec_run("encode -q " + q(data(kFile)) + " " + q(dir / "a.wcodec"));
  ASSERT_EQ(e.rc, 0) << e.out;
  r = wcodec_run("decode --device cuda " + q(dir / "a.wcodec") + " " + q(dir / "a.safetensors"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "GPU") || contains(r.out, "CUDA")) << r.out;
  EXPECT_FALSE(fs::exists(dir / "a.safetensors"));
  r = wcodec_run("decode --device tpu " + q(dir / "a.wcodec") + " " + q(dir / "b.safetensors"));
  EXPECT_EQ(r.rc, 2) << r.out;
  r = wcodec_run("decode " + q(dir / "a.wcodec"));  // OUT missing
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "OUT is required")) << r.out;
}

TEST(CliErrors, CorruptFileFailsVerify) {
  wctest::ScratchDir dir;
  const fs::path enc = dir / "m.wcodec";
  ASSERT_EQ(wcodec_run("encode -q " + q(data(kFile)) + " " + q(enc)).rc, 0);
  auto b = wctest::read_file(enc);
  ASSERT_GT(b.size(), 4096u);
  // A byte in the middle of the chunk payloads (past header and metadata).
  auto rd = wcodec::Reader::open(enc.string());
  ASSERT_TRUE(rd.ok()) << rd.status().ToString();
  ASSERT_GT((*rd)->num_chunks(), 0u);
  const auto& c = (*rd)->chunk((*rd)->num_chunks() / 2);
  b[c.file_offset + c.stored_size / 2] ^= 0x10;
  wctest::write_file(enc, b);
  ToolRun r = wcodec_run("verify " + q(enc));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "FAILED")) << r.out;
  r = wcodec_run("verify --full " + q(enc));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "FAILED")) << r.out;
  // decode refuses too, and leaves no output (nor its temporary file).
  r = wcodec_run("decode " + q(enc) + " " + q(dir / "out.safetensors"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_FALSE(fs::exists(dir / "out.safetensors"));
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename(), "m.wcodec") << "left behind: " << e.path();
}

TEST(CliErrors, VerifyReportsEveryFileAndFailsIfAnyFails) {
  wctest::ScratchDir dir;
  const fs::path good = dir / "good.wcodec", bad = dir / "bad.wcodec";
  ASSERT_EQ(wcodec_run("encode -q " + q(data(kFile3)) + " " + q(good)).rc, 0);
  wctest::write_file(bad, {'W', 'C', 'D', 'C', 0, 0});
  const ToolRun r = wcodec_run("verify " + q(good) + " " + q(bad));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "good.wcodec: OK")) << r.out;
  EXPECT_TRUE(contains(r.out, "bad.wcodec: FAILED")) << r.out;
}

TEST(CliErrors, DecodeOfANonWcodecFile) {
  wctest::ScratchDir dir;
  const fs::path tmp = dir / "plain.wcodec";
  fs::copy_file(data(kFile), tmp);  // a safetensors file under a .wcodec name
  const ToolRun r = wcodec_run("decode " + q(tmp) + " " + q(dir / "out.safetensors"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "magic")) << r.out;
  EXPECT_FALSE(fs::exists(dir / "out.safetensors"));
}

TEST(CliErrors, EncodeOfANonSafetensorsFile) {
  wctest::ScratchDir dir;
  const fs::path in = dir / "junk.safetensors";
  wctest::write_file(in, std::vector<uint8_t>(100, 0xFF));
  const ToolRun r = wcodec_run("encode " + q(in) + " " + q(dir / "junk.wcodec"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "junk.safetensors")) << r.out;
  EXPECT_FALSE(fs::exists(dir / "junk.wcodec"));
}

TEST(CliErrors, BadUsage) {
  ToolRun r = wcodec_run("");
  EXPECT_EQ(r.rc, 2) << "no subcommand: " << r.out;
  r = wcodec_run("frobnicate x");
  EXPECT_EQ(r.rc, 2) << "unknown subcommand: " << r.out;
  r = wcodec_run("encode");
  EXPECT_EQ(r.rc, 2) << "missing arguments: " << r.out;
  r = wcodec_run("encode --chunk-size 100 a b");
  EXPECT_EQ(r.rc, 2) << "chunk size out of range: " << r.out;
  r = wcodec_run("verify --no-such-flag x");
  EXPECT_EQ(r.rc, 2) << "unknown flag: " << r.out;
}

TEST(CliErrors, HelpExitsZero) {
  const ToolRun r = wcodec_run("--help");
  EXPECT_EQ(r.rc, 0) << r.out;
  for (const char* sub : {"encode", "decode", "verify", "inspect", "bench"})
    EXPECT_TRUE(contains(r.out, sub)) << sub << " missing from --help:\n" << r.out;
}

// ------------------------------------------------------------ bench

TEST(Cli, BenchQuick) {
  wctest::ScratchDir dir;
  const fs::path js = dir / "bench.json";
  const ToolRun r = wcodec_run("bench --quick " + q(data(kFile3)) + " --json " + q(js));
  ASSERT_EQ(r.rc, 0) << r.out;
  // Rows: "<codec> <size> <ratio> ..." for each codec, and the order-0 line.
  std::map<std::string, std::string> rows;
  std::istringstream in(r.out);
  std::string line;
  for (const char* codec : {"wcodec", "wcodec file", "zstd -3", "zstd -19", "lz4", "order-0"}) rows[codec] = "";
  while (std::getline(in, line)) {
    const auto b = line.find_first_not_of(' ');
    if (b == std::string::npos) continue;
    const std::string t = line.substr(b);
    for (auto& [codec, found] : rows) {
      // The codec's name, then spaces and a number ("wcodec" is not the
      // start of the "wcodec file" row).
      if (t.rfind(codec, 0) != 0 || t.size() <= codec.size() || t[codec.size()] != ' ') continue;
      const auto v = t.find_first_not_of(' ', codec.size());
      if (v != std::string::npos && std::isdigit(static_cast<unsigned char>(t[v]))) found = t;
    }
  }
  for (auto& [codec, found] : rows) EXPECT_FALSE(found.empty()) << "no line for " << codec << " in:\n" << r.out;
  // The codec rows carry a size: the wcodec one equals a fresh encode.
  if (!rows["wcodec"].empty()) {
    std::istringstream w(rows["wcodec"]);
    std::string name;
    uint64_t size = 0;
    w >> name >> size;
    EXPECT_NE(rows["wcodec file"].find(" " + std::to_string(size) + " "), std::string::npos)
        << "the file row names another size: " << rows["wcodec file"];
    const auto orig = wctest::read_file(data(kFile3));
    wcodec::EncodeConfig cfg;  // the bench encodes with the defaults, one thread
    auto enc = wcodec::encode_safetensors(orig.data(), orig.size(), cfg, kFile3);
    ASSERT_TRUE(enc.ok()) << enc.status().ToString();
    EXPECT_EQ(size, enc->size()) << rows["wcodec"];
  }
  const auto j = nlohmann::json::parse(wctest::read_file(js), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  ASSERT_TRUE(j.is_array() && j.size() == 1) << j.dump();
  ASSERT_TRUE(j[0]["codecs"].is_array());
  std::set<std::string> codecs;
  for (auto& c : j[0]["codecs"]) codecs.insert(c.value("codec", ""));
  EXPECT_EQ(codecs, (std::set<std::string>{"wcodec", "wcodec file", "zstd -3", "zstd -19", "lz4"}));
}

}  // namespace
