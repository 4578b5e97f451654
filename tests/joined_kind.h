// tests/joined_kind.h — a store kind that exists only in the tests: it
// proves that the store-kind seam takes a format the product does not know.
//
// In any store directory holding regular files "X.left" and "X.right", it
// presents "X.joined" (a view: both inputs stay visible):
//
//   [0, H)          inline: "JOINED left=<n> right=<m>\n" (H bytes)
//   [H, A)          zero fill up to the next multiple of 64 (A)
//   [A, A + n + m)  decoded: the bytes of X.left XOR 0xA5, then those of
//                   X.right XOR 0x5A, in chunks of 4 KiB
//
// The decoded part comes from JoinedSource, a chunk source that is not a
// .wcodec container: it reads both inputs with pread and declares neither
// grouping nor a device container. A chunk whose input changed since the
// file was built (size or mtime) is refused (kStale), never served mixed.
//
// Thread-safety: as every kind (immutable).
#pragma once

#include <string>
#include <vector>

#include "wcodecfs/store_kind.h"

namespace joinedkind {

inline constexpr uint8_t kLeftMask = 0xA5;
inline constexpr uint8_t kRightMask = 0x5A;
inline constexpr uint32_t kChunk = 4096;
inline constexpr uint64_t kAlign = 64;

class JoinedKind final : public wcodecfs::StoreKind {
 public:
  std::string_view name() const override { return "joined (test)"; }
  void present(const wcodecfs::StoreDir& dir, std::vector<wcodecfs::Presentation>* out) const override;
  wcodecfs::Result<std::shared_ptr<const wcodecfs::VirtualFile>> build(
      const wcodecfs::StoreDir& dir, const wcodecfs::Presentation& p, const wcodecfs::BuildContext& ctx) const override;
};

// What X.joined holds for inputs `left` and `right` (the reference).
std::vector<uint8_t> expected_joined(const std::vector<uint8_t>& left, const std::vector<uint8_t>& right);

}  // namespace joinedkind
