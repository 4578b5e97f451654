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
// Thread-safety: immutable; every function may be called from any thread.
// The chunk functions share a small cache of decoded components under a
// mutex.
#pragma once

#include <memory>
#include <vector>

#include "wcodecfs/store_kind.h"

namespace wcodecfs {

class CawsfKind final : public StoreKind {
 public:
  std::string_view name() const override { return "cawsf"; }
  void present(const StoreDir& dir, std::vector<Presentation>* out) const override;
  Result<std::shared_ptr<const VirtualFile>> build(const StoreDir& dir, const Presentation& p,
                                                   const BuildContext& ctx) const override;
};

}  // namespace wcodecfs
