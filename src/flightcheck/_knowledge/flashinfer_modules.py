"""Which FlashInfer JIT modules a vLLM launch reaches at run time, and what a build box needs
to compile them ahead of time for a node that has no toolkit (``flightcheck prepare``).

Read in FlashInfer 0.7.2.post1 (the release vLLM 0.33.0 pins) and vLLM 0.33.0:

- the module names and their generators: ``flashinfer/jit/sampling.py`` (``sampling``),
  ``jit/topk.py``, ``jit/norm.py``, ``jit/rope.py``, ``jit/comm.py`` (``trtllm_comm``,
  ``trtllm_mnnvl_comm``), ``jit/attention/modules.py`` (``gen_trtllm_gen_fmha_module``,
  ``fmha_gen``), ``jit/fused_moe.py`` (``fused_moe_trtllm_sm100``, ``trtllm_gen_routing``),
  ``jit/fp4_quantization.py`` (``fp4_quantization_<arch>``), ``jit/moe_utils.py``;
- the load order (``jit/core.py`` ``JitSpecNvcc.try_load`` and ``jit/env.py``
  ``get_aot_artifacts``): ``flashinfer/data/aot/<m>/<m>.so`` inside the package first, with no
  version or arch check, then the jit-cache providers, else ``build()``, which always runs
  ``write_ninja`` (nvcc path) and ninja, so a copied JIT cache does not help;
  ``FLASHINFER_DISABLE_JIT=1`` turns a miss into ``MissingJITCacheError`` at once;
- the arch flags (``compilation_context.py``): ``FLASHINFER_CUDA_ARCH_LIST`` replaces the
  visible GPUs, and SM >= 10 compiles ``sm_XYa`` SASS only, no PTX: a B300 (10.3a) module
  does not run on a B200 (10.0a) (CUDA error 209, no kernel image) and vice versa;
- the official prebuilt wheels (``flashinfer/__main__.py``): ``flashinfer-cubin`` (used only
  at the exact ``flashinfer-python`` version) and ``flashinfer-jit-cache`` with per-arch
  provider wheels, for CUDA 12.9 / 13.0 / 13.4 only, from ``https://flashinfer.ai/whl/cuXYZ``;
- vLLM 0.33.0's choices on SM 10.x: ``VLLM_USE_FLASHINFER_SAMPLER`` (default on,
  ``v1/sample/ops/topk_topp_sampler.py``), ``VLLM_ALLREDUCE_USE_FLASHINFER`` with TP > 1
  (``compilation/passes/fusion/allreduce_rms_fusion.py``), ``FLASHINFER_MLA`` decode
  (``platforms/cuda.py``), the MoE oracles (``model_executor/layers/fused_moe/oracle/fp8.py``,
  ``nvfp4.py``).

The launch-path table is a code reading, not a recording: exact selection depends on the
checkpoint's ``quantization_config``, TP/EP and flags. Releases newer than those read are
extrapolated (the caller says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flightcheck._knowledge import vllm as _vllm

FLASHINFER_READ = "0.7.2.post1"
VLLM_READ = "0.33.0"

#: CUDA labels FlashInfer publishes flashinfer-jit-cache wheels for (``__main__.py``
#: ``_SUPPORTED_JIT_CACHE_CUDA_VERSIONS``)
OFFICIAL_CUDA_LABELS = ("12.9", "13.0", "13.4")
OFFICIAL_INDEX = "https://flashinfer.ai/whl/cu{label}"

#: the environment a node that carries every module launches with
NO_DOWNLOAD_VAR = "FLASHINFER_NO_DOWNLOAD"
DISABLE_JIT_VAR = "FLASHINFER_DISABLE_JIT"
ARCH_LIST_VAR = "FLASHINFER_CUDA_ARCH_LIST"
WORKSPACE_VAR = "FLASHINFER_WORKSPACE_BASE"

#: the minimum nvcc that can target SM 10.x / 11.x / 12.x arch-specific code (CUDA 12.9 added
#: sm_103 and sm_121 and the family targets)
MIN_NVCC_FOR_MAJOR = {10: (12, 9), 11: (12, 9), 12: (12, 9), 9: (12, 3)}


@dataclass(frozen=True)
class Module:
    """One FlashInfer JIT module: its name on disk, the generator that makes its spec, and
    the vLLM path that reaches it."""

    name: str
    generator: str  # "flashinfer.jit.sampling:gen_sampling_module"
    path: str  # which launch path reaches it, in words
    source: str  # where the choice is made (vLLM 0.33.0)
    #: True when the trtllm-gen generator downloads headers/checksums at spec time (the
    #: build box needs egress or FLASHINFER_CUBINS_REPOSITORY)
    downloads: bool = False


SAMPLING = Module(
    "sampling",
    "flashinfer.jit.sampling:gen_sampling_module",
    f"sampler ({_vllm.USE_FLASHINFER_SAMPLER}, default on; run in the profile run)",
    "vllm/v1/sample/ops/topk_topp_sampler.py",
)
TOPK = Module(
    "topk",
    "flashinfer.jit.topk:gen_topk_module",
    "vocab-parallel top-k of the logits processor",
    "vllm/model_executor/layers/logits_processor.py",
)
TRTLLM_COMM = Module(
    "trtllm_comm",
    "flashinfer.jit.comm:gen_trtllm_comm_module",
    f"all-reduce + RMSNorm fusion (TP > 1, SM 10.x, {_vllm.ALLREDUCE_USE_FLASHINFER})",
    "vllm/compilation/passes/fusion/allreduce_rms_fusion.py",
)
TRTLLM_MNNVL_COMM = Module(
    "trtllm_mnnvl_comm",
    "flashinfer.jit.comm:gen_trtllm_mnnvl_comm_module",
    "all-reduce fusion, mnnvl backend (TP > 1, SM 10.x)",
    "vllm/compilation/passes/fusion/allreduce_rms_fusion.py",
)
FMHA_GEN = Module(
    "fmha_gen",
    "flashinfer.jit.attention.modules:gen_trtllm_gen_fmha_module",
    "MLA decode (FLASHINFER_MLA, first on SM 10.x)",
    "vllm/platforms/cuda.py; vllm/v1/attention/backends/mla/flashinfer_mla.py",
    downloads=True,
)
FUSED_MOE_TRTLLM = Module(
    "fused_moe_trtllm_sm100",
    "flashinfer.jit.fused_moe:gen_trtllm_gen_fused_moe_sm100_module",
    "MoE, FP8 block-scale or NVFP4 (FLASHINFER_TRTLLM first on SM 10.x)",
    "vllm/model_executor/layers/fused_moe/oracle/fp8.py, nvfp4.py",
    downloads=True,
)
TRTLLM_ROUTING = Module(
    "trtllm_gen_routing",
    "flashinfer.jit.fused_moe:gen_trtllm_gen_routing_module",
    "MoE routing of the trtllm-gen MoE",
    "vllm/model_executor/layers/fused_moe/oracle/fp8.py",
)
FP4_QUANT_103 = Module(
    "fp4_quantization_103",
    "flashinfer.jit.fp4_quantization:gen_fp4_quantization_sm103_module",
    "NVFP4 weight prep and activation quantization (right after the load)",
    "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py",
)
FP4_QUANT_100 = Module(
    "fp4_quantization_100",
    "flashinfer.jit.fp4_quantization:gen_fp4_quantization_sm100_module",
    "NVFP4 weight prep and activation quantization (right after the load)",
    "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py",
)

MODULES: dict[str, Module] = {
    m.name: m
    for m in (SAMPLING, TOPK, TRTLLM_COMM, TRTLLM_MNNVL_COMM, FMHA_GEN, FUSED_MOE_TRTLLM, TRTLLM_ROUTING)
    + (FP4_QUANT_103, FP4_QUANT_100)
}


@dataclass(frozen=True)
class NotPreparable:
    """A run-time compiler a bundle cannot replace, and the setting that keeps the launch
    off it."""

    what: str
    why: str
    avoid: str  # the setting, e.g. VLLM_USE_DEEP_GEMM=0; "" when there is none


#: read in vLLM 0.33.0's vendored DeepGEMM (``third_party/deep_gemm``: the nvcc check runs
#: before the cache lookup and nvcc's version is part of the cache key) and Triton 3.6
#: (``backends/nvidia/driver.py``: gcc and ``libcuda.so.1`` at first launch, ptxas bundled)
NOT_PREPARABLE = (
    NotPreparable(
        "DeepGEMM",
        "checks for nvcc before its kernel cache, and nvcc's version is part of the cache key",
        f"{_vllm.USE_DEEP_GEMM}=0",
    ),
    NotPreparable(
        "Triton",
        "compiles its launcher with gcc and links libcuda.so.1 on the node (no nvcc: ptxas is bundled)",
        "",
    ),
)


def arch_major(arch: str) -> int | None:
    """'10.3a' -> 10; None for anything that is not 'X.Y' with an optional suffix."""
    head = arch.strip().split(".", 1)[0]
    return int(head) if head.isdigit() else None


def fp4_module_for(arch: str) -> Module | None:
    """The NVFP4 quantization module FlashInfer picks for ``arch`` (its name carries the SM)."""
    return {"10.3a": FP4_QUANT_103, "10.0a": FP4_QUANT_100}.get(arch)


def modules_for_launch(
    arch: str, *, tensor_parallel: int, quantization: str | None, mla: bool | None
) -> list[tuple[Module, str]]:
    """(module, why) for what a vLLM launch on ``arch`` reaches, per the table above.

    ``quantization``: the checkpoint's method when known ("fp8", "modelopt_fp4", ...);
    ``mla``: whether the model uses MLA (None: unknown, include it). Only SM 10.x paths are
    listed where vLLM takes FlashInfer there; on other archs only the sampler and top-k.
    """
    out: list[tuple[Module, str]] = [(SAMPLING, SAMPLING.path), (TOPK, TOPK.path)]
    major = arch_major(arch)
    if major != 10:
        return out
    if tensor_parallel > 1:
        out += [(TRTLLM_COMM, TRTLLM_COMM.path), (TRTLLM_MNNVL_COMM, TRTLLM_MNNVL_COMM.path)]
    if mla is not False:
        out.append((FMHA_GEN, FMHA_GEN.path if mla else FMHA_GEN.path + "; the model is not known: included"))
    q = (quantization or "").lower()
    if q in ("fp8", "modelopt_fp4", "nvfp4", "compressed-tensors"):
        out += [(FUSED_MOE_TRTLLM, FUSED_MOE_TRTLLM.path), (TRTLLM_ROUTING, TRTLLM_ROUTING.path)]
    if q in ("modelopt_fp4", "nvfp4"):
        fp4 = fp4_module_for(arch)
        if fp4 is not None:
            out.append((fp4, fp4.path))
    return out


def cubin_runs_on(arch: str, cc: str) -> bool:
    """Whether a cubin built for ``arch`` ('10.3a', '10.0f', '8.0') runs on a GPU of compute
    capability ``cc`` ('10.3'). ``a`` code runs only on its exact SM; ``f`` (family) code on
    the same major at that minor or above; plain code on the same major at or above its minor
    (CUDA's binary compatibility; the ``a`` rule is why a B300 module dies on a B200 with
    error 209, no kernel image)."""
    a = arch.strip()
    suffix = a[-1] if a and a[-1] in "af" else ""
    base = a[:-1] if suffix else a
    try:
        amaj, amin = (int(x) for x in base.split(".", 1))
        gmaj, gmin = (int(x) for x in cc.strip().split(".", 1))
    except ValueError:
        return False
    if suffix == "a":
        return (amaj, amin) == (gmaj, gmin)
    return amaj == gmaj and amin <= gmin


def bundle_mismatches(
    record: Mapping[str, Any], *, flashinfer: str | None, torch_cuda: str | None, gpu_ccs: list[str]
) -> list[str]:
    """Why a prepared bundle's record does not fit what is installed, one line each (empty:
    it fits). ``record``: the manifest (``flightcheck-bundle.json``)."""
    out: list[str] = []
    built_fi = record.get("flashinfer")
    if flashinfer and built_fi and flashinfer != built_fi:
        out.append(
            f"the bundle was built against FlashInfer {built_fi}, the engine has {flashinfer} "
            "(FlashInfer loads data/aot modules with no version check)"
        )
    built_cuda = str(record.get("torch_cuda") or "")
    if torch_cuda and built_cuda and torch_cuda.split(".", 1)[0] != built_cuda.split(".", 1)[0]:
        out.append(
            f"the bundle was built for CUDA {built_cuda}, the engine's torch is CUDA {torch_cuda}: "
            "its libcudart does not match (cudaErrorInsufficientDriver, error 35)"
        )
    modules = record.get("modules")
    for m in modules if isinstance(modules, list) else []:
        if not isinstance(m, dict):
            continue
        archs = [str(a) for a in m.get("archs") or []]
        for cc in sorted(set(gpu_ccs)):
            if archs and not any(cubin_runs_on(a, cc) for a in archs):
                out.append(
                    f"module {m.get('name')} carries SM {', '.join(archs)} code only, the GPU is SM {cc} "
                    "(cudaErrorNoKernelImageForDevice, error 209)"
                )
    return out
