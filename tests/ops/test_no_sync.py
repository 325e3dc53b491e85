"""No host synchronization on any operator's normal path; bad indices still fail loudly.

On CPU (the interpreter backend) an out-of-range index is checked on the host, which
costs no device sync there; on an accelerator the kernel checks it with a device-side
assertion. Here: the CPU errors, the helper that decides between the two, the device
path run on CPU with every host read forbidden, and the device assert cross-compiled
into the kernels' PTX. The GPU side is tests/ops/test_no_sync_gpu.py.
"""
from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterator

import pytest
import torch
import torch.nn.functional as F
import tritonjit
import tritonjit_ops as T
from _sync_cases import aten_cases, aten_name, close, direct_cases, missing_aten, missing_direct
from _util import index_checks_as_on_a_device
from torch.overrides import TorchFunctionMode
from tritonjit_ops import _common, fused, indexing

# ------------------------------------------------------------ clear errors on CPU


@pytest.mark.parametrize("bad", [5, 7, -1, -6])
def test_embedding_out_of_range(bad):
    w = torch.randn(5, 3)
    with pytest.raises(IndexError, match=rf"^tritonjit\.embedding: index {bad} is out of range for a table of 5 rows$"):
        T.embedding(w, torch.tensor([[0, bad], [4, 1]]))
    with pytest.raises(IndexError, match=rf"tritonjit\.embedding: index {bad} is out of range"):
        T.embedding(w, torch.tensor([bad], dtype=torch.int32))


@pytest.mark.parametrize("bad", [4, 9, -1])
def test_index_select_out_of_range(bad):
    x = torch.randn(4, 6)
    with pytest.raises(IndexError, match=rf"^tritonjit\.index_select: index {bad} is out of range for dimension 0 "
                                         r"of size 4$"):
        T.index_select(x, 0, torch.tensor([0, bad]))
    with pytest.raises(IndexError, match=r"dimension 1 of size 6"):
        T.index_select(x, 1, torch.tensor([bad + 2 if bad > 0 else bad]))


@pytest.mark.parametrize("bad", [6, -1])
def test_gather_out_of_range(bad):
    x = torch.randn(4, 6)
    idx = torch.zeros(3, 2, dtype=torch.int64)
    idx[2, 1] = bad
    with pytest.raises(IndexError, match=rf"^tritonjit\.gather: index {bad} is out of range for dimension 1 "
                                         r"of size 6$"):
        T.gather(x, 1, idx)
    with pytest.raises(IndexError, match=r"dimension 0 of size 4"):
        T.gather(x, 0, idx * 2 if bad > 0 else idx)


@pytest.mark.parametrize("bad", [11, 12, -1, -101])
def test_cross_entropy_target_out_of_range(bad):
    lg = torch.randn(4, 11)
    tg = torch.tensor([0, -100, bad, 10])
    with pytest.raises(IndexError, match=rf"^tritonjit\.cross_entropy: target {bad} is out of bounds for 11 classes "
                                         r"\(ignore_index=-100\)$"):
        T.cross_entropy(lg, tg)
    with pytest.raises(IndexError, match=rf"target {bad} is out of bounds"):
        T.cross_entropy(lg, tg, reduction="none")


@pytest.mark.parametrize("ignore_index", [-100, -1, 11, 3])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_ignore_index_rows_are_allowed(ignore_index, reduction):
    lg = torch.randn(5, 11)
    tg = torch.tensor([0, ignore_index, 10, ignore_index, 3])
    ref = F.cross_entropy(lg, tg, ignore_index=ignore_index, reduction=reduction)
    close(T.cross_entropy(lg, tg, ignore_index=ignore_index, reduction=reduction), ref, torch.float32)


def test_in_range_edges_unchanged():
    w = torch.randn(5, 3)
    ids = torch.tensor([[0, 4], [4, 0]])
    assert torch.equal(T.embedding(w, ids), F.embedding(ids, w))
    x = torch.randn(4, 6)
    assert torch.equal(T.index_select(x, 1, torch.tensor([5, 0])), x[:, [5, 0]])
    idx = torch.tensor([[5, 0], [0, 5]])
    assert torch.equal(T.gather(x[:2], 1, idx), torch.gather(x[:2], 1, idx))
    empty = torch.tensor([], dtype=torch.int64)
    assert T.embedding(w, empty).shape == (0, 3)


def test_aten_routes_raise_eagers_errors():
    """Under enable() (on the C++ operator path) a bad index raises what eager raises: the call
    goes on to aten's own kernel when tritonjit's implementation refuses it."""
    from tritonjit_ops import _native_ops

    if _native_ops.module(wait=True) is None:
        pytest.skip(f"C++ operator path: {_native_ops.native().reason}")
    w, x = torch.randn(5, 3), torch.randn(4, 6)
    calls = [lambda: F.embedding(torch.tensor([5]), w), lambda: torch.index_select(x, 0, torch.tensor([-1])),
             lambda: torch.gather(x, 1, torch.tensor([[6]]))]
    for call in calls:
        with pytest.raises(Exception) as eager:
            call()
        with T.enable(include="all", wait_native=True), pytest.raises(type(eager.value)) as enabled:
            call()
        assert str(enabled.value) == str(eager.value)


