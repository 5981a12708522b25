"""Everything flightcheck knows of SGLang, by version: flag spellings and aliases, the
flags that opt in to multicast, and the variables it reads.

Sources (SGLang's own code): ``python/sglang/srt/server_args.py`` (flags),
``python/sglang/srt/layers/flashinfer_comm_fusion.py`` (the all-reduce fusion).
"""

from __future__ import annotations

import math

import msgspec

from flightcheck._knowledge.vllm import Reader
from flightcheck._vocabulary.intent import parse_len

NAME = "sglang"

# ---- flags (python/sglang/srt/server_args.py) -------------------------------------------

ALIASES: dict[str, str] = {
    "--model": "--model-path",
    "--tp-size": "--tensor-parallel-size",
    "--tp": "--tensor-parallel-size",
    "--dp-size": "--data-parallel-size",
    "--dp": "--data-parallel-size",
    "--pp-size": "--pipeline-parallel-size",
    "--pp": "--pipeline-parallel-size",
    "--ep-size": "--expert-parallel-size",
    "--ep": "--expert-parallel-size",
}


#: SGLang spells bfloat16 "bf16" (server_args.py --kv-cache-dtype choices); the intent uses
#: vLLM's names. The one copy: the built-in reader and the engine's answer map through it.
KV_DTYPE_ALIASES: dict[str, str] = {"bf16": "bfloat16", "fp16": "float16"}


def _kv_dtype(text: str) -> str:
    return KV_DTYPE_ALIASES.get(text, text)


def _ep_size(text: str) -> bool:
    # SGLang's EP is a size inside the TP group; the intent only needs "EP on"
    return int(text) > 1


FIELDS: dict[str, Reader] = {
    "--model-path": ("model", str),
    "--revision": ("revision", str),
    "--tensor-parallel-size": ("tensor_parallel_size", int),
    "--pipeline-parallel-size": ("pipeline_parallel_size", int),
    "--data-parallel-size": ("data_parallel_size", int),
    "--expert-parallel-size": ("enable_expert_parallel", _ep_size),
    "--context-length": ("max_model_len", parse_len),
    "--kv-cache-dtype": ("kv_cache_dtype", _kv_dtype),
    "--mem-fraction-static": ("gpu_memory_utilization", float),
    "--quantization": ("quantization", str),
    "--download-dir": ("download_dir", str),
    "--load-format": ("load_format", str),
    "--nnodes": ("nnodes", int),
}

#: flags that never take a value (store_true).
BOOL_FLAGS: frozenset[str] = frozenset(
    {
        "--enable-nccl-nvls",
        "--enable-symm-mem",
        "--enable-torch-symm-mem",
        "--enable-mscclpp",
        "--enforce-disable-flashinfer-allreduce-fusion",
        "--enable-flashinfer-allreduce-fusion",
        "--enable-layernorm-sp",
        "--enable-megamoe-for-layernorm-sp",
        "--enable-dp-attention",
        "--disable-cuda-graph",
        "--disable-radix-cache",
        "--skip-server-warmup",
        "--enforce-eager",
        "--trust-remote-code",
    }
)

#: how fixes and messages spell an option.
FLAG: dict[str, str] = {
    "load_format": "--load-format",
    "tp": "--tp",
    "pp": "--pp-size",
    "dp": "--dp",
    "ep": "--ep-size",
    "max_len": "--context-length",
    "kv_dtype": "--kv-cache-dtype",
    "kv_fp8": "--kv-cache-dtype fp8_e4m3",
    "util": "--mem-fraction-static",
    "eager": "--disable-cuda-graph",
    "config": "--config",
    "quantization": "--quantization",
}

# ---- multicast (read in the wheels of 0.5.5, 0.5.6, 0.5.9, 0.5.10, 0.5.13, 0.5.14, 0.5.23) --

