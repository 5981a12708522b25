"""The memory model of one evaluation: built once from the checkpoint, the launch and the
GPUs it uses, then read by every memory check (``Context.memory``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flightcheck._knowledge.derived import package
from flightcheck._memory import MemoryModel, build

if TYPE_CHECKING:
    from flightcheck._checks.framework import Context


def model_for_context(ctx: Context) -> MemoryModel:
    """The memory model of this launch on this node (a bug while building it is kept in
    ``crash``: computed once, not raised again by every FC4xx check)."""
    try:
        return _for_context(ctx)
    except Exception as exc:  # noqa: BLE001 - one "unknown" for FC4xx, never a crashed report
        m = MemoryModel(engine=ctx.intent.engine)
        m.crash = f"{type(exc).__name__}: {exc}"
        m.error = f"computing the memory model failed: {m.crash}"
        return m


def _for_context(ctx: Context) -> MemoryModel:
    gpus = ctx.gpus_used
    # what CUDA reports: the board's memory less the driver's reservation (NVML v2)
    totals = [g.memory_total_bytes - (g.memory_reserved_bytes or 0) for g in gpus if g.memory_total_bytes]
    gpu_error = None
    if not gpus:
        gpu_error = ctx.facts.reason("gpus") or "no GPU facts (no driver, or none visible)"
    elif len(totals) < len(gpus):
        gpu_error = ctx.facts.reason("gpus") or "memory_total of a GPU used is unknown"
    engine_version = package(ctx.facts, "sglang" if ctx.intent.engine == "sglang" else "vllm")
    m = build(
        ctx.checkpoint,
        ctx.intent,
        total=min(totals) if totals and gpu_error is None else None,
        gpu_name=gpus[0].name if gpus else None,
        engine_version=engine_version,
        compute_capability=gpus[0].compute_capability if gpus else None,
        env=ctx.facts.env,
    )
    m.gpu_error = gpu_error
    reserved = [g.memory_reserved_bytes for g in gpus if g.memory_reserved_bytes is not None]
    m.memory_reserved = max(reserved) if reserved and len(reserved) == len(gpus) else None
    used = [
        max(0, g.memory_used_bytes - (g.memory_reserved_bytes or 0)) for g in gpus if g.memory_used_bytes is not None
    ]
    m.used_by_others = max(used) if used and len(used) == len(gpus) else None
    links = [g.nvlink.active for g in gpus if g.nvlink is not None]
    m.nvlink = (all(bool(a) for a in links) if links and len(links) == len(gpus) else None) if len(gpus) > 1 else None
    return m
