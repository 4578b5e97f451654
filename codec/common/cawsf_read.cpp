// codec/common/cawsf_read.cpp — the CAWSF container reader (wcodec/cawsf.h;
// rules in docs/cawsf-format.md): header, TOC, META and its checksum index,
// CODEBOOKS, ROUTING, the shard bank's index, checked shard reads.
//
// Every count is checked against the bytes that remain before anything is
// allocated for it; every offset sum is checked for overflow; every
// decompression has a cap. Stored bytes are hashed before use.
// Thread-safety: open() builds the object; afterwards only the per-chunk
// "verified" flags change (relaxed atomics: a chunk verified twice by two
// threads is harmless), so const methods run concurrently.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <lz4frame.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "cawsf_i.h"
#include "checksums.h"
#include "file_read.h"
#include "wcodec/cawsf.h"

namespace wcodec::cawsf {

using detail::ld16;
using detail::ld32;
using detail::ld64;

namespace detail {

uint64_t xxh3(const uint8_t* p, size_t n) { return XXH3_64bits(p, n); }

std::string hex16(uint64_t v) {
  static const char* d = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = d[v & 15];
  return s;
}

Result<std::vector<uint8_t>> decompress(int kind, const uint8_t* src, size_t n, uint64_t cap,
                                        const std::string& field) {
  std::vector<uint8_t> out;
  if (kind == 0) {
    if (n > cap) return Status::Corruption(field + ": " + std::to_string(n) + " bytes, more than " + std::to_string(cap));
    out.assign(src, src + n);
    return out;
  }
  auto grow = [&](size_t used) -> bool {
    if (used < out.size()) return true;
    if (out.size() >= cap) return false;
    const uint64_t next = std::min<uint64_t>(cap, std::max<uint64_t>(4096, out.size() * 2));
    out.resize(next);
    return true;
  };
  size_t used = 0;
  if (kind == 1) {
    std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
    if (!dctx) return Status::Internal("zstd: out of memory");
    ZSTD_inBuffer in{src, n, 0};
    if (n == 0) return Status::Corruption(field + ": empty zstd stream");
    for (;;) {
      if (!grow(used)) return Status::Corruption(field + ": decompresses to more than " + std::to_string(cap) + " bytes");
      ZSTD_outBuffer ob{out.data() + used, out.size() - used, 0};
      const size_t ret = ZSTD_decompressStream(dctx.get(), &ob, &in);
      if (ZSTD_isError(ret))
        return Status::Corruption(field + ": bad zstd data (" + ZSTD_getErrorName(ret) + ")");
      used += ob.pos;
      if (ret == 0 && in.pos == in.size) break;
      if (in.pos == in.size && ob.pos < ob.size) return Status::Corruption(field + ": zstd stream truncated");
    }
    out.resize(used);
    return out;
  }
  if (kind == 2) {
    LZ4F_dctx* raw = nullptr;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&raw, LZ4F_VERSION)))
      return Status::Internal("lz4: out of memory");
    std::unique_ptr<LZ4F_dctx, decltype(&LZ4F_freeDecompressionContext)> dctx(raw, LZ4F_freeDecompressionContext);
    if (n == 0) return Status::Corruption(field + ": empty LZ4 stream");
    size_t pos = 0, hint = 1;
    while (pos < n) {
      if (!grow(used)) return Status::Corruption(field + ": decompresses to more than " + std::to_string(cap) + " bytes");
      size_t dst = out.size() - used, srcn = n - pos;
      hint = LZ4F_decompress(dctx.get(), out.data() + used, &dst, src + pos, &srcn, nullptr);
      if (LZ4F_isError(hint)) return Status::Corruption(field + ": bad LZ4 frame (" + LZ4F_getErrorName(hint) + ")");
      used += dst;
      pos += srcn;
      if (srcn == 0 && dst == 0) return Status::Corruption(field + ": LZ4 frame makes no progress");
    }
    // Drain what the context still holds.
    while (hint != 0) {
      if (!grow(used)) return Status::Corruption(field + ": decompresses to more than " + std::to_string(cap) + " bytes");
      size_t dst = out.size() - used, srcn = 0;
      hint = LZ4F_decompress(dctx.get(), out.data() + used, &dst, src + pos, &srcn, nullptr);
      if (LZ4F_isError(hint)) return Status::Corruption(field + ": bad LZ4 frame (" + LZ4F_getErrorName(hint) + ")");
      if (dst == 0 && hint != 0) return Status::Corruption(field + ": LZ4 frame truncated");
      used += dst;
    }
    out.resize(used);
    return out;
  }
  return Status::Corruption(field + ": compression " + std::to_string(kind) + " unknown (0 raw, 1 zstd, 2 lz4)");
}

