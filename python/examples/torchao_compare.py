"""Cast one tensor to OCP MX formats with CastScope and with torchao's MX functions, compare.

usage: python3 python/examples/torchao_compare.py [ROWS COLS]     (needs torch and torchao)
"""
import sys
import time

import torch
from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx

import castscope

rows, cols = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (4096, 4096)
torch.manual_seed(0)
x = torch.randn(rows, cols) * torch.exp2(torch.randint(-6, 3, (rows, cols)).float())


def timed(fn):
    fn()  # first call: allocations, thread start-up
    t0 = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t0) * 1e3


print(f"x: {rows}x{cols} float32, CPU; {torch.get_num_threads()} torch threads")
print(f"{'castscope dtype':16} {'torchao ms':>10} {'castscope ms':>12} {'differ':>7} "
      f"{'scales equal':>12} {'SNR dB':>7}")
# The registry's MXFP6 / MXFP4 names use TensorCast's e2m3fnuz / e2m1fnuz element spelling; the
# OCP spelling e2m3 / e2m1 is listed beside them.
for name, elem in [("mxfp8e4", torch.float8_e4m3fn), ("mxfp8e5", torch.float8_e5m2),
                   ("mxfp6e2", "fp6_e2m3"), ("e2m3_e8m0_t32", "fp6_e2m3"),
                   ("mxfp4e2", torch.float4_e2m1fn_x2), ("e2m1_e8m0_t32", torch.float4_e2m1fn_x2)]:
    (scale, data), t_ao = timed(lambda: to_mx(x, elem, 32))
    ref = to_dtype(data, scale, elem, 32, torch.float32)
    ours, t_cs = timed(lambda: castscope.cast(x, name, scale_mode="floor"))
    packed = castscope.cast(x, name, mode="compress")
    differ = ours.view(torch.int32) != ref.view(torch.int32)
    note = "" if not differ.any() else (
        " (all: +0 vs -0)" if bool((ours[differ] == 0).all() and (ref[differ] == 0).all()) else "")
    scales = torch.equal(packed.scale.flatten(), scale.view(torch.uint8).flatten())
    snr = castscope.metrics(x, ours)["snr_db"]
    print(f"{name:16} {t_ao:10.1f} {t_cs:12.1f} {int(differ.sum()):7d} {str(scales):>12} "
          f"{snr:7.2f}{note}")
