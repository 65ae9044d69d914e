"""torchao's MX scale-mode names as aliases: `--scale-mode floor|rceil|ceil|even` gives, on MXFP8
and MXFP4, the values of torchao's own to_mx with ScaleCalculationMode FLOOR, RCEIL, CEIL and
EVEN bit for bit (RCEIL is CastScope's topbinade, EVEN its option3); a zero's sign aside
(CastScope keeps -0, docs/formats.md), so zeros compare by value."""
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
mx = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor",
                         reason="torchao's MX functions (pip install torchao)")
cfg = pytest.importorskip("torchao.prototype.mx_formats.config")

MODES = {"floor": "FLOOR", "rceil": "RCEIL", "ceil": "CEIL", "even": "EVEN"}
FORMATS = {"mxfp8e4": torch.float8_e4m3fn, "e2m1_e8m0_t32": torch.float4_e2m1fn_x2}


def cli_cast(cli, x_path, out, dtype, mode):
    p = subprocess.run([cli, "cast", str(x_path), str(out), "--dtype", dtype, "--scale-mode",
                        mode, "--device", "cpu"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return np.load(out)


def same_bits(a, b):
    """Equal bit for bit, except +0 against -0."""
    differ = a.view(np.int32) != b.view(np.int32)
    return bool(np.all((a[differ] == 0) & (b[differ] == 0)))


@pytest.mark.parametrize("dtype", list(FORMATS))
def test_torchao_names_reproduce_to_mx(cli, tmp_path, rng, dtype):
    # Magnitudes over many binades, so that the scale choice of each mode matters.
    x = (rng.standard_normal((64, 256)) * np.exp2(rng.integers(-8, 8, (64, 256)))).astype(
        np.float32)
    xp = tmp_path / "x.npy"
    np.save(xp, x)
    got = {}
    for ours, theirs in MODES.items():
        mode = getattr(cfg.ScaleCalculationMode, theirs)
        scale, data = mx.to_mx(torch.from_numpy(x), FORMATS[dtype], 32, scaling_mode=mode)
        ref = mx.to_dtype(data, scale, FORMATS[dtype], 32, torch.float32).numpy()
        got[ours] = cli_cast(cli, xp, tmp_path / f"{ours}.npy", dtype, ours)
        assert same_bits(got[ours], ref), f"{dtype} --scale-mode {ours} != torchao {theirs}"
    # The aliases are the CastScope modes named in docs/formats.md.
    assert np.array_equal(got["rceil"], cli_cast(cli, xp, tmp_path / "t.npy", dtype, "topbinade"))
    assert np.array_equal(got["even"], cli_cast(cli, xp, tmp_path / "o.npy", dtype, "option3"))
    # The modes differ on this data: each comparison above could fail.
    assert not np.array_equal(got["floor"], got["rceil"])
    assert not np.array_equal(got["floor"], got["ceil"])
