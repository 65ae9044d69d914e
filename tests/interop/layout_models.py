"""Models whose quantization layouts are known, and the documented 2-D view of each weight.

Shared by tests/interop/test_layouts.py (the CLI) and python/tests/test_layouts.py (the Python
package). Every builder writes a model with the library that defines its format (onnx,
transformers, safetensors) and returns {tensor name: Expect}: the view [prod(shape[:split]),
prod(shape[split:])] and which of its two axes is the reduction, as docs/formats.md
("Quantization axis") states it. The expectations come from the rule table, never from CastScope.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass

import numpy as np


@dataclass
class Expect:
    split: int  # view = [prod(shape[:split]), prod(shape[split:])]
    red: int  # the reduction axis of the view: 0 or 1
    layout: str = ""  # a word the resolved layout's name contains
    conflict: bool = False
    embedding: bool = False


def view_of(w, e):
    """The documented 2-D view of w: a reshape (contiguous axes merge, nothing moves)."""
    a = int(np.prod(w.shape[: e.split], dtype=np.int64))
    return np.array(w.reshape(a, -1), dtype=np.float32, order="C", copy=True)  # writable


# ---------------------------------------------------------------------------------------------
# ONNX graphs built with the onnx package.


def build_onnx(path, rng):
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper as nh

    def init(name, shape):
        return nh.from_array(rng.standard_normal(shape).astype(np.float32), name)

    inits = [init("mm_w", [64, 96]), init("gemm_w", [32, 96]), init("gemm_n", [96, 40]),
             init("conv_w", [16, 8, 3, 3]), init("dw_w", [16, 1, 3, 3]),
             init("ct_w", [16, 8, 3, 3]), init("c1_w", [16, 8, 5]), init("c3_w", [8, 4, 3, 3, 3]),
             init("tr_w", [48, 64]), init("cast_w", [64, 40]), init("shared_w", [64, 64]),
             init("emb", [100, 64])]
    nodes = [
        h.make_node("MatMul", ["x", "mm_w"], ["y1"], name="mm"),
        h.make_node("Gemm", ["y1", "gemm_w"], ["y2"], name="gemm_t", transB=1),
        h.make_node("Gemm", ["y1", "gemm_n"], ["y2n"], name="gemm_n"),
        h.make_node("Conv", ["img", "conv_w"], ["c1"], name="conv"),
        h.make_node("Conv", ["c1", "dw_w"], ["c2"], name="depthwise", group=16),
        h.make_node("ConvTranspose", ["c2", "ct_w"], ["c3"], name="convT"),
        h.make_node("Conv", ["seq", "c1_w"], ["s1"], name="conv1d"),
        h.make_node("Conv", ["vol", "c3_w"], ["v1"], name="conv3d"),
        h.make_node("Transpose", ["tr_w"], ["tr_t"], name="tr", perm=[1, 0]),
        h.make_node("MatMul", ["x", "tr_t"], ["y3"], name="mm_tr"),
        h.make_node("Cast", ["cast_w"], ["cast_c"], name="cast", to=TP.FLOAT),
        h.make_node("MatMul", ["x", "cast_c"], ["y6"], name="mm_cast"),
        h.make_node("MatMul", ["x", "shared_w"], ["y4"], name="mm_shared"),
        h.make_node("Gemm", ["x", "shared_w"], ["y5"], name="gemm_shared", transB=1),
        h.make_node("Gather", ["emb", "ids"], ["e"], name="gather"),
    ]
    inputs = [h.make_tensor_value_info("x", TP.FLOAT, [4, 64]),
              h.make_tensor_value_info("img", TP.FLOAT, [1, 8, 8, 8]),
              h.make_tensor_value_info("seq", TP.FLOAT, [1, 8, 20]),
              h.make_tensor_value_info("vol", TP.FLOAT, [1, 4, 6, 6, 6]),
              h.make_tensor_value_info("ids", TP.INT64, [3])]
    outputs = [h.make_tensor_value_info(n, TP.FLOAT, None)
               for n in ["y2", "y2n", "c3", "s1", "v1", "y3", "y6", "y4", "y5", "e"]]
    graph = h.make_graph(nodes, "layouts", inputs, outputs, inits)
    onnx.save(h.make_model(graph), path)
    return {
        "mm_w": Expect(1, 0, "matmul"),  # MatMul B [K, N]: over K
        "gemm_w": Expect(1, 1, "gemm"),  # Gemm transB = 1: B stored [N, K]
        "gemm_n": Expect(1, 0, "gemm"),  # Gemm transB = 0: B stored [K, N]
        "conv_w": Expect(1, 1, "conv"),  # [O, I*kh*kw]
        "dw_w": Expect(1, 1, "depthwise"),  # [O, 1*kh*kw]
        "ct_w": Expect(1, 0, "transpose"),  # [Cin, Cout/g*kh*kw] over Cin
        "c1_w": Expect(1, 1, "conv1d"),
        "c3_w": Expect(1, 1, "conv3d"),
        "tr_w": Expect(1, 1, "matmul"),  # MatMul(x, Transpose(W [N, K])): over the stored last
        "cast_w": Expect(1, 0, "matmul"),  # through Cast
        "shared_w": Expect(1, 0, "matmul", conflict=True),  # MatMul says K rows, Gemm^T columns
        "emb": Expect(1, 1, "embedding", embedding=True),
    }


def onnx_expectations(path):
    """The rule table applied to a real ONNX graph with the onnx package: each initializer's
    consumer (through Transpose / Cast / Identity) decides."""
    import onnx
    m = onnx.load(path)
    g = m.graph
    uses = {}
    for n in g.node:
        for i, v in enumerate(n.input):
            uses.setdefault(v, []).append((n, i))
    out = {}
    for name, t in onnx_tensors(g):
        if len(t.dims) < 2:
            continue
        v, flip = name, False
        for _ in range(4):
            u = uses.get(v, [])
            if len(u) == 1 and u[0][0].op_type in ("Cast", "Identity") and u[0][1] == 0:
                v = u[0][0].output[0]
            elif len(u) == 1 and u[0][0].op_type == "Transpose" and len(t.dims) == 2:
                flip, v = not flip, u[0][0].output[0]
            else:
                break
        u = uses.get(v, [])
        if not u:
            continue
        n, i = u[0]
        attrs = {a.name: a.i for a in n.attribute}
        e = None
        if n.op_type == "MatMul" and i == 1 and len(t.dims) == 2:
            e = Expect(1, 0, "matmul")
        elif n.op_type == "Gemm" and i == 1:
            e = Expect(1, 1 if attrs.get("transB", 0) else 0, "gemm")
        elif n.op_type == "Conv" and i == 1:
            e = Expect(1, 1, "conv")
        elif n.op_type == "ConvTranspose" and i == 1:
            e = Expect(1, 0, "transpose")
        if e is not None:
            if flip:
                e.red = 1 - e.red
            out[name] = e
    return out


def onnx_tensors(g):
    """(name, TensorProto) of a graph's initializers and Constant nodes (PaddleOCR's exporter
    writes its weights as Constant nodes)."""
    found = [(t.name, t) for t in g.initializer]
    for n in g.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value" and a.HasField("t"):
                    found.append((n.output[0], a.t))
    return found


def models_dir():
    """Where the real models of the tests live: the one cache scripts/setup.sh fills."""
    return os.environ.get("CASTSCOPE_TEST_MODELS",
                          os.path.expanduser("~/.cache/castscope/models"))


def ppocr_model(cache=None):
    """PaddleOCR v4's recognizer, as scripts/setup.sh keeps it in the models cache (taken from
    the rapidocr-onnxruntime wheel with pip when missing; only the model is kept). Returns its
    path, or None with the reason printed."""
    cache = cache or models_dir()
    os.makedirs(cache, exist_ok=True)
    onnx_path = os.path.join(cache, "ch_PP-OCRv4_rec_infer.onnx")
    if os.path.exists(onnx_path):
        return onnx_path
    with tempfile.TemporaryDirectory() as wheel_dir:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                            "rapidocr-onnxruntime==1.4.4", "-d", wheel_dir], capture_output=True,
                           text=True)
        wheels = glob.glob(os.path.join(wheel_dir, "rapidocr_onnxruntime-1.4.4-*.whl"))
        if not wheels:
            print("skipping PaddleOCR: not in", cache, "and pip could not download it:",
                  (r.stderr or r.stdout).strip()[-300:])
            return None
        with zipfile.ZipFile(wheels[0]) as z:
            data = z.read("rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx")
    tmp = onnx_path + ".part"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, onnx_path)
    return onnx_path


def onnx_weights(path):
    import onnx
    from onnx import numpy_helper as nh
    return {name: nh.to_array(t) for name, t in onnx_tensors(onnx.load(path).graph)}


# ---------------------------------------------------------------------------------------------
# Checkpoints: transformers' GPT-2 (Conv1D [in, out]) and Llama (nn.Linear [out, in]), and a
# Keras-layout safetensors file.


def build_gpt2(d, seed):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=96, n_positions=32, n_embd=64, n_layer=1, n_head=2,
                     bos_token_id=0, eos_token_id=0)
    GPT2LMHeadModel(cfg).save_pretrained(d, safe_serialization=True)
    exp = {}
    for n in ["attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"]:
        exp[f"transformer.h.0.{n}.weight"] = Expect(1, 0, "gpt2")  # Conv1D [in, out]
    exp["transformer.wte.weight"] = Expect(1, 1, "embedding", embedding=True)
    exp["transformer.wpe.weight"] = Expect(1, 1, "embedding", embedding=True)
    return exp


def build_llama(d, seed):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=160, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32,
                      tie_word_embeddings=False)
    LlamaForCausalLM(cfg).save_pretrained(d, safe_serialization=True)
    exp = {}
    for n in ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
              "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]:
        exp[f"model.layers.0.{n}.weight"] = Expect(1, 1, "linear")  # nn.Linear [out, in]
    exp["lm_head.weight"] = Expect(1, 1, "linear")
    exp["model.embed_tokens.weight"] = Expect(1, 1, "embedding", embedding=True)
    return exp


def build_keras(path, rng):
    """Keras / TF names and shapes: conv kernels [kh, kw, Cin, Cout], depthwise kernels
    [kh, kw, Cin, m], Dense kernels [in, out]; and a channels-last conv that only its bias's
    length tells apart."""
    from safetensors.numpy import save_file

    def r(*s):
        return rng.standard_normal(s).astype(np.float32)

    t = {"model/conv2d/kernel:0": r(3, 3, 8, 16), "model/conv2d/bias:0": r(16),
         "model/depthwise_conv2d/depthwise_kernel:0": r(3, 3, 16, 1),
         "model/dense/kernel:0": r(64, 10), "model/dense/bias:0": r(10),
         "head.conv.weight": r(3, 3, 8, 24), "head.conv.bias": r(24)}
    save_file(t, path)
    return {
        "model/conv2d/kernel:0": Expect(3, 0, "keras"),  # [kh*kw*Cin, Cout] over kh*kw*Cin
        "model/depthwise_conv2d/depthwise_kernel:0": Expect(2, 0, "depthwise"),  # over kh*kw
        "model/dense/kernel:0": Expect(1, 0, "dense"),  # [in, out] over in
        "head.conv.weight": Expect(3, 0, "keras"),  # the bias matches the last axis
    }


def safetensors_weights(path_or_dir):
    from safetensors.numpy import load_file
    files = ([path_or_dir] if os.path.isfile(path_or_dir)
             else sorted(glob.glob(os.path.join(path_or_dir, "*.safetensors"))))
    out = {}
    for f in files:
        out.update(load_file(f))
    return out


def inspect_json(cli, path):
    return {t["name"]: t for t in json.loads(cli("inspect", path, "--json"))["tensors"]}


def file_key(name):
    """The file name `castscope-cli decompress` gives tensor `name` in a directory."""
    return name.replace("/", "_").replace("\\", "_")
