"""The built-in reader reads as vLLM 0.33 / SGLang 0.5.23 do (each case checked against the
installed engines' own parsers; tests/conformance keeps the corpus readings honest)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flightcheck._launch import parse_command


def read(*argv: str):
    return parse_command(list(argv), env={"PATH": "/nonexistent"}).intent


def test_vllm_pcp_multiplies_the_world() -> None:
    it = read("vllm", "serve", "M", "-tp", "4", "-pcp", "2")
    assert (it.prefill_context_parallel_size, it.world_size, it.gpus_per_node) == (2, 8, 8)
    assert it.reader == "built-in" and not it.refused


def test_vllm_prefix_abbreviation() -> None:
    assert read("vllm", "serve", "M", "--tensor-parallel", "8").tensor_parallel_size == 8


@pytest.mark.parametrize("argv", [["-O3", "M"], ["--skip-tokenizer-init", "M"], ["--enforce-eager", "M", "-tp", "2"]])
def test_vllm_positional_model_after_boolean_flags(argv: list[str]) -> None:
    assert read("vllm", "serve", *argv).model == "M"


def test_vllm_enable_disable_pairs() -> None:
    assert read("vllm", "serve", "M", "--enforce-eager").enforce_eager is True
    assert read("vllm", "serve", "M", "--enforce-eager", "--no-enforce-eager").enforce_eager is False
    assert read("vllm", "serve", "M", "--enable-expert-parallel").enable_expert_parallel is True


def test_vllm_expands_only_the_bare_config_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text("tensor-parallel-size: 4\n")
    assert read("vllm", "serve", "M", "--config", "c.yaml", "-tp", "2").tensor_parallel_size == 2
    assert read("vllm", "serve", "M", "--config", "c.yaml").tensor_parallel_size == 4
    # --config=c.yaml is an ordinary option: vLLM never opens the file
    assert read("vllm", "serve", "M", "--config=c.yaml").tensor_parallel_size == 1
    assert read("vllm", "serve", "M", "--config", "missing.yaml").refused


@pytest.mark.parametrize("dtype", ["fp8_inc", "turboquant_k8v4", "nvfp4_4over6"])
def test_vllm_new_kv_dtypes(dtype: str) -> None:
    it = read("vllm", "serve", "M", "--kv-cache-dtype", dtype)
    assert it.kv_cache_dtype == dtype and not it.unparsed


def test_vllm_api_server_ignores_the_positional_model() -> None:
    it = read("python", "-m", "vllm.entrypoints.openai.api_server", "M2", "--model", "M")
    assert it.model == "M"
    entry = read("python3", "-m", "vllm.entrypoints.launchers.api_server.entry", "--model", "M", "-tp", "2")
    assert (entry.engine, entry.model, entry.tensor_parallel_size) == ("vllm", "M", 2)


def test_vllm_served_model_names_take_several_values() -> None:
    it = read("vllm", "serve", "M", "--served-model-name", "alpha", "beta", "-tp", "2")
    assert it.tensor_parallel_size == 2 and "--served-model-name=alpha beta" in it.engine_flags


def test_vllm_multi_node_dp_uses_the_local_ranks() -> None:
    it = read(
        "vllm", "serve", "M", "-tp", "1", "-dp", "16", "-dpl", "8", "--data-parallel-start-rank", "8", "--headless"
    )
    assert (it.data_parallel_size, it.data_parallel_size_local, it.gpus_per_node) == (16, 8, 8)


def test_vllm_numbers_and_records() -> None:
    it = read(
        "vllm", "serve", "M", "--max-num-batched-tokens", "16k", "--max-num-seqs", "64",
        "--kv-cache-memory-bytes", "8G", "--cpu-offload-gb", "4", "--hf-overrides", '{"a": 1}',
        "--dtype", "bfloat16", "--load-format", "dummy",
    )  # fmt: skip
    assert (it.max_num_batched_tokens, it.max_num_seqs, it.kv_cache_memory_bytes) == (16000, 64, 8 * 2**30)
    assert (it.cpu_offload_gb, it.hf_overrides, it.dtype, it.load_format) == (4.0, {"a": 1}, "bfloat16", "dummy")


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["M", "-tp", "eight"], "invalid int value"),
        (["M", "--port", "$PORT"], "invalid int value"),
        (["M", "--dtype", "fp7"], "invalid choice"),
        (["M", "--swap-space", "4"], "unrecognized arguments"),
        (["--served-model-name", "a", "-tp", "2"], "positional"),
        (["M", "--attention-config", '{"no_such_field": 1}'], "AttentionConfig"),
    ],
)
def test_vllm_refusals(argv: list[str], why: str) -> None:
    it = read("vllm", "serve", *argv)
    assert it.refused and why in it.refused[0]


def test_sglang_serve_positional_and_abbreviations() -> None:
    it = read("sglang", "serve", "M", "--mem-frac", "0.8", "--context-len", "1M", "--tp", "4")
    assert (it.model, it.gpu_memory_utilization, it.max_model_len, it.tensor_parallel_size) == ("M", 0.8, 10**6, 4)


@pytest.mark.parametrize(("text", "value"), [("1M", 10**6), ("1Mi", 2**20), ("32k", 32000), ("4Ki", 4096)])
def test_sglang_si_suffixes(text: str, value: int) -> None:
    assert read("sglang", "serve", "--model-path", "M", "--context-length", text).max_model_len == value


def test_sglang_lower_case_m_is_refused() -> None:
    assert read("sglang", "serve", "--model-path", "M", "--context-length", "1m").refused


def test_sglang_parallel_layouts() -> None:
    replicas = read("python3", "-m", "sglang.launch_server", "--model-path", "M", "--tp", "4", "--dp", "2")
    assert (replicas.data_parallel_size, replicas.world_size) == (2, 8)
    attn = read("python3", "-m", "sglang.launch_server", "--model-path", "M", "--tp", "8", "--attn-dp-size", "4")
    assert (attn.data_parallel_size, attn.world_size) == (1, 8)
    legacy = read("sglang", "serve", "M", "--tp", "8", "--dp", "8", "--enable-dp-attention")
    assert legacy.world_size == 8
    deepep = read("sglang", "serve", "M", "--tp", "8", "--moe-a2a-backend", "deepep")
    assert deepep.enable_expert_parallel is True


def test_sglang_ignores_config_with_equals() -> None:
    it = read("sglang", "serve", "--model-path", "M", "--config=nope.yaml")
    assert not it.refused


def test_refused_lines_are_still_read_for_the_other_checks() -> None:
    it = read("vllm", "serve", "M", "-tp", "8", "--swap-space", "4")
    assert it.refused and it.tensor_parallel_size == 8 and it.model == "M"


def test_secret_values_never_reach_the_engine_flags() -> None:
    it = read("vllm", "serve", "M", "--api-key", "s3cr3t", "-tp", "2")
    assert "--api-key=<redacted>" in it.engine_flags and not any("s3cr3t" in f for f in it.engine_flags)
