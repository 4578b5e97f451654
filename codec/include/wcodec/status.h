// wcodec/status.h — error values for the codec library.
//
// Every fallible function at a module boundary returns Status or Result<T>.
// Status is cheap when OK (no allocation). Messages name the file/field, the
// value found and the allowed range, so a user can act on them.
// Thread-safety: values; safe to copy between threads.
#pragma once

#include <cassert>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <variant>

namespace wcodec {

enum class Code : int {
  kOk = 0,
  kInvalidArgument = 1,  // caller passed something unusable
  kCorruption = 2,       // input bytes violate the format
  kNotSupported = 3,     // valid but unsupported feature (future version, dtype)
  kIOError = 4,          // the OS failed a read/write
  kOutOfRange = 5,       // offset/length beyond the end
  kInternal = 6,         // a broken invariant that was caught
};

const char* code_name(Code c);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string msg)
      : rep_(code == Code::kOk ? nullptr
                               : std::make_shared<Rep>(Rep{code, std::move(msg)})) {}

  static Status OK() { return Status(); }
  static Status Invalid(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status Corruption(std::string m) { return {Code::kCorruption, std::move(m)}; }
  static Status NotSupported(std::string m) { return {Code::kNotSupported, std::move(m)}; }
  static Status IOError(std::string m) { return {Code::kIOError, std::move(m)}; }
  static Status OutOfRange(std::string m) { return {Code::kOutOfRange, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }

  bool ok() const { return rep_ == nullptr; }
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  const std::string& message() const {
    static const std::string empty;
    return rep_ ? rep_->msg : empty;
  }
  // "Corruption: <message>"
  std::string ToString() const;
  // Returns a copy whose message is prefixed with `context: `.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code(), context + ": " + message());
  }

 private:
  struct Rep {
    Code code;
    std::string msg;
  };
  std::shared_ptr<const Rep> rep_;
};

// BasicResult<T, S>: a T or a non-OK S (a status type with ok() and
// S::Internal(msg)); the codec's Result and the filesystem core's are its
// two instances.
template <typename T, typename S>
class [[nodiscard]] BasicResult {
 public:
  BasicResult(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  BasicResult(S st) : v_(std::move(st)) {         // NOLINT(google-explicit-constructor)
    if (std::get<S>(v_).ok()) v_ = S::Internal("Result constructed from OK status without a value");
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  const S& status() const {
    static const S ok_status;
    return ok() ? ok_status : std::get<S>(v_);
  }
  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, S> v_;
};

// Result<T>: a T or a non-OK Status.
template <typename T>
using Result = BasicResult<T, Status>;

}  // namespace wcodec

#define WC_CONCAT_INNER(a, b) a##b
#define WC_CONCAT(a, b) WC_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define WC_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    ::wcodec::Status _wc_st = (expr);            \
    if (!_wc_st.ok()) return _wc_st;             \
  } while (0)

// `lhs = value of expr` (a Result<T>), or return its Status.
#define WC_ASSIGN_OR_RETURN(lhs, expr) \
  WC_ASSIGN_OR_RETURN_IMPL(WC_CONCAT(_wc_res_, __LINE__), lhs, expr)
#define WC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

// Broken internal invariant: abort loudly (never for bad input).
#define WC_CHECK(cond)                                                        \
  do {                                                                        \
    if (!(cond)) {                                                            \
      ::wcodec::detail::check_failed(#cond, __FILE__, __LINE__);              \
    }                                                                         \
  } while (0)

namespace wcodec::detail {
[[noreturn]] void check_failed(const char* cond, const char* file, int line);
}  // namespace wcodec::detail
