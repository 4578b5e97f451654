// codec/src/tensor_codec.cpp — model selection, chunk encoding and CPU chunk
// decoding. See tensor_codec.h and docs/wcodec-format.md.
#include "tensor_codec.h"

#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <list>
#include <mutex>
#include <numeric>
#include <type_traits>
#include <unordered_map>

#include "bytes.h"
#include "chunk_hash_x86.h"
#include "int_rows.h"
#include "wcodec/container.h"

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

static TensorGeometry make_geometry(uint64_t nbytes, uint64_t rows, uint32_t elem_bits, uint64_t target) {
  TensorGeometry g;
  g.elem_bits = elem_bits;
  if (nbytes == 0) return g;
  if (rows == 0 || nbytes % rows) rows = 1;
  g.rows = rows;
  g.cols = nbytes / rows * 8 / elem_bits;
  const uint64_t rb = g.row_bytes();
  if (rb <= target) {
    g.chunk_cols = g.cols;
    g.chunk_rows = std::min<uint64_t>(rows, std::max<uint64_t>(1, target / rb));
  } else {
    g.chunk_rows = 1;
    uint64_t c = target * 8 / elem_bits;
    c -= c % 8;
    g.chunk_cols = std::max<uint64_t>(8, c);
    if (g.chunk_cols >= g.cols) g.chunk_cols = g.cols;
  }
  return g;
}

// ------------------------------------------------------------------ model
// Packed slot entries for vector decoders:
// symbol | (freq - 1) << 8 | (slot - start) << 20; small int alphabets use
// the two-level layout instead.
static bool small_alphabet(const TensorModel& m) { return m.kind == ModelKind::kInt && m.ip.nsym <= 32; }

// Slot storage of dropped tables, handed to the next build. Tables are
// built on a model's first use and dropped when the table budget evicts
// them; a reader of a file whose tables exceed the budget (isnet-medium.
// rtn-int4 needs 73 MB) rebuilds them on every pass, and a mount (whose
// budget is a 64th of its chunk cache) rebuilds them as it moves through
// the tensors. Freshly allocated storage of that size comes
// from the kernel page by page (malloc maps it and unmaps it on free):
// when isnet-medium.f16's tables (74 MB with the reference tables) exceeded
// the budget, page faults and page clearing were 6% of a whole-file decode.
// The bin holds at most half the table budget.
class SlotBin {
 public:
  static SlotBin& get() {
    static SlotBin* b = new SlotBin();  // outlives static models
    return *b;
  }
  void set_cap(uint64_t bytes) {
    std::lock_guard<std::mutex> lk(mu_);
    cap_ = bytes;
    while (bytes_ > cap_) drop_oldest_locked();
  }
  // Storage of n entries (contents undefined): the smallest binned vector
  // that holds n without wasting more than half of it, else a new one.
  void take(size_t n, TensorModel::VectorTables::Slots* out) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      size_t best = bin_.size();
      for (size_t i = 0; i < bin_.size(); ++i) {
        const size_t c = bin_[i].capacity();
        if (c >= n && c / 2 <= n && (best == bin_.size() || c < bin_[best].capacity())) best = i;
      }
      if (best < bin_.size()) {
        bytes_ -= bin_[best].capacity() * sizeof(uint32_t);
        *out = std::move(bin_[best]);
        bin_.erase(bin_.begin() + static_cast<std::ptrdiff_t>(best));
      }
    }
    out->resize(n);  // within the capacity of a binned vector: no allocation, no writes
  }
  uint64_t bytes() {
    std::lock_guard<std::mutex> lk(mu_);
    return bytes_;
  }
  void give(TensorModel::VectorTables::Slots&& v) {
    // Small tables come from malloc's heap, whose freed memory stays mapped.
    if (v.capacity() * sizeof(uint32_t) < kMinBinned) return;
    std::lock_guard<std::mutex> lk(mu_);
    const uint64_t b = v.capacity() * sizeof(uint32_t);
    if (b > cap_) return;
    while (bytes_ + b > cap_) drop_oldest_locked();
    bytes_ += b;
    bin_.push_back(std::move(v));
  }

 private:
  static constexpr uint64_t kMinBinned = 128 * 1024;
  void drop_oldest_locked() {
    bytes_ -= bin_.front().capacity() * sizeof(uint32_t);
    bin_.erase(bin_.begin());
  }
  std::mutex mu_;
  std::vector<TensorModel::VectorTables::Slots> bin_;  // oldest first
  uint64_t bytes_ = 0;
  uint64_t cap_ = kDefaultVectorTableBudget / 2;
};

// Models whose decoder reads the reference tables (DecTable) whatever the
// CPU: small int alphabets (the vector loops' two-level lookup is those
// tables) and byte-plane models (no vector decoder).
static bool reference_only(const TensorModel& m) { return small_alphabet(m) || m.kind == ModelKind::kBytes; }

// reference: also the reference decoder's tables (t0 / t1).
static void build_vector_tables(const TensorModel& m, bool reference, TensorModel::VectorTables* vt) {
  // Symbol by symbol: each symbol's slots are one run, written once (the
  // storage is not zeroed first; every slot of every table is written).
  auto pack = [](const std::vector<FreqTable>& ts, TensorModel::VectorTables::Slots* out) {
    SlotBin::get().take(ts.size() * 4096, out);
    for (size_t i = 0; i < ts.size(); ++i) {
      const FreqTable& t = ts[i];
      uint32_t* o = out->data() + i * 4096;
      uint32_t c = 0;
      for (size_t sym = 0; sym < t.freq.size() && c < 4096; ++sym) {
        const uint32_t f = t.freq[sym];
        if (!f) continue;
        const uint32_t base = static_cast<uint32_t>(sym) | ((f - 1) << 8);
        const uint32_t n = f < 4096 - c ? f : 4096 - c;
        for (uint32_t k = 0; k < n; ++k) o[c + k] = base | (k << 20);
        c += n;
      }
      // An empty table (no symbol coded in this context) decodes nothing.
      if (c < 4096) std::fill(o + c, o + 4096, 0u);
    }
  };
  vt->reference = reference || reference_only(m);
  if (vt->reference) {
    // Reference tables: slot -> symbol and freq | start << 16 per context.
    const size_t n0 = m.t0.size(), n1 = m.t1.size();
    vt->lut_all.resize((n0 + n1) * 4096 + 4);  // + 4: 32-bit gathers of the last bytes
    std::memset(vt->lut_all.data() + (n0 + n1) * 4096, 0, 4);
    vt->fs_all.assign((n0 + n1) * 256, 0);
    for (size_t i = 0; i < n0 + n1; ++i) {
      const FreqTable& t = i < n0 ? m.t0[i] : m.t1[i - n0];
      uint8_t* lut = vt->lut_all.data() + i * 4096;
      uint32_t* fs = vt->fs_all.data() + i * 256;
      uint32_t c = 0;
      for (size_t sym = 0; sym < t.freq.size() && sym < 256; ++sym) {
        const uint32_t f = t.freq[sym];
        fs[sym] = f | (c << 16);
        const uint32_t n = f < 4096 - c ? f : 4096 - c;
        std::memset(lut + c, static_cast<int>(sym), n);
        c += n;
      }
      if (c < 4096) std::memset(lut + c, 0, 4096 - c);  // unused context
    }
    vt->d0.resize(n0);
    vt->d1.resize(n1);
    for (size_t i = 0; i < n0 + n1; ++i) {
      const DecTable d{vt->lut_all.data() + i * 4096, vt->fs_all.data() + i * 256};
      if (i < n0) vt->d0[i] = d;
      else vt->d1[i - n0] = d;
    }
  }
  // Small int alphabets decode from lut_all / fs_all (two lookups) instead
  // of packed slot entries; byte-plane models only with the reference
  // decoder, as does every model on a CPU without the vector decoders.
  if (!reference_only(m) && vector_decoder_available()) {
    pack(m.t0, &vt->slot_all);
    pack(m.t1, &vt->slot1_all);
  }
  if (m.kind == ModelKind::kInt && m.ip.sub == kIntTernary && m.ip.esc > 2) {
    vt->tern3.resize(m.t0.size());
    for (size_t i = 0; i < m.t0.size(); ++i) {
      const FreqTable& t = m.t0[i];
      uint32_t sum = 0, other = 0;
      for (size_t k = 0; k < t.freq.size(); ++k) (k < 3 ? sum : other) += t.freq[k];
      if (other || (sum && sum != 4096u) || t.freq.size() < 3) {
        vt->tern3.clear();
        break;
      }
      vt->tern3[i] = sum ? (uint32_t{t.freq[0]} | (uint32_t{t.freq[0]} + t.freq[1]) << 16) : 0x20002000u;
    }
  }
}

TensorModel::VectorTables::~VectorTables() {
  SlotBin::get().give(std::move(slot_all));
  SlotBin::get().give(std::move(slot1_all));
}

size_t TensorModel::VectorTables::bytes() const {
  return slot_all.capacity() * 4 + slot1_all.capacity() * 4 + tern3.size() * 4 +
         lut_all.size() + fs_all.size() * 4 + (d0.size() + d1.size()) * sizeof(DecTable);
}

struct TensorModel::TableSlot {
  std::mutex mu;  // guards tables
  std::shared_ptr<const VectorTables> tables;  // null: not built yet, or evicted
  ~TableSlot();
};

namespace {

// LRU of built vector tables over all models of the process, bounded by a
// byte budget. Lock order: a slot's mu, then the cache's mu_ never (the
// cache drops its lock before it resets evicted slots).
class VectorTableCache {
 public:
  static VectorTableCache& get() {
    static VectorTableCache* c = new VectorTableCache();  // outlives static models
    return *c;
  }
  void set_budget(uint64_t b) {
    std::vector<std::weak_ptr<TensorModel::TableSlot>> victims;
    {
      std::lock_guard<std::mutex> lk(mu_);
      budget_ = b;
      evict_locked(nullptr, &victims);
    }
    reset(victims);
  }
  uint64_t bytes() const {
    std::lock_guard<std::mutex> lk(mu_);
    return bytes_;
  }
  // `slot` (holding `n` bytes of tables) was used: most recent now.
  void touch(const std::shared_ptr<TensorModel::TableSlot>& slot, uint64_t n) {
    std::vector<std::weak_ptr<TensorModel::TableSlot>> victims;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = where_.find(slot.get());
      if (it != where_.end()) {
        bytes_ -= it->second->bytes;
        lru_.erase(it->second);
      }
      lru_.push_front(Entry{slot.get(), slot, n});
      where_[slot.get()] = lru_.begin();
      bytes_ += n;
      evict_locked(slot.get(), &victims);
    }
    reset(victims);
  }
  void erase(const TensorModel::TableSlot* slot) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = where_.find(slot);
    if (it == where_.end()) return;
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    where_.erase(it);
  }

 private:
  struct Entry {
    const TensorModel::TableSlot* slot;
    std::weak_ptr<TensorModel::TableSlot> weak;
    uint64_t bytes;
  };
  void evict_locked(const TensorModel::TableSlot* keep, std::vector<std::weak_ptr<TensorModel::TableSlot>>* victims) {
    while (bytes_ > budget_ && !lru_.empty() && lru_.back().slot != keep) {
      victims->push_back(lru_.back().weak);
      bytes_ -= lru_.back().bytes;
      where_.erase(lru_.back().slot);
      lru_.pop_back();
    }
  }
  static void reset(const std::vector<std::weak_ptr<TensorModel::TableSlot>>& victims) {
    for (const auto& w : victims) {
      if (auto s = w.lock()) {
        std::lock_guard<std::mutex> lk(s->mu);
        s->tables.reset();  // decodes holding them keep them until done
      }
    }
  }
  mutable std::mutex mu_;
  std::list<Entry> lru_;
  std::unordered_map<const TensorModel::TableSlot*, std::list<Entry>::iterator> where_;
  uint64_t bytes_ = 0;
  uint64_t budget_ = kDefaultVectorTableBudget;
};

}  // namespace

TensorModel::TableSlot::~TableSlot() { VectorTableCache::get().erase(this); }

void set_vector_table_budget(uint64_t bytes) {
  VectorTableCache::get().set_budget(bytes);
  SlotBin::get().set_cap(bytes / 2);
}
uint64_t vector_table_bytes() { return VectorTableCache::get().bytes(); }
uint64_t vector_table_spare_bytes() { return SlotBin::get().bytes(); }

void TensorModel::finalize() {
  vt = std::make_shared<TableSlot>();
  if (kind == ModelKind::kInt) {
    build_int_luts(ip, &luts);
    rc_pad = rc;
    rc_pad.resize(rc.size() + 4, 0);
    cc_pad = cc;
    cc_pad.resize(cc.size() + 4, 0);
  }
}

ModelView TensorModel::view(std::shared_ptr<const VectorTables>* hold, const uint8_t* zp, uint32_t zcols,
                            TableUse use) const {
  ModelView m{};
  m.kind = kind;
  m.fp = fp;
  m.ip = ip;
  m.bp = bp;
  m.t0 = nullptr;  // set from the decoding tables below
  m.t1 = nullptr;
  m.n0 = static_cast<uint32_t>(t0.size());
  m.n1 = static_cast<uint32_t>(t1.size());
  m.rc = rc.data();
  m.cc = cc.data();
  m.zp = zp;
  m.zcols = zcols;
  m.luts = &luts;
  if (vt) {
    std::shared_ptr<const VectorTables> t;
    {
      std::lock_guard<std::mutex> lk(vt->mu);
      const bool reference = use == TableUse::kAll || !vector_decoder_available();
      if (!vt->tables || (reference && !vt->tables->reference)) {
        auto built = std::make_shared<VectorTables>();
        build_vector_tables(*this, reference, built.get());
        vt->tables = std::move(built);
      }
      t = vt->tables;
    }
    VectorTableCache::get().touch(vt, t->bytes());
    m.t0 = t->d0.data();
    m.t1 = t->d1.data();
    m.slot_all = t->slot_all.empty() ? nullptr : t->slot_all.data();
    m.slot1_all = t->slot1_all.empty() ? nullptr : t->slot1_all.data();
    m.sym_small = small_alphabet(*this) ? t->lut_all.data() : nullptr;
    m.fs_small = small_alphabet(*this) ? t->fs_all.data() : nullptr;
    m.tern3 = t->tern3.empty() ? nullptr : t->tern3.data();
    *hold = std::move(t);
  }
  m.rc_pad = rc_pad.empty() ? nullptr : rc_pad.data();
  m.cc_pad = cc_pad.empty() ? nullptr : cc_pad.data();
  return m;
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
      if (ip.nbr_mode >= 2) w.u8(ip.period);  // format 2.1 (mode 2), 2.2 (mode 3)
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
      ip.period = ip.nbr_mode == 2 || ip.nbr_mode == 3 ? r.u8() : 0;
      if (!r.ok()) return Status::Corruption(what + ": model parameters truncated");
      if (ip.nbr_mode > 3) return bad("nbr_mode", ip.nbr_mode, "0..3");
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
      if (ip.nbr_mode == 2)
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

// ------------------------------------------------------------------ walkers
// The walkers visit symbols in decode order and call emit(lane, set, ctx,
// sym) for coded symbols and bits(lane, value, nbits) for uniform bits.
// They mirror chunk_decode.h exactly (same context functions).

struct FloatChunkData {
  std::vector<uint16_t> e;
  std::vector<uint8_t> sm;
  std::vector<uint32_t> raw;
};

// Element i of a float chunk (little-endian, B bytes).
template <uint32_t B>
static inline uint32_t float_elem(const uint8_t* bytes, uint64_t i) {
  const uint8_t* q = bytes + i * B;
  if constexpr (B == 1) return q[0];
  else if constexpr (B == 2) return uint32_t{q[0]} | uint32_t{q[1]} << 8;
  else return uint32_t{q[0]} | uint32_t{q[1]} << 8 | uint32_t{q[2]} << 16 | uint32_t{q[3]} << 24;
}

// An element's coded fields: exponent, sign with the k high mantissa bits,
// and the raw low mantissa bits.
struct FloatFields {
  uint32_t e, sm, raw;
};
static inline FloatFields float_fields(const FloatParams& p, uint32_t v) {
  const uint32_t mb = p.mb, rawb = mb - p.k;
  const uint32_t m = v & ((1u << mb) - 1);
  return {(v >> mb) & ((1u << p.eb) - 1), ((v >> (p.eb + mb)) << p.k) | (m >> rawb),
          rawb ? (m & ((1u << rawb) - 1)) : 0u};
}

template <uint32_t B>
static void split_float_b(const FloatParams& p, const uint8_t* bytes, uint64_t n, FloatChunkData* d) {
  d->e.resize(n);
  d->sm.resize(n);
  d->raw.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    const FloatFields f = float_fields(p, float_elem<B>(bytes, i));
    d->e[i] = static_cast<uint16_t>(f.e);
    d->sm[i] = static_cast<uint8_t>(f.sm);
    d->raw[i] = f.raw;
  }
}

static void split_float(const FloatParams& p, const uint8_t* bytes, uint64_t n, FloatChunkData* d) {
  switch (p.elem_bytes) {
    case 1: split_float_b<1>(p, bytes, n, d); break;
    case 2: split_float_b<2>(p, bytes, n, d); break;
    default: split_float_b<4>(p, bytes, n, d); break;
  }
}

// The raw mantissa section: rb-bit fields (rb <= 24), LSB first, as
// BitWriter::put would write them, 32 bits at a time.
static void pack_raw_bits(const uint32_t* v, uint64_t n, uint32_t rb, std::vector<uint8_t>* out) {
  WC_CHECK(rb >= 1 && rb <= 24);
  out->assign((n * rb + 7) / 8, 0);
  uint8_t* o = out->data();
  uint64_t acc = 0;
  uint32_t fill = 0;
  const uint32_t mask = (1u << rb) - 1;
  for (uint64_t i = 0; i < n; ++i) {
    acc |= uint64_t{v[i] & mask} << fill;
    fill += rb;
    if (fill >= 32) {
      for (int b = 0; b < 4; ++b) *o++ = static_cast<uint8_t>(acc >> (8 * b));
      acc >>= 32;
      fill -= 32;
    }
  }
  for (; fill > 0; fill = fill > 8 ? fill - 8 : 0, acc >>= 8) *o++ = static_cast<uint8_t>(acc);
  out->resize(static_cast<size_t>(o - out->data()));
}

