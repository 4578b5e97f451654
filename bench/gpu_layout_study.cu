// bench/gpu_layout_study.cu — how fast could a GPU decode chunks whose 32
// lanes take consecutive elements? A design study for the GPU decoder's
// throughput targets (cuda/README.md) and the format revision it needs.
//
// Today's chunks give each lane a rectangle of the tensor; the warp decoder
// spends ~200-300 instructions a warp step and every per-element access of a
// warp touches up to 32 cache lines (cuda/README.md). This study codes real
// tensors in the other layout and times a kernel for it:
//   - element i of a chunk belongs to lane i mod 32 (consecutive lanes,
//     consecutive elements), so the raw-byte loads and the output stores of
//     a warp are coalesced;
//   - one symbol per element: its top byte (F16: sign, exponent, 2 mantissa
//     bits; BF16: sign and 7 exponent bits; F32: sign and 7 exponent bits;
//     1-byte types: the byte), order 0 (no context), one 12-bit table per
//     tensor; the other bytes are stored raw as byte planes;
//   - two kernels: "block" (a block stages its tensor's table once in
//     shared memory as 4096 packed slot entries: symbol, offset in its
//     range, frequency - 1, one shared load a symbol; its 8 warps then
//     decode up to 64 chunks of that tensor, a barrier between tensors) and
//     "warp" (no barrier: each warp takes the next chunk from a counter and
//     stages that chunk's table, 4 KiB of slot symbols and 1 KiB of
//     frequency/start entries, in its own shared memory when it differs
//     from its last one; two dependent shared loads a symbol);
//   - renormalization words claimed in lane order with a ballot and a
//     prefix count (the codec's stream convention: RansEncoder writes the
//     words, so the stream is the codec's own);
//   - optionally the chunk's XXH3-64 checked by the warp (xxh3_64_g), as the
//     product decoder does.
// Tables and the encoder come from the codec (normalize_counts,
// RansEncoder); only the slot packing and the decode loops are the study's.
// Chunks of 64 Ki elements; a tensor's last chunk may be short. Tensors of
// other types are left out (the covered column shows their share).
//
// It prints per file: the share of the file the layout covers, the stored
// size of those tensors (streams + raw planes + tables) over their size, and
// the decode rate of each kernel, without and with the XXH3-64 check. On
// the host (--host, or without a GPU) it decodes with a lane loop and
// checks every chunk; on a GPU it builds a batch of about --gb GB from the
// file's chunks repeated, times each kernel with CUDA events (best of
// --reps launches), and compares every decoded byte of one copy of the
// file's chunks with the source, and counts the chunks a kernel reports bad.
//
//   build-gpu/bench/gpu_layout_study [--host] [--gb N] [--reps N] FILE.safetensors...
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "rans.h"
#include "rans_encoder.h"
#include "warp_group.cuh"
#include "wcodec/safetensors.h"
#include "xxh3_hd.h"

