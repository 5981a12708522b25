"""--config YAML as SGLang 0.5.23 turns it into words
(srt/utils/server_args_config_parser.py ``ConfigArgumentMerger._convert_config_to_args``),
not vLLM's ``key: false`` -> ``--no-key``; the conformance suite checks the same words
against SGLang's merger."""

from __future__ import annotations

from pathlib import Path

import pytest

from flightcheck._launch import parse_command
from flightcheck._launch.intent_read import read_intent
from flightcheck._launch.tokens import config_tokens, sglang_config_words
from flightcheck._vocabulary.errors import UsageError


def test_store_true_false_is_dropped_and_other_values_are_words(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("trust-remote-code: false\nenable-metrics: true\ntp-size: 2\nserved-model-name: null\n")
    words, _ = config_tokens(str(cfg), "sglang")
    assert words == ["--enable-metrics", "--tp-size", "2", "--served-model-name", "None"]
    vllm_words, _ = config_tokens(str(cfg), "vllm")
    assert "--no-trust-remote-code" in vllm_words  # vLLM's own semantics, unchanged


def test_an_option_sglang_refuses_in_a_file_is_a_config_problem(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="SGLang refuses the option 'enable-dp-attention'"):
        sglang_config_words({"enable-dp-attention": False}, "c.yaml")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model-path: m\nenable-tf32-matmul: false\n")
    cmd = parse_command(["sglang", "serve", "--config", str(cfg)])
    read_intent(cmd)
    assert cmd.intent.refused == [f"--config {cfg}: SGLang refuses the option 'enable-tf32-matmul' in a config file"]
    assert cmd.intent.config_problem == cmd.intent.refused[0]  # FC711 blocks the launch


def test_sglang_reading_of_a_config_file(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model-path: my/model\ntp-size: 4\ntrust-remote-code: false\ncontext-length: 8192\n")
    cmd = parse_command(["sglang", "serve", "--config", str(cfg)])
    read_intent(cmd)
    assert cmd.intent.model == "my/model" and cmd.intent.tensor_parallel_size == 4
    assert cmd.intent.max_model_len == 8192 and not cmd.intent.refused
    assert not any("trust-remote-code" in f for f in cmd.intent.engine_flags)
