"""Fused projections share one NVFP4 global scale in compressed-tensors exports.

vLLM fuses q / k / v and gate / up into one weight, so llm-compressor gives each group one global
scale (update_fused_layer_weight_global_scales: the minimum of the members' global scales). A tiny
transformers Llama is exported as NVFP4; the checkpoint is read back with compressed-tensors' own
decompressor, and every member's codes and block scales are compared with compressed-tensors' own
quantization of the source weight under the shared global scale.
"""
import json
import os
import struct
import sys
import tempfile

try:
    import numpy as np
    import torch
    from safetensors import safe_open
    from transformers import LlamaConfig, LlamaForCausalLM
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.compressors.nvfp4.helpers import unpack_fp4_from_uint8
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    from compressed_tensors.quantization.lifecycle.forward import dequantize, quantize
    from compressed_tensors.quantization.utils import calculate_qparams
except ImportError as e:
    print(f"skipping: {e}")
    sys.exit(77)

from interop_common import SEED, check, cli, exit_status, failures  # noqa: E402

torch.manual_seed(SEED)
GROUPS = {"self_attn": ["q_proj", "k_proj", "v_proj"], "mlp": ["gate_proj", "up_proj"]}


def run(work):
    src, dst = os.path.join(work, "src"), os.path.join(work, "ct")
    cfg = LlamaConfig(vocab_size=96, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():  # members of different ranges, so that sharing changes their scales
        for i, (n, p) in enumerate(model.named_parameters()):
            p.normal_(0, 0.02 * (1 + i % 3))
    model.save_pretrained(src)
    sd = {n: p.detach().float() for n, p in model.state_dict().items()}
    cli("export", src, dst, "--dtype", "nvfp4", "--layout", "compressed-tensors", "--device", "cpu", "-q")
    qc = json.load(open(os.path.join(dst, "config.json")))["quantization_config"]
    raw, meta = {}, {}
    for f in os.listdir(dst):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(dst, f), framework="pt") as h:
                raw.update({k: h.get_tensor(k) for k in h.keys()})
                meta.update(h.metadata() or {})
    (group,) = qc["config_groups"].values()
    args = QuantizationArgs(**group["weights"])
    scheme = QuantizationScheme(targets=group["targets"], weights=args, format=group["format"])
    comp = BaseCompressor.get_value_from_registry(group["format"])
    checked = aside = 0
    for layer in range(cfg.num_hidden_layers):
        for block, members in GROUPS.items():
            mods = [f"model.layers.{layer}.{block}.{m}" for m in members]
            gs = [raw[m + ".weight_global_scale"] for m in mods]
            own = [448.0 * 6.0 / sd[m + ".weight"].abs().max() for m in mods]
            check(all(torch.equal(g, gs[0]) for g in gs), f"{mods}: global scales {gs} differ")
            # The group's scale is that of its largest amax (llm-compressor's minimum).
            check(len({float(o) for o in own}) > 1, f"{mods}: members' own scales all equal (weak test)")
            shared = gs[0].float()
            # CastScope's own cast with the shared scale: the members stacked along the rows are
            # one tensor of the group's amax, each row's blocks as in the member.
            stacked = torch.cat([sd[m + ".weight"] for m in mods]).numpy()
            np.save(os.path.join(work, "in.npy"), stacked)
            cli("cast", os.path.join(work, "in.npy"), os.path.join(work, "out.npy"), "--dtype", "nvfp4",
                "--mode", "virtual", "--device", "cpu", "--axis", "-1")
            own_cast = torch.from_numpy(np.load(os.path.join(work, "out.npy")))
            row = 0
            for m in mods:
                w = sd[m + ".weight"]
                local = {k[len(m) + 1:]: v for k, v in raw.items() if k.startswith(m + ".")}
                dec = comp.decompress(local, scheme)["weight"].float()
                groups = w.reshape(w.shape[0], -1, 16)
                amax = groups.abs().amax(-1)
                scale, zp = calculate_qparams(-amax, amax, args, global_scale=shared)
                want_scale = scale.to(torch.float8_e4m3fn)
                stored = raw[m + ".weight_scale"]
                # Set aside by name (docs/export-formats.md, "NVFP4 global scale"): CastScope
                # divides by t, compressed-tensors multiplies by 1/t, which can differ by one float32
                # ulp; only where that lands across a rounding midpoint does a result differ.
                diff = stored.view(torch.uint8) != want_scale.view(torch.uint8)
                lo, hi = torch.minimum(stored.float(), want_scale.float()), torch.maximum(stored.float(), want_scale.float())
                mid = (lo + hi) / 2
                exact = (amax.double() / 6 * shared.double() - mid.double()).abs() <= mid.double() * 1e-6
                check(bool(torch.all(~diff | exact)),
                      f"{m}: block scales differ from compressed-tensors' under the shared global scale")
                s32 = stored.float()
                packed = raw[m + ".weight_packed"]
                codes = unpack_fp4_from_uint8(packed, packed.shape[0], packed.shape[1] * 2, dtype=torch.float32)
                q = quantize(w, s32, zp, args, global_scale=shared)
                v = (w.double().reshape(w.shape[0], -1, 16) /
                     (s32.double() / shared.double()).unsqueeze(-1)).reshape(w.shape).abs()
                mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=torch.float64)
                near = ((v.unsqueeze(-1) - mids).abs() <= mids * 1e-6).any(-1)
                cdiff = codes != q
                check(bool(torch.all(~cdiff | near)),
                      f"{m}: FP4 codes differ from compressed-tensors' quantize away from a midpoint "
                      f"({int((cdiff & ~near).sum())} of {w.numel()})")
                aside += int((cdiff & near).sum()) + int((diff & exact).sum())
                # The library's decompression uses the group's one global scale.
                want = dequantize(codes.to(torch.bfloat16), comp._decompress_scale(stored, torch.bfloat16),
                                  args=args, global_scale=gs[0], dtype=torch.bfloat16)
                check(torch.equal(dec.to(torch.bfloat16), want), f"{m}: decompressed values differ")
                # Decoded exactly (tensor scale t from __metadata__, docs/export-formats.md).
                t = struct.unpack("<f", struct.pack("<I", int(meta[f"castscope.{m}.weight.tensor_scale"], 16)))[0]
                exact_vals = (codes.double().reshape(w.shape[0], -1, 16) * s32.double().unsqueeze(-1)
                              ).reshape(w.shape) * t
                mine = own_cast[row:row + w.shape[0]]
                row += w.shape[0]
                check(torch.equal(exact_vals.float(), mine),
                      f"{m}: codes and scales differ from CastScope's cast under the shared scale")
                checked += 1
    # The budget planner keeps each fused group on one datatype (unless --split-fused).
    plan = os.path.join(work, "plan.json")
    cli("plan", src, "--budget", "6", "--candidates", "nvfp4,mxfp8e4", "-o", plan)
    rules = {r["pattern"]: r["dtype"] for r in json.load(open(plan))["rules"]}
    for layer in range(cfg.num_hidden_layers):
        for block, members in GROUPS.items():
            got = {rules.get(f"model.layers.{layer}.{block}.{m}.weight") for m in members}
            check(len(got) == 1 and None not in got, f"layer {layer} {block}: budget plan gives {got}")
    print(f"{checked} fused members checked, {aside} midpoint elements set aside")


with tempfile.TemporaryDirectory() as work:
    run(work)
sys.exit(exit_status(failures, "fused global scale"))
