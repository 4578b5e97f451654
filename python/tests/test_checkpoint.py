"""wcodec.encode_checkpoint / decode_checkpoint: files and directories round
trip byte for byte (SHA-256), the same names as the wcodec tool, and the
tool's decoder reads what the package wrote."""

from __future__ import annotations

import os
import shutil
import subprocess
import unittest

import wcodec
import wcodec_testenv as env


class Checkpoints(unittest.TestCase):
    def setUp(self):
        self.dir = env.scratch("ckpt")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def _src(self, name):
        p = os.path.join(env.DATA_DIR, name)
        if not os.path.exists(p):
            self.skipTest(f"{p} is missing")
        return p

    def test_file_round_trip(self):
        src = self._src("stories260K.bf16.safetensors")
        enc = os.path.join(self.dir, "m.wcodec")
        rep = wcodec.encode_checkpoint(src, enc, threads=2, progress=False)
        self.assertEqual(len(rep), 1)
        self.assertLess(os.path.getsize(enc), os.path.getsize(src))
        out = os.path.join(self.dir, "m.safetensors")
        wcodec.decode_checkpoint(enc, out)
        self.assertEqual(env.sha256(out), env.sha256(src))
        # Into a directory: the stored name, as the tool gives it.
        os.mkdir(os.path.join(self.dir, "d"))
        wcodec.encode_checkpoint(src, os.path.join(self.dir, "d"), progress=False)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "d", "stories260K.bf16.wcodec")))
        wcodec.decode_checkpoint(os.path.join(self.dir, "d", "stories260K.bf16.wcodec"), os.path.join(self.dir, "d"))
        self.assertEqual(env.sha256(os.path.join(self.dir, "d", "stories260K.bf16.safetensors")), env.sha256(src))

    def test_fast_decode(self):
        # isnet-medium.rtn-ternary holds a model that saves under 1%: the
        # fast_decode file is larger, by far less than 1%, and reads back.
        src = self._src("isnet-medium.rtn-ternary.safetensors")
        a, b = os.path.join(self.dir, "a.wcodec"), os.path.join(self.dir, "b.wcodec")
        wcodec.encode_checkpoint(src, a, threads=2, progress=False)
        wcodec.encode_checkpoint(src, b, threads=2, progress=False, fast_decode=True)
        self.assertGreater(os.path.getsize(b), os.path.getsize(a))
        self.assertLess(os.path.getsize(b), os.path.getsize(a) * 1.01)
        out = os.path.join(self.dir, "b.safetensors")
        wcodec.decode_checkpoint(b, out)
        self.assertEqual(env.sha256(out), env.sha256(src))

    def test_gguf_round_trip(self):
        src = self._src("stories260K.f32.gguf")
        d = os.path.join(self.dir, "g")
        os.mkdir(d)
        wcodec.encode_checkpoint(src, d, progress=False)
        enc = os.path.join(d, "stories260K.f32.gguf.wcodec")
        self.assertTrue(os.path.exists(enc))
        out = os.path.join(self.dir, "back.gguf")
        wcodec.decode_checkpoint(enc, out)
        self.assertEqual(env.sha256(out), env.sha256(src))
        with self.assertRaises(wcodec.NotSupportedError):
            wcodec.safe_open(enc)

    def test_directory_round_trip(self):
        model = os.path.join(self.dir, "model")
        os.makedirs(os.path.join(model, "sub"))
        shutil.copyfile(self._src("stories260K.f32.safetensors"), os.path.join(model, "model.safetensors"))
        shutil.copyfile(self._src("silero_vad_16k.bf16.safetensors"), os.path.join(model, "sub", "vad.safetensors"))
        with open(os.path.join(model, "config.json"), "w") as f:
            f.write('{"model_type": "llama"}\n')
        with open(os.path.join(model, "sub", "notes.txt"), "wb") as f:
            f.write(os.urandom(1000))
        store = os.path.join(self.dir, "store")
        rep = wcodec.encode_checkpoint(model, store, threads=2, progress=False)
        self.assertEqual(sorted(r[0] for r in rep), ["config.json", "model.safetensors", "sub/notes.txt", "sub/vad.safetensors"])
        self.assertEqual(
            sorted(env_walk(store)), ["config.json", "model.wcodec", "sub/notes.txt", "sub/vad.wcodec"]
        )
        back = os.path.join(self.dir, "back")
        wcodec.decode_checkpoint(store, back)
        self.assertEqual(sorted(env_walk(back)), sorted(env_walk(model)))
        for rel in env_walk(model):
            self.assertEqual(env.sha256(os.path.join(back, rel)), env.sha256(os.path.join(model, rel)), rel)
        # The tool decodes what the package encoded.
        if env.TOOL and os.path.exists(env.TOOL):
            out = os.path.join(self.dir, "tool.safetensors")
            subprocess.run([env.TOOL, "decode", os.path.join(store, "model.wcodec"), out], check=True)
            self.assertEqual(env.sha256(out), env.sha256(os.path.join(model, "model.safetensors")))

    def test_errors_name_the_file(self):
        bad = os.path.join(self.dir, "x.safetensors")
        with open(bad, "wb") as f:
            f.write(b"\x04\x00\x00\x00\x00\x00\x00\x00{}{}")
        with self.assertRaises(wcodec.WcodecError) as cm:
            wcodec.encode_checkpoint(bad, os.path.join(self.dir, "x.wcodec"), progress=False)
        self.assertIn(bad, str(cm.exception))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "x.wcodec")))
        with self.assertRaises(ValueError):
            wcodec.encode_checkpoint(os.path.join(env.DATA_DIR, "README.md"), self.dir, progress=False)
        with self.assertRaises(OSError):
            wcodec.encode_checkpoint(os.path.join(self.dir, "missing.safetensors"), self.dir, progress=False)
        with self.assertRaises(wcodec.WcodecError) as cm:
            wcodec.decode_checkpoint(bad, os.path.join(self.dir, "y.safetensors"))
        self.assertIn(bad, str(cm.exception))

    def test_progress_reaches_the_end(self):
        seen = []
        from wcodec import _wcodec

        src = self._src("stories260K.f32.safetensors")
        _wcodec.encode_file(src, os.path.join(self.dir, "p.wcodec"), 2, 0, lambda d, t: seen.append((d, t)))
        self.assertTrue(seen)
        self.assertEqual(seen[-1][0], seen[-1][1])


def env_walk(root):
    out = []
    for dp, _dn, fns in os.walk(root):
        for f in fns:
            out.append(os.path.relpath(os.path.join(dp, f), root))
    return out


if __name__ == "__main__":
    unittest.main()
