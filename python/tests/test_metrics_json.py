"""The one written form of metrics (engine/include/castscope/metrics_json.hpp) from Python and the
CLI: an exact cast is float('inf') in Python, and null with its exact flag in JSON."""
import json
import math
import subprocess

import numpy as np

import castscope
from castscope import eval as ceval


def test_eval_json_writes_snr_as_the_engine_does():
    d = ceval._clean({"outputs": [{"snr_db": math.inf, "out_snr_db": 3.5, "kl": math.nan,
                                   "weight_snr_db": -math.inf}]})
    o = d["outputs"][0]
    assert o["snr_db"] is None and o["exact"] is True
    assert o["out_snr_db"] == 3.5 and o["out_exact"] is False
    assert o["weight_snr_db"] is None and o["weight_exact"] is False
    assert o["kl"] is None
    json.dumps(d, allow_nan=False)  # valid JSON: no Infinity / NaN left


def test_python_and_cli_agree_on_exact_and_lossy_casts(cli, tmp_path, rng):
    x = (rng.standard_normal((16, 64)) * 3).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = subprocess.run([cli, "report", str(tmp_path / "x.npy"), "--dtype", "float32",
                          "--dtype", "nvfp4", "--json"], check=True, capture_output=True,
                         text=True).stdout
    results = json.loads(out)["tensors"][0]["results"]
    exact, lossy = results
    py_exact = castscope.metrics(x, castscope.cast(x, "float32"))
    py_lossy = castscope.metrics(x, castscope.cast(x, "nvfp4"))
    assert py_exact["snr_db"] == math.inf and py_exact["exact"] is True
    assert exact["snr_db"] is None and exact["exact"] is True
    assert lossy["exact"] is False and py_lossy["exact"] is False
    assert lossy["snr_db"] == py_lossy["snr_db"]