#: opt-in flags whose path binds multicast memory, and why (dropped by the plan; SGLang's
#: defaults are off for all of them).
MULTICAST_FLAGS: dict[str, str] = {
    "--enable-nccl-nvls": "NCCL NVLS all-reduce binds multicast memory",
    "--enable-symm-mem": "NCCL symmetric memory registers NVLS windows",
    "--enable-torch-symm-mem": "torch symmetric-memory all-reduce (multimem) binds multicast memory",
    # srt/distributed/device_communicators/pymscclpp.py: MSCCL++ NVLS all-reduce
    "--enable-mscclpp": "MSCCL++ all-reduce uses NVLS multicast",
    # srt/layers/communication/sp_collective_gemm_workspace.py: the CUTLASS GEMM + reduce-
    # scatter workspace raises when its symmetric-memory multicast pointer is 0
    "--enable-layernorm-sp": "layernorm sequence parallel's GEMM reduce-scatter needs a multicast workspace",
    # srt/arg_groups/layernorm_sp_hook.py: raises ValueError without --enable-layernorm-sp
    "--enable-megamoe-for-layernorm-sp": "requires --enable-layernorm-sp, which the plan drops",
}
TORCH_SYMM_MEM_FLAG = "--enable-torch-symm-mem"
NCCL_NVLS_FLAG = "--enable-nccl-nvls"
#: srt/layers/flashinfer_comm_fusion.py: up to 0.5.13 the all-reduce fusion only ever builds
#: FlashInfer's trtllm (CUDA IPC) workspace (0.5.5-0.5.9 trtllm_create_ipc_workspace_for_all_
#: reduce_fusion; 0.5.10/0.5.13 create_allreduce_fusion_workspace(backend="trtllm")): no
#: multicast. 0.5.14 adds the backend choice; ``auto`` resolves to mnnvl (multicast) on SM100,
#: and ``trtllm`` with a multi-node group raises ValueError (_resolve_backend).
FI_FUSION_BACKEND_FLAG = "--flashinfer-allreduce-fusion-backend"
FI_BACKEND_SINCE = "0.5.14"  # server_args.py: absent in 0.5.5/0.5.6/0.5.9/0.5.10/0.5.13
FI_FUSION_DISABLE_FLAG = "--enforce-disable-flashinfer-allreduce-fusion"
FI_DISABLE_SINCE = "0.5.10"  # server_args.py: absent in 0.5.5/0.5.6/0.5.9; in 0.5.10..0.5.23
FI_FUSION_ENABLE_FLAG = "--enable-flashinfer-allreduce-fusion"  # deprecated alias of backend auto
FI_SAFE_BACKEND = "trtllm"
#: srt/arg_groups/overrides.py _flashinfer_allreduce_fusion_auto_enable (0.5.23): SGLang turns
#: the fusion on by itself only for these architectures (MiMo: its own cutedsl rules), on
#: SM90/SM100, TP > 1, no attention DP, one node or SM100, and ``--moe-a2a-backend none``.
FI_AUTO_READ_IN = "0.5.23"
FI_AUTO_ARCHS = frozenset(
    {
        "DeepseekV3ForCausalLM",
        "DeepseekV32ForCausalLM",
        "DeepseekV4ForCausalLM",
        "GptOssForCausalLM",
        "GlmMoeDsaForCausalLM",
        "Glm4MoeForCausalLM",
        "Glm4MoeLiteForCausalLM",
        "MistralLarge3ForCausalLM",
        "Qwen3MoeForCausalLM",
        "Qwen3VLMoeForConditionalGeneration",
        "Qwen3NextForCausalLM",
        "Qwen4ExpForConditionalGeneration",
        "KimiK25ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "InternS2PreviewForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "NemotronHForCausalLM",
        "NemotronHPuzzleForCausalLM",
        "NemotronH_Omni_Reasoning_V3",
    }
)
FI_AUTO_OWN_RULES = frozenset({"MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM"})
FI_AUTO_SM_MAJORS = ("9", "10")
DP_ATTENTION_FLAG = "--enable-dp-attention"
ATTN_DP_SIZE_FLAG = "--attn-dp-size"  # 0.5.23: attn_dp_enabled_of = attn_dp_size > 1
MOE_A2A_BACKEND_FLAG = "--moe-a2a-backend"  # srt/arg_groups/fields/exec_.py, default "none"
#: srt/layers/moe/token_dispatcher/deepep.py, pplx.py: NVSHMEM (its host library binds
#: multicast; NVSHMEM_DISABLE_NVLS turns that off).
NVSHMEM_A2A_BACKENDS = frozenset({"deepep", "pplx"})

# ---- environment variables ----------------------------------------------------------------

ALLOW_LONG_MAX_MODEL_LEN = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"


def layout(
    tp: int, pp: int = 1, dp: int = 1, ep: bool = False, moe_size: int | None = None, pcp: int = 1, dcp: int = 1
) -> str:
    """A parallel layout as SGLang's flags: ``--tp 8 --pp-size 2 --ep-size 8`` (vLLM's context
    parallel sizes ``pcp`` / ``dcp`` have no SGLang layout flag here: not written)."""
    parts = (
        [f"{FLAG['tp']} {tp}"] + ([f"{FLAG['pp']} {pp}"] if pp > 1 else []) + ([f"{FLAG['dp']} {dp}"] if dp > 1 else [])
    )
    return " ".join(parts + ([f"{FLAG['ep']} {moe_size or tp * dp}"] if ep else []))


