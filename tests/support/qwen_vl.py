"""A public Qwen3-VL-30B-A3B-shaped config.json (text 2048 x 48 layers, vision tower 1152 x 27
with three deepstack levels) and its processors' pixel limits (4096 x 4096 images,
25,165,824-pixel videos, 16-pixel patches), shared by the memory tests of Qwen-VL's profile
run."""

from __future__ import annotations

from typing import Any

QWEN3_CONFIG: dict[str, Any] = {
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
IMAGE: dict[str, Any] = {"size": {"longest_edge": 16777216, "shortest_edge": 65536}, "patch_size": 16, "merge_size": 2}
VIDEO: dict[str, Any] = {"size": {"longest_edge": 25165824, "shortest_edge": 4096}, "temporal_patch_size": 2}
