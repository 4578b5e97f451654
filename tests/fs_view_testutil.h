// tests/fs_view_testutil.h — what the in-process suites of the store kinds'
// views share (test_fs_hf_gguf*.cpp, test_fs_trellis_gguf.cpp,
// test_fs_cawsf_gguf.cpp, test_fs_encode_queue.cpp): a Filesystem over a
// store with every kind, a directory's names, a file read whole through
// the Filesystem, a view read with the check that listing and stat decoded
// nothing, and the log lines captured while a test runs.
// Thread-safety: LogLines may be written from any thread (the capture
// callback locks); the rest are plain functions for one test thread.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "wcodecfs/filesystem.h"
#include "wcodecfs/fs_log.h"

namespace fsview {

namespace sfs = std::filesystem;

// A Filesystem over `store` with the default kinds and no staging
// directory (null after a failed EXPECT).
inline std::unique_ptr<wcodecfs::Filesystem> open_store(const sfs::path& store) {
  wcodecfs::FsOptions o;
  o.staging = "";
  o.kinds = wcodecfs::default_kinds();
  auto fs = wcodecfs::Filesystem::create(store.string(), o);
  EXPECT_TRUE(fs.ok()) << fs.status().ToString();
  return fs.ok() ? std::move(fs).value() : nullptr;
}

// The names the Filesystem lists in `dir` (a path inside the store).
inline std::set<std::string> names_in(wcodecfs::Filesystem& fs, const std::string& dir) {
  std::set<std::string> out;
  auto d = fs.lookup_path(dir);
  EXPECT_TRUE(d.ok()) << dir << ": " << d.status().ToString();
  if (!d.ok()) return out;
  auto l = fs.readdir(d->id);
  EXPECT_TRUE(l.ok()) << dir << ": " << l.status().ToString();
  if (l.ok())
    for (const wcodecfs::DirEntry& e : *l) out.insert(e.name);
  return out;
}

// The whole file `path` read through the Filesystem in reads of `block`
// bytes; expects every read to succeed and the size to equal st_size.
inline std::vector<uint8_t> read_path(wcodecfs::Filesystem& fs, const std::string& path,
                                      uint32_t block = 1u << 20) {
  auto e = fs.lookup_path(path);
  EXPECT_TRUE(e.ok()) << path << ": " << e.status().ToString();
  if (!e.ok()) return {};
  auto fh = fs.open(e->id, O_RDONLY);
  EXPECT_TRUE(fh.ok()) << path << ": " << fh.status().ToString();
  if (!fh.ok()) return {};
  std::vector<uint8_t> out;
  const uint64_t size = static_cast<uint64_t>(e->attr.st_size);
  while (out.size() < size) {
    auto r = fs.read(**fh, out.size(), block);
    EXPECT_TRUE(r.ok()) << path << ": " << r.status().ToString();
    if (!r.ok() || r->size() == 0) break;
    const auto b = r->gather();
    out.insert(out.end(), b.begin(), b.end());
  }
  EXPECT_EQ(out.size(), size) << path;
  return out;
}

// store/<dir>/<name> (a view) read through a fresh Filesystem: the name is
// listed, listing and stat decoded no chunk, and the read had no decode
// error.
inline std::vector<uint8_t> view_of(const sfs::path& store, const std::string& dir,
                                    const std::string& name = "model.gguf") {
  auto fs = open_store(store);
  if (!fs) return {};
  EXPECT_TRUE(names_in(*fs, dir).count(name)) << dir << "/" << name << " is not listed";
  EXPECT_TRUE(fs->lookup_path(dir + "/" + name).ok()) << dir << "/" << name;
  EXPECT_EQ(wcodecfs::Stats::get(fs->stats().chunks_decoded), 0u) << "listing and stat decoded chunks";
  auto bytes = read_path(*fs, dir + "/" + name, 4u << 20);
  EXPECT_EQ(wcodecfs::Stats::get(fs->stats().decode_errors), 0u) << dir << "/" << name;
  return bytes;
}

// The filesystem's log lines (set_log_capture) while alive.
class LogLines {
 public:
  LogLines() {
    wcodecfs::set_log_capture([this](wcodecfs::LogLevel, const std::string& m) {
      std::lock_guard<std::mutex> lk(mu_);
      lines_.push_back(m);
    });
  }
  ~LogLines() { wcodecfs::set_log_capture({}); }
  LogLines(const LogLines&) = delete;
  LogLines& operator=(const LogLines&) = delete;
  // The lines that contain s.
  std::vector<std::string> matching(const std::string& s) const {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<std::string> out;
    for (const auto& l : lines_)
      if (l.find(s) != std::string::npos) out.push_back(l);
    return out;
  }
  // How many lines contain s.
  int count(const std::string& s) const { return static_cast<int>(matching(s).size()); }
  // Every line, each followed by a newline (for failure messages).
  std::string all() const {
    std::lock_guard<std::mutex> lk(mu_);
    std::string out;
    for (const auto& l : lines_) out += l + "\n";
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

}  // namespace fsview
