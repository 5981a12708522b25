"""The vision encoder in vLLM's profile run (v1/worker/gpu_model_runner.py ``profile_run``):
the encoder's own peak on a dummy batch of maximal images, and its outputs held through the
forward pass and the sampler — ``vision_encoder`` in the reserve breakdown, by version.

Configs are the public ones of tests/fixtures/memory/model_configs.json (LLaVA-1.5-7B,
Mistral-Small-3.2-24B, Qwen3-VL-30B-A3B, Llama-3-8B); Kimi-K3's term is in test_kimi_k3.py.
"""

from __future__ import annotations

import pytest

from flightcheck._knowledge import vllm
from flightcheck._memory.budget import Batch, default_reserve, encoder_terms, profile_peak
from flightcheck._memory.config import ModelConfig, parse
from flightcheck._memory.weights import Layout
from support.memory_accuracy import GiB, _config, evaluate, load


def _cfg(name: str) -> ModelConfig:
    _, configs = load()
    return parse(_config(configs[name]))


def test_image_tokens_come_from_config_json_as_vllm_derives_them() -> None:
    llava = _cfg("llava-1.5-7b").tower
    # CLIP ViT-L/14 at 336 px: 24 x 24 patches + the class token; the "default"
    # feature-select strategy hands the language model the 576 patch tokens
    assert llava is not None and (llava.patches_per_item, llava.tokens_per_item) == (577, 576)
    assert llava.out_hidden == 4096 and llava.layers == 24
    mistral = _cfg("mistral-small-3.2-24b").tower
    # Pixtral at 1540 px, patch 14, spatial merge 2: 110 x 110 patches -> 55 x 55 tokens
    assert mistral is not None and (mistral.patches_per_item, mistral.tokens_per_item) == (12100, 3025)
    qwen = _cfg("qwen3-vl-30b-a3b").tower
    # Qwen-VL's pixel limits live in preprocessor_config.json: no item size, but the merge
    # factor (2 x 2) and the deepstack outputs (2048 x (1 + 3)) are in config.json
    assert qwen is not None and qwen.tokens_per_item is None
    assert (qwen.layers, qwen.hidden, qwen.patches_per_token, qwen.out_hidden) == (27, 1152, 4, 8192)


def test_a_text_model_has_no_encoder_term() -> None:
    cfg = _cfg("llama-3-8b")
    assert cfg.tower is None
    _, parts = default_reserve(cfg, Layout(1), "vllm", batch=Batch(tokens=8192, seqs=1024))
    assert "vision_encoder" not in parts
    assert encoder_terms(cfg, Layout(1), Batch()) == (0, 0)


def test_a_vision_model_gets_the_term_and_the_reserve_grows_by_it() -> None:
    cfg = _cfg("qwen3-vl-30b-a3b")
    batch = Batch(tokens=8192, seqs=256, sampler="sort")
    reserve, parts = default_reserve(cfg, Layout(2), "vllm", batch=batch)
    assert parts["vision_encoder"] > 0
    assert reserve == sum(parts.values())
    # the same model without the encoder's profile (V0 before 0.8.0): the text model alone
    bare, bare_parts = default_reserve(cfg, Layout(2), "vllm", batch=Batch(tokens=8192, seqs=256, encoder=False))
    assert "vision_encoder" not in bare_parts and reserve - bare == parts["vision_encoder"]


def test_encoder_profiling_is_gated_by_version() -> None:
    # V1, whose profile_run runs the encoder, is the default engine from 0.8.0
    assert vllm.encoder_profiled((0, 8, 0)) and vllm.encoder_profiled((0, 33, 0))
    assert not vllm.encoder_profiled((0, 7, 3)) and not vllm.encoder_profiled((0, 6, 4, 1))
    assert vllm.encoder_profiled(None)  # unknown: every V1 release profiles it
    cfg = _cfg("mistral-small-3.2-24b")
    on = encoder_terms(cfg, Layout(1), Batch(tokens=8192, seqs=1024, encoder=vllm.encoder_profiled((0, 11, 0))))
    off = encoder_terms(cfg, Layout(1), Batch(tokens=8192, seqs=1024, encoder=vllm.encoder_profiled((0, 7, 3))))
    assert on[0] > 0 and on[1] > 0 and off == (0, 0)


