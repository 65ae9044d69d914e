"""The plan panel's Evaluate driven by the mouse and keyboard in a scripted session of the app
(docs/gui.md, "Scripted sessions"): a rule typed and assigned, the inputs typed, Evaluate
clicked; the result the panel shows equals castscope.evaluate of the same plan. Runs here, not
as a CTest session, because the button runs the installed castscope package."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import castscope

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from test_eval_onnx import mlp_graph  # noqa: E402


@pytest.fixture(scope="module")
def app(cli):
    path = os.environ.get("CASTSCOPE_APP") or os.path.join(os.path.dirname(cli), "castscope")
    if not os.path.exists(path):
        pytest.skip("the castscope app is not built (set CASTSCOPE_APP)")
    if not shutil.which("xvfb-run"):
        pytest.skip("xvfb-run is not installed")
    return path


def run_session(app, tmp_path, lines):
    script = tmp_path / "session.txt"
    script.write_text("\n".join(lines) + "\nquit\n")
    env = dict(os.environ, CASTSCOPE_PYTHON=sys.executable, XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    p = subprocess.run(["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", app, "--script",
                        str(script), "--state", str(tmp_path / "state.json")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads((tmp_path / "state.json").read_text())


def test_evaluate_clicked_shows_the_runtime_result(app, tmp_path, rng):
    model = tmp_path / "mlp.onnx"
    mlp_graph(rng, model)
    x = rng.standard_normal((2, 16, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    state = run_session(app, tmp_path, [
        f"open {model}",
        "hide views",
        "panel plan",
        "wait",
        'type "Per-layer plan::##pattern" w*',
        'type "Per-layer plan::##pdtype" mxfp4e2',
        'click "Per-layer plan::Assign"',
        "wait",
        f'type "Per-layer plan::##evalinputs" {tmp_path / "x.npy"}',
        'click "Per-layer plan::Evaluate"',
        "wait",
    ])
    ev = state["plan_evaluate"]
    assert not ev["running"] and ev["error"] == "", ev
    got = ev["result"]
    assert got["runtime"].startswith("onnxruntime") and not got["synthetic"]
    assert got["tensors_cast"] == 2
    want = castscope.evaluate(model, state["plan"], inputs=x, device="auto")
    assert got["bits_per_weight_cast"] == pytest.approx(want.size["bits_per_weight_cast"])
    by_name = {o["name"]: o for o in got["outputs"]}
    for o in want.outputs:
        shown = by_name[o["name"]]
        assert shown["snr_db"] == pytest.approx(o["snr_db"], rel=1e-9)
        if o.get("kl") is not None:
            assert shown["kl"] == pytest.approx(o["kl"], rel=1e-9)
            assert shown["top1"] == pytest.approx(o["top1"])


def test_evaluate_with_bad_inputs_shows_the_error(app, tmp_path, rng):
    model = tmp_path / "mlp.onnx"
    mlp_graph(rng, model)
    np.save(tmp_path / "bad.npy", np.zeros((2, 16, 63), np.float32))
    state = run_session(app, tmp_path, [
        f"open {model}",
        "hide views",
        "panel plan",
        "wait",
        f'type "Per-layer plan::##evalinputs" {tmp_path / "bad.npy"}',
        'click "Per-layer plan::Evaluate"',
        "wait",
    ])
    ev = state["plan_evaluate"]
    assert "result" not in ev
    assert "input 'x' has shape [2, 16, 63]" in ev["error"], ev
