// mount/wcodec_main.cpp — the `wcodec` command-line tool: encode,
// decode, verify, inspect and bench .wcodec files; encode a store in place
// (the filesystem core's EncodeQueue) and show a mount's staging state.
//
// Exit codes: 0 success, 1 failure of the operation (corrupt input, I/O
// error, verification mismatch), 2 usage error.
#include <lz4.h>
#include <lz4hc.h>
#include <unistd.h>
#include <zstd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli_cawsf.h"
#include "wcodec/container.h"
#include "wcodec/cpu.h"
#include "wcodec/gguf.h"
#include "cli_trellis.h"
#include "wcodecfs/encode_queue.h"
#include "wcodecfs/fs_log.h"
#if WCODEC_HAVE_CUDA
#include "wcodec_gpu/gpu_decoder.h"
#endif

namespace fs = std::filesystem;
using wcodec::Status;

namespace {

using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

int fail(const Status& s) {
  std::fprintf(stderr, "wcodec: %s\n", s.ToString().c_str());
  return 1;
}

bool read_all(const std::string& p, std::vector<uint8_t>* out) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return false;
  f.seekg(0, std::ios::end);
  out->resize(static_cast<size_t>(f.tellg()));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(out->data()), static_cast<std::streamsize>(out->size()));
  return static_cast<bool>(f);
}

std::string human(double bytes) {
  const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (bytes >= 1024 && i < 4) {
    bytes /= 1024;
    ++i;
  }
  char b[32];
  std::snprintf(b, sizeof b, i ? "%.1f %s" : "%.0f %s", bytes, u[i]);
  return b;
}

// Progress bar on a terminal (stderr), silent otherwise.
struct Progress {
  std::string label;
  bool tty = isatty(2);
  std::mutex mu;
  int last = -1;
  void update(uint64_t done, uint64_t total) {
    if (!tty || total == 0) return;
    std::lock_guard<std::mutex> lk(mu);
    const int pct = static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total));
    if (pct == last) return;
    last = pct;
    const int w = 30, fill = pct * w / 100;
    std::fprintf(stderr, "\r%-32.32s [%s%s] %3d%%", label.c_str(), std::string(fill, '#').c_str(),
                 std::string(w - fill, ' ').c_str(), pct);
    std::fflush(stderr);
  }
  void done() {
    if (tty && last >= 0) std::fprintf(stderr, "\r%*s\r", 80, "");
  }
};

struct EncodeRow {
  std::string name;
  uint64_t orig, stored;
  double seconds;
};

void print_encode_table(const std::vector<EncodeRow>& rows) {
  std::printf("%-44s %14s %14s %7s %9s\n", "file", "original", "stored", "ratio", "MB/s");
  uint64_t to = 0, ts = 0;
  double tt = 0;
  for (auto& r : rows) {
    std::printf("%-44s %14llu %14llu %7.4f %9.1f\n", r.name.c_str(), static_cast<unsigned long long>(r.orig),
                static_cast<unsigned long long>(r.stored), static_cast<double>(r.stored) / std::max<uint64_t>(1, r.orig),
                r.seconds > 0 ? static_cast<double>(r.orig) / 1e6 / r.seconds : 0.0);
    to += r.orig;
    ts += r.stored;
    tt += r.seconds;
  }
  if (rows.size() > 1)
    std::printf("%-44s %14llu %14llu %7.4f %9.1f\n", "total", static_cast<unsigned long long>(to),
                static_cast<unsigned long long>(ts), static_cast<double>(ts) / std::max<uint64_t>(1, to),
                tt > 0 ? static_cast<double>(to) / 1e6 / tt : 0.0);
}

int cmd_encode(const std::string& in, const std::string& out, wcodec::EncodeConfig cfg, bool quiet) {
  const wcodecfs::StoreKinds kinds = wcodecfs::default_kinds();
  struct Job {
    fs::path src, dst;
    const wcodecfs::StagingCodec* codec;
  };
  std::vector<Job> jobs;
  std::vector<std::pair<fs::path, fs::path>> copies;
  std::error_code ec;
  if (fs::is_directory(in, ec)) {
    fs::create_directories(out, ec);
    if (ec) return fail(Status::IOError("cannot create directory " + out + ": " + ec.message()));
    std::vector<fs::path> entries;
    for (auto& e : fs::recursive_directory_iterator(in, ec)) {
      if (e.is_regular_file()) entries.push_back(e.path());
    }
    std::sort(entries.begin(), entries.end());
    for (auto& p : entries) {
      const fs::path rel = fs::relative(p, in);
      fs::path dst = fs::path(out) / rel;
      // A file a store kind encodes (X.safetensors -> X.wcodec) is encoded
      // under the name that kind gives it; every other file is copied.
      const std::string name = p.filename().string();
      if (const wcodecfs::StagingCodec* c = wcodecfs::codec_for(kinds, name)) {
        jobs.push_back({p, dst.parent_path() / c->encoded_name(name), c});
      } else {
        copies.emplace_back(p, dst);
      }
    }
  } else if (fs::is_regular_file(in, ec)) {
    const std::string name = fs::path(in).filename().string();
    const wcodecfs::StagingCodec* c = wcodecfs::codec_for(kinds, name);
    if (!c)
      return fail(Status::Invalid(in + ": no store kind encodes a file of this name (such as X.safetensors)"));
    fs::path dst = out;
    if (fs::is_directory(dst, ec)) dst = dst / c->encoded_name(name);
    jobs.push_back({in, dst, c});
  } else {
    return fail(Status::IOError("no such file or directory: " + in));
  }
  for (auto& [src, dst] : copies) {
    fs::create_directories(dst.parent_path(), ec);
    fs::copy_file(src, dst, fs::copy_options::overwrite_existing, ec);
    if (ec) return fail(Status::IOError("cannot copy " + src.string() + ": " + ec.message()));
  }
  std::vector<EncodeRow> rows;
  int rc = 0;
  for (auto& [src, dst, codec] : jobs) {
    if (!dst.parent_path().empty()) fs::create_directories(dst.parent_path(), ec);
    Progress prog;
    prog.label = src.filename().string();
    cfg.progress = [&](uint64_t d, uint64_t t) { prog.update(d, t); };
    const auto t0 = Clock::now();
    const wcodecfs::Status st = wcodecfs::encode_file(*codec, src.string(), dst.string(), cfg);
    prog.done();
    if (!st.ok()) {
      std::fprintf(stderr, "wcodec: %s\n", st.ToString().c_str());
      rc = 1;
      continue;
    }
    rows.push_back({src.filename().string(), static_cast<uint64_t>(fs::file_size(src, ec)),
                    static_cast<uint64_t>(fs::file_size(dst, ec)), secs(t0)});
  }
  if (!quiet && !rows.empty()) print_encode_table(rows);
  return rc;
}

