// tests/fuzz/fuzz_container.cpp — libFuzzer target for the .wcodec reader:
// damaged files whose checksums are all valid.
//
// The CRCs of the header, footer and index reject almost any random damage
// before a parser or decoder sees it, so a plain byte-flipping fuzzer stops
// there. This target edits a valid container and then repairs every CRC,
// as a hostile writer could, so the edits reach the index parser, the model
// records, the table readers and every chunk decoder (reference and AVX-512:
// run once with WCODEC_NO_SIMD=1 as well).
//
// Input: byte 0 picks a seed file, byte 1 the region edited, then records
// of 4 bytes: a 24-bit position (modulo the region's size) and a byte XORed
// into it.
//   region 0: the payload region (header, metadata and chunk payloads; the
//             index stays valid). Oracle: every read that succeeds returns
//             the original bytes.
//   region 1: the decompressed index (original safetensors header, tensor
//             records, models, chunk entries); the harness compresses it
//             again. Oracle: no crash, no sanitizer report, and tensor data
//             returned only where the chunk checksums agree.
// Seeds: generated files (4-bit codes with zero points, a smooth int8
// tensor that takes the tile tools) and, where WCODEC_DATA_DIR holds them,
// small real checkpoints (ternary, int8, BF16) and small convolution
// weights (kernel contexts), and a GGUF file of quantized blocks whose
// tensors take split models (format 2.5: region 1 edits reach the split
// record parser, region 0 edits the split chunk framing and its streams),
// encoded with 16 KiB chunks; and a GGUF file of Q8_0 blocks requantized
// from Q4_1 whose code stream takes a palette (format 2.6); and a GGUF file
// of Q4_1 blocks as llama.cpp quantizes bf16 weights, whose code and
// minimum streams are recoded (format 2.7); and a GGUF file of Q3_K blocks
// whose hmask and qs take one stream of 3-bit codes (format 2.8); and a
// GGUF file of Q4_0 blocks as llama.cpp quantizes them, whose codes take
// the forced zero apart (format 2.9); and U16 and I32 tensors that take
// bytes models (both context modes).
//
// Build (clang): cmake -DWCODEC_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ ...
// Run:           build-fuzz/tests/fuzz/fuzz_container -max_len=256 -max_total_time=600
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "edge_cases.h"
#include "fuzz_util.h"
#include "gguf_quant_util.h"
#include "kernel_rows_testutil.h"
#include "wcodec/container.h"
#include "wcodec/safetensors.h"

namespace {

struct Seed {
  std::string name;
  std::vector<uint8_t> original;   // the safetensors file
  std::vector<uint8_t> container;  // its .wcodec encoding
  std::vector<uint8_t> raw_index;  // the decompressed index
  uint64_t index_offset = 0;
};

uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}
void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t crc32_of(const uint8_t* p, size_t n) { return static_cast<uint32_t>(::crc32(0, p, static_cast<uInt>(n))); }

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "fuzz_container: %s\n", msg.c_str());
  std::abort();
}

