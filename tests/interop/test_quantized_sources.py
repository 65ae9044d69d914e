"""Quantized checkpoints made by the producers' own code, read back by CastScope.

A tiny transformers Llama with random weights is quantized on the CPU by compressed-tensors'
own lifecycle (apply_quantization_config, qparams from calculate_qparams / generate_gparam,
ModelCompressor.compress_model, save_pretrained, update_config) for each of its schemes; block
FP8 is written as transformers' fine-grained FP8 layout with scales from the weights, and
gpt-oss MXFP4 blocks are quantized by compressed-tensors' FP4 rounding. For every logical
weight, the values `castscope-cli inspect --dump` gives equal bit for bit what the library's own
decompressor gives (compressed-tensors' compressor.decompress, transformers' Fp8Dequantize and
convert_moe_packed_tensors); `inspect` lists no companion and prints the stored format.

Run as `python3 test_quantized_sources.py PATH/TO/castscope-cli`; exit code 77 (skip) without
torch / transformers / compressed-tensors.
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_common import CLI, SEED, check, cli, exit_status, failures  # noqa: E402

try:
    import numpy as np
    import torch
    from safetensors.torch import load_file, save_file
    import transformers
    from compressed_tensors.compressors import BaseCompressor, ModelCompressor
    from compressed_tensors.quantization import (
        QuantizationConfig, QuantizationStrategy, apply_quantization_config, preset_name_to_scheme)
    from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam
except ImportError as e:  # pragma: no cover
    print("skip:", e)
    sys.exit(77)

torch.manual_seed(SEED)


def tiny_llama():
    cfg = transformers.LlamaConfig(hidden_size=256, intermediate_size=384, num_hidden_layers=1,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                                   max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.05)
    return model


def observe(module, args):
    """Weight qparams as llm-compressor's min-max observer computes them, with CT's functions."""
    w = module.weight.data.float()
    s = args.strategy
    if s == QuantizationStrategy.TENSOR:
        mn, mx = w.amin().reshape(1), w.amax().reshape(1)
    elif s == QuantizationStrategy.CHANNEL:
        mn, mx = w.amin(1, keepdim=True), w.amax(1, keepdim=True)
    elif s in (QuantizationStrategy.GROUP, QuantizationStrategy.TENSOR_GROUP):
        g = w.unflatten(-1, (-1, args.group_size))
        mn, mx = g.amin(-1), g.amax(-1)
    elif s == QuantizationStrategy.BLOCK:
        bh, bw = args.block_structure
        r, c = w.shape
        b = w.reshape(r // bh, bh, c // bw, bw)
        mn, mx = b.amin((1, 3)), b.amax((1, 3))
    gs = None
    if s == QuantizationStrategy.TENSOR_GROUP:
        gs = generate_gparam(w.amin(), w.amax())
        module.weight_global_scale.data.copy_(gs.reshape(module.weight_global_scale.shape))
    scale, zp = calculate_qparams(mn, mx, args, global_scale=gs)
    module.weight_scale.data = scale.to(module.weight_scale.dtype).reshape(
        module.weight_scale.shape) if module.weight_scale.numel() == scale.numel() else scale
    if hasattr(module, "weight_zero_point"):
        module.weight_zero_point.data = zp.to(module.weight_zero_point.dtype).reshape(
            module.weight_zero_point.shape)


def ct_checkpoint(scheme_name, d):
    model = tiny_llama()
    scheme = preset_name_to_scheme(scheme_name, ["Linear"])
    qc = QuantizationConfig(config_groups={"group_0": scheme}, ignore=["lm_head"])
    apply_quantization_config(model, qc)
    for name, m in model.named_modules():
        if getattr(m, "quantization_scheme", None) is not None and hasattr(m, "weight_scale"):
            observe(m, m.quantization_scheme.weights)
    comp = ModelCompressor.from_pretrained_model(model)
    comp.compress_model(model)
    model.save_pretrained(d)
    comp.update_config(d)
    return comp


def ct_reference(d):
    """compressed-tensors' own decompression of every quantized module in the saved files."""
    cfg = json.load(open(os.path.join(d, "config.json")))["quantization_config"]
    qc = QuantizationConfig.model_validate(cfg)
    sd = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            sd.update(load_file(os.path.join(d, f)))
    scheme = next(iter(qc.config_groups.values()))
    compressor = BaseCompressor.load_from_registry(qc.format)
    out = {}
    for key in sd:
        for leaf in (".weight_packed", ".weight_scale"):
            if key.endswith(leaf):
                prefix = key[: -len(leaf)]
                if prefix + ".weight" in out or (leaf == ".weight_scale" and prefix + ".weight_packed" in sd):
                    continue
                local = {k[len(prefix) + 1:]: v for k, v in sd.items() if k.startswith(prefix + ".")}
                out[prefix + ".weight"] = compressor.decompress(local, scheme)["weight"]
    return out


def dump(model_dir, out_dir):
    cli("inspect", model_dir, "--dump", out_dir)
    return json.loads(cli("inspect", model_dir, "--json"))


