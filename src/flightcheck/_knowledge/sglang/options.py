"""SGLang's command-line options (python/sglang/srt/server_args.py): the canonical spellings,
aliases and boolean flags, the Intent fields the built-in reader fills from them, how fixes
spell a layout, and the variables named for their meaning.
"""

from __future__ import annotations

from flightcheck._knowledge.vllm.options import Reader
from flightcheck._vocabulary.engine import EnvVar
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


#: SGLang's spellings of a KV cache dtype -> the names the intent uses (vLLM's): SGLang
#: spells bfloat16 "bf16" (server_args.py ``--kv-cache-dtype`` choices).
KV_DTYPE_NAMES: dict[str, str] = {"bf16": "bfloat16", "fp16": "float16"}


def _kv_dtype(text: str) -> str:
    return KV_DTYPE_NAMES.get(text, text)


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
        "--enable-layernorm-sp",
        "--enable-megamoe-for-layernorm-sp",
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

# ---- environment variables ----------------------------------------------------------------

ALLOW_LONG_MAX_MODEL_LEN = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
#: srt/environ.py (0.5.23): ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN = EnvBool(False)``
ALLOW_LONG = EnvVar(ALLOW_LONG_MAX_MODEL_LEN, "bool", "false", "sglang/srt/environ.py (0.5.23)", "words")


def layout(
    tp: int, pp: int = 1, dp: int = 1, ep: bool = False, moe_size: int | None = None, pcp: int = 1, dcp: int = 1
) -> str:
    """A parallel layout as SGLang's flags: ``--tp 8 --pp-size 2 --ep-size 8`` (vLLM's context
    parallel sizes ``pcp`` / ``dcp`` have no SGLang layout flag here: not written)."""
    parts = (
        [f"{FLAG['tp']} {tp}"] + ([f"{FLAG['pp']} {pp}"] if pp > 1 else []) + ([f"{FLAG['dp']} {dp}"] if dp > 1 else [])
    )
    return " ".join(parts + ([f"{FLAG['ep']} {moe_size or tp * dp}"] if ep else []))