// A model's tables for the encoder: start | freq << 16 per (context,
// symbol), symbols lo .. lo + n - 1 only (the span any table uses: a float
// exponent table's few hundred symbols shrink to the exponents present, so
// the lookups stay in cache).
struct PackedTables {
  std::vector<uint32_t> sf;
  uint32_t lo = 0, n = 0;
  explicit PackedTables(const std::vector<FreqTable>& ts) {
    uint32_t hi = 0;
    lo = UINT32_MAX;
    for (const FreqTable& t : ts)
      for (uint32_t s = 0; s < t.freq.size(); ++s)
        if (t.freq[s]) {
          lo = std::min(lo, s);
          hi = std::max(hi, s);
        }
    if (lo == UINT32_MAX) lo = 0;
    n = lo <= hi ? hi - lo + 1 : 0;
    sf.assign(ts.size() * n, 0);
    for (size_t c = 0; c < ts.size(); ++c)
      for (uint32_t s = lo; s < lo + n && s < ts[c].freq.size(); ++s)
        sf[c * n + s - lo] = uint32_t{ts[c].start[s]} | uint32_t{ts[c].freq[s]} << 16;
  }
  uint32_t at(uint32_t ctx, uint32_t sym) const { return sf[uint64_t{ctx} * n + sym - lo]; }
};

// Encoder walkers. They hand the groups of chunk_decode.h's decode order to
// RansEncoder's reverse mode last first (last step first; within a step the
// phases last first, each phase one group of the lanes that code a symbol
// in it). A lane's position at step t is element t of its rectangle in
// raster order.
// The lanes' symbol counts per phase: lane l codes at steps 0 .. n[l] - 1;
// every lane codes at steps below nmin.
struct LaneSteps {
  uint32_t n[kLanes];
  uint32_t steps = 0, nmin = UINT32_MAX;
  LaneSteps(uint32_t h, uint32_t w) {
    for (uint32_t l = 0; l < kLanes; ++l) {
      const LaneRect rect = lane_rect(h, w, l);
      n[l] = rect.h * rect.w;
      steps = std::max(steps, n[l]);
      nmin = std::min(nmin, n[l]);
    }
  }
  // The lanes that code at step t.
  uint32_t mask(uint32_t t) const {
    if (t < nmin) return 0xFFFFFFFFu;
    uint32_t m = 0;
    for (uint32_t l = 0; l < kLanes; ++l) m |= static_cast<uint32_t>(t < n[l]) << l;
    return m;
  }
};

// Float chunk: per step, the exponent group then the sign/mantissa group
// (joint symbols: one group). The entries are computed in raster order,
// lane rectangle row by row, into one step-major array (step t's exponent
// group at row 2t, its sign/mantissa group at row 2t + 1, or its joint
// group at row t; lane l at column l); the steps where every lane codes are
// then encoded straight from it, the others group by group.
static void encode_float_reverse(const FloatParams& p, uint32_t h, uint32_t w, const FloatChunkData& d,
                                 const PackedTables& t0, const PackedTables& t1, RansEncoder* enc) {
  uint32_t lx, ly;
  lane_grid(h, w, &lx, &ly);
  const LaneSteps ls(h, w);
  const uint32_t steps = ls.steps, nmin = ls.nmin;
  // Groups per step: exponent and sign/mantissa, or one joint symbol.
  const uint32_t gps = float_joint(p) ? 1 : 2;
  thread_local RawVector<uint32_t> ent;
  if (ent.size() < size_t{gps} * steps * kLanes) ent.resize(size_t{gps} * steps * kLanes);
  uint32_t* const G = ent.data();
  const uint16_t* E = d.e.data();
  const uint8_t* SM = d.sm.data();
  for (uint32_t iy = 0; iy < ly; ++iy) {
    const uint32_t r0 = static_cast<uint32_t>(uint64_t{h} * iy / ly);
    const uint32_t r1 = static_cast<uint32_t>(uint64_t{h} * (iy + 1) / ly);
    for (uint32_t ix = 0; ix < lx; ++ix) {
      const uint32_t c0 = static_cast<uint32_t>(uint64_t{w} * ix / lx);
      const uint32_t c1 = static_cast<uint32_t>(uint64_t{w} * (ix + 1) / lx);
      const uint32_t l = iy * lx + ix;
      uint32_t* g = G + l;
      for (uint32_t r = r0; r < r1; ++r) {
        const uint64_t row = uint64_t{r} * w;
        const bool ht = r > r0;
        if (gps == 1) {
          for (uint32_t c = c0; c < c1; ++c, g += kLanes) {
            const uint64_t i = row + c;
            const uint32_t ctx = c > c0 ? float_joint_ctx(p, E[i - 1], SM[i - 1] >> p.k) : 0u;
            g[0] = t0.at(ctx, float_joint_sym(p, E[i], SM[i]));
          }
          continue;
        }
        for (uint32_t c = c0; c < c1; ++c, g += 2 * kLanes) {
          const uint64_t i = row + c;
          const bool hl = c > c0;
          const uint32_t e = E[i];
          g[0] = t0.at(float_e_ctx_lt(p, hl ? E[i - 1] : -1, ht ? E[i - w] : -1), e);
          g[kLanes] = t1.at(float_sm_ctx(p, e, hl ? 1 + (SM[i - 1] >> p.k) : 0), SM[i]);
        }
      }
    }
  }
  for (uint32_t t = steps; t-- > nmin;) {
    if (gps == 2) enc->put_group_reverse(ls.mask(t), G + (size_t{2} * t + 1) * kLanes);
    enc->put_group_reverse(ls.mask(t), G + size_t{gps} * t * kLanes);
  }
  enc->put_full_groups_reverse(G, size_t{gps} * nmin);
}

// Column phases of a chunk's columns: kp[c] = (col0 + c) % period for
// nbr_modes 2 and 3, else 0.
static void int_col_phases(const IntParams& p, uint64_t col0, uint32_t w, std::vector<uint32_t>* kp) {
  kp->assign(w, 0);
  if (p.nbr_mode < 2 || !p.period) return;
  uint32_t k = static_cast<uint32_t>(col0 % p.period);
  for (uint32_t c = 0; c < w; ++c) {
    (*kp)[c] = k;
    k = k + 1 == p.period ? 0 : k + 1;
  }
}

struct IntToken {
  uint32_t tok, extra, nb;
};
static inline __attribute__((always_inline)) IntToken make_token(const IntParams& p, int32_t v) {
  const uint32_t u = static_cast<uint32_t>(tile::zz_encode(v));
  if (__builtin_expect(u < p.esc, 1)) return {u, 0, 0};
  const uint32_t d = u - p.esc;
  const uint32_t nb = bit_width32(d);
  const uint32_t extra = nb >= 2 ? d - (1u << (nb - 1)) : 0;
  return {p.esc + nb, extra, nb};
}

// The contexts of every element of an int chunk, in raster order of the
// chunk, a lane row at a time: emit_run(l, t, r, c0, c1, ctx) gets the
// lane, the step (position in the lane rectangle's raster order) of column
// c0, the chunk row, the run's columns [c0, c1) and their contexts
// (ctx[c - c0]). encode_int_reverse codes these symbols in the decode order
// (placing them by lane and step); the other visitors count them
// (statistics, cost estimates) or place them by lane and step.
template <typename EmitRun>
static void visit_int_runs(const IntParams& p, const uint8_t* rc, const uint8_t* cc, uint64_t row0, uint64_t col0,
                           uint32_t h, uint32_t w, const int32_t* res, EmitRun&& emit_run) {
  IntLuts L;
  build_int_luts(p, &L);
  thread_local std::vector<uint32_t> kp, cbuf;
  int_col_phases(p, col0, w, &kp);
  if (cbuf.size() < w) cbuf.resize(w);
  uint32_t lx, ly;
  lane_grid(h, w, &lx, &ly);
  uint32_t cb[kLanes + 1];  // lane rectangle columns: [cb[ix], cb[ix + 1])
  for (uint32_t ix = 0; ix <= lx; ++ix) cb[ix] = static_cast<uint32_t>(uint64_t{w} * ix / lx);
  // Past the first `reach` columns of a lane rectangle every left neighbour
  // a mode reads exists, and int_ctx reduces to int_row_contexts (the same
  // contexts, without its per-element edge tests and mode dispatch): a row's
  // contexts are computed at once from column `reach` on, then the first
  // columns of each lane rectangle are computed (again) by int_ctx.
  const uint32_t reach = int_row_reach(p);
  for (uint32_t iy = 0; iy < ly; ++iy) {
    const uint32_t r0 = static_cast<uint32_t>(uint64_t{h} * iy / ly);
    const uint32_t r1 = static_cast<uint32_t>(uint64_t{h} * (iy + 1) / ly);
    for (uint32_t r = r0; r < r1; ++r) {
      const uint32_t rowpart = p.use_rc ? rc[row0 + r] : 0u;
      const int32_t* row = res + uint64_t{r} * w;
      if (w > reach) {
        const IntRowArgs ra{&p, &L, row, r > r0 ? row - w : nullptr, p.use_cc ? cc + col0 : nullptr, kp.data(),
                            rowpart};
        int_row_contexts(ra, reach, w, cbuf.data() + reach);
      }
      for (uint32_t ix = 0; ix < lx; ++ix) {
        const uint32_t c0 = cb[ix], c1 = cb[ix + 1], head = std::min(c0 + reach, c1);
        for (uint32_t c = c0; c < head; ++c) {
          const uint32_t sc = L.scale[rowpart + (p.use_cc ? cc[col0 + c] : 0u)];
          cbuf[c] = int_ctx(p, L, res, w, r, c, r0, c0, sc, kp[c]);
        }
        emit_run(iy * lx + ix, (r - r0) * (c1 - c0), r, c0, c1, cbuf.data() + c0);
      }
    }
  }
}

// The same element by element: emit(l, t, r, c, ctx, v) with the
// element's residual v.
template <typename Emit>
static void visit_int_elems(const IntParams& p, const uint8_t* rc, const uint8_t* cc, uint64_t row0, uint64_t col0,
                            uint32_t h, uint32_t w, const int32_t* res, Emit&& emit) {
  visit_int_runs(p, rc, cc, row0, col0, h, w, res,
                 [&](uint32_t l, uint32_t t, uint32_t r, uint32_t c0, uint32_t c1, const uint32_t* ctx) {
                   const int32_t* row = res + uint64_t{r} * w;
                   for (uint32_t c = c0; c < c1; ++c, ++t) emit(l, t, r, c, ctx[c - c0], row[c]);
                 });
}

// Where each lane's elements start when a chunk's elements are listed lane
// by lane, each in its rectangle's raster order (off[kLanes] = h * w).
static void lane_offsets(uint32_t h, uint32_t w, uint64_t off[kLanes + 1]) {
  off[0] = 0;
  for (uint32_t l = 0; l < kLanes; ++l) {
    const LaneRect rect = lane_rect(h, w, l);
    off[l + 1] = off[l] + uint64_t{rect.h} * rect.w;
  }
}

// The (context, token) of every element; emit(r, c, ctx, token).
template <typename Emit>
static void visit_int_tokens_at(const IntParams& p, const uint8_t* rc, const uint8_t* cc, uint64_t row0,
                                uint64_t col0, uint32_t h, uint32_t w, const int32_t* res, Emit&& emit) {
  visit_int_elems(p, rc, cc, row0, col0, h, w, res,
                  [&](uint32_t, uint32_t, uint32_t r, uint32_t c, uint32_t ctx, int32_t v) {
                    emit(r, c, ctx, make_token(p, v).tok);
                  });
}

template <typename Emit>
static void visit_int_tokens(const IntParams& p, const uint8_t* rc, const uint8_t* cc, uint64_t row0, uint64_t col0,
                             uint32_t h, uint32_t w, const int32_t* res, Emit&& emit) {
  visit_int_tokens_at(p, rc, cc, row0, col0, h, w, res,
                      [&](uint32_t, uint32_t, uint32_t ctx, uint32_t tok) { emit(ctx, tok); });
}

// Int chunk: per step, the token group, the low extra bits of escaped
// tokens (nb >= 2), their high extra bits (nb >= 10). The entries are
// computed lane rectangle by lane rectangle (visit_int_elems: sequential
// rows, no per-lane cursor) into one run per lane (lane l's step t at
// l * steps + t, so the stores stay sequential and the tables stay in L1);
// the reverse pass hands them over a step at a time. cached: when not null,
// the chunk's ctx * stride + token lane by lane, each lane's steps in order
// (the statistics pass stored them), entries from flat[ctx * stride +
// token]; the contexts are then not computed again. plain: cached, and no
// token is an escape.
static void encode_int_reverse(const IntParams& p, const uint8_t* rc, const uint8_t* cc, uint64_t row0,
                               uint64_t col0, uint32_t h, uint32_t w, const int32_t* res, const PackedTables& t0,
                               const uint16_t* cached, const uint32_t* flat, bool plain, RansEncoder* enc) {
  const LaneSteps ls(h, w);
  const uint32_t* n = ls.n;
  const uint32_t steps = ls.steps, nmin = ls.nmin;
  if (plain) {
    // No escapes: one group per step, entries step-major (step t, lane l
    // at t * kLanes + l), filled 64 steps at a time so that the transposed
    // stores stay in L1. The steps where every lane takes a symbol are
    // then encoded straight from these entries.
    thread_local RawVector<uint32_t> sm;
    if (sm.size() < size_t{steps} * kLanes) sm.resize(size_t{steps} * kLanes);
    uint64_t off[kLanes + 1];
    lane_offsets(h, w, off);
    constexpr uint32_t kBlock = 64;
    for (uint32_t t0 = 0; t0 < steps; t0 += kBlock) {
      const uint32_t t1 = std::min(steps, t0 + kBlock);
      for (uint32_t l = 0; l < kLanes; ++l) {
        const uint16_t* src = cached + off[l];
        const uint32_t te = std::min(t1, n[l]);
        uint32_t t = t0;
        for (; t < te; ++t) sm[size_t{t} * kLanes + l] = flat[src[t]];
        for (; t < t1; ++t) sm[size_t{t} * kLanes + l] = 0;
      }
    }
    for (uint32_t t = steps; t-- > nmin;) enc->put_group_reverse(ls.mask(t), sm.data() + size_t{t} * kLanes);
    enc->put_full_groups_reverse(sm.data(), nmin);
    return;
  }
  // Escaped tokens are rare: their extra-bit entries go to a list.
  struct Esc {
    uint32_t t, l, lo, hi;  // hi: 0 when nb < 10
  };
  thread_local std::vector<uint32_t> ea;
  thread_local std::vector<Esc> esc;
  if (ea.size() < size_t{steps} * kLanes) ea.resize(size_t{steps} * kLanes);
  esc.clear();
  auto escape = [&](uint32_t l, uint32_t t, const IntToken& tk) {
    if (__builtin_expect(tk.nb < 2, 1)) return;
    const uint32_t lo = tk.nb - 1 < 8 ? tk.nb - 1 : 8;
    esc.push_back({t, l, RansEncoder::bits_entry(tk.extra & ((1u << lo) - 1), lo),
                   tk.nb >= 10 ? RansEncoder::bits_entry(tk.extra >> 8, tk.nb - 9) : 0u});
  };
  if (cached) {
    size_t k = 0;
    for (uint32_t l = 0; l < kLanes; ++l) {
      const LaneRect rect = lane_rect(h, w, l);
      uint32_t* el = ea.data() + size_t{l} * steps;
      uint32_t t = 0;
      for (uint32_t r = rect.r0; r < rect.r0 + rect.h; ++r) {
        const int32_t* row = res + uint64_t{r} * w;
        for (uint32_t c = rect.c0; c < rect.c0 + rect.w; ++c, ++t, ++k) {
          el[t] = flat[cached[k]];
          escape(l, t, make_token(p, row[c]));
        }
      }
    }
  } else {
    visit_int_elems(p, rc, cc, row0, col0, h, w, res,
                    [&](uint32_t l, uint32_t t, uint32_t, uint32_t, uint32_t ctx, int32_t v) {
                      const IntToken tk = make_token(p, v);
                      ea[size_t{l} * steps + t] = t0.at(ctx, tk.tok);
                      escape(l, t, tk);
                    });
  }
  std::sort(esc.begin(), esc.end(), [](const Esc& a, const Esc& b) { return a.t > b.t; });
  size_t k = 0;
  alignas(64) uint32_t sb[kLanes] = {}, sc[kLanes] = {};
  for (uint32_t t = steps; t-- > 0;) {
    const uint32_t ma = ls.mask(t);
    uint32_t mb = 0, mc = 0;
    for (; k < esc.size() && esc[k].t == t; ++k) {
      const Esc& e = esc[k];
      sb[e.l] = e.lo;
      mb |= 1u << e.l;
      if (e.hi) {
        sc[e.l] = e.hi;
        mc |= 1u << e.l;
      }
    }
    if (mc) enc->put_group_reverse(mc, sc);
    if (mb) enc->put_group_reverse(mb, sb);
    enc->put_group_reverse(ma, &ea[t], steps);
  }
}

template <typename Emit>
static void walk_bytes(const BytesParams& p, uint32_t h, uint32_t w, const uint8_t* data, Emit&& emit) {
  LaneCursor cur[kLanes];
  const uint32_t eb = p.elem_bytes;
  const uint32_t steps = init_cursors(h, w, cur);
  for (uint32_t t = 0; t < steps; ++t) {
    for (uint32_t b = 0; b < eb; ++b) {
      for (uint32_t l = 0; l < kLanes; ++l) {
        if (t >= cur[l].n) continue;
        const uint64_t pos = (uint64_t{cur[l].r} * w + cur[l].c) * eb + b;
        const int left = cur[l].c > cur[l].rect.c0 ? data[pos - eb] : -1;
        emit(l, 0, bytes_ctx(p, b, left), data[pos]);
      }
    }
    for (uint32_t l = 0; l < kLanes; ++l)
      if (t < cur[l].n) advance(cur[l]);
  }
}

// ------------------------------------------------------------------ stats
// c * log2(c), from a table for the small counts most contexts hold: the
// entropy of counts c_i with total T is T log2 T - sum c_i log2 c_i.
static double clog2c(uint64_t c) {
  constexpr size_t kN = 4096;
  static const std::array<double, kN> table = [] {
    std::array<double, kN> t{};
    for (size_t i = 1; i < kN; ++i) t[i] = static_cast<double>(i) * std::log2(static_cast<double>(i));
    return t;
  }();
  return c < kN ? table[c] : static_cast<double>(c) * std::log2(static_cast<double>(c));
}

