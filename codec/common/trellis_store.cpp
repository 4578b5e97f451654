// codec/common/trellis_store.cpp — readers of Trellis v2 and v3 stores
// (wcodec/trellis.h). The reader is also the validator: it walks the whole
// store, treats every file as hostile input, and records each rule it
// finds broken as a TrellisProblem naming the file, the tensor and the
// field (the rules are listed in docs/trellis.md §6). Nothing here trusts a
// name found inside a file to be a path: shard names from the index must be
// plain file names of the store's top level.
// Thread-safety: pure functions over a caller-owned TrellisDir.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "wcodec/trellis.h"
#include "file_read.h"

namespace wcodec {

using json = nlohmann::json;

namespace {

constexpr uint64_t kMaxJsonFile = 64u << 20;

class PosixDir final : public TrellisDir {
 public:
  explicit PosixDir(std::string root) : root_(std::move(root)) {}
  std::string full(const std::string& rel) const { return rel.empty() ? root_ : root_ + "/" + rel; }
  Result<std::vector<TrellisDirEntry>> list(const std::string& rel) const override {
    DIR* d = ::opendir(full(rel).c_str());
    if (!d) return Status::IOError(full(rel) + ": cannot list: " + std::strerror(errno));
    std::vector<TrellisDirEntry> out;
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      struct stat st {};
      if (::lstat((full(rel) + "/" + n).c_str(), &st) != 0) continue;
      if (S_ISDIR(st.st_mode)) out.push_back({n, true});
      else if (S_ISREG(st.st_mode)) out.push_back({n, false});
    }
    ::closedir(d);
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    return out;
  }
  Result<uint64_t> size(const std::string& rel) const override {
    struct stat st {};
    if (::lstat(full(rel).c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      return Status::IOError(rel + ": missing or not a regular file");
    return static_cast<uint64_t>(st.st_size);
  }
  Status read(const std::string& rel, uint64_t off, uint64_t len, uint8_t* dst) const override {
    const int fd = ::open(full(rel).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return Status::IOError(rel + ": open failed: " + std::strerror(errno));
    const Status st = pread_exact(fd, off, len, dst, rel);
    ::close(fd);
    return st;
  }

 private:
  std::string root_;
};

struct Reader {
  const TrellisDir& dir;
  TrellisStore st;

  void problem(std::string file, std::string tensor, std::string field, std::string msg) {
    st.problems.push_back({std::move(file), std::move(tensor), std::move(field), std::move(msg)});
  }

  std::optional<json> read_json(const std::string& rel, bool required) {
    auto sz = dir.size(rel);
    if (!sz.ok()) {
      if (required) problem(rel, "", "", "missing");
      return std::nullopt;
    }
    if (*sz > kMaxJsonFile) {
      problem(rel, "", "", "file of " + std::to_string(*sz) + " bytes, more than the limit of 64 MiB");
      return std::nullopt;
    }
    std::string text(*sz, '\0');
    Status s = dir.read(rel, 0, *sz, reinterpret_cast<uint8_t*>(text.data()));
    if (!s.ok()) {
      problem(rel, "", "", s.message());
      return std::nullopt;
    }
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      problem(rel, "", "", "not a JSON object");
      return std::nullopt;
    }
    return j;
  }

  // Reads a safetensors header and records its tensors. false on failure.
  bool read_safetensors(const std::string& rel, std::vector<size_t>* idx) {
    auto sz = dir.size(rel);
    if (!sz.ok()) {
      problem(rel, "", "", "missing");
      return false;
    }
    std::vector<uint8_t> buf(std::min<uint64_t>(*sz, 8));
    Status s = dir.read(rel, 0, buf.size(), buf.data());
    if (s.ok() && buf.size() == 8) {
      uint64_t n = 0;
      for (int i = 7; i >= 0; --i) n = (n << 8) | buf[i];
      if (n <= kMaxSafetensorsHeader && n <= *sz - 8) {
        buf.resize(8 + n);
        s = dir.read(rel, 8, n, buf.data() + 8);
      }
    }
    if (!s.ok()) {
      problem(rel, "", "", s.message());
      return false;
    }
    auto h = parse_safetensors_header(buf.data(), buf.size(), *sz, rel);
    if (!h.ok()) {
      problem(rel, "", "header", h.status().message());
      return false;
    }
    st.files.push_back(rel);
    for (const auto& t : h->tensors) {
      TrellisTensor tt;
      tt.file = rel;
      tt.name = t.name;
      tt.info = t;
      tt.offset = h->data_start + t.begin;
      idx->push_back(st.tensors.size());
      st.tensors.push_back(std::move(tt));
    }
    return true;
  }

  static std::string dotted(const std::string& s) {
    std::string o;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '_' && i + 1 < s.size() && s[i + 1] == '_') {
        o += '.';
        ++i;
      } else {
        o += s[i];
      }
    }
    return o;
  }

