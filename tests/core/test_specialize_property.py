"""The engine's specialization equals Triton's own, on random arguments.

Triton's reference is the binder Triton builds for its launcher (see
_triton_reference.py); tritonjit's side is the public ``f.signature(...)``. Both run
on the installed Triton, so the same test checks 3.6 and the newest release
(tox env ``triton-latest``). A few cases are also cross-compiled both ways for
cuda:90 and must give the same artifact hash (the same cache entry Triton uses).
"""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")

import _spec_kernels as K  # noqa: E402
import _triton_reference as ref  # noqa: E402
import triton.language as tl  # noqa: E402
import tritonjit  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from tritonjit._signature import _split, render_value  # noqa: E402

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BACKEND = ref.make_backend()


pytestmark = pytest.mark.usefixtures("interpreter_backend")


# ---- argument strategies -----------------------------------------------------------------
def _all_torch_dtypes() -> list:
    return sorted({v for v in vars(torch).values() if isinstance(v, torch.dtype)}, key=str)


@functools.cache
def _base(dtype: torch.dtype) -> torch.Tensor | None:
    if dtype.is_complex or str(dtype).startswith(("torch.q", "torch.bits")):
        return torch.empty(64, dtype=dtype) if dtype.is_complex else None  # no plain views of quantized
    try:
        t = torch.empty(64, dtype=dtype)
        t[1:]  # noqa: B018 - sub-byte dtypes may refuse views
        return t
    except Exception:  # dtypes torch cannot allocate plainly (sub-byte, ...)
        return None


def _triton_accepts(dtype: torch.dtype) -> bool:
    try:
        ref.specialize(K.plain5, BACKEND, (_base(dtype), 0, 0, 0, 0), {})
        return True
    except ref.Unsupported:
        return False


ALLOCATABLE = [d for d in _all_torch_dtypes() if _base(d) is not None]
SUPPORTED = [d for d in ALLOCATABLE if _triton_accepts(d)]

INT_EDGES = [
    0, 1, -1, 2, 15, 16, 17, 32, -16, 1024,
    2**31 - 16, 2**31 - 1, 2**31, 2**31 + 16, -(2**31), -(2**31) - 1, -(2**31) - 16,
    2**32, 2**40, 2**63 - 16, 2**63 - 1, 2**63, 2**63 + 16, 2**64 - 16, 2**64 - 1,
    -(2**63), -(2**63) + 16,
]
OUT_OF_RANGE = [2**64, 2**64 + 16, -(2**63) - 1, 2**100]


def tensors(dtypes: list | None = None) -> st.SearchStrategy:
    """A tensor view at an element offset: aligned or not depending on offset x itemsize."""
    return st.builds(lambda d, off: _base(d)[off:off + 8], st.sampled_from(dtypes or SUPPORTED),
                     st.sampled_from([0, 1, 2, 3, 4, 5, 8, 16]))


ints_in_range = st.one_of(
    st.sampled_from(INT_EDGES),
    st.integers(-(2**63), 2**64 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**20), 2**20).map(lambda v: v * 16),
)
ints = st.one_of(ints_in_range, st.sampled_from(OUT_OF_RANGE))
floats = st.floats(allow_nan=True, allow_infinity=True)
runtime_args = st.one_of(tensors(), ints, floats, st.booleans(), st.none())
constexpr_values = st.one_of(
    st.sampled_from([1, 16, 0, -1, 1024, 2**40, True, False, None, 1.0, 0.5, "ieee", tl.float32, tl.int8]),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
)


# ---- the comparison ------------------------------------------------------------------------
def check(jit_fn, args: tuple, kwargs: dict) -> str | None:
    f = tritonjit.function(jit_fn)
    try:
        _, spec, _ = ref.specialize(jit_fn, BACKEND, args, kwargs)
    except ref.Unsupported as why:
        with pytest.raises(tritonjit.ArgumentError) as err:
            f.signature(*args, **kwargs)
        assert jit_fn.fn.__name__ in str(err.value), why
        return None
    expected = ref.tokens(jit_fn, spec)
    sig = f.signature(*args, **kwargs)
    got = _split(sig)
    assert len(got) == len(expected), (sig, expected)
    slots = f.parse_signature(sig)
    for kp, token, (kind, value), slot in zip(jit_fn.params, got, expected, slots, strict=False):
        if kind == "type":
            assert token == value, f"parameter {kp.name}: tritonjit {token!r}, Triton {value!r} (signature {sig})"
        else:
            assert token == render_value(value), f"constexpr {kp.name}: {token!r} vs Triton's {value!r}"
            assert slot.value == value and type(slot.value) is type(value), (kp.name, slot.value, value)
    return sig


