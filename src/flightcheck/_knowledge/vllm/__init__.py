"""Everything flightcheck knows of vLLM, by version: flag spellings, the variables it reads,
its multicast paths and their switches, and the pins it ships with.

Sources (vLLM's own code; the conformance suite asserts these against the installed
package): ``vllm/engine/arg_utils.py`` and ``vllm/utils/argparse_utils.py`` (flags),
``vllm/envs.py`` (variables), the wheel's metadata (the FlashInfer pin). Where a table
gives a version, it is the first release whose source has the thing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import msgspec

from flightcheck._vocabulary.intent import parse_len

NAME = "vllm"

# ---- flags (vllm/engine/arg_utils.py, vllm/utils/argparse_utils.py) ----------------------

#: short or alternative spellings -> the canonical long flag.
ALIASES: dict[str, str] = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
    "-ep": "--enable-expert-parallel",
    "-q": "--quantization",
    "-n": "--nnodes",
    "-r": "--node-rank",
    "-sc": "--speculative-config",  # arg_utils.py: add_argument("--speculative-config", "-sc", ...)
}

#: canonical flag -> (Intent field, converter). A converter raises ValueError or
#: UsageError on a value it cannot read; the flag is then reported as unparsed.
Reader = tuple[str, Callable[[str], Any]]

FIELDS: dict[str, Reader] = {
    "--model": ("model", str),
    "--revision": ("revision", str),
    "--tensor-parallel-size": ("tensor_parallel_size", int),
    "--pipeline-parallel-size": ("pipeline_parallel_size", int),
    "--data-parallel-size": ("data_parallel_size", int),
    "--max-model-len": ("max_model_len", parse_len),
    "--kv-cache-dtype": ("kv_cache_dtype", str),
    "--gpu-memory-utilization": ("gpu_memory_utilization", float),
    "--quantization": ("quantization", str),
    "--download-dir": ("download_dir", str),
    "--load-format": ("load_format", str),
    "--distributed-executor-backend": ("distributed_executor_backend", str),
    "--nnodes": ("nnodes", int),
}

#: flags that never take a value (store_true / BooleanOptionalAction).
BOOL_FLAGS: frozenset[str] = frozenset(
    {
        "--enable-expert-parallel",
        "--no-enable-expert-parallel",
        "--enforce-eager",
        "--no-enforce-eager",
        "--disable-custom-all-reduce",
        "--trust-remote-code",
        "--enable-prefix-caching",
        "--no-enable-prefix-caching",
        "--disable-log-requests",
        "--disable-log-stats",
        "--headless",
        "--enable-auto-tool-choice",
        "--async-scheduling",
    }
)

#: boolean intent flags (BooleanOptionalAction: ``--x`` / ``--no-x``).
BOOLS: dict[str, tuple[str, bool]] = {
    "--enable-expert-parallel": ("enable_expert_parallel", True),
    "--no-enable-expert-parallel": ("enable_expert_parallel", False),
}

#: how fixes and messages spell an option (the short forms vLLM's docs use).
FLAG: dict[str, str] = {
    "load_format": "--load-format",
    "tp": "-tp",
    "pp": "-pp",
    "pcp": "-pcp",  # arg_utils.py: --prefill-context-parallel-size
    "dcp": "-dcp",  # arg_utils.py: --decode-context-parallel-size
    "dp": "-dp",
    "ep": "--enable-expert-parallel",
    "max_len": "--max-model-len",
    "kv_dtype": "--kv-cache-dtype",
    "kv_fp8": "--kv-cache-dtype fp8",
    "util": "--gpu-memory-utilization",
    "eager": "--enforce-eager",
    "config": "--config",
    "quantization": "--quantization",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "max_num_seqs": "--max-num-seqs",
    "kv_cache_memory_bytes": "--kv-cache-memory-bytes",
    "cpu_offload_gb": "--cpu-offload-gb",
}

# ---- environment variables (vllm/envs.py) ------------------------------------------------

ALLREDUCE_USE_SYMM_MEM = "VLLM_ALLREDUCE_USE_SYMM_MEM"
USE_NCCL_SYMM_MEM = "VLLM_USE_NCCL_SYMM_MEM"
FLASHINFER_ALLREDUCE_BACKEND = "VLLM_FLASHINFER_ALLREDUCE_BACKEND"
RAY_EXTRA_ENV_VARS_TO_COPY = "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"
KIMI_K3_GEMM_AR = "VLLM_KIMI_K3_GEMM_AR"
KIMI_K3_TAIL_SWITCH = "VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION"
ALLOW_LONG_MAX_MODEL_LEN = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
ESTIMATE_CUDAGRAPHS = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"
ALLREDUCE_USE_FLASHINFER = "VLLM_ALLREDUCE_USE_FLASHINFER"  # envs.py, default 1
ENABLE_GEMM_RS = "VLLM_ENABLE_GEMM_RS"  # envs.py, default 0
USE_DIRECT_DCP_Q_GATHER = "VLLM_USE_DIRECT_DCP_Q_GATHER"  # envs.py, default None (on when applicable)
USE_DIRECT_DCP_KV_GATHER = "VLLM_USE_DIRECT_DCP_KV_GATHER"
#: variables the plan extends (comma lists), never replaces.
LIST_VARS: tuple[str, ...] = (RAY_EXTRA_ENV_VARS_TO_COPY,)
#: the prefix of every variable vLLM declares (its Ray executor forwards these).
ENV_PREFIX = "VLLM_"

#: First vLLM release whose envs.py declares the variable, read from every release's wheel
#: from 0.10.1.1 to 0.33.0 (``pip download --no-deps vllm==X``; vllm/envs.py
#: ``environment_variables``). scripts/gen_vllm_env_gates.py regenerates the extract
#: (tests/fixtures/vllm_envs/gates.json) and ``--check`` compares this table with it;
#: tests/knowledge/test_vllm_env_gates.py does the same offline.
SINCE: dict[str, str] = {
    ALLREDUCE_USE_SYMM_MEM: "0.10.2",
    USE_NCCL_SYMM_MEM: "0.11.0",
    FLASHINFER_ALLREDUCE_BACKEND: "0.17.0",
    RAY_EXTRA_ENV_VARS_TO_COPY: "0.17.0",
    ALLREDUCE_USE_FLASHINFER: "0.17.0",
    ESTIMATE_CUDAGRAPHS: "0.18.0",
    USE_DIRECT_DCP_Q_GATHER: "0.28.0",
    USE_DIRECT_DCP_KV_GATHER: "0.28.0",
    KIMI_K3_GEMM_AR: "0.29.0",
    ENABLE_GEMM_RS: "0.31.0",
}
#: Variables whose first release must be in :data:`SINCE` (those the fallback sets or a
#: check reads by version); the others are named for their meaning only.
GATED: frozenset[str] = frozenset(SINCE)

#: The default each release's getter passes (``os.getenv(NAME, DEFAULT)``,
#: ``env_with_choices(NAME, DEFAULT, ...)``), newest first: (first release, default);
#: None is "unset" (``maybe_convert_bool(os.getenv(NAME))``). From the same wheels.
ENV_DEFAULTS: dict[str, tuple[tuple[str, str | None], ...]] = {
    ALLREDUCE_USE_SYMM_MEM: (("0.11.0", "1"), ("0.10.2", "0")),  # on by default since 0.11.0 (#24111)
    USE_NCCL_SYMM_MEM: (("0.11.0", "0"),),
    FLASHINFER_ALLREDUCE_BACKEND: (("0.19.0", "auto"), ("0.17.0", "trtllm")),
    RAY_EXTRA_ENV_VARS_TO_COPY: (("0.17.0", ""),),
    ALLREDUCE_USE_FLASHINFER: (("0.29.0", "1"), ("0.17.0", "0")),
    ESTIMATE_CUDAGRAPHS: (("0.20.0", "1"), ("0.18.0", "0")),
    USE_DIRECT_DCP_Q_GATHER: (("0.28.0", None),),
    USE_DIRECT_DCP_KV_GATHER: (("0.28.0", None),),
    KIMI_K3_GEMM_AR: (("0.29.0", "1"),),
    ENABLE_GEMM_RS: (("0.31.0", "0"),),
    ALLOW_LONG_MAX_MODEL_LEN: (("0.10.1.1", "0"),),  # older: not read here
}


def env_default(name: str, version: str) -> str | None:
    """The default vLLM ``version`` gives ``name`` (None: unset, not declared, or unknown)."""
    v = _release(version)
    for since, value in ENV_DEFAULTS.get(name, ()):
        if v >= _release(since):
            return value
    return None


SYMM_MEM_DEFAULT_ON = ENV_DEFAULTS[ALLREDUCE_USE_SYMM_MEM][0][0]  # VLLM_ALLREDUCE_USE_SYMM_MEM on by default
MNNVL_AUTO_SINGLE_NODE = "0.25.0"  # "auto" FlashInfer all-reduce means mnnvl on one node (#47219)

# ---- the KV cache budget, by version ----------------------------------------------------
#
# vllm/v1/worker/gpu_worker.py ``Worker.init_device`` takes the baseline snapshot *after*
# the distributed environment (NCCL, custom all-reduce) and the cuBLAS handles exist, then
# ``request_memory`` (vllm/v1/worker/utils.py) asks for ``ceil(total_memory x
# gpu_memory_utilization)`` and raises "Free memory on device ... is less than desired GPU
# memory utilization" when the free memory at that snapshot is smaller: everything
# allocated before it must fit in the (1 - utilization) slack. ``total_memory`` is what
# CUDA reports (torch.cuda.mem_get_info): the board's memory minus the driver's
# reservation.
#
# ``determine_available_memory`` (0.33.0)::
#
#     available = requested - (total_consumed + transient_peak) - cudagraph_estimate
#
# where total_consumed (vllm/utils/mem_utils.py ``memory_profiling``) is everything
# allocated since the baseline (weights, non-torch buffers of the attention backends) and
# transient_peak the profile run's torch peak over what it keeps. The CUDA-graph estimate
# (``profile_cudagraph_memory``) is subtracted only when VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
# is on; it is opt-in (default "0") in 0.19.0 and on by default from 0.20.0 (envs.py of
# both wheels, read). Before that the graphs are captured after the KV cache is allocated,
# out of the slack. ``--kv-cache-memory-bytes`` skips all this: that many bytes for KV,
# whatever the utilization. 0.11.0 uses ``total x utilization`` without the ceil.

#: (first release, default gpu_memory_utilization) — vllm/config/cache.py; 0.19.0 has 0.9,
#: 0.20.0 and 0.33.0 have 0.92 (read from the wheels).
UTILIZATION_DEFAULTS: tuple[tuple[str, float], ...] = (("0.20.0", 0.92), ("0.0", 0.9))
#: first release that subtracts the CUDA-graph estimate from the KV budget by default.
CUDAGRAPHS_IN_BUDGET_SINCE = ENV_DEFAULTS[ESTIMATE_CUDAGRAPHS][0][0]  # "0.20.0": the default flipped to 1
#: tokens per KV block (vllm/config/cache.py ``block_size`` default for CUDA attention).
BLOCK_SIZE = 16
#: first release that logs "GPU KV cache size" as int(max_concurrency x max_model_len)
#: (vllm/v1/core/kv_cache_utils.py); before it, num_blocks // groups x block_size (0.20.0
#: and earlier, read from the wheels).
KV_TOKENS_BY_CONCURRENCY_SINCE = "0.21.0"
#: first release with the >= 160 GiB batch tier and DGX Spark (GB10, cc 12.1) kept on the
#: small tier (absent in 0.21.0, present in 0.33.0; the release in between is unverified).
BATCH_TIER_160_SINCE = "0.33.0"


# ---- the profile run's transient peak: the sampler's dummy run ----------------------------
#
# ``GPUModelRunner.profile_run`` (vllm/v1/worker/gpu_model_runner.py, 0.10.0 - 0.33.0) runs
# the model on ``max_num_batched_tokens`` dummy tokens, then ``_dummy_sampler_run`` on the
# last hidden state of ``min(max_num_seqs, max_num_batched_tokens)`` dummy requests:
# ``compute_logits`` (model dtype, the whole vocabulary on every TP rank: the logits are
# gathered) and the sampler with ``top_k = vocab - 1`` and ``top_p = 0.9``. The two phases
# run one after the other, so the profile's peak is the larger of the two.
#
# Bytes per (request x vocabulary) element alive at the sampler's peak:
#
# - PyTorch-native top-k/top-p (``TopKTopPSampler.forward_native``): the model-dtype logits
#   (2, held by ``_dummy_sampler_run``), their fp32 copy (4, v1/sample/sampler.py
#   ``logits.to(torch.float32)``), ``logits.sort`` in ``apply_top_k_top_p``
#   (v1/sample/ops/topk_topp_sampler.py): values 4 + int64 indices 8; and torch's stable
#   sort's own temporaries (aten/src/ATen/native/cuda/SortStable.cu, pytorch commit
#   061531e8): with >= 128 rows ``segmented_sort_pairs`` — int64 reverse indices 8 and cub's
#   alternate key/value buffers 4 + 8 — 38 bytes; with 2-127 rows
#   ``segmented_sort_pairs_by_full_sort`` — two int2 buffers 16, the keys' output 4 and
#   cub's alternates 4 + 8 — 50 bytes.
# - FlashInfer (``forward_cuda`` -> ``flashinfer_sample`` ->
#   ``top_k_top_p_sampling_from_logits``, flashinfer/sampling.py: ``top_k_mask_logits`` then
#   ``torch.softmax``): 2 + 4 + masked logits 4 + probabilities 4 = 14 bytes.
#
# - Triton top-k/top-p (0.17.0 on: ``apply_top_k_top_p`` calls ``apply_top_k_top_p_triton``,
#   v1/sample/ops/topk_topp_triton.py, which masks the fp32 logits in place with a buffer of
#   one vocabulary row per Triton program), then ``logits.softmax(dtype=float32)`` and
#   ``random_sample``'s exponential draw ``q``: 2 + 4 + 4 + 4 = 14 bytes.
#
# Which one runs: before 0.11.2 FlashInfer whenever it is installed (an optional extra of
# the wheel: ``VLLM_USE_FLASHINFER_SAMPLER`` unset means on); 0.11.2 - 0.16.0 the sort
# unless ``VLLM_USE_FLASHINFER_SAMPLER=1``; from 0.17.0 the native path is the Triton one
# (v1/sample/ops/topk_topp_triton.py first ships in the 0.17.0 wheel; 0.16.0 has none and
# sorts; 0.17.0 - 0.19.0 take it for >= 8 requests — ``HAS_TRITON and logits.shape[0] >= 8``
# — and sort below that, a case not modelled; 0.33.0 drops the row condition); from 0.21.0
# FlashInfer is on by default
# but ``_dummy_sampler_run`` also warms ``forward_native`` — 14 bytes either way
# (topk_topp_sampler.py, envs.py and gpu_model_runner.py of the wheels, read).
SAMPLER_BYTES_NATIVE = 38
SAMPLER_BYTES_NATIVE_FEW_ROWS = 50  # 2-127 requests: torch's full-sort path
SAMPLER_SORT_SEGMENTED_MIN_ROWS = 128  # SortStable.cu: nsegments < 128 -> full sort
SAMPLER_BYTES_FLASHINFER = 14
SAMPLER_BYTES_TRITON = 14
USE_FLASHINFER_SAMPLER = "VLLM_USE_FLASHINFER_SAMPLER"
FLASHINFER_SAMPLER_OPT_IN_SINCE = "0.11.2"
TRITON_TOP_K_TOP_P_SINCE = "0.17.0"
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
    None for vLLM's defaults), from the launch's flags (their long ``--name[=value]`` forms,
    the last one winning as argparse's does)."""
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
    # a value vLLM's parser refuses (FC7xx) gives no rule from here
    doc, err = _json_arg(flags, LIMIT_MM_PER_PROMPT_FLAG)
    if doc is None or err is not None:
        return skip, None
    limits: dict[str, int] = {}
    for k, v in doc.items():
        n = v.get("count", MM_DEFAULT_LIMIT) if isinstance(v, dict) else v
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            limits[str(k)] = n
    return skip, limits


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
    """(width, height) of ``--limit-mm-per-prompt``'s image options (either may be None),
    or None when neither is given or the flag is not a JSON object vLLM accepts."""
    doc, err = _json_arg(flags, LIMIT_MM_PER_PROMPT_FLAG)
    opts = doc.get("image") if doc is not None and err is None else None
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


