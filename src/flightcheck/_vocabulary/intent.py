"""The deployment intent: what is about to be launched, spelled as vLLM spells it.

Checks read the intent (engine, parallel layout, max_model_len, ...) next to the facts.
``check`` builds it from its flags; ``run`` and the vLLM plugin build it from the real engine
command line.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from flightcheck._vocabulary.errors import UsageError

ENGINES = ("vllm", "sglang")
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16", "half", "fp8_ds_mla", "nvfp4")

#: max_model_len meaning "let the engine fit it" (vLLM's -1 / auto).
AUTO = -1

_HUMAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)\s*$")
_DECIMAL = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_len(value: str | int) -> int:
    """Parse a max_model_len the way vLLM does: ``131072``, ``128k`` (x1000), ``128K``
    (x1024), ``1m``, ``1M``, ``25.6k``; ``-1`` and ``auto`` mean "fit automatically" (-1).

    Raises:
        UsageError: for anything else.
    """
    if isinstance(value, int):
        if value < AUTO or value == 0:
            raise UsageError(f"--max-model-len {value}: must be positive, or -1/auto")
        return value
    text = str(value).strip()
    if text.lower() == "auto" or text == "-1":
        return AUTO
    m = _HUMAN.match(text)
    if not m:
        raise UsageError(f"--max-model-len {value!r}: expected a number such as 131072, 128k, 1M, -1 or auto")
    number, suffix = m.group(1), m.group(2)
    if suffix in _BINARY:
        if "." in number:
            raise UsageError(f"--max-model-len {value!r}: binary multipliers (K, M, G) take whole numbers")
        result = int(number) * _BINARY[suffix]
    else:
        result = int(float(number) * _DECIMAL[suffix.lower()])
    if result <= 0:
        raise UsageError(f"--max-model-len {value!r}: must be positive")
    return result


@dataclass
class Intent:
    """One launch: the engine and the arguments that decide whether it fits and works."""

    engine: str = "vllm"
    model: str | None = None
    revision: str | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    max_model_len: int | None = None  # None: the model's default; AUTO (-1): engine fits it
    kv_cache_dtype: str = "auto"
    gpu_memory_utilization: float | None = None  # None: the engine's default
    quantization: str | None = None
    python: str | None = None  # the engine's interpreter
    reserve_gib: float | None = None  # override of the documented per-GPU reserve
    nnodes: int = 1
    deep: bool = False
    download_dir: str | None = None
    load_format: str | None = None  # None: the engine's default ("auto")
    distributed_executor_backend: str | None = None  # "ray" changes how env reaches workers
    # batch limits and memory options (None: the engine's default)
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    kv_cache_memory_bytes: int | None = None  # bypasses gpu_memory_utilization (vLLM)
    cpu_offload_gb: float | None = None  # GiB of weights per GPU kept in CPU memory
    enforce_eager: bool | None = None
    dtype: str | None = None
    hf_overrides: dict[str, Any] | None = None
    data_parallel_size_local: int | None = None
    #: flags of the real engine command that checks or the plan care about (e.g. SGLang's
    #: --enable-symm-mem); empty for plain ``check``.
    engine_flags: list[str] = field(default_factory=list)
    #: what ``run`` could not read from the engine command (reported as a warning).
    unparsed: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise UsageError(f"--engine {self.engine!r}: expected one of {', '.join(ENGINES)}")
        for name in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "nnodes"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be >= 1")
        if self.gpu_memory_utilization is not None and not 0 < self.gpu_memory_utilization <= 1:
            raise UsageError("--gpu-memory-utilization must be in (0, 1]")
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise UsageError(f"--kv-cache-dtype {self.kv_cache_dtype!r}: expected one of {', '.join(KV_CACHE_DTYPES)}")

    @property
    def world_size(self) -> int:
        """GPUs one launch uses across all nodes: TP x PP x DP."""
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

    @property
    def gpus_per_node(self) -> int:
        """GPUs this node contributes: TP x PP (x DP) spread over ``nnodes``."""
        return max(1, -(-self.world_size // self.nnodes))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the report's ``intent`` block."""
        out = dataclasses.asdict(self)
        if not out["engine_flags"]:
            del out["engine_flags"]
        if not out["unparsed"]:
            del out["unparsed"]
        return out
