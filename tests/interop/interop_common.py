"""What the interop scripts share: the recorded test seed, failure collection and the CLI runner.

Each script is run as `python3 SCRIPT.py PATH/TO/castscope-cli`, so this module sits beside them
on sys.path.
"""
import os
import random
import subprocess
import sys

import numpy as np

CLI = sys.argv[1] if len(sys.argv) > 1 else "castscope-cli"
# CI sets CASTSCOPE_TEST_SEED from the commit; otherwise a fresh one, printed for a re-run.
SEED = int(os.environ.get("CASTSCOPE_TEST_SEED", random.SystemRandom().randrange(1 << 31))) % (1 << 31)
print(f"seed {SEED}")
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def cli(*args):
    r = subprocess.run([CLI, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"castscope-cli {' '.join(args)} failed:\n{r.stdout}\n{r.stderr}")
    return r.stdout


def same_bits(a, b):
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def exit_status(failures, what):
    """The script's exit status: the failures and the seed that reproduces them, or success."""
    if failures:
        print("\n".join(failures))
        print(f"{len(failures)} failures (seed {SEED})")
        return 1
    print(f"all {what} checks passed")
    return 0


def tiny_llama():
    """A one-layer transformers Llama in bfloat16 with N(0, 0.05) weights (from torch's seed)."""
    import torch
    import transformers
    cfg = transformers.LlamaConfig(hidden_size=256, intermediate_size=384, num_hidden_layers=1,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                                   max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.05)
    return model
