// tests/test_fuzz_replay.cpp — replays the committed inputs of the fuzz
// targets (tests/fuzz/corpus for the reader, tests/fuzz/corpus-encode for
// the encoder) through their harnesses, so that every configuration (the
// ASan/UBSan one included) checks them without clang or libFuzzer. A
// harness aborts on a wrong byte or a failed round trip; the sanitizers
// report memory errors and undefined behaviour.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "testutil.h"

extern "C" int fuzz_container_one(const uint8_t* data, size_t size);
extern "C" int fuzz_encode_one(const uint8_t* data, size_t size);
extern "C" int fuzz_gguf_one(const uint8_t* data, size_t size);
extern "C" int fuzz_packed_ternary_one(const uint8_t* data, size_t size);
extern "C" int fuzz_trellis_one(const uint8_t* data, size_t size);
extern "C" int fuzz_cawsf_one(const uint8_t* data, size_t size);

namespace {

std::vector<std::filesystem::path> corpus(const char* dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// Runs every input of corpus `dir` (at least 50 of them) through `one`.
void replay(const char* dir, int (*one)(const uint8_t*, size_t)) {
  const auto files = corpus(dir);
  ASSERT_GE(files.size(), 50u) << "corpus at " << dir << " is missing or nearly empty";
  for (const auto& f : files) {
    SCOPED_TRACE(f.filename().string());
    const auto bytes = wctest::read_file(f);
    EXPECT_EQ(one(bytes.data(), bytes.size()), 0);
  }
}

TEST(FuzzReplay, ReaderCorpusReadsBackOrFailsCleanly) { replay(WCODEC_FUZZ_CORPUS, fuzz_container_one); }

// Edits that reach the decoders: a payload byte of every seed flipped in
// turn (region 0, whose oracle demands the original bytes from any read
// that succeeds), independent of the committed corpus.
TEST(FuzzReplay, PayloadFlipsOfEverySeed) {
  for (uint8_t seed = 0; seed < 8; ++seed) {
    for (uint32_t k = 0; k < 64; ++k) {
      const uint32_t pos = 1000 + k * 977;
      const uint8_t in[6] = {seed, 0, static_cast<uint8_t>(pos), static_cast<uint8_t>(pos >> 8),
                             static_cast<uint8_t>(pos >> 16), static_cast<uint8_t>(1u << (k % 8))};
      EXPECT_EQ(fuzz_container_one(in, sizeof(in)), 0);
    }
  }
}

TEST(FuzzReplay, GgufCorpusParsesOrFailsCleanly) { replay(WCODEC_FUZZ_GGUF_CORPUS, fuzz_gguf_one); }

TEST(FuzzReplay, CawsfCorpusReadsOrFailsCleanly) { replay(WCODEC_FUZZ_CAWSF_CORPUS, fuzz_cawsf_one); }

TEST(FuzzReplay, PackedTernaryCorpusPacksBackOrFailsCleanly) {
  replay(WCODEC_FUZZ_TERNARY_CORPUS, fuzz_packed_ternary_one);
}

TEST(FuzzReplay, TrellisCorpusReadsOrFailsCleanly) { replay(WCODEC_FUZZ_TRELLIS_CORPUS, fuzz_trellis_one); }

// Every file of both templates truncated at many lengths, independent of
// the corpus.
TEST(FuzzReplay, TrellisTruncations) {
  for (uint8_t t = 0; t < 2; ++t)
    for (uint8_t file = 0; file < 12; ++file)
      for (uint32_t len = 0; len < 4000; len += 397) {
        const uint8_t in[7] = {t, file, 1, static_cast<uint8_t>(len), static_cast<uint8_t>(len >> 8), 0, 0};
        EXPECT_EQ(fuzz_trellis_one(in, sizeof(in)), 0);
      }
}

TEST(FuzzReplay, EncoderCorpusRoundTrips) { replay(WCODEC_FUZZ_ENCODE_CORPUS, fuzz_encode_one); }

// Every kind and value style at one odd shape, independent of the corpus.
TEST(FuzzReplay, EveryKindAndStyleRoundTrips) {
  for (uint8_t kind = 0; kind < 12; ++kind) {
    for (uint8_t style = 0; style < 4; ++style) {
      const uint8_t in[12] = {kind, style, 37, 70, 0, 45, 1, 0, 3, 1, 4, 1};  // 71 x 302, 4 KiB chunks
      EXPECT_EQ(fuzz_encode_one(in, sizeof(in)), 0);
    }
  }
}

}  // namespace
