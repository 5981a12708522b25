"""FC119 — DeepGEMM's JIT compiler: the nvcc vLLM's DeepGEMM (vendored, or an installed
``deep_gemm`` package) runs is new enough for it (the rules and their sources are in
``_knowledge/vllm/kernels.py``). Imported through ``toolchain``.
"""

from __future__ import annotations

from collections.abc import Iterator

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok, unknown
from flightcheck._checks.shared import jit as _jit
from flightcheck._checks.toolchain._shared import _vllm_gate
from flightcheck._knowledge import engines
from flightcheck._knowledge import flashinfer as _fi
from flightcheck._knowledge import vllm as _vllm
from flightcheck._knowledge.derived import gpu_subject
from flightcheck._knowledge.gpus import arch_of
from flightcheck._knowledge.units import major_minor
from flightcheck._vocabulary.results import ERROR, WARNING


@check("FC119", "deepgemm-nvcc-too-old", ERROR, logs=(r"NVCC version (?:must be at least|should be >=) 12\.\d",))
def deepgemm_nvcc(ctx: Context) -> Iterator[Outcome]:
    """vLLM will JIT DeepGEMM kernels with an nvcc older than 12.9 (or none).

    ## What it checks
    For vLLM with its vendored DeepGEMM (0.20.0 and later) or an installed ``deep_gemm``
    package (the only DeepGEMM before 0.20.0, and preferred after), ``VLLM_USE_DEEP_GEMM``
    not 0 (its default is 0 up to 0.10.2, 1 from 0.11.0), a GPU
    used where vLLM's ``support_deep_gemm`` holds (SM 9.0, 10.x, 12.x) and a model whose
    weights take DeepGEMM paths there (block FP8; MXFP4 MoE on SM 10.x when vLLM's FlashInfer
    is off; any model, as a warning, when none is given): the
    nvcc DeepGEMM compiles with (``DG_JIT_NVCC_COMPILER``, else ``$CUDA_HOME/bin/nvcc``) is
    12.9 or newer for the vendored copy (stricter than FC102 on Hopper), 12.3 and the GPU's
    arch for the package.

    ## Why the launch dies
    DeepGEMM compiles its kernels at first use, after the weight load, and its extension
    refuses an older compiler: "NVCC version must be at least 12.9" (vendored) or "NVCC
    version should be >= 12.3" (the package), or fails to run a missing one.

    ## How to fix
    ``export DG_JIT_NVCC_COMPILER=/usr/local/cuda-13.0/bin/nvcc`` (or CUDA_HOME) to a 12.9+
    toolkit on the host, install one, or ``export VLLM_USE_DEEP_GEMM=0`` to keep vLLM off
    DeepGEMM.
    """
    if "deepgemm" not in engines.get(ctx.intent.engine).runtime_compilers:
        raise Skip(f"DeepGEMM is vLLM's; engine is {ctx.intent.engine}")
    packages = ctx.need(ctx.python.packages, "python.packages")
    version = packages.get("vllm")
    if not version:
        raise Skip("vllm is not installed")
    # an installed deep_gemm package wins over the vendored copy (has_deep_gemm, _lazy_init)
    external = packages.get(_vllm.DEEP_GEMM_PACKAGE)
    if not external and not _fi.at_least(version, _vllm.DEEP_GEMM_VENDORED_SINCE):
        raise Skip(
            f"vLLM {version} does not vendor DeepGEMM (from {_vllm.DEEP_GEMM_VENDORED_SINCE}) "
            "and no deep_gemm package is installed"
        )
    default = _vllm.use_deep_gemm_default(version)
    if default is None:
        raise Skip(f"vLLM {version} does not declare {_vllm.USE_DEEP_GEMM}")
    if (ctx.env.get(_vllm.USE_DEEP_GEMM) or default).strip() == "0":
        raise Skip(
            f"{_vllm.USE_DEEP_GEMM}=0" + ("" if ctx.env.get(_vllm.USE_DEEP_GEMM) else f" (vLLM {version}'s default)")
        )
    gpus = [g for g in ctx.gpus_used if _vllm.deep_gemm_arch(g.compute_capability)]
    if not ctx.gpus_used:
        raise Skip(f"GPU archs unknown, {_jit.no_gpu_note(ctx)}")
    if not gpus:
        raise Skip("no GPU used where vLLM enables DeepGEMM (SM 9.0, 10.x, 12.x)")
    memory = ctx.memory
    model = memory.cfg if memory is not None else None
    method = model.quant.method if model is not None else None
    if model is not None:
        packages = ctx.python.packages or {}
        flashinfer_on = bool(packages.get("flashinfer-python")) and not _vllm_gate(ctx)
        gpus = [
            g
            for g in gpus
            if (mm := major_minor(g.compute_capability))
            and _vllm.deep_gemm_takes(method, mm[0], flashinfer_on=flashinfer_on)
        ]
        if not gpus:
            raise Skip(f"the model's weights ({method or 'unquantized'}) take no DeepGEMM path on the GPUs used")
    states = ctx.toolchain.env_paths or {}
    override = ctx.env.get(_vllm.DG_NVCC_VAR)
    if override:
        st = states.get(_vllm.DG_NVCC_VAR)
        if st is None:
            yield unknown(f"{_vllm.DG_NVCC_VAR}={override} was not examined")
            return
        path: str | None = override
        ver = major_minor(st.version) if st.kind == "executable" else None
    else:
        path, ver = ctx.nvcc.path, _jit.nvcc_version(ctx)
    if external:
        # the package's own assert, then the GPU's arch (sm_90a 12.3, sm_100a 12.8, sm_103a 12.9)
        archs = [_jit.MIN_NVCC.get((arch_of(g.compute_capability) or "").replace("f", "a"), (12, 3)) for g in gpus]
        need = max([_vllm.DEEP_GEMM_PACKAGE_MIN_NVCC, *archs])
        who = f"the installed deep_gemm package {external}"
        said = "'NVCC version should be >= 12.3'" if need == _vllm.DEEP_GEMM_PACKAGE_MIN_NVCC else "the GPU's arch"
    else:
        need = _vllm.DEEP_GEMM_MIN_NVCC
        who = f"vLLM {version}'s vendored DeepGEMM"
        said = "'NVCC version must be at least 12.9'"
    note = _vllm.beyond_read(version)
    if ver is not None and ver >= need:
        yield ok(f"{who} compiles with nvcc {_jit.fmt(ver)} ({path})" + (f"; {note}" if note else ""))
        return
    if path and ver is None and not override:
        yield unknown(f"the version of {path} is unknown")
        return
    # the vendored binaries of 0.20.0-0.32.x were not read: their floor is not known
    unread = not external and not _fi.at_least(version, _vllm.DEEP_GEMM_MIN_NVCC_READ_IN)
    need_all = max(need, _jit.need_for(_jit.archs_used(ctx) or []))
    current = _jit.nvcc_version(ctx)
    torch = major_minor(ctx.python.torch_cuda)
    root = _jit.alternative(ctx, at_least=need_all, major=torch[0] if torch else None) or _jit.alternative(
        ctx, at_least=need_all
    )
    if override and current is not None and current >= need_all:
        fix = f"unset {_vllm.DG_NVCC_VAR}  (DeepGEMM then uses {ctx.nvcc.path}, nvcc {_jit.fmt(current)})"
    elif root:
        fix = f"export {_vllm.DG_NVCC_VAR}={root}/bin/nvcc"
    else:
        fix = _jit.toolkit_install(ctx, need_all)
    fix += f"  (or: export {_vllm.USE_DEEP_GEMM}=0)"
    have = f"nvcc {_jit.fmt(ver)} ({path})" if ver else (f"{path}, which cannot run," if path else "no nvcc")
    message = (
        f"vLLM {version} JIT-compiles DeepGEMM ({who}) on {gpus[0].name or 'GPU'} "
        f"(SM {gpus[0].compute_capability}) with {have}: it needs nvcc >= {_jit.fmt(need)} ({said})"
    )
    if unread:
        message += (
            f"; the floor of {_vllm.DEEP_GEMM_MIN_NVCC_READ_IN}'s vendored binary (not read in {version}'s): "
            "a warning, not a stop"
        )
    if note:
        message += f"; {note}"
    yield fail(
        message,
        fix=fix,
        subject=gpu_subject(gpus[0]),
        severity=None if model is not None and not unread else WARNING,
        evidence={
            "nvcc": path,
            "nvcc_version": _jit.fmt(ver) if ver else None,
            "quant": method,
            "deep_gemm": external or "vendored",
            "rules": note,
        },
    )
