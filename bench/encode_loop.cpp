// bench/encode_loop.cpp — encode speed of safetensors files in process, one
// thread, default profile: each file is read into memory and encoded with
// encode_safetensors, passes times per round; prints the best pass's MB/s
// of the thread's CPU time (process start, file reads and writes are not
// counted; `wcodec encode` of a small file is mostly process start) and the
// ratio. Files given together are measured in turn, round after round, so
// that two builds' figures, or two files', compare in the same minutes.
//
//   build/bench/encode_loop [--passes N] [--rounds R] FILE.safetensors...
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "loop_args.h"
#include "wcodec/cpu.h"
#include "wcodec/encode.h"

int main(int argc, char** argv) {
  bench::LoopArgs a{3, 2, {}, {}};
  if (!bench::parse_loop_args(argc, argv, "encode_loop", "FILE.safetensors", &a)) return a.files.empty() ? 2 : 1;
  const int passes = a.passes, rounds = a.rounds;
  const std::vector<std::string>& files = a.files;
  const std::vector<std::vector<uint8_t>>& src = a.bytes;
  std::printf("cpu: %s, decoder path: %s (encode output does not depend on it)\n", wcodec::cpu_model().c_str(),
              wcodec::cpu_path_name());
  std::vector<double> best(files.size(), 1e30);
  std::vector<size_t> out_size(files.size(), 0);
  const wcodec::EncodeConfig cfg;  // default profile, one thread
  for (int r = 0; r < rounds; ++r)
    for (size_t f = 0; f < files.size(); ++f)
      for (int p = 0; p < passes; ++p) {
        const double t0 = bench::thread_seconds();
        auto enc = wcodec::encode_safetensors(src[f].data(), src[f].size(), cfg, files[f]);
        const double dt = bench::thread_seconds() - t0;
        if (!enc.ok()) {
          std::fprintf(stderr, "encode_loop: %s\n", enc.status().ToString().c_str());
          return 1;
        }
        out_size[f] = enc->size();
        best[f] = std::min(best[f], dt);
      }
  for (size_t f = 0; f < files.size(); ++f)
    std::printf("%s %.1f MB/s ratio %.4f\n", files[f].c_str(), static_cast<double>(src[f].size()) / best[f] / 1e6,
                static_cast<double>(out_size[f]) / static_cast<double>(src[f].size()));
  return 0;
}
