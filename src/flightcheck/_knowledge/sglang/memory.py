"""SGLang's memory rules (0.5.23): mem_fraction_static's default and what changes it, the
KV pool and the request-to-token table, the unbalanced-memory check and the default
context length.
"""

from __future__ import annotations

import math
from typing import Any

from flightcheck._knowledge.sglang.multicast import ATTN_DP_SIZE_FLAG, DP_ATTENTION_FLAG, MOE_A2A_BACKEND_FLAG
from flightcheck._vocabulary.engine import EnvVar

# ---- memory: mem_fraction_static's default (sglang 0.5.23) -------------------------------
#
# python/sglang/srt/arg_groups/memory_hook.py ``handle_gpu_memory_settings``: the GPU's
# memory (utils/common.py ``get_device_memory_capacity``: nvidia-smi memory.total, MiB)
# picks chunked_prefill_size and the decode CUDA-graph max batch (capped by
# --max-running-requests when the batch is the default); then ``reserved = 512 +
# max(activation tokens, 2048) x 1.5 + tp x pp / 8 x 1024 + reserve_for_graph_mb`` MiB
# (activation tokens: chunked_prefill_size, or max_prefill_tokens when chunking is off), at
# least 10 GiB above 60 GiB of memory, plus ``reserve_for_deepep_a2a_mb`` (2 GiB with
# --moe-a2a-backend deepep and decode graphs) after the floor, and
# ``mem_fraction_static = round((mem - reserved) / mem, 3)``; a vision model's fraction is
# then scaled by ``adjust_mem_fraction_for_vlm``. ``reserve_for_graph_mb``: the decode
# graphs max_bs x 2; with attention DP max_bs x attn_dp_size x 3 more (x 1.5 more again
# above max_bs 300); the prefill graphs (breakable, on by default on CUDA:
# model_executor/cuda_graph_config.py ``default_prefill_backend``) 8 MiB a captured size
# (arg_groups/cuda_graph_hook.py ``generate_prefill_cuda_graph_batch_sizes`` up to the
# chunked-prefill size, 4096 for a "llama-2" model path), or 1.5 GiB with an MLA backend,
# and 1 GiB more with --moe-a2a-backend deepep.
# The prefill graphs are off by default (cuda_graph_hook.py ``apply_cuda_graph_compatibility``
# and ``disable_breakable_cudagraph_if_incompatible``, skipped when
# --cuda-graph-backend-prefill is given) with PP > 1, --dcp-size > 1, two-batch overlap, an
# a2a backend other than none / deepep / megamoe / flashinfer, and a multimodal model
# outside ``multimodal_breakable_cuda_graph_supported_model_archs``
# (configs/model_config.py); --disable-cuda-graph turns both phases off
# (cuda_graph_hook.py ``handle_cuda_graph_config``). Not modelled: attention CP, the
# DeepSeek-V4 / KDA rules. Post-capture KV sizing (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING, off
# by default) is not modelled.
# The fraction does not depend on the GPU's architecture or the attention backend:
# arg_groups/pipeline.py runs ``handle_gpu_memory_settings`` before
# ``handle_attention_backend_compatibility`` picks the backend and before
# ``disable_prefill_cuda_graph_for_deepseek_trtllm_mla`` turns DeepSeek-V3's prefill graphs
# off on trtllm_mla, and the MLA term asks the model (``use_mla_backend``: the config's
# attention arch), not the backend. So on Blackwell a DeepSeek-V3 launch keeps the 1.5 GiB
# prefill-graph reserve in its fraction although no prefill graph is captured (measured
# against resolve_once with SM 9.0 / 10.0 / 10.3 / 12.0 patched in: the same fraction); see
# :func:`attention_backends` for what the backend does change.

