// wcodecfs/store_kind.h — the seam every stored format goes through.
//
// A store kind looks at one directory of the store and says what the mount
// shows there: presented names, each built from one or more stored inputs
// of that directory (or below it), which either stay visible (a view: a
// GGUF file beside the safetensors file it is made from) or are hidden (a
// replacement: X.wcodec shown as X.safetensors). For a presented name it
// builds a VirtualFile (inline bytes, passthrough ranges, decoded chunks,
// zero fill) from its inputs' indexes, without decoding. A kind may also
// supply a StagingCodec (plain name <-> encoded name, encode, verify,
// decode) that the staging directory, the encode queue and `wcodec encode
// STORE` use for the files it stores.
//
// The Filesystem owns everything around a kind: listing and caching a
// directory's presentations, resolving conflicts (a plain stored entry of
// the same name wins; of two kinds presenting one name the first in the
// registry wins), opening the inputs safely, keying the chunk cache by every
// input's identity, and noticing when an input changes. Adding a format is
// one file in fs/src/kinds/ plus one line in kind_registry.cpp; the
// walkthrough is in docs/architecture.md.
//
// Names that come from inside a stored file (tensor names, metadata) must
// never become presented names or input paths.
//
// Thread-safety: kinds are immutable and stateless; every function may be
// called from any thread. StoreDir and BuildContext are used by one thread.
#pragma once

#include <sys/stat.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wcodec/container.h"
#include "wcodecfs/fs_status.h"
#include "wcodecfs/virtual_file.h"

namespace wcodecfs {

// One entry of a store directory.
struct StoreEntry {
  std::string name;
  mode_t type = 0;  // S_IFREG, S_IFDIR, S_IFLNK, ... (type bits only)
  uint64_t ino = 0;
};

// A stored input opened for reading.
struct StoredInput {
  std::string rel;   // as the presentation names it, relative to its directory
  std::string path;  // store-relative path, for messages ("models/x.wcodec")
  std::shared_ptr<const BackingFile> file;  // O_RDONLY, opened O_NOFOLLOW relative to the directory
  struct stat st {};                        // fstat of that descriptor
};

// The whole of a small stored input (a config or tokenizer file) as text.
// NotSupported when it holds more than `max_bytes` (the message names the
// file, its size, the limit and `purpose`: "a GGUF view"); Stale when it
// shrank while being read.
Result<std::string> read_small_input(const StoredInput& in, uint64_t max_bytes, std::string_view purpose);

// A directory of the store as a kind sees it: its entries, and a safe way to
// open what is in and below it.
class StoreDir {
 public:
  // `dirfd`: the directory (O_PATH is enough; not owned, outlives this
  // object). `path`: its store-relative path ("" for the root). `entries`:
  // its listing, without ".", ".." and the mount's own hidden names.
  StoreDir(int dirfd, std::string path, std::vector<StoreEntry> entries);
  // Lists directory `dirfd` (skipping names for which `skip` is true).
  static Result<StoreDir> list(int dirfd, std::string path, const std::function<bool(const std::string&)>& skip = {});

  int fd() const { return dirfd_; }
  const std::string& path() const { return path_; }
  // Sorted by name.
  const std::vector<StoreEntry>& entries() const { return entries_; }
  // The entry called `name`, or null.
  const StoreEntry* find(std::string_view name) const;
  // Whether `name` is an entry here and a regular file.
  bool is_regular(std::string_view name) const {
    const StoreEntry* e = find(name);
    return e && e->type == S_IFREG;
  }
  // Store-relative path of `rel` (a name here, or a path below: "a/b").
  std::string path_of(std::string_view rel) const;
  // Opens the regular file `rel` (a name here or a relative path below this
  // directory without "." or ".." components) read-only, one component at a
  // time with O_NOFOLLOW: NotFound when missing, Loop at a symbolic link,
  // NotSupported when it is not a regular file.
  Result<StoredInput> open(std::string_view rel) const;
  // lstat of `rel` (same rules, without opening the last component).
  Result<struct stat> stat(std::string_view rel) const;

 private:
  int dirfd_;
  std::string path_;
  std::vector<StoreEntry> entries_;
};

// One name a kind presents in a directory.
struct Presentation {
  std::string name;                 // the presented entry name in this directory
  std::vector<std::string> inputs;  // stored inputs it is made of, relative to the directory; the first
                                    // lends the file its mode and owner and names it in messages
  bool hides_inputs = true;         // false for a view: the inputs stay visible
};

// What build() gets besides the presentation: its inputs, opened.
class BuildContext {
 public:
  BuildContext(std::vector<StoredInput> inputs, std::string presented_path,
               std::function<uint64_t(size_t)> source_ids)
      : inputs_(std::move(inputs)), presented_(std::move(presented_path)), ids_(std::move(source_ids)) {}
  // inputs()[k] is presentation.inputs[k], open.
  const std::vector<StoredInput>& inputs() const { return inputs_; }
  // Store-relative path of the presented file ("models/x.safetensors").
  const std::string& presented_path() const { return presented_; }
  // The cache id of the k-th chunk source this build makes: the same every
  // time the same unchanged inputs are presented again, a new one as soon
  // as any input changes (so cached chunks are never served for changed
  // inputs).
  uint64_t source_id(size_t k) const { return ids_ ? ids_(k) : 0; }

