#!/usr/bin/env python3
"""Write a tiny randomly initialised Hugging Face Llama (transformers' own initialisation) as a
model directory, for measuring the budget planner (docs/planning.md):

    python3 tools/make_tiny_llama.py OUTDIR [--hidden 256] [--mlp 768] [--layers 2] [--seed 0]

Widths are multiples of 256 so that every candidate datatype, ggml's K-quants included, casts
every linear weight.
"""
import argparse

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--mlp", type=int, default=768)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    cfg = LlamaConfig(hidden_size=a.hidden, intermediate_size=a.mlp, num_hidden_layers=a.layers,
                      num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                      vocab_size=a.vocab, max_position_embeddings=256, tie_word_embeddings=False)
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(a.out)


if __name__ == "__main__":
    main()
