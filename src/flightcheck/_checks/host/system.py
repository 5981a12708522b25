"""FC6xx — host: shared memory, locked-memory and file limits, virtualization."""

from __future__ import annotations

from collections.abc import Iterator

from flightcheck._checks.framework import Context, Log, Outcome, Skip, check, fail, ok, summary
from flightcheck._knowledge.units import GiB, mem_size
from flightcheck._vocabulary.results import ERROR, INFO, WARNING

NOFILE_MIN = 65536


@summary("FC6")
def _headline(ctx: Context) -> str:
    h = ctx.facts.host
    if h is None:
        return "host facts unavailable"
    parts = [h.os or "unknown OS", f"kernel {h.kernel}" if h.kernel else None]
    if h.container and h.container != "none":
        parts.append(f"in {h.container}")
    if h.virtualization and h.virtualization != "none":
        parts.append(f"VM ({h.virtualization})")
    if h.shm_bytes is not None:
        parts.append(f"/dev/shm {mem_size(h.shm_bytes)}")
    return ", ".join(p for p in parts if p)


@check(
    "FC601",
    "shm-too-small",
    ERROR,
    logs=(
        "NCCL WARN Error while creating shared memory segment /dev/shm/",
        "NCCL WARN Error: failed to extend /dev/shm/",
        "No space left on device: '/dev/shm",
        Log(
            "Fatal Python error: Bus error",
            note="a worker touched shared memory that /dev/shm could not back (a container's 64 MB default)",
        ),
        "[Uu]nexpected bus error encountered in worker",
    ),
)
def shm_too_small(ctx: Context) -> Iterator[Outcome]:
    """/dev/shm is too small for the engine's ranks to talk over shared memory.

    ## What it checks
    With more than one rank on this node (TP x PP > 1), the size of /dev/shm must be at
    least 1 GiB.

    ## Why the launch dies
    NCCL's shared-memory transport and the engine's message queues between its processes
    live in /dev/shm. A container started without ``--shm-size`` gets 64 MB; NCCL then fails
    with "unhandled system error" or a bus error (SIGBUS) once the ranks start talking,
    which is after the weights have loaded.

    ## How to fix
    Docker: ``docker run --shm-size=16g`` (or ``--ipc=host``). Kubernetes: mount an
    ``emptyDir`` with ``medium: Memory`` at /dev/shm. Bare metal: ``mount -o remount,size=16G /dev/shm``.
    """
    if ctx.intent.tensor_parallel_size * ctx.intent.pipeline_parallel_size <= 1 and ctx.intent.data_parallel_size <= 1:
        raise Skip("one rank: nothing crosses /dev/shm")
    ranks = ctx.intent.gpus_per_node
    shm = ctx.need(ctx.host.shm_bytes, "host.shm_bytes")
    if shm < GiB:
        container = ctx.host.container
        if container == "kubernetes":
            fix = "mount an emptyDir {medium: Memory, sizeLimit: 16Gi} at /dev/shm in the pod spec"
        elif container in ("docker", "podman", "containerd"):
            fix = f"restart the container with --shm-size=16g (or --ipc=host); {container} defaults to 64 MB"
        else:
            fix = "mount -o remount,size=16G /dev/shm"
        yield fail(
            f"/dev/shm is {mem_size(shm)}; {ranks} ranks on this node need at least 1 GiB",
            fix=fix,
            evidence={"shm_bytes": shm},
        )
    else:
        yield ok(f"/dev/shm is {mem_size(shm)}")


@check("FC602", "memlock-limited", WARNING)
def memlock_limited(ctx: Context) -> Iterator[Outcome]:
    """The locked-memory limit (``ulimit -l``) is not unlimited.

    ## What it checks
    The soft RLIMIT_MEMLOCK of the launching process is ``unlimited``.

    ## Why the launch dies
    RDMA (InfiniBand / RoCE, GPUDirect) registers pinned memory. With a limit such as the
    default 8 MB, NCCL's IB transport fails to register its buffers ("ibv_reg_mr failed")
    or silently falls back to slower sockets in multi-node runs.

    ## How to fix
    Set ``ulimit -l unlimited`` before launching; in Docker ``--ulimit memlock=-1``; under
    systemd ``LimitMEMLOCK=infinity``; in /etc/security/limits.conf ``* - memlock unlimited``.
    """
    memlock = ctx.need(ctx.host.ulimit_memlock, "host.ulimit_memlock")
    if isinstance(memlock, int):  # else "unlimited"
        yield fail(
            f"ulimit -l is {memlock // 1024} KiB",
            fix="ulimit -l unlimited (Docker: --ulimit memlock=-1; systemd: LimitMEMLOCK=infinity)",
            evidence={"ulimit_memlock": memlock},
        )
    else:
        yield ok("ulimit -l is unlimited")


@check(
    "FC603",
    "nofile-low",
    WARNING,
    logs=(
        r"\[Errno 24\] Too many open files",
        "Too many open files",
    ),
)
def nofile_low(ctx: Context) -> Iterator[Outcome]:
    """The open-files limit (``ulimit -n``) is under 65536.

    ## What it checks
    The soft RLIMIT_NOFILE of the launching process is at least 65536.

    ## Why the launch dies
    Each rank opens every shard, NCCL opens sockets and IPC handles per peer, and the API
    server holds one socket per client. Under load a low limit ends in "Too many open files"
    and dropped requests or a dead worker.

    ## How to fix
    ``ulimit -n 1048576`` before launching (Docker: ``--ulimit nofile=1048576``; systemd:
    ``LimitNOFILE=1048576``).
    """
    nofile = ctx.need(ctx.host.ulimit_nofile, "host.ulimit_nofile")
    if nofile < NOFILE_MIN:
        yield fail(
            f"ulimit -n is {nofile}, under {NOFILE_MIN}",
            fix="ulimit -n 1048576 (Docker: --ulimit nofile=1048576; systemd: LimitNOFILE=1048576)",
            evidence={"ulimit_nofile": nofile},
        )
    else:
        yield ok(f"ulimit -n is {nofile}")


@check("FC604", "host-virtualized", INFO)
def host_virtualized(ctx: Context) -> Iterator[Outcome]:
    """The host is a virtual machine.

    ## What it checks
    ``systemd-detect-virt --vm`` (or DMI / the CPU's hypervisor flag) reports a hypervisor.

    ## Why the launch dies
    It may not: but multicast, fabric-manager control and ``nvidia-smi -r`` behave
    differently under GPU passthrough or vGPU, and the fabric workarounds flightcheck
    suggests are validated on bare metal only.

    ## How to fix
    Nothing to change if the launch works; when a fabric check fails, ask the cloud or
    hypervisor operator to reset the GPUs and NVSwitches from the host side.
    """
    virt = ctx.need(ctx.host.virtualization, "host.virtualization")
    if virt != "none":
        yield fail(
            f"this host is a VM ({virt}): fabric workarounds are validated on bare metal only",
            fix="if a fabric check fails, have the hypervisor/cloud operator reset GPUs and NVSwitches from the host",
            evidence={"virtualization": virt},
        )
    else:
        yield ok("bare metal")
