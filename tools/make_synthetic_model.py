#!/usr/bin/env python3
"""Write a synthetic bf16 safetensors checkpoint with the tensor names and shapes of a Llama-3-8B
style decoder (hidden 4096, 8 KV heads, MLP 14336), for timing the model map and exports.

    python3 tools/make_synthetic_model.py OUT.safetensors --layers 2 [--embeddings] [--seed 1]
    python3 tools/make_synthetic_model.py OUTDIR --shards 4 ...   (sharded, with an index)
    ... --jobs 16   (tensors generated in parallel, each from its own seed: other values than
                     the default single stream, the same for every --jobs count)

Weights are N(0, 0.02) with a few outlier input columns per matrix; norms are ones. 32 layers
plus embeddings and head are 8.0 billion parameters (16 GB); fewer layers scale it down.
"""
import argparse
import json
import os
import struct

import numpy as np


def llama_tensors(layers, embeddings, hidden=4096, kv=1024, mlp=14336, vocab=128256):
    out = []
    if embeddings:
        out.append(("model.embed_tokens.weight", (vocab, hidden)))
    for i in range(layers):
        p = f"model.layers.{i}."
        out += [
            (p + "input_layernorm.weight", (hidden,)),
            (p + "self_attn.q_proj.weight", (hidden, hidden)),
            (p + "self_attn.k_proj.weight", (kv, hidden)),
            (p + "self_attn.v_proj.weight", (kv, hidden)),
            (p + "self_attn.o_proj.weight", (hidden, hidden)),
            (p + "post_attention_layernorm.weight", (hidden,)),
            (p + "mlp.gate_proj.weight", (mlp, hidden)),
            (p + "mlp.up_proj.weight", (mlp, hidden)),
            (p + "mlp.down_proj.weight", (hidden, mlp)),
        ]
    if embeddings:
        out += [("model.norm.weight", (hidden,)), ("lm_head.weight", (vocab, hidden))]
    return out


def bf16_bits(a):
    u = a.astype(np.float32).view(np.uint32)
    # Round to nearest even on the dropped 16 bits.
    u = u + (0x7FFF + ((u >> 16) & 1))
    return (u >> 16).astype(np.uint16)


def make_tensor(shape, rng):
    if len(shape) == 1:
        return np.ones(shape, np.float32)
    w = rng.standard_normal(shape, dtype=np.float32) * 0.02
    cols = rng.choice(shape[1], size=4, replace=False)
    w[:, cols] *= 20.0
    return w


def write_one(job):
    # One tensor from its own seed, written at its offset (--jobs).
    path, at, shape, seed = job
    data = bf16_bits(make_tensor(shape, np.random.default_rng(seed))).tobytes()
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, at)
    finally:
        os.close(fd)


def write_file(path, specs, rng, pool=None, seed=0, first=0):
    header, off = {}, 0
    for name, shape in specs:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {"format": "pt", "generator": "tools/make_synthetic_model.py"}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        if pool is not None:
            f.truncate(8 + len(h) + off)
        else:
            for name, shape in specs:
                f.write(bf16_bits(make_tensor(shape, rng)).tobytes())
    if pool is not None:
        jobs = [(path, 8 + len(h) + header[name]["data_offsets"][0], shape, [seed, first + i])
                for i, (name, shape) in enumerate(specs)]
        # Largest first, so the pool ends together.
        jobs.sort(key=lambda j: -int(np.prod(j[2])))
        list(pool.imap_unordered(write_one, jobs))
    return off


def split_shards(specs, shards):
    # Contiguous runs of about equal bytes, as transformers' save_pretrained cuts them.
    total = sum(int(np.prod(s)) for _, s in specs)
    out, cur, acc = [], [], 0
    for name, shape in specs:
        cur.append((name, shape))
        acc += int(np.prod(shape))
        if acc >= total * (len(out) + 1) / shards and len(out) < shards - 1:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", help="a .safetensors file, or a directory with --shards")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--embeddings", action="store_true")
    ap.add_argument("--shards", type=int, default=0, help="write OUT/model-*-of-*.safetensors + index")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=0, help="processes; each tensor from its own seed")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    specs = llama_tensors(a.layers, a.embeddings)
    pool = None
    if a.jobs > 0:
        import multiprocessing

        pool = multiprocessing.Pool(a.jobs)
    if a.shards > 0:
        os.makedirs(a.out, exist_ok=True)
        groups = split_shards(specs, a.shards)
        weight_map, off, first = {}, 0, 0
        for i, g in enumerate(groups):
            fname = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
            off += write_file(os.path.join(a.out, fname), g, rng, pool, a.seed, first)
            first += len(g)
            weight_map.update({name: fname for name, _ in g})
        with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": off}, "weight_map": weight_map}, f, indent=2)
    else:
        off = write_file(a.out, specs, rng, pool, a.seed)
    params = sum(int(np.prod(s)) for _, s in specs)
    print(f"{a.out}: {len(specs)} tensors, {params / 1e9:.3f} B parameters, {off / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
