// codec/decompress/reader.cpp — the random-access .wcodec reader: opening
// and validating a container (header, footer, index), reading original
// bytes by range, decoding chunks alone or in groups, verifying.
// Byte layout: docs/wcodec-format.md (section "Container").
// Thread-safety: see wcodec/reader.h.
#include "wcodec/reader.h"

#include "wcodec/gguf.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <nlohmann/json.hpp>
#include <unordered_map>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "atomic_file.h"
#include "bytes.h"
#include "checksums.h"
#include "file_read.h"
#include "reader_i.h"
#include "tensor_decode.h"

namespace wcodec {

namespace {
// The decoders' scratch buffers of this thread.
DecodeScratch& thread_scratch() {
  thread_local DecodeScratch scratch;
  return scratch;
}
}  // namespace

Reader::~Reader() {
  if (fd_ >= 0) ::close(fd_);
}

Status Reader::pread_exact(uint64_t off, uint64_t len, uint8_t* out) const {
  if (off > file_size_ || len > file_size_ - off)
    return Status::Corruption(path_ + ": read of " + std::to_string(len) + " bytes at " + std::to_string(off) +
                              " beyond the file end " + std::to_string(file_size_));
  if (mem_) {
    std::memcpy(out, mem_ + off, len);
    return Status::OK();
  }
  return wcodec::pread_exact(fd_, off, len, out, path_, Code::kCorruption);
}

Result<const uint8_t*> ReaderAccess::stored_bytes(const Reader& rd, uint64_t off, uint64_t len, ScratchBytes* buf) {
  if (rd.mem_) {
    if (off > rd.file_size_ || len > rd.file_size_ - off)
      return Status::Corruption(rd.path_ + ": read of " + std::to_string(len) + " bytes at " + std::to_string(off) +
                                " beyond the file end " + std::to_string(rd.file_size_));
    return rd.mem_ + off;
  }
  uint8_t* p = buf->get(len);
  WC_RETURN_IF_ERROR(rd.pread_exact(off, len, p));
  return static_cast<const uint8_t*>(p);
}

Result<std::unique_ptr<Reader>> Reader::open(const std::string& path) {
  std::unique_ptr<Reader> rd(new Reader());
  rd->path_ = path;
  rd->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (rd->fd_ < 0) return Status::IOError(errno_msg("cannot open " + path));
  struct stat st {};
  if (fstat(rd->fd_, &st) != 0) return Status::IOError(errno_msg("cannot stat " + path));
  rd->file_size_ = static_cast<uint64_t>(st.st_size);
  return load(std::move(rd));
}

Result<std::unique_ptr<Reader>> Reader::open_fd(int fd, std::string name) {
  std::unique_ptr<Reader> rd(new Reader());
  rd->path_ = std::move(name);
  rd->fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (rd->fd_ < 0) return Status::IOError(errno_msg("cannot duplicate the descriptor of " + rd->path_));
  struct stat st {};
  if (fstat(rd->fd_, &st) != 0) return Status::IOError(errno_msg("cannot stat " + rd->path_));
  rd->file_size_ = static_cast<uint64_t>(st.st_size);
  return load(std::move(rd));
}

Result<std::unique_ptr<Reader>> Reader::open_memory(const uint8_t* data, size_t size, const std::string& name) {
  std::unique_ptr<Reader> rd(new Reader());
  rd->path_ = name;
  if (!data && size) return Status::Invalid(name + ": no data");
  static const uint8_t kNone = 0;
  rd->mem_ = data ? data : &kNone;
  rd->file_size_ = size;
  return load(std::move(rd));
}

Result<std::unique_ptr<Reader>> Reader::load(std::unique_ptr<Reader> rd) {
  const std::string& P = rd->path_;
  auto corrupt = [&](const std::string& field, uint64_t v, const std::string& allowed) {
    return Status::Corruption(P + ": " + field + " = " + std::to_string(v) + " (allowed " + allowed + ")");
  };
  if (rd->file_size_ < kHeaderSize + kFooterSize)
    return corrupt("file size", rd->file_size_, ">= " + std::to_string(kHeaderSize + kFooterSize));
  uint8_t hb[kHeaderSize];
  WC_RETURN_IF_ERROR(rd->pread_exact(0, kHeaderSize, hb));
  if (std::memcmp(hb, kMagic, 4) != 0) return Status::Corruption(P + ": bad magic (not a .wcodec file)");
  const uint16_t vmaj = static_cast<uint16_t>(hb[4] | (hb[5] << 8));
  const uint16_t vmin = static_cast<uint16_t>(hb[6] | (hb[7] << 8));
  if (vmaj != kVersionMajor && vmaj != 1)
    return Status::NotSupported(P + ": format version " + std::to_string(vmaj) + "." + std::to_string(vmin) +
                                " (this reader supports 1.x and " + std::to_string(kVersionMajor) + ".x)");
  // 1.x: gamma-coded frequency tables; 2.x: compact tables (§7.3).
  rd->table_coding_ = vmaj == 1 ? kTablesGamma : kTablesCompact;
  if (load_u32le(hb + 124) != crc32_of(hb, 124)) return Status::Corruption(P + ": header CRC32 mismatch");
  const uint32_t flags = load_u32le(hb + 8);
  if (flags & ~kFlagGgufSource) return corrupt("header flags", flags, "0 or 1 (bits 1..31 are reserved)");
  rd->gguf_ = (flags & kFlagGgufSource) != 0;
  for (int i = 84; i < 124; ++i)
    if (hb[i]) return corrupt("reserved header byte " + std::to_string(i), hb[i], "0");
  const uint32_t meta_len = load_u32le(hb + 12);
  rd->original_size_ = load_u64le(hb + 16);
  const uint64_t orig_hdr_len = load_u64le(hb + 24);
  const uint64_t index_off = load_u64le(hb + 32);
  const uint64_t index_size = load_u64le(hb + 40);
  std::memcpy(rd->sha256_.data(), hb + 48, 32);
  const uint32_t index_crc = load_u32le(hb + 80);
  uint8_t fb[kFooterSize];
  WC_RETURN_IF_ERROR(rd->pread_exact(rd->file_size_ - kFooterSize, kFooterSize, fb));
  if (std::memcmp(fb + 28, kFooterMagic, 4) != 0)
    return Status::Corruption(P + ": bad footer magic (file truncated or not a .wcodec file)");
  if (load_u64le(fb) != index_off || load_u64le(fb + 8) != index_size || load_u32le(fb + 16) != index_crc ||
      load_u32le(fb + 20) != load_u32le(hb + 124))
    return Status::Corruption(P + ": footer does not match header (file truncated or spliced)");
  rd->file_crc_ = load_u32le(fb + 24);
  const uint64_t body_end = rd->file_size_ - kFooterSize;
  if (index_off < kHeaderSize || index_off > body_end || index_size != body_end - index_off)
    return corrupt("index offset", index_off, "inside the file, ending at the footer");
  if (index_size > kMaxIndexSize) return corrupt("index size", index_size, "<= 2^31");
  if (meta_len > (64u << 20) || kHeaderSize + uint64_t{meta_len} > index_off)
    return corrupt("metadata length", meta_len, "within the file before the index");
  if (orig_hdr_len < 8 || orig_hdr_len > kMaxSafetensorsHeader + 8 || orig_hdr_len > rd->original_size_)
    return corrupt("original header length", orig_hdr_len, "8..100000008 and <= original size");
  std::string meta(meta_len, '\0');
  WC_RETURN_IF_ERROR(rd->pread_exact(kHeaderSize, meta_len, reinterpret_cast<uint8_t*>(meta.data())));
  rd->meta_json_ = meta;
  std::vector<uint8_t> zix(index_size);
  WC_RETURN_IF_ERROR(rd->pread_exact(index_off, index_size, zix.data()));
  if (crc32_of(zix.data(), zix.size()) != index_crc) return Status::Corruption(P + ": index CRC32 mismatch");
  if (index_size < 8) return corrupt("index size", index_size, ">= 8");
  const uint64_t raw_index = load_u64le(zix.data());
  if (raw_index > kMaxIndexSize || raw_index < orig_hdr_len + 8)
    return corrupt("index raw size", raw_index, "original header length + 8 .. 2^31");
  std::vector<uint8_t> ix(raw_index);
  {
    const size_t zr = ZSTD_decompress(ix.data(), ix.size(), zix.data() + 8, zix.size() - 8);
    if (ZSTD_isError(zr) || zr != raw_index) return Status::Corruption(P + ": index does not decompress");
  }
  rd->orig_header_.assign(ix.begin(), ix.begin() + static_cast<std::ptrdiff_t>(orig_hdr_len));
  if (rd->gguf_) {
    // A GGUF source (§4.9): the stored header is the GGUF file's bytes up
    // to its data section, which must parse as exactly that.
    auto g = parse_gguf(rd->orig_header_.data(), rd->orig_header_.size(), rd->original_size_,
                        P + " (stored GGUF header)");
    if (!g.ok())
      return Status::Corruption(P + ": header flags = 1 (a GGUF source), but the stored header is not a valid GGUF "
                                    "header: " +
                                g.status().message());
    if (g->data_offset != orig_hdr_len)
      return corrupt("original header length", orig_hdr_len,
                     "the stored GGUF header's data offset (" + std::to_string(g->data_offset) + ")");
    rd->header_ = gguf_tensor_layout(*g, rd->original_size_);
  } else {
    if (8 + load_u64le(rd->orig_header_.data()) != orig_hdr_len)
      return corrupt("original header length", orig_hdr_len,
                     "8 + the stored safetensors header's length field (" +
                         std::to_string(load_u64le(rd->orig_header_.data())) + ")");
    auto h = parse_safetensors_header(rd->orig_header_.data(), rd->orig_header_.size(), rd->original_size_,
                                      P + " (stored safetensors header)");
    if (!h.ok()) return h.status();
    rd->header_ = std::move(h).value();
  }
  if (rd->header_.data_start != orig_hdr_len)
    return corrupt("original header length", orig_hdr_len, std::to_string(rd->header_.data_start));
  ByteReader r(ix.data() + orig_hdr_len, ix.size() - orig_hdr_len);
  const uint64_t nt = r.u64();
  if (!r.ok() || nt != rd->header_.tensors.size())
    return corrupt("tensor count", nt, std::to_string(rd->header_.tensors.size()) + " (from the stored header)");
  const uint64_t data_start = rd->header_.data_start;
  for (uint64_t i = 0; i < nt; ++i) {
    auto t = std::make_unique<Tensor>();
    const TensorInfo& ref = rd->header_.tensors[i];
    t->info.name = r.str(1u << 20);
    // The record's name in field names (corrupt() adds the path) and in
    // messages (W).
    const std::string WF = "tensor " + std::to_string(i) + " \"" + t->info.name + "\"";
    const std::string W = P + ": " + WF;
    t->info.dtype = static_cast<DType>(r.u8());
    const uint8_t nd = r.u8();
    if (!r.ok() || nd > 16) return Status::Corruption(W + ": index record truncated or ndim > 16");
    for (uint8_t d = 0; d < nd; ++d) t->info.shape.push_back(r.u64());
    t->info.begin = r.u64();
    t->info.end = r.u64();
    t->crc = r.u32();
    t->geom.rows = r.u64();
    t->geom.cols = r.u64();
    t->geom.chunk_rows = r.u64();
    t->geom.chunk_cols = r.u64();
    t->geom.elem_bits = r.u8();
    t->aux = r.i32();
    const uint8_t model_kind = r.u8();
    if (!r.ok()) return Status::Corruption(W + ": index record truncated");
    if (model_kind > 3) return corrupt(WF + " model flag", model_kind, "0..3");
    t->has_model = model_kind != 0;
    t->own_model = model_kind == 1;
    if (t->info.name != ref.name || t->info.dtype != ref.dtype || t->info.shape != ref.shape ||
        t->info.begin != ref.begin || t->info.end != ref.end)
      return Status::Corruption(W + ": index record does not match the stored header");
    const TensorGeometry& g = t->geom;
    const uint64_t nbytes = ref.nbytes();
    const uint32_t eb = g.elem_bits;
    if (eb != 2 && eb != 4 && eb % 8 != 0) return corrupt(WF + " elem_bits", eb, "2, 4 or a multiple of 8");
    if (eb == 0 || eb > 128) return corrupt(WF + " elem_bits", eb, "2..128");
    if (!nbytes && (g.rows || g.cols || g.chunk_rows || g.chunk_cols))
      return Status::Corruption(W + ": geometry of an empty tensor must be all zero");
    if (nbytes) {
      if (g.rows == 0 || g.cols == 0 || g.rows > nbytes * 4 || g.cols > nbytes * 4 ||
          g.rows * g.cols != nbytes * 8 / eb || (nbytes * 8) % eb)
        return Status::Corruption(W + ": geometry " + std::to_string(g.rows) + "x" + std::to_string(g.cols) +
                                  " does not cover " + std::to_string(nbytes) + " bytes");
      const bool band = g.chunk_cols == g.cols;
      if (band ? (g.chunk_rows == 0 || g.chunk_rows > g.rows)
               : (g.chunk_rows != 1 || g.chunk_cols == 0 || g.chunk_cols > g.cols || (g.chunk_cols * eb) % 8))
        return Status::Corruption(W + ": chunk geometry invalid");
      if (g.chunk_bytes() > kMaxChunkDecoded) return corrupt(WF + " chunk size", g.chunk_bytes(), "<= 64 MiB");
      if (band && (g.row_bytes() * 8 != g.cols * eb)) return Status::Corruption(W + ": rows not byte aligned");
    }
    if (model_kind == 1) {
      const uint64_t ml = r.varint();
      const uint8_t* mp = r.take(ml);
      if (!r.ok() || !mp) return Status::Corruption(W + ": model record truncated");
      auto m = TensorModel::deserialize(mp, ml, g, W, static_cast<TableCoding>(rd->table_coding_));
      if (!m.ok()) return m.status();
      t->model = std::make_shared<const TensorModel>(std::move(m).value());
      if (t->model->kind == ModelKind::kInt && t->model->ip.zgroup) {
        if (t->aux < 0 || static_cast<uint64_t>(t->aux) >= nt || static_cast<uint64_t>(t->aux) == i)
          return corrupt(WF + " aux tensor", static_cast<uint64_t>(t->aux), "another tensor of the file");
      } else if (t->aux != -1) {
        return corrupt(WF + " aux tensor", static_cast<uint64_t>(t->aux), "-1 for a model without zero points");
      }
    } else if (model_kind == 3) {
      if (t->aux != -1) return corrupt(WF + " aux tensor", static_cast<uint64_t>(t->aux), "-1 for a split model");
      const uint64_t ml = r.varint();
      const uint8_t* mp = r.take(ml);
      if (!r.ok() || !mp) return Status::Corruption(W + ": split model record truncated");
      auto m = SplitModel::deserialize(mp, ml, g, W, static_cast<TableCoding>(rd->table_coding_));
      if (!m.ok()) return m.status();
      t->split = std::make_shared<const SplitModel>(std::move(m).value());
    } else if (model_kind == 2) {
      const int32_t mr = r.i32();
      if (!r.ok()) return Status::Corruption(W + ": index record truncated");
      if (mr < 0 || static_cast<uint64_t>(mr) >= i || !rd->tensors_[static_cast<size_t>(mr)]->own_model ||
          !rd->tensors_[static_cast<size_t>(mr)]->model)
        return corrupt(WF + " model reference", static_cast<uint64_t>(mr), "an earlier tensor with its own model");
      t->model = rd->tensors_[static_cast<size_t>(mr)]->model;
      WC_RETURN_IF_ERROR(check_shared_model(*t->model, g, W));
      if (t->aux != -1) return corrupt(WF + " aux tensor", static_cast<uint64_t>(t->aux), "-1 for a shared model");
    } else if (t->aux != -1) {
      return corrupt(WF + " aux tensor", static_cast<uint64_t>(t->aux), "-1 without a model");
    }
    const uint64_t nc = r.varint();
    if (!r.ok() || nc != g.num_chunks() || (nbytes == 0 && nc != 0))
      return corrupt(WF + " chunk count", nc, std::to_string(g.num_chunks()));
    uint64_t dec_off = data_start + ref.begin;
    t->first_global = rd->all_chunks_.size();
    t->num_chunks = nc;
    for (uint64_t c = 0; c < nc; ++c) {
      ChunkEntry e{};
      e.file_offset = r.u64();
      e.stored_size = r.u32();
      e.decoded_size = r.u32();
      e.method = r.u8();
      e.xxh3 = r.u64();
      if (!r.ok()) return Status::Corruption(W + ": chunk table truncated");
      uint64_t row0, col0, h, w;
      g.chunk_rect(c, &row0, &col0, &h, &w);
      if (e.decoded_size != h * w * eb / 8)
        return corrupt(WF + " chunk " + std::to_string(c) + " decoded size", e.decoded_size,
                       std::to_string(h * w * eb / 8));
      if (e.method > 3) return corrupt(WF + " chunk " + std::to_string(c) + " method", e.method, "0..3");
      if (e.method == 2 && !t->has_model)
        return Status::Corruption(W + ": chunk " + std::to_string(c) + " is model-coded but the tensor has no model");
      if (e.file_offset < kHeaderSize || e.file_offset > index_off || e.stored_size > index_off - e.file_offset)
        return corrupt(WF + " chunk " + std::to_string(c) + " offset", e.file_offset, "within the data region");
      e.decoded_offset = dec_off;
      dec_off += e.decoded_size;
      rd->all_chunks_.push_back(e);
      rd->chunk_tensor_.push_back(static_cast<uint32_t>(i));
      rd->chunk_local_.push_back(c);
    }
    if (dec_off != data_start + ref.end) return Status::Corruption(W + ": chunks do not cover the tensor");
    t->kind = r.str(64);
    t->model_desc = r.str(256);
    t->tiles_total = r.u32();
    t->tiles_with_tools = r.u32();
    for (auto& v : t->pred_hist) v = r.u32();
    for (auto& v : t->xform_hist) v = r.u32();
    if (!r.ok()) return Status::Corruption(W + ": index record truncated");
    t->info = ref;
    rd->tensors_.push_back(std::move(t));
  }
  if (r.remaining()) return corrupt("index trailing bytes", r.remaining(), "0");
  // Zstd groups (format 2.11, §6.2): the chunks of method 3 with one payload
  // offset are a group, in chunk order; each is its share of the frame's
  // decoded bytes, after the earlier members'.
  {
    std::unordered_map<uint64_t, size_t> first;  // frame offset -> the group's first chunk
    auto name = [&](size_t gi) {
      return "tensor \"" + rd->tensors_[rd->chunk_tensor_[gi]]->info.name + "\" chunk " +
             std::to_string(rd->chunk_local_[gi]);
    };
    for (size_t gi = 0; gi < rd->all_chunks_.size(); ++gi) {
      ChunkEntry& e = rd->all_chunks_[gi];
      if (e.method != 3) continue;
      const auto [it, fresh] = first.emplace(e.file_offset, gi);
      ChunkEntry& f = rd->all_chunks_[it->second];
      if (!fresh && e.stored_size != f.stored_size)
        return corrupt(name(gi) + " stored size", e.stored_size,
                       std::to_string(f.stored_size) + ", its zstd group's, as " + name(it->second) + " says");
      // The first member's group_size is the running total here.
      e.group_offset = fresh ? 0 : f.group_size;
      if (uint64_t{e.group_offset} + e.decoded_size > kMaxZstdGroupDecoded)
        return corrupt(name(gi) + " zstd group end", uint64_t{e.group_offset} + e.decoded_size,
                       "at most " + std::to_string(kMaxZstdGroupDecoded) + " decoded bytes a group");
      f.group_size = e.group_offset + e.decoded_size;
    }
    for (ChunkEntry& e : rd->all_chunks_)
      if (e.method == 3) e.group_size = rd->all_chunks_[first[e.file_offset]].group_size;
  }
  rd->zgroups_ = std::make_unique<ZstdGroupCache>();
  // Aux tensors must be plain (no aux of their own) and of the right shape.
  for (auto& t : rd->tensors_) {
    if (!t->model || t->model->kind != ModelKind::kInt || !t->model->ip.zgroup) continue;
    const Tensor& z = *rd->tensors_[static_cast<size_t>(t->aux)];
    const uint64_t zc = (t->geom.cols + t->model->ip.zgroup - 1) / t->model->ip.zgroup;
    if (z.info.dtype != DType::kU8 || z.info.nbytes() != t->geom.rows * zc ||
        (z.model && z.model->kind == ModelKind::kInt && z.model->ip.zgroup))
      return Status::Corruption(P + ": tensor \"" + t->info.name + "\": zero-point tensor \"" + z.info.name +
                                "\" has the wrong type or shape");
  }
  return rd;
}

size_t Reader::num_tensors() const { return tensors_.size(); }

TensorSummary Reader::tensor_summary(size_t i) const {
  const Tensor& t = *tensors_.at(i);
  TensorSummary s;
  s.name = t.info.name;
  s.dtype = t.info.dtype;
  s.shape = t.info.shape;
  s.original_bytes = t.info.nbytes();
  s.chunks = t.num_chunks;
  for (size_t k = 0; k < t.num_chunks; ++k) {
    const ChunkEntry& c = all_chunks_[t.first_global + k];
    // A zstd group's chunks: a share of the frame each (counted as zstd).
    s.stored_bytes +=
        c.method == 3 ? zstd_group_share(c.stored_size, c.group_offset, c.decoded_size, c.group_size) : c.stored_size;
    (c.method == 2 ? s.chunks_model : c.method == 1 || c.method == 3 ? s.chunks_zstd : s.chunks_raw)++;
  }
  s.kind = t.kind;
  s.model = t.model_desc;
  s.tiles_total = t.tiles_total;
  s.tiles_with_tools = t.tiles_with_tools;
  s.pred_hist = t.pred_hist;
  s.xform_hist = t.xform_hist;
  s.crc32 = t.crc;
  return s;
}

const ChunkEntry& Reader::chunk(size_t i) const { return all_chunks_.at(i); }

size_t Reader::chunk_at(uint64_t off) const {
  if (off < header_.data_start || all_chunks_.empty()) return SIZE_MAX;
  auto it = std::upper_bound(all_chunks_.begin(), all_chunks_.end(), off,
                             [](uint64_t o, const ChunkEntry& c) { return o < c.decoded_offset; });
  if (it == all_chunks_.begin()) return SIZE_MAX;
  return static_cast<size_t>(it - all_chunks_.begin() - 1);
}

std::string Reader::chunk_what(size_t g) const {
  const Tensor& t = *tensors_[chunk_tensor_[g]];
  return path_ + ": tensor \"" + t.info.name + "\" chunk " + std::to_string(chunk_local_[g]);
}

Status Reader::load_aux(size_t ti) const {
  const Tensor& z = *tensors_[ti];
  if (z.decoded_ready.load(std::memory_order_acquire)) return Status::OK();
  std::lock_guard<std::mutex> lk(aux_mu_);
  if (z.decoded_ready.load(std::memory_order_relaxed)) return Status::OK();
  // Chunk by chunk into the buffer: the aux tensor has no aux of its own
  // (checked at open), so this does not recurse.
  std::vector<uint8_t> buf(z.info.nbytes());
  uint64_t off = 0;
  for (size_t c = 0; c < z.num_chunks; ++c) {
    WC_RETURN_IF_ERROR(decode_chunk(z.first_global + c, buf.data() + off));
    off += all_chunks_[z.first_global + c].decoded_size;
  }
  z.decoded = std::move(buf);
  z.decoded_ready.store(true, std::memory_order_release);
  return Status::OK();
}

Status Reader::decode_chunk(size_t gi, uint8_t* out) const {
  if (gi >= all_chunks_.size()) return Status::OutOfRange(path_ + ": chunk index " + std::to_string(gi));
  const ChunkEntry& e = all_chunks_[gi];
  const Tensor& t = *tensors_[chunk_tensor_[gi]];
  // Zero points first: loading them decodes other chunks on this thread,
  // which reuses the thread's payload buffer.
  if (uses_zero_points(gi)) WC_RETURN_IF_ERROR(load_aux(static_cast<size_t>(t.aux)));
  // A zstd group's chunk reads the group's frame only if the group is not
  // in the cache.
  if (e.method == 3) return decode_group_member(gi, nullptr, out, nullptr);
  thread_local ScratchBytes payload;
  auto p = ReaderAccess::stored_bytes(*this, e.file_offset, e.stored_size, &payload);
  if (!p.ok()) return p.status();
  return decode_chunk_from(gi, *p, out);
}

bool Reader::uses_zero_points(size_t gi) const {
  const Tensor& t = *tensors_[chunk_tensor_[gi]];
  return all_chunks_[gi].method == 2 && t.model && t.model->kind == ModelKind::kInt && t.model->ip.zgroup;
}

Status Reader::decode_group_member(size_t gi, const uint8_t* frame, uint8_t* out, ZstdGroupCache* cache) const {
  const ChunkEntry& e = all_chunks_[gi];
  const What what([](const void* rd, size_t g) { return static_cast<const Reader*>(rd)->chunk_what(g); }, this, gi);
  std::shared_ptr<const std::vector<uint8_t>> group;
  ZstdGroupCache& zc = cache ? *cache : *zgroups_;
  {
    std::lock_guard<std::mutex> lk(zc.mu);
    for (auto& en : zc.entries)
      if (en.bytes && en.frame_offset == e.file_offset) {
        en.used = ++zc.tick;
        group = en.bytes;
        break;
      }
  }
  if (!group) {
    thread_local ScratchBytes stored;
    if (!frame) {
      auto p = ReaderAccess::stored_bytes(*this, e.file_offset, e.stored_size, &stored);
      if (!p.ok()) return p.status();
      frame = *p;
    }
    auto bytes = std::make_shared<std::vector<uint8_t>>(e.group_size);
    WC_RETURN_IF_ERROR(zstd_decode_exact(frame, e.stored_size, bytes->data(), e.group_size, what,
                                         "its zstd group's frame"));
    group = bytes;
    std::lock_guard<std::mutex> lk(zc.mu);
    auto* victim = &zc.entries[0];
    for (auto& en : zc.entries)
      if (!en.bytes || en.used < victim->used) victim = &en;
    *victim = ZstdGroupCache::Entry{e.file_offset, ++zc.tick, group};
  }
  std::memcpy(out, group->data() + e.group_offset, e.decoded_size);
  return check_chunk_hash(out, e.decoded_size, e.xxh3, what);
}

Status Reader::decode_chunk_from(size_t gi, const uint8_t* payload, uint8_t* out) const {
  const ChunkEntry& e = all_chunks_[gi];
  if (e.method == 3) return decode_group_member(gi, payload, out, nullptr);
  const Tensor& t = *tensors_[chunk_tensor_[gi]];
  const uint8_t* zp = nullptr;
  uint32_t zcols = 0;
  if (uses_zero_points(gi)) {
    WC_RETURN_IF_ERROR(load_aux(static_cast<size_t>(t.aux)));
    zp = tensors_[static_cast<size_t>(t.aux)]->decoded.data();
    zcols = static_cast<uint32_t>((t.geom.cols + t.model->ip.zgroup - 1) / t.model->ip.zgroup);
  }
  if (t.split && e.method == 2)
    return decode_split_chunk(t.geom, *t.split, chunk_local_[gi], payload, e.stored_size, e.decoded_size, e.xxh3, out,
                              thread_scratch(), chunk_what(gi));
  // The chunk's name only if a message needs it.
  const What what([](const void* rd, size_t g) { return static_cast<const Reader*>(rd)->chunk_what(g); }, this, gi);
  return wcodec::decode_chunk(t.geom, t.has_model ? t.model.get() : nullptr, chunk_local_[gi],
                              static_cast<ChunkMethod>(e.method), payload, e.stored_size, e.decoded_size, e.xxh3,
                              zp, zcols, t.model ? t.model->ip.zgroup : 0, out, thread_scratch(), what);
}

bool Reader::pairable(size_t a, size_t b) const {
  if (a >= all_chunks_.size() || b >= all_chunks_.size() || a == b) return false;
  const ChunkEntry &ea = all_chunks_[a], &eb = all_chunks_[b];
  if (ea.method != 2 || eb.method != 2 || ea.decoded_size != eb.decoded_size) return false;
  const Tensor &ta = *tensors_[chunk_tensor_[a]], &tb = *tensors_[chunk_tensor_[b]];
  // Split chunks of one tensor whose rectangles have one size
  // (decode_split_group: stream by stream).
  if (ta.split || tb.split) {
    if (&ta != &tb) return false;
    uint64_t ra, ca, ha, wa, rb, cb, hb, wb;
    ta.geom.chunk_rect(chunk_local_[a], &ra, &ca, &ha, &wa);
    ta.geom.chunk_rect(chunk_local_[b], &rb, &cb, &hb, &wb);
    return ha == hb && wa == wb;
  }
  if (!ta.has_model || !ta.model || !tb.has_model || !tb.model || !models_group(*ta.model, *tb.model)) return false;
  if (&ta == &tb) return true;
  // Chunks of two tensors: the same rectangle, so the same lane layout.
  uint64_t ra, ca, ha, wa, rb, cb, hb, wb;
  ta.geom.chunk_rect(chunk_local_[a], &ra, &ca, &ha, &wa);
  tb.geom.chunk_rect(chunk_local_[b], &rb, &cb, &hb, &wb);
  return ha == hb && wa == wb && ta.geom.elem_bits == tb.geom.elem_bits;
}

bool Reader::groupable(const size_t* idx, int n) const {
  bool together = n >= 2 && n <= kMaxChunkGroup;
  for (int i = 1; i < n && together; ++i) together = pairable(idx[0], idx[i]);
  return together;
}

void Reader::decode_group_from(const size_t* idx, const uint8_t* const* payloads, uint8_t* const* outs, int n,
                               Status* sts) const {
  const Tensor& t0 = *tensors_[chunk_tensor_[idx[0]]];
  if (t0.split && groupable(idx, n)) {
    uint64_t index[kMaxChunkGroup], dsize[kMaxChunkGroup], xxh3[kMaxChunkGroup];
    size_t plen[kMaxChunkGroup];
    for (int i = 0; i < n; ++i) {
      const ChunkEntry& e = all_chunks_[idx[i]];
      index[i] = chunk_local_[idx[i]];
      plen[i] = e.stored_size;
      dsize[i] = e.decoded_size;
      xxh3[i] = e.xxh3;
    }
    if (decode_split_group(t0.geom, *t0.split, index, payloads, plen, dsize, xxh3, outs, n, thread_scratch())) {
      for (int i = 0; i < n; ++i) sts[i] = Status::OK();
      return;
    }
  } else if (groupable(idx, n)) {
    GroupChunk cs[kMaxChunkGroup];
    for (int i = 0; i < n; ++i) {
      const ChunkEntry& e = all_chunks_[idx[i]];
      const Tensor& t = *tensors_[chunk_tensor_[idx[i]]];
      cs[i] = GroupChunk{&t.geom,        t.model.get(), chunk_local_[idx[i]], payloads[i],
                         e.stored_size, e.decoded_size, e.xxh3, outs[i]};
    }
    if (wcodec::decode_chunk_group(cs, n, thread_scratch())) {
      for (int i = 0; i < n; ++i) sts[i] = Status::OK();
      return;
    }
  }
  for (int i = 0; i < n; ++i) sts[i] = decode_chunk_from(idx[i], payloads[i], outs[i]);
}

void Reader::decode_chunk_group(const size_t* idx, uint8_t* const* outs, int n, Status* sts) const {
  // Groupable chunks use no zero points: their payloads are read into one
  // buffer, with one pread where they lie back to back.
  thread_local ScratchBytes payload;
  const uint8_t* ps[kMaxChunkGroup];
  const bool group = groupable(idx, n);
  Status st;
  if (group && mem_) {  // in place
    for (int i = 0; i < n && st.ok(); ++i) {
      const ChunkEntry& e = all_chunks_[idx[i]];
      auto p = ReaderAccess::stored_bytes(*this, e.file_offset, e.stored_size, &payload);
      if (p.ok()) ps[i] = *p;
      else st = p.status();
    }
  } else if (group) {
    uint64_t total = 0;
    bool contiguous = true;
    for (int i = 0; i < n; ++i) {
      const ChunkEntry& e = all_chunks_[idx[i]];
      const ChunkEntry& first = all_chunks_[idx[0]];
      contiguous &= e.file_offset == first.file_offset + total;
      total += e.stored_size;
    }
    uint8_t* buf = payload.get(total);
    uint64_t at = 0;
    for (int i = 0; i < n; ++i) {
      const ChunkEntry& e = all_chunks_[idx[i]];
      ps[i] = buf + at;
      if (!contiguous && st.ok()) st = pread_exact(e.file_offset, e.stored_size, buf + at);
      at += e.stored_size;
    }
    if (contiguous) st = pread_exact(all_chunks_[idx[0]].file_offset, total, buf);
  }
  if (!group || !st.ok()) {  // a read error: decode_chunk reports it per chunk
    for (int i = 0; i < n; ++i) sts[i] = decode_chunk(idx[i], outs[i]);
    return;
  }
  decode_group_from(idx, ps, outs, n, sts);
}

size_t Reader::partners(size_t gi, uint64_t end, size_t* cand) const {
  constexpr size_t kLook = 8;
  size_t nc = 0;
  for (size_t j = gi + 1; j < all_chunks_.size() && j <= gi + kLook && nc < kMaxChunkGroup + 1; ++j) {
    const ChunkEntry& ej = all_chunks_[j];
    if (ej.decoded_offset + ej.decoded_size > end) break;
    if (pairable(gi, j)) cand[nc++] = j;
  }
  return nc;
}

namespace {

// Reads at least this long stream their decoded bytes into the caller's
// buffer (stream_copy): such a buffer is larger than the caches and is not
// read back from them, so writing it with ordinary stores would first load
// every line of it from memory.
constexpr uint64_t kStreamReadBytes = 8u << 20;

// memcpy with non-temporal stores for the aligned middle.
void stream_copy(uint8_t* dst, const uint8_t* src, size_t n) {
#if defined(__SSE2__)
  const size_t head = std::min(n, static_cast<size_t>((64 - reinterpret_cast<uintptr_t>(dst) % 64) % 64));
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  for (; n >= 64; n -= 64, dst += 64, src += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 48), d);
  }
  _mm_sfence();
#endif
  std::memcpy(dst, src, n);
}

}  // namespace

