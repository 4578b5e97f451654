// codec/common/split_model.cpp — the split model record and chunk payload
// framing (docs/wcodec-format.md §6.1, §8.4), shared by the encoder and the
// decoders. See split_model.h.
//
// Thread-safety: pure functions; a parsed SplitModel is immutable.
#include "split_model.h"

#include <cstring>

#include "bytes.h"
#include "split_palette.h"
#include "split_recode.h"

namespace wcodec {

uint32_t SplitStream::bytes_per_block() const {
  if (ranges.empty()) return derived_bpb;
  uint32_t n = 0;
  for (const auto& r : ranges) n += r.len;
  return n;
}

uint32_t SplitStream::coded_bytes_per_block() const {
  return recode == kRecodeQ3Codes ? bytes_per_block() / kQ3StreamBytes * kQ3Codes : bytes_per_block();
}

uint32_t SplitStream::derived_bytes_per_block(uint32_t k) const {
  if (recode == kRecodeZeroPos) {
    const uint32_t zgroups = bytes_per_block() / kZpGroupBytes;
    return k == kZpPos ? zgroups : zgroups * (kZpCodes - 1);
  }
  const uint32_t groups = codes_per_block() / pal_group;
  return k == kPalFirst ? groups : k == kPalGaps ? groups * kPaletteGaps : groups * (pal_group / 2);
}

size_t SplitModel::num_parts() const {
  size_t n = 0;
  for (const auto& st : streams) n += st.has_derived() ? st.derived.size() : 1;
  return n;
}

uint16_t SplitModel::format_minor() const {
  // Format 2.10: a stream (or derived stream) with kernel-row symbols.
  auto krow = [](const SplitStream& st) {
    return st.has_model && st.model.kind == ModelKind::kInt && st.model.ip.nbr_mode == 4;
  };
  for (const auto& st : streams) {
    if (krow(st)) return 10;
    for (const auto& d : st.derived)
      if (krow(d)) return 10;
  }
  uint16_t minor = 5;
  for (const auto& st : streams) {
    if (st.recode == kRecodeZeroPos) return 9;
    if (st.recode == kRecodeQ3Codes) minor = 8;
    if (minor >= 8) continue;
    if (st.recoded()) minor = 7;
    if (st.palette() && minor < 6) minor = 6;
  }
  return minor;
}

TensorGeometry SplitModel::stream_geometry(const TensorGeometry& parent, size_t s) const {
  return geometry_of(parent, streams[s]);
}

TensorGeometry SplitModel::geometry_of(const TensorGeometry& parent, const SplitStream& st) const {
  TensorGeometry g;
  g.elem_bits = st.elem_bits;
  if (parent.rows == 0) return g;
  const uint64_t blocks = parent.row_bytes() / block_bytes;
  g.rows = parent.rows;
  g.cols = blocks * st.coded_bytes_per_block() * 8 / st.elem_bits;
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
    // The common sizes with a fixed-size copy (no memcpy call per block):
    // fp16 scales (2 bytes per block), 4-bit codes (16), 8-bit codes (32).
    if (len == 2) {
      for (uint64_t b = 0; b < blocks; ++b) std::memcpy(rows_bytes + b * block_bytes + off, in + 2 * b, 2);
      return;
    }
    if (len == 16) {
      for (uint64_t b = 0; b < blocks; ++b) std::memcpy(rows_bytes + b * block_bytes + off, in + 16 * b, 16);
      return;
    }
    if (len == 32) {
      for (uint64_t b = 0; b < blocks; ++b) std::memcpy(rows_bytes + b * block_bytes + off, in + 32 * b, 32);
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
    auto coded = [&](const SplitStream& c) {
      w.u8(c.has_model ? 1 : 0);
      if (c.has_model) {
        const auto mb = c.model.serialize(coding);
        w.varint(mb.size());
        w.bytes(mb.data(), mb.size());
      }
    };
    if (st.recoded()) {
      w.u8(3);
      w.u8(st.recode);
      if (st.recode == kRecodeZeroShift) {
        w.u16(st.rc_d_off);
        w.u16(st.rc_m_off);
      }
      if (st.recode == kRecodeZeroPos) {
        for (const auto& d : st.derived) {
          w.u8(d.elem_bits);
          coded(d);
        }
        continue;
      }
      coded(st);
      continue;
    }
    if (!st.palette()) {
      coded(st);
      continue;
    }
    w.u8(2);
    w.u16(st.pal_group);
    w.u8(st.pal_q5 ? kPalCodesQ5 : st.pal_signed ? kPalCodesI8 : kPalCodesU8);
    for (const auto& d : st.derived) {
      w.u8(d.elem_bits);
      coded(d);
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
  auto check_bits = [&](const std::string& S, const SplitStream& st) -> Status {
    const uint32_t eb = st.elem_bits;
    if (eb != 2 && eb != 4 && eb != 8 && eb != 16 && eb != 32) return bad(S + " elem_bits", eb, "2, 4, 8, 16, 32");
    if ((st.coded_bytes_per_block() * 8) % eb)
      return bad(S + " elem_bits", eb, "a divisor of the stream's " + std::to_string(st.coded_bytes_per_block() * 8) +
                                           " bits per block");
    return Status::OK();
  };
  auto read_model = [&](const std::string& S, uint8_t flag, SplitStream& st) -> Status {
    if (flag != 1) return Status::OK();
    const uint64_t ml = r.varint();
    const uint8_t* mp = r.take(ml);
    if (!r.ok() || !mp) return Status::Corruption(W + " " + S + " model record truncated");
    auto sm = TensorModel::deserialize(mp, ml, m.geometry_of(parent, st), W + " " + S, coding);
    if (!sm.ok()) return sm.status();
    st.model = std::move(sm).value();
    if (st.model.kind == ModelKind::kInt && st.model.ip.zgroup)
      return bad(S + " zgroup", st.model.ip.zgroup, "0 (no zero points in a stream)");
    st.has_model = true;
    return Status::OK();
  };
  // The `count` derived streams of st (a palette's or the forced zero's):
  // each its elem_bits, model flag and model.
  auto read_derived = [&](const std::string& S, uint32_t count, SplitStream& st) -> Status {
    for (uint32_t k = 0; k < count; ++k) {
      SplitStream d;
      const std::string D = S + " derived " + std::to_string(k);
      d.derived_bpb = st.derived_bytes_per_block(k);
      d.elem_bits = r.u8();
      const uint8_t dflag = r.u8();
      if (!r.ok()) return Status::Corruption(W + " record truncated");
      WC_RETURN_IF_ERROR(check_bits(D, d));
      if (dflag > 1) return bad(D + " model flag", dflag, "0, 1");
      WC_RETURN_IF_ERROR(read_model(D, dflag, d));
      st.derived.push_back(std::move(d));
    }
    return Status::OK();
  };
  std::vector<uint8_t> covered(m.block_bytes, 0);  // 1 + the stream holding each byte
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
        covered[b] = static_cast<uint8_t>(s + 1);
      }
      st.ranges.push_back(rg);
    }
    st.elem_bits = r.u8();
    const uint8_t flag = r.u8();
    if (!r.ok()) return Status::Corruption(W + " record truncated");
    if (flag != 3) WC_RETURN_IF_ERROR(check_bits(S, st));
    if (flag > 3)
      return bad(S + " model flag", flag, "0, 1, 2 (a palette stream, format 2.6), 3 (a recoded stream, format 2.7)");
    if (flag == 3) {
      // A recoded stream (§8.6).
      st.recode = r.u8();
      if (!r.ok()) return Status::Corruption(W + " record truncated");
      if (st.recode == kRecodeNone || st.recode > kRecodeLast)
        return bad(S + " recode", st.recode,
                   "1 zero-point shift, 2 fp16 as bf16, 3 3-bit codes (format 2.8), 4 forced zero apart (format 2.9)");
      if (st.recode == kRecodeQ3Codes && st.bytes_per_block() != kQ3StreamBytes)
        return bad(S + " bytes per block", st.bytes_per_block(),
                   std::to_string(kQ3StreamBytes) + " for 3-bit codes (hmask and qs)");
      WC_RETURN_IF_ERROR(check_bits(S, st));
      if (st.recode == kRecodeZeroShift) {
        st.rc_d_off = r.u16();
        st.rc_m_off = r.u16();
        if (!r.ok()) return Status::Corruption(W + " record truncated");
        for (const auto& [name, off] : {std::pair<const char*, uint16_t>{"d_off", st.rc_d_off},
                                        std::pair<const char*, uint16_t>{"m_off", st.rc_m_off}}) {
          if (uint32_t{off} + 2 > m.block_bytes)
            return bad(S + " recode " + name, off, "an fp16 inside the block of " + std::to_string(m.block_bytes) +
                                                       " bytes");
          if (covered[off] == 0 || covered[off] > s || covered[off + 1] == 0 || covered[off + 1] > s)
            return bad(S + " recode " + name, off, "bytes held by an earlier stream");
        }
      } else if (st.recode == kRecodeF16AsBf16 && st.bytes_per_block() % 2) {
        return bad(S + " bytes per block", st.bytes_per_block(), "even for fp16 as bf16");
      } else if (st.recode == kRecodeZeroPos) {
        // Two derived streams (§8.6): positions, the other codes.
        if (st.bytes_per_block() % kZpGroupBytes)
          return bad(S + " bytes per block", st.bytes_per_block(),
                     "a multiple of " + std::to_string(kZpGroupBytes) + " for the forced zero apart");
        if (st.elem_bits != 8) return bad(S + " elem_bits", st.elem_bits, "8 for the forced zero apart");
        WC_RETURN_IF_ERROR(read_derived(S, kZpDerivedCount, st));
        m.streams.push_back(std::move(st));
        continue;
      }
      const uint8_t mflag = r.u8();
      if (!r.ok()) return Status::Corruption(W + " record truncated");
      if (mflag > 1) return bad(S + " recoded model flag", mflag, "0, 1");
      WC_RETURN_IF_ERROR(read_model(S, mflag, st));
      m.streams.push_back(std::move(st));
      continue;
    }
    if (flag < 2) {
      WC_RETURN_IF_ERROR(read_model(S, flag, st));
      m.streams.push_back(std::move(st));
      continue;
    }
    // A palette stream (§8.5).
    st.pal_group = r.u16();
    const uint8_t order = r.u8();
    if (!r.ok()) return Status::Corruption(W + " record truncated");
    if (st.elem_bits != 8) return bad(S + " elem_bits", st.elem_bits, "8 for a palette stream");
    if (st.pal_group < kPaletteMinGroup || st.pal_group > kPaletteMaxGroup || st.pal_group % 2)
      return bad(S + " palette group", st.pal_group,
                 "even, " + std::to_string(kPaletteMinGroup) + ".." + std::to_string(kPaletteMaxGroup));
    if (order > kPalCodesQ5) return bad(S + " palette codes", order, "0 uint8, 1 int8, 2 ggml 5-bit");
    st.pal_signed = order == kPalCodesI8;
    st.pal_q5 = order == kPalCodesQ5;
    if (st.pal_q5 && st.bytes_per_block() % kQ5Bytes)
      return bad(S + " bytes per block", st.bytes_per_block(), "a multiple of 20 for 5-bit codes");
    if (st.codes_per_block() % st.pal_group)
      return bad(S + " palette group", st.pal_group,
                 "a divisor of the stream's " + std::to_string(st.codes_per_block()) + " codes per block");
    WC_RETURN_IF_ERROR(read_derived(S, kPalDerivedCount, st));
    m.streams.push_back(std::move(st));
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
    if (st.palette()) {
      d += "palette/" + std::to_string(st.pal_group) + (st.pal_q5 ? " q5" : st.pal_signed ? " i8" : " u8");
      for (const auto& x : st.derived) d += " (" + (x.has_model ? x.model.describe() : std::string("-")) + ")";
    } else if (st.recode == kRecodeZeroPos) {
      d += "zeropos";
      for (const auto& x : st.derived) d += " (" + (x.has_model ? x.model.describe() : std::string("-")) + ")";
    } else {
      if (st.recode == kRecodeZeroShift) d += "zshift ";
      if (st.recode == kRecodeF16AsBf16) d += "bf16 ";
      if (st.recode == kRecodeQ3Codes) d += "q3codes ";
      d += st.has_model ? st.model.describe() : std::string("-");
    }
    d += "]";
  }
  return d;
}

