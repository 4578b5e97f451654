// tests/fuzz/fuzz_gguf.cpp — libFuzzer target for the GGUF header parser
// (wcodec/gguf.h).
//
// Input: the bytes of a GGUF file. Oracles:
//   - parse_gguf never crashes, never reads outside the input (ASan) and
//     refuses with kCorruption (never "need more bytes": the whole file is
//     given);
//   - whatever it accepts, the writer writes back byte for byte (the header
//     through the tensor infos) and parses again to the same pairs and
//     tensors; every tensor lies inside the file;
//   - the same input given as a short prefix either parses the same way or
//     asks for more bytes (kOutOfRange), never anything else.
// Thread-safety: single-threaded harness.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "wcodec/gguf.h"

namespace {
[[noreturn]] void die(const std::string& m) {
  std::fprintf(stderr, "fuzz_gguf: %s\n", m.c_str());
  std::abort();
}
}  // namespace

#ifndef WCODEC_FUZZ_ENTRY
#define WCODEC_FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif
extern "C" int WCODEC_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  // Copy into an exact-size buffer so that ASan sees reads past the end.
  std::vector<uint8_t> in(data, data + size);
  auto r = wcodec::parse_gguf(in.data(), in.size(), in.size(), "fuzz.gguf");
  const size_t half = size / 2;
  auto p = wcodec::parse_gguf(in.data(), half, in.size(), "fuzz.gguf");
  if (!r.ok()) {
    if (r.status().code() != wcodec::Code::kCorruption) die("unexpected refusal: " + r.status().ToString());
    if (p.ok()) die("a prefix parsed where the whole file is refused");
    if (p.status().code() != wcodec::Code::kCorruption && p.status().code() != wcodec::Code::kOutOfRange)
      die("prefix: unexpected refusal: " + p.status().ToString());
    return 0;
  }
  if (!p.ok() && p.status().code() != wcodec::Code::kOutOfRange)
    die("prefix of an accepted file refused: " + p.status().ToString());
  if (p.ok() && p->info_end != r->info_end) die("prefix parse disagrees");
  const wcodec::GgufFile& f = *r;
  for (const auto& t : f.tensors)
    if (f.data_offset + t.offset + t.nbytes > size) die("tensor past the end accepted: " + t.name);
  auto w = wcodec::write_gguf_header(f);
  if (!w.ok()) die("accepted header not writable: " + w.status().ToString());
  if (w->size() < f.info_end || std::memcmp(w->data(), in.data(), f.info_end) != 0)
    die("written header differs from the input");
  std::vector<uint8_t> again = *w;
  again.resize(again.size() + f.data_size, 0);
  auto r2 = wcodec::parse_gguf(again.data(), again.size(), again.size(), "again.gguf");
  if (!r2.ok()) die("written header refused: " + r2.status().ToString());
  if (r2->kv.size() != f.kv.size() || r2->tensors.size() != f.tensors.size() || r2->data_size != f.data_size)
    die("written header reads back differently");
  for (size_t i = 0; i < f.kv.size(); ++i)
    if (r2->kv[i].key != f.kv[i].key || r2->kv[i].value.bytes != f.kv[i].value.bytes ||
        r2->kv[i].value.strings != f.kv[i].value.strings)
      die("pair " + std::to_string(i) + " reads back differently");
  return 0;
}