Status Reader::read(uint64_t offset, uint64_t length, uint8_t* out) const {
  if (offset > original_size_ || length > original_size_ - offset)
    return Status::OutOfRange(path_ + ": read [" + std::to_string(offset) + ", +" + std::to_string(length) +
                              ") beyond original size " + std::to_string(original_size_));
  const uint64_t end = offset + length;
  // Header region.
  if (offset < header_.data_start) {
    const uint64_t n = std::min(end, header_.data_start) - offset;
    std::memcpy(out, orig_header_.data() + offset, n);
    out += n;
    offset += n;
  }
  if (offset >= end) return Status::OK();
  thread_local std::vector<uint8_t> tmp;
  // Large reads: whole chunks are decoded into `stage` (cache-resident) and
  // streamed into out.
  const bool stream = length >= kStreamReadBytes;
  thread_local std::vector<uint8_t> stage;
  // Stored bytes of the chunks ahead, read with one pread where they lie
  // (nearly) back to back in the file: a read over many small chunks costs
  // one system call per run rather than one per chunk. Runs stay within
  // 1 MiB (three large chunks, for a group decode) so that a chunk's bytes
  // are still in cache when it is decoded.
  thread_local ScratchBytes run;
  size_t run_first = SIZE_MAX, run_last = 0;  // chunks [first, last] in `run`
  uint64_t run_off = 0;
  const uint8_t* run_data = nullptr;  // their stored bytes (in `run`, or in place in memory)
  auto payload_of = [&](size_t gi, const uint8_t** p) -> Status {
    if (run_first == SIZE_MAX || gi < run_first || gi > run_last) {
      constexpr uint64_t kMaxRun = 1u << 20, kMaxGap = 4096;
      const ChunkEntry& f = all_chunks_[gi];
      uint64_t stop = f.file_offset + f.stored_size;
      size_t last = gi;
      while (last + 1 < all_chunks_.size()) {
        const ChunkEntry& nx = all_chunks_[last + 1];
        if (nx.decoded_offset >= end) break;
        // A later member of a zstd group whose frame the run holds already
        // (members share their frame's offset): in the run.
        if (nx.method == 3 && nx.file_offset >= f.file_offset && nx.file_offset + nx.stored_size <= stop) {
          ++last;
          continue;
        }
        if (nx.file_offset < stop || nx.file_offset - stop > kMaxGap ||
            nx.file_offset + nx.stored_size - f.file_offset > kMaxRun)
          break;
        stop = nx.file_offset + nx.stored_size;
        ++last;
      }
      auto at = ReaderAccess::stored_bytes(*this, f.file_offset, stop - f.file_offset, &run);
      if (!at.ok()) return at.status();
      run_data = *at;
      run_first = gi;
      run_last = last;
      run_off = f.file_offset;
    }
    *p = run_data + (all_chunks_[gi].file_offset - run_off);
    return Status::OK();
  };
  // Zstd groups this read decodes: each frame once for the read, kept by
  // the read alone (a reader's shared cache serves single chunks; a read
  // of a whole file measures its decode, however often it is repeated).
  ZstdGroupCache groups;
  auto decode_from = [&](size_t gi, const uint8_t* payload, uint8_t* dst) {
    return all_chunks_[gi].method == 3 ? decode_group_member(gi, payload, dst, &groups)
                                       : decode_chunk_from(gi, payload, dst);
  };
  // out holds original offset base_off; chunks decoded ahead as members of
  // an earlier chunk's group.
  const uint64_t base_off = offset;
  uint8_t* const base_out = out;
  std::vector<size_t> ahead;
  for (size_t gi = chunk_at(offset); gi < all_chunks_.size() && offset < end; ++gi) {
    const ChunkEntry& e = all_chunks_[gi];
    const uint64_t cs = e.decoded_offset, ce = cs + e.decoded_size;
    if (ce <= offset) continue;
    if (cs > offset) {
      // Padding between tensors (GGUF sources): zeros.
      const uint64_t z = std::min(end, cs) - offset;
      std::memset(out, 0, z);
      out += z;
      offset += z;
      if (offset >= end) break;
    }
    const uint64_t a = offset, b = std::min(end, ce);
    if (auto it = std::find(ahead.begin(), ahead.end(), gi); it != ahead.end()) {
      ahead.erase(it);
      out += e.decoded_size;
      offset = ce;
      continue;
    }
    const uint8_t* payload = nullptr;
    WC_RETURN_IF_ERROR(payload_of(gi, &payload));
    // This chunk and up to two of the next few that are wanted whole and
    // pairable with it (the next ones of its tensor, or chunks of tensors of
    // its shape further on): decoded together where the decoder
    // interleaves them. Later members are written in place and skipped
    // when the loop reaches them.
    if (a == cs && b == ce) {
      size_t cand[kMaxChunkGroup + 1];
      int n = group_size(partners(gi, end, cand) + 1);
      if (n > 1 && cand[n - 2] > run_last && gi != run_first) {
        // The run read ends before the group's last member: read the next
        // run from here.
        run_first = SIZE_MAX;
        WC_RETURN_IF_ERROR(payload_of(gi, &payload));
      }
      while (n > 1 && cand[n - 2] > run_last) --n;
      if (n > 1) {
        size_t idx[kMaxChunkGroup];
        const uint8_t* ps[kMaxChunkGroup];
        uint8_t* outs[kMaxChunkGroup];
        Status sts[kMaxChunkGroup];
        uint64_t at[kMaxChunkGroup];
        uint64_t bytes = 0;
        for (int i = 0; i < n; ++i) {
          idx[i] = i ? cand[i - 1] : gi;
          const ChunkEntry& ei = all_chunks_[idx[i]];
          ps[i] = run_data + (ei.file_offset - run_off);
          at[i] = bytes;
          bytes += ei.decoded_size;
        }
        if (stream && stage.size() < bytes) stage.resize(bytes);
        auto place = [&](int i) { return base_out + (all_chunks_[idx[i]].decoded_offset - base_off); };
        for (int i = 0; i < n; ++i) outs[i] = stream ? stage.data() + at[i] : place(i);
        decode_group_from(idx, ps, outs, n, sts);
        for (int i = 0; i < n; ++i) WC_RETURN_IF_ERROR(sts[i]);
        for (int i = 0; i < n && stream; ++i) stream_copy(place(i), outs[i], all_chunks_[idx[i]].decoded_size);
        for (int i = 1; i < n; ++i) ahead.push_back(idx[i]);
        out += e.decoded_size;
        offset = ce;
        continue;
      }
    }
    if (a == cs && b == ce && !stream) {
      WC_RETURN_IF_ERROR(decode_from(gi, payload, out));
    } else if (a == cs && b == ce) {
      if (stage.size() < e.decoded_size) stage.resize(e.decoded_size);
      WC_RETURN_IF_ERROR(decode_from(gi, payload, stage.data()));
      stream_copy(out, stage.data(), e.decoded_size);
    } else {
      tmp.resize(e.decoded_size);
      WC_RETURN_IF_ERROR(decode_from(gi, payload, tmp.data()));
      std::memcpy(out, tmp.data() + (a - cs), b - a);
    }
    out += b - a;
    offset = b;
  }
  if (offset < end && gguf_) {
    // After the last tensor (GGUF sources: its padding): zeros.
    std::memset(out, 0, end - offset);
    offset = end;
  }
  if (offset != end) return Status::Internal(path_ + ": chunks do not cover the requested range");
  return Status::OK();
}

