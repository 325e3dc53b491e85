"""tritonjit under torch.distributed: DDP, FSDP2, tensor-parallel interleaving, device isolation and
one compile per node.

    NCCL_NVLS_ENABLE=0 torchrun --nproc-per-node 2 benchmarks/distributed.py --out DIR [--smoke]

Each rank (one GPU each, ``LOCAL_RANK``) checks, and rank 0 writes ``DIR/distributed.json``
(every rank its own ``DIR/rank-N.json``) and prints the summary:

- cache: every rank shares one fresh ``TRITONJIT_CACHE_DIR`` and ``TRITON_CACHE_DIR``
  under DIR. Rank 0 launches a tritonjit kernel's variants on its device; then every
  other rank launches the same variants on its own and must find all of them in the
  index (``cache_source == "local"``) with no compile: keys and artifacts do not depend
  on the device index. Afterwards, over everything the ranks compiled (the model's
  operators included, compiled by the ranks at the same time), no variant key was
  compiled twice on the node.
- reference: a small fp32 Llama (random weights from a config, no download) trained two
  SGD steps on the global batch in one process, eagerly and under ``tritonjit_ops.enable()``.
- ddp / fsdp2: the same model and batch, each rank its slice, wrapped in
  ``DistributedDataParallel`` / ``fully_shard`` (per decoder layer and the root): the
  losses of both steps, averaged over the ranks, against the reference's (eager and
  enable()); then the step time of a larger bf16 Llama (hidden 1024), eager against
  enable() in the same torchrun, alternating rounds, best round's median.
- tp: tritonjit kernels and NCCL all_reduce on the same (non-default) stream, as
  tensor-parallel code runs them: a row-parallel linear (mm under enable(), all_reduce,
  a tritonjit kernel on the sum) and a tritonjit kernel -> all_reduce -> tritonjit kernel
  chain, over many iterations, against the unsharded result computed locally.
- isolation: no CUDA context on any other GPU from this rank (``cuDevicePrimaryCtxGetState``,
  before the first NCCL collective and at the end), ``torch.cuda.memory_allocated`` of the
  other devices 0, every tritonjit variant loaded on this rank's device only, and, where
  ``nvidia-smi`` lists this process, only on this rank's GPU.

``--smoke``: CPU only, gloo and Triton's interpreter, tiny sizes; exercises the same code
paths (isolation and compile counting are GPU facts and are reported as not applicable).
Exit status 1 when a check fails (performance is reported, not failed on: see ``perf``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast off (the lent machines do not allow it)
os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="directory for the JSON results and the shared caches")
    p.add_argument("--smoke", action="store_true", help="CPU, gloo, interpreter, tiny sizes")
    p.add_argument("--timed-steps", type=int, default=8, help="steps per timing round")
    p.add_argument("--rounds", type=int, default=7, help="timing rounds per path (alternating)")
    p.add_argument("--only", default=None,
                   help="comma-separated checks to run (cache, reference, ddp, fsdp2, tp); default all "
                        "(ddp and fsdp2 need reference)")
    p.add_argument("--keep-cache", action="store_true", help="reuse the caches under --out (default: fresh)")
    return p.parse_args(argv)


ARGS = _parse(None if __name__ == "__main__" else ["--out", "."])
OUT = Path(ARGS.out).resolve()
RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", "0"))

_ROOT = Path(__file__).resolve().parents[1]
# the installed packages where there are (pip install: their C extensions are built), else this checkout's
for sub, pkg in (("operators", "tritonjit_ops"), ("tritonjit_core", "tritonjit")):
    if importlib.util.find_spec(pkg) is None and str(_ROOT / sub) not in sys.path:
        sys.path.insert(0, str(_ROOT / sub))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
import tritonjit  # noqa: E402
from tritonjit import _compiler  # noqa: E402

GPU = not ARGS.smoke and torch.cuda.is_available()
DEVICE = f"cuda:{LOCAL_RANK}" if GPU else "cpu"


# ---- what this rank compiles ------------------------------------------------------------------
COMPILED: list[str] = []  # variant keys this rank compiled (not found in the index)
_real_compile_and_index = _compiler._compile_and_index


def _counting_compile_and_index(*args: Any, **kwargs: Any) -> Any:
    COMPILED.append(args[7] if len(args) > 7 else kwargs["key"])
    return _real_compile_and_index(*args, **kwargs)


_compiler._compile_and_index = _counting_compile_and_index


# ---- tritonjit kernels of the interleave and cache checks ---------------------------------------
@triton.jit
def scale_add(x, y, out, n, a, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) * a + tl.load(y + offs, mask=m), mask=m)


@triton.jit
def relu_scale(x, out, n, a, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m)
    tl.store(out + offs, tl.maximum(v, 0.0) * a, mask=m)


SCALE_ADD = tritonjit.function(scale_add)
RELU_SCALE = tritonjit.function(relu_scale)


def _scale_add(x: torch.Tensor, y: torch.Tensor, a: float, block: int = 256) -> torch.Tensor:
    out = torch.empty_like(x)
    SCALE_ADD[(triton.cdiv(x.numel(), block),)](x, y, out, x.numel(), a, BLOCK=block)
    return out


def _relu_scale(x: torch.Tensor, a: float) -> torch.Tensor:
    out = torch.empty_like(x)
    RELU_SCALE[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), a, BLOCK=256)
    return out


# ---- helpers -------------------------------------------------------------------------------------
def _sync() -> None:
    if GPU:
        torch.cuda.synchronize()


CPU_GROUP: Any = None


def _barrier() -> None:
    dist.barrier(group=CPU_GROUP)


def _gather(obj: Any) -> list[Any]:
    out: list[Any] = [None] * WORLD
    dist.all_gather_object(out, obj, group=CPU_GROUP)
    return out


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


# ---- models ----------------------------------------------------------------------------------------
def _llama(hidden: int, layers: int, vocab: int, heads: int, kv: int, inter: int, dtype: torch.dtype,
           seed: int = 0) -> torch.nn.Module:
    import transformers as tf

    cfg = tf.LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=1024,
                         tie_word_embeddings=False, attn_implementation="sdpa")
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = tf.LlamaForCausalLM(cfg)
    return model.to(device=DEVICE, dtype=dtype)


def _agreement_model() -> torch.nn.Module:
    if ARGS.smoke:
        return _llama(32, 1, 96, 4, 2, 64, torch.float32)
    return _llama(256, 2, 1024, 4, 2, 512, torch.float32)


def _timing_model() -> torch.nn.Module:
    if ARGS.smoke:
        return _llama(32, 1, 96, 4, 2, 64, torch.float32)
    return _llama(1024, 4, 8192, 16, 4, 2816, torch.bfloat16)


def _batch(vocab: int, batch: int, tokens: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, tokens), generator=g)


def _local(ids: torch.Tensor) -> torch.Tensor:
    per = ids.shape[0] // WORLD
    return ids[RANK * per:(RANK + 1) * per].to(DEVICE)


def _train_losses(model: torch.nn.Module, ids: torch.Tensor, steps: int = 2, reduce: bool = False) -> list[float]:
    """``steps`` SGD steps on ``ids``; the loss of each (averaged over the ranks with ``reduce``)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        opt.step()
        value = loss.detach().clone()
        if reduce:
            dist.all_reduce(value)
            value /= WORLD
        losses.append(float(value))
    return losses


