// tests/test_bytes_decoder.cpp — the vector bytes-model decoder
// (chunk_decode_hwy_bytes.cpp, on the vector paths) and the portable fast
// one (chunk_decode_fast_bytes.cpp) against the reference
// (decode_bytes_chunk in chunk_decode.h): real weights' bytes as 1-, 2-, 4- and 8-byte elements
// under both context modes, in shapes whose 32 lane rectangles are equal
// and unequal, on intact, damaged and truncated streams; and whole tensors
// through decode_chunk on every decoder path this CPU runs.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "chunk_decode.h"
#include "chunk_decode_fast.h"
#include "chunk_decode_hwy.h"
#include "chunk_payload_testutil.h"
#include "tensor_encode.h"
#include "testutil.h"
#include "wcodec/cpu.h"
#include "wcodec/safetensors.h"

namespace {

using namespace wcodec;

bool vector_path() { return cpu_path() != CpuPath::kScalar; }

struct Tally {
  int compared = 0, rejected = 0, damaged_agreed = 0, dropped = 0;
  std::set<std::pair<int, int>> forms;  // (element bytes, ctx_mode)
  bool unequal_lanes = false;
};

// Encodes `bytes` as one tensor of `dtype` and shape {rows, cols} and
// compares the two decoders on every chunk.
void compare(DType dtype, uint64_t rows, uint64_t cols, const uint8_t* bytes, std::mt19937& rng, Tally* t) {
  TensorInfo info;
  info.name = "t";
  info.dtype = dtype;
  info.shape = {rows, cols};
  info.begin = 0;
  info.end = rows * cols * (dtype_bits(dtype) / 8);
  EncodeOptions opt;
  opt.chunk_bytes = 48 << 10;
  auto r = encode_tensor(info, bytes, AuxInput{}, opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const EncodedTensor& et = *r;
  ASSERT_EQ(et.model.kind, ModelKind::kBytes) << dtype_name(dtype);
  if (!et.has_model) {
    ++t->dropped;
    return;
  }
  std::shared_ptr<const TensorModel::VectorTables> hold;
  const ModelView mv = et.model.view(&hold, nullptr, 0, TensorModel::TableUse::kVector);
  ASSERT_NE(mv.sym_small, nullptr);
  t->forms.insert({mv.bp.elem_bytes, mv.bp.ctx_mode});
  const std::string what = std::string(dtype_name(dtype)) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                           " ctx_mode " + std::to_string(et.model.bp.ctx_mode);
  for (uint64_t i = 0; i < et.chunks.size(); ++i) {
    const auto& c = et.chunks[i];
    if (c.method != ChunkMethod::kModel) continue;
    wctest::ChunkPayload ps;
    ASSERT_TRUE(wctest::parse_chunk_payload(et.geom, i, c.payload, &ps)) << what;
    ASSERT_EQ(ps.raw_len, 0u) << what;
    uint64_t row0, col0, h, w;
    et.geom.chunk_rect(i, &row0, &col0, &h, &w);
    const ChunkView cv{static_cast<uint32_t>(h), static_cast<uint32_t>(w), static_cast<uint32_t>(row0),
                       static_cast<uint32_t>(col0), static_cast<uint32_t>(et.geom.cols)};
    for (uint32_t l = 1; l < kLanes; ++l) {
      const LaneRect a = lane_rect(cv.h, cv.w, 0), b = lane_rect(cv.h, cv.w, l);
      if (a.w != b.w || a.h != b.h) t->unequal_lanes = true;
    }
    std::vector<uint8_t> ref(c.decoded_size, 0x11), vec(c.decoded_size, 0x22);
    ASSERT_TRUE(decode_bytes_chunk(mv, cv, ps.rans, ps.rans_len, ref.data())) << what << " chunk " << i;
    ASSERT_EQ(decode_bytes_chunk_fast(mv, cv, ps.rans, ps.rans_len, vec.data()), 1) << what << " chunk " << i;
    ASSERT_EQ(ref, vec) << what << " chunk " << i << ": portable fast decoder differs from the reference";
    std::fill(vec.begin(), vec.end(), 0x22);
    if (vector_path()) {
      ASSERT_EQ(decode_bytes_chunk_hwy(mv, cv, ps.rans, ps.rans_len, vec.data()), 1) << what << " chunk " << i;
      ASSERT_EQ(ref, vec) << what << " chunk " << i << ": vector decoder differs from the reference";
    }
    ASSERT_EQ(chunk_hash(ref.data(), ref.size()), c.xxh3) << what << " chunk " << i;
    ++t->compared;
    // Damaged streams: a flipped byte in the states or in the words, the
    // stream a word short, a word too long. Both decoders reject, or (a
    // flip that keeps the stream valid) both accept with the same bytes.
    std::vector<uint8_t> bad(ps.rans, ps.rans + ps.rans_len);
    for (int k = 0; k < 5; ++k) {
      std::vector<uint8_t> d = bad;
      const size_t at = k == 0 ? rng() % (4 * kLanes) : rng() % d.size();
      if (k < 4) d[at] ^= static_cast<uint8_t>(1 + rng() % 255);
      d.resize(d.size() + 2, 0);
      const uint32_t len = k == 3 ? ps.rans_len - 2 : k == 4 ? ps.rans_len + 2 : ps.rans_len;
      std::fill(ref.begin(), ref.end(), 0x11);
      std::fill(vec.begin(), vec.end(), 0x22);
      const bool ok_ref = decode_bytes_chunk(mv, cv, d.data(), len, ref.data());
      const int ok_fast = decode_bytes_chunk_fast(mv, cv, d.data(), len, vec.data());
      ASSERT_EQ(ok_ref ? 1 : 0, ok_fast) << what << " chunk " << i << " damage " << k << " at " << at << " (fast)";
      if (ok_ref) {
        ASSERT_EQ(ref, vec) << what << " chunk " << i << " damage " << k << " (fast)";
      }
      if (vector_path()) {
        std::fill(vec.begin(), vec.end(), 0x22);
        const int ok_vec = decode_bytes_chunk_hwy(mv, cv, d.data(), len, vec.data());
        ASSERT_EQ(ok_ref ? 1 : 0, ok_vec) << what << " chunk " << i << " damage " << k << " at " << at;
        if (ok_ref) {
          ASSERT_EQ(ref, vec) << what << " chunk " << i << " damage " << k;
        }
      }
      ++(ok_ref ? t->damaged_agreed : t->rejected);
    }
  }
}

// Block scales as a Q4_0 quantizer writes them, from real weights: the
// fp16 bits of the largest magnitude in each block of 32 of isnet-medium's
// largest F16 tensor (few distinct values; the chooser takes ctx_mode 0
// for them).
std::vector<uint8_t> real_block_scales() {
  const std::vector<uint8_t> w = wctest::largest_isnet_f16_tensor();
  std::vector<uint8_t> out;
  for (size_t b = 0; b + 64 <= w.size(); b += 64) {
    uint16_t best = 0;
    for (size_t i = b; i < b + 64; i += 2) {
      const uint16_t h = static_cast<uint16_t>((w[i] | w[i + 1] << 8) & 0x7FFF);
      if (h > best) best = h;
    }
    out.push_back(static_cast<uint8_t>(best));
    out.push_back(static_cast<uint8_t>(best >> 8));
  }
  return out;
}

// Independent bytes, each byte plane of its own skewed distribution (the
// left byte tells nothing: ctx_mode 0; byte planes of different
// statistics: the model beats zstd's one Huffman table).
std::vector<uint8_t> skewed_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::geometric_distribution<int> low(0.08), high(0.6);
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i % 2 ? high(rng) : low(rng));
  return v;
}

