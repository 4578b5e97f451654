// tests/gguf_split_testutil.h — the steps the GGUF split-model suites
// (test_gguf_split, test_gguf_palette, test_gguf_recode, test_gguf_q3codes,
// test_gguf_zeropos) share: real
// weights to quantize (stories260K's F32 tensors, or Gaussian ones where
// the data directory is missing), encoding a GGUF file in memory with a
// given configuration, and reading a container back: every byte through
// Reader::read, and optionally every chunk through decode_chunk and the
// device plan (split chunks arrive decoded on the host, as kReady); the
// recode kinds a tensor uses and the file's format version; the wcodec
// tool's decode of a file on every CPU path.
//
// Thread-safety: the weights are built once per seed (function-local
// statics); the rest are pure functions. Single-threaded tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "device_plan.h"
#include "gguf_quant_util.h"
#include "reader_i.h"
#include "split_model.h"
#include "tensor_decode.h"
#include "testutil.h"
#include "wcodec/container.h"
#include "wcodec/cpu.h"
#include "wcodec/encode.h"

namespace wctest {

// stories260K's weights, or 1 Mi Gaussian ones drawn with Seed.
template <unsigned Seed>
const std::vector<float>& split_test_weights() {
  static const std::vector<float> w = [] {
    auto r = real_weights(WCODEC_DATA_DIR);
    return r.empty() ? gaussian_weights(1 << 20, Seed) : r;
  }();
  return w;
}

// `file` (a GGUF file) encoded in memory; empty (and a test failure) when
// the encoder refuses it.
inline std::vector<uint8_t> encode_gguf(const std::vector<uint8_t>& file, const wcodec::EncodeConfig& cfg,
                                        const char* name) {
  auto r = wcodec::encode_safetensors(file.data(), file.size(), cfg, name);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(*r) : std::vector<uint8_t>{};
}

// `file` encoded in chunks of `chunk_bytes`, with the recoded streams
// (formats 2.7-2.9) or without them.
inline std::vector<uint8_t> encode_gguf_chunks(const std::vector<uint8_t>& file, uint64_t chunk_bytes,
                                               bool recode = true) {
  wcodec::EncodeConfig cfg;
  cfg.chunk_bytes = chunk_bytes;
  cfg.split_recode = recode;
  return encode_gguf(file, cfg, "t.gguf");
}

enum class ReadBack { kBytes, kEveryChunkAndPlan };

// Opens `enc` and checks that it reads back as `file`; with
// kEveryChunkAndPlan also each chunk by decode_chunk and the device plan of
// all chunks. Returns the reader (null when it does not open).
inline std::unique_ptr<wcodec::Reader> read_back_gguf(const std::vector<uint8_t>& enc,
                                                      const std::vector<uint8_t>& file, const char* name,
                                                      ReadBack how) {
  using namespace wcodec;
  auto rd = Reader::open_memory(enc.data(), enc.size(), name);
  EXPECT_TRUE(rd.ok()) << rd.status().ToString();
  if (!rd.ok()) return nullptr;
  std::vector<uint8_t> back(file.size(), 0xEE);
  const Status st = (*rd)->read(0, back.size(), back.data());
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(back == file) << "decoded bytes differ";
  if (how == ReadBack::kBytes) return std::move(rd).value();
  std::vector<size_t> all;
  for (size_t i = 0; i < (*rd)->num_chunks(); ++i) {
    std::vector<uint8_t> out((*rd)->chunk(i).decoded_size);
    EXPECT_TRUE((*rd)->decode_chunk(i, out.data()).ok());
    EXPECT_EQ(0, std::memcmp(out.data(), file.data() + (*rd)->chunk(i).decoded_offset, out.size())) << i;
    all.push_back(i);
  }
  DevicePlan plan;
  EXPECT_TRUE(plan_chunks(**rd, all, &plan).ok());
  for (size_t k = 0; k < all.size() && k < plan.chunks.size(); ++k) {
    const PlanChunk& c = plan.chunks[k];
    // Split chunks never reach the device decoders: they arrive ready.
    if (ReaderAccess::tensor(**rd, ReaderAccess::chunk_tensor(**rd, all[k])).split &&
        (*rd)->chunk(all[k]).method == 2) {
      EXPECT_EQ(c.kind, PlanKind::kReady) << k;
    }
    if (c.kind != PlanKind::kReady) continue;
    EXPECT_EQ(0, std::memcmp(plan.arena.data() + c.raw, file.data() + (*rd)->chunk(all[k]).decoded_offset,
                             c.raw_len));
  }
  return std::move(rd).value();
}

// Flips one bit at each of about 400 places of chunk `chunk`'s stored
// bytes in turn (undone after each decode: the reader decodes `enc` in
// place) and decodes the chunk: a decode that succeeds must give the
// original bytes. Returns how many flips were refused, of `*tried`.
inline int refused_bit_flips(std::vector<uint8_t>& enc, const std::vector<uint8_t>& file, const wcodec::Reader& rd,
                             size_t chunk, int* tried) {
  const wcodec::ChunkEntry e = rd.chunk(chunk);
  int refused = 0;
  *tried = 0;
  for (size_t k = 0; k < e.stored_size; k += std::max<size_t>(1, e.stored_size / 400)) {
    uint8_t& b = enc[e.file_offset + k];
    b ^= static_cast<uint8_t>(1u << (k % 8));
    std::vector<uint8_t> out(e.decoded_size);
    const wcodec::Status st = rd.decode_chunk(chunk, out.data());
    b ^= static_cast<uint8_t>(1u << (k % 8));
    ++*tried;
    if (st.ok()) EXPECT_EQ(0, std::memcmp(out.data(), file.data() + e.decoded_offset, out.size())) << k;
    else ++refused;
  }
  return refused;
}

// The recode kinds tensor t's split model uses (bit 1 << kind; 0 when it
// has none or no split model).
inline unsigned split_recodes(const wcodec::Reader& rd, size_t t) {
  const auto& ti = wcodec::ReaderAccess::tensor(rd, t);
  unsigned k = 0;
  if (ti.split)
    for (const auto& s : ti.split->streams) k |= 1u << s.recode;
  return k & ~1u;
}

// The container's format version ("2.9"), from its metadata.
inline std::string format_version(const wcodec::Reader& rd) {
  const auto meta = rd.metadata_json();
  const auto at = meta.find("\"version\":\"");
  if (at == std::string::npos) return "";
  const auto end = meta.find('"', at + 11);
  return end == std::string::npos ? "" : meta.substr(at + 11, end - at - 11);
}

// Writes `file` (a GGUF file), encodes it with the wcodec tool in 16 KiB
// chunks, and decodes it on every CPU path this machine runs: each must
// give `file` back. Returns the paths run.
inline int decode_on_every_cpu_path(const std::vector<uint8_t>& file) {
  using namespace wcodec;
  ScratchDir dir;
  const auto src = dir / "q.gguf", enc = dir / "q.wcodec";
  write_file(src, file);
  std::string out;
  EXPECT_EQ(run_command(std::string(WCODEC_TOOL) + " encode -q --chunk-size 16384 '" + src.string() + "' '" +
                            enc.string() + "' 2>&1",
                        &out),
            0)
      << out;
  int paths = 0;
  for (CpuPath path : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512, CpuPath::kNeon}) {
    if (!cpu_path_supported(path)) continue;
    const auto dec = dir / (std::string("q.") + cpu_path_name(path));
    EXPECT_EQ(run_command(std::string("WCODEC_CPU=") + cpu_path_name(path) + " " + WCODEC_TOOL + " decode '" +
                              enc.string() + "' '" + dec.string() + "' 2>&1",
                          &out),
              0)
        << cpu_path_name(path) << ": " << out;
    EXPECT_TRUE(read_file(dec) == file) << cpu_path_name(path);
    ++paths;
  }
  return paths;
}

