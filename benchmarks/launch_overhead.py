"""Per-call launch cost of tritonjit against the driver floor, measured in one run.

Kernels with 0, 4, 8, 16, 19 and 58 runtime arguments and a mixed one (fp16, bf16 and
fp32 pointers; float, int, bool and None scalars; a constexpr), all in
launch_kernels.py. For each kernel, rows:

- the floor: a C loop of ``cuLaunchKernel`` on Triton's cubin of that kernel, with
  exactly that kernel's device parameters (launch_floor_cuda.c, built here at run
  time and called in this process; the parameters are packed once from Triton's
  signature of the compiled kernel and the call's own arguments, and their number
  and sizes are checked against the driver's ``cuFuncGetParamInfo``); beside it, the
  same loop handing the parameters over as one buffer at the driver's offsets
  (cuLaunchKernel's ``extra``), which is how tritonjit's CUDA launcher passes them
  where the driver agrees with its layout: a diag row, since the issue's floor is the
  pointer-per-parameter call Triton's own launcher makes;
- tritonjit ``f[grid](...)`` and its bound launcher (``f.bind``), with
  ``f = tritonjit.function("launch_kernels.py", name)``;
- tritonjit from C++: a C++ extension built here at run time against
  ``tritonjit.get_include()`` whose loop calls ``tritonjit::Function`` (got once
  with ``get_instance(path, name)``, the same runtime object as ``f``) N times as
  ``f(stream, 1, 1, 1, 4, 3, args...)`` with at::Tensor and scalar arguments, the GIL
  released, the stream passed explicitly (libtriton_jit's call);
- Triton's ``kernel[grid](...)`` and its ``CompiledKernel.run``;
- "Python's call alone": the same call of a C function that does nothing
  (``_dispatch.call_floor``), what the interpreter spends before any callee runs (past
  30 arguments CPython builds a tuple and a dict for the call); a line after the
  table gives ``f[grid]`` less it, as a multiple of the floor;
- "the floor called from Python": the same call of a C callable that makes the floor's
  one ``cuLaunchKernel`` and nothing else (``floor_python`` in launch_floor_cuda.c), in
  the same Python loop as ``f[grid]``: the least any launcher called from Python can
  cost on this host. A line after the table gives it as a multiple of the C floor, and
  ``f[grid]`` as a multiple of it.

Each path: N calls back to back, one synchronize, microseconds per call and the
multiple of that kernel's floor; the paths are timed in R interleaved rounds and
each keeps its best. Every path launches on the same non-blocking stream (torch's
current stream is set to it). The 4-argument kernel also gets "diag:" rows that split
tritonjit's cost, and ``torch.add(out=)``. After the timing, every launching path of
every kernel is run once more on a zeroed output and the output is checked.

Without a GPU (or with ``--smoke``) it runs a CPU smoke test instead: every kernel is
defined, ``f.signature(...)`` of its arguments must equal the signature Triton's own
binder gives, each kernel runs once through the interpreter and its output is
checked, the floor's parameter packing and the C++ source are generated, and the
floor's C source is compiled (no figures: there is no floor without a GPU).

    python benchmarks/launch_overhead.py [--calls N] [--reps R] [--kernels 0,4,mixed] [--json FILE] [--smoke]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import triton
from _timing import Rounds

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "launch_kernels.py")
KERNEL_KEYS = ("0", "4", "8", "16", "19", "58", "mixed", "tuple")
FLOOR = "floor"
FLOOR_BUF = "diag: the floor with the parameters in one buffer (cuLaunchKernel's extra)"
FGRID, BOUND, CPP = "tritonjit f[grid]", "tritonjit bound", "tritonjit C++"
FGRID_STREAM = "diag: f[grid](..., stream=) (the stream given, as the C++ row gives it)"
TRITON_GRID, TRITON_RUN = "triton kernel[grid]", "triton CompiledKernel.run"
FGRID_STAR = "diag: f[grid](*args), the arguments in one tuple (tritonbench's call form)"
FGRID_TJ_ARGS = "diag: f[grid], the launcher packing tj_args (no packed layout: as before the twenty-first session)"
TRITON_STAR = "diag: triton kernel[grid](*args), the same"
FALLBACKS = "diag: python fallbacks"
PYCALL = "diag: Python's call alone (a C no-op, same arguments)"
PYFLOOR = "diag: the floor called from Python (a C callable that makes the floor's launch, same arguments)"
#: the floor called from Python plus one of a launcher's steps (launch_floor_cuda.c's PF_* bits)
PYFLOOR_STEPS = {
    1: "diag: the floor from Python + the context check (cuCtxGetCurrent)",
    2: "diag: the floor from Python + the GIL test (the thread-state walk)",
    4: "diag: the floor from Python + the tensor arguments read (tritonjit's reader)",
    8: "diag: the floor from Python + torch's current stream (the reader's)",
    16: "diag: the floor from Python + one parameter buffer (extra)",
    31: "diag: the floor from Python + all five",
}
#: the issue's targets, as multiples of each kernel's own floor
TARGETS = {FGRID: 1.10, BOUND: 1.10, CPP: 1.05}
ANCHOR = ("anchor, not measured here (facebookexperimental/triton PR 1445, a B200): a C dispatcher in a Triton "
          "fork 3.4 / 4.8 / 6.4 us at 0 / 19 / 58 arguments, Triton's own 11.2 / 17.0 / 27.5 us. tritonbench's "
          "launch_latency kernel of 19 parameters passes 5 constexprs and 9 ints equal to 1, which Triton turns "
          "into constants; here every argument a kernel's name counts is a runtime argument")


# ---- the kernels' arguments -------------------------------------------------------------------------
@dataclass
class Case:
    """One kernel of the benchmark and the arguments of its call."""

    key: str  # "0", "4", ..., "mixed"
    kernel: str  # its name in launch_kernels.py
    args: tuple  # the runtime arguments, in the kernel's parameter order
    constexprs: dict = field(default_factory=dict)  # the trailing tl.constexpr parameters, by keyword
    out: Any = None  # the tensor the kernel writes (None: it writes nothing)
    expected: Callable[[], Any] | None = None  # what ``out`` must hold after one launch
    title: str | None = None  # the label, where "N args" does not say it

    @property
    def label(self) -> str:
        if self.title:
            return self.title
        return f"{self.key} args" if self.key.isdigit() else f"{self.key} ({len(self.args)} args)"

    @property
    def has_tuples(self) -> bool:
        """The C++ rows pass no tuples natively (tritonjit::Function sends them through Python)."""
        return any(type(a) is tuple for a in self.args)

    @property
    def full_args(self) -> tuple:
        """Every parameter's value in order (the constexprs come last in these kernels)."""
        return (*self.args, *self.constexprs.values())


