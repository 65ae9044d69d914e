"""Evaluation of a plan with methods on the tiny Llama of test_eval_hf: the weights PyTorch ran are
castscope.quantize's with each rule's method and the calibration given, bit for bit, unlike the
round-to-nearest plan's; the outputs are those of a model holding exactly those weights."""
import os
import subprocess
import sys

import numpy as np
import pytest

import castscope

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_eval_hf import load, make_model, torch_metrics  # noqa: E402

DT = "mxfp4e2"  # gptq, on the MLP
ATT = "nvfp4"  # mse, on the attention projections (its float block scales leave room to search)


def calibration(src, rng):
    """Correlated inputs [tokens, in] for every Linear weight but the head, keyed by name."""
    calib = {}
    for name, w in src.items():
        if w.dim() == 2 and "embed" not in name and "lm_head" not in name:
            x = rng.standard_normal((128, w.shape[1])).astype(np.float32)
            x[:, 1:] += 0.8 * x[:, :-1]
            calib[name] = x
    return calib


def test_method_plan_runs_its_method(tmp_path, rng):
    path = make_model("llama", tmp_path / "llama", rng)
    src = safetensors_torch.load_file(str(path / "model.safetensors"))
    calib = calibration(src, rng)
    cfile = tmp_path / "calib.safetensors"
    safetensors_torch.save_file({k: torch.from_numpy(v) for k, v in calib.items()}, str(cfile))
    ids = rng.integers(0, 96, size=(2, 24)).astype(np.int64)
    np.save(tmp_path / "ids.npy", ids)
    rules = [{"pattern": "*embed*", "dtype": "keep"}, {"pattern": "lm_head*", "dtype": "keep"},
             {"pattern": "*mlp*", "dtype": DT, "method": "gptq", "method_options": {"damp": 0.02}},
             {"pattern": "*", "dtype": ATT, "rank": 2, "method": "mse"}]
    plan = {"default": "keep", "rules": rules}
    saved = tmp_path / "ran.safetensors"
    r = castscope.evaluate(path, plan, inputs=tmp_path / "ids.npy", device="cpu",
                           save_quantized=saved, calib=cfile)
    rtn_saved = tmp_path / "rtn.safetensors"
    r_rtn = castscope.evaluate(path, {"default": "keep", "rules": [
        {"pattern": "*embed*", "dtype": "keep"}, {"pattern": "lm_head*", "dtype": "keep"},
        {"pattern": "*mlp*", "dtype": DT}, {"pattern": "*", "dtype": ATT, "rank": 2}]}, inputs=tmp_path / "ids.npy", device="cpu",
        save_quantized=rtn_saved)
    ran = safetensors_torch.load_file(str(saved))
    ran_rtn = safetensors_torch.load_file(str(rtn_saved))
    checked = 0
    for name, x in calib.items():
        gptq = "mlp" in name
        want = castscope.quantize(src[name].numpy(), DT if gptq else ATT, method="gptq" if gptq else "mse",
                                  calib=x if gptq else None, damp=0.02, name=name)
        assert np.array_equal(ran[name].numpy().view(np.uint32), np.asarray(want).view(np.uint32)), name
        assert not torch.equal(ran[name], ran_rtn[name]), name
        checked += 1
    assert checked == 14  # 7 Linear weights in each of 2 layers
    # The outputs are those of the model holding exactly the weights that ran.
    t_ids = torch.from_numpy(ids)
    ref_m, q_m = load(path), load(path)
    q_m.load_state_dict(ran, strict=False)
    with torch.no_grad():
        ref = torch.cat([ref_m(input_ids=t_ids[i:i + 1]).logits for i in range(2)])
        out = torch.cat([q_m(input_ids=t_ids[i:i + 1]).logits for i in range(2)])
    kl, top1, _ = torch_metrics(ref, out, t_ids)
    assert r.kl == pytest.approx(kl, rel=1e-4) and r.kl > 0
    assert r.top1 == pytest.approx(top1)
    assert r.kl != r_rtn.kl
    # gptq without calibration: refused naming the weight.
    with pytest.raises(castscope.Error, match=r"gptq of 'model\.layers\.0\.mlp\..*' needs calibration"):
        castscope.evaluate(path, plan, inputs=tmp_path / "ids.npy", device="cpu")
    # The CLI passes --calib through to the same evaluation.
    cli = os.environ.get("CASTSCOPE_CLI")
    if cli:
        import json
        pfile = tmp_path / "plan.json"
        pfile.write_text(json.dumps(plan))
        out = subprocess.run([cli, "eval", str(path), "--plan", str(pfile), "--inputs",
                              str(tmp_path / "ids.npy"), "--device", "cpu", "--calib", str(cfile),
                              "--json"], capture_output=True, text=True, check=True).stdout
        assert json.loads(out)["kl"] == pytest.approx(r.kl, rel=1e-9)
