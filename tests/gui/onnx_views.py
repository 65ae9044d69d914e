"""The mask and the teaching view on the tensor's view [outputs, reduction], operated by the mouse.

An ONNX graph built with the onnx package holds a Conv weight [16, 8, 3, 3] (view [16, 72]) and a
MatMul B stored [K, N] = [40, 96] (reduced over K: view [96, 40], the storage's transpose). For
each, a scripted session of the app picks the tensor in the browser by a click, hovers the mask
(its tooltip names element rows and columns of the view), clicks a tile of the tile map and
checks that the teaching view opened on that tile with a block of the tile's extent; the state
file then says the mask drew an image of the view's extent.

usage: onnx_views.py PATH/TO/castscope PATH/TO/castscope_gui_check WORKDIR
"""
import json
import os
import subprocess
import sys

import numpy as np
from app_session import prepare, run_app


def build(path, seed):
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(seed)

    def init(name, shape):
        # Student-t values: a heavy tail puts small values of many tiles under MXFP4's smallest
        # step, so the "cast to zero" mask has something to show.
        return nh.from_array((rng.standard_t(4, shape) * 0.1).astype(np.float32), name)

    nodes = [h.make_node("Conv", ["img", "conv_w"], ["c"], name="conv"),
             h.make_node("MatMul", ["x", "mm_w"], ["y"], name="mm")]
    inputs = [h.make_tensor_value_info("img", TP.FLOAT, [1, 8, 8, 8]),
              h.make_tensor_value_info("x", TP.FLOAT, [4, 40])]
    outputs = [h.make_tensor_value_info(n, TP.FLOAT, None) for n in ["c", "y"]]
    graph = h.make_graph(nodes, "views", inputs, outputs,
                         [init("conv_w", [16, 8, 3, 3]), init("mm_w", [40, 96])])
    onnx.save(h.make_model(graph), path)


# tensor, the view [outputs, reduction], the axis as the app describes it, the tile clicked
# (row, col of the tile grid) and so the teaching view's block [1, columns].
CASES = [("conv_w", [16, 72], "1..3:72", (13, 2), [1, 8]),
         ("mm_w", [96, 40], "0:40", (70, 1), [1, 8])]


def script_for(name, view, axis, tile):
    rows, cols = view[0], (view[1] + 31) // 32
    # The centre of the tile, as a fraction of the map (zoom 1: the map shows the whole grid).
    fx, fy = (tile[1] + 0.5) / cols, (tile[0] + 0.5) / rows
    return f"""open model.onnx
dtype mxfp4e2
wait
click "Tensors::###{name}"
frames 3
wait
expect analysis.tensor={name}
expect analysis.axis={axis}
expect analysis.view.0={view[0]}
expect analysis.view.1={view[1]}
expect views.mask.elements.0={view[0]}
expect views.mask.elements.1={view[1]}
hover "Views::mask" at 0.5 0.5
expect-tooltip rows
frames 2
click "Views::map" at {fx:.4f} {fy:.4f}
frames 4
expect teach_tile={tile[0] * cols + tile[1]}
frames 2
screenshot {name}.png
quit
"""


def main():
    app, checker, work = sys.argv[1:4]
    seed = prepare("onnx_views", work)
    if seed is None:
        return 77
    build(os.path.join(work, "model.onnx"), seed)
    failures = 0
    for name, view, axis, tile, block in CASES:
        _, state = run_app(app, work, name, script_for(name, view, axis, tile))
        cols = (view[1] + 31) // 32
        expect = [f"analysis.tensor={name}", f"analysis.tiles.0={view[0]}",
                  f"analysis.tiles.1={cols}", "analysis.mask_set.min=1",
                  "views.mask.drawn=true", f"views.mask.elements.0={view[0]}",
                  f"views.mask.elements.1={view[1]}", f"teach_tile={tile[0] * cols + tile[1]}",
                  f"teach_block.0={block[0]}", f"teach_block.1={block[1]}", f"png={name}.png"]
        r = subprocess.run([checker, state] + expect, cwd=work)
        if r.returncode:
            failures += 1
            print(f"onnx_views: {name}: the checker failed")
        msgs = json.load(open(state)).get("messages", [])
        bad = [m for m in msgs if "teaching view" in m or "outside" in m]
        if bad:
            failures += 1
            print(f"onnx_views: {name}: {bad}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
