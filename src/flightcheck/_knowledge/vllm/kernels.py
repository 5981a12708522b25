"""The kernels vLLM compiles at run time and the libraries it pins: DeepGEMM
(vllm/utils/deep_gemm.py, vllm/platforms/cuda.py), FlashInfer's pin and its tool gate
(vllm/utils/flashinfer.py), tilelang (mHC) and humming.
"""

from __future__ import annotations

import re

from flightcheck._knowledge.vllm._versions import _release

# ---- pins (the wheel's metadata) ---------------------------------------------------------

#: vLLM release -> the flashinfer-python it pins (requirements/cuda.txt at the tag), for
#: snapshots recorded before ``engine_requires`` existed. Collected facts carry the real
#: requirement from the installed distribution's metadata, which always wins.
FLASHINFER_PIN: dict[str, str] = {
    "0.12.0": "0.5.3",
    "0.24.0": "0.6.12",
    "0.33.0": "0.7.2.post1",
}

# ---- runtime compilers vLLM brings (vllm/utils/deep_gemm.py, vllm/platforms/cuda.py,
# vllm/third_party/deep_gemm, vllm/utils/flashinfer.py) ------------------------------------

#: ``VLLM_USE_DEEP_GEMM`` (vllm/envs.py ``bool(int(os.getenv(..., DEFAULT)))``): declared by
#: 0.8.5 (not 0.8.0), off by default up to 0.10.2, on from 0.11.0 (read in the wheels
#: 0.8.0, 0.8.5, 0.9.2, 0.10.0-0.10.2, 0.11.0, 0.19.1, 0.33.0). Newest first.
USE_DEEP_GEMM = "VLLM_USE_DEEP_GEMM"
USE_DEEP_GEMM_DEFAULTS: tuple[tuple[str, str], ...] = (("0.11.0", "1"), ("0.8.5", "0"))
#: First release that vendors DeepGEMM as ``vllm/third_party/deep_gemm``: absent in every
#: wheel from 0.8.5 to 0.19.1, present from 0.20.0 to 0.33.0. Before it vLLM runs only an
#: installed ``deep_gemm`` package (``has_deep_gemm``: ``_has_module("deep_gemm")``,
#: vllm/utils/__init__.py 0.9.2-0.10.x, utils/import_utils.py later); from 0.20.0
#: ``has_deep_gemm`` and ``utils/deep_gemm.py _lazy_init`` still prefer an installed package
#: ("Prefers an externally installed deep_gemm package") over the vendored copy.
DEEP_GEMM_VENDORED_SINCE = "0.20.0"
#: The distribution of DeepGEMM built from its repository (setup.py ``name="deep_gemm"``).
DEEP_GEMM_PACKAGE = "deep-gemm"
#: ``CudaPlatform.support_deep_gemm``: capability 9.0 exactly, families 10.x and 12.x.
DEEP_GEMM_CC_EXACT = frozenset({(9, 0)})
DEEP_GEMM_CC_FAMILIES = frozenset({10, 12})
#: DeepGEMM's JIT compiler: ``DG_JIT_NVCC_COMPILER`` else ``$CUDA_HOME/bin/nvcc``; its
#: ``_C_extension`` refuses older ones ("NVCC version must be at least 12.9", the string in
#: vllm/third_party/deep_gemm/_C_extension.abi3.so of 0.33.0; the binaries of 0.20.0-0.32.0
#: were not read, so an nvcc below 12.9 there is a warning, not a stop).
DG_NVCC_VAR = "DG_JIT_NVCC_COMPILER"
DEEP_GEMM_MIN_NVCC = (12, 9)
DEEP_GEMM_MIN_NVCC_READ_IN = "0.33.0"
#: An installed ``deep_gemm`` package (deepseek-ai/DeepGEMM csrc/jit/compiler.hpp
#: ``NVCCCompiler``): ``DG_HOST_ASSERT(... "NVCC version should be >= 12.3")``, only a
#: warning below 12.9; the GPU's own arch then needs its nvcc (sm_100a 12.8, sm_103a 12.9).
DEEP_GEMM_PACKAGE_MIN_NVCC = (12, 3)


def use_deep_gemm_default(version: str | None) -> str | None:
    """``VLLM_USE_DEEP_GEMM``'s default in vLLM ``version`` (None: not declared or unknown)."""
    m = re.match(r"\d+(?:\.\d+)*", str(version or ""))
    if m is None:
        return None
    v = _release(m.group(0))
    for since, value in USE_DEEP_GEMM_DEFAULTS:
        if v >= _release(since):
            return value
    return None


#: vllm/utils/flashinfer.py ``has_flashinfer``: without flashinfer-cubin and with no nvcc
#: (CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda) or no ninja on PATH, vLLM disables
#: FlashInfer with a warning and takes its fallbacks instead of failing a JIT build.
FLASHINFER_GATED_ON_TOOLS_SINCE = "0.33.0"


def deep_gemm_arch(cc: str | None) -> bool:
    """Whether vLLM's ``support_deep_gemm`` is true on a GPU of compute capability ``cc``."""
    try:
        major, minor = (int(x) for x in (cc or "").split(".")[:2])
    except ValueError:
        return False
    return (major, minor) in DEEP_GEMM_CC_EXACT or major in DEEP_GEMM_CC_FAMILIES


