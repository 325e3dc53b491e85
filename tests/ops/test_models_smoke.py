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
        assert r["policy_calls"] == 0 and r["policy"] == {}, r  # the measured policies measure on a device only
    assert rc == 0


def test_table_counts_and_marks_the_calls_aten_measured_faster_on():
    row = dict(model="llama", shape="train", batch=4, tokens=256, calls=600, kernel_calls=497, covered_calls=479,
               routed_calls=436, covered_routed_calls=419, policy_calls=41, logits_max_abs=0.0, logits_rel=0.0,
               not_routed={"aten::mm": 21, "aten::bmm": 24, "aten::flip": 17, "aten::add.Tensor": 1},
               policy={"aten::mm": 21, "aten::bmm": 20})
    text = M.table([row])
    assert "| 419/479, 436/497 (88%) | 460/479 (96%) |" in text
    assert ("llama/train: calls without a tritonjit kernel: aten::mm 21 (aten measured faster), "
            "aten::bmm 24 (20 aten measured faster), aten::flip 17, aten::add.Tensor 1") in text
