"""Operator test setup: operators launch through tritonjit on the active backend
(Triton's interpreter on CPU tensors on a machine without an accelerator)."""
import pytest


@pytest.fixture(autouse=True, scope="session")
def _cpp_operator_path_built():
    """On a device backend, enable()'s default selection stays on aten's kernels while the
    C++ operator path builds (in the background, on first use): wait for that build once,
    so that the tests run tritonjit's kernels rather than that window. (The interpreter
    routes everything through Python and does not wait.)"""
    import tritonjit

    if tritonjit.current_backend().dispatch_key != "CPU":
        from tritonjit_ops import _native_ops

        _native_ops.module(wait=True)
    yield


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """test_opinfo.py's table: per routed aten overload, OpInfo samples passed under enable()."""
    import sys

    mod = sys.modules.get("test_opinfo") or sys.modules.get("tests.ops.test_opinfo")
    lines = mod.report_lines() if mod is not None else []
    if lines:
        terminalreporter.section("OpInfo samples under tritonjit_ops.enable()")
        for line in lines:
            terminalreporter.write_line(line)