def _call(draw_split, params, values):
    """First k arguments positionally, the rest by keyword."""
    k = draw_split
    return tuple(values[:k]), {p: v for p, v in zip(params[k:], values[k:], strict=False)}


# ---- properties ------------------------------------------------------------------------------
def test_reference_supports_many_dtypes():
    names = {str(d) for d in SUPPORTED}
    assert {"torch.float32", "torch.bfloat16", "torch.bool", "torch.uint64", "torch.float8_e5m2"} <= names
    assert "torch.complex64" not in names


@pytest.mark.parametrize("dtype", ALLOCATABLE, ids=str)
@pytest.mark.parametrize("offset", [0, 1, 3, 4])
def test_every_dtype_aligned_and_misaligned(dtype, offset):
    x = _base(dtype)[offset:]
    check(K.plain5, (x, x, None, 1, 2), {})


@SETTINGS
@given(st.lists(runtime_args, min_size=5, max_size=5), st.integers(0, 5))
def test_plain_params(values, k):
    args, kwargs = _call(k, ["a", "b", "c", "d", "e"], values)
    check(K.plain5, args, kwargs)


@SETTINGS
@given(tensors(), ints, constexpr_values,
       st.one_of(st.just("default"), constexpr_values), st.one_of(st.just("default"), constexpr_values),
       st.one_of(st.just("default"), runtime_args), st.booleans())
def test_constexprs_defaults_and_keywords(x, n, block, flag, mode, z, by_keyword):
    kwargs = {"BLOCK": block}
    for name, v in (("FLAG", flag), ("MODE", mode), ("z", z)):
        if not (isinstance(v, str) and v == "default"):
            kwargs[name] = v
    if by_keyword:
        check(K.with_constexprs, (), dict(kwargs, x=x, n=n))
    else:
        check(K.with_constexprs, (x, n), kwargs)


@SETTINGS
@given(st.lists(runtime_args, min_size=5, max_size=5), st.integers(0, 5))
def test_do_not_specialize_by_index_and_name(values, k):
    args, kwargs = _call(k, ["p", "q", "n", "m", "r"], values)
    check(K.no_spec, args, kwargs)


@SETTINGS
@given(tensors(), ints, ints_in_range.filter(lambda v: 0 <= v < 2**32),
       st.one_of(floats, st.integers(-100, 100)), floats, st.integers(-128, 127),
       tensors([torch.float16]), st.one_of(st.just("default"), constexpr_values))
def test_annotated_params(x, n, u, f, h, i8, p, b):
    kwargs = {} if isinstance(b, str) and b == "default" else {"B": b}
    check(K.annotated, (x, n, u, f, h, i8, p), kwargs)


def test_mission_example():
    x = torch.empty(1000)
    sig = check(K.add, (x, x, x, 1000), {"BLOCK": 1024})
    assert sig == "*fp32:16,*fp32:16,*fp32:16,i32,1024"
    assert check(K.add, (x, x, x, 1024), {"BLOCK": 1024}) == "*fp32:16,*fp32:16,*fp32:16,i32:16,1024"


# ---- same arguments -> the same compiled kernel as Triton's launcher ----------------------
_f32 = torch.empty(4096)
COMPILE_CASES = {
    "add-aligned": (K.add, (_f32, _f32, _f32, 1000), {"BLOCK": 1024}),
    "add-n16-misaligned": (K.add, (_f32[1:], _f32, _f32[3:], 4096), {"BLOCK": 256}),
    "add-n1": (K.add, (_f32, _f32, _f32, 1), {"BLOCK": 128}),
    "scale-none-bias": (K.scale_opt, (_f32, None, _f32, 77, 0.5, 5), {"BLOCK": 128}),
    "scale-bias-i64": (K.scale_opt, (_f32, _f32[2:], _f32, 2**33, 2.0, 48), {"BLOCK": 128, "HAS_BIAS": True}),
}


@pytest.mark.parametrize("case", sorted(COMPILE_CASES))
def test_same_artifact_as_triton(case, tmp_path, monkeypatch):
    from triton.backends.compiler import GPUTarget

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    try:
        from triton import knobs

        monkeypatch.setattr(knobs.cache, "dir", str(tmp_path))
    except (ImportError, AttributeError):
        pass
    jit_fn, args, kwargs = COMPILE_CASES[case]
    theirs = ref.compile_like_triton(jit_fn, args, kwargs, GPUTarget("cuda", 90, 32), num_warps=4, num_stages=3)
    f = tritonjit.function(jit_fn)
    ours = f.compile(f.signature(*args, **kwargs), target="cuda:90", num_warps=4, num_stages=3)
    assert ours.hash == theirs.hash, f"{case}: tritonjit built {ours.hash}, Triton {theirs.hash}"
    assert ours.binary == theirs.asm["cubin"]
