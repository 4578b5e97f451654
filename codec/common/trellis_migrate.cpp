// codec/common/trellis_migrate.cpp — the Trellis v2 -> v3 migration as a
// plan (wcodec/trellis.h, docs/trellis.md §4) and the writers: of a plan
// into a directory, and of whole v2 / v3 stores from quantized weights.
// A plan's files are inline bytes (shard headers, the index, the
// quantization config) and ranges of the v2 files (tensor bytes, config
// and tokenizer files), so `migrate` and the mount's v3 view of a v2 store
// produce the same bytes from the same plan.
// Thread-safety: pure functions; the writers touch only their output paths.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "wcodec/trellis.h"

namespace wcodec {

using json = nlohmann::json;

namespace {

std::shared_ptr<const std::vector<uint8_t>> text_bytes(const std::string& s) {
  return std::make_shared<const std::vector<uint8_t>>(s.begin(), s.end());
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 9 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::vector<std::string> split_dots(const std::string& s) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == '.') out.emplace_back();
    else out.back() += c;
  }
  return out;
}

// Layer-relative short name: what follows the layer number, without ".weight".
std::string short_name(const std::string& name, int layer) {
  const auto parts = split_dots(name);
  size_t from = 0;
  for (size_t i = 0; i < parts.size(); ++i)
    if (all_digits(parts[i]) && std::stoi(parts[i]) == layer) {
      from = i + 1;
      break;
    }
  std::string s;
  for (size_t i = from; i < parts.size(); ++i) s += (s.empty() ? "" : ".") + parts[i];
  if (s.size() > 7 && s.compare(s.size() - 7, 7, ".weight") == 0) s.resize(s.size() - 7);
  return s.empty() ? name : s;
}

Status write_all(int fd, const uint8_t* p, uint64_t n, const std::string& what) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Status::IOError(what + ": write failed: " + std::strerror(errno));
    p += w;
    n -= static_cast<uint64_t>(w);
  }
  return Status::OK();
}

Status write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError(path + ": cannot create: " + std::strerror(errno));
  Status s = write_all(fd, bytes.data(), bytes.size(), path);
  if (::close(fd) != 0 && s.ok()) s = Status::IOError(path + ": close failed");
  return s;
}

Status make_empty_dir(const std::string& out) {
  std::error_code ec;
  if (std::filesystem::exists(out, ec)) {
    if (!std::filesystem::is_directory(out, ec) || !std::filesystem::is_empty(out, ec))
      return Status::Invalid(out + ": exists and is not an empty directory");
    return Status::OK();
  }
  if (!std::filesystem::create_directories(out, ec)) return Status::IOError(out + ": cannot create: " + ec.message());
  return Status::OK();
}

std::string json_text(const json& j) { return j.dump(2) + "\n"; }

}  // namespace

Result<uint64_t> trellis_parse_size(const std::string& s) {
  size_t i = 0;
  uint64_t v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    if (v > (uint64_t{1} << 50)) return Status::Invalid("shard size " + s + ": too large");
    v = v * 10 + static_cast<uint64_t>(s[i++] - '0');
  }
  std::string unit = s.substr(i);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::map<std::string, uint64_t> kUnits = {
      {"", 1},           {"B", 1},           {"KB", 1000},       {"MB", 1000'000},  {"GB", 1000'000'000},
      {"KIB", 1 << 10},  {"MIB", 1 << 20},   {"GIB", 1ull << 30}};
  auto u = kUnits.find(unit);
  if (i == 0 || u == kUnits.end() || v == 0)
    return Status::Invalid("shard size \"" + s + "\": expected a positive number with B, KB, MB, GB, KiB, MiB or GiB");
  return v * u->second;
}

