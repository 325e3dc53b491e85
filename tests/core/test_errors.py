"""Bad input: each error names the kernel and the parameter, and leaves caches intact."""

from __future__ import annotations

import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import _spec_kernels as K  # noqa: E402
import tritonjit  # noqa: E402
from _fake_plugins import PLUGIN, ep  # noqa: E402
from tritonjit._registry import Registry  # noqa: E402
from tritonjit._variant import module_cache  # noqa: E402

pytestmark = pytest.mark.usefixtures("interpreter_backend")


@pytest.fixture
def warm():
    """The add kernel with one variant compiled and a good call that must keep working."""
    f = tritonjit.function(K.add)
    x, y = torch.arange(100.0), torch.ones(100)

    def good_call() -> None:
        out = torch.zeros(100)
        f[(1,)](x, y, out, 100, BLOCK=128)
        torch.testing.assert_close(out, x + y)

    good_call()
    return f, good_call, (x, y)


def _caches_intact(f, good_call, before: int, modules_before: int) -> None:
    assert len(f.variants()) == before, "a failed call added a variant"
    assert len(module_cache) == modules_before
    good_call()
    assert len(f.variants()) == before


CALLS = {
    "too few arguments": (lambda f, x, y: f[(1,)](x, y, x, BLOCK=128), "n", "missing"),
    "too many arguments": (lambda f, x, y: f[(1,)](x, y, x, 100, 128, 7), None, "positional"),
    "unknown keyword": (lambda f, x, y: f[(1,)](x, y, x, 100, BLOCK=128, BLOK=64), None, "'BLOK'"),
    "tensor for a constexpr": (lambda f, x, y: f[(1,)](x, y, x, 100, BLOCK=y), "BLOCK", "compile-time constant"),
    "list for a constexpr": (lambda f, x, y: f[(1,)](x, y, x, 100, BLOCK=[128]), "BLOCK", "hashable"),
    "complex64 tensor": (lambda f, x, y: f[(1,)](x.to(torch.complex64), y, x, 100, BLOCK=128), "x", "complex64"),
    "int fits no type": (lambda f, x, y: f[(1,)](x, y, x, 2**64, BLOCK=128), "n", "fits no Triton integer type"),
    "negative int too small": (lambda f, x, y: f[(1,)](x, y, x, -(2**63) - 1, BLOCK=128), "n", "fits no"),
    "a string argument": (lambda f, x, y: f[(1,)](x, "y", x, 100, BLOCK=128), "y", "got str"),
    "bad num_warps": (lambda f, x, y: f[(1,)](x, y, x, 100, BLOCK=64, num_warps=0), None, "num_warps"),
}


@pytest.mark.parametrize("case", sorted(CALLS))
def test_bad_arguments(warm, case):
    f, good_call, (x, y) = warm
    call, param, words = CALLS[case]
    before, modules = len(f.variants()), len(module_cache)
    with pytest.raises(tritonjit.ArgumentError) as err:
        call(f, x, y)
    msg = str(err.value)
    assert "'add'" in msg and words in msg, msg
    assert isinstance(err.value, TypeError)  # what Python callers expect of a bad call
    if param is not None:
        assert err.value.param == param and f"'{param}'" in msg, msg
    _caches_intact(f, good_call, before, modules)


def test_signature_reports_the_same_errors(warm):
    f, _, (x, y) = warm
    with pytest.raises(tritonjit.ArgumentError, match="parameter 'n' of kernel 'add'.*fits no"):
        f.signature(x, y, x, 2**64, BLOCK=128)


@pytest.mark.parametrize("grid", [(0,), (4, 0), (1, 1, -2), (-1,), (1, 1, 1, 1), (), (None,), (2.0,), (True,),
                                  ("4",), [1, None]], ids=repr)
def test_bad_grids(warm, grid):
    """The Python path (the interpreter has no C dispatcher): GridError naming the kernel
    and what a grid must be, never a raw IndexError/TypeError or a launch. Oversized
    grids are tested with a recording backend (tests/core/test_native_dispatcher_cpu.py),
    where a wrongly accepted one costs nothing to launch; here it would run for hours."""
    f, good_call, (x, y) = warm
    before, modules = len(f.variants()), len(module_cache)
    expected = "must be >= 1|expected"
    with pytest.raises(tritonjit.GridError, match=f"kernel 'add': grid .*({expected})"):
        f[grid](x, y, torch.zeros(100), 100, BLOCK=128)
    with pytest.raises(tritonjit.GridError, match=f"kernel 'add': grid .*({expected})"):
        f[lambda meta: grid](x, y, torch.zeros(100), 100, BLOCK=128)
    with pytest.raises(tritonjit.GridError, match="kernel 'add'"):
        f.bind(grid, x, y, torch.zeros(100), 100, BLOCK=128)
    _caches_intact(f, good_call, before, modules)


@pytest.mark.parametrize("grid", [(2,), 2, [2], (2, 1), (2, 1, 1), lambda meta: (2,), lambda meta: 2])
def test_good_grid_forms(warm, grid):
    f, _, (x, y) = warm
    out = torch.zeros(200)
    f[grid](torch.arange(200.0), torch.ones(200), out, 200, BLOCK=128)
    torch.testing.assert_close(out, torch.arange(200.0) + 1)


