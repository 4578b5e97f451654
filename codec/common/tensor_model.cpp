// codec/common/tensor_model.cpp — chunk checksum, chunk geometry and the
// model record (serialize, deserialize, describe). See tensor_model.h and
// docs/wcodec-format.md.
#include "tensor_model.h"

#include <xxhash.h>

#include <cstdio>
#include <cstring>

#include "bytes.h"
#include "chunk_hash_x86.h"

namespace wcodec {

namespace {
using HashFn = uint64_t (*)(const uint8_t*, size_t);
uint64_t xxh3_64_base(const uint8_t* p, size_t n) { return XXH3_64bits(p, n); }
// The widest XXH3 build this CPU runs (chunk_hash_x86.h).
HashFn pick_hash() {
#ifdef WCODEC_XXH3_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return xxh3_64_avx512;
  if (__builtin_cpu_supports("avx2")) return xxh3_64_avx2;
#endif
  return xxh3_64_base;
}
}  // namespace

uint64_t chunk_hash(const uint8_t* p, size_t n) {
  static const HashFn hash = pick_hash();
  return hash(p, n);
}

// ------------------------------------------------------------------ geometry
uint64_t TensorGeometry::num_chunks() const {
  if (rows == 0 || cols == 0 || chunk_rows == 0 || chunk_cols == 0) return 0;
  if (chunk_cols == cols) return (rows + chunk_rows - 1) / chunk_rows;
  return rows * ((cols + chunk_cols - 1) / chunk_cols);
}

void TensorGeometry::chunk_rect(uint64_t i, uint64_t* row0, uint64_t* col0, uint64_t* h, uint64_t* w) const {
  if (chunk_cols == cols) {
    *row0 = i * chunk_rows;
    *h = std::min(chunk_rows, rows - *row0);
    *col0 = 0;
    *w = cols;
  } else {
    const uint64_t per_row = (cols + chunk_cols - 1) / chunk_cols;
    *row0 = i / per_row;
    *col0 = (i % per_row) * chunk_cols;
    *h = 1;
    *w = std::min(chunk_cols, cols - *col0);
  }
}

static uint32_t t0_nsym(const TensorModel& m) {
  switch (m.kind) {
    case ModelKind::kFloat: return float_e_nsym(m.fp);
    case ModelKind::kInt: return m.ip.nsym;
    case ModelKind::kBytes: return 256;
  }
  return 0;
}
static uint32_t t0_count(const TensorModel& m) {
  switch (m.kind) {
    case ModelKind::kFloat: return float_e_nctx(m.fp);
    case ModelKind::kInt: return int_nctx(m.ip);
    case ModelKind::kBytes: return bytes_nctx(m.bp);
  }
  return 0;
}
static uint32_t t1_count(const TensorModel& m) { return m.kind == ModelKind::kFloat ? float_sm_nctx(m.fp) : 0; }

std::vector<uint8_t> TensorModel::serialize(TableCoding coding) const {
  ByteWriter w;
  w.u8(static_cast<uint8_t>(kind));
  switch (kind) {
    case ModelKind::kFloat:
      w.u8(fp.elem_bytes);
      w.u8(fp.eb);
      w.u8(fp.mb);
      w.u8(fp.k);
      w.u8(fp.emode);
      w.u8(fp.ne);
      w.u8(fp.nm);
      w.u8(fp.sign_ctx);
      w.u16(static_cast<uint16_t>(fp.elo));
      w.u16(static_cast<uint16_t>(fp.mlo));
      break;
    case ModelKind::kInt:
      w.u8(ip.sub);
      w.u8(ip.center);
      w.u16(ip.esc);
      w.u16(ip.nsym);
      w.u8(ip.nbr_mode);
      w.u8(ip.nb);
      for (auto v : ip.thr) w.u16(v);
      w.u8(ip.ns);
      for (auto v : ip.sthr) w.u8(v);
      w.u8(ip.use_rc);
      w.u8(ip.use_cc);
      w.u8(ip.tools);
      w.u32(ip.zgroup);
      w.u8(ip.off_a);
      w.u8(ip.off_b);
      if (ip.nbr_mode >= 2) w.u8(ip.period);  // format 2.1 (mode 2), 2.2 (mode 3), 2.10 (mode 4)
      break;
    case ModelKind::kBytes:
      w.u8(bp.elem_bytes);
      w.u8(bp.ctx_mode);
      break;
  }
  BitWriter bw;
  if (kind == ModelKind::kInt) {
    if (ip.use_rc)
      for (auto v : rc) bw.put(v, 5);
    if (ip.use_cc)
      for (auto v : cc) bw.put(v, 5);
  }
  for (auto& t : t0) write_table(bw, t, coding);
  for (auto& t : t1) write_table(bw, t, coding);
  auto bits = bw.finish();
  w.varint(bits.size());
  w.bytes(bits.data(), bits.size());
  return std::move(w.buf());
}

Result<TensorModel> TensorModel::deserialize(const uint8_t* p, size_t n, const TensorGeometry& g,
                                             const std::string& what, TableCoding coding) {
  ByteReader r(p, n);
  TensorModel m;
  const uint8_t kind = r.u8();
  auto bad = [&](const std::string& field, int64_t v, const std::string& range) {
    return Status::Corruption(what + ": model field " + field + " = " + std::to_string(v) + " (allowed " + range +
                              ")");
  };
  if (kind < 1 || kind > 3) return bad("kind", kind, "1..3");
  m.kind = static_cast<ModelKind>(kind);
  switch (m.kind) {
    case ModelKind::kFloat: {
      m.fp.elem_bytes = r.u8();
      m.fp.eb = r.u8();
      m.fp.mb = r.u8();
      m.fp.k = r.u8();
      m.fp.emode = r.u8();
      m.fp.ne = r.u8();
      m.fp.nm = r.u8();
      m.fp.sign_ctx = r.u8();
      m.fp.elo = static_cast<int16_t>(r.u16());
      m.fp.mlo = static_cast<int16_t>(r.u16());
      if (!r.ok()) return Status::Corruption(what + ": model parameters truncated");
      const auto& f = m.fp;
      if (f.elem_bytes != 1 && f.elem_bytes != 2 && f.elem_bytes != 4) return bad("elem_bytes", f.elem_bytes, "1, 2, 4");
      if (f.elem_bytes * 8u != g.elem_bits) return bad("elem_bytes", f.elem_bytes, "element size of the tensor");
      if (f.eb < 1 || f.eb > 8) return bad("exponent_bits", f.eb, "1..8");
      if (1u + f.eb + f.mb != f.elem_bytes * 8u) return bad("mantissa_bits", f.mb, "element bits - 1 - exponent bits");
      if (f.k > 7 || f.k > f.mb) return bad("k", f.k, "0..min(7, mantissa bits)");
      if (f.mb - f.k > 24) return bad("k", f.k, "raw bits <= 24");
      if (f.emode > kFloatJointMode) return bad("emode", f.emode, "0..5");
      if (float_joint(f) && 1u + f.eb + f.k > 8) return bad("k", f.k, "1 + exponent bits + k <= 8 (emode 5)");
      if (float_joint(f) && f.nm != 1) return bad("nm", f.nm, "1 (emode 5)");
      if (float_joint(f) && f.sign_ctx != 0) return bad("sign_ctx", f.sign_ctx, "0 (emode 5)");
      if (f.ne < 1 || f.ne > 64) return bad("ne", f.ne, "1..64");
      if (f.nm < 1 || f.nm > 64) return bad("nm", f.nm, "1..64");
      if (f.sign_ctx > 1) return bad("sign_ctx", f.sign_ctx, "0..1");
      break;
    }
    case ModelKind::kInt: {
      auto& ip = m.ip;
      ip.sub = r.u8();
      ip.center = r.u8();
      ip.esc = r.u16();
      ip.nsym = r.u16();
      ip.nbr_mode = r.u8();
      ip.nb = r.u8();
      for (auto& v : ip.thr) v = r.u16();
      ip.ns = r.u8();
      for (auto& v : ip.sthr) v = r.u8();
      ip.use_rc = r.u8();
      ip.use_cc = r.u8();
      ip.tools = r.u8();
      ip.zgroup = r.u32();
      ip.off_a = r.u8();
      ip.off_b = r.u8();
      ip.period = ip.nbr_mode >= 2 && ip.nbr_mode <= 4 ? r.u8() : 0;
      if (!r.ok()) return Status::Corruption(what + ": model parameters truncated");
      if (ip.nbr_mode > 4) return bad("nbr_mode", ip.nbr_mode, "0..4");
      if (ip.nbr_mode == 4) {
        // Kernel-row symbols (format 2.10): one form only, 3x3 kernels of
        // ternary codes, whole kernels in every chunk row.
        if (ip.sub != kIntTernary) return bad("nbr_mode", ip.nbr_mode, "4 only for ternary codes");
        if (ip.period != kKernRowCodes) return bad("period", ip.period, "9 (nbr_mode 4)");
        if (ip.off_a != 3) return bad("off_a", ip.off_a, "3 (nbr_mode 4)");
        if (ip.off_b != 0) return bad("off_b", ip.off_b, "0 (nbr_mode 4)");
        if (ip.esc != 9) return bad("esc", ip.esc, "9 (nbr_mode 4: 27 symbols)");
        if (ip.nb != 1) return bad("nb", ip.nb, "1 (nbr_mode 4)");
        if (ip.use_cc != 0) return bad("use_cc", ip.use_cc, "0 (nbr_mode 4)");
        if (ip.tools != 0) return bad("tools", ip.tools, "0 (nbr_mode 4)");
        if (ip.zgroup != 0) return bad("zgroup", ip.zgroup, "0 (nbr_mode 4)");
        if (g.cols % kKernRowCodes != 0) return bad("cols", static_cast<int64_t>(g.cols), "a multiple of 9 (nbr_mode 4)");
        if (g.chunk_cols % kKernRowCodes != 0)
          return bad("chunk_cols", static_cast<int64_t>(g.chunk_cols), "a multiple of 9 (nbr_mode 4)");
      }
      if ((ip.nbr_mode == 2 || ip.nbr_mode == 3) && (ip.period < 2 || ip.period > 64))
        return bad("period", ip.period, "2..64");
      if (ip.nbr_mode == 3 && (ip.off_a < 1 || ip.off_a > ip.period || ip.period % ip.off_a != 0))
        return bad("off_a", ip.off_a, "mode 3: a divisor of period");
      if (ip.off_a > 64 || ((ip.nbr_mode == 1 || ip.nbr_mode == 2) && ip.off_a < 3))
        return bad("off_a", ip.off_a, "mode 0: 0..64, modes 1, 2: 3..64");
      if (ip.nbr_mode == 2 && ip.sub != kIntTernary) return bad("nbr_mode", ip.nbr_mode, "2 only for ternary codes");
      if (ip.off_b > 64 || (ip.off_b && (ip.nbr_mode != 1 || ip.off_b < 3)))
        return bad("off_b", ip.off_b, "0, or 3..64 in mode 1");
      if (ip.sub > kIntTernary) return bad("int_sub", ip.sub, "0..3");
      const uint32_t bits = 8 / int_codes_per_byte(ip.sub);
      if (bits != g.elem_bits) return bad("int_sub", ip.sub, "matching the element size");
      if (ip.esc < 2 || ip.esc > 238) return bad("esc", ip.esc, "2..238");
      if (ip.nsym != ip.esc + kEscClasses) return bad("nsym", ip.nsym, "esc + 18");
      if (ip.nb < 1 || ip.nb > 8) return bad("nb", ip.nb, "1..8");
      if (ip.ns < 1 || ip.ns > 16) return bad("ns", ip.ns, "1..16");
      if (ip.use_rc > 1 || ip.use_cc > 1 || ip.tools > 1) return bad("flags", ip.use_rc, "0..1");
      if (ip.zgroup > (1u << 20)) return bad("zgroup", ip.zgroup, "0..2^20");
      if (ip.sub == kIntNibble && ip.center > 15) return bad("center", ip.center, "0..15");
      break;
    }
    case ModelKind::kBytes:
      m.bp.elem_bytes = r.u8();
      m.bp.ctx_mode = r.u8();
      if (!r.ok()) return Status::Corruption(what + ": model parameters truncated");
      if (m.bp.elem_bytes < 1 || m.bp.elem_bytes > 16 || m.bp.elem_bytes * 8u != g.elem_bits)
        return bad("elem_bytes", m.bp.elem_bytes, "element size of the tensor, 1..16");
      if (m.bp.ctx_mode > 1) return bad("ctx_mode", m.bp.ctx_mode, "0..1");
      break;
  }
  const uint64_t blen = r.varint();
  const uint8_t* bits = r.take(blen);
  if (!r.ok() || !bits) return Status::Corruption(what + ": model tables truncated");
  if (r.remaining()) return bad("trailing bytes", static_cast<int64_t>(r.remaining()), "0");
  BitReader br(bits, blen);
  if (m.kind == ModelKind::kInt) {
    if (g.rows > (1u << 28) || g.cols > (1u << 30)) return Status::Corruption(what + ": tensor grid too large");
    if (m.ip.use_rc) {
      m.rc.resize(g.rows);
      for (auto& v : m.rc) v = static_cast<uint8_t>(br.get(5));
    } else {
      m.rc.assign(1, 0);
    }
    if (m.ip.use_cc) {
      m.cc.resize(g.cols);
      for (auto& v : m.cc) v = static_cast<uint8_t>(br.get(5));
    } else {
      m.cc.assign(1, 0);
    }
    if (!br.ok()) return Status::Corruption(what + ": model side information truncated");
  }
  const uint32_t n0 = t0_count(m), n1 = t1_count(m), ns0 = t0_nsym(m);
  const uint32_t ns1 = m.kind == ModelKind::kFloat ? (2u << m.fp.k) : 0;
  m.t0.resize(n0);
  m.t1.resize(n1);
  for (auto& t : m.t0)
    if (!read_table(br, ns0, kMaxProbBits, &t, coding)) return Status::Corruption(what + ": malformed frequency table");
  for (auto& t : m.t1)
    if (!read_table(br, ns1, kMaxProbBits, &t, coding)) return Status::Corruption(what + ": malformed frequency table");
  m.finalize();
  return m;
}

std::string TensorModel::describe() const {
  static const char* emodes[] = {"o0", "left", "avg", "top", "l*t", "joint"};
  static const char* subs[] = {"i8", "u8", "u4", "tern"};
  char buf[160];
  switch (kind) {
    case ModelKind::kFloat:
      if (float_joint(fp))
        std::snprintf(buf, sizeof buf, "joint:left+s/%u k%u raw%u", fp.ne, fp.k, fp.mb - fp.k);
      else
        std::snprintf(buf, sizeof buf, "exp:%s/%u sm:k%u/%u%s raw%u", emodes[fp.emode <= 4 ? fp.emode : 0], fp.ne,
                      fp.k, fp.nm, fp.sign_ctx ? "+s" : "", fp.mb - fp.k);
      break;
    case ModelKind::kInt:
      if (ip.nbr_mode == 4)
        std::snprintf(buf, sizeof buf, "%s krow3x3 ns%u%s", subs[ip.sub & 3], ip.ns, ip.use_rc ? " row" : "");
      else if (ip.nbr_mode == 2)
        std::snprintf(buf, sizeof buf, "%s phase%u nbr%u ns%u%s%s%s", subs[ip.sub & 3], ip.period, ip.off_a, ip.ns,
                      ip.use_rc ? " row" : "", ip.use_cc ? " col" : "", ip.tools ? " tools" : "");
      else if (ip.nbr_mode == 3)
        std::snprintf(buf, sizeof buf, "%s kern%ux%u ns%u nb%u%s%s%s%s", subs[ip.sub & 3], ip.period / ip.off_a,
                      ip.off_a, ip.ns, ip.nb, ip.use_rc ? " row" : "", ip.use_cc ? " col" : "",
                      ip.tools ? " tools" : "", ip.zgroup ? " zp" : "");
      else
        std::snprintf(buf, sizeof buf, "%s %s%u/%u ns%u nb%u%s%s%s%s", subs[ip.sub & 3], ip.nbr_mode ? "nbr" : "act",
                      ip.off_a, ip.off_b, ip.ns, ip.nb, ip.use_rc ? " row" : "", ip.use_cc ? " col" : "",
                      ip.tools ? " tools" : "", ip.zgroup ? " zp" : "");
      break;
    case ModelKind::kBytes:
      std::snprintf(buf, sizeof buf, "planes%u%s", bp.elem_bytes, bp.ctx_mode ? "+left" : "");
      break;
  }
  return buf;
}

}  // namespace wcodec
