"""End-to-end evaluation of a plan: the original and the plan-quantized model run in the model's
own runtime (onnxruntime, PyTorch + transformers, llama.cpp) on the same inputs, their outputs
compared. The runtimes live in _eval_onnx, _eval_hf and _eval_gguf, what they share in
_eval_common (re-exported here); this module picks the runtime."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Mapping, Optional, Union

from . import _core
from ._eval_common import (  # noqa: F401  (re-exported)
    EvalError, EvalResult, Job, PlanLike, cast_weight, compare_output, detect_format,
    calib_inputs, distribution_kind, open_calib, perplexity, plan_layout, plan_size, plan_source,
    require_modules, token_ids)


def evaluate(
    model: Union[str, os.PathLike],
    plan: PlanLike,
    inputs: Any = None,
    act_dtype: Optional[str] = None,
    device: str = "auto",
    seed: int = 0,
    round: str = "even",
    scale_mode: str = "floor",
    axis: Union[int, str] = "auto",
    max_tokens: int = 512,
    progress: Optional[Callable[..., Any]] = None,
    cancel: Optional[Callable[[], bool]] = None,
    save_quantized: Optional[Union[str, os.PathLike]] = None,
    calib: Any = None,
) -> EvalResult:
    """Run the original and the plan-quantized ``model`` in its own runtime on the same inputs
    and compare their outputs (``castscope-cli eval`` runs this).

    Args:
        model: an ONNX file (onnxruntime), a Hugging Face model directory (PyTorch +
            transformers) or a GGUF file (llama.cpp, where llama-cpp-python is installed).
        plan: as for :func:`export`: a plan file, a plan dict or a datatype string. Every tensor
            the plan casts is replaced by its virtual-cast values (:func:`cast`), on the axis
            the engine resolves for it, before the runtime loads the model.
        inputs: ONNX: an .npy (one-input graphs) / .npz path, an array or a dict of arrays,
            checked against the graph's input names, dtypes and shapes. Language models: token
            ids (.npy or an integer array, [tokens] or [batch, tokens]) or a text file read
            with the model's tokenizer. None: inputs synthesized from the model's input spec
            with ``seed``; the result says they are synthetic.
        act_dtype: also cast activations (the inputs of every Linear / Conv1D layer but the
            output head) to this datatype, where the runtime shows them (PyTorch only).
        device: ``auto`` | ``cpu`` | ``cuda`` for the runtime.
        round, scale_mode, seed, axis: the cast options, as :func:`export` takes them.
        max_tokens: the most tokens per sequence evaluated (text is cut there).
        progress: ``progress(fraction, stage)`` (or ``progress(fraction)``) as the work goes
            on; an exception it raises stops the evaluation.
        cancel: called often; returning True stops the evaluation with :class:`Cancelled`.
            Ctrl+C stops it too.
        save_quantized: also write the quantized model as the runtime ran it (ONNX file,
            safetensors of the PyTorch state dict, GGUF file).
        calib: calibration inputs [tokens, in] keyed by weight name (a .safetensors / .npz path
            or a mapping) for the plan's gptq / awq rules; rules with a method quantize their
            weights with it (:func:`quantize`), as ``export`` does.

    Returns an :class:`EvalResult`: per output SNR, and where the output is a distribution over
    its last axis (logits or probabilities) the mean KL divergence and top-1 agreement; the
    perplexity of both models for token inputs; the plan's bits per weight; ``to_dict()`` gives
    the JSON of ``castscope-cli eval --json``. Bad input raises :class:`Error` naming it.
    """
    start = time.monotonic()
    path = os.fspath(model)
    if not os.path.exists(path):
        raise EvalError(f"model '{path}' does not exist")
    fmt = detect_format(path)
    device = "cuda" if device == "gpu" else device
    if device not in ("auto", "cpu", "cuda"):
        raise EvalError(f"device '{device}': expected auto, cpu or cuda")
    if act_dtype is not None:
        _core.DataType(str(act_dtype))  # a bad datatype fails here, before any model is loaded
    job = Job(progress, cancel)
    cast_opts = {"round": round, "scale_mode": scale_mode, "seed": int(seed)}
    if isinstance(plan, Mapping):
        plan_desc = "<plan>"
    else:
        plan_desc = os.fspath(plan)
    ctx = dict(path=path, plan=plan, plan_desc=plan_desc, inputs=inputs, act_dtype=act_dtype,
               device=device, seed=int(seed), cast_opts=cast_opts, axis=str(axis),
               max_tokens=int(max_tokens), job=job,
               save_quantized=os.fspath(save_quantized) if save_quantized else None)
    if fmt == "onnx":
        from . import _eval_onnx as backend
    elif fmt == "hf":
        from . import _eval_hf as backend
    else:
        from . import _eval_gguf as backend
    token = calib_inputs.set(open_calib(calib))
    try:
        result = backend.run(**ctx)
    finally:
        calib_inputs.reset(token)
    job.enter(1.0, 0.0, "done")
    result.seconds = time.monotonic() - start
    return result
