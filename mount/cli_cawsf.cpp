// mount/cli_cawsf.cpp — `wcodec cawsf convert|inspect|verify|route|apply|export|export-gguf`
// (see cli_cawsf.h; the format in docs/cawsf-format.md).
//
//   convert  safetensors file or directory → .cawsf (version 2), a progress
//            bar, then a per-tensor table of bytes and relative error
//   inspect  header, sections, tensors and shards
//   verify   every checksummed chunk; exit 0 when all match, 1 naming the
//            section and chunk otherwise
//   route    the reference router over the ROUTING section
//   apply    y = W·x for one scope from its components
//   export   the dense checkpoint as .safetensors (names, dtypes, shapes),
//            or per-scope .f32 files in a directory (the reference's export)
//   export-gguf  the GGUF file llama.cpp's convert_hf_to_gguf.py writes for
//            the dense checkpoint with a model directory's config.json and
//            tokenizer: made by the mount's own code (the cawsf kind's dense
//            file and GGUF view, wcodecfs/cawsf_kind.h), so it equals the
//            mount's X.gguf byte for byte
// Thread-safety: runs on the main thread (convert starts its own workers).
#include "cli_cawsf.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "wcodec/cawsf.h"
#include "wcodec/safetensors.h"
#include "wcodecfs/cawsf_kind.h"
#include "wcodecfs/chunk_source.h"
#if WCODEC_HAVE_CAWSF_CONVERT
#include "wcodec/cawsf_convert.h"
#endif
#if WCODEC_HAVE_CUDA
#include "wcodec_gpu/cawsf_apply.h"
#endif

namespace {

namespace fs = std::filesystem;
using namespace wcodec;
using namespace wcodec::cawsf;

struct Args {
  std::string in, out, model, prompt, x_path, config, name, device = "cpu";
  std::vector<std::string> files;
  bool json = false;
  size_t k = 8;
  double budget = 0;
  int scope = -1;
  uint32_t rank = 64, pq_m = 8, pq_k = 256, max_layers = 0;
  uint64_t max_elems = 0;
  double outlier_q = 0.999;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
};

int fail(const Status& s) {
  std::fprintf(stderr, "wcodec cawsf: %s\n", s.ToString().c_str());
  return 1;
}

std::string human(double b) {
  const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4) b /= 1024, ++i;
  char s[32];
  std::snprintf(s, sizeof s, i ? "%.1f %s" : "%.0f %s", b, u[i]);
  return s;
}

