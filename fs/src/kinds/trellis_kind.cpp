// fs/src/kinds/trellis_kind.cpp — see wcodecfs/trellis_kind.h.
//
// The codec's Trellis reader works on a wcodec::TrellisDir; StoreTrellisDir
// is one over a StoreDir: the directory's own listing, subdirectories
// opened with O_NOFOLLOW, and files read through the build's opened inputs
// (so the bytes the plan is computed from are those of the descriptors the
// passthrough extents serve) or, for files that are not inputs, through
// StoreDir::open.
#include "wcodecfs/trellis_kind.h"

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <mutex>

#include "wcodec/trellis.h"

namespace wcodecfs {

namespace {

bool is_layer_dir(const StoreEntry& e) {
  if (e.type != S_IFDIR || e.name.size() < 10 || e.name.size() > 12 || e.name.rfind("layer_", 0) != 0) return false;
  for (size_t i = 6; i < e.name.size(); ++i)
    if (e.name[i] < '0' || e.name[i] > '9') return false;
  return true;
}

class StoreTrellisDir final : public wcodec::TrellisDir {
 public:
  StoreTrellisDir(const StoreDir& dir, const std::vector<StoredInput>* inputs) : dir_(dir) {
    if (inputs)
      for (const auto& in : *inputs) files_[in.rel] = in.file;
  }
  wcodec::Result<std::vector<wcodec::TrellisDirEntry>> list(const std::string& rel) const override {
    std::vector<wcodec::TrellisDirEntry> out;
    auto add = [&](const std::vector<StoreEntry>& es) {
      for (const auto& e : es)
        if (e.type == S_IFDIR || e.type == S_IFREG) out.push_back({e.name, e.type == S_IFDIR});
    };
    if (rel.empty()) {
      add(dir_.entries());
      return out;
    }
    if (rel.find('/') != std::string::npos || rel == "." || rel == "..")
      return wcodec::Status::Invalid(rel + ": not a directory name");
    const int fd = ::openat(dir_.fd(), rel.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return wcodec::Status::IOError(dir_.path_of(rel) + ": cannot open directory");
    auto sub = StoreDir::list(fd, dir_.path_of(rel));
    ::close(fd);
    if (!sub.ok()) return wcodec::Status::IOError(sub.status().message());
    add(sub->entries());
    return out;
  }
  wcodec::Result<uint64_t> size(const std::string& rel) const override {
    auto f = file(rel);
    if (!f.ok()) return f.status();
    auto s = (*f)->current_size();
    if (!s.ok()) return wcodec::Status::IOError(s.status().message());
    return *s;
  }
  wcodec::Status read(const std::string& rel, uint64_t off, uint64_t len, uint8_t* dst) const override {
    auto f = file(rel);
    if (!f.ok()) return f.status();
    auto n = (*f)->pread_full(off, len, dst);
    if (!n.ok()) return wcodec::Status::IOError(n.status().message());
    if (*n != len) return wcodec::Status::IOError(dir_.path_of(rel) + ": short read at " + std::to_string(off));
    return wcodec::Status::OK();
  }
  std::shared_ptr<const BackingFile> input(const std::string& rel) const {
    auto it = files_.find(rel);
    return it == files_.end() ? nullptr : it->second;
  }

 private:
  wcodec::Result<std::shared_ptr<const BackingFile>> file(const std::string& rel) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(rel);
    if (it != files_.end()) return it->second;
    auto in = dir_.open(rel);
    if (!in.ok()) return wcodec::Status::IOError(in.status().message());
    files_[rel] = in->file;
    return in->file;
  }

  const StoreDir& dir_;
  mutable std::mutex mu_;  // guards files_
  mutable std::map<std::string, std::shared_ptr<const BackingFile>> files_;
};

// The v2 files a plan depends on: every safetensors file read, every layer
// index, quantization_index.json.
std::vector<std::string> plan_inputs(const wcodec::TrellisStore& st, const StoreDir& dir) {
  std::vector<std::string> in = st.files;
  for (const auto& e : dir.entries())
    if (is_layer_dir(e)) in.push_back(e.name + "/index.json");
  if (const StoreEntry* q = dir.find("quantization_index.json"); q && q->type == S_IFREG)
    in.push_back("quantization_index.json");
  return in;
}

}  // namespace

void TrellisKind::present(const StoreDir& dir, std::vector<Presentation>* out) const {
  bool v2 = false;
  for (const auto& e : dir.entries()) v2 = v2 || is_layer_dir(e);
  if (!v2) return;
  StoreTrellisDir td(dir, nullptr);
  const wcodec::TrellisStore st = wcodec::trellis_read(td);
  if (st.layout != wcodec::TrellisLayout::kV2 || !st.problems.empty()) return;
  auto plan = wcodec::trellis_plan_v3(st, wcodec::kTrellisDefaultShard);
  if (!plan.ok()) return;
  const std::vector<std::string> inputs = plan_inputs(st, dir);
  for (const auto& f : *plan) {
    bool other = false;
    for (const auto& o : st.other_files) other = other || o == f.name;
    if (!other) out->push_back(Presentation{f.name, inputs, /*hides_inputs=*/true});
  }
}

Result<std::shared_ptr<const VirtualFile>> TrellisKind::build(const StoreDir& dir, const Presentation& p,
                                                              const BuildContext& ctx) const {
  StoreTrellisDir td(dir, &ctx.inputs());
  const wcodec::TrellisStore st = wcodec::trellis_read(td);
  if (st.layout != wcodec::TrellisLayout::kV2 || !st.problems.empty())
    return Status::Corruption(ctx.presented_path() + ": the Trellis v2 store changed: " +
                              (st.problems.empty() ? std::string("no longer v2") : st.problems[0].to_string()));
  auto plan = wcodec::trellis_plan_v3(st, wcodec::kTrellisDefaultShard);
  if (!plan.ok()) return from_codec(plan.status());
  for (const auto& f : *plan) {
    if (f.name != p.name) continue;
    std::vector<Extent> extents;
    uint64_t at = 0;
    for (const auto& piece : f.pieces) {
      if (piece.bytes) {
        extents.push_back(Extent{at, piece.length, InlineExtent{piece.bytes, 0}});
      } else {
        auto file = td.input(piece.file);
        if (!file) return Status::Internal(ctx.presented_path() + ": " + piece.file + " is not an input");
        extents.push_back(Extent{at, piece.length, PassthroughExtent{file, piece.offset}});
      }
      at += piece.length;
    }
    return VirtualFile::make(ctx.presented_path(), std::move(extents), f.segments);
  }
  return Status::NotFound(ctx.presented_path() + ": the Trellis v2 store no longer has this file");
}

}  // namespace wcodecfs
