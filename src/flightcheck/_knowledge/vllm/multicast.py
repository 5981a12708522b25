"""vLLM's multicast paths and their switches: every path of the 0.33.0 wheel that creates or
binds multicast memory, the options and variables that turn each one on or off, and the
models with an all-reduce of their own (Kimi-K3, Inkling, Beam).
"""

from __future__ import annotations

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
#: PassConfig's field by release (newest first), read in the wheels 0.10.0-0.33.0:
#: ``enable_fi_allreduce_fusion`` (vllm/config.py 0.10.0-0.11.x), ``fuse_allreduce_rms`` from
#: 0.12.0 (vllm/config/compilation.py; the old name a deprecated alias in 0.12.0 only).
FUSION_PASS_FIELDS: tuple[tuple[str, str], ...] = (
    ("0.12.0", "fuse_allreduce_rms"),
    ("0.10.0", "enable_fi_allreduce_fusion"),
)
FUSE_ALLREDUCE_RMS_SINCE = FUSION_PASS_FIELDS[0][0]
#: Up to 0.16.x the fusion pass builds only ``trtllm_create_ipc_workspace_for_all_reduce_fusion``
#: (CUDA IPC, no multicast: compilation/collective_fusion.py 0.10.0-0.12.0,
#: passes/fusion/allreduce_rms_fusion.py 0.16.0); 0.17.0 moves it to
#: ``create_allreduce_fusion_workspace(backend=...)``, which can pick mnnvl (multicast).
FI_ALLREDUCE_MULTICAST_SINCE = "0.17.0"
#: distributed/device_communicators/symm_mem.py (0.10.2-0.33.0): a rendezvous whose
#: ``multicast_ptr == 0`` returns with the communicator disabled, so
#: TORCH_SYMM_MEM_DISABLE_MULTICAST=1 alone keeps vLLM's symm-mem all-reduce off.
SYMM_MEM_SELF_DISABLES_SINCE = "0.10.2"
#: No vLLM release read keeps its symmetric-memory all-reduce without multicast:
#: ``SymmMemCommunicator.__init__`` returns disabled on ``handle.multicast_ptr == 0`` even
#: where ``all_reduce`` would pick ``two_shot_all_reduce_`` (peer pointers only) — symm_mem.py
#: 0.10.2-0.33.0 and main after it (vLLM #50179; the fix, PR #50182, and the earlier PR #42324
#: were not merged when read). Once a release keeps the two-shot, put it here: the plan then
#: stops setting VLLM_ALLREDUCE_USE_SYMM_MEM=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1 alone
#: keeps the two-shot.
SYMM_MEM_TWO_SHOT_WITHOUT_MULTICAST_SINCE: str | None = None
#: The cost of each fallback, with its source (shown in the plan).
COST_FUSION_OFF = (
    "the all-reduce + RMSNorm fusion is lost; forcing the trtllm backend instead measured 259 ms "
    "ITL against 25 ms with the fusion off (vLLM PR #48075, H100-NVL)"
)
COST_TORCH_MULTICAST_OFF = (
    "multicast only: torch symmetric memory keeps its peer mappings, so the custom all-reduce, the trtllm "
    "workspace and the unfused GEMM paths still run over NVLink; the one-shot/multimem kernels are what is lost"
)
COST_SYMM_MEM_OFF = (
    "nothing more than multicast off costs: this vLLM's symmetric-memory all-reduce turns itself off without "
    "multicast, its two-shot included (symm_mem.py 0.10.2-0.33.0, vLLM #50179); this skips its rendezvous "
    "and the idle buffer it would keep; the custom all-reduce / NCCL carry it"
)
COST_SYMM_MEM_ONLY_SWITCH = (
    "vLLM's symmetric-memory all-reduce (its two-shot included) gives way to the custom all-reduce / NCCL: "
    "this torch has no TORCH_SYMM_MEM_DISABLE_MULTICAST to turn multicast off inside it (torch < 2.5)"
)
#: vLLM PR #37756 (B300, world size 2, 64 MiB, 4096 tokens): FlashInfer fused all-reduce +
#: RMSNorm one-shot 0.197 ms with trtllm, 0.247 ms with mnnvl, 0.693 ms unfused. On an
#: NVSwitch node trtllm keeps the fusion at NVLink speed; on bridged NVLink (H100-NVL) it was
#: 10x slower than no fusion (PR #48075), so there the fusion goes off instead.
COST_TRTLLM_NVSWITCH = (
    "keeps the all-reduce + RMSNorm fusion over peer-to-peer NVLink; on an NVSwitch node trtllm is no slower than "
    "mnnvl (B300, 64 MiB: fused 0.197 ms trtllm, 0.247 ms mnnvl, 0.693 ms unfused: vLLM PR #37756)"
)
COST_NVLS_OFF = "NCCL's NVLS algorithms are off: ring/tree carry the collectives"
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
