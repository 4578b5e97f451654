// fs/src/kinds/kind_registry.cpp — the store kinds a mount uses, in order of
// precedence (wcodecfs/store_kind.h). A new kind adds one line here.
#include "wcodecfs/cawsf_kind.h"
#include "wcodecfs/gguf_kind.h"
#include "wcodecfs/hf_gguf_kind.h"
#include "wcodecfs/store_kind.h"
#include "wcodecfs/trellis_kind.h"
#include "wcodecfs/wcodec_kind.h"

namespace wcodecfs {

StoreKinds default_kinds() {
  return {
      std::make_shared<WcodecKind>(),
      std::make_shared<GgufKind>(),
      std::make_shared<TrellisKind>(),
      std::make_shared<HfGgufKind>(),
      std::make_shared<CawsfKind>(),
  };
}

}  // namespace wcodecfs
