"""Plans with methods, end to end through the CLI: `plan --candidates D,D@gptq --calib` chooses
datatype x method pairs and writes the method into the plan; `export --plan --calib` runs each
rule's method, and compressed-tensors' own decompressors give back exactly the values of
CastScope's own method cast (`cast --method gptq --calib`) of the same weight, which differ from
the round-to-nearest export's. The quantization_config names the method as llm-compressor does.

Run as `python3 test_method_export.py PATH/TO/castscope-cli`; exit code 77 without numpy,
safetensors, torch or compressed-tensors.
"""
import json
import os
import sys
import tempfile

try:
    import numpy as np
    import torch
    from safetensors.numpy import save_file
    from safetensors.torch import load_file
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
except ImportError as e:
    print(f"skipping: {e}")
    sys.exit(77)

from interop_common import SEED, check, cli, exit_status, failures, same_bits  # noqa: E402

FP8 = "e4m3fn_float32_t0"  # FP8 per output channel: compressed-tensors' float-quantized
MXFP4 = "mxfp4e2"  # mxfp4-pack-quantized: e8m0 scales, so decoding is exact in float32
Q = "model.layers.0.self_attn.q_proj.weight"
D = "model.layers.0.mlp.down_proj.weight"


def correlated(rng, tokens, width):
    """Inputs with neighbouring channels correlated and a few outlier channels: GPTQ has
    something to gain over round to nearest."""
    x = rng.standard_normal((tokens, width)).astype(np.float32)
    for c in range(1, width):
        x[:, c] += 0.8 * x[:, c - 1]
    x[:, rng.choice(width, 4, replace=False)] *= 8
    return x


def decompress(fmt, raw, module, weights):
    comp = BaseCompressor.get_value_from_registry(fmt)
    scheme = QuantizationScheme(targets=["Linear"], weights=QuantizationArgs(**weights))
    sd = {k[len(module) + 1:]: v for k, v in raw.items()
          if k.startswith(module + ".")}
    return comp.decompress(sd, scheme)["weight"].to(torch.float32).numpy()


def method_cast(work, w, dtype, method, calib):
    src, dst, cal = (os.path.join(work, n) for n in ("mc_in.npy", "mc_out.npy", "mc_calib.npy"))
    np.save(src, w)
    args = ["cast", src, dst, "--dtype", dtype, "--mode", "virtual", "--device", "cpu",
            "--method", method]
    if calib is not None:
        np.save(cal, calib)
        args += ["--calib", cal]
    cli(*args)
    return np.load(dst)


def export(work, tag, plan, calib):
    out = os.path.join(work, tag)
    os.makedirs(out)
    args = ["export", os.path.join(work, "model.safetensors"), os.path.join(out, "model.safetensors"),
            "--plan", plan, "--layout", "compressed-tensors", "--device", "cpu", "-q"]
    if calib:
        args += ["--calib", calib]
    cli(*args)
    with open(os.path.join(out, "config.json")) as f:
        qc = json.load(f)["quantization_config"]
    return load_file(os.path.join(out, "model.safetensors")), qc


def group_of(qc, module):
    for g in qc["config_groups"].values():
        if module in g["targets"]:
            return g
    raise KeyError(module)


