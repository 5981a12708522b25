"""The SGLang-only terms of the memory model: a vision model's fraction and
multimodal reservation, its prefill-graph rule, the derived context length."""

from __future__ import annotations

from flightcheck._knowledge import sglang
from flightcheck._memory.budget import default_reserve
from flightcheck._memory.config import parse
from flightcheck._memory.model import MemoryModel
from flightcheck._memory.weights import Layout
from support.ckptgen import load_config

QWEN2_VL = {
    **load_config("qwen2-7b"),
    "architectures": ["Qwen2VLForConditionalGeneration"],
    "vision_config": {"depth": 32, "embed_dim": 1280, "hidden_size": 3584},
}


def test_vision_model_terms() -> None:
    cfg = parse(QWEN2_VL)
    # SGLang's getattr defaults: no num_hidden_layers in Qwen2-VL's vision_config -> 24
    assert cfg.vision == (24, 3584)
    opts = MemoryModel(engine="sglang", cfg=cfg)._opts()
    assert opts == {"vision": (24, 3584), "prefill_graphs": False}  # not on the BCG allowlist
    # Kimi-K3 is on it: its prefill graphs stay (and its vision_config names no SGLang keys)
    k3 = parse(load_config("kimi-k3"))
    assert k3.vision == (24, 1024)
    assert "prefill_graphs" not in MemoryModel(engine="sglang", cfg=k3)._opts()


def test_multimodal_reservation_comes_off_the_kv_budget() -> None:
    cfg = parse(QWEN2_VL)
    mm = sglang.mm_reservation_bytes([], {})
    assert mm == 100 << 20
    assert sglang.mm_reservation_bytes(["--mm-feature-transport=cuda_ipc"], {}) == (100 + 1024) << 20
    assert sglang.mm_reservation_bytes([], {"SGLANG_VLM_CACHE_SIZE_MB": "0"}) == 0
    assert default_reserve(cfg, Layout(1), "sglang", mm_reserved=mm) == (mm, {"multimodal_cache": mm})
    text_only = parse(load_config("qwen2-7b"))
    assert default_reserve(text_only, Layout(1), "sglang", mm_reserved=mm) == (0, {})


def test_sglang_default_length_is_its_own_rule() -> None:
    doc = {**load_config("qwen2-7b"), "rope_scaling": {"type": "linear", "factor": 2.0}}
    cfg = parse(doc)
    assert cfg.derived_context == 2 * doc["max_position_embeddings"]
    m = MemoryModel(engine="sglang", cfg=cfg)
    assert m.max_model_len == cfg.derived_context
