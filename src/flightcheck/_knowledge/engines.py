"""The engine flags flightcheck reads, per engine: spellings, aliases, and what they mean.

Only the flags that decide whether a launch works are read; every other flag passes
through untouched. Spellings follow the engines' own parsers: vLLM accepts underscores for
dashes (``--tensor_parallel_size``) and ``-tp=8``; SGLang's launcher has long aliases
(``--tp-size``, ``--tp``) for the same setting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flightcheck._vocabulary.intent import parse_len

# ---- vLLM (vllm/engine/arg_utils.py, vllm/utils/argparse_utils.py) --------------------

#: short or alternative spellings -> the canonical long flag.
VLLM_ALIASES: dict[str, str] = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
    "-ep": "--enable-expert-parallel",
    "-q": "--quantization",
    "-n": "--nnodes",
    "-r": "--node-rank",
}

# ---- SGLang (python/sglang/srt/server_args.py) ------------------------------------------

SGLANG_ALIASES: dict[str, str] = {
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


def _int(text: str) -> int:
    return int(text)


def _float(text: str) -> float:
    return float(text)


def _str(text: str) -> str:
    return text


def _kv_dtype(text: str) -> str:
    # SGLang spells bfloat16 "bf16"; the intent uses vLLM's names
    return {"bf16": "bfloat16", "fp16": "float16"}.get(text, text)


def _ep_size(text: str) -> bool:
    # SGLang's EP is a size inside the TP group; the intent only needs "EP on"
    return int(text) > 1


#: canonical flag -> (Intent field, converter). A converter raises ValueError or
#: UsageError on a value it cannot read; the flag is then reported as unparsed.
Reader = tuple[str, Callable[[str], Any]]

VLLM_FIELDS: dict[str, Reader] = {
    "--model": ("model", _str),
    "--revision": ("revision", _str),
    "--tensor-parallel-size": ("tensor_parallel_size", _int),
    "--pipeline-parallel-size": ("pipeline_parallel_size", _int),
    "--data-parallel-size": ("data_parallel_size", _int),
    "--max-model-len": ("max_model_len", parse_len),
    "--kv-cache-dtype": ("kv_cache_dtype", _str),
    "--gpu-memory-utilization": ("gpu_memory_utilization", _float),
    "--quantization": ("quantization", _str),
    "--download-dir": ("download_dir", _str),
    "--distributed-executor-backend": ("distributed_executor_backend", _str),
    "--nnodes": ("nnodes", _int),
}

SGLANG_FIELDS: dict[str, Reader] = {
    "--model-path": ("model", _str),
    "--revision": ("revision", _str),
    "--tensor-parallel-size": ("tensor_parallel_size", _int),
    "--pipeline-parallel-size": ("pipeline_parallel_size", _int),
    "--data-parallel-size": ("data_parallel_size", _int),
    "--expert-parallel-size": ("enable_expert_parallel", _ep_size),
    "--context-length": ("max_model_len", parse_len),
    "--kv-cache-dtype": ("kv_cache_dtype", _kv_dtype),
    "--mem-fraction-static": ("gpu_memory_utilization", _float),
    "--quantization": ("quantization", _str),
    "--download-dir": ("download_dir", _str),
    "--nnodes": ("nnodes", _int),
}

#: flags that never take a value (store_true / BooleanOptionalAction), so the token after
#: them is not swallowed as their value. Flags not listed and not known to take a value
#: are read with the usual heuristic (the next token is the value unless it is a flag).
BOOL_FLAGS: frozenset[str] = frozenset(
    {
        # vLLM
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
        # SGLang
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
    }
)

#: vLLM's boolean intent flags (BooleanOptionalAction: ``--x`` / ``--no-x``).
VLLM_BOOLS: dict[str, tuple[str, bool]] = {
    "--enable-expert-parallel": ("enable_expert_parallel", True),
    "--no-enable-expert-parallel": ("enable_expert_parallel", False),
}


def canonical(flag: str, engine: str | None) -> str:
    """The canonical spelling of an option token's name (no ``=value``).

    ``--tensor_parallel_size`` -> ``--tensor-parallel-size`` (underscores before the first
    dot only, as vLLM does for ``--compilation_config.pass_config``); ``-tp`` ->
    ``--tensor-parallel-size``; SGLang's ``--tp-size`` -> ``--tensor-parallel-size``.
    """
    if flag.startswith("--"):
        head, dot, tail = flag[2:].partition(".")
        flag = "--" + head.replace("_", "-") + dot + tail
    aliases = SGLANG_ALIASES if engine == "sglang" else VLLM_ALIASES
    return aliases.get(flag, flag)


def fields_for(engine: str | None) -> dict[str, Reader]:
    """The flag table of ``engine``."""
    return SGLANG_FIELDS if engine == "sglang" else VLLM_FIELDS


def takes_value(flag: str, engine: str | None) -> bool | None:
    """True: the flag always takes a value; False: never; None: unknown (guess)."""
    if flag in BOOL_FLAGS:
        return False
    if flag in fields_for(engine) or flag in ("--config", "--node-rank"):
        return True
    return None
