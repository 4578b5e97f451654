// fs/src/kinds/cawsf_kind.cpp — X.cawsf presented as X.safetensors (see
// wcodecfs/cawsf_kind.h).
// Thread-safety: the kind is stateless; a built file's chunk function is
// called from decoder threads at once and touches only the immutable
// CawsfFile and the mutex-guarded component cache.
#include "wcodecfs/cawsf_kind.h"

#include <cstring>
#include <deque>
#include <mutex>

#include "wcodec/cawsf.h"
#include "wcodec/safetensors.h"
#include "wcodecfs/derived.h"

namespace wcodecfs {

namespace cw = wcodec::cawsf;

namespace {

constexpr uint64_t kBandBytes = 1 << 20;  // bytes of one computed chunk (a band of rows, or a stored range)
constexpr size_t kCachedComponents = 4;    // decoded tensors kept for the next bands

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

void CawsfKind::present(const StoreDir& dir, std::vector<Presentation>* out) const {
  for (const StoreEntry& e : dir.entries()) {
    if (e.type != S_IFREG || e.name.size() <= 6 || e.name.compare(e.name.size() - 6, 6, ".cawsf") != 0) continue;
    out->push_back(Presentation{e.name.substr(0, e.name.size() - 6) + ".safetensors", {e.name}, /*hides_inputs=*/false});
  }
}

Result<std::shared_ptr<const VirtualFile>> CawsfKind::build(const StoreDir& /*dir*/, const Presentation& /*p*/,
                                                            const BuildContext& ctx) const {
  if (ctx.inputs().size() != 1)
    return Status::Internal(ctx.presented_path() + ": a .cawsf presentation has one input");
  const StoredInput& in = ctx.inputs().front();
  auto opened = cw::CawsfFile::open_fd(in.file->fd(), in.path);
  if (!opened.ok()) return from_codec(opened.status());
  std::shared_ptr<const cw::CawsfFile> file = *opened;

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
      return Status(Code::kNotSupported, in.path + ": " + te.name + ": a row of " + std::to_string(row_bytes) +
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
                          ComputedSource::make(ctx.presented_path(), sizes, compute, ctx.source_id(0)));
    for (const wcodec::TensorInfo& ti : h.tensors) {
      if (ti.end == ti.begin) continue;
      extents.push_back(Extent{data_start + ti.begin, ti.end - ti.begin, DecodedExtent{src, ti.begin}});
      segments.push_back(data_start + ti.begin);
    }
  }
  return VirtualFile::make(ctx.presented_path(), std::move(extents), std::move(segments));
}

}  // namespace wcodecfs
