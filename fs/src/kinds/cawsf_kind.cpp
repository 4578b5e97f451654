// fs/src/kinds/cawsf_kind.cpp — X.cawsf presented as X.safetensors and,
// beside a supported config.json and tokenizer, as X.gguf (see
// wcodecfs/cawsf_kind.h).
// Thread-safety: the kind is stateless; a built file's chunk function is
// called from decoder threads at once and touches only the immutable
// CawsfFile and the mutex-guarded component cache.
#include "wcodecfs/cawsf_kind.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>

#include "wcodec/cawsf.h"
#include "wcodec/safetensors.h"
#include "wcodecfs/derived.h"
#include "wcodecfs/fs_log.h"
#include "wcodecfs/hf_gguf_kind.h"

namespace wcodecfs {

namespace cw = wcodec::cawsf;

namespace {

constexpr uint64_t kBandBytes = 1 << 20;  // bytes of one computed chunk (a band of rows, or a stored range)
constexpr size_t kCachedComponents = 4;    // decoded tensors kept for the next bands
constexpr uint64_t kMaxSmallFile = 64u << 20;  // config and tokenizer files read for a GGUF view

Result<std::string> read_small(const StoredInput& in) { return read_small_input(in, kMaxSmallFile, "a GGUF view"); }
constexpr std::string_view kExt = ".cawsf";

// The tokenizer files the GGUF view reads when present, in input order.
const char* const kOptionalSmall[] = {"tokenizer_config.json", "added_tokens.json", "tokenizer.json",
                                      "chat_template.jinja"};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The first entry of `dir` that the hf-gguf kind takes for weights of the
// directory's own (X.safetensors, X.wcodec, an index), or "".
std::string own_weights(const StoreDir& dir) {
  for (const StoreEntry& e : dir.entries()) {
    if (e.type != S_IFREG) continue;
    if ((ends_with(e.name, ".safetensors") && e.name.size() > 12) || ends_with(e.name, ".safetensors.index.json") ||
        (ends_with(e.name, ".wcodec") && e.name.size() > 7 && !ends_with(e.name, ".gguf.wcodec")))
      return e.name;
  }
  return {};
}

// The format version of stored CAWSF file `name` (bytes 8..11), or 0.
uint32_t cawsf_version(const StoreDir& dir, const std::string& name) {
  auto in = dir.open(name);
  if (!in.ok()) return 0;
  uint8_t h[12];
  auto got = in->file->pread_full(0, sizeof h, h);
  if (!got.ok() || *got != sizeof h || std::memcmp(h, "CAWSF\0\0\0", 8) != 0) return 0;
  return static_cast<uint32_t>(h[8]) | static_cast<uint32_t>(h[9]) << 8 | static_cast<uint32_t>(h[10]) << 16 |
         static_cast<uint32_t>(h[11]) << 24;
}

void warn_once(const StoreDir& dir, const std::string& key, const std::string& msg) {
  log_once(LogLevel::kWarn, "cawsf:" + dir.path() + ":" + key, msg);
}

// The last few decoded tensors (a band read decodes its tensor's components once).
class ComponentCache {
 public:
  explicit ComponentCache(std::shared_ptr<const cw::CawsfFile> f) : file_(std::move(f)) {}
  wcodec::Result<std::shared_ptr<const cw::Components>> get(size_t t) const {
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (const auto& [k, v] : items_)
        if (k == t) return v;
    }
    auto c = file_->components(t);  // outside the lock: decoders run in parallel
    if (!c.ok()) return c.status();
    auto sp = std::make_shared<const cw::Components>(std::move(*c));
    std::lock_guard<std::mutex> lk(mu_);
    items_.emplace_back(t, sp);
    if (items_.size() > kCachedComponents) items_.pop_front();
    return sp;
  }

