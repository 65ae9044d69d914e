"""Compressed-tensors exports in float32: why `from_pretrained(..., dtype=torch.float32)` and a
forward pass fail for NVFP4 (and MXFP4 / MXFP6 / MXFP8) checkpoints with "expected m1 and m2 to
have the same dtype". compressed-tensors 0.20.1 itself decompresses these formats to bfloat16
whatever the model's dtype (unpack_fp4_from_uint8 and the MXFP6 unpacker default to bfloat16,
E8M0 scales are decoded as bfloat16), so a float32 model gets bfloat16 weights. A checkpoint
compressed-tensors makes itself shows the same: the fault is not in CastScope's files
(docs/export-formats.md). A forward pass runs in bfloat16 for both, and in float32 for neither;
the test fails when compressed-tensors starts decoding to the model's dtype, or when CastScope's
export stops behaving as the library's own checkpoint does."""
import json
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("compressed_tensors")
safetensors_torch = pytest.importorskip("safetensors.torch")
from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor  # noqa: E402
from compressed_tensors.quantization import preset_name_to_scheme  # noqa: E402
from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam  # noqa: E402

DTYPE_ERROR = "expected m1 and m2 to have the same dtype"


def library_checkpoint(w, scheme):
    """NVFP4 state dict of weight w as compressed-tensors computes and compresses it."""
    g = generate_gparam(w.min(), w.max())
    wr = w.reshape(w.shape[0], -1, 16)
    scale, zp = calculate_qparams(wr.amin(-1), wr.amax(-1), scheme.weights, global_scale=g)
    return NVFP4PackedCompressor.compress({"weight": w, "weight_scale": scale,
                                           "weight_global_scale": g, "weight_zero_point": zp},
                                          scheme)


def castscope_checkpoint(cli, w, tmp_path):
    src, out = tmp_path / "w.safetensors", tmp_path / "ct" / "model.safetensors"
    out.parent.mkdir()
    safetensors_torch.save_file({"proj.weight": w}, str(src))
    p = subprocess.run([cli, "export", str(src), str(out), "--dtype", "nvfp4", "--layout",
                        "compressed-tensors", "-q", "--device", "cpu"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    cfg = json.load(open(out.parent / "config.json"))["quantization_config"]
    assert any(g.get("format") == "nvfp4-pack-quantized"
               for g in cfg["config_groups"].values()) or cfg.get("format") == "nvfp4-pack-quantized"
    sd = safetensors_torch.load_file(str(out))
    return {k[len("proj."):]: v for k, v in sd.items() if k.startswith("proj.")}


def test_float32_forward_fails_in_the_library_for_both(cli, tmp_path, rng):
    w = torch.from_numpy(rng.standard_normal((64, 256)).astype(np.float32))
    x = torch.from_numpy(rng.standard_normal((4, 256)).astype(np.float32))
    scheme = preset_name_to_scheme("NVFP4", ["Linear"])
    outs = {}
    for who, sd in [("compressed-tensors", library_checkpoint(w, scheme)),
                    ("castscope", castscope_checkpoint(cli, w, tmp_path))]:
        assert sd["weight_packed"].dtype == torch.uint8, who
        assert sd["weight_global_scale"].dtype == torch.float32, who
        dec = NVFP4PackedCompressor.decompress(dict(sd), scheme)["weight"]
        # The library's decoding, not the file, fixes the dtype.
        assert dec.dtype == torch.bfloat16, (who, dec.dtype)
        with pytest.raises(RuntimeError, match=DTYPE_ERROR):
            torch.nn.functional.linear(x, dec)
        y = torch.nn.functional.linear(x.bfloat16(), dec)  # bfloat16 runs
        assert y.dtype == torch.bfloat16 and torch.isfinite(y.float()).all(), who
        # Cast to the model's dtype after decoding, float32 runs too.
        outs[who] = torch.nn.functional.linear(x, dec.float())
    # Both checkpoints hold an NVFP4 weight of the same tensor: the outputs agree to FP4's error.
    a, b = outs["compressed-tensors"], outs["castscope"]
    ref = torch.nn.functional.linear(x, w)
    for o in (a, b):
        snr = 10 * torch.log10((ref ** 2).sum() / ((o - ref) ** 2).sum())
        assert snr > 15, float(snr)
