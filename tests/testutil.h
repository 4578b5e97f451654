// tests/testutil.h — helpers shared by the test suites: file IO, SHA-256,
// paths of the real model files in ../shared/data, scratch directories.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "wcodec/container.h"

namespace wctest {

// Directory holding the real model files (../shared/data).
std::filesystem::path data_dir();
// Every *.safetensors file in data_dir(), sorted by name.
std::vector<std::filesystem::path> data_safetensors_files();
// Reads a whole file; fails the calling test (ADD_FAILURE) and returns {} on error.
std::vector<uint8_t> read_file(const std::filesystem::path& p);
void write_file(const std::filesystem::path& p, const std::vector<uint8_t>& bytes);
std::string sha256_hex(const uint8_t* data, size_t n);
inline std::string sha256_hex(const std::vector<uint8_t>& v) { return sha256_hex(v.data(), v.size()); }

// The bytes of isnet-medium.f16's largest F16 tensor (real F16 weights, 9.4
// MB); fails the calling test and returns {} if the file cannot be read.
std::vector<uint8_t> largest_isnet_f16_tensor();

// A fresh empty directory under the system temp dir, removed by the destructor.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Encodes `original` (a safetensors file) with `cfg` (default: the default
// configuration) into dir/NAME.wcodec and opens it; fails the calling test
// and returns null if either step fails.
std::unique_ptr<wcodec::Reader> encode_and_open(const std::vector<uint8_t>& original, const std::string& name,
                                                const ScratchDir& dir,
                                                const wcodec::EncodeConfig& cfg = wcodec::EncodeConfig{});

// Runs a shell command, returns its exit status (WEXITSTATUS) and captures
// stdout+stderr into *output when given.
int run_command(const std::string& cmd, std::string* output = nullptr);

}  // namespace wctest
