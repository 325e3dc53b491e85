"""tritonjit backend plugin: Iluvatar CoreX (CUDA-compatible driver, warp size 64)."""

from ._backend import IxBackend

plugin = IxBackend()

__all__ = ["IxBackend", "plugin"]
