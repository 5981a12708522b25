"""FC129–FC130 — the model-specific kernel compilers of vLLM 0.33: tilelang (the mHC ops of
DeepSeek-V4 and GLM5next) and humming (MoE experts on SM 9.0). Each runs only where vLLM's
own gate sends the model (``_knowledge/vllm/``) and reads what the compiler itself reads
(``_knowledge/tilelang.py``, ``_knowledge/humming.py``). Imported through ``toolchain``.
"""

from __future__ import annotations

from collections.abc import Iterator

from flightcheck._checks.framework import Context, Outcome, Skip, check, fail, ok
from flightcheck._checks.shared import jit as _jit
from flightcheck._knowledge import engines
from flightcheck._knowledge import flashinfer as _fi
from flightcheck._knowledge import humming as _hm
from flightcheck._knowledge import tilelang as _tl
from flightcheck._knowledge import vllm as _vllm
from flightcheck._knowledge.derived import gpu_subject
from flightcheck._knowledge.units import major_minor
from flightcheck._vocabulary.results import ERROR, WARNING


def _vllm_version(ctx: Context, since: str, compiler: str) -> str:
    if compiler not in engines.get(ctx.intent.engine).runtime_compilers:
        raise Skip(f"vLLM's kernels; engine is {ctx.intent.engine}")
    version = ctx.need(ctx.python.packages, "python.packages").get("vllm")
    if not version:
        raise Skip("vllm is not installed")
    if not _fi.at_least(version, since):
        raise Skip(f"vLLM {version} is older than the release read ({since})")
    return version


def _model_archs(ctx: Context) -> tuple[str, ...] | None:
    memory = ctx.memory
    return memory.cfg.architectures if memory is not None and memory.cfg is not None else None


def _fact(ctx: Context, value: object, path: str) -> None:
    """A fact of this family missing from the snapshot: skip when no collector gave a
    reason (an older snapshot), else unknown (ctx.need)."""
    if value is None and not ctx.facts.reason(path):
        raise Skip(f"{path} is not in this snapshot (recorded by an older flightcheck?)")
    ctx.need(value, path)


