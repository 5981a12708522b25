"""Which multicast switches would change something for this launch: the facts the fallback
plan (``fallback.py``) asks before it adds a setting, so that it picks the cheapest switch
that works and leaves out every variable that changes nothing.

Each answer follows the installed release's code (cited where the rule is kept:
``_knowledge/vllm/`` and ``_knowledge/nccl.py``); None where that cannot be told.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flightcheck._knowledge import envread, vllm
from flightcheck._knowledge.derived import package
from flightcheck._knowledge.vllm import env as vllm_envs
from flightcheck._vocabulary.version import at_least

if TYPE_CHECKING:
    from flightcheck._checks.framework import Context


def env_on(ctx: Context, name: str) -> bool:
    """The launch's environment turns the vLLM variable ``name`` on (its getter's true)."""
    decl = vllm_envs.DECLARED.get(name)
    return bool(envread.given(decl, ctx.facts.env or {})) if decl is not None else False


def all_attributes_off(ctx: Context) -> bool:
    """Every GPU used reports CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED 0 (the GPU facts, else
    the probe's list): NCCL then builds no NVLS by itself (``nccl.NVLS_FORCED_VALUE``)."""
    used = ctx.gpus_used
    attrs = [g.multicast_supported for g in used]
    p = ctx.facts.multicast_probe
    if all(a is None for a in attrs) and p is not None and p.multicast_supported:
        attrs = (list(p.multicast_supported) + [None] * len(used))[: len(used)]
    return bool(attrs) and all(a is False for a in attrs)


def fi_backend_mnnvl(ctx: Context) -> bool | None:
    """On one node, the FlashInfer all-reduce backend this vLLM ends up with is mnnvl
    (multicast); None: this vLLM's version is unknown.

    ``mnnvl`` asked: yes. ``trtllm`` asked (or any other value): no. ``auto``: before 0.19.0
    vLLM hands it to FlashInfer, whose auto picks mnnvl (#34109); from 0.19.0 vLLM resolves
    it (#38136: trtllm on one node) until 0.25.0 makes it mnnvl (#47219). Unset: the release's
    default (trtllm in 0.17.0-0.18.x, auto from 0.19.0: envs.py)."""
    ver = package(ctx.facts, "vllm")
    asked = ((ctx.facts.env or {}).get(vllm.FLASHINFER_ALLREDUCE_BACKEND) or "").strip()
    if asked == "mnnvl":
        return True
    if asked not in ("", "auto"):
        return False
    resolved, mnnvl_auto = at_least(ver, vllm.FI_AUTO_RESOLVED_SINCE), at_least(ver, vllm.MNNVL_AUTO_SINGLE_NODE)
    if resolved is None or mnnvl_auto is None:
        return None
    if asked == "auto" and not resolved:
        return True  # FlashInfer's own auto: mnnvl
    backend = asked or vllm.env_default(vllm.FLASHINFER_ALLREDUCE_BACKEND, str(ver)) or "trtllm"
    return backend == "auto" and mnnvl_auto
