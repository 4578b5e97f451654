// wcodecfs/cawsf_kind.h — the store kind of CAWSF files (.cawsf, NDSQ-
// decomposed weights; docs/cawsf-format.md).
//
// "X.cawsf" is presented as "X.safetensors" beside it (a view: the .cawsf
// stays visible): a safetensors header made from the file's tensor table
// (version 2: the original names, dtypes and shapes; version 1: one F32
// [rows, cols] tensor per scope, named from META "layers"), then each
// tensor's bytes as computed chunks (wcodecfs/derived.h): a decomposed
// tensor is rebuilt in bands of rows (W = L + D + R + S, the reader's
// arithmetic, converted to its dtype), a stored one is copied; nothing is
// computed before a read touches it, and every stored byte used is first
// checked against the file's checksum index. A chunk that cannot be rebuilt
// correctly is an error (the read is EIO), never wrong bytes.
//
// Where the directory also holds config.json of a supported Llama-family
// architecture and tokenizer.model (the rules of the hf-gguf kind,
// wcodecfs/hf_gguf_kind.h), "X.cawsf" is also presented as "X.gguf": the
// GGUF view (build_hf_gguf_view) of that dense "X.safetensors", i.e. what
// llama.cpp's convert_hf_to_gguf.py writes for the directory with the
// rebuilt X.safetensors in it. Stored files win over these views: no
// X.safetensors view where X.safetensors or X.wcodec is stored, and no
// X.gguf view where the directory holds safetensors weights of its own
// (the hf-gguf kind presents their GGUF view) or X.gguf / X.gguf.wcodec.
// docs/cawsf-format.md §8 has the rules.
//
// Thread-safety: immutable; every function may be called from any thread.
// The chunk functions share a small cache of decoded components under a
// mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "wcodecfs/hf_gguf.h"
#include "wcodecfs/store_kind.h"
#include "wcodecfs/virtual_file.h"

namespace wcodec::cawsf {
class CawsfFile;
}

namespace wcodecfs {

class CawsfKind final : public StoreKind {
 public:
  std::string_view name() const override { return "cawsf"; }
  void present(const StoreDir& dir, std::vector<Presentation>* out) const override;
  Result<std::shared_ptr<const VirtualFile>> build(const StoreDir& dir, const Presentation& p,
                                                   const BuildContext& ctx) const override;
};

// The dense checkpoint of an opened CAWSF file, laid out as the safetensors
// file the kind presents (header inline, every tensor as computed chunks of
// about 1 MiB). `name` names it in messages; `source_id` keys its chunks in
// a chunk cache (0: a fresh id). Decodes nothing. Used by the kind, its GGUF
// view and `wcodec cawsf export-gguf`.
Result<std::shared_ptr<const VirtualFile>> cawsf_dense_file(std::shared_ptr<const wcodec::cawsf::CawsfFile> file,
                                                           const std::string& name, uint64_t source_id);

// The small files of `dir` that the GGUF view of a .cawsf file there is
// made of, in input order (config.json, tokenizer.model, then those of
// tokenizer_config.json, added_tokens.json, tokenizer.json and
// chat_template.jinja that exist). NotFound without config.json;
// NotSupported (naming the file and the value) for an architecture or a
// tokenizer the view does not support; Corruption for a config.json that is
// not JSON. Reads config.json only.
Result<std::vector<std::string>> cawsf_gguf_small_files(const StoreDir& dir);

// The GGUF view of a dense CAWSF checkpoint `dense` (cawsf_dense_file; `what`
// names it in messages) with the opened small files `small`
// (cawsf_gguf_small_files' names, in that order). `dir_name` is written as
// general.name; `view` names the view in messages; source_id(i) keys the
// computed source of GGUF tensor i. Reads the small files and the dense
// file's safetensors header; decodes nothing.
Result<std::shared_ptr<const VirtualFile>> cawsf_gguf_file(std::shared_ptr<const VirtualFile> dense,
                                                          const std::string& what,
                                                          const std::vector<StoredInput>& small,
                                                          const std::string& dir_name, const std::string& view,
                                                          const std::function<uint64_t(size_t)>& source_id);

}  // namespace wcodecfs