  // "x.weight.indices" / "x__weight__indices" -> base and part.
  static bool split_part(const std::string& name, std::string* base, TrellisPart* part, bool* underscored) {
    static const char* kParts[] = {"indices", "scales", "su", "sv"};
    for (int p = 0; p < 4; ++p) {
      for (const char* sep : {".", "__"}) {
        const std::string suf = std::string(sep) + kParts[p];
        if (name.size() > suf.size() && name.compare(name.size() - suf.size(), suf.size(), suf) == 0) {
          *base = name.substr(0, name.size() - suf.size());
          *part = static_cast<TrellisPart>(p);
          *underscored = std::strcmp(sep, "__") == 0;
          return true;
        }
      }
    }
    return false;
  }

  // Unsigned integer field; problem and nullopt when absent or wrong.
  std::optional<uint64_t> get_uint(const json& o, const char* key, const std::string& file, const std::string& tensor,
                                   bool required = true) {
    auto it = o.find(key);
    if (it == o.end()) {
      if (required) problem(file, tensor, key, "missing");
      return std::nullopt;
    }
    if (!it->is_number_unsigned()) {
      problem(file, tensor, key, "not a non-negative integer: " + it->dump());
      return std::nullopt;
    }
    return it->get<uint64_t>();
  }

  // Fills bits/shape/mse of w from a metadata entry.
  void weight_meta(const json& e, const std::string& file, TrellisWeightInfo* w, bool full) {
    if (!e.is_object()) {
      problem(file, w->name, "", "entry is not an object");
      return;
    }
    if (auto b = get_uint(e, "bits", file, w->name)) {
      if (*b < kTrellisMinBits || *b > kTrellisMaxBits)
        problem(file, w->name, "bits", std::to_string(*b) + " out of range 2..8");
      else
        w->bits = static_cast<unsigned>(*b);
    }
    auto sh = e.find("shape");
    if (sh == e.end()) {
      problem(file, w->name, "shape", "missing");
    } else if (!sh->is_array() || sh->size() != 2 || !(*sh)[0].is_number_unsigned() ||
               !(*sh)[1].is_number_unsigned() || (*sh)[0].get<uint64_t>() == 0 || (*sh)[1].get<uint64_t>() == 0 ||
               (*sh)[0].get<uint64_t>() > kTrellisMaxDim || (*sh)[1].get<uint64_t>() > kTrellisMaxDim) {
      problem(file, w->name, "shape", "not [out, in] with dims 1..2^31: " + sh->dump());
    } else {
      w->out = (*sh)[0].get<uint64_t>();
      w->in = (*sh)[1].get<uint64_t>();
    }
    auto m = e.find("mse");
    if (m != e.end() && m->is_number() && std::isfinite(m->get<double>()) && m->get<double>() >= 0) {
      w->mse = m->get<double>();
    } else if (m != e.end() && !m->is_null()) {
      problem(file, w->name, "mse", "not a non-negative number: " + m->dump());
    } else if (full) {
      problem(file, w->name, "mse", "missing");
    }
    if (auto ob = get_uint(e, "original_bytes", file, w->name, full)) w->original_bytes = *ob;
    auto ws = e.find("weight_shape");
    if (ws != e.end()) {
      uint64_t prod = 1;
      bool ok = ws->is_array() && !ws->empty() && ws->size() <= 8;
      if (ok)
        for (const auto& d : *ws) {
          if (!d.is_number_unsigned() || d.get<uint64_t>() == 0 || d.get<uint64_t>() > kTrellisMaxDim) ok = false;
          else prod *= d.get<uint64_t>();
          if (prod > (uint64_t{1} << 62)) ok = false;
          if (!ok) break;
        }
      if (ok && w->out && ((*ws)[0].get<uint64_t>() != w->out || prod != w->out * w->in)) ok = false;
      if (!ok) problem(file, w->name, "weight_shape", "not a shape of out x in elements: " + ws->dump());
      else for (const auto& d : *ws) w->weight_shape.push_back(d.get<uint64_t>());
    }
    if (full) {
      get_uint(e, "compressed_bytes", file, w->name);
      auto r = e.find("compression_ratio");
      if (r == e.end()) problem(file, w->name, "compression_ratio", "missing");
      else if (!r->is_number()) problem(file, w->name, "compression_ratio", "not a number: " + r->dump());
    }
  }

