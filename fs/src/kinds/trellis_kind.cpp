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

#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <type_traits>
#include <variant>

#include "wcodec/trellis.h"
#include "wcodecfs/derived.h"
#include "wcodecfs/fs_log.h"
#include "wcodecfs/hf_gguf.h"
#include "wcodecfs/hf_gguf_kind.h"

namespace wcodecfs {

namespace {

constexpr const char* kDenseName = wcodec::kTrellisDenseName;
constexpr const char* kDenseGgufName = "model.dense.gguf";
constexpr uint64_t kMaxSmallFile = 64u << 20;  // config and tokenizer files read for the GGUF form

Result<std::string> read_small(const StoredInput& in) { return read_small_input(in, kMaxSmallFile, "a GGUF form"); }

// The small files the GGUF form reads besides config.json and
// tokenizer.model, when present (the converter reads them too).
const char* const kGgufOptional[] = {"tokenizer_config.json", "added_tokens.json", "tokenizer.json",
                                     "chat_template.jinja"};
// Files that make the converter take paths the GGUF view does not follow.
const char* const kGgufRefused[] = {"tekken.json", "chat_template.json", "additional_chat_templates", "params.json"};

bool is_layer_dir(const StoreEntry& e) { return e.type == S_IFDIR && wcodec::is_trellis_layer_dir_name(e.name); }

// A stored file as the Trellis reader sees it: a plain file, or X.wcodec
// read as the X.safetensors it holds (its content, wcodecfs/derived.h).
struct TrellisFile {
  std::string stored;                           // its stored relative path
  std::shared_ptr<const BackingFile> plain;     // set for a plain file
  std::shared_ptr<const VirtualFile> content;   // set for X.wcodec
};

class StoreTrellisDir final : public wcodec::TrellisDir {
 public:
  // `ctx`: a build's context (its opened inputs are read, and the contents
  // of its .wcodec inputs keyed by its source ids 1 + input index); null in
  // present() (files opened through the StoreDir).
  StoreTrellisDir(const StoreDir& dir, const BuildContext* ctx) : dir_(dir), ctx_(ctx) {}

