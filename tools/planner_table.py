#!/usr/bin/env python3
"""The measured table of docs/planning.md: `castscope-cli plan MODEL --budget B --json` at each
budget, with the uniform plans of the same candidates for comparison (their predicted errors come
from the same run's per-tensor options).

    python3 tools/planner_table.py CLI MODEL [--budgets 4.25,4.5,6,8.25] [-- PLAN-OPTIONS...]
"""
import argparse
import json
import subprocess
import sys
from collections import Counter


def run(cli, model, budget, extra):
    cmd = [cli, "plan", model, "--budget", str(budget), "--json"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cli")
    ap.add_argument("model")
    ap.add_argument("--budgets", default="4.25,4.5,6,8.25")
    a, extra = ap.parse_known_args()
    extra = [x for x in extra if x != "--"]
    print("| budget (bits/weight) | plan (bits/weight) | predicted error | datatypes | search nodes |")
    print("|---:|---:|---:|---|---:|")
    last = None
    for b in [float(x) for x in a.budgets.split(",")]:
        j = run(a.cli, a.model, b, extra)
        mix = Counter(t["dtype"] for t in j["tensors"])
        mix_s = ", ".join(f"{d} x{n}" for d, n in sorted(mix.items(), key=lambda kv: -kv[1]))
        p = j["plan"]
        print(f"| {b:g} | {p['bits_per_weight']:.4f} | {p['predicted_error']:.6g} | {mix_s} | "
              f"{p['search_nodes']} |")
        last = j
    # Uniform plans over the same tensors (a candidate that does not cast a tensor: no row).
    print()
    print("| uniform plan | bits/weight | predicted error |")
    print("|---|---:|---:|")
    values = last["values"]
    for c in last["candidates"]:
        bits = err = 0
        ok = True
        for t in last["tensors"]:
            o = [x for x in t["options"] if x["dtype"] == c]
            if not o:
                ok = False
                break
            bits += o[0]["bits"]
            err += o[0]["predicted_error"]
        if ok:
            print(f"| {c} | {bits / values:.4f} | {err:.6g} |")


if __name__ == "__main__":
    sys.exit(main())
