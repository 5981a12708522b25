"""The per-GPU budget: what the engine may use, what it keeps back, what is left for KV.

vLLM (the rules by version are in ``flightcheck._knowledge.vllm``)::

    total     = memory_total - the driver's reservation     (what CUDA/torch report)
    requested = ceil(total x gpu_memory_utilization)        (0.92 from vLLM 0.20, 0.9 before)
    kv_budget = requested - weights_per_rank - reserve
    reserve   = transient activation peak + non-torch allocations after the snapshot
                + the CUDA-graph estimate (from 0.20, unless --enforce-eager)

``--kv-cache-memory-bytes`` replaces ``kv_budget`` outright (the utilization is ignored);
``--cpu-offload-gb`` takes that many GiB of each rank's weights to CPU memory.

What vLLM allocates *before* its baseline snapshot — the CUDA context and cuBLAS handles,
NCCL communicators and custom all-reduce buffers — is not in the reserve: it must fit in
the ``(1 - utilization) x total`` slack, or vLLM refuses to start (FC406,
:func:`pre_snapshot`).

SGLang 0.5.23 (mem_cache/kv_cache_configurator.py ``_profile_available_bytes``): the pool
is ``free_after_load - free_before_load x (1 - mem_fraction_static)``, ``free_before_load``
the minimum free memory across ranks after the distributed init — so ``usable =
mem_fraction_static x free_before_load`` holds the weights and the KV pool only
(activations, graphs and the request-to-token table live outside it) and the reserve
inside is 0; ``free_before_load`` is taken as the smallest GPU's memory less what other
processes hold and the CUDA context / communicators (:func:`pre_snapshot`). The default
fraction is SGLang's own heuristic (arg_groups/memory_hook.py
``handle_gpu_memory_settings``, the rules in ``flightcheck._knowledge.sglang``).

The default reserve (``--reserve-gib`` overrides it) estimates vLLM's profiling run at the
launch's batch limits (``--max-num-batched-tokens`` / ``--max-num-seqs``, else vLLM's
defaults for the GPU, :func:`flightcheck._knowledge.vllm.batch_defaults`):

- activations: the larger of the dummy forward pass (:func:`forward_peak`: one layer's
  widest point for the batched tokens, fused_moe's workspaces for MoE) and the dummy
  sampler run (:func:`sampler_peak`: ``min(max_num_seqs, batched tokens)`` requests x the
  whole vocabulary x the bytes per element of the top-k/top-p implementation the version
  runs — ``flightcheck._knowledge.vllm.sampler_kind``, read from vLLM's and torch's code),
  which run one after the other in ``profile_run``; for a vision model, the encoder run
  before them and its outputs held through them (:func:`encoder_terms`,
  ``vision_encoder`` in the breakdown: what it adds to the text model's peak);
- CUDA graphs 0.5 GiB when vLLM subtracts its estimate (0 with ``--enforce-eager``),
  non-torch allocations 0.25 GiB.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from flightcheck._knowledge import engines, gpus, nccl, sglang, vllm
from flightcheck._knowledge.units import GiB
from flightcheck._knowledge.vllm import memory_moe
from flightcheck._memory.config import ModelConfig
from flightcheck._memory.weights import Layout
from flightcheck._vocabulary.version import release

MiB = 1 << 20
BATCHED_TOKENS = 8192  # when neither the launch nor the GPU says (memory unknown)
MAX_SEQS = 1024
CUDA_GRAPHS = GiB // 2
#: non-torch memory the profile adds on one rank (kernel modules loaded lazily, backends' buffers
#: outside torch): the driver's, not in vLLM's code, so measured. Where the profile holds the
#: CUDA-graph estimate's captures (``vllm.graph_profile_in_budget``: 0.18 - 0.26, not eager) the
#: logged figure is 0.24 - 0.27 GiB (the 0.19.0 H100 sweep, tests/fixtures/memory points 144,
#: 147, 156 - 167); without them 0.01 - 0.14 (0.11.0 on H100 at TP 1, points 57, 58, 60 - 65, 67: 0.13 - 0.14;
#: 0.10.2, points 19, 81, 83, 84, 101: 0.02 - 0.07; V0 0.7.x, points 114 - 120: 0.01 - 0.09).
#: ``NON_TORCH_SPAN`` is the bound's span either way.
NON_TORCH = GiB // 4
NON_TORCH_NO_GRAPH_PROFILE = GiB // 8
#: the bound's spans (``bound_terms``): non-torch memory after the snapshot on one rank, the
#: CUDA-graph estimate's high end, the activation peak's share either way
NON_TORCH_SPAN = (0, 600 * MiB)
CUDA_GRAPHS_HIGH = 3 * GiB // 2
ACTIVATION_SPAN = 0.15
#: utils/mem_utils.py ``shared_sysmem_device_mem_sms`` (0.19.0): Orin, Thor, Spark; 0.13.0 the first read
SHARED_HOST_MEMORY_CC = frozenset({"8.7", "11.0", "12.1"})
SHARED_HOST_MEMORY_SINCE = "0.13.0"
HEADROOM_MIN = 0.05  # FC403: under 5% of usable memory left over
# FC402 (vLLM): a KV shortfall no larger than this is within the estimate's own error, so it
# is a warning, not a stop. Measured on the public startup logs (tests/fixtures/memory,
# bench/memory_accuracy.py): the predicted KV budget's median absolute error is 0.16 GiB, and
# the same launch logged 0.49 GiB and ran, then 0.41 GiB and died (run-to-run variance
# 0.08 GiB). A stop must be one the engine would also make: only a shortfall beyond this.
NEAR_MISS = GiB // 4
# before vLLM's snapshot (estimates): CUDA context + cuBLAS handles; NCCL communicators and
# custom all-reduce buffers per interconnect when more than one rank — the high end where the
# interconnect is one NCCL's source does not pin down (``communication``).
CONTEXT = 350 * MiB
COMM_NVLINK = GiB // 2
COMM_PCIE = 100 * MiB


class Interconnect(msgspec.Struct, frozen=True):
    """What NCCL's topology search sees of the GPUs one TP group uses (from NVML facts)."""

    nvlinks: int | None = None  # active NVLinks of the GPU with the fewest
    nvswitch: bool | None = None  # every GPU's NVLinks go to an NVSwitch
    compute_capability: str | None = None
    multicast: bool | None = None  # CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED on every GPU
    #: nodes the TP group spans (None or 1: one node); across nodes NCCL's network transport
    #: carries the connections (``nccl.multinode_communicator_bytes``)
    nodes: int | None = None


