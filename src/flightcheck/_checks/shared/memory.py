"""The memory model of one evaluation: built once from the checkpoint, the launch and the
GPUs it uses, then read by every memory check (``Context.memory``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flightcheck._knowledge import engines
from flightcheck._knowledge.derived import package
from flightcheck._knowledge.units import major_minor
from flightcheck._memory import MemoryModel, build
from flightcheck._memory.budget import Interconnect

if TYPE_CHECKING:
    from flightcheck._checks.framework import Context
    from flightcheck._vocabulary.facts import Gpu


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
    engine_version = package(ctx.facts, engines.get(ctx.intent.engine).package)
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
    m.node_gpus = len(ctx.facts.gpus) if ctx.facts.gpus else None
    reserved = [g.memory_reserved_bytes for g in gpus if g.memory_reserved_bytes is not None]
    m.memory_reserved = max(reserved) if reserved and len(reserved) == len(gpus) else None
    used = [
        max(0, g.memory_used_bytes - (g.memory_reserved_bytes or 0)) for g in gpus if g.memory_used_bytes is not None
    ]
    m.used_by_others = max(used) if used and len(used) == len(gpus) else None
    links = [g.nvlink.active for g in gpus if g.nvlink is not None]
    m.nvlink = (all(bool(a) for a in links) if links and len(links) == len(gpus) else None) if len(gpus) > 1 else None
    m.interconnect = _interconnect(gpus)
    m.nccl_env = {k: v for k, v in (ctx.facts.env or {}).items() if k.startswith("NCCL_")}
    m.add_comm_to_reserve()
    return m


def _all(values: list[bool | None]) -> bool | None:
    """True when every value is True, False when one is False, else unknown."""
    if any(v is False for v in values):
        return False
    return True if values and all(v is True for v in values) else None


def _interconnect(gpus: list[Gpu]) -> Interconnect | None:
    """What NCCL's topology search sees of the GPUs used (NVML's NVLink counts, whether they
    reach an NVSwitch, multicast support, the smallest compute capability)."""
    if len(gpus) < 2:
        return None
    active = [g.nvlink.active for g in gpus if g.nvlink is not None and g.nvlink.active is not None]
    ccs = sorted((mm, g.compute_capability) for g in gpus if (mm := major_minor(g.compute_capability)))
    return Interconnect(
        nvlinks=min(active) if active and len(active) == len(gpus) else None,
        nvswitch=_all([g.nvlink.to_switch if g.nvlink is not None else None for g in gpus]),
        compute_capability=ccs[0][1] if ccs and len(ccs) == len(gpus) else None,
        multicast=_all([g.multicast_supported for g in gpus]),
    )
