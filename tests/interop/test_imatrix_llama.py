#!/usr/bin/env python3
"""CastScope's GGUF export with llama.cpp's importance matrix, against llama.cpp's own tools.

`llama-imatrix` and `llama-quantize` are built once (scripts/setup-llama-tools.sh) from the
llama.cpp source that llama-cpp-python's PyPI sdist vendors. The tiny seeded Llama of
test_llama_cpp.py is written as an F16 GGUF; the calibration text is the GNU GPL version 3 as
Debian's base-files package installs it (/usr/share/common-licenses/GPL-3).
  * llama-imatrix computes an importance matrix from that text (GGUF, and the legacy .dat);
    CastScope reads it and writes it back byte for byte (GGUF -> GGUF, GGUF -> .dat against
    llama-imatrix's own .dat);
  * per type (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS): `llama-quantize --imatrix --pure`
    and `castscope-cli export --layout gguf --imatrix` with every matrix at that type must give
    the same tensor types and bytes; Q4_K once more with the .dat matrix;
  * the Q4_K_M and Q4_K_S mixes: llama-quantize's per-tensor choice for this model, given to
    CastScope as a plan (tensor name -> datatype), gives the same bytes;
  * general.file_type is llama-quantize's (Q4_K_S 14, Q4_K_M 15, ...);
  * every pair loads in llama.cpp (llama-cpp-python) and gives identical logits on a fixed
    sequence; the KL divergence from the F16 model is printed with and without the matrix.

usage: test_imatrix_llama.py PATH/TO/castscope-cli   (exit 77: a Python package missing, or the
llama.cpp tools could not be built; the reason is printed)
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CALIBRATION = "/usr/share/common-licenses/GPL-3"

try:
    import numpy as np
    import gguf
    import llama_cpp
    import test_llama_cpp as tl
except (ImportError, SystemExit) as e:
    print(f"skipping: {e}")
    sys.exit(77)

from interop_common import SEED, check, cli, exit_status, failures  # noqa: E402

T = gguf.GGMLQuantizationType
PURE = {"Q2_K": "q2_k", "Q3_K": "q3_k", "Q4_K": "q4_k", "Q5_K": "q5_k", "Q6_K": "q6_k",
        "IQ4_NL": "iq4_nl", "IQ4_XS": "iq4_xs"}
DTYPE_OF = {T[k]: v for k, v in PURE.items()} | {T.Q8_0: "q8_0", T.Q4_0: "q4_0",
                                                  T.Q5_0: "q5_0", T.Q4_1: "q4_1"}


def tools():
    """The bin folder of llama-imatrix / llama-quantize, built once into the cache."""
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "setup-llama-tools.sh")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"skipping: llama-quantize / llama-imatrix could not be built:\n{r.stderr[-3000:]}")
        sys.exit(77)
    return r.stdout.strip().splitlines()[-1]


def run(*args):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return r.stdout + r.stderr


def tensors(path):
    return {t.name: t for t in gguf.GGUFReader(path).tensors}


def compare(label, ours, theirs):
    """Tensor types and bytes of two GGUF files, name by name."""
    a, b = tensors(ours), tensors(theirs)
    # llama-quantize writes the tensors in its own order, CastScope in the source's.
    check(sorted(a) == sorted(b), f"{label}: tensor names differ")
    same = differ = 0
    for name, tb in b.items():
        ta = a.get(name)
        if ta is None:
            continue
        if ta.tensor_type != tb.tensor_type:
            check(False, f"{label}: {name} is {ta.tensor_type.name}, llama-quantize's {tb.tensor_type.name}")
            continue
        if np.array_equal(np.asarray(ta.data).view(np.uint8), np.asarray(tb.data).view(np.uint8)):
            same += 1
        else:
            differ += 1
            check(False, f"{label}: {name} ({tb.tensor_type.name}) bytes differ")
    types = sorted({t.tensor_type.name for t in b.values()})
    fa, fb = tl.file_type(ours), tl.file_type(theirs)
    check(fa == fb, f"{label}: general.file_type {fa}, llama-quantize's {fb}")
    print(f"  {label:22s} {same}/{same + differ} tensors byte-identical to llama-quantize "
          f"({', '.join(types)}); general.file_type {fa} (llama-quantize {fb})")


def plan_from(path, work, label):
    """llama-quantize's per-tensor types as a CastScope plan (1-D tensors are kept)."""
    rules = []
    for name, t in tensors(path).items():
        if len(t.shape) >= 2 and t.tensor_type in DTYPE_OF:
            rules.append({"pattern": name, "dtype": DTYPE_OF[t.tensor_type]})
    p = os.path.join(work, f"plan_{label}.json")
    with open(p, "w") as f:
        json.dump({"rules": rules}, f)
    return p


