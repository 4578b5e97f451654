// tests/test_fs_core.cpp — the filesystem core (fs/) in-process, no FUSE.
//
// Builds stores from the real model files (test_fs_store.h) and checks the
// read path through wcodecfs::Filesystem: presented names, sizes without
// decoding, byte-exact reads (whole files, concurrent random ranges across
// chunk and tensor boundaries), single-flight decoding, the cache budget,
// readahead, corruption handling, the plain-wins rule, read-only behaviour,
// symlinks and hostile stored files.
#include <fcntl.h>
#include <pthread.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <latch>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "test_fs_store.h"
#include "testutil.h"
#include "wcodecfs/filesystem.h"
#include "wcodecfs/fs_log.h"
#include "wcodecfs/wcodec_kind.h"

using namespace wcodecfs;
namespace sfs = std::filesystem;

namespace {

// A scratch store and helpers to open filesystems over it.
class TestStore {
 public:
  explicit TestStore(bool with_large = false) {
    root_ = scratch_.path() / "store";
    sfs::create_directory(root_);
    models_ = fstest::build_store(root_, with_large);
  }
  const sfs::path& root() const { return root_; }
  const std::vector<fstest::ModelFile>& models() const { return models_; }
  std::unique_ptr<Filesystem> open(FsOptions o = {}) const {
    auto r = Filesystem::create(root_.string(), std::move(o));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }

