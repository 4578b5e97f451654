// codec/decompress/tensor_decode.cpp — CPU decoding of one chunk or a group
// of chunks, and the check of a shared model against a tensor. See
// tensor_decode.h and docs/wcodec-format.md.
#include "tensor_decode.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "bytes.h"
#include "chunk_decode_fast.h"
#include "chunk_decode_hwy.h"
#include "chunk_decode_simd.h"
#include "wcodec/cpu.h"

namespace wcodec {

Status check_shared_model(const TensorModel& m, const TensorGeometry& g, const std::string& what) {
  uint32_t bits = 0;
  switch (m.kind) {
    case ModelKind::kFloat: bits = m.fp.elem_bytes * 8u; break;
    case ModelKind::kInt:
      bits = 8 / int_codes_per_byte(m.ip.sub);
      if (m.ip.use_rc || m.ip.use_cc || m.ip.zgroup || m.ip.tools)
        return Status::Corruption(what + ": shared model carries per-tensor side information");
      break;
    case ModelKind::kBytes: bits = m.bp.elem_bytes * 8u; break;
  }
  if (bits != g.elem_bits)
    return Status::Corruption(what + ": shared model element size " + std::to_string(bits) + " bits != tensor's " +
                              std::to_string(g.elem_bits));
  return Status::OK();
}


// ------------------------------------------------------------------ decode
Status parse_model_payload(const TensorGeometry& g, const TensorModel& model, uint64_t index, const uint8_t* payload,
                           size_t payload_len, uint64_t decoded_size, const What& what, ModelPayload* out) {
  uint64_t row0, col0, h, w;
  g.chunk_rect(index, &row0, &col0, &h, &w);
  if (h * w * g.elem_bits / 8 != decoded_size)
    return Status::Corruption(what.str() + ": chunk decoded size " + std::to_string(decoded_size) +
                              " does not match its geometry");
  ByteReader r(payload, payload_len);
  const uint8_t flags = r.u8();
  if (flags > 3) return Status::Corruption(what.str() + ": chunk flags " + std::to_string(flags) + " (allowed 0..3)");
  out->map = nullptr;
  out->tail = (flags & 2) != 0;
  if (out->tail && (model.kind != ModelKind::kFloat || float_raw_data_bytes(model.fp, h * w) < kRawTailMin))
    return Status::Corruption(what.str() + ": chunk flags " + std::to_string(flags) +
                              ": raw tail in the lane states, but the chunk is not a float chunk with at least " +
                              std::to_string(kRawTailMin) + " bytes of raw bits");
  if (flags & 1) {
    if (model.kind != ModelKind::kInt || !model.ip.tools)
      return Status::Corruption(what.str() + ": tile map present in a chunk whose model has no tools");
    const uint64_t tiles = ((h + kTile - 1) / kTile) * ((w + kTile - 1) / kTile);
    out->map = r.take(2 * tiles);
  }
  out->rans_len = r.u32();
  out->rans = r.take(out->rans_len);
  if (!r.ok() || !out->rans) return Status::Corruption(what.str() + ": chunk payload truncated");
  out->raw = r.cur();
  out->raw_len = r.remaining();
  out->cv = ChunkView{static_cast<uint32_t>(h), static_cast<uint32_t>(w), static_cast<uint32_t>(row0),
                      static_cast<uint32_t>(col0), static_cast<uint32_t>(g.cols)};
  return Status::OK();
}

bool model_groups(const TensorModel& m) {
  if (m.kind == ModelKind::kFloat) return m.fp.elem_bytes <= 2;
  if (m.kind == ModelKind::kInt && m.ip.nbr_mode == 4) return true;  // kernel-row chunks (decode_krow_group)
  return m.kind == ModelKind::kInt && (m.ip.sub == kIntI8 || m.ip.sub == kIntU8 || m.ip.sub == kIntNibble) &&
         (m.ip.nbr_mode == 0 || m.ip.nbr_mode == 3) && m.ip.zgroup == 0;
}

bool models_group(const TensorModel& a, const TensorModel& b) {
  if (!model_groups(a) || !model_groups(b)) return false;
  if (&a == &b || a.vt == b.vt) return true;  // one model (copies share vt)
  if (a.kind != b.kind) return false;
  if (a.kind == ModelKind::kFloat) return float_loop_compatible(a.fp, b.fp);
  if (a.kind == ModelKind::kInt && (a.ip.nbr_mode == 4 || b.ip.nbr_mode == 4))
    return a.ip.nbr_mode == 4 && b.ip.nbr_mode == 4;
  return a.kind == ModelKind::kInt && int_loop_compatible(a.ip, b.ip);
}

bool decode_chunk_group(const GroupChunk* chunks, int n, DecodeScratch& scratch) {
  if (!decode_chunk_group_unchecked(chunks, n, scratch)) return false;
  for (int i = 0; i < n; ++i)
    if (chunk_hash(chunks[i].out, chunks[i].decoded_size) != chunks[i].xxh3) return false;
  return true;
}

bool decode_chunk_group_unchecked(const GroupChunk* chunks, int n, DecodeScratch& scratch) {
  if (n < 2 || n > kMaxChunkGroup) return false;
  ModelPayload mp[kMaxChunkGroup];
  for (int i = 0; i < n; ++i) {
    const GroupChunk& c = chunks[i];
    if (!c.model || !c.geom || !models_group(*chunks[0].model, *c.model)) return false;
    if (!parse_model_payload(*c.geom, *c.model, c.index, c.payload, c.payload_len, c.decoded_size, std::string(),
                             &mp[i])
             .ok())
      return false;
    if (mp[i].cv.h != mp[0].cv.h || mp[i].cv.w != mp[0].cv.w) return false;
  }
  const size_t lmb = simd_lane_major_bytes(mp[0].cv);
  ScratchBytes* lm[kMaxChunkGroup] = {&scratch.lm, &scratch.lm_group[0], &scratch.lm_group[1]};
  std::shared_ptr<const TensorModel::VectorTables> tables_hold[kMaxChunkGroup];
  ModelView mv[kMaxChunkGroup];
  GroupSide sides[kMaxChunkGroup];
  for (int i = 0; i < n; ++i) {
    const bool same = i && chunks[i].model == chunks[0].model;
    mv[i] = same ? mv[0] : chunks[i].model->view(&tables_hold[i], nullptr, 0, TensorModel::TableUse::kVector);
    sides[i] = GroupSide{mp[i].map,    mp[i].rans,    mp[i].rans_len, mp[i].raw,      mp[i].raw_len,
                         mp[i].tail,   chunks[i].out, lm[i]->get(lmb), mp[i].cv.col0, mp[i].cv.row0};
  }
  return decode_group_simd(mv, mp[0].cv, sides, n) == 1;
}

Status decode_chunk_unchecked(const TensorGeometry& g, const TensorModel* model, uint64_t index, ChunkMethod method,
                              const uint8_t* payload, size_t payload_len, uint64_t decoded_size, const uint8_t* zp,
                              uint32_t zcols, uint8_t* out, DecodeScratch& scratch, const What& what) {
  switch (method) {
    case ChunkMethod::kRaw:
      if (payload_len != decoded_size)
        return Status::Corruption(what.str() + ": raw chunk size " + std::to_string(payload_len) + " != decoded size " +
                                  std::to_string(decoded_size));
      std::memcpy(out, payload, payload_len);
      break;
    case ChunkMethod::kZstd:
      WC_RETURN_IF_ERROR(zstd_decode_exact(payload, payload_len, out, decoded_size, what, "zstd chunk"));
      break;
    case ChunkMethod::kModel: {
      if (!model) return Status::Corruption(what.str() + ": model-coded chunk in a tensor without a model");
      ModelPayload mp;
      WC_RETURN_IF_ERROR(parse_model_payload(g, *model, index, payload, payload_len, decoded_size, what, &mp));
      const uint8_t* map = mp.map;
      const uint32_t rl = mp.rans_len;
      const uint8_t* rans = mp.rans;
      const uint8_t* raw = mp.raw;
      const size_t raw_len = mp.raw_len;
      const ChunkView cv = mp.cv;
      const uint64_t n = uint64_t{cv.h} * cv.w;
      std::shared_ptr<const TensorModel::VectorTables> tables_hold;
      // The vector decoders' tables; the reference tables only where a
      // vector decoder declines the chunk (reference_view).
      ModelView mv = model->view(&tables_hold, zp, zcols, TensorModel::TableUse::kVector);
      auto reference_view = [&] { mv = model->view(&tables_hold, zp, zcols); };
      // What a vector decoder declines (configurations it has no loop for)
      // takes the portable fast decoder (chunk_decode_fast.h) before the
      // reference; on the scalar path the vector entry points ran it
      // already.
      const bool try_fast = cpu_path() != CpuPath::kScalar;
      bool ok = false;
      switch (model->kind) {
        case ModelKind::kFloat:
          if (!float_raw_ok(mv.fp, n, raw_len, mp.tail)) {
            ok = false;
            break;
          }
          {
            const size_t lmb = simd_lane_major_bytes(cv);
            const int simd =
                decode_float_chunk_simd(mv, cv, rans, rl, raw, raw_len, out, scratch.lm.get(lmb), mp.tail);
            if (simd < 0) {
              reference_view();
              const int fast =
                  try_fast ? decode_float_chunk_fast(mv, cv, rans, rl, raw, raw_len, out, scratch.lm.get(lmb), mp.tail)
                           : -1;
              if (fast >= 0) {
                ok = fast == 1;
                break;
              }
              if (scratch.e.size() < n) scratch.e.resize(n);
              if (scratch.sm.size() < n) scratch.sm.resize(n);
              ok = decode_float_chunk(mv, cv, rans, rl, raw, raw_len, out, scratch.e.data(), scratch.sm.data(),
                                      mp.tail);
            } else {
              ok = simd == 1;
            }
          }
          break;
        case ModelKind::kInt:
          if (model->ip.zgroup && !zp) return Status::Internal(what.str() + ": zero points not provided");
          if (scratch.res.size() < n) scratch.res.resize(n);
          if (scratch.tile.size() < kTile * kTile) scratch.tile.resize(kTile * kTile);
          if (raw_len == 0) {
            const size_t lmb = simd_lane_major_bytes(cv);
            int r = decode_int_chunk_simd(mv, cv, map, rans, rl, out, scratch.res.data(), scratch.tile.data(),
                                          scratch.lm.get(lmb));
            if (r < 0) {
              reference_view();
              if (try_fast)
                r = decode_int_chunk_fast(mv, cv, map, rans, rl, out, scratch.res.data(), scratch.tile.data(),
                                          scratch.lm.get(lmb));
            }
            ok = r < 0 ? decode_int_residuals(mv, cv, rans, rl, scratch.res.data()) &&
                             int_finish_chunk(mv, cv, map, out, scratch.res.data(), scratch.tile.data())
                       : r == 1;
          }
          break;
        case ModelKind::kBytes: {
          if (raw_len != 0) break;
          int r = try_fast ? decode_bytes_chunk_hwy(mv, cv, rans, rl, out) : -1;
          if (r < 0) r = decode_bytes_chunk_fast(mv, cv, rans, rl, out);
          if (r >= 0) {
            ok = r == 1;
            break;
          }
          reference_view();
          ok = decode_bytes_chunk(mv, cv, rans, rl, out);
          break;
        }
      }
      if (!ok) return Status::Corruption(what.str() + ": entropy-coded stream is malformed");
      break;
    }
    default:
      return Status::Corruption(what.str() + ": chunk method " + std::to_string(static_cast<int>(method)) +
                                " (allowed 0..2)");
  }
  return Status::OK();
}

Status decode_chunk(const TensorGeometry& g, const TensorModel* model, uint64_t index, ChunkMethod method,
                    const uint8_t* payload, size_t payload_len, uint64_t decoded_size, uint64_t xxh3,
                    const uint8_t* zp, uint32_t zcols, uint32_t zgroup, uint8_t* out, DecodeScratch& scratch,
                    const What& what) {
  (void)zgroup;
  WC_RETURN_IF_ERROR(
      decode_chunk_unchecked(g, model, index, method, payload, payload_len, decoded_size, zp, zcols, out, scratch, what));
  return check_chunk_hash(out, decoded_size, xxh3, what);
}

Status zstd_decode_exact(const uint8_t* payload, size_t payload_len, uint8_t* out, uint64_t decoded_size,
                         const What& what, const char* noun) {
  // One decompression context per thread: ZSTD_decompress would create
  // (and free) one per chunk, which costs more than a small chunk.
  struct DCtx {
    ZSTD_DCtx* p = ZSTD_createDCtx();
    ~DCtx() { ZSTD_freeDCtx(p); }
  };
  thread_local DCtx dctx;
  if (!dctx.p) return Status::Internal(what.str() + ": cannot create a zstd decompression context");
  const size_t r = ZSTD_decompressDCtx(dctx.p, out, decoded_size, payload, payload_len);
  if (ZSTD_isError(r) || r != decoded_size)
    return Status::Corruption(what.str() + ": " + noun + " does not decode to " + std::to_string(decoded_size) +
                              " bytes" + (ZSTD_isError(r) ? std::string(" (") + ZSTD_getErrorName(r) + ")" : ""));
  return Status::OK();
}

Status check_chunk_hash(const uint8_t* out, uint64_t decoded_size, uint64_t xxh3, const What& what) {
  const uint64_t hsh = chunk_hash(out, decoded_size);
  if (hsh != xxh3) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ": checksum mismatch (XXH3 %016llx, expected %016llx)",
                  static_cast<unsigned long long>(hsh), static_cast<unsigned long long>(xxh3));
    return Status::Corruption(what.str() + buf);
  }
  return Status::OK();
}

}  // namespace wcodec