#: checkpoint weight formats (the memory model's ``Quant.method``) whose vLLM 0.33 kernels
#: call DeepGEMM by default, and the compute-capability majors where they do:
#:
#: * ``fp8-block``, wherever ``support_deep_gemm`` holds: the FP8 linear kernel
#:   (``model_executor/kernels/linear/scaled_mm/deep_gemm.py``: activation groups (1, 128)
#:   only, so per-tensor FP8 never) and ``Fp8MoeBackend.DEEPGEMM``
#:   (``layers/fused_moe/oracle/fp8.py``; ``experts/deep_gemm_moe.py`` runs on 9.0 and 10.x);
#: * ``mxfp4`` on 10.x only, as the MoE fallback behind FlashInfer's TRT-LLM MXFP4 kernel
#:   (``oracle/mxfp4.py`` ``_get_priority_backends``: FLASHINFER_TRTLLM_MXFP4_MXFP8, then
#:   DEEPGEMM_MXFP4, whose ``DeepGemmFP4Experts`` requires the 10.x family); on 9.0 MXFP4
#:   goes to humming / Marlin;
#: * NVFP4 is not in it: ``oracle/nvfp4.py`` lists no DeepGEMM backend, and the DeepGEMM
#:   MegaMoE NVFP4 path (``fused_moe/deep_gemm_mega_moe.py``) runs only when asked for
#:   (``moe_backend == "deep_gemm_mega_moe"``) and on SM 10.x.
DEEP_GEMM_QUANTS = frozenset({"fp8-block", "mxfp4"})
#: formats that take DeepGEMM only on these majors (and, for MXFP4, only when vLLM's
#: FlashInfer is off: no flashinfer-python, or ``has_flashinfer`` false).
DEEP_GEMM_QUANT_MAJORS: dict[str, frozenset[int]] = {"mxfp4": frozenset({10})}


def deep_gemm_takes(method: str | None, cc_major: int, *, flashinfer_on: bool) -> bool:
    """Whether vLLM sends weights of ``method`` through DeepGEMM on a GPU of this major."""
    if method not in DEEP_GEMM_QUANTS:
        return False
    majors = DEEP_GEMM_QUANT_MAJORS.get(method)
    if majors is not None and cc_major not in majors:
        return False
    return not (method == "mxfp4" and flashinfer_on)


# ---- tilelang (mHC) and humming: the kernels vLLM 0.33 JIT-compiles with them ------------

#: ``vllm/model_executor/layers/mhc.py``: on CUDA every mHC op (``MHCPreOp.forward_cuda``,
#: ``MHCPostOp``, ``HCHeadOp``, ``MHCFusedPostPreOp``) calls the tilelang kernels
#: (``model_executor/kernels/mhc/tilelang.py``; ``vllm/tilelang_utils`` imports tilelang on
#: CUDA and raises ImportError without it). The models built on those ops
#: (``model_executor/models/registry.py``: ``vllm.models.deepseek_v4``, ``deepseek_v41``,
#: ``glm5next``).
MHC_ARCHS = frozenset(
    {
        "DeepseekV4ForCausalLM",
        "DeepseekV4ForConditionalGeneration",
        "DeepseekV41ForCausalLM",
        "Glm5NextForCausalLM",
        "Glm5NextForConditionalGeneration",
    }
)
#: first release read with tilelang mHC kernels (0.33.0).
TILELANG_MHC_SINCE = "0.33.0"

#: ``model_executor/layers/quantization/utils/humming/priority.py``: humming moves ahead of
#: Marlin (``prioritize_humming``) on compute capability 9.0 only, in the linear kernel
#: lists (``model_executor/kernels/linear/__init__.py``) and the MoE oracles
#: (``fused_moe/oracle/{mxfp4,nvfp4,int_wna16,fp8,mxfp8}.py``); it is picked where Marlin
#: would have been, i.e. for weights Hopper has no native kernel for.
HUMMING_PREFERRED_CC = frozenset({(9, 0)})
HUMMING_SINCE = "0.33.0"
#: weight formats (the memory model's ``Quant.method``) whose MoE experts fall through to
#: Marlin, and so to humming, on SM 9.0 (MoE only: the linear lists put Machete and
#: FlashInfer's W4A16 kernels ahead of Marlin on Hopper, not judged here): int4
#: (GPTQ/AWQ/compressed-tensors WNA16; oracle/int_wna16.py lists MARLIN after
#: FLASHINFER_TRTLLM, a Blackwell kernel), MXFP4 (oracle/mxfp4.py: "SM90 falls through to
#: Humming or Marlin"), NVFP4 (oracle/nvfp4.py: MARLIN after the FlashInfer / CUTLASS FP4
#: kernels of SM 10.x).
HUMMING_QUANTS = frozenset({"int4", "mxfp4", "nvfp4"})
#: gpt-oss's MXFP4 MoE on Hopper runs the OAI Triton kernels, listed before Marlin
#: (oracle/mxfp4.py ``_get_priority_backends_for_gpt_oss``).
HUMMING_MXFP4_EXCEPT = frozenset({"GptOssForCausalLM"})
