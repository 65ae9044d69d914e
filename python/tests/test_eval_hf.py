"""End-to-end evaluation of tiny transformers models made here (Llama, GPT-2 with Conv1D, a
Mixtral MoE with heavy-tailed weights and outlier channels): castscope.evaluate against PyTorch
run here, and the state dict the quantized model ran compared bit for bit with castscope.cast."""
import os
import sys

import numpy as np
import pytest

import castscope

# The GGUF writer that tools/eval_table.py makes its tiny Llama with.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from tiny_gguf import write_tiny_llama_gguf  # noqa: E402

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

PLAN = {"default": "keep", "rules": [
    {"pattern": "*embed*", "dtype": "keep"},
    {"pattern": "*wte*", "dtype": "keep"},
    {"pattern": "*wpe*", "dtype": "keep"},
    {"pattern": "re:(v_proj|c_proj|\\.w2\\.)", "dtype": "mxfp6e2", "rank": 2},
    {"pattern": "*", "dtype": "nvfp4", "rank": 2},
]}


def heavy_tails(model, rng):
    """Student-t weights with a few outlier input channels, as real checkpoints have."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                w = rng.standard_t(3, p.shape).astype(np.float32) * 0.05
                cols = rng.choice(p.shape[-1], size=max(1, p.shape[-1] // 32), replace=False)
                w[..., cols] *= 20
                p.copy_(torch.from_numpy(w))


def make_model(kind, path, rng):
    torch.manual_seed(int(rng.integers(1 << 30)))
    common = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    if kind == "llama":
        m = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    elif kind == "gpt2":
        m = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=96, n_embd=64, n_layer=2, n_head=4, n_positions=64, bos_token_id=0,
            eos_token_id=0))
    else:
        m = transformers.MixtralForCausalLM(transformers.MixtralConfig(
            **common, num_local_experts=4, num_experts_per_tok=2))
        heavy_tails(m, rng)
    m.save_pretrained(path)
    return path


def load(path):
    return transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def rule_for(name, shape):
    """The plan's rule for a tensor, matched here independently of the engine."""
    import fnmatch
    import re

    for r in PLAN["rules"]:
        if "rank" in r and r["rank"] != len(shape):
            continue
        pat = r["pattern"]
        if pat.startswith("re:") and re.search(pat[3:], name) or fnmatch.fnmatchcase(name, pat):
            return r["dtype"]
    return "keep"


def torch_metrics(ref, out, ids):
    lp, lq = torch.log_softmax(ref.double(), -1), torch.log_softmax(out.double(), -1)
    kl = (lp.exp() * (lp - lq)).sum(-1).mean().item()
    top1 = (ref.argmax(-1) == out.argmax(-1)).double().mean().item()
    nll = torch.nn.functional.cross_entropy(ref[:, :-1].reshape(-1, ref.shape[-1]).double(),
                                            ids[:, 1:].reshape(-1))
    return kl, top1, float(torch.exp(nll))


