"""Reading engine command lines: vLLM and SGLang spellings, config files, interpreters."""

from __future__ import annotations

import os
import stat
import sys

import pytest

from flightcheck._launch import parse_command
from flightcheck._vocabulary.intent import AUTO


def intent(*argv: str, env: dict[str, str] | None = None):
    return parse_command(list(argv), env).intent


def test_vllm_serve_positional_model_and_short_flags():
    i = intent(
        "vllm", "serve", "/models/kimi", "-tp", "8", "-pp", "2", "-dp", "2", "-ep", "-q", "mxfp4", "--port", "8000"
    )
    assert i.engine == "vllm" and i.model == "/models/kimi"
    assert (i.tensor_parallel_size, i.pipeline_parallel_size, i.data_parallel_size) == (8, 2, 2)
    assert i.enable_expert_parallel is True and i.quantization == "mxfp4"
    assert i.unparsed == []
    assert "--port=8000" in i.engine_flags


@pytest.mark.parametrize(
    "spelling",
    [
        ["--tensor-parallel-size=8"],
        ["--tensor_parallel_size", "8"],
        ["--tensor_parallel_size=8"],
        ["-tp=8"],
        ["-tp", "8"],
    ],
)
def test_vllm_accepts_every_spelling_of_a_flag(spelling):
    assert intent("vllm", "serve", "m", *spelling).tensor_parallel_size == 8


@pytest.mark.parametrize(
    "value,expected",
    [("128k", 128_000), ("128K", 131_072), ("1m", 1_000_000), ("-1", AUTO), ("auto", AUTO), ("4096", 4096)],
)
def test_max_model_len_forms(value, expected):
    assert intent("vllm", "serve", "m", "--max-model-len", value).max_model_len == expected


def test_memory_flags_and_executor():
    i = intent(
        "vllm",
        "serve",
        "m",
        "--kv-cache-dtype",
        "fp8",
        "--gpu-memory-utilization",
        "0.85",
        "--download-dir",
        "/scratch/hf",
        "--distributed-executor-backend",
        "ray",
        "--nnodes",
        "2",
    )
    assert (i.kv_cache_dtype, i.gpu_memory_utilization, i.download_dir) == ("fp8", 0.85, "/scratch/hf")
    assert i.distributed_executor_backend == "ray" and i.nnodes == 2


def test_model_given_with_the_deprecated_model_flag():
    assert intent("vllm", "serve", "-tp", "2", "--model", "org/repo").model == "org/repo"
    assert intent("vllm", "serve", "--model=org/repo").model == "org/repo"


def test_no_enable_expert_parallel_wins_when_last():
    assert intent("vllm", "serve", "m", "-ep", "--no-enable-expert-parallel").enable_expert_parallel is False


def test_config_file_flat_with_command_line_winning(tmp_path):
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(
        "model: /models/from-config\ntensor-parallel-size: 4\nmax_model_len: 64k\n"
        "enable-expert-parallel: true\nport: 9000\n"
    )
    i = intent("vllm", "serve", "--config", str(cfg), "-tp", "8")
    assert i.model == "/models/from-config"
    assert i.tensor_parallel_size == 8  # the command line wins over the file
    assert i.max_model_len == 64_000 and i.enable_expert_parallel is True
    # a positional model wins over the file's
    assert intent("vllm", "serve", "/models/cli", "--config", str(cfg)).model == "/models/cli"


def test_config_file_nested_values_are_not_mistaken_for_intent(tmp_path):
    cfg = tmp_path / "serve.yml"
    cfg.write_text(
        "tensor_parallel_size: 8\n"
        "compilation-config:\n  pass_config:\n    fuse_allreduce_rms: false\n"
        "speculative-config:\n  model: draft-model\n  num_speculative_tokens: 3\n"
    )
    i = intent("vllm", "serve", "/models/main", "--config", str(cfg))
    assert i.tensor_parallel_size == 8 and i.model == "/models/main"
    assert any(f.startswith("--compilation-config=") and "fuse_allreduce_rms" in f for f in i.engine_flags)
    assert i.unparsed == []


