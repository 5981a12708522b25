"""Bad input is one line on stderr and exit 2 (never a traceback, a hang, or exit 3):
devices, FIFOs, huge or deeply nested facts and configs, impossible flag values. An
engine --config the engine would refuse stops the launch (FC711)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from flightcheck._vocabulary import inputs
from support.cli import cli, cli_in_process
from support.evaluation import host_doc

BILLION_LAUGHS = "\n".join(
    ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    + [f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi", strict=False)]
)


def one_line_exit_2(*args: str) -> str:
    rc, _out, err = cli_in_process(*args)
    assert rc == 2, (rc, err)
    assert err.count("\n") == 1 and err.startswith("flightcheck: error: ") and "Traceback" not in err, err
    return err


@pytest.fixture
def quick_pipes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputs, "NO_WRITER_S", 0.2)


def test_facts_from_a_device_a_directory_a_fifo(tmp_path: Path, quick_pipes: None) -> None:
    t0 = time.monotonic()
    assert "not a regular file" in one_line_exit_2("check", "--example", "b300", "--facts", "/dev/zero")
    assert "is a directory" in one_line_exit_2("check", "--example", "b300", "--facts", str(tmp_path))
    fifo = tmp_path / "facts.json"
    os.mkfifo(fifo)
    assert "a FIFO with no writer" in one_line_exit_2("check", "--example", "b300", "--facts", str(fifo))
    assert time.monotonic() - t0 < 10


def test_facts_from_a_pipe_with_a_writer_still_work(tmp_path: Path) -> None:
    """`--facts <(ssh node cat facts.json)`: a pipe is read to its end."""
    proc = cli(
        "check",
        "--facts",
        "/dev/stdin",
        "--format",
        "json",
        env={"FLIGHTCHECK_NO_CACHE": "1"},
        input_text=json.dumps({"host": {**host_doc("b300")["host"], "hostname": "piped"}}),
    )
    assert proc.returncode in (0, 1, 3) and json.loads(proc.stdout)["host"] == "piped", proc.stderr


def test_a_facts_file_over_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flightcheck._vocabulary import facts

    monkeypatch.setattr(facts, "MAX_FACTS", 1 << 20)
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"schema": "flightcheck.facts/v1", "pad": "x" * (2 << 20)}))
    assert "over the 1 MiB" in one_line_exit_2("check", "--example", "b300", "--facts", str(big))


def test_deeply_nested_facts_and_config(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"host":' * 5000 + "1" + "}" * 5000)
    assert "nested too deeply" in one_line_exit_2("check", "--example", "b300", "--facts", str(deep))
    arrays = tmp_path / "arrays.json"
    arrays.write_text("[" * 100_000 + "]" * 100_000)
    assert "nested too deeply" in one_line_exit_2("check", "--example", "b300", "--facts", str(arrays))


def test_not_a_snapshot_and_negative_sizes(tmp_path: Path) -> None:
    stray = tmp_path / "package.json"
    stray.write_text(json.dumps({"name": "left-pad", "version": "1.3.0"}))
    err = one_line_exit_2("check", "--example", "b300", "--facts", str(stray))
    assert "not a flightcheck snapshot (no schema, unknown keys: name, version)" in err
    delta = tmp_path / "delta.json"  # a schema-less delta of known sections is still fine
    delta.write_text(json.dumps({"host": host_doc("b300")["host"]}))
    assert cli_in_process("check", "--example", "b300", "--facts", str(delta))[0] == 0
    negative = tmp_path / "neg.json"
    negative.write_text(json.dumps({"host": {**host_doc("b300")["host"], "shm_bytes": -4096}}))
    assert "host.shm_bytes: expected int >= 0" in one_line_exit_2(
        "check", "--example", "b300", "--facts", str(negative)
    )


def test_billion_laughs_and_deep_yaml_config_stop_the_launch_fast(tmp_path: Path) -> None:
    laughs = tmp_path / "laughs.yaml"
    laughs.write_text(BILLION_LAUGHS + "\n")
    t0 = time.monotonic()
    rc, out, _err = cli_in_process(
        "check", "--example", "b300", "--format", "json", "--", "vllm", "serve", "--config", str(laughs)
    )
    assert time.monotonic() - t0 < 5
    [fc711] = [c for c in json.loads(out)["checks"] if c["code"] == "FC711"]
    assert rc == 1 and fc711["status"] == "fail" and "more than 100,000 values" in fc711["message"]
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    rc, out, _err = cli_in_process(
        "check", "--example", "b300", "--format", "json", "--", "vllm", "serve", "--config", str(deep)
    )
    [fc711] = [c for c in json.loads(out)["checks"] if c["code"] == "FC711"]
    assert rc == 1 and "nested" in fc711["message"]


def test_run_with_a_missing_config_does_not_start_the_engine(tmp_path: Path) -> None:
    """It was a warning and the launch went on unchecked; the engine would refuse it."""
    marker = tmp_path / "started"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    engine = bin_dir / "vllm"
    engine.write_text(f"#!/bin/sh\ntouch {marker}\n")
    engine.chmod(0o755)
    proc = cli(
        "run",
        "--example",
        "b300",
        "--",
        "vllm",
        "serve",
        "--config",
        str(tmp_path / "missing.yaml"),
        env={"PATH": f"{bin_dir}:{os.environ['PATH']}"},
    )
    assert proc.returncode == 1 and not marker.exists()
    assert "FC711 engine-config-unreadable" in proc.stderr and "No such file or directory" in proc.stderr


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--reserve-gib", "-100"), "--reserve-gib -100.0: must be a finite number >= 0"),
        (("--reserve-gib", "nan"), "--reserve-gib nan: must be a finite number >= 0"),
        (("--reserve-gib", "inf"), "--reserve-gib inf: must be a finite number >= 0"),
        (("--gpu-memory-utilization", "nan"), "--gpu-memory-utilization must be in (0, 1]"),
        (("-q", "bogus"), "--quantization 'bogus': not a quantization vllm knows"),
        (("--model", ""), "--model: empty"),
        (("--bogus",), "error: unrecognized arguments: --bogus"),
    ],
)
def test_impossible_flag_values(flags: tuple[str, ...], says: str) -> None:
    err = one_line_exit_2("check", "--example", "b300", *flags)
    assert says in err and "flightcheck: flightcheck" not in err


def test_a_known_quantization_is_accepted() -> None:
    assert cli_in_process("check", "--example", "b300", "-q", "fp8")[0] == 0
    rc, _out, err = cli_in_process("check", "--example", "b300", "--engine", "sglang", "-q", "w8a8_fp8")
    assert rc == 1 and err == ""  # FC701 (no sglang in the example's interpreter), not a usage error


def test_a_relative_python_is_resolved_against_the_callers_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    monkeypatch.chdir(tmp_path)
    _rc, out, err = cli_in_process("check", "--example", "b300", "--python", "venv/bin/python", "--format", "json")
    assert json.loads(out)["intent"]["python"] == str(venv / "python"), err


def test_collect_help_documents_facts_and_deep() -> None:
    rc, out, _err = cli_in_process("collect", "--help")
    assert rc == 0
    assert "--facts FILE          snapshot laid over" in out and "--deep                also run the active" in out
