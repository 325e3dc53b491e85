"""tritonjit: a fast, pluggable runtime for Triton JIT kernels.

    import tritonjit
    f = tritonjit.function(add_kernel)
    f[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)

Backends are plugins found through the ``tritonjit.backends`` entry points; the
Triton interpreter ships built in. docs/plugin-guide.md explains how to write one.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from ._api import (
    backends,
    broken_plugins,
    current_backend,
    get_backend,
    register_backend,
    set_backend,
    unregister_backend,
)
from ._backend import Backend, BackendInfo, CompiledVariant, SpecializationRules
from ._cpp import get_cmake_dir, get_include
from ._errors import (
    ArgumentError,
    BackendError,
    CompilationError,
    FrozenError,
    GridError,
    HookError,
    KernelNotFoundError,
    SignatureError,
    TritonJITError,
)
from ._frozen import freeze, is_frozen, unfreeze
from ._function import KernelFunction, function
from ._hookspecs import hookimpl, hookspec
from ._variant import Variant

try:
    __version__ = _version("tritonjit-core")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+unknown"

__all__ = [
    "ArgumentError", "Backend", "BackendError", "BackendInfo", "CompilationError", "CompiledVariant",
    "FrozenError", "GridError", "HookError", "KernelFunction", "KernelNotFoundError", "SignatureError",
    "SpecializationRules", "TritonJITError", "Variant", "backends", "broken_plugins", "current_backend", "function",
    "get_backend", "hookimpl", "hookspec", "register_backend", "set_backend", "unregister_backend",
    "freeze", "unfreeze", "is_frozen", "get_include", "get_cmake_dir", "__version__",
]
