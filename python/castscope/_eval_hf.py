"""Hugging Face model directories in PyTorch with transformers. The quantized model is the same
checkpoint with every planned tensor replaced by its cast values (float32), loaded by
transformers itself, so that its own conversions (fused MoE experts, tied heads) apply to both
models alike. Activations are cast through forward pre-hooks on the Linear / Conv1D layers."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ._eval_common import (EvalError, EvalResult, Job, cast_weight, compare_output, perplexity,
                    token_ids, plan_layout, plan_size, require_modules)


def _import():
    return require_modules("a Hugging Face model", ["torch", "transformers"])


def _load(transformers, torch, path: str, dev: str, what: str):
    kw = {"dtype": torch.float32}
    try:
        try:
            m = transformers.AutoModelForCausalLM.from_pretrained(path, **kw)
        except ValueError:  # not a causal LM: the bare model, its hidden states compared
            m = transformers.AutoModel.from_pretrained(path, **kw)
    except Exception as e:
        raise EvalError(f"transformers cannot load the {what} model '{path}': {e}") from None
    return m.to(dev).eval()


def _config_limits(path: str) -> Tuple[Optional[int], Optional[int]]:
    import json

    try:
        with open(os.path.join(path, "config.json")) as f:
            cfg = json.load(f)
    except Exception as e:
        raise EvalError(f"'{path}/config.json' is not readable JSON: {e}") from None
    text = cfg.get("text_config", cfg)
    vocab = text.get("vocab_size")
    ctx = text.get("max_position_embeddings") or text.get("n_positions") or text.get("n_ctx")
    return vocab, ctx


def _tokens(path: str, inputs: Any, seed: int, max_tokens: int) -> Tuple[np.ndarray, bool, str]:
    vocab, ctx = _config_limits(path)
    ctx = min(max_tokens, ctx) if ctx else max_tokens
    return token_ids(inputs, seed, vocab, ctx, lambda p: _tokenize(path, p, max_tokens, ctx),
                     f"'{path}/config.json' has no vocab_size")


def _tokenize(path: str, text_file: str, max_tokens: int, ctx: int) -> np.ndarray:
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(path)
    except Exception as e:
        raise EvalError(f"'{path}' has no tokenizer that transformers can load, needed for the "
                        f"text file '{text_file}' ({e}); give token ids as .npy instead") from None
    try:
        with open(text_file, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise EvalError(f"inputs '{text_file}' are neither .npy token ids nor UTF-8 text") from None
    ids = np.asarray(tok(text)["input_ids"], dtype=np.int64)[:max_tokens]
    if ids.size < 2:
        raise EvalError(f"'{text_file}' gives {ids.size} tokens; at least 2 are needed")
    n = (ids.size // ctx) * ctx
    return ids[:n].reshape(-1, ctx) if n else ids[None, :]


def _write_quantized(path: str, layout, cast_opts, job: Job, tmp: str, cmodel) -> None:
    """The checkpoint with the planned tensors cast (float32) in `tmp`, beside the source's
    config and tokenizer files."""
    from safetensors import safe_open
    from safetensors.torch import save_file
    import torch

    for f in os.listdir(path):
        src = os.path.join(path, f)
        if os.path.isfile(src) and not f.endswith((".safetensors", ".safetensors.index.json", ".bin",
                                                    ".pt", ".pth", ".gguf")):
            shutil.copy(src, os.path.join(tmp, f))
    infos = {t.name: t for t in cmodel.tensors}
    planned = {e["name"]: e for e in layout if e["dtype"] is not None}
    total = sum(max(1, int(np.prod(e["shape"]))) for e in planned.values()) or 1
    done = 0
    out: Dict[str, Any] = {}
    by_file: Dict[str, List[str]] = {}
    for name, info in infos.items():
        by_file.setdefault(info.file, []).append(name)
    for file, names in by_file.items():
        if not file.endswith(".safetensors"):
            raise EvalError(f"'{file}': Hugging Face directories are evaluated from safetensors "
                            "checkpoints")
        with safe_open(file, framework="pt") as f:
            for name in names:
                job.check()
                if name in planned:
                    e = planned[name]
                    q = cast_weight(cmodel[name].numpy(), e, cast_opts)
                    out[name] = torch.from_numpy(np.ascontiguousarray(q).reshape(e["shape"]))
                    done += max(1, int(np.prod(e["shape"])))
                    job.report(done / total)
                else:
                    out[name] = f.get_tensor(name)
    save_file(out, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})


def _act_hooks(torch, transformers, model, act_dtype: str, cast_opts) -> Tuple[List[Any], int, List[str]]:
    from . import cast

    kinds = [torch.nn.Linear]
    try:
        from transformers.pytorch_utils import Conv1D

        kinds.append(Conv1D)
    except ImportError:
        pass
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None

    from . import backend_info

    # A CPU-only engine casts CUDA activations through host memory (same bits, slower).
    via_host = not backend_info()["cuda_available"]

    def hook(module, args):
        x = args[0]
        if x.is_cuda and via_host:
            q = cast(x.detach().cpu().contiguous(), act_dtype, axis=-1, **cast_opts).to(x.device)
        else:
            q = cast(x.contiguous(), act_dtype, axis=-1, **cast_opts)
        return (q.to(x.dtype),) + tuple(args[1:])

    handles, notes = [], []
    for m in model.modules():
        if isinstance(m, tuple(kinds)) and m is not head:
            handles.append(m.register_forward_pre_hook(hook))
    fused = [n for n, p in model.named_parameters() if p.dim() == 3]
    if fused:
        notes.append(f"{len(fused)} parameters of rank 3 (fused experts such as {fused[0]}) are used "
                     "outside Linear layers: their inputs are not cast")
    notes.append("the output head's input is not cast")
    return handles, len(handles), notes


def _forward(torch, model, tokens: np.ndarray, dev: str, job: Job) -> np.ndarray:
    outs = []
    with torch.no_grad():
        for i in range(tokens.shape[0]):
            job.check()
            ids = torch.from_numpy(tokens[i : i + 1]).to(dev)
            r = model(input_ids=ids)
            y = r.logits if getattr(r, "logits", None) is not None else r.last_hidden_state
            outs.append(y.float().cpu().numpy())
            job.report((i + 1) / tokens.shape[0])
    return np.concatenate(outs, axis=0)


def run(path, plan, plan_desc, inputs, act_dtype, device, seed, cast_opts, axis, max_tokens, job: Job,
        save_quantized) -> EvalResult:
    torch, transformers = _import()
    from . import Model

    if device == "cuda" and not torch.cuda.is_available():
        raise EvalError("device cuda: PyTorch sees no CUDA GPU here")
    dev = "cuda" if device in ("auto", "cuda") and torch.cuda.is_available() else "cpu"
    tokens, synthetic, desc = _tokens(path, inputs, seed, max_tokens)

    job.enter(0.0, 0.05, "loading")
    cmodel = Model(path)
    layout = plan_layout(cmodel, plan, axis)
    ref_model = _load(transformers, torch, path, dev, "original")
    job.enter(0.05, 0.25, "running the original model")
    ref = _forward(torch, ref_model, tokens, dev, job)
    is_lm = getattr(ref_model, "get_output_embeddings", lambda: None)() is not None
    del ref_model

    tmp = tempfile.mkdtemp(prefix="castscope-eval-")
    try:
        job.enter(0.3, 0.4, "casting weights")
        _write_quantized(path, layout, cast_opts, job, tmp, cmodel)
        job.enter(0.7, 0.05, "loading the quantized model")
        q_model = _load(transformers, torch, tmp, dev, "quantized")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    notes: List[str] = []
    if save_quantized:
        from safetensors.torch import save_file

        save_file({k: v.detach().cpu().clone().contiguous() for k, v in q_model.state_dict().items()},
                  save_quantized)
    if act_dtype:
        handles, n, hook_notes = _act_hooks(torch, transformers, q_model, act_dtype, cast_opts)
        notes.append(f"activations cast to {act_dtype} at the inputs of {n} Linear / Conv1D layers")
        notes += hook_notes
    job.enter(0.75, 0.25, "running the quantized model")
    out = _forward(torch, q_model, tokens, dev, job)
    name = "logits" if is_lm else "last_hidden_state"
    outputs = [compare_output(name, ref, out)]
    ppl = None
    if is_lm:
        ppl = {"original": perplexity(ref, tokens), "quantized": perplexity(out, tokens)}
        if synthetic:
            notes.append("perplexity on synthetic token ids measures agreement, not language")
    tensors = [{"name": e["name"], "dtype": e["dtype"], "axis": e["axis_desc"],
                "bits_per_value": e["bits_per_value"]} for e in layout if e["dtype"] is not None]
    return EvalResult(
        model=path, format="hf",
        runtime=f"PyTorch {torch.__version__} + transformers {transformers.__version__}",
        device=dev, plan=plan_desc, act_dtype=act_dtype, outputs=outputs, tensors=tensors,
        inputs={"synthetic": synthetic, "description": desc, "shapes": {"input_ids": list(tokens.shape)}},
        size=plan_size(layout), perplexity=ppl, notes=notes)