Status Reader::verify(bool full) const {
  // Whole-file CRC32 of the stored bytes.
  {
    std::vector<uint8_t> buf(1 << 20);
    uint32_t crc = 0;
    const uint64_t body = file_size_ - kFooterSize + 24;  // footer bytes before the file CRC
    for (uint64_t off = 0; off < body;) {
      const uint64_t n = std::min<uint64_t>(buf.size(), body - off);
      WC_RETURN_IF_ERROR(pread_exact(off, n, buf.data()));
      // The CRC covers everything before the footer.
      const uint64_t lim = file_size_ - kFooterSize;
      if (off < lim) crc = crc32_of(buf.data(), std::min<uint64_t>(n, lim - off), crc);
      off += n;
    }
    if (crc != file_crc_) return Status::Corruption(path_ + ": file CRC32 mismatch (stored bytes are damaged)");
  }
  if (!full) return Status::OK();
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx, orig_header_.data(), orig_header_.size());
  // Original bytes digested so far; the gaps between tensors (the padding of
  // GGUF sources) and after the last one are zeros.
  uint64_t digested = orig_header_.size();
  auto digest_zeros_to = [&](uint64_t to) {
    static const uint8_t zeros[4096] = {};
    while (digested < to) {
      const uint64_t n = std::min<uint64_t>(sizeof zeros, to - digested);
      EVP_DigestUpdate(ctx, zeros, n);
      digested += n;
    }
  };
  // Chunks in file order, in groups where they decode together (a group
  // may span tensors of one shape); each tensor's CRC32 is checked when its
  // last chunk is in.
  std::vector<uint8_t> buf;
  Status st;
  std::vector<uint32_t> crc(tensors_.size(), 0);
  auto check_done = [&](size_t ti) {
    if (st.ok() && crc[ti] != tensors_[ti]->crc)
      st = Status::Corruption(path_ + ": tensor \"" + tensors_[ti]->info.name + "\" CRC32 mismatch");
  };
  size_t next_tensor = 0;  // tensors before it are checked
  for (size_t g = 0; g < all_chunks_.size() && st.ok();) {
    // Tensors without chunks (empty) before this chunk's.
    for (; next_tensor < chunk_tensor_[g] && st.ok(); ++next_tensor) check_done(next_tensor);
    // Partners that follow g directly (the digest takes chunks in order).
    size_t cand[kMaxChunkGroup + 1];
    const size_t nc = partners(g, UINT64_MAX, cand);
    size_t run = 1;
    while (run - 1 < nc && cand[run - 1] == g + run) ++run;
    const int n = group_size(run);
    size_t idx[kMaxChunkGroup];
    uint8_t* outs[kMaxChunkGroup];
    Status sts[kMaxChunkGroup];
    uint64_t bytes = 0;
    for (int i = 0; i < n; ++i) bytes += all_chunks_[g + static_cast<size_t>(i)].decoded_size;
    buf.resize(bytes);
    bytes = 0;
    for (int i = 0; i < n; ++i) {
      idx[i] = g + static_cast<size_t>(i);
      outs[i] = buf.data() + bytes;
      bytes += all_chunks_[g + static_cast<size_t>(i)].decoded_size;
    }
    if (n > 1) decode_chunk_group(idx, outs, n, sts);
    else sts[0] = decode_chunk(g, buf.data());
    for (int i = 0; i < n && st.ok(); ++i) st = sts[i];
    for (int i = 0; i < n && st.ok(); ++i) {
      const size_t gi = idx[i], ti = chunk_tensor_[gi];
      const uint64_t sz = all_chunks_[gi].decoded_size;
      crc[ti] = crc32_of(outs[i], sz, crc[ti]);
      digest_zeros_to(all_chunks_[gi].decoded_offset);
      EVP_DigestUpdate(ctx, outs[i], sz);
      digested = all_chunks_[gi].decoded_offset + sz;
      if (gi + 1 == all_chunks_.size() || chunk_tensor_[gi + 1] != ti) {
        check_done(ti);
        next_tensor = ti + 1;
      }
    }
    g += static_cast<size_t>(n);
  }
  for (; next_tensor < tensors_.size() && st.ok(); ++next_tensor) check_done(next_tensor);
  digest_zeros_to(original_size_);
  std::array<uint8_t, 32> md{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, md.data(), &len);
  EVP_MD_CTX_free(ctx);
  WC_RETURN_IF_ERROR(st);
  if (md != sha256_)
    return Status::Corruption(path_ + ": SHA-256 of the decoded file " + hex(md.data(), 32) + " != stored " +
                              hex(sha256_.data(), 32));
  return Status::OK();
}

Status Reader::decode_to_file(const std::string& out_path) const {
  // Block by block (memory stays at one block for any file size); the
  // output appears under out_path only when all of it is written and its
  // SHA-256 matches.
  constexpr uint64_t kBlock = 64u << 20;
  std::vector<uint8_t> buf(static_cast<size_t>(std::min(original_size_, kBlock)));
  AtomicFile f(out_path);
  WC_RETURN_IF_ERROR(f.open());
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    return Status::Internal(path_ + ": cannot start a SHA-256 digest");
  for (uint64_t off = 0; off < original_size_;) {
    const uint64_t n = std::min<uint64_t>(buf.size(), original_size_ - off);
    WC_RETURN_IF_ERROR(read(off, n, buf.data()));
    EVP_DigestUpdate(ctx.get(), buf.data(), n);
    WC_RETURN_IF_ERROR(f.append(buf.data(), n));
    off += n;
  }
  std::array<uint8_t, 32> md{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md.data(), &len);
  if (md != sha256_)
    return Status::Corruption(path_ + ": SHA-256 of the decoded file " + hex(md.data(), 32) + " != stored " +
                              hex(sha256_.data(), 32));
  return f.commit();
}
}  // namespace wcodec
