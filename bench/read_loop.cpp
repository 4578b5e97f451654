// bench/read_loop.cpp — decode speed of .wcodec files from memory, one
// thread: each file is opened with Reader::open_memory and read whole,
// passes times; prints the best pass's MB/s of the thread's CPU time (the
// first pass builds the decoding tables and is timed too). Files given
// together are measured in turn, round after round, so that two encodings
// of one model compare in the same minutes (bench/x8_tables_bench.sh).
//
//   build/bench/read_loop [--passes N] [--rounds R] FILE.wcodec...
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "loop_args.h"
#include "wcodec/cpu.h"
#include "wcodec/reader.h"

int main(int argc, char** argv) {
  bench::LoopArgs a{10, 3, {}, {}};
  if (!bench::parse_loop_args(argc, argv, "read_loop", "FILE.wcodec", &a)) return a.files.empty() ? 2 : 1;
  const int passes = a.passes, rounds = a.rounds;
  const std::vector<std::string>& files = a.files;
  const std::vector<std::vector<uint8_t>>& enc = a.bytes;
  std::printf("cpu: %s, decoder path: %s, table gathers: %s\n", wcodec::cpu_model().c_str(),
              wcodec::cpu_path_name(), wcodec::gather_form_name(wcodec::gather_form()));
  std::vector<double> best(files.size(), 1e30);
  std::vector<uint64_t> size(files.size(), 0);
  for (int r = 0; r < rounds; ++r)
    for (size_t f = 0; f < files.size(); ++f) {
      auto rd = wcodec::Reader::open_memory(enc[f].data(), enc[f].size(), files[f]);
      if (!rd.ok()) {
        std::fprintf(stderr, "read_loop: %s\n", rd.status().ToString().c_str());
        return 1;
      }
      size[f] = (*rd)->original_size();
      std::vector<uint8_t> out(size[f]);
      for (int p = 0; p < passes; ++p) {
        const double t0 = bench::thread_seconds();
        const wcodec::Status st = (*rd)->read(0, size[f], out.data());
        const double dt = bench::thread_seconds() - t0;
        if (!st.ok()) {
          std::fprintf(stderr, "read_loop: %s\n", st.ToString().c_str());
          return 1;
        }
        best[f] = std::min(best[f], dt);
      }
    }
  for (size_t f = 0; f < files.size(); ++f)
    std::printf("%s %.0f MB/s\n", files[f].c_str(), static_cast<double>(size[f]) / best[f] / 1e6);
  return 0;
}