void load_seed(const std::string& name, std::vector<uint8_t> original, std::vector<Seed>* out) {
  wcodec::EncodeConfig cfg;
  cfg.chunk_bytes = 16 * 1024;
  auto enc = wcodec::encode_safetensors(original.data(), original.size(), cfg, name);
  if (!enc.ok()) die("cannot encode seed " + name + ": " + enc.status().ToString());
  Seed s;
  s.name = name;
  s.original = std::move(original);
  s.container = std::move(*enc);
  const uint8_t* h = s.container.data();
  s.index_offset = get_u64(h + 32);
  const uint64_t index_size = get_u64(h + 40);
  const uint8_t* ix = h + s.index_offset;
  const uint64_t raw_size = get_u64(ix);
  s.raw_index.resize(raw_size);
  const size_t zn = ZSTD_decompress(s.raw_index.data(), raw_size, ix + 8, index_size - 8);
  if (ZSTD_isError(zn) || zn != raw_size) die("seed " + name + ": index does not decompress");
  out->push_back(std::move(s));
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// Convolution weights (3x3 kernels flattened along a row), which take the
// kernel-context models: the first int8 tensor of 256..320 KiB (the
// smallest with a kernel model of its own; 18 chunks here) and the first
// three packed ternary tensors of 4..40 KB of the isnet checkpoints. Empty
// if a file is missing.
std::vector<uint8_t> conv_kernel_seed(const std::vector<uint8_t>& int8_file,
                                      const std::vector<uint8_t>& tern_file) {
  std::vector<wcodec::TensorData> picked;
  for (const auto* f : {&int8_file, &tern_file}) {
    if (f->empty()) return {};
    auto h = wcodec::parse_safetensors_header(f->data(), f->size(), f->size(), "seed");
    if (!h.ok()) return {};
    const bool i8 = f == &int8_file;
    const uint64_t lo = i8 ? 256u << 10 : 4096, hi = i8 ? 320u << 10 : 40960;
    const int most = i8 ? 1 : 3;
    int n = 0;
    for (const auto& t : h->tensors) {
      const bool conv = t.shape.size() == 2 && t.dtype == (i8 ? wcodec::DType::kI8 : wcodec::DType::kU8);
      if (!conv || t.nbytes() < lo || t.nbytes() > hi || n == most) continue;
      const uint8_t* d = f->data() + h->data_start + t.begin;
      picked.push_back({t.name, t.dtype, t.shape, std::vector<uint8_t>(d, d + t.nbytes())});
      ++n;
    }
  }
  auto built = wcodec::build_safetensors(picked, std::nullopt);
  return built.ok() ? std::move(*built) : std::vector<uint8_t>{};
}

// Tensors that take bytes models (one symbol per byte plane): U16 values
// with few distinct values (weights' magnitudes on a coarse grid, as block
// scales are) and I32 values in runs of zeros (both context modes), of
// several chunks each whose lanes differ in size.
std::vector<uint8_t> bytes_model_seed(const std::vector<float>& w) {
  const size_t n = std::min<size_t>(w.size(), 3 * 8192 + 77);
  std::vector<uint8_t> u16(2 * n), i32(4 * n);
  for (size_t i = 0; i < n; ++i) {
    const auto a = static_cast<uint16_t>(std::lround(std::fabs(w[i]) * 2000.0f));
    u16[2 * i] = static_cast<uint8_t>(a);
    u16[2 * i + 1] = static_cast<uint8_t>(a >> 8);
    const int32_t v = std::fabs(w[i]) > 0.04f ? static_cast<int32_t>(std::lround(w[i] * 30000.0f)) : 0;
    std::memcpy(&i32[4 * i], &v, 4);
  }
  std::vector<wcodec::TensorData> ts = {
      {"scales", wcodec::DType::kU16, {n / 77, 77}, std::vector<uint8_t>(u16.begin(), u16.begin() + 2 * (n / 77) * 77)},
      {"offsets", wcodec::DType::kI32, {n / 77, 77}, std::vector<uint8_t>(i32.begin(), i32.begin() + 4 * (n / 77) * 77)}};
  auto built = wcodec::build_safetensors(ts, std::nullopt);
  if (!built.ok()) die("bytes seed: " + built.status().ToString());
  return std::move(*built);
}

const std::vector<Seed>& seeds() {
  static const std::vector<Seed> s = [] {
    std::vector<Seed> v;
    load_seed("model_like_int4", wctest::make_named_model_like_file(), &v);
    load_seed("smooth_int8", wctest::make_smooth_int8_file(), &v);
#ifdef WCODEC_DATA_DIR
    for (const char* f : {"stories260K.rtn-ternary", "stories260K.rtn-int8", "stories260K.bf16",
                          "stories260K.rtn-int4"}) {
      auto bytes = read_all(std::string(WCODEC_DATA_DIR) + "/" + f + ".safetensors");
      if (!bytes.empty()) load_seed(f, std::move(bytes), &v);
    }
    auto kern = conv_kernel_seed(read_all(std::string(WCODEC_DATA_DIR) + "/isnet-medium.rtn-int8.safetensors"),
                                 read_all(std::string(WCODEC_DATA_DIR) + "/isnet-medium.rtn-ternary.safetensors"));
    if (!kern.empty()) load_seed("isnet_conv_kernels", std::move(kern), &v);
    const auto w = wctest::real_weights(WCODEC_DATA_DIR);
#else
    const std::vector<float> w;
#endif
    // A GGUF source with split models (format 2.5): Q4_K and Q8_0 tensors of
    // several chunks each, a Q6_K one and an F32 one.
    load_seed("gguf_split",
              wctest::make_quant_gguf({{"blk.0.ffn_down.weight", wcodec::kGgmlTypeQ4_K, 1536, 48},
                                       {"blk.0.attn_q.weight", wcodec::kGgmlTypeQ8_0, 576, 40},
                                       {"blk.0.ffn_up.weight", wcodec::kGgmlTypeQ6_K, 1536, 8},
                                       {"output_norm.weight", wcodec::kGgmlTypeF32, 576, 1}},
                                      w.empty() ? wctest::gaussian_weights(1 << 18, 3) : w),
              &v);
    // Q8_0 requantized from Q4_1 (at most 16 codes a block), whose code
    // stream takes a palette (format 2.6): region 1 edits reach the palette
    // record, region 0 its three parts and the palette data checks.
    auto pal = wctest::make_quant_gguf({{"blk.0.attn_k.weight", wcodec::kGgmlTypeQ8_0, 576, 160},
                                        {"output_norm.weight", wcodec::kGgmlTypeF32, 576, 1}},
                                       w.empty() ? wctest::gaussian_weights(1 << 18, 5) : w);
    wctest::requantize_q8_0_from_q4_1(pal);
    load_seed("gguf_palette", std::move(pal), &v);
    // Q4_1 quantized as llama.cpp does from bf16 weights, whose codes and
    // minimums take recoded streams (format 2.7): region 1 edits reach the
    // recode records (kind, d_off, m_off), region 0 the rotated code parts,
    // the bf16 parts and the bf16 -> fp16 checks.
    auto rc = wctest::make_quant_gguf({{"blk.0.ffn_up.weight", wcodec::kGgmlTypeQ4_1, 576, 240},
                                       {"output_norm.weight", wcodec::kGgmlTypeF32, 576, 1}},
                                      w.empty() ? wctest::gaussian_weights(1 << 18, 9) : w);
    wctest::requantize_q4_1_from_bf16(rc, w.empty() ? wctest::gaussian_weights(1 << 18, 9) : w);
    load_seed("gguf_recode", std::move(rc), &v);
    // Q3_K whose hmask and qs take one 3-bit code stream (format 2.8):
    // region 1 edits reach its recode record, region 0 the code part and
    // the code range check (test_gguf_q3codes checks that it is taken).
    load_seed("gguf_q3codes", wctest::q3_k_fuzz_seed(), &v);
    // Q4_0 whose codes take the forced zero apart (format 2.9): region 1
    // edits reach its recode record and derived streams, region 0 the
    // position and code parts and the join's checks (test_gguf_zeropos
    // checks that it is taken).
    load_seed("gguf_zeropos", wctest::q4_0_fuzz_seed(), &v);
    // Bytes models: region 0 edits reach the bytes decoders' streams
    // (chunk_decode_hwy_bytes.cpp, chunk_decode_fast_bytes.cpp), region 1
    // their model records (test_bytes_decoder checks the decoders).
    load_seed("bytes_models", bytes_model_seed(w.empty() ? wctest::gaussian_weights(1 << 18, 13) : w), &v);
#ifdef WCODEC_DATA_DIR
    // Ternary kernels whose rows take kernel-row symbols (format 2.10), in
    // chunks whose last step leaves lanes idle: region 1 edits reach the
    // model record's nbr_mode 4 rules and tables, region 0 the streams
    // (test_kernel_rows checks that the mode is taken).
    auto krow = wctest::kernel_rows_file(read_all(std::string(WCODEC_DATA_DIR) + "/isnet-medium.rtn-ternary.safetensors"));
    if (!krow.empty()) load_seed("isnet_kernel_rows", std::move(krow), &v);
#endif
    return v;
  }();
  return s;
}

// A container from a payload region (header, metadata, payloads) and a
// decompressed index, with the header, index and footer CRCs made valid.
std::vector<uint8_t> assemble(const std::vector<uint8_t>& payload_region, const std::vector<uint8_t>& raw_index) {
  std::vector<uint8_t> z(ZSTD_compressBound(raw_index.size()));
  const size_t zn = ZSTD_compress(z.data(), z.size(), raw_index.data(), raw_index.size(), 1);
  if (ZSTD_isError(zn)) die("zstd failed");
  std::vector<uint8_t> f(payload_region);
  const uint64_t index_off = f.size();
  std::vector<uint8_t> sec(8 + zn);
  put_u64(sec.data(), raw_index.size());
  std::memcpy(sec.data() + 8, z.data(), zn);
  f.insert(f.end(), sec.begin(), sec.end());
  const uint32_t index_crc = crc32_of(sec.data(), sec.size());
  put_u64(f.data() + 32, index_off);
  put_u64(f.data() + 40, sec.size());
  put_u32(f.data() + 80, index_crc);
  put_u32(f.data() + 124, crc32_of(f.data(), 124));
  uint8_t foot[32];
  put_u64(foot, index_off);
  put_u64(foot + 8, sec.size());
  put_u32(foot + 16, index_crc);
  std::memcpy(foot + 20, f.data() + 124, 4);
  put_u32(foot + 24, crc32_of(f.data(), f.size()));
  std::memcpy(foot + 28, "CDCW", 4);
  f.insert(f.end(), foot, foot + 32);
  return f;
}

// Reads [off, off + len) and, when it succeeds, checks the bytes against the
// original where the oracle applies (from data_from on).
void read_and_check(const wcodec::Reader& r, const Seed& s, uint64_t off, uint64_t len, uint64_t data_from) {
  if (off >= r.original_size()) return;
  len = std::min<uint64_t>(len, r.original_size() - off);
  std::vector<uint8_t> buf(len);
  if (!r.read(off, len, buf.data()).ok()) return;
  if (r.original_size() != s.original.size()) return;
  for (uint64_t i = std::max(off, data_from); i < off + len; ++i)
    if (buf[i - off] != s.original[i])
      die("seed " + s.name + ": read at " + std::to_string(off) + " returned a wrong byte at " + std::to_string(i));
}

}  // namespace