# ------------------------------------------------------------ the host-or-device decision


def test_host_check_allowed_only_for_cpu_tensors():
    assert _common.host_check_allowed(torch.zeros(2, dtype=torch.int64))
    assert not _common.host_check_allowed(torch.zeros(2, dtype=torch.int64, device="meta"))
    # the kernels' CHECK flag follows it: False on CPU (checked here), True elsewhere
    assert indexing._check_index("embedding", torch.tensor([1, 2]), 5) is False
    assert indexing._check_index("embedding", torch.tensor([1, 99], device="meta"), 5) is True
    assert _common.assert_options(False) == {}
    assert _common.assert_options(True) == {"debug": True, "sanitize_overflow": False}


class _HostRead(AssertionError):
    pass


_FORBIDDEN = ("item", "tolist", "cpu", "numpy", "nonzero", "__int__", "__float__", "__bool__", "__index__")


class _NoMaskIndexing(TorchFunctionMode):
    """Boolean-mask indexing from operator code raises. A mode, not a patched
    ``Tensor.__getitem__``: setting that on the class and deleting it again leaves CPython's
    sequence slot filled, and from then on ``torch.tensor([t0, t1])`` of 0-d tensors reads
    ``len() of a 0-d tensor`` for every later test of the process."""

    def __init__(self, from_ops: Callable[[int], bool]) -> None:
        super().__init__()
        self.from_ops = from_ops

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.__getitem__ and self.from_ops():
            keys = args[1] if isinstance(args[1], tuple) else (args[1],)
            if any(isinstance(k, torch.Tensor) and k.dtype in (torch.bool, torch.uint8) for k in keys):
                raise _HostRead("tritonjit_ops indexed with a boolean mask, a device sync on an accelerator")
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _forbid_host_reads(m: pytest.MonkeyPatch) -> Iterator[None]:
    """Make every host read of a tensor's values from operator code (tritonjit_ops.*) raise,
    inside this context (the patches are ``m``'s: undone when it is)."""

    def from_ops(depth: int = 2) -> bool:  # the frame ``depth`` up from this one is operator code
        mod = sys._getframe(depth).f_globals.get("__name__", "")
        return mod.split(".")[0] == "tritonjit_ops"

    for name in _FORBIDDEN:
        orig = getattr(torch.Tensor, name)

        def guard(self, *a, _orig=orig, _name=name, **k):
            if from_ops():
                raise _HostRead(f"tritonjit_ops called Tensor.{_name}, a device sync on an accelerator")
            return _orig(self, *a, **k)

        m.setattr(torch.Tensor, name, guard)
    for fn in ("nonzero", "masked_select", "unique"):
        orig = getattr(torch, fn)

        def guard_fn(*a, _orig=orig, _name=fn, **k):
            if from_ops():
                raise _HostRead(f"tritonjit_ops called torch.{_name}, a device sync on an accelerator")
            return _orig(*a, **k)

        m.setattr(torch, fn, guard_fn)
    with _NoMaskIndexing(from_ops):
        yield


def _index_with_a_mask() -> torch.Tensor:
    """Boolean-mask indexing as operator code would write it (a function whose module is
    named as one of tritonjit_ops')."""
    ns = {"__name__": "tritonjit_ops._probe", "torch": torch}
    exec("def masked():\n    x = torch.arange(4.0)\n    return x[x > 1]\n", ns)
    return ns["masked"]()


def test_the_guard_leaves_torch_as_it_found_it(monkeypatch):
    """After the guard, 0-d tensors are still no sequences: ``torch.tensor`` of a list of
    them works (Qwen2-VL's rotary positions build one; a patched and restored
    ``Tensor.__getitem__`` broke it for the rest of the process)."""
    with monkeypatch.context() as m, _forbid_host_reads(m):
        pass
    assert torch.tensor([torch.tensor(1), torch.tensor(2)]).tolist() == [1, 2]
    assert _index_with_a_mask().tolist() == [2.0, 3.0]  # outside the guard: allowed


def test_the_guard_catches_the_old_host_checks(monkeypatch):
    """The guard below is not vacuous: the host checks that CPU tensors get trip it."""
    with monkeypatch.context() as m, _forbid_host_reads(m):
        with pytest.raises(_HostRead):
            T.embedding(torch.randn(5, 3), torch.tensor([1]))
        with pytest.raises(_HostRead):
            T.cross_entropy(torch.randn(2, 3), torch.tensor([0, 1]))
        with pytest.raises(_HostRead, match="boolean mask"):
            _index_with_a_mask()


