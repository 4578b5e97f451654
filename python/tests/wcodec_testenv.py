"""What the Python suites share: where the real model files, the built tools
and the scratch space are, and the model files encoded once per build of
the package (cached beside the build, keyed by the native module's size and
mtime, so a rebuilt encoder encodes them anew).

Environment (set by tests/CMakeLists.txt): WCODEC_DATA_DIR (../shared/data),
WCODEC_TOOL (the wcodec tool), WCODECFS_BIN (the daemon, when built),
WCODEC_TEST_CACHE (a directory for the encoded files), WCODEC_TEST_QUICK=1
(sanitizer builds: the small model files only).

Thread-safety: used from one test process at a time per cache directory
(ctest runs each suite once).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import unittest
from typing import Dict, List

import wcodec
from wcodec import _wcodec

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA_DIR = os.environ.get("WCODEC_DATA_DIR") or os.path.join(REPO, "..", "shared", "data")
TOOL = os.environ.get("WCODEC_TOOL", "")
DAEMON = os.environ.get("WCODECFS_BIN", "")
QUICK = os.environ.get("WCODEC_TEST_QUICK") == "1"
QUICK_MAX_BYTES = 2_000_000


def data_files() -> List[str]:
    """Every safetensors file of the data directory (the small ones only in quick mode)."""
    if not os.path.isdir(DATA_DIR):
        raise unittest.SkipTest(f"no model data directory at {DATA_DIR}")
    out = []
    for f in sorted(os.listdir(DATA_DIR)):
        p = os.path.join(DATA_DIR, f)
        if f.endswith(".safetensors") and os.path.isfile(p):
            if QUICK and os.path.getsize(p) > QUICK_MAX_BYTES:
                continue
            out.append(p)
    if not out:
        raise unittest.SkipTest(f"no .safetensors files in {DATA_DIR}")
    return out


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def scratch(prefix: str) -> str:
    """A new scratch directory (removed by the caller's cleanup)."""
    base = os.environ.get("WCODEC_TEST_TMP") or None
    if base:
        os.makedirs(base, exist_ok=True)
    return tempfile.mkdtemp(prefix=f"wcodec-py-{prefix}-", dir=base)


def _module_key() -> str:
    st = os.stat(_wcodec.__file__)
    return f"{st.st_size}-{int(st.st_mtime)}"


def encoded_data() -> Dict[str, str]:
    """{original path: .wcodec path} for data_files(), encoded by this build."""
    cache = os.environ.get("WCODEC_TEST_CACHE")
    if not cache:
        cache = os.path.join(tempfile.gettempdir(), "wcodec-py-cache")
    d = os.path.join(cache, _module_key())
    os.makedirs(d, exist_ok=True)
    out = {}
    for src in data_files():
        name = os.path.basename(src)[: -len(".safetensors")] + ".wcodec"
        dst = os.path.join(d, name)
        if not os.path.exists(dst):
            tmp = dst + ".part.wcodec"
            wcodec.encode_checkpoint(src, tmp, threads=os.cpu_count(), progress=False)
            os.replace(tmp, dst)
        out[src] = dst
    # Old builds' files.
    for old in os.listdir(cache):
        if old != os.path.basename(d):
            shutil.rmtree(os.path.join(cache, old), ignore_errors=True)
    return out
