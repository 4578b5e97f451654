// fs/src/kinds/hf_gguf_kind.cpp — see wcodecfs/hf_gguf_kind.h.
#include "wcodecfs/hf_gguf_kind.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>

#include "wcodec/packed_ternary.h"
#include "wcodec/safetensors.h"
#include "wcodec/trellis.h"
#include "wcodecfs/derived.h"
#include "wcodecfs/fs_log.h"
#include "wcodecfs/hf_gguf.h"

namespace wcodecfs {
namespace {

constexpr std::string_view kIndexExt = ".safetensors.index.json";
constexpr std::string_view kSafetensorsExt = ".safetensors";
constexpr std::string_view kWcodecExt = ".wcodec";
constexpr uint64_t kMaxSmallFile = 64u << 20;      // config, tokenizer and index files
constexpr uint32_t kComputedChunk = 1u << 20;      // bytes of a computed (converted) chunk

Result<std::string> read_small(const StoredInput& in) { return read_small_input(in, kMaxSmallFile, "a GGUF view"); }

// The optional tokenizer files, in the order they are inputs.
const char* const kOptional[] = {"tokenizer_config.json", "added_tokens.json", "tokenizer.json",
                                 "chat_template.jinja"};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The stored name of weight file `plain` (X.safetensors): itself, or X.wcodec.
std::string stored_weight(const StoreDir& dir, const std::string& plain) {
  if (dir.is_regular(plain)) return plain;
  const std::string w = plain.substr(0, plain.size() - kSafetensorsExt.size()) + std::string(kWcodecExt);
  if (dir.is_regular(w)) return w;
  return {};
}

Result<std::string> read_small(const StoreDir& dir, std::string_view name) {
  WCFS_ASSIGN_OR_RETURN(StoredInput in, dir.open(name));
  return read_small(in);
}

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// Appends extents for bytes [off, off + len) of `vf`, merging with the last
// extent where the bytes continue it.
Status append_range(const VirtualFile& vf, uint64_t off, uint64_t len, uint64_t* pos, std::vector<Extent>* out) {
  if (len == 0) return Status::OK();
  if (off > vf.size() || len > vf.size() - off)
    return Status::Corruption(vf.name() + ": range [" + std::to_string(off) + ", +" + std::to_string(len) +
                              ") is beyond the file (" + std::to_string(vf.size()) + " bytes)");
  const auto& ex = vf.extents();
  auto it = std::upper_bound(ex.begin(), ex.end(), off, [](uint64_t o, const Extent& e) { return o < e.offset; });
  size_t i = static_cast<size_t>(it - ex.begin()) - 1;
  uint64_t at = off;
  const uint64_t end = off + len;
  for (; at < end && i < ex.size(); ++i) {
    const Extent& e = ex[i];
    const uint64_t delta = at - e.offset;
    const uint64_t n = std::min(end, e.offset + e.length) - at;
    Extent piece{*pos, n, ZeroExtent{}};
    if (const auto* in = std::get_if<InlineExtent>(&e.what)) piece.what = InlineExtent{in->bytes, in->src_offset + delta};
    if (const auto* p = std::get_if<PassthroughExtent>(&e.what)) piece.what = PassthroughExtent{p->file, p->src_offset + delta};
    if (const auto* d = std::get_if<DecodedExtent>(&e.what)) piece.what = DecodedExtent{d->source, d->src_offset + delta};
    bool merged = false;
    if (!out->empty()) {
      Extent& last = out->back();
      if (const auto* lp = std::get_if<PassthroughExtent>(&last.what)) {
        const auto* pp = std::get_if<PassthroughExtent>(&piece.what);
        merged = pp && pp->file == lp->file && lp->src_offset + last.length == pp->src_offset;
      } else if (const auto* ld = std::get_if<DecodedExtent>(&last.what)) {
        const auto* pd = std::get_if<DecodedExtent>(&piece.what);
        merged = pd && pd->source == ld->source && ld->src_offset + last.length == pd->src_offset;
      } else if (std::holds_alternative<ZeroExtent>(last.what)) {
        merged = std::holds_alternative<ZeroExtent>(piece.what);
      }
      if (merged) last.length += n;
    }
    if (!merged) out->push_back(std::move(piece));
    *pos += n;
    at += n;
  }
  if (at != end) return Status::Internal(vf.name() + ": extents do not cover [" + std::to_string(off) + ", +" +
                                         std::to_string(len) + ")");
  return Status::OK();
}

// A source's safetensors header, read from its presented content (inline
// bytes for a .wcodec container, pread for a plain file: nothing decoded).
Result<wcodec::SafetensorsHeader> read_header(const VirtualFile& vf, const std::string& what) {
  if (vf.size() < 8) return Status::Corruption(what + ": " + std::to_string(vf.size()) + " bytes, not a safetensors file");
  uint8_t len8[8];
  WCFS_RETURN_IF_ERROR(read_uncached(vf, 0, 8, len8));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len8[i];
  if (n > wcodec::kMaxSafetensorsHeader || n > vf.size() - 8)
    return Status::Corruption(what + ": safetensors header length " + std::to_string(n) + " (file of " +
                              std::to_string(vf.size()) + " bytes)");
  std::vector<uint8_t> buf(8 + n);
  WCFS_RETURN_IF_ERROR(read_uncached(vf, 0, buf.size(), buf.data()));
  auto h = wcodec::parse_safetensors_header(buf.data(), buf.size(), vf.size(), what);
  if (!h.ok()) return from_codec(h.status());
  return std::move(h).value();
}

// A tensor whose bytes are computed from its source rows (wcodecfs/hf_gguf.h,
// HfConvert): BF16/F16 widened to F32, per-row int8 as Q8_0 blocks or F32
// values. A chunk is computed from whole output rows; their source rows
// (and scales) are read as one span each (the Q/K permutation moves rows
// only within a head), so a decoded source chunk is decoded once per
// computed chunk.
Result<std::shared_ptr<const ComputedSource>> converted_source(std::shared_ptr<const VirtualFile> src, uint64_t base,
                                                               std::shared_ptr<const VirtualFile> scale_src,
                                                               uint64_t scale_base, const HfTensorSource& t,
                                                               const std::string& view, uint64_t id) {
  auto order = std::make_shared<const std::vector<uint32_t>>(t.row_order);
  const HfConvert conv = t.convert;
  const bool ternary = conv == HfConvert::kTernaryToTq2_0 || conv == HfConvert::kTernaryToF32;
  const bool scaled = ternary || conv == HfConvert::kI8ToQ8_0 || conv == HfConvert::kI8ToF32;
  const uint64_t in_elem = scaled ? 1 : 2;
  const uint64_t rows = std::max<uint64_t>(1, t.rows);
  const uint64_t in_row = t.src_bytes / rows, out_row = t.out_bytes / rows;
  const uint64_t cols = ternary ? t.cols : in_row / in_elem;
  if (in_row * rows != t.src_bytes || out_row * rows != t.out_bytes || out_row == 0 ||
      (ternary ? (cols + 3) / 4 != in_row : cols * in_elem != in_row))
    return Status::Internal(view + ": tensor " + t.hf_name + " does not split into " + std::to_string(rows) + " rows");
  const std::string what = view + ": " + t.hf_name;
  const uint64_t total = t.out_bytes;
  ComputedSource::Compute fn = [=](size_t chunk, uint8_t* out) -> Status {
    const uint64_t o0 = uint64_t{chunk} * kComputedChunk, o1 = std::min(total, o0 + kComputedChunk);
    const uint64_t r0 = o0 / out_row, r1 = (o1 + out_row - 1) / out_row;
    auto src_row = [&](uint64_t r) -> uint64_t { return order->empty() ? r : (*order)[r]; };
    uint64_t smin = UINT64_MAX, smax = 0;
    for (uint64_t r = r0; r < r1; ++r) smin = std::min(smin, src_row(r)), smax = std::max(smax, src_row(r));
    std::vector<uint8_t> in((smax - smin + 1) * in_row), sc, rowbuf(out_row);
    std::vector<int8_t> codes(ternary ? cols : 0);
    WCFS_RETURN_IF_ERROR(read_uncached(*src, base + smin * in_row, in.size(), in.data()));
    if (scaled) {
      sc.resize((smax - smin + 1) * 2);
      WCFS_RETURN_IF_ERROR(read_uncached(*scale_src, scale_base + smin * 2, sc.size(), sc.data()));
    }
    for (uint64_t r = r0; r < r1; ++r) {
      const uint64_t k = src_row(r) - smin;
      const uint8_t* q = in.data() + k * in_row;
      uint8_t* o = rowbuf.data();
      if (ternary) {
        // A reserved code or non-zero padding is an error (EIO), never zeros.
        wcodec::PackedTernary pt;
        pt.out_features = 1;
        pt.in_features = cols;
        WCFS_RETURN_IF_ERROR(from_codec(wcodec::unpack_ternary(q, in_row, pt, codes.data(), what)));
        const uint16_t d16 = static_cast<uint16_t>(sc[k * 2] | (sc[k * 2 + 1] << 8));
        if (conv == HfConvert::kTernaryToTq2_0) {
          WCFS_RETURN_IF_ERROR(from_codec(wcodec::ternary_row_to_tq2_0(codes.data(), cols, d16, o, what)));
        } else {
          const float d = f16_to_f32(d16);
          for (uint64_t c = 0; c < cols; ++c) {
            const float f = d * static_cast<float>(codes[c]);
            std::memcpy(o + c * 4, &f, 4);
          }
        }
      } else if (conv == HfConvert::kI8ToQ8_0) {
        for (uint64_t b = 0; b < cols / 32; ++b) {
          std::memcpy(o + b * 34, sc.data() + k * 2, 2);
          std::memcpy(o + b * 34 + 2, q + b * 32, 32);
        }
      } else if (conv == HfConvert::kI8ToF32) {
        const float d = f16_to_f32(static_cast<uint16_t>(sc[k * 2] | (sc[k * 2 + 1] << 8)));
        for (uint64_t c = 0; c < cols; ++c) {
          const float f = d * static_cast<float>(static_cast<int8_t>(q[c]));
          std::memcpy(o + c * 4, &f, 4);
        }
      } else {
        for (uint64_t c = 0; c < cols; ++c) {
          const uint16_t v = static_cast<uint16_t>(q[2 * c] | (q[2 * c + 1] << 8));
          const float f = conv == HfConvert::kBf16ToF32 ? bf16_to_f32(v) : f16_to_f32(v);
          std::memcpy(o + c * 4, &f, 4);
        }
      }
      // The part of this row inside [o0, o1).
      const uint64_t a = std::max(o0, r * out_row), e = std::min(o1, (r + 1) * out_row);
      std::memcpy(out + (a - o0), rowbuf.data() + (a - r * out_row), e - a);
    }
    return Status::OK();
  };
  return ComputedSource::make_uniform(view, total, kComputedChunk, std::move(fn), id);
}

// Whether the directory's BPE tokenizer is one the view can name
// (tokenizer.ggml.pre from its fingerprint), so that an unknown tokenizer
// gets no view rather than a view that fails at stat. Fingerprinting parses
// the whole tokenizer.json, so results are remembered per file identity
// (device, inode, size, mtime, ctime of tokenizer.json and
// tokenizer_config.json) in a small process-wide table.
Status check_bpe_tokenizer(const StoreDir& dir, const std::string& where) {
  struct Remembered {
    std::string key;
    Status result;
  };
  static std::mutex mu;                   // guards `known`
  static std::vector<Remembered> known;  // at most kMaxKnown entries
  constexpr size_t kMaxKnown = 64;
  WCFS_ASSIGN_OR_RETURN(StoredInput tj, dir.open("tokenizer.json"));
  std::optional<StoredInput> tc;
  if (dir.is_regular("tokenizer_config.json")) {
    WCFS_ASSIGN_OR_RETURN(tc, dir.open("tokenizer_config.json"));
  }
  std::string key;
  for (const StoredInput* in : {&tj, tc ? &*tc : nullptr}) {
    if (!in) continue;
    const struct stat& st = in->st;
    for (uint64_t v : {uint64_t(st.st_dev), uint64_t(st.st_ino), uint64_t(st.st_size), uint64_t(st.st_mtim.tv_sec),
                       uint64_t(st.st_mtim.tv_nsec), uint64_t(st.st_ctim.tv_sec), uint64_t(st.st_ctim.tv_nsec)})
      key += std::to_string(v) + ",";
    key += ";";
  }
  {
    std::lock_guard<std::mutex> lk(mu);
    for (const auto& r : known)
      if (r.key == key) return r.result;
  }
  Status result = [&]() -> Status {
    WCFS_ASSIGN_OR_RETURN(std::string tjs, read_small(tj));
    std::optional<std::string> tcs;
    if (tc) {
      WCFS_ASSIGN_OR_RETURN(tcs, read_small(*tc));
    }
    WCFS_ASSIGN_OR_RETURN(std::string fp, bpe_fingerprint(tjs, tcs, where + "tokenizer.json"));
    if (bpe_pre_for(fp).empty())
      return Status(Code::kNotSupported, where + "tokenizer.json: pre-tokenizer fingerprint " + fp +
                                             " is not a known tokenizer (docs/gguf-view.md)");
    return Status::OK();
  }();
  if (result.code() == Code::kStale) return result;  // changed while read: not remembered
  std::lock_guard<std::mutex> lk(mu);
  if (known.size() >= kMaxKnown) known.clear();
  known.push_back({key, result});
  return result;
}

}  // namespace

Result<std::shared_ptr<const VirtualFile>> build_hf_gguf_view(const HfDirFiles& files,
                                                             const std::vector<HfWeightFile>& weights,
                                                             const std::optional<std::vector<std::string>>& index_names,
                                                             const std::string& index_path, const std::string& view,
                                                             const std::function<uint64_t(size_t)>& source_id) {
  if (weights.empty()) return Status::Internal(view + ": a GGUF view without weights");
  // The weights' headers.
  std::vector<std::shared_ptr<const VirtualFile>> contents;
  std::vector<HfShard> shards;
  std::set<std::string> shard_tensors;
  for (const HfWeightFile& w : weights) {
    if (!w.content) return Status::Internal(view + ": weight file " + w.what + " has no content");
    WCFS_ASSIGN_OR_RETURN(wcodec::SafetensorsHeader h, read_header(*w.content, w.what));
    for (const auto& t : h.tensors) shard_tensors.insert(t.name);
    contents.push_back(w.content);
    shards.push_back(HfShard{w.what, std::move(h)});
  }
  if (index_names) {
    const std::set<std::string> want(index_names->begin(), index_names->end());
    for (const std::string& n : want)
      if (!shard_tensors.count(n))
        return Status::Corruption(index_path + ": \"weight_map\" names tensor \"" + n + "\", which no shard holds");
    for (const std::string& n : shard_tensors)
      if (!want.count(n))
        return Status::Corruption(index_path + ": the shards hold tensor \"" + n + "\", which \"weight_map\" lacks");
  }
  WCFS_ASSIGN_OR_RETURN(HfGgufPlan plan, plan_hf_gguf(files, shards));

  std::vector<Extent> extents;
  std::vector<uint64_t> segments;
  const uint64_t hsize = plan.header.size();
  extents.push_back(Extent{0, hsize, InlineExtent{std::make_shared<const std::vector<uint8_t>>(std::move(plan.header)), 0}});
  uint64_t pos = hsize;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const HfTensorSource& t = plan.tensors[i];
    const wcodec::GgufTensor& g = plan.gguf.tensors[i];
    if (pos != hsize + g.offset)
      return Status::Internal(view + ": tensor " + g.name + " at " + std::to_string(pos) + ", planned at " +
                              std::to_string(hsize + g.offset));
    const VirtualFile& src = *contents[t.shard];
    const uint64_t base = shards[t.shard].header.data_start + t.src_begin;
    if (t.out_bytes > 0) segments.push_back(pos);
    if (t.convert != HfConvert::kCopy) {
      const uint64_t scale_base = shards[t.scale_shard].header.data_start + t.scale_begin;
      WCFS_ASSIGN_OR_RETURN(std::shared_ptr<const ComputedSource> cs,
                            converted_source(contents[t.shard], base, contents[t.scale_shard], scale_base, t, view,
                                             source_id ? source_id(i) : 0));
      extents.push_back(Extent{pos, t.out_bytes, DecodedExtent{cs, 0}});
      pos += t.out_bytes;
    } else if (t.row_order.empty()) {
      WCFS_RETURN_IF_ERROR(append_range(src, base, t.src_bytes, &pos, &extents));
    } else {
      const uint64_t row_bytes = t.src_bytes / t.rows;
      for (uint32_t r : t.row_order) WCFS_RETURN_IF_ERROR(append_range(src, base + r * row_bytes, row_bytes, &pos, &extents));
    }
    const uint64_t padded = (g.nbytes + plan.gguf.alignment - 1) / plan.gguf.alignment * plan.gguf.alignment;
    if (padded > g.nbytes) {
      extents.push_back(Extent{pos, padded - g.nbytes, ZeroExtent{}});
      pos += padded - g.nbytes;
    }
  }
  return VirtualFile::make(view, std::move(extents), std::move(segments));
}

