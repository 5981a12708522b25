"""Conformance tests: flightcheck's engine facts checked against the REAL engines.

They need the venv ``scripts/conformance_env.sh`` builds (vllm and sglang at the versions
that script pins). Where it is, in this order:

1. ``$FLIGHTCHECK_CONFORMANCE_PYTHON`` (an interpreter),
2. ``<repo>/.conformance-venv/bin/python``,
3. ``/work/.conformance-venv/bin/python``.

Without one, the tests that need it (fixture ``engine_python``) skip; the checks of the
committed data files still run. Engine children run offline (the reader sets
HF_HUB_OFFLINE) and never reach any network.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .conformance_helpers import candidates, pinned_versions


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "conformance: checks against the real engines in the conformance venv"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.conformance)


@pytest.fixture(scope="session")
def engine_python() -> str:
    """The conformance venv's interpreter, with the pinned engine versions installed."""
    want = pinned_versions()
    for cand in candidates():
        if not (cand.is_file() and os.access(cand, os.X_OK)):
            continue
        probe = subprocess.run(
            [str(cand), "-c",
             "import importlib.metadata as m, json; "
             "print(json.dumps({e: m.version(e) for e in ('vllm', 'sglang')}))"],
            capture_output=True, text=True, timeout=60,
        )
        if probe.returncode != 0:
            pytest.skip(f"conformance venv {cand} lacks vllm or sglang: run scripts/conformance_env.sh")
        have = json.loads(probe.stdout)
        if have != want:
            pytest.skip(f"conformance venv {cand} has {have}, the tests need {want}: "
                        "rerun scripts/conformance_env.sh")
        return str(cand)
    pytest.skip("no conformance venv (scripts/conformance_env.sh; or set FLIGHTCHECK_CONFORMANCE_PYTHON)")
