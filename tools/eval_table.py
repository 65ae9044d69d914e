#!/usr/bin/env python3
"""Per model, a table of end-to-end KL divergence, top-1 agreement and bits per weight of plans
run in the model's own runtime (castscope.evaluate): uniform MXFP4, NVFP4, Q4_K, MXFP6, MXFP8;
the SNR-threshold auto plan (castscope-cli plan); a llama.cpp-style mix (Q4_K, attn_v and ffn_down
at Q6_K); the budget plans of castscope-cli plan --budget B (relative weight error) and of
castscope.plan(budget=B) (relative output error from the runtime's activations on calibration
inputs: text lines of another seed, token ids of another seed). A row whose plan command fails
is left out, and the table says why.

usage:
  tools/eval_table.py [--cli build/app/castscope-cli] MODEL[=INPUTS] ... > tables.md
  tools/eval_table.py --make-tiny DIR        # the tiny transformers models of the tables
  tools/eval_table.py --text-lines OUT.npy   # text lines rendered for the PaddleOCR recognizer
                                             # (and OUT.calib.npy for the planner)
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
from tiny_gguf import write_tiny_llama_gguf

UNIFORM = [("uniform MXFP4", "mxfp4e2"), ("uniform NVFP4", "nvfp4"), ("uniform Q4_K", "q4_k"),
           ("uniform MXFP6", "mxfp6e2"), ("uniform MXFP8", "mxfp8e4")]
BUDGETS = [4.25, 4.5, 6, 8.25]
# Tensor names of attn_v and ffn_down in GGUF, Llama / Mixtral / Qwen (transformers) and GPT-2
# (c_attn holds q, k and v together, so only its mlp.c_proj is the ffn_down).
MIX_RE = r"(attn_v\.|v_proj\.|ffn_down|down_proj|\.w2\.weight|mlp\.c_proj\.)"


def uniform_plan(dtype: str) -> dict:
    """Every float weight of rank 2 to 5 (linear, stacked experts, conv) to dtype; 1-D kept."""
    return {"default": "keep",
            "rules": [{"pattern": "*", "dtype": dtype, "rank": r} for r in (2, 3, 4, 5)]}


def mix_plan() -> dict:
    return {"default": "keep", "rules": [
        *[{"pattern": "re:" + MIX_RE, "dtype": "q6_k", "rank": r} for r in (2, 3)],
        *uniform_plan("q4_k")["rules"]]}


def find_cli() -> str:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    hits = sorted(glob.glob(os.path.join(root, "build*/app/castscope-cli")), key=os.path.getmtime)
    return hits[-1] if hits else "castscope-cli"


def cli_plan(cli: str, model: str, extra: list, out: str):
    """(plan path, None) or (None, reason) from castscope-cli plan."""
    p = subprocess.run([cli, "plan", model, "-o", out, *extra], capture_output=True, text=True)
    if p.returncode != 0:
        msg = (p.stderr.strip() or p.stdout.strip()).splitlines()
        return None, (msg[0] if msg else f"exit status {p.returncode}")
    return out, None


def rows_for(cli: str, model: str, inputs, calib, device: str, tmp: str):
    import castscope

    plans = [(name, uniform_plan(d), None) for name, d in UNIFORM]
    path, why = cli_plan(cli, model, [], os.path.join(tmp, "auto.json"))
    plans.append(("auto plan (SNR 30 dB)", path, why))
    plans.append(("llama.cpp-style mix (Q4_K; attn_v, ffn_down Q6_K)", mix_plan(), None))
    for b in BUDGETS:
        path, why = cli_plan(cli, model, ["--budget", str(b)], os.path.join(tmp, f"b{b}.json"))
        plans.append((f"budget {b} (weights)", path, why))
    if not model.endswith(".gguf"):
        # Activation-aware: the activations the model's runtime computes on calibration inputs
        # other than the evaluation's (text lines of another seed; token ids of seed 1).
        # With sensitivity, each tensor's errors are also scaled to the output KL measured with
        # that tensor alone cast (measured once, then reused for every budget).
        try:
            t = castscope.plan(model, inputs=calib, points=0, sensitivity=True)["table"]
            sens = {e["name"]: e["sensitivity"] for e in t["tensors"]}
        except castscope.Error as e:
            sens = str(e).splitlines()[0]
        for label, with_sens in (("activations", False), ("activations + sensitivity", True)):
            for b in BUDGETS:
                name = f"budget {b} ({label})"
                if with_sens and isinstance(sens, str):
                    plans.append((name, None, sens))
                    continue
                try:
                    r = castscope.plan(model, budget=b, inputs=calib, points=0,
                                       sensitivity=sens if with_sens else False)
                    plans.append((name, r["plan"], None))
                except castscope.Error as e:
                    plans.append((name, None, str(e).splitlines()[0]))
    rows, skipped = [], []
    for name, plan, why in plans:
        if plan is None:
            skipped.append((name, why))
            continue
        print(f"  {name}", file=sys.stderr, flush=True)
        try:
            r = castscope.evaluate(model, plan, inputs=inputs, device=device)
        except castscope.Error as e:
            skipped.append((name, str(e).splitlines()[0]))
            continue
        rows.append((name, r))
    return rows, skipped


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def table(model: str, rows, skipped) -> str:
    first = rows[0][1] if rows else None
    out = [f"### {os.path.basename(os.path.normpath(model))}", ""]
    if first is not None:
        out += [f"Runtime: {first.runtime} on {first.device}. Inputs: "
                f"{first.inputs['description']}.", ""]
    ppl = any(r.perplexity for _, r in rows)
    head = "| plan | bits/weight (cast tensors) | bits/weight (all weights) | KL | top-1 | SNR dB |"
    sep = "|---|---:|---:|---:|---:|---:|"
    if ppl:
        head += " perplexity |"
        sep += "---:|"
    out += [head, sep]
    for name, r in rows:
        line = (f"| {name} | {fmt(r.size['bits_per_weight_cast'], '.3f')} | "
                f"{fmt(r.size['bits_per_weight'], '.3f')} | {fmt(r.kl, '.4g')} | "
                f"{fmt(None if r.top1 is None else 100 * r.top1, '.2f')}% | {fmt(r.snr_db, '.2f')} |")
        if ppl:
            line += f" {fmt((r.perplexity or {}).get('quantized'), '.4f')} |"
        out.append(line)
    if ppl and rows:
        out += ["", f"Perplexity of the original model on these inputs: "
                    f"{rows[0][1].perplexity['original']:.4f}."]
    for name, why in skipped:
        out += ["", f"Left out: {name}: {why}"]
    return "\n".join(out) + "\n"


def make_tiny(root: str, seed: int = 7) -> None:
    """Tiny transformers models: Llama and GPT-2 (Conv1D) as transformers initializes them, and
    a Mixtral MoE (4 experts) with heavy-tailed weights (Student-t, 3 degrees of freedom) and
    outlier input channels (one in 32 scaled by 8) in every linear and expert weight."""
    import torch
    import transformers

    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    common = dict(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    models = {
        "tiny-llama": transformers.LlamaForCausalLM(transformers.LlamaConfig(**common)),
        "tiny-gpt2": transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=512, n_embd=256, n_layer=4, n_head=4, n_positions=256, bos_token_id=0,
            eos_token_id=0)),
        "tiny-mixtral": transformers.MixtralForCausalLM(transformers.MixtralConfig(
            **common, num_local_experts=4, num_experts_per_tok=2)),
    }
    with torch.no_grad():
        for name, p in models["tiny-mixtral"].named_parameters():
            if p.dim() >= 2 and "embed" not in name and "lm_head" not in name:
                w = rng.standard_t(3, tuple(p.shape)).astype(np.float32) * 0.02
                cols = rng.choice(p.shape[-1], size=max(1, p.shape[-1] // 32), replace=False)
                w[..., cols] *= 8
                p.copy_(torch.from_numpy(w))
    for name, m in models.items():
        m.save_pretrained(os.path.join(root, name))
        print(os.path.join(root, name))
    tiny_gguf(os.path.join(root, "tiny-llama.gguf"), rng)
    print(os.path.join(root, "tiny-llama.gguf"))


def tiny_gguf(path: str, rng) -> None:
    """A Llama GGUF for llama.cpp (F32 weights, normal with std 0.02, norms of ones)."""
    def weight(name, shape):
        return np.ones(shape) if len(shape) == 1 else rng.standard_normal(shape) * 0.02

    write_tiny_llama_gguf(path, weight)


def calibration_path(inputs: str) -> str:
    """Where text_lines writes the planner's calibration lines beside the evaluation's."""
    root, ext = os.path.splitext(inputs)
    return root + ".calib" + ext


def text_lines(out: str, seed: int = 7) -> None:
    """Eight text lines, 48 x 320, normalized as PaddleOCR feeds its recognizer; and eight
    others (seed + 1) for the planner's activations (calibration_path)."""
    if seed == 7:
        text_lines(calibration_path(out), seed + 1)
    from PIL import Image, ImageDraw, ImageFont

    words = ["CastScope", "quantization", "MXFP4", "NVFP4", "bits", "per", "weight", "2026",
             "error", "model", "tensor", "scale", "block", "Q4_K", "E2M1", "outlier"]
    rng = np.random.default_rng(seed)
    font = ImageFont.load_default(size=28)
    lines = []
    for _ in range(8):
        s = " ".join(rng.choice(words, size=3))
        img = Image.new("RGB", (320, 48), (255, 255, 255))
        ImageDraw.Draw(img).text((int(rng.integers(2, 12)), 8), s, fill=(0, 0, 0), font=font)
        a = np.asarray(img, dtype=np.float32) / 255.0
        lines.append(((a - 0.5) / 0.5).transpose(2, 0, 1))
    np.save(out, np.stack(lines).astype(np.float32))
    print(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("models", nargs="*", help="MODEL or MODEL=INPUTS")
    ap.add_argument("--cli", default=None, help="castscope-cli (default: the newest build*/app)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--make-tiny", metavar="DIR")
    ap.add_argument("--text-lines", metavar="OUT.npy")
    a = ap.parse_args()
    if a.make_tiny:
        make_tiny(a.make_tiny)
    if a.text_lines:
        text_lines(a.text_lines)
    cli = a.cli or find_cli()
    for spec in a.models:
        model, _, inputs = spec.partition("=")
        print(f"{model}", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            calib = calibration_path(inputs) if inputs else None
            if calib and not os.path.exists(calib):
                sys.exit(f"{calib}: the calibration inputs are missing (--text-lines writes them)")
            rows, skipped = rows_for(cli, model, inputs or None, calib, a.device, tmp)
        print(table(model, rows, skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