#: vllm/envs.py ``VLLM_FUSED_MOE_CHUNK_SIZE`` default: fused_moe.py processes at most this
#: many tokens at a time, so its workspaces stop growing there.
FUSED_MOE_CHUNK_TOKENS = 32768
#: Before 0.11.0 ``Worker.init_device`` (v1/worker/gpu_worker.py) takes the baseline
#: snapshot *before* ``init_worker_distributed_environment``: NCCL and custom all-reduce
#: buffers count as non-torch memory inside the KV budget; from 0.11.0 after it (they must
#: fit in the slack, FC406). Read in the 0.10.0, 0.10.1.1, 0.10.2 and 0.11.0 wheels.
#:
#: What lands between that snapshot and the KV sizing at TP > 1 (0.10.x), and why it is not a
#: modelled term. ``memory_profiling`` (vllm/utils/__init__.py, 0.10.0) counts as non-torch
#: ``(total - free) - torch.cuda.memory_reserved()`` grown since the snapshot, so only memory
#: allocated outside torch's allocator enters the budget:
#:
#: - the TP group's pynccl communicator (distributed/device_communicators/cuda_communicator.py:
#:   ``PyNcclCommunicator`` for every group but "ep"), created in the distributed init;
#: - custom all-reduce (custom_all_reduce.py ``CustomAllreduce.__init__``, TP group only):
#:   two IPC buffers from ``ops.allocate_shared_buffer_and_handle`` (``meta_size() +
#:   max_size`` and ``max_size``, max_size 8 MiB) — about 16 MiB, a ``cudaMalloc`` in the C++
#:   op (seen in ports of csrc/custom_all_reduce.cu; the wheel holds it compiled), so outside
#:   torch's allocator; its 8 MiB ``rank_data`` is a torch tensor and does not count;
#: - torch's own NCCL communicator for the TP device group, created lazily by the profile
#:   run: V1's ``use_all_gather`` (platforms/interface.py) makes ``compute_logits`` gather
#:   the logits through ``DeviceCommunicatorBase.all_gather`` ->
#:   ``torch.distributed.all_gather_into_tensor(group=device_group)`` (0.10.x's
#:   ``CudaCommunicator`` does not override ``all_gather``). The 0.11.0 wheel gathers the same
#:   way, so from 0.11.0 too this communicator is created after the snapshot, inside the
#:   budget (not modelled either: the H100 TP 2 points 59, 66 (0.11.0) and 23 (0.12.0) are
#:   predicted 0.35 - 0.40 GiB above their logs, within the tolerance).
#:
#: Each NCCL communicator's device buffers are derived from NCCL's source in
#: ``flightcheck._knowledge.nccl`` (channel search, chain trees, P2P and NVLS buffer sizes):
#: on 8 x H100 on one NVSwitch node, 24 channels and 576 MiB of ring/tree connections on a
#: middle rank, plus 256 MiB of NVLS buffers when the driver reports multicast support. vLLM
#: before 0.10.2 sets NCCL_CUMEM_ENABLE=0 itself (``NCCL_CUMEM_OFF_UNTIL``), so NCCL connects
#: every ring and tree at init; from 0.10.2 NCCL's default (cuMem on) connects them when a
#: collective first needs them. The KV cache is sized by the smallest budget across ranks, so
#: the binding rank is a middle one of NCCL's chain (``nccl.chain_connections``).
SNAPSHOT_AFTER_DISTRIBUTED_SINCE = "0.11.0"
#: First release that no longer sets NCCL_CUMEM_ENABLE=0: 0.6.4.post1 sets it in
#: worker/worker_base.py, 0.10.0 and 0.10.1.1 in env_override.py (unless the variable is already
#: set to something other than "0", or /dev/nvidia-caps-imex-channels exists); the 0.10.2 wheel
#: sets it nowhere (read in the wheels).
NCCL_CUMEM_OFF_UNTIL = "0.10.2"
#: The torch each release pins (the wheel's ``Requires-Dist: torch==``), whose NCCL is
#: ``flightcheck._knowledge.nccl.NCCL_BY_TORCH`` (0.10.0 logs "vLLM is using nccl==2.26.2").
TORCH_BY_RELEASE = {
    "0.10.0": "2.7.1",
    "0.10.1.1": "2.7.1",
    "0.10.2": "2.8.0",
    "0.11.0": "2.8.0",
    "0.12.0": "2.9.0",
    "0.33.0": "2.14.0",
}
#: NCCL communicators over the TP group in vLLM's budget before 0.11.0: the pynccl one and
#: torch's for the device group (see above); from 0.11.0 the pynccl one is made before the
#: snapshot (FC406's slack) — torch's is still made by the profile run's all-gather.
TP_COMMUNICATORS_IN_BUDGET = 2
#: custom all-reduce's two IPC buffers (``meta_size() + max_size`` and ``max_size``,
#: ``max_size`` 8 MiB; the small metadata is left out): custom_all_reduce.py
CUSTOM_ALLREDUCE_BYTES = 2 * 8 * (1 << 20)


