"""``--gpu-memory-utilization`` values vLLM refuses at startup are FC703, never dropped
silently for the default (vllm/config/cache.py 0.11.1 - 0.33.0: ``Field(gt=0, le=1)``)."""

from __future__ import annotations

import json

import pytest

from flightcheck._knowledge import vllm
from flightcheck._launch import parse_command
from flightcheck._launch.engine_ask import apply_engine_reading
from support.cli import cli_in_process

REFUSED = ["nan", "inf", "-1", "0", "1.0000001", "1e400"]


@pytest.mark.parametrize("value", REFUSED)
def test_the_builtin_reader_refuses_what_vllm_refuses(value: str) -> None:
    cmd = parse_command(["vllm", "serve", "M", "--gpu-memory-utilization", value], env={"PATH": "/nonexistent"})
    assert cmd.intent.refused and "gpu_memory_utilization" in cmd.intent.refused[0], cmd.intent
    assert not any("gpu_memory_utilization" in u for u in cmd.intent.unparsed)
    assert cmd.intent.gpu_memory_utilization is None


@pytest.mark.parametrize("value", ["1", "0.5", "1e-9"])
def test_values_in_range_are_read(value: str) -> None:
    cmd = parse_command(["vllm", "serve", "M", "--gpu-memory-utilization", value], env={"PATH": "/nonexistent"})
    assert not cmd.intent.refused and cmd.intent.gpu_memory_utilization == float(value)


def test_the_engine_reading_is_judged_by_its_release() -> None:
    """The engine's parser takes the float (CacheConfig validates later); by its release,
    what it refuses at startup: 0.11.1 - 0.33.0 (0, 1]; 0.6.0 - 0.11.0 only > 1."""
    for version, value, refused in [
        ("0.33.0", float("nan"), True),
        ("0.33.0", 0.0, True),
        ("0.33.0", 0.9, False),
        ("0.6.0", 0.0, False),
        ("0.6.0", float("nan"), False),
        ("0.6.0", 1.5, True),
        (None, float("inf"), True),
    ]:
        cmd = parse_command(["vllm", "serve", "M"], env={"PATH": "/nonexistent"})
        doc = {"reader": "engine", "error": None, "model": "M", "gpu_memory_utilization": value}
        if version:
            doc["engine_version"] = version
        apply_engine_reading(cmd, doc)
        assert bool(cmd.intent.refused) is refused, (version, value, cmd.intent)
        assert cmd.intent.reader == "engine"


def test_the_rule_is_gated_by_release() -> None:
    assert vllm.utilization_refusal(0.0, (0, 33, 0)) and not vllm.utilization_refusal(0.0, (0, 6, 0))
    # the pydantic Field(gt=0, le=1) arrives in 0.11.1 (0.11.0 checks > 1.0 only)
    assert vllm.utilization_refusal(0.0, (0, 11, 1)) and vllm.utilization_refusal(float("nan"), (0, 20, 0))
    assert not vllm.utilization_refusal(0.0, (0, 11, 0)) and vllm.utilization_refusal(1.5, (0, 11, 0))
    assert vllm.utilization_refusal(2.0, (0, 6, 0)) and not vllm.utilization_refusal(1.0, (0, 33, 0))


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "1.0000001"])
@pytest.mark.parametrize("command", ["check", "run"])
def test_a_refused_utilization_is_fc703(command: str, value: str, tiny_model: str) -> None:
    extra = ["--dry-run"] if command == "run" else []
    rc, out, err = cli_in_process(
        command,
        "--example",
        "b300",
        "--format",
        "json",
        *extra,
        "--",
        "vllm",
        "serve",
        tiny_model,
        "--gpu-memory-utilization",
        value,
    )
    assert rc == 1, err
    assert "internal error" not in err
    report = json.loads(out if command == "check" else err.split("\nflightcheck:")[0])
    fc703 = next(c for c in report["checks"] if c["code"] == "FC703")
    assert fc703["status"] == "fail" and "gpu_memory_utilization" in fc703["message"], fc703
