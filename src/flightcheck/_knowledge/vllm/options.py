"""vLLM's command-line options: the canonical spellings, aliases and boolean flags
(vllm/engine/arg_utils.py, vllm/utils/argparse_utils.py), the Intent fields the built-in
reader fills from them, and how fixes and messages spell a layout.
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
    "-sc": "--speculative-config",  # arg_utils.py: add_argument("--speculative-config", "-sc", ...)
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
        "--enable-chunked-prefill",
        "--no-enable-chunked-prefill",
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
    "pcp": "-pcp",  # arg_utils.py: --prefill-context-parallel-size
    "dcp": "-dcp",  # arg_utils.py: --decode-context-parallel-size
    "dp": "-dp",
    "ep": "--enable-expert-parallel",
    "max_len": "--max-model-len",
    "kv_dtype": "--kv-cache-dtype",
    "kv_fp8": "--kv-cache-dtype fp8",
    "util": "--gpu-memory-utilization",
    "eager": "--enforce-eager",
    "config": "--config",
    "quantization": "--quantization",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "max_num_seqs": "--max-num-seqs",
    "kv_cache_memory_bytes": "--kv-cache-memory-bytes",
    "cpu_offload_gb": "--cpu-offload-gb",
}


def layout(
    tp: int, pp: int = 1, dp: int = 1, ep: bool = False, moe_size: int | None = None, pcp: int = 1, dcp: int = 1
) -> str:
    """A parallel layout as vLLM's flags: ``-tp 8 -pp 2 -pcp 2 -dcp 8 --enable-expert-parallel``."""
    parts = (
        [f"{FLAG['tp']} {tp}"] + ([f"{FLAG['pp']} {pp}"] if pp > 1 else []) + ([f"{FLAG['dp']} {dp}"] if dp > 1 else [])
    )
    parts += ([f"{FLAG['pcp']} {pcp}"] if pcp > 1 else []) + ([f"{FLAG['dcp']} {dcp}"] if dcp > 1 else [])
    return " ".join(parts + ([FLAG["ep"]] if ep else []))
