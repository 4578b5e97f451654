// codec/compress/container_encode.cpp — the .wcodec writer: tensors read,
// encoded and written a few at a time by a pool of encoding threads, shared
// and unpaid models settled, the index and footer written last.
// Byte layout: docs/wcodec-format.md (section "Container").
// Thread-safety: the encode functions are re-entrant; each call owns its
// threads and joins them before it returns.
#include "wcodec/encode.h"
#include "wcodec/gguf.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "atomic_file.h"
#include "bytes.h"
#include "checksums.h"
#include "file_read.h"
#include "tensor_encode.h"

namespace wcodec {

namespace {

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
  // 0: no model, 1: own model record, 2: the model of an earlier tensor,
  // 3: a split model (format 2.5).
  w.u8(et.split ? 3 : !et.has_model ? 0 : (et.model_ref >= 0 ? 2 : 1));
  if (et.split) {
    auto sb = et.split->serialize(coding);
    w.varint(sb.size());
    w.bytes(sb.data(), sb.size());
  } else if (et.has_model && et.model_ref >= 0) {
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
    for (size_t i : members) ss.add((*enc)[i], bytes_of(i));
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
                               static_cast<double>(model_chunks * kModelChunkFixed);
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
    if (model_pays(payloads + rec.size(), without, opt)) continue;
    // The record goes into the zstd-coded index, where it costs about its
    // own compressed size (row and column classes, tables of similar
    // contexts repeat): on isnet-medium.rtn-ternary, records of 900-960
    // bytes compressed to 300-400, and dropping three models by their raw
    // size made the file 770 bytes larger.
    const std::vector<uint8_t> z = zstd_compress(rec.data(), rec.size(), 3);
    const uint64_t record = z.empty() ? rec.size() : std::min(z.size(), rec.size());
    if (model_pays(payloads + record, without, opt)) continue;
    for (size_t i : members) drop_model(bytes_of(i), opt, &enc(i));
  }
}

// Zstd groups (format 2.11, §6.2): the chunks of the small tensors coded
// whole as one zstd chunk, by dtype in file order, packed into groups of at
// most kZstdGroupBytes decoded bytes; a group of two or more is coded as one
// frame where that is smaller than its chunks' own frames. On stories260K's
// quantized files (tensors of 0.1-16 KiB) the groups are 1-2% smaller than
// the frames apart and decode 1.2-1.5x faster (libzstd alone, one thread):
// one frame's entropy tables serve the group, and the tensors of one dtype
// (codes, scales, norms) resemble each other more than their neighbours.
constexpr uint64_t kZstdGroupBytes = 64 * 1024;
// The groups' zstd level: on those files level 3 comes within 0.1% of level
// 9 (294,496 against 294,215 bytes for rtn-int8) at 2.6x its speed (278
// against 108 MB/s), where level 9 would add a fifth to their encode time.
constexpr int kZstdGroupLevel = 3;

struct ZstdGroup {
  std::vector<uint8_t> frame;
  uint64_t decoded = 0;   // the group's decoded bytes
  uint64_t offset = 0;    // where its frame went in the file
  uint32_t size = 0;      // the frame's bytes
  bool written = false;
};

// tensors: the candidates, in file order; bytes_of(i), enc(i): tensor i's
// original bytes and encoding. Members' chunks become kZstdGroup with an
// empty payload; (*group_of)[i] and (*group_off)[i]: tensor i's group and
// its offset in the group's decoded bytes.
static void make_zstd_groups(const SafetensorsHeader& hdr, const std::vector<size_t>& tensors,
                             const std::function<const uint8_t*(size_t)>& bytes_of,
                             const std::function<EncodedTensor&(size_t)>& enc, const EncodeOptions& opt,
                             std::vector<ZstdGroup>* groups, std::vector<int32_t>* group_of,
                             std::vector<uint64_t>* group_off) {
  std::map<DType, std::vector<size_t>> by_dtype;
  for (size_t i : tensors) {
    const EncodedTensor& e = enc(i);
    if (e.chunks.size() == 1 && e.chunks[0].method == ChunkMethod::kZstd &&
        e.chunks[0].decoded_size == hdr.tensors[i].nbytes() && hdr.tensors[i].nbytes() < kZstdGroupBytes)
      by_dtype[hdr.tensors[i].dtype].push_back(i);
  }
  auto flush = [&](std::vector<size_t>& members) {
    if (members.size() >= 2) {
      std::vector<uint8_t> cat;
      uint64_t apart = 0;
      for (size_t i : members) {
        cat.insert(cat.end(), bytes_of(i), bytes_of(i) + hdr.tensors[i].nbytes());
        apart += enc(i).chunks[0].payload.size();
      }
      std::vector<uint8_t> z = zstd_compress(cat.data(), cat.size(), std::min(opt.zstd_level, kZstdGroupLevel));
      if (!z.empty() && z.size() < apart) {
        const auto g = static_cast<int32_t>(groups->size());
        uint64_t off = 0;
        for (size_t i : members) {
          EncodedChunk& c = enc(i).chunks[0];
          c.method = ChunkMethod::kZstdGroup;
          std::vector<uint8_t>().swap(c.payload);
          (*group_of)[i] = g;
          (*group_off)[i] = off;
          off += hdr.tensors[i].nbytes();
        }
        groups->push_back(ZstdGroup{std::move(z), cat.size()});
      }
    }
    members.clear();
  };
  for (auto& [dtype, list] : by_dtype) {
    std::vector<size_t> members;
    uint64_t bytes = 0;
    for (size_t i : list) {
      const uint64_t n = hdr.tensors[i].nbytes();
      if (bytes + n > kZstdGroupBytes) {
        flush(members);
        bytes = 0;
      }
      members.push_back(i);
      bytes += n;
    }
    flush(members);
  }
}

Status add_order0_entropy(const uint8_t* data, size_t size, EncodeReport* report) {
  SafetensorsHeader hdr;
  if (size >= 4 && std::memcmp(data, "GGUF", 4) == 0) {
    WC_ASSIGN_OR_RETURN(GgufFile g, parse_gguf(data, size, size, "order-0 statistics"));
    hdr = gguf_tensor_layout(g, size);
  } else {
    WC_ASSIGN_OR_RETURN(hdr, parse_safetensors_header(data, size, size, "order-0 statistics"));
  }
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
    WC_RETURN_IF_ERROR(pread_exact(fd_, off, n, buf->data(), path_));
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
constexpr uint32_t kNoGgmlType = UINT32_MAX;

void encode_job(const EncodeInput& in, const SafetensorsHeader& hdr, size_t i, const EncodeOptions& opt,
                const std::string& what, uint32_t ggml_type, TableCoding coding, TensorJob* job) {
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
  // GGUF block-quantized tensors in bands of equal rows (make_geometry):
  // their chunks then decode in groups.
  EncodeOptions topt = opt;
  topt.equal_bands = ggml_type != kNoGgmlType && split_candidate(ggml_type);
  auto r = encode_tensor(t, job->bytes, make_aux(hdr, zi, group, zb), topt);
  if (!r.ok()) return fail(r.status());
  job->enc = std::move(r).value();
  if (ggml_type != kNoGgmlType && opt.split_models) try_split(ggml_type, job->bytes, topt, coding, &job->enc);
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
  std::vector<uint8_t> hbuf;
  const uint8_t* hp = nullptr;
  uint64_t hlen = std::min<uint64_t>(size, 8);
  WC_RETURN_IF_ERROR(in.get(0, hlen, &hbuf, &hp));
  // A GGUF source (§4.9): its header up to the data section is kept
  // verbatim, its tensors are encoded as gguf_tensor_layout lays them out,
  // and the padding between them must be zeros (the reader serves zeros
  // there).
  const bool gguf = hlen >= 4 && std::memcmp(hp, "GGUF", 4) == 0;
  SafetensorsHeader hdr;
  std::vector<uint32_t> ggml_types;  // a GGUF source's tensor types, in order
  auto ggml_of = [&](size_t i) { return i < ggml_types.size() ? ggml_types[i] : kNoGgmlType; };
  if (gguf) {
    hlen = std::min<uint64_t>(size, uint64_t{1} << 20);
    for (;;) {
      WC_RETURN_IF_ERROR(in.get(0, hlen, &hbuf, &hp));
      auto g = parse_gguf(hp, static_cast<size_t>(hlen), size, what);
      if (g.ok()) {
        hdr = gguf_tensor_layout(*g, size);
        for (const auto& gt : g->tensors) ggml_types.push_back(gt.type);
        break;
      }
      if (g.status().code() != Code::kOutOfRange || hlen == size) return g.status();
      hlen = std::min<uint64_t>(size, hlen * 4);
    }
    // Gaps: between tensors, and from the last one's end to the end of the file.
    std::vector<uint8_t> gbuf;
    const uint8_t* gp = nullptr;
    uint64_t pos = hdr.data_start;
    for (size_t i = 0; i <= hdr.tensors.size(); ++i) {
      const uint64_t to = i < hdr.tensors.size() ? hdr.data_start + hdr.tensors[i].begin : size;
      for (uint64_t at = pos; at < to;) {
        const uint64_t n = std::min<uint64_t>(to - at, uint64_t{1} << 20);
        WC_RETURN_IF_ERROR(in.get(at, n, &gbuf, &gp));
        for (uint64_t k = 0; k < n; ++k)
          if (gp[k] != 0)
            return Status::NotSupported(what + ": byte " + std::to_string(at + k) + " (0x" +
                                        "0123456789abcdef"[gp[k] >> 4] + "0123456789abcdef"[gp[k] & 15] +
                                        ") outside every tensor is not zero (GGUF padding that is not zero is not "
                                        "stored; the file stays as it is)");
        at += n;
      }
      if (i < hdr.tensors.size()) pos = hdr.data_start + hdr.tensors[i].end;
    }
    WC_RETURN_IF_ERROR(in.get(0, hdr.data_start, &hbuf, &hp));
  } else {
    // The header: 8 bytes of length, then the JSON (read as far as the
    // parser looks before it rejects an oversized one).
    if (hlen == 8) {
      hlen = std::min<uint64_t>(size, 8 + std::min<uint64_t>(load_u64le(hp), kMaxSafetensorsHeader));
      WC_RETURN_IF_ERROR(in.get(0, hlen, &hbuf, &hp));
    }
    WC_ASSIGN_OR_RETURN(hdr, parse_safetensors_header(hp, static_cast<size_t>(hlen), size, what));
  }
  const std::vector<uint8_t> orig_header(hp, hp + hdr.data_start);
  std::vector<uint8_t>().swap(hbuf);
  if (cfg.chunk_bytes < 4096 || cfg.chunk_bytes > kMaxChunkDecoded)
    return Status::Invalid("chunk size " + std::to_string(cfg.chunk_bytes) + " (allowed 4096.." +
                           std::to_string(kMaxChunkDecoded) + ")");
  if (!(cfg.min_model_gain >= 0 && cfg.min_model_gain < 1))
    return Status::Invalid("min_model_gain " + std::to_string(cfg.min_model_gain) + " (allowed 0 <= value < 1)");
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
  opt.split_models = cfg.split_models && cfg.format_major >= 2;
  opt.split_palette = cfg.split_palette;
  opt.split_recode = cfg.split_recode;
  opt.kernel_rows = cfg.kernel_rows;
  opt.x8_tables = cfg.x8_tables;
  opt.min_model_gain = cfg.min_model_gain;
  const TableCoding coding = cfg.format_major == 1 ? kTablesGamma : kTablesCompact;
  const int nthreads = std::max(1, std::min<int>(cfg.threads, static_cast<int>(std::max<size_t>(nt, 1))));
  // Progress: one call at a time, `done` increasing, the last call at the
  // total (a count taken outside the lock could be reported after a larger
  // one from another thread, and a progress bar would end short).
  std::mutex progress_mu;
  uint64_t done_bytes = 0;
  auto progress = [&](const TensorInfo& t) {
    std::lock_guard<std::mutex> lk(progress_mu);
    done_bytes += t.nbytes();
    if (cfg.progress) cfg.progress(done_bytes, hdr.data_len);
  };

  const bool zstd_groups = cfg.zstd_groups && cfg.format_major >= 2;
  // Where zstd groups may take the small tensors, their zstd chunks keep
  // level 1 until the groups are made (finish_zstd below).
  EncodeOptions small_opt = opt;
  small_opt.zstd_defer = zstd_groups;
  // Their symbol counts, for the shared-model trial (share_models).
  small_opt.keep_stats = true;
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
        encode_job(in, hdr, small[k], small_opt, what, ggml_of(small[k]), coding, &jobs[small[k]]);
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
    share_models(hdr, [&](size_t i) { return jobs[i].bytes; }, small_opt, &held);
    drop_unpaid_models(
        small, [&](size_t i) -> EncodedTensor& { return held[i]; }, [&](size_t i) { return jobs[i].bytes; }, small_opt,
        coding);
    for (size_t i : small) {
      held[i].stats.reset();  // counts are for the trial only
      jobs[i].enc = std::move(held[i]);
    }
  }
  std::vector<ZstdGroup> zgroups;
  std::vector<int32_t> zgroup_of(nt, -1);
  std::vector<uint64_t> zgroup_off(nt, 0);
  if (zstd_groups) {
    std::vector<size_t> in_order = small;
    std::sort(in_order.begin(), in_order.end());
    make_zstd_groups(
        hdr, in_order, [&](size_t i) { return jobs[i].bytes; },
        [&](size_t i) -> EncodedTensor& { return jobs[i].enc; }, opt, &zgroups, &zgroup_of, &zgroup_off);
    // The configured level for the deferred chunks that stayed apart.
    for (size_t i : small) finish_zstd(jobs[i].bytes, opt, &jobs[i].enc);
  }

  // Phase 2: every tensor in file order; the others are encoded by the
  // threads at most `window` tensors ahead of the output.
  BodyWriter out{sink};
  WC_RETURN_IF_ERROR(sink.append(std::vector<uint8_t>(kHeaderSize, 0).data(), kHeaderSize));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> sha_ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!sha_ctx || EVP_DigestInit_ex(sha_ctx.get(), EVP_sha256(), nullptr) != 1)
    return Status::Internal(what + ": cannot start a SHA-256 digest");
  EVP_DigestUpdate(sha_ctx.get(), orig_header.data(), orig_header.size());
  // Original bytes digested so far; gaps (GGUF padding, checked zero above)
  // are digested as zeros.
  uint64_t digested = orig_header.size();
  auto digest_zeros_to = [&](uint64_t to) {
    static const uint8_t zeros[4096] = {};
    while (digested < to) {
      const uint64_t n = std::min<uint64_t>(sizeof zeros, to - digested);
      EVP_DigestUpdate(sha_ctx.get(), zeros, n);
      digested += n;
    }
  };
  // The minor version is the lowest the file needs: 2.1 when a model uses
  // the column-phase ternary contexts, 2.2 when one uses the kernel
  // contexts, 2.3 when a float model codes joint symbols (so older readers
  // read the rest). It is known once every tensor is encoded: the metadata
  // goes out with minor 0 and is written again (same length) if it is not 0.
  uint16_t minor = gguf ? 4 : 0;
  auto meta_json = [&] {
    nlohmann::json meta = {{"format", "wcodec"},
                           {"version", std::to_string(cfg.format_major) + "." + std::to_string(minor)},
                           {"source_format", gguf ? "gguf" : "safetensors"},
                           {"encoder", std::string("wcodec ") + WCODEC_VERSION},
                           {"tensors", nt},
                           {"chunk_bytes", cfg.chunk_bytes}};
    return meta.dump();
  };
  const std::string meta0 = meta_json();
  const uint8_t* meta0_p = reinterpret_cast<const uint8_t*>(meta0.data());
  WC_RETURN_IF_ERROR(out.bytes(meta0_p, meta0.size()));
  // At least one byte of padding: the final metadata may say a two-digit
  // minor version ("2.10") where meta0 says "2.0".
  if (out.pos % kAlign == 0) {
    static const uint8_t zero = 0;
    WC_RETURN_IF_ERROR(out.bytes(&zero, 1));
  }
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
      encode_job(in, hdr, late[k], opt, what, ggml_of(late[k]), coding, &job);
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
      encode_job(in, hdr, i, opt, what, ggml_of(i), coding, &job);
      progress(hdr.tensors[i]);
    } else if (!early[i]) {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return jobs[i].done; });
    }
    WC_RETURN_IF_ERROR(job.status);
    if (!early[i])
      drop_unpaid_models(
          {i}, [&](size_t) -> EncodedTensor& { return job.enc; }, [&](size_t) { return job.bytes; }, opt, coding);
    digest_zeros_to(hdr.data_start + hdr.tensors[i].begin);
    EVP_DigestUpdate(sha_ctx.get(), job.bytes, hdr.tensors[i].nbytes());
    digested = hdr.data_start + hdr.tensors[i].end;
    crcs[i] = job.crc;
    if (job.enc.has_model && job.enc.model.kind == ModelKind::kInt && job.enc.model.ip.nbr_mode >= 2)
      minor = std::max<uint16_t>(minor, job.enc.model.ip.nbr_mode == 2 ? 1 : (job.enc.model.ip.nbr_mode == 4 ? 10 : 2));
    if (job.enc.has_model && job.enc.model.kind == ModelKind::kFloat && float_joint(job.enc.model.fp))
      minor = std::max<uint16_t>(minor, 3);
    if (job.enc.split) minor = std::max<uint16_t>(minor, job.enc.split->format_minor());
    for (auto& c : job.enc.chunks) {
      if (c.method == ChunkMethod::kZstdGroup) {
        // The group's frame goes out with its first member.
        ZstdGroup& g = zgroups[static_cast<size_t>(zgroup_of[i])];
        if (!g.written) {
          WC_RETURN_IF_ERROR(out.pad_to(16));
          g.offset = out.pos;
          g.size = static_cast<uint32_t>(g.frame.size());
          WC_RETURN_IF_ERROR(out.bytes(g.frame.data(), g.frame.size()));
          std::vector<uint8_t>().swap(g.frame);
          g.written = true;
          minor = std::max<uint16_t>(minor, 11);
        }
        offsets[i].push_back(g.offset);
        sizes[i].push_back(g.size);
        continue;
      }
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
  digest_zeros_to(size);
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
    // Level 9 (lazy matching). The optimal parsers (level 13 and up) make
    // the index 5-7% smaller, but at 5-7x the time, and on a small file the
    // index is a large part of the encode: on stories260K's int files level
    // 14 took 1.5-2.2 ms of 6-11 ms, a fifth of the encode, to save 200-380
    // bytes (0.06-0.16% of those files; 0.003-0.03% of isnet-medium's).
    const std::vector<uint8_t> z = zstd_compress(ix.buf().data(), ix.size(), kIndexZstdLevel);
    if (z.empty()) return Status::Internal(what + ": zstd failed on the index");
    const size_t zn = z.size();
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
  if (meta_s.size() < meta0.size() || kHeaderSize + meta_s.size() > meta_end)
    return Status::Internal(what + ": metadata outgrew its space");
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
    h.put_u32_at(8, gguf ? kFlagGgufSource : 0);  // flags
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
        if (m == ChunkMethod::kZstdGroup) {
          const ZstdGroup& g = zgroups[static_cast<size_t>(zgroup_of[i])];
          s.stored_bytes += zstd_group_share(sizes[i][k], zgroup_off[i], e.chunks[k].decoded_size, g.decoded);
        } else {
          s.stored_bytes += sizes[i][k];
        }
        (m == ChunkMethod::kModel                                    ? s.chunks_model
         : m == ChunkMethod::kZstd || m == ChunkMethod::kZstdGroup ? s.chunks_zstd
                                                                     : s.chunks_raw)++;
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

}  // namespace wcodec
