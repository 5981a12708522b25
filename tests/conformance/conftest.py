"""Conformance tests: flightcheck's engine facts checked against the REAL engines.

They need the venv ``scripts/conformance_env.sh`` builds (vllm and sglang at the versions
that script pins). Where it is, in this order:

1. ``$FLIGHTCHECK_CONFORMANCE_PYTHON`` (an interpreter),
2. ``<repo>/.conformance-venv/bin/python``,
3. ``/work/.conformance-venv/bin/python``.

Without one, the tests that need it (fixture ``engine_python``) skip, with the reason
``$FLIGHTCHECK_CONFORMANCE_UNAVAILABLE`` gives where .ci/run found too little disk for it;
the checks of the committed data files still run. Engine children run offline (the reader sets
HF_HUB_OFFLINE) and never reach any network.

The helpers are fixtures (``conformance``), so that no test module imports this file or
another module of the test tree.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

_HERE = Path(__file__).resolve().parent
#: Prints the installed engine versions without importing the engines.
PROBE = "import importlib.metadata as m, json; print(json.dumps({e: m.version(e) for e in ('vllm', 'sglang')}))"


class Conformance:
    """Where things are, and how to run the engine reader."""

    REPO = _HERE.parents[1]
    READER = REPO / "src" / "flightcheck" / "_collect" / "engine_reader.py"
    GEN = REPO / "scripts" / "gen_engine_tables.py"
    ENV_SCRIPT = REPO / "scripts" / "conformance_env.sh"
    DATA = REPO / "src" / "flightcheck" / "_knowledge" / "data"
    #: Per reading; the reader's own watchdog gets this, the harness a minute more.
    READ_TIMEOUT_S = 240.0

    def pinned_versions(self) -> dict[str, str]:
        """The engine versions scripts/conformance_env.sh installs (its VLLM_VERSION=...)."""
        text = self.ENV_SCRIPT.read_text()
        out = {}
        for engine in ("vllm", "sglang"):
            m = re.search(rf"^{engine.upper()}_VERSION=(\S+)$", text, re.MULTILINE)
            assert m, f"{self.ENV_SCRIPT} does not set {engine.upper()}_VERSION"
            out[engine] = m.group(1)
        return out

    def table(self, engine: str, kind: str = "args") -> dict[str, Any]:
        version = self.pinned_versions()[engine]
        return json.loads((self.DATA / f"{engine}_{version}_{kind}.json").read_text())

    def candidates(self) -> list[Path]:
        env = os.environ.get("FLIGHTCHECK_CONFORMANCE_PYTHON")
        if env:
            return [Path(env)]
        return [self.REPO / ".conformance-venv" / "bin" / "python", Path("/work/.conformance-venv/bin/python")]

    @staticmethod
    def child_env() -> dict[str, str]:
        """The caller's environment minus anything that would steer the engines."""
        env = {
            k: v for k, v in os.environ.items() if not re.match(r"^(VLLM_|SGLANG_|HF_|TRANSFORMERS_|PYTHONPATH$)", k)
        }
        env["VLLM_TARGET_DEVICE"] = "cpu"
        return env

    @staticmethod
    def reader_command(python: str, engine: str, *options: str) -> list[str]:
        """The reader child's command line: the engine's spec, then ``options``."""
        from flightcheck._launch.engine_ask import reader_command

        return reader_command(python, engine, *options)

    def run_reader(
        self, python: str, engine: str, argv: list[str], *, timeout: float | None = None, cwd: Path | None = None
    ) -> dict[str, Any]:
        """One reader child; its single stdout line as a dict, plus ``_rc`` and ``_wall_s``."""
        timeout = self.READ_TIMEOUT_S if timeout is None else timeout
        t0 = time.monotonic()
        proc = subprocess.run(
            self.reader_command(python, engine, "--timeout", str(timeout), "--", *argv),
            capture_output=True,
            text=True,
            check=False,
            env=self.child_env(),
            cwd=str(cwd or self.REPO),
            timeout=timeout + 60,
        )
        wall = time.monotonic() - t0
        lines = proc.stdout.splitlines()
        assert len(lines) == 1, f"stdout must be one JSON line, got {proc.stdout!r}\nstderr: {proc.stderr[-2000:]}"
        doc = json.loads(lines[0])
        doc["_rc"], doc["_wall_s"] = proc.returncode, wall
        return doc

    def probe(self, python: str, code: str, arg: Any, cwd: Path, *, timeout: float = 300) -> Any:
        """Run ``code`` in the engine's interpreter with ``json.dumps(arg)`` as its argument
        (the environment of :meth:`child_env`); its last stdout line, parsed as JSON."""
        run = subprocess.run(
            [python, "-c", code, json.dumps(arg)],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
            cwd=cwd,
            env=self.child_env(),
        )
        assert run.returncode == 0, run.stderr[-2000:]
        return json.loads(run.stdout.strip().splitlines()[-1])

    def read_many(self, python: str, cases: dict[str, tuple[str, list[str]]], cwd: Path) -> dict[str, dict]:
        """Several readings side by side (each engine import takes seconds, ~1 GiB each)."""
        workers = max(2, min(len(cases), os.cpu_count() or 2, 4))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futs = {
                name: pool.submit(self.run_reader, python, eng, argv, cwd=cwd) for name, (eng, argv) in cases.items()
            }
            return {name: fut.result() for name, fut in futs.items()}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "conformance: checks against the real engines in the conformance venv")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.conformance)


@pytest.fixture(scope="session")
def conformance() -> Conformance:
    return Conformance()


@pytest.fixture(scope="session")
def engine_python(conformance: Conformance) -> str:
    """The conformance venv's interpreter, with the pinned engine versions installed."""
    want = conformance.pinned_versions()
    for cand in conformance.candidates():
        if not (cand.is_file() and os.access(cand, os.X_OK)):
            continue
        probe = subprocess.run(
            [str(cand), "-c", PROBE],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if probe.returncode != 0:
            pytest.skip(f"conformance venv {cand} lacks vllm or sglang: run scripts/conformance_env.sh")
        have = json.loads(probe.stdout)
        if have != want:
            pytest.skip(f"conformance venv {cand} has {have}, the tests need {want}: rerun scripts/conformance_env.sh")
        return str(cand)
    # .ci/run sets this when scripts/conformance_env.sh found too little disk (exit 75).
    why = os.environ.get("FLIGHTCHECK_CONFORMANCE_UNAVAILABLE")
    if why:
        pytest.skip(f"no conformance venv: {why}")
    pytest.skip("no conformance venv (scripts/conformance_env.sh; or set FLIGHTCHECK_CONFORMANCE_PYTHON)")
