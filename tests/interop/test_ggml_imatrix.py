#!/usr/bin/env python3
"""ggml's quantizers with importance weights, against ggml itself: `quantize_<type>(src, dst,
nrow, n_per_row, quant_weights)` of libggml-base (as llama-cpp-python ships it, compiled for the
baseline x86-64 instruction set by scripts/setup-llama-cpp.sh) on fresh random rows and weights,
and `castscope-cli cast --mode actual --imatrix W.npy` on the same: the blocks must be the same
bytes for every type whose quantizer takes weights, for Q8_0 (which ignores them, as in ggml),
with weights of several sets for stacked experts [E, out, in] (llama.cpp gives expert e the
weights e * n_per_row ...), and without weights (ggml's unweighted quantizers); Q1_0 and NVFP4
(ggml types 41 and 40, which gguf-py 0.19 cannot quantize) too, with their values against
ggml's dequantize_row_*.

usage: test_ggml_imatrix.py PATH/TO/castscope-cli   (exit 77: numpy, safetensors or llama_cpp
missing; scripts/setup-llama-cpp.sh installs llama_cpp)
"""
import ctypes
import os
import sys
import tempfile

try:
    import numpy as np
    from safetensors.numpy import load_file
    import llama_cpp
except ImportError as e:
    print(f"skipping: {e}")
    sys.exit(77)

from interop_common import SEED, check, cli, exit_status, failures  # noqa: E402

# CastScope's datatype -> ggml's quantize_<type> and its block (elements, bytes).
TYPES = {
    "q4_0": ("quantize_q4_0", 32, 18), "q4_1": ("quantize_q4_1", 32, 20),
    "q5_0": ("quantize_q5_0", 32, 22), "q5_1": ("quantize_q5_1", 32, 24),
    "q8_0": ("quantize_q8_0", 32, 34),
    "q2_k": ("quantize_q2_K", 256, 84), "q3_k": ("quantize_q3_K", 256, 110),
    "q4_k": ("quantize_q4_K", 256, 144), "q5_k": ("quantize_q5_K", 256, 176),
    "q6_k": ("quantize_q6_K", 256, 210),
    "iq4_nl": ("quantize_iq4_nl", 32, 18), "iq4_xs": ("quantize_iq4_xs", 256, 136),
    # Types llama.cpp added lately, which take no weights: ggml's own quantizers and decoders.
    "q1_0": ("quantize_q1_0", 128, 18), "nvfp4_ggml": ("quantize_nvfp4", 64, 36),
}
IGNORE_WEIGHTS = {"q8_0", "q1_0", "nvfp4_ggml"}
DEQUANTIZE = {"q1_0": "dequantize_row_q1_0", "nvfp4_ggml": "dequantize_row_nvfp4"}


def ggml_lib():
    lib = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so"))
    fp, i64 = ctypes.POINTER(ctypes.c_float), ctypes.c_int64
    for fn, _, _ in TYPES.values():
        f = getattr(lib, fn)
        f.argtypes = [fp, ctypes.c_void_p, i64, i64, fp]
        f.restype = ctypes.c_size_t
    for fn in DEQUANTIZE.values():
        getattr(lib, fn).argtypes = [ctypes.c_void_p, fp, i64]
    return lib


def ggml_quantize(lib, dtype, x, qw, rows_per_set):
    """ggml's bytes, row by row as llama.cpp's llama_tensor_quantize_impl passes them."""
    fn, block, nbytes = TYPES[dtype]
    rows, n = x.shape
    out = np.zeros((rows, n // block * nbytes), np.uint8)
    fp = ctypes.POINTER(ctypes.c_float)
    for r in range(rows):
        xr = np.ascontiguousarray(x[r])
        w = None if qw is None else np.ascontiguousarray(qw[r // rows_per_set]).ctypes.data_as(fp)
        getattr(lib, fn)(xr.ctypes.data_as(fp), out[r].ctypes.data, 1, n, w)
    return out


def castscope_quantize(work, dtype, x, qw, shape):
    src, dst = os.path.join(work, "x.npy"), os.path.join(work, "q.safetensors")
    np.save(src, x.reshape(shape))
    args = ["cast", src, dst, "--dtype", dtype, "--mode", "actual", "--device", "cpu"]
    if qw is not None:
        np.save(os.path.join(work, "w.npy"), qw.astype(np.float32))
        args += ["--imatrix", os.path.join(work, "w.npy")]
    cli(*args)
    return load_file(dst)["tensor"].reshape(x.shape[0], -1)


def main():
    lib = ggml_lib()
    rng = np.random.default_rng(SEED)
    with tempfile.TemporaryDirectory() as work:
        for dtype in TYPES:
            # Rows of 512: two K-quant super-blocks per row, so the weights' offsets within a
            # row matter; heavy-tailed values and weights, some weights zero, one outlier row.
            cases = [("one set", (12, 512), 1), ("3 experts", (3, 4, 512), 3)]
            for what, shape, sets in cases:
                rows = int(np.prod(shape[:-1]))
                x = (rng.standard_t(4, size=(rows, 512)) * 0.02).astype(np.float32)
                x[0] *= 40
                qw = np.exp(rng.normal(0, 1.5, size=(sets, 512))).astype(np.float32)
                qw[:, rng.integers(0, 512, 20)] = 0
                for label, w in (("weighted", qw), ("unweighted", None)):
                    if label == "unweighted" and sets > 1:
                        continue
                    want = ggml_quantize(lib, dtype, x, w, rows // sets)
                    got = castscope_quantize(work, dtype, x, w, shape)
                    blk = TYPES[dtype][2]
                    bad = int(np.sum(np.any((want != got).reshape(rows, -1, blk), axis=2)))
                    total = want.size // blk
                    print(f"  {dtype:7s} {label:10s} {what:9s}: {total - bad}/{total} blocks "
                          f"identical to ggml's {TYPES[dtype][0]}")
                    check(bad == 0, f"{dtype} {label} {what}: {bad} of {total} blocks differ")
            # Weights change the result of every type that takes them (else the test proves
            # nothing); Q8_0 ignores them.
            x = (rng.standard_normal((8, 512)) * 0.05).astype(np.float32)
            qw = np.exp(rng.normal(0, 2, size=(1, 512))).astype(np.float32)
            a = ggml_quantize(lib, dtype, x, qw, 8)
            b = ggml_quantize(lib, dtype, x, None, 8)
            ignore = dtype in IGNORE_WEIGHTS
            check(ignore == np.array_equal(a, b),
                  f"{dtype}: ggml's weighted and unweighted bytes should "
                  f"{'agree' if ignore else 'differ'}")
            if dtype in DEQUANTIZE:
                # CastScope's values of those blocks are ggml's decoder's, bit for bit.
                want = np.zeros(x.size, np.float32)
                getattr(lib, DEQUANTIZE[dtype])(b.ctypes.data, want.ctypes.data_as(
                    ctypes.POINTER(ctypes.c_float)), x.size)
                src, out = os.path.join(work, "v.npy"), os.path.join(work, "v_out.npy")
                np.save(src, x)
                cli("cast", src, out, "--dtype", dtype, "--device", "cpu")
                got = np.load(out).reshape(-1)
                same = np.array_equal(got.view(np.uint32), want.view(np.uint32))
                print(f"  {dtype:7s} values: {'identical to' if same else 'DIFFER from'} ggml's "
                      f"{DEQUANTIZE[dtype]}")
                check(same, f"{dtype}: values differ from ggml's {DEQUANTIZE[dtype]}")
    return exit_status(failures, "ggml importance-weight")


if __name__ == "__main__":
    sys.exit(main())