def _step_time(step: Callable[[], None], n: int) -> float:
    _sync()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    _sync()
    return (time.perf_counter() - t0) / n


def _timed(make_step: Callable[[], Callable[[], None]]) -> dict[str, float]:
    """Milliseconds per step, eager and under enable(), alternating rounds (best and median)."""
    import tritonjit_ops

    step = make_step()
    eager: list[float] = []
    enabled: list[float] = []
    n = 2 if ARGS.smoke else ARGS.timed_steps
    for _ in range(2):  # warm-up: compiles, tunes, NCCL buckets
        step()
        with tritonjit_ops.enable():
            step()
    for _ in range(1 if ARGS.smoke else ARGS.rounds):
        _barrier()
        eager.append(_step_time(step, n))
        _barrier()
        with tritonjit_ops.enable():
            enabled.append(_step_time(step, n))
    # the slowest rank decides a step's time; best rounds, and medians beside (a shared host
    # moves single rounds by a few percent, the size of the differences measured here)
    t_e, t_j = max(_gather(min(eager))), max(_gather(min(enabled)))
    m_e, m_j = max(_gather(statistics.median(eager))), max(_gather(statistics.median(enabled)))
    return {"eager_ms": t_e * 1e3, "enable_ms": t_j * 1e3, "ratio": t_j / t_e,
            "eager_median_ms": m_e * 1e3, "enable_median_ms": m_j * 1e3, "ratio_median": m_j / m_e}


