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
# With --perplexity, a second table for a real Llama model (stories260K,
# made a Hugging Face directory by scripts/make_hf_llama.py): llama.cpp's
# perplexity on a fixed public-domain text (bench/data/aesop.txt) and the
# mean KL divergence of each model's next-token distributions from the
# original's, for the original, NDSQ at PPL_SETTINGS and RTN int8 / int4 of
# the same matrices. Every model goes to llama.cpp as an F32 GGUF made by
# `wcodec cawsf export-gguf` (the mount's GGUF view): NDSQ from its .cawsf,
# the original and the RTN models from a .cawsf that stores every tensor as
# it is (--max-elems 1), so the only difference between rows is the weights.
# llama-perplexity is built on demand into llama.cpp's cache directory
# (bench/llama_perplexity.sh; CI never builds it).
#
# Usage: python3 bench/cawsf_table.py [--tool build/wcodec] [--perplexity] [--ppl-only] [MODEL.safetensors ...]
# Needs numpy and safetensors. Thread-safety: a script.
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import load_file, save_file

SETTINGS = [  # rank, outlier-q, pq-m, pq-k
    (4, 0.999, 8, 16),
    (8, 0.999, 8, 16),
    (16, 0.999, 8, 64),
    (32, 0.999, 16, 256),
    (64, 0.999, 8, 256),
]

PPL_SETTINGS = [  # rank, outlier-q, pq-m, pq-k: from about int8's size up
    (2, 0.999, 4, 16),
    (4, 0.999, 8, 16),
    (16, 0.999, 8, 64),
]
HERE = os.path.dirname(os.path.abspath(__file__))
TEXT = os.path.join(HERE, "data", "aesop.txt")
CTX = 128  # tokens per perplexity chunk (the text is 28 chunks with the test tokenizer)
# Chunks scored (the last 64 tokens of each). llama-perplexity 0.3.36 here
# often loses its last lines (the last chunk's and the summary) on exit,
# with status 0; its per-chunk lines are running estimates, so the table
# reads the line of chunk CHUNKS from a run over CHUNKS + 4 chunks.
CHUNKS = 20


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


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def convert(tool, model, out, opts):
    run([tool, "cawsf", "convert", "--model", model, "--out", out, *opts, "-j", "2"], stdout=subprocess.DEVNULL)


def export_gguf(tool, cawsf, config_dir, out):
    run([tool, "cawsf", "export-gguf", cawsf, "--config", config_dir, "--out", out], stdout=subprocess.DEVNULL)


def perplexity(ppl, gguf, kld_base, first):
    """(perplexity, mean KL divergence from the original, % same top token) of `gguf` on TEXT (None, None for
    the original, whose logits it saves)."""
    cmd = [ppl, "-m", gguf, "-f", TEXT, "-c", str(CTX), "-b", str(CTX), "-t", "2", "--chunks", str(CHUNKS + 4),
           "--kl-divergence-base", kld_base]
    if not first:
        cmd.append("--kl-divergence")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    log = out.stdout + out.stderr
    if first:
        m = re.search(r"\[%d\]([0-9.]+)," % CHUNKS, log)
        if not m:
            sys.exit(f"llama-perplexity: no running estimate after chunk {CHUNKS} in its output:\n" + log[-2000:])
        return float(m.group(1)), None, None
    num = r"([0-9.]+)\s*±\s*[0-9.]+"
    row = re.search(r"^\s*%d\s+%s\s+-?[0-9.]+\s*±\s*[0-9.]+\s+%s\s+[0-9.]+\s*±\s*[0-9.]+\s*%%\s+%s\s*%%" %
                    (CHUNKS, num, num, num), log, re.M)
    if not row:
        sys.exit(f"llama-perplexity: no line for chunk {CHUNKS} in its KL divergence output:\n" + log[-2000:])
    return float(row.group(1)), float(row.group(2)), float(row.group(3))


