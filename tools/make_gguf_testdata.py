#!/usr/bin/env python3
"""Writes tests/data/ggml_types.gguf: reference data for CastScope's GGUF reader.

For every ggml type that ggml's own Python package (gguf-py, `pip install gguf`) can dequantize,
the file holds random valid blocks as tensor `q.<TYPE>` (written by gguf-py's GGUFWriter) and
gguf-py's `gguf.quants.dequantize` of those bytes as float32 tensor `ref.<TYPE>`. Block bytes
are uniformly random except the float16 scale fields, which are random finite halves (any sign,
subnormals and the largest values included), so every code, grid row, sign pattern and
sub-block scale is exercised. Plain types (F16, BF16, I8 ... F64) get random values. Q8_K, which
gguf-py does not dequantize, is stored so that the test can check its error. It also writes
fuzz/corpus/gguf/blocks.gguf, two blocks of every type, as a seed for the GGUF fuzzer.

For the types gguf-py can also quantize (ggml's reference quantizers), float32 tensor `src`
holds random rows (normal values across binades, exact zeros, all-zero blocks, small integers
that put products on rounding ties, blocks whose largest magnitudes tie with opposite signs)
and `quant.<TYPE>` gguf-py's `gguf.quants.quantize` of it (`src_c`, the same rows without a
block of subnormals, for the types quantized by ggml's C code, which asserts on it). gguf-py has no quantizer for the
K-quants and IQ4_NL / IQ4_XS, so `quant.Q2_K` ... `quant.Q6_K`, `quant.IQ4_NL` and
`quant.IQ4_XS` come from ggml's C code as llama.cpp's model quantizer runs it without an importance
matrix (quantize_row_*_ref; for IQ4_NL quantize_iq4_nl, which differs from its _ref; called once
per row), and `quant.MXFP4` from ggml's quantize_row_mxfp4_ref of `src`: the script compiles
ggml's src/ggml-quants.c from a checkout of https://github.com/ggml-org/ggml (or llama.cpp's ggml/
folder; gcc, -O2 -ffp-contract=off) with a small driver and runs it.

    python3 tools/make_gguf_testdata.py --ggml-src PATH/TO/ggml [--seed N]
"""
import argparse
import importlib.metadata
import os
import subprocess
import tempfile

import numpy as np
import gguf
from gguf import quants

T = gguf.GGMLQuantizationType

# Byte offsets of the float16 scale fields within one block (ggml-common.h layouts).
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.TQ1_0: [52], T.TQ2_0: [64], T.IQ2_XXS: [0], T.IQ2_XS: [0], T.IQ2_S: [0],
    T.IQ3_XXS: [0], T.IQ3_S: [0], T.IQ1_S: [0], T.IQ4_NL: [0], T.IQ4_XS: [0],
    T.IQ1_M: [], T.MXFP4: [], T.NVFP4: [],
}
PLAIN = {T.F32: np.float32, T.F16: np.float16, T.I8: np.int8, T.I16: np.int16,
         T.I32: np.int32, T.I64: np.int64, T.F64: np.float64}


def finite_halves(rng, n):
    h = rng.integers(0, 1 << 16, size=n, dtype=np.uint32)
    h = np.where((h & 0x7C00) == 0x7C00, h & ~np.uint32(0x4000), h)  # exponent 31 -> 15
    return h.astype(np.uint16)


def blocks_for(rng, qtype, rows, per_row):
    _, size = gguf.GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, size=(rows * per_row, size), dtype=np.uint8)
    for off in F16_FIELDS.get(qtype, []):
        b[:, off:off + 2] = finite_halves(rng, len(b)).view(np.uint8).reshape(-1, 2)
    if qtype == T.IQ1_M:  # its float16 scale is spread over the top nibbles of 4 u16 words
        sc = b[:, 48:56].copy().view(np.uint16)
        d = finite_halves(rng, len(b))
        for i, sh in enumerate((12, 8, 4, 0)):
            sc[:, i] = (sc[:, i] & 0x0FFF) | (((d >> sh) & 0xF) << 12)
        b[:, 48:56] = sc.view(np.uint8)
    if qtype == T.MXFP4:  # the extreme E8M0 scales: 2^-127 (ggml's subnormal half) and 2^128
        b[0, 0], b[1, 0] = 0, 255
    if qtype == T.NVFP4:  # scale bytes that are NaN (0x7F) and negative (0xFF) in E4M3
        b[0, 0], b[0, 1], b[1, 2] = 0x7F, 0xFF, 0x80
    return b.reshape(rows, per_row * size)


