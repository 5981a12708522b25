"""The ``checkpoint`` section as an active probe: files, sizes and header hashes of the
model named by ``--model``, so nodes can be compared without moving data.

It runs when asked for (``collect --model``, the Ray node task), never for ``check``:
``check`` reads the whole checkpoint once with :func:`read_checkpoint` and hands it to the
(pure) evaluation.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flightcheck._collect import CollectContext, probe
from flightcheck._vocabulary.errors import UsageError
from flightcheck._vocabulary.facts import Facts
from flightcheck._vocabulary.intent import Intent

if TYPE_CHECKING:
    from flightcheck._checkpoint import Checkpoint


# The checkpoint of --model is always read from disk: a recorded section in a --facts file
# never stands in for a model that is here. Only where the model is not here (no --model,
# or the recorded model absent on this machine) does the FC5xx family judge the record
# (``_checks/checkpoint/headers.py`` ``launch_checkpoint``).
@probe(
    "checkpoint",
    "checkpoint",
    timeout=300.0,
    overrides_files=True,
    wanted=lambda cctx: bool(cctx.intent.model) and "checkpoint" in cctx.probes,
)
def collect_checkpoint(cctx: CollectContext, facts: Facts) -> dict[str, Any]:
    """The section; a model this node cannot read leaves it without files, with the reason
    in ``unavailable`` (FC802 then names the node) instead of losing the node's other facts."""
    from flightcheck._checkpoint import checkpoint_section

    try:
        section = checkpoint_section(cctx.intent)
    except UsageError as exc:
        return {"checkpoint": None, "unavailable": {"checkpoint": str(exc)}}
    unavailable = {}
    if section.get("path") and not os.path.isabs(section["path"]):
        section["path"] = os.path.abspath(section["path"])  # FC802's fix runs on another node, elsewhere
    if section.get("path") is None:
        unavailable["checkpoint"] = f"model {cctx.intent.model} not found on this node"
    return {"checkpoint": section, "unavailable": unavailable}


Early = Callable[[], "dict[str, Any]"]


def start_reading(intent: Intent) -> Early | None:
    """Start reading a ``--model`` that is a path now, on a thread, while the facts are
    collected: a directory needs no engine environment to be found, and the scan workers
    then use the CPUs the collection leaves idle. :func:`read_checkpoint` takes the result
    (``early``); a repo id (whose cache the engine's environment locates) waits for the facts."""
    model = intent.model
    if not model:
        return None
    from flightcheck._checkpoint.resolve import looks_like_repo_id

    if looks_like_repo_id(model) and not model.startswith(("/", ".", "~")):
        return None
    import threading

    from flightcheck._checkpoint.workers import kill, look_early

    box: dict[str, Any] = {}
    # a directory read cold gets its scan workers now: they start while the reader (and,
    # on the main thread, the checks) are imported
    ready, cached = look_early(model)

    def run() -> None:
        try:
            from flightcheck._checkpoint import load

            box["ck"] = load(
                model,
                revision=intent.revision,
                download_dir=intent.download_dir,
                engine=intent.engine,
                load_format=intent.load_format,
                ready=ready,
            )
        except Exception as exc:  # noqa: BLE001 - handed to read_checkpoint, which reports it
            box["exc"] = exc
        finally:
            for proc in list(ready):  # started for nothing (a warm cache, a small model)
                kill(proc)

    if cached and not ready:
        # Most likely a warm read (a few ms): done when asked for, on the caller's thread.
        # On a thread of its own now, it would contend with the imports for the
        # interpreter and cost more than it overlaps (measured: ~4 ms of a ~0.11 s check).
        def deferred() -> dict[str, Any]:
            if not box:
                run()
            return box

        return deferred
    thread = threading.Thread(target=run, daemon=True, name="fc-checkpoint")
    thread.start()

    def result() -> dict[str, Any]:
        thread.join()  # load() is bounded by its own deadline
        return box

    return result


def read_checkpoint(intent: Intent, facts: Facts, early: Early | None = None) -> Checkpoint | None:
    """The checkpoint of ``intent.model`` read once for a launch, with the engine's Hugging
    Face cache environment from ``facts``; with ``--deep`` also its read throughput. None
    without a model. Never raises: a bug while reading is kept in ``crash`` (computed once,
    then every memory and checkpoint check says "unknown" from it). ``early``: the read
    :func:`start_reading` began, used when it found a directory."""
    if not intent.model:
        return None
    from flightcheck._checkpoint import Checkpoint, load
    from flightcheck._checkpoint.resolve import Resolved, env_views

    got = early() if early is not None else {}
    try:
        if "exc" in got:
            raise got["exc"]
        ck = got.get("ck")
        if ck is None or ck.resolved.kind != "dir":
            ck = load(
                intent.model,
                revision=intent.revision,
                envs=tuple(env_views(facts.env)),
                download_dir=intent.download_dir,
                engine=intent.engine,
                load_format=intent.load_format,
            )
    except Exception as exc:  # noqa: BLE001 - a bug here must become one "unknown", not a crash
        return Checkpoint(Resolved(model=intent.model), crash=f"{type(exc).__name__}: {exc}")
    refresh_draft(intent, facts, ck)
    if intent.deep and ck.found and ck.shards:
        from flightcheck._collect.throughput import measure

        ck.throughput = measure([s.path for s in ck.shards if s.scan is not None and s.size > 0])
    return ck


def refresh_draft(intent: Intent, facts: Facts, ck: Checkpoint | None) -> None:
    """Read (again) the separate draft checkpoint of ``intent``'s speculative decoding into
    ``ck.draft`` (vLLM only): the launch's flags decide it, so a settled intent whose flags
    differ needs only this, not the target read again."""
    from flightcheck._knowledge import engines

    if ck is None or not engines.get(intent.engine).memory.speculative_draft or not ck.found or ck.crash is not None:
        return
    from flightcheck._checkpoint.resolve import env_views

    ck.draft = _read_draft(intent, ck, tuple(env_views(facts.env)))


def _read_draft(intent: Intent, ck: Checkpoint, envs: tuple[Any, ...]) -> Checkpoint | None:
    """The separate draft checkpoint of the launch's speculative decoding, resolved and
    read as the target is (a directory, or a repo id in the engine's Hugging Face cache;
    every file touch bounded by :func:`load`'s deadline). None without one; a bug while
    reading it is kept in its ``crash`` (the memory model then keeps its note)."""
    from flightcheck._checkpoint import Checkpoint, load
    from flightcheck._checkpoint.resolve import Resolved
    from flightcheck._knowledge import vllm

    spec = vllm.resolve_speculative(
        intent.speculative_config, intent.speculative_error, ck.config, intent.model, intent.tensor_parallel_size
    )
    model = vllm.separate_draft(spec, intent.model)
    if model is None:
        return None
    try:
        # the draft's own ``revision`` (config/speculative.py: ``revision=self.revision``)
        return load(model, revision=spec.revision if spec is not None else None, envs=envs, engine=intent.engine)
    except Exception as exc:  # noqa: BLE001 - an unreadable draft is a note, never a crash
        return Checkpoint(Resolved(model=model), crash=f"{type(exc).__name__}: {exc}")
