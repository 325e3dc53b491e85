"""tritonjit backend plugin: Moore Threads MUSA (libmusa; torch_musa)."""

from ._backend import MusaBackend

plugin = MusaBackend()

__all__ = ["MusaBackend", "plugin"]
