"""Lazy models and exports through Python, against castscope-cli's files."""
import json
import os
import subprocess

import numpy as np
import pytest

import castscope

safetensors_numpy = pytest.importorskip("safetensors.numpy")

PLAN = {
    "default": "keep",
    "rules": [
        {"pattern": "*.norm.weight", "dtype": "keep"},
        {"pattern": "*.mlp.*", "dtype": "mxfp4e2", "rank": 2},
        {"pattern": "*", "dtype": "nvfp4", "rank": 2},
    ],
}


@pytest.fixture
def checkpoint(tmp_path, rng):
    tensors = {}
    for i in range(3):
        tensors[f"layers.{i}.mlp.up.weight"] = rng.standard_normal((64, 128), dtype=np.float32)
        tensors[f"layers.{i}.attn.q.weight"] = rng.standard_normal((32, 64), dtype=np.float32)
        tensors[f"layers.{i}.norm.weight"] = rng.standard_normal(64, dtype=np.float32)
    # safetensors, which every build reads (.npz needs libzip, an optional dependency).
    path = tmp_path / "model.safetensors"
    safetensors_numpy.save_file(tensors, str(path))
    return path, tensors


def test_open_model_is_lazy_and_exact(checkpoint):
    path, tensors = checkpoint
    m = castscope.open_model(path)
    assert m.format == "safetensors" and len(m) == len(tensors) and set(m) == set(tensors)
    t = m["layers.1.mlp.up.weight"]
    assert t.shape == (64, 128) and t.nbytes == 64 * 128 * 4
    assert np.array_equal(t.numpy(), tensors["layers.1.mlp.up.weight"])
    assert np.array_equal(np.asarray(m["layers.2.norm.weight"]), tensors["layers.2.norm.weight"])
    with pytest.raises(KeyError):
        m["nope"]
    with pytest.raises(castscope.Error, match="missing.safetensors"):
        castscope.open_model(path.parent / "missing.safetensors")


def test_export_equals_cli_and_reports_progress(cli, checkpoint, tmp_path):
    path, tensors = checkpoint
    seen = []
    rep = castscope.export(path, tmp_path / "py.safetensors", plan=PLAN, progress=seen.append)
    assert seen and seen[-1] == 1.0 and seen == sorted(seen)
    dtypes = {t["name"]: t["dtype"] for t in rep["tensors"]}
    assert dtypes["layers.0.mlp.up.weight"].startswith("e2m1")
    assert dtypes["layers.0.norm.weight"].startswith("keep")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    p = subprocess.run([cli, "export", str(path), str(tmp_path / "cli.safetensors"), "--plan",
                        str(plan), "-q"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "py.safetensors").read_bytes() == (tmp_path / "cli.safetensors").read_bytes()
    # A plan file and a dtype shortcut go through the same engine paths.
    castscope.export(path, tmp_path / "file.safetensors", plan=plan)
    assert (tmp_path / "file.safetensors").read_bytes() == (tmp_path / "cli.safetensors").read_bytes()
    exported = castscope.open_model(tmp_path / "py.safetensors")
    assert "layers.0.mlp.up.weight.scale" in exported


def test_export_stops_when_progress_raises(checkpoint, tmp_path):
    path, _ = checkpoint

    class Stop(Exception):
        pass

    def progress(f):
        raise Stop()

    out = tmp_path / "stopped.safetensors"
    with pytest.raises(Stop):
        castscope.export(path, out, plan="mxfp4e2", progress=progress)
    assert not out.exists() and os.listdir(tmp_path) == ["model.safetensors"]


def test_export_bad_plan_names_the_problem(checkpoint, tmp_path):
    path, _ = checkpoint
    with pytest.raises(castscope.Error, match="e9m9q"):
        castscope.export(path, tmp_path / "x.safetensors", plan={"default": "e9m9q", "rules": []})


def test_gemm_where_no_gpu():
    ok, reason = castscope.gemm_available()
    if ok:
        r = castscope.gemm("bf16", 512, 512, 512, iters=2)
        assert r["tflops"] > 0 and r["rel_error"] < 1e-2
    else:
        assert reason
        with pytest.raises(castscope.Error):
            castscope.gemm("bf16", 64, 64, 64)


def test_progress_callback_may_call_the_engine(checkpoint, tmp_path, rng):
    # The callback runs while the export holds the engine thread: a cast inside it runs inline.
    path, _ = checkpoint
    x = rng.standard_normal((4, 64), dtype=np.float32)
    ref = castscope.cast(x, "mxfp4e2")
    seen = []
    castscope.export(path, tmp_path / "out.safetensors", plan="nvfp4",
                     progress=lambda f: seen.append(castscope.cast(x, "mxfp4e2")))
    assert seen and all(np.array_equal(s, ref) for s in seen)
