"""tritonjit backend for Hygon DCU: HIP driver (``libamdhip64.so`` from the DTK), hsaco binaries."""

from ._backend import HcuBackend

plugin = HcuBackend()

__all__ = ["HcuBackend", "plugin"]
