"""tritonjit-cuda: the NVIDIA CUDA backend plugin of tritonjit.

Registered through the entry point ``cuda = "tritonjit_cuda:plugin"`` in the group
``tritonjit.backends``; nothing here touches the GPU at import time. ``LAUNCH_ABI`` is
the native launch ABI its C extension was built for (the core checks it at registration).
"""

from ._backend import LAUNCH_ABI, CudaBackend, LaunchState, LoadedModule, OutOfResources, device_props, plugin

__all__ = ["LAUNCH_ABI", "CudaBackend", "LaunchState", "LoadedModule", "OutOfResources", "device_props", "plugin"]
