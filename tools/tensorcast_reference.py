#!/usr/bin/env python3
"""Reference outputs of TensorCast itself, for tests/tensorcast.

Runs TensorCast's own virtual cast (ROCm/tensorcast, branch main, tcast.vcast with PyTorch on the
CPU) on inputs built to cover every difficult band, and writes inputs and outputs as float32
members of one .npz: `<case>.x` and `<case>.y`. TensorCast is not part of this repository; put a
checkout on PYTHONPATH:

    git clone https://github.com/ROCm/tensorcast /tmp/tensorcast   # the commit used is below
    pip install torch numpy
    PYTHONPATH=/tmp/tensorcast python3 tools/tensorcast_reference.py tests/tensorcast/data/reference.npz

Bands, per case (each band in its own tiles so that it decides the tile's scale):
  zeros      all-zero tiles, tiles of -0, tiles half zeros
  ties       values exactly halfway between neighbours of the element grid, at an exact scale
  tiny       magnitudes 2^-20 .. 2^-40 (with and without zeros in the tile) and float32 subnormals
  huge       magnitudes up to 3e38
  boundary   tile maxima at max, midmax and 2^k times the scale, and one float32 ulp either side
  random     Gaussian tiles at magnitudes 2^-10 .. 2^10
The seed is fixed (SEED) so that the file is reproducible.
"""

import sys

import numpy as np
import torch

import tcast

SEED = 20261123
TENSORCAST_COMMIT = "c4d9b1d"  # ROCm/tensorcast main when the data was made

# (case, TensorCast datatype, CastScope datatype string, TensorCast scale mode, tile)
CASES = [
    ("mxfp8e4_midmax", tcast.mxfp8e4, "mxfp8e4", "midmax", 32),
    ("mxfp8e4_max", tcast.mxfp8e4, "mxfp8e4", "max", 32),
    ("mxfp8e5_midmax", tcast.mxfp8e5, "mxfp8e5", "midmax", 32),
    ("mxfp6e3_midmax", tcast.mxfp6e3, "mxfp6e3", "midmax", 32),
    ("mxfp6e2_max", tcast.mxfp6e2, "mxfp6e2", "max", 32),
    ("mxfp5e2_midmax", tcast.mxfp5e2, "mxfp5e2", "midmax", 32),
    ("mxfp4e2_max", tcast.mxfp4e2, "mxfp4e2", "max", 32),
    ("mxfp4e2_midmax", tcast.mxfp4e2, "mxfp4e2", "midmax", 32),
    ("mxint8", tcast.mxint8, "mxint8", "max", 32),
    ("mxint4", tcast.mxint4, "mxint4", "max", 32),
    ("bfp16", tcast.bfp16, "bfp16", "max", 8),
    ("mx9", tcast.mx9, "mx9", "max", 16),
    ("mx6", tcast.mx6, "mx6", "max", 16),
    ("mx4", tcast.mx4, "mx4", "max", 16),
    ("e2m1_e32s8o1_max", tcast.e2m1_e32s8o1, "e2m1_e32s8o1", "max", 32),
    ("e2m1_e32s4o2_midmax", tcast.e2m1_e32s4o2, "e2m1_e32s4o2", "midmax", 32),
    ("e2m1_e32s8o2_midmax", tcast.e2m1_e32s8o2, "e2m1_e32s8o2", "midmax", 32),
    ("e4m3_f32", tcast.e4m3_f32, "e4m3_f32", "max", 32),
    ("e2m1_f32", tcast.e2m1_f32, "e2m1_f32", "max", 32),
    ("int4_f32", tcast.int4_f32, "int4_f32", "max", 32),
    ("e2m1_e4m3_t16", tcast.datatype("e2m1fnuz", "e4m3fn_t16"), "e2m1fnuz_e4m3fn_t16", "max", 16),
    ("e4m3_e", tcast.e4m3_e, "e4m3_e", "midmax", 32),
]


def grid(nspec):
    """Positive values of the element grid as TensorCast's number line has them."""
    if nspec.is_int:
        return [i * 2.0 ** -(nspec.bits - 2) for i in range(0, nspec.maxint + 1)]
    return sorted({abs(v) for v in nspec.get_number_line()})


def build(dt, tile, rng):
    nspec = dt.nspec
    width = 2 * tile
    g = grid(nspec)
    top = nspec.maxfloat if nspec.is_float else g[-1]
    mids = [(a + b) / 2 for a, b in zip(g, g[1:])]
    rows = []

    def row(vals):
        v = np.zeros(width, dtype=np.float64)
        v[: len(vals)] = vals[:width]
        rows.append(v.astype(np.float32))

    # zeros
    rows.append(np.zeros(width, np.float32))
    rows.append(-np.zeros(width, np.float32))
    r = rng.standard_normal(width).astype(np.float32)
    r[::2] = 0.0
    r[1::4] = -0.0
    rows.append(r)
    # ties at exact power-of-two scales: the tile maximum is the grid's max times 2^k
    for k in (-3, 0, 5):
        for start in range(0, len(mids), tile - 1):
            chunk = mids[start : start + tile - 1]
            vals = [top] + chunk
            signs = rng.choice([-1.0, 1.0], size=len(vals))
            vals = np.array(vals) * signs * 2.0**k
            row(np.concatenate([vals, vals[::-1]]) if len(vals) <= tile else vals)
    # tiny: with and without zeros, and float32 subnormals
    for e in (-20, -27, -33, -40):
        v = rng.standard_normal(width) * 2.0**e
        rows.append(v.astype(np.float32))
        v2 = v.copy()
        v2[::3] = 0.0
        rows.append(v2.astype(np.float32))
    sub = (rng.integers(1, 1 << 23, width) * rng.choice([-1, 1], width)).astype(np.int64)
    rows.append((sub.astype(np.float64) * 2.0**-149).astype(np.float32))
    # huge
    for m in (1e30, 1e37, 3e38):
        v = rng.uniform(-1, 1, width) * m
        v[0] = m
        rows.append(v.astype(np.float32))
    # boundaries of the shared exponent: tile max at max, midmax, 2^(emax+1) times 2^k, +- 1 ulp
    anchors = [top, 2.0 ** (nspec.emax + 1) if nspec.is_float else 2.0]
    if nspec.is_float:
        anchors.append(nspec.midmax)
    for a in anchors:
        for k in (-7, 0, 3):
            base = np.float32(a * 2.0**k)
            for b in (np.nextafter(base, np.float32(0)), base, np.nextafter(base, np.float32(np.inf))):
                v = rng.uniform(-1, 1, width) * float(b) * 0.9
                v[0] = b
                v[tile] = -b
                rows.append(v.astype(np.float32))
    # random
    for e in range(-10, 11, 4):
        rows.append((rng.standard_normal(width) * 2.0**e).astype(np.float32))
    return np.stack(rows)


def main(out):
    rng = np.random.default_rng(SEED)
    members = {}
    for case, dt, cs_name, mode, tile in CASES:
        x = build(dt, tile, rng)
        y = tcast.vcast(torch.from_numpy(x.copy()), dt, scalemode=mode, roundmode="even")
        members[case + ".x"] = x
        members[case + ".y"] = y.numpy().astype(np.float32)
    np.savez_compressed(out, **members)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/tensorcast/data/reference.npz")
