"""A plugin cannot take tritonjit down with it, and its failures are named.

- discovery: an entry point that calls ``sys.exit()`` at import (or in
  ``backend_info`` / ``availability``) becomes a broken plugin naming its entry point
  and distribution; ``tritonjit.backends()`` and ``tritonjit info`` keep working;
  Ctrl-C (KeyboardInterrupt) still stops a slow import;
- the built-in interpreter cannot be displaced by a third-party plugin of its name;
- ``TRITONJIT_DISABLE_PLUGINS`` switches a plugin off without importing it;
- at launch, a hook that raises or returns garbage gives a HookError (a BackendError)
  naming the backend, the hook and the kernel, on the Python path and on the native
  dispatcher's (which hands such calls to the Python path).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import triton

torch = pytest.importorskip("torch")

import _spec_kernels as K  # noqa: E402
import tritonjit  # noqa: E402
import tritonjit.interpreter  # noqa: E402
from _fake_plugins import PLUGIN, ep  # noqa: E402
from tritonjit import BackendInfo, HookError, hookimpl  # noqa: E402
from tritonjit._registry import BUILTIN, Registry  # noqa: E402
from tritonjit.interpreter import InterpreterBackend  # noqa: E402


@triton.jit
def scalar_kernel(n):
    pass


def _registry(monkeypatch, *eps: EntryPoint) -> Registry:
    monkeypatch.setattr("tritonjit._registry._entry_points", lambda: list(eps))
    return Registry()


# ---- discovery ------------------------------------------------------------------------------------
def test_plugin_calling_sys_exit_at_import_is_broken_not_fatal(plugin_modules, monkeypatch):
    plugin_modules("tj_iso_exit", "import sys\nsys.exit(3)\n")
    plugin_modules("tj_iso_good", PLUGIN.format(name="good"))
    reg = _registry(monkeypatch, ep("exiter", "tj_iso_exit:plugin"), ep("good", "tj_iso_good:plugin"),
                    ep("interpreter", BUILTIN))
    assert [b.name for b in reg.backends()] == ["good", "interpreter"]
    (broken,) = reg.broken
    assert broken.name == "exiter" and broken.value == "tj_iso_exit:plugin"
    assert "SystemExit(3)" in broken.reason and "sys.exit()" in broken.reason
    with pytest.raises(tritonjit.BackendError, match="plugin 'exiter' is broken.*SystemExit"):
        reg.get("exiter")


def test_sys_exit_in_backend_info_or_availability(plugin_modules, monkeypatch):
    plugin_modules("tj_iso_info_exit", textwrap.dedent('''\
        import sys
        from tritonjit.interpreter import InterpreterBackend
        from tritonjit import hookimpl

        class Plugin(InterpreterBackend):
            @hookimpl
            def backend_info(self):
                sys.exit("no info today")

        plugin = Plugin()
    '''))
    plugin_modules("tj_iso_avail_exit", textwrap.dedent('''\
        import sys
        from tritonjit.interpreter import InterpreterBackend
        from tritonjit import BackendInfo, hookimpl

        class Plugin(InterpreterBackend):
            @hookimpl
            def backend_info(self):
                return BackendInfo(name="moody", priority=5, triton_backend="interpreter", device_type="cpu")

            @hookimpl
            def availability(self):
                sys.exit(4)

        plugin = Plugin()
    '''))
    reg = _registry(monkeypatch, ep("info-exit", "tj_iso_info_exit:plugin"),
                    ep("moody", "tj_iso_avail_exit:plugin"), ep("interpreter", BUILTIN))
    assert [b.name for b in reg.backends()] == ["moody", "interpreter"]
    assert [b.name for b in reg.broken] == ["info-exit"]
    assert "backend_info failed: SystemExit('no info today')" in reg.broken[0].reason
    ok, why = reg.get("moody").is_available()
    assert not ok and "SystemExit" in why
    assert reg.current().name == "interpreter"  # the unavailable one is passed over


def test_keyboard_interrupt_at_import_still_stops(plugin_modules, monkeypatch):
    plugin_modules("tj_iso_ctrl_c", "raise KeyboardInterrupt\n")
    reg = _registry(monkeypatch, ep("slow", "tj_iso_ctrl_c:plugin"), ep("interpreter", BUILTIN))
    with pytest.raises(KeyboardInterrupt):
        reg.backends()


def test_third_party_interpreter_does_not_displace_the_built_in(plugin_modules, monkeypatch):
    plugin_modules("tj_iso_impostor", PLUGIN.format(name="interpreter"))
    # found first (its distribution sorts first on sys.path): the built-in still wins
    reg = _registry(monkeypatch, ep("interpreter", "tj_iso_impostor:plugin"), ep("interpreter", BUILTIN))
    assert reg.get("interpreter").plugin is tritonjit.interpreter.plugin
    (broken,) = reg.broken
    assert broken.value == "tj_iso_impostor:plugin"
    assert "built-in backend, which is kept" in broken.reason and "another name" in broken.reason


def test_disable_plugins_skips_them_unimported(plugin_modules, monkeypatch):
    plugin_modules("tj_iso_exit2", "import sys\nsys.exit(5)\n")
    plugin_modules("tj_iso_good2", PLUGIN.format(name="good2"))
    monkeypatch.setenv("TRITONJIT_DISABLE_PLUGINS", " exiter2 , interpreter,")
    reg = _registry(monkeypatch, ep("exiter2", "tj_iso_exit2:plugin"), ep("good2", "tj_iso_good2:plugin"),
                    ep("interpreter", BUILTIN))
    assert [b.name for b in reg.backends()] == ["good2", "interpreter"]  # the built-in is never switched off
    assert reg.broken == [] and "tj_iso_exit2" not in sys.modules
    assert [(d.name, d.value) for d in reg.disabled] == [("exiter2", "tj_iso_exit2:plugin")]
    with pytest.raises(tritonjit.BackendError, match="plugin 'exiter2' is disabled by TRITONJIT_DISABLE_PLUGINS"):
        reg.get("exiter2")


def test_get_by_name_imports_only_that_plugin(plugin_modules, monkeypatch):
    """A lookup by name (a target "cuda:90", TRITONJIT_BACKEND) imports the built-in and the
    entry point of that name; the others wait for a full discovery, which imports each once."""
    plugin_modules("tj_iso_lazy_a", PLUGIN.format(name="lazy-a"))
    plugin_modules("tj_iso_lazy_b", PLUGIN.format(name="lazy-b"))
    reg = _registry(monkeypatch, ep("lazy-a", "tj_iso_lazy_a:plugin"), ep("lazy-b", "tj_iso_lazy_b:plugin"),
                    ep("interpreter", BUILTIN))
    assert reg.get("lazy-b").name == "lazy-b"
    assert "tj_iso_lazy_b" in sys.modules and "tj_iso_lazy_a" not in sys.modules
    assert reg.get("interpreter").plugin is tritonjit.interpreter.plugin
    assert "tj_iso_lazy_a" not in sys.modules
    assert [b.name for b in reg.backends()] == ["lazy-a", "lazy-b", "interpreter"]
    assert reg.broken == []  # lazy-b was not imported and registered a second time


def test_get_by_name_finds_a_backend_named_unlike_its_entry_point(plugin_modules, monkeypatch):
    plugin_modules("tj_iso_alias", PLUGIN.format(name="realname"))
    reg = _registry(monkeypatch, ep("alias", "tj_iso_alias:plugin"), ep("interpreter", BUILTIN))
    assert reg.get("realname").name == "realname"  # not the entry point's name: the full discovery finds it
    with pytest.raises(tritonjit.BackendError, match="unknown backend 'nosuch'.*interpreter, realname"):
        reg.get("nosuch")


def test_get_by_name_keeps_the_rules_of_discovery(plugin_modules, monkeypatch):
    """Disabled stays unimported, and two plugins of one name are refused, on the lazy path too."""
    plugin_modules("tj_iso_twin1", PLUGIN.format(name="twin"))
    plugin_modules("tj_iso_twin2", PLUGIN.format(name="twin"))
    plugin_modules("tj_iso_off", "import sys\nsys.exit(6)\n")
    monkeypatch.setenv("TRITONJIT_DISABLE_PLUGINS", "off")
    reg = _registry(monkeypatch, ep("twin", "tj_iso_twin1:plugin"), ep("twin", "tj_iso_twin2:plugin"),
                    ep("off", "tj_iso_off:plugin"), ep("interpreter", BUILTIN))
    assert reg.get("twin").plugin is sys.modules["tj_iso_twin1"].plugin
    (broken,) = reg.broken
    assert broken.value == "tj_iso_twin2:plugin" and "two plugins are named 'twin'" in broken.reason
    with pytest.raises(tritonjit.BackendError, match="plugin 'off' is disabled"):
        reg.get("off")
    assert "tj_iso_off" not in sys.modules and len(reg.broken) == 1


# ---- a real installed distribution: tritonjit info ------------------------------------------------------
@pytest.fixture(scope="module")
def exit_site(tmp_path_factory) -> Path:
    """A site directory holding a distribution 'tj-exit-plugin' whose entry point
    'exiter' calls sys.exit(1) at import."""
    site = tmp_path_factory.mktemp("exit-site")
    (site / "tj_exit_plugin.py").write_text("import sys\nsys.exit(1)\n")
    info = site / "tj_exit_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tj-exit-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[tritonjit.backends]\nexiter = tj_exit_plugin:plugin\n")
    return site


def _cli(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("TRITONJIT_BACKEND", "TRITONJIT_DISABLE_PLUGINS")}
    e.update(env)
    e["PYTHONPATH"] = os.pathsep.join([str(site)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return subprocess.run([sys.executable, "-m", "tritonjit", *args], capture_output=True, text=True, env=e,
                          timeout=300)


def test_info_names_a_plugin_that_exits(exit_site):
    res = _cli(exit_site, "info", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert "interpreter" in [b["name"] for b in out["backends"]]
    (broken,) = [b for b in out["broken_plugins"] if b["name"] == "exiter"]
    assert broken["distribution"] == "tj-exit-plugin" and broken["entry_point"] == "tj_exit_plugin:plugin"
    assert "SystemExit(1)" in broken["reason"]


def test_info_shows_disabled_plugins(exit_site):
    res = _cli(exit_site, "info", "--json", TRITONJIT_DISABLE_PLUGINS="exiter")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["disable_plugins"] == "exiter" and not any(b["name"] == "exiter" for b in out["broken_plugins"])
    assert out["disabled_plugins"] == [{"name": "exiter", "distribution": "tj-exit-plugin",
                                        "entry_point": "tj_exit_plugin:plugin"}]
    text = _cli(exit_site, "info", TRITONJIT_DISABLE_PLUGINS="tj-exit-plugin")  # by distribution name
    assert text.returncode == 0, text.stderr
    assert "TRITONJIT_DISABLE_PLUGINS=tj-exit-plugin: not loaded: exiter (tj-exit-plugin)" in text.stdout


# ---- hooks at launch: the Python path ------------------------------------------------------------------
class Faulty(InterpreterBackend):
    """The interpreter with one hook replaced by a fault (a CPU backend: the Python path)."""

    def __init__(self) -> None:
        self.faults: dict[str, object] = {}

    def _fault(self, hook: str, good: object) -> object:
        if hook not in self.faults:
            return good
        f = self.faults[hook]
        if isinstance(f, BaseException):
            raise f
        return f

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(name="faulty", priority=-1000, triton_backend="interpreter", device_type="cpu")

    @hookimpl
    def current_device(self) -> int:
        return self._fault("current_device", 0)

    @hookimpl
    def device_of(self, tensor):
        return self._fault("device_of", 0)

    @hookimpl
    def current_stream(self, device: int) -> int:
        return self._fault("current_stream", 0)

    @hookimpl
    def launch(self, state, grid, stream, packed) -> None:
        self._fault("launch", None)
        super().launch(state, grid, stream, packed)


@pytest.fixture
def faulty():
    plugin = Faulty()
    tritonjit.register_backend(plugin)
    previous = tritonjit._registry.registry._current
    tritonjit.set_backend("faulty")
    yield plugin
    tritonjit._registry.registry._current = previous
    tritonjit.unregister_backend("faulty")


def _add_call(f):
    x, y, out = torch.arange(64.0), torch.ones(64), torch.zeros(64)
    f[(1,)](x, y, out, 64, BLOCK=64)
    return out


GARBAGE = [pytest.param("0", id="str"), pytest.param(True, id="bool"), pytest.param(-1, id="negative"),
           pytest.param(None, id="None"), pytest.param(1.0, id="float")]


@pytest.mark.parametrize("value", GARBAGE)
@pytest.mark.parametrize("hook", ["current_device", "device_of", "current_stream"])
def test_garbage_from_a_hook_is_refused_naming_it(faulty, hook, value):
    f = tritonjit.KernelFunction(K.add)
    _add_call(f)
    faulty.faults[hook] = value
    with pytest.raises(HookError) as err:
        _add_call(f)
    msg = str(err.value)
    assert isinstance(err.value, tritonjit.BackendError)
    assert f"backend 'faulty': hook '{hook}' returned {type(value).__name__} {value!r}" in msg
    assert "expected a" in msg and "int >= 0" in msg and "kernel 'add'" in msg
    del faulty.faults[hook]
    torch.testing.assert_close(_add_call(f), torch.arange(64.0) + 1)  # nothing broken
    assert len(f.variants()) == 1


@pytest.mark.parametrize("hook,named", [("current_device", "current_device"), ("device_of", "device_of"),
                                        ("current_stream", "current_stream"), ("launch", "pack_args/launch")])
def test_a_hook_raising_at_launch_is_named(faulty, hook, named):
    f = tritonjit.KernelFunction(K.add)
    cause = RuntimeError("driver fell over")
    faulty.faults[hook] = cause
    with pytest.raises(HookError, match=rf"backend 'faulty': hook '{named}' raised RuntimeError: driver fell "
                                        r"over \(launching kernel 'add'\)") as err:
        _add_call(f)
    assert err.value.__cause__ is cause and err.value.hook == named and err.value.backend == "faulty"


def test_tritonjit_errors_from_hooks_pass_unchanged(faulty):
    f = tritonjit.KernelFunction(K.add)
    faulty.faults["launch"] = tritonjit.ArgumentError("add", "cannot pass it", "n")
    with pytest.raises(tritonjit.ArgumentError, match="parameter 'n' of kernel 'add': cannot pass it"):
        _add_call(f)
    faulty.faults.clear()
    faulty.faults["device_of"] = ValueError("expected a faulty tensor")  # the documented refusal
    with pytest.raises(tritonjit.ArgumentError, match="parameter 'x' of kernel 'add': expected a faulty tensor"):
        _add_call(f)


def test_garbage_current_device_in_an_ahead_of_time_compile(faulty):
    faulty.faults["current_device"] = "cuda:0"
    f = tritonjit.KernelFunction(K.add)
    with pytest.raises(HookError, match="hook 'current_device' returned str 'cuda:0'"):
        f.compile("*fp32:16,*fp32:16,*fp32:16,i32,64")


# ---- hooks at launch: the native dispatcher -----------------------------------------------------------
@pytest.fixture
def recording_faulty():
    from tritonjit import _native
    from tritonjit.testing import RecordingBackend

    if not _native.available():
        pytest.skip(f"native dispatcher: {_native.reason}")

    class FaultyRecording(RecordingBackend):
        def __init__(self) -> None:
            super().__init__(name="faulty-rec")
            self.stream: object = 7
            self.device: object = 0

        @hookimpl
        def current_stream(self, device: int) -> int:
            if isinstance(self.stream, BaseException):
                raise self.stream
            return self.stream

        @hookimpl
        def current_device(self) -> int:
            return self.device

    plugin = FaultyRecording()
    tritonjit.register_backend(plugin)
    previous = tritonjit._registry.registry._current
    tritonjit.set_backend("faulty-rec")
    yield plugin
    tritonjit._registry.registry._current = previous
    tritonjit.unregister_backend("faulty-rec")


@pytest.mark.parametrize("value", [True, -3, "s", None, RuntimeError("no stream")])
def test_native_path_hands_a_bad_stream_to_the_python_path(recording_faulty, value):
    from tritonjit.testing import FakeTensor

    f = tritonjit.KernelFunction(K.add)
    x = FakeTensor(1 << 20)
    f[(1,)](x, x, x, 64, BLOCK=64)
    f[(1,)](x, x, x, 64, BLOCK=64)
    assert f._dispatcher is not None and f._dispatcher.stats()["native"] == 1
    recording_faulty.stream = value
    with pytest.raises(HookError, match="backend 'faulty-rec': hook 'current_stream' (returned|raised)"):
        f[(1,)](x, x, x, 64, BLOCK=64)
    (variant,) = f.variants()
    assert variant.launcher.count == 2  # the refused call launched nothing
    recording_faulty.stream = 7
    f[(1,)](x, x, x, 64, BLOCK=64)
    assert f._dispatcher.stats()["native"] == 2


@pytest.mark.parametrize("value", [True, -1, "0"])
def test_native_path_hands_a_bad_current_device_to_the_python_path(recording_faulty, value):
    f = tritonjit.KernelFunction(scalar_kernel)  # no tensor: the device is the current one
    f[(1,)](5)
    f[(1,)](5)
    assert f._dispatcher.stats()["native"] == 1
    recording_faulty.device = value
    with pytest.raises(HookError, match="hook 'current_device' returned"):
        f[(1,)](5)
    recording_faulty.device = 0
    f[(1,)](5)
    assert f._dispatcher.stats()["native"] == 2