// Bytes in runs: each byte follows the one before it in its plane (zero
// after zero nine times in ten, rarely after anything else): the left
// byte's class pays (ctx_mode 1) for every element size.
std::vector<uint8_t> run_bytes(size_t n, uint32_t eb, uint32_t seed) {
  std::mt19937 rng(seed);
  std::geometric_distribution<int> value(0.05);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    const bool left_zero = i < eb || v[i - eb] == 0;
    v[i] = u(rng) < (left_zero ? 0.9 : 0.1) ? 0 : static_cast<uint8_t>(1 + value(rng) % 255);
  }
  return v;
}

TEST(BytesDecoder, EqualsReferenceOnRealAndRandomBytes) {
  const std::vector<uint8_t> real = real_block_scales();
  ASSERT_GE(real.size(), 72000u);
  const std::vector<uint8_t> noise = skewed_bytes(real.size(), 7);
  std::mt19937 rng(23);
  Tally t;
  // (dtype, rows, cols): shapes of 32 equal lane rectangles and of unequal
  // ones (odd sizes), one chunk and several.
  const struct {
    DType dt;
    uint64_t rows, cols;
  } shapes[] = {
      {DType::kU16, 128, 256},  {DType::kU16, 37, 901}, {DType::kU16, 3, 77},  {DType::kU16, 1, 5000},
      {DType::kI32, 64, 256},   {DType::kI32, 13, 333}, {DType::kI64, 32, 128}, {DType::kI64, 7, 1111},
      {DType::kBOOL, 300, 240}, {DType::kBOOL, 29, 999},
  };
  for (const auto& s : shapes) {
    ASSERT_LE(s.rows * s.cols * (dtype_bits(s.dt) / 8), real.size());
    const std::vector<uint8_t> runs = run_bytes(real.size(), dtype_bits(s.dt) / 8, 11);
    for (const auto* src : {&real, &noise, &runs}) {
      compare(s.dt, s.rows, s.cols, src->data(), rng, &t);
      if (HasFatalFailure()) return;
    }
  }
  for (int eb : {1, 2, 4, 8})
    for (int mode : {0, 1}) EXPECT_TRUE(t.forms.count({eb, mode})) << eb << "-byte elements, ctx_mode " << mode;
  EXPECT_TRUE(t.unequal_lanes);
  EXPECT_LE(t.dropped, 4);
  EXPECT_GT(t.compared, 40);
  EXPECT_GT(t.rejected, 40);
}