@pytest.mark.parametrize("path", ["direct", "enable"])
def test_device_path_reads_no_values_on_the_host(monkeypatch, path):
    """Every operator, with the host check turned off as on an accelerator (the kernels
    get CHECK=True and the device-assert options), never reads a tensor's values on the
    host: no .item(), int(t), .tolist(), .cpu(), nonzero or boolean mask."""
    cases = direct_cases("cpu", torch.float32) if path == "direct" else aten_cases("cpu", torch.float32)
    refs = [c.ref() if c.ref is not None else c.call() for c in cases]
    got = []
    with monkeypatch.context() as m:
        m.setattr(indexing, "host_check_allowed", lambda t: False)
        m.setattr(fused, "host_check_allowed", lambda t: False)
        with _forbid_host_reads(m), T.enable(include="all") if path == "enable" else _null():
            for c in cases:
                got.append(c.call())
    for c, g, r in zip(cases, got, refs):
        if c.name != "rotary_embedding":
            close(g, r, torch.float32, c.name)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_device_path_checks_indices_in_the_kernel(monkeypatch):
    """With the host check off, the launches are the CHECK=True variants with debug on."""
    seen = []
    for mod, name in ((indexing, "_select_rows"), (indexing, "_gather"), (fused, "_ce_rows")):
        inner = getattr(mod, name)

        class Spy:
            def __getitem__(self, grid, _inner=inner, _name=name):
                launch = _inner[grid]

                def run(*a, **k):
                    seen.append((_name, k.get("CHECK"), k.get("debug"), k.get("sanitize_overflow")))
                    return launch(*a, **k)

                return run

        monkeypatch.setattr(mod, name, Spy())
    table, x = torch.randn(5, 3), torch.randn(4, 6)
    # the Python implementations (the direct entries may run C++ plans, which this spy cannot see)
    indexing.embedding(table, torch.tensor([1]))
    fused.cross_entropy(x, torch.tensor([1, 2, 3, 0]))
    assert seen == [("_select_rows", False, None, None), ("_ce_rows", False, None, None)]
    seen.clear()
    monkeypatch.setattr(indexing, "host_check_allowed", lambda t: False)
    monkeypatch.setattr(fused, "host_check_allowed", lambda t: False)
    indexing.embedding(table, torch.tensor([1]))
    indexing.index_select(x, 1, torch.tensor([0]))
    indexing.gather(x, 1, torch.tensor([[0]]))
    fused.cross_entropy(x, torch.tensor([1, 2, 3, 0]))
    assert seen == [(n, True, True, False) for n in ("_select_rows", "_select_rows", "_gather", "_ce_rows")]


@pytest.fixture
def device_path_with_interpreter_asserts(monkeypatch):
    """The device path on CPU, with Triton's interpreter honouring tl.device_assert (as
    a GPU kernel compiled with debug=True does): the kernels' own checks run."""
    yield from index_checks_as_on_a_device(monkeypatch, kernel_asserts=True)


def test_kernel_asserts_reject_out_of_range_indices(device_path_with_interpreter_asserts):
    w, x = torch.randn(5, 3), torch.randn(4, 6)
    sel = "tritonjit index_select/embedding: index out of range"
    for bad in (5, -1, 2**40):
        with pytest.raises(Exception, match=sel):
            T.embedding(w, torch.tensor([[0, bad]]))
        with pytest.raises(Exception, match=sel):
            T.index_select(x, 1, torch.tensor([bad + 1 if bad > 0 else bad]))
        with pytest.raises(Exception, match="tritonjit gather: index out of range"):
            T.gather(x, 1, torch.tensor([[5, bad + 1 if bad > 0 else bad, 0]]))
        with pytest.raises(Exception, match="tritonjit cross_entropy: target out of range"):
            T.cross_entropy(x, torch.tensor([0, -100, bad + 1 if bad > 0 else bad, 1]))
    with pytest.raises(Exception, match="tritonjit cross_entropy: target out of range"):
        T.cross_entropy(x, torch.tensor([0, -100, 3, 1]), ignore_index=-1)


def test_kernel_asserts_pass_in_range_and_ignored_rows(device_path_with_interpreter_asserts):
    w, x = torch.randn(5, 3), torch.randn(4, 6)
    ids = torch.tensor([[0, 4], [4, 0]])
    assert torch.equal(T.embedding(w, ids), F.embedding(ids, w))
    assert torch.equal(T.index_select(x, 1, torch.tensor([5, 0])), x[:, [5, 0]])
    idx = torch.tensor([[5, 0, 3]])  # 3 of gather's 1024 lanes; the masked ones are not checked
    assert torch.equal(T.gather(x, 1, idx), torch.gather(x, 1, idx))
    for ignore in (-100, 6, -1):
        tg = torch.tensor([0, ignore, 5, ignore])
        close(T.cross_entropy(x, tg, ignore_index=ignore), F.cross_entropy(x, tg, ignore_index=ignore), torch.float32)


