// wcodec/cawsf.h — the CAWSF container (.cawsf: NDSQ-decomposed weights):
// constants, a strict reader, a writer and the reconstruction arithmetic.
//
// Format: docs/cawsf-format.md (byte tables, rules, annotated vectors).
// Version 1 is the layout of the reference converter (dense fp16 L and D, the
// whole shard bank compressed as one frame); version 2 is ours (L as fp16
// factors, D as its diagonal, every tensor kept with its name, dtype and
// shape, shards compressed one by one so one tensor is rebuilt alone, the
// TOC and META covered by a hash in the header). The reader reads both; a
// version 1 file is rebuilt with the reference's arithmetic.
//
// Every rejection names the file, the field, the value and the allowed range.
// Stored bytes are checked against META's checksum index before they are
// used: a version 1 shard bank as a whole when the file is opened, a
// version 2 shard's 1 MiB chunks when the shard is first read.
// Thread-safety: a CawsfFile is immutable after open() except for its
// verified-chunk flags (atomics); all const methods may be called from any
// number of threads at once. Free functions are pure.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "wcodec/safetensors.h"
#include "wcodec/status.h"

namespace wcodec::cawsf {

// ---------------------------------------------------------------- constants
// (docs/cawsf-format.md §2-§6; shared by reader and writer)
inline constexpr uint8_t kMagic[8] = {'C', 'A', 'W', 'S', 'F', 0, 0, 0};
inline constexpr size_t kHeaderSize = 20;       // magic, version, section count, reserved
inline constexpr size_t kTocEntrySize = 24;     // type u32, offset u64, size u64, flags u32
inline constexpr uint64_t kSectionAlign = 4096;  // every section starts at a multiple
inline constexpr uint32_t kMaxSections = 16;
inline constexpr uint64_t kChecksumChunk = 1 << 20;         // what the writers use
inline constexpr uint64_t kMaxMetaBytes = 64ull << 20;      // uncompressed META
inline constexpr uint64_t kMaxSectionBytes = 64ull << 30;   // uncompressed section
inline constexpr uint64_t kMaxShardBytes = 4ull << 30;      // uncompressed shard payload (u32)
inline constexpr size_t kShardHeaderSize = 12;

enum SectionType : uint32_t { kMeta = 1, kCodebooks = 2, kShardBank = 3, kRouting = 4 };
inline constexpr uint32_t kFlagZstd = 1u << 0;  // section stored as one zstd frame
inline constexpr uint32_t kFlagLz4 = 1u << 1;   // section stored as one LZ4 frame

enum ShardType : uint8_t { kShardL = 0, kShardR = 1, kShardS = 2, kShardD = 3, kShardRaw = 4 };
enum ShardComp : uint8_t { kCompNone = 0, kCompZstd = 1, kCompLz4 = 2 };
const char* shard_type_name(uint8_t t);  // "L", "R", "S", "D", "RAW", "?"

// ---------------------------------------------------------------- structures
struct TocEntry {
  uint32_t type = 0;
  uint64_t offset = 0;
  uint64_t size = 0;  // stored (possibly compressed) bytes
  uint32_t flags = 0;
};

struct ChecksumIndex {
  uint64_t chunk_size = kChecksumChunk;
  std::vector<uint64_t> hashes;  // XXH3-64 (seed 0) of each chunk of the uncompressed section
};

struct ShardRecord {
  uint8_t type = 0;
  uint16_t scope = 0;
  uint8_t comp = 0;
  uint32_t usize = 0;
  uint32_t csize = 0;
  uint64_t header_offset = 0;  // of the 12-byte header, within the uncompressed shard bank
  uint64_t payload_offset() const { return header_offset + kShardHeaderSize; }
};

struct Codebook {
  uint16_t id = 0, d = 0, m = 0, k = 0;
  std::vector<float> data;  // [m][k][d/m] as stored
};

struct Routing {
  uint16_t dim = 0;
  std::vector<uint32_t> shard_ids;
  std::vector<float> costs;
  std::vector<float> keys;  // n × dim, re-normalized on read as the reference does
};

// One tensor of the checkpoint. Version 2: from META "tensors". Version 1:
// one per scope of the shard bank (F32 [rows, cols]; the name from META
// "layers" when it lists the scope, else "scope_N").
struct TensorEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;
  uint16_t scope = 0;
  bool raw = false;  // stored as it is (a kShardRaw shard); else decomposed
  uint32_t rows = 0, cols = 0;  // of the decomposed matrix (raw: 0)
  std::vector<uint32_t> shards;  // indices into shards(), in bank order
  uint64_t nbytes() const;       // bytes in its dtype
};

