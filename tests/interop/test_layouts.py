#!/usr/bin/env python3
"""Every weight quantized the way its model uses it, checked against the rule table.

Builds ONNX graphs with the onnx package (MatMul [K, N], Gemm with transB = 0 / 1, Conv,
depthwise Conv, ConvTranspose, Conv1d, Conv3d, weights behind Transpose and Cast, an initializer
shared by two ops that disagree, a Gather table), a tiny GPT-2 (Conv1D [in, out]) and Llama with
transformers, and a Keras-layout safetensors file; and reads PaddleOCR v4's recognizer from the
rapidocr-onnxruntime wheel. For each:
  * `castscope-cli inspect --json` gives the documented layout (not guessed, conflicts flagged);
  * every tensor's SNR under three datatypes from `castscope-cli map` equals the SNR of the
    documented 2-D view (a numpy reshape) cast along its reduction axis with that axis named;
  * the wrong axis gives other figures (so the check can fail);
  * `export --dtype` casts every weight of rank >= 2 (embeddings and 1-D tensors kept) and its
    values are those of the view's cast; GGUF export refuses a MatMul [K, N] weight by name.

  * the app's model map and its Views panel (scripted sessions) give the CLI's figures cell for
    cell;
  * `--axis-for NAME=AXIS` overrides one tensor's layout in inspect, map and export (recorded in
    the file's plan).

usage: test_layouts.py PATH/TO/castscope-cli [PATH/TO/castscope]
       (exit 77: onnx / safetensors missing; the app check needs xvfb-run)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx  # noqa: F401
    from safetensors.numpy import load_file
except ImportError as e:
    print(f"skipping: {e}")
    sys.exit(77)

from interop_common import CLI, SEED, check, cli, exit_status, failures, same_bits  # noqa: E402
import layout_models as lm  # noqa: E402

DTYPES = ["mxfp6e2", "nvfp4", "q4_k"]
GGML = {"q4_k"}  # ggml block types: along rows only
# The app (optional second argument): its model map must give the CLI's figures.
APP = sys.argv[2] if len(sys.argv) > 2 else None
rng = np.random.default_rng(SEED)


def map_json(path, *extra):
    args = ["map", path, "--json", "--device", "cpu", *extra]
    for d in DTYPES:
        args += ["--dtype", d]
    return json.loads(cli(*args))


def check_model(work, tag, path, weights, expect, full=True):
    """Layouts from inspect; map SNRs against the cast of the documented views."""
    info = lm.inspect_json(cli, path)
    for name, e in expect.items():
        if name not in info:
            check(False, f"{tag}: no tensor {name!r} in inspect")
            continue
        lay = info[name]["layout"]
        check(e.layout in lay["name"], f"{tag}: {name}: layout {lay['name']!r} is not {e.layout}")
        check(not lay["guessed"], f"{tag}: {name}: layout marked guessed ({lay['reason']})")
        check(lay["conflict"] == e.conflict, f"{tag}: {name}: conflict {lay['conflict']}")
        check(lay["embedding"] == e.embedding, f"{tag}: {name}: embedding {lay['embedding']}")
        w = weights[name]
        v = lm.view_of(w, e)
        want = [v.shape[1 - e.red], v.shape[e.red]]
        check(lay["view"] == want, f"{tag}: {name}: view {lay['view']}, expected {want}")
    m = map_json(path)
    rows = {r["name"]: r for r in m["rows"]}
    for name, e in expect.items():
        check((name in rows) != e.embedding, f"{tag}: {name}: in the map: {name in rows}")
    # The documented views, cast with their reduction axis named: one archive per axis.
    names = [n for n in rows if n in expect]
    groups = {0: [], 1: []}
    for n in names:
        groups[expect[n].red].append(n)
    for red, ns in groups.items():
        if not ns:
            continue
        arch = os.path.join(work, f"{tag}_views{red}.npz")
        np.savez(arch, **{f"v{i}": lm.view_of(weights[n], expect[n]) for i, n in enumerate(ns)})
        vm = map_json(arch, "--axis", "0" if red == 0 else "-1")
        vrows = {r["name"]: r for r in vm["rows"]}
        for i, n in enumerate(ns):
            got, want = rows[n]["cells"], vrows[f"v{i}"]["cells"]
            for d, g, w in zip(DTYPES, got, want):
                if d in GGML and red == 0:
                    # ggml runs blocks along rows only: refused by name along axis 0, in the
                    # map as in the view's cast.
                    refused = f"{d} quantizes blocks along the last axis"
                    check(refused in g.get("error", "") and refused in w.get("error", ""),
                          f"{tag}: {n} {d}: along axis 0 not refused: map {g}, view {w}")
                    continue
                check("snr_db" in g and g.get("snr_db") == w.get("snr_db"),
                      f"{tag}: {n} {d}: map {g} != view cast {w}")
    # Along the other axis of the view the figures differ: the check above could fail.
    differs = 0
    for n in names:
        e = expect[n]
        v = lm.view_of(weights[n], e)
        if min(v.shape) < 8:
            continue
        arch = os.path.join(work, f"{tag}_wrong.npz")
        np.savez(arch, v=v)
        wm = map_json(arch, "--axis", "-1" if e.red == 0 else "0")
        differs += wm["rows"][0]["cells"][0].get("snr_db") != rows[n]["cells"][0].get("snr_db")
        if not full:
            break
    check(differs > 0, f"{tag}: the other axis gives the same SNR everywhere")
    return rows


def check_app(work, tag, path):
    """The app's model map (a scripted session, its state file) equals `castscope-cli map`."""
    if not APP or not shutil.which("xvfb-run"):
        print(f"{tag}: app model map not checked (no app or no xvfb-run)")
        return
    script = os.path.join(work, f"{tag}_map.txt")
    state = os.path.join(work, f"{tag}_state.json")
    with open(script, "w") as f:
        f.write(f"open {path}\nmap-dtypes {' '.join(DTYPES)}\nmap-run\nwait\nquit\n")
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"))
    subprocess.run(["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", APP, "--script", script,
                    "--state", state], check=True, capture_output=True, env=env)
    app_rows = json.load(open(state))["model_map"]["rows"]
    args = ["map", path, "--json"]
    for d in DTYPES:
        args += ["--dtype", d]
    cli_rows = {r["name"]: r for r in json.loads(cli(*args))["rows"]}
    check([r["name"] for r in app_rows] == list(cli_rows), f"{tag}: app map rows differ")
    for r in app_rows:
        c = cli_rows.get(r["name"], {"cells": []})
        check(r.get("axis") == c.get("axis"), f"{tag}: app map {r['name']} axis {r.get('axis')}")
        for d, a, b in zip(DTYPES, r["values"], c["cells"]):
            check(a == b.get("snr_db"), f"{tag}: app map {r['name']} {d}: {a} != CLI {b}")