Status parse_split_payload(const SplitModel& m, const uint8_t* p, size_t n, const std::string& what,
                           std::vector<SplitPart>* parts) {
  ByteReader r(p, n);
  parts->clear();
  auto one = [&](const SplitStream& st, const std::string& k) -> Status {
    SplitPart part;
    part.method = r.u8();
    part.len = r.u32();
    part.data = r.take(part.len);
    if (!r.ok() || (part.len && !part.data))
      return Status::Corruption(what + ": split chunk payload truncated in stream " + k);
    if (part.method > 2)
      return Status::Corruption(what + ": split chunk stream " + k + " method " +
                                std::to_string(part.method) + " (allowed 0..2)");
    if (part.method == 2 && !st.has_model)
      return Status::Corruption(what + ": split chunk stream " + k + " is model-coded but the stream has no model");
    parts->push_back(part);
    return Status::OK();
  };
  for (size_t s = 0; s < m.streams.size(); ++s) {
    const SplitStream& st = m.streams[s];
    if (!st.has_derived()) {
      WC_RETURN_IF_ERROR(one(st, std::to_string(s)));
      continue;
    }
    for (size_t k = 0; k < st.derived.size(); ++k)
      WC_RETURN_IF_ERROR(one(st.derived[k], std::to_string(s) + " derived " + std::to_string(k)));
  }
  if (r.remaining())
    return Status::Corruption(what + ": split chunk payload has " + std::to_string(r.remaining()) +
                              " trailing bytes");
  return Status::OK();
}

}  // namespace wcodec
