"""The vLLM plugin, loaded the way vLLM loads it: through its entry point, in a fresh process.

Each test runs a small driver that sets ``sys.argv`` to a vLLM command line, loads the
``vllm.general_plugins`` entry point named ``flightcheck`` with importlib.metadata and calls
it, then prints what happened. A fake ``torch`` package is first on the path, so any
import of torch would show in ``sys.modules``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from support.evaluation import host_doc
from support.launch import FALLBACK_ENV, FM_STOPPED, MULTICAST_401, base_facts
from support.plugin_driver import VLLM, plugin


@pytest.fixture
def serve_argv(tiny_model) -> list[str]:
    """`vllm serve` of a real (tiny) checkpoint at TP 8."""
    return [VLLM, "serve", tiny_model, "-tp", "8", "--port", "8000"]


def no_torch(out: dict[str, Any]) -> None:
    assert not [m for m in out["modules"] if m.split(".")[0] in ("torch", "cuda", "pynvml")]


def test_blocking_problem_exits_non_zero_naming_the_code(tmp_path, serve_argv):
    proc, out = plugin(tmp_path, serve_argv, [base_facts(tmp_path), FM_STOPPED], raw=True)
    assert proc.returncode == 1 and out is None  # SystemExit(1) ended the process, as it would end vllm serve
    assert "FC301" in proc.stderr and "stopping vllm serve" in proc.stderr
    assert "flightcheck diagnose LOG" in proc.stderr  # where to look if a later failure happens anyway
    assert "Traceback" not in proc.stderr
    _, out = plugin(tmp_path, serve_argv, [base_facts(tmp_path), FM_STOPPED])
    assert out["outcome"] == "exit:1"
    no_torch(out)


def test_fallback_sets_the_env_in_process_and_returns(tmp_path, serve_argv):
    proc, out = plugin(tmp_path, serve_argv, [base_facts(tmp_path), MULTICAST_401])
    assert out["outcome"] == "returned", proc.stderr
    for name, value in FALLBACK_ENV.items():
        assert out["env"][name] == value
    assert out["argv"] == out["argv_before"]  # vLLM's arguments untouched
    assert out["env"]["FLIGHTCHECK_PLUGIN_DONE"] == str(out["pid"])  # this process checked the launch
    assert "FC304" in proc.stderr and "set VLLM_ALLREDUCE_USE_SYMM_MEM=0" in proc.stderr
    no_torch(out)
    assert "flightcheck._collect" in out["modules"]  # it did run (so the torch assertion means something)


def test_other_vllm_subcommands_return_at_once(tmp_path):
    for argv in (
        [VLLM, "collect-env"],
        [VLLM, "bench", "serve", "--model", "m"],
        [VLLM, "serve", "--help"],
        ["python", "train.py"],
    ):
        proc, out = plugin(tmp_path, argv, [base_facts(tmp_path), FM_STOPPED])
        assert out["outcome"] == "returned", (argv, proc.stderr)
        assert proc.stderr == ""
        assert "FLIGHTCHECK_PLUGIN_DONE" not in out["env"]
        # nothing beyond the plugin module itself was imported: no collection, no evaluation
        assert not {"flightcheck._collect", "flightcheck._checks.evaluate", "flightcheck._launch"} & set(out["modules"])
        no_torch(out)


def test_only_the_first_process_of_a_launch_checks(tmp_path, serve_argv):
    _, first = plugin(tmp_path, serve_argv, [base_facts(tmp_path), MULTICAST_401])
    marker = first["env"]["FLIGHTCHECK_PLUGIN_DONE"]
    # a worker / engine-core process inherits the first one's environment (and its argv)
    proc, worker = plugin(tmp_path, serve_argv, [base_facts(tmp_path), FM_STOPPED], FLIGHTCHECK_PLUGIN_DONE=marker)
    assert worker["outcome"] == "returned" and proc.stderr == ""
    assert "flightcheck._collect" not in worker["modules"]
    # a launch `flightcheck run` already checked is not checked again
    proc, out = plugin(tmp_path, serve_argv, [base_facts(tmp_path), FM_STOPPED], FLIGHTCHECK_PLUGIN_DONE="run:4242")
    assert out["outcome"] == "returned" and proc.stderr == ""


def test_disable_switch(tmp_path, serve_argv):
    proc, out = plugin(tmp_path, serve_argv, [base_facts(tmp_path), FM_STOPPED], FLIGHTCHECK_DISABLE="1")
    assert out["outcome"] == "returned" and proc.stderr == ""


def test_an_internal_error_never_crashes_vllm(tmp_path, serve_argv):
    bad = tmp_path / "bad.json"
    bad.write_text('{"host": {"cpu_count": "many"}}')
    proc, out = plugin(tmp_path, serve_argv, [bad], raw=True)
    assert proc.returncode == 0 and out["outcome"] == "returned"
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flightcheck: launch not checked:") and "cpu_count" in lines[0]
    proc, out = plugin(tmp_path, serve_argv, [tmp_path / "missing.json"])
    assert out["outcome"] == "returned" and "launch not checked" in proc.stderr


def test_no_fallback_switch_stops_instead(tmp_path, serve_argv):
    proc, out = plugin(tmp_path, serve_argv, [base_facts(tmp_path), MULTICAST_401], FLIGHTCHECK_NO_FALLBACK="1")
    assert out["outcome"] == "exit:1" and "FC304" in proc.stderr
    assert "VLLM_ALLREDUCE_USE_SYMM_MEM" not in out["env"]


def test_ray_workers_get_the_driver_environment(tmp_path, serve_argv):
    argv = [*serve_argv, "--distributed-executor-backend", "ray"]
    proc, out = plugin(
        tmp_path, argv, [base_facts(tmp_path), MULTICAST_401], VLLM_RAY_EXTRA_ENV_VARS_TO_COPY="MY_SETTING"
    )
    assert out["outcome"] == "returned", proc.stderr
    # vLLM 0.33's Ray executor copies the whole driver environment (v1/executor/ray_env_utils.py):
    # the torch switch reaches the workers without being named, the user's list is left alone
    assert out["env"]["VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"] == "MY_SETTING"
    assert out["env"]["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"


def test_openai_api_server_module_is_guarded_too(tmp_path, serve_argv):
    argv = [
        "/srv/vllm/.venv/lib/python3.12/site-packages/vllm/entrypoints/openai/api_server.py",
        "--model",
        serve_argv[2],
        "-tp",
        "8",
    ]
    _proc, out = plugin(tmp_path, argv, [base_facts(tmp_path), MULTICAST_401])
    assert out["outcome"] == "returned" and out["env"]["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"


def test_launchers_entry_module_is_guarded_too(tmp_path, serve_argv):
    argv = [
        "/srv/vllm/.venv/lib/python3.12/site-packages/vllm/entrypoints/launchers/api_server/entry.py",
        "--model",
        serve_argv[2],
        "-tp",
        "8",
    ]
    _proc, out = plugin(tmp_path, argv, [base_facts(tmp_path), MULTICAST_401])
    assert out["outcome"] == "returned" and out["env"]["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"


def test_the_report_says_which_reader_read_the_command(tmp_path, serve_argv):
    report = tmp_path / "flightcheck.json"
    _proc, _out = plugin(tmp_path, serve_argv, [base_facts(tmp_path), MULTICAST_401], FLIGHTCHECK_REPORT=str(report))
    intent = json.loads(report.read_text())["intent"]
    assert intent["reader"] == "built-in" and intent["gpus_per_node"] == 8


def test_report_file_for_the_fleet(tmp_path, serve_argv):
    report = tmp_path / "flightcheck.json"
    _proc, _out = plugin(tmp_path, serve_argv, [base_facts(tmp_path), MULTICAST_401], FLIGHTCHECK_REPORT=str(report))
    doc = json.loads(report.read_text())
    assert doc["verdict"] == "ready-with-fallbacks" and doc["intent"]["model"] == serve_argv[2]


def test_an_unwritable_report_file_neither_drops_the_fallback_nor_the_stop(tmp_path, serve_argv):
    report = str(tmp_path / "no-such-dir" / "flightcheck.json")
    proc, out = plugin(tmp_path, serve_argv, [base_facts(tmp_path), MULTICAST_401], FLIGHTCHECK_REPORT=report)
    assert out["outcome"] == "returned" and out["env"]["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1", proc.stderr
    assert "warning: FLIGHTCHECK_REPORT" in proc.stderr and "launch not checked" not in proc.stderr
    proc, out = plugin(tmp_path, serve_argv, [base_facts(tmp_path), FM_STOPPED], FLIGHTCHECK_REPORT=report)
    assert out["outcome"] == "exit:1" and "FC301" in proc.stderr


def test_an_info_finding_is_said_as_info_not_as_a_warning(tmp_path, serve_argv):
    """FC510 (the load-time estimate, info) was printed as "warning: FC510 ..."."""
    proc, out = plugin(tmp_path, serve_argv, [base_facts(tmp_path)])
    assert out is not None and out["outcome"] == "returned", proc.stderr
    assert "info: FC510 load-time-estimate" in proc.stderr
    assert "warning: FC510" not in proc.stderr


def test_a_vllm_whose_parser_api_moved_keeps_the_builtin_reading(tmp_path, serve_argv):
    """vLLM is imported (as inside ``vllm serve``) but its serve-parser modules are not where
    0.33 has them: the plugin reads with the built-in reader and still checks the launch."""
    pkgs = tmp_path / "fakepkgs"
    for mod in ("vllm/__init__.py", "vllm/engine/__init__.py", "vllm/engine/arg_utils.py", "vllm/plugins/__init__.py"):
        (pkgs / mod).parent.mkdir(parents=True, exist_ok=True)
        (pkgs / mod).write_text("# a vLLM whose entrypoints moved\n")
    info = pkgs / "vllm-0.99.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.99.0\n")
    report = tmp_path / "flightcheck.json"
    proc, out = plugin(
        tmp_path,
        serve_argv,
        [base_facts(tmp_path), MULTICAST_401],
        FLIGHTCHECK_REPORT=str(report),
        PLUGIN_IMPORT="vllm.engine.arg_utils,vllm.plugins",
    )
    assert out is not None and out["outcome"] == "returned", proc.stderr[-2000:]
    doc = json.loads(report.read_text())
    assert doc["intent"]["reader"] == "built-in" and doc["intent"]["gpus_per_node"] == 8
    assert "engine_read_s" in doc["timings"]


def test_a_refused_secret_never_reaches_the_plugins_stderr(tmp_path, serve_argv):
    """vLLM refuses unknown flags (FC703 stops the launch); argparse's refusal text names
    each flag and its value: the plugin's stderr and FLIGHTCHECK_REPORT hold neither secret."""
    secrets = ["--password", "plain1secret", "--apikey=plain2secret", "--auth-token", "plain3secret"]
    report = tmp_path / "report.json"
    proc, out = plugin(tmp_path, [*serve_argv, *secrets], [base_facts(tmp_path)], FLIGHTCHECK_REPORT=str(report))
    assert out is not None and out["outcome"] == "exit:1", proc.stderr
    assert "FC703" in proc.stderr and "<redacted>" in proc.stderr
    for text in (proc.stderr, report.read_text()):
        assert not any(f"plain{i}secret" in text for i in (1, 2, 3)), text


