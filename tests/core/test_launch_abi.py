"""A plugin built for another native launch ABI is refused at registration, with a
message naming the plugin, its ABI and the core's (a mismatched C launcher would
misread the tj_launch struct, so it must never be used)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import tritonjit
from tritonjit import _launch_abi
from tritonjit._registry import Registry
from tritonjit.testing import RecordingBackend

HEADER = Path(tritonjit.__file__).parent / "_native" / "tritonjit_launch.h"


def test_python_constants_are_the_headers():
    text = HEADER.read_text()
    assert int(re.search(r"#define TJ_LAUNCH_ABI (\d+)", text).group(1)) == _launch_abi.LAUNCH_ABI
    assert re.search(r'#define TJ_LAUNCH_CAPSULE "([^"]+)"', text).group(1) == _launch_abi.LAUNCH_CAPSULE
    from tritonjit import _native

    if _native.available():  # the C dispatcher was compiled from the same header
        assert _native.dispatch.ABI == _launch_abi.LAUNCH_ABI


def _plugin(name: str, abi: object) -> RecordingBackend:
    plugin = RecordingBackend(name)
    plugin.tritonjit_launch_abi = abi  # type: ignore[attr-defined]
    return plugin


def test_a_plugin_of_another_abi_is_refused_naming_both():
    abi = _launch_abi.LAUNCH_ABI + 1
    with pytest.raises(tritonjit.BackendError) as err:
        Registry().register(_plugin("abi-other", abi), dist="tritonjit-other", entry_name="other")
    msg = str(err.value)
    assert "plugin 'other' (tritonjit-other)" in msg
    assert f"launch ABI {abi}" in msg and f"launch ABI {_launch_abi.LAUNCH_ABI}" in msg
    assert tritonjit.__version__ in msg


def test_discovery_records_it_as_a_broken_plugin():
    reg = Registry()
    ep = SimpleNamespace(name="other", value="tritonjit_other:plugin", load=lambda: _plugin("abi-other", 99))
    reg._load(ep, "tritonjit-other")
    (broken,) = reg.broken
    assert (broken.name, broken.dist, broken.value) == ("other", "tritonjit-other", "tritonjit_other:plugin")
    assert "launch ABI 99" in broken.reason and f"launch ABI {_launch_abi.LAUNCH_ABI}" in broken.reason
    assert "abi-other" not in {b.info.name for b in reg._backends.values()}


def test_the_same_abi_or_none_declared_registers():
    reg = Registry()
    assert reg.register(_plugin("abi-same", _launch_abi.LAUNCH_ABI)).info.name == "abi-same"
    assert reg.register(RecordingBackend("abi-none")).info.name == "abi-none"


@pytest.mark.parametrize("bad", ["1", 1.0, True])
def test_a_declaration_that_is_no_int_is_refused(bad):
    with pytest.raises(tritonjit.BackendError, match="tritonjit_launch_abi must be an int"):
        Registry().register(_plugin("abi-bad", bad))
