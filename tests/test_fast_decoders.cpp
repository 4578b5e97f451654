// tests/test_fast_decoders.cpp — the portable fast decoders of the scalar
// decoder path (codec/decompress/chunk_decode_fast.h) against the reference
// decoders (chunk_decode.h), chunk by chunk: on every real model file of
// ../shared/data and the generated edge cases, byte for byte; and on
// damaged streams (bytes flipped in the lane states and the word stream,
// words swapped, streams cut short, lengthened or of odd length, a raw
// section one byte short), the same accept / reject and, where both accept,
// the same bytes. The scalar path is no longer the reference itself, so
// this is its equality test whatever path the CPU would pick.
// Thread-safety: single-threaded test code.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bytes.h"
#include "chunk_decode.h"
#include "chunk_decode_fast.h"
#include "chunk_decode_fast_i.h"
#include "chunk_decode_simd.h"
#include "chunk_model.h"
#include "edge_cases.h"
#include "sanitizer.h"
#include "tensor_encode.h"
#include "tensor_model.h"
#include "chunk_payload_testutil.h"
#include "testutil.h"
#include "wcodec/container.h"
#include "wcodec/safetensors.h"

namespace {

using namespace wcodec;

using Parsed = wctest::ChunkPayload;
bool parse_payload(const TensorGeometry& g, uint64_t index, const std::vector<uint8_t>& p, Parsed* out) {
  return wctest::parse_chunk_payload(g, index, p, out);
}

#if WCODEC_ASAN
constexpr bool kStopWhenCovered = true;  // the ternary files: stop once every asserted condition holds
constexpr uint64_t kMaxTensor = 256u << 10;
constexpr int kMutations = 30;  // per chunk (AgreeWithReferenceOnRandomlyDamagedStreams)
#else
constexpr bool kStopWhenCovered = false;
constexpr uint64_t kMaxTensor = 512u << 10;
constexpr int kMutations = 60;
#endif

struct Counts {
  int float_chunks = 0, float_ragged = 0, float_joint = 0, float_tail = 0, f32 = 0;
  int int_chunks = 0, int_nibble = 0, int_u8 = 0, int_ragged = 0, int_escapes = 0, int_tiles = 0;
  // Ternary chunks: decoded by the ternary loop (tern_loop) and by the
  // general int loop (tern_general: the same chunks with the model's tern3
  // hidden, and chunks the ternary loop declines); nbr_modes (bit m) and
  // scale classes seen by the ternary loop; format 1 models.
  int tern = 0, tern_loop = 0, tern_general = 0, tern_modes = 0, tern_scaled = 0, tern_f1 = 0;
  int tern_declined = 0;  // tern3 present, the ternary loop declines (tile map, ragged lanes, narrow rows)
  std::set<int> tern_forms;  // by the ternary loop: 16 x nbr_mode + (ns > 1) + 2 (nb > 1)
  int damaged = 0, rejected = 0;
};

bool same_rect(const ChunkView& cv) {
  const LaneRect a = lane_rect(cv.h, cv.w, 0);
  bool same = a.h * a.w > 0;
  for (uint32_t l = 1; l < kLanes; ++l) {
    const LaneRect b = lane_rect(cv.h, cv.w, l);
    same &= a.w == b.w && a.h == b.h;
  }
  return same;
}

// The reference result (false: rejected) and the fast decoder's (1, 0,
// -1) for one chunk's stream and raw section.
bool reference_decode(const ModelView& mv, const ChunkView& cv, const Parsed& ps, const uint8_t* rans,
                      uint32_t rans_len, uint64_t raw_len, std::vector<uint8_t>* out) {
  const uint64_t n = uint64_t{cv.h} * cv.w;
  if (mv.kind == ModelKind::kFloat) {
    std::vector<uint16_t> e(n);
    std::vector<uint8_t> sm(n);
    return decode_float_chunk(mv, cv, rans, rans_len, ps.raw, raw_len, out->data(), e.data(), sm.data(), ps.tail);
  }
  std::vector<int32_t> res(n), tile(kTile * kTile);
  return decode_int_residuals(mv, cv, rans, rans_len, res.data()) &&
         int_finish_chunk(mv, cv, ps.map, out->data(), res.data(), tile.data());
}
int fast_decode(const ModelView& mv, const ChunkView& cv, const Parsed& ps, const uint8_t* rans, uint32_t rans_len,
                uint64_t raw_len, std::vector<uint8_t>* out) {
  const uint64_t n = uint64_t{cv.h} * cv.w;
  std::vector<uint8_t> lm(fast_lane_major_bytes(cv));
  if (mv.kind == ModelKind::kFloat)
    return decode_float_chunk_fast(mv, cv, rans, rans_len, ps.raw, raw_len, out->data(), lm.data(), ps.tail);
  std::vector<int32_t> res(n), tile(kTile * kTile);
  return decode_int_chunk_fast(mv, cv, ps.map, rans, rans_len, out->data(), res.data(), tile.data(), lm.data());
}

// Damaged variants of one chunk's stream (v: which damage).
constexpr int kDamages = 11;
std::vector<uint8_t> damage(const Parsed& ps, int v, std::mt19937& rng, uint64_t* raw_len) {
  std::vector<uint8_t> s(ps.rans, ps.rans + ps.rans_len);
  *raw_len = ps.raw_len;
  const size_t L = s.size();
  auto at = [&](size_t lo) { return lo + rng() % (L - lo); };
  switch (v) {
    case 0: s[rng() % (4 * kLanes)] ^= static_cast<uint8_t>(1 + rng() % 255); break;  // a lane state
    case 1: s[at(4 * kLanes < L ? 4 * kLanes : 0)] ^= static_cast<uint8_t>(1 + rng() % 255); break;
    case 2:  // three words of the stream
      for (int k = 0; k < 3; ++k) s[at(4 * kLanes < L ? 4 * kLanes : 0)] ^= static_cast<uint8_t>(1u << (rng() % 8));
      break;
    case 3:  // two words swapped
      if (L >= 4 * kLanes + 4) {
        const size_t a = 4 * kLanes + 2 * (rng() % ((L - 4 * kLanes) / 2));
        const size_t b = 4 * kLanes + 2 * (rng() % ((L - 4 * kLanes) / 2));
        std::swap(s[a], s[b]);
        std::swap(s[a + 1], s[b + 1]);
      }
      break;
    case 4: s.resize(L >= 2 ? L - 2 : 0); break;                       // one word short
    case 5: s.resize(L >= 64 ? L - 64 : 0); break;                     // 32 words short
    case 6: s.resize(4 * kLanes < L ? 4 * kLanes : L); break;          // the lane states only
    case 7: s.resize(L - 1); break;                                    // odd length
    case 8: s.push_back(0), s.push_back(0); break;                     // a word left over
    case 9: s.resize(L > 4 * kLanes + 7 ? 4 * kLanes - 2 : 0); break;  // shorter than the states
    default: *raw_len = ps.raw_len ? ps.raw_len - 1 : 0; break;        // raw section one byte short
  }
  return s;
}

void compare_tensor(const TensorInfo& t, const uint8_t* data, const std::string& what, uint64_t t_index,
                    Counts* k, const EncodeOptions& opt = EncodeOptions{}) {
  auto r = encode_tensor(t, data, AuxInput{}, opt);
  ASSERT_TRUE(r.ok()) << what << ": " << r.status().ToString();
  const EncodedTensor& et = *r;
  if (et.model.kind != ModelKind::kFloat && et.model.kind != ModelKind::kInt) return;
  std::shared_ptr<const TensorModel::VectorTables> hold;
  const ModelView mv0 = et.model.view(&hold);
  const bool tern = mv0.kind == ModelKind::kInt && mv0.ip.sub == kIntTernary;
  // Ternary models with tern3: once as they are (the ternary loop), once
  // with tern3 hidden (the general int loop).
  ModelView general = mv0;
  general.tern3 = nullptr;
  for (const ModelView* pv : {&mv0, static_cast<const ModelView*>(&general)}) {
  const ModelView& mv = *pv;
  if (pv == &general && !(tern && mv0.tern3)) break;
  for (uint64_t i = 0; i < et.chunks.size(); ++i) {
    const auto& c = et.chunks[i];
    if (c.method != ChunkMethod::kModel) continue;
    Parsed ps;
    ASSERT_TRUE(parse_payload(et.geom, i, c.payload, &ps)) << what;
    uint64_t row0, col0, h, w;
    et.geom.chunk_rect(i, &row0, &col0, &h, &w);
    const ChunkView cv{static_cast<uint32_t>(h), static_cast<uint32_t>(w), static_cast<uint32_t>(row0),
                       static_cast<uint32_t>(col0), static_cast<uint32_t>(et.geom.cols)};
    const std::string wc = what + " chunk " + std::to_string(i);
    std::vector<uint8_t> ref(c.decoded_size, 0x11), fast(c.decoded_size, 0x22);
    ASSERT_TRUE(reference_decode(mv, cv, ps, ps.rans, ps.rans_len, ps.raw_len, &ref)) << wc;
    const int f = fast_decode(mv, cv, ps, ps.rans, ps.rans_len, ps.raw_len, &fast);
    if (f < 0) continue;  // declined: the reference decodes it
    ASSERT_EQ(f, 1) << wc << ": the fast decoder rejects a valid chunk";
    ASSERT_EQ(ref, fast) << wc << ": the fast decoder differs from the reference";
    ASSERT_EQ(chunk_hash(fast.data(), fast.size()), c.xxh3) << wc;
    const bool ragged = !same_rect(cv);
    if (mv.kind == ModelKind::kFloat) {
      ++k->float_chunks;
      k->float_ragged += ragged;
      k->float_joint += float_joint(mv.fp);
      k->float_tail += ps.tail;
      k->f32 += mv.fp.elem_bytes == 4;
    } else {
      ++k->int_chunks;
      k->int_ragged += ragged;
      k->int_nibble += mv.ip.sub == kIntNibble;
      k->int_u8 += mv.ip.sub == kIntU8;
      k->int_tiles += ps.map != nullptr;
      if (tern) {
        ++k->tern;
        std::vector<int32_t> res(uint64_t{cv.h} * cv.w);
        std::vector<uint8_t> o(c.decoded_size);
        const int tl = fast::decode_tern_chunk_fast(mv, cv, ps.map, ps.rans, ps.rans_len, o.data(), res.data());
        if (tl == 1) {
          ++k->tern_loop;
          k->tern_modes |= 1 << mv.ip.nbr_mode;
          k->tern_scaled += mv.ip.ns > 1;
          k->tern_forms.insert(16 * mv.ip.nbr_mode + (mv.ip.ns > 1) + 2 * (mv.ip.nb > 1));
        } else {
          ASSERT_EQ(tl, -1) << wc << ": the ternary loop rejects a valid chunk";
          ++k->tern_general;
          k->tern_declined += mv.tern3 != nullptr;
        }
        k->tern_f1 += !opt.format_2_1;
      }
    }
    // Damaged streams: the same verdict, and the same bytes where both
    // accept (a flip may leave a valid stream). Three of the damages per
    // chunk, in turn over the chunks (every damage on every file), to keep
    // the suite short.
    std::mt19937 rng(static_cast<uint32_t>(i * 7919 + c.decoded_size));
    for (int j = 0; j < 3; ++j) {
      const int v = static_cast<int>((i + t_index + 4 * j) % kDamages);
      uint64_t raw_len = 0;
      const std::vector<uint8_t> bad = damage(ps, v, rng, &raw_len);
      std::vector<uint8_t> a(c.decoded_size, 0x33), b(c.decoded_size, 0x44);
      const uint32_t bl = static_cast<uint32_t>(bad.size());
      const bool r_ok = reference_decode(mv, cv, ps, bad.data(), bl, raw_len, &a);
      const int f_ok = fast_decode(mv, cv, ps, bad.data(), bl, raw_len, &b);
      ASSERT_EQ(r_ok ? 1 : 0, f_ok) << wc << " damage " << v << ": the fast decoder and the reference disagree";
      if (r_ok) {
        ASSERT_EQ(a, b) << wc << " damage " << v;
      }
      ++k->damaged;
      k->rejected += !r_ok;
    }
  }
  }
}

// format1: also the models of format 1 (format_2_1 off: no nbr_modes 2, 3).
void compare_file(const std::vector<uint8_t>& f, const std::string& what, Counts* k, bool format1 = false) {
  auto h = parse_safetensors_header(f.data(), f.size(), f.size(), what);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  uint64_t ti = 0;
  for (const auto& t : h->tensors) {
    ++ti;
    if (t.nbytes() > kMaxTensor) continue;
    if (kStopWhenCovered && format1 && k->tern_loop > 50 && k->tern_general > 50 && k->tern_f1 > 10 &&
        k->tern_modes == 0xF && k->tern_scaled > 0)
      break;
    const int tern_before = k->tern;
    compare_tensor(t, f.data() + h->data_start + t.begin, what + ": " + t.name, ti, k);
    if (testing::Test::HasFatalFailure()) return;
    // A ternary model: its format 1 form too, until 40 such chunks were
    // compared (the encoder's model search is what takes the time).
    if (format1 && k->tern > tern_before && k->tern_f1 < 40) {
      EncodeOptions o;
      o.format_2_1 = false;
      compare_tensor(t, f.data() + h->data_start + t.begin, what + " (format 1): " + t.name, ti, k, o);
      if (testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(FastDecoders, EqualReferenceOnRealFiles) {
  Counts k;
  int files = 0;
  for (const auto& p : wctest::data_safetensors_files()) {
    const std::string name = p.filename().string();
    compare_file(wctest::read_file(p), name, &k, name.find("ternary") != std::string::npos);
    if (HasFatalFailure()) return;
    ++files;
  }
  if (files == 0) GTEST_SKIP() << "no model files in " << wctest::data_dir();
  std::printf("float chunks %d (ragged lanes %d, joint %d, raw tail %d, 4-byte %d); int chunks %d (4-bit %d, "
              "8-bit unsigned %d, ragged %d, tile maps %d); damaged %d, rejected %d\n",
              k.float_chunks, k.float_ragged, k.float_joint, k.float_tail, k.f32, k.int_chunks, k.int_nibble,
              k.int_u8, k.int_ragged, k.int_tiles, k.damaged, k.rejected);
  std::printf("ternary chunks %d (ternary loop %d: nbr_modes 0x%x, %d with scale classes; general loop %d, "
              "%d declined by the ternary loop; format 1 models %d)\n",
              k.tern, k.tern_loop, k.tern_modes, k.tern_scaled, k.tern_general, k.tern_declined, k.tern_f1);
  EXPECT_GT(k.float_chunks, 50);
  EXPECT_GT(k.float_ragged, 5) << "float chunks whose lanes differ in size";
  EXPECT_GT(k.float_joint, 20) << "joint-symbol float chunks";
  EXPECT_GT(k.float_tail, 10) << "raw tail chunks";
  EXPECT_GT(k.f32, 5) << "4-byte float chunks";
  EXPECT_GT(k.int_chunks, 50);
  EXPECT_GT(k.int_nibble, 20) << "4-bit code chunks";
  EXPECT_GT(k.int_u8, 20) << "8-bit unsigned code chunks (packed in one pass by the fast decoder)";
  EXPECT_GT(k.rejected, k.damaged / 2) << "the damage should mostly be detected";
  // isnet-medium.rtn-ternary: activity (format 1), sign-neighbour,
  // column-phase and kernel contexts, some with scale classes.
  EXPECT_GT(k.tern_loop, 50) << "ternary chunks decoded by the ternary loop";
  EXPECT_EQ(k.tern_modes, 0xF) << "nbr_modes the ternary loop decoded";
  EXPECT_GT(k.tern_scaled, 0) << "ternary chunks with scale classes";
  EXPECT_GT(k.tern_general, 50) << "ternary chunks decoded by the general int loop";
  EXPECT_GT(k.tern_f1, 10) << "ternary chunks of format 1 models";
}

TEST(FastDecoders, EqualReferenceOnEdgeCases) {
  Counts k;
  for (const auto& c : wctest::make_edge_cases()) {
    compare_file(c.file, c.name, &k);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(k.float_chunks + k.int_chunks, 0);
}

// Synthetic ternary tensors (2-bit codes packed in U8 bytes): i.i.d.
// codes, codes whose density follows the row and the column (scale
// classes), conv-like rows (3x3 kernels flattened: the periodic forms);
// format 1 and 2.1+ models; shapes whose lanes are of unequal rectangles or
// do not start on a byte, rows of 4 codes, a single row.
TEST(FastDecoders, EqualReferenceOnSyntheticTernary) {
  wctest::SyntheticTernaryGen synth(3);
  Counts k;
  const uint64_t shapes[][2] = {{96, 576}, {64, 36}, {40, 1000}, {7, 4096}, {33, 12}, {5, 4}, {1, 4000}};
  for (int gen = 0; gen < 3; ++gen)
    for (const auto& shape : shapes)
      for (bool f21 : {false, true}) {
        const uint64_t rows = shape[0], cols = shape[1];
        const wctest::SyntheticTernary st = synth.next(rows, cols, gen);
        EncodeOptions opt;
        opt.chunk_bytes = 4096;
        opt.format_2_1 = f21;
        compare_tensor(st.info, st.bytes.data(),
                       "gen " + std::to_string(gen) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                           (f21 ? "" : " (format 1)"),
                       static_cast<uint64_t>(gen), &k, opt);
        if (HasFatalFailure()) return;
      }
  std::string seen;
  for (int f : k.tern_forms) seen += " " + std::to_string(f);
  std::printf("ternary chunks %d (ternary loop %d, forms (16 x nbr_mode + scaled + 2 x activity classes):%s; "
              "general loop %d, %d declined by the ternary loop); damaged %d, rejected %d\n",
              k.tern, k.tern_loop, seen.c_str(), k.tern_general, k.tern_declined, k.damaged, k.rejected);
  EXPECT_GT(k.tern_loop, 10);
  EXPECT_GT(k.tern_declined, 0) << "chunks with lanes of unequal rectangles";
  EXPECT_TRUE(k.tern_forms.count(1)) << "activity contexts, one class, scale classes:" << seen;
  EXPECT_TRUE(k.tern_forms.count(3)) << "activity contexts, several classes, scale classes:" << seen;
  EXPECT_TRUE(k.tern_forms.count(32) || k.tern_forms.count(33)) << "column-phase contexts:" << seen;
  EXPECT_GT(k.rejected, k.damaged / 2) << "the damage should mostly be detected";
}

// Fuzz-style: many random mutations of a few chunks of each kind (the
// small stories260K files: BF16 and F32 floats, int8 and 4-bit codes; F16
// joint symbols of isnet-medium): random
// byte flips anywhere in the stream, random truncations, random lengths of
// random bytes. Same verdict and bytes as the reference every time.
TEST(FastDecoders, AgreeWithReferenceOnRandomlyDamagedStreams) {
  struct Chunk {
    EncodedTensor et;
    uint64_t index;
  };
  std::vector<Chunk> chunks;
  std::vector<std::vector<uint8_t>> keep;
  auto add_file = [&](const std::string& name, int per_file) {
    const auto path = wctest::data_dir() / name;
    if (!std::filesystem::exists(path)) return;
    keep.push_back(wctest::read_file(path));
    const auto& f = keep.back();
    auto h = parse_safetensors_header(f.data(), f.size(), f.size(), name);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    int taken = 0;
    for (const auto& t : h->tensors) {
      if (taken >= per_file || t.nbytes() > (256u << 10)) continue;
      auto r = encode_tensor(t, f.data() + h->data_start + t.begin, AuxInput{}, EncodeOptions{});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      for (uint64_t i = 0; i < r->chunks.size(); ++i)
        if (r->chunks[i].method == ChunkMethod::kModel) {
          chunks.push_back(Chunk{*r, i});
          ++taken;
          break;
        }
    }
  };
  for (const char* f : {"stories260K.bf16.safetensors", "stories260K.f32.safetensors",
                        "stories260K.rtn-int8.safetensors", "stories260K.rtn-int4.safetensors",
                        "silero_vad_16k.bf16.safetensors", "isnet-medium.f16.safetensors",
                        "stories260K.rtn-ternary.safetensors", "isnet-medium.rtn-ternary.safetensors"})
    add_file(f, 3);
  if (chunks.empty()) GTEST_SKIP() << "no model files in " << wctest::data_dir();
  std::mt19937 rng(12345);
  int compared = 0, accepted = 0;
  for (const Chunk& ch : chunks) {
    const EncodedTensor& et = ch.et;
    const auto& c = et.chunks[ch.index];
    Parsed ps;
    ASSERT_TRUE(parse_payload(et.geom, ch.index, c.payload, &ps));
    uint64_t row0, col0, h, w;
    et.geom.chunk_rect(ch.index, &row0, &col0, &h, &w);
    const ChunkView cv{static_cast<uint32_t>(h), static_cast<uint32_t>(w), static_cast<uint32_t>(row0),
                       static_cast<uint32_t>(col0), static_cast<uint32_t>(et.geom.cols)};
    std::shared_ptr<const TensorModel::VectorTables> hold;
    const ModelView mv = et.model.view(&hold);
    std::vector<uint8_t> probe(c.decoded_size);
    if (fast_decode(mv, cv, ps, ps.rans, ps.rans_len, ps.raw_len, &probe) < 0) continue;
    for (int it = 0; it < kMutations; ++it) {
      std::vector<uint8_t> s(ps.rans, ps.rans + ps.rans_len);
      const int kind = static_cast<int>(rng() % 4);
      if (kind == 0 || kind == 1) {  // 1-4 flips
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < flips; ++k) s[rng() % s.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
      } else if (kind == 2) {  // cut anywhere
        s.resize(rng() % s.size());
      } else {  // random bytes of a random even length
        s.resize(2 * (rng() % (s.size() / 2 + 64)));
        for (auto& b : s) b = static_cast<uint8_t>(rng());
      }
      std::vector<uint8_t> a(c.decoded_size, 0x33), b(c.decoded_size, 0x44);
      const bool r_ok = reference_decode(mv, cv, ps, s.data(), static_cast<uint32_t>(s.size()), ps.raw_len, &a);
      const int f_ok = fast_decode(mv, cv, ps, s.data(), static_cast<uint32_t>(s.size()), ps.raw_len, &b);
      ASSERT_EQ(r_ok ? 1 : 0, f_ok) << "mutation " << it << " of a chunk of " << et.geom.rows << "x" << et.geom.cols;
      if (r_ok) {
        ASSERT_EQ(a, b);
        ++accepted;
      }
      ++compared;
    }
  }
  EXPECT_GE(compared, 15 * kMutations) << "chunks of every kind";
  std::printf("%d mutated streams compared, %d accepted by both\n", compared, accepted);
}

// The decoders run in the scratch the reader sizes with
// simd_lane_major_bytes (whatever path): it must hold theirs.
TEST(FastDecoders, ScratchFitsTheReadersBuffer) {
  for (uint32_t h : {1u, 2u, 3u, 31u, 32u, 33u, 64u, 255u, 1000u})
    for (uint32_t w : {1u, 2u, 7u, 8u, 9u, 63u, 64u, 257u, 4096u, 10000u}) {
      const ChunkView cv{h, w, 0, 0, w};
      EXPECT_LE(fast_lane_major_bytes(cv), simd_lane_major_bytes(cv)) << h << "x" << w;
      uint64_t steps = 0;
      for (uint32_t l = 0; l < kLanes; ++l) {
        const LaneRect r = lane_rect(h, w, l);
        steps = std::max<uint64_t>(steps, uint64_t{r.h} * r.w);
      }
      EXPECT_GE(fast_lane_major_bytes(cv), steps * kLanes * 4) << h << "x" << w;
    }
}

}  // namespace
