#!/usr/bin/env python3
"""CastScope's CPU unscaled casts against ml_dtypes' astype, in one run on the same machine.

Runs cpu_cast_bench's one-thread unscaled casts (float32 4096x4096 -> bfloat16 / float16 /
float8_e4m3fn / float8_e5m2) and times numpy astype to the same types (ml_dtypes', numpy's
float16) on the same shape, then prints both rates and their ratios with the machine's load
average. Both sides round every element once. "actual" writes the codes, the output astype
writes; "virtual" writes the rounded float32 values (twice the bytes) and counts clipped values.

  python3 bench/cpu_vs_ml_dtypes.py build/bench/cpu_cast_bench
"""
import json
import os
import subprocess
import sys
import time

import ml_dtypes
import numpy as np


def ml_rate(x, dt, reps=7):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        x.astype(dt)
        ts.append(time.perf_counter() - t)
    ts.sort()
    return x.size / ts[len(ts) // 2] / 1e6


def main():
    bench = sys.argv[1] if len(sys.argv) > 1 else "build/bench/cpu_cast_bench"
    x = np.random.default_rng(20261121).standard_normal((4096, 4096), dtype=np.float32)
    before = os.getloadavg()[0]
    types = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16,
             "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}
    ml = {k: ml_rate(x, t) for k, t in types.items()}
    out = subprocess.run([bench, "--benchmark_filter=_1thread", "--benchmark_min_time=1",
                          "--benchmark_format=json"], check=True, capture_output=True, text=True)
    cs = {}
    for b in json.loads(out.stdout)["benchmarks"]:
        name = b["name"].split("/")[1].replace("_1thread", "")
        dtype, mode = name.rsplit("_", 1)
        cs[(dtype, mode.lower())] = b["items_per_second"] / 1e6
    ml2 = {k: ml_rate(x, t) for k, t in types.items()}
    after = os.getloadavg()[0]
    print(f"load average {before:.1f} before, {after:.1f} after")
    print(f"{'cast':14s} {'actual M/s':>11s} {'virtual M/s':>12s} {'astype M/s':>11s} "
          f"{'actual/astype':>14s} {'virtual/astype':>15s}")
    for k in ml:
        m = max(ml[k], ml2[k])  # astype timed before and after; its better figure
        a, v = cs[(k, "actual")], cs[(k, "virtual")]
        print(f"{k:14s} {a:11.0f} {v:12.0f} {m:11.0f} {a / m:14.2f} {v / m:15.2f}")


if __name__ == "__main__":
    main()
