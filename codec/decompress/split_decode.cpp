// codec/decompress/split_decode.cpp — decoding a chunk of a tensor coded
// with a split model (docs/wcodec-format.md §6.1, §8.4): each stream's part
// is decoded as a chunk of the stream's own tensor by the ordinary chunk
// decoder (so it runs on the vector decoders where the CPU has them, else
// on the reference decoders), then scattered back into the blocks; the
// chunk's checksum covers the result. A palette stream (format 2.6, §8.5)
// decodes its three derived parts the same way and rebuilds its codes from
// them before the scatter. A recoded stream (format 2.7, §8.6) is
// transformed back (its nibbles rotated by each block's zero point, read
// from the d and m earlier streams have scattered; or bf16 back to fp16;
// or, format 2.8, 3-bit codes packed back into hmask and qs) before the
// scatter. A forced-zero stream (format 2.9) decodes its two derived parts
// (positions, other codes) and joins them into nibbles.
//
// Thread-safety: pure function over its arguments; each decoding thread
// brings its own DecodeScratch.
#include <cstring>

#include "split_palette.h"
#include "split_recode.h"
#include "tensor_decode.h"

namespace wcodec {
namespace {

// The most parts a split chunk carries here (streams, palettes three parts
// and forced-zero streams two): chunks with more decode one at a time.
constexpr size_t kMaxParts = 16;

// Per thread: the decoded parts of up to kMaxChunkGroup chunks.
struct PartBufs {
  std::vector<uint8_t> part[kMaxChunkGroup][kMaxParts];
};
PartBufs& part_bufs() {
  thread_local PartBufs b;
  return b;
}

// The stream (or derived stream) that part k of a chunk of m decodes, in
// payload order, and how errors name it ("stream s", "stream s derived d").
struct PartOf {
  const SplitStream* st;
  std::string name;
};
std::vector<PartOf> part_streams(const SplitModel& m) {
  std::vector<PartOf> v;
  for (size_t s = 0; s < m.streams.size(); ++s) {
    const SplitStream& st = m.streams[s];
    const std::string sw = " stream " + std::to_string(s);
    const uint32_t nd = st.palette()                    ? uint32_t{kPalDerivedCount}
                        : st.recode == kRecodeZeroPos ? uint32_t{kZpDerivedCount}
                                                      : 0u;
    for (uint32_t d = 0; d < nd; ++d) v.push_back(PartOf{&st.derived[d], sw + " derived " + std::to_string(d)});
    if (nd == 0) v.push_back(PartOf{&st, sw});
  }
  return v;
}

// Part k (of stream st) of the chunk at `index` (h rows) into buf.
Status decode_part(const TensorGeometry& g, const SplitModel& m, const SplitStream& st, uint64_t index, uint64_t h,
                   const SplitPart& part, std::vector<uint8_t>& buf, DecodeScratch& scratch, const std::string& what) {
  const TensorGeometry sg = m.geometry_of(g, st);
  const uint64_t sbytes = h * sg.row_bytes();
  // Slack after the stream: vector decoders may store whole vectors.
  if (buf.size() < sbytes + 64) buf.resize(sbytes + 64);
  return decode_chunk_unchecked(sg, st.has_model ? &st.model : nullptr, index, static_cast<ChunkMethod>(part.method),
                                part.data, part.len, sbytes, nullptr, 0, buf.data(), scratch, what);
}

// The chunk's bytes from its decoded parts (bufs, in payload order): each
// stream rebuilt (palette, forced zero, recodes) and scattered into out.
Status finish_split_chunk(const TensorGeometry& g, const SplitModel& m, uint64_t h, std::vector<uint8_t>* bufs,
                          uint8_t* out, DecodeScratch& scratch, const std::string& what) {
  const uint64_t row_bytes = g.row_bytes();
  size_t k = 0;
  for (size_t s = 0; s < m.streams.size(); ++s) {
    const SplitStream& st = m.streams[s];
    const std::string sw = what + " stream " + std::to_string(s);
    const uint64_t sbytes = h * m.geometry_of(g, st).row_bytes();
    const uint8_t* src = nullptr;
    if (st.palette()) {
      std::vector<uint8_t>* derived = bufs + k;
      k += kPalDerivedCount;
      const uint64_t ncodes = st.pal_q5 ? sbytes / kQ5Bytes * 32 : sbytes;
      thread_local std::vector<uint8_t> q5codes;
      if (scratch.split_buf.size() < sbytes) scratch.split_buf.resize(sbytes);
      if (st.pal_q5 && q5codes.size() < ncodes) q5codes.resize(ncodes);
      uint8_t* codes = st.pal_q5 ? q5codes.data() : scratch.split_buf.data();
      WC_RETURN_IF_ERROR(palette_reconstruct(derived[kPalFirst].data(), derived[kPalGaps].data(),
                                             derived[kPalIndex].data(), ncodes / st.pal_group, st.pal_group,
                                             st.pal_signed, codes, sw, st.pal_q5 ? 31 : 255,
                                             palette_groups_vector()));
      if (st.pal_q5) q5_pack(codes, sbytes / kQ5Bytes, scratch.split_buf.data());
      src = scratch.split_buf.data();
    } else if (st.recode == kRecodeZeroPos) {
      std::vector<uint8_t>* derived = bufs + k;
      k += kZpDerivedCount;
      if (scratch.split_buf.size() < sbytes) scratch.split_buf.resize(sbytes);
      WC_RETURN_IF_ERROR(zero_pos_join(derived[kZpPos].data(), derived[kZpRest].data(), sbytes / kZpGroupBytes,
                                       scratch.split_buf.data(), sw, zero_pos_join_vector()));
      src = scratch.split_buf.data();
    } else {
      uint8_t* codes = bufs[k++].data();
      src = codes;
      if (st.recode == kRecodeZeroShift) {
        // Earlier streams already hold each block's d and m in out.
        // The shifts of all blocks first (one loop the divisions overlap
        // in), then the rotations.
        const uint32_t bpb = st.bytes_per_block();
        const uint64_t blocks = h * (row_bytes / m.block_bytes);
        thread_local std::vector<uint8_t> shifts;
        if (shifts.size() < blocks) shifts.resize(blocks);
        static const ZeroShiftsFn vector_shifts = zero_shifts_vector();
        (vector_shifts ? vector_shifts : &zero_shifts_of)(out, blocks, m.block_bytes, st.rc_d_off, st.rc_m_off,
                                                          shifts.data());
        unrotate_blocks(codes, blocks, bpb, shifts.data());
      } else if (st.recode == kRecodeF16AsBf16) {
        WC_RETURN_IF_ERROR(bf16_to_f16_inplace(codes, sbytes, sw));
      } else if (st.recode == kRecodeQ3Codes) {
        thread_local std::vector<uint8_t> packed;
        const uint64_t blocks = h * (row_bytes / m.block_bytes);
        if (packed.size() < blocks * kQ3StreamBytes) packed.resize(blocks * kQ3StreamBytes);
        WC_RETURN_IF_ERROR(q3_codes_pack(codes, blocks, packed.data(), sw));
        src = packed.data();
      }
    }
    m.scatter(src, h, row_bytes, s, out);
  }
  return Status::OK();
}

}  // namespace

Status decode_split_chunk(const TensorGeometry& g, const SplitModel& m, uint64_t index, const uint8_t* payload,
                          size_t payload_len, uint64_t decoded_size, uint64_t xxh3, uint8_t* out,
                          DecodeScratch& scratch, const std::string& what) {
  uint64_t row0, col0, h, w;
  g.chunk_rect(index, &row0, &col0, &h, &w);
  if (h * w * g.elem_bits / 8 != decoded_size)
    return Status::Corruption(what + ": chunk decoded size " + std::to_string(decoded_size) +
                              " does not match its geometry");
  thread_local std::vector<SplitPart> parts;
  WC_RETURN_IF_ERROR(parse_split_payload(m, payload, payload_len, what, &parts));
  const std::vector<PartOf> ps = part_streams(m);
  if (ps.size() != parts.size())
    return Status::Internal(what + ": " + std::to_string(parts.size()) + " parts for " + std::to_string(ps.size()) +
                            " streams");
  // Part buffers: the group's first set where they suffice, else ones of
  // this call.
  std::vector<uint8_t>* bufs = part_bufs().part[0];
  std::vector<std::vector<uint8_t>> more;
  if (parts.size() > kMaxParts) {
    more.resize(parts.size());
    bufs = more.data();
  }
  for (size_t k = 0; k < parts.size(); ++k)
    WC_RETURN_IF_ERROR(decode_part(g, m, *ps[k].st, index, h, parts[k], bufs[k], scratch, what + ps[k].name));
  WC_RETURN_IF_ERROR(finish_split_chunk(g, m, h, bufs, out, scratch, what));
  return check_chunk_hash(out, decoded_size, xxh3, what);
}

bool decode_split_group(const TensorGeometry& g, const SplitModel& m, const uint64_t* index,
                        const uint8_t* const* payload, const size_t* payload_len, const uint64_t* decoded_size,
                        const uint64_t* xxh3, uint8_t* const* out, int n, DecodeScratch& scratch) {
  if (n < 2 || n > kMaxChunkGroup) return false;
  uint64_t h0 = 0, w0 = 0;
  thread_local std::vector<SplitPart> parts[kMaxChunkGroup];
  const std::vector<PartOf> ps = part_streams(m);
  if (ps.size() > kMaxParts) return false;
  for (int i = 0; i < n; ++i) {
    uint64_t row0, col0, h, w;
    g.chunk_rect(index[i], &row0, &col0, &h, &w);
    if (h * w * g.elem_bits / 8 != decoded_size[i] || (i && (h != h0 || w != w0))) return false;
    h0 = h;
    w0 = w;
    if (!parse_split_payload(m, payload[i], payload_len[i], std::string(), &parts[i]).ok() ||
        parts[i].size() != ps.size())
      return false;
  }
  PartBufs& pb = part_bufs();
  for (size_t k = 0; k < ps.size(); ++k) {
    const SplitStream& st = *ps[k].st;
    const TensorGeometry sg = m.geometry_of(g, st);
    const uint64_t sbytes = h0 * sg.row_bytes();
    bool all_model = st.has_model && model_groups(st.model);
    for (int i = 0; i < n; ++i) {
      if (pb.part[i][k].size() < sbytes + 64) pb.part[i][k].resize(sbytes + 64);
      all_model = all_model && parts[i][k].method == static_cast<uint8_t>(ChunkMethod::kModel);
    }
    if (all_model) {
      GroupChunk cs[kMaxChunkGroup];
      for (int i = 0; i < n; ++i)
        cs[i] = GroupChunk{&sg, &st.model, index[i], parts[i][k].data, parts[i][k].len, sbytes, 0,
                           pb.part[i][k].data()};
      if (decode_chunk_group_unchecked(cs, n, scratch)) continue;
    }
    for (int i = 0; i < n; ++i)
      if (!decode_part(g, m, st, index[i], h0, parts[i][k], pb.part[i][k], scratch, std::string()).ok()) return false;
  }
  for (int i = 0; i < n; ++i) {
    if (!finish_split_chunk(g, m, h0, pb.part[i], out[i], scratch, std::string()).ok()) return false;
    if (chunk_hash(out[i], decoded_size[i]) != xxh3[i]) return false;
  }
  return true;
}

}  // namespace wcodec