// A decoded decomposed matrix: W ≈ L + D + ΣR + S. Everything a row band
// needs, decoded once.
struct Components {
  uint32_t rows = 0, cols = 0;
  // L: dense (version 1) or factors (version 2: Σ_t a[i·rank+t]·b[j·rank+t]).
  std::vector<float> l_dense;  // rows×cols or empty
  uint32_t rank = 0;
  std::vector<float> l_a, l_b;
  // D: dense (version 1) or its diagonal (version 2).
  std::vector<float> d_dense;
  std::vector<float> d_diag;
  struct Pq {
    uint32_t d = 0, m = 0, k = 0, n = 0;
    std::vector<float> codebook;  // [m][k][d/m]
    std::vector<uint8_t> codes;   // n × m
  };
  std::vector<Pq> r;
  std::vector<uint32_t> s_row, s_col;
  std::vector<float> s_val;
};

// Rows [row0, row1) of the dense matrix, row-major, with the reference's
// arithmetic: zero, + L, + D, + each R in bank order, + each S entry in order
// (float32 adds). REQUIRES row0 ≤ row1 ≤ c.rows.
std::vector<float> densify_rows(const Components& c, uint32_t row0, uint32_t row1);
// y = W·x from the components, never forming W. REQUIRES x.size() == c.cols.
std::vector<float> apply_components(const Components& c, const std::vector<float>& x);

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);  // round to nearest even
uint16_t float_to_bf16(float f);  // round to nearest even

// ---------------------------------------------------------------- the reader
class CawsfFile {
 public:
  // Opens and validates a file: header, TOC, META, checksum index,
  // CODEBOOKS, ROUTING, the shard bank's index (version 1: the whole bank,
  // checked against its checksums). `what` names it in messages.
  static Result<std::shared_ptr<CawsfFile>> open(const std::string& path);
  static Result<std::shared_ptr<CawsfFile>> from_memory(std::vector<uint8_t> bytes, const std::string& what);
  // Like open() on a descriptor the caller keeps (it is duplicated).
  static Result<std::shared_ptr<CawsfFile>> open_fd(int fd, const std::string& what);
  ~CawsfFile();
  CawsfFile(const CawsfFile&) = delete;
  CawsfFile& operator=(const CawsfFile&) = delete;

