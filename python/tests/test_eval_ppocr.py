"""A real model end to end: PaddleOCR v4's text recognizer (ch_PP-OCRv4_rec_infer.onnx, from the
rapidocr-onnxruntime wheel that scripts/setup.sh fetches) on text lines rendered with Pillow."""
import os

import numpy as np
import pytest

import castscope

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
Image = pytest.importorskip("PIL.Image")
from onnx import numpy_helper  # noqa: E402
from PIL import ImageDraw, ImageFont  # noqa: E402

NAME = "ch_PP-OCRv4_rec_infer.onnx"
LINES = ["CastScope 4.25 bits", "quantization error", "MXFP4 NVFP4 Q4_K"]


@pytest.fixture(scope="module")
def model():
    path = os.environ.get("CASTSCOPE_PPOCR_REC") or os.path.join(
        os.environ.get("CASTSCOPE_TEST_MODELS", os.path.expanduser("~/.cache/castscope/models")), NAME)
    if not os.path.exists(path):
        if os.environ.get("CI"):
            pytest.fail(f"{NAME} not found at {path}: scripts/setup.sh downloads it")
        pytest.skip(f"{NAME} not found at {path} (scripts/setup.sh downloads it)")
    return path


def text_lines(seed):
    """Black text on white, 48 x 320, normalized as PaddleOCR feeds its recognizer."""
    rng = np.random.default_rng(seed)
    font = ImageFont.load_default(size=30)
    out = []
    for s in LINES:
        img = Image.new("RGB", (320, 48), (255, 255, 255))
        ImageDraw.Draw(img).text((int(rng.integers(2, 12)), 6), s, fill=(0, 0, 0), font=font)
        a = np.asarray(img, dtype=np.float32) / 255.0
        out.append(((a - 0.5) / 0.5).transpose(2, 0, 1))
    return np.stack(out).astype(np.float32)


def constants(path):
    m = onnx.load(path)
    return {n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in m.graph.node
            if n.op_type == "Constant" and n.attribute[0].name == "value"}


PLAN = {"default": "keep", "rules": [{"pattern": "*", "dtype": "DT", "rank": 2},
                                     {"pattern": "*", "dtype": "DT", "rank": 4}]}


def plan(dtype):
    return {"default": "keep", "rules": [dict(r, dtype=dtype) for r in PLAN["rules"]]}


def test_ppocr_recognizer(model, tmp_path, rng):
    x = text_lines(int(rng.integers(1 << 30)))
    np.save(tmp_path / "lines.npy", x)
    q_path = tmp_path / "q.onnx"
    r8 = castscope.evaluate(model, plan("mxfp8e4"), inputs=tmp_path / "lines.npy", device="cpu",
                            save_quantized=q_path)
    # Weights: every conv and matmul weight cast, bit for bit as castscope.cast does it.
    orig, ran = constants(model), constants(str(q_path))
    layouts = castscope.open_model(model)
    cast_names = {t["name"] for t in r8.tensors}
    assert len(cast_names) > 40
    for name, w in orig.items():
        if name in cast_names:
            assert w.ndim in (2, 4)
            # Along the tensor's resolved layout, as castscope-cli casts it (MatMul weights [K, N]
            # over K, convolutions over I*kh*kw).
            assert np.array_equal(ran[name], layouts[name].cast("mxfp8e4")), name
        else:
            assert np.array_equal(ran[name], w), name

    # Outputs: onnxruntime here on both graphs; CTC softmax [3, 40, 6625] over the characters.
    def run(p):
        s = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"])
        return s.run(None, {"x": x})[0]

    ref, out = run(model), run(q_path)
    o = r8.outputs[0]
    assert o["distribution"] == "probabilities" and o["shape"] == list(ref.shape)
    p = ref.reshape(-1, ref.shape[-1]).astype(np.float64)
    q = out.reshape(-1, out.shape[-1]).astype(np.float64)
    kl = np.mean(np.sum(p * (np.log(np.maximum(p, 1e-30)) - np.log(np.maximum(q, 1e-30))), -1))
    assert o["kl"] == pytest.approx(kl, rel=1e-4)
    assert o["top1"] == pytest.approx(np.mean(p.argmax(-1) == q.argmax(-1)))
    # More bits, less damage: bfloat16 keeps the recognizer's reading, 4-bit weights wreck it.
    # (MXFP8 itself moves it measurably: the squeeze-excite 1x1 convs are sensitive.)
    r16 = castscope.evaluate(model, plan("bfloat16"), inputs=x, device="cpu")
    r4 = castscope.evaluate(model, plan("mxfp4e2"), inputs=x, device="cpu")
    assert r16.top1 > 0.95
    assert r16.kl < r8.kl < r4.kl
    assert r4.size["bits_per_weight_cast"] < r8.size["bits_per_weight_cast"]
