// fs/src/store_kind.cpp — see wcodecfs/store_kind.h: StoreDir, and the
// plain and inline virtual files every kind may use.
#include "wcodecfs/store_kind.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "fs_util.h"

namespace wcodecfs {

StoreDir::StoreDir(int dirfd, std::string path, std::vector<StoreEntry> entries)
    : dirfd_(dirfd), path_(std::move(path)), entries_(std::move(entries)) {
  std::sort(entries_.begin(), entries_.end(), [](const StoreEntry& a, const StoreEntry& b) { return a.name < b.name; });
}

Result<StoreDir> StoreDir::list(int dirfd, std::string path, const std::function<bool(const std::string&)>& skip) {
  const std::string shown = path.empty() ? "." : path;
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return from_errno(errno, "open directory " + shown);
  DIR* dir = ::fdopendir(fd);
  if (!dir) {
    const int err = errno;
    ::close(fd);
    return from_errno(err, "open directory " + shown);
  }
  std::vector<StoreEntry> entries;
  for (;;) {
    errno = 0;
    struct dirent* d = ::readdir(dir);
    if (!d) {
      if (errno != 0) {
        const int err = errno;
        ::closedir(dir);
        return from_errno(err, "read directory " + shown);
      }
      break;
    }
    std::string name = d->d_name;
    if (name == "." || name == "..") continue;
    if (skip && skip(name)) continue;
    mode_t type = dtype_to_mode(d->d_type);
    if (type == 0) {
      struct stat st;
      if (::fstatat(::dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // vanished
      type = st.st_mode & S_IFMT;
    }
    entries.push_back({std::move(name), type, static_cast<uint64_t>(d->d_ino)});
  }
  ::closedir(dir);
  return StoreDir(dirfd, std::move(path), std::move(entries));
}

const StoreEntry* StoreDir::find(std::string_view name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const StoreEntry& e, std::string_view n) { return e.name < n; });
  return it != entries_.end() && it->name == name ? &*it : nullptr;
}

std::string StoreDir::path_of(std::string_view rel) const { return join(path_, rel); }

Result<std::string> read_small_input(const StoredInput& in, uint64_t max_bytes, std::string_view purpose) {
  if (in.st.st_size < 0 || static_cast<uint64_t>(in.st.st_size) > max_bytes)
    return Status(Code::kNotSupported, in.path + ": " + std::to_string(in.st.st_size) + " bytes (at most " +
                                           std::to_string(max_bytes) + " are read for " + std::string(purpose) + ")");
  std::string s(static_cast<size_t>(in.st.st_size), '\0');
  WCFS_ASSIGN_OR_RETURN(size_t got, in.file->pread_full(0, s.size(), reinterpret_cast<uint8_t*>(s.data())));
  if (got != s.size())
    return Status(Code::kStale, in.path + ": read " + std::to_string(got) + " of " + std::to_string(s.size()) +
                                    " bytes (the file shrank)");
  return s;
}

namespace {

// Splits a relative path into components; false for "", absolute paths, and
// "." / ".." / empty components.
bool split_components(std::string_view rel, std::vector<std::string>* out) {
  if (rel.empty() || rel.front() == '/') return false;
  size_t i = 0;
  while (i <= rel.size()) {
    const size_t j = std::min(rel.find('/', i), rel.size());
    const std::string_view c = rel.substr(i, j - i);
    if (c.empty() || c == "." || c == ".." || c.find('\0') != std::string_view::npos) return false;
    out->emplace_back(c);
    i = j + 1;
  }
  return true;
}

// Opens directory component `name` below `at` without following a link: a
// symbolic link is Loop, anything else that is not a directory NotFound.
Result<Fd> open_component(int at, const std::string& name, const std::string& shown) {
  Fd next(::openat(at, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (next.valid()) return next;
  int err = errno;
  if (err == ENOTDIR) {
    struct stat st;
    err = ::fstatat(at, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode) ? ELOOP : ENOENT;
  }
  return from_errno(err, "open directory " + name + " of " + shown);
}

}  // namespace

Result<struct stat> StoreDir::stat(std::string_view rel) const {
  std::vector<std::string> comps;
  if (!split_components(rel, &comps)) return Status::Invalid(path_of(rel) + ": not a relative path below the directory");
  Fd parent;  // below dirfd_ once a component was walked
  int at = dirfd_;
  for (size_t k = 0; k + 1 < comps.size(); ++k) {
    WCFS_ASSIGN_OR_RETURN(parent, open_component(at, comps[k], path_of(rel)));
    at = parent.get();
  }
  struct stat st;
  if (::fstatat(at, comps.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return from_errno(errno, "stat " + path_of(rel));
  return st;
}

Result<StoredInput> StoreDir::open(std::string_view rel) const {
  std::vector<std::string> comps;
  if (!split_components(rel, &comps)) return Status::Invalid(path_of(rel) + ": not a relative path below the directory");
  const std::string shown = path_of(rel);
  Fd parent;
  int at = dirfd_;
  for (size_t k = 0; k + 1 < comps.size(); ++k) {
    WCFS_ASSIGN_OR_RETURN(parent, open_component(at, comps[k], shown));
    at = parent.get();
  }
  // O_NONBLOCK: a FIFO put in place of the file must not block the open.
  Fd fd(::openat(at, comps.back().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return from_errno(errno, "open " + shown);
  StoredInput in;
  if (::fstat(fd.get(), &in.st) != 0) return from_errno(errno, "stat " + shown);
  if (!S_ISREG(in.st.st_mode)) return Status(Code::kNotSupported, shown + " is not a regular file");
  const int fl = ::fcntl(fd.get(), F_GETFL);
  if (fl >= 0) (void)::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
  in.rel = std::string(rel);
  in.path = shown;
  in.file = std::make_shared<const BackingFile>(fd.release(), shown);
  return in;
}

const StagingCodec* codec_for(const StoreKinds& kinds, std::string_view name) {
  for (const auto& k : kinds) {
    const StagingCodec* c = k->staging();
    if (c && !c->encoded_name(name).empty()) return c;
  }
  return nullptr;
}

Status encode_file(const StagingCodec& codec, const std::string& in, const std::string& out,
                   const wcodec::EncodeConfig& cfg) {
  Fd src(::open(in.c_str(), O_RDONLY | O_CLOEXEC));
  if (!src.valid()) return from_errno(errno, "open " + in);
  struct stat st;
  if (::fstat(src.get(), &st) != 0) return from_errno(errno, "stat " + in);
  if (!S_ISREG(st.st_mode)) return Status(Code::kNotSupported, in + " is not a regular file");
  const size_t slash = out.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : out.substr(0, slash));
  const std::string tmp = out + ".tmp." + std::to_string(::getpid());
  Fd dst(::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!dst.valid()) return from_errno(errno, "create " + tmp);
  Status s = codec.encode(src.get(), static_cast<uint64_t>(st.st_size), dst.get(), cfg, in);
  if (s.ok() && ::fsync(dst.get()) != 0) s = from_errno(errno, "fsync " + tmp);
  if (s.ok() && ::rename(tmp.c_str(), out.c_str()) != 0) s = from_errno(errno, "rename " + tmp + " to " + out);
  if (!s.ok()) {
    (void)::unlink(tmp.c_str());
    return s;
  }
  Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.valid()) (void)::fsync(d.get());
  return Status::OK();
}

std::vector<const StagingCodec*> staging_codecs(const StoreKinds& kinds) {
  std::vector<const StagingCodec*> out;
  for (const auto& k : kinds)
    if (const StagingCodec* c = k->staging()) out.push_back(c);
  return out;
}

Result<std::shared_ptr<const VirtualFile>> make_passthrough_file(std::shared_ptr<const BackingFile> file,
                                                                 uint64_t size) {
  std::vector<Extent> extents;
  std::string name = file->name();
  if (size > 0) extents.push_back(Extent{0, size, PassthroughExtent{std::move(file), 0}});
  return VirtualFile::make(std::move(name), std::move(extents));
}

Result<std::shared_ptr<const VirtualFile>> make_inline_file(std::string name, std::vector<uint8_t> bytes) {
  std::vector<Extent> extents;
  const uint64_t n = bytes.size();
  if (n > 0) {
    extents.push_back(Extent{0, n, InlineExtent{std::make_shared<const std::vector<uint8_t>>(std::move(bytes)), 0}});
  }
  return VirtualFile::make(std::move(name), std::move(extents));
}

}  // namespace wcodecfs