def _train_step(model: torch.nn.Module, ids: torch.Tensor) -> Callable[[], None]:
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
        opt.step()

    return step


# ---- the checks --------------------------------------------------------------------------------
def check_cache() -> dict[str, Any]:
    """Rank 0 compiles on its device; the others must hit the index on theirs."""
    n = 4096
    x = torch.randn(n, device=DEVICE)
    y = torch.randn(n, device=DEVICE)
    blocks = (128, 256, 512)
    out: dict[str, Any] = {}
    for turn in range(2):
        if (turn == 0) == (RANK == 0):
            before = len(COMPILED)
            for b in blocks:
                got = _scale_add(x, y, 2.0, b)
                torch.testing.assert_close(got, x * 2.0 + y)
            variants = [v for v in SCALE_ADD.variants() if v.compiled.signature.endswith(tuple(str(b) for b in blocks))]
            out = {"compiled": len(COMPILED) - before, "sources": sorted(v.compiled.cache_source for v in variants),
                   "devices": sorted({v.device for v in variants})}
        _barrier()
    ranks = _gather(out)
    ok = ranks[0]["compiled"] == len(blocks) or not GPU
    for r in ranks[1:]:
        ok = ok and r["compiled"] == 0 and (r["sources"] == ["local"] * len(blocks) or not GPU)
    return {"ok": ok, "ranks": ranks}


def check_reference() -> dict[str, Any]:
    import tritonjit_ops

    model = _agreement_model()
    ids = _batch(model.config.vocab_size, 4, 16 if ARGS.smoke else 64).to(DEVICE)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    eager = _train_losses(model, ids)
    model.load_state_dict(state)
    with tritonjit_ops.enable():
        enabled = _train_losses(model, ids)
    return {"eager": eager, "enable": enabled, "rel": max(_rel(a, b) for a, b in zip(enabled, eager)),
            "state": state, "ids": ids.cpu()}


def check_parallel(kind: str, ref: dict[str, Any]) -> dict[str, Any]:
    import tritonjit_ops

    tol = 2e-3
    out: dict[str, Any] = {}
    for mode in ("eager", "enable"):
        model = _agreement_model()
        model.load_state_dict(ref["state"])
        wrapped = _wrap(kind, model)
        ids = _local(ref["ids"])
        if mode == "enable":
            with tritonjit_ops.enable():
                losses = _train_losses(wrapped, ids, reduce=True)
        else:
            losses = _train_losses(wrapped, ids, reduce=True)
        rel = max(_rel(a, b) for a, b in zip(losses, ref[mode]))
        out[mode] = {"losses": losses, "reference": ref[mode], "rel": rel, "ok": rel <= tol}
        del wrapped, model
    tm = _timing_model()
    tids = _local(_batch(tm.config.vocab_size, 2 * WORLD, 16 if ARGS.smoke else 256, seed=3))
    out["time"] = _timed(lambda: _train_step(_wrap(kind, tm), tids))
    out["ok"] = out["eager"]["ok"] and out["enable"]["ok"]
    return out


def _wrap(kind: str, model: torch.nn.Module) -> torch.nn.Module:
    if kind == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[LOCAL_RANK] if GPU else None)
    from torch.distributed.fsdp import fully_shard

    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    return model