Result<Presentation> hf_gguf_presentation(const StoreDir& dir) {
  if (!dir.is_regular("config.json")) return Status::NotFound("no config.json");
  std::vector<std::string> indexes, bases;
  for (const StoreEntry& e : dir.entries()) {
    // A Trellis v2 store (layer directories): the trellis kind presents it,
    // and its GGUF form (model.dense.gguf).
    if (e.type == S_IFDIR && wcodec::is_trellis_layer_dir_name(e.name)) return Status::NotFound("a Trellis v2 store");
    if (e.type != S_IFREG) continue;
    if (ends_with(e.name, kIndexExt) && e.name.size() > kIndexExt.size()) {
      indexes.push_back(e.name);
    } else if (ends_with(e.name, kSafetensorsExt) && e.name.size() > kSafetensorsExt.size()) {
      bases.push_back(e.name.substr(0, e.name.size() - kSafetensorsExt.size()));
    } else if (ends_with(e.name, kWcodecExt) && e.name.size() > kWcodecExt.size() && !ends_with(e.name, ".gguf.wcodec")) {
      bases.push_back(e.name.substr(0, e.name.size() - kWcodecExt.size()));
    }
  }
  std::sort(bases.begin(), bases.end());
  bases.erase(std::unique(bases.begin(), bases.end()), bases.end());
  const std::string where = dir.path().empty() ? std::string() : dir.path() + "/";
  Presentation p;
  p.hides_inputs = false;
  std::string name;
  std::vector<std::string> tail;
  if (indexes.size() > 1)
    return Status(Code::kNotSupported, where + ": " + std::to_string(indexes.size()) +
                                           " safetensors index files (one model per directory)");
  if (indexes.size() == 1) {
    name = indexes[0].substr(0, indexes[0].size() - kIndexExt.size());
    WCFS_ASSIGN_OR_RETURN(std::string idx, read_small(dir, indexes[0]));
    if (wcodec::is_trellis_v3_index(idx)) return Status::NotFound("a Trellis v3 store");
    WCFS_ASSIGN_OR_RETURN(std::vector<std::string> shards, parse_hf_index(idx, where + indexes[0]));
    for (const std::string& s : shards) {
      const std::string stored = stored_weight(dir, s);
      if (stored.empty())
        return Status::Corruption(where + indexes[0] + ": \"weight_map\" names " + s + ", which is not in the directory");
      p.inputs.push_back(stored);
    }
    tail.push_back(indexes[0]);
  } else {
    if (bases.empty()) return Status::NotFound("no weights");
    if (bases.size() > 1)
      return Status(Code::kNotSupported, where + ": " + std::to_string(bases.size()) +
                                             " weight files and no NAME.safetensors.index.json");
    name = bases[0];
    p.inputs.push_back(stored_weight(dir, bases[0] + std::string(kSafetensorsExt)));
  }
  WCFS_ASSIGN_OR_RETURN(std::string cfg, read_small(dir, "config.json"));
  WCFS_RETURN_IF_ERROR(check_hf_config(cfg, where + "config.json"));
  // The tokenizer: SentencePiece's tokenizer.model, else tokenizer.json
  // (a BPE tokenizer, identified when the view is built).
  const bool spm = dir.is_regular("tokenizer.model");
  if (!spm && !dir.is_regular("tokenizer.json"))
    return Status(Code::kNotSupported, where + "tokenizer.model: missing, and no tokenizer.json either (a "
                                               "SentencePiece or BPE tokenizer is needed)");
  for (const char* refused : {"tekken.json", "chat_template.json", "additional_chat_templates", "params.json"})
    if (dir.find(refused))
      return Status(Code::kNotSupported, where + refused + ": present (not supported by the GGUF view)");
  if (!spm) WCFS_RETURN_IF_ERROR(check_bpe_tokenizer(dir, where));
  p.name = name + ".gguf";
  p.inputs.push_back("config.json");
  if (spm) p.inputs.push_back("tokenizer.model");
  for (const char* opt : kOptional)
    if (dir.is_regular(opt)) p.inputs.push_back(opt);
  for (std::string& t : tail) p.inputs.push_back(std::move(t));
  return p;
}

