"""CastScope for Python: low-precision number formats on numpy arrays and PyTorch tensors.

>>> import numpy as np, castscope
>>> x = np.random.default_rng(0).standard_normal((4, 64), dtype=np.float32)
>>> q = castscope.cast(x, "mxfp4e2")                       # virtual: float32 values
>>> r = castscope.cast(x, "mxfp4e2", mode="compress")      # codes + scales, packed
>>> bool((r.upcast() == q).all())
True

Inputs are numpy arrays or any DLPack tensor (PyTorch CPU and CUDA tensors are used in place,
without a copy) of float32, float16, bfloat16 or float64; results come back in the input's
framework and on its device. Engine errors raise :class:`castscope.Error` with the engine's
message; long calls release the GIL and stop on Ctrl+C (KeyboardInterrupt).
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Union

import numpy as np

from . import _core
from ._eval import EvalResult, evaluate  # noqa: F401  (re-exported)
from ._plan import plan  # noqa: F401  (re-exported)
from ._core import (  # noqa: F401  (re-exported)
    CastResult,
    Cancelled,
    DataType,
    Error,
    ResolvedLayout,
    TensorInfo,
    backend_info,
    datatypes,
    gemm_available,
    transfer_counters,
)

__all__ = [
    "CastResult",
    "Cancelled",
    "DataType",
    "Error",
    "Model",
    "LazyTensor",
    "ResolvedLayout",
    "TensorInfo",
    "backend_info",
    "cast",
    "datatypes",
    "evaluate",
    "EvalResult",
    "export",
    "gemm",
    "gemm_available",
    "metrics",
    "open_model",
    "plan",
    "quantize",
    "transfer_counters",
]

__version__ = "0.1.0"


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "is_cuda")


def _prepare(x: Any, what: str):
    """(array for the engine, storage override, framework name) for one input tensor."""
    if _is_torch(x):
        import torch

        t = x.detach()
        if t.device.type not in ("cpu", "cuda"):
            raise Error(f"{what} is on device '{t.device}'; cast takes CPU and CUDA tensors")
        if not t.is_contiguous():
            t = t.contiguous()
        if t.is_cuda:
            # The engine's kernels run on their own per-thread stream: work queued on the
            # caller's stream must be finished before they read the tensor.
            torch.cuda.current_stream(t.device).synchronize()
        return t, "", "torch"
    if hasattr(x, "__dlpack__") and not isinstance(x, np.ndarray):
        # Other DLPack producers (CuPy, JAX, ...): host memory through numpy, device memory
        # through PyTorch, both without a copy; results come back in that framework.
        if x.__dlpack_device__()[0] == 1:
            x = np.from_dlpack(x)
        else:
            try:
                import torch
            except ImportError:
                raise Error(f"{what} is device memory; PyTorch is needed to hand it over") from None
            return _prepare(torch.from_dlpack(x), what)
    a = np.asarray(x)
    if a.dtype.name == "bfloat16":  # ml_dtypes: no DLPack / buffer code, so pass the bits
        return np.ascontiguousarray(a).view(np.uint16), "bfloat16", "numpy"
    if a.dtype.kind != "f":
        raise Error(f"{what} holds {a.dtype}; cast needs float32, float16, bfloat16 or float64 data")
    return np.ascontiguousarray(a), "", "numpy"


def _dtype(d: Union[str, DataType]) -> DataType:
    return d if isinstance(d, DataType) else DataType(str(d))


def cast(
    x: Any,
    dtype: Union[str, DataType],
    round: str = "even",
    scale_mode: str = "floor",
    overflow: str = "saturate",
    seed: int = 0,
    mode: str = "virtual",
    device: str = "auto",
    axis: Union[int, str] = "auto",
    tcfp_absmax: bool = False,
    threads: int = 0,
) -> Any:
    """Cast ``x`` to ``dtype``, exactly as ``castscope-cli cast`` does.

    Args:
        x: numpy array or DLPack tensor (float32 / float16 / bfloat16 / float64, any rank).
        dtype: registry name (``"mxfp4e2"``, ``"nvfp4"``) or datatype string, or a DataType.
        round: ``even`` | ``away`` | ``zero`` | ``stochastic`` (seeded by ``seed``).
        scale_mode: ``floor`` | ``ceil`` | ``midmax`` | ``option3`` | ``topbinade``.
        overflow: ``saturate`` | ``ieee``.
        mode: ``virtual`` returns the float32 values the datatype represents, in x's framework
            and on x's device; ``actual`` / ``compress`` return a :class:`CastResult` with the
            codes and scaling tensors (unpacked / packed as in docs/formats.md).
        device: ``auto`` | ``cpu`` | ``cuda``. A CUDA tensor is cast on its GPU in place; a host
            array may be cast on the GPU (``cuda``) with the result back on the host.
        axis: quantization axis, as ``castscope-cli --axis``: ``"auto"`` (a conv weight of rank
            4 or 5 over its flattened I*kh*kw, anything else over its last axis; a model
            tensor's :meth:`LazyTensor.cast` takes its resolved layout instead), an int
            (negative counts from the end), ``"A:"`` (axes A to the end flattened) or ``":A"``
            (axes 0 to A flattened, e.g. ``":2"`` for a Keras kernel [kh, kw, Cin, Cout]).
        tcfp_absmax: TCFP-8 block scales at absmax instead of 3 sigma.
        threads: CPU threads (0: all).
    """
    arr, as_dtype, fw = _prepare(x, "the input tensor")
    r = _core._cast(arr, _dtype(dtype), round, scale_mode, overflow, int(seed), str(axis), mode,
                    device, bool(tcfp_absmax), int(threads), as_dtype, fw)
    return r.values if mode == "virtual" else r


class QuantizeResult(NamedTuple):
    """What :func:`quantize` returns with ``mode="actual"``: the cast (codes and scales), awq's
    pre-quant scale (inputs divide by it; None for the other methods) and the layer output error
    ||X W^T - X Q^T|| on the calibration inputs (0 without them)."""

    cast: "CastResult"
    pre_quant_scale: Any
    output_error: float


def quantize(
    w: Any,
    dtype: Union[str, DataType],
    method: str = "rtn",
    calib: Any = None,
    mode: str = "virtual",
    axis: Union[int, str] = "auto",
    damp: float = 0.01,
    block: int = 128,
    act_order: bool = False,
    static_groups: bool = False,
    four_over_six: bool = False,
    name: str = "weight",
) -> Any:
    """Quantize weight ``w`` [out, in] to ``dtype`` with a method, as ``castscope-cli cast
    --method`` does (docs/formats.md, "Methods"); on the CPU.

    Args:
        method: ``rtn`` (the cast) | ``gptq`` | ``mse`` | ``awq``.
        calib: activations [tokens, in] (gptq and awq need them).
        mode: ``virtual`` returns the weight as the layer applies it (awq: Q(W s) / s);
            ``actual`` a :class:`QuantizeResult`.
        damp, block, act_order, static_groups: gptq's options (llm-compressor's
            dampening_frac, block_size, actorder "weight"; static_groups chooses every group
            scale from the original weight, as llm-compressor does).
        four_over_six: mse: NVFP4 blocks map their absmax onto 6 or 4, whichever errs less.
    """
    if mode not in ("virtual", "actual"):
        raise Error(f"quantize: mode must be 'virtual' or 'actual' (got {mode!r})")
    arr, as_dtype, fw = _prepare(w, "the weight")
    c = None
    if calib is not None:
        if _is_torch(calib):
            calib = calib.detach().cpu().float().numpy()
        c = np.ascontiguousarray(np.asarray(calib, dtype=np.float32))
    r, s, err = _core._quantize(arr, _dtype(dtype), method, c, str(axis), float(damp),
                                int(block), bool(act_order), bool(static_groups),
                                bool(four_over_six), name, as_dtype, fw)
    if mode == "actual":
        return QuantizeResult(r, s, err)
    v = r.upcast()
    if s is not None:
        v = v / s
    return v


def metrics(x: Any, y: Any, clipped: int = 0) -> Dict[str, float]:
    """Error statistics of ``y`` (float32 values, or a CastResult) against the original ``x``.

    Returns count, nonfinite_in, nonfinite_out, clipped, clipped_pct, zeros_out, mse, snr_db,
    max_abs_err, mean_err (the bias, mean of y - x) and signal_power, over the finite inputs.
    """
    if isinstance(y, CastResult):
        clipped = clipped or y.counts["clipped"]
        y = y.upcast()
    a, as_dtype, _ = _prepare(x, "x")
    if _is_torch(y):
        b = y.detach().float().contiguous()
    else:
        b = np.ascontiguousarray(np.asarray(y, dtype=np.float32))
    return _core._metrics(a, b, as_dtype, int(clipped))


class LazyTensor:
    """A model tensor whose data is read only when asked for (``numpy()``, ``torch()``)."""

    def __init__(self, model: "Model", info: TensorInfo):
        self._model = model
        self.info = info

    name = property(lambda self: self.info.name)
    dtype = property(lambda self: self.info.dtype, doc="Stored dtype (BF16, F8_E4M3, Q4_0, ...).")
    shape = property(lambda self: tuple(self.info.shape))
    nbytes = property(lambda self: self.info.nbytes)
    stored = property(lambda self: self.info.stored,
                      doc="How a quantized checkpoint stores it (:class:`StoredQuant`: convention, "
                          "datatype, format, parts, stored_bytes, bits_per_weight), else None; "
                          "numpy() gives its dequantized values.")

    def numpy(self, raw: bool = False) -> np.ndarray:
        """float32 values (``raw``: the stored dtype, where numpy has one)."""
        return self._model._m._load(self.name, raw, "numpy")

    def torch(self, raw: bool = False):
        return self._model._m._load(self.name, raw, "torch")

    layout = property(lambda self: self.info.layout,
                      doc="The resolved quantization layout (:class:`ResolvedLayout`).")
    view = property(lambda self: tuple(self.info.view),
                    doc="The 2-D view [outputs, reduction] its layout casts.")

    def cast(self, dtype: Union[str, DataType], axis: Union[int, str] = "auto", **kwargs) -> Any:
        """Cast the tensor as ``castscope-cli`` casts it in a model: along its resolved layout
        (``axis="auto"``), or along ``axis`` if named. Other arguments as :func:`cast`."""
        if str(axis) == "auto" and self.info.layout.name:
            axis = self.info.layout.axis
        return cast(self.numpy(), dtype, axis=axis, **kwargs)

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self) -> str:
        return f"LazyTensor({self.name!r}, {self.dtype}, {list(self.shape)})"


class Model:
    """A checkpoint (safetensors file / directory / index, npz, npy, GGUF, ONNX) opened from its
    headers; tensors are mapped and converted only when used."""

    def __init__(self, path: Union[str, os.PathLike]):
        self._m = _core._open_model(os.fspath(path))
        self._infos = {t.name: t for t in self._m.tensors}

    path = property(lambda self: self._m.path)
    format = property(lambda self: self._m.format)

    @property
    def tensors(self) -> List[TensorInfo]:
        return list(self._m.tensors)

    def keys(self) -> List[str]:
        return list(self._infos)

    def __getitem__(self, name: str) -> LazyTensor:
        if name not in self._infos:
            raise KeyError(f"{self.path!r} has no tensor {name!r}")
        return LazyTensor(self, self._infos[name])

    def __contains__(self, name: object) -> bool:
        return name in self._infos

    def __iter__(self) -> Iterator[str]:
        return iter(self._infos)

    def __len__(self) -> int:
        return len(self._infos)

    def __repr__(self) -> str:
        return f"Model({self.path!r}, {self.format}, {len(self)} tensors)"

    def map(
        self,
        dtypes: List[str],
        round: str = "even",
        scale_mode: str = "floor",
        axis: Union[int, str] = "auto",
        device: str = "auto",
        filter: str = "",
        include_1d: bool = False,
        include_embeddings: bool = False,
        progress: Optional[Callable[[float], None]] = None,
    ) -> Dict[str, Any]:
        """The model map of ``castscope-cli map``: every weight cast to every datatype along its
        resolved layout (``axis="auto"``), by the same engine sweep, so every figure equals the
        CLI's. Returns ``{"columns", "rows": [{"name", "shape", "axis", "layout",
        "layout_guessed", "cells": [{"snr_db", "mse", ..., "storage_bits", "bits_per_value"} or
        {"error"}]}], "backend",
        "seconds"}``."""
        return _core._map(self._m, [str(d) for d in dtypes], round, scale_mode, str(axis),
                          device, filter, bool(include_1d), bool(include_embeddings), progress)


def open_model(path: Union[str, os.PathLike]) -> Model:
    """Open a model lazily: only headers are read until a tensor is used."""
    return Model(path)


def export(
    model: Union[Model, str, os.PathLike],
    out: Union[str, os.PathLike],
    plan: Union[str, os.PathLike, Mapping[str, Any]],
    layout: str = "native",
    round: str = "even",
    scale_mode: str = "floor",
    seed: int = 0,
    axis: Union[int, str] = "auto",
    device: str = "auto",
    config_path: str = "",
    metadata: Optional[Mapping[str, str]] = None,
    progress: Optional[Callable[[float], None]] = None,
) -> Dict[str, Any]:
    """Export ``model`` to ``out``, as ``castscope-cli export`` does.

    ``plan`` is a plan file path, a plan as a dict (the JSON of docs/export-formats.md), or a
    datatype string (every float weight of rank 2 or more to it along its resolved layout,
    1-D tensors and embeddings kept). ``layout``: native |
    gpt-oss | compressed-tensors | gguf. ``progress(fraction)`` is called from this thread; an
    exception it raises cancels the export. The output is written to a temporary file, verified
    and renamed: an error or Ctrl+C leaves nothing at ``out``. Returns the per-tensor report.
    """
    m = model if isinstance(model, Model) else Model(model)
    out = os.fspath(out)
    if os.path.isdir(out):
        out = os.path.join(out, "model.gguf" if layout == "gguf" else "model.safetensors")
    if isinstance(plan, Mapping):
        kind, text = "json", json.dumps(plan)
    elif os.path.exists(os.fspath(plan)):
        kind, text = "file", os.fspath(plan)
    else:
        kind, text = "dtype", str(plan)
    return _core._export(m._m, out, kind, text, layout, round, scale_mode, int(seed), str(axis),
                         device, config_path, dict(metadata or {}), progress)


def gemm(kind: str = "fp8", m: int = 4096, n: int = 4096, k: int = 4096, seed: int = 1,
         warmup: int = 3, iters: int = 10, check: bool = True) -> Dict[str, Any]:
    """Time one tensor-core GEMM (bf16 | fp8 | fp8-block | tcfp12 | tcfp16) on random inputs.

    Returns ms (median), tflops and rel_error against an fp64 reference. Raises Error where no
    GPU is present (see :func:`gemm_available`).
    """
    return _core._gemm(kind, m, n, k, seed, warmup, iters, check)
