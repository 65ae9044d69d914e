"""The evaluation modules import without a circle: the runtimes (_eval_onnx, _eval_hf, _eval_gguf)
take what they share from _eval_common, which imports none of them nor _eval; _eval dispatches to
the runtimes and re-exports the shared names."""
import ast
import os

import pytest

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "castscope")
RUNTIMES = ["_eval_onnx", "_eval_hf", "_eval_gguf"]


def imports_of(module):
    """The castscope modules a module's source imports (relative imports, at any depth)."""
    tree = ast.parse(open(os.path.join(PKG, module + ".py")).read())
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.level == 1:
            if n.module:
                out.add(n.module)
            else:
                out.update(a.name for a in n.names)
    return out


def test_no_import_circle():
    graph = {m: imports_of(m) for m in ["_eval", "_eval_common", *RUNTIMES]}
    assert graph["_eval_common"].isdisjoint({"_eval", *RUNTIMES}), graph["_eval_common"]
    for r in RUNTIMES:
        assert "_eval" not in graph[r], f"{r} imports _eval back: {graph[r]}"
        assert "_eval_common" in graph[r], r

    def reach(m, seen):
        for n in graph.get(m, ()):
            if n not in seen:
                seen.add(n)
                reach(n, seen)
        return seen

    for m in graph:
        assert m not in reach(m, set()), f"{m} reaches itself"


def test_shared_names_stay_importable_from_eval():
    castscope = pytest.importorskip("castscope", reason="the castscope package is not importable")
    from castscope import _eval, _eval_common

    for name in ["EvalError", "EvalResult", "Job", "plan_layout", "compare_output",
                 "detect_format"]:
        assert getattr(_eval, name) is getattr(_eval_common, name)
    assert castscope.evaluate is _eval.evaluate