 private:
  wctest::ScratchDir scratch_;
  sfs::path root_;
  std::vector<fstest::ModelFile> models_;
};

// Collects log lines (warnings, errors) while alive.
class LogCapture {
 public:
  LogCapture() {
    set_log_capture([this](LogLevel, const std::string& m) {
      std::lock_guard<std::mutex> lk(mu_);
      lines_.push_back(m);
    });
  }
  ~LogCapture() { set_log_capture({}); }
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lk(mu_);
    return lines_;
  }
  size_t count_containing(const std::string& s) const {
    size_t n = 0;
    for (const auto& l : lines())
      if (l.find(s) != std::string::npos) ++n;
    return n;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

std::shared_ptr<FileHandle> open_path(Filesystem& fs, const std::string& path) {
  auto e = fs.lookup_path(path);
  EXPECT_TRUE(e.ok()) << path << ": " << e.status().ToString();
  if (!e.ok()) return nullptr;
  auto h = fs.open(e->id, O_RDONLY);
  EXPECT_TRUE(h.ok()) << path << ": " << h.status().ToString();
  return h.ok() ? h.value() : nullptr;
}

std::vector<uint8_t> read_range(Filesystem& fs, FileHandle& h, uint64_t off, uint64_t len, Status* err = nullptr) {
  auto r = fs.read(h, off, len);
  if (err) *err = r.status();
  if (!r.ok()) return {};
  return r->gather();
}

// Reads a whole file in `piece`-byte requests, as the kernel would.
std::vector<uint8_t> read_all(Filesystem& fs, FileHandle& h, size_t piece) {
  std::vector<uint8_t> out;
  for (;;) {
    auto r = fs.read(h, out.size(), piece);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || r->size() == 0) break;
    const auto g = r->gather();  // memory and fd slices
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

uint64_t counter(const Stats::Counter& c) { return Stats::get(c); }

// A decoder that waits before decoding, so concurrent readers of one chunk
// surely arrive while its decode is in flight. Counts requests per chunk.
class SlowDecoder final : public BatchDecoder {
 public:
  void submit(std::vector<DecodeRequest> batch) override {
    std::lock_guard<std::mutex> lk(mu_);
    requests_ += batch.size();
    threads_.emplace_back([b = std::move(batch)]() mutable {
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      for (auto& r : b) r.done(r.output() ? r.source->decode(r.index, r.out) : no_buffer(r));
    });
  }
  void shutdown() override {
    std::vector<std::thread> t;
    {
      std::lock_guard<std::mutex> lk(mu_);
      t.swap(threads_);
    }
    for (auto& th : t) th.join();
  }
  std::string describe() const override { return "slow test decoder"; }
  size_t requests() {
    std::lock_guard<std::mutex> lk(mu_);
    return requests_;
  }
  ~SlowDecoder() override { shutdown(); }

 private:
  std::mutex mu_;
  size_t requests_ = 0;
  std::vector<std::thread> threads_;
};

// Chunk and tensor boundaries of a container (offsets in the original file).
std::vector<uint64_t> boundaries(const sfs::path& container) {
  std::vector<uint64_t> b;
  auto rd = wcodec::Reader::open(container.string());
  EXPECT_TRUE(rd.ok()) << rd.status().ToString();
  if (!rd.ok()) return b;
  b.push_back(0);
  b.push_back((*rd)->data_start());
  for (size_t i = 0; i < (*rd)->num_chunks(); ++i) b.push_back((*rd)->chunk(i).decoded_offset);
  for (const auto& t : (*rd)->header().tensors) b.push_back((*rd)->data_start() + t.begin);
  b.push_back((*rd)->original_size());
  return b;
}

}  // namespace

TEST(fs_core, ListingShowsPresentedNames) {
  TestStore store;
  auto fs = store.open();
  ASSERT_TRUE(fs);
  auto r = fs->readdir(Filesystem::kRootId);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::map<std::string, mode_t> names;
  for (const auto& d : *r) {
    EXPECT_EQ(names.count(d.name), 0u) << "duplicate entry " << d.name;
    names[d.name] = d.type;
  }
  for (const auto& m : store.models()) {
    EXPECT_EQ(names[m.stem + ".safetensors"], S_IFREG) << m.stem;
    EXPECT_EQ(names.count(m.stem + ".wcodec"), 0u) << "stored name must be hidden";
  }
  EXPECT_EQ(names["notes.txt"], S_IFREG);
  EXPECT_EQ(names["sub"], S_IFDIR);
  EXPECT_EQ(names["escape"], S_IFLNK);
  EXPECT_EQ(names["up"], S_IFLNK);
  EXPECT_EQ(names["linkdir"], S_IFLNK);
  EXPECT_EQ(names[".wcodecfs"], S_IFDIR);
  EXPECT_EQ(names.count("."), 1u);
  EXPECT_EQ(names.count(".."), 1u);

  auto sub = fs->lookup(Filesystem::kRootId, "sub");
  ASSERT_TRUE(sub.ok());
  auto rs = fs->readdir(sub->id);
  ASSERT_TRUE(rs.ok());
  std::set<std::string> sub_names;
  for (const auto& d : *rs) sub_names.insert(d.name);
  EXPECT_EQ(sub_names, (std::set<std::string>{".", "..", "readme.md", "stories260K.rtn-int8.safetensors"}));
}

TEST(fs_core, StatAndOpenDecodeNothing) {
  TestStore store(/*with_large=*/true);
  auto fs = store.open();
  ASSERT_TRUE(fs);
  ASSERT_TRUE(fs->readdir(Filesystem::kRootId).ok());
  for (const auto& m : store.models()) {
    auto e = fs->lookup_path(m.stem + ".safetensors");
    ASSERT_TRUE(e.ok()) << m.stem << ": " << e.status().ToString();
    EXPECT_EQ(static_cast<uint64_t>(e->attr.st_size), sfs::file_size(fstest::original_of(m.stem))) << m.stem;
    EXPECT_TRUE(S_ISREG(e->attr.st_mode));
    EXPECT_EQ(e->attr.st_mode & 0222, 0u) << "virtual files are read-only";
    EXPECT_EQ(e->cache, Cacheability::kImmutable);
    auto a = fs->getattr(e->id);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->attr.st_size, e->attr.st_size);
    auto h = fs->open(e->id, O_RDONLY);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_TRUE((*h)->keep_cache());
    EXPECT_FALSE((*h)->direct_io());
  }
  auto nested = fs->lookup_path("sub/stories260K.rtn-int8.safetensors");
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ(static_cast<uint64_t>(nested->attr.st_size),
            sfs::file_size(fstest::original_of("stories260K.rtn-int8")));
  Stats& s = fs->stats();
  EXPECT_EQ(counter(s.chunks_decoded), 0u);
  EXPECT_EQ(counter(s.bytes_decoded), 0u);
  EXPECT_EQ(counter(s.cache_misses), 0u);
  EXPECT_EQ(counter(s.readahead_chunks), 0u);
  EXPECT_EQ(fs->cache().bytes(), 0u);
}

TEST(fs_core, FullReadsMatchOriginal) {
  TestStore store(/*with_large=*/true);
  auto fs = store.open();
  ASSERT_TRUE(fs);
  for (const auto& m : store.models()) {
    const auto original = wctest::read_file(fstest::original_of(m.stem));
    auto h = open_path(*fs, m.stem + ".safetensors");
    ASSERT_TRUE(h);
    // 128 KiB requests, the kernel's default read size.
    const auto got = read_all(*fs, *h, 128 * 1024);
    EXPECT_EQ(got.size(), original.size()) << m.stem;
    EXPECT_EQ(wctest::sha256_hex(got), wctest::sha256_hex(original)) << m.stem;
    // Past the end: nothing; straddling the end: the tail only.
    EXPECT_TRUE(read_range(*fs, *h, original.size(), 4096).empty());
    EXPECT_TRUE(read_range(*fs, *h, original.size() + 12345, 4096).empty());
    const auto tail = read_range(*fs, *h, original.size() - 100, 4096);
    EXPECT_EQ(tail, std::vector<uint8_t>(original.end() - 100, original.end()));
  }
  // One read of a whole small file at once (many chunks in one batch).
  const auto original = wctest::read_file(fstest::original_of("stories260K.f32"));
  auto h = open_path(*fs, "stories260K.f32.safetensors");
  ASSERT_TRUE(h);
  EXPECT_EQ(read_range(*fs, *h, 0, original.size()), original);
  EXPECT_EQ(counter(fs->stats().read_errors), 0u);
}

TEST(fs_core, ConcurrentRandomReadsAreCorrect) {
  TestStore store(/*with_large=*/true);
  auto fs = store.open(FsOptions{.cache_bytes = 8u << 20, .decode_threads = 4, .readahead_max = 64u << 20,
                                 .decoder = nullptr, .make_decoder = {}, .staging = "", .encode = {}, .kinds = {}});
  ASSERT_TRUE(fs);
  struct File {
    std::string name;
    std::vector<uint8_t> original;
    std::vector<uint64_t> edges;
    std::shared_ptr<FileHandle> shared;
  };
  std::vector<File> files;
  for (const auto& m : store.models()) {
    File f;
    f.name = m.stem + ".safetensors";
    f.original = wctest::read_file(fstest::original_of(m.stem));
    f.edges = boundaries(fstest::encoded(m));
    f.shared = open_path(*fs, f.name);
    ASSERT_TRUE(f.shared);
    files.push_back(std::move(f));
  }
  constexpr int kThreads = 8;
  const int kReads = fstest::kSanitized ? 120 : 400;
  std::atomic<int> bad{0}, done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1234 + t);
      // Half the threads share one handle per file (shared readahead state),
      // the others open their own.
      std::vector<std::shared_ptr<FileHandle>> handles;
      for (auto& f : files) handles.push_back(t % 2 ? f.shared : open_path(*fs, f.name));
      static const uint64_t kLens[] = {1, 7, 4096, 65536 + 13, 128 * 1024, 1 << 20};
      for (int i = 0; i < kReads; ++i) {
        const size_t fi = rng() % files.size();
        const File& f = files[fi];
        const uint64_t size = f.original.size();
        uint64_t off;
        if (rng() % 2) {
          // Around a chunk or tensor boundary, so the range straddles it.
          const uint64_t edge = f.edges[rng() % f.edges.size()];
          const int64_t delta = static_cast<int64_t>(rng() % 601) - 300;
          off = static_cast<uint64_t>(std::clamp<int64_t>(static_cast<int64_t>(edge) + delta, 0,
                                                          static_cast<int64_t>(size) - 1));
        } else {
          off = rng() % size;
        }
        const uint64_t len = rng() % 3 ? kLens[rng() % 6] : 1 + rng() % (2u << 20);
        auto r = fs->read(*handles[fi], off, len);
        if (!r.ok()) {
          ++bad;
          ADD_FAILURE() << f.name << " [" << off << ", +" << len << "): " << r.status().ToString();
          continue;
        }
        const uint64_t want = std::min(len, size - off);
        const auto got = r->gather();
        if (got.size() != want || !std::equal(got.begin(), got.end(), f.original.begin() + off)) {
          if (++bad < 5) ADD_FAILURE() << f.name << " [" << off << ", +" << len << ") differs";
        }
        ++done;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(done.load(), kThreads * kReads);
  EXPECT_EQ(counter(fs->stats().read_errors), 0u);
}

TEST(fs_core, ConcurrentMissesOnOneChunkDecodeOnce) {
  TestStore store;
  auto slow = std::make_shared<SlowDecoder>();
  auto fs = store.open(FsOptions{.cache_bytes = 0, .decode_threads = 0, .readahead_max = 0, .decoder = slow, .make_decoder = {},
                                 .staging = "", .encode = {}, .kinds = {}});
  ASSERT_TRUE(fs);
  const auto original = wctest::read_file(fstest::original_of("stories260K.f32"));
  const auto edges = boundaries(fstest::encoded({"stories260K.f32", 32 * 1024}));
  const uint64_t off = edges[edges.size() / 2] + 10;  // inside one chunk
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::vector<std::vector<uint8_t>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto h = open_path(*fs, "stories260K.f32.safetensors");
      start.arrive_and_wait();
      got[t] = read_range(*fs, *h, off, 1000);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_TRUE(std::equal(got[t].begin(), got[t].end(), original.begin() + off) && got[t].size() == 1000) << t;
  EXPECT_EQ(slow->requests(), 1u);
  EXPECT_EQ(counter(fs->stats().cache_misses), 1u);
  EXPECT_EQ(counter(fs->stats().cache_hits), kThreads - 1u);
}

// Submits `batch` to `dec`, waits until every request's done has run and
// shuts the decoder down. Returns each request's status (by position in the
// batch) and how many times its done ran (calls).
struct DecodeOutcome {
  std::vector<Status> result;
  std::vector<int> calls;
};
DecodeOutcome decode_and_wait(CpuBatchDecoder& dec, std::vector<DecodeRequest> batch) {
  const size_t n = batch.size();
  DecodeOutcome o{std::vector<Status>(n), std::vector<int>(n, 0)};
  std::mutex mu;
  std::latch all(static_cast<ptrdiff_t>(n));
  for (size_t i = 0; i < n; ++i) {
    batch[i].done = [&, i](const Status& st) {
      {
        std::lock_guard<std::mutex> lk(mu);
        ++o.calls[i];
        o.result[i] = st;
      }
      all.count_down();
    };
  }
  dec.submit(std::move(batch));
  all.wait();
  dec.shutdown();
  return o;
}

// The CPU decoder takes waiting requests of one source together where the
// source decodes them faster as a group (float chunks of one tensor):
// every request completes once with the original bytes.
// Every chunk of a model submitted at once to the CPU decoder: each comes
// back once with the original bytes; returns how many groups the decoder ran
// (groups) and how many of them joined chunks of different tensors (across).
void decode_all_through_queue(const fstest::ModelFile& m, int* groups, int* across) {
  class Counting final : public ChunkSource {
   public:
    Counting(std::shared_ptr<const ChunkSource> s, std::vector<size_t> tensor) : s_(std::move(s)), tensor_(std::move(tensor)) {}
    size_t num_chunks() const override { return s_->num_chunks(); }
    uint64_t chunk_offset(size_t i) const override { return s_->chunk_offset(i); }
    uint32_t chunk_size(size_t i) const override { return s_->chunk_size(i); }
    uint64_t stream_begin() const override { return s_->stream_begin(); }
    uint64_t stream_end() const override { return s_->stream_end(); }
    size_t chunk_at(uint64_t pos) const override { return s_->chunk_at(pos); }
    Status decode(size_t i, uint8_t* out) const override { return s_->decode(i, out); }
    int max_group() const override { return s_->max_group(); }
    int group_size(size_t avail) const override { return s_->group_size(avail); }
    bool pairable(size_t a, size_t b) const override { return s_->pairable(a, b); }
    void decode_group(const size_t* idx, uint8_t* const* outs, int n, Status* sts) const override {
      if (n > 1) {
        groups.fetch_add(1);
        bool mixed = false;
        for (int k = 1; k < n; ++k) mixed |= tensor_[idx[k]] != tensor_[idx[0]];
        across.fetch_add(mixed);
      }
      s_->decode_group(idx, outs, n, sts);
    }
    const std::string& name() const override { return s_->name(); }
    mutable std::atomic<int> groups{0}, across{0};

   private:
    std::shared_ptr<const ChunkSource> s_;
    std::vector<size_t> tensor_;  // chunk -> tensor
  };
  const auto original = wctest::read_file(fstest::original_of(m.stem));
  auto rd = wcodec::Reader::open(fstest::encoded(m).string());
  ASSERT_TRUE(rd.ok()) << rd.status().ToString();
  const wcodec::SafetensorsHeader h = (*rd)->header();
  std::shared_ptr<const wcodec::Reader> reader(std::move(rd).value());
  auto src = WcodecChunkSource::make(reader, "model.wcodec");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  std::vector<size_t> tensor((*src)->num_chunks());
  for (size_t i = 0; i < tensor.size(); ++i) {
    const uint64_t rel = (*src)->chunk_offset(i) - h.data_start;
    while (tensor[i] + 1 < h.tensors.size() && h.tensors[tensor[i]].end <= rel) ++tensor[i];
    if (i + 1 < tensor.size()) tensor[i + 1] = tensor[i];
  }
  auto counting = std::make_shared<Counting>(*src, std::move(tensor));

  CpuBatchDecoder dec(2, nullptr);
  const size_t n = counting->num_chunks();
  std::vector<std::vector<uint8_t>> out(n);
  std::vector<DecodeRequest> batch;
  for (size_t i = 0; i < n; ++i) {
    out[i].assign(counting->chunk_size(i), 0);
    DecodeRequest r;
    r.source = counting;
    r.index = i;
    r.out = out[i].data();
    r.background = (i % 3) != 0;
    batch.push_back(std::move(r));
  }
  const DecodeOutcome o = decode_and_wait(dec, std::move(batch));
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(o.calls[i], 1) << "chunk " << i;
    ASSERT_TRUE(o.result[i].ok()) << "chunk " << i << ": " << o.result[i].ToString();
    const uint64_t off = counting->chunk_offset(i);
    EXPECT_TRUE(std::equal(out[i].begin(), out[i].end(), original.begin() + static_cast<ptrdiff_t>(off)))
        << "chunk " << i << " decoded wrong bytes";
  }
  *groups = counting->groups.load();
  *across = counting->across.load();
}