  const std::string& what() const { return what_; }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return file_size_; }
  const std::vector<TocEntry>& toc() const { return toc_; }
  const std::string& meta_json() const { return meta_json_; }
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  const std::vector<ShardRecord>& shards() const { return shards_; }
  const std::map<uint16_t, Codebook>& codebooks() const { return codebooks_; }
  const Routing& routing() const { return routing_; }
  const std::map<uint32_t, ChecksumIndex>& checksums() const { return checksums_; }
  const TocEntry* section(uint32_t type) const;

  // The uncompressed bytes of a section (not checked against checksums).
  Result<std::vector<uint8_t>> section_bytes(uint32_t type) const;
  // Checks every chunk of every checksummed section. On a mismatch: kCorruption
  // naming the section and the chunk.
  Status verify() const;
  // The decompressed payload of shard i, its stored bytes checked first.
  Result<std::vector<uint8_t>> shard_payload(size_t i) const;
  // The components of a decomposed tensor (index into tensors()).
  Result<Components> components(size_t tensor) const;
  // The tensor's bytes in its dtype (raw: as stored; decomposed: the dense
  // reconstruction converted to its dtype, F32/F16/BF16/F64).
  Result<std::vector<uint8_t>> tensor_bytes(size_t tensor) const;
  // Bytes [off, off + n) of a stored (raw) tensor; an uncompressed shard of
  // a stored bank is read in place (its chunks checked), others decompressed.
  Status raw_range(size_t tensor, uint64_t off, uint64_t n, uint8_t* out) const;
  // Rows [row0, row1) of a decomposed tensor as float32.
  Result<std::vector<float>> tensor_rows(size_t tensor, uint32_t row0, uint32_t row1) const;

 private:
  CawsfFile() = default;
  Status read_at(uint64_t off, uint64_t n, uint8_t* out) const;
  Status load(uint64_t file_size);
  Status parse_meta();
  Status load_bank();
  Status check_bank_chunks(uint64_t begin, uint64_t end) const;
  Status build_tensors();

  std::string what_;
  int fd_ = -1;
  std::vector<uint8_t> mem_;  // from_memory
  uint64_t file_size_ = 0;
  uint32_t version_ = 0;
  uint32_t header_check_ = 0;
  std::vector<TocEntry> toc_;
  std::string meta_json_;
  std::map<uint32_t, ChecksumIndex> checksums_;
  std::map<uint16_t, Codebook> codebooks_;
  Routing routing_;
  std::vector<ShardRecord> shards_;
  std::vector<TensorEntry> tensors_;
  // The uncompressed shard bank when it is held in memory (version 1, or a
  // compressed bank); empty when shards are read from the file (version 2).
  std::vector<uint8_t> bank_;
  bool bank_in_memory_ = false;
  uint64_t bank_offset_ = 0;  // file offset of a stored-raw bank
  uint64_t bank_size_ = 0;    // uncompressed bank bytes
  std::unique_ptr<std::atomic<uint8_t>[]> chunk_ok_;  // per bank chunk: verified
  std::string meta_bank_headers_hex_;                 // version 2: XXH3 of all shard headers
};

// ---------------------------------------------------------------- the writer
// The shards of one tensor as the converter produces them (payloads
// uncompressed; the writer compresses each).
struct ShardOut {
  uint8_t type = 0;
  std::vector<uint8_t> payload;
};
struct TensorOut {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;
  bool raw = false;
  uint32_t rows = 0, cols = 0;
  std::vector<ShardOut> shards;
  double rel_error = -1;  // recorded in META when ≥ 0 (the converter's measurement)
};
struct WriteOptions {
  uint8_t shard_comp = kCompZstd;  // per shard
  int zstd_level = 3;
  uint32_t routing_dim = 64;
  std::string extra_meta_json = "{}";  // an object merged into META (converter settings)
};
// Writes a version 2 file. R shards embed their codebooks in the input; the
// writer moves them into CODEBOOKS (deduplicated) as the reference does.
// `stored_bytes` (optional) receives each tensor's stored payload bytes (its
// codebooks' bytes included).
Status write_v2(const std::string& path, const std::vector<TensorOut>& tensors, const WriteOptions& opt,
                std::vector<uint64_t>* stored_bytes = nullptr);

// Payload builders (docs/cawsf-format.md §5), little-endian.
std::vector<uint8_t> payload_l_factors(uint32_t rows, uint32_t cols, uint32_t rank, const std::vector<float>& a,
                                       const std::vector<float>& b);
std::vector<uint8_t> payload_d_diag(uint32_t rows, uint32_t cols, const std::vector<float>& diag);
std::vector<uint8_t> payload_r_embedded(uint32_t rows, uint32_t cols, const Components::Pq& pq);
std::vector<uint8_t> payload_s(uint32_t rows, uint32_t cols, const std::vector<uint32_t>& r,
                               const std::vector<uint32_t>& c, const std::vector<float>& v);

// ---------------------------------------------------------------- routing
// The reference router: hashed bag-of-words prompt key (XXH3-64 of each
// whitespace-separated token mod dim, L2-normalized), cosine against each
// shard key, ranked by selection sort (descending, first maximum wins), then
// the first k whose costs fit the budget (budget ≤ 0: no budget).
struct RouteHit {
  uint32_t shard_id = 0;
  float cost = 0;
  double similarity = 0;
};
std::vector<float> prompt_key(const std::string& prompt, uint32_t dim);
std::vector<RouteHit> route(const Routing& r, const std::string& prompt, size_t k, double budget);

}  // namespace wcodec::cawsf
