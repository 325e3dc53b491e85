"""Operator test setup: operators launch through tritonjit on the active backend
(Triton's interpreter on CPU tensors on a machine without an accelerator)."""


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """test_opinfo.py's table: per routed aten overload, OpInfo samples passed under enable()."""
    import sys

    mod = sys.modules.get("test_opinfo") or sys.modules.get("tests.ops.test_opinfo")
    lines = mod.report_lines() if mod is not None else []
    if lines:
        terminalreporter.section("OpInfo samples under tritonjit_ops.enable()")
        for line in lines:
            terminalreporter.write_line(line)
