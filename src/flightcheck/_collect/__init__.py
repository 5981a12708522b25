"""Collection: read this host into a facts snapshot. Collectors never decide anything.

Each collector declares the sections it fills and a timeout; they run concurrently in
daemon threads, so one that hangs costs its timeout, not the run. A section that a
``--facts`` file provides is not collected live at all (whole sections are replaced).
After the merge, *active probes* run where asked (``--deep``, ``run``, ``probe``): they
need the merged facts (which GPUs, which nvcc) and touch CUDA or compile, always in a child.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

import msgspec

from flightcheck._vocabulary.facts import Facts, from_dict, load_file, merge, sections_of
from flightcheck._vocabulary.intent import Intent

#: Collector modules, imported on first use. A new collector is one more name here.
#: each collector module and the sections its collectors and probes give (None: one that
#: runs even when a --facts file gives its section). A run whose --facts files give all of
#: a module's sections does not import it (the collectors are most of a recorded-facts
#: run's imports); tests/collect/test_registry.py holds this table to the declarations.
COLLECTOR_MODULES: dict[str, tuple[str, ...] | None] = {
    "host": ("host",),
    "env": ("env", "visible_devices"),
    "toolchain": ("toolchain",),
    "python_env": ("python",),
    "jit_cache": ("jit_cache",),
    "nvml": ("driver", "gpus", "fabric_manager", "imex"),
    "compile_smoke": ("compile_smoke",),
    "multicast": ("multicast_probe",),
    "checkpoint": None,
}


class CollectContext(msgspec.Struct):
    """What collectors may read besides the host itself."""

    intent: Intent
    env: dict[str, str]  # the engine's environment (PATH, CUDA_HOME, ... as it will see them)
    python: str  # the engine's interpreter
    probes: set[str] = msgspec.field(default_factory=set)  # active probes asked for explicitly


class Collector(msgspec.Struct, frozen=True):
    """A passive collector: fills ``sections`` from the host, within ``timeout`` seconds."""

    name: str
    sections: tuple[str, ...]
    func: Callable[[CollectContext], dict[str, Any]]
    timeout: float


class Probe(msgspec.Struct, frozen=True):
    """An active probe: fills ``section`` from the merged facts; runs only when ``wanted``."""

    name: str
    section: str
    func: Callable[[CollectContext, Facts], dict[str, Any]]
    wanted: Callable[[CollectContext], bool]
    timeout: float
    overrides_files: bool = False  # runs even when a --facts file gives its section


COLLECTORS: dict[str, Collector] = {}
PROBES: dict[str, Probe] = {}


def collector(name: str, sections: Iterable[str], timeout: float) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a passive collector. It returns ``{section: value, "unavailable": {...}}``."""

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        COLLECTORS[name] = Collector(name, tuple(sections), func, timeout)
        return func

    return register