 private:
  std::shared_ptr<const cw::CawsfFile> file_;
  mutable std::mutex mu_;  // guards items_
  mutable std::deque<std::pair<size_t, std::shared_ptr<const cw::Components>>> items_;
};

struct Piece {
  size_t tensor;
  uint64_t byte_off;  // within the tensor (stored tensors)
  uint32_t len;
  uint32_t row0, row1;  // decomposed tensors
};

void to_dtype(const std::vector<float>& w, wcodec::DType t, uint8_t* out) {
  switch (t) {
    case wcodec::DType::kF64:
      for (size_t i = 0; i < w.size(); ++i) {
        const double d = w[i];
        std::memcpy(out + 8 * i, &d, 8);
      }
      break;
    case wcodec::DType::kF16:
    case wcodec::DType::kBF16:
      for (size_t i = 0; i < w.size(); ++i) {
        const uint16_t h = t == wcodec::DType::kF16 ? cw::float_to_half(w[i]) : cw::float_to_bf16(w[i]);
        out[2 * i] = static_cast<uint8_t>(h);
        out[2 * i + 1] = static_cast<uint8_t>(h >> 8);
      }
      break;
    default:
      std::memcpy(out, w.data(), w.size() * 4);
  }
}

}  // namespace

Result<std::vector<std::string>> cawsf_gguf_small_files(const StoreDir& dir) {
  const std::string where = dir.path().empty() ? std::string() : dir.path() + "/";
  if (!dir.is_regular("config.json")) return Status::NotFound(where + "config.json: missing");
  WCFS_ASSIGN_OR_RETURN(StoredInput cfg_in, dir.open("config.json"));
  WCFS_ASSIGN_OR_RETURN(std::string cfg, read_small(cfg_in));
  WCFS_RETURN_IF_ERROR(check_hf_config(cfg, where + "config.json"));
  if (!dir.is_regular("tokenizer.model"))
    return Status(Code::kNotSupported, where + "tokenizer.model: missing (a SentencePiece tokenizer is needed; "
                                               "BPE tokenizers from tokenizer.json are not presented yet)");
  for (const char* refused : {"tekken.json", "chat_template.json", "additional_chat_templates", "params.json"})
    if (dir.find(refused))
      return Status(Code::kNotSupported, where + refused + ": present (not supported by the GGUF view)");
  std::vector<std::string> names{"config.json", "tokenizer.model"};
  for (const char* opt : kOptionalSmall)
    if (dir.is_regular(opt)) names.emplace_back(opt);
  return names;
}

Result<std::shared_ptr<const VirtualFile>> cawsf_gguf_file(std::shared_ptr<const VirtualFile> dense,
                                                          const std::string& what,
                                                          const std::vector<StoredInput>& small,
                                                          const std::string& dir_name, const std::string& view,
                                                          const std::function<uint64_t(size_t)>& source_id) {
  HfDirFiles files;
  files.dir_name = dir_name;
  bool have_config = false, have_tok = false;
  for (const StoredInput& in : small) {
    if (files.where.empty() && in.path.size() > in.rel.size())
      files.where = in.path.substr(0, in.path.size() - in.rel.size());
    WCFS_ASSIGN_OR_RETURN(std::string bytes, read_small(in));
    if (in.rel == "config.json") {
      files.config = std::move(bytes);
      have_config = true;
    } else if (in.rel == "tokenizer.model") {
      files.tokenizer_model = std::move(bytes);
      have_tok = true;
    } else if (in.rel == "tokenizer_config.json") {
      files.tokenizer_config = std::move(bytes);
    } else if (in.rel == "added_tokens.json") {
      files.added_tokens = std::move(bytes);
    } else if (in.rel == "tokenizer.json") {
      files.tokenizer_json = std::move(bytes);
    } else if (in.rel == "chat_template.jinja") {
      files.chat_template = std::move(bytes);
    } else {
      return Status::Internal(view + ": " + in.path + " is not a file of the GGUF view");
    }
  }
  if (!have_config || !have_tok) return Status::Internal(view + ": the GGUF view lacks config.json or tokenizer.model");
  return build_hf_gguf_view(files, {HfWeightFile{what, std::move(dense)}}, std::nullopt, "", view, source_id);
}

