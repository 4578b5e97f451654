"""A real Hugging Face Llama directory (stories260K's real weights, sharded
into two files with model.safetensors.index.json, the repository's
SentencePiece tokenizer; scripts/make_hf_llama.py) encoded into a store with
the wcodec tool and mounted with the wcodecfs daemon: transformers loads it
from the mount unmodified (mmap on), and greedy generation of 32 tokens
equals the original directory's; so does the model loaded with
wcodec.load_file + load_state_dict from the store itself.

Skips, saying why, without torch / transformers / sentencepiece, without
the daemon, or without a usable /dev/fuse."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import unittest

import wcodec
import wcodec_testenv as env

try:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    _why_not = ""
except ImportError as e:  # pragma: no cover - reported as a skip
    _why_not = f"torch/transformers not installed ({e})"

try:
    import sentencepiece  # noqa: F401
except ImportError:  # pragma: no cover
    _why_not = _why_not or "sentencepiece is not installed (the Llama tokenizer needs it)"

PROMPT = "Once upon a time, there was a little"
NEW_TOKENS = 32


def fuse_problem() -> str:
    if not env.DAEMON or not os.path.exists(env.DAEMON):
        return "the wcodecfs daemon was not built (WCODECFS_BIN)"
    try:
        fd = os.open("/dev/fuse", os.O_RDWR)
        os.close(fd)
    except OSError as e:
        return f"/dev/fuse is not usable: {e.strerror}"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed"
    return ""


def make_model(out: str, shards: int) -> None:
    script = os.path.join(env.REPO, "scripts", "make_hf_llama.py")
    weights = os.path.join(env.DATA_DIR, "stories260K.f32.safetensors")
    if not os.path.exists(weights):
        raise unittest.SkipTest(f"{weights} is missing")
    subprocess.run([sys.executable, script, out, "--weights", weights, "--shards", str(shards)], check=True)


def generate(model, tok) -> list:
    ids = tok(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)
    return out[0].tolist()


@unittest.skipIf(_why_not, _why_not)
class ModelDirectory(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = env.scratch("model")
        cls.model = os.path.join(cls.dir, "model")
        make_model(cls.model, shards=2)
        cls.store = os.path.join(cls.dir, "store")
        # The tool, as users do; the package's encoder writes the same files.
        if env.TOOL and os.path.exists(env.TOOL):
            subprocess.run([env.TOOL, "encode", cls.model, os.path.join(cls.store, "model"), "-q"], check=True)
        else:
            wcodec.encode_checkpoint(cls.model, os.path.join(cls.store, "model"), progress=False)
        tok = AutoTokenizer.from_pretrained(cls.model)
        ref = AutoModelForCausalLM.from_pretrained(cls.model)
        ref.eval()
        cls.tok = tok
        cls.want = generate(ref, tok)
        cls.ref_state = {k: v.clone() for k, v in ref.state_dict().items()}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_store_layout(self):
        names = sorted(os.listdir(os.path.join(self.store, "model")))
        shards = [n for n in names if n.endswith(".wcodec")]
        self.assertEqual(len(shards), 2, names)
        self.assertIn("model.safetensors.index.json", names)
        self.assertIn("config.json", names)
        self.assertIn("tokenizer.model", names)
        self.assertFalse([n for n in names if n.endswith(".safetensors")], names)
        # The generation is a real one: 32 new tokens, not all the same.
        self.assertEqual(len(self.want), len(self.tok(PROMPT).input_ids) + NEW_TOKENS)
        self.assertGreater(len(set(self.want[-NEW_TOKENS:])), 4)

    def test_load_file_and_load_state_dict(self):
        config = transformers.AutoConfig.from_pretrained(os.path.join(self.store, "model"))
        model = AutoModelForCausalLM.from_config(config)
        with open(os.path.join(self.store, "model", "model.safetensors.index.json")) as fh:
            index = json.load(fh)
        state = {}
        for shard in sorted(set(index["weight_map"].values())):
            stored = wcodec._wcodec.encoded_name(shard)
            state.update(wcodec.load_file(os.path.join(self.store, "model", stored)))
        self.assertEqual(sorted(state), sorted(index["weight_map"]))
        missing, unexpected = model.load_state_dict(state, strict=False)
        self.assertEqual(unexpected, [])
        # Tied embeddings: lm_head.weight is the embedding, not in the file.
        self.assertEqual([k for k in missing if k != "lm_head.weight"], [])
        model.tie_weights()
        model.eval()
        for k, v in self.ref_state.items():
            self.assertTrue(torch.equal(model.state_dict()[k], v), k)
        self.assertEqual(generate(model, self.tok), self.want)

    def test_mount_loads_with_transformers(self):
        why = fuse_problem()
        if why:
            self.skipTest(f"SKIPPED: {why}")
        mnt = os.path.join(self.dir, "mnt")
        os.makedirs(mnt, exist_ok=True)
        log = os.path.join(self.dir, "daemon.log")
        with open(log, "wb") as lf:
            rc = subprocess.run([env.DAEMON, self.store, mnt], stdout=lf, stderr=subprocess.STDOUT, timeout=60).returncode
        if rc != 0:
            with open(log) as fh:
                self.fail(f"wcodecfs exited {rc}: {fh.read()}")
        try:
            path = os.path.join(mnt, "model")
            # The mount presents the original directory, file for file,
            # plus the GGUF view of a Llama directory (docs/gguf-view.md).
            self.assertEqual(sorted(os.listdir(path)), sorted(os.listdir(self.model) + ["model.gguf"]))
            for n in os.listdir(self.model):
                self.assertEqual(env.sha256(os.path.join(path, n)), env.sha256(os.path.join(self.model, n)), n)
            tok = AutoTokenizer.from_pretrained(path)
            model = AutoModelForCausalLM.from_pretrained(path)  # safetensors with mmap
            model.eval()
            self.assertEqual(generate(model, tok), self.want)
            # And the shards through wcodec.safe_open over the mounted plain files.
            with wcodec.safe_open(os.path.join(path, "model-00001-of-00002.safetensors"), "pt") as f:
                self.assertEqual(f.kind, "safetensors")
                for k in f.keys():
                    self.assertTrue(torch.equal(f.get_tensor(k), self.ref_state[k]), k)
            del model
        finally:
            r = subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True, timeout=30)
            for _ in range(50):
                if not os.path.ismount(mnt):
                    break
                time.sleep(0.1)
            self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
