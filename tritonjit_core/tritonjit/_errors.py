"""Error types and the one place that formats them.

Every error raised for bad input names the kernel, the parameter (where there is one)
and what was expected, so an operator author can fix the call without reading the
runtime. Errors never leave a half-built cache entry behind: the runtime raises before
it inserts anything.
"""

from __future__ import annotations


class TritonJITError(Exception):
    """Base class of every error tritonjit raises on purpose."""


class ArgumentError(TritonJITError, TypeError):
    """A kernel was called with arguments it cannot take."""

    def __init__(self, kernel: str, message: str, param: str | None = None) -> None:
        self.kernel = kernel
        self.param = param
        where = f"parameter '{param}' of kernel '{kernel}'" if param else f"kernel '{kernel}'"
        super().__init__(f"{where}: {message}")


class GridError(TritonJITError, ValueError):
    """The launch grid is empty, negative or over the backend's limit."""

    def __init__(self, kernel: str, message: str) -> None:
        self.kernel = kernel
        super().__init__(f"kernel '{kernel}': {message}")


class CompilationError(TritonJITError):
    """Triton failed to compile a variant; carries the compiler's message and where."""

    def __init__(self, kernel: str, signature: str, target: object, cause: BaseException) -> None:
        self.kernel = kernel
        self.signature = signature
        self.target = target
        self.cause = cause
        super().__init__(
            f"kernel '{kernel}' failed to compile for {target} with signature '{signature}':\n{cause}"
        )


class FrozenError(TritonJITError, RuntimeError):
    """tritonjit is frozen (``tritonjit.freeze()`` / ``TRITONJIT_FROZEN=1``) and a call
    needs a variant that is neither in memory nor in the on-disk index."""

    def __init__(self, kernel: str, signature: str, target: object = None) -> None:
        self.kernel = kernel
        self.signature = signature
        on = f" for {target}" if target is not None else ""
        super().__init__(
            f"kernel '{kernel}': variant '{signature}'{on} is not compiled, and tritonjit is frozen "
            "(tritonjit.freeze() or TRITONJIT_FROZEN=1) so it will not compile it; warm it up first "
            "(tritonjit warmup), or call tritonjit.unfreeze()"
        )


class KernelNotFoundError(TritonJITError, LookupError):
    """``tritonjit.function(path, name)`` found no such file or no such kernel in it."""


class BackendError(TritonJITError, RuntimeError):
    """No such backend, a backend that is unavailable, or a broken plugin."""


class HookError(BackendError):
    """A backend's hook raised, or returned what its contract does not allow: named by
    backend and hook (and the kernel being launched), so a plugin bug is not mistaken
    for a bug of the caller's."""

    def __init__(self, backend: str, hook: str, problem: str, kernel: str | None = None) -> None:
        self.backend, self.hook, self.kernel = backend, hook, kernel
        during = f" (launching kernel '{kernel}')" if kernel else ""
        super().__init__(f"backend '{backend}': hook '{hook}' {problem}{during}")

    @classmethod
    def raised(cls, backend: str, hook: str, exc: BaseException, kernel: str | None = None) -> HookError:
        return cls(backend, hook, f"raised {type(exc).__name__}: {exc}", kernel)

    @classmethod
    def returned(cls, backend: str, hook: str, value: object, expected: str, kernel: str | None = None) -> HookError:
        return cls(backend, hook, f"returned {type(value).__name__} {value!r}; expected {expected}", kernel)


class SignatureError(TritonJITError, ValueError):
    """A signature string that does not parse or does not fit the kernel."""

    def __init__(self, kernel: str, signature: str, message: str) -> None:
        self.kernel = kernel
        super().__init__(f"kernel '{kernel}', signature '{signature}': {message}")


def format_source_location(fn: object) -> str:
    """``file:line`` of a Python function, for messages that point at a kernel."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return "<unknown>"
    return f"{code.co_filename}:{code.co_firstlineno}"
