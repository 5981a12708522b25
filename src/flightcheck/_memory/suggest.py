"""What would fit: computed by re-running the memory model, never guessed.

- the smallest layout (TP, then PP, valid for the model), with expert parallelism tried
  for MoE models, that fits weights and one max-length sequence;
- whether an fp8 KV cache would fit, and up to which length;
- the largest max_model_len that fits as launched (``max_model_len_fit``);
- the gpu_memory_utilization (SGLang: mem_fraction_static) that would make it fit,
  capped at 0.98.
"""

from __future__ import annotations

import msgspec

from flightcheck._knowledge import engines
from flightcheck._memory.layout import problems
from flightcheck._memory.model import MemoryModel
from flightcheck._memory.weights import Layout

TP_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)
PP_CANDIDATES = (1, 2, 4, 8)
MAX_UTILIZATION = 0.98


class LayoutFit(msgspec.Struct, frozen=True):
    layout: Layout
    gpus: int
    weights: float
    max_len_fit: int


def smallest_layout(
    m: MemoryModel, gpus_available: int | None = None, *, need_len: bool = True, vary_pp: bool = True
) -> LayoutFit | None:
    """The smallest valid layout where everything fits (``need_len=False``: the weights).

    Candidates are TP (powers of two, valid for the model: heads, quantization blocks) x PP
    (as launched or more) with expert parallelism tried for MoE models; DP is kept as
    launched. Fewest GPUs first; on a tie, more TP before more PP (one NVLink domain), EP
    off before on. ``vary_pp=False`` keeps PP as launched. ``gpus_available`` bounds the
    search when known, else up to TP 64 x PP 8. TP stays within a node of ``m.node_gpus``
    GPUs when that is known (TP over the network is what FC202 refuses on such a node, and
    what NCCL runs slowest): more GPUs are pipeline stages across nodes.
    """
    if m.cfg is None or m.tally is None or m.total is None:
        return None
    base = m.layout
    candidates = []
    for tp in TP_CANDIDATES:
        if m.node_gpus and tp > max(m.node_gpus, base.tp):
            continue  # (the launch's own TP is kept as a candidate: it was chosen)
        for pp in sorted({base.pp, *(p for p in PP_CANDIDATES if vary_pp and p > base.pp)}):
            for ep in (False, True) if m.cfg.moe else (False,):
                # PCP kept as launched; DCP kept where it still divides TP (vllm/config/parallel.py)
                dcp = base.dcp if base.pcp > 1 or tp % base.dcp == 0 else 1
                lay = Layout(tp, pp, base.dp, ep, base.pcp, dcp)
                candidates.append((tp * pp * base.pcp * base.dp, pp, ep, lay))
    for gpus, _pp, _ep, lay in sorted(candidates, key=lambda c: c[:3]):
        if gpus_available is not None and gpus > gpus_available:
            return None
        if problems(m.cfg, lay):
            continue
        f = m.fit(lay)
        if f is None:
            return None
        if f.fits if need_len else f.weights_fit:
            return LayoutFit(lay, gpus, f.weights, f.max_model_len_fit)
    return None


def fp8_kv(m: MemoryModel) -> tuple[bool, int] | None:
    """(fits with an fp8 KV cache, largest length then) — None if already fp8 or unknown."""
    if (m.kv_cache_dtype or "auto").startswith("fp8"):
        return None
    f = m.fit(kv_dtype="fp8")
    if f is None or not f.weights_fit:
        return None
    return f.kv_fits and f.max_model_len_fit > 0, f.max_model_len_fit


def utilization_that_fits(m: MemoryModel) -> float | None:
    """The smallest gpu_memory_utilization / mem_fraction_static (step 0.01, up to 0.98)
    where it fits (None with --kv-cache-memory-bytes, which ignores the utilization)."""
    if (
        m.total is None
        or m.utilization is None
        or (m.kv_cache_memory_bytes is not None and engines.get(m.engine).memory.kv_bytes_override)
    ):
        return None
    u = round(m.utilization + 0.01, 2)
    while u <= MAX_UTILIZATION:
        f = m.fit(utilization=u)
        if f is not None and f.fits:
            return u
        u = round(u + 0.01, 2)
    return None


def flag(name: str, engine: str) -> str:
    """The engine's spelling of a suggested option."""
    return engines.flag(engine, name)