Result<std::vector<uint8_t>> compress(int kind, const uint8_t* src, size_t n, int zstd_level) {
  std::vector<uint8_t> out;
  if (kind == 0) return std::vector<uint8_t>(src, src + n);
  if (kind == 1) {
    out.resize(ZSTD_compressBound(n));
    const size_t r = ZSTD_compress(out.data(), out.size(), src, n, zstd_level);
    if (ZSTD_isError(r)) return Status::Internal(std::string("zstd: ") + ZSTD_getErrorName(r));
    out.resize(r);
    return out;
  }
  if (kind == 2) {
    LZ4F_preferences_t prefs{};
    prefs.frameInfo.contentSize = n;
    out.resize(LZ4F_compressFrameBound(n, &prefs));
    const size_t r = LZ4F_compressFrame(out.data(), out.size(), src, n, &prefs);
    if (LZ4F_isError(r)) return Status::Internal(std::string("lz4: ") + LZ4F_getErrorName(r));
    out.resize(r);
    return out;
  }
  return Status::Invalid("compression " + std::to_string(kind) + " unknown");
}

}  // namespace detail

const char* shard_type_name(uint8_t t) {
  switch (t) {
    case kShardL: return "L";
    case kShardR: return "R";
    case kShardS: return "S";
    case kShardD: return "D";
    case kShardRaw: return "RAW";
    default: return "?";
  }
}

uint64_t TensorEntry::nbytes() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n * dtype_bits(dtype) / 8;
}

namespace {
std::string sec_name(uint32_t t) {
  switch (t) {
    case kMeta: return "META";
    case kCodebooks: return "CODEBOOKS";
    case kShardBank: return "SHARD_BANK";
    case kRouting: return "ROUTING";
    default: return "section " + std::to_string(t);
  }
}
int section_kind(uint32_t flags) { return (flags & kFlagZstd) ? 1 : (flags & kFlagLz4) ? 2 : 0; }

bool parse_hex16(const std::string& s, uint64_t* v) {
  if (s.size() != 16) return false;
  uint64_t x = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return false;
    x = (x << 4) | static_cast<uint64_t>(d);
  }
  *v = x;
  return true;
}

bool json_u64(const nlohmann::json& j, uint64_t* v) {
  if (j.is_number_unsigned()) { *v = j.get<uint64_t>(); return true; }
  if (j.is_number_integer() && j.get<int64_t>() >= 0) { *v = static_cast<uint64_t>(j.get<int64_t>()); return true; }
  return false;
}
}  // namespace

CawsfFile::~CawsfFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status CawsfFile::read_at(uint64_t off, uint64_t n, uint8_t* out) const {
  if (off > file_size_ || n > file_size_ - off)
    return Status::Corruption(what_ + ": read of " + std::to_string(n) + " bytes at " + std::to_string(off) +
                              " past the end (" + std::to_string(file_size_) + " bytes)");
  if (fd_ < 0) {
    if (n) std::memcpy(out, mem_.data() + off, n);
    return Status::OK();
  }
  return pread_exact(fd_, off, n, out, what_);
}

Result<std::shared_ptr<CawsfFile>> CawsfFile::open(const std::string& path) {
  std::shared_ptr<CawsfFile> f(new CawsfFile());
  f->what_ = path;
  f->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f->fd_ < 0) return Status::IOError(path + ": open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(f->fd_, &st) != 0) return Status::IOError(path + ": stat: " + std::strerror(errno));
  WC_RETURN_IF_ERROR(f->load(static_cast<uint64_t>(st.st_size)));
  return f;
}

