#!/usr/bin/env python3
"""Compare two `castscope-cli map --json` outputs cell by cell (CPU against CUDA).

    compare_map.py cpu.json cuda.json

Counts, clipped fractions and max errors must be equal; SNR and relative error are sums of squares
added in another order on the device, so they may differ by 1e-9 relative (docs/performance.md,
"Model map sweep"). Prints how many cell figures were bit-equal; exits 1 on any other difference.
"""
import json
import sys

SUMS = {"value", "snr_db", "relerr"}


def main():
    a, b = (json.load(open(p)) for p in sys.argv[1:3])
    assert [c["datatype"] for c in a["columns"]] == [c["datatype"] for c in b["columns"]]
    assert [r["name"] for r in a["rows"]] == [r["name"] for r in b["rows"]], "rows differ"
    equal = near = bad = 0
    for ra, rb in zip(a["rows"], b["rows"]):
        for col, (ca, cb) in enumerate(zip(ra["cells"], rb["cells"])):
            for k in sorted(set(ca) | set(cb)):
                x, y = ca.get(k), cb.get(k)
                if x == y:
                    equal += 1
                elif (k in SUMS and isinstance(x, float) and isinstance(y, float)
                      and abs(x - y) <= 1e-9 * abs(x) + 1e-12):
                    near += 1
                else:
                    bad += 1
                    print(f"DIFF {ra['name']} {a['columns'][col]['datatype']} {k}: {x} vs {y}")
    print(f"{len(a['rows'])} rows x {len(a['columns'])} columns: {equal} figures bit-equal, "
          f"{near} sums within 1e-9 relative, {bad} different")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
