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
  const uint64_t row_bytes = g.row_bytes();
  // Decodes part k (of stream st, in geometry sg) into buf.
  auto decode_part = [&](const SplitStream& st, size_t k, const std::string& sw, std::vector<uint8_t>& buf) {
    const TensorGeometry sg = m.geometry_of(g, st);
    const uint64_t sbytes = h * sg.row_bytes();
    // Slack after the stream: vector decoders may store whole vectors.
    if (buf.size() < sbytes + 64) buf.resize(sbytes + 64);
    return decode_chunk_unchecked(sg, st.has_model ? &st.model : nullptr, index,
                                  static_cast<ChunkMethod>(parts[k].method), parts[k].data, parts[k].len, sbytes,
                                  nullptr, 0, buf.data(), scratch, sw);
  };
  thread_local std::vector<uint8_t> derived[kPalDerivedCount];
  size_t k = 0;
  for (size_t s = 0; s < m.streams.size(); ++s) {
    const SplitStream& st = m.streams[s];
    const std::string sw = what + " stream " + std::to_string(s);
    if (st.palette()) {
      for (uint32_t d = 0; d < kPalDerivedCount; ++d)
        WC_RETURN_IF_ERROR(decode_part(st.derived[d], k++, sw + " derived " + std::to_string(d), derived[d]));
      const uint64_t sbytes = h * m.geometry_of(g, st).row_bytes();
      const uint64_t ncodes = st.pal_q5 ? sbytes / kQ5Bytes * 32 : sbytes;
      thread_local std::vector<uint8_t> q5codes;
      if (scratch.split_buf.size() < sbytes) scratch.split_buf.resize(sbytes);
      if (st.pal_q5 && q5codes.size() < ncodes) q5codes.resize(ncodes);
      uint8_t* codes = st.pal_q5 ? q5codes.data() : scratch.split_buf.data();
      WC_RETURN_IF_ERROR(palette_reconstruct(derived[kPalFirst].data(), derived[kPalGaps].data(),
                                             derived[kPalIndex].data(), ncodes / st.pal_group, st.pal_group,
                                             st.pal_signed, codes, sw, st.pal_q5 ? 31 : 255,
                                             palette_expand_vector()));
      if (st.pal_q5) q5_pack(codes, sbytes / kQ5Bytes, scratch.split_buf.data());
    } else if (st.recode == kRecodeZeroPos) {
      for (uint32_t d = 0; d < kZpDerivedCount; ++d)
        WC_RETURN_IF_ERROR(decode_part(st.derived[d], k++, sw + " derived " + std::to_string(d), derived[d]));
      const uint64_t sbytes = h * m.geometry_of(g, st).row_bytes();
      if (scratch.split_buf.size() < sbytes) scratch.split_buf.resize(sbytes);
      WC_RETURN_IF_ERROR(zero_pos_join(derived[kZpPos].data(), derived[kZpRest].data(), sbytes / kZpGroupBytes,
                                       scratch.split_buf.data(), sw));
    } else {
      WC_RETURN_IF_ERROR(decode_part(st, k++, sw, scratch.split_buf));
      if (st.recode == kRecodeZeroShift) {
        // Earlier streams already hold each block's d and m in out.
        const uint32_t bpb = st.bytes_per_block();
        const uint64_t blocks = h * (row_bytes / m.block_bytes);
        for (uint64_t b = 0; b < blocks; ++b) {
          const uint8_t* blk = out + b * m.block_bytes;
          const uint8_t shift = zero_shift_of(static_cast<uint16_t>(blk[st.rc_d_off] | blk[st.rc_d_off + 1] << 8),
                                              static_cast<uint16_t>(blk[st.rc_m_off] | blk[st.rc_m_off + 1] << 8));
          rotate_nibbles(scratch.split_buf.data() + b * bpb, bpb, shift, false);
        }
      } else if (st.recode == kRecodeF16AsBf16) {
        WC_RETURN_IF_ERROR(bf16_to_f16_inplace(scratch.split_buf.data(), h * m.geometry_of(g, st).row_bytes(), sw));
      } else if (st.recode == kRecodeQ3Codes) {
        thread_local std::vector<uint8_t> packed;
        const uint64_t blocks = h * (row_bytes / m.block_bytes);
        if (packed.size() < blocks * kQ3StreamBytes) packed.resize(blocks * kQ3StreamBytes);
        WC_RETURN_IF_ERROR(q3_codes_pack(scratch.split_buf.data(), blocks, packed.data(), sw));
        m.scatter(packed.data(), h, row_bytes, s, out);
        continue;
      }
    }
    m.scatter(scratch.split_buf.data(), h, row_bytes, s, out);
  }
  return check_chunk_hash(out, decoded_size, xxh3, what);
}

}  // namespace wcodec