void CawsfKind::present(const StoreDir& dir, std::vector<Presentation>* out) const {
  std::vector<std::string> stems;
  for (const StoreEntry& e : dir.entries())
    if (e.type == S_IFREG && e.name.size() > kExt.size() && ends_with(e.name, kExt))
      stems.push_back(e.name.substr(0, e.name.size() - kExt.size()));
  if (stems.empty()) return;
  const std::string shown_dir = dir.path().empty() ? "." : dir.path();
  // The GGUF views' small files, when the directory has a config.json and
  // no weights of its own.
  std::optional<std::vector<std::string>> small;
  if (dir.is_regular("config.json")) {
    if (const std::string w = own_weights(dir); !w.empty()) {
      warn_once(dir, "own-weights", "no GGUF view of the .cawsf files in " + shown_dir + ": the directory's own " +
                                        w + " has the hf-gguf kind's view");
    } else if (auto s = cawsf_gguf_small_files(dir); s.ok()) {
      small = std::move(s).value();
    } else if (s.status().code() != Code::kNotFound) {
      warn_once(dir, s.status().message(), "no GGUF view of the .cawsf files in " + shown_dir + ": " + s.status().message());
    }
  }
  for (const std::string& x : stems) {
    const std::string in = x + std::string(kExt);
    if (dir.is_regular(x + ".safetensors") || dir.find(x + ".wcodec")) {
      warn_once(dir, in + ":st", "no " + x + ".safetensors view of " + in + " in " + shown_dir +
                                     ": the stored " + x + ".safetensors (or " + x + ".wcodec) is served");
    } else {
      out->push_back(Presentation{x + ".safetensors", {in}, /*hides_inputs=*/false});
    }
    if (!small) continue;
    if (dir.find(x + ".gguf") || dir.find(x + ".gguf.wcodec")) {
      warn_once(dir, in + ":gguf", "no " + x + ".gguf view of " + in + " in " + shown_dir + ": the stored " + x +
                                       ".gguf (or " + x + ".gguf.wcodec) is served");
      continue;
    }
    if (const uint32_t v = cawsf_version(dir, in); v != 2) {
      warn_once(dir, in + ":version", "no " + x + ".gguf view of " + in + " in " + shown_dir + ": CAWSF version " +
                                          std::to_string(v) + " (version 2 keeps the checkpoint's tensor names)");
      continue;
    }
    Presentation p{x + ".gguf", {in}, /*hides_inputs=*/false};
    p.inputs.insert(p.inputs.end(), small->begin(), small->end());
    out->push_back(std::move(p));
  }
}