#: V0 (read in the 0.6.4.post1 wheel) runs the dummy sampler on the driver worker (rank 0)
#: only: vllm/worker/model_runner.py ``ModelRunner.execute_model`` returns ``[]`` right after
#: ``compute_logits`` when ``not self.is_driver_worker``, so a non-driver worker's profile
#: peak is the forward pass alone and its KV budget is larger than the driver's. Every worker
#: logs its own budget (worker/worker.py ``determine_num_available_blocks``), and the engine
#: sizes the cache by the smallest (executor/distributed_gpu_executor.py:
#: ``num_gpu_blocks = min(b[0] for b in num_blocks)``): the driver's binds. (V1 samples on
#: every rank.)
V0_SAMPLER_ON_DRIVER_ONLY = True

#: How vLLM checks that one max_model_len sequence fits when the workers hold different layers
#: (PP stages). 0.14.0 - 0.16.x (vllm/v1/core/kv_cache_utils.py ``get_kv_cache_configs``, read
#: in the 0.14.0, 0.15.0, 0.15.1 and 0.16.0 wheels) merge every worker's KV cache specs into the
#: whole model's and call ``_check_enough_kv_cache_memory(min(available_memory), ...)`` with the
#: merged groups: the KV of *every* layer for max_model_len must fit the *smallest* worker's
#: budget, although each PP stage holds only its own layers (vLLM issue #34076: "24.0 GiB KV cache
#: is needed" for all 48 layers of Qwen3-Coder-30B-A3B at PP 2, tests/fixtures/memory point 27).
#: 0.13.0 checks each worker's own specs against its own memory (``check_enough_kv_cache_memory``
#: in the per-worker loop); from 0.17.0 each worker's groups projected onto its own layers
#: (``_project_kv_cache_groups_to_worker``; 0.33.0: v1/core/kv_cache_planning.py). [since, until)
PP_KV_CHECK_WHOLE_MODEL = ("0.14.0", "0.17.0")


#: The V0 engine's sampler (vllm/model_executor/layers/sampler.py, read in the 0.6.4.post1,
#: 0.8.0, 0.8.5 and 0.10.0 wheels) imports FlashInfer's top-k/top-p only under ``if
#: envs.VLLM_USE_FLASHINFER_SAMPLER and find_spec("flashinfer")``, and that variable is off
#: unless set (envs.py: ``bool(int(os.getenv(..., "0")))`` in 0.6.4.post1, ``None`` when unset
#: in 0.8.x): whether FlashInfer is installed does not matter. Otherwise ``Sampler.forward``
#: casts the logits to fp32 and ``_apply_top_k_top_p`` sorts them (``logits.sort``) — the
#: V0 profile run's dummy request asks for ``top_p=0.99, top_k=vocab - 1``
#: (worker/model_runner.py ``profile_run``). Its peak is at that sort, with the same bytes per
#: element as V1's PyTorch-native path above: the model-dtype logits still held by
#: ``execute_model`` (2), the fp32 copy (4), the sorted values (4) and int64 indices (8) and
#: torch's stable-sort temporaries (20 with >= 128 rows); the masks, softmax, cumsum and the
#: scatter that follow free the sort's temporaries first and stay below it (32 bytes), and
#: ``probs`` / ``logprobs`` come after ``_apply_top_k_top_p`` returned.
V0_FLASHINFER_SAMPLER_OPT_IN = True

#: Which engine a 0.8 - 0.10.1 launch runs: V1 is the default from 0.8.0 (envs.py
#: ``VLLM_USE_V1`` defaults to "1", read in the 0.8.0 wheel), but
#: ``EngineArgs._is_v1_supported_oracle`` (vllm/engine/arg_utils.py) falls back to V0 —
#: unless ``VLLM_USE_V1=1`` was set explicitly, when it raises instead — for, among others,
#: "Compute Capability < 8.0" (read in the 0.8.0, 0.8.5, 0.10.0 and 0.10.1.1 wheels; gone in
#: 0.10.2, and 0.11.0 has no V0 engine) and for ``--quantization gguf``
#: (``V1_UNSUPPORTED_QUANT``: ["bitsandbytes", "gguf"] in 0.8.0, ["gguf"] in 0.8.5, absent in
#: 0.10.0). 0.9.x is not read: the compute-capability fallback is taken from its neighbours,
#: the GGUF one is not (0.9.x counts as V1 for GGUF). 0.7.x (V0 by default) is not read
#: either and keeps the V1 rules. The oracle's other fallbacks (flags) are not modelled.
V1_DEFAULT_SINCE = "0.8.0"
V0_CC_FALLBACK_BEFORE = "0.10.2"
V0_GGUF_FALLBACK_BEFORE = "0.9.0"
V0_CC_BELOW = (8, 0)
USE_V1 = "VLLM_USE_V1"


def _env_on(env: dict[str, str | None] | None, name: str) -> bool | None:
    """A boolean environment variable as vLLM's envs.py reads it (``vllm/envs.py``
    declarations: ``_knowledge.vllm.envs``); None when unset or empty (the release's default
    applies) or a value vLLM cannot read."""
    from flightcheck._knowledge import envread
    from flightcheck._knowledge.vllm.envs import DECLARED

    return envread.given(DECLARED[name], env)


def runs_v0(
    v: tuple[int, ...] | None,
    compute_capability: str | None = None,
    quantization: str | None = None,
    env: dict[str, str | None] | None = None,
) -> bool:
    """Whether the launch runs vLLM's V0 engine (see above): every release before 0.7.0,
    and a 0.8.0 - 0.10.1 launch that falls back to it (compute capability below 8.0; GGUF
    before 0.9.0; ``VLLM_USE_V1=0``). Unknown version or compute capability: False."""
    if v is None:
        return False
    if v < _release(V0_RULES_BEFORE):
        return True
    if v < _release(V1_DEFAULT_SINCE) or v >= _release(V0_CC_FALLBACK_BEFORE):
        return False
    use_v1 = _env_on(env, USE_V1)
    if use_v1 is not None:
        # set to 1, the oracle raises rather than falls back (not this question): False
        return not use_v1
    if compute_capability:
        try:
            major, minor = (int(x) for x in compute_capability.split(".")[:2])
        except ValueError:
            major, minor = V0_CC_BELOW
        if (major, minor) < V0_CC_BELOW:
            return True
    return (quantization or "").lower() == "gguf" and v < _release(V0_GGUF_FALLBACK_BEFORE)


def sampler_kind(
    v: tuple[int, ...] | None,
    env: dict[str, str | None] | None = None,
    installed: bool | None = None,
    *,
    v0: bool = False,
) -> str:
    """The profile run's top-k/top-p implementation: "flashinfer", "sort" (PyTorch) or
    "triton" (see above). ``installed``: whether FlashInfer is importable by the engine;
    unknown counts as installed before 0.11.2, where the smaller reserve keeps FC402 from
    stopping a launch that would start. ``v0``: the launch runs the V0 engine
    (:func:`runs_v0`), whose sampler sorts unless ``VLLM_USE_FLASHINFER_SAMPLER=1``."""
    asked = _env_on(env, USE_FLASHINFER_SAMPLER)
    if v0 and V0_FLASHINFER_SAMPLER_OPT_IN:
        return "flashinfer" if asked and installed is not False else "sort"
    if v is not None and v >= _release(TRITON_TOP_K_TOP_P_SINCE):
        return "triton"
    if asked is not None:
        return "flashinfer" if asked and installed is not False else "sort"
    if v is not None and v >= _release(FLASHINFER_SAMPLER_OPT_IN_SINCE):
        return "sort"
    return "sort" if installed is False else "flashinfer"


def sampler_bytes_per_element(kind: str, rows: int) -> int:
    """Bytes per (request x vocabulary) element at the dummy sampler run's peak (above)."""
    if kind == "flashinfer":
        return SAMPLER_BYTES_FLASHINFER
    if kind == "triton":
        return SAMPLER_BYTES_TRITON
    return SAMPLER_BYTES_NATIVE if rows >= SAMPLER_SORT_SEGMENTED_MIN_ROWS else SAMPLER_BYTES_NATIVE_FEW_ROWS


def nccl_cumem_forced_off(v: tuple[int, ...] | None) -> bool:
    """Whether this release sets NCCL_CUMEM_ENABLE=0 itself (unknown: no)."""
    return v is not None and v < _release(NCCL_CUMEM_OFF_UNTIL)


def comm_in_budget(v: tuple[int, ...] | None) -> bool:
    """Whether NCCL / custom all-reduce buffers are inside the KV budget (snapshot before
    the distributed init: before 0.11.0)."""
    return v is not None and v < _release(SNAPSHOT_AFTER_DISTRIBUTED_SINCE)


def pp_kv_check_whole_model(v: tuple[int, ...] | None) -> bool:
    """Whether this release refuses a launch unless the whole model's KV for one max_model_len
    sequence fits the smallest worker's budget (``PP_KV_CHECK_WHOLE_MODEL``; only differs from
    the per-stage check with PP > 1). An unknown release gets the per-stage check, the one
    that stops fewer launches."""
    since, until = PP_KV_CHECK_WHOLE_MODEL
    return v is not None and _release(since) <= v < _release(until)


def default_utilization(v: tuple[int, ...] | None) -> float:
    """vLLM's default gpu_memory_utilization for a release (None: unknown -> the smallest,
    the conservative one)."""
    if v is None:
        return min(value for _, value in UTILIZATION_DEFAULTS)
    for since, value in UTILIZATION_DEFAULTS:
        if v >= _release(since):
            return value
    return UTILIZATION_DEFAULTS[-1][1]


