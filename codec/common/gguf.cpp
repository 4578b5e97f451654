// codec/common/gguf.cpp — GGUF header parsing, validation and writing (see
// wcodec/gguf.h; the rules, and where each comes from, in docs/gguf.md).
//
// The parser walks the header with a bounded cursor over the caller's
// prefix: every count is checked against the bytes that remain before
// anything is allocated for it, so a hostile count cannot make it allocate
// more than the file could describe. Reaching the end of the prefix before
// the end of the file is reported as "need more header bytes" (kOutOfRange)
// so that read_gguf_file can grow its buffer; reaching the end of the file
// is a rejection naming the field being read.
// Thread-safety: pure functions; no shared state.
#include "wcodec/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_set>
#include <utility>

#include "file_read.h"

namespace wcodec {

namespace {

constexpr GgmlTypeInfo kNoType{nullptr, 0, 0};
// enum ggml_type, by value. Removed values keep a null name.
constexpr GgmlTypeInfo kGgmlTypes[] = {
    {"F32", 1, 4},        {"F16", 1, 2},      {"Q4_0", 32, 18},    {"Q4_1", 32, 20},   kNoType,
    kNoType,              {"Q5_0", 32, 22},   {"Q5_1", 32, 24},    {"Q8_0", 32, 34},   {"Q8_1", 32, 36},
    {"Q2_K", 256, 84},    {"Q3_K", 256, 110}, {"Q4_K", 256, 144},  {"Q5_K", 256, 176}, {"Q6_K", 256, 210},
    {"Q8_K", 256, 292},   {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74}, {"IQ3_XXS", 256, 98}, {"IQ1_S", 256, 50},
    {"IQ4_NL", 32, 18},   {"IQ3_S", 256, 110}, {"IQ2_S", 256, 82},  {"IQ4_XS", 256, 136}, {"I8", 1, 1},
    {"I16", 1, 2},        {"I32", 1, 4},      {"I64", 1, 8},       {"F64", 1, 8},      {"IQ1_M", 256, 56},
    {"BF16", 1, 2},       kNoType,            kNoType,             kNoType,            {"TQ1_0", 256, 54},
    {"TQ2_0", 256, 66},   kNoType,            kNoType,             kNoType,            {"MXFP4", 32, 17},
    {"NVFP4", 64, 36},    {"Q1_0", 128, 18},  {"Q2_0", 64, 18},
};
constexpr uint32_t kGgmlTypeCount = static_cast<uint32_t>(std::size(kGgmlTypes));

constexpr const char* kTypeNames[kGgufTypeCount] = {"u8",   "i8",  "u16", "i16", "u32", "i32", "f32",
                                                    "bool", "str", "arr", "u64", "i64", "f64"};
constexpr size_t kTypeSizes[kGgufTypeCount] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

// A bounded little-endian cursor over the prefix of a file.
class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n, uint64_t file_size, const std::string& what)
      : p_(p), n_(n), file_size_(file_size), what_(what) {}

  uint64_t pos() const { return pos_; }
  // Bytes of the file after the cursor.
  uint64_t file_left() const { return file_size_ - pos_; }

