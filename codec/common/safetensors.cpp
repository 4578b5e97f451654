// codec/common/safetensors.cpp — safetensors header parsing, validation and
// writing (see wcodec/safetensors.h).
//
// The JSON header is parsed with nlohmann's SAX interface into a fixed
// state machine (root object → tensor objects → shape/offset arrays), so a
// hostile header is rejected at the first token that does not fit and no
// generic DOM is ever built. Duplicate keys are detected there too.
// Thread-safety: pure functions; no shared state.
#include "wcodec/safetensors.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_set>
#include <utility>

#include "file_read.h"

namespace wcodec {

namespace {

using json = nlohmann::json;

struct DTypeEntry {
  DType type;
  const char* name;
  unsigned bits;
};

constexpr DTypeEntry kDTypes[] = {
    {DType::kBOOL, "BOOL", 8},       {DType::kU8, "U8", 8},
    {DType::kI8, "I8", 8},           {DType::kF8_E5M2, "F8_E5M2", 8},
    {DType::kF8_E4M3, "F8_E4M3", 8}, {DType::kI16, "I16", 16},
    {DType::kU16, "U16", 16},        {DType::kF16, "F16", 16},
    {DType::kBF16, "BF16", 16},      {DType::kI32, "I32", 32},
    {DType::kU32, "U32", 32},        {DType::kF32, "F32", 32},
    {DType::kF64, "F64", 64},        {DType::kI64, "I64", 64},
    {DType::kU64, "U64", 64},        {DType::kF8_E8M0, "F8_E8M0", 8},
    {DType::kF4, "F4", 4},           {DType::kF6_E2M3, "F6_E2M3", 6},
    {DType::kF6_E3M2, "F6_E3M2", 6}, {DType::kC64, "C64", 64},
};

const DTypeEntry* find_dtype(DType t) {
  const auto idx = static_cast<size_t>(t);
  if (idx >= std::size(kDTypes)) return nullptr;
  return &kDTypes[idx];
}

std::string allowed_dtypes() {
  std::string s;
  for (const auto& e : kDTypes) {
    if (!s.empty()) s += ", ";
    s += e.name;
  }
  return s;
}

// A string quoted for an error message: JSON-escaped, cut at kMaxQuoted bytes.
std::string quote(std::string_view s) {
  constexpr size_t kMaxQuoted = 200;
  std::string cut(s.substr(0, kMaxQuoted));
  std::string q = json(cut).dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > kMaxQuoted) q += "...(" + std::to_string(s.size()) + " bytes)";
  return q;
}

std::string shape_str(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string hex_byte(uint8_t b) {
  static const char* hex = "0123456789ABCDEF";
  return std::string("0x") + hex[b >> 4] + hex[b & 15];
}

// Strict UTF-8 (RFC 3629): no overlongs, no surrogates, nothing above U+10FFFF.
// Returns an empty string when valid, else a description of the first defect.
std::string check_utf8(const uint8_t* p, size_t n) {
  size_t i = 0;
  while (i < n) {
    const uint8_t b = p[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    const auto at = [&](const char* what) {
      return std::string(what) + " at header byte " + std::to_string(i) + " (byte " +
             hex_byte(b) + ")";
    };
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b == 0xC0 || b == 0xC1) {
      return at("overlong encoding");
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else if (b >= 0x80 && b <= 0xBF) {
      return at("lone continuation byte");
    } else {
      return at("invalid lead byte");
    }
    if (n - i < len) return at("truncated multi-byte sequence");
    const uint8_t b1 = p[i + 1];
    if (b1 < lo || b1 > hi) {
      if (b == 0xE0 && b1 >= 0x80 && b1 < 0xA0) return at("overlong encoding");
      if (b == 0xF0 && b1 >= 0x80 && b1 < 0x90) return at("overlong encoding");
      if (b == 0xED && b1 >= 0xA0 && b1 <= 0xBF) return at("UTF-16 surrogate (U+D800..U+DFFF)");
      if (b == 0xF4 && b1 >= 0x90 && b1 <= 0xBF) return at("code point above U+10FFFF");
      return at("invalid continuation byte");
    }
    for (size_t k = 2; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return at("invalid continuation byte");
    }
    i += len;
  }
  return {};
}

bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

// Bytes a tensor of `numel` elements of `bits` each occupies (ceil for the
// packed sub-byte dtypes). False on 64-bit overflow.
bool tensor_bytes(uint64_t numel, unsigned bits, uint64_t* out) {
  uint64_t nbits;
  if (!checked_mul(numel, bits, &nbits)) return false;
  *out = nbits / 8 + (nbits % 8 != 0 ? 1 : 0);
  return true;
}

// numel with overflow detection; a zero dimension makes the product 0.
bool checked_numel(const std::vector<uint64_t>& shape, uint64_t* out) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
    *out = 0;
    return true;
  }
  uint64_t n = 1;
  for (uint64_t d : shape) {
    if (!checked_mul(n, d, &n)) return false;
  }
  *out = n;
  return true;
}

struct RawTensor {
  TensorInfo info;
  bool have_dtype = false, have_shape = false, have_offsets = false;
  size_t n_offsets = 0;
};

// SAX handler validating the safetensors header structure while parsing.
class HeaderSax {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  bool null() { return value("null", "null"); }
  bool boolean(bool v) { return value("boolean", v ? "true" : "false"); }
  bool number_integer(number_integer_t v) {
    if (v >= 0) return unsigned_value(static_cast<uint64_t>(v));
    return value("negative integer", std::to_string(v));
  }
  bool number_unsigned(number_unsigned_t v) { return unsigned_value(v); }
  bool number_float(number_float_t, const string_t& raw) {
    return value("non-integer number", raw);
  }
  bool string(string_t& s) {
    switch (state_) {
      case State::kMetaValue:
        metadata_->emplace(std::move(meta_key_), std::move(s));
        state_ = State::kMeta;
        return true;
      case State::kTensorValue:
        if (field_ == Field::kDType) {
          auto d = parse_dtype(s);
          if (!d) {
            return fail(tensor_ctx() + " field dtype: unknown dtype " + quote(s) +
                        " (allowed: " + allowed_dtypes() + ")");
          }
          cur_.info.dtype = *d;
          cur_.have_dtype = true;
          state_ = State::kTensor;
          return true;
        }
        return value("string", quote(s));
      default:
        return value("string", quote(s));
    }
  }
  bool binary(binary_t&) { return value("binary", "binary"); }