def cudagraphs_in_budget(v: tuple[int, ...] | None, env: dict[str, str | None] | None = None) -> bool:
    """Whether the KV budget has the CUDA-graph estimate taken out (VLLM_MEMORY_PROFILER_
    ESTIMATE_CUDAGRAPHS, whose default flipped to on in 0.20.0)."""
    asked = _env_on(env, ESTIMATE_CUDAGRAPHS)
    if asked is not None:
        return asked
    return v is None or v >= _release(CUDAGRAPHS_IN_BUDGET_SINCE)


#: The V0 engine's batch rule, read in the 0.6.4.post1 wheel and applied to releases
#: before 0.7.0 (later V0 releases are not read): vllm/engine/arg_utils.py turns chunked
#: prefill on by default only when max_model_len > 32768 (CUDA, no sliding window, no
#: speculative model, LoRA or prompt adapter, not multimodal); vllm/config.py
#: ``SchedulerConfig``: without chunked prefill max_num_batched_tokens = max(max_model_len,
#: 2048), with it 512; max_num_seqs 256. V0's profile run (worker/model_runner.py
#: ``profile_run``) spreads those tokens over max_num_seqs dummy prompts, so its peak grows
#: with max_model_len up to 32K and drops past it.
V0_RULES_BEFORE = "0.7.0"
V0_LONG_CONTEXT = 32768
V0_CHUNKED_TOKENS = 512
V0_MIN_TOKENS = 2048
V0_MAX_SEQS = 256
#: A V0 launch of 0.8.x (the fallback, :func:`runs_v0`) sizes its profile run by the same
#: rule (vllm/engine/arg_utils.py ``_set_default_args_v0``: chunked prefill by default only
#: past 32K; max_num_seqs 256; vllm/config.py ``SchedulerConfig``: without chunked prefill
#: max(max_model_len, 2048)), but with chunked prefill it takes
#: ``_DEFAULT_MAX_NUM_BATCHED_TOKENS`` = 2048, not 512 (read in the 0.8.0 and 0.8.5 wheels).
V0_CHUNKED_TOKENS_SINCE_0_8 = 2048


def v0_batch(max_model_len: int, v: tuple[int, ...] | None = None) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) of the V0 engine when the launch sets neither
    (the defaults of the common case; see above): 0.6.4.post1's rule, or 0.8.x's for a V0
    fallback of 0.8.0 or later."""
    if max_model_len > V0_LONG_CONTEXT:
        late = v is not None and v >= _release(V1_DEFAULT_SINCE)
        return (V0_CHUNKED_TOKENS_SINCE_0_8 if late else V0_CHUNKED_TOKENS), V0_MAX_SEQS
    return max(max_model_len, V0_MIN_TOKENS), V0_MAX_SEQS


def batch_defaults(
    v: tuple[int, ...] | None,
    total_bytes: int,
    gpu_name: str | None,
    compute_capability: str | None,
    max_model_len: int | None = None,
    *,
    v0: bool = False,
) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) the OpenAI server picks when the launch sets
    neither — vllm/engine/arg_utils.py ``EngineArgs.get_batch_defaults``: >= 160 GiB of
    device memory 16384 / 1024; >= 70 GiB and not an A100 nor a GB10 8192 / 1024; else
    2048 / 256 (before 0.33: >= 70 GiB and not an A100 8192 / 1024, else 2048 / 256).
    ``total_bytes`` is the device memory the defaults read: NVML's ``memory.total``
    (platforms/cuda.py ``NvmlCudaPlatform.get_device_total_memory``). A GB10 (DGX Spark)
    does not implement that query: before 0.33 the NVMLError reaches
    ``get_batch_defaults``'s ``except`` and the device memory counts as 0, the small tier
    (read in the 0.15.1 wheel; point 11 of tests/fixtures/memory logs 2048 tokens); 0.33
    falls back to torch's total and keeps cc 12.1 on the small tier. Pass 0 for a GB10
    before 0.33. Before 0.7.0 the V0 rule (:func:`v0_batch`), which depends on
    ``max_model_len``; likewise a later launch that runs V0 (``v0``, :func:`runs_v0`)."""
    if v is not None and (v0 or v < _release(V0_RULES_BEFORE)) and max_model_len:
        return v0_batch(max_model_len, v)
    gib = total_bytes / (1 << 30)
    name = (gpu_name or "").lower()
    new = v is None or v >= _release(BATCH_TIER_160_SINCE)
    if new and gib >= 160:
        return 16384, 1024
    gb10 = new and compute_capability == "12.1"
    if gib >= 70 and "a100" not in name and not gb10:
        return 8192, 1024
    return 2048, 256


def _release(text: str) -> tuple[int, ...]:
    """A release constant of this package as a tuple (``_vocabulary.version.release``)."""
    from flightcheck._vocabulary.version import release

    r = release(text)
    assert r is not None, text  # the constants above are releases
    return r


# ---- multicast paths of vLLM 0.33.0 (read in the 0.33.0 wheel, torch 2.14.0, flashinfer 0.7.2.post1) --

#: Every path of the installed vLLM 0.33.0 that creates or binds multicast memory on one
#: NVSwitch node, where it is (path inside the ``vllm`` package unless named), what turns it
#: on, and how the fallback plan covers it (a setting, or a stop with a layout that avoids it).
#: Torch symmetric memory honours TORCH_SYMM_MEM_DISABLE_MULTICAST (the string is in torch
#: 2.14.0's lib/libtorch_cuda.so): ``rendezvous`` then hands out ``multicast_ptr == 0``.
MULTICAST_PATHS_READ_IN = "0.33.0"
MULTICAST_PATHS: dict[str, tuple[str, str, str]] = {
    # name: (source, gate, cover)
    "torch symmetric-memory all-reduce": (
        "distributed/device_communicators/symm_mem.py, cuda_communicator.py",
        "TP group, VLLM_ALLREDUCE_USE_SYMM_MEM (default 1)",
        "VLLM_ALLREDUCE_USE_SYMM_MEM=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1",
    ),
    "CustomAllreduce MNNVL Lamport / multimem reduce-scatter buffers": (
        (
            "distributed/device_communicators/custom_all_reduce.py (_init_mnnvl_buffer, "
            "_init_mnnvl_multimem_reduce_scatter_buffer: torch symm_mem rendezvous)"
        ),
        "TP group of 2/4/6/8, custom all-reduce on (default)",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST=1 (multicast_ptr 0: the MNNVL buffers are skipped)",
    ),
    "FlashInfer all-reduce (+RMSNorm fusion pass, standalone all-reduce, fused Gemma norm)": (
        (
            "distributed/device_communicators/flashinfer_all_reduce.py, "
            "compilation/passes/fusion/allreduce_rms_fusion.py, "
            "model_executor/layers/fused_allreduce_gemma_rms_norm.py"
        ),
        "TP > 1 on SM90/SM100; VLLM_FLASHINFER_ALLREDUCE_BACKEND auto = mnnvl on one node",
        (
            "TP group on one node: VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm (CUDA IPC); across nodes "
            "trtllm raises ValueError, so the fusion pass is turned off "
            "(pass_config.fuse_allreduce_rms false) and VLLM_ALLREDUCE_USE_FLASHINFER=0"
        ),
    ),
    "NCCL NVLS / NCCL symmetric memory": (
        "distributed/device_communicators/pynccl.py, pynccl_allocator.py",
        "any NCCL group of NVSwitch GPUs (TP, EP, DP); VLLM_USE_NCCL_SYMM_MEM (default 0)",
        "NCCL_NVLS_ENABLE=0, VLLM_USE_NCCL_SYMM_MEM=0",
    ),
    "direct DCP q-gather / kv-gather": (
        "v1/attention/ops/dcp.py, v1/attention/ops/cp_common.py",
        "decode context parallel > 1; VLLM_USE_DIRECT_DCP_Q_GATHER / _KV_GATHER (None: on when applicable, 1: forced)",
        "VLLM_USE_DIRECT_DCP_Q_GATHER=0, VLLM_USE_DIRECT_DCP_KV_GATHER=0",
    ),
    "Kimi-K3 GEMM + all-reduce": (
        "models/common/ops/gemm_rs_ar.py, model_executor/kernels/linear/cute_dsl/gemm_rs_ar.py",
        "Kimi-K3 / Kimi-Linear, VLLM_KIMI_K3_GEMM_AR (default 1)",
        "VLLM_KIMI_K3_GEMM_AR=0",
    ),
    "Kimi-K3 / DeepSeek-V4.1 specialised decode": (
        (
            "models/kimi_k3/nvidia/specialized_decode/ (runtime/__init__.py, cutedsl/common/twoshot.py), "
            "models/deepseek_v41/nvidia/specialized_decode/__init__.py"
        ),
        '--additional-config {"decode_backend": "latency_specialized"} (opt-in)',
        (
            "decode_backend removed from --additional-config (the stock decode): with multicast off "
            "DeepSeek-V4.1's raises ValueError ('decode_backend=latency_specialized needs ...')"
        ),
    ),
    "GEMM + reduce-scatter / all-reduce (cute_dsl GemmRsAr)": (
        (
            "model_executor/kernels/linear/cute_dsl/gemm_rs_ar.py, models/common/ops/gemm_rs_ar.py, "
            "models/deepseek_v41/nvidia/model.py, models/muse_spark/nvidia/ops/gemm_rs.py"
        ),
        "SM100, bf16, TP 2-16; VLLM_ENABLE_GEMM_RS (default 0) or VLLM_KIMI_K3_GEMM_AR",
        (
            "TORCH_SYMM_MEM_DISABLE_MULTICAST=1 (multicast_ptr 0 raises RuntimeError, which "
            "maybe_init_gemm_rs_ar / Muse Spark catch) and VLLM_ENABLE_GEMM_RS=0 where it was set"
        ),
    ),
    "DeepSeek-V4.1 fused all-reduce + mHC": (
        "models/deepseek_v41/nvidia/ops/mhc.py",
        "CustomAllreduce's mnnvl_lamport_ag_multicast_ptr set",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST=1 (the pointer stays 0: the unfused path)",
    ),
    "Inkling Lamport reduce-scatter + short conv": (
        "models/inkling/nvidia/ops/lamport.py (initialize_lamport_rs_conv catches and falls back to NCCL)",
        "Inkling, TP 2/4/8; LAMPORT_RS_SCONV (default 1)",
        "LAMPORT_RS_SCONV=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1",
    ),
    "Muse Spark MNNVL fusions (FlashInfer mnnvl_cutedsl)": (
        "models/muse_spark/nvidia/ops/mnnvl_fusions.py, muse_moe_runner.py",
        "Muse Spark on SM100",
        "no switch; creation is in try/except (ImportError, RuntimeError, ValueError) and falls back: not in the plan",
    ),
    "Kimi-K3 latent MoE tail": (
        "models/kimi_k3/nvidia/latent_moe_runner.py, model.py",
        (
            "SM100 family, MoE TP size (TP x DP, 1 with expert parallel) 8 or 16, num_shared_experts "
            "set, routed_expert_hidden_size set, unquantised routed up-projection"
        ),
        "no switch: stop; the same GPUs with --enable-expert-parallel (MoE TP 1) avoid it",
    ),
    "Beam all-reduce workspace (FlashInfer McastGPUBuffer, no try/except)": (
        "models/beam/nvidia/allreduce.py (BeamAllReduceWorkspace), models/beam/nvidia/model.py",
        (
            "BeamForCausalLM, TP 2/4/8, bf16, hidden size a multiple of 1024 in 1024..8192, SM90/SM100, "
            "the multicast attribute set on every rank"
        ),
        "no switch: stop; a layout whose TP is not 2/4/8 (pipeline parallel) avoids it",
    ),
    "MoonEP all2all": (
        "distributed/device_communicators/all2all.py (MoonEPAll2AllManager), utils/import_utils.py",
        "--all2all-backend moonep (requires NVSwitch multicast)",
        "--all2all-backend allgather_reducescatter (vLLM's default)",
    ),
    "DeepEP / pplx all2all (NVSHMEM)": (
        (
            "distributed/device_communicators/all2all.py; nvidia/nvshmem/lib/libnvshmem_host.so.3 "
            "(contains cuMulticastBindMem and NVSHMEM_DISABLE_NVLS)"
        ),
        "--all2all-backend deepep_* / pplx",
        "NVSHMEM_DISABLE_NVLS=1",
    ),
}

