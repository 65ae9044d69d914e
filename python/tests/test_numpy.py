"""The Python API on numpy arrays, checked against castscope-cli bit for bit."""
import json
import os
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

import castscope

# Datatypes across the families: OCP MX, NVFP4 (two-level scale), shared microexponents, TCFP,
# channel-scaled int, 2-D tiles, uint with zero points, N:M sparsity.
DTYPES = [
    "mxfp4e2",
    "mxfp8e4",
    "mxint8",
    "nvfp4",
    "mx6",
    "tcfp8",
    "tcfp12",
    "int8_float32_t0",
    "e4m3fn_float32_t128_t128",
    "uint4_float32_int8_t32",
    "e4m3fn_e8m0_t16n2m4",
]


def sample(rng, shape=(128, 256), dtype=np.float32):
    # Normal values over several binades with a few outliers, the shape of real weights.
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-6, 3, size=shape))
    x.flat[rng.integers(0, x.size, size=4)] *= 200.0
    return x.astype(dtype)


def run_cli(cli, *args):
    p = subprocess.run([cli, *map(str, args)], capture_output=True, text=True)
    return p


def cli_cast(cli, tmp_path, x, dtype, *extra):
    src, dst = tmp_path / "in.npy", tmp_path / "out.npy"
    np.save(src, x)
    p = run_cli(cli, "cast", src, dst, "--dtype", dtype, *extra)
    assert p.returncode == 0, p.stderr
    return np.load(dst)


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).tobytes()


def test_datatypes_registry_round_trip():
    ds = castscope.datatypes()
    names = [d.name for d in ds]
    assert len(ds) > 20 and len(set(names)) == len(names)
    for d in ds:
        again = castscope.DataType(d.spec)
        assert again == d and hash(again) == hash(d)
        # A codebook stores indices narrower than its compute format, and ggml's ternary blocks
        # pack 5 trits per byte; every other datatype stores at least its element bits.
        if d.family not in ("ggml", "codebook"):
            assert d.bits_per_value(4096) >= d.bits


def test_datatype_properties_match_cli_info(cli):
    def same(a, b):  # JSON writes the non-finite values as strings
        return float(a) == b or (a == "nan" and b != b)

    for d in castscope.datatypes() + [castscope.DataType("e4m3fn_float32_t128_t128")]:
        p = run_cli(cli, "info", d.spec, "--json")
        assert p.returncode == 0, p.stderr
        info = json.loads(p.stdout)
        assert info["spec"] == d.spec and info["description"] == d.describe()
        assert info["bits_per_value"] == d.bits_per_value()
        n = info["number"]
        assert n["name"] == d.number
        keys = {"bits": "bits", "exponent_bits": "ebits", "mantissa_bits": "mbits", "bias": "bias",
                "emax": "emax", "emin": "emin", "max": "max", "min_normal": "min_normal",
                "min_subnormal": "min_subnormal"}
        shown = [k for k in keys if k in n]
        assert "bits" in shown and "max" in shown
        for k in shown:
            assert n[k] == getattr(d, keys[k]), (d.spec, k)
        if "codes" in n:
            codes = d.codes()
            assert len(codes) == len(n["codes"])
            for (code, value), e in zip(codes, n["codes"]):
                assert code == e["code"] and same(e["value"], value), (d.spec, e)
        if d.scaled and d.family == "standard":
            assert info["scale"]["name"] == d.scale
            assert [(t["size"], t["subtile"], t["n"], t["m"]) for t in info["tiles"]] == [
                (t["size"], t["sub"], t["n"], t["m"]) for t in d.tiles]


def test_mxfp4_properties():
    d = castscope.DataType("mxfp4e2")
    assert (d.name, d.number, d.scale, d.bits, d.max) == ("mxfp4e2", "e2m1fnuz", "e8m0", 4, 6.0)
    assert d.tiles == [{"size": 32, "sub": 0, "n": 0, "m": 0}]
    assert d.bits_per_value() == 4.25
    assert d.group == "MX (OCP)" and repr(d) == "DataType('mxfp4e2')"
    assert castscope.DataType("nvfp4").multiscale


@pytest.mark.parametrize("dtype", DTYPES)
def test_virtual_cast_equals_cli(cli, tmp_path, rng, dtype):
    x = sample(rng)
    ours = castscope.cast(x, dtype, device="cpu")
    assert isinstance(ours, np.ndarray) and ours.dtype == np.float32 and ours.shape == x.shape
    ref = cli_cast(cli, tmp_path, x, dtype, "--device", "cpu")
    assert bits(ours) == bits(ref)
    assert not np.array_equal(ours, x)  # the cast changed something: the test can fail