  bool start_object(std::size_t) {
    switch (state_) {
      case State::kStart:
        state_ = State::kRoot;
        return true;
      case State::kRootValue:
        if (key_ == "__metadata__") {
          metadata_.emplace();
          state_ = State::kMeta;
          return true;
        }
        cur_ = RawTensor{};
        cur_.info.name = std::move(key_);
        state_ = State::kTensor;
        return true;
      default:
        return value("object", "{...}");
    }
  }
  bool end_object() {
    switch (state_) {
      case State::kRoot:
        state_ = State::kDone;
        return true;
      case State::kMeta:
        state_ = State::kRoot;
        return true;
      case State::kTensor: {
        const char* missing = !cur_.have_dtype    ? "dtype"
                              : !cur_.have_shape  ? "shape"
                              : !cur_.have_offsets ? "data_offsets"
                                                   : nullptr;
        if (missing) return fail(tensor_ctx() + " is missing field " + missing);
        tensors_.push_back(std::move(cur_.info));
        state_ = State::kRoot;
        return true;
      }
      default:
        return fail("unexpected end of object");
    }
  }
  bool key(string_t& k) {
    switch (state_) {
      case State::kRoot:
        if (!seen_root_.insert(k).second) {
          return fail("duplicate key " + quote(k) + " in the header object" +
                      (k == "__metadata__" ? std::string() : " (duplicate tensor name)"));
        }
        key_ = std::move(k);
        state_ = State::kRootValue;
        return true;
      case State::kMeta:
        if (!seen_meta_.insert(k).second) {
          return fail("__metadata__ has duplicate key " + quote(k));
        }
        meta_key_ = std::move(k);
        state_ = State::kMetaValue;
        return true;
      case State::kTensor: {
        bool* have;
        if (k == "dtype") {
          field_ = Field::kDType;
          have = &cur_.have_dtype;
        } else if (k == "shape") {
          field_ = Field::kShape;
          have = &cur_.have_shape;
        } else if (k == "data_offsets") {
          field_ = Field::kOffsets;
          have = &cur_.have_offsets;
        } else {
          return fail(tensor_ctx() + " has unknown field " + quote(k) +
                      " (allowed: dtype, shape, data_offsets)");
        }
        if (*have) return fail(tensor_ctx() + " has duplicate field " + quote(k));
        state_ = State::kTensorValue;
        return true;
      }
      default:
        return fail("unexpected key " + quote(k));
    }
  }
  bool start_array(std::size_t) {
    if (state_ == State::kTensorValue && field_ == Field::kShape) {
      cur_.info.shape.clear();
      state_ = State::kShape;
      return true;
    }
    if (state_ == State::kTensorValue && field_ == Field::kOffsets) {
      cur_.n_offsets = 0;
      state_ = State::kOffsets;
      return true;
    }
    return value("array", "[...]");
  }
  bool end_array() {
    if (state_ == State::kShape) {
      cur_.have_shape = true;
      state_ = State::kTensor;
      return true;
    }
    if (state_ == State::kOffsets) {
      if (cur_.n_offsets != 2) {
        return fail(tensor_ctx() + " field data_offsets: has " + std::to_string(cur_.n_offsets) +
                    (cur_.n_offsets == 1 ? " entry" : " entries") +
                    ", expected exactly 2 [begin, end]");
      }
      cur_.have_offsets = true;
      state_ = State::kTensor;
      return true;
    }
    return fail("unexpected end of array");
  }
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& ex) {
    if (error_.empty()) {
      error_ = "header is not valid JSON at byte " + std::to_string(position) + " near " +
               quote(last_token) + ": " + ex.what();
    }
    return false;
  }