# Driver for ggml's quantizers as llama.cpp's model quantizer calls them without an importance
# matrix: float32 on stdin, blocks on stdout.
DRIVER = r"""
#define GGML_COMMON_DECL_C
#include "ggml-common.h"
#include "ggml-quants.h"
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  int type = atoi(argv[1]);
  long n = atol(argv[2]);
  float* x = malloc(n * 4);
  unsigned char* out = malloc(n * 2);
  size_t bytes = 0;
  if (fread(x, 4, n, stdin) != (size_t)n) return 2;
  if (type == 10) { quantize_row_q2_K_ref(x, (block_q2_K*)out, n); bytes = n / 256 * sizeof(block_q2_K); }
  if (type == 11) { quantize_row_q3_K_ref(x, (block_q3_K*)out, n); bytes = n / 256 * sizeof(block_q3_K); }
  if (type == 12) { quantize_row_q4_K_ref(x, (block_q4_K*)out, n); bytes = n / 256 * sizeof(block_q4_K); }
  if (type == 13) { quantize_row_q5_K_ref(x, (block_q5_K*)out, n); bytes = n / 256 * sizeof(block_q5_K); }
  if (type == 14) { quantize_row_q6_K_ref(x, (block_q6_K*)out, n); bytes = n / 256 * sizeof(block_q6_K); }
  /* IQ4_NL: the model quantizer's function (llama_model_quantize -> ggml_quantize_chunk), which
     searches more scales than quantize_row_iq4_nl_ref; for the others the two are the same. */
  if (type == 20) { quantize_iq4_nl(x, out, 1, n, NULL); bytes = n / 32 * sizeof(block_iq4_nl); }
  if (type == 39) { quantize_row_mxfp4_ref(x, (block_mxfp4*)out, n); bytes = n / 32 * sizeof(block_mxfp4); }
  if (type == 23) { quantize_row_iq4_xs_ref(x, (block_iq4_xs*)out, n); bytes = n / 256 * sizeof(block_iq4_xs); }
  fwrite(out, 1, bytes, stdout);
  return bytes ? 0 : 1;
}
/* Not reached by the quantizers above; defined so that ggml-quants.c links on its own. */
void ggml_abort(const char* file, int line, const char* fmt, ...) { (void)file; (void)line; (void)fmt; abort(); }
size_t ggml_row_size(enum ggml_type type, int64_t ne) { (void)type; (void)ne; abort(); }
const char* ggml_type_name(enum ggml_type type) { (void)type; abort(); }
size_t ggml_type_size(enum ggml_type type) { (void)type; abort(); }
"""