def test_items_follow_the_encoder_budget() -> None:
    # budget = max(batched tokens, tokens per item); items = budget // item, at least one
    assert vllm.encoder_items(576, 2048, 256) == 3
    assert vllm.encoder_items(3025, 8192, 1024) == 2
    assert vllm.encoder_items(16384, 8192, 256) == 1  # one item larger than the batch
    # capped by max_num_seqs x images per prompt (max_model_len // tokens per item)
    assert vllm.encoder_items(576, 8192, 1, max_model_len=1200) == 2
    assert vllm.encoder_items(576, 8192, 1) == 1


def test_outputs_held_through_the_forward_pass_are_counted_once() -> None:
    """Mistral-Small-3.2 at the H100 defaults: two 3025-token images, 5120 values each, held
    while the forward pass (the larger text phase here) runs — the term is what they add."""
    cfg = _cfg("mistral-small-3.2-24b")
    batch = Batch(tokens=8192, seqs=1024, sampler="flashinfer")
    run, held = encoder_terms(cfg, Layout(1), batch)
    assert held == 2 * 3025 * 5120 * 2
    text, extra = profile_peak(cfg, Layout(1), batch)
    assert run < text  # 24,200 patches through a 1024-wide tower stay below the text model
    assert extra == held


def test_tp_splits_the_encoder_layers() -> None:
    """mm_encoder_tp_mode "weights" (vLLM's default): heads and MLP split over the TP ranks,
    the hidden states whole on each."""
    cfg = _cfg("qwen3-vl-30b-a3b")
    batch = Batch(tokens=16384, seqs=1024)
    tp1, held1 = encoder_terms(cfg, Layout(1), batch)
    tp4, held4 = encoder_terms(cfg, Layout(4), batch)
    assert tp4 < tp1 and held4 == held1
    # the budget's worth grows with the batch: 16,384 tokens of 2 x 2-merged patches
    half, _ = encoder_terms(cfg, Layout(1), Batch(tokens=8192, seqs=1024))
    assert tp1 == pytest.approx(2 * half, rel=1e-6)


def test_public_vision_launches_score_with_the_term() -> None:
    rows = {r.index: r for r in evaluate()}
    # LLaVA-1.5-7B AWQ on an RTX 4080 (0.10.2) and Mistral-Small-3.2-24B on an H100 (0.11.0)
    assert rows[19].within and rows[67].within
    assert rows[19].logged_gib == 8.99 and rows[67].logged_gib == 28.2
    # Qwen3-VL-30B-A3B (0.12.0): with its processor configs (vllm.qwen_vl_item) the padded
    # 153,600-token video is held: +0.73 GiB, within (+2.95 with the budget's worth alone)
    assert rows[24].within and rows[24].error_gib is not None and 0 < rows[24].error_gib < 1.0
    # the same model at TP 4 in 0.11.0 (104), whose log prints the 153,600-token budget: +0.15
    assert rows[104].within and rows[104].error_gib is not None and abs(rows[104].error_gib) < 0.5


def test_an_absurd_image_size_gives_no_item_size() -> None:
    """A hostile vision_config (a 10^9-pixel side) is as good as absent: no item size, the
    budget's worth instead of an astronomical reserve."""
    doc = {
        "architectures": ["LlavaForConditionalGeneration"],
        "model_type": "llava",
        "text_config": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4},
        "vision_config": {
            "model_type": "clip_vision_model",
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "image_size": 10**9,
            "patch_size": 14,
        },
    }
    tower = parse(doc).tower
    assert tower is not None and tower.tokens_per_item is None
    run, held = encoder_terms(parse(doc), Layout(1), Batch(tokens=2048, seqs=256))
    assert 0 < run < GiB // 4 and held == 2048 * 64 * 2
