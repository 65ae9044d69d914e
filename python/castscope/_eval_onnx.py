"""ONNX models in onnxruntime: the graph's float initializers and Constant-node tensors replaced
by CastScope's cast values, the original and the quantized graph run on the same inputs."""

from __future__ import annotations

import os
import threading
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ._eval_common import (EvalError, EvalResult, Job, cast_weight, compare_output, plan_layout, plan_size,
                    require_modules)


def _import():
    onnx, ort = require_modules("an ONNX model", ["onnx", "onnxruntime"])
    import onnx.numpy_helper  # noqa: F401  (onnx.numpy_helper.to_array / from_array)
    return onnx, ort


def _providers(ort, device: str) -> Tuple[List[str], str]:
    avail = ort.get_available_providers()
    if device in ("auto", "cuda") and "CUDAExecutionProvider" in avail:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"], "cuda"
    if device == "cuda":
        raise EvalError("device cuda: this onnxruntime has no CUDAExecutionProvider (providers: "
                        + ", ".join(avail) + "); pip install onnxruntime-gpu")
    return ["CPUExecutionProvider"], "cpu"


def _graph_inputs(proto) -> List[Any]:
    inits = {t.name for t in proto.graph.initializer}
    return [i for i in proto.graph.input if i.name not in inits]


def _input_spec(onnx, vi) -> Tuple[np.dtype, List[Optional[int]]]:
    tt = vi.type.tensor_type
    if not vi.type.HasField("tensor_type"):
        raise EvalError(f"graph input '{vi.name}' is not a tensor; evaluation feeds tensors only")
    dt = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
    dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    return dt, dims


def _synthesize(onnx, specs, seed: int) -> Tuple[Dict[str, np.ndarray], str]:
    rng = np.random.default_rng(seed)
    feeds, parts = {}, []
    for vi in specs:
        dt, dims = _input_spec(onnx, vi)
        # Unknown dimensions: batch 1, every other one 32 (a length most models accept).
        shape = [d if d else (1 if k == 0 else 32) for k, d in enumerate(dims)]
        if dt.kind == "f":
            a = rng.standard_normal(shape).astype(dt)
        elif dt.kind in "iu":
            a = rng.integers(0, 16, size=shape).astype(dt)
        elif dt.kind == "b":
            a = rng.integers(0, 2, size=shape).astype(bool)
        else:
            raise EvalError(f"graph input '{vi.name}' has type {dt}; give inputs with --inputs")
        feeds[vi.name] = a
        parts.append(f"{vi.name} {dt.name}{list(shape)}")
    return feeds, "synthetic from the graph's input spec (seed %d): %s" % (seed, ", ".join(parts))


def _user_inputs(onnx, specs, inputs: Any) -> Tuple[Dict[str, np.ndarray], str]:
    names = [vi.name for vi in specs]
    desc = "given arrays"
    if isinstance(inputs, (str, os.PathLike)):
        p = os.fspath(inputs)
        desc = p
        if not os.path.exists(p):
            raise EvalError(f"inputs '{p}' do not exist")
        try:
            loaded = np.load(p, allow_pickle=False)
        except Exception as e:  # numpy says what is wrong with the file
            raise EvalError(f"inputs '{p}': not a readable .npy / .npz file ({e})") from None
        if isinstance(loaded, np.ndarray):
            inputs = loaded
        else:
            inputs = {k: loaded[k] for k in loaded.files}
    if isinstance(inputs, np.ndarray):
        if len(names) != 1:
            raise EvalError(f"the model has {len(names)} inputs ({', '.join(names)}); give them "
                            "by name in an .npz file (or a dict)")
        inputs = {names[0]: inputs}
    if not isinstance(inputs, dict):
        raise EvalError("inputs: expected a .npy / .npz path, an array or a dict of arrays")
    extra = sorted(set(inputs) - set(names))
    missing = [n for n in names if n not in inputs]
    if extra or missing:
        raise EvalError("inputs do not match the graph's inputs (" + ", ".join(names) + ")"
                        + (": missing " + ", ".join(missing) if missing else "")
                        + (": no input named " + ", ".join(extra) if extra else ""))
    feeds = {}
    for vi in specs:
        dt, dims = _input_spec(onnx, vi)
        a = np.asarray(inputs[vi.name])
        if a.dtype != dt:
            raise EvalError(f"input '{vi.name}' is {a.dtype}; the model takes {dt}")
        if dims and a.ndim != len(dims):
            raise EvalError(f"input '{vi.name}' has shape {list(a.shape)} (rank {a.ndim}); the "
                            f"model takes rank {len(dims)} {['?' if d is None else d for d in dims]}")
        for k, d in enumerate(dims):
            if d is not None and a.shape[k] != d:
                raise EvalError(f"input '{vi.name}' has shape {list(a.shape)}; the model takes "
                                f"{['?' if x is None else x for x in dims]} (axis {k} must be {d})")
        feeds[vi.name] = np.ascontiguousarray(a)
    return feeds, desc