def check_views(work, tag, path, rows):
    """The Views panel (a scripted session: each tensor selected, each datatype set, the state
    written) gives every map row's SNR under each datatype, as `castscope-cli map` does."""
    if not APP or not shutil.which("xvfb-run"):
        print(f"{tag}: app views not checked (no app or no xvfb-run)")
        return
    script = os.path.join(work, f"{tag}_views.txt")
    states = []
    with open(script, "w") as f:
        f.write(f"open {path}\nwait\n")
        for name in rows:
            for d in DTYPES:
                st = os.path.join(work, f"{tag}_view{len(states)}.json")
                states.append((name, d, st))
                f.write(f"tensor {name}\ndtype {d}\nwait\nstate {st}\n")
        f.write("quit\n")
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"))
    r = subprocess.run(["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", APP, "--script", script,
                        "--state", os.path.join(work, f"{tag}_views_end.json")],
                       capture_output=True, text=True, env=env)
    check(r.returncode == 0, f"{tag}: views session failed: {r.stderr[-500:]}")
    for i, (name, d, st) in enumerate(states):
        s = json.load(open(st)) if os.path.exists(st) else {}
        a = s.get("analysis")
        want = rows[name]["cells"][DTYPES.index(d)]
        if "snr_db" not in want:
            # The map refuses this cell (a datatype that cannot run along the tensor's axis):
            # the Views refuse it by the same reason instead of showing a figure for it.
            err = s.get("analysis_error", "")
            check(bool(want.get("error")) and "along the last axis" in err,
                  f"{tag}: Views {name} {d}: map refuses ({want.get('error')}), Views say '{err}'")
            continue
        ok = a is not None and a["tensor"] == name and a["snr_db"] == want.get("snr_db")
        check(ok, f"{tag}: Views {name} {d}: {a and (a['tensor'], a['snr_db'], a['axis'])} "
                  f"!= map {want.get('snr_db')} ({rows[name].get('axis')})")


