"""castscope.plan: the budget planner (docs/planning.md) with activations collected from the
model's own runtime. ONNX graphs run in onnxruntime on the user's inputs (or inputs synthesized
from the graph's input spec) and the input of every MatMul, Gemm and ungrouped Conv that reads a
weight is captured; Hugging Face models run in PyTorch and forward pre-hooks capture the input of
every Linear and GPT-2 Conv1D layer. Each tensor's candidates are then predicted by the relative
output error ||X (Q(W) - W)||^2 / ||X W||^2 along its resolved layout; tensors whose input the
runtime does not show fall back to the relative weight error ||Q(W) - W||^2 / ||W||^2. With
sensitivity, each tensor's errors are also scaled to the output divergence measured with that
tensor alone cast (docs/planning.md, "The predictor")."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core
from ._eval_common import EvalError, detect_format


def _rows(x: np.ndarray, rows: int, rng) -> np.ndarray:
    """At most `rows` rows of x [T, L], drawn without replacement (in order)."""
    if x.shape[0] <= rows:
        return np.ascontiguousarray(x, dtype=np.float32)
    pick = np.sort(rng.choice(x.shape[0], size=rows, replace=False))
    return np.ascontiguousarray(x[pick], dtype=np.float32)


def _conv_patches(x: np.ndarray, kshape: Sequence[int], attrs: Mapping[str, Any], rows: int,
                  rng) -> Optional[np.ndarray]:
    """im2col rows [T, C * prod(k)] of a 2-D conv input x [N, C, H, W], in the order of the
    weight's flattened [I, kh, kw]; None where the padding is not explicit."""
    if x.ndim != 4 or len(kshape) != 2:
        return None
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    if auto_pad not in ("NOTSET", "VALID"):
        return None
    kh, kw = kshape
    sh, sw = list(attrs.get("strides", [1, 1]))
    dh, dw = list(attrs.get("dilations", [1, 1]))
    pads = list(attrs.get("pads", [0, 0, 0, 0])) if auto_pad == "NOTSET" else [0, 0, 0, 0]
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    ekh, ekw = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    win = np.lib.stride_tricks.sliding_window_view(xp, (ekh, ekw), axis=(2, 3))
    win = win[:, :, ::sh, ::sw, ::dh, ::dw]  # [N, C, Ho, Wo, kh, kw]
    n, c, ho, wo = win.shape[:4]
    total = n * ho * wo
    idx = np.arange(total) if total <= rows else np.sort(rng.choice(total, rows, replace=False))
    ni, rest = np.divmod(idx, ho * wo)
    ii, jj = np.divmod(rest, wo)
    p = win[ni, :, ii, jj]  # [T, C, kh, kw]
    return np.ascontiguousarray(p.reshape(p.shape[0], -1), dtype=np.float32)


def _divergence(ref: Sequence[np.ndarray], out: Sequence[np.ndarray]) -> float:
    """How far the outputs moved: the mean KL divergence over the outputs that are
    distributions (logits, probabilities), else the relative squared error, averaged."""
    from ._eval_common import compare_output

    d = []
    for k, (r, o) in enumerate(zip(ref, out)):
        c = compare_output(str(k), np.asarray(r), np.asarray(o))
        if c.get("kl") is not None:
            d.append(float(c["kl"]))
        else:
            r64 = np.asarray(r, np.float64)
            err = np.sum((np.asarray(o, np.float64) - r64) ** 2)
            d.append(float(err / max(np.sum(r64 ** 2), 1e-300)))
    return float(np.mean(d)) if d else 0.0


