// codec/common/model_tables.cpp — a model's decoding tables: built on a
// model's first view(), kept in one process-wide cache bounded by a byte
// budget (set_vector_table_budget), with the storage of evicted tables
// reused. See TensorModel in tensor_model.h.
//
// Thread-safety: the cache and the slot bin are locked; a model's table
// slot has its own mutex.
#include <algorithm>
#include <cstring>
#include <list>
#include <mutex>
#include <unordered_map>

#include "tensor_model.h"
#include "wcodec/cpu.h"

namespace wcodec {

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

// Kernel-row models whose frequencies are all multiples of 8 (the encoder
// writes them so): one entry (codes | freq << 6 | start << 19) per 8 slots
// of each context, contexts laid out by the codes of the row above
// (ModelView::krow_ent).
static void build_krow_ent(const TensorModel& m, std::vector<uint32_t>* ent) {
  if (m.kind != ModelKind::kInt || m.ip.nbr_mode != 4 || m.t0.size() % kKernRowCtx) return;
  for (const FreqTable& t : m.t0)
    for (uint16_t f : t.freq)
      if (f % 8) return;
  auto codes = [](uint32_t sym) { return sym % 3 | (sym / 3 % 3) << 2 | (sym / 9) << 4; };
  const size_t classes = m.t0.size() / kKernRowCtx;
  ent->assign(classes * kKrowEntCtx * 512, 0);  // unused: codes 0, frequency 0, start 0
  for (size_t i = 0; i < m.t0.size(); ++i) {
    const uint32_t k = static_cast<uint32_t>(i % kKernRowCtx);
    const size_t c = i / kKernRowCtx * kKrowEntCtx + (k == 0 ? 0 : 1 + 64 * ((k - 1) / kKernRowSyms) + codes((k - 1) % kKernRowSyms));
    uint32_t* o = ent->data() + c * 512;
    uint32_t start = 0;
    for (uint32_t sym = 0; sym < m.t0[i].freq.size() && sym < kKernRowSyms; ++sym) {
      const uint32_t f = m.t0[i].freq[sym];
      const uint32_t n = std::min<uint32_t>(f / 8, 512 - start / 8);
      for (uint32_t q = 0; q < n; ++q) o[start / 8 + q] = codes(sym) | f << 6 | start << 19;
      start += 8 * n;
    }
  }
}

// Whether m's tables are read as 1/8-slot entries on the vector paths
// (ModelView::ent8): 4-bit and uint8 code models (nbr_mode 0 or 3) and
// float models whose frequencies are all multiples of 8 (the encoder
// writes them so where that costs little, encode_model_i.h).
static bool ent8_model(const TensorModel& m) {
  if (m.kind == ModelKind::kInt) {
    if ((m.ip.sub != kIntNibble && m.ip.sub != kIntU8) || (m.ip.nbr_mode != 0 && m.ip.nbr_mode != 3) ||
        m.ip.nsym > 256)
      return false;
  } else if (m.kind != ModelKind::kFloat) {
    return false;
  }
  for (const auto* set : {&m.t0, &m.t1})
    for (const FreqTable& t : *set) {
      if (t.freq.size() > 256) return false;
      for (uint16_t f : t.freq)
        if (f % 8) return false;
    }
  return true;
}

// One entry per 8 slots of each table of ts (ModelView::ent8).
static void build_ent8(const std::vector<FreqTable>& ts, std::vector<uint32_t>* ent) {
  ent->assign(ts.size() * 512, 0);  // an unused context decodes nothing
  for (size_t i = 0; i < ts.size(); ++i) {
    uint32_t* o = ent->data() + i * 512;
    uint32_t start = 0;
    for (uint32_t sym = 0; sym < ts[i].freq.size() && start < 4096; ++sym) {
      const uint32_t f = ts[i].freq[sym];
      const uint32_t n = std::min<uint32_t>(f, 4096 - start) / 8;
      const uint32_t e = sym | (f - 1) << 8 | ((4096 - start) & 4095) << 20;
      for (uint32_t q = 0; q < n; ++q) o[start / 8 + q] = e;
      start += 8 * n;
    }
  }
}

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
  // Kernel-row models with entries decode from them alone on every path
  // (the reference tables only where a decoder declines a chunk: a
  // reference view, TableUse::kAll).
  build_krow_ent(m, &vt->krow_ent);
  // Models with 1/8-slot entries decode from them on the vector paths (the
  // Highway int loops); what those decline takes the portable decoders.
  const bool ent8 = vector_decoder_available() && ent8_model(m);
  // On the avx512 path, float models of at most 16 contexts keep their slot
  // tables too (256 KiB, within L2): the AVX-512 loops read those faster
  // than the Highway (AVX2) loops read entries (2-3% on stories260K's and
  // silero's F32 files); larger models decode faster from the entries
  // (isnet-medium.f16 1.23x).
  const bool slots_too = ent8 && cpu_path() == CpuPath::kAvx512 && m.kind == ModelKind::kFloat &&
                         m.t0.size() + m.t1.size() <= 16;
  if (ent8) {
    build_ent8(m.t0, &vt->ent8);
    build_ent8(m.t1, &vt->ent8_1);
  }
  vt->reference = reference || (reference_only(m) && vt->krow_ent.empty());
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
  if (!reference_only(m) && vector_decoder_available() && (!ent8 || slots_too)) {
    pack(m.t0, &vt->slot_all);
    pack(m.t1, &vt->slot1_all);
  }
  if (m.kind == ModelKind::kInt && m.ip.sub == kIntTernary && m.ip.esc > 2 && m.ip.nbr_mode != 4) {
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
  return slot_all.capacity() * 4 + slot1_all.capacity() * 4 + tern3.size() * 4 + krow_ent.size() * 4 + (ent8.size() + ent8_1.size()) * 4 +
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
    m.t0 = t->d0.empty() ? nullptr : t->d0.data();
    m.t1 = t->d1.empty() ? nullptr : t->d1.data();
    m.slot_all = t->slot_all.empty() ? nullptr : t->slot_all.data();
    m.slot1_all = t->slot1_all.empty() ? nullptr : t->slot1_all.data();
    const bool flat = (small_alphabet(*this) || kind == ModelKind::kBytes) && t->reference;
    m.sym_small = flat ? t->lut_all.data() : nullptr;
    m.fs_small = flat ? t->fs_all.data() : nullptr;
    m.tern3 = t->tern3.empty() ? nullptr : t->tern3.data();
    m.krow_ent = t->krow_ent.empty() ? nullptr : t->krow_ent.data();
    m.ent8 = t->ent8.empty() ? nullptr : t->ent8.data();
    m.ent8_1 = t->ent8_1.empty() ? nullptr : t->ent8_1.data();
    *hold = std::move(t);
  }
  m.rc_pad = rc_pad.empty() ? nullptr : rc_pad.data();
  m.cc_pad = cc_pad.empty() ? nullptr : cc_pad.data();
  return m;
}

}  // namespace wcodec