  // The layout rules of one weight whose parts are known.
  void check_layout(const TrellisWeightInfo& w) {
    for (int p = 0; p < 4; ++p) {
      if (w.parts[p] != SIZE_MAX) continue;
      problem(w.layer >= 0 ? "layer_" + pad4(w.layer) : "", w.name, trellis_part_name(static_cast<TrellisPart>(p)),
              "component missing");
    }
    if (w.parts[0] == SIZE_MAX || w.bits == 0 || w.out == 0) return;
    const TrellisTensor& ix = st.tensors[w.parts[0]];
    const uint64_t need = trellis_indices_bytes(w.out, w.in, w.bits);
    if (ix.info.dtype != DType::kU8)
      problem(ix.file, ix.name, "dtype", std::string(dtype_name(ix.info.dtype)) + ", indices are U8");
    else if (ix.info.shape.size() != 1 || ix.info.nbytes() != need)
      problem(ix.file, ix.name, "shape",
              shape_str(ix.info.shape) + ", the layout of [" + std::to_string(w.out) + ", " + std::to_string(w.in) +
                  "] at " + std::to_string(w.bits) + " bits needs [" + std::to_string(need) + "]");
    if (ix.info.nbytes() > 0) {
      uint8_t hb = 0;
      Status s = dir.read(ix.file, ix.offset, 1, &hb);
      if (!s.ok()) problem(ix.file, ix.name, "header", s.message());
      else if (hb != w.bits)
        problem(ix.file, ix.name, "header",
                "header byte " + std::to_string(hb) + " != bits " + std::to_string(w.bits));
    }
    const std::vector<uint64_t> want[3] = {{(w.in + kTrellisScaleGroup - 1) / kTrellisScaleGroup, w.out}, {w.in}, {w.out}};
    for (int p = 1; p < 4; ++p) {
      if (w.parts[p] == SIZE_MAX) continue;
      const TrellisTensor& t = st.tensors[w.parts[p]];
      if (t.info.dtype != DType::kF32)
        problem(t.file, t.name, "dtype", std::string(dtype_name(t.info.dtype)) + ", expected F32");
      if (t.info.shape != want[p - 1])
        problem(t.file, t.name, "shape", shape_str(t.info.shape) + ", expected " + shape_str(want[p - 1]));
    }
  }

  static std::string pad4(int n) {
    std::string s = std::to_string(n);
    return std::string(s.size() < 4 ? 4 - s.size() : 0, '0') + s;
  }
  static std::string shape_str(const std::vector<uint64_t>& s) {
    std::string o = "[";
    for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
    return o + "]";
  }

  // Groups the tensors `idx` into weights by their component names. Returns
  // base -> weight index; others are base tensors.
  void group(const std::vector<size_t>& idx, std::map<std::string, size_t>* weights, bool* underscored_seen,
             bool* dotted_seen) {
    for (size_t k : idx) {
      TrellisTensor& t = st.tensors[k];
      std::string base;
      TrellisPart part;
      bool us = false;
      if (!split_part(t.name, &base, &part, &us)) {
        t.v3_name = dotted(t.name);
        continue;
      }
      (us ? *underscored_seen : *dotted_seen) = true;
      const std::string wname = dotted(base);
      t.v3_name = wname + "." + trellis_part_name(part);
      auto [it, fresh] = weights->emplace(wname, st.weights.size());
      if (fresh) {
        TrellisWeightInfo w;
        w.name = wname;
        st.weights.push_back(w);
      }
      TrellisWeightInfo& w = st.weights[it->second];
      if (w.parts[static_cast<int>(part)] != SIZE_MAX)
        problem(t.file, t.name, trellis_part_name(part), "component stored twice");
      else
        w.parts[static_cast<int>(part)] = k;
    }
  }

