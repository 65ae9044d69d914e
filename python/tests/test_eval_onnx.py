"""End-to-end evaluation of ONNX models: castscope.evaluate against onnxruntime run here on the
same graphs, and the weights onnxruntime ran read back and compared with castscope.cast."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import castscope

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from conftest import needs_onnx_reader  # noqa: E402

pytestmark = needs_onnx_reader

PLAN = {"default": "keep", "rules": [
    {"pattern": "w1", "dtype": "nvfp4"},
    {"pattern": "w2", "dtype": "mxfp4e2"},
    {"pattern": "conv.w", "dtype": "mxfp6e2"},
    {"pattern": "gemm.w", "dtype": "q4_0", "axis": -1},
]}


def mlp_graph(rng, path):
    """x [2, 16, 64] -> MatMul w1 (initializer) -> Relu -> MatMul w2 (Constant node) + b:
    logits [2, 16, 40] and their softmax."""
    w1 = (rng.standard_t(4, (64, 96)) * 0.2).astype(np.float32)
    w2 = (rng.standard_normal((96, 40)) * 0.3).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    nodes = [
        helper.make_node("Constant", [], ["w2"], value=numpy_helper.from_array(w2, "w2")),
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    g = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16, 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("probs", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return {"w1": w1, "w2": w2, "b": b}


def conv_graph(rng, path):
    """x [1, 3, 16, 16] -> Conv (conv.w [8, 3, 3, 3]) -> Relu -> GlobalAveragePool -> Flatten ->
    Gemm (gemm.w [10, 8], transB) -> scores [1, 10]."""
    cw = (rng.standard_normal((8, 3, 3, 3)) * 0.5).astype(np.float32)
    gw = rng.standard_normal((10, 8)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "conv.w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "gemm.w"], ["scores"], transB=1),
    ]
    g = helper.make_graph(
        nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(cw, "conv.w"), numpy_helper.from_array(gw, "gemm.w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return {"conv.w": cw, "gemm.w": gw}


def graph_weights(path):
    m = onnx.load(str(path))
    w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "Constant":
            w[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    return w


def ort_run(path, feeds):
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def reference_metrics(ref, out, probabilities):
    """SNR, KL(ref || out) and top-1 agreement over the last axis, written out here."""
    r, o = ref.astype(np.float64), out.astype(np.float64)
    snr = 10 * np.log10(np.sum(r ** 2) / np.sum((o - r) ** 2))
    r2, o2 = r.reshape(-1, r.shape[-1]), o.reshape(-1, o.shape[-1])
    if probabilities:
        p, q = r2, o2
    else:
        p = np.exp(r2 - r2.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        q = np.exp(o2 - o2.max(-1, keepdims=True))
        q /= q.sum(-1, keepdims=True)
    kl = np.mean(np.sum(p * (np.log(np.maximum(p, 1e-30)) - np.log(np.maximum(q, 1e-30))), -1))
    top1 = np.mean(r2.argmax(-1) == o2.argmax(-1))
    return snr, kl, top1


def expected_cast(model_path, name, w, rule):
    """What castscope-cli casts: along the tensor's resolved layout unless the rule names an axis
    (a MatMul weight [K, N] reduces over K, axis 0)."""
    if rule.get("axis", "auto") == "auto":
        return castscope.open_model(model_path)[name].cast(rule["dtype"])
    return castscope.cast(w, rule["dtype"], axis=rule["axis"])


def test_mlp_outputs_match_onnxruntime_and_weights_match_cast(tmp_path, rng):
    path = tmp_path / "mlp.onnx"
    weights = mlp_graph(rng, path)
    x = rng.standard_normal((2, 16, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    q_path = tmp_path / "mlp.q.onnx"
    r = castscope.evaluate(path, PLAN, inputs=tmp_path / "x.npy", device="cpu",
                           save_quantized=q_path)
    assert not r.synthetic and r.format == "onnx" and r.device == "cpu"

    # The weights onnxruntime ran, bit for bit against castscope.cast; the rest untouched.
    ran = graph_weights(q_path)
    rules = {rule["pattern"]: rule for rule in PLAN["rules"]}
    for name in ("w1", "w2"):
        want = expected_cast(path, name, weights[name], rules[name])
        assert np.array_equal(ran[name].view(np.uint32), want.view(np.uint32)), name
        assert not np.array_equal(ran[name], weights[name])
    assert np.array_equal(ran["b"], weights["b"])
    assert {t["name"] for t in r.tensors} == {"w1", "w2"}

    # The outputs, from onnxruntime run here on both graphs.
    ref, out = ort_run(path, {"x": x}), ort_run(q_path, {"x": x})
    by_name = {o["name"]: o for o in r.outputs}
    for name, probs in (("logits", False), ("probs", True)):
        snr, kl, top1 = reference_metrics(ref[name], out[name], probs)
        o = by_name[name]
        assert o["distribution"] == ("probabilities" if probs else "logits")
        assert o["snr_db"] == pytest.approx(snr, rel=1e-6)
        assert o["kl"] == pytest.approx(kl, rel=1e-4, abs=1e-9)
        assert o["top1"] == pytest.approx(top1)
        assert 0 < o["kl"] and np.isfinite(o["snr_db"])
    # logits and their softmax are the same distribution
    assert by_name["probs"]["kl"] == pytest.approx(by_name["logits"]["kl"], rel=1e-3)
    assert r.kl == by_name["logits"]["kl"]
    # bits per weight at each tensor's resolved axis length: both are MatMul weights [K, N], cast
    # along K: nvfp4 on 64 (4.5), mxfp4 on 96 (three whole blocks of 32: 4.25). A partial block
    # carries a whole scale (rows of 40: two blocks, 4.4). The size is the exact storage:
    # NVFP4's float32 tensor scale adds 32 bits once.
    b1 = castscope.DataType("nvfp4").bits_per_value(64)
    b2 = castscope.DataType("mxfp4e2").bits_per_value(96)
    assert b2 == pytest.approx(4.25)
    assert castscope.DataType("mxfp4e2").bits_per_value(40) == pytest.approx(4 + 16 / 40)
    n1, n2 = 64 * 96, 96 * 40
    assert r.size["bits_per_weight_cast"] == pytest.approx((b1 * n1 + 32 + b2 * n2) / (n1 + n2))


def test_conv_weights_cast_on_the_resolved_axis(tmp_path, rng):
    path = tmp_path / "conv.onnx"
    weights = conv_graph(rng, path)
    x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.savez(tmp_path / "x.npz", x=x)
    q_path = tmp_path / "conv.q.onnx"
    r = castscope.evaluate(path, PLAN, inputs=str(tmp_path / "x.npz"), save_quantized=q_path,
                           device="cpu")
    ran = graph_weights(q_path)
    rules = {rule["pattern"]: rule for rule in PLAN["rules"]}
    for name in ("conv.w", "gemm.w"):
        want = expected_cast(path, name, weights[name], rules[name])
        assert np.array_equal(ran[name], want), name
    # a conv weight [O, I, kh, kw] is cast over I*kh*kw (axes 1..3 flattened): not the same as
    # casting its last axis
    assert not np.array_equal(ran["conv.w"], castscope.cast(weights["conv.w"], "mxfp6e2", axis=-1))
    axes = {t["name"]: t["axis"] for t in r.tensors}
    assert axes["conv.w"] == "1..3:27" and axes["gemm.w"] == "-1:8"
    ref, out = ort_run(path, {"x": x}), ort_run(q_path, {"x": x})
    snr, kl, top1 = reference_metrics(ref["scores"], out["scores"], False)
    assert r.outputs[0]["snr_db"] == pytest.approx(snr, rel=1e-6)
    assert r.outputs[0]["kl"] == pytest.approx(kl, rel=1e-4, abs=1e-12)


def test_keep_plan_changes_nothing(tmp_path, rng):
    path = tmp_path / "mlp.onnx"
    mlp_graph(rng, path)
    r = castscope.evaluate(path, {"default": "keep"}, device="cpu")
    assert r.size["tensors_cast"] == 0
    for o in r.outputs:
        assert o["snr_db"] == float("inf") and o["kl"] == 0 and o["top1"] == 1


def test_synthetic_inputs_are_seeded_and_reported(tmp_path, rng):
    path = tmp_path / "mlp.onnx"
    mlp_graph(rng, path)
    a = castscope.evaluate(path, "nvfp4", seed=3, device="cpu")
    b = castscope.evaluate(path, "nvfp4", seed=3, device="cpu")
    c = castscope.evaluate(path, "nvfp4", seed=4, device="cpu")
    assert a.synthetic and "synthetic" in a.inputs["description"]
    assert a.inputs["shapes"] == {"x": [1, 16, 64]}  # the dynamic batch axis at 1
    assert a.kl == b.kl and a.kl != c.kl


def test_bad_inputs_are_named(tmp_path, rng):
    path = tmp_path / "mlp.onnx"
    mlp_graph(rng, path)
    bad_shape = rng.standard_normal((2, 15, 64)).astype(np.float32)
    with pytest.raises(castscope.Error, match=r"input 'x' has shape \[2, 15, 64\].*axis 1 must be 16"):
        castscope.evaluate(path, "nvfp4", inputs=bad_shape)
    with pytest.raises(castscope.Error, match=r"input 'x' is float64; the model takes float32"):
        castscope.evaluate(path, "nvfp4", inputs=bad_shape.astype(np.float64))
    with pytest.raises(castscope.Error, match=r"\[2, 15, 64, 1\] \(rank 4\); the model takes rank 3"):
        castscope.evaluate(path, "nvfp4", inputs=bad_shape[..., None])
    np.savez(tmp_path / "wrong.npz", y=bad_shape)
    with pytest.raises(castscope.Error, match=r"missing x.*no input named y"):
        castscope.evaluate(path, "nvfp4", inputs=tmp_path / "wrong.npz")
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    with pytest.raises(castscope.Error, match=r"junk.npy.*not a readable"):
        castscope.evaluate(path, "nvfp4", inputs=tmp_path / "junk.npy")
    with pytest.raises(castscope.Error, match=r"does not exist"):
        castscope.evaluate(tmp_path / "nothing.onnx", "nvfp4")
    with pytest.raises(castscope.Error, match=r"unknown|datatype"):
        castscope.evaluate(path, "nvfp4", act_dtype="fp99")


def test_model_the_runtime_cannot_load(tmp_path, rng):
    # A well-formed protobuf whose operator onnxruntime does not have.
    g = helper.make_graph([helper.make_node("NoSuchOp", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                          [numpy_helper.from_array(np.ones((4, 4), np.float32), "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "bad.onnx"))
    with pytest.raises(castscope.Error, match=r"onnxruntime cannot load '.*bad.onnx'"):
        castscope.evaluate(tmp_path / "bad.onnx", "nvfp4")
    (tmp_path / "trunc.onnx").write_bytes(b"\x08\x07\x12")
    with pytest.raises(castscope.Error, match=r"cannot load '.*trunc.onnx'"):
        castscope.evaluate(tmp_path / "trunc.onnx", "nvfp4")


def test_progress_and_cancel(tmp_path, rng):
    path = tmp_path / "mlp.onnx"
    mlp_graph(rng, path)
    seen = []
    castscope.evaluate(path, "nvfp4", progress=lambda p, stage: seen.append((p, stage)))
    fr = [p for p, _ in seen]
    assert fr == sorted(fr) and fr[0] == 0 and fr[-1] == 1
    assert {"casting weights", "running the original model", "running the quantized model"} <= {
        s for _, s in seen}
    calls = []
    with pytest.raises(castscope.Cancelled):
        castscope.evaluate(path, "nvfp4", cancel=lambda: len(calls) > 2 or calls.append(1))


def run_cli(cli, *args, env=None):
    return subprocess.run([cli, "eval", *map(str, args)], capture_output=True, text=True,
                          env=env)


def test_cli_eval_json_csv_and_errors(cli, tmp_path, rng):
    path = tmp_path / "mlp.onnx"
    mlp_graph(rng, path)
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    x = rng.standard_normal((3, 16, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    env = dict(os.environ, CASTSCOPE_PYTHON=sys.executable)
    p = run_cli(cli, path, "--plan", tmp_path / "plan.json", "--inputs", tmp_path / "x.npy",
                "--json", "--device", "cpu", env=env)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    r = castscope.evaluate(path, tmp_path / "plan.json", inputs=x, device="cpu")
    assert d["kl"] == pytest.approx(r.kl, rel=1e-12) and d["top1"] == r.top1
    assert d["inputs"]["synthetic"] is False and d["size"]["tensors_cast"] == 2
    p = run_cli(cli, path, "--plan", tmp_path / "plan.json", "--csv", env=env)
    assert p.returncode == 0, p.stderr
    rows = p.stdout.strip().splitlines()
    assert rows[0].startswith("model,plan,output,shape,snr_db,kl,top1") and len(rows) == 3
    assert rows[1].endswith(",1")  # synthetic inputs
    # bad inputs: status 1 and the message
    p = run_cli(cli, path, "--plan", "nvfp4", "--inputs", tmp_path / "plan.json", env=env)
    assert p.returncode == 1 and "not a readable" in p.stderr
    p = run_cli(cli, path, "--plan", "nvfp4", "--json", "--csv", env=env)
    assert p.returncode == 2


def test_cli_eval_says_how_to_install_the_package(cli, tmp_path):
    # An interpreter that cannot import the package (isolated: no site-packages, no PYTHONPATH).
    fake = tmp_path / "py"
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
    fake.chmod(0o755)
    p = run_cli(cli, tmp_path / "m.onnx", "--plan", "nvfp4",
                env=dict(os.environ, CASTSCOPE_PYTHON=str(fake)))
    assert p.returncode == 1
    assert "cannot import the castscope Python package" in p.stderr and "pip install" in p.stderr
