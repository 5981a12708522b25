"""A secret on the command line never reaches a report through the engine's refusal text:
argparse's "unrecognized arguments: --password S" names the flag and its value, and FC703,
``intent.refused`` and every format echo it (docs/security.md "Secrets")."""

from __future__ import annotations

import pytest

from flightcheck._vocabulary.redaction import redact_text
from support.cli import cli_in_process

SECRET = "plainsecret42"
FLAGS = ["--password", "--apikey", "--auth-token", "--access-token", "--secret-key", "--API-KEY"]


@pytest.mark.parametrize("flag", FLAGS)
@pytest.mark.parametrize("fmt", ["text", "json", "junit", "prometheus"])
def test_a_refused_secret_flag_is_redacted_in_every_format(flag: str, fmt: str, tiny_model: str) -> None:
    for spelling in ([flag, SECRET], [f"{flag}={SECRET}"]):
        rc, out, err = cli_in_process(
            "check", "--example", "b300", "--format", fmt, "--", "vllm", "serve", tiny_model, *spelling
        )
        assert rc == 1, err  # FC703: vLLM refuses the unknown flag
        assert SECRET not in out + err, (spelling, fmt)
        assert ("&lt;redacted&gt;" if fmt == "junit" else "<redacted>") in out or fmt == "prometheus"


@pytest.mark.parametrize("flag", FLAGS)
def test_run_dry_run_redacts_the_refusal(flag: str, tiny_model: str) -> None:
    rc, out, err = cli_in_process(
        "run", "--example", "b300", "--dry-run", "-v", "--", "vllm", "serve", tiny_model, flag, SECRET
    )
    assert rc == 1 and "FC703" in err, err
    assert SECRET not in out + err


def test_run_dry_run_redacts_an_accepted_secret_in_its_script(tiny_model: str) -> None:
    rc, out, err = cli_in_process(
        "run", "--example", "b300", "--dry-run", "--", "vllm", "serve", tiny_model, "--api-key", SECRET
    )
    assert rc == 0, err
    assert SECRET not in out + err and "--api-key '<redacted>'" in out


def test_our_own_usage_error_redacts_too() -> None:
    rc, _out, err = cli_in_process("check", "--example", "b300", f"--password={SECRET}")
    assert rc == 2 and err.count("\n") == 1 and SECRET not in err and "--password=<redacted>" in err, err


def test_message_text_keeps_what_is_not_a_secret() -> None:
    assert redact_text("unrecognized arguments: --password s1 --port 8000") == (
        "unrecognized arguments: --password <redacted> --port 8000"
    )
    assert redact_text("argument --api-key: expected one argument") == "argument --api-key: expected one argument"
    assert redact_text("--tokenizer /m --max-num-batched-tokens 8") == "--tokenizer /m --max-num-batched-tokens 8"
    assert redact_text("--hf-token=abc --secret-key -x") == "--hf-token=<redacted> --secret-key -x"