def perplexity_table(tool, model):
    ppl = run(["bash", os.path.join(HERE, "llama_perplexity.sh")], capture_output=True, text=True).stdout.strip()
    orig = load_file(model)
    name = os.path.basename(model)
    print(f"\n{name}: llama.cpp perplexity on bench/data/aesop.txt ({CHUNKS} chunks of {CTX} tokens) and mean KL divergence "
          "from the original's next-token distributions\n")
    print("| model | method | setting | bytes of the matrices | vs original | rel. error | perplexity | mean KLD | same top token |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="cawsf-ppl-") as tmp:
        hf = os.path.join(tmp, "stories")
        run([sys.executable, os.path.join(HERE, "..", "scripts", "make_hf_llama.py"), hf, "--weights", model],
            stdout=subprocess.DEVNULL)
        dense = os.path.join(hf, "model.safetensors")
        hf_tensors = load_file(dense)
        kld = os.path.join(tmp, "base.kld")

        def measure(weights_file, label, setting, nbytes, base, err, first=False):
            c = os.path.join(tmp, "x.cawsf")
            g = os.path.join(tmp, "x.gguf")
            convert(tool, weights_file, c, ["--max-elems", "1"])
            export_gguf(tool, c, hf, g)
            p, k, t = perplexity(ppl, g, kld, first)
            ks = "0 (the reference)" if k is None else f"{k:.4f}"
            ts = "100%" if t is None else f"{t:.1f}%"
            rb = "" if nbytes is None else f"{int(nbytes)}"
            rv = "" if nbytes is None else f"{nbytes / base:.3f}"
            re_ = "" if err is None else f"{err:.4f}"
            print(f"| {name} | {label} | {setting} | {rb} | {rv} | {re_} | {p:.2f} | {ks} | {ts} |")
            sys.stdout.flush()

        # The matrices NDSQ decomposes (every float tensor of 2+ dimensions).
        dec = [n for n, t in hf_tensors.items() if t.ndim >= 2]
        base = sum(hf_tensors[n].nbytes for n in dec)
        measure(dense, "original", "F32", base, base, 0.0, first=True)
        for rank, q, m, k in PPL_SETTINGS:
            c = os.path.join(tmp, "n.cawsf")
            convert(tool, dense, c, ["--rank", str(rank), "--outlier-q", str(q), "--pq-m", str(m), "--pq-k", str(k)])
            info = json.loads(run([tool, "cawsf", "inspect", "--json", c], capture_output=True, text=True).stdout)
            nd = [t["name"] for t in info["tensors"] if t["kind"] == "ndsq"]
            cb = next(s["size"] for s in info["sections"] if s["type"] == 2)
            stored = sum(t["stored_bytes"] for t in info["tensors"] if t["kind"] == "ndsq") + cb
            exp = os.path.join(tmp, "n.safetensors")
            run([tool, "cawsf", "export", c, exp], stdout=subprocess.DEVNULL)
            rebuilt = load_file(exp)
            err = rel([(hf_tensors[n], rebuilt[n].astype(np.float64)) for n in nd])
            g = os.path.join(tmp, "n.gguf")
            export_gguf(tool, c, hf, g)
            p, kl, t = perplexity(ppl, g, kld, False)
            print(f"| {name} | NDSQ | rank {rank}, q {q}, m {m}, k {k} | {stored} | {stored / base:.3f} | {err:.4f} | "
                  f"{p:.2f} | {kl:.4f} | {t:.1f}% |")
            sys.stdout.flush()
        for bits, group, label in ((8, None, "per-row scale"), (4, 32, "groups of 32")):
            out, pairs, nbytes = dict(hf_tensors), [], 0
            for n in dec:
                back, nb = rtn(hf_tensors[n], bits, group)
                out[n] = back.astype(np.float32)
                pairs.append((hf_tensors[n], back))
                nbytes += nb
            f = os.path.join(tmp, f"rtn{bits}.safetensors")
            save_file(out, f)
            measure(f, f"RTN int{bits}", f"{label}, fp16 scales", nbytes, base, rel(pairs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", default="build/wcodec")
    ap.add_argument("--perplexity", action="store_true",
                    help="also the llama.cpp perplexity table of stories260K (builds llama-perplexity once)")
    ap.add_argument("--ppl-only", action="store_true", help="only the perplexity table")
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    if a.ppl_only:
        data = os.path.join(HERE, "..", "..", "shared", "data")
        perplexity_table(a.tool, a.models[0] if a.models else os.path.join(data, "stories260K.f32.safetensors"))
        return
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
    if a.perplexity:
        perplexity_table(a.tool, os.path.join(data, "stories260K.f32.safetensors"))


if __name__ == "__main__":
    main()