DISABLE_NVLS_NVSHMEM = "NVSHMEM_DISABLE_NVLS"
#: vllm/config/compilation.py PassConfig.fuse_allreduce_rms; vllm/utils/argparse_utils.py turns
#: ``--compilation-config.pass_config.fuse_allreduce_rms false`` into JSON and merges dotted args.
COMPILATION_CONFIG_FLAG = "--compilation-config"
FUSE_ALLREDUCE_RMS_PATH = ("pass_config", "fuse_allreduce_rms")
FUSE_ALLREDUCE_RMS_SINCE = "0.33.0"  # the wheel read: older PassConfig field names differ
#: vllm/models/kimi_k3/nvidia/specialized_decode/runtime/__init__.py: additional_config key.
ADDITIONAL_CONFIG_FLAG = "--additional-config"
DECODE_BACKEND_KEY, SPECIALIZED_DECODE = "decode_backend", "latency_specialized"
#: vllm/config/parallel.py All2AllBackend; arg_utils.py ``--all2all-backend``.
ALL2ALL_BACKEND_FLAG = "--all2all-backend"
ALL2ALL_DEFAULT = "allgather_reducescatter"
ALL2ALL_MULTICAST = frozenset({"moonep"})
ALL2ALL_NVSHMEM = frozenset({"deepep_high_throughput", "deepep_low_latency", "deepep_v2", "pplx"})
DTYPE_FLAG = "--dtype"
DISABLE_CUSTOM_AR_FLAG = "--disable-custom-all-reduce"
DCP_FLAGS = ("--decode-context-parallel-size", "-dcp")  # arg_utils.py
COMPILATION_CONFIG_FLAGS = ("--compilation-config", "-cc")  # arg_utils.py

#: vllm/v1/executor/ray_executor_v2.py + ray_env_utils.get_driver_env_vars (0.33.0): the Ray
#: executor hands every driver variable to the workers (``os.environ.setdefault``: a value
#: already set on the worker's node wins).
RAY_COPIES_DRIVER_ENV_SINCE = "0.33.0"

# ---- Kimi-K3's latent MoE tail (vllm/models/kimi_k3/nvidia/latent_moe_runner.py, model.py) --

#: vllm/model_executor/models/registry.py: both map to vllm.models.kimi_k3 (KimiMoE).
KIMI_K3_ARCHS = frozenset({"KimiK3ForConditionalGeneration", "KimiLinearForCausalLM"})
KIMI_K3_MODEL_TYPES = frozenset({"kimi_k3", "kimi_linear"})  # transformers_utils/config.py
KIMI_K3_TAIL_SINCE, KIMI_K3_TAIL_TP = "0.33.0", (8, 16)  # LatentMoERunner: moe_config.tp_size
KIMI_K3_UP_PROJ = "routed_expert_up_proj"  # model.py: ReplicatedLinear(..., quant_config)

#: vllm/models/inkling/nvidia/ops/lamport.py: os.environ.get("LAMPORT_RS_SCONV", "1") == "0" skips it.
INKLING_ARCHS = frozenset({"InklingForCausalLM", "InklingForConditionalGeneration"})  # registry.py
INKLING_LAMPORT_SWITCH = "LAMPORT_RS_SCONV"

# ---- Beam (vllm/models/beam/nvidia/allreduce.py BeamAllReduceWorkspace.create) ---------

BEAM_ARCHS = frozenset({"BeamForCausalLM"})
BEAM_SINCE = "0.33.0"
BEAM_TP = (2, 4, 8)  # group.size() of the TP group
BEAM_HIDDEN_MIN, BEAM_HIDDEN_MAX, BEAM_HIDDEN_STEP = 1024, 8192, 1024
BEAM_SM_MAJORS = ("9", "10")  # torch.cuda.get_device_capability(device)[0] in (9, 10)

# ---- pins (the wheel's metadata) ---------------------------------------------------------

#: vLLM release -> the flashinfer-python it pins (requirements/cuda.txt at the tag), for
#: snapshots recorded before ``engine_requires`` existed. Collected facts carry the real
#: requirement from the installed distribution's metadata, which always wins.
FLASHINFER_PIN: dict[str, str] = {
    "0.12.0": "0.5.3",
    "0.24.0": "0.6.12",
    "0.33.0": "0.7.2.post1",
}


def layout(
    tp: int, pp: int = 1, dp: int = 1, ep: bool = False, moe_size: int | None = None, pcp: int = 1, dcp: int = 1
) -> str:
    """A parallel layout as vLLM's flags: ``-tp 8 -pp 2 -pcp 2 -dcp 8 --enable-expert-parallel``."""
    parts = (
        [f"{FLAG['tp']} {tp}"] + ([f"{FLAG['pp']} {pp}"] if pp > 1 else []) + ([f"{FLAG['dp']} {dp}"] if dp > 1 else [])
    )
    parts += ([f"{FLAG['pcp']} {pcp}"] if pcp > 1 else []) + ([f"{FLAG['dcp']} {dcp}"] if dcp > 1 else [])
    return " ".join(parts + ([FLAG["ep"]] if ep else []))


# ---- runtime compilers vLLM brings (vllm/utils/deep_gemm.py, vllm/platforms/cuda.py,
# vllm/third_party/deep_gemm, vllm/utils/flashinfer.py) ------------------------------------

#: ``VLLM_USE_DEEP_GEMM`` (vllm/envs.py: ``bool(int(os.getenv(..., "1")))``, on by default).
USE_DEEP_GEMM = "VLLM_USE_DEEP_GEMM"
#: First release that vendors DeepGEMM as ``vllm/third_party/deep_gemm`` (read in 0.33.0).
DEEP_GEMM_VENDORED_SINCE = "0.33.0"
#: ``CudaPlatform.support_deep_gemm``: capability 9.0 exactly, families 10.x and 12.x.
DEEP_GEMM_CC_EXACT = frozenset({(9, 0)})
DEEP_GEMM_CC_FAMILIES = frozenset({10, 12})
#: DeepGEMM's JIT compiler: ``DG_JIT_NVCC_COMPILER`` else ``$CUDA_HOME/bin/nvcc``; its
#: ``_C_extension`` refuses older ones ("NVCC version must be at least 12.9", the string in
#: vllm/third_party/deep_gemm/_C_extension.abi3.so of 0.33.0).
DG_NVCC_VAR = "DG_JIT_NVCC_COMPILER"
DEEP_GEMM_MIN_NVCC = (12, 9)
#: vllm/utils/flashinfer.py ``has_flashinfer``: without flashinfer-cubin and with no nvcc
#: (CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda) or no ninja on PATH, vLLM disables
#: FlashInfer with a warning and takes its fallbacks instead of failing a JIT build.
FLASHINFER_GATED_ON_TOOLS_SINCE = "0.33.0"


def deep_gemm_arch(cc: str | None) -> bool:
    """Whether vLLM's ``support_deep_gemm`` is true on a GPU of compute capability ``cc``."""
    try:
        major, minor = (int(x) for x in (cc or "").split(".")[:2])
    except ValueError:
        return False
    return (major, minor) in DEEP_GEMM_CC_EXACT or major in DEEP_GEMM_CC_FAMILIES


