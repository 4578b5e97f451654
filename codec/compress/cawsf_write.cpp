// codec/compress/cawsf_write.cpp — the CAWSF version 2 writer and payload
// builders (wcodec/cawsf.h; layout in docs/cawsf-format.md).
//
// The writer assembles the sections in the reference's order (META,
// CODEBOOKS, SHARD_BANK, ROUTING), each at a 4 KiB boundary; R codebooks are
// moved into CODEBOOKS (deduplicated by content, as the reference does); each
// shard payload is compressed on its own (stored raw when that is not
// smaller); the shard bank itself is stored uncompressed so that one tensor
// is read without the rest. Routing keys are derived from the stored values
// of each shard (§6.2). The header's check field covers the TOC and META.
// Thread-safety: pure functions; the output file is written under a
// temporary name and renamed.
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "cawsf_i.h"
#include "wcodec/cawsf.h"

namespace wcodec::cawsf {

using detail::put16;
using detail::put32;
using detail::put64;
using detail::putf32;

namespace {
void put_halves(std::vector<uint8_t>& o, const std::vector<float>& v) {
  for (float f : v) put16(o, float_to_half(f));
}
uint64_t align_up(uint64_t x) { return (x + kSectionAlign - 1) / kSectionAlign * kSectionAlign; }

// The stored values of a payload as floats, for its routing key (§6.2).
std::vector<float> payload_values(uint8_t type, const std::vector<uint8_t>& p, DType dtype) {
  std::vector<float> v;
  auto halves = [&](size_t at) {
    for (size_t i = at; i + 2 <= p.size(); i += 2) v.push_back(half_to_float(detail::ld16(p.data() + i)));
  };
  auto f32s = [&](size_t at, size_t end) {
    for (size_t i = at; i + 4 <= end; i += 4) v.push_back(detail::ldf32(p.data() + i));
  };
  switch (type) {
    case kShardL:
    case kShardD: halves(12); break;
    case kShardR: {  // the embedded codebook
      const uint64_t d = detail::ld16(p.data() + 8), m = detail::ld16(p.data() + 10), k = detail::ld16(p.data() + 12);
      f32s(18, 18 + m * k * (d / m) * 4);
      break;
    }
    case kShardS: {
      const uint64_t n = detail::ld32(p.data() + 8);
      f32s(12 + 8 * n, p.size());
      break;
    }
    default:
      if (dtype == DType::kF32) f32s(0, p.size());
      else if (dtype == DType::kF16) halves(0);
      else if (dtype == DType::kBF16)
        for (size_t i = 0; i + 2 <= p.size(); i += 2) {
          const uint32_t u = static_cast<uint32_t>(detail::ld16(p.data() + i)) << 16;
          float f;
          std::memcpy(&f, &u, 4);
          v.push_back(f);
        }
      else
        for (uint8_t b : p) v.push_back(b);
  }
  return v;
}
}  // namespace

std::vector<uint8_t> payload_l_factors(uint32_t rows, uint32_t cols, uint32_t rank, const std::vector<float>& a,
                                       const std::vector<float>& b) {
  std::vector<uint8_t> o;
  put32(o, rows);
  put32(o, cols);
  put32(o, rank);
  put_halves(o, a);
  put_halves(o, b);
  return o;
}

std::vector<uint8_t> payload_d_diag(uint32_t rows, uint32_t cols, const std::vector<float>& diag) {
  std::vector<uint8_t> o;
  put32(o, rows);
  put32(o, cols);
  put32(o, static_cast<uint32_t>(diag.size()));
  put_halves(o, diag);
  return o;
}

std::vector<uint8_t> payload_r_embedded(uint32_t rows, uint32_t cols, const Components::Pq& pq) {
  std::vector<uint8_t> o;
  put32(o, rows);
  put32(o, cols);
  put16(o, static_cast<uint16_t>(pq.d));
  put16(o, static_cast<uint16_t>(pq.m));
  put16(o, static_cast<uint16_t>(pq.k));
  put32(o, pq.n);
  for (float f : pq.codebook) putf32(o, f);
  o.insert(o.end(), pq.codes.begin(), pq.codes.end());
  return o;
}

std::vector<uint8_t> payload_s(uint32_t rows, uint32_t cols, const std::vector<uint32_t>& r,
                               const std::vector<uint32_t>& c, const std::vector<float>& v) {
  std::vector<uint8_t> o;
  put32(o, rows);
  put32(o, cols);
  put32(o, static_cast<uint32_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) {
    put32(o, r[i]);
    put32(o, c[i]);
  }
  for (float f : v) putf32(o, f);
  return o;
}

Status write_v2(const std::string& path, const std::vector<TensorOut>& tensors, const WriteOptions& opt,
                std::vector<uint64_t>* stored_bytes) {
  if (stored_bytes) stored_bytes->assign(tensors.size(), 0);
  if (tensors.size() > 0x10000) return Status::Invalid(path + ": " + std::to_string(tensors.size()) + " tensors (at most 65536)");
  if (opt.routing_dim == 0 || opt.routing_dim > 0xffff) return Status::Invalid("routing_dim must be 1..65535");
  nlohmann::json extra = nlohmann::json::parse(opt.extra_meta_json, nullptr, false);
  if (extra.is_discarded() || !extra.is_object()) return Status::Invalid("extra_meta_json: not a JSON object");

  std::vector<uint8_t> bank, headers, codebooks;
  std::vector<std::vector<uint8_t>> pool;  // codebook bytes by id
  std::multimap<uint64_t, uint16_t> pool_by_hash;
  struct PoolDims { uint16_t d, m, k; };
  std::vector<PoolDims> pool_dims;
  std::vector<uint32_t> usizes;
  std::vector<std::vector<float>> keys;
  nlohmann::json tmeta = nlohmann::json::array(), layers = nlohmann::json::array();
  for (size_t ti = 0; ti < tensors.size(); ++ti) {
    const TensorOut& t = tensors[ti];
    const uint16_t scope = static_cast<uint16_t>(ti);
    tmeta.push_back({{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"scope", scope},
                     {"kind", t.raw ? "raw" : "ndsq"}});
    if (t.rel_error >= 0) tmeta.back()["rel_error"] = t.rel_error;
    if (!t.raw) layers.push_back({{"scope_id", scope}, {"name", t.name}, {"shape", {t.rows, t.cols}}});
    for (const ShardOut& s : t.shards) {
      std::vector<uint8_t> payload = s.payload;
      // routing key: the stored values folded into dim buckets
      std::vector<float> key(opt.routing_dim, 0.0f);
      const std::vector<float> vals = payload_values(s.type, s.payload, t.dtype);
      for (size_t i = 0; i < vals.size(); ++i)
        if (std::isfinite(vals[i])) key[i % opt.routing_dim] += std::fabs(vals[i]);
      keys.push_back(std::move(key));
      if (s.type == kShardR) {  // move the codebook into CODEBOOKS
        const uint16_t d = detail::ld16(payload.data() + 8), m = detail::ld16(payload.data() + 10),
                       k = detail::ld16(payload.data() + 12);
        const uint32_t n = detail::ld32(payload.data() + 14);
        const size_t cbb = size_t{m} * k * (d / m) * 4;
        std::vector<uint8_t> cb(payload.begin() + 18, payload.begin() + 18 + static_cast<ptrdiff_t>(cbb));
        const uint64_t h = detail::xxh3(cb.data(), cb.size());
        int id = -1;
        for (auto [it, end] = pool_by_hash.equal_range(h); it != end; ++it)
          if (pool[it->second] == cb) id = it->second;
        if (id < 0) {
          if (pool.size() >= 0xffff) return Status::Invalid(path + ": more than 65535 codebooks");
          id = static_cast<int>(pool.size());
          pool.push_back(std::move(cb));
          pool_dims.push_back({d, m, k});
          pool_by_hash.emplace(h, static_cast<uint16_t>(id));
          if (stored_bytes) (*stored_bytes)[ti] += pool.back().size();
        }
        std::vector<uint8_t> np(payload.begin(), payload.begin() + 18);
        put16(np, static_cast<uint16_t>(id));
        np.insert(np.end(), payload.begin() + 18 + static_cast<ptrdiff_t>(cbb), payload.end());
        (void)n;
        payload = std::move(np);
      }
      if (payload.size() > 0xffffffffu) return Status::Invalid(path + ": " + t.name + ": shard payload over 4 GiB");
      uint8_t comp = opt.shard_comp;
      std::vector<uint8_t> stored;
      if (comp != kCompNone) {
        WC_ASSIGN_OR_RETURN(stored, detail::compress(comp, payload.data(), payload.size(), opt.zstd_level));
        if (stored.size() >= payload.size()) comp = kCompNone;
      }
      if (comp == kCompNone) stored = payload;
      std::vector<uint8_t> h;
      h.push_back(s.type);
      put16(h, scope);
      h.push_back(comp);
      put32(h, static_cast<uint32_t>(payload.size()));
      put32(h, static_cast<uint32_t>(stored.size()));
      headers.insert(headers.end(), h.begin(), h.end());
      bank.insert(bank.end(), h.begin(), h.end());
      bank.insert(bank.end(), stored.begin(), stored.end());
      usizes.push_back(static_cast<uint32_t>(payload.size()));
      if (stored_bytes) (*stored_bytes)[ti] += kShardHeaderSize + stored.size();
    }
  }
  put16(codebooks, static_cast<uint16_t>(pool.size()));
  for (size_t i = 0; i < pool.size(); ++i) {
    put16(codebooks, static_cast<uint16_t>(i));
    put16(codebooks, pool_dims[i].d);
    put16(codebooks, pool_dims[i].m);
    put16(codebooks, pool_dims[i].k);
    put32(codebooks, static_cast<uint32_t>(pool[i].size()));
    codebooks.insert(codebooks.end(), pool[i].begin(), pool[i].end());
  }
  std::vector<uint8_t> routing;
  put16(routing, static_cast<uint16_t>(opt.routing_dim));
  put32(routing, static_cast<uint32_t>(usizes.size()));
  for (size_t i = 0; i < usizes.size(); ++i) put32(routing, static_cast<uint32_t>(i));
  for (uint32_t u : usizes) putf32(routing, std::max(0.001f, static_cast<float>(u) / (1024 * 1024)));
  for (auto& key : keys) {
    double norm = 0;
    for (float x : key) norm += static_cast<double>(x) * x;
    const float inv = static_cast<float>(1.0 / (std::sqrt(norm) + 1e-8));
    for (float x : key) putf32(routing, x * inv);
  }
  auto index = [](const std::vector<uint8_t>& b) {
    nlohmann::json hx = nlohmann::json::array();
    for (uint64_t o = 0; o < b.size(); o += kChecksumChunk)
      hx.push_back(detail::hex16(detail::xxh3(b.data() + o, std::min<uint64_t>(kChecksumChunk, b.size() - o))));
    return nlohmann::json{{"algo", "xxh3-64"}, {"chunk_size", kChecksumChunk}, {"count", hx.size()}, {"hashes_hex", hx}};
  };
  nlohmann::json meta = extra;
  meta["format_version"] = 2;
  meta["author"] = "wcodec";
  meta["layers"] = layers;
  meta["tensors"] = tmeta;
  meta["bank_headers_xxh3"] = detail::hex16(detail::xxh3(headers.data(), headers.size()));
  meta["routing_keys"] = "weights: |stored values| folded into dim buckets (docs/cawsf-format.md 6.2)";
  meta["checksum_index"] = {{"2", index(codebooks)}, {"3", index(bank)}, {"4", index(routing)}};
  const std::string ms = meta.dump();
  const std::vector<uint8_t> metab(ms.begin(), ms.end());
  WC_ASSIGN_OR_RETURN(std::vector<uint8_t> cbz, detail::compress(kCompZstd, codebooks.data(), codebooks.size(), 19));

  struct Sec { uint32_t type; const std::vector<uint8_t>* data; uint32_t flags; };
  const Sec secs[4] = {{kMeta, &metab, 0}, {kCodebooks, &cbz, kFlagZstd}, {kShardBank, &bank, 0}, {kRouting, &routing, 0}};
  std::vector<uint8_t> head(kMagic, kMagic + 8);
  put32(head, 2);
  put32(head, 4);
  put32(head, 0);  // the check, below
  uint64_t off = align_up(kHeaderSize + 4 * kTocEntrySize);
  std::vector<uint64_t> offs;
  for (const Sec& s : secs) {
    put32(head, s.type);
    put64(head, off);
    put64(head, s.data->size());
    put32(head, s.flags);
    offs.push_back(off);
    off = align_up(off + s.data->size());
  }
  std::vector<uint8_t> cover(head.begin(), head.begin() + 16);
  cover.insert(cover.end(), head.begin() + kHeaderSize, head.end());
  cover.insert(cover.end(), metab.begin(), metab.end());
  const uint32_t check = static_cast<uint32_t>(detail::xxh3(cover.data(), cover.size()));
  for (int i = 0; i < 4; ++i) head[16 + i] = static_cast<uint8_t>(check >> (8 * i));

  AtomicFile out(path);
  WC_RETURN_IF_ERROR(out.open());
  WC_RETURN_IF_ERROR(out.append(head.data(), head.size()));
  uint64_t at = head.size();
  const std::vector<uint8_t> zeros(kSectionAlign, 0);
  for (size_t i = 0; i < 4; ++i) {
    WC_RETURN_IF_ERROR(out.append(zeros.data(), offs[i] - at));
    WC_RETURN_IF_ERROR(out.append(secs[i].data->data(), secs[i].data->size()));
    at = offs[i] + secs[i].data->size();
  }
  return out.commit();
}

}  // namespace wcodec::cawsf
