"""``python3 -m castscope.plan_table MODEL --out TABLE.json [--inputs FILE] [--activations
runtime|synthetic|none] [--sensitivity] ...``: the budget planner's table of :func:`castscope.plan`
(activations from the model's own runtime, measured end-to-end sensitivities) written as JSON for
``castscope-cli plan`` and the app's budget planner, which solve it with the same exact solver and
print or draw it as they do their own tables (docs/planning.md).

The table is written to --out (staged and renamed); a line ``inputs DESCRIPTION`` on stderr says
what the runtime ran on. Progress: ``progress FRACTION STAGE`` lines on stderr with --progress, else
a percentage when stderr is a terminal. Exit status: 0 done, 1 bad input or a failure (the message
on stderr), 2 usage, 130 cancelled (SIGINT / Ctrl+C)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(
        prog="castscope-cli plan",
        description="The budget planner's table with activations from the model's runtime and "
        "measured sensitivities, as JSON.")
    ap.add_argument("model", help="model file or directory (ONNX, Hugging Face, or a checkpoint)")
    ap.add_argument("--out", required=True, help="the table JSON to write")
    ap.add_argument("--inputs", help="the model's inputs (as castscope-cli eval takes them)")
    ap.add_argument("--activations", default="runtime", choices=["runtime", "synthetic", "none"])
    ap.add_argument("--sensitivity", action="store_true",
                    help="measure each tensor's end-to-end sensitivity in the runtime")
    ap.add_argument("--candidates", help="datatypes to choose from, comma-separated")
    ap.add_argument("--include-1d", action="store_true")
    ap.add_argument("--include-embeddings", action="store_true")
    ap.add_argument("--no-role-weights", action="store_true")
    ap.add_argument("--absolute", action="store_true")
    ap.add_argument("--rows", type=int, default=256, help="activation rows kept per tensor")
    ap.add_argument("--seed", type=int, default=1, help="synthetic inputs and row sampling")
    ap.add_argument("--max-tokens", type=int, default=512, help="tokens per sequence at most")
    ap.add_argument("--round", default="even")
    ap.add_argument("--scale-mode", default="floor")
    ap.add_argument("--axis", default="auto")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "gpu"])
    ap.add_argument("--progress", action="store_true",
                    help="print 'progress FRACTION STAGE' lines on stderr")
    a = ap.parse_args(argv)

    import warnings

    warnings.filterwarnings("ignore", message="no usable GPU", category=RuntimeWarning)
    try:
        import castscope
    except ImportError as e:
        print(f"error: the castscope Python package cannot be imported ({e}); install it with "
              "'pip install .' from the CastScope source tree", file=sys.stderr)
        return 1

    tty = not a.progress and sys.stderr.isatty()

    # With sensitivity castscope.plan reports two passes (the runs of the model, then the
    # table), each from 0 to 1: shown as the two halves of one.
    phase = {"last": 0.0, "base": 0.0}

    def progress(f: float) -> None:
        if a.sensitivity:
            if f < phase["last"] or phase["last"] >= 1.0:
                phase["base"] = 0.5
            phase["last"] = f
            f = phase["base"] + f / 2
        if a.progress:
            print(f"progress {f:.4f} planning", file=sys.stderr, flush=True)
        elif tty:
            print(f"\r\033[Kplan: {int(f * 100):3d}%", end="", file=sys.stderr, flush=True)

    def clear() -> None:
        if tty:
            print("\r\033[K", end="", file=sys.stderr, flush=True)

    try:
        r = castscope.plan(
            a.model, candidates=a.candidates.split(",") if a.candidates else None,
            inputs=a.inputs, activations=a.activations, points=0,
            relative=not a.absolute, role_weights=not a.no_role_weights, rows=a.rows,
            sensitivity=a.sensitivity, seed=a.seed, max_tokens=a.max_tokens,
            include_1d=a.include_1d, include_embeddings=a.include_embeddings, round=a.round,
            scale_mode=a.scale_mode, axis=a.axis, device=a.device, progress=progress,
            _table_json=True)
    except (KeyboardInterrupt, castscope.Cancelled):
        clear()
        print("cancelled", file=sys.stderr)
        return 130
    except castscope.Error as e:
        clear()
        print(f"error: {e}", file=sys.stderr)
        return 1
    clear()
    if r["inputs"]:
        print(f"inputs {r['inputs']}", file=sys.stderr, flush=True)
    tmp = f"{a.out}.part{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(r["table_json"])
    os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