#: checkpoint weight formats (the memory model's ``Quant.method``) whose vLLM 0.33 kernels
#: call DeepGEMM by default, and the compute-capability majors where they do:
#:
#: * ``fp8-block``, wherever ``support_deep_gemm`` holds: the FP8 linear kernel
#:   (``model_executor/kernels/linear/scaled_mm/deep_gemm.py``: activation groups (1, 128)
#:   only, so per-tensor FP8 never) and ``Fp8MoeBackend.DEEPGEMM``
#:   (``layers/fused_moe/oracle/fp8.py``; ``experts/deep_gemm_moe.py`` runs on 9.0 and 10.x);
#: * ``mxfp4`` on 10.x only, as the MoE fallback behind FlashInfer's TRT-LLM MXFP4 kernel
#:   (``oracle/mxfp4.py`` ``_get_priority_backends``: FLASHINFER_TRTLLM_MXFP4_MXFP8, then
#:   DEEPGEMM_MXFP4, whose ``DeepGemmFP4Experts`` requires the 10.x family); on 9.0 MXFP4
#:   goes to humming / Marlin;
#: * NVFP4 is not in it: ``oracle/nvfp4.py`` lists no DeepGEMM backend, and the DeepGEMM
#:   MegaMoE NVFP4 path (``fused_moe/deep_gemm_mega_moe.py``) runs only when asked for
#:   (``moe_backend == "deep_gemm_mega_moe"``) and on SM 10.x.
DEEP_GEMM_QUANTS = frozenset({"fp8-block", "mxfp4"})
#: formats that take DeepGEMM only on these majors (and, for MXFP4, only when vLLM's
#: FlashInfer is off: no flashinfer-python, or ``has_flashinfer`` false).
DEEP_GEMM_QUANT_MAJORS: dict[str, frozenset[int]] = {"mxfp4": frozenset({10})}


def deep_gemm_takes(method: str | None, cc_major: int, *, flashinfer_on: bool) -> bool:
    """Whether vLLM sends weights of ``method`` through DeepGEMM on a GPU of this major."""
    if method not in DEEP_GEMM_QUANTS:
        return False
    majors = DEEP_GEMM_QUANT_MAJORS.get(method)
    if majors is not None and cc_major not in majors:
        return False
    return not (method == "mxfp4" and flashinfer_on)


# ---- reader: how vLLM 0.33's parser reads a command line --------------------------------
# (vllm/utils/argparse_utils.py FlexibleArgumentParser.parse_args / _pull_args_from_config,
# vllm/entrypoints/cli/serve.py; the option table itself is data/vllm_0.33.0_args.json)

#: ``-O3`` / ``-O=3`` / ``-O 3`` become this option.
READER_OPT_LEVEL = "--optimization-level"
READER_OPT_SHORT = "-O"
#: the check FlexibleArgumentParser makes: served names but no positional model.
READER_SERVED_NAME = r"^--served[-_]model[-_]name(=.+|$)"
#: parser type (as the table names it) -> how the built-in reader converts the value.
READER_TYPES: dict[str, str] = {
    "int": "int",
    "float": "float",
    "str": "str",
    "json.loads": "json",
    "vllm.utils.argparse_utils.human_readable_int": "hr_int",
    "vllm.utils.argparse_utils.human_readable_int_or_auto": "hr_int_or_auto",
    "vllm.engine.arg_utils.union_dict_and_str": "dict_or_str",
}
#: engine record attribute -> Intent field (what the reader copies when the line sets it).
READER_FIELDS: dict[str, str] = {
    "model": "model",
    "revision": "revision",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "data_parallel_size": "data_parallel_size",
    "data_parallel_size_local": "data_parallel_size_local",
    "prefill_context_parallel_size": "prefill_context_parallel_size",
    "decode_context_parallel_size": "decode_context_parallel_size",
    "enable_expert_parallel": "enable_expert_parallel",
    "max_model_len": "max_model_len",
    "kv_cache_dtype": "kv_cache_dtype",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "quantization": "quantization",
    "dtype": "dtype",
    "enforce_eager": "enforce_eager",
    "load_format": "load_format",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "max_num_seqs": "max_num_seqs",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
    "cpu_offload_gb": "cpu_offload_gb",
    "hf_overrides": "hf_overrides",
    "nnodes": "nnodes",
    "download_dir": "download_dir",
    "distributed_executor_backend": "distributed_executor_backend",
}
#: options whose value the table types loosely (``optional_type``) but the engine reads
#: as a number: dest -> converter kind.
READER_LOOSE_NUMBERS: dict[str, str] = {
    "kv_cache_memory_bytes": "hr_int",
    "max_num_batched_tokens": "hr_int",
}
#: options whose value vLLM validates as JSON of a config record (an invalid document
#: stops the parse): ``optional_type`` of a pydantic config in vllm/engine/arg_utils.py.
READER_JSON_STRICT: tuple[str, ...] = ("kv_transfer_config",)
#: the chat templates vLLM ships (vllm/transformers_utils/chat_templates/): a path-like
#: --chat-template that exists neither here nor there is refused
#: (vllm/renderers/chat_utils/chat_template.py, run by validate_parsed_serve_args).
READER_BUILTIN_CHAT_TEMPLATES: frozenset[str] = frozenset(
    {
        "template_basic.jinja",
        "template_blip2.jinja",
        "template_chatml.jinja",
        "template_deepseek_ocr.jinja",
        "template_deepseek_vl2.jinja",
        "template_kimi_audio.jinja",
        "template_minicpmv45.jinja",
    }
)

# ---- reader: the plugin switch (vllm/plugins/__init__.py load_plugins_by_group) ----------

#: comma list of the general plugins vLLM loads; unset: all installed ones.
PLUGINS_VAR = "VLLM_PLUGINS"
#: flightcheck's entry point name in the ``vllm.general_plugins`` group (pyproject.toml).
PLUGIN_NAME = "flightcheck"


# ---- weight files by load format (DefaultModelLoader._prepare_weights in
# vllm/model_executor/model_loader/default_loader.py) ----

#: load format -> the weight files the default loader globs, in order: the first pattern
#: that matches a file wins ("auto" is ``*.safetensors``, then ``*.bin``, then the ``*.pt``
#: fallback). A format not listed here has a loader of its own (sharded state, tensorizer,
#: streamers, GGUF, ...) whose files flightcheck does not read.
LOAD_FORMAT_FILES: dict[str, tuple[str, ...]] = {
    "auto": ("*.safetensors", "*.bin", "*.pt"),
    "hf": ("*.safetensors", "*.bin", "*.pt"),
    "safetensors": ("*.safetensors",),
    "fastsafetensors": ("*.safetensors",),
    "instanttensor": ("*.safetensors",),
    "mistral": ("*.safetensors",),
    "pt": ("*.pt",),
    "npcache": ("*.bin", "*.pt"),
}
#: load formats that read no weight file at all (random weights; vllm/model_executor/model_loader/dummy_loader.py).
NO_WEIGHT_LOAD_FORMATS: frozenset[str] = frozenset({"dummy"})
#: *.bin / *.pt files the loader drops (weight_utils.filter_files_not_needed_for_inference).
NOT_WEIGHT_FILES: frozenset[str] = frozenset(
    {"training_args.bin", "optimizer.bin", "optimizer.pt", "scheduler.pt", "scaler.pt"}
)

#: "auto" loads the Mistral format when any consolidated*.safetensors exists: only those
#: files, filtered by consolidated.safetensors.index.json (default_loader.py _prepare_weights).
AUTO_MISTRAL: bool = True
MISTRAL_FILES = "consolidated*.safetensors"
MISTRAL_INDEX = "consolidated.safetensors.index.json"

#: architectures whose vLLM model reads its weights from the one ``*.gguf`` file of the
#: model directory (or a ``.gguf`` path) with the ``gguf`` package's reader: Flint's
#: ``find_gguf_file`` and ``gguf_nvfp4_weights_iterator`` (vllm/models/flint/gguf_nvfp4.py,
#: used by vllm/models/flint/model.py, which sets ``allow_patterns_overrides = ["*.gguf"]``).
#: vLLM 0.33 has no other GGUF loader: a GGUF header the ``gguf`` reader refuses fails
#: these launches, and only these.
GGUF_ARCHITECTURES: frozenset[str] = frozenset({"FlintForCausalLM"})
#: more than one ``*.gguf`` in the directory is a ValueError for them (find_gguf_file:
#: "Expected one GGUF file"): split GGUF files are not loaded
GGUF_SINGLE_FILE: bool = True

# ---- tilelang (mHC) and humming: the kernels vLLM 0.33 JIT-compiles with them ------------

#: ``vllm/model_executor/layers/mhc.py``: on CUDA every mHC op (``MHCPreOp.forward_cuda``,
#: ``MHCPostOp``, ``HCHeadOp``, ``MHCFusedPostPreOp``) calls the tilelang kernels
#: (``model_executor/kernels/mhc/tilelang.py``; ``vllm/tilelang_utils`` imports tilelang on
#: CUDA and raises ImportError without it). The models built on those ops
#: (``model_executor/models/registry.py``: ``vllm.models.deepseek_v4``, ``deepseek_v41``,
#: ``glm5next``).
MHC_ARCHS = frozenset(
    {
        "DeepseekV4ForCausalLM",
        "DeepseekV4ForConditionalGeneration",
        "DeepseekV41ForCausalLM",
        "Glm5NextForCausalLM",
        "Glm5NextForConditionalGeneration",
    }
)
#: first release read with tilelang mHC kernels (0.33.0).
TILELANG_MHC_SINCE = "0.33.0"

#: ``model_executor/layers/quantization/utils/humming/priority.py``: humming moves ahead of
#: Marlin (``prioritize_humming``) on compute capability 9.0 only, in the linear kernel
#: lists (``model_executor/kernels/linear/__init__.py``) and the MoE oracles
#: (``fused_moe/oracle/{mxfp4,nvfp4,int_wna16,fp8,mxfp8}.py``); it is picked where Marlin
#: would have been, i.e. for weights Hopper has no native kernel for.
HUMMING_PREFERRED_CC = frozenset({(9, 0)})
HUMMING_SINCE = "0.33.0"
#: weight formats (the memory model's ``Quant.method``) whose MoE experts fall through to
#: Marlin, and so to humming, on SM 9.0 (MoE only: the linear lists put Machete and
#: FlashInfer's W4A16 kernels ahead of Marlin on Hopper, not judged here): int4
#: (GPTQ/AWQ/compressed-tensors WNA16; oracle/int_wna16.py lists MARLIN after
#: FLASHINFER_TRTLLM, a Blackwell kernel), MXFP4 (oracle/mxfp4.py: "SM90 falls through to
#: Humming or Marlin"), NVFP4 (oracle/nvfp4.py: MARLIN after the FlashInfer / CUTLASS FP4
#: kernels of SM 10.x).
HUMMING_QUANTS = frozenset({"int4", "mxfp4", "nvfp4"})
#: gpt-oss's MXFP4 MoE on Hopper runs the OAI Triton kernels, listed before Marlin
#: (oracle/mxfp4.py ``_get_priority_backends_for_gpt_oss``).
HUMMING_MXFP4_EXCEPT = frozenset({"GptOssForCausalLM"})