  // Makes sure `k` more bytes are readable; `field` names what is read.
  Status need(uint64_t k, const std::string& field) {
    if (k > file_size_ - pos_)
      return Status::Corruption(what_ + ": " + field + ": needs " + std::to_string(k) + " bytes at offset " +
                                std::to_string(pos_) + ", the file ends at " + std::to_string(file_size_));
    if (k > n_ - pos_)
      return Status::OutOfRange("need more header bytes: " + what_ + ": " + field + " at offset " +
                                std::to_string(pos_));
    return Status::OK();
  }
  template <class T>
  Status read(T* v, const std::string& field) {
    WC_RETURN_IF_ERROR(need(sizeof(T), field));
    uint64_t x = 0;
    for (size_t i = 0; i < sizeof(T); ++i) x |= uint64_t{p_[pos_ + i]} << (8 * i);
    pos_ += sizeof(T);
    std::memcpy(v, &x, sizeof(T));  // little-endian hosts (the codec requires them)
    return Status::OK();
  }
  Status bytes(uint64_t k, const std::string& field, const uint8_t** out) {
    WC_RETURN_IF_ERROR(need(k, field));
    *out = p_ + pos_;
    pos_ += k;
    return Status::OK();
  }
  // A gguf string: u64 length, then the bytes.
  Status string(std::string* s, const std::string& field) {
    uint64_t len = 0;
    WC_RETURN_IF_ERROR(read(&len, field + " length"));
    if (len > kGgufMaxString)
      return Status::Corruption(what_ + ": " + field + ": length " + std::to_string(len) + " exceeds the limit " +
                                std::to_string(kGgufMaxString));
    const uint8_t* b = nullptr;
    WC_RETURN_IF_ERROR(bytes(len, field, &b));
    s->assign(reinterpret_cast<const char*>(b), static_cast<size_t>(len));
    return Status::OK();
  }

 private:
  const uint8_t* p_;
  uint64_t n_;
  uint64_t file_size_;
  uint64_t pos_ = 0;
  const std::string& what_;
};

// Printable form of a name for messages (control bytes escaped, long names cut).
std::string shown(std::string_view s) {
  std::string o;
  for (size_t i = 0; i < s.size() && i < 80; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != 0x7f && c != '\'' && c != '\\') {
      o += static_cast<char>(c);
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      o += b;
    }
  }
  if (s.size() > 80) o += "...";
  return "'" + o + "'";
}