  wcodec::Result<std::vector<wcodec::TrellisDirEntry>> list(const std::string& rel) const override {
    std::vector<StoreEntry> es;
    if (rel.empty()) {
      es = dir_.entries();
    } else {
      if (rel.find('/') != std::string::npos || rel == "." || rel == "..")
        return wcodec::Status::Invalid(rel + ": not a directory name");
      const int fd = ::openat(dir_.fd(), rel.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) return wcodec::Status::IOError(dir_.path_of(rel) + ": cannot open directory");
      auto sub = StoreDir::list(fd, dir_.path_of(rel));
      ::close(fd);
      if (!sub.ok()) return wcodec::Status::IOError(sub.status().message());
      es = sub->entries();
    }
    std::map<std::string, bool> out;  // name -> is_dir
    for (const auto& e : es)
      if (e.type == S_IFDIR || e.type == S_IFREG) out.emplace(e.name, e.type == S_IFDIR);
    // X.wcodec is read as X.safetensors (unless a plain X.safetensors is there).
    for (const auto& e : es) {
      if (e.type != S_IFREG || e.name.size() <= 7 || e.name.compare(e.name.size() - 7, 7, ".wcodec") != 0) continue;
      const std::string plain = e.name.substr(0, e.name.size() - 7) + ".safetensors";
      if (e.name.find(".gguf.") != std::string::npos || out.count(plain)) continue;
      out.erase(e.name);
      out.emplace(plain, false);
      std::lock_guard<std::mutex> lock(mu_);
      alias_[rel.empty() ? plain : rel + "/" + plain] = rel.empty() ? e.name : rel + "/" + e.name;
    }
    std::vector<wcodec::TrellisDirEntry> v;
    for (const auto& [n, d] : out) v.push_back({n, d});
    return v;
  }
  wcodec::Result<uint64_t> size(const std::string& rel) const override {
    auto f = file(rel);
    if (!f.ok()) return wcodec::Status::IOError(f.status().message());
    if (f->content) return f->content->size();
    auto s = f->plain->current_size();
    if (!s.ok()) return wcodec::Status::IOError(s.status().message());
    return *s;
  }
  wcodec::Status read(const std::string& rel, uint64_t off, uint64_t len, uint8_t* dst) const override {
    auto f = file(rel);
    if (!f.ok()) return wcodec::Status::IOError(f.status().message());
    if (f->content) {
      const Status s = read_uncached(*f->content, off, len, dst);
      return s.ok() ? wcodec::Status::OK() : wcodec::Status::IOError(s.message());
    }
    auto n = f->plain->pread_full(off, len, dst);
    if (!n.ok()) return wcodec::Status::IOError(n.status().message());
    if (*n != len) return wcodec::Status::IOError(dir_.path_of(rel) + ": short read at " + std::to_string(off));
    return wcodec::Status::OK();
  }
  // The file `rel` names (as the reader sees it), opened.
  Result<TrellisFile> file(const std::string& rel) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(rel);
    if (it != files_.end()) return it->second;
    auto a = alias_.find(rel);
    const std::string stored = a == alias_.end() ? rel : a->second;
    TrellisFile f;
    f.stored = stored;
    std::optional<StoredInput> in;
    size_t index = 0;
    if (ctx_) {
      for (; index < ctx_->inputs().size(); ++index)
        if (ctx_->inputs()[index].rel == stored) {
          in = ctx_->inputs()[index];
          break;
        }
    }
    if (!in) {
      WCFS_ASSIGN_OR_RETURN(StoredInput opened, dir_.open(stored));
      in = std::move(opened);
    }
    if (stored != rel) {
      WCFS_ASSIGN_OR_RETURN(f.content, open_content(*in, ctx_ ? ctx_->source_id(1 + index) : 0));
    } else {
      f.plain = in->file;
    }
    files_[rel] = f;
    return f;
  }
  // The reader's names of .wcodec files (filled by list()), to hand to
  // another StoreTrellisDir of the same store.
  std::map<std::string, std::string> aliases() const {
    std::lock_guard<std::mutex> lock(mu_);
    return alias_;
  }
  void set_aliases(std::map<std::string, std::string> a) {
    std::lock_guard<std::mutex> lock(mu_);
    alias_ = std::move(a);
  }
  std::string stored_name(const std::string& rel) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto a = alias_.find(rel);
    return a == alias_.end() ? rel : a->second;
  }

 private:
  const StoreDir& dir_;
  const BuildContext* ctx_;
  mutable std::mutex mu_;  // guards alias_ and files_
  mutable std::map<std::string, std::string> alias_;  // "a/X.safetensors" -> "a/X.wcodec"
  mutable std::map<std::string, TrellisFile> files_;
};

// Appends the extents of [off, off + len) of `vf` at position `at`.
Status append_slice(const VirtualFile& vf, uint64_t off, uint64_t len, uint64_t at, std::vector<Extent>* out) {
  if (off > vf.size() || len > vf.size() - off)
    return Status::Corruption(vf.name() + ": range [" + std::to_string(off) + ", +" + std::to_string(len) +
                              ") beyond its " + std::to_string(vf.size()) + " bytes");
  for (const Extent& e : vf.extents()) {
    const uint64_t b = std::max(off, e.offset), en = std::min(off + len, e.offset + e.length);
    if (b >= en) continue;
    Extent x{at + (b - off), en - b, e.what};
    const uint64_t skip = b - e.offset;
    std::visit(
        [skip](auto& w) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(w)>, ZeroExtent>) w.src_offset += skip;
        },
        x.what);
    out->push_back(std::move(x));
  }
  return Status::OK();
}