def check_tp() -> dict[str, Any]:
    """tritonjit kernels and all_reduce on one stream, as tensor-parallel code runs them."""
    import tritonjit_ops

    stream = torch.cuda.Stream(device=DEVICE) if GPU else None
    ctx: Any = torch.cuda.stream(stream) if GPU else _Null()
    n, k, m = (64, 16, 32) if ARGS.smoke else (1 << 20, 1024, 1024)
    iters = 3 if ARGS.smoke else 20
    worst = 0.0
    with ctx:
        for it in range(iters):
            # a chain: kernel -> all_reduce -> kernel, on the current stream, no sync between
            xs = [torch.randn(n, generator=torch.Generator().manual_seed(100 * it + r)) for r in range(WORLD)]
            ys = [torch.randn(n, generator=torch.Generator().manual_seed(100 * it + r + 50)) for r in range(WORLD)]
            x, y = xs[RANK].to(DEVICE, non_blocking=True), ys[RANK].to(DEVICE, non_blocking=True)
            part = _scale_add(x, y, float(RANK + 1))
            dist.all_reduce(part)
            got = _relu_scale(part, 0.5)
            want = torch.relu(sum((r + 1) * xs[r] + ys[r] for r in range(WORLD))) * 0.5
            worst = max(worst, float((got.cpu() - want).abs().max()))
        # a row-parallel linear under enable(): x[:, shard] @ W[shard, :] -> all_reduce -> a kernel
        g = torch.Generator().manual_seed(7)
        xf, wf = torch.randn(64, k, generator=g), torch.randn(k, m, generator=g) / k ** 0.5
        per = k // WORLD
        with tritonjit_ops.enable():
            xs_local = xf[:, RANK * per:(RANK + 1) * per].to(DEVICE)
            ws_local = wf[RANK * per:(RANK + 1) * per].to(DEVICE)
            partial = xs_local @ ws_local
            dist.all_reduce(partial)
            got_mm = _relu_scale(partial.contiguous(), 2.0)
        want_mm = torch.relu(xf.double() @ wf.double()).float() * 2.0
        worst_mm = float((got_mm.cpu() - want_mm).abs().max() / want_mm.abs().max())
    _sync()
    return {"chain_max_abs_err": worst, "row_parallel_rel_err": worst_mm,
            "ok": worst <= 1e-4 * n ** 0.5 and worst_mm <= 2e-2}


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


# ---- device isolation ------------------------------------------------------------------------------
def _has_context(device: int) -> bool | None:
    """Whether this process has a CUDA primary context on ``device``; asked without making one."""
    try:
        return bool(torch._C._cuda_hasPrimaryContext(device))
    except Exception:
        pass
    try:
        import ctypes

        cuda = ctypes.CDLL("libcuda.so.1")
        dev, flags, active = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
        if cuda.cuDeviceGet(ctypes.byref(dev), device) != 0:
            return None
        if cuda.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(active)) != 0:
            return None
        return bool(active.value)
    except Exception:
        return None


def _others() -> list[int]:
    return [d for d in range(torch.cuda.device_count()) if d != LOCAL_RANK] if GPU else []


def isolation(stage: str, memory: bool = False) -> dict[str, Any]:
    if not GPU:
        return {"stage": stage, "applicable": False, "ok": True}
    contexts = {d: _has_context(d) for d in _others()}
    tj_devices = sorted({d for f in list(_function_instances()) if f._state is not None
                         for d, cache in f._state.caches.items() if cache})
    out: dict[str, Any] = {"stage": stage, "contexts_on_other_gpus": contexts, "tritonjit_devices": tj_devices}
    ok = not any(contexts.values()) and tj_devices in ([], [LOCAL_RANK])
    if memory:
        out["memory_allocated_on_other_gpus"] = {d: torch.cuda.memory_allocated(d) for d in _others()}
        out["contexts_after_memory_query"] = {d: _has_context(d) for d in _others()}
        ok = ok and not any(out["memory_allocated_on_other_gpus"].values())
        out["nvidia_smi"] = _smi_gpus_of_this_process()
        if out["nvidia_smi"].get("gpus") is not None:
            ok = ok and out["nvidia_smi"]["gpus"] == [_uuid(LOCAL_RANK)]
    out["ok"] = ok
    return out