@check("FC129", "tilelang-cuda-home", ERROR)
def tilelang_cuda_home(ctx: Context) -> Iterator[Outcome]:
    """tilelang, which compiles the mHC kernels of DeepSeek-V4 / GLM5next, finds no nvcc, an
    nvcc too old for the GPU, or another toolkit than FlashInfer's.

    ## What it checks
    For vLLM 0.33+ serving a model built on mHC ops (``DeepseekV4*``, ``DeepseekV41*``,
    ``Glm5Next*``: on CUDA every mHC op runs tilelang, ``vllm/model_executor/layers/mhc.py``)
    with tilelang installed: the CUDA home tilelang resolves (``tilelang/env.py``
    ``_find_cuda_home``: CUDA_HOME or CUDA_PATH, the nvcc on PATH, pip's nvidia-cuda-nvcc,
    ``/usr/local/cuda``) exists, its ``bin/nvcc`` runs and knows every GPU arch used; and it
    is the toolkit FlashInfer uses (``jit/cpp_ext.py`` looks at ``/usr/local/cuda`` before
    any pip nvcc, tilelang after).

    ## Why the launch dies
    tilelang JIT-compiles each mHC kernel at the first forward pass (vLLM's profile run,
    after the weight load) with ``<home>/bin/nvcc``: no home raises "Failed to automatically
    detect CUDA installation"; an nvcc that does not know ``sm_103a`` fails the build. Two
    toolkits (pip's nvcc for tilelang, ``/usr/local/cuda`` for FlashInfer) work only while
    both are complete and new enough: a warning.

    ## How to fix
    ``export CUDA_HOME=/usr/local/cuda-13.0`` (one toolkit that knows the GPU, for tilelang
    and FlashInfer alike), or install one.
    """
    version = _vllm_version(ctx, _vllm.TILELANG_MHC_SINCE, "tilelang")
    tilelang = ctx.python.packages.get("tilelang") if ctx.python.packages else None
    if not tilelang:
        raise Skip("tilelang is not installed (vLLM's mHC models raise ImportError at load, not here)")
    archs = _model_archs(ctx)
    if archs is None:
        raise Skip("no model given: tilelang runs only for mHC models (DeepSeek-V4, GLM5next)")
    mhc = [a for a in archs if a in _vllm.MHC_ARCHS]
    if not mhc:
        raise Skip(f"{', '.join(archs) or 'the model'} has no mHC ops: tilelang is not used")
    backend = (ctx.env.get(_tl.EXECUTION_BACKEND) or "auto").strip().lower()
    if backend in _tl.NO_NVCC_BACKENDS:
        raise Skip(f"{_tl.EXECUTION_BACKEND}={backend} does not compile with nvcc")
    tl = ctx.toolchain.tilelang_cuda
    _fact(ctx, tl, "toolchain.tilelang_cuda")
    assert tl is not None
    used = _jit.archs_used(ctx) or {}
    need = _jit.need_for(list(used)) if used else None
    fi_home = ctx.toolchain.cuda_home.path if ctx.toolchain.cuda_home else None
    fi_nvcc = _jit.nvcc_version(ctx)
    torch = major_minor(ctx.python.torch_cuda)

    def home_fix() -> str:
        if fi_home and fi_nvcc is not None and (need is None or fi_nvcc >= need) and fi_home != tl.home:
            return f"export CUDA_HOME={fi_home}  (FlashInfer's toolkit, nvcc {_jit.fmt(fi_nvcc)}: both then use it)"
        at_least = need or (12, 3)
        root = _jit.alternative(ctx, at_least=at_least, major=torch[0] if torch else None) or _jit.alternative(
            ctx, at_least=at_least
        )
        return f"export CUDA_HOME={root}" if root else _jit.toolkit_install(ctx, at_least)

    what = f"{mhc[0]} (mHC ops, tilelang {tilelang}, vLLM {version})"
    evidence = {"home": tl.home, "source": tl.source, "nvcc": tl.nvcc.path if tl.nvcc else None, "flashinfer": fi_home}
    if tl.home is None or tl.nvcc is None:
        yield fail(
            f"tilelang finds no usable CUDA for {what}: {tl.problem or 'no CUDA home'}; its first mHC kernel after "
            f"the weight load raises '{_tl.NOT_FOUND}'",
            fix=home_fix(),
            evidence=evidence,
        )
        return
    ver = major_minor(tl.nvcc.version)
    if need is not None and ver is not None and ver < need:
        arch = next(a for a in used if _jit.need_for([a]) > ver)
        yield fail(
            f"tilelang compiles {what} with nvcc {_jit.fmt(ver)} ({tl.nvcc.path}, from {tl.source}), which cannot "
            f"target {arch} (needs {_jit.fmt(need)}): the first mHC kernel after the weight load fails to build",
            fix=home_fix(),
            subject=gpu_subject(used[arch][0]),
            evidence={**evidence, "nvcc_version": tl.nvcc.version},
        )
        return
    if ctx.python.packages and ctx.python.packages.get("flashinfer-python") and fi_home and tl.home != fi_home:
        yield fail(
            f"tilelang compiles {what} with {tl.nvcc.path} (from {tl.source}, nvcc {tl.nvcc.version or '?'}), "
            f"FlashInfer with {fi_home}: two toolkits in one engine",
            fix=f"export CUDA_HOME={tl.home if ver is not None and (need is None or ver >= need) else fi_home}  "
            "(one toolkit for both)",
            severity=WARNING,
            evidence=evidence,
        )
        return
    yield ok(f"tilelang compiles {mhc[0]}'s mHC kernels with {tl.nvcc.path} (nvcc {tl.nvcc.version or '?'})")


