// mount/cli_trellis.cpp — `wcodec trellis`: quantize, validate and migrate
// Trellis stores (wcodec/trellis.h, docs/trellis.md).
//   quantize MODEL.safetensors OUT --bits N [--hadamard] [--layout v2|v3] [--max-weights N]
//   validate DIR            exit 0 valid, 1 invalid (every problem printed)
//   migrate IN OUT [--shard-size 2GB]
// Usage errors exit 2 (CLI11 parse errors, through wcodec_main.cpp).
// Thread-safety: single-threaded command.
#include "cli_trellis.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "wcodec/trellis.h"

namespace {

struct Args {
  std::string in, out, layout = "v3", shard = "2GB";
  unsigned bits = 4;
  uint64_t limit = UINT64_MAX;
  bool hadamard = false;
  CLI::App *quant = nullptr, *validate = nullptr, *migrate = nullptr;
} g;

float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 31, man = h & 1023;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(man | 1024), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

int fail(const std::string& m) {
  std::fprintf(stderr, "wcodec trellis: %s\n", m.c_str());
  return 1;
}

int run_quantize() {
  std::ifstream f(g.in, std::ios::binary);
  if (!f) return fail(g.in + ": cannot open");
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto h = wcodec::parse_safetensors_header(file.data(), file.size(), file.size(), g.in);
  if (!h.ok()) return fail(h.status().ToString());
  std::vector<wcodec::TrellisNamedWeight> weights;
  std::vector<wcodec::TensorData> base;
  for (const auto& t : h->tensors) {
    const uint8_t* p = file.data() + h->data_start + t.begin;
    const bool is_float = t.dtype == wcodec::DType::kF32 || t.dtype == wcodec::DType::kF16 ||
                          t.dtype == wcodec::DType::kBF16;
    if (!is_float || t.shape.size() < 2 || t.numel() == 0 || weights.size() >= g.limit) {
      base.push_back({t.name, t.dtype, t.shape, std::vector<uint8_t>(p, p + t.nbytes())});
      continue;
    }
    const uint64_t n = t.numel(), out = t.shape[0], in = n / out;
    std::vector<float> w(n);
    for (uint64_t k = 0; k < n; ++k) {
      if (t.dtype == wcodec::DType::kF32) {
        std::memcpy(&w[k], p + 4 * k, 4);
      } else {
        const uint16_t v = static_cast<uint16_t>(p[2 * k] | (p[2 * k + 1] << 8));
        if (t.dtype == wcodec::DType::kF16) {
          w[k] = half_to_float(v);
        } else {
          const uint32_t u = static_cast<uint32_t>(v) << 16;
          std::memcpy(&w[k], &u, 4);
        }
      }
    }
    auto q = wcodec::trellis_quantize(w.data(), out, in, g.bits, g.hadamard, t.name);
    if (!q.ok()) return fail(q.status().ToString());
    wcodec::TrellisNamedWeight nw{t.name, std::move(*q), {}, t.nbytes()};
    if (t.shape.size() > 2) nw.weight_shape = t.shape;
    weights.push_back(std::move(nw));
  }
  const auto layout = g.layout == "v2" ? wcodec::TrellisLayout::kV2 : wcodec::TrellisLayout::kV3;
  wcodec::Status s = wcodec::trellis_write_store(g.out, layout, weights, base, g.bits, g.hadamard);
  if (!s.ok()) return fail(s.ToString());
  double mse = 0;
  for (const auto& w : weights) mse += w.q.mse;
  std::printf("%s: %zu weights quantized at %u bits%s (mean mse %.3g), %zu base tensors -> %s (%s)\n", g.in.c_str(),
              weights.size(), g.bits, g.hadamard ? " with the Hadamard rotation" : "",
              weights.empty() ? 0.0 : mse / static_cast<double>(weights.size()), base.size(), g.out.c_str(),
              g.layout.c_str());
  return 0;
}

int run_validate() {
  auto dir = wcodec::trellis_posix_dir(g.in);
  const wcodec::TrellisStore st = wcodec::trellis_read(*dir);
  for (const auto& p : st.problems) std::printf("%s/%s\n", g.in.c_str(), p.to_string().c_str());
  const char* layout = st.layout == wcodec::TrellisLayout::kV2 ? "v2" : st.layout == wcodec::TrellisLayout::kV3 ? "v3" : "?";
  if (!st.problems.empty()) {
    std::printf("%s: INVALID Trellis %s store (%s): %zu problem(s)\n", g.in.c_str(), layout, st.variant.c_str(),
                st.problems.size());
    return 1;
  }
  std::printf("%s: valid Trellis %s store (%s): %zu quantized weights, %zu tensors in %zu files\n", g.in.c_str(),
              layout, st.variant.c_str(), st.weights.size(), st.tensors.size(), st.files.size());
  return 0;
}

int run_migrate() {
  auto size = wcodec::trellis_parse_size(g.shard);
  if (!size.ok()) {
    std::fprintf(stderr, "wcodec trellis migrate: %s\n", size.status().message().c_str());
    return 2;
  }
  auto dir = wcodec::trellis_posix_dir(g.in);
  if (wcodec::trellis_detect(*dir) != wcodec::TrellisLayout::kV2) return fail(g.in + ": not a Trellis v2 store");
  auto st = wcodec::trellis_open(*dir, g.in);
  if (!st.ok()) return fail(st.status().ToString());
  auto plan = wcodec::trellis_plan_v3(*st, *size);
  if (!plan.ok()) return fail(plan.status().ToString());
  wcodec::Status s = wcodec::trellis_write_plan(*dir, *plan, g.out);
  if (!s.ok()) return fail(s.ToString());
  uint64_t shards = 0;
  for (const auto& f : *plan) shards += f.name.rfind("model-", 0) == 0;
  std::printf("%s -> %s: %zu files (%llu shards)\n", g.in.c_str(), g.out.c_str(), plan->size(),
              static_cast<unsigned long long>(shards));
  return 0;
}

}  // namespace

