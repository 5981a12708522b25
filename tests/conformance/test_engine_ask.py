"""``run`` / ``check -- <command>`` ask the installed engine for its reading."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flightcheck._launch import parse_command
from flightcheck._launch.engine_ask import ask_engine


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["-m", "vllm.entrypoints.openai.api_server", "--model", "M", "-tp", "2", "-pcp", "2"], {"world_size": 4}),
        (["-m", "sglang.launch_server", "--model-path", "M", "--tp", "4", "--dp", "2"], {"world_size": 8}),
        (["-m", "vllm.entrypoints.openai.api_server", "--model", "M", "--swap-space", "4"], {"refused": True}),
        (
            ["-m", "vllm.entrypoints.openai.api_server", "--model", "M", "-tp", "2", "--distributed-exec", "ray"],
            {"world_size": 2, "backend": "ray"},
        ),
    ],
)
def test_the_engine_reads_the_command(
    argv: list[str], expect: dict, engine_python: str, conformance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    env = {**conformance.child_env(), "FLIGHTCHECK_ENGINE_READ_TIMEOUT": "240"}
    cmd = parse_command([engine_python, *argv], env)
    assert ask_engine(cmd, env) is True
    assert cmd.intent.reader == "engine"
    if expect.get("refused"):
        assert cmd.intent.refused
    else:
        assert not cmd.intent.refused and cmd.intent.world_size == expect["world_size"]
    if "backend" in expect:  # vLLM's reading of --distributed-executor-backend (any spelling)
        assert cmd.intent.distributed_executor_backend == expect["backend"]
    assert os.environ.get("FLIGHTCHECK_DISABLE") is None  # only the child had the plugin off