Result<std::vector<TrellisOutFile>> trellis_plan_v3(const TrellisStore& v2, uint64_t shard_size) {
  if (v2.layout != TrellisLayout::kV2) return Status::Invalid("migration needs a Trellis v2 store");
  if (!v2.problems.empty()) return Status::Corruption("the v2 store has problems: " + v2.problems[0].to_string());
  if (shard_size == 0) return Status::Invalid("shard size 0");

  // Shards: tensors in store order, a new shard when the next tensor would
  // take the current one's tensor bytes past shard_size.
  std::vector<std::vector<size_t>> shards;
  uint64_t cur = 0;
  for (size_t k = 0; k < v2.tensors.size(); ++k) {
    const uint64_t n = v2.tensors[k].info.nbytes();
    if (shards.empty() || (!shards.back().empty() && cur + n > shard_size)) {
      shards.emplace_back();
      cur = 0;
    }
    shards.back().push_back(k);
    cur += n;
  }
  if (shards.empty()) shards.emplace_back();
  std::vector<TrellisOutFile> plan;
  json wmap = json::object();
  uint64_t total = 0;
  char name[64];
  for (size_t s = 0; s < shards.size(); ++s) {
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    SafetensorsHeader h;
    h.metadata = std::map<std::string, std::string>{{"format", "pt"}};
    uint64_t at = 0;
    for (size_t k : shards[s]) {
      const TrellisTensor& t = v2.tensors[k];
      TensorInfo ti = t.info;
      ti.name = t.v3_name;
      ti.begin = at;
      ti.end = at + t.info.nbytes();
      at = ti.end;
      h.tensors.push_back(ti);
      if (wmap.contains(t.v3_name)) return Status::Corruption(t.file + ": tensor " + t.name + ": its v3 name " +
                                                              t.v3_name + " is taken by another tensor");
      wmap[t.v3_name] = name;
      total += t.info.nbytes();
    }
    TrellisOutFile f;
    f.name = name;
    auto hdr = std::make_shared<const std::vector<uint8_t>>(write_safetensors_header(h));
    f.pieces.push_back({hdr, "", 0, hdr->size()});
    f.size = hdr->size();
    for (size_t k : shards[s]) {
      const TrellisTensor& t = v2.tensors[k];
      f.segments.push_back(f.size);
      if (t.info.nbytes() > 0) {
        TrellisPiece& last = f.pieces.back();
        if (!last.bytes && last.file == t.file && last.offset + last.length == t.offset)
          last.length += t.info.nbytes();  // the next tensor of the same file: one range
        else
          f.pieces.push_back({nullptr, t.file, t.offset, t.info.nbytes()});
      }
      f.size += t.info.nbytes();
    }
    plan.push_back(std::move(f));
  }

  // Bits: the most common (ties: the larger) unless the store names its target.
  std::map<unsigned, uint64_t> bit_count;
  double bit_sum = 0, elems = 0;
  for (const auto& w : v2.weights) {
    bit_count[w.bits] += 1;
    bit_sum += static_cast<double>(w.bits) * static_cast<double>(w.out * w.in);
    elems += static_cast<double>(w.out * w.in);
  }
  unsigned target = v2.target_bits.value_or(0);
  if (target < kTrellisMinBits || target > kTrellisMaxBits) {
    target = 4;
    uint64_t best = 0;
    for (const auto& [b, n] : bit_count)
      if (n >= best) best = n, target = b;
  }
  const double avg = elems > 0 ? bit_sum / elems : target;

  json index;
  index["metadata"] = {{"total_size", total},
                       {"format", "trellis_v3"},
                       {"quantization",
                        {{"bits_per_weight", avg}, {"method", v2.method}, {"hadamard_transform", v2.hadamard}}}};
  index["weight_map"] = wmap;

  json tm = json::object(), alloc = json::object();
  for (const auto& w : v2.weights) {
    uint64_t comp = 0;
    for (size_t p : w.parts) comp += v2.tensors[p].info.nbytes();
    const uint64_t orig = w.original_bytes.value_or(w.out * w.in * 4);
    json e = {{"bits", w.bits},
              {"shape", {w.out, w.in}},
              {"mse", w.mse ? json(*w.mse) : json(nullptr)},
              {"original_bytes", orig},
              {"compressed_bytes", comp},
              {"compression_ratio", comp ? static_cast<double>(orig) / static_cast<double>(comp) : 0.0}};
    if (!w.weight_shape.empty()) e["weight_shape"] = w.weight_shape;
    tm[w.name] = e;
    alloc[std::to_string(w.layer)][short_name(w.name, w.layer)] = w.bits;
  }
  json qc = {{"quantization_version", "trellis_v3"},
             {"quantization_method", v2.method},
             {"global_config",
              {{"average_bits_per_weight", avg},
               {"target_bits", target},
               {"hadamard_transform", v2.hadamard},
               {"tile_size", kTrellisTile},
               {"codebook_size", 1u << target},
               {"scale_groups", "per_128_inputs"}}},
             {"tensor_metadata", tm},
             {"layer_allocation", alloc}};
  for (const auto& [fname, j] : {std::pair<std::string, const json*>{"model.safetensors.index.json", &index},
                                 std::pair<std::string, const json*>{"quantization_config.json", &qc}}) {
    TrellisOutFile f;
    f.name = fname;
    auto b = text_bytes(json_text(*j));
    f.size = b->size();
    f.pieces.push_back({b, "", 0, b->size()});
    plan.push_back(std::move(f));
  }
  for (size_t i = 0; i < v2.other_files.size(); ++i) {
    TrellisOutFile f;
    f.name = v2.other_files[i];
    f.size = v2.other_sizes[i];
    if (f.size > 0) f.pieces.push_back({nullptr, f.name, 0, f.size});
    plan.push_back(std::move(f));
  }
  std::sort(plan.begin(), plan.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (size_t i = 1; i < plan.size(); ++i)
    if (plan[i].name == plan[i - 1].name)
      return Status::Corruption(plan[i].name + ": the v2 store holds a file of a name the v3 layout writes");
  return plan;
}

Status trellis_write_plan(const TrellisDir& dir, const std::vector<TrellisOutFile>& plan, const std::string& out) {
  WC_RETURN_IF_ERROR(make_empty_dir(out));
  std::vector<uint8_t> buf(8u << 20);
  for (const auto& f : plan) {
    const std::string path = out + "/" + f.name;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return Status::IOError(path + ": cannot create: " + std::strerror(errno));
    Status s;
    for (const auto& p : f.pieces) {
      if (!s.ok()) break;
      if (p.bytes) {
        s = write_all(fd, p.bytes->data(), p.bytes->size(), path);
        continue;
      }
      for (uint64_t done = 0; done < p.length && s.ok();) {
        const uint64_t n = std::min<uint64_t>(buf.size(), p.length - done);
        s = dir.read(p.file, p.offset + done, n, buf.data());
        if (s.ok()) s = write_all(fd, buf.data(), n, path);
        done += n;
      }
    }
    if (::close(fd) != 0 && s.ok()) s = Status::IOError(path + ": close failed");
    WC_RETURN_IF_ERROR(s);
  }
  return Status::OK();
}

Status trellis_write_store(const std::string& out, TrellisLayout layout, const std::vector<TrellisNamedWeight>& weights,
                           const std::vector<TensorData>& base, unsigned target_bits, bool hadamard) {
  if (layout == TrellisLayout::kV3) {
    // The v3 writer is the migration of the v2 store it writes.
    const std::string tmp = out + ".v2-tmp";
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
    WC_RETURN_IF_ERROR(trellis_write_store(tmp, TrellisLayout::kV2, weights, base, target_bits, hadamard));
    auto dir = trellis_posix_dir(tmp);
    Status s;
    {
      auto st = trellis_open(*dir, tmp);
      if (!st.ok()) s = st.status();
      else {
        auto plan = trellis_plan_v3(*st, kTrellisDefaultShard);
        s = plan.ok() ? trellis_write_plan(*dir, *plan, out) : plan.status();
      }
    }
    std::filesystem::remove_all(tmp, ec);
    return s;
  }
  if (layout != TrellisLayout::kV2) return Status::Invalid("layout must be v2 or v3");
  WC_RETURN_IF_ERROR(make_empty_dir(out));
  // Layers: the first all-digit name component; names without one share the
  // layer after the highest.
  auto layer_of = [](const std::string& n) {
    for (const auto& p : split_dots(n))
      if (all_digits(p)) return std::stoi(p);
    return -1;
  };
  int max_layer = -1;
  for (const auto& w : weights) max_layer = std::max(max_layer, layer_of(w.name));
  std::map<int, std::vector<const TrellisNamedWeight*>> layers;
  for (const auto& w : weights) {
    const int l = layer_of(w.name);
    layers[l < 0 ? max_layer + 1 : l].push_back(&w);
  }
  auto f32 = [](const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  for (const auto& [l, ws] : layers) {
    char dname[32];
    std::snprintf(dname, sizeof dname, "layer_%04d", l);
    const std::string ldir = out + "/" + dname;
    std::error_code ec;
    std::filesystem::create_directory(ldir, ec);
    if (ec) return Status::IOError(ldir + ": cannot create: " + ec.message());
    std::vector<TensorData> tensors;
    json list = json::array();
    for (const auto* w : ws) {
      std::string key;
      for (char c : w->name) key += c == '.' ? std::string("__") : std::string(1, c);
      const auto& q = w->q;
      tensors.push_back({key + "__indices", DType::kU8, {q.indices.size()}, q.indices});
      tensors.push_back({key + "__scales", DType::kF32, {(q.in + kTrellisScaleGroup - 1) / kTrellisScaleGroup, q.out},
                         f32(q.scales)});
      tensors.push_back({key + "__su", DType::kF32, {q.in}, f32(q.su)});
      tensors.push_back({key + "__sv", DType::kF32, {q.out}, f32(q.sv)});
      json e = {{"name", w->name},
                {"bits", q.bits},
                {"shape", {q.out, q.in}},
                {"mse", q.mse},
                {"original_bytes", w->original_bytes}};
      if (!w->weight_shape.empty()) e["weight_shape"] = w->weight_shape;
      list.push_back(e);
    }
    auto st = build_safetensors(tensors, std::nullopt);
    if (!st.ok()) return st.status();
    WC_RETURN_IF_ERROR(write_file(ldir + "/tensor_0000.safetensors", *st));
    const std::string idx = json_text({{"layer_idx", l}, {"total_tensors", ws.size()}, {"tensors", list}});
    WC_RETURN_IF_ERROR(write_file(ldir + "/index.json", std::vector<uint8_t>(idx.begin(), idx.end())));
  }
  auto b = build_safetensors(base, std::nullopt);
  if (!b.ok()) return b.status();
  WC_RETURN_IF_ERROR(write_file(out + "/base_weights.safetensors", *b));
  const std::string qi = json_text({{"format", "trellis_v2"},
                                    {"quantization_method", "trellis_ldlq"},
                                    {"hadamard_transform", hadamard},
                                    {"target_bits", target_bits},
                                    {"layers", layers.size()}});
  WC_RETURN_IF_ERROR(write_file(out + "/quantization_index.json", std::vector<uint8_t>(qi.begin(), qi.end())));
  const std::string cfg = json_text(
      {{"model_type", "trellis-reference"},
       {"trellis", {{"quant_method", "trellis"}, {"bits", target_bits}, {"hadamard_transform", hadamard}}}});
  return write_file(out + "/config.json", std::vector<uint8_t>(cfg.begin(), cfg.end()));
}

}  // namespace wcodec
