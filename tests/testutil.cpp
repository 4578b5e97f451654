// tests/testutil.cpp — see testutil.h.
#include "testutil.h"

#include "wcodec/safetensors.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>

namespace wctest {

// WCODEC_DATA overrides the configured directory (a machine where the data
// travels with the tree, such as the GPU machine).
std::filesystem::path data_dir() {
  const char* env = std::getenv("WCODEC_DATA");
  return std::filesystem::path(env && *env ? env : WCODEC_DATA_DIR);
}

std::vector<std::filesystem::path> data_safetensors_files() {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(data_dir(), ec)) {
    if (e.path().extension() == ".safetensors") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<uint8_t> read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) {
    ADD_FAILURE() << "cannot open " << p;
    return {};
  }
  // One read of the whole file (a byte-at-a-time stream iterator took
  // seconds per model file in the sanitizer build).
  f.seekg(0, std::ios::end);
  const std::streamoff n = f.tellg();
  f.seekg(0, std::ios::beg);
  if (n < 0) {
    ADD_FAILURE() << "cannot size " << p;
    return {};
  }
  std::vector<uint8_t> v(static_cast<size_t>(n));
  if (n > 0 && !f.read(reinterpret_cast<char*>(v.data()), n)) {
    ADD_FAILURE() << "cannot read " << p;
    return {};
  }
  return v;
}

std::vector<uint8_t> largest_isnet_f16_tensor() {
  const auto f = read_file(data_dir() / "isnet-medium.f16.safetensors");
  auto h = wcodec::parse_safetensors_header(f.data(), f.size(), f.size(), "isnet-medium.f16");
  if (!h.ok()) {
    ADD_FAILURE() << h.status().ToString();
    return {};
  }
  const wcodec::TensorInfo* big = nullptr;
  for (const auto& t : h->tensors)
    if (t.dtype == wcodec::DType::kF16 && (!big || t.nbytes() > big->nbytes())) big = &t;
  if (!big) {
    ADD_FAILURE() << "isnet-medium.f16 has no F16 tensor";
    return {};
  }
  const uint8_t* src = f.data() + h->data_start + big->begin;
  return std::vector<uint8_t>(src, src + big->nbytes());
}

void write_file(const std::filesystem::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) ADD_FAILURE() << "cannot write " << p;
}

std::string sha256_hex(const uint8_t* data, size_t n) {
  std::array<unsigned char, 32> md{};
  unsigned int len = 0;
  EVP_Digest(data, n, md.data(), &len, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) {
    s += hex[md[i] >> 4];
    s += hex[md[i] & 15];
  }
  return s;
}

std::unique_ptr<wcodec::Reader> encode_and_open(const std::vector<uint8_t>& original, const std::string& name,
                                                const ScratchDir& dir, const wcodec::EncodeConfig& cfg) {
  auto enc = wcodec::encode_safetensors(original.data(), original.size(), cfg, name);
  EXPECT_TRUE(enc.ok()) << name << ": " << enc.status().ToString();
  if (!enc.ok()) return nullptr;
  const std::filesystem::path path = dir / (name + ".wcodec");
  write_file(path, *enc);
  auto r = wcodec::Reader::open(path.string());
  EXPECT_TRUE(r.ok()) << name << ": " << r.status().ToString();
  if (!r.ok()) return nullptr;
  return std::move(r).value();
}

ScratchDir::ScratchDir() {
  std::random_device rd;
  for (int i = 0; i < 100; ++i) {
    auto p = std::filesystem::temp_directory_path() / ("wcodec-test-" + std::to_string(rd()));
    if (std::filesystem::create_directory(p)) {
      path_ = p;
      return;
    }
  }
  ADD_FAILURE() << "cannot create scratch dir";
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

int run_command(const std::string& cmd, std::string* output) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  if (output) *output = out;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace wctest
