"""FC206–FC210 — the state of the GPUs used: memory in use, pending resets, MIG,
virtualization, lost GPUs. Part of the FC2 family; the :mod:`flightcheck._checks.gpu` package imports this module."""

from __future__ import annotations

from collections.abc import Iterator

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok
from flightcheck._checks.shared.gpus import gpu_label, subject, used_gpus
from flightcheck._knowledge import engines, sglang
from flightcheck._knowledge.derived import gpu_subject, mig_instances, package
from flightcheck._knowledge.units import GiB
from flightcheck._memory.budget import CONTEXT  # the CUDA context, before SGLang measures
from flightcheck._vocabulary.facts import Gpu
from flightcheck._vocabulary.results import ERROR, WARNING


def _utilization(ctx: Context) -> tuple[float, str] | None:
    if ctx.intent.gpu_memory_utilization is not None:
        return ctx.intent.gpu_memory_utilization, engines.flag(ctx.intent.engine, "util")
    engine = engines.get(ctx.intent.engine)
    default = engine.memory.in_use_utilization(package(ctx.facts, engine.package))
    if default is not None:
        return default, f"{engine.display}'s default gpu_memory_utilization"
    return None


@check(
    "FC206",
    "gpu-memory-in-use",
    ERROR,
    logs=(
        r"Free memory on device (?:\S+ )?\([\d.]+/[\d.]+ GiB\) on startup is less than desired GPU memory utilization",
    ),
)
def gpu_memory_in_use(ctx: Context) -> Iterator[Outcome]:
    """Memory already in use on a GPU leaves less free than the engine will claim.

    ## What it checks
    vLLM: on each GPU used, memory in use must not exceed (1 - gpu_memory_utilization) x
    total. SGLang: what the memory in use takes from its static pool and from the slack
    outside it (``--mem-fraction-static``, else SGLang's default for the GPU).

    ## Why the launch dies
    vLLM requests ``gpu_memory_utilization x total`` up front and refuses to start when less
    is free ("Free memory on device ... is less than desired GPU memory utilization") —
    another process (a stale engine, a notebook) still holds memory.

    SGLang 0.5.23 does not refuse memory in use: it sizes its pool as
    ``mem_fraction_static x free memory before loading - weights``
    (mem_cache/kv_cache_configurator.py ``_profile_available_bytes``), so memory held by
    another process costs ``mem_fraction_static x`` its size of KV cache and the rest of the
    activation / CUDA-graph slack. It raises only when no pool is left ("Loaded weights
    leave no GPU memory for the KV cache"): an error when the memory in use is what empties
    it, else a warning when it holds more than the slack SGLang planned, ``(1 -
    mem_fraction_static) x total``. Unequal use across the GPUs is FC407.

    ## How to fix
    Stop the processes holding the memory (the failure gives the ``nvidia-smi`` query), or
    lower ``--gpu-memory-utilization`` to what is free (vLLM).
    """
    gpus = used_gpus(ctx)
    if engines.get(ctx.intent.engine).memory.budget == "free":  # a fraction of what is free
        yield from _sglang_in_use(ctx, gpus)
        return
    util = _utilization(ctx)
    assert util is not None  # vLLM always has one
    frac, source = util
    full = False
    for g in gpus:
        total, used = g.memory_total_bytes, g.memory_used_bytes
        if total is None or used is None:
            continue
        if used > (1 - frac) * total:
            full = True
            fits = int((total - used) / total * 100) / 100
            yield fail(
                f"{gpu_label(g)}: {used / GiB:.1f} of {total / GiB:.1f} GiB already in use; "
                f"{source} {frac} needs {frac * total / GiB:.1f} GiB free",
                fix=(
                    "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv "
                    f"-i {g.index}  # stop those, "
                    f"or lower {engines.flag(ctx.intent.engine, 'util')} to {fits}"
                ),
                subject=gpu_subject(g),
                evidence={"used_bytes": used, "total_bytes": total, "utilization": frac},
            )
    if not full:
        yield ok(f"free memory covers {frac} of every GPU used")