// Estimated cost in bits of a context whose symbol counts total `total`
// over `nz` used symbols with sum c log2 c = `slog`: data at empirical
// entropy, scaled by `scale`, plus the table description.
static double context_cost_of(double total, size_t nz, double slog, double scale) {
  if (nz == 0) return 1;
  const double ent = total * std::log2(total) - slog;
  // table: ~ (gap + compact frequency) codes per used symbol
  return ent * scale + (static_cast<double>(nz) * 9.0 + 4);
}

// The same from one context's n symbol counts.
template <typename T>
static double context_cost(const T* c, size_t n, double scale) {
  uint64_t total = 0;
  size_t nz = 0;
  double slog = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!c[i]) continue;
    total += c[i];
    ++nz;
    slog += clog2c(c[i]);
  }
  return context_cost_of(static_cast<double>(total), nz, slog, scale);
}

// Symbol counts per (context, symbol) of a model's two table sets, each set
// one flat array.
struct Stats {
  std::vector<uint64_t> f0, f1;
  uint32_t n0 = 0, ns0 = 0, n1 = 0, ns1 = 0;  // contexts and alphabet of each set
  void init(uint32_t nctx0, uint32_t nsym0, uint32_t nctx1, uint32_t nsym1) {
    n0 = nctx0;
    ns0 = nsym0;
    n1 = nctx1;
    ns1 = nsym1;
    f0.assign(uint64_t{n0} * ns0, 0);
    f1.assign(uint64_t{n1} * ns1, 0);
  }
  void add(uint32_t set, uint32_t ctx, uint32_t sym) {
    if (set) f1[uint64_t{ctx} * ns1 + sym]++;
    else f0[uint64_t{ctx} * ns0 + sym]++;
  }
  // Context k's counts of a set.
  const uint64_t* at(uint32_t set, uint32_t k) const {
    return set ? f1.data() + uint64_t{k} * ns1 : f0.data() + uint64_t{k} * ns0;
  }
  std::vector<uint64_t> counts(uint32_t set, uint32_t k) const {
    const uint64_t* p = at(set, k);
    return std::vector<uint64_t>(p, p + (set ? ns1 : ns0));
  }
  uint32_t contexts(uint32_t set) const { return set ? n1 : n0; }
  // Estimated cost in bits of every context (context_cost).
  double cost(double scale) const {
    double bits = 0;
    for (uint32_t k = 0; k < n0; ++k) bits += context_cost(at(0, k), ns0, scale);
    for (uint32_t k = 0; k < n1; ++k) bits += context_cost(at(1, k), ns1, scale);
    return bits;
  }
};

// The statistics walk_float's symbols give, counted in raster order straight
// from the chunk's elements (counts do not depend on the order): an element
// has a left (top) neighbour unless its column (row) starts a lane
// rectangle (lane_rect).
template <uint32_t B>
static void count_float_b(const FloatParams& p, uint32_t h, uint32_t w, const uint8_t* bytes, Stats* st) {
  std::vector<uint8_t> col_start(w, 0), row_start(h, 0);
  for (uint32_t l = 0; l < kLanes; ++l) {
    const LaneRect rect = lane_rect(h, w, l);
    if (rect.c0 < w) col_start[rect.c0] = 1;
    if (rect.r0 < h) row_start[rect.r0] = 1;
  }
  auto exp_of = [&](uint64_t i) { return static_cast<int>(float_fields(p, float_elem<B>(bytes, i)).e); };
  for (uint32_t r = 0; r < h; ++r) {
    const bool has_t = !row_start[r];
    const uint64_t row = uint64_t{r} * w;
    int left_e = -1;
    uint32_t left_sm = 0;
    for (uint32_t c = 0; c < w; ++c) {
      const uint64_t i = row + c;
      const bool has_l = !col_start[c];
      const FloatFields f = float_fields(p, float_elem<B>(bytes, i));
      const uint32_t e = f.e, sm = f.sm;
      if (float_joint(p)) {
        st->add(0, float_joint_ctx(p, has_l ? left_e : -1, left_sm >> p.k), float_joint_sym(p, e, sm));
        left_e = static_cast<int>(e);
        left_sm = sm;
        continue;
      }
      const uint32_t ectx = p.emode == 0 ? 0u : float_e_ctx_lt(p, has_l ? left_e : -1, has_t ? exp_of(i - w) : -1);
      st->add(0, ectx, e);
      st->add(1, float_sm_ctx(p, e, has_l ? static_cast<int>(1 + (left_sm >> p.k)) : 0), sm);
      left_e = static_cast<int>(e);
      left_sm = sm;
    }
  }
}

static void count_float(const FloatParams& p, uint32_t h, uint32_t w, const uint8_t* bytes, Stats* st) {
  switch (p.elem_bytes) {
    case 1: count_float_b<1>(p, h, w, bytes, st); break;
    case 2: count_float_b<2>(p, h, w, bytes, st); break;
    default: count_float_b<4>(p, h, w, bytes, st); break;
  }
}

static void build_tables(const Stats& s, TensorModel* m) {
  m->t0.clear();
  m->t1.clear();
  for (uint32_t set = 0; set < 2; ++set) {
    for (uint32_t k = 0; k < s.contexts(set); ++k) {
      const std::vector<uint64_t> c = s.counts(set, k);
      (set ? m->t1 : m->t0).push_back(choose_compact_table(c, normalize_counts(c, kMaxProbBits)));
    }
  }
  m->finalize();
}

// ------------------------------------------------------------------ chunk access
struct ChunkRef {
  uint64_t index, row0, col0, h, w;
  const uint8_t* bytes;  // chunk's original bytes
  uint64_t nbytes;
};

static ChunkRef chunk_ref(const TensorGeometry& g, const uint8_t* data, uint64_t i) {
  ChunkRef c{};
  c.index = i;
  g.chunk_rect(i, &c.row0, &c.col0, &c.h, &c.w);
  const uint64_t off = (c.row0 * g.cols + c.col0) * g.elem_bits / 8;
  c.bytes = data ? data + off : nullptr;  // callers that need only the rectangle pass null
  c.nbytes = c.h * c.w * g.elem_bits / 8;
  return c;
}

// Chunks used to choose parameters: spread across the tensor, up to
// ~max_elems elements.
static std::vector<uint64_t> sample_chunks(const TensorGeometry& g, uint64_t max_elems) {
  const uint64_t n = g.num_chunks();
  const uint64_t per = std::max<uint64_t>(1, g.chunk_rows * g.chunk_cols);
  uint64_t want = std::max<uint64_t>(1, max_elems / per);
  std::vector<uint64_t> out;
  if (want >= n) {
    for (uint64_t i = 0; i < n; ++i) out.push_back(i);
  } else {
    for (uint64_t k = 0; k < want; ++k) out.push_back(k * n / want);
  }
  return out;
}

// ------------------------------------------------------------------ float
struct FloatLayout {
  uint8_t bytes, eb, mb;
};
static bool float_layout(DType t, FloatLayout* f) {
  switch (t) {
    case DType::kBF16: *f = {2, 8, 7}; return true;
    case DType::kF16: *f = {2, 5, 10}; return true;
    case DType::kF32: *f = {4, 8, 23}; return true;
    case DType::kF8_E4M3: *f = {1, 4, 3}; return true;
    case DType::kF8_E5M2: *f = {1, 5, 2}; return true;
    default: return false;
  }
}

// Candidate statistics of the float model search. Every candidate's
// contexts are functions of few values: the exponent's of its left and top
// neighbours' exponents (-1: none), the sign/mantissa symbol's of the
// exponent and the left sign. So the sample is counted once, per such key,
// and each candidate sums these counts into its contexts (the same
// statistics as walking the sample).
// Keys are counted over the exponents that occur (dense ids), so a tensor
// with a few dozen exponents keeps a few dozen counts per key.
struct FloatKeyCounts {
  uint32_t nu = 0, nsm = 0;  // exponents that occur; sign + top mantissa bits symbols
  std::vector<int32_t> dense;                       // exponent -> dense id, -1: absent
  std::vector<uint32_t> used;                       // dense id -> exponent (ascending)
  std::vector<int32_t> pair_at, sm_at;              // key (dense ids) -> index, -1: not seen
  std::vector<std::pair<int, int>> pairs;           // (left, top) exponents
  std::vector<std::pair<uint32_t, int>> sms;        // (exponent, left sign class)
  std::vector<uint64_t> pair_n, sm_n;               // flat: [index * nu + id], [index * nsm + s]
  std::vector<uint64_t> eh;                         // exponent histogram
  uint64_t elems = 0;
};

template <uint32_t B>
static void count_float_exps(const FloatLayout& fl, const ChunkRef& c, FloatKeyCounts* k) {
  const uint32_t mb = fl.mb, emask = (1u << fl.eb) - 1;
  const uint64_t n = c.h * c.w;
  for (uint64_t i = 0; i < n; ++i) k->eh[(float_elem<B>(c.bytes, i) >> mb) & emask]++;
  k->elems += n;
}

template <uint32_t B>
static void count_float_keys(const FloatLayout& fl, uint32_t top_bits, const ChunkRef& c, FloatKeyCounts* k) {
  const uint32_t mb = fl.mb, eb = fl.eb, emask = (1u << eb) - 1, drop = mb - top_bits, mmask = (1u << mb) - 1;
  const uint32_t h = static_cast<uint32_t>(c.h), w = static_cast<uint32_t>(c.w);
  const int32_t* dense = k->dense.data();
  for (uint32_t r = 0; r < h; ++r) {
    int le = -1, ls = 0;
    for (uint32_t col = 0; col < w; ++col) {
      const uint64_t i = uint64_t{r} * w + col;
      const uint32_t v = float_elem<B>(c.bytes, i);
      const uint32_t e = (v >> mb) & emask;
      const int t = r > 0 ? static_cast<int>((float_elem<B>(c.bytes, i - w) >> mb) & emask) : -1;
      const int32_t d = dense[e], dl = le < 0 ? -1 : dense[le], dt = t < 0 ? -1 : dense[t];
      int32_t& pk = k->pair_at[static_cast<size_t>(dl + 1) * (k->nu + 1) + static_cast<size_t>(dt + 1)];
      if (pk < 0) {
        pk = static_cast<int32_t>(k->pairs.size());
        k->pairs.emplace_back(le, t);
        k->pair_n.resize(k->pair_n.size() + k->nu, 0);
      }
      k->pair_n[static_cast<size_t>(pk) * k->nu + static_cast<size_t>(d)]++;
      int32_t& sk = k->sm_at[static_cast<size_t>(d) * 3 + static_cast<size_t>(ls)];
      if (sk < 0) {
        sk = static_cast<int32_t>(k->sms.size());
        k->sms.emplace_back(e, ls);
        k->sm_n.resize(k->sm_n.size() + k->nsm, 0);
      }
      const uint32_t sign = v >> (eb + mb);
      k->sm_n[static_cast<size_t>(sk) * k->nsm + (((sign << mb) | (v & mmask)) >> drop)]++;
      le = static_cast<int>(e);
      ls = 1 + static_cast<int>(sign);
    }
  }
}

// How much larger (estimated bits) a joint-symbol float model may be than
// the two-step model and still be chosen for its decode speed.
inline constexpr double kJointSlack = 0.002;

// Joint symbol statistics of the sample: counts by (left exponent, left
// sign) of the symbols J with kj high mantissa bits.
template <uint32_t B>
static void count_float_joint(const FloatLayout& fl, uint32_t kj, const ChunkRef& c, const FloatKeyCounts& kc,
                              uint32_t nj, uint64_t* cnt) {
  const uint32_t mb = fl.mb, eb = fl.eb, emask = (1u << eb) - 1, kmask = (1u << kj) - 1;
  const uint32_t h = static_cast<uint32_t>(c.h), w = static_cast<uint32_t>(c.w);
  for (uint32_t r = 0; r < h; ++r) {
    uint32_t key = 0;  // (dense id of the left exponent + 1) * 2 + left sign; 0: no left
    for (uint32_t col = 0; col < w; ++col) {
      const uint32_t v = float_elem<B>(c.bytes, uint64_t{r} * w + col);
      const uint32_t e = (v >> mb) & emask, sign = v >> (eb + mb);
      cnt[uint64_t{key} * nj + (sign << (eb + kj) | e << kj | ((v >> (mb - kj)) & kmask))]++;
      key = (static_cast<uint32_t>(kc.dense[e]) + 1) * 2 + sign;
    }
  }
}

// The best joint-symbol model (emode 5, kj high mantissa bits) on the
// sample and its estimated cost in bits (*cost).
static FloatParams choose_float_joint(const TensorGeometry& g, const uint8_t* data, FloatLayout fl, uint32_t kj,
                                      const std::vector<uint64_t>& sample, const FloatKeyCounts& kc, int mode,
                                      double scale, double* cost) {
  const uint32_t nj = 1u << (1 + fl.eb + kj);
  const uint32_t nkeys = (kc.nu + 1) * 2;
  std::vector<uint64_t> jc(uint64_t{nkeys} * nj, 0);
  for (auto ci : sample) {
    const ChunkRef c = chunk_ref(g, data, ci);
    if (fl.bytes == 1) count_float_joint<1>(fl, kj, c, kc, nj, jc.data());
    else count_float_joint<2>(fl, kj, c, kc, nj, jc.data());
  }
  const double total = static_cast<double>(g.rows * g.cols);
  FloatParams best{};
  *cost = std::numeric_limits<double>::infinity();
  std::vector<uint64_t> cnt;
  for (uint8_t ne : {8, 16}) {
    for (int shift : {3, 4}) {
      FloatParams p{};
      p.elem_bytes = fl.bytes;
      p.eb = fl.eb;
      p.mb = fl.mb;
      p.k = static_cast<uint8_t>(kj);
      p.emode = kFloatJointMode;
      p.ne = ne;
      p.nm = 1;
      p.sign_ctx = 0;
      p.elo = static_cast<int16_t>(mode - ne + shift);
      p.mlo = 0;
      const uint32_t nctx = float_e_nctx(p);
      cnt.assign(uint64_t{nctx} * nj, 0);
      for (uint32_t key = 0; key < nkeys; ++key) {
        const int le = key < 2 ? -1 : static_cast<int>(kc.used[key / 2 - 1]);
        uint64_t* dst = cnt.data() + uint64_t{float_joint_ctx(p, le, key & 1)} * nj;
        const uint64_t* src = jc.data() + uint64_t{key} * nj;
        for (uint32_t j = 0; j < nj; ++j) dst[j] += src[j];
      }
      double bits = total * float_raw_bits(p);
      for (uint32_t c = 0; c < nctx; ++c) bits += context_cost(cnt.data() + uint64_t{c} * nj, nj, scale);
      if (bits < *cost) {
        *cost = bits;
        best = p;
      }
    }
  }
  return best;
}

