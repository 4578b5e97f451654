// wcodecfs/virtual_file.h — a file of the mount as a layout of extents, and
// its read path.
//
// A VirtualFile is what a store kind makes of its stored inputs: a size and a
// list of extents covering [0, size) without holes or overlaps:
//   inline       bytes held in memory (e.g. the safetensors header of a
//                .wcodec file, the stats snapshot)
//   passthrough  a byte range of a backing file
//   decoded      a range of a ChunkSource's stream, served from the
//                ChunkCache (decoding the chunks touched)
//   zero         zeros (alignment padding), served from one shared
//                read-only buffer
// and a list of segments (a kind's tensors: the unit a loader reads at a
// time), by default one per extent.
//
// read() returns a ReadResult: a list of slices that stays valid until the
// ReadResult is destroyed. A slice is either memory (inline bytes, the zero
// buffer, pinned cache entries) or a range of a backing file's descriptor
// (passthrough), so the FUSE layer can reply with an iovec, or splice file
// ranges into /dev/fuse, without copying them here.
//
// Readahead (per open handle) watches the offsets a handle reads. Sequential
// reads grow a prefetch window (one chunk, doubling up to a cap); a read
// elsewhere resets it to nothing. Prefetched chunks are decoded in the
// background into the cache. A reader of one segment prefetches up to its
// end (see Readahead::on_read).
//
// Thread-safety: VirtualFile is immutable and may be read from many threads.
// Readahead has its own mutex (a leaf: released before calling the cache).
// A ReadResult belongs to one thread at a time; gather() only reads it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "wcodecfs/chunk_cache.h"
#include "wcodecfs/chunk_source.h"
#include "wcodecfs/fs_stats.h"
#include "wcodecfs/fs_status.h"

namespace wcodecfs {

// An open file descriptor of the store, closed when the last user goes.
class BackingFile {
 public:
  // Takes ownership of fd. `name` is the store-relative path (messages).
  BackingFile(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}
  ~BackingFile();
  BackingFile(const BackingFile&) = delete;
  BackingFile& operator=(const BackingFile&) = delete;
  int fd() const { return fd_; }
  const std::string& name() const { return name_; }
  // Reads up to n bytes at off; returns the count (short only at end of file).
  Result<size_t> pread_full(uint64_t off, size_t n, uint8_t* out) const;
  // The file's current size (fstat): reads check their ranges against it,
  // since a file may shrink after it was opened.
  Result<uint64_t> current_size() const;

 private:
  int fd_;
  std::string name_;
};

struct InlineExtent {
  std::shared_ptr<const std::vector<uint8_t>> bytes;
  uint64_t src_offset = 0;  // position in *bytes of the extent's first byte
};
struct PassthroughExtent {
  std::shared_ptr<const BackingFile> file;
  uint64_t src_offset = 0;  // file offset of the extent's first byte
};
struct DecodedExtent {
  std::shared_ptr<const ChunkSource> source;
  uint64_t src_offset = 0;  // stream position of the extent's first byte
};
// Zeros; any length (served as slices of zero_bytes()).
struct ZeroExtent {};

struct Extent {
  uint64_t offset = 0;  // in the virtual file
  uint64_t length = 0;
  std::variant<InlineExtent, PassthroughExtent, DecodedExtent, ZeroExtent> what;
};

// The shared read-only zero buffer behind ZeroExtent slices (process
// lifetime; never written, so its pages are the kernel's zero page).
constexpr size_t kZeroBufferBytes = size_t{1} << 20;
const uint8_t* zero_bytes();

// One contiguous piece of a read reply: memory (`data`) or, when `file` is
// set, bytes [offset, offset + size) of file->fd() (data is then null). The
// ReadResult holding the slice keeps the memory or the file alive.
struct ReadSlice {
  const uint8_t* data = nullptr;
  size_t size = 0;
  const BackingFile* file = nullptr;
  uint64_t offset = 0;  // file offset of an fd slice
  bool is_fd() const { return file != nullptr; }
};

// The bytes of one read, as slices into buffers this object keeps alive.
// Move-only; destroying it releases the cache pins.
//
// An fd slice was checked against the file's size when the read was made;
// the file may still shrink before its bytes are copied (a store file being
// rewritten in place). Copies then stop at the file's end: the bytes given
// are always the file's, never padding, and fewer than size().
class ReadResult {
 public:
  const std::vector<ReadSlice>& slices() const { return slices_; }
  size_t size() const { return size_; }
  // Bytes in fd slices (the rest is memory).
  size_t fd_bytes() const { return fd_bytes_; }
  // Copies the slices into one buffer (tests, small replies), reading fd
  // slices with pread. Stops at a short or failed pread (see above): the
  // result is then shorter than size().
  std::vector<uint8_t> gather() const;
  // Copies the slices to out[0, size()); returns the bytes copied, fewer
  // than size() when a backing file shrank meanwhile (the rest of out is
  // left alone), or the error of a pread that failed.
  Result<size_t> copy_to(uint8_t* out) const;