def compare(what, model_dir, ref):
    with tempfile.TemporaryDirectory() as od:
        j = dump(model_dir, od)
        names = {t["name"]: t for t in j["tensors"]}
        check(len(ref) > 0, f"{what}: the library decompressed nothing")
        for n, v in ref.items():
            t = names.get(n)
            check(t is not None and t.get("stored") is not None, f"{what}: {n} not listed as quantized")
            if t is None:
                continue
            got = np.load(os.path.join(od, n + ".npy"))
            want = v.float().numpy()
            ok = got.shape == want.shape and np.array_equal(got.view(np.uint32), want.view(np.uint32))
            if not ok and got.shape == want.shape:
                bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
                print(f"  {n}: {bad.size} differ, first at {bad[0]}: {got.flat[bad[0]]!r} vs {want.flat[bad[0]]!r}")
            check(ok, f"{what}: {n} dequantized values differ from the library's")
        for n in names:
            for c in ("weight_scale", "weight_packed", "weight_zero_point", "weight_global_scale",
                      "weight_shape", "_scale_inv", "_blocks", "_scales"):
                check(not n.endswith(c), f"{what}: companion {n} still listed")
        text = cli("inspect", model_dir, "--reproduce")
        check("stored as" in text and "bits/weight" in text, f"{what}: inspect prints no stored format")
        stored = [line for line in text.splitlines() if "stored as" in line]
        check(len(stored) == len(ref), f"{what}: inspect shows {len(stored)} stored weights, not {len(ref)}")
        print(f"  {len(ref)} weights bit-exact; {stored[0] if stored else ''}")
        rep = json.loads(cli("inspect", model_dir, "--json", "--reproduce"))
        j["reproduce"] = {t["name"]: t["reproduce"]["fraction"] for t in rep["tensors"] if "reproduce" in t}
        if j["reproduce"]:
            print(f"  --reproduce: identical values {min(j['reproduce'].values()):.4f} .. {max(j['reproduce'].values()):.4f}")
        return j


# compressed-tensors' schemes, each written by its own compressor.
for scheme in ["W4A16", "W4A16_ASYM", "W8A16", "FP8", "FP8_BLOCK", "NVFP4A16", "MXFP4A16", "MXFP8A16"]:
    with tempfile.TemporaryDirectory() as d:
        try:
            ct_checkpoint(scheme, d)
        except Exception as e:  # a scheme this version of compressed-tensors lacks
            check(False, f"{scheme}: compressed-tensors could not write it: {e!r}")
            continue
        fmt = json.load(open(os.path.join(d, "config.json")))["quantization_config"]["format"]
        print(f"{scheme}: format {fmt}")
        compare(f"compressed-tensors {scheme} ({fmt})", d, ct_reference(d))

# Block FP8 in transformers' fine-grained FP8 layout (DeepSeek-V3): codes and weight_scale_inv
# from the weights (amax / 448 per 128x128 block); the reference is transformers' Fp8Dequantize.
try:
    from transformers.integrations.finegrained_fp8 import Fp8Dequantize
except ImportError:
    Fp8Dequantize = None
check(Fp8Dequantize is not None, "transformers has no Fp8Dequantize")
if Fp8Dequantize is not None:
    with tempfile.TemporaryDirectory() as d:
        model = tiny_llama()
        sd, ref = {}, {}
        deq = Fp8Dequantize(None)
        for k, v in model.state_dict().items():
            if k.endswith("proj.weight"):
                w = v.float()
                r, c = w.shape
                b = w.reshape(r // 128, 128, c // 128, 128).abs().amax((1, 3)) / 448
                q = (w / b.repeat_interleave(128, 0).repeat_interleave(128, 1)).to(torch.float8_e4m3fn)
                sd[k], sd[k + "_scale_inv"] = q, b.float().contiguous()
                ref[k] = deq._dequantize_one(q, sd[k + "_scale_inv"])
            else:
                sd[k] = v.contiguous()
        save_file(sd, os.path.join(d, "model.safetensors"))
        cfg = model.config.to_dict()
        cfg["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128],
                                      "activation_scheme": "dynamic"}
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
        j = compare("block FP8 (transformers Fp8Dequantize)", d, ref)
        t = next(t for t in j["tensors"] if t["name"].endswith("down_proj.weight"))
        check(t["stored"]["datatype"] == "e4m3fn_float32_t128_t128",
              f"block FP8: stored datatype {t['stored']['datatype']}")
        # Made by round-to-nearest with scale amax / 448: CastScope's quantizer writes the same.
        check(len(j["reproduce"]) == 7 and all(f == 1.0 for f in j["reproduce"].values()),
              f"block FP8: --reproduce gives {j['reproduce']}")

# gpt-oss MXFP4 experts: blocks and scales quantized from random experts; the reference is
# transformers' convert_moe_packed_tensors.
try:
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
except ImportError:
    convert_moe_packed_tensors = None
check(convert_moe_packed_tensors is not None, "transformers has no convert_moe_packed_tensors")
if convert_moe_packed_tensors is not None:
    with tempfile.TemporaryDirectory() as d:
        E, R, G = 2, 64, 4
        blocks = torch.randint(0, 256, (E, R, G, 16), dtype=torch.uint8)
        scales = torch.randint(100, 140, (E, R, G), dtype=torch.uint8)
        scales[0, 0, 0] = 0  # the smallest exponent, 2^-127
        name = "model.layers.0.mlp.experts.gate_up_proj"
        save_file({name + "_blocks": blocks, name + "_scales": scales,
                   name + "_bias": torch.zeros(E, R)}, os.path.join(d, "model.safetensors"))
        json.dump({"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"],
                   "quantization_config": {"quant_method": "mxfp4"}},
                  open(os.path.join(d, "config.json"), "w"))
        compare("gpt-oss MXFP4 (transformers convert_moe_packed_tensors)", d,
                {name: convert_moe_packed_tensors(blocks, scales, dtype=torch.bfloat16)})