// The v2 files a plan depends on: every safetensors file read, every layer
// index, quantization_index.json.
std::vector<std::string> plan_inputs(const wcodec::TrellisStore& st, const StoreDir& dir, const StoreTrellisDir& td) {
  std::vector<std::string> in;
  for (const auto& f : st.files) in.push_back(td.stored_name(f));
  for (const auto& e : dir.entries())
    if (is_layer_dir(e)) in.push_back(e.name + "/index.json");
  for (const char* f : {"quantization_index.json", "quantization_config.json", "model.safetensors.index.json"})
    if (const StoreEntry* q = dir.find(f); q && q->type == S_IFREG) in.push_back(f);
  return in;
}

// What a listing and every build read and compute from one store: its
// reading (trellis_read), the presentations' inputs and, for a v2 store, the
// v3 plan. A listing and the build of each presented file would otherwise
// each read and parse every index and safetensors header again (after the
// kernel drops its caches, from the disk). A snapshot is used while the
// directory's listing is the same and every file and layer directory it was
// read from has the same identity (device, inode, size, mtime, ctime).
struct Ident {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  mode_t type = 0;
  bool operator==(const Ident& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns &&
           type == o.type;
  }
};

Ident ident_of(const struct stat& st) {
  return Ident{st.st_dev,
               st.st_ino,
               st.st_size,
               int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec,
               int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec,
               st.st_mode & S_IFMT};
}

struct Snapshot {
  std::vector<std::pair<std::string, mode_t>> listing;  // the directory's entries when it was read
  std::vector<std::pair<std::string, Ident>> ids;       // layer directories, other regular files, the inputs
  wcodec::TrellisStore st;
  std::map<std::string, std::string> aliases;
  std::vector<std::string> inputs;                      // plan_inputs()
  std::vector<wcodec::TrellisOutFile> plan;             // v2 stores
};

std::vector<std::pair<std::string, mode_t>> listing_of(const StoreDir& dir) {
  std::vector<std::pair<std::string, mode_t>> v;
  for (const auto& e : dir.entries()) v.emplace_back(e.name, e.type);
  return v;
}

// The identity of `rel` now: an opened input's (fstat at open, before
// anything was read through it) when `ctx` has it, else an lstat.
std::optional<Ident> current_ident(const StoreDir& dir, const BuildContext* ctx, const std::string& rel) {
  if (ctx)
    for (const StoredInput& in : ctx->inputs())
      if (in.rel == rel) return ident_of(in.st);
  auto st = dir.stat(rel);
  if (!st.ok()) return std::nullopt;
  return ident_of(*st);
}

// Snapshots by store directory (device and inode of the directory), at most
// kMaxSnapshots (then all are dropped). Thread-safe.
class SnapshotCache {
 public:
  static constexpr size_t kMaxSnapshots = 256;
  std::shared_ptr<const Snapshot> get(const StoreDir& dir, const BuildContext* ctx) {
    const auto key = key_of(dir);
    if (!key) return nullptr;
    std::shared_ptr<const Snapshot> s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = map_.find(*key);
      if (it == map_.end()) return nullptr;
      s = it->second;
    }
    if (s->listing != listing_of(dir)) return nullptr;
    for (const auto& [rel, id] : s->ids) {
      auto now = current_ident(dir, ctx, rel);
      if (!now || !(*now == id)) return nullptr;
    }
    return s;
  }
  void put(const StoreDir& dir, std::shared_ptr<const Snapshot> s) {
    const auto key = key_of(dir);
    if (!key) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (map_.size() >= kMaxSnapshots) map_.clear();
    map_[*key] = std::move(s);
  }

 private:
  static std::optional<std::pair<dev_t, ino_t>> key_of(const StoreDir& dir) {
    struct stat st;
    if (::fstat(dir.fd(), &st) != 0) return std::nullopt;
    return std::make_pair(st.st_dev, st.st_ino);
  }
  std::mutex mu_;  // guards map_
  std::map<std::pair<dev_t, ino_t>, std::shared_ptr<const Snapshot>> map_;
};