def test_config_file_unreadable_is_reported_not_raised(tmp_path):
    """Not raised, and not a mere warning either: the intent carries the problem for FC711."""
    i = intent("vllm", "serve", "m", "--config", str(tmp_path / "missing.yaml"), "-tp", "2")
    assert i.tensor_parallel_size == 2
    assert i.config_problem and "missing.yaml" in i.config_problem and "cannot read" in i.config_problem
    bad = tmp_path / "bad.yaml"
    bad.write_text("- just\n- a list\n")
    assert "mapping" in (intent("vllm", "serve", "m", "--config", str(bad)).config_problem or "")


def test_unreadable_values_are_listed_and_left_at_defaults():
    i = intent(
        "vllm",
        "serve",
        "m",
        "-tp",
        "eight",
        "--gpu-memory-utilization",
        "1.5",
        "--max-model-len",
        "lots",
        "--kv-cache-dtype",
        "fp8_e4m3",
    )
    assert i.tensor_parallel_size == 1 and i.gpu_memory_utilization is None and i.max_model_len is None
    assert i.kv_cache_dtype == "fp8_e4m3"
    text = " | ".join(i.unparsed)
    assert "-tp 'eight'" in text and "--gpu-memory-utilization '1.5'" in text and "--max-model-len 'lots'" in text


def test_openai_api_server_module():
    cmd = parse_command(
        [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            "m",
            "--tensor-parallel-size",
            "4",
            "--disable-log-requests",
        ]
    )
    assert cmd.engine == "vllm" and cmd.form == "vllm-api-server"
    assert cmd.intent.model == "m" and cmd.intent.tensor_parallel_size == 4
    assert cmd.intent.python == sys.executable  # the python given is the engine's interpreter


def test_sglang_launch_server_flags():
    cmd = parse_command(
        [
            sys.executable,
            "-u",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "/models/ds",
            "--tp-size",
            "8",
            "--ep-size",
            "8",
            "--context-length",
            "131072",
            "--mem-fraction-static",
            "0.88",
            "--kv-cache-dtype",
            "fp8_e5m2",
            "--enable-symm-mem",
        ]
    )
    i = cmd.intent
    assert cmd.engine == "sglang" and i.engine == "sglang"
    assert (i.model, i.tensor_parallel_size, i.enable_expert_parallel) == ("/models/ds", 8, True)
    assert (i.max_model_len, i.gpu_memory_utilization, i.kv_cache_dtype) == (131072, 0.88, "fp8_e5m2")
    assert "--enable-symm-mem" in i.engine_flags


def test_sglang_aliases_dp_and_dp_attention(tmp_path):
    i = intent("python3", "-m", "sglang.launch_server", "--model", "m", "--tp", "4", "--dp-size", "2")
    assert (i.tensor_parallel_size, i.data_parallel_size) == (4, 2)
    # DP attention splits the TP group: no extra GPUs
    assert (
        intent(
            "python3",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "m",
            "--tp",
            "8",
            "--dp",
            "8",
            "--enable-dp-attention",
        ).data_parallel_size
        == 1
    )
    cfg = tmp_path / "sg.yaml"
    cfg.write_text("model-path: /models/q\ntp-size: 2\ncontext-length: 32768\n")
    i = intent("sglang", "serve", "--config", str(cfg), "--tp-size", "4")
    assert (i.engine, i.model, i.tensor_parallel_size, i.max_model_len) == ("sglang", "/models/q", 4, 32768)