def ggml_reference(ggml_src, work):
    src = os.path.join(ggml_src, "src")
    exe = os.path.join(work, "kquant")
    with open(exe + ".c", "w") as f:
        f.write(DRIVER)
    flags = ["-O2", "-ffp-contract=off", "-I" + os.path.join(ggml_src, "include"), "-I" + src,
             "-I" + os.path.join(src, "ggml-cpu")]
    subprocess.run(["gcc", *flags, exe + ".c", os.path.join(src, "ggml-quants.c"), "-lm", "-o", exe], check=True)

    def quantize(x, qtype):
        r = subprocess.run([exe, str(int(qtype)), str(x.size)], input=np.ascontiguousarray(x, np.float32).tobytes(),
                           capture_output=True, check=True)
        return np.frombuffer(r.stdout, dtype=np.uint8).reshape(x.shape[0], -1)
    return quantize


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=20251123)
    ap.add_argument("--ggml-src", required=True, help="checkout of github.com/ggml-org/ggml")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = os.path.join(root, "tests", "data", "ggml_types.gguf")
    rng = np.random.default_rng(args.seed)
    w = gguf.GGUFWriter(out + ".tmp", "castscope-test")
    w.add_string("castscope.testdata.generator", "tools/make_gguf_testdata.py")
    w.add_uint64("castscope.testdata.seed", args.seed)
    w.add_string("castscope.testdata.gguf_py", importlib.metadata.version("gguf"))
    names = []
    for qtype in sorted(quants._type_traits, key=int):
        block, _ = gguf.GGML_QUANT_SIZES[qtype]
        if qtype == T.BF16:
            continue  # written below as a plain type
        per_row = max(1, 512 // block) if block < 256 else 2
        data = blocks_for(rng, qtype, 2, per_row)
        ref = quants.dequantize(data, qtype)
        assert ref.dtype == np.float32 and ref.shape == (2, per_row * block)
        w.add_tensor("q." + qtype.name, data, raw_dtype=qtype)
        w.add_tensor("ref." + qtype.name, ref)
        names.append(qtype.name)
    for qtype, dt in PLAIN.items():
        if np.issubdtype(dt, np.floating):
            v = (rng.standard_normal((3, 32)) * 4).astype(dt)
        else:
            info = np.iinfo(dt)
            lo, hi = max(info.min, -(1 << 24)), min(info.max, 1 << 24)
            v = rng.integers(lo, hi, size=(3, 32)).astype(dt)
        w.add_tensor("q." + qtype.name, v, raw_dtype=qtype)
        w.add_tensor("ref." + qtype.name, v.astype(np.float32))
        names.append(qtype.name)
    bf = finite_halves(rng, 96).astype(np.uint16)  # random bfloat16 bit patterns
    bf = np.where((bf & 0x7F80) == 0x7F80, bf & ~np.uint16(0x4000), bf).astype(np.uint16)
    w.add_tensor("q.BF16", bf.reshape(3, 32).view(np.uint8).reshape(3, 64), raw_dtype=T.BF16)
    w.add_tensor("ref.BF16", quants.dequantize(bf.reshape(3, 32).view(np.uint8), T.BF16))
    names.append("BF16")
    w.add_tensor("q.Q8_K", blocks_for(rng, T.Q8_K, 1, 1), raw_dtype=T.Q8_K)

    src = (rng.standard_normal((8, 512)) * np.ldexp(1.0, rng.integers(-20, 12, size=(8, 16, 1)))
           .repeat(32, axis=2).reshape(8, 512)).astype(np.float32)
    src[rng.random(src.shape) < 0.03] = 0.0
    src[1, 64:96] = 0.0  # an all-zero block
    src[2] = rng.integers(-16, 17, size=512).astype(np.float32)  # ties after scaling
    src[3, 0:32] = rng.integers(-3, 4, size=32) / 3.0
    src[3, 32:64] = src[3, 32:64] / np.abs(src[3, 32:64]).max()
    src[3, 40], src[3, 50] = -1.0, 1.0  # the largest magnitude twice, opposite signs
    src[4, 0:32] = 0.0  # subnormal values: 1 / d overflows, x / d is infinite or NaN
    src[4, 0:3] = 1e-43, -5e-44, 3e-45
    w.add_tensor("src", src)
    for qtype in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.TQ1_0, T.TQ2_0):
        w.add_tensor("quant." + qtype.name, quants.quantize(src, qtype), raw_dtype=qtype)
    # ggml's C quantizers assert on the subnormal block (nearest_int's range), so they get `src_c`:
    # `src` without it.
    src_c = src.copy()
    src_c[4, 0:32] = src[5, 0:32]
    w.add_tensor("src_c", src_c)
    with tempfile.TemporaryDirectory() as work:
        ref = ggml_reference(args.ggml_src, work)
        for qtype in (T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_NL, T.IQ4_XS):
            blocks = np.concatenate([ref(src_c[r:r + 1], qtype) for r in range(src.shape[0])])
            w.add_tensor("quant." + qtype.name, blocks, raw_dtype=qtype)
        # ggml's MXFP4 (not gguf-py's, whose exponent comes from numpy's log2), of `src` with
        # its subnormal block.
        w.add_tensor("quant.MXFP4", ref(src, T.MXFP4), raw_dtype=T.MXFP4)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(out + ".tmp", out)
    print(out, os.path.getsize(out), "bytes:", " ".join(names))

    # A fuzzing seed for the GGUF reader: two random blocks of every block type.
    seed = os.path.join(root, "fuzz", "corpus", "gguf", "blocks.gguf")
    w = gguf.GGUFWriter(seed + ".tmp", "castscope-fuzz")
    for qtype in sorted(quants._type_traits, key=int):
        if qtype != T.BF16:
            w.add_tensor(qtype.name, blocks_for(rng, qtype, 1, 2), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(seed + ".tmp", seed)


if __name__ == "__main__":
    main()
