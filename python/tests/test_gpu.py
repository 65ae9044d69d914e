"""CUDA tensors: cast on the GPU in place, results on the GPU, same bits as the CPU engine.
Skips without a GPU (and without a CUDA build of the extension)."""
import numpy as np
import pytest

import castscope

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and castscope.backend_info()["cuda_available"]),
    reason="needs a GPU and a CUDA build of castscope")


def sample(rng, shape):
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-6, 3, size=shape))
    return torch.from_numpy(x.astype(np.float32))


def host_bytes(t):
    # As bytes, since numpy has no float8 dtypes for the codes of FP8 formats.
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


@pytest.mark.parametrize("dtype", ["mxfp4e2", "nvfp4", "mx9", "tcfp12", "int8_float32_t0",
                                   "e4m3fn_e8m0_t16n2m4"])
@pytest.mark.parametrize("src", ["float32", "bfloat16"])
def test_cuda_cast_equals_cpu(rng, dtype, src):
    x = sample(rng, (256, 512)).to(getattr(torch, src))
    xc = x.cuda()
    for mode in ("virtual", "compress"):
        g = castscope.cast(xc, dtype, mode=mode)
        c = castscope.cast(x, dtype, mode=mode, device="cpu")
        if mode == "virtual":
            assert g.is_cuda and host_bytes(g) == host_bytes(c)
            continue
        assert g.device == "cuda" and g.data.is_cuda
        for part in ("data", "scale", "zero", "tenscale", "meta", "mask", "residual",
                     "residual_scale"):
            a, b = getattr(g, part), getattr(c, part)
            assert (a is None) == (b is None), part
            if a is not None:
                assert a.is_cuda and host_bytes(a) == host_bytes(b), part
        assert host_bytes(g.upcast()) == host_bytes(c.upcast())


def test_cuda_cast_has_no_host_round_trip(rng):
    x = sample(rng, (4096, 4096)).cuda()
    torch.cuda.synchronize()
    ptr = x.data_ptr()
    castscope.cast(x, "mxfp4e2")  # warm up the engine's memory pool
    torch_before = torch.cuda.memory_allocated()
    moved_before = castscope.transfer_counters()
    q = castscope.cast(x, "mxfp4e2")
    r = castscope.cast(x, "mxfp4e2", mode="compress")  # packed on the device
    moved_after = castscope.transfer_counters()
    assert moved_after == moved_before  # no tensor-sized upload or download
    # The input was used in place (torch's allocator made no copy of it) and the results live
    # on the GPU, in the engine's memory pool.
    assert torch.cuda.memory_allocated() == torch_before and x.data_ptr() == ptr
    assert q.is_cuda and r.data.is_cuda and r.scale.is_cuda
    assert q.data_ptr() != ptr
    assert host_bytes(q) == host_bytes(castscope.cast(x.cpu(), "mxfp4e2", device="cpu"))


def test_cuda_metrics(rng):
    x = sample(rng, (512, 512)).cuda()
    q = castscope.cast(x, "mxint8")
    s = castscope.metrics(x, q)
    e = q.double() - x.double()
    assert s["mse"] == pytest.approx(float((e * e).mean()), rel=1e-9)


def test_gemm_timings():
    ok, reason = castscope.gemm_available()
    assert ok, reason
    r = castscope.gemm("fp8", 1024, 1024, 1024, iters=3)
    assert r["ms"] > 0 and r["tflops"] > 0 and r["rel_error"] < 0.1