# AutoAWQ GEMM and ModelOpt NVFP4: neither producer installs on a CPU-only machine (AutoAWQ needs
# CUDA kernels, ModelOpt's export a GPU), so their files are made of random codes and scales in
# their layouts, and the reference is compressed-tensors' own converter of each convention
# (AutoAWQConverter, ModelOptNvfp4Converter) followed by its decompressor.
try:
    from compressed_tensors.entrypoints.convert.converters.autoawq import AutoAWQConverter
    from compressed_tensors.entrypoints.convert.converters.modelopt_nvfp4 import ModelOptNvfp4Converter
except ImportError:
    AutoAWQConverter = ModelOptNvfp4Converter = None
check(AutoAWQConverter is not None, "compressed-tensors has no AutoAWQ / ModelOpt converters")


def converted_reference(tensors, converter, qc):
    out = converter.process(dict(tensors))
    scheme = next(iter(qc.config_groups.values()))
    compressor = BaseCompressor.load_from_registry(qc.format)
    ref = {}
    for k in out:
        if k.endswith(".weight_packed"):
            p = k[: -len(".weight_packed")]
            local = {n[len(p) + 1:]: v for n, v in out.items() if n.startswith(p + ".")}
            ref[p + ".weight"] = compressor.decompress(local, scheme)["weight"]
    return ref


if AutoAWQConverter is not None:
    with tempfile.TemporaryDirectory() as d:
        IN, OUT, G = 256, 128, 128
        p = "model.layers.0.mlp.down_proj"
        t = {p + ".qweight": torch.randint(-2**31, 2**31 - 1, (IN, OUT // 8), dtype=torch.int32),
             p + ".qzeros": torch.randint(-2**31, 2**31 - 1, (IN // G, OUT // 8), dtype=torch.int32),
             p + ".scales": (torch.rand(IN // G, OUT) * 0.02 + 1e-3).to(torch.float16)}
        save_file(t, os.path.join(d, "model.safetensors"))
        awq_cfg = {"quant_method": "awq", "bits": 4, "group_size": G, "zero_point": True,
                   "version": "gemm"}
        json.dump({"model_type": "llama", "quantization_config": awq_cfg},
                  open(os.path.join(d, "config.json"), "w"))
        conv = AutoAWQConverter.from_autoawq_config(awq_cfg)
        compare("AutoAWQ GEMM (compressed-tensors AutoAWQConverter)", d,
                converted_reference(t, conv, conv._build_quant_config()))

if ModelOptNvfp4Converter is not None:
    with tempfile.TemporaryDirectory() as d:
        p = "model.layers.0.self_attn.o_proj"
        amax = float(torch.rand(()) * 2 + 0.1)
        t = {p + ".weight": torch.randint(0, 256, (64, 64), dtype=torch.uint8),
             p + ".weight_scale": (torch.rand(64, 8) * 400).to(torch.float8_e4m3fn),
             p + ".weight_scale_2": torch.tensor(amax / (6 * 448), dtype=torch.float32),
             p + ".input_scale": torch.tensor(0.01, dtype=torch.float32)}
        save_file(t, os.path.join(d, "model.safetensors"))
        json.dump({"model_type": "llama"}, open(os.path.join(d, "config.json"), "w"))
        json.dump({"producer": {"name": "modelopt"},
                   "quantization": {"quant_algo": "NVFP4", "group_size": 16}},
                  open(os.path.join(d, "hf_quant_config.json"), "w"))
        qc = QuantizationConfig.model_validate({
            "format": "nvfp4-pack-quantized", "quant_method": "compressed-tensors",
            "config_groups": {"group_0": {"targets": ["Linear"], **preset_name_to_scheme(
                "NVFP4A16", ["Linear"]).model_dump(exclude={"targets"})}}})
        j = compare("ModelOpt NVFP4 (compressed-tensors ModelOptNvfp4Converter)", d,
                    converted_reference(t, ModelOptNvfp4Converter(targets=["re:.*"]), qc))
        check(not any(x["name"].endswith("input_scale") for x in j["tensors"]),
              "ModelOpt: input_scale still listed")

sys.exit(exit_status(failures, "quantized-source"))
