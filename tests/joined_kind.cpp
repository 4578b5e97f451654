// tests/joined_kind.cpp — see joined_kind.h.
#include "joined_kind.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

namespace joinedkind {
namespace {

using wcodecfs::Code;
using wcodecfs::Result;
using wcodecfs::Status;

constexpr std::string_view kLeft = ".left";
constexpr std::string_view kRight = ".right";

std::string header_of(uint64_t n, uint64_t m) {
  return "JOINED left=" + std::to_string(n) + " right=" + std::to_string(m) + "\n";
}

uint64_t aligned(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

class JoinedSource final : public wcodecfs::ChunkSource {
 public:
  JoinedSource(std::vector<wcodecfs::StoredInput> in, uint64_t begin, std::string name, uint64_t id)
      : ChunkSource(id), in_(std::move(in)), begin_(begin), name_(std::move(name)) {
    n_ = static_cast<uint64_t>(in_[0].st.st_size);
    total_ = n_ + static_cast<uint64_t>(in_[1].st.st_size);
  }
  size_t num_chunks() const override { return static_cast<size_t>((total_ + kChunk - 1) / kChunk); }
  uint64_t chunk_offset(size_t i) const override { return begin_ + i * kChunk; }
  uint32_t chunk_size(size_t i) const override {
    return static_cast<uint32_t>(std::min<uint64_t>(kChunk, total_ - i * kChunk));
  }
  uint64_t stream_begin() const override { return begin_; }
  uint64_t stream_end() const override { return begin_ + total_; }
  size_t chunk_at(uint64_t pos) const override {
    if (pos < begin_ || pos >= begin_ + total_) return SIZE_MAX;
    return static_cast<size_t>((pos - begin_) / kChunk);
  }
  const std::string& name() const override { return name_; }

  Status decode(size_t i, uint8_t* out) const override {
    if (i >= num_chunks()) return Status::Internal(name_ + ": chunk " + std::to_string(i) + " out of range");
    const uint64_t a = i * kChunk, b = a + chunk_size(i);
    // Both parts of the chunk: [a, b) of the stream, split at n_.
    for (int side = 0; side < 2; ++side) {
      const uint64_t lo = side == 0 ? a : std::max(a, n_), hi = side == 0 ? std::min(b, n_) : b;
      if (lo >= hi) continue;
      const wcodecfs::StoredInput& in = in_[static_cast<size_t>(side)];
      struct stat now;
      if (::fstat(in.file->fd(), &now) != 0 || now.st_size != in.st.st_size ||
          now.st_mtim.tv_sec != in.st.st_mtim.tv_sec || now.st_mtim.tv_nsec != in.st.st_mtim.tv_nsec)
        return Status(Code::kStale, in.path + " changed since " + name_ + " was built (chunk " + std::to_string(i) + ")");
      const uint64_t off = side == 0 ? lo : lo - n_;
      auto got = in.file->pread_full(off, static_cast<size_t>(hi - lo), out + (lo - a));
      if (!got.ok()) return got.status();
      if (*got != hi - lo)
        return Status(Code::kStale, in.path + " is shorter than when " + name_ + " was built (chunk " +
                                        std::to_string(i) + ")");
      const uint8_t mask = side == 0 ? kLeftMask : kRightMask;
      for (uint64_t k = lo; k < hi; ++k) out[k - a] ^= mask;
    }
    return Status::OK();
  }

 private:
  std::vector<wcodecfs::StoredInput> in_;
  uint64_t begin_;
  std::string name_;
  uint64_t n_ = 0, total_ = 0;
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

void JoinedKind::present(const wcodecfs::StoreDir& dir, std::vector<wcodecfs::Presentation>* out) const {
  for (const wcodecfs::StoreEntry& e : dir.entries()) {
    if (e.type != S_IFREG || !ends_with(e.name, kLeft)) continue;
    const std::string stem = e.name.substr(0, e.name.size() - kLeft.size());
    const wcodecfs::StoreEntry* right = dir.find(stem + std::string(kRight));
    if (!right || right->type != S_IFREG) continue;
    out->push_back(wcodecfs::Presentation{stem + ".joined", {e.name, right->name}, /*hides_inputs=*/false});
  }
}

Result<std::shared_ptr<const wcodecfs::VirtualFile>> JoinedKind::build(const wcodecfs::StoreDir& dir,
                                                                       const wcodecfs::Presentation& p,
                                                                       const wcodecfs::BuildContext& ctx) const {
  (void)dir;
  (void)p;
  if (ctx.inputs().size() != 2) return Status::Internal(ctx.presented_path() + ": needs two inputs");
  const uint64_t n = static_cast<uint64_t>(ctx.inputs()[0].st.st_size);
  const uint64_t m = static_cast<uint64_t>(ctx.inputs()[1].st.st_size);
  const std::string h = header_of(n, m);
  const uint64_t start = aligned(h.size());
  std::vector<wcodecfs::Extent> extents;
  extents.push_back({0, h.size(),
                     wcodecfs::InlineExtent{std::make_shared<const std::vector<uint8_t>>(h.begin(), h.end()), 0}});
  if (start > h.size()) extents.push_back({h.size(), start - h.size(), wcodecfs::ZeroExtent{}});
  if (n + m > 0) {
    auto src = std::make_shared<JoinedSource>(ctx.inputs(), start, ctx.inputs()[0].path, ctx.source_id(0));
    extents.push_back({start, n + m, wcodecfs::DecodedExtent{std::move(src), start}});
  }
  return wcodecfs::VirtualFile::make(ctx.presented_path(), std::move(extents));
}

std::vector<uint8_t> expected_joined(const std::vector<uint8_t>& left, const std::vector<uint8_t>& right) {
  const std::string h = header_of(left.size(), right.size());
  std::vector<uint8_t> out(h.begin(), h.end());
  out.resize(aligned(h.size()), 0);
  for (uint8_t b : left) out.push_back(b ^ kLeftMask);
  for (uint8_t b : right) out.push_back(b ^ kRightMask);
  return out;
}

}  // namespace joinedkind
