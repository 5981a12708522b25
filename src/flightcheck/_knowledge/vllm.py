"""Everything flightcheck knows of vLLM, by version: flag spellings, the variables it reads,
its multicast paths and their switches, and the pins it ships with.

Sources (vLLM's own code; the conformance suite asserts these against the installed
package): ``vllm/engine/arg_utils.py`` and ``vllm/utils/argparse_utils.py`` (flags),
``vllm/envs.py`` (variables), the wheel's metadata (the FlashInfer pin). Where a table
gives a version, it is the first release whose source has the thing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flightcheck._vocabulary.intent import parse_len

NAME = "vllm"

# ---- flags (vllm/engine/arg_utils.py, vllm/utils/argparse_utils.py) ----------------------

#: short or alternative spellings -> the canonical long flag.
ALIASES: dict[str, str] = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
    "-ep": "--enable-expert-parallel",
    "-q": "--quantization",
    "-n": "--nnodes",
    "-r": "--node-rank",
}

#: canonical flag -> (Intent field, converter). A converter raises ValueError or
#: UsageError on a value it cannot read; the flag is then reported as unparsed.
Reader = tuple[str, Callable[[str], Any]]

FIELDS: dict[str, Reader] = {
    "--model": ("model", str),
    "--revision": ("revision", str),
    "--tensor-parallel-size": ("tensor_parallel_size", int),
    "--pipeline-parallel-size": ("pipeline_parallel_size", int),
    "--data-parallel-size": ("data_parallel_size", int),
    "--max-model-len": ("max_model_len", parse_len),
    "--kv-cache-dtype": ("kv_cache_dtype", str),
    "--gpu-memory-utilization": ("gpu_memory_utilization", float),
    "--quantization": ("quantization", str),
    "--download-dir": ("download_dir", str),
    "--load-format": ("load_format", str),
    "--distributed-executor-backend": ("distributed_executor_backend", str),
    "--nnodes": ("nnodes", int),
}

#: flags that never take a value (store_true / BooleanOptionalAction).
BOOL_FLAGS: frozenset[str] = frozenset(
    {
        "--enable-expert-parallel",
        "--no-enable-expert-parallel",
        "--enforce-eager",
        "--no-enforce-eager",
        "--disable-custom-all-reduce",
        "--trust-remote-code",
        "--enable-prefix-caching",
        "--no-enable-prefix-caching",
        "--disable-log-requests",
        "--disable-log-stats",
        "--headless",
        "--enable-auto-tool-choice",
        "--async-scheduling",
    }
)

#: boolean intent flags (BooleanOptionalAction: ``--x`` / ``--no-x``).
BOOLS: dict[str, tuple[str, bool]] = {
    "--enable-expert-parallel": ("enable_expert_parallel", True),
    "--no-enable-expert-parallel": ("enable_expert_parallel", False),
}

#: how fixes and messages spell an option (the short forms vLLM's docs use).
FLAG: dict[str, str] = {
    "load_format": "--load-format",
    "tp": "-tp",
    "pp": "-pp",
    "dp": "-dp",
    "ep": "--enable-expert-parallel",
    "max_len": "--max-model-len",
    "kv_dtype": "--kv-cache-dtype",
    "kv_fp8": "--kv-cache-dtype fp8",
    "util": "--gpu-memory-utilization",
    "eager": "--enforce-eager",
    "config": "--config",
    "quantization": "--quantization",
}

# ---- environment variables (vllm/envs.py) ------------------------------------------------

ALLREDUCE_USE_SYMM_MEM = "VLLM_ALLREDUCE_USE_SYMM_MEM"
USE_NCCL_SYMM_MEM = "VLLM_USE_NCCL_SYMM_MEM"
FLASHINFER_ALLREDUCE_BACKEND = "VLLM_FLASHINFER_ALLREDUCE_BACKEND"
RAY_EXTRA_ENV_VARS_TO_COPY = "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"
KIMI_K3_GEMM_AR = "VLLM_KIMI_K3_GEMM_AR"
KIMI_K3_TAIL_SWITCH = "VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION"
ALLOW_LONG_MAX_MODEL_LEN = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
#: variables the plan extends (comma lists), never replaces.
LIST_VARS: tuple[str, ...] = (RAY_EXTRA_ENV_VARS_TO_COPY,)
#: the prefix of every variable vLLM declares (its Ray executor forwards these).
ENV_PREFIX = "VLLM_"

#: First vLLM release whose envs.py declares the variable.
SINCE: dict[str, str] = {
    ALLREDUCE_USE_SYMM_MEM: "0.10.2",
    USE_NCCL_SYMM_MEM: "0.11.0",
    FLASHINFER_ALLREDUCE_BACKEND: "0.16.0",
    RAY_EXTRA_ENV_VARS_TO_COPY: "0.16.0",
    KIMI_K3_GEMM_AR: "0.33.0",
}
SYMM_MEM_DEFAULT_ON = "0.11.0"  # VLLM_ALLREDUCE_USE_SYMM_MEM on by default (vLLM #24111)
MNNVL_AUTO_SINGLE_NODE = "0.25.0"  # "auto" FlashInfer all-reduce means mnnvl on one node (#47219)

# ---- Kimi-K3's latent MoE tail (vllm/models/kimi_k3/nvidia/latent_moe_runner.py) --------

KIMI_K3_ARCHS = frozenset({"KimiK3ForConditionalGeneration", "KimiK3ForCausalLM"})
KIMI_K3_MODEL_TYPE = "kimi_k3"
KIMI_K3_TAIL_SINCE, KIMI_K3_TAIL_TP = "0.33.0", (8, 16)

# ---- pins (the wheel's metadata) ---------------------------------------------------------

#: vLLM release -> the flashinfer-python it pins (requirements/cuda.txt at the tag), for
#: snapshots recorded before ``engine_requires`` existed. Collected facts carry the real
#: requirement from the installed distribution's metadata, which always wins.
FLASHINFER_PIN: dict[str, str] = {
    "0.12.0": "0.5.3",
    "0.24.0": "0.6.12",
    "0.33.0": "0.7.2.post1",
}


def layout(tp: int, pp: int = 1, dp: int = 1, ep: bool = False, moe_size: int | None = None) -> str:
    """A parallel layout as vLLM's flags: ``-tp 8 -pp 2 --enable-expert-parallel``."""
    parts = (
        [f"{FLAG['tp']} {tp}"] + ([f"{FLAG['pp']} {pp}"] if pp > 1 else []) + ([f"{FLAG['dp']} {dp}"] if dp > 1 else [])
    )
    return " ".join(parts + ([FLAG["ep"]] if ep else []))