Result<std::shared_ptr<const VirtualFile>> cawsf_dense_file(std::shared_ptr<const cw::CawsfFile> file,
                                                           const std::string& name, uint64_t source_id) {
  if (!file) return Status::Internal(name + ": no CAWSF file");
  const std::string& in_path = file->what();
  wcodec::SafetensorsHeader h;
  std::vector<Piece> pieces;
  std::vector<uint32_t> sizes;
  uint64_t off = 0;
  for (size_t t = 0; t < file->tensors().size(); ++t) {
    const cw::TensorEntry& te = file->tensors()[t];
    const uint64_t nb = te.nbytes();
    h.tensors.push_back(wcodec::TensorInfo{te.name, te.dtype, te.shape, off, off + nb});
    off += nb;
    if (nb == 0) continue;
    if (te.raw) {
      for (uint64_t b = 0; b < nb; b += kBandBytes) {
        const uint32_t len = static_cast<uint32_t>(std::min(kBandBytes, nb - b));
        pieces.push_back({t, b, len, 0, 0});
        sizes.push_back(len);
      }
      continue;
    }
    const uint64_t row_bytes = nb / te.rows;
    if (row_bytes > ComputedSource::kMaxChunk)
      return Status(Code::kNotSupported, in_path + ": " + te.name + ": a row of " + std::to_string(row_bytes) +
                                  " bytes is longer than a computed chunk");
    const uint32_t band = static_cast<uint32_t>(std::max<uint64_t>(1, kBandBytes / row_bytes));
    for (uint32_t r = 0; r < te.rows; r += band) {
      const uint32_t r1 = std::min(te.rows, r + band);
      pieces.push_back({t, uint64_t{r} * row_bytes, static_cast<uint32_t>((r1 - r) * row_bytes), r, r1});
      sizes.push_back(pieces.back().len);
    }
  }
  h.data_len = off;
  auto header = std::make_shared<std::vector<uint8_t>>(wcodec::write_safetensors_header(h));
  const uint64_t data_start = header->size();
  std::vector<Extent> extents{Extent{0, data_start, InlineExtent{header, 0}}};
  std::vector<uint64_t> segments;
  if (!pieces.empty()) {
    auto cache = std::make_shared<ComponentCache>(file);
    auto compute = [file, cache, pieces](size_t i, uint8_t* out) -> Status {
      const Piece& pc = pieces[i];
      const cw::TensorEntry& te = file->tensors()[pc.tensor];
      if (te.raw) return from_codec(file->raw_range(pc.tensor, pc.byte_off, pc.len, out));
      auto c = cache->get(pc.tensor);
      if (!c.ok()) return from_codec(c.status());
      const std::vector<float> w = cw::densify_rows(**c, pc.row0, pc.row1);
      if (w.size() * (wcodec::dtype_bits(te.dtype) / 8) != pc.len)
        return Status::Internal(te.name + ": band of " + std::to_string(w.size()) + " values for " +
                                std::to_string(pc.len) + " bytes");
      to_dtype(w, te.dtype, out);
      return Status::OK();
    };
    WCFS_ASSIGN_OR_RETURN(std::shared_ptr<const ComputedSource> src,
                          ComputedSource::make(name, sizes, compute, source_id));
    for (const wcodec::TensorInfo& ti : h.tensors) {
      if (ti.end == ti.begin) continue;
      extents.push_back(Extent{data_start + ti.begin, ti.end - ti.begin, DecodedExtent{src, ti.begin}});
      segments.push_back(data_start + ti.begin);
    }
  }
  return VirtualFile::make(name, std::move(extents), std::move(segments));
}

Result<std::shared_ptr<const VirtualFile>> CawsfKind::build(const StoreDir& dir, const Presentation& p,
                                                            const BuildContext& ctx) const {
  const bool gguf = ends_with(p.name, ".gguf");
  if (ctx.inputs().empty() || (!gguf && ctx.inputs().size() != 1) || !ends_with(ctx.inputs().front().rel, kExt))
    return Status::Internal(ctx.presented_path() + ": a .cawsf presentation starts with its .cawsf input");
  const StoredInput& in = ctx.inputs().front();
  auto opened = cw::CawsfFile::open_fd(in.file->fd(), in.path);
  if (!opened.ok()) return from_codec(opened.status());
  WCFS_ASSIGN_OR_RETURN(std::shared_ptr<const VirtualFile> dense,
                        cawsf_dense_file(*opened, ctx.presented_path(), ctx.source_id(0)));
  if (!gguf) return dense;
  const std::vector<StoredInput> small(ctx.inputs().begin() + 1, ctx.inputs().end());
  // general.name: the directory's name, as the converter and the hf-gguf
  // kind write it (X at the top of the store).
  const std::string dir_name = dir.path().empty() ? p.name.substr(0, p.name.size() - 5)
                                                  : dir.path().substr(dir.path().rfind('/') + 1);
  return cawsf_gguf_file(dense, in.path, small, dir_name, ctx.presented_path(),
                         [&ctx](size_t i) { return ctx.source_id(1 + i); });
}

}  // namespace wcodecfs