namespace {

constexpr uint32_t kLanesS = 32, kSlots = 1u << wcodec::kMaxProbBits, kChunkElems = 1u << 16;

__constant__ uint8_t c_secret[wcodec::kXxh3SecretSize] = WCODEC_XXH3_SECRET_BYTES;
const uint8_t h_secret[wcodec::kXxh3SecretSize] = WCODEC_XXH3_SECRET_BYTES;

struct Chunk {
  uint64_t in;    // arena offset: 32 u32 states, then the u16 words
  uint64_t raw;   // arena offset: eb - 1 byte planes of n bytes each
  uint64_t out;   // output offset
  uint64_t xxh3;  // of the chunk's output bytes
  uint32_t nwords, n, table, eb;
};

// A block's work: chunks [first, first + count) of one table.
struct Item {
  uint32_t first, count, table;
};

// Slot entry: symbol | (slot - start) << 8 | (freq - 1) << 20.
__host__ __device__ inline uint32_t step_sym(uint32_t& x, uint32_t e) {
  x = ((e >> 20) + 1) * (x >> wcodec::kMaxProbBits) + ((e >> 8) & (kSlots - 1));
  return e & 0xFFu;
}

__host__ __device__ inline uint32_t assemble(const uint8_t* raw, uint32_t n, uint32_t i, uint32_t eb, uint32_t s) {
  uint32_t v = s << (8 * (eb - 1));
  for (uint32_t k = 0; k + 1 < eb; ++k) v |= uint32_t{raw[uint64_t{k} * n + i]} << (8 * k);
  return v;
}

// Symbol lookups: the block's packed slot table (one shared load a symbol),
// or a warp's byte slot table and 256 frequency | start << 16 entries (two
// dependent shared loads, 5 KiB a warp).
struct PackedLook {
  const uint32_t* tab;
  __device__ uint32_t operator()(uint32_t& x) const { return step_sym(x, tab[x & (kSlots - 1)]); }
};
struct ByteLook {
  const uint8_t* sym;
  const uint32_t* fs;
  __device__ uint32_t operator()(uint32_t& x) const {
    const uint32_t slot = x & (kSlots - 1), s = sym[slot], e = fs[s];
    x = (e & 0xFFFFu) * (x >> wcodec::kMaxProbBits) + slot - (e >> 16);
    return s;
  }
};

template <uint32_t EB, class Look>
__device__ inline bool decode_chunk(const Chunk& c, const uint8_t* arena, const Look& look, uint8_t* out,
                                    uint32_t lane, bool check) {
  const uint32_t* st = reinterpret_cast<const uint32_t*>(arena + c.in);
  const uint16_t* words = reinterpret_cast<const uint16_t*>(arena + c.in + 4 * kLanesS);
  const uint8_t* raw = arena + c.raw;
  uint32_t x = st[lane], pos = 0, bad = 0;
  const uint32_t lt = (1u << lane) - 1u, n = c.n, nw = c.nwords;
  using T = typename std::conditional<EB == 1, uint8_t, typename std::conditional<EB == 2, uint16_t, uint32_t>::type>::type;
  T* o = reinterpret_cast<T*>(out + c.out);
  auto step = [&](uint32_t i, bool active) {
    uint32_t s = 0;
    if (active) s = look(x);
    const bool need = active && x < wcodec::kRansL;
    const uint32_t mask = __ballot_sync(0xFFFFFFFFu, need);
    if (need) {
      const uint32_t idx = pos + __popc(mask & lt);
      bad |= idx >= nw;
      x = (x << 16) | (idx < nw ? words[idx] : 0u);
    }
    pos += __popc(mask);
    if (active) o[i] = static_cast<T>(assemble(raw, n, i, EB, s));
  };
  const uint32_t full = n / kLanesS;
  for (uint32_t t = 0; t < full; ++t) step(t * kLanesS + lane, true);
  if (n % kLanesS) step(full * kLanesS + lane, lane < n % kLanesS);
  bad |= x != wcodec::kRansL || pos != nw;
  bool ok = __any_sync(0xFFFFFFFFu, bad) == 0;
  if (check) {
    __syncwarp();
    wcodec::gpu::WarpGroup g{lane};
    ok = ok && wcodec::xxh3_64_g(g, out + c.out, uint64_t{n} * EB, c_secret) == c.xxh3;
  }
  return ok;
}

template <class Look>
__device__ inline bool decode_any(const Chunk& c, const uint8_t* arena, const Look& look, uint8_t* out, uint32_t lane,
                                  bool check) {
  switch (c.eb) {
    case 1: return decode_chunk<1>(c, arena, look, out, lane, check);
    case 2: return decode_chunk<2>(c, arena, look, out, lane, check);
    default: return decode_chunk<4>(c, arena, look, out, lane, check);
  }
}

// Variant "block": a block stages its item's table (16 KiB) once, then its
// 8 warps decode the item's chunks (up to 64).
template <bool Check>
__global__ void __launch_bounds__(256, 6) block_kernel(const Item* items, uint32_t nitems, const Chunk* chunks,
                                                        const uint8_t* arena, const uint32_t* tables, uint8_t* out,
                                                        int* bad) {
  __shared__ uint32_t tab[kSlots];
  const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  for (uint32_t it = blockIdx.x; it < nitems; it += gridDim.x) {
    const Item item = items[it];
    __syncthreads();
    const uint4* src = reinterpret_cast<const uint4*>(tables + uint64_t{item.table} * kSlots);
    for (uint32_t k = threadIdx.x; k < kSlots / 4; k += blockDim.x) reinterpret_cast<uint4*>(tab)[k] = src[k];
    __syncthreads();
    for (uint32_t j = warp; j < item.count; j += nwarps) {
      const bool ok = decode_any(chunks[item.first + j], arena, PackedLook{tab}, out, lane, Check);
      if (!ok && lane == 0) atomicAdd(bad, 1);
    }
  }
}

// Variant "warp": no block barrier; each warp takes the next chunk from a
// counter and stages its table (byte slots and frequency/start entries)
// in its own 5 KiB of shared memory when it differs from its last one.
template <bool Check>
__global__ void __launch_bounds__(256, 6) warp_kernel(const Chunk* chunks, uint32_t n, const uint8_t* arena,
                                                       const uint8_t* sym_tables, const uint32_t* fs_tables,
                                                       uint8_t* out, int* bad, uint32_t* next) {
  __shared__ __align__(16) uint8_t sym_s[8][kSlots];
  __shared__ uint32_t fs_s[8][256];
  const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x / 32;
  uint32_t have = ~0u;
  for (;;) {
    uint32_t i = 0;
    if (lane == 0) i = atomicAdd(next, 1u);
    i = __shfl_sync(0xFFFFFFFFu, i, 0);
    if (i >= n) return;
    const Chunk c = chunks[i];
    if (c.table != have) {
      __syncwarp();
      const uint4* s = reinterpret_cast<const uint4*>(sym_tables + uint64_t{c.table} * kSlots);
      for (uint32_t k = lane; k < kSlots / 16; k += 32) reinterpret_cast<uint4*>(sym_s[warp])[k] = s[k];
      for (uint32_t k = lane; k < 256; k += 32) fs_s[warp][k] = fs_tables[uint64_t{c.table} * 256 + k];
      have = c.table;
      __syncwarp();
    }
    const bool ok = decode_any(c, arena, ByteLook{sym_s[warp], fs_s[warp]}, out, lane, Check);
    if (!ok && lane == 0) atomicAdd(bad, 1);
  }
}

// ---------------------------------------------------------------- host side

struct Coded {
  std::vector<uint8_t> arena;
  std::vector<uint32_t> tables;  // kSlots per tensor
  std::vector<uint8_t> sym_tables;   // kSlots per tensor (the warp variant)
  std::vector<uint32_t> fs_tables;   // 256 freq | start << 16 per tensor
  std::vector<Chunk> chunks;     // out offsets: into the file's covered bytes, in order
  std::vector<uint8_t> source;   // the covered tensors' bytes, in order
  uint64_t covered = 0, stored = 0, file = 0;
};

uint32_t elem_bytes(wcodec::DType t) {
  switch (t) {
    case wcodec::DType::kF16:
    case wcodec::DType::kBF16: return 2;
    case wcodec::DType::kF32: return 4;
    case wcodec::DType::kI8:
    case wcodec::DType::kU8: return 1;
    default: return 0;
  }
}

void pad16(std::vector<uint8_t>& a) { a.resize((a.size() + 15) & ~size_t{15}); }

bool code_file(const std::string& path, Coded* cf) {
  auto h = wcodec::read_safetensors_header_file(path);
  if (!h.ok()) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), h.status().message().c_str());
    return false;
  }
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  cf->file = bytes.size();
  for (const wcodec::TensorInfo& t : h->tensors) {
    const uint32_t eb = elem_bytes(t.dtype);
    const uint64_t n = eb ? t.nbytes() / eb : 0;
    if (!eb || n < 1024) continue;
    const uint8_t* p = bytes.data() + h->data_start + t.begin;
    std::vector<uint64_t> counts(256, 0);
    for (uint64_t i = 0; i < n; ++i) ++counts[p[i * eb + eb - 1]];
    wcodec::FreqTable ft = wcodec::normalize_counts(counts, wcodec::kMaxProbBits);
    ft.build_start();
    const uint32_t table = static_cast<uint32_t>(cf->tables.size() / kSlots);
    cf->tables.resize(cf->tables.size() + kSlots);
    uint32_t* slots = cf->tables.data() + uint64_t{table} * kSlots;
    uint64_t tbits = 0;
    for (uint32_t s = 0; s < 256; ++s) {
      if (!ft.freq[s]) continue;
      tbits += 20;  // symbol and frequency, as an estimate of a compact table
      for (uint32_t j = 0; j < ft.freq[s]; ++j) slots[ft.start[s] + j] = s | j << 8 | (ft.freq[s] - 1u) << 20;
    }
    for (uint32_t k = 0; k < kSlots; ++k) cf->sym_tables.push_back(static_cast<uint8_t>(slots[k] & 0xFFu));
    for (uint32_t s = 0; s < 256; ++s) cf->fs_tables.push_back(ft.freq[s] ? (ft.freq[s] | uint32_t{ft.start[s]} << 16) : 0u);
    cf->stored += tbits / 8 + 16;
    for (uint64_t c0 = 0; c0 < n; c0 += kChunkElems) {
      const uint32_t cn = static_cast<uint32_t>(std::min<uint64_t>(kChunkElems, n - c0));
      const uint8_t* cp = p + c0 * eb;
      wcodec::RansEncoder enc;
      for (uint32_t i = 0; i < cn; ++i) enc.put(static_cast<int>(i % kLanesS), ft, cp[uint64_t{i} * eb + eb - 1]);
      Chunk c{};
      c.in = cf->arena.size();
      const size_t w = enc.finish(cf->arena);
      c.nwords = static_cast<uint32_t>((w - 4 * kLanesS) / 2);
      pad16(cf->arena);
      c.raw = cf->arena.size();
      for (uint32_t k = 0; k + 1 < eb; ++k)
        for (uint32_t i = 0; i < cn; ++i) cf->arena.push_back(cp[uint64_t{i} * eb + k]);
      pad16(cf->arena);
      c.out = cf->source.size();
      c.n = cn;
      c.eb = eb;
      c.table = table;
      c.xxh3 = wcodec::xxh3_64(cp, uint64_t{cn} * eb, h_secret);
      cf->source.insert(cf->source.end(), cp, cp + uint64_t{cn} * eb);
      cf->stored += w + uint64_t{cn} * (eb - 1);
      cf->chunks.push_back(c);
    }
    cf->covered += n * eb;
  }
  return true;
}