// 4 KiB chunks: several per tensor, decoded in groups.
TEST(fs_core, CpuDecoderDecodesFloatChunksInGroups) {
  int groups = 0, across = 0;
  decode_all_through_queue({"stories260K.bf16", 4096}, &groups, &across);
  EXPECT_GT(groups, 10) << "too few requests were decoded together";
}

// Default chunks: every tensor of stories260K is one chunk, and chunks of
// tensors of one shape (each with its own model) decode together.
TEST(fs_core, CpuDecoderGroupsChunksOfTensorsOfOneShape) {
  int groups = 0, across = 0;
  decode_all_through_queue({"stories260K.bf16", 0}, &groups, &across);
  EXPECT_GT(across, 5) << "too few groups joined chunks of different tensors (" << groups << " groups)";
}

// Requests whose memory the decoder asks for (DecodeRequest::buffer, what
// the chunk cache submits): each buffer is asked for once, on a decoder
// thread (named wcfs-decode, as top -H shows it), and a request that gets no
// memory fails alone, naming the file and the chunk, while the chunks
// decoded in the same groups come out right.
TEST(fs_core, CpuDecoderAsksForBuffersOnItsThreads) {
  const fstest::ModelFile m{"stories260K.bf16", 4096};
  const auto original = wctest::read_file(fstest::original_of(m.stem));
  auto rd = wcodec::Reader::open(fstest::encoded(m).string());
  ASSERT_TRUE(rd.ok()) << rd.status().ToString();
  std::shared_ptr<const wcodec::Reader> reader(std::move(rd).value());
  auto src = WcodecChunkSource::make(reader, "model.wcodec");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  const std::shared_ptr<const ChunkSource> source = *src;
  const size_t n = source->num_chunks();
  ASSERT_GT(n, 20u);
  const size_t starved = n / 2;  // gets no memory
  const std::thread::id submitter = std::this_thread::get_id();

  CpuBatchDecoder dec(2, nullptr);
  std::vector<std::vector<uint8_t>> out(n);
  std::vector<int> asked(n, 0);
  std::vector<bool> on_submitter(n, false);
  std::vector<std::string> thread_name(n);
  std::mutex mu;
  std::vector<DecodeRequest> batch;
  for (size_t i = 0; i < n; ++i) {
    DecodeRequest r;
    r.source = source;
    r.index = i;
    r.background = true;
    r.buffer = [&, i]() -> uint8_t* {
      char name[16] = {};
      (void)pthread_getname_np(pthread_self(), name, sizeof name);
      std::lock_guard<std::mutex> lk(mu);
      ++asked[i];
      on_submitter[i] = std::this_thread::get_id() == submitter;
      thread_name[i] = name;
      if (i == starved) return nullptr;
      out[i].assign(source->chunk_size(i), 0);
      return out[i].data();
    };
    batch.push_back(std::move(r));
  }
  const DecodeOutcome o = decode_and_wait(dec, std::move(batch));
  const std::vector<Status>& result = o.result;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(asked[i], 1) << "chunk " << i;
    EXPECT_FALSE(on_submitter[i]) << "chunk " << i << ": buffer asked for on the submitting thread";
    EXPECT_EQ(thread_name[i], "wcfs-decode") << "chunk " << i;
    EXPECT_EQ(o.calls[i], 1) << "chunk " << i;
    if (i == starved) {
      EXPECT_EQ(result[i].code(), Code::kNoResources) << result[i].ToString();
      EXPECT_NE(result[i].message().find("model.wcodec"), std::string::npos) << result[i].message();
      EXPECT_NE(result[i].message().find("chunk " + std::to_string(i)), std::string::npos) << result[i].message();
      continue;
    }
    ASSERT_TRUE(result[i].ok()) << "chunk " << i << ": " << result[i].ToString();
    const uint64_t off = source->chunk_offset(i);
    EXPECT_TRUE(std::equal(out[i].begin(), out[i].end(), original.begin() + static_cast<ptrdiff_t>(off)))
        << "chunk " << i << " decoded wrong bytes";
  }
}

