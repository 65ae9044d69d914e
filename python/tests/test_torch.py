"""PyTorch tensors (CPU) through the API, and the comparison with torchao's MX functions."""
import numpy as np
import pytest

import castscope

torch = pytest.importorskip("torch")


def sample(rng, shape=(64, 128)):
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-6, 3, size=shape))
    return torch.from_numpy(x.astype(np.float32))


def same_bits(a, b):
    a, b = a.detach().cpu().contiguous(), b.detach().cpu().contiguous()
    return (a.dtype == b.dtype and a.shape == b.shape
            and a.numpy().tobytes() == b.numpy().tobytes())


@pytest.mark.parametrize("src", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("dtype", ["mxfp4e2", "nvfp4", "mx6", "tcfp12"])
def test_torch_cpu_equals_numpy(rng, src, dtype):
    x = sample(rng).to(getattr(torch, src))
    before = x.clone()
    q = castscope.cast(x, dtype)
    assert isinstance(q, torch.Tensor) and q.dtype == torch.float32 and q.device == x.device
    assert q.shape == x.shape
    # float16 / bfloat16 -> float32 is exact: the numpy cast of the widened values is the reference.
    ref = castscope.cast(x.float().numpy(), dtype)
    assert same_bits(q, torch.from_numpy(ref))
    assert torch.equal(x, before)


def test_torch_compressed_parts(rng):
    x = sample(rng, (8, 64))
    r = castscope.cast(x, "nvfp4", mode="compress")
    assert isinstance(r.data, torch.Tensor) and r.data.dtype == torch.uint8
    assert r.data.shape == (8, 32)  # two e2m1 codes per byte
    assert r.scale.shape == (8, 4) and r.tenscale.numel() == 1
    assert same_bits(r.upcast(), castscope.cast(x, "nvfp4"))


def test_noncontiguous_and_metrics(rng):
    x = sample(rng, (64, 64)).t()  # a transposed view: made contiguous on the way in
    q = castscope.cast(x, "mxfp8e4")
    assert same_bits(q, torch.from_numpy(castscope.cast(x.contiguous().numpy(), "mxfp8e4")))
    s = castscope.metrics(x, q)
    e = (q.double() - x.double())
    assert s["mse"] == pytest.approx(float((e * e).mean()), rel=1e-12)


# torchao's MX reference (to_mx / to_dtype, scale FLOOR as the OCP spec recommends) against
# CastScope's OCP MX datatypes with scale_mode="floor": the same bits are expected. The FP6 / FP4
# elements are written in the OCP spelling (e2m3, e2m1: -0 kept, as torchao keeps it).
@pytest.mark.parametrize("name,elem", [("mxfp8e4", "float8_e4m3fn"), ("mxfp8e5", "float8_e5m2"),
                                       ("e2m3_e8m0_t32", "fp6_e2m3"),
                                       ("e2m1_e8m0_t32", "float4_e2m1fn_x2")])
def test_torchao_mx_agrees(rng, name, elem):
    mx = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
    x = sample(rng, (64, 256))
    elem_dtype = getattr(torch, elem, elem)
    scale, data = mx.to_mx(x, elem_dtype, 32)
    ref = mx.to_dtype(data, scale, elem_dtype, 32, torch.float32)
    ours = castscope.cast(x, name, scale_mode="floor")
    assert same_bits(ours, ref)
    r = castscope.cast(x, name, mode="compress")
    assert torch.equal(r.scale.flatten(), scale.view(torch.uint8).flatten())


def test_other_dlpack_producers(rng):
    # A DLPack object that is neither numpy nor torch: host memory comes back as numpy.
    class Producer:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, **kw):
            return self.t.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    x = sample(rng, (8, 64))
    q = castscope.cast(Producer(x), "mxfp6e3")
    assert isinstance(q, np.ndarray) and same_bits(torch.from_numpy(q), castscope.cast(x, "mxfp6e3"))


def test_unsupported_device_is_an_error():
    with pytest.raises(castscope.Error, match="meta"):
        castscope.cast(torch.zeros(4, 32, device="meta"), "mxfp4e2")
