"""Derivations the JIT-toolchain and engine checks share (pure functions of facts + intent).

"JIT needed", the arch of each GPU used and the nvcc it needs, which toolkit to install or
point CUDA_HOME at, and the exact install commands for this host's OS and interpreter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flightcheck._knowledge import flashinfer as _fi_wheels
from flightcheck._knowledge.derived import package
from flightcheck._knowledge.gpus import arch_of, arch_to_cc, covers, parse_arch_list
from flightcheck._knowledge.units import major_minor

if TYPE_CHECKING:
    from flightcheck._checks.framework import Context
    from flightcheck._vocabulary.facts import Gpu

#: Oldest nvcc that can target each FlashInfer arch (flashinfer/aot.py, utils.py; CUDA notes).
MIN_NVCC: dict[str, tuple[int, int]] = {
    "75": (10, 0),
    "80": (11, 0),
    "86": (11, 1),
    "87": (11, 4),
    "89": (11, 8),
    "90": (11, 8),
    "90a": (12, 3),
    "100a": (12, 8),
    "101a": (12, 8),
    "103a": (12, 9),
    "107a": (12, 9),
    "110a": (13, 0),
    "120": (12, 8),  # FlashInfer before 0.5.0: torch's arch flags (sm_120)
    "120a": (12, 8),
    "120f": (12, 9),
    "121": (12, 9),
    "121a": (12, 9),
}
#: Last minor release of each CUDA major (a toolkit for torch built against an older major).
LAST_MINOR = {11: 8, 12: 9}


def fmt(v: tuple[int, int]) -> str:
    """(13, 1) -> '13.1'."""
    return f"{v[0]}.{v[1]}"


def archs_used(ctx: Context) -> dict[str, list[Gpu]] | None:
    """FlashInfer arch -> the GPUs used that have it; None when no GPU facts say which."""
    if "archs" not in ctx.cache:
        out: dict[str, list[Gpu]] = {}
        for gpu in ctx.gpus_used:
            arch = arch_of(gpu.compute_capability)
            if arch:
                out.setdefault(arch, []).append(gpu)
        ctx.cache["archs"] = out or None
    archs: dict[str, list[Gpu]] | None = ctx.cache["archs"]
    return archs


def no_gpu_note(ctx: Context) -> str:
    """Why the GPU archs are unknown, pointing at the check that says more."""
    error = ctx.driver.error
    if ctx.facts.gpus is None or ctx.driver.loaded is False:
        return "no GPU facts (NVML unavailable" + (f": {error}" if error else "") + ", see FC201)"
    if not ctx.gpus_used:
        return "no GPU is visible to the engine (see FC202)"
    return "the GPUs used report no compute capability"


def need_for(archs: dict[str, list[Gpu]] | list[str]) -> tuple[int, int]:
    """The newest nvcc minimum among ``archs`` (12.3 for archs it does not know)."""
    return max((MIN_NVCC.get(a, (12, 3)) for a in archs), default=(12, 3))


def archs_supported_by(nvcc: tuple[int, int]) -> list[str]:
    """The FlashInfer archs from 9.0 up that an nvcc of this version can target."""
    return [a for a, v in MIN_NVCC.items() if v <= nvcc and a[-1] in "af" and a not in ("101a", "107a", "120a")]


def jit_cache_covers(entries: list[str] | None, cc: str) -> bool:
    """Whether a jit-cache built for ``entries`` (``10.3a``, ``12.0f``) has code that runs on
    compute capability ``cc`` (:func:`code_runs_on`); plain cubins count only below SM 9,
    where FlashInfer asks for no arch-specific code."""
    codes, _bad = parse_arch_list(" ".join(entries or ()), flashinfer=False)
    return covers([c for c in codes if c[2] or c[0] < 9], cc)


def jit_cache_matches(fi: str, jc: str) -> bool:
    """FlashInfer's own test at import: the jit-cache's version starts with
    flashinfer-python's (``0.7.2.post1+cu130`` matches ``0.7.2.post1``)."""
    return jc.startswith(fi)


