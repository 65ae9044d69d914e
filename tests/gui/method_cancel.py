"""The method job shows progress and is cancelled by its Cancel button, as the other jobs are.

A weight large enough that GPTQ on it and three pinned datatypes takes seconds: the composer's
method is chosen by the mouse, the progress line's Cancel clicked while the job runs; the app
then reports the cancel, keeps no result and stays idle until a setting changes; a change starts
it again and it finishes.

usage: method_cancel.py PATH/TO/castscope PATH/TO/castscope_gui_check WORKDIR
"""
import json
import os
import sys

import numpy as np
from app_session import begin, run_app


def main():
    started = begin("method_cancel")
    if started is None:
        return 77
    app, _checker, work, rng = started
    np.save(os.path.join(work, "big.npy"),
            (rng.standard_normal((1024, 1024)) * 0.05).astype(np.float32))
    np.save(os.path.join(work, "small.npy"),
            (rng.standard_normal((64, 128)) * 0.05).astype(np.float32))
    lines = ["open big.npy", "wait", 'choose "Datatype::##preset" nvfp4', "wait", "panel compare",
             "pin mxfp4e2", "pin int4_float32_t32", "pin e4m3fn_e8m0_t32", "wait",
             'choose "Datatype::method" gptq', "frames 2", 'click "Datatype::Cancel"', "wait",
             "frames 3", "state cancelled.json",
             "open small.npy", "wait", "state after.json", "quit"]
    _, state = run_app(app, work, "cancel", "\n".join(lines) + "\n")
    failures = []
    s = json.load(open(state))
    if s.get("script_errors"):
        failures.append(f"script: {s['script_errors']}")
    c = json.load(open(os.path.join(work, "cancelled.json")))
    if not any("method comparison cancelled" in m for m in c["messages"]):
        failures.append(f"no cancel reported: {c['messages'][-5:]}")
    if "run" in c["method"] or c["busy"]:
        failures.append("a cancelled job left a result or still runs")
    a = json.load(open(os.path.join(work, "after.json")))
    if "run" not in a["method"] or a["method"]["run"]["tensor"] != "small":
        failures.append(f"the job did not run again after a change: {a['method']}")
    for f in failures:
        print("FAIL", f)
    print("method_cancel:", "ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
