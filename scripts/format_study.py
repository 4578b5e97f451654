#!/usr/bin/env python3
"""format_study.py: size study for the format revision of issue "fast on
every CPU" (docs/format-revision-study.md). numpy only, no codec build.

For every tensor of every file it measures candidate models as ideal code
lengths under per-tensor static tables:

  * symbols and contexts are formed exactly as a decoder would see them
    (neighbours that the lane layout makes available, see LAYOUTS);
  * the contexts are mapped to K shared distributions (weighted k-means on
    the context histograms, K = 1..32, or K = all contexts unmapped);
  * each distribution is quantized to P-bit frequencies (P = 9..12;
    every seen symbol >= 1) and the symbols are charged -log2(f / 2^P) with
    those quantized frequencies, i.e. the exact cost of a static-table coder
    fitted on the tensor itself (no adaptive or optimistic term);
  * the tables are charged at their stored size in the format's compact
    coding (docs/wcodec-format.md 7.3 with q = 0, exact frequencies), plus
    ceil(log2 K) bits per context for the context map;
  * raw bits and escape bits are charged at face value; 132 bytes of rANS
    lane states and length per chunk (256 KiB) and 24 bytes of model record
    per tensor are added to every model-coded estimate alike;
  * per tensor the encoder's choice is the cheapest (P, K) whose decode
    tables fit in 64 KiB (K x 2^P slot entries of 4 bytes), or the tensor's
    stored size today when today stores it without a model (zstd / raw).

Usage: format_study.py [--data DIR] [--today DIR] [--out JSON] [FILE...]
       format_study.py --report JSON...   (markdown tables of runs)
  Environment: FS_LAYOUTS=rect,consecA,... (lane layouts to measure; see
  neighbours(); kernel layouts are added for 3x3 convolutions),
  FS_TABLE_LAYOUT=slot|split (decode table layout counted against 64 KiB),
  FS_F16_JOINT_ONLY=1 (F16: only the joint symbol). One file at a time,
  one core; the isnet files take a few minutes each.
  --today DIR: `wcodec inspect --json` of today's (format 2.3/2.4) files,
  named NAME.json; per-tensor stored sizes of today are taken from there
  (tensors the candidates do not recode keep today's size). Without it the
  script prints estimates only.
"""
import argparse
import glob
import json
import math
import os
import struct
import sys

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # small matrices; keep to one core

import numpy as np  # noqa: E402

CHUNK = 256 * 1024
BUDGET = 64 * 1024
KS = [1, 4, 8, 16, 32]
# decode table layout: "slot" = 2^P entries of 4 bytes (symbol, frequency,
# offset: one gather); "split" = 2^P one-byte symbols + nsym 4-byte
# (frequency, start) entries (two dependent lookups, smaller tables)
TABLE_LAYOUT = os.environ.get("FS_TABLE_LAYOUT", "slot")


def table_bytes(k, P, nsym):
    if TABLE_LAYOUT == "split":
        return k * ((1 << P) + 4 * nsym)
    return k * (1 << P) * 4
PS = [9, 10, 11, 12]


# ---------------------------------------------------------------- reading
def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
    hdr.pop("__metadata__", None)
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    base = 8 + n
    out = {}
    for name, t in hdr.items():
        a, b = t["data_offsets"]
        out[name] = (t["dtype"], t["shape"], mm[base + a: base + b])
    return out


# ---------------------------------------------------------------- cost model
def gamma_bits(v):
    v = np.asarray(v, dtype=np.float64)
    return 2 * np.floor(np.log2(np.maximum(v, 1))) + 1


def quantize(C, P):
    """Rows of counts -> rows of P-bit frequencies summing to 2^P (every
    seen symbol >= 1; the rounding remainder goes to the largest entry)."""
    C = np.asarray(C, dtype=np.float64)
    tot = C.sum(1, keepdims=True)
    F = np.where(C > 0, np.maximum(1, np.round(C * (2 ** P) / np.maximum(tot, 1))), 0)
    F = F.astype(np.int64)
    d = np.where(tot[:, 0] > 0, (1 << P) - F.sum(1), 0)
    j = np.argmax(F, axis=1)
    r = np.arange(F.shape[0])
    ok = F[r, j] + d >= 1
    F[r[ok], j[ok]] += d[ok]
    for i in r[~ok]:  # rare: many symbols rounded up to 1
        while F[i].sum() > (1 << P):
            k = int(np.argmax(F[i]))
            F[i, k] -= min(F[i, k] - 1, F[i].sum() - (1 << P))
    return F


def table_bits(F, q=0):
    """Stored bits of each row's table in the compact coding (7.3) with
    precision field q (0: exact frequencies; q >= 1: q - 1 bits kept below
    the leading one)."""
    F = np.asarray(F)
    K, n = F.shape
    M = F > 0
    nz = M.sum(1)
    bits = gamma_bits(nz + 1) + np.where(nz >= 2, 3, 0)
    idx = np.broadcast_to(np.arange(n), F.shape)
    pos = np.where(M, idx, -1)
    prev = np.maximum.accumulate(np.concatenate([np.full((K, 1), -1), pos[:, :-1]], 1), axis=1)
    gap = idx - prev - 1
    bits = bits + np.where(M, gamma_bits(gap + 1), 0).sum(1)
    m = np.floor(np.log2(np.maximum(F, 1)))
    kept = m if q == 0 else np.minimum(m, q - 1)
    fb = np.where(M, gamma_bits(m + 1) + kept, 0)
    last = np.where(nz > 0, n - 1 - np.argmax(M[:, ::-1], axis=1), 0)
    fb[np.arange(K), last] = 0
    return bits + fb.sum(1)