def _script(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_interpreter_from_the_vllm_script_shebang_and_pip_trampoline(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir / "vllm", f"#!{sys.executable}\nprint('engine')\n")
    env = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin"}
    assert intent("vllm", "serve", "m", env=env).python == sys.executable
    # pip's form for interpreter paths too long for a shebang
    _script(bin_dir / "vllm", f"#!/bin/sh\n'''exec' {sys.executable} \"$0\" \"$@\"\n' '''\nprint('engine')\n")
    assert intent("vllm", "serve", "m", env=env).python == sys.executable
    # not found: no interpreter claimed (the collector then falls back to its own rules)
    assert intent("vllm", "serve", "m", env={"PATH": str(tmp_path / "nowhere")}).python is None


def test_env_prefix_and_wrappers():
    cmd = parse_command(
        [
            "env",
            "-u",
            "CUDA_VISIBLE_DEVICES",
            "VLLM_ALLREDUCE_USE_SYMM_MEM=1",
            "numactl",
            "--interleave=all",
            "vllm",
            "serve",
            "m",
            "-tp",
            "8",
        ]
    )
    assert cmd.engine == "vllm" and cmd.intent.tensor_parallel_size == 8
    assert cmd.env_prefix == {"CUDA_VISIBLE_DEVICES": None, "VLLM_ALLREDUCE_USE_SYMM_MEM": "1"}
    env = cmd.engine_env({"CUDA_VISIBLE_DEVICES": "0,1", "HOME": "/root"})
    assert env == {"HOME": "/root", "VLLM_ALLREDUCE_USE_SYMM_MEM": "1"}
    assert parse_command(["env", "-i", "A=1", "vllm", "serve", "m"]).engine_env({"HOME": "/root"}) == {"A": "1"}


def test_unknown_command_is_reported_not_refused():
    cmd = parse_command(["./start-server.sh", "--fast"])
    assert not cmd.recognised
    assert cmd.intent.unparsed and "./start-server.sh" in cmd.intent.unparsed[0]
    # other vllm subcommands are not launches
    assert not parse_command(["vllm", "bench", "serve", "--model", "m"]).recognised


def test_empty_command_is_a_usage_error():
    from flightcheck import UsageError

    with pytest.raises(UsageError, match="after --"):
        parse_command([])


def test_other_ways_to_start_vllm_serve():
    cmd = parse_command([sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", "org/m", "-tp", "2"])
    assert (cmd.engine, cmd.form, cmd.intent.model, cmd.intent.tensor_parallel_size) == ("vllm", "vllm-cli", "org/m", 2)
    assert cmd.intent.python == sys.executable
    cmd = parse_command(["python3", "/srv/venv/bin/vllm", "serve", "org/m"])
    assert cmd.engine == "vllm" and cmd.intent.model == "org/m"
    # argparse takes the positional model between flags too
    assert intent("vllm", "serve", "-tp", "8", "--enforce-eager", "org/m", "--port", "1").model == "org/m"


def test_load_format_is_read_for_both_engines():
    """--load-format decides which weight files the engine reads (dummy: none)."""
    assert intent("vllm", "serve", "m", "--load-format", "dummy").load_format == "dummy"
    assert intent("vllm", "serve", "m", "--load_format=pt").load_format == "pt"
    assert intent("vllm", "serve", "m").load_format is None
    sg = intent("python", "-m", "sglang.launch_server", "--model-path", "m", "--load-format", "dummy")
    assert sg.load_format == "dummy"


def test_a_config_fifo_is_read_once(tmp_path, monkeypatch) -> None:
    """--config on a FIFO: the parser's read and the lenient reading of a refused line
    share one read. Read twice, a FIFO nobody writes cost its 3 s first-byte bound twice
    (6.6 s against the documented 3 s), and one written once gave the second read nothing."""
    import threading

    from flightcheck._launch import intent_read

    calls: list[str] = []
    real = intent_read.config_tokens

    def counting(path: str, engine: str = "vllm"):  # type: ignore[no-untyped-def]
        calls.append(path)
        return real(path, engine)

    monkeypatch.setattr(intent_read, "config_tokens", counting)
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)

    def write_once() -> None:
        with open(fifo, "w") as fh:
            fh.write("tensor-parallel-size: 2\n")

    writer = threading.Thread(target=write_once, daemon=True)
    writer.start()
    cmd = parse_command(["vllm", "serve", "M", "--config", str(fifo), "--no-such-flag"], env={"PATH": "/nonexistent"})
    writer.join(10)
    assert len(calls) == 1, calls
    assert cmd.intent.refused and cmd.config_problem is None, (cmd.intent.refused, cmd.config_problem)
    assert cmd.intent.tensor_parallel_size == 2