# ---- weight files by load format (DefaultModelLoader._prepare_weights in
# sglang/srt/model_loader/loader.py) ----

#: load format -> the weight files the default loader globs, in order: the first pattern
#: that matches a file wins ("auto" is ``*.safetensors``, then ``*.bin``, then the ``*.pt``
#: fallback). A format not listed here has a loader of its own (sharded state, tensorizer,
#: streamers, GGUF, ...) whose files flightcheck does not read.
LOAD_FORMAT_FILES: dict[str, tuple[str, ...]] = {
    "auto": ("*.safetensors", "*.bin", "*.pt"),
    "safetensors": ("*.safetensors",),
    "fastsafetensors": ("*.safetensors",),
    "instanttensor": ("*.safetensors",),
    "mistral": ("*.safetensors",),
    "pt": ("*.pt",),
    "npcache": ("*.bin", "*.pt"),
}
#: load formats that read no weight file at all (random weights; sglang/srt/model_loader/loader.py (DummyModelLoader)).
NO_WEIGHT_LOAD_FORMATS: frozenset[str] = frozenset({"dummy"})
#: *.bin / *.pt files the loader drops (weight_utils.filter_files_not_needed_for_inference).
NOT_WEIGHT_FILES: frozenset[str] = frozenset(
    {"training_args.bin", "optimizer.bin", "optimizer.pt", "scheduler.pt", "scaler.pt"}
)

#: "auto" never switches to the Mistral format (loader.py _prepare_weights: *.safetensors,
#: *.bin, filtered by model.safetensors.index.json); "mistral" loads consolidated*.safetensors.
AUTO_MISTRAL: bool = False
MISTRAL_FILES = "consolidated*.safetensors"
MISTRAL_INDEX = "consolidated.safetensors.index.json"

#: architectures whose model reads GGUF from the directory under the default load format:
#: none (SGLang reads GGUF only with ``--load-format gguf``, GGUFModelLoader in
#: sglang/srt/model_loader/loader.py, a format flightcheck does not read)
GGUF_ARCHITECTURES: frozenset[str] = frozenset()
GGUF_SINGLE_FILE: bool = True
GGUF_LOAD_FORMATS: frozenset[str] = frozenset()


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
    if max_running is not None:
        opts["max_running"] = max_running
    if model and "llama-2" in model.lower():
        opts["llama2"] = True
    return opts


# ---- attention backend (sglang 0.5.23) ---------------------------------------------------
#
# arg_groups/pipeline.py, after the memory settings: the model overrides
# (arg_groups/model_overrides/deepseek_v2.py ``_deepseek_family_overrides``: the DeepSeek
# family with DSA (an ``index_topk`` in config.json) gets "dsa" when no backend is given;
# without DSA, on SM100 (utils/common.py ``is_sm100_supported``: compute capability major
# 10, so 10.0 and 10.3), "trtllm_mla" when none of the three backend flags is given), then
# attention_hook.py ``handle_attention_backend_compatibility``: overrides.py
# ``_attention_backend_default`` (--prefill- and --decode-attention-backend equal: that is
# the backend; no --attention-backend: model_override_base.py ``get_default_attn_backend``:
# MLA fa3 on Hopper, flashinfer on SM100, else triton; MHA fa3 on Hopper, trtllm_mha on SM100
# (fa4 for unequal K/V head dims), else flashinfer, or triton with attention sinks),
# ``_mla_backend_page_constraints`` (flashmla: page 64; trtllm_mla / cutedsl_mla: 32 or 64,
# else 64; trtllm_mha: 16/32/64/128, else 64), ``_mla_kv_cache_dtype_checks`` (trtllm_mla
# off Blackwell, or with a KV dtype other than fp8_e4m3 / bf16 / auto: ValueError),
# ``_cutedsl_prefill_backend_fill`` (prefill trtllm_mla), ``_attention_backend_fa3_fp8_fallback``
# (fa3 with fp8_e5m2: triton), ``_fa4_page_constraint`` (fa4, MHA, SM100: page 128); then
# cuda_graph_hook.py ``disable_prefill_cuda_graph_for_deepseek_trtllm_mla``: a
# "DeepseekV3ForCausalLM" whose prefill backend is trtllm_mla captures no prefill graph,
# unless --cuda-graph-backend-prefill chose one. Hopper is taken to run CUDA >= 12.3 and
# Blackwell >= 12.8 (``_check_cuda_device_version``), FlashInfer to be installed (it is a
# dependency of the CUDA wheel). Kimi-K3 (model_overrides/kimi_k3.py): trtllm_mla for
# prefill and decode on SM 10.0 / 10.3 when no backend is given. Not modelled (the choice is
# then unknown, or taken as if absent): speculative decoding (its topk on Hopper / SM100 MHA,
# Kimi-K3's DSPARK), --enable-deterministic-inference, Whisper, DSA models, --dcp-size,
# the architectures with their own backend rules (``OWN_BACKEND_ARCHS``), ROCm.

