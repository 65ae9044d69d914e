#!/usr/bin/env python3
"""Interop check of the exported layouts, from outside CastScope.

Writes a float32 safetensors checkpoint, exports it with castscope-cli (native and
compressed-tensors layouts), loads the results with numpy + safetensors, decodes them following
docs/export-formats.md alone, and compares bit for bit with `castscope-cli cast --mode virtual`.

usage: test_interop.py PATH/TO/castscope-cli      (exit 77: numpy or safetensors missing)
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import save_file
except ImportError as e:  # the test tools are optional; CTest reports a skip
    print(f"skipping: {e}")
    sys.exit(77)

from interop_common import CLI, SEED, exit_status  # noqa: E402

rng = np.random.default_rng(SEED)

# ----------------------------------------------------------------------------------------------
# Reading safetensors: the library for header and metadata; raw bytes for dtypes numpy lacks.


def read_safetensors(path):
    with safe_open(path, framework="np") as f:
        meta = f.metadata() or {}
        keys = list(f.keys())
    with open(path, "rb") as fh:
        raw = fh.read()
    (hl,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hl])
    out = {}
    np_types = {"F32": np.float32, "F16": np.float16, "U8": np.uint8, "I8": np.int8, "I16": np.int16,
                "U16": np.uint16, "I32": np.int32, "U32": np.uint32, "F8_E4M3": np.uint8, "F8_E5M2": np.uint8,
                "BF16": np.uint16, "BOOL": np.uint8}
    for k in keys:
        e = header[k]
        b, en = e["data_offsets"]
        arr = np.frombuffer(raw[8 + hl + b:8 + hl + en], dtype=np_types[e["dtype"]]).reshape(e["shape"])
        out[k] = (e["dtype"], arr)
    return meta, out


# ----------------------------------------------------------------------------------------------
# Number formats (docs/export-formats.md, "Element codes").


class Num:
    def __init__(self, text):
        self.text = text
        std = {"float32": (8, 23, 127, "ieee"), "float16": (5, 10, 15, "ieee"), "bfloat16": (8, 7, 127, "ieee")}
        if text in std:
            self.kind = "float"
            self.e, self.m, self.bias, self.special = std[text]
            self.bits = 1 + self.e + self.m
            return
        m = re.fullmatch(r"(u?)int(\d+)", text)
        if m:
            self.kind = "uint" if m.group(1) else "int"
            self.bits = int(m.group(2))
            return
        m = re.fullmatch(r"e(\d+)m(\d+)(?:b(\d+))?(fnuz|fn)?", text)
        if not m:
            raise ValueError(f"number spec {text}")
        self.e, self.m = int(m.group(1)), int(m.group(2))
        if self.m == 0:
            self.kind, self.bits, self.bias = "exponent", self.e, (1 << (self.e - 1)) - 1
            return
        self.kind = "float"
        self.bits = 1 + self.e + self.m
        self.bias = int(m.group(3)) if m.group(3) else (1 << (self.e - 1)) - 1
        if m.group(4) == "fnuz" and self.bits <= 6:
            self.special = "finite"  # TensorCast's spelling of the OCP FP6 / FP4 types
        elif m.group(4):
            self.special = m.group(4)
        elif self.bits <= 6:
            self.special = "finite"  # OCP e2m1 / e3m2 / e2m3
        else:
            self.special = "ieee"

    def decode(self, codes):
        """Float64 values of unsigned codes (low `bits` bits)."""
        c = codes.astype(np.int64) & ((1 << self.bits) - 1)
        if self.kind == "int":
            return np.where(c >> (self.bits - 1), c - (1 << self.bits), c).astype(np.float64)
        if self.kind == "uint":
            return c.astype(np.float64)
        if self.kind == "exponent":
            return np.where(c == (1 << self.bits) - 1, np.nan, np.ldexp(1.0, (c - self.bias).astype(np.int32)))
        sign = np.where((c >> (self.e + self.m)) & 1, -1.0, 1.0)
        ex = (c >> self.m) & ((1 << self.e) - 1)
        man = c & ((1 << self.m) - 1)
        v = np.where(ex == 0, np.ldexp(man.astype(np.float64), 1 - self.bias - self.m),
                     np.ldexp((man + (1 << self.m)).astype(np.float64), (ex - self.bias - self.m).astype(np.int32)))
        v = sign * v
        mag = c & ((1 << (self.e + self.m)) - 1)
        if self.special == "ieee":
            v = np.where(ex == (1 << self.e) - 1, np.where(man == 0, sign * np.inf, np.nan), v)
        elif self.special == "fn":
            v = np.where(mag == (1 << (self.e + self.m)) - 1, np.nan, v)
        elif self.special == "fnuz":
            v = np.where(c == 1 << (self.e + self.m), np.nan, v)
        return v


def parse_dtype(s):
    """NSPEC[_SSPEC]: number, scale, optional second, tiles [(size, sub, offset bits, n, m)]."""
    segs = s.split("_")
    num = Num(segs[0])
    specs, tiles = [], []
    for seg in segs[1:]:
        t = re.fullmatch(r"t(\d+)(?:s(\d+))?(?:o(\d+))?(?:n(\d+)m(\d+))?", seg)
        if t:
            size, sub, off, n, m = (int(x) if x else 0 for x in t.groups())
            tiles.append((size, sub, off or (1 if sub else 0), n, m))
        else:
            specs.append(Num(seg))
    return num, (specs[0] if specs else None), (specs[1] if len(specs) > 1 else None), tiles


def unpack_fields(packed, width, length):
    """Fields of `width` bits packed along the last axis, element k at bits (k % per) * width."""
    per = 8 // width
    p = packed.astype(np.uint8)
    k = np.arange(length)
    return (p[..., k // per] >> ((k % per) * width).astype(np.uint8)) & ((1 << width) - 1)


def dense_values(packed, bits, count):
    """`count` values of `bits` bits stored back to back, least significant bit first."""
    b = np.unpackbits(packed.reshape(-1).view(np.uint8), bitorder="little")[: count * bits]
    return (b.reshape(count, bits).astype(np.int64) << np.arange(bits)).sum(axis=1)


def fields(meta, stored, width, bits, shape):
    """A part of values of `bits` bits, `shape` once unpacked: in memory's layout (fields of
    `width` bits along the last axis, a row's last byte padded) or, from layout version 4 on,
    densely packed (one axis of bytes) where that differs."""
    per = max(1, 8 // width)
    memory = tuple(shape[:-1]) + (-(-shape[-1] // per),)
    if int(meta.get("castscope.version", "1")) >= 4 and stored.shape != memory:
        assert stored.ndim == 1 and stored.dtype == np.uint8, (stored.shape, memory)
        return dense_values(stored, bits, int(np.prod(shape))).reshape(shape)
    if width >= 8:
        return stored.astype(np.int64)
    return unpack_fields(stored, width, shape[-1])


# ----------------------------------------------------------------------------------------------
# Native layout decoder.


def decode_native(meta, tensors, name):
    num, scale, second, tiles = parse_dtype(meta[name + ".dtype"])
    shape = json.loads(meta[name + ".shape"])
    assert int(meta[name + ".axis"]) in (-1, len(shape) - 1), "this decoder handles the last axis only"
    L = shape[-1]
    st_dtype, codes = tensors[name]
    if st_dtype in ("F32", "F16"):  # float storage: the codes are the values (F8 / BF16 are bit patterns)
        codes = codes.view(np.uint32 if st_dtype == "F32" else np.uint16)
    sparse = next((t for t in tiles if t[4]), None)
    cs_last = (L + sparse[4] - 1) // sparse[4] * sparse[3] if sparse else L
    width = 2 if num.bits <= 2 else 4 if num.bits <= 4 else 8 * codes.dtype.itemsize
    if codes.dtype.itemsize == 1:
        codes = codes.view(np.uint8)
    codes = fields(meta, codes, width, num.bits, shape[:-1] + [cs_last]).astype(np.int64)
    if sparse:
        n, m = sparse[3], sparse[4]
        mask = fields(meta, tensors[name + ".mask"][1], 1, 1, shape).astype(bool)
        run = np.arange(L) // m
        # Rank of each kept element inside its run: cumulative count minus the count before the run.
        cum = np.cumsum(mask, axis=-1)
        before = np.concatenate([np.zeros(mask.shape[:-1] + (1,), np.int64), cum], axis=-1)[..., run * m]
        slot = np.clip(run * n + (cum - before) - 1, 0, cs_last - 1)
        codes = np.where(mask, np.take_along_axis(codes, slot, axis=-1), 0)
    if scale is None:
        v = num.decode(codes)
        return v.astype(np.float32)
    # Element's group along the last axis (tile size 0 = channel; no tile = tensor scale).
    k = np.arange(L)
    if not tiles:
        g = np.zeros(L, np.int64)
    else:
        T = tiles[-1][0] or L
        g = k // T
    sc_codes = tensors[name + ".scale"][1]
    sc_codes = sc_codes.view(np.uint8) if sc_codes.dtype == np.uint8 else sc_codes
    if not tiles:
        sc = np.broadcast_to(sc_codes.reshape(()), codes.shape)
    else:
        sc = sc_codes[..., g]
    t = 1.0
    if num.kind != "uint" and second is not None:
        t = float(tensors[name + ".tenscale"][1].reshape(-1)[0])
    if scale.kind == "exponent":
        u = 0
        if tiles and tiles[-1][1]:
            T, sub = tiles[-1][0], tiles[-1][1]
            width = tiles[-1][2]
            packed = tensors[name + ".meta"][1]
            bits = fields(meta, packed, width, width, shape[:-1] + [-(-L // T) * (T // sub)])
            u = bits[..., (k // T) * (T // sub) + (k % T) // sub].astype(np.int64)
        shift = sc.astype(np.int64) - 127 - u
        if num.kind == "int" and tiles and tiles[-1][1]:
            # Shared-microexponent integers are sign-magnitude: bit K-1 the sign, K-1 magnitude bits.
            c = codes & ((1 << num.bits) - 1)
            mag = (c & ((1 << (num.bits - 1)) - 1)).astype(np.float64)
            q = np.where(c >> (num.bits - 1), -mag, mag)
        else:
            q = num.decode(codes)
        if num.kind == "int":
            q = q * 2.0 ** -(num.bits - 2)
        v = np.ldexp(q, shift.astype(np.int32)) * t
        v = np.where(sc == 255, np.nan, v)
    else:
        s = scale.decode(sc.view(np.uint8) if sc.dtype == np.uint8 else sc) if scale.text not in ("float32", "float16") \
            else sc.astype(np.float64)
        q = num.decode(codes)
        if num.kind == "uint":
            z_codes = tensors[name + ".zero"][1]
            z = z_codes[..., g] if tiles else np.broadcast_to(z_codes.reshape(()), codes.shape)
            if second.kind == "int":
                v = (q - z.astype(np.float64)) * s
            elif second.text in ("float32", "float16"):
                v = q * s + z.astype(np.float64)
            else:  # bfloat16 / fp8 zero points arrive as their bit patterns
                v = q * s + second.decode(z)
        else:
            v = (q * s) * t
        v = np.where(np.isfinite(s), v, np.nan)
    if sparse:
        v = np.where(mask, v, 0.0)
    return v.astype(np.float32)


def same(a, b):
    return a.shape == b.shape and bool(np.all((a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))))


def run(*args):
    r = subprocess.run([CLI, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"castscope-cli {' '.join(args)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")


def virtual(work, x, dtype):
    src, dst = os.path.join(work, "x.npy"), os.path.join(work, "v.npy")
    np.save(src, x)
    run("cast", src, dst, "--dtype", dtype, "--mode", "virtual", "--device", "cpu")
    return np.load(dst)


def sample(shape):
    x = rng.standard_normal(shape) * np.ldexp(1.0, rng.integers(-6, 7, size=shape))
    x[rng.random(shape) < 0.03] = 0.0
    return x.astype(np.float32)


def main():
    failures = []
    with tempfile.TemporaryDirectory(prefix="castscope_interop_", ignore_cleanup_errors=True) as work:
        native_types = {"l0.mxfp4": "mxfp4e2", "l1.mxfp8": "mxfp8e4", "l2.nvfp4": "nvfp4", "l3.int8sc": "int8_sc",
                        "l4.uint4": "uint4_fi32", "l5.mx9": "mx9", "l6.sparse": "e4m3fn_e8m0_t32n2m4",
                        "l7.sparse4": "e2m1fnuz_e8m0_t32n2m4", "l8.mx4": "mx4", "l9.uint8": "uint8_ssc",
                        "l10.uint4b": "uint4_bb32", "l11.mxint4": "mxint4", "l12.offset2": "e2m1_e32s4o2",
                        "l13.mxfp6": "mxfp6e2", "l14.fp5": "e2m2_e8m0_t32", "l15.fp7": "e3m3_e8m0_t32",
                        "l16.int3": "int3_float32_t32", "l17.sparse6": "e3m2_e8m0_t32n2m4"}
        model = {n: sample((int(rng.integers(2, 9)) * 4, 96)) for n in native_types}
        model["norm.weight"] = sample((96,))
        mpath = os.path.join(work, "model.safetensors")
        save_file(model, mpath)
        plan = {"default": "keep", "rules": [{"pattern": n, "dtype": d} for n, d in native_types.items()]}
        with open(os.path.join(work, "plan.json"), "w") as f:
            json.dump(plan, f)
        out = os.path.join(work, "native.safetensors")
        run("export", mpath, out, "--plan", os.path.join(work, "plan.json"), "--layout", "native", "--device", "cpu", "-q")
        meta, tensors = read_safetensors(out)
        assert meta["format"] == "castscope-packed", meta.get("format")
        for n, d in native_types.items():
            got = decode_native(meta, tensors, n)
            want = virtual(work, model[n], d)
            if not same(got, want):
                bad = np.flatnonzero(~((got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))))
                failures.append(f"native {n} as {d}: {bad.size} values differ, first at {bad[:3]}: "
                                f"{got.reshape(-1)[bad[:3]]} vs {want.reshape(-1)[bad[:3]]}")
            else:
                print(f"ok  native {d:24s} {n}")
        kept = decode_native(meta, tensors, "norm.weight")
        if not same(kept, model["norm.weight"]):
            failures.append("native: kept float32 tensor differs")

        # compressed-tensors
        ct_types = {"m.a.weight": "nvfp4", "m.b.weight": "mxfp4e2", "m.c.weight": "fp8e4_channel",
                    "m.d.weight": "fp8e4_tensor"}
        model = {n: sample((int(rng.integers(2, 9)) * 8, 128)) for n in ct_types}
        model["m.norm.weight"] = sample((128,))
        save_file(model, mpath)
        plan = {"default": "keep", "rules": [{"pattern": n, "dtype": d} for n, d in ct_types.items()]}
        with open(os.path.join(work, "plan.json"), "w") as f:
            json.dump(plan, f)
        ctdir = os.path.join(work, "ct")
        os.mkdir(ctdir)
        run("export", mpath, ctdir, "--plan", os.path.join(work, "plan.json"), "--layout", "compressed-tensors",
            "--device", "cpu", "-q")
        meta, tensors = read_safetensors(os.path.join(ctdir, "model.safetensors"))
        with open(os.path.join(ctdir, "config.json")) as f:
            qc = json.load(f)["quantization_config"]
        assert qc["quant_method"] == "compressed-tensors" and qc["format"] == "mixed-precision", qc
        formats = {g["format"]: g for g in qc["config_groups"].values()}
        assert formats["nvfp4-pack-quantized"]["targets"] == ["m.a"], formats
        assert formats["mxfp4-pack-quantized"]["weights"]["group_size"] == 32
        e2m1, e4m3 = Num("e2m1"), Num("e4m3fn")
        for n, d in ct_types.items():
            want = virtual(work, model[n], d)
            if d.startswith("fp8"):
                q = e4m3.decode(tensors[n][1])
                s = tensors[n + "_scale"][1].astype(np.float64)
                got = (q * (s if s.shape == (q.shape[0], 1) else s.reshape(()))).astype(np.float32)
            else:
                packed = tensors[n + "_packed"][1]
                q = e2m1.decode(unpack_fields(packed, 4, packed.shape[-1] * 2))
                sc = tensors[n + "_scale"][1]
                k = np.arange(q.shape[-1])
                if d == "nvfp4":
                    t = struct.unpack("<f", struct.pack("<I", int(meta[f"castscope.{n}.tensor_scale"], 16)))[0]
                    gs = float(tensors[n + "_global_scale"][1][0])
                    assert np.float32(gs) == np.float32(1.0) / np.float32(t), (gs, t)
                    got = ((q * e4m3.decode(sc)[..., k // 16]) * t).astype(np.float32)
                    # What a compressed-tensors consumer computes: within one float32 ulp.
                    approx = (q * (e4m3.decode(sc)[..., k // 16] / gs)).astype(np.float32)
                    assert np.all(np.abs(approx - want) <= np.spacing(np.abs(want)) * 1.0001 + 1e-45), "global scale"
                else:
                    got = np.ldexp(q, sc[..., k // 32].astype(np.int32) - 127).astype(np.float32)
            if not same(got, want):
                failures.append(f"compressed-tensors {n} as {d}: values differ")
            else:
                print(f"ok  compressed-tensors {d:14s} {n}")
        if tensors["m.norm.weight"][0] != "F32" or not same(tensors["m.norm.weight"][1], model["m.norm.weight"]):
            failures.append("compressed-tensors: kept tensor differs")

        # GGUF through ggml's own Python reader, where it is installed (optional: pip gguf).
        try:
            import gguf
            from gguf import quants
        except ImportError:
            print("gguf-py not installed: GGUF check skipped")
        else:
            gg_types = {"g.mx": "mxfp4e2", "g.q8": "int8_f32", "g.h": "float16", "g.b": "bfloat16"}
            model = {n: sample((int(rng.integers(1, 5)) * 2, 64)) for n in gg_types}
            save_file(model, mpath)
            plan = {"rules": [{"pattern": n, "dtype": d} for n, d in gg_types.items()]}
            with open(os.path.join(work, "plan.json"), "w") as f:
                json.dump(plan, f)
            gpath = os.path.join(work, "m.gguf")
            run("export", mpath, gpath, "--plan", os.path.join(work, "plan.json"), "--layout", "gguf", "--device", "cpu", "-q")
            for t in gguf.GGUFReader(gpath).tensors:
                got = np.asarray(quants.dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(model[t.name].shape)
                want = virtual(work, model[t.name], gg_types[t.name])
                if t.tensor_type.name == "MXFP4":
                    # ggml's MXFP4 table holds doubled values as integers, so code 0x8 (-0) reads
                    # as +0 there (docs/export-formats.md, GGUF); only the sign of zero is set aside.
                    want = np.where(want == 0, np.float32(0), want)
                if not same(got, want):
                    failures.append(f"gguf {t.name} ({t.tensor_type.name}): gguf-py decodes different values")
                else:
                    print(f"ok  gguf (gguf-py) {t.tensor_type.name:8s} {t.name}")
    return exit_status(failures, "interop")


if __name__ == "__main__":
    sys.exit(main())
