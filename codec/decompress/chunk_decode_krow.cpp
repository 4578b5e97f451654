// codec/decompress/chunk_decode_krow.cpp — the portable fast decoder of
// kernel-row chunks (int nbr_mode 4, format 2.10; chunk_model.h): ternary
// 3x3 kernels whose rows are one rANS symbol of 27 values each.
//
// Method: the 32 lanes step together as in the reference decoder
// (decode_kern_rows_g), lane by lane within each of a step's three symbol
// groups; each lane renormalizes right after its symbol, which takes the
// words in the reference's order (lane order within a group). A lane keeps
// the previous row's symbol (the context) and its kernel's 18 output bits
// in locals; a step's 32 kernels are 72 contiguous output bytes, written
// at once. Words are read unchecked while a whole step's worth (96) is
// left, checked after that; a stream that runs short, ends with words left
// or leaves a lane away from its initial state is rejected where the
// reference rejects it.
// Thread-safety: pure function over its arguments.
#include <cstring>
#include <type_traits>

#include "chunk_decode_fast.h"
#include "chunk_decode_krow.h"
#include "wcodec/cpu.h"

namespace wcodec {

namespace {

// The 6 output bits (three 2-bit codes, first code lowest) of each symbol.
struct RowBits {
  uint32_t v[32];
  constexpr RowBits() : v{} {
    for (uint32_t s = 0; s < kKernRowSyms; ++s) v[s] = (s % 3) | ((s / 3) % 3) << 2 | (s / 9) << 4;
  }
};
constexpr RowBits kRowBits;

}  // namespace

int decode_krow_chunk_fast(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                           uint8_t* out) {
  const IntParams& p = m.ip;
  // The slot tables only without entries (a kVector view of a model with
  // entries has none).
  if (m.kind != ModelKind::kInt || p.nbr_mode != 4 || (!m.krow_ent && (!m.sym_small || !m.fs_small)) || !m.luts)
    return -1;
  if (m.n0 < int_nctx(p) || (p.use_rc && !m.rc)) return -1;
  // Whole kernels in whole bytes per row (the reader's geometry rules).
  if (cv.w % (4 * kKernRowCodes) != 0) return -1;
  if (rans_len < 4 * kLanes || (rans_len & 1)) return 0;
  const uint64_t nk = uint64_t{cv.h} * cv.w / kKernRowCodes;
  const uint64_t out_len = uint64_t{cv.h} * cv.w / 4;
  const uint32_t kpr = cv.w / kKernRowCodes;
  const uint32_t steps = kern_rows_lane_n(nk, 0);
  const uint32_t nwords = (rans_len - 4 * kLanes) / 2;
  const uint8_t* wp = rans + 4 * kLanes;
  const uint8_t* lut = m.sym_small;
  const uint32_t* ent = m.krow_ent;  // one entry per 8 slots, when the model allows it
  const uint32_t* fs = m.fs_small;
  const uint8_t* scale = m.luts->scale;
  uint32_t x[kLanes];
  std::memcpy(x, rans, sizeof x);
  uint32_t pos = 0, bad = 0;
  // Lane l's kernel at the current step: chunk row krow[l], kernel column
  // kcol[l] (scale classes only).
  // base: the lane's kernel's scale class times the contexts a class has
  // in the table form decoded from.
  const uint32_t per_class = ent ? kKrowEntCtx : kKernRowCtx;
  uint32_t krow[kLanes], kcol[kLanes], base[kLanes];
  for (uint32_t l = 0; l < kLanes; ++l) {
    krow[l] = l / kpr;
    kcol[l] = l % kpr;
    base[l] = 0;
  }
  for (uint32_t t = 0; t < steps; ++t) {
    const uint64_t first = uint64_t{t} * kLanes;
    const uint32_t act = nk - first >= kLanes ? kLanes : static_cast<uint32_t>(nk - first);
    if (p.use_rc) {
      for (uint32_t l = 0; l < act; ++l) base[l] = scale[m.rc[cv.row0 + krow[l]]] * per_class;
      for (uint32_t l = 0; l < kLanes; ++l) {
        kcol[l] += kLanes;
        while (kcol[l] >= kpr) {
          kcol[l] -= kpr;
          ++krow[l];
        }
      }
    }
    uint32_t bits[kLanes], above[kLanes];
    // One symbol group, row J of the lanes' kernels, specialised on the
    // table form (ENT: ModelView::krow_ent) and on whether a whole step's
    // words are left (UNCHECKED: branch-free renormalization).
    auto group = [&](auto jc, auto entc, auto unchecked) {
      constexpr uint32_t J = decltype(jc)::value;
      constexpr bool ENT = decltype(entc)::value;
      constexpr uint32_t add = J == 0 ? 0u : 1u + kKernRowSyms * (J - 1);
      constexpr uint32_t eadd = J == 0 ? 0u : 1u + 64u * (J - 1);
      for (uint32_t l = 0; l < act; ++l) {
        const uint32_t slot = x[l] & 4095u;
        uint32_t b, y;
        if constexpr (ENT) {
          // Codes and context in one (ModelView::krow_ent's layout).
          const uint32_t ctx = base[l] + (J == 0 ? 0u : eadd + above[l]);
          const uint32_t e = ent[ctx * 512 + (slot >> 3)];
          b = e & 63u;
          above[l] = b;
          y = ((e >> 6) & 0x1FFFu) * (x[l] >> 12) + slot - (e >> 19);
        } else {
          const uint32_t ctx = base[l] + (J == 0 ? 0u : add + above[l]);
          const uint32_t s = lut[uint64_t{ctx} * 4096 + slot];
          const uint32_t e = fs[uint64_t{ctx} * 256 + s];
          b = kRowBits.v[s & 31];
          above[l] = s;
          y = (e & 0xFFFFu) * (x[l] >> 12) + slot - (e >> 16);
        }
        if constexpr (decltype(unchecked)::value) {
          // Arithmetic, not a select: compilers turn the select into a
          // branch, mispredicted on a third of the symbols.
          const uint32_t need = y < kRansL;
          const uint32_t w = uint32_t{wp[2 * pos]} | uint32_t{wp[2 * pos + 1]} << 8;
          y = (y << (need << 4)) | (w & (0u - need));
          pos += need;
        } else if (y < kRansL) {
          if (pos < nwords) {
            y = y << 16 | uint32_t{wp[2 * pos]} | uint32_t{wp[2 * pos + 1]} << 8;
            ++pos;
          } else {
            bad = 1;
          }
        }
        x[l] = y;
        bits[l] = J == 0 ? b : bits[l] | b << (6 * J);
      }
    };
    auto rows = [&](auto entc, auto unchecked) {
      group(std::integral_constant<uint32_t, 0>{}, entc, unchecked);
      group(std::integral_constant<uint32_t, 1>{}, entc, unchecked);
      group(std::integral_constant<uint32_t, 2>{}, entc, unchecked);
    };
    const bool unchecked = pos + 3 * kLanes <= nwords;
    if (ent) {
      if (unchecked) rows(std::true_type{}, std::true_type{});
      else rows(std::true_type{}, std::false_type{});
    } else {
      if (unchecked) rows(std::false_type{}, std::true_type{});
      else rows(std::false_type{}, std::false_type{});
    }
    // The step's kernels: 18 bits each, lane l at bit 18 l.
    for (uint32_t l = act; l < kLanes; ++l) bits[l] = 0;
    krow_store_step(bits, out, first * kKernRowCodes / 4, out_len);
  }
  if (bad || pos != nwords) return 0;
  for (uint32_t l = 0; l < kLanes; ++l)
    if (x[l] != kRansL) return 0;
  return 1;
}

int decode_krow_chunk(const ModelView& m, const ChunkView& cv, const uint8_t* rans, uint32_t rans_len,
                      uint8_t* out) {
  if (cpu_path() != CpuPath::kScalar) {
    const int r = decode_krow_chunk_hwy(m, cv, rans, rans_len, out);
    if (r >= 0) return r;
  }
  return decode_krow_chunk_fast(m, cv, rans, rans_len, out);
}

int decode_krow_group(const ModelView* ms, const ChunkView& cv, const GroupSide* sides, int n) {
  if (cpu_path() == CpuPath::kScalar) return -1;
  return decode_krow_group_hwy(ms, cv, sides, n);
}

}  // namespace wcodec