#: (memory below MiB, chunked_prefill_size, decode max_bs with tp < 4, with tp >= 4)
GPU_TIERS: tuple[tuple[float, int, int, int], ...] = (
    (20 * 1024, 2048, 8, 8),
    (35 * 1024, 4096, 48, 160),
    (60 * 1024, 4096, 32, 160),
    (90 * 1024, 8192, 256, 512),
    (160 * 1024, 8192, 256, 512),
    (float("inf"), 16384, 512, 512),
)
#: arg_groups/fields (sglang 0.5.23): max_prefill_tokens' default, used for the activation
#: reserve when --chunked-prefill-size is -1 (chunking off).
MAX_PREFILL_TOKENS = 16384
CHUNKED_PREFILL_FLAG = "--chunked-prefill-size"
MAX_RUNNING_FLAG = "--max-running-requests"
#: flags that turn the decode / prefill CUDA graphs off (cuda_graph_hook.py
#: ``handle_cuda_graph_config``; ``--disable-cuda-graph`` is the deprecated spelling of both).
NO_GRAPH_FLAGS: dict[str, tuple[bool, bool]] = {
    "--disable-cuda-graph": (True, True),
    "--disable-decode-cuda-graph": (True, False),
    "--disable-prefill-cuda-graph": (False, True),
    "--cuda-graph-backend-decode=disabled": (True, False),
    "--cuda-graph-backend-prefill=disabled": (False, True),
}
#: memory_hook.py ``reserve_for_deepep_a2a_mb``: the a2a backend that adds 2 GiB.
DEEPEP_RESERVE_BACKEND = "deepep"
#: cuda_graph_hook.py ``disable_breakable_cudagraph_if_incompatible``: a2a backends the
#: breakable prefill graph keeps.
PREFILL_GRAPH_A2A = frozenset({"none", "deepep", "megamoe", "flashinfer"})
PREFILL_BACKEND_FLAG = "--cuda-graph-backend-prefill"
#: memory_hook.py ``_DEFAULT_PP_PREFILL_CUDA_GRAPH_MAX_TOKENS``
PP_PREFILL_GRAPH_MAX = 8192
DCP_FLAG = "--dcp-size"
TBO_FLAG = "--enable-two-batch-overlap"
#: configs/model_config.py ``multimodal_breakable_cuda_graph_supported_model_archs``
MULTIMODAL_PREFILL_GRAPH_ARCHS = frozenset(
    {
        "MiniMaxM3SparseForConditionalGeneration",
        "Cohere2VisionForConditionalGeneration",
        "Glm5NextForConditionalGeneration",
        "InternS2MobiusForConditionalGeneration",
        "PaddleOCRVLForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen4ExpForConditionalGeneration",
        "MuseGlimmerForConditionalGeneration",
        "MuseSparkForConditionalGeneration",
        "KimiK3ForConditionalGeneration",
        "KimiK25ForConditionalGeneration",
        "MiniMaxM3SparseForCausalLM",
    }
)


def prefill_graph_sizes(max_bs: int) -> list[int]:
    """The token counts SGLang captures prefill graphs for, up to ``max_bs``."""
    sizes = [
        *range(4, 33, 4),
        *range(48, 257, 16),
        *range(288, 513, 32),
        *range(576, 1025, 64),
        *range(1280, 4097, 256),
        *range(4608, max_bs + 1, 512),
    ]
    return [s for s in sizes if s <= max_bs]


