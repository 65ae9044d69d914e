"""Keras / TFLite kernel layouts recognised from the shapes where the file shows nothing: rank-4
kernels whose first two axes are small odd spatial sizes are [kh, kw, Cin, Cout] (depthwise
[kh, kw, C, 1]), the 2-D kernels beside them Dense [in, out]; the reason says "TFLite kernel
shape" and the layout stays marked guessed. Checked through castscope-cli inspect and map.

TensorFlow (and so tf2onnx / tflite2onnx) is too heavy to install for this test, so the files are
built to mirror what those converters emit for such a model: TF-style names
("PartitionedCall/..."), HWIO kernels that reach their Conv only through a per-channel Mul (a
BatchNorm scale the converter did not fold, which the graph walk does not follow), and Dense
kernels as MatMul-shaped [in, out] initializers of the same kind; plus a safetensors dump of the
same tensors without any graph. A PyTorch-shaped control file keeps the rank rule."""
import json
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx builds the test graph (pip install onnx)")
safetensors_numpy = pytest.importorskip("safetensors.numpy")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from conftest import needs_onnx_reader  # noqa: E402

KERNELS = {  # name -> shape, the reduction view [rows, outputs] along axis 0
    "PartitionedCall/model/conv2d/Conv2D/ReadVariableOp": ((3, 3, 8, 16), (72, 16)),
    "PartitionedCall/model/conv2d_1/Conv2D/ReadVariableOp": ((1, 1, 16, 12), (16, 12)),
    "PartitionedCall/model/depthwise/depthwise/ReadVariableOp": ((3, 3, 12, 1), (9, 12)),
    "PartitionedCall/model/dense/MatMul/ReadVariableOp": ((48, 10), (48, 10)),
}


def run(cli, *args):
    p = subprocess.run([cli, *map(str, args)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


def tensors(rng):
    return {n: rng.standard_normal(s).astype(np.float32) for n, (s, _) in KERNELS.items()}


def tf_like_graph(path, w):
    """Each HWIO kernel is scaled per output channel (Mul) and transposed to OIHW before Conv:
    the graph's answer is hidden behind the Mul, so only the shapes tell the layout."""
    nodes, inits = [], [numpy_helper.from_array(v, n) for n, v in w.items()]
    x = "x"
    for i, (n, v) in enumerate(w.items()):
        if v.ndim == 4:
            s = f"s{i}"
            inits.append(numpy_helper.from_array(np.ones(v.shape[3], np.float32), s))
            depthwise = v.shape[3] == 1
            nodes += [helper.make_node("Mul", [n, s], [f"m{i}"]),
                      helper.make_node("Transpose", [f"m{i}"], [f"k{i}"],
                                       perm=[2, 3, 0, 1] if depthwise else [3, 2, 0, 1]),
                      helper.make_node("Conv", [x, f"k{i}"], [f"c{i}"], pads=[0, 0, 0, 0],
                                       group=v.shape[2] if depthwise else 1)]
            x = f"c{i}"
        else:
            nodes += [helper.make_node("Flatten", [x], [f"f{i}"]),
                      helper.make_node("Mul", [n, "one"], [f"d{i}"]),
                      helper.make_node("MatMul", [f"f{i}", f"d{i}"], ["y"])]
            inits.append(numpy_helper.from_array(np.ones((1, 1), np.float32), "one"))
    g = helper.make_graph(nodes, "tf_like", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 8, 9, 9])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 10])], initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def check_file(cli, path, w):
    info = {t["name"]: t for t in json.loads(run(cli, "inspect", path, "--json"))["tensors"]}
    for n, (shape, view) in KERNELS.items():
        lay = info[n]["layout"]
        assert "TFLite kernel shape" in lay["reason"], (n, lay)
        assert lay["guessed"], (n, lay)
        assert lay["view"] == [view[1], view[0]], (n, lay)
        want = "dense" if len(shape) == 2 else "depthwise" if shape[3] == 1 else "keras conv"
        assert want in lay["name"], (n, lay)
    # The map casts each kernel as its documented view along axis 0: the same figures as the
    # view itself (and not those of PyTorch's reading, which the last check shows differ).
    cols = ["mxfp4e2", "nvfp4"]
    flags = [x for d in cols for x in ("--dtype", d)]
    rows = {r["name"]: r for r in json.loads(run(cli, "map", path, *flags, "--json",
                                                 "--device", "cpu"))["rows"]}
    differs = 0
    for i, (n, (shape, view)) in enumerate(KERNELS.items()):
        v = w[n].reshape(view)
        arch = path.parent / f"view{i}.npy"
        np.save(arch, v)
        vm = json.loads(run(cli, "map", arch, *flags, "--json", "--device", "cpu", "--axis",
                            "0"))["rows"][0]["cells"]
        assert [c["snr_db"] for c in rows[n]["cells"]] == [c["snr_db"] for c in vm], n
        wrong = json.loads(run(cli, "map", arch, *flags, "--json", "--device", "cpu", "--axis",
                               "-1"))["rows"][0]["cells"]
        differs += [c["snr_db"] for c in wrong] != [c["snr_db"] for c in vm]
    assert differs > 0


@needs_onnx_reader
def test_tf_converted_onnx_kernels(cli, tmp_path, rng):
    w = tensors(rng)
    p = tmp_path / "tf_like.onnx"
    tf_like_graph(p, w)
    check_file(cli, p, w)


def test_tflite_dump_without_graph(cli, tmp_path, rng):
    w = tensors(rng)
    p = tmp_path / "tflite.safetensors"
    safetensors_numpy.save_file(w, str(p))
    check_file(cli, p, w)


def test_pytorch_shapes_keep_the_rank_rule(cli, tmp_path, rng):
    p = tmp_path / "torch.safetensors"
    safetensors_numpy.save_file({"a": rng.standard_normal((16, 8, 3, 3)).astype(np.float32),
                                 "b": rng.standard_normal((12, 16, 1, 1)).astype(np.float32),
                                 "c": rng.standard_normal((10, 48)).astype(np.float32)}, str(p))
    info = {t["name"]: t for t in json.loads(run(cli, "inspect", p, "--json"))["tensors"]}
    for n in "abc":
        assert "TFLite" not in info[n]["layout"]["reason"], info[n]
    assert info["a"]["layout"]["name"].startswith("conv [O, I/g")
