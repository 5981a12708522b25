"""engine_reader.py against the real parsers of vllm 0.33.0 and sglang 0.5.23.

Every expected value below was checked by running the installed engine's own parser
(see the comments for what surprised): nothing here is engine behaviour from memory.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

VLLM_CASES = {
    # vLLM's human_readable_int (vllm/utils/argparse_utils.py): lower-case k is decimal
    "tp8_32k": ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "-tp", "8", "--max-model-len", "32k"],
    # ... upper-case K binary; --model=X moved to the positional slot; _ accepted for -
    "model_eq_32K": ["vllm", "serve", "-tp", "2", "--model=M2", "--max_model_len", "32K"],
    # -O3 is rewritten to --optimization-level 3 by FlexibleArgumentParser
    "O3": ["vllm", "serve", "-O3", "M"],
    "served_names": ["vllm", "serve", "M", "--served-model-name", "alpha", "beta"],
    "bad_tp": ["vllm", "serve", "M", "-tp", "eight"],
    # FlexibleArgumentParser refuses --served-model-name without a positional model
    "names_no_model": ["vllm", "serve", "--served-model-name", "alpha", "-tp", "2"],
    # --config: config values go between the model and the CLI flags, so the CLI wins
    "config": ["vllm", "serve", "M", "--config", "v.yaml", "-tp", "2"],
    "config_no_model": ["vllm", "serve", "--config", "v.yaml"],
    "api_server": ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "M", "-tp", "2"],
    # api_server's entry.main never copies the positional model_tag into model
    "api_server_positional": ["python3", "-m", "vllm.entrypoints.openai.api_server", "M2"],
    "after_serve": ["M3", "--tensor-parallel-size", "4", "--enable-expert-parallel"],
}

SGLANG_CASES = {
    # SGLang's human_readable_int (sglang/srt/utils/common.py): M is SI (10**6), Mi is 2**20
    "tp4_1M": ["sglang", "serve", "--model-path", "M", "--tp", "4", "--context-length", "1M"],
    "Mi": ["sglang", "serve", "--model-path", "M", "--context-length", "1Mi"],
    # argparse prefix matching (allow_abbrev): --mem-frac -> --mem-fraction-static
    "mem_frac": ["sglang", "serve", "M", "--mem-frac", "0.8"],
    "launch_server": [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model",
        "M",
        "--tp-size",
        "2",
        "--enable-dp-attention",
        "--dp",
        "2",
        "--enable-nccl-nvls",
    ],
    "bad_tp": ["sglang", "serve", "--model-path", "M", "--tp", "four"],
    "launch_positional": ["python3", "-m", "sglang.launch_server", "M"],
    "config": ["sglang", "serve", "--model-path", "M", "--config", "s.yaml", "--tp-size", "2"],
}


@pytest.fixture(scope="module")
def readings(conformance, engine_python: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    work: Path = tmp_path_factory.mktemp("launch-cwd")
    (work / "v.yaml").write_text("tensor-parallel-size: 4\nmax-model-len: 8K\nenforce-eager: true\n")
    (work / "s.yaml").write_text("tp-size: 4\ncontext-length: 8192\nenable-nccl-nvls: true\n")
    cases = {f"vllm:{k}": ("vllm", v) for k, v in VLLM_CASES.items()}
    cases.update({f"sglang:{k}": ("sglang", v) for k, v in SGLANG_CASES.items()})
    return conformance.read_many(engine_python, cases, cwd=work)


def vllm(readings, name):
    return readings[f"vllm:{name}"]


def sglang(readings, name):
    return readings[f"sglang:{name}"]


def table_default(conformance, engine: str, dest: str):
    doc = conformance.table(engine)
    return next(o["default"] for o in doc["options"] if o["dest"] == dest and o["option_strings"])


def test_every_reading_is_one_engine_document(conformance, readings) -> None:
    want = conformance.pinned_versions()
    for name, doc in readings.items():
        assert doc["reader"] == "engine", name
        assert doc["engine_version"] == want[doc["engine"]], name
        assert doc["_rc"] == 0, name
        for key in (
            "model",
            "served_model_name",
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "data_parallel_size",
            "max_model_len",
            "kv_cache_dtype",
            "gpu_memory_utilization",
            "quantization",
            "dtype",
            "load_format",
            "nnodes",
            "node_rank",
            "trust_remote_code",
            "revision",
            "hf_overrides",
            "cpu_offload_gb",
            "error",
        ):
            assert key in doc, (name, key)


def test_vllm_tp_and_human_readable_length(readings) -> None:
    d = vllm(readings, "tp8_32k")
    assert d["error"] is None and d["form"] == "vllm serve"
    assert d["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert d["tensor_parallel_size"] == 8
    assert d["max_model_len"] == 32000  # "32k": decimal k in vLLM 0.33, not 32768
    assert d["vllm_platform"] == "CpuPlatform"
    d = vllm(readings, "model_eq_32K")
    assert d["error"] is None
    assert d["model"] == "M2" and d["tensor_parallel_size"] == 2
    assert d["max_model_len"] == 32768  # "32K": binary


def test_vllm_O3_and_positional_model(readings) -> None:
    d = vllm(readings, "O3")
    assert d["error"] is None
    assert d["model"] == "M"
    assert d["engine_fields"]["model_tag"] == "M"
    assert d["engine_fields"]["optimization_level"] == "3"  # the parser's type is str


def test_vllm_served_model_names(readings) -> None:
    d = vllm(readings, "served_names")
    assert d["error"] is None
    assert d["model"] == "M"
    assert d["served_model_name"] == ["alpha", "beta"]
    d = vllm(readings, "names_no_model")
    assert d["error"] and "positional" in d["error"]
    assert d["error_stage"] == "parse" and d["served_model_name"] is None


def test_vllm_invalid_value_is_an_error(readings) -> None:
    d = vllm(readings, "bad_tp")
    assert d["error_stage"] == "parse"
    assert "invalid int value: 'eight'" in d["error"]
    assert "--tensor-parallel-size" in d["error"]
    assert d["tensor_parallel_size"] is None


def test_vllm_config_yaml(readings) -> None:
    d = vllm(readings, "config")
    assert d["error"] is None
    assert d["tensor_parallel_size"] == 2  # CLI beats the file
    assert d["max_model_len"] == 8192  # from the file, 8K binary
    assert d["enforce_eager"] is True
    d = vllm(readings, "config_no_model")
    assert d["error"] and "No model specified" in d["error"]


def test_vllm_api_server_form(conformance, readings) -> None:
    d = vllm(readings, "api_server")
    assert d["form"] == "api_server" and d["error"] is None
    assert d["model"] == "M" and d["tensor_parallel_size"] == 2
    d = vllm(readings, "api_server_positional")
    assert d["error"] is None
    assert d["engine_fields"]["model_tag"] == "M2"
    assert d["model"] == table_default(conformance, "vllm", "model") != "M2"


def test_vllm_bare_argv_is_what_follows_serve(readings) -> None:
    d = vllm(readings, "after_serve")
    assert d["form"] == "vllm serve" and d["error"] is None
    assert d["model"] == "M3" and d["tensor_parallel_size"] == 4
    assert d["enable_expert_parallel"] is True
    assert d["comm_flags"]["enable_expert_parallel"] is True


def test_sglang_tp_and_si_context_length(readings) -> None:
    d = sglang(readings, "tp4_1M")
    assert d["error"] is None and d["sglang_backend"] == "llm"
    assert d["model"] == "M"
    assert d["tensor_parallel_size"] == 4  # --tp: a prefix of --tp-size
    assert d["max_model_len"] == d["engine_fields"]["context_length"] == 1000000
    assert sglang(readings, "Mi")["max_model_len"] == 1048576


def test_sglang_prefix_match_and_positional(readings) -> None:
    d = sglang(readings, "mem_frac")
    assert d["error"] is None
    assert d["model"] == "M"
    assert d["gpu_memory_utilization"] == 0.8
    assert d["non_default"]["mem_fraction_static"] == 0.8


def test_sglang_launch_server_and_comm_flags(readings) -> None:
    d = sglang(readings, "launch_server")
    assert d["form"] == "launch_server" and d["error"] is None
    assert d["tensor_parallel_size"] == 2 and d["data_parallel_size"] == 2
    assert d["engine_fields"]["enable_dp_attention"] is True
    assert d["comm_flags"]["enable_nccl_nvls"] is True
    assert d["comm_flags"]["enable_symm_mem"] is False
    d = sglang(readings, "launch_positional")  # launch_server takes no positional model
    assert d["error_stage"] == "parse" and "--model-path" in d["error"]


def test_sglang_invalid_value_and_config(readings) -> None:
    d = sglang(readings, "bad_tp")
    assert d["error_stage"] == "parse" and "invalid int value: 'four'" in d["error"]
    d = sglang(readings, "config")
    assert d["error"] is None
    assert d["tensor_parallel_size"] == 2  # CLI after the file's values
    assert d["max_model_len"] == 8192
    assert d["comm_flags"]["enable_nccl_nvls"] is True


def test_readings_stay_within_their_timeout(conformance, readings) -> None:
    for name, doc in readings.items():
        assert doc["elapsed_s"] < conformance.READ_TIMEOUT_S, name
        assert doc["_wall_s"] < conformance.READ_TIMEOUT_S + 30, name


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_reader_ends_at_its_timeout(conformance, engine_python: str, engine: str) -> None:
    """A deadline shorter than the engine's import: the watchdog answers and exits."""
    t0 = time.monotonic()
    d = conformance.run_reader(engine_python, engine, [engine, "serve", "M"], timeout=1.0)
    wall = time.monotonic() - t0
    assert d["error"] == "timed out after 1 s" and d["error_stage"] == "timeout"
    assert d["_rc"] == 124
    assert wall < 1.0 + 15, "the child must end soon after its deadline (start-up included)"