SnapshotCache& snapshots() {
  static SnapshotCache* cache = new SnapshotCache();  // never destroyed: kinds may outlive static destruction order
  return *cache;
}

// Reads the store through `td` into a snapshot whose identities are taken
// before the read (layer directories, the other regular files) or at open
// (`ctx`'s inputs), so that a snapshot never claims newer identities than
// the bytes it was made from. Null when the store is not valid.
// *cacheable says whether it may be kept (a listing has no opened inputs:
// the files below the layer directories have no identity from before).
std::shared_ptr<const Snapshot> read_snapshot(const StoreDir& dir, const BuildContext* ctx, StoreTrellisDir& td,
                                              wcodec::TrellisStore* invalid, bool* cacheable) {
  *cacheable = false;
  auto snap = std::make_shared<Snapshot>();
  snap->listing = listing_of(dir);
  std::vector<std::pair<std::string, Ident>> before;
  for (const auto& e : dir.entries()) {
    if (!is_layer_dir(e) && e.type != S_IFREG) continue;
    auto id = current_ident(dir, ctx, e.name);
    if (id) before.emplace_back(e.name, *id);
  }
  snap->st = wcodec::trellis_read(td);
  if (snap->st.layout == wcodec::TrellisLayout::kNone || !snap->st.problems.empty()) {
    if (invalid) *invalid = std::move(snap->st);
    return nullptr;
  }
  snap->aliases = td.aliases();
  snap->inputs = plan_inputs(snap->st, dir, td);
  if (snap->st.layout == wcodec::TrellisLayout::kV2) {
    auto plan = wcodec::trellis_plan_v3(snap->st, wcodec::kTrellisDefaultShard);
    if (!plan.ok()) return nullptr;
    snap->plan = std::move(plan).value();
  }
  snap->ids = std::move(before);
  bool complete = true;  // every input below a layer directory has its identity from before the read
  for (const std::string& in : snap->inputs) {
    if (in.find('/') == std::string::npos) continue;  // top-level: in `before`
    std::optional<Ident> id;
    if (ctx)
      for (const StoredInput& x : ctx->inputs())
        if (x.rel == in) id = ident_of(x.st);
    if (!id) {
      complete = false;
      break;
    }
    snap->ids.emplace_back(in, *id);
  }
  *cacheable = complete;
  return snap;
}

// float -> IEEE half, round to nearest even; false when not finite or out of range.
bool to_f16(float f, uint16_t* h) {
  if (!std::isfinite(f)) return false;
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax >= 0x477FF000u) return false;  // rounds to 65520 or more: beyond F16
  if (ax < 0x38800000u) {               // below 2^-14: subnormal or zero
    const float a = std::fabs(f) * 16777216.0f;  // units of 2^-24 (exact scaling)
    *h = static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a)));
    return true;
  }
  uint32_t r = ax - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0xFFFu + ((r >> 13) & 1u);  // round to nearest even at bit 13
  *h = static_cast<uint16_t>(sign | (r >> 13));
  return true;
}

// One computed chunk of the dense view: rows [r0, r1) of weight w.
struct DenseJob {
  size_t w;
  uint64_t r0, r1;
};

