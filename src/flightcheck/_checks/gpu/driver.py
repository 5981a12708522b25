"""FC2xx — GPUs and driver: NVML up, enough GPUs, driver new enough, arch in torch, state."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok, summary
from flightcheck._checks.shared.gpus import driver_ok, gpu_label, subject, used_gpus
from flightcheck._fixes.driver import driver_fix
from flightcheck._knowledge import engines
from flightcheck._knowledge import vllm as _vllm
from flightcheck._knowledge.cuda import MAJOR_FLOOR, TORCH_INDEX, driver_for, runs_on, torch_cuda_can_build
from flightcheck._knowledge.derived import mig_instances
from flightcheck._knowledge.units import major_minor
from flightcheck._vocabulary.facts import Gpu
from flightcheck._vocabulary.results import ERROR, WARNING


@summary("FC2")
def _headline(ctx: Context) -> str:
    d = ctx.facts.driver
    if d is None:
        return "driver facts unavailable"
    if d.loaded is False:
        return f"NVIDIA driver unavailable: {d.error or 'unknown error'}"
    models = Counter(g.name or "unknown GPU" for g in ctx.visible_gpus)
    gpus = ", ".join(f"{n}x {m}" for m, n in models.most_common()) or "no GPU"
    ccs = sorted({g.compute_capability for g in ctx.visible_gpus if g.compute_capability})
    cc = f" (compute {'/'.join(ccs)})" if ccs else ""
    return f"{gpus}{cc}, driver {d.version} (CUDA {d.cuda_version})"


@check(
    "FC201",
    "nvidia-driver-unavailable",
    ERROR,
    logs=(
        "Found no NVIDIA driver on your system",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
        "NVMLError_LibraryNotFound|NVML Shared Library Not Found",
        "CUDA driver initialization failed",
    ),
)
def nvidia_driver_unavailable(ctx: Context) -> Iterator[Outcome]:
    """NVML cannot be initialised: no NVIDIA driver, driver not loaded, or library missing.

    ## What it checks
    ``nvmlInit`` succeeds in a child process (the same library ``nvidia-smi`` uses).

    ## Why the launch dies
    Without NVML and the kernel driver there is no CUDA: torch reports no GPU and the engine
    stops at its first device query, or (in a container started without the NVIDIA runtime)
    at ``libcuda.so.1: cannot open shared object file``.

    ## How to fix
    Depends on NVML's error: install the driver (library not found), ``modprobe nvidia``
    (driver not loaded), reboot after a driver upgrade (NVML/RM version mismatch), or start
    the container with ``--gpus all``. The failure names the exact command.
    """
    loaded = ctx.need(ctx.driver.loaded, "driver.loaded")
    d = ctx.facts.driver
    assert d is not None  # ctx.need raised Missing without a driver section
    if loaded:
        yield ok(f"NVML initialised: driver {d.version}, CUDA {d.cuda_version}")
        return
    if ctx.intent.engine == "vllm":
        # a vLLM built for the CPU or ROCm needs no NVIDIA driver (vllm/platforms/__init__.py)
        packages = (ctx.python.packages if ctx.python else None) or {}
        platform = _vllm.non_cuda_platform(packages.get("vllm"), packages.get("torch"), ctx.env)
        if platform:
            raise Skip(f"vLLM runs on the {platform} platform here (vllm {packages.get('vllm')}), not CUDA")
    error = d.error or "unknown error"
    container = ctx.host.container not in (None, "none")
    yield fail(f"NVML cannot be initialised: {error}", fix=driver_fix(error, container), evidence={"error": error})


@check(
    "FC202",
    "not-enough-gpus",
    ERROR,
    logs=(
        r"World size \(\d+\) is larger than the number of available GPUs \(\d+\)",
        "The number of required GPUs exceeds the total number of available GPUs",
        "CUDA error: invalid device ordinal",
    ),
)
def not_enough_gpus(ctx: Context) -> Iterator[Outcome]:
    """Fewer GPUs are visible than the launch's TP x PP (x DP) needs on this node.

    ## What it checks
    The GPUs the engine will see (all of them, or those CUDA_VISIBLE_DEVICES names, up to
    its first entry that matches no GPU) number at least TP x PP (x DP on one node).

    ## Why the launch dies
    vLLM and SGLang start one worker per rank and bind each to a device ordinal; with too
    few devices a worker fails with ``invalid device ordinal`` or the engine refuses the
    parallel config outright.

    ## How to fix
    Make more GPUs visible (fix or unset CUDA_VISIBLE_DEVICES), or launch with a layout that
    fits this node, e.g. a smaller ``-tp``, or spread it with ``--nnodes``.
    """
    driver_ok(ctx)
    all_gpus = ctx.need(ctx.facts.gpus, "gpus")
    need, have = ctx.intent.gpus_per_node, len(ctx.visible_gpus)
    if have >= need:
        yield ok(f"{have} GPU(s) visible, {need} needed")
        return
    spec = ctx.facts.visible_devices
    if mig_instances(ctx.facts):  # MIG instances NVML's GPU list does not hold: FC208 judges them
        raise Skip("CUDA_VISIBLE_DEVICES names MIG instances, which the facts do not list (FC208 judges MIG)")
    layout = f"TP {ctx.intent.tensor_parallel_size} x PP {ctx.intent.pipeline_parallel_size}" + (
        f" x DP {ctx.intent.data_parallel_size}" if ctx.intent.data_parallel_size > 1 else ""
    )
    msg = f"{have} GPU(s) visible, {layout} needs {need} on this node"
    if spec is not None:
        tokens = [t.strip() for t in spec.split(",") if t.strip()]
        msg += f" (CUDA_VISIBLE_DEVICES={spec} selects {have} of {len(all_gpus)}"
        msg += f"; it stops at {tokens[have]!r}, which matches no GPU)" if len(tokens) > have else ")"
    if len(all_gpus) >= need:
        fix = (
            "export CUDA_VISIBLE_DEVICES="
            f"{','.join(str(g.index) for g in sorted(all_gpus, key=lambda g: g.index or 0)[:need])} (or unset it)"
        )
    else:
        fit = max((n for n in (1, 2, 4, 8, 16) if n <= len(all_gpus)), default=1)
        fix = (
            f"this node has {len(all_gpus)} GPU(s): launch with {engines.flag(ctx.intent.engine, 'tp')} {fit}, "
            "or spread the launch over more nodes (--nnodes)"
        )
    yield fail(
        msg, fix=fix, evidence={"visible": have, "needed": need, "total": len(all_gpus), "CUDA_VISIBLE_DEVICES": spec}
    )


@check(
    "FC203",
    "driver-too-old-for-cuda",
    ERROR,
    logs=(
        "The NVIDIA driver on your system is too old",
        "CUDA driver version is insufficient for CUDA runtime version",
        "cudaErrorInsufficientDriver",
    ),
)
def driver_too_old_for_cuda(ctx: Context) -> Iterator[Outcome]:
    """The driver supports an older CUDA than the one torch was built with.

    ## What it checks
    The CUDA version the driver reports (NVML) against the CUDA torch was built with: a lower
    major is an error, a lower minor (same major) a warning.

    ## Why the launch dies
    A lower major fails at the first CUDA call ("The NVIDIA driver on your system is too
    old", cudaErrorInsufficientDriver 35). A lower minor runs through minor-version
    compatibility, but PTX the newer toolkit emits (Triton, FlashInfer JIT) is rejected with
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222) when the first such kernel loads.

    ## How to fix
    Install at least the driver the torch CUDA version ships with (the failure names it), or
    a torch build for the CUDA this driver supports; on data-center GPUs the cuda-compat
    package (forward compatibility) is a third way.
    """
    driver_ok(ctx)
    torch_cuda = ctx.python.torch_cuda
    if torch_cuda is None:
        raise Skip("torch is not installed in the engine's interpreter (or is a CPU build)")
    drv = major_minor(ctx.need(ctx.driver.cuda_version, "driver.cuda_version"))
    want = major_minor(torch_cuda)
    if drv is None or want is None:
        raise Skip("unparsable CUDA version")
    ev = {"driver": ctx.driver.version, "driver_cuda": ctx.driver.cuda_version, "torch_cuda": torch_cuda}
    if drv >= want:
        yield ok(f"driver supports CUDA {drv[0]}.{drv[1]}, torch needs {want[0]}.{want[1]}")
        return
    need = driver_for(want)
    if drv[0] < want[0]:
        floor = MAJOR_FLOOR.get(want[0], need)
        yield fail(
            f"driver {ev['driver']} supports CUDA {drv[0]}.{drv[1]}; "
            f"torch is built for CUDA {torch_cuda}: CUDA cannot initialise",
            fix=(
                f"install NVIDIA driver >= {need} (any driver >= {floor} runs CUDA {want[0]}.x), or a torch built for "
                f"CUDA {drv[0]}.x (`pip install torch --index-url {TORCH_INDEX.format(*drv)}`, "
                "matching your engine's torch pin); "
                f"data-center GPUs: cuda-compat-{want[0]}-{want[1]} (forward compatibility)"
            ),
            evidence={**ev, "needed_driver": need},
        )
    else:
        yield fail(
            f"driver {ev['driver']} supports CUDA {drv[0]}.{drv[1]}, "
            f"older than torch's {torch_cuda}: runs through minor-version "
            f"compatibility, but PTX from CUDA {want[0]}.{want[1]} (Triton, FlashInfer JIT) is rejected",
            fix=f"install NVIDIA driver >= {need} (CUDA {want[0]}.{want[1]}'s)",
            severity=WARNING,
            evidence={**ev, "needed_driver": need},
        )


@check(
    "FC204",
    "gpu-arch-not-in-torch",
    ERROR,
    logs=(
        "is not compatible with the current PyTorch installation",
        "no kernel image is available for execution on the device",
    ),
)
def gpu_arch_not_in_torch(ctx: Context) -> Iterator[Outcome]:
    """A GPU used has an architecture the installed torch has no kernels for.

    ## What it checks
    Each GPU used: torch's arch list has an ``sm_`` entry of the same major and a minor not
    above the GPU's (``a`` variants: exactly), or a ``compute_`` (PTX) entry not above it.
    Without the list (read with ``--deep``), torch's CUDA version must be able to build for
    the GPU's major at all (CUDA 12.8 for Blackwell, 13.0 for Thor; CUDA 13 has no Volta).

    ## Why the launch dies
    Every kernel launch fails with "no kernel image is available for execution on the
    device" (CUDA error 209); torch itself warns the GPU "is not compatible with the current
    PyTorch installation".

    ## How to fix
    Install a torch wheel built for the GPU, e.g. the cu128 or newer wheels for Blackwell
    (``pip install torch --index-url https://download.pytorch.org/whl/cu130``), in the
    version your engine pins.
    """
    gpus = used_gpus(ctx)
    if ctx.python.torch_cuda is None and ctx.python.torch_arch_list is None:
        raise Skip("torch is not installed in the engine's interpreter")
    arch_list = ctx.python.torch_arch_list
    torch_cuda = major_minor(ctx.python.torch_cuda)
    bad: list[Gpu] = []
    for g in gpus:
        cc = g.compute_capability
        if not cc:
            continue
        if arch_list is not None:
            if runs_on(cc, arch_list) is None:
                bad.append(g)
        elif torch_cuda is not None and torch_cuda_can_build(cc, torch_cuda) is False:
            bad.append(g)
    fix = "pip install torch --index-url https://download.pytorch.org/whl/cu130 (the torch version your engine pins)"
    if bad:
        what = (
            f"torch's arch list {arch_list}"
            if arch_list is not None
            else f"torch built with CUDA {ctx.python.torch_cuda}"
        )
        yield fail(
            f"{'; '.join(gpu_label(g) for g in bad)}: {what} has no kernels it can run",
            fix=fix,
            subject=subject(bad),
            evidence={"torch_arch_list": arch_list, "torch_cuda": ctx.python.torch_cuda},
        )
    elif arch_list is None:
        yield ok(f"torch's CUDA {ctx.python.torch_cuda} can build for these GPUs (its arch list is read with --deep)")
    else:
        yield ok("torch has kernels for every GPU used")


@check("FC205", "mixed-gpu-models", WARNING)
def mixed_gpu_models(ctx: Context) -> Iterator[Outcome]:
    """The GPUs used are not all the same model.

    ## What it checks
    The names of the GPUs the launch uses are identical.

    ## Why the launch dies
    Tensor parallelism runs in lockstep: the slowest GPU sets the pace, memory is sized by
    the smallest, and kernels chosen for one architecture may not exist for the other.

    ## How to fix
    Select identical GPUs with CUDA_VISIBLE_DEVICES (the failure lists them).
    """
    gpus = used_gpus(ctx)
    models = Counter(g.name for g in gpus)
    if len(models) <= 1:
        yield ok(f"all {len(gpus)} GPU(s) are {next(iter(models))}")
        return
    common = models.most_common(1)[0][0]
    same = [g.index for g in ctx.visible_gpus if g.name == common]
    yield fail(
        ", ".join(f"{n}x {m}" for m, n in models.most_common()),
        fix=f"export CUDA_VISIBLE_DEVICES={','.join(map(str, same))} "
        f"(the {len(same)} {common}) and size the launch to them",
        evidence={"models": dict(models)},
    )
