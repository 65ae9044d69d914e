"""Every panel's cost figure is the tensor's storage, on tensors with short rows.

The Views (metrics table), the composer's "on TENSOR: ... bits per value" line, Compare (table and
so the Pareto chart) and the model map (its cells' bits) must show the bits a datatype costs on
that tensor: a q4_k block holds 256 values in 144 bytes (gguf's own GGML_QUANT_SIZES), so a row of
9 costs 128 bits per value; NVFP4 one e4m3 scale per 16 values and one float32 tensor scale;
MXFP4 one e8m0 scale per 32. The expected figures come from those facts, not from the app. A
datatype that cannot run along a tensor's axis (q4_k across the rows in memory) is refused by
name in the Views and in Compare.

The tensors: an .npz with a depthwise conv [16, 1, 3, 3] (rows of 9), a conv [24, 3, 3, 3] (rows
of 27) and a linear [40, 120] (rows of 120), fresh random values; and PaddleOCR v4's recognizer
(conv2d_157.w_0, linear_85.w_0) where scripts/setup.sh --dev fetched it.

usage: cost_bits.py PATH/TO/castscope PATH/TO/castscope_gui_check WORKDIR
"""
import json
import math
import os
import sys

import numpy as np
from app_session import begin, run_app

PADDLE = os.path.join(os.environ.get("CASTSCOPE_TEST_MODELS",
                                     os.path.expanduser("~/.cache/castscope/models")),
                      "ch_PP-OCRv4_rec_infer.onnx")
DTYPES = ["q4_k", "nvfp4", "mxfp4e2"]


def q4_k_block():
    try:
        import gguf
        return gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.Q4_K]
    except ImportError:
        return (256, 144)  # llama.cpp's block_q4_K: 256 values, 2 + 2 + 12 + 128 bytes


def expected(dtype, rows, length):
    """(storage bits per value, nominal bits per value) on `rows` rows of `length`."""
    n = rows * length
    if dtype == "q4_k":
        qk, size = q4_k_block()
        return rows * math.ceil(length / qk) * size * 8 / n, size * 8 / qk
    if dtype == "nvfp4":  # e2m1 codes, an e4m3 scale per 16, one float32 tensor scale
        return (n * 4 + rows * math.ceil(length / 16) * 8 + 32) / n, 4 + 8 / 16
    return (n * 4 + rows * math.ceil(length / 32) * 8) / n, 4 + 8 / 32  # mxfp4: e8m0 per 32


def label(bits, nominal, length):
    a, b = f"{bits:.4g}", f"{nominal:.4g}"
    return a if a == b else f"nominal {b}, on rows of {length}: {a}"


def shape_str(shape):
    return "[" + ", ".join(str(d) for d in shape) + "]"


def session(model, tensor, shape, rows, length, axis=None):
    lines = [f"open {model}", "wait", f"tensor {tensor}", "wait"]
    if axis is not None:
        lines += [f"axis {axis}", "wait"]
    lines += ["panel compare"] + [f"pin {d}" for d in DTYPES]
    for d in DTYPES:
        lines += [f"dtype {d}", "wait", "frames 2"]
        if d == "q4_k" and axis is not None:
            lines += ["expect analysis_error~quantizes blocks along the last axis"]
            continue
        bits, nominal = expected(d, rows, length)
        lines += [f"expect-text on {tensor} {shape_str(shape)}: {bits:.4g} bits per value"]
        if f"{bits:.4g}" != f"{nominal:.4g}":  # the nominal figure only labelled, beside it
            lines += [f"expect-text ^{label(bits, nominal, length)}",
                      f"expect-text {bits:.4g} (nominal {nominal:.4g})"]
    lines += ["hide compare", "map-dtypes " + " ".join(DTYPES), "map-run", "wait", "frames 2"]
    for d in DTYPES:
        lines += [f'hover "Model map::###{tensor}|{d}"', "frames 2"]
        if d == "q4_k" and axis is not None:  # the map's cell is refused by name, as the Views
            lines += ["expect-tooltip quantizes blocks along the last axis"]
            continue
        bits, nominal = expected(d, rows, length)
        lines += [f"expect-tooltip {label(bits, nominal, length)} bits per value"]
    lines += ["quit"]
    return "\n".join(lines) + "\n"


def check(state, tensor, rows, length, axis, failures):
    s = json.load(open(state))
    what = f"{tensor}{'' if axis is None else ' axis ' + axis}"
    if s.get("script_errors"):
        failures.append(f"{what}: {s['script_errors']}")
    a = s.get("analysis") or {}
    cmp = s.get("compare") or {}
    errors = cmp.get("errors", [])
    # The pinned datatypes in order, less those refused on this axis; the chart plots these bits.
    shown = [d for d in DTYPES if not (d == "q4_k" and axis is not None)]
    got = [r["bits"] for r in cmp.get("rows", [])]
    want = [expected(d, rows, length)[0] for d in shown]
    if got != want:
        failures.append(f"{what}: Compare shows {got} bits for {shown}, storage is {want}")
    mm = s.get("model_map") or {}
    row = next((r for r in mm.get("rows", []) if r["name"] == tensor), None)
    if row is None:
        failures.append(f"{what}: no model-map row")
    for k, d in enumerate(DTYPES):
        bits, _ = expected(d, rows, length)
        if d == "q4_k" and axis is not None and not any(
                e.startswith("q4_k:") and "last axis" in e for e in errors):
            failures.append(f"{what}: Compare does not refuse q4_k by name: {errors}")
        if row is not None and row["bits"][k] != bits and not (d == "q4_k" and axis is not None):
            failures.append(f"{what}: model map {d} {row['bits'][k]} bits, storage is {bits}")
    if axis is None and a.get("bits_per_value") != expected(DTYPES[-1], rows, length)[0]:
        failures.append(f"{what}: Views {a.get('bits_per_value')} bits for {DTYPES[-1]}")


def main():
    started = begin("cost_bits")
    if started is None:
        return 77
    app, _checker, work, rng = started
    shapes = {"dw.weight": [16, 1, 3, 3], "conv.weight": [24, 3, 3, 3], "fc.weight": [40, 120]}
    np.savez(os.path.join(work, "short_rows.npz"),
             **{k: rng.standard_normal(v).astype(np.float32) for k, v in shapes.items()})
    # (model, tensor, shape, rows, row length, axis set in the composer)
    cases = [("short_rows.npz", k, v, v[0], int(np.prod(v[1:])), None) for k, v in shapes.items()]
    # Along axis 0 the rows of fc.weight are not its rows in memory: q4_k is refused there.
    cases.append(("short_rows.npz", "fc.weight", [40, 120], 120, 40, "0"))
    if os.path.exists(PADDLE):
        cases += [(PADDLE, "conv2d_157.w_0", [16, 1, 3, 3], 16, 9, None)]
    else:
        print(f"cost_bits: {PADDLE} not found (scripts/setup.sh --dev fetches it); npz only")
    failures = []
    for i, (model, tensor, shape, rows, length, axis) in enumerate(cases):
        _, state = run_app(app, work, f"case{i}", session(model, tensor, shape, rows, length, axis))
        check(state, tensor, rows, length, axis, failures)
    for f in failures:
        print("cost_bits:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
