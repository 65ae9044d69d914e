#!/usr/bin/env python3
"""CastScope's GGUF exports run in llama.cpp itself, through its Python binding (llama-cpp-python).

A tiny random Llama is made with transformers (seeded) and written as an F16 GGUF with ggml's own
Python package (gguf-py), following llama.cpp's converter (tensor names, Q/K row order, an SPM
vocabulary with byte tokens). It is then quantized to the same per-tensor types (Q4_0, Q8_0,
Q4_K, Q6_K, IQ4_NL, MXFP4, and Q5_K, IQ4_XS) twice:
  * by CastScope: `castscope-cli export --layout gguf` with a plan of ggml's datatypes, and once
    more with CastScope's own OCP MXFP4 (`mxfp4e2`) and grammar Q8_0 (`int8_f32`) in their place;
  * by llama.cpp's model quantizer, `llama_model_quantize`, with per-tensor type overrides.
Checks:
  * every file loads in llama.cpp, evaluates a fixed token sequence and generates greedily;
  * the F16 GGUF computes the transformers model (KL of llama.cpp's logits from PyTorch's);
  * tensor bytes per type: CastScope's ggml datatypes write exactly llama.cpp's blocks; where
    CastScope's datatype differs by design (OCP rounding), the test prints how many blocks differ
    and which side's blocks have the lower squared error against the F16 values;
  * logits on the fixed sequence: CastScope's ggml file gives llama.cpp's logits bit for bit; the
    KL divergence of every file's logits from the F16 model's is printed;
  * general.file_type: CastScope's file names its dominant quantized type.

usage: test_llama_cpp.py PATH/TO/castscope-cli   (exit 77: torch, transformers, gguf or
llama_cpp missing; scripts/setup-llama-cpp.sh installs llama_cpp)
"""
import ctypes
import json
import os
import sys
import tempfile

try:
    import numpy as np
    import torch
    import gguf
    from gguf import quants
    from transformers import LlamaConfig, LlamaForCausalLM
    import llama_cpp
except ImportError as e:
    print(f"skipping: {e}")
    sys.exit(77)

from interop_common import SEED, check, cli, exit_status, failures  # noqa: E402

T = gguf.GGMLQuantizationType
VOCAB_PIECES = 61
N_VOCAB = 3 + 256 + VOCAB_PIECES
CFG = dict(vocab_size=N_VOCAB, hidden_size=512, intermediate_size=1024, num_hidden_layers=2,
           num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=128,
           rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False, initializer_range=0.05)

# Per tensor role: the ggml type, CastScope's ggml datatype for it, and CastScope's own datatype
# where it has one of a different rounding.
ROLES = {
    "attn_q": (T.Q4_0, "q4_0", None),
    "attn_k": (T.Q8_0, "q8_0", "int8_f32"),
    "attn_v": (T.Q6_K, "q6_k", None),
    "attn_output": (T.IQ4_NL, "iq4_nl", None),
    "ffn_gate": (T.Q4_K, "q4_k", None),
    "ffn_up": (T.MXFP4, "mxfp4_ggml", "mxfp4e2"),
    "ffn_down": (T.IQ4_NL, "iq4_nl", None),
    "token_embd": (T.Q5_K, "q5_k", None),
    "output": (T.IQ4_XS, "iq4_xs", None),
}
HF_NAMES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
            "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
            "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm",
            "ffn_norm": "post_attention_layernorm"}