def _onnx_runtime(path: str, inputs: Any, seed: int, rows: int):
    """(activations by weight name, inputs description, measure(name, values) -> divergence of
    the outputs with that one weight replaced)."""
    from ._eval_onnx import _graph_inputs, _import, _synthesize, _tensor_holders, _user_inputs

    onnx, ort = _import()
    try:
        proto = onnx.load(path)
    except Exception as e:
        raise EvalError(f"onnx cannot load '{path}': {e}") from None
    g = proto.graph
    consts = {t.name: tuple(t.dims) for t in g.initializer}
    for node in g.node:
        if node.op_type == "Constant" and node.output:
            for a in node.attribute:
                if a.name == "value":
                    consts[node.output[0]] = tuple(a.t.dims)
    uses: Dict[str, int] = {}
    for node in g.node:
        for i in node.input:
            if i in consts:
                uses[i] = uses.get(i, 0) + 1
    wanted: Dict[str, Tuple[str, str, Dict[str, Any]]] = {}  # weight: (op, input, attributes)
    for node in g.node:
        if len(node.input) < 2 or node.input[1] not in consts or uses[node.input[1]] != 1:
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type in ("MatMul", "Gemm") and node.input[0] not in consts:
            wanted[node.input[1]] = (node.op_type, node.input[0], attrs)
        elif node.op_type == "Conv" and int(attrs.get("group", 1)) == 1:
            wanted[node.input[1]] = ("Conv", node.input[0], attrs)
    specs = _graph_inputs(proto)
    if inputs is None:
        feeds, desc = _synthesize(onnx, specs, seed)
    else:
        feeds, desc = _user_inputs(onnx, specs, inputs)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    plain = proto.SerializeToString()
    have = {o.name for o in g.output}
    model_outputs = [o.name for o in g.output]
    names = sorted({v[1] for v in wanted.values()})
    for n in names:
        if n not in have:
            g.output.append(onnx.ValueInfoProto(name=n))
    try:
        sess = ort.InferenceSession(proto.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        outs = sess.run(model_outputs + names, feeds)
    except Exception as e:
        raise EvalError(f"onnxruntime cannot run '{path}' to collect activations: {e}") from None
    ref = outs[: len(model_outputs)]
    got = dict(zip(names, outs[len(model_outputs):]))
    base = onnx.load_from_string(plain)
    holders = _tensor_holders(base)

    def measure(name: str, values: np.ndarray) -> Optional[float]:
        tp = holders.get(name)
        if tp is None:
            return None
        orig = onnx.TensorProto()
        orig.CopyFrom(tp)
        a = onnx.numpy_helper.to_array(orig)
        tp.CopyFrom(onnx.numpy_helper.from_array(values.reshape(a.shape).astype(a.dtype), tp.name))
        try:
            s2 = ort.InferenceSession(base.SerializeToString(), so,
                                      providers=["CPUExecutionProvider"])
            return _divergence(ref, s2.run(model_outputs, feeds))
        finally:
            tp.CopyFrom(orig)

    rng = np.random.default_rng(seed)
    acts: Dict[str, np.ndarray] = {}
    for w, (op, src, attrs) in wanted.items():
        x = np.asarray(got[src], dtype=np.float32)
        shape = consts[w]
        if op == "MatMul" and len(shape) == 2:
            acts[w] = _rows(x.reshape(-1, shape[0]), rows, rng)
        elif op == "Gemm" and len(shape) == 2 and x.ndim == 2:
            acts[w] = _rows(x.T if int(attrs.get("transA", 0)) else x, rows, rng)
        elif op == "Conv" and len(shape) == 4:
            p = _conv_patches(x, shape[2:], attrs, rows, rng)
            if p is not None:
                acts[w] = p
    return acts, desc, measure


def _hf_runtime(path: str, inputs: Any, seed: int, rows: int, max_tokens: int):
    """As _onnx_runtime, for a Hugging Face model in PyTorch (forward pre-hooks)."""
    from ._eval_hf import _import, _load, _tokens

    torch, transformers = _import()
    tokens, _, desc = _tokens(path, inputs, seed, max_tokens)
    model = _load(transformers, torch, path, "cpu", "original")
    kinds: List[Any] = [torch.nn.Linear]
    try:
        from transformers.pytorch_utils import Conv1D

        kinds.append(Conv1D)
    except ImportError:
        pass
    seen: Dict[str, List[np.ndarray]] = {}

    def hook_for(name: str):
        def hook(module, args):
            x = args[0].detach().float()
            seen.setdefault(name, []).append(x.reshape(-1, x.shape[-1]).cpu().numpy())

        return hook

    handles = [m.register_forward_pre_hook(hook_for(n + ".weight"))
               for n, m in model.named_modules() if isinstance(m, tuple(kinds))]
    def forward() -> List[np.ndarray]:
        outs = []
        with torch.no_grad():
            for i in range(tokens.shape[0]):
                r = model(input_ids=torch.from_numpy(tokens[i : i + 1]))
                y = r.logits if getattr(r, "logits", None) is not None else r.last_hidden_state
                outs.append(y.float().numpy())
        return [np.concatenate(outs, axis=0)]

    try:
        ref = forward()
    finally:
        for h in handles:
            h.remove()
    params = dict(model.named_parameters())

    def measure(name: str, values: np.ndarray) -> Optional[float]:
        p = params.get(name)
        if p is None or tuple(p.shape) != tuple(values.shape):
            return None  # converted on loading (fused experts): not the checkpoint's tensor
        keep = p.detach().clone()
        with torch.no_grad():
            p.copy_(torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)))
        try:
            return _divergence(ref, forward())
        finally:
            with torch.no_grad():
                p.copy_(keep)

    rng = np.random.default_rng(seed)
    acts = {n: _rows(np.concatenate(v, axis=0), rows, rng) for n, v in seen.items()}
    return acts, desc, measure


