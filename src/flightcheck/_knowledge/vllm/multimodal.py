"""The vision encoder in vLLM's profile run: what turns it off or limits it
(``--skip-mm-profiling``, ``--language-model-only``, ``--limit-mm-per-prompt``), the
encoder's tensor-parallel mode by architecture and release, and how many items it encodes.
"""

from __future__ import annotations

from typing import Any

from flightcheck._knowledge.vllm._versions import _release
from flightcheck._knowledge.vllm.reader import _json_arg

# ---- the vision encoder in the profile run ------------------------------------------------
# v1/worker/gpu_model_runner.py ``profile_run`` (0.33.0; the same structure in the 0.10.0,
# 0.10.2, 0.11.0 and 0.12.0 wheels, read): for a model with multimodal inputs, unless
# ``--skip-mm-profiling``, it first runs the encoder (``embed_multimodal``) on a dummy batch
# of the modality with the most tokens per item, then keeps the outputs in ``encoder_cache``
# while the dummy forward pass and the dummy sampler run, and clears them afterwards — all
# inside the peak the budget subtracts. The batch (multimodal/encoder_budget.py
# ``MultiModalBudget._get_max_items`` and v1/core/encoder_cache_manager.py
# ``compute_mm_encoder_budget``; vllm/multimodal/profiling.py's dummy inputs): the encoder
# budget is ``max(max_num_batched_tokens, max tokens per item)`` (config/scheduler.py sets
# ``max_num_encoder_input_tokens`` and ``encoder_cache_size`` to the batched tokens), the
# items ``max(1, min(budget // tokens per item, max_num_seqs x items per prompt))``. The
# encoder's layers are split over the TP ranks by default (config/multimodal.py
# ``mm_encoder_tp_mode = "weights"``). vLLM 0.8.0 (the first release whose default engine
# is V1: vllm/envs.py ``VLLM_USE_V1`` defaults to "1"; its wheel rounds the items up,
# ``cdiv(encoder_budget, max_tokens_per_mm_item)``, at most one item more) profiles the
# encoder the same way; V0 before it builds max_num_seqs dummy sequences with their
# images instead (not modelled).
ENCODER_PROFILED_SINCE = "0.8.0"


# What turns the encoder's profiling off or limits it (0.33.0: v1/worker/gpu_model_runner.py
# ``profile_run``, config/multimodal.py ``MultiModalConfig``, multimodal/encoder_budget.py
# ``MultiModalBudget``): ``--skip-mm-profiling`` skips the encoder run and its held outputs
# ("Skipping memory profiling for multimodal encoder and encoder cache"; read in the 0.10.1.1,
# 0.12.0 and 0.17.0 wheels too, absent from 0.10.0's parser); ``--language-model-only`` sets
# every modality's limit to 0 (``get_limit_per_prompt``; a flag from 0.17.0); with
# ``--limit-mm-per-prompt`` (JSON, ``{"image": 2}`` or ``{"image": {"count": 2, ...}}``, or
# ``--limit-mm-per-prompt.image 2``) a modality limited to 0 is not a tower modality, the
# profiled one is the remaining modality with the most tokens per item, and its count caps
# the items per prompt; a modality left out is allowed 999. The configurable form's image
# width / height size the dummy image (MM_DUMMY_SIZE_SINCE, :func:`mm_image_size`); its
# video width / height / frames and audio length are not read (the largest item is assumed).
SKIP_MM_PROFILING_FLAG = "--skip-mm-profiling"
LANGUAGE_MODEL_ONLY_FLAG = "--language-model-only"
LIMIT_MM_PER_PROMPT_FLAG = "--limit-mm-per-prompt"
MM_DEFAULT_LIMIT = 999
MODALITY_TIE_BY_NAME_SINCE = "0.17.0"


def mm_profiling(flags: list[str]) -> tuple[str | None, dict[str, int] | None]:
    """(why the encoder is not profiled, or None; the per-modality limits the flags set, or
    None for vLLM's defaults), from the launch's flags (:func:`mm_profiling_off`,
    :func:`mm_limits` of :func:`limit_mm_per_prompt`)."""
    return mm_profiling_off(flags), mm_limits(limit_mm_per_prompt(flags))


def limit_mm_per_prompt(flags: list[str]) -> dict[str, Any] | None:
    """``--limit-mm-per-prompt``'s JSON object as vLLM's parser builds it (dotted keys merged
    in); None when not given or when vLLM's parser refuses the value (FC7xx: no rule from
    here). Read once, into ``Intent.limit_mm_per_prompt``, by the launch's reader."""
    doc, err = _json_arg(flags, LIMIT_MM_PER_PROMPT_FLAG)
    return doc if err is None else None