// The dense view (docs/trellis.md §7): every quantized weight dequantized
// to F16 in a ComputedSource, every base tensor a passthrough range.
// `name`: its store-relative path (messages); `id`: the cache id of its
// computed source.
Result<std::shared_ptr<const VirtualFile>> build_dense(const wcodec::TrellisStore& st, const StoreTrellisDir& td,
                                                       const std::string& name, uint64_t id) {
  std::map<std::string, std::shared_ptr<const VirtualFile>> content;  // by the reader's names
  for (const auto& f : st.files) {
    WCFS_ASSIGN_OR_RETURN(TrellisFile tf, td.file(f));
    if (tf.content) {
      content[f] = tf.content;
    } else {
      WCFS_ASSIGN_OR_RETURN(uint64_t size, tf.plain->current_size());
      WCFS_ASSIGN_OR_RETURN(content[f], make_passthrough_file(tf.plain, size));
    }
  }
  std::vector<int> weight_of(st.tensors.size(), -1);  // indices tensor -> weight; other parts -> -2
  for (size_t w = 0; w < st.weights.size(); ++w)
    for (int p = 0; p < 4; ++p) weight_of[st.weights[w].parts[p]] = p == 0 ? static_cast<int>(w) : -2;

  wcodec::SafetensorsHeader h;
  h.metadata = std::map<std::string, std::string>{{"format", "pt"}};
  struct Item {
    size_t tensor;
    int weight;
  };
  std::vector<Item> items;
  uint64_t at = 0;
  for (size_t k = 0; k < st.tensors.size(); ++k) {
    if (weight_of[k] == -2) continue;
    wcodec::TensorInfo ti;
    if (weight_of[k] >= 0) {
      const auto& w = st.weights[static_cast<size_t>(weight_of[k])];
      ti.name = w.name;
      ti.dtype = wcodec::DType::kF16;
      ti.shape = w.weight_shape.empty() ? std::vector<uint64_t>{w.out, w.in} : w.weight_shape;
      ti.end = at + w.out * w.in * 2;
    } else {
      ti = st.tensors[k].info;
      ti.name = st.tensors[k].v3_name;
      ti.end = at + st.tensors[k].info.nbytes();
    }
    ti.begin = at;
    at = ti.end;
    h.tensors.push_back(ti);
    items.push_back({k, weight_of[k]});
  }
  auto header = std::make_shared<const std::vector<uint8_t>>(wcodec::write_safetensors_header(h));

  // Chunks: about 1 MiB of F16 rows, a multiple of 16 rows each.
  std::vector<DenseJob> jobs;
  std::vector<uint32_t> sizes;
  for (const auto& it : items) {
    if (it.weight < 0) continue;
    const auto& w = st.weights[static_cast<size_t>(it.weight)];
    if (16 * w.in * 2 > ComputedSource::kMaxChunk)
      return Status::Corruption(name + ": weight " + w.name + ": rows of " + std::to_string(w.in) +
                                " inputs are too wide for the dense view");
    const uint64_t rows = std::max<uint64_t>(16, ((uint64_t{1} << 20) / (w.in * 2)) / 16 * 16);
    for (uint64_t r = 0; r < w.out; r += rows) {
      jobs.push_back({static_cast<size_t>(it.weight), r, std::min(w.out, r + rows)});
      sizes.push_back(static_cast<uint32_t>((jobs.back().r1 - r) * w.in * 2));
    }
  }
  std::shared_ptr<const ComputedSource> source;
  if (!jobs.empty()) {
    const bool hadamard = st.hadamard;
    auto weights = std::make_shared<const std::vector<wcodec::TrellisWeightInfo>>(st.weights);
    auto tensors = std::make_shared<const std::vector<wcodec::TrellisTensor>>(st.tensors);
    auto files = std::make_shared<const decltype(content)>(content);
    auto compute = [name, hadamard, weights, tensors, files, jobs](size_t chunk, uint8_t* out) -> Status {
      const DenseJob& j = jobs[chunk];
      const auto& w = (*weights)[j.w];
      auto rd = [&](int part, uint64_t off, uint64_t n, void* dst) -> Status {
        const auto& t = (*tensors)[w.parts[part]];
        auto f = files->find(t.file);
        if (f == files->end()) return Status::Internal(name + ": " + t.file + " is not an input");
        return read_uncached(*f->second, t.offset + off, n, static_cast<uint8_t*>(dst));
      };
      const uint64_t tiles_in = (w.in + 15) / 16, tile_bytes = 32u * w.bits;
      const uint64_t t0 = j.r0 / 16, t1 = (j.r1 + 15) / 16;
      uint8_t hb = 0;
      WCFS_RETURN_IF_ERROR(rd(0, 0, 1, &hb));
      if (hb != w.bits)
        return Status::Corruption(name + ": weight " + w.name + ": header byte " + std::to_string(hb) +
                                  " != bits " + std::to_string(w.bits));
      std::vector<uint8_t> stream((t1 - t0) * tiles_in * tile_bytes);
      WCFS_RETURN_IF_ERROR(rd(0, 1 + t0 * tiles_in * tile_bytes, stream.size(), stream.data()));
      const uint64_t rows = j.r1 - j.r0, groups = (w.in + 127) / 128;
      std::vector<float> scales(groups * rows), su(w.in), sv(w.out), vals(rows * w.in);
      for (uint64_t g = 0; g < groups; ++g)
        WCFS_RETURN_IF_ERROR(rd(1, 4 * (g * w.out + j.r0), 4 * rows, scales.data() + g * rows));
      WCFS_RETURN_IF_ERROR(rd(2, 0, 4 * w.in, su.data()));
      WCFS_RETURN_IF_ERROR(rd(3, 0, 4 * w.out, sv.data()));
      WCFS_RETURN_IF_ERROR(from_codec(wcodec::trellis_dequantize_part(stream.data(), stream.size(), scales.data(),
                                                                      su.data(), sv.data(), w.out, w.in, w.bits,
                                                                      hadamard, j.r0, j.r1, vals.data())));
      for (size_t k = 0; k < vals.size(); ++k) {
        uint16_t v;
        if (!to_f16(vals[k], &v))
          return Status::Corruption(name + ": weight " + w.name + ": value " + std::to_string(vals[k]) +
                                    " at row " + std::to_string(j.r0 + k / w.in) + " is not representable in F16");
        out[2 * k] = static_cast<uint8_t>(v);
        out[2 * k + 1] = static_cast<uint8_t>(v >> 8);
      }
      return Status::OK();
    };
    WCFS_ASSIGN_OR_RETURN(source, ComputedSource::make(name, sizes, compute, id));
  }

  std::vector<Extent> extents;
  std::vector<uint64_t> segments;
  extents.push_back(Extent{0, header->size(), InlineExtent{header, 0}});
  uint64_t pos = header->size(), stream = 0;
  for (size_t n = 0; n < items.size(); ++n) {
    const uint64_t len = h.tensors[n].nbytes();
    if (len == 0) continue;
    segments.push_back(pos);
    if (items[n].weight >= 0) {
      extents.push_back(Extent{pos, len, DecodedExtent{source, stream}});
      stream += len;
    } else {
      const auto& t = st.tensors[items[n].tensor];
      WCFS_RETURN_IF_ERROR(append_slice(*content.at(t.file), t.offset, len, pos, &extents));
    }
    pos += len;
  }
  return VirtualFile::make(name, std::move(extents), std::move(segments));
}

