"""benchmarks/models.py --smoke: tiny transformers models (a Llama, a Qwen2, a GPT-2 and
a BERT), decode-like, prefill and a training step, eager against enable() through the
interpreter: logits and gradients agree, and tritonjit kernels run the covered calls."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "models.py"


def _models():
    spec = importlib.util.spec_from_file_location("tritonjit_bench_models", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


M = _models()


@pytest.mark.parametrize("model", M.MODELS)
def test_models_smoke(model, tmp_path):
    out = tmp_path / "models.json"
    rc = M.main(["--smoke", "--models", model, "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["shape"] for r in rows] == list(M.SHAPES)
    for r in rows:
        assert "error" not in r, r
        assert r["logits_rel"] <= M.SMOKE_TOL["logits_rel"], r
        if r["shape"] == "train":
            assert r["grad_rel"] <= M.SMOKE_TOL["grad_rel"] and r["grad_cos"] >= M.SMOKE_TOL["grad_cos"], r
        assert 0 < r["covered_calls"] <= r["kernel_calls"], r
        assert r["covered_routed_calls"] == r["covered_calls"], r  # every covered call launched a tritonjit kernel
    assert rc == 0