def permute(w, n_head):
    """llama.cpp's converter reorders Q and K rows from HF's half-split rotary to ggml's pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def make_model():
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(LlamaConfig(**CFG)).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:  # norms are ones at init: values worth carrying
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:  # the weights the GGUF holds (F16), so both sides compute the same model
                p.copy_(p.half().float())
    return model


def write_f16_gguf(model, path):
    c = model.config
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("castscope-tiny-llama")
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_rope_freq_base(CFG["rope_theta"])
    w.add_rope_dimension_count(c.hidden_size // c.num_attention_heads)
    w.add_vocab_size(c.vocab_size)
    w.add_file_type(1)  # LLAMA_FTYPE_MOSTLY_F16
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + \
             ["\u2581" + chr(ord("a") + i % 26) * (1 + i // 26) for i in range(VOCAB_PIECES)]
    types = [2, 3, 3] + [6] * 256 + [1] * VOCAB_PIECES  # unknown, control, byte, normal
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 259 + [-float(i) for i in range(VOCAB_PIECES)])
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"].astype(np.float16))
    for i in range(c.num_hidden_layers):
        for role, hf in HF_NAMES.items():
            x = sd[f"model.layers.{i}.{hf}.weight"]
            if role == "attn_q":
                x = permute(x, c.num_attention_heads)
            elif role == "attn_k":
                x = permute(x, c.num_key_value_heads)
            w.add_tensor(f"blk.{i}.{role}.weight", x.astype(np.float32 if x.ndim == 1 else np.float16))
    w.add_tensor("output_norm.weight", sd["model.norm.weight"].astype(np.float32))
    w.add_tensor("output.weight", sd["lm_head.weight"].astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def role_of(name):
    parts = name.split(".")
    return parts[2] if parts[0] == "blk" else parts[0]


def castscope_export(src, out, work, own):
    """`castscope-cli export --layout gguf`; `own`: CastScope's own datatypes where it has them."""
    rules = [{"pattern": f"*{role}.weight", "dtype": (o if own and o else d)}
             for role, (_, d, o) in ROLES.items()]
    plan = os.path.join(work, "plan.json")
    with open(plan, "w") as f:
        json.dump({"rules": rules}, f)
    cli("export", src, out, "--plan", plan, "--layout", "gguf", "--device", "cpu", "-q")


def llama_quantize(src, out):
    """llama.cpp's own quantizer, every quantizable tensor given its type by an override."""
    overrides = (llama_cpp.llama_model_tensor_override * (len(ROLES) + 1))()
    keep = []
    for i, (role, (qtype, _, _)) in enumerate(ROLES.items()):
        keep.append(f"(^|\\.){role}\\.weight$".encode())
        overrides[i].pattern = keep[-1]
        overrides[i].type = int(qtype)
    overrides[len(ROLES)].pattern = None
    p = llama_cpp.llama_model_quantize_default_params()
    p.nthread = 2
    p.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
    p.pure = True
    p.tt_overrides = ctypes.cast(overrides, ctypes.POINTER(llama_cpp.llama_model_tensor_override))
    rc = llama_cpp.llama_model_quantize(src.encode(), out.encode(), ctypes.byref(p))
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize failed ({rc})")


def run_llama(path, tokens, n_gen):
    """llama.cpp's logits for every position of `tokens`, then `n_gen` greedily generated ids."""
    mp = llama_cpp.llama_model_default_params()
    model = llama_cpp.llama_model_load_from_file(path.encode(), mp)
    if not model:
        raise RuntimeError(f"llama.cpp could not load {path}")
    cp = llama_cpp.llama_context_default_params()
    cp.n_ctx = 128
    cp.n_batch = 128
    cp.n_ubatch = 128
    cp.n_threads = cp.n_threads_batch = 2
    ctx = llama_cpp.llama_init_from_model(model, cp)
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    batch = llama_cpp.llama_batch_init(len(tokens) + n_gen, 0, 1)
    try:
        def decode(ids, pos0, want_all):
            batch.n_tokens = len(ids)
            for i, t in enumerate(ids):
                batch.token[i] = t
                batch.pos[i] = pos0 + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 1 if want_all or i == len(ids) - 1 else 0
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise RuntimeError(f"llama_decode failed on {path}")
        decode(tokens, 0, True)
        logits = np.array([np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, i), shape=(n_vocab,))
                           for i in range(len(tokens))], dtype=np.float32)
        gen, last = [], int(np.argmax(logits[-1]))
        for k in range(n_gen):
            gen.append(last)
            decode([last], len(tokens) + k, False)
            last = int(np.argmax(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))))
        return logits, gen
    finally:
        llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_free(ctx)
        llama_cpp.llama_model_free(model)


