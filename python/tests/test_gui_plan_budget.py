"""The plan panel's budget planner with activations from an inputs file and measured
sensitivities, driven by the mouse and keyboard in a scripted session of the app (docs/gui.md,
"Scripted sessions"): the plan it shows for a budget equals castscope.plan's. Runs here, not as a
CTest session, because the planner runs the castscope Python package."""
import os
import sys

import numpy as np
import pytest

castscope = pytest.importorskip(
    "castscope", reason="the castscope Python package is not importable (pip install .)")
pytest.importorskip("onnx", reason="onnx builds the test model (pip install onnx)")
pytest.importorskip("onnxruntime", reason="the runtime activations come from onnxruntime")
from test_gui_evaluate import app, run_session  # noqa: E402,F401  (the app fixture)
from test_plan_cli import three_layer_graph  # noqa: E402


@pytest.mark.parametrize("sensitivity", [False, True])
def test_budget_planner_from_inputs_equals_castscope_plan(app, tmp_path, rng, sensitivity):  # noqa: F811
    model = tmp_path / "mlp3.onnx"
    three_layer_graph(rng, model)
    x = rng.standard_normal((2, 8, 64)).astype(np.float32)
    x[..., 3] *= 30
    np.save(tmp_path / "x.npy", x)
    budget = 6.0
    lines = [
        f"open {model}",
        "hide views",
        "panel plan",
        "wait",
        'click "Per-layer plan::from inputs file"',
        f'type "Per-layer plan::##budgetinputs" {tmp_path / "x.npy"}',
    ]
    if sensitivity:
        lines.append('click "Per-layer plan::sensitivity"')
    lines += ['click "Per-layer plan::Plan"', "wait", f"plan-budget {budget}", "wait"]
    state = run_session(app, tmp_path, lines)
    b = state["budget_planner"]
    want = castscope.plan(model, budget=budget, inputs=str(tmp_path / "x.npy"),
                          sensitivity=sensitivity)
    assert b["tensors"] == len(want["table"]["tensors"]) == 3
    assert b["pick"]["feasible"] and b["pick"]["within"]
    # the same table (read back bit for bit) and the same solver: the same plan
    assert b["pick"]["error"] == want["choice"]["error"]
    assert b["pick"]["bpw"] == pytest.approx(want["choice"]["bits_per_weight"], rel=1e-15)
    assert b["curve_points"] >= 2
    # the weight form gives other errors: the runtime's activations were used
    plain = castscope.plan(model, budget=budget, activations="none")
    assert plain["choice"]["error"] != want["choice"]["error"]
