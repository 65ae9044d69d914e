"""castscope.quantize: the CLI's `cast --method` bits, rtn the plain cast, awq's scale applied."""
import subprocess

import numpy as np
import pytest

import castscope


def run_cli(cli, *args):
    p = subprocess.run([cli, *args], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p


def correlated(rng, tokens, cols):
    return (rng.standard_normal((tokens, cols)) @
            (np.eye(cols) + rng.standard_normal((cols, cols)) / np.sqrt(cols))).astype(np.float32)


@pytest.mark.parametrize("dtype", ["nvfp4", "uint4_float32_int8_t128", "mxfp4e2"])
@pytest.mark.parametrize("method,extra", [("gptq", []), ("gptq", ["--act-order", "--static-groups"]),
                                          ("mse", []), ("awq", [])])
def test_quantize_matches_cli(cli, rng, tmp_path, dtype, method, extra):
    w = (rng.standard_normal((32, 256)) * 0.02).astype(np.float32)
    x = correlated(rng, 256, 256)
    np.save(tmp_path / "w.npy", w)
    np.save(tmp_path / "x.npy", x)
    args = ["--method", method] + extra
    if method in ("gptq", "awq"):
        args += ["--calib", str(tmp_path / "x.npy")]
    run_cli(cli, "cast", str(tmp_path / "w.npy"), str(tmp_path / "q.npy"), "--dtype", dtype, *args)
    v = castscope.quantize(w, dtype, method=method, calib=x if method in ("gptq", "awq") else None,
                           act_order="--act-order" in extra, static_groups="--static-groups" in extra)
    assert np.array_equal(v.view(np.uint32), np.load(tmp_path / "q.npy").view(np.uint32))


def test_rtn_is_the_cast_and_actual_results(rng):
    w = (rng.standard_normal((16, 256)) * 0.02).astype(np.float32)
    q = castscope.quantize(w, "nvfp4")
    assert np.array_equal(q.view(np.uint32), castscope.cast(w, "nvfp4").view(np.uint32))
    x = correlated(rng, 128, 256)
    r = castscope.quantize(w, "nvfp4", method="awq", calib=x, mode="actual")
    assert r.pre_quant_scale.shape == (256,)
    q = r.cast.upcast() / r.pre_quant_scale
    err = np.linalg.norm(x.astype(np.float64) @ (w.astype(np.float64) - q).T)
    assert abs(err - r.output_error) <= 1e-5 * err
    g = castscope.quantize(w, "nvfp4", method="gptq", calib=x, mode="actual")
    assert g.pre_quant_scale is None and g.output_error > 0


def test_bad_input_is_named(rng):
    w = (rng.standard_normal((16, 256)) * 0.02).astype(np.float32)
    with pytest.raises(castscope.Error, match="needs calibration"):
        castscope.quantize(w, "nvfp4", method="gptq", name="blk.0.q")
    with pytest.raises(castscope.Error, match=r"\[8, 128\].*\[16, 256\]"):
        castscope.quantize(w, "nvfp4", method="gptq", calib=np.ones((8, 128), np.float32))
    with pytest.raises(castscope.Error, match="unknown quantization method"):
        castscope.quantize(w, "nvfp4", method="optq")
