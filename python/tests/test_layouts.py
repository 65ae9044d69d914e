"""Resolved quantization layouts through Python: the same layouts and figures as castscope-cli.

The models and their documented 2-D views come from tests/interop/layout_models.py (shared with
the CLI's layout test). For each model, every tensor's layout equals `castscope-cli inspect`'s,
`Model.map` equals `castscope-cli map` cell for cell, and `LazyTensor.cast` and the cast of the
documented view (a numpy reshape, axis named) give those figures too.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import castscope

from conftest import ROOT, SEED

pytest.importorskip("onnx")
pytest.importorskip("safetensors.numpy")
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
import layout_models as lm  # noqa: E402
from conftest import needs_onnx_reader  # noqa: E402

DTYPES = ["mxfp6e2", "nvfp4", "q4_k"]


def run_cli(cli, *args):
    return subprocess.run([cli, *args], check=True, capture_output=True, text=True).stdout


def check_model(cli, path, weights, expect):
    model = castscope.open_model(path)
    info = lm.inspect_json(lambda *a: run_cli(cli, *a), path)
    for t in model.tensors:
        want = info[t.name]["layout"]
        assert t.layout.name == want["name"], t.name
        assert t.layout.axis == want["axis"], t.name
        assert t.layout.reason == want["reason"], t.name
        assert t.layout.guessed == want["guessed"], t.name
        assert t.layout.conflict == want["conflict"], t.name
        assert list(t.view) == want["view"], t.name
    for name, e in expect.items():
        assert e.layout in model[name].layout.name, name
        assert not model[name].layout.guessed, name
    args = ["map", path, "--json", "--device", "cpu"]
    for d in DTYPES:
        args += ["--dtype", d]
    cli_rows = {r["name"]: r for r in json.loads(run_cli(cli, *args))["rows"]}
    py = model.map(DTYPES, device="cpu")
    assert [r["name"] for r in py["rows"]] == list(cli_rows), "rows differ from castscope-cli map"
    for r in py["rows"]:
        c = cli_rows[r["name"]]
        assert r["axis"] == c["axis"] and r["layout"] == c["layout"], r["name"]
        for d, got, want in zip(DTYPES, r["cells"], c["cells"]):
            assert got.get("snr_db") == want.get("snr_db"), (r["name"], d)
            if "error" in want:
                # Only a ggml type off a tensor's rows (a MatMul B's axis 0) is refused, by name.
                assert d == "q4_k" and r["axis"].startswith("0") and \
                    "q4_k quantizes blocks along the last axis" in want["error"], (r["name"], want)
                assert got.get("error") == want["error"], (r["name"], d)
                continue
            t = model[r["name"]]
            m = castscope.metrics(t.numpy(), t.cast(d, device="cpu"))
            assert m["snr_db"] == want["snr_db"], (r["name"], d, "LazyTensor.cast")
            if r["name"] in expect:
                e = expect[r["name"]]
                v = lm.view_of(weights[r["name"]], e)
                vm = castscope.metrics(v, castscope.cast(v, d, axis=0 if e.red == 0 else -1,
                                                         device="cpu"))
                assert vm["snr_db"] == want["snr_db"], (r["name"], d, "documented view")


@needs_onnx_reader
def test_onnx_graph_layouts(cli, tmp_path):
    p = str(tmp_path / "layouts.onnx")
    exp = lm.build_onnx(p, np.random.default_rng(SEED))
    check_model(cli, p, lm.onnx_weights(p), exp)
    shared = castscope.open_model(p)["shared_w"].layout
    assert shared.conflict and "Gemm" in shared.reason


def test_keras_layouts(cli, tmp_path):
    p = str(tmp_path / "keras.safetensors")
    exp = lm.build_keras(p, np.random.default_rng(SEED))
    check_model(cli, p, lm.safetensors_weights(p), exp)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_transformers_layouts(cli, tmp_path, arch):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    d = str(tmp_path / arch)
    exp = lm.build_gpt2(d, SEED) if arch == "gpt2" else lm.build_llama(d, SEED)
    check_model(cli, d, lm.safetensors_weights(d), exp)


def test_ppocr_layouts(cli):
    p = lm.ppocr_model()
    if not p:
        pytest.skip("PaddleOCR v4 recognizer unavailable (not in the models cache, no download)")
    exp = lm.onnx_expectations(p)
    model = castscope.open_model(p)
    assert model["linear_85.w_0"].layout.axis == "0"
    assert list(model["linear_85.w_0"].view) == [6625, 120]
    check_model(cli, p, lm.onnx_weights(p), exp)