 private:
  std::vector<StoredInput> inputs_;
  std::string presented_;
  std::function<uint64_t(size_t)> ids_;
};

// The encoded form of one stored file, as the staging tree and the encode
// queue see it. Names are single directory entries.
struct EncodedInfo {
  uint64_t original_size = 0;
  std::array<uint8_t, 32> original_sha256{};
  uint64_t encoded_size = 0;
};

class StagingCodec {
 public:
  virtual ~StagingCodec() = default;
  virtual std::string_view name() const = 0;
  // The stored name of the encoded form of plain file `plain` ("X.safetensors"
  // -> "X.wcodec"); empty when this codec does not encode such files.
  virtual std::string encoded_name(std::string_view plain) const = 0;
  // The inverse: the plain name of encoded file `stored`; empty when
  // `stored` is not a name this codec writes.
  virtual std::string plain_name(std::string_view stored) const = 0;
  // Encodes bytes [0, size) of in_fd (pread) into out_fd from offset 0
  // (pwrite; out_fd is neither truncated, synced nor closed). `what` names
  // the input in errors. cfg.cancelled is asked between pieces of work.
  virtual Status encode(int in_fd, uint64_t size, int out_fd, const wcodec::EncodeConfig& cfg,
                        const std::string& what) const = 0;
  // Opens encoded file `fd` and checks its structure (decodes nothing).
  virtual Result<EncodedInfo> inspect(int fd, const std::string& what) const = 0;
  // Decodes everything, checking every checksum and the original SHA-256.
  virtual Status verify(int fd, const std::string& what) const = 0;
  // Hands the original bytes to `sink` in order, in pieces, each checked
  // against its checksum (the caller checks the whole against inspect()'s
  // SHA-256).
  virtual Status decode(int fd, const std::string& what,
                        const std::function<Status(const uint8_t*, size_t)>& sink) const = 0;
};

class StoreKind {
 public:
  virtual ~StoreKind() = default;
  // "wcodec", "gguf-view", ... (logs, stats).
  virtual std::string_view name() const = 0;
  // Appends what this kind presents in `dir`. Cheap: names, stat and small
  // index reads only; never decodes. Called again whenever the directory
  // changes.
  virtual void present(const StoreDir& dir, std::vector<Presentation>* out) const = 0;
  // Builds presentation `p` (one that present() gave for `dir`) from its
  // opened inputs. Decodes nothing. Errors name the stored input and the
  // field.
  virtual Result<std::shared_ptr<const VirtualFile>> build(const StoreDir& dir, const Presentation& p,
                                                           const BuildContext& ctx) const = 0;
  // The codec staging uses for the files this kind stores; null for none.
  virtual const StagingCodec* staging() const { return nullptr; }
};

using StoreKinds = std::vector<std::shared_ptr<const StoreKind>>;

// The staging codec of `kinds` that encodes plain file `name` (a single
// component), or null: the first that gives it an encoded name.
const StagingCodec* codec_for(const StoreKinds& kinds, std::string_view name);

// Encodes file `in` into `out` with `codec`, never leaving `out` half
// written: the encoding goes to a temporary file beside `out` that is
// fsynced and renamed over it (and the directory fsynced). For tools
// (`wcodec encode`).
Status encode_file(const StagingCodec& codec, const std::string& in, const std::string& out,
                   const wcodec::EncodeConfig& cfg);

// The kinds of a mount, in order of precedence (fs/src/kinds/kind_registry.cpp).
StoreKinds default_kinds();
// The staging codecs of `kinds`, in the same order.
std::vector<const StagingCodec*> staging_codecs(const StoreKinds& kinds);

// A plain stored file presented unchanged: one passthrough extent of `size`
// bytes (the size at open; reads past a shrunk end are short).
Result<std::shared_ptr<const VirtualFile>> make_passthrough_file(std::shared_ptr<const BackingFile> file, uint64_t size);

// In-memory bytes as a file (the stats snapshot).
Result<std::shared_ptr<const VirtualFile>> make_inline_file(std::string name, std::vector<uint8_t> bytes);

}  // namespace wcodecfs
