"""Qwen2-VL / Qwen2.5-VL / Qwen3-VL in vLLM's profile run: one maximal item's tokens from the
processor configs, release by release (model_executor/models/qwen2_vl.py, qwen3_vl.py).
"""

from __future__ import annotations

import math

import msgspec

from flightcheck._knowledge.vllm._versions import _release
from flightcheck._knowledge.vllm.multimodal import MM_DUMMY_SIZE_SINCE, MODALITY_TIE_BY_NAME_SINCE, mm_limit

# ---- Qwen-VL: one maximal item's tokens, from the processor configs ----------------------
# vLLM sizes a Qwen2-VL / Qwen2.5-VL / Qwen3-VL item from the HF processors' pixel limits
# (preprocessor_config.json / video_preprocessor_config.json ``size.shortest_edge`` /
# ``longest_edge``, or ``min_pixels`` / ``max_pixels``, which win: qwen2_vl.py
# ``_get_vision_size``) and vision_config's patch_size / spatial_merge_size /
# temporal_patch_size; ``get_mm_max_tokens_per_item`` gives an image's and a video's tokens
# at ``seq_len = max_model_len`` with one video per prompt (multimodal/registry.py
# ``get_max_tokens_per_item_by_modality``: ``{modality: 1}``), and the profile run encodes
# the modality with more (multimodal/encoder_budget.py ``get_modality_with_max_tokens``; a tie
# by release, MODALITY_TIE_BY_NAME_SINCE).
#
# - The largest image (qwen2_vl.py ``get_image_size_with_most_features``): before 0.13.0 a
#   9,999,999-pixel square through the image processor's ``smart_resize`` (transformers
#   qwen2_vl/image_processing_qwen2_vl.py); from 0.13.0 ``longest_edge // (patch x merge)^2``
#   merged patches factorised into the closest pair whose ratio is <= 200 (read in the
#   0.11.0 - 0.33.0 wheels: ``9999999`` through 0.12.0, ``closest_factor_pair`` from 0.13.0).
# - Tokens: ``(ceil_even(frames) / temporal) x (h / patch) x (w / patch) / merge^2``
#   (``_get_vision_info``; Qwen3-VL's video frames resized together by the video processor's
#   ``smart_resize``, transformers qwen3_vl/video_processing_qwen3_vl.py, which caps
#   ``frames x h x w`` at the video ``longest_edge``).
# - Video, Qwen2-VL / Qwen2.5-VL (qwen2_vl.py ``get_num_frames_with_most_features``): the
#   most frames (from 1) whose tokens fit in ``seq_len``, at most ``_MAX_FRAMES_PER_VIDEO``
#   = 14, at the largest image's size.
# - Video, Qwen3-VL (qwen3_vl.py): 0.11.0 - 0.14.0 the same search from 2 frames with the
#   video processor, at most 24,576 frames (``_MAX_FRAMES_PER_VIDEO``), the frames resized
#   together so that all of them fit the video ``longest_edge``; the dummy video
#   (``get_dummy_mm_data``, ``_get_dummy_videos``) has that many frames at that size and is
#   processed unsampled (``do_sample_frames: False``). 0.11.0 - 0.12.0 multiply the tokens by
#   12.5 (``get_max_video_tokens``: "<{timestamp} seconds>" text per video token, ``int()``ed),
#   so the item the budget counts is 12.5x what the encoder outputs. From 0.15.0 both the
#   budget's item and the dummy are two frames of the largest image under ``video
#   longest_edge // temporal_patch_size`` ("treat videos as special images"; 0.15.0's
#   ``DUMMY_VIDEO_NUM_FRAMES`` = 2048 caps a search these no longer use).
# - 0.11.0 - 0.12.0's ``profile_run`` (v1/worker/gpu_model_runner.py, ``expanded_outputs``)
#   zero-pads each encoder output to the modality's max tokens per item and keeps the padded
#   copies in ``encoder_cache`` through the forward pass and the sampler; not in the 0.10.2
#   nor the 0.13.0 wheel.
QWEN_VL_FACTORISED_IMAGE_SINCE = "0.13.0"
QWEN_VL_MAX_ASPECT = 200
QWEN_VL_OLD_SIDE = 9999999
QWEN2_VL_MAX_FRAMES = 14
QWEN3_VL_MAX_FRAMES = 24576
QWEN3_VL_TWO_FRAME_VIDEO_SINCE = "0.15.0"
QWEN3_VL_VIDEO_TEXT_FACTOR = 12.5
QWEN3_VL_VIDEO_TEXT_RANGE = ("0.11.0", "0.13.0")  # [since, until)
ENCODER_OUTPUT_PADDED_RANGE = ("0.11.0", "0.13.0")  # [since, until)


