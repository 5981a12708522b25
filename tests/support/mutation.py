"""Breaking checks on purpose, to prove the tests of launches that must not stop can fail.

With ``FLIGHTCHECK_TEST_BREAK=named`` in the environment, the autouse fixture of
tests/conftest.py replaces, for each test, the function of every check the test names
(``test_fc301_...``, ``test_fc118_fc123_...``, a parametrize id ``[FC301-...]``) with one that
raises. A test of a launch the check must not stop has to turn red then: the check answered
``check crashed: ...`` (status unknown), which stops nothing, and only the helpers' crash
assertion (support.evaluation.evaluated) notices. tests/checks/test_mutation.py runs the
suite that way and asserts every such test failed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec
import pytest

BREAK_ENV = "FLIGHTCHECK_TEST_BREAK"


class InjectedBug(Exception):
    """What a broken check raises."""


def codes_named(test_name: str) -> list[str]:
    """The check codes a test names: ``fcNNN`` in its function name, ``FCNNN`` in its id."""
    return sorted({f"FC{n}" for n in re.findall(r"(?i)(?<![a-z0-9])fc(\d{3})(?!\d)", test_name)})


def raising(code: str) -> Any:
    """A check function that raises, as a bug in it would."""

    def broken(ctx: object) -> Iterator[object]:
        raise InjectedBug(f"injected into {code}")
        yield  # a generator, like every check

    return broken


def break_checks(monkeypatch: pytest.MonkeyPatch, codes: Iterable[str]) -> list[str]:
    """Replace the functions of ``codes`` in the registry (undone by ``monkeypatch``);
    returns the codes that exist."""
    from flightcheck._checks import load_all
    from flightcheck._checks.framework import REGISTRY

    load_all()
    done = []
    for code in codes:
        chk = REGISTRY.get(code)
        if chk is not None:
            monkeypatch.setitem(REGISTRY, code, msgspec.structs.replace(chk, func=raising(code)))
            done.append(code)
    return done
