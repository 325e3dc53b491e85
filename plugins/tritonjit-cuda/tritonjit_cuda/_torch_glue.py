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


_stream_reader_hooked = False


def share_stream_reader(driver: Any) -> None:
    """Give the C launcher the core's torch reader once it is built (tritonjit's native
    dispatcher starts that build), so the current stream is read in C, not through Python."""
    global _stream_reader_hooked
    if _stream_reader_hooked:
        return
    _stream_reader_hooked = True
    try:
        from tritonjit._native import torch_reader
    except ImportError:  # pragma: no cover - tritonjit is this plugin's dependency
        return
    torch_reader.on_ready(driver.set_stream_reader)


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