Result<std::shared_ptr<CawsfFile>> CawsfFile::open_fd(int fd, const std::string& what) {
  std::shared_ptr<CawsfFile> f(new CawsfFile());
  f->what_ = what;
  f->fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (f->fd_ < 0) return Status::IOError(what + ": dup: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(f->fd_, &st) != 0) return Status::IOError(what + ": stat: " + std::strerror(errno));
  WC_RETURN_IF_ERROR(f->load(static_cast<uint64_t>(st.st_size)));
  return f;
}

Status CawsfFile::raw_range(size_t t, uint64_t off, uint64_t n, uint8_t* out) const {
  if (t >= tensors_.size() || !tensors_[t].raw)
    return Status::Invalid(what_ + ": tensor " + std::to_string(t) + " is not a stored tensor");
  const TensorEntry& te = tensors_[t];
  const ShardRecord& r = shards_[te.shards[0]];
  if (off > r.usize || n > r.usize - off)
    return Status::Invalid(what_ + ": " + te.name + ": range " + std::to_string(off) + "+" + std::to_string(n) +
                           " outside its " + std::to_string(r.usize) + " bytes");
  if (r.comp == kCompNone && !bank_in_memory_) {
    const uint64_t at = r.payload_offset() + off;
    WC_RETURN_IF_ERROR(check_bank_chunks(at, at + n));
    std::vector<uint8_t> tmp;
    // Read whole checked chunks, so the bytes used are the bytes hashed.
    const uint64_t cs = checksums_.at(kShardBank).chunk_size;
    const uint64_t c0 = at / cs * cs, c1 = std::min(bank_size_, (at + n + cs - 1) / cs * cs);
    tmp.resize(c1 - c0);
    WC_RETURN_IF_ERROR(read_at(bank_offset_ + c0, tmp.size(), tmp.data()));
    for (uint64_t c = c0; c < c1; c += cs) {
      const uint64_t len = std::min(cs, c1 - c);
      if (detail::xxh3(tmp.data() + (c - c0), len) != checksums_.at(kShardBank).hashes[c / cs])
        return Status::Corruption(what_ + ": SHARD_BANK: chunk " + std::to_string(c / cs) + ": checksum mismatch");
    }
    if (n) std::memcpy(out, tmp.data() + (at - c0), n);
    return Status::OK();
  }
  WC_ASSIGN_OR_RETURN(std::vector<uint8_t> p, shard_payload(te.shards[0]));
  if (n) std::memcpy(out, p.data() + off, n);
  return Status::OK();
}

Result<std::shared_ptr<CawsfFile>> CawsfFile::from_memory(std::vector<uint8_t> bytes, const std::string& what) {
  std::shared_ptr<CawsfFile> f(new CawsfFile());
  f->what_ = what;
  f->mem_ = std::move(bytes);
  WC_RETURN_IF_ERROR(f->load(f->mem_.size()));
  return f;
}

const TocEntry* CawsfFile::section(uint32_t type) const {
  for (const auto& e : toc_)
    if (e.type == type) return &e;
  return nullptr;
}

Result<std::vector<uint8_t>> CawsfFile::section_bytes(uint32_t type) const {
  const TocEntry* e = section(type);
  if (!e) return std::vector<uint8_t>{};
  std::vector<uint8_t> stored(e->size);
  WC_RETURN_IF_ERROR(read_at(e->offset, e->size, stored.data()));
  const uint64_t cap = type == kMeta ? kMaxMetaBytes : kMaxSectionBytes;
  return detail::decompress(section_kind(e->flags), stored.data(), stored.size(), cap, what_ + ": " + sec_name(type));
}

Status CawsfFile::load(uint64_t file_size) {
  file_size_ = file_size;
  if (file_size < kHeaderSize)
    return Status::Corruption(what_ + ": header: file is " + std::to_string(file_size) + " bytes, shorter than the " +
                              std::to_string(kHeaderSize) + "-byte header");
  uint8_t h[kHeaderSize];
  WC_RETURN_IF_ERROR(read_at(0, kHeaderSize, h));
  if (std::memcmp(h, kMagic, 8) != 0)
    return Status::Corruption(what_ + ": magic: not \"CAWSF\\0\\0\\0\" (found " + hex(h, 8) + ")");
  version_ = ld32(h + 8);
  if (version_ != 1 && version_ != 2)
    return Status::NotSupported(what_ + ": version: " + std::to_string(version_) + " (this reader reads 1 and 2)");
  const uint32_t count = ld32(h + 12);
  header_check_ = ld32(h + 16);
  if (count == 0 || count > kMaxSections)
    return Status::Corruption(what_ + ": section count: " + std::to_string(count) + " (allowed 1.." +
                              std::to_string(kMaxSections) + ")");
  if (version_ == 1 && header_check_ != 0)
    return Status::Corruption(what_ + ": reserved: " + std::to_string(header_check_) + " (must be 0 in version 1)");
  const uint64_t toc_end = kHeaderSize + uint64_t{count} * kTocEntrySize;
  if (toc_end > file_size)
    return Status::Corruption(what_ + ": TOC: " + std::to_string(count) + " entries end at byte " +
                              std::to_string(toc_end) + ", past the end of the file (" + std::to_string(file_size) + ")");
  std::vector<uint8_t> tocb(toc_end);
  WC_RETURN_IF_ERROR(read_at(0, toc_end, tocb.data()));
  std::set<uint32_t> seen;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* p = tocb.data() + kHeaderSize + i * kTocEntrySize;
    TocEntry e{ld32(p), ld64(p + 4), ld64(p + 12), ld32(p + 20)};
    const std::string f = what_ + ": TOC entry " + std::to_string(i);
    if (e.type < kMeta || e.type > kRouting)
      return Status::Corruption(f + ": type: " + std::to_string(e.type) + " (allowed 1..4)");
    if (!seen.insert(e.type).second)
      return Status::Corruption(f + ": type: " + sec_name(e.type) + " appears twice");
    if ((e.flags & ~(kFlagZstd | kFlagLz4)) != 0 || e.flags == (kFlagZstd | kFlagLz4))
      return Status::Corruption(f + " (" + sec_name(e.type) + "): flags: " + std::to_string(e.flags) +
                                " (allowed 0, 1 zstd, 2 lz4)");
    if (e.offset % kSectionAlign != 0)
      return Status::Corruption(f + " (" + sec_name(e.type) + "): offset: " + std::to_string(e.offset) +
                                " is not a multiple of 4096");
    if (e.offset < toc_end)
      return Status::Corruption(f + " (" + sec_name(e.type) + "): offset: " + std::to_string(e.offset) +
                                " lies inside the header and TOC");
    if (e.offset > file_size || e.size > file_size - e.offset)
      return Status::Corruption(f + " (" + sec_name(e.type) + "): offset " + std::to_string(e.offset) + " + size " +
                                std::to_string(e.size) + " past the end of the file (" + std::to_string(file_size) + ")");
    toc_.push_back(e);
  }
  {
    std::vector<TocEntry> by_off = toc_;
    std::sort(by_off.begin(), by_off.end(), [](const TocEntry& a, const TocEntry& b) { return a.offset < b.offset; });
    for (size_t i = 1; i < by_off.size(); ++i)
      if (by_off[i - 1].offset + by_off[i - 1].size > by_off[i].offset)
        return Status::Corruption(what_ + ": TOC: " + sec_name(by_off[i - 1].type) + " overlaps " +
                                  sec_name(by_off[i].type));
  }
  const TocEntry* meta = section(kMeta);
  if (!meta) return Status::Corruption(what_ + ": TOC: no META section (type 1)");
  if (!section(kShardBank)) return Status::Corruption(what_ + ": TOC: no SHARD_BANK section (type 3)");
  if (meta->size > kMaxMetaBytes)
    return Status::Corruption(what_ + ": META: " + std::to_string(meta->size) + " bytes (at most " +
                              std::to_string(kMaxMetaBytes) + ")");
  if (version_ == 2) {
    // Header check: XXH3-64 over header bytes 0..15, the TOC and the stored META.
    std::vector<uint8_t> cover(tocb.begin(), tocb.end());
    cover.erase(cover.begin() + 16, cover.begin() + 20);
    const size_t at = cover.size();
    cover.resize(at + meta->size);
    WC_RETURN_IF_ERROR(read_at(meta->offset, meta->size, cover.data() + at));
    const uint32_t want = static_cast<uint32_t>(detail::xxh3(cover.data(), cover.size()));
    if (want != header_check_)
      return Status::Corruption(what_ + ": header check: " + std::to_string(header_check_) +
                                " does not match the TOC and META (computed " + std::to_string(want) + ")");
  }
  WC_ASSIGN_OR_RETURN(std::vector<uint8_t> mb, section_bytes(kMeta));
  meta_json_.assign(mb.begin(), mb.end());
  WC_RETURN_IF_ERROR(parse_meta());

  // CODEBOOKS and ROUTING: small, read whole and checked now.
  for (uint32_t type : {uint32_t{kCodebooks}, uint32_t{kRouting}}) {
    if (!section(type)) continue;
    WC_ASSIGN_OR_RETURN(std::vector<uint8_t> b, section_bytes(type));
    const ChecksumIndex& ci = checksums_.at(type);
    const std::string f = what_ + ": " + sec_name(type);
    const uint64_t chunks = (b.size() + ci.chunk_size - 1) / ci.chunk_size;
    if (chunks != ci.hashes.size())
      return Status::Corruption(f + ": checksum_index has " + std::to_string(ci.hashes.size()) + " chunks, the section " +
                                std::to_string(chunks));
    for (uint64_t c = 0; c < chunks; ++c) {
      const uint64_t o = c * ci.chunk_size, n = std::min<uint64_t>(ci.chunk_size, b.size() - o);
      if (detail::xxh3(b.data() + o, n) != ci.hashes[c])
        return Status::Corruption(f + ": chunk " + std::to_string(c) + ": checksum mismatch");
    }
    if (type == kCodebooks && !b.empty()) {
      if (b.size() < 2) return Status::Corruption(f + ": count: 1 byte, needs 2");
      const uint32_t cnt = ld16(b.data());
      size_t off = 2;
      for (uint32_t i = 0; i < cnt; ++i) {
        const std::string fe = f + ": entry " + std::to_string(i);
        if (b.size() - off < 12) return Status::Corruption(fe + ": header: past the end of the section");
        Codebook cb;
        cb.id = ld16(b.data() + off);
        cb.d = ld16(b.data() + off + 2);
        cb.m = ld16(b.data() + off + 4);
        cb.k = ld16(b.data() + off + 6);
        const uint32_t size = ld32(b.data() + off + 8);
        off += 12;
        if (size > b.size() - off)
          return Status::Corruption(fe + ": size: " + std::to_string(size) + " past the end of the section");
        if (size % 4 != 0) return Status::Corruption(fe + ": size: " + std::to_string(size) + " not a multiple of 4");
        cb.data.resize(size / 4);
        for (size_t j = 0; j < cb.data.size(); ++j) cb.data[j] = detail::ldf32(b.data() + off + 4 * j);
        off += size;
        if (codebooks_.count(cb.id)) return Status::Corruption(fe + ": id: " + std::to_string(cb.id) + " appears twice");
        codebooks_[cb.id] = std::move(cb);
      }
      if (off != b.size())
        return Status::Corruption(f + ": " + std::to_string(b.size() - off) + " bytes after the last entry");
    }
    if (type == kRouting) {
      if (b.size() < 6) return Status::Corruption(f + ": header: " + std::to_string(b.size()) + " bytes, needs 6");
      routing_.dim = ld16(b.data());
      const uint64_t n = ld32(b.data() + 2);
      if (routing_.dim == 0) return Status::Corruption(f + ": dim: 0 (at least 1)");
      const uint64_t per = 8 + 4ull * routing_.dim;
      if (n > (b.size() - 6) / per || 6 + n * per != b.size())
        return Status::Corruption(f + ": n: " + std::to_string(n) + " shards of dim " + std::to_string(routing_.dim) +
                                  " need " + std::to_string(6 + n * per) + " bytes, the section has " +
                                  std::to_string(b.size()));
      const uint8_t* p = b.data() + 6;
      routing_.shard_ids.resize(n);
      routing_.costs.resize(n);
      routing_.keys.resize(n * routing_.dim);
      for (uint64_t i = 0; i < n; ++i) routing_.shard_ids[i] = ld32(p + 4 * i);
      for (uint64_t i = 0; i < n; ++i) routing_.costs[i] = detail::ldf32(p + 4 * n + 4 * i);
      const uint8_t* kp = p + 8 * n;
      for (uint64_t i = 0; i < n; ++i) {
        float* v = routing_.keys.data() + i * routing_.dim;
        double norm = 0;
        for (uint32_t j = 0; j < routing_.dim; ++j) {
          v[j] = detail::ldf32(kp + 4 * (i * routing_.dim + j));
          norm += static_cast<double>(v[j]) * static_cast<double>(v[j]);
        }
        const float inv = static_cast<float>(1.0 / (std::sqrt(norm) + 1e-8));
        for (uint32_t j = 0; j < routing_.dim; ++j) v[j] *= inv;
      }
    }
  }
  WC_RETURN_IF_ERROR(load_bank());
  return build_tensors();
}