def _run(ort, sess, feeds, job: Job, what: str) -> List[np.ndarray]:
    """sess.run on a worker thread, so a cancel (or Ctrl+C) stops it through RunOptions."""
    opts = ort.RunOptions()
    box: Dict[str, Any] = {}

    def work():
        try:
            box["out"] = sess.run(None, feeds, opts)
        except Exception as e:  # re-raised on the caller's thread
            box["err"] = e

    t = threading.Thread(target=work, daemon=True)
    t.start()
    try:
        while t.is_alive():
            t.join(0.05)
            job.check()
    except BaseException:
        opts.terminate = True
        t.join()
        raise
    if "err" in box:
        hint = ""
        if what == "quantized":
            hint = (" (a plan that casts small float constants the graph computes shapes or "
                    "exponents from breaks it: limit the rules to weights, e.g. \"rank\": 2 and 4)")
        raise EvalError(f"onnxruntime failed running the {what} model: {box['err']}{hint}") from None
    return box["out"]


def _tensor_holders(proto) -> Dict[str, Any]:
    """Name -> TensorProto of every initializer and Constant-node tensor (as the engine's ONNX
    reader names them: a Constant by its output)."""
    holders = {t.name: t for t in proto.graph.initializer}
    for n in proto.graph.node:
        if n.op_type != "Constant":
            continue
        for a in n.attribute:
            if a.name == "value" and a.HasField("t"):
                holders[n.output[0] if n.output else a.t.name] = a.t
    return holders


def run(path, plan, plan_desc, inputs, act_dtype, device, seed, cast_opts, axis, max_tokens, job: Job,
        save_quantized) -> EvalResult:
    onnx, ort = _import()
    from . import Model

    job.enter(0.0, 0.05, "loading")
    try:
        proto = onnx.load(path)
    except Exception as e:
        raise EvalError(f"onnx cannot load '{path}': {e}") from None
    providers, dev = _providers(ort, device)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    try:
        ref_sess = ort.InferenceSession(proto.SerializeToString(), so, providers=providers)
    except Exception as e:
        raise EvalError(f"onnxruntime cannot load '{path}': {e}") from None
    specs = _graph_inputs(proto)
    if inputs is None:
        feeds, desc = _synthesize(onnx, specs, seed)
        synthetic = True
    else:
        feeds, desc = _user_inputs(onnx, specs, inputs)
        synthetic = False

    cmodel = Model(path)
    layout = plan_layout(cmodel, plan, axis)
    holders = _tensor_holders(proto)
    planned = [e for e in layout if e["dtype"] is not None]
    total = sum(max(1, int(np.prod(e["shape"]))) for e in planned) or 1
    done = 0
    job.enter(0.05, 0.55, "casting weights")
    for e in planned:
        tp = holders.get(e["name"])
        if tp is None:
            raise EvalError(f"tensor '{e['name']}' of '{path}' is neither an initializer nor a "
                            "Constant of the main graph")
        orig = onnx.numpy_helper.to_array(tp)
        q = cast_weight(cmodel[e["name"]].numpy(), e, cast_opts).reshape(orig.shape)
        # Stored back in the tensor's own float type; float16 / bfloat16 tensors round the cast
        # values into it (exact for the values of formats no wider than that type).
        new = onnx.numpy_helper.from_array(q.astype(orig.dtype, copy=False), tp.name)
        tp.CopyFrom(new)
        done += max(1, int(np.prod(e["shape"])))
        job.report(done / total)
    if save_quantized:
        onnx.save(proto, save_quantized)

    job.enter(0.6, 0.2, "running the original model")
    ref = _run(ort, ref_sess, feeds, job, "original")
    del ref_sess
    job.enter(0.8, 0.2, "running the quantized model")
    try:
        q_sess = ort.InferenceSession(proto.SerializeToString(), so, providers=providers)
    except Exception as e:
        raise EvalError(f"onnxruntime cannot load the quantized '{path}': {e}") from None
    out = _run(ort, q_sess, feeds, job, "quantized")
    names = [o.name for o in q_sess.get_outputs()]
    outputs = [compare_output(n, np.asarray(r), np.asarray(o)) for n, r, o in zip(names, ref, out)]

    notes = []
    if act_dtype:
        notes.append(f"activations were not cast to {act_dtype}: onnxruntime runs the graph's "
                     "operators without showing CastScope their inputs; only weights are cast")
    tensors = [{"name": e["name"], "dtype": e["dtype"], "axis": e["axis_desc"],
                "bits_per_value": e["bits_per_value"]} for e in planned]
    return EvalResult(
        model=path, format="onnx", runtime=f"onnxruntime {ort.__version__} ({providers[0]})",
        device=dev, plan=plan_desc, act_dtype=None, outputs=outputs, tensors=tensors,
        inputs={"synthetic": synthetic, "description": desc,
                "shapes": {k: list(v.shape) for k, v in feeds.items()}},
        size=plan_size(layout), notes=notes)