  bool done() const { return state_ == State::kDone; }
  const std::string& error() const { return error_; }
  std::vector<TensorInfo>& tensors() { return tensors_; }
  std::optional<std::map<std::string, std::string>>& metadata() { return metadata_; }

 private:
  enum class State {
    kStart,        // before the top-level value
    kRoot,         // in the top-level object, expecting a key or '}'
    kRootValue,    // after a top-level key
    kMeta,         // in __metadata__, expecting a key or '}'
    kMetaValue,    // after a __metadata__ key
    kTensor,       // in a tensor object, expecting a key or '}'
    kTensorValue,  // after a tensor field key
    kShape,        // in a shape array
    kOffsets,      // in a data_offsets array
    kDone,
  };
  enum class Field { kDType, kShape, kOffsets };

  std::string tensor_ctx() const { return "tensor " + quote(cur_.info.name); }

  bool fail(std::string msg) {
    if (error_.empty()) error_ = std::move(msg);
    return false;
  }

  bool unsigned_value(uint64_t v) {
    if (state_ == State::kShape) {
      cur_.info.shape.push_back(v);
      return true;
    }
    if (state_ == State::kOffsets) {
      if (cur_.n_offsets == 0) cur_.info.begin = v;
      if (cur_.n_offsets == 1) cur_.info.end = v;
      if (++cur_.n_offsets > 2) {
        return fail(tensor_ctx() + " field data_offsets: has more than 2 entries (extra value " +
                    std::to_string(v) + "), expected exactly 2 [begin, end]");
      }
      return true;
    }
    return value("integer", std::to_string(v));
  }