class QwenVisionProcessor(msgspec.Struct, frozen=True):
    """A Qwen-VL checkpoint's processor figures (vision_config's patch / merge / temporal
    sizes; the image and video processors' pixel limits). ``qwen3``: the Qwen3-VL rules."""

    qwen3: bool
    patch: int
    merge: int
    temporal: int
    image_min: int
    image_max: int
    video_min: int
    video_max: int
    video_temporal: int


class QwenItem(msgspec.Struct, frozen=True):
    """The profiled modality's item: the tokens the encoder budget counts for it
    (``max_tokens_by_modality``) and the tokens the encoder outputs for the dummy item."""

    modality: str
    budget_tokens: int
    encoder_tokens: int


def _in(v: tuple[int, ...] | None, span: tuple[str, str]) -> bool:
    return v is not None and _release(span[0]) <= v < _release(span[1])


def encoder_output_padded(v: tuple[int, ...] | None) -> bool:
    """Whether ``profile_run`` zero-pads each encoder output to the max tokens per item
    (0.11.0 - 0.12.0, ENCODER_OUTPUT_PADDED_RANGE; unknown counts as no, like 0.33.0)."""
    return _in(v, ENCODER_OUTPUT_PADDED_RANGE)


def qwen_image_resize(h: int, w: int, factor: int, lo: int, hi: int) -> tuple[int, int]:
    """transformers qwen2_vl/image_processing_qwen2_vl.py ``smart_resize`` (height, width)."""
    hb, wb = round(h / factor) * factor, round(w / factor) * factor
    if hb * wb > hi:
        beta = math.sqrt(h * w / hi)
        hb, wb = (
            max(factor, math.floor(h / beta / factor) * factor),
            max(factor, math.floor(w / beta / factor) * factor),
        )
    elif hb * wb < lo:
        beta = math.sqrt(lo / (h * w))
        hb, wb = math.ceil(h * beta / factor) * factor, math.ceil(w * beta / factor) * factor
    return hb, wb


def qwen_video_resize(frames: int, h: int, w: int, temporal: int, factor: int, lo: int, hi: int) -> tuple[int, int]:
    """transformers qwen3_vl/video_processing_qwen3_vl.py ``smart_resize`` (height, width):
    the frames share the pixel limits."""
    if h < factor or w < factor:
        scale = max(factor / h, factor / w)
        h, w = int(h * scale), int(w * scale)
    hb, wb = round(h / factor) * factor, round(w / factor) * factor
    tb = round(frames / temporal) * temporal
    if tb * hb * wb > hi:
        beta = math.sqrt(frames * h * w / hi)
        hb, wb = (
            max(factor, math.floor(h / beta / factor) * factor),
            max(factor, math.floor(w / beta / factor) * factor),
        )
    elif tb * hb * wb < lo:
        beta = math.sqrt(lo / (frames * h * w))
        hb, wb = math.ceil(h * beta / factor) * factor, math.ceil(w * beta / factor) * factor
    return hb, wb