def make_cases(device: str, keys: tuple[str, ...] = KERNEL_KEYS, n: int = 1024) -> dict[str, Case]:
    """The benchmark's calls, on ``device``. No integer argument equals 1 (Triton would
    make it a constant); the float arguments are multiples of 1/4, so their sums are exact."""
    import torch

    g = torch.Generator().manual_seed(0)

    def rand(dtype: Any = torch.float32) -> Any:
        return torch.randn(n, generator=g).to(device=device, dtype=dtype)

    xs = [rand() for _ in range(7)]
    out = torch.empty(n, device=device)
    blk = {"BLOCK": n}
    cases = {}
    cases["0"] = Case("0", "args0", ())
    cases["4"] = Case("4", "args4", (xs[0], xs[1], out, n), blk, out, lambda: xs[0] + xs[1])
    cases["8"] = Case("8", "args8", (*xs[:4], out, n, 3, 5), blk, out, lambda: sum(xs[:4]) + 8)
    cases["16"] = Case("16", "args16", (*xs[:7], out, n, 2, 3, 4, 5, 6, 7, 8), blk, out, lambda: sum(xs[:7]) + 35)
    ints19 = tuple(range(2, 15))
    cases["19"] = Case("19", "args19", (*xs[:4], out, n, *ints19), blk, out, lambda: sum(xs[:4]) + sum(ints19))
    ints58, floats58 = tuple(range(2, 27)), tuple(0.25 * k for k in range(1, 25))
    cases["58"] = Case("58", "args58", (*xs[:7], out, n, *ints58, *floats58), blk, out,
                       lambda: sum(xs[:7]) + (sum(ints58) + sum(floats58)))
    xh, xb = rand(torch.float16), rand(torch.bfloat16)
    alpha, k, big, flag = 0.5, 3, 3 << 32, True
    cases["mixed"] = Case("mixed", "mixed", (xh, xb, xs[0], out, None, n, alpha, k, big, flag), blk, out,
                          lambda: xh.float() * alpha + xb.float() + xs[0] + float(big >> 32) + (k if flag else 0))
    cases["tuple"] = Case("tuple", "tuples", ((xs[0], xs[1]), out, n, (0.5, 3)), blk, out,
                          lambda: xs[0] * 0.5 + xs[1] + 3, title="tuples (4 args, 6 leaves)")
    for c in cases.values():
        assert not c.key.isdigit() or len(c.args) == int(c.key), c.key
    return {key: cases[key] for key in keys}


def check_output(case: Case) -> str:
    """"ok" where ``case.out`` holds what one launch must write; AssertionError otherwise."""
    import torch

    if case.out is None:
        return "ok (ran; writes nothing)"
    torch.testing.assert_close(case.out, case.expected(), msg=lambda m: f"{case.kernel}: {m}")
    return "ok"


# ---- Triton's own binder: the reference signature ----------------------------------------------------
def triton_binder(jit_fn: Any, target: Any) -> Callable[..., Any]:
    """The binder Triton builds for ``jit_fn[grid](...)`` (tests/core/_triton_reference.py
    adapts it to more Triton versions)."""
    import inspect

    from triton.runtime.jit import create_function_from_signature

    backend = triton.compiler.make_backend(target)
    known = {"sig": jit_fn.signature, "kparams": jit_fn.params, "backend": backend}
    return create_function_from_signature(**{k: known[k] for k in inspect.signature(create_function_from_signature).parameters
                                             if k in known})


def triton_types(jit_fn: Any, target: Any, args: tuple, kwargs: dict) -> tuple[list[str], str]:
    """Triton's type of each parameter ("constexpr" for a constant) and the signature
    string, in libtriton_jit's format, that Triton's specialization of the call gives."""
    _, spec, _ = triton_binder(jit_fn, target)(*args, **kwargs)

    def token(ty: Any, attr: Any) -> str:
        if isinstance(ty, tuple):  # a tuple argument: its elements' (type, attribute) pairs
            return "(" + ",".join(token(t, a) for t, a in zip(ty, attr, strict=True)) + ")"
        if ty == "constexpr":  # None, or an int equal to 1
            return "nullopt" if attr is None else f"i32:{attr}"
        return ty + (":16" if isinstance(attr, str) and "D" in attr else "")

    types, tokens = [], []
    for kp, (ty, attr) in zip(jit_fn.params, spec):
        types.append(ty)
        tokens.append((repr(attr) if isinstance(attr, str) else str(attr)) if kp.is_constexpr else token(ty, attr))
    return types, ",".join(tokens)


