"""The composer's quantization method, operated by the mouse, against castscope-cli.

A random weight and calibration inputs (recorded seed) are opened in the app; the method is
chosen in the composer's combo, its options typed and ticked, the calibration file typed in.
The state JSON's figures for round to nearest and for the method (weight SNR, MSE, the layer
output error on the calibration, gptq's absolute output error) (gptq, mse with four over six, awq) must equal, as numbers, what
`castscope-cli map --method rtn --method M --calib` writes for the same tensor, and what
`castscope-cli cast --method M --calib X.npy --stats` prints. The teaching view of a GPTQ tile
must show GPTQ's values (the CLI's cast output at those elements) beside the nearest ones,
whose count of differences is the one it reports; with static groups the nearest values are
round to nearest's own (the CLI's plain cast). Synthetic calibration records its seed: the same
seed gives the same figures, another seed others.

usage: method_views.py PATH/TO/castscope PATH/TO/castscope_gui_check WORKDIR PATH/TO/castscope-cli
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
from app_session import begin, run_app

DT, DT_NAME = "e2m1fnuz_e4m3fn_float32_t16", "nvfp4"
PIN = "mxfp4e2"
TILE = 5


def cli(binary, work, *args):
    r = subprocess.run([binary, *args], cwd=work, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"castscope-cli {' '.join(args)} failed: {r.stderr}")
    return r.stdout


def printed(out, key):
    m = re.search(rf"^{re.escape(key)} (\S+)", out, re.M)
    return m.group(1) if m else None


def main():
    started = begin("method_views")
    if started is None:
        return 77
    app, _checker, work, rng = started
    binary = sys.argv[4]
    # Heavy-tailed rows with a few large input channels: GPTQ has codes to move.
    w = (rng.standard_t(4, (96, 128)) * 0.03).astype(np.float32)
    x = rng.standard_normal((80, 128)).astype(np.float32)
    x[:, rng.choice(128, 4, replace=False)] *= 8
    np.save(os.path.join(work, "w.npy"), w)
    np.save(os.path.join(work, "x.npy"), x)
    np.savez(os.path.join(work, "calib.npz"), w=x)
    failures = []

    def state_of(name, lines):
        _, st = run_app(app, work, name, "\n".join(lines + ["quit"]) + "\n")
        s = json.load(open(st))
        if s.get("script_errors"):
            failures.append(f"{name}: {s['script_errors']}")
        return s

    # gptq with typed damping and block size on the calibration file; Compare pins another
    # datatype; the teaching view on a tile; then mse with four over six.
    base = ["open w.npy", "wait", f'choose "Datatype::##preset" {DT_NAME}', "wait",
            'choose "Datatype::method" gptq', 'type "Datatype::damping" 0.02',
            'type "Datatype::block size" 32', 'type "Datatype::calibration" x.npy', "wait"]
    s = state_of("gptq", base + [
        "expect-text gptq beside rtn", "panel compare", f"pin {PIN}", "wait",
        "expect-text round to nearest beside gptq", "state gptq_compare.json",
        "panel teach", f"teach-tile {TILE}", "frames 3", "expect-text nearest code",
        "hide views", "hide compare", "frames 2", "check-layout", "state gptq_teach.json", "panel compare",
        'choose "Datatype::method" mse', 'click "Datatype::four over six (NVFP4)"', "wait",
        "state mse.json", 'choose "Datatype::method" awq', "wait", "state awq.json"])
    g = json.load(open(os.path.join(work, "gptq_compare.json")))["method"]
    t = json.load(open(os.path.join(work, "gptq_teach.json")))
    m = json.load(open(os.path.join(work, "mse.json")))["method"]
    aw = json.load(open(os.path.join(work, "awq.json")))["method"]
    if g["damp"] != 0.02 or g["block"] != 32 or g["calib"]["path"] != "x.npy":
        failures.append(f"gptq settings not recorded: {g}")
    if not m["four_over_six"] or m["method"] != "mse":
        failures.append(f"mse settings not recorded: {m}")

    def against_map(what, run, method, extra):
        js = json.loads(cli(binary, work, "map", "w.npy", "-d", DT_NAME, "-d", PIN, "--method",
                            "rtn", "--method", method, "--calib", "calib.npz", "--json", *extra))
        cols = js["columns"]
        cells = js["rows"][0]["cells"]
        for row in run["rows"]:
            dt = DT_NAME if row["dtype"] == DT else PIN
            if row["error"]:
                failures.append(f"{what} {dt}: {row['error']}")
                continue
            for key, meth in (("rtn", "rtn"), ("method", method)):
                k = next(i for i, c in enumerate(cols)
                         if c["datatype"] == dt and c["method"] == meth)
                for ours, theirs in (("snr_db", "snr_db"), ("out_relerr", "calib_out_relerr")):
                    if row[key][ours] != cells[k][theirs]:
                        failures.append(f"{what} {dt} {meth} {ours}: app {row[key][ours]!r}, "
                                        f"cli {cells[k][theirs]!r}")
        if len(run["rows"]) != 2:
            failures.append(f"{what}: {len(run['rows'])} rows, wanted {DT_NAME} and {PIN}")

    if "run" not in g:
        failures.append("gptq: no result in the state")
    else:
        against_map("gptq", g["run"], "gptq", ["--damp", "0.02", "--gptq-block", "32"])
        out = cli(binary, work, "cast", "w.npy", "g.npy", "--dtype", DT_NAME, "--method", "gptq",
                  "--calib", "x.npy", "--damp", "0.02", "--gptq-block", "32", "--stats")
        me = g["run"]["rows"][0]["method"]
        if printed(out, "snr_db") != f"{me['snr_db']:.4f}":
            failures.append(f"gptq snr: cli {printed(out, 'snr_db')}, app {me['snr_db']}")
        if printed(out, "mse") != f"{me['mse']:.6g}":
            failures.append(f"gptq mse: cli {printed(out, 'mse')}, app {me['mse']}")
        err = re.search(r"gptq output error \|\|XW\^T - XQ\^T\|\| (\S+)", out)
        if not err or err.group(1) != f"{me['output_error']:.6g}":
            failures.append(f"gptq output error: cli {err and err.group(1)}, app "
                            f"{me['output_error']}")
        q = np.load(os.path.join(work, "g.npy")).ravel()
        tm = (t.get("teach") or {}).get("method")
        if not tm:
            failures.append("teaching view: no gptq codes shown")
        else:
            el = np.array(tm["elements"])
            if not np.array_equal(np.array(tm["qs"], dtype=np.float32), q[el]):
                failures.append("teaching view: gptq's values are not the CLI's")
            moved = int((np.array(tm["qs"]) != np.array(tm["nearest_qs"])).sum())
            if moved != tm["moved"]:
                failures.append(f"teaching view: {tm['moved']} moved reported, {moved} differ")
            if tm["moved_total"] <= 0:
                failures.append("gptq moved no code in the whole tensor")
    if "run" not in m:
        failures.append("mse: no result in the state")
    else:
        against_map("mse", m["run"], "mse", ["--four-over-six"])
        out = cli(binary, work, "cast", "w.npy", "m.npy", "--dtype", DT_NAME, "--method", "mse",
                  "--four-over-six", "--stats")
        if printed(out, "snr_db") != f"{m['run']['rows'][0]['method']['snr_db']:.4f}":
            failures.append(f"mse snr: cli {printed(out, 'snr_db')}")

    if "run" not in aw:
        failures.append("awq: no result in the state")
    else:
        against_map("awq", aw["run"], "awq", [])
        out = cli(binary, work, "cast", "w.npy", "a.npy", "--dtype", DT_NAME, "--method", "awq",
                  "--calib", "x.npy", "--stats")
        if printed(out, "snr_db") != f"{aw['run']['rows'][0]['method']['snr_db']:.4f}":
            failures.append(f"awq snr: cli {printed(out, 'snr_db')}")

    # Static groups and act-order ticked: GPTQ's scales are round to nearest's, so the nearest
    # codes are the plain cast's and every code GPTQ moved differs from it.
    s = state_of("static", base + ['click "Datatype::static groups"', 'click "Datatype::act-order"',
                                   "wait", "panel teach", f"teach-tile {TILE}", "frames 3",
                                   "state static_teach.json"])
    st = json.load(open(os.path.join(work, "static_teach.json")))
    cli(binary, work, "cast", "w.npy", "r.npy", "--dtype", DT_NAME)
    cli(binary, work, "cast", "w.npy", "gs.npy", "--dtype", DT_NAME, "--method", "gptq", "--calib",
        "x.npy", "--damp", "0.02", "--gptq-block", "32", "--static-groups", "--act-order")
    rq = np.load(os.path.join(work, "r.npy")).ravel()
    gq = np.load(os.path.join(work, "gs.npy")).ravel()
    sm = st["method"]
    if not (sm["static_groups"] and sm["act_order"]):
        failures.append(f"static groups / act-order not ticked: {sm}")
    tm = (st.get("teach") or {}).get("method")
    if not tm or "run" not in sm:
        failures.append("static: no gptq codes shown")
    else:
        el = np.array(tm["elements"])
        if not np.array_equal(np.array(tm["nearest_qs"], dtype=np.float32), rq[el]):
            failures.append("static groups: the nearest codes are not round to nearest's")
        if not np.array_equal(np.array(tm["qs"], dtype=np.float32), gq[el]):
            failures.append("static groups: gptq's values are not the CLI's")
        if tm["moved_total"] != int((gq != rq).sum()):
            failures.append(f"static groups: {tm['moved_total']} moved, the CLI's casts differ in "
                            f"{int((gq != rq).sum())}")

    # Synthetic calibration: its seed is recorded and decides the figures.
    syn = ["open w.npy", "wait", f'choose "Datatype::##preset" {DT_NAME}', "wait",
           'choose "Datatype::method" gptq', 'type "Datatype::tokens##calib" 96']
    s = state_of("synthetic", syn + [
        'type "Datatype::seed##calib" 7', "wait", "state syn7.json",
        'type "Datatype::seed##calib" 8', "wait", "state syn8.json",
        'type "Datatype::seed##calib" 7', "wait", "state syn7b.json"])
    runs = [json.load(open(os.path.join(work, f)))["method"] for f in
            ("syn7.json", "syn8.json", "syn7b.json")]
    if any("run" not in r for r in runs):
        failures.append("synthetic: a run is missing")
    else:
        a, b, c = (r["run"]["rows"][0]["method"]["out_relerr"] for r in runs)
        if runs[0]["calib"]["seed"] != 7 or runs[1]["calib"]["seed"] != 8:
            failures.append(f"synthetic seeds not recorded: {[r['calib'] for r in runs]}")
        if "seed 7" not in runs[0]["run"]["calib"] or runs[0]["run"]["tokens"] != 96:
            failures.append(f"synthetic calibration: {runs[0]['run']['calib']}, "
                            f"{runs[0]['run']['tokens']} tokens")
        if a != c or a == b:
            failures.append(f"synthetic seed 7 / 8 / 7 give output errors {a}, {b}, {c}")
    for f in failures:
        print("FAIL", f)
    print("method_views:", "ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