// The libFuzzer entry point; the replay test links both targets under other
// names (WCODEC_FUZZ_ENTRY).
#ifndef WCODEC_FUZZ_ENTRY
#define WCODEC_FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif
extern "C" int WCODEC_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  const auto& all = seeds();
  if (size < 2 || all.empty()) return 0;
  const Seed& s = all[data[0] % all.size()];
  const int region = data[1] % 2;
  std::vector<uint8_t> payload(s.container.begin(), s.container.begin() + static_cast<long>(s.index_offset));
  std::vector<uint8_t> ix = s.raw_index;
  std::vector<uint8_t>& target = region == 0 ? payload : ix;
  uint64_t first_edit = UINT64_MAX;
  for (size_t i = 2; i + 4 <= size; i += 4) {
    const uint32_t pos = (data[i] | data[i + 1] << 8 | data[i + 2] << 16) % target.size();
    target[pos] ^= data[i + 3];
    first_edit = std::min<uint64_t>(first_edit, pos);
  }
  const std::vector<uint8_t> file = assemble(payload, ix);
  const int fd = wcfuzz::memfd_with(file);
  if (fd < 0) die("cannot write the container to a memfd");
  auto r = wcodec::Reader::open(wcfuzz::memfd_path(fd));
  if (r.ok()) {
    const wcodec::Reader& rd = **r;
    // Region 0 keeps the index, so every byte must be the original's. With
    // an edited index the stored safetensors header may legitimately differ
    // (it is data); the tensor bytes may not.
    const uint64_t data_from = region == 0 ? 0 : rd.data_start();
    // The chunks whose payload holds the first edit.
    if (region == 0 && first_edit != UINT64_MAX) {
      for (size_t c = 0; c < rd.num_chunks(); ++c) {
        const auto& e = rd.chunk(c);
        if (first_edit >= e.file_offset && first_edit < e.file_offset + e.stored_size)
          read_and_check(rd, s, e.decoded_offset, e.decoded_size, data_from);
      }
    }
    // The first 64 KiB (the whole of the small seeds) and 40 KiB at a spot
    // chosen by the input.
    read_and_check(rd, s, 0, 64 * 1024, data_from);
    const uint64_t spot = (size >= 6 ? (data[2] | data[3] << 8 | data[4] << 16) : 0) % (rd.original_size() + 1);
    read_and_check(rd, s, spot, 40 * 1024, data_from);
  }
  close(fd);
  return 0;
}
