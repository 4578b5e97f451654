// bench/loop_args.h — what the in-process loop benchmarks (read_loop,
// encode_loop) share: their command line ([--passes N] [--rounds R]
// FILE...), reading each file whole into memory, and the thread's CPU time.
// Thread-safety: plain functions, no shared state.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace bench {

inline double thread_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct LoopArgs {
  int passes, rounds;
  std::vector<std::string> files;
  std::vector<std::vector<uint8_t>> bytes;  // each file whole
};

// Parses [--passes N] [--rounds R] FILE... (at least one file) and reads
// the files; false (after a message naming `what` or the file) otherwise.
inline bool parse_loop_args(int argc, char** argv, const char* what, const char* file_kind, LoopArgs* a) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--passes") && i + 1 < argc) a->passes = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) a->rounds = std::max(1, std::atoi(argv[++i]));
    else a->files.emplace_back(argv[i]);
  }
  if (a->files.empty()) {
    std::fprintf(stderr, "usage: %s [--passes N] [--rounds R] %s...\n", argv[0], file_kind);
    return false;
  }
  a->bytes.resize(a->files.size());
  for (size_t f = 0; f < a->files.size(); ++f) {
    std::ifstream in(a->files[f], std::ios::binary);
    a->bytes[f].assign(std::istreambuf_iterator<char>(in), {});
    if (a->bytes[f].empty()) {
      std::fprintf(stderr, "%s: cannot read %s\n", what, a->files[f].c_str());
      return false;
    }
  }
  return true;
}

}  // namespace bench