Status CawsfFile::parse_meta() {
  const std::string f = what_ + ": META";
  nlohmann::json j = nlohmann::json::parse(meta_json_, nullptr, false);
  if (j.is_discarded()) return Status::Corruption(f + ": not valid JSON");
  if (!j.is_object()) return Status::Corruption(f + ": not a JSON object");
  // checksum_index: one entry per checksummed section present.
  auto ci = j.find("checksum_index");
  if (ci == j.end() || !ci->is_object()) return Status::Corruption(f + ": checksum_index: missing or not an object");
  for (auto it = ci->begin(); it != ci->end(); ++it) {
    const std::string fk = f + ": checksum_index[\"" + it.key() + "\"]";
    uint32_t type = 0;
    if (it.key() == "2") type = kCodebooks;
    else if (it.key() == "3") type = kShardBank;
    else if (it.key() == "4") type = kRouting;
    else return Status::Corruption(fk + ": not a checksummed section (\"2\", \"3\" or \"4\")");
    if (!section(type)) return Status::Corruption(fk + ": the file has no such section");
    const auto& e = it.value();
    if (!e.is_object()) return Status::Corruption(fk + ": not an object");
    auto algo = e.find("algo");
    if (algo == e.end() || !algo->is_string() || algo->get<std::string>() != "xxh3-64")
      return Status::Corruption(fk + ": algo: must be \"xxh3-64\"");
    uint64_t chunk = 0;
    auto cs = e.find("chunk_size");
    if (cs == e.end() || !json_u64(*cs, &chunk) || chunk == 0 || chunk > (1u << 30))
      return Status::Corruption(fk + ": chunk_size: missing or outside 1..2^30");
    auto hx = e.find("hashes_hex");
    if (hx == e.end() || !hx->is_array()) return Status::Corruption(fk + ": hashes_hex: missing or not an array");
    ChecksumIndex idx;
    idx.chunk_size = chunk;
    for (size_t i = 0; i < hx->size(); ++i) {
      uint64_t v;
      if (!(*hx)[i].is_string() || !parse_hex16((*hx)[i].get<std::string>(), &v))
        return Status::Corruption(fk + ": hashes_hex[" + std::to_string(i) + "]: not 16 lowercase hex digits");
      idx.hashes.push_back(v);
    }
    auto cnt = e.find("count");
    uint64_t c = 0;
    if (cnt != e.end() && (!json_u64(*cnt, &c) || c != idx.hashes.size()))
      return Status::Corruption(fk + ": count: does not equal the number of hashes (" +
                                std::to_string(idx.hashes.size()) + ")");
    checksums_[type] = std::move(idx);
  }
  for (uint32_t type : {uint32_t{kCodebooks}, uint32_t{kShardBank}, uint32_t{kRouting}})
    if (section(type) && !checksums_.count(type))
      return Status::Corruption(f + ": checksum_index: no entry for section " + std::to_string(type) + " (" +
                                sec_name(type) + ")");
  if (version_ == 2) {
    auto fv = j.find("format_version");
    uint64_t v = 0;
    if (fv == j.end() || !json_u64(*fv, &v) || v != 2)
      return Status::Corruption(f + ": format_version: must be 2 in a version 2 file");
    auto bh = j.find("bank_headers_xxh3");
    uint64_t dummy;
    if (bh == j.end() || !bh->is_string() || !parse_hex16(bh->get<std::string>(), &dummy))
      return Status::Corruption(f + ": bank_headers_xxh3: missing or not 16 lowercase hex digits");
    meta_bank_headers_hex_ = bh->get<std::string>();
  }
  return Status::OK();
}