TEST(fs_core, CacheStaysWithinBudget) {
  TestStore store(/*with_large=*/true);
  const auto& m = store.models().back();  // the largest available
  const uint64_t chunk = m.chunk_bytes ? m.chunk_bytes : wcodec::EncodeConfig{}.chunk_bytes;
  const uint64_t budget = 2 * chunk + chunk / 2;
  auto fs = store.open(FsOptions{.cache_bytes = budget, .decode_threads = 0, .readahead_max = 64u << 20,
                                 .decoder = nullptr, .make_decoder = {}, .staging = "", .encode = {}, .kinds = {}});
  ASSERT_TRUE(fs);
  auto h = open_path(*fs, m.stem + ".safetensors");
  ASSERT_TRUE(h);
  const auto original = wctest::read_file(fstest::original_of(m.stem));
  std::vector<uint8_t> got;
  uint64_t most = 0;
  while (got.size() < original.size()) {
    auto r = fs->read(*h, got.size(), 128 * 1024);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_GT(r->size(), 0u);
    const auto g = r->gather();  // memory and fd slices
    got.insert(got.end(), g.begin(), g.end());
    r = Status::Internal("released");  // drop the pins before measuring
    most = std::max(most, fs->cache().bytes());
    ASSERT_LE(fs->cache().bytes(), budget + chunk) << "at offset " << got.size();
  }
  EXPECT_EQ(wctest::sha256_hex(got), wctest::sha256_hex(original));
  EXPECT_GT(counter(fs->stats().cache_evictions), 0u);
  EXPECT_LE(most, budget + chunk);
  // The buffer pool of a small cache maps 2 MiB regions, and evicted
  // chunks' memory is used again instead of new regions.
  EXPECT_LE(fs->cache().mapped_bytes(), 2 * (uint64_t{2} << 20));
}

// A large cache, decoding on the reading thread, no readahead: what the
// drop-behind tests read is all that is decoded.
static FsOptions drop_behind_options(bool drop) {
  FsOptions o;
  o.cache_bytes = uint64_t{1} << 30;
  o.decode_threads = 0;
  o.readahead_max = 0;
  o.drop_behind = drop;
  return o;
}

// Drop-behind (the mount's default): a chunk whose every byte went to a
// reader of a kernel-cached handle leaves the cache when its last pin goes,
// and its memory takes the next chunks; a chunk read in part stays, and
// without the option every decoded chunk stays within the budget.
TEST(fs_core, DropBehindFreesChunksTheKernelHasRead) {
  TestStore store(/*with_large=*/true);
  // The model of the most chunks (sanitized builds have small ones only).
  const fstest::ModelFile* pick = nullptr;
  uint64_t chunk = 0, most = 0;
  for (const auto& mf : store.models()) {
    const uint64_t c = mf.chunk_bytes ? mf.chunk_bytes : wcodec::EncodeConfig{}.chunk_bytes;
    const uint64_t n = sfs::file_size(fstest::original_of(mf.stem)) / c;
    if (n > most) pick = &mf, chunk = c, most = n;
  }
  ASSERT_TRUE(pick);
  const auto& m = *pick;
  const auto original = wctest::read_file(fstest::original_of(m.stem));
  ASSERT_GT(original.size(), 16 * chunk) << m.stem << ": a model of many chunks";
  for (const bool drop : {true, false}) {
    SCOPED_TRACE(drop ? "drop_behind" : "keep");
    auto fs = store.open(drop_behind_options(drop));
    ASSERT_TRUE(fs);
    auto h = open_path(*fs, m.stem + ".safetensors");
    ASSERT_TRUE(h);
    // The whole file in reads of two chunks' size (a read's pins go when
    // it is done).
    std::vector<uint8_t> got;
    while (got.size() < original.size()) {
      auto r = fs->read(*h, got.size(), 2 * chunk);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_GT(r->size(), 0u);
      const auto g = r->gather();
      got.insert(got.end(), g.begin(), g.end());
    }
    EXPECT_EQ(wctest::sha256_hex(got), wctest::sha256_hex(original));
    const uint64_t decoded = counter(fs->stats().bytes_decoded), dropped = counter(fs->stats().cache_drop_behind);
    ASSERT_GT(decoded, original.size() / 2) << "most of the file is decoded chunks";
    if (drop) {
      // Every chunk is dropped once all its bytes were read, in one read
      // or in two (a chunk a read boundary cuts).
      EXPECT_EQ(dropped, counter(fs->stats().chunks_decoded)) << "every chunk was read whole";
      EXPECT_LT(fs->cache().bytes(), decoded / 2);
      // Their memory was used again: far fewer pages touched than decoded.
      EXPECT_LT(fs->cache().populated_bytes(), decoded / 2);
    } else {
      EXPECT_EQ(dropped, 0u);
      EXPECT_EQ(fs->cache().bytes(), decoded);
      EXPECT_GE(fs->cache().populated_bytes(), decoded);
      EXPECT_EQ(counter(fs->stats().cache_evictions), 0u);
    }
    // The bytes come back the same either way (a dropped chunk decodes
    // again).
    const uint64_t before = counter(fs->stats().chunks_decoded);
    auto again = fs->read(*h, 0, original.size());
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    const auto g = again->gather();
    EXPECT_TRUE(std::equal(g.begin(), g.end(), original.begin()));
    if (drop) EXPECT_GT(counter(fs->stats().chunks_decoded), before);
    else EXPECT_EQ(counter(fs->stats().chunks_decoded), before) << "every chunk stayed in the cache";
  }
}

