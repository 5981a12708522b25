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


def assert_silent(code: str, facts_obj, **intent: Any) -> None:
    """``code`` does not fail (pass, skip, or unknown)."""
    got = results(facts_obj, **intent).get(code, [])
    assert got, f"{code} was not evaluated"
    failing = [r for r in got if r.status.value == "fail"]
    assert not failing, f"{code} should not fail; got {[r.message for r in failing]}"


def counting_bug(calls: list) -> Callable[..., None]:
    """A stand-in that records each call and raises, as a bug would."""

    def boom(*a: object, **k: object) -> None:
        calls.append(1)
        raise ValueError("synthetic")

    return boom
