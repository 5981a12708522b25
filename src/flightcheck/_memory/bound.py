"""The vLLM KV budget's [low, high] bound: one ``Term`` for each fact the launch does not decide
before it starts (the release, NCCL's lazily made connections, the fusion workspace, the sampler
or MoE backend left to what is installed), each citing the engine source it is read from. The
point estimate is ``flightcheck._memory.budget``'s; these terms only widen it.
"""

from __future__ import annotations

import msgspec

from flightcheck._knowledge import vllm
from flightcheck._memory.budget import (
    ACTIVATION_SPAN,
    CONTEXT,
    CUDA_GRAPHS,
    CUDA_GRAPHS_HIGH,
    NON_TORCH,
    NON_TORCH_SPAN,
    SHARED_HOST_MEMORY_CC,
    SHARED_HOST_MEMORY_SINCE,
    Communication,
    usable_bytes,
)
from flightcheck._vocabulary.version import release


class Term(msgspec.Struct, frozen=True):
    """One fact the launch does not decide before it starts: how far it may put the KV budget
    ``below`` / ``above`` the point estimate, and the engine source it is read from."""

    below: int
    above: int
    source: str


def bound_terms(
    *,
    engine_version: str | None,
    total: int,
    utilization_set: bool,
    cudagraphs_counted: bool,
    tp: int,
    comm: Communication | None,
    lazy_connect: bool,
    fusion: tuple[int, int, int] = (0, 0, 0),
    comm_in_budget: Communication | None = None,
    compute_capability: str | None = None,
    utilization: float | None = None,
    activations: int = 0,
    release_activations: tuple[int, int] | None = None,
    v0_activations: int | None = None,
    sampler_open: int = 0,
    mxfp4_open: tuple[int, int] = (0, 0),
    moe_backend: int = 0,
    counted_after: int = 0,
    act_quant_open: int = 0,
    runner_open: int = 0,
    non_torch: int = NON_TORCH,
) -> dict[str, Term]:
    """The vLLM KV budget's [low, high] terms for one launch (the point is unchanged: each term
    only widens it; an empty dict only where nothing is left open, which no profiled launch is).

    - ``nccl_after_snapshot`` (less ``counted_after``, the logits all-gather's connections the
      point counts: ``budget.logits_allgather``): from 0.11.0 the worker's baseline snapshot is taken after
      ``init_worker_distributed_environment`` (v1/worker/gpu_worker.py ``init_device``) and
      the profile's ``non_torch_increase`` is the non-torch growth since that snapshot
      (utils/mem_utils.py ``memory_profiling``: ``diff_from_create.non_torch_memory``) — read
      in 0.19.0 and 0.33.0 (and the 0.11.0 / 0.12.0 wheels, ``vllm.SNAPSHOT_AFTER_DISTRIBUTED_SINCE``).
      The communicator of torch's device group is created by the profile run's first
      collective, and with cuMem on (NCCL's default from vLLM 0.10.2, ``nccl.connects_at_init``)
      the pynccl communicator made before the snapshot connects its rings, trees and NVLS
      buffers only when a collective first needs them — during the weight load or the
      profile run, after the snapshot. Which algorithm's connections the profile's all-reduce
      makes is NCCL's tuner's choice by size (ring, tree, NVLS): the budget may be up to
      ``communicators x comm.high`` lower (``nccl.communicator_bytes``), 0 at best.
      Custom all-reduce's IPC buffers and torch symmetric memory are made before the snapshot
      (``vllm.memory_tp``): outside the budget, not a term.
    - ``nccl_in_budget``: before 0.11.0 the communicators sit inside the budget and the point
      counts their certain size (``comm_in_budget.low``); what NVLS, an interconnect the source
      does not pin down (across nodes, no NVLink facts) or the algorithm may add is below it.
    - ``allreduce_fusion``: FlashInfer's all-reduce + RMSNorm workspace made after the snapshot
      (``vllm.fusion_workspace``, ``fusion`` = (low, point, high)): multicast support, the
      driver's multicast granularity and, for releases not read, whether the pass is on.
    - ``non_torch``: what else the profile allocates outside torch's allocator — the CUDA modules
      the first forward loads (torch sets CUDA_MODULE_LOADING=LAZY, so kernels load when first
      run: which kernels depends on the attention backend and torch.compile), the attention
      backends' own buffers. Its size is not in vLLM's code: the point (``non_torch``) is
      ``budget.non_torch_point``'s measured figure and the term spans ``NON_TORCH_SPAN`` (the
      breakdowns the corpus logs, tests/fixtures/memory: 0.02 - 0.55 GiB on one node, V1).
    - ``cuda_context``: 0.6.4.x counts the CUDA context inside its non-torch figure
      (``vllm.non_torch_from_process_start``); the point takes ``CONTEXT``, an estimate, so the
      budget may be higher by up to it.
    - ``allocator_cache``: 0.6.5 - 0.6.6 (vllm/utils.py ``memory_profiling``, read in both wheels)
      take non-torch memory as ``(total - free) - baseline - weights - allocated growth``: torch's
      reserved-but-free blocks that a live tensor keeps after the profile's ``empty_cache`` count
      too, up to the profile's torch peak (``vllm.non_torch_counts_allocator_cache``): the budget
      may be lower by up to the modelled activations. From 0.27.0 (``vllm.consumed_counts_allocator_cache``;
      an unknown release too) the non-KV memory is ``total_consumed + transient_peak_headroom``: the
      free-memory drop since the snapshot, which holds the blocks torch keeps reserved after
      ``empty_cache``, plus the peak over what stays allocated, which holds them again — the same
      span below.
    - ``activations``: the profile's torch peak under torch.compile (Inductor fuses elementwise
      ops, so fewer intermediates live than the eager layer the estimate walks) or eager, and the
      allocator's rounding: ``ACTIVATION_SPAN`` of the modelled peak either way.
    - ``cuda_graphs``: where the CUDA-graph estimate is subtracted (0.20.0 on,
      ``vllm.CUDAGRAPHS_IN_BUDGET_SINCE``) ``profile_cudagraph_memory`` measures the capture of
      the release's capture sizes, which the launch may change (``--compilation-config``):
      0 to ``CUDA_GRAPHS_HIGH`` instead of the point's 0.5 GiB.
    - ``shared_host_memory``: on Orin, Thor and Spark (cc 8.7, 11.0, 12.1) the snapshot's free
      memory is psutil's available host memory (utils/mem_utils.py ``MemorySnapshot.measure``,
      ``shared_sysmem_device_mem_sms``, 0.19.0 wheel; 0.13.0 too), so what the host's other
      processes take or give back between the snapshot and the profile moves the budget. The
      startup check (``request_memory``) only bounds it by the slack: ``(1 - utilization) x total``
      either way.
    - ``moe_backend``: a MoE launch of a release with the modular kernel (0.14.0 on): the point takes
      the Triton experts' workspaces, the backend the release's oracle picks may need less — up to
      ``moe_backend`` (:func:`moe_backend_span`) above the point (``vllm.memory_moe``, oracle/fp8.py
      of 0.27.0).
    - ``release_unknown``: with no release known the point takes each release rule's
      conservative side (utilization 0.9, the CUDA-graph estimate subtracted, the
      communicators after the snapshot, the sort sampler); the budget may be higher by what the other side
      gives: ``ceil(total x 0.92) - ceil(total x 0.9)`` (the 0.20.0 default,
      ``vllm.UTILIZATION_DEFAULTS``) unless the launch sets the utilization, and the graph
      estimate (not subtracted before 0.20.0, ``vllm.CUDAGRAPHS_IN_BUDGET_SINCE``); the
      releases' other terms (the fusion workspace, the communicators) span their min / max, and
      ``release_activations`` (the profile peak's (min, max) over the releases' samplers —
      ``vllm.sampler_kind``: FlashInfer / Triton 14 B, the sort 38 - 50 B a vocabulary element)
      widens the activations by what the point's sampler leaves out. Where the unknown release may
      be V0 (``vllm.unknown_release_may_run_v0``: below compute capability 10.0),
      ``v0_activations`` is the profile peak under V0's batch rule and sort (``vllm.v0_batch``,
      read in 0.6.4.post1 and 0.8.x) and 0.6.4.x's non-torch figure holds the CUDA context
      (``vllm.non_torch_from_process_start``): the budget may be lower by both.
    - ``sampler_install``: 0.8 - 0.11.1 (V1) run FlashInfer's top-k/top-p in the profile when
      it imports, the PyTorch sort otherwise (``vllm.sampler_install_open``); the point counts
      it installed (the smaller peak), so the budget may be lower by ``sampler_open``: the
      sort's peak less FlashInfer's (4.6 GiB for gpt-oss at 1024 requests).
    - ``mxfp4_backend``: where the release leaves the MXFP4 MoE backend to what is installed
      (``vllm.mxfp4_backends``: Marlin or the OAI Triton kernels on Hopper 0.10.2 - 0.11.x,
      FlashInfer or Triton on Blackwell before 0.11.1), the other backend's experts and
      profile transient move the budget by ``mxfp4_open`` (below, above): Marlin's padded
      experts hold ~3 % more than Triton's (1.6 GiB on gpt-oss-120b).
    - ``fp8_act_quant``: an FP8 (non-block) model whose launch leaves compilation open (release
      unknown, or ``-O`` / ``--compilation-config`` set): the point keeps the MLP's 16-bit
      activation; compiled with the custom ops off, Inductor holds it as FP8
      (``vllm.fp8_activation_stored_as_fp8``) and the budget is higher by ``act_quant_open``.
    - ``model_runner``: where the launch leaves open which model runner profiles (speculative
      decoding, ``vllm.v2_runner`` None), the point takes the V1 runner's sampler; the V2 runner's
      dummy sampler holds only the logits before 0.33.0, so the budget may be higher by
      ``runner_open`` (its skipped CUDA-graph estimate, 0.20 - 0.28, is ``cuda_graphs``')."""
    v = release(engine_version)
    terms: dict[str, Term] = {}
    after = v is None or not vllm.comm_in_budget(v)
    if tp > 1 and comm is not None and after:
        # lazily connected: both communicators' connections land after the snapshot; at init
        # only torch's device-group communicator (created by the profile run) does
        n = vllm.TP_COMMUNICATORS_IN_BUDGET if (lazy_connect or v is None) else 1
        # less what the point already counts (the logits all-gather's certain connections)
        below = max(0, n * comm.high - counted_after)
        if below:
            terms["nccl_after_snapshot"] = Term(
                below,
                0,
                "v1/worker/gpu_worker.py init_device + utils/mem_utils.py memory_profiling "
                "(0.11.0, 0.12.0, 0.19.0, 0.33.0): NCCL connections made on first use count as non-torch",
            )
    if tp > 1 and comm_in_budget is not None and not after:
        n = vllm.TP_COMMUNICATORS_IN_BUDGET
        below = n * (comm_in_budget.high - comm_in_budget.low)
        if below:
            terms["nccl_in_budget"] = Term(
                below,
                0,
                "v1/worker/gpu_worker.py init_device (0.10.0, 0.10.1.1): the snapshot precedes the "
                "distributed init; NVLS / an interconnect not pinned down may add up to the high end",
            )
    f_low, f_point, f_high = fusion
    if f_high - f_point or f_point - f_low:
        terms["allreduce_fusion"] = Term(
            f_high - f_point,
            f_point - f_low,
            "config/vllm.py enable_allreduce_rms_fusion + flashinfer/comm/trtllm_ar.py (vLLM 0.19.0 / "
            "FlashInfer 0.6.6, 0.33.0 / 0.7.2.post1): the fusion workspace, multicast and its granularity",
        )
    terms["non_torch"] = Term(
        NON_TORCH_SPAN[1] - non_torch,
        non_torch - NON_TORCH_SPAN[0],
        "utils/mem_utils.py memory_profiling (0.19.0, 0.33.0): CUDA modules loaded lazily by the "
        "profile run and backends' buffers outside torch; size measured, not in the code",
    )
    if vllm.non_torch_from_process_start(v):
        # the point counts the CUDA context at its estimate (default_reserve); its size is the
        # driver's, not vLLM's: the budget may be higher by up to that estimate
        terms["cuda_context"] = Term(
            0,
            CONTEXT,
            "worker/worker.py determine_num_available_blocks (0.6.4.post1): non-torch memory is "
            "device-wide from process start, the CUDA context inside it; its size is the driver's",
        )
    if vllm.non_torch_counts_allocator_cache(v) and activations:
        # 0.6.5 - 0.6.6 count allocated, not reserved, torch bytes: the caching allocator's
        # blocks a live tensor keeps reserved after the profile's empty_cache count as
        # non-torch; at most the profile's torch peak, which they were carved from
        terms["allocator_cache"] = Term(
            activations,
            0,
            "utils.py memory_profiling (0.6.5, 0.6.6): non-torch = used - baseline - weights - "
            "allocated growth, so torch's reserved-but-free blocks count; the allocator's state",
        )
    elif vllm.consumed_counts_allocator_cache(v) and activations:
        # from 0.27.0 the same blocks count twice: in the free-memory drop and under the peak
        # they were carved from; how many the allocator keeps is its state, not the code's
        terms["allocator_cache"] = Term(
            activations,
            0,
            "utils/mem_utils.py memory_profiling (0.27.0, 0.27.1, 0.30.0, 0.33.0): total_consumed (free-memory "
            "drop) + transient_peak_headroom, so torch's reserved-but-free blocks count twice",
        )
    if activations:
        span = int(activations * ACTIVATION_SPAN)
        terms["activations"] = Term(
            span,
            span,
            "v1/worker/gpu_model_runner.py profile_run: the torch peak under torch.compile or eager",
        )
    if sampler_open > 0:
        terms["sampler_install"] = Term(
            sampler_open,
            0,
            "v1/sample/ops/topk_topp_sampler.py TopKTopPSampler.__init__ (0.10.1.1, 0.11.0): FlashInfer's "
            "sampler when it imports, the PyTorch sort otherwise; FlashInfer an optional extra (METADATA)",
        )
    if mxfp4_open[0] > 0 or mxfp4_open[1] > 0:
        terms["mxfp4_backend"] = Term(
            max(0, mxfp4_open[0]),
            max(0, mxfp4_open[1]),
            "model_executor/layers/quantization/mxfp4.py get_mxfp4_backend (0.10.2 - 0.11.2): Marlin or "
            "Triton by whether triton_kernels is installed; create_weights / process_weights_after_loading",
        )
    if moe_backend:
        terms["moe_backend"] = Term(
            0,
            moe_backend,
            "model_executor/layers/fused_moe/oracle/fp8.py + modular_kernel.py (0.15.0 - 0.33.0): the MoE "
            "backend is picked by GPU, EP and packages; the point takes the Triton experts' workspaces",
        )
    if runner_open > 0:
        terms["model_runner"] = Term(
            0,
            runner_open,
            "config/vllm.py use_v2_model_runner + v1/worker/gpu/model_runner.py _dummy_sampler_run (0.22.0 - "
            "0.32.0): the V2 runner's dummy sampler holds the logits alone",
        )
    if act_quant_open > 0:
        terms["fp8_act_quant"] = Term(
            0,
            act_quant_open,
            "layers/quantization/input_quant_fp8.py QuantFP8 + custom_op.py (0.10.0 - 0.33.0), torch/_inductor/"
            "ir.py should_realize_on_reuse (2.13.0, 2.14.0): under Inductor the MLP's activation is stored as FP8",
        )
    counted = cudagraphs_counted and (v is None or vllm.cudagraphs_in_budget(v))
    if counted:
        terms["cuda_graphs"] = Term(
            CUDA_GRAPHS_HIGH - CUDA_GRAPHS,
            CUDA_GRAPHS if v is not None else 0,  # unknown release: the graph term is release_unknown's
            "v1/worker/gpu_model_runner.py profile_cudagraph_memory (0.19.0, 0.33.0): the capture "
            "sizes decide the estimate",
        )
    if compute_capability in SHARED_HOST_MEMORY_CC and (v is None or v >= vllm._release(SHARED_HOST_MEMORY_SINCE)):
        slack = int(total * (1 - (utilization or vllm.default_utilization(v))))
        terms["shared_host_memory"] = Term(
            slack,
            slack,
            "utils/mem_utils.py MemorySnapshot.measure (0.13.0, 0.19.0): free memory is the host's "
            "psutil available on cc 8.7 / 11.0 / 12.1",
        )
    if v is None:
        above = 0
        if not utilization_set:
            above += usable_bytes(total, max(u for _, u in vllm.UTILIZATION_DEFAULTS)) - usable_bytes(
                total, vllm.default_utilization(None)
            )
        if cudagraphs_counted:
            above += CUDA_GRAPHS
        below = 0
        if release_activations is not None and activations:
            lo, hi = release_activations
            below += max(0, max(hi, v0_activations or 0) - activations)
            above += max(0, activations - lo)
        elif v0_activations is not None and activations:
            below += max(0, v0_activations - activations)
        if v0_activations is not None:
            below += CONTEXT  # 0.6.4.x: the CUDA context inside the non-torch figure
        if above or below:
            terms["release_unknown"] = Term(
                below,
                above,
                "no release known: gpu_memory_utilization 0.92 from 0.20.0 (else 0.9), the "
                "CUDA-graph estimate subtracted from 0.20.0 (v1/worker/gpu_worker.py), the "
                "sampler by release (v1/sample/ops/topk_topp_sampler.py) and, below 10.0, the V0 "
                "engine's batch and CUDA context (worker/worker.py, 0.6.4.post1)",
            )
    return terms
