// wcodecfs/hf_gguf.h — the GGUF file llama.cpp's reference converter
// (convert_hf_to_gguf.py) writes for a Hugging Face Llama-family model
// directory, planned from the directory's small files: config.json, the
// tokenizer (a SentencePiece tokenizer.model, read with libsentencepiece, or
// else a BPE tokenizer.json, whose pre-tokenizer is named by its
// fingerprint), tokenizer_config.json / added_tokens.json / tokenizer.json /
// chat_template.jinja when present, and the safetensors headers of the
// weights (one file or the shards of NAME.safetensors.index.json).
//
// The plan is the GGUF header (metadata and tensor infos, as the converter
// orders and types them) and, for every tensor, where its bytes come from:
// a shard, a byte range of its data buffer, a row order (the Q/K rotary
// permutation: each output row is one whole source row) and a conversion
// (none; BF16/F16 → F32 for the 1-D tensors the converter keeps in F32;
// per-row int8 → Q8_0 and packed ternary → TQ2_0 where rows are whole
// blocks, F32 values otherwise).
// The planner decodes nothing and never reads tensor data; the store kind
// (wcodecfs/hf_gguf_kind.h) turns the plan into extents. The rules, the
// mapping table and what is refused are in docs/gguf-view.md.
//
// Every refusal is a Status naming the file, the field and the value:
// NotSupported for what is valid but not presented (another architecture,
// a BPE tokenizer of unknown fingerprint, rope scaling, quantized weights),
// Corruption for values that are wrong.
//
// Thread-safety: pure functions over caller-owned values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wcodec/gguf.h"
#include "wcodec/safetensors.h"
#include "wcodecfs/fs_status.h"

namespace wcodecfs {

// The small files of a model directory, as bytes.
struct HfDirFiles {
  std::string dir_name;         // the directory's name (general.name)
  std::string config;           // config.json
  std::string tokenizer_model;  // tokenizer.model (SentencePiece); empty: the BPE tokenizer of tokenizer_json
  std::optional<std::string> tokenizer_config;  // tokenizer_config.json
  std::optional<std::string> added_tokens;      // added_tokens.json
  std::optional<std::string> tokenizer_json;    // tokenizer.json
  std::optional<std::string> chat_template;     // chat_template.jinja
  std::string where;                            // store-relative directory, for messages ("models/x/")
};

// One weight file: its name (messages) and its safetensors header.
struct HfShard {
  std::string what;
  wcodec::SafetensorsHeader header;
};

// kCopy: the source bytes. kBf16ToF32 / kF16ToF32: each element widened.
// kI8ToQ8_0: per-row int8 codes with a per-row F16 scale (NAME I8 [rows,
// cols] + NAME_scale F16 [rows]) as Q8_0 blocks (the row's scale in every
// block; exact). kI8ToF32: the same codes as F32 values code × scale (rows
// whose length is not a multiple of 32), as ggml dequantizes Q8_0.
// kTernaryToTq2_0 / kTernaryToF32: packed ternary codes (NAME_packed U8
// [rows, ceil(cols/4)], docs/packed-ternary.md) with NAME_scale F16 [rows]
// as TQ2_0 blocks (rows of whole 256-blocks; exact) or F32 values
// code × scale.
enum class HfConvert : uint8_t { kCopy, kBf16ToF32, kF16ToF32, kI8ToQ8_0, kI8ToF32, kTernaryToTq2_0, kTernaryToF32 };

// Where one GGUF tensor's bytes come from.
struct HfTensorSource {
  std::string hf_name;
  size_t shard = 0;          // index into the shards given to plan_hf_gguf
  uint64_t src_begin = 0;    // in the shard's data buffer
  uint64_t src_bytes = 0;
  uint64_t rows = 1;         // source rows (shape[0]; 1 for a scalar)
  // Output row r is source row row_order[r]; empty: the rows in order.
  std::vector<uint32_t> row_order;
  HfConvert convert = HfConvert::kCopy;
  uint64_t cols = 0;         // kTernary*: weights per row
  size_t scale_shard = 0;    // kI8*, kTernary*: where the F16 per-row scales are
  uint64_t scale_begin = 0;
  uint64_t out_bytes = 0;    // bytes in the GGUF (unpadded)
};

struct HfGgufPlan {
  wcodec::GgufFile gguf;               // header values; tensor offsets and data_offset filled
  std::vector<uint8_t> header;         // write_gguf_header(gguf), padded to data_offset
  std::vector<HfTensorSource> tensors;  // parallel to gguf.tensors
  uint32_t outtype = wcodec::kGgmlTypeF32;  // ggml type of the 2-D weights
};

// What a directory holds, from config.json alone (for listing): OK for a
// supported architecture, NotSupported naming the architecture otherwise,
// Corruption for a config.json that is not a JSON object.
Status check_hf_config(std::string_view config_json, const std::string& what);

// The shard file names of NAME.safetensors.index.json ("weight_map"'s
// values, unique, sorted as the converter sorts them); each a single name
// ending in .safetensors.
Result<std::vector<std::string>> parse_hf_index(std::string_view json, const std::string& what);
// The tensor names of the index's weight_map (to check the shards against).
Result<std::vector<std::string>> hf_index_tensor_names(std::string_view json, const std::string& what);

// Plans the GGUF view. `shards` in the converter's order (sorted names).
Result<HfGgufPlan> plan_hf_gguf(const HfDirFiles& files, const std::vector<HfShard>& shards);

// The fingerprint of a BPE tokenizer.json (with its directory's
// tokenizer_config.json, if any): SHA-256, hex, of the normalizer,
// pre-tokenizer, post-processor and model settings (canonical JSON), the
// tokenizer_config add_bos_token / add_eos_token values, the vocabulary by
// id, the merges and the added tokens (docs/gguf-view.md). Corruption for a
// malformed tokenizer.json, NotSupported for a model that is not BPE.
Result<std::string> bpe_fingerprint(std::string_view tokenizer_json, std::optional<std::string_view> tokenizer_config,
                                    const std::string& what);
// The converter's tokenizer.ggml.pre for a fingerprint in the table of
// known tokenizers; "" for any other.
std::string bpe_pre_for(std::string_view fingerprint);

// Element conversions (as numpy does them: exact widening).
float bf16_to_f32(uint16_t v);
float f16_to_f32(uint16_t v);

}  // namespace wcodecfs
