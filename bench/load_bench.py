#!/usr/bin/env python3
"""bench/load_bench.py — wall time to load a Hugging Face model directory,
side by side: transformers (from_pretrained) and safetensors.torch.load_file
from the plain directory, the same through a wcodecfs mount of its store
with cold caches (a fresh mount, the kernel's page cache dropped) and warm
caches (loaded again from the same mount), and wcodec.load_file on the
store's .wcodec files.

    python3 bench/load_bench.py [--model DIR] [--build build] [--repeat 3]

Without --model it builds stories260K's Llama directory (two shards) with
scripts/make_hf_llama.py; for a model big enough to time, make
SmolLM2-135M's directory (270 MB in BF16, three shards) with
`python3 bench/make_smollm2_hf.py DIR` and pass --model DIR. The store is written with `BUILD/wcodec encode`
and mounted with `BUILD/wcodecfs`; the wcodec package is taken from
BUILD/python-pkg unless one is installed. Cold runs drop the page cache
(writing /proc/sys/vm/drop_caches: root); without that right they are
reported as not cold. Times are medians of --repeat runs, each in a fresh
Python process (imports excluded: the process imports first, then times).

Thread-safety: a script; one run at a time (it mounts under its work dir).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Each measurement runs in a child process: imports first, then the timed load.
CHILD = r"""
import sys, time, os, json, glob
how, path = sys.argv[1], sys.argv[2]
import torch
torch.set_num_threads(os.cpu_count() or 1)
if how == "transformers":
    from transformers import AutoModelForCausalLM, AutoModel, AutoConfig
    cfg = AutoConfig.from_pretrained(path)
    cls = AutoModelForCausalLM if any(a.endswith("ForCausalLM") for a in (cfg.architectures or [])) else AutoModel
    t0 = time.perf_counter()
    m = cls.from_pretrained(path)
    n = sum(p.numel() for p in m.parameters())
elif how == "safetensors":
    from safetensors.torch import load_file
    files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
    t0 = time.perf_counter()
    n = sum(t.numel() for f in files for t in load_file(f).values())
elif how == "wcodec":
    import wcodec
    files = sorted(glob.glob(os.path.join(path, "*.wcodec")))
    t0 = time.perf_counter()
    n = sum(t.numel() for f in files for t in wcodec.load_file(f).values())
else:
    raise SystemExit("unknown " + how)
print(json.dumps({"seconds": time.perf_counter() - t0, "elements": n}))
"""


def run_child(how: str, path: str, env: dict) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, how, path], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def drop_caches() -> bool:
    try:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


class Mount:
    def __init__(self, daemon: str, store: str, mnt: str) -> None:
        self.daemon, self.store, self.mnt = daemon, store, mnt
        self.up = False

    def start(self) -> None:
        os.makedirs(self.mnt, exist_ok=True)
        subprocess.run([self.daemon, self.store, self.mnt], check=True, timeout=60)
        self.up = True

    def stop(self) -> None:
        if self.up:
            subprocess.run(["fusermount3", "-u", "-z", self.mnt], check=False, timeout=30)
            for _ in range(50):
                if not os.path.ismount(self.mnt):
                    break
                time.sleep(0.1)
            self.up = False


def dir_bytes(d: str, ext: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(ext))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--model", help="a Hugging Face model directory (default: stories260K, two shards)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", help="work directory (default: a new temporary one)")
    args = ap.parse_args()

    tool = os.path.join(args.build, "wcodec")
    daemon = os.path.join(args.build, "wcodecfs")
    for p in (tool, daemon):
        if not os.path.exists(p):
            raise SystemExit(f"{p} is missing: build it first (ninja -C {args.build} wcodec wcodecfs _wcodec)")
    work = args.work or tempfile.mkdtemp(prefix="wcodec-load-bench-")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ)
    pkg = os.path.join(args.build, "python-pkg")
    if os.path.isdir(pkg):
        env["PYTHONPATH"] = pkg + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")

    model = args.model
    if not model:
        model = os.path.join(work, "model")
        if not os.path.isdir(model):
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_hf_llama.py"), model, "--shards", "2"],
                           check=True)
    name = os.path.basename(os.path.normpath(model))
    store = os.path.join(work, "store")
    if not os.path.isdir(os.path.join(store, name)):
        subprocess.run([tool, "encode", model, os.path.join(store, name), "-q"], check=True)
    mnt = os.path.join(work, "mnt")
    mount = Mount(daemon, store, mnt)
    mounted = os.path.join(mnt, name)
    stored = os.path.join(store, name)

    rows = []  # (label, how, path, cache)
    can_drop = drop_caches()
    cold_note = "cold" if can_drop else "NOT cold (cannot drop the page cache: not root)"

    def measure(label: str, how: str, path: str, cache: str) -> None:
        times = []
        for _ in range(args.repeat):
            if cache == "cold":
                mount.stop()
                drop_caches()
                mount.start()
            elif cache == "warm-mount":
                if not mount.up:
                    mount.start()
                run_child(how, path, env)  # warm it
            elif cache == "warm":
                run_child(how, path, env)
            times.append(run_child(how, path, env))
        rows.append((label, statistics.median(times), min(times), max(times)))
        print(f"  {label}: {statistics.median(times):.3f} s", file=sys.stderr)

    try:
        measure("transformers, plain directory (page cache warm)", "transformers", model, "warm")
        measure(f"transformers, mount, {cold_note}", "transformers", mounted, "cold")
        measure("transformers, mount, warm (chunk and page cache)", "transformers", mounted, "warm-mount")
        measure("safetensors.torch.load_file, plain directory (warm)", "safetensors", model, "warm")
        measure(f"safetensors.torch.load_file, mount, {cold_note}", "safetensors", mounted, "cold")
        measure("safetensors.torch.load_file, mount, warm", "safetensors", mounted, "warm-mount")
        mount.stop()
        measure("wcodec.load_file, store (.wcodec files, page cache warm)", "wcodec", stored, "warm")
        if can_drop:
            times = []
            for _ in range(args.repeat):
                drop_caches()
                times.append(run_child("wcodec", stored, env))
            rows.append(("wcodec.load_file, store, page cache cold", statistics.median(times), min(times), max(times)))
    finally:
        mount.stop()

    plain = dir_bytes(model, ".safetensors")
    enc = dir_bytes(stored, ".wcodec")
    print(f"model: {model} ({plain} bytes of safetensors; stored {enc} bytes, {enc / max(1, plain):.3f}); "
          f"{args.repeat} runs each, median (min-max); {os.cpu_count()} CPUs")
    print()
    print("| load | seconds | min-max |")
    print("|---|---|---|")
    for label, med, lo, hi in rows:
        print(f"| {label} | {med:.3f} | {lo:.3f}-{hi:.3f} |")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
