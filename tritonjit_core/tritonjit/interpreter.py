"""The built-in interpreter backend: Triton's interpreter on CPU tensors.

It is an ordinary plugin, registered through the same ``tritonjit.backends`` entry
point group as every vendor plugin, with the lowest priority: the embedded default
when no accelerator is present. "Compiling" a variant binds its constants; launching
runs Triton's interpreter over the grid.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

from ._backend import BackendInfo, CompiledVariant
from ._errors import ArgumentError
from ._hookspecs import hookimpl
from ._lang_lock import language

_patched = False


def _patch_interpreter() -> None:
    """Triton's interpreter fixes below, applied once per process at the first launch (each
    also marks the interpreter module, so a second copy of this module never stacks them)."""
    global _patched
    if _patched:
        return
    import triton.runtime.interpreter as interp

    _patch_index(interp)
    _patch_bf16_rounding(interp)
    _patched = True


def _patch_index(interp: Any) -> None:
    """Work around Triton 3.6's interpreter under NumPy >= 2.3.

    There its scalars are shape-(1,) arrays and ``int(array)`` of those raises, so
    ``range(start, n)`` with runtime bounds fails inside kernels. Giving the
    interpreter's tensor an ``__index__`` that reads the single element fixes it.
    Triton 3.6 passes a patch scope (restored after the launch); 3.4 and 3.5 patch
    without one, so the scope is optional (``_callees_interpreted`` restores both).
    """
    if not getattr(interp, "_tritonjit_index_patched", False):
        original = interp._patch_lang_tensor

        def index(self: Any) -> int:
            return int(self.handle.data.reshape(-1)[0])

        def patched(tensor: Any, *scope: Any) -> None:
            original(tensor, *scope)
            if scope:
                scope[0].set_attr(tensor, "__index__", index)
            else:
                tensor.__index__ = index

        interp._patch_lang_tensor = patched
        interp._tritonjit_index_patched = True


def _patch_bf16_rounding(interp: Any) -> None:
    """Round float32 -> bfloat16 casts to nearest even, as a GPU (and torch) does, and
    widen bfloat16 subnormals exactly.

    Triton 3.6's interpreter converts float32 to bfloat16 by dropping the low 16 bits
    (``x.to(tl.bfloat16)`` passes no rounding mode, which its converter treats as
    truncation) and, asked for ``rtne``, rounds half up with the carry OR-ed into the
    exponent. Every bf16 result a kernel stores was thus up to one ulp toward zero:
    twice eager's error and biased, which compounds through a model's layers. The
    converter is replaced for that one conversion: round to nearest even with the
    carry propagated, NaN kept quiet; ``rtz`` (an explicit request) truncates (the bits'
    high half: the interpreter's own converter also mangled float32 subnormals). bfloat16
    -> float32, exact on a GPU, gave bf16 subnormals (below 1.2e-38) wrong values: it is
    the bits shifted left by 16 now.
    """
    import numpy as np
    import triton.language as tl

    if not getattr(interp, "_tritonjit_bf16_patched", False) and hasattr(interp, "_convert_float"):
        original = interp._convert_float
        rtz = getattr(getattr(interp, "_ir", None), "ROUNDING_MODE", None)
        rtz = getattr(rtz, "RTZ", None)

        def convert(input: Any, input_dtype: Any, output_dtype: Any, rounding_mode: Any) -> Any:
            if input_dtype == tl.bfloat16 and output_dtype == tl.float32:  # exact: the bits, shifted
                return (np.ascontiguousarray(input).view(np.uint16).astype(np.uint32) << np.uint32(16)).reshape(
                    np.shape(input))
            if input_dtype != tl.float32 or output_dtype != tl.bfloat16:
                return original(input, input_dtype, output_dtype, rounding_mode)
            bits = np.ascontiguousarray(input, dtype=np.float32).view(np.uint32)
            if rtz is not None and rounding_mode == rtz:
                rounded = bits >> np.uint32(16)
            else:
                rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
            nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
            out = np.where(nan, (bits >> np.uint32(16)) | np.uint32(0x40), rounded).astype(np.uint16)
            return out.reshape(np.shape(input))

        interp._convert_float = convert
        interp._tritonjit_bf16_patched = True


_NP_FLOATS = {"fp16": "float16", "fp64": "float64"}


def _float_arg(value: float, np_type: str = "float32") -> Any:
    """A float argument as the kernel's ``np_type`` scalar (an interpreter tensor); past the
    type's range inf, as a cast gives."""
    import numpy as np
    import triton.language as tl
    import triton.runtime.interpreter as interp

    ty = {"float16": tl.float16, "float32": tl.float32, "float64": tl.float64}[np_type]
    with np.errstate(over="ignore"):
        return tl.tensor(interp.TensorHandle(np.array([value], dtype=np_type), ty), ty)


class _Artifact:
    """An interpreter 'binary': the kernel plus the constants of one variant."""

    def __init__(self, jit_fn: Any, nparams: int, constants: dict[int, Any], signature: dict[str, Any]) -> None:
        from triton.runtime.interpreter import InterpretedFunction

        self.jit_fn = jit_fn
        self.interp = InterpretedFunction(jit_fn.fn)
        self.nparams = nparams
        self.constants = constants
        self.runtime_index = [i for i in range(nparams) if i not in constants]
        # float parameters of another type than fp32 (annotated ``tl.float64``, ``tl.float16``):
        # a float argument reaches the kernel in that type, as in a compiled kernel (_scalar_args
        # gives the others fp32)
        names = list(jit_fn.arg_names)
        self.float_types = {i: _NP_FLOATS[t] for n, t in signature.items()
                            if t in _NP_FLOATS and n in names and (i := names.index(n)) not in constants}


@contextlib.contextmanager
def _callees_interpreted() -> Iterator[None]:
    """Let @triton.jit helpers called by the kernel run under the interpreter too.

    Under TRITON_INTERPRET=1 Triton makes every @triton.jit an InterpretedFunction;
    here kernels were decorated normally, so JITFunction.__call__ is routed to an
    InterpretedFunction for the duration of the launch, and the language objects a
    helper sees are patched for it as they are for the kernel. Triton's own restore
    runs per patch scope, and scopes nest (a helper's scope records the kernel's
    patches as its "originals"), so the language is put back from a snapshot taken
    before the launch instead: nothing the interpreter patched survives it.
    """
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction, _patch_lang
    from triton.runtime.jit import JITFunction

    patched = (tl, tl.core, tl.tensor, tl.math, tl.core.tensor_descriptor_base)
    saved = [dict(vars(obj)) for obj in patched]
    original = JITFunction.__call__
    cache: dict[int, Any] = {}

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        fn = cache.get(id(self))
        if fn is None:
            _patch_lang(self.fn)  # undone with everything else after the launch
            fn = cache[id(self)] = InterpretedFunction(self.fn).rewrite()
        return fn(*args, **kwargs)

    JITFunction.__call__ = call
    try:
        yield
    finally:
        JITFunction.__call__ = original
        for obj, before in zip(patched, saved):
            now = vars(obj)
            for name in [k for k in now if k not in before]:
                delattr(obj, name)
            for name, value in before.items():
                if now.get(name, _MISSING) is not value:
                    setattr(obj, name, value)


_MISSING = object()


@contextlib.contextmanager
def _scalar_args() -> Iterator[None]:
    """Pass Python bools and floats, alone or inside tuples, to the kernel as the int1 and
    fp32 scalars a compiled kernel receives.

    Triton 3.6's interpreter takes a bool for an int (``isinstance(True, int)``), types
    it int1 and stores it in an int32 array, which its own ``TensorHandle`` refuses
    ("numpy data itemsize (32 bits) exceeds dtype primitive_bitwidth (1 bits)"). It
    passes a float on as a Python float, which the kernel's code then takes for a
    constant: ``tl.full`` makes a constant 0 of ``-0.0`` (``x * -0.0`` lost its sign, and
    ``1 / (x * -0.0)`` its infinity's), and a constant is weakly typed where the compiled
    kernel's fp32 argument promotes (``x_fp16 * v`` is fp32 there). Its argument converter
    is wrapped for the launch (it recurses into tuples through the module global, so tuple
    elements are converted too) and put back afterwards.
    """
    import numpy as np
    import triton.language as tl
    import triton.runtime.interpreter as interp

    original = getattr(interp, "_implicit_cvt", None)
    if original is None:  # a Triton that converts arguments some other way
        yield
        return

    def convert(arg: Any) -> Any:
        if isinstance(arg, bool):
            return tl.tensor(interp.TensorHandle(np.array([arg], dtype=np.bool_), tl.int1), tl.int1)
        if isinstance(arg, float):  # as the compiled kernel's fp32 argument
            return _float_arg(arg)
        return original(arg)

    interp._implicit_cvt = convert
    try:
        yield
    finally:
        interp._implicit_cvt = original


class InterpreterBackend:
    """Hook implementations of the interpreter backend."""

    @hookimpl
    def backend_info(self) -> BackendInfo:
        return BackendInfo(
            name="interpreter", priority=-100, triton_backend="interpreter", binary_ext="",
            warp_size=1, dispatch_key="CPU", device_type="cpu",
            description="Triton's interpreter on CPU tensors (built in)",
        )

    @hookimpl
    def availability(self) -> tuple[bool, str]:
        try:
            import triton.runtime.interpreter  # noqa: F401
        except Exception as exc:  # pragma: no cover - triton is a dependency
            return False, f"triton.runtime.interpreter failed to import: {exc}"
        return True, "always available (runs on the CPU)"

    @hookimpl
    def device_count(self) -> int:
        return 1

    @hookimpl
    def current_device(self) -> int:
        return 0

    @hookimpl
    def device_of(self, tensor: Any) -> int:
        return 0

    @hookimpl
    def current_stream(self, device: int) -> int:
        return 0

    @hookimpl
    def device_guard(self, device: int) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    @hookimpl
    def compile_target(self, device: int | None, arch: str | None) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("interpreter", arch or "cpu", 1)

    @hookimpl
    def compile(self, src: Any, target: Any, options: dict) -> CompiledVariant:
        # constant parameters; a tuple's constant elements (longer paths) travel in the tuple itself
        constants = {k[0]: v for k, v in src.constants.items() if len(k) == 1}
        nparams = len(src.fn.params)
        artifact = _Artifact(src.fn, nparams, constants, dict(src.signature))
        return CompiledVariant(
            name=src.fn.fn.__name__, signature="", target=target, binary=None,
            metadata={"name": src.fn.fn.__name__, "num_warps": options.get("num_warps", 4),
                      "num_stages": options.get("num_stages", 3), "shared": 0,
                      "constants": constants},
            hash="", artifact=artifact,
        )

    @hookimpl
    def load(self, kernel: CompiledVariant, device: int) -> Any:
        return kernel.artifact

    @hookimpl
    def prepare(self, kernel: CompiledVariant, handle: Any, device: int) -> Any:
        return handle

    @hookimpl
    def pack_args(self, state: Any, args: Sequence[Any]) -> list[Any]:
        if len(args) != len(state.runtime_index):
            raise ArgumentError(state.jit_fn.fn.__name__, f"expected {len(state.runtime_index)} runtime "
                                f"arguments, got {len(args)}")
        full: list[Any] = [None] * state.nparams
        for i, v in state.constants.items():
            full[i] = v
        for i, a in zip(state.runtime_index, args):
            full[i] = a
        for i, t in state.float_types.items():
            if isinstance(full[i], float):
                full[i] = _float_arg(full[i], t)
        return full

    @hookimpl
    def launch(self, state: Any, grid: tuple[int, int, int], stream: int, packed: Any) -> None:
        import numpy as np  # here, not at the top: discovery imports this module in every process

        _patch_interpreter()
        # numpy's floating-point warnings off: a GPU computes masked lanes' -inf - -inf
        # or x / 0 silently (IEEE), and so does a kernel here (Triton's interpreter would
        # print "invalid value encountered" for lanes the kernel then discards)
        with language.writing(), _callees_interpreted(), _scalar_args(), np.errstate(all="ignore"):
            state.interp[grid](*packed)


plugin = InterpreterBackend()
