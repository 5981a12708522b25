"""FC9xx — the engine's pod as Kubernetes will run it: probes, /dev/shm, GPU limits,
hostIPC and the image's CUDA requirement. Every check reads the ``pod`` section that
``check --k8s MANIFEST`` fills in and skips without one; each fix is YAML to paste.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok, summary
from flightcheck._knowledge.units import GiB, mem_size, si_bytes
from flightcheck._vocabulary.facts import Pod, Probe
from flightcheck._vocabulary.results import ERROR, WARNING

#: read speed assumed when ``--deep`` did not measure one: what a 1.56 TB checkpoint loaded
#: in about 15 minutes reads at (about 1.7 GB/s), rounded up so that the estimate errs short
ASSUMED_READ_BPS = 2e9
#: beyond the read: interpreter and engine start, NCCL set-up, the profile run (seconds)
STARTUP_S = 60.0
#: torch.compile and CUDA-graph capture, skipped by --enforce-eager (seconds)
COMPILE_S = 120.0
#: the fixes give the probe this much more than the estimate
MARGIN = 2.0
#: /dev/shm a pod's ranks need (the floor of FC601; a container's default is 64 MB)
SHM_MIN = GiB
#: what a container gets at /dev/shm without a mount or hostIPC (containerd, CRI-O, Docker)
RUNTIME_SHM_DEFAULT = 64 << 20

SHM_FIX = (
    "volumes: [{name: dshm, emptyDir: {medium: Memory, sizeLimit: 16Gi}}]  # pod spec; and in the container: "
    "volumeMounts: [{name: dshm, mountPath: /dev/shm}]"
)


def _pod(ctx: Context) -> Pod:
    if ctx.facts.pod is None:
        # --k8s-self that could not read the pod says why (no service account, 403, ...)
        raise Skip(ctx.facts.unavailable.get("pod") or "no Kubernetes manifest given (check --k8s MANIFEST)")
    return ctx.facts.pod


def _subject(p: Pod) -> str:
    return f"pod:{p.kind or 'Pod'}/{p.name or '?'}/{p.container or '?'}"


def _ranks_per_pod(ctx: Context, p: Pod) -> int:
    """GPUs one pod of the launch drives: the node's share, or the world over a
    LeaderWorkerSet's group when that is larger than ``--nnodes``."""
    spread = max(ctx.intent.nnodes, p.group_size or 1)
    if spread > ctx.intent.nnodes and ctx.intent.data_parallel_size_local is None:
        return max(1, -(-ctx.intent.world_size // spread))
    return ctx.intent.gpus_per_node


@summary("FC9")
def _headline(ctx: Context) -> str:
    p = ctx.facts.pod
    if p is None:
        why = ctx.facts.unavailable.get("pod")
        return f"skipped: {why}" if why else "no manifest (--k8s)"
    parts = [f"{p.kind or 'Pod'} {p.name or '?'}", f"container {p.container or '?'}"]
    if p.group_size and p.group_size > 1:
        parts.append(f"group of {p.group_size} pods")
    parts.append(f"{p.gpu_limit or 0} nvidia.com/gpu")
    return ", ".join(parts)


def _budget(probe: Probe) -> int:
    """Seconds from container start until this probe, failing all along, restarts it."""
    return (probe.initial_delay_s or 0) + (probe.failure_threshold or 3) * (probe.period_s or 10)


def _load_bytes(ctx: Context) -> tuple[int | None, float | None]:
    """(bytes this node reads, measured bytes/s or None): from the checkpoint read here,
    else the snapshot's ``checkpoint.files`` (``collect`` on the node)."""
    try:
        ck = ctx.checkpoint
    except Skip:
        ck = None
    if ck is not None:
        m = None
        try:
            m = ctx.memory
        except Exception:  # noqa: BLE001 - a model the memory model cannot read: the file sizes still count
            m = None
        read = m.load_bytes if m is not None and m.load_bytes else ck.total_bytes
        rate = (ck.throughput or {}).get("bytes_per_s") or None
        if read:
            return read, (float(rate) if rate else None)
    files = ctx.facts.checkpoint.files if ctx.facts.checkpoint is not None else None
    if files:
        return sum(files.values()), None
    return None, None


@check("FC901", "probe-kills-load", ERROR)
def probe_kills_load(ctx: Context) -> Iterator[Outcome]:
    """The pod's startup or liveness probe restarts the engine before it has loaded.

    ## What it checks
    The time the kubelet allows before a failing probe restarts the container
    (``initialDelaySeconds + failureThreshold x periodSeconds`` of the startupProbe, else of
    the livenessProbe; defaults 0, 3, 10) against the estimated start: the bytes this node
    reads at the read speed ``--deep`` measured (else an assumed 2 GB/s: then a warning),
    plus 60 s for start-up and profiling and 120 s for compilation and CUDA graphs (none
    with ``--enforce-eager``).

    ## Why the launch dies
    vLLM answers ``/health`` only once the weights are loaded and the engine is up. A probe
    budget shorter than that restarts the container mid-load, and it starts loading again:
    a CrashLoopBackOff that looks like an engine crash. vLLM production-stack's default
    startupProbe (15 s + 60 x 10 s = 615 s) restarts a 15-minute load of a 1.56 TB
    checkpoint every time.

    ## How to fix
    Raise the startupProbe's ``failureThreshold`` (the liveness probe waits for it) to
    cover twice the estimate; the fix gives the line to paste. Copying the checkpoint to
    local NVMe shortens the load itself.
    """
    p = _pod(ctx)
    probe, which = (
        (p.startup_probe, "startupProbe") if p.startup_probe is not None else (p.liveness_probe, "livenessProbe")
    )
    if probe is None:
        yield ok("no startup or liveness probe: nothing restarts a slow start", subject=_subject(p))
        return
    read, rate = _load_bytes(ctx)
    if read is None:
        raise Skip("the checkpoint's size is unknown (give --model, or a snapshot from `flightcheck collect`)")
    budget = _budget(probe)
    extra = STARTUP_S + (0.0 if ctx.intent.enforce_eager else COMPILE_S)
    speed = rate or ASSUMED_READ_BPS
    need = read / speed + extra
    measured = f"measured {speed / 1e9:.2f} GB/s" if rate else f"an assumed {speed / 1e9:.0f} GB/s (--deep measures it)"
    evidence = {
        "probe": which,
        "budget_s": budget,
        "estimate_s": round(need, 1),
        "load_bytes": read,
        "read_bytes_per_s": int(speed),
    }
    if need <= budget:
        yield ok(
            f"{which} allows {budget} s; the start takes about {need:.0f} s ({si_bytes(read)} at {measured})",
            subject=_subject(p),
            evidence=evidence,
        )
        return
    period = probe.period_s or 10
    delay = probe.initial_delay_s or 0
    threshold = math.ceil((MARGIN * need - delay) / period)
    yield fail(
        f"{which} restarts the container after {budget} s; loading {si_bytes(read)} at {measured} plus "
        f"start-up{'' if ctx.intent.enforce_eager else ' and compilation'} takes about {need:.0f} s",
        fix=(
            f"startupProbe: {{httpGet: {{path: /health, port: 8000}}, initialDelaySeconds: {delay}, "
            f"periodSeconds: {period}, failureThreshold: {threshold}}}  # {threshold * period + delay} s"
        ),
        subject=_subject(p),
        evidence=evidence,
        severity=None if rate else WARNING,
    )


@check("FC902", "pod-shm-too-small", ERROR)
def pod_shm_too_small(ctx: Context) -> Iterator[Outcome]:
    """The pod gives the engine's ranks too little /dev/shm.

    ## What it checks
    With more than one rank in the pod, /dev/shm is a volume of at least 1 GiB: an
    ``emptyDir`` (``medium: Memory``) whose ``sizeLimit`` is 1 GiB or more (or unset), or the
    host's through ``hostIPC: true``. Without either the container runtime mounts 64 MB.

    ## Why the launch dies
    NCCL's shared-memory transport and the engine's message queues live in /dev/shm; with
    64 MB NCCL fails with "unhandled system error" or a bus error once the ranks talk,
    which is after the weights have loaded (FC601 is the same check on a running host).

    ## How to fix
    Mount a memory-backed emptyDir at /dev/shm (the fix gives the YAML).
    """
    p = _pod(ctx)
    ranks = _ranks_per_pod(ctx, p)
    if ranks <= 1:
        raise Skip("one rank in the pod: nothing crosses /dev/shm")
    if not p.shm_mounted:
        if p.host_ipc:
            yield ok("hostIPC: the pod shares the host's /dev/shm", subject=_subject(p))
            return
        yield fail(
            f"no volume at /dev/shm: the container gets the runtime's {mem_size(RUNTIME_SHM_DEFAULT)}; "
            f"{ranks} ranks in the pod need at least {mem_size(SHM_MIN)}",
            fix=SHM_FIX,
            subject=_subject(p),
            evidence={"ranks": ranks, "shm_bytes": RUNTIME_SHM_DEFAULT},
        )
        return
    limit = p.shm_size_limit_bytes
    if limit is not None and limit < SHM_MIN:
        yield fail(
            f"/dev/shm is an emptyDir of {mem_size(limit)}; {ranks} ranks in the pod need at least {mem_size(SHM_MIN)}",
            fix=SHM_FIX,
            subject=_subject(p),
            evidence={"ranks": ranks, "shm_bytes": limit},
        )
        return
    size = mem_size(limit) if limit is not None else "no sizeLimit"
    yield ok(f"/dev/shm is a {p.shm_medium or 'disk'}-backed volume ({size})", subject=_subject(p))


@check("FC903", "pod-gpu-limit-short", ERROR)
def pod_gpu_limit_short(ctx: Context) -> Iterator[Outcome]:
    """The pod's ``nvidia.com/gpu`` limit is smaller than the GPUs the launch uses per pod.

    ## What it checks
    The container's ``nvidia.com/gpu`` limit (or request) is at least TP x PP (x the local
    DP ranks) per pod: the world size spread over ``--nnodes``, or over a LeaderWorkerSet's
    group ``size`` when that is larger.

    ## Why the launch dies
    The device plugin exposes only the GPUs the pod was given; vLLM then fails with
    "World size (8) is larger than the number of available GPUs (4)" or
    "CUDA error: invalid device ordinal", after scheduling and image pull.

    ## How to fix
    Set the limit to the GPUs the launch needs (the fix gives the YAML), or lower
    ``--tensor-parallel-size`` to what the pod gets.
    """
    p = _pod(ctx)
    if p.other_gpu_resources:
        raise Skip(f"GPUs are requested as {', '.join(p.other_gpu_resources)} (MIG / shared GPUs): not counted here")
    need = _ranks_per_pod(ctx, p)
    have = p.gpu_limit or 0
    if have >= need:
        yield ok(f"nvidia.com/gpu {have} covers the {need} GPUs the launch uses per pod", subject=_subject(p))
        return
    yield fail(
        f"the container is given {have} nvidia.com/gpu; the launch uses {need} per pod "
        f"(TP {ctx.intent.tensor_parallel_size} x PP {ctx.intent.pipeline_parallel_size}"
        + (
            f" over {max(ctx.intent.nnodes, p.group_size or 1)} pods"
            if max(ctx.intent.nnodes, p.group_size or 1) > 1
            else ""
        )
        + ")",
        fix=f'resources: {{limits: {{nvidia.com/gpu: "{need}"}}, requests: {{nvidia.com/gpu: "{need}"}}}}',
        subject=_subject(p),
        evidence={"gpu_limit": have, "gpus_needed": need},
    )


@check("FC904", "pod-host-ipc-missing", WARNING)
def pod_host_ipc_missing(ctx: Context) -> Iterator[Outcome]:
    """A prefill/decode launch moves its KV cache between pods without ``hostIPC``.

    ## What it checks
    When the command sets ``--kv-transfer-config`` (disaggregated prefill / decode, LMCache
    or NIXL connectors), the pod runs with ``hostIPC: true``, as vLLM production-stack's
    chart sets it for ``enablePD`` (helm/templates/deployment-vllm-multi.yaml).

    ## Why the launch dies
    The connectors hand GPU buffers over CUDA IPC (UCX ``cuda_ipc``) and shared memory
    between the engine's processes and its peers on the node; in a private IPC namespace
    the handles cannot be opened and the transfer fails or falls back to the network.

    ## How to fix
    Set ``hostIPC: true`` in the pod spec (the fix), on a node dedicated to the engine.
    """
    p = _pod(ctx)
    if not p.kv_transfer:
        raise Skip("no --kv-transfer-config: nothing crosses pods over CUDA IPC")
    if p.host_ipc:
        yield ok("hostIPC: true for the KV transfer", subject=_subject(p))
        return
    yield fail(
        "--kv-transfer-config moves the KV cache over CUDA IPC, but the pod has its own IPC namespace (no hostIPC)",
        fix="hostIPC: true  # pod spec, beside containers:",
        subject=_subject(p),
        evidence={"host_ipc": False},
    )


_TERM = re.compile(r"^(cuda|driver)(>=|<=|>|<|=)([0-9]+(?:\.[0-9]+)*)$")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(".") if x.isdigit())


def _holds(op: str, have: tuple[int, ...], want: tuple[int, ...]) -> bool:
    n = max(len(have), len(want))
    a, b = have + (0,) * (n - len(have)), want + (0,) * (n - len(want))
    return {">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b, "=": a == b}[op]


def _alternative_fails(item: str, cuda: tuple[int, ...] | None, driver: tuple[int, ...] | None) -> bool:
    """True when this alternative (comma-separated conditions, all needed) surely fails;
    conditions on what is not known here (brand, arch, an unknown version) may hold."""
    for cond in item.split(","):
        m = _TERM.match(cond.strip())
        if not m:
            continue
        have = cuda if m.group(1) == "cuda" else driver
        if have is not None and not _holds(m.group(2), have, _version(m.group(3))):
            return True
    return False


@check("FC905", "image-cuda-above-driver", ERROR)
def image_cuda_above_driver(ctx: Context) -> Iterator[Outcome]:
    """The image's ``NVIDIA_REQUIRE_CUDA`` is not met by the node's driver.

    ## What it checks
    The container's ``NVIDIA_REQUIRE_CUDA`` (``cuda>=12.8 brand=tesla,driver>=535,driver<536
    ...``: alternatives separated by spaces, conditions within one by commas) against the
    CUDA version and driver version of the node (``driver`` facts); unless
    ``NVIDIA_DISABLE_REQUIRE`` is set. Brand and arch conditions are taken to hold.

    ## Why the launch dies
    The NVIDIA container runtime refuses to start the container: "nvidia-container-cli:
    requirement error: unsatisfied condition: cuda>=12.8". The pod never runs; the node's
    driver is too old for the image's CUDA.

    ## How to fix
    Use an image built for the node's CUDA (the vLLM image tag for that CUDA), or upgrade
    the node's driver; ``NVIDIA_DISABLE_REQUIRE=1`` only when the image carries CUDA
    forward-compatibility libraries for this GPU.
    """
    p = _pod(ctx)
    if not p.require_cuda:
        raise Skip("the container sets no NVIDIA_REQUIRE_CUDA")
    if p.disable_require:
        raise Skip("NVIDIA_DISABLE_REQUIRE is set: the runtime does not check the requirement")
    cuda_text = ctx.need(ctx.driver.cuda_version, "driver.cuda_version")
    cuda = _version(cuda_text)
    driver = _version(ctx.driver.version) if ctx.driver.version else None
    items = p.require_cuda.split()
    if items and all(_alternative_fails(i, cuda, driver) for i in items):
        want = next(
            (m.group(0) for i in items for c in i.split(",") if (m := _TERM.match(c.strip())) and m.group(1) == "cuda"),
            items[0],
        )
        yield fail(
            f"the image requires {want}; the node's driver {ctx.driver.version or '?'} supports CUDA {cuda_text}: "
            "the container runtime refuses to start it",
            fix=(
                f"image: vllm/vllm-openai:<a tag built for CUDA {cuda_text} or older>  "
                f"# or upgrade the node's driver to one supporting CUDA {want.partition('>=')[2] or want}"
            ),
            subject=_subject(p),
            evidence={"require_cuda": p.require_cuda, "driver_cuda": cuda_text},
        )
        return
    yield ok(f"the node's CUDA {cuda_text} meets NVIDIA_REQUIRE_CUDA", subject=_subject(p))