def mm_profiling_off(flags: list[str]) -> str | None:
    """The flag that turns the encoder's profiling off (``--skip-mm-profiling``,
    ``--language-model-only``), or None; from the launch's flags (their long
    ``--name[=value]`` forms, the last one winning as argparse's does)."""
    skip: str | None = None
    for item in flags:
        name, eq, value = item.partition("=")
        on = not eq or value.strip().lower() not in ("0", "false", "no", "off")
        if name == SKIP_MM_PROFILING_FLAG:
            skip = SKIP_MM_PROFILING_FLAG if on else None
        elif name == "--no-" + SKIP_MM_PROFILING_FLAG[2:]:
            skip = None
        elif name == LANGUAGE_MODEL_ONLY_FLAG and on:
            skip = LANGUAGE_MODEL_ONLY_FLAG
    return skip


def mm_limits(doc: dict[str, Any] | None) -> dict[str, int] | None:
    """The per-modality limits ``--limit-mm-per-prompt``'s object sets (``doc``:
    :func:`limit_mm_per_prompt`), or None for vLLM's defaults."""
    if doc is None:
        return None
    limits: dict[str, int] = {}
    for k, v in doc.items():
        n = v.get("count", MM_DEFAULT_LIMIT) if isinstance(v, dict) else v
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            limits[str(k)] = n
    return limits


# The configurable form's image size (config/multimodal.py ``ImageDummyOptions``: ``{"image":
# {"count": n, "width": w, "height": h}}``, each side > 0 or vLLM refuses it). The profile
# run's dummy image is the largest image cut to ``min(largest, given)`` per side
# (multimodal/processing ``_get_dummy_images``, which Qwen2-VL / Qwen2.5-VL / Qwen3-VL
# ``get_dummy_mm_data`` pass the image options to), then the image processor resizes it as
# any image (``smart_resize``, so a small one grows to ``min_pixels``). The options reach it
# through multimodal/registry.py ``_extract_mm_options`` -> ``get_decoder_dummy_data``
# (0.11.1 - 0.14.0) and ``get_dummy_mm_inputs(mm_options=limit_per_prompt)`` (0.33.0). The
# encoder budget's item keeps the largest image's tokens (Qwen's ``get_mm_max_tokens_per_item``
# does not read the options), so the number of items profiled and the modality chosen do
# not change, only what each item encodes. Read in the 0.11.0 (absent), 0.11.1, 0.12.0,
# 0.14.0 and 0.33.0 wheels.
MM_DUMMY_SIZE_SINCE = "0.11.1"


def mm_image_size(flags: list[str]) -> tuple[int | None, int | None] | None:
    """:func:`mm_image_size_of` the flags' ``--limit-mm-per-prompt``."""
    return mm_image_size_of(limit_mm_per_prompt(flags))


def mm_image_size_of(doc: dict[str, Any] | None) -> tuple[int | None, int | None] | None:
    """(width, height) of ``--limit-mm-per-prompt``'s image options (``doc``:
    :func:`limit_mm_per_prompt`; either may be None), or None when neither is given or the
    flag is not a JSON object vLLM accepts."""
    opts = doc.get("image") if doc is not None else None
    if not isinstance(opts, dict):
        return None

    def side(key: str) -> int | None:
        n = opts.get(key)
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None

    width, height = side("width"), side("height")
    return (width, height) if (width or height) else None


def mm_limit(limits: dict[str, int] | None, modality: str) -> int:
    """A modality's items per prompt (``get_limit_per_prompt``: 999 when not given)."""
    return (limits or {}).get(modality, MM_DEFAULT_LIMIT)


def encoder_profiled(v: tuple[int, ...] | None) -> bool:
    """Whether this release's profile run holds the vision encoder's peak and outputs in
    the budget (V1's ``profile_run``; unknown counts as yes, every V1 release does)."""
    return v is None or v >= _release(ENCODER_PROFILED_SINCE)


