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
``FLIGHTCHECK_ENGINE_READ_TIMEOUT`` (seconds, default 45) bounds it.

The engine's imports take long (vLLM 0.33: 13-36 s on a loaded node), so ``run`` and
``check`` ask in the background (:func:`start_asking`) from their very start, while the
facts are collected and the checkpoint is read (``_pipeline.assess(settle=...)``), and wait
for the answer only before evaluating, never past the timeout: the default covers the
import, and a slow engine costs the launch no more than the slower of the two.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flightcheck._vocabulary.intent import Intent

if TYPE_CHECKING:
    from flightcheck._launch.command import EngineCommand

DEFAULT_TIMEOUT_S = 45.0  # covers vLLM's import on a loaded node (13-36 s measured)
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


def reader_command(python: str, engine: str | None, *options: str) -> list[str]:
    """The engine-reader child's command line for ``engine`` (``options``: ``--timeout S``,
    ``--batch``, ``-- <argv>``): the child knows no engine, the spec tells it
    (``engines.reader_spec``)."""
    import json

    from flightcheck._knowledge import engines

    spec = json.dumps(engines.reader_spec(engine), separators=(",", ":"))
    return [python, str(READER_SCRIPT), "--spec", spec, *options]


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
        reader_command(python, cmd.engine, "--timeout", f"{timeout:g}", "--", *argv),
        timeout=timeout + 2,  # the reader's own watchdog ends it at `timeout`
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

    from flightcheck._knowledge import engines, sglang
    from flightcheck._launch.intent_read import _set, release_tuple

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
    rules = engines.get(cmd.engine).reader
    for name in _COPIED:
        if name == "model" and intent.model is None:
            continue  # the line names no model: the engine's default, left unset as the built-in reader does
        if name == "enable_expert_parallel" and rules.derives_expert_parallel:
            continue  # derived below, as SGLang derives it
        value = doc.get(name)
        if value is None:
            if defaults[name] is None:  # the line leaves it to the engine
                fields[name] = None
            continue  # else: a setting this engine does not have
        if name == "kv_cache_dtype" and isinstance(value, str):
            value = rules.kv_dtype_aliases.get(value, value)
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
        if name == "gpu_memory_utilization":
            # the parser takes any float; vLLM's CacheConfig refuses it at startup (FC703), by release
            why = engines.get(cmd.engine).memory.utilization_refusal(value, release_tuple(doc.get("engine_version")))
            if why:
                fields["refused"] = [*fields["refused"], why]
                fields.pop(name, None)
                continue
        _set(fields, name, value, name, unparsed)
    if rules.executor_backend:
        # how vLLM starts its workers, as its parser read it (``--distributed-executor-backend``
        # in any spelling it accepts): "ray" changes how the plan's variables reach them
        # (a reader that does not report it leaves the built-in reading)
        extra = doc.get("engine_fields") or {}
        if "distributed_executor_backend" in extra:
            backend = extra["distributed_executor_backend"]
            fields["distributed_executor_backend"] = backend if isinstance(backend, str) else None
    if rules.derives_expert_parallel:  # SGLang: ep_size, DP attention splitting the TP group
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


class Asking:
    """The engine asked in the background: started at once, answered by :meth:`wait`."""

    def __init__(self, cmd: EngineCommand, env: dict[str, str]) -> None:
        self.timeout = _timeout(env)
        self.started = time.perf_counter()
        self.answered: float | None = None  # perf_counter when the child's answer came (or failed)
        self._doc: dict[str, Any] | None = None
        self._thread = threading.Thread(
            target=self._ask, args=(cmd, dict(env)), name="flightcheck-engine-read", daemon=True
        )
        self._thread.start()

    def _ask(self, cmd: EngineCommand, env: dict[str, str]) -> None:
        try:
            self._doc = read_with_engine(cmd, env)
        except Exception:  # noqa: BLE001 - asking is optional: the built-in reading stays
            self._doc = None
        self.answered = time.perf_counter()

    def wait(self) -> dict[str, Any] | None:
        """The engine's document, or None; returns by the timeout (plus the child's kill grace)
        after the start, however the child behaves."""
        left = self.timeout + 3 - (time.perf_counter() - self.started)
        self._thread.join(max(0.0, left))
        return None if self._thread.is_alive() else self._doc


def start_asking(cmd: EngineCommand, env: dict[str, str]) -> Asking | None:
    """Start asking the engine about ``cmd`` in the background; None when it cannot be asked."""
    if not cmd.recognised or not cmd.intent.python or not enabled(env) or not READER_SCRIPT.is_file():
        return None
    return Asking(cmd, env)


def settle_reading(cmd: EngineCommand, asking: Asking | None) -> bool:
    """Wait for the engine's answer (bounded) and, when it answered, apply it to ``cmd``."""
    doc = asking.wait() if asking is not None else None
    if doc is None:
        return False
    apply_engine_reading(cmd, doc)
    return True
