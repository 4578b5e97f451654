// mount/daemon.cpp — the wcodecfs daemon (see daemon.h):
//
//   wcodecfs STORE MOUNTPOINT [-o OPTIONS] [-f] [-d] [-s]
//
// Mounts STORE (a directory of .wcodec containers and plain files) at
// MOUNTPOINT with the libfuse3 low-level API and serves it with the
// multithreaded session loop. By default the process daemonizes after the
// mount exists: the parent exits only once the kernel mount is in place, so
// `wcodecfs STORE MNT && ls MNT` works (requests queue until the loop runs).
// SIGINT/SIGTERM/SIGHUP end the loop and unmount cleanly.
#include <fcntl.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <csignal>
#include <functional>
#include <limits>
#include <thread>
#include <optional>
#include <string>

#include "daemon.h"
#include "fuse_binding.h"
#include "wcodecfs/filesystem.h"
#include "wcodecfs/fs_log.h"
#if WCODECFS_HAVE_CUDA
#include "wcodecfs/gpu_batch_decoder.h"
#endif

#ifndef WCODECFS_VERSION
#define WCODECFS_VERSION "unknown"
#endif

namespace {

using wcodecfs::Filesystem;
using wcodecfs::FsOptions;

// Filled by fuse_opt_parse (plain C layout: fuse_opt stores by offset).
struct CliOptions {
  char* store;
  char* cache_size;
  char* threads;
  char* readahead;
  char* max_readahead;
  char* staging;
  char* encode_delay;
  char* encode_threads;
  char* decoder;
  int hugepages;
  int keep_read_chunks;
  int encode_fast_decode;
};

const struct fuse_opt kOptionSpecs[] = {
    {"cache_size=%s", offsetof(CliOptions, cache_size), 0},
    {"threads=%s", offsetof(CliOptions, threads), 0},
    {"readahead=%s", offsetof(CliOptions, readahead), 0},
    {"kernel_readahead=%s", offsetof(CliOptions, max_readahead), 0},
    {"staging=%s", offsetof(CliOptions, staging), 0},
    {"encode_delay=%s", offsetof(CliOptions, encode_delay), 0},
    {"encode_threads=%s", offsetof(CliOptions, encode_threads), 0},
    {"decoder=%s", offsetof(CliOptions, decoder), 0},
    {"hugepages", offsetof(CliOptions, hugepages), 1},
    {"keep_read_chunks", offsetof(CliOptions, keep_read_chunks), 1},
    {"encode_fast_decode", offsetof(CliOptions, encode_fast_decode), 1},
    FUSE_OPT_END,
};

// The first non-option argument is STORE (consumed here); the second stays
// for fuse_parse_cmdline, which takes it as the mountpoint.
int opt_proc(void* data, const char* arg, int key, struct fuse_args* outargs) {
  (void)outargs;
  auto* o = static_cast<CliOptions*>(data);
  if (key == FUSE_OPT_KEY_NONOPT && o->store == nullptr) {
    o->store = ::strdup(arg);
    return 0;
  }
  return 1;
}

void usage(const char* prog) {
  std::printf(
      "usage: %s STORE MOUNTPOINT [-o OPTIONS] [-f] [-d] [-s]\n"
      "\n"
      "Serves the .wcodec containers of STORE as the original .safetensors files\n"
      "(decoded on demand); every other file and directory passes through unchanged.\n"
      "The mount is read-only except its staging directory: .safetensors files\n"
      "written there are encoded in the background and stay readable at their path.\n"
      "\n"
      "wcodecfs options:\n"
      "    -o cache_size=BYTES    decoded-chunk cache (K/M/G/T suffixes; default\n"
      "                           min(1G, 25%% of RAM))\n"
      "    -o threads=N           decoder threads (default: CPUs + 1)\n"
      "    -o decoder=auto|cpu|gpu  chunk decoder: gpu = the CUDA batch decoder,\n"
      "                           auto = gpu when a CUDA device is present (small\n"
      "                           batches still on the CPU), else cpu (default auto)\n"
      "    -o readahead=BYTES     largest readahead window per open file (default 64M;\n"
      "                           0 disables the daemon's readahead)\n"
      "    -o kernel_readahead=BYTES  kernel readahead per file, set through\n"
      "                           /sys/class/bdi when permitted (default 128K)\n"
      "    -o staging=NAME        the writable staging directory in the mount root\n"
      "                           (default \"staging\"; empty: none, all read-only)\n"
      "    -o encode_delay=TIME   encode a staged file once closed and unchanged this\n"
      "                           long (seconds, or with ms/s/m suffix; default 10s)\n"
      "    -o encode_threads=N    background encoder threads (default 1)\n"
      "    -o encode_fast_decode  staged files keep a model only where it saves at\n"
      "                           least 1%% against zstd/raw, as wcodec encode\n"
      "                           --fast-decode (faster reads, files slightly larger)\n"
      "    -o hugepages           decoded chunks in transparent huge pages (faster\n"
      "                           first touch on hosts that keep them backed; off by\n"
      "                           default: in VMs whose balloon reclaims free 2M pages\n"
      "                           it is slower)\n"
      "    -o keep_read_chunks    keep decoded chunks in the cache after the kernel\n"
      "                           has read all of them (by default they are dropped\n"
      "                           then: the page cache holds them, and their memory\n"
      "                           takes the next chunks)\n"
      "    -o allow_other         let other users use the mount (opt-in)\n"
      "    -f                     stay in the foreground\n"
      "    -d                     debug output (implies -f)\n"
      "    -s                     single-threaded session loop\n"
      "\n"
      "Counters: MOUNTPOINT/.wcodecfs/stats (JSON).\n"
      "Unmount: fusermount3 -u MOUNTPOINT (or SIGTERM to the daemon).\n"
      "\n",
      prog);
}

// "512", "64K", "1.5G"? no: integers only, with optional K/M/G/T (powers of
// 1024) and optional trailing "B"/"iB".
std::optional<uint64_t> parse_bytes(const char* s) {
  if (!s || !std::isdigit(static_cast<unsigned char>(*s))) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (errno != 0) return std::nullopt;
  std::string suffix(end);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (suffix.size() > 1 && (suffix.substr(1) == "B" || suffix.substr(1) == "IB")) suffix.resize(1);
  unsigned shift = 0;
  if (suffix.empty() || suffix == "B") shift = 0;
  else if (suffix == "K") shift = 10;
  else if (suffix == "M") shift = 20;
  else if (suffix == "G") shift = 30;
  else if (suffix == "T") shift = 40;
  else return std::nullopt;
  if (shift && v > (std::numeric_limits<uint64_t>::max() >> shift)) return std::nullopt;
  return static_cast<uint64_t>(v) << shift;
}

// "10", "2.5", "500ms", "10s", "2m" -> milliseconds.
std::optional<long long> parse_duration_ms(const char* s) {
  if (!s || !(std::isdigit(static_cast<unsigned char>(*s)) || *s == '.')) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (errno != 0 || v < 0) return std::nullopt;
  const std::string unit(end);
  double ms = 0;
  if (unit.empty() || unit == "s") ms = v * 1000;
  else if (unit == "ms") ms = v;
  else if (unit == "m" || unit == "min") ms = v * 60000;
  else return std::nullopt;
  if (ms > 1e12) return std::nullopt;
  return static_cast<long long>(ms + 0.5);
}

// Test hooks of the background encoder, from the environment (crash and
// race tests drive the real daemon through them; unset in normal use):
//   WCODECFS_FAILPOINT=POINT:kill        SIGKILL the daemon at POINT
//   WCODECFS_FAILPOINT=POINT:sleep=MS    pause the encode at POINT
//   WCODECFS_EVENT_LOG=FILE              append "PID POINT PATH" per point
// POINT is one of the EncodeQueue hook points ("locked", "temp-written",
// "verified", "renamed", "unlinked", ...).
std::function<void(const char*, const std::string&)> test_hooks_from_env() {
  const char* fp = std::getenv("WCODECFS_FAILPOINT");
  const char* log = std::getenv("WCODECFS_EVENT_LOG");
  if (!fp && !log) return {};
  std::string point, action;
  long long sleep_ms = 0;
  if (fp) {
    const std::string f(fp);
    const size_t c = f.find(':');
    point = f.substr(0, c);
    action = c == std::string::npos ? "kill" : f.substr(c + 1);
    if (action.rfind("sleep=", 0) == 0) {
      sleep_ms = std::atoll(action.c_str() + 6);
      action = "sleep";
    }
  }
  const std::string log_path = log ? log : "";
  return [point, action, sleep_ms, log_path](const char* at, const std::string& rel) {
    if (!log_path.empty()) {
      const std::string line = std::to_string(::getpid()) + " " + at + " " + rel + "\n";
      const int fd = ::open(log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
      if (fd >= 0) {
        (void)!::write(fd, line.data(), line.size());
        ::close(fd);
      }
    }
    if (point != at) return;
    if (action == "kill") ::raise(SIGKILL);
    if (action == "sleep") std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  };
}

// Escapes ',' and '\' for a -o option value.
std::string escape_opt(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ',' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

void raise_fd_limit() {
  struct rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

namespace wcodecfs::mount {

int daemon_main(int argc, char* argv[], const DaemonExtras& extras) {
  // malloc's heaps grow 16 MiB at a time (a thread's heap is created with
  // that much room) rather than a few hundred KiB at a time, an mprotect
  // each. Decoder threads grow their heaps as they build a tensor's tables,
  // and every growth takes the address-space lock for writing, which stalls
  // the other threads' page faults and the chunk pool's pre-faulting
  // meanwhile: a fresh mount's first read of isnet-medium.f16 made 120 such
  // calls, 20 with this, and read 10% faster (alternating runs, 770 -> 850
  // MB/s). The room is address space; pages are used only as allocations
  // touch them (the daemon's peak RSS in bench/mount_bench.sh went from 70
  // to 63 MiB). Setting it also fixes malloc's mmap threshold at 128 KiB
  // (glibc otherwise raises it as large blocks are freed): larger blocks are
  // mapped and unmapped each time, which this read's figures include.
  (void)mallopt(M_TOP_PAD, 16 << 20);
  struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
  CliOptions cli{};
  struct fuse_cmdline_opts opts {};
  int rc = 1;
  wcodecfs::mount::MountContext ctx;
  std::unique_ptr<Filesystem> fs;
  struct fuse_session* se = nullptr;
  FsOptions fo;

  if (fuse_opt_parse(&args, &cli, kOptionSpecs, opt_proc) != 0) goto out_args;
  if (fuse_parse_cmdline(&args, &opts) != 0) goto out_args;
  if (opts.show_help) {
    usage(argv[0]);
    fuse_cmdline_help();
    fuse_lowlevel_help();
    rc = 0;
    goto out_opts;
  }
  if (opts.show_version) {
    std::printf("wcodecfs %s (decoders: %s)\n", WCODECFS_VERSION, WCODECFS_HAVE_CUDA ? "cpu, gpu" : "cpu");
    fuse_lowlevel_version();
    rc = 0;
    goto out_opts;
  }
  if (!cli.store || !opts.mountpoint) {
    std::fprintf(stderr, "usage: %s STORE MOUNTPOINT [-o OPTIONS] [-f] [-d]  (--help for more)\n", argv[0]);
    rc = 2;
    goto out_opts;
  }

  if (cli.cache_size) {
    auto v = parse_bytes(cli.cache_size);
    if (!v || *v == 0) {
      std::fprintf(stderr, "wcodecfs: bad cache_size=%s (bytes, optional K/M/G/T suffix, > 0)\n", cli.cache_size);
      rc = 2;
      goto out_opts;
    }
    fo.cache_bytes = *v;
  }
  fo.huge_pages = cli.hugepages != 0;
  fo.drop_behind = cli.keep_read_chunks == 0;
  if (cli.encode_fast_decode) fo.encode.codec.min_model_gain = 0.01;
  if (cli.threads) {
    char* end = nullptr;
    const unsigned long n = std::strtoul(cli.threads, &end, 10);
    if (!std::isdigit(static_cast<unsigned char>(cli.threads[0])) || *end || n == 0 || n > 1024) {
      std::fprintf(stderr, "wcodecfs: bad threads=%s (1..1024)\n", cli.threads);
      rc = 2;
      goto out_opts;
    }
    fo.decode_threads = static_cast<unsigned>(n);
  }
  if (cli.readahead) {
    auto v = parse_bytes(cli.readahead);
    if (!v) {
      std::fprintf(stderr, "wcodecfs: bad readahead=%s (bytes, optional K/M/G suffix)\n", cli.readahead);
      rc = 2;
      goto out_opts;
    }
    fo.readahead_max = *v;
  }
  if (cli.max_readahead) {
    auto v = parse_bytes(cli.max_readahead);
    if (!v || *v / 1024 > UINT_MAX) {
      std::fprintf(stderr, "wcodecfs: bad kernel_readahead=%s\n", cli.max_readahead);
      rc = 2;
      goto out_opts;
    }
    ctx.max_readahead_kb = static_cast<unsigned>(*v / 1024);
  }
  if (cli.staging) fo.staging = cli.staging;
  if (cli.encode_delay) {
    auto v = parse_duration_ms(cli.encode_delay);
    if (!v) {
      std::fprintf(stderr, "wcodecfs: bad encode_delay=%s (seconds, or a number with ms/s/m)\n", cli.encode_delay);
      rc = 2;
      goto out_opts;
    }
    fo.encode.quiet = std::chrono::milliseconds(*v);
  }
  if (cli.encode_threads) {
    char* end = nullptr;
    const unsigned long n = std::strtoul(cli.encode_threads, &end, 10);
    if (!std::isdigit(static_cast<unsigned char>(cli.encode_threads[0])) || *end || n == 0 || n > 256) {
      std::fprintf(stderr, "wcodecfs: bad encode_threads=%s (1..256)\n", cli.encode_threads);
      rc = 2;
      goto out_opts;
    }
    fo.encode.threads = static_cast<unsigned>(n);
  }
  if (opts.debug) wcodecfs::set_log_level(wcodecfs::LogLevel::kDebug);
  {
    const std::string want = cli.decoder ? cli.decoder : "auto";
    if (want != "auto" && want != "cpu" && want != "gpu") {
      std::fprintf(stderr, "wcodecfs: bad decoder=%s (auto, cpu or gpu)\n", want.c_str());
      rc = 2;
      goto out_opts;
    }
#if WCODECFS_HAVE_CUDA
    if (want != "cpu") {
      const std::string why = wcodecfs::probe_gpu_in_child();
      if (why.empty()) {
        wcodecfs::GpuBatchOptions go;
        go.auto_mode = want == "auto";
        go.cpu_threads = fo.decode_threads;
        fo.make_decoder = [go](std::shared_ptr<wcodecfs::Stats> st) { return wcodecfs::make_gpu_batch_decoder(go, st); };
      } else if (want == "gpu") {
        std::fprintf(stderr, "wcodecfs: decoder=gpu: %s\n", why.c_str());
        goto out_opts;
      } else {
        wcodecfs::log_debug("decoder=auto: decoding on the CPU (" + why + ")");
      }
    }
#else
    if (want == "gpu") {
      std::fprintf(stderr, "wcodecfs: decoder=gpu: this wcodecfs was built without the CUDA decoder\n");
      goto out_opts;
    }
#endif
  }
  fo.encode.hook = test_hooks_from_env();
  fo.kinds = wcodecfs::default_kinds();
  fo.kinds.insert(fo.kinds.end(), extras.kinds.begin(), extras.kinds.end());

  {
    // Opens the store (errors go to the terminal); starts no threads, so
    // the fork in fuse_daemonize loses nothing.
    auto r = Filesystem::create(cli.store, fo);
    if (!r.ok()) {
      std::fprintf(stderr, "wcodecfs: %s\n", r.status().ToString().c_str());
      goto out_opts;
    }
    fs = std::move(r).value();
  }
  ctx.fs = fs.get();
  ctx.mountpoint = opts.mountpoint;  // fuse_parse_cmdline made it absolute
  raise_fd_limit();

  // Options every wcodecfs mount has: the kernel checks permissions against
  // the attributes we report; the mount table names the store.
  fuse_opt_insert_arg(&args, 1, "-odefault_permissions");
  fuse_opt_insert_arg(&args, 1, ("-ofsname=" + escape_opt(cli.store)).c_str());
  fuse_opt_insert_arg(&args, 1, "-osubtype=wcodecfs");

  se = fuse_session_new(&args, &wcodecfs::mount::operations(), sizeof(struct fuse_lowlevel_ops), &ctx);
  if (!se) goto out_fs;
  if (fuse_set_signal_handlers(se) != 0) goto out_session;
  if (fuse_session_mount(se, opts.mountpoint) != 0) goto out_signals;
  // After the mount exists: the parent returns to its caller only now.
  if (fuse_daemonize(opts.foreground) != 0) goto out_unmount;
  if (!opts.foreground) wcodecfs::set_log_sink(wcodecfs::LogSink::kSyslog);
  wcodecfs::log_info(std::string("mounted ") + cli.store + " at " + opts.mountpoint);
  {
    // Threads start only now, after the fork: staging recovery and encoders.
    wcodecfs::Status st = fs->start_background();
    if (!st.ok()) wcodecfs::log_error("staging: " + st.ToString() + " (staged files are not encoded)");
  }

  if (opts.singlethread) {
    rc = fuse_session_loop(se);
  } else {
    struct fuse_loop_config* cfg = fuse_loop_cfg_create();
    fuse_loop_cfg_set_clone_fd(cfg, static_cast<unsigned>(opts.clone_fd));
    if (opts.max_idle_threads != UINT_MAX) fuse_loop_cfg_set_idle_threads(cfg, opts.max_idle_threads);
    fuse_loop_cfg_set_max_threads(cfg, opts.max_threads);
    rc = fuse_session_loop_mt(se, cfg);
    fuse_loop_cfg_destroy(cfg);
  }
  if (rc != 0) wcodecfs::log_warn("session loop ended with " + std::to_string(rc));
  wcodecfs::log_info(std::string("unmounting ") + opts.mountpoint);
  rc = rc == 0 ? 0 : 1;

out_unmount:
  fuse_session_unmount(se);
out_signals:
  fuse_remove_signal_handlers(se);
out_session:
  fuse_session_destroy(se);
  // Handles whose RELEASE never came (the session ended first): freed
  // before the filesystem they point into.
  if (const size_t n = wcodecfs::mount::release_open_handles(ctx))
    wcodecfs::log_debug(std::to_string(n) + " open handle(s) had no RELEASE before the session ended; freed");
out_fs:
  fs.reset();
out_opts:
  std::free(opts.mountpoint);
out_args:
  std::free(cli.store);
  std::free(cli.cache_size);
  std::free(cli.threads);
  std::free(cli.readahead);
  std::free(cli.max_readahead);
  std::free(cli.staging);
  std::free(cli.encode_delay);
  std::free(cli.encode_threads);
  fuse_opt_free_args(&args);
  return rc;
}

}  // namespace wcodecfs::mount