// The damaged-chunk check of the recode suites: tensor 0 of `enc` uses the
// recode kinds `kinds` (bits 1 << kind) and its first chunk is model
// coded; bits flipped across that chunk's payload are refused (more than
// nine in ten) or decode to the original bytes.
inline void expect_first_chunk_damage_refused(std::vector<uint8_t>& enc, const std::vector<uint8_t>& file,
                                              unsigned kinds) {
  auto rd = wcodec::Reader::open_memory(enc.data(), enc.size(), "x");
  ASSERT_TRUE(rd.ok());
  ASSERT_EQ(split_recodes(**rd, 0) & kinds, kinds);
  ASSERT_EQ((*rd)->chunk(0).method, 2);
  int tried = 0;
  const int refused = refused_bit_flips(enc, file, **rd, 0, &tried);
  EXPECT_GT(refused, tried * 9 / 10) << refused << " of " << tried;
}

// The parent tensor of the refused-record catalogues: `rows` rows of `cols`
// bytes in bands of `band_rows` rows.
inline wcodec::TensorGeometry split_parent(uint64_t rows, uint64_t cols, uint64_t band_rows) {
  wcodec::TensorGeometry g;
  g.rows = rows;
  g.cols = cols;
  g.elem_bits = 8;
  g.chunk_rows = band_rows;
  g.chunk_cols = cols;
  return g;
}
inline wcodec::Status parse_split_record(const std::vector<uint8_t>& rec, const wcodec::TensorGeometry& g) {
  return wcodec::SplitModel::deserialize(rec.data(), rec.size(), g, "f: tensor 0 \"w\"").status();
}
// The record is refused as corrupt, with `needle` and the tensor named.
inline void expect_split_refused(const std::vector<uint8_t>& rec, const std::string& needle,
                                 const wcodec::TensorGeometry& g) {
  const wcodec::Status st = parse_split_record(rec, g);
  EXPECT_EQ(st.code(), wcodec::Code::kCorruption) << st.ToString();
  EXPECT_NE(st.ToString().find(needle), std::string::npos) << st.ToString();
  EXPECT_NE(st.ToString().find("tensor 0 \"w\""), std::string::npos) << st.ToString();
}

