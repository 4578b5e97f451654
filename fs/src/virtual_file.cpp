// fs/src/virtual_file.cpp — see wcodecfs/virtual_file.h.
#include "wcodecfs/virtual_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string>

#include "wcodecfs/fs_log.h"

namespace wcodecfs {

BackingFile::~BackingFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<size_t> BackingFile::pread_full(uint64_t off, size_t n, uint8_t* out) const {
  if (off > static_cast<uint64_t>(std::numeric_limits<off_t>::max()))
    return Status::Invalid(name_ + ": read offset " + std::to_string(off) + " out of range");
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd_, out + done, n - done, static_cast<off_t>(off + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return from_errno(errno, "pread " + name_);
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

Result<uint64_t> BackingFile::current_size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return from_errno(errno, "stat " + name_);
  return static_cast<uint64_t>(st.st_size);
}

namespace {
// Never written: its pages stay the kernel's shared zero page. In .bss (a
// const array would be stored in the binary).
alignas(4096) uint8_t g_zeros[kZeroBufferBytes];
}  // namespace

const uint8_t* zero_bytes() { return g_zeros; }

size_t ReadResult::copy_prefix(uint8_t* out, Status* err) const {
  size_t done = 0;
  for (const ReadSlice& s : slices_) {
    if (!s.is_fd()) {
      std::memcpy(out + done, s.data, s.size);
      done += s.size;
      continue;
    }
    auto got = s.file->pread_full(s.offset, s.size, out + done);
    if (!got.ok()) {
      *err = got.status();
      return done;
    }
    done += *got;
    if (*got < s.size) return done;  // shrank since the read was made
  }
  return done;
}

Result<size_t> ReadResult::copy_to(uint8_t* out) const {
  Status err;
  const size_t n = copy_prefix(out, &err);
  if (!err.ok()) return err;
  return n;
}

std::vector<uint8_t> ReadResult::gather() const {
  std::vector<uint8_t> out(size_);
  Status err;
  out.resize(copy_prefix(out.data(), &err));
  return out;
}

// ---------------------------------------------------------------- Readahead

std::pair<uint64_t, uint64_t> Readahead::on_read(uint64_t off, uint64_t len, uint64_t size, uint64_t unit,
                                                 uint64_t seg_begin, uint64_t seg_end) {
  if (max_window_ == 0 || unit == 0 || len == 0) return {0, 0};
  std::lock_guard<std::mutex> lk(mu_);
  const uint64_t end = off + len;  // caller clipped to size
  // The kernel sends its own readahead as several concurrent requests that
  // FUSE threads serve out of order, up to the kernel's readahead window
  // (16 MiB) ahead: a read counts as sequential when it lands that close to
  // the furthest point read so far, bounded by our own window so a small
  // window still notices a jump.
  constexpr uint64_t kJitter = 16ull << 20;
  const uint64_t slack = std::max({2 * len, 2 * unit, std::min(window_, kJitter)});
  const uint64_t lo = expected_ > slack ? expected_ - slack : 0;
  const uint64_t hi = expected_ + slack;
  const bool sequential = started_ ? (off >= lo && off <= hi) : off == 0;
  started_ = true;
  if (!sequential) {
    window_ = 0;
    ra_end_ = 0;
    expected_ = end;
    // A read is page-aligned by the kernel: one that begins a few bytes
    // before a tensor belongs to that tensor.
    run_start_ = std::max(off, seg_begin);
    seg_begin_ = seg_begin;
    crossings_ = 0;
    return {0, 0};
  }
  // A forward jump into a later segment, landing well past the furthest
  // point read (more than a chunk or two of out-of-order arrival), is a
  // loader moving to another tensor: a new run for the segment rule below.
  if (seg_begin > run_start_ && off > expected_ + 2 * std::max(unit, len)) {
    run_start_ = std::max(off, seg_begin);
    seg_begin_ = seg_begin;
    crossings_ = 0;
    window_ = 0;
    ra_end_ = 0;
  }
  // The first step of a run into a later segment restarts the window: a
  // loader of one tensor whose reads (or the kernel's readahead) spill past
  // its end prefetches little; a reader that goes on crossing tensors is
  // streaming the file and keeps its growing window from then on.
  if (seg_begin > seg_begin_) {
    seg_begin_ = seg_begin;
    if (crossings_++ == 0) window_ = 0;
  }
  window_ = window_ ? std::min(window_ * 2, max_window_) : std::min(unit, max_window_);
  expected_ = std::max(expected_, end);
  uint64_t limit = size;
  if (run_start_ >= seg_begin) limit = std::min(limit, seg_end);  // a reader of one tensor
  const uint64_t target = std::min(limit, expected_ + window_);
  const uint64_t from = std::max(ra_end_, expected_);
  if (target <= from) return {0, 0};
  ra_end_ = target;
  return {from, target};
}

uint64_t Readahead::window() const {
  std::lock_guard<std::mutex> lk(mu_);
  return window_;
}

// -------------------------------------------------------------- VirtualFile

Result<std::shared_ptr<const VirtualFile>> VirtualFile::make(std::string name, std::vector<Extent> extents,
                                                             std::vector<uint64_t> segment_starts) {
  std::shared_ptr<VirtualFile> vf(new VirtualFile());
  uint64_t pos = 0;
  uint64_t unit = 0;
  for (size_t k = 0; k < extents.size(); ++k) {
    const Extent& e = extents[k];
    const std::string where = name + ": extent " + std::to_string(k);
    if (e.offset != pos || e.length == 0 || e.length > std::numeric_limits<uint64_t>::max() - pos)
      return Status::Internal(where + " at " + std::to_string(e.offset) + " +" + std::to_string(e.length) +
                              " does not continue the layout at " + std::to_string(pos));
    if (const auto* in = std::get_if<InlineExtent>(&e.what)) {
      if (!in->bytes || in->src_offset > in->bytes->size() || e.length > in->bytes->size() - in->src_offset)
        return Status::Internal(where + ": inline range outside its buffer");
    } else if (const auto* pt = std::get_if<PassthroughExtent>(&e.what)) {
      if (!pt->file || pt->src_offset > static_cast<uint64_t>(std::numeric_limits<off_t>::max()) - e.length)
        return Status::Internal(where + ": passthrough range out of range");
    } else if (std::holds_alternative<ZeroExtent>(e.what)) {
      // Any length: served in slices of the shared zero buffer.
    } else {
      const auto& dx = std::get<DecodedExtent>(e.what);
      if (!dx.source || dx.src_offset < dx.source->stream_begin() || dx.src_offset > dx.source->stream_end() ||
          e.length > dx.source->stream_end() - dx.src_offset)
        return Status::Internal(where + ": decoded range outside its source");
      if (dx.source->num_chunks()) unit = std::max<uint64_t>(unit, dx.source->chunk_size(0));
    }
    pos += e.length;
  }
  if (pos > static_cast<uint64_t>(std::numeric_limits<off_t>::max()))
    return Status::Corruption(name + ": size " + std::to_string(pos) + " too large for a file");
  std::vector<uint64_t>& seg = vf->segments_;
  if (segment_starts.empty()) {
    seg.reserve(extents.size());
    for (const Extent& e : extents) seg.push_back(e.offset);
  } else {
    seg.reserve(segment_starts.size() + 1);
    if (segment_starts.front() != 0) seg.push_back(0);
    for (size_t k = 0; k < segment_starts.size(); ++k) {
      const uint64_t s = segment_starts[k];
      if (s >= pos)
        return Status::Internal(name + ": segment start " + std::to_string(s) + " (index " + std::to_string(k) +
                                ") is not below the file size " + std::to_string(pos));
      if (k > 0 && s <= segment_starts[k - 1])
        return Status::Internal(name + ": segment start " + std::to_string(s) + " (index " + std::to_string(k) +
                                ") does not follow " + std::to_string(segment_starts[k - 1]) +
                                " (starts must be sorted and unique)");
      seg.push_back(s);
    }
  }
  vf->name_ = std::move(name);
  vf->size_ = pos;
  vf->unit_ = unit;
  vf->extents_ = std::move(extents);
  return std::shared_ptr<const VirtualFile>(std::move(vf));
}

size_t VirtualFile::decoded_chunks() const {
  size_t n = 0;
  for (const Extent& e : extents_) {
    if (const auto* dx = std::get_if<DecodedExtent>(&e.what)) {
      n += dx->source->chunk_at(dx->src_offset + e.length - 1) - dx->source->chunk_at(dx->src_offset) + 1;
    }
  }
  return n;
}

std::pair<uint64_t, uint64_t> VirtualFile::segment_at(uint64_t off) const {
  WC_CHECK(off < size_);
  auto it = std::upper_bound(segments_.begin(), segments_.end(), off);
  const uint64_t end = it == segments_.end() ? size_ : *it;
  return {*(it - 1), end};
}

size_t VirtualFile::extent_at(uint64_t off) const {
  auto it = std::upper_bound(extents_.begin(), extents_.end(), off,
                             [](uint64_t o, const Extent& e) { return o < e.offset; });
  return static_cast<size_t>(it - extents_.begin()) - 1;
}

namespace {
// Chunk indices of `src` overlapping stream range [s, t), s < t.
std::vector<size_t> chunks_overlapping(const ChunkSource& src, uint64_t s, uint64_t t) {
  std::vector<size_t> out;
  const size_t i0 = src.chunk_at(s), i1 = src.chunk_at(t - 1);
  if (i0 == SIZE_MAX || i1 == SIZE_MAX) return out;  // excluded by make()
  out.reserve(i1 - i0 + 1);
  for (size_t i = i0; i <= i1; ++i) out.push_back(i);
  return out;
}
}  // namespace

size_t VirtualFile::prefetch(uint64_t from, uint64_t to, ChunkCache& cache) const {
  to = std::min(to, size_);
  size_t n = 0;
  if (from >= to) return 0;
  for (size_t k = extent_at(from); k < extents_.size() && extents_[k].offset < to; ++k) {
    const Extent& e = extents_[k];
    const auto* dx = std::get_if<DecodedExtent>(&e.what);
    if (!dx) continue;
    const uint64_t a = std::max(from, e.offset), b = std::min(to, e.offset + e.length);
    n += cache.prefetch(dx->source, chunks_overlapping(*dx->source, dx->src_offset + (a - e.offset),
                                                       dx->src_offset + (b - e.offset)));
  }
  return n;
}

Result<ReadResult> VirtualFile::read(uint64_t off, uint64_t len, ChunkCache& cache, Readahead* ra,
                                     bool kernel_cached) const {
  ReadResult rr;
  if (off >= size_ || len == 0) return rr;
  const uint64_t end = off + std::min(len, size_ - off);
  // Readahead first: its chunks queue behind this read's (demand) chunks.
  if (ra && unit_) {
    // The segment of the read's end, not counting a spill of less than a
    // page: the kernel rounds reads to pages, so the last page of a tensor
    // reaches into the next one.
    constexpr uint64_t kPage = 4096;
    const auto [seg_begin, seg_end] = segment_at(std::max(off, end > kPage ? end - kPage : 0));
    const auto [from, to] = ra->on_read(off, end - off, size_, unit_, seg_begin, seg_end);
    if (log_enabled(LogLevel::kDebug)) {
      log_debug("read " + name_ + " [" + std::to_string(off) + ", " + std::to_string(end) + ") segment [" +
                std::to_string(seg_begin) + ", " + std::to_string(seg_end) + ") prefetch [" +
                std::to_string(from) + ", " + std::to_string(to) + ")");
    }
    if (from < to) prefetch(from, to, cache);
  }
  const BackingFile* sized_file = nullptr;
  uint64_t sized = 0;  // sized_file's current size
  uint64_t pos = off;
  for (size_t k = extent_at(off); pos < end; ++k) {
    WC_CHECK(k < extents_.size());
    const Extent& e = extents_[k];
    const uint64_t a = pos, b = std::min(end, e.offset + e.length);
    const uint64_t rel = a - e.offset;
    if (const auto* in = std::get_if<InlineExtent>(&e.what)) {
      rr.slices_.push_back({in->bytes->data() + in->src_offset + rel, static_cast<size_t>(b - a)});
      rr.holders_.push_back(in->bytes);
    } else if (const auto* pt = std::get_if<PassthroughExtent>(&e.what)) {
      // The file's size now, once per backing file per read (a layout may
      // pass through several ranges of one file).
      if (pt->file.get() != sized_file) {
        WCFS_ASSIGN_OR_RETURN(sized, pt->file->current_size());
        sized_file = pt->file.get();
      }
      const uint64_t src = pt->src_offset + rel, want = b - a;
      const uint64_t have = sized > src ? std::min(want, sized - src) : 0;
      if (have < want) {
        // The backing file shrank since open. Fine at the end of a plain
        // file (a short read); in the middle of a layout it is an error.
        if (k + 1 != extents_.size())
          return Status(Code::kStale, pt->file->name() + ": file is shorter than when it was opened");
        if (have) {
          rr.slices_.push_back({nullptr, static_cast<size_t>(have), pt->file.get(), src});
          rr.holders_.push_back(pt->file);
        }
        rr.size_ += have;
        rr.fd_bytes_ += have;
        return rr;
      }
      rr.slices_.push_back({nullptr, static_cast<size_t>(want), pt->file.get(), src});
      rr.holders_.push_back(pt->file);
      rr.fd_bytes_ += want;
    } else if (std::holds_alternative<ZeroExtent>(e.what)) {
      for (uint64_t p = a; p < b;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(b - p, kZeroBufferBytes));
        rr.slices_.push_back({zero_bytes(), n});
        p += n;
      }
    } else {
      const auto& dx = std::get<DecodedExtent>(e.what);
      const ChunkSource& src = *dx.source;
      const uint64_t s = dx.src_offset + rel, t = s + (b - a);
      WCFS_ASSIGN_OR_RETURN(std::vector<ChunkPin> pins, cache.get(dx.source, chunks_overlapping(src, s, t)));
      size_t i = src.chunk_at(s);
      for (ChunkPin& p : pins) {
        const uint64_t cs = src.chunk_offset(i), ce = cs + src.chunk_size(i);
        const uint64_t x = std::max(s, cs), y = std::min(t, ce);
        rr.slices_.push_back({p.data() + (x - cs), static_cast<size_t>(y - x)});
        if (kernel_cached) p.set_served(static_cast<uint32_t>(x - cs), static_cast<uint32_t>(y - cs));
        rr.pins_.push_back(std::move(p));
        ++i;
      }
    }
    rr.size_ += b - a;
    pos = b;
  }
  return rr;
}

}  // namespace wcodecfs
