"""What the evaluation runtimes (_eval_onnx, _eval_hf, _eval_gguf) share: the plan resolved per
tensor, the cast weights, the comparison of outputs and the result. It imports none of them, so
_eval (which dispatches to them) and the runtimes depend on it without a circle."""

from __future__ import annotations

import contextvars
import importlib
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _core

PlanLike = Union[str, os.PathLike, Mapping[str, Any]]


class EvalError(_core.Error):
    """Evaluation input the runtime cannot use (model, plan, inputs); the message names it."""


# ---------------------------------------------------------------------------------------------
# Token ids of a language model (transformers, llama.cpp)


def require_modules(what: str, packages: List[str]) -> Tuple[Any, ...]:
    """The runtime's packages for evaluating ``what``, imported in order; an EvalError naming the
    one that is missing and the pip command otherwise."""
    try:
        return tuple(importlib.import_module(p) for p in packages)
    except ImportError as e:
        raise EvalError(f"evaluating {what} needs {' and '.join(packages)} ({e.name} is missing): "
                        f"pip install {' '.join(packages)}") from None


def token_ids(inputs: Any, seed: int, vocab: int, ctx: int, tokenize: Callable[[str], np.ndarray],
              no_vocab: str):
    """(ids [batch, tokens] int64, synthetic, description) from ``inputs``: None (two synthetic
    sequences of up to 64 ids, uniform over the vocabulary, from ``seed``), ids (array, tensor,
    .npy file) or a text file that ``tokenize`` turns into ids. At most ``ctx`` per sequence.
    ``no_vocab`` says why synthetic ids cannot be drawn when ``vocab`` is unknown."""
    if inputs is None:
        if not vocab:
            raise EvalError(f"{no_vocab} to synthesize token ids from; give inputs")
        rng = np.random.default_rng(seed)
        t = rng.integers(0, vocab, size=(2, min(64, ctx)), dtype=np.int64)
        return t, True, (f"synthetic token ids (seed {seed}): {t.shape[0]} sequences of "
                         f"{t.shape[1]}, uniform over the vocabulary of {vocab}")
    desc = "given token ids"
    if isinstance(inputs, (str, os.PathLike)):
        p = os.fspath(inputs)
        if not os.path.exists(p):
            raise EvalError(f"inputs '{p}' do not exist")
        desc = p
        if p.lower().endswith(".npy"):
            try:
                inputs = np.load(p, allow_pickle=False)
            except Exception as e:
                raise EvalError(f"inputs '{p}': not a readable .npy file ({e})") from None
        elif p.lower().endswith(".npz"):
            raise EvalError(f"inputs '{p}': a language model takes token ids as .npy [batch, "
                            "tokens] or a text file")
        else:
            inputs = tokenize(p)
            desc = f"{p} ({inputs.size} tokens, the model's tokenizer)"
    if hasattr(inputs, "detach"):
        inputs = inputs.detach().cpu().numpy()
    t = np.asarray(inputs)
    if t.dtype.kind not in "iu":
        raise EvalError(f"token ids are {t.dtype}; a language model takes integer token ids")
    if t.ndim == 1:
        t = t[None, :]
    if t.ndim != 2 or t.shape[1] < 2:
        raise EvalError(f"token ids have shape {list(t.shape)}; expected [tokens] or [batch, "
                        "tokens] with at least 2 tokens")
    if vocab and (t.min() < 0 or t.max() >= vocab):
        raise EvalError(f"token ids range over [{t.min()}, {t.max()}]; the model's vocabulary is "
                        f"[0, {vocab - 1}]")
    if t.shape[1] > ctx:
        raise EvalError(f"token ids have {t.shape[1]} per sequence; at most {ctx} are evaluated "
                        "(the model's context or max_tokens)")
    return t.astype(np.int64), False, desc


# ---------------------------------------------------------------------------------------------
# Progress and cancel


