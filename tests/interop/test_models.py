#!/usr/bin/env python3
"""Model directories in, model directories out, checked by the libraries the stacks use.

Builds a tiny random Llama with transformers (save_pretrained, sharded, with tokenizer files and
1-D norms), exports it with castscope-cli to model directories, and checks:
  * the directory: non-weight files byte-identical, config.json keys kept and merged with
    quantization_config, shard names and an index like the source's, nothing staged left behind;
  * every compressed-tensors scheme CastScope writes, decompressed by compressed-tensors' own
    compressors, equals `castscope-cli cast --mode virtual` bit for bit, and transformers loads
    the directory, runs it and holds the same weights;
  * the gpt-oss layout, decoded by transformers' MXFP4 helper, likewise;
  * every shard loads with safetensors under numpy and PyTorch; kept tensors are the source's bits;
  * an export that fails leaves no output and no staged directory.

usage: test_models.py PATH/TO/castscope-cli    (exit 77: torch, transformers or
compressed-tensors missing)
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file as save_torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
except ImportError as e:
    print(f"skipping: {e}")
    sys.exit(77)

from interop_common import CLI, SEED, check, cli, exit_status, failures, same_bits  # noqa: E402

torch.manual_seed(SEED)


def virtual(work, x, dtype, axis="-1"):
    """CastScope's virtual cast of float32 array x along its last axis (or `axis`)."""
    src, dst = os.path.join(work, "v_in.npy"), os.path.join(work, "v_out.npy")
    np.save(src, x.astype(np.float32))
    cli("cast", src, dst, "--dtype", dtype, "--mode", "virtual", "--device", "cpu", "--axis", axis)
    return np.load(dst)


