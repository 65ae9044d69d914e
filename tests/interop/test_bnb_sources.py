"""bitsandbytes 4-bit checkpoints made by transformers on the CPU, read back by CastScope.

A tiny transformers Llama with random weights is loaded with BitsAndBytesConfig(load_in_4bit)
for NF4 and FP4, double quantization on and off, and saved by save_pretrained. For every
quantized weight, the values `castscope-cli inspect --dump` gives equal bit for bit what
bitsandbytes' own dequantize_4bit gives from QuantState.from_dict of the saved tensors; inspect
lists none of the companions (absmax, quant_map, nested_*, quant_state) and prints the stored
format. Hostile variants (an absmax of the wrong length, a missing quant_map) are refused with the
tensor's name.

Run as `python3 test_bnb_sources.py PATH/TO/castscope-cli`; exit code 77 (skip) without torch /
transformers / bitsandbytes.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_common import CLI, SEED, check, cli, exit_status, failures, tiny_llama, same_bits  # noqa: E402

try:
    import numpy as np
    import torch
    import transformers
    import bitsandbytes.functional as bnbf
    from safetensors.torch import load_file, save_file
except ImportError as e:  # pragma: no cover
    print("skip:", e)
    sys.exit(77)

torch.manual_seed(SEED)
COMPANIONS = (".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map",
              ".quant_state.bitsandbytes__nf4", ".quant_state.bitsandbytes__fp4")


def bnb_reference(sd):
    """bitsandbytes' own dequantize_4bit of every 4-bit weight in the saved state dict."""
    out = {}
    for key in sd:
        for kind in ("nf4", "fp4"):
            tail = ".quant_state.bitsandbytes__" + kind
            if key.endswith(tail):
                w = key[: -len(tail)]
                qs = {k[len(w) + 1:]: v for k, v in sd.items() if k.startswith(w + ".")}
                state = bnbf.QuantState.from_dict(qs, torch.device("cpu"))
                out[w] = bnbf.dequantize_4bit(sd[w], state)
    return out


def refused(model_dir, name):
    r = subprocess.run([CLI, "inspect", model_dir], capture_output=True, text=True)
    return r.returncode != 0 and name in (r.stdout + r.stderr)


with tempfile.TemporaryDirectory() as base:
    tiny_llama().save_pretrained(base)
    for quant_type in ("nf4", "fp4"):
        for double in (False, True):
            what = f"bitsandbytes {quant_type} double_quant={double}"
            with tempfile.TemporaryDirectory() as d:
                bc = transformers.BitsAndBytesConfig(
                    load_in_4bit=True, bnb_4bit_quant_type=quant_type,
                    bnb_4bit_use_double_quant=double, bnb_4bit_compute_dtype=torch.bfloat16)
                model = transformers.AutoModelForCausalLM.from_pretrained(
                    base, quantization_config=bc, device_map="cpu", dtype=torch.bfloat16)
                model.save_pretrained(d)
                files = [f for f in os.listdir(d) if f.endswith(".safetensors")]
                sd = {}
                for f in files:
                    sd.update(load_file(os.path.join(d, f)))
                ref = bnb_reference(sd)
                check(len(ref) == 7, f"{what}: bitsandbytes has {len(ref)} 4-bit weights, not 7")
                with tempfile.TemporaryDirectory() as od:
                    cli("inspect", d, "--dump", od)
                    j = json.loads(cli("inspect", d, "--json"))
                    names = {t["name"]: t for t in j["tensors"]}
                    for n, v in ref.items():
                        t = names.get(n)
                        check(t is not None and t.get("stored") is not None,
                              f"{what}: {n} not listed as quantized")
                        if t is None:
                            continue
                        got = np.load(os.path.join(od, n + ".npy"))
                        want = v.float().numpy()
                        ok = same_bits(got, want)
                        if not ok and got.shape == want.shape:
                            bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
                            print(f"  {n}: {bad.size} differ, first at {bad[0]}: "
                                  f"{got.flat[bad[0]]!r} vs {want.flat[bad[0]]!r}")
                        check(ok, f"{what}: {n} dequantized values differ from bitsandbytes'")
                        check(not np.all(want == 0), f"{what}: {n} is all zeros")
                    for n in names:
                        check(not n.endswith(COMPANIONS), f"{what}: companion {n} still listed")
                text = cli("inspect", d)
                stored = [line for line in text.splitlines() if "stored as" in line]
                check(len(stored) == len(ref) and all(f"bitsandbytes {quant_type}" in s for s in stored),
                      f"{what}: inspect shows {len(stored)} stored weights, not {len(ref)}")
                print(f"{what}: {len(ref)} weights bit-exact; {stored[0].strip() if stored else ''}")
                # Hostile variants, each refused naming the tensor; the input is not modified.
                if double:
                    f = os.path.join(d, files[0])
                    w = "model.layers.0.mlp.down_proj.weight"
                    bad = dict(sd)
                    bad[w + ".absmax"] = bad[w + ".absmax"][:-1].clone()
                    save_file(bad, f, metadata={"format": "pt"})
                    check(refused(d, w + ".absmax"), f"{what}: a short absmax is not refused")
                    bad = dict(sd)
                    del bad[w + ".quant_map"]
                    save_file(bad, f, metadata={"format": "pt"})
                    check(refused(d, w + ".quant_map"), f"{what}: a missing quant_map is not refused")

sys.exit(exit_status(failures, "bitsandbytes-source"))
