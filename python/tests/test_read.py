"""wcodec.safe_open / load_file against the safetensors package on the real
model files of ../shared/data: every tensor of every file, whole and in
slices, numpy and torch, over the .wcodec container and over the plain
file; a damaged chunk raises; errors carry the codec's message."""

from __future__ import annotations

import os
import shutil
import threading
import unittest

import numpy as np

import wcodec
import wcodec_testenv as env

try:
    import safetensors
    from safetensors import safe_open as st_open
except ImportError:  # pragma: no cover - reported as a skip
    safetensors = None

try:
    import torch

    torch.set_num_threads(1)  # the suite copies small tensors; idle worker threads only contend
except ImportError:  # pragma: no cover - reported as a skip
    torch = None

# Tensors larger than this get a few slices (rows, columns, steps) rather
# than the whole list: every chunk of them is decoded for each column slice.
BIG_TENSOR_BYTES = 1 << 20


def _slices(shape, nbytes=0):
    """Indexes exercising rows, columns, steps, ints, negative indexes, bounds
    past the end and ellipsis."""
    if not shape:
        return [()]
    n0 = shape[0]
    out = [
        slice(0, min(3, n0)),
        slice(1, None),
        slice(n0 // 3, n0 - n0 // 4),
        slice(None, None, 3),
        slice(-2, None),
        n0 // 2,
        -1,
        (Ellipsis,),
    ]
    if len(shape) >= 2:
        n1 = shape[1]
        out += [
            (slice(None), slice(0, min(5, n1))),
            (slice(None), slice(1, None, 2)),
            (slice(1, 4), slice(n1 // 2, None, 3)),
            (Ellipsis, shape[-1] - 1),
            (slice(None, None, 5), slice(None, None, 7)),
            (n0 - 1, slice(1, -1)),
        ]
    if len(shape) >= 3:
        out += [(slice(None), 0, slice(None, None, 2)), (Ellipsis, slice(1, 2))]
    if nbytes > BIG_TENSOR_BYTES:
        out = out[2:4] + out[-6:-4] if len(shape) >= 2 else out[2:4]
    return out


def _bytes_np(a):
    return np.ascontiguousarray(a).tobytes()


def _bytes_pt(t):
    u = torch.empty(tuple(t.shape), dtype=t.dtype)  # standard strides
    u.copy_(t.detach().cpu())
    if u.numel() == 0:
        return b""
    return u.reshape(-1).view(torch.uint8).numpy().tobytes()


@unittest.skipIf(safetensors is None, "the safetensors Python package is not installed")
class SafeOpenEqualsSafetensors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.encoded = env.encoded_data()

    def _compare(self, path_ours, path_ref, framework):
        tobytes = _bytes_np if framework == "np" else _bytes_pt
        n_tensors = n_slices = 0
        with wcodec.safe_open(path_ours, framework=framework) as ours, st_open(path_ref, framework) as ref:
            self.assertEqual(ours.keys(), ref.keys())
            self.assertEqual(ours.metadata(), ref.metadata())
            for name in ref.keys():
                with self.subTest(file=os.path.basename(path_ours), tensor=name, framework=framework):
                    try:
                        want = ref.get_tensor(name)
                    except TypeError as e:  # a dtype this framework lacks (numpy and BF16)
                        with self.assertRaises(TypeError, msg=str(e)):
                            ours.get_tensor(name)
                        continue
                    got = ours.get_tensor(name)
                    self.assertEqual(type(got), type(want))
                    self.assertEqual(got.dtype, want.dtype)
                    self.assertEqual(tuple(got.shape), tuple(want.shape))
                    self.assertEqual(tobytes(got), tobytes(want))
                    n_tensors += 1
                    rs, os_ = ref.get_slice(name), ours.get_slice(name)
                    self.assertEqual(os_.get_shape(), rs.get_shape())
                    self.assertEqual(os_.get_dtype(), rs.get_dtype())
                    for idx in _slices(rs.get_shape(), ours.tensor_nbytes(name)):
                        # safetensors takes a subset of numpy's indexing (no
                        # negative indexes, no bounds past the end); where it
                        # refuses, the whole tensor indexed by the framework
                        # is the reference.
                        try:
                            w = rs[idx]
                        except (OverflowError, safetensors.SafetensorError):
                            w = want[idx]
                        g = os_[idx]
                        self.assertEqual(tuple(g.shape), tuple(w.shape), f"slice {idx!r}")
                        self.assertEqual(g.dtype, w.dtype, f"slice {idx!r}")
                        self.assertEqual(tobytes(g), tobytes(w), f"slice {idx!r}")
                        n_slices += 1
        return n_tensors, n_slices

    def _compare_all(self, framework, plain=False):
        n = 0
        for src, enc in self.encoded.items():
            n += self._compare(src if plain else enc, src, framework)[0]
        self.assertGreater(n, 0)

    def test_every_tensor_of_every_file_numpy(self):
        self._compare_all("np")

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_every_tensor_of_every_file_torch(self):
        self._compare_all("pt")

    def test_plain_safetensors_files_read_the_same(self):
        for src in self.encoded:
            with wcodec.safe_open(src, framework="np") as f:
                self.assertEqual(f.kind, "safetensors")
        self._compare_all("np", plain=True)

    def test_offset_keys_follow_the_file(self):
        for src, enc in self.encoded.items():
            with wcodec.safe_open(enc, "np") as f:
                self.assertEqual(f.kind, "wcodec")
                with st_open(src, "np") as ref:
                    # safetensors gives offsets_keys() from 0.5 on; else compare sets.
                    want = ref.offset_keys() if hasattr(ref, "offset_keys") else sorted(ref.keys())
                    got = f.offset_keys() if hasattr(ref, "offset_keys") else sorted(f.offset_keys())
                    self.assertEqual(got, want)

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_load_file_equals_safetensors_torch(self):
        from safetensors.torch import load_file as st_load

        for src, enc in self.encoded.items():
            want = st_load(src)
            for threads in (1, 4):
                got = wcodec.load_file(enc, threads=threads)
                self.assertEqual(list(got), list(want))  # the file's order, as safetensors gives it
                for k in want:
                    self.assertEqual(got[k].dtype, want[k].dtype, k)
                    self.assertEqual(_bytes_pt(got[k]), _bytes_pt(want[k]), k)

    def test_load_file_numpy(self):
        from safetensors.numpy import load_file as st_load

        src = next(p for p in self.encoded if "stories260K.f32" in p)
        want = st_load(src)
        got = wcodec.load_file(self.encoded[src], framework="numpy")
        self.assertEqual(sorted(got), sorted(want))
        for k in want:
            self.assertEqual(_bytes_np(got[k]), _bytes_np(want[k]), k)

    def test_threads_share_one_file(self):
        src = next(p for p in self.encoded if "stories260K.f32" in p)
        ref = st_open(src, "np")
        errors = []
        with wcodec.safe_open(self.encoded[src], "np") as f:
            names = f.keys()

            def work(k):
                try:
                    for name in names[k::4]:
                        if _bytes_np(f.get_tensor(name)) != _bytes_np(ref.get_tensor(name)):
                            errors.append(name)
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(repr(e))

            ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
        self.assertEqual(errors, [])


def _stories(encoded):
    src = next(p for p in encoded if "stories260K.f32" in p)
    return src, encoded[src]


class Errors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.encoded = env.encoded_data()
        cls.dir = env.scratch("errors")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def _damaged_copy(self, tensor):
        """A copy of stories260K.f32.wcodec with one byte of a chunk of `tensor` flipped."""
        src, enc = _stories(self.encoded)
        bad = os.path.join(self.dir, "damaged.wcodec")
        shutil.copyfile(enc, bad)
        f = wcodec.safe_open(enc, "np")
        info = f._info(tensor)
        chunks = [c for c in f._file.chunks() if info.begin <= c[2] < info.end]
        f.close()
        self.assertTrue(chunks, f"no chunk holds {tensor}")
        off, size, dec_off, dec_size, _method = chunks[len(chunks) // 2]
        with open(bad, "r+b") as fh:
            fh.seek(off + size // 2)
            b = fh.read(1)
            fh.seek(off + size // 2)
            fh.write(bytes([b[0] ^ 0x20]))
        return src, bad, dec_off - info.begin, dec_size

    def test_damaged_chunk_raises_instead_of_wrong_values(self):
        name = "model.layers.2.mlp.up_proj.weight"
        src, bad, chunk_at, chunk_len = self._damaged_copy(name)
        with wcodec.safe_open(bad, framework="np") as f:
            with self.assertRaises(wcodec.CorruptionError) as cm:
                f.get_tensor(name)
            self.assertIn(bad, str(cm.exception))
            # A slice through the damaged chunk raises; so does load_file.
            row_bytes = f.get_slice(name).get_shape()[1] * 4
            row = chunk_at // row_bytes
            with self.assertRaises(wcodec.CorruptionError):
                f.get_slice(name)[row : row + 1]
            with self.assertRaises(wcodec.CorruptionError):
                f.get_slice(name)[:, 1]
            # Other tensors still read, equal to the original.
            with st_open(src, "np") as ref:
                other = "model.layers.0.mlp.up_proj.weight"
                self.assertEqual(_bytes_np(f.get_tensor(other)), _bytes_np(ref.get_tensor(other)))
            with self.assertRaises(wcodec.CorruptionError):
                f.verify(full=False)
        with self.assertRaises(wcodec.CorruptionError):
            wcodec.load_file(bad, framework="numpy")

    def test_not_a_checkpoint(self):
        p = os.path.join(self.dir, "junk.safetensors")
        with open(p, "wb") as fh:
            fh.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
        with self.assertRaises(wcodec.WcodecError) as cm:
            wcodec.safe_open(p)
        self.assertIn(p, str(cm.exception))

    def test_truncated_container(self):
        _src, enc = _stories(self.encoded)
        p = os.path.join(self.dir, "truncated.wcodec")
        with open(enc, "rb") as a, open(p, "wb") as b:
            b.write(a.read(os.path.getsize(enc) - 100))
        with self.assertRaises(wcodec.CorruptionError) as cm:
            wcodec.safe_open(p)
        self.assertIn(p, str(cm.exception))

    def test_missing_file_is_an_os_error(self):
        with self.assertRaises(OSError) as cm:
            wcodec.safe_open(os.path.join(self.dir, "nope.wcodec"))
        self.assertIsInstance(cm.exception, wcodec.WcodecError)

    def test_bad_names_and_indexes(self):
        _src, enc = _stories(self.encoded)
        with wcodec.safe_open(enc, "np") as f:
            with self.assertRaises(KeyError):
                f.get_tensor("no.such.tensor")
            s = f.get_slice("model.embed_tokens.weight")
            with self.assertRaises(IndexError):
                s[512]
            with self.assertRaises(IndexError):
                s[0, 0, 0]
            with self.assertRaises(IndexError):
                s[::-1]
        with self.assertRaises(ValueError):
            wcodec.safe_open(enc, framework="tensorflow")
        f = wcodec.safe_open(enc, "np")
        f.close()
        with self.assertRaises(wcodec.WcodecError):
            f.get_tensor("model.norm.weight")


if __name__ == "__main__":
    unittest.main()