void HfGgufKind::present(const StoreDir& dir, std::vector<Presentation>* out) const {
  auto p = hf_gguf_presentation(dir);
  if (p.ok()) {
    out->push_back(std::move(p).value());
    return;
  }
  if (p.status().code() == Code::kNotFound) return;
  const std::string& msg = p.status().message();
  log_once(LogLevel::kWarn, "hf-gguf:" + dir.path() + ":" + msg, "no GGUF view in " +
                                                                      (dir.path().empty() ? "." : dir.path()) +
                                                                      ": " + msg);
}

Result<std::shared_ptr<const VirtualFile>> HfGgufKind::build(const StoreDir& dir, const Presentation& p,
                                                             const BuildContext& ctx) const {
  const auto& ins = ctx.inputs();
  const std::string& view = ctx.presented_path();
  if (ins.size() != p.inputs.size())
    return Status::Internal(view + ": " + std::to_string(ins.size()) + " inputs for " +
                            std::to_string(p.inputs.size()) + " names");
  HfDirFiles files;
  files.where = dir.path().empty() ? std::string() : dir.path() + "/";
  files.dir_name = dir.path().empty() ? p.name.substr(0, p.name.size() - 5) : base_name(dir.path());
  std::vector<const StoredInput*> weights;
  std::optional<std::vector<std::string>> index_names;
  std::string index_path;
  bool have_config = false, have_tok = false;
  for (const StoredInput& in : ins) {
    const std::string& n = in.rel;
    if (n == "config.json") {
      WCFS_ASSIGN_OR_RETURN(files.config, read_small(in));
      have_config = true;
    } else if (n == "tokenizer.model") {
      WCFS_ASSIGN_OR_RETURN(files.tokenizer_model, read_small(in));
      have_tok = true;
    } else if (n == "tokenizer_config.json") {
      WCFS_ASSIGN_OR_RETURN(files.tokenizer_config, read_small(in));
    } else if (n == "added_tokens.json") {
      WCFS_ASSIGN_OR_RETURN(files.added_tokens, read_small(in));
    } else if (n == "tokenizer.json") {
      WCFS_ASSIGN_OR_RETURN(files.tokenizer_json, read_small(in));
    } else if (n == "chat_template.jinja") {
      WCFS_ASSIGN_OR_RETURN(files.chat_template, read_small(in));
    } else if (ends_with(n, kIndexExt)) {
      WCFS_ASSIGN_OR_RETURN(std::string idx, read_small(in));
      WCFS_ASSIGN_OR_RETURN(index_names, hf_index_tensor_names(idx, in.path));
      index_path = in.path;
    } else {
      weights.push_back(&in);
    }
  }
  have_tok = have_tok || files.tokenizer_json.has_value();
  if (!have_config || !have_tok || weights.empty())
    return Status::Internal(view + ": the presentation lacks config.json, a tokenizer or weights");

  // The weights as the mount shows them.
  std::vector<HfWeightFile> contents;
  for (size_t k = 0; k < weights.size(); ++k) {
    WCFS_ASSIGN_OR_RETURN(std::shared_ptr<const VirtualFile> vf, open_content(*weights[k], ctx.source_id(k)));
    contents.push_back(HfWeightFile{weights[k]->path, std::move(vf)});
  }
  const size_t nw = weights.size();
  return build_hf_gguf_view(files, contents, index_names, index_path, view,
                            [&ctx, nw](size_t i) { return ctx.source_id(nw + i); });
}

}  // namespace wcodecfs
