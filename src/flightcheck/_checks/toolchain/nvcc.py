"""FC1xx — JIT toolchain (failure 1 of the story): FC101–FC106 here, the rest in
``toolchain_build``. FlashInfer compiles its kernels on first use, which for vLLM is right
after the weights load, with the nvcc, ninja and host compiler the engine's environment
resolves; these checks resolve them the same way, before the load.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok, summary, unknown
from flightcheck._checks.shared import jit as _jit
from flightcheck._knowledge import engines
from flightcheck._knowledge import flashinfer as _fi
from flightcheck._knowledge import vllm as _vllm
from flightcheck._knowledge.derived import gpu_subject
from flightcheck._knowledge.units import major_minor
from flightcheck._vocabulary.results import ERROR, WARNING

if TYPE_CHECKING:
    from flightcheck._vocabulary.facts import Gpu


@summary("FC1")
def _headline(ctx: Context) -> str:
    tc = ctx.facts.toolchain
    if tc is None:
        return "toolchain facts unavailable"
    parts = []
    if tc.nvcc and tc.nvcc.version:
        parts.append(
            f"nvcc {tc.nvcc.version} ({tc.cuda_home.path if tc.cuda_home and tc.cuda_home.path else tc.nvcc.path})"
        )
    else:
        parts.append("no nvcc")
    parts.append(f"ninja {tc.ninja.version}" if tc.ninja else "no ninja")
    parts.append(f"c++ {tc.cxx.version}" if tc.cxx else "no c++")
    built = ctx.python.jit_cache_archs
    if built:
        parts.append(f"flashinfer-jit-cache for {' '.join(built)}")
    return ", ".join(parts)


def _vllm_disables_flashinfer(ctx: Context) -> str | None:
    """Why vLLM will switch FlashInfer off instead of failing its JIT build (its
    ``has_flashinfer`` gate: no flashinfer-cubin and no nvcc or ninja), or None."""
    if "flashinfer-gate" not in engines.get(ctx.intent.engine).runtime_compilers:
        return None
    packages = ctx.python.packages or {}
    version = packages.get("vllm")
    if not _fi.at_least(version, _vllm.FLASHINFER_GATED_ON_TOOLS_SINCE) or packages.get("flashinfer-cubin"):
        return None
    return (
        f"vLLM {version} sees no flashinfer-cubin and disables FlashInfer at startup (vllm/utils/flashinfer.py), "
        "falling back to its other kernels: slower, and MXFP4 MoE goes to DeepGEMM (FC119)"
    )


def _needed_or_skip(ctx: Context) -> tuple[bool | None, str]:
    needed, why = _jit.jit_needed(ctx)
    if needed is False:
        raise Skip(f"no JIT needed: {why}")
    return needed, why


@check(
    "FC101",
    "nvcc-missing",
    ERROR,
    logs=(
        "Could not find nvcc",
        "/bin/nvcc: not found",
        r"(?:^|[\s:])nvcc: (?:command )?not found",
        # torch's cpp_extension when it finds no toolkit at all
        "CUDA_HOME environment variable is not set",
        "No such file or directory: '(?:[^']*/)?nvcc'",
        "nvcc: command not found",
    ),
)
def nvcc_missing(ctx: Context) -> Iterator[Outcome]:
    """No nvcc will be found, and FlashInfer will need one to JIT-compile its kernels.

    ## What it checks
    When JIT is needed (flashinfer-python installed without a flashinfer-jit-cache of the
    same version built for every GPU used), an nvcc exists where FlashInfer looks:
    ``$CUDA_HOME/bin/nvcc``, else ``$CUDA_PATH/bin/nvcc``, else the nvcc on PATH, else
    ``/usr/local/cuda/bin/nvcc`` (or ``$FLASHINFER_NVCC``), in the engine's environment.

    ## Why the launch dies
    vLLM imports FlashInfer happily and loads every weight first. The first FlashInfer
    kernel (the FP4 weight shuffle right after loading, the sampler, the MoE) is compiled
    then, and the build fails with "Could not find nvcc" or "nvcc: not found": after a
    15-minute load, with no fallback. vLLM 0.33 and later check first when flashinfer-cubin
    is absent: they disable FlashInfer and take slower fallbacks (a warning then).

    ## How to fix
    Install the CUDA toolkit matching the driver (``apt-get install cuda-toolkit-13-1``) and
    ``export CUDA_HOME=/usr/local/cuda-13.1``, or point CUDA_HOME at a toolkit already on the
    host; or install ``flashinfer-jit-cache`` for torch's CUDA so nothing is compiled.
    """
    needed, why = _needed_or_skip(ctx)
    nvcc = ctx.toolchain.nvcc
    if nvcc is not None and nvcc.path:
        yield ok(f"nvcc {nvcc.version or '?'} at {nvcc.path}")
        return
    if ctx.facts.toolchain is None:
        yield unknown(f"toolchain facts unavailable ({ctx.facts.reason('toolchain') or 'not collected'})")
        return
    if needed is None:
        yield unknown(f"no nvcc; JIT may be needed: {why}")
        return
    archs = _jit.archs_used(ctx)
    need = _jit.need_for(archs or ["90a"])
    no_ninja = ctx.toolchain.ninja is None and not ctx.toolchain.ninja_in_venv
    fix = _jit.toolkit_fix(ctx, need, with_ninja=no_ninja)
    alt = _jit.jit_cache_install(ctx, list(archs) if archs else None)
    if alt:
        fix += f"  (or compile nothing: {alt})"
    home = ctx.toolchain.cuda_home
    where = (
        f"{home.path}/bin/nvcc does not exist"
        if home is not None and home.path
        else "no CUDA_HOME, no nvcc on PATH, no /usr/local/cuda"
    )
    gated = _vllm_disables_flashinfer(ctx)
    yield fail(
        f"no nvcc ({where}); {why}" + (f"; {gated}" if gated else ""),
        fix=fix,
        severity=WARNING if gated else None,
        evidence={"cuda_home": home.path if home else None, "jit": why},
    )


@check(
    "FC102",
    "nvcc-too-old-for-gpu",
    ERROR,
    logs=(r"nvcc fatal\s*: Unsupported gpu architecture 'compute_\d+[af]?'",),
)
def nvcc_too_old(ctx: Context) -> Iterator[Outcome]:
    """The nvcc that will be used is too old to compile for the arch of a GPU used.

    ## What it checks
    When JIT is needed, the version of the nvcc FlashInfer will call is at least the minimum
    for every GPU's arch (90a 12.3, 100a 12.8, 103a 12.9, 110a 13.0, 120f 12.9, 121a 12.9)
    as the installed FlashInfer builds it: SM 12.x is ``120f`` from FlashInfer 0.6.7,
    ``120a`` in 0.5.0-0.6.6 and torch's ``sm_120`` before (12.8 for both),
    and, where ``nvcc --list-gpu-arch`` was read, that it lists the arch. On SM 10.x with
    torch built for CUDA 12.9 or later, FlashInfer also builds ``compute_100f`` family code
    (its TGV GEMM; ``is_sm100f_supported`` reads torch's CUDA, not nvcc's): 12.9 there.

    ## Why the launch dies
    FlashInfer never checks nvcc against the GPU: the first kernel build after the weight
    load fails with "nvcc fatal : Unsupported gpu architecture 'compute_103a'" (on SM12x,
    with "No supported CUDA architectures found" before that).

    ## How to fix
    Point CUDA_HOME at a newer toolkit on the host (``export CUDA_HOME=/usr/local/cuda-13.1``)
    or install one that matches the driver (``apt-get install cuda-toolkit-13-1``).
    """
    _needed, why = _needed_or_skip(ctx)
    version = _jit.nvcc_version(ctx)
    if version is None:
        raise Skip("no nvcc version to compare (FC101 covers a missing nvcc)")
    archs = _jit.archs_used(ctx)
    if archs is None:
        raise Skip(
            f"GPU archs unknown, {_jit.no_gpu_note(ctx)}; "
            f"nvcc {_jit.fmt(version)} can target {' '.join(_jit.archs_supported_by(version))}"
        )
    listed = ctx.nvcc.archs
    path = ctx.nvcc.path
    bad: list[tuple[str, tuple[int, int] | None, list[Gpu], str]] = []
    torch = major_minor(ctx.python.torch_cuda)
    family = torch is not None and torch >= _fi.FAMILY_TARGET_TORCH_CUDA
    fi_version = (ctx.python.packages or {}).get("flashinfer-python")
    for named, gpus in archs.items():
        # the arch this FlashInfer release builds (SM 12.x: 120 / 120a / 120f by release)
        arch = _fi.jit_arch(named, fi_version)
        need = _jit.MIN_NVCC.get(arch)
        base = "sm_" + arch.rstrip("af")
        cc = major_minor(gpus[0].compute_capability)
        if (
            family
            and cc
            and cc[0] in _fi.FAMILY_TARGET_MAJORS
            and version < _fi.FAMILY_TARGET_NVCC
            and (need is None or need < _fi.FAMILY_TARGET_NVCC)
        ):
            # FlashInfer decides by torch's CUDA, not nvcc's: compute_100f needs 12.9
            need = max(need or _fi.FAMILY_TARGET_NVCC, _fi.FAMILY_TARGET_NVCC)
            fam = f"compute_{cc[0]}0f"
            bad.append(
                (
                    arch,
                    need,
                    gpus,
                    f"gets {fam} code too (torch CUDA {ctx.python.torch_cuda}), which needs nvcc >= 12.9",
                )
            )
        elif need and version < need:
            bad.append((arch, need, gpus, f"needs nvcc >= {_jit.fmt(need)}"))
        elif listed and base not in listed and base + arch[-1] not in listed:
            bad.append((arch, need, gpus, f"{base} is not in its --list-gpu-arch"))
    if not bad:
        yield ok(f"nvcc {_jit.fmt(version)} targets {' '.join(archs)}")
        return
    need_all = max([_jit.need_for([b[0] for b in bad]), version] + [b[1] for b in bad if b[1]])
    for arch, need, gpus, why_too_old in bad:
        yield fail(
            f"nvcc {_jit.fmt(version)} ({path}) cannot compile for {arch} ({gpus[0].name or 'GPU'}): "
            f"{arch} {why_too_old}; {why}",
            fix=_jit.toolkit_fix(ctx, need_all),
            subject=gpu_subject(gpus[0]),
            evidence={
                "nvcc": path,
                "nvcc_version": _jit.fmt(version),
                "arch": arch,
                "min_nvcc": _jit.fmt(need) if need else None,
            },
        )


@check(
    "FC103",
    "ninja-missing",
    ERROR,
    logs=(
        "No such file or directory: '(?:[^']*/)?ninja'",
        "ninja: (?:command )?not found",
        r"Ninja is required to load C\+\+ extensions",
    ),
)
def ninja_missing(ctx: Context) -> Iterator[Outcome]:
    """No ``ninja`` on the engine's PATH, and FlashInfer will need it to JIT-compile.

    ## What it checks
    When JIT is needed, ``ninja`` resolves on the engine's PATH. A ``ninja`` in the engine's
    venv bin that PATH does not reach (the pip ``ninja`` package of an unactivated venv) is
    named in the message.

    ## Why the launch dies
    FlashInfer runs ``ninja -C <build dir>`` from PATH for every module that is not
    prebuilt, even with a warm cache; without it the first kernel after the weight load
    raises "FileNotFoundError: [Errno 2] No such file or directory: 'ninja'". vLLM 0.33 and
    later without flashinfer-cubin disable FlashInfer instead (a warning then).

    ## How to fix
    ``export PATH=<venv>/bin:$PATH`` when the venv has one, else ``apt-get install ninja-build``
    (or ``pip install ninja`` into the engine's venv and put its bin on PATH).
    """
    needed, why = _needed_or_skip(ctx)
    ninja = ctx.toolchain.ninja
    if ninja is not None:
        yield ok(f"ninja {ninja.version or '?'} at {ninja.path}")
        return
    if ctx.facts.toolchain is None:
        yield unknown(f"toolchain facts unavailable ({ctx.facts.reason('toolchain') or 'not collected'})")
        return
    in_venv = ctx.toolchain.ninja_in_venv
    if needed is None:
        yield unknown(f"no ninja on PATH; JIT may be needed: {why}")
        return
    if in_venv:
        bindir = in_venv.rsplit("/", 1)[0]
        gated = _vllm_disables_flashinfer(ctx)
        yield fail(
            f"no ninja on the engine's PATH, but {in_venv} exists (the venv is not activated); {why}"
            + (f"; {gated}" if gated else ""),
            fix=f"export PATH={bindir}:$PATH",
            severity=WARNING if gated else None,
            evidence={"ninja_in_venv": in_venv},
        )
        return
    gated = _vllm_disables_flashinfer(ctx)
    yield fail(
        f"no ninja on the engine's PATH; {why}" + (f"; {gated}" if gated else ""),
        fix=f"{_jit.install(ctx, 'ninja-build')}  (or: {_jit.pip(ctx, 'ninja')} and put that venv's bin on PATH)",
        severity=WARNING if gated else None,
        evidence={"PATH": ctx.env.get("PATH")},
    )


@check(
    "FC104",
    "c-compiler-missing",
    ERROR,
    logs=(
        r"(?:error: )?command '(?:gcc|g\+\+|c\+\+|cc)' failed: No such file or directory",
        r"No such file or directory: '(?:c\+\+|g\+\+|gcc)'",
        r"(?:c\+\+|g\+\+|gcc): (?:command )?not found",
    ),
)
def c_compiler_missing(ctx: Context) -> Iterator[Outcome]:
    """No C/C++ host compiler for Triton's launcher and the JIT builds.

    ## What it checks
    ``$CXX`` (default ``c++``) and ``$CC`` (default ``cc``) resolve on the engine's PATH.

    ## Why the launch dies
    Triton compiles a small C launcher for every kernel it generates (torch.compile runs in
    vLLM's profile run, after the weight load), and FlashInfer compiles and links its .cpp
    sources with ``$CXX``. Without a compiler both fail with "Failed to find C compiler" or
    "c++: not found".

    ## How to fix
    ``apt-get install build-essential`` (``dnf install gcc gcc-c++``), or set CC/CXX to a
    compiler that exists.
    """
    tc = ctx.need(ctx.facts.toolchain, "toolchain")
    missing = [(key, var) for key, var in (("cxx", "CXX"), ("cc", "CC")) if getattr(tc, key) is None]
    if tc.cxx is not None and tc.cc is not None:
        yield ok(f"c++ {tc.cxx.version or '?'} ({tc.cxx.path}), cc {tc.cc.version or '?'} ({tc.cc.path})")
        return
    reasons = [ctx.facts.reason(f"toolchain.{key}") or f"no {key}" for key, _ in missing]
    bad_vars = [var for _, var in missing if ctx.env.get(var)]
    fix = (
        install(ctx)
        if not bad_vars
        else f"unset {' '.join(bad_vars)} (or point it at an installed compiler); {install(ctx)}"
    )
    yield fail("no host compiler: " + "; ".join(reasons), fix=fix, evidence={"missing": [k for k, _ in missing]})


def install(ctx: Context) -> str:
    """The host-compiler install line for this OS."""
    return _jit.install(ctx, "build-essential")


@check(
    "FC105",
    "cuda-home-invalid",
    ERROR,
    logs=(
        # a PATH-style value (CUDA_HOME=:/usr/local/cuda-12.8): nvcc is looked up under ":/usr/..."
        r"(?:^|\s|: ):(?:/[^\s:/]+)+/bin/nvcc: not found",
        "nvcc: No such file or directory.*CUDA_HOME",
    ),
)
def cuda_home_invalid(ctx: Context) -> Iterator[Outcome]:
    """CUDA_HOME (or CUDA_PATH) is set but names no usable toolkit.

    ## What it checks
    When CUDA_HOME or CUDA_PATH is set in the engine's environment, the directory exists and
    has ``bin/nvcc``.

    ## Why the launch dies
    A set CUDA_HOME wins over the nvcc on PATH: FlashInfer (and torch's cpp_extension) use
    ``$CUDA_HOME/bin/nvcc`` without a fallback, so a stale value left from another image
    fails every JIT build ("nvcc: not found", "ninja: build stopped") after the load.

    ## How to fix
    ``export CUDA_HOME=<an installed toolkit>`` (e.g. ``/usr/local/cuda-13.1``) or unset it.
    """
    home = ctx.need(ctx.toolchain.cuda_home, "toolchain.cuda_home")
    if home.source not in ("CUDA_HOME", "CUDA_PATH"):
        raise Skip("neither CUDA_HOME nor CUDA_PATH is set")
    nvcc = ctx.nvcc.path
    override = ctx.env.get("FLASHINFER_NVCC")
    if home.exists and (nvcc or override):
        yield ok(f"{home.source}={home.path}")
        return
    problem = "does not exist" if not home.exists else "has no bin/nvcc"
    need = _jit.need_for(_jit.archs_used(ctx) or ["90a"])
    root = _jit.alternative(ctx, at_least=need) or _jit.alternative(ctx)
    fix = f"export {home.source}={root}" if root else f"unset {home.source}; {_jit.toolkit_fix(ctx, need)}"
    needed, why = _jit.jit_needed(ctx)
    # Only a JIT build reads it: when nothing is compiled the launch is served, so a warning
    # (docs/what-stops-a-launch.md).
    yield fail(
        f"{home.source}={home.path} {problem}" + (f" (harmless while {why})" if needed is False else ""),
        fix=fix,
        evidence={"cuda_home": home.path, "source": home.source},
        severity=WARNING if needed is False else None,
    )


@check("FC106", "nvcc-torch-cuda-mismatch", WARNING)
def nvcc_torch_mismatch(ctx: Context) -> Iterator[Outcome]:
    """The nvcc major version differs from the CUDA major torch was built with.

    ## What it checks
    When JIT is needed, the major version of the nvcc that will be used equals the major of
    torch's CUDA (``torch.version.cuda``).

    ## Why the launch dies
    Kernels built by a CUDA 13 nvcc link against libcudart.so.13 while torch and its workers
    load libcudart.so.12 (or the reverse): the JIT module fails to load, or loads and fails
    with "cudaErrorInsufficientDriver" / symbol errors; a cache built with one major and
    reused by the other fails the same way.

    ## How to fix
    Point CUDA_HOME at a toolkit of torch's major (``export CUDA_HOME=/usr/local/cuda-12.9``
    for a cu129 torch), or install one.
    """
    _needed_or_skip(ctx)
    nvcc = _jit.nvcc_version(ctx)
    torch = major_minor(ctx.python.torch_cuda)
    if nvcc is None:
        raise Skip("no nvcc version (FC101)")
    if torch is None:
        raise Skip(f"torch's CUDA version unknown ({ctx.facts.reason('python.torch_cuda') or 'not recorded'})")
    if nvcc[0] == torch[0]:
        yield ok(f"nvcc {_jit.fmt(nvcc)} and torch CUDA {_jit.fmt(torch)} share major {nvcc[0]}")
        return
    need = max(_jit.need_for(_jit.archs_used(ctx) or ["90a"]), (torch[0], 0))
    root = _jit.alternative(ctx, at_least=need, major=torch[0])
    fix = f"export CUDA_HOME={root}" if root else _jit.toolkit_install(ctx, need)
    yield fail(
        f"nvcc {_jit.fmt(nvcc)} ({ctx.nvcc.path}) is CUDA {nvcc[0]}, torch is built with CUDA {_jit.fmt(torch)}",
        fix=fix,
        evidence={"nvcc_version": _jit.fmt(nvcc), "torch_cuda": _jit.fmt(torch)},
    )
