"""Applying a fallback plan to an engine command, and the stop / start decision.

These use hand-built check results, so they pin the launch logic itself; the end-to-end
tests in tests/launch/test_run.py use the real catalogue.
"""

from __future__ import annotations

import tempfile

import yaml

from flightcheck import Intent
from flightcheck._launch import parse_command
from flightcheck._launch.apply import apply_plan
from flightcheck._launch.guard import decide, shell_script
from flightcheck._vocabulary.facts import Facts
from flightcheck._vocabulary.plan import build_plan
from flightcheck._vocabulary.report import Report, verdict_of
from flightcheck._vocabulary.results import CheckResult, PlanStep, Severity, Status

MULTICAST_OFF = (
    PlanStep("env", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", "torch symmetric memory binds multicast"),
    PlanStep("env", "VLLM_ALLREDUCE_USE_SYMM_MEM", "0", "the symm-mem all-reduce uses multicast"),
)
SGLANG_OFF = (
    PlanStep("drop_arg", "--enable-symm-mem", None, "NCCL symmetric memory uses NVLS"),
    PlanStep("drop_arg", "--enable-nccl-nvls", None, "NVLS is multicast"),
    PlanStep("add_arg", "--flashinfer-allreduce-fusion-backend", "trtllm", "trtllm does not bind multicast"),
)


def result(
    code: str, status: Status, severity: Severity, plan=(), message: str = "msg", subject: str = "host"
) -> CheckResult:
    steps = tuple(PlanStep(s.kind, s.name, s.value, s.why, code) for s in plan)
    return CheckResult(code, f"name-{code}", status, severity, subject, message, "do this", {}, steps)


def report_of(results: list[CheckResult], intent: Intent | None = None, strict: bool = False) -> Report:
    plan = build_plan(results)
    verdict, code = verdict_of(results, plan, strict)
    return Report(verdict, code, intent or Intent(), results, plan, Facts(), strict=strict)


def test_env_steps_are_set_and_reported_with_reasons():
    cmd = parse_command(["vllm", "serve", "m", "-tp", "8"])
    rep = report_of([result("FC304", Status.FAIL, Severity.WARNING, MULTICAST_OFF)])
    launch = apply_plan(rep.plan, cmd, {"PATH": "/usr/bin", "VLLM_ALLREDUCE_USE_SYMM_MEM": "1"})
    assert launch.argv == cmd.argv
    assert launch.env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1" and launch.env["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "0"
    whats = [c.what for c in launch.changes]
    assert whats == ["set TORCH_SYMM_MEM_DISABLE_MULTICAST=1", "set VLLM_ALLREDUCE_USE_SYMM_MEM=0 (was 1)"]
    assert all(c.code == "FC304" and c.why for c in launch.changes)


def test_an_env_prefix_assignment_cannot_undo_the_fallback():
    cmd = parse_command(["env", "VLLM_ALLREDUCE_USE_SYMM_MEM=1", "vllm", "serve", "m"])
    rep = report_of([result("FC304", Status.FAIL, Severity.WARNING, MULTICAST_OFF)])
    launch = apply_plan(rep.plan, cmd, {})
    assert launch.argv[:2] == ["env", "VLLM_ALLREDUCE_USE_SYMM_MEM=0"]
    assert launch.argv[2:] == ["vllm", "serve", "m"]


def test_an_env_prefix_that_unsets_or_clears_cannot_undo_the_fallback():
    rep = report_of([result("FC304", Status.FAIL, Severity.WARNING, MULTICAST_OFF)])
    base = {"VLLM_ALLREDUCE_USE_SYMM_MEM": "1", "PATH": "/usr/bin"}
    for prefix in (
        ["env", "-i", "PATH=/usr/bin"],
        ["env", "-u", "VLLM_ALLREDUCE_USE_SYMM_MEM"],
        ["env", "--unset=VLLM_ALLREDUCE_USE_SYMM_MEM"],
    ):
        cmd = parse_command([*prefix, "vllm", "serve", "m", "-tp", "8"], base)
        launch = apply_plan(rep.plan, cmd, base)
        # what the engine sees once `env` has run: the fallback, whatever env -i / -u did
        tail = launch.argv[len(prefix) :]
        assigned = dict(tok.split("=", 1) for tok in tail[: tail.index("vllm")])
        seen = {**cmd.engine_env(launch.env), **assigned}
        assert seen["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "0", prefix
        assert launch.argv[len(prefix) :][-5:] == ["vllm", "serve", "m", "-tp", "8"]
        assert launch.argv[: len(prefix)] == prefix
    # an env that leaves this name alone is left as it is
    cmd = parse_command(["env", "-u", "HOME", "vllm", "serve", "m"], base)
    assert apply_plan(rep.plan, cmd, base).argv == cmd.argv
    # an env option flightcheck cannot read: the fallback cannot be promised, so the launch stops
    cmd = parse_command(["env", "-i", "-C", "/srv", "vllm", "serve", "m"], base)
    d = decide(report_of([result("FC304", Status.FAIL, Severity.WARNING, MULTICAST_OFF)], cmd.intent), cmd, base)
    assert d.action == "stop" and "-C" in d.reasons[0]


def test_a_prefix_already_saying_the_fallback_is_not_a_change():
    cmd = parse_command(["env", "VLLM_ALLREDUCE_USE_SYMM_MEM=0", "vllm", "serve", "m"])
    step = (PlanStep("env", "VLLM_ALLREDUCE_USE_SYMM_MEM", "0", "the symm-mem all-reduce uses multicast"),)
    launch = apply_plan(
        report_of([result("FC304", Status.FAIL, Severity.WARNING, step)]).plan,
        cmd,
        {"VLLM_ALLREDUCE_USE_SYMM_MEM": "1"},
    )
    assert launch.argv == cmd.argv and launch.changes == []


def test_ray_copy_list_is_extended_not_replaced():
    cmd = parse_command(["vllm", "serve", "m", "--distributed-executor-backend", "ray"])
    step = PlanStep(
        "env",
        "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST",
        "ray copies only VLLM_/NCCL_ names",
    )
    rep = report_of([result("FC304", Status.FAIL, Severity.WARNING, (*MULTICAST_OFF, step))])
    launch = apply_plan(rep.plan, cmd, {"VLLM_RAY_EXTRA_ENV_VARS_TO_COPY": "MY_VAR"})
    assert launch.env["VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"] == "MY_VAR,TORCH_SYMM_MEM_DISABLE_MULTICAST"


def test_sglang_flags_dropped_in_every_spelling_and_backend_replaced():
    argv = [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "m",
        "--enable_symm_mem",
        "--tp",
        "8",
        "--enable-nccl-nvls",
        "--flashinfer-allreduce-fusion-backend=mnnvl",
        "--port",
        "30000",
    ]
    cmd = parse_command(argv)
    rep = report_of([result("FC304", Status.FAIL, Severity.WARNING, SGLANG_OFF)], cmd.intent)
    launch = apply_plan(rep.plan, cmd, {})
    assert launch.argv == [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "m",
        "--tp",
        "8",
        "--port",
        "30000",
        "--flashinfer-allreduce-fusion-backend",
        "trtllm",
    ]
    assert [c.what for c in launch.changes] == [
        "drop --enable-symm-mem",
        "drop --enable-nccl-nvls",
        "add --flashinfer-allreduce-fusion-backend trtllm",
    ]
    assert cmd.argv == argv  # the parsed command is not modified


def test_absent_flags_are_not_changes_and_a_matching_backend_is_kept():
    cmd = parse_command(["sglang", "serve", "--model-path", "m", "--flashinfer-allreduce-fusion-backend", "trtllm"])
    launch = apply_plan(report_of([result("FC304", Status.FAIL, Severity.WARNING, SGLANG_OFF)]).plan, cmd, {})
    assert launch.argv == cmd.argv and launch.changes == []


def test_a_flag_to_drop_in_the_config_file_is_dropped_from_a_copy(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the copy is the test's, not $TMPDIR's
    cfg = tmp_path / "sg.yaml"
    cfg.write_text("model-path: /models/q\ntp-size: 8\nenable-symm-mem: true\n")
    cmd = parse_command(["python3", "-m", "sglang.launch_server", "--config", str(cfg)])
    launch = apply_plan(report_of([result("FC304", Status.FAIL, Severity.WARNING, SGLANG_OFF)]).plan, cmd, {})
    new_cfg = launch.argv[launch.argv.index("--config") + 1]
    assert new_cfg != str(cfg)
    with open(new_cfg) as fh:
        assert yaml.safe_load(fh) == {"model-path": "/models/q", "tp-size": 8}
    assert "enable-symm-mem" in cfg.read_text()  # the user's file is never written
    assert "drop --enable-symm-mem (from the --config file, via a copy)" in [c.what for c in launch.changes]


def test_config_flags_dropped_into_one_copy_and_the_parsed_command_untouched(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cfg = tmp_path / "sg.yaml"
    cfg.write_text("model-path: /models/q\nenable-symm-mem: true\nenable-nccl-nvls: true\n")
    cmd = parse_command(["sglang", "serve", "--config", str(cfg), "--tp", "8"])
    before = dict(cmd.config_data)
    plan = report_of([result("FC304", Status.FAIL, Severity.WARNING, SGLANG_OFF)]).plan
    first = apply_plan(plan, cmd, {})
    with open(first.argv[first.argv.index("--config") + 1]) as fh:
        assert yaml.safe_load(fh) == {"model-path": "/models/q"}  # both flags gone from the one copy
    assert cmd.config_data == before
    again = apply_plan(plan, cmd, {})  # the same command planned twice gives the same launch
    assert [c.what for c in again.changes] == [c.what for c in first.changes]


def test_decide_stops_on_a_blocking_error_and_names_it():
    cmd = parse_command(["vllm", "serve", "m"])
    rep = report_of(
        [
            result("FC301", Status.FAIL, Severity.ERROR, message="gpu 0 fabric state not_started", subject="gpu:0"),
            result("FC304", Status.FAIL, Severity.WARNING, MULTICAST_OFF),
        ]
    )
    d = decide(rep, cmd, {})
    assert d.action == "stop"
    assert d.reasons == ["FC301 name-FC301 (gpu:0): gpu 0 fabric state not_started"]


def test_decide_no_fallback_turns_a_fallback_into_a_stop():
    cmd = parse_command(["vllm", "serve", "m"])
    rep = report_of([result("FC304", Status.FAIL, Severity.WARNING, MULTICAST_OFF)])
    assert decide(rep, cmd, {}).action == "start"
    d = decide(rep, cmd, {}, no_fallback=True)
    assert d.action == "stop" and "FC304" in d.reasons[0] and "--no-fallback" in d.reasons[0]


def test_decide_strict_blocks_on_a_warning_and_unknown_does_not_block():
    cmd = parse_command(["vllm", "serve", "m"])
    warn = [result("FC602", Status.FAIL, Severity.WARNING)]
    assert decide(report_of(warn), cmd, {}).action == "start"
    assert decide(report_of(warn, strict=True), cmd, {}).action == "stop"
    unk = report_of([result("FC201", Status.UNKNOWN, Severity.ERROR, message="driver.loaded is unavailable")])
    d = decide(unk, cmd, {})
    assert unk.exit_code == 3 and d.action == "start"
    assert any("FC201" in w for w in d.warnings)


def test_arg_steps_on_an_unreadable_command_stop_the_launch():
    cmd = parse_command(["./launch.sh"])
    d = decide(report_of([result("FC304", Status.FAIL, Severity.WARNING, SGLANG_OFF)]), cmd, {})
    assert d.action == "stop" and "could not read the engine command" in d.reasons[0]
    # env-only fallbacks still apply to a command flightcheck cannot read
    d = decide(report_of([result("FC304", Status.FAIL, Severity.WARNING, MULTICAST_OFF)], cmd.intent), cmd, {})
    assert d.action == "start" and d.launch.env["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "0"
    assert any("./launch.sh" in w for w in d.warnings)


def test_shell_script_of_a_dry_run():
    cmd = parse_command(["vllm", "serve", "my model", "-tp", "8"])
    d = decide(report_of([result("FC304", Status.FAIL, Severity.WARNING, MULTICAST_OFF)]), cmd, {"HOME": "/root"})
    text = shell_script(d, {"HOME": "/root"})
    assert text.splitlines() == [
        "# flightcheck: ready-with-fallbacks (FC304)",
        "export TORCH_SYMM_MEM_DISABLE_MULTICAST=1",
        "export VLLM_ALLREDUCE_USE_SYMM_MEM=0",
        "exec vllm serve 'my model' -tp 8",
    ]


def test_a_dry_run_writes_its_config_copy_in_the_script_and_leaves_no_file(tmp_path, monkeypatch):
    """`run --dry-run` once left its --config copy in $TMPDIR on every call: the script now
    writes the copy itself, and running it gives the engine the same config (secrets redacted)."""
    import subprocess

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    cfg = tmp_path / "sg.yaml"
    cfg.write_text("model-path: /models/q\nenable-symm-mem: true\napi-key: sk-123\n")
    cmd = parse_command(["sglang", "serve", "--config", str(cfg), "--tp", "8"])
    d = decide(report_of([result("FC304", Status.FAIL, Severity.WARNING, SGLANG_OFF)]), cmd, {})
    text = shell_script(d, {})
    assert list((tmp_path / "tmp").iterdir()) == []  # nothing left behind
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "sglang"
    fake.write_text('#!/bin/sh\nwhile [ "$1" != --config ]; do shift; done\ncat "$2"\n')
    fake.chmod(0o755)
    out = subprocess.run(
        ["sh", "-c", text],
        capture_output=True,
        text=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "TMPDIR": str(tmp_path / "tmp")},
        check=True,
    ).stdout
    assert yaml.safe_load(out) == {"model-path": "/models/q", "api-key": "<redacted>"}  # printed: no secret
