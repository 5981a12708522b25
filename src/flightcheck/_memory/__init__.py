"""The memory model (``spec/memory.md``): will the launch's weights and one max-length
sequence of KV cache fit on each GPU it uses, and if not, what layout, KV dtype or length
would?

``model_for_context(ctx)`` is ``Context.memory``: built from the checkpoint's grouped
headers and config.json (``ctx.checkpoint``), the launch (``ctx.intent``) and the GPUs
used (``ctx.gpus_used``). Submodules: ``config`` (config.json), ``classes`` (which share of
each tensor a rank holds), ``weights`` (per-rank bytes, PP stages, padding), ``kv`` (KV
bytes per token), ``budget`` (utilization, reserve), ``layout`` (valid layouts),
``model`` (the :class:`MemoryModel`), ``suggest`` (what would fit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flightcheck._memory.config import ModelConfig, parse
from flightcheck._memory.model import MemoryModel, resolve_reserve, resolve_utilization
from flightcheck._memory.weights import Layout, tally

if TYPE_CHECKING:
    from flightcheck._checkpoint import Checkpoint
    from flightcheck._checks.framework import Context
    from flightcheck._vocabulary.intent import Intent

__all__ = ["Layout", "MemoryModel", "ModelConfig", "build", "model_for_context"]


def model_for_context(ctx: Context) -> MemoryModel:
    """The memory model of this launch on this node (a bug while building it is kept in
    ``crash``: computed once, not raised again by every FC4xx check)."""
    try:
        return _for_context(ctx)
    except Exception as exc:  # noqa: BLE001 - kept in m.crash, reported by FC4xx
        m = MemoryModel(engine=ctx.intent.engine)
        m.crash = f"{type(exc).__name__}: {exc}"
        m.error = f"computing the memory model failed: {m.crash}"
        return m


def _for_context(ctx: Context) -> MemoryModel:
    from flightcheck._knowledge.derived import package

    gpus = ctx.gpus_used
    totals = [g.memory_total_bytes for g in gpus if g.memory_total_bytes]
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
    )
    m.gpu_error = gpu_error
    return m


def build(
    ck: Checkpoint | None,
    intent: Intent,
    *,
    total: int | None,
    gpu_name: str | None = None,
    engine_version: str | None = None,
) -> MemoryModel:
    """The memory model from a checkpoint and a launch (``total``: bytes of the smallest GPU used)."""
    m = MemoryModel(
        engine=intent.engine,
        layout=Layout(
            intent.tensor_parallel_size,
            intent.pipeline_parallel_size,
            intent.data_parallel_size,
            bool(intent.enable_expert_parallel),
        ),
        kv_cache_dtype=intent.kv_cache_dtype or "auto",
        requested_len=intent.max_model_len,
        total=total,
        gpu_name=gpu_name,
        eager="--enforce-eager" in (intent.engine_flags or []),
        engine_version=engine_version,
    )
    if ck is not None and ck.crash:
        m.error = f"reading the checkpoint failed: {ck.crash}"
        return m
    if ck is None or not ck.found:
        m.error = "the model was not found (FC501)"
        return m
    if ck.config is None:
        m.error = f"{ck.config_error} (FC507)"
        return m
    m.cfg = parse(ck.config, ck.hf_quant)
    if m.cfg.missing:
        m.error = f"config.json lacks {', '.join(m.cfg.missing)} (FC507)"
        return m
    groups = [
        (g.pattern, g.index, g.dtype, g.shape, g.nbytes, g.count, g.per_item)
        for s in ck.scanned
        if s.scan is not None  # always, for scanned shards: says so to mypy
        for g in s.scan.groups
    ]
    if not groups:
        m.error = "no shard header could be read (FC5xx)"
        return m
    if len(ck.scanned) < len(ck.shards):
        m.notes.append(f"{len(ck.shards) - len(ck.scanned)} shard(s) unreadable: weights are undercounted")
    m.tally = tally(groups, m.cfg)
    q = (intent.quantization or "").lower()
    m.online_fp8 = q == "fp8" and m.cfg.quant.method is None and m.cfg.dtype_bytes == 2
    if m.online_fp8:
        m.notes.append("--quantization fp8 on a 16-bit checkpoint: linear layers counted at 1 byte a weight")
    loaded = m.tally.total - m.tally.skipped
    m.load_bytes = -(-loaded // max(1, intent.nnodes))
    m.throughput = ck.throughput
    resolve_utilization(m, intent.gpu_memory_utilization)
    resolve_reserve(m, intent.reserve_gib)
    return m
