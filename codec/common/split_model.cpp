// codec/common/split_model.cpp — the split model record and chunk payload
// framing (docs/wcodec-format.md §6.1, §8.4), shared by the encoder and the
// decoders. See split_model.h.
//
// Thread-safety: pure functions; a parsed SplitModel is immutable.
#include "split_model.h"

#include <cstring>

#include "bytes.h"

namespace wcodec {

uint32_t SplitStream::bytes_per_block() const {
  uint32_t n = 0;
  for (const auto& r : ranges) n += r.len;
  return n;
}

TensorGeometry SplitModel::stream_geometry(const TensorGeometry& parent, size_t s) const {
  const SplitStream& st = streams[s];
  TensorGeometry g;
  g.elem_bits = st.elem_bits;
  if (parent.rows == 0) return g;
  const uint64_t blocks = parent.row_bytes() / block_bytes;
  g.rows = parent.rows;
  g.cols = blocks * st.bytes_per_block() * 8 / st.elem_bits;
  g.chunk_rows = parent.chunk_rows;
  g.chunk_cols = g.cols;
  return g;
}

Status SplitModel::check_parent(const TensorGeometry& g, const std::string& what) const {
  if (g.rows == 0) return Status::OK();
  if (g.elem_bits != 8)
    return Status::Corruption(what + ": split model on a tensor of " + std::to_string(g.elem_bits) +
                              "-bit elements (allowed: 8)");
  if (g.chunk_cols != g.cols)
    return Status::Corruption(what + ": split model on a tensor chunked in row segments (allowed: bands of rows)");
  if (g.row_bytes() % block_bytes)
    return Status::Corruption(what + ": split model block_bytes " + std::to_string(block_bytes) +
                              " does not divide the row of " + std::to_string(g.row_bytes()) + " bytes");
  return Status::OK();
}

void SplitModel::gather(const uint8_t* rows_bytes, uint64_t rows, uint64_t row_bytes, size_t s, uint8_t* out) const {
  const SplitStream& st = streams[s];
  const uint64_t blocks = rows * (row_bytes / block_bytes);
  if (st.ranges.size() == 1) {
    const uint32_t off = st.ranges[0].off, len = st.ranges[0].len;
    for (uint64_t b = 0; b < blocks; ++b) std::memcpy(out + b * len, rows_bytes + b * block_bytes + off, len);
    return;
  }
  for (uint64_t b = 0; b < blocks; ++b)
    for (const auto& r : st.ranges) {
      std::memcpy(out, rows_bytes + b * block_bytes + r.off, r.len);
      out += r.len;
    }
}

void SplitModel::scatter(const uint8_t* in, uint64_t rows, uint64_t row_bytes, size_t s, uint8_t* rows_bytes) const {
  const SplitStream& st = streams[s];
  const uint64_t blocks = rows * (row_bytes / block_bytes);
  if (st.ranges.size() == 1) {
    const uint32_t off = st.ranges[0].off, len = st.ranges[0].len;
    if (len == 2) {  // fp16 scales: the common case, two bytes per block
      for (uint64_t b = 0; b < blocks; ++b) std::memcpy(rows_bytes + b * block_bytes + off, in + 2 * b, 2);
      return;
    }
    for (uint64_t b = 0; b < blocks; ++b) std::memcpy(rows_bytes + b * block_bytes + off, in + b * len, len);
    return;
  }
  for (uint64_t b = 0; b < blocks; ++b)
    for (const auto& r : st.ranges) {
      std::memcpy(rows_bytes + b * block_bytes + r.off, in, r.len);
      in += r.len;
    }
}

std::vector<uint8_t> SplitModel::serialize(TableCoding coding) const {
  ByteWriter w;
  w.u16(static_cast<uint16_t>(ggml_type));
  w.u16(static_cast<uint16_t>(block_bytes));
  w.u8(static_cast<uint8_t>(streams.size()));
  for (const auto& st : streams) {
    w.u8(static_cast<uint8_t>(st.ranges.size()));
    for (const auto& r : st.ranges) {
      w.u16(r.off);
      w.u16(r.len);
    }
    w.u8(st.elem_bits);
    w.u8(st.has_model ? 1 : 0);
    if (st.has_model) {
      const auto mb = st.model.serialize(coding);
      w.varint(mb.size());
      w.bytes(mb.data(), mb.size());
    }
  }
  return std::move(w.buf());
}

Result<SplitModel> SplitModel::deserialize(const uint8_t* p, size_t n, const TensorGeometry& parent,
                                           const std::string& what, TableCoding coding) {
  ByteReader r(p, n);
  SplitModel m;
  const std::string W = what + ": split model";
  auto bad = [&](const std::string& field, uint64_t v, const std::string& allowed) {
    return Status::Corruption(W + " " + field + " " + std::to_string(v) + " (allowed " + allowed + ")");
  };
  m.ggml_type = r.u16();
  m.block_bytes = r.u16();
  const uint8_t ns = r.u8();
  if (!r.ok()) return Status::Corruption(W + " record truncated");
  if (m.block_bytes < 2 || m.block_bytes > kSplitMaxBlockBytes)
    return bad("block_bytes", m.block_bytes, "2.." + std::to_string(kSplitMaxBlockBytes));
  if (ns < 2 || ns > kSplitMaxStreams) return bad("stream count", ns, "2.." + std::to_string(kSplitMaxStreams));
  WC_RETURN_IF_ERROR(m.check_parent(parent, what));
  std::vector<uint8_t> covered(m.block_bytes, 0);
  for (uint32_t s = 0; s < ns; ++s) {
    SplitStream st;
    const std::string S = "stream " + std::to_string(s);
    const uint8_t nr = r.u8();
    if (!r.ok()) return Status::Corruption(W + " record truncated");
    if (nr < 1 || nr > kSplitMaxRanges) return bad(S + " range count", nr, "1.." + std::to_string(kSplitMaxRanges));
    for (uint32_t k = 0; k < nr; ++k) {
      SplitRange rg;
      rg.off = r.u16();
      rg.len = r.u16();
      if (!r.ok()) return Status::Corruption(W + " record truncated");
      if (rg.len == 0 || uint32_t{rg.off} + rg.len > m.block_bytes)
        return Status::Corruption(W + " " + S + " range [" + std::to_string(rg.off) + ", " +
                                  std::to_string(uint32_t{rg.off} + rg.len) + ") is empty or outside the block of " +
                                  std::to_string(m.block_bytes) + " bytes");
      for (uint32_t b = rg.off; b < uint32_t{rg.off} + rg.len; ++b) {
        if (covered[b]) return bad(S + " range covers block byte", b, "each byte in one stream once");
        covered[b] = 1;
      }
      st.ranges.push_back(rg);
    }
    st.elem_bits = r.u8();
    const uint8_t flag = r.u8();
    if (!r.ok()) return Status::Corruption(W + " record truncated");
    const uint32_t eb = st.elem_bits;
    if (eb != 2 && eb != 4 && eb != 8 && eb != 16 && eb != 32) return bad(S + " elem_bits", eb, "2, 4, 8, 16, 32");
    if ((st.bytes_per_block() * 8) % eb)
      return bad(S + " elem_bits", eb, "a divisor of the stream's " + std::to_string(st.bytes_per_block() * 8) +
                                           " bits per block");
    if (flag > 1) return bad(S + " model flag", flag, "0, 1");
    m.streams.push_back(std::move(st));
    if (flag == 1) {
      const uint64_t ml = r.varint();
      const uint8_t* mp = r.take(ml);
      if (!r.ok() || !mp) return Status::Corruption(W + " " + S + " model record truncated");
      const TensorGeometry sg = m.stream_geometry(parent, s);
      auto sm = TensorModel::deserialize(mp, ml, sg, W + " " + S, coding);
      if (!sm.ok()) return sm.status();
      SplitStream& back = m.streams.back();
      back.model = std::move(sm).value();
      if (back.model.kind == ModelKind::kInt && back.model.ip.zgroup)
        return bad(S + " zgroup", back.model.ip.zgroup, "0 (no zero points in a stream)");
      back.has_model = true;
    }
  }
  for (uint32_t b = 0; b < m.block_bytes; ++b)
    if (!covered[b]) return bad("block byte", b, "covered by a stream (none covers it)");
  if (r.remaining()) return bad("record trailing bytes", r.remaining(), "0");
  return m;
}

std::string SplitModel::describe() const {
  std::string d = "split " + std::to_string(streams.size()) + " streams:";
  for (const auto& st : streams) {
    d += " [" + std::to_string(st.bytes_per_block()) + "B ";
    d += st.has_model ? st.model.describe() : std::string("-");
    d += "]";
  }
  return d;
}

Status parse_split_payload(const SplitModel& m, const uint8_t* p, size_t n, const std::string& what,
                           std::vector<SplitPart>* parts) {
  ByteReader r(p, n);
  parts->clear();
  for (size_t s = 0; s < m.streams.size(); ++s) {
    SplitPart part;
    part.method = r.u8();
    part.len = r.u32();
    part.data = r.take(part.len);
    if (!r.ok() || (part.len && !part.data))
      return Status::Corruption(what + ": split chunk payload truncated in stream " + std::to_string(s));
    if (part.method > 2)
      return Status::Corruption(what + ": split chunk stream " + std::to_string(s) + " method " +
                                std::to_string(part.method) + " (allowed 0..2)");
    if (part.method == 2 && !m.streams[s].has_model)
      return Status::Corruption(what + ": split chunk stream " + std::to_string(s) +
                                " is model-coded but the stream has no model");
    parts->push_back(part);
  }
  if (r.remaining())
    return Status::Corruption(what + ": split chunk payload has " + std::to_string(r.remaining()) +
                              " trailing bytes");
  return Status::OK();
}

}  // namespace wcodec