@check("FC130", "humming-nvrtc-missing", ERROR)
def humming_nvrtc(ctx: Context) -> Iterator[Outcome]:
    """humming, vLLM's preferred MoE kernel on SM 9.0, finds no NVRTC for torch's CUDA major.

    ## What it checks
    For vLLM 0.33+ on an SM 9.0 GPU (``prefers_humming``, vLLM's
    ``quantization/utils/humming/priority.py``) serving a MoE model whose experts vLLM sends
    to Marlin, and so to humming (int4 WNA16, MXFP4 except gpt-oss, NVFP4), with
    humming-kernels and cuda-bindings installed and ``HUMMING_COMPILER`` not ``nvcc``: among
    the CUDA environments humming considers (``humming/utils/cuda.py``: /usr/local/cuda*,
    CUDA_HOME, CUDA_PATH, the pip ``nvidia/`` roots) one of torch's CUDA major has
    ``nvrtc.h``, and the one humming picks holds ``libnvrtc.so[.N]``.

    ## Why the launch dies
    humming JIT-compiles its kernels with NVRTC when the experts are set up, after the
    weight load: "No suitable CUDA 13 environment found. Try: pip install
    humming-kernels[cu13]" without the header, "Could not locate the NVRTC library in CUDA
    path" without the library. A driver-only image with a pip torch has neither.

    ## How to fix
    Install humming's CUDA extra with the engine's interpreter (``python -m pip install
    "humming-kernels[cu13]"``: nvidia-cuda-nvrtc, runtime and cccl), or the toolkit's NVRTC
    (``apt-get install -y cuda-nvrtc-dev-13-0``).
    """
    _vllm_version(ctx, _vllm.HUMMING_SINCE, "humming")
    packages = ctx.need(ctx.python.packages, "python.packages")
    humming = packages.get("humming-kernels")
    if not humming:
        raise Skip("humming-kernels is not installed: vLLM uses Marlin")
    if (ctx.env.get(_hm.COMPILER_VAR) or "").strip().lower() == "nvcc" or not packages.get("cuda-bindings"):
        raise Skip("humming compiles with nvcc here (HUMMING_COMPILER=nvcc or no cuda-bindings): FC101/FC102 apply")
    hopper = [g for g in ctx.gpus_used if major_minor(g.compute_capability) in _vllm.HUMMING_PREFERRED_CC]
    if not ctx.gpus_used:
        raise Skip(f"GPU archs unknown, {_jit.no_gpu_note(ctx)}")
    if not hopper:
        raise Skip("no SM 9.0 GPU used: vLLM prefers Marlin to humming there")
    memory = ctx.memory
    cfg = memory.cfg if memory is not None else None
    if cfg is None:
        raise Skip("no model config: humming runs only for the quantised MoE experts Marlin would take")
    method = cfg.quant.method
    if not cfg.experts:
        raise Skip(f"{', '.join(cfg.architectures) or 'the model'} is not a MoE: humming's MoE path is not taken")
    if method not in _vllm.HUMMING_QUANTS or (
        method == "mxfp4" and set(cfg.architectures) & _vllm.HUMMING_MXFP4_EXCEPT
    ):
        raise Skip(f"experts in {method or 'unquantized'} weights: vLLM picks a kernel ahead of Marlin/humming")
    torch = major_minor(ctx.python.torch_cuda)
    if torch is None:
        raise Skip("torch's CUDA version is unknown: humming picks the toolkit of its major")
    envs = ctx.toolchain.cuda_envs
    _fact(ctx, envs, "toolchain.cuda_envs")
    assert envs is not None
    chosen = _hm.pick(envs, torch[0])
    gpu = hopper[0]
    extra = f"humming-kernels[cu{torch[0]}]=={humming}"
    fix = _jit.pip(ctx, f'"{extra}"') + f"  (or: {_jit.install(ctx, f'cuda-nvrtc-dev-{torch[0]}-{torch[1]}')})"
    where = f"{method} MoE experts on {gpu.name or 'GPU'} (SM {gpu.compute_capability})"
    evidence = {"torch_cuda": ctx.python.torch_cuda, "envs": [e.path for e in envs if e.major == torch[0]]}
    if chosen is None:
        yield fail(
            f"humming compiles the {where} with NVRTC and no CUDA {torch[0]} environment has nvrtc.h: "
            f"'{_hm.NO_ENV.format(major=torch[0])}' after the weight load",
            fix=fix,
            subject=gpu_subject(gpu),
            evidence=evidence,
        )
        return
    if not chosen.nvrtc_lib:
        yield fail(
            f"humming picks {chosen.path} (CUDA {torch[0]}, nvrtc.h) for the {where} and it has no libnvrtc: "
            f"'{_hm.NO_LIB}' after the weight load",
            fix=fix,
            subject=gpu_subject(gpu),
            evidence={**evidence, "chosen": chosen.path},
        )
        return
    yield ok(f"humming's NVRTC for the {where}: {chosen.nvrtc_lib}")