static void choose_float(const TensorGeometry& g, const uint8_t* data, FloatLayout fl, bool format_2_x,
                         TensorModel* m) {
  auto sample = sample_chunks(g, 1u << 18);
  const uint64_t total = g.rows * g.cols;
  FloatParams base{};
  base.elem_bytes = fl.bytes;
  base.eb = fl.eb;
  base.mb = fl.mb;
  // Candidates are evaluated on the sample with contexts computed over the
  // whole chunk (lane edges ignored: an estimate). Exponent and
  // sign/mantissa costs are separable: each part is chosen on its own.
  const uint32_t nes = 1u << fl.eb;
  const uint32_t top_bits = std::min<uint32_t>(fl.mb, 7);  // sign + this many mantissa bits kept
  FloatKeyCounts kc;
  kc.nsm = 2u << top_bits;
  kc.eh.assign(nes, 0);
  for (auto ci : sample) {
    const ChunkRef c = chunk_ref(g, data, ci);
    switch (fl.bytes) {
      case 1: count_float_exps<1>(fl, c, &kc); break;
      case 2: count_float_exps<2>(fl, c, &kc); break;
      default: count_float_exps<4>(fl, c, &kc); break;
    }
  }
  kc.dense.assign(nes, -1);
  for (uint32_t e = 0; e < nes; ++e)
    if (kc.eh[e]) {
      kc.dense[e] = static_cast<int32_t>(kc.used.size());
      kc.used.push_back(e);
    }
  kc.nu = static_cast<uint32_t>(kc.used.size());
  kc.pair_at.assign(static_cast<size_t>(kc.nu + 1) * (kc.nu + 1), -1);
  kc.sm_at.assign(static_cast<size_t>(kc.nu) * 3, -1);
  for (auto ci : sample) {
    const ChunkRef c = chunk_ref(g, data, ci);
    switch (fl.bytes) {
      case 1: count_float_keys<1>(fl, top_bits, c, &kc); break;
      case 2: count_float_keys<2>(fl, top_bits, c, &kc); break;
      default: count_float_keys<4>(fl, top_bits, c, &kc); break;
    }
  }
  // Mode exponent.
  const int mode = static_cast<int>(std::max_element(kc.eh.begin(), kc.eh.end()) - kc.eh.begin());
  const double scale = static_cast<double>(total) / static_cast<double>(std::max<uint64_t>(1, kc.elems));
  // The counts that are not zero, as (symbol, count): a small tensor's
  // keys hold a few symbols each.
  using Nonzero = std::vector<std::pair<uint32_t, uint64_t>>;
  auto nonzero = [](const uint64_t* n, uint32_t size) {
    Nonzero out;
    for (uint32_t j = 0; j < size; ++j)
      if (n[j]) out.emplace_back(j, n[j]);
    return out;
  };
  std::vector<Nonzero> pair_nz(kc.pairs.size()), sm_nz(kc.sms.size());
  for (size_t k = 0; k < kc.pairs.size(); ++k) {
    pair_nz[k] = nonzero(kc.pair_n.data() + k * kc.nu, kc.nu);
    for (auto& [sym, n] : pair_nz[k]) sym = kc.used[sym];  // dense id -> exponent
  }
  for (size_t k = 0; k < kc.sms.size(); ++k) sm_nz[k] = nonzero(kc.sm_n.data() + k * kc.nsm, kc.nsm);
  // The exponents that occur: the candidates' exponent statistics span
  // only these (symbols that never occur add nothing to a cost).
  uint32_t emin = nes, emax = 0;
  for (const Nonzero& nz : pair_nz)
    for (const auto& [sym, n] : nz) {
      emin = std::min(emin, sym);
      emax = std::max(emax, sym);
    }
  const uint32_t espan = emin <= emax ? emax - emin + 1 : 1;
  if (emin > emax) emin = 0;
  // sm_nz reduced to sm_k high mantissa bits (symbols sym >> (top_bits -
  // sm_k), equal ones merged), once the mantissa split is chosen: the
  // context-shape candidates then add a few entries per key, not up to 256.
  std::vector<Nonzero> sm_red;
  uint32_t sm_k = UINT32_MAX;
  std::vector<uint64_t> cnt;  // nctx x nsym counts of one candidate, reused
  auto eval = [&](const FloatParams& p, bool part_e) {
    const uint32_t nctx = part_e ? float_e_nctx(p) : float_sm_nctx(p), nsym = part_e ? espan : 2u << p.k;
    cnt.assign(uint64_t{nctx} * nsym, 0);
    if (part_e) {
      for (size_t k = 0; k < kc.pairs.size(); ++k) {
        uint64_t* dst = cnt.data() + uint64_t{float_e_ctx_lt(p, kc.pairs[k].first, kc.pairs[k].second)} * nsym;
        for (const auto& [sym, n] : pair_nz[k]) dst[sym - emin] += n;
      }
    } else {
      // The lists at p.k high mantissa bits, where reduced to them (below).
      const bool reduced = p.k == sm_k;
      const uint32_t drop = reduced ? 0 : top_bits - p.k;  // p.k <= top_bits
      const std::vector<Nonzero>& lists = reduced ? sm_red : sm_nz;
      for (size_t k = 0; k < kc.sms.size(); ++k) {
        uint64_t* dst = cnt.data() + uint64_t{float_sm_ctx(p, kc.sms[k].first, kc.sms[k].second)} * nsym;
        for (const auto& [sym, n] : lists[k]) dst[sym >> drop] += n;
      }
    }
    double bits = 0;
    for (uint32_t c = 0; c < nctx; ++c) bits += context_cost(cnt.data() + uint64_t{c} * nsym, nsym, scale);
    if (!part_e) bits += static_cast<double>(total) * float_raw_bits(p);
    return bits;
  };
  FloatParams best = base;
  best.ne = 1;
  best.nm = 1;
  best.k = static_cast<uint8_t>(std::min<int>(3, fl.mb));
  double best_e = std::numeric_limits<double>::infinity();
  for (uint8_t emode : {0, 1, 2, 3, 4}) {
    for (uint8_t ne : {8, 16}) {
      if ((emode == 0 || emode == 4) && ne != 8) continue;
      FloatParams p = best;
      p.emode = emode;
      p.ne = emode ? ne : 1;
      p.elo = static_cast<int16_t>(emode == 4 ? mode - kJointClasses + 2 : mode - p.ne + 3);
      double c = eval(p, true);
      // Decode speed: the joint mode's 49 exponent tables (16 KiB each) do
      // not stay in the L2 cache beside the sign/mantissa tables, and its
      // chunks decode about a quarter slower. It is taken only where it
      // saves at least 1% of the exponent bits (on isnet-medium.f16 it
      // saved under 1% on the tensors that chose it: 0.02% of the file).
      if (emode == 4) c *= 1.01;
      if (c < best_e) {
        best_e = c;
        best.emode = p.emode;
        best.ne = p.ne;
        best.elo = p.elo;
      }
    }
  }
  double best_sm = std::numeric_limits<double>::infinity();
  FloatParams bsm = best;
  std::vector<uint8_t> ks;
  for (uint8_t k : {0, 2, 3, 4, 5, 7})
    if (k <= fl.mb && fl.mb - k <= 24) ks.push_back(k);
  // Greedy: the mantissa split first, then the context shape.
  for (uint8_t k : ks) {
    FloatParams p = best;
    p.k = k;
    p.nm = 8;
    p.mlo = static_cast<int16_t>(mode - p.nm + 2);
    p.sign_ctx = 0;
    const double c = eval(p, false);
    if (c < best_sm) {
      best_sm = c;
      bsm = p;
    }
  }
  {
    const uint32_t drop = top_bits - bsm.k;
    sm_red.resize(sm_nz.size());
    for (size_t k = 0; k < sm_nz.size(); ++k) {
      Nonzero& out = sm_red[k];
      out.clear();
      for (const auto& [sym, n] : sm_nz[k]) {  // symbols ascending
        const uint32_t r = sym >> drop;
        if (!out.empty() && out.back().first == r) out.back().second += n;
        else out.emplace_back(r, n);
      }
    }
    sm_k = bsm.k;
  }
  for (uint8_t nm : {1, 8, 16}) {
    for (uint8_t sc : {0, 1}) {
      if (nm == 8 && sc == 0) continue;
      FloatParams p = bsm;
      p.nm = nm;
      p.mlo = static_cast<int16_t>(mode - nm + 2);
      p.sign_ctx = sc;
      const double c = eval(p, false);
      if (c < best_sm) {
        best_sm = c;
        bsm = p;
      }
    }
  }
  best.k = bsm.k;
  best.nm = bsm.nm;
  best.mlo = bsm.mlo;
  best.sign_ctx = bsm.sign_ctx;
  // The joint symbol (emode 5) where sign, exponent and some high mantissa
  // bits fit one byte (F16, F8): one rANS step per element instead of two.
  // On isnet-medium.f16 its contexts (left exponent class x left sign) make
  // the file smaller than the two-step model (0.8452 against 0.8464 of the
  // original), and its chunks decode about 1.6 times as fast; it is taken
  // unless it costs more than kJointSlack of the two-step model's bits.
  const int kj = std::min<int>(fl.mb, 7 - fl.eb);
  if (format_2_x && kj >= 0) {
    double cj = 0;
    const FloatParams pj = choose_float_joint(g, data, fl, static_cast<uint32_t>(kj), sample, kc, mode, scale, &cj);
    if (cj <= (best_e + best_sm) * (1 + kJointSlack)) best = pj;
  }
  m->kind = ModelKind::kFloat;
  m->fp = best;
}

// ------------------------------------------------------------------ int
inline constexpr uint32_t kMaxWideContexts = 24;
// Int tensors with fewer elements search a reduced candidate set (choose_int)
// and no tile tools (encode_tensor).
inline constexpr uint64_t kSmallIntElems = 16384;

// A tensor's values (codes -> signed values), row-major over its grid.
using IntGrid = RawVector<int32_t>;

static int32_t code_at(uint32_t sub, const uint8_t* bytes, uint64_t i) {
  switch (sub) {
    case kIntNibble: return (bytes[i >> 1] >> ((i & 1) * 4)) & 15;
    case kIntTernary: return (bytes[i >> 2] >> ((i & 3) * 2)) & 3;
    default: return bytes[i];
  }
}

// Values of the whole tensor grid (code -> signed value).
static void int_values(const IntParams& p, const TensorGeometry& g, const uint8_t* data, const AuxInput& aux,
                       IntGrid* v) {
  const uint64_t n = g.rows * g.cols;
  v->resize(n);
  uint64_t i0 = 0;
  if (!p.zgroup && (p.sub == kIntI8 || p.sub == kIntU8)) {
    // One code per byte: a sign extension or a subtraction (vectorized).
    int32_t* out = v->data();
    const int32_t center = p.center;
    if (p.sub == kIntI8)
      for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<int8_t>(data[i]);
    else
      for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(data[i]) - center;
    i0 = n;
  } else if (!p.zgroup) {
    // Whole bytes through a table: byte -> its codes' values (LSB first).
    const uint32_t cpb = int_codes_per_byte(p.sub), bits = 8 / cpb;
    int32_t lut[256][4];
    for (uint32_t b = 0; b < 256; ++b)
      for (uint32_t k = 0; k < cpb; ++k)
        lut[b][k] = int_code_to_value(p.sub, (b >> (k * bits)) & ((1u << bits) - 1), p.center);
    const uint64_t nb = n / cpb;
    int32_t* out = v->data();
    for (uint64_t i = 0; i < nb; ++i)
      for (uint32_t k = 0; k < cpb; ++k) out[i * cpb + k] = lut[data[i]][k];
    i0 = nb * cpb;
  } else if (g.cols) {
    // Zero points per group of zgroup codes along a row (the code type
    // chosen outside the loop).
    int32_t* out = v->data();
    auto fill = [&](auto sub) {
      for (uint64_t r = 0; r < g.rows; ++r) {
        const uint8_t* zrow = aux.bytes + r * aux.cols;
        // Group by group: one zero point per run of zgroup codes.
        for (uint64_t c0 = 0, zi = 0; c0 < g.cols; c0 += p.zgroup, ++zi) {
          const uint8_t z = zrow[zi];
          uint64_t i = r * g.cols + c0;
          const uint64_t i1 = r * g.cols + std::min<uint64_t>(g.cols, c0 + p.zgroup);
          if constexpr (sub.value == kIntNibble) {
            // Whole bytes (two codes each) where the group holds them.
            if (i & 1) {
              out[i] = static_cast<int32_t>(code_at(kIntNibble, data, i)) - z;
              ++i;
            }
            for (; i + 2 <= i1; i += 2) {
              const uint8_t b = data[i >> 1];
              out[i] = static_cast<int32_t>(b & 15) - z;
              out[i + 1] = static_cast<int32_t>(b >> 4) - z;
            }
          }
          for (; i < i1; ++i)
            out[i] = int_code_to_value(sub.value, static_cast<uint32_t>(code_at(sub.value, data, i)), z);
        }
      }
    };
    switch (p.sub) {
      case kIntI8: fill(std::integral_constant<uint32_t, kIntI8>{}); break;
      case kIntU8: fill(std::integral_constant<uint32_t, kIntU8>{}); break;
      case kIntNibble: fill(std::integral_constant<uint32_t, kIntNibble>{}); break;
      default: fill(std::integral_constant<uint32_t, kIntTernary>{}); break;
    }
    i0 = n;
  }
  for (uint64_t i = i0; i < n; ++i) {
    int32_t center = p.center;
    if (p.zgroup) {
      const uint64_t r = i / g.cols, c = i % g.cols;
      center = aux.bytes[r * aux.cols + c / p.zgroup];
    }
    (*v)[i] = int_code_to_value(p.sub, static_cast<uint32_t>(code_at(p.sub, data, i)), center);
  }
}

static uint8_t mag_class(double mean_abs) {
  // Half-octave classes of the mean magnitude: 0 for ~0, up to 31.
  const double l = 2.0 * std::log2(mean_abs + 1.0 / 64);
  return static_cast<uint8_t>(std::clamp(static_cast<int>(std::lround(l)) + 12, 0, 31));
}

static void int_side_info(const TensorGeometry& g, const IntGrid& v, std::vector<uint8_t>* rc,
                          std::vector<uint8_t>* cc, uint32_t* max_abs) {
  // Integer sums (exact, as the double sums they replace were below 2^53).
  // Int values are at most 255 in magnitude (8-bit codes less a center or
  // zero point): column sums gather in 32 bits over blocks of 2^23 rows.
  std::vector<uint64_t> rs(g.rows, 0), cs(g.cols, 0);
  std::vector<uint32_t> cs32(g.cols, 0);
  uint32_t amax = 0;
  for (uint64_t r = 0; r < g.rows; ++r) {
    rs[r] = int_abs_sums(v.data() + r * g.cols, g.cols, cs32.data(), &amax);
    if ((r + 1) % (1u << 23) == 0 || r + 1 == g.rows)
      for (uint64_t c = 0; c < g.cols; ++c) {
        cs[c] += cs32[c];
        cs32[c] = 0;
      }
  }
  *max_abs = amax;
  rc->resize(g.rows);
  cc->resize(g.cols);
  for (uint64_t r = 0; r < g.rows; ++r)
    (*rc)[r] = mag_class(static_cast<double>(rs[r]) / static_cast<double>(g.cols));
  for (uint64_t c = 0; c < g.cols; ++c)
    (*cc)[c] = mag_class(static_cast<double>(cs[c]) / static_cast<double>(g.rows));
}

// Thresholds splitting the distribution of n values (histogram h over
// values 0..1023) into k classes (quantiles).
static std::vector<uint32_t> hist_thresholds(const std::vector<uint64_t>& h, uint64_t n, uint32_t k) {
  std::vector<uint32_t> thr;
  if (n == 0 || k < 2) return thr;
  uint64_t acc = 0;
  uint32_t next = 1;
  for (uint32_t v = 0; v < 1024 && next < k; ++v) {
    acc += h[v];
    while (next < k && acc > n * next / k) {
      uint32_t t = v + 1 > 1 ? v + 1 : 1;
      if (!thr.empty() && t <= thr.back()) t = thr.back() + 1;
      thr.push_back(t);
      ++next;
    }
  }
  while (thr.size() + 1 < k) thr.push_back(thr.empty() ? 1 : thr.back() + 1);
  return thr;
}

// Residual grid of one chunk: values, transformed per tile when the chunk
// has a tile map.
static void chunk_residuals(const TensorGeometry& g, const IntGrid& vals, const ChunkRef& c,
                            const std::vector<uint8_t>* tile_map, std::vector<int32_t>* res) {
  const uint32_t h = static_cast<uint32_t>(c.h), w = static_cast<uint32_t>(c.w);
  res->resize(uint64_t{h} * w);
  for (uint32_t r = 0; r < h; ++r)
    std::memcpy(res->data() + uint64_t{r} * w, vals.data() + (c.row0 + r) * g.cols + c.col0, w * sizeof(int32_t));
  if (!tile_map) return;
  std::vector<int32_t> orig = *res, out(kTile * kTile);
  const uint32_t tr = (h + kTile - 1) / kTile, tc = (w + kTile - 1) / kTile;
  int32_t left[kTile], top[kTile];
  for (uint32_t ti = 0; ti < tr; ++ti)
    for (uint32_t tj = 0; tj < tc; ++tj) {
      const uint8_t pred = (*tile_map)[2 * (ti * tc + tj)], xf = (*tile_map)[2 * (ti * tc + tj) + 1];
      if (pred == 0 && xf == 0) continue;
      const uint32_t r0 = ti * kTile, c0 = tj * kTile;
      const uint32_t th = std::min(kTile, h - r0), tw = std::min(kTile, w - c0);
      const bool hl = c0 > 0, ht = r0 > 0;
      for (uint32_t i = 0; i < th; ++i) left[i] = hl ? orig[(r0 + i) * w + c0 - 1] : 0;
      for (uint32_t j = 0; j < tw; ++j) top[j] = ht ? orig[(r0 - 1) * w + c0 + j] : 0;
      const int32_t tl = hl && ht ? orig[(r0 - 1) * w + c0 - 1] : 0;
      uint8_t xmap[4];
      unpack_xform_map(xf, static_cast<int>(th), static_cast<int>(tw), xmap);
      tile::tile_forward(static_cast<tile::Pred>(pred), xmap, static_cast<int>(th), static_cast<int>(tw),
                         orig.data() + r0 * w + c0, static_cast<int>(w), hl ? left : nullptr, ht ? top : nullptr, tl,
                         out.data());
      for (uint32_t i = 0; i < th; ++i)
        for (uint32_t j = 0; j < tw; ++j) (*res)[(r0 + i) * w + c0 + j] = out[i * tw + j];
    }
}

// The chunk's residuals: straight from vals for a chunk of whole rows
// without a tile map (stride w = g.cols), else chunk_residuals into *buf.
static const int32_t* residuals_of(const TensorGeometry& g, const IntGrid& vals, const ChunkRef& c,
                                   const std::vector<uint8_t>* tile_map, std::vector<int32_t>* buf) {
  if (!tile_map && c.col0 == 0 && c.w == g.cols) return vals.data() + c.row0 * g.cols;
  chunk_residuals(g, vals, c, tile_map, buf);
  return buf->data();
}

// Estimated bits of a residual block under a per-token cost table.
// cost holds the bits of each token; values with zig-zag code below esc
// are looked up directly.
static double block_cost(const int32_t* r, uint32_t n, const IntParams& p, const std::vector<double>& cost) {
  double b = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(tile::zz_encode(r[i]));
    if (u < p.esc) {
      b += cost[u];
    } else {
      IntToken t = make_token(p, r[i]);
      b += cost[t.tok] + (t.nb >= 2 ? t.nb - 1 : 0);
    }
  }
  return b;
}

