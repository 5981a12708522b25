"""FC127, FC128 — nvidia-cutlass-dsl (CuTe DSL): a flavour that runs on this toolkit and
GPU, and the ptxas it is told to use. Imported through ``toolchain``.
"""

from __future__ import annotations

from collections.abc import Iterator

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok, unknown
from flightcheck._checks.shared import jit as _jit
from flightcheck._checks.toolchain._shared import _extension
from flightcheck._knowledge import flashinfer as _fi
from flightcheck._knowledge.derived import gpu_subject
from flightcheck._knowledge.units import major_minor
from flightcheck._vocabulary.results import ERROR


@check("FC127", "cute-dsl-flavor-incompatible", ERROR)
def cute_dsl_flavor(ctx: Context) -> Iterator[Outcome]:
    """nvidia-cutlass-dsl (CuTe DSL: FA4, quack, Blackwell kernels) has no build the driver runs.

    ## What it checks
    When nvidia-cutlass-dsl is installed and an SM 10.x GPU is used, at least one of its
    ``_cutlass_ir.cu{N}`` builds has N no newer than the driver's CUDA major: its loader
    (``cutlass/_mlir/_mlir_libs/__init__.py``) keeps only those.

    ## Why the launch dies
    A cu13-only CuTe DSL on a CUDA 12.x driver raises "None of the installed toolkit flavors
    (cu13) are compatible with the CUDA driver" on the first CuTe DSL import, which vLLM
    defers to the first Blackwell attention / MoE kernel, after the weight load.

    ## How to fix
    Install the flavour of the driver's major with the engine's interpreter (``python -m pip
    install nvidia-cutlass-dsl-libs-cu12==<nvidia-cutlass-dsl version>``), or upgrade the
    driver.
    """
    packages = ctx.need(ctx.python.packages, "python.packages")
    version = packages.get("nvidia-cutlass-dsl")
    if not version:
        raise Skip("nvidia-cutlass-dsl is not installed")
    archs = _jit.archs_used(ctx)
    if archs is None:
        raise Skip(f"GPU archs unknown, {_jit.no_gpu_note(ctx)}")
    if not any((mm := major_minor(g[0].compute_capability)) and mm[0] == 10 for g in archs.values()):
        raise Skip("no SM 10.x GPU used")
    driver = major_minor(ctx.driver.cuda_version)
    if driver is None:
        raise Skip("the driver's CUDA version is unknown (FC201)")
    flavors = _extension(ctx, ctx.toolchain.cute_dsl_flavors, "toolchain.cute_dsl_flavors")
    usable = [f for f in flavors if f <= driver[0]]
    if usable:
        yield ok(f"nvidia-cutlass-dsl {version} cu{max(usable)} runs on the CUDA {_jit.fmt(driver)} driver")
        return
    installed = ", ".join(f"cu{f}" for f in flavors) or "none"
    yield fail(
        f"nvidia-cutlass-dsl {version} has {installed} builds only and the driver supports CUDA {_jit.fmt(driver)}: "
        "'None of the installed toolkit flavors are compatible with the CUDA driver' at the first CuTe DSL kernel",
        fix=_jit.pip(ctx, f"nvidia-cutlass-dsl-libs-cu{driver[0]}=={version}") + "  (or upgrade the driver)",
        evidence={"flavors": flavors, "driver_cuda": ctx.driver.cuda_version},
    )


@check("FC128", "cute-dsl-ptxas-path-unusable", ERROR, logs=("RuntimeError: ptxas not found: ",))
def cute_dsl_ptxas(ctx: Context) -> Iterator[Outcome]:
    """CUTE_DSL_PTXAS_PATH names no executable, or a ptxas too old for a GPU used.

    ## What it checks
    When nvidia-cutlass-dsl is installed and ``CUTE_DSL_PTXAS_PATH`` is set, it names an
    executable ptxas whose CUDA release knows every GPU arch used (100a 12.8, 103a 12.9,
    110a 13.0, ...). vLLM's FA4 (``vllm_flash_attn/cute/interface.py``), its TML FA4 and
    quack patch CuTe DSL to assemble with it as soon as they are imported.

    ## Why the launch dies
    A path that is not an executable file raises "RuntimeError: ptxas not found: <path>"
    at the import; an old ptxas fails every CuTe DSL kernel with "ptxas failed: ...
    Value 'sm_103a' is not defined", at the first attention / MoE kernel after the load.

    ## How to fix
    ``export CUTE_DSL_PTXAS_PATH=/usr/local/cuda-13.0/bin/ptxas`` (a toolkit that knows the
    arch), or unset it to keep CuTe DSL's embedded ptxas.
    """
    packages = ctx.need(ctx.python.packages, "python.packages")
    if not packages.get("nvidia-cutlass-dsl"):
        raise Skip("nvidia-cutlass-dsl is not installed")
    value = ctx.env.get(_fi.CUTE_DSL_PTXAS)
    if not value:
        raise Skip(f"{_fi.CUTE_DSL_PTXAS} is not set: CuTe DSL uses its embedded ptxas")
    st = (ctx.toolchain.env_paths or {}).get(_fi.CUTE_DSL_PTXAS)
    if st is None:
        yield unknown(f"{_fi.CUTE_DSL_PTXAS}={value} was not examined")
        return
    home = ctx.toolchain.cuda_home
    archs = _jit.archs_used(ctx) or {}
    need = _jit.need_for(list(archs)) if archs else None
    cur = _jit.nvcc_version(ctx)
    better = (
        f"export {_fi.CUTE_DSL_PTXAS}={home.path}/bin/ptxas  (or: unset {_fi.CUTE_DSL_PTXAS})"
        if home is not None and home.path and cur is not None and (need is None or cur >= need)
        else f"unset {_fi.CUTE_DSL_PTXAS}"
    )
    if st.kind != "executable":
        what = {"dir": "a directory", "file": "not executable", "missing": "missing"}.get(st.kind or "", st.kind)
        yield fail(
            f"{_fi.CUTE_DSL_PTXAS}={value} is {what}: importing vLLM's FA4 or quack raises 'ptxas not found'",
            fix=better,
            evidence={"path": value, "kind": st.kind},
        )
        return
    ver = major_minor(st.version)
    if need is None or ver is None:
        yield ok(f"{_fi.CUTE_DSL_PTXAS}={value}" + (f" (CUDA {st.version})" if st.version else ""))
        return
    if ver >= need:
        yield ok(f"{_fi.CUTE_DSL_PTXAS}={value} (CUDA {_jit.fmt(ver)}) knows {' '.join(archs)}")
        return
    arch = next((a for a in archs if _jit.need_for([a]) > ver), next(iter(archs)))
    yield fail(
        f"{_fi.CUTE_DSL_PTXAS}={value} is CUDA {_jit.fmt(ver)}; {arch} needs {_jit.fmt(need)}: every CuTe DSL "
        "kernel fails to assemble ('ptxas failed')",
        fix=better,
        subject=gpu_subject(archs[arch][0]),
        evidence={"path": value, "version": st.version, "arch": arch},
    )