def coarsen(F, q, P):
    """Frequencies of the form the compact coding keeps with precision q
    (the last used symbol takes the remainder); rows where that fails keep
    their exact frequencies."""
    F = np.asarray(F)
    m = np.floor(np.log2(np.maximum(F, 1))).astype(np.int64)
    sh = np.maximum(m - (q - 1), 0)
    G = np.where(F > 0, np.maximum(1, np.round(F / (1 << sh)) * (1 << sh)), 0).astype(np.int64)
    K, n = F.shape
    M = F > 0
    last = n - 1 - np.argmax(M[:, ::-1], axis=1)
    r = np.arange(K)
    G[r, last] = 0
    G[r, last] = (1 << P) - G.sum(1)
    bad = (G[r, last] < 1) & (M.sum(1) > 0)
    G[bad] = F[bad]
    return G, bad


def coded_rows(C, F):
    C = np.asarray(C, dtype=np.float64)
    L = -np.log2(np.where(F > 0, F, 1) / F.sum(1, keepdims=True).clip(1))
    return (C * L).sum(1)


def cost_tables(C, P):
    """Code bits + table bits of count rows C under P-bit tables, each table
    at the precision q (0, 2, 3, 4) that costs least, as the encoder picks."""
    F = quantize(C, P)
    best = coded_rows(C, F) + table_bits(F, 0)
    for q in (2, 4):
        G, bad = coarsen(F, q, P)
        c = coded_rows(C, G) + np.where(bad, table_bits(G, 0), table_bits(G, q))
        best = np.minimum(best, c)
    return float(best.sum())


def farthest_first(C, K):
    """Up to K seed contexts: the heaviest, then repeatedly the context
    losing the most bits under the seeds chosen so far."""
    n, S = C.shape
    w = C.sum(1)
    Pr = C / np.maximum(w, 1)[:, None]
    selfent = (C * np.log2(np.where(C > 0, Pr, 1))).sum(1)
    seeds = [int(np.argmax(w))]
    best = None
    for _ in range(K):
        q = (C[seeds[-1]] + 0.02) / (w[seeds[-1]] + 0.02 * S)
        kl = selfent - C @ np.log2(q)
        best = kl if best is None else np.minimum(best, kl)
        if len(seeds) == K:
            break
        j = int(np.argmax(best))
        if best[j] <= 1e-9:
            break
        seeds.append(j)
    return seeds


def lloyd(C, seeds, iters=6):
    """Weighted k-means under cross-entropy from the given seed contexts;
    returns the cluster of each context (clusters numbered densely)."""
    S = C.shape[1]
    LQ = np.log2((C[seeds] + 0.02) / (C[seeds].sum(1, keepdims=True) + 0.02 * S))
    a = np.argmax(C @ LQ.T, axis=1)
    for _ in range(iters):
        A = np.eye(len(seeds), dtype=C.dtype)[a].T @ C
        LQ = np.log2((A + 0.02) / (A.sum(1, keepdims=True) + 0.02 * S))
        na = np.argmax(C @ LQ.T, axis=1)
        if np.array_equal(na, a):
            break
        a = na
    _, a = np.unique(a, return_inverse=True)
    return a


def evaluate(sym, ctx, nsym, nctx, full12=False):
    """Cost (bits) per (P, K) of one symbol stream under its contexts:
    (P, 0) = every used context its own table (today's style), (P, K) =
    contexts mapped to at most K shared tables. Values: (code bits + table
    bits + context map bits, number of tables)."""
    sym = sym.ravel().astype(np.int64)
    ctx = ctx.ravel().astype(np.int64)
    C = np.bincount(ctx * nsym + sym, minlength=nctx * nsym).reshape(nctx, nsym)
    used = C.sum(1) > 0
    Cu = C[used].astype(np.float64)
    nu = int(used.sum())
    seeds = farthest_first(Cu, max(KS)) if nu > min(KS) else list(range(nu))
    res = {}
    groups = {}
    for K in KS:
        if K >= nu:
            groups[K] = Cu
        else:
            a = lloyd(Cu, seeds[:K])
            groups[K] = np.eye(int(a.max()) + 1)[a].T @ Cu
    for P in PS:
        if nu <= max(KS) or (P == 12 and full12):
            res[(P, 0)] = (cost_tables(Cu, P), nu)
        for K in KS:
            if table_bytes(K, P, nsym) > BUDGET:
                continue
            A = groups[K]
            mapbits = 0 if K >= nu else nctx * max(1, math.ceil(math.log2(K)))
            res[(P, K)] = (cost_tables(A, P) + mapbits, A.shape[0])
    return res


