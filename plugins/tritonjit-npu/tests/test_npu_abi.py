"""The packed argument buffer against libtriton_jit's NpuArgBuffer rules, written out by hand."""

from __future__ import annotations

import struct

import pytest
from tritonjit_npu import ArgBufferLayout, NpuArgType, runtime_types
from tritonjit_npu._abi import abi_of, layout_from_metadata


def test_runtime_types_skip_every_kind_of_constant():
    sig = "*fp32:16,*kfp16,i32:1,i64:16,1024,nullopt,'a,b',tl.float16,True,fp32,u1"
    assert runtime_types(sig) == ["*fp32", "*kfp16", "i64", "fp32", "u1"]


def test_offsets_sizes_and_types_follow_libtriton_jit():
    types = ["*fp32", "i32", "*fp16", "i64", "fp32", "fp64", "i8", "u64", "bf16", "u32"]
    layout = ArgBufferLayout([abi_of(t) for t in types])
    assert layout.types == [NpuArgType.POINTER, NpuArgType.I32, NpuArgType.POINTER, NpuArgType.I64,
                            NpuArgType.F32, NpuArgType.F64, NpuArgType.I64, NpuArgType.I64,
                            NpuArgType.F32, NpuArgType.I32]
    # system args 0..24; i32 leaves a 4-byte hole before the next pointer; fp64 after fp32 too
    assert layout.offsets == [24, 32, 40, 48, 56, 64, 72, 80, 88, 92]
    assert layout.grid_offset == 96 and layout.size == 108


def test_bytes_are_exactly_the_hand_written_buffer():
    layout = ArgBufferLayout([abi_of(t) for t in ["*fp32", "i32", "*fp32", "fp16", "u1"]])
    got = layout.pack(0x1111, 0x2222, 0x3333, [0xAAAA0000, -7, 0xBBBB0000, 0.5, True], 3, 2, 1)
    want = bytearray(24 + 8 + 4 + 4 + 8 + 4 + 4 + 8 + 12)
    struct.pack_into("<QQQ", want, 0, 0x1111, 0x2222, 0x3333)
    struct.pack_into("<Q", want, 24, 0xAAAA0000)
    struct.pack_into("<i", want, 32, -7)  # then 4 bytes of padding
    struct.pack_into("<Q", want, 40, 0xBBBB0000)
    struct.pack_into("<f", want, 48, 0.5)  # fp16 scalars travel as fp32, like libtriton_jit
    struct.pack_into("<q", want, 56, 1)  # u1 falls to libtriton_jit's default: an 8-byte int
    struct.pack_into("<iii", want, 64, 3, 2, 1)
    assert len(got) == 76 and got == bytes(want[:76])


def test_no_user_args_puts_grid_right_after_system_args():
    layout = ArgBufferLayout([])
    assert layout.size == 36
    assert layout.pack(1, 0, 0, [], 5, 1, 1)[24:] == struct.pack("<iii", 5, 1, 1)


def test_metadata_arg_layout_is_read_like_kernel_metadata_cpp():
    abi = layout_from_metadata([{"type": "ptr", "dtype": "fp32"}, {"type": "constexpr"}, {"type": "i32"},
                                {"type": "fp64"}, {"type": "weird"}])
    assert [t for t, _ in abi] == [NpuArgType.POINTER, NpuArgType.I32, NpuArgType.F64, NpuArgType.I64]


@pytest.mark.parametrize("ty,size", [("*i8", 8), ("i32", 4), ("u32", 4), ("i64", 8), ("fp32", 4), ("fp64", 8),
                                     ("i16", 8), ("fp16", 4)])
def test_slot_sizes(ty, size):
    assert struct.calcsize("<" + abi_of(ty)[1]) == size
