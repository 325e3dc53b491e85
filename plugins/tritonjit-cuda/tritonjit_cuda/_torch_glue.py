"""What the CUDA backend takes from torch: devices, streams, the caching allocator."""

from __future__ import annotations

from typing import Any


def raw_stream_fn() -> Any:
    """torch's C function returning the current stream handle of a device (fast)."""
    import torch

    fn = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if fn is None:  # pragma: no cover - every CUDA build of torch has it
        return lambda device: torch.cuda.current_stream(device).cuda_stream
    return fn


_shared_reader: Any = None


def share_stream_reader(driver: Any) -> None:
    """Give the C launcher the core's torch reader (built on first use by tritonjit's
    native dispatcher), so the current stream is read in C, not through Python."""
    global _shared_reader
    try:
        from tritonjit import _native
    except ImportError:  # pragma: no cover - tritonjit is this plugin's dependency
        return
    if not _native.available():
        return
    cap = _native.dispatch.tensor_reader()
    if cap is not None and cap is not _shared_reader:
        driver.set_stream_reader(cap)
        _shared_reader = cap


def scratch_alloc(nbytes: int, align: int, stream: int, device: int) -> int:
    """Scratch for a kernel, from torch's caching allocator on the launch stream.

    Blocks are at least 512-byte aligned, above any alignment Triton asks for. Freed
    right after the launch is enqueued: the allocator reuses a block only in stream
    order, so the kernel finishes with it first (also inside CUDA graph capture,
    where the allocation comes from the graph's private pool)."""
    import torch

    if align > 512:
        raise RuntimeError(f"kernel scratch asks for {align}-byte alignment; torch's allocator gives 512")
    ptr = torch.cuda.caching_allocator_alloc(nbytes, device, stream)
    return ptr


def scratch_free(ptr: int) -> None:
    import torch

    torch.cuda.caching_allocator_delete(ptr)
