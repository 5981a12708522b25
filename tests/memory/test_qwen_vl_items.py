"""Qwen-VL's profiled item by vLLM release (``flightcheck._knowledge.vllm.qwen_vl_item``),
its processor configs read from the checkpoint (``_memory.config.qwen_processor``) and the
encoder terms it gives (``_memory.budget.encoder_terms``)."""

from __future__ import annotations

from flightcheck._knowledge import vllm
from flightcheck._knowledge.vllm import QwenVisionProcessor, qwen_vl_item
from flightcheck._memory.budget import Batch, encoder_terms
from flightcheck._memory.config import parse
from flightcheck._memory.weights import Layout

R = vllm._release
#: Qwen3-VL's processors: 4096 x 4096 images, 25,165,824-pixel videos, 16-pixel patches
QWEN3 = QwenVisionProcessor(True, 16, 2, 2, 65536, 16777216, 4096, 25165824, 2)
QWEN3_CONFIG = {
    "architectures": ["Qwen3VLMoeForConditionalGeneration"],
    "model_type": "qwen3_vl_moe",
    "text_config": {
        "hidden_size": 2048,
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "vocab_size": 151936,
        "max_position_embeddings": 262144,
    },
    "vision_config": {
        "deepstack_visual_indexes": [8, 16, 24],
        "depth": 27,
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "num_heads": 16,
        "out_hidden_size": 2048,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    },
}
IMAGE = {"size": {"longest_edge": 16777216, "shortest_edge": 65536}, "patch_size": 16, "merge_size": 2}
VIDEO = {"size": {"longest_edge": 25165824, "shortest_edge": 4096}, "temporal_patch_size": 2}


def test_qwen3_vl_before_0_13_counts_12_5_tokens_per_video_token() -> None:
    # 24,576 frames (the cap) fit 65,536 tokens; the video processor shrinks them to 32 x 32,
    # one token per two frames: 12,288 tokens, x 12.5 = 153,600 (what public 0.11.0 logs of
    # Qwen3-VL print: "Encoder cache will be initialized with a budget of 153600 tokens")
    for release in ("0.11.0", "0.11.2", "0.12.0"):
        item = qwen_vl_item(R(release), QWEN3, 65536)
        assert (item.modality, item.budget_tokens, item.encoder_tokens) == ("video", 153600, 12288)
        assert vllm.encoder_output_padded(R(release))


def test_qwen3_vl_from_0_13_neither_multiplies_nor_pads() -> None:
    # the 4096 x 4096 image's (256 x 256 patches) / 4 = 16,384 tokens beat the video's 12,288
    for release in ("0.13.0", "0.14.0", "0.15.0", "0.17.0", "0.33.0"):
        item = qwen_vl_item(R(release), QWEN3, 65536)
        assert (item.modality, item.budget_tokens, item.encoder_tokens) == ("image", 16384, 16384)
        assert not vllm.encoder_output_padded(R(release))
    assert not vllm.encoder_output_padded(R("0.10.2")) and not vllm.encoder_output_padded(None)


def test_qwen3_vl_video_by_release_when_it_beats_the_image() -> None:
    # 1024 x 1024 images (1,024 tokens) against 8 x 1024^2-pixel videos: the video wins
    p = QwenVisionProcessor(True, 16, 2, 2, 4096, 1 << 20, 4096, 8 << 20, 2)
    # 0.13.0 - 0.14.0: the most frames whose tokens fit max_model_len (the frames shrink
    # together once 8 MiB pixels bind, down to 32 x 32 each: one token per two frames)
    old = qwen_vl_item(R("0.14.0"), p, 4096)
    assert old.modality == "video" and old.budget_tokens == old.encoder_tokens == 4096
    # from 0.15.0: two frames of the largest image under 8 MiB / 2 pixels: 2048 x 2048 -> 4,096
    assert qwen_vl_item(R("0.15.0"), p, 4096) == vllm.QwenItem("video", 4096, 4096)
    # a short max_model_len bounds the old search, not the two-frame video
    assert qwen_vl_item(R("0.14.0"), p, 2048).budget_tokens <= 2048
    assert qwen_vl_item(R("0.15.0"), p, 2048).budget_tokens == 4096


def test_qwen2_vl_video_frames_fit_max_model_len() -> None:
    # Qwen2.5-VL: 3584 x 3584 images, 16,384 tokens a frame pair; at most 14 frames (7 pairs)
    p = QwenVisionProcessor(False, 14, 2, 2, 3136, 12845056, 3136, 12845056, 2)
    assert qwen_vl_item(R("0.33.0"), p, 4096).budget_tokens == 16384  # the image
    assert qwen_vl_item(R("0.33.0"), p, 32768) == vllm.QwenItem("video", 32768, 32768)  # 4 frames
    assert qwen_vl_item(R("0.33.0"), p, 1 << 20).budget_tokens == 7 * 16384  # the 14-frame cap


def test_processor_configs_are_read_and_required() -> None:
    cfg = parse(QWEN3_CONFIG, None, IMAGE, VIDEO)
    assert cfg.tower is not None and cfg.tower.qwen == QWEN3
    # no guessing: without the video processor's limits Qwen3-VL has no item
    assert parse(QWEN3_CONFIG, None, IMAGE, None).tower.qwen is None  # type: ignore[union-attr]
    # min_pixels / max_pixels win over size (vLLM's _get_vision_size)
    legacy = {**IMAGE, "min_pixels": 3136, "max_pixels": 1003520}
    assert parse(QWEN3_CONFIG, None, legacy, VIDEO).tower.qwen.image_max == 1003520  # type: ignore[union-attr]


def test_0_12_holds_the_padded_outputs() -> None:
    cfg = parse(QWEN3_CONFIG, None, IMAGE, VIDEO)
    _, held_012 = encoder_terms(cfg, Layout(2, 1), Batch(8192, 256, max_model_len=65536, release=R("0.12.0")))
    _, held_033 = encoder_terms(cfg, Layout(2, 1), Batch(8192, 256, max_model_len=65536, release=R("0.33.0")))
    # one video padded to 153,600 tokens x 8,192 values (2,048 x (1 + 3 deepstack)) x 2 bytes
    assert held_012 == 153600 * 8192 * 2
    # 0.33.0: one 16,384-token image as encoded
    assert held_033 == 16384 * 8192 * 2
