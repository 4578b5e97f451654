// codec/decompress/device_plan.cpp — plan_chunks: a Reader's chunks laid
// out for a decoder that runs them in its own memory. See device_plan.h.
// Thread-safety: as Reader::read (many plans may be built at once).
#include "device_plan.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>

#include "reader_i.h"
#include "tensor_decode.h"

namespace wcodec {

Status plan_chunks(const Reader& rd, const std::vector<size_t>& gis, DevicePlan* plan) {
  plan->clear();  // keeps the arena's memory (page-locked arenas are costly to allocate)
  PlanArena& A = plan->arena;
  // Reserves n bytes (16-byte aligned start, 8 zero bytes after: decoders
  // may load a little past a section, as they may in the file's payloads).
  auto reserve = [&](size_t n) -> uint64_t {
    A.resize((A.size() + 15) & ~size_t{15}, 0);
    const uint64_t off = A.size();
    A.resize(off + n + 8, 0);
    return off;
  };
  auto put = [&](const void* p, size_t n) -> uint64_t {
    const uint64_t off = reserve(n);
    if (n) std::memcpy(A.data() + off, p, n);
    return off;
  };
  // The reference decoder's tables of a model (its decoding tables, built
  // or taken from the table cache).
  auto put_tables = [&](const DecTable* ts, uint32_t n) -> uint64_t {
    if (n == 0) return kPlanNone;
    std::vector<PlanTable> entries;
    for (uint32_t i = 0; i < n; ++i) {
      PlanTable e;
      e.sym = put(ts[i].sym, size_t{1} << kMaxProbBits);
      // Starts made non-decreasing over all 256 entries (a symbol the table
      // does not code gets the running total), so that a decoder may find
      // a slot's symbol by binary search (float_direct.h); the slot table
      // never maps to such a symbol.
      uint32_t fs[256], total = 0;
      for (uint32_t k = 0; k < 256; ++k) {
        const uint32_t f = ts[i].fs[k] & 0xFFFFu;
        const uint32_t st = f ? ts[i].fs[k] >> 16 : total;
        total = f ? st + f : total;
        fs[k] = f | st << 16;
      }
      e.fs = put(fs, sizeof fs);
      entries.push_back(e);
    }
    return put(entries.data(), entries.size() * sizeof(PlanTable));
  };
  // The arena's size, reserved up front so that it is allocated once.
  {
    constexpr uint64_t kPad = 16 + 8;
    uint64_t bytes = 0;
    std::map<uint32_t, bool> seen;
    for (const size_t gi : gis) {
      if (gi >= rd.num_chunks()) break;
      const ChunkEntry& e = rd.chunk(gi);
      bytes += std::max<uint64_t>(e.stored_size, e.decoded_size) + kPad;
      const uint32_t ti = ReaderAccess::chunk_tensor(rd, gi);
      const auto& t = ReaderAccess::tensor(rd, ti);
      if (static_cast<ChunkMethod>(e.method) != ChunkMethod::kModel || t.split || !t.model || !seen.emplace(ti, true).second)
        continue;
      const TensorModel& m = *t.model;
      const uint64_t tables = m.t0.size() + m.t1.size();
      bytes += tables * ((uint64_t{1} << kMaxProbBits) + 256 * 4 + 2 * kPad) + 2 * (tables * sizeof(PlanTable) + kPad);
      bytes += m.rc.size() + m.cc.size() + sizeof m.luts + 3 * kPad;
      if (m.ip.zgroup && t.aux >= 0) bytes += ReaderAccess::tensor(rd, static_cast<size_t>(t.aux)).info.nbytes() + kPad;
    }
    try {
      A.reserve(bytes);
    } catch (const std::bad_alloc&) {
      return Status::IOError(rd.path() + ": no memory for a plan arena of " + std::to_string(bytes) + " bytes");
    }
  }
  std::map<uint32_t, uint32_t> model_of_tensor;
  std::vector<uint8_t> payload;
  for (const size_t gi : gis) {
    if (gi >= rd.num_chunks()) return Status::OutOfRange(rd.path() + ": chunk index " + std::to_string(gi));
    const ChunkEntry& e = rd.chunk(gi);
    const uint32_t ti = ReaderAccess::chunk_tensor(rd, gi);
    const auto& t = ReaderAccess::tensor(rd, ti);
    const std::string what = rd.describe_chunk(gi);
    PlanChunk c;
    c.out_len = e.decoded_size;
    c.xxh3 = e.xxh3;
    c.out = plan->out_bytes;
    plan->out_bytes += (uint64_t{e.decoded_size} + 15) & ~uint64_t{15};
    // The chunk decoded by the CPU decoder into the arena, as ready bytes.
    auto decode_on_host = [&]() -> Status {
      const uint64_t off = reserve(e.decoded_size);
      WC_RETURN_IF_ERROR(rd.decode_chunk(gi, A.data() + off));
      c.kind = PlanKind::kReady;
      c.raw = off;
      c.raw_len = e.decoded_size;
      return Status::OK();
    };
    switch (static_cast<ChunkMethod>(e.method)) {
      case ChunkMethod::kRaw: {
        if (e.stored_size != e.decoded_size)
          return Status::Corruption(what + ": raw chunk size " + std::to_string(e.stored_size) +
                                    " != decoded size " + std::to_string(e.decoded_size));
        const uint64_t off = reserve(e.stored_size);  // read straight into the arena
        WC_RETURN_IF_ERROR(ReaderAccess::pread_exact(rd, e.file_offset, e.stored_size, A.data() + off));
        c.kind = PlanKind::kReady;
        c.raw = off;
        c.raw_len = e.stored_size;
        break;
      }
      case ChunkMethod::kZstd: {
        payload.resize(e.stored_size);
        WC_RETURN_IF_ERROR(ReaderAccess::pread_exact(rd, e.file_offset, e.stored_size, payload.data()));
        const uint64_t off = reserve(e.decoded_size);
        const size_t r = ZSTD_decompress(A.data() + off, e.decoded_size, payload.data(), payload.size());
        if (ZSTD_isError(r) || r != e.decoded_size)
          return Status::Corruption(what + ": zstd chunk does not decode to " + std::to_string(e.decoded_size) +
                                    " bytes");
        c.kind = PlanKind::kReady;
        c.raw = off;
        c.raw_len = e.decoded_size;
        break;
      }
      case ChunkMethod::kZstdGroup:
        // A zstd group's chunk (format 2.11): decoded by the reader (one
        // frame for the group's chunks) and sent as ready bytes.
        WC_RETURN_IF_ERROR(decode_on_host());
        break;
      case ChunkMethod::kModel: {
        if (t.split) {
          // Split chunks (§6.1) are decoded here by the CPU decoder and
          // travel as ready bytes: the device decoders know one model per
          // chunk.
          WC_RETURN_IF_ERROR(decode_on_host());
          break;
        }
        if (!t.has_model || !t.model) return Status::Corruption(what + ": model-coded chunk in a tensor without a model");
        const TensorModel& m = *t.model;
        // The payload straight into the arena; its parts as arena offsets
        // (before anything else is put: the arena may move).
        const uint64_t base = reserve(e.stored_size);
        const uint8_t* pay = A.data() + base;
        WC_RETURN_IF_ERROR(ReaderAccess::pread_exact(rd, e.file_offset, e.stored_size, A.data() + base));
        ModelPayload mp;
        WC_RETURN_IF_ERROR(parse_model_payload(t.geom, m, ReaderAccess::chunk_local(rd, gi), pay, e.stored_size,
                                               e.decoded_size, what, &mp));
        auto at = [&](const uint8_t* p) { return base + static_cast<uint64_t>(p - pay); };
        c.kind = PlanKind::kModel;
        c.cv = mp.cv;
        c.map = mp.map ? at(mp.map) : kPlanNone;
        c.rans = at(mp.rans);
        c.rans_len = mp.rans_len;
        c.raw = at(mp.raw);
        c.raw_len = mp.raw_len;
        c.tail = mp.tail ? 1 : 0;
        auto found = model_of_tensor.find(ti);
        if (found == model_of_tensor.end()) {
          PlanModel pm;
          std::memset(&pm.mv, 0, sizeof pm.mv);
          pm.mv.kind = m.kind;
          pm.mv.fp = m.fp;
          pm.mv.ip = m.ip;
          pm.mv.bp = m.bp;
          pm.mv.n0 = static_cast<uint32_t>(m.t0.size());
          pm.mv.n1 = static_cast<uint32_t>(m.t1.size());
          std::shared_ptr<const TensorModel::VectorTables> hold;
          const ModelView mv = m.view(&hold);
          pm.t0 = put_tables(mv.t0, mv.n0);
          pm.t1 = put_tables(mv.t1, mv.n1);
          if (m.kind == ModelKind::kInt) {
            pm.rc = put(m.rc.data(), m.rc.size());
            pm.cc = put(m.cc.data(), m.cc.size());
            pm.luts = put(&m.luts, sizeof m.luts);
            if (m.ip.zgroup) {
              if (t.aux < 0) return Status::Corruption(what + ": zero points needed but the tensor has none");
              WC_RETURN_IF_ERROR(ReaderAccess::load_aux(rd, static_cast<size_t>(t.aux)));
              const auto& z = ReaderAccess::tensor(rd, static_cast<size_t>(t.aux)).decoded;
              pm.zp = put(z.data(), z.size());
              pm.mv.zcols = static_cast<uint32_t>((t.geom.cols + m.ip.zgroup - 1) / m.ip.zgroup);
            }
          }
          found = model_of_tensor.emplace(ti, static_cast<uint32_t>(plan->models.size())).first;
          plan->models.push_back(pm);
        }
        c.model = found->second;
        c.scratch = plan->scratch_bytes;
        plan->scratch_bytes += plan_scratch_bytes(m.kind, uint64_t{mp.cv.h} * mp.cv.w);
        break;
      }
      default:
        return Status::Corruption(what + ": chunk method " + std::to_string(static_cast<int>(e.method)) +
                                  " (allowed 0..3)");
    }
    plan->chunks.push_back(c);
    plan->chunk_index.push_back(gi);
  }
  return Status::OK();
}

}  // namespace wcodec