class Job:
    """Progress over the stages of one evaluation, and its cancel check.

    ``progress(fraction, stage)`` is called with each new fraction; ``cancel()`` returning True
    (or ``progress`` raising) stops the evaluation with castscope.Cancelled."""

    def __init__(self, progress: Optional[Callable[..., Any]], cancel: Optional[Callable[[], bool]]):
        self._progress = progress
        self._cancel = cancel
        self.base, self.width, self.stage = 0.0, 1.0, ""
        self._last = 0.0

    def enter(self, base: float, width: float, stage: str) -> None:
        self.base, self.width, self.stage = base, width, stage
        self.report(0.0)

    def report(self, frac: float) -> None:
        self.check()
        if self._progress is not None:
            # Never backwards, not even by the rounding of base + width at a stage's end.
            p = max(self._last, min(1.0, self.base + self.width * min(max(frac, 0.0), 1.0)))
            self._last = p
            try:
                self._progress(p, self.stage)
            except TypeError:
                self._progress(p)

    def check(self) -> None:
        if self._cancel is not None and self._cancel():
            raise _core.Cancelled("evaluation cancelled")


# ---------------------------------------------------------------------------------------------
# The plan, per tensor


def plan_source(plan: PlanLike):
    """(kind, text) as _core takes plans: a dict, a plan file, or a datatype string."""
    if isinstance(plan, Mapping):
        return "json", json.dumps(plan)
    p = os.fspath(plan)
    if os.path.exists(p):
        return "file", p
    return "dtype", str(plan)


def plan_layout(model: Any, plan: PlanLike, axis: str = "auto", layout: str = "native") -> List[Dict[str, Any]]:
    """Per tensor of ``model`` (a castscope.Model): the datatype the plan gives it (None: kept)
    and the quantization axis the engine resolves for it, exactly as ``export`` casts it.

    The axis comes from the engine's own resolution for the tensor (the plan rule's axis, else
    ``axis``), so a per-tensor layout the engine learns is picked up here without change."""
    kind, text = plan_source(plan)
    return list(_core._plan_layout(model._m, kind, text, str(axis), layout))


# Calibration inputs by weight name for the plan's gptq / awq rules, set by evaluate() while its
# runtime backend runs (the backends hand cast_weight only the plan entry and the cast options).
calib_inputs: contextvars.ContextVar[Optional[Callable[[str], Optional[np.ndarray]]]] = \
    contextvars.ContextVar("castscope_eval_calib", default=None)


def open_calib(path: Union[str, os.PathLike, Mapping[str, Any], None]):
    """Calibration inputs keyed by weight name: a .safetensors / .npz file (read a tensor at a
    time) or a mapping; None: none."""
    if path is None:
        return None
    if isinstance(path, Mapping):
        return lambda name: path.get(name)
    from . import Model
    m = Model(os.fspath(path))
    return lambda name: np.asarray(m[name].numpy(), dtype=np.float32) if name in m else None


def cast_weight(values: np.ndarray, entry: Mapping[str, Any], cast_opts: Mapping[str, Any]) -> np.ndarray:
    """The virtual-cast float32 values of one planned tensor, through castscope.cast, or with
    the plan rule's method through castscope.quantize, as export writes its codes."""
    from . import cast, quantize

    if entry.get("rotate"):
        raise EvalError(
            f"plan rotates '{entry['name']}' ({entry['rotate']}); a rotated weight is not the same "
            "layer unless its activations are rotated too, which evaluation cannot do in the runtime")
    method = entry.get("method", "rtn")
    if method != "rtn":
        calib = calib_inputs.get()
        x = calib(entry["name"]) if calib else None
        o = entry["method_options"]
        return np.asarray(quantize(values, entry["dtype"], method=method, calib=x, axis=entry["axis"],
                                   damp=o["damp"], block=o["block"], act_order=o["act_order"],
                                   static_groups=o["static_groups"],
                                   four_over_six=o["four_over_six"], name=entry["name"]))
    return np.asarray(cast(values, entry["dtype"], axis=entry["axis"], **cast_opts))