 private:
  friend class VirtualFile;
  // Copies up to the first short or failed pread; sets *err on failure.
  size_t copy_prefix(uint8_t* out, Status* err) const;
  std::vector<ReadSlice> slices_;
  size_t size_ = 0;
  size_t fd_bytes_ = 0;
  std::vector<ChunkPin> pins_;
  std::vector<std::shared_ptr<const void>> holders_;
};

class Readahead {
 public:
  // max_window == 0 disables readahead.
  explicit Readahead(uint64_t max_window) : max_window_(max_window) {}
  // Records a demand read of [off, off+len) of a file of `size` bytes whose
  // chunks are about `unit` bytes; returns the range to prefetch (empty when
  // the access is not sequential or the window already covers it).
  //
  // [seg_begin, seg_end) is the segment (a tensor) holding the read's last
  // byte (VirtualFile::read: not counting a spill of less than a page). A sequential run that began inside that segment is a
  // reader of one tensor: the prefetch stops at the segment's end, since
  // loaders jump from tensor to tensor in their own order. A run that
  // already crossed into this segment from an earlier one streams the file,
  // and the window runs on across segments.
  std::pair<uint64_t, uint64_t> on_read(uint64_t off, uint64_t len, uint64_t size, uint64_t unit,
                                        uint64_t seg_begin = 0, uint64_t seg_end = UINT64_MAX);
  uint64_t window() const;

 private:
  const uint64_t max_window_;
  // mu_ protects the fields below.
  mutable std::mutex mu_;
  bool started_ = false;
  uint64_t expected_ = 0;  // end of the furthest sequential read
  uint64_t run_start_ = 0;  // where the current sequential run began
  uint64_t seg_begin_ = 0;  // the segment the run reached last
  unsigned crossings_ = 0;  // segment boundaries the run crossed
  uint64_t window_ = 0;    // current prefetch window, bytes
  uint64_t ra_end_ = 0;    // prefetch submitted up to here
};

class VirtualFile {
 public:
  // Validates the layout: extents in order, contiguous from 0, non-empty,
  // no overflow, inline ranges inside their buffers and decoded ranges
  // inside their source's stream. `name` is the store-relative path.
  //
  // segment_starts: the start offsets of the file's segments (a kind's
  // tensor boundaries), sorted, unique and < size; 0 is implied (and may be
  // given). Empty: every extent is a segment. Anything else is rejected
  // (Status::Internal naming the file and the value).
  static Result<std::shared_ptr<const VirtualFile>> make(std::string name, std::vector<Extent> extents,
                                                         std::vector<uint64_t> segment_starts = {});

  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }
  const std::vector<Extent>& extents() const { return extents_; }
  // Start offsets of the segments, ascending, the first 0 (empty for an
  // empty file).
  const std::vector<uint64_t>& segments() const { return segments_; }
  // The segment [begin, end) holding byte `off`. REQUIRES: off < size().
  std::pair<uint64_t, uint64_t> segment_at(uint64_t off) const;
  // Typical decoded chunk size (readahead unit); 0 when nothing is decoded.
  uint64_t chunk_unit() const { return unit_; }
  // Number of chunks of all decoded extents (0 for plain files).
  size_t decoded_chunks() const;

  // Reads [off, off+len) clipped to size(). Touched chunks come from
  // `cache` (decoded if missing, as one batch). With `ra`, the handle's
  // readahead is updated and its prefetch submitted to the cache.
  // Passthrough ranges become fd slices, checked against the backing
  // file's current size: one that shrank since open gives a short read at
  // the end of the last extent and kStale anywhere else.
  // kernel_cached: the reader's file is in the kernel's page cache, so its
  // decoded bytes are marked served (ChunkPin::set_served).
  Result<ReadResult> read(uint64_t off, uint64_t len, ChunkCache& cache, Readahead* ra,
                          bool kernel_cached = false) const;

  // Submits background decoding of the chunks overlapping [from, to)
  // (decoded extents only).
  size_t prefetch(uint64_t from, uint64_t to, ChunkCache& cache) const;

 private:
  VirtualFile() = default;
  size_t extent_at(uint64_t off) const;

  std::string name_;
  uint64_t size_ = 0;
  uint64_t unit_ = 0;
  std::vector<Extent> extents_;
  std::vector<uint64_t> segments_;
};

}  // namespace wcodecfs
