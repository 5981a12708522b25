"""FC407 — SGLang refuses GPUs whose free memory differs by more than 10%.

SGLang 0.5.23, distributed/bootstrap.py ``measure_pre_model_load_memory``: with TP > 1,
after the distributed init and before the weights, each rank compares the minimum free
memory across the ranks (``get_available_gpu_memory(distributed=True)``, utils/common.py:
an all-reduce MIN of ``torch.cuda.mem_get_info``) with its own; ``_check_tp_memory_balance``
raises RuntimeError "The memory capacity is unbalanced. Some GPUs may be occupied by other
processes." when the minimum is below 0.9 x its own — a warning instead when
SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK is false (environ.py, true by default).
"""

from __future__ import annotations

from collections.abc import Iterator

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok
from flightcheck._checks.shared.gpus import used_gpus
from flightcheck._knowledge import engines, sglang
from flightcheck._knowledge.derived import gpu_subject
from flightcheck._knowledge.units import gib as _gib
from flightcheck._vocabulary.facts import Gpu
from flightcheck._vocabulary.results import ERROR, WARNING


def _free(g: Gpu) -> int | None:
    """What ``torch.cuda.mem_get_info`` reports free on ``g`` (CUDA's total, the driver's
    reservation off, less what is in use), or None when NVML did not say."""
    total, used = g.memory_total_bytes, g.memory_used_bytes
    if total is None or used is None:
        return None
    reserved = g.memory_reserved_bytes or 0
    return max(0, (total - reserved) - max(0, used - reserved))


@check(
    "FC407",
    "sglang-memory-unbalanced",
    ERROR,
    logs=(r"The memory capacity is unbalanced\. Some GPUs may be occupied by other processes",),
)
def sglang_memory_unbalanced(ctx: Context) -> Iterator[Outcome]:
    """The GPUs of an SGLang launch have free memory more than 10% apart.

    ## What it checks
    For SGLang launches with TP > 1, on the GPUs of each group of ``tp x pp`` ranks here:
    the smallest free memory (NVML's total less what is in use) against 0.9 x the largest.

    ## Why the launch dies
    SGLang 0.5.23 measures every rank's free memory after the distributed init and raises
    "The memory capacity is unbalanced. Some GPUs may be occupied by other processes."
    (distributed/bootstrap.py ``_check_tp_memory_balance``) when the minimum is below 0.9 x
    a rank's own — before a weight is loaded. Only a warning when
    SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=0.

    ## How to fix
    Stop what holds memory on the busier GPUs (the fix lists the ``nvidia-smi`` query), or
    leave those GPUs out of CUDA_VISIBLE_DEVICES.
    """
    intent = ctx.intent
    if not engines.get(intent.engine).memory.balance_check:
        raise Skip("SGLang launches only (vLLM has no such check)")
    if intent.tensor_parallel_size <= 1:
        raise Skip("TP 1: SGLang checks the balance only when tp_size > 1")
    gpus = used_gpus(ctx)
    raises = sglang.unbalanced_raises(ctx.facts.env or {})
    group = max(1, intent.tensor_parallel_size * intent.pipeline_parallel_size)
    seen = bad = False
    for start in range(0, len(gpus), group):
        members = gpus[start : start + group]
        frees = [(g, _free(g)) for g in members]
        known = [(g, f) for g, f in frees if f is not None]
        if len(known) < 2 or len(known) < len(members):
            continue
        seen = True
        low_gpu, low = min(known, key=lambda x: x[1])
        high_gpu, high = max(known, key=lambda x: x[1])
        if low >= sglang.UNBALANCED_RATIO * high:
            continue
        bad = True
        busy = [g for g, f in known if f < high * sglang.UNBALANCED_RATIO]
        idx = ",".join(str(g.index) for g in busy)
        yield fail(
            f"free memory on the GPUs of this SGLang launch ranges from {_gib(low)} (GPU {low_gpu.index}) to "
            f"{_gib(high)} (GPU {high_gpu.index}): below {sglang.UNBALANCED_RATIO:g} x, so SGLang "
            + (
                "raises 'The memory capacity is unbalanced' before loading"
                if raises
                else f"warns ({sglang.UNBALANCED_CHECK_ENV} is off) and sizes every rank's KV pool from the smallest"
            ),
            fix=f"nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv -i {idx}  "
            "# stop those processes, or leave those GPUs out of CUDA_VISIBLE_DEVICES",
            subject=gpu_subject(low_gpu),
            severity=ERROR if raises else WARNING,
            evidence={"min_free_bytes": low, "max_free_bytes": high, "ratio": round(low / high, 4) if high else 0},
        )
    if not seen:
        raise Skip("NVML did not report the memory in use on the GPUs used")
    if not bad:
        yield ok(f"free memory on the GPUs used is within {1 - sglang.UNBALANCED_RATIO:.0%} of each other")