def choose(results, nsyms):
    """Cheapest combination of one option per stream whose decode tables
    fit in 64 KiB together."""
    combos = [(0.0, 0, [])]
    for res, nsym in zip(results, nsyms):
        nxt = []
        for bits0, tab0, opts in combos:
            for (P, K), (bits, k) in res.items():
                tab = tab0 + table_bytes(k, P, nsym)
                if tab <= BUDGET:
                    nxt.append((bits0 + bits, tab, opts + [(P, k)]))
        nxt.sort(key=lambda x: x[0])
        combos = nxt[:64]
    return combos[0]


# ---------------------------------------------------------------- features
NONE = -1


def shift(X, dr, dc, fill):
    """Y[r, c] = X[r - dr, c - dc] (fill outside)."""
    Y = np.full_like(X, fill)
    R, Cn = X.shape
    if dr >= R or dc >= Cn:
        return Y
    Y[dr:, dc:] = X[: R - dr, : Cn - dc]
    return Y


def shift_right_up(X, fill):
    """Y[r, c] = X[r - 1, c + 1]."""
    Y = np.full_like(X, fill)
    if X.shape[0] > 1 and X.shape[1] > 1:
        Y[1:, :-1] = X[:-1, 1:]
    return Y


def flat_back(X, d, fill):
    """Y = the element d earlier in the row-major order."""
    f = X.ravel()
    Y = np.full_like(f, fill)
    if d < f.size:
        Y[d:] = f[:-d]
    return Y.reshape(X.shape)


def neighbours(F, U, layout, fill):
    """Feature arrays of the neighbours a layout makes available; F is the
    fine feature (used for the nearest neighbour in the same row), U the
    coarse one (used for neighbours in the row above).
    rect: left, top (today's lane rectangles; their edges are ignored);
    rowlane: one row per lane: left, top-left (both from the previous
      step's registers: the lane itself and the lane below it);
    consecA: lane l takes element 32k+l of the chunk: the element 32 back
      (the same lane's previous step), top;
    consecB: consecutive lanes, row above only: top-left, top, top-right;
    none: no neighbour."""
    if layout == "rect":
        return [shift(F, 0, 1, fill), shift(U, 1, 0, fill)]
    if layout == "rowlane":
        return [shift(F, 0, 1, fill), shift(U, 1, 1, fill)]
    if layout == "consecA":
        return [flat_back(F, 32, fill), shift(U, 1, 0, fill)]
    if layout == "consecB":
        return [shift(U, 1, 1, fill), shift(U, 1, 0, fill), shift_right_up(U, fill)]
    return []


def combine(feats, sizes):
    """Mixed-radix context from feature arrays (values -1 = absent -> 0)."""
    ctx = np.zeros(feats[0].shape if feats else (1,), dtype=np.int64)
    n = 1
    for f, s in zip(feats, sizes):
        ctx = ctx * s + (f.astype(np.int64) + 1)
        n *= s
    return ctx, n


LAYOUTS = os.environ.get("FS_LAYOUTS", "rect,rowlane,consecA,consecB,none").split(",")


def ctx_for(units, feat, fsize, layout, extra=None, up=None, usize=None):
    """Context of each unit: the available neighbours' features (feat:
    0..fsize-1 for the left-type neighbour, up: 0..usize-1 for neighbours in
    the row above; up defaults to feat) plus extra [(array, size)] features
    known without neighbours (scale class, kernel phase)."""
    if up is None:
        up, usize = feat, fsize
    nb = neighbours(feat, up, layout, NONE)
    feats = nb[:]
    if layout == "consecB":
        sizes = [usize + 1] * 3
    elif layout == "none":
        sizes = []
    else:
        sizes = [fsize + 1, usize + 1]
    if extra is not None:
        for e, s in extra:
            feats.append(e - 1)  # combine adds 1
            sizes.append(s)
    if not feats:
        return np.zeros(units.shape, dtype=np.int64), 1
    return combine(feats, sizes)


# ---------------------------------------------------------------- kinds
def tern_values(codes):
    v = codes.astype(np.int8)
    return np.where(codes == 2, -1, np.where(codes == 3, 2, v)).astype(np.int8)


def q3(v):
    return np.where(v == 0, 0, np.where(v > 0, 1, 2)).astype(np.int64)


def conv_period(ncodes):
    return 9 if ncodes % 9 == 0 and ncodes >= 18 else 0