def check_app_override(work, tag, path, name, axis):
    """A layout override made with the mouse in the app's rule editor (an axis-only rule for one
    tensor) reaches the Views, Compare, Scale modes and the model map: the tensor's SNR and its
    map row equal `castscope-cli map --axis-for NAME=AXIS`, the other rows stay the file's
    layout."""
    if not APP or not shutil.which("xvfb-run"):
        print(f"{tag}: app override not checked (no app or no xvfb-run)")
        return
    d = DTYPES[0]
    before, after = os.path.join(work, f"{tag}_ov0.json"), os.path.join(work, f"{tag}_ov1.json")
    script = os.path.join(work, f"{tag}_override.txt")
    with open(script, "w") as f:
        f.write(f"open {path}\nwait\nmap-dtypes {' '.join(DTYPES)}\nmap-run\nwait\n"
                f"tensor {name}\ndtype {d}\npin {d}\npanel compare\npanel scale-modes\nwait\n"
                f"state {before}\npanel plan\nwait\n"
                'click "Per-layer plan::rules"\n'
                f'type "Per-layer plan::##rule_new_pattern" {name}\n'
                'choose "Per-layer plan::##rule_new_dtype" "axis only"\n'
                f'choose "Per-layer plan::##rule_new_axis" {axis}\n'
                'click "Per-layer plan::Add rule"\nwait\n'
                f"state {after}\nquit\n")
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"))
    r = subprocess.run(["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", APP, "--script", script,
                        "--state", os.path.join(work, f"{tag}_ov_end.json")],
                       capture_output=True, text=True, env=env)
    check(r.returncode == 0, f"{tag}: override session failed: {r.stderr[-500:]}")
    if r.returncode != 0:
        return
    s0, s1 = json.load(open(before)), json.load(open(after))
    file_rows = {r["name"]: r for r in map_json(path)["rows"]}
    over_rows = {r["name"]: r for r in map_json(path, "--axis-for", f"{name}={axis}")["rows"]}
    want_file = file_rows[name]["cells"][0].get("snr_db")
    want_over = over_rows[name]["cells"][0].get("snr_db")
    check(want_file != want_over, f"{tag}: the override gives the file's SNR {want_file}")
    check(s0["analysis"]["snr_db"] == want_file,
          f"{tag}: Views before the rule {s0['analysis']['snr_db']} != CLI {want_file}")
    check(s1["plan"]["rules"][0].get("pattern") == name, f"{tag}: rule {s1['plan']['rules']}")
    check(s1["analysis"]["tensor"] == name and s1["analysis"]["snr_db"] == want_over,
          f"{tag}: Views after the rule {s1['analysis']['snr_db']} != map --axis-for {want_over}")
    # The datatype comparison and the scale modes (floor, the map's) cast along the same layout.
    for when, st, want in [("before", s0, want_file), ("after", s1, want_over)]:
        cmp = [r["snr_db"] for r in st.get("compare", {}).get("rows", []) if r["dtype"] == st["dtype"]]
        check(cmp == [want], f"{tag}: Compare {when} the rule: {cmp} != [{want}]")
        sm = [r["snr_db"] for r in st.get("scale_modes", []) if r["mode"] == "floor"]
        check(sm == [want], f"{tag}: Scale modes {when} the rule: {sm} != [{want}]")
    for when, st, want in [("before", s0, file_rows), ("after", s1, over_rows)]:
        rows = {r["name"]: r for r in st["model_map"]["rows"]}
        check(list(rows) == list(want), f"{tag}: app map rows {when} the rule differ")
        for n, c in want.items():
            got = rows.get(n, {})
            check(got.get("axis") == c.get("axis") and
                  got.get("values") == [x.get("snr_db") for x in c["cells"]],
                  f"{tag}: app map {when} the rule: {n} {got.get('axis')} {got.get('values')} "
                  f"!= CLI {c.get('axis')} {[x.get('snr_db') for x in c['cells']]}")


