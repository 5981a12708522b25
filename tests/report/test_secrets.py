"""Secrets in the engine command (``--api-key``, ``--hf-token``, anything named like a
token, key, secret, password or credential) never reach a report or ``run --dry-run``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flightcheck._knowledge.engines import REDACTED, is_secret, redact_argv
from support.cli import cli_in_process

SECRET = "sk-THE-SECRET-1234"
COMMAND = (
    "vllm",
    "serve",
    "/models/m",
    "--api-key",
    SECRET,
    f"--hf_token={SECRET}",
    "--tokenizer",
    "/models/tok",
    "-tp",
    "8",
)


@pytest.mark.parametrize("fmt", ["json", "text", "junit", "prometheus"])
def test_no_report_format_holds_the_secret(fmt: str, tmp_path: Path) -> None:
    out = tmp_path / "report"
    _rc, stdout, err = cli_in_process("check", "--example", "b300", "--format", fmt, "-o", str(out), "--", *COMMAND)
    text = out.read_text()
    assert SECRET not in text + stdout + err
    if fmt == "json":
        flags = json.loads(text)["intent"]["engine_flags"]
        assert "--api-key=<redacted>" in flags and "--hf-token=<redacted>" in flags
        assert "--tokenizer=/models/tok" in flags  # a tokenizer is not a token


def test_a_dry_run_prints_no_secret() -> None:
    rc, out, err = cli_in_process(
        "run", "--example", "b300-multicast-401", "--dry-run", "--", *COMMAND[:2], *COMMAND[3:]
    )
    assert rc == 0, err
    assert SECRET not in out + err
    assert f"--api-key '{REDACTED}' '--hf_token={REDACTED}' --tokenizer /models/tok" in out


def test_which_flags_are_secrets() -> None:
    for flag in ("--api-key", "--hf-token", "--hf_token", "--ssl-keyfile-password", "--db-credentials", "secret"):
        assert is_secret(flag), flag
    for flag in ("--tokenizer", "--max-num-batched-tokens", "--kv-cache-dtype", "--keyfile-path", "--monkey"):
        assert not is_secret(flag), flag
    assert redact_argv(["x", "--api-key", "--other"]) == ["x", "--api-key", "--other"]  # no value to hide
