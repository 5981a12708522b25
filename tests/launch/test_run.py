"""``flightcheck run -- <engine>`` end to end, with a fake engine standing in for ``vllm``.

The fake engine prints its arguments, environment and PID as JSON on stdout and exits
with ``FAKE_ENGINE_EXIT`` (or kills itself with ``FAKE_ENGINE_SIGNAL``). Facts come from
the bundled healthy B300 snapshot plus a recorded delta; every delta includes a
``multicast_probe`` section, so no live probe runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.cli import cli
from support.evaluation import host_doc
from support.launch import FALLBACK_ENV, FM_STOPPED, MULTICAST_401, base_facts

FAKE_ENGINE = """#!{python}
import json, os, signal, sys
sys.stdout.write(json.dumps({{"argv": sys.argv[1:], "env": dict(os.environ), "pid": os.getpid()}}))
sys.stdout.flush()
if os.environ.get("FAKE_ENGINE_SIGNAL"):
    os.kill(os.getpid(), int(os.environ["FAKE_ENGINE_SIGNAL"]))
sys.exit(int(os.environ.get("FAKE_ENGINE_EXIT", "0")))
"""


def make_engine(bin_dir: Path, names: tuple[str, ...] = ("vllm", "sglang")) -> None:
    """Fake ``vllm`` / ``sglang`` console scripts whose shebang is this interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = bin_dir / name
        path.write_text(FAKE_ENGINE.format(python=sys.executable))
        path.chmod(0o755)


def sglang_python(tmp_path: Path) -> Path:
    """A ``python`` section of an SGLang 0.5.23 environment (the example has vLLM)."""
    py = host_doc("b300")["python"]
    py["packages"] = {**py["packages"], "sglang": "0.5.23", "vllm": None}
    path = tmp_path / "sglang-python.json"
    path.write_text(json.dumps({"python": py}))
    return path


class Launched:
    """What one ``flightcheck run`` did."""

    def __init__(self, proc: subprocess.Popen[str], out: str, err: str, env: dict[str, str]) -> None:
        self.rc = proc.returncode
        self.pid = proc.pid
        self.stdout, self.stderr, self.parent_env = out, err, env
        self.engine: dict[str, Any] | None = None
        start = out.find('{"argv"')
        if start >= 0:
            self.engine = json.loads(out[start:])

    @property
    def added_env(self) -> dict[str, str]:
        """Variables the engine saw that its parent did not pass (or passed otherwise)."""
        assert self.engine is not None, f"engine did not start: {self.stderr}"
        return {k: v for k, v in self.engine["env"].items() if self.parent_env.get(k) != v}


