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


# ---- secret-looking values, whatever flag carries them ---------------------------------

HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"  # a user access token's shape (hf_ + 34)
SK = "sk-proj-" + "Zz9" * 10
BEARER = "eyJhbGciOiJIUzI1NiJ9.payload.sig"
PASSWORD = "p4ssw0rd-not-for-you"
BY_VALUE = (
    "vllm",
    "serve",
    "/models/m",
    "--served-model-name",
    HF,
    f"--otlp-traces-endpoint=https://svc:{PASSWORD}@collector:4317",
    "--header",
    f"Authorization: Bearer {BEARER}",
    "--served-model-name",
    SK,
    "-tp",
    "8",
)
SECRETS = (HF, SK, BEARER, PASSWORD)


@pytest.mark.parametrize("fmt", ["json", "text", "junit", "prometheus"])
def test_no_report_format_holds_a_secret_value_under_an_innocent_flag(fmt: str, tmp_path: Path) -> None:
    out = tmp_path / "report"
    _rc, stdout, err = cli_in_process("check", "--example", "b300", "--format", fmt, "-o", str(out), "--", *BY_VALUE)
    text = out.read_text()
    for secret in SECRETS:
        assert secret not in text + stdout + err, (fmt, secret)
    if fmt == "json":
        doc = json.loads(text)
        flags = doc["intent"]["engine_flags"]
        # the secret part only: what the flag was and where the URL goes stay legible
        assert "--otlp-traces-endpoint=https://svc:<redacted>@collector:4317" in flags, flags
        assert any(f.startswith("--served-model-name") and REDACTED in f for f in flags), flags
        said = json.dumps(doc["intent"].get("refused", []) + doc["intent"].get("unparsed", []))
        assert "Authorization: Bearer <redacted>" in said, said


def tiny_model(tmp_path: Path) -> str:
    from support.ckptgen import load_config, write_checkpoint

    return str(write_checkpoint(tmp_path / "m", load_config("tiny-llama"), shards=1, dense=True))


def test_a_dry_run_prints_no_secret_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    argv = [t for t in BY_VALUE if t not in ("--header", f"Authorization: Bearer {BEARER}", "/models/m")]
    rc, out, err = cli_in_process(
        "run", "--example", "b300-multicast-401", "--dry-run", "--", *argv[:2], tiny_model(tmp_path), *argv[2:]
    )
    assert rc == 0, err
    for secret in SECRETS:
        assert secret not in out + err, secret
    assert f"--served-model-name '{REDACTED}'" in out
    assert f"'--otlp-traces-endpoint=https://svc:{REDACTED}@collector:4317'" in out


def test_a_dry_runs_config_copy_holds_no_secret_value(tmp_path: Path) -> None:
    """The fallback edits the --config (drops enable-symm-mem): the copy the script writes
    shows no secret-looking value, whatever its key; the engine's own file is untouched."""
    from flightcheck import Intent
    from flightcheck._launch import parse_command
    from flightcheck._launch.guard import decide, shell_script
    from flightcheck._vocabulary.facts import Facts
    from flightcheck._vocabulary.plan import build_plan
    from flightcheck._vocabulary.report import Report, verdict_of
    from flightcheck._vocabulary.results import CheckResult, PlanStep, Severity, Status

    cfg = tmp_path / "sg.yaml"
    cfg.write_text(
        f"model-path: /models/q\nenable-symm-mem: true\nserved-model-name: {HF}\n"
        f"otlp-traces-endpoint: https://svc:{PASSWORD}@collector:4317\n"
    )
    step = PlanStep("drop_arg", "--enable-symm-mem", None, "NCCL symmetric memory uses NVLS", "FC304")
    results = [CheckResult("FC304", "name", Status.FAIL, Severity.WARNING, "host", "msg", "fix", {}, (step,))]
    plan = build_plan(results)
    verdict, code = verdict_of(results, plan, False)
    report = Report(verdict, code, Intent(), results, plan, Facts())
    d = decide(report, parse_command(["sglang", "serve", "--config", str(cfg), "--tp", "8"]), {})
    text = shell_script(d, {})
    for secret in (HF, PASSWORD):
        assert secret not in text, secret
    assert f"served-model-name: {REDACTED}" in text or f"served-model-name: '{REDACTED}'" in text, text
    assert f"https://svc:{REDACTED}@collector:4317" in text and "enable-symm-mem" not in text
    assert HF in cfg.read_text()  # the engine's own file is untouched


def test_which_values_are_secrets() -> None:
    from flightcheck._vocabulary.redaction import has_secret, redact_text

    cases = {
        HF: REDACTED,
        f"token={HF}": f"token={REDACTED}",
        SK: REDACTED,
        "sk-ant-api03-" + "x" * 30: REDACTED,
        "ghp_" + "a" * 36: REDACTED,
        "AKIAIOSFODNN7EXAMPLE": REDACTED,
        "Authorization: Bearer abc.def-ghi": f"Authorization: Bearer {REDACTED}",
        "authorization=Basic dXNlcjpwYXNz": f"authorization=Basic {REDACTED}",
        "Proxy-Authorization: s3cr3t": f"Proxy-Authorization: {REDACTED}",
        "curl -H 'Bearer abcdefghijkl'": f"curl -H 'Bearer {REDACTED}'",
        "https://user:pw@host/x": f"https://user:{REDACTED}@host/x",
        "s3://AKID:SECRETKEY@bucket/m": f"s3://AKID:{REDACTED}@bucket/m",
        "http://:pw@proxy:3128": f"http://:{REDACTED}@proxy:3128",
    }
    for text, want in cases.items():
        assert redact_text(text) == want, text
    for innocent in (
        "sk-learn",
        "/models/hf_cache/Qwen3",
        "hf-internal-testing/llama-tokenizer",
        "https://huggingface.co/Qwen/Qwen3-0.6B",
        "https://user@host/x",  # a user name is not a secret
        "git@github.com:org/repo",
        "Qwen/Qwen3-0.6B",
        "--max-num-batched-tokens=8192",
        "bearer",
        "",
    ):
        assert not has_secret(innocent), innocent
    assert redact_argv(["--header", "Authorization: Bearer abcdefghij"]) == [
        "--header",
        f"Authorization: Bearer {REDACTED}",
    ]
