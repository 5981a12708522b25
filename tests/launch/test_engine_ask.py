"""Asking the engine for its reading, and falling back to the built-in reader."""

from __future__ import annotations

import os
import sys

from flightcheck._launch import parse_command
from flightcheck._launch.engine_ask import apply_engine_reading, ask_engine


def test_an_interpreter_without_the_engine_keeps_the_builtin_reading() -> None:
    cmd = parse_command([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "M", "-tp", "2"])
    assert cmd.intent.python
    assert ask_engine(cmd, dict(os.environ)) is False
    assert (cmd.intent.reader, cmd.intent.tensor_parallel_size) == ("built-in", 2)


def test_asking_can_be_turned_off() -> None:
    cmd = parse_command([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "M"])
    assert ask_engine(cmd, {**os.environ, "FLIGHTCHECK_ENGINE_READ": "0"}) is False


def test_the_engine_answer_replaces_the_builtin_reading() -> None:
    cmd = parse_command(["sglang", "serve", "M", "--tp", "8"], env={"PATH": "/nonexistent"})
    doc = {
        "reader": "engine",
        "error": None,
        "model": "M",
        "tensor_parallel_size": 8,
        "data_parallel_size": 8,
        "expert_parallel_size": 1,
        "max_model_len": 1000000,
        "kv_cache_dtype": "bf16",
        "hf_overrides": "{}",
        "engine_fields": {"enable_dp_attention": True, "attn_dp_size": 1, "moe_a2a_backend": "deepep"},
    }
    apply_engine_reading(cmd, doc)
    it = cmd.intent
    assert (it.reader, it.max_model_len, it.kv_cache_dtype, it.hf_overrides) == ("engine", 10**6, "bfloat16", None)
    assert (it.data_parallel_size, it.enable_expert_parallel, it.world_size) == (1, True, 8)


def test_the_engine_reads_the_executor_backend() -> None:
    """The engine's reading of --distributed-executor-backend is the one kept (here from a
    --config file the built-in reader could not open), and a backend the engine leaves unset
    stays unset (vLLM picks it when it builds the config); a reader that does not report it
    leaves the built-in reading."""
    cmd = parse_command(["vllm", "serve", "M", "--config", "/nonexistent.yaml"], env={"PATH": "/nonexistent"})
    assert cmd.intent.distributed_executor_backend is None
    apply_engine_reading(
        cmd,
        {"reader": "engine", "error": None, "model": "M", "engine_fields": {"distributed_executor_backend": "ray"}},
    )
    assert (cmd.intent.reader, cmd.intent.distributed_executor_backend) == ("engine", "ray")
    cmd = parse_command(["vllm", "serve", "M", "--distributed-exec", "mp"], env={"PATH": "/nonexistent"})
    assert cmd.intent.distributed_executor_backend == "mp"
    apply_engine_reading(cmd, {"reader": "engine", "error": None, "model": "M", "engine_fields": {}})
    assert cmd.intent.distributed_executor_backend == "mp"  # not reported: the built-in reading stays
    fields = {"distributed_executor_backend": None}
    apply_engine_reading(cmd, {"reader": "engine", "error": None, "model": "M", "engine_fields": fields})
    assert cmd.intent.distributed_executor_backend is None


def test_an_engine_refusal_is_kept_with_the_builtin_fields() -> None:
    cmd = parse_command(["vllm", "serve", "M", "-tp", "4", "--new-flag"], env={"PATH": "/nonexistent"})
    apply_engine_reading(cmd, {"reader": "engine", "error": "unrecognized arguments: --new-flag"})
    assert cmd.intent.refused == ["unrecognized arguments: --new-flag"]
    assert (cmd.intent.reader, cmd.intent.tensor_parallel_size) == ("engine", 4)


def test_engine_reader_batch_answers_every_line_in_order() -> None:
    import json
    import subprocess

    from flightcheck._launch.engine_ask import reader_command

    lines = ['["vllm", "serve", "A"]', "not json", '["vllm", "serve", "B"]']
    proc = subprocess.run(
        reader_command(sys.executable, "vllm", "--batch", "--timeout", "30"),
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    docs = [json.loads(x) for x in proc.stdout.splitlines()]
    assert len(docs) == 3
    assert docs[0]["engine_argv"] == ["A"] and docs[2]["engine_argv"] == ["B"]
    assert docs[1]["error_stage"] == "usage"
    # this interpreter has no vLLM: an import error, which run/check treat as "not asked"
    assert docs[0]["error_stage"] == "import"


def test_python_chooses_whose_parser_is_asked(tmp_path: os.PathLike[str]) -> None:
    """``check --python PY -- vllm serve ...``: the engine reader child runs under PY (the
    engine's interpreter the user named), not the one behind ``vllm`` on PATH."""
    import json
    from pathlib import Path

    from support.cli import cli_in_process

    marker = Path(tmp_path) / "asked"
    fake = Path(tmp_path) / "python3"
    answer = {"reader": "engine", "error": None, "model": "M", "tensor_parallel_size": 4}
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {marker}\necho '{json.dumps(answer)}'\n")
    fake.chmod(0o755)
    for command in ("check", "run"):
        marker.unlink(missing_ok=True)
        extra = ["--dry-run"] if command == "run" else []
        rc, out, err = cli_in_process(
            command, "--example", "b300", "--python", str(fake), "--format", "json", *extra, "--", "vllm", "serve", "M"
        )
        assert marker.is_file(), (command, rc, err)
        asked = marker.read_text()
        assert "engine_reader.py --spec" in asked and '{"engine":"vllm",' in asked
        if command == "check":
            doc = json.loads(out)
            assert (doc["intent"]["reader"], doc["intent"]["tensor_parallel_size"]) == ("engine", 4)