// `wcodec encode STORE`: encodes every X.safetensors of the store in place
// (X.wcodec replaces it once verified), with the same crash-safe protocol
// and locks as the mount's background encoder (docs/staging.md): a store
// that a mount or another `wcodec encode` works on at the same time is safe.
int cmd_encode_store(const std::string& store, const wcodec::EncodeConfig& cfg, unsigned jobs, bool quiet) {
  wcodecfs::set_log_level(wcodecfs::LogLevel::kError);  // our own lines below say what was done
  wcodecfs::EncodeQueueOptions o;
  o.quiet = std::chrono::milliseconds(0);
  o.threads = jobs;
  o.low_priority = false;
  o.codec = cfg;
  std::mutex mu;
  uint64_t n_done = 0, n_failed = 0, total_in = 0, total_out = 0;
  o.on_finished = [&](const wcodecfs::EncodeQueueStats::Item& it) {
    std::lock_guard<std::mutex> lk(mu);
    if (it.state == "done") {
      ++n_done;
      total_in += it.size;
      total_out += it.encoded;
      if (!quiet)
        std::printf("%-44s %14llu %14llu %7.4f %12s %7.1f s\n", it.path.c_str(), static_cast<unsigned long long>(it.size),
                    static_cast<unsigned long long>(it.encoded),
                    static_cast<double>(it.encoded) / static_cast<double>(std::max<uint64_t>(1, it.size)),
                    human(static_cast<double>(it.size > it.encoded ? it.size - it.encoded : 0)).c_str(), it.seconds);
    } else {
      ++n_failed;
      std::printf("%-44s FAILED (stays plain): %s\n", it.path.c_str(), it.error.c_str());
    }
    std::fflush(stdout);
  };
  auto q = wcodecfs::EncodeQueue::create(store, o);
  if (!q.ok()) {
    std::fprintf(stderr, "wcodec: %s\n", q.status().ToString().c_str());
    return 1;
  }
  if (!quiet) std::printf("%-44s %14s %14s %7s %12s %9s\n", "file", "original", "stored", "ratio", "saved", "time");
  const wcodecfs::Status rec = (*q)->recover();
  if (!rec.ok()) std::fprintf(stderr, "wcodec: recovery: %s\n", rec.ToString().c_str());
  (*q)->start();
  const wcodecfs::Status dr = (*q)->drain(/*now=*/true);
  (*q)->stop();
  if (!dr.ok()) {
    std::fprintf(stderr, "wcodec: %s\n", dr.ToString().c_str());
    return 1;
  }
  std::printf("total: %llu file%s encoded, %llu -> %llu bytes (%.4f), saved %s%s\n",
              static_cast<unsigned long long>(n_done), n_done == 1 ? "" : "s",
              static_cast<unsigned long long>(total_in), static_cast<unsigned long long>(total_out),
              static_cast<double>(total_out) / static_cast<double>(std::max<uint64_t>(1, total_in)),
              human(static_cast<double>(total_in > total_out ? total_in - total_out : 0)).c_str(),
              n_failed ? (", " + std::to_string(n_failed) + " failed").c_str() : "");
  return n_failed || !rec.ok() ? 1 : 0;
}

// `wcodec status MOUNTPOINT`: the staging state of a mount, from the JSON
// the daemon serves at MOUNTPOINT/.wcodecfs/stats (key "staging").
int cmd_status(const std::string& mountpoint) {
  const fs::path stats = fs::path(mountpoint) / ".wcodecfs" / "stats";
  std::ifstream f(stats);
  if (!f) {
    std::fprintf(stderr, "wcodec: %s is not a wcodecfs mount (cannot read %s)\n", mountpoint.c_str(), stats.c_str());
    return 1;
  }
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    std::fprintf(stderr, "wcodec: %s is not the JSON object of a wcodecfs mount\n", stats.c_str());
    return 1;
  }
  auto it = j.find("staging");
  if (it == j.end() || !it->is_object()) {
    std::printf("%s: this mount has no staging area\n", mountpoint.c_str());
    return 0;
  }
  const nlohmann::json& s = *it;
  auto num = [](const nlohmann::json& o, const char* k) -> double {
    auto v = o.find(k);
    return v != o.end() && v->is_number() ? v->get<double>() : 0.0;
  };
  auto str = [](const nlohmann::json& o, const char* k) -> std::string {
    auto v = o.find(k);
    return v != o.end() && v->is_string() ? v->get<std::string>() : std::string();
  };
  auto count = [&](const char* k) { return static_cast<unsigned long long>(num(s, k)); };
  const double in_b = num(s, "bytes_in"), out_b = num(s, "bytes_out");
  std::printf("staging area %s: %llu pending, %llu encoding, %llu done, %llu failed, %llu cancelled\n",
              str(s, "area").c_str(), count("pending"), count("encoding"), count("done"), count("failed"),
              count("cancelled"));
  std::printf("encoded %s -> %s (%.4f), saved %s in %.1f s\n", human(in_b).c_str(), human(out_b).c_str(),
              in_b > 0 ? out_b / in_b : 0.0, human(num(s, "bytes_saved")).c_str(), num(s, "seconds"));
  auto items = s.find("items");
  if (items == s.end() || !items->is_array() || items->empty()) return 0;
  std::printf("%-48s %-10s %14s %14s %7s  %s\n", "path", "state", "size", "encoded", "ratio", "error");
  for (const auto& item : *items) {
    if (!item.is_object()) continue;
    const double size = num(item, "size"), enc = num(item, "encoded");
    const std::string ratio = enc > 0 && size > 0 ? std::to_string(enc / size).substr(0, 6) : "-";
    std::printf("%-48s %-10s %14llu %14llu %7s  %s\n", str(item, "path").c_str(), str(item, "state").c_str(),
                static_cast<unsigned long long>(size), static_cast<unsigned long long>(enc), ratio.c_str(),
                str(item, "error").c_str());
  }
  return 0;
}

