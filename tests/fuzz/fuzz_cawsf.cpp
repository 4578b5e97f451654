// tests/fuzz/fuzz_cawsf.cpp — libFuzzer target for the CAWSF reader
// (wcodec/cawsf.h).
//
// Input: the bytes of a .cawsf file (seeds: version 1 files in the
// reference's layout, raw and LZ4/zstd-compressed, and version 2 files).
// Oracles:
//   - open, verify, shard and tensor reads never crash and never read
//     outside their buffers (ASan); every refusal is kCorruption or
//     kNotSupported, never anything else;
//   - a tensor that reads back has exactly its size (nbytes of its dtype and
//     shape), and a row band equals the same rows of the whole tensor;
//   - y = W·x from the components has one value per row.
// Tensors larger than 2^18 elements are skipped (a hostile header may
// declare a large shape over a small R shard; the memory is then the
// caller's choice, the mount reads in bands).
// Thread-safety: single-threaded harness.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "wcodec/cawsf.h"

namespace {
[[noreturn]] void die(const std::string& m) {
  std::fprintf(stderr, "fuzz_cawsf: %s\n", m.c_str());
  std::abort();
}
void clean(const wcodec::Status& s, const char* what) {
  if (s.ok()) return;
  if (s.code() != wcodec::Code::kCorruption && s.code() != wcodec::Code::kNotSupported)
    die(std::string(what) + ": unexpected refusal: " + s.ToString());
}
}  // namespace

#ifndef WCODEC_FUZZ_ENTRY
#define WCODEC_FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif
extern "C" int WCODEC_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  using namespace wcodec::cawsf;
  auto f = CawsfFile::from_memory(std::vector<uint8_t>(data, data + size), "fuzz.cawsf");
  if (!f.ok()) {
    clean(f.status(), "open");
    return 0;
  }
  const CawsfFile& file = **f;
  clean(file.verify(), "verify");
  for (size_t i = 0; i < file.shards().size(); ++i) {
    auto p = file.shard_payload(i);
    if (!p.ok()) clean(p.status(), "shard_payload");
    else if (p->size() != file.shards()[i].usize) die("shard payload of the wrong size");
  }
  for (size_t t = 0; t < file.tensors().size(); ++t) {
    const TensorEntry& te = file.tensors()[t];
    if (te.raw ? te.nbytes() > (1u << 20) : uint64_t{te.rows} * te.cols > (1u << 18)) continue;
    auto b = file.tensor_bytes(t);
    if (!b.ok()) {
      clean(b.status(), "tensor_bytes");
      continue;
    }
    if (b->size() != te.nbytes()) die("tensor " + te.name + " read back with the wrong size");
    if (te.raw) continue;
    auto c = file.components(t);
    if (!c.ok()) die("components refused after tensor_bytes succeeded");
    if (te.rows >= 2) {
      const auto band = densify_rows(*c, 1, te.rows);
      const auto whole = densify_rows(*c, 0, te.rows);
      if (std::memcmp(band.data(), whole.data() + te.cols, band.size() * 4) != 0) die("row band differs from the whole");
    }
    const auto y = apply_components(*c, std::vector<float>(te.cols, 1.0f));
    if (y.size() != te.rows) die("apply gave the wrong number of rows");
  }
  const auto hits = route(file.routing(), "the quick brown fox", 4, 0.0);
  if (hits.size() > 4) die("route selected more than k shards");
  return 0;
}
