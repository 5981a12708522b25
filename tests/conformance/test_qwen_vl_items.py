"""Qwen-VL's maximal item (``flightcheck._knowledge.vllm.qwen_vl_item``) against the
installed vLLM's own ``get_max_image_tokens`` / ``get_max_video_tokens`` (qwen2_vl.py,
qwen3_vl.py), called in the engine's interpreter with the config and processors stood in
for (no GPU, no checkpoint)."""

from __future__ import annotations

import json

import msgspec

from flightcheck._knowledge import vllm

#: vLLM's own processing info for a QwenVisionProcessor's figures (dict ``a``), the config
#: and processors stood in for; shared by the probes below
STUB = r"""
import json, sys
from types import SimpleNamespace as NS
from vllm.model_executor.models.qwen3_vl import Qwen3VLProcessingInfo, Qwen3VLDummyInputsBuilder
from vllm.model_executor.models.qwen2_vl import Qwen2VLProcessingInfo, Qwen2VLDummyInputsBuilder
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor


def stub_info(a):
    info = object.__new__(Qwen3VLProcessingInfo if a["qwen3"] else Qwen2VLProcessingInfo)
    vc = NS(patch_size=a["patch"], spatial_merge_size=a["merge"], temporal_patch_size=a["temporal"])
    info.get_hf_config = lambda: NS(vision_config=vc)
    info._merge_and_resolve_mm_processor_kwargs = lambda kw: {}
    img = NS(size={"shortest_edge": a["image_min"], "longest_edge": a["image_max"]})
    vid = object.__new__(Qwen3VLVideoProcessor)
    vid.size = {"shortest_edge": a["video_min"], "longest_edge": a["video_max"]}
    vid.temporal_patch_size = a["video_temporal"]
    info.get_image_processor = lambda: img
    info.get_video_processor = lambda: vid
    return info, img
"""

PROBE = (
    STUB
    + r"""
from vllm.multimodal.encoder_budget import MultiModalBudget
out = []
for a, seq_len in json.loads(sys.argv[1]):
    info, _ = stub_info(a)
    image, video = info.get_max_image_tokens(), info.get_max_video_tokens(seq_len, {"video": 1})
    # the modality profile_run encodes: vLLM's own choice (multimodal/encoder_budget.py)
    chosen = MultiModalBudget.get_modality_with_max_tokens(NS(mm_max_toks_per_item={"image": image, "video": video}))
    out.append([image, video, chosen])
print(json.dumps(out))
"""
)

Q = vllm.QwenVisionProcessor
CASES = [
    # Qwen3-VL's processors (16-pixel patches, 4096^2 images, 25,165,824-pixel videos)
    (Q(True, 16, 2, 2, 65536, 16777216, 4096, 25165824, 2), 65536),
    (Q(True, 16, 2, 2, 65536, 16777216, 4096, 25165824, 2), 8192),
    # a narrow image budget: the factorisation's aspect-ratio limit matters (251 cells is prime)
    (Q(True, 16, 2, 2, 1024, 251 * 1024, 4096, 2 * 251 * 1024, 2), 4096),
    # small images, large videos: the two-frame video wins
    (Q(True, 16, 2, 2, 4096, 1 << 20, 4096, 8 << 20, 2), 2048),
    # Qwen2.5-VL's (14-pixel patches, 12,845,056 pixels); videos at the image limits
    (Q(False, 14, 2, 2, 3136, 12845056, 3136, 12845056, 2), 32768),
    (Q(False, 14, 2, 2, 3136, 12845056, 3136, 12845056, 2), 4096),
    (Q(False, 14, 2, 2, 3136, 1003520, 3136, 1003520, 2), 262144),
]


def test_qwen_vl_items_match_the_installed_vllm(conformance, engine_python: str, tmp_path) -> None:
    got = conformance.probe(engine_python, PROBE, [[msgspec.to_builtins(p), n] for p, n in CASES], tmp_path)
    v = tuple(int(x) for x in conformance.pinned_versions()["vllm"].split("."))
    for (p, seq_len), (image, video, chosen) in zip(CASES, got, strict=True):
        item = vllm.qwen_vl_item(v, p, seq_len)
        assert item is not None
        want = (chosen, image if chosen == "image" else video)
        assert (item.modality, item.budget_tokens) == want, (p, seq_len, image, video, chosen)
        assert item.encoder_tokens == item.budget_tokens  # 0.33.0 neither pads nor multiplies


CUT_PROBE = (
    STUB
    + r"""
from vllm.config.multimodal import MultiModalConfig
out = []
for a, seq_len, limits in json.loads(sys.argv[1]):
    info, img = stub_info(a)
    # the dummy image profile_run encodes: the model's own builder with the launch's options
    # (processor.py get_dummy_mm_inputs passes mm_config.limit_per_prompt), then its tokens
    builder = (Qwen3VLDummyInputsBuilder if a["qwen3"] else Qwen2VLDummyInputsBuilder)(info)
    options = MultiModalConfig(limit_per_prompt=limits).limit_per_prompt
    image = builder.get_dummy_mm_data(seq_len, {"image": 1}, options)["image"][0]
    tokens = info.get_num_image_tokens(
        image_width=image.width, image_height=image.height, image_processor=img, mm_kwargs={}
    )
    out.append([tokens, info.get_max_image_tokens()])
print(json.dumps(out))
"""
)

QWEN3_P = Q(True, 16, 2, 2, 65536, 16777216, 4096, 25165824, 2)
QWEN25_P = Q(False, 14, 2, 2, 3136, 12845056, 3136, 12845056, 2)
CUT_CASES = [
    (QWEN3_P, 65536, {"image": {"count": 1, "width": 512, "height": 512}, "video": 0}),
    (QWEN3_P, 65536, {"image": {"count": 2, "width": 1000}, "video": 0}),
    (QWEN3_P, 65536, {"image": {"count": 1, "width": 64, "height": 64}}),  # grows to min_pixels
    (QWEN3_P, 65536, {"image": {"count": 1, "width": 100000, "height": 700}}),  # width ignored
    (QWEN25_P, 32768, {"image": {"count": 1, "width": 1000}, "video": 0}),
    (QWEN25_P, 32768, {"image": {"count": 1, "width": 448, "height": 448}, "video": 0}),
    (QWEN25_P, 32768, {"image": 1, "video": 0}),  # no options: the largest image
]


def test_the_image_options_cut_the_dummy_image_as_the_installed_vllm_does(
    conformance, engine_python: str, tmp_path
) -> None:
    arg = [[msgspec.to_builtins(p), n, limits] for p, n, limits in CUT_CASES]
    got = conformance.probe(engine_python, CUT_PROBE, arg, tmp_path)
    v = tuple(int(x) for x in conformance.pinned_versions()["vllm"].split("."))
    for (p, seq_len, limits), (tokens, largest) in zip(CUT_CASES, got, strict=True):
        flags = [f"--limit-mm-per-prompt={json.dumps(limits)}"]
        _, counts = vllm.mm_profiling(flags)
        item = vllm.qwen_vl_item(v, p, seq_len, {**(counts or {}), "video": 0}, vllm.mm_image_size(flags))
        assert item is not None
        assert (item.budget_tokens, item.encoder_tokens) == (largest, tokens), (p, limits)