def log_softmax(z):
    z = z.astype(np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def kl(ref, other):
    """Mean over positions of KL(softmax(ref) || softmax(other)), in nats."""
    lp, lq = log_softmax(ref), log_softmax(other)
    return float(np.mean(np.sum(np.exp(lp) * (lp - lq), axis=-1)))


def compare_tensors(name_a, path_a, name_b, path_b, src_path, expect_same):
    """Per ggml type: identical tensors, or the differing blocks and each side's squared error."""
    ra, rb, rs = gguf.GGUFReader(path_a), gguf.GGUFReader(path_b), gguf.GGUFReader(src_path)
    tb = {t.name: t for t in rb.tensors}
    src = {t.name: t for t in rs.tensors}
    by_type = {}
    for ta in ra.tensors:
        t2 = tb[ta.name]
        check(ta.tensor_type == t2.tensor_type,
              f"{ta.name}: {name_a} wrote {ta.tensor_type.name}, {name_b} {t2.tensor_type.name}")
        if ta.tensor_type != t2.tensor_type or ta.tensor_type in (T.F32, T.F16):
            continue
        qt = ta.tensor_type
        block, size = gguf.GGML_QUANT_SIZES[qt]
        a = np.asarray(ta.data).reshape(-1, size)
        b = np.asarray(t2.data).reshape(-1, size)
        diff = np.any(a != b, axis=1)
        s = by_type.setdefault(qt.name, {"tensors": 0, "blocks": 0, "differ": 0, "err_a": 0.0, "err_b": 0.0,
                                         "names": []})
        s["tensors"] += 1
        s["blocks"] += len(a)
        s["names"].append(ta.name)
        if diff.any():
            s["differ"] += int(diff.sum())
            x = np.asarray(quants.dequantize(src[ta.name].data, src[ta.name].tensor_type), np.float64).reshape(-1, block)
            da = np.asarray(quants.dequantize(ta.data, qt), np.float64).reshape(-1, block)
            db = np.asarray(quants.dequantize(t2.data, qt), np.float64).reshape(-1, block)
            s["err_a"] += float(np.sum((da[diff] - x[diff]) ** 2))
            s["err_b"] += float(np.sum((db[diff] - x[diff]) ** 2))
    for qt, s in sorted(by_type.items()):
        names = ", ".join(sorted(set(role_of(n) for n in s["names"])))
        if s["differ"] == 0:
            print(f"    {qt:7s} {s['tensors']} tensors ({names}): {s['blocks']} blocks, all identical")
        else:
            lower = name_a if s["err_a"] < s["err_b"] else name_b if s["err_b"] < s["err_a"] else "neither"
            ratio = s["err_a"] / s["err_b"] if s["err_b"] else float("inf")
            print(f"    {qt:7s} {s['tensors']} tensors ({names}): {s['differ']} of {s['blocks']} blocks differ;"
                  f" squared error over them {name_a} {s['err_a']:.6g}, {name_b} {s['err_b']:.6g}"
                  f" ({name_a}/{name_b} = {ratio:.4f}): {lower}'s blocks have the lower error")
        check((s["differ"] == 0) == (qt in expect_same),
              f"{qt}: {s['differ']} of {s['blocks']} blocks differ between {name_a} and {name_b}"
              f" ({'expected identical' if qt in expect_same else 'expected a difference'})")
    return by_type


def iq4_nl_ref_against_model(f16_path):
    """Why llama.cpp's IQ4_NL is not ggml's _ref: both of ggml's functions (libggml-base, as the
    binding ships it) on the F16 model's IQ4_NL tensors, the blocks that differ and their errors."""
    lib = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so"))
    fp, i64 = ctypes.POINTER(ctypes.c_float), ctypes.c_int64
    lib.quantize_row_iq4_nl_ref.argtypes = [fp, ctypes.c_void_p, i64]
    lib.quantize_iq4_nl.argtypes = [fp, ctypes.c_void_p, i64, i64, fp]
    lib.quantize_iq4_nl.restype = ctypes.c_size_t
    differ = blocks = 0
    err_ref = err_model = 0.0
    for t in gguf.GGUFReader(f16_path).tensors:
        if ROLES.get(role_of(t.name), (None,))[0] != T.IQ4_NL:
            continue
        x = np.ascontiguousarray(np.asarray(t.data, np.float32)).reshape(-1, 32)
        ref = np.zeros((len(x), 18), np.uint8)
        mod = np.zeros((len(x), 18), np.uint8)
        xp = x.ctypes.data_as(fp)
        lib.quantize_row_iq4_nl_ref(xp, ref.ctypes.data, x.size)
        lib.quantize_iq4_nl(xp, mod.ctypes.data, 1, x.size, None)
        d = np.any(ref != mod, axis=1)
        blocks += len(x)
        differ += int(d.sum())
        vr = np.asarray(quants.dequantize(ref, T.IQ4_NL), np.float64).reshape(-1, 32)
        vm = np.asarray(quants.dequantize(mod, T.IQ4_NL), np.float64).reshape(-1, 32)
        err_ref += float(np.sum((vr[d] - x[d]) ** 2))
        err_model += float(np.sum((vm[d] - x[d]) ** 2))
    print(f"    IQ4_NL  ggml's quantize_row_iq4_nl_ref against quantize_iq4_nl (llama.cpp's, iq4_nl's):"
          f" {differ} of {blocks} blocks differ; squared error over them _ref {err_ref:.6g},"
          f" quantize_iq4_nl {err_model:.6g} ({err_model / err_ref - 1:+.1%})")
    check(differ > 0 and err_model < err_ref, "quantize_iq4_nl is expected to improve on the _ref")


def file_type(path):
    f = gguf.GGUFReader(path).fields.get("general.file_type")
    return None if f is None else int(f.parts[f.data[0]][0])


# llama.cpp's log, silenced (kept referenced: llama.cpp calls it for as long as it runs).
QUIET = llama_cpp.llama_log_callback(lambda level, text, data: None)


def main():
    llama_cpp.llama_backend_init()
    llama_cpp.llama_log_set(QUIET, ctypes.c_void_p(0))
    with tempfile.TemporaryDirectory(prefix="castscope_llama_cpp_", ignore_cleanup_errors=True) as work:
        model = make_model()
        f16 = os.path.join(work, "f16.gguf")
        write_f16_gguf(model, f16)
        rng = np.random.default_rng(SEED)
        tokens = [1] + [int(t) for t in rng.integers(3, N_VOCAB, size=31)]
        print(f"tiny llama: {sum(p.numel() for p in model.parameters())} parameters, tokens {tokens[:8]}...")

        cs = os.path.join(work, "castscope.gguf")
        cs_own = os.path.join(work, "castscope_own.gguf")
        ll = os.path.join(work, "llama.gguf")
        castscope_export(f16, cs, work, own=False)
        castscope_export(f16, cs_own, work, own=True)
        llama_quantize(f16, ll)

        results = {}
        for name, path in (("f16", f16), ("castscope", cs), ("castscope-own", cs_own), ("llama.cpp", ll)):
            logits, gen = run_llama(path, tokens, 8)
            check(logits.shape == (len(tokens), N_VOCAB) and np.all(np.isfinite(logits)), f"{name}: logits not finite")
            check(len(gen) == 8 and all(0 <= t < N_VOCAB for t in gen), f"{name}: generated {gen}")
            results[name] = logits
            print(f"ok  {name:14s} loads in llama.cpp and generates {gen}")

        with torch.no_grad():
            hf = model(torch.tensor([tokens])).logits[0].float().numpy()
        kl_hf = kl(hf, results["f16"])
        print(f"    KL(transformers || llama.cpp F16 GGUF) = {kl_hf:.3e}")
        check(kl_hf < 1e-4, f"the F16 GGUF does not compute the transformers model (KL {kl_hf:.3e})")

        print("tensor bytes, CastScope's ggml datatypes against llama.cpp's quantizer:")
        ggml_types = {qt.name for qt, _, _ in ROLES.values()}
        compare_tensors("castscope", cs, "llama.cpp", ll, f16, expect_same=ggml_types)
        print("tensor bytes, CastScope's own mxfp4e2 / int8_f32 in place of mxfp4_ggml / q8_0:")
        compare_tensors("castscope-own", cs_own, "llama.cpp", ll, f16, expect_same=ggml_types - {"MXFP4", "Q8_0"})

        iq4_nl_ref_against_model(f16)

        same = np.array_equal(results["castscope"].view(np.uint32), results["llama.cpp"].view(np.uint32))
        check(same, "CastScope's ggml file and llama.cpp's give different logits")
        print(f"{'ok ' if same else 'FAIL'} logits of castscope.gguf and llama.cpp's quantization are identical")
        for name in ("castscope", "castscope-own", "llama.cpp"):
            d = kl(results["f16"], results[name])
            top1 = float(np.mean(np.argmax(results[name], -1) == np.argmax(results["f16"], -1)))
            print(f"    KL(F16 || {name:13s}) = {d:.4e} nats per token, top-1 agreement {top1:.3f}")

        # LLAMA_FTYPE_MOSTLY_IQ4_NL (25): IQ4_NL holds the most elements (attn_output, ffn_down).
        ft = file_type(cs)
        check(ft == 25, f"castscope.gguf: general.file_type {ft}, expected 25 (MOSTLY_IQ4_NL)")
        print(f"    general.file_type: castscope {ft}, llama.cpp {file_type(ll)} (its ftype argument)")
    return exit_status(failures, "llama.cpp")


if __name__ == "__main__":
    sys.exit(main())
