// fs/src/derived.cpp — see wcodecfs/derived.h.
#include "wcodecfs/derived.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <variant>

#include "wcodecfs/gguf_kind.h"
#include "wcodecfs/wcodec_kind.h"

namespace wcodecfs {
namespace {

// Copies stream positions [pos, pos + n) of `src` to out, decoding each
// chunk the range touches once.
Status read_source(const ChunkSource& src, uint64_t pos, uint64_t n, uint8_t* out) {
  if (n == 0) return Status::OK();
  if (pos < src.stream_begin() || pos > src.stream_end() || n > src.stream_end() - pos)
    return Status::Internal(src.name() + ": stream range [" + std::to_string(pos) + ", +" + std::to_string(n) +
                            ") outside the source's [" + std::to_string(src.stream_begin()) + ", " +
                            std::to_string(src.stream_end()) + ")");
  std::vector<uint8_t> buf;
  uint64_t done = 0;
  while (done < n) {
    const uint64_t at = pos + done;
    const size_t c = src.chunk_at(at);
    if (c == SIZE_MAX || c >= src.num_chunks())
      return Status::Internal(src.name() + ": no chunk holds stream position " + std::to_string(at));
    const uint64_t cbeg = src.chunk_offset(c);
    const uint32_t csize = src.chunk_size(c);
    if (at < cbeg || at - cbeg >= csize)
      return Status::Internal(src.name() + ": chunk " + std::to_string(c) + " does not hold stream position " +
                              std::to_string(at));
    const uint64_t skip = at - cbeg;
    const uint64_t take = std::min<uint64_t>(csize - skip, n - done);
    if (skip == 0 && take == csize) {
      WCFS_RETURN_IF_ERROR(src.decode(c, out + done));
    } else {
      buf.resize(csize);
      WCFS_RETURN_IF_ERROR(src.decode(c, buf.data()));
      std::memcpy(out + done, buf.data() + skip, static_cast<size_t>(take));
    }
    done += take;
  }
  return Status::OK();
}

}  // namespace

Status read_uncached(const VirtualFile& vf, uint64_t off, uint64_t n, uint8_t* out) {
  if (off > vf.size() || n > vf.size() - off)
    return Status::Invalid(vf.name() + ": read of [" + std::to_string(off) + ", +" + std::to_string(n) +
                           ") beyond the file's " + std::to_string(vf.size()) + " bytes");
  const std::vector<Extent>& extents = vf.extents();
  // First extent ending after off.
  auto it = std::upper_bound(extents.begin(), extents.end(), off,
                             [](uint64_t v, const Extent& e) { return v < e.offset + e.length; });
  uint64_t done = 0;
  for (; done < n && it != extents.end(); ++it) {
    const Extent& e = *it;
    const uint64_t at = off + done;
    const uint64_t skip = at - e.offset;
    const uint64_t take = std::min<uint64_t>(e.length - skip, n - done);
    uint8_t* dst = out + done;
    if (const auto* in = std::get_if<InlineExtent>(&e.what)) {
      std::memcpy(dst, in->bytes->data() + in->src_offset + skip, static_cast<size_t>(take));
    } else if (const auto* pt = std::get_if<PassthroughExtent>(&e.what)) {
      if (take > std::numeric_limits<size_t>::max())
        return Status::Invalid(vf.name() + ": read of " + std::to_string(take) + " bytes is too large");
      WCFS_ASSIGN_OR_RETURN(size_t got, pt->file->pread_full(pt->src_offset + skip, static_cast<size_t>(take), dst));
      if (got != take)
        return Status(Code::kStale, pt->file->name() + ": file ended at " + std::to_string(pt->src_offset + skip + got) +
                                        " while " + std::to_string(take) + " bytes at " +
                                        std::to_string(pt->src_offset + skip) + " were read (it changed)");
    } else if (const auto* dec = std::get_if<DecodedExtent>(&e.what)) {
      WCFS_RETURN_IF_ERROR(read_source(*dec->source, dec->src_offset + skip, take, dst));
    } else {
      std::memset(dst, 0, static_cast<size_t>(take));
    }
    done += take;
  }
  if (done != n) return Status::Internal(vf.name() + ": extents end before the file's size");
  return Status::OK();
}

Result<std::shared_ptr<const VirtualFile>> open_content(const StoredInput& in, uint64_t source_id) {
  // The stored file's own name (its last component) says what it holds.
  const std::string base = in.rel.substr(in.rel.rfind('/') + 1);
  std::unique_ptr<StoreKind> kind;
  std::string presented;
  if (std::string plain = GgufStagingCodec().plain_name(base); !plain.empty()) {
    kind = std::make_unique<GgufKind>();
    presented = std::move(plain);
  } else if (std::string plain2 = WcodecStagingCodec().plain_name(base); !plain2.empty()) {
    kind = std::make_unique<WcodecKind>();
    presented = std::move(plain2);
  }
  if (!kind) {
    if (in.st.st_size < 0) return Status::Internal(in.path + ": negative size");
    return make_passthrough_file(in.file, static_cast<uint64_t>(in.st.st_size));
  }
  const std::string presented_path = in.path.substr(0, in.path.rfind('/') + 1) + presented;
  const uint64_t id = source_id == 0 ? ChunkSource::new_id() : source_id;
  BuildContext ctx({in}, presented_path, [id](size_t) { return id; });
  // The .wcodec kinds build from their one input and never look at the
  // directory: a StoreDir without entries stands in for it.
  StoreDir none(-1, "", {});
  return kind->build(none, Presentation{presented, {in.rel}, true}, ctx);
}

Result<std::shared_ptr<const ComputedSource>> ComputedSource::make(std::string name, std::vector<uint32_t> chunk_sizes,
                                                                   Compute compute, uint64_t id, uint64_t begin) {
  if (chunk_sizes.empty()) return Status::Invalid(name + ": a computed source needs at least one chunk");
  if (!compute) return Status::Invalid(name + ": a computed source needs a function");
  std::vector<uint64_t> offsets;
  offsets.reserve(chunk_sizes.size() + 1);
  offsets.push_back(begin);
  for (size_t i = 0; i < chunk_sizes.size(); ++i) {
    const uint32_t s = chunk_sizes[i];
    if (s == 0 || s > kMaxChunk)
      return Status::Invalid(name + ": computed chunk " + std::to_string(i) + " has " + std::to_string(s) +
                             " bytes (1.." + std::to_string(kMaxChunk) + ")");
    if (offsets.back() > std::numeric_limits<uint64_t>::max() - s)
      return Status::Invalid(name + ": computed stream end overflows at chunk " + std::to_string(i));
    offsets.push_back(offsets.back() + s);
  }
  return std::shared_ptr<const ComputedSource>(new ComputedSource(std::move(name), std::move(offsets),
                                                                  std::move(compute), id));
}

Result<std::shared_ptr<const ComputedSource>> ComputedSource::make_uniform(std::string name, uint64_t total,
                                                                           uint32_t chunk, Compute compute,
                                                                           uint64_t id) {
  if (chunk == 0 || chunk > kMaxChunk)
    return Status::Invalid(name + ": computed chunk size " + std::to_string(chunk) + " (1.." +
                           std::to_string(kMaxChunk) + ")");
  if (total == 0) return Status::Invalid(name + ": a computed source of 0 bytes");
  std::vector<uint32_t> sizes;
  sizes.reserve(static_cast<size_t>((total + chunk - 1) / chunk));
  for (uint64_t at = 0; at < total; at += chunk) sizes.push_back(static_cast<uint32_t>(std::min<uint64_t>(chunk, total - at)));
  return make(std::move(name), std::move(sizes), std::move(compute), id);
}

size_t ComputedSource::chunk_at(uint64_t pos) const {
  if (pos < offsets_.front() || pos >= offsets_.back()) return SIZE_MAX;
  auto it = std::upper_bound(offsets_.begin(), offsets_.end(), pos);
  return static_cast<size_t>(it - offsets_.begin()) - 1;
}

Status ComputedSource::decode(size_t i, uint8_t* out) const {
  if (i >= num_chunks())
    return Status::Internal(name_ + ": computed chunk " + std::to_string(i) + " of " + std::to_string(num_chunks()));
  Status st = compute_(i, out);
  if (st.ok() || st.message().find(name_) != std::string::npos) return st;
  return Status(st.code(), name_ + ": computed chunk " + std::to_string(i) + ": " + st.message());
}

}  // namespace wcodecfs
