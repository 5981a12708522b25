"""Where flightcheck runs inside or just before the engine (``run``, the vLLM plugin), the
live environment is the engine's: a facts file's recorded ``env`` (the examples record
``HF_HUB_OFFLINE=1``) must not replace it. ``check --facts`` judges a node from elsewhere:
there the recorded one stands."""

from __future__ import annotations

import json

import pytest

from support.cli import cli_in_process

UNCACHED = "Qwen/Qwen3-0.6B"  # a repo id in no cache here: the engine downloads it online


def _codes(report: dict, status: str) -> set[str]:
    return {c["code"] for c in report["checks"] if c["status"] == status and c["severity"] == "error"}


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "VLLM_ALLOW_LONG_MAX_MODEL_LEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    monkeypatch.setenv("FLIGHTCHECK_ENGINE_READ", "0")


def test_run_online_is_not_stopped_by_a_recorded_offline_env(online: None) -> None:
    argv = ["run", "--example", "b300", "--dry-run", "--format", "json", "--", "vllm", "serve", UNCACHED]
    rc, _out, err = cli_in_process(*argv)
    assert rc == 0, err
    report = json.loads(err.split("\nflightcheck:")[0])
    assert "FC501" not in _codes(report, "fail")


def test_check_with_a_recorded_env_judges_that_env(online: None) -> None:
    rc, out, _err = cli_in_process("check", "--example", "b300", "--format", "json", "--", "vllm", "serve", UNCACHED)
    assert rc == 1 and "FC501" in _codes(json.loads(out), "fail")


def test_run_honours_the_live_long_max_model_len_switch(online: None, monkeypatch, tiny_model: str) -> None:
    argv = ["run", "--example", "b300", "--dry-run", "--format", "json", "--", "vllm", "serve", tiny_model]
    rc, _out, err = cli_in_process(*argv, "--max-model-len", "4096")  # over the model's 2048
    assert rc == 1 and "FC405" in err, err
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    rc, _out, err = cli_in_process(*argv, "--max-model-len", "4096")
    assert rc == 0, err
    report = json.loads(err.split("\nflightcheck:")[0])
    assert "FC405" not in _codes(report, "fail")


def test_the_offline_fc501_says_why_and_a_fix_that_works_in_that_shell(online: None) -> None:
    rc, out, _err = cli_in_process("check", "--example", "b300", "--format", "json", "--", "vllm", "serve", UNCACHED)
    fc501 = next(c for c in json.loads(out)["checks"] if c["code"] == "FC501")
    assert rc == 1 and "HF_HUB_OFFLINE=1" in fc501["message"], fc501
    assert fc501["fix"].startswith(f"HF_HUB_OFFLINE=0 hf download {UNCACHED}")
    assert "unset HF_HUB_OFFLINE" in fc501["fix"]
