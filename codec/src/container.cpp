// codec/src/container.cpp — .wcodec writer and random-access reader.
// Byte layout: docs/wcodec-format.md (section "Container").
#include "wcodec/container.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <map>
#include <thread>

#include <zstd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "bytes.h"
#include "device_plan.h"
#include "tensor_codec.h"

namespace wcodec {

namespace {

uint32_t crc32_of(const uint8_t* p, size_t n, uint32_t crc = 0) {
  while (n) {
    const uInt step = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = static_cast<uint32_t>(::crc32(crc, p, step));
    p += step;
    n -= step;
  }
  return crc;
}

std::string hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

std::string errno_msg(const std::string& what) { return what + ": " + std::strerror(errno); }

// Order-0 entropy of a tensor's codes as a fraction of their stored bits
// (reference line for inspect/bench).
double order0_fraction(const TensorInfo& t, const uint8_t* d, const std::string& kind) {
  const uint64_t n = t.nbytes();
  if (!n) return 0;
  std::vector<uint64_t> h;
  double bits_per = 8;
  if (kind == "ternary") {
    h.assign(4, 0);
    for (uint64_t i = 0; i < n; ++i)
      for (int s = 0; s < 8; s += 2) h[(d[i] >> s) & 3]++;
    bits_per = 2;
  } else if (kind == "int4") {
    h.assign(16, 0);
    for (uint64_t i = 0; i < n; ++i) {
      h[d[i] & 15]++;
      h[d[i] >> 4]++;
    }
    bits_per = 4;
  } else if (kind == "BF16" || kind == "F16" || kind == "F32") {
    // Exponent order-0 + raw sign and mantissa.
    const uint32_t eb = 8, mb = kind == "BF16" ? 7 : (kind == "F16" ? 10 : 23);
    const uint32_t ebits = kind == "F16" ? 5 : eb;
    const uint32_t bytes = kind == "F32" ? 4 : 2;
    h.assign(1u << ebits, 0);
    for (uint64_t i = 0; i + bytes <= n; i += bytes) {
      uint32_t v = 0;
      std::memcpy(&v, d + i, bytes);
      h[(v >> mb) & ((1u << ebits) - 1)]++;
    }
    const double elems = static_cast<double>(n / bytes);
    return (entropy_bits(h) + elems * (1 + mb)) / (elems * bytes * 8);
  } else {
    h.assign(256, 0);
    for (uint64_t i = 0; i < n; ++i) h[d[i]]++;
  }
  double total = 0;
  for (auto c : h) total += static_cast<double>(c);
  return entropy_bits(h) / (total * bits_per);
}

// The zero-point tensor of a packed 4-bit tensor: NAME_packed -> NAME_zero
// / NAME_zeros (U8, same rows, ceil(codes / group) columns), from the
// header alone: its index (or -1) and the group size.
int32_t aux_candidate(const SafetensorsHeader& h, size_t i, uint32_t* group) {
  const TensorInfo& t = h.tensors[i];
  const std::string suffix = "_packed";
  if (t.dtype != DType::kU8 || t.shape.size() != 2 || t.name.size() <= suffix.size() ||
      t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const std::string stem = t.name.substr(0, t.name.size() - suffix.size());
  for (size_t j = 0; j < h.tensors.size(); ++j) {
    const TensorInfo& z = h.tensors[j];
    if (z.name != stem + "_zero" && z.name != stem + "_zeros") continue;
    if (z.dtype != DType::kU8 || z.shape.size() != 2 || z.shape[0] != t.shape[0] || z.shape[1] == 0) continue;
    const uint64_t codes = t.shape[1] * 2;
    const uint64_t g = codes / z.shape[1];
    if (g == 0 || (codes + g - 1) / g != z.shape[1] || g > (1u << 20)) continue;
    *group = static_cast<uint32_t>(g);
    return static_cast<int32_t>(j);
  }
  return -1;
}

// The AuxInput of candidate j (aux_candidate) with its bytes zb: none
// unless every zero point fits 4 bits.
AuxInput make_aux(const SafetensorsHeader& h, int32_t j, uint32_t group, const uint8_t* zb) {
  AuxInput a;
  if (j < 0) return a;
  const TensorInfo& z = h.tensors[static_cast<size_t>(j)];
  for (uint64_t k = 0; k < z.nbytes(); ++k)
    if (zb[k] > 15) return a;
  a.index = j;
  a.bytes = zb;
  a.rows = z.shape[0];
  a.cols = z.shape[1];
  a.group = group;
  return a;
}

}  // namespace

// ======================================================================
// Writer
// ======================================================================

static void write_index_tensor(ByteWriter& w, const TensorInfo& t, const EncodedTensor& et, uint32_t crc,
                               const std::vector<uint64_t>& offsets, const std::vector<uint32_t>& sizes,
                               TableCoding coding) {
  w.str(t.name);
  w.u8(static_cast<uint8_t>(t.dtype));
  w.u8(static_cast<uint8_t>(t.shape.size()));
  for (auto d : t.shape) w.u64(d);
  w.u64(t.begin);
  w.u64(t.end);
  w.u32(crc);
  w.u64(et.geom.rows);
  w.u64(et.geom.cols);
  w.u64(et.geom.chunk_rows);
  w.u64(et.geom.chunk_cols);
  w.u8(static_cast<uint8_t>(et.geom.elem_bits));
  w.i32(et.has_model ? et.aux_tensor : -1);
  // 0: no model, 1: own model record, 2: the model of an earlier tensor.
  w.u8(!et.has_model ? 0 : (et.model_ref >= 0 ? 2 : 1));
  if (et.has_model && et.model_ref >= 0) {
    w.i32(et.model_ref);
  } else if (et.has_model) {
    auto mb = et.model.serialize(coding);
    w.varint(mb.size());
    w.bytes(mb.data(), mb.size());
  }
  w.varint(et.chunks.size());
  for (size_t i = 0; i < et.chunks.size(); ++i) {
    const auto& c = et.chunks[i];
    w.u64(offsets[i]);
    w.u32(sizes[i]);
    w.u32(static_cast<uint32_t>(c.decoded_size));
    w.u8(static_cast<uint8_t>(c.method));
    w.u64(c.xxh3);
  }
  // Encoder's choices (informational, shown by inspect).
  w.str(et.choice.kind_name);
  w.str(et.choice.model_desc);
  w.u32(et.choice.tiles_total);
  w.u32(et.choice.tiles_with_tools);
  for (auto v : et.choice.tools_hist) w.u32(v);
  for (auto v : et.choice.xform_hist) w.u32(v);
}

// Small tensors of one kind share one model when that is smaller in total
// (their tables are stored once): per group, the model shape of its largest
// tensor without per-tensor side information, tables from all members.
// Tensors of at most this size may share a model.
constexpr uint64_t kShareMax = 256 * 1024;

// zstd level of the index section (see where it is written).
constexpr int kIndexZstdLevel = 9;

// bytes_of(i): the original bytes of tensor i (every tensor with an
// encoding in *enc that may share).
static void share_models(const SafetensorsHeader& hdr, const std::function<const uint8_t*(size_t)>& bytes_of,
                         const EncodeOptions& opt, std::vector<EncodedTensor>* enc) {
  std::map<std::string, std::vector<size_t>> groups;
  for (size_t i = 0; i < enc->size(); ++i) {
    if (hdr.tensors[i].nbytes() <= kShareMax && shareable((*enc)[i])) groups[share_signature((*enc)[i])].push_back(i);
  }
  for (auto& [sig, members] : groups) {
    if (members.size() < 2) continue;
    uint64_t own = 0;
    size_t largest = members[0];
    for (size_t i : members) {
      for (auto& c : (*enc)[i].chunks) own += c.payload.size();
      own += (*enc)[i].model.serialize().size();
      if (hdr.tensors[i].nbytes() > hdr.tensors[largest].nbytes()) largest = i;
    }
    SharedStats ss(shared_model_shape((*enc)[largest].model));
    for (size_t i : members) ss.add((*enc)[i].geom, bytes_of(i));
    const TensorModel sm = ss.build();
    uint64_t shared = sm.serialize().size();
    // Skip encoding the members again where sharing cannot win: the
    // symbols at the shared tables' costs, plus the fixed part of each
    // model-coded chunk (flags, stream length, 32 lane states less the 64
    // bytes a raw tail may carry), already reach the members' own payloads.
    uint64_t model_chunks = 0;
    for (size_t i : members)
      for (auto& c : (*enc)[i].chunks) model_chunks += c.method == ChunkMethod::kModel;
    const double floor_bytes = static_cast<double>(shared) + ss.coded_bytes_lower_bound(sm) +
                               static_cast<double>(model_chunks) * (1 + 4 + 4 * kLanes - 64);
    if (floor_bytes >= static_cast<double>(own)) continue;
    std::vector<EncodedTensor> alt;
    for (size_t i : members) {
      alt.push_back(encode_with_model((*enc)[i].geom, bytes_of(i), sm, opt));
      for (auto& c : alt.back().chunks) shared += c.payload.size();
    }
    if (shared >= own) continue;
    const size_t owner = members[0];  // members are in index order
    for (size_t k = 0; k < members.size(); ++k) {
      EncodedTensor& e = (*enc)[members[k]];
      e.chunks = std::move(alt[k].chunks);
      e.model = sm;
      e.has_model = members[k] == owner ? true : alt[k].has_model;
      e.model_ref = members[k] == owner ? -1 : static_cast<int32_t>(owner);
      e.choice.model_desc = sm.describe() + " shared";
    }
  }
}

// Drops the models whose record costs more than they save. Per model (a
// tensor's own, or a shared one with the tensors that refer to it): its
// record plus its tensors' payloads, against their payloads with every
// model-coded chunk at its size without the model. idx: the tensors to look
// at (a model's tensors are all among them); enc(i), bytes_of(i): tensor i's
// encoding and original bytes.
static void drop_unpaid_models(const std::vector<size_t>& idx, const std::function<EncodedTensor&(size_t)>& enc,
                               const std::function<const uint8_t*(size_t)>& bytes_of, const EncodeOptions& opt,
                               TableCoding coding) {
  std::map<size_t, std::vector<size_t>> users;  // model owner -> the tensors coded with its model
  for (size_t i : idx) {
    const EncodedTensor& e = enc(i);
    if (e.has_model && e.model_ref < 0) users[i].push_back(i);
  }
  for (size_t i : idx) {
    const EncodedTensor& e = enc(i);
    const auto it = e.model_ref >= 0 ? users.find(static_cast<size_t>(e.model_ref)) : users.end();
    if (it != users.end()) it->second.push_back(i);
  }
  for (auto& [owner, members] : users) {
    uint64_t payloads = 0, without = 0;
    for (size_t i : members) {
      payloads += payload_bytes(enc(i));
      without += fallback_bytes(enc(i));
    }
    const std::vector<uint8_t> rec = enc(owner).model.serialize(coding);
    if (without >= payloads + rec.size()) continue;
    // The record goes into the zstd-coded index, where it costs about its
    // own compressed size (row and column classes, tables of similar
    // contexts repeat): on isnet-medium.rtn-ternary, records of 900-960
    // bytes compressed to 300-400, and dropping three models by their raw
    // size made the file 770 bytes larger.
    std::vector<uint8_t> z(ZSTD_compressBound(rec.size()));
    const size_t zn = ZSTD_compress(z.data(), z.size(), rec.data(), rec.size(), 3);
    const uint64_t record = ZSTD_isError(zn) ? rec.size() : std::min(zn, rec.size());
    if (without >= payloads + record) continue;
    for (size_t i : members) drop_model(bytes_of(i), opt, &enc(i));
  }
}

// A file written under a temporary name next to `path` and renamed over it
// once complete and flushed: readers of `path` never see it half-written.
// Dropped without commit(), the temporary file is removed.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp." + std::to_string(::getpid())) {}
  ~AtomicFile() {
    if (fd_ >= 0) {
      ::close(fd_);
      ::unlink(tmp_.c_str());
    }
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  Status open() {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    return fd_ < 0 ? Status::IOError(errno_msg("cannot create " + tmp_)) : Status::OK();
  }
  Status append(const uint8_t* p, size_t n) {
    for (size_t put = 0; put < n;) {
      const ssize_t r = ::write(fd_, p + put, n - put);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return Status::IOError(errno_msg("cannot write " + tmp_));
      put += static_cast<size_t>(r);
    }
    return Status::OK();
  }
  int fd() const { return fd_; }
  const std::string& temp_path() const { return tmp_; }
  // Flushes, renames over `path` and flushes the directory.
  Status commit() {
    const int fd = fd_;
    fd_ = -1;
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
      Status s = Status::IOError(errno_msg("cannot flush " + tmp_));
      ::unlink(tmp_.c_str());
      return s;
    }
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
      Status s = Status::IOError(errno_msg("cannot rename " + tmp_ + " to " + path_));
      ::unlink(tmp_.c_str());
      return s;
    }
    const size_t slash = path_.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path_.substr(0, slash));
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
    return Status::OK();
  }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};