# ``--mm-encoder-tp-mode data`` (config/multimodal.py ``mm_encoder_tp_mode``; default
# "weights"): the encoder's weights whole on every TP rank (its layers built unsharded,
# ``use_data_parallel``) and the batch's items split over the ranks instead. A model whose
# class does not set ``supports_encoder_tp_data`` falls back to "weights" with a warning
# (config/model.py: "This model does not support `--mm-encoder-tp-mode data`"). In the profile
# run (model_executor/models/vision.py ``run_dp_sharded_mrope_vision_model`` /
# ``run_dp_sharded_vision_model``) the items go to the ranks greedily, largest first, so with
# equal items the busiest rank encodes ``ceil(items / tp)`` of them at the encoder's full
# width, pads its output to the busiest rank's length, and ``tensor_model_parallel_all_gather``
# returns ``tp x`` that; the outputs handed back are views into the gathered tensor, so
# ``encoder_cache`` holds all of it through the forward pass and the sampler
# (gpu_model_runner.py ``profile_run``). The architectures and the first wheel read whose
# class (or a base class) sets the attribute: 0.10.2, 0.11.0, 0.12.0 and 0.14.0 read as text;
# 0.33.0 by importing every multimodal architecture's class in the conformance venv (its
# test re-derives the list). Before 0.10.2 not read: the flag is taken as "weights".
MM_ENCODER_TP_MODE_FLAG = "--mm-encoder-tp-mode"
ENCODER_TP_DATA_SINCE: dict[str, str] = {
    **dict.fromkeys(
        (
            "Glm4vForConditionalGeneration",
            "Glm4vMoeForConditionalGeneration",
            "KimiVLForConditionalGeneration",
            "Llama4ForConditionalGeneration",
            "MiniCPMO",
            "MiniCPMV",
            "Qwen2_5_VLForConditionalGeneration",
            "Step3VLForConditionalGeneration",
        ),
        "0.10.2",
    ),
    **dict.fromkeys(
        (
            "DotsOCRForCausalLM",
            "H2OVLChatModel",
            "InternVLChatModel",
            "NVLM_D",
            "Qwen2VLForConditionalGeneration",
            "Qwen3VLForConditionalGeneration",
            "Qwen3VLMoeForConditionalGeneration",
        ),
        "0.11.0",
    ),
    "OpenCUAForConditionalGeneration": "0.12.0",
    "IsaacForConditionalGeneration": "0.14.0",
    **dict.fromkeys(
        (
            "Alpamayo2Super",
            "CohereCompassForConditionalGeneration",
            "Cosmos3EdgeForConditionalGeneration",
            "Cosmos3ForConditionalGeneration",
            "DeepseekV41ForCausalLM",
            "Eagle2_5_VLForConditionalGeneration",
            "Exaone4_5_ForConditionalGeneration",
            "Glm5NextForConditionalGeneration",
            "GlmOcrForConditionalGeneration",
            "InternS1ProForConditionalGeneration",
            "InternS2MobiusForConditionalGeneration",
            "InternS2PreviewForConditionalGeneration",
            "KimiK25ForConditionalGeneration",
            "KimiK3ForConditionalGeneration",
            "MiniCPMOcrForConditionalGeneration",
            "MiniCPMV4_6ForConditionalGeneration",
            "MiniCPMV4_7ForConditionalGeneration",
            "MiniMaxM3SparseForConditionalGeneration",
            "MuseSparkForConditionalGeneration",
            "QianfanOCRForConditionalGeneration",
            "Qwen3_5ForConditionalGeneration",
            "Qwen3_5MoeForConditionalGeneration",
            "Qwen4ExpForConditionalGeneration",
            "Step3p7ForConditionalGeneration",
            "Step5ForConditionalGeneration",
            "StepVLForConditionalGeneration",
        ),
        "0.33.0",
    ),
}


def encoder_tp_mode(flags: list[str]) -> str:
    """``--mm-encoder-tp-mode``'s value (the last one given; "weights" when none)."""
    mode = "weights"
    for item in flags:
        name, eq, value = item.partition("=")
        if name == MM_ENCODER_TP_MODE_FLAG and eq:
            mode = value.strip()
    return mode


def encoder_data_parallel(v: tuple[int, ...] | None, architectures: tuple[str, ...], mode: str) -> bool:
    """Whether the encoder runs data-parallel over the TP ranks: ``mode`` "data" and the
    model's class supports it at this release (ENCODER_TP_DATA_SINCE; unknown release:
    0.33.0's list), else vLLM's fallback to "weights"."""
    if mode != "data" or not architectures:
        return False
    since = ENCODER_TP_DATA_SINCE.get(architectures[0])
    return since is not None and (v is None or v >= _release(since))


def encoder_items(
    tokens_per_item: int,
    batched_tokens: int,
    max_num_seqs: int,
    max_model_len: int | None = None,
    limit: int = MM_DEFAULT_LIMIT,
) -> int:
    """How many maximal items the profile run encodes at once (``_get_max_items`` with
    chunked prefill on, V1's default): the encoder budget's worth, capped by
    ``max_num_seqs x items per prompt``, the items per prompt ``min(limit,
    max_model_len // tokens per item)`` (at least 1; 1 when the length is unknown), the
    limit ``--limit-mm-per-prompt``'s count for the modality (:func:`mm_limit`)."""
    per = max(1, tokens_per_item)
    budget = max(batched_tokens, per)
    per_prompt = max(1, min(limit, max_model_len // per)) if max_model_len else 1
    return max(1, min(budget // per, max(1, max_num_seqs) * per_prompt))