def check_export(work, tag, path, weights, expect):
    """export --dtype: every weight of rank >= 2 but embeddings cast along its view, as the
    view's cast; 1-D tensors and embeddings kept."""
    out = os.path.join(work, f"{tag}_mxfp8.safetensors")
    cli("export", path, out, "--dtype", "mxfp8e4", "--device", "cpu")
    dec = os.path.join(work, f"{tag}_dec")
    cli("decompress", out, dec)
    back = {}
    for f in os.listdir(dec):
        back[f[:-4]] = np.load(os.path.join(dec, f))
    meta = json.loads(open(out, "rb").read(8 + int.from_bytes(open(out, "rb").read(8), "little"))[8:])
    meta = meta.get("__metadata__", {})
    for name, w in weights.items():
        cast_it = w.ndim >= 2 and name in expect and not expect[name].embedding
        was_cast = meta.get(f"{name}.dtype", "").startswith("e4m3fn_e8m0_t32")
        check(was_cast == cast_it, f"{tag}: export --dtype: {name} {w.shape} cast {was_cast}")
        if not cast_it:
            continue
        e = expect[name]
        src, dst = os.path.join(work, "v_in.npy"), os.path.join(work, "v_out.npy")
        np.save(src, lm.view_of(w, e))
        cli("cast", src, dst, "--dtype", "mxfp8e4", "--mode", "virtual", "--device", "cpu",
            "--axis", "0" if e.red == 0 else "-1")
        key = name if name in back else lm.file_key(name)
        check(key in back and same_bits(back[key].reshape(-1), np.load(dst).reshape(-1)),
              f"{tag}: export of {name} is not the cast of its view")


def check_all(work, tag, path, weights, expect, export_from=None):
    """One model through every check: the CLI's map, its export (of export_from, a file of the
    model, where path is a directory), the app's map and the views."""
    rows = check_model(work, tag, path, weights, expect)
    check_export(work, tag, export_from or path, weights, expect)
    check_app(work, tag, path)
    check_views(work, tag, path, rows)