# ---- kernels that do not compile, and kernels that are not there -----------------------
BROKEN = textwrap.dedent('''\
    import triton
    import triton.language as tl


    @triton.jit
    def broken(x, BLOCK: tl.constexpr):
        offs = tl.arange(0, 3)  # not a power of two: Triton refuses
        tl.store(x + offs, 1.0)
''')


def test_kernel_that_fails_to_compile(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "broken_kernels.py"
    src.write_text(BROKEN)
    f = tritonjit.function(str(src), "broken")
    with pytest.raises(tritonjit.CompilationError) as err:
        f.compile("*fp32:16,16", target="cuda:90")
    msg = str(err.value)
    assert "'broken'" in msg and "cuda" in msg and "*fp32:16,16" in msg
    assert "power of 2" in msg or "power of two" in msg, msg  # Triton's own message
    assert f"{src}:" in msg, msg  # the kernel's file and line
    assert f"error at {src}:7," in msg, msg  # the failing line itself
    assert f.variants() == []


def test_missing_file_and_missing_kernel(tmp_path):
    with pytest.raises(tritonjit.KernelNotFoundError, match="does not exist.*'add'"):
        tritonjit.function(str(tmp_path / "nope.py"), "add")
    with pytest.raises(tritonjit.KernelNotFoundError) as err:
        tritonjit.function(K.__file__, "not_a_kernel")
    assert "'not_a_kernel'" in str(err.value) and "add" in str(err.value)  # lists what is there
    assert isinstance(err.value, LookupError)


def test_kernel_file_raising_at_import(tmp_path):
    bad = tmp_path / "raises.py"
    bad.write_text("raise RuntimeError('boom at import')\n")
    with pytest.raises(RuntimeError, match="boom at import"):
        tritonjit.function(str(bad), "k")
    assert not any("raises" in m for m in sys.modules if m.startswith("tritonjit_kernels_"))


# ---- backends and plugins ---------------------------------------------------------------------
def test_unknown_backend_lists_the_known_ones():
    with pytest.raises(tritonjit.BackendError) as err:
        tritonjit.set_backend("no-such-backend")
    msg = str(err.value)
    assert "'no-such-backend'" in msg and "interpreter" in msg
    assert tritonjit.current_backend().name == "interpreter"  # selection unchanged


def test_unknown_backend_from_environment(monkeypatch):
    reg = Registry()
    monkeypatch.setenv("TRITONJIT_BACKEND", "no-such-backend")
    only = [ep("interpreter", "tritonjit.interpreter:plugin")]
    monkeypatch.setattr("tritonjit._registry._entry_points", lambda: only)
    with pytest.raises(tritonjit.BackendError, match="unknown backend 'no-such-backend'.*interpreter"):
        reg.current()


def test_plugin_whose_import_fails(plugin_modules, monkeypatch):
    monkeypatch.delenv("TRITONJIT_BACKEND", raising=False)  # the default choice (a GPU host's CPU run sets it)
    plugin_modules("tj_fake_good", PLUGIN.format(name="good"))
    plugin_modules("tj_fake_broken", "import tj_this_module_does_not_exist\n")
    monkeypatch.setattr("tritonjit._registry._entry_points", lambda: [
        ep("broken", "tj_fake_broken:plugin"), ep("good", "tj_fake_good:plugin"),
        ep("interpreter", "tritonjit.interpreter:plugin")])
    reg = Registry()
    names = [b.name for b in reg.backends()]
    assert names == ["good", "interpreter"]  # the others still work
    assert [b.name for b in reg.broken] == ["broken"]
    assert "tj_fake_broken:plugin" in reg.broken[0].reason and "tj_this_module_does_not_exist" in reg.broken[0].reason
    assert reg.current().name == "good"
    with pytest.raises(tritonjit.BackendError, match="plugin 'broken' is broken.*tj_this_module_does_not_exist"):
        reg.get("broken")


def test_two_plugins_with_one_name(plugin_modules, monkeypatch):
    plugin_modules("tj_fake_one", PLUGIN.format(name="twin"))
    plugin_modules("tj_fake_two", PLUGIN.format(name="twin"))
    monkeypatch.setattr("tritonjit._registry._entry_points", lambda: [
        ep("twin", "tj_fake_one:plugin"), ep("twin-again", "tj_fake_two:plugin"),
        ep("interpreter", "tritonjit.interpreter:plugin")])
    reg = Registry()
    assert sorted(b.name for b in reg.backends()) == ["interpreter", "twin"]
    assert len(reg.broken) == 1
    reason = reg.broken[0].reason
    assert "two plugins are named 'twin'" in reason and "uninstall one" in reason
    assert reg.get("twin").plugin is sys.modules["tj_fake_one"].plugin  # the first one stays


def test_plugin_missing_required_hooks(plugin_modules, monkeypatch):
    plugin_modules("tj_fake_half", textwrap.dedent('''\
        from tritonjit import BackendInfo, hookimpl


        class Half:
            @hookimpl
            def backend_info(self):
                return BackendInfo(name="half")


        plugin = Half()
    '''))
    monkeypatch.setattr("tritonjit._registry._entry_points", lambda: [ep("half", "tj_fake_half:plugin")])
    reg = Registry()
    assert reg.backends() == []
    assert "lacks required hooks" in reg.broken[0].reason and "launch" in reg.broken[0].reason