CLI::App* add_trellis_command(CLI::App& app) {
  auto* t = app.add_subcommand("trellis", "Trellis quantized stores: quantize, validate, migrate v2 -> v3");
  t->require_subcommand(1);
  g.quant = t->add_subcommand("quantize", "Quantize the float tensors of a .safetensors file into a Trellis store");
  g.quant->add_option("MODEL", g.in, ".safetensors file")->required();
  g.quant->add_option("OUT", g.out, "new store directory")->required();
  g.quant->add_option("--bits", g.bits, "bits per weight")->check(CLI::Range(2, 8))->required();
  g.quant->add_flag("--hadamard", g.hadamard, "rotate inputs by the block-128 Hadamard transform first");
  g.quant->add_option("--layout", g.layout, "v2 or v3")->check(CLI::IsMember({"v2", "v3"}));
  g.quant->add_option("--max-weights", g.limit, "quantize only the first N eligible tensors (the rest stay base weights)");
  g.validate = t->add_subcommand("validate", "Check a Trellis v2 or v3 store; exit 0 valid, 1 invalid");
  g.validate->add_option("DIR", g.in, "store directory")->required();
  g.migrate = t->add_subcommand("migrate", "Write the v3 form of a Trellis v2 store");
  g.migrate->add_option("IN", g.in, "v2 store")->required();
  g.migrate->add_option("OUT", g.out, "new v3 store directory")->required();
  g.migrate->add_option("--shard-size", g.shard, "most tensor bytes per shard (2GB, 500MB, 1GiB, bytes)");
  return t;
}

int run_trellis_command() {
  if (*g.quant) return run_quantize();
  if (*g.validate) return run_validate();
  if (*g.migrate) return run_migrate();
  return 2;
}
