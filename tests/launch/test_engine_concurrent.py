"""``check -- <command>`` asks the engine in the background, concurrently with collection
(issue 10, item 2).

The engine's interpreter here is a fake ``python`` (a shell script) that answers as
``_collect/engine_reader.py`` would. It announces that it started, then waits for a release
file; the collection step (wrapped below) waits to see the engine started and only then
releases it. A pipeline that asked the engine first and collected afterwards would never
release it: the engine would time out and the reading would be the built-in one. Only the
order of events is asserted, never a duration.
"""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path

import pytest

import flightcheck._pipeline as pipeline
from flightcheck._cli.main import main

ANSWER = {
    "reader": "engine",
    "error": None,
    "error_stage": None,
    "model": "org/M",
    "tensor_parallel_size": 4,
    "data_parallel_size": 2,
    "max_model_len": 4096,
}


def fake_engine(tmp_path: Path, *, release: bool) -> Path:
    """A ``python`` that writes ``started``, waits for ``release`` (or forever), then answers."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "python"
    wait = f'while [ ! -e "{tmp_path}/release" ]; do sleep 0.05; done' if release else "sleep 600"
    exe.write_text(
        "#!/bin/sh\n"
        f'echo "$@" > "{tmp_path}/started"\n'
        f"{wait}\n"
        f'echo "{tmp_path}/answered" > "{tmp_path}/answered"\n'
        f"echo '{json.dumps(ANSWER)}'\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def run_check(tmp_path: Path, exe: Path, monkeypatch: pytest.MonkeyPatch, events: list[str]) -> dict:
    real_collect = pipeline.collect

    def collect(*args, **kwargs):
        for _ in range(1200):  # the engine child is started before collection ends
            if (tmp_path / "started").exists():
                break
            time.sleep(0.05)
        events.append("collect: engine started" if (tmp_path / "started").exists() else "collect: engine not started")
        events.append("collect: engine answered" if (tmp_path / "answered").exists() else "collect: engine pending")
        (tmp_path / "release").touch()
        return real_collect(*args, **kwargs)

    monkeypatch.setattr(pipeline, "collect", collect)
    out = tmp_path / "report.json"
    facts = Path(__file__).resolve().parents[2] / "src/flightcheck/_examples/b300.json"
    main(
        [
            "check",
            "--facts",
            str(facts),
            "--format",
            "json",
            "--output",
            str(out),
            "--",
            str(exe),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            "org/M",
            "-tp",
            "2",
        ]
    )
    return json.loads(out.read_text())


def test_the_engine_is_asked_while_the_facts_are_collected(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FLIGHTCHECK_ENGINE_READ_TIMEOUT", "120")
    events: list[str] = []
    report = run_check(tmp_path, fake_engine(tmp_path, release=True), monkeypatch, events)
    # first collection: the engine child was already running and had not answered yet;
    # the engine's layout (TP 4) differs from the built-in reading (TP 2), which the GPU-side
    # collectors depend on: collected once more, after the answer
    assert events == [
        "collect: engine started",
        "collect: engine pending",
        "collect: engine started",
        "collect: engine answered",
    ]
    intent = report["intent"]
    assert intent["reader"] == "engine"
    # the engine's answer, not the command's built-in reading (-tp 2), is what was evaluated
    assert (intent["tensor_parallel_size"], intent["data_parallel_size"], intent["max_model_len"]) == (4, 2, 4096)
    assert "engine_wait_s" in report["timings"]


def test_an_engine_slower_than_the_timeout_keeps_the_builtin_reading(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FLIGHTCHECK_ENGINE_READ_TIMEOUT", "2")
    events: list[str] = []
    report = run_check(tmp_path, fake_engine(tmp_path, release=False), monkeypatch, events)
    assert events[0] == "collect: engine started"
    intent = report["intent"]
    assert (intent["reader"], intent["tensor_parallel_size"]) == ("built-in", 2)
    assert not (tmp_path / "answered").exists()  # the verdict did not wait for the engine


def test_the_default_timeout_covers_the_engines_import() -> None:
    from flightcheck._launch.engine_ask import DEFAULT_TIMEOUT_S, _timeout

    assert DEFAULT_TIMEOUT_S >= 40  # vLLM 0.33's import took 13-36 s on a loaded node
    assert _timeout({"FLIGHTCHECK_ENGINE_READ_TIMEOUT": "7"}) == 7.0
    assert _timeout({"FLIGHTCHECK_ENGINE_READ_TIMEOUT": "soon"}) == DEFAULT_TIMEOUT_S