int cmd_decode(const std::string& in, const std::string& out) {
  auto r = wcodec::Reader::open(in);
  if (!r.ok()) return fail(r.status());
  std::string dst = out;
  std::error_code ec;
  if (fs::is_directory(dst, ec)) dst = (fs::path(dst) / fs::path(in).filename().replace_extension(".safetensors")).string();
  Status st = (*r)->decode_to_file(dst);
  if (!st.ok()) return fail(st);
  return 0;
}

int cmd_verify(const std::vector<std::string>& files, bool full) {
  int rc = 0;
  for (auto& f : files) {
    auto r = wcodec::Reader::open(f);
    Status st = r.ok() ? (*r)->verify(full) : r.status();
    if (st.ok()) {
      std::printf("%s: OK (%s)\n", f.c_str(), full ? "full decode, SHA-256 matches" : "checksums match");
    } else {
      std::printf("%s: FAILED: %s\n", f.c_str(), st.ToString().c_str());
      rc = 1;
    }
  }
  return rc;
}

std::string shape_str(const std::vector<uint64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) o += ',';
    o += std::to_string(s[i]);
  }
  o += ']';
  return o;
}

std::string fmt_g(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

// A GGUF value in a few words: scalars as themselves, strings quoted (cut
// at 60 bytes), arrays as their length and type with the first elements.
std::string gguf_value_str(const wcodec::GgufValue& v) {
  auto elem = [&](uint64_t i) -> std::string {
    if (v.type == wcodec::GgufType::kString) {
      std::string o(1, '"');
      for (size_t k = 0; k < v.strings[i].size() && k < 60; ++k) {
        const char c = v.strings[i][k];
        o.push_back(static_cast<unsigned char>(c) < 0x20 ? '?' : c);
      }
      o.append(v.strings[i].size() > 60 ? "...\"" : "\"");
      return o;
    }
    const uint8_t* b = v.bytes.data() + i * wcodec::gguf_type_size(v.type);
    auto get = [&](auto t) {
      decltype(t) x;
      std::memcpy(&x, b, sizeof x);
      return x;
    };
    switch (v.type) {
      case wcodec::GgufType::kU8: return std::to_string(get(uint8_t{}));
      case wcodec::GgufType::kI8: return std::to_string(get(int8_t{}));
      case wcodec::GgufType::kU16: return std::to_string(get(uint16_t{}));
      case wcodec::GgufType::kI16: return std::to_string(get(int16_t{}));
      case wcodec::GgufType::kU32: return std::to_string(get(uint32_t{}));
      case wcodec::GgufType::kI32: return std::to_string(get(int32_t{}));
      case wcodec::GgufType::kU64: return std::to_string(get(uint64_t{}));
      case wcodec::GgufType::kI64: return std::to_string(get(int64_t{}));
      case wcodec::GgufType::kF32: return fmt_g(get(float{}));
      case wcodec::GgufType::kF64: return fmt_g(get(double{}));
      case wcodec::GgufType::kBool: return b[0] ? "true" : "false";
      default: return "?";
    }
  };
  if (!v.is_array) return elem(0);
  std::string o = "[" + std::to_string(v.count()) + " x " + wcodec::gguf_type_name(v.type) + "]";
  for (uint64_t i = 0; i < v.count() && i < 3; ++i) o += (i ? ", " : " ") + elem(i);
  if (v.count() > 3) o += ", ...";
  return o;
}

// inspect of a GGUF file: its header (wcodec/gguf.h), pairs and tensors.
int cmd_inspect_gguf(const std::string& file, bool json) {
  auto r = wcodec::read_gguf_file(file);
  if (!r.ok()) return fail(r.status());
  const wcodec::GgufFile& f = *r;
  nlohmann::json j;
  j["file"] = file;
  j["format"] = "gguf";
  j["version"] = f.version;
  j["alignment"] = f.alignment;
  j["data_offset"] = f.data_offset;
  j["data_size"] = f.data_size;
  if (!json)
    std::printf("%s: GGUF v%u, %zu pairs, %zu tensors, alignment %u, data at %llu (%llu bytes)\n", file.c_str(),
                f.version, f.kv.size(), f.tensors.size(), f.alignment, static_cast<unsigned long long>(f.data_offset),
                static_cast<unsigned long long>(f.data_size));
  for (const auto& p : f.kv) {
    const std::string type = std::string(p.value.is_array ? "arr" : wcodec::gguf_type_name(p.value.type));
    if (json)
      j["kv"].push_back({{"key", p.key}, {"type", type}, {"count", p.value.count()}, {"value", gguf_value_str(p.value)}});
    else
      std::printf("  %-40s %-4s %s\n", p.key.c_str(), type.c_str(), gguf_value_str(p.value).c_str());
  }
  if (!json) std::printf("%-40s %-8s %-24s %12s %12s\n", "tensor", "type", "ne", "offset", "bytes");
  for (const auto& t : f.tensors) {
    std::vector<uint64_t> ne;
    for (uint32_t d = 0; d < t.n_dims; ++d) ne.push_back(static_cast<uint64_t>(t.ne[d]));
    const char* type = wcodec::ggml_type_info(t.type)->name;
    if (json)
      j["tensors"].push_back({{"name", t.name}, {"type", type}, {"ne", ne}, {"offset", t.offset}, {"bytes", t.nbytes}});
    else
      std::printf("%-40s %-8s %-24s %12llu %12llu\n", t.name.c_str(), type, shape_str(ne).c_str(),
                  static_cast<unsigned long long>(t.offset), static_cast<unsigned long long>(t.nbytes));
  }
  if (json) std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

bool starts_with_gguf_magic(const std::string& file) {
  char m[4] = {};
  FILE* fp = std::fopen(file.c_str(), "rb");
  if (!fp) return false;
  const size_t n = std::fread(m, 1, 4, fp);
  std::fclose(fp);
  return n == 4 && std::memcmp(m, "GGUF", 4) == 0;
}

int cmd_inspect(const std::string& file, bool json) {
  if (starts_with_gguf_magic(file)) return cmd_inspect_gguf(file, json);
  auto r = wcodec::Reader::open(file);
  if (!r.ok()) return fail(r.status());
  const auto& rd = **r;
  nlohmann::json j;
  j["file"] = file;
  j["original_size"] = rd.original_size();
  j["stored_size"] = rd.file_size();
  j["metadata"] = nlohmann::json::parse(rd.metadata_json(), nullptr, false);
  int name_w = 24;
  for (size_t i = 0; i < rd.num_tensors(); ++i)
    name_w = std::max<int>(name_w, static_cast<int>(rd.tensor_summary(i).name.size()));
  if (!json) {
    std::printf("%s: %llu -> %llu bytes (%.4f), %zu tensors, %zu chunks\n", file.c_str(),
                static_cast<unsigned long long>(rd.original_size()), static_cast<unsigned long long>(rd.file_size()),
                static_cast<double>(rd.file_size()) / std::max<uint64_t>(1, rd.original_size()), rd.num_tensors(),
                rd.num_chunks());
    std::printf("%-*s %-7s %-16s %-8s %9s %7s %-34s %s\n", name_w, "tensor", "dtype", "shape", "kind", "bytes",
                "bits/w", "model", "chunks m/z/r  tools (pred L/T/A/P/DC, xform D/A)");
  }
  for (size_t i = 0; i < rd.num_tensors(); ++i) {
    auto s = rd.tensor_summary(i);
    uint64_t numel = 1;
    for (auto d : s.shape) numel *= d;
    double codes = static_cast<double>(numel);
    if (s.kind == "int4") codes = static_cast<double>(s.original_bytes) * 2;
    if (s.kind == "ternary") codes = static_cast<double>(s.original_bytes) * 4;
    const double bpw = codes > 0 ? 8.0 * static_cast<double>(s.stored_bytes) / codes : 0.0;
    if (json) {
      j["tensors"].push_back({{"name", s.name},
                              {"dtype", wcodec::dtype_name(s.dtype)},
                              {"shape", s.shape},
                              {"kind", s.kind},
                              {"model", s.model},
                              {"original_bytes", s.original_bytes},
                              {"stored_bytes", s.stored_bytes},
                              {"bits_per_weight", bpw},
                              {"chunks", {{"model", s.chunks_model}, {"zstd", s.chunks_zstd}, {"raw", s.chunks_raw}}},
                              {"tiles", s.tiles_total},
                              {"tiles_with_tools", s.tiles_with_tools},
                              {"predictors", s.pred_hist},
                              {"transforms", s.xform_hist},
                              {"crc32", s.crc32}});
    } else {
      char tools[96];
      std::snprintf(tools, sizeof tools, "%u/%u tiles (%u/%u/%u/%u/%u, %u/%u)", s.tiles_with_tools, s.tiles_total,
                    s.pred_hist[1], s.pred_hist[2], s.pred_hist[3], s.pred_hist[4], s.pred_hist[5], s.xform_hist[1],
                    s.xform_hist[2]);
      std::printf("%-*s %-7s %-16s %-8s %9llu %7.3f %-34s %llu/%llu/%llu  %s\n", name_w, s.name.c_str(),
                  wcodec::dtype_name(s.dtype), shape_str(s.shape).c_str(), s.kind.c_str(),
                  static_cast<unsigned long long>(s.original_bytes), bpw, s.model.c_str(),
                  static_cast<unsigned long long>(s.chunks_model), static_cast<unsigned long long>(s.chunks_zstd),
                  static_cast<unsigned long long>(s.chunks_raw), s.tiles_total ? tools : "-");
    }
  }
  if (json) std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

// ---------------------------------------------------------------- bench
struct BenchRow {
  std::string codec;
  uint64_t size;
  double enc_s, dec_s;
};

// Best of at least `reps` runs, repeated until they took min_s in all (at
// most 2000 runs): a small file decodes in under a millisecond, and on a
// shared machine a handful of such runs is mostly noise.
template <typename F>
double best_time(F&& f, int reps, double min_s) {
  double best = 1e30, total = 0;
  for (int i = 0; i < 2000 && (i < reps || total < min_s); ++i) {
    const auto t0 = Clock::now();
    f();
    const double t = secs(t0);
    best = std::min(best, t);
    total += t;
  }
  return best;
}

int cmd_bench(const std::vector<std::string>& files, bool quick, const std::string& json_out) {
  nlohmann::json all = nlohmann::json::array();
  // What the numbers ran on: the CPU and the decoder path (WCODEC_CPU).
  std::printf("cpu: %s\ndecoder path: %s\n", wcodec::cpu_model().c_str(), wcodec::cpu_path_name());
#if defined(__x86_64__)
  std::printf("table gathers: %s\n", wcodec::gather_form_name(wcodec::gather_form()));
#endif
  if (!wcodec::cpu_path_note().empty()) std::fprintf(stderr, "wcodec: %s\n", wcodec::cpu_path_note().c_str());
  for (const auto& f : files) {
    std::vector<uint8_t> data;
    if (!read_all(f, &data)) return fail(Status::IOError("cannot read " + f));
    const double mb = static_cast<double>(data.size()) / 1e6;
    // Best of several runs (this machine class is noisy); see best_time.
    const int reps = quick ? 1 : (data.size() < (8u << 20) ? 3 : 2);
    const double min_s = quick ? 0.0 : 0.3;
    std::vector<BenchRow> rows;
    // wcodec (single-threaded encode and decode: per core).
    wcodec::EncodeConfig cfg;
    cfg.threads = 1;
    wcodec::EncodeReport rep;
    std::vector<uint8_t> enc;
    Status est;
    const double te = best_time(
        [&] {
          auto r = wcodec::encode_safetensors(data.data(), data.size(), cfg, f, &rep);
          if (!r.ok()) {
            est = r.status();
            return;
          }
          enc = std::move(r).value();
        },
        reps, min_s);
    if (!est.ok()) return fail(est);
    const std::string tmp = (fs::temp_directory_path() / ("wcodec-bench-" + std::to_string(getpid()) + ".wcodec")).string();
    {
      std::ofstream o(tmp, std::ios::binary);
      o.write(reinterpret_cast<const char*>(enc.data()), static_cast<std::streamsize>(enc.size()));
    }
    // Decode as the zstd and lz4 rows do, from the container in memory to
    // the original in memory; then through a Reader on the stored file,
    // which adds the system calls that copy the stored bytes out of the
    // page cache.
    std::vector<uint8_t> dec(data.size());
    Status dst;
    auto rm = wcodec::Reader::open_memory(enc.data(), enc.size(), f + " (encoded)");
    if (!rm.ok()) return fail(rm.status());
    const double td = best_time([&] { dst = (*rm)->read(0, data.size(), dec.data()); }, reps + 1, min_s);
    if (!dst.ok()) return fail(dst);
    if (dec != data) return fail(Status::Internal(f + ": wcodec round trip differs"));
    rows.push_back({"wcodec", enc.size(), te, td});
    auto rd = wcodec::Reader::open(tmp);
    if (!rd.ok()) return fail(rd.status());
    std::fill(dec.begin(), dec.end(), uint8_t{0});
    const double tdf = best_time([&] { dst = (*rd)->read(0, data.size(), dec.data()); }, reps + 1, min_s);
    fs::remove(tmp);
    if (!dst.ok()) return fail(dst);
    if (dec != data) return fail(Status::Internal(f + ": wcodec round trip from the file differs"));
    rows.push_back({"wcodec file", enc.size(), te, tdf});
    // zstd / lz4.
    for (int level : {3, 19}) {
      std::vector<uint8_t> z(ZSTD_compressBound(data.size()));
      size_t zs = 0;
      const double tz = best_time([&] { zs = ZSTD_compress(z.data(), z.size(), data.data(), data.size(), level); },
                                  level == 19 ? 1 : reps, min_s);
      std::vector<uint8_t> back(data.size());
      const double tzd = best_time([&] { ZSTD_decompress(back.data(), back.size(), z.data(), zs); }, reps + 1, min_s);
      if (back != data) return fail(Status::Internal("zstd round trip differs"));
      rows.push_back({"zstd -" + std::to_string(level), zs, tz, tzd});
    }
    {
      std::vector<uint8_t> z(static_cast<size_t>(LZ4_compressBound(static_cast<int>(data.size()))));
      int zs = 0;
      const double tz = best_time(
          [&] {
            zs = LZ4_compress_default(reinterpret_cast<const char*>(data.data()), reinterpret_cast<char*>(z.data()),
                                      static_cast<int>(data.size()), static_cast<int>(z.size()));
          },
          reps, min_s);
      std::vector<uint8_t> back(data.size());
      const double tzd = best_time(
          [&] {
            LZ4_decompress_safe(reinterpret_cast<const char*>(z.data()), reinterpret_cast<char*>(back.data()), zs,
                                static_cast<int>(back.size()));
          },
          reps + 1, min_s);
      if (back != data) return fail(Status::Internal("lz4 round trip differs"));
      rows.push_back({"lz4", static_cast<uint64_t>(zs), tz, tzd});
    }
    // Order-0 reference: per tensor, weighted by bytes (headers counted raw).
    if (Status o = wcodec::add_order0_entropy(data.data(), data.size(), &rep); !o.ok()) return fail(o);
    double o0 = 0;
    uint64_t covered = 0;
    for (auto& t : rep.tensors) {
      o0 += t.order0_bits * static_cast<double>(t.original_bytes);
      covered += t.original_bytes;
    }
    o0 += static_cast<double>(data.size() - covered);
    o0 /= static_cast<double>(data.size());

    std::printf("\n%s  (%s, %zu tensors)\n", fs::path(f).filename().c_str(), human(static_cast<double>(data.size())).c_str(),
                rep.tensors.size());
    // A GGUF file: the ggml types its tensors really have (llama-quantize
    // falls back per tensor where a type's block does not fit the rows).
    std::string ggml_types;
    if (data.size() >= 4 && std::memcmp(data.data(), "GGUF", 4) == 0) {
      auto g = wcodec::parse_gguf(data.data(), data.size(), data.size(), f);
      if (g.ok()) {
        std::map<std::string, int> n;
        for (const auto& t : g->tensors) {
          const auto* info = wcodec::ggml_type_info(t.type);
          ++n[info ? info->name : "type " + std::to_string(t.type)];
        }
        for (const auto& [name, count] : n) ggml_types += (ggml_types.empty() ? "" : ", ") + name + " x" + std::to_string(count);
        std::printf("  ggml types: %s\n", ggml_types.c_str());
      }
    }
    std::printf("  %-11s %12s %8s %14s %14s\n", "codec", "size", "ratio", "enc MB/s/core", "dec MB/s/core");
    nlohmann::json jf = {{"file", f},
                         {"size", data.size()},
                         {"order0", o0},
                         {"cpu", wcodec::cpu_model()},
                         {"cpu_path", wcodec::cpu_path_name()},
                         {"gather_form", wcodec::gather_form_name(wcodec::gather_form())}};
    for (auto& r : rows) {
      std::printf("  %-11s %12llu %8.4f %14.1f %14.1f\n", r.codec.c_str(), static_cast<unsigned long long>(r.size),
                  static_cast<double>(r.size) / static_cast<double>(data.size()), mb / r.enc_s, mb / r.dec_s);
      jf["codecs"].push_back({{"codec", r.codec},
                              {"size", r.size},
                              {"ratio", static_cast<double>(r.size) / static_cast<double>(data.size())},
                              {"enc_MBps", mb / r.enc_s},
                              {"dec_MBps", mb / r.dec_s}});
    }
    std::printf("  %-11s %12s %8.4f   (order-0 entropy of the codes; float: exponent order-0 + raw sign/mantissa)\n",
                "order-0", "", o0);
    // The target of the GGUF work: below zstd -19, by this much of the original.
    auto ratio_of = [&](const std::string& codec) {
      for (const auto& r : rows)
        if (r.codec == codec) return static_cast<double>(r.size) / static_cast<double>(data.size());
      return 0.0;
    };
    const double z19 = ratio_of("zstd -19"), wc = ratio_of("wcodec");
    std::printf("  %-11s %12s %+8.4f   (wcodec ratio - zstd -19 ratio: negative is smaller)\n", "vs zstd -19", "",
                wc - z19);
    jf["wcodec_minus_zstd19"] = wc - z19;
    if (!ggml_types.empty()) jf["ggml_types"] = ggml_types;
    all.push_back(jf);
  }
  if (!json_out.empty()) {
    std::ofstream o(json_out);
    o << all.dump(2) << "\n";
  }
  return 0;
}

// ---------------------------------------------------------------- bench --device cuda
// Decodes the tensor data of each file on the CPU (every core, the mount's
// path: Reader::decode_chunk) and on the GPU (one batch kernel per 256 MiB),
// checks that the bytes are equal and prints both speeds; then a synthetic
// batch of several GB (every file's chunks repeated, planned as one), so
// that launch overheads do not dominate. .safetensors inputs are encoded
// first.
#if WCODEC_HAVE_CUDA
double cpu_decode_all(const wcodec::Reader& rd, int threads, std::vector<uint8_t>* out, Status* err) {
  const uint64_t base = rd.data_start();
  out->assign(rd.original_size() - base, 0);
  std::atomic<size_t> next{0};
  std::mutex mu;
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < rd.num_chunks();) {
        Status s = rd.decode_chunk(i, out->data() + (rd.chunk(i).decoded_offset - base));
        if (!s.ok()) {
          std::lock_guard<std::mutex> l(mu);
          if (err->ok()) *err = s;
        }
      }
    });
  for (auto& t : pool) t.join();
  return secs(t0);
}
#endif

