"""The conformance suite: the contract every backend plugin must keep, as pytest tests.

A plugin's test module subclasses :class:`BackendConformance` and provides a
``conformance`` fixture returning a :class:`ConformanceTarget`. Every test here
runs the plugin's real hook code; a target marked ``simulated`` says its launches
were checked by a simulated driver, never on hardware.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from importlib import metadata
from typing import Any

import pytest

from .._api import backends as list_backends
from .._backend import Backend, BackendInfo, CompiledVariant
from .._errors import BackendError, TritonJITError
from .._function import function
from .._registry import ENTRY_POINT_GROUP, Registry
from .._variant import make_variant, module_cache
from ..interpreter import InterpreterBackend
from ._kernels import BLOCK, CONFORMANCE_SIGNATURE, conformance_axpy
from ._target import ConformanceTarget, LaunchCheck, default_args


def fresh_backend(plugin: Any) -> Backend:
    """The plugin registered in a private registry (the process-wide one is untouched)."""
    return Registry().register(plugin)


class BackendConformance:
    """Subclass as ``TestXxxConformance`` and define the ``conformance`` fixture."""

    @pytest.fixture
    def conformance(self) -> ConformanceTarget:  # pragma: no cover - overridden
        raise NotImplementedError("define a 'conformance' fixture returning a ConformanceTarget")

    # ---- helpers -------------------------------------------------------------------------
    @staticmethod
    def _compiled(t: ConformanceTarget, num_warps: int = 4) -> CompiledVariant:
        fn = function(conformance_axpy)
        return t.variant(fn, CONFORMANCE_SIGNATURE, {"num_warps": num_warps, "num_stages": 1})

    @staticmethod
    def _args(t: ConformanceTarget, n: int) -> tuple:
        return (t.make_args or default_args)(n)

    @staticmethod
    def _block_x(t: ConformanceTarget, compiled: CompiledVariant, backend: Backend) -> int:
        warp = int(compiled.metadata.get("warp_size") or getattr(compiled.target, "warp_size", 0) or backend.warp_size)
        return compiled.num_warps * warp

    def _variant(self, t: ConformanceTarget, backend: Backend, compiled: CompiledVariant) -> Any:
        if t.before_load is not None:
            t.before_load(compiled)
        fn = function(conformance_axpy)
        return make_variant(backend, compiled, fn.parse_signature(compiled.signature or CONFORMANCE_SIGNATURE),
                            t.device)

    # ---- identity, discovery, availability -------------------------------------------------
    def test_backend_info(self, conformance: ConformanceTarget) -> None:
        info = conformance.plugin.backend_info()
        assert isinstance(info, BackendInfo)
        assert info.name == conformance.name
        assert info.warp_size >= 1 and info.device_type
        assert info.triton_backend, "backend_info must name the Triton backend that compiles for it"
        try:
            import torch
        except ImportError:
            return
        assert info.dispatch_key in torch._C.DispatchKey.__members__, f"unknown dispatch key {info.dispatch_key}"

    def test_availability_never_raises(self, conformance: ConformanceTarget) -> None:
        ok, reason = conformance.plugin.availability()
        assert isinstance(ok, bool) and isinstance(reason, str) and reason
        assert conformance.plugin.device_count() >= (1 if ok else 0)

    def test_discovered_through_entry_point(self, conformance: ConformanceTarget) -> None:
        if conformance.entry_point is None:
            pytest.skip("target declares no entry point")
        eps = [ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == conformance.entry_point]
        assert eps, f"no '{conformance.entry_point}' entry point in group {ENTRY_POINT_GROUP}: is the plugin installed?"
        installed = eps[0].load()
        assert type(installed) is type(conformance.plugin) or installed is conformance.plugin
        assert conformance.name in [b.name for b in list_backends()]

    def test_unavailable_plugin_is_inert(self, conformance: ConformanceTarget) -> None:
        if conformance.unavailable_plugin is None:
            pytest.skip("backend is always available")
        plugin = conformance.unavailable_plugin()
        ok, reason = plugin.availability()
        assert ok is False
        if conformance.missing_library:
            assert conformance.missing_library in reason, reason
        assert plugin.device_count() == 0
        reg = Registry()
        reg.register(InterpreterBackend())
        backend = reg.register(plugin)
        assert backend.is_available()[0] is False
        assert reg.current().name == "interpreter"  # it never breaks selection of the others
        with pytest.raises(BackendError, match="not available"):
            reg.set_current(conformance.name)

    def test_duplicate_name_is_refused(self, conformance: ConformanceTarget) -> None:
        reg = Registry()
        reg.register(conformance.plugin)
        with pytest.raises(BackendError, match="two plugins"):
            reg.register(copy.copy(conformance.plugin))

    # ---- compilation -------------------------------------------------------------------------
    def test_compile_target_without_device(self, conformance: ConformanceTarget) -> None:
        if conformance.arch is None:
            pytest.skip("target declares no architecture")
        target = conformance.plugin.compile_target(None, conformance.arch)
        info = conformance.plugin.backend_info()
        assert target.backend == info.triton_backend
        assert str(target.arch) == conformance.arch or target.arch == conformance.arch
        assert target.warp_size == info.warp_size

    def test_variant_metadata(self, conformance: ConformanceTarget) -> None:
        compiled = self._compiled(conformance)
        assert compiled.name == "conformance_axpy"
        assert compiled.num_warps == 4
        assert compiled.shared >= 0
        assert compiled.signature == CONFORMANCE_SIGNATURE

    # ---- the lifecycle ---------------------------------------------------------------------------
    def test_round_trip_launcher(self, conformance: ConformanceTarget) -> None:
        t, backend = conformance, fresh_backend(conformance.plugin)
        compiled = self._compiled(t)
        variant = self._variant(t, backend, compiled)
        n = 300
        x, y, out = self._args(t, n)
        grid = ((n + BLOCK - 1) // BLOCK, 1, 1)
        variant.launcher(grid, t.stream, (x, y, out, n, 2.5))
        t.verify([LaunchCheck(compiled.name, compiled, grid, t.stream, (x, y, out, n, 2.5),
                              self._block_x(t, compiled, backend))])

    def test_round_trip_pack_then_launch(self, conformance: ConformanceTarget) -> None:
        t, backend = conformance, fresh_backend(conformance.plugin)
        compiled = self._compiled(t, num_warps=2)
        if t.before_load is not None:
            t.before_load(compiled)
        handle = backend.load(compiled, t.device)
        state = backend.prepare(compiled, handle, t.device)
        n = 100
        x, y, out = self._args(t, n)
        args = (x, y, out, n, -1.0)
        backend.launch(state, (1, 1, 1), t.stream, backend.pack_args(state, args))
        t.verify([LaunchCheck(compiled.name, compiled, (1, 1, 1), t.stream, args, self._block_x(t, compiled, backend))])

    def test_module_cache_loads_once(self, conformance: ConformanceTarget) -> None:
        t, backend = conformance, fresh_backend(conformance.plugin)
        calls = []
        real_load = backend.load

        def counting_load(c: Any, d: int) -> Any:
            calls.append(1)
            return real_load(c, d)

        backend.load = counting_load
        compiled = self._compiled(t)
        compiled = dataclasses.replace(compiled, hash=(compiled.hash or "h") + "-cache-test")
        self._variant(t, backend, compiled)
        self._variant(t, backend, compiled)
        assert len(calls) == 1

    def test_concurrent_launches(self, conformance: ConformanceTarget) -> None:
        t, backend = conformance, fresh_backend(conformance.plugin)
        compiled = self._compiled(t)
        variant = self._variant(t, backend, compiled)
        threads_n, per_thread = 4, (3 if not t.simulated else 25)
        checks: list[LaunchCheck] = []
        errors: list[BaseException] = []
        lock = threading.Lock()
        block_x = self._block_x(t, compiled, backend)

        def work(k: int) -> None:
            try:
                for i in range(per_thread):
                    n = 1 + k * 1000 + i
                    x, y, out = self._args(t, n)
                    args = (x, y, out, n, float(k))
                    grid = ((n + BLOCK - 1) // BLOCK, 1, 1)
                    variant.launcher(grid, t.stream, args)
                    with lock:
                        checks.append(LaunchCheck(compiled.name, compiled, grid, t.stream, args, block_x))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        workers = [threading.Thread(target=work, args=(k,)) for k in range(threads_n)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert not errors, errors
        t.verify(checks)

    # ---- error paths ---------------------------------------------------------------------------------
    def test_wrong_argument_count(self, conformance: ConformanceTarget) -> None:
        t, backend = conformance, fresh_backend(conformance.plugin)
        compiled = self._compiled(t)
        variant = self._variant(t, backend, compiled)
        x, y, out = self._args(t, 16)
        with pytest.raises((TypeError, ValueError)):
            variant.launcher((1, 1, 1), t.stream, (x, y, out))

    def test_bad_argument_type_names_parameter(self, conformance: ConformanceTarget) -> None:
        t, backend = conformance, fresh_backend(conformance.plugin)
        compiled = self._compiled(t)
        variant = self._variant(t, backend, compiled)
        x, y, out = self._args(t, 16)
        with pytest.raises(Exception) as info:  # the interpreter reports it through Triton's own error
            variant.launcher((1, 1, 1), t.stream, (x, y, out, "sixteen", 1.0))
        if t.simulated or isinstance(info.value, TritonJITError):
            assert "conformance_axpy" in str(info.value)

    def test_corrupt_binary_is_refused_and_not_cached(self, conformance: ConformanceTarget) -> None:
        t, backend = conformance, fresh_backend(conformance.plugin)
        if not t.corrupt_binary_fails:
            pytest.skip("backend loads no binary")
        compiled = self._compiled(t)
        bad = dataclasses.replace(compiled, binary=b"\x00garbage, not a device binary" * 4,
                                  hash="corrupt-" + compiled.hash)
        before = len(module_cache)
        with pytest.raises(TritonJITError, match="conformance_axpy"):
            module_cache.load(backend, bad, t.device)
        assert len(module_cache) == before

    def test_shared_memory_over_limit(self, conformance: ConformanceTarget) -> None:
        t, backend = conformance, fresh_backend(conformance.plugin)
        if t.max_shared is None:
            pytest.skip("backend has no shared-memory limit")
        compiled = self._compiled(t)
        md = dict(compiled.metadata, shared=t.max_shared + 1)
        big = dataclasses.replace(compiled, metadata=md, hash=compiled.hash + "-big-shared")
        if t.before_load is not None:
            t.before_load(big)
        handle = backend.load(big, t.device)
        with pytest.raises(BackendError, match=r"conformance_axpy.*shared memory"):
            backend.prepare(big, handle, t.device)

    def test_driver_failure_is_reported_and_recoverable(self, conformance: ConformanceTarget) -> None:
        t, backend = conformance, fresh_backend(conformance.plugin)
        if t.inject_failure is None:
            pytest.skip("target cannot inject driver failures")
        compiled = self._compiled(t)
        variant = self._variant(t, backend, compiled)
        x, y, out = self._args(t, 8)
        args = (x, y, out, 8, 1.0)
        t.inject_failure()
        with pytest.raises(BackendError, match="conformance_axpy"):
            variant.launcher((1, 1, 1), t.stream, args)
        variant.launcher((1, 1, 1), t.stream, args)  # the next launch works
        t.verify([LaunchCheck(compiled.name, compiled, (1, 1, 1), t.stream, args, self._block_x(t, compiled, backend))])
