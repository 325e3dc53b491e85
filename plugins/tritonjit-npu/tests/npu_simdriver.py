"""Build the SIMULATED Ascend runtime (sim/ascend_sim.c) with gcc and read its records.

No NPU exists here: this library stands in for libascendcl/libruntime so the
plugin's real load -> prepare -> pack_args -> launch code runs end to end.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from dataclasses import dataclass
from types import SimpleNamespace

SOURCE = os.path.join(os.path.dirname(__file__), "sim", "ascend_sim.c")


class _Event(ctypes.Structure):
    _fields_ = [("call", ctypes.c_char * 32), ("a", ctypes.c_uint64 * 6), ("name", ctypes.c_char * 128),
                ("nbytes", ctypes.c_uint32), ("bytes", ctypes.c_ubyte * 1024)]


@dataclass
class Event:
    call: str
    a: tuple[int, ...]
    name: str
    data: bytes

    @property
    def rc(self) -> int:
        return self.a[5]


class SimAscend:
    """ctypes view of the simulated runtime's control functions."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lib = lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        lib.sim_event_at.restype = ctypes.POINTER(_Event)
        lib.sim_event_at.argtypes = [ctypes.c_int]
        lib.sim_last_mismatch.restype = ctypes.c_int64
        lib.sim_expect_args.argtypes = [ctypes.c_char_p, ctypes.c_int64]
        lib.sim_fail_next.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.aclrtSynchronizeStream.argtypes = [ctypes.c_void_p]

    def reset(self) -> None:
        self.lib.sim_reset()

    def events(self, call: str | None = None) -> list[Event]:
        out = []
        for i in range(self.lib.sim_event_count()):
            e = self.lib.sim_event_at(i).contents
            ev = Event(e.call.decode(), tuple(e.a), e.name.decode(), bytes(e.bytes[: e.nbytes]))
            if call is None or ev.call == call:
                out.append(ev)
        return out

    def expect_args(self, data: bytes | None) -> None:
        self.lib.sim_expect_args(data, -1 if data is None else len(data))

    def fail_next(self, call: str, code: int) -> None:
        self.lib.sim_fail_next(call.encode(), code)

    def synchronize(self, stream: int = 0) -> None:
        self.lib.aclrtSynchronizeStream(stream or None)

    @property
    def live_allocations(self) -> int:
        return self.lib.sim_live_allocations()

    @property
    def pending_callbacks(self) -> int:
        return self.lib.sim_pending_callbacks()

    @property
    def last_mismatch(self) -> int:
        return self.lib.sim_last_mismatch()


def build(outdir: str) -> str:
    out = os.path.join(outdir, "libascend_sim.so")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wall", "-o", out, SOURCE, "-lpthread"], check=True)
    return out


def build_kernel_elf(outdir: str, *names: str) -> bytes:
    """A real ELF object defining the given kernel symbols: the stand-in for a
    Triton-Ascend .npubin (also an ELF), which no compiler here can produce."""
    src = os.path.join(outdir, "kernels.c")
    obj = os.path.join(outdir, "kernels.o")
    with open(src, "w") as f:
        f.write("".join(f"void {n}(void) {{}}\n" for n in names))
    subprocess.run(["gcc", "-c", "-o", obj, src], check=True)
    with open(obj, "rb") as f:
        return f.read()


class SimTensor:
    """A tensor living in the simulated NPU's memory: what the binder and pack_args see
    of a torch_npu tensor (dtype, data_ptr(), device). Its storage is a CPU tensor."""

    def __init__(self, n: int, dtype: object = None, index: int = 0, offset: int = 0) -> None:
        import torch

        self.dtype = dtype or torch.float32
        self._host = torch.zeros(n + 64, dtype=self.dtype)
        self._offset = offset
        self.device = SimpleNamespace(type="npu", index=index)

    def data_ptr(self) -> int:
        return self._host.data_ptr() + self._offset