// The small files the GGUF form of the dense view is made from (config.json,
// tokenizer.model, the optional tokenizer files present), in input order;
// NotSupported / Corruption naming the file and the value when the store's
// model has no GGUF form.
Result<std::vector<std::string>> gguf_small_files(const StoreDir& dir) {
  const std::string where = dir.path().empty() ? std::string() : dir.path() + "/";
  if (!dir.is_regular("config.json")) return Status(Code::kNotSupported, where + "config.json: missing");
  WCFS_ASSIGN_OR_RETURN(StoredInput cfg_in, dir.open("config.json"));
  WCFS_ASSIGN_OR_RETURN(std::string cfg, read_small(cfg_in));
  WCFS_RETURN_IF_ERROR(check_hf_config(cfg, where + "config.json"));
  if (!dir.is_regular("tokenizer.model"))
    return Status(Code::kNotSupported, where + "tokenizer.model: missing (the GGUF form needs a SentencePiece tokenizer)");
  for (const char* refused : kGgufRefused)
    if (dir.find(refused))
      return Status(Code::kNotSupported, where + refused + ": present (not supported by the GGUF view)");
  std::vector<std::string> in{"config.json", "tokenizer.model"};
  for (const char* opt : kGgufOptional)
    if (dir.is_regular(opt)) in.push_back(opt);
  return in;
}

