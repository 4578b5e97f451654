// codec/compress/split_encode.cpp — split models for GGUF tensors of
// block-quantized ggml types (docs/wcodec-format.md §8.4, §14): the byte
// fields of each type's block (fp16 scales, packed 6-bit scales, packed
// codes, high bits) de-interleaved into streams, each stream encoded as a
// tensor of its own by encode_tensor (so it gets the model its data
// measures best with: float for fp16 scales, int8 / 4-bit / ternary codes,
// bytes), and the split kept only where it measures smaller than the
// tensor's ordinary coding. An int8 code stream whose every group of 32
// codes holds at most 16 values (a file requantized from a 4-bit type) is
// also tried as a palette stream (format 2.6, §8.5: palettes and 4-bit
// indices, split_palette.h), kept where it measures smaller. Format 2.7
// (§8.6, split_recode.h): Q4_1's codes rotated by each block's zero point,
// and fp16 fields with 3 low zero mantissa bits coded as bf16. Format 2.8:
// Q3_K's hmask and qs as one stream of 3-bit codes, one per byte. Format
// 2.9: the 0 that every group of 32 Q4_0 codes holds, its position apart.
//
// Thread-safety: re-entrant (encode_tensor is).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "encode_model_i.h"
#include "split_palette.h"
#include "split_recode.h"
#include "tensor_encode.h"
#include "wcodec/gguf.h"

namespace wcodec {

namespace {

// How a stream is presented to encode_tensor.
// kU16: 2-byte values as bytes (a bytes model's planes), tried beside kF16
// (encode_stream).
enum class As { kBF16, kF16, kF32, kI8, kU8, kPacked, kU16 };

struct FieldSpec {
  uint16_t off, len;
  As as;
};

struct TypeSpec {
  uint32_t type;
  uint16_t block_bytes;
  std::vector<FieldSpec> fields;  // one stream each
};

// The fields of each ggml block type (ggml-common.h's block_* structs).
const std::vector<TypeSpec>& type_specs() {
  static const std::vector<TypeSpec> specs = {
      {kGgmlTypeQ4_0, 18, {{0, 2, As::kF16}, {2, 16, As::kPacked}}},
      {kGgmlTypeQ4_1, 20, {{0, 2, As::kF16}, {2, 2, As::kF16}, {4, 16, As::kPacked}}},
      {kGgmlTypeQ5_0, 22, {{0, 2, As::kF16}, {2, 4, As::kU8}, {6, 16, As::kPacked}}},
      {kGgmlTypeQ5_1, 24, {{0, 2, As::kF16}, {2, 2, As::kF16}, {4, 4, As::kU8}, {8, 16, As::kPacked}}},
      {kGgmlTypeQ8_0, 34, {{0, 2, As::kF16}, {2, 32, As::kI8}}},
      {9 /* Q8_1 */, 36, {{0, 2, As::kF16}, {2, 2, As::kF16}, {4, 32, As::kI8}}},
      {kGgmlTypeQ2_K, 84, {{0, 16, As::kU8}, {16, 64, As::kU8}, {80, 2, As::kF16}, {82, 2, As::kF16}}},
      {kGgmlTypeQ3_K, 110, {{0, 32, As::kU8}, {32, 64, As::kU8}, {96, 12, As::kU8}, {108, 2, As::kF16}}},
      {kGgmlTypeQ4_K, 144, {{0, 2, As::kF16}, {2, 2, As::kF16}, {4, 12, As::kU8}, {16, 128, As::kPacked}}},
      {kGgmlTypeQ5_K,
       176,
       {{0, 2, As::kF16}, {2, 2, As::kF16}, {4, 12, As::kU8}, {16, 32, As::kU8}, {48, 128, As::kPacked}}},
      {kGgmlTypeQ6_K, 210, {{0, 128, As::kPacked}, {128, 64, As::kU8}, {192, 16, As::kI8}, {208, 2, As::kF16}}},
      {15 /* Q8_K */, 292, {{0, 4, As::kF32}, {4, 256, As::kI8}, {260, 32, As::kU8}}},
      {16 /* IQ2_XXS */, 66, {{0, 2, As::kF16}, {2, 64, As::kU8}}},
      {17 /* IQ2_XS */, 74, {{0, 2, As::kF16}, {2, 64, As::kU8}, {66, 8, As::kU8}}},
      {18 /* IQ3_XXS */, 98, {{0, 2, As::kF16}, {2, 96, As::kU8}}},
      {19 /* IQ1_S */, 50, {{0, 2, As::kF16}, {2, 32, As::kU8}, {34, 16, As::kU8}}},
      {20 /* IQ4_NL */, 18, {{0, 2, As::kF16}, {2, 16, As::kPacked}}},
      {21 /* IQ3_S */, 110, {{0, 2, As::kF16}, {2, 64, As::kU8}, {66, 8, As::kU8}, {74, 32, As::kU8}, {106, 4, As::kU8}}},
      {22 /* IQ2_S */, 82, {{0, 2, As::kF16}, {2, 64, As::kU8}, {66, 8, As::kU8}, {74, 8, As::kU8}}},
      {23 /* IQ4_XS */, 136, {{0, 2, As::kF16}, {2, 6, As::kU8}, {8, 128, As::kPacked}}},
      {29 /* IQ1_M */, 56, {{0, 32, As::kU8}, {32, 16, As::kU8}, {48, 8, As::kU8}}},
      {kGgmlTypeTQ1_0, 54, {{0, 48, As::kU8}, {48, 4, As::kU8}, {52, 2, As::kF16}}},
      {kGgmlTypeTQ2_0, 66, {{0, 64, As::kPacked}, {64, 2, As::kF16}}},
      {39 /* MXFP4 */, 17, {{0, 1, As::kU8}, {1, 16, As::kPacked}}},
  };
  return specs;
}

const TypeSpec* spec_of(uint32_t type) {
  for (const auto& s : type_specs())
    if (s.type == type) return &s;
  return nullptr;
}

void put_u32(std::vector<uint8_t>& v, uint32_t x) {
  for (int i = 0; i < 4; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * i)));
}