def test_reader_source_imports_no_flightcheck(conformance) -> None:
    text = conformance.READER.read_text()
    assert "import flightcheck" not in text and "from flightcheck" not in text
    assert "from ." not in text


def _reader_module(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("engine_reader_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(
    ("engine", "argv", "form", "engine_argv"),
    [
        ("vllm", ["vllm", "serve", "M", "-tp", "2"], "vllm serve", ["M", "-tp", "2"]),
        ("vllm", ["/venv/bin/vllm", "serve", "M"], "vllm serve", ["M"]),
        ("vllm", ["M", "-tp", "2"], "vllm serve", ["M", "-tp", "2"]),
        ("vllm", ["CUDA_VISIBLE_DEVICES=0,1", "vllm", "serve", "M"], "vllm serve", ["M"]),
        (
            "vllm",
            ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "M"],
            "api_server",
            ["--model", "M"],
        ),
        ("vllm", ["/usr/bin/python3.11", "-m", "vllm.entrypoints.cli.main", "serve", "M"], "vllm serve", ["M"]),
        ("sglang", ["sglang", "serve", "M"], "sglang serve", ["M"]),
        (
            "sglang",
            ["python", "-m", "sglang.launch_server", "--model-path", "M"],
            "launch_server",
            ["--model-path", "M"],
        ),
        ("sglang", ["--model-path", "M"], "sglang serve", ["--model-path", "M"]),
    ],
)
def test_reader_command_forms(conformance, engine, argv, form, engine_argv) -> None:
    """Which entry point a command line names (no engine needed)."""
    from flightcheck._knowledge import engines

    got_form, got_argv, _env = _reader_module(conformance.READER).split_command(engines.reader_spec(engine), argv)
    assert (got_form, got_argv) == (form, engine_argv)


def test_reader_usage_errors_are_json(conformance, tmp_path) -> None:
    import subprocess
    import sys

    for args in (["foo", "--", "x"], ["vllm"], ["--spec", "{}", "--", "x"]):
        proc = subprocess.run(
            [sys.executable, str(conformance.READER), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
            cwd=str(tmp_path),
        )
        assert proc.returncode == 2
        doc = json.loads(proc.stdout)
        assert doc["error_stage"] == "usage" and doc["error"]
