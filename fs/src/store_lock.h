// fs/src/store_lock.h — private to fs/: the on-disk lock protocol of the
// encode queue (docs/staging.md) and the small descriptor-relative file
// helpers it and the queue share.
//
// A lock is the file ".wcodecfs-lock.<name>" next to the file <name> it
// guards, created with O_EXCL and holding a JSON body
//   {"owner": str, "host": str, "boot_id": str, "pid": n}
// Its holder refreshes the file's mtime every lock_stale / 4. A lock is stale
// when its holder ran on this boot of this machine and its pid is gone, when
// its owner is the asking owner itself (a leftover of an earlier run with the
// same id: an owner holds each lock at most once, see EncodeQueue's claims),
// or when its mtime is older than lock_stale. A stale lock is taken over by
// renaming it to a unique ".wcodecfs-stale.*" name first, so that of two
// processes taking over the same lock only one moves it; the mover checks
// that it moved the file it judged (same inode) before deleting it.
//
// Nothing here follows a symbolic link: every open is relative to a
// directory descriptor with O_NOFOLLOW.
//
// Thread-safety: free functions are re-entrant. A HeldLock may be refreshed
// and checked from one thread while another releases it (its descriptor
// stays open until the object is destroyed).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "fs_util.h"
#include "wcodecfs/fs_status.h"

namespace wcodecfs::queue_io {

// Reserved name prefixes (docs/staging.md).
inline constexpr const char* kInternalPrefix = ".wcodecfs-";
inline constexpr const char* kLockPrefix = ".wcodecfs-lock.";
inline constexpr const char* kTempPrefix = ".wcodecfs-tmp.";
inline constexpr const char* kStalePrefix = ".wcodecfs-stale.";
// Suffix of the temporary file of materialize (decoding), after the owner.
inline constexpr const char* kDecodeTempSuffix = ".dec";
// A lock body longer than this is not ours: treated as unreadable.
inline constexpr size_t kMaxLockBody = 4096;

std::string lock_name(const std::string& name);
std::string temp_name(const std::string& name, const std::string& owner);


// What identifies the content of a file for "did it change since": the
// swap happens only when these are what they were when the file was read.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  struct timespec mtime {};
  struct timespec ctime {};
  static FileId of(const struct stat& st);
  bool operator==(const FileId& o) const;
  bool operator!=(const FileId& o) const { return !(*this == o); }
};

// Splits "a/b/c" into ("a/b", "c"); ("", "c") for a single component.
std::pair<std::string, std::string> split_rel(const std::string& rel);
// True when `rel` is "" or "/"-separated components none of which is empty,
// ".", ".." or contains a NUL.
bool valid_rel(const std::string& rel);
// True when `prefix` is "" (the whole area), equals `rel`, or is a directory
// above it.
bool covers(const std::string& prefix, const std::string& rel);

// Opens directory `rel_dir` ("" for `root` itself) one component at a time
// below `root` without following symbolic links (O_RDONLY, so it can be
// fsynced and read).
Result<Fd> open_dir_below(int root, const std::string& rel_dir);
// Opens a regular file `name` in `dirfd` for reading (O_NOFOLLOW,
// O_NONBLOCK); *st receives its fstat. kLoop for a symlink, kInvalidArgument
// for anything that is not a regular file.
Result<Fd> open_regular(int dirfd, const std::string& name, struct stat* st);
Status fsync_fd(int fd, const std::string& what);
// unlinkat that treats ENOENT as success.
Status unlink_if_exists(int dirfd, const std::string& name, const std::string& what);
// Streams the file from offset 0 to EOF into SHA-256.
Result<std::array<uint8_t, 32>> sha256_fd(int fd, const std::string& what);

// Who is asking for locks.
struct LockOwner {
  std::string owner;    // owner id (names of locks and temps)
  std::string host;     // gethostname()
  std::string boot_id;  // /proc/sys/kernel/random/boot_id ("" when unreadable)
  int64_t pid = 0;
  std::chrono::milliseconds stale{std::chrono::minutes(2)};
};
std::string this_host();
std::string this_boot_id();

struct LockBody {
  bool valid = false;  // parsed; an invalid body is judged by its mtime alone
  std::string owner, host, boot_id;
  int64_t pid = 0;
};
std::string lock_body_json(const LockOwner& me);
LockBody parse_lock_body(const std::string& text);

// A lock file as found on disk.
struct LockInfo {
  LockBody body;
  ino_t ino = 0;
  struct timespec mtime {};
  bool stale = false;
  std::string why;  // when stale: "holder pid 123 is gone", "not refreshed for 130 s", ...
};
// Reads and judges lock file `lock_file` (a ".wcodecfs-lock.*" name) in
// `dirfd`. kNotFound when it does not exist.
Result<LockInfo> inspect_lock(int dirfd, const std::string& lock_file, const LockOwner& me);
// Removes stale lock `lock_file` if it is still the file judged in `info`
// (rename aside, compare inode, unlink). Returns whether it removed it; a
// lock that changed meanwhile is put back and left alone.
Result<bool> remove_stale_lock(int dirfd, const std::string& lock_file, const LockInfo& info, const LockOwner& me);

// A lock we created.
class HeldLock {
 public:
  ~HeldLock();
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;
  // Sets the lock file's mtime to now (through our descriptor).
  void refresh() const;
  // Whether the lock file's name still refers to the file we created (a
  // process that judged us stale may have taken it over).
  bool still_ours() const;
  // Deletes the lock file if it is still ours. Idempotent.
  void release();

 private:
  friend Result<struct LockAttempt> acquire_lock(int dirfd, const std::string& name, const LockOwner& me);
  HeldLock() = default;
  Fd dir_;  // a dup of the directory
  Fd fd_;
  std::string file_;
  ino_t ino_ = 0;
  bool released_ = false;
};

struct LockAttempt {
  std::unique_ptr<HeldLock> held;  // null: busy
  LockInfo holder;                 // busy: the live holder found
  std::string taken_over_from;     // acquired by taking over a stale lock of this owner
};
// Tries to lock file `name` (not the lock's name) in `dirfd` once, taking
// over a stale lock. Never waits for a live holder.
Result<LockAttempt> acquire_lock(int dirfd, const std::string& name, const LockOwner& me);

}  // namespace wcodecfs::queue_io