std::string shape_str(const std::vector<uint64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

Result<std::shared_ptr<CawsfFile>> open_file(const std::string& p) { return CawsfFile::open(p); }

int cmd_inspect(const Args& a) {
  auto f = open_file(a.in);
  if (!f.ok()) return fail(f.status());
  const CawsfFile& c = **f;
  if (a.json) {
    nlohmann::json j;
    j["version"] = c.version();
    j["file_size"] = c.file_size();
    for (const auto& e : c.toc())
      j["sections"].push_back({{"type", e.type}, {"offset", e.offset}, {"size", e.size}, {"flags", e.flags}});
    for (const auto& t : c.tensors()) {
      uint64_t stored = 0;
      for (uint32_t s : t.shards) stored += kShardHeaderSize + c.shards()[s].csize;
      j["tensors"].push_back({{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape},
                              {"scope", t.scope}, {"kind", t.raw ? "raw" : "ndsq"}, {"shards", t.shards.size()},
                              {"stored_bytes", stored}});
    }
    j["codebooks"] = c.codebooks().size();
    j["routing"] = {{"dim", c.routing().dim}, {"n", c.routing().shard_ids.size()}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%s: CAWSF version %u, %s\n", a.in.c_str(), c.version(), human(static_cast<double>(c.file_size())).c_str());
  const char* names[] = {"?", "META", "CODEBOOKS", "SHARD_BANK", "ROUTING"};
  for (const auto& e : c.toc())
    std::printf("  section %-10s at %10llu  %10s stored  %s\n", names[e.type],
                static_cast<unsigned long long>(e.offset), human(static_cast<double>(e.size)).c_str(),
                e.flags == kFlagZstd ? "zstd" : e.flags == kFlagLz4 ? "lz4" : "raw");
  std::printf("  %zu shards, %zu shared codebooks, routing dim %u over %zu shards\n", c.shards().size(),
              c.codebooks().size(), c.routing().dim, c.routing().shard_ids.size());
  std::printf("\n%-48s %-6s %-18s %5s %-5s %12s\n", "tensor", "dtype", "shape", "scope", "kind", "stored");
  for (const auto& t : c.tensors()) {
    uint64_t stored = 0;
    std::string kinds;
    for (uint32_t s : t.shards) {
      stored += kShardHeaderSize + c.shards()[s].csize;
      kinds += shard_type_name(c.shards()[s].type);
    }
    std::printf("%-48s %-6s %-18s %5u %-5s %12s\n", t.name.c_str(), dtype_name(t.dtype), shape_str(t.shape).c_str(),
                t.scope, t.raw ? "raw" : kinds.c_str(), human(static_cast<double>(stored)).c_str());
  }
  return 0;
}

int cmd_verify(const Args& a) {
  int rc = 0;
  for (const auto& p : a.files) {
    auto f = open_file(p);
    Status s = f.ok() ? (*f)->verify() : f.status();
    if (s.ok()) {
      std::printf("%s: checksum verify: OK\n", p.c_str());
    } else {
      std::fprintf(stderr, "%s: checksum verify: FAILED: %s\n", p.c_str(), s.message().c_str());
      rc = 1;
    }
  }
  return rc;
}

int cmd_route(const Args& a) {
  auto f = open_file(a.in);
  if (!f.ok()) return fail(f.status());
  const Routing& r = (*f)->routing();
  const auto hits = route(r, a.prompt, a.k, a.budget);
  std::printf("Selected %zu/%zu shards (budget=%.2f)\n", hits.size(), r.shard_ids.size(), a.budget);
  for (size_t i = 0; i < hits.size(); ++i) {
    std::string where;
    if (hits[i].shard_id < (*f)->shards().size()) {
      const ShardRecord& s = (*f)->shards()[hits[i].shard_id];
      where = std::string(shard_type_name(s.type)) + " of scope " + std::to_string(s.scope);
    }
    std::printf("%2zu: shard_id=%u cost=%.3f cosine=%.4f %s\n", i, hits[i].shard_id, hits[i].cost, hits[i].similarity,
                where.c_str());
  }
  return 0;
}

int cmd_apply(const Args& a) {
  auto f = open_file(a.in);
  if (!f.ok()) return fail(f.status());
  size_t t = (*f)->tensors().size();
  for (size_t i = 0; i < (*f)->tensors().size(); ++i)
    if ((*f)->tensors()[i].scope == a.scope) t = i;
  if (t == (*f)->tensors().size()) return fail(Status::Invalid(a.in + ": no tensor has scope " + std::to_string(a.scope)));
  auto c = (*f)->components(t);
  if (!c.ok()) return fail(c.status());
  std::vector<float> x(c->cols);
  if (!a.x_path.empty()) {
    std::ifstream in(a.x_path, std::ios::binary);
    in.read(reinterpret_cast<char*>(x.data()), static_cast<std::streamsize>(x.size() * 4));
    if (in.gcount() != static_cast<std::streamsize>(x.size() * 4) || in.peek() != EOF)
      return fail(Status::Invalid(a.x_path + ": must hold exactly " + std::to_string(c->cols) + " f32 values"));
  } else {
    for (size_t j = 0; j < x.size(); ++j) x[j] = std::sin(static_cast<float>(j + 1));  // documented default
  }
  std::vector<float> y;
  std::string on = "CPU";
  if (a.device == "cuda") {
#if WCODEC_HAVE_CUDA
    gpu::ApplyInfo info;
    auto gy = gpu::apply_components_cuda(*c, x, &info);
    if (!gy.ok()) return fail(gy.status());
    y = std::move(*gy);
    char buf[256];
    std::snprintf(buf, sizeof buf, "GPU %s, %s: upload %.3f ms, compute %.3f ms, download %.3f ms", info.device.c_str(),
                  info.blas.c_str(), 1e3 * info.upload_s, 1e3 * info.compute_s, 1e3 * info.download_s);
    on = buf;
#else
    return fail(Status::NotSupported("cawsf apply --device cuda: this build has no CUDA code (configure with -DWCODEC_CUDA=ON)"));
#endif
  } else {
    y = apply_components(*c, x);
  }
  std::printf("%s (scope %d): y = W·x, rows=%u cols=%u%s [%s]\n", (*f)->tensors()[t].name.c_str(), a.scope, c->rows,
              c->cols, a.x_path.empty() ? " (x[j] = sin(j+1))" : "", on.c_str());
  for (size_t i = 0; i < std::min<size_t>(16, y.size()); ++i) std::printf("  y[%zu]=%.6f\n", i, y[i]);
  return 0;
}

int cmd_export(const Args& a) {
  auto f = open_file(a.in);
  if (!f.ok()) return fail(f.status());
  const CawsfFile& c = **f;
  if (a.out.size() > 12 && a.out.substr(a.out.size() - 12) == ".safetensors") {
    std::vector<TensorData> ts;
    for (size_t t = 0; t < c.tensors().size(); ++t) {
      auto b = c.tensor_bytes(t);
      if (!b.ok()) return fail(b.status());
      const TensorEntry& te = c.tensors()[t];
      ts.push_back({te.name, te.dtype, te.shape, std::move(*b)});
    }
    auto file = build_safetensors(ts, std::nullopt);
    if (!file.ok()) return fail(file.status());
    std::ofstream o(a.out, std::ios::binary);
    o.write(reinterpret_cast<const char*>(file->data()), static_cast<std::streamsize>(file->size()));
    if (!o) return fail(Status::IOError(a.out + ": write failed"));
    std::printf("wrote %s (%zu tensors, %s)\n", a.out.c_str(), ts.size(), human(static_cast<double>(file->size())).c_str());
    return 0;
  }
  std::error_code ec;
  fs::create_directories(a.out, ec);
  for (size_t t = 0; t < c.tensors().size(); ++t) {
    const TensorEntry& te = c.tensors()[t];
    if (te.raw || (a.scope >= 0 && te.scope != a.scope)) continue;
    auto w = c.tensor_rows(t, 0, te.rows);
    if (!w.ok()) return fail(w.status());
    const std::string p = a.out + "/scope_" + std::to_string(te.scope) + "_" + std::to_string(te.rows) + "x" +
                          std::to_string(te.cols) + ".f32";
    std::ofstream o(p, std::ios::binary);
    o.write(reinterpret_cast<const char*>(w->data()), static_cast<std::streamsize>(w->size() * 4));
    if (!o) return fail(Status::IOError(p + ": write failed"));
    std::printf("wrote %s\n", p.c_str());
  }
  return 0;
}

// Writes `vf` to fd from offset 0, decoding each chunk once (the last
// decoded chunk is kept: a GGUF view reads a permuted tensor row by row
// from the same chunk).
wcodecfs::Status write_file(const wcodecfs::VirtualFile& vf, int fd, const std::string& out) {
  std::vector<uint8_t> buf;
  buf.reserve(8u << 20);
  uint64_t written = 0;
  auto flush = [&]() -> wcodecfs::Status {
    size_t at = 0;
    while (at < buf.size()) {
      const ssize_t n = ::pwrite(fd, buf.data() + at, buf.size() - at, static_cast<off_t>(written + at));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return wcodecfs::Status::IOError(out + ": write: " + std::strerror(n < 0 ? errno : ENOSPC));
      at += static_cast<size_t>(n);
    }
    written += buf.size();
    buf.clear();
    return wcodecfs::Status::OK();
  };
  const wcodecfs::ChunkSource* memo_src = nullptr;
  size_t memo_chunk = 0;
  std::vector<uint8_t> chunk;
  for (const wcodecfs::Extent& e : vf.extents()) {
    for (uint64_t done = 0; done < e.length;) {
      if (buf.size() == buf.capacity()) WCFS_RETURN_IF_ERROR(flush());
      const uint64_t room = std::min<uint64_t>(e.length - done, buf.capacity() - buf.size());
      uint64_t take = room;
      const size_t at = buf.size();
      if (const auto* in = std::get_if<wcodecfs::InlineExtent>(&e.what)) {
        const uint8_t* p = in->bytes->data() + in->src_offset + done;
        buf.insert(buf.end(), p, p + take);
      } else if (const auto* pt = std::get_if<wcodecfs::PassthroughExtent>(&e.what)) {
        buf.resize(at + take);
        WCFS_ASSIGN_OR_RETURN(size_t got, pt->file->pread_full(pt->src_offset + done, take, buf.data() + at));
        if (got != take) return wcodecfs::Status::IOError(pt->file->name() + ": shorter than expected (it changed)");
      } else if (const auto* d = std::get_if<wcodecfs::DecodedExtent>(&e.what)) {
        const wcodecfs::ChunkSource& src = *d->source;
        const uint64_t pos = d->src_offset + done;
        const size_t ci = src.chunk_at(pos);
        if (ci == SIZE_MAX) return wcodecfs::Status::Internal(vf.name() + ": stream position " + std::to_string(pos) + " has no chunk");
        if (memo_src != &src || memo_chunk != ci || chunk.empty()) {
          chunk.assign(src.chunk_size(ci) + 64, 0);
          WCFS_RETURN_IF_ERROR(src.decode(ci, chunk.data()));
          memo_src = &src;
          memo_chunk = ci;
        }
        const uint64_t in_chunk = pos - src.chunk_offset(ci);
        take = std::min<uint64_t>(take, src.chunk_size(ci) - in_chunk);
        buf.insert(buf.end(), chunk.data() + in_chunk, chunk.data() + in_chunk + take);
      } else {
        buf.resize(at + take, 0);
      }
      done += take;
    }
  }
  WCFS_RETURN_IF_ERROR(flush());
  if (written != vf.size())
    return wcodecfs::Status::Internal(out + ": wrote " + std::to_string(written) + " of " + std::to_string(vf.size()) + " bytes");
  return wcodecfs::Status::OK();
}

int cmd_export_gguf(const Args& a) {
  auto fail_fs = [](const wcodecfs::Status& s) {
    std::fprintf(stderr, "wcodec cawsf export-gguf: %s\n", s.ToString().c_str());
    return 1;
  };
  // --config: the model directory, or its config.json (the tokenizer files are beside it).
  std::error_code ec;
  std::string dir = a.config;
  if (fs::is_regular_file(a.config, ec)) {
    if (fs::path(a.config).filename() != "config.json") {
      std::fprintf(stderr, "wcodec cawsf export-gguf: --config %s: expected a model directory or its config.json\n",
                   a.config.c_str());
      return 2;
    }
    dir = fs::path(a.config).parent_path().string();
    if (dir.empty()) dir = ".";
  } else if (!fs::is_directory(a.config, ec)) {
    std::fprintf(stderr, "wcodec cawsf export-gguf: --config %s: no such directory or config.json\n", a.config.c_str());
    return 2;
  }
  if (a.out.size() < 5 || a.out.substr(a.out.size() - 5) != ".gguf") {
    std::fprintf(stderr, "wcodec cawsf export-gguf: --out %s: expected a name ending in .gguf\n", a.out.c_str());
    return 2;
  }
  const int dfd = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return fail_fs(wcodecfs::Status::IOError(dir + ": " + std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } close_dir{dfd};
  auto listing = wcodecfs::StoreDir::list(dfd, dir);
  if (!listing.ok()) return fail_fs(listing.status());
  auto names = wcodecfs::cawsf_gguf_small_files(*listing);
  if (!names.ok()) return fail_fs(names.status());
  std::vector<wcodecfs::StoredInput> small;
  for (const std::string& n : *names) {
    auto in = listing->open(n);
    if (!in.ok()) return fail_fs(in.status());
    small.push_back(std::move(in).value());
  }
  auto f = open_file(a.in);
  if (!f.ok()) return fail(f.status());
  if ((*f)->version() != 2)
    return fail(Status::NotSupported(a.in + ": CAWSF version " + std::to_string((*f)->version()) +
                                     " has no GGUF form (version 2 keeps the checkpoint's tensor names)"));
  auto dense = wcodecfs::cawsf_dense_file(*f, a.in, 0);
  if (!dense.ok()) return fail_fs(dense.status());
  const std::string name = !a.name.empty() ? a.name : fs::absolute(dir, ec).lexically_normal().filename().string();
  auto view = wcodecfs::cawsf_gguf_file(*dense, a.in, small, name.empty() ? "model" : name, a.out, nullptr);
  if (!view.ok()) return fail_fs(view.status());
  // Written beside OUT and renamed over it: never a half-written OUT.
  const std::string tmp = a.out + ".tmp" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fail_fs(wcodecfs::Status::IOError(tmp + ": " + std::strerror(errno)));
  wcodecfs::Status s = write_file(**view, fd, a.out);
  if (s.ok() && ::fsync(fd) != 0) s = wcodecfs::Status::IOError(tmp + ": fsync: " + std::strerror(errno));
  ::close(fd);
  if (s.ok() && ::rename(tmp.c_str(), a.out.c_str()) != 0)
    s = wcodecfs::Status::IOError(a.out + ": rename: " + std::strerror(errno));
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return fail_fs(s);
  }
  std::printf("wrote %s (%zu bytes, general.name \"%s\")\n", a.out.c_str(), static_cast<size_t>((*view)->size()),
              name.c_str());
  return 0;
}

int cmd_convert(const Args& a) {
#if WCODEC_HAVE_CAWSF_CONVERT
  std::vector<std::string> inputs;
  std::string extra = "{}";
  std::error_code ec;
  if (fs::is_directory(a.model, ec)) {
    for (const auto& e : fs::directory_iterator(a.model))
      if (e.path().extension() == ".safetensors") inputs.push_back(e.path().string());
    std::sort(inputs.begin(), inputs.end());
    std::ifstream cfg(a.model + "/config.json");
    if (cfg) {
      nlohmann::json j = nlohmann::json::parse(cfg, nullptr, false);
      if (!j.is_discarded()) extra = nlohmann::json{{"hf_config", j}}.dump();
    }
  } else {
    inputs.push_back(a.model);
  }
  ConvertOptions o;
  o.rank = a.rank;
  o.outlier_q = a.outlier_q;
  o.pq_m = a.pq_m;
  o.pq_k = a.pq_k;
  o.max_layers = a.max_layers;
  o.max_elems = a.max_elems;
  o.threads = a.threads;
  const bool tty = isatty(2);
  o.progress = [tty](size_t done, size_t total) {
    if (!tty) return;
    const int w = 30, fill = static_cast<int>(done * w / total);
    std::fprintf(stderr, "\rconvert [%s%s] %zu/%zu", std::string(fill, '#').c_str(), std::string(w - fill, ' ').c_str(),
                 done, total);
    if (done == total) std::fprintf(stderr, "\n");
  };
  nlohmann::json conv = nlohmann::json::parse(extra);
  conv["converter"] = {{"rank", a.rank}, {"outlier_q", a.outlier_q}, {"pq_m", a.pq_m}, {"pq_k", a.pq_k}, {"pq_d", 128}};
  auto rows = convert_to_cawsf(inputs, a.out, o, conv.dump());
  if (!rows.ok()) return fail(rows.status());
  std::printf("%-48s %-6s %-16s %-5s %4s %8s %10s %10s %10s\n", "tensor", "dtype", "shape", "kind", "rank", "outliers",
              "original", "stored", "rel.error");
  uint64_t orig = 0, stored = 0;
  for (const auto& r : *rows) {
    orig += r.orig_bytes;
    stored += r.stored_bytes;
    char err[32] = "-";
    if (!r.raw) std::snprintf(err, sizeof err, "%.3e", r.rel_error);
    std::printf("%-48s %-6s %-16s %-5s %4u %8llu %10s %10s %10s\n", r.name.c_str(), r.dtype.c_str(),
                shape_str(r.shape).c_str(), r.raw ? "raw" : "ndsq", r.rank, static_cast<unsigned long long>(r.outliers),
                human(static_cast<double>(r.orig_bytes)).c_str(), human(static_cast<double>(r.stored_bytes)).c_str(), err);
  }
  std::printf("total: %s -> %s (%.1f%%), file %s\n", human(static_cast<double>(orig)).c_str(),
              human(static_cast<double>(stored)).c_str(), orig ? 100.0 * static_cast<double>(stored) / static_cast<double>(orig) : 0.0,
              a.out.c_str());
  return 0;
#else
  (void)a;
  std::fprintf(stderr, "wcodec cawsf convert: not built (needs liblapacke-dev, libopenblas-dev, libfaiss-dev)\n");
  return 2;
#endif
}

}  // namespace

std::function<int()> add_cawsf_commands(CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* top = app.add_subcommand("cawsf", "CAWSF (.cawsf, NDSQ-decomposed weights): convert, inspect, verify, route, apply, export, export-gguf");
  top->require_subcommand(1);
  auto* conv = top->add_subcommand("convert", "Decompose a .safetensors file (or directory) into a .cawsf file");
  conv->add_option("--model", args->model, ".safetensors file or directory")->required();
  conv->add_option("--out", args->out, "output .cawsf")->required();
  conv->add_option("--rank", args->rank, "rank of L")->check(CLI::Range(1, 65535));
  conv->add_option("--outlier-q", args->outlier_q, "outlier quantile of |W - L|")->check(CLI::Range(0.0, 1.0));
  conv->add_option("--pq-m", args->pq_m, "PQ sub-spaces per 128-value block (divides 128)")->check(CLI::Range(1, 128));
  conv->add_option("--pq-k", args->pq_k, "PQ centroids per sub-space")->check(CLI::Range(1, 256));
  conv->add_option("--max-layers", args->max_layers, "decompose at most N matrices (0: all); the rest stored as they are");
  conv->add_option("--max-elems", args->max_elems, "store matrices of more than N elements as they are (0: no limit)");
  conv->add_option("-j,--threads", args->threads, "worker threads")->check(CLI::Range(1, 256));
  auto* ins = top->add_subcommand("inspect", "Sections, tensors and shards of a .cawsf file");
  ins->add_option("FILE", args->in, ".cawsf file")->required();
  ins->add_flag("--json", args->json, "JSON output");
  auto* ver = top->add_subcommand("verify", "Check every checksummed chunk (exit 1 naming the section and chunk)");
  ver->add_option("FILES", args->files, ".cawsf files")->required();
  auto* rou = top->add_subcommand("route", "Rank shards for a prompt (the reference router)");
  rou->add_option("FILE", args->in, ".cawsf file")->required();
  rou->add_option("-p,--prompt", args->prompt, "prompt text")->required();
  rou->add_option("--k", args->k, "shards to select");
  rou->add_option("--budget", args->budget, "cost budget in MiB (0: none)");
  auto* app_ = top->add_subcommand("apply", "y = W·x for one scope, from its components");
  app_->add_option("FILE", args->in, ".cawsf file")->required();
  app_->add_option("--scope", args->scope, "scope id")->required();
  app_->add_option("--x", args->x_path, "x as raw little-endian f32 (default x[j] = sin(j+1))");
  app_->add_option("--device", args->device, "cpu, or cuda (cuBLAS and this build's kernels on GPU 0)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  auto* exp = top->add_subcommand("export", "Dense export: OUT.safetensors (whole checkpoint) or a directory of scope_N_RxC.f32");
  exp->add_option("FILE", args->in, ".cawsf file")->required();
  exp->add_option("OUT", args->out, "output .safetensors or directory")->required();
  exp->add_option("--scope", args->scope, "directory export: only this scope");
  auto* eg = top->add_subcommand("export-gguf",
                                 "The GGUF file of the dense checkpoint (as the mount's X.gguf): what llama.cpp's "
                                 "convert_hf_to_gguf.py writes for it with a Llama-family config.json and tokenizer");
  eg->add_option("FILE", args->in, ".cawsf file (version 2)")->required();
  eg->add_option("--config", args->config, "the model directory (config.json, tokenizer.model, ...) or its config.json")
      ->required();
  eg->add_option("--out", args->out, "output .gguf")->required();
  eg->add_option("--name", args->name, "general.name (default: the model directory's name)");
  return [=]() -> int {
    if (!*top) return -1;
    if (*conv) return cmd_convert(*args);
    if (*ins) return cmd_inspect(*args);
    if (*ver) return cmd_verify(*args);
    if (*rou) return cmd_route(*args);
    if (*app_) return cmd_apply(*args);
    if (*exp) return cmd_export(*args);
    if (*eg) return cmd_export_gguf(*args);
    return 2;
  };
}