def plan_all(dtype, work):
    """Every tensor to `dtype`, token embedding included, as llama-quantize --pure does (the 1-D
    norms stay float32 in a GGUF export)."""
    p = os.path.join(work, f"plan_all_{dtype}.json")
    with open(p, "w") as f:
        json.dump({"rules": [{"pattern": "*", "dtype": dtype}]}, f)
    return p


def main():
    if not os.path.exists(CALIBRATION):
        print(f"skipping: the calibration text {CALIBRATION} (Debian's base-files) is missing")
        return 77
    bin_dir = tools()
    imatrix_bin, quantize_bin = (os.path.join(bin_dir, n) for n in ("llama-imatrix", "llama-quantize"))
    llama_cpp.llama_backend_init()
    llama_cpp.llama_log_set(tl.QUIET, ctypes.c_void_p(0))
    with tempfile.TemporaryDirectory(prefix="castscope_imatrix_", ignore_cleanup_errors=True) as work:
        f16 = os.path.join(work, "f16.gguf")
        tl.write_f16_gguf(tl.make_model(), f16)
        im = {}
        for fmt in ("gguf", "dat"):
            im[fmt] = os.path.join(work, f"imatrix.{fmt}")
            run(imatrix_bin, "-m", f16, "-f", CALIBRATION, "-o", im[fmt], "--output-format", fmt,
                "-c", "128", "-b", "128", "--chunks", "12", "-t", "2", "--no-ppl",
                "--process-output")
        names = [t.name for t in gguf.GGUFReader(im["gguf"]).tensors]
        print(f"llama-imatrix on {CALIBRATION}: {len(names) // 2} entries, "
              f"{os.path.getsize(im['dat'])} bytes as .dat")

        # Read and written back as llama-imatrix writes them.
        for src, fmt in (("gguf", "gguf"), ("gguf", "dat"), ("dat", "dat")):
            out = os.path.join(work, f"rt_{src}.{fmt}")
            cli("imatrix", im[src], out, "--format", fmt)
            same = open(out, "rb").read() == open(im[fmt], "rb").read()
            check(same, f"imatrix {src} -> {fmt}: not llama-imatrix's bytes")
            print(f"  imatrix {src} -> {fmt}: {'identical to' if same else 'DIFFERS from'} "
                  f"llama-imatrix's {fmt}")

        rng = np.random.default_rng(SEED)
        tokens = [1] + [int(t) for t in rng.integers(3, tl.N_VOCAB, size=31)]
        ref_logits, _ = tl.run_llama(f16, tokens, 0)

        def both(label, ll_args, cs_args):
            ll = os.path.join(work, f"ll_{label}.gguf")
            cs = os.path.join(work, f"cs_{label}.gguf")
            run(quantize_bin, *ll_args(ll))
            cli("export", f16, cs, "--layout", "gguf", "--device", "cpu", "-q", *cs_args(ll))
            compare(label, cs, ll)
            la, _ = tl.run_llama(cs, tokens, 4)
            lb, _ = tl.run_llama(ll, tokens, 4)
            same = np.array_equal(la.view(np.uint32), lb.view(np.uint32))
            check(same, f"{label}: logits differ in llama.cpp")
            return tl.kl(ref_logits, lb), same

        print("CastScope's export against llama-quantize, per type (--pure):")
        for qt, dt in PURE.items():
            k_im, same = both(f"{qt}+imatrix",
                              lambda o, qt=qt: ["--imatrix", im["gguf"], "--pure", f16, o, qt, "2"],
                              lambda o, dt=dt: ["--plan", plan_all(dt, work), "--imatrix",
                                                im["gguf"]])
            k_no, _ = both(f"{qt}", lambda o, qt=qt: ["--pure", f16, o, qt, "2"],
                           lambda o, dt=dt: ["--plan", plan_all(dt, work)])
            print(f"    {qt}: logits {'identical' if same else 'DIFFER'}; KL from F16 "
                  f"{k_no:.4e} without the imatrix, {k_im:.4e} with it")
        both("Q4_K+imatrix.dat", lambda o: ["--imatrix", im["dat"], "--pure", f16, o, "Q4_K", "2"],
             lambda o: ["--plan", plan_all("q4_k", work), "--imatrix", im["dat"]])
        print("the mixes, llama-quantize's per-tensor choice as a CastScope plan:")
        for mix in ("Q4_K_M", "Q4_K_S"):
            k, same = both(f"{mix}+imatrix",
                           lambda o, mix=mix: ["--imatrix", im["gguf"], f16, o, mix, "2"],
                           lambda o, mix=mix: ["--plan", plan_from(o, work, mix), "--imatrix",
                                               im["gguf"]])
            print(f"    {mix}: logits {'identical' if same else 'DIFFER'}; KL from F16 {k:.4e}")
    return exit_status(failures, "imatrix / llama.cpp")


if __name__ == "__main__":
    sys.exit(main())
