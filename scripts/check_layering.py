#!/usr/bin/env python3
"""Checks the source tree's layering rules (docs/architecture.md):

  - nothing in codec/ includes a header of fs/ (wcodecfs/...) or mount/;
  - nothing in cuda/ includes a header of fs/ or mount/;
  - no include cycle among the modules of fs/ (a module: a header and the
    source file of the same name, e.g. filesystem.h + filesystem.cpp;
    quoted includes resolved against fs/include and the including file's
    folder), so no two parts of fs/ depend on each other;
  - no file in codec/ is longer than MAX_LINES lines.

Prints every violation and exits 1 if there is any, else prints a summary
and exits 0. Usage: check_layering.py [REPO_ROOT]
"""
import os
import re
import sys

MAX_LINES = 1200
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE_EXT = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")


def sources(root, folder):
    for dirpath, _, files in os.walk(os.path.join(root, folder)):
        for f in files:
            if f.endswith(SOURCE_EXT):
                yield os.path.join(dirpath, f)


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return INCLUDE.findall(f.read())


def module(path):
    return os.path.splitext(os.path.basename(path))[0]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    problems = []
    fs_headers = set()
    for p in sources(root, "fs"):
        fs_headers.add(os.path.basename(p))
    mount_headers = {os.path.basename(p) for p in sources(root, "mount") if p.endswith(".h")}

    for folder in ("codec", "cuda"):
        for p in sources(root, folder):
            for inc in includes(p):
                base = os.path.basename(inc)
                if inc.startswith("wcodecfs/") or base in mount_headers or (base in fs_headers and not os.path.exists(
                        os.path.join(os.path.dirname(p), inc))):
                    problems.append(f"{os.path.relpath(p, root)} includes \"{inc}\" (fs/ or mount/)")

    # Include graph of fs/.
    fs_inc = os.path.join(root, "fs", "include")
    graph = {}
    for p in sources(root, "fs"):
        edges = []
        for inc in includes(p):
            for cand in (os.path.join(fs_inc, inc), os.path.join(os.path.dirname(p), inc),
                         os.path.join(root, "fs", "src", inc)):
                if os.path.exists(cand):
                    edges.append(os.path.realpath(cand))
                    break
        graph.setdefault(module(p), set()).update(module(e) for e in edges if module(e) != module(p))
    state = {}
    stack = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, [])):
            if state.get(m) == 1:
                cycle = stack[stack.index(m):] + [m]
                problems.append("include cycle in fs/: " + " -> ".join(cycle))
            elif state.get(m) is None:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if state.get(n) is None:
            visit(n)

    longest = (0, "")
    for p in sources(root, "codec"):
        with open(p, encoding="utf-8", errors="replace") as f:
            n = sum(1 for _ in f)
        longest = max(longest, (n, os.path.relpath(p, root)))
        if n > MAX_LINES:
            problems.append(f"{os.path.relpath(p, root)}: {n} lines (at most {MAX_LINES})")

    for line in problems:
        print("layering: " + line)
    if problems:
        return 1
    print(f"layering: OK ({len(graph)} fs modules without include cycles; codec/ and cuda/ include nothing of fs/ "
          f"or mount/; longest codec file {longest[1]}, {longest[0]} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