@pytest.mark.parametrize("kind", ["llama", "gpt2", "mixtral"])
def test_outputs_match_pytorch_and_weights_match_cast(kind, tmp_path, rng):
    path = make_model(kind, tmp_path / kind, rng)
    ids = rng.integers(0, 96, size=(2, 24)).astype(np.int64)
    np.save(tmp_path / "ids.npy", ids)
    saved = tmp_path / "ran.safetensors"
    r = castscope.evaluate(path, PLAN, inputs=tmp_path / "ids.npy", device="cpu",
                           save_quantized=saved)
    assert r.format == "hf" and not r.synthetic

    # The weights PyTorch ran, bit for bit: castscope.cast of every checkpoint tensor the plan
    # casts, found in the runtime's state dict (Mixtral's experts fused by transformers).
    src = safetensors_torch.load_file(str(path / "model.safetensors"))
    ran = safetensors_torch.load_file(str(saved))
    # Each along its resolved layout, as castscope-cli casts it (GPT-2's Conv1D [in, out] over in).
    model = castscope.open_model(path)
    want = {}
    for name, w in src.items():
        d = rule_for(name, w.shape)
        want[name] = w if d == "keep" else torch.from_numpy(model[name].cast(d))
    checked = 0
    for name, w in want.items():
        alias = name.replace(".block_sparse_moe.", ".mlp.")  # transformers' own renaming
        if name in ran or alias in ran:
            assert torch.equal(ran[name if name in ran else alias], w.float()), name
            checked += 1
        elif kind == "mixtral" and ".experts." in name:
            # experts.E.w1 / w3 -> experts.gate_up_proj[E] (gate rows, then up rows);
            # experts.E.w2 -> experts.down_proj[E]
            layer, rest = name.split(".block_sparse_moe.experts.")
            e, which = int(rest.split(".")[0]), rest.split(".")[1]
            if which == "w2":
                got = ran[f"{layer}.mlp.experts.down_proj"][e]
            else:
                gu = ran[f"{layer}.mlp.experts.gate_up_proj"][e]
                half = gu.shape[0] // 2
                got = gu[:half] if which == "w1" else gu[half:]
            assert torch.equal(got, w.float()), name
            checked += 1
    assert checked == len(want)
    assert r.size["tensors_cast"] == sum(rule_for(n, w.shape) != "keep" for n, w in src.items())

    # The outputs, from PyTorch run here: the original and a model holding exactly `ran`.
    t_ids = torch.from_numpy(ids)
    ref_m = load(path)
    q_m = load(path)
    q_m.load_state_dict(ran, strict=False)
    with torch.no_grad():
        ref = torch.cat([ref_m(input_ids=t_ids[i:i + 1]).logits for i in range(2)])
        out = torch.cat([q_m(input_ids=t_ids[i:i + 1]).logits for i in range(2)])
    kl, top1, ppl = torch_metrics(ref, out, t_ids)
    assert r.kl == pytest.approx(kl, rel=1e-4) and r.kl > 0
    assert r.top1 == pytest.approx(top1)
    assert r.perplexity["original"] == pytest.approx(ppl, rel=1e-5)
    assert r.perplexity["quantized"] != r.perplexity["original"]


def test_activation_cast_through_hooks(tmp_path, rng):
    path = make_model("llama", tmp_path / "llama", rng)
    ids = rng.integers(0, 96, size=(1, 16)).astype(np.int64)
    r = castscope.evaluate(path, {"default": "keep"}, inputs=ids, act_dtype="mxfp4e2", device="cpu")
    assert r.act_dtype == "mxfp4e2" and r.kl > 0
    assert any("14 Linear" in n for n in r.notes)  # 7 per layer, the head left out
    # The same hooks written here: every Linear input but the head's cast by castscope.cast.
    m = load(path)
    for mod in m.modules():
        if isinstance(mod, torch.nn.Linear) and mod is not m.lm_head:
            mod.register_forward_pre_hook(lambda mod, a: (castscope.cast(a[0].contiguous(), "mxfp4e2", axis=-1),))
    ref_m = load(path)
    with torch.no_grad():
        t = torch.from_numpy(ids)
        kl, top1, _ = torch_metrics(ref_m(input_ids=t).logits, m(input_ids=t).logits, t)
    assert r.kl == pytest.approx(kl, rel=1e-4) and r.top1 == pytest.approx(top1)
    # weights-only keep plan without activations: identical outputs
    r0 = castscope.evaluate(path, {"default": "keep"}, inputs=ids, device="cpu")
    assert r0.kl == 0 and r0.top1 == 1


