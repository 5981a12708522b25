"""Everything flightcheck knows of SGLang, by version: flag spellings and aliases, the
flags that opt in to multicast, and the variables it reads.

Sources (SGLang's own code): ``python/sglang/srt/server_args.py`` (flags),
``python/sglang/srt/layers/flashinfer_comm_fusion.py`` (the all-reduce fusion).
"""

from __future__ import annotations

from flightcheck._knowledge.vllm import Reader
from flightcheck._vocabulary.intent import parse_len

NAME = "sglang"

# ---- flags (python/sglang/srt/server_args.py) -------------------------------------------

ALIASES: dict[str, str] = {
    "--model": "--model-path",
    "--tp-size": "--tensor-parallel-size",
    "--tp": "--tensor-parallel-size",
    "--dp-size": "--data-parallel-size",
    "--dp": "--data-parallel-size",
    "--pp-size": "--pipeline-parallel-size",
    "--pp": "--pipeline-parallel-size",
    "--ep-size": "--expert-parallel-size",
    "--ep": "--expert-parallel-size",
}


def _kv_dtype(text: str) -> str:
    # SGLang spells bfloat16 "bf16"; the intent uses vLLM's names
    return {"bf16": "bfloat16", "fp16": "float16"}.get(text, text)


def _ep_size(text: str) -> bool:
    # SGLang's EP is a size inside the TP group; the intent only needs "EP on"
    return int(text) > 1


FIELDS: dict[str, Reader] = {
    "--model-path": ("model", str),
    "--revision": ("revision", str),
    "--tensor-parallel-size": ("tensor_parallel_size", int),
    "--pipeline-parallel-size": ("pipeline_parallel_size", int),
    "--data-parallel-size": ("data_parallel_size", int),
    "--expert-parallel-size": ("enable_expert_parallel", _ep_size),
    "--context-length": ("max_model_len", parse_len),
    "--kv-cache-dtype": ("kv_cache_dtype", _kv_dtype),
    "--mem-fraction-static": ("gpu_memory_utilization", float),
    "--quantization": ("quantization", str),
    "--download-dir": ("download_dir", str),
    "--load-format": ("load_format", str),
    "--nnodes": ("nnodes", int),
}

#: flags that never take a value (store_true).
BOOL_FLAGS: frozenset[str] = frozenset(
    {
        "--enable-nccl-nvls",
        "--enable-symm-mem",
        "--enable-torch-symm-mem",
        "--enable-mscclpp",
        "--enforce-disable-flashinfer-allreduce-fusion",
        "--enable-flashinfer-allreduce-fusion",
        "--enable-dp-attention",
        "--disable-cuda-graph",
        "--disable-radix-cache",
        "--skip-server-warmup",
        "--enforce-eager",
        "--trust-remote-code",
    }
)

#: how fixes and messages spell an option.
FLAG: dict[str, str] = {
    "load_format": "--load-format",
    "tp": "--tp",
    "pp": "--pp-size",
    "dp": "--dp",
    "ep": "--ep-size",
    "max_len": "--context-length",
    "kv_dtype": "--kv-cache-dtype",
    "kv_fp8": "--kv-cache-dtype fp8_e4m3",
    "util": "--mem-fraction-static",
    "eager": "--disable-cuda-graph",
    "config": "--config",
    "quantization": "--quantization",
}

# ---- multicast (server_args.py, flashinfer_comm_fusion.py) ------------------------------

#: opt-in flags whose path binds multicast memory, and why.
MULTICAST_FLAGS: dict[str, str] = {
    "--enable-nccl-nvls": "NCCL NVLS all-reduce binds multicast memory",
    "--enable-symm-mem": "NCCL symmetric memory registers NVLS windows",
    "--enable-torch-symm-mem": "torch symmetric-memory all-reduce (multimem) binds multicast memory",
}
TORCH_SYMM_MEM_FLAG = "--enable-torch-symm-mem"
FI_FUSION_BACKEND_FLAG = "--flashinfer-allreduce-fusion-backend"
FI_FUSION_DISABLE_FLAG = "--enforce-disable-flashinfer-allreduce-fusion"
FI_BACKEND_SINCE = "0.5.6"
DP_ATTENTION_FLAG = "--enable-dp-attention"

# ---- environment variables ----------------------------------------------------------------

ALLOW_LONG_MAX_MODEL_LEN = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"


def layout(tp: int, pp: int = 1, dp: int = 1, ep: bool = False, moe_size: int | None = None) -> str:
    """A parallel layout as SGLang's flags: ``--tp 8 --pp-size 2 --ep-size 8``."""
    parts = (
        [f"{FLAG['tp']} {tp}"] + ([f"{FLAG['pp']} {pp}"] if pp > 1 else []) + ([f"{FLAG['dp']} {dp}"] if dp > 1 else [])
    )
    return " ".join(parts + ([f"{FLAG['ep']} {moe_size or tp * dp}"] if ep else []))


# ---- weight files by load format (DefaultModelLoader._prepare_weights in
# sglang/srt/model_loader/loader.py) ----

#: load format -> the weight files the default loader globs, in order: the first pattern
#: that matches a file wins ("auto" is ``*.safetensors``, then ``*.bin``, then the ``*.pt``
#: fallback). A format not listed here has a loader of its own (sharded state, tensorizer,
#: streamers, GGUF, ...) whose files flightcheck does not read.
LOAD_FORMAT_FILES: dict[str, tuple[str, ...]] = {
    "auto": ("*.safetensors", "*.bin", "*.pt"),
    "safetensors": ("*.safetensors",),
    "fastsafetensors": ("*.safetensors",),
    "instanttensor": ("*.safetensors",),
    "mistral": ("*.safetensors",),
    "pt": ("*.pt",),
    "npcache": ("*.bin", "*.pt"),
}
#: load formats that read no weight file at all (random weights; sglang/srt/model_loader/loader.py (DummyModelLoader)).
NO_WEIGHT_LOAD_FORMATS: frozenset[str] = frozenset({"dummy"})
#: *.bin / *.pt files the loader drops (weight_utils.filter_files_not_needed_for_inference).
NOT_WEIGHT_FILES: frozenset[str] = frozenset(
    {"training_args.bin", "optimizer.bin", "optimizer.pt", "scheduler.pt", "scaler.pt"}
)

#: "auto" never switches to the Mistral format (loader.py _prepare_weights: *.safetensors,
#: *.bin, filtered by model.safetensors.index.json); "mistral" loads consolidated*.safetensors.
AUTO_MISTRAL: bool = False
MISTRAL_FILES = "consolidated*.safetensors"
MISTRAL_INDEX = "consolidated.safetensors.index.json"
