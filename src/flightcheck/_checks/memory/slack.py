"""FC406 — what vLLM allocates before its memory snapshot must fit outside its budget."""

from __future__ import annotations

from collections.abc import Iterator

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok
from flightcheck._knowledge import engines
from flightcheck._knowledge.units import gib as _gib
from flightcheck._vocabulary.results import ERROR, WARNING


@check("FC406", "startup-slack-too-small", ERROR)
def startup_slack_too_small(ctx: Context) -> Iterator[Outcome]:
    """What is on the GPU when vLLM takes its memory snapshot does not fit in the
    ``(1 - gpu_memory_utilization)`` share of it.

    ## What it checks
    vLLM takes its baseline snapshot after the CUDA context, the cuBLAS handles, NCCL's
    communicators and the custom all-reduce buffers exist, then asks for
    ``ceil(total x gpu_memory_utilization)`` (``total`` as CUDA reports it: the board's
    memory less the driver's reservation). The memory already in use on the busiest GPU
    used (other processes, from NVML), plus those allocations (0.35 GiB context; with several
    ranks the TP group's NCCL communicator and custom all-reduce's buffers), must fit in
    ``total - requested``. The communicator's size is derived from NCCL's source
    (``flightcheck._knowledge.nccl``) where it is pinned down: on one NVSwitch node, its
    channels (24 on H100 / H200 / A100, 32 on B200) x the P2P buffers of each ring and tree
    connection, plus NVLS's when the GPUs report multicast; NCCL connects at init only when
    cuMem is off (NCCL_CUMEM_ENABLE=0 or NCCL_RUNTIME_CONNECT=0), else on first use, which
    makes nothing certain. Elsewhere (PCIe, partial NVLink, unknown links) an estimate: 0.5 GiB
    over NVLink, 0.1 GiB over PCIe. An error when what is certain (memory in use, the context,
    a communicator connected at init) does not fit; a warning when the estimate tips it.
    Before vLLM 0.11.0 the snapshot precedes the distributed init: the communicators count
    inside the KV budget instead (FC402). ``--kv-cache-memory-bytes`` skips the utilization,
    and this check.

    ## Why the launch dies
    Each worker raises at startup, before loading a weight: "Free memory on device
    (free/total GiB) on startup is less than desired GPU memory utilization (util, N GiB)".

    ## How to fix
    Lower ``--gpu-memory-utilization`` to the value in the fix (it leaves room for what is
    there), or free the GPUs of other processes.
    """
    m = ctx.memory
    if m is None or engines.get(m.engine).memory.budget != "total":
        raise Skip("vLLM launches with a --model only")
    if m.kv_cache_memory_bytes is not None:
        raise Skip(f"{engines.flag('vllm', 'kv_cache_memory_bytes')} bypasses the utilization")
    if m.total is None or m.utilization is None:
        raise Skip(f"GPU memory unknown ({m.gpu_error})")
    from flightcheck._memory.budget import usable_bytes

    requested = usable_bytes(m.total, m.utilization)
    slack = m.total - requested
    pre = m.pre_snapshot()
    others = m.used_by_others or 0
    certain = others + m.pre_snapshot_certain()
    estimate = others + sum(pre.values())
    ev = {
        "slack_bytes": slack,
        "in_use_bytes": others,
        "pre_snapshot_bytes": sum(pre.values()),
        "pre_snapshot_certain_bytes": certain - others,
    }
    if estimate <= slack:
        yield ok(
            f"{_gib(estimate)} in use or allocated before vLLM's snapshot fits in the "
            f"{_gib(slack)} outside gpu_memory_utilization {m.utilization:g}",
            evidence=ev,
        )
        return
    util = max(0.0, (m.total - estimate) / m.total - 0.005)
    util = int(util * 100) / 100
    parts = ", ".join(f"{k.replace('_', ' ')} ~{_gib(v)}" for k, v in pre.items())
    yield fail(
        f"vLLM asks for {_gib(requested)} of {_gib(m.total)} (gpu_memory_utilization {m.utilization:g}) "
        f"but {_gib(others)} is already in use on a GPU and it allocates about {_gib(sum(pre.values()))} "
        f"({parts}) before its snapshot: only {_gib(slack)} is outside its share; it would raise "
        "'Free memory on device ... is less than desired GPU memory utilization'",
        fix=f"{engines.flag('vllm', 'util')} {util:.2f}",
        evidence=ev,
        severity=ERROR if certain > slack else WARNING,
    )
