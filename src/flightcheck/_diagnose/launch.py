"""The launch a log shows, as an :class:`Intent` for ``diagnose --check``.

vLLM logs the arguments that differ from its defaults (``non-default args: {...}``, from
0.9; ``args: Namespace(...)`` before), SGLang its whole ``ServerArgs(...)``. Their names are
the engines' own field names (``tensor_parallel_size``, SGLang's ``tp_size``,
``model_path``, ``context_length``, ``mem_fraction_static``); a value of the wrong type is
left out, with a note, and the rest of the launch is still checked.
"""

from __future__ import annotations

from typing import Any

from flightcheck._knowledge import engines
from flightcheck._vocabulary.errors import UsageError
from flightcheck._vocabulary.intent import Intent

# the engines' field names -> the Intent's, and the type each must have
_FIELDS: dict[str, tuple[str, type]] = {
    "model": ("model", str),
    "model_tag": ("model", str),
    "model_path": ("model", str),
    "revision": ("revision", str),
    "tensor_parallel_size": ("tensor_parallel_size", int),
    "tp_size": ("tensor_parallel_size", int),
    "pipeline_parallel_size": ("pipeline_parallel_size", int),
    "pp_size": ("pipeline_parallel_size", int),
    "data_parallel_size": ("data_parallel_size", int),
    "dp_size": ("data_parallel_size", int),
    "max_model_len": ("max_model_len", int),
    "context_length": ("max_model_len", int),
    "gpu_memory_utilization": ("gpu_memory_utilization", float),
    "mem_fraction_static": ("gpu_memory_utilization", float),
    "kv_cache_dtype": ("kv_cache_dtype", str),
    "quantization": ("quantization", str),
    "enable_expert_parallel": ("enable_expert_parallel", bool),
    "dtype": ("dtype", str),
    "enforce_eager": ("enforce_eager", bool),
    "load_format": ("load_format", str),
    "max_num_batched_tokens": ("max_num_batched_tokens", int),
    "max_num_seqs": ("max_num_seqs", int),
    "download_dir": ("download_dir", str),
    "distributed_executor_backend": ("distributed_executor_backend", str),
}


def _coerce(value: Any, kind: type) -> Any:
    if kind is bool:
        return value if isinstance(value, bool) else None
    if kind is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if kind is float:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return value if isinstance(value, str) and value and len(value) < 4096 else None


def intent_of(launch: dict[str, Any]) -> tuple[Intent, list[str]]:
    """The Intent of the launch in a diagnosis's ``launch`` block, and notes on what was
    left out."""
    engine = launch.get("engine") or "vllm"
    known = engines.find(engine)  # a log's engine: one we do not know reads as the default
    fields: dict[str, Any] = {"engine": known.name if known is not None else engines.DEFAULT}
    notes: list[str] = []
    for key, value in (launch.get("args") or {}).items():
        target = _FIELDS.get(key)
        if target is None or value is None:
            continue
        name, kind = target
        coerced = _coerce(value, kind)
        if coerced is None:
            notes.append(f"{key}={value!r} left out (not a {kind.__name__})")
            continue
        if name == "enable_expert_parallel" and fields.get(name):
            continue
        fields.setdefault(name, coerced)
    if fields.get("model") == "<redacted>":
        fields.pop("model")
    if not launch.get("args"):
        notes.append("the log has no arguments line: the host is checked for the engine's defaults")
    try:
        return Intent(**fields), notes
    except (UsageError, TypeError, ValueError) as exc:
        notes.append(f"the launch's arguments were refused ({exc}): the host is checked without them")
        return Intent(engine=fields["engine"]), notes
