// tests/fuzz/fuzz_trellis.cpp — libFuzzer target for the Trellis store
// readers (wcodec/trellis.h): trellis_read over a small v2 or v3 store held
// in memory, edited by the input.
//
// Input: byte 0 picks the template (even: v2, odd: v3; both written once by
// trellis_write_store from fixed weights), then records of 6 bytes edit it:
// file (index into the sorted file names), op (0 set a byte, 1 truncate,
// 2 delete the file, 3 append a byte), a 24-bit offset and a value.
// Oracles:
//   - trellis_read never crashes and never reads outside a file (ASan);
//   - a store it finds valid dequantizes every weight without error;
//   - a valid v2 store migrates (trellis_plan_v3, or a refusal naming a file
//     name clash), every range of the plan lies inside its file, and the v3
//     store the plan describes reads back valid (except for an mse the v2
//     store did not record) with the same weights.
// Thread-safety: single-threaded harness.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "wcodec/trellis.h"

namespace {

[[noreturn]] void die(const std::string& m) {
  std::fprintf(stderr, "fuzz_trellis: %s\n", m.c_str());
  std::abort();
}

using Files = std::map<std::string, std::vector<uint8_t>>;

class MemDir final : public wcodec::TrellisDir {
 public:
  explicit MemDir(const Files& f) : f_(f) {}
  wcodec::Result<std::vector<wcodec::TrellisDirEntry>> list(const std::string& rel) const override {
    const std::string prefix = rel.empty() ? "" : rel + "/";
    std::map<std::string, bool> seen;
    for (const auto& [p, b] : f_) {
      if (p.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string rest = p.substr(prefix.size());
      const size_t slash = rest.find('/');
      seen[rest.substr(0, slash)] = slash != std::string::npos;
    }
    if (!rel.empty() && seen.empty()) return wcodec::Status::IOError(rel + ": no such directory");
    std::vector<wcodec::TrellisDirEntry> out;
    for (const auto& [n, d] : seen) out.push_back({n, d});
    return out;
  }
  wcodec::Result<uint64_t> size(const std::string& rel) const override {
    auto it = f_.find(rel);
    if (it == f_.end()) return wcodec::Status::IOError(rel + ": missing");
    return static_cast<uint64_t>(it->second.size());
  }
  wcodec::Status read(const std::string& rel, uint64_t off, uint64_t len, uint8_t* dst) const override {
    auto it = f_.find(rel);
    if (it == f_.end()) return wcodec::Status::IOError(rel + ": missing");
    if (off > it->second.size() || len > it->second.size() - off) return wcodec::Status::IOError(rel + ": short read");
    if (len) std::memcpy(dst, it->second.data() + off, len);
    return wcodec::Status::OK();
  }

 private:
  const Files& f_;
};

Files load_dir(const std::filesystem::path& root) {
  Files f;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    f[std::filesystem::relative(e.path(), root).string()] =
        std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  return f;
}

const Files& templ(int which) {
  static Files t[2];
  static bool made = false;
  if (!made) {
    made = true;
    char dir[] = "/tmp/trellis-fuzz-XXXXXX";
    if (!mkdtemp(dir)) die("mkdtemp failed");
    std::vector<wcodec::TrellisNamedWeight> ws;
    const struct {
      const char* name;
      uint64_t out, in;
      unsigned bits;
    } specs[] = {{"model.layers.0.mlp.up_proj.weight", 20, 40, 3}, {"model.layers.1.mlp.down_proj.weight", 16, 130, 5}};
    for (const auto& s : specs) {
      std::vector<float> w(s.out * s.in);
      for (size_t k = 0; k < w.size(); ++k) w[k] = static_cast<float>(std::sin(0.7 * k) * 0.05);
      auto q = wcodec::trellis_quantize(w.data(), s.out, s.in, s.bits, true, s.name);
      if (!q.ok()) die(q.status().ToString());
      ws.push_back({s.name, std::move(*q), {}, w.size() * 4});
    }
    std::vector<wcodec::TensorData> base = {{"model.norm.weight", wcodec::DType::kF32, {4}, std::vector<uint8_t>(16, 0)}};
    for (int k = 0; k < 2; ++k) {
      const std::string out = std::string(dir) + (k ? "/v3" : "/v2");
      auto st = wcodec::trellis_write_store(out, k ? wcodec::TrellisLayout::kV3 : wcodec::TrellisLayout::kV2, ws, base,
                                            4, true);
      if (!st.ok()) die(st.ToString());
      t[k] = load_dir(out);
    }
    std::filesystem::remove_all(dir);
  }
  return t[which & 1];
}

void check_valid(const wcodec::TrellisStore& st, const MemDir& dir) {
  for (const auto& w : st.weights) {
    std::vector<uint8_t> b[4];
    for (int p = 0; p < 4; ++p) {
      const auto& t = st.tensors[w.parts[p]];
      b[p].resize(t.info.nbytes());
      if (!dir.read(t.file, t.offset, b[p].size(), b[p].data()).ok()) die("valid store: component unreadable");
    }
    wcodec::TrellisComponents c{b[0].data(), b[0].size(), b[1].data(), b[2].data(), b[3].data()};
    std::vector<float> out(w.out * w.in);
    auto s = wcodec::trellis_dequantize_rows(c, w.out, w.in, w.bits, st.hadamard, 0, w.out, out.data());
    if (!s.ok()) die("valid store does not dequantize: " + s.ToString());
  }
}

}  // namespace

#ifndef WCODEC_FUZZ_ENTRY
#define WCODEC_FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif
extern "C" int WCODEC_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Files files = templ(data[0]);
  for (size_t at = 1; at + 6 <= size && at < 1 + 6 * 32; at += 6) {
    if (files.empty()) break;
    auto it = files.begin();
    std::advance(it, data[at] % files.size());
    std::vector<uint8_t>& b = it->second;
    const uint32_t off = data[at + 2] | (data[at + 3] << 8) | (static_cast<uint32_t>(data[at + 4]) << 16);
    switch (data[at + 1] % 4) {
      case 0: if (!b.empty()) b[off % b.size()] = data[at + 5]; break;
      case 1: b.resize(off % (b.size() + 1)); break;
      case 2: files.erase(it); break;
      default: b.push_back(data[at + 5]); break;
    }
  }
  MemDir dir(files);
  const wcodec::TrellisStore st = wcodec::trellis_read(dir);
  if (!st.problems.empty()) return 0;
  check_valid(st, dir);
  if (st.layout != wcodec::TrellisLayout::kV2) return 0;
  auto plan = wcodec::trellis_plan_v3(st, 1500);
  if (!plan.ok()) {
    if (plan.status().message().find("holds a file of a name") == std::string::npos)
      die("valid v2 store not migrated: " + plan.status().ToString());
    return 0;
  }
  Files v3;
  for (const auto& f : *plan) {
    std::vector<uint8_t>& o = v3[f.name];
    for (const auto& p : f.pieces) {
      if (p.bytes) {
        o.insert(o.end(), p.bytes->begin(), p.bytes->end());
        continue;
      }
      const size_t at = o.size();
      o.resize(at + p.length);
      if (!dir.read(p.file, p.offset, p.length, o.data() + at).ok()) die("plan range outside its file: " + p.file);
    }
    if (o.size() != f.size) die("plan size disagrees: " + f.name);
  }
  MemDir vd(v3);
  const wcodec::TrellisStore back = wcodec::trellis_read(vd);
  for (const auto& p : back.problems)
    if (p.field != "mse") die("migrated store invalid: " + p.to_string());
  if (back.weights.size() != st.weights.size()) die("migrated store has other weights");
  for (size_t k = 0; k < st.weights.size(); ++k)
    if (back.weights[k].name != st.weights[k].name || back.weights[k].bits != st.weights[k].bits ||
        back.weights[k].out != st.weights[k].out || back.weights[k].in != st.weights[k].in)
      die("migrated weight differs: " + st.weights[k].name);
  if (back.problems.empty()) check_valid(back, vd);
  return 0;
}