// The GGUF form of the dense view (docs/trellis.md §7): the GGUF view of
// the directory's small files with `dense` as its one weight file.
Result<std::shared_ptr<const VirtualFile>> build_dense_gguf(const StoreDir& dir, const BuildContext& ctx,
                                                            std::shared_ptr<const VirtualFile> dense) {
  HfDirFiles files;
  files.where = dir.path().empty() ? std::string() : dir.path() + "/";
  files.dir_name = dir.path().empty() ? std::string("model.dense") : dir.path().substr(dir.path().rfind('/') + 1);
  bool have_config = false, have_tok = false;
  for (const StoredInput& in : ctx.inputs()) {
    std::optional<std::string>* opt = nullptr;
    if (in.rel == "config.json") {
      WCFS_ASSIGN_OR_RETURN(files.config, read_small(in));
      have_config = true;
    } else if (in.rel == "tokenizer.model") {
      WCFS_ASSIGN_OR_RETURN(files.tokenizer_model, read_small(in));
      have_tok = true;
    } else if (in.rel == "tokenizer_config.json") {
      opt = &files.tokenizer_config;
    } else if (in.rel == "added_tokens.json") {
      opt = &files.added_tokens;
    } else if (in.rel == "tokenizer.json") {
      opt = &files.tokenizer_json;
    } else if (in.rel == "chat_template.jinja") {
      opt = &files.chat_template;
    }
    if (opt) {
      WCFS_ASSIGN_OR_RETURN(std::string text, read_small(in));
      *opt = std::move(text);
    }
  }
  if (!have_config || !have_tok)
    return Status::Internal(ctx.presented_path() + ": the presentation lacks config.json or tokenizer.model");
  const size_t n = ctx.inputs().size();
  return build_hf_gguf_view(files, {HfWeightFile{dir.path_of(kDenseName), std::move(dense)}}, std::nullopt, "",
                            ctx.presented_path(), [&ctx, n](size_t i) { return ctx.source_id(1 + n + i); });
}

// Appends the GGUF form's presentation, made of `inputs` (the dense view's)
// and the small files, or logs once why the store has none.
void present_gguf(const StoreDir& dir, std::vector<std::string> inputs, std::vector<Presentation>* out) {
  auto small = gguf_small_files(dir);
  if (!small.ok()) {
    const std::string d = dir.path().empty() ? "." : dir.path();
    log_once(LogLevel::kInfo, "trellis-gguf:" + dir.path() + ":" + small.status().message(),
             "no " + std::string(kDenseGgufName) + " in " + d + ": " + small.status().message());
    return;
  }
  for (std::string& f : *small) inputs.push_back(std::move(f));
  out->push_back(Presentation{kDenseGgufName, std::move(inputs), /*hides_inputs=*/false});
}

// A listing's reading of the store in `dir` (`v2`: it has layer
// directories), or null when it is not a valid store.
std::shared_ptr<const Snapshot> read_listing(const StoreDir& dir, bool v2) {
  StoreTrellisDir td(dir, nullptr);
  if (!v2) {  // an ordinary sharded checkpoint is not read any further
    auto size = td.size("model.safetensors.index.json");
    if (!size.ok() || *size > (64u << 20)) return nullptr;
    std::string text(*size, '\0');
    if (!td.read("model.safetensors.index.json", 0, *size, reinterpret_cast<uint8_t*>(text.data())).ok() ||
        !wcodec::is_trellis_v3_index(text))
      return nullptr;
  }
  bool cacheable = false;
  auto snap = read_snapshot(dir, nullptr, td, nullptr, &cacheable);
  if (snap && cacheable) snapshots().put(dir, snap);  // a v3 store: every input is top-level
  return snap;
}

}  // namespace