def test_the_engines_live_env_wins_over_a_recorded_one(tmp_path):
    """The plugin runs inside the engine: a facts file's recorded HF_HUB_OFFLINE=1 (an init
    container's shell) must not stop an online download of an uncached repo id."""
    facts = base_facts(tmp_path, env={**host_doc("b300")["env"], "HF_HUB_OFFLINE": "1"})
    proc, out = plugin(
        tmp_path,
        [VLLM, "serve", "Qwen/Qwen3-0.6B"],
        [facts],
        HF_HOME=str(tmp_path / "hf"),
        HF_HUB_OFFLINE="0",
        TRANSFORMERS_OFFLINE="0",
    )
    assert out is not None and out["outcome"] == "returned", proc.stderr


FAKE_PLATFORMS = """
import enum
class PlatformEnum(enum.Enum):
    CUDA = enum.auto()
    ROCM = enum.auto()
    CPU = enum.auto()
class _Platform:
    def __init__(self, which):
        self._enum = PlatformEnum[which]
    def is_cuda(self):
        return self._enum is PlatformEnum.CUDA
import os
current_platform = _Platform(os.environ.get("FAKE_VLLM_PLATFORM", "CUDA"))
"""


@pytest.mark.parametrize("platform", ["CPU", "ROCM", "CUDA"])
def test_a_non_cuda_vllm_is_skipped_in_one_line(tmp_path, platform):
    """VLLM_TARGET_DEVICE=cpu or a ROCm build: vLLM's own platform (vllm.platforms, already
    imported when it calls the plugin) is not CUDA, so NVML's absence (FC201) says nothing
    about the launch: one line, and the launch goes on. On CUDA the same host stops."""
    pkg = tmp_path / "fakepkgs" / "vllm" / "platforms"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text(FAKE_PLATFORMS)
    argv = [VLLM, "serve", "/models/m", "--load-format", "dummy"]
    proc, out = plugin(tmp_path, argv, None, PLUGIN_IMPORT="vllm.platforms", FAKE_VLLM_PLATFORM=platform)
    assert out is not None, proc.stderr
    if platform == "CUDA":  # checked as ever (this host's NVML decides)
        assert "platform here" not in proc.stderr and "flightcheck" in proc.stderr, proc.stderr
        return
    assert out["outcome"] == "returned", proc.stderr
    assert proc.stderr.count("\n") == 1 and f"{platform.lower()} platform" in proc.stderr, proc.stderr
    # a snapshot named in FLIGHTCHECK_FACTS is judged whatever the platform
    nvml_gone = base_facts(tmp_path, driver=None, gpus=[], unavailable={"driver": "NVML: libnvidia-ml.so.1 not found"})
    proc, out = plugin(tmp_path, argv, [nvml_gone], PLUGIN_IMPORT="vllm.platforms", FAKE_VLLM_PLATFORM=platform)
    assert out is not None and out["outcome"] == "exit:1" and "FC201" in proc.stderr, proc.stderr
