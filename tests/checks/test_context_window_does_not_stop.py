"""FC405: the context window as the engine derives it, after the launch's config overrides.

vLLM 0.33.0: ``--hf-overrides`` is applied to the Hugging Face config before the window
is derived (config/model.py ``ModelConfig.__post_init__``: flat keys through
``config.update``, dict values into a sub-config recursively, ``_apply_dict_overrides``);
the window is the smallest of every length key the text config has
(transformers_utils/model_arch_config_convertor.py ``derive_max_model_len_and_key``),
``model_max_length`` replacing it, times a rope factor (config/model.py
``_get_and_verify_max_len``). SGLang 0.5.23 applies ``--json-model-override-args`` the
same way before ``_derive_context_length``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.ckptgen import load_config, write_checkpoint
from support.evaluation import facts, results

TINY = load_config("tiny-llama")  # max_position_embeddings 2048


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def fc405(tmp_path: Path, config: dict[str, Any], engine: str = "vllm", **intent: Any) -> set[tuple[str, str]]:
    root = write_checkpoint(tmp_path / "m", {**TINY, **config}, shards=1, dense=True)
    got = results(facts("b300"), model=str(root), engine=engine, **intent)["FC405"]
    return {(r.status.value, r.severity.value) for r in got}


STOP = ("fail", "error")


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_hf_overrides_that_raise_the_window_do_not_stop(tmp_path: Path, engine: str) -> None:
    over = {"max_position_embeddings": 8192}
    assert STOP not in fc405(tmp_path, {}, engine, max_model_len=6144, hf_overrides=over)
    assert STOP in fc405(tmp_path / "x", {}, engine, max_model_len=6144)  # without them: the stop


def test_hf_overrides_into_a_sub_config_raise_its_window(tmp_path: Path) -> None:
    """A dict value updates the sub-config of that name (vLLM ``_update_nested``)."""
    inner = {k: v for k, v in TINY.items() if k != "architectures"}
    wrapper = {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava", "text_config": inner}
    root = write_checkpoint(tmp_path / "m", {**TINY}, shards=1, dense=True)
    import json

    (root / "config.json").write_text(json.dumps(wrapper))
    node = facts("b300")
    over = {"text_config": {"max_position_embeddings": 8192}}
    got = results(node, model=str(root), max_model_len=6144, hf_overrides=over)["FC405"]
    assert STOP not in {(r.status.value, r.severity.value) for r in got}, [r.message for r in got]
    # a flat key sets the outer config: the text config's window is unchanged (vLLM's hf_text_config)
    flat = results(node, model=str(root), max_model_len=6144, hf_overrides={"max_position_embeddings": 8192})
    assert STOP in {(r.status.value, r.severity.value) for r in flat["FC405"]}


def test_the_smallest_length_key_is_the_window(tmp_path: Path) -> None:
    """``max_sequence_length: 1024`` beside ``max_position_embeddings: 2048``: vLLM takes the
    smaller and refuses 1025."""
    assert STOP in fc405(tmp_path / "a", {"max_sequence_length": 1024}, max_model_len=1025)
    assert STOP not in fc405(tmp_path / "b", {"max_sequence_length": 1024}, max_model_len=1024)


def test_model_max_length_replaces_the_window(tmp_path: Path) -> None:
    """Command-R's ``model_max_length`` sets the window even above the other keys."""
    assert STOP not in fc405(tmp_path, {"model_max_length": 4096}, max_model_len=4096)