def test_lm_inputs_checked(tmp_path, rng):
    path = make_model("llama", tmp_path / "llama", rng)
    with pytest.raises(castscope.Error, match=r"token ids are float32"):
        castscope.evaluate(path, "nvfp4", inputs=np.zeros((1, 8), np.float32))
    with pytest.raises(castscope.Error, match=r"range over \[0, 500\].*\[0, 95\]"):
        castscope.evaluate(path, "nvfp4", inputs=np.array([[0, 500]]))
    with pytest.raises(castscope.Error, match=r"at most 64"):
        castscope.evaluate(path, "nvfp4", inputs=np.zeros((1, 65), np.int64))
    (tmp_path / "t.txt").write_text("hello world")
    with pytest.raises(castscope.Error, match=r"no tokenizer"):
        castscope.evaluate(path, "nvfp4", inputs=tmp_path / "t.txt")
    r = castscope.evaluate(path, "nvfp4", seed=1, device="cpu")
    assert r.synthetic and "synthetic token ids" in r.inputs["description"]
    assert r.inputs["shapes"]["input_ids"] == [2, 64]
    (tmp_path / "notamodel").mkdir()
    with pytest.raises(castscope.Error, match=r"without config.json"):
        castscope.evaluate(tmp_path / "notamodel", "nvfp4")