ATTENTION_BACKEND_FLAG = "--attention-backend"
PREFILL_ATTENTION_BACKEND_FLAG = "--prefill-attention-backend"
DECODE_ATTENTION_BACKEND_FLAG = "--decode-attention-backend"
PAGE_SIZE_FLAG = "--page-size"
#: model_overrides/deepseek_v2.py ``_deepseek_family_overrides``' architectures
DEEPSEEK_FAMILY_ARCHS = frozenset(
    {
        "DeepseekV3ForCausalLM",
        "DeepseekV32ForCausalLM",
        "KimiK25ForConditionalGeneration",
        "MistralLarge3ForCausalLM",
        "PixtralForConditionalGeneration",
        "GlmMoeDsaForCausalLM",
        "Glm5NextForConditionalGeneration",
        "HYV4ForCausalLM",
        "HYV4ForCausalLMNextN",
        "LongcatFlashForCausalLM",
        "LongcatFlashForCausalLMNextN",
        "Dots3NoteForCausalLM",
    }
)
#: model_overrides/kimi_k3.py ``_kimi_k3_overrides``: trtllm_mla for prefill and decode on
#: SM 10.0 / 10.3 when no backend is given (without DCP and DSPARK)
KIMI_K3_ARCH = "KimiK3ForConditionalGeneration"
KIMI_K3_TRTLLM_SMS = frozenset({"10.0", "10.3"})
#: architectures whose model override (arg_groups/model_overrides/*.py, registered in
#: model_override_base.py ``_MODEL_OVERRIDE_FNS``) writes an attention backend or a page
#: size by rules not modelled here: their choice is unknown (the conformance suite checks
#: this list against the installed registry)
OWN_BACKEND_ARCHS = frozenset(
    {
        "BeamForCausalLM",
        "DeepseekV4ForCausalLM",
        "DiffusionGemmaForBlockDiffusion",
        "EmbeddingGemma2Model",
        "Exaone4ForCausalLM",
        "ExaoneMoEForCausalLM",
        "ExaoneMoeForCausalLM",
        "FalconH1ForCausalLM",
        "Gemma4ForCausalLM",
        "Gemma4ForConditionalGeneration",
        "Gemma4UnifiedForConditionalGeneration",
        "GptOssForCausalLM",
        "GraniteMoeHybridForCausalLM",
        "IQuestQ1ForCausalLM",
        "IQuestQ1MTP",
        "InklingForConditionalGeneration",
        "InklingForConditionalGenerationMTP",
        "InternS2MobiusForConditionalGeneration",
        "InternS2PreviewForConditionalGeneration",
        "JetNemotronForCausalLM",
        "JetVLMForConditionalGeneration",
        "Lfm2ForCausalLM",
        "Lfm2MoeForCausalLM",
        "Llama4ForCausalLM",
        "Llama4ForConditionalGeneration",
        "MiMoV2FlashForCausalLM",
        "MiMoV2ForCausalLM",
        "MiniCPMForCausalLM",
        "MiniCPMSALAForCausalLM",
        "MiniCPMV4_6ForConditionalGeneration",
        "MiniCPMV4_7ForConditionalGeneration",
        "MiniMaxM3SparseForCausalLM",
        "MiniMaxM3SparseForConditionalGeneration",
        "MossVLForConditionalGeneration",
        "NemotronHForCausalLM",
        "NemotronHPuzzleForCausalLM",
        "NemotronH_Omni_Reasoning_V3",
        "Olmo2ForCausalLM",
        "Qwen3NextForCausalLM",
        "Qwen3VLForConditionalGeneration",
        "Qwen3VLMoeForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen4ExpForConditionalGeneration",
    }
)
#: overrides.py ``_step3p_overrides``: registered by a predicate (a substring of the name)
OWN_BACKEND_ARCH_PARTS = ("Step3p5ForCausalLM", "Step3p7ForConditionalGeneration")
#: cuda_graph_hook.py ``disable_prefill_cuda_graph_for_deepseek_trtllm_mla``: the one
#: architecture whose prefill graphs trtllm_mla turns off
TRTLLM_MLA_NO_PREFILL_GRAPH_ARCH = "DeepseekV3ForCausalLM"
#: overrides.py ``_mla_kv_cache_dtype_checks``
TRTLLM_MLA_KV_DTYPES = frozenset({"fp8_e4m3", "bf16", "auto"})


