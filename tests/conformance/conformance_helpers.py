"""Helpers of the conformance tests (see conftest.py): where things are, running the reader."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
READER = REPO / "src" / "flightcheck" / "_collect" / "engine_reader.py"
GEN = REPO / "scripts" / "gen_engine_tables.py"
ENV_SCRIPT = REPO / "scripts" / "conformance_env.sh"
DATA = REPO / "src" / "flightcheck" / "_knowledge" / "data"

#: Per reading; the reader's own watchdog gets this, the test harness a little more.
READ_TIMEOUT_S = 240.0


def pinned_versions() -> dict[str, str]:
    """The engine versions scripts/conformance_env.sh installs (its VLLM_VERSION=...)."""
    text = ENV_SCRIPT.read_text()
    out = {}
    for engine in ("vllm", "sglang"):
        m = re.search(rf"^{engine.upper()}_VERSION=(\S+)$", text, re.MULTILINE)
        assert m, f"{ENV_SCRIPT} does not set {engine.upper()}_VERSION"
        out[engine] = m.group(1)
    return out


def candidates() -> list[Path]:
    env = os.environ.get("FLIGHTCHECK_CONFORMANCE_PYTHON")
    if env:
        return [Path(env)]
    return [REPO / ".conformance-venv" / "bin" / "python", Path("/work/.conformance-venv/bin/python")]


def child_env() -> dict[str, str]:
    """The caller's environment minus anything that would steer the engines."""
    env = {k: v for k, v in os.environ.items()
           if not re.match(r"^(VLLM_|SGLANG_|HF_|TRANSFORMERS_|PYTHONPATH$)", k)}
    env["VLLM_TARGET_DEVICE"] = "cpu"
    return env


def run_reader(python: str, engine: str, argv: list[str], *, timeout: float = READ_TIMEOUT_S,
               cwd: Path | None = None) -> dict[str, Any]:
    """One reader child; its single stdout line as a dict, plus ``_rc`` and ``_wall_s``."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [python, str(READER), engine, "--timeout", str(timeout), "--", *argv],
        capture_output=True, text=True, env=child_env(), cwd=str(cwd or REPO),
        timeout=timeout + 60,
    )
    wall = time.monotonic() - t0
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"stdout must be one JSON line, got {proc.stdout!r}\nstderr: {proc.stderr[-2000:]}"
    doc = json.loads(lines[0])
    doc["_rc"], doc["_wall_s"] = proc.returncode, wall
    return doc


def read_many(python: str, cases: dict[str, tuple[str, list[str]]], cwd: Path) -> dict[str, dict]:
    """Run several readings side by side (each engine import takes seconds)."""
    workers = max(2, min(len(cases), os.cpu_count() or 2, 4))  # each child holds ~1 GiB
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futs = {name: pool.submit(run_reader, python, eng, argv, cwd=cwd)
                for name, (eng, argv) in cases.items()}
        return {name: fut.result() for name, fut in futs.items()}