// Chooses a tile map for a chunk (nullopt when no tile benefits enough to
// pay for the map). Candidate tools per tile: every predictor, with the same
// transform on all full 8x8 sub-blocks.
//
// Default profile: the first eighth of the tiles (raster order, one
// contiguous band) is probed first. The rest is probed only when tools won
// on at least a quarter of the band's tiles and band_pays(map, band tiles)
// confirms it under the context model: the order-0 token costs used per
// tile overrate tools on weights whose neighbours the contexts already
// exploit. The rest then tries only the predictor and transform pairs that
// won a tile of the band. A contiguous band keeps tool tiles next to each
// other, as a full map would (a lone tool tile among plain ones misleads its
// neighbours' contexts). A band whose first kEarlyTiles tiles gain from no tool at all
// stops there: on the real int8 and int4 checkpoints no tile of any chunk
// keeps a tool, and probing the whole band was a tenth of their encode
// time.
template <typename BandPays>
static bool choose_tiles(const TensorGeometry& g, const IntGrid& vals, const ChunkRef& c,
                         const IntParams& p, const std::vector<double>& cost, bool exhaustive,
                         std::vector<uint8_t>* map, BandPays&& band_pays) {
  const uint32_t h = static_cast<uint32_t>(c.h), w = static_cast<uint32_t>(c.w);
  const uint32_t tr = (h + kTile - 1) / kTile, tc = (w + kTile - 1) / kTile;
  map->assign(2u * tr * tc, 0);
  std::vector<int32_t> grid(uint64_t{h} * w), out(kTile * kTile), blk(kTile * kTile);
  for (uint32_t r = 0; r < h; ++r)
    std::memcpy(grid.data() + uint64_t{r} * w, vals.data() + (c.row0 + r) * g.cols + c.col0, w * sizeof(int32_t));
  double saved = 0;
  uint32_t used = 0;
  int32_t left[kTile], top[kTile];
  const uint32_t ntiles = tr * tc;
  const uint32_t band = exhaustive ? ntiles : (ntiles + 7) / 8;
  uint32_t band_won = 0;  // bit pred * 3 + xf: the pair won a tile of the band
  for (uint32_t pass = 0; pass < 2; ++pass) {
    uint32_t probed = 0;
    for (uint32_t k = pass == 0 ? 0 : band; k < (pass == 0 ? band : ntiles); ++k) {
      const uint32_t ti = k / tc, tj = k % tc;
      const uint32_t r0 = ti * kTile, c0 = tj * kTile;
      const uint32_t th = std::min(kTile, h - r0), tw = std::min(kTile, w - c0);
      const bool hl = c0 > 0, ht = r0 > 0;
      for (uint32_t i = 0; i < th; ++i) left[i] = hl ? grid[(r0 + i) * w + c0 - 1] : 0;
      for (uint32_t j = 0; j < tw; ++j) top[j] = ht ? grid[(r0 - 1) * w + c0 + j] : 0;
      const int32_t tl = hl && ht ? grid[(r0 - 1) * w + c0 - 1] : 0;
      for (uint32_t i = 0; i < th; ++i)
        for (uint32_t j = 0; j < tw; ++j) blk[i * tw + j] = grid[(r0 + i) * w + c0 + j];
      const double base = block_cost(blk.data(), th * tw, p, cost);
      double best = base - 16.0;  // a tile must pay for its 2 map bytes
      uint8_t bp = 0, bx = 0, bxf = 0;
      for (uint8_t pred = 0; pred <= tile::kPredDC; ++pred) {
        for (uint8_t xf = 0; xf <= tile::kXformADST; ++xf) {
          if (pred == 0 && xf == 0) continue;
          // Default profile: every predictor alone, every transform alone,
          // and DC/planar prediction with each transform; after the band,
          // only the pairs that won a tile of it.
          if (!exhaustive && pred != 0 && xf != 0 && pred != tile::kPredDC && pred != tile::kPredPlanar) continue;
          if (!exhaustive && pass == 1 && !(band_won >> (pred * 3 + xf) & 1)) continue;
          uint8_t xmap[4] = {0, 0, 0, 0};
          uint8_t packed = 0;
          for (int s = 0; s < 4; ++s) {
            const uint32_t sr = (s / 2) * 8, sc = (s % 2) * 8;
            if (xf && sr + 8 <= th && sc + 8 <= tw) {
              xmap[s] = xf;
              packed |= static_cast<uint8_t>(xf << (2 * s));
            }
          }
          if (xf && !packed) continue;
          unpack_xform_map(packed, static_cast<int>(th), static_cast<int>(tw), xmap);
          tile::tile_forward(static_cast<tile::Pred>(pred), xmap, static_cast<int>(th), static_cast<int>(tw),
                             blk.data(), static_cast<int>(tw), hl ? left : nullptr, ht ? top : nullptr, tl,
                             out.data());
          const double cst = block_cost(out.data(), th * tw, p, cost);
          if (cst < best) {
            best = cst;
            bp = pred;
            bx = packed;
            bxf = xf;
          }
        }
      }
      if (bp || bx) {
        (*map)[2 * k] = bp;
        (*map)[2 * k + 1] = bx;
        saved += base - best;
        ++used;
        if (pass == 0) band_won |= 1u << (bp * 3 + bxf);
      }
      ++probed;
      constexpr uint32_t kEarlyTiles = 32;
      if (pass == 0 && !exhaustive && probed == kEarlyTiles && used == 0 && band > 2 * kEarlyTiles) return false;
    }
    if (pass == 0 && band < ntiles) {
      if (used * 4 < probed) break;
      if (!band_pays(*map, band)) return false;
    }
  }
  if (used == 0) return false;
  return saved > 0;
}

// The order-0 entropy of the codes' tokens, in bytes.
static double int_order0_bytes(const IntParams& p, const IntGrid& vals) {
  std::vector<uint64_t> h(p.nsym, 0);
  for (int32_t v : vals) h[make_token(p, v).tok]++;
  double slog = 0;
  for (uint64_t c : h) slog += clog2c(c);
  return (clog2c(vals.size()) - slog) / 8.0;
}

// quick: take the one-candidate model of a small tensor whatever the size
// (the caller knows another method wins).
static void choose_int(const TensorGeometry& g, const IntGrid& vals, IntParams base, bool allow_phase, bool quick,
                       TensorModel* m, std::vector<uint8_t>* rc, std::vector<uint8_t>* cc, uint32_t* max_abs) {
  int_side_info(g, vals, rc, cc, max_abs);
  // Sampled elements per kind: 2^17 for 8-bit codes, 2^15 for 4-bit and
  // 2^14 for ternary codes. Halving the sample costs about 0.0001 of the
  // file in model fit: the 2- and 4-bit kinds take that for encode speed
  // (isnet: ternary 0.6887 -> 0.6889 at 1.12x the speed, int4 0.8978 ->
  // 0.8979 at 1.10x), int8 does not (its size target is the tighter one).
  const uint64_t kSampleElems = base.sub == kIntTernary ? 1u << 14 : (base.sub == kIntNibble ? 1u << 15 : 1u << 17);
  const uint64_t total = g.rows * g.cols;
  // Small tensors (under kSmallIntElems elements) try one activity class
  // only, with and without 3x3 kernel contexts: on the real checkpoints no
  // such tensor chose more classes, sign neighbours or scale classes (their
  // tables cost more than they save), and the other candidates (and the
  // distributions for their thresholds) were most of their encode time.
  const bool small = total < kSmallIntElems;
  const bool kernels = allow_phase && g.cols % 9 == 0;  // 3x3 kernels flattened along a row may fit
  IntParams best = base;
  best.nb = 1;
  best.ns = 1;
  auto done = [&] {
    m->kind = ModelKind::kInt;
    m->ip = best;
    if (!best.use_rc) rc->assign(1, 0);
    if (!best.use_cc) cc->assign(1, 0);
  };
  // A small tensor without kernel candidates has one candidate: nothing to
  // estimate.
  if (quick || (small && !kernels)) return done();
  auto sample = sample_chunks(g, kSampleElems);
  // The sample is whole chunks, and one chunk of 2- or 4-bit codes holds far
  // more than kSampleElems elements: candidates are evaluated on every
  // row_step-th row of the sampled chunks (contexts still see the rows in
  // between), about kSampleElems elements in all.
  uint64_t sampled_full = 0;
  for (auto ci : sample) {
    uint64_t a, b, h, w;
    g.chunk_rect(ci, &a, &b, &h, &w);
    sampled_full += h * w;
  }
  const uint64_t row_step = std::max<uint64_t>(1, sampled_full / kSampleElems);
  uint64_t sampled = 0;
  for (auto ci : sample) {
    uint64_t a, b, h, w;
    g.chunk_rect(ci, &a, &b, &h, &w);
    sampled += (h + row_step - 1) / row_step * w;
  }
  const double scale = static_cast<double>(total) / static_cast<double>(std::max<uint64_t>(1, sampled));
  // Distributions for the thresholds, counted in one pass over every
  // third element of the evaluated rows: the activity without an extra
  // neighbour and with |L3| or |L9| added (act_hist[0..2]), and the scale
  // value of each side combination (scale_hist[sides]: 1 row, 2 column,
  // 3 both; 0 none, all at 0). Values are clamped to 1023.
  std::array<std::vector<uint64_t>, 3> act_hist;
  std::array<std::vector<uint64_t>, 4> scale_hist;
  for (auto& h : act_hist) h.assign(1024, 0);
  for (auto& h : scale_hist) h.assign(1024, 0);
  uint64_t n_hist = 0;
  for (auto ci : sample) {
    if (small) break;
    ChunkRef c = chunk_ref(g, nullptr, ci);
    for (uint64_t r = 0; r < c.h; r += row_step) {
      const uint32_t rv = (*rc)[c.row0 + r];
      for (uint64_t cc2 = 0; cc2 < c.w; cc2 += 3) {
        const uint64_t i = (c.row0 + r) * g.cols + c.col0 + cc2;
        const int32_t l = cc2 > 0 ? vals[i - 1] : 0, l2 = cc2 > 1 ? vals[i - 2] : 0;
        const int32_t t = r > 0 ? vals[i - g.cols] : 0;
        const uint32_t a = 2 * iabs32(l) + iabs32(t) + iabs32(l2);
        const uint32_t a3 = cc2 > 2 ? iabs32(vals[i - 3]) : 0, a9 = cc2 > 8 ? iabs32(vals[i - 9]) : 0;
        act_hist[0][std::min<uint32_t>(a, 1023)]++;
        act_hist[1][std::min<uint32_t>(a + a3, 1023)]++;
        act_hist[2][std::min<uint32_t>(a + a9, 1023)]++;
        const uint32_t cv = (*cc)[c.col0 + cc2];
        scale_hist[1][std::min<uint32_t>(rv, 1023)]++;
        scale_hist[2][std::min<uint32_t>(cv, 1023)]++;
        scale_hist[3][std::min<uint32_t>(rv + cv, 1023)]++;
        ++n_hist;
      }
    }
  }
  scale_hist[0][0] = n_hist;
  // Candidates are evaluated on the sample with contexts over the whole
  // chunk (lane edges ignored: an estimate).
  // Residuals without tools: the values themselves (a copy only for chunks
  // of partial rows).
  struct SampleChunk {
    ChunkRef c;
    std::vector<int32_t> buf;
    const int32_t* res;
  };
  std::vector<SampleChunk> sch;
  for (auto ci : sample) {
    SampleChunk sc2{chunk_ref(g, nullptr, ci), {}, nullptr};
    sc2.res = residuals_of(g, vals, sc2.c, nullptr, &sc2.buf);
    sch.push_back(std::move(sc2));
  }
  // Most candidates differ only in their thresholds, extra neighbours, column
  // period and scale classes: their contexts come from per-element features
  // computed once (the values int_ctx computes over the chunk as one
  // rectangle).
  struct Feat {
    uint32_t a0, la3, la9;  // activity without the extra neighbour; |L3|, |L9|
    uint32_t a1;            // |L1|
    uint32_t col;           // tensor column
    uint16_t tok;
    uint16_t q;             // sign classes q() of L1, L2, T, L3, L9, 2 bits each from bit 0
    uint8_t ls, rcv, ccv;   // left sign class; row and column scale values
  };
  auto qv = [](int32_t v) { return static_cast<uint32_t>(v > 0) | static_cast<uint32_t>(v < 0) << 1; };
  std::vector<Feat> feats;
  feats.reserve(sampled);
  for (const auto& ch : sch) {
    const uint32_t h = static_cast<uint32_t>(ch.c.h), w = static_cast<uint32_t>(ch.c.w);
    for (uint32_t r = 0; r < h; r += static_cast<uint32_t>(row_step)) {
      const int32_t* row = ch.res + uint64_t{r} * w;
      const uint8_t rcv = (*rc)[ch.c.row0 + r];
      const uint8_t* ccs = cc->data() + ch.c.col0;
      for (uint32_t c = 0; c < w; ++c) {
        const bool hl = c > 0, ht = r > 0;
        const int32_t l = hl ? row[c - 1] : 0, l2 = c > 1 ? row[c - 2] : 0;
        const int32_t t = ht ? row[static_cast<int64_t>(c) - static_cast<int64_t>(w)] : 0;
        Feat f;
        f.a0 = 2 * iabs32(l) + iabs32(t) + iabs32(l2) + (!hl && ht ? 2 * iabs32(t) : 0u);
        f.la3 = c >= 3 ? iabs32(row[c - 3]) : 0u;
        f.la9 = c >= 9 ? iabs32(row[c - 9]) : 0u;
        f.a1 = iabs32(l);
        f.tok = static_cast<uint16_t>(make_token(base, row[c]).tok);
        f.col = static_cast<uint32_t>(ch.c.col0 + c);
        f.q = static_cast<uint16_t>(qv(l) | qv(l2) << 2 | qv(t) << 4 | (c >= 3 ? qv(row[c - 3]) : 0u) << 6 |
                                    (c >= 9 ? qv(row[c - 9]) : 0u) << 8);
        f.ls = static_cast<uint8_t>(qv(l));
        f.rcv = rcv;
        f.ccv = ccs[c];
        feats.push_back(f);
      }
    }
  }
  // The activity distribution of the 3x3 kernel contexts (nbr_mode 3), over
  // the features: phases cycle with period 9, which the histogram pass above
  // (every third element) would not sample evenly.
  // A feature's 3x3 kernel neighbours (int_kernel_nbrs bits) and their
  // activity |Lk| + |Uk|.
  auto kern3x3 = [](const Feat& f, uint32_t* nbrs) {
    const uint32_t kp = f.col % 9, k = (kp % 3 != 0 ? 1u : 0u) | (kp >= 3 ? 2u : 0u);
    *nbrs = k;
    return (k & 1 ? f.a1 : 0u) + (k & 2 ? f.la3 : 0u);
  };
  std::vector<uint64_t> kern_hist;
  uint64_t n_kern = 0;
  if (kernels) {
    kern_hist.assign(1024, 0);
    uint32_t k;
    for (const Feat& f : feats) kern_hist[std::min<uint32_t>(kern3x3(f, &k), 1023)]++;
    n_kern = feats.size();
  }
  // Activity candidates (nbr_mode 0 with no extra neighbour or L3 / L9; 3x3
  // kernel contexts, nbr_mode 3) and sign-neighbour candidates (nbr_mode 1
  // with L3 and optionally L9; nbr_mode 2 with L3 and a column period), from
  // the features.
  // Counts per (context, token) cover the tokens that occur (ternary codes:
  // 3 of 26): the same costs (context_cost skips empty cells) from a
  // fraction of the cells.
  uint32_t nsym_used = 1;
  for (const Feat& f : feats) nsym_used = std::max<uint32_t>(nsym_used, f.tok + 1u);
  std::vector<uint32_t> fcnt;
  // use(f, ctx) for every feature under the params' context function (the
  // mode chosen outside the loop).
  auto each_ctx = [&](const IntParams& p, const IntLuts& L, auto&& use) {
    const uint32_t oa = p.off_a, use_rc = p.use_rc ? 0xFFu : 0u, use_cc = p.use_cc ? 0xFFu : 0u;
    auto loop = [&](auto&& ctx_of) {
      for (const Feat& f : feats) use(f, ctx_of(f, static_cast<uint32_t>(L.scale[(f.rcv & use_rc) + (f.ccv & use_cc)])));
    };
    auto q = [](const Feat& f, int k) { return static_cast<uint32_t>(f.q >> (2 * k) & 3); };  // L1 L2 T L3 L9
    if (p.nbr_mode == 0) {
      loop([&](const Feat& f, uint32_t sc) {
        return int_ctx_act(p, L, f.a0 + (oa == 3 ? f.la3 : (oa == 9 ? f.la9 : 0u)), f.ls, sc);
      });
    } else if (p.nbr_mode == 2) {
      loop([&](const Feat& f, uint32_t sc) { return (sc * p.period + f.col % p.period) * 9u + q(f, 0) * 3u + q(f, 3); });
    } else if (p.nbr_mode == 3) {  // 3x3 kernels: L1 and L3 inside the kernel
      loop([&](const Feat& f, uint32_t sc) {
        uint32_t k;
        const uint32_t a = kern3x3(f, &k);
        return ((sc * p.nb + L.act[std::min<uint32_t>(a, 1023)]) * 3u + (k & 1 ? q(f, 0) : 0u)) * 3u +
               (k & 2 ? q(f, 3) : 0u);
      });
    } else {
      loop([&](const Feat& f, uint32_t sc) {
        const uint32_t k = ((q(f, 0) * 3u + q(f, 1)) * 3u + q(f, 3)) * 3u + q(f, 2);
        return p.off_b ? sc * 243u + k * 3u + q(f, 4) : sc * 81u + k;
      });
    }
  };
  auto fcnt_bits = [&](uint32_t nctx, uint32_t nsym) {
    double bits = 0;
    for (uint32_t k = 0; k < nctx; ++k) bits += context_cost(fcnt.data() + uint64_t{k} * nsym, nsym, scale);
    return bits;
  };
  auto eval_feats = [&](const IntParams& p) {
    IntLuts L;
    build_int_luts(p, &L);
    const uint32_t nctx = int_nctx(p), nsym = nsym_used;
    fcnt.assign(uint64_t{nctx} * nsym, 0);
    each_ctx(p, L, [&](const Feat& f, uint32_t ctx) { fcnt[uint64_t{ctx} * nsym + f.tok]++; });
    return fcnt_bits(nctx, nsym);
  };
  // Candidates that differ from params `from` (one scale class) only in
  // their scale classes: every context is sc * (contexts per class) + the
  // context at class 0, so each feature's class-0 context and token are
  // computed once (keys) and each candidate adds its scale class.
  std::vector<uint32_t> keys;
  auto make_keys = [&](const IntParams& from) {
    IntLuts L;
    build_int_luts(from, &L);
    keys.clear();
    keys.reserve(feats.size());
    each_ctx(from, L, [&](const Feat& f, uint32_t ctx) { keys.push_back(ctx * nsym_used + f.tok); });
  };
  auto eval_scaled = [&](const IntParams& p) {
    IntLuts L;
    build_int_luts(p, &L);
    const uint32_t nctx = int_nctx(p), nsym = nsym_used, stride = nctx / p.ns * nsym;
    fcnt.assign(uint64_t{nctx} * nsym, 0);
    const uint32_t use_rc = p.use_rc ? 0xFFu : 0u, use_cc = p.use_cc ? 0xFFu : 0u;
    for (size_t i = 0; i < feats.size(); ++i) {
      const Feat& f = feats[i];
      fcnt[L.scale[(f.rcv & use_rc) + (f.ccv & use_cc)] * stride + keys[i]]++;
    }
    double bits = fcnt_bits(nctx, nsym);
    if (p.use_rc) bits += 5.0 * static_cast<double>(g.rows);
    if (p.use_cc) bits += 5.0 * static_cast<double>(g.cols);
    return bits;
  };
  auto from_feats = [](const IntParams& p) {
    const bool act = (p.nbr_mode == 0 && (p.off_a == 0 || p.off_a == 3 || p.off_a == 9)) ||
                     (p.nbr_mode == 3 && p.period == 9 && p.off_a == 3);
    const bool signs = (p.nbr_mode == 1 || p.nbr_mode == 2) && p.off_a == 3 && (p.off_b == 0 || p.off_b == 9) &&
                       (p.nbr_mode == 1 || (p.off_b == 0 && p.period > 0));
    return act || signs;
  };
  bool scaled = false;  // candidates differ from the keys' params in scale classes only
  auto eval = [&](const IntParams& p) {
    if (scaled) return eval_scaled(p);
    if (from_feats(p)) {
      double bits = eval_feats(p);
      if (p.use_rc) bits += 5.0 * static_cast<double>(g.rows);
      if (p.use_cc) bits += 5.0 * static_cast<double>(g.cols);
      return bits;
    }
    Stats s;
    s.init(int_nctx(p), p.nsym, 0, 0);
    IntLuts L;
    build_int_luts(p, &L);
    for (const auto& ch : sch) {
      const uint32_t h = static_cast<uint32_t>(ch.c.h), w = static_cast<uint32_t>(ch.c.w);
      for (uint32_t r = 0; r < h; r += static_cast<uint32_t>(row_step)) {
        for (uint32_t c = 0; c < w; ++c) {
          const uint32_t scl = int_scale_class(p, L, rc->data(), cc->data(), static_cast<uint32_t>(ch.c.row0 + r),
                                               static_cast<uint32_t>(ch.c.col0 + c));
          s.add(0, int_ctx(p, L, ch.res, w, r, c, 0, 0, scl,
                           p.nbr_mode >= 2 ? static_cast<uint32_t>((ch.c.col0 + c) % p.period) : 0u),
                make_token(base, ch.res[uint64_t{r} * w + c]).tok);
        }
      }
    }
    double bits = s.cost(scale);
    if (p.use_rc) bits += 5.0 * static_cast<double>(g.rows);
    if (p.use_cc) bits += 5.0 * static_cast<double>(g.cols);
    return bits;
  };
  double best_cost = eval(best);
  auto set_thresholds = [&](IntParams& p) {
    const int oa = p.nbr_mode == 0 && (p.off_a == 3 || p.off_a == 9) ? p.off_a : 0;
    auto thr = p.nbr_mode == 3 ? hist_thresholds(kern_hist, n_kern, p.nb)
                               : hist_thresholds(act_hist[oa == 3 ? 1 : (oa == 9 ? 2 : 0)], n_hist, p.nb);
    for (size_t i = 0; i < thr.size(); ++i) p.thr[i] = static_cast<uint16_t>(std::min<uint32_t>(thr[i], 65535));
    if (p.ns > 1) {
      const int sides = (p.use_rc ? 1 : 0) | (p.use_cc ? 2 : 0);
      auto st = hist_thresholds(scale_hist[sides], n_hist, p.ns);
      for (size_t i = 0; i < st.size(); ++i) p.sthr[i] = static_cast<uint8_t>(std::min<uint32_t>(st[i], 255));
    }
  };
  auto consider = [&](IntParams p) {
    // Decode speed: context tables of large alphabets must stay in the L2
    // cache (5 KiB each).
    if (p.nsym > 64 && int_nctx(p) > kMaxWideContexts) return;
    set_thresholds(p);
    const double cst = eval(p);
    if (cst < best_cost) {
      best_cost = cst;
      best = p;
    }
  };
  // Greedy search: the neighbour model first, then the scale classes.
  for (uint8_t nb : {3, 6}) {
    if (small) break;
    IntParams p = base;
    p.nbr_mode = 0;
    p.nb = nb;
    p.ns = 1;
    consider(p);
  }
  if (base.sub == kIntTernary && !small) {
    // Exact neighbour signs: nbr_mode 1 (off_b: a fourth neighbour), or 2
    // with a column period (convolution kernels flattened along a row repeat
    // their statistics with the kernel size: 9 for 3x3, 25 for 5x5).
    auto signs = [&](uint8_t mode, uint8_t off_b, uint8_t period) {
      IntParams p = base;
      p.nbr_mode = mode;
      p.nb = 1;
      p.ns = 1;
      p.off_a = 3;
      p.off_b = off_b;
      p.period = period;
      consider(p);
    };
    signs(1, 0, 0);
    signs(1, 9, 0);
    if (allow_phase) {
      signs(2, 0, 9);
      signs(2, 0, 25);
    }
  }
  // A periodic neighbour (convolution kernels flattened along a row).
  for (uint8_t oa : {3, 9}) {
    IntParams p = best;
    if (p.nbr_mode != 0 || p.nb == 1) break;
    p.off_a = oa;
    consider(p);
  }
  // 3x3 kernels flattened along a row: the left and upper neighbours inside
  // each kernel (their signs x activity classes).
  if (kernels) {
    for (uint8_t nb : {1, 2, 3, 4}) {
      if (small && nb > 1) break;
      IntParams p = base;
      p.nbr_mode = 3;
      p.period = 9;
      p.off_a = 3;
      p.off_b = 0;
      p.nb = nb;
      p.ns = 1;
      consider(p);
    }
  }
  const IntParams stage1 = best;
  if (from_feats(stage1) && stage1.ns == 1 && !stage1.use_rc && !stage1.use_cc) {
    make_keys(stage1);
    scaled = true;
  }
  for (uint8_t ns : {4, 8}) {
    if (small) break;
    for (int sides = 1; sides < 4; ++sides) {
      IntParams p = stage1;
      p.ns = ns;
      p.use_rc = sides & 1;
      p.use_cc = (sides >> 1) & 1;
      consider(p);
    }
  }
  done();
}