def vlm_factor(vit_layers: int = 24, vit_hidden: int = 1024) -> float:
    """memory_hook.py ``adjust_mem_fraction_for_vlm``: the fraction's multiplier for a
    vision model (its vision_config's num_hidden_layers and hidden_size; 24 / 1024 when
    absent), ``0.95 x clamp(1 - 0.1 x (complexity ratio - 1), 0.8, 1.05)``."""
    ratio = vit_layers * vit_hidden**2 / (24 * 1024**2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def mem_fraction_static(
    mem_mib: float,
    tp: int = 1,
    pp: int = 1,
    mla: bool = False,
    *,
    chunked_prefill: int | None = None,
    attn_dp: int = 1,
    deepep: bool = False,
    decode_graphs: bool = True,
    prefill_graphs: bool = True,
    max_running: int | None = None,
    vision: tuple[int, int] | None = None,
    llama2: bool = False,
    prefill_locked: bool = False,
) -> float:
    """SGLang's default mem_fraction_static for a GPU of ``mem_mib`` MiB (see above).

    ``vision``: a vision model's (vit layers, vit hidden size); ``llama2``: the model path
    contains "llama-2" (its prefill graphs stop at 4096 tokens); ``prefill_locked``:
    --cuda-graph-backend-prefill chose the prefill graphs (PP does not turn them off)."""
    tier_chunk, small, large = next((c, s, lg) for below, c, s, lg in GPU_TIERS if mem_mib < below)
    chunk = tier_chunk if chunked_prefill is None else chunked_prefill
    decode_bs = small if tp < 4 else large
    if max_running is not None and decode_bs > max_running:
        decode_bs = max_running
    activation = max(chunk if chunk > 0 else MAX_PREFILL_TOKENS, 2048)
    graphs = 0.0
    if decode_graphs:
        graphs += decode_bs * 2
    if attn_dp > 1:
        graphs += decode_bs * attn_dp * 3 + (decode_bs * attn_dp * 1.5 if decode_bs > 300 else 0)
    if prefill_graphs and (pp == 1 or prefill_locked):
        prefill_max = min(chunk, 4096) if llama2 else chunk
        if pp > 1:  # memory_hook.py: an opted-in PP prefill graph stops at 8192 tokens (breakable)
            prefill_max = min(prefill_max, PP_PREFILL_GRAPH_MAX)
        graphs += 1.5 * 1024 if mla else len(prefill_graph_sizes(prefill_max)) * 8
        if deepep:  # reserve_for_graph_mb: the breakable prefill graph's DeepEP delta
            graphs += 1024
    reserved = 512 + activation * 1.5 + tp * pp / 8 * 1024 + graphs
    if mem_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if deepep and decode_graphs:
        reserved += 2 * 1024
    frac = round((mem_mib - reserved) / mem_mib, 3)
    return frac * vlm_factor(*vision) if vision is not None else frac


def fraction_options(flags: list[str], model: str | None = None, max_running: int | None = None) -> dict[str, object]:
    """The keyword arguments of :func:`mem_fraction_static` a launch sets: its canonical
    flags' (:func:`fraction_flag_options`) and its model's and batch's
    (:func:`fraction_launch_terms`)."""
    return {**fraction_flag_options(flags), **fraction_launch_terms(model, max_running)}


def fraction_flag_options(flags: list[str]) -> dict[str, object]:
    """The keyword arguments of :func:`mem_fraction_static` a launch's canonical flags
    (``--chunked-prefill-size=4096``, ``--disable-cuda-graph``, ...) set; what SGLang 0.5.23
    resolves from them (--enable-dp-attention with --data-parallel-size N is attention DP N:
    arg_groups/parallel_hook.py ``handle_deprecated_dp_attention``)."""
    values: dict[str, str] = {}
    for item in flags:
        name, _, value = item.partition("=")
        values[name] = value
    opts: dict[str, object] = {}
    chunk = values.get(CHUNKED_PREFILL_FLAG)
    if chunk and chunk.lstrip("-").isdigit():
        opts["chunked_prefill"] = int(chunk)
    attn = values.get(ATTN_DP_SIZE_FLAG)
    if attn and attn.isdigit() and int(attn) > 1:
        opts["attn_dp"] = int(attn)
    elif DP_ATTENTION_FLAG in values:
        dp = values.get("--data-parallel-size", "1")
        if dp.isdigit() and int(dp) > 1:
            opts["attn_dp"] = int(dp)
    if values.get(MOE_A2A_BACKEND_FLAG) == DEEPEP_RESERVE_BACKEND:
        opts["deepep"] = True
    prefill = values.get(PREFILL_BACKEND_FLAG)
    if prefill in ("full", "breakable"):
        opts["prefill_locked"] = True
    elif prefill is None and (
        values.get(MOE_A2A_BACKEND_FLAG, "none") not in PREFILL_GRAPH_A2A
        or values.get(DCP_FLAG, "1") not in ("", "0", "1")
        or TBO_FLAG in values
    ):
        opts["prefill_graphs"] = False
    for item in flags:
        off = NO_GRAPH_FLAGS.get(item)
        if off is not None:
            if off[0]:
                opts["decode_graphs"] = False
            if off[1]:
                opts["prefill_graphs"] = False
    return opts


def fraction_launch_terms(model: str | None, max_running: int | None) -> dict[str, object]:
    """The keyword arguments of :func:`mem_fraction_static` the launch's model and batch
    limit set (the Intent's fields)."""
    opts: dict[str, object] = {}
    if max_running is not None:
        opts["max_running"] = max_running
    if model and "llama-2" in model.lower():
        opts["llama2"] = True
    return opts


# ---- memory: the KV pool (sglang 0.5.23) --------------------------------------------------
#
# mem_cache/kv_cache_configurator.py ``_profile_available_bytes``: after the weights load,
# ``rest = free_now - pre_model_load_memory x (1 - mem_fraction_static)``, both measured
# with ``distributed=True`` (the minimum across ranks); ``pre_model_load_memory`` is
# distributed/bootstrap.py ``measure_pre_model_load_memory``: the free memory after the
# distributed init, before the weights. ``rest <= 0`` raises ValueError ("Loaded weights
# leave no GPU memory for the KV cache under --mem-fraction-static"); a pool of 0 tokens
# raises RuntimeError ("Not enough memory. Please try to increase --mem-fraction-static",
# model_executor/pool_configurator.py ``MemoryPoolConfig.__post_init__``). A pool shorter
# than the context length is not an error: managers/tp_worker.py ``get_worker_info`` warns
# ("KV pool holds N tokens, fewer than --context-length") and serves requests up to
# ``min(context_len - 1, kv_tokens - 1)`` tokens (inputs 5 fewer).
# The request-to-token table (mem_cache/memory_pool.py ``ReqToTokenPool``: int32,
# ``(max_running_requests + 1) x context_len``) is allocated after the pool is sized, from
# the (1 - f) slack; max_running_requests defaults to kv_cache_configurator.py
# ``resolve_max_num_reqs``: ``min(clamp(tokens / context_len x 512, 2048, 4096), tokens // 2)``
# (a --max-running-requests is divided by the attention-DP size, same cap).

REQ_TO_TOKEN_BYTES = 4
#: kv_cache_configurator.py ``mm_runtime_reservation_gb``: a multimodal model's KV budget
#: loses SGLANG_VLM_CACHE_SIZE_MB (environ.py: 100), plus SGLANG_MM_FEATURE_CACHE_MB (1024)
#: with --mm-feature-transport cuda_ipc / cuda_vmm.
VLM_CACHE_ENV, VLM_CACHE_MB = "SGLANG_VLM_CACHE_SIZE_MB", 100
MM_FEATURE_CACHE_ENV, MM_FEATURE_CACHE_MB = "SGLANG_MM_FEATURE_CACHE_MB", 1024
MM_TRANSPORT_FLAG = "--mm-feature-transport"


def mm_feature_cache(flags: list[str]) -> bool:
    """Whether the launch moves multimodal features through CUDA memory
    (``--mm-feature-transport cuda_ipc`` / ``cuda_vmm``), which adds the feature cache to
    what the KV budget loses."""
    return any(f in (f"{MM_TRANSPORT_FLAG}=cuda_ipc", f"{MM_TRANSPORT_FLAG}=cuda_vmm") for f in flags)


def mm_reservation_bytes(flags: list[str] | bool, env: dict[str, str | None]) -> int:
    """What a multimodal model's KV budget loses (``mm_runtime_reservation_gb``);
    ``flags``: the launch's canonical flags, or :func:`mm_feature_cache` of them."""
    feature_cache = flags if isinstance(flags, bool) else mm_feature_cache(flags)

    def mib(name: str, default: int) -> int:
        raw = (env.get(name) or "").strip()
        return int(raw) if raw.lstrip("-").isdigit() else default

    total = mib(VLM_CACHE_ENV, VLM_CACHE_MB)
    if feature_cache:
        total += mib(MM_FEATURE_CACHE_ENV, MM_FEATURE_CACHE_MB)
    return max(0, total) << 20


def max_request_len(context_len: int, kv_tokens: int) -> int:
    """The longest request SGLang serves (tp_worker.py ``get_worker_info``)."""
    return min(context_len - 1, kv_tokens - 1)


def max_running_requests(kv_tokens: int, context_len: int, given: int | None = None, attn_dp: int = 1) -> int:
    """kv_cache_configurator.py ``resolve_max_num_reqs`` (no mamba state)."""
    if given is not None:
        return min(max(1, given // max(1, attn_dp)), kv_tokens // 2)
    estimated = max(min(int(kv_tokens / max(1, context_len) * 512), 4096), 2048)
    return min(estimated, kv_tokens // 2)


def req_to_token_bytes(max_running: int, context_len: int) -> int:
    """The request-to-token table's bytes (memory_pool.py ``ReqToTokenPool``)."""
    return (max_running + 1) * context_len * REQ_TO_TOKEN_BYTES


# ---- memory: unbalanced free memory (sglang 0.5.23) ---------------------------------------
#
# distributed/bootstrap.py ``_check_tp_memory_balance`` (called by
# ``measure_pre_model_load_memory`` when tp_size > 1): when the minimum free memory across
# ranks is below 0.9 x this rank's free memory, RuntimeError "The memory capacity is
# unbalanced. Some GPUs may be occupied by other processes." (only a warning when
# SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK is false; environ.py: true by default).
UNBALANCED_RATIO = 0.9
UNBALANCED_CHECK_ENV = "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK"
#: srt/environ.py (0.5.23): ``SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK = EnvBool(True)``
UNBALANCED_CHECK = EnvVar(UNBALANCED_CHECK_ENV, "bool", "true", "sglang/srt/environ.py (0.5.23)", "words")
#: environ.py ``EnvBool.parse``: what reads as false (lower-cased); anything else not true raises.
ENV_FALSE = frozenset({"false", "0", "no", "n"})


def unbalanced_raises(env: dict[str, str | None]) -> bool:
    """Whether SGLang raises (True, its default) or only warns on unbalanced memory."""
    from flightcheck._knowledge import envread

    return envread.enabled(UNBALANCED_CHECK, env) is not False


# ---- the default context length (sglang 0.5.23) -------------------------------------------
#
# srt/utils/hf_transformers/common.py ``get_context_length`` (what configs/model_config.py
# ``ModelConfig._derive_context_length`` uses without --context-length): the first of
# CONTEXT_LENGTH_KEYS set on the text config, times rope_scaling's ``factor`` (1 when the
# rope_scaling names ``original_max_position_embeddings`` or its rope_type is ``llama3``);
# 2048 when none is set. A longer --context-length raises ValueError unless
# SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set. SGLang reads the transformers config
# object, not the file: transformers 5 (sglang 0.5.23 pins 5.19.0)
# modeling_rope_utils.py ``standardize_rope_params`` takes ``rope_type`` from ``type``, and
# for llama3 / yarn / longrope fills ``original_max_position_embeddings`` in, so their
# factor never multiplies; ``rope_scaling`` and ``rope_parameters`` are one field there.
# A key absent from config.json takes the config class's default, which flightcheck does
# not know: 2048 is the fallback here.
#: rope types whose rope_scaling always carries original_max_position_embeddings.
ORIGINAL_LEN_ROPE_TYPES = frozenset({"llama3", "yarn", "longrope"})
CONTEXT_LENGTH_KEYS = (
    "max_sequence_length",
    "seq_length",
    "max_seq_len",
    "model_max_length",
    "max_position_embeddings",
)
CONTEXT_LENGTH_FALLBACK = 2048


def context_length(text_config: dict[str, object]) -> int:
    """SGLang's derived context length of a (text) config.json mapping."""
    rope = text_config.get("rope_scaling") or text_config.get("rope_parameters")
    factor: float = 1
    if isinstance(rope, dict) and rope:
        raw = rope.get("factor", 1)
        factor = raw if isinstance(raw, (int, float)) and not isinstance(raw, bool) else 1
        kind = rope.get("rope_type", rope.get("type"))
        if "original_max_position_embeddings" in rope or kind in ORIGINAL_LEN_ROPE_TYPES:
            factor = 1
    for key in CONTEXT_LENGTH_KEYS:
        val = text_config.get(key)
        if isinstance(val, (int, float)) and not isinstance(val, bool):
            if not math.isfinite(factor * val) or factor * val > 1 << 40:
                # a hostile config.json (no real model); SGLang would fail on it another way
                return CONTEXT_LENGTH_FALLBACK
            return int(factor * val)
    return CONTEXT_LENGTH_FALLBACK


def apply_model_override_args(doc: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """``doc`` (config.json) as SGLang 0.5.23 sees it after ``--json-model-override-args``
    (srt/utils/hf_transformers/config.py ``get_config``): a dict value updates a sub-config
    of that name (one level, ``PretrainedConfig.update``), merges into ``rope_scaling`` /
    ``rope_parameters``; anything else replaces the key. A copy; ``doc`` when none."""
    if not overrides:
        return doc
    import copy

    out = copy.deepcopy(doc)
    for key, value in overrides.items():
        current = out.get(key)
        if (
            isinstance(value, dict)
            and isinstance(current, dict)
            and key.endswith("_config")
            and key != "quantization_config"
        ):
            current.update(copy.deepcopy(value))
        elif key in ("rope_scaling", "rope_parameters") and isinstance(value, dict) and isinstance(current, dict):
            out[key] = {**current, **copy.deepcopy(value)}
        else:
            out[key] = copy.deepcopy(value)
    return out
