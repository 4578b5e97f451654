"""device="cuda": tensors read by wcodec.safe_open / load_file onto the GPU
equal the CPU ones byte for byte. Skips, saying why, without torch or a
CUDA device. (This build decodes on the CPU and copies to the device:
wcodec.cuda_built() is False; see python/README.md.)"""

from __future__ import annotations

import unittest

import wcodec
import wcodec_testenv as env

try:
    import torch

    _why_not = "" if torch.cuda.is_available() else "no CUDA device (torch.cuda.is_available() is False)"
except ImportError:  # pragma: no cover
    _why_not = "torch is not installed"


def _bytes(t):
    u = torch.empty(tuple(t.shape), dtype=t.dtype)
    u.copy_(t.detach().cpu())
    return u.reshape(-1).view(torch.uint8).numpy().tobytes() if u.numel() else b""


@unittest.skipIf(_why_not, f"SKIPPED: GPU tests: {_why_not}")
class CudaDevice(unittest.TestCase):
    def test_tensors_on_the_device_equal_the_cpu_ones(self):
        for _src, enc in env.encoded_data().items():
            with wcodec.safe_open(enc, "pt", device="cuda") as g, wcodec.safe_open(enc, "pt") as c:
                for name in c.keys():
                    t = g.get_tensor(name)
                    self.assertEqual(t.device.type, "cuda")
                    self.assertEqual(_bytes(t), _bytes(c.get_tensor(name)), name)
                    s = g.get_slice(name)
                    if s.get_shape():
                        self.assertEqual(_bytes(s[:2]), _bytes(c.get_slice(name)[:2]), name)
            got = wcodec.load_file(enc, device="cuda")
            want = wcodec.load_file(enc)
            for k in want:
                self.assertEqual(got[k].device.type, "cuda")
                self.assertEqual(_bytes(got[k]), _bytes(want[k]), k)


if __name__ == "__main__":
    unittest.main()
