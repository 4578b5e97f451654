// codec/compress/chunk_encode.cpp — a tensor's chunk payloads under a
// finalized model (symbol statistics, table building, the walkers into the
// rANS encoder), models that do not pay, and models shared by small
// tensors. See tensor_encode.h.

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
#include "encode_model_i.h"

namespace wcodec {

void init_stats(const TensorModel& m, Stats* st) {
  switch (m.kind) {
    case ModelKind::kFloat: st->init(float_e_nctx(m.fp), float_e_nsym(m.fp), float_sm_nctx(m.fp), 2u << m.fp.k); break;
    case ModelKind::kInt: st->init(int_nctx(m.ip), m.ip.nsym, 0, 0); break;
    case ModelKind::kBytes: st->init(bytes_nctx(m.bp), 256, 0, 0); break;
  }
}

void add_tensor_stats(const TensorGeometry& g, const uint8_t* data, const IntGrid& vals,
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
      if (m.ip.nbr_mode != 4 && uint64_t{int_nctx(m.ip)} * m.ip.nsym <= 65536) {
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

void encode_chunks(const TensorGeometry& g, const uint8_t* data, const IntGrid& vals,
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

IntGrid tensor_values(const TensorModel& m, const TensorGeometry& g, const uint8_t* data) {
  IntGrid vals;
  if (m.kind == ModelKind::kInt) int_values(m.ip, g, data, AuxInput{}, &vals);
  return vals;
}

// Whether a tensor's model counts its symbols as `shape` does: the same
// contexts and alphabets, no per-tensor side information.
static bool counts_as(const TensorModel& m, const TensorModel& shape) {
  if (m.kind != shape.kind) return false;
  switch (m.kind) {
    case ModelKind::kFloat: {
      const FloatParams &a = m.fp, &b = shape.fp;
      return a.elem_bytes == b.elem_bytes && a.eb == b.eb && a.mb == b.mb && a.k == b.k && a.emode == b.emode &&
             a.ne == b.ne && a.nm == b.nm && a.sign_ctx == b.sign_ctx && a.elo == b.elo && a.mlo == b.mlo;
    }
    case ModelKind::kInt: {
      const IntParams &a = m.ip, &b = shape.ip;
      if (a.ns != 1 || b.ns != 1 || a.use_rc || a.use_cc || b.use_rc || b.use_cc || a.tools || b.tools || a.zgroup ||
          b.zgroup)
        return false;
      if (a.sub != b.sub || a.center != b.center || a.esc != b.esc || a.nsym != b.nsym || a.nbr_mode != b.nbr_mode ||
          a.nb != b.nb || a.off_a != b.off_a || a.off_b != b.off_b || a.period != b.period)
        return false;
      for (uint32_t i = 0; i + 1 < a.nb && i < 7; ++i)
        if (a.thr[i] != b.thr[i]) return false;
      return true;
    }
    case ModelKind::kBytes: return m.bp.elem_bytes == shape.bp.elem_bytes && m.bp.ctx_mode == shape.bp.ctx_mode;
  }
  return false;
}

void SharedStats::add(const EncodedTensor& et, const uint8_t* data) {
  Stats& st = impl_->st;
  if (et.stats && counts_as(et.model, model_) && et.stats->f0.size() == st.f0.size() &&
      et.stats->f1.size() == st.f1.size()) {
    for (size_t i = 0; i < st.f0.size(); ++i) st.f0[i] += et.stats->f0[i];
    for (size_t i = 0; i < st.f1.size(); ++i) st.f1[i] += et.stats->f1[i];
    return;
  }
  add_tensor_stats(et.geom, data, tensor_values(model_, et.geom, data), model_, {}, {}, &st);
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

EncodedTensor encode_with_model(const TensorGeometry& g, const uint8_t* data, const TensorModel& m,
                                const EncodeOptions& opt) {
  EncodedTensor et;
  et.geom = g;
  et.model = m;
  encode_chunks(g, data, tensor_values(m, g, data), m, {}, {}, opt, &et);
  return et;
}

}  // namespace wcodec
