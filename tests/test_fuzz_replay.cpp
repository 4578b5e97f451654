// tests/test_fuzz_replay.cpp — replays the committed inputs of the
// container fuzzer (tests/fuzz/corpus) through its harness, so that every
// configuration (the ASan/UBSan one included) checks them without clang or
// libFuzzer. The harness aborts on a wrong byte; the sanitizers report
// memory errors and undefined behaviour.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "testutil.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::filesystem::path corpus_dir() { return std::filesystem::path(WCODEC_FUZZ_CORPUS); }

TEST(FuzzReplay, CorpusInputsReadBackOrFailCleanly) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(corpus_dir()))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 50u) << "corpus at " << corpus_dir() << " is missing or nearly empty";
  for (const auto& f : files) {
    SCOPED_TRACE(f.filename().string());
    const auto bytes = wctest::read_file(f);
    EXPECT_EQ(LLVMFuzzerTestOneInput(bytes.data(), bytes.size()), 0);
  }
}

// Edits that reach the decoders: a payload byte of every seed flipped in
// turn (region 0, whose oracle demands the original bytes from any read
// that succeeds), independent of the committed corpus.
TEST(FuzzReplay, PayloadFlipsOfEverySeed) {
  for (uint8_t seed = 0; seed < 6; ++seed) {
    for (uint32_t k = 0; k < 64; ++k) {
      const uint32_t pos = 1000 + k * 977;
      const uint8_t in[6] = {seed, 0, static_cast<uint8_t>(pos), static_cast<uint8_t>(pos >> 8),
                             static_cast<uint8_t>(pos >> 16), static_cast<uint8_t>(1u << (k % 8))};
      EXPECT_EQ(LLVMFuzzerTestOneInput(in, sizeof(in)), 0);
    }
  }
}

}  // namespace