// A chunk only part of which was read stays in the cache with drop-behind.
TEST(fs_core, DropBehindKeepsChunksReadInPart) {
  TestStore store(/*with_large=*/true);
  const auto& m = store.models().back();
  auto fs = store.open(drop_behind_options(true));
  ASSERT_TRUE(fs);
  auto h = open_path(*fs, m.stem + ".safetensors");
  ASSERT_TRUE(h);
  const auto original = wctest::read_file(fstest::original_of(m.stem));
  // Small reads from the middle of the file: each touches a part of a
  // chunk; none is dropped, and a second read of the same bytes decodes
  // nothing.
  const uint64_t mid = original.size() / 2;
  for (uint64_t off = mid; off < mid + 4096; off += 512) {
    auto r = fs->read(*h, off, 512);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const auto g = r->gather();
    ASSERT_TRUE(std::equal(g.begin(), g.end(), original.begin() + static_cast<std::ptrdiff_t>(off)));
  }
  const uint64_t decoded = counter(fs->stats().chunks_decoded);
  ASSERT_GT(decoded, 0u);
  EXPECT_EQ(counter(fs->stats().cache_drop_behind), 0u);
  auto r = fs->read(*h, mid, 4096);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(counter(fs->stats().chunks_decoded), decoded);
}

TEST(fs_core, ReadaheadFollowsSequentialReadsOnly) {
  TestStore store(/*with_large=*/true);
  const auto& m = store.models().back();
  const uint64_t unit = m.chunk_bytes ? m.chunk_bytes : wcodec::EncodeConfig{}.chunk_bytes;
  // A window of two chunks at most, so a jump of a fraction of the file is
  // recognisably not sequential even for the small files of ASan builds.
  auto fs = store.open(FsOptions{.cache_bytes = 0, .decode_threads = 0, .readahead_max = 2 * unit,
                                 .decoder = nullptr, .make_decoder = {}, .staging = "", .encode = {}, .kinds = {}});
  ASSERT_TRUE(fs);
  const auto original = wctest::read_file(fstest::original_of(m.stem));
  const uint64_t size = original.size();
  ASSERT_GT(size, 8 * unit);

  // Sequential: 64 KiB reads over the first half.
  auto seq = open_path(*fs, m.stem + ".safetensors");
  ASSERT_TRUE(seq);
  for (uint64_t off = 0; off < size / 2; off += 64 * 1024) {
    auto r = fs->read(*seq, off, 64 * 1024);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  EXPECT_GT(counter(fs->stats().readahead_chunks), 0u);
  EXPECT_GT(counter(fs->stats().readahead_hits), 0u);
  EXPECT_GT(seq->readahead().window(), 0u);
  // A jump elsewhere stops it.
  ASSERT_TRUE(fs->read(*seq, size - size / 10, 4096).ok());
  EXPECT_EQ(seq->readahead().window(), 0u);

  // Random: a fresh handle reading far-apart small ranges submits nothing.
  const uint64_t before = counter(fs->stats().readahead_chunks);
  auto rnd = open_path(*fs, m.stem + ".safetensors");
  ASSERT_TRUE(rnd);
  for (double frac : {0.9, 0.1, 0.6, 0.05, 0.95, 0.3}) {
    const uint64_t off = static_cast<uint64_t>(frac * static_cast<double>(size));
    auto r = fs->read(*rnd, off, 4096);
    ASSERT_TRUE(r.ok());
    const auto got = r->gather();
    EXPECT_TRUE(std::equal(got.begin(), got.end(), original.begin() + off));
  }
  EXPECT_EQ(counter(fs->stats().readahead_chunks), before);
  EXPECT_EQ(rnd->readahead().window(), 0u);
}

// The segment rules of Readahead::on_read, on a file of three tensors
// [0,1M) [1M,9M) [9M,17M) read in 128 KiB requests with 256 KiB chunks.
TEST(fs_core, ReadaheadSegmentRules) {
  static constexpr uint64_t K = 1024, M = 1024 * K, unit = 256 * K, size = 17 * M;
  auto seg = [](uint64_t end) -> std::pair<uint64_t, uint64_t> {
    const uint64_t p = end - 1;
    if (p < M) return {0, M};
    if (p < 9 * M) return {M, 9 * M};
    return {9 * M, 17 * M};
  };
  auto rd = [&](Readahead& ra, uint64_t off, uint64_t len) {
    const auto [b, e] = seg(off + len);
    return ra.on_read(off, len, size, unit, b, e);
  };
  {
    // A loader of the middle tensor: a jump to 1M (page-aligned from just
    // before it), then sequential: the prefetch never passes 9M.
    Readahead ra(64 * M);
    EXPECT_EQ(rd(ra, 0, 4 * K), (std::pair<uint64_t, uint64_t>{4 * K, 4 * K + unit}));
    rd(ra, M - 4 * K, 128 * K);
    uint64_t furthest = 0;
    for (uint64_t off = M + 124 * K; off < 9 * M; off += 128 * K)
      furthest = std::max(furthest, rd(ra, off, std::min(128 * K, 9 * M - off)).second);
    EXPECT_EQ(furthest, 9 * M);
    // Its first read past the end restarts the window: one chunk ahead.
    const auto past = rd(ra, 9 * M, 128 * K);
    EXPECT_LE(past.second, 9 * M + 128 * K + unit);
  }
  {
    // A reader streaming from 0 crosses 1M (restart) and 9M: past the
    // second crossing the window runs on beyond the tensor.
    Readahead ra(64 * M);
    uint64_t furthest = 0;
    for (uint64_t off = 0; off < 9 * M + 512 * K; off += 128 * K)
      furthest = std::max(furthest, rd(ra, off, 128 * K).second);
    EXPECT_GT(furthest, 9 * M + 2 * M);
  }
}

// Waits until no decode has finished for 200 ms (prefetches run on the
// decode pool).
void settle(Filesystem& fs) {
  uint64_t last = counter(fs.stats().chunks_decoded);
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const uint64_t now = counter(fs.stats().chunks_decoded);
    if (now == last) return;
    last = now;
  }
}

