"""FC303–FC305, FC309 — NVLS multicast: attribute, the bind probe, NCCL_NVLS_ENABLE, no probe.

Part of the FC3 family (the :mod:`flightcheck._checks.fabric` package imports this module).
The fallback knowledge (which settings the installed engine reads, when none can help) is in
:mod:`flightcheck._checks.fabric.fallback`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from flightcheck._checks.fabric.fallback import (
    Fallback,
    communicates,
    describe,
    multicast_fallback,
    multicast_paths,
    multicast_reach,
)
from flightcheck._checks.fabric.nvswitch import host_flags, nvswitch
from flightcheck._checks.framework import Context, Log, Outcome, Skip, check, fail, ok, unknown
from flightcheck._checks.shared.gpus import subject, used_gpus
from flightcheck._fixes.fabric import probe_hint
from flightcheck._vocabulary.results import ERROR, INFO, WARNING

#: Stages after which a hang means the multicast team itself is broken.
HANG_MEANS_BROKEN = ("add_device", "bind", "map")


def _communicates(ctx: Context) -> None:
    """Multicast is built by any group of GPUs that talk (an EP group at TP 1 runs NCCL too)."""
    if not communicates(ctx):
        raise Skip("one GPU: no collective, no multicast to fall back from")


def probe_state(p: Any) -> str:
    """ok | unsupported | no-cuda | failed | inconclusive for a recorded probe result."""
    if p.ok:
        return "ok"
    if p.stage == "attribute" and p.cuda_error is None:
        return "unsupported"  # attribute 132 is 0, or the driver predates multicast
    if p.stage == "attribute" and p.last_stage == "init":
        return "no-cuda"  # cuInit / a context failed: every launch dies, multicast or not
    if p.stage == "timeout":
        if p.budget_s is not None:
            return "inconclusive"  # the plugin's time budget ran out: never a stop on a hang there
        return "failed" if p.last_stage in HANG_MEANS_BROKEN else "inconclusive"
    if p.stage == "mem_create" and p.cuda_error == 2:
        return "inconclusive"  # the GPUs are full: FC206's business, not the fabric's
    return "failed"


def probe_time(p: Any) -> str:
    """The probe's cost as the report says it: its seconds, or that this boot's cached
    verdict answered (probed at ..., keyed by boot, fabric-manager start, driver, GPUs)."""
    secs = f"{p.duration_s:.2f}s" if p.duration_s is not None else "time unknown"
    if p.cached:
        return f"this boot's verdict from the cache, probed at {p.probed_at or '?'} in {secs}"
    return secs


def apply_text(fb: Fallback) -> str:
    """How to apply the plan: `flightcheck run`, or by hand."""
    env = " ".join(f"{s.name}={s.value}" for s in fb.steps if s.kind == "env")
    args = [f"drop {s.name}" for s in fb.steps if s.kind == "drop_arg"]
    args += [f"add {s.name} {s.value}" for s in fb.steps if s.kind == "add_arg"]
    text = "`flightcheck run -- <engine command>` applies the fallback plan; by hand: " + (
        f"export {env}" if env else ""
    )
    if args:
        text += ("; " if env else "") + "; ".join(args)
    return "\n".join([text, *fb.notes])


def _attributes(ctx: Context, gpus: list[Any]) -> list[bool | None] | None:
    attrs = [g.multicast_supported for g in gpus]
    if any(a is not None for a in attrs):
        return attrs
    p = ctx.facts.multicast_probe
    if p is not None and p.multicast_supported:
        return (list(p.multicast_supported) + [None] * len(gpus))[: len(gpus)]
    return None


@check("FC303", "multicast-unsupported", WARNING)
def multicast_unsupported(ctx: Context) -> Iterator[Outcome]:
    """More than one GPU and a GPU used reports no multicast support: the plan turns multicast off.

    ## What it checks
    CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED on each GPU used (read by the multicast probe:
    a driver attribute, not an NVML one), when more than one GPU communicates (TP, PP, DP or EP:
    a TP-1 expert-parallel launch runs NCCL across its GPUs too).

    ## Why the launch dies
    Most multicast users check the attribute and step aside, but not all: FlashInfer's mnnvl
    all-reduce and fused kernels such as Kimi-K3's latent MoE tail assume NVLS and fail while
    the model is built or at CUDA-graph capture.

    ## How to fix
    Nothing to repair on the node: keep the engine off the multicast paths. The fallback
    plan sets the switches the installed engine reads; ``flightcheck run`` applies it. Where
    no switch exists (Kimi-K3's latent MoE tail, Beam's all-reduce workspace) use the layout the
    message names.
    """
    _communicates(ctx)
    gpus = used_gpus(ctx)
    attrs = _attributes(ctx, gpus)
    if attrs is None:
        raise Skip("the multicast attribute is read by the multicast probe (--deep); see FC309")
    off = [g for g, a in zip(gpus, attrs, strict=False) if a is False]
    if not off:
        yield ok("multicast supported on every GPU used")
        return
    fb = multicast_fallback(ctx, attribute_off=True)
    msg = f"multicast is not supported on {len(off)} of {len(gpus)} GPUs used"
    if fb.blocker:
        yield fail(
            f"{msg}. {fb.blocker}",
            severity=ERROR,
            subject=subject(off),
            evidence=describe(fb.steps, fb.notes),
            fix="use a layout the message names; no setting keeps this launch off multicast",
        )
        return
    yield fail(
        f"{msg}: the fallback plan keeps the engine off multicast",
        subject=subject(off),
        plan=fb.steps,
        fix=apply_text(fb),
        evidence=describe(fb.steps, fb.notes),
    )


@check(
    "FC304",
    "multicast-bind-failed",
    WARNING,
    logs=(
        r"Failed to bind NVLink SHARP \(NVLS\) Multicast memory",
        r"(?:transport/nvls\.cc|cuMulticast\w+).*(?:CUDA error|Cuda failure) 401",
        "Cuda failure 401 'the operation cannot be performed in the present state'",
        Log("CUDA_ERROR_ILLEGAL_STATE", frames=r"rendezvous|[Mm]ulticast|symm_mem|[Nn]vls"),
        "(?:multicast|symm_mem|rendezvous).*(?:operation cannot be performed in the present state)",
        "(?:[Mm]ulticast|symm_mem|rendezvous|NVLS).*(?:system not yet initialized|CUDA error 802|SYSTEM_NOT_READY)",
        Log(
            r"CUDA driver error: (?:system not yet initialized|the operation cannot be performed in the present state)",
            frames=r"rendezvous|[Mm]ulticast|symm_mem",
            note="raised in torch's symmetric-memory rendezvous: the multicast path (802: the fabric manager has "
            "not set up the multicast team; 401: the table is broken)",
        ),
    ),
)
def multicast_bind_failed(ctx: Context) -> Iterator[Outcome]:
    """The multicast probe could not bind NVLS multicast memory on the GPUs used.

    ## What it checks
    The active probe (the vLLM plugin wherever the launch reaches a multicast path on an
    NVSwitch node, ``--deep``, ``flightcheck run``, ``flightcheck probe multicast``) ran the
    sequence engines run — create, add every device, allocate, bind, map — in a child
    process, with the handle type PyTorch will pick; its verdict is cached for the boot
    (keyed by boot id, fabric-manager start, driver version and GPU UUIDs). Any failing
    CUDA call, or a hang at add/bind/map, fails this check; in the plugin a hang cut by its
    time budget is unknown, never a stop.

    ## Why the launch dies
    The NVSwitch multicast team is set up at run time; after a warm reboot or a fabric
    manager restart without a GPU reset it can be broken while the fabric reports
    ``Completed``. ``cuMulticastBindMem`` then fails with CUDA_ERROR_ILLEGAL_STATE (401)
    inside torch symmetric memory, after the weights have loaded, and ``NCCL_NVLS_ENABLE=0``
    does not help because that path never goes through NCCL.

    ## How to fix
    For this launch: the fallback plan turns the multicast paths off (``flightcheck run``
    applies it). For the node: stop CUDA work and DCGM, ``systemctl stop
    nvidia-fabricmanager``, ``nvidia-smi -r``, ``systemctl start nvidia-fabricmanager``
    (validated on bare metal). When the model needs multicast with no switch (Kimi-K3's
    latent MoE tail at MoE TP 8/16 on SM100, Beam's all-reduce at TP 2/4/8, vLLM >= 0.33) this is
    an error and the message
    names a layout that avoids it.
    """
    _communicates(ctx)
    used_gpus(ctx)
    p = ctx.facts.multicast_probe
    if p is None:
        why = ctx.facts.unavailable.get("multicast_probe")
        raise Skip(f"the multicast probe did not run: {why}" if why else "the multicast probe did not run (see FC309)")
    state = probe_state(p)
    if state == "ok":
        yield ok(f"multicast bind ok on {p.devices} GPUs ({p.handle_type} handles, {probe_time(p)})")
        return
    if state == "unsupported":
        raise Skip("multicast is not supported here (FC303)")
    if state == "inconclusive":
        yield unknown(f"the multicast probe was inconclusive: {p.detail or p.cuda_error_name}")
        return
    hint = probe_hint(p, **host_flags(ctx))
    if state == "no-cuda":
        yield fail(
            f"CUDA cannot start on this node ({p.detail}: {p.cuda_error_name} {p.cuda_error}); no engine setting helps",
            severity=ERROR,
            fix=hint,
            evidence={"probe": {"stage": p.stage, "cuda_error": p.cuda_error, "detail": p.detail}},
        )
        return
    where = f"{p.stage}" + (f" (device {p.device})" if p.device is not None else "")
    err = f"CUDA error {p.cuda_error} {p.cuda_error_name}" if p.cuda_error is not None else (p.detail or "failed")
    msg = f"multicast probe failed at {where}: {err} on {p.devices} GPUs ({p.handle_type} handles" + (
        f"; {probe_time(p)})" if p.cached else ")"
    )
    fb = multicast_fallback(ctx)
    ev = {
        "probe": {
            k: getattr(p, k)
            for k in ("stage", "cuda_error", "cuda_error_name", "device", "devices", "handle_type", "detail")
        },
        **describe(fb.steps, fb.notes),
    }
    if fb.blocker or not fb.steps:
        why = fb.blocker or "no setting of the installed engine turns its multicast paths off"
        yield fail(f"{msg}. {why}", severity=ERROR, fix=hint, evidence=ev)
        return
    yield fail(
        f"{msg}: the fallback plan turns the multicast paths off",
        fix=f"{apply_text(fb)}\n{hint}",
        plan=fb.steps,
        evidence=ev,
    )


@check("FC305", "nccl-nvls-env-ineffective", INFO)
def nccl_nvls_env_ineffective(ctx: Context) -> Iterator[Outcome]:
    """NCCL_NVLS_ENABLE=0 is set, but multicast paths outside NCCL are still on.

    ## What it checks
    With NCCL_NVLS_ENABLE=0 in the engine's environment and more than one GPU: torch symmetric
    memory (vLLM's all-reduce, CustomAllreduce's MNNVL buffers), FlashInfer's mnnvl all-reduce,
    an NVSHMEM or MoonEP all2all, Kimi-K3's latent MoE tail or Beam's all-reduce is still on.

    ## Why the launch dies
    NCCL_NVLS_ENABLE only steers NCCL. The other paths call the CUDA driver directly, so on
    a node whose multicast is broken the launch still dies with CUDA error 401 after the
    load — the setting does not do what it is usually set for.

    ## How to fix
    Turn the other paths off as well (the fix lists the variables the installed engine
    reads), or let ``flightcheck run`` apply the fallback plan when multicast is broken.
    """
    if (ctx.facts.env or {}).get("NCCL_NVLS_ENABLE") != "0":
        raise Skip("NCCL_NVLS_ENABLE is not 0")
    _communicates(ctx)
    paths = multicast_paths(ctx)
    if not paths:
        yield ok("no multicast path outside NCCL is on")
        return
    fb = multicast_fallback(ctx)
    yield fail(
        f"NCCL_NVLS_ENABLE=0 turns off only NCCL's NVLS; still on: {', '.join(paths)}",
        fix=apply_text(fb),
        evidence={"paths": paths},
    )


@check("FC309", "multicast-probe-unavailable", INFO)
def multicast_probe_unavailable(ctx: Context) -> Iterator[Outcome]:
    """More than one GPU on an NVSwitch system and the multicast probe has not run.

    ## What it checks
    A multicast probe result exists for a launch whose GPUs communicate on an
    NVSwitch system (status ``unknown`` when it does not: not ``--deep``, no CUDA driver
    library, a timeout).

    ## Why the launch dies
    A fabric in state ``Completed`` does not prove the multicast tables work; only a bind
    does. Without the probe a broken table shows up as CUDA error 401 after the load.

    ## How to fix
    ``flightcheck check --deep`` (or ``flightcheck probe multicast``); ``flightcheck run``
    always probes, the vLLM plugin wherever the launch reaches a multicast path
    (``FLIGHTCHECK_PROBE=0`` turns that off).
    """
    _communicates(ctx)
    used_gpus(ctx)
    if nvswitch(ctx) is False:
        raise Skip("no NVSwitch: no NVLS multicast")
    p = ctx.facts.multicast_probe
    if p is None and not multicast_reach(ctx):
        raise Skip("no multicast path is on for this launch: nothing to probe")
    if p is None:
        why = ctx.facts.unavailable.get("multicast_probe") or "not requested: no --deep"
        yield unknown(
            f"the multicast probe did not run ({why}); "
            "`flightcheck check --deep` or `flightcheck probe multicast` runs it"
        )
    elif probe_state(p) == "inconclusive":
        yield unknown(f"the multicast probe was inconclusive: {p.detail}")
    else:
        yield ok(f"the multicast probe ran ({'ok' if p.ok else 'failed: FC303/FC304'})")
