"""The public API is exactly ``__all__``, every name resolves, and importing the package is cheap."""

from __future__ import annotations

import subprocess
import sys

import flightcheck


def test_every_exported_name_resolves_and_private_modules_stay_private():
    for name in flightcheck.__all__:
        assert getattr(flightcheck, name) is not None, name
    assert set(flightcheck.__all__) <= set(dir(flightcheck))
    public_modules = [
        n
        for n in dir(flightcheck)
        if not n.startswith("_")
        and n not in flightcheck.__all__
        and n not in ("annotations", "importlib", "TYPE_CHECKING", "Any")
    ]
    assert public_modules == [], public_modules


def test_collect_evaluate_round_trip_through_the_public_api():
    facts = flightcheck.Facts()
    report = flightcheck.evaluate(facts, flightcheck.Intent(tensor_parallel_size=1))
    assert isinstance(report, flightcheck.Report)
    assert report.exit_code in (0, 1, 3) and report.checks
    assert all(isinstance(r, flightcheck.CheckResult) for r in report.checks)


def test_importing_the_package_loads_neither_the_catalogue_nor_msgspec():
    code = "import sys, flightcheck; print(any(m.startswith(('msgspec', 'flightcheck._checks')) for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
