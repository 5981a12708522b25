"""Fuzzing the command line in-process (hypothesis): facts files with sections replaced or
bent, and engine command lines made of real flags and odd values. Whatever comes in: no
traceback, an exit code in {0, 1, 2, 3}, 3 only with the verdict "unknown", and exit 2
with exactly one line on stderr."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.cli import cli_in_process
from support.evaluation import host_doc

BASE = host_doc("b300")
SECTIONS = sorted(k for k in BASE if k not in ("schema", "unavailable", "collected_at"))
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def bend(doc: Any, data: st.DataObject) -> Any:
    """``doc`` with one value somewhere inside replaced by a random one."""
    if isinstance(doc, dict) and doc and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(doc)))
        return {**doc, key: bend(doc[key], data)}
    if isinstance(doc, list) and doc and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(doc) - 1))
        return doc[:i] + [bend(doc[i], data)] + doc[i + 1 :]
    return data.draw(values)


def verdict_is_sound(rc: int, out: str, err: str) -> None:
    assert "Traceback" not in err and "internal error" not in err, err
    assert rc in (0, 1, 2, 3), (rc, err)
    if rc == 2:
        assert err.count("\n") == 1 and err.startswith("flightcheck: error: "), err
    else:
        report = json.loads(out)
        assert report["exit_code"] == rc
        assert (rc == 3) == (report["verdict"] == "unknown"), report["verdict"]


def run_with_facts(doc: Any, *extra: str) -> tuple[int, str, str]:
    fd, path = tempfile.mkstemp(suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
        return cli_in_process("check", "--facts", path, "--format", "json", *extra)
    finally:
        os.unlink(path)


@SETTINGS
@given(data=st.data())
def test_fuzz_facts_files(data: st.DataObject) -> None:
    doc = dict(BASE)
    for _ in range(data.draw(st.integers(1, 3))):
        section = data.draw(st.sampled_from(SECTIONS))
        doc[section] = bend(doc[section], data)
    if data.draw(st.booleans()):
        doc.pop("schema", None)
    rc, out, err = run_with_facts(doc, "-tp", str(data.draw(st.sampled_from([1, 2, 8]))))
    verdict_is_sound(rc, out, err)


FLAGS = [
    "-tp",
    "--tensor-parallel-size",
    "-pp",
    "-dp",
    "--max-model-len",
    "--kv-cache-dtype",
    "--gpu-memory-utilization",
    "--quantization",
    "--api-key",
    "--config",
    "--enable-expert-parallel",
    "--distributed-executor-backend",
    "--download-dir",
    "--revision",
    "--max_model_len",
    "--tp-size",
]
tokens = st.one_of(
    st.sampled_from(FLAGS),
    st.sampled_from(["8", "0", "-1", "auto", "128k", "1M", "nan", "fp8", "", "=", "--", "ray", "/dev/zero"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12),
)


@SETTINGS
@given(
    engine=st.sampled_from([["vllm", "serve"], ["python3", "-m", "sglang.launch_server"], ["sglang", "serve"]]),
    args=st.lists(tokens, max_size=10),
)
def test_fuzz_engine_command_lines(engine: list[str], args: list[str]) -> None:
    rc, out, err = run_with_facts(BASE, "--", *engine, *args)
    verdict_is_sound(rc, out, err)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The whole healthy node as a file, laid under a fuzzed one, so no run collects this host."""
    path = tmp_path_factory.mktemp("fuzz") / "healthy.json"
    path.write_text(json.dumps(BASE))
    return str(path)


@SETTINGS
@given(raw=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
def test_fuzz_facts_bytes(healthy: str, raw: bytes) -> None:
    """Whatever bytes the file holds: a verdict, or one line and exit 2."""
    fd, path = tempfile.mkstemp(suffix=".json")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        rc, out, err = cli_in_process("check", "--facts", healthy, "--facts", path, "--format", "json")
    finally:
        os.unlink(path)
    verdict_is_sound(rc, out, err)


run_tokens = st.one_of(
    tokens,
    st.sampled_from(["inf", "-inf", "1.0000001", "1e400", "--password", "--apikey", "--API-KEY", "plainsecret42"]),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    engine=st.sampled_from([["vllm", "serve"], ["python3", "-m", "sglang.launch_server"]]),
    args=st.lists(run_tokens, max_size=8),
    bent=st.data(),
)
def test_fuzz_run_with_bent_facts_and_command_lines(
    engine: list[str], args: list[str], bent: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``run --dry-run``: a facts file with one section bent and an odd engine command line.
    No traceback, an exit in {0, 1, 2, 3}, 3 only for an "unknown" verdict, exit 2 as one
    error line last, and no secret value in anything written."""
    doc = dict(BASE)
    if bent.draw(st.booleans()):
        section = bent.draw(st.sampled_from(SECTIONS))
        doc[section] = bend(doc[section], bent)
    d = tmp_path_factory.mktemp("fuzz-run")
    facts, out = d / "facts.json", d / "report.json"
    facts.write_text(json.dumps(doc))
    rc, stdout, err = cli_in_process(
        "run", "--facts", str(facts), "--dry-run", "--format", "json", "-o", str(out), "--", *engine, *args
    )
    assert "Traceback" not in err and "internal error" not in err, err
    assert rc in (0, 1, 2, 3), (rc, err)
    report = out.read_text() if out.exists() else ""
    where = [i for i, a in enumerate(args) if a == "plainsecret42"]
    if where and all(i and args[i - 1] in ("--password", "--apikey", "--API-KEY") for i in where):
        assert "plainsecret42" not in stdout + err + report  # only ever a secret flag's value
    if rc == 2:
        assert err.splitlines()[-1].startswith("flightcheck: error: "), err
        return
    verdict = json.loads(report)["verdict"]
    # run execs (here: would exec) what it cannot decide: an unknown verdict may be 0, but
    # 3 is only ever "unknown", and a launch it lets go is never "not-ready"
    assert rc != 3 or verdict == "unknown", (rc, verdict)
    assert rc != 0 or verdict != "not-ready", (rc, verdict)
