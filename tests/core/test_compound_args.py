"""Tuple and host TensorDescriptor arguments: the same variants as Triton's own binder.

Triton's reference is its launcher's binder and ``JITFunction._pack_args`` (see
_triton_reference.py); tritonjit's side is ``f.signature(...)`` and the ASTSource the
compile bridge builds. Random nested tuples (scalars, tensors, None, namedtuples,
descriptors) must give the same signature tokens, and the same ASTSource signature,
constants and attributes, so the same artifact hash; a few kernels are cross-compiled
both ways for cuda:90 and sm_80. Kernels taking tuples and descriptors also run on
Triton's interpreter (CPU) against torch.
"""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")

import _spec_kernels as K  # noqa: E402
import _triton_reference as ref  # noqa: E402
import tritonjit  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402
from tritonjit._compiler import build_source  # noqa: E402
from tritonjit._flatten import flattener, leaf_types, runtime_plan  # noqa: E402
from tritonjit._signature import _split, render  # noqa: E402

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BACKEND = ref.make_backend()

pytestmark = pytest.mark.usefixtures("interpreter_backend")

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int32, torch.int64, torch.uint8,
          torch.bool, torch.float8_e5m2]
DESC_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int32]


@functools.cache
def _base(dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(4096, dtype=dtype)


# ---- argument strategies -----------------------------------------------------------------
tensors = st.builds(lambda d, off: _base(d)[off:off + 8], st.sampled_from(DTYPES), st.sampled_from([0, 1, 3, 4, 16]))
ints = st.one_of(st.sampled_from([0, 1, -1, 16, 17, 2**31 - 1, 2**31, 2**32, 2**63, 2**64 - 16, -(2**63), 2**64]),
                 st.integers(-(2**63), 2**64 - 1))
scalars = st.one_of(ints, st.floats(), st.booleans(), st.none())


@st.composite
def descriptors(draw: st.DrawFn) -> TensorDescriptor:
    dtype = draw(st.sampled_from(DESC_DTYPES))
    block = draw(st.lists(st.sampled_from([1, 2, 8, 16, 32, 64]), min_size=1, max_size=3))
    elems = 16 // _base(dtype).element_size()
    shape = [b * draw(st.integers(1, 3)) for b in block]
    shape[-1] = -(-shape[-1] // elems) * elems  # rows 16-byte aligned, as descriptors need
    t = torch.empty(shape, dtype=dtype)
    padding = draw(st.sampled_from(["zero", "nan"])) if dtype.is_floating_point else "zero"
    return TensorDescriptor.from_tensor(t, block, padding)


leaves_ = st.one_of(tensors, scalars, descriptors())
nested = st.recursive(
    leaves_,
    lambda children: st.one_of(st.lists(children, max_size=4).map(tuple),
                               st.tuples(children, children).map(lambda xy: K.Pair(*xy))),
    max_leaves=10,
)
tuples = st.one_of(st.lists(nested, max_size=4).map(tuple), st.tuples(nested, nested).map(lambda xy: K.Pair(*xy)))


# ---- the comparison ------------------------------------------------------------------------
def check(jit_fn, args: tuple, kwargs: dict | None = None) -> str | None:
    """tritonjit's signature and ASTSource against Triton's binder and _pack_args."""
    kwargs = kwargs or {}
    f = tritonjit.function(jit_fn)
    try:
        _, spec, _ = ref.specialize(jit_fn, BACKEND, args, kwargs)
    except ref.Unsupported as why:
        with pytest.raises(tritonjit.ArgumentError) as err:
            f.signature(*args, **kwargs)
        assert jit_fn.fn.__name__ in str(err.value), why
        return None
    sig = f.signature(*args, **kwargs)
    got = _split(sig)
    expected = ref.tokens(jit_fn, spec)
    for kp, token, (kind, value) in zip(jit_fn.params, got, expected, strict=True):
        if kind == "type" and "(" not in token:  # a namedtuple renders with its fields
            assert token == value, f"parameter {kp.name}: tritonjit {token!r}, Triton {value!r} (signature {sig})"
    # the ASTSource: Triton's signature types, constants and attributes (with their order)
    key = f._state.binder(*args, **kwargs)[0]
    src = build_source(jit_fn, f.params, f._slots_from_key(key[: len(f.params)]))
    signature, constexprs, attrs = ref.pack_like_triton(jit_fn, args, kwargs)
    assert src.signature == signature, sig
    assert src.constants == constexprs, sig
    assert str(src.attrs) == str(attrs), sig
    # the string alone gives the same ASTSource (namedtuples by class name and fields)
    parsed = build_source(jit_fn, f.params, f.parse_signature(sig))
    assert str(parsed.signature) == str(signature) and parsed.constants == constexprs, sig
    assert str(parsed.attrs) == str(attrs) and parsed.hash() == src.hash(), sig
    assert render(f.parse_signature(sig)) == sig
    return sig


# ---- properties ------------------------------------------------------------------------------
@SETTINGS
@given(st.one_of(tensors, scalars), tuples, st.one_of(tensors, scalars, tuples))
def test_random_tuples_specialize_as_triton(a, t, b):
    check(K.with_tuple, (a, t, b))


@SETTINGS
@given(tuples, st.one_of(tuples, tensors, scalars))
def test_tuple_elements_ignore_the_parameters_flags(t, u):
    # do_not_specialize(_on_alignment) of the parameter: Triton still specializes every element
    check(K.tuple_no_spec, (t, u))


plain_nested = st.recursive(leaves_, lambda children: st.lists(children, max_size=3).map(tuple), max_leaves=6)


@SETTINGS
@given(st.lists(plain_nested, max_size=3).map(tuple), st.lists(plain_nested, max_size=3).map(tuple))
def test_two_calls_share_a_variant_exactly_when_tritons_keys_agree(t1, t2):
    # Triton's launcher caches by its specialization list: the same partition of calls into
    # variants. (Namedtuples are left out: Triton's key compares them as plain tuples, so
    # Pair(a, b) and (a, b) share its cache entry although they compile differently;
    # tritonjit keys the class too.)
    x = _base(torch.float32)
    f = tritonjit.function(K.with_tuple)
    try:
        s1 = ref.specialize(K.with_tuple, BACKEND, (x, t1, x), {})[1]
        s2 = ref.specialize(K.with_tuple, BACKEND, (x, t2, x), {})[1]
    except ref.Unsupported:
        return
    k1 = f._bind(f._make_state(), (x, t1, x), {})[0]
    k2 = f._bind(f._make_state(), (x, t2, x), {})[0]
    assert (k1 == k2) == (s1 == s2), (t1, t2)


@SETTINGS
@given(descriptors(), descriptors(), st.one_of(tensors, scalars))
def test_descriptors_specialize_as_triton(d1, d2, b):
    sig = check(K.with_tuple, (d1, d2, b))
    assert sig is None or sig.startswith("tensordesc<")  # None: b is an int out of every range


@pytest.mark.parametrize("t, token", [
    ((), "()"), ((None,), "(nullopt)"), ((1, 2), "(i32:1,i32)"), (((),), "(())"),
    ((True, 2.5, 2**40), "(u1,fp32,i64:16)"), (K.Pair(1, None), "Pair(x=i32:1,scale=nullopt)"),
])
def test_tuple_tokens(t, token):
    x = _base(torch.float32)
    assert check(K.with_tuple, (x, t, x)) == f"*fp32:16,{token},*fp32:16,4"


def test_descriptor_token_is_tritons_type():
    d = TensorDescriptor.from_tensor(torch.empty(64, 128, dtype=torch.float16), [32, 64], "nan")
    assert check(K.with_tuple, (d, (d, 3), 1)) == ("tensordesc<fp16[32, 64]>,(tensordesc<fp16[32, 64]>,i32),"
                                                   "i32:1,4")


def test_unsupported_elements_name_kernel_parameter_and_element():
    f = tritonjit.function(K.with_tuple)
    x = _base(torch.float32)
    with pytest.raises(tritonjit.ArgumentError, match=r"parameter 't' of kernel 'with_tuple': element \[1\]\[0\]: "
                                                      r"expected a tensor, int, float, bool, None, tuple or "
                                                      r"TensorDescriptor, got str"):
        f.signature(x, (1, ("s",)), x)
    with pytest.raises(tritonjit.ArgumentError, match=r"element \[0\]: the int \d+ fits no Triton integer"):
        f.signature(x, (2**70,), x)
    with pytest.raises(tritonjit.ArgumentError, match="parameter 'b'.*got list"):
        f.signature(x, (), [x])


def test_parse_rejects_malformed_tuples_and_descriptors():
    f = tritonjit.function(K.with_tuple)
    for bad in ["*fp32,(i32,),*fp32,4", "*fp32,(i33),*fp32,4", "*fp32,tensordesc<fp99[16]>,*fp32,4",
                "*fp32,tensordesc<fp16[]>,*fp32,4", "*fp32,Pair(i32,x=i32),*fp32,4"]:
        with pytest.raises(tritonjit.SignatureError, match="with_tuple"):
            f.parse_signature(bad)


# ---- the launcher's view: tuples flattened, constants dropped -------------------------------
def test_runtime_plan_flattens_depth_first_without_constants():
    sig = "*fp32:16,(i32:1,(*fp16,nullopt),Pair(x=fp32,scale=i64:16)),tensordesc<fp16[16, 16]>,(nullopt),(16, 32),8"
    plan = runtime_plan(sig)
    assert [p.index for p in plan] == [0, 1, 2, 3]  # "(16, 32)" is a constexpr value, "(nullopt)" a runtime tuple
    assert leaf_types(plan) == ["*fp32", "*fp16", "fp32", "i64", "tensordesc<fp16[16, 16]>"]
    flat = flattener(plan)
    x, h, d = object(), object(), object()
    assert flat([x, (1, (h, None), K.Pair(2.5, 32)), d, (None,)]) == [x, h, 2.5, 32, d]
    assert flattener(runtime_plan("*fp32:16,i32,8")) is None  # nothing to do for plain variants
    # the core says which parameters are runtime ones: an empty runtime tuple is then unambiguous
    assert [p.index for p in runtime_plan("*fp32,(),()", [0, 1])] == [0, 1]


# ---- same arguments -> the same compiled kernel as Triton's launcher ----------------------
_f32 = torch.randn(4096)
_h = torch.randn(128, 128).half()
COMPILE_CASES = {
    "tuple-nested": (K.tuple_axpby, ((_f32, (_f32, _f32)), 1000, (2.0, 3.0)), {"BLOCK": 256}),
    "tuple-int1-unaligned": (K.tuple_axpby, ((_f32[1:], (_f32, _f32[3:])), 4096, (2.0, 1)), {"BLOCK": 128}),
    "namedtuple": (K.named_scale, (K.Pair(_f32, 0.5), _f32, 77), {"BLOCK": 128}),
    "desc": (K.desc_copy, (TensorDescriptor.from_tensor(_h, [64, 64]), TensorDescriptor.from_tensor(_h, [64, 64])),
             {"BM": 64, "BN": 64}),
    "desc-nan-in-tuple": (K.desc_tuple_scale, ((TensorDescriptor.from_tensor(_h, [32, 64], "nan"),
                                                TensorDescriptor.from_tensor(_h, [32, 64])), 2.0),
                          {"BM": 32, "BN": 64}),
}


@pytest.fixture
def triton_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    try:
        from triton import knobs

        monkeypatch.setattr(knobs.cache, "dir", str(tmp_path))
    except (ImportError, AttributeError):
        pass


@pytest.mark.parametrize("arch", [90, 80])
@pytest.mark.parametrize("case", sorted(COMPILE_CASES))
def test_same_artifact_as_triton(case, arch, triton_cache):
    jit_fn, args, kwargs = COMPILE_CASES[case]
    theirs = ref.compile_like_triton(jit_fn, args, kwargs, GPUTarget("cuda", arch, 32), num_warps=4, num_stages=3)
    f = tritonjit.function(jit_fn)
    sig = f.signature(*args, **kwargs)
    ours = f.compile(sig, target=f"cuda:{arch}", num_warps=4, num_stages=3)
    assert ours.hash == theirs.hash, f"{case}: tritonjit built {ours.hash}, Triton {theirs.hash}"
    assert ours.binary == theirs.asm["cubin"]
    assert ours.runtime_params == tuple(i for i, s in enumerate(f.parse_signature(sig)) if not s.is_constant)


def test_descriptors_lower_to_tma_on_sm90_only(triton_cache):
    f = tritonjit.function(K.desc_copy)
    sig = "tensordesc<fp16[64, 64]>,tensordesc<fp16[64, 64]>,64,64"
    meta90 = f.compile(sig, target="cuda:90").metadata.get("tensordesc_meta")
    assert len(meta90) == 2 and meta90[0]["block_size"] == [64, 64] and meta90[0]["elem_size"] == 2
    assert not f.compile(sig, target="cuda:80").metadata.get("tensordesc_meta")


# ---- on Triton's interpreter (CPU) ------------------------------------------------------------
def test_tuple_kernel_runs_on_the_interpreter():
    f = tritonjit.function(K.tuple_axpby)
    x, y = torch.randn(1000), torch.randn(1000)
    out = torch.empty(1000)
    f[(4,)]((x, (y, out)), 1000, (2.0, 1), BLOCK=256)  # coef[1] == 1: a constant of the variant
    torch.testing.assert_close(out, 2.0 * x + y)
    f[(4,)]((x, (y, out)), 1000, (0.5, -3.0), BLOCK=256)
    torch.testing.assert_close(out, 0.5 * x - 3.0 * y)
    assert sorted(v.signature for v in f.variants()) == [
        "(*fp32:16,(*fp32:16,*fp32:16)),i32,(fp32,fp32),256", "(*fp32:16,(*fp32:16,*fp32:16)),i32,(fp32,i32:1),256"]


def test_namedtuple_kernel_runs_on_the_interpreter():
    f = tritonjit.function(K.named_scale)
    x, out = torch.randn(300), torch.empty(300)
    f[(3,)](K.Pair(x, 3.0), out, 300, BLOCK=128)
    torch.testing.assert_close(out, 3.0 * x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_descriptor_kernels_run_on_the_interpreter(dtype):
    src = torch.randn(64, 128).to(dtype)
    dst = torch.zeros_like(src)
    f = tritonjit.function(K.desc_copy)
    f[(2, 4)](TensorDescriptor.from_tensor(src, [32, 32]), TensorDescriptor.from_tensor(dst, [32, 32]), BM=32, BN=32)
    torch.testing.assert_close(dst, src)
    g = tritonjit.function(K.desc_tuple_scale)
    descs = (TensorDescriptor.from_tensor(src, [32, 64]), TensorDescriptor.from_tensor(dst, [32, 64]))
    g[(2, 2)](descs, 2.0, BM=32, BN=64)
    torch.testing.assert_close(dst, (src.float() * 2.0).to(dtype))


def test_cpu_tensor_check_looks_inside_tuples_and_descriptors():
    # the interpreter takes CPU tensors; the device rule (one device per launch) still reads nested tensors
    from tritonjit._function import nested_tensors

    x = torch.empty(4)
    d = TensorDescriptor.from_tensor(torch.empty(16, 16), [16, 16])
    found = nested_tensors((x, (1, d), (None, (x,))))
    assert [w for _, w in found] == ["[0]", "[1][1].base", "[2][1][0]"]


def test_tuple_token_is_a_hashable_value():
    """The variant cache hashes the binder's key on every launch: a tuple token is a plain
    tuple underneath (hashed and compared in C), with its fields and a pickle round trip."""
    import pickle

    from tritonjit._signature import TupleToken

    t = TupleToken(("*fp32:16", TupleToken(("i32", "fp32"))), K.Pair)
    assert t.items == ("*fp32:16", TupleToken(("i32", "fp32"))) and t.cls is K.Pair
    assert t == TupleToken(("*fp32:16", TupleToken(("i32", "fp32"))), K.Pair)
    assert hash(t) == hash(TupleToken(("*fp32:16", TupleToken(("i32", "fp32"))), K.Pair))
    assert t != TupleToken(("*fp32:16", TupleToken(("i32", "fp32"))))  # a namedtuple is another variant
    assert t != TupleToken(("*fp32", TupleToken(("i32", "fp32"))), K.Pair)
    back = pickle.loads(pickle.dumps(t))
    assert back == t and back.__class__ is TupleToken and back.items[1].__class__ is TupleToken
    assert repr(TupleToken(("i32",))) == "TupleToken(items=('i32',), cls=None)"