class AttentionChoice(msgspec.Struct, frozen=True):
    """What SGLang 0.5.23 resolves for the attention of a launch on one GPU architecture."""

    prefill: str
    decode: str
    #: the page size after the backends' constraints (None: --page-size not given and no
    #: backend constraint, SGLang's own default applies)
    page_size: int | None
    #: disable_prefill_cuda_graph_for_deepseek_trtllm_mla fires (after the fraction is set:
    #: its 1.5 GiB reserve stays in mem_fraction_static and becomes unused slack)
    prefill_graphs_off: bool
    #: the ValueError SGLang raises for this choice (None: none)
    refusal: str | None = None


def _capability_minor(capability: str | None) -> int:
    """``"10.3"`` -> 3 (0 when absent)."""
    tail = (capability or "").strip().partition(".")[2]
    return int(tail) if tail.isdigit() else 0


def _capability_major(capability: str | None) -> int | None:
    """``"10.0"`` -> 10; None when unknown or unreadable."""
    head = (capability or "").strip().split(".")[0]
    return int(head) if head.isdigit() else None


def attention_backends(
    capability: str | None,
    mla: bool,
    architectures: list[str] | tuple[str, ...],
    flags: list[str],
    *,
    dsa: bool = False,
    asymmetric_kv: bool = False,
    attention_sinks: bool = False,
) -> AttentionChoice | None:
    """SGLang's attention backends for a launch (canonical ``--name=value`` flags) on a GPU
    of compute ``capability`` ("9.0", "10.3", ...; see above); None when it is not known:
    the capability unknown, a DSA model (its page size follows the indexer's pooling), an
    architecture with its own backend rules (``OWN_BACKEND_ARCHS``), --dcp-size > 1.
    ``architectures``: config.json's top-level ones; ``dsa``: it has ``index_topk``;
    ``asymmetric_kv``: K and V head dims differ; ``attention_sinks``: the model has them."""
    major = _capability_major(capability)
    arch = architectures[0] if architectures else ""
    if (
        major is None
        or (dsa and arch in DEEPSEEK_FAMILY_ARCHS)
        or arch in OWN_BACKEND_ARCHS
        or any(part in arch for part in OWN_BACKEND_ARCH_PARTS)
    ):
        return None
    values: dict[str, str] = {}
    for item in flags:
        name, _, value = item.partition("=")
        values[name] = value
    attn = values.get(ATTENTION_BACKEND_FLAG) or None
    prefill = values.get(PREFILL_ATTENTION_BACKEND_FLAG) or None
    decode = values.get(DECODE_ATTENTION_BACKEND_FLAG) or None
    kv_dtype = values.get(FLAG["kv_dtype"]) or "auto"
    page_text = values.get(PAGE_SIZE_FLAG, "")
    page: int | None = int(page_text) if page_text.isdigit() else None
    if values.get(DCP_FLAG, "1") not in ("", "0", "1"):
        return None
    sm100, hopper = major == 10, major == 9
    unset = attn is None and prefill is None and decode is None
    if unset and sm100 and arch in DEEPSEEK_FAMILY_ARCHS:
        attn = "trtllm_mla"
    elif unset and arch == KIMI_K3_ARCH and f"{major}.{_capability_minor(capability)}" in KIMI_K3_TRTLLM_SMS:
        prefill = decode = "trtllm_mla"
    if prefill is not None and prefill == decode:
        attn = prefill
    elif attn is None:
        if mla:
            attn = "fa3" if hopper else "flashinfer" if sm100 else "triton"
        elif hopper:
            attn = "fa3"
        elif sm100:
            attn = "fa4" if asymmetric_kv else "trtllm_mha"
        else:
            attn = "triton" if attention_sinks else "flashinfer"
    both = {attn, decode or attn}
    every = both | {prefill or attn}
    if "flashmla" in both:
        page = 64
    if "trtllm_mla" in both and page not in (32, 64):
        page = 64
    if "cutedsl_mla" in every and page not in (32, 64):
        page = 64
    if "trtllm_mha" in every and page not in (16, 32, 64, 128):
        page = 64
    refusal = None
    if "trtllm_mla" in both:
        if major not in (10, 11, 12):
            refusal = "TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x)"
        elif kv_dtype not in TRTLLM_MLA_KV_DTYPES:
            refusal = "TensorRT-LLM MLA backend only supports kv-cache-dtype of fp8_e4m3, bf16, or auto"
    if refusal is None and "cutedsl_mla" in every and prefill is None:
        prefill = "trtllm_mla"
    if attn == "fa3" and kv_dtype == "fp8_e5m2":
        attn = "triton"
    if "fa4" in every and not mla and sm100:
        page = 128
    first = prefill or attn
    graphs_off = (
        PREFILL_BACKEND_FLAG not in values
        and first == "trtllm_mla"
        and TRTLLM_MLA_NO_PREFILL_GRAPH_ARCH in architectures
        and not any(NO_GRAPH_FLAGS.get(item, (False, False))[1] for item in flags)
    )
    return AttentionChoice(first, decode or attn, page, graphs_off, refusal)


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


