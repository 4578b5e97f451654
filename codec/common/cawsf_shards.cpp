// codec/common/cawsf_shards.cpp — the CAWSF shard payloads (wcodec/cawsf.h,
// docs/cawsf-format.md §5): the tensor table of a file, payload decoding to
// Components, the dense reconstruction (the reference's arithmetic), y = W·x
// without densifying, half-float conversions and the reference router.
// Thread-safety: pure functions, and const methods of CawsfFile (see
// cawsf_read.cpp).
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cawsf_i.h"
#include "wcodec/cawsf.h"

namespace wcodec::cawsf {

using detail::ld16;
using detail::ld32;

// ---------------------------------------------------------------- halves
float half_to_float(uint16_t h) {
  const uint32_t s = static_cast<uint32_t>(h >> 15) << 31;
  const uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
  uint32_t f;
  if (e == 0) {
    if (m == 0) {
      f = s;
    } else {  // subnormal: normalize
      uint32_t e2 = 127 - 15 + 1, m2 = m << 13;
      while ((m2 & (1u << 23)) == 0) {
        m2 <<= 1;
        --e2;
      }
      f = s | (e2 << 23) | (m2 & 0x7fffff);
    }
  } else if (e == 0x1f) {
    f = s | (0xffu << 23) | (m << 13);
  } else {
    f = s | ((e - 15 + 127) << 23) | (m << 13);
  }
  float out;
  std::memcpy(&out, &f, 4);
  return out;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t ax = x & 0x7fffffff;
  if (ax >= 0x7f800000) return sign | (ax > 0x7f800000 ? 0x7e00 : 0x7c00);
  if (ax >= 0x477ff000) return sign | 0x7c00;  // rounds to 65520 or more: infinity
  if (ax < 0x38800000) {                      // below 2^-14: a subnormal half (or zero)
    float v;
    std::memcpy(&v, &ax, 4);
    return sign | static_cast<uint16_t>(std::nearbyint(v * 16777216.0f));
  }
  uint32_t h = (((ax >> 23) - 127 + 15) << 10) | ((ax & 0x7fffff) >> 13);
  const uint32_t rem = ax & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return sign | static_cast<uint16_t>(h);
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

// ---------------------------------------------------------------- payloads
namespace {

constexpr uint64_t kMaxElements = uint64_t{1} << 36;

struct Shape {
  uint32_t rows = 0, cols = 0;
};

Status check_shape(const std::string& f, uint32_t rows, uint32_t cols) {
  if (uint64_t{rows} * cols > kMaxElements)
    return Status::Corruption(f + ": rows × cols: " + std::to_string(rows) + " × " + std::to_string(cols) +
                              " (at most 2^36 elements)");
  return Status::OK();
}

// Decodes one payload into `c` (whose rows/cols, when non-zero, it must match).
Status decode_payload(uint32_t version, uint8_t type, const std::vector<uint8_t>& p,
                      const std::map<uint16_t, Codebook>& pool, const std::string& f, Components* c) {
  const uint64_t size = p.size();
  const size_t fixed = type == kShardR ? 18 : (type == kShardS || version == 2) ? 12 : 8;
  if (type != kShardRaw && size < fixed)
    return Status::Corruption(f + ": payload: " + std::to_string(size) + " bytes, shorter than its " +
                              std::to_string(fixed) + "-byte header");
  const uint32_t rows = ld32(p.data()), cols = ld32(p.data() + 4);
  WC_RETURN_IF_ERROR(check_shape(f, rows, cols));
  if (c->rows || c->cols) {
    if (rows != c->rows || cols != c->cols)
      return Status::Corruption(f + ": shape: " + std::to_string(rows) + "×" + std::to_string(cols) +
                                ", the tensor is " + std::to_string(c->rows) + "×" + std::to_string(c->cols));
  }
  c->rows = rows;
  c->cols = cols;
  const uint64_t elems = uint64_t{rows} * cols;
  auto halves = [&](size_t at, uint64_t n, std::vector<float>* out) {
    out->resize(n);
    for (uint64_t i = 0; i < n; ++i) (*out)[i] = half_to_float(ld16(p.data() + at + 2 * i));
  };
  switch (type) {
    case kShardL:
    case kShardD: {
      if (version == 1) {
        if (size - 8 != 2 * elems)
          return Status::Corruption(f + ": payload: " + std::to_string(size) + " bytes, " + std::to_string(rows) + "×" +
                                    std::to_string(cols) + " fp16 needs " + std::to_string(8 + 2 * elems));
        halves(8, elems, type == kShardL ? &c->l_dense : &c->d_dense);
        return Status::OK();
      }
      const uint64_t n = ld32(p.data() + 8);
      if (type == kShardL) {
        const uint64_t per = 2 * (uint64_t{rows} + cols);
        if (n > (size - 12) / (per ? per : 1) || (per == 0 && size != 12) || 12 + n * per != size)
          return Status::Corruption(f + ": rank: " + std::to_string(n) + " needs " + std::to_string(12 + n * per) +
                                    " payload bytes, the shard has " + std::to_string(size));
        c->rank = static_cast<uint32_t>(n);
        halves(12, uint64_t{rows} * n, &c->l_a);
        halves(12 + 2 * uint64_t{rows} * n, uint64_t{cols} * n, &c->l_b);
        return Status::OK();
      }
      if (n != std::min(rows, cols) || 12 + 2 * n != size)
        return Status::Corruption(f + ": n: " + std::to_string(n) + " (must be min(rows, cols) = " +
                                  std::to_string(std::min(rows, cols)) + ", with 2 bytes each)");
      halves(12, n, &c->d_diag);
      return Status::OK();
    }
    case kShardR: {
      Components::Pq q;
      q.d = ld16(p.data() + 8);
      q.m = ld16(p.data() + 10);
      q.k = ld16(p.data() + 12);
      q.n = ld32(p.data() + 14);
      if (q.d == 0 || q.m == 0 || q.k == 0 || q.d % q.m != 0 || q.k > 256)
        return Status::Corruption(f + ": d, m, k: " + std::to_string(q.d) + ", " + std::to_string(q.m) + ", " +
                                  std::to_string(q.k) + " (need d, m ≥ 1, m divides d, 1 ≤ k ≤ 256)");
      const uint64_t dsub = q.d / q.m, codes = uint64_t{q.n} * q.m;
      size_t at;
      if (size >= 20 && size - 20 == codes) {  // shared codebook
        const uint16_t id = ld16(p.data() + 18);
        auto it = pool.find(id);
        if (it == pool.end()) return Status::Corruption(f + ": cb_id: " + std::to_string(id) + " not in CODEBOOKS");
        const Codebook& cb = it->second;
        if ((cb.m != 0 && cb.m != q.m) || (cb.k != 0 && cb.k != q.k) || (cb.d != 0 && cb.d / q.m != dsub))
          return Status::Corruption(f + ": cb_id " + std::to_string(id) + ": codebook d/m/k " + std::to_string(cb.d) +
                                    "/" + std::to_string(cb.m) + "/" + std::to_string(cb.k) + " do not fit the shard's");
        if (cb.data.size() < uint64_t{q.m} * q.k * dsub)
          return Status::Corruption(f + ": cb_id " + std::to_string(id) + ": codebook holds " +
                                    std::to_string(cb.data.size()) + " floats, needs " +
                                    std::to_string(uint64_t{q.m} * q.k * dsub));
        q.codebook.assign(cb.data.begin(), cb.data.begin() + static_cast<ptrdiff_t>(uint64_t{q.m} * q.k * dsub));
        at = 20;
      } else {
        const uint64_t cbb = uint64_t{q.m} * q.k * dsub * 4;
        if (size - 18 < cbb || size - 18 - cbb != codes)
          return Status::Corruption(f + ": payload: " + std::to_string(size) + " bytes fit neither the embedded (" +
                                    std::to_string(18 + cbb + codes) + ") nor the shared (" + std::to_string(20 + codes) +
                                    ") codebook layout");
        q.codebook.resize(cbb / 4);
        for (uint64_t i = 0; i < cbb / 4; ++i) q.codebook[i] = detail::ldf32(p.data() + 18 + 4 * i);
        at = 18 + cbb;
      }
      if (version == 2 && uint64_t{q.n} != (elems + q.d - 1) / q.d)
        return Status::Corruption(f + ": n: " + std::to_string(q.n) + " blocks, the tensor needs " +
                                  std::to_string((elems + q.d - 1) / q.d));
      q.codes.assign(p.begin() + static_cast<ptrdiff_t>(at), p.end());
      for (uint64_t i = 0; i < codes; ++i)
        if (q.codes[i] >= q.k)
          return Status::Corruption(f + ": code " + std::to_string(i) + ": " + std::to_string(q.codes[i]) +
                                    " (k is " + std::to_string(q.k) + ")");
      c->r.push_back(std::move(q));
      return Status::OK();
    }
    case kShardS: {
      const uint64_t n = ld32(p.data() + 8);
      if (n > (size - 12) / 12 || 12 + 12 * n != size)
        return Status::Corruption(f + ": n: " + std::to_string(n) + " entries need " + std::to_string(12 + 12 * n) +
                                  " bytes, the payload has " + std::to_string(size));
      c->s_row.resize(n);
      c->s_col.resize(n);
      c->s_val.resize(n);
      for (uint64_t i = 0; i < n; ++i) {
        c->s_row[i] = ld32(p.data() + 12 + 8 * i);
        c->s_col[i] = ld32(p.data() + 16 + 8 * i);
        c->s_val[i] = detail::ldf32(p.data() + 12 + 8 * n + 4 * i);
        if (c->s_row[i] >= rows || c->s_col[i] >= cols)
          return Status::Corruption(f + ": entry " + std::to_string(i) + ": (" + std::to_string(c->s_row[i]) + ", " +
                                    std::to_string(c->s_col[i]) + ") outside " + std::to_string(rows) + "×" +
                                    std::to_string(cols));
        if (version == 2 && i > 0 &&
            (uint64_t{c->s_row[i]} << 32 | c->s_col[i]) <= (uint64_t{c->s_row[i - 1]} << 32 | c->s_col[i - 1]))
          return Status::Corruption(f + ": entry " + std::to_string(i) + ": not after entry " + std::to_string(i - 1) +
                                    " in (row, col) order");
      }
      return Status::OK();
    }
    default:
      return Status::Corruption(f + ": type " + std::to_string(type) + " is not a decomposition component");
  }
}

bool json_u64(const nlohmann::json& j, uint64_t* v) {
  if (j.is_number_unsigned()) { *v = j.get<uint64_t>(); return true; }
  if (j.is_number_integer() && j.get<int64_t>() >= 0) { *v = static_cast<uint64_t>(j.get<int64_t>()); return true; }
  return false;
}

}  // namespace

Result<Components> CawsfFile::components(size_t t) const {
  if (t >= tensors_.size()) return Status::Invalid(what_ + ": tensor " + std::to_string(t) + " does not exist");
  const TensorEntry& te = tensors_[t];
  if (te.raw) return Status::Invalid(what_ + ": tensor " + te.name + " is stored as it is, not decomposed");
  Components c;
  c.rows = te.rows;
  c.cols = te.cols;
  // Version 1 keeps the last L, D and S of a scope (the reference's rule); R adds up.
  for (uint32_t si : te.shards) {
    const ShardRecord& r = shards_[si];
    WC_ASSIGN_OR_RETURN(std::vector<uint8_t> p, shard_payload(si));
    const std::string f = what_ + ": shard " + std::to_string(si) + " (" + shard_type_name(r.type) + ", scope " +
                          std::to_string(r.scope) + ", " + te.name + ")";
    if (r.type == kShardL) c.l_dense.clear();
    if (r.type == kShardD) c.d_dense.clear();
    WC_RETURN_IF_ERROR(decode_payload(version_, r.type, p, codebooks_, f, &c));
  }
  return c;
}

Status CawsfFile::build_tensors() {
  const std::string f = what_ + ": META";
  nlohmann::json j = nlohmann::json::parse(meta_json_, nullptr, false);  // parse_meta accepted it
  std::map<uint16_t, size_t> by_scope;
  if (version_ == 1) {
    std::map<uint16_t, std::string> names;
    auto layers = j.find("layers");
    if (layers != j.end() && !layers->is_null()) {
      if (!layers->is_array()) return Status::Corruption(f + ": layers: not an array");
      for (size_t i = 0; i < layers->size(); ++i) {
        const auto& l = (*layers)[i];
        uint64_t sc;
        if (!l.is_object() || !l.contains("scope_id") || !json_u64(l["scope_id"], &sc) || sc > 0xffff ||
            !l.contains("name") || !l["name"].is_string())
          return Status::Corruption(f + ": layers[" + std::to_string(i) + "]: needs scope_id (0..65535) and name");
        names[static_cast<uint16_t>(sc)] = l["name"].get<std::string>();
      }
    }
    for (size_t i = 0; i < shards_.size(); ++i) {
      auto [it, fresh] = by_scope.emplace(shards_[i].scope, 0);
      (void)it;
      (void)fresh;
    }
    std::set<std::string> used;
    for (auto& [scope, idx] : by_scope) {
      idx = tensors_.size();
      TensorEntry te;
      te.scope = scope;
      auto nm = names.find(scope);
      te.name = nm != names.end() ? nm->second : "scope_" + std::to_string(scope);
      if (te.name.empty() || !used.insert(te.name).second)
        return Status::Corruption(f + ": layers: name \"" + te.name + "\" is empty or used twice");
      tensors_.push_back(std::move(te));
    }
    for (size_t i = 0; i < shards_.size(); ++i) {
      TensorEntry& te = tensors_[by_scope[shards_[i].scope]];
      te.shards.push_back(static_cast<uint32_t>(i));
      // The shape: every shard of a scope must agree (the reference takes the last).
      WC_ASSIGN_OR_RETURN(std::vector<uint8_t> p, shard_payload(i));
      const std::string fs = what_ + ": shard " + std::to_string(i) + " (" + shard_type_name(shards_[i].type) + ")";
      if (p.size() < 8) return Status::Corruption(fs + ": payload: " + std::to_string(p.size()) + " bytes, no shape");
      const uint32_t rows = ld32(p.data()), cols = ld32(p.data() + 4);
      WC_RETURN_IF_ERROR(check_shape(fs, rows, cols));
      if (rows == 0 || cols == 0)
        return Status::Corruption(fs + ": shape: " + std::to_string(rows) + "×" + std::to_string(cols) + " is empty");
      if (te.rows && (te.rows != rows || te.cols != cols))
        return Status::Corruption(fs + ": shape " + std::to_string(rows) + "×" + std::to_string(cols) +
                                  " differs from the scope's " + std::to_string(te.rows) + "×" + std::to_string(te.cols));
      te.rows = rows;
      te.cols = cols;
      te.shape = {rows, cols};
    }
    return Status::OK();
  }
  // Version 2: META "tensors".
  auto ts = j.find("tensors");
  if (ts == j.end() || !ts->is_array()) return Status::Corruption(f + ": tensors: missing or not an array");
  std::set<std::string> used;
  for (size_t i = 0; i < ts->size(); ++i) {
    const auto& o = (*ts)[i];
    const std::string ft = f + ": tensors[" + std::to_string(i) + "]";
    if (!o.is_object()) return Status::Corruption(ft + ": not an object");
    TensorEntry te;
    if (!o.contains("name") || !o["name"].is_string() || o["name"].get<std::string>().empty())
      return Status::Corruption(ft + ": name: missing or empty");
    te.name = o["name"].get<std::string>();
    if (!used.insert(te.name).second) return Status::Corruption(ft + ": name: \"" + te.name + "\" used twice");
    if (!o.contains("dtype") || !o["dtype"].is_string() || !parse_dtype(o["dtype"].get<std::string>()))
      return Status::Corruption(ft + " (" + te.name + "): dtype: missing or not a safetensors dtype");
    te.dtype = *parse_dtype(o["dtype"].get<std::string>());
    if (!o.contains("shape") || !o["shape"].is_array() || o["shape"].size() > 8)
      return Status::Corruption(ft + " (" + te.name + "): shape: missing, not an array or more than 8 dimensions");
    uint64_t numel = 1;
    for (const auto& d : o["shape"]) {
      uint64_t v;
      if (!json_u64(d, &v) || (v != 0 && numel > kMaxElements / v))
        return Status::Corruption(ft + " (" + te.name + "): shape: a dimension is not a count or the product exceeds 2^36");
      numel *= v;
      te.shape.push_back(v);
    }
    if ((numel * dtype_bits(te.dtype)) % 8 != 0)
      return Status::Corruption(ft + " (" + te.name + "): shape: not a whole number of bytes in " +
                                dtype_name(te.dtype));
    uint64_t sc;
    if (!o.contains("scope") || !json_u64(o["scope"], &sc) || sc > 0xffff)
      return Status::Corruption(ft + " (" + te.name + "): scope: missing or outside 0..65535");
    te.scope = static_cast<uint16_t>(sc);
    if (by_scope.count(te.scope)) return Status::Corruption(ft + " (" + te.name + "): scope: " + std::to_string(sc) + " used twice");
    if (!o.contains("kind") || !o["kind"].is_string() ||
        (o["kind"].get<std::string>() != "raw" && o["kind"].get<std::string>() != "ndsq"))
      return Status::Corruption(ft + " (" + te.name + "): kind: must be \"raw\" or \"ndsq\"");
    te.raw = o["kind"].get<std::string>() == "raw";
    if (!te.raw) {
      if (te.shape.size() < 2 || numel == 0 || te.shape[0] > 0xffffffffu || numel / te.shape[0] > 0xffffffffu)
        return Status::Corruption(ft + " (" + te.name + "): shape: a decomposed tensor needs 2+ non-empty dimensions");
      if (te.dtype != DType::kF32 && te.dtype != DType::kF16 && te.dtype != DType::kBF16 && te.dtype != DType::kF64)
        return Status::Corruption(ft + " (" + te.name + "): dtype: " + dtype_name(te.dtype) +
                                  " cannot be decomposed (F32, F16, BF16, F64)");
      te.rows = static_cast<uint32_t>(te.shape[0]);
      te.cols = static_cast<uint32_t>(numel / te.shape[0]);
    }
    by_scope[te.scope] = tensors_.size();
    tensors_.push_back(std::move(te));
  }
  for (size_t i = 0; i < shards_.size(); ++i) {
    auto it = by_scope.find(shards_[i].scope);
    if (it == by_scope.end())
      return Status::Corruption(what_ + ": shard " + std::to_string(i) + ": scope " + std::to_string(shards_[i].scope) +
                                " belongs to no tensor in META");
    tensors_[it->second].shards.push_back(static_cast<uint32_t>(i));
  }
  for (const TensorEntry& te : tensors_) {
    int count[5] = {0, 0, 0, 0, 0};
    for (uint32_t si : te.shards) ++count[shards_[si].type];
    const std::string ft = what_ + ": tensor " + te.name + " (scope " + std::to_string(te.scope) + ")";
    if (te.raw) {
      if (te.shards.size() != 1 || count[kShardRaw] != 1)
        return Status::Corruption(ft + ": a stored tensor needs exactly one RAW shard (has " +
                                  std::to_string(te.shards.size()) + " shards)");
      if (shards_[te.shards[0]].usize != te.nbytes())
        return Status::Corruption(ft + ": RAW shard usize " + std::to_string(shards_[te.shards[0]].usize) +
                                  ", the tensor is " + std::to_string(te.nbytes()) + " bytes");
    } else if (count[kShardL] != 1 || count[kShardD] != 1 || count[kShardR] != 1 || count[kShardS] != 1 ||
               count[kShardRaw] != 0) {
      return Status::Corruption(ft + ": a decomposed tensor needs one L, one D, one R and one S shard");
    }
  }
  return Status::OK();
}

// ---------------------------------------------------------------- arithmetic
std::vector<float> densify_rows(const Components& c, uint32_t row0, uint32_t row1) {
  const uint64_t cols = c.cols;
  std::vector<float> out(uint64_t{row1 - row0} * cols, 0.0f);
  const bool l_factored = c.l_dense.empty() && !c.l_a.empty();
  const bool have_l = !c.l_dense.empty() || l_factored || (c.rank == 0 && !c.l_b.empty());
  for (uint32_t i = row0; i < row1; ++i) {
    float* o = out.data() + uint64_t{i - row0} * cols;
    if (!c.l_dense.empty()) {
      const float* l = c.l_dense.data() + uint64_t{i} * cols;
      for (uint64_t j = 0; j < cols; ++j) o[j] += l[j];
    } else if (l_factored) {
      const float* a = c.l_a.data() + uint64_t{i} * c.rank;
      for (uint64_t j = 0; j < cols; ++j) {
        const float* b = c.l_b.data() + j * c.rank;
        float s = 0.0f;
        for (uint32_t t = 0; t < c.rank; ++t) s += a[t] * b[t];
        o[j] += s;
      }
    }
    (void)have_l;
    if (!c.d_dense.empty()) {
      const float* d = c.d_dense.data() + uint64_t{i} * cols;
      for (uint64_t j = 0; j < cols; ++j) o[j] += d[j];
    } else if (i < c.d_diag.size()) {
      o[i] += c.d_diag[i];
    }
    for (const Components::Pq& q : c.r) {
      const uint64_t dsub = q.d / q.m;
      for (uint64_t j = 0; j < cols; ++j) {
        const uint64_t flat = uint64_t{i} * cols + j, blk = flat / q.d;
        if (blk >= q.n) {
          o[j] += 0.0f;
          continue;
        }
        const uint64_t w = flat % q.d, sub = w / dsub;
        o[j] += q.codebook[(sub * q.k + q.codes[blk * q.m + sub]) * dsub + w % dsub];
      }
    }
  }
  for (size_t e = 0; e < c.s_val.size(); ++e)
    if (c.s_row[e] >= row0 && c.s_row[e] < row1) out[uint64_t{c.s_row[e] - row0} * cols + c.s_col[e]] += c.s_val[e];
  return out;
}

std::vector<float> apply_components(const Components& c, const std::vector<float>& x) {
  std::vector<float> y(c.rows, 0.0f);
  const uint64_t cols = c.cols;
  if (!c.l_dense.empty()) {
    for (uint64_t i = 0; i < c.rows; ++i) {
      float s = 0;
      for (uint64_t j = 0; j < cols; ++j) s += c.l_dense[i * cols + j] * x[j];
      y[i] += s;
    }
  } else if (c.rank) {
    std::vector<float> t(c.rank, 0.0f);  // Bᵀ·x
    for (uint64_t j = 0; j < cols; ++j)
      for (uint32_t r = 0; r < c.rank; ++r) t[r] += c.l_b[j * c.rank + r] * x[j];
    for (uint64_t i = 0; i < c.rows; ++i) {
      float s = 0;
      for (uint32_t r = 0; r < c.rank; ++r) s += c.l_a[i * c.rank + r] * t[r];
      y[i] += s;
    }
  }
  if (!c.d_dense.empty()) {
    for (uint64_t i = 0; i < c.rows; ++i) {
      float s = 0;
      for (uint64_t j = 0; j < cols; ++j) s += c.d_dense[i * cols + j] * x[j];
      y[i] += s;
    }
  } else {
    for (size_t i = 0; i < c.d_diag.size(); ++i) y[i] += c.d_diag[i] * x[i];
  }
  const uint64_t elems = uint64_t{c.rows} * cols;
  for (const Components::Pq& q : c.r) {
    const uint64_t dsub = q.d / q.m;
    for (uint64_t b = 0; b < q.n; ++b)
      for (uint64_t s = 0; s < q.m; ++s) {
        const float* v = q.codebook.data() + (s * q.k + q.codes[b * q.m + s]) * dsub;
        for (uint64_t j = 0; j < dsub; ++j) {
          const uint64_t flat = b * q.d + s * dsub + j;
          if (flat >= elems) break;
          y[flat / cols] += v[j] * x[flat % cols];
        }
      }
  }
  for (size_t e = 0; e < c.s_val.size(); ++e) y[c.s_row[e]] += c.s_val[e] * x[c.s_col[e]];
  return y;
}

Result<std::vector<float>> CawsfFile::tensor_rows(size_t t, uint32_t row0, uint32_t row1) const {
  WC_ASSIGN_OR_RETURN(Components c, components(t));
  if (row0 > row1 || row1 > c.rows)
    return Status::Invalid(what_ + ": rows " + std::to_string(row0) + ".." + std::to_string(row1) + " outside 0.." +
                           std::to_string(c.rows));
  return densify_rows(c, row0, row1);
}

Result<std::vector<uint8_t>> CawsfFile::tensor_bytes(size_t t) const {
  if (t >= tensors_.size()) return Status::Invalid(what_ + ": tensor " + std::to_string(t) + " does not exist");
  const TensorEntry& te = tensors_[t];
  if (te.raw) return shard_payload(te.shards[0]);
  WC_ASSIGN_OR_RETURN(std::vector<float> w, tensor_rows(t, 0, te.rows));
  std::vector<uint8_t> out;
  switch (te.dtype) {
    case DType::kF32:
      out.resize(w.size() * 4);
      std::memcpy(out.data(), w.data(), out.size());
      break;
    case DType::kF64:
      out.resize(w.size() * 8);
      for (size_t i = 0; i < w.size(); ++i) {
        const double d = w[i];
        std::memcpy(out.data() + 8 * i, &d, 8);
      }
      break;
    case DType::kF16:
    case DType::kBF16:
      out.resize(w.size() * 2);
      for (size_t i = 0; i < w.size(); ++i) {
        const uint16_t h = te.dtype == DType::kF16 ? float_to_half(w[i]) : float_to_bf16(w[i]);
        out[2 * i] = static_cast<uint8_t>(h);
        out[2 * i + 1] = static_cast<uint8_t>(h >> 8);
      }
      break;
    default:
      return Status::Internal(what_ + ": " + te.name + ": decomposed tensor of dtype " + dtype_name(te.dtype));
  }
  return out;
}

// ---------------------------------------------------------------- routing
namespace {
// Go's strings.Fields separators (unicode.IsSpace).
bool is_space_rune(uint32_t r) {
  return r == '\t' || r == '\n' || r == '\v' || r == '\f' || r == '\r' || r == ' ' || r == 0x85 || r == 0xa0 ||
         r == 0x1680 || (r >= 0x2000 && r <= 0x200a) || r == 0x2028 || r == 0x2029 || r == 0x202f || r == 0x205f ||
         r == 0x3000;
}
// Length of the UTF-8 sequence at s[i] and its rune (0xfffd, length 1, when invalid).
size_t next_rune(const std::string& s, size_t i, uint32_t* r) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) { *r = c; return 1; }
  size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
  if (n == 0 || i + n > s.size()) { *r = 0xfffd; return 1; }
  uint32_t v = c & (0xff >> (n + 1));
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) { *r = 0xfffd; return 1; }
    v = (v << 6) | (b(i + k) & 0x3f);
  }
  if ((n == 3 && (v < 0x800 || (v >= 0xd800 && v <= 0xdfff))) || (n == 4 && (v < 0x10000 || v > 0x10ffff))) {
    *r = 0xfffd;
    return 1;
  }
  *r = v;
  return n;
}
}  // namespace

