"""The checkpoint on disk, read from its headers alone (never its tensors).

``load(model, ...)`` gives a :class:`Checkpoint`: the resolved model, its config, every
shard's validated header summary (scanned in parallel, cached per shard), the index
cross-check and the problems found, by kind (:mod:`.problems`). ``checkpoint_section(intent)``
is the facts snapshot's ``checkpoint`` section (``flightcheck collect --model``), which the
cross-node checks compare.

Submodules: ``reader`` (``load``: resolve, scan, cross-check), ``model`` (what it returns),
``problems`` (the kinds), ``resolve`` (path or HF cache), ``shardio`` (reading the directory's files,
never blocking), ``validate`` (one header, also the workers' body), ``scan`` (many
headers, parallel), ``workers`` (the worker processes, started before the reader is
imported when a directory will be read cold), ``index`` / ``crosscheck`` (the index
against the headers), ``cache`` (per-shard summaries; ``cachepath``: where its file is),
``section`` (the facts section), ``gguf`` (a GGUF header, bounded), ``ggufnames`` (a Flint
GGUF's tensors as the memory model's groups), ``guard`` (what root may read for a
directory's owner, ACLs included). The read for
a launch (with the engine's environment, and ``--deep``'s throughput) is
``flightcheck._collect.checkpoint.read_checkpoint``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flightcheck._checkpoint.model import Checkpoint, Finding, Shard
    from flightcheck._checkpoint.reader import load
    from flightcheck._checkpoint.section import checkpoint_section

__all__ = ["Checkpoint", "Finding", "Shard", "checkpoint_section", "load"]

# Resolved on first use (PEP 562): the checks import this package's small modules
# (``problems``) on every run, the reader (msgspec structs, the scan) only when a model is read.
_LAZY = {
    "Checkpoint": "model",
    "Finding": "model",
    "Shard": "model",
    "load": "reader",
    "checkpoint_section": "section",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def summary_line(ck: Checkpoint) -> str:
    """'96 shards, 1.56 TB, 390,611 tensors (cache warm, 0.04 s)' for the report headline."""
    if ck.unread:
        return ck.unread
    if not ck.found:
        return "model not found"
    from flightcheck._knowledge.units import si_bytes

    parts = [
        f"{len(ck.shards)} shard{'s' if len(ck.shards) != 1 else ''}",
        si_bytes(ck.total_bytes),
        f"{ck.tensor_count:,} tensors",
    ]
    return ", ".join(parts) + f" (headers read in {ck.seconds:.2f} s, cache {ck.cache})"
