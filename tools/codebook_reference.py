#!/usr/bin/env python3
"""Reference data for codebook datatypes, produced by running TensorCast itself.

    PYTHONPATH=/path/to/tensorcast python3 tools/codebook_reference.py tests/codebook/data

needs PyTorch (CPU is enough) and a checkout of ROCm/tensorcast (branch main). Writes, per case,
the input, TensorCast's virtual-cast values, its chosen mappings (meta) and tile scales as .npy
files, plus manifest.json with TensorCast's mapping tables and the tiles that the test sets aside
because TensorCast's arithmetic differs from the exact definition there (docs/formats.md,
"Codebooks"): each set-aside tile is named with its reason, and nothing else is excluded.
"""

import json
import math
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch

import tcast

SEED = 20261123
TILE = 32
COLS = 64  # two tiles per row

# (case name, number spec, scale spec, scale mode)
CASES = [
    ("icb44fi4_e32", "icb44fi_e4m3fn", "e8m0_t32", "max"),
    ("icb44fi4_e32s8", "icb44fi_e4m3fn", "e8m0_t32s8", "max"),
    ("icb44fi3_e32s16_midmax", "icb44fi_e3m2fnuz", "e8m0_t32s16", "midmax"),
    ("icb44fi2_e32s4", "icb44fi_e2m3fnuz", "e8m0_t32s4", "max"),
    ("icb44fi4_f32", "icb44fi_e4m3fn", "e5m0_t32", "max"),
    ("icb44fi2_f32s8", "icb44fi_e2m3fnuz", "e5m3_t32s8", "max"),
    ("icb42p1s2_e4m3fn_t32s8", "icb42p1s2_e4m3fn", "e8m0_t32s8", "max"),
]

# Codebooks whose generated tables are compared entry by entry.
TABLES = [
    "icb44fi_e4m3fn",
    "icb44fi_e3m2fnuz",
    "icb44fi_e2m3fnuz",
    "icb42p1s2_e4m3fn",
    "icb41f_e2m3fnuz",
    "icb42f1_e2m3fnuz",
    "icb44p_e4m3fn",
    "icb42s03i_e5m2",
    "icb43p2s11fi_e4m3fn",
]


def positive(mapping):
    return [v for v in mapping if v > 0.0]


def quantize_exact(a, pos):
    """TensorCast's rule on a magnitude a (Fraction): the largest entry whose midpoint a reaches."""
    out, prev = Fraction(0), Fraction(0)
    for v in pos:
        v = Fraction(v)
        if a >= (prev + v) / 2:
            out = v
        prev = v
    return out


def round_even(v, spec):
    """v (a positive Fraction) rounded once to nearest-even in the float format spec, saturating."""
    e = max(math.floor(math.log2(v)), spec.emin)
    while Fraction(2) ** (e + 1) <= v:
        e += 1
    while e > spec.emin and Fraction(2) ** e > v:
        e -= 1
    q = v / Fraction(2) ** (e - spec.mbits)
    n = math.floor(q)
    if q - n > Fraction(1, 2) or (q - n == Fraction(1, 2) and n % 2 == 1):
        n += 1
    return min(n * Fraction(2) ** (e - spec.mbits), Fraction(spec.maxfloat))