def qwen_largest_image(v: tuple[int, ...] | None, p: QwenVisionProcessor, max_pixels: int) -> tuple[int, int]:
    """(height, width) of ``get_image_size_with_most_features`` by version (see above)."""
    unit = p.patch * p.merge
    if v is not None and v < _release(QWEN_VL_FACTORISED_IMAGE_SINCE):
        side = QWEN_VL_OLD_SIDE
        return qwen_image_resize(side, side, unit, p.image_min, max_pixels)
    n = max(1, max_pixels // (unit * unit))
    for cells in range(n, 0, -1):
        d = math.isqrt(cells)
        while cells % d:
            d -= 1
        if (cells // d) / d <= QWEN_VL_MAX_ASPECT:
            return unit * d, unit * (cells // d)
    return unit, unit * n  # pragma: no cover - cells == 1 always fits


def _tokens(p: QwenVisionProcessor, frames: int, h: int, w: int, temporal: int) -> int:
    padded = frames + (-frames % temporal)
    return max(padded // temporal, 1) * (h // p.patch) * (w // p.patch) // (p.merge * p.merge)


def qwen_vl_item(
    v: tuple[int, ...] | None,
    p: QwenVisionProcessor,
    seq_len: int,
    limits: dict[str, int] | None = None,
    image_size: tuple[int | None, int | None] | None = None,
) -> QwenItem | None:
    """The item ``profile_run`` encodes for a Qwen-VL model at this release and
    ``max_model_len`` (the rules above; unknown release: 0.33.0's), among the modalities
    ``--limit-mm-per-prompt`` leaves on (:func:`mm_limit`); None when it turns both off.
    ``image_size``: the image options' (width, height) (:func:`mm_image_size`), which from
    MM_DUMMY_SIZE_SINCE shrink the dummy image the encoder runs on, not the budget's item."""
    image_on, video_on = mm_limit(limits, "image") > 0, mm_limit(limits, "video") > 0
    if not (image_on or video_on):
        return None
    unit = p.patch * p.merge
    ih, iw = qwen_largest_image(v, p, p.image_max)
    image = _tokens(p, 1, *qwen_image_resize(ih, iw, unit, p.image_min, p.image_max), p.temporal)
    image_encoded = image
    if image_size is not None and (v is None or v >= _release(MM_DUMMY_SIZE_SINCE)):
        width, height = image_size
        dh, dw = min(ih, height or ih), min(iw, width or iw)
        image_encoded = _tokens(p, 1, *qwen_image_resize(dh, dw, unit, p.image_min, p.image_max), p.temporal)
    two_frame = v is None or v >= _release(QWEN3_VL_TWO_FRAME_VIDEO_SINCE)
    if p.qwen3 and two_frame:
        vh, vw = qwen_largest_image(v, p, p.video_max // max(1, p.video_temporal))
        video = _tokens(p, 2, *qwen_video_resize(2, vh, vw, p.temporal, unit, p.video_min, p.video_max), p.temporal)
        encoded = video
    else:
        if p.qwen3:
            cap = QWEN3_VL_MAX_FRAMES

            def count(f: int) -> int:
                return _tokens(
                    p, f, *qwen_video_resize(f, ih, iw, p.temporal, unit, p.video_min, p.video_max), p.temporal
                )

            start = 2
        else:
            cap = QWEN2_VL_MAX_FRAMES

            def count(f: int) -> int:
                return _tokens(p, f, *qwen_image_resize(ih, iw, unit, p.image_min, p.image_max), p.temporal)

            start = 1
        # _get_max_video_frames: the last frame count whose tokens fit; min(that, cap) is
        # all that is used, so the search may stop at the cap
        frames = start
        while frames < cap and count(frames + 1) <= seq_len:
            frames += 1
        frames = max(1, min(frames, cap))
        encoded = count(max(frames, 2) if p.qwen3 else frames)
        video = count(frames)
        if p.qwen3 and _in(v, QWEN3_VL_VIDEO_TEXT_RANGE):
            video = int(video * QWEN3_VL_VIDEO_TEXT_FACTOR)
    # encoder_budget.py ``get_modality_with_max_tokens``: the most tokens; a tie goes to the
    # first modality (the processor's order, image first) before 0.17.0 and to the larger
    # name ("video") from it (key ``(tokens, name)``; read in the 0.11.0 - 0.33.0 wheels). A
    # modality limited to 0 is not a tower modality.
    by_name = v is None or v >= _release(MODALITY_TIE_BY_NAME_SINCE)
    if not video_on or (image_on and (image > video or (image == video and not by_name))):
        return QwenItem("image", image, image_encoded)
    return QwenItem("video", video, encoded)