def _sglang_in_use(ctx: Context, gpus: list[Gpu]) -> Iterator[Outcome]:
    """FC206 for SGLang (see the docstring): the fraction is the launch's, else the memory
    model's default for this GPU and layout, else SGLang's heuristic without the model's
    terms."""
    m = ctx.memory
    usable_model = m is not None and not m.error and m.utilization is not None and m.total is not None
    flag = engines.flag("sglang", "util")
    if ctx.intent.gpu_memory_utilization is not None:
        frac, source = ctx.intent.gpu_memory_utilization, flag
    elif usable_model:
        assert m is not None and m.utilization is not None
        frac, source = m.utilization, "SGLang's default mem_fraction_static"
    else:
        totals = [g.memory_total_bytes for g in gpus if g.memory_total_bytes]
        if not totals:
            raise Skip("GPU memory unknown")
        frac = sglang.mem_fraction_static(
            min(totals) / (1 << 20), ctx.intent.tensor_parallel_size, ctx.intent.pipeline_parallel_size
        )
        source = "SGLang's default mem_fraction_static (model terms unknown)"
    fit = m.fit() if usable_model and m is not None else None
    weights = fit.weights if fit is not None else None
    worst = False
    for g in gpus:
        total, used = g.memory_total_bytes, g.memory_used_bytes
        if total is None or used is None:
            continue
        used = max(0, used - (g.memory_reserved_bytes or 0))
        slack = (1 - frac) * total
        query = f"nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv -i {g.index}"
        ev = {"used_bytes": used, "total_bytes": total, "utilization": frac}
        if weights is not None and used > 0:
            free_now = total - used - CONTEXT
            if frac * free_now - weights <= 0 < frac * (total - CONTEXT) - weights:
                worst = True
                yield fail(
                    f"{gpu_label(g)}: {used / GiB:.1f} GiB in use leaves {source} {frac:g} x "
                    f"{free_now / GiB:.1f} GiB free = {frac * free_now / GiB:.1f} GiB, less than the "
                    f"{weights / GiB:.1f} GiB of weights: SGLang raises 'Loaded weights leave no GPU memory "
                    "for the KV cache'",
                    fix=f"{query}  # stop those; on a free GPU the pool fits",
                    subject=gpu_subject(g),
                    evidence=ev,
                )
                continue
        if used > slack:
            worst = True
            yield fail(
                f"{gpu_label(g)}: {used / GiB:.1f} GiB already in use, more than the {slack / GiB:.1f} GiB "
                f"SGLang keeps outside {source} {frac:g}: its KV pool shrinks by {frac * used / GiB:.1f} GiB "
                f"and the activation / CUDA-graph slack by {(1 - frac) * used / GiB:.1f} GiB",
                fix=f"{query}  # stop those to get the memory back",
                subject=gpu_subject(g),
                severity=WARNING,
                evidence=ev,
            )
    if not worst:
        yield ok(f"SGLang sizes its pool from free memory; what is in use is within the slack of {frac:g}")


@check("FC207", "gpu-needs-reset", WARNING)
def gpu_needs_reset(ctx: Context) -> Iterator[Outcome]:
    """A GPU used has a pending row remap (reset needed) or a failed remap (service needed).

    ## What it checks
    NVML's remapped-rows state on each GPU used: ``pending`` is a warning, ``failure`` an
    error.

    ## Why the launch dies
    A pending remap means uncorrectable memory errors were seen and the spare row takes
    effect only after a GPU reset; until then the same bad row can raise another Xid 48/94
    and kill the engine mid-run. A failed remap means no spare rows are left: the GPU must
    be serviced.

    ## How to fix
    Pending: stop work on the GPU and reset it (``nvidia-smi -r -i N``; on NVSwitch systems
    the whole reset sequence). Failure: take the GPU out of service (CUDA_VISIBLE_DEVICES)
    and open an RMA.
    """
    gpus = used_gpus(ctx)
    seen = bad = False
    for g in gpus:
        rows = g.remapped_rows
        if rows is None:
            continue
        seen = True
        bad = bad or bool(rows.failure or rows.pending)
        if rows.failure:
            yield fail(
                f"{gpu_label(g)}: row remapping failed (no spare rows left)",
                severity=ERROR,
                subject=gpu_subject(g),
                fix=f"take GPU {g.index} out of service (leave it out of CUDA_VISIBLE_DEVICES) "
                "and open an RMA with the vendor",
            )
        elif rows.pending:
            yield fail(
                f"{gpu_label(g)}: a row remap is pending until the GPU is reset",
                subject=gpu_subject(g),
                fix=f"stop work on GPU {g.index}, then `sudo nvidia-smi -r -i {g.index}` (NVSwitch systems: "
                "the reset sequence of FC304)",
            )
    if not seen:
        raise Skip("no GPU reports remapped rows (pre-Ampere, or MIG)")
    if not bad:
        yield ok("no remapped rows pending or failed")