// Codes per palette group of an int8 code stream (a Q8_0 block's codes).
constexpr uint32_t kPalGroup = 32;

// Encodes the stream st (its bytes per block set) of the split tensor of
// geometry g from sdata (rows × the stream's row bytes) as a tensor of its
// own with the parent's bands: sets st's elem_bits and model, returns its
// chunks (model-coded, zstd or raw each).
std::vector<EncodedChunk> encode_stream_as(const SplitModel& split, const TensorGeometry& g, SplitStream& st,
                                           const uint8_t* sdata, As as, const EncodeOptions& sopt,
                                           TableCoding coding) {
  const uint64_t rows = g.rows, srow = (g.row_bytes() / split.block_bytes) * st.coded_bytes_per_block();
  TensorInfo info;
  info.name = as == As::kPacked ? "split.packed" : "split";
  uint64_t esize = 1;
  switch (as) {
    case As::kF16: info.dtype = DType::kF16; esize = 2; break;
    case As::kBF16: info.dtype = DType::kBF16; esize = 2; break;
    case As::kU16: info.dtype = DType::kU16; esize = 2; break;
    case As::kF32: info.dtype = DType::kF32; esize = 4; break;
    case As::kI8: info.dtype = DType::kI8; break;
    default: info.dtype = DType::kU8; break;
  }
  info.shape = {rows, srow / esize};
  info.begin = 0;
  info.end = rows * srow;
  auto r = encode_tensor(info, sdata, AuxInput{}, sopt);
  EncodedTensor se;
  if (r.ok()) se = std::move(r).value();
  // The stream's tensor must have the parent's bands (a small stream is
  // coded without a model, as one row of bytes: recode it in bands).
  st.elem_bits = 8;
  const bool fits = r.ok() && se.has_model && se.aux_tensor < 0 && se.geom.rows == rows &&
                    se.geom.chunk_cols == se.geom.cols && se.geom.chunk_rows == g.chunk_rows &&
                    se.geom.row_bytes() == srow;
  if (fits) {
    st.elem_bits = static_cast<uint8_t>(se.geom.elem_bits);
    // A model that does not pay for its record (or saves less than
    // min_model_gain) is dropped.
    // (A tie drops it here, while a tensor's model is kept at a tie.)
    const uint64_t with_model = payload_bytes(se) + se.model.serialize(coding).size(), without = fallback_bytes(se);
    if (with_model == without || !model_pays(with_model, without, sopt)) drop_model(sdata, sopt, &se);
  } else {
    const TensorGeometry sg = split.geometry_of(g, st);
    se = EncodedTensor{};
    se.geom = sg;
    for (uint64_t i = 0; i < g.num_chunks(); ++i) se.chunks.push_back(pick_chunk(chunk_ref(sg, sdata, i), {}, sopt));
  }
  st.has_model = se.has_model;
  if (se.has_model) st.model = std::move(se.model);
  return std::move(se.chunks);
}