@pytest.mark.parametrize(
    "opts",
    [
        dict(round="stochastic", seed=1234),
        dict(round="away", scale_mode="ceil"),
        dict(scale_mode="midmax", overflow="ieee"),
        dict(round="zero", scale_mode="option3", axis=0),
    ],
)
def test_options_equal_cli(cli, tmp_path, rng, opts):
    x = sample(rng, (64, 96))
    extra = []
    for k, v in opts.items():
        extra += ["--" + k.replace("_", "-"), str(v)]
    ours = castscope.cast(x, "mxfp6e2", **opts)
    assert bits(ours) == bits(cli_cast(cli, tmp_path, x, "mxfp6e2", *extra))


@pytest.mark.parametrize("axis", ["auto", "1:"])
def test_conv_weight_axis_equals_cli_and_its_flat_view(cli, tmp_path, rng, axis):
    # A conv weight [O, I, kh, kw] is quantized over I*kh*kw, as the inference stacks do.
    w = sample(rng, (16, 8, 3, 3))
    ours = castscope.cast(w, "mxfp8e4", axis=axis, device="cpu")
    flat = castscope.cast(w.reshape(16, 72), "mxfp8e4", axis=-1, device="cpu")
    assert bits(ours) == bits(flat.reshape(w.shape))
    assert bits(ours) == bits(cli_cast(cli, tmp_path, w, "mxfp8e4", "--axis", axis, "--device",
                                       "cpu"))
    kw = castscope.cast(w, "mxfp8e4", axis=-1, device="cpu")
    assert bits(kw) != bits(ours)  # tiles along kw (length 3) give other values
    with pytest.raises(castscope.Error, match="sideways"):
        castscope.cast(w, "mxfp8e4", axis="sideways")


@pytest.mark.parametrize("src", [np.float16, np.float64])
def test_input_dtypes_equal_cli(cli, tmp_path, rng, src):
    x = sample(rng, (16, 64), src)
    ours = castscope.cast(x, "mxfp8e5")
    assert bits(ours) == bits(cli_cast(cli, tmp_path, x, "mxfp8e5"))


