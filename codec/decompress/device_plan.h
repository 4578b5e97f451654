// codec/decompress/device_plan.h — chunks of a .wcodec file laid out for a decoder
// that runs them in its own memory (the CUDA batch decoder), and the
// per-chunk step that decoder runs, compiled for host and device.
//
// plan_chunks builds a DevicePlan: one input arena holding every
// byte the decoders read (the models' decoding tables, side information,
// zero points and the chunk payloads), addressed by offsets; the layout of
// an output region and a scratch region; and per chunk its geometry,
// payload parts and expected checksum. Raw chunks are copied as they are and
// zstd chunks are decoded on the host while planning (kReady). Before the
// arena is used at its final address (device memory, or the host buffer
// itself in tests), relocate() writes real pointers into the tables' entries
// and the model views.
//
// run_plan_chunk_g decodes one chunk with the same decoder bodies as the CPU
// reference decoder (chunk_decode.h, written over a lane group) and verifies
// its XXH3-64; the CUDA kernel runs it with one warp per chunk.
// Thread-safety: plans are plain data; run_plan_chunk writes only the
// chunk's own output and scratch.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "chunk_decode.h"
#include "float_direct.h"
#include "int_direct.h"
#include "wcodec/reader.h"
#include "xxh3_hd.h"

namespace wcodec {

inline constexpr uint64_t kPlanNone = ~0ull;

// Where a DecTable will be: the same 16 bytes, offsets until relocate().
struct PlanTable {
  uint64_t sym;
  uint64_t fs;
};
static_assert(sizeof(PlanTable) == sizeof(DecTable), "tables are relocated in place");

struct PlanModel {
  ModelView mv;  // pointer fields are set by relocate()
  uint64_t t0 = kPlanNone, t1 = kPlanNone;  // offsets of n0 / n1 PlanTable entries
  uint64_t rc = kPlanNone, cc = kPlanNone, zp = kPlanNone, luts = kPlanNone;
};

enum class PlanKind : uint32_t { kModel = 0, kReady = 1 };

struct PlanChunk {
  uint32_t model = 0;  // PlanModel index (kModel)
  PlanKind kind = PlanKind::kReady;
  ChunkView cv{};
  uint64_t map = kPlanNone;  // tile map (arena offset) or none
  uint64_t rans = 0;         // kModel: rANS stream
  uint32_t rans_len = 0;
  uint32_t out_len = 0;      // decoded bytes
  uint64_t raw = 0;          // kModel: raw bit section; kReady: the decoded bytes
  uint64_t raw_len = 0;
  uint64_t out = 0;          // offset in the output region
  uint64_t scratch = 0;      // offset in the scratch region
  uint64_t xxh3 = 0;         // expected checksum of the decoded bytes
  uint32_t tail = 0;         // kModel float: the raw tail is in the lane states
};

// Where plan arenas live: the heap by default; a GPU decoder may supply
// page-locked memory (gpu::pinned_arena_memory()), which it uploads from
// directly instead of staging a copy.
struct ArenaMemory {
  void* (*alloc)(size_t bytes);  // nullptr when it cannot
  void (*release)(void* p);
};
template <class T>
struct ArenaAllocator {
  using value_type = T;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  const ArenaMemory* mem = nullptr;  // nullptr: the heap
  ArenaAllocator() = default;
  explicit ArenaAllocator(const ArenaMemory* m) : mem(m) {}
  template <class U>
  ArenaAllocator(const ArenaAllocator<U>& o) : mem(o.mem) {}  // NOLINT: allocator rebinding
  T* allocate(size_t n) {
    if (!mem) return std::allocator<T>().allocate(n);
    void* p = mem->alloc(n * sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (!mem) std::allocator<T>().deallocate(p, n);
    else mem->release(p);
  }
  friend bool operator==(const ArenaAllocator& a, const ArenaAllocator& b) { return a.mem == b.mem; }
  friend bool operator!=(const ArenaAllocator& a, const ArenaAllocator& b) { return a.mem != b.mem; }
};
using PlanArena = std::vector<uint8_t, ArenaAllocator<uint8_t>>;

struct DevicePlan {
  PlanArena arena;
  std::vector<PlanModel> models;
  std::vector<PlanChunk> chunks;
  std::vector<size_t> chunk_index;  // the Reader's global index of each chunk
  uint64_t out_bytes = 0;
  uint64_t scratch_bytes = 0;
  DevicePlan() = default;
  // An empty plan whose arena comes from `mem`.
  explicit DevicePlan(const ArenaMemory* mem) : arena(ArenaAllocator<uint8_t>(mem)) {}
  // Empties the plan, keeping its arena's memory and capacity.
  void clear() {
    arena.clear();
    models.clear();
    chunks.clear();
    chunk_index.clear();
    out_bytes = scratch_bytes = 0;
  }
};

// Lays out chunks `global_indices` of `rd` for a decoder that runs them in
// its own memory (the CUDA decoder): payloads, decoding tables and zero
// points copied into one arena; raw and zstd chunks made ready on the host
// (device_plan.cpp). Framing errors are reported here, naming the file,
// tensor and chunk.
Status plan_chunks(const Reader& rd, const std::vector<size_t>& global_indices, DevicePlan* plan);

// Scratch bytes run_plan_chunk needs for a chunk of kind `kind` and n
// elements (16-byte aligned): int residuals; float exponent and
// sign/mantissa grids and the raw tail buffer the lanes share.
WC_HD inline uint64_t plan_scratch_bytes(ModelKind kind, uint64_t n) {
  uint64_t b = 0;
  if (kind == ModelKind::kInt) b = 4 * n;
  if (kind == ModelKind::kFloat) b = ((3 * n + 15) & ~uint64_t{15}) + kFloatTailShared;
  return (b + 15) & ~uint64_t{15};
}

// Appends `src` (not yet relocated) to `dst` (not yet relocated): one plan,
// one launch, for chunks of many files. src's arena goes at the next
// 128-byte boundary of dst's, its outputs after dst's outputs, its scratch
// after dst's scratch.
inline void append_plan(DevicePlan& dst, const DevicePlan& src) {
  const uint64_t d = (dst.arena.size() + 127) & ~uint64_t{127};
  dst.arena.resize(d, 0);
  dst.arena.insert(dst.arena.end(), src.arena.begin(), src.arena.end());
  auto shift = [d](uint64_t off) { return off == kPlanNone ? off : off + d; };
  const uint32_t m0 = static_cast<uint32_t>(dst.models.size());
  for (PlanModel pm : src.models) {
    pm.t0 = shift(pm.t0);
    pm.t1 = shift(pm.t1);
    pm.rc = shift(pm.rc);
    pm.cc = shift(pm.cc);
    pm.zp = shift(pm.zp);
    pm.luts = shift(pm.luts);
    // The table entries hold arena offsets too.
    auto fix = [&](uint64_t off, uint32_t n) {
      for (uint32_t i = 0; i < n; ++i) {
        PlanTable t;
        std::memcpy(&t, dst.arena.data() + off + i * sizeof(PlanTable), sizeof t);
        t.sym += d;
        t.fs += d;
        std::memcpy(dst.arena.data() + off + i * sizeof(PlanTable), &t, sizeof t);
      }
    };
    if (pm.t0 != kPlanNone) fix(pm.t0, pm.mv.n0);
    if (pm.t1 != kPlanNone) fix(pm.t1, pm.mv.n1);
    dst.models.push_back(pm);
  }
  for (PlanChunk c : src.chunks) {
    if (c.kind == PlanKind::kModel) c.model += m0;
    c.map = shift(c.map);
    c.rans += d;
    c.raw += d;
    c.out += dst.out_bytes;
    c.scratch += dst.scratch_bytes;
    dst.chunks.push_back(c);
  }
  dst.chunk_index.insert(dst.chunk_index.end(), src.chunk_index.begin(), src.chunk_index.end());
  dst.out_bytes += src.out_bytes;
  dst.scratch_bytes += src.scratch_bytes;
}

// The model views for an arena at `base` (the address the decoder will
// read it at): pointer-complete ModelViews whose table arrays point at the
// PlanTable entries there, which must hold pointers by the time they are
// read (relocate_tables on the host, or the GPU decoder's relocation
// kernel over plan_table_lists).
inline void plan_views(const DevicePlan& plan, const uint8_t* base, std::vector<ModelView>* views) {
  views->clear();
  for (const PlanModel& pm : plan.models) {
    ModelView v = pm.mv;
    auto at = [&](uint64_t off) -> const uint8_t* { return off == kPlanNone ? nullptr : base + off; };
    v.t0 = reinterpret_cast<const DecTable*>(at(pm.t0));
    v.t1 = reinterpret_cast<const DecTable*>(at(pm.t1));
    v.rc = at(pm.rc);
    v.cc = at(pm.cc);
    v.zp = at(pm.zp);
    v.luts = reinterpret_cast<const IntLuts*>(at(pm.luts));
    // The vector decoders' tables are host-only.
    v.slot_all = v.slot1_all = nullptr;
    v.tern3 = v.krow_ent = v.ent8 = v.ent8_1 = nullptr;
    v.sym_small = nullptr;
    v.fs_small = nullptr;
    v.rc_pad = v.cc_pad = nullptr;
    views->push_back(v);
  }
}

// The arrays of PlanTable entries in the arena: (arena offset, count) pairs.
inline std::vector<std::pair<uint64_t, uint64_t>> plan_table_lists(const DevicePlan& plan) {
  std::vector<std::pair<uint64_t, uint64_t>> lists;
  for (const PlanModel& pm : plan.models) {
    if (pm.t0 != kPlanNone && pm.mv.n0) lists.emplace_back(pm.t0, pm.mv.n0);
    if (pm.t1 != kPlanNone && pm.mv.n1) lists.emplace_back(pm.t1, pm.mv.n1);
  }
  return lists;
}

// One PlanTable entry (offsets) as the DecTable of an arena at base.
WC_HD inline DecTable relocated_table(const PlanTable& t, const uint8_t* base) {
  return DecTable{base + t.sym, reinterpret_cast<const uint32_t*>(base + t.fs)};
}

// Rewrites the PlanTable entries in `bytes` (plan.arena itself, or a copy
// of it: the bytes that will be at base) as DecTables for an arena at base.
inline void relocate_tables(const DevicePlan& plan, uint8_t* bytes, const uint8_t* base) {
  for (const auto& [off, n] : plan_table_lists(plan))
    for (uint64_t i = 0; i < n; ++i) {
      PlanTable t;
      std::memcpy(&t, plan.arena.data() + off + i * sizeof(PlanTable), sizeof t);
      const DecTable d = relocated_table(t, base);
      std::memcpy(bytes + off + i * sizeof(DecTable), &d, sizeof d);
    }
}

// Turns the plan's offsets into pointers for an arena at `base`: rewrites
// the table entries in `bytes` and fills `views` (one per model).
inline void relocate_into(const DevicePlan& plan, uint8_t* bytes, const uint8_t* base, std::vector<ModelView>* views) {
  relocate_tables(plan, bytes, base);
  plan_views(plan, base, views);
}

// In place: plan.arena itself will be at base (afterwards the plan holds
// pointers, not offsets, and cannot be relocated or appended again).
inline void relocate(DevicePlan& plan, const uint8_t* base, std::vector<ModelView>* views) {
  relocate_into(plan, plan.arena.data(), base, views);
}

// Results of run_plan_chunk.
inline constexpr int kPlanOk = 1, kPlanMalformed = 0, kPlanChecksum = 2;
// Which decoders run_plan_chunk may use (bits; benchmarks compare them).
// kPathFastStarts: the GPU kernel passes its shared memory as `fast`.
inline constexpr uint32_t kPathFloatDirect = 1, kPathFloatSearch = 2, kPathIntDirect = 4, kPathFastStarts = 8,
                          kPathsAll = 15;

// Decodes chunk `c` (relocated plan at `in`) into out_base + c.out with
// lane group g (lane_group.h: the host group here and in tests, one warp in
// the CUDA kernel) and checks its checksum against c.xxh3. Every lane gets
// the result. `paths` (kPath* bits; benchmarks compare them) picks the
// decoders: float chunks take decode_float_direct_g (float_direct.h) with
// kPathFloatDirect when they fit it (symbols found by binary search with
// kPathFloatSearch, else from the slot tables), else decode_float_chunk_g;
// int chunks take decode_int_direct_g (int_direct.h) with kPathIntDirect
// when they fit it, else decode_int_residuals_g + int_finish_chunk_g.
// fast: kStartsCap entries of fast memory (the warp's shared memory on the
// GPU) for the direct float decoder's starts tables, or null.
template <class G>
WC_HD inline int run_plan_chunk_g(G& g, const PlanChunk& c, const ModelView* views, const uint8_t* in,
                                  uint8_t* out_base, uint8_t* scratch_base, const uint8_t* secret,
                                  uint32_t paths = kPathsAll, uint16_t* fast = nullptr) {
  uint8_t* out = out_base + c.out;
  bool ok = true;
  if (c.kind == PlanKind::kReady) {
    g.each([&](uint32_t l) {
      for (uint32_t i = l; i < c.out_len; i += kLanes) out[i] = in[c.raw + i];
    });
  } else {
    const ModelView m = views[c.model];  // by value: the decode loops keep its fields in registers
    const uint64_t n = uint64_t{c.cv.h} * c.cv.w;
    uint8_t* s = scratch_base + c.scratch;
    const uint8_t* map = c.map == kPlanNone ? nullptr : in + c.map;
    switch (m.kind) {
      case ModelKind::kInt: {
        uint32_t ring_w = 0;
        if ((paths & kPathIntDirect) &&
            int_direct_fits(m, c.cv, map != nullptr, plan_scratch_bytes(ModelKind::kInt, n), &ring_w)) {
          ok = c.raw_len == 0 && decode_int_direct_g(g, m, c.cv, in + c.rans, c.rans_len, out, s);
          break;
        }
        int32_t* res = reinterpret_cast<int32_t*>(s);
        ok = c.raw_len == 0 && decode_int_residuals_g(g, m, c.cv, in + c.rans, c.rans_len, res);
        if (ok) {
          g.sync();
          ok = int_finish_chunk_g(g, m, c.cv, map, out, res);
        }
        break;
      }
      case ModelKind::kFloat: {
        uint32_t ring_w = 0;
        if ((paths & kPathFloatDirect) &&
            float_direct_fits(m.fp, c.cv, c.tail != 0, plan_scratch_bytes(ModelKind::kFloat, n), &ring_w)) {
          ok = decode_float_direct_g(g, m, c.cv, in + c.rans, c.rans_len, in + c.raw, c.raw_len, out, c.tail != 0, s,
                                     ring_w, (paths & kPathFloatSearch) != 0, fast);
          break;
        }
        uint16_t* e = reinterpret_cast<uint16_t*>(s);
        uint8_t* sm = s + 2 * n;
        uint8_t* shared = s + ((3 * n + 15) & ~uint64_t{15});
        ok = decode_float_chunk_g(g, m, c.cv, in + c.rans, c.rans_len, in + c.raw, c.raw_len, out, e, sm,
                                  c.tail != 0, shared);
        break;
      }
      case ModelKind::kBytes:
        ok = c.raw_len == 0 && decode_bytes_chunk_g(g, m, c.cv, in + c.rans, c.rans_len, out);
        break;
    }
  }
  if (!ok) return kPlanMalformed;
  g.sync();
  return xxh3_64_g(g, out, c.out_len, secret) == c.xxh3 ? kPlanOk : kPlanChecksum;
}

WC_HD inline int run_plan_chunk(const PlanChunk& c, const ModelView* views, const uint8_t* in, uint8_t* out_base,
                                uint8_t* scratch_base, const uint8_t* secret, uint32_t paths = kPathsAll,
                                uint16_t* fast = nullptr) {
  HostGroup g;
  return run_plan_chunk_g(g, c, views, in, out_base, scratch_base, secret, paths, fast);
}

}  // namespace wcodec