def test_gguf_needs_llama_cpp(tmp_path, rng):
    gguf = pytest.importorskip("gguf")
    try:
        import llama_cpp  # noqa: F401
        pytest.skip("llama-cpp-python is installed here")
    except ImportError:
        pass
    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), arch="llama")
    w.add_tensor("blk.0.attn_q.weight", rng.standard_normal((64, 64)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(castscope.Error, match=r"not installed here: pip install llama-cpp-python"):
        castscope.evaluate(tmp_path / "m.gguf", "nvfp4")


def test_gguf_quantized_file_holds_the_cast(tmp_path, rng):
    """The GGUF llama.cpp would run: planned tensors as F32 cast values, the rest as stored."""
    gguf = pytest.importorskip("gguf")
    from castscope import _eval, _eval_gguf

    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), arch="llama")
    w.add_uint32("llama.block_count", 1)
    w.add_array("tokenizer.ggml.tokens", ["a", "b", "c"])
    q = rng.standard_normal((32, 64)).astype(np.float32)
    k = rng.standard_normal((16, 64)).astype(np.float32)
    w.add_tensor("blk.0.attn_q.weight", q)
    w.add_tensor("blk.0.attn_k.weight", k)
    w.add_tensor("blk.0.attn_norm.weight", rng.standard_normal(64).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    plan = {"default": "keep", "rules": [{"pattern": "*attn_q*", "dtype": "mxfp4e2"}]}
    cm = castscope.open_model(tmp_path / "m.gguf")
    layout = _eval.plan_layout(cm, plan, layout="gguf")
    _eval_gguf.write_quantized(str(tmp_path / "m.gguf"), layout, {}, str(tmp_path / "q.gguf"),
                               _eval.Job(None, None), cm)
    rd = gguf.GGUFReader(str(tmp_path / "q.gguf"))
    t = {x.name: np.asarray(x.data) for x in rd.tensors}
    assert np.array_equal(t["blk.0.attn_q.weight"].reshape(q.shape), castscope.cast(q, "mxfp4e2"))
    assert np.array_equal(t["blk.0.attn_k.weight"].reshape(k.shape), k)
    assert rd.fields["llama.block_count"].contents() == 1
    assert rd.fields["tokenizer.ggml.tokens"].contents() == ["a", "b", "c"]


@pytest.mark.skipif(not (torch.cuda.is_available() and castscope.backend_info()["cuda_available"]),
                    reason="needs a CUDA GPU and a CUDA build")
def test_cuda_runs_the_cpu_bits(tmp_path, rng):
    """On the GPU: the weights PyTorch ran are the CPU engine's cast, bit for bit, and the
    activation hooks cast CUDA tensors in place as castscope.cast does on the CPU."""
    path = make_model("llama", tmp_path / "llama", rng)
    ids = rng.integers(0, 96, size=(2, 24)).astype(np.int64)
    saved = tmp_path / "ran.safetensors"
    r = castscope.evaluate(path, PLAN, inputs=ids, act_dtype="mxfp8e4", device="cuda",
                           save_quantized=saved)
    assert r.device == "cuda"
    src = safetensors_torch.load_file(str(path / "model.safetensors"))
    ran = safetensors_torch.load_file(str(saved))
    for name, w in src.items():
        d = rule_for(name, w.shape)
        want = w if d == "keep" else castscope.cast(w.float().contiguous(), d, device="cpu")
        assert torch.equal(ran[name], want.float()), name
    x = torch.from_numpy(rng.standard_normal((3, 24, 64)).astype(np.float32))
    on_gpu = castscope.cast(x.cuda(), "mxfp8e4", axis=-1)
    assert on_gpu.is_cuda and torch.equal(on_gpu.cpu(), castscope.cast(x, "mxfp8e4", axis=-1))
    cpu = castscope.evaluate(path, PLAN, inputs=ids, act_dtype="mxfp8e4", device="cpu")
    assert r.top1 == pytest.approx(cpu.top1, abs=0.05) and r.kl == pytest.approx(cpu.kl, rel=0.05)


def make_tiny_gguf(path, rng):
    """A one-block Llama GGUF that llama.cpp loads (tools/tiny_gguf.py): weights normal with std
    0.1 (the embedding 1.0, the output 0.3), norms about 1."""
    pytest.importorskip("gguf")

    def weight(name, shape):
        scale = {"token_embd.weight": 1.0, "output.weight": 0.3}.get(name, 0.1)
        return (1.0 if len(shape) == 1 else 0.0) + rng.standard_normal(shape) * scale

    return write_tiny_llama_gguf(path, weight, vocab=96, embd=64, ff=128, heads=4, kv=2, blocks=1,
                                 context=64)


def test_gguf_runs_in_llama_cpp(tmp_path, rng):
    llama_cpp = pytest.importorskip("llama_cpp")
    gguf = pytest.importorskip("gguf")
    src = make_tiny_gguf(tmp_path / "m.gguf", rng)
    plan = {"default": "keep", "rules": [{"pattern": "*attn_v*", "dtype": "q6_k"},
                                         {"pattern": "*", "dtype": "nvfp4", "rank": 2}]}
    ids = rng.integers(0, 96, size=(2, 20)).astype(np.int64)
    r = castscope.evaluate(tmp_path / "m.gguf", plan, inputs=ids, device="cpu",
                           save_quantized=tmp_path / "q.gguf")
    assert r.format == "gguf" and r.device == "cpu" and r.size["tensors_cast"] == 9
    # The GGUF llama.cpp ran: the cast values as F32, bit for bit; norms as they were.
    ran = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(str(tmp_path / "q.gguf")).tensors}
    for name, w in src.items():
        want = w if w.ndim == 1 else castscope.cast(w, "q6_k" if "attn_v" in name else "nvfp4")
        assert np.array_equal(ran[name].reshape(w.shape), want), name

    def logits(p):
        llm = llama_cpp.Llama(model_path=str(p), n_ctx=64, logits_all=True, n_gpu_layers=0,
                              verbose=False)
        out = []
        for row in ids:
            llm.reset()
            llm.eval([int(x) for x in row])
            out.append(np.array(llm.scores[: ids.shape[1]], dtype=np.float64))
        return np.stack(out)

    ref, out = logits(tmp_path / "m.gguf"), logits(tmp_path / "q.gguf")
    lp = ref - ref.max(-1, keepdims=True)
    lp -= np.log(np.exp(lp).sum(-1, keepdims=True))
    lq = out - out.max(-1, keepdims=True)
    lq -= np.log(np.exp(lq).sum(-1, keepdims=True))
    kl = np.mean(np.sum(np.exp(lp) * (lp - lq), -1))
    assert r.kl == pytest.approx(kl, rel=1e-3) and r.kl > 0
    assert r.top1 == pytest.approx(np.mean(ref.argmax(-1) == out.argmax(-1)))
    nll = -np.take_along_axis(lp[:, :-1], ids[:, 1:, None], -1).mean()
    assert r.perplexity["original"] == pytest.approx(np.exp(nll), rel=1e-4)
