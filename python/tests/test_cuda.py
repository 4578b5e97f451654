"""device="cuda": tensors that wcodec.safe_open / load_file read onto the
GPU equal the CPU ones byte for byte, and come from the GPU decoder when
the package has one.

- GpuPathOnHost (any machine with torch): the GPU path's own steps
  (splitting reads into whole and partial chunks, plans, scattering into
  the tensors' memory, the CPU fallback, errors) run with host memory, the
  plans run on the CPU by the GPU kernel's per-chunk code. Every tensor and
  slices of every file equal the CPU path's; a damaged chunk raises.
- NoDevice (machines without a CUDA device): device="cuda" is a clear error.
- CudaDevice (a CUDA device): every tensor of every file, whole, sliced and
  through load_file, equals the CPU tensor byte for byte; with the GPU
  decoder in the package, device_stats() shows it decoded them (no CPU
  fallback); a damaged chunk raises CorruptionError; plain .safetensors
  files are copied. Skipped, saying why, without a device or without the
  GPU decoder ("package built without CUDA").
"""

from __future__ import annotations

import os
import shutil
import unittest

import wcodec
import wcodec_testenv as env
from wcodec import _wcodec

try:
    import torch

    _have_torch = True
    _why_no_device = "" if torch.cuda.is_available() else "no CUDA device (torch.cuda.is_available() is False)"
except ImportError:  # pragma: no cover
    _have_torch = False
    _why_no_device = "torch is not installed"

if _why_no_device:
    _why_no_gpu_decoder = _why_no_device
elif not wcodec.cuda_built():
    _why_no_gpu_decoder = "package built without CUDA (device='cuda' decodes on the CPU and copies)"
elif not wcodec.gpu_available():
    _why_no_gpu_decoder = f"the package's GPU decoder cannot run here: {wcodec.gpu_why_not()}"
else:
    _why_no_gpu_decoder = ""

