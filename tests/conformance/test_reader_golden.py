"""The golden readings (tests/conformance/golden) are what the installed engines read today."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_golden_is_the_live_engine(engine: str, engine_python: str, conformance: Any, tmp_path: Path) -> None:
    script = conformance.REPO / "scripts" / "gen_reader_golden.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--python", engine_python, "--out", str(tmp_path), engine],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    live = [json.loads(x) for x in (tmp_path / f"{engine}.jsonl").read_text().splitlines()]
    committed = [
        json.loads(x)
        for x in (conformance.REPO / "tests/conformance/golden" / f"{engine}.jsonl").read_text().splitlines()
    ]
    assert len(live) == len(committed)
    for now, then in zip(live, committed, strict=True):
        assert now == then, (
            f"{then['cmd'][:200]}: the engine now reads it differently; rerun scripts/gen_reader_golden.py"
        )