  void global_flags(const json& q, const std::string& file) {
    const json* g = &q;
    if (q.contains("global_config") && q["global_config"].is_object()) g = &q["global_config"];
    else if (q.contains("quantization") && q["quantization"].is_object()) g = &q["quantization"];
    if (g->contains("hadamard_transform")) {
      if ((*g)["hadamard_transform"].is_boolean()) st.hadamard = (*g)["hadamard_transform"].get<bool>();
      else problem(file, "", "hadamard_transform", "not a boolean");
    }
    if (q.contains("quantization_method") && q["quantization_method"].is_string())
      st.method = q["quantization_method"].get<std::string>();
    if (g->contains("target_bits") && (*g)["target_bits"].is_number_unsigned())
      st.target_bits = static_cast<unsigned>(std::min<uint64_t>((*g)["target_bits"].get<uint64_t>(), 255));
  }

  void read_v2(const std::vector<TrellisDirEntry>& top) {
    st.layout = TrellisLayout::kV2;
    std::map<std::string, size_t> by_name;
    bool us = false, dt = false;
    std::set<std::string> listed;
    for (const auto& e : top) {
      int layer = -1;
      if (!e.is_dir || !parse_layer(e.name, &layer)) continue;
      const std::string index_rel = e.name + "/index.json";
      auto idx = read_json(index_rel, true);
      auto ents = dir.list(e.name);
      if (!ents.ok()) {
        problem(e.name, "", "", ents.status().message());
        continue;
      }
      std::vector<std::string> files;
      for (const char* prefix : {"tensor_", "batch_"}) {
        for (const auto& f : *ents)
          if (!f.is_dir && f.name.rfind(prefix, 0) == 0 && ends_with(f.name, ".safetensors")) {
            if (!files.empty() && files.front().find("/tensor_") != std::string::npos &&
                prefix == std::string("batch_")) {
              problem(e.name + "/" + f.name, "", "", "batch_* file beside tensor_* files (the reader takes tensor_*)");
              continue;
            }
            files.push_back(e.name + "/" + f.name);
          }
        if (!files.empty() && st.variant.empty())
          st.variant = prefix == std::string("tensor_") ? "v2-tensor" : "v2-batch";
      }
      std::vector<size_t> tix;
      for (const auto& f : files) read_safetensors(f, &tix);
      const size_t first_weight = st.weights.size();
      group(tix, &by_name, &us, &dt);
      for (size_t k : tix)
        if (!is_part_tensor(st.tensors[k].name))
          problem(st.tensors[k].file, st.tensors[k].name, "", "not a component of a quantized weight");
      for (size_t w = first_weight; w < st.weights.size(); ++w) st.weights[w].layer = layer;
      if (!idx) continue;
      auto tl = idx->find("tensors");
      if (tl == idx->end() || !tl->is_array()) {
        problem(index_rel, "", "tensors", "missing or not an array");
        continue;
      }
      for (const auto& ent : *tl) {
        if (!ent.is_object() || !ent.contains("name") || !ent["name"].is_string()) {
          problem(index_rel, "", "name", "tensor entry without a name");
          continue;
        }
        const std::string name = ent["name"].get<std::string>();
        auto it = by_name.find(name);
        if (it == by_name.end() || st.weights[it->second].layer != layer) {
          problem(index_rel, name, "", "listed, but no component of it is stored in " + e.name);
          continue;
        }
        if (!listed.insert(name).second) problem(index_rel, name, "name", "listed twice");
        weight_meta(ent, index_rel, &st.weights[it->second], false);
      }
    }
    for (const auto& w : st.weights)
      if (!listed.count(w.name))
        problem(w.layer >= 0 ? "layer_" + pad4(w.layer) + "/index.json" : "", w.name, "", "stored but not listed");
    for (const auto& w : st.weights) check_layout(w);
    for (const char* f : {"base_weights.safetensors", "router_weights.safetensors"}) {
      if (!has(top, f)) continue;
      std::vector<size_t> tix;
      if (!read_safetensors(f, &tix)) continue;
      for (size_t k : tix) st.tensors[k].v3_name = dotted(st.tensors[k].name);
    }
    if (auto q = read_json("quantization_index.json", false)) global_flags(*q, "quantization_index.json");
    for (const auto& e : top)
      if (!e.is_dir && e.name != "base_weights.safetensors" && e.name != "router_weights.safetensors" &&
          e.name != "quantization_index.json")
        other(e.name);
    check_config(top);
  }