Status add_order0_entropy(const uint8_t* data, size_t size, EncodeReport* report) {
  WC_ASSIGN_OR_RETURN(SafetensorsHeader hdr, parse_safetensors_header(data, size, size, "order-0 statistics"));
  if (hdr.tensors.size() != report->tensors.size())
    return Status::Invalid("order-0 statistics: the report has " + std::to_string(report->tensors.size()) +
                           " tensors, the file " + std::to_string(hdr.tensors.size()));
  const uint8_t* base = data + hdr.data_start;
  for (size_t i = 0; i < hdr.tensors.size(); ++i) {
    const auto& t = hdr.tensors[i];
    TensorSummary& s = report->tensors[i];
    if (s.name != t.name)
      return Status::Invalid("order-0 statistics: tensor " + std::to_string(i) + " is '" + t.name +
                             "' in the file, '" + s.name + "' in the report");
    s.order0_bits = order0_fraction(t, base + t.begin, s.kind);
  }
  return Status::OK();
}

namespace {

// Where the encoder reads the original file: get() gives bytes [off, off+n),
// pointing into the source or into *buf once read there.
class EncodeInput {
 public:
  virtual ~EncodeInput() = default;
  virtual Status get(uint64_t off, uint64_t n, std::vector<uint8_t>* buf, const uint8_t** p) const = 0;
};

class MemoryInput final : public EncodeInput {
 public:
  explicit MemoryInput(const uint8_t* data) : data_(data) {}
  Status get(uint64_t off, uint64_t n, std::vector<uint8_t>* buf, const uint8_t** p) const override {
    (void)n;
    (void)buf;
    *p = data_ + off;
    return Status::OK();
  }

