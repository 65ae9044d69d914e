#!/usr/bin/env python3
"""Writes the demo tensors the desktop app opens when it is started without a file.

The tensors are small (a few hundred KiB in all) and deterministic: a fixed seed, so running the
script again reproduces the same bytes. They cover the shapes of data a quantisation study meets:
well-behaved Gaussian values, heavy tails, rare large outliers, and a weight matrix whose rows
have different scales and a few outlier input channels, as in trained transformer layers.

Usage: python3 tools/make_demo_assets.py [OUTPUT_DIR]   (default: assets/)
"""
import os
import sys

import numpy as np

SEED = 20240521


def make(rng):
    out = {}
    out["gaussian"] = rng.standard_normal((128, 256)).astype(np.float32)
    out["student_t"] = rng.standard_t(3.0, size=(128, 256)).astype(np.float32)
    x = rng.standard_normal((128, 256)).astype(np.float32) * 0.5
    idx = rng.choice(x.size, size=40, replace=False)
    x.flat[idx] = rng.choice([-1.0, 1.0], size=40) * rng.uniform(20.0, 80.0, size=40)
    out["outliers"] = x.astype(np.float32)
    rows, cols = 192, 256
    row_scale = np.exp(rng.normal(0.0, 0.6, size=(rows, 1))) * 0.02
    w = rng.standard_normal((rows, cols)) * row_scale
    hot = rng.choice(cols, size=4, replace=False)
    w[:, hot] *= rng.uniform(8.0, 20.0, size=4)
    out["layer"] = w.astype(np.float32)
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    dest = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "assets")
    os.makedirs(dest, exist_ok=True)
    rng = np.random.default_rng(SEED)
    total = 0
    for name, arr in make(rng).items():
        path = os.path.join(dest, f"demo_{name}.npy")
        np.save(path, arr)
        total += os.path.getsize(path)
        print(f"{path}: {arr.shape} {arr.dtype}")
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