#: the load formats under which they read that file: ``FlintForCausalLM.__init__`` calls
#: ``find_gguf_file`` whatever the format and ``load_weights`` reads the GGUF itself, and
#: these formats' loader (``DefaultModelLoader``, model_loader/__init__.py
#: ``_LOAD_FORMAT_TO_MODEL_LOADER``) globs only ``allow_patterns_overrides`` when the model
#: sets it (default_loader.py ``_prepare_weights``: ``allow_patterns =
#: allow_patterns_overrides``), so safetensors beside the GGUF are never opened.
GGUF_LOAD_FORMATS: frozenset[str] = frozenset(LOAD_FORMAT_FILES)

# ---- Flint's GGUF tensor names and what vLLM allocates for them
# (vllm/models/flint/gguf_nvfp4.py ``_map_name``, ``gguf_nvfp4_weights_iterator``;
# vllm/models/flint/model.py ``_GGUF_DEQUANTIZED``, ``_nvfp4_gguf_quant_config``) ----

#: whole-model tensors: GGUF name (the base name, without ``.weight``, for NVFP4 tensors)
#: -> HF name (``_GLOBAL_NAMES``)
FLINT_GGUF_GLOBAL: dict[str, str] = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output": "lm_head",
}
#: ``blk.N.<key>`` -> ``model.layers.N.<value>`` (``_LAYER_NAMES``)
FLINT_GGUF_LAYER: dict[str, str] = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "attn_sinks.weight": "self_attn.softmax_offset",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "ffn_gate_shexp": "mlp.shared_expert.gate_proj",
    "ffn_up_shexp": "mlp.shared_expert.up_proj",
    "ffn_down_shexp": "mlp.shared_expert.down_proj",
    "ffn_gate_inp.weight": "mlp.gate.weight",
}
#: stacked routed experts ``blk.N.<key>`` -> ``model.layers.N.mlp.experts.{e}.<value>``,
#: one tensor holding every expert (``_EXPERT_NAMES``)
FLINT_GGUF_EXPERTS: dict[str, str] = {
    "ffn_gate_exps": "gate_proj",
    "ffn_up_exps": "up_proj",
    "ffn_down_exps": "down_proj",
}
#: the ggml type repacked as ModelOpt NVFP4 (``_GGUF_NVFP4``); its per-tensor scale is the
#: F32 tensor ``<base>.scale``; other tensors must be BF16 or F32 ("Unsupported GGUF tensor
#: type" otherwise)
FLINT_GGUF_NVFP4 = 40
FLINT_GGUF_PLAIN_TYPES: frozenset[int] = frozenset({0, 30})  # F32, BF16
#: NVFP4 tensors dequantized to BF16 at load (``_GGUF_DEQUANTIZED``)
FLINT_GGUF_DEQUANTIZED: frozenset[str] = frozenset({"lm_head"})
#: unquantized parameters are the model dtype, which Flint requires to be bfloat16
#: (``FlintAttention``: ``assert ... model_config.dtype == torch.bfloat16``) except the
#: attention sinks, float32 (``make_attention_sink(self.num_heads, torch.float32)``)
FLINT_FP32_PARAMS: tuple[str, ...] = ("self_attn.softmax_offset",)

# ---- speculative decoding (vllm/config/speculative.py, vllm/engine/arg_utils.py) ---------
#
# Read from 0.33.0's source and checked in the 0.32.0 wheel, whose ``__post_init__`` differs
# only by Medusa / MLP-speculator detection (removed in 0.33) and the Transformers-backend
# MTP (added), with the same ``--spec-method`` / ``--spec-model`` / ``--spec-tokens``; the
# memory terms (drafter on the last PP rank, MTP embedding / head sharing, the proposer's
# buffers) read the same in 0.21.0 and 0.25.0 too, but 0.21 lacks the shortcuts and keeps
# ``longcat_flash_mtp`` apart, so older versions get a note, not a figure.
SPEC_DECODE_MEMORY_SINCE = "0.32.0"
#: ``--speculative-config`` / ``-sc`` (JSON) and its shortcuts ``--spec-method``,
#: ``--spec-model``, ``--spec-tokens`` (arg_utils.py ``add_cli_args``); a shortcut and the
#: same key in the JSON are refused together (``create_speculative_config``: "... are
#: mutually exclusive"). Canonical spellings, as the reader renders the launch's flags.
SPECULATIVE_CONFIG_FLAG = "--speculative-config"
SPECULATIVE_SHORTCUTS: dict[str, str] = {
    "--spec-method": "method",
    "--spec-model": "model",
    "--spec-tokens": "num_speculative_tokens",
}
#: ``MTPModelTypes``: a method spelled as one of these is rewritten to ``"mtp"``
#: (``SpeculativeConfig.__post_init__``: "method `%s` is deprecated and replaced with mtp")
MTP_METHODS: frozenset[str] = frozenset(
    {
        "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp",
        "glm_ocr_mtp", "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp",
        "qwen4_exp_mtp", "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp", "minimax_m3_mtp",
        "bailing_hybrid_mtp", "mtp", "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp", "step5_mtp",
        "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp", "inkling_mtp", "glm5_next_mtp",
    }
)  # fmt: skip
#: methods without a draft model on the GPU: the n-gram proposers match the prompt (CPU /
#: a few index buffers), suffix decoding a CPU tree; ``custom_class`` a user module
#: (``__post_init__``: draft_model_config = the target's, no weights loaded)
NO_DRAFT_METHODS: frozenset[str] = frozenset({"ngram", "ngram_gpu", "suffix", "custom_class"})
#: a target's model_type -> the draft's when the draft is the target's own checkpoint
#: (``SpeculativeConfig.hf_config_override``), with the config key holding the number of
#: MTP layers (``n_predict``); the plain ``num_nextn_predict_layers`` cases
MTP_TARGETS: dict[str, str] = {
    "deepseek_v3": "deepseek_mtp",
    "deepseek_v32": "deepseek_mtp",
    "glm_moe_dsa": "deepseek_mtp",
    "deepseek_mtp": "deepseek_mtp",
    "kimi_k3": "kimi_k3_mtp",
    "pangu_ultra_moe": "pangu_ultra_moe_mtp",
    "ernie4_5_moe": "ernie_mtp",
    "qwen3_next": "qwen3_next_mtp",
    "longcat_flash": "longcat_flash_mtp",
    "exaone_moe": "exaone_moe_mtp",
    "hy_v3": "hy_v3_mtp",
    "hy_v4": "hy_v4_mtp",
}


class SpecDecode:
    """What a launch's speculative decoding resolves to, as far as memory cares
    (``SpeculativeConfig.__post_init__``). ``error``: the engine refuses the config."""

    __slots__ = (
        "draft_tp",
        "error",
        "kv_cache_dtype",
        "method",
        "model",
        "mtp_layers",
        "num_speculative_tokens",
        "revision",
    )

    def __init__(
        self,
        method: str | None,
        num_speculative_tokens: int | None = None,
        model: str | None = None,
        draft_tp: int | None = None,
        mtp_layers: int = 0,
        error: str | None = None,
        kv_cache_dtype: str | None = None,
        revision: str | None = None,
    ) -> None:
        self.method, self.num_speculative_tokens, self.model = method, num_speculative_tokens, model
        self.draft_tp, self.mtp_layers, self.error = draft_tp, mtp_layers, error
        #: the draft's own KV cache dtype (``SpeculativeConfig.kv_cache_dtype``: "When
        #: ``None``, the draft inherits the target model's ``--kv-cache-dtype``"; applied by
        #: llm_base_proposer.py ``_create_draft_vllm_config``), and the draft's revision
        self.kv_cache_dtype, self.revision = kv_cache_dtype, revision

    @property
    def on_gpu(self) -> bool:
        """Whether a draft is loaded onto the GPU (its weights and its KV cache layers)."""
        return self.error is None and self.method not in NO_DRAFT_METHODS

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__ if getattr(self, k) not in (None, 0)}


def _custom_path(model: str | None) -> bool:
    """``SpeculativeConfig._is_custom_proposer_path``: a dotted import path."""
    if model is None or model.startswith(("http://", "https://", "file://")) or "/" in model:
        return False
    parts = model.split(".")
    return len(parts) >= 2 and all(p.isidentifier() for p in parts)


def _json_arg(flags: list[str], flag: str) -> tuple[dict[str, Any] | None, str | None]:
    """A JSON-object flag as vLLM's parser builds it (utils/argparse_utils.py
    ``FlexibleArgumentParser.parse_args``, the same in the 0.10.2 - 0.33.0 wheels): ``--flag
    JSON`` sets the whole object, the last one winning; every ``--flag.a.b value`` is merged
    into one nested object (the value read as JSON when it parses, else as a string), which
    vLLM appends after all other arguments, so that it replaces any ``--flag JSON``.
    (the object or None when not given; an error when vLLM refuses the value)."""
    import json

    doc: dict[str, Any] | None = None
    dotted: dict[str, Any] | None = None
    for item in flags:
        name, _, value = item.partition("=")
        if name == flag:
            try:
                parsed = json.loads(value)
            except ValueError:
                return None, f"{flag} is not JSON"
            if not isinstance(parsed, dict):
                return None, f"{flag} is not a JSON object"
            doc = parsed
        elif name.startswith(flag + "."):
            try:
                v: Any = json.loads(value)
            except ValueError:
                v = value
            *path, last = name[len(flag) + 1 :].split(".")
            if dotted is None:
                dotted = {}
            node = dotted
            for key in path:  # recursive_dict_update: a dict merges, anything else is replaced
                if not isinstance(node.get(key), dict):
                    node[key] = {}
                node = node[key]
            if isinstance(v, dict) and isinstance(node.get(last), dict):
                _merge(node[last], v)
            else:
                node[last] = v
    return (dotted if dotted is not None else doc), None


def _merge(into: dict[str, Any], update: dict[str, Any]) -> None:
    """argparse_utils.py ``recursive_dict_update`` (lists are not concatenated here: only the
    ``--flag.key+`` spelling makes them, which flightcheck does not read)."""
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v


