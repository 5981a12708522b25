"""Every error-severity check has a test of a launch the engine serves that it must not stop
(docs/what-stops-a-launch.md): a ``test_fcNNN_does_not_stop_...`` in tests/checks, or an
entry of a ``SCENARIOS`` table of a ``*_does_not_stop.py`` module."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flightcheck._checks import load_all
from flightcheck._checks.framework import REGISTRY
from flightcheck._vocabulary.results import ERROR

HERE = Path(__file__).parent
load_all()
ERROR_CODES = sorted(code for code, c in REGISTRY.items() if c.severity == ERROR)


def covered() -> set[str]:
    out: set[str] = set()
    for f in HERE.glob("test_*.py"):
        text = f.read_text()
        out |= {f"FC{n}" for n in re.findall(r"def test_fc(\d{3})_does_not_stop_", text)}
        if f.name.endswith("_does_not_stop.py") and "SCENARIOS" in text:
            table = text[text.index("SCENARIOS") :]
            out |= set(re.findall(r'^\s+"(FC\d{3})": \(', table, re.MULTILINE))
    return out


@pytest.mark.parametrize("code", ERROR_CODES)
def test_every_error_check_has_a_launch_it_must_not_stop(code: str) -> None:
    assert code in covered(), f"no test_{code.lower()}_does_not_stop_... for the error check {code}"