int cmd_bench_cuda(const std::vector<std::string>& files, int threads, double synthetic_gb) {
#if !WCODEC_HAVE_CUDA
  (void)files;
  (void)threads;
  (void)synthetic_gb;
  std::fprintf(stderr, "wcodec: bench --device cuda: this build has no CUDA decoder (configure with -DWCODEC_CUDA=ON)\n");
  return 1;
#else
  const auto info = wcodec::gpu::probe();
  if (!info.usable) {
    std::fprintf(stderr, "wcodec: bench --device cuda: no usable GPU: %s\n", info.why_not.c_str());
    return 1;
  }
  auto dec = wcodec::gpu::GpuDecoder::create();
  if (!dec.ok()) return fail(dec.status());
  std::printf("GPU: %s; CPU: %d threads\n", (*dec)->describe().c_str(), threads);
  std::vector<std::unique_ptr<wcodec::Reader>> readers;
  std::vector<std::string> temps;
  for (const auto& f : files) {
    std::string path = f;
    if (fs::path(f).extension() == ".safetensors") {
      path = (fs::temp_directory_path() / ("wcodec-gpu-bench-" + std::to_string(getpid()) + "-" +
                                           std::to_string(temps.size()) + ".wcodec"))
                 .string();
      wcodec::EncodeConfig cfg;
      cfg.threads = threads;
      Status st = wcodec::encode_safetensors_file(f, path, cfg, nullptr);
      if (!st.ok()) return fail(st);
      temps.push_back(path);
    }
    auto r = wcodec::Reader::open(path);
    if (!r.ok()) return fail(r.status());
    readers.push_back(std::move(r).value());
  }
  struct Cleanup {
    std::vector<std::string>* t;
    ~Cleanup() {
      for (auto& p : *t) std::remove(p.c_str());
    }
  } cleanup{&temps};
  std::printf("%-40s %9s %9s %9s %9s %9s %6s\n", "file", "MB", "cpu GB/s", "kernel", "gpu e2e", "upload", "equal");
  double cpu_s_all = 0, bytes_all = 0;
  for (size_t k = 0; k < readers.size(); ++k) {
    const wcodec::Reader& rd = *readers[k];
    Status err;
    std::vector<uint8_t> cpu;
    const double cpu_s = cpu_decode_all(rd, threads, &cpu, &err);
    if (!err.ok()) return fail(err);
    cpu_s_all += cpu_s;
    bytes_all += static_cast<double>(cpu.size());
    wcodec::gpu::Timing tm;
    const auto tg = Clock::now();
    auto buf = wcodec::gpu::decode_file_to_device(rd, **dec, &tm);
    const double gpu_s = secs(tg);
    if (!buf.ok()) return fail(buf.status());
    std::vector<uint8_t> back(cpu.size());
    Status cs = buf->copy_to_host(0, back.size(), back.data());
    if (!cs.ok()) return fail(cs);
    const bool equal = back == cpu;
    const double gb = static_cast<double>(cpu.size()) / 1e9;
    std::printf("%-40s %9.1f %9.2f %9.2f %9.2f %9.2f %6s\n", fs::path(files[k]).filename().c_str(), gb * 1e3,
                gb / cpu_s, gb / std::max(tm.kernel_s, 1e-9), gb / gpu_s, gb / std::max(tm.upload_s, 1e-9),
                equal ? "yes" : "NO");
    if (!equal) {
      std::fprintf(stderr, "wcodec: bench --device cuda: %s: GPU bytes differ from the CPU decoder\n",
                   files[k].c_str());
      return 1;
    }
  }
  // Synthetic: every file's chunks, repeated into plans of about 1 GB.
  if (synthetic_gb > 0 && bytes_all > 0) {
    std::vector<const wcodec::Reader*> files_rd;
    for (auto& r : readers) files_rd.push_back(r.get());
    auto run = wcodec::gpu::run_synthetic(**dec, files_rd, synthetic_gb * 1e9);
    if (!run.ok()) return fail(run.status());
    const wcodec::gpu::SyntheticRun& sr = *run;
    const uint64_t bad = sr.bad;
    const double setup_s = sr.setup_s;
    const wcodec::gpu::Timing& warm = sr.warm;
    const wcodec::gpu::Timing& tm = sr.timing;
    const double done = sr.bytes;
    const double total_s = sr.total_s, kernel_s = tm.kernel_s, upload_s = tm.upload_s;
    const double gb = done / 1e9;
    std::printf("%-40s %9.1f %9.2f %9.2f %9.2f %9.2f %6s\n", "synthetic (all files, repeated)", gb * 1e3,
                bytes_all / 1e9 / cpu_s_all, gb / std::max(kernel_s, 1e-9), gb / std::max(total_s, 1e-9),
                gb / std::max(upload_s, 1e-9), bad ? "NO" : "yes");
    std::printf("%-40s %9.1f %9s %9.2f %9.2f %9.2f %6s\n", "synthetic, first batch (allocations)",
                sr.batch_bytes / 1e6, "", sr.batch_bytes / 1e9 / std::max(warm.kernel_s, 1e-9),
                sr.batch_bytes / 1e9 / std::max(setup_s, 1e-9), sr.batch_bytes / 1e9 / std::max(warm.upload_s, 1e-9),
                bad ? "NO" : "yes");
    if (bad) {
      std::fprintf(stderr, "wcodec: bench --device cuda: %llu chunks of the synthetic batch failed on the GPU\n",
                   static_cast<unsigned long long>(bad));
      return 1;
    }
  }
  std::printf("(GB/s of decoded tensor bytes; kernel = decode kernels alone; upload = host-to-device copies alone; "
              "gpu e2e = wall time of plan + staging + upload + kernels, pipelined, bytes left in device memory; "
              "synthetic: a ~1 GB plan built once, then staged, uploaded and decoded again until the total is "
              "reached, after one untimed batch that allocates the decoder's buffers (its own line); its cpu "
              "column = the files' CPU rate)\n");
  return 0;
#endif
}