  // A value of kind `kind` (rendered as `shown`) where the state machine says
  // whether it is allowed; anything reaching here is rejected.
  bool value(const char* kind, const std::string& shown) {
    switch (state_) {
      case State::kStart:
        return fail(std::string("header top level is not a JSON object (found ") + kind + " " +
                    shown + ")");
      case State::kRootValue:
        if (key_ == "__metadata__") {
          if (std::string_view(kind) == "null") {
            state_ = State::kRoot;
            return true;
          }
          return fail(std::string("__metadata__ is not an object (found ") + kind + " " + shown +
                      ")");
        }
        return fail("tensor " + quote(key_) + " is not an object (found " + kind + " " + shown +
                    ")");
      case State::kMetaValue:
        return fail("__metadata__ key " + quote(meta_key_) + " has a non-string value (found " +
                    kind + " " + shown + ")");
      case State::kTensorValue:
        switch (field_) {
          case Field::kDType:
            return fail(tensor_ctx() + " field dtype: is not a string (found " + kind + " " +
                        shown + ")");
          case Field::kShape:
            return fail(tensor_ctx() + " field shape: is not an array (found " + kind + " " +
                        shown + ")");
          case Field::kOffsets:
            return fail(tensor_ctx() + " field data_offsets: is not an array (found " + kind +
                        " " + shown + ")");
        }
        break;
      case State::kShape:
        return fail(tensor_ctx() + " field shape: entry " + std::to_string(cur_.info.shape.size()) +
                    " is not an integer in [0, 2^64-1] (found " + kind + " " + shown + ")");
      case State::kOffsets:
        return fail(tensor_ctx() + " field data_offsets: entry " + std::to_string(cur_.n_offsets) +
                    " is not an integer in [0, 2^64-1] (found " + kind + " " + shown + ")");
      default:
        break;
    }
    return fail(std::string("unexpected ") + kind + " " + shown);
  }

  State state_ = State::kStart;
  Field field_ = Field::kDType;
  std::string key_, meta_key_;
  std::unordered_set<std::string> seen_root_;
  std::set<std::string> seen_meta_;
  RawTensor cur_;
  std::vector<TensorInfo> tensors_;
  std::optional<std::map<std::string, std::string>> metadata_;
  std::string error_;
};

Status corrupt(const std::string& what, const std::string& msg) {
  return Status::Corruption(what + ": " + msg);
}

Result<SafetensorsHeader> parse_impl(const uint8_t* prefix, size_t prefix_len, uint64_t file_size,
                                     const std::string& what) {
  if (prefix == nullptr && prefix_len != 0) return Status::Invalid(what + ": null prefix buffer");
  if (prefix_len > file_size) {
    return Status::Invalid(what + ": prefix length " + std::to_string(prefix_len) +
                           " exceeds file size " + std::to_string(file_size));
  }
  if (file_size < 8) {
    return corrupt(what, "file size " + std::to_string(file_size) +
                             " is shorter than the 8-byte header length field");
  }
  if (prefix_len < 8) {
    return Status::Invalid(what + ": prefix holds " + std::to_string(prefix_len) +
                           " bytes, need at least 8");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];
  if (n > kMaxSafetensorsHeader) {
    return corrupt(what, "header length " + std::to_string(n) + " exceeds the limit of " +
                             std::to_string(kMaxSafetensorsHeader) + " bytes");
  }
  if (n > file_size - 8) {
    return corrupt(what, "header length " + std::to_string(n) + " exceeds the file: 8 + " +
                             std::to_string(n) + " > file size " + std::to_string(file_size));
  }
  if (prefix_len < 8 + n) {
    return Status::Invalid(what + ": prefix holds " + std::to_string(prefix_len) +
                           " bytes, need 8 + header length " + std::to_string(n));
  }
  const uint8_t* hdr = prefix + 8;
  if (std::string err = check_utf8(hdr, n); !err.empty()) {
    return corrupt(what, "header is not valid UTF-8: " + err);
  }
  if (n >= 3 && hdr[0] == 0xEF && hdr[1] == 0xBB && hdr[2] == 0xBF) {
    return corrupt(what, "header is not valid JSON: starts with a byte order mark (EF BB BF)");
  }

  HeaderSax sax;
  try {
    const char* first = reinterpret_cast<const char*>(hdr);
    json::sax_parse(first, first + n, &sax);
  } catch (const std::exception& e) {
    if (sax.error().empty()) return corrupt(what, std::string("header parse failed: ") + e.what());
  }
  if (!sax.error().empty()) return corrupt(what, sax.error());
  if (!sax.done()) return corrupt(what, "header is not a complete JSON object");

  SafetensorsHeader h;
  h.header_len = n;
  h.data_start = 8 + n;
  h.metadata = std::move(sax.metadata());
  h.tensors = std::move(sax.tensors());

  for (const TensorInfo& t : h.tensors) {
    const std::string ctx = "tensor " + quote(t.name);
    if (t.begin > t.end) {
      return corrupt(what, ctx + " field data_offsets: begin " + std::to_string(t.begin) +
                               " > end " + std::to_string(t.end));
    }
    uint64_t numel, bytes;
    if (!checked_numel(t.shape, &numel)) {
      return corrupt(what, ctx + " field shape: product of " + shape_str(t.shape) +
                               " overflows 64 bits");
    }
    const unsigned bits = dtype_bits(t.dtype);
    if (!tensor_bytes(numel, bits, &bytes)) {
      return corrupt(what, ctx + " field shape: " + shape_str(t.shape) + " × " +
                               std::to_string(bits) + " bits overflows 64 bits");
    }
    if (bytes != t.end - t.begin) {
      return corrupt(what, ctx + " field data_offsets: [" + std::to_string(t.begin) + "," +
                               std::to_string(t.end) + "] spans " +
                               std::to_string(t.end - t.begin) + " bytes but shape " +
                               shape_str(t.shape) + " of " + dtype_name(t.dtype) + " needs " +
                               std::to_string(bytes) + " bytes");
    }
  }

  std::stable_sort(h.tensors.begin(), h.tensors.end(),
                   [](const TensorInfo& a, const TensorInfo& b) {
                     return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
                   });
  uint64_t pos = 0;
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    const TensorInfo& t = h.tensors[i];
    if (t.begin == pos) {
      pos = t.end;
      continue;
    }
    std::string msg = "tensor " + quote(t.name) + " field data_offsets: begins at " +
                      std::to_string(t.begin) + ", expected " + std::to_string(pos);
    if (i == 0) {
      msg += " (the first tensor must start at offset 0)";
    } else if (t.begin < pos) {
      msg += " (overlaps tensor " + quote(h.tensors[i - 1].name) + ")";
    } else {
      msg += " (hole of " + std::to_string(t.begin - pos) + " bytes after tensor " +
             quote(h.tensors[i - 1].name) + ")";
    }
    return corrupt(what, msg);
  }
  h.data_len = pos;

  const uint64_t avail = file_size - h.data_start;
  if (h.data_len != avail) {
    const bool longer = avail > h.data_len;
    return corrupt(what, "file size " + std::to_string(file_size) + " != 8 + header length " +
                             std::to_string(n) + " + data length " +
                             std::to_string(h.data_len) + " (" +
                             (longer ? "file is longer than declared by " +
                                           std::to_string(avail - h.data_len) + " bytes"
                                     : "file is truncated: data short by " +
                                           std::to_string(h.data_len - avail) + " bytes") +
                             ")");
  }
  return h;
}

