"""load -> prepare -> pack_args -> launch, end to end against the SIMULATED Ascend runtime.

The kernel binary is a real ELF built by gcc (Triton-Ascend is not installable here);
the runtime checks it, the function registration, the argument buffer byte by byte,
the grid and the workspace's life, and records every call.
"""

from __future__ import annotations

import struct
import threading

import pytest
import triton
import triton.language as tl
import tritonjit
from npu_simdriver import SimTensor
from tritonjit_npu import _plugin
from tritonjit_npu._driver import RT_DEV_BINARY_MAGIC_ELF, RT_DEV_BINARY_MAGIC_ELF_AIVEC

FFTS = 0x00005A5A0000F0F0  # what the simulated rtGetC2cCtrlAddr reports


def make_add_kernel():
    @triton.jit
    def add_kernel(x, y, out, n, alpha, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + offs, alpha * tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)

    return tritonjit.function(add_kernel)


def expected_buffer(x, y, out, n, alpha, grid, workspace=0, lock=0) -> bytes:
    """libtriton_jit's buffer for (ptr, ptr, ptr, i32, fp32), written out by hand."""
    return (struct.pack("<QQQ", FFTS, lock, workspace) + struct.pack("<QQQ", x, y, out)
            + struct.pack("<if", n, alpha) + struct.pack("<iii", *grid))


def test_launch_registers_binary_and_packs_the_buffer_byte_for_byte(npu_sim, npu_compiler):
    f = make_add_kernel()
    x, y, out = SimTensor(64), SimTensor(64), SimTensor(64)
    npu_sim.expect_args(expected_buffer(x.data_ptr(), y.data_ptr(), out.data_ptr(), 1000, 2.5, (4, 2, 1)))
    f[(4, 2)](x, y, out, 1000, 2.5, BLOCK=128)
    assert npu_sim.last_mismatch == -1
    calls = [e.call for e in npu_sim.events() if e.call != "rtGetDeviceCount"]
    assert calls == ["rtSetDevice", "rtDevBinaryRegister", "rtFunctionRegister", "rtGetC2cCtrlAddr", "rtKernelLaunch"]
    reg = npu_sim.events("rtDevBinaryRegister")[0]
    assert reg.a[0] == RT_DEV_BINARY_MAGIC_ELF_AIVEC and reg.a[2] == len(npu_sim.elf) and reg.rc == 0
    assert reg.data == npu_sim.elf[: len(reg.data)]
    fn = npu_sim.events("rtFunctionRegister")[0]
    assert fn.name == "add_kernel" and fn.data.decode().startswith("add_kernel_") and fn.rc == 0
    launch = npu_sim.events("rtKernelLaunch")[0]
    assert launch.rc == 0 and launch.a[0] == 8 and launch.a[1] == 24 + 24 + 8 + 12 and launch.a[2] == 0
    assert launch.a[4] == fn.a[1]  # launched through the stub registered for it
    # a second call hits the variant cache: no new registration, one more launch
    npu_sim.expect_args(expected_buffer(x.data_ptr(), y.data_ptr(), out.data_ptr(), 7, -1.0, (1, 1, 1)))
    f[(1,)](x, y, out, 7, -1.0, BLOCK=128)
    assert len(npu_sim.events("rtDevBinaryRegister")) == 1 and len(npu_sim.events("rtKernelLaunch")) == 2
    assert npu_sim.events("rtKernelLaunch")[1].rc == 0


def test_simulated_runtime_rejects_a_wrong_buffer(npu_sim, npu_compiler):
    f = make_add_kernel()
    x, y, out = SimTensor(8), SimTensor(8), SimTensor(8)
    npu_sim.expect_args(expected_buffer(x.data_ptr(), y.data_ptr(), out.data_ptr(), 5, 2.5, (1, 1, 1)))
    with pytest.raises(tritonjit.BackendError, match="rtKernelLaunch of kernel 'add_kernel' failed"):
        f[(1,)](x, y, out, 6, 2.5, BLOCK=128)  # n differs: it starts at byte 48
    assert npu_sim.last_mismatch == 48


def test_equal_to_1_is_not_specialized_on_npu(npu_sim, npu_compiler):
    f = make_add_kernel()
    x, y, out = SimTensor(8), SimTensor(8), SimTensor(8)
    assert f.signature(x, y, out, 1, 1.0, BLOCK=64) == "*fp32:16,*fp32:16,*fp32:16,i32,fp32,64"
    npu_sim.expect_args(expected_buffer(x.data_ptr(), y.data_ptr(), out.data_ptr(), 1, 1.0, (1, 1, 1)))
    f[(1,)](x, y, out, 1, 1.0, BLOCK=64)  # n == 1 still travels in the buffer
    assert npu_sim.events("rtKernelLaunch")[0].rc == 0
    assert npu_compiler.compiled[0].signature == "*fp32:16,*fp32:16,*fp32:16,i32,fp32,64"
    tritonjit.set_backend("interpreter")  # Triton's own rule elsewhere
    assert f.signature(x, y, out, 1, 1.0, BLOCK=64) == "*fp32:16,*fp32:16,*fp32:16,i32:1,fp32,64"


def test_unaligned_pointer_variant_and_mix_mode_magic(npu_sim, npu_compiler):
    npu_compiler.meta["mix_mode"] = "mix"
    f = make_add_kernel()
    x, y, out = SimTensor(8, offset=4), SimTensor(8), SimTensor(8)
    npu_sim.expect_args(expected_buffer(x.data_ptr(), y.data_ptr(), out.data_ptr(), 3, 0.0, (2, 1, 1)))
    f[(2,)](x, y, out, 3, 0.0, BLOCK=32)
    assert npu_compiler.compiled[0].signature.startswith("*fp32,*fp32:16")
    assert npu_sim.events("rtDevBinaryRegister")[0].a[0] == RT_DEV_BINARY_MAGIC_ELF
    assert npu_sim.events("rtKernelLaunch")[0].rc == 0


