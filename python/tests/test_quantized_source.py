"""A quantized checkpoint through castscope.open_model: the stored format of each logical weight
and its dequantized values, against transformers' own fine-grained FP8 dequantization."""
import json

import numpy as np
import pytest

import castscope

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")
fp8 = pytest.importorskip("transformers.integrations.finegrained_fp8")


def test_block_fp8_weight_is_one_logical_weight(tmp_path, rng):
    w = torch.from_numpy(rng.standard_normal((256, 384), dtype=np.float32))
    s = w.reshape(2, 128, 3, 128).abs().amax((1, 3)) / 448
    q = (w / s.repeat_interleave(128, 0).repeat_interleave(128, 1)).to(torch.float8_e4m3fn)
    name = "model.layers.0.mlp.down_proj.weight"
    safetensors_torch.save_file({name: q, name + "_scale_inv": s.contiguous()},
                                str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "llama", "quantization_config": {"quant_method": "fp8",
                                                        "weight_block_size": [128, 128]}}))
    m = castscope.open_model(tmp_path)
    assert list(m) == [name]  # the scale is not offered as a tensor
    t = m[name]
    assert t.stored.convention == "fp8-block"
    assert t.stored.datatype == "e4m3fn_float32_t128_t128"
    assert t.stored.parts == [name, name + "_scale_inv"]
    assert t.stored.bits_per_weight == pytest.approx(8 * (256 * 384 + 6 * 4) / (256 * 384))
    want = fp8.Fp8Dequantize(None)._dequantize_one(q, s).numpy()
    assert np.array_equal(t.numpy().view(np.uint32), want.view(np.uint32))
