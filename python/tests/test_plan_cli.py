"""castscope-cli plan with --activations runtime, --inputs and --sensitivity: the CLI runs the
Python planner (python3 -m castscope.plan_table) and solves its table itself. Its choice, written
plan, JSON and Pareto CSV are checked against castscope.plan's on a tiny ONNX model, and its output
against the shape of the engine-only path's."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

castscope = pytest.importorskip(
    "castscope", reason="the castscope Python package is not importable (pip install .)")
onnx = pytest.importorskip("onnx", reason="onnx builds the test model (pip install onnx)")
pytest.importorskip("onnxruntime", reason="the runtime activations come from onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from conftest import needs_onnx_reader  # noqa: E402

pytestmark = needs_onnx_reader

CANDIDATES = ["mxfp4e2", "nvfp4", "mxfp6e2", "mxfp8e4"]


def three_layer_graph(rng, path):
    """x [batch, 8, 64] -> MatMul a -> Relu -> MatMul b -> Relu -> MatMul c: logits [.., 32]
    and their softmax. Heavy-tailed weights of different scales, so the tensors differ."""
    a = (rng.standard_t(3, (64, 128)) * 0.1).astype(np.float32)
    b = (rng.standard_normal((128, 96)) * 0.05).astype(np.float32)
    c = (rng.standard_t(5, (96, 32)) * 0.3).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "a"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["r1"]),
        helper.make_node("MatMul", ["r1", "b"], ["h2"]),
        helper.make_node("Relu", ["h2"], ["r2"]),
        helper.make_node("MatMul", ["r2", "c"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    g = helper.make_graph(
        nodes, "mlp3", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("probs", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, n) for n, w in (("a", a), ("b", b), ("c", c))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))


def run_plan(cli, *args, env=None):
    env = env or dict(os.environ, CASTSCOPE_PYTHON=sys.executable)
    return subprocess.run([cli, "plan", *map(str, args)], capture_output=True, text=True, env=env)


@pytest.fixture
def model(tmp_path, rng):
    path = tmp_path / "mlp3.onnx"
    three_layer_graph(rng, path)
    x = rng.standard_normal((2, 8, 64)).astype(np.float32)
    x[..., 3] *= 30  # an outlier channel: the activation form differs from the weight form
    np.save(tmp_path / "x.npy", x)
    return path, tmp_path / "x.npy"


@pytest.mark.parametrize("mode", ["runtime+sensitivity", "runtime", "synthetic+sensitivity"])
def test_cli_choice_equals_castscope_plan(cli, tmp_path, model, mode):
    path, x = model
    acts = mode.split("+")[0]
    sens = "sensitivity" in mode
    flags = ["--activations", acts, "--candidates", ",".join(CANDIDATES), "--device", "cpu"]
    if acts == "runtime":
        flags += ["--inputs", x]
    if sens:
        flags.append("--sensitivity")
    kw = dict(candidates=CANDIDATES, activations=acts, sensitivity=sens, device="cpu",
              inputs=str(x) if acts == "runtime" else None)
    curve = castscope.plan(path, **kw)["pareto"]
    assert len(curve) >= 3
    # Budgets between the curve's points and on them: the choice changes along the way.
    budgets = sorted({round(p["bits_per_weight"], 4) for p in curve} |
                     {round((p["bits_per_weight"] + q["bits_per_weight"]) / 2, 4)
                      for p, q in zip(curve, curve[1:])})
    budgets = budgets[:: max(1, len(budgets) // 6)]
    seen = set()
    for budget in budgets:
        r = castscope.plan(path, budget=budget, **kw)
        out = tmp_path / f"plan-{budget}.json"
        p = run_plan(cli, path, "--budget", budget, "--json", "-o", out, *flags)
        assert p.returncode == 0, p.stderr
        d = json.loads(p.stdout)
        assert [t["dtype"] for t in d["tensors"]] == r["choice"]["dtypes"]
        assert d["plan"]["bits"] == r["choice"]["bits"]
        assert d["plan"]["predicted_error"] == r["choice"]["error"]
        assert d["budget"]["bits"] == r["choice"]["budget_bits"]
        assert d["activations"] == r["table"]["activations"]
        # every candidate's predicted error, read back from the Python table bit for bit
        table = {t["name"]: t for t in r["table"]["tensors"]}
        for t in d["tensors"]:
            assert [o["predicted_error"] for o in t["options"]] == [
                o["error"] for o in table[t["tensor"]]["options"]]
        # the CLI records the budget as given (as its engine-only path does), Python as the
        # bits over the weights: the same budget, rounded down to whole bits
        written = json.loads(out.read_text())
        assert written["budget"].pop("bits_per_weight") == budget
        r["plan"]["budget"].pop("bits_per_weight")
        assert written == r["plan"]
        seen.add(tuple(r["choice"]["dtypes"]))
    assert len(seen) >= 3
    if sens:
        assert any(t["sensitivity"] != 1 for t in r["table"]["tensors"])
    p = run_plan(cli, path, "--pareto", "--csv", *flags)
    assert p.returncode == 0, p.stderr
    rows = p.stdout.strip().splitlines()
    assert rows[0] == "bits,bits_per_weight,predicted_error,chosen"
    assert [int(row.split(",")[0]) for row in rows[1:]] == [q["bits"] for q in curve]
    assert [float(row.split(",")[2]) for row in rows[1:]] == pytest.approx(
        [q["predicted_error"] for q in curve], rel=1e-8)


def test_cli_runtime_output_has_the_engine_paths_shape(cli, model):
    path, x = model
    common = ["--budget", "6", "--pareto", "--json", "--candidates", ",".join(CANDIDATES)]
    a = run_plan(cli, path, *common, "--activations", "runtime", "--inputs", x)
    b = run_plan(cli, path, *common)
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    da, db = json.loads(a.stdout), json.loads(b.stdout)

    def keys(o):
        if isinstance(o, dict):
            return {k: keys(v) for k, v in o.items()}
        if isinstance(o, list) and o:
            return [keys(o[0])]
        return type(o).__name__

    assert keys(da) == keys(db)
    assert da["activations"] == "model" and db["activations"] == "none"
    assert {t["predictor"] for t in da["tensors"]} == {"activations"}
    # what the runtime ran on, said on stderr
    assert any(l.startswith("inputs ") and "x.npy" in l for l in a.stderr.splitlines()), a.stderr
    # the text report and the CSV rows have the engine path's columns
    for fmt in ([], ["--csv"]):
        ta = run_plan(cli, path, "--budget", "6", *fmt, "--activations", "runtime")
        tb = run_plan(cli, path, "--budget", "6", *fmt)
        assert ta.returncode == 0, ta.stderr
        la, lb = ta.stdout.splitlines(), tb.stdout.splitlines()
        assert la[0] == lb[0] and len(la) == len(lb)


def test_cli_runtime_errors(cli, tmp_path, model):
    path, x = model
    # an activations file cannot be measured in a runtime alongside
    p = run_plan(cli, path, "--budget", "6", "--activations", x, "--sensitivity")
    assert p.returncode == 1 and "--activations" in p.stderr
    p = run_plan(cli, path, "--budget", "6", "--activations", "synthetic", "--inputs", x)
    assert p.returncode == 1 and "--inputs goes with" in p.stderr
    p = run_plan(cli, path, "--sensitivity")
    assert p.returncode == 1 and "go with --budget" in p.stderr
    # bad inputs: the Python planner's message, status 1
    np.save(tmp_path / "bad.npy", np.zeros((2, 8, 5), np.float32))
    p = run_plan(cli, path, "--budget", "6", "--inputs", tmp_path / "bad.npy")
    assert p.returncode == 1 and "error:" in p.stderr
    # a budget below the smallest plan: refused naming the smallest size
    p = run_plan(cli, path, "--budget", "1", "--activations", "runtime")
    assert p.returncode == 1 and "below the smallest plan" in p.stderr


def test_cli_plan_says_how_to_install_the_package(cli, tmp_path, model):
    path, _ = model
    fake = tmp_path / "py"
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
    fake.chmod(0o755)
    p = run_plan(cli, path, "--budget", "6", "--activations", "runtime",
                 env=dict(os.environ, CASTSCOPE_PYTHON=str(fake)))
    assert p.returncode == 1
    assert "cannot import the castscope Python package" in p.stderr and "pip install" in p.stderr
    # the engine-only path needs no Python
    p = run_plan(cli, path, "--budget", "6", env=dict(os.environ, CASTSCOPE_PYTHON=str(fake)))
    assert p.returncode == 0, p.stderr