def jit_needed(ctx: Context) -> tuple[bool | None, str]:
    """(needed, why): checks.md's "JIT needed"; None when the GPU archs are unknown.

    Raises:
        Missing: the engine interpreter's packages are unknown.
    """
    packages = ctx.need(ctx.python.packages, "python.packages")
    fi = packages.get("flashinfer-python")
    if not fi:
        return False, "flashinfer-python is not installed: nothing is JIT-compiled"
    covered = prepared_bundle_covers(ctx)
    if covered:
        return False, covered
    jc = packages.get("flashinfer-jit-cache")
    if not jc:
        return True, f"flashinfer-python {fi} without flashinfer-jit-cache compiles its kernels on first use"
    if not jit_cache_matches(fi, jc):
        return True, f"flashinfer-jit-cache {jc} does not match flashinfer-python {fi}"
    archs = archs_used(ctx)
    if archs is None:
        return (
            None,
            f"flashinfer-jit-cache {jc} is installed; whether it covers the GPUs is unknown: {no_gpu_note(ctx)}",
        )
    built = ctx.python.jit_cache_archs
    if built is None:
        return (
            None,
            (
                f"flashinfer-jit-cache {jc} is installed but its archs are unknown "
                f"({ctx.facts.reason('python.jit_cache_archs') or 'not read'})"
            ),
        )
    missing = [a for a, gpus in archs.items() if not jit_cache_covers(built, str(gpus[0].compute_capability))]
    if missing:
        return True, f"flashinfer-jit-cache {jc} is built for {' '.join(built)}, not for {' '.join(missing)}"
    return False, f"flashinfer-jit-cache {jc} covers {' '.join(archs)}: nothing is compiled"


def nvcc_version(ctx: Context) -> tuple[int, int] | None:
    """major.minor of the nvcc that will be used."""
    return major_minor(ctx.nvcc.version)


def _os_family(ctx: Context) -> str:
    name = (ctx.host.os or "").lower()
    if any(k in name for k in ("red hat", "rhel", "rocky", "alma", "centos", "fedora", "amazon linux", "oracle")):
        return "dnf"
    if "suse" in name:
        return "zypper"
    return "apt"


def install(ctx: Context, *packages: str) -> str:
    """The package-manager line for this host's OS (NVIDIA's CUDA repository assumed)."""
    fam = _os_family(ctx)
    names = [_PKG_NAMES.get((fam, p), p) for p in packages]
    return {"apt": "apt-get install -y ", "dnf": "dnf install -y ", "zypper": "zypper install -y "}[fam] + " ".join(
        names
    )


_PKG_NAMES = {
    ("zypper", "ninja-build"): "ninja",
    ("dnf", "build-essential"): "gcc gcc-c++ make",
    ("zypper", "build-essential"): "gcc gcc-c++ make",
}


def python_dev_package(ctx: Context) -> str:
    """python3.12-dev (apt) / python3.12-devel (dnf, zypper) for the engine's Python."""
    mm = major_minor(ctx.python.version)
    base = f"python{mm[0]}.{mm[1]}" if mm else "python3"
    return base + ("-dev" if _os_family(ctx) == "apt" else "-devel")


def pip(ctx: Context, args: str, verb: str = "install") -> str:
    """``<engine python> -m pip install ARGS`` (the engine's interpreter, not whatever pip
    is first on PATH)."""
    exe = ctx.python.executable
    return f"{exe} -m pip {verb} {args}" if exe else f"pip {verb} {args}"


def toolkit_version(ctx: Context, need: tuple[int, int]) -> tuple[tuple[int, int], str]:
    """(toolkit to install, caveat): the driver's CUDA version when it matches torch's major
    (a newer toolkit than the driver cannot run what it builds), the last release of torch's
    major when the driver is newer, and never older than ``need``."""
    driver = major_minor(ctx.driver.cuda_version)
    torch = major_minor(ctx.python.torch_cuda)
    major = torch[0] if torch else (driver[0] if driver else need[0])
    if driver and driver[0] == major:
        choice = driver
    elif driver and driver[0] > major:
        choice = (major, LAST_MINOR.get(major, 0))
    else:
        choice = torch or driver or need
    caveat = ""
    choice = max(choice, need)
    if driver and choice > driver:
        caveat = f" (the driver supports CUDA {fmt(driver)} only: upgrade it to one for CUDA {fmt(choice)} first)"
    return choice, caveat


def alternative(ctx: Context, *, at_least: tuple[int, int] | None = None, major: int | None = None) -> str | None:
    """A toolkit on this host, other than the one in use, that satisfies the constraints
    (newest first; the driver's CUDA version as a ceiling when known)."""
    current = ctx.toolchain.cuda_home.path if ctx.toolchain.cuda_home else None
    driver = major_minor(ctx.driver.cuda_version)
    for alt in ctx.toolchain.alternatives or ():
        v = major_minor(alt.version)
        if not alt.path or v is None:
            continue
        root = alt.path.rsplit("/bin/", 1)[0]
        if root == current or (at_least and v < at_least) or (major is not None and v[0] != major):
            continue
        if driver and v > driver:
            continue
        return root
    return None