// The kernel's loop with the lanes in turn (a check of the encoder and the
// stream convention where no GPU is present).
bool host_decode(const Coded& cf, std::vector<uint8_t>& out) {
  out.assign(cf.source.size(), 0);
  for (const Chunk& c : cf.chunks) {
    const uint32_t* tab = cf.tables.data() + uint64_t{c.table} * kSlots;
    uint32_t x[kLanesS];
    std::memcpy(x, cf.arena.data() + c.in, sizeof x);
    const uint8_t* wp = cf.arena.data() + c.in + 4 * kLanesS;
    const uint8_t* raw = cf.arena.data() + c.raw;
    uint32_t pos = 0;
    for (uint32_t i = 0; i < c.n; ++i) {
      const uint32_t l = i % kLanesS;
      const uint32_t s = step_sym(x[l], tab[x[l] & (kSlots - 1)]);
      if (x[l] < wcodec::kRansL) {
        if (pos >= c.nwords) return false;
        x[l] = x[l] << 16 | (wp[2 * pos] | uint32_t{wp[2 * pos + 1]} << 8);
        ++pos;
      }
      const uint32_t v = assemble(raw, c.n, i, c.eb, s);
      std::memcpy(out.data() + c.out + uint64_t{i} * c.eb, &v, c.eb);
    }
    if (pos != c.nwords) return false;
    for (uint32_t l = 0; l < kLanesS; ++l)
      if (x[l] != wcodec::kRansL) return false;
  }
  return true;
}