def probe(
    name: str, section: str, timeout: float, wanted: Callable[[CollectContext], bool], *, overrides_files: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare an active probe. It returns ``{section: value, "unavailable": {...}}``."""

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        PROBES[name] = Probe(name, section, func, wanted, timeout, overrides_files)
        return func

    return register


def _load_modules(provided: Iterable[str] = ()) -> None:
    """Import the collector modules, all but those whose every section is in ``provided``
    (their collectors and probes would be skipped for it anyway)."""
    given = set(provided)
    # a missing collector is an install error, not sections silently left uncollected
    for mod, sections in COLLECTOR_MODULES.items():
        if sections is None or not set(sections) <= given:
            importlib.import_module(f"{__name__}.{mod}")


def run_parallel(
    jobs: Mapping[str, tuple[Callable[[], Any], float | None]],
) -> tuple[dict[str, Any], dict[str, Exception]]:
    """Run each job in a daemon thread and wait for it until its own timeout (None: until
    it ends): (results, exceptions) by name. A job in neither timed out; its thread is
    abandoned (daemon threads do not block exit)."""
    results: dict[str, Any] = {}
    errors: dict[str, Exception] = {}

    def work(name: str, fn: Callable[[], Any]) -> None:
        try:
            results[name] = fn()
        except Exception as exc:  # noqa: BLE001 - one failing job must not lose the others
            errors[name] = exc

    started = time.monotonic()
    threads = []
    for name, (fn, timeout) in jobs.items():
        t = threading.Thread(target=work, args=(name, fn), name=f"flightcheck-{name}", daemon=True)
        t.start()
        threads.append((t, timeout))
    for t, timeout in threads:
        t.join(None if timeout is None else max(0.0, started + timeout - time.monotonic()))
    return results, errors


def _run_bounded(jobs: list[tuple[str, tuple[str, ...], float, Callable[[], dict[str, Any]]]]) -> dict[str, Any]:
    """Run collectors concurrently; one past its timeout, or crashed, leaves its sections
    null with the reason."""
    results, errors = run_parallel({name: (fn, timeout) for name, _sections, timeout, fn in jobs})
    doc: dict[str, Any] = {"unavailable": {}}
    for name, sections, timeout, _fn in jobs:
        if name in results:
            part = results[name]
            doc["unavailable"].update(part.pop("unavailable", None) or {})
            for s in sections:
                doc[s] = part.get(s)
            continue
        exc = errors.get(name)
        why = (
            f"collector {name} crashed: {type(exc).__name__}: {exc}"
            if exc
            else f"collector {name} timed out after {timeout:g}s"
        )
        for s in sections:
            doc[s] = None
            doc["unavailable"][s] = why
    return doc


def context_for(
    intent: Intent | None = None,
    *,
    env: Mapping[str, str] | None = None,
    python: str | None = None,
    probes: Iterable[str] = (),
) -> CollectContext:
    """Build the collection context: the engine's environment and interpreter."""
    from flightcheck._collect.engine import engine_python

    intent = intent or Intent()
    environ = dict(os.environ if env is None else env)
    return CollectContext(intent, environ, engine_python(intent, environ, python), set(probes))


def collect(
    intent: Intent | None = None,
    facts_files: Iterable[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    python: str | None = None,
    probes: Iterable[str] = (),
    facts_docs: Iterable[dict[str, Any]] = (),
    live_env: bool = False,
) -> Facts:
    """Collect this host's facts, with ``facts_files`` (and ``facts_docs``) laid over them.

    Sections a file provides are not collected live. Active probes run when ``intent.deep``
    is set or when named in ``probes`` (``"multicast"``, ``"compile_smoke"``).

    ``live_env``: ``env`` is the environment the engine will run with (``run``, the vLLM
    plugin: flightcheck runs inside or just before the engine), so its ``env`` and
    ``visible_devices`` sections are collected from it and laid over the files' (a
    snapshot's recorded environment, ``HF_HUB_OFFLINE=1`` of another shell, is for
    judging a node from elsewhere: ``check --facts``).

    Raises:
        UsageError: a facts file is unreadable or invalid.
    """
    docs = [load_file(f) for f in facts_files] + list(facts_docs)
    provided: set[str] = set().union(*(sections_of(d) for d in docs)) if docs else set()
    env_sections = COLLECTOR_MODULES["env"] or ()
    if live_env:
        provided -= set(env_sections)
    cctx = context_for(intent, env=env, python=python or (intent.python if intent else None), probes=probes)
    _load_modules(provided)
    jobs: list[tuple[str, tuple[str, ...], float, Callable[[], dict[str, Any]]]] = []
    for c in COLLECTORS.values():
        if set(c.sections) <= provided:
            continue
        jobs.append((c.name, c.sections, c.timeout, partial(c.func, cctx)))
    live = _run_bounded(jobs) if jobs else {"unavailable": {}}
    live["collected_at"] = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    on_top = [{s: live.get(s) for s in env_sections}] if live_env else []
    merged = merge(live, *docs, *on_top)
    facts = from_dict(merged, "collected facts")
    wanted = [p for p in PROBES.values() if (p.overrides_files or p.section not in provided) and p.wanted(cctx)]
    if wanted:
        extra = _run_bounded([(p.name, (p.section,), p.timeout, partial(p.func, cctx, facts)) for p in wanted])
        merged = merge(merged, extra)
        facts = from_dict(merged, "collected facts")
    return facts


#: Facts files laid over a live collection, ``os.pathsep``-separated, as ``--facts`` (the vLLM
#: plugin and the Ray node task read it: neither has a command line of its own).
FACTS_ENV = "FLIGHTCHECK_FACTS"


def env_facts_files(env: Mapping[str, str]) -> list[str]:
    """The files ``FLIGHTCHECK_FACTS`` names (empty entries ignored)."""
    return [p for p in env.get(FACTS_ENV, "").split(os.pathsep) if p.strip()]
