"""GGUF models in llama.cpp through its Python binding (llama-cpp-python, imported only here).
The quantized model is the same GGUF file with every planned tensor stored as F32 cast values
(metadata and the other tensors copied as they are), written with ggml's gguf package."""

from __future__ import annotations

import os
import tempfile
from typing import Any, List, Tuple

import numpy as np

from ._eval_common import (EvalError, EvalResult, Job, cast_weight, compare_output, perplexity,
                    token_ids, plan_layout, plan_size)

INSTALL_HINT = ("GGUF models are evaluated in llama.cpp through its Python binding, which is not "
                "installed here: pip install llama-cpp-python (it builds llama.cpp; "
                "CMAKE_ARGS=-DGGML_CUDA=on for CUDA)")


def _llama():
    try:
        import llama_cpp
    except ImportError:
        raise EvalError(INSTALL_HINT) from None
    return llama_cpp


def _gguf():
    try:
        import gguf
    except ImportError:
        raise EvalError("writing the quantized GGUF needs ggml's gguf package: pip install gguf") from None
    return gguf


def write_quantized(path: str, layout, cast_opts, out: str, job: Job, cmodel) -> None:
    """`path` with the planned tensors replaced by their cast values (F32), into `out`."""
    gguf = _gguf()
    reader = gguf.GGUFReader(path)
    arch_field = reader.fields.get("general.architecture")
    if arch_field is None:
        raise EvalError(f"'{path}' has no general.architecture; llama.cpp cannot run it")
    writer = gguf.GGUFWriter(out, arch=arch_field.contents(), endianess=reader.endianess)
    for f in reader.fields.values():
        if f.name == "general.architecture" or f.name.startswith("GGUF."):
            continue
        vtype = f.types[0]
        sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(f.name, f.contents(), vtype, sub_type=sub)
    planned = {e["name"]: e for e in layout if e["dtype"] is not None}
    total = sum(max(1, int(np.prod(e["shape"]))) for e in planned.values()) or 1
    done = 0
    for t in reader.tensors:
        job.check()
        if t.name in planned:
            e = planned[t.name]
            q = cast_weight(cmodel[t.name].numpy(), e, cast_opts)
            writer.add_tensor(t.name, np.ascontiguousarray(q, dtype=np.float32).reshape(e["shape"]))
            done += max(1, int(np.prod(e["shape"])))
            job.report(done / total)
        else:
            writer.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _vocab(path: str) -> int:
    gguf = _gguf()
    f = gguf.GGUFReader(path).fields.get("tokenizer.ggml.tokens")
    return len(f.data) if f is not None else 0


def _tokens(llm, path: str, inputs: Any, seed: int, max_tokens: int, n_vocab: int) -> Tuple[np.ndarray, bool, str]:
    def tokenize(p):
        with open(p, "rb") as f:
            return np.asarray(llm.tokenize(f.read())[:max_tokens], dtype=np.int64)[None, :]

    return token_ids(inputs, seed, n_vocab, max_tokens, tokenize, f"'{path}' has no vocabulary")


def _logits(llm, tokens: np.ndarray, job: Job) -> np.ndarray:
    outs = []
    for i in range(tokens.shape[0]):
        job.check()
        llm.reset()
        llm.eval([int(x) for x in tokens[i]])
        outs.append(np.array(llm.scores[: tokens.shape[1]], dtype=np.float32)[None])
        job.report((i + 1) / tokens.shape[0])
    return np.concatenate(outs, axis=0)


def run(path, plan, plan_desc, inputs, act_dtype, device, seed, cast_opts, axis, max_tokens, job: Job,
        save_quantized) -> EvalResult:
    llama_cpp = _llama()
    from . import Model

    gpu = bool(getattr(llama_cpp, "llama_supports_gpu_offload", lambda: False)())
    if device == "cuda" and not gpu:
        raise EvalError("device cuda: this llama-cpp-python was built without GPU offload "
                        "(CMAKE_ARGS=-DGGML_CUDA=on pip install llama-cpp-python)")
    n_gpu = -1 if device in ("auto", "cuda") and gpu else 0
    job.enter(0.0, 0.05, "loading")
    cmodel = Model(path)
    # ggml quantizes rows: the gguf layout resolves every "auto" axis to the last one.
    layout = plan_layout(cmodel, plan, axis, layout="gguf")

    def load(p: str, what: str):
        try:
            return llama_cpp.Llama(model_path=p, n_ctx=max(max_tokens, 8), logits_all=True,
                                   n_gpu_layers=n_gpu, seed=seed, verbose=False)
        except Exception as e:
            raise EvalError(f"llama.cpp cannot load the {what} model '{path}': {e}") from None

    llm = load(path, "original")
    tokens, synthetic, desc = _tokens(llm, path, inputs, seed, max_tokens, llm.n_vocab())
    job.enter(0.05, 0.25, "running the original model")
    ref = _logits(llm, tokens, job)
    del llm
    with tempfile.TemporaryDirectory(prefix="castscope-eval-") as tmp:
        qpath = os.fspath(save_quantized) if save_quantized else os.path.join(tmp, "quantized.gguf")
        job.enter(0.3, 0.4, "casting weights")
        write_quantized(path, layout, cast_opts, qpath, job, cmodel)
        qllm = load(qpath, "quantized")
        job.enter(0.7, 0.3, "running the quantized model")
        out = _logits(qllm, tokens, job)
        del qllm
    notes: List[str] = []
    if act_dtype:
        notes.append(f"activations were not cast to {act_dtype}: llama.cpp runs its own kernels "
                     "without showing CastScope their inputs; only weights are cast")
    if synthetic:
        notes.append("perplexity on synthetic token ids measures agreement, not language")
    tensors = [{"name": e["name"], "dtype": e["dtype"], "axis": e["axis_desc"],
                "bits_per_value": e["bits_per_value"]} for e in layout if e["dtype"] is not None]
    return EvalResult(
        model=path, format="gguf", runtime=f"llama.cpp (llama-cpp-python {llama_cpp.__version__})",
        device="cuda" if n_gpu else "cpu", plan=plan_desc, act_dtype=None,
        outputs=[compare_output("logits", ref, out)], tensors=tensors,
        inputs={"synthetic": synthetic, "description": desc, "shapes": {"tokens": list(tokens.shape)}},
        size=plan_size(layout), perplexity={"original": perplexity(ref, tokens),
                                            "quantized": perplexity(out, tokens)},
        notes=notes)
