"""SGLang's multicast: the opt-in flags whose paths bind multicast memory, FlashInfer's
all-reduce fusion and its automatic choice by architecture, and the NVSHMEM all-to-all
backends (read in the wheels of 0.5.5 - 0.5.23).
"""

from __future__ import annotations

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
#: What dropping a flag costs, where a cheaper switch was weighed (shown in the plan).
#: srt/distributed/device_communicators/torch_symm_mem.py (one stored version of main, newer
#: than the wheels above; not read release by release): TorchSymmMemCommunicator raises
#: RuntimeError on ``handle.multicast_ptr == 0`` although only its multimem kernel needs
#: multicast (two-shot at TP 2 on SM90 / TP 2-4 on SM100; PR #30364, open): so
#: TORCH_SYMM_MEM_DISABLE_MULTICAST=1 alone cannot keep the flag, and the flag goes.
MULTICAST_FLAG_COSTS: dict[str, str] = {
    TORCH_SYMM_MEM_FLAG: (
        "the only switch that works: SGLang's torch symm-mem all-reduce refuses to start without multicast "
        "(torch_symm_mem.py raises on multicast_ptr 0, its two-shot too: PR #30364 open); the custom "
        "all-reduce / NCCL carry it"
    ),
}
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
#: The newest SGLang whose wheel the fallback rules were read in (0.5.5-0.5.23).
FALLBACK_READ_IN = "0.5.23"
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