def _sensitivities(m, table: Mapping[str, Any], measure, progress) -> Dict[str, float]:
    """Per tensor, its end-to-end sensitivity: the output divergence with only that tensor cast
    to its largest-error candidate, over that candidate's predicted error. A tensor the runtime
    cannot replace alone gets the median of the others (so every error stays in one unit)."""
    from . import Model

    cm = Model(m.path)
    sens: Dict[str, float] = {}
    tensors = table["tensors"]
    for k, t in enumerate(tensors):
        probe = max(t["options"], key=lambda o: o["error"])
        if probe["error"] > 0:
            q = np.asarray(cm[t["name"]].cast(probe["dtype"], axis=t["axis"]))
            d = measure(t["name"], q)
            if d is not None and np.isfinite(d):
                sens[t["name"]] = d / probe["error"]
        if progress is not None:
            progress((k + 1) / len(tensors))
    if sens:
        med = float(np.median(list(sens.values())))
        for t in tensors:
            sens.setdefault(t["name"], med)
    return sens


def _match_names(acts: Dict[str, np.ndarray], names: Sequence[str]) -> Dict[str, np.ndarray]:
    """Activations keyed by the checkpoint's tensor names: a module path matches a tensor name
    equal to it or ending in it after a '.' (a checkpoint's 'model.' prefixes differ)."""
    out: Dict[str, np.ndarray] = {}
    for n in names:
        if n in acts:
            out[n] = acts[n]
            continue
        hits = [k for k in acts if n.endswith("." + k) or k.endswith("." + n)]
        if len(hits) == 1:
            out[n] = acts[hits[0]]
    return out


