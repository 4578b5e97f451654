// fs/src/fs_status.cpp — see wcodecfs/fs_status.h.
#include "wcodecfs/fs_status.h"

#include <cerrno>
#include <cstring>

namespace wcodecfs {

const char* code_name(Code c) {
  switch (c) {
    case Code::kOk: return "OK";
    case Code::kNotFound: return "Not found";
    case Code::kNotDirectory: return "Not a directory";
    case Code::kIsDirectory: return "Is a directory";
    case Code::kReadOnly: return "Read-only";
    case Code::kPermission: return "Permission denied";
    case Code::kInvalidArgument: return "Invalid argument";
    case Code::kNameTooLong: return "Name too long";
    case Code::kLoop: return "Symbolic link not followed";
    case Code::kCorruption: return "Corruption";
    case Code::kIOError: return "IO error";
    case Code::kNoResources: return "Out of resources";
    case Code::kNotSupported: return "Not supported";
    case Code::kStale: return "Stale";
    case Code::kInternal: return "Internal error";
    case Code::kExists: return "Exists";
    case Code::kNotEmpty: return "Directory not empty";
    case Code::kCrossDevice: return "Cross-device";
    case Code::kNoSpace: return "No space";
    case Code::kTooLarge: return "Too large";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(code_name(code())) + ": " + message();
}

Status from_errno(int err, const std::string& what) {
  const std::string msg = what + ": " + std::strerror(err);
  switch (err) {
    case ENOENT: return {Code::kNotFound, msg};
    case ENOTDIR: return {Code::kNotDirectory, msg};
    case EISDIR: return {Code::kIsDirectory, msg};
    case EROFS: return {Code::kReadOnly, msg};
    case EACCES:
    case EPERM: return {Code::kPermission, msg};
    case EINVAL: return {Code::kInvalidArgument, msg};
    case ENAMETOOLONG: return {Code::kNameTooLong, msg};
    case ELOOP: return {Code::kLoop, msg};
    case ENOMEM:
    case EMFILE:
    case ENFILE: return {Code::kNoResources, msg};
    case ESTALE: return {Code::kStale, msg};
    case EOPNOTSUPP: return {Code::kNotSupported, msg};
    case EEXIST: return {Code::kExists, msg};
    case ENOTEMPTY: return {Code::kNotEmpty, msg};
    case EXDEV: return {Code::kCrossDevice, msg};
    case ENOSPC:
    case EDQUOT: return {Code::kNoSpace, msg};
    case EFBIG: return {Code::kTooLarge, msg};
    default: return {Code::kIOError, msg};
  }
}

Status from_codec(const wcodec::Status& st) {
  if (st.ok()) return Status::OK();
  switch (st.code()) {
    case wcodec::Code::kIOError: return {Code::kIOError, st.message()};
    case wcodec::Code::kNotSupported: return {Code::kNotSupported, st.message()};
    case wcodec::Code::kInternal: return {Code::kInternal, st.message()};
    case wcodec::Code::kCorruption:
    case wcodec::Code::kInvalidArgument:
    case wcodec::Code::kOutOfRange:
    default: return {Code::kCorruption, st.message()};
  }
}

}  // namespace wcodecfs