def run(work):
    rng = np.random.default_rng(SEED)
    wq = (rng.standard_normal((96, 256)) * 0.02).astype(np.float32)
    wd = (rng.standard_normal((64, 256)) * 0.02).astype(np.float32)
    save_file({Q: wq, D: wd}, os.path.join(work, "model.safetensors"))
    xq, xd = correlated(rng, 384, 256), correlated(rng, 384, 256)
    calib = os.path.join(work, "calib.safetensors")
    save_file({Q: xq, D: xd}, calib)

    # The budget planner with datatype x method candidates: at the FP8 budget every weight can
    # have FP8 with either method; GPTQ errs less on the calibration, so the plan names it.
    plan = os.path.join(work, "plan.json")
    cli("plan", os.path.join(work, "model.safetensors"), "--budget", "8.125",
        "--candidates", f"{MXFP4},{MXFP4}@gptq,{FP8},{FP8}@gptq", "--calib", calib, "-o", plan,
        "--device", "cpu")
    with open(plan) as f:
        p = json.load(f)
    methods = {r["pattern"]: (r["dtype"], r.get("method")) for r in p["rules"]}
    check(methods.get(Q) == (FP8, "gptq") and methods.get(D) == (FP8, "gptq"),
          f"the budget plan takes FP8 with gptq for both weights: {methods}")
    check(all(r.get("method_options", {}).get("damp") == 0.01 for r in p["rules"]),
          "the plan records gptq's options")

    # A gptq candidate without calibration is refused before any work.
    try:
        cli("plan", os.path.join(work, "model.safetensors"), "--budget", "8.125",
            "--candidates", f"{FP8},{FP8}@gptq", "--device", "cpu")
        check(False, "plan with a gptq candidate and no --calib is refused")
    except RuntimeError as e:
        check(f"candidate '{FP8}@gptq' needs calibration inputs (--calib FILE)" in str(e), str(e))

    # An explicit plan: MXFP4 with gptq on q_proj, FP8 with gptq on down_proj.
    gptq_plan = os.path.join(work, "gptq.json")
    with open(gptq_plan, "w") as f:
        json.dump({"default": "keep", "rules": [
            {"pattern": Q, "dtype": MXFP4, "method": "gptq"},
            {"pattern": D, "dtype": FP8, "method": "gptq", "method_options": {"damp": 0.01}}]}, f)
    rtn_plan = os.path.join(work, "rtn.json")
    with open(rtn_plan, "w") as f:
        json.dump({"default": "keep", "rules": [{"pattern": Q, "dtype": MXFP4},
                                                {"pattern": D, "dtype": FP8}]}, f)
    raw_g, qc_g = export(work, "gptq", gptq_plan, calib)
    raw_r, qc_r = export(work, "rtn", rtn_plan, None)
    for name, w, x, dtype, fmt in ((Q, wq, xq, MXFP4, "mxfp4-pack-quantized"),
                                   (D, wd, xd, FP8, "float-quantized")):
        module = name[:-len(".weight")]
        g, r = group_of(qc_g, module), group_of(qc_r, module)
        check(g["format"] == fmt, f"{name}: format {g['format']}")
        dec_g = decompress(fmt, raw_g, module, g["weights"])
        dec_r = decompress(fmt, raw_r, module, r["weights"])
        want = method_cast(work, w, dtype, "gptq", x)
        check(same_bits(dec_g, want),
              f"{name}: compressed-tensors' decompression of the gptq export equals "
              f"`cast --method gptq` bit for bit ({int(np.sum(dec_g != want))} differ)")
        check(not np.array_equal(dec_g, dec_r), f"{name}: the gptq export differs from the rtn one")
        check(same_bits(dec_r, method_cast(work, w, dtype, "rtn", None)),
              f"{name}: the rtn export decompresses to the plain cast")
        err = lambda d: float(np.linalg.norm(x @ (d - w).T))
        check(err(dec_g) < err(dec_r), f"{name}: gptq's output error {err(dec_g)} below rtn's "
              f"{err(dec_r)}")
        # llm-compressor's GPTQ without activation ordering writes actorder null, its observer
        # minmax; the method itself is named in the file's metadata.
        check(g["weights"].get("actorder") is None and g["weights"].get("observer") == "minmax",
              f"{name}: weights args {g['weights']}")

    # mse names llm-compressor's mse observer with its grid.
    mse_plan = os.path.join(work, "mse.json")
    with open(mse_plan, "w") as f:
        json.dump({"default": "keep", "rules": [{"pattern": D, "dtype": FP8, "method": "mse"}]}, f)
    raw_m, qc_m = export(work, "mse", mse_plan, None)
    wm = group_of(qc_m, D[:-len(".weight")])["weights"]
    check(wm.get("observer") == "mse" and wm.get("observer_kwargs", {}).get("grid") == 100,
          f"mse weights args {wm}")

    # awq has no place for its pre-quant scale in compressed-tensors: refused by name.
    awq_plan = os.path.join(work, "awq.json")
    with open(awq_plan, "w") as f:
        json.dump({"default": "keep", "rules": [{"pattern": D, "dtype": FP8, "method": "awq"}]}, f)
    try:
        export(work, "awq", awq_plan, calib)
        check(False, "an awq rule in a compressed-tensors export is refused")
    except RuntimeError as e:
        check("awq" in str(e) and "pre-quant scale" in str(e) and D in str(e),
              f"the awq refusal names awq, the pre-quant scale and the tensor: {e}")
    # gptq without calibration: refused naming the tensor and --calib.
    try:
        export(work, "nocalib", gptq_plan, None)
        check(False, "a gptq rule without --calib is refused")
    except RuntimeError as e:
        check("--calib" in str(e) and "gptq" in str(e) and (Q in str(e) or D in str(e)),
              f"the refusal names gptq, --calib and the tensor: {e}")


def main():
    with tempfile.TemporaryDirectory() as work:
        run(work)
    return exit_status(failures, "method export")


if __name__ == "__main__":
    sys.exit(main())
