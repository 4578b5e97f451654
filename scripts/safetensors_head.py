#!/usr/bin/env python3
"""Writes the first tensors of a safetensors file (in data order, whole
tensors, up to a byte budget) as a valid safetensors file: real weights in
less space, for machines the whole data set cannot travel to.

usage: safetensors_head.py IN OUT BUDGET_BYTES
"""
import json
import struct
import sys


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst, budget = sys.argv[1], sys.argv[2], int(float(sys.argv[3]))
    with open(src, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        if "__metadata__" in header:
            out["__metadata__"] = header.pop("__metadata__")
        blobs, off = [], 0
        for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
            a, b = t["data_offsets"]
            if off > 0 and off + (b - a) > budget:
                break
            f.seek(base + a)
            blobs.append(f.read(b - a))
            out[name] = {"dtype": t["dtype"], "shape": t["shape"], "data_offsets": [off, off + b - a]}
            off += b - a
    h = json.dumps(out, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(dst, "wb") as g:
        g.write(struct.pack("<Q", len(h)))
        g.write(h)
        for blob in blobs:
            g.write(blob)
    print(f"{dst}: {len(out) - ('__metadata__' in out)} tensors, {off} bytes of data")
    return 0


if __name__ == "__main__":
    sys.exit(main())
