// python/src/_wcodec.cpp — the native part of the `wcodec` Python package
// (pybind11): a checkpoint file open for reading (a .wcodec container or a
// plain safetensors file) with byte-range and strided reads, reads into
// CUDA device memory through the GPU decoder (device_read.h; when built
// with CUDA), and file-level encode / decode. The package's Python layer (python/wcodec/__init__.py)
// builds the safetensors-style API (safe_open, get_slice, load_file) on it.
//
// Errors: every codec Status becomes a Python exception of the package
// (wcodec.WcodecError and its subclasses, defined in Python and registered
// here through _set_error_types) carrying the codec's message.
// GIL: released around every read, decode and encode; an encode's progress
// callback re-acquires it for the call.
// Thread-safety: a File may be read from many Python threads at once (the
// codec Reader is thread-safe; the plain-file path uses pread into the
// caller's buffer); close() must not race a read (the Python layer holds a
// lock for that).
#include <fcntl.h>
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <tuple>
#include <vector>

#include "device_read.h"
#include "file_read.h"
#include "wcodec/cpu.h"
#include "wcodec/encode.h"
#include "wcodec/reader.h"
#include "wcodec/safetensors.h"
#include "wcodecfs/store_kind.h"

namespace py = pybind11;

namespace {

// Python exception types, set once by the package's __init__.py.
struct ErrorTypes {
  py::object base, corruption, not_supported, io, out_of_range, invalid;
};
ErrorTypes& error_types() {
  static ErrorTypes* t = new ErrorTypes();  // lives as long as the interpreter
  return *t;
}

[[noreturn]] void raise_code(int code, const std::string& msg) {
  const ErrorTypes& t = error_types();
  py::object type;
  switch (code) {
    case static_cast<int>(wcodec::Code::kCorruption): type = t.corruption; break;
    case static_cast<int>(wcodec::Code::kNotSupported): type = t.not_supported; break;
    case static_cast<int>(wcodec::Code::kIOError): type = t.io; break;
    case static_cast<int>(wcodec::Code::kOutOfRange): type = t.out_of_range; break;
    case static_cast<int>(wcodec::Code::kInvalidArgument): type = t.invalid; break;
    default: type = t.base;
  }
  if (!type) type = py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
  PyErr_SetString(type.ptr(), msg.c_str());
  throw py::error_already_set();
}

void check(const wcodec::Status& s) {
  if (!s.ok()) raise_code(static_cast<int>(s.code()), s.message());
}

void check_fs(const wcodecfs::Status& s) {
  if (s.ok()) return;
  int code = static_cast<int>(wcodec::Code::kInternal);
  switch (s.code()) {
    case wcodecfs::Code::kCorruption: code = static_cast<int>(wcodec::Code::kCorruption); break;
    case wcodecfs::Code::kNotSupported: code = static_cast<int>(wcodec::Code::kNotSupported); break;
    case wcodecfs::Code::kInvalidArgument: code = static_cast<int>(wcodec::Code::kInvalidArgument); break;
    case wcodecfs::Code::kIOError:
    case wcodecfs::Code::kNotFound:
    case wcodecfs::Code::kPermission:
    case wcodecfs::Code::kNoSpace:
    case wcodecfs::Code::kNoResources: code = static_cast<int>(wcodec::Code::kIOError); break;
    default: break;
  }
  raise_code(code, s.message());
}

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// A writable, C-contiguous Python buffer.
struct OutBuffer {
  py::buffer_info info;
  uint8_t* data() const { return static_cast<uint8_t*>(info.ptr); }
  uint64_t size() const { return static_cast<uint64_t>(info.size) * static_cast<uint64_t>(info.itemsize); }
};
OutBuffer writable(const py::buffer& b, const char* what) {
  OutBuffer o{b.request(/*writable=*/true)};
  // A C-contiguous buffer: strides equal to the packed layout.
  py::ssize_t expect = o.info.itemsize;
  for (py::ssize_t d = o.info.ndim - 1; d >= 0; --d) {
    if (o.info.shape[d] > 1 && o.info.strides[d] != expect)
      raise_code(static_cast<int>(wcodec::Code::kInvalidArgument), std::string(what) + " must be C-contiguous");
    expect *= o.info.shape[d];
  }
  return o;
}

// One checkpoint file open for reading.
class File {
 public:
  explicit File(const std::string& path) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) raise_code(static_cast<int>(wcodec::Code::kIOError), errno_text("cannot open " + path));
    struct stat st;
    char magic[4] = {0, 0, 0, 0};
    const ssize_t got = ::pread(fd, magic, 4, 0);
    if (::fstat(fd, &st) != 0 || got < 0) {
      const std::string m = errno_text("cannot read " + path);
      ::close(fd);
      raise_code(static_cast<int>(wcodec::Code::kIOError), m);
    }
    if (got == 4 && std::memcmp(magic, wcodec::kMagic, 4) == 0) {
      wcodec::Result<std::unique_ptr<wcodec::Reader>> r = [&] {
        py::gil_scoped_release nogil;
        return wcodec::Reader::open_fd(fd, path);
      }();
      ::close(fd);
      check(r.status());
      reader_ = std::move(*r);
      if (reader_->source_is_gguf())
        raise_code(static_cast<int>(wcodec::Code::kNotSupported),
                   path + ": the container holds a GGUF file, not safetensors (decode it, or read it through the mount)");
      header_ = reader_->header();
      size_ = reader_->original_size();
    } else {
      fd_ = fd;
      size_ = static_cast<uint64_t>(st.st_size);
      auto h = [&] {
        py::gil_scoped_release nogil;
        return read_plain_header();
      }();
      if (!h.ok()) {
        ::close(fd_);
        fd_ = -1;
      }
      check(h.status());
      header_ = std::move(*h);
    }
  }
  ~File() { close(); }

  void close() {
    std::unique_lock<std::shared_mutex> lk(mu_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    reader_.reset();
    closed_ = true;
  }

  std::string kind() const { return reader_ ? "wcodec" : "safetensors"; }
  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

  py::object metadata() const {
    if (!header_.metadata) return py::none();
    py::dict d;
    for (const auto& [k, v] : *header_.metadata) d[py::str(k)] = py::str(v);
    return d;
  }

  // [(name, dtype, shape, absolute begin, absolute end)] in file order.
  py::list tensors() const {
    py::list out;
    for (const wcodec::TensorInfo& t : header_.tensors) {
      py::list shape;
      for (uint64_t s : t.shape) shape.append(s);
      out.append(py::make_tuple(t.name, wcodec::dtype_name(t.dtype), shape, header_.data_start + t.begin,
                                header_.data_start + t.end));
    }
    return out;
  }

  // [(stored offset, stored size, original offset, original size, method)];
  // method 3 (format 2.11): a zstd group's chunk, whose stored range is its
  // group's frame, shared with the group's other chunks.
  // of every chunk, in original order (empty for a plain file).
  py::list chunks() const {
    py::list out;
    if (!reader_) return out;
    for (size_t i = 0; i < reader_->num_chunks(); ++i) {
      const wcodec::ChunkEntry& e = reader_->chunk(i);
      out.append(py::make_tuple(e.file_offset, e.stored_size, e.decoded_offset, e.decoded_size, e.method));
    }
    return out;
  }

  // Original bytes [offset, offset + len(out)) into `out`.
  void read(uint64_t offset, const py::buffer& out) {
    const OutBuffer o = writable(out, "the output buffer");
    wcodec::Status st;
    {
      py::gil_scoped_release nogil;
      std::shared_lock<std::shared_mutex> lk(mu_);
      st = closed_ ? wcodec::Status::Invalid(path_ + " is closed") : read_range(offset, o.size(), o.data());
    }
    check(st);
  }

  // Runs of `run_len` original bytes starting at each of `offsets` (a
  // uint64 buffer, ascending), packed one after the other into `out`. Each
  // chunk the runs touch is decoded once; no other chunk is decoded.
  void read_runs(const py::buffer& offsets, uint64_t run_len, const py::buffer& out) {
    const py::buffer_info offs = offsets.request();
    if (offs.itemsize != 8 || offs.ndim != 1 || (offs.shape[0] > 1 && offs.strides[0] != 8))
      raise_code(static_cast<int>(wcodec::Code::kInvalidArgument), "offsets must be a contiguous 1-d uint64 array");
    const OutBuffer o = writable(out, "the output buffer");
    const uint64_t n = static_cast<uint64_t>(offs.shape[0]);
    if (run_len != 0 && o.size() / run_len < n)
      raise_code(static_cast<int>(wcodec::Code::kInvalidArgument),
                 "output buffer of " + std::to_string(o.size()) + " bytes is smaller than " + std::to_string(n) +
                     " runs of " + std::to_string(run_len));
    wcodec::Status st;
    {
      py::gil_scoped_release nogil;
      std::shared_lock<std::shared_mutex> lk(mu_);
      st = closed_ ? wcodec::Status::Invalid(path_ + " is closed")
                   : read_runs_impl(static_cast<const uint64_t*>(offs.ptr), n, run_len, o.data());
    }
    check(st);
  }

  // Original bytes into CUDA device memory: `targets` is a list of
  // (offset, length, device address) on device `device`, decoded by the
  // GPU decoder (device_read.h; HOST_DEVICE: host addresses, the same steps
  // on the CPU). Containers only.
  void read_device(const std::vector<std::tuple<uint64_t, uint64_t, uint64_t>>& targets, int device) {
    std::vector<wcodec_py::DeviceTarget> ts;
    ts.reserve(targets.size());
    for (const auto& [off, len, dst] : targets) ts.push_back(wcodec_py::DeviceTarget{off, len, dst});
    wcodec::Status st;
    {
      py::gil_scoped_release nogil;
      std::shared_lock<std::shared_mutex> lk(mu_);
      st = closed_  ? wcodec::Status::Invalid(path_ + " is closed")
           : !reader_ ? wcodec::Status::Invalid(path_ + ": a plain safetensors file has nothing to decode on the GPU")
                      : wcodec_py::read_to_device(*reader_, ts, device);
    }
    check(st);
  }

  // Checks checksums (full: decodes everything and checks the SHA-256 of
  // the original). Plain files have nothing to check.
  void verify(bool full) {
    if (!reader_) return;
    wcodec::Status st;
    {
      py::gil_scoped_release nogil;
      std::shared_lock<std::shared_mutex> lk(mu_);
      st = closed_ ? wcodec::Status::Invalid(path_ + " is closed") : reader_->verify(full);
    }
    check(st);
  }

 private:
  wcodec::Result<wcodec::SafetensorsHeader> read_plain_header() {
    uint8_t len8[8];
    if (size_ < 8 || ::pread(fd_, len8, 8, 0) != 8)
      return wcodec::Status::Corruption(path_ + ": file of " + std::to_string(size_) +
                                        " bytes is neither a .wcodec container nor a safetensors file "
                                        "(shorter than the 8-byte header length)");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len8[i];
    const uint64_t want = std::min<uint64_t>(size_, 8 + std::min<uint64_t>(n, wcodec::kMaxSafetensorsHeader));
    std::vector<uint8_t> prefix(want);
    WC_RETURN_IF_ERROR(wcodec::pread_exact(fd_, 0, want, prefix.data(), path_));
    return wcodec::parse_safetensors_header(prefix.data(), prefix.size(), size_, path_);
  }

  wcodec::Status pread_all(uint64_t off, uint64_t len, uint8_t* out) const {
    return wcodec::pread_exact(fd_, off, len, out, path_);
  }

  wcodec::Status read_range(uint64_t off, uint64_t len, uint8_t* out) const {
    if (off > size_ || len > size_ - off)
      return wcodec::Status::OutOfRange(path_ + ": read [" + std::to_string(off) + ", +" + std::to_string(len) +
                                        ") beyond the size " + std::to_string(size_));
    if (reader_) return reader_->read(off, len, out);
    return pread_all(off, len, out);
  }

  wcodec::Status read_runs_impl(const uint64_t* offs, uint64_t n, uint64_t run_len, uint8_t* out) const {
    for (uint64_t i = 0; i < n; ++i) {
      if (offs[i] > size_ || run_len > size_ - offs[i])
        return wcodec::Status::OutOfRange(path_ + ": run at " + std::to_string(offs[i]) + " of " +
                                          std::to_string(run_len) + " bytes beyond the size " + std::to_string(size_));
      if (i && offs[i] < offs[i - 1]) return wcodec::Status::Invalid("run offsets must be ascending");
    }
    if (!reader_) {
      // Plain file: adjacent runs merge into one pread.
      uint64_t i = 0;
      while (i < n) {
        uint64_t j = i + 1;
        while (j < n && offs[j] == offs[j - 1] + run_len) ++j;
        WC_RETURN_IF_ERROR(pread_all(offs[i], (j - i) * run_len, out + i * run_len));
        i = j;
      }
      return wcodec::Status::OK();
    }
    // Container: a run that covers whole chunks goes through Reader::read
    // (grouped decoding); pieces of chunks come from the one chunk decoded
    // last, so a chunk many short runs touch is decoded once.
    const wcodec::Reader& rd = *reader_;
    std::vector<uint8_t> chunk;
    size_t have = SIZE_MAX;
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t off = offs[i], left = run_len;
      uint8_t* dst = out + i * run_len;
      while (left > 0) {
        if (off < rd.data_start()) {
          WC_RETURN_IF_ERROR(rd.read(off, std::min(left, rd.data_start() - off), dst));
          const uint64_t k = std::min(left, rd.data_start() - off);
          off += k, dst += k, left -= k;
          continue;
        }
        const size_t gi = rd.chunk_at(off);
        if (gi == SIZE_MAX || gi >= rd.num_chunks())
          return wcodec::Status::Internal(path_ + ": no chunk holds offset " + std::to_string(off));
        const wcodec::ChunkEntry& e = rd.chunk(gi);
        const uint64_t cend = e.decoded_offset + e.decoded_size;
        if (gi != have && off == e.decoded_offset && left >= 2ull * e.decoded_size) {
          // Whole chunks ahead: read every chunk this run covers whole at once.
          uint64_t stop = off;
          size_t g = gi;
          while (g < rd.num_chunks() && rd.chunk(g).decoded_offset + rd.chunk(g).decoded_size <= off + left)
            stop = rd.chunk(g).decoded_offset + rd.chunk(g).decoded_size, ++g;
          WC_RETURN_IF_ERROR(rd.read(off, stop - off, dst));
          dst += stop - off, left -= stop - off, off = stop;
          continue;
        }
        if (gi != have) {
          chunk.resize(e.decoded_size);
          WC_RETURN_IF_ERROR(rd.decode_chunk(gi, chunk.data()));
          have = gi;
        }
        const uint64_t k = std::min(left, cend - off);
        std::memcpy(dst, chunk.data() + (off - e.decoded_offset), k);
        off += k, dst += k, left -= k;
      }
    }
    return wcodec::Status::OK();
  }

  std::string path_;
  int fd_ = -1;  // plain safetensors file
  std::unique_ptr<wcodec::Reader> reader_;
  wcodec::SafetensorsHeader header_;
  uint64_t size_ = 0;
  // Reads hold it shared; close() exclusive.
  mutable std::shared_mutex mu_;
  bool closed_ = false;
};

