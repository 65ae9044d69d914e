#!/usr/bin/env python3
"""The gpt-oss MXFP4 layout, loaded by transformers itself.

Builds a tiny random GptOss with transformers (2 layers, 4 experts, hidden 64, bfloat16), saves it,
exports its experts with `castscope-cli export --layout gpt-oss`, and checks:
  * the tensors are named as transformers' MXFP4 loader expects (`*_blocks`, `*_scales`) with the
    shapes of the published checkpoints ([E, out, in / 32, 16] and [E, out, in / 32]);
  * transformers' own decoder (convert_moe_packed_tensors) on those tensors, and the model that
    `from_pretrained` builds from the directory on the CPU (it dequantizes MXFP4 to bfloat16
    there), hold exactly CastScope's virtual cast of each expert weight along its input axis
    (`castscope-cli cast --axis 1`), bit for bit;
  * every other tensor is the source's, and a forward pass runs and is finite.

usage: test_gptoss.py PATH/TO/castscope-cli    (exit 77: torch or transformers missing)
"""
import json
import os
import sys
import tempfile

try:
    import numpy as np
    import torch
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM, GptOssConfig, GptOssForCausalLM, Mxfp4Config
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
except ImportError as e:
    print(f"skipping: {e}")
    sys.exit(77)

from interop_common import SEED, check, cli, exit_status, failures, same_bits  # noqa: E402

torch.manual_seed(SEED)


def run(work):
    cfg = GptOssConfig(vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=1, head_dim=32, num_local_experts=4,
                       num_experts_per_tok=2, max_position_embeddings=64, sliding_window=16,
                       layer_types=["sliding_attention", "full_attention"])
    model = GptOssForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():  # random experts with a spread of magnitudes, so blocks get different scales
        for n, p in model.named_parameters():
            if n.endswith(("gate_up_proj", "down_proj")):
                p.copy_(torch.randn_like(p) * torch.exp2(torch.randint(-4, 3, p.shape[:2])).unsqueeze(-1).to(p.dtype))
    src = os.path.join(work, "src")
    model.save_pretrained(src)
    sd = {n: p.detach().float().numpy() for n, p in model.state_dict().items()}
    experts = [n for n in sd if n.endswith((".experts.gate_up_proj", ".experts.down_proj"))]
    check(len(experts) == 4 and all(sd[n].ndim == 3 for n in experts), f"experts {experts}")

    plan = os.path.join(work, "plan.json")
    json.dump({"default": "keep", "rules": [{"pattern": "*.mlp.experts.gate_up_proj", "dtype": "mxfp4e2"},
                                            {"pattern": "*.mlp.experts.down_proj", "dtype": "mxfp4e2"}]},
              open(plan, "w"))
    dst = os.path.join(work, "mxfp4")
    out = cli("export", src, dst, "--plan", plan, "--layout", "gpt-oss", "-q")
    # The export names the axis in use: the experts' inputs, axis -2 of [E, in, out].
    for n in experts:
        check(f"{n} e2m1fnuz_e8m0_t32: axis -2:{sd[n].shape[1]}" in out, f"export output for {n}:\n{out}")
    config = json.load(open(os.path.join(dst, "config.json")))
    check(config.get("quantization_config", {}).get("quant_method") == "mxfp4", "quant_method")

    raw = {}
    for f in os.listdir(dst):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(dst, f), framework="pt") as h:
                for k in h.keys():
                    raw[k] = h.get_tensor(k)
    want = {}
    for n in experts:
        e, i, o = sd[n].shape
        blocks, scales = raw.get(n + "_blocks"), raw.get(n + "_scales")
        check(blocks is not None and scales is not None, f"{n}_blocks / {n}_scales missing: {sorted(raw)}")
        if blocks is None or scales is None:
            continue
        check(n not in raw, f"{n} written unquantized too")
        check(tuple(blocks.shape) == (e, o, i // 32, 16) and blocks.dtype == torch.uint8, f"{n}_blocks {blocks.shape}")
        check(tuple(scales.shape) == (e, o, i // 32) and scales.dtype == torch.uint8, f"{n}_scales {scales.shape}")
        # CastScope's virtual cast along the input axis (axis 1 of [E, in, out]).
        a, b = os.path.join(work, "x.npy"), os.path.join(work, "v.npy")
        np.save(a, sd[n])
        cli("cast", a, b, "--dtype", "mxfp4e2", "--axis", "1", "--device", "cpu")
        want[n] = np.load(b)
        got = convert_moe_packed_tensors(blocks, scales, dtype=torch.float32).numpy()
        check(same_bits(got, want[n]), f"{n}: transformers' decoder differs from the virtual cast")
    print(f"{len(want)} expert weights decoded by convert_moe_packed_tensors, bit for bit")

    # The stack itself. Without a GPU (or the triton kernels) transformers dequantizes MXFP4 to
    # the model dtype; asking for it explicitly keeps the test independent of what is installed.
    loaded = AutoModelForCausalLM.from_pretrained(dst, quantization_config=Mxfp4Config(dequantize=True),
                                                  dtype=torch.bfloat16)
    params = dict(loaded.named_parameters())
    for n, w in want.items():
        p = params[n].detach()
        check(p.dtype == torch.bfloat16, f"{n} loaded as {p.dtype}")
        check(same_bits(p.float().numpy(), w), f"{n}: the loaded weight differs from the virtual cast")
    for n, v in sd.items():
        if n not in want and n in params:
            check(same_bits(params[n].detach().float().numpy(), v), f"kept {n} changed")
    with torch.no_grad():
        logits = loaded(torch.arange(8).reshape(1, 8)).logits
    check(bool(torch.isfinite(logits).all()), "forward pass")
    try:  # the plain call picks the path itself (dequantizing without MXFP4 kernels); needs accelerate
        import accelerate  # noqa: F401
    except ImportError:
        print("accelerate missing: the plain from_pretrained path is not checked")
    else:
        plain = dict(AutoModelForCausalLM.from_pretrained(dst).named_parameters())
        for n, w in want.items():
            check(same_bits(plain[n].detach().float().numpy(), w), f"{n}: plain from_pretrained differs")
    print("transformers loads the gpt-oss export, holds the virtual cast's experts, runs it")


with tempfile.TemporaryDirectory() as work:
    run(work)
sys.exit(exit_status(failures, "gpt-oss"))