def main():
    with tempfile.TemporaryDirectory() as work:
        # ONNX graphs built here.
        p = os.path.join(work, "layouts.onnx")
        exp = lm.build_onnx(p, rng)
        w = lm.onnx_weights(p)
        check_all(work, "onnx", p, w, exp)
        # A per-tensor override from the command line: the ConvTranspose weight along its last
        # axis instead of Cin, recorded in the file's plan and its NAME.axis, decompressed as the
        # cast along that axis.
        out = os.path.join(work, "override.safetensors")
        cli("export", p, out, "--dtype", "mxfp8e4", "--device", "cpu", "--axis-for", "ct_w=-1")
        head = open(out, "rb").read()
        meta = json.loads(head[8:8 + int.from_bytes(head[:8], "little")])["__metadata__"]
        plan = json.loads(meta["castscope.plan"])
        check(plan["rules"][0] == {"pattern": "ct_w", "axis": -1}, f"recorded plan {plan}")
        check(meta.get("ct_w.axis") in ("-1", "3") and "ct_w.flatten" not in meta,
              f"override: ct_w axis {meta.get('ct_w.axis')} flatten {meta.get('ct_w.flatten')}")
        dec = os.path.join(work, "override_dec")
        cli("decompress", out, dec)
        src, dst = os.path.join(work, "ct_in.npy"), os.path.join(work, "ct_out.npy")
        np.save(src, w["ct_w"])
        cli("cast", src, dst, "--dtype", "mxfp8e4", "--mode", "virtual", "--device", "cpu",
            "--axis", "-1")
        got = np.load(os.path.join(dec, lm.file_key("ct_w") + ".npy"))
        check(same_bits(got.reshape(-1), np.load(dst).reshape(-1)),
              "override: ct_w is not the cast along its last axis")

        # The same override for inspect and map: the tensor's layout, not guessed, its figures
        # those of the tensor cast along its last axis.
        ins = {t["name"]: t for t in json.loads(cli("inspect", p, "--json", "--axis-for",
                                                     "ct_w=-1"))["tensors"]}
        lay = ins["ct_w"]["layout"]
        check(lay["axis"] == "-1" and not lay["guessed"] and "--axis-for" in lay["reason"],
              f"inspect --axis-for: {lay}")
        check(ins["mm_w"]["layout"]["axis"] == "0", "inspect --axis-for changed another tensor")
        om = {r["name"]: r for r in map_json(p, "--axis-for", "ct_w=-1")["rows"]}
        arch = os.path.join(work, "ct_last.npz")
        np.savez(arch, v=w["ct_w"])
        vm = map_json(arch, "--axis", "-1")["rows"][0]["cells"]
        check([c.get("snr_db") for c in om["ct_w"]["cells"]] == [c.get("snr_db") for c in vm],
              f"map --axis-for: {om['ct_w']['cells']} != {vm}")
        # The same override made in the app's rule editor reaches its Views and model map.
        check_app_override(work, "onnx", p, "ct_w", "-1")

        out = os.path.join(work, "refused.gguf")
        r = subprocess.run([CLI, "export", p, out, "--layout", "gguf", "--dtype",
                                          "q8_0"], capture_output=True, text=True)
        check(r.returncode != 0 and "mm_w" in r.stderr and "rows" in r.stderr,
              f"gguf export of a MatMul [K, N] weight: rc {r.returncode}: {r.stderr[-300:]}")
        check(not os.path.exists(out), "a refused export left a file")

        # Keras layouts.
        p = os.path.join(work, "keras.safetensors")
        exp = lm.build_keras(p, rng)
        w = lm.safetensors_weights(p)
        check_all(work, "keras", p, w, exp)

        # transformers checkpoints (GPT-2's Conv1D, Llama's Linear).
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
            have_hf = True
        except ImportError as e:
            print(f"skipping the transformers models: {e}")
            have_hf = False
        if have_hf:
            for tag, build in [("gpt2", lambda d: lm.build_gpt2(d, SEED)),
                               ("llama", lambda d: lm.build_llama(d, SEED))]:
                d = os.path.join(work, tag)
                exp = build(d)
                w = lm.safetensors_weights(d)
                check_all(work, tag, d, w, exp, os.path.join(d, "model.safetensors"))

        # PaddleOCR v4's recognizer: its linear_*.w_0 MatMul weights [K, N] reduce over K.
        p = lm.ppocr_model()
        if p:
            exp = lm.onnx_expectations(p)
            w = lm.onnx_weights(p)
            linear = [n for n in exp if n.startswith("linear_") and n.endswith(".w_0")]
            check(len(linear) == 9, f"ppocr: {len(linear)} linear_*.w_0 MatMul weights, not 9")
            for n in linear:
                check(exp[n].red == 0, f"ppocr: {n} expected over K")
            check(len(exp) == 47, f"ppocr: {len(exp)} weights resolved by the rule table, not 47")
            rows = check_model(work, "ppocr", p, w, exp, full=False)
            check_app(work, "ppocr", p)
            # The Views on the tensors the issue names (a conv and a MatMul [K, N] weight) and
            # two more of each kind: the whole model would add minutes.
            names = ["conv2d_106.w_0", "linear_85.w_0"]
            names += [n for n in rows if n.startswith("conv2d_") and n not in names][:2]
            names += [n for n in rows if n.startswith("linear_") and n not in names][:2]
            check(all(n in rows for n in names), f"ppocr: map rows lack one of {names}")
            check_views(work, "ppocr", p, {n: rows[n] for n in names if n in rows})
    return exit_status(failures, "layout")


if __name__ == "__main__":
    sys.exit(main())