def plan_size(layout: List[Mapping[str, Any]]) -> Dict[str, Any]:
    """Bits per weight of the plan: over the tensors it casts, and over every float weight of
    rank >= 2 (kept ones at their stored width)."""
    # Stored dtype names as the readers give them (safetensors, GGUF, ONNX, numpy).
    stored_bits = {"F64": 64, "F32": 32, "F16": 16, "BF16": 16, "FLOAT": 32, "FLOAT16": 16,
                   "DOUBLE": 64, "BFLOAT16": 16, "FLOAT32": 32, "FLOAT64": 64}
    cast_n = cast_bits = all_n = all_bits = 0.0
    for e in layout:
        n = float(np.prod(e["shape"])) if e["shape"] else 1.0
        if e["dtype"] is not None:
            # The exact storage (storage_bits: partial blocks whole, a tensor scale once), the
            # size the budget planner counts; bits_per_value where an older engine lacks it.
            b = float(e["storage_bits"]) / n if "storage_bits" in e else float(e["bits_per_value"])
            cast_n += n
            cast_bits += n * b
        elif str(e["stored"]).upper() in stored_bits:
            b = float(stored_bits[str(e["stored"]).upper()])
        elif str(e["stored"]).upper().startswith(("Q", "IQ")):
            try:  # a GGUF block type kept as stored: its registry datatype's width
                b = _core.DataType(str(e["stored"]).lower()).bits_per_value()
            except _core.Error:
                continue
        else:
            continue  # integer storage: not a float weight the plan could cast
        if len(e["shape"]) >= 2:
            all_n += n
            all_bits += n * b
    return {
        "tensors_cast": sum(1 for e in layout if e["dtype"] is not None),
        "params_cast": int(cast_n),
        "bits_per_weight_cast": cast_bits / cast_n if cast_n else None,
        "params_weights": int(all_n),
        "bits_per_weight": all_bits / all_n if all_n else None,
        "bytes_weights": int(all_bits / 8),
    }


# ---------------------------------------------------------------------------------------------
# Comparing outputs


def _softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def distribution_kind(ref: np.ndarray) -> Optional[str]:
    """How an output reads as a distribution over its last axis: 'probabilities' (non-negative,
    summing to 1), 'logits' (any other float output with a last axis of 2 or more), or None."""
    if ref.dtype.kind != "f" or ref.ndim == 0 or ref.shape[-1] < 2 or not np.isfinite(ref).all():
        return None
    if ref.min() >= 0 and np.allclose(ref.sum(axis=-1, dtype=np.float64), 1.0, atol=1e-3):
        return "probabilities"
    return "logits"


def compare_output(name: str, ref: np.ndarray, out: np.ndarray) -> Dict[str, Any]:
    """SNR of ``out`` against ``ref``; where ``ref`` is a distribution over its last axis, the
    mean KL(ref || out) over the other axes and the fraction of positions whose top-1 agrees."""
    if ref.shape != out.shape:
        raise EvalError(f"output '{name}': the quantized model gave shape {list(out.shape)}, "
                        f"the original {list(ref.shape)}")
    r = ref.astype(np.float64)
    d = out.astype(np.float64) - r
    sig, err = float(np.sum(r * r)), float(np.sum(d * d))
    snr = math.inf if err == 0 else (10 * math.log10(sig / err) if sig > 0 else -math.inf)
    res: Dict[str, Any] = {"name": name, "shape": list(ref.shape), "snr_db": snr,
                           "max_abs_err": float(np.abs(d).max()) if d.size else 0.0}
    kind = distribution_kind(ref)
    res["distribution"] = kind
    if kind is not None:
        rr = ref.reshape(-1, ref.shape[-1])
        oo = out.reshape(-1, out.shape[-1])
        if kind == "probabilities":
            p = rr.astype(np.float64)
            # Probabilities that underflowed to zero in the quantized run would make KL infinite;
            # the floor is far below what a float32 softmax distinguishes from zero.
            logp = np.log(np.maximum(p, 1e-30))
            logq = np.log(np.maximum(oo.astype(np.float64), 1e-30))
        else:
            logp, logq = _log_softmax(rr), _log_softmax(oo)
            p = np.exp(logp)
        kl = np.sum(p * (logp - logq), axis=-1)
        res["kl"] = float(np.mean(kl))
        res["kl_max"] = float(np.max(kl))
        res["top1"] = float(np.mean(rr.argmax(-1) == oo.argmax(-1)))
        res["positions"] = int(rr.shape[0])
    return res


