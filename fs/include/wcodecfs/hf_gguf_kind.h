// wcodecfs/hf_gguf_kind.h — the GGUF view of a Hugging Face model
// directory.
//
// Where a store directory holds a Hugging Face Llama-family model
// (config.json naming LlamaForCausalLM or MistralForCausalLM, a SentencePiece
// tokenizer.model or a known BPE tokenizer.json, and the weights as
// NAME.safetensors or as the shards of
// NAME.safetensors.index.json, each stored plain or as X.wcodec), the mount
// also shows NAME.gguf: the file llama.cpp's convert_hf_to_gguf.py writes for
// that directory with --outtype the weights' dtype (F32, F16 or BF16). The
// view is built from extents over the same tensors (no second copy, nothing
// written to disk): the GGUF header as inline bytes made at build time from
// the small files (wcodecfs/hf_gguf.h), each tensor as passthrough ranges of
// a plain weight file or decoded ranges of a .wcodec one (one range per row
// for the Q/K rotary permutation), F32 copies of BF16/F16 1-D tensors and
// the Q8_0 / TQ2_0 / F32 forms of quantized weights as computed sources
// (wcodecfs/derived.h), zeros for the alignment padding.
// Nothing is decoded or computed before a read touches it.
//
// The inputs stay visible (a view). A directory whose architecture, tokenizer
// or weights the view does not support gets no view and one log line naming
// the file, the field and the value; docs/gguf-view.md has the rules.
//
// Thread-safety: every function may be called from any thread; the only
// shared state is the process-wide memo of fingerprinted tokenizer.json
// files (hf_gguf_kind.cpp), guarded by its own mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wcodecfs/hf_gguf.h"
#include "wcodecfs/store_kind.h"
#include "wcodecfs/virtual_file.h"

namespace wcodecfs {

class HfGgufKind final : public StoreKind {
 public:
  std::string_view name() const override { return "hf-gguf"; }
  void present(const StoreDir& dir, std::vector<Presentation>* out) const override;
  Result<std::shared_ptr<const VirtualFile>> build(const StoreDir& dir, const Presentation& p,
                                                   const BuildContext& ctx) const override;
};

// The presentation HfGgufKind makes for `dir`, or a Status saying why there
// is none (NotFound: not a model directory; NotSupported / Corruption: a
// model directory the view refuses, naming the file and the value). For
// tests and the kind's log line.
Result<Presentation> hf_gguf_presentation(const StoreDir& dir);

// One weight file of a model as the mount shows it (safetensors bytes: a
// plain file, a decoded .wcodec, or another kind's dense view), and its
// name for messages.
struct HfWeightFile {
  std::string what;
  std::shared_ptr<const VirtualFile> content;
};

// The GGUF view of a model given by its small files and its weight files
// (in the converter's order: sorted shard names): the plan of
// wcodecfs/hf_gguf.h turned into extents over `weights` (inline header,
// ranges of the weights, computed conversions, zero padding). Reads the
// weights' safetensors headers and nothing else. `index_names`, when set,
// are the tensor names of NAME.safetensors.index.json (at `index_path`),
// checked against the shards. `source_id(i)` is the cache id of the
// computed source of GGUF tensor i. Used by this kind and by kinds that
// present a dense checkpoint with a GGUF form (Trellis, CAWSF).
Result<std::shared_ptr<const VirtualFile>> build_hf_gguf_view(const HfDirFiles& files,
                                                             const std::vector<HfWeightFile>& weights,
                                                             const std::optional<std::vector<std::string>>& index_names,
                                                             const std::string& index_path, const std::string& view,
                                                             const std::function<uint64_t(size_t)>& source_id);

}  // namespace wcodecfs