 private:
  const uint8_t* data_;
};

class FileInput final : public EncodeInput {
 public:
  FileInput(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Status get(uint64_t off, uint64_t n, std::vector<uint8_t>* buf, const uint8_t** p) const override {
    buf->resize(static_cast<size_t>(n));
    for (uint64_t got = 0; got < n;) {
      const ssize_t r = ::pread(fd_, buf->data() + got, static_cast<size_t>(n - got), static_cast<off_t>(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Status::IOError(errno_msg("cannot read " + path_));
      if (r == 0) return Status::IOError(path_ + ": the file became shorter while it was encoded");
      got += static_cast<uint64_t>(r);
    }
    *p = buf->data();
    return Status::OK();
  }

 private:
  int fd_;
  std::string path_;
};

// Where the encoder writes the container: appended in order, the header
// written over its place at the end.
class EncodeSink {
 public:
  virtual ~EncodeSink() = default;
  virtual Status append(const uint8_t* p, size_t n) = 0;
  virtual Status write_at(uint64_t off, const uint8_t* p, size_t n) = 0;
};

class MemorySink final : public EncodeSink {
 public:
  std::vector<uint8_t> bytes;
  Status append(const uint8_t* p, size_t n) override {
    bytes.insert(bytes.end(), p, p + n);
    return Status::OK();
  }
  Status write_at(uint64_t off, const uint8_t* p, size_t n) override {
    std::memcpy(bytes.data() + off, p, n);
    return Status::OK();
  }
};

class FdSink final : public EncodeSink {
 public:
  FdSink(int fd, std::string what) : fd_(fd), what_(std::move(what)) {}
  Status append(const uint8_t* p, size_t n) override {
    WC_RETURN_IF_ERROR(write_at(end_, p, n));
    end_ += n;
    return Status::OK();
  }
  Status write_at(uint64_t off, const uint8_t* p, size_t n) override {
    for (size_t put = 0; put < n;) {
      const ssize_t r = ::pwrite(fd_, p + put, n - put, static_cast<off_t>(off + put));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return Status::IOError(errno_msg("cannot write " + what_));
      put += static_cast<size_t>(r);
    }
    return Status::OK();
  }

 private:
  int fd_;
  std::string what_;
  uint64_t end_ = 0;
};


// Appends to a sink, keeping the position and the CRC32 of everything after
// the header.
struct BodyWriter {
  EncodeSink& sink;
  uint64_t pos = kHeaderSize;
  uint32_t crc = 0;
  Status bytes(const uint8_t* p, size_t n) {
    crc = crc32_of(p, n, crc);
    pos += n;
    return sink.append(p, n);
  }
  Status pad_to(uint64_t align) {
    static const uint8_t zeros[kAlign] = {};
    const uint64_t n = (align - pos % align) % align;
    return bytes(zeros, static_cast<size_t>(n));
  }
};

// One tensor's encoding on its way to the output, with its original bytes
// (kept until they are hashed in file order).
struct TensorJob {
  EncodedTensor enc;
  std::vector<uint8_t> buf;  // the bytes, when read from a file
  const uint8_t* bytes = nullptr;
  uint32_t crc = 0;
  Status status;
  bool done = false;
};

// Encodes tensor i of `in` into *job (reads its bytes and those of its
// zero-point tensor).
void encode_job(const EncodeInput& in, const SafetensorsHeader& hdr, size_t i, const EncodeOptions& opt,
                const std::string& what, TensorJob* job) {
  const TensorInfo& t = hdr.tensors[i];
  auto fail = [&](const Status& st) { job->status = st.WithContext(what + ": tensor \"" + t.name + "\""); };
  Status st = in.get(hdr.data_start + t.begin, t.nbytes(), &job->buf, &job->bytes);
  if (!st.ok()) return fail(st);
  uint32_t group = 0;
  const int32_t zi = aux_candidate(hdr, i, &group);
  std::vector<uint8_t> zbuf;
  const uint8_t* zb = nullptr;
  if (zi >= 0) {
    const TensorInfo& z = hdr.tensors[static_cast<size_t>(zi)];
    st = in.get(hdr.data_start + z.begin, z.nbytes(), &zbuf, &zb);
    if (!st.ok()) return fail(st);
  }
  auto r = encode_tensor(t, job->bytes, make_aux(hdr, zi, group, zb), opt);
  if (!r.ok()) return fail(r.status());
  job->enc = std::move(r).value();
  job->crc = crc32_of(job->bytes, t.nbytes());
}

// The encoder. Memory stays bounded for any file size: tensors are read,
// encoded (on cfg.threads threads) and written in file order, a few at a
// time, and each one's bytes and payloads are dropped once written. Only
// the tensors that may share a model (at most kShareMax each, kShareHeld
// in all) are encoded first and kept until the output reaches them.
Status encode_core(const EncodeInput& in, uint64_t size, const EncodeConfig& cfg, const std::string& what,
                   EncodeSink& sink, EncodeReport* report) {
  const auto t0 = std::chrono::steady_clock::now();
  // The header: 8 bytes of length, then the JSON (read as far as the parser
  // looks before it rejects an oversized one).
  std::vector<uint8_t> hbuf;
  const uint8_t* hp = nullptr;
  uint64_t hlen = std::min<uint64_t>(size, 8);
  WC_RETURN_IF_ERROR(in.get(0, hlen, &hbuf, &hp));
  if (hlen == 8) {
    hlen = std::min<uint64_t>(size, 8 + std::min<uint64_t>(load_u64le(hp), kMaxSafetensorsHeader));
    WC_RETURN_IF_ERROR(in.get(0, hlen, &hbuf, &hp));
  }
  WC_ASSIGN_OR_RETURN(SafetensorsHeader hdr, parse_safetensors_header(hp, static_cast<size_t>(hlen), size, what));
  const std::vector<uint8_t> orig_header(hp, hp + hdr.data_start);
  std::vector<uint8_t>().swap(hbuf);
  if (cfg.chunk_bytes < 4096 || cfg.chunk_bytes > kMaxChunkDecoded)
    return Status::Invalid("chunk size " + std::to_string(cfg.chunk_bytes) + " (allowed 4096.." +
                           std::to_string(kMaxChunkDecoded) + ")");
  if (cfg.format_major != 1 && cfg.format_major != kVersionMajor)
    return Status::Invalid("format version " + std::to_string(cfg.format_major) + " (this encoder writes 1 or " +
                           std::to_string(kVersionMajor) + ")");
  const size_t nt = hdr.tensors.size();
  EncodeOptions opt;
  opt.chunk_bytes = cfg.chunk_bytes;
  opt.tool_search = cfg.tool_search;
  opt.exhaustive_tools = cfg.exhaustive_tools;
  opt.zstd_level = cfg.zstd_level;
  opt.format_2_1 = cfg.format_major >= 2;
  const TableCoding coding = cfg.format_major == 1 ? kTablesGamma : kTablesCompact;
  const int nthreads = std::max(1, std::min<int>(cfg.threads, static_cast<int>(std::max<size_t>(nt, 1))));
  std::atomic<uint64_t> done_bytes{0};
  auto progress = [&](const TensorInfo& t) {
    const uint64_t d = done_bytes.fetch_add(t.nbytes()) + t.nbytes();
    if (cfg.progress) cfg.progress(d, hdr.data_len);
  };

  // Phase 1: the small tensors, largest first over the threads, kept.
  constexpr uint64_t kShareHeld = 256u << 20;
  std::vector<TensorJob> jobs(nt);
  std::vector<char> early(nt, 0);
  std::vector<size_t> small;
  {
    uint64_t held = 0;
    std::vector<size_t> by_size(nt);
    for (size_t i = 0; i < nt; ++i) by_size[i] = i;
    std::stable_sort(by_size.begin(), by_size.end(),
                     [&](size_t a, size_t b) { return hdr.tensors[a].nbytes() < hdr.tensors[b].nbytes(); });
    for (size_t i : by_size) {
      const uint64_t n = hdr.tensors[i].nbytes();
      if (n > kShareMax || held + n > kShareHeld) break;
      held += n;
      early[i] = 1;
      small.push_back(i);
    }
    std::reverse(small.begin(), small.end());
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t k; (k = next.fetch_add(1)) < small.size();) {
        if (cfg.cancelled && cfg.cancelled()) {
          jobs[small[k]].status = Status::Internal(what + ": encode cancelled");
          continue;
        }
        encode_job(in, hdr, small[k], opt, what, &jobs[small[k]]);
        progress(hdr.tensors[small[k]]);
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < nthreads && static_cast<size_t>(t) < small.size(); ++t) pool.emplace_back(work);
    work();
    for (auto& th : pool) th.join();
    for (size_t i : small) WC_RETURN_IF_ERROR(jobs[i].status);
  }
  {
    std::vector<EncodedTensor> held(nt);
    for (size_t i : small) held[i] = std::move(jobs[i].enc);
    share_models(hdr, [&](size_t i) { return jobs[i].bytes; }, opt, &held);
    drop_unpaid_models(
        small, [&](size_t i) -> EncodedTensor& { return held[i]; }, [&](size_t i) { return jobs[i].bytes; }, opt,
        coding);
    for (size_t i : small) jobs[i].enc = std::move(held[i]);
  }

  // Phase 2: every tensor in file order; the others are encoded by the
  // threads at most `window` tensors ahead of the output.
  BodyWriter out{sink};
  WC_RETURN_IF_ERROR(sink.append(std::vector<uint8_t>(kHeaderSize, 0).data(), kHeaderSize));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> sha_ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!sha_ctx || EVP_DigestInit_ex(sha_ctx.get(), EVP_sha256(), nullptr) != 1)
    return Status::Internal(what + ": cannot start a SHA-256 digest");
  EVP_DigestUpdate(sha_ctx.get(), orig_header.data(), orig_header.size());
  // The minor version is the lowest the file needs: 2.1 when a model uses
  // the column-phase ternary contexts, 2.2 when one uses the kernel
  // contexts, 2.3 when a float model codes joint symbols (so older readers
  // read the rest). It is known once every tensor is encoded: the metadata
  // goes out with minor 0 and is written again (same length) if it is not 0.
  uint16_t minor = 0;
  auto meta_json = [&] {
    nlohmann::json meta = {{"format", "wcodec"},
                           {"version", std::to_string(cfg.format_major) + "." + std::to_string(minor)},
                           {"source_format", "safetensors"},
                           {"encoder", std::string("wcodec ") + WCODEC_VERSION},
                           {"tensors", nt},
                           {"chunk_bytes", cfg.chunk_bytes}};
    return meta.dump();
  };
  const std::string meta0 = meta_json();
  const uint8_t* meta0_p = reinterpret_cast<const uint8_t*>(meta0.data());
  WC_RETURN_IF_ERROR(out.bytes(meta0_p, meta0.size()));
  WC_RETURN_IF_ERROR(out.pad_to(kAlign));
  const uint64_t meta_end = out.pos;  // the body CRC restarts here (see the footer)
  out.crc = 0;

  std::vector<size_t> late;
  for (size_t i = 0; i < nt; ++i)
    if (!early[i]) late.push_back(i);
  const size_t window = static_cast<size_t>(nthreads) + 1;
  std::mutex mu;
  std::condition_variable cv;
  size_t next_late = 0, written = 0;  // late tensors taken / written
  bool stop = false;
  auto work = [&] {
    for (;;) {
      size_t k;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return stop || next_late >= late.size() || next_late < written + window; });
        if (stop || next_late >= late.size()) return;
        k = next_late++;
      }
      TensorJob job;
      encode_job(in, hdr, late[k], opt, what, &job);
      progress(hdr.tensors[late[k]]);
      {
        std::lock_guard<std::mutex> lk(mu);
        job.done = true;
        jobs[late[k]] = std::move(job);
      }
      cv.notify_all();
    }
  };
  std::vector<std::thread> pool;
  // One thread: the tensors are encoded here, in order (no thread beside the
  // caller's, so per-core figures stay per core).
  if (nthreads > 1)
    for (int t = 0; t < nthreads; ++t) pool.emplace_back(work);
  struct Joiner {
    std::vector<std::thread>& pool;
    std::mutex& mu;
    std::condition_variable& cv;
    bool& stop;
    ~Joiner() {
      {
        std::lock_guard<std::mutex> lk(mu);
        stop = true;
      }
      cv.notify_all();
      for (auto& th : pool) th.join();
    }
  } joiner{pool, mu, cv, stop};

  std::vector<std::vector<uint64_t>> offsets(nt);
  std::vector<std::vector<uint32_t>> sizes(nt);
  std::vector<uint32_t> crcs(nt);
  for (size_t i = 0; i < nt; ++i) {
    TensorJob& job = jobs[i];
    if (cfg.cancelled && cfg.cancelled()) return Status::Internal(what + ": encode cancelled");
    if (!early[i] && pool.empty()) {
      encode_job(in, hdr, i, opt, what, &job);
      progress(hdr.tensors[i]);
    } else if (!early[i]) {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return jobs[i].done; });
    }
    WC_RETURN_IF_ERROR(job.status);
    if (!early[i])
      drop_unpaid_models(
          {i}, [&](size_t) -> EncodedTensor& { return job.enc; }, [&](size_t) { return job.bytes; }, opt, coding);
    EVP_DigestUpdate(sha_ctx.get(), job.bytes, hdr.tensors[i].nbytes());
    crcs[i] = job.crc;
    if (job.enc.has_model && job.enc.model.kind == ModelKind::kInt && job.enc.model.ip.nbr_mode >= 2)
      minor = std::max<uint16_t>(minor, job.enc.model.ip.nbr_mode == 2 ? 1 : 2);
    if (job.enc.has_model && job.enc.model.kind == ModelKind::kFloat && float_joint(job.enc.model.fp))
      minor = std::max<uint16_t>(minor, 3);
    for (auto& c : job.enc.chunks) {
      WC_RETURN_IF_ERROR(out.pad_to(16));
      offsets[i].push_back(out.pos);
      sizes[i].push_back(static_cast<uint32_t>(c.payload.size()));
      WC_RETURN_IF_ERROR(out.bytes(c.payload.data(), c.payload.size()));
      std::vector<uint8_t>().swap(c.payload);
    }
    std::vector<uint8_t>().swap(job.buf);
    job.bytes = nullptr;
    if (!early[i]) {
      {
        std::lock_guard<std::mutex> lk(mu);
        ++written;
      }
      cv.notify_all();
    }
  }
  WC_RETURN_IF_ERROR(out.pad_to(kAlign));
  const uint64_t index_off = out.pos;
  uint32_t index_crc = 0;
  {
    // Index section: u64 raw size, then one zstd frame of [original
    // safetensors header bytes][tensor records].
    ByteWriter ix;
    ix.bytes(orig_header.data(), orig_header.size());
    ix.u64(nt);
    for (size_t i = 0; i < nt; ++i)
      write_index_tensor(ix, hdr.tensors[i], jobs[i].enc, crcs[i], offsets[i], sizes[i], coding);
    std::vector<uint8_t> z(ZSTD_compressBound(ix.size()));
    // Level 9 (lazy matching). The optimal parsers (level 13 and up) make
    // the index 5-7% smaller, but at 5-7x the time, and on a small file the
    // index is a large part of the encode: on stories260K's int files level
    // 14 took 1.5-2.2 ms of 6-11 ms, a fifth of the encode, to save 200-380
    // bytes (0.06-0.16% of those files; 0.003-0.03% of isnet-medium's).
    const size_t zn = ZSTD_compress(z.data(), z.size(), ix.buf().data(), ix.size(), kIndexZstdLevel);
    if (ZSTD_isError(zn)) return Status::Internal(what + ": zstd failed on the index");
    ByteWriter head;
    head.u64(ix.size());
    index_crc = crc32_of(z.data(), zn, crc32_of(head.buf().data(), head.size()));
    WC_RETURN_IF_ERROR(out.bytes(head.buf().data(), head.size()));
    WC_RETURN_IF_ERROR(out.bytes(z.data(), zn));
  }
  const uint64_t index_size = out.pos - index_off;
  std::array<uint8_t, 32> sha{};
  unsigned int sha_len = 0;
  EVP_DigestFinal_ex(sha_ctx.get(), sha.data(), &sha_len);
  // The metadata again if the minor version is not 0.
  const std::string meta_s = meta_json();
  if (meta_s.size() != meta0.size()) return Status::Internal(what + ": metadata changed length");
  if (meta_s != meta0)
    WC_RETURN_IF_ERROR(sink.write_at(kHeaderSize, reinterpret_cast<const uint8_t*>(meta_s.data()), meta_s.size()));
  // Header.
  ByteWriter h;
  h.buf().resize(kHeaderSize, 0);
  {
    auto& b = h.buf();
    std::memcpy(b.data(), kMagic, 4);
    b[4] = cfg.format_major & 0xff;
    b[5] = cfg.format_major >> 8;
    b[6] = minor & 0xff;
    b[7] = minor >> 8;
    h.put_u32_at(8, 0);  // flags
    h.put_u32_at(12, static_cast<uint32_t>(meta_s.size()));
    h.put_u64_at(16, size);
    h.put_u64_at(24, hdr.data_start);
    h.put_u64_at(32, index_off);
    h.put_u64_at(40, index_size);
    std::memcpy(b.data() + 48, sha.data(), 32);
    h.put_u32_at(80, index_crc);
    h.put_u32_at(124, crc32_of(b.data(), 124));
  }
  WC_RETURN_IF_ERROR(sink.write_at(0, h.buf().data(), kHeaderSize));
  // Footer. The file CRC covers everything before it: header, metadata and
  // its padding, then the body from meta_end (out.crc).
  const uint64_t meta_pad = meta_end - kHeaderSize - meta_s.size();
  std::vector<uint8_t> zeros(static_cast<size_t>(meta_pad), 0);
  uint32_t file_crc = crc32_of(h.buf().data(), kHeaderSize);
  file_crc = crc32_of(reinterpret_cast<const uint8_t*>(meta_s.data()), meta_s.size(), file_crc);
  file_crc = crc32_of(zeros.data(), zeros.size(), file_crc);
  file_crc = static_cast<uint32_t>(crc32_combine(file_crc, out.crc, static_cast<z_off_t>(out.pos - meta_end)));
  ByteWriter f;
  f.u64(index_off);
  f.u64(index_size);
  f.u32(index_crc);
  f.u32(load_u32le(h.buf().data() + 124));
  f.u32(file_crc);
  f.bytes(kFooterMagic, 4);
  WC_RETURN_IF_ERROR(sink.append(f.buf().data(), f.size()));

  if (report) {
    report->original_size = size;
    report->encoded_size = out.pos + f.size();
    report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    report->tensors.clear();
    for (size_t i = 0; i < nt; ++i) {
      const auto& t = hdr.tensors[i];
      const EncodedTensor& e = jobs[i].enc;
      TensorSummary s;
      s.name = t.name;
      s.dtype = t.dtype;
      s.shape = t.shape;
      s.original_bytes = t.nbytes();
      s.chunks = e.chunks.size();
      for (size_t k = 0; k < e.chunks.size(); ++k) {
        const ChunkMethod m = e.chunks[k].method;
        s.stored_bytes += sizes[i][k];
        (m == ChunkMethod::kModel ? s.chunks_model : m == ChunkMethod::kZstd ? s.chunks_zstd : s.chunks_raw)++;
      }
      s.kind = e.choice.kind_name;
      s.model = e.choice.model_desc;
      s.tiles_total = e.choice.tiles_total;
      s.tiles_with_tools = e.choice.tiles_with_tools;
      std::copy(std::begin(e.choice.tools_hist), std::end(e.choice.tools_hist), s.pred_hist.begin());
      std::copy(std::begin(e.choice.xform_hist), std::end(e.choice.xform_hist), s.xform_hist.begin());
      s.crc32 = crcs[i];
      report->tensors.push_back(std::move(s));
    }
  }
  return Status::OK();
}

}  // namespace

