"""tritonjit backend plugin: MetaX MACA (libmcruntime)."""

from ._backend import MacaBackend

plugin = MacaBackend()

__all__ = ["MacaBackend", "plugin"]
