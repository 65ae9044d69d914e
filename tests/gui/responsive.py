"""The app stays responsive while the views of a 4096 x 4096 float32 tensor update without a GPU.

A scripted session (xvfb, the views on the CPU) opens the tensor and changes the datatype three
times. From the state file it checks that every change showed its metrics before the rest of
the views (the statistics arrive frames before the finished analysis) and that frames kept being
drawn while each analysis ran. It prints the frame times drawn during the analyses: the figure
for the 30 fps goal. The goal itself is a measurement, not a pass/fail check here (the machine
may be shared); run this script on an idle machine to measure it:

usage: responsive.py PATH/TO/castscope WORKDIR [N]     (N x N tensor, default 4096)
"""
import json
import os
import sys

import numpy as np
from app_session import prepare, run_app

DTYPES = ["nvfp4", "mxfp8e4", "int8_sc"]


def main():
    app, work = sys.argv[1:3]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
    seed = prepare("responsive", work)
    if seed is None:
        return 77
    path = os.path.join(work, f"big_{n}.npy")
    rng = np.random.default_rng(seed)
    np.save(path, rng.standard_normal((n, n), dtype=np.float32))
    failures = 0
    for dtype in DTYPES:
        # One change of datatype per session, so that each state file describes one update.
        r, state = run_app(app, work, dtype, f"open {path}\nwait\ndtype {dtype}\nwait\nquit\n")
        if r.returncode:
            print(f"responsive: {dtype}: the session failed ({r.returncode})")
            failures += 1
            continue
        s = json.load(open(state))
        fr, mf = s["frames_while_analysing"], s["metrics_first"]
        a = s.get("analysis") or {}
        print(f"{dtype}: {fr['frames']} frames drawn while the views were computed on the "
              f"{'GPU' if a.get('on_device') else 'CPU'}: mean {fr['mean_ms']:.1f} ms, median "
              f"{fr['p50_ms']:.1f} ms, 95th percentile {fr['p95_ms']:.1f} ms, longest "
              f"{fr['max_ms']:.1f} ms; metrics at frame {mf['partial_frame']}, every view at "
              f"frame {mf['analysis_frame']}")
        if not (0 < mf["partial_frame"] < mf["analysis_frame"]):
            print(f"responsive: {dtype}: the metrics did not arrive before the other views")
            failures += 1
        if fr["frames"] < 3:
            print(f"responsive: {dtype}: only {fr['frames']} frames drawn while analysing")
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
