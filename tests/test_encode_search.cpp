// tests/test_encode_search.cpp — the int model search's shortcuts against
// the direct computations they replace, on the real quantized checkpoints
// in ../shared/data: choose_int with its activity histograms picks the same
// model as counting every candidate from the features; the order-0 entropy
// from a byte histogram equals the one from the values; and the encoder's
// per-thread scratch (value grid, token cache) carries nothing from one
// file to the next.
//
// Thread-safety: each test runs on its own; EncoderScratch starts one
// thread of its own.

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "encode_model_i.h"
#include "testutil.h"
#include "wcodec/encode.h"
#include "wcodec/safetensors.h"

namespace {

using wcodec::IntParams;

struct IntCase {
  std::string file;
  uint32_t sub, esc, center, elem_bits;
};

// As encode_tensor sets them up (no zero points).
IntParams base_params(const IntCase& k) {
  IntParams p{};
  p.sub = static_cast<uint8_t>(k.sub);
  p.esc = static_cast<uint16_t>(k.esc);
  p.center = static_cast<uint8_t>(k.center);
  p.nsym = static_cast<uint16_t>(k.esc + wcodec::kEscClasses);
  p.nb = 1;
  p.ns = 1;
  return p;
}

// encode_tensor's geometry for a [rows, row bytes] tensor: chunks of whole
// rows up to 256 KiB.
wcodec::TensorGeometry geometry(uint64_t rows, uint64_t row_bytes, uint32_t elem_bits) {
  wcodec::TensorGeometry g;
  g.elem_bits = elem_bits;
  g.rows = rows;
  g.cols = row_bytes * 8 / elem_bits;
  g.chunk_cols = g.cols;
  g.chunk_rows = std::min<uint64_t>(rows, std::max<uint64_t>(1, (256u << 10) / row_bytes));
  return g;
}

bool same_params(const IntParams& a, const IntParams& b) {
  if (a.nbr_mode != b.nbr_mode || a.nb != b.nb || a.ns != b.ns || a.use_rc != b.use_rc || a.use_cc != b.use_cc ||
      a.off_a != b.off_a || a.off_b != b.off_b || a.period != b.period)
    return false;
  for (int i = 0; i + 1 < a.nb; ++i)
    if (a.thr[i] != b.thr[i]) return false;
  for (int i = 0; i + 1 < a.ns; ++i)
    if (a.sthr[i] != b.sthr[i]) return false;
  return true;
}

// Runs check(tensor, params, geometry, bytes) on the 2-D U8 / I8 code
// tensors of a file (up to max_tensors), and returns how many it ran on.
template <typename Check>
int each_code_tensor(const IntCase& k, int max_tensors, Check&& check) {
  const auto path = wctest::data_dir() / k.file;
  if (!std::filesystem::exists(path)) return -1;
  const std::vector<uint8_t> file = wctest::read_file(path);
  auto hdr = wcodec::parse_safetensors_header(file.data(), file.size(), file.size(), k.file);
  EXPECT_TRUE(hdr.ok()) << k.file;
  if (!hdr.ok()) return 0;
  int n = 0;
  for (const auto& t : hdr->tensors) {
    const bool codes = (k.sub == wcodec::kIntI8 ? t.dtype == wcodec::DType::kI8 : t.dtype == wcodec::DType::kU8);
    const bool packed = k.sub == wcodec::kIntI8 || (t.name.size() > 7 && t.name.ends_with("_packed"));
    if (!codes || !packed || t.shape.size() != 2 || t.shape[0] == 0 || t.shape[1] == 0) continue;
    if (n == max_tensors) break;
    const uint8_t* data = file.data() + hdr->data_start + t.begin;
    check(t, base_params(k), geometry(t.shape[0], t.shape[1], k.elem_bits), data);
    ++n;
  }
  return n;
}

const IntCase kCases[] = {
    {"isnet-medium.rtn-ternary.safetensors", wcodec::kIntTernary, 8, 0, 2},
    {"isnet-medium.rtn-int4.safetensors", wcodec::kIntNibble, 32, 8, 4},
    {"stories260K.rtn-ternary.safetensors", wcodec::kIntTernary, 8, 0, 2},
    {"stories260K.rtn-int4.safetensors", wcodec::kIntNibble, 32, 8, 4},
};

// The activity histograms count the same (context, token) pairs as the
// per-candidate passes over the features, so the search must end at the
// same model, thresholds and side information on every tensor.
TEST(EncodeSearch, ActivityHistogramsPickTheDirectSearchModel) {
  for (const IntCase& k : kCases) {
    int activity_models = 0;
    const int n = each_code_tensor(k, 24, [&](const wcodec::TensorInfo& t, const IntParams& base,
                                              const wcodec::TensorGeometry& g, const uint8_t* data) {
      wcodec::IntGrid vals;
      wcodec::int_values(base, g, data, wcodec::AuxInput{}, &vals);
      wcodec::TensorModel fast, direct;
      uint32_t amax_fast = 0, amax_direct = 0;
      wcodec::choose_int(g, vals, base, true, &fast, &fast.rc, &fast.cc, &amax_fast, false);
      wcodec::choose_int(g, vals, base, true, &direct, &direct.rc, &direct.cc, &amax_direct, true);
      EXPECT_TRUE(same_params(fast.ip, direct.ip))
          << k.file << " " << t.name << ": nbr_mode " << int{fast.ip.nbr_mode} << "/" << int{direct.ip.nbr_mode}
          << " nb " << int{fast.ip.nb} << "/" << int{direct.ip.nb} << " ns " << int{fast.ip.ns} << "/"
          << int{direct.ip.ns};
      EXPECT_EQ(fast.rc, direct.rc) << k.file << " " << t.name;
      EXPECT_EQ(fast.cc, direct.cc) << k.file << " " << t.name;
      EXPECT_EQ(amax_fast, amax_direct);
      activity_models += fast.ip.nbr_mode == 3 || (fast.ip.nbr_mode == 0 && fast.ip.nb > 1);
    });
    if (n < 0) GTEST_SKIP() << "missing ../shared/data/" << k.file;
    EXPECT_GT(n, 0) << k.file;
    // Not vacuous: models the histograms' counts chose (kernel contexts, or
    // more than one activity class) are among them.
    if (k.file.starts_with("isnet")) {
      EXPECT_GT(activity_models, 0) << k.file;
    }
  }
}

TEST(EncodeSearch, Order0FromByteHistogramEqualsValues) {
  const IntCase cases[] = {kCases[0], kCases[1], {"stories260K.rtn-int8.safetensors", wcodec::kIntI8, 236, 0, 8}};
  for (const IntCase& k : cases) {
    const int n = each_code_tensor(k, 8, [&](const wcodec::TensorInfo& t, const IntParams& base,
                                             const wcodec::TensorGeometry& g, const uint8_t* data) {
      wcodec::IntGrid vals;
      wcodec::int_values(base, g, data, wcodec::AuxInput{}, &vals);
      const double from_bytes = wcodec::int_order0_bytes(base, vals, data);
      const double from_values = wcodec::int_order0_bytes(base, vals, nullptr);
      EXPECT_EQ(from_bytes, from_values) << k.file << " " << t.name;
      EXPECT_GT(from_values, 0.0) << k.file << " " << t.name;
    });
    if (n < 0) GTEST_SKIP() << "missing ../shared/data/" << k.file;
    EXPECT_GT(n, 0) << k.file;
  }
}

// A file encoded on a thread that encoded another (larger) file first equals
// the same file encoded on a fresh thread: the reused value grid and token
// cache hold nothing over.
TEST(EncoderScratch, SecondFileEqualsFreshThread) {
  const auto first = wctest::data_dir() / "stories260K.rtn-int8.safetensors";
  const auto second = wctest::data_dir() / "stories260K.rtn-ternary.safetensors";
  if (!std::filesystem::exists(first) || !std::filesystem::exists(second))
    GTEST_SKIP() << "missing ../shared/data/stories260K.rtn-{int8,ternary}.safetensors";
  const auto a = wctest::read_file(first), b = wctest::read_file(second);
  wcodec::EncodeConfig cfg;
  cfg.threads = 1;
  auto run = [&](const std::vector<uint8_t>& f) {
    auto r = wcodec::encode_safetensors(f.data(), f.size(), cfg, "scratch");
    EXPECT_TRUE(r.ok());
    return r.ok() ? std::move(r).value() : std::vector<uint8_t>{};
  };
  std::vector<uint8_t> after, fresh;
  std::thread([&] {
    run(a);
    after = run(b);
  }).join();
  std::thread([&] { fresh = run(b); }).join();
  ASSERT_FALSE(fresh.empty());
  EXPECT_EQ(after, fresh);
}

}  // namespace