Status CawsfFile::check_bank_chunks(uint64_t begin, uint64_t end) const {
  if (bank_in_memory_ || begin >= end) return Status::OK();
  const ChecksumIndex& ci = checksums_.at(kShardBank);
  std::vector<uint8_t> buf;
  for (uint64_t c = begin / ci.chunk_size; c <= (end - 1) / ci.chunk_size; ++c) {
    if (chunk_ok_[c].load(std::memory_order_relaxed)) continue;
    const uint64_t o = c * ci.chunk_size, n = std::min<uint64_t>(ci.chunk_size, bank_size_ - o);
    buf.resize(n);
    WC_RETURN_IF_ERROR(read_at(bank_offset_ + o, n, buf.data()));
    if (detail::xxh3(buf.data(), n) != ci.hashes[c])
      return Status::Corruption(what_ + ": SHARD_BANK: chunk " + std::to_string(c) + " (bytes " + std::to_string(o) +
                                ".." + std::to_string(o + n) + "): checksum mismatch");
    chunk_ok_[c].store(1, std::memory_order_relaxed);
  }
  return Status::OK();
}

Status CawsfFile::load_bank() {
  const TocEntry* e = section(kShardBank);
  const ChecksumIndex& ci = checksums_.at(kShardBank);
  const std::string f = what_ + ": SHARD_BANK";
  bank_in_memory_ = version_ == 1 || e->flags != 0;
  if (bank_in_memory_) {
    WC_ASSIGN_OR_RETURN(bank_, section_bytes(kShardBank));
    bank_size_ = bank_.size();
  } else {
    bank_offset_ = e->offset;
    bank_size_ = e->size;
  }
  const uint64_t chunks = (bank_size_ + ci.chunk_size - 1) / ci.chunk_size;
  if (chunks != ci.hashes.size())
    return Status::Corruption(f + ": checksum_index has " + std::to_string(ci.hashes.size()) + " chunks, the section " +
                              std::to_string(chunks));
  if (bank_in_memory_) {
    for (uint64_t c = 0; c < chunks; ++c) {
      const uint64_t o = c * ci.chunk_size, n = std::min<uint64_t>(ci.chunk_size, bank_size_ - o);
      if (detail::xxh3(bank_.data() + o, n) != ci.hashes[c])
        return Status::Corruption(f + ": chunk " + std::to_string(c) + ": checksum mismatch");
    }
  } else {
    chunk_ok_.reset(new std::atomic<uint8_t>[chunks ? chunks : 1]);
    for (uint64_t c = 0; c < chunks; ++c) chunk_ok_[c].store(0);
  }
  // Walk the 12-byte shard headers.
  XXH3_state_t* st = XXH3_createState();
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> hold(st, XXH3_freeState);
  XXH3_64bits_reset(st);
  uint64_t off = 0;
  while (off < bank_size_) {
    const std::string fs = f + ": shard " + std::to_string(shards_.size()) + " at byte " + std::to_string(off);
    if (bank_size_ - off < kShardHeaderSize)
      return Status::Corruption(fs + ": " + std::to_string(bank_size_ - off) + " bytes left, a shard header needs 12");
    uint8_t h[kShardHeaderSize];
    if (bank_in_memory_) std::memcpy(h, bank_.data() + off, kShardHeaderSize);
    else WC_RETURN_IF_ERROR(read_at(bank_offset_ + off, kShardHeaderSize, h));
    XXH3_64bits_update(st, h, kShardHeaderSize);
    ShardRecord r{h[0], ld16(h + 1), h[3], ld32(h + 4), ld32(h + 8), off};
    const uint8_t max_type = version_ == 1 ? kShardD : kShardRaw;
    if (r.type > max_type)
      return Status::Corruption(fs + ": type: " + std::to_string(r.type) + " (allowed 0.." + std::to_string(max_type) + ")");
    if (r.comp > kCompLz4) return Status::Corruption(fs + ": comp: " + std::to_string(r.comp) + " (allowed 0, 1, 2)");
    if (r.csize > bank_size_ - off - kShardHeaderSize)
      return Status::Corruption(fs + ": csize: " + std::to_string(r.csize) + " past the end of the bank (" +
                                std::to_string(bank_size_ - off - kShardHeaderSize) + " bytes left)");
    if (r.comp == kCompNone && r.usize != r.csize)
      return Status::Corruption(fs + ": usize: " + std::to_string(r.usize) + " differs from csize " +
                                std::to_string(r.csize) + " in a raw shard");
    shards_.push_back(r);
    off += kShardHeaderSize + r.csize;
  }
  if (version_ == 2 && detail::hex16(XXH3_64bits_digest(st)) != meta_bank_headers_hex_)
    return Status::Corruption(f + ": shard headers do not match META bank_headers_xxh3 (" + meta_bank_headers_hex_ + ")");
  return Status::OK();
}

