"""tritonjit-cuda: the NVIDIA CUDA backend plugin of tritonjit.

Registered through the entry point ``cuda = "tritonjit_cuda:plugin"`` in the group
``tritonjit.backends``; nothing here touches the GPU at import time.
"""

from ._backend import CudaBackend, LaunchState, LoadedModule, OutOfResources, device_props, plugin

__all__ = ["CudaBackend", "LaunchState", "LoadedModule", "OutOfResources", "device_props", "plugin"]
