// tests/test_fs_store.h — building wcodecfs stores for the fs and mount
// suites (test_fs_core.cpp, test_mount_real.cpp).
//
// A store is a scratch directory holding .wcodec containers encoded from the
// real model files in ../shared/data, plus plain files, a subdirectory and
// symlinks. Encoding the larger files takes seconds, and CTest runs every
// test in its own process, so encoded containers are cached in the build tree
// (WCODECFS_TEST_CACHE), keyed by the test binary's size and mtime: the codec
// is linked statically, so any codec change relinks the binary and makes a
// new key. Containers are written with encode_safetensors_file (temporary
// file + rename), so concurrent test processes never see half a file.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sanitizer.h"
#include "testutil.h"
#include "wcodec/container.h"

namespace fstest {

namespace sfs = std::filesystem;

inline constexpr bool kSanitized = wcodec::kAddressSanitizer;

// One real model file of ../shared/data to put into a store.
struct ModelFile {
  std::string stem;          // "stories260K.f32": stored as stem.wcodec, shown as stem.safetensors
  uint64_t chunk_bytes = 0;  // 0: the encoder's default
};

// Small files for every build; the large one only without sanitizers.
inline std::vector<ModelFile> small_models() {
  return {{"stories260K.f32", 32 * 1024}, {"stories260K.rtn-int8", 0}, {"silero_vad_16k.bf16", 64 * 1024}};
}
inline std::vector<ModelFile> large_models() {
  if (kSanitized) return {};
  return {{"isnet-medium.rtn-int8", 0}};
}

inline sfs::path original_of(const std::string& stem) { return wctest::data_dir() / (stem + ".safetensors"); }

inline std::string cache_key() {
  struct stat st {};
  if (::stat("/proc/self/exe", &st) != 0) return "nokey";
  return std::to_string(static_cast<uint64_t>(st.st_size)) + "-" + std::to_string(static_cast<uint64_t>(st.st_mtime));
}

inline sfs::path cache_dir() {
#ifdef WCODECFS_TEST_CACHE
  const sfs::path root = WCODECFS_TEST_CACHE;
#else
  const sfs::path root = sfs::temp_directory_path() / "wcodecfs-test-cache";
#endif
  const sfs::path dir = root / cache_key();
  std::error_code ec;
  if (!sfs::exists(dir, ec)) {
    // Keys of older builds: drop the ones untouched for an hour.
    for (const auto& e : sfs::directory_iterator(root, ec)) {
      auto age = sfs::file_time_type::clock::now() - sfs::last_write_time(e.path(), ec);
      if (!ec && age > std::chrono::hours(1)) sfs::remove_all(e.path(), ec);
    }
    sfs::create_directories(dir, ec);
  }
  return dir;
}

// The encoded container of `m` (from the cache, encoded on first use).
inline sfs::path encoded(const ModelFile& m) {
  const sfs::path out = cache_dir() / (m.stem + "." + std::to_string(m.chunk_bytes) + ".wcodec");
  std::error_code ec;
  if (sfs::exists(out, ec)) return out;
  wcodec::EncodeConfig cfg;
  if (m.chunk_bytes) cfg.chunk_bytes = m.chunk_bytes;
  cfg.threads = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  const wcodec::Status st = wcodec::encode_safetensors_file(original_of(m.stem).string(), out.string(), cfg);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

// Copies (hard-links when possible) `from` to `to`.
inline void place(const sfs::path& from, const sfs::path& to) {
  std::error_code ec;
  sfs::create_hard_link(from, to, ec);
  if (ec) sfs::copy_file(from, to, sfs::copy_options::overwrite_existing);
}

inline void write_text(const sfs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
}

// The standard test store under `root`:
//   <stem>.wcodec for every model (shown as <stem>.safetensors)
//   notes.txt                       plain file
//   sub/stories260K.rtn-int8.wcodec a container in a subdirectory
//   sub/readme.md                   plain file in it
//   escape -> /etc                  symlink out of the store
//   up -> ../..                     relative symlink out of the store
//   linkdir -> sub                  symlink to a directory inside
inline std::vector<ModelFile> build_store(const sfs::path& root, bool with_large) {
  std::vector<ModelFile> models = small_models();
  if (with_large)
    for (auto& m : large_models()) models.push_back(m);
  for (const auto& m : models) place(encoded(m), root / (m.stem + ".wcodec"));
  write_text(root / "notes.txt", "plain file in the store\n");
  sfs::create_directory(root / "sub");
  place(encoded({"stories260K.rtn-int8", 0}), root / "sub" / "stories260K.rtn-int8.wcodec");
  write_text(root / "sub" / "readme.md", "# nested\n");
  sfs::create_symlink("/etc", root / "escape");
  sfs::create_symlink("../..", root / "up");
  sfs::create_symlink("sub", root / "linkdir");
  return models;
}

// Copies container `from` to `to` (a real copy, never a link into the cache)
// and flips one byte in the middle of chunk `chunk`'s payload. Returns the
// chunk's range [begin, end) in the original file.
inline std::pair<uint64_t, uint64_t> corrupt_copy(const sfs::path& from, const sfs::path& to, size_t chunk) {
  sfs::copy_file(from, to, sfs::copy_options::overwrite_existing);
  wcodec::ChunkEntry e{};
  {
    auto rd = wcodec::Reader::open(to.string());
    EXPECT_TRUE(rd.ok()) << rd.status().ToString();
    if (!rd.ok()) return {0, 0};
    e = (*rd)->chunk(chunk);
  }
  std::fstream f(to, std::ios::binary | std::ios::in | std::ios::out);
  const uint64_t pos = e.file_offset + e.stored_size / 2;
  f.seekg(static_cast<std::streamoff>(pos));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5A);
  f.seekp(static_cast<std::streamoff>(pos));
  f.write(&c, 1);
  return {e.decoded_offset, e.decoded_offset + e.decoded_size};
}

}  // namespace fstest