def mm_reservation_bytes(flags: list[str], env: dict[str, str | None]) -> int:
    """What a multimodal model's KV budget loses (``mm_runtime_reservation_gb``)."""

    def mib(name: str, default: int) -> int:
        raw = (env.get(name) or "").strip()
        return int(raw) if raw.lstrip("-").isdigit() else default

    total = mib(VLM_CACHE_ENV, VLM_CACHE_MB)
    if any(f in (f"{MM_TRANSPORT_FLAG}=cuda_ipc", f"{MM_TRANSPORT_FLAG}=cuda_vmm") for f in flags):
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
#: environ.py ``EnvBool.parse``: what reads as false (lower-cased); anything else not true raises.
ENV_FALSE = frozenset({"false", "0", "no", "n"})


def unbalanced_raises(env: dict[str, str | None]) -> bool:
    """Whether SGLang raises (True, its default) or only warns on unbalanced memory."""
    from flightcheck._knowledge import envread
    from flightcheck._knowledge.sglang.envs import DECLARED

    return envread.enabled(DECLARED[UNBALANCED_CHECK_ENV], env) is not False


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


# ---- reader: how SGLang 0.5.23's parser reads a command line ----------------------------
# (sglang/cli/serve.py, sglang/srt/server_args.py prepare_server_args,
# sglang/srt/utils/server_args_config_parser.py, sglang/srt/arg_groups/overrides.py;
# the option table itself is data/sglang_0.5.23_args.json)

READER_MODEL_PATH = "--model-path"
#: ``sglang serve`` takes this out of the argv before dispatching (cli/serve.py).
READER_MODEL_TYPE = "--model-type"
READER_TYPES: dict[str, str] = {
    "int": "int",
    "float": "float",
    "str": "str",
    "json.loads": "json",
    "sglang.srt.utils.common.human_readable_int": "si_int",
    "sglang.srt.utils.common.json_list_type": "json",
}
READER_FIELDS: dict[str, str] = {
    "model_path": "model",
    "revision": "revision",
    "tp_size": "tensor_parallel_size",
    "pp_size": "pipeline_parallel_size",
    "dp_size": "data_parallel_size",
    "dcp_size": "decode_context_parallel_size",
    "context_length": "max_model_len",
    "kv_cache_dtype": "kv_cache_dtype",
    "mem_fraction_static": "gpu_memory_utilization",
    "quantization": "quantization",
    "dtype": "dtype",
    "load_format": "load_format",
    "max_running_requests": "max_num_seqs",
    "cpu_offload_gb": "cpu_offload_gb",
    "json_model_override_args": "hf_overrides",
    "nnodes": "nnodes",
    "download_dir": "download_dir",
}
#: MoE all-to-all backends whose experts span the TP group: SGLang sets EP = TP
#: (``_A2A_EP_SPANNING_BACKENDS`` / ``_a2a_ep_size`` in arg_groups/overrides.py).
A2A_EP_SPANNING_BACKENDS: frozenset[str] = frozenset(
    {
        "megamoe",
        "deepep",
        "deepep_v2",
        "mooncake",
        "nixl",
        "ascend_fuseep",
        "flashinfer",
        "flashinfer_megamoe",
        "mori",
        "pplx",
    }
)