uint64_t pad_to(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

Status read_value(Cursor& c, GgufType type, bool is_array, uint64_t n, const std::string& field, GgufValue* v) {
  v->type = type;
  v->is_array = is_array;
  if (type == GgufType::kString) {
    // Every string takes at least its 8-byte length.
    if (n > c.file_left() / 8)
      return Status::Corruption(field + ": " + std::to_string(n) + " strings cannot fit in the " +
                                std::to_string(c.file_left()) + " bytes left");
    v->strings.resize(static_cast<size_t>(n));
    for (uint64_t i = 0; i < n; ++i)
      WC_RETURN_IF_ERROR(c.string(&v->strings[i], is_array ? field + " element " + std::to_string(i) : field));
    return Status::OK();
  }
  const size_t es = gguf_type_size(type);
  if (n > c.file_left() / es)
    return Status::Corruption(field + ": " + std::to_string(n) + " elements of " + std::to_string(es) +
                              " bytes cannot fit in the " + std::to_string(c.file_left()) + " bytes left");
  const uint8_t* b = nullptr;
  WC_RETURN_IF_ERROR(c.bytes(n * es, field, &b));
  v->bytes.assign(b, b + n * es);
  return Status::OK();
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  const auto i = static_cast<uint32_t>(t);
  return i < kGgufTypeCount ? kTypeNames[i] : "?";
}

size_t gguf_type_size(GgufType t) {
  const auto i = static_cast<uint32_t>(t);
  return i < kGgufTypeCount ? kTypeSizes[i] : 0;
}

const GgmlTypeInfo* ggml_type_info(uint32_t type) {
  if (type >= kGgmlTypeCount || !kGgmlTypes[type].name) return nullptr;
  return &kGgmlTypes[type];
}

uint64_t GgufValue::count() const {
  if (type == GgufType::kString) return strings.size();
  const size_t es = gguf_type_size(type);
  return es ? bytes.size() / es : 0;
}

namespace {
template <class T>
GgufValue scalar(GgufType t, T v) {
  GgufValue g;
  g.type = t;
  g.bytes.resize(sizeof(T));
  std::memcpy(g.bytes.data(), &v, sizeof(T));
  return g;
}
template <class T>
GgufValue array(GgufType t, const std::vector<T>& v) {
  GgufValue g;
  g.type = t;
  g.is_array = true;
  g.bytes.resize(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(g.bytes.data(), v.data(), g.bytes.size());
  return g;
}
}  // namespace

GgufValue GgufValue::u8(uint8_t v) { return scalar(GgufType::kU8, v); }
GgufValue GgufValue::i32(int32_t v) { return scalar(GgufType::kI32, v); }
GgufValue GgufValue::u32(uint32_t v) { return scalar(GgufType::kU32, v); }
GgufValue GgufValue::u64(uint64_t v) { return scalar(GgufType::kU64, v); }
GgufValue GgufValue::f32(float v) { return scalar(GgufType::kF32, v); }
GgufValue GgufValue::boolean(bool v) { return scalar(GgufType::kBool, static_cast<uint8_t>(v ? 1 : 0)); }
GgufValue GgufValue::str(std::string v) {
  GgufValue g;
  g.type = GgufType::kString;
  g.strings.push_back(std::move(v));
  return g;
}
GgufValue GgufValue::str_array(std::vector<std::string> v) {
  GgufValue g;
  g.type = GgufType::kString;
  g.is_array = true;
  g.strings = std::move(v);
  return g;
}
GgufValue GgufValue::i32_array(const std::vector<int32_t>& v) { return array(GgufType::kI32, v); }
GgufValue GgufValue::f32_array(const std::vector<float>& v) { return array(GgufType::kF32, v); }

bool GgufValue::get_u32(uint32_t* out, uint64_t i) const {
  if (type != GgufType::kU32 || i >= count()) return false;
  std::memcpy(out, bytes.data() + 4 * i, 4);
  return true;
}

bool GgufValue::get_u64(uint64_t* out, uint64_t i) const {
  if (i >= count()) return false;
  const size_t es = gguf_type_size(type);
  const uint8_t* b = bytes.data() + es * i;
  uint64_t u = 0;
  int64_t s = 0;
  switch (type) {
    case GgufType::kU8: u = b[0]; break;
    case GgufType::kU16: std::memcpy(&u, b, 2); break;
    case GgufType::kU32: std::memcpy(&u, b, 4); break;
    case GgufType::kU64: std::memcpy(&u, b, 8); break;
    case GgufType::kI8: s = static_cast<int8_t>(b[0]); break;
    case GgufType::kI16: { int16_t v; std::memcpy(&v, b, 2); s = v; break; }
    case GgufType::kI32: { int32_t v; std::memcpy(&v, b, 4); s = v; break; }
    case GgufType::kI64: std::memcpy(&s, b, 8); break;
    default: return false;
  }
  if (s < 0) return false;
  *out = u | static_cast<uint64_t>(s);
  return true;
}

bool GgufValue::get_string(std::string* out, uint64_t i) const {
  if (type != GgufType::kString || i >= strings.size()) return false;
  *out = strings[i];
  return true;
}

uint64_t GgufTensor::nelements() const {
  uint64_t n = 1;
  for (uint32_t j = 0; j < kGgmlMaxDims; ++j) n *= static_cast<uint64_t>(ne[j]);
  return n;
}

const GgufKv* GgufFile::find(std::string_view key) const {
  for (const auto& p : kv)
    if (p.key == key) return &p;
  return nullptr;
}

Status ggml_tensor_nbytes(uint32_t type, const int64_t* ne_in, uint32_t n_dims, const std::string& what,
                          uint64_t* nbytes) {
  if (n_dims > kGgmlMaxDims)
    return Status::Corruption(what + ": n_dims " + std::to_string(n_dims) + " exceeds " +
                              std::to_string(kGgmlMaxDims));
  int64_t ne[kGgmlMaxDims] = {1, 1, 1, 1};
  for (uint32_t j = 0; j < n_dims; ++j) {
    ne[j] = ne_in[j];
    if (ne[j] < 0)
      return Status::Corruption(what + ": ne[" + std::to_string(j) + "] = " + std::to_string(ne[j]) +
                                " is negative");
  }
  const GgmlTypeInfo* ti = ggml_type_info(type);
  if (!ti)
    return Status::Corruption(what + ": ggml type " + std::to_string(type) +
                              " is unknown or removed (known: 0..3, 6..30, 34, 35, 39..42)");
  // llama.cpp: the element count must stay below INT64_MAX, dimension by
  // dimension.
  const bool empty = ne[0] == 0 || ne[1] == 0 || ne[2] == 0 || ne[3] == 0;
  if (!empty) {
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    if (kMax / ne[1] <= ne[0] || kMax / ne[2] <= ne[0] * ne[1] || kMax / ne[3] <= ne[0] * ne[1] * ne[2])
      return Status::Corruption(what + ": shape (" + std::to_string(ne[0]) + ", " + std::to_string(ne[1]) + ", " +
                                std::to_string(ne[2]) + ", " + std::to_string(ne[3]) +
                                ") has 2^63 or more elements");
  }
  if (ne[0] % ti->block != 0)
    return Status::Corruption(what + ": ne[0] = " + std::to_string(ne[0]) + " is not a multiple of the " +
                              ti->name + " block size " + std::to_string(ti->block));
  const uint64_t blocks = empty ? 0 : static_cast<uint64_t>(ne[0] * ne[1] * ne[2] * ne[3]) / ti->block;
  if (blocks > std::numeric_limits<uint64_t>::max() / 2 / ti->type_size)
    return Status::Corruption(what + ": size in bytes of " + std::to_string(blocks) + " " + ti->name +
                              " blocks overflows");
  *nbytes = blocks * ti->type_size;
  return Status::OK();
}

Result<GgufFile> parse_gguf(const uint8_t* prefix, size_t prefix_len, uint64_t file_size, const std::string& what) {
  if (prefix_len > file_size) return Status::Invalid(what + ": prefix longer than the file");
  Cursor c(prefix, prefix_len, file_size, what);
  GgufFile f;
  {
    const uint8_t* m = nullptr;
    if (file_size < 4) return Status::Corruption(what + ": not a GGUF file: " + std::to_string(file_size) + " bytes");
    WC_RETURN_IF_ERROR(c.bytes(4, "magic", &m));
    if (std::memcmp(m, "GGUF", 4) != 0)
      return Status::Corruption(what + ": not a GGUF file: magic " +
                                shown(std::string_view(reinterpret_cast<const char*>(m), 4)) + " (expected 'GGUF')");
  }
  WC_RETURN_IF_ERROR(c.read(&f.version, "version"));
  if (f.version == 0 || f.version == 1 || f.version > kGgufVersion) {
    std::string why = f.version == 1 ? " (GGUF v1 is no longer read by llama.cpp)"
                      : (f.version & 0xFFFF) == 0
                          ? " (a big-endian file? only little-endian GGUF is read)"
                          : "";
    return Status::Corruption(what + ": version " + std::to_string(f.version) + " (allowed 2, 3)" + why);
  }
  int64_t n_tensors = 0, n_kv = 0;
  WC_RETURN_IF_ERROR(c.read(&n_tensors, "tensor count"));
  WC_RETURN_IF_ERROR(c.read(&n_kv, "key/value count"));
  // A pair takes at least 8 (key length) + 1 (key) + 4 (type) + 1 bytes, a
  // tensor info 8 + 4 + 4 + 8 bytes (before checking anything else).
  if (n_tensors < 0 || static_cast<uint64_t>(n_tensors) > file_size / 24)
    return Status::Corruption(what + ": tensor count " + std::to_string(n_tensors) + " (allowed 0.." +
                              std::to_string(file_size / 24) + " for a file of " + std::to_string(file_size) +
                              " bytes)");
  if (n_kv < 0 || static_cast<uint64_t>(n_kv) > file_size / 14)
    return Status::Corruption(what + ": key/value count " + std::to_string(n_kv) + " (allowed 0.." +
                              std::to_string(file_size / 14) + " for a file of " + std::to_string(file_size) +
                              " bytes)");

  std::unordered_set<std::string> keys;
  f.kv.reserve(static_cast<size_t>(n_kv));
  for (int64_t i = 0; i < n_kv; ++i) {
    const std::string field = "key " + std::to_string(i);
    GgufKv p;
    WC_RETURN_IF_ERROR(c.string(&p.key, field));
    if (p.key.empty()) return Status::Corruption(what + ": " + field + " is empty");
    const std::string kf = what + ": key " + shown(p.key);
    if (!keys.insert(p.key).second) return Status::Corruption(kf + " appears twice");
    uint32_t type = 0;
    WC_RETURN_IF_ERROR(c.read(&type, kf + " type"));
    bool is_array = false;
    uint64_t n = 1;
    if (type == static_cast<uint32_t>(GgufType::kArray)) {
      is_array = true;
      WC_RETURN_IF_ERROR(c.read(&type, kf + " array element type"));
      if (type == static_cast<uint32_t>(GgufType::kArray))
        return Status::Corruption(kf + ": array of arrays (not read by llama.cpp)");
      WC_RETURN_IF_ERROR(c.read(&n, kf + " array length"));
      if (n > kGgufMaxArray)
        return Status::Corruption(kf + ": array length " + std::to_string(n) + " exceeds the limit " +
                                  std::to_string(kGgufMaxArray));
    }
    if (type >= kGgufTypeCount)
      return Status::Corruption(kf + ": type " + std::to_string(type) + " (allowed 0..12)");
    WC_RETURN_IF_ERROR(read_value(c, static_cast<GgufType>(type), is_array, n, kf + " value", &p.value));
    f.kv.push_back(std::move(p));
  }
  if (const GgufKv* a = f.find("general.alignment")) {
    if (a->value.is_array || a->value.type != GgufType::kU32)
      return Status::Corruption(what + ": key 'general.alignment' has type " +
                                std::string(a->value.is_array ? "arr of " : "") + gguf_type_name(a->value.type) +
                                " (must be u32)");
    a->value.get_u32(&f.alignment);
    if (f.alignment == 0 || (f.alignment & (f.alignment - 1)) != 0)
      return Status::Corruption(what + ": general.alignment " + std::to_string(f.alignment) +
                                " is not a power of 2");
  }

  std::unordered_set<std::string> names;
  f.tensors.reserve(static_cast<size_t>(n_tensors));
  uint64_t expect = 0;  // running padded sum
  for (int64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    WC_RETURN_IF_ERROR(c.string(&t.name, "tensor " + std::to_string(i) + " name"));
    const std::string tf = what + ": tensor " + std::to_string(i) + " " + shown(t.name);
    if (t.name.size() >= kGgmlMaxName)
      return Status::Corruption(tf + ": name length " + std::to_string(t.name.size()) + " (at most " +
                                std::to_string(kGgmlMaxName - 1) + ")");
    if (!names.insert(t.name).second) return Status::Corruption(tf + ": name appears twice");
    WC_RETURN_IF_ERROR(c.read(&t.n_dims, tf + " n_dims"));
    if (t.n_dims > kGgmlMaxDims)
      return Status::Corruption(tf + ": n_dims " + std::to_string(t.n_dims) + " (allowed 0.." +
                                std::to_string(kGgmlMaxDims) + ")");
    for (uint32_t j = 0; j < t.n_dims; ++j) WC_RETURN_IF_ERROR(c.read(&t.ne[j], tf + " ne[" + std::to_string(j) + "]"));
    WC_RETURN_IF_ERROR(c.read(&t.type, tf + " type"));
    WC_RETURN_IF_ERROR(ggml_tensor_nbytes(t.type, t.ne, t.n_dims, tf, &t.nbytes));
    WC_RETURN_IF_ERROR(c.read(&t.offset, tf + " offset"));
    if (t.offset != expect)
      return Status::Corruption(tf + ": offset " + std::to_string(t.offset) + " (expected " + std::to_string(expect) +
                                ", the padded sizes of the tensors before it)");
    const uint64_t padded = pad_to(t.nbytes, f.alignment);
    if (padded < t.nbytes || std::numeric_limits<uint64_t>::max() - expect < padded)
      return Status::Corruption(tf + ": data section size overflows");
    expect += padded;
    f.tensors.push_back(std::move(t));
  }
  f.info_end = c.pos();
  f.data_offset = f.tensors.empty() ? f.info_end : pad_to(f.info_end, f.alignment);
  f.data_size = expect;
  if (f.data_offset > file_size)
    return Status::Corruption(what + ": data section starts at " + std::to_string(f.data_offset) +
                              ", past the end of the file (" + std::to_string(file_size) + " bytes)");
  for (const GgufTensor& t : f.tensors)
    if (t.offset + t.nbytes > file_size - f.data_offset)
      return Status::Corruption(what + ": tensor " + shown(t.name) + ": data [" +
                                std::to_string(f.data_offset + t.offset) + ", " +
                                std::to_string(f.data_offset + t.offset + t.nbytes) + ") ends past the end of the file (" +
                                std::to_string(file_size) + " bytes)");
  return f;
}

Result<GgufFile> read_gguf_file(const std::string& path) {
  WC_ASSIGN_OR_RETURN(const ReadFile f, ReadFile::open(path));
  const uint64_t size = f.size();
  std::vector<uint8_t> buf;
  uint64_t want = std::min<uint64_t>(size, uint64_t{1} << 20);
  for (;;) {
    const size_t have = buf.size();
    buf.resize(static_cast<size_t>(want));
    WC_RETURN_IF_ERROR(pread_exact(f.fd(), have, buf.size() - have, buf.data() + have, path));
    auto r = parse_gguf(buf.data(), buf.size(), size, path);
    if (r.ok() || r.status().code() != Code::kOutOfRange || want == size) return r;
    want = std::min<uint64_t>(size, want * 4);
  }
}

SafetensorsHeader gguf_tensor_layout(const GgufFile& f, uint64_t file_size) {
  SafetensorsHeader h;
  h.header_len = f.data_offset;
  h.data_start = f.data_offset;
  h.data_len = file_size - f.data_offset;
  for (const GgufTensor& t : f.tensors) {
    TensorInfo ti;
    ti.name = t.name;
    ti.begin = t.offset;
    ti.end = t.offset + t.nbytes;
    DType dt = DType::kU8;
    bool plain = true;
    switch (t.type) {
      case kGgmlTypeF32: dt = DType::kF32; break;
      case kGgmlTypeF16: dt = DType::kF16; break;
      case kGgmlTypeBF16: dt = DType::kBF16; break;
      case 24: dt = DType::kI8; break;
      case 25: dt = DType::kI16; break;
      case 26: dt = DType::kI32; break;
      case 27: dt = DType::kI64; break;
      case 28: dt = DType::kF64; break;
      default: plain = false;
    }
    ti.dtype = dt;
    if (plain) {
      for (uint32_t d = t.n_dims; d-- > 0;) ti.shape.push_back(static_cast<uint64_t>(t.ne[d]));
    } else {
      const GgmlTypeInfo* info = ggml_type_info(t.type);
      const uint64_t row = static_cast<uint64_t>(t.ne[0]) / info->block * info->type_size;
      const uint64_t rows = static_cast<uint64_t>(t.ne[1]) * static_cast<uint64_t>(t.ne[2]) *
                            static_cast<uint64_t>(t.ne[3]);
      if (t.n_dims > 1) ti.shape.push_back(rows);
      ti.shape.push_back(t.n_dims > 1 ? row : t.nbytes);
    }
    h.tensors.push_back(std::move(ti));
  }
  return h;
}

namespace {
void put(std::vector<uint8_t>& o, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  o.insert(o.end(), b, b + n);
}
template <class T>
void put_le(std::vector<uint8_t>& o, T v) {
  put(o, &v, sizeof v);  // little-endian hosts
}
void put_str(std::vector<uint8_t>& o, const std::string& s) {
  put_le<uint64_t>(o, s.size());
  put(o, s.data(), s.size());
}
}  // namespace

Result<std::vector<uint8_t>> write_gguf_header(const GgufFile& f) {
  const std::string what = "GGUF writer";
  if (f.version < 2 || f.version > kGgufVersion)
    return Status::Invalid(what + ": version " + std::to_string(f.version) + " (allowed 2, 3)");
  std::vector<uint8_t> o;
  put(o, "GGUF", 4);
  put_le<uint32_t>(o, f.version);
  put_le<int64_t>(o, static_cast<int64_t>(f.tensors.size()));
  put_le<int64_t>(o, static_cast<int64_t>(f.kv.size()));
  for (const GgufKv& p : f.kv) {
    const GgufValue& v = p.value;
    if (p.key.empty()) return Status::Invalid(what + ": empty key");
    if (static_cast<uint32_t>(v.type) >= kGgufTypeCount || v.type == GgufType::kArray)
      return Status::Invalid(what + ": key " + shown(p.key) + ": element type " +
                             std::to_string(static_cast<uint32_t>(v.type)));
    const size_t es = gguf_type_size(v.type);
    if (v.type != GgufType::kString && (v.bytes.size() % es != 0 || (!v.is_array && v.bytes.size() != es)))
      return Status::Invalid(what + ": key " + shown(p.key) + ": " + std::to_string(v.bytes.size()) +
                             " value bytes for type " + gguf_type_name(v.type));
    if (v.type == GgufType::kString && !v.is_array && v.strings.size() != 1)
      return Status::Invalid(what + ": key " + shown(p.key) + ": " + std::to_string(v.strings.size()) +
                             " strings for a non-array");
    put_str(o, p.key);
    if (v.is_array) {
      put_le<uint32_t>(o, static_cast<uint32_t>(GgufType::kArray));
      put_le<uint32_t>(o, static_cast<uint32_t>(v.type));
      put_le<uint64_t>(o, v.count());
    } else {
      put_le<uint32_t>(o, static_cast<uint32_t>(v.type));
    }
    if (v.type == GgufType::kString)
      for (const auto& s : v.strings) put_str(o, s);
    else
      put(o, v.bytes.data(), v.bytes.size());
  }
  uint64_t off = 0;
  std::vector<uint64_t> sizes;
  for (const GgufTensor& t : f.tensors) {
    uint64_t nb = 0;
    WC_RETURN_IF_ERROR(ggml_tensor_nbytes(t.type, t.ne, t.n_dims, what + ": tensor " + shown(t.name), &nb));
    put_str(o, t.name);
    put_le<uint32_t>(o, t.n_dims);
    for (uint32_t j = 0; j < t.n_dims; ++j) put_le<int64_t>(o, t.ne[j]);
    put_le<uint32_t>(o, t.type);
    put_le<uint64_t>(o, off);
    sizes.push_back(nb);
    off += pad_to(nb, f.alignment ? f.alignment : 1);
  }
  const uint64_t info_end = o.size();
  if (!f.tensors.empty() && f.alignment) o.resize(static_cast<size_t>(pad_to(info_end, f.alignment)), 0);
  // Whatever the reader would reject (names, duplicates, alignment pair,
  // counts), the writer rejects: parse the result with a data section of
  // the right size behind it (never read).
  auto back = parse_gguf(o.data(), o.size(), o.size() + off, what);
  if (!back.ok()) return Status::Invalid(back.status().message());
  if (back->alignment != f.alignment)
    return Status::Invalid(what + ": alignment " + std::to_string(f.alignment) + " differs from general.alignment " +
                           std::to_string(back->alignment));
  return o;
}

}  // namespace wcodec
