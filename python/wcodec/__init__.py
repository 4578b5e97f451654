"""wcodec: read and write compressed checkpoints from Python.

The package reads ``.wcodec`` containers (and plain ``.safetensors`` files
alike) with the ``safetensors`` API, decoding only the chunks a read
touches, and encodes / decodes checkpoints, single files or whole model
directories, as the ``wcodec`` command-line tool does::

    import wcodec
    wcodec.encode_checkpoint("model_dir", "store_dir")      # *.safetensors -> *.wcodec, other files copied
    with wcodec.safe_open("store_dir/model.wcodec", framework="pt") as f:
        w = f.get_tensor("lm_head.weight")
        rows = f.get_slice("model.embed_tokens.weight")[:16]
    state = wcodec.load_file("store_dir/model.wcodec")      # {name: torch.Tensor}
    wcodec.decode_checkpoint("store_dir", "copy_dir")       # the original files, byte for byte

With ``device="cuda"`` (framework "pt"), a package built with CUDA decodes
``.wcodec`` tensors with the GPU decoder straight into device memory, every
chunk's checksum checked on the device (``gpu_available()`` says whether
it can here; ``device_stats()`` counts what ran); otherwise tensors are
decoded on the CPU and copied to the device.

Errors are ``WcodecError`` (and subclasses) carrying the codec's message,
which names the file, the tensor or chunk and the value found. Decoding
releases the GIL, so several threads decode at once (load_file does).

Thread-safety: a file opened by safe_open may be read from several threads;
closing it while another thread reads it waits for that read.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np

from . import _wcodec


class WcodecError(Exception):
    """An operation of the codec failed; the message says on what and why."""


class CorruptionError(WcodecError):
    """Stored bytes violate the format (a checksum mismatch, a bad index)."""


class NotSupportedError(WcodecError):
    """Valid input this version does not handle (a future format, a dtype)."""


class WcodecIOError(WcodecError, OSError):
    """The operating system failed a read or write."""


class OutOfRangeError(WcodecError, IndexError):
    """An offset or length beyond the end of the file."""


class InvalidArgumentError(WcodecError, ValueError):
    """An argument the codec cannot use."""


_wcodec._set_error_types(
    WcodecError, CorruptionError, NotSupportedError, WcodecIOError, OutOfRangeError, InvalidArgumentError
)

__all__ = [
    "safe_open",
    "load_file",
    "encode_checkpoint",
    "decode_checkpoint",
    "WcodecError",
    "CorruptionError",
    "NotSupportedError",
    "WcodecIOError",
    "OutOfRangeError",
    "InvalidArgumentError",
    "cpu_path",
    "cuda_built",
    "gpu_available",
    "gpu_why_not",
    "device_stats",
]

PathLike = Union[str, "os.PathLike[str]"]

# safetensors dtype name -> (numpy dtype or None, torch dtype attribute name, bits per element)
_DTYPES: Dict[str, Tuple[Optional[str], Optional[str], int]] = {
    "BOOL": ("bool", "bool", 8),
    "U8": ("uint8", "uint8", 8),
    "I8": ("int8", "int8", 8),
    "I16": ("int16", "int16", 16),
    "U16": ("uint16", "uint16", 16),
    "F16": ("float16", "float16", 16),
    "BF16": (None, "bfloat16", 16),
    "I32": ("int32", "int32", 32),
    "U32": ("uint32", "uint32", 32),
    "F32": ("float32", "float32", 32),
    "F64": ("float64", "float64", 64),
    "I64": ("int64", "int64", 64),
    "U64": ("uint64", "uint64", 64),
    "F8_E5M2": (None, "float8_e5m2", 8),
    "F8_E4M3": (None, "float8_e4m3fn", 8),
    "F8_E8M0": (None, "float8_e8m0fnu", 8),
    "C64": ("complex64", "complex64", 64),
    "F4": (None, None, 4),
    "F6_E2M3": (None, None, 6),
    "F6_E3M2": (None, None, 6),
}

_FRAMEWORKS = {"np": "np", "numpy": "np", "pt": "pt", "torch": "pt", "pytorch": "pt"}


def cpu_path() -> str:
    """The CPU decoder path in use: "avx512", "avx2" or "scalar"."""
    return _wcodec.cpu_path()


def cuda_built() -> bool:
    """Whether this build has the GPU decoder (else device="cuda" decodes on the CPU and copies)."""
    return bool(_wcodec.cuda)


_gpu_probe: Optional[Tuple[bool, str, str]] = None
_gpu_probe_lock = threading.Lock()


def _probe() -> Tuple[bool, str, str]:
    global _gpu_probe
    with _gpu_probe_lock:
        if _gpu_probe is None:
            _gpu_probe = tuple(_wcodec.gpu_probe())  # type: ignore[assignment]
        return _gpu_probe  # type: ignore[return-value]


def gpu_available() -> bool:
    """Whether device="cuda" reads of .wcodec files decode on the GPU here
    (the package was built with CUDA and a CUDA device is usable)."""
    return _probe()[0]


def gpu_why_not() -> str:
    """"" when gpu_available(), else why not: "package built without CUDA",
    "no CUDA device", ..."""
    return _probe()[1]


_copy_lock = threading.Lock()
_copied = {"cpu_copied_tensors": 0, "cpu_copied_bytes": 0}


def device_stats() -> Dict[str, int]:
    """Counters of reads to a device, since the process started:
    ``gpu_chunks`` / ``gpu_bytes`` decoded and checked on the GPU,
    ``gpu_failed_chunks`` the GPU found malformed or mismatching (then
    decoded on the CPU, which raises if they are damaged), ``cpu_chunks`` /
    ``copied_bytes`` decoded on the CPU inside GPU reads and copied,
    ``calls`` GPU reads; ``cpu_copied_tensors`` / ``cpu_copied_bytes``
    tensors decoded (or read) on the CPU and copied to the device whole
    (no GPU decoder, or a plain safetensors file)."""
    d = dict(_wcodec.device_stats())
    with _copy_lock:
        d.update(_copied)
    return d


def _framework(name: str) -> str:
    fw = _FRAMEWORKS.get(name)
    if fw is None:
        raise InvalidArgumentError(f"framework {name!r} is not one of 'numpy', 'np', 'pt', 'torch'")
    return fw


class _TensorInfo:
    __slots__ = ("name", "dtype", "shape", "begin", "end")

    def __init__(self, name: str, dtype: str, shape: List[int], begin: int, end: int) -> None:
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.begin = begin
        self.end = end


def _empty(fw: str, dtype: str, shape: List[int], nbytes: int) -> Tuple[Any, np.ndarray]:
    """An uninitialised array of the framework and a uint8 view of its bytes to read into."""
    np_name, torch_name, _bits = _DTYPES[dtype]
    if fw == "np":
        if np_name is None:
            raise TypeError(f"data type {dtype!r} has no numpy equivalent (read it with framework='pt')")
        arr = np.empty(shape, dtype=np.dtype(np_name).newbyteorder("<"))
        return arr, arr.reshape(-1).view(np.uint8)
    import torch

    if torch_name is None or not hasattr(torch, torch_name):
        raise TypeError(f"data type {dtype!r} has no torch equivalent in torch {torch.__version__}")
    raw = torch.empty(nbytes, dtype=torch.uint8)
    t = raw.view(getattr(torch, torch_name)).reshape(shape)
    return t, raw.numpy()


def _to_device(x: Any, fw: str, device: str) -> Any:
    if fw == "np" or device == "cpu":
        return x
    with _copy_lock:
        _copied["cpu_copied_tensors"] += 1
        _copied["cpu_copied_bytes"] += x.numel() * x.element_size()
    return x.to(device)


def _torch_dtype(dtype: str) -> Any:
    import torch

    torch_name = _DTYPES[dtype][1]
    if torch_name is None or not hasattr(torch, torch_name):
        raise TypeError(f"data type {dtype!r} has no torch equivalent in torch {torch.__version__}")
    return getattr(torch, torch_name)


def _check_device(fw: str, device: str) -> Optional[int]:
    """Checks that `device` can be used; for a CUDA device, its index."""
    if device == "cpu":
        return None
    if fw == "np":
        raise InvalidArgumentError(f"framework numpy reads to the CPU only, not device {device!r}")
    try:
        import torch
    except ImportError:
        raise InvalidArgumentError(f"device {device!r} needs torch, which is not installed") from None
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as e:
        raise InvalidArgumentError(f"device {device!r}: {e}") from None
    if dev.type != "cuda":
        return None
    if not torch.cuda.is_available():
        why = "" if _wcodec.cuda else " (and this package was built without CUDA)"
        raise InvalidArgumentError(
            f"device {device!r}: no CUDA device is usable here (torch.cuda.is_available() is False){why}"
        )
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    if index >= torch.cuda.device_count():
        raise InvalidArgumentError(f"device {device!r}: there are {torch.cuda.device_count()} CUDA devices")
    return index


class _Slice:
    """A tensor of an open file, read in parts: ``f.get_slice(name)[0:16, ::2]``."""

    def __init__(self, owner: "safe_open", info: _TensorInfo) -> None:
        self._owner = owner
        self._info = info

    def get_shape(self) -> List[int]:
        return list(self._info.shape)

    def get_dtype(self) -> str:
        return self._info.dtype

    def __len__(self) -> int:
        if not self._info.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._info.shape[0]

    def __getitem__(self, index: Any) -> Any:
        return self._owner._read_slice(self._info, index)


def _normalize_index(index: Any, shape: List[int]) -> List[Tuple[int, int, int, bool]]:
    """Per dimension (start, stop, step, kept): the slice's positions along it."""
    if not isinstance(index, tuple):
        index = (index,)
    n_ell = sum(1 for i in index if i is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = len(index) - n_ell
    if n_real > len(shape):
        raise IndexError(f"too many indices for a tensor of {len(shape)} dimensions: {len(index)}")
    expanded: List[Any] = []
    for i in index:
        if i is Ellipsis:
            expanded.extend([slice(None)] * (len(shape) - n_real))
        else:
            expanded.append(i)
    expanded.extend([slice(None)] * (len(shape) - len(expanded)))
    out = []
    for d, (i, size) in enumerate(zip(expanded, shape)):
        if isinstance(i, slice):
            start, stop, step = i.indices(size)
            if step <= 0:
                raise IndexError(f"dimension {d}: step {step} is not supported (steps must be positive)")
            out.append((start, max(start, stop), step, True))
        elif isinstance(i, (int, np.integer)) and not isinstance(i, bool):
            k = int(i)
            if k < -size or k >= size:
                raise IndexError(f"dimension {d}: index {k} out of range for size {size}")
            k %= size
            out.append((k, k + 1, 1, False))
        else:
            raise TypeError(f"dimension {d}: index of type {type(i).__name__} is not supported (int, slice, ...)")
    return out


class safe_open:
    """Opens a ``.wcodec`` container or a plain ``.safetensors`` file with the
    API of ``safetensors.safe_open``.

    ``framework``: "numpy"/"np" (numpy arrays) or "pt"/"torch" (torch tensors).
    ``device``: where torch tensors are placed ("cpu", "cuda", "cuda:1", ...).
    Use as a context manager, or call close().
    """

    def __init__(self, filename: PathLike, framework: str = "numpy", device: Union[str, int] = "cpu") -> None:
        self._fw = _framework(framework)
        self._device = _device_name(device)
        self._cuda_index = _check_device(self._fw, self._device)
        self._file = _wcodec.File(os.fspath(filename))
        # GPU decoding: a container, read to a CUDA device, by a build that can.
        self._gpu = self._cuda_index is not None and self._file.kind == "wcodec" and gpu_available()
        self._infos: Dict[str, _TensorInfo] = {}
        for name, dtype, shape, begin, end in self._file.tensors():
            self._infos[name] = _TensorInfo(name, dtype, list(shape), begin, end)
        self._lock = threading.Lock()

    # The safetensors API -------------------------------------------------

    def keys(self) -> List[str]:
        """Tensor names, sorted."""
        return sorted(self._infos)

    def offset_keys(self) -> List[str]:
        """Tensor names in the order of their data in the file."""
        return list(self._infos)

    def metadata(self) -> Optional[Dict[str, str]]:
        """The file's ``__metadata__`` map, or None when it has none."""
        return self._file.metadata()

    def get_tensor(self, name: str) -> Any:
        """The whole tensor ``name`` (decodes the chunks that hold it)."""
        info = self._info(name)
        if self._gpu:
            return self._gpu_tensors([info])[0]
        arr, raw = _empty(self._fw, info.dtype, info.shape, info.end - info.begin)
        if raw.size:
            self._file.read(info.begin, raw)
        return _to_device(arr, self._fw, self._device)

    def get_slice(self, name: str) -> _Slice:
        """A handle reading parts of tensor ``name``; each part decodes only the chunks it touches."""
        return _Slice(self, self._info(name))

    # Beyond safetensors -------------------------------------------------

    @property
    def kind(self) -> str:
        """"wcodec" for a container, "safetensors" for a plain file."""
        return self._file.kind

    @property
    def decodes_on_gpu(self) -> bool:
        """Whether this file's tensors are decoded by the GPU decoder (device="cuda", a
        container, gpu_available()); else they are read on the CPU (and copied to the device)."""
        return self._gpu

    def verify(self, full: bool = False) -> None:
        """Checks the container's checksums (full: decodes everything and checks the SHA-256)."""
        self._file.verify(full)

    def tensor_nbytes(self, name: str) -> int:
        info = self._info(name)
        return info.end - info.begin

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # Internals ------------------------------------------------------------

    def _info(self, name: str) -> _TensorInfo:
        try:
            return self._infos[name]
        except KeyError:
            raise KeyError(f"{self._file.path}: no tensor named {name!r}") from None

    def _read_device(self, targets: List[Tuple[int, int, Any]]) -> None:
        """Decodes (offset, length, uint8 CUDA tensor) targets on the GPU.

        The tensors come from torch's allocator, which hands out memory that
        work queued on the current stream may still be using; that work is
        waited for first. The call returns when the bytes are written."""
        import torch

        if self._cuda_index != _wcodec.HOST_DEVICE:
            torch.cuda.current_stream(self._cuda_index).synchronize()
        self._file.read_device([(off, n, t.data_ptr()) for off, n, t in targets if n], self._cuda_index)

    def _gpu_tensors(self, infos: List[_TensorInfo]) -> List[Any]:
        """Whole tensors decoded on the GPU into new CUDA tensors (one allocation each)."""
        import torch

        dtypes = [_torch_dtype(i.dtype) for i in infos]
        raws = [torch.empty(i.end - i.begin, dtype=torch.uint8, device=self._device) for i in infos]
        self._read_device([(i.begin, i.end - i.begin, r) for i, r in zip(infos, raws)])
        return [r.view(dt).reshape(i.shape) for i, r, dt in zip(infos, raws, dtypes)]

    def _gpu_slice(self, info: _TensorInfo, dims: List[Tuple[int, int, int, bool]], out_shape: List[int]) -> Any:
        """A slice decoded on the GPU: the bytes of the rows (positions of
        the first dimension) from the first selected to the last, then the
        selection by torch's indexing on the device."""
        import torch

        dt = _torch_dtype(info.dtype)
        a0, b0, s0, keep0 = dims[0]
        n0 = len(range(a0, b0, s0))
        if n0 == 0 or any(len(range(a, b, s)) == 0 for a, b, s, _k in dims):
            return torch.empty(out_shape, dtype=dt, device=self._device)
        last = a0 + (n0 - 1) * s0
        rows = last + 1 - a0
        row_bytes = (info.end - info.begin) // info.shape[0]
        lo = info.begin + a0 * row_bytes
        raw = torch.empty(rows * row_bytes, dtype=torch.uint8, device=self._device)
        self._read_device([(lo, rows * row_bytes, raw)])
        block = raw.view(dt).reshape([rows] + list(info.shape[1:]))
        index: List[Any] = [slice(0, rows, s0) if keep0 else 0]
        index += [slice(a, b, s) if k else a for a, b, s, k in dims[1:]]
        # A fresh tensor with the standard strides, as the CPU path returns
        # (a view would keep the whole block alive; contiguous() keeps odd
        # strides on dimensions of size 1).
        sel = block[tuple(index)]
        return torch.empty(sel.shape, dtype=sel.dtype, device=sel.device).copy_(sel)

    def _emulate_gpu(self) -> None:
        """Tests: reads of this container (framework "pt", device "cpu") take
        the GPU path's steps (splitting, plans, scattering, fallback) with
        host memory, the plans run on the CPU by the GPU kernel's per-chunk code."""
        if self._fw != "pt" or self._device != "cpu" or self._file.kind != "wcodec":
            raise InvalidArgumentError("GPU emulation needs a container read with framework 'pt' to the CPU")
        self._gpu = True
        self._cuda_index = _wcodec.HOST_DEVICE

    def _read_slice(self, info: _TensorInfo, index: Any) -> Any:
        dims = _normalize_index(index, info.shape)
        bits = _DTYPES[info.dtype][2]
        out_shape_full = [len(range(a, b, s)) for a, b, s, _k in dims]
        out_shape = [n for n, (_a, _b, _s, k) in zip(out_shape_full, dims) if k]
        numel = 1
        for n in out_shape_full:
            numel *= n
        whole = all(a == 0 and b == size and s == 1 for (a, b, s, _k), size in zip(dims, info.shape))
        if whole:
            x = self._whole(info)
            return x.reshape(out_shape) if out_shape != info.shape else x
        if bits % 8:
            raise NotSupportedError(
                f"{self._file.path}: tensor {info.name!r} of dtype {info.dtype} is packed below a byte; "
                "only whole reads are supported"
            )
        item = bits // 8
        if self._gpu:
            return self._gpu_slice(info, dims, out_shape)
        arr, raw = _empty(self._fw, info.dtype, out_shape, numel * item)
        if numel == 0:
            return _to_device(arr, self._fw, self._device)
        shape = info.shape
        strides = [0] * len(shape)
        acc = item
        for d in range(len(shape) - 1, -1, -1):
            strides[d] = acc
            acc *= shape[d]
        # The trailing dimensions read whole make one contiguous run with the
        # last dimension that is not read whole (when its step is 1).
        k = len(dims) - 1
        run = item
        while k >= 0 and dims[k][0] == 0 and dims[k][1] == shape[k] and dims[k][2] == 1:
            run *= shape[k]
            k -= 1
        base = info.begin
        outer = k
        if k >= 0 and dims[k][2] == 1:
            run *= out_shape_full[k]
            base += dims[k][0] * strides[k]
            outer = k - 1
        offsets = np.array([base], dtype=np.uint64)
        for d in range(outer + 1):
            a, b, s, _keep = dims[d]
            pos = np.arange(a, b, s, dtype=np.uint64) * np.uint64(strides[d])
            offsets = (offsets[:, None] + pos[None, :]).reshape(-1)
        self._file.read_runs(np.ascontiguousarray(offsets), run, raw)
        return _to_device(arr, self._fw, self._device)

    def _whole(self, info: _TensorInfo) -> Any:
        return self.get_tensor(info.name)


def _device_name(device: Union[str, int, Any]) -> str:
    if isinstance(device, int):
        return f"cuda:{device}"
    return str(device)


def load_file(
    filename: PathLike, device: Union[str, int] = "cpu", framework: str = "pt", threads: Optional[int] = None
) -> Dict[str, Any]:
    """Every tensor of a ``.wcodec`` or ``.safetensors`` file, as ``safetensors.torch.load_file`` gives them.

    Tensors decode on ``threads`` threads at once (default: the CPUs). With
    ``device="cuda"`` and gpu_available(), a ``.wcodec`` file's tensors are
    decoded by the GPU decoder into device memory instead (``threads``
    unused); otherwise they are decoded on the CPU and copied.
    """
    dev = _device_name(device)
    fw = _framework(framework)
    _check_device(fw, dev)
    with safe_open(filename, framework=framework, device=dev) as g:
        if g._gpu:
            # Every tensor decoded on the GPU, in plans of many chunks.
            names = g.offset_keys()
            return dict(zip(names, g._gpu_tensors([g._info(n) for n in names])))
    with safe_open(filename, framework=framework, device="cpu") as f:
        names = f.offset_keys()
        workers = max(1, threads or os.cpu_count() or 1)
        if workers == 1 or len(names) < 2:
            loaded = {n: f.get_tensor(n) for n in names}
        else:
            # Largest first, so the last to finish are small.
            order = sorted(names, key=f.tensor_nbytes, reverse=True)
            with ThreadPoolExecutor(max_workers=min(workers, len(names))) as pool:
                values = list(pool.map(f.get_tensor, order))
            by_name = dict(zip(order, values))
            loaded = {n: by_name[n] for n in names}
    if dev != "cpu":
        loaded = {n: _to_device(t, fw, dev) for n, t in loaded.items()}
    return loaded


# Encoding and decoding ------------------------------------------------------


class _Progress:
    """A one-line progress display on stderr (a terminal or a notebook)."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.label = label
        self.enabled = enabled
        self.last = -1

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        pct = int(100 * done / total)
        if pct == self.last:
            return
        self.last = pct
        fill = pct * 30 // 100
        sys.stderr.write(f"\r{self.label[:32]:<32} [{'#' * fill}{' ' * (30 - fill)}] {pct:3d}%")
        sys.stderr.flush()

    def finish(self) -> None:
        if self.enabled and self.last >= 0:
            sys.stderr.write("\r" + " " * 72 + "\r")
            sys.stderr.flush()


def _walk_files(root: str) -> List[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in sorted(filenames):
            p = os.path.join(dirpath, f)
            if os.path.isfile(p):
                out.append(os.path.relpath(p, root))
    return out


def encode_checkpoint(
    input: PathLike,
    output: PathLike,
    threads: Optional[int] = None,
    progress: bool = True,
    chunk_bytes: Optional[int] = None,
    fast_decode: bool = False,
) -> List[Tuple[str, int, int]]:
    """Encodes a checkpoint as ``wcodec encode INPUT OUTPUT`` does.

    ``fast_decode=True`` is ``wcodec encode --fast-decode``: a model is kept
    only where it saves at least 1% against zstd / raw chunks (GGUF 4-bit
    codes then decode 1.5-2.3x faster on the avx2 path, files 0.2-0.4%
    larger).

    A file (``X.safetensors`` -> ``X.wcodec``, ``X.gguf`` -> ``X.gguf.wcodec``)
    is written to ``output`` (a path, or a directory to put it in). A
    directory (a Hugging Face model directory, say) is mirrored: every file a
    store kind encodes is encoded under its stored name, every other file
    (config.json, tokenizer files, model.safetensors.index.json) copied, so a
    mount of ``output`` presents the original directory.
    Returns (relative path, original bytes, stored bytes) per file written.
    """
    src = os.fspath(input)
    dst = os.fspath(output)
    nthreads = max(1, threads or os.cpu_count() or 1)
    report: List[Tuple[str, int, int]] = []

    def one(s: str, d: str, rel: str) -> None:
        prog = _Progress(os.path.basename(s), progress)
        try:
            _wcodec.encode_file(s, d, nthreads, chunk_bytes or 0, prog if progress else None, fast_decode)
        finally:
            prog.finish()
        report.append((rel, os.path.getsize(s), os.path.getsize(d)))

    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
        for rel in _walk_files(src):
            s = os.path.join(src, rel)
            enc = _wcodec.encoded_name(os.path.basename(rel))
            d = os.path.join(dst, os.path.dirname(rel), enc or os.path.basename(rel))
            os.makedirs(os.path.dirname(d), exist_ok=True)
            if enc:
                one(s, d, rel)
            else:
                shutil.copyfile(s, d)
                report.append((rel, os.path.getsize(s), os.path.getsize(d)))
        return report
    if not os.path.isfile(src):
        raise WcodecIOError(f"no such file or directory: {src}")
    enc = _wcodec.encoded_name(os.path.basename(src))
    if not enc:
        raise InvalidArgumentError(f"{src}: no store kind encodes a file of this name (such as X.safetensors or X.gguf)")
    if os.path.isdir(dst):
        dst = os.path.join(dst, enc)
    one(src, dst, os.path.basename(src))
    return report


def decode_checkpoint(input: PathLike, output: PathLike) -> List[str]:
    """The inverse of encode_checkpoint: the original files, byte for byte
    (each one's SHA-256 checked). A directory is mirrored (stored files
    decoded to their plain names, every other file copied). Returns the
    relative paths written."""
    src = os.fspath(input)
    dst = os.fspath(output)
    written: List[str] = []
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
        for rel in _walk_files(src):
            s = os.path.join(src, rel)
            plain = _wcodec.plain_name(os.path.basename(rel))
            d = os.path.join(dst, os.path.dirname(rel), plain or os.path.basename(rel))
            os.makedirs(os.path.dirname(d), exist_ok=True)
            if plain:
                _wcodec.decode_file(s, d)
            else:
                shutil.copyfile(s, d)
            written.append(os.path.relpath(d, dst))
        return written
    if not os.path.isfile(src):
        raise WcodecIOError(f"no such file or directory: {src}")
    if os.path.isdir(dst):
        plain = _wcodec.plain_name(os.path.basename(src))
        if not plain:
            raise InvalidArgumentError(f"{src}: not a stored file name (X.wcodec, X.gguf.wcodec); give an output path")
        dst = os.path.join(dst, plain)
    _wcodec.decode_file(src, dst)
    return [os.path.basename(dst)]