// ------------------------------------------------------------------ bytes
static void choose_bytes(const TensorGeometry& g, const uint8_t* data, uint32_t eb, TensorModel* m) {
  auto sample = sample_chunks(g, 1u << 19);
  uint64_t sampled = 0;
  for (auto ci : sample) {
    uint64_t a, b, h, w;
    g.chunk_rect(ci, &a, &b, &h, &w);
    sampled += h * w;
  }
  const double scale = static_cast<double>(g.rows * g.cols) / static_cast<double>(std::max<uint64_t>(1, sampled));
  double best = std::numeric_limits<double>::infinity();
  for (uint8_t mode : {0, 1}) {
    BytesParams p{static_cast<uint8_t>(eb), mode};
    Stats s;
    s.init(bytes_nctx(p), 256, 0, 0);
    for (auto ci : sample) {
      ChunkRef c = chunk_ref(g, data, ci);
      walk_bytes(p, static_cast<uint32_t>(c.h), static_cast<uint32_t>(c.w), c.bytes,
                 [&](uint32_t, uint32_t set, uint32_t ctx, uint32_t sym) { s.add(set, ctx, sym); });
    }
    const double cst = s.cost(scale);
    if (cst < best) {
      best = cst;
      m->bp = p;
    }
  }
  m->kind = ModelKind::kBytes;
}

// ------------------------------------------------------------------ encode
static std::vector<uint8_t> zstd_compress(const uint8_t* p, size_t n, int level) {
  std::vector<uint8_t> out(ZSTD_compressBound(n));
  // One compression context per thread, reused: ZSTD_compress would
  // allocate and initialise one per chunk (same output either way).
  struct CCtx {
    ZSTD_CCtx* p = ZSTD_createCCtx();
    ~CCtx() { ZSTD_freeCCtx(p); }
  };
  thread_local CCtx cctx;
  const size_t r = cctx.p ? ZSTD_compressCCtx(cctx.p, out.data(), out.size(), p, n, level)
                          : ZSTD_compress(out.data(), out.size(), p, n, level);
  if (ZSTD_isError(r)) return {};
  out.resize(r);
  return out;
}

static void append_u32(std::vector<uint8_t>& v, uint32_t x) {
  for (int i = 0; i < 4; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * i)));
}

// Chooses the smallest of model payload (if any), zstd and raw.
// Whether the level 1 probe's output (z bytes) shows matches: it is under
// 97% of the bytes' order-0 entropy (what coding them as literals alone
// gives). Where it is not, the higher levels find no more matches than
// level 1 and code the literals alike: on weights they came out within
// 0.1% of level 1 (often larger) at a tenth of its speed.
static bool lz_matters(const uint8_t* p, size_t n, size_t z) {
  uint32_t h[4][256] = {};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    h[0][p[i]]++;
    h[1][p[i + 1]]++;
    h[2][p[i + 2]]++;
    h[3][p[i + 3]]++;
  }
  for (; i < n; ++i) h[0][p[i]]++;
  double slog = 0;
  for (int b = 0; b < 256; ++b) slog += clog2c(uint64_t{h[0][b]} + h[1][b] + h[2][b] + h[3][b]);
  const double literal_bytes = (clog2c(n) - slog) / 8.0;
  return static_cast<double>(z) < 0.97 * literal_bytes;
}

// Chunks below this size take the level 1 probe only: on the real
// checkpoints the configured level never changed the size of one (level 9
// costs 35-180 us on a 1-6 KB input, mostly its table setup).
inline constexpr size_t kZstdHigherMin = 4096;
// Chunks below kZstdSmallChunk take at most level kZstdSmallLevel: on the
// real checkpoints' 4-16 KB tensors it came within 4 bytes of level 9 in
// all (level 3: 1.6% larger on one), at half level 9's time (on a 6 KB
// input level 9 took 117 us, level 5 62 us, level 1 18 us).
inline constexpr size_t kZstdSmallChunk = 16384;
inline constexpr int kZstdSmallLevel = 5;

// z1: the chunk's level 1 zstd output where the caller has it (empty: not
// made yet); taken.
static EncodedChunk pick_chunk(const ChunkRef& c, std::vector<uint8_t>&& model_payload, const EncodeOptions& opt,
                               std::vector<uint8_t>* z1 = nullptr) {
  EncodedChunk e;
  e.decoded_size = c.nbytes;
  e.xxh3 = chunk_hash(c.bytes, c.nbytes);
  e.method = ChunkMethod::kRaw;
  size_t best = c.nbytes;
  if (!model_payload.empty() && model_payload.size() < best) {
    best = model_payload.size();
    e.method = ChunkMethod::kModel;
  }
  // A fast zstd probe on every chunk (repetitive tensors, e.g. fixed
  // bases or untrained embedding rows, favour LZ); the configured level
  // only where the probe comes within 1/64 of the best so far (1/32 for
  // chunks under 64 KiB, where the higher levels gain more and cost
  // little). On the real checkpoints level 1 comes within 0.3% of level 3
  // on weights at 1.4-2.7x its speed, and level 9 never beat the best on a
  // large chunk where level 1 missed it by more than 1/64; with 1/32 it ran
  // on three quarters of the int4 chunks (a tenth of their encode time).
  auto z = z1 && !z1->empty() ? std::move(*z1) : zstd_compress(c.bytes, c.nbytes, 1);
  const size_t near = c.nbytes < (16u << 10) ? best / 32 : best / 64;
  if (!z.empty() && opt.zstd_level > 1 && c.nbytes >= kZstdHigherMin && z.size() < best + near &&
      lz_matters(c.bytes, c.nbytes, z.size())) {
    const int level = c.nbytes < kZstdSmallChunk ? std::min(opt.zstd_level, kZstdSmallLevel) : opt.zstd_level;
    auto z2 = zstd_compress(c.bytes, c.nbytes, level);
    if (!z2.empty() && z2.size() < z.size()) z = std::move(z2);
  }
  if (!z.empty() && z.size() < best) {
    e.method = ChunkMethod::kZstd;
    e.payload = std::move(z);
    e.fallback_size = e.payload.size();
    return e;
  }
  if (e.method == ChunkMethod::kModel) {
    e.payload = std::move(model_payload);
    e.fallback_size = z.empty() ? c.nbytes : std::min<uint64_t>(z.size(), c.nbytes);
  } else {
    e.payload.assign(c.bytes, c.bytes + c.nbytes);
    e.fallback_size = c.nbytes;
  }
  return e;
}

static void init_stats(const TensorModel& m, Stats* st);
static void add_tensor_stats(const TensorGeometry& g, const uint8_t* data, const IntGrid& vals,
                             const TensorModel& m, const std::vector<std::vector<uint8_t>>& maps,
                             const std::vector<char>& has_map, Stats* st);
// Float chunks up to this many decoded bytes use the raw tail (flag bit 1).
constexpr uint64_t kRawTailMaxChunk = 128 * 1024;

// cached (int models, may be null): every element's ctx * nsym + token in
// visit_int_elems order, chunk after chunk, for chunks without a tile map.
// z1 (may be null): per chunk, its level 1 zstd output where the tool
// search made it (pick_chunk).
static void encode_chunks(const TensorGeometry& g, const uint8_t* data, const IntGrid& vals,
                          const TensorModel& m, const std::vector<std::vector<uint8_t>>& maps,
                          const std::vector<char>& has_map, const EncodeOptions& opt, EncodedTensor* et,
                          const uint16_t* cached = nullptr, const char* cached_escapes = nullptr,
                          uint32_t cached_stride = 0, std::vector<std::vector<uint8_t>>* z1 = nullptr);

// Whether 4-bit codes coded as their distance from the group's zero point
// (aux) beat the codes less 8: the order-0 entropy of the tokens each gives,
// from the (code, zero point) pairs of up to ~2^18 elements (whole rows
// spread over the tensor). Asymmetric quantizers put a group's weights
// around its zero point, but on isnet's RTN int4 checkpoint the codes less
// 8 code 1.3% smaller: where the codes fill [0, 15] alike in every group,
// the distance to a varying zero point only spreads them.
static bool zero_points_pay(const TensorGeometry& g, const uint8_t* data, const AuxInput& aux) {
  uint64_t pairs[16 * 16] = {};  // make_aux: zero points fit 4 bits
  const uint64_t row_step = std::max<uint64_t>(1, g.rows * g.cols >> 18);
  for (uint64_t r = 0; r < g.rows; r += row_step) {
    const uint8_t* zrow = aux.bytes + r * aux.cols;
    // Group by group (a division per element was a twentieth of
    // stories260K int4's encode time).
    for (uint64_t c0 = 0, q = 0; c0 < g.cols; c0 += aux.group, ++q) {
      const uint32_t z = zrow[q] & 15u;
      const uint64_t c1 = std::min<uint64_t>(g.cols, c0 + aux.group);
      for (uint64_t c = c0; c < c1; ++c) pairs[code_at(kIntNibble, data, r * g.cols + c) * 16u + z]++;
    }
  }
  auto entropy = [](const std::vector<uint64_t>& h) {
    uint64_t n = 0;
    double slog = 0;
    for (auto x : h) {
      n += x;
      slog += clog2c(x);
    }
    return n ? clog2c(n) - slog : 0.0;
  };
  std::vector<uint64_t> with(32, 0), without(32, 0);
  for (uint32_t code = 0; code < 16; ++code)
    for (uint32_t z = 0; z < 16; ++z) {
      const uint64_t k = pairs[code * 16 + z];
      if (!k) continue;
      with[tile::zz_encode(static_cast<int32_t>(code) - static_cast<int32_t>(z))] += k;
      without[tile::zz_encode(static_cast<int32_t>(code) - 8)] += k;
    }
  return entropy(with) < entropy(without);
}