def _given(flags: list[str]) -> tuple[dict[str, Any] | None, str | None]:
    """The speculative config the flags give (arg_utils.py ``create_speculative_config``):
    the JSON, the shortcuts merged in, keys' dashes as underscores."""
    doc, err = _json_arg(flags, SPECULATIVE_CONFIG_FLAG)
    if err is not None:
        return None, err
    shortcuts: list[tuple[str, str, str]] = []
    for item in flags:
        name, _, value = item.partition("=")
        if name in SPECULATIVE_SHORTCUTS:
            shortcuts.append((name, SPECULATIVE_SHORTCUTS[name], value))
    for flag, key, value in shortcuts:
        doc = {} if doc is None else doc
        if key in doc:
            return None, f"{flag} and {SPECULATIVE_CONFIG_FLAG}['{key}'] are mutually exclusive"
        doc[key] = int(value) if key == "num_speculative_tokens" and value.isdigit() else value
    if doc is None:
        return None, None
    return {str(k).replace("-", "_"): v for k, v in doc.items()}, None


def _pos_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def speculative(
    flags: list[str], target: dict[str, Any] | None, target_model: str | None, tp: int
) -> SpecDecode | None:
    """The launch's speculative decoding (None: off), resolved as vLLM 0.33's
    ``SpeculativeConfig.__post_init__`` (vllm/config/speculative.py) does for what memory
    depends on: the method (inferred from ``model`` when unset: ``ngram`` / a dotted class
    path / else ``draft_model``; an ``*_mtp`` method name becomes ``mtp``; ``mtp`` without a
    model drafts with the target's own checkpoint; a draft model named ``eagle-`` /
    ``eagle3`` is EAGLE / EAGLE-3; the target's own checkpoint as draft is MTP when
    ``hf_config_override`` rewrites its model_type to an MTP one), the MTP layers
    (``n_predict`` = ``num_nextn_predict_layers``), ``num_speculative_tokens`` (defaults to
    ``n_predict``; must divide by it when larger) and the draft's TP
    (``_verify_and_get_draft_tp``: 1 or the target's, the target's when unset).
    ``target``: the target's config.json as stored (a multimodal wrapper's outer config)."""
    doc, err = _given(flags)
    if doc is None:
        return SpecDecode(None, error=err) if err else None
    method = doc.get("method")
    method = method if isinstance(method, str) else None
    model = doc.get("model") if isinstance(doc.get("model"), str) else None
    n = _pos_int(doc.get("num_speculative_tokens"))
    if doc.get("num_speculative_tokens") is not None and n is None:
        return SpecDecode(method, error="num_speculative_tokens must be a positive integer")
    draft_tp = doc.get("draft_tensor_parallel_size")
    if method is None:
        method = (
            "custom_class" if _custom_path(model) else ("ngram" if model in ("ngram", "[ngram]") else "draft_model")
        )
    if method in MTP_METHODS:
        method = "mtp"
    if model is None and n is not None:
        if method == "mtp":
            model = target_model  # "use the draft model from the same model"
        elif method in ("ngram", "[ngram]", "ngram_gpu", "suffix", "extract_hidden_states"):
            model = method
        elif method != "custom_class":
            return SpecDecode(method, n, error="num_speculative_tokens was provided but without speculative model.")
    if method == "[ngram]":
        method = "ngram"
    if method in NO_DRAFT_METHODS or method == "extract_hidden_states" or model is None:
        return SpecDecode(method, n, model)
    tcfg = target or {}
    own = model == target_model
    draft_type = MTP_TARGETS.get(str(tcfg.get("model_type") or "")) if own else None
    # ``hf_config_override`` reads n_predict from the top-level config, Kimi-K3's from its
    # ``text_config`` (the top-level model_type decides the rewrite)
    raw_inner = tcfg.get("text_config")
    inner: dict[str, Any] = raw_inner if isinstance(raw_inner, dict) else {}
    n_predict = (
        _pos_int(tcfg.get("num_nextn_predict_layers")) or _pos_int(inner.get("num_nextn_predict_layers"))
        if draft_type
        else None
    )
    low = model.lower()
    if method in ("eagle", "eagle3", "dflash", "dspark"):
        pass
    elif "eagle-" in low:
        method = "eagle"
    elif "eagle3" in low:
        method = "eagle3"
    elif "dflash" in low:
        method = "dflash"
    elif "dspark" in low:
        method = "dspark"
    elif draft_type is not None:
        method = "mtp"
        if n is None:
            # the MTP branch compares ``self.num_speculative_tokens > 1`` before defaulting
            # it to n_predict: vLLM 0.33 dies with a TypeError (conformance-tested)
            return SpecDecode(method, n, model, error="num_speculative_tokens is required for MTP (vLLM 0.33 raises)")
    if method == "mtp" and n_predict is None and own:
        return SpecDecode(method, n, model, error="the target's config has no MTP layers (num_nextn_predict_layers)")
    if n_predict is not None:
        if n is None:
            n = n_predict
        elif n > n_predict and n % n_predict:
            return SpecDecode(method, n, model, error=f"num_speculative_tokens:{n} must be divisible by {n_predict=}")
    if n is None:
        return SpecDecode(
            method, n, model, error="A speculative model was provided, but `num_speculative_tokens` was not provided"
        )
    if draft_tp is None:
        draft_tp = tp
    elif draft_tp not in (1, tp):
        return SpecDecode(
            method,
            n,
            model,
            error=f"draft_tensor_parallel_size={draft_tp} cannot be other value than 1 or target model "
            "tensor_parallel_size",
        )
    if method == "draft_model" and draft_tp != tp:
        # v1/spec_decode/draft_model.py ``_raise_if_draft_tp_mismatch`` (the proposer's
        # __init__, at startup): a separate draft model runs at the target's TP only
        return SpecDecode(
            method,
            n,
            model,
            error=f"Currently, 'draft_tensor_parallel_size' and 'tensor_parallel_size' must be the same. "
            f"Got {draft_tp} and {tp}.",
        )
    kv_dtype, revision = doc.get("kv_cache_dtype"), doc.get("revision")
    return SpecDecode(
        method,
        n,
        model,
        int(draft_tp),
        (n_predict or 0) if method == "mtp" else 0,
        kv_cache_dtype=kv_dtype if isinstance(kv_dtype, str) else None,
        revision=revision if isinstance(revision, str) else None,
    )


# ---- a separate draft checkpoint (EAGLE / EAGLE-3 / draft_model) --------------------------
#
# Read from 0.33.0's source; the files below are the same in the 0.32.0 wheel (llama_eagle.py,
# llama_eagle3.py identical; draft_model.py and llm_base_proposer.py's sharing identical but
# for a comment), so the counting is gated like the MTP terms (``SPEC_DECODE_MEMORY_SINCE``).
#
#: methods whose draft is a checkpoint of its own that flightcheck reads and counts:
#: ``eagle`` (model_executor/models/llama_eagle.py ``EagleLlamaForCausalLM``), ``eagle3``
#: (llama_eagle3.py ``Eagle3LlamaForCausalLM``) and ``draft_model`` (v1/spec_decode/
#: draft_model.py ``DraftModelProposer``: a whole model, embeddings and head its own). Other
#: methods with a draft checkpoint (dflash, dspark) keep a note.
SEPARATE_DRAFT_METHODS: frozenset[str] = frozenset({"eagle", "eagle3", "draft_model"})


def separate_draft(spec: SpecDecode | None, target_model: str | None) -> str | None:
    """The draft checkpoint a launch loads besides the target (``SpeculativeConfig.model``),
    when it is one flightcheck counts (:data:`SEPARATE_DRAFT_METHODS`); None otherwise (off,
    refused, n-gram, or the target's own MTP layers)."""
    if spec is None or not spec.on_gpu or spec.method not in SEPARATE_DRAFT_METHODS:
        return None
    if not spec.model or spec.model == target_model:
        return None
    return spec.model


class DraftShares:
    """What a separate draft shares with the target once loaded (v1/spec_decode/
    llm_base_proposer.py ``load_model``, ``_maybe_share_embeddings``,
    ``_maybe_share_lm_head``; the memory profile runs after ``empty_cache``, so a shared
    copy's bytes are freed): ``embed`` / ``head``: "own" (allocated and kept), "shared"
    (the target's is used; the draft's copy freed or never allocated), "if_equal" (kept
    unless its values equal the target's, which only the loaded tensors tell)."""

    __slots__ = ("embed", "head")

    def __init__(self, embed: str, head: str) -> None:
        self.embed, self.head = embed, head


def draft_shares(
    method: str,
    pp: int,
    *,
    embed_stored: bool,
    head_stored: bool,
    same_width: bool,
    head_same_shape: bool,
) -> DraftShares:
    """The sharing rules of vLLM 0.33's proposer for a separate draft:

    - ``draft_model``: nothing shared (draft_model.py overrides both ``_maybe_share_*`` to
      ``pass``);
    - EAGLE / EAGLE-3 embeddings (``VocabParallelEmbedding(vocab_size, hidden)``, always
      allocated): with PP 1, shared when the checkpoint has none (``has_own_embed_tokens``
      is set by ``process_eagle_weight`` only for a stored ``embed_tokens``) or when the
      stored one equals the target's, and never when the widths differ; with PP > 1 "The
      draft's vocab embedding will be loaded separately": kept;
    - the LM head: EAGLE (``EagleLlamaForCausalLM``) has none and always uses the target's;
      EAGLE-3's ``ParallelLMHead(draft_vocab_size, hidden)`` is kept when stored
      (``has_own_lm_head``) unless equal to the target's (only possible at the same shape),
      shared when not stored."""
    if method == "draft_model":
        return DraftShares("own", "own")
    if pp > 1 or not same_width:
        embed = "own"
    else:
        embed = "if_equal" if embed_stored else "shared"
    if method == "eagle" or not head_stored:
        head = "shared"
    else:
        head = "if_equal" if head_same_shape else "own"
    return DraftShares(embed, head)


#: EAGLE-3's draft-to-target vocabulary map: ``draft_id_to_target_id``, int64 of
#: ``draft_vocab_size``, a parameter only when the draft vocabulary differs from the
#: target's (llama_eagle3.py); ``t2d`` is never loaded (``load_weights``: ``continue``).
#: ``fc`` fusing the target's hidden states is a ``ReplicatedLinear`` (EAGLE: 2 x hidden ->
#: hidden; EAGLE-3: target_hidden x num_aux_hidden_states -> hidden): whole on every rank.
EAGLE3_D2T_BYTES = 8