const wcodecfs::StoreKinds& kinds() {
  static const wcodecfs::StoreKinds* k = new wcodecfs::StoreKinds(wcodecfs::default_kinds());
  return *k;
}

// The stored name a store kind gives plain file `name` ("" if none encodes it).
std::string encoded_name(const std::string& name) {
  const wcodecfs::StagingCodec* c = wcodecfs::codec_for(kinds(), name);
  return c ? c->encoded_name(name) : std::string();
}

// The plain name of stored file `name` ("" if no kind writes such names).
std::string plain_name(const std::string& name) {
  for (const wcodecfs::StagingCodec* c : wcodecfs::staging_codecs(kinds())) {
    std::string p = c->plain_name(name);
    if (!p.empty()) return p;
  }
  return std::string();
}

// Encodes one file as `wcodec encode IN OUT` does (temporary file, fsync,
// rename). `progress(done, total)` is called from encoding threads.
void encode_file(const std::string& in, const std::string& out, int threads, uint64_t chunk_bytes,
                 const std::function<void(uint64_t, uint64_t)>& progress, bool fast_decode) {
  const std::string name = in.substr(in.rfind('/') == std::string::npos ? 0 : in.rfind('/') + 1);
  const wcodecfs::StagingCodec* c = wcodecfs::codec_for(kinds(), name);
  if (!c)
    raise_code(static_cast<int>(wcodec::Code::kInvalidArgument),
               in + ": no store kind encodes a file of this name (such as X.safetensors or X.gguf)");
  wcodec::EncodeConfig cfg;
  cfg.threads = std::max(1, threads);
  if (chunk_bytes) cfg.chunk_bytes = chunk_bytes;
  if (fast_decode) cfg.min_model_gain = 0.01;  // as wcodec encode --fast-decode
  if (progress) {
    cfg.progress = [&progress](uint64_t d, uint64_t t) {
      py::gil_scoped_acquire gil;
      try {
        progress(d, t);
      } catch (py::error_already_set& e) {
        e.discard_as_unraisable("wcodec encode progress callback");
      }
    };
  }
  wcodecfs::Status st;
  {
    py::gil_scoped_release nogil;
    st = wcodecfs::encode_file(*c, in, out, cfg);
  }
  check_fs(st);
}

