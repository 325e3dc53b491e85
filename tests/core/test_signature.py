"""Signature strings: libtriton_jit's format, rendered from arguments and parsed back."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import _spec_kernels as K  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
import tritonjit  # noqa: E402
from tritonjit._signature import Slot, parse, render  # noqa: E402

pytestmark = pytest.mark.usefixtures("interpreter_backend")


@pytest.fixture
def f():
    return tritonjit.function(K.add)


def test_mission_example(f):
    x, y, out = torch.empty(1000), torch.empty(1000), torch.empty(1000)
    assert f.signature(x, y, out, 1000, BLOCK=1024) == "*fp32:16,*fp32:16,*fp32:16,i32,1024"
    assert f.signature(x, y, out, 1024, BLOCK=1024) == "*fp32:16,*fp32:16,*fp32:16,i32:16,1024"


@pytest.mark.parametrize("n, token", [(1, "i32:1"), (17, "i32"), (-16, "i32:16"), (2**31, "i64:16"),
                                      (2**31 + 1, "i64"), (2**63, "u64:16"), (2**64 - 1, "u64")])
def test_int_tokens(f, n, token):
    x = torch.empty(8)
    assert f.signature(x, x, x, n, BLOCK=8).split(",")[3] == token


def test_misaligned_pointer_and_dtypes(f):
    x = torch.empty(64)
    assert f.signature(x[1:], x[4:], x[2:], 5, BLOCK=8) == "*fp32,*fp32:16,*fp32,i32,8"
    h = torch.empty(64, dtype=torch.float16)
    assert f.signature(h, h[8:], h[1:], 5, BLOCK=8) == "*fp16:16,*fp16:16,*fp16,i32,8"


def test_none_is_nullopt_and_keywords():
    g = tritonjit.function(K.scale_opt)
    x = torch.empty(64)
    sig = g.signature(x, None, x, n=64, alpha=0.5, k=3, BLOCK=64)
    assert sig == "*fp32:16,nullopt,*fp32:16,i32:16,fp32,i64,64,False"
    assert g.signature(x, x, x, 64, 2.0, 3, 64, True) == "*fp32:16,*fp32:16,*fp32:16,i32:16,fp32,i64,64,True"


@pytest.mark.parametrize("sig", [
    "*fp32:16,*fp32:16,*fp32:16,i32,1024",
    "*fp32,*bf16:16,*kfp16,i32:1,16",
    "*fp8e4nv:16,*u1,*i64:16,i64:16,1",
    "*fp32,nullopt,*fp32,u64,128",
])
def test_parse_render_round_trip(f, sig):
    slots = f.parse_signature(sig)
    assert render(slots) == sig
    assert parse(render(slots), f.params, f.name) == slots


@pytest.mark.parametrize("value, text", [(1024, "1024"), (True, "True"), (None, "nullopt"), (0.5, "0.5"),
                                         ("ieee", "'ieee'"), (tl.float16, "tl.fp16"), (-3, "-3")])
def test_constexpr_values_round_trip(value, text):
    g = tritonjit.function(K.with_constexprs)
    x = torch.empty(8)
    sig = g.signature(x, 4, value)
    assert sig.split(",")[2] == text
    slots = g.parse_signature(sig)
    assert slots[2] == Slot(None, value=value) and type(slots[2].value) is type(value)
    assert render(slots) == sig


def test_signature_drives_compile_options_free(f):
    # the string alone reproduces the variant: constants become constants, hints survive
    slots = f.parse_signature("*fp32:16,*fp32,*fp32:16,i32:1,256")
    assert [s.is_constant for s in slots] == [False, False, False, True, True]
    assert slots[0].hint == 16 and slots[1].hint is None and slots[4].value == 256


@pytest.mark.parametrize("bad, words", [
    ("*fp32:16,*fp32:16,i32,1024", ["4 entries", "5 parameters", "x, y, out, n, BLOCK"]),
    ("*fp32:16,*fp32:16,*fp32:16,i32,1024,7", ["6 entries"]),
    ("*fp32:16,*fp32:16,*fp33:16,i32,1024", ["'out'", "'*fp33:16' is not a type"]),
    ("*fp32:16,*fp32:16,*fp32:8,i32,1024", ["'out'", ":8"]),
    ("*fp32:1,*fp32:16,*fp32,i32,1024", ["'x'", "integers only"]),
    ("*fp32:16,*fp32:16,*fp32,,1024", ["'n'", "empty"]),
    ("*fp32:16,*fp32:16,*fp32,i32,BLOCK", ["'BLOCK'", "needs a value"]),
])
def test_bad_signature_strings(f, bad, words):
    with pytest.raises(tritonjit.SignatureError) as err:
        f.parse_signature(bad)
    msg = str(err.value)
    assert "'add'" in msg and bad in msg
    for w in words:
        assert w in msg, msg


def test_bad_signature_in_compile_leaves_no_trace(f, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    with pytest.raises(tritonjit.SignatureError):
        f.compile("*fp32:16,i32", target="cuda:90")
    assert not any(tmp_path.iterdir())


@triton.jit
def no_params():
    pass


def test_a_kernel_without_parameters_has_the_empty_signature():
    # "" is the signature of no parameters: it parses to no slots (not to one empty entry)
    assert parse("", [], "no_params") == [] and parse("  ", [], "no_params") == [] and render([]) == ""
    f = tritonjit.function(no_params)
    assert f.signature() == "" and f.parse_signature("") == []
    v = f.compile("")  # for the current device (the interpreter)
    assert v.name == "no_params"
    f[(2,)]()
    assert [x.signature for x in f.variants()] == [""]
    with pytest.raises(tritonjit.SignatureError, match="has 1 entries, the kernel has 0 parameters"):
        f.compile("i32")
