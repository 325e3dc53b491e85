"""tritonjit backend plugin for Huawei Ascend NPUs.

Registered through the ``tritonjit.backends`` entry point as ``npu``. It drives
CANN's ACL/rt runtime through ctypes with libtriton_jit's packed argument buffer
(see ``_abi``); compiled kernels come from Triton-Ascend. README.md says what was
verified against a simulated driver and what needs hardware.
"""

from ._abi import ArgBufferLayout, NpuArgType, runtime_types
from ._driver import ENV_DRIVER, load_driver, reset_driver
from ._plugin import NpuBackend, plugin

__all__ = [
           "ENV_DRIVER",
           "ArgBufferLayout",
           "NpuArgType",
           "NpuBackend",
           "load_driver",
           "plugin",
           "reset_driver",
           "runtime_types",
]