// A split chunk payload (§6.1) of raw parts (method 0), in order.
inline std::vector<uint8_t> raw_split_payload(const std::vector<std::vector<uint8_t>>& parts) {
  std::vector<uint8_t> p;
  for (const auto& b : parts) {
    p.push_back(0);
    for (int i = 0; i < 4; ++i) p.push_back(static_cast<uint8_t>(b.size() >> (8 * i)));
    p.insert(p.end(), b.begin(), b.end());
  }
  return p;
}

// Decodes chunk 0 of the tensor of geometry g coded with `model` (its
// record serialized and parsed back first) from a payload of raw parts
// into `out` (decoded_size bytes; checked against an XXH3 of 0, which no
// test data has, so valid data ends in a checksum error). Errors name
// "f: tensor 0 chunk 0".
inline wcodec::Status decode_raw_split_chunk(const wcodec::TensorGeometry& g, const wcodec::SplitModel& model,
                                             const std::vector<std::vector<uint8_t>>& parts, uint64_t decoded_size,
                                             std::vector<uint8_t>* out) {
  const auto rec = model.serialize();
  auto m = wcodec::SplitModel::deserialize(rec.data(), rec.size(), g, "f");
  if (!m.ok()) return m.status();
  const auto p = raw_split_payload(parts);
  out->assign(decoded_size, 0);
  wcodec::DecodeScratch scratch;
  return wcodec::decode_split_chunk(g, *m, 0, p.data(), p.size(), decoded_size, 0, out->data(), scratch,
                                    "f: tensor 0 chunk 0");
}

}  // namespace wctest
