"""One pipeline for every entry point: collect this host, read the checkpoint once,
evaluate. ``check``, ``run`` and the vLLM plugin call :func:`assess` (then ``run`` and the
plugin decide with ``flightcheck._launch.guard``); the library's ``flightcheck.evaluate``
is :func:`evaluate_launch`. The Ray node task only collects (``flightcheck._cluster.node``):
the node's snapshot is judged where the command runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from flightcheck._checks.evaluate import evaluate
from flightcheck._collect import collect
from flightcheck._collect.checkpoint import Early, read_checkpoint, refresh_draft, start_reading
from flightcheck._vocabulary.facts import Facts
from flightcheck._vocabulary.intent import Intent
from flightcheck._vocabulary.report import Report

if TYPE_CHECKING:
    # the checkpoint reader (msgspec structs, the scan) is imported only when a model is read
    from flightcheck._checkpoint import Checkpoint


def assess(
    intent: Intent,
    facts_files: Iterable[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    python: str | None = None,
    probes: Iterable[str] = (),
    facts_docs: Iterable[dict[str, Any]] = (),
    strict: bool = False,
    settle: Callable[[Intent], Intent] | None = None,
    early: Early | None = None,
    multicast: str | None = None,
    probe_budget: float | None = None,
    live_env: bool = False,
    by_release: Callable[[Intent, Facts], Intent] | None = None,
) -> Report:
    """Collect the facts (files over live collection), read ``intent.model``'s checkpoint
    with the engine's environment, and evaluate; ``report.timings`` has each stage.

    ``settle``: the launch is still being read (the engine asked in the background,
    ``_launch.engine_ask.start_asking``). Collection and the checkpoint read run with the
    provisional ``intent``; then ``settle(intent)`` gives the final one, which is evaluated.
    What was collected for the provisional reading is kept unless the final one changes
    what collection depends on (then that part is done again).

    ``early``: a read of ``intent.model`` the caller already started with
    :func:`~flightcheck._collect.checkpoint.start_reading` (before importing this module:
    the scan then overlaps the imports).

    ``multicast``: the multicast probe where the launch needs it (the plugin), once the
    facts and the checkpoint are known: ``"auto"`` probes when the launch reaches a
    multicast path on an NVSwitch node (``_checks/fabric/fallback.probe_needed``), through
    this boot's cache; ``"force"`` whenever two GPUs are here, fresh; ``"off"`` never. The
    report says why it did not run (FC304) and what it cost (``timings.probe_s``).
    ``probe_budget``: its time limit (a timeout within it is inconclusive).

    ``live_env``: ``env`` is the engine's own (``run``, the plugin): it wins over a facts
    file's recorded ``env`` (:func:`~flightcheck._collect.collect`).
    ``by_release``: the command read again with the options of the engine release the
    facts found (``_launch.release_read``), once the facts are known."""
    from flightcheck._vocabulary.facts import load_file, sections_of

    t0 = time.perf_counter()
    if early is None:
        early = start_reading(intent)  # a model directory is read while the facts are collected
    docs = [load_file(f) for f in facts_files] + list(facts_docs)
    provided: set[str] = set().union(*(sections_of(d) for d in docs)) if docs else set()
    facts_files, facts_docs = (), docs  # each file read once, its sections known here too
    facts = collect(
        intent, facts_files, env=env, python=python, probes=probes, facts_docs=facts_docs, live_env=live_env
    )
    checkpoint = read_checkpoint(intent, facts, early)
    t1 = time.perf_counter()
    timings: dict[str, float] = {}
    if settle is not None:
        final = settle(intent)
        t_settled = time.perf_counter()
        timings["engine_wait_s"] = round(t_settled - t1, 4)  # how long the verdict waited for the engine
        if _differs(intent, final, COLLECTED_BY):
            facts = collect(
                final, facts_files, env=env, python=python, probes=probes, facts_docs=facts_docs, live_env=live_env
            )
            checkpoint = read_checkpoint(final, facts)
        elif _differs(intent, final, CHECKPOINT_BY):
            checkpoint = read_checkpoint(final, facts)
        elif _differs(intent, final, ("engine_flags",)):
            refresh_draft(final, facts, checkpoint)  # a speculative draft named by the flags
        intent = final
        t1 = time.perf_counter()
    if by_release is not None:
        intent = by_release(intent, facts)
    wants = multicast is not None and "multicast" not in probes and not intent.deep
    if wants and "multicast_probe" not in provided and facts.multicast_probe is None:
        timings["probe_s"] = round(
            _multicast_for_launch(facts, intent, checkpoint, env, multicast or "auto", probe_budget), 4
        )
        t1 = time.perf_counter()
    report = evaluate(facts, intent, checkpoint, strict=strict)
    t2 = time.perf_counter()
    report.timings = {"collect_s": round(t1 - t0, 4), **timings, "evaluate_s": round(t2 - t1, 4)}
    return report


def _multicast_for_launch(
    facts: Facts,
    intent: Intent,
    checkpoint: Checkpoint | None,
    env: Mapping[str, str] | None,
    mode: str,
    budget: float | None,
) -> float:
    """The multicast probe for this launch, where it needs one (see :func:`assess`): the
    section or why not goes into ``facts``; the seconds it cost (0 when not needed)."""
    import os

    from flightcheck._checks.fabric.fallback import probe_needed
    from flightcheck._checks.framework import Context
    from flightcheck._collect.multicast import probe_for_launch

    if mode == "off":
        facts.unavailable["multicast_probe"] = "FLIGHTCHECK_PROBE=0 turns the multicast probe off"
        return 0.0
    ctx = Context(facts, intent, checkpoint)
    why = probe_needed(ctx, force=mode == "force")
    if why is not None:
        facts.unavailable["multicast_probe"] = f"not needed: {why}"
        return 0.0
    devices = list(range(len(ctx.gpus_used)))
    try:
        return probe_for_launch(
            facts, devices, dict(os.environ if env is None else env), fresh=mode == "force", budget=budget
        )
    except Exception as exc:  # noqa: BLE001 - as a crashed collector: the rest of the launch is still checked
        facts.multicast_probe = None
        facts.unavailable["multicast_probe"] = f"the multicast probe crashed: {type(exc).__name__}: {exc}"
        return 0.0


#: The intent fields the checkpoint read depends on (``_collect/checkpoint.py``).
CHECKPOINT_BY = ("engine", "model", "revision", "download_dir", "load_format", "deep")
#: ... and those the collectors depend on (the engine's interpreter; the GPUs the probe and
#: the compile smoke test use: ``_collect/multicast.py``, ``_collect/compile_smoke.py``).
COLLECTED_BY = ("python", "tensor_parallel_size", "gpus_per_node")


def _differs(a: Intent, b: Intent, names: tuple[str, ...]) -> bool:
    return any(getattr(a, n, None) != getattr(b, n, None) for n in names)


def evaluate_launch(
    facts: Facts, intent: Intent | None = None, checkpoint: Checkpoint | None = None, *, strict: bool = False
) -> Report:
    """Evaluate ``facts`` for ``intent``; when a model is named and no checkpoint is given,
    read it from disk first (the library's ``flightcheck.evaluate``)."""
    intent = intent or Intent()
    if checkpoint is None:
        checkpoint = read_checkpoint(intent, facts)
    return evaluate(facts, intent, checkpoint, strict=strict)