// ---------------------------------------------------------------- decode --device cuda
// Decodes a file's tensor data into device memory (checked chunk by chunk on
// the device); with OUT, copies it back and writes the original file.
int cmd_decode_cuda(const std::string& in, const std::string& out) {
#if !WCODEC_HAVE_CUDA
  (void)in;
  (void)out;
  std::fprintf(stderr, "wcodec: decode --device cuda: this build has no CUDA decoder (configure with -DWCODEC_CUDA=ON)\n");
  return 1;
#else
  auto r = wcodec::Reader::open(in);
  if (!r.ok()) return fail(r.status());
  auto dec = wcodec::gpu::GpuDecoder::create();
  if (!dec.ok()) return fail(dec.status());
  wcodec::gpu::Timing tm;
  const auto t0 = Clock::now();
  auto buf = wcodec::gpu::decode_file_to_device(**r, **dec, &tm);
  if (!buf.ok()) return fail(buf.status());
  const double s = secs(t0);
  const double gb = static_cast<double>(buf->size()) / 1e9;
  std::printf("%s: %.3f GB of tensor data decoded into GPU memory in %.3f s (%.2f GB/s; kernels %.3f s, upload %.3f s)\n",
              in.c_str(), gb, s, gb / s, tm.kernel_s, tm.upload_s);
  if (out.empty()) return 0;
  std::vector<uint8_t> file((*r)->original_size());
  Status st = (*r)->read(0, (*r)->data_start(), file.data());
  if (st.ok()) st = buf->copy_to_host(0, buf->size(), file.data() + (*r)->data_start());
  if (!st.ok()) return fail(st);
  std::ofstream o(out, std::ios::binary);
  o.write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  if (!o) return fail(Status::IOError("cannot write " + out));
  return 0;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"wcodec: lossless codec for neural-network checkpoints (.safetensors <-> .wcodec)"};
  app.set_version_flag("--version", std::string("wcodec ") + WCODEC_VERSION +
                                        " (container format " + std::to_string(wcodec::kVersionMajor) + "." +
                                        std::to_string(wcodec::kVersionMinor) + "; CUDA decoder: " +
                                        (WCODEC_HAVE_CUDA ? "built" : "not built") + ")\ncpu: " +
                                        wcodec::cpu_model() + "\ndecoder path: " + wcodec::cpu_path_name() +
                                        (wcodec::cpu_path_note().empty() ? "" : " (" + wcodec::cpu_path_note() + ")")
#if defined(__x86_64__)
                                        + "\ntable gathers: " + wcodec::gather_form_name(wcodec::gather_form())
#endif
  );
  app.require_subcommand(1);

  std::string in, out;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  uint64_t chunk = 256 * 1024;
  bool quiet = false, no_tools = false, exhaustive = false, exact_tables = false, fast_decode = false,
       no_zstd_groups = false;
  auto* enc = app.add_subcommand(
      "encode", "Encode a .safetensors file (or every file of a directory); with only STORE, encode the store in place");
  enc->add_option("IN", in, "input file or directory (alone: a store directory, encoded in place)")->required();
  enc->add_option("OUT", out, "output file or directory");
  enc->add_option("-j,--threads", threads, "encoder threads (in place: files encoded at once)")->check(CLI::Range(1, 256));
  enc->add_option("--chunk-size", chunk, "decoded bytes per chunk")->check(CLI::Range(4096, 64 << 20));
  enc->add_flag("-q,--quiet", quiet, "no summary table");
  enc->add_flag("--no-tools", no_tools, "skip the tile prediction/transform search");
  enc->add_flag("--exhaustive", exhaustive, "evaluate tile tools on every tile (slow profile)");
  enc->add_flag("--exact-tables", exact_tables,
                "12-bit frequency tables everywhere (default: 9-bit where a tensor loses at most 1%, faster to decode)");
  enc->add_flag("--fast-decode", fast_decode,
                "keep a model only where it saves at least 1% against zstd/raw (GGUF 4-bit codes decode 1.5-2.3x "
                "faster on the avx2 path, files 0.2-0.4% larger)");
  enc->add_flag("--no-zstd-groups", no_zstd_groups,
                "one zstd frame per small tensor, readable by format 2.10 readers (default: small tensors of one "
                "dtype share frames, format 2.11: smaller, faster to decode)");

  std::string device = "cpu";
  auto* dec = app.add_subcommand("decode", "Decode a .wcodec file to the original .safetensors");
  dec->add_option("IN", in, "input .wcodec")->required();
  dec->add_option("OUT", out, "output file (optional with --device cuda)");
  dec->add_option("--device", device, "cpu, or cuda: decode the tensors into GPU memory")
      ->check(CLI::IsMember({"cpu", "cuda"}));

  std::vector<std::string> files;
  bool full = false, json = false;
  auto* ver = app.add_subcommand("verify", "Check .wcodec files (checksums; --full decodes and checks SHA-256)");
  ver->add_option("FILES", files, ".wcodec files")->required();
  ver->add_flag("--full", full, "decode everything and compare SHA-256 of the original");

  auto* ins = app.add_subcommand("inspect", "Per-tensor table of a .wcodec file (or the header of a .gguf file)");
  ins->add_option("FILE", in, ".wcodec or .gguf file")->required();
  ins->add_flag("--json", json, "JSON output");

  bool quick = false;
  std::string json_out;
  auto* ben = app.add_subcommand("bench", "Compare wcodec with zstd and lz4 on .safetensors and .gguf files");
  ben->add_option("FILES", files, ".safetensors or .gguf files")->required();
  ben->add_flag("--quick", quick, "one repetition");
  ben->add_option("--json", json_out, "also write results as JSON to this file");
  double synthetic_gb = 4;
  ben->add_option("--device", device,
                  "cpu (codec comparison), or cuda: GPU vs CPU decode of .safetensors/.wcodec files")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  ben->add_option("--synthetic-gb", synthetic_gb, "--device cuda: size of the repeated-chunks batch (0: none)")
      ->check(CLI::Range(0.0, 1024.0));
  ben->add_option("-j,--threads", threads, "--device cuda: CPU decoder threads")->check(CLI::Range(1, 256));

  auto* sta = app.add_subcommand("status", "Staging state of a wcodecfs mount (MOUNTPOINT/.wcodecfs/stats)");
  sta->add_option("MOUNTPOINT", in, "where the store is mounted")->required();
  const auto run_cawsf = add_cawsf_commands(app);

  auto* tre = add_trellis_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (const int rc = run_cawsf(); rc >= 0) return rc;
  wcodec::EncodeConfig cfg;
  cfg.threads = threads;
  cfg.chunk_bytes = chunk;
  cfg.tool_search = !no_tools;
  cfg.exhaustive_tools = exhaustive;
  cfg.x8_tables = !exact_tables;
  if (fast_decode) cfg.min_model_gain = 0.01;
  cfg.zstd_groups = !no_zstd_groups;
  if (*enc && out.empty()) {
    std::error_code ec;
    if (!fs::is_directory(in, ec)) {
      std::fprintf(stderr, "wcodec: encode %s: OUT is required unless IN is a store directory (encoded in place)\n",
                   in.c_str());
      return 2;
    }
    cfg.threads = 1;  // parallel over files instead
    return cmd_encode_store(in, cfg, static_cast<unsigned>(threads), quiet);
  }
  if (*tre) return run_trellis_command();
  if (*enc) return cmd_encode(in, out, cfg, quiet);
  if (*sta) return cmd_status(in);
  if (*dec && device == "cuda") return cmd_decode_cuda(in, out);
  if (*dec && out.empty()) {
    std::fprintf(stderr, "wcodec: decode %s: OUT is required (unless --device cuda)\n", in.c_str());
    return 2;
  }
  if (*dec) return cmd_decode(in, out);
  if (*ver) return cmd_verify(files, full);
  if (*ins) return cmd_inspect(in, json);
  if (*ben && device == "cuda") return cmd_bench_cuda(files, threads, synthetic_gb);
  if (*ben) return cmd_bench(files, quick, json_out);
  return 2;
}