void TrellisKind::present(const StoreDir& dir, std::vector<Presentation>* out) const {
  bool v2 = false, v3 = false;
  for (const auto& e : dir.entries()) {
    v2 = v2 || is_layer_dir(e);
    v3 = v3 || (e.type == S_IFREG && e.name == "model.safetensors.index.json");
  }
  if (!v2 && !v3) return;
  std::shared_ptr<const Snapshot> snap = snapshots().get(dir, nullptr);
  if (!snap) snap = read_listing(dir, v2);
  if (!snap) return;
  const wcodec::TrellisStore& st = snap->st;
  const std::vector<std::string>& inputs = snap->inputs;
  if (st.layout == wcodec::TrellisLayout::kV3) {
    out->push_back(Presentation{kDenseName, inputs, /*hides_inputs=*/false});
    present_gguf(dir, inputs, out);
    return;
  }
  for (const auto& f : snap->plan) {
    bool other = false;
    for (const auto& o : st.other_files) other = other || o == f.name;
    if (!other) out->push_back(Presentation{f.name, inputs, /*hides_inputs=*/true});
  }
  out->push_back(Presentation{kDenseName, inputs, /*hides_inputs=*/true});
  present_gguf(dir, inputs, out);
}

Result<std::shared_ptr<const VirtualFile>> TrellisKind::build(const StoreDir& dir, const Presentation& p,
                                                              const BuildContext& ctx) const {
  StoreTrellisDir td(dir, &ctx);
  std::shared_ptr<const Snapshot> snap = snapshots().get(dir, &ctx);
  if (snap) {
    td.set_aliases(snap->aliases);
  } else {
    wcodec::TrellisStore invalid;
    bool cacheable = false;
    snap = read_snapshot(dir, &ctx, td, &invalid, &cacheable);
    if (!snap)
      return Status::Corruption(ctx.presented_path() + ": the Trellis store changed: " +
                                (invalid.problems.empty() ? std::string("no longer a store")
                                                          : invalid.problems[0].to_string()));
    if (cacheable) snapshots().put(dir, snap);
  }
  const wcodec::TrellisStore& st = snap->st;
  if (p.name == kDenseName) return build_dense(st, td, ctx.presented_path(), ctx.source_id(0));
  if (p.name == kDenseGgufName) {
    // (Its computed chunks' messages name the file read: the GGUF form.)
    WCFS_ASSIGN_OR_RETURN(std::shared_ptr<const VirtualFile> dense,
                          build_dense(st, td, ctx.presented_path(), ctx.source_id(0)));
    return build_dense_gguf(dir, ctx, std::move(dense));
  }
  for (const auto& f : snap->plan) {
    if (f.name != p.name) continue;
    std::vector<Extent> extents;
    uint64_t at = 0;
    for (const auto& piece : f.pieces) {
      if (piece.bytes) {
        extents.push_back(Extent{at, piece.length, InlineExtent{piece.bytes, 0}});
      } else {
        WCFS_ASSIGN_OR_RETURN(TrellisFile tf, td.file(piece.file));
        if (tf.content) {
          WCFS_RETURN_IF_ERROR(append_slice(*tf.content, piece.offset, piece.length, at, &extents));
        } else {
          extents.push_back(Extent{at, piece.length, PassthroughExtent{tf.plain, piece.offset}});
        }
      }
      at += piece.length;
    }
    return VirtualFile::make(ctx.presented_path(), std::move(extents), f.segments);
  }
  return Status::NotFound(ctx.presented_path() + ": the Trellis v2 store no longer has this file");
}

}  // namespace wcodecfs