Result<EncodedTensor> encode_tensor(const TensorInfo& info, const uint8_t* data, const AuxInput& aux,
                                    const EncodeOptions& opt) {
  EncodedTensor et;
  const uint64_t nbytes = info.nbytes();
  const uint64_t rows = info.shape.size() >= 2 ? info.shape[0] : 1;
  FloatLayout fl{};
  const bool is_float = float_layout(info.dtype, &fl);
  // Decide the element view.
  enum { kRawOnly, kFloatK, kIntK, kBytesK } kind = kRawOnly;
  IntParams ip{};
  uint32_t elem_bits = 8;
  const bool small = nbytes < 2048;
  if (small) {
    kind = kRawOnly;
  } else if (is_float) {
    kind = kFloatK;
    elem_bits = fl.bytes * 8;
  } else if (info.dtype == DType::kI8) {
    kind = kIntK;
    ip.sub = kIntI8;
  } else if (info.dtype == DType::kU8 || info.dtype == DType::kI32 || info.dtype == DType::kU32) {
    // Probe the packing: ternary when no 2-bit field holds 3 (the reserved
    // code) in U8 data named as packed, nibbles when named packed/qweight,
    // otherwise plain bytes.
    const std::string& nm = info.name;
    const bool named_packed = nm.find("packed") != std::string::npos || nm.find("qweight") != std::string::npos;
    bool tern_ok = info.dtype == DType::kU8;
    if (tern_ok) {
      // A field holds 3 where both its bits are set: bit 2k of b & b >> 1.
      uint8_t both = 0;
      for (uint64_t i = 0; i < nbytes; ++i) both |= static_cast<uint8_t>(data[i] & (data[i] >> 1));
      tern_ok = (both & 0x55) == 0;
    }
    if (named_packed && tern_ok) {
      kind = kIntK;
      ip.sub = kIntTernary;
      elem_bits = 2;
    } else if (named_packed) {
      kind = kIntK;
      ip.sub = kIntNibble;
      elem_bits = 4;
    } else if (info.dtype == DType::kU8) {
      kind = kIntK;
      ip.sub = kIntU8;
    } else {
      kind = kBytesK;
      elem_bits = 32;
    }
  } else {
    const unsigned bits = dtype_bits(info.dtype);
    if (bits % 8 == 0 && bits / 8 <= 16) {
      kind = kBytesK;
      elem_bits = bits;
    }
  }
  et.geom = make_geometry(nbytes, rows, elem_bits, opt.chunk_bytes);
  const TensorGeometry& g = et.geom;
  const uint64_t nchunks = g.num_chunks();
  IntGrid vals;
  uint32_t max_abs = 0;         // int: the largest magnitude of a value
  std::vector<uint8_t> lz_probe;  // int, one chunk: its level 1 zstd output
  bool lz_tensor = false;       // int: zstd wins whatever the model (see below)
  if (kind == kFloatK) {
    choose_float(g, data, fl, opt.format_2_1, &et.model);
    et.choice.kind_name = dtype_name(info.dtype);
  } else if (kind == kIntK) {
    switch (ip.sub) {
      case kIntI8: ip.esc = 236; et.choice.kind_name = "int8"; break;
      case kIntU8: ip.esc = 236; ip.center = 128; et.choice.kind_name = "uint8"; break;
      case kIntNibble: ip.esc = 32; ip.center = 8; et.choice.kind_name = "int4"; break;
      default: ip.esc = 8; et.choice.kind_name = "ternary"; break;
    }
    if (ip.sub == kIntNibble && aux.index >= 0 && aux.bytes && aux.rows == g.rows && aux.group &&
        (g.cols + aux.group - 1) / aux.group == aux.cols && zero_points_pay(g, data, aux)) {
      ip.zgroup = aux.group;
      et.aux_tensor = aux.index;
      et.zgroup = aux.group;
    }
    if (ip.sub == kIntU8) {
      // Center on the median byte.
      std::vector<uint64_t> h(256, 0);
      for (uint64_t i = 0; i < nbytes; ++i) h[data[i]]++;
      uint64_t acc = 0;
      for (int b = 0; b < 256; ++b) {
        acc += h[b];
        if (acc * 2 >= nbytes) {
          ip.center = static_cast<uint8_t>(b);
          break;
        }
      }
    }
    ip.nsym = static_cast<uint16_t>(ip.esc + kEscClasses);
    int_values(ip, g, data, aux, &vals);
    // A one-chunk tensor that zstd level 1 already takes well below the
    // order-0 entropy of its codes (an embedding with repeated rows,
    // untrained weights) keeps zstd: its model search and tile probe are
    // skipped (the probe's output goes to pick_chunk). Over the real
    // checkpoints' one-chunk tensors, the smallest model payload (before
    // its tables) came to 0.91 of order-0 for 8-bit codes, 0.81 for 4-bit
    // and 0.62 for ternary (a 3x3 convolution with kernel contexts); the
    // thresholds keep a margin below those. The tensors under them are the
    // stories260K embeddings (zstd level 1 at 0.67, 0.55 and 0.52 of
    // order-0), which zstd takes whatever the model: the int4 one's search
    // was a third of that file's encode time.
    if (nchunks == 1 && g.rows * g.cols >= kSmallIntElems) {
      const double below = ip.sub == kIntTernary ? 0.55 : (ip.sub == kIntNibble ? 0.6 : 0.75);
      lz_probe = zstd_compress(data, nbytes, 1);
      lz_tensor = !lz_probe.empty() && static_cast<double>(lz_probe.size()) < below * int_order0_bytes(ip, vals);
    }
    choose_int(g, vals, ip, opt.format_2_1, lz_tensor, &et.model, &et.model.rc, &et.model.cc, &max_abs);
  } else if (kind == kBytesK) {
    choose_bytes(g, data, elem_bits / 8, &et.model);
    et.choice.kind_name = "bytes";
  } else {
    et.choice.kind_name = "raw";
  }

  if (kind == kRawOnly) {
    // One chunk per target size over the bytes.
    et.geom = make_geometry(nbytes, 1, 8, opt.chunk_bytes);
    for (uint64_t i = 0; i < et.geom.num_chunks(); ++i) {
      ChunkRef c = chunk_ref(et.geom, data, i);
      et.chunks.push_back(pick_chunk(c, {}, opt));
    }
    et.choice.model_desc = "-";
    return et;
  }

  TensorModel& m = et.model;
  // Tile tools (int): decide tile maps per chunk using a token cost table
  // from the untransformed residuals.
  std::vector<std::vector<uint8_t>> maps(nchunks);
  std::vector<std::vector<uint8_t>> z1(nchunks);  // level 1 zstd of the searched chunks, for pick_chunk
  if (!lz_probe.empty()) z1[0] = std::move(lz_probe);
  std::vector<char> has_map(nchunks, 0);
  std::optional<TensorModel> tool_free_model;  // the model with tables from the tool-free statistics
  RawVector<uint16_t> tok_cache;  // see the tool-free statistics below
  std::vector<char> cache_escapes;  // per chunk: whether its cached tokens include escapes
  uint32_t cache_stride = 0;        // the cache's keys: ctx * cache_stride + token
  if (kind == kIntK && opt.tool_search) {
    // Default profile: search a sample of chunks; the rest only if some
    // sampled chunk keeps a map. Ternary codes are not searched: a predicted
    // or transformed tile of -1/0/+1 codes has residuals over a wider
    // alphabet than the codes themselves, and the tool probe was an eighth
    // of their encode time for nothing. Neither are small tensors (under
    // kSmallIntElems elements): a map there pays for 2 bytes per 16x16
    // tile out of a few KB; no tensor of the data set keeps one, nor do
    // smooth synthetic ones of 32x32 to 96x96 (make_smooth_int8_file's
    // pattern), and their probes were a seventh of stories260K int8's
    // encode time.
    std::vector<uint64_t> probe;
    if (opt.exhaustive_tools) probe = sample_chunks(g, UINT64_MAX);
    else if (!lz_tensor && m.ip.sub != kIntTernary && g.rows * g.cols >= kSmallIntElems)
      probe = sample_chunks(g, 1u << 16);
    // Order-0 token costs of the probe's tiles, from a sample of the values.
    std::vector<double> cost(m.ip.nsym);
    if (!probe.empty()) {
      std::vector<uint64_t> hist(m.ip.nsym, 1);
      const uint64_t hstep = std::max<uint64_t>(1, vals.size() >> 16);
      for (uint64_t i = 0; i < vals.size(); i += hstep) hist[make_token(m.ip, vals[i]).tok]++;
      double tot = 0;
      for (auto hc : hist) tot += static_cast<double>(hc);
      for (size_t s = 0; s < cost.size(); ++s) cost[s] = -std::log2(static_cast<double>(hist[s]) / tot);
    }
    for (uint64_t i = 0; i < nchunks; ++i) {
      ChunkRef c = chunk_ref(g, data, i);
      const uint32_t tr = static_cast<uint32_t>((c.h + kTile - 1) / kTile), tc = static_cast<uint32_t>((c.w + kTile - 1) / kTile);
      et.choice.tiles_total += tr * tc;
    }
    // Statistics and tables of every chunk without tools first: the exact
    // measure of a map (below), and the final statistics if no chunk keeps
    // one (real weights: none does).
    // Each element's ctx * stride + token is kept (2 bytes, half its
    // residual's size) for the chunk encoder when it fits 16 bits; stride:
    // the tokens the values can give (ternary: 3 of 26), so that the keys
    // and their counts stay compact.
    Stats sa;
    sa.init(int_nctx(m.ip), m.ip.nsym, 0, 0);
    std::vector<int32_t> rbuf;
    const uint32_t nsym = std::min<uint32_t>(
        m.ip.nsym, make_token(m.ip, -static_cast<int32_t>(std::min<uint32_t>(max_abs, 1u << 29))).tok + 2);
    const bool keep = uint64_t{int_nctx(m.ip)} * nsym <= 65536;
    if (keep) {
      tok_cache.resize(vals.size());
      cache_escapes.assign(nchunks, 1);
      cache_stride = nsym;
    }
    uint16_t* kc = tok_cache.data();
    for (uint64_t i = 0; i < nchunks; ++i) {
      ChunkRef c = chunk_ref(g, data, i);
      const int32_t* rp = residuals_of(g, vals, c, nullptr, &rbuf);
      if (keep) {
        // In encode_int_reverse's order: lane by lane, each lane's steps.
        const uint32_t h = static_cast<uint32_t>(c.h), w = static_cast<uint32_t>(c.w);
        uint64_t off[kLanes + 1];
        lane_offsets(h, w, off);
        bool escapes = false;
        visit_int_runs(m.ip, m.rc.data(), m.cc.data(), c.row0, c.col0, h, w, rp,
                       [&](uint32_t l, uint32_t t, uint32_t r, uint32_t c0, uint32_t c1, const uint32_t* ctx) {
                         escapes |= int_row_keys(ctx, rp + uint64_t{r} * w + c0, c1 - c0, m.ip.esc, nsym,
                                                 kc + off[l] + t);
                       });
        cache_escapes[i] = escapes;
        kc += off[kLanes];
      } else {
        visit_int_tokens(m.ip, m.rc.data(), m.cc.data(), c.row0, c.col0, static_cast<uint32_t>(c.h),
                         static_cast<uint32_t>(c.w), rp, [&](uint32_t ctx, uint32_t sym) { sa.add(0, ctx, sym); });
      }
    }
    // Counted from the cache in a separate pass, into four interleaved
    // copies: runs of one (context, token) pair, common in real weights,
    // would otherwise chain every count on the previous store.
    if (keep) {
      const size_t nk = size_t{int_nctx(m.ip)} * nsym;
      std::vector<uint64_t> h(4 * nk, 0);
      const uint64_t nv = static_cast<uint64_t>(kc - tok_cache.data());
      const uint16_t* t = tok_cache.data();
      uint64_t i = 0;
      for (; i + 4 <= nv; i += 4) {
        h[t[i]]++;
        h[nk + t[i + 1]]++;
        h[2 * nk + t[i + 2]]++;
        h[3 * nk + t[i + 3]]++;
      }
      for (; i < nv; ++i) h[t[i]]++;
      for (size_t k = 0; k < nk; ++k)
        sa.f0[k / nsym * m.ip.nsym + k % nsym] += h[k] + h[nk + k] + h[2 * nk + k] + h[3 * nk + k];
    }
    TensorModel& ma = tool_free_model.emplace(m);
    build_tables(sa, &ma);
    // Measure, don't assume: a chunk keeps its tile map only if it codes
    // smaller with it under these tables. A token the tool-free tables never
    // saw would get a frequency once tables are rebuilt: charge it as a rare
    // symbol, not as impossible.
    static const std::array<double, 4097> nlog = [] {
      std::array<double, 4097> t{};
      t[0] = 14.0;
      for (uint32_t f = 1; f <= 4096; ++f) t[f] = 12.0 - std::log2(static_cast<double>(f));
      return t;
    }();
    // Bits of the chunk's tokens and their uniform extra bits (nb - 1 for
    // escape class nb >= 2), the map not counted.
    const uint32_t esc2 = m.ip.esc + 2;
    auto cost_of = [&](const ChunkRef& c, const std::vector<uint8_t>* mp) {
      const int32_t* rp = residuals_of(g, vals, c, mp, &rbuf);
      double bits = 0.0;
      visit_int_tokens(m.ip, m.rc.data(), m.cc.data(), c.row0, c.col0, static_cast<uint32_t>(c.h),
                       static_cast<uint32_t>(c.w), rp, [&](uint32_t ctx, uint32_t tok) {
                         bits += nlog[ma.t0[ctx].freq[tok]] + (tok >= esc2 ? tok - esc2 + 1 : 0u);
                       });
      return bits;
    };
    // Whether chunk c codes smaller with its map mp (charged in full) under
    // the tool-free tables: the final check of a map.
    auto pays = [&](const ChunkRef& c, const std::vector<uint8_t>& mp) {
      return cost_of(c, &mp) + 8.0 * static_cast<double>(mp.size()) < cost_of(c, nullptr);
    };
    // The token bits of the chunk's first `tiles` tiles (raster order) at
    // the empirical entropy of their own contexts: tables fitted to these
    // residuals alone, as if the whole chunk looked like them. The band
    // check; tables fitted to the whole chunk (or the tool-free tables)
    // would be dominated by the untransformed rest and bias it against tools.
    auto band_bits = [&](const ChunkRef& c, const std::vector<uint8_t>* mp, uint32_t tiles) {
      const int32_t* rp = residuals_of(g, vals, c, mp, &rbuf);
      const uint32_t tc = static_cast<uint32_t>((c.w + kTile - 1) / kTile);
      Stats fs;
      fs.init(int_nctx(m.ip), m.ip.nsym, 0, 0);
      double bits = 0.0;
      visit_int_tokens_at(m.ip, m.rc.data(), m.cc.data(), c.row0, c.col0, static_cast<uint32_t>(c.h),
                          static_cast<uint32_t>(c.w), rp,
                          [&](uint32_t r, uint32_t col, uint32_t ctx, uint32_t tok) {
                            if ((r / kTile) * tc + col / kTile >= tiles) return;
                            fs.add(0, ctx, tok);
                            if (tok >= esc2) bits += tok - esc2 + 1;
                          });
      for (uint32_t k = 0; k < fs.contexts(0); ++k) bits += entropy_bits(fs.counts(0, k));
      return bits;
    };
    // Whether zstd's fast level already codes chunk c in under 4/5 of its
    // share of the tensor's bits under the tool-free tables: exact repeats,
    // which an LZ coder finds and tile tools (predicting from neighbours)
    // do not; the chunk is stored by zstd whatever its map. Such chunks
    // are not searched: on stories260K's int8 embedding (zstd at 0.75 of
    // the tool-free model; rows of tokens that barely moved in training)
    // the search was a tenth of the file's encode time, for a map that
    // came within 1% of the tool-free model. On smooth weights, where tools
    // pay, zstd finds no matches.
    double tensor_bits = 0.0;  // (only probed tensors need it)
    for (uint32_t k = 0; k < sa.contexts(0) && !probe.empty(); ++k) {
      const uint64_t* n = sa.at(0, k);
      for (uint32_t t = 0; t < m.ip.nsym; ++t)
        if (n[t])
          tensor_bits += static_cast<double>(n[t]) * (nlog[ma.t0[k].freq[t]] + (t >= esc2 ? t - esc2 + 1 : 0u));
    }
    // *z may hold the chunk's level 1 output already (a one-chunk tensor's
    // probe before choose_int).
    auto lz_wins = [&](const ChunkRef& c, std::vector<uint8_t>* z) {
      if (z->empty()) *z = zstd_compress(c.bytes, c.nbytes, 1);
      const double share = tensor_bits * static_cast<double>(c.h * c.w) / static_cast<double>(g.rows * g.cols);
      return !z->empty() && 10.0 * static_cast<double>(z->size()) < share;
    };
    // keep_z1: the zstd probe's output is kept for pick_chunk (the probed
    // sample only: a whole tensor's outputs would hold a second copy of it).
    auto search = [&](uint64_t i, bool keep_z1) {
      ChunkRef c = chunk_ref(g, data, i);
      std::vector<uint8_t> z;
      if (!opt.exhaustive_tools && lz_wins(c, keep_z1 ? &z1[i] : &z)) return;
      has_map[i] = choose_tiles(g, vals, c, m.ip, cost, opt.exhaustive_tools, &maps[i],
                                [&](const std::vector<uint8_t>& mp, uint32_t tiles) {
                                  return band_bits(c, &mp, tiles) + 16.0 * tiles < band_bits(c, nullptr, tiles);
                                });
      if (has_map[i] && !pays(c, maps[i])) has_map[i] = 0;
    };
    bool search_rest = false;
    for (auto i : probe) {
      search(i, true);
      search_rest |= has_map[i] != 0;
    }
    if (search_rest && probe.size() < nchunks) {
      std::vector<char> probed(nchunks, 0);
      for (auto i : probe) probed[i] = 1;
      for (uint64_t i = 0; i < nchunks; ++i)
        if (!probed[i]) search(i, false);
    }
    for (uint64_t i = 0; i < nchunks; ++i) {
      if (!has_map[i]) continue;
      m.ip.tools = 1;
      for (size_t k = 0; k < maps[i].size(); k += 2) {
        if (!maps[i][k] && !maps[i][k + 1]) continue;
        et.choice.tiles_with_tools++;
        et.choice.tools_hist[maps[i][k]]++;
        for (int sb = 0; sb < 4; ++sb) {
          const uint8_t x = (maps[i][k + 1] >> (2 * sb)) & 3;
          if (x) et.choice.xform_hist[x]++;
        }
      }
    }
  }

  // Statistics over every chunk in its final form, then tables: without
  // a kept map, those of the tool search.
  bool kept_map = false;
  for (auto hm : has_map) kept_map |= hm != 0;
  if (tool_free_model && !kept_map) {
    m = std::move(*tool_free_model);
  } else {
    Stats st;
    init_stats(m, &st);
    add_tensor_stats(g, data, vals, m, maps, has_map, &st);
    build_tables(st, &m);
  }
  et.choice.model_desc = m.describe();
  encode_chunks(g, data, vals, m, maps, has_map, opt, &et, tok_cache.empty() ? nullptr : tok_cache.data(),
                cache_escapes.data(), cache_stride, &z1);
  return et;
}

static void init_stats(const TensorModel& m, Stats* st) {
  switch (m.kind) {
    case ModelKind::kFloat: st->init(float_e_nctx(m.fp), float_e_nsym(m.fp), float_sm_nctx(m.fp), 2u << m.fp.k); break;
    case ModelKind::kInt: st->init(int_nctx(m.ip), m.ip.nsym, 0, 0); break;
    case ModelKind::kBytes: st->init(bytes_nctx(m.bp), 256, 0, 0); break;
  }
}

static void add_tensor_stats(const TensorGeometry& g, const uint8_t* data, const IntGrid& vals,
                             const TensorModel& m, const std::vector<std::vector<uint8_t>>& maps,
                             const std::vector<char>& has_map, Stats* st) {
  std::vector<int32_t> res;
  auto count = [&](uint32_t, uint32_t set, uint32_t ctx, uint32_t sym) { st->add(set, ctx, sym); };
  for (uint64_t i = 0; i < g.num_chunks(); ++i) {
    ChunkRef c = chunk_ref(g, data, i);
    const uint32_t h = static_cast<uint32_t>(c.h), w = static_cast<uint32_t>(c.w);
    if (m.kind == ModelKind::kFloat) {
      count_float(m.fp, h, w, c.bytes, st);
    } else if (m.kind == ModelKind::kInt) {
      const int32_t* rp = residuals_of(g, vals, c, i < has_map.size() && has_map[i] ? &maps[i] : nullptr, &res);
      if (uint64_t{int_nctx(m.ip)} * m.ip.nsym <= 65536) {
        // Keys (ctx * nsym + token, the flat index of the counts) a run at once.
        thread_local std::vector<uint16_t> keys;
        if (keys.size() < w) keys.resize(w);
        visit_int_runs(m.ip, m.rc.data(), m.cc.data(), c.row0, c.col0, h, w, rp,
                       [&](uint32_t, uint32_t, uint32_t r, uint32_t c0, uint32_t c1, const uint32_t* ctx) {
                         int_row_keys(ctx, rp + uint64_t{r} * w + c0, c1 - c0, m.ip.esc, m.ip.nsym, keys.data());
                         for (uint32_t k = 0; k < c1 - c0; ++k) st->f0[keys[k]]++;
                       });
      } else {
        visit_int_tokens(m.ip, m.rc.data(), m.cc.data(), c.row0, c.col0, h, w, rp,
                         [&](uint32_t ctx, uint32_t sym) { st->add(0, ctx, sym); });
      }
    } else {
      walk_bytes(m.bp, h, w, c.bytes, count);
    }
  }
}

