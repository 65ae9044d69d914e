#!/usr/bin/env python3
"""CastScope's CPU unscaled casts against ml_dtypes' astype, in one run on the same machine.

Runs cpu_cast_bench's one-thread unscaled casts (float32 4096x4096 -> bfloat16 / float8_e4m3fn
values, virtual mode) and times numpy astype to ml_dtypes' types on the same shape, then prints
both rates and their ratio with the machine's load average. Both sides round every element once;
CastScope also writes the float32 values back and counts clipped / non-finite elements.

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
    ml = {"bfloat16": ml_rate(x, ml_dtypes.bfloat16),
          "float8_e4m3fn": ml_rate(x, ml_dtypes.float8_e4m3fn)}
    out = subprocess.run([bench, "--benchmark_filter=_1thread", "--benchmark_min_time=1",
                          "--benchmark_format=json"], check=True, capture_output=True, text=True)
    cs = {}
    for b in json.loads(out.stdout)["benchmarks"]:
        name = b["name"].split("/")[1].replace("_Virtual_1thread", "")
        cs[name] = b["items_per_second"] / 1e6
    ml2 = {k: ml_rate(x, getattr(ml_dtypes, k)) for k in ml}
    after = os.getloadavg()[0]
    print(f"load average {before:.1f} before, {after:.1f} after")
    print(f"{'cast':16s} {'CastScope 1 thread M/s':>24s} {'ml_dtypes astype M/s':>22s} {'ratio':>7s}")
    for k in ml:
        m = max(ml[k], ml2[k])  # ml_dtypes timed before and after; its better figure
        print(f"{k:16s} {cs[k]:24.0f} {m:22.0f} {cs[k] / m:7.2f}")


if __name__ == "__main__":
    main()