class Communication(msgspec.Struct, frozen=True):
    """The TP group's NCCL communicators and custom all-reduce buffers on the binding rank:
    ``low`` is certain (what a stop may rest on), ``high`` what it comes to at most."""

    low: int
    high: int
    parts: dict[str, int]
    derived: bool
    note: str = ""


def communication(
    layout: Layout,
    ic: Interconnect | None,
    engine_version: str | None,
    env: dict[str, str | None] | None,
    communicators: int,
    gather: str | None = None,
) -> Communication:
    """``communicators`` NCCL communicators over the TP group (``flightcheck._knowledge.nccl``,
    on one node, a middle rank of NCCL's chain: the one with the most) plus custom
    all-reduce's IPC buffers where it runs (all GPUs on NVLink). Where the source does not pin
    the size down, ``low`` is 0 and ``high`` the old estimate (``COMM_NVLINK`` / ``COMM_PCIE``).

    ``gather``: V0's logits gather to the driver (``vllm.V0_LOGITS_GATHER_P2P``) adds its P2P
    connections once (``nccl.gather_bytes``): "root" on the driver — then the chain's head,
    NCCL's rank 0 — "peer" on another worker (a middle rank)."""
    tp = max(1, layout.tp)
    if tp <= 1 or communicators <= 0:
        return Communication(0, 0, {}, True)
    if gather is not None and (ic is None or (ic.nodes or 1) <= 1):
        base = communication(layout, ic, engine_version, env, communicators)
        if base.derived and gather == "root":
            base = _at_head(layout, ic, engine_version, env, communicators, base)
        ic1 = ic or Interconnect()
        g = nccl.gather_bytes(
            ngpus=tp,
            compute_capability=ic1.compute_capability,
            nvlinks=ic1.nvlinks,
            nvswitch=ic1.nvswitch,
            root=gather == "root",
        )
        parts = {**base.parts, **{f"nccl_{k}": b for k, b in g.parts.items()}}
        derived = base.derived and g.derived
        return Communication(base.low + g.low, base.high + g.high, parts, derived, base.note or g.note)
    ic = ic or Interconnect()
    v = release(engine_version)
    # the NCCL the release's torch pins, where a size depends on it (NVLS before 2.22)
    nccl_version = nccl.version_of(nccl.NCCL_BY_TORCH.get(vllm.torch_pin(v) or ""))
    at_init = nccl.connects_at_init(env, vllm.nccl_cumem_forced_off(v))
    # NCCL_NVLS_ENABLE=0: ncclNvlsInit returns before asking the driver (nvls.cc)
    multicast = False if ((env or {}).get("NCCL_NVLS_ENABLE") or "").strip() == "0" else ic.multicast
    nodes = ic.nodes or 1
    if nodes > 1:
        # across nodes (src/transport/net.cc): the network buffers sit on the GPU only with
        # GPUDirect RDMA, on as many channels as the NICs carry — a range from 0; the GPUs of
        # this node add their own connections (one node's derivation, at tp / nodes ranks)
        per_node = -(-tp // nodes)
        intra = (
            nccl.communicator_bytes(
                ngpus=per_node,
                compute_capability=ic.compute_capability,
                nvlinks=ic.nvlinks,
                nvswitch=ic.nvswitch,
                connect_at_init=at_init,
                multicast=multicast,
                version=nccl_version,
            )
            if per_node > 1
            else None
        )
        one = nccl.multinode_communicator_bytes(
            nodes=nodes, gdr=nccl.env_gdr(env), max_channels=nccl.env_max_channels(env), intra=intra
        )
        return Communication(
            communicators * one.low,
            communicators * one.high,
            {f"nccl_{k}": communicators * b for k, b in one.parts.items()},
            False,
            one.note,
        )
    one = nccl.communicator_bytes(
        ngpus=tp,
        compute_capability=ic.compute_capability,
        nvlinks=ic.nvlinks,
        nvswitch=ic.nvswitch,
        connect_at_init=at_init,
        multicast=multicast,
        version=nccl_version,
    )
    nvlink = bool(ic.nvlinks) and (bool(ic.nvswitch) or tp == 2)
    car = vllm.CUSTOM_ALLREDUCE_BYTES if nvlink else 0
    if not one.derived:
        high = COMM_NVLINK if nvlink else COMM_PCIE
        return Communication(0, high, {"communication_estimate": high}, False, one.note)
    parts = {f"nccl_{k}": communicators * b for k, b in one.parts.items()}
    if car:
        parts["custom_allreduce"] = car
    # custom all-reduce's buffers were read in the 0.10.x wheels (vllm.CUSTOM_ALLREDUCE_BYTES):
    # certain there; from 0.11 only in the high end (not re-read)
    car_low = car if vllm.comm_in_budget(v) else 0
    return Communication(communicators * one.low + car_low, communicators * one.high + car, parts, True, one.note)


def _at_head(
    layout: Layout,
    ic: Interconnect | None,
    engine_version: str | None,
    env: dict[str, str | None] | None,
    communicators: int,
    middle: Communication,
) -> Communication:
    """``middle`` with the rings and trees of the chain's head (rank 0: one send fewer a
    channel, ``nccl.chain_connections``) in place of a middle rank's."""
    ic = ic or Interconnect()
    v = release(engine_version)
    multicast = False if ((env or {}).get("NCCL_NVLS_ENABLE") or "").strip() == "0" else ic.multicast

    def one(position: str) -> nccl.CommMemory:
        return nccl.communicator_bytes(
            ngpus=max(1, layout.tp),
            compute_capability=ic.compute_capability,
            nvlinks=ic.nvlinks,
            nvswitch=ic.nvswitch,
            connect_at_init=nccl.connects_at_init(env, vllm.nccl_cumem_forced_off(v)),
            multicast=multicast,
            position=position,
            version=nccl.version_of(nccl.NCCL_BY_TORCH.get(vllm.torch_pin(v) or "")),
        )

    mid, head = one("middle"), one("head")
    d_low, d_high = communicators * (mid.low - head.low), communicators * (mid.high - head.high)
    parts = {**middle.parts, **{f"nccl_{k}": communicators * b for k, b in head.parts.items()}}
    return Communication(middle.low - d_low, middle.high - d_high, parts, middle.derived, middle.note)


def logits_allgather(
    layout: Layout,
    ic: Interconnect | None,
    engine_version: str | None,
    env: dict[str, str | None] | None,
) -> int:
    """The NCCL connections V1's logits all-gather over torch's device group certainly makes
    during the profile where NCCL connects on first use (``vllm.logits_allgather_torch_group``,
    ``nccl.allgather_bytes``): counted inside the budget; 0 elsewhere (connected at init, across
    nodes, interconnects the source does not pin down)."""
    v = release(engine_version)
    tp = max(1, layout.tp)
    ic = ic or Interconnect()
    if tp <= 1 or (ic.nodes or 1) > 1 or not vllm.logits_allgather_torch_group(v):
        return 0
    if nccl.connects_at_init(env, vllm.nccl_cumem_forced_off(v)):
        return 0
    multicast = False if ((env or {}).get("NCCL_NVLS_ENABLE") or "").strip() == "0" else ic.multicast
    return nccl.allgather_bytes(
        ngpus=tp,
        compute_capability=ic.compute_capability,
        nvlinks=ic.nvlinks,
        nvswitch=ic.nvswitch,
        multicast=multicast,
        version=nccl.version_of(nccl.NCCL_BY_TORCH.get(vllm.torch_pin(v) or "")),
    )


def default_utilization(
    engine: str,
    engine_version: str | None,
    total: int,
    layout: Layout,
    *,
    mla: bool = False,
    fraction_opts: dict[str, Any] | None = None,
) -> tuple[float, str]:
    """(fraction, where it comes from) when the launch does not set one."""
    if engines.get(engine).memory.budget == "free":
        return (
            sglang_fraction(total, layout, mla, **(fraction_opts or {})),
            "SGLang's default mem_fraction_static for this GPU and layout",
        )
    v = release(engine_version)
    util = vllm.default_utilization(v)
    if v is None:
        return util, f"vLLM's default ({util}; 0.92 from vLLM 0.20 — the installed version is unknown)"
    return util, f"vLLM {engine_version}'s default"


def sglang_fraction(total: int, layout: Layout, mla: bool = False, **opts: Any) -> float:
    """SGLang's default mem_fraction_static for this GPU and layout
    (:func:`flightcheck._knowledge.sglang.mem_fraction_static`; ``opts`` its launch terms)."""
    return sglang.mem_fraction_static(total / MiB, layout.tp, layout.pp, mla, **opts)


class Batch(msgspec.Struct, frozen=True):
    """The profiling run's size: batched tokens and sequences, whether CUDA graphs count."""

    tokens: int = BATCHED_TOKENS
    seqs: int = MAX_SEQS
    cudagraphs: bool = True
    source: str = "vLLM's serving defaults"
    sampler: str = "sort"  # the profile run's top-k/top-p implementation (vllm.sampler_kind)
    encoder: bool = True  # the profile run exercises a vision encoder (vllm.encoder_profiled)
    v0: bool = False  # vLLM's V0 engine runs (vllm.runs_v0): its logits gather is P2P
    max_model_len: int | None = None  # bounds the images per prompt (vllm.encoder_items)
    release: tuple[int, ...] | None = None  # the engine release (Qwen-VL's item rules by version)
    #: --limit-mm-per-prompt's counts by modality (vllm.mm_profiling; None: vLLM's 999 each)
    mm_limits: dict[str, int] | None = None
    #: --limit-mm-per-prompt's image (width, height) (vllm.mm_image_size): the dummy image's cut
    mm_image_size: tuple[int | None, int | None] | None = None
    #: --mm-encoder-tp-mode (vllm.encoder_tp_mode): "data" runs the encoder data-parallel over
    #: TP where the model supports it (vllm.encoder_data_parallel)
    mm_encoder_tp_mode: str = "weights"
    #: the MXFP4 MoE backend the launch runs (``vllm.mxfp4_backends``' likeliest; "" unknown:
    #: the generic fused_moe estimate) — its profile-run transient (:func:`forward_peak`)
    mxfp4_backend: str = ""
    #: the other backends the release leaves open to what is installed (the bound's
    #: ``mxfp4_backend`` term)
    mxfp4_alternates: tuple[str, ...] = ()
    #: fused_moe's workspace layout, overriding the release's (None: by release, vllm.memory_moe)
    moe_modular: bool | None = None
    #: an FP8 linear layer's MLP activation is held as FP8 in the profile run, Inductor having
    #: traced QuantFP8 into the silu-mul (``vllm.fp8_activation_stored_as_fp8``; None: the launch
    #: leaves it open — the point keeps the 16-bit figure, the bound's ``fp8_act_quant`` the rest)
    act_fp8: bool | None = False
    #: ``--quantization fp8`` (a 16-bit checkpoint's linear layers quantized at load)
    online_fp8: bool = False
    #: the V1 engine profiles with the V2 model runner (``vllm.v2_runner``; None: open — the point
    #: keeps the V1 runner's sampler and graph estimate, the bound's ``model_runner`` the rest)
    v2_runner: bool | None = False
    #: the board's SM count (``gpus.sm_count``; None: ``gpus.SM_COUNT_DEFAULT``), which sizes
    #: Triton top-k/top-p's buffer (``vllm.triton_sampler_buffer_bytes``)
    sms: int | None = None
    #: torch's cuBLAS + cuBLASLt workspaces the profile's first matrix multiply keeps
    #: (``cublas.blas_workspaces_bytes``): under the profile's peak, whichever phase binds
    blas_workspaces: int = 0


def forward_peak(
    cfg: ModelConfig,
    layout: Layout,
    tokens: int,
    mxfp4_backend: str = "",
    *,
    release: tuple[int, ...] | None = None,
    moe_modular: bool | None = None,
    act_fp8: bool = False,
) -> int:
    """The dummy forward pass's transient peak for ``tokens`` batched tokens: one layer's
    widest point, with the hidden state and the residual (model dtype) alive — the
    attention's q/k/v and output, or the MLP: dense, the gate/up output (2 x intermediate
    / TP) and the activation's (intermediate / TP); MoE, fused_moe's workspaces
    (vllm/model_executor/layers/fused_moe/fused_moe.py ``fused_experts_impl``:
    ``cache13`` of top_k x max(2 x inter, hidden) and ``intermediate_cache2`` of top_k x
    inter per token, ``inter`` this rank's share, at most ``VLLM_FUSED_MOE_CHUNK_SIZE``
    tokens at a time) — by ``release``, the layout and chunk of that release's Triton experts
    (``vllm.memory_moe.moe_workspace_bytes``: the modular kernel's larger second workspace from
    0.14.0, no chunking from 0.18.0, the separate output from 0.11.1; unknown: the newest). MXFP4
    experts on Marlin or the OAI Triton kernels (``mxfp4_backend``, ``vllm.moe_transient_per_token``):
    that backend's intermediates, the padded shapes for Marlin, the whole batch at once (neither
    chunks in the code read). Before 0.8.0 ``cache1`` (top_k x 2 x inter) and ``cache3`` (top_k x
    hidden) are separate buffers (``vllm.fused_moe_cache13_shared``, in ``moe_workspace_bytes``)."""
    tp = max(1, layout.tp)
    hidden = cfg.hidden or 0
    if cfg.mla:
        qkv = (
            (cfg.heads // tp) * (cfg.qk_nope_head_dim + cfg.qk_rope_head_dim)
            + (cfg.kv_lora_rank or 0)
            + cfg.qk_rope_head_dim
        )
        attn = qkv + (cfg.heads // tp) * (cfg.v_head_dim or cfg.qk_nope_head_dim)
    else:
        attn = (2 * (cfg.heads // tp) + 2 * max(1, cfg.kv_heads // tp)) * cfg.head_dim
    dt = cfg.dtype_bytes or 2
    # the MLP's bytes a token: the gate/up output (2 x inter, model dtype) and the activation
    per_token = (cfg.intermediate or 4 * hidden) / tp * (2 * dt + (1 if act_fp8 else dt))
    moe = 0
    if cfg.moe and cfg.moe_intermediate:
        inter = cfg.moe_intermediate if layout.ep else cfg.moe_intermediate / layout.moe_size
        fp8 = (cfg.quant.method or "").startswith("fp8")
        moe = memory_moe.moe_workspace_bytes(
            release, tokens, hidden=hidden, inter=inter, top_k=cfg.top_k, dtype_bytes=dt, fp8=fp8, modular=moe_modular
        )
        # the dense MLP only where the model has one (first_k_dense_replace layers)
        per_token = per_token if cfg.first_dense else 0.0
        if mxfp4_backend and cfg.quant.method == "mxfp4":
            own = vllm.moe_transient_per_token(mxfp4_backend, hidden, inter, max(1, cfg.top_k))
            if own is not None:
                moe = int(tokens * dt * own)
                if mxfp4_backend == "marlin":
                    # fused_marlin_moe's separate output from 0.11.1 (vllm.memory_moe.moe_output_bytes)
                    moe += memory_moe.moe_output_bytes(release, tokens, hidden, dt)
    dense_part = tokens * (dt * 2 * hidden + max(dt * attn, per_token))
    moe_part = moe + tokens * dt * 2 * hidden
    return int(max(dense_part, moe_part))


def sampler_peak(
    cfg: ModelConfig,
    tokens: int,
    seqs: int,
    sampler: str,
    *,
    v1_runner: bool = False,
    release: tuple[int, ...] | None = None,
    sms: int | None = None,
) -> int:
    """The dummy sampler run's peak (``flightcheck._knowledge.vllm``: bytes per request x
    vocabulary element by sampler), with the forward pass's hidden states still held; in the
    V1 runner (``v1_runner``) the hidden states its release holds instead — the batch's and the
    rows' copies, ``vllm.v1_sampler_hidden`` — and, on the Triton path, Triton's cached buffer
    (``vllm.triton_sampler_buffer_bytes``)."""
    rows = max(1, min(seqs, tokens))
    vocab, hidden, dt = cfg.vocab or 0, cfg.hidden or 0, cfg.dtype_bytes or 2
    per = vllm.sampler_bytes_per_element(sampler, rows)
    peak = rows * vocab * per + tokens * hidden * dt
    if v1_runner:
        whole, copies = vllm.v1_sampler_hidden(release)
        peak += copies * rows * hidden * dt - (0 if whole else tokens * hidden * dt)
        if sampler == "triton":
            peak += vllm.triton_sampler_buffer_bytes(release, rows, vocab, sms or gpus.SM_COUNT_DEFAULT)
    return int(peak)


def activations(
    cfg: ModelConfig,
    layout: Layout,
    tokens: int,
    seqs: int,
    sampler: str = "sort",
    mxfp4_backend: str = "",
    *,
    release: tuple[int, ...] | None = None,
    moe_modular: bool | None = None,
    act_fp8: bool = False,
    v1_runner: bool = False,
    sms: int | None = None,
    blas_workspaces: int = 0,
) -> int:
    """The profile run's transient peak: the forward pass and the sampler run one after
    the other (``profile_run``), so the larger of the two, over the BLAS workspaces the
    first matrix multiply leaves allocated."""
    forward = forward_peak(
        cfg, layout, tokens, mxfp4_backend, release=release, moe_modular=moe_modular, act_fp8=act_fp8
    )
    sampler_run = sampler_peak(cfg, tokens, seqs, sampler, v1_runner=v1_runner, release=release, sms=sms)
    return max(forward, sampler_run) + blas_workspaces


def encoder_dp(cfg: ModelConfig, batch: Batch) -> bool:
    """Whether this launch runs the vision encoder data-parallel over TP
    (``--mm-encoder-tp-mode data`` on a model and release that support it)."""
    archs = cfg.outer_architectures or cfg.architectures
    return cfg.tower is not None and vllm.encoder_data_parallel(batch.release, archs, batch.mm_encoder_tp_mode)


def encoder_terms(cfg: ModelConfig, layout: Layout, batch: Batch) -> tuple[int, int]:
    """(the encoder run's transient peak, the encoder outputs held in ``encoder_cache``
    through the forward pass and the sampler run) for a vision model whose engine version
    profiles the encoder (``flightcheck._knowledge.vllm``, next to ENCODER_PROFILED_SINCE).

    The dummy batch is ``vllm.encoder_items`` maximal images, when config.json gives an
    image's tokens (``_memory.config.vision_tower``), or maximal items of the modality with
    more tokens for Qwen-VL with its processor configs (``vllm.qwen_vl_item``: 0.11.0 -
    0.12.0 hold each output zero-padded to the budget's item size; from 0.11.1 the image
    options' width / height cut the image each item encodes, not how many items there
    are); otherwise the encoder budget's worth,
    ``max_num_batched_tokens`` tokens — what the items add up to when an item divides the
    budget, up to twice what they add up to when it does not (``budget // item`` whole
    items), and fewer tokens than vLLM encodes when one item is larger than the budget (a
    preprocessor's pixel limit, a video: then the term is too small).
    The run's peak is the dummy pixels (float32 from the processor and the tower's cast to
    the model dtype) plus one encoder layer's widest point over all the patches, with the
    hidden state and residual alive: attention's q/k/v and output (heads split over TP)
    or the MLP's fc1 output and activation (intermediate / TP); the attention itself is
    FlashAttention / memory-efficient (no patches x patches scores). The outputs are one
    language-model embedding per token (with Qwen3-VL's deepstack features).
    With ``--mm-encoder-tp-mode data`` (:func:`encoder_dp`) and known items, the busiest rank
    encodes ``ceil(items / tp)`` items at full width and ``encoder_cache`` holds the
    all-gathered ``tp x`` its output (``vllm.ENCODER_TP_DATA_SINCE``)."""
    t = cfg.tower
    if t is None or not batch.encoder:
        return 0, 0
    tp = max(1, layout.tp)
    padded = False
    if t.qwen is not None:
        # Qwen-VL: the item from the processor configs by release (vllm.qwen_vl_item); the
        # budget counts items of ``budget_tokens``, the encoder outputs ``encoder_tokens`` each,
        # zero-padded to ``budget_tokens`` where the release pads (vllm.encoder_output_padded)
        seq_len = batch.max_model_len or cfg.max_position or batch.tokens
        item = vllm.qwen_vl_item(batch.release, t.qwen, seq_len, batch.mm_limits, batch.mm_image_size)
        if item is None:  # every modality limited to 0: no tower modality, nothing profiled
            return 0, 0
        limit = vllm.mm_limit(batch.mm_limits, item.modality)
        items = vllm.encoder_items(item.budget_tokens, batch.tokens, batch.seqs, batch.max_model_len, limit)
        padded = vllm.encoder_output_padded(batch.release)
        out_per, held_per = item.encoder_tokens, max(item.budget_tokens, item.encoder_tokens)
        patches_per = item.encoder_tokens * t.patches_per_token
    elif (images := vllm.mm_limit(batch.mm_limits, "image")) == 0:
        return 0, 0  # the tower's images limited to 0: not a tower modality
    elif t.tokens_per_item:
        items = vllm.encoder_items(t.tokens_per_item, batch.tokens, batch.seqs, batch.max_model_len, images)
        out_per = held_per = t.tokens_per_item
        patches_per = t.patches_per_item or t.tokens_per_item * t.patches_per_token
    else:
        # no item size: the batch's worth, split over TP as "weights" mode splits it
        items, out_per, held_per, patches_per = 1, batch.tokens, batch.tokens, batch.tokens * t.patches_per_token
    dt = cfg.dtype_bytes or 2
    pixels = items * patches_per * t.patch_values * (4 + dt)
    gathered = 0
    sized = t.qwen is not None or bool(t.tokens_per_item)  # the items are known, not the batch's worth
    if sized and tp > 1 and encoder_dp(cfg, batch):
        # --mm-encoder-tp-mode data (vllm.ENCODER_TP_DATA_SINCE): the busiest rank encodes
        # ceil(items / tp) whole items at full width; the all-gather returns tp x its padded
        # output, which encoder_cache holds (views of it) unless the release pads copies
        busiest = -(-items // tp)
        patches = busiest * patches_per
        widest: float = max(4 * t.hidden + t.hidden, 3 * t.intermediate)
        gathered = tp * busiest * out_per
        tokens = items * held_per if padded else gathered
    else:
        patches = items * patches_per
        widest = max(4 * t.hidden / tp + t.hidden, 3 * t.intermediate / tp)
        tokens = items * (held_per if padded else out_per)
    block = patches * dt * (2 * t.hidden + widest)
    # where the release pads, the gathered tensor is alive beside the padded copies once
    run = pixels + block + (gathered * t.out_hidden * dt if padded else 0)
    return int(run), int(tokens * t.out_hidden * dt)


def sampler_span(cfg: ModelConfig, layout: Layout, batch: Batch) -> tuple[int, int]:
    """(min, max) of the profile's peak over the top-k/top-p implementations the releases run
    (``vllm.sampler_kind``; the V2 runner's logits-only pass, ``vllm.v2_runner``): what an
    unknown release leaves open (``bound_terms``)."""
    # and, for a MoE, over the releases' fused_moe workspace layouts (vllm.memory_moe.LAYOUT_RELEASES)
    releases = memory_moe.LAYOUT_RELEASES if cfg.moe and batch.release is None else (batch.release,)
    peaks = [
        sum(profile_peak(cfg, layout, msgspec.structs.replace(batch, sampler=k, release=r)))
        for k in ("v2-logits", "flashinfer", "sort")
        for r in releases
    ]
    return min(peaks), max(peaks)


def _peak_drop(cfg: ModelConfig, layout: Layout, high: Batch, low: Batch) -> int:
    """How much higher the profile peak is with ``high`` than with ``low`` (0 when it is not):
    the width of a bound term that swaps one input of the batch."""
    return max(0, sum(profile_peak(cfg, layout, high)) - sum(profile_peak(cfg, layout, low)))


def runner_span(cfg: ModelConfig, layout: Layout, batch: Batch) -> int:
    """How much lower the profile peak is where the launch leaves the model runner open
    (``batch.v2_runner`` None) and the V2 runner's dummy sampler would hold only the logits
    (``vllm.v2_sampler_holds_logits_only``; the CUDA-graph estimate it may skip is the bound's
    ``cuda_graphs`` term): ``bound_terms``' ``model_runner``; 0 elsewhere."""
    if batch.v2_runner is not None or batch.release is None or not vllm.v2_sampler_holds_logits_only(batch.release):
        return 0
    return _peak_drop(cfg, layout, batch, msgspec.structs.replace(batch, sampler="v2-logits"))


def moe_backend_span(cfg: ModelConfig, layout: Layout, batch: Batch) -> int:
    """How much lower the profile peak is where another MoE backend than the Triton experts runs:
    down to the direct layout's buffers (``vllm.memory_moe``: the release's oracle picks it by GPU,
    EP and installed packages); 0 for a dense model, a release before the modular kernel, or an
    unknown release (``release_unknown`` spans the layouts: :func:`sampler_span`)."""
    if not cfg.moe or batch.release is None or not memory_moe.modular_triton(batch.release):
        return 0
    return _peak_drop(cfg, layout, batch, msgspec.structs.replace(batch, moe_modular=False))


def sampler_install_span(cfg: ModelConfig, layout: Layout, batch: Batch) -> int:
    """How much higher the profile peak is where the release runs FlashInfer's top-k/top-p only if
    it is installed (``vllm.sampler_install_open``) and the point counts it installed: the PyTorch
    sort's peak less this batch's (``bound_terms``' ``sampler_install``); 0 elsewhere."""
    if batch.sampler != "flashinfer" or not vllm.sampler_install_open(batch.release):
        return 0
    return _peak_drop(cfg, layout, msgspec.structs.replace(batch, sampler="sort"), batch)


def v0_peak(
    cfg: ModelConfig, layout: Layout, batch: Batch, length: int | None, *, tokens_given: bool, seqs_given: bool
) -> int:
    """The profile peak were the V0 engine to run this launch (an unknown release's V0 side,
    ``bound_terms``' ``release_unknown``): V0's default batch for ``length`` (``vllm.v0_batch``,
    which depends on MLA and multimodal models) where the launch leaves it to the engine, and
    V0's sort sampler."""
    tokens, seqs = batch.tokens, batch.seqs
    if length and not tokens_given:
        multimodal = cfg.tower is not None or cfg.vision is not None
        tokens, default_seqs = vllm.v0_batch(length, mla=cfg.mla, multimodal=multimodal)
        seqs = seqs if seqs_given else default_seqs
    v0 = msgspec.structs.replace(batch, tokens=tokens, seqs=seqs, sampler="sort")
    return sum(profile_peak(cfg, layout, v0))


def model_runner(
    cfg: ModelConfig,
    release: tuple[int, ...] | None,
    *,
    v0: bool,
    quantization: str | None,
    env: dict[str, str | None] | None,
    speculative: bool,
    sampler: str,
    cudagraphs: bool,
) -> tuple[bool | None, str, bool]:
    """(the V2 runner profiles, the dummy sampler, the CUDA-graph estimate counted) for a V1 or V0
    launch of this model (``vllm.v2_runner``): V2 holds only the logits before 0.33.0 and skips the
    estimate in 0.20.0 - 0.28.0; ``sampler`` and ``cudagraphs`` are the V1 runner's."""
    v2 = (
        False
        if v0
        else vllm.v2_runner(
            release,
            architectures=cfg.outer_architectures or cfg.architectures,
            moe=cfg.moe,
            quantized=cfg.quant.method is not None or bool(quantization),
            hybrid="linear" in cfg.layer_kinds,
            env=env,
            speculative=speculative,
        )
    )
    if v2 and vllm.v2_sampler_holds_logits_only(release):
        sampler = "v2-logits"
    return v2, sampler, cudagraphs and not (v2 and vllm.v2_skips_cudagraph_estimate(release))


def fp8_linear(cfg: ModelConfig, batch: Batch) -> bool:
    """Whether the model's linear layers quantize their input per tensor or per token (FP8
    without weight blocks, or ``--quantization fp8`` on a 16-bit checkpoint): those whose
    activation Inductor may store as FP8 (``vllm.fp8_activation_stored_as_fp8``)."""
    return cfg.quant.method == "fp8" or (batch.online_fp8 and cfg.quant.method is None)


def act_quant_span(cfg: ModelConfig, layout: Layout, batch: Batch) -> int:
    """How much lower the profile peak is where the launch leaves open whether Inductor holds an
    FP8 layer's MLP activation as FP8 (``batch.act_fp8`` None) and the point keeps the 16-bit
    figure (``bound_terms``' ``fp8_act_quant``); 0 elsewhere."""
    if batch.act_fp8 is not None or not fp8_linear(cfg, batch):
        return 0
    return _peak_drop(cfg, layout, batch, msgspec.structs.replace(batch, act_fp8=True))


def profile_peak(cfg: ModelConfig, layout: Layout, batch: Batch) -> tuple[int, int]:
    """(the text model's peak, what the vision encoder adds to it): ``profile_run`` runs
    the encoder, then the forward pass and the sampler with the encoder outputs held."""
    text = activations(
        cfg,
        layout,
        batch.tokens,
        batch.seqs,
        batch.sampler,
        batch.mxfp4_backend,
        release=batch.release,
        moe_modular=batch.moe_modular,
        act_fp8=batch.act_fp8 is True and fp8_linear(cfg, batch),
        # the V1 runner's sampler run (a V2 runner left open keeps the V1 runner's, as the point does)
        v1_runner=not batch.v0 and batch.v2_runner is not True,
        sms=batch.sms,
        blas_workspaces=batch.blas_workspaces,
    )
    run, held = encoder_terms(cfg, layout, batch)
    if not run and not held:
        return text, 0
    run += batch.blas_workspaces  # the encoder's matrix multiplies come first: they allocate them
    return text, max(run, text + held) - text


def non_torch_point(batch: Batch, *, eager: bool) -> int:
    """The point's non-torch memory for one rank: ``NON_TORCH_NO_GRAPH_PROFILE`` where V0 or
    the V1 runner profiles without a graph capture, else ``NON_TORCH``. Two kept at
    ``NON_TORCH`` without one: the V2 runner, whose only logs with a breakdown (0.27.1, points
    141 - 142, under WSL) have 0.30 and 0.56 GiB, for reasons not derived; and 0.6.5 - 0.6.6,
    whose figure also holds torch's cached blocks (``vllm.non_torch_counts_allocator_cache``:
    points 34, 103, 118 log 1.79, 0.28, 0.26)."""
    if batch.v2_runner is True or vllm.non_torch_counts_allocator_cache(batch.release):
        return NON_TORCH
    if batch.v0 or not vllm.graph_profile_in_budget(batch.release, eager=eager):
        return NON_TORCH_NO_GRAPH_PROFILE
    return NON_TORCH


def default_reserve(
    cfg: ModelConfig,
    layout: Layout,
    engine: str,
    *,
    eager: bool = False,
    batch: Batch | None = None,
    mm_reserved: int = 0,
    allreduce_fusion: int = 0,
) -> tuple[int, dict[str, int]]:
    """(bytes, breakdown) kept back from the requested memory besides weights and KV
    (SGLang: only a multimodal model's post-sizing reservation, ``mm_reserved``);
    ``allreduce_fusion``: FlashInfer's all-reduce fusion workspace made after vLLM's snapshot
    (``vllm.fusion_workspace``'s point)."""
    if engines.get(engine).memory.reserve == "multimodal":
        return (mm_reserved, {"multimodal_cache": mm_reserved}) if mm_reserved and cfg.vision else (0, {})
    b = batch or Batch()
    text, encoder = profile_peak(cfg, layout, b)
    parts = {
        "activations": text,
        "cuda_graphs": 0 if (eager or not b.cudagraphs) else CUDA_GRAPHS,
        "non_torch": non_torch_point(b, eager=eager),
    }
    if allreduce_fusion:
        parts["allreduce_fusion"] = allreduce_fusion
    if vllm.non_torch_from_process_start(b.release):
        # 0.6.4.x measures non-torch memory device-wide from process start
        # (vllm.V0_NON_TORCH_FROM_PROCESS_START): the CUDA context is inside the budget
        parts["cuda_context"] = CONTEXT
    if cfg.tower is not None and b.encoder:
        parts["vision_encoder"] = encoder  # the profile run's peak above the text model's
    if b.v2_runner:
        # the V2 runner's per-request state, counted from 0.27.0 (vllm.v2_persistent_bytes); vLLM
        # builds it, and runs the dummy sampler, on the last PP rank only, yet it is counted here
        # on every stage: the one PP 2 log with a per-stage figure (0.27.1, Qwen3-32B over PCIe)
        # has stage 0, without either, keeping no less than the last stage, by a term not derived
        state = vllm.v2_persistent_bytes(b.release, b.seqs, cfg.vocab or 0)
        if state:
            parts["runner_state"] = state
        # (its all_token_ids grow with max_model_len: not here but in Fit, ``length_cost``)
    return sum(parts.values()), parts


def pre_snapshot(
    layout: Layout,
    nvlink: bool | None,
    comm: Communication | None = None,
) -> dict[str, int]:
    """What vLLM allocates before its baseline snapshot (estimates, the high end): the CUDA
    context and cuBLAS handles, and with more than one rank NCCL's communicators and the
    custom all-reduce buffers — ``comm`` where derived (:func:`communication`), else larger
    over NVLink / NVSwitch, where custom all-reduce and NVLS run, than over PCIe."""
    parts = {"cuda_context": CONTEXT}
    if layout.tp * layout.pp > 1:
        if comm is not None and comm.derived:
            parts["communication"] = comm.high
        else:
            parts["communication"] = COMM_NVLINK if nvlink else COMM_PCIE
    return parts


def length_cost(batch: Batch, speculative_method: str | None = None) -> int:
    """Bytes the profiled budget holds per token of max_model_len besides the reserve (the V2
    runner's ``all_token_ids`` where they are on the GPU, ``vllm.v2_token_ids_bytes``): 0 where
    the runner, the release or the speculative method does not put them there."""
    return vllm.v2_token_ids_bytes(batch.release, batch.seqs, 1, speculative_method) if batch.v2_runner else 0


def usable_bytes(total: int, utilization: float) -> int:
    """vLLM's requested memory: ceil(total x utilization)."""
    return math.ceil(total * utilization)
