"""Build and drive the SIMULATED vendor driver that plugin tests run against.

No machine here has the vendors' accelerators. ``simdriver.c`` is a small C library
exporting a vendor's driver symbols with the vendor's signatures; it checks its
inputs and records each call but executes nothing. Tests build it with the system
compiler (gcc) into a temporary directory, hand its path to the plugin (explicitly
or through ``TRITONJIT_<VENDOR>_DRIVER_LIB``), and read the records back here.
Every result obtained this way is a simulated-driver result, never a hardware one.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from .._backend import CompiledVariant
from ._args import ArgLayout
from ._driver import DriverSpec


class CompilerMissing(RuntimeError):
    """No C compiler: simulated-driver tests skip with this message."""


def _cc() -> str:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise CompilerMissing("no C compiler (gcc) found: the simulated driver cannot be built")
    return cc


def build_simulated_driver(spec: DriverSpec, out_dir: str | os.PathLike[str]) -> str:
    """Compile the simulated driver for ``spec`` (its prefix and flavor) into ``out_dir``."""
    src = resources.files(__package__).joinpath("simdriver.c").read_text()
    defines = {"SIM_PREFIX": spec.prefix, "SIM_DRIVER": int(spec.flavor == "driver"),
               "SIM_LOAD_EX": int(spec.load_ex), "SIM_CTX": int(spec.contexts)}
    tag = hashlib.sha256((src + repr(sorted(defines.items()))).encode()).hexdigest()[:12]
    out = os.path.join(os.fspath(out_dir), f"libsim_{spec.prefix}driver_{tag}.so")
    if not os.path.exists(out):
        c_path = os.path.join(os.fspath(out_dir), f"simdriver_{spec.prefix}.c")
        with open(c_path, "w") as f:
            f.write(src)
        cmd = [_cc(), "-shared", "-fPIC", "-O1", "-fvisibility=hidden", "-o", out + ".tmp", c_path, "-lpthread",
               *(f"-D{k}={v}" for k, v in defines.items())]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"building the simulated driver failed:\n{' '.join(cmd)}\n{proc.stderr}")
        os.replace(out + ".tmp", out)
    return out


def make_stub_elf(kernel_names: Sequence[str], out_dir: str | os.PathLike[str] | None = None) -> bytes:
    """A host ELF that exports functions named like the kernels, built with gcc.

    It stands in for a device binary where the vendor's Triton is not installable
    here: the simulated driver accepts any ELF that holds the kernel symbol. It is
    NOT a device binary and says nothing about the vendor's code generator.
    """
    body = "".join(f"void {n}(void) {{}}\n" for n in kernel_names)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        c_path, so_path = os.path.join(tmp, "stub.c"), os.path.join(tmp, "stub.so")
        with open(c_path, "w") as f:
            f.write(body)
        proc = subprocess.run([_cc(), "-shared", "-fPIC", "-o", so_path, c_path], check=False, capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"building the stand-in ELF failed:\n{proc.stderr}")
        with open(so_path, "rb") as f:
            return f.read()


def stand_in_variant(name: str, signature: str, target: Any, binary: bytes, *, num_warps: int = 4,
                     shared: int = 0, metadata: dict[str, Any] | None = None) -> CompiledVariant:
    """A CompiledVariant around a stand-in binary, with the metadata Triton would write."""
    md = {"name": name, "num_warps": num_warps, "num_stages": 1, "num_ctas": 1, "shared": shared,
          "warp_size": getattr(target, "warp_size", 32), "target": target}
    md.update(metadata or {})
    digest = hashlib.sha256(binary + signature.encode() + repr(sorted((k, repr(v)) for k, v in md.items())).encode())
    return CompiledVariant(name=name, signature=signature, target=target, binary=binary, metadata=md,
                           hash=digest.hexdigest())


@dataclass(frozen=True)
class LaunchRecord:
    """One launch the simulated driver accepted."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    stream: int
    params: tuple[bytes, ...]  # each kernel parameter's bytes, as the driver read them


class SimulatedDriver:
    """The test side of a built simulated driver: configure it, read its records."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        self.lib.sim_record.restype = ctypes.c_char_p
        self.lib.sim_last_error.restype = ctypes.c_char_p
        self.lib.sim_expect_params.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)]
        self.lib.sim_fail_next.argtypes = [ctypes.c_char_p, ctypes.c_int]

    def configure(self, *, devices: int = 1, warp_size: int = 32, max_threads: int = 1024,
                  static_shared: int = 48 * 1024, max_shared: int = 48 * 1024,
                  dynamic_shared_attr: int = -1) -> None:
        """Device count, warp size the block must be a multiple of, shared-memory limits
        (``dynamic_shared_attr`` is the function attribute that opts in to more)."""
        self.lib.sim_configure(devices, warp_size, max_threads, static_shared, max_shared, dynamic_shared_attr)

    def set_attribute(self, attr: int, value: int) -> None:
        """Answer ``xDeviceGetAttribute(attr)`` with ``value`` (vendor enum numbering)."""
        self.lib.sim_set_attribute(attr, value)

    def expect_params(self, kernel: str, sizes: Sequence[int] | ArgLayout) -> None:
        """The parameter sizes the kernel takes: a real driver reads them from the
        binary's metadata; the simulated one is told them by the test."""
        if isinstance(sizes, ArgLayout):
            sizes = sizes.sizes
        arr = (ctypes.c_size_t * max(len(sizes), 1))(*sizes)
        if self.lib.sim_expect_params(kernel.encode(), len(sizes), arr) != 0:
            raise ValueError(f"cannot register {len(sizes)} parameters for '{kernel}'")

    def fail_next(self, symbol: str, code: int) -> None:
        """Make the next call of ``symbol`` return ``code`` (error-path tests)."""
        self.lib.sim_fail_next(symbol.encode(), code)

    def reset(self) -> None:
        """Forget the records (configuration and registered layouts stay)."""
        self.lib.sim_reset()

    def records(self) -> list[str]:
        return [self.lib.sim_record(i).decode() for i in range(self.lib.sim_record_count())]

    @property
    def last_error(self) -> str:
        return self.lib.sim_last_error().decode()

    def count(self, kind: str) -> int:
        return sum(1 for r in self.records() if r.split(" ", 1)[0] == kind)

    def launches(self) -> list[LaunchRecord]:
        out = []
        for r in self.records():
            if not r.startswith("launch "):
                continue
            f = dict(part.split("=", 1) for part in r.split(" ")[1:])
            params = tuple(bytes.fromhex(p) for p in f["params"].split("|")) if f["params"] else ()
            out.append(LaunchRecord(
                kernel=f["kernel"],
                grid=tuple(int(x) for x in f["grid"].split(",")),  # type: ignore[arg-type]
                block=tuple(int(x) for x in f["block"].split(",")),  # type: ignore[arg-type]
                shared=int(f["shared"]), stream=int(f["stream"]), params=params,
            ))
        return out
