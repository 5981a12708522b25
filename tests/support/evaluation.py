"""Recorded facts and evaluation shortcuts.

Recorded hosts live in ``tests/fixtures/hosts``; the bundled examples of the package are
complete snapshots too.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from flightcheck import Intent, evaluate
from flightcheck._examples import load_example
from flightcheck._launch.intent_read import read_options
from flightcheck._vocabulary.facts import from_dict
from support import HOSTS

#: a multicast probe of 8 GPUs that failed at bind with CUDA error 401 (after a warm reboot)
PROBE_401 = {
    "ok": False,
    "stage": "bind",
    "cuda_error": 401,
    "cuda_error_name": "CUDA_ERROR_ILLEGAL_STATE",
    "devices": 8,
    "handle_type": "posix_fd",
    "duration_s": 0.4,
}


def host_doc(name: str = "b300") -> dict[str, Any]:
    """A recorded snapshot as a dict: a fixture under tests/fixtures/hosts, or a bundled example."""
    path = HOSTS / f"{name}.json"
    if path.exists():
        return json.loads(path.read_text())
    return copy.deepcopy(load_example(name)[0][0])


def facts(name: str = "b300", **sections: Any):
    """Facts of a recorded host with whole sections replaced (``toolchain={...}``)."""
    doc = host_doc(name)
    doc.update(sections)
    return from_dict(doc)


def results(facts_obj, **intent: Any) -> dict[str, list]:
    """code -> list of CheckResult for one evaluation."""
    report = evaluate(facts_obj, read_options(Intent(**intent)))
    out: dict[str, list] = {}
    for r in report.checks:
        out.setdefault(r.code, []).append(r)
    return out


def statuses(facts_obj, code: str, **intent: Any) -> set[str]:
    """The statuses ``code`` produced."""
    return {r.status.value for r in results(facts_obj, **intent).get(code, [])}


def assert_fires(code: str, facts_obj, **intent: Any):
    """``code`` fails; return its failing results for further assertions."""
    got = results(facts_obj, **intent).get(code, [])
    failing = [r for r in got if r.status.value == "fail"]
    assert failing, f"{code} should fail; got {[(r.status.value, r.message) for r in got]}"
    return failing


def crashes(got: list) -> list[str]:
    """The messages of the results that record a crash of the check: :func:`run_check` turns
    any exception but Skip and Missing into ``unknown`` with ``evidence["exception"]``."""
    return [r.message for r in got if "exception" in r.evidence or r.message.startswith("check crashed:")]


def evaluated(code: str, got: list) -> list:
    """``got`` (the results of ``code``), asserted to exist and not to record a crash.

    Every "stays silent" / "does not stop" helper goes through here: a check that crashed
    answers ``unknown``, which stops nothing, so without this a broken check passes every
    test of a launch it must not stop (tests/checks/test_mutation.py proves each helper
    turns red)."""
    assert got, f"{code} was not evaluated"
    bad = crashes(got)
    assert not bad, f"{code} crashed: {bad}"
    return got


def assert_silent(code: str, facts_obj, *, allow_unknown: bool = False, **intent: Any) -> list:
    """``code`` neither fails nor crashes: it passes or skips. ``allow_unknown=True`` where
    the test means a fact the check cannot decide on (a missing probe): ``unknown`` is then
    accepted, a crash still is not. Returns the results."""
    got = evaluated(code, results(facts_obj, **intent).get(code, []))
    failing = [r for r in got if r.status.value == "fail"]
    assert not failing, f"{code} should not fail; got {[r.message for r in failing]}"
    if not allow_unknown:
        undecided = [r.message for r in got if r.status.value == "unknown"]
        assert not undecided, f"{code} should decide (pass or skip); got unknown: {undecided}"
    return got


def counting_bug(calls: list) -> Callable[..., None]:
    """A stand-in that records each call and raises, as a bug would."""

    def boom(*a: object, **k: object) -> None:
        calls.append(1)
        raise ValueError("synthetic")

    return boom
