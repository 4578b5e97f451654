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
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "wcodec/cpu.h"
#include "wcodec/reader.h"

namespace {
double thread_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
}  // namespace

int main(int argc, char** argv) {
  int passes = 10, rounds = 3;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--passes") && i + 1 < argc) passes = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else files.emplace_back(argv[i]);
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s [--passes N] [--rounds R] FILE.wcodec...\n", argv[0]);
    return 2;
  }
  std::vector<std::vector<uint8_t>> enc(files.size());
  for (size_t f = 0; f < files.size(); ++f) {
    std::ifstream in(files[f], std::ios::binary);
    enc[f].assign(std::istreambuf_iterator<char>(in), {});
    if (enc[f].empty()) {
      std::fprintf(stderr, "read_loop: cannot read %s\n", files[f].c_str());
      return 1;
    }
  }
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
        const double t0 = thread_seconds();
        const wcodec::Status st = (*rd)->read(0, size[f], out.data());
        const double dt = thread_seconds() - t0;
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