  void other(const std::string& name) {
    auto sz = dir.size(name);
    if (!sz.ok()) {
      problem(name, "", "", sz.status().message());
      return;
    }
    st.other_files.push_back(name);
    st.other_sizes.push_back(*sz);
  }

  bool is_part_tensor(const std::string& n) {
    std::string b;
    TrellisPart p;
    bool u;
    return split_part(n, &b, &p, &u);
  }

  void check_config(const std::vector<TrellisDirEntry>& top) {
    if (!has(top, "config.json")) problem("config.json", "", "", "missing");
    else read_json("config.json", true);
  }

  void read_v3(const std::vector<TrellisDirEntry>& top) {
    st.layout = TrellisLayout::kV3;
    const std::string index_rel = "model.safetensors.index.json";
    auto index = read_json(index_rel, true);
    std::map<std::string, std::string> wmap;  // tensor -> shard
    std::set<std::string> shards;
    std::optional<uint64_t> total_size;
    if (index) {
      auto md = index->find("metadata");
      if (md == index->end() || !md->is_object()) {
        problem(index_rel, "", "metadata", "missing or not an object");
      } else {
        total_size = get_uint(*md, "total_size", index_rel, "");
        auto f = md->find("format");
        if (f == md->end()) problem(index_rel, "", "metadata.format", "missing");
        else if (!f->is_string() || f->get<std::string>() != "trellis_v3")
          problem(index_rel, "", "metadata.format", f->dump() + ", expected \"trellis_v3\"");
        if (md->contains("quantization") && (*md)["quantization"].is_object()) global_flags(*md, index_rel);
      }
      auto wm = index->find("weight_map");
      if (wm == index->end() || !wm->is_object()) {
        problem(index_rel, "", "weight_map", "missing or not an object");
      } else {
        for (auto it = wm->begin(); it != wm->end(); ++it) {
          if (!it.value().is_string()) {
            problem(index_rel, it.key(), "weight_map", "shard name is not a string");
            continue;
          }
          const std::string shard = it.value().get<std::string>();
          if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == ".." ||
              !ends_with(shard, ".safetensors")) {
            problem(index_rel, it.key(), "weight_map", "shard \"" + shard + "\" is not a .safetensors file name");
            continue;
          }
          wmap[it.key()] = shard;
          shards.insert(shard);
        }
      }
    }
    // Every shard the index names, then any other top-level .safetensors (orphan files).
    std::map<std::string, std::vector<size_t>> in_shard;
    for (const auto& s : shards) {
      if (!has(top, s)) {
        problem(s, "", "", "shard named in " + index_rel + " is missing");
        continue;
      }
      read_safetensors(s, &in_shard[s]);
    }
    for (const auto& e : top)
      if (!e.is_dir && ends_with(e.name, ".safetensors") && !shards.count(e.name) && e.name != kTrellisDenseName) {
        problem(e.name, "", "", "a .safetensors file that the index does not name (orphan)");
        read_safetensors(e.name, &in_shard[e.name]);
      }
    uint64_t sum = 0;
    std::set<std::string> found;
    bool us = false, dt = false;
    std::map<std::string, size_t> by_name;
    for (auto& [shard, tix] : in_shard) {
      for (size_t k : tix) {
        const TrellisTensor& t = st.tensors[k];
        sum += t.info.nbytes();
        auto it = wmap.find(t.name);
        if (it == wmap.end()) problem(shard, t.name, "", "tensor not in the weight_map (orphan)");
        else if (it->second != shard) problem(shard, t.name, "", "weight_map puts it in " + it->second);
        if (!found.insert(t.name).second) problem(shard, t.name, "", "tensor stored in more than one shard");
      }
      group(tix, &by_name, &us, &dt);
    }
    for (const auto& [name, shard] : wmap)
      if (!found.count(name) && has(top, shard)) problem(shard, name, "", "in the weight_map but not in its shard");
    if (total_size && *total_size != sum)
      problem(index_rel, "", "metadata.total_size",
              std::to_string(*total_size) + ", the tensors hold " + std::to_string(sum) + " bytes");
    st.variant = std::string(us && !dt ? "underscored" : "dotted");
    if (us && dt) problem("", "", "", "component names mix \".part\" and \"__part\"");

