"""The engine's declared pins as flightcheck collects them, against the installed vLLM."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.conformance


def test_collected_pins_are_vllms_metadata_and_fc710_passes_in_its_own_venv(engine_python: str) -> None:

    out = subprocess.run(
        [sys.executable, "-m", "flightcheck", "check", "--python", engine_python, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    report = json.loads(out.stdout)
    (fc710,) = [c for c in report["checks"] if c["code"] == "FC710"]
    assert fc710["status"] == "pass", fc710
    # what vLLM 0.33.0's METADATA says, asked of the venv itself
    truth = subprocess.run(
        [engine_python, "-c", "import importlib.metadata as m, json; print(json.dumps(m.requires('vllm')))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    requires = json.loads(truth.stdout)
    assert any(r.replace(" ", "").startswith("transformers") for r in requires)
    collected = subprocess.run(
        [sys.executable, "-m", "flightcheck", "collect", "--python", engine_python],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    pins = json.loads(collected.stdout)["python"]["engine_pins"]
    assert pins["torch"].startswith("==") and "transformers" in pins