def test_workspace_is_per_block_and_freed_after_the_kernel(npu_sim, npu_compiler):
    npu_compiler.meta["workspace_size"] = 256
    f = make_add_kernel()
    x, y, out = SimTensor(8), SimTensor(8), SimTensor(8)
    f[(3, 2)](x, y, out, 9, 1.0, BLOCK=32)
    (alloc,) = npu_sim.events("rtMalloc")
    assert alloc.a[0] == 256 * 6 and alloc.a[1] == 2 and alloc.rc == 0  # RT_MEMORY_HBM
    launch = npu_sim.events("rtKernelLaunch")[0]
    assert launch.rc == 0 and struct.unpack_from("<Q", launch.data, 16)[0] == alloc.a[2]
    (cb,) = npu_sim.events("aclrtLaunchCallback")
    assert cb.a[0] == alloc.a[2] and cb.a[1] == 1  # ACL_CALLBACK_BLOCK on the launch stream
    assert npu_sim.live_allocations == 1 and not npu_sim.events("rtFree")  # still in use by the kernel
    npu_sim.synchronize(0)
    (free,) = npu_sim.events("rtFree")
    assert free.a[0] == alloc.a[2] and free.rc == 0 and npu_sim.live_allocations == 0


def test_failed_launch_frees_the_workspace_and_keeps_the_cache(npu_sim, npu_compiler):
    npu_compiler.meta["workspace_size"] = 64
    f = make_add_kernel()
    x, y, out = SimTensor(8), SimTensor(8), SimTensor(8)
    npu_sim.fail_next("rtKernelLaunch", 507011)
    with pytest.raises(tritonjit.BackendError, match="error 507011"):
        f[(2,)](x, y, out, 9, 1.0, BLOCK=32)
    assert npu_sim.live_allocations == 0 and npu_sim.pending_callbacks == 0
    f[(2,)](x, y, out, 9, 1.0, BLOCK=32)  # the variant survived; this launch succeeds
    assert [e.rc for e in npu_sim.events("rtKernelLaunch")] == [507011, 0]
    assert len(npu_sim.events("rtDevBinaryRegister")) == 1


def test_sync_block_lock_is_allocated_and_initialised(npu_sim, npu_compiler):
    npu_compiler.meta.update(lock_num=3, lock_init_value=-1)
    f = make_add_kernel()
    x, y, out = SimTensor(8), SimTensor(8), SimTensor(8)
    f[(1,)](x, y, out, 9, 1.0, BLOCK=32)
    (alloc,) = npu_sim.events("rtMalloc")
    (copy,) = npu_sim.events("rtMemcpy")
    assert alloc.a[0] == 24 and copy.a[0] == alloc.a[2] and copy.data == struct.pack("<3q", -1, -1, -1)
    launch = npu_sim.events("rtKernelLaunch")[0]
    assert struct.unpack_from("<QQ", launch.data, 8) == (alloc.a[2], 0)
    npu_sim.synchronize(0)
    assert npu_sim.live_allocations == 0


def test_stream_comes_from_torch_npu_or_the_call(npu_sim, npu_compiler, monkeypatch):
    class FakeTorchNpu:  # what torch_npu's torch.npu offers for streams and devices
        def current_device(self):
            return 0

        def get_device_name(self, index):
            return "Ascend910B3"

        def device(self, index):
            import contextlib

            return contextlib.nullcontext()

        def current_stream(self, device):
            return type("S", (), {"npu_stream": 0x5000 + device})()

    monkeypatch.setattr(_plugin, "torch_npu", lambda: FakeTorchNpu())
    f = make_add_kernel()
    x, y, out = SimTensor(8), SimTensor(8), SimTensor(8)
    f[(1,)](x, y, out, 9, 1.0, BLOCK=32)
    f[(1,)](x, y, out, 9, 1.0, BLOCK=32, stream=0x7777)
    assert [e.a[2] for e in npu_sim.events("rtKernelLaunch")] == [0x5000, 0x7777]


def test_cpu_tensor_is_a_clear_error(npu_sim, npu_compiler):
    import torch

    f = make_add_kernel()
    x, out = SimTensor(8), SimTensor(8)
    with pytest.raises(tritonjit.ArgumentError, match="parameter 'y' of kernel 'add_kernel'.*'cpu'"):
        f[(1,)](x, torch.zeros(8), out, 9, 1.0, BLOCK=32)
    assert not npu_sim.events("rtKernelLaunch")


def test_grid_too_large_for_the_block_count(npu_sim, npu_compiler):
    f = make_add_kernel()
    x, y, out = SimTensor(8), SimTensor(8), SimTensor(8)
    with pytest.raises(tritonjit.GridError, match="uint32"):
        f[(2**16, 2**16, 2)](x, y, out, 9, 1.0, BLOCK=32)


def test_many_threads_launch_at_once(npu_sim, npu_compiler):
    f = make_add_kernel()
    x, y, out = SimTensor(8), SimTensor(8), SimTensor(8)
    f[(1,)](x, y, out, 9, 1.0, BLOCK=32)
    errors = []

    def work(i):
        try:
            for _ in range(25):
                f[(i + 1,)](x, y, out, 9, 1.0, BLOCK=32)
        except Exception as exc:  # noqa: BLE001  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    launches = npu_sim.events("rtKernelLaunch")
    assert len(launches) == 201 and all(e.rc == 0 for e in launches)
    assert len(npu_sim.events("rtDevBinaryRegister")) == 1