// A loader that reads the header, then one tensor, decodes that tensor's
// chunks and nothing of the tensors after it; a reader streaming the file
// from the start keeps its readahead running across tensors.
TEST(fs_core, ReadaheadOfOneTensorStopsAtItsEnd) {
  // A real model with small chunks (so every build has tensors of many
  // chunks, far from the header).
  wctest::ScratchDir scratch;
  const fstest::ModelFile mf{"stories260K.f32", 8 * 1024};
  sfs::copy_file(fstest::encoded(mf), scratch / (mf.stem + ".wcodec"));
  FsOptions o;
  o.cache_bytes = 256u << 20;
  o.readahead_max = 64u << 20;
  o.staging.clear();
  auto r = Filesystem::create(scratch.path().string(), std::move(o));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto fs = std::move(r).value();
  // The tensor (not the last of the file) with the most chunks among those
  // that begin well past the header: a jump of less than two reads or
  // chunks is indistinguishable from the kernel's out-of-order readahead.
  const std::string stem = mf.stem;
  auto h = open_path(*fs, stem + ".safetensors");
  ASSERT_TRUE(h);
  uint64_t t0 = 0, t1 = 0;
  size_t tensor_chunks = 0;
  {
    // The tensors are the file's segments (the wcodec kind gives them); the
    // tensor data is one decoded extent after the header.
    const auto& seg = h->file().segments();
    const auto& ext = h->file().extents();
    ASSERT_GE(seg.size(), 3u);
    ASSERT_EQ(ext.size(), 2u);
    const auto* dx = std::get_if<DecodedExtent>(&ext[1].what);
    ASSERT_NE(dx, nullptr);
    const uint64_t far = ext[0].length + 4 * std::max<uint64_t>(h->file().chunk_unit(), 64 * 1024);
    for (size_t k = 0; k + 1 < seg.size(); ++k) {  // not the last tensor
      const uint64_t a = seg[k], b = seg[k + 1];
      if (a < far) continue;
      const auto pos = [&](uint64_t off) { return dx->src_offset + (off - ext[1].offset); };
      const size_t n = dx->source->chunk_at(pos(b - 1)) - dx->source->chunk_at(pos(a)) + 1;
      if (n > tensor_chunks) {
        tensor_chunks = n;
        t0 = a;
        t1 = b;
      }
    }
  }
  ASSERT_GE(tensor_chunks, 4u) << "no tensor of 4 chunks or more";
  const auto original = wctest::read_file(fstest::original_of(stem));

  // The loader reads the header (the first extent), then the tensor.
  ASSERT_TRUE(fs->read(*h, 0, h->file().extents()[0].length).ok());
  settle(*fs);
  const uint64_t before = counter(fs->stats().chunks_decoded);
  const uint64_t step = 2 * h->file().chunk_unit();
  for (uint64_t off = t0; off < t1; off += step) {
    const uint64_t n = std::min<uint64_t>(step, t1 - off);
    auto r = fs->read(*h, off, n);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const auto got = r->gather();
    ASSERT_TRUE(std::equal(got.begin(), got.end(), original.begin() + static_cast<std::ptrdiff_t>(off)));
  }
  settle(*fs);
  // Chunks may straddle the tensor's ends by one on each side at most.
  EXPECT_LE(counter(fs->stats().chunks_decoded) - before, tensor_chunks + 2);
  EXPECT_GT(counter(fs->stats().readahead_chunks), 0u) << "readahead did not run inside the tensor";

  // Streaming from offset 0 prefetches past the first tensor boundaries.
  auto s = open_path(*fs, stem + ".safetensors");
  ASSERT_TRUE(s);
  const uint64_t unit = s->file().chunk_unit();
  const uint64_t ra0 = counter(fs->stats().readahead_chunks);
  for (uint64_t off = 0; off < 4 * unit; off += 64 * 1024) ASSERT_TRUE(fs->read(*s, off, 64 * 1024).ok());
  settle(*fs);
  EXPECT_GT(counter(fs->stats().readahead_chunks), ra0);
}

TEST(fs_core, CorruptedChunkIsAnErrorAndTheRestReads) {
  wctest::ScratchDir scratch;
  const fstest::ModelFile m{"stories260K.f32", 32 * 1024};
  size_t nchunks = 0;
  {
    auto rd = wcodec::Reader::open(fstest::encoded(m).string());
    ASSERT_TRUE(rd.ok());
    nchunks = (*rd)->num_chunks();
  }
  ASSERT_GT(nchunks, 4u);
  const auto [bad_begin, bad_end] = fstest::corrupt_copy(fstest::encoded(m), scratch / "bad.wcodec", nchunks / 2);
  ASSERT_LT(bad_begin, bad_end);
  LogCapture logs;
  auto r = Filesystem::create(scratch.path().string());
  ASSERT_TRUE(r.ok());
  auto fs = std::move(r).value();
  const auto original = wctest::read_file(fstest::original_of(m.stem));

  // Stat and open still work: nothing is decoded.
  auto e = fs->lookup_path("bad.safetensors");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(static_cast<uint64_t>(e->attr.st_size), original.size());
  auto h = fs->open(e->id, O_RDONLY);
  ASSERT_TRUE(h.ok());

  Status st;
  EXPECT_TRUE(read_range(*fs, **h, bad_begin, bad_end - bad_begin, &st).empty());
  EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
  // A range straddling into the bad chunk fails too; again on a retry.
  read_range(*fs, **h, bad_begin - 100, 200, &st);
  EXPECT_EQ(st.code(), Code::kCorruption);
  read_range(*fs, **h, bad_end - 1, 1, &st);
  EXPECT_EQ(st.code(), Code::kCorruption);
  // Everything else reads correctly.
  EXPECT_EQ(read_range(*fs, **h, 0, bad_begin), std::vector<uint8_t>(original.begin(), original.begin() + bad_begin));
  EXPECT_EQ(read_range(*fs, **h, bad_end, original.size()),
            std::vector<uint8_t>(original.begin() + bad_end, original.end()));
  EXPECT_GE(counter(fs->stats().read_errors), 3u);
  EXPECT_GE(counter(fs->stats().decode_errors), 1u);

  // Logged, naming store file, tensor and chunk (not the /proc path).
  size_t named = 0;
  for (const auto& l : logs.lines()) {
    EXPECT_EQ(l.find("/proc/self/fd"), std::string::npos) << l;
    if (l.find("bad.wcodec") != std::string::npos && l.find("tensor") != std::string::npos &&
        l.find("chunk") != std::string::npos)
      ++named;
  }
  EXPECT_GE(named, 1u) << "no log line names file, tensor and chunk";
}

