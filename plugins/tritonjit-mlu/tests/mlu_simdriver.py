"""Test side of the SIMULATED CNDrv: the stand-in fat binary and the call records."""

from __future__ import annotations

import ctypes
import struct


def fatbin(*names: str) -> bytes:
    """The TEST-DEFINED stand-in for a cnfatbin (whose format is not public)."""
    body = b"".join(n.encode() + b"\0" for n in names) + b"\0"
    return b"TJSIMCNB" + struct.pack("<I", 12 + len(body)) + body


class SimCn:
    def __init__(self, path: str) -> None:
        self.path = path
        self.lib = ctypes.CDLL(path)
        self.lib.sim_record.restype = ctypes.c_char_p
        self.lib.sim_fail_next.argtypes = [ctypes.c_char_p, ctypes.c_int]
        self.lib.sim_expect_params.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)]

    def records(self) -> list[str]:
        return [self.lib.sim_record(i).decode() for i in range(self.lib.sim_record_count())]

    def launches(self) -> list[dict]:
        out = []
        for r in self.records():
            if r.startswith("launch "):
                f = dict(p.split("=", 1) for p in r.split(" ")[1:])
                f["params"] = tuple(bytes.fromhex(p) for p in f["params"].split("|")) if f["params"] else ()
                f["grid"] = tuple(int(x) for x in f["grid"].split(","))
                f["class"], f["stream"] = int(f["class"]), int(f["stream"])
                out.append(f)
        return out

    def expect_params(self, kernel: str, sizes: list[int]) -> None:
        self.lib.sim_expect_params(kernel.encode(), len(sizes), (ctypes.c_size_t * len(sizes))(*sizes))