def make_source(root):
    """A sharded tiny Llama (bfloat16) with a tokenizer, written by the libraries themselves."""
    cfg = LlamaConfig(vocab_size=96, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                      tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():  # norms are ones at init: give them values worth keeping exactly
        for n, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(torch.randn_like(p))
    model.save_pretrained(root, max_shard_size="100KB")
    vocab = {w: i for i, w in enumerate(["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(93)])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                            unk_token="<unk>").save_pretrained(root)
    return {n: p.detach().float().numpy() for n, p in model.state_dict().items()}


def read_dir(d):
    """All tensors of a model directory through its index (or its single file), as torch."""
    idx = [f for f in os.listdir(d) if f.endswith(".index.json")]
    if idx:
        wm = json.load(open(os.path.join(d, idx[0])))["weight_map"]
        files = sorted(set(wm.values()))
    else:
        wm, files = None, [f for f in os.listdir(d) if f.endswith(".safetensors")]
    out = {}
    for f in files:
        with safe_open(os.path.join(d, f), framework="pt") as h:
            for k in h.keys():
                check(wm is None or wm.get(k) == f, f"{d}: index lists {k} in {wm and wm.get(k)}, found in {f}")
                out[k] = h.get_tensor(k)
        with safe_open(os.path.join(d, f), framework="np") as h:  # numpy reads every shard too
            for k in h.keys():
                if out[k].dtype not in (torch.bfloat16, torch.float8_e4m3fn):
                    check(np.array_equal(h.get_tensor(k), out[k].numpy()), f"{f}:{k} numpy vs torch")
    if wm is not None:
        check(set(wm) == set(out), f"{d}: index and shards list different tensors")
    return out


def check_directory(src, dst, sd_src, layout):
    src_files = sorted(os.listdir(src))
    dst_files = sorted(os.listdir(dst))
    check(src_files == dst_files, f"{layout}: files {dst_files} differ from the source's {src_files}")
    for f in src_files:
        if f.endswith(".json") and f != "config.json" and not f.endswith(".index.json"):
            check(open(os.path.join(src, f), "rb").read() == open(os.path.join(dst, f), "rb").read(),
                  f"{layout}: {f} not copied unchanged")
    a, b = json.load(open(os.path.join(src, "config.json"))), json.load(open(os.path.join(dst, "config.json")))
    for k, v in a.items():
        check(b.get(k) == v, f"{layout}: config.json key {k} changed")
    parent = os.path.dirname(dst)
    check(not [f for f in os.listdir(parent) if ".staged" in f], f"{layout}: staged files left behind")
    return b


def ct_decompress(d, config):
    """Every quantized module of a compressed-tensors directory through the library's compressors."""
    tensors = read_dir(d)
    qc = config["quantization_config"]
    out = {}
    for group in qc["config_groups"].values():
        scheme = QuantizationScheme(targets=group["targets"], weights=QuantizationArgs(**group["weights"]),
                                    format=group["format"])
        comp = BaseCompressor.get_value_from_registry(group["format"])
        for module in group["targets"]:
            local = {k[len(module) + 1:]: v for k, v in tensors.items() if k.startswith(module + ".")}
            out[module + ".weight"] = comp.decompress(local, scheme)["weight"].float().numpy()
    return out, tensors


def nvfp4_agrees(dec, want, raw, module, group):
    """compressed-tensors decompresses NVFP4 in bfloat16 (its unpack default, the model dtype) as
    bf16(e2m1 * f32(scale / global_scale)). e2m1 * e4m3 * t is not a bfloat16 in general, so its
    result is compared with CastScope's float32 values rounded to bfloat16. The global scale it
    divides by is 1/t (docs/export-formats.md, "NVFP4 global scale"), and scale / (1/t) can be one
    float32 ulp from scale * t: set aside, by name, exactly the elements where the library's own
    float32 arithmetic lands on that other neighbour and the bfloat16 rounding then differs.
    Returns (every element agrees or is set aside, number set aside)."""
    from compressed_tensors.compressors.nvfp4.helpers import unpack_fp4_from_uint8
    from compressed_tensors.quantization.lifecycle.forward import dequantize
    packed = raw[module + ".weight_packed"]
    args = QuantizationArgs(**group["weights"])
    comp = BaseCompressor.get_value_from_registry(group["format"])
    q = unpack_fp4_from_uint8(packed, packed.shape[0], packed.shape[1] * 2, dtype=torch.float32)
    f32 = dequantize(x_q=q, scale=comp._decompress_scale(raw[module + ".weight_scale"], torch.float32),
                     args=args, global_scale=raw[module + ".weight_global_scale"],
                     dtype=torch.float32).numpy()
    bf = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(torch.bfloat16).float().numpy()
    exact = bf(want).view(np.uint32) == dec.view(np.uint32)
    ulp = np.abs(f32.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
    aside = ~exact & (ulp == 1) & (bf(f32).view(np.uint32) == dec.view(np.uint32))
    return bool(np.all(exact | aside)), int(aside.sum())


def fused_virtual(work, sd, n, dtype):
    """CastScope's cast of a weight that vLLM fuses (q / k / v, gate / up): one NVFP4 global scale
    for the group, which is the cast of the members stacked along the rows, sliced back."""
    fused = {"q_proj": ("q_proj", "k_proj", "v_proj"), "gate_proj": ("gate_proj", "up_proj")}
    fused.update({m: g for g in list(fused.values()) for m in g})
    leaf = n.split(".")[-2]
    if leaf not in fused:
        return virtual(work, sd[n], dtype)
    names = [n.replace("." + leaf + ".", "." + m + ".") for m in fused[leaf]]
    whole = virtual(work, np.concatenate([sd[m] for m in names]), dtype)
    start = sum(sd[m].shape[0] for m in names[:names.index(n)])
    return whole[start:start + sd[n].shape[0]]


def fp8_as_transformers(raw, n, shape, block):
    """bf16(code * bf16(scale)) with each element's scale: [1] per tensor, [out, 1] per channel,
    [ceil(out/128), ceil(in/128)] per 128x128 block."""
    codes, scale = raw[n], raw[n + "_scale"].to(torch.bfloat16)
    if block:
        scale = scale.repeat_interleave(128, 0)[:shape[0]].repeat_interleave(128, 1)[:, :shape[1]]
    return codes.to(torch.bfloat16) * scale


def run(work):
    src = os.path.join(work, "src")
    sd = make_source(src)
    check(os.path.exists(os.path.join(src, "model.safetensors.index.json")), "source is sharded")
    check(os.path.exists(os.path.join(src, "tokenizer.json")), "source has a tokenizer")
    linear = [n for n, v in sd.items() if v.ndim == 2 and "embed" not in n]
    plan = os.path.join(work, "plan.json")
    schemes = {
        "float-quantized tensor": "e4m3fn_float32",
        "float-quantized channel": "e4m3fn_float32_t0",
        "float-quantized block": "e4m3fn_float32_t128_t128",
        "nvfp4-pack-quantized": "nvfp4",
        "mxfp4-pack-quantized": "mxfp4e2",
        "mxfp8-quantized": "mxfp8e4",
        "mxfp6-pack-quantized": "mxfp6e2",
    }
    for name, dtype in schemes.items():
        json.dump({"default": "keep", "rules": [{"pattern": "*.embed_tokens.*", "dtype": "keep"},
                                                 {"pattern": "*", "dtype": dtype, "rank": 2}]}, open(plan, "w"))
        dst = os.path.join(work, "ct-" + dtype)
        cli("export", src, dst, "--plan", plan, "--layout", "compressed-tensors", "-q")
        config = check_directory(src, dst, sd, name)
        groups = list(config["quantization_config"]["config_groups"].values())
        check(groups and groups[0]["format"] == name.split(" ")[0], f"{name}: format {groups and groups[0]['format']}")
        dec, raw = ct_decompress(dst, config)
        check(sorted(dec) == sorted(linear), f"{name}: decompressed {sorted(dec)}")
        set_aside = 0
        for n in linear:
            want = fused_virtual(work, sd, n, dtype) if dtype == "nvfp4" else virtual(work, sd[n], dtype)
            if dtype == "nvfp4":
                ok, k = nvfp4_agrees(dec[n], want, raw, n[:-len(".weight")], groups[0])
                check(ok, f"{name}: {n} differs from the virtual cast")
                set_aside += k
            else:
                check(same_bits(dec[n], want), f"{name}: {n} differs from the virtual cast")
        if set_aside:
            print(f"{name}: {set_aside} elements set aside (reciprocal global scale, one float32 ulp)")
        # The stack itself: transformers loads the directory through compressed-tensors, runs
        # it, and holds the same weights.
        model = AutoModelForCausalLM.from_pretrained(dst)
        with torch.no_grad():
            logits = model(torch.arange(8).reshape(1, 8)).logits
        check(bool(torch.isfinite(logits).all()), f"{name}: transformers forward pass")
        params = dict(model.named_parameters())
        for n in linear:
            # transformers holds the weights in the model's dtype (bfloat16, from config.json).
            got = params[n].detach()
            if name.startswith("float-quantized"):
                # Set aside by name: transformers loads the float32 weight_scale as a bfloat16
                # parameter before it dequantizes, so it holds bf16(code * bf16(scale)), not the
                # float32 scale's values that compressed-tensors' own decompression and vLLM
                # give (docs/export-formats.md). Checked against that, from the file's codes
                # and scales laid out as the scheme says.
                want = fp8_as_transformers(raw, n, got.shape, name.endswith("block"))
            else:
                want = torch.from_numpy(dec[n]).to(got.dtype)
            check(got.dtype == torch.bfloat16 and torch.equal(got, want),
                  f"{name}: {n} as transformers loads it differs")
        print(f"{name}: transformers loads the directory, runs it, holds the weights (bfloat16)")
        for n, v in sd.items():
            if v.ndim == 1 or "embed" in n:
                check(raw[n].dtype == torch.bfloat16 and same_bits(raw[n].float().numpy(), v), f"{name}: kept {n}")
        print(f"{name}: {len(linear)} weights decompressed by compressed-tensors, bit for bit")

    # A [1, 128] weight under 128x128 blocks: one block, as compressed-tensors pads it.
    one = os.path.join(work, "one")
    os.mkdir(one)
    w1 = torch.randn(1, 128) * 3
    save_torch({"head.proj.weight": w1}, os.path.join(one, "model.safetensors"))
    json.dump({"architectures": ["Tiny"]}, open(os.path.join(one, "config.json"), "w"))
    dst = os.path.join(work, "one-out")
    cli("export", one, dst, "--dtype", "e4m3fn_float32_t128_t128", "--layout", "compressed-tensors", "-q")
    config = json.load(open(os.path.join(dst, "config.json")))
    dec, raw = ct_decompress(dst, config)
    check(list(raw["head.proj.weight_scale"].shape) == [1, 1], "[1, 128] block scale shape")
    check(same_bits(dec["head.proj.weight"], virtual(work, w1.numpy(), "e4m3fn_float32_t128_t128")),
          "[1, 128] block weight")

    # A conv weight [O, I, 3, 3] from torch (the ONNX CNN case): by default the MX tiles run
    # along I*kh*kw, as the stacks reduce, so the cast is that of the [O, I*kh*kw] view.
    conv = os.path.join(work, "conv")
    os.mkdir(conv)
    cw = torch.nn.Conv2d(8, 16, 3).weight.detach()
    save_torch({"features.0.weight": cw, "features.0.bias": torch.randn(16)}, os.path.join(conv, "model.safetensors"))
    rep = json.loads(cli("report", conv, "--dtype", "mxfp8e4", "--dtype", "nvfp4", "--json", "--device", "cpu"))
    results = [r for t in rep["tensors"] for r in t["results"]]
    check(len(results) == 4 and not [r for r in results if "error" in r], f"conv report: {results}")
    check(all(t["axis"] == ("1..3:72" if t["name"].endswith("weight") else "-1:16") for t in rep["tensors"]),
          f"conv report axes: {[t['axis'] for t in rep['tensors']]}")
    got = virtual(work, cw.numpy(), "mxfp8e4", "auto")
    view = virtual(work, cw.reshape(16, 72).numpy(), "mxfp8e4")
    check(same_bits(got, view.reshape(cw.shape)), "conv virtual cast equals its [O, I*kh*kw] view")

    # gpt-oss: 3-D expert weights [E, in, out] as transformers' GptOss holds them, decoded by its
    # MXFP4 helper (tests/interop/test_gptoss.py loads a whole model).
    moe = os.path.join(work, "moe")
    os.mkdir(moe)
    experts = {"model.layers.0.mlp.experts.gate_up_proj": torch.randn(2, 64, 96),
               "model.layers.0.mlp.experts.down_proj": torch.randn(2, 32, 64) * 0.02,
               "model.layers.0.input_layernorm.weight": torch.randn(96)}
    save_torch(experts, os.path.join(moe, "model.safetensors"))
    json.dump({"architectures": ["GptOssForCausalLM"], "hidden_size": 96}, open(os.path.join(moe, "config.json"), "w"))
    json.dump({"default": "keep", "rules": [{"pattern": "*experts*", "dtype": "mxfp4e2"}]}, open(plan, "w"))
    dst = os.path.join(work, "moe-out")
    cli("export", moe, dst, "--plan", plan, "--layout", "gpt-oss", "-q")
    config = json.load(open(os.path.join(dst, "config.json")))
    check(config.get("quantization_config", {}).get("quant_method") == "mxfp4", "gpt-oss quant_method")
    check(config.get("hidden_size") == 96, "gpt-oss config keys kept")
    raw = read_dir(dst)
    for n, x in experts.items():
        if x.dim() != 3:
            check(same_bits(raw[n].numpy(), x.numpy()), f"gpt-oss kept {n}")
            continue
        got = convert_moe_packed_tensors(raw[n + "_blocks"], raw[n + "_scales"], dtype=torch.float32)
        want = virtual(work, x.numpy(), "mxfp4e2", "1")
        check(same_bits(got.numpy(), want), f"gpt-oss {n} differs from the virtual cast")
    print("gpt-oss: experts decoded by transformers' convert_moe_packed_tensors, bit for bit")

    # A failing export (a scheme the layout cannot hold) leaves nothing behind.
    dst = os.path.join(work, "bad-out")
    r = subprocess.run([CLI, "export", src, dst, "--dtype", "int8_float32_t0", "--layout",
                        "compressed-tensors", "-q"], capture_output=True, text=True)
    check(r.returncode != 0 and "int8_float32_t0" in r.stderr, f"bad export error: {r.stderr}")
    check(not os.path.exists(dst), "a failed export left its output")
    check(not [f for f in os.listdir(work) if ".staged" in f], "a failed export left a staged directory")


with tempfile.TemporaryDirectory() as work:
    run(work)
sys.exit(exit_status(failures, "model-directory"))