Result<std::vector<uint8_t>> CawsfFile::shard_payload(size_t i) const {
  if (i >= shards_.size()) return Status::Invalid(what_ + ": shard " + std::to_string(i) + " does not exist");
  const ShardRecord& r = shards_[i];
  const std::string f = what_ + ": shard " + std::to_string(i) + " (" + shard_type_name(r.type) + ", scope " +
                        std::to_string(r.scope) + ")";
  WC_RETURN_IF_ERROR(check_bank_chunks(r.header_offset, r.payload_offset() + r.csize));
  std::vector<uint8_t> stored(r.csize);
  if (bank_in_memory_) {
    if (r.csize) std::memcpy(stored.data(), bank_.data() + r.payload_offset(), r.csize);
  } else {
    WC_RETURN_IF_ERROR(read_at(bank_offset_ + r.payload_offset(), r.csize, stored.data()));
    // The chunks were checked above; a file changed since is caught here.
    WC_RETURN_IF_ERROR(check_bank_chunks(r.header_offset, r.payload_offset() + r.csize));
  }
  WC_ASSIGN_OR_RETURN(std::vector<uint8_t> p, detail::decompress(r.comp, stored.data(), stored.size(), r.usize, f));
  if (p.size() != r.usize)
    return Status::Corruption(f + ": usize: " + std::to_string(r.usize) + ", the payload decompresses to " +
                              std::to_string(p.size()));
  return p;
}

Status CawsfFile::verify() const {
  for (const auto& [type, ci] : checksums_) {
    WC_ASSIGN_OR_RETURN(std::vector<uint8_t> b, section_bytes(type));
    const std::string f = what_ + ": section " + std::to_string(type) + " (" + sec_name(type) + ")";
    const uint64_t chunks = (b.size() + ci.chunk_size - 1) / ci.chunk_size;
    if (chunks != ci.hashes.size())
      return Status::Corruption(f + ": chunk count mismatch: have " + std::to_string(chunks) + ", want " +
                                std::to_string(ci.hashes.size()));
    for (uint64_t c = 0; c < chunks; ++c) {
      const uint64_t o = c * ci.chunk_size, n = std::min<uint64_t>(ci.chunk_size, b.size() - o);
      if (detail::xxh3(b.data() + o, n) != ci.hashes[c])
        return Status::Corruption(f + ": chunk " + std::to_string(c) + " mismatch");
    }
  }
  return Status::OK();
}

}  // namespace wcodec::cawsf