@check(
    "FC208",
    "mig-enabled",
    ERROR,
    logs=(
        "MIG (?:mode|devices?) .*not supported",
        "CUDA_ERROR_NOT_SUPPORTED.*MIG",
    ),
)
def mig_enabled(ctx: Context) -> Iterator[Outcome]:
    """MIG is enabled on a GPU a launch of more than one rank per node uses.

    ## What it checks
    NVML's current MIG mode on each GPU used, and the MIG instances
    ``CUDA_VISIBLE_DEVICES`` names (``MIG-<uuid>``, which NVML's list of GPUs does not
    hold). One rank in one MIG instance is supported (vLLM's own CI runs TP 1 so): not a
    stop; a MIG-enabled GPU named by its index for one rank is a warning (the instance
    CUDA picks, and its memory, are not recorded).

    ## Why the launch dies
    Ranks spread over MIG instances cannot talk: CUDA gives a process one MIG device and
    NCCL has no peer path between instances, so a TP/PP group over them fails at the first
    collective, or earlier with an invalid device ordinal.

    ## How to fix
    ``sudo nvidia-smi -i N -mig 0`` (stop work on it first; some GPUs need a reset after),
    or run one rank per MIG instance (TP 1, one server per instance).
    """
    instances = mig_instances(ctx.facts)
    # (CUDA_VISIBLE_DEVICES naming instances only selects no GPU of NVML's list)
    mig = [g for g in (ctx.gpus_used if instances else used_gpus(ctx)) if g.mig_enabled]
    ranks = ctx.intent.gpus_per_node
    if not mig and not instances:
        yield ok("MIG is off on every GPU used")
        return
    if ranks <= 1:
        if instances:
            yield ok(f"one rank in the MIG instance {instances[0]}: supported")
        for g in mig:
            yield fail(
                f"{gpu_label(g)}: MIG is enabled; one rank runs in a MIG instance of it (supported), "
                "but which one CUDA picks, and its memory, are not recorded (and with no instance "
                "created CUDA sees no device there)",
                subject=gpu_subject(g),
                severity=WARNING,
                fix=f"name the instance: export CUDA_VISIBLE_DEVICES=MIG-<uuid>  (nvidia-smi -L lists them), "
                f"or turn MIG off: sudo nvidia-smi -i {g.index} -mig 0",
            )
        return
    for g in mig:
        yield fail(
            f"{gpu_label(g)}: MIG is enabled, and {ranks} ranks cannot run over MIG instances",
            subject=gpu_subject(g),
            fix=f"sudo nvidia-smi -i {g.index} -mig 0  "
            f"# then `sudo nvidia-smi -r -i {g.index}` if it says a reset is pending",
        )
    if instances:
        yield fail(
            f"CUDA_VISIBLE_DEVICES names MIG instances ({', '.join(instances[:3])}"
            f"{', ...' if len(instances) > 3 else ''}): {ranks} ranks cannot run over MIG instances "
            "(CUDA gives a process one MIG device; NCCL has no path between them)",
            subject="env:CUDA_VISIBLE_DEVICES",
            fix="launch TP 1 per MIG instance, or turn MIG off (sudo nvidia-smi -i N -mig 0) and name whole GPUs",
        )


@check("FC209", "gpu-virtualized", WARNING)
def gpu_virtualized(ctx: Context) -> Iterator[Outcome]:
    """A GPU used runs in passthrough or vGPU mode.

    ## What it checks
    NVML's virtualization mode of each GPU used is ``none`` (bare metal).

    ## Why the launch dies
    It may not, but in a VM the NVSwitch fabric, multicast and ``nvidia-smi -r`` belong to
    the hypervisor: fabric workarounds flightcheck suggests cannot be applied from inside,
    and vGPU profiles may not support NVLink multicast or peer access at all.

    ## How to fix
    Nothing to change if the launch works; for fabric failures ask the hypervisor or cloud
    operator to reset the GPUs and NVSwitches from the host.
    """
    virt = [g for g in used_gpus(ctx) if g.virtualization_mode not in (None, "none")]
    if virt:
        modes = sorted({g.virtualization_mode for g in virt if g.virtualization_mode is not None})
        yield fail(
            f"{len(virt)} GPU(s) in {'/'.join(modes)} mode: GPU resets and fabric fixes must come from the host",
            subject=subject(virt),
            evidence={"modes": modes},
            fix="if a fabric or multicast check fails, "
            "ask the hypervisor/cloud operator to reset the GPUs and NVSwitches",
        )
    else:
        yield ok("bare-metal GPUs")


@check(
    "FC210",
    "gpu-unreachable",
    ERROR,
    logs=("GPU is lost|Xid 79",),
)
def gpu_unreachable(ctx: Context) -> Iterator[Outcome]:
    """A GPU used is lost, needs a reset, or did not answer NVML.

    ## What it checks
    No GPU the launch uses reported "GPU is lost", "GPU requires reset", or hung an NVML
    query past the collector's timeout.

    ## Why the launch dies
    CUDA initialisation touches every visible GPU: a lost GPU (Xid 79, fallen off the bus)
    makes it fail or hang, and the engine never gets to load weights.

    ## How to fix
    ``sudo dmesg | grep -i xid`` names the GPU and error; reset it (``sudo nvidia-smi -r -i
    N``), or leave it out of CUDA_VISIBLE_DEVICES until it is serviced; a lost GPU usually
    needs a reboot or a power cycle.
    """
    bad = [g for g in used_gpus(ctx) if g.error]
    for g in bad:
        yield fail(
            f"GPU {g.index}: {g.error}",
            subject=gpu_subject(g),
            fix=f"sudo dmesg | grep -i xid; `sudo nvidia-smi -r -i {g.index}` or reboot; "
            f"until then leave GPU {g.index} out of CUDA_VISIBLE_DEVICES",
        )
    if not bad:
        yield ok("every GPU used answers NVML")