# ---- runtime compilers vLLM brings (vllm/utils/deep_gemm.py, vllm/platforms/cuda.py,
# vllm/third_party/deep_gemm, vllm/utils/flashinfer.py) ------------------------------------

#: ``VLLM_USE_DEEP_GEMM`` (vllm/envs.py: ``bool(int(os.getenv(..., "1")))``, on by default).
USE_DEEP_GEMM = "VLLM_USE_DEEP_GEMM"
#: First release that vendors DeepGEMM as ``vllm/third_party/deep_gemm`` (read in 0.33.0).
DEEP_GEMM_VENDORED_SINCE = "0.33.0"
#: ``CudaPlatform.support_deep_gemm``: capability 9.0 exactly, families 10.x and 12.x.
DEEP_GEMM_CC_EXACT = frozenset({(9, 0)})
DEEP_GEMM_CC_FAMILIES = frozenset({10, 12})
#: DeepGEMM's JIT compiler: ``DG_JIT_NVCC_COMPILER`` else ``$CUDA_HOME/bin/nvcc``; its
#: ``_C_extension`` refuses older ones ("NVCC version must be at least 12.9", the string in
#: vllm/third_party/deep_gemm/_C_extension.abi3.so of 0.33.0).
DG_NVCC_VAR = "DG_JIT_NVCC_COMPILER"
DEEP_GEMM_MIN_NVCC = (12, 9)
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


#: checkpoint weight formats (the memory model's ``Quant.method``) whose vLLM kernels call
#: DeepGEMM: block-scaled FP8 linear and MoE (quantization/utils/fp8_utils.py), and the MoE
#: fallbacks for MXFP4 / NVFP4 (the vendored sm100_fp4_fp4_mega_moe, sm90 paths).
DEEP_GEMM_QUANTS = frozenset({"fp8-block", "mxfp4", "nvfp4"})


# ---- weight files by load format (DefaultModelLoader._prepare_weights in
# vllm/model_executor/model_loader/default_loader.py) ----

#: load format -> the weight files the default loader globs, in order: the first pattern
#: that matches a file wins ("auto" is ``*.safetensors``, then ``*.bin``, then the ``*.pt``
#: fallback). A format not listed here has a loader of its own (sharded state, tensorizer,
#: streamers, GGUF, ...) whose files flightcheck does not read.
LOAD_FORMAT_FILES: dict[str, tuple[str, ...]] = {
    "auto": ("*.safetensors", "*.bin", "*.pt"),
    "hf": ("*.safetensors", "*.bin", "*.pt"),
    "safetensors": ("*.safetensors",),
    "fastsafetensors": ("*.safetensors",),
    "instanttensor": ("*.safetensors",),
    "mistral": ("*.safetensors",),
    "pt": ("*.pt",),
    "npcache": ("*.bin", "*.pt"),
}
#: load formats that read no weight file at all (random weights; vllm/model_executor/model_loader/dummy_loader.py).
NO_WEIGHT_LOAD_FORMATS: frozenset[str] = frozenset({"dummy"})
#: *.bin / *.pt files the loader drops (weight_utils.filter_files_not_needed_for_inference).
NOT_WEIGHT_FILES: frozenset[str] = frozenset(
    {"training_args.bin", "optimizer.bin", "optimizer.pt", "scheduler.pt", "scaler.pt"}
)

#: "auto" loads the Mistral format when any consolidated*.safetensors exists: only those
#: files, filtered by consolidated.safetensors.index.json (default_loader.py _prepare_weights).
AUTO_MISTRAL: bool = True
MISTRAL_FILES = "consolidated*.safetensors"
MISTRAL_INDEX = "consolidated.safetensors.index.json"