    // Per-weight metadata.
    const bool have_qc = has(top, "quantization_config.json");
    const std::string qfile = have_qc ? "quantization_config.json" : "quantization_index.json";
    std::optional<json> q;
    if (have_qc || has(top, qfile)) q = read_json(qfile, true);
    if (!have_qc) problem("quantization_config.json", "", "", "missing");
    st.variant += have_qc ? "+quantization_config" : q ? "+quantization_index" : "+no-metadata";
    std::set<std::string> described;
    if (q) {
      if (have_qc) check_qc_top(*q, qfile);
      global_flags(*q, qfile);
      const json* tm = nullptr;
      if (q->contains("tensor_metadata") && (*q)["tensor_metadata"].is_object()) tm = &(*q)["tensor_metadata"];
      else if (have_qc) problem(qfile, "", "tensor_metadata", "missing or not an object");
      if (tm)
        for (auto it = tm->begin(); it != tm->end(); ++it) {
          auto w = by_name.find(it.key());
          if (w == by_name.end()) {
            problem(qfile, it.key(), "tensor_metadata", "describes a weight that is not stored");
            continue;
          }
          described.insert(it.key());
          weight_meta(it.value(), qfile, &st.weights[w->second], have_qc);
        }
    }
    for (auto& w : st.weights) {
      if (described.count(w.name)) continue;
      if (have_qc) problem(qfile, w.name, "tensor_metadata", "no entry for this weight");
      // Without metadata: bits from the header byte, [out, in] from sv and su.
      if (w.parts[0] != SIZE_MAX && w.parts[2] != SIZE_MAX && w.parts[3] != SIZE_MAX) {
        const auto& ix = st.tensors[w.parts[0]];
        uint8_t hb = 0;
        if (ix.info.nbytes() > 0 && dir.read(ix.file, ix.offset, 1, &hb).ok() && hb >= kTrellisMinBits &&
            hb <= kTrellisMaxBits)
          w.bits = hb;
        const auto& su = st.tensors[w.parts[2]].info.shape;
        const auto& sv = st.tensors[w.parts[3]].info.shape;
        if (su.size() == 1 && sv.size() == 1 && su[0] > 0 && sv[0] > 0 && su[0] <= kTrellisMaxDim &&
            sv[0] <= kTrellisMaxDim)
          w.out = sv[0], w.in = su[0];
      }
      if (w.bits == 0 || w.out == 0) problem("", w.name, "", "bits or shape unknown");
    }
    for (const auto& w : st.weights) check_layout(w);
    for (const auto& e : top)
      if (!e.is_dir && !ends_with(e.name, ".safetensors") && e.name != index_rel && e.name != qfile &&
          e.name != kTrellisDenseName)
        other(e.name);
    check_config(top);
  }

