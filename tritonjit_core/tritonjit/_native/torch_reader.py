"""The torch tensor reader: built in the background on first use, then handed to the dispatcher.

The native dispatcher reads three things from every tensor argument: its data
pointer, its dtype and its device. Through Python (``t.data_ptr()``, ``t.dtype``)
that is about a hundred nanoseconds per tensor, most of a launch's overhead for a
kernel with many tensors. ``_torch_tensor.cpp`` reads them through torch's C++ API
instead, and also answers torch's current stream for backend plugins
(tritonjit_tensor.h is the ABI). It is compiled against the torch in this process
by ``torch_build`` (once per torch version, 20-40 s, on a background thread), unless
the installed wheel carries it prebuilt for this torch (``_prebuilt/``); until it is
ready, and wherever it cannot be built, tensors are read through Python.

``TRITONJIT_TORCH_READER=0`` turns the reader off (``TRITONJIT_NO_NATIVE=1`` too).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from . import torch_build

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "_torch_tensor.cpp")
HEADER = os.path.join(HERE, "tritonjit_tensor.h")

#: the wheel's prebuilt copies (torch_prebuilt), when it was built with TRITONJIT_PREBUILD_TORCH=1
PREBUILT = os.path.join(HERE, "_prebuilt")

_module = torch_build.AsyncModule("tritonjit._native._torch_tensor", SOURCE, [HEADER], [HERE], prebuilt=PREBUILT)


def enabled() -> bool:
    return os.environ.get("TRITONJIT_TORCH_READER", "1").strip().lower() not in ("0", "false", "no", "off")


def reason() -> str:
    """Why the reader is or is not in use."""
    return _module.reason if enabled() else "disabled by TRITONJIT_TORCH_READER=0"


def start(wait: bool = False) -> Any:
    """Start the build (once per process; only once torch is imported: tensors are
    torch's, and importing torch here would cost every process that never passes
    one). The reader's capsule, or None while it is building or where it is off."""
    if not enabled():
        return None
    mod = _module.start(wait)
    return mod.reader if mod is not None else None


def on_ready(callback: Callable[[Any], None]) -> None:
    """Call ``callback(capsule)`` once the reader is loaded (now, if it is)."""
    if enabled():
        _module.on_ready(lambda mod: callback(mod.reader))


def batch() -> Any:
    """The loaded reader's batch companion capsule (tritonjit_tensor.h), or None (not
    loaded, or a prebuilt reader from before the companion)."""
    mod = _module.module if enabled() else None
    return getattr(mod, "reader_batch", None)


def status() -> str:
    """What ``tritonjit info`` reports: in use, prebuilt, built, or why not; never builds."""
    return _module.status() if enabled() else reason()
