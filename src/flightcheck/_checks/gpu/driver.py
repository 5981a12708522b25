"""FC2xx — GPUs and driver: NVML up, enough GPUs, driver new enough, arch in torch, state."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from flightcheck._checks.framework import Context, Missing, Outcome, Skip, check, fail, ok, summary
from flightcheck._checks.shared.gpus import driver_ok, gpu_label, subject, used_gpus
from flightcheck._checks.shared.jit import jit_cache_matches
from flightcheck._fixes.driver import driver_fix
from flightcheck._knowledge import engines
from flightcheck._knowledge.cuda import (
    MAJOR_FLOOR,
    TORCH_INDEX,
    driver_for,
    ptx_accepted,
    ptx_needs_cuda,
    runs_on,
    torch_cuda_can_build,
)
from flightcheck._knowledge.derived import mig_instances
from flightcheck._knowledge.gpus import arch_code, code_runs_on
from flightcheck._knowledge.units import major_minor
from flightcheck._vocabulary.facts import CudaLibrary, Gpu
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
    # an engine built for the CPU or ROCm needs no NVIDIA driver (vllm/platforms/__init__.py)
    engine = engines.get(ctx.intent.engine)
    packages = (ctx.python.packages if ctx.python else None) or {}
    platform = engine.non_cuda_platform(packages, ctx.env)
    if platform:
        raise Skip(
            f"{engine.display} runs on the {platform} platform here ({engine.package} {packages.get(engine.package)}), "
            "not CUDA"
        )
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
        "the provided PTX was compiled with an unsupported toolchain",
        "CUDA_ERROR_UNSUPPORTED_PTX_VERSION|cudaErrorUnsupportedPtxVersion",
    ),
)
def driver_too_old_for_cuda(ctx: Context) -> Iterator[Outcome]:
    """The driver supports an older CUDA than the one torch was built with, or than the PTX
    a kernel library needs JIT-compiled for a GPU it has no cubin for.

    ## What it checks
    The CUDA version the driver reports (NVML) against the CUDA torch was built with: a lower
    major is an error, a lower minor (same major) a warning. Then the device code of the
    engine's package and of the kernel packages it loads (sgl-kernel, flashinfer-jit-cache;
    ``python.cuda_libraries``, read from their fatbin headers): for each GPU used with no
    cubin in a library that runs on it, the PTX ISA of the PTX that would be JIT-compiled
    against the driver's CUDA. A cubin for the GPU makes the PTX irrelevant.

    ## Why the launch dies
    A lower major fails at the first CUDA call ("The NVIDIA driver on your system is too
    old", cudaErrorInsufficientDriver 35). A lower minor runs through minor-version
    compatibility, but the driver's JIT refuses PTX newer than itself: where a library has
    only PTX for the GPU (e.g. kernels built as CUDA 12.8 PTX, ISA 8.7, on a 12.4 driver),
    its first kernel fails with CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222, "the provided PTX
    was compiled with an unsupported toolchain").

    ## How to fix
    Install at least the driver the torch CUDA version (or the PTX's CUDA) ships with (the
    failure names it), or a torch build for the CUDA this driver supports, or a build of the
    library with cubins for the GPU; on data-center GPUs the cuda-compat package (forward
    compatibility) is a third way.
    """
    driver_ok(ctx)
    torch_cuda = ctx.python.torch_cuda
    libraries = _loaded_libraries(ctx)
    if torch_cuda is None and not libraries:
        raise Skip("torch is not installed in the engine's interpreter (or is a CPU build)")
    drv = major_minor(ctx.need(ctx.driver.cuda_version, "driver.cuda_version"))
    want = major_minor(torch_cuda) if torch_cuda is not None else None
    if drv is None or (torch_cuda is not None and want is None):
        raise Skip("unparsable CUDA version")
    if torch_cuda is not None and want is not None:
        yield _torch_outcome(ctx, drv, want, torch_cuda)
    if libraries:
        yield from _ptx_outcomes(ctx, drv, libraries)


def _torch_outcome(ctx: Context, drv: tuple[int, int], want: tuple[int, int], torch_cuda: str) -> Outcome:
    ev = {"driver": ctx.driver.version, "driver_cuda": ctx.driver.cuda_version, "torch_cuda": torch_cuda}
    if drv >= want:
        return ok(f"driver supports CUDA {drv[0]}.{drv[1]}, torch needs {want[0]}.{want[1]}")
    need = driver_for(want)
    if drv[0] < want[0]:
        floor = MAJOR_FLOOR.get(want[0], need)
        return fail(
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
    return fail(
        f"driver {ev['driver']} supports CUDA {drv[0]}.{drv[1]}, "
        f"older than torch's {torch_cuda}: runs through minor-version "
        f"compatibility, but PTX from CUDA {want[0]}.{want[1]} (Triton, FlashInfer JIT) is rejected",
        fix=f"install NVIDIA driver >= {need} (CUDA {want[0]}.{want[1]}'s)",
        severity=WARNING,
        evidence={**ev, "needed_driver": need},
    )


def _loaded_libraries(ctx: Context) -> dict[str, CudaLibrary]:
    """The recorded libraries whose kernels this launch loads: the engine's package, its
    kernel packages (SGLang's sgl-kernel), and flashinfer-jit-cache where FlashInfer takes it
    (its version matches flashinfer-python's, as FlashInfer tests at import)."""
    recorded = ctx.python.cuda_libraries or {}
    packages = ctx.python.packages or {}
    engine = engines.get(ctx.intent.engine)
    wanted = {engine.package, *engine.kernel_packages}
    fi, jc = packages.get("flashinfer-python"), packages.get("flashinfer-jit-cache")
    if fi and jc and jit_cache_matches(fi, jc):
        wanted.add("flashinfer-jit-cache")
    return {name: lib for name, lib in recorded.items() if name in wanted and (lib.cubins or lib.ptx)}


def _ptx_outcomes(ctx: Context, drv: tuple[int, int], libraries: dict[str, CudaLibrary]) -> Iterator[Outcome]:
    """Per library and GPU arch: pass where a cubin runs on the GPU; else the PTX the driver
    would JIT against the driver's CUDA (an error where every such PTX is newer than the
    driver, a warning where some is, or where its ISA is unreadable or past the table)."""
    try:
        gpus = used_gpus(ctx)
    except (Skip, Missing):
        return  # FC201/FC202 say why there are no GPUs; the torch comparison stands alone
    by_cc: dict[tuple[int, int], list[Gpu]] = {}
    for g in gpus:
        cc = major_minor(g.compute_capability)
        if cc is not None:
            by_cc.setdefault(cc, []).append(g)
    checked: list[str] = []
    failed = False
    for name, lib in sorted(libraries.items()):
        label = f"{name} {lib.version}" if lib.version else name
        for cc, group in sorted(by_cc.items()):
            cubins = [c for c in (arch_code(a, False) for a in lib.cubins or ()) if c is not None]
            if any(code_runs_on(c, cc) for c in cubins):
                checked.append(f"{label}: cubin for sm_{cc[0]}{cc[1]}")
                continue
            jit = {a: v for a, v in (lib.ptx or {}).items() if (code := arch_code(a, True)) and code_runs_on(code, cc)}
            if not jit:
                continue  # no code for this GPU at all: FC204 / FC111 territory, not the driver's
            outcome = _judge_ptx(ctx, drv, label, lib, cc, group, jit)
            if outcome is None:
                checked.append(f"{label}: PTX for sm_{cc[0]}{cc[1]} the driver accepts")
            else:
                failed = True
                yield outcome
    if checked or not failed:
        yield ok("; ".join(checked) or "no recorded kernel library needs PTX JIT-compiled here")


def _judge_ptx(
    ctx: Context,
    drv: tuple[int, int],
    label: str,
    lib: CudaLibrary,
    cc: tuple[int, int],
    gpus: list[Gpu],
    jit: dict[str, list[str]],
) -> Outcome | None:
    """The verdict on the PTX ``jit`` ({arch: ISA versions}) a library has for GPUs of
    ``cc``; None when the driver accepts all of it."""
    sm = f"sm_{cc[0]}{cc[1]}"
    ptx_text = ", ".join(f"compute_{a.replace('.', '')} (PTX ISA {'/'.join(v) or '?'})" for a, v in sorted(jit.items()))
    ev = {
        "library": label,
        "cubins": lib.cubins,
        "ptx": {a: list(v) for a, v in jit.items()},
        "driver": ctx.driver.version,
        "driver_cuda": ctx.driver.cuda_version,
    }
    more = f" and {len(gpus) - 1} more" if len(gpus) > 1 else ""
    where = f"{label} has no cubin for {gpu_label(gpus[0])}{more}, only {ptx_text}"
    isas = [i for v in jit.values() for i in (major_minor(x) for x in v) if i is not None]
    if not isas or any(not v for v in jit.values()):
        return fail(
            f"{where}, whose PTX ISA version could not be read: the driver (CUDA {drv[0]}.{drv[1]}) JIT-compiles it "
            "and refuses it if it is newer than itself (CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222)",
            fix=f"install a build of {label.split()[0]} with cubins for {sm}, or a driver at least as new as its CUDA",
            subject=subject(gpus),
            severity=WARNING,
            evidence=ev,
        )
    needs = [(isa, *ptx_needs_cuda(isa)) for isa in isas]
    verdicts = [ptx_accepted(isa, drv) for isa in isas]
    refused = [v for v in verdicts if v is False]
    undecided = [v for v in verdicts if v is None]
    if not refused and not undecided:
        return None
    newest_isa, newest_cuda, newest_exact = max(needs)
    cuda_text = (
        f"{newest_cuda[0]}.{newest_cuda[1]}" if newest_exact else f"newer than {newest_cuda[0]}.{newest_cuda[1]}"
    )
    need_driver = driver_for(newest_cuda) if newest_exact else None
    ev |= {"ptx_isa": f"{newest_isa[0]}.{newest_isa[1]}", "needed_cuda": cuda_text, "needed_driver": need_driver}
    fix = (
        f"install NVIDIA driver >= {need_driver} (CUDA {cuda_text}'s)"
        if need_driver
        else f"install a driver of CUDA {cuda_text}"
    ) + (
        f", or a build of {label.split()[0]} with cubins for {sm} (or one built with CUDA <= {drv[0]}.{drv[1]}); "
        f"data-center GPUs: the cuda-compat package of CUDA {cuda_text} (forward compatibility)"
    )
    refuses = "the driver JIT rejects PTX newer than itself: CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222)"
    if refused and len(refused) == len(needs):
        return fail(
            f"{where}, which needs CUDA {cuda_text}; driver {ctx.driver.version} supports CUDA {drv[0]}.{drv[1]}: "
            f"{refuses} at the library's first kernel",
            fix=fix,
            subject=subject(gpus),
            evidence=ev,
        )
    how = (
        "some of it needs a newer CUDA than the driver's"
        if refused
        else f"PTX ISA {newest_isa[0]}.{newest_isa[1]} is not in the ISA table read here (extrapolating)"
    )
    return fail(
        f"{where}; driver {ctx.driver.version} supports CUDA {drv[0]}.{drv[1]} and {how}: "
        "kernels whose PTX is newer than the driver fail with CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222)",
        fix=fix,
        subject=subject(gpus),
        severity=WARNING,
        evidence=ev,
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
