// wcodecfs/trellis_kind.h — the store kind of Trellis stores
// (docs/trellis.md §7).
//
// A store directory holding a Trellis v2 store (layer_NNNN/ directories,
// base_weights.safetensors, ...) is presented as its v3 form: the shards
// model-{i:05d}-of-{n:05d}.safetensors, model.safetensors.index.json and
// quantization_config.json, with the same names and bytes that `wcodec
// trellis migrate` writes (both come from wcodec::trellis_plan_v3 with the
// default shard size). Shard headers and the JSON files are inline extents
// computed from the v2 indexes; tensor bytes are passthrough ranges of the
// v2 files; nothing is copied or decoded. The v2 entries are hidden; the
// other files (config.json, tokenizer files) stay visible as they are,
// which is what migrate copies. Each presented file's inputs are all the v2
// files the plan is computed from, so a change to any of them is a new
// file. A v2 store with problems (wcodec trellis validate) is shown as it
// is. A v3 store is shown unchanged.
//
// Beside a valid v2 or v3 store it also presents model.dense.safetensors,
// the dense view: every quantized weight dequantized to F16 in chunks of a
// ComputedSource (wcodecfs/derived.h; computed on first read, cached like
// decoded chunks), every base tensor a passthrough range. Where the store's
// config.json names a Llama-family architecture and a SentencePiece
// tokenizer.model is there, it also presents model.dense.gguf, the GGUF
// form of the dense view: what convert_hf_to_gguf.py --outtype f16 writes
// for a directory of the dense checkpoint and the store's small files,
// made by build_hf_gguf_view (wcodecfs/hf_gguf_kind.h) over the dense
// view's extents; other stores get no GGUF form and one log line.
//
// A listing and every build need the store's parsed indexes and v3 plan;
// the kind keeps them per store directory (a process-wide cache, bounded)
// and uses them while the directory's listing and the identity (device,
// inode, size, mtime, ctime) of every file and layer directory they were
// read from are unchanged, so that a listing and the builds of its files
// read and parse the indexes once, not once each.
//
// Thread-safety: every function may be called from any thread (the cache
// is guarded by a mutex; what it holds is immutable).
#pragma once

#include "wcodecfs/store_kind.h"

namespace wcodecfs {

class TrellisKind final : public StoreKind {
 public:
  std::string_view name() const override { return "trellis"; }
  void present(const StoreDir& dir, std::vector<Presentation>* out) const override;
  Result<std::shared_ptr<const VirtualFile>> build(const StoreDir& dir, const Presentation& p,
                                                   const BuildContext& ctx) const override;
};

}  // namespace wcodecfs