TEST(fs_core, PlainFileWinsOverContainer) {
  wctest::ScratchDir scratch;
  fstest::place(fstest::encoded({"stories260K.rtn-int8", 0}), scratch / "x.wcodec");
  sfs::copy_file(fstest::original_of("stories260K.f32"), scratch / "x.safetensors");
  LogCapture logs;
  auto fs = std::move(Filesystem::create(scratch.path().string())).value();
  for (int i = 0; i < 2; ++i) {
    auto r = fs->readdir(Filesystem::kRootId);
    ASSERT_TRUE(r.ok());
    size_t n = 0;
    for (const auto& d : *r) {
      EXPECT_NE(d.name, "x.wcodec");
      n += d.name == "x.safetensors";
    }
    EXPECT_EQ(n, 1u);
    auto e = fs->lookup(Filesystem::kRootId, "x.safetensors");
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(static_cast<uint64_t>(e->attr.st_size), sfs::file_size(fstest::original_of("stories260K.f32")));
    EXPECT_EQ(e->cache, Cacheability::kMutable) << "the plain file is passed through";
  }
  auto h = open_path(*fs, "x.safetensors");
  ASSERT_TRUE(h);
  EXPECT_EQ(read_all(*fs, *h, 1 << 20), wctest::read_file(fstest::original_of("stories260K.f32")));
  EXPECT_EQ(fs->lookup(Filesystem::kRootId, "x.wcodec").status().code(), Code::kNotFound);
  EXPECT_EQ(logs.count_containing("x.safetensors"), 1u) << "warned once";
}

TEST(fs_core, WritesAreRefused) {
  TestStore store;
  auto fs = store.open();
  ASSERT_TRUE(fs);
  for (const char* path : {"stories260K.f32.safetensors", "notes.txt"}) {
    auto e = fs->lookup_path(path);
    ASSERT_TRUE(e.ok());
    for (int flags : {O_WRONLY, O_RDWR, O_RDONLY | O_TRUNC, O_WRONLY | O_APPEND}) {
      EXPECT_EQ(fs->open(e->id, flags).status().code(), Code::kReadOnly) << path << " flags " << flags;
    }
  }
  EXPECT_EQ(fs->modify("mkdir").code(), Code::kReadOnly);
  EXPECT_EQ(wctest::read_file(store.root() / "notes.txt").size(), 24u) << "store untouched";
}

TEST(fs_core, SymlinksArePresentedNotFollowed) {
  TestStore store;
  auto fs = store.open();
  ASSERT_TRUE(fs);
  auto e = fs->lookup(Filesystem::kRootId, "escape");
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(S_ISLNK(e->attr.st_mode));
  auto text = fs->readlink(e->id);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "/etc");
  EXPECT_EQ(fs->open(e->id, O_RDONLY).status().code(), Code::kLoop);
  EXPECT_EQ(fs->lookup(e->id, "passwd").status().code(), Code::kNotDirectory);
  EXPECT_FALSE(fs->lookup_path("escape/hostname").ok());
  EXPECT_FALSE(fs->readdir(e->id).ok());

  auto up = fs->lookup(Filesystem::kRootId, "up");
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(*fs->readlink(up->id), "../..");
  EXPECT_FALSE(fs->lookup_path("up/etc").ok());
  EXPECT_FALSE(fs->lookup_path("linkdir/readme.md").ok()) << "a link to a directory is not traversed";
  EXPECT_TRUE(fs->lookup_path("sub/readme.md").ok());
  // readlink of something else is refused.
  EXPECT_FALSE(fs->readlink(fs->lookup_path("notes.txt")->id).ok());
}

