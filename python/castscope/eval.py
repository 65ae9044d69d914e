"""``python3 -m castscope.eval MODEL --plan PLAN [--inputs FILE] [--act-dtype D] [--json|--csv]``:
the command line of :func:`castscope.evaluate` (``castscope-cli eval`` runs it).

Progress goes to stderr as ``progress FRACTION STAGE`` lines with --progress; the result to
stdout. Exit status: 0 done, 1 bad input or a failure (the message on stderr), 2 usage, 130
cancelled (SIGINT / Ctrl+C)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from typing import List, Optional


def _num(x):
    """A number as CSV writes it: non-finite as inf, -inf or nan."""
    if x is None:
        return None
    if isinstance(x, float) and not math.isfinite(x):
        return "inf" if x > 0 else ("-inf" if x < 0 else "nan")
    return x


def _exact_key(field):
    """The key of an SNR field's exact flag, as the engine's metrics_json.hpp names it."""
    if field == "snr_db":
        return "exact"
    if field.endswith("_snr_db"):
        return field[: -len("snr_db")] + "exact"
    return field + "_exact"


def _clean(o):
    """JSON as the engine writes metrics (metrics_json.hpp): a non-finite number is null, and an
    SNR field gets its exact flag (true for an infinite SNR) beside it."""
    if isinstance(o, dict):
        out = {}
        for k, v in o.items():
            out[k] = _clean(v)
            if k.endswith("snr_db") and isinstance(v, (int, float)):
                out[_exact_key(k)] = v == math.inf
        return out
    if isinstance(o, list):
        return [_clean(v) for v in o]
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o


def to_csv(d) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["model", "plan", "output", "shape", "snr_db", "kl", "top1", "distribution",
                "bits_per_weight", "bits_per_weight_cast", "ppl_original", "ppl_quantized",
                "synthetic_inputs"])
    ppl = d.get("perplexity") or {}
    for o in d["outputs"]:
        w.writerow([d["model"], d["plan"], o["name"], "x".join(map(str, o["shape"])),
                    _num(o["snr_db"]), o.get("kl", ""), o.get("top1", ""),
                    o.get("distribution") or "", d["size"].get("bits_per_weight") or "",
                    d["size"].get("bits_per_weight_cast") or "", ppl.get("original", ""),
                    ppl.get("quantized", ""), int(bool(d["inputs"]["synthetic"]))])
    return buf.getvalue()


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(
        prog="castscope-cli eval",
        description="Run the original and the plan-quantized model in its own runtime and "
        "compare their outputs (SNR, KL divergence, top-1 agreement, perplexity).")
    ap.add_argument("model", help="ONNX file, Hugging Face model directory or GGUF file")
    ap.add_argument("--plan", required=True,
                    help="plan JSON (castscope-cli plan / export --plan), or a datatype")
    ap.add_argument("--inputs", help="ONNX: .npy / .npz; language models: token ids (.npy) or a "
                    "text file (default: synthesized from the input spec)")
    ap.add_argument("--act-dtype", help="also cast Linear-layer inputs to this datatype (PyTorch)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "gpu"])
    ap.add_argument("--seed", type=int, default=0, help="synthetic inputs and stochastic rounding")
    ap.add_argument("--round", default="even", help="even | away | zero | stochastic")
    ap.add_argument("--scale-mode", default="floor",
                    help="floor | ceil | midmax | option3 | topbinade")
    ap.add_argument("--calib", default=None,
                    help="calibration inputs [tokens, in] keyed by weight name (.safetensors / .npz) "
                         "for the plan's gptq / awq rules")
    ap.add_argument("--axis", default="auto", help="quantization axis where the plan gives none")
    ap.add_argument("--max-tokens", type=int, default=512, help="tokens per sequence at most")
    ap.add_argument("--save-quantized", help="also write the quantized model as it ran")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print the result as JSON")
    g.add_argument("--csv", action="store_true", help="print one CSV row per output")
    ap.add_argument("--progress", action="store_true",
                    help="print 'progress FRACTION STAGE' lines on stderr")
    a = ap.parse_args(argv)

    import warnings

    # The engine's one-time note that a CPU build casts on the CPU is not news here.
    warnings.filterwarnings("ignore", message="no usable GPU", category=RuntimeWarning)
    try:
        import castscope
    except ImportError as e:  # the compiled module missing from a source checkout
        print(f"error: the castscope Python package cannot be imported ({e}); install it with "
              "'pip install .' from the CastScope source tree", file=sys.stderr)
        return 1

    def progress(p: float, stage: str) -> None:
        if a.progress:
            print(f"progress {p:.4f} {stage}", file=sys.stderr, flush=True)

    try:
        r = castscope.evaluate(a.model, a.plan, inputs=a.inputs, act_dtype=a.act_dtype,
                               device=a.device, seed=a.seed, round=a.round,
                               scale_mode=a.scale_mode, axis=a.axis, max_tokens=a.max_tokens,
                               progress=progress, save_quantized=a.save_quantized,
                               calib=a.calib)
    except KeyboardInterrupt:
        print("cancelled", file=sys.stderr)
        return 130
    except castscope.Cancelled:
        print("cancelled", file=sys.stderr)
        return 130
    except castscope.Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    d = r.to_dict()
    if a.json:
        print(json.dumps(_clean(d), indent=2))
    elif a.csv:
        sys.stdout.write(to_csv(d))
    else:
        print(r.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