def test_bfloat16_numpy_input(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x32 = sample(rng, (8, 64))
    xb = x32.astype(ml_dtypes.bfloat16)
    ours = castscope.cast(xb, "nvfp4")
    # bfloat16 -> float32 is exact, so the cast of the widened values is the reference.
    assert bits(ours) == bits(castscope.cast(xb.astype(np.float32), "nvfp4"))


@pytest.mark.parametrize("dtype", ["mxfp4e2", "nvfp4", "mx9", "tcfp12", "uint4_float32_int8_t32",
                                   "e4m3fn_e8m0_t16n2m4"])
def test_compress_saves_the_cli_file(cli, tmp_path, rng, dtype):
    x = sample(rng, (32, 128))
    r = castscope.cast(x, dtype, mode="compress", device="cpu")
    assert r.mode == "compress" and r.backend == "cpu" and list(r.shape) == [32, 128]
    assert isinstance(r.data, np.ndarray)
    d = castscope.DataType(dtype)
    assert (r.zero is not None) == d.has_zero_point
    assert (r.mask is not None) == ("n2m4" in d.spec)
    assert (r.tenscale is not None) == d.multiscale
    # upcast of the packed result equals the virtual cast, bit for bit.
    assert bits(r.upcast()) == bits(castscope.cast(x, dtype, device="cpu"))
    np.save(tmp_path / "in.npy", x)
    p = run_cli(cli, "cast", tmp_path / "in.npy", tmp_path / "cli.safetensors", "--dtype", dtype,
                "--mode", "compress", "--device", "cpu")
    assert p.returncode == 0, p.stderr
    r.save(str(tmp_path / "py.safetensors"))
    assert (tmp_path / "py.safetensors").read_bytes() == (tmp_path / "cli.safetensors").read_bytes()


def test_actual_mode_parts(rng):
    x = sample(rng, (4, 64))
    r = castscope.cast(x, "mxfp8e4", mode="actual")
    assert r.data.shape == (4, 64) and r.data.dtype == np.uint8
    assert r.scale.shape == (4, 2)
    assert r.meta is None and r.mask is None and r.zero is None


def test_errors_carry_the_engine_message(cli, rng):
    p = run_cli(cli, "info", "e2m1_e8m0_t33x")
    assert p.returncode != 0
    with pytest.raises(castscope.Error) as e:
        castscope.DataType("e2m1_e8m0_t33x")
    assert str(e.value) and str(e.value) in p.stderr
    with pytest.raises(castscope.Error, match="int32"):
        castscope.cast(np.arange(64, dtype=np.int32), "mxfp4e2")
    with pytest.raises(castscope.Error, match="round"):
        castscope.cast(sample(rng, (2, 32)), "mxfp4e2", round="sideways")
    with pytest.raises(castscope.Error, match="axis"):
        castscope.cast(sample(rng, (2, 16)), "mxfp4e2", axis=5)


def test_metrics(rng):
    x = sample(rng, (64, 64)).astype(np.float64)
    q = castscope.cast(x, "mxint8")
    s = castscope.metrics(x, q)
    e = q.astype(np.float64) - x
    assert s["count"] == x.size and s["nonfinite_in"] == 0
    assert s["mse"] == pytest.approx(np.mean(e * e), rel=1e-12)
    assert s["snr_db"] == pytest.approx(10 * np.log10(np.sum(x * x) / np.sum(e * e)), rel=1e-12)
    assert s["max_abs_err"] == np.max(np.abs(e))
    r = castscope.cast(x, "mxint8", mode="compress")
    assert castscope.metrics(x, r)["mse"] == s["mse"]


def test_input_is_not_modified(rng):
    x = sample(rng, (16, 64))
    before = x.copy()
    castscope.cast(x, "mxfp4e2", round="stochastic", seed=3)
    assert bits(x) == bits(before)


def test_read_only_arrays_are_accepted(rng):
    """Inputs are never written, so a read-only array (np.load with mmap_mode="r", a frozen
    buffer) casts and measures like a writable one."""
    x = rng.standard_normal((8, 64)).astype(np.float32)
    ro = x.copy()
    ro.flags.writeable = False
    for dtype in ("mxfp4e2", "nvfp4"):
        np.testing.assert_array_equal(castscope.cast(ro, dtype), castscope.cast(x, dtype))
        a, b = castscope.cast(ro, dtype, mode="actual"), castscope.cast(x, dtype, mode="actual")
        np.testing.assert_array_equal(a.data, b.data)
        np.testing.assert_array_equal(a.scale, b.scale)
    y = castscope.cast(x, "mxfp4e2")
    y.flags.writeable = False
    assert castscope.metrics(ro, y) == castscope.metrics(x, y)
    np.testing.assert_array_equal(ro, x)


def test_ctrl_c_cancels_a_long_cast(rng):
    # One thread makes the cast slow enough to interrupt; the time to a small cast sets the scale.
    # On the CPU: a GPU cast of this size ends before any signal arrives.
    small = rng.standard_normal(1 << 20, dtype=np.float32)
    castscope.cast(small, "mx9", threads=1, device="cpu")
    t0 = time.perf_counter()
    castscope.cast(small, "mx9", threads=1, device="cpu")
    per_mib = time.perf_counter() - t0
    big = np.resize(small, 32 << 20)
    timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
    t0 = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        castscope.cast(big, "mx9", threads=1, device="cpu")
    elapsed = time.perf_counter() - t0
    timer.join()
    # Finishing would take about 32 * per_mib; a cancelled cast stops within a few chunks.
    assert elapsed < 0.5 * 32 * per_mib, (elapsed, per_mib)


def test_python_threads_share_the_engine(rng):
    from concurrent.futures import ThreadPoolExecutor

    xs = [sample(rng, (64, 128)) for _ in range(8)]
    refs = [castscope.cast(x, "nvfp4") for x in xs]
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda x: castscope.cast(x, "nvfp4"), xs))
    assert all(bits(a) == bits(b) for a, b in zip(outs, refs))


def test_long_calls_release_the_gil(rng):
    # A Python thread keeps running while the engine works: the cast does not hold the GIL.
    x = rng.standard_normal(8 << 20, dtype=np.float32)
    ticks = 0
    done = threading.Event()

    def spin():
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=spin)
    t.start()
    t0 = time.perf_counter()
    castscope.cast(x, "mx9", threads=1)
    elapsed = time.perf_counter() - t0
    done.set()
    t.join()
    assert ticks >= min(20, 100 * elapsed), (ticks, elapsed)
