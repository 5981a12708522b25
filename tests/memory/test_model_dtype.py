"""The dtype vLLM runs the model in (``vllm.model_dtype``: ``--dtype``, and "auto"'s float32
downcast): the unquantized weights, the KV cache and the activations follow it."""

from __future__ import annotations

from pathlib import Path

import pytest

from flightcheck._checkpoint import load
from flightcheck._knowledge import vllm
from flightcheck._memory import build
from flightcheck._vocabulary.intent import Intent
from support.ckptgen import load_config, write_checkpoint

GiB = 1 << 30


def test_the_rule_as_read() -> None:
    # config/model.py _get_and_verify_dtype (0.33.0), vllm/config.py (0.6.0)
    assert vllm.model_dtype("float32", "bfloat16") == "float32"
    assert vllm.model_dtype("float", "bfloat16") == "float32"
    assert vllm.model_dtype("half", "bfloat16") == "float16"
    assert vllm.model_dtype("BFloat16", "float16") == "bfloat16"
    assert vllm.model_dtype(None, "bfloat16") == "bfloat16"
    assert vllm.model_dtype("auto", "float16") == "float16"
    # "auto" downcasts a float32 config to 16 bits (bfloat16 or float16 by platform: two bytes)
    assert vllm.model_dtype("auto", "float32") == "bfloat16"
    assert vllm.model_dtype(None, "float32") == "bfloat16"
    # a spelling vLLM refuses at startup leaves the config's
    assert vllm.model_dtype("int4", "bfloat16") == "bfloat16"


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    path = write_checkpoint(tmp_path_factory.mktemp("m") / "llama", load_config("llama-3-8b"), shards=2)
    return load(str(path), cache_env={"FLIGHTCHECK_NO_CACHE": "1"})


def _mem(ck, **intent):  # type: ignore[no-untyped-def]
    return build(ck, Intent(model=str(ck.path), max_model_len=8192, **intent), total=80 * GiB, engine_version="0.19.0")


def test_float32_doubles_the_weights_kv_and_activations(llama) -> None:  # type: ignore[no-untyped-def]
    half, full = _mem(llama), _mem(llama, dtype="float32")
    assert half.cfg is not None and full.cfg is not None
    assert (half.cfg.dtype_name, full.cfg.dtype_name) == ("bfloat16", "float32")
    assert full.weights() == pytest.approx(2 * half.weights(), rel=1e-6)
    assert full.kv().per_token == 2 * half.kv().per_token
    # the profile's peak grows too (the forward pass's tensors; the sampler's FP32 logits do not)
    assert full.reserve_parts["activations"] > half.reserve_parts["activations"]
    # float16 takes the same two bytes as the config's bfloat16
    f16 = _mem(llama, dtype="half")
    assert f16.cfg is not None and f16.cfg.dtype_name == "float16"
    assert f16.weights() == pytest.approx(half.weights()) and f16.kv().per_token == half.kv().per_token


def test_auto_downcasts_a_float32_config(tmp_path: Path) -> None:
    cfg = {**load_config("llama-3-8b"), "torch_dtype": "float32", "num_hidden_layers": 2}
    ck = load(str(write_checkpoint(tmp_path / "f32", cfg, shards=1)), cache_env={"FLIGHTCHECK_NO_CACHE": "1"})
    auto, kept = _mem(ck), _mem(ck, dtype="float32")
    assert auto.cfg is not None and kept.cfg is not None
    assert auto.cfg.dtype_bytes == 2 and kept.cfg.dtype_bytes == 4
    assert kept.weights() == pytest.approx(2 * auto.weights(), rel=1e-6)