def run_engine(
    tmp_path: Path, facts: list[Path], command: list[str], *flags: str, env: dict[str, str] | None = None
) -> Launched:
    """``python -m flightcheck run FLAGS --facts ... -- COMMAND`` with the fake engine on PATH."""
    bin_dir = tmp_path / "bin"
    make_engine(bin_dir)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("FLIGHTCHECK_", "FAKE_ENGINE_"))}
    full_env["PATH"] = f"{bin_dir}{os.pathsep}{full_env.get('PATH', '')}"
    full_env.update(env or {})
    args = [sys.executable, "-m", "flightcheck", "run", *flags]
    for f in facts:
        args += ["--facts", str(f)]
    proc = subprocess.Popen(
        [*args, "--", *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env, cwd=tmp_path
    )
    out, err = proc.communicate(timeout=120)
    return Launched(proc, out, err, full_env)


ENGINE_ARGS = ["serve", "-tp", "8", "--port", "8123", "--some-future-flag", "x", "--enforce-eager"]


def test_multicast_401_node_gets_the_fallback_env_args_untouched_exit_code_passed_through(tmp_path, tiny_model):
    args = ["serve", tiny_model, *ENGINE_ARGS[1:], "--max-model-len", "2k"]
    r = run_engine(tmp_path, [base_facts(tmp_path), MULTICAST_401], ["vllm", *args], env={"FAKE_ENGINE_EXIT": "7"})
    assert r.engine is not None, r.stderr
    assert r.engine["argv"] == args  # unknown flags pass through untouched
    for name, value in FALLBACK_ENV.items():
        assert r.engine["env"][name] == value
    assert r.rc == 7  # the engine's exit code
    assert r.engine["pid"] == r.pid  # exec: the engine replaced flightcheck, same PID
    assert "FC304" in r.stderr and "set VLLM_ALLREDUCE_USE_SYMM_MEM=0" in r.stderr
    assert r.stdout.startswith('{"argv"')  # flightcheck printed nothing on the engine's stdout


def test_fabric_manager_stopped_never_starts_the_engine(tmp_path):
    r = run_engine(tmp_path, [base_facts(tmp_path), FM_STOPPED], ["vllm", *ENGINE_ARGS])
    assert r.rc == 1
    assert r.engine is None and r.stdout == ""
    assert "FC301" in r.stderr and "not starting the engine" in r.stderr
    assert "Traceback" not in r.stderr


def test_healthy_node_runs_the_engine_with_no_added_environment(tmp_path):
    r = run_engine(tmp_path, [base_facts(tmp_path)], ["vllm", *ENGINE_ARGS], env={"FAKE_ENGINE_EXIT": "0"})
    assert r.rc == 0 and r.engine["argv"] == ENGINE_ARGS
    # only the marker that tells the vLLM plugin this launch is already checked
    assert set(r.added_env) == {"FLIGHTCHECK_PLUGIN_DONE"}
    assert r.added_env["FLIGHTCHECK_PLUGIN_DONE"] == f"run:{r.pid}"
    assert "ready" in r.stderr and "checks passed" in r.stderr


def test_engine_signals_are_the_engines(tmp_path):
    r = run_engine(
        tmp_path, [base_facts(tmp_path)], ["vllm", *ENGINE_ARGS], env={"FAKE_ENGINE_SIGNAL": str(int(signal.SIGTERM))}
    )
    assert r.rc == -signal.SIGTERM and r.engine is not None


def test_no_fallback_turns_the_fallback_into_a_stop(tmp_path):
    r = run_engine(tmp_path, [base_facts(tmp_path), MULTICAST_401], ["vllm", *ENGINE_ARGS], "--no-fallback")
    assert r.rc == 1 and r.engine is None
    assert "--no-fallback" in r.stderr and "FC304" in r.stderr


def test_dry_run_prints_the_final_launch_and_starts_nothing(tmp_path):
    r = run_engine(tmp_path, [base_facts(tmp_path), MULTICAST_401], ["vllm", *ENGINE_ARGS], "--dry-run")
    assert r.rc == 0 and r.engine is None
    lines = r.stdout.splitlines()
    assert "export VLLM_ALLREDUCE_USE_SYMM_MEM=0" in lines and "export TORCH_SYMM_MEM_DISABLE_MULTICAST=1" in lines
    assert lines[-1] == "exec vllm " + " ".join(ENGINE_ARGS)
    # a blocked launch is not started by a dry run either
    r = run_engine(tmp_path, [base_facts(tmp_path), FM_STOPPED], ["vllm", *ENGINE_ARGS], "--dry-run")
    assert r.rc == 1 and "FC301" in r.stderr and "exec " not in r.stdout


def test_sglang_fallback_drops_and_adds_arguments(tmp_path, tiny_model):
    args = [
        "serve",
        "--model-path",
        tiny_model,
        "--tp",
        "8",
        "--enable-symm-mem",
        "--enable-nccl-nvls",
        "--port",
        "30000",
    ]
    r = run_engine(
        tmp_path, [base_facts(tmp_path), sglang_python(tmp_path), MULTICAST_401], ["sglang", *args], "--dry-run"
    )
    assert r.rc == 0, r.stderr
    final = r.stdout.splitlines()[-1]
    assert "--enable-symm-mem" not in final and "--enable-nccl-nvls" not in final
    # a Llama is outside SGLang's FlashInfer fusion list: SGLang keeps the fusion off, no flag added
    assert "flashinfer-allreduce-fusion" not in final
    assert f"--model-path {tiny_model} --tp 8" in final and "--port 30000" in final


def test_an_unreadable_command_runs_as_is_with_a_warning(tmp_path):
    script = tmp_path / "start.sh"
    script.write_text('#!/bin/sh\necho "{\\"argv\\": [\\"$1\\"]}"\nexit 4\n')
    script.chmod(0o755)
    r = run_engine(tmp_path, [base_facts(tmp_path)], [str(script), "--fast"])
    assert r.rc == 4 and r.engine == {"argv": ["--fast"]}
    assert "could not read from the engine command" in r.stderr and "start.sh" in r.stderr


def test_engine_not_found_is_127_with_a_message(tmp_path):
    r = run_engine(tmp_path, [base_facts(tmp_path)], ["vllm-does-not-exist", "serve", "m"])
    assert r.rc == 127 and "cannot start vllm-does-not-exist" in r.stderr


def test_report_to_a_file_in_json_and_the_engine_still_starts(tmp_path):
    out = tmp_path / "report.json"
    r = run_engine(
        tmp_path,
        [base_facts(tmp_path), MULTICAST_401],
        ["vllm", *ENGINE_ARGS],
        "--format",
        "json",
        "--output",
        str(out),
    )
    assert r.rc == 0 and r.engine is not None
    report = json.loads(out.read_text())
    assert report["verdict"] == "ready-with-fallbacks" and report["plan"]["env"]["VLLM_ALLREDUCE_USE_SYMM_MEM"] == "0"
    assert report["intent"]["tensor_parallel_size"] == 8


def test_flags_given_to_flightcheck_override_the_command(tmp_path):
    out = tmp_path / "report.json"
    r = run_engine(
        tmp_path, [base_facts(tmp_path)], ["vllm", *ENGINE_ARGS], "-tp", "4", "--format", "json", "-o", str(out)
    )
    assert r.rc == 0
    assert json.loads(out.read_text())["intent"]["tensor_parallel_size"] == 4
    assert r.engine["argv"] == ENGINE_ARGS  # the engine still gets what the user wrote


def test_run_without_a_command_is_a_usage_error():
    proc = cli("run", "--example", "b300")
    assert proc.returncode == 2 and "after --" in proc.stderr and "Traceback" not in proc.stderr


def test_check_takes_the_intent_from_an_engine_command(tmp_path):
    proc = cli(
        "check",
        "--example",
        "b300",
        "--format",
        "json",
        "--",
        "vllm",
        "serve",
        "org/m",
        "-tp",
        "4",
        "--max-model-len",
        "32k",
    )
    report = json.loads(proc.stdout)
    assert report["intent"]["tensor_parallel_size"] == 4
    assert report["intent"]["max_model_len"] == 32_000 and report["intent"]["model"] == "org/m"


@pytest.mark.parametrize("fmt", ["junit", "prometheus"])
def test_run_writes_ci_formats_to_the_output_file(tmp_path, fmt):
    out = tmp_path / f"report.{fmt}"
    r = run_engine(
        tmp_path, [base_facts(tmp_path), MULTICAST_401], ["vllm", *ENGINE_ARGS], "--format", fmt, "--output", str(out)
    )
    assert r.rc == 0 and r.engine is not None
    text = out.read_text()
    assert ("<testsuites" in text) if fmt == "junit" else ("flightcheck_ready 1" in text)


def test_an_unreadable_command_is_judged_on_host_checks_only(tmp_path):
    """Whether ./start.sh starts vLLM is unknown: an engine missing from the interpreter
    flightcheck guessed must not stop it; --engine says which engine, and then it counts."""
    script = tmp_path / "start.sh"
    script.write_text("#!/bin/sh\necho started\nexit 0\n")
    script.chmod(0o755)
    py = host_doc("b300")["python"]
    py["packages"] = {**py["packages"], "vllm": None}
    no_vllm = tmp_path / "no-vllm.json"
    no_vllm.write_text(json.dumps({"python": py}))
    report = tmp_path / "report.json"
    r = run_engine(tmp_path, [base_facts(tmp_path), no_vllm], [str(script)], "--format", "json", "-o", str(report))
    assert r.rc == 0 and r.stdout == "started\n"
    fc701 = [c for c in json.loads(report.read_text())["checks"] if c["code"] == "FC701"]
    assert fc701 and {c["status"] for c in fc701} == {"skip"}
    r = run_engine(tmp_path, [base_facts(tmp_path), no_vllm], [str(script)], "--engine", "vllm")
    assert r.rc == 1 and "FC701" in r.stderr and r.stdout == ""


def test_check_says_what_it_could_not_read_from_the_engine_command(tmp_path):
    proc = cli(
        "check", "--facts", str(base_facts(tmp_path)), "--", "vllm", "serve", "m", "-tp", "eight", env={"NO_COLOR": "1"}
    )
    assert "could not read from the engine command: -tp 'eight': not a number" in proc.stdout
    assert json.loads(
        cli(
            "check",
            "--facts",
            str(base_facts(tmp_path)),
            "--format",
            "json",
            "--",
            "vllm",
            "serve",
            "m",
            "-tp",
            "eight",
        ).stdout
    )["intent"]["unparsed"] == ["-tp 'eight': not a number"]