def cand_ternary(arr, rows):
    """Candidates for packed ternary codes (4 per byte)."""
    B = np.asarray(arr).reshape(rows, -1)
    nbytes = B.size
    codes = np.stack([(B >> (2 * m)) & 3 for m in range(4)], -1).reshape(rows, -1)
    V = tern_values(codes)
    ncols = codes.shape[1]
    per = conv_period(ncols)
    out = {}
    # today-like: one symbol per code; kernel contexts for flattened 3x3
    qv = q3(V)
    if per:
        kp = np.broadcast_to(np.arange(ncols) % per, V.shape)
        Lk = np.where(kp % 3 != 0, shift(qv, 0, 1, 0), 0)
        Uk = np.where(kp >= 3, shift(qv, 0, 3, 0), 0)
        ctx = kp * 9 + 3 * Lk + Uk
        nctx = per * 9
    else:
        ctx = 9 * shift(qv, 0, 1, 0) + 3 * shift(qv, 0, 2, 0) + shift(qv, 1, 0, 0)
        nctx = 27
    out["today-like"] = dict(streams=[(codes, ctx, 4, nctx)], syms=codes.size, raw=0, layout="rect")
    # 4 codes per byte: symbol = the byte
    nnz = (codes.reshape(rows, -1, 4) != 0).sum(-1)
    last = q3(V.reshape(rows, -1, 4)[..., 3])
    featB = nnz * 3 + last  # 0..14
    ph = None
    if per:
        ph = (np.broadcast_to((np.arange(B.shape[1]) * 4) % per, B.shape), per)
    for lay in LAYOUTS:
        ctx, n = ctx_for(B, featB, 15, lay, [ph] if ph else None, nnz, 5)
        out["T4-" + lay] = dict(streams=[(B, ctx, 256, n)], syms=B.size, raw=0, layout=lay)
    # 5 codes per symbol (243)
    g = -(-ncols // 5)
    pad = np.zeros((rows, g * 5), dtype=np.int64)
    dig = np.where(codes == 2, 2, codes).astype(np.int64)
    if (codes == 3).any():
        return out, nbytes  # not base-3 codable
    pad[:, :ncols] = dig
    G = pad.reshape(rows, g, 5)
    S5 = (G * np.array([1, 3, 9, 27, 81])).sum(-1)
    gv = np.where(G == 2, -1, G)
    nnz5 = (G != 0).sum(-1)
    last5 = q3(gv[..., 4])
    feat5 = nnz5 * 3 + last5  # 0..17
    ph5 = None
    if per:
        ph5 = (np.broadcast_to((np.arange(g) * 5) % per, S5.shape), per)
    for lay in LAYOUTS:
        ctx, n = ctx_for(S5, feat5, 18, lay, [ph5] if ph5 else None, nnz5, 6)
        out["T5-" + lay] = dict(streams=[(S5, ctx, 243, n)], syms=S5.size, raw=0, layout=lay)
    if per:
        # kern: the left byte's last three codes (the codes one kernel row
        # up of this byte's first three, and the left neighbour of its
        # first) x the byte's kernel phase; the same lane's previous step in
        # the rect and rowlane layouts, not available to consecutive lanes
        l3 = (B.astype(np.int64) >> 2) & 63
        l3 = np.where(((l3 >> 4) & 3) == 3, 0, l3)
        tri = (l3 & 3) + 3 * ((l3 >> 2) & 3) + 9 * ((l3 >> 4) & 3)  # 0..26
        ctx, n = combine([shift(tri, 0, 1, NONE), ph[0] - 1], [28, per])
        out["T4-kern"] = dict(streams=[(B, ctx, 256, n)], syms=B.size, raw=0, layout="kern")
        # kernel-row symbols: three codes (27 values) per symbol, context the
        # kernel row above in the same kernel (in-lane previous symbol) x the
        # row index in the kernel
        K3 = dig.reshape(rows, -1, 3)
        S3 = (K3 * np.array([1, 3, 9])).sum(-1)
        kr = np.broadcast_to(np.arange(S3.shape[1]) % 3, S3.shape)
        up = np.where(kr > 0, shift(S3, 0, 1, NONE), NONE)
        ctx, n = combine([up, kr - 1], [28, 3])
        out["T3k-kern"] = dict(streams=[(S3, ctx, 27, n)], syms=S3.size, raw=0, layout="kern")
    return out, nbytes


def aclass(a):
    """magnitude class 0, 1, 2, 3-4, 5-8, 9-16, 17-32, 33+ -> 0..7"""
    a = np.abs(a.astype(np.int64))
    return np.searchsorted(np.array([1, 2, 3, 5, 9, 17, 33]), a, side="right")


def cand_int4(arr, rows, zero, scale):
    B = np.asarray(arr).reshape(rows, -1).astype(np.int64)
    lo, hi = B & 15, B >> 4
    codes = np.stack([lo, hi], -1).reshape(rows, -1)
    ncols = codes.shape[1]
    groups = zero.size // rows
    gsz = ncols // groups
    Z = np.repeat(np.asarray(zero).reshape(rows, groups).astype(np.int64), gsz, axis=1)
    # centring as the encoder picks it (order-0 entropy): zero point or 8
    def h0(x):
        c = np.bincount(x.ravel()).astype(float)
        c = c[c > 0] / x.size
        return -(c * np.log2(c)).sum()
    Vz, V8 = codes - Z, codes - 8
    V = Vz if h0(Vz + 16) < h0(V8 + 16) else V8
    out = {}
    per = conv_period(ncols)
    # today-like: one symbol per code, value in -15..15
    vc = np.clip(V, -4, 4) + 4  # 0..8
    if per:
        kp = np.broadcast_to(np.arange(ncols) % per, V.shape)
        Lk = np.where(kp % 3 != 0, shift(vc, 0, 1, 4), 4)
        Uk = np.where(kp >= 3, shift(vc, 0, 3, 4), 4)
        ctx, n = Lk * 9 + Uk, 81
    else:
        ctx, n = shift(vc, 0, 1, 4) * 9 + shift(vc, 1, 0, 4), 81
    out["today-like"] = dict(streams=[(V + 15, ctx, 31, n)], syms=V.size, raw=0, layout="rect")
    # one symbol per byte: two centred nibbles
    Vb = (V & 15).reshape(rows, -1, 2)
    S = Vb[..., 0] | (Vb[..., 1] << 4)
    Vp = V.reshape(rows, -1, 2)
    feat = np.clip(Vp[..., 1], -4, 4) + 4  # left byte's high nibble, 0..8
    act = np.minimum(aclass(Vp[..., 0]) + aclass(Vp[..., 1]), 5)  # 0..5
    # group scale class: quartiles of log2 scale over the tensor
    sc = np.asarray(scale).view(np.float16).astype(np.float32).reshape(rows, groups)
    ls = np.log2(np.maximum(np.abs(sc), 1e-30))
    th = np.quantile(ls, [0.25, 0.5, 0.75])
    scls = np.searchsorted(th, ls)
    scb = np.repeat(scls, S.shape[1] // groups, axis=1)
    extra = [(scb, 4)]
    if per:
        extra.append((np.broadcast_to((np.arange(S.shape[1]) * 2) % per, S.shape), per))
    for lay in LAYOUTS:
        ctx, n = ctx_for(S, feat, 9, lay, extra, act, 6)
        out["B8-" + lay] = dict(streams=[(S, ctx, 256, n)], syms=S.size, raw=0, layout=lay)
    if per:
        # kern: the codes one kernel row up of this byte's two codes
        # (c - 3, c - 2: high nibble of byte j - 2, low nibble of byte j - 1)
        # and the left code (high nibble of byte j - 1) x kernel phase
        h1 = shift(np.clip(Vp[..., 1], -4, 4) + 4, 0, 1, NONE)
        l1 = shift(np.clip(Vp[..., 0], -2, 2) + 2, 0, 1, NONE)
        h2 = shift(np.clip(Vp[..., 1], -2, 2) + 2, 0, 2, NONE)
        ctx, n = combine([h1, l1, h2, extra[1][0] - 1, scb - 1], [10, 6, 6, per, 4])
        out["B8-kern"] = dict(streams=[(S, ctx, 256, n)], syms=S.size, raw=0, layout="kern")
        # kernel-row pairs: each kernel row's first two codes as one symbol
        # (two centred nibbles), its third code alone; 2 symbols per 3
        # codes (1.33 per byte). Pair context: the pair one kernel row up
        # (each code clipped to -2..2) x kernel row x scale class; third
        # code: its left code (the pair's second) and the code one kernel
        # row up, clipped to -4..4, x scale class.
        K = V.reshape(rows, -1, 3, 3)
        scc = np.repeat(scls, gsz, axis=1).reshape(rows, -1, 3, 3)[..., 0]
        P2 = (K[..., 0] & 15) | ((K[..., 1] & 15) << 4)
        kr = np.broadcast_to(np.arange(3), P2.shape)
        c2 = np.clip(K, -2, 2) + 2
        upair = c2[..., 0] * 5 + c2[..., 1]
        up = np.where(kr > 0, np.roll(upair, 1, axis=2), NONE)
        ctxp, n_p = combine([up, kr - 1, scc - 1], [26, 3, 4])
        c4 = np.clip(K, -4, 4) + 4
        u2 = np.where(kr > 0, np.roll(c4[..., 2], 1, axis=2), 4)
        ctx3 = (c4[..., 1] * 9 + u2) * 4 + scc
        out["P2k-kern"] = dict(streams=[(P2, ctxp, 256, n_p), (K[..., 2] + 15, ctx3, 31, 324)],
                               syms=P2.size + K[..., 2].size, raw=0, layout="kern")
    return out, B.size


def cand_int8(arr, rows):
    V = np.asarray(arr).view(np.int8).reshape(rows, -1).astype(np.int64)
    S = V & 255
    ncols = V.shape[1]
    per = conv_period(ncols)
    out = {}
    # today-like: token per code, activity x left sign (kernel form for 3x3)
    q = q3(V)
    if per:
        kp = np.broadcast_to(np.arange(ncols) % per, V.shape)
        Lk = np.where(kp % 3 != 0, shift(V, 0, 1, 0), 0)
        Uk = np.where(kp >= 3, shift(V, 0, 3, 0), 0)
        a = np.searchsorted(np.array([1, 8, 24]), np.abs(Lk) + np.abs(Uk), side="right")
        ctx, n = a * 9 + 3 * q3(Lk) + q3(Uk), 36
    else:
        a = 2 * np.abs(shift(V, 0, 1, 0)) + np.abs(shift(V, 1, 0, 0)) + np.abs(shift(V, 0, 2, 0))
        a = np.searchsorted(np.array([1, 8, 24, 64, 160]), a, side="right")
        ctx, n = a * 3 + shift(q, 0, 1, 0), 18
    out["today-like"] = dict(streams=[(S, ctx, 256, n)], syms=S.size, raw=0, layout="rect")
    feat = aclass(V) * 2 + (V < 0)  # 0..15
    extra = None
    if per:
        extra = [(np.broadcast_to(np.arange(ncols) % per, V.shape), per)]
    for lay in LAYOUTS:
        ctx, n = ctx_for(S, feat, 16, lay, extra, aclass(V), 8)
        out["B8-" + lay] = dict(streams=[(S, ctx, 256, n)], syms=S.size, raw=0, layout=lay)
    if per:
        # kern: left code (fine) and the code one kernel row up (c - 3,
        # coarse) x kernel phase
        ctx, n = combine([shift(feat, 0, 1, NONE), shift(aclass(V), 0, 3, NONE), extra[0][0] - 1],
                         [17, 9, per])
        out["B8-kern"] = dict(streams=[(S, ctx, 256, n)], syms=S.size, raw=0, layout="kern")
    return out, S.size


FLOAT = {"F16": (2, 5, 10), "BF16": (2, 8, 7), "F32": (4, 8, 23)}


def cand_float(arr, dtype, rows):
    eb_bytes, eb, mb = FLOAT[dtype]
    if eb_bytes == 2:
        X = np.asarray(arr).view(np.uint16).astype(np.int64)
    else:
        X = np.asarray(arr).view(np.uint32).astype(np.int64)
    X = X.reshape(rows, -1)
    s = X >> (eb + mb)
    E = (X >> mb) & ((1 << eb) - 1)
    M = X & ((1 << mb) - 1)
    n = X.size
    nz = E[E > 0]
    med = int(np.median(nz)) if nz.size else 0
    elo = med - 4
    ecls = np.clip(E - elo, 0, 7)
    feat = ecls * 2 + s  # 0..15
    out = {}
    hist = np.bincount(E.ravel(), minlength=1 << eb)

    def window(W):
        cs = np.concatenate([[0], np.cumsum(hist)])
        sums = cs[W:] - cs[:-W] if (1 << eb) >= W else np.array([cs[-1]])
        b = int(np.argmax(sums))
        return b

    # two symbols: exponent (ctx: left exponent class and sign), then sign +
    # k mantissa bits (ctx: exponent class); k = 2, and k = all for BF16
    for k in ([2, 7] if dtype == "BF16" else [2]):
        if dtype == "F16" and os.environ.get("FS_F16_JOINT_ONLY"):
            break
        mh = M >> (mb - k)
        sm = (s << k) | mh
        for lay in (["rect", "consecA"] if k == 2 else ["rect"]):
            c1, n1 = ctx_for(E, feat, 16, lay, None, ecls, 8)
            out["2sym-k%d-%s" % (k, lay)] = dict(
                streams=[(E, c1, 1 << eb, n1), (sm, ecls, 1 << (k + 1), 8)],
                syms=2 * n, raw=(mb - k) * n, layout=lay)
    # one symbol per element: sign, exponent (window of 2^w - 1 values and an
    # escape followed by the exponent as raw bits) and top mantissa bits
    forms = []
    if eb + 1 + 2 <= 8:
        forms.append(("J-hibyte", eb, 2))  # F16: today's 2.3 joint symbol
    else:
        forms += [("J-w5m2", 5, 2), ("J-w4m3", 4, 3)]
    if dtype == "BF16":
        forms.append(("J-bf16hi", None, None))
    for name, w, k in forms:
        if w is None:  # BF16 high byte (sign, top 7 exponent bits), low byte raw
            J = X >> 8
            esc_bits = 0
            rawb = 8 * n
        elif w == eb:
            J = (s << (eb + k)) | (E << k) | (M >> (mb - k))
            esc_bits = 0
            rawb = (mb - k) * n
        else:
            W = (1 << w) - 1
            b = window(W)
            e = E - b
            inw = (e >= 0) & (e < W)
            ew = np.where(inw, e, W)
            J = (s << (w + k)) | (ew << k) | (M >> (mb - k))
            esc_bits = int((~inw).sum()) * eb
            rawb = (mb - k) * n
        for lay in LAYOUTS:
            c1, n1 = ctx_for(J, feat, 16, lay, None, ecls, 8)
            out["%s-%s" % (name, lay)] = dict(
                streams=[(J, c1, 256, n1)], syms=n, raw=rawb + esc_bits, layout=lay)
    per = conv_period(X.shape[1])
    if per and forms:
        # kern: lanes own whole 3x3 kernels; left inside the kernel row and
        # the element one kernel row up (c - 3), x kernel phase
        name, w, k = forms[0]
        if w == eb:
            J = (s << (eb + k)) | (E << k) | (M >> (mb - k))
            kp = np.broadcast_to(np.arange(X.shape[1]) % per, X.shape)
            Lk = np.where(kp % 3 != 0, shift(feat, 0, 1, NONE), NONE)
            Uk = np.where(kp >= 3, shift(ecls, 0, 3, NONE), NONE)
            c1, n1 = combine([Lk, Uk, kp - 1], [17, 9, per])
            out["%s-kern" % name] = dict(streams=[(J, c1, 256, n1)], syms=n,
                                         raw=(mb - k) * n, layout="kern")
    return out, n * eb_bytes


# ---------------------------------------------------------------- driver
def tensor_candidates(name, dtype, shape, arr, tensors):
    rows = shape[0] if len(shape) >= 2 else 1
    if arr.size < 2048:
        return None, 0, None
    if dtype == "U8" and name.endswith("_packed"):
        base = name[: -len("_packed")]
        if base + "_zero" in tensors:
            z = tensors[base + "_zero"][2]
            sc = tensors[base + "_scale"][2]
            o, nb = cand_int4(arr, rows, z, sc)
            return o, nb, "int4"
        o, nb = cand_ternary(arr, rows)
        return o, nb, "ternary"
    if dtype == "I8":
        o, nb = cand_int8(arr, rows)
        return o, nb, "int8"
    if dtype in FLOAT:
        o, nb = cand_float(arr, dtype, rows)
        return o, nb, dtype
    return None, 0, None


def cost_candidate(c, nbytes, kind):
    """-> dict: bytes (tables within the budget), bytes12 (P = 12, every
    context its own table, as today), P and tables of the choice."""
    full12 = c["layout"] == "rect" or c.get("today", False)
    results = [evaluate(sym, ctx, nsym, nctx, full12) for (sym, ctx, nsym, nctx) in c["streams"]]
    bits, tab, opts = choose(results, [st[2] for st in c["streams"]])
    bits12 = sum(r[(12, 0)][0] if (12, 0) in r else float("nan") for r in results)
    nchunks = max(1, -(-nbytes // CHUNK))
    # rANS lane states, length and flags per chunk, model record per tensor;
    # float chunks of <= 128 KiB with >= 128 bytes of raw bits carry 64
    # bytes of them in the final states (raw tail)
    over = 133 * nchunks + 16
    if kind in FLOAT and c["raw"] >= 128 * 8 * nchunks and nbytes <= 128 * 1024 * nchunks:
        over -= 64 * nchunks
    return dict(bytes=(bits + c["raw"]) / 8 + over, bytes12=(bits12 + c["raw"]) / 8 + over,
                P=max(o[0] for o in opts), K=sum(o[1] for o in opts), tab=tab,
                syms=c["syms"], ctx12=sum(r[(12, 0)][1] if (12, 0) in r else 0 for r in results))


def study_file(path, today):
    tensors = read_safetensors(path)
    tinfo = {}
    if today is not None:
        tinfo = {t["name"]: t for t in today["tensors"]}
    per = []
    for name, (dtype, shape, arr) in tensors.items():
        cands, nbytes, kind = tensor_candidates(name, dtype, shape, arr, tensors)
        t = tinfo.get(name)
        rec = dict(name=name, dtype=dtype, kind=kind, nbytes=int(arr.size),
                   today=(t["stored_bytes"] if t else None),
                   today_model=(t["chunks"]["model"] > 0 if t else None), cands={})
        if cands:
            for cname, c in cands.items():
                rec["cands"][cname] = cost_candidate(c, nbytes, kind)
        per.append(rec)
        print("  %-48s %-8s %9d %s" % (name[:48], kind or "-", arr.size,
              " ".join("%s=%.0f" % (k, v["bytes"]) for k, v in list(rec["cands"].items())[:3])),
              file=sys.stderr, flush=True)
    return per


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))
    ap.add_argument("--today", default=None)
    ap.add_argument("--out", default="format_study.json")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    files = a.files or sorted(glob.glob(os.path.join(a.data, "*.safetensors")))
    result = {}
    for f in files:
        base = os.path.basename(f)[: -len(".safetensors")]
        today = None
        if a.today:
            p = os.path.join(a.today, base + ".json")
            if os.path.exists(p):
                today = json.load(open(p))
        print(base, file=sys.stderr, flush=True)
        result[base] = dict(original=os.path.getsize(f),
                            stored_today=(today["stored_size"] if today else None),
                            tensors=study_file(f, today))
        with open(a.out, "w") as fo:
            json.dump(result, fo)
    return 0



# ---------------------------------------------------------------- report
README_TODAY = {  # format 2.3/2.4 ratio and zstd -19 ratio (README tables)
    "isnet-medium.f16": (0.8452, 0.9291),
    "isnet-medium.rtn-int4": (0.8605, 0.9200),
    "isnet-medium.rtn-int8": (0.8466, 0.8820),
    "isnet-medium.rtn-ternary": (0.6889, 0.7463),
    "silero_vad_16k.bf16": (0.6648, 0.7478),
    "silero_vad_16k.f32": (0.7382, 0.7840),
    "stories260K.bf16": (0.6523, 0.7506),
    "stories260K.f32": (0.8293, 0.9224),
    "stories260K.rtn-int4": (0.8478, 0.8800),
    "stories260K.rtn-int8": (0.8776, 0.9039),
    "stories260K.rtn-ternary": (0.8051, 0.8768),
}


def family(name):
    """(family, layout) of a candidate name."""
    if name == "today-like":
        return "today-like", "rect"
    parts = name.rsplit("-", 1)
    return parts[0], parts[1]


def file_table(base, F):
    """Rows (candidate, ratio, syms/byte, P, K, table KiB) for one file."""
    orig = F["original"]
    ts = F["tensors"]
    today_total = F["stored_today"]
    main = [t for t in ts if t["cands"]]
    kinds = {t["kind"] for t in main}
    intk = kinds & {"ternary", "int4", "int8"}
    if intk:
        main = [t for t in main if t["kind"] in intk]
    fixed = today_total - sum(t["today"] for t in main)

    def pick(t, names, key="bytes"):
        best = None
        for n in names:
            c = t["cands"].get(n)
            if c is None:
                continue
            if best is None or c[key] < best[1][key]:
                best = (n, c)
        return best

    def total(names, key="bytes"):
        tot, syms, nb, tabs, Ks, Pw, picks = fixed, 0, 0, [], [], {}, {}
        for t in main:
            b = pick(t, names, key)
            if b is None:
                tot += t["today"]
                continue
            n, c = b
            v = c[key]
            if not t["today_model"]:
                v = min(v, t["today"])  # today's zstd / raw chunk stays possible
            tot += v
            syms += c["syms"]
            nb += t["nbytes"]
            if key == "bytes":
                tabs.append(c["tab"])
                Ks.append(c["K"])
                Pw[c["P"]] = Pw.get(c["P"], 0) + t["nbytes"]
            else:
                tabs.append(c["ctx12"] * 4096 * 4)
            picks[n] = picks.get(n, 0) + t["nbytes"]
        part = (tot - fixed - sum(t["today"] for t in main if pick(t, names, key) is None)) / max(nb, 1)
        return dict(ratio=tot / orig, part=part, spb=syms / max(nb, 1), tabmax=max(tabs) / 1024 if tabs else 0,
                    Kmax=max(Ks) if Ks else 0, P=max(Pw, key=Pw.get) if Pw else 12, picks=picks)

    names = sorted({n for t in main for n in t["cands"]})
    rows = [("today (README, format 2.3)", dict(ratio=today_total / orig, spb=None,
             part=sum(t["today"] for t in main) / max(1, sum(t["nbytes"] for t in main))))]
    if "today-like" in names:
        rows.append(("today-like, est. (P=12, no map)", total(["today-like"], "bytes12")))
        rows.append(("today-like per code, tables within 64 KiB", total(["today-like"])))
    else:  # floats: today's forms
        tl = [n for n in names if n in ("2sym-k2-rect", "2sym-k7-rect", "J-hibyte-rect")]
        rows.append(("today-like, est. (P=12, no map)", total(tl, "bytes12")))
    for n in names:
        if n == "today-like":
            continue
        rows.append((n, total([n])))
    fams = {}
    for n in names:
        f, lay = family(n)
        if f.startswith("2sym") or f == "today-like":
            continue
        fams.setdefault(lay, []).append(n)
    if "kern" in fams:  # kernel contexts exist for 3x3 convolutions only
        fams["kern"] = fams["kern"] + fams.get("rect", [])
    if len({family(n)[0] for n in names if not family(n)[0].startswith("2sym")} - {"today-like"}) > 1:
        for lay, ns in fams.items():
            rows.append(("best of " + "/".join(sorted({family(n)[0] for n in ns})) + " -" + lay
                         + ("|rect" if lay == "kern" else ""), total(ns)))
    js = [n for n in names if n.startswith("J-") and n.endswith("-rect")]
    if js and any(n.startswith("2sym") for n in names):
        rows.append(("per tensor: joint or 2sym -rect (encoder's choice)",
                     total(js + [n for n in names if n.startswith("2sym") and n.endswith("-rect")])))
    return rows


def report(paths):
    R = {}
    for path in paths:
        R.update(json.load(open(path)))
    out = []
    for base in sorted(R):
        F = R[base]
        if F["stored_today"] is None:  # no --today: modelled tensors only
            out.append("\n### %s (modelled tensors only, no fallback)\n" % base)
            out.append("| model | bytes / original bytes | symbols / byte |")
            out.append("|---|---|---|")
            main = [t for t in F["tensors"] if t["cands"]]
            nb = sum(t["nbytes"] for t in main)
            for n in sorted({n for t in main for n in t["cands"]}):
                ts = [t for t in main if n in t["cands"]]
                b = sum(t["cands"][n]["bytes"] for t in ts)
                out.append("| %s | %.4f | %.2f |" % (n, b / max(1, sum(t["nbytes"] for t in ts)),
                           sum(t["cands"][n]["syms"] for t in ts) / max(1, nb)))
            continue
        td, zs = README_TODAY.get(base, (F["stored_today"] / F["original"], float("nan")))
        out.append("\n### %s\n" % base)
        out.append("today %.4f, zstd -19 %.4f; within 1%% of today: ratio <= %.4f\n" % (td, zs, td * 1.01))
        out.append("| model | file ratio | modelled tensors | within 1% | < zstd -19 | symbols / byte | P | tables / tensor (max) | table KiB / tensor (max) |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        for name, r in file_table(base, F):
            if r.get("spb") is None:
                out.append("| %s | %.4f | %.4f | | | | | | |" % (name, r["ratio"], r["part"]))
                continue
            out.append("| %s | %.4f | %.4f | %s | %s | %.2f | %s | %s | %.0f |" % (
                name, r["ratio"], r["part"], "yes" if r["ratio"] <= td * 1.01 else "no",
                "yes" if r["ratio"] < zs else "no", r["spb"], r.get("P") or 12,
                r.get("Kmax") or "-", r["tabmax"]))
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--report":
        print(report(sys.argv[2:]))
        sys.exit(0)
    sys.exit(main())
