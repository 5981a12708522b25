"""The ``checkpoint`` section as an active probe: files, sizes and header hashes of the
model named by ``--model``, so nodes can be compared without moving data.

It runs when asked for (``collect --model``, the Ray node task), never for ``check``:
``check`` reads the checkpoint itself, fully, through the FC4xx/FC5xx checks.
"""

from __future__ import annotations

from typing import Any

from flightcheck._collect import CollectContext, probe
from flightcheck._vocabulary.errors import UsageError
from flightcheck._vocabulary.facts import Facts


# The checkpoint is always read from disk, never taken from a snapshot (the contract): a
# recorded section in a --facts file does not stand in for the model named now.
@probe(
    "checkpoint",
    "checkpoint",
    timeout=300.0,
    overrides_files=True,
    wanted=lambda cctx: bool(cctx.intent.model) and "checkpoint" in cctx.probes,
)
def collect_checkpoint(cctx: CollectContext, facts: Facts) -> dict[str, Any]:
    """The section; a model this node cannot read leaves it without files, with the reason
    in ``unavailable`` (FC802 then names the node) instead of losing the node's other facts."""
    from flightcheck._checkpoint import checkpoint_section

    try:
        section = checkpoint_section(cctx.intent)
    except UsageError as exc:
        return {"checkpoint": None, "unavailable": {"checkpoint": str(exc)}}
    unavailable = {}
    if section.get("path") is None:
        unavailable["checkpoint"] = f"model {cctx.intent.model} not found on this node"
    return {"checkpoint": section, "unavailable": unavailable}