Result<std::vector<uint8_t>> encode_safetensors(const uint8_t* data, size_t size, const EncodeConfig& cfg,
                                                const std::string& what, EncodeReport* report) {
  MemorySink sink;
  WC_RETURN_IF_ERROR(encode_core(MemoryInput(data), size, cfg, what, sink, report));
  return std::move(sink.bytes);
}

Status encode_safetensors_fd(int in_fd, uint64_t size, int out_fd, const EncodeConfig& cfg, const std::string& what,
                             EncodeReport* report) {
  FdSink sink(out_fd, "the encoding of " + what);
  return encode_core(FileInput(in_fd, what), size, cfg, what, sink, report);
}

Status encode_safetensors_file(const std::string& in, const std::string& out, const EncodeConfig& cfg,
                               EncodeReport* report) {
  const int fd = ::open(in.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(errno_msg("cannot open " + in));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0) return Status::IOError(errno_msg("cannot stat " + in));
  AtomicFile f(out);
  WC_RETURN_IF_ERROR(f.open());
  FdSink sink(f.fd(), f.temp_path());
  WC_RETURN_IF_ERROR(encode_core(FileInput(fd, in), static_cast<uint64_t>(st.st_size), cfg, in, sink, report));
  return f.commit();
}

// ======================================================================
// Reader
// ======================================================================