void append_json_string(std::string* out, const std::string& s) {
  *out += json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

const char* dtype_name(DType t) {
  const DTypeEntry* e = find_dtype(t);
  return e ? e->name : nullptr;
}

std::optional<DType> parse_dtype(std::string_view s) {
  for (const auto& e : kDTypes) {
    if (s == e.name) return e.type;
  }
  return std::nullopt;
}

unsigned dtype_bits(DType t) {
  const DTypeEntry* e = find_dtype(t);
  return e ? e->bits : 0;
}

uint64_t TensorInfo::numel() const {
  uint64_t n = 0;
  if (!checked_numel(shape, &n)) return UINT64_MAX;
  return n;
}

Result<SafetensorsHeader> parse_safetensors_header(const uint8_t* prefix, size_t prefix_len,
                                                   uint64_t file_size, const std::string& what) {
  try {
    return parse_impl(prefix, prefix_len, file_size, what);
  } catch (const std::exception& e) {
    return Status::Corruption(what + ": header parse failed: " + e.what());
  }
}

Result<SafetensorsHeader> read_safetensors_header_file(const std::string& path) {
  WC_ASSIGN_OR_RETURN(const ReadFile f, ReadFile::open(path));
  const uint64_t size = f.size();
  std::vector<uint8_t> buf(static_cast<size_t>(std::min<uint64_t>(size, 8)));
  WC_RETURN_IF_ERROR(pread_exact(f.fd(), 0, buf.size(), buf.data(), path));
  if (buf.size() == 8) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | buf[i];
    if (n <= kMaxSafetensorsHeader && n <= size - 8) {
      buf.resize(8 + n);
      WC_RETURN_IF_ERROR(pread_exact(f.fd(), 8, n, buf.data() + 8, path));
    }
  }
  return parse_safetensors_header(buf.data(), buf.size(), size, path);
}

