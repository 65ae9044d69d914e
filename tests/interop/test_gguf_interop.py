#!/usr/bin/env python3
"""GGUF -> GGUF export checked with ggml's own Python package (gguf-py).

Writes a llama-like GGUF with gguf-py (hyper-parameters, a tokenizer vocabulary, K-quant, Q8_K,
F16 and F32 tensors), re-quantizes some tensors with `castscope-cli export --layout gguf`, and
reads the result with gguf-py's GGUFReader: every source key-value is present with the same
type and value and in the same order, tensors keep their order, kept tensors keep their ggml
type and bytes, and `gguf.quants.dequantize` of each re-quantized tensor (float, MXFP4 and ggml block types) equals
`castscope-cli cast --mode virtual` of the source values bit for bit. Exporting the result
again replaces CastScope's keys instead of repeating them.

usage: test_gguf_interop.py PATH/TO/castscope-cli      (exit 77: numpy or gguf missing)
"""
import json
import os
import shutil
import sys
import tempfile

try:
    import numpy as np
    import gguf
    from gguf import quants
except ImportError as e:
    print(f"skipping: {e}")
    sys.exit(77)

from interop_common import SEED, cli as run, exit_status  # noqa: E402

rng = np.random.default_rng(SEED)
T = gguf.GGMLQuantizationType


def same(a, b):
    return a.shape == b.shape and bool(np.all(a.view(np.uint32) == b.view(np.uint32)))


def sample(shape):
    x = rng.standard_normal(shape) * np.ldexp(1.0, rng.integers(-6, 7, size=shape))
    x[rng.random(shape) < 0.03] = 0.0
    return x.astype(np.float32)