static void encode_chunks(const TensorGeometry& g, const uint8_t* data, const IntGrid& vals,
                          const TensorModel& m, const std::vector<std::vector<uint8_t>>& maps,
                          const std::vector<char>& has_map, const EncodeOptions& opt, EncodedTensor* et,
                          const uint16_t* cached, const char* cached_escapes, uint32_t cached_stride,
                          std::vector<std::vector<uint8_t>>* z1) {
  RansEncoder enc;
  FloatChunkData fd;
  std::vector<int32_t> res;
  bool any_model = false;
  et->chunks.clear();
  const PackedTables t0(m.t0), t1(m.t1);
  std::vector<uint32_t> flat;  // entries by ctx * cached_stride + token, for cached
  if (cached && m.kind == ModelKind::kInt) {
    const uint32_t stride = cached_stride;
    flat.assign(uint64_t{int_nctx(m.ip)} * stride, 0);
    for (uint32_t k = 0; k < int_nctx(m.ip); ++k)
      for (uint32_t s = t0.lo; s < t0.lo + t0.n && s < stride; ++s) flat[uint64_t{k} * stride + s] = t0.at(k, s);
  }
  uint64_t cached_at = 0;  // elements of the chunks before this one
  for (uint64_t i = 0; i < g.num_chunks(); ++i) {
    ChunkRef c = chunk_ref(g, data, i);
    const uint16_t* ccache = cached ? cached + cached_at : nullptr;
    cached_at += c.h * c.w;
    const uint32_t h = static_cast<uint32_t>(c.h), w = static_cast<uint32_t>(c.w);
    enc.clear();
    std::vector<uint8_t> payload;
    auto put = [&](uint32_t lane, uint32_t set, uint32_t ctx, uint32_t sym) {
      enc.put_sf(static_cast<int>(lane), set ? t1.at(ctx, sym) : t0.at(ctx, sym));
    };
    std::vector<uint8_t> raw;
    uint8_t flags = 0;
    uint32_t init[kLanes];
    const std::vector<uint8_t>* mp = i < has_map.size() && has_map[i] ? &maps[i] : nullptr;
    if (m.kind == ModelKind::kFloat) {
      split_float(m.fp, c.bytes, c.h * c.w, &fd);
      const uint32_t rb = float_raw_bits(m.fp);
      if (rb) {
        pack_raw_bits(fd.raw.data(), c.h * c.w, rb, &raw);
        // Small chunks carry the section's last 64 bytes in the lanes' final
        // states (the encoder's initial states): the 32 x 4 bytes of lane
        // states then cost half. Large chunks skip it (the tail costs the
        // decoder a scalar pass; the saving is 64 bytes).
        if (raw.size() >= kRawTailMin && c.nbytes <= kRawTailMaxChunk) {
          flags |= 2;
          const size_t keep = raw.size() - kRawTailBytes;
          for (uint32_t l = 0; l < kLanes; ++l)
            init[l] = kRansL + (uint32_t{raw[keep + 2 * l]} | uint32_t{raw[keep + 2 * l + 1]} << 8);
          raw.resize(keep);
        }
        raw.insert(raw.end(), 4, 0);  // slack for 32-bit reads
      }
      enc.begin_reverse((flags & 2) ? init : nullptr, 2 * c.h * c.w);
      encode_float_reverse(m.fp, h, w, fd, t0, t1, &enc);
    } else if (m.kind == ModelKind::kInt) {
      const int32_t* rp = residuals_of(g, vals, c, mp, &res);
      enc.begin_reverse(nullptr, 3 * c.h * c.w);
      encode_int_reverse(m.ip, m.rc.data(), m.cc.data(), c.row0, c.col0, h, w, rp, t0, mp ? nullptr : ccache,
                         flat.data(), !mp && ccache && !cached_escapes[i], &enc);
      if (mp) flags |= 1;
    } else {
      walk_bytes(m.bp, h, w, c.bytes, put);
    }
    payload.push_back(flags);
    if (mp) payload.insert(payload.end(), mp->begin(), mp->end());
    const size_t len_pos = payload.size();
    append_u32(payload, 0);
    const size_t rl = m.kind == ModelKind::kBytes ? enc.finish(payload) : enc.finish_reverse(payload);
    for (int b = 0; b < 4; ++b) payload[len_pos + b] = static_cast<uint8_t>(rl >> (8 * b));
    payload.insert(payload.end(), raw.begin(), raw.end());
    EncodedChunk ec = pick_chunk(c, std::move(payload), opt, z1 && i < z1->size() ? &(*z1)[i] : nullptr);
    any_model |= ec.method == ChunkMethod::kModel;
    et->chunks.push_back(std::move(ec));
  }
  et->has_model = any_model;
  if (!any_model) et->choice.model_desc += " (unused: fallback)";
}

// ------------------------------------------------------------------ models that do not pay
uint64_t payload_bytes(const EncodedTensor& et) {
  uint64_t n = 0;
  for (const auto& c : et.chunks) n += c.payload.size();
  return n;
}

uint64_t fallback_bytes(const EncodedTensor& et) {
  uint64_t n = 0;
  for (const auto& c : et.chunks) n += c.method == ChunkMethod::kModel ? c.fallback_size : c.payload.size();
  return n;
}

void drop_model(const uint8_t* data, const EncodeOptions& opt, EncodedTensor* et) {
  for (uint64_t i = 0; i < et->chunks.size(); ++i)
    if (et->chunks[i].method == ChunkMethod::kModel) et->chunks[i] = pick_chunk(chunk_ref(et->geom, data, i), {}, opt);
  if (et->has_model) et->choice.model_desc += " (unused: fallback)";
  et->has_model = false;
  et->model_ref = -1;
}

// ------------------------------------------------------------------ shared models
bool shareable(const EncodedTensor& et) {
  if (!et.has_model || et.aux_tensor >= 0) return false;
  const TensorModel& m = et.model;
  if (m.kind == ModelKind::kInt) return !m.ip.zgroup && !m.ip.tools;
  return true;
}

std::string share_signature(const EncodedTensor& et) {
  const TensorModel& m = et.model;
  char b[96];
  switch (m.kind) {
    case ModelKind::kFloat:
      std::snprintf(b, sizeof b, "f%u.%u.%u", m.fp.elem_bytes, m.fp.eb, m.fp.mb);
      break;
    case ModelKind::kInt:
      std::snprintf(b, sizeof b, "i%u.%u.%u", m.ip.sub, m.ip.center, m.ip.esc);
      break;
    case ModelKind::kBytes:
      std::snprintf(b, sizeof b, "b%u", m.bp.elem_bytes);
      break;
  }
  return b;
}

TensorModel shared_model_shape(const TensorModel& base) {
  TensorModel m;
  m.kind = base.kind;
  m.fp = base.fp;
  m.ip = base.ip;
  m.bp = base.bp;
  if (m.kind == ModelKind::kInt) {
    // No per-tensor side information in a shared model.
    m.ip.use_rc = m.ip.use_cc = 0;
    m.ip.ns = 1;
    m.ip.tools = 0;
    m.ip.zgroup = 0;
    m.rc.assign(1, 0);
    m.cc.assign(1, 0);
  }
  return m;
}

struct SharedStats::Impl {
  Stats st;
};
SharedStats::SharedStats(const TensorModel& shape) : impl_(std::make_unique<Impl>()), model_(shape) {
  init_stats(model_, &impl_->st);
}
SharedStats::~SharedStats() = default;

static IntGrid tensor_values(const TensorModel& m, const TensorGeometry& g, const uint8_t* data) {
  IntGrid vals;
  if (m.kind == ModelKind::kInt) int_values(m.ip, g, data, AuxInput{}, &vals);
  return vals;
}

void SharedStats::add(const TensorGeometry& g, const uint8_t* data) {
  add_tensor_stats(g, data, tensor_values(model_, g, data), model_, {}, {}, &impl_->st);
}

double SharedStats::coded_bytes_lower_bound(const TensorModel& built) const {
  const Stats& st = impl_->st;
  double bits = 0;
  uint64_t elems = 0;
  for (uint32_t k = 0; k < st.contexts(0) && k < built.t0.size(); ++k) {
    const std::vector<uint64_t> c = st.counts(0, k);
    bits += table_cost_bits(c, built.t0[k]);
    for (auto n : c) elems += n;
  }
  for (uint32_t k = 0; k < st.contexts(1) && k < built.t1.size(); ++k)
    bits += table_cost_bits(st.counts(1, k), built.t1[k]);
  if (built.kind == ModelKind::kFloat) bits += static_cast<double>(elems) * float_raw_bits(built.fp);
  return bits / 8;
}

TensorModel SharedStats::build() const {
  TensorModel m = model_;
  build_tables(impl_->st, &m);
  return m;
}

Status check_shared_model(const TensorModel& m, const TensorGeometry& g, const std::string& what) {
  uint32_t bits = 0;
  switch (m.kind) {
    case ModelKind::kFloat: bits = m.fp.elem_bytes * 8u; break;
    case ModelKind::kInt:
      bits = 8 / int_codes_per_byte(m.ip.sub);
      if (m.ip.use_rc || m.ip.use_cc || m.ip.zgroup || m.ip.tools)
        return Status::Corruption(what + ": shared model carries per-tensor side information");
      break;
    case ModelKind::kBytes: bits = m.bp.elem_bytes * 8u; break;
  }
  if (bits != g.elem_bits)
    return Status::Corruption(what + ": shared model element size " + std::to_string(bits) + " bits != tensor's " +
                              std::to_string(g.elem_bits));
  return Status::OK();
}

EncodedTensor encode_with_model(const TensorGeometry& g, const uint8_t* data, const TensorModel& m,
                                const EncodeOptions& opt) {
  EncodedTensor et;
  et.geom = g;
  et.model = m;
  encode_chunks(g, data, tensor_values(m, g, data), m, {}, {}, opt, &et);
  return et;
}

// ------------------------------------------------------------------ decode
Status parse_model_payload(const TensorGeometry& g, const TensorModel& model, uint64_t index, const uint8_t* payload,
                           size_t payload_len, uint64_t decoded_size, const std::string& what, ModelPayload* out) {
  uint64_t row0, col0, h, w;
  g.chunk_rect(index, &row0, &col0, &h, &w);
  if (h * w * g.elem_bits / 8 != decoded_size)
    return Status::Corruption(what + ": chunk decoded size " + std::to_string(decoded_size) +
                              " does not match its geometry");
  ByteReader r(payload, payload_len);
  const uint8_t flags = r.u8();
  if (flags > 3) return Status::Corruption(what + ": chunk flags " + std::to_string(flags) + " (allowed 0..3)");
  out->map = nullptr;
  out->tail = (flags & 2) != 0;
  if (out->tail && (model.kind != ModelKind::kFloat || float_raw_data_bytes(model.fp, h * w) < kRawTailMin))
    return Status::Corruption(what + ": chunk flags " + std::to_string(flags) +
                              ": raw tail in the lane states, but the chunk is not a float chunk with at least " +
                              std::to_string(kRawTailMin) + " bytes of raw bits");
  if (flags & 1) {
    if (model.kind != ModelKind::kInt || !model.ip.tools)
      return Status::Corruption(what + ": tile map present in a chunk whose model has no tools");
    const uint64_t tiles = ((h + kTile - 1) / kTile) * ((w + kTile - 1) / kTile);
    out->map = r.take(2 * tiles);
  }
  out->rans_len = r.u32();
  out->rans = r.take(out->rans_len);
  if (!r.ok() || !out->rans) return Status::Corruption(what + ": chunk payload truncated");
  out->raw = r.cur();
  out->raw_len = r.remaining();
  out->cv = ChunkView{static_cast<uint32_t>(h), static_cast<uint32_t>(w), static_cast<uint32_t>(row0),
                      static_cast<uint32_t>(col0), static_cast<uint32_t>(g.cols)};
  return Status::OK();
}

bool model_groups(const TensorModel& m) {
  if (m.kind == ModelKind::kFloat) return m.fp.elem_bytes <= 2;
  return m.kind == ModelKind::kInt && (m.ip.sub == kIntI8 || m.ip.sub == kIntU8 || m.ip.sub == kIntNibble) &&
         (m.ip.nbr_mode == 0 || m.ip.nbr_mode == 3) && m.ip.zgroup == 0;
}

bool models_group(const TensorModel& a, const TensorModel& b) {
  if (!model_groups(a) || !model_groups(b)) return false;
  if (&a == &b || a.vt == b.vt) return true;  // one model (copies share vt)
  if (a.kind != b.kind) return false;
  if (a.kind == ModelKind::kFloat) return float_loop_compatible(a.fp, b.fp);
  return a.kind == ModelKind::kInt && int_loop_compatible(a.ip, b.ip);
}

bool decode_chunk_group(const GroupChunk* chunks, int n, DecodeScratch& scratch) {
  if (n < 2 || n > kMaxChunkGroup) return false;
  ModelPayload mp[kMaxChunkGroup];
  for (int i = 0; i < n; ++i) {
    const GroupChunk& c = chunks[i];
    if (!c.model || !c.geom || !models_group(*chunks[0].model, *c.model)) return false;
    if (!parse_model_payload(*c.geom, *c.model, c.index, c.payload, c.payload_len, c.decoded_size, std::string(),
                             &mp[i])
             .ok())
      return false;
    if (mp[i].cv.h != mp[0].cv.h || mp[i].cv.w != mp[0].cv.w) return false;
  }
  const size_t lmb = simd_lane_major_bytes(mp[0].cv);
  ScratchBytes* lm[kMaxChunkGroup] = {&scratch.lm, &scratch.lm_group[0], &scratch.lm_group[1]};
  std::shared_ptr<const TensorModel::VectorTables> tables_hold[kMaxChunkGroup];
  ModelView mv[kMaxChunkGroup];
  GroupSide sides[kMaxChunkGroup];
  for (int i = 0; i < n; ++i) {
    const bool same = i && chunks[i].model == chunks[0].model;
    mv[i] = same ? mv[0] : chunks[i].model->view(&tables_hold[i], nullptr, 0, TensorModel::TableUse::kVector);
    sides[i] = GroupSide{mp[i].map,    mp[i].rans,    mp[i].rans_len, mp[i].raw,      mp[i].raw_len,
                         mp[i].tail,   chunks[i].out, lm[i]->get(lmb), mp[i].cv.col0, mp[i].cv.row0};
  }
  if (decode_group_simd(mv, mp[0].cv, sides, n) != 1) return false;
  for (int i = 0; i < n; ++i)
    if (chunk_hash(chunks[i].out, chunks[i].decoded_size) != chunks[i].xxh3) return false;
  return true;
}

Status decode_chunk(const TensorGeometry& g, const TensorModel* model, uint64_t index, ChunkMethod method,
                    const uint8_t* payload, size_t payload_len, uint64_t decoded_size, uint64_t xxh3,
                    const uint8_t* zp, uint32_t zcols, uint32_t zgroup, uint8_t* out, DecodeScratch& scratch,
                    const std::string& what) {
  (void)zgroup;
  switch (method) {
    case ChunkMethod::kRaw:
      if (payload_len != decoded_size)
        return Status::Corruption(what + ": raw chunk size " + std::to_string(payload_len) + " != decoded size " +
                                  std::to_string(decoded_size));
      std::memcpy(out, payload, payload_len);
      break;
    case ChunkMethod::kZstd: {
      // One decompression context per thread: ZSTD_decompress would create
      // (and free) one per chunk, which costs more than a small chunk.
      struct DCtx {
        ZSTD_DCtx* p = ZSTD_createDCtx();
        ~DCtx() { ZSTD_freeDCtx(p); }
      };
      thread_local DCtx dctx;
      if (!dctx.p) return Status::Internal(what + ": cannot create a zstd decompression context");
      const size_t r = ZSTD_decompressDCtx(dctx.p, out, decoded_size, payload, payload_len);
      if (ZSTD_isError(r) || r != decoded_size)
        return Status::Corruption(what + ": zstd chunk does not decode to " + std::to_string(decoded_size) +
                                  " bytes" + (ZSTD_isError(r) ? std::string(" (") + ZSTD_getErrorName(r) + ")" : ""));
      break;
    }
    case ChunkMethod::kModel: {
      if (!model) return Status::Corruption(what + ": model-coded chunk in a tensor without a model");
      ModelPayload mp;
      WC_RETURN_IF_ERROR(parse_model_payload(g, *model, index, payload, payload_len, decoded_size, what, &mp));
      const uint8_t* map = mp.map;
      const uint32_t rl = mp.rans_len;
      const uint8_t* rans = mp.rans;
      const uint8_t* raw = mp.raw;
      const size_t raw_len = mp.raw_len;
      const ChunkView cv = mp.cv;
      const uint64_t n = uint64_t{cv.h} * cv.w;
      std::shared_ptr<const TensorModel::VectorTables> tables_hold;
      // The vector decoders' tables; the reference tables only where a
      // vector decoder declines the chunk (reference_view).
      ModelView mv = model->view(&tables_hold, zp, zcols, TensorModel::TableUse::kVector);
      auto reference_view = [&] { mv = model->view(&tables_hold, zp, zcols); };
      bool ok = false;
      switch (model->kind) {
        case ModelKind::kFloat:
          if (!float_raw_ok(mv.fp, n, raw_len, mp.tail)) {
            ok = false;
            break;
          }
          {
            const size_t lmb = simd_lane_major_bytes(cv);
            const int simd =
                decode_float_chunk_simd(mv, cv, rans, rl, raw, raw_len, out, scratch.lm.get(lmb), mp.tail);
            if (simd < 0) {
              reference_view();
              if (scratch.e.size() < n) scratch.e.resize(n);
              if (scratch.sm.size() < n) scratch.sm.resize(n);
              ok = decode_float_chunk(mv, cv, rans, rl, raw, raw_len, out, scratch.e.data(), scratch.sm.data(),
                                      mp.tail);
            } else {
              ok = simd == 1;
            }
          }
          break;
        case ModelKind::kInt:
          if (model->ip.zgroup && !zp) return Status::Internal(what + ": zero points not provided");
          if (scratch.res.size() < n) scratch.res.resize(n);
          if (scratch.tile.size() < kTile * kTile) scratch.tile.resize(kTile * kTile);
          if (raw_len == 0) {
            const size_t lmb = simd_lane_major_bytes(cv);
            const int simd = decode_int_chunk_simd(mv, cv, map, rans, rl, out, scratch.res.data(),
                                                   scratch.tile.data(), scratch.lm.get(lmb));
            if (simd < 0) reference_view();
            ok = simd < 0 ? decode_int_residuals(mv, cv, rans, rl, scratch.res.data()) &&
                                int_finish_chunk(mv, cv, map, out, scratch.res.data(), scratch.tile.data())
                          : simd == 1;
          }
          break;
        case ModelKind::kBytes:
          ok = raw_len == 0 && decode_bytes_chunk(mv, cv, rans, rl, out);
          break;
      }
      if (!ok) return Status::Corruption(what + ": entropy-coded stream is malformed");
      break;
    }
    default:
      return Status::Corruption(what + ": chunk method " + std::to_string(static_cast<int>(method)) +
                                " (allowed 0..2)");
  }
  const uint64_t hsh = chunk_hash(out, decoded_size);
  if (hsh != xxh3) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ": checksum mismatch (XXH3 %016llx, expected %016llx)",
                  static_cast<unsigned long long>(hsh), static_cast<unsigned long long>(xxh3));
    return Status::Corruption(what + buf);
  }
  return Status::OK();
}

}  // namespace wcodec