# ---- the floor: one C cuLaunchKernel loop per kernel -------------------------------------------------
_SCALAR_SIZES = {"i1": 1, "u1": 1, "i8": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4, "u32": 4, "i64": 8, "u64": 8,
                 "fp32": 4, "f32": 4, "fp64": 8}
_SCRATCH = ("global_scratch_size", "profile_scratch_size")  # Triton appends one pointer for each it knows


def _meta(metadata: Any, name: str) -> Any:
    return metadata.get(name) if isinstance(metadata, dict) else getattr(metadata, name, None)


def floor_params(types: list[str], values: tuple, metadata: Any) -> list[tuple[int, int]]:
    """(value, size in bytes) of each device parameter of the compiled kernel, in order,
    as Triton's launcher packs them: pointers as 8-byte addresses, ints in their width,
    floats as their IEEE bits (Python floats are fp32 arguments), then the null scratch
    pointers. Constants (constexprs, None, ints equal to 1) are no parameter; a tuple
    argument is its elements, depth first (Triton's type of it is a tuple of theirs)."""
    def leaves(ts: Any, vs: Any) -> list[tuple[str, Any]]:
        if isinstance(ts, (tuple, list)):
            return [leaf for t, v in zip(ts, vs, strict=True) for leaf in leaves(t, v)]
        return [(ts, vs)]

    out = []
    for ty, v in leaves(types, values):
        if ty == "constexpr":
            continue
        if ty.startswith("*"):
            out.append((v.data_ptr() if hasattr(v, "data_ptr") else int(v), 8))
            continue
        if ty not in _SCALAR_SIZES:
            raise ValueError(f"the floor does not pack a {ty} argument")
        size = _SCALAR_SIZES[ty]
        if ty.startswith("f"):
            bits = int.from_bytes(struct.pack("<f" if size == 4 else "<d", v), "little")
        else:
            bits = int(v) & ((1 << 8 * size) - 1)
        out.append((bits, size))
    for name in _SCRATCH:
        size = _meta(metadata, name)
        if size is None:
            continue
        if size:
            raise ValueError(f"the kernel needs {name.split('_size')[0]} memory ({size} bytes), which the floor "
                             "does not allocate")
        out.append((0, 8))
    return out


def build_floor(tmp: str) -> Any:
    """launch_floor_cuda.c as a shared library (Triton's bundled cuda.h, the system
    libcuda), loaded into this process; None where it cannot be built."""
    from triton.backends.nvidia import driver as nv

    lib = os.path.join(tmp, "launch_floor.so")
    inc = os.path.join(os.path.dirname(nv.__file__), "include")
    libs = [f"-L{d}" for d in nv.libcuda_dirs()]
    cmd = ["gcc", "-O2", "-shared", "-fPIC", os.path.join(HERE, "launch_floor_cuda.c"), "-I", inc,
           "-I", sysconfig.get_paths()["include"], *libs, "-lcuda", "-ldl", "-o", lib]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print("floor: gcc failed:", p.stderr[-2000:], file=sys.stderr)
        return None
    return load_floor(lib)


def load_floor(lib: str) -> Any:
    """The built floor library, its functions typed for ctypes."""
    so = ctypes.CDLL(lib)
    so.floor_setup.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint,
                               ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_ulonglong),
                               ctypes.POINTER(ctypes.c_uint)]
    so.floor_param_sizes.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_uint)]
    so.floor_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    so.floor_run.restype = ctypes.c_double
    so.floor_run_buffer.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    so.floor_run_buffer.restype = ctypes.c_double
    so.floor_free.argtypes = [ctypes.c_void_p]
    # floor_python makes a Python object: called through PyDLL, which keeps the GIL
    so.python = ctypes.PyDLL(lib)
    so.python.floor_python.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    so.python.floor_python.restype = ctypes.py_object
    return so


def tensor_reader_pointer() -> int | None:
    """The address of tritonjit's tensor reader (tritonjit_tensor.h), or None without one."""
    from tritonjit import _native

    cap = _native.dispatch.tensor_reader() if _native.dispatch is not None else None
    if cap is None:
        return None
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get(cap, b"tritonjit.tensor_reader.v1")