def toolkit_fix(ctx: Context, need: tuple[int, int], *, with_ninja: bool = False) -> str:
    """Point CUDA_HOME at a fitting toolkit already on the host, else install one."""
    torch = major_minor(ctx.python.torch_cuda)
    root = alternative(ctx, at_least=need, major=torch[0] if torch else None) or alternative(ctx, at_least=need)
    if root:
        return f"export CUDA_HOME={root}" + (f"; {install(ctx, 'ninja-build')}" if with_ninja else "")
    return toolkit_install(ctx, need, *(["ninja-build"] if with_ninja else []))


def toolkit_install(ctx: Context, need: tuple[int, int], *extra: str) -> str:
    """Install the toolkit :func:`toolkit_version` picks (plus ``extra`` packages) and point
    CUDA_HOME at it."""
    v, caveat = toolkit_version(ctx, need)
    return f"{install(ctx, f'cuda-toolkit-{v[0]}-{v[1]}', *extra)} && export CUDA_HOME=/usr/local/cuda-{fmt(v)}{caveat}"


def jit_cache_install(ctx: Context, archs: list[str] | None, *, replace: bool = False) -> str | None:
    """``pip install flashinfer-jit-cache==<flashinfer-python> --index-url .../cuXYZ`` when
    FlashInfer publishes a build for torch's CUDA that covers ``archs`` (all, when None).
    ``replace``: pin the ``+cuXYZ`` build and force it over an installed one (pip would
    otherwise keep a ``+cu128`` build as satisfying ``==0.7.2``)."""
    fi = package(ctx.facts, "flashinfer-python")
    tag = _fi_wheels.tag_for(ctx.python.torch_cuda)
    if not fi or not tag:
        return None
    built = _fi_wheels.published_archs(fi, tag, ctx.host.machine)
    if built is None or (archs and not all(jit_cache_covers(built, arch_to_cc(a)) for a in archs)):
        return None
    if replace:
        return pip(
            ctx, f"--force-reinstall --no-deps flashinfer-jit-cache=={fi}+{tag} --index-url {_fi_wheels.index_url(tag)}"
        )
    return pip(ctx, f"flashinfer-jit-cache=={fi} --index-url {_fi_wheels.index_url(tag)}")


def prepared_modules_needed(ctx: Context) -> dict[str, list[str]] | None:
    """FlashInfer arch ('10.3a') -> the modules the launch reaches there, by the inventory of
    ``_knowledge/flashinfer_modules.py``; None when the GPU archs are unknown."""
    from flightcheck._knowledge import flashinfer_modules as fim

    archs = archs_used(ctx)
    if archs is None:
        return None
    memory = ctx.memory
    model = memory.cfg if memory is not None else None
    quant = ctx.intent.quantization or (model.quant.method if model is not None else None)
    out: dict[str, list[str]] = {}
    for arch, gpus in archs.items():
        dotted = f"{gpus[0].compute_capability}{arch[-1] if arch[-1] in 'af' else ''}"
        modules = fim.modules_for_launch(
            dotted, tensor_parallel=ctx.intent.tensor_parallel_size, quantization=quant, mla=None
        )
        out[arch] = [m.name for m, _why in modules]
    return out


def prepared_bundle_covers(ctx: Context) -> str | None:
    """Why nothing is compiled because an installed ``flightcheck prepare`` bundle carries
    every module the launch reaches, for the installed FlashInfer / CUDA / GPUs; None when
    there is no such bundle or it does not fit (FC131 says why)."""
    from flightcheck._knowledge import flashinfer_modules as fim

    tc = ctx.facts.toolchain
    pb = tc.prepared_bundle if tc is not None else None
    if pb is None or pb.problem or not pb.complete or not pb.modules:
        return None
    packages = ctx.python.packages or {}
    record = {
        "flashinfer": pb.flashinfer,
        "torch_cuda": pb.torch_cuda,
        "modules": [{"name": m.name, "archs": m.archs} for m in pb.modules],
    }
    ccs = [str(g.compute_capability) for g in ctx.gpus_used if g.compute_capability]
    if not ccs or fim.bundle_mismatches(
        record, flashinfer=packages.get("flashinfer-python"), torch_cuda=ctx.python.torch_cuda, gpu_ccs=ccs
    ):
        return None
    if any(not m.present for m in pb.modules):
        return None
    needed = prepared_modules_needed(ctx)
    have = {m.name for m in pb.modules if m.name}
    if needed is None or any(set(names) - have for names in needed.values()):
        return None
    return f"the prepared bundle for {pb.arch} carries every module the launch reaches ({', '.join(sorted(have))})"