// Decodes a container to the original file (atomic rename; SHA-256 checked).
void decode_file(const std::string& in, const std::string& out) {
  wcodec::Status st;
  {
    py::gil_scoped_release nogil;
    auto r = wcodec::Reader::open(in);
    st = r.ok() ? (*r)->decode_to_file(out) : r.status();
  }
  check(st);
}

}  // namespace

PYBIND11_MODULE(_wcodec, m) {
  m.doc() = "Native part of the wcodec package (use the wcodec module, not this one).";
  m.def(
      "_set_error_types",
      [](py::object base, py::object corruption, py::object not_supported, py::object io, py::object out_of_range,
         py::object invalid) {
        error_types() = {base, corruption, not_supported, io, out_of_range, invalid};
      },
      "Registers the package's exception classes (called once by wcodec/__init__.py).");
  py::class_<File>(m, "File")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def_property_readonly("kind", &File::kind)
      .def_property_readonly("path", &File::path)
      .def_property_readonly("size", &File::size)
      .def("metadata", &File::metadata)
      .def("tensors", &File::tensors)
      .def("chunks", &File::chunks)
      .def("read", &File::read, py::arg("offset"), py::arg("out"))
      .def("read_runs", &File::read_runs, py::arg("offsets"), py::arg("run_len"), py::arg("out"))
      .def("read_device", &File::read_device, py::arg("targets"), py::arg("device"))
      .def("verify", &File::verify, py::arg("full") = false)
      .def("close", &File::close);
  m.def("encoded_name", &encoded_name, py::arg("name"));
  m.def("plain_name", &plain_name, py::arg("name"));
  m.def("encode_file", &encode_file, py::arg("input"), py::arg("output"), py::arg("threads") = 1,
        py::arg("chunk_bytes") = 0, py::arg("progress") = nullptr, py::arg("fast_decode") = false);
  m.def("decode_file", &decode_file, py::arg("input"), py::arg("output"));
  m.def("cpu_path", [] { return std::string(wcodec::cpu_path_name()); });
  m.attr("cuda") = wcodec_py::device_read_built();
  // read_device's device for host memory: the GPU path's steps on the CPU (tests).
  m.attr("HOST_DEVICE") = wcodec_py::kHostDevice;
  m.def(
      "gpu_probe",
      [] {
        std::string name, why;
        {
          py::gil_scoped_release nogil;
          why = wcodec_py::device_why_not(&name);
        }
        return py::make_tuple(why.empty(), why, name);
      },
      "(usable, why not, device 0's name) of the GPU decoder.");
  m.def("_set_device_batch_bytes", &wcodec_py::set_device_batch_bytes, py::arg("n"),
        "Decoded bytes per GPU plan (tests); returns the previous value.");
  m.def("device_stats", [] {
    const wcodec_py::DeviceReadStats s = wcodec_py::device_read_stats();
    py::dict d;
    d["calls"] = s.calls;
    d["gpu_chunks"] = s.gpu_chunks;
    d["gpu_bytes"] = s.gpu_bytes;
    d["gpu_failed_chunks"] = s.gpu_failed_chunks;
    d["cpu_chunks"] = s.cpu_chunks;
    d["copied_bytes"] = s.copied_bytes;
    return d;
  });
}
