// fs/src/hf_gguf_bpe_i.h — internal to the GGUF view's planner: the
// vocabulary of a BPE tokenizer.json as convert_hf_to_gguf.py's
// _set_vocab_gpt2 / get_vocab_base write it (tokens, token types, merges,
// and tokenizer.ggml.pre from the fingerprint table). The rules are in
// docs/gguf-view.md ("BPE tokenizers").
//
// Thread-safety: pure functions over caller-owned values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wcodecfs/fs_status.h"

namespace wcodecfs {

struct HfDirFiles;  // wcodecfs/hf_gguf.h

struct BpeVocab {
  std::vector<std::string> tokens;  // vocab_size entries
  std::vector<int32_t> types;       // llama.cpp token types, parallel to tokens
  std::vector<std::string> merges;  // "a b" (spaces inside a part written as U+0120); empty: no merges key
  std::string pre;                  // tokenizer.ggml.pre
};

// REQUIRES: f.tokenizer_json is set. NotSupported for a tokenizer the
// converter writes another way (not BPE, a Llama byte-fallback BPE) or whose
// fingerprint is not in the table; Corruption for malformed fields.
Status bpe_vocab(const HfDirFiles& f, uint64_t vocab_size, BpeVocab* out);

// The converter's does_token_look_special.
bool hf_token_looks_special(const std::string& t);

}  // namespace wcodecfs