def random_blocks(qtype, rows, cols, f16_offsets):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, size=(rows * cols // block, size), dtype=np.uint8)
    for off in f16_offsets:  # finite, moderate float16 scales
        b[:, off:off + 2] = (rng.standard_normal(len(b)) * 0.01).astype(np.float16).view(np.uint8).reshape(-1, 2)
    return b.reshape(rows, cols // block * size)


def write_source(path):
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("tiny-llama")
    w.add_file_type(1)  # MOSTLY_F16: the export replaces it with its own file's type
    w.add_context_length(2048)
    w.add_embedding_length(256)
    w.add_block_count(1)
    w.add_head_count(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_bool("tiny.flag", True)
    w.add_tokenizer_model("llama")
    w.add_token_list([f"tok{i}" for i in range(40)])
    w.add_token_scores([float(i) / 7 for i in range(40)])
    w.add_array("tiny.ints", [int(v) for v in rng.integers(-1000, 1000, size=9)])
    w.add_string("castscope.version", "stale")  # an earlier export's key: replaced
    tensors = {
        "token_embd.weight": ("Q4_K", random_blocks(T.Q4_K, 8, 256, [0, 2]), T.Q4_K),
        "blk.0.attn_q.weight": ("F32", sample((4, 256)), None),
        "blk.0.attn_k.weight": ("F16", sample((4, 256)).astype(np.float16), None),
        "blk.0.ffn_up.weight": ("Q6_K", random_blocks(T.Q6_K, 2, 512, [208]), T.Q6_K),
        "blk.0.attn_norm.weight": ("F32", sample((256,)), None),
        "blk.0.ffn_gate.weight": ("F32", sample((2, 512)), None),
        "blk.0.extra.weight": ("Q8_K", random_blocks(T.Q8_K, 1, 256, []), T.Q8_K),
        "output.weight": ("F32", sample((2, 256)), None),
        "blk.0.ffn_down.weight": ("F32", sample((4, 256)), None),
        "blk.0.attn_v.weight": ("F16", sample((4, 256)).astype(np.float16), None),
        "blk.0.attn_output.weight": ("F32", sample((2, 256)), None),
        "blk.0.ffn_gate_exps.weight": ("F32", sample((2, 512)), None),
        "blk.0.ffn_up_exps.weight": ("F16", sample((2, 256)).astype(np.float16), None),
        "blk.0.ffn_down_exps.weight": ("F32", sample((2, 256)), None),
        "blk.0.attn_qkv.weight": ("F32", sample((2, 256)), None),
        "blk.0.attn_k_b.weight": ("F32", sample((2, 256)), None),
        "blk.0.attn_v_b.weight": ("F32", sample((2, 256)), None),
    }
    for name, (_, data, raw) in tensors.items():
        if raw is None:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return list(tensors)


def field_value(f):
    return [bytes(np.asarray(f.parts[i]).tobytes()) for i in f.data] + [int(t) for t in f.types]


def main():
    work = tempfile.mkdtemp(prefix="castscope_gguf_interop_")
    failures = []
    try:
        src = os.path.join(work, "src.gguf")
        order = write_source(src)
        casts = {"blk.0.attn_q.weight": ("mxfp4e2", T.MXFP4), "blk.0.attn_k.weight": ("int8_f32", T.Q8_0),
                 "blk.0.ffn_gate.weight": ("float16", T.F16), "output.weight": ("bfloat16", T.BF16),
                 "blk.0.ffn_down.weight": ("q4_0", T.Q4_0), "blk.0.attn_v.weight": ("q5_1", T.Q5_1),
                 "blk.0.attn_output.weight": ("tq2_0", T.TQ2_0),
                 "blk.0.ffn_gate_exps.weight": ("q4_k", T.Q4_K), "blk.0.ffn_up_exps.weight": ("q6_k", T.Q6_K),
                 "blk.0.ffn_down_exps.weight": ("iq4_xs", T.IQ4_XS), "blk.0.attn_qkv.weight": ("iq4_nl", T.IQ4_NL),
                 "blk.0.attn_k_b.weight": ("q2_k", T.Q2_K), "blk.0.attn_v_b.weight": ("q3_k", T.Q3_K)}
        plan = {"rules": [{"pattern": n, "dtype": d} for n, (d, _) in casts.items()]}
        with open(os.path.join(work, "plan.json"), "w") as f:
            json.dump(plan, f)
        out = os.path.join(work, "out.gguf")
        run("export", src, out, "--plan", os.path.join(work, "plan.json"), "--layout", "gguf", "--device", "cpu", "-q")
        r_src, r_out = gguf.GGUFReader(src), gguf.GGUFReader(out)

        src_keys = [k for k in r_src.fields if not k.startswith("GGUF.") and not k.startswith("castscope.")]
        out_keys = [k for k in r_out.fields if not k.startswith("GGUF.")]
        if [k for k in out_keys if k in src_keys] != src_keys:
            failures.append(f"key order differs: {out_keys}")
        for k in src_keys:
            if k == "general.file_type":
                continue
            if k not in r_out.fields or field_value(r_out.fields[k]) != field_value(r_src.fields[k]):
                failures.append(f"key {k} lost or changed")
        # general.file_type: llama.cpp's LLAMA_FTYPE of the block type holding the most elements.
        elems = {}
        for t in r_out.tensors:
            if gguf.GGML_QUANT_SIZES[t.tensor_type][0] > 1:
                elems[t.tensor_type] = elems.get(t.tensor_type, 0) + int(np.prod(t.shape))
        dominant = max(elems, key=lambda q: elems[q])  # the first of the most, as CastScope
        ftype = {T.Q4_K: 15, T.Q6_K: 18, T.Q8_0: 7, T.MXFP4: 38, T.IQ4_XS: 30, T.IQ4_NL: 25, T.Q4_0: 2,
                 T.Q5_1: 9, T.TQ2_0: 37, T.Q2_K: 10, T.Q3_K: 12}.get(dominant)
        got = r_out.fields["general.file_type"].contents()
        if got != ftype:
            failures.append(f"general.file_type {got}, expected {ftype} ({dominant.name})")
        else:
            print(f"ok  general.file_type {got} ({dominant.name} holds the most elements)")
        if r_out.fields["castscope.version"].contents() != "1":
            failures.append("castscope.version not replaced")
        if len([k for k in out_keys if k == "castscope.version"]) != 1:
            failures.append("castscope.version repeated")
        if r_out.fields["general.architecture"].contents() != "llama":
            failures.append("general.architecture lost")
        print(f"ok  {len(src_keys)} source key-values kept in order")

        if [t.name for t in r_out.tensors] != order:
            failures.append(f"tensor order differs: {[t.name for t in r_out.tensors]}")
        src_t = {t.name: t for t in r_src.tensors}
        for t in r_out.tensors:
            s = src_t[t.name]
            if t.name in casts:
                dtype, qtype = casts[t.name]
                if t.tensor_type != qtype:
                    failures.append(f"{t.name}: type {t.tensor_type.name}, expected {qtype.name}")
                    continue
                shape = tuple(int(v) for v in reversed(s.shape))
                x = np.asarray(quants.dequantize(s.data, s.tensor_type), dtype=np.float32).reshape(shape)
                np.save(os.path.join(work, "x.npy"), x)
                run("cast", os.path.join(work, "x.npy"), os.path.join(work, "v.npy"), "--dtype", dtype, "--mode",
                    "virtual", "--device", "cpu")
                want = np.load(os.path.join(work, "v.npy"))
                got = np.asarray(quants.dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape)
                if qtype.name == "MXFP4":
                    # ggml's MXFP4 table holds doubled values as integers, so code 0x8 (-0) reads
                    # as +0 there (docs/export-formats.md, GGUF); only the sign of zero is set aside.
                    want = np.where(want == 0, np.float32(0), want)
                if not same(got, want):
                    failures.append(f"{t.name} ({qtype.name}): gguf-py decodes different values than the virtual cast")
                elif qtype in (T.Q4_0, T.Q5_1, T.TQ2_0) and \
                        quants.quantize(x, qtype).tobytes() != bytes(t.data.tobytes()):
                    failures.append(f"{t.name}: blocks differ from gguf-py's quantize of the source")
                else:
                    print(f"ok  {t.name:24s} {s.tensor_type.name:4s} -> {qtype.name:5s} = virtual cast {dtype}")
                key = "castscope.dtype." + t.name
                if key not in r_out.fields:
                    failures.append(f"{key} missing")
            else:
                if t.tensor_type != s.tensor_type or bytes(t.data.tobytes()) != bytes(s.data.tobytes()):
                    failures.append(f"{t.name}: kept tensor changed ({s.tensor_type.name} -> {t.tensor_type.name})")
                else:
                    print(f"ok  {t.name:24s} {s.tensor_type.name:4s} kept byte for byte")

        again = os.path.join(work, "again.gguf")
        run("export", out, again, "--plan", os.path.join(work, "plan.json"), "--layout", "gguf", "--device", "cpu", "-q")
        keys = [k for k in gguf.GGUFReader(again).fields if not k.startswith("GGUF.")]
        if len(keys) != len(set(keys)) or keys[:len(src_keys)] != out_keys[:len(src_keys)]:
            failures.append(f"second export: keys {keys}")
        else:
            print("ok  second export keeps the keys once")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return exit_status(failures, "GGUF interop")


if __name__ == "__main__":
    sys.exit(main())