#define CK(e)                                                                           \
  do {                                                                                  \
    cudaError_t err_ = (e);                                                             \
    if (err_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

struct GpuResult {
  double gbs[4] = {};  // block, block + xxh3, warp, warp + xxh3
  bool equal = true;
  int bad = 0;
  double batch_gb = 0;
};

template <class T>
T* upload(const std::vector<T>& v) {
  T* d = nullptr;
  CK(cudaMalloc(&d, v.size() * sizeof(T) + 64));
  CK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

GpuResult gpu_run(const Coded& cf, double gb, int reps) {
  GpuResult r;
  const uint64_t src = cf.source.size();
  const uint64_t copies = std::max<uint64_t>(1, static_cast<uint64_t>(gb * 1e9 / static_cast<double>(src)));
  std::vector<Chunk> chunks;
  std::vector<Item> items;
  for (uint64_t k = 0; k < copies; ++k) {
    for (size_t i = 0; i < cf.chunks.size();) {
      // Up to 64 consecutive chunks of one table per block.
      Item it{static_cast<uint32_t>(chunks.size()), 0, cf.chunks[i].table};
      while (i < cf.chunks.size() && it.count < 64 && cf.chunks[i].table == it.table) {
        Chunk c = cf.chunks[i++];
        c.out += k * src;
        chunks.push_back(c);
        ++it.count;
      }
      items.push_back(it);
    }
  }
  r.batch_gb = static_cast<double>(copies * src) / 1e9;
  uint8_t* d_arena = upload(cf.arena);
  uint32_t* d_tab = upload(cf.tables);
  uint8_t* d_sym = upload(cf.sym_tables);
  uint32_t* d_fs = upload(cf.fs_tables);
  Chunk* d_chunks = upload(chunks);
  Item* d_items = upload(items);
  uint8_t* d_out;
  int* d_bad;
  uint32_t* d_next;
  CK(cudaMalloc(&d_out, copies * src));
  CK(cudaMalloc(&d_bad, sizeof(int)));
  CK(cudaMalloc(&d_next, sizeof(uint32_t)));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const uint32_t ni = static_cast<uint32_t>(items.size()), nc = static_cast<uint32_t>(chunks.size());
  for (int v = 0; v < 4; ++v) {
    int per_sm = 0;
    const void* k = v == 0 ? reinterpret_cast<const void*>(block_kernel<false>)
                    : v == 1 ? reinterpret_cast<const void*>(block_kernel<true>)
                    : v == 2 ? reinterpret_cast<const void*>(warp_kernel<false>)
                             : reinterpret_cast<const void*>(warp_kernel<true>);
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, 256, 0));
    const uint32_t grid = static_cast<uint32_t>(uint64_t(sms) * per_sm);
    float best = 1e30f;
    for (int rep = 0; rep < reps; ++rep) {
      CK(cudaMemset(d_bad, 0, sizeof(int)));
      CK(cudaMemset(d_next, 0, sizeof(uint32_t)));
      CK(cudaMemset(d_out, 0xA5, src));  // a wrong first copy cannot pass the comparison
      CK(cudaEventRecord(e0));
      switch (v) {
        case 0: block_kernel<false><<<std::min(grid, ni), 256>>>(d_items, ni, d_chunks, d_arena, d_tab, d_out, d_bad); break;
        case 1: block_kernel<true><<<std::min(grid, ni), 256>>>(d_items, ni, d_chunks, d_arena, d_tab, d_out, d_bad); break;
        case 2: warp_kernel<false><<<grid, 256>>>(d_chunks, nc, d_arena, d_sym, d_fs, d_out, d_bad, d_next); break;
        default: warp_kernel<true><<<grid, 256>>>(d_chunks, nc, d_arena, d_sym, d_fs, d_out, d_bad, d_next); break;
      }
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      CK(cudaGetLastError());
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      best = std::min(best, ms);
    }
    r.gbs[v] = static_cast<double>(copies * src) / (best * 1e-3) / 1e9;
    int bad = 0;
    CK(cudaMemcpy(&bad, d_bad, sizeof(int), cudaMemcpyDeviceToHost));
    std::vector<uint8_t> back(src);
    CK(cudaMemcpy(back.data(), d_out, src, cudaMemcpyDeviceToHost));
    r.equal = r.equal && back == cf.source;
    r.bad += bad;
    if (v == 0) std::fprintf(stderr, "(block kernel: %d blocks an SM; warp kernel follows)\n", per_sm);
  }
  for (void* p : {static_cast<void*>(d_arena), static_cast<void*>(d_tab), static_cast<void*>(d_sym),
                  static_cast<void*>(d_fs), static_cast<void*>(d_chunks), static_cast<void*>(d_items),
                  static_cast<void*>(d_out), static_cast<void*>(d_bad), static_cast<void*>(d_next)})
    CK(cudaFree(p));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  bool host = false;
  double gb = 4;
  int reps = 5;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--host") host = true;
    else if (a == "--gb" && i + 1 < argc) gb = std::atof(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else files.push_back(a);
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: gpu_layout_study [--host] [--gb N] [--reps N] FILE.safetensors...\n");
    return 2;
  }
  int ndev = 0;
  if (!host && (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)) {
    std::printf("no CUDA device: decoding on the host only (--host)\n");
    host = true;
  }
  if (!host) {
    cudaDeviceProp prop{};
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("GPU: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  }
  std::printf("%-40s %8s %8s %8s %7s %8s %8s %8s %8s %6s\n", "file", "MB", "covered", "ratio", "batchGB", "block",
              "+xxh3", "warp", "+xxh3", "equal");
  int rc = 0;
  for (const std::string& path : files) {
    Coded cf;
    if (!code_file(path, &cf)) {
      rc = 1;
      continue;
    }
    const std::string name = path.substr(path.find_last_of('/') + 1);
    const double ratio = cf.covered ? static_cast<double>(cf.stored) / static_cast<double>(cf.covered) : 0;
    const double cov = static_cast<double>(cf.covered) / static_cast<double>(cf.file);
    if (cf.chunks.empty()) {
      std::printf("%-40s %8.1f %8s (no tensor of a covered type)\n", name.c_str(), cf.file / 1e6, "0%");
      continue;
    }
    if (host) {
      std::vector<uint8_t> out;
      const auto t0 = std::chrono::steady_clock::now();
      const bool ok = host_decode(cf, out) && out == cf.source;
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%-40s %8.1f %7.1f%% %8.4f %7s %8s %8s %8s %8s %6s  (host loop %.0f MB/s)\n", name.c_str(), cf.file / 1e6,
                  100 * cov, ratio, "-", "-", "-", "-", "-", ok ? "yes" : "NO", cf.source.size() / s / 1e6);
      rc |= ok ? 0 : 1;
      continue;
    }
    const GpuResult r = gpu_run(cf, gb, reps);
    const bool ok = r.equal && r.bad == 0;
    std::printf("%-40s %8.1f %7.1f%% %8.4f %7.2f %8.1f %8.1f %8.1f %8.1f %6s\n", name.c_str(), cf.file / 1e6,
                100 * cov, ratio, r.batch_gb, r.gbs[0], r.gbs[1], r.gbs[2], r.gbs[3], ok ? "yes" : "NO");
    rc |= ok ? 0 : 1;
  }
  std::printf("(ratio: stored streams + raw planes + tables of the covered tensors over their bytes; block, warp: "
              "GB/s of decoded bytes of the two kernels, best of %d launches over the batch, without and with each "
              "chunk's XXH3-64 checked (+xxh3))\n",
              reps);
  return rc;
}