TEST(fs_core, HostileNamesAndStoredFiles) {
  wctest::ScratchDir scratch;
  const sfs::path good = fstest::encoded({"stories260K.rtn-int8", 0});
  std::vector<uint8_t> junk(10000);
  std::mt19937 rng(7);
  for (auto& b : junk) b = static_cast<uint8_t>(rng());
  wctest::write_file(scratch / "junk.wcodec", junk);
  auto bytes = wctest::read_file(good);
  wctest::write_file(scratch / "trunc.wcodec", std::vector<uint8_t>(bytes.begin(), bytes.begin() + bytes.size() / 2));
  wctest::write_file(scratch / "empty.wcodec", {});
  sfs::create_directory(scratch / "dir.wcodec");
  fstest::write_text(scratch / ".wcodec", "only an extension\n");
  fstest::write_text(scratch / "a.gguf.wcodec", "not a container\n");
  sfs::create_symlink("trunc.wcodec", scratch / "link.wcodec");
  // A valid container under a name with a newline, a tab and invalid UTF-8.
  const std::string odd = std::string("we\nird\t\xff\xfe name");
  fstest::place(good, scratch / (odd + ".wcodec"));

  auto fs = std::move(Filesystem::create(scratch.path().string())).value();
  auto r = fs->readdir(Filesystem::kRootId);
  ASSERT_TRUE(r.ok());
  std::set<std::string> names;
  for (const auto& d : *r) names.insert(d.name);
  for (const char* n : {"junk.safetensors", "trunc.safetensors", "empty.safetensors", "dir.wcodec", ".wcodec",
                        "a.gguf", "link.wcodec"})
    EXPECT_EQ(names.count(n), 1u) << n;
  EXPECT_EQ(names.count("a.gguf.wcodec"), 0u) << "the GGUF kind's input is hidden";
  for (const char* n : {"junk.safetensors", "trunc.safetensors", "empty.safetensors", "a.gguf"}) {
    auto e = fs->lookup(Filesystem::kRootId, n);
    EXPECT_FALSE(e.ok()) << n;
    EXPECT_EQ(e.status().code(), Code::kCorruption) << n << ": " << e.status().ToString();
  }
  EXPECT_EQ(names.count(odd + ".safetensors"), 1u);
  {
    auto h = open_path(*fs, odd + ".safetensors");
    ASSERT_TRUE(h);
    EXPECT_EQ(read_all(*fs, *h, 1 << 20), wctest::read_file(fstest::original_of("stories260K.rtn-int8")));
  }
  EXPECT_TRUE(fs->lookup(Filesystem::kRootId, "dir.wcodec").ok());
  EXPECT_TRUE(fs->lookup(Filesystem::kRootId, ".wcodec").ok());
  EXPECT_TRUE(S_ISLNK(fs->lookup(Filesystem::kRootId, "link.wcodec")->attr.st_mode));
  EXPECT_EQ(fs->lookup(Filesystem::kRootId, "link.safetensors").status().code(), Code::kNotFound)
      << "a symlinked container is not followed";

  EXPECT_EQ(fs->lookup(Filesystem::kRootId, "").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(fs->lookup(Filesystem::kRootId, ".").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(fs->lookup(Filesystem::kRootId, "..").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(fs->lookup(Filesystem::kRootId, "a/b").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(fs->lookup(Filesystem::kRootId, std::string(300, 'x')).status().code(), Code::kNameTooLong);
  EXPECT_EQ(fs->getattr(987654321).status().code(), Code::kStale);
  EXPECT_EQ(fs->lookup(987654321, "x").status().code(), Code::kStale);
}

TEST(fs_core, StatsFileIsJson) {
  TestStore store;
  auto fs = store.open();
  ASSERT_TRUE(fs);
  auto h0 = open_path(*fs, "stories260K.f32.safetensors");
  ASSERT_TRUE(h0);
  ASSERT_TRUE(fs->read(*h0, 0, 100000).ok());

  auto e = fs->lookup_path(".wcodecfs/stats");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->cache, Cacheability::kVolatile);
  EXPECT_EQ(e->attr.st_mode & 0777, 0444u);
  auto h = fs->open(e->id, O_RDONLY);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE((*h)->direct_io());
  const auto bytes = read_all(*fs, **h, 4096);
  const auto j = nlohmann::json::parse(std::string(bytes.begin(), bytes.end()));
  EXPECT_GT(j["cache"]["bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(j["decode"]["chunks"].get<uint64_t>(), 0u);
  EXPECT_GT(j["decode"]["bytes"].get<uint64_t>(), 0u);
  EXPECT_GE(j["decode"]["seconds"].get<double>(), 0.0);
  EXPECT_GT(j["cache"]["misses"].get<uint64_t>(), 0u);
  EXPECT_GE(j["cache"]["mapped_bytes"].get<uint64_t>(), j["cache"]["bytes"].get<uint64_t>());
  EXPECT_TRUE(j["cache"].contains("hits"));
  EXPECT_TRUE(j["readahead"].contains("hits"));
  EXPECT_EQ(j["errors"].get<uint64_t>(), 0u);
  // Stats cannot be written; the control directory lists it.
  EXPECT_EQ(fs->open(e->id, O_WRONLY).status().code(), Code::kReadOnly);
  auto cd = fs->lookup(Filesystem::kRootId, ".wcodecfs");
  ASSERT_TRUE(cd.ok());
  auto list = fs->readdir(cd->id);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 3u);
}

TEST(fs_core, ForgetReleasesNodes) {
  TestStore store;
  auto fs = store.open();
  ASSERT_TRUE(fs);
  const size_t base = fs->node_count();
  auto a = fs->lookup(Filesystem::kRootId, "stories260K.f32.safetensors");
  auto b = fs->lookup(Filesystem::kRootId, "stories260K.f32.safetensors");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->id, b->id) << "one node per name while referenced";
  EXPECT_EQ(fs->node_count(), base + 1);
  fs->forget(a->id, 1);
  EXPECT_EQ(fs->node_count(), base + 1);
  fs->forget(a->id, 1);
  EXPECT_EQ(fs->node_count(), base);
  auto c = fs->lookup(Filesystem::kRootId, "stories260K.f32.safetensors");
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->id, a->id) << "ids are never reused";
  fs->forget(Filesystem::kRootId, 100);  // the root is never forgotten
  EXPECT_TRUE(fs->getattr(Filesystem::kRootId).ok());
}

TEST(fs_core, ForgottenFileKeepsItsDecodedChunks) {
  TestStore store;
  auto fs = store.open();
  ASSERT_TRUE(fs);
  const auto original = wctest::read_file(fstest::original_of("stories260K.f32"));
  auto e = fs->lookup(Filesystem::kRootId, "stories260K.f32.safetensors");
  ASSERT_TRUE(e.ok());
  {
    auto h = fs->open(e->id, O_RDONLY);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(read_all(*fs, **h, 1 << 20), original);
  }
  const uint64_t decoded = counter(fs->stats().chunks_decoded);
  EXPECT_GT(decoded, 0u);
  // The kernel forgets the inode (memory pressure, drop_caches) and looks
  // the name up again: a new node, but the same cache key.
  fs->forget(e->id, 1);
  auto e2 = fs->lookup(Filesystem::kRootId, "stories260K.f32.safetensors");
  ASSERT_TRUE(e2.ok());
  EXPECT_NE(e2->id, e->id);
  auto h2 = fs->open(e2->id, O_RDONLY);
  ASSERT_TRUE(h2.ok());
  EXPECT_EQ(read_all(*fs, **h2, 1 << 20), original);
  EXPECT_EQ(counter(fs->stats().chunks_decoded), decoded) << "chunks were decoded again";
}

TEST(fs_core, PassthroughAndNestedFiles) {
  TestStore store;
  auto fs = store.open();
  ASSERT_TRUE(fs);
  auto h = open_path(*fs, "notes.txt");
  ASSERT_TRUE(h);
  EXPECT_FALSE(h->keep_cache());
  const auto notes = read_all(*fs, *h, 4096);
  EXPECT_EQ(std::string(notes.begin(), notes.end()), "plain file in the store\n");
  auto h2 = open_path(*fs, "sub/readme.md");
  ASSERT_TRUE(h2);
  EXPECT_EQ(read_all(*fs, *h2, 3).size(), 9u);
  auto h3 = open_path(*fs, "sub/stories260K.rtn-int8.safetensors");
  ASSERT_TRUE(h3);
  EXPECT_EQ(read_all(*fs, *h3, 100000), wctest::read_file(fstest::original_of("stories260K.rtn-int8")));
  // Writable (the staging tree) by default; read-only without staging.
  auto st = fs->statfs();
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE(st->f_flag & ST_RDONLY);
  FsOptions ro;
  ro.staging.clear();
  auto fs_ro = store.open(std::move(ro));
  ASSERT_TRUE(fs_ro);
  auto st_ro = fs_ro->statfs();
  ASSERT_TRUE(st_ro.ok());
  EXPECT_TRUE(st_ro->f_flag & ST_RDONLY);
}
