"""The checkpoint on disk, read from its headers alone (never its tensors).

``load_for_context(ctx)`` is what ``Context.checkpoint`` returns: the resolved model, its
config, every shard's validated header summary (scanned in parallel, cached per shard),
the index cross-check and the findings for the FC5xx checks. ``checkpoint_section(intent)``
is the facts snapshot's ``checkpoint`` section (``flightcheck collect --model``), which the
cross-node checks compare.

Submodules: ``resolve`` (path or HF cache), ``shardio`` (reading the directory's files,
never blocking), ``validate`` (one header, also the workers' body), ``scan`` (many
headers, parallel), ``index`` / ``crosscheck`` (the index against the
headers), ``cache`` (per-shard summaries), ``section`` (the facts section), ``throughput``
(``--deep`` read speed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flightcheck._checkpoint.load import Checkpoint, Finding, Shard, load
from flightcheck._checkpoint.section import checkpoint_section

if TYPE_CHECKING:
    from flightcheck._checks.framework import Context

__all__ = ["Checkpoint", "Finding", "Shard", "checkpoint_section", "load", "load_for_context"]


def load_for_context(ctx: Context) -> Checkpoint:
    """Read the checkpoint of ``ctx.intent.model`` (the engine's HF cache env from the facts)."""
    from flightcheck._checkpoint.resolve import env_views

    intent = ctx.intent
    try:
        ck = load(
            intent.model or "",
            revision=intent.revision,
            envs=tuple(env_views(ctx.facts.env)),
            download_dir=intent.download_dir,
        )
    except Exception as exc:  # noqa: BLE001 - a bug here must not be retried by every FC4xx/FC5xx check
        from flightcheck._checkpoint.resolve import Resolved

        return Checkpoint(Resolved(model=intent.model or ""), crash=f"{type(exc).__name__}: {exc}")
    if intent.deep and ck.found and ck.shards:
        from flightcheck._collect.throughput import measure

        ck.throughput = measure([s.path for s in ck.shards if s.scan is not None and s.size > 0])
    return ck


def summary_line(ck: Checkpoint) -> str:
    """'96 shards, 1.56 TB, 390,611 tensors (cache warm, 0.04 s)' for the report headline."""
    if not ck.found:
        return "model not found"
    from flightcheck._knowledge.units import si_bytes

    parts = [
        f"{len(ck.shards)} shard{'s' if len(ck.shards) != 1 else ''}",
        si_bytes(ck.total_bytes),
        f"{ck.tensor_count:,} tensors",
    ]
    return ", ".join(parts) + f" (headers read in {ck.seconds:.2f} s, cache {ck.cache})"