// The order-0 entropy of n bytes, in bytes.
uint64_t order0_bytes(const uint8_t* p, size_t n) {
  uint64_t hist[256] = {};
  for (size_t i = 0; i < n; ++i) ++hist[p[i]];
  double bits = 0;
  for (uint64_t c : hist)
    if (c) bits -= static_cast<double>(c) * std::log2(static_cast<double>(c) / static_cast<double>(n));
  return static_cast<uint64_t>(bits / 8);
}

// What a stream costs in the file: its parts with their framing, its model.
uint64_t stream_cost(const SplitStream& st, const std::vector<EncodedChunk>& chunks, TableCoding coding) {
  uint64_t n = st.has_model ? st.model.serialize(coding).size() : 0;
  for (const auto& c : chunks) n += 5 + c.payload.size();
  return n;
}

// encode_stream_as, and for fp16 fields (block scales and minimums) the
// smaller of the values as F16 (a float model: exponent contexts, sign and
// high mantissa bits, raw low bits) and as U16 (a bytes model: each byte
// plane order-0, or with the left byte's class). Scales that take few
// distinct values code far smaller as bytes: SmolLM2's Q4_0 file
// (requantized from Q4_1) holds 3.3 million fp16 scales with 9.5 bits of
// order-0 entropy, which no float model kept against zstd; as byte planes
// the file is 0.9% smaller. A tie keeps F16 (the earlier output).
std::vector<EncodedChunk> encode_stream(const SplitModel& split, const TensorGeometry& g, SplitStream& st,
                                        const uint8_t* sdata, As as, const EncodeOptions& sopt, TableCoding coding) {
  if (as != As::kF16) return encode_stream_as(split, g, st, sdata, as, sopt, coding);
  SplitStream as_bytes = st;
  auto f16 = encode_stream_as(split, g, st, sdata, As::kF16, sopt, coding);
  auto u16 = encode_stream_as(split, g, as_bytes, sdata, As::kU16, sopt, coding);
  if (stream_cost(as_bytes, u16, coding) >= stream_cost(st, f16, coding)) return f16;
  st = std::move(as_bytes);
  return u16;
}

// The order-0 entropy of the nibbles of n bytes, in bytes.
double nibble_order0_bytes(const uint8_t* p, size_t n) {
  uint64_t hist[16] = {};
  for (size_t i = 0; i < n; ++i) {
    ++hist[p[i] & 15];
    ++hist[p[i] >> 4];
  }
  double bits = 0;
  for (uint64_t c : hist)
    if (c) bits -= static_cast<double>(c) * std::log2(static_cast<double>(c) / static_cast<double>(2 * n));
  return bits / 8;
}

}  // namespace

