"""flightcheck's built-in reading of an engine command against the engine's own reading.

The golden files (tests/conformance/golden/<engine>.jsonl, written by
scripts/gen_reader_golden.py with the real engines) hold, per corpus line, the words the
shell hands the command (``words``: shell-split, nothing expanded, redirections cut) and
what the engine's parser made of them. :func:`compare` reads the same words with
``parse_command`` and lists the fields where the two differ.

How the engine's record maps to the Intent (the engine's own rules, not flightcheck's):

* a field the line leaves alone is the engine's default (the generated option table);
* SGLang: ``--enable-dp-attention`` with ``attn_dp_size`` 1 moves ``dp_size`` into the TP
  group (``handle_deprecated_dp_attention``), so the replicas are 1; EP is on when
  ``ep_size`` > 1 or an all-to-all backend spans the TP group (``_a2a_ep_size``);
  ``bf16`` is spelled ``bfloat16``;
* a line the engine refuses is compared on that alone (``rejected``); a line with no
  engine invocation (``error_stage`` "shell") agrees when flightcheck does not read it.

Run it in an empty working directory, as the golden files were made (a relative
``--config`` or ``--chat-template`` file is looked up there).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parents[1] / "conformance" / "golden"

#: Intent field -> the golden field of the engine's reading.
COMPARED: dict[str, str] = {
    "model": "model",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "data_parallel_size": "data_parallel_size",
    "data_parallel_size_local": "data_parallel_size_local",
    "prefill_context_parallel_size": "prefill_context_parallel_size",
    "decode_context_parallel_size": "decode_context_parallel_size",
    "enable_expert_parallel": "enable_expert_parallel",
    "max_model_len": "max_model_len",
    "kv_cache_dtype": "kv_cache_dtype",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "quantization": "quantization",
    "dtype": "dtype",
    "enforce_eager": "enforce_eager",
    "load_format": "load_format",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "max_num_seqs": "max_num_seqs",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
    "cpu_offload_gb": "cpu_offload_gb",
    "hf_overrides": "hf_overrides",
    "nnodes": "nnodes",
}

_SG_SPANNING = {
    "megamoe",
    "deepep",
    "deepep_v2",
    "mooncake",
    "nixl",
    "ascend_fuseep",
    "flashinfer",
    "flashinfer_megamoe",
    "mori",
    "pplx",
}


_DATA = Path(__file__).resolve().parents[2] / "src" / "flightcheck" / "_knowledge" / "data"
_VERSIONS = {"vllm": "0.33.0", "sglang": "0.5.23"}
_DEFAULTS: dict[str, dict[str, Any]] = {}


def _default(engine: str, dest: str) -> Any:
    """The engine's parser default (the generated table, read directly)."""
    if engine not in _DEFAULTS:
        table = json.loads((_DATA / f"{engine}_{_VERSIONS[engine]}_args.json").read_text())
        _DEFAULTS[engine] = {opt["dest"]: opt["default"] for opt in table["options"]}
    return _DEFAULTS[engine].get(dest)


def golden(engine: str) -> list[dict[str, Any]]:
    path = GOLDEN / f"{engine}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def engine_view(engine: str, g: dict[str, Any]) -> dict[str, Any]:
    """The engine's reading in the Intent's terms."""
    out = {key: g.get(src) for key, src in COMPARED.items()}
    if engine == "sglang":
        extra = g.get("engine_fields") or {}
        if extra.get("enable_dp_attention") and extra.get("attn_dp_size", 1) == 1:
            out["data_parallel_size"] = 1
        ep = g.get("expert_parallel_size") or 1
        tp = g.get("tensor_parallel_size") or 1
        out["enable_expert_parallel"] = ep > 1 or (extra.get("moe_a2a_backend") in _SG_SPANNING and tp > 1)
        out["kv_cache_dtype"] = {"bf16": "bfloat16", "fp16": "float16"}.get(
            out["kv_cache_dtype"], out["kv_cache_dtype"]
        )
        if isinstance(out["hf_overrides"], str):
            try:
                out["hf_overrides"] = json.loads(out["hf_overrides"])
            except ValueError:
                pass
    return out


def builtin_view(engine: str, intent: Any) -> dict[str, Any]:
    """flightcheck's reading in the same terms: what it left unset is the engine's default."""
    dest = {
        "vllm": {},
        "sglang": {
            "model": "model_path",
            "tensor_parallel_size": "tp_size",
            "pipeline_parallel_size": "pp_size",
            "data_parallel_size": "dp_size",
            "decode_context_parallel_size": "dcp_size",
            "max_model_len": "context_length",
            "gpu_memory_utilization": "mem_fraction_static",
            "max_num_seqs": "max_running_requests",
            "hf_overrides": "json_model_override_args",
        },
    }[engine]
    out: dict[str, Any] = {}
    for key in COMPARED:
        value = getattr(intent, key, None)
        default = _default(engine, dest.get(key, key))
        if key == "hf_overrides" and isinstance(default, str):
            default = json.loads(default) if default else default
        if value is None or (key in _PLAIN_DEFAULTS and value == _PLAIN_DEFAULTS[key] and default is not None):
            value = default if value is None else value
        out[key] = value
    return out


#: Intent defaults that stand for "the engine's default" when the line says nothing.
_PLAIN_DEFAULTS: dict[str, Any] = {}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) == float(b)
    return bool(a == b)


def compare(engine: str, g: dict[str, Any]) -> list[str]:
    """Where the built-in reading of one golden line differs from the engine's."""
    from flightcheck._launch import parse_command

    words = g.get("words")
    if not words:
        return []
    intent = parse_command(list(words), env={"PATH": "/nonexistent"}).intent
    if g.get("error_stage") == "shell":  # no engine invocation in the line
        return [] if getattr(intent, "reader", None) is None else ["rejected: not an engine launch, built-in read it"]
    engine_rejects = bool(g.get("error"))
    we_reject = bool(getattr(intent, "refused", None))
    if engine_rejects or we_reject:
        if engine_rejects != we_reject:
            return [f"rejected: engine {g.get('error')!r}, built-in {getattr(intent, 'refused', None)!r}"]
        return []
    mine, theirs = builtin_view(engine, intent), engine_view(engine, g)
    absent = set()
    if engine == "sglang":
        absent = {
            "data_parallel_size_local",
            "prefill_context_parallel_size",
            "enforce_eager",
            "max_num_batched_tokens",
        }
        absent |= {"kv_cache_memory_bytes"}
    return [
        f"{key}: engine {theirs[key]!r}, built-in {mine[key]!r}"
        for key in COMPARED
        if key not in absent and not _same(mine[key], theirs[key])
    ]