def floor_path(so: Any, ck: Any, params: list[tuple[int, int]], stream: int) -> tuple[Callable[[int], float] | None, str]:
    """The C loop of cuLaunchKernel on ``ck``'s cubin with ``params``, on ``stream``, and
    what the driver says of the packing (None and the reason where it cannot run)."""
    n = len(params)
    values = (ctypes.c_ulonglong * max(n, 1))(*(v for v, _ in params))
    sizes = (ctypes.c_uint * max(n, 1))(*(s for _, s in params))
    handle = ctypes.c_void_p()
    image = ck.asm["cubin"]
    rc = so.floor_setup(ctypes.byref(handle), image, ck.name.encode(), ck.metadata.shared, ck.metadata.num_warps, n,
                        values, sizes)
    if rc != 0:
        return None, f"setup failed with CUresult {rc}"
    got = (ctypes.c_uint * 256)()
    count = so.floor_param_sizes(handle, 256, got)
    mine = [s for _, s in params]
    if count < 0:
        note = f"{n} parameters packed (the driver has no cuFuncGetParamInfo to check them)"
    elif count != n or list(got[:n]) != mine:
        so.floor_free(handle)
        return None, f"packed sizes {mine} but the driver says {list(got[:min(count, 256)])}"
    else:
        note = f"{n} parameters, sizes {mine} as cuFuncGetParamInfo reports"

    def run_with(fn: Any) -> Callable[[int], float]:
        def timed(iters: int) -> float:
            us = fn(handle, stream, iters)
            if us <= -1e9:
                raise RuntimeError("floor: the driver gives no parameter offsets (cuFuncGetParamInfo)")
            if us < 0:
                raise RuntimeError(f"floor: cuLaunchKernel failed with CUresult {-us:.0f}")
            return us
        return timed

    timed = run_with(so.floor_run)
    timed.handle = handle  # type: ignore[attr-defined]  # kept alive with the closure
    timed.buffer = run_with(so.floor_run_buffer) if count == n else None  # type: ignore[attr-defined]
    # the floor called from Python, through the slot CPython's call of these arguments takes
    timed.python = so.python.floor_python(handle, stream, 0, 0, None)  # type: ignore[attr-defined]
    timed.python_ex = so.python.floor_python(handle, stream, 1, 0, None)  # type: ignore[attr-defined]
    # the same with a launcher's steps added (PF_* bits; see PYFLOOR_STEPS)
    reader = tensor_reader_pointer()
    timed.python_steps = lambda steps: so.python.floor_python(  # type: ignore[attr-defined]
        handle, stream, 0, steps, reader)
    return timed, note


# ---- the C++ path: a generated extension over tritonjit::Function ----------------------------------
CPP_MODULE = "tritonjit_launch_bench"


def cpp_split(case: Case) -> tuple[list, list, list, list]:
    """The call's arguments by C++ kind: tensors, ints, floats, bools (None has no value)."""
    t, i, f, b = [], [], [], []
    for a in case.args:
        if a is None:
            continue
        if isinstance(a, bool):
            b.append(int(a))
        elif isinstance(a, int):
            i.append(a)
        elif isinstance(a, float):
            f.append(a)
        else:
            t.append(a)
    return t, i, f, b


def cpp_source(cases: dict[str, Case]) -> str:
    """One function per kernel: its arguments as C++ locals (at::Tensor, int64_t, double,
    bool, an empty std::optional<at::Tensor> for None, the constexprs as literals),
    then a loop of ``f(stream, 1, 1, 1, 4, 3, args...)`` without the GIL."""
    lines = ["// generated by benchmarks/launch_overhead.py: the C++ rows of the launch benchmark",
             "#include <torch/extension.h>", "#include <pybind11/stl.h>", "#include <tritonjit/function.h>", "",
             "#ifndef TORCH_EXTENSION_NAME", f"#define TORCH_EXTENSION_NAME {CPP_MODULE}", "#endif", "",
             "namespace {", ""]
    for c in cases.values():
        decls, names = [], []
        nt = ni = nf = nb = 0
        for k, a in enumerate(c.args):
            v = f"a{k}"
            if a is None:
                decls.append(f"  const std::optional<at::Tensor> {v};  // None")
            elif isinstance(a, bool):
                decls.append(f"  const bool {v} = B.at({nb}) != 0;")
                nb += 1
            elif isinstance(a, int):
                decls.append(f"  const int64_t {v} = I.at({ni});")
                ni += 1
            elif isinstance(a, float):
                decls.append(f"  const double {v} = F.at({nf});")
                nf += 1
            else:
                decls.append(f"  const at::Tensor {v} = T.at({nt});")
                nt += 1
            names.append(v)
        names += [str(int(v)) for v in c.constexprs.values()]  # constexprs by value, as the call writes them
        call = ", ".join(["stream", "1", "1", "1", "4", "3", *names])
        lines += [
            f"// {c.kernel}: {c.label}",
            f"void run_{c.kernel}(const std::string& path, int64_t iters, uint64_t stream, const std::vector<at::Tensor>& T,",
            "                const std::vector<int64_t>& I, const std::vector<double>& F, const std::vector<int64_t>& B) {",
            f'  auto& f = tritonjit::Function::get_instance(path, "{c.kernel}");',
            *decls,
            "  (void)T; (void)I; (void)F; (void)B;",
            "  pybind11::gil_scoped_release nogil;  // a hit stays in C++",
            f"  for (int64_t it = 0; it < iters; it++) f({call});",
            "}", ""]
    lines += ["}  // namespace", "", "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {"]
    lines += [f'  m.def("run_{c.kernel}", &run_{c.kernel});' for c in cases.values()]
    lines += ["}", ""]
    return "\n".join(lines)


def build_cpp(cases: dict[str, Case], build_dir: str | None = None) -> Any:
    """The C++ extension of ``cases`` (cpp_source), built once: with
    torch.utils.cpp_extension.load where ninja is installed, else with tritonjit's own
    one-command builder (tritonjit._native.torch_build, cached by content)."""
    import tritonjit
    from torch.utils import cpp_extension

    build_dir = build_dir or os.path.join(tempfile.gettempdir(), f"{CPP_MODULE}-{os.getuid()}")
    os.makedirs(build_dir, exist_ok=True)
    src = os.path.join(build_dir, f"{CPP_MODULE}.cpp")
    text = cpp_source(cases)
    if not os.path.exists(src) or open(src).read() != text:
        with open(src, "w") as fh:
            fh.write(text)
    inc = tritonjit.get_include()
    if cpp_extension.is_ninja_available():
        return cpp_extension.load(CPP_MODULE, [src], build_directory=build_dir, extra_include_paths=[inc],
                                  extra_cflags=["-O2"], verbose=False)
    from tritonjit._native import torch_build

    headers = [os.path.join(inc, "tritonjit", "function.h"), os.path.join(os.path.dirname(inc), "_native",
                                                                           "tritonjit_launch.h")]
    return torch_build.load(CPP_MODULE, src, headers, [inc])