std::vector<float> prompt_key(const std::string& prompt, uint32_t dim) {
  std::vector<float> v(dim, 0.0f);
  std::vector<std::string> tokens;
  std::string cur;
  bool in_tok = false;
  for (size_t i = 0; i < prompt.size();) {
    uint32_t r;
    const size_t n = next_rune(prompt, i, &r);
    if (is_space_rune(r)) {
      if (in_tok) tokens.push_back(cur);
      cur.clear();
      in_tok = false;
    } else {
      cur.append(prompt, i, n);
      in_tok = true;
    }
    i += n;
  }
  if (in_tok) tokens.push_back(cur);
  if (tokens.empty()) tokens.emplace_back();
  for (const std::string& t : tokens)
    v[detail::xxh3(reinterpret_cast<const uint8_t*>(t.data()), t.size()) % dim] += 1.0f;
  double norm = 0;
  for (float x : v) norm += static_cast<double>(x) * x;
  const float inv = static_cast<float>(1.0 / (std::sqrt(norm) + 1e-8));
  for (float& x : v) x *= inv;
  return v;
}

std::vector<RouteHit> route(const Routing& r, const std::string& prompt, size_t k, double budget) {
  const size_t n = r.shard_ids.size();
  std::vector<RouteHit> hits;
  if (n == 0 || r.dim == 0) return hits;
  const std::vector<float> q = prompt_key(prompt, r.dim);
  std::vector<double> sims(n);
  for (size_t i = 0; i < n; ++i) {
    double s = 0;
    for (uint32_t j = 0; j < r.dim; ++j) s += static_cast<double>(r.keys[i * r.dim + j]) * static_cast<double>(q[j]);
    sims[i] = s;
  }
  std::vector<size_t> idx(n);
  for (size_t i = 0; i < n; ++i) idx[i] = i;
  for (size_t i = 0; i < n; ++i) {  // the reference's selection sort: ties keep the first maximum
    size_t b = i;
    for (size_t j = i + 1; j < n; ++j)
      if (sims[idx[j]] > sims[idx[b]]) b = j;
    std::swap(idx[i], idx[b]);
  }
  double total = 0;
  for (size_t i : idx) {
    const double c = r.costs[i];
    if (budget > 0 && total + c > budget) continue;
    hits.push_back({r.shard_ids[i], r.costs[i], sims[i]});
    total += c;
    if (hits.size() >= k) break;
  }
  return hits;
}

}  // namespace wcodec::cawsf