# ------------------------------------------------------------ the device assert, cross-compiled


def _assert_messages(ptx: str) -> list[str]:
    """The assertion messages of a PTX module (Triton stores them as byte arrays)."""
    out = []
    for body in re.findall(r"assertMessage_\d+\[\d+\]\s*=\s*\{([^}]*)\}", ptx):
        out.append(bytes(int(b) for b in body.split(",")).rstrip(b"\0").decode())
    return out


def _kernel_variants():
    """(kernel, signature with CHECK=True, signature with CHECK=False, the message)."""
    x, out = torch.empty(8, 16), torch.empty(8, 16)
    idx = torch.zeros(8, dtype=torch.int64)
    sel = tritonjit.function(indexing._select_rows_kernel)
    sel_args = (x, idx, out, 8, 8, 16, 8)
    gat = tritonjit.function(indexing._gather_kernel)
    gat_args = (x, idx, out, 128, 1, 8, 16) + (0, 0, 16, 1) * 2 + (8,)
    ce = tritonjit.function(fused._ce_rows_kernel)
    ce_args = (x, idx, out, 16, 16, -100)
    return [
        (sel, sel.signature(*sel_args, ROWS=8, BLOCK=16, CHECK=True),
         sel.signature(*sel_args, ROWS=8, BLOCK=16, CHECK=False),
         "tritonjit index_select/embedding: index out of range"),
        (gat, gat.signature(*gat_args, DIM=3, BLOCK=128, CHECK=True),
         gat.signature(*gat_args, DIM=3, BLOCK=128, CHECK=False), "tritonjit gather: index out of range"),
        (ce, ce.signature(*ce_args, BLOCK_C=16, CHECK=True), ce.signature(*ce_args, BLOCK_C=16, CHECK=False),
         "tritonjit cross_entropy: target out of range"),
    ]


@pytest.mark.parametrize("which", [0, 1, 2], ids=["select_rows", "gather", "ce_rows"])
def test_device_assert_is_in_the_ptx(which):
    f, sig_on, sig_off, msg = _kernel_variants()[which]
    on = f.compile(sig_on, target="cuda:90", num_warps=4, **_common.DEVICE_ASSERT).asm["ptx"]
    # the assert is there, with only our message (no integer-overflow sanitizer asserts), and traps;
    # the check is one unsigned compare per index (a negative index is a huge unsigned one)
    assert "call.uni __assertfail" in on and "trap;" in on
    assert re.search(r"setp\.lt\.u64", on)
    assert _assert_messages(on) == [msg]
    # the normal variant (CHECK off, the launch options of a CPU call) has no assert at all
    off = f.compile(sig_off, target="cuda:90", num_warps=4).asm["ptx"]
    assert "__assertfail" not in off and not _assert_messages(off)
    # CHECK on but debug off: Triton drops the assert (why the launch options are needed)
    dropped = f.compile(sig_on, target="cuda:90", num_warps=4).asm["ptx"]
    assert "__assertfail" not in dropped


def test_debug_alone_would_add_overflow_asserts():
    """Why DEVICE_ASSERT turns sanitize_overflow off: debug=True alone also checks every
    32-bit add/sub/mul of the kernel for overflow."""
    f, sig_on, _, msg = _kernel_variants()[2]  # _ce_rows: its column loop adds 32-bit ints
    ptx = f.compile(sig_on, target="cuda:90", num_warps=4, debug=True).asm["ptx"]
    msgs = _assert_messages(ptx)
    assert msg in msgs and any("overflow" in m for m in msgs), msgs


# ------------------------------------------------------------ the case table of the GPU tests


def test_every_operator_and_aten_route_has_a_no_sync_case():
    assert not missing_direct(), f"add a case to tests/ops/_sync_cases.py direct_cases for {sorted(missing_direct())}"
    assert not missing_aten(), f"add a case to tests/ops/_sync_cases.py aten_cases for {sorted(missing_aten())}"


def test_no_sync_cases_run_and_match_eager_on_cpu():
    for c in direct_cases("cpu", torch.float32):
        got = c.call()
        if c.ref is not None:
            close(got, c.ref(), torch.float32, c.name)
    cases = aten_cases("cpu", torch.float32)
    refs = [c.ref() if c.ref is not None else c.call() for c in cases]
    with T.enable(include="all"):
        routed = set(T.enabled_ops())
        got = [c.call() for c in cases]
    assert {aten_name(c) for c in cases} <= routed
    for c, g, r in zip(cases, got, refs):
        close(g, r, torch.float32, c.name)