bool split_candidate(uint32_t ggml_type) {
  const TypeSpec* s = spec_of(ggml_type);
  const GgmlTypeInfo* ti = ggml_type_info(ggml_type);
  return s && ti && ti->type_size == s->block_bytes;
}

void try_split(uint32_t ggml_type, const uint8_t* data, const EncodeOptions& opt, TableCoding coding,
               EncodedTensor* et) {
  const TypeSpec* spec = spec_of(ggml_type);
  const TensorGeometry& g = et->geom;
  if (!split_candidate(ggml_type) || g.rows == 0 || g.elem_bits != 8 || g.chunk_cols != g.cols ||
      g.row_bytes() % spec->block_bytes || et->aux_tensor >= 0 || et->model_ref >= 0)
    return;
  auto split = std::make_shared<SplitModel>();
  split->ggml_type = ggml_type;
  split->block_bytes = spec->block_bytes;
  const uint64_t rows = g.rows, row_bytes = g.row_bytes(), blocks_per_row = row_bytes / spec->block_bytes;
  EncodeOptions sopt = opt;
  sopt.tool_search = false;
  sopt.zstd_defer = false;  // the streams' chunks are not the tensor's bytes (finish_zstd)
  sopt.band_rows = g.chunk_rows;
  const uint64_t nchunks = g.num_chunks();
  // The parts of the chunk payloads, in payload order (§6.1).
  std::vector<std::vector<EncodedChunk>> parts;
  std::vector<uint8_t> sdata, pal[kPalDerivedCount];
  // Encodes the palette of pst's codes (groups of kPalGroup) into its
  // derived streams; returns their cost and appends their parts to pparts.
  auto encode_palette = [&](SplitStream& pst, const uint8_t* codes, uint64_t ncodes, bool sgn,
                            std::vector<std::vector<EncodedChunk>>* pparts, uint64_t* pcost) {
    const uint64_t groups = ncodes / kPalGroup;
    pal[kPalFirst].resize(groups);
    pal[kPalGaps].resize(groups * kPaletteGaps);
    pal[kPalIndex].resize(groups * kPalGroup / 2);
    if (!palette_build(codes, groups, kPalGroup, sgn, pal[kPalFirst].data(), pal[kPalGaps].data(),
                       pal[kPalIndex].data()))
      return false;
    pst.pal_group = kPalGroup;
    *pcost = 0;
    const As pas[kPalDerivedCount] = {sgn ? As::kI8 : As::kU8, As::kU8, As::kPacked};
    for (uint32_t k = 0; k < kPalDerivedCount; ++k) {
      SplitStream d;
      d.derived_bpb = pst.derived_bytes_per_block(k);
      pparts->push_back(encode_stream(*split, g, d, pal[k].data(), pas[k], sopt, coding));
      *pcost += stream_cost(d, pparts->back(), coding);
      pst.derived.push_back(std::move(d));
    }
    return true;
  };
  const bool q5 = ggml_type == kGgmlTypeQ5_0 || ggml_type == kGgmlTypeQ5_1;
  std::vector<uint8_t> q5codes;
  for (size_t fi = 0; fi < spec->fields.size(); ++fi) {
    const FieldSpec& f = spec->fields[fi];
    SplitStream st;
    st.ranges.push_back(SplitRange{f.off, f.len});
    split->streams.push_back(st);
    const size_t s = split->streams.size() - 1;
    const uint64_t srow = blocks_per_row * f.len;
    sdata.resize(rows * srow);
    split->gather(data, rows, row_bytes, s, sdata.data());
    // int8 codes with at most 16 values in every group of 32 (a file
    // requantized from a 4-bit type): the palette streams (§8.5), kept
    // where they cost less than the codes coded as they are.
    if (f.as == As::kI8 && f.len % kPalGroup == 0 && opt.split_palette) {
      SplitStream pst = split->streams[s];
      pst.pal_signed = true;
      std::vector<std::vector<EncodedChunk>> pparts;
      uint64_t pcost = 0;
      if (encode_palette(pst, sdata.data(), sdata.size(), true, &pparts, &pcost)) {
        // The codes as they are, unless the palette costs under 3/4 of
        // their order-0 entropy (no static-table model gets far below it;
        // saves encoding them twice).
        SplitStream plain = split->streams[s];
        std::vector<EncodedChunk> cparts;
        const bool try_plain = pcost >= order0_bytes(sdata.data(), sdata.size()) * 3 / 4;
        if (try_plain) cparts = encode_stream(*split, g, plain, sdata.data(), f.as, sopt, coding);
        if (try_plain && stream_cost(plain, cparts, coding) <= pcost + 4) {
          split->streams[s] = std::move(plain);
          parts.push_back(std::move(cparts));
        } else {
          split->streams[s] = std::move(pst);
          for (auto& pp : pparts) parts.push_back(std::move(pp));
        }
        continue;
      }
    }
    // Q5_0 / Q5_1: the 4 bytes of high bits and the 16 of low nibbles
    // (adjacent fields) as one palette stream of 5-bit codes, where every
    // block holds at most 16 of the 32 values (requantized from 4 bits)
    // and it costs less than the two fields as streams.
    if (q5 && opt.split_palette && f.len == 4 && fi + 1 < spec->fields.size() &&
        spec->fields[fi + 1].off == f.off + 4 && spec->fields[fi + 1].len == 16) {
      SplitStream pst;
      pst.ranges.push_back(SplitRange{f.off, static_cast<uint16_t>(kQ5Bytes)});
      pst.pal_q5 = true;
      split->streams[s] = pst;
      const uint64_t blocks = rows * blocks_per_row;
      std::vector<uint8_t> merged(blocks * kQ5Bytes);
      split->gather(data, rows, row_bytes, s, merged.data());
      q5codes.resize(blocks * 32);
      q5_unpack(merged.data(), blocks, q5codes.data());
      std::vector<std::vector<EncodedChunk>> pparts;
      uint64_t pcost = 0;
      if (encode_palette(pst, q5codes.data(), q5codes.size(), false, &pparts, &pcost) &&
          pcost < order0_bytes(q5codes.data(), q5codes.size()) * 3 / 4) {
        // Under 3/4 of the codes' order-0 entropy: the palette.
        split->streams[s] = std::move(pst);
        for (auto& pp : pparts) parts.push_back(std::move(pp));
        ++fi;
        continue;
      }
      if (!pparts.empty()) {
        // The two fields as streams.
        SplitModel two = *split;
        two.streams[s] = st;
        SplitStream lo;
        lo.ranges.push_back(SplitRange{spec->fields[fi + 1].off, spec->fields[fi + 1].len});
        two.streams.push_back(lo);
        std::vector<uint8_t> lodata(blocks * 16);
        two.gather(data, rows, row_bytes, s + 1, lodata.data());
        auto hparts = encode_stream(two, g, two.streams[s], sdata.data(), f.as, sopt, coding);
        auto lparts = encode_stream(two, g, two.streams[s + 1], lodata.data(), As::kPacked, sopt, coding);
        if (stream_cost(two.streams[s], hparts, coding) + stream_cost(two.streams[s + 1], lparts, coding) <=
            pcost + 4) {
          split->streams = std::move(two.streams);
          parts.push_back(std::move(hparts));
          parts.push_back(std::move(lparts));
        } else {
          split->streams[s] = std::move(pst);
          for (auto& pp : pparts) parts.push_back(std::move(pp));
        }
        ++fi;
        continue;
      }
      split->streams[s] = st;
    }
    // Q3_K: the high bits (hmask) and the 2-bit pairs (qs), adjacent, as
    // one stream of whole 3-bit codes (format 2.8, §8.6), one per byte.
    if (ggml_type == kGgmlTypeQ3_K && opt.split_recode && f.off == 0 && f.len == 32 && fi + 1 < spec->fields.size() &&
        spec->fields[fi + 1].off == 32 && spec->fields[fi + 1].len == 64) {
      SplitStream cs = split->streams[s];
      cs.ranges[0].len = static_cast<uint16_t>(kQ3StreamBytes);
      cs.recode = kRecodeQ3Codes;
      split->streams[s] = cs;
      const uint64_t blocks = rows * blocks_per_row;
      std::vector<uint8_t> merged(blocks * kQ3StreamBytes), codes(blocks * kQ3Codes);
      split->gather(data, rows, row_bytes, s, merged.data());
      q3_codes_unpack(merged.data(), blocks, codes.data());
      auto cparts = encode_stream(*split, g, cs, codes.data(), As::kU8, sopt, coding);
      // The two fields as streams where they cost less (a small tensor
      // coded without a model: zstd of one code per byte).
      {
        SplitModel two = *split;
        two.streams[s] = st;
        SplitStream q;
        q.ranges.push_back(SplitRange{32, 64});
        two.streams.push_back(q);
        std::vector<uint8_t> qdata(blocks * 64);
        two.gather(data, rows, row_bytes, s + 1, qdata.data());
        auto hparts = encode_stream(two, g, two.streams[s], sdata.data(), f.as, sopt, coding);
        auto qparts = encode_stream(two, g, two.streams[s + 1], qdata.data(), As::kU8, sopt, coding);
        if (stream_cost(two.streams[s], hparts, coding) + stream_cost(two.streams[s + 1], qparts, coding) <
            stream_cost(cs, cparts, coding) + 4) {
          split->streams = std::move(two.streams);
          parts.push_back(std::move(hparts));
          parts.push_back(std::move(qparts));
          ++fi;
          continue;
        }
      }
      split->streams[s] = std::move(cs);
      parts.push_back(std::move(cparts));
      ++fi;
      continue;
    }
    // Q4_1's codes rotated by each block's zero point (format 2.7, §8.6),
    // where their nibbles' order-0 entropy drops by over 0.5% and more than
    // the recode record's 6 bytes (16).
    if (ggml_type == kGgmlTypeQ4_1 && f.as == As::kPacked && opt.split_recode) {
      std::vector<uint8_t> rot(sdata);
      const uint64_t blocks = rows * blocks_per_row;
      for (uint64_t b = 0; b < blocks; ++b) {
        const uint8_t* blk = data + b * spec->block_bytes;
        rotate_nibbles(rot.data() + b * f.len, f.len,
                       zero_shift_of(static_cast<uint16_t>(blk[0] | blk[1] << 8),
                                     static_cast<uint16_t>(blk[2] | blk[3] << 8)),
                       true);
      }
      if (nibble_order0_bytes(rot.data(), rot.size()) <
          nibble_order0_bytes(sdata.data(), sdata.size()) * 0.995 - 16) {
        SplitStream& rs = split->streams[s];
        rs.recode = kRecodeZeroShift;
        rs.rc_d_off = 0;
        rs.rc_m_off = 2;
        parts.push_back(encode_stream(*split, g, rs, rot.data(), f.as, sopt, coding));
        continue;
      }
    }
    // 4-bit codes whose every group of 32 holds a 0 (llama.cpp's Q4_0
    // quantizer maps each block's largest |x| to code 0): the first 0's
    // position and the other 31 codes as two derived streams (format 2.9,
    // §8.6), tried where their order-0 entropy is over 0.2% below the
    // nibbles' and kept where smaller than the codes coded as they are.
    if (f.as == As::kPacked && f.len % kZpGroupBytes == 0 && opt.split_recode) {
      const uint64_t zgroups = sdata.size() / kZpGroupBytes;
      std::vector<uint8_t> zp[kZpDerivedCount];
      zp[kZpPos].resize(zgroups);
      zp[kZpRest].resize(zgroups * (kZpCodes - 1));
      if (zero_pos_split(sdata.data(), zgroups, zp[kZpPos].data(), zp[kZpRest].data()) &&
          static_cast<double>(order0_bytes(zp[kZpPos].data(), zgroups) +
                              order0_bytes(zp[kZpRest].data(), zp[kZpRest].size())) <
              nibble_order0_bytes(sdata.data(), sdata.size()) * 0.998) {
        SplitStream zs = split->streams[s];
        zs.recode = kRecodeZeroPos;
        zs.elem_bits = 8;
        std::vector<std::vector<EncodedChunk>> zparts;
        uint64_t zcost = 0;
        for (uint32_t k = 0; k < kZpDerivedCount; ++k) {
          SplitStream d;
          d.derived_bpb = zs.derived_bytes_per_block(k);
          zparts.push_back(encode_stream(*split, g, d, zp[k].data(), As::kU8, sopt, coding));
          zcost += stream_cost(d, zparts.back(), coding);
          zs.derived.push_back(std::move(d));
        }
        SplitStream plain = split->streams[s];
        auto pparts = encode_stream(*split, g, plain, sdata.data(), f.as, sopt, coding);
        if (zcost + 4 < stream_cost(plain, pparts, coding)) {
          split->streams[s] = std::move(zs);
          for (auto& zpp : zparts) parts.push_back(std::move(zpp));
        } else {
          split->streams[s] = std::move(plain);
          parts.push_back(std::move(pparts));
        }
        continue;
      }
    }
    // fp16 values whose low 3 mantissa bits are all zero (a block minimum
    // taken from bf16 weights) also as bf16 (§8.6), kept where smaller.
    if (f.as == As::kF16 && opt.split_recode && f16_low3_zero(sdata.data(), sdata.size())) {
      SplitStream plain = split->streams[s], rs = split->streams[s];
      auto pparts = encode_stream(*split, g, plain, sdata.data(), f.as, sopt, coding);
      f16_to_bf16_inplace(sdata.data(), sdata.size());
      rs.recode = kRecodeF16AsBf16;
      auto rparts = encode_stream(*split, g, rs, sdata.data(), As::kBF16, sopt, coding);
      const bool keep = stream_cost(rs, rparts, coding) + 1 < stream_cost(plain, pparts, coding);
      split->streams[s] = keep ? std::move(rs) : std::move(plain);
      parts.push_back(keep ? std::move(rparts) : std::move(pparts));
      continue;
    }
    parts.push_back(encode_stream(*split, g, split->streams[s], sdata.data(), f.as, sopt, coding));
  }
  const uint64_t record = split->serialize(coding).size();
  uint64_t split_total = record, base_total = payload_bytes(*et);
  if (et->has_model) base_total += et->model.serialize(coding).size();
  std::vector<EncodedChunk> chunks(nchunks);
  for (uint64_t i = 0; i < nchunks; ++i) {
    EncodedChunk& c = chunks[i];
    c.method = ChunkMethod::kModel;
    c.decoded_size = et->chunks[i].decoded_size;
    c.xxh3 = et->chunks[i].xxh3;
    for (auto& p : parts) {
      c.payload.push_back(static_cast<uint8_t>(p[i].method));
      put_u32(c.payload, static_cast<uint32_t>(p[i].payload.size()));
      c.payload.insert(c.payload.end(), p[i].payload.begin(), p[i].payload.end());
    }
    // The tensor's ordinary zstd or raw chunk where it is smaller.
    const EncodedChunk& b = et->chunks[i];
    if (b.method != ChunkMethod::kModel && b.payload.size() <= c.payload.size()) c = b;
    split_total += c.payload.size();
  }
  if (split_total >= base_total) return;
  et->chunks = std::move(chunks);
  et->has_model = false;
  et->model = TensorModel{};
  et->split = std::move(split);
  et->choice.model_desc = et->split->describe().substr(0, 256);
  et->choice.kind_name = std::string("split ") + ggml_type_info(ggml_type)->name;
}

}  // namespace wcodec