  void check_qc_top(const json& q, const std::string& f) {
    auto v = q.find("quantization_version");
    if (v == q.end() || !v->is_string() || v->get<std::string>() != "trellis_v3")
      problem(f, "", "quantization_version", v == q.end() ? "missing" : v->dump() + ", expected \"trellis_v3\"");
    if (!q.contains("quantization_method") || !q["quantization_method"].is_string())
      problem(f, "", "quantization_method", "missing or not a string");
    auto g = q.find("global_config");
    if (g == q.end() || !g->is_object()) {
      problem(f, "", "global_config", "missing or not an object");
    } else {
      if (!g->contains("average_bits_per_weight") || !(*g)["average_bits_per_weight"].is_number())
        problem(f, "", "global_config.average_bits_per_weight", "missing or not a number");
      auto tb = g->find("target_bits");
      if (tb == g->end() || !tb->is_number_unsigned() || tb->get<uint64_t>() < kTrellisMinBits ||
          tb->get<uint64_t>() > kTrellisMaxBits)
        problem(f, "", "global_config.target_bits", tb == g->end() ? "missing" : tb->dump() + ", expected 2..8");
      if (!g->contains("hadamard_transform") || !(*g)["hadamard_transform"].is_boolean())
        problem(f, "", "global_config.hadamard_transform", "missing or not a boolean");
      auto ts = g->find("tile_size");
      if (ts == g->end() || !ts->is_number_unsigned() || ts->get<uint64_t>() != kTrellisTile)
        problem(f, "", "global_config.tile_size", ts == g->end() ? "missing" : ts->dump() + ", expected 16");
    }
    if (!q.contains("layer_allocation") || !q["layer_allocation"].is_object())
      problem(f, "", "layer_allocation", "missing or not an object");
  }

  static bool parse_layer(const std::string& n, int* layer) {
    if (n.size() < 10 || n.rfind("layer_", 0) != 0 || n.size() > 12) return false;
    int v = 0;
    for (size_t i = 6; i < n.size(); ++i) {
      if (n[i] < '0' || n[i] > '9') return false;
      v = v * 10 + (n[i] - '0');
    }
    *layer = v;
    return true;
  }
  static bool ends_with(const std::string& s, const std::string& suf) {
    return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
  }
  static bool has(const std::vector<TrellisDirEntry>& top, const std::string& n) {
    return std::any_of(top.begin(), top.end(), [&](const auto& e) { return !e.is_dir && e.name == n; });
  }
};

}  // namespace

std::string TrellisProblem::to_string() const {
  std::string s = file.empty() ? "(store)" : file;
  if (!tensor.empty()) s += ": tensor " + tensor;
  if (!field.empty()) s += ": " + field;
  return s + ": " + message;
}

const char* trellis_part_name(TrellisPart p) {
  static const char* kNames[] = {"indices", "scales", "su", "sv"};
  return kNames[static_cast<int>(p) & 3];
}

std::unique_ptr<TrellisDir> trellis_posix_dir(const std::string& root) { return std::make_unique<PosixDir>(root); }

TrellisLayout trellis_detect(const TrellisDir& dir) {
  auto top = dir.list("");
  if (!top.ok()) return TrellisLayout::kNone;
  bool v3 = false;
  for (const auto& e : *top) {
    int layer;
    if (e.is_dir && Reader::parse_layer(e.name, &layer)) return TrellisLayout::kV2;
    if (!e.is_dir && (e.name == "model.safetensors.index.json" ||
                      (e.name.rfind("model-", 0) == 0 && e.name.find("-of-") != std::string::npos &&
                       Reader::ends_with(e.name, ".safetensors"))))
      v3 = true;
  }
  return v3 ? TrellisLayout::kV3 : TrellisLayout::kNone;
}

TrellisStore trellis_read(const TrellisDir& dir) {
  Reader r{dir, {}};
  auto top = dir.list("");
  if (!top.ok()) {
    r.problem("", "", "", top.status().message());
    return std::move(r.st);
  }
  switch (trellis_detect(dir)) {
    case TrellisLayout::kV2: r.read_v2(*top); break;
    case TrellisLayout::kV3: r.read_v3(*top); break;
    default: r.problem("", "", "", "neither a Trellis v2 store (layer_NNNN/) nor a v3 store (model.safetensors.index.json)");
  }
  return std::move(r.st);
}

Result<TrellisStore> trellis_open(const TrellisDir& dir, const std::string& what) {
  TrellisStore s = trellis_read(dir);
  if (s.problems.empty()) return s;
  std::string m = what + ": " + std::to_string(s.problems.size()) + " problem(s): " + s.problems.front().to_string();
  return Status::Corruption(m);
}

}  // namespace wcodec
