#!/usr/bin/env python3
"""Checks the include layering of the C++ / CUDA sources and looks for include cycles.

Every file belongs to a layer (LAYERS below, lowest first); a file may include files of its own
layer or of lower ones. An include that points to a higher layer runs against the layering.
An include cycle is a set of files that include each other, directly or through others.

  tools/check_layering.py [--max N] [--list]

Prints the count of includes against the layering and the cycles; exits 1 when there are more
than N such includes (default 5) or any cycle. --list names every offending include.
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Lowest first. A file takes the first layer whose pattern matches its path (relative to the
# repository root). Public headers sit at the layer of what they declare.
LAYERS = [
    ("base", [  # numbers, formats, datatypes, tensors: what everything else is made of
        "engine/include/castscope/error.hpp", "engine/include/castscope/scalar.hpp",
        "engine/include/castscope/format.hpp", "engine/include/castscope/codebook.hpp",
        "engine/include/castscope/datatype.hpp", "engine/include/castscope/tensor.hpp",
        "engine/include/castscope/rotation.hpp", "engine/src/format/*",
        "engine/src/families/ggml/ggml_types.*", "engine/src/families/ggml/ggml_grids.inc",
        "engine/src/families/ggml/ggml_quant.cpp", "engine/src/families/ggml/ggml_kquant.cpp",
    ]),
    ("core", [  # the cast's description and layout: options, axes, plans, groups, threads
        "engine/include/castscope/cast.hpp", "engine/src/core/tensor.cpp",
        "engine/src/core/dtype_format.hpp",
        "engine/src/core/axis.cpp", "engine/src/core/plan.*", "engine/src/core/group.hpp",
        "engine/src/core/parallel.hpp", "engine/src/core/cast_options_text.cpp",
    ]),
    ("kernels", [  # the backends' kernels and the statistics they fold
        "engine/include/castscope/metrics.hpp", "engine/include/castscope/metrics_json.hpp",
        "engine/include/castscope/tcfp.hpp", "engine/include/castscope/rotate.hpp",
        "engine/include/castscope/matmul.hpp", "engine/include/castscope/device.hpp",
        "engine/src/rotation/*", "engine/src/metrics/*", "engine/src/backends/**",
        "engine/src/families/tcfp/*", "engine/src/families/codebook/*",
        "engine/src/families/ggml/*", "engine/src/families/scaled_quantizer.hpp",
    ]),
    ("executor", [  # where work runs (CPU or GPU), fallback, device cache, progress
        "engine/include/castscope/executor.hpp", "engine/include/castscope/placed.hpp",
        "engine/src/executor/*",
    ]),
    ("dispatch", [  # the family table and cast dispatch (the rest of core/): reach every kernel
        "engine/include/castscope/layout.hpp", "engine/include/castscope/storage_bits.hpp",
        "engine/src/families/*", "engine/src/core/*",
    ]),
    ("methods", [  # quantization methods: drive the family table's quantizers
        "engine/include/castscope/method.hpp", "engine/src/methods/*",
    ]),
    ("io", [  # files, models, plans, the model map and planner
        "engine/include/castscope/*", "engine/src/io/*", "engine/src/io/quantized/*",
        "engine/src/modelmap/*",
    ]),
    ("widgets", ["widgets/**"]),
    ("apps", ["app/**", "python/**", "bench/**", "tests/**", "fuzz/**"]),
]

SOURCE_DIRS = ["engine", "widgets", "app", "python/src"]
EXTS = (".cpp", ".hpp", ".h", ".cu", ".cuh", ".inc")
# Where a quoted include is looked for, after the including file's own folder.
SEARCH = ["engine/src", "engine/include", "widgets/include", "widgets/src", "app", "app/gui",
          "python/src"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def glob_re(pattern):
    """'*' stays within a folder, '**' crosses folders."""
    out = ""
    for part in re.split(r"(\*\*|\*)", pattern):
        out += "[^/]*" if part == "*" else ".*" if part == "**" else re.escape(part)
    return re.compile(out + "$")


COMPILED = [[glob_re(p) for p in pats] for _, pats in LAYERS]


def layer_of(path):
    for i, pats in enumerate(COMPILED):
        if any(p.match(path) for p in pats):
            return i
    return None


def sources():
    for d in SOURCE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, d)):
            for f in files:
                if f.endswith(EXTS):
                    yield os.path.relpath(os.path.join(dirpath, f), ROOT)


def resolve(includer, name, known):
    for base in [os.path.dirname(includer)] + SEARCH:
        p = os.path.normpath(os.path.join(base, name))
        if p in known:
            return p
    return None


def cycles(graph):
    """Strongly connected components of more than one file (or a file including itself)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max", type=int, default=5, help="most includes against the layering")
    ap.add_argument("--list", action="store_true", help="name every offending include")
    a = ap.parse_args()
    files = sorted(sources())
    known = set(files)
    graph, against, unplaced = {}, [], []
    for f in files:
        lf = layer_of(f)
        if lf is None:
            unplaced.append(f)
        with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for name in INCLUDE.findall(text):
            target = resolve(f, name, known)
            if target is None:
                continue  # a system or generated header
            graph.setdefault(f, set()).add(target)
            lt = layer_of(target)
            if lf is not None and lt is not None and lt > lf:
                against.append((f, LAYERS[lf][0], target, LAYERS[lt][0]))
    found = cycles(graph)
    print(f"{len(files)} files, {sum(len(v) for v in graph.values())} includes; "
          f"{len(against)} against the layering (at most {a.max}); {len(found)} include cycles")
    for f, lf, t, lt in against if a.list else []:
        print(f"  {f} ({lf}) includes {t} ({lt})")
    for c in found:
        print("  cycle: " + " -> ".join(c))
    for f in unplaced:
        print(f"  no layer: {f}")
    return 1 if len(against) > a.max or found or unplaced else 0


if __name__ == "__main__":
    sys.exit(main())