def perplexity(logits: np.ndarray, tokens: np.ndarray) -> float:
    """exp(mean NLL) of each next token: logits [B, S, V] against tokens [B, S]."""
    lp = _log_softmax(logits[:, :-1, :])
    nxt = tokens[:, 1:]
    nll = -np.take_along_axis(lp, nxt[..., None].astype(np.int64), axis=-1)[..., 0]
    return float(np.exp(nll.mean()))


# ---------------------------------------------------------------------------------------------
# The result


@dataclass
class EvalResult:
    """What :func:`castscope.evaluate` measured. ``to_dict()`` gives the JSON the CLI prints."""

    model: str
    format: str
    runtime: str
    device: str
    plan: str
    act_dtype: Optional[str]
    inputs: Dict[str, Any]
    size: Dict[str, Any]
    outputs: List[Dict[str, Any]]
    tensors: List[Dict[str, Any]]
    perplexity: Optional[Dict[str, float]] = None
    notes: List[str] = field(default_factory=list)
    seconds: float = 0.0

    def _main(self) -> Optional[Dict[str, Any]]:
        """The output that the headline figures come from: the first distribution, else the
        first output."""
        for o in self.outputs:
            if o.get("distribution"):
                return o
        return self.outputs[0] if self.outputs else None

    kl = property(lambda self: (self._main() or {}).get("kl"))
    top1 = property(lambda self: (self._main() or {}).get("top1"))
    snr_db = property(lambda self: (self._main() or {}).get("snr_db"))
    bits_per_weight = property(lambda self: self.size.get("bits_per_weight"))
    synthetic = property(lambda self: bool(self.inputs.get("synthetic")))

    def to_dict(self) -> Dict[str, Any]:
        return {
            "model": self.model, "format": self.format, "runtime": self.runtime,
            "device": self.device, "plan": self.plan, "act_dtype": self.act_dtype,
            "inputs": self.inputs, "size": self.size,
            "kl": self.kl, "top1": self.top1, "snr_db": self.snr_db,
            "perplexity": self.perplexity, "outputs": self.outputs, "tensors": self.tensors,
            "notes": self.notes, "seconds": self.seconds,
        }

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def summary(self) -> str:
        lines = [f"{self.model} ({self.format}) in {self.runtime} on {self.device}",
                 f"plan {self.plan}: {self.size['tensors_cast']} tensors cast, "
                 + (f"{self.size['bits_per_weight_cast']:.3f} bits per cast weight, "
                    if self.size.get("bits_per_weight_cast") else "")
                 + (f"{self.size['bits_per_weight']:.3f} bits per weight overall"
                    if self.size.get("bits_per_weight") else ""),
                 "inputs: " + self.inputs["description"]]
        if self.act_dtype:
            lines.append(f"activations cast to {self.act_dtype}")
        for o in self.outputs:
            s = f"  {o['name']} {o['shape']}: SNR {o['snr_db']:.2f} dB"
            if o.get("distribution"):
                s += f", KL {o['kl']:.6g}, top-1 {100 * o['top1']:.2f}% ({o['distribution']})"
            lines.append(s)
        if self.perplexity:
            lines.append(f"perplexity: original {self.perplexity['original']:.4f}, "
                         f"quantized {self.perplexity['quantized']:.4f}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def detect_format(path: str) -> str:
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, "config.json")):
            return "hf"
        raise EvalError(f"'{path}' is a directory without config.json: not a Hugging Face model "
                        "directory that transformers can load")
    low = path.lower()
    if low.endswith(".onnx"):
        return "onnx"
    if low.endswith(".gguf"):
        return "gguf"
    raise EvalError(f"'{path}': evaluation runs ONNX models (.onnx), Hugging Face model "
                    "directories and GGUF files (.gguf)")
