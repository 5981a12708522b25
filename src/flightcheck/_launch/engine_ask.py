"""Ask the engine itself how it reads the command, when its interpreter is at hand.

``run`` and ``check -- <command>`` first read the command with the built-in reader
(:mod:`.intent_read`). When the engine's interpreter (the ``python`` of the command, or the
one behind the ``vllm`` / ``sglang`` script) has the engine installed, this runs
``_collect/engine_reader.py`` there, as a child with a timeout, with flightcheck's plugin
off (``FLIGHTCHECK_DISABLE=1``), offline and on the CPU platform (it parses; it never
initialises an accelerator), in the caller's working directory (relative ``--config`` and
template files resolve as they will for the engine). Its answer replaces the built-in
reading's fields, and ``intent.reader`` becomes ``"engine"``.

Any trouble (the engine missing there, a timeout, a parser API that moved, output that
is not one JSON document) keeps the built-in reading: the launch is never stopped because
the engine could not be asked. ``FLIGHTCHECK_ENGINE_READ=0`` turns the asking off;
``FLIGHTCHECK_ENGINE_READ_TIMEOUT`` (seconds, default 10) bounds it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flightcheck._vocabulary.intent import Intent

if TYPE_CHECKING:
    from flightcheck._launch.command import EngineCommand

DEFAULT_TIMEOUT_S = 10.0
#: engine_reader's stages that mean "the engine answered: it refuses the line".
_REFUSING_STAGES = ("parse", "validate", "dispatch")
#: Canonical fields of the engine reader's document copied into the Intent as they are.
_COPIED = (
    "model",
    "revision",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "data_parallel_size_local",
    "prefill_context_parallel_size",
    "decode_context_parallel_size",
    "enable_expert_parallel",
    "max_model_len",
    "kv_cache_dtype",
    "gpu_memory_utilization",
    "quantization",
    "dtype",
    "enforce_eager",
    "load_format",
    "max_num_batched_tokens",
    "max_num_seqs",
    "kv_cache_memory_bytes",
    "cpu_offload_gb",
    "hf_overrides",
    "nnodes",
    "download_dir",
)

READER_SCRIPT = Path(__file__).resolve().parents[1] / "_collect" / "engine_reader.py"


def enabled(env: dict[str, str]) -> bool:
    return env.get("FLIGHTCHECK_ENGINE_READ", "1").strip().lower() not in ("0", "false", "no", "off")


def _timeout(env: dict[str, str]) -> float:
    try:
        return max(1.0, float(env.get("FLIGHTCHECK_ENGINE_READ_TIMEOUT", DEFAULT_TIMEOUT_S)))
    except ValueError:
        return DEFAULT_TIMEOUT_S


def read_with_engine(cmd: EngineCommand, env: dict[str, str]) -> dict[str, Any] | None:
    """The engine reader's document for ``cmd``; None when the engine could not be asked."""
    from flightcheck._collect import proc

    python = cmd.intent.python
    if not cmd.recognised or not python or not enabled(env) or not READER_SCRIPT.is_file():
        return None
    timeout = _timeout(env)
    child_env = dict(cmd.engine_env(env))
    child_env["FLIGHTCHECK_DISABLE"] = "1"  # the plugin must not check its own reading
    argv = cmd.argv[cmd.at :]
    res = proc.run(
        [python, str(READER_SCRIPT), str(cmd.engine), "--timeout", f"{timeout:g}", "--", *argv],
        timeout=timeout + 5,
        env=child_env,
        cwd=os.getcwd(),
    )
    lines = [ln for ln in res.out.splitlines() if ln.strip()]
    if len(lines) != 1:
        return None
    try:
        doc = json.loads(lines[0])
    except ValueError:
        return None
    return doc if usable(doc) else None


def usable(doc: object) -> bool:
    """Whether an engine reader's document is an answer: the engine read the line, or its
    parser refused it. Not installed there, timed out, a parser API that moved: no answer
    (the built-in reading stays)."""
    if not isinstance(doc, dict) or doc.get("reader") != "engine":
        return False
    return not doc.get("error") or doc.get("error_stage") in _REFUSING_STAGES


def apply_engine_reading(cmd: EngineCommand, doc: dict[str, Any]) -> None:
    """Replace the built-in reading of ``cmd.intent`` with the engine's answer ``doc``."""
    import dataclasses

    from flightcheck._knowledge import sglang
    from flightcheck._launch.intent_read import _set

    intent = cmd.intent
    fields: dict[str, Any] = dict(intent.__dict__)
    fields["reader"] = "engine"
    if doc.get("error"):
        fields["refused"] = [str(doc["error"])]
        cmd.intent = Intent(**fields)
        return
    fields["refused"] = []
    unparsed = [u for u in intent.unparsed if not u.startswith(tuple(f"{n} " for n in _COPIED))]
    defaults = {f.name: f.default for f in dataclasses.fields(Intent)}
    for name in _COPIED:
        if name == "model" and intent.model is None:
            continue  # the line names no model: the engine's default, left unset as the built-in reader does
        if name == "enable_expert_parallel" and cmd.engine == "sglang":
            continue  # derived below, as SGLang derives it
        value = doc.get(name)
        if value is None:
            if defaults[name] is None:  # the line leaves it to the engine
                fields[name] = None
            continue  # else: a setting this engine does not have
        if name == "kv_cache_dtype" and isinstance(value, str):
            value = {"bf16": "bfloat16", "fp16": "float16"}.get(value, value)
        if name == "hf_overrides" and isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                pass
        if name == "hf_overrides" and value == {}:
            fields[name] = None
            continue
        if name == "cpu_offload_gb" and isinstance(value, (int, float)):
            value = float(value)
        _set(fields, name, value, name, unparsed)
    if cmd.engine == "sglang":
        extra = doc.get("engine_fields") or {}
        if extra.get("enable_dp_attention") and extra.get("attn_dp_size", 1) == 1:
            fields["data_parallel_size"] = 1
        ep = doc.get("expert_parallel_size") or 1
        tp = doc.get("tensor_parallel_size") or 1
        fields["enable_expert_parallel"] = ep > 1 or (
            extra.get("moe_a2a_backend") in sglang.A2A_EP_SPANNING_BACKENDS and tp > 1
        )
    fields["unparsed"] = unparsed
    cmd.intent = Intent(**fields)


def ask_engine(cmd: EngineCommand, env: dict[str, str]) -> bool:
    """Read ``cmd`` with the engine when it can be asked; True when it answered."""
    doc = read_with_engine(cmd, env)
    if doc is None:
        return False
    apply_engine_reading(cmd, doc)
    return True
