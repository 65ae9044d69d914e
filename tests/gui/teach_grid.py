"""The teaching view on two-level scales: the plotted values are grid points, "clipped" agrees.

For NVFP4 and other datatypes with a float32 tensor scale above their tile scales, the teaching
view must divide each element by the tile scale times the tensor scale, so every "rounded /
scale" value lies on the element grid (within the float32 rounding of the cast values); for
MXFP4 under the floor scale mode (values of |x / s| up to 8) it checks the clipped marks. For
each tile shown: the elements it marks clipped are those whose |x / scale| lies past the grid's
midpoint above its largest value (what rounds beyond it: a value in (6, 7) rounds to 6 and is
not clipped), their number equals the tile map's count for that tile, and the tile map's counts
add up to the cast's clipped count.

usage: teach_grid.py PATH/TO/castscope PATH/TO/castscope_gui_check WORKDIR
"""
import json
import os
import sys

import numpy as np
from app_session import begin, run_app

# datatype, scale mode, whether it has a tensor scale
FAMILIES = [("nvfp4", None, True),
            ("e3m2fnuz_e4m3fn_float32_t32", None, True),
            ("int4_e4m3fn_float32_t16", None, True),
            ("mxfp4e2", "floor", False)]
TILES = 24


def script(dtype, mode, work):
    lines = ["open data.npz", "wait", "tensor w", f"dtype {dtype}"]
    if mode:
        lines.append(f"scale-mode {mode}")
    lines += ["hide views", "panel teach", "wait"]
    for k in range(TILES):
        lines += [f"teach-tile {k}", "frames 2", f"state {os.path.join(work, f't{k}.json')}"]
    return "\n".join(lines + ["quit"]) + "\n"


def midmax(grid):
    # Halfway between the largest value and the next one the grid's top step would reach.
    return grid[-1] + (grid[-1] - grid[-2]) / 2


def main():
    started = begin("teach_grid")
    if started is None:
        return 77
    app, _checker, work, rng = started
    # Heavy tails, so that tiles hold both small values and ones near their tile's absmax.
    w = (rng.standard_t(3, (64, 96)) * 0.05).astype(np.float32)
    np.savez(os.path.join(work, "data.npz"), w=w)
    failures = []
    for dtype, mode, two_level in FAMILIES:
        name = dtype.replace("_", "")[:16]
        _, state = run_app(app, work, name, script(dtype, mode, work))
        s = json.load(open(state))
        if s.get("script_errors"):
            failures.append(f"{dtype}: {s['script_errors']}")
            continue
        a = s["analysis"]
        if a.get("tile_clipped_total") != a["clipped"]:
            failures.append(f"{dtype}: tiles' clipped {a.get('tile_clipped_total')} != cast's "
                            f"{a['clipped']}")
        marked = 0
        for k in range(TILES):
            t = json.load(open(os.path.join(work, f"t{k}.json"))).get("teach")
            if not t or t["tile"] != k:
                failures.append(f"{dtype}: tile {k} not shown")
                continue
            grid = np.array(t["grid"])
            qs, xs = np.array(t["qs"]), np.array(t["xs"])
            if two_level and t["tensor_scale"] == 1.0:
                failures.append(f"{dtype}: tile {k}: no tensor scale in the view's scale")
            # Each plotted code on the grid: the nearest grid point within float32's precision.
            near = grid[np.abs(qs[:, None] - grid[None, :]).argmin(axis=1)]
            off = np.abs(qs - near) > 2.0 ** -22 * np.maximum(np.abs(near), grid[grid > 0].min())
            if off.any():
                failures.append(f"{dtype}: tile {k}: {qs[off][:4]} are not on the grid")
            want = int((np.abs(xs) > midmax(grid)).sum())
            marked += want
            if t["clipped"] != want:
                failures.append(f"{dtype}: tile {k}: {t['clipped']} marked clipped, {want} "
                                f"lie past {midmax(grid)}")
            if t["tile_clipped"] >= 0 and t["tile_clipped"] != t["clipped"]:
                failures.append(f"{dtype}: tile {k}: tile map counts {t['tile_clipped']}, the "
                                f"view {t['clipped']}")
        print(f"teach_grid: {dtype}: {marked} clipped over {TILES} tiles, cast {a['clipped']}")
        if mode == "floor" and marked == 0:
            failures.append(f"{dtype}: nothing clipped in {TILES} tiles: the check saw no case")
    for f in failures:
        print("teach_grid:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