std::vector<uint8_t> write_safetensors_header(const SafetensorsHeader& h) {
  std::string js = "{";
  bool first = true;
  if (h.metadata) {
    js += "\"__metadata__\":{";
    bool mfirst = true;
    for (const auto& [k, v] : *h.metadata) {
      if (!mfirst) js += ',';
      mfirst = false;
      append_json_string(&js, k);
      js += ':';
      append_json_string(&js, v);
    }
    js += '}';
    first = false;
  }
  for (const TensorInfo& t : h.tensors) {
    if (!first) js += ',';
    first = false;
    append_json_string(&js, t.name);
    const char* dn = dtype_name(t.dtype);
    js += ":{\"dtype\":\"";
    js += dn ? dn : "INVALID";
    js += "\",\"shape\":";
    js += shape_str(t.shape);
    js += ",\"data_offsets\":[" + std::to_string(t.begin) + "," + std::to_string(t.end) + "]}";
  }
  js += '}';
  js.append((8 - js.size() % 8) % 8, ' ');

  std::vector<uint8_t> out(8 + js.size());
  const uint64_t n = js.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, js.data(), js.size());
  return out;
}

Result<std::vector<uint8_t>> build_safetensors(
    const std::vector<TensorData>& tensors,
    const std::optional<std::map<std::string, std::string>>& metadata) {
  const auto check_text = [](const std::string& s, const std::string& role) -> Status {
    if (std::string err = check_utf8(reinterpret_cast<const uint8_t*>(s.data()), s.size());
        !err.empty()) {
      return Status::Invalid("build_safetensors: " + role + " " + quote(s) +
                             " is not valid UTF-8: " + err);
    }
    return Status::OK();
  };
  if (metadata) {
    for (const auto& [k, v] : *metadata) {
      WC_RETURN_IF_ERROR(check_text(k, "__metadata__ key"));
      WC_RETURN_IF_ERROR(check_text(v, "__metadata__ value of key " + quote(k) + ":"));
    }
  }

  SafetensorsHeader h;
  h.metadata = metadata;
  std::unordered_set<std::string> names;
  uint64_t pos = 0;
  for (const TensorData& t : tensors) {
    const std::string ctx = "build_safetensors: tensor " + quote(t.name);
    WC_RETURN_IF_ERROR(check_text(t.name, "tensor name"));
    if (t.name == "__metadata__") {
      return Status::Invalid(ctx + ": the name is reserved for the metadata entry");
    }
    if (!names.insert(t.name).second) return Status::Invalid(ctx + ": duplicate tensor name");
    if (!dtype_name(t.dtype)) {
      return Status::Invalid(ctx + " field dtype: unknown dtype value " +
                             std::to_string(static_cast<unsigned>(t.dtype)));
    }
    uint64_t numel, bytes;
    if (!checked_numel(t.shape, &numel) || !tensor_bytes(numel, dtype_bits(t.dtype), &bytes)) {
      return Status::Invalid(ctx + " field shape: size of " + shape_str(t.shape) + " × " +
                             dtype_name(t.dtype) + " overflows 64 bits");
    }
    if (bytes != t.bytes.size()) {
      return Status::Invalid(ctx + ": shape " + shape_str(t.shape) + " of " + dtype_name(t.dtype) +
                             " needs " + std::to_string(bytes) + " bytes, data has " +
                             std::to_string(t.bytes.size()));
    }
    TensorInfo info;
    info.name = t.name;
    info.dtype = t.dtype;
    info.shape = t.shape;
    info.begin = pos;
    info.end = pos + bytes;
    pos = info.end;
    h.tensors.push_back(std::move(info));
  }
  h.data_len = pos;

  std::vector<uint8_t> out = write_safetensors_header(h);
  const uint64_t header_len = out.size() - 8;
  if (header_len > kMaxSafetensorsHeader) {
    return Status::Invalid("build_safetensors: header length " + std::to_string(header_len) +
                           " exceeds the limit of " + std::to_string(kMaxSafetensorsHeader) +
                           " bytes");
  }
  out.reserve(out.size() + pos);
  for (const TensorData& t : tensors) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

}  // namespace wcodec
