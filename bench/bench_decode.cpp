// bench/bench_decode.cpp — decode throughput of the codec's models on
// synthetic tensors shaped like real weights (Gaussian int8 codes, BF16
// values), single thread. Real-file tables come from `wcodec bench`.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "wcodec/container.h"

namespace {

std::vector<uint8_t> make_file(wcodec::DType dt) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> n(0.f, 1.f);
  const uint64_t rows = 512, cols = 4096;
  wcodec::TensorData t{"w", dt, {rows, cols}, {}};
  if (dt == wcodec::DType::kI8) {
    t.bytes.resize(rows * cols);
    for (auto& b : t.bytes) b = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(std::lround(n(rng) * 20), -127L, 127L)));
  } else {
    t.bytes.resize(rows * cols * 2);
    for (uint64_t i = 0; i < rows * cols; ++i) {
      float f = n(rng) * 0.02f;
      uint32_t u;
      std::memcpy(&u, &f, 4);
      const uint16_t h = static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
      std::memcpy(&t.bytes[2 * i], &h, 2);
    }
  }
  auto f = wcodec::build_safetensors({t}, std::nullopt);
  return f.ok() ? std::move(f).value() : std::vector<uint8_t>{};
}

void BM_Decode(benchmark::State& state, wcodec::DType dt) {
  const auto orig = make_file(dt);
  auto enc = wcodec::encode_safetensors(orig.data(), orig.size(), wcodec::EncodeConfig{}, "bench");
  if (!enc.ok()) {
    state.SkipWithError(enc.status().ToString().c_str());
    return;
  }
  const auto path = std::filesystem::temp_directory_path() / "wcodec-bench-decode.wcodec";
  {
    std::ofstream o(path, std::ios::binary);
    o.write(reinterpret_cast<const char*>(enc->data()), static_cast<std::streamsize>(enc->size()));
  }
  auto rd = wcodec::Reader::open(path.string());
  if (!rd.ok()) {
    state.SkipWithError(rd.status().ToString().c_str());
    return;
  }
  std::vector<uint8_t> out(orig.size());
  for (auto _ : state) {
    auto st = (*rd)->read(0, out.size(), out.data());
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(orig.size()));
  state.counters["ratio"] = static_cast<double>(enc->size()) / static_cast<double>(orig.size());
  std::filesystem::remove(path);
}

BENCHMARK_CAPTURE(BM_Decode, int8, wcodec::DType::kI8)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, bf16, wcodec::DType::kBF16)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