// A file of bytes-model tensors encoded by the tool and decoded on every
// path this CPU runs (WCODEC_CPU): the original bytes on each.
TEST(BytesDecoder, EveryPathDecodesAFileOfBytesTensors) {
  const std::vector<uint8_t> real = real_block_scales();
  ASSERT_GE(real.size(), 72000u);
  const std::vector<uint8_t> noise = skewed_bytes(100000, 9);
  auto part = [](const std::vector<uint8_t>& v, size_t n) { return std::vector<uint8_t>(v.begin(), v.begin() + n); };
  auto st = build_safetensors({{"scales", DType::kU16, {97, 371}, part(real, 97 * 371 * 2)},
                               {"ids", DType::kI32, {33, 507}, part(real, 33 * 507 * 4)},
                               {"noise", DType::kU16, {50, 1000}, part(noise, 100000)}},
                              std::nullopt);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  wctest::ScratchDir dir;
  const auto src = dir / "bytes.safetensors", enc = dir / "bytes.wcodec";
  wctest::write_file(src, *st);
  std::string out;
  ASSERT_EQ(wctest::run_command(std::string(WCODEC_TOOL) + " encode -q '" + src.string() + "' '" + enc.string() +
                                    "' 2>&1",
                                &out),
            0)
      << out;
  ASSERT_EQ(wctest::run_command(std::string(WCODEC_TOOL) + " inspect '" + enc.string() + "' 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("bytes"), std::string::npos) << out;
  const std::string want = wctest::sha256_hex(*st);
  int paths = 0;
  for (CpuPath p : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512, CpuPath::kNeon}) {
    if (!cpu_path_supported(p)) continue;
    const auto dec = dir / (std::string("out.") + cpu_path_name(p));
    ASSERT_EQ(wctest::run_command(std::string("WCODEC_CPU=") + cpu_path_name(p) + " " + WCODEC_TOOL + " decode '" +
                                      enc.string() + "' '" + dec.string() + "' 2>&1",
                                  &out),
              0)
        << cpu_path_name(p) << ": " << out;
    EXPECT_EQ(wctest::sha256_hex(wctest::read_file(dec)), want) << cpu_path_name(p);
    ++paths;
  }
  EXPECT_GE(paths, 2);
}

}  // namespace