class Background:
    """A call on a thread (the C++ build runs while the kernels compile)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.value: Any = None
        self.error: BaseException | None = None
        self.t0 = time.perf_counter()
        self.seconds = 0.0
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.value = fn()
        except BaseException as exc:  # reported by result()
            self.error = exc
        self.seconds = time.perf_counter() - self.t0

    def result(self) -> Any:
        self._thread.join()
        return self.value


def cpp_call(ext: Any, case: Case, stream: int) -> Callable[[int], None]:
    fn = getattr(ext, f"run_{case.kernel}")
    t, i, f, b = cpp_split(case)
    return lambda iters: fn(KERNELS, iters, stream, t, i, f, b)


# ---- measuring -----------------------------------------------------------------------------------------
@dataclass
class Prepared:
    case: Case
    f: Any  # tritonjit.KernelFunction
    rounds: Rounds
    launching: list[str]  # the paths that launch the kernel (checked after the timing)
    notes: dict[str, str]


def runtime_without_packed_layouts(kernel: Any, grid: tuple, args: tuple, cx: dict) -> Any:
    """A second runtime object of ``kernel`` whose launchers take tj_args only (the CUDA
    plugin's packed_layouts off while its variant loads): f[grid] as it launched before the
    dispatcher packed the parameters while keying them. None where the plugin has no switch."""
    import tritonjit

    try:
        from tritonjit_cuda._backend import _driver
    except ImportError:
        return None
    if _driver is None or not hasattr(_driver, "packed_layouts"):
        return None
    was = _driver.packed_layouts(False)
    try:
        g = tritonjit.KernelFunction(kernel)
        g[grid](*args, **cx)
    finally:
        _driver.packed_layouts(was)
    return g


def prepare(case: Case, so: Any, stream: int, target: Any, calls: int, reps: int, sync: Callable[[], None]) -> Prepared:
    """Compile the kernel for every path (one launch each) and set up its rounds."""
    import tritonjit
    from tritonjit import _native

    grid = (1,)
    f = tritonjit.function(KERNELS, case.kernel)
    kernel = f.wrapped  # the @triton.jit function itself
    args, cx = case.args, case.constexprs
    notes: dict[str, str] = {}
    types, triton_sig = triton_types(kernel, target, args, cx)
    ours = f.signature(*args, **cx)
    notes["signature"] = ours if ours == triton_sig else f"MISMATCH: tritonjit {ours}, Triton {triton_sig}"
    ck = kernel[grid](*args, **cx)
    f[grid](*args, **cx)
    bound = f.bind(grid, *args, **cx)
    rounds = Rounds(calls, reps, sync)
    launching: list[str] = []
    if so is not None:
        try:
            params = floor_params(list(ck.src.signature.values()), case.full_args, ck.metadata)
            floor, notes["floor"] = floor_path(so, ck, params, stream)
        except ValueError as exc:
            floor, notes["floor"] = None, str(exc)
        if floor is not None:
            rounds.add_timed(FLOOR, floor)
            launching.append(FLOOR)
            if floor.buffer is not None and params:
                rounds.add_timed(FLOOR_BUF, floor.buffer)
                launching.append(FLOOR_BUF)
    else:
        notes["floor"] = "not built"
    # the calls are written out (no *args), as user code writes them, and the arguments
    # are local variables, as in an operator's wrapper function
    run, fh, meta = ck.run, ck.function, ck.packed_metadata
    ns: dict[str, Any] = {f"a{i}": a for i, a in enumerate(args)}
    ns.update(f=f, grid=grid, bound=bound, kernel=kernel, run=run, stream=stream, fh=fh, meta=meta)
    names = [f"a{i}" for i in range(len(args))]
    kw = [f"{k}={v!r}" for k, v in cx.items()]
    consts = [repr(v) for v in cx.values()]

    def call(src: str) -> Callable[[], Any]:
        local = ", ".join(f"{k}={k}" for k in ns if k in src)
        return eval(f"lambda {local}: {src}", ns)  # noqa: S307 - our own source text

    def add(name: str, src: str) -> None:
        rounds.add(name, call(src))
        launching.append(name)

    add(FGRID, f"f[grid]({', '.join(names + kw)})")
    unpacked = runtime_without_packed_layouts(kernel, grid, args, cx)
    if unpacked is not None:  # the same launch before the dispatcher packed while keying (a second runtime object)
        ns["g"] = unpacked
        add(FGRID_TJ_ARGS, f"g[grid]({', '.join(names + kw)})")
    if case.key in ("4", "58"):  # less the current stream's lookup (torch's, in C): what it costs
        add(FGRID_STREAM, f"f[grid]({', '.join(names + kw + ['stream=stream'])})")
    add(BOUND, f"bound({', '.join(names)})")
    if case.key == "58":
        # tritonbench's call form (its 58-argument row): every argument in one tuple, which a
        # call site passes on as it is; written out, a call site of more than 30 arguments builds
        # a list and then a tuple of them first (see PYCALL)
        ns["full"] = case.full_args
        add(FGRID_STAR, "f[grid](*full)")
    if floor is not None:
        # the least any launcher called from Python costs: Python's call of these arguments
        # and the floor's own cuLaunchKernel, nothing else
        big = len(names) + 2 * len(kw) > 30  # compiled to CALL_FUNCTION_EX: a tuple and a dict
        ns["pyfloor"] = floor.python_ex if big else floor.python  # type: ignore[attr-defined]
        add(PYFLOOR, f"pyfloor({', '.join(names + kw)})")
        if case.key in ("4", "19"):  # what each of a launcher's steps adds to it
            for bits, label in PYFLOOR_STEPS.items():
                ns[f"pyfloor{bits}"] = floor.python_steps(bits)  # type: ignore[attr-defined]
                add(label, f"pyfloor{bits}({', '.join(names + kw)})")
    if _native.dispatch is not None and hasattr(_native.dispatch, "call_floor"):
        # what the interpreter's call costs before any callee runs (past 30 arguments it
        # builds a tuple and a dict): the part of f[grid]'s cost no Python callee avoids
        ns["noop"] = _native.dispatch.call_floor
        rounds.add(PYCALL, call(f"noop({', '.join(names + kw)})"))
    rounds.paths[CPP] = None  # type: ignore[assignment]  # set once the extension is built: keeps the row order
    add(TRITON_GRID, f"kernel[grid]({', '.join(names + kw)})")
    add(TRITON_RUN, f"run({', '.join(['1, 1, 1, stream, fh, meta, None, None, None', *names, *consts])})")
    if case.key == "58":
        add(TRITON_STAR, "kernel[grid](*full)")
    if case.key == "4":
        dispatch = _native.dispatch
        if f._dispatcher is not None:
            ns["key"] = f._dispatcher.key
            rounds.add("diag: native key only", call(f"key({', '.join(names + kw)})"))
            reader = dispatch.tensor_reader()
            if reader is not None:
                fgrid = rounds.paths[FGRID]

                def python_reads(n: int, fgrid: Callable[[int], float] = fgrid, reader: Any = reader) -> float:
                    dispatch.set_tensor_reader(None)
                    try:
                        return fgrid(n)
                    finally:
                        dispatch.set_tensor_reader(reader)

                rounds.add_timed("diag: f[grid], tensors read through Python", python_reads)
                launching.append("diag: f[grid], tensors read through Python")
        (variant,) = (v for v in f.variants() if v.signature == ours)
        launcher, rt, g3 = variant.launcher, variant.runtime_args(case.full_args), (1, 1, 1)
        rounds.add("diag: C launcher call", lambda: launcher(g3, stream, rt))
        launching.append("diag: C launcher call")
        x, y, o = args[0], args[1], args[2]
        import torch

        rounds.add("torch.add(out=)", lambda: torch.add(x, y, out=o))
        launching.append("torch.add(out=)")
    return Prepared(case, f, rounds, launching, notes)


def add_cpp(p: Prepared, ext: Any, stream: int, sync: Callable[[], None]) -> None:
    """The C++ row of ``p``: one call first (the C++ cache's miss), then the timed loop."""
    loop = cpp_call(ext, p.case, stream)
    loop(1)
    sync()

    def timed(n: int) -> float:
        t0 = time.perf_counter()
        loop(n)
        sync()
        return (time.perf_counter() - t0) / n * 1e6

    p.rounds.paths[CPP] = timed
    p.launching.insert(p.launching.index(TRITON_GRID), CPP)


def check_paths(p: Prepared) -> dict[str, str]:
    """Each launching path once, on a zeroed output: what the kernel wrote, checked."""
    out = {}
    for name in p.launching:
        if p.case.out is not None:
            p.case.out.zero_()
        try:
            p.rounds.paths[name](1)
            out[name] = check_output(p.case)
        except Exception as exc:  # reported in the table's check lines
            out[name] = f"FAILED: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
    return out


def measure(cases: dict[str, Case], calls: int, reps: int) -> dict[str, Any]:
    import torch
    import tritonjit
    from tritonjit import _native

    tritonjit.set_backend("cuda")
    t0 = time.perf_counter()
    cpp = Background(lambda: build_cpp({k: c for k, c in cases.items() if not c.has_tuples}))  # 30-60 s, meanwhile
    _native.install_tensor_reader()  # built in the background too; measured in use
    target = triton.runtime.driver.active.get_current_target()
    side = torch.cuda.Stream()  # non-blocking, like the floor's stream
    sync = torch.cuda.synchronize
    res: dict[str, Any] = {"us_per_call": {}, "x_floor": {}, "checks": {}, "notes": {}}
    with tempfile.TemporaryDirectory() as tmp, torch.cuda.stream(side):
        stream = side.cuda_stream
        so = build_floor(tmp)
        prepared = {k: prepare(c, so, stream, target, calls, reps, sync) for k, c in cases.items()}
        compiled = time.perf_counter() - t0
        _native.install_tensor_reader(wait=True)
        ext = cpp.result()
        if ext is None:
            print(f"C++ path: the extension did not build: {cpp.error}", file=sys.stderr)
        for p in prepared.values():
            if ext is not None and not p.case.has_tuples:
                add_cpp(p, ext, stream, sync)
            else:
                del p.rounds.paths[CPP]
        print(f"setup: kernels compiled for every path in {compiled:.1f} s, C++ extension built in {cpp.seconds:.1f} s",
              file=sys.stderr)
        for key, p in prepared.items():
            row: dict[str, float | None] = dict(p.rounds.run())
            row.setdefault(FLOOR, None)
            if p.f._dispatcher is not None:
                stats = p.f._dispatcher.stats()
                print(f"{p.case.label}: dispatcher calls {stats}", file=sys.stderr)
                row[FALLBACKS] = float(stats["python"])
            res["us_per_call"][key] = row
            floor = row[FLOOR]
            res["x_floor"][key] = {k: (v / floor if floor and v is not None and k != FALLBACKS else None)
                                   for k, v in row.items()}
            res["checks"][key] = check_paths(p)
            res["notes"][key] = p.notes
    res["labels"] = {k: c.label for k, c in cases.items()}
    res["cpp"] = "built" if ext is not None else f"not built: {cpp.error}"
    return res


# ---- output --------------------------------------------------------------------------------------------
def table(res: dict[str, Any]) -> str:
    us, labels = res["us_per_call"], res["labels"]
    keys = list(us)
    paths = sorted(dict.fromkeys(p for r in us.values() for p in r), key=lambda p: p == FALLBACKS)  # that one last
    lines = ["| path | target | " + " | ".join(f"{labels[k]}: us (x floor)" for k in keys) + " |",
             "|" + " --- |" * (2 + len(keys))]
    for p in paths:
        cells = []
        for k in keys:
            v, x = us[k].get(p), res["x_floor"][k].get(p)
            if v is None:
                cells.append("-")
            elif p == FALLBACKS:
                cells.append(f"{v:.0f}")
            else:
                cells.append(f"{v:.2f}" + (f" ({x:.2f}x)" if x is not None else ""))
        name = "C cuLaunchKernel loop (floor)" if p == FLOOR else p
        target = "1.00x" if p == FLOOR else f"<= {TARGETS[p]:.2f}x" if p in TARGETS else ""
        lines.append(f"| {name} | {target} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def verdicts(res: dict[str, Any]) -> list[str]:
    """One line per target: where it is met and where not."""
    out = []
    for path, limit in TARGETS.items():
        met, missed = [], []
        for k, xs in res["x_floor"].items():
            if path not in xs:
                continue  # not measured for this kernel (C++ with tuples)
            x = xs.get(path)
            if x is None:
                missed.append(f"{res['labels'][k]} (no figure)")
            else:
                (met if x <= limit else missed).append(f"{res['labels'][k]} {x:.2f}x")
        out.append(f"target {path} <= {limit:.2f}x the floor: met at {', '.join(met) or 'none'}; "
                   f"missed at {', '.join(missed) or 'none'}")
    return out


def python_share(res: dict[str, Any]) -> str | None:
    """f[grid] less Python's own call of the same arguments, as a multiple of the floor: what
    tritonjit adds on top of what the interpreter spends on any call of a C function."""
    cells = []
    for k, row in res["us_per_call"].items():
        fgrid, pycall, floor = row.get(FGRID), row.get(PYCALL), row.get(FLOOR)
        if fgrid is not None and pycall is not None and floor:
            cells.append(f"{res['labels'][k]} {(fgrid - pycall) / floor:.2f}x")
    if not cells:
        return None
    return "f[grid] less Python's own call of the same arguments (the floor's multiple): " + ", ".join(cells)


def python_floor_share(res: dict[str, Any]) -> str | None:
    """f[grid] against the floor called from Python (PYFLOOR): what tritonjit's launch adds
    to the least a launch from Python can cost, as a multiple of that least."""
    cells = []
    for k, row in res["us_per_call"].items():
        fgrid, pyfloor, floor = row.get(FGRID), row.get(PYFLOOR), row.get(FLOOR)
        if fgrid is not None and pyfloor and floor:
            cells.append(f"{res['labels'][k]} {pyfloor / floor:.2f}x / {fgrid / pyfloor:.2f}x")
    if not cells:
        return None
    return ("the floor called from Python, as a multiple of the C floor / f[grid] as a multiple of it: "
            + ", ".join(cells))


def check_lines(res: dict[str, Any]) -> list[str]:
    out = []
    for k, checks in res["checks"].items():
        bad = {p: c for p, c in checks.items() if not c.startswith("ok")}
        good = [p for p in checks if p not in bad]
        line = f"check {res['labels'][k]}: output of one launch ok on {', '.join(good) or 'no path'}"
        if bad:
            line += "; " + "; ".join(f"{p}: {c}" for p, c in bad.items())
        out.append(line)
        notes = res["notes"][k]
        out.append(f"  signature (tritonjit = Triton's binder): {notes.get('signature')}; floor: {notes.get('floor')}")
    return out


# ---- the CPU smoke test --------------------------------------------------------------------------------
def interpret_once(case: Case, launch: Callable[[tuple], Any]) -> str:
    """``launch(args)`` once through the interpreter, the output checked: "ok..." or
    "FAILED...". Triton's interpreter cannot take a bool argument (it makes an int32
    array of an int1): such a call is made again with each bool passed as an int."""
    def once(args: tuple) -> str:
        if case.out is not None:
            case.out.zero_()
        launch(args)
        return check_output(case)

    try:
        return once(case.args)
    except Exception as exc:
        if any(type(a) is bool for a in case.args) and "int1" in str(exc):
            try:
                return once(tuple(int(a) if type(a) is bool else a for a in case.args)) + \
                    " (bools passed as ints: Triton's interpreter cannot take a bool argument)"
            except Exception as again:
                exc = again
        return f"FAILED: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"


def smoke(keys: tuple[str, ...]) -> dict[str, Any]:
    """No GPU: the kernels, their signatures against Triton's binder, one interpreted
    launch of each, the floor's packing, the C++ source and the floor's C compile.
    Prints a line per kernel; returns what it found ("failed": how many checks failed)."""
    import tritonjit
    from triton.backends.compiler import GPUTarget

    t0 = time.perf_counter()
    tritonjit.set_backend("interpreter")  # Triton's own specialization rules, on CPU tensors
    cases = make_cases("cpu", keys)
    target = GPUTarget("cuda", 90, 32)
    res: dict[str, Any] = {"smoke": True, "kernels": {}, "failed": 0}
    for key, c in cases.items():
        f = tritonjit.function(KERNELS, c.kernel)
        types, theirs = triton_types(f.wrapped, target, c.args, c.constexprs)
        ours = f.signature(*c.args, **c.constexprs)
        params = floor_params(types, c.full_args, {"global_scratch_size": 0, "profile_scratch_size": 0})
        ran = interpret_once(c, lambda args, c=c, f=f: f[(1,)](*args, **c.constexprs))
        ok = ours == theirs and not ran.startswith("FAILED")
        res["failed"] += not ok
        res["kernels"][key] = {"label": c.label, "signature": ours, "triton_signature": theirs, "interpreted": ran,
                               "floor_param_sizes": [s for _, s in params], "ok": ok}
        print(f"{'ok  ' if ok else 'FAIL'} {c.label}: {ours or '(no parameters)'}" +
              ("" if ours == theirs else f" != Triton's {theirs}") +
              f"; interpreted launch {ran}; floor packs {len(params)} parameters ({sum(s for _, s in params)} bytes)")
    plain = {k: c for k, c in cases.items() if not c.has_tuples}
    src = cpp_source(plain)
    print(f"C++ source: {len(src.splitlines())} lines, {len(plain)} loops (built and timed only on a GPU)")
    res["floor_c"] = compile_floor_source()
    res["failed"] += res["floor_c"].startswith("FAILED")
    print(f"floor C source: {res['floor_c']}")
    res["seconds"] = time.perf_counter() - t0
    print(f"smoke test (no figures without a GPU): {'ok' if not res['failed'] else str(res['failed']) + ' FAILED'} in "
          f"{res['seconds']:.1f} s")
    return res


def compile_floor_source() -> str:
    """launch_floor_cuda.c compiled to an object against Triton's cuda.h (no libcuda needed)."""
    try:
        from triton.backends.nvidia import driver as nv
    except ImportError as exc:
        return f"not compiled: Triton's NVIDIA backend is missing ({exc})"
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        return "not compiled: no C compiler here"
    inc = os.path.join(os.path.dirname(nv.__file__), "include")
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([cc, "-O2", "-Wall", "-fPIC", "-c", os.path.join(HERE, "launch_floor_cuda.c"), "-I", inc,
                            "-I", sysconfig.get_paths()["include"], "-o", os.path.join(tmp, "floor.o")],
                           capture_output=True, text=True)
    return "compiles" if p.returncode == 0 else f"FAILED: {p.stderr[-1500:]}"


def gil_line() -> str:
    """Whether the plugin's launches release the GIL around the driver call in this process (they
    do where another Python thread exists, which the floor called from Python never does)."""
    try:
        from tritonjit_cuda._backend import _driver
        releases = "yes" if _driver.launch_releases_gil() else "no"
    except (ImportError, AttributeError):
        releases = "unknown"
    names = [t.name for t in threading.enumerate()]
    return f"launches release the GIL: {releases} (Python threads: {', '.join(names)})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--kernels", default=",".join(KERNEL_KEYS),
                    help=f"comma-separated subset of {','.join(KERNEL_KEYS)} (default: all)")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    ap.add_argument("--smoke", action="store_true", help="the CPU smoke test (automatic without a GPU)")
    a = ap.parse_args(argv)
    keys = tuple(k.strip() for k in a.kernels.split(",") if k.strip())
    unknown = [k for k in keys if k not in KERNEL_KEYS]
    if unknown or not keys:
        ap.error(f"--kernels: unknown {unknown or 'empty'}; choose from {','.join(KERNEL_KEYS)}")
    import torch

    if a.smoke or not torch.cuda.is_available():
        if not a.smoke:
            print("launch_overhead: no CUDA device: the CPU smoke test only")
        res = smoke(keys)
        if a.json:
            with open(a.json, "w") as fh:
                json.dump(res, fh, indent=2)
        return 1 if res["failed"] else 0
    import tritonjit
    from tritonjit import _native
    from tritonjit._native import torch_reader

    t0 = time.perf_counter()
    res = measure(make_cases("cuda", keys), a.calls, a.reps)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
          f"tritonjit {tritonjit.__version__}, native dispatcher: {_native.reason}, "
          f"torch tensor reader: {torch_reader.reason()}; {a.calls} calls, best of {a.reps} interleaved rounds")
    print(gil_line())
    print(table(res))
    shares = [line for line in (python_share(res), python_floor_share(res)) if line]
    for line in verdicts(res) + shares + [ANCHOR] + check_lines(res):
        print(line)
    print(f"total {time.perf_counter() - t0:.0f} s")
    bad = [(k, p) for k, checks in res["checks"].items() for p, c in checks.items() if not c.startswith("ok")]
    bad += [(k, "signature") for k, notes in res["notes"].items() if notes["signature"].startswith("MISMATCH")]
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "triton": triton.__version__, "native": _native.reason,
                       "torch_reader": torch_reader.reason(), "calls": a.calls, "reps": a.reps,
                       "targets": TARGETS, "anchor": ANCHOR, "verdicts": verdicts(res), **res}, fh, indent=2)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