def make_input(rng, nspec, rows):
    """Rows of two tiles; each tile stresses one band."""
    cb = tcast.number(nspec)
    maps = cb.codebook
    top = max(max(positive(m)) for m in maps)
    x = np.zeros((rows, COLS), dtype=np.float32)
    for t in range(rows * COLS // TILE):
        r, c0 = divmod(t * TILE, COLS)
        kind = t % 8
        e = int(rng.integers(-20, 20))
        m = maps[int(rng.integers(0, len(maps)))]
        pos = positive(m)
        mids = [(a + b) / 2 for a, b in zip([0.0] + pos[:-1], pos)]
        if kind == 0:  # Gaussian at a random magnitude
            v = rng.standard_normal(TILE) * 2.0**e
        elif kind in (1, 2):  # entries and exact midpoints (ties) of one mapping, max pinned
            pool = np.array(pos + mids + [0.0])
            v = rng.choice(pool, TILE) * 2.0**e
            v[int(rng.integers(0, TILE))] = pos[-1] * 2.0**e
        elif kind == 3:  # one ulp either side of midpoints
            v = np.array(rng.choice(mids, TILE), dtype=np.float32)
            v = np.where(rng.random(TILE) < 0.5, np.nextafter(v, np.float32(0)), np.nextafter(v, np.float32(1e9)))
            v = v.astype(np.float64) * 2.0**e
            v[0] = top * 2.0**e
        elif kind == 4:  # zeros, -0 and a few values
            v = np.zeros(TILE)
            idx = rng.choice(TILE, 6, replace=False)
            v[idx] = rng.standard_normal(6) * 2.0**e
            v[rng.choice(TILE, 8, replace=False)] = -0.0
        elif kind == 5:  # tiny and huge magnitudes beside each other
            v = rng.standard_normal(TILE) * 2.0 ** float(rng.choice([-100, -60, 60, 100]))
            v[: TILE // 4] *= 2.0**-12
        elif kind == 6:  # scale-selection boundary: max at the top entry and next to it
            v = rng.standard_normal(TILE) * 2.0**e
            pick = float(rng.choice([pos[-1], float(np.nextafter(np.float32(pos[-1]), np.float32(1e9))), cb.midmax, 2 * pos[-1]]))
            v[int(rng.integers(0, TILE))] = pick * 2.0**e
        else:  # values spread over many binades
            v = rng.standard_normal(TILE) * 2.0 ** rng.integers(-12, 4, TILE).astype(np.float64)
        signs = np.where(rng.random(TILE) < 0.5, -1.0, 1.0)
        if kind != 4:
            v = np.abs(v) * signs
        x[r, c0 : c0 + TILE] = v.astype(np.float32)
    x[0, :TILE] = 0.0  # one all-zero tile
    return x


def run_case(rng, out, name, nspec, sspec, scalemode, rows=16):
    dtype = tcast.datatype(nspec, sspec)
    x = make_input(rng, nspec, rows)
    xt = torch.from_numpy(x.copy())
    st = tcast.cast(xt, dtype, castmode="virtual", scalemode=scalemode)
    values = st.tensor.numpy().astype(np.float32)
    meta = st.scaledata.codebook.numpy().astype(np.uint8).reshape(rows, -1)
    sd = tcast.get_scales(xt, dtype, scalemode=scalemode) if hasattr(tcast, "get_scales") else None
    scale = sd.scale if sd is not None else tcast.cast(xt, dtype, castmode="scale", scalemode=scalemode).scaledata.scale
    scale = scale.reshape(rows, -1).double().numpy()
    sc = dtype.sspec.scale
    if sc.is_exponent:
        code = scale.astype(np.int64)
        scale_value = np.ldexp(1.0, (code - sc.bias).astype(np.int64))
        maxcode = 2**sc.bits - 2
    else:
        code = None
        scale_value = scale
    cb = dtype.nspec
    sub = dtype.sspec.subtile or TILE
    pos = [positive(m) for m in cb.codebook]
    aside = {}
    for t in range(rows * COLS // TILE):
        r, c0 = divmod(t * TILE, COLS)
        tile = x[r, c0 : c0 + TILE].astype(np.float64)
        g = c0 // TILE
        nz = tile[tile != 0]
        if code is not None:
            k = int(code[r, g])
            if k < 0 or k > maxcode:
                aside[t] = "unclamped-exponent-scale"
                continue
            if nz.size == 0 or (np.any(tile == 0) and math.frexp(float(np.abs(nz).max()))[1] - 1 < -23):
                aside[t] = "zeros-raise-exponent"
                continue
        else:
            amax = float(np.abs(tile).max())
            if amax == 0.0 or scale_value[r, g] == 0.0:
                aside[t] = "zero-float-scale"
                continue
            once = round_even(Fraction(amax) / Fraction(cb.maxfloat), sc)
            if once != Fraction(float(scale_value[r, g])):
                aside[t] = "float-scale-double-rounding"
                continue
        s = Fraction(float(scale_value[r, g]))
        for s0 in range(0, TILE, sub):
            xs = [Fraction(float(v)) for v in tile[s0 : s0 + sub]]
            if code is None:
                # TensorCast divides in float32; a quotient rounded onto a midpoint decides differently.
                for v in tile[s0 : s0 + sub]:
                    q32 = Fraction(float(np.float32(v) / np.float32(scale_value[r, g])))
                    exact = abs(Fraction(float(v))) / s
                    for p in pos:
                        if quantize_exact(abs(q32), p) != quantize_exact(exact, p):
                            aside[t] = "float32-quotient"
            best, best_e = 0, None
            for mi, p in enumerate(pos):
                err = sum((quantize_exact(abs(v) / s, p) * s - abs(v)) ** 2 for v in xs)
                if best_e is None or err < best_e:
                    best, best_e = mi, err
            if best != int(meta[r, (c0 + s0) // sub]) and t not in aside:
                aside[t] = "float32-norm"
    # TensorCast multiplies by torch.sign(t), which is +0 for -0: a -0 input comes back as +0
    # where decision 12 keeps -0. Named per element; the test checks exactly that difference.
    negzero = [int(i) for i in np.flatnonzero((x == 0) & np.signbit(x))]
    stem = name
    np.save(out / f"{stem}.x.npy", x)
    np.save(out / f"{stem}.values.npy", values)
    np.save(out / f"{stem}.meta.npy", meta)
    np.save(out / f"{stem}.scale.npy", scale_value.astype(np.float64))
    return {
        "name": name,
        "dtype": f"{nspec}_{sspec}",
        "scale_mode": "midmax" if scalemode == "midmax" else "floor",
        "tile": TILE,
        "set_aside": [{"tile": t, "reason": why} for t, why in sorted(aside.items())],
        "negative_zero_inputs": negzero,
    }


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/codebook/data")
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    cases = [run_case(rng, out, *c) for c in CASES]
    tables = {}
    for code in TABLES:
        n = tcast.number(code)
        tables[code] = {"maps": [[float(v) for v in m] for m in n.codebook], "names": list(n.mapnames)}
    manifest = {
        "generator": "tools/codebook_reference.py",
        "reference": "ROCm/tensorcast main, tcast.cast (virtual) and tcast.number",
        "seed": SEED,
        "cases": cases,
        "tables": tables,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    for c in cases:
        print(c["name"], "set aside:", [(a["tile"], a["reason"]) for a in c["set_aside"]])


if __name__ == "__main__":
    main()
