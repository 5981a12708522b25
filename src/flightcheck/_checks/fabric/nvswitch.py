"""FC3xx — NVLink fabric and multicast: fabric manager, fabric state and health, IMEX, links.

FC303–FC305 and FC309 (multicast) live in :mod:`.multicast`; the package imports both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from flightcheck._checks.framework import Context, Missing, Outcome, Skip, check, fail, ok, summary
from flightcheck._checks.shared.gpus import subject, used_gpus
from flightcheck._fixes.fabric import fabric_manager_install, imex_channel, reset_sequence
from flightcheck._knowledge.derived import ZERO_UUID, multi_node_nvlink_member, nvlink_domain
from flightcheck._vocabulary.facts import Gpu
from flightcheck._vocabulary.results import ERROR, WARNING


def nvswitch(ctx: Context) -> bool | None:
    """Whether this is an NVSwitch system (None: could not tell)."""
    return ctx.fabric_manager.nvswitch_system


def host_flags(ctx: Context) -> dict[str, bool]:
    """Caveats for the reset sequence on this host."""
    virt = ctx.host.virtualization not in (None, "none") or any(
        g.virtualization_mode not in (None, "none") for g in ctx.visible_gpus
    )
    nvl72 = ctx.intent.nnodes > 1 and any(
        g.fabric and g.fabric.cluster_uuid not in (None, ZERO_UUID) for g in ctx.visible_gpus
    )
    return {"virtualized": virt, "container": ctx.host.container not in (None, "none"), "nvl72": nvl72}


@summary("FC3")
def _headline(ctx: Context) -> str:
    nvs, fm = nvswitch(ctx), ctx.facts.fabric_manager
    if ctx.driver.loaded is False:
        return "not checked: no NVIDIA driver"
    if nvs is False:
        return "no NVSwitch (PCIe or NVLink bridge): no fabric to check"
    parts = ["NVSwitch system" if nvs else "NVSwitch: unknown"]
    if fm is not None and fm.service:
        parts.append(f"fabric manager {fm.service}" + (f" {fm.version}" if fm.version else ""))
    states = Counter(g.fabric.state for g in ctx.gpus_used if g.fabric and g.fabric.state)
    if states:
        parts.append("fabric " + ", ".join(f"{s} on {n}/{len(ctx.gpus_used)} GPUs" for s, n in states.most_common()))
    p = ctx.facts.multicast_probe
    if p is not None and p.ok is not None:
        parts.append(f"multicast bind ok ({p.duration_s:.2f}s)" if p.ok else f"multicast FAILED at {p.stage}")
    elif ctx.intent.tensor_parallel_size > 1 and nvs:
        parts.append("multicast not probed (--deep)")
    return ", ".join(parts)


def _fm_fix(ctx: Context, states: set[str]) -> str:
    fm = ctx.facts.fabric_manager
    service = fm.service if fm else None
    ver = ctx.driver.version or "<driver version>"
    if service in ("inactive", "failed") or "not_started" in states:
        return (
            "sudo systemctl start nvidia-fabricmanager  # if it fails: `journalctl -u nvidia-fabricmanager -n 50`; "
            f"HGX B200/B300 also need nvlsm; its version must equal the driver's ({ver})\n"
            "if the state still does not reach Completed:\n" + reset_sequence(**host_flags(ctx))
        )
    if service == "not-installed":
        return (
            f"install the fabric manager of the driver's exact version {ver}: {fabric_manager_install(ver)}; "
            "then `sudo systemctl enable --now nvidia-fabricmanager`"
        )
    if service == "unknown":
        return (
            "the fabric manager runs on the host, out of this container's sight: on the host run "
            "`systemctl status nvidia-fabricmanager`, then\n" + reset_sequence(**host_flags(ctx))
        )
    return "the fabric manager is running but the fabric is stuck; wait a minute, then:\n" + reset_sequence(
        **host_flags(ctx)
    )


@check(
    "FC301",
    "fabric-not-ready",
    ERROR,
    logs=("CUDA error 802|CUDA_ERROR_SYSTEM_NOT_READY|system not yet initialized",),
)
def fabric_not_ready(ctx: Context) -> Iterator[Outcome]:
    """On an NVSwitch system a GPU used has not finished joining the NVLink fabric.

    ## What it checks
    NVML's fabric state of each GPU used is ``completed`` (``nvidia-smi -q``, Fabric block).

    ## Why the launch dies
    Until the fabric manager has programmed the NVSwitches the GPUs have no NVLink peer
    access: CUDA fails with CUDA_ERROR_SYSTEM_NOT_READY (802) or waits for the fabric and
    gives up (CUDA_ERROR_FABRIC_NOT_READY), and NCCL cannot build its rings.

    ## How to fix
    Start the fabric manager (``systemctl start nvidia-fabricmanager``; HGX B200/B300 also
    need ``nvlsm``); if the state stays in progress, stop the fabric manager, reset the GPUs
    (``nvidia-smi -r``) and start it again. The failure gives the exact sequence.
    """
    gpus = used_gpus(ctx)
    bad = [g for g in gpus if g.fabric is not None and g.fabric.state not in (None, "completed", "not_supported")]
    if bad:
        states = {g.fabric.state for g in bad if g.fabric is not None and g.fabric.state is not None}
        service = ctx.fabric_manager.service
        yield fail(
            f"fabric state {'/'.join(sorted(states))} on {len(bad)} of {len(gpus)} GPUs (fabric manager: "
            f"{service or 'unknown'})",
            fix=_fm_fix(ctx, states),
            subject=subject(bad),
            evidence={"states": sorted(states), "service": service},
        )
        return
    if nvswitch(ctx) is False:
        raise Skip("no NVSwitch: no fabric to wait for")
    missing = next((g for g in gpus if g.fabric is None), None)
    if missing is not None:
        if nvswitch(ctx):
            key = f"gpus[{missing.index}].fabric"
            raise Missing(key, ctx.facts.unavailable.get(key))
        raise Skip("fabric state not reported and no NVSwitch seen")
    if all(g.fabric is not None and g.fabric.state == "not_supported" for g in gpus):
        raise Skip("these GPUs take part in no NVLink fabric")
    yield ok(f"fabric completed on all {len(gpus)} GPUs")


@check("FC302", "fabric-unhealthy", ERROR)
def fabric_unhealthy(ctx: Context) -> Iterator[Outcome]:
    """The fabric is ``completed`` but its status is an error or its health flags are bad.

    ## What it checks
    For each GPU with fabric state ``completed``: the status is ``success`` and the health
    mask reports neither an incorrect configuration nor unhealthy routes.

    ## Why the launch dies
    A completed fabric with a failed status (e.g. "insufficient resources", clique 0) or an
    incorrect configuration (no partition, insufficient NVLinks, incompatible firmware)
    leaves the GPU without working NVLink peers: NCCL hangs or fails at its first all-reduce.

    ## How to fix
    Read /var/log/fabricmanager.log for the reason; then stop the fabric manager, reset the
    GPUs and start it again. Insufficient NVLinks or firmware mismatches need the vendor.
    """
    gpus = used_gpus(ctx)
    done = [g for g in gpus if g.fabric is not None and g.fabric.state == "completed"]
    if not done:
        raise Skip("no GPU with a completed fabric (FC301 covers the rest)")
    bad: list[tuple[Gpu, str]] = []
    for g in done:
        f = g.fabric
        assert f is not None  # done: GPUs whose fabric completed
        h = f.health
        if f.status not in (None, "success"):
            bad.append((g, f"status {f.status}"))
        elif h is not None and h.incorrect_configuration:
            bad.append((g, f"incorrect configuration ({h.configuration or 'unspecified'})"))
        elif h is not None and h.route_unhealthy:
            bad.append((g, "unhealthy NVLink routes"))
    if not bad:
        yield ok(f"fabric healthy on {len(done)} GPUs")
        return
    reasons = sorted({why for _, why in bad})
    extra = ""
    if any("insufficient_nvlinks" in r for r in reasons):
        extra = "NVLinks are down (see FC307): if the reset does not bring them back, the baseboard needs service\n"
    elif any("incompatible_gpu_fw" in r for r in reasons):
        extra = "the GPU firmware does not match what the fabric manager expects: update it (vendor firmware bundle)\n"
    yield fail(
        f"fabric on {len(bad)} GPU(s): {'; '.join(reasons)}",
        subject=subject([g for g, _ in bad]),
        fix=extra
        + "sudo tail -n 100 /var/log/fabricmanager.log  # the fabric manager's reason\n"
        + reset_sequence(**host_flags(ctx)),
        evidence={"reasons": reasons},
    )


@check(
    "FC306",
    "imex-channel-missing",
    ERROR,
    logs=(
        "(?:IMEX|imex) channel.*(?:not found|missing|No such file)",
        "/dev/nvidia-caps-imex-channels.*No such file",
    ),
)
def imex_channel_missing(ctx: Context) -> Iterator[Outcome]:
    """A multi-node NVLink domain needs an IMEX channel and this node has none.

    ## What it checks
    When the launch spans nodes whose GPUs share one NVLink domain (fabric completed with a
    non-zero cluster UUID on a node whose NVSwitches are not local, as on GB200/GB300 NVL72
    compute trays, or where IMEX is provisioned), or the multicast probe used fabric handles,
    /dev/nvidia-caps-imex-channels must hold a channel. Several HGX nodes are not one
    domain: each runs its own fabric manager and they talk over the network.

    ## Why the launch dies
    Memory shared over the NVLink domain uses fabric handles, and exporting or importing one
    needs an IMEX channel: without it NCCL's MNNVL and torch symmetric memory get
    CUDA_ERROR_NOT_PERMITTED (800). Channels do not survive a reboot.

    ## How to fix
    Create the channel device and run the IMEX service (the failure gives the commands);
    in containers pass ``NVIDIA_IMEX_CHANNELS=0`` (or the CDI imex-channel device).
    """
    gpus = used_gpus(ctx)
    domain = [g for g in gpus if nvlink_domain(g)]
    fabric_probe = ctx.multicast_probe.handle_type == "fabric"
    if not (fabric_probe or (ctx.intent.nnodes > 1 and domain and multi_node_nvlink_member(ctx.facts))):
        raise Skip(
            "single node, or no multi-node NVLink domain (an HGX node's fabric is its own): "
            "POSIX fd handles need no IMEX"
        )
    channels = ctx.need(ctx.imex.channels, "imex.channels")
    if channels:
        yield ok(f"IMEX channel(s) present: {', '.join(channels)}")
        return
    service = ctx.imex.service
    fix = imex_channel(service, ctx.driver.version)
    yield fail(
        "multi-node NVLink domain "
        f"(cluster {domain[0].fabric.cluster_uuid if domain and domain[0].fabric else '?'}) and no IMEX channel "
        f"(nvidia-imex: {service or 'unknown'})",
        fix=fix,
        evidence={"channels": channels, "service": service},
    )


@check("FC307", "nvlink-inactive", WARNING)
def nvlink_inactive(ctx: Context) -> Iterator[Outcome]:
    """A GPU used has fewer active NVLinks than it has.

    ## What it checks
    NVML's NVLink state: active links equal the GPU's links.

    ## Why the launch dies
    It may start, but a GPU with links down has less bandwidth to every peer (all-reduce
    slows for the whole TP group) and on NVSwitch systems the fabric may report insufficient
    NVLinks and refuse the GPU.

    ## How to fix
    ``nvidia-smi nvlink -s -i N`` shows which links are down; a reset (the fabric reset
    sequence) often brings them back; links that stay down need the vendor.
    """
    gpus = used_gpus(ctx)
    down = [g for g in gpus if g.nvlink and g.nvlink.total and (g.nvlink.active or 0) < g.nvlink.total]
    if not any(g.nvlink and g.nvlink.total for g in gpus):
        raise Skip("no NVLink on these GPUs")
    if not down:
        yield ok("every NVLink is active")
        return
    detail = ", ".join(f"GPU {g.index}: {g.nvlink.active}/{g.nvlink.total}" for g in down if g.nvlink)
    yield fail(
        f"NVLinks down ({detail} active)",
        subject=subject(down),
        evidence={"active_of_total": detail},
        fix=f"nvidia-smi nvlink -s -i {down[0].index}  # then, if links stay down:\n"
        + reset_sequence(**host_flags(ctx)),
    )


@check("FC308", "fabric-manager-version-mismatch", ERROR)
def fabric_manager_version_mismatch(ctx: Context) -> Iterator[Outcome]:
    """On an NVSwitch system the fabric manager's version differs from the driver's.

    ## What it checks
    ``nv-fabricmanager --version`` (or its package) equals the driver version NVML reports.

    ## Why the launch dies
    The fabric manager refuses to run against a driver of another version ("the loaded
    driver stack version is not compatible") and exits: the fabric never completes and CUDA
    reports the system not ready.

    ## How to fix
    Install the fabric manager package of exactly the driver's version (the failure names
    it), or the driver matching the fabric manager, then restart the fabric manager.
    """
    used_gpus(ctx)
    if nvswitch(ctx) is False:
        raise Skip("no NVSwitch: the fabric manager is not needed")
    fm_version, service = ctx.fabric_manager.version, ctx.fabric_manager.service
    if fm_version is None and service in ("unknown", "not-installed"):
        raise Skip(f"fabric manager {service}: its version cannot be read here (FC301 covers a missing one)")
    drv = ctx.need(ctx.driver.version, "driver.version")
    fm_version = ctx.need(ctx.fabric_manager.version, "fabric_manager.version")
    if fm_version == drv:
        yield ok(f"fabric manager {fm_version} matches the driver")
        return
    yield fail(
        f"fabric manager {fm_version} != driver {drv}",
        fix=f"{fabric_manager_install(drv)}, then `sudo systemctl restart nvidia-fabricmanager`",
        evidence={"fabric_manager": fm_version, "driver": drv},
    )
