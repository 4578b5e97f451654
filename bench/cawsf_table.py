#!/usr/bin/env python3
# bench/cawsf_table.py — NDSQ (CAWSF) against round-to-nearest int8 and int4
# on real weights: for each model and each setting of rank / outlier
# quantile / PQ m / PQ k, the bytes of the decomposed matrices (stored
# shards plus the shared codebooks) against their original bytes, and the
# relative reconstruction error ‖W − Ŵ‖_F / ‖W‖_F over all of them
# (measured on `wcodec cawsf export`, the reader's rebuild), next to RTN
# int8 (per-row absmax scale, fp16) and RTN int4 (groups of 32, fp16 scale)
# of the same matrices.
#
# Usage: python3 bench/cawsf_table.py [--tool build/wcodec] [MODEL.safetensors ...]
# Needs numpy and safetensors. Thread-safety: a script.
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import load_file

SETTINGS = [  # rank, outlier-q, pq-m, pq-k
    (4, 0.999, 8, 16),
    (8, 0.999, 8, 16),
    (16, 0.999, 8, 64),
    (32, 0.999, 16, 256),
    (64, 0.999, 8, 256),
]


def rtn(w, bits, group):
    """Symmetric round-to-nearest with an fp16 absmax scale per group of `group` values of a row."""
    rows = w.reshape(w.shape[0], -1).astype(np.float64)
    cols = rows.shape[1]
    g = cols if group is None else group
    pad = (-cols) % g
    x = np.pad(rows, ((0, 0), (0, pad))).reshape(rows.shape[0], -1, g)
    qmax = 2 ** (bits - 1) - 1
    scale = (np.abs(x).max(axis=2, keepdims=True) / qmax).astype(np.float16).astype(np.float64)
    scale[scale == 0] = 1
    q = np.clip(np.round(x / scale), -qmax - 1, qmax)
    back = (q * scale).reshape(rows.shape[0], -1)[:, :cols]
    nbytes = rows.size * bits / 8 + scale.size * 2
    return back.reshape(w.shape), nbytes


def rel(pairs):
    num = sum(float(((a.astype(np.float64) - b) ** 2).sum()) for a, b in pairs)
    den = sum(float((a.astype(np.float64) ** 2).sum()) for a, _ in pairs)
    return (num / den) ** 0.5


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", default="build/wcodec")
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")
    models = a.models or [os.path.join(data, m) for m in ("stories260K.f32.safetensors", "silero_vad_16k.f32.safetensors")]
    print("| model | method | setting | bytes of the matrices | vs original | rel. error |")
    print("|---|---|---|---:|---:|---:|")
    for model in models:
        orig = load_file(model)
        name = os.path.basename(model)
        with tempfile.TemporaryDirectory(prefix="cawsf-bench-") as tmp:
            for rank, q, m, k in SETTINGS:
                out = os.path.join(tmp, "m.cawsf")
                subprocess.run([a.tool, "cawsf", "convert", "--model", model, "--out", out, "--rank", str(rank),
                                "--outlier-q", str(q), "--pq-m", str(m), "--pq-k", str(k), "-j", "2"],
                               check=True, stdout=subprocess.DEVNULL)
                info = json.loads(subprocess.run([a.tool, "cawsf", "inspect", "--json", out], check=True,
                                                 capture_output=True, text=True).stdout)
                exp = os.path.join(tmp, "e.safetensors")
                subprocess.run([a.tool, "cawsf", "export", out, exp], check=True, stdout=subprocess.DEVNULL)
                rebuilt = load_file(exp)
                dec = [t["name"] for t in info["tensors"] if t["kind"] == "ndsq"]
                cb = next(s["size"] for s in info["sections"] if s["type"] == 2)
                stored = sum(t["stored_bytes"] for t in info["tensors"] if t["kind"] == "ndsq") + cb
                base = sum(orig[n].nbytes for n in dec)
                err = rel([(orig[n], rebuilt[n].astype(np.float64)) for n in dec])
                print(f"| {name} | NDSQ | rank {rank}, q {q}, m {m}, k {k} | {stored} | {stored / base:.3f} | {err:.4f} |")
        for bits, group, label in ((8, None, "per-row scale"), (4, 32, "groups of 32")):
            pairs, nbytes = [], 0
            for n in dec:
                back, nb = rtn(orig[n], bits, group)
                pairs.append((orig[n], back))
                nbytes += nb
            print(f"| {name} | RTN int{bits} | {label}, fp16 scales | {int(nbytes)} | {nbytes / base:.3f} | {rel(pairs):.4f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