def _function_instances() -> list[Any]:
    from tritonjit import _function

    return list(_function._instances.values())


def _uuid(device: int) -> str:
    return str(torch.cuda.get_device_properties(device).uuid).lower().removeprefix("gpu-")


def _smi_gpus_of_this_process() -> dict[str, Any]:
    """The GPUs nvidia-smi lists this process on (None when it does not list it: containers
    often hide the PIDs)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,gpu_uuid,used_memory",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"gpus": None, "why": str(exc)}
    mine = sorted({line.split(",")[1].strip().lower().removeprefix("gpu-") for line in out.splitlines()
                   if line.split(",")[0].strip() == str(os.getpid())})
    return {"gpus": mine or None, "raw": out.strip().splitlines()[:16]}


# ---- main --------------------------------------------------------------------------------------
def _shared_caches() -> None:
    """One fresh Triton cache and tritonjit cache for the node's ranks (so the compile
    counts are this run's); the built native helpers are shared with the default cache
    directory, so they are not built again."""
    from tritonjit._disk_cache import cache_root

    default_native = Path(cache_root()) / "native"
    tag = [f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}" if RANK == 0 else None]
    dist.broadcast_object_list(tag, src=0, group=CPU_GROUP)
    base = OUT / ("caches" if ARGS.keep_cache else f"caches-{tag[0]}")
    if LOCAL_RANK == 0:
        (base / "tritonjit").mkdir(parents=True, exist_ok=True)
        default_native.mkdir(parents=True, exist_ok=True)
        link = base / "tritonjit" / "native"
        if not link.exists():
            link.symlink_to(default_native, target_is_directory=True)
    _barrier()
    os.environ["TRITON_CACHE_DIR"] = str(base / "triton")
    os.environ["TRITONJIT_CACHE_DIR"] = str(base / "tritonjit")


def main() -> int:
    global CPU_GROUP
    t_start = time.perf_counter()
    OUT.mkdir(parents=True, exist_ok=True)
    if GPU:
        torch.cuda.set_device(LOCAL_RANK)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    dist.init_process_group(backend="nccl" if GPU else "gloo")
    CPU_GROUP = dist.new_group(backend="gloo") if GPU else dist.group.WORLD
    _shared_caches()
    import tritonjit_ops
    from tritonjit import _native

    result: dict[str, Any] = {"rank": RANK, "world": WORLD, "device": DEVICE, "backend": tritonjit.current_backend().name,
                              "torch": torch.__version__, "triton": triton.__version__,
                              "tritonjit": tritonjit.__file__, "native_dispatcher": _native.reason}
    failures: list[str] = []
    def native() -> dict[str, Any]:
        """The C++ operator path built (or loaded) before anything runs: on a GPU before anything
        is timed; on the CPU smoke run so that no rank exits while its helpers still build."""
        from tritonjit_ops import _native_ops, _prologue

        _native.install_tensor_reader(wait=True)  # the three torch helpers, as bench ops waits for them
        _prologue.start(wait=True)
        with tritonjit_ops.enable(wait_native=True):
            pass

        return {"ok": True, "native_ops": _native_ops.native().status() if _native_ops.native() else "none"}

    steps: list[tuple[str, Callable[[], Any]]] = [
        ("isolation_start", lambda: isolation("start")),
        ("native", native),
        ("cache", check_cache),
    ]
    ref: dict[str, Any] = {}

    def reference() -> dict[str, Any]:
        ref.update(check_reference())
        return {k: v for k, v in ref.items() if k in ("eager", "enable", "rel")} | {"ok": ref["rel"] <= 2e-3}

    steps += [("reference", reference), ("isolation_before_nccl", lambda: isolation("before the first NCCL call")),
              ("ddp", lambda: check_parallel("ddp", ref)), ("fsdp2", lambda: check_parallel("fsdp2", ref)),
              ("tp", check_tp), ("isolation_end", lambda: isolation("end", memory=True))]
    only = set(ARGS.only.split(",")) if ARGS.only else None
    for name, fn in steps:
        if only is not None and not name.startswith("isolation") and name not in only | {"native"}:
            continue
        t0 = time.perf_counter()
        try:
            result[name] = fn()
        except Exception as exc:  # report and go on: one failure must not hide the others
            result[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
        result[name]["seconds"] = round(time.perf_counter() - t0, 2)
        if not result[name].get("ok", False):
            failures.append(name)
        if RANK == 0:
            print(f"[distributed] {name}: {'ok' if result[name].get('ok') else 'FAILED'} "
                  f"({result[name]['seconds']} s)", file=sys.stderr, flush=True)
        (OUT / f"rank-{RANK}.json").write_text(json.dumps(result, indent=1, default=str))
    # one compile per variant per node: no key compiled by two ranks
    keys = _gather(COMPILED)
    seen: dict[str, int] = {}
    for ks in keys:
        for k in ks:
            seen[k] = seen.get(k, 0) + 1
    twice = sorted(k for k, c in seen.items() if c > 1)
    result["compiles"] = {"per_rank": [len(ks) for ks in keys], "distinct": len(seen), "compiled_twice": len(twice),
                          "ok": not twice or not GPU}
    if not result["compiles"]["ok"]:
        failures.append("compiles")
    result["perf"] = {k: result[k]["time"] for k in ("ddp", "fsdp2") if "time" in result.get(k, {})}
    result["perf_ok"] = all(v["ratio"] <= 1.0 for v in result["perf"].values())
    result["failures"] = failures
    result["seconds"] = round(time.perf_counter() - t_start, 1)
    (OUT / f"rank-{RANK}.json").write_text(json.dumps(result, indent=1, default=str))
    everyone = _gather({k: v for k, v in result.items()})
    if RANK == 0:
        summary = {"ok": not any(r["failures"] for r in everyone), "failures": {r["rank"]: r["failures"] for r in everyone},
                   "perf": result["perf"], "perf_ok": result["perf_ok"], "compiles": result["compiles"],
                   "reference": result.get("reference"), "ddp": _brief(result.get("ddp")),
                   "fsdp2": _brief(result.get("fsdp2")), "tp": result.get("tp"),
                   "isolation": {r["rank"]: {k: r[k] for k in ("isolation_before_nccl", "isolation_end") if k in r}
                                 for r in everyone},
                   "cache": result.get("cache"), "seconds": result["seconds"], "ranks": everyone}
        (OUT / "distributed.json").write_text(json.dumps(summary, indent=1, default=str))
        print(json.dumps({k: v for k, v in summary.items() if k != "ranks"}, indent=1, default=str))
    ok = not failures
    dist.barrier(group=CPU_GROUP)
    dist.destroy_process_group()
    return 0 if ok else 1


def _brief(r: Any) -> Any:
    if not isinstance(r, dict):
        return r
    return {k: r[k] for k in ("ok", "eager", "enable", "time", "error") if k in r}


def _leave(status: int) -> None:
    """Exit without finalizing the interpreter, once this rank's results are written.

    torch's gloo worker threads drop their last reference to a finished collective's work
    (and with it its tensors) a moment after the collective completes. Where that moment
    falls inside interpreter finalization, dropping a tensor that has a Python object takes
    the GIL, CPython ends the thread with ``pthread_exit``, whose unwinding crosses a
    ``noexcept`` frame: ``std::terminate`` ("terminate called without an active exception",
    SIGABRT), and torchrun fails a run whose every check passed. Traced with a SIGABRT
    backtrace on 2 of 33 CPU smoke runs: ``ProcessGroupGloo::runLoop`` ->
    ``TensorImpl::decref_pyobject`` -> ``PyEval_AcquireThread`` -> ``pthread_exit``. No
    tritonjit object is on that path; nothing is left to finalize once the results are
    written (the helpers' builds were waited for in the ``native`` step)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    _leave(main())
