// wcodecfs/fs_status.h — error values of the filesystem core.
//
// fs/ speaks in conditions a filesystem can be in (not found, read-only,
// corrupt data, ...), never in errno numbers: the FUSE binding in mount/ is the
// only place that turns a Status into an errno (STYLE.md: "errno only at the
// FUSE edge"). The codec's wcodec::Status is converted at the point where fs
// calls the codec (from_codec), and an errno returned by a system call inside
// fs is converted where the call is made (from_errno).
//
// The shape follows wcodec::Status: OK costs nothing, messages name the store
// file and the value found.
// Thread-safety: values; safe to copy between threads.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "wcodec/status.h"

namespace wcodecfs {

enum class Code : int {
  kOk = 0,
  kNotFound,          // no such entry
  kNotDirectory,      // a directory operation on something else
  kIsDirectory,       // a file operation on a directory
  kReadOnly,          // any attempt to modify the mount
  kPermission,        // the store refused us access
  kInvalidArgument,   // unusable argument (bad name, bad flags)
  kNameTooLong,       // a name longer than NAME_MAX
  kLoop,              // the operation would follow a symbolic link
  kCorruption,        // stored bytes violate their format (checksum mismatch, bad index)
  kIOError,           // the OS failed a read of the store
  kNoResources,       // out of memory or file descriptors
  kNotSupported,      // valid but not something this mount does
  kStale,             // the stored file changed under an open handle or a cached entry
  kInternal,          // a broken invariant that was caught
  kExists,            // the name is taken
  kNotEmpty,          // a directory that must be empty is not
  kCrossDevice,       // a rename between the read-only store and the staging tree
  kNoSpace,           // the store's filesystem is full (or over quota)
  kTooLarge,          // a size beyond what the store's filesystem allows
};

const char* code_name(Code c);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string msg)
      : rep_(code == Code::kOk ? nullptr : std::make_shared<Rep>(Rep{code, std::move(msg)})) {}

  static Status OK() { return Status(); }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status ReadOnly(std::string m) { return {Code::kReadOnly, std::move(m)}; }
  static Status Invalid(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status Corruption(std::string m) { return {Code::kCorruption, std::move(m)}; }
  static Status IOError(std::string m) { return {Code::kIOError, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }

  bool ok() const { return rep_ == nullptr; }
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  const std::string& message() const {
    static const std::string empty;
    return rep_ ? rep_->msg : empty;
  }
  // "Corruption: <message>"
  std::string ToString() const;

 private:
  struct Rep {
    Code code;
    std::string msg;
  };
  std::shared_ptr<const Rep> rep_;
};

// A Status for the errno `err` left by a failed system call; `what` names the
// call and the store path ("openat sub/x.wcodec").
Status from_errno(int err, const std::string& what);

// Converts a codec error. Corruption stays corruption (it becomes EIO at the
// FUSE edge); OutOfRange/Invalid from the codec mean the stored index and the
// request disagree, which is also corruption from the mount's point of view.
Status from_codec(const wcodec::Status& st);

// Result<T>: a T or a non-OK Status.
template <typename T>
using Result = wcodec::BasicResult<T, Status>;

}  // namespace wcodecfs

#define WCFS_CONCAT_INNER(a, b) a##b
#define WCFS_CONCAT(a, b) WCFS_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (a wcodecfs::Status) is not OK.
#define WCFS_RETURN_IF_ERROR(expr)          \
  do {                                      \
    ::wcodecfs::Status _wcfs_st = (expr);   \
    if (!_wcfs_st.ok()) return _wcfs_st;    \
  } while (0)

// `lhs = value of expr` (a wcodecfs::Result<T>), or return its Status.
#define WCFS_ASSIGN_OR_RETURN(lhs, expr) WCFS_ASSIGN_OR_RETURN_IMPL(WCFS_CONCAT(_wcfs_res_, __LINE__), lhs, expr)
#define WCFS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
