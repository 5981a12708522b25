"""Everything flightcheck knows of SGLang, by version: flag spellings and aliases, the
flags that opt in to multicast, and the variables it reads.

Sources (SGLang's own code): ``python/sglang/srt/server_args.py`` (flags),
``python/sglang/srt/layers/flashinfer_comm_fusion.py`` (the all-reduce fusion).
"""

from __future__ import annotations

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


def _kv_dtype(text: str) -> str:
    # SGLang spells bfloat16 "bf16"; the intent uses vLLM's names
    return {"bf16": "bfloat16", "fp16": "float16"}.get(text, text)


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


def layout(tp: int, pp: int = 1, dp: int = 1, ep: bool = False, moe_size: int | None = None) -> str:
    """A parallel layout as SGLang's flags: ``--tp 8 --pp-size 2 --ep-size 8``."""
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
# memory (nvidia-smi memory.total, MiB) picks chunked_prefill_size and the decode CUDA-graph
# max batch; then ``reserved = 512 + max(chunked_prefill_size, 2048) x 1.5 + tp x pp / 8 x
# 1024 + reserve_for_graph_mb`` MiB, at least 10 GiB above 60 GiB of memory, and
# ``mem_fraction_static = round((mem - reserved) / mem, 3)``. ``reserve_for_graph_mb``: the
# decode graphs max_bs x 2, and the prefill graphs (on by default on CUDA,
# cuda_graph_config.py ``default_prefill_backend``) 8 MiB a captured size
# (arg_groups/cuda_graph_hook.py ``generate_prefill_cuda_graph_batch_sizes`` up to the
# chunked-prefill size), or 1.5 GiB with an MLA backend. Post-capture KV sizing
# (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING, off by default) is not modelled.

#: (memory below MiB, chunked_prefill_size, decode max_bs with tp < 4, with tp >= 4)
GPU_TIERS: tuple[tuple[float, int, int, int], ...] = (
    (20 * 1024, 2048, 8, 8),
    (35 * 1024, 4096, 48, 160),
    (60 * 1024, 4096, 32, 160),
    (90 * 1024, 8192, 256, 512),
    (160 * 1024, 8192, 256, 512),
    (float("inf"), 16384, 512, 512),
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


def mem_fraction_static(mem_mib: float, tp: int = 1, pp: int = 1, mla: bool = False) -> float:
    """SGLang's default mem_fraction_static for a GPU of ``mem_mib`` MiB (see above)."""
    chunk, small, large = next((c, s, lg) for below, c, s, lg in GPU_TIERS if mem_mib < below)
    decode_bs = small if tp < 4 else large
    graphs = decode_bs * 2 + (1.5 * 1024 if mla else len(prefill_graph_sizes(chunk)) * 8)
    reserved = 512 + max(chunk, 2048) * 1.5 + tp * pp / 8 * 1024 + graphs
    if mem_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((mem_mib - reserved) / mem_mib, 3)


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
