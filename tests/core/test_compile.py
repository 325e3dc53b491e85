"""The compile bridge: cross-compiles for GPUs this CPU machine lacks, into Triton's
cache (TRITON_CACHE_DIR honoured), in process and as the ``tritonjit compile`` process."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import _spec_kernels as K
import pytest
import tritonjit

SIG = "*fp32:16,*fp32:16,*fp32:16,i32,1024"
EM_CUDA, EM_AMDGPU = 190, 224
EF_AMDGPU_MACH = {"gfx942": 0x4C, "gfx90a": 0x3F}


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "triton-cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(d))
    try:  # a Triton whose knobs were read before the env changed
        from triton import knobs

        monkeypatch.setattr(knobs.cache, "dir", str(d))
    except (ImportError, AttributeError):
        pass
    return d


def cubin_sm(data: bytes) -> int:
    """The SM version of a cubin: e_flags bits 0-7 in the classic CUDA ELF ABI (ABI
    version 7), bits 8-15 in the newer one (ABI version 8, newer ptxas, sm_90 on 3.9)."""
    flags = elf_header(data)[1]
    return (flags >> 8) & 0xFF if data[8] >= 8 else flags & 0xFF


def elf_header(data: bytes) -> tuple[int, int]:
    """(e_machine, e_flags) of a 64-bit little-endian ELF."""
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1
    return struct.unpack_from("<H", data, 18)[0], struct.unpack_from("<I", data, 48)[0]


@pytest.mark.parametrize("arch", [80, 90])
def test_cross_compile_cuda(cache_dir, arch):
    v = tritonjit.function(K.add).compile(SIG, target=f"cuda:{arch}", num_warps=4)
    path = Path(v.binary_path("cubin"))
    assert path.is_file() and cache_dir in path.parents
    data = path.read_bytes()
    assert data == v.binary
    machine, _ = elf_header(data)
    assert machine == EM_CUDA and cubin_sm(data) == arch  # the SM version lives in e_flags
    assert f"sm_{arch}".encode() in data
    assert v.metadata["num_warps"] == 4 and v.signature == SIG
    assert f".target sm_{arch}" in v.asm["ptx"]


def test_cubin_arch_by_cuobjdump(cache_dir):
    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not tool.is_file():
        pytest.skip("this Triton build bundles no cuobjdump")
    v = tritonjit.function(K.add).compile(SIG, target="cuda:90")
    out = subprocess.run([str(tool), "--dump-elf", v.binary_path("cubin")], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"cuobjdump cannot run here: {out.stderr.strip()[:200]}")
    assert "sm_90" in out.stdout


def test_cross_compile_hip(cache_dir):
    v = tritonjit.function(K.add).compile(SIG, target="hip:gfx942", num_warps=4)
    path = Path(v.binary_path("hsaco"))
    assert path.is_file() and cache_dir in path.parents
    data = path.read_bytes()
    machine, flags = elf_header(data)
    assert machine == EM_AMDGPU and flags & 0xFF == EF_AMDGPU_MACH["gfx942"]
    assert b"gfx942" in data  # the target id in the note section (amdgcn-amd-amdhsa--gfx942...)


def test_variants_are_distinct_artifacts(cache_dir):
    f = tritonjit.function(K.add)
    a = f.compile(SIG, target="cuda:90")
    b = f.compile("*fp32,*fp32:16,*fp32:16,i32:1,1024", target="cuda:90")
    assert a.hash != b.hash and a.cache_dir != b.cache_dir
    again = f.compile(SIG, target="cuda:90")
    assert again.hash == a.hash  # a cache hit: the same artifact


# ---- the standalone compiler process -----------------------------------------------------
def _tritonjit(*args: str, env_cache: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, TRITON_CACHE_DIR=str(env_cache))
    env.pop("TRITONJIT_BACKEND", None)
    return subprocess.run([sys.executable, "-m", "tritonjit", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def test_compile_subprocess_json(tmp_path):
    cache = tmp_path / "cache"
    out = _tritonjit("compile", f"{K.__file__}:add", "--signature", SIG, "--target", "cuda:90",
                     "--num-warps", "8", "--num-stages", "2", "--json", env_cache=cache)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["kernel"] == "add" and res["signature"] == SIG
    assert Path(res["cache_dir"]).parent == cache
    binary = Path(res["binary"])
    assert binary.is_file() and binary.suffix == ".cubin" and elf_header(binary.read_bytes())[0] == EM_CUDA
    assert res["metadata"]["num_warps"] == 8 and res["metadata"]["num_stages"] == 2
    assert res["hash"] == tritonjit.function(K.add).compile(SIG, target="cuda:90", num_warps=8,
                                                             num_stages=2).hash  # the same variant in process


def test_compile_subprocess_hip_text(tmp_path):
    out = _tritonjit("compile", f"{K.__file__}:add", "-s", SIG, "-t", "hip:gfx942", env_cache=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "add [" in out.stdout and ".hsaco" in out.stdout


def test_compile_subprocess_kernel_file_raises(tmp_path):
    bad = tmp_path / "explodes.py"
    bad.write_text(textwrap.dedent("""\
        import triton

        raise ImportError("this kernel file needs a module that is not installed")
    """))
    out = _tritonjit("compile", f"{bad}:k", "-s", "*fp32", "-t", "cuda:90", "--json", env_cache=tmp_path)
    assert out.returncode != 0
    err = out.stderr
    assert "not installed" in err and "explodes.py" in err, err
    assert out.stdout.strip() == ""  # no half JSON for a caller to misread


@pytest.mark.parametrize("args, words", [
    (["{file}:add", "-s", "*fp32:16,i32", "-t", "cuda:90"], ["signature", "2 entries"]),
    (["{file}:nope", "-s", SIG, "-t", "cuda:90"], ["no kernel named 'nope'"]),
    (["{file}:add", "-s", SIG, "-t", "tpu:1"], ["unknown target backend 'tpu'"]),
    (["{file}", "-s", SIG], ["FILE.py:KERNEL"]),
])
def test_compile_subprocess_bad_input(tmp_path, args, words):
    out = _tritonjit("compile", *[a.format(file=K.__file__) for a in args], env_cache=tmp_path)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    for w in words:
        assert w in out.stderr, out.stderr


def test_compile_error_in_subprocess_names_file_and_line(tmp_path):
    src = tmp_path / "bad_kernel.py"
    src.write_text(textwrap.dedent("""\
        import triton
        import triton.language as tl


        @triton.jit
        def bad(x):
            tl.store(x + tl.arange(0, 3), 1.0)
    """))
    out = _tritonjit("compile", f"{src}:bad", "-s", "*fp32:16", "-t", "cuda:90", env_cache=tmp_path / "c")
    assert out.returncode == 1
    assert "power of 2" in out.stderr and f"{src}:7" in out.stderr, out.stderr


# ---- tritonjit info --------------------------------------------------------------------------
def test_info_json_and_text(tmp_path):
    out = _tritonjit("info", "--json", env_cache=tmp_path)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    names = {b["name"]: b for b in info["backends"]}
    assert names["interpreter"]["available"] is True
    assert info["cache_dir"] == str(tmp_path) and info["triton"]
    text = _tritonjit("info", env_cache=tmp_path)
    assert text.returncode == 0 and "interpreter" in text.stdout and "active backend" in text.stdout
    script = Path(sys.executable).with_name("tritonjit")
    if script.is_file():  # the console script of the installed distribution
        res = subprocess.run([str(script), "info", "--json"], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0 and json.loads(res.stdout)["backends"]