def plan(
    model: Union[str, os.PathLike],
    budget: Optional[float] = None,
    budget_bytes: Optional[int] = None,
    candidates: Optional[Sequence[str]] = None,
    inputs: Any = None,
    activations: str = "runtime",
    points: int = 48,
    relative: bool = True,
    role_weights: bool = True,
    rows: int = 256,
    sensitivity: Union[bool, Mapping[str, float]] = False,
    seed: int = 1,
    max_tokens: int = 512,
    include_1d: bool = False,
    include_embeddings: bool = False,
    round: str = "even",
    scale_mode: str = "floor",
    axis: Union[int, str] = "auto",
    device: str = "auto",
    progress: Optional[Callable[[float], None]] = None,
    _table_json: bool = False,
) -> Dict[str, Any]:
    """Choose one datatype per tensor under a size budget (``castscope-cli plan --budget``),
    minimizing the predicted output error exactly, and return the plan and the Pareto curve.

    Args:
        model: a model file or directory (``castscope-cli plan`` reads the same).
        budget: bits per weight over the planned tensors; ``budget_bytes``: their total bytes.
            Neither: only the table and the Pareto curve. A budget below the smallest plan
            raises :class:`Error` naming the smallest size that fits.
        candidates: datatypes to choose from (default: the CLI's eight).
        inputs: the model's inputs for ``activations="runtime"`` (as :func:`evaluate` takes
            them: ONNX .npy / .npz / arrays, token ids or a text file for language models).
            None: synthesized from the model's input spec with ``seed``.
        activations: ``runtime`` (ONNX and Hugging Face models: the activations the runtime
            computes on ``inputs``; other formats: none), ``synthetic`` (the engine's generator
            with outlier channels, every tensor) or ``none`` (the weight form).
        rows: activation rows (tokens or conv output positions) kept per tensor.
        sensitivity: also run the model once per tensor with only that tensor cast to its
            largest-error candidate, and scale the tensor's errors so that this candidate's
            equals the divergence of the outputs measured (KL for distributions): errors in
            the unit of the output, each tensor's gain to the output included. A dict (name:
            factor, e.g. the ``sensitivity`` of a previous result's table) is used as given.
        relative: divide each tensor's errors by its own output (or weight) energy.

    Returns a dict: ``plan`` (the plan as a dict, for :func:`export` and :func:`evaluate`;
    None without a budget), ``choice`` (bits, bits_per_weight, predicted error, dtypes),
    ``pareto`` (``[{"bits", "bits_per_weight", "predicted_error", "chosen"}]``), ``table`` (every
    tensor's candidates with bits and predicted errors) and ``inputs`` (what the activations were
    computed from, or None).
    """
    import json

    path = os.fspath(model)
    if not os.path.exists(path):
        raise EvalError(f"model '{path}' does not exist")
    if activations not in ("runtime", "synthetic", "none"):
        raise EvalError(f"activations '{activations}': expected runtime, synthetic or none")
    if budget is not None and budget_bytes is not None:
        raise EvalError("give one of budget and budget_bytes")
    m = _core._open_model(path)
    acts: Dict[str, np.ndarray] = {}
    desc = None
    measure = None
    try:
        fmt = detect_format(path)
    except EvalError:
        fmt = "other"  # a checkpoint no runtime runs (safetensors, npz, ...): weights only
    measured = bool(sensitivity) and not isinstance(sensitivity, Mapping)
    if activations == "runtime" or measured:
        if fmt == "onnx":
            got, desc, measure = _onnx_runtime(path, inputs, seed, rows)
        elif fmt == "hf":
            got, desc, measure = _hf_runtime(path, inputs, seed, rows, max_tokens)
        elif inputs is not None or measured:
            raise EvalError(f"'{path}': activations and sensitivities come from ONNX and "
                            "Hugging Face models only")
        else:
            got = {}
        if activations == "runtime":
            acts = _match_names(got, [t.name for t in m.tensors])
    args = (m, [str(c) for c in (candidates or [])], -1.0 if budget is None else float(budget),
            -1 if budget_bytes is None else int(budget_bytes), int(points), str(axis), round,
            scale_mode, device, bool(include_1d), bool(include_embeddings), bool(role_weights),
            bool(relative), activations == "synthetic", 0 if acts else 64, acts)
    sens: Dict[str, float] = {}
    if isinstance(sensitivity, Mapping):
        sens = {str(k): float(v) for k, v in sensitivity.items()}
    elif sensitivity and measure is not None:
        table = _core._plan_budget(*args[:2], -1.0, -1, 0, *args[5:], {}, None)["table"]
        sens = _sensitivities(m, table, measure, progress)
    r = _core._plan_budget(*args, sens, progress)
    if not _table_json:
        del r["table_json"]
    r["plan"] = json.loads(r["plan"]) if "plan" in r else None
    r.setdefault("choice", None)
    r["inputs"] = desc
    return r