def _indexes(shape):
    """The indexes every tensor is read with: rows, a column, steps, a single
    row, the last row, an empty range, an ellipsis."""
    if not shape:
        return []
    out = [slice(0, 2), slice(1, None, 2), slice(3, 3)]
    if shape[0]:
        out.append(-1)
    if len(shape) >= 2:
        out += [(slice(0, None, 3), slice(1, None, 2)), (Ellipsis, slice(0, 1))]
        if shape[1]:
            out.append((slice(None), shape[1] // 2))
        if shape[0] > 2:
            out.append((slice(1, -1), slice(None)))
    return out


def _bytes(t):
    u = t.detach().cpu().contiguous()
    return u.reshape(-1).view(torch.uint8).numpy().tobytes() if u.numel() else b""


def _small_files():
    """{original: encoded} of the data files small enough for the host emulation (a scalar decoder)."""
    return {s: e for s, e in env.encoded_data().items() if os.path.getsize(s) <= env.QUICK_MAX_BYTES}


def _damaged_copy(test, src, dst_dir):
    """`src` encoded in small chunks (several per tensor), with one byte in
    the middle of the middle chunk of the tensor of most chunks flipped:
    (path, tensor name, row of the damaged chunk, the undamaged encoding)."""
    enc = os.path.join(dst_dir, "small-chunks.wcodec")
    wcodec.encode_checkpoint(src, enc, progress=False, chunk_bytes=16384)
    with wcodec.safe_open(enc, "pt") as f:
        all_chunks = f._file.chunks()

        def chunks_of(n):
            i = f._info(n)
            return [c for c in all_chunks if i.begin <= c[2] < i.end]

        name = max(f.keys(), key=lambda n: (len(chunks_of(n)), n))
        info = f._info(name)
        chunks = chunks_of(name)
        test.assertGreater(len(chunks), 2, f"{name} of {enc} has fewer than 3 chunks")
        off, size, dec_off, _dec_size, _method = chunks[len(chunks) // 2]
        row = (dec_off - info.begin) // ((info.end - info.begin) // info.shape[0])
    bad = os.path.join(dst_dir, "damaged.wcodec")
    shutil.copyfile(enc, bad)
    with open(bad, "r+b") as fh:
        fh.seek(off + size // 2)
        b = fh.read(1)
        fh.seek(off + size // 2)
        fh.write(bytes([b[0] ^ 0x20]))
    return bad, name, row, enc


@unittest.skipUnless(_have_torch, "SKIPPED: GPU path on the host: torch is not installed")
class GpuPathOnHost(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.files = _small_files()
        if not cls.files:
            raise unittest.SkipTest("SKIPPED: no data file small enough for the host emulation")

    def setUp(self):
        self.dir = env.scratch("gpu-host")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def _compare_file(self, enc):
        with wcodec.safe_open(enc, "pt") as c, wcodec.safe_open(enc, "pt") as g:
            g._emulate_gpu()
            self.assertTrue(g.decodes_on_gpu)
            names = c.offset_keys()
            # Every tensor at once, as load_file reads them (many targets per call).
            for name, t in zip(names, g._gpu_tensors([g._info(n) for n in names])):
                want = c.get_tensor(name)
                self.assertEqual((t.dtype, tuple(t.shape)), (want.dtype, tuple(want.shape)), name)
                self.assertEqual(_bytes(t), _bytes(want), name)
            for name in names:
                self.assertEqual(_bytes(g.get_tensor(name)), _bytes(c.get_tensor(name)), name)
                shape = c.get_slice(name).get_shape()
                for idx in _indexes(shape):
                    got, want = g.get_slice(name)[idx], c.get_slice(name)[idx]
                    self.assertEqual(tuple(got.shape), tuple(want.shape), f"{name}{idx}")
                    self.assertEqual(got.stride(), want.stride(), f"{name}{idx}: the CPU path's layout")
                    self.assertEqual(_bytes(got), _bytes(want), f"{name}{idx}")

    def test_every_tensor_and_slice_equals_the_cpu_path(self):
        for _src, enc in self.files.items():
            before = wcodec.device_stats()
            self._compare_file(enc)
            after = wcodec.device_stats()
            with wcodec.safe_open(enc, "pt") as f:
                total = sum(f.tensor_nbytes(n) for n in f.keys())
            # Every chunk went through the plans; none needed the CPU.
            self.assertGreaterEqual(after["gpu_bytes"] - before["gpu_bytes"], 2 * total, enc)
            self.assertEqual(after["gpu_failed_chunks"], before["gpu_failed_chunks"], enc)
            self.assertEqual(after["cpu_chunks"], before["cpu_chunks"], enc)

    def test_reads_split_into_many_plans(self):
        # One chunk per plan: a read's chunks are scattered over many launches.
        old = _wcodec._set_device_batch_bytes(1)
        try:
            enc = sorted(self.files.values())[0]
            before = wcodec.device_stats()
            self._compare_file(enc)
            self.assertGreater(wcodec.device_stats()["gpu_chunks"], before["gpu_chunks"])
        finally:
            _wcodec._set_device_batch_bytes(old)

    def test_damaged_chunk_raises_and_the_rest_reads(self):
        src = next(s for s in self.files if "stories260K.f32" in s)
        bad, name, row, enc = _damaged_copy(self, src, self.dir)
        with wcodec.safe_open(bad, "pt") as g, wcodec.safe_open(enc, "pt") as c:
            g._emulate_gpu()
            before = wcodec.device_stats()
            with self.assertRaises(wcodec.CorruptionError) as cm:
                g.get_tensor(name)
            msg = str(cm.exception)
            self.assertIn(bad, msg)
            self.assertIn(name, msg)
            self.assertIn("the GPU decoder found it damaged too", msg)
            self.assertGreater(wcodec.device_stats()["gpu_failed_chunks"], before["gpu_failed_chunks"])
            # Slices through the damaged chunk raise (a row inside it; a column through every row).
            with self.assertRaises(wcodec.CorruptionError):
                g.get_slice(name)[row : row + 1]
            with self.assertRaises(wcodec.CorruptionError):
                g.get_slice(name)[:, 1]
            # All tensors at once raise; the others still read right.
            with self.assertRaises(wcodec.CorruptionError):
                g._gpu_tensors([g._info(n) for n in g.offset_keys()])
            for other in c.keys():
                if other != name:
                    self.assertEqual(_bytes(g.get_tensor(other)), _bytes(c.get_tensor(other)), other)
            # Rows before the damaged chunk read right.
            if row > 1:
                self.assertEqual(_bytes(g.get_slice(name)[: row - 1]), _bytes(c.get_slice(name)[: row - 1]))

    def test_emulation_needs_a_container(self):
        src = next(iter(self.files))
        with wcodec.safe_open(src, "pt") as f:
            with self.assertRaises(wcodec.InvalidArgumentError):
                f._emulate_gpu()
            with self.assertRaises(wcodec.InvalidArgumentError):
                f._file.read_device([(0, 1, 0)], _wcodec.HOST_DEVICE)

    def test_device_read_errors(self):
        enc = sorted(self.files.values())[0]
        with wcodec.safe_open(enc, "pt") as f:
            size = f._file.size
            buf = torch.empty(16, dtype=torch.uint8)
            with self.assertRaises(wcodec.OutOfRangeError) as cm:
                f._file.read_device([(size - 8, 16, buf.data_ptr())], _wcodec.HOST_DEVICE)
            self.assertIn(enc, str(cm.exception))
            with self.assertRaises(wcodec.InvalidArgumentError):
                f._file.read_device([(0, 16, 0)], _wcodec.HOST_DEVICE)
            with self.assertRaises(wcodec.InvalidArgumentError):
                f._file.read_device([(0, 16, buf.data_ptr())], -7)
            # The header bytes come through too (read on the host).
            f._file.read_device([(0, 16, buf.data_ptr())], _wcodec.HOST_DEVICE)
            with open(next(s for s, e in self.files.items() if e == enc), "rb") as fh:
                self.assertEqual(buf.numpy().tobytes(), fh.read(16))
        if not wcodec.cuda_built():
            with wcodec.safe_open(enc, "pt") as f:
                with self.assertRaises(wcodec.NotSupportedError) as cm:
                    f._file.read_device([(0, 16, buf.data_ptr())], 0)
                self.assertIn("built without CUDA", str(cm.exception))


@unittest.skipUnless(_have_torch, "SKIPPED: device errors: torch is not installed")
@unittest.skipIf(not _why_no_device, "SKIPPED: no-device errors: a CUDA device is present")
class NoDevice(unittest.TestCase):
    def test_cuda_without_a_device_is_a_clear_error(self):
        enc = sorted(_small_files().values())[0] if _small_files() else None
        if enc is None:
            self.skipTest("SKIPPED: no data file")
        for dev in ("cuda", "cuda:0", 0):
            with self.assertRaises(wcodec.InvalidArgumentError) as cm:
                wcodec.safe_open(enc, "pt", device=dev)
            self.assertIn("no CUDA device", str(cm.exception))
            with self.assertRaises(wcodec.InvalidArgumentError):
                wcodec.load_file(enc, device=dev)
        with self.assertRaises(wcodec.InvalidArgumentError):
            wcodec.safe_open(enc, "numpy", device="cuda")
        with self.assertRaises(wcodec.InvalidArgumentError):
            wcodec.safe_open(enc, "pt", device="nonsense")
        if not wcodec.cuda_built():
            self.assertEqual(wcodec.gpu_why_not(), "package built without CUDA")
        self.assertFalse(wcodec.gpu_available())


@unittest.skipIf(_why_no_device, f"SKIPPED: GPU tests: {_why_no_device}")
class CudaDevice(unittest.TestCase):
    def setUp(self):
        self.dir = env.scratch("cuda")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def _compare(self, path):
        """Every tensor of `path`, whole, sliced and by load_file, on the device equals the CPU's."""
        with wcodec.safe_open(path, "pt", device="cuda") as g, wcodec.safe_open(path, "pt") as c:
            for name in c.keys():
                t = g.get_tensor(name)
                self.assertEqual(t.device.type, "cuda")
                self.assertEqual(_bytes(t), _bytes(c.get_tensor(name)), name)
                for idx in _indexes(c.get_slice(name).get_shape()):
                    got, want = g.get_slice(name)[idx], c.get_slice(name)[idx]
                    self.assertEqual(got.device.type, "cuda")
                    self.assertEqual(tuple(got.shape), tuple(want.shape), f"{name}{idx}")
                    self.assertEqual(got.stride(), want.stride(), f"{name}{idx}: the CPU path's layout")
                    self.assertEqual(_bytes(got), _bytes(want), f"{name}{idx}")
            on_gpu = g.decodes_on_gpu
        got = wcodec.load_file(path, device="cuda")
        want = wcodec.load_file(path)
        self.assertEqual(list(got), list(want))
        for k in want:
            self.assertEqual(got[k].device.type, "cuda")
            self.assertEqual(_bytes(got[k]), _bytes(want[k]), k)
        return on_gpu

    def test_tensors_on_the_device_equal_the_cpu_ones(self):
        for _src, enc in env.encoded_data().items():
            self._compare(enc)

    def test_plain_safetensors_files_are_copied(self):
        src = sorted(env.data_files(), key=os.path.getsize)[0]
        before = wcodec.device_stats()
        self.assertFalse(self._compare(src))
        after = wcodec.device_stats()
        self.assertGreater(after["cpu_copied_tensors"], before["cpu_copied_tensors"])
        self.assertEqual(after["calls"], before["calls"])

    @unittest.skipIf(_why_no_gpu_decoder, f"SKIPPED: GPU decoder tests: {_why_no_gpu_decoder}")
    def test_the_gpu_decoder_decodes_every_chunk(self):
        for _src, enc in env.encoded_data().items():
            before = wcodec.device_stats()
            self.assertTrue(self._compare(enc), enc)
            after = wcodec.device_stats()
            with wcodec.safe_open(enc, "pt") as f:
                total = sum(f.tensor_nbytes(n) for n in f.keys())
            # get_tensor and load_file: every byte at least twice on the GPU, none on the CPU.
            self.assertGreaterEqual(after["gpu_bytes"] - before["gpu_bytes"], 2 * total, enc)
            self.assertEqual(after["gpu_failed_chunks"], before["gpu_failed_chunks"], enc)
            self.assertEqual(after["cpu_chunks"], before["cpu_chunks"], enc)
            self.assertEqual(after["cpu_copied_tensors"], before["cpu_copied_tensors"], enc)

    @unittest.skipIf(_why_no_gpu_decoder, f"SKIPPED: GPU decoder tests: {_why_no_gpu_decoder}")
    def test_damaged_chunk_raises(self):
        src = next(s for s in env.data_files() if "stories260K.f32" in s)
        bad, name, row, enc = _damaged_copy(self, src, self.dir)
        with wcodec.safe_open(bad, "pt", device="cuda") as g, wcodec.safe_open(enc, "pt") as c:
            before = wcodec.device_stats()
            with self.assertRaises(wcodec.CorruptionError) as cm:
                g.get_tensor(name)
            self.assertIn(bad, str(cm.exception))
            self.assertIn("the GPU decoder found it damaged too", str(cm.exception))
            self.assertGreater(wcodec.device_stats()["gpu_failed_chunks"], before["gpu_failed_chunks"])
            with self.assertRaises(wcodec.CorruptionError):
                g.get_slice(name)[row : row + 1]
            with self.assertRaises(wcodec.CorruptionError):
                g.get_slice(name)[:, 1]
            for other in c.keys():
                if other != name:
                    self.assertEqual(_bytes(g.get_tensor(other)), _bytes(c.get_tensor(other)), other)
        with self.assertRaises(wcodec.CorruptionError):
            wcodec.load_file(bad, device="cuda")

    @unittest.skipIf(_why_no_gpu_decoder, f"SKIPPED: GPU decoder tests: {_why_no_gpu_decoder}")
    def test_reads_leave_the_current_device_and_stream_alone(self):
        enc = sorted(_small_files().values() or env.encoded_data().values())[0]
        dev = torch.cuda.current_device()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            x = torch.ones(1 << 20, device="cuda")  # work queued on another stream
            got = wcodec.load_file(enc, device="cuda")
            self.assertEqual(torch.cuda.current_stream(), s)
        self.assertEqual(torch.cuda.current_device(), dev)
        self.assertEqual(float(x.sum()), float(1 << 20))
        want = wcodec.load_file(enc)
        for k in want:
            self.assertEqual(_bytes(got[k]), _bytes(want[k]), k)


if __name__ == "__main__":
    unittest.main()
