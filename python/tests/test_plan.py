"""castscope.plan: the budget planner with activations from the model's own runtime. The
predicted errors are recomputed here from the activations onnxruntime / PyTorch give and the
weights castscope.cast gives; the choice is checked against brute force over the table, and a
budget below the smallest plan is refused naming the smallest size."""
import itertools

import numpy as np
import pytest

import castscope

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from test_eval_onnx import conv_graph, mlp_graph  # noqa: E402
from conftest import needs_onnx_reader  # noqa: E402

CANDIDATES = ["mxfp4e2", "mxfp6e2", "mxfp8e4"]


def relative_output_error(x, w_rows, q_rows):
    """||X (Q - W)^T||^2 / ||X W^T||^2 in float64; W and Q as [out, in]."""
    x = x.astype(np.float64)
    e = x @ (q_rows.astype(np.float64) - w_rows).T
    y = x @ w_rows.astype(np.float64).T
    return float(np.sum(e ** 2) / np.sum(y ** 2))


def im2col(x, kh, kw, pad):
    """Rows [N * H' * W', C * kh * kw] of a stride-1 conv input, written out with loops."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    rows = []
    for b in range(n):
        for i in range(h + 2 * pad - kh + 1):
            for j in range(w + 2 * pad - kw + 1):
                rows.append(xp[b, :, i:i + kh, j:j + kw].reshape(-1))
    return np.array(rows)


def brute_force(table, cap):
    best = None
    groups = [t["options"] for t in table["tensors"]]
    for combo in itertools.product(*groups):
        bits = sum(o["bits"] for o in combo)
        err = sum(o["error"] for o in combo)
        if bits <= cap and (best is None or err < best):
            best = err
    return best


@needs_onnx_reader
def test_onnx_plan_from_runtime_activations(tmp_path, rng):
    path = tmp_path / "mlp.onnx"
    w = mlp_graph(rng, path)
    x = rng.standard_normal((2, 16, 64)).astype(np.float32)
    x[..., 5] *= 25  # an outlier channel: the activation form weighs its weight row
    r = castscope.plan(path, budget=5.5, candidates=CANDIDATES, inputs=x, points=16)
    t = {e["name"]: e for e in r["table"]["tensors"]}
    assert set(t) == {"w1", "w2"}
    assert r["table"]["activations"] == "model" and r["table"]["error"] == "relative"
    assert r["inputs"] == "given arrays"
    hidden = np.maximum(x.reshape(-1, 64) @ w["w1"], 0)
    model = castscope.open_model(path)
    for name, acts in (("w1", x.reshape(-1, 64)), ("w2", hidden)):
        assert t[name]["predictor"] == "activations"
        assert t[name]["axis"] == "0"  # MatMul B [K, N]: reduced over K
        for o in t[name]["options"]:
            q = model[name].cast(o["dtype"])
            want = relative_output_error(acts, w[name].T, q.T)
            assert o["error"] == pytest.approx(want, rel=1e-3), (name, o["dtype"])
    # The exact optimum of the table, and the curve's points each optimal at their size.
    assert r["choice"]["bits"] <= r["choice"]["budget_bits"]
    best = brute_force(r["table"], r["choice"]["budget_bits"])
    assert r["choice"]["error"] == pytest.approx(best)
    assert len(r["pareto"]) >= 2 and sum(p["chosen"] for p in r["pareto"]) == 1
    for a, b in zip(r["pareto"], r["pareto"][1:]):
        assert a["bits"] < b["bits"] and a["predicted_error"] > b["predicted_error"]
    for p in r["pareto"]:
        assert p["predicted_error"] == pytest.approx(brute_force(r["table"], p["bits"]))
    # The plan is a plan: every tensor to its chosen datatype, and evaluate runs it.
    rules = {ru["pattern"]: str(castscope.DataType(ru["dtype"])) for ru in r["plan"]["rules"]}
    assert rules == {e["name"]: str(castscope.DataType(d))
                     for e, d in zip(r["table"]["tensors"], r["choice"]["dtypes"])}
    ev = castscope.evaluate(path, r["plan"], inputs=x, device="cpu")
    assert ev["size"]["tensors_cast"] == 2


@needs_onnx_reader
def test_conv_and_gemm_activations(tmp_path, rng):
    path = tmp_path / "conv.onnx"
    w = conv_graph(rng, path)
    x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
    r = castscope.plan(path, candidates=CANDIDATES, inputs=x, rows=1000, points=4)
    assert r["plan"] is None and r["choice"] is None
    t = {e["name"]: e for e in r["table"]["tensors"]}
    model = castscope.open_model(path)
    patches = im2col(x, 3, 3, 1)
    # The Gemm reads the pooled map: taken from onnxruntime.
    sess = onnx.load(str(path))
    sess.graph.output.append(onnx.ValueInfoProto(name="f"))
    f = ort.InferenceSession(sess.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        ["f"], {"x": x})[0]
    for name, acts, rows_of in (("conv.w", patches, lambda a: a.reshape(8, -1)),
                                ("gemm.w", f, lambda a: a)):
        assert t[name]["predictor"] == "activations", name
        for o in t[name]["options"]:
            q = model[name].cast(o["dtype"])
            want = relative_output_error(acts, rows_of(w[name]), rows_of(q))
            assert o["error"] == pytest.approx(want, rel=1e-3), (name, o["dtype"])


@needs_onnx_reader
def test_without_activations_and_refusal(tmp_path, rng):
    path = tmp_path / "mlp.onnx"
    w = mlp_graph(rng, path)
    r = castscope.plan(path, budget=8.25, candidates=CANDIDATES, activations="none", points=0)
    assert r["pareto"] == []
    for e in r["table"]["tensors"]:
        assert e["predictor"] == "weights"
        q = {o["dtype"]: o for o in e["options"]}
        cast = castscope.open_model(path)[e["name"]].cast("mxfp4e2")
        want = np.sum((cast.astype(np.float64) - w[e["name"]]) ** 2) / np.sum(
            w[e["name"]].astype(np.float64) ** 2)
        assert q["mxfp4e2"]["error"] == pytest.approx(want, rel=1e-6)
    # Synthesized inputs are said so.
    assert "synthetic" in castscope.plan(path, candidates=CANDIDATES, points=0)["inputs"]
    small = castscope.plan(path, candidates=CANDIDATES, activations="none", points=0)["table"]
    min_bits = sum(min(o["bits"] for o in e["options"]) for e in small["tensors"])
    with pytest.raises(castscope.Error, match=r"smallest plan the candidates allow: 4\.25\d* "
                       r"bits per weight \(%d bytes\)" % ((min_bits + 7) // 8)):
        castscope.plan(path, budget_bytes=min_bits // 8 - 1, candidates=CANDIDATES,
                       activations="none")
    with pytest.raises(castscope.Error, match="runtime, synthetic or none"):
        castscope.plan(path, budget=5, activations="bogus")
    with pytest.raises(castscope.Error, match="does not exist"):
        castscope.plan(tmp_path / "missing.onnx", budget=5)


def test_hf_gpt2_conv1d_activations_from_hooks(tmp_path, rng):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(int(rng.integers(1 << 30)))
    m = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=96, n_embd=64, n_layer=1, n_head=4, n_positions=64, bos_token_id=0,
        eos_token_id=0))
    m.save_pretrained(tmp_path)
    ids = rng.integers(0, 96, size=(1, 24)).astype(np.int64)
    r = castscope.plan(tmp_path, budget=6, candidates=CANDIDATES, inputs=ids, points=0)
    t = {e["name"]: e for e in r["table"]["tensors"]}
    fc = "transformer.h.0.mlp.c_fc.weight"
    assert t[fc]["predictor"] == "activations" and t[fc]["axis"] == "0"
    # The hook's input of c_fc: ln_2 of the block's residual, recomputed here.
    seen = {}

    def keep_input(module, args):
        seen["x"] = args[0].detach().reshape(-1, 64).numpy().copy()

    h = m.transformer.h[0].mlp.c_fc.register_forward_pre_hook(keep_input)
    with torch.no_grad():
        m.eval()(input_ids=torch.from_numpy(ids))
    h.remove()
    wfc = m.transformer.h[0].mlp.c_fc.weight.detach().numpy()  # [in, out]
    model = castscope.open_model(tmp_path)
    for o in t[fc]["options"]:
        q = model[fc].cast(o["dtype"])
        want = relative_output_error(seen["x"], wfc.T, np.asarray(q).T)
        assert o["error"] == pytest.approx(want, rel=1e-3), o["dtype"]


@needs_onnx_reader
def test_sensitivity_is_the_measured_output_divergence(tmp_path, rng):
    """With sensitivity, each tensor's largest-error candidate is predicted at exactly the KL
    that castscope.evaluate measures with only that tensor cast to it."""
    path = tmp_path / "mlp.onnx"
    mlp_graph(rng, path)
    x = rng.standard_normal((2, 16, 64)).astype(np.float32)
    r = castscope.plan(path, budget=6, candidates=CANDIDATES, inputs=x, sensitivity=True,
                       points=0)
    for e in r["table"]["tensors"]:
        assert e["sensitivity"] > 0
        probe = max(e["options"], key=lambda o: o["error"])
        ev = castscope.evaluate(path, {"default": "keep", "rules": [
            {"pattern": e["name"], "dtype": probe["dtype"]}]}, inputs=x, device="cpu")
        kl = np.mean([o["kl"] for o in ev.outputs if o.get("kl") is not None])
        assert probe["error"] == pytest.approx(kl, rel=1e-6), e["name"]


def test_checkpoints_without_a_runtime_plan_from_weights():
    """A checkpoint no runtime runs (here the demo layer, .npy) is planned from its weights;
    a sensitivity for it is refused by name."""
    import os

    layer = os.path.join(os.path.dirname(__file__), "..", "..", "assets", "demo_layer.npy")
    r = castscope.plan(layer, budget=6.3, candidates=CANDIDATES, points=8)
    assert [e["predictor"] for e in r["table"]["tensors"]] == ["weights"]
    assert r["choice"]["bits_per_weight"] <= 6.3 and r["inputs"] is None
    s = castscope.plan(layer, budget=6.3, candidates=CANDIDATES, activations="synthetic", points=0)
    assert s["table"]["tensors"][0]["predictor"] == "activations"
    with pytest.raises(castscope.Error, match="ONNX and Hugging Face models only"):
        castscope.plan(layer, budget=6.3, sensitivity=True)
