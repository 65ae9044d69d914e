"""A small Llama GGUF that llama.cpp loads: F32 weights and a SentencePiece-style vocabulary of
placeholder tokens (with the newline byte token llama.cpp looks up). Written with ggml's own gguf
package; used by tools/eval_table.py and by the Python package's tests."""
from __future__ import annotations

import numpy as np

# The tensors of one block, in the order llama.cpp's converter writes them: (name, shape) from
# (embd, ff, kv * head_dim).
_BLOCK = [
    ("attn_norm", lambda e, f, kv: (e,)),
    ("attn_q", lambda e, f, kv: (e, e)),
    ("attn_k", lambda e, f, kv: (kv, e)),
    ("attn_v", lambda e, f, kv: (kv, e)),
    ("attn_output", lambda e, f, kv: (e, e)),
    ("ffn_norm", lambda e, f, kv: (e,)),
    ("ffn_gate", lambda e, f, kv: (f, e)),
    ("ffn_up", lambda e, f, kv: (f, e)),
    ("ffn_down", lambda e, f, kv: (e, f)),
]


def write_tiny_llama_gguf(path, weight, vocab=512, embd=256, ff=512, heads=4, kv=2, blocks=4,
                          context=256) -> dict:
    """Writes the model to `path`, each tensor drawn by weight(name, shape) in file order (norms
    are the 1-D ones); returns the tensors written, by name, as float32 arrays."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_context_length(context)
    w.add_embedding_length(embd)
    w.add_block_count(blocks)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(embd // heads)
    w.add_tokenizer_model("llama")
    w.add_token_list(["<unk>", "<s>", "</s>", "<0x0A>"] + [f"\u2581t{i}" for i in range(vocab - 4)])
    w.add_token_scores([0.0] * vocab)
    w.add_token_types([2, 3, 3, 6] + [1] * (vocab - 4))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    kv_width = kv * (embd // heads)
    shapes = [("token_embd.weight", (vocab, embd))]
    for i in range(blocks):
        shapes += [(f"blk.{i}.{n}.weight", s(embd, ff, kv_width)) for n, s in _BLOCK]
    shapes += [("output_norm.weight", (embd,)), ("output.weight", (vocab, embd))]
    tensors = {}
    for name, shape in shapes:
        tensors[name] = np.asarray(weight(name, shape), dtype=np.float32)
        w.add_tensor(name, tensors[name])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tensors