struct Reader::Tensor {
  TensorInfo info;
  uint32_t crc = 0;
  TensorGeometry geom;
  int32_t aux = -1;
  bool has_model = false;
  bool own_model = false;
  std::shared_ptr<const TensorModel> model;  // own or another tensor's
  std::vector<ChunkEntry> chunks;
  size_t first_global = 0;
  std::string kind, model_desc;
  uint32_t tiles_total = 0, tiles_with_tools = 0;
  std::array<uint32_t, 6> pred_hist{};
  std::array<uint32_t, 3> xform_hist{};
  // Decoded aux (zero-point) bytes of this tensor when another tensor needs them.
  mutable std::vector<uint8_t> decoded;
  mutable std::atomic<bool> decoded_ready{false};
};

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
  uint64_t got = 0;
  while (got < len) {
    const ssize_t r = ::pread(fd_, out + got, len - got, static_cast<off_t>(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::IOError(errno_msg("read of " + path_));
    if (r == 0) return Status::Corruption(path_ + ": file shrank while reading");
    got += static_cast<uint64_t>(r);
  }
  return Status::OK();
}

Result<const uint8_t*> Reader::stored_bytes(uint64_t off, uint64_t len, ScratchBytes* buf) const {
  if (mem_) {
    if (off > file_size_ || len > file_size_ - off)
      return Status::Corruption(path_ + ": read of " + std::to_string(len) + " bytes at " + std::to_string(off) +
                                " beyond the file end " + std::to_string(file_size_));
    return mem_ + off;
  }
  uint8_t* p = buf->get(len);
  WC_RETURN_IF_ERROR(pread_exact(off, len, p));
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
  if (flags != 0) return corrupt("header flags", flags, "0 (reserved bits must be zero)");
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
  if (8 + load_u64le(rd->orig_header_.data()) != orig_hdr_len)
    return corrupt("original header length", orig_hdr_len,
                   "8 + the stored safetensors header's length field (" +
                       std::to_string(load_u64le(rd->orig_header_.data())) + ")");
  {
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
    return corrupt("tensor count", nt, std::to_string(rd->header_.tensors.size()) + " (from the safetensors header)");
  const uint64_t data_start = rd->header_.data_start;
  for (uint64_t i = 0; i < nt; ++i) {
    auto t = std::make_unique<Tensor>();
    const TensorInfo& ref = rd->header_.tensors[i];
    t->info.name = r.str(1u << 20);
    const std::string W = P + ": tensor " + std::to_string(i) + " \"" + t->info.name + "\"";
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
    if (model_kind > 2) return corrupt(W + " model flag", model_kind, "0..2");
    t->has_model = model_kind != 0;
    t->own_model = model_kind == 1;
    if (t->info.name != ref.name || t->info.dtype != ref.dtype || t->info.shape != ref.shape ||
        t->info.begin != ref.begin || t->info.end != ref.end)
      return Status::Corruption(W + ": index record does not match the stored safetensors header");
    const TensorGeometry& g = t->geom;
    const uint64_t nbytes = ref.nbytes();
    const uint32_t eb = g.elem_bits;
    if (eb != 2 && eb != 4 && eb % 8 != 0) return corrupt(W + " elem_bits", eb, "2, 4 or a multiple of 8");
    if (eb == 0 || eb > 128) return corrupt(W + " elem_bits", eb, "2..128");
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
      if (g.chunk_bytes() > kMaxChunkDecoded) return corrupt(W + " chunk size", g.chunk_bytes(), "<= 64 MiB");
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
          return corrupt(W + " aux tensor", static_cast<uint64_t>(t->aux), "another tensor of the file");
      } else if (t->aux != -1) {
        return corrupt(W + " aux tensor", static_cast<uint64_t>(t->aux), "-1 for a model without zero points");
      }
    } else if (model_kind == 2) {
      const int32_t mr = r.i32();
      if (!r.ok()) return Status::Corruption(W + ": index record truncated");
      if (mr < 0 || static_cast<uint64_t>(mr) >= i || !rd->tensors_[static_cast<size_t>(mr)]->own_model)
        return corrupt(W + " model reference", static_cast<uint64_t>(mr), "an earlier tensor with its own model");
      t->model = rd->tensors_[static_cast<size_t>(mr)]->model;
      WC_RETURN_IF_ERROR(check_shared_model(*t->model, g, W));
      if (t->aux != -1) return corrupt(W + " aux tensor", static_cast<uint64_t>(t->aux), "-1 for a shared model");
    } else if (t->aux != -1) {
      return corrupt(W + " aux tensor", static_cast<uint64_t>(t->aux), "-1 without a model");
    }
    const uint64_t nc = r.varint();
    if (!r.ok() || nc != g.num_chunks() || (nbytes == 0 && nc != 0))
      return corrupt(W + " chunk count", nc, std::to_string(g.num_chunks()));
    uint64_t dec_off = data_start + ref.begin;
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
        return corrupt(W + " chunk " + std::to_string(c) + " decoded size", e.decoded_size,
                       std::to_string(h * w * eb / 8));
      if (e.method > 2) return corrupt(W + " chunk " + std::to_string(c) + " method", e.method, "0..2");
      if (e.method == 2 && !t->has_model)
        return Status::Corruption(W + ": chunk " + std::to_string(c) + " is model-coded but the tensor has no model");
      if (e.file_offset < kHeaderSize || e.file_offset > index_off || e.stored_size > index_off - e.file_offset)
        return corrupt(W + " chunk " + std::to_string(c) + " offset", e.file_offset, "within the data region");
      e.decoded_offset = dec_off;
      dec_off += e.decoded_size;
      t->chunks.push_back(e);
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
    t->first_global = rd->all_chunks_.size();
    for (size_t c = 0; c < t->chunks.size(); ++c) {
      rd->all_chunks_.push_back(t->chunks[c]);
      rd->chunk_tensor_.push_back(static_cast<uint32_t>(i));
      rd->chunk_local_.push_back(c);
    }
    rd->tensors_.push_back(std::move(t));
  }
  if (r.remaining()) return corrupt("index trailing bytes", r.remaining(), "0");
  // Aux tensors must be plain (no aux of their own) and of the right shape.
  for (auto& t : rd->tensors_) {
    if (!t->has_model || t->model->kind != ModelKind::kInt || !t->model->ip.zgroup) continue;
    const Tensor& z = *rd->tensors_[static_cast<size_t>(t->aux)];
    const uint64_t zc = (t->geom.cols + t->model->ip.zgroup - 1) / t->model->ip.zgroup;
    if (z.info.dtype != DType::kU8 || z.info.nbytes() != t->geom.rows * zc ||
        (z.has_model && z.model->kind == ModelKind::kInt && z.model->ip.zgroup))
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
  s.chunks = t.chunks.size();
  for (auto& c : t.chunks) {
    s.stored_bytes += c.stored_size;
    (c.method == 2 ? s.chunks_model : c.method == 1 ? s.chunks_zstd : s.chunks_raw)++;
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
  for (size_t c = 0; c < z.chunks.size(); ++c) {
    WC_RETURN_IF_ERROR(decode_chunk(z.first_global + c, buf.data() + off));
    off += z.chunks[c].decoded_size;
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
  thread_local ScratchBytes payload;
  auto p = stored_bytes(e.file_offset, e.stored_size, &payload);
  if (!p.ok()) return p.status();
  return decode_chunk_from(gi, *p, out);
}

bool Reader::uses_zero_points(size_t gi) const {
  const Tensor& t = *tensors_[chunk_tensor_[gi]];
  return all_chunks_[gi].method == 2 && t.model && t.model->kind == ModelKind::kInt && t.model->ip.zgroup;
}

Status Reader::decode_chunk_from(size_t gi, const uint8_t* payload, uint8_t* out) const {
  const ChunkEntry& e = all_chunks_[gi];
  const Tensor& t = *tensors_[chunk_tensor_[gi]];
  const uint8_t* zp = nullptr;
  uint32_t zcols = 0;
  if (uses_zero_points(gi)) {
    WC_RETURN_IF_ERROR(load_aux(static_cast<size_t>(t.aux)));
    zp = tensors_[static_cast<size_t>(t.aux)]->decoded.data();
    zcols = static_cast<uint32_t>((t.geom.cols + t.model->ip.zgroup - 1) / t.model->ip.zgroup);
  }
  return wcodec::decode_chunk(t.geom, t.has_model ? t.model.get() : nullptr, chunk_local_[gi],
                              static_cast<ChunkMethod>(e.method), payload, e.stored_size, e.decoded_size, e.xxh3,
                              zp, zcols, t.model ? t.model->ip.zgroup : 0, out, thread_scratch(), chunk_what(gi));
}

bool Reader::pairable(size_t a, size_t b) const {
  if (a >= all_chunks_.size() || b >= all_chunks_.size() || a == b) return false;
  const ChunkEntry &ea = all_chunks_[a], &eb = all_chunks_[b];
  if (ea.method != 2 || eb.method != 2 || ea.decoded_size != eb.decoded_size) return false;
  const Tensor &ta = *tensors_[chunk_tensor_[a]], &tb = *tensors_[chunk_tensor_[b]];
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
  if (groupable(idx, n)) {
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
      auto p = stored_bytes(e.file_offset, e.stored_size, &payload);
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
        if (nx.decoded_offset >= end || nx.file_offset < stop || nx.file_offset - stop > kMaxGap ||
            nx.file_offset + nx.stored_size - f.file_offset > kMaxRun)
          break;
        stop = nx.file_offset + nx.stored_size;
        ++last;
      }
      auto at = stored_bytes(f.file_offset, stop - f.file_offset, &run);
      if (!at.ok()) return at.status();
      run_data = *at;
      run_first = gi;
      run_last = last;
      run_off = f.file_offset;
    }
    *p = run_data + (all_chunks_[gi].file_offset - run_off);
    return Status::OK();
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
      WC_RETURN_IF_ERROR(decode_chunk_from(gi, payload, out));
    } else if (a == cs && b == ce) {
      if (stage.size() < e.decoded_size) stage.resize(e.decoded_size);
      WC_RETURN_IF_ERROR(decode_chunk_from(gi, payload, stage.data()));
      stream_copy(out, stage.data(), e.decoded_size);
    } else {
      tmp.resize(e.decoded_size);
      WC_RETURN_IF_ERROR(decode_chunk_from(gi, payload, tmp.data()));
      std::memcpy(out, tmp.data() + (a - cs), b - a);
    }
    out += b - a;
    offset = b;
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
      EVP_DigestUpdate(ctx, outs[i], sz);
      if (gi + 1 == all_chunks_.size() || chunk_tensor_[gi + 1] != ti) {
        check_done(ti);
        next_tensor = ti + 1;
      }
    }
    g += static_cast<size_t>(n);
  }
  for (; next_tensor < tensors_.size() && st.ok(); ++next_tensor) check_done(next_tensor);
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

// ------------------------------------------------------------ device plan

Status Reader::plan_chunks(const std::vector<size_t>& gis, DevicePlan* plan) const {
  *plan = DevicePlan{};
  std::vector<uint8_t>& A = plan->arena;
  // Appends n bytes (16-byte aligned start, 8 zero bytes after: decoders may
  // load a little past a section, as they may in the file's payloads).
  auto put = [&](const void* p, size_t n) -> uint64_t {
    A.resize((A.size() + 15) & ~size_t{15}, 0);
    const uint64_t off = A.size();
    A.resize(off + n + 8, 0);
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
      e.fs = put(ts[i].fs, 256 * 4);
      entries.push_back(e);
    }
    return put(entries.data(), entries.size() * sizeof(PlanTable));
  };
  std::map<uint32_t, uint32_t> model_of_tensor;
  std::vector<uint8_t> payload, ready;
  for (const size_t gi : gis) {
    if (gi >= all_chunks_.size()) return Status::OutOfRange(path_ + ": chunk index " + std::to_string(gi));
    const ChunkEntry& e = all_chunks_[gi];
    const uint32_t ti = chunk_tensor_[gi];
    const Tensor& t = *tensors_[ti];
    const std::string what = chunk_what(gi);
    payload.resize(e.stored_size);
    WC_RETURN_IF_ERROR(pread_exact(e.file_offset, e.stored_size, payload.data()));
    PlanChunk c;
    c.out_len = e.decoded_size;
    c.xxh3 = e.xxh3;
    c.out = plan->out_bytes;
    plan->out_bytes += (uint64_t{e.decoded_size} + 15) & ~uint64_t{15};
    switch (static_cast<ChunkMethod>(e.method)) {
      case ChunkMethod::kRaw:
        if (payload.size() != e.decoded_size)
          return Status::Corruption(what + ": raw chunk size " + std::to_string(payload.size()) +
                                    " != decoded size " + std::to_string(e.decoded_size));
        c.kind = PlanKind::kReady;
        c.raw = put(payload.data(), payload.size());
        c.raw_len = payload.size();
        break;
      case ChunkMethod::kZstd: {
        ready.resize(e.decoded_size);
        const size_t r = ZSTD_decompress(ready.data(), ready.size(), payload.data(), payload.size());
        if (ZSTD_isError(r) || r != e.decoded_size)
          return Status::Corruption(what + ": zstd chunk does not decode to " + std::to_string(e.decoded_size) +
                                    " bytes");
        c.kind = PlanKind::kReady;
        c.raw = put(ready.data(), ready.size());
        c.raw_len = ready.size();
        break;
      }
      case ChunkMethod::kModel: {
        if (!t.has_model || !t.model) return Status::Corruption(what + ": model-coded chunk in a tensor without a model");
        const TensorModel& m = *t.model;
        ModelPayload mp;
        WC_RETURN_IF_ERROR(parse_model_payload(t.geom, m, chunk_local_[gi], payload.data(), payload.size(),
                                               e.decoded_size, what, &mp));
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
              WC_RETURN_IF_ERROR(load_aux(static_cast<size_t>(t.aux)));
              const auto& z = tensors_[static_cast<size_t>(t.aux)]->decoded;
              pm.zp = put(z.data(), z.size());
              pm.mv.zcols = static_cast<uint32_t>((t.geom.cols + m.ip.zgroup - 1) / m.ip.zgroup);
            }
          }
          found = model_of_tensor.emplace(ti, static_cast<uint32_t>(plan->models.size())).first;
          plan->models.push_back(pm);
        }
        const uint64_t base = put(payload.data(), payload.size());
        auto at = [&](const uint8_t* p) { return base + static_cast<uint64_t>(p - payload.data()); };
        c.kind = PlanKind::kModel;
        c.model = found->second;
        c.cv = mp.cv;
        c.map = mp.map ? at(mp.map) : kPlanNone;
        c.rans = at(mp.rans);
        c.rans_len = mp.rans_len;
        c.raw = at(mp.raw);
        c.raw_len = mp.raw_len;
        c.tail = mp.tail ? 1 : 0;
        c.scratch = plan->scratch_bytes;
        plan->scratch_bytes += plan_scratch_bytes(m.kind, uint64_t{mp.cv.h} * mp.cv.w);
        break;
      }
      default:
        return Status::Corruption(what + ": chunk method " + std::to_string(static_cast<int>(e.method)) +
                                  " (allowed 0..2)");
    }
    plan->chunks.push_back(c);
    plan->chunk_index.push_back(gi);
  }
  return Status::OK();
}

}  // namespace wcodec
