"""vLLM's memory profiler, release by release: the KV cache budget
(v1/worker/gpu_worker.py, v1/worker/utils.py), the profile run's sampler peak, the
distributed buffers inside or outside the budget, the V0 engine's rules and the batch
defaults.
"""

from __future__ import annotations

from typing import Any

from flightcheck._knowledge.vllm._versions import _release
from flightcheck._knowledge.vllm.env import ENV_DEFAULTS, ESTIMATE_CUDAGRAPHS, USE_FLASHINFER_SAMPLER
from flightcheck._knowledge.vllm.memory_runner import SAMPLER_BYTES_V2_DEFAULT, v2_skips_cudagraph_estimate

# The V0 engine (which launches run it, its batch and profiler rules) has its own module,
# read in 0.6.1 - 0.10.1.1: V0 by default before 0.8.0 unless VLLM_USE_V1=1, then the
# oracle's fallbacks (``runs_v0``).
from flightcheck._knowledge.vllm.memory_v0 import V1_DEFAULT_SINCE, _env_on, v0_batch

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
#: vllm/config/cache.py from 0.11.1: ``gpu_memory_utilization: float = Field(default=0.9,
#: gt=0, le=1)`` (0.92 from 0.20.0) on a pydantic dataclass; pydantic checks it when
#: ``CacheConfig`` is built (``create_engine_config``, at startup, after the parser accepted
#: the float), so nan, inf, <= 0 and > 1 stop the engine before it loads anything — the Field
#: is in every wheel 0.11.1 - 0.33.0 (each read). 0.10.1 - 0.11.0 declare a plain ``float = 0.9``
#: and ``_verify_args`` raises only for ``> 1.0`` (0.11.0 cache.py:168), as 0.6.0 does
#: (vllm/config.py ``CacheConfig._verify_args``; inf too; nan, 0 and -1 pass); before 0.11.1 only
#: ``> 1`` is taken as refused. Past 0.33.0: extrapolated.
UTILIZATION_RANGE_SINCE = "0.11.1"


#: the dtype vLLM runs the model in (``--dtype``): an explicit float / float32 upcasts and half /
#: float16 / bfloat16 cast; "auto" takes the config's torch_dtype but downcasts float32 (or no
#: torch_dtype at all) to 16 bits — float16 in 0.6.0, bfloat16 or float16 by the platform's
#: supported dtypes in 0.33.0, the same two bytes a value (vllm/config.py ``_get_and_verify_dtype``
#: of 0.6.0; config/model.py ``_get_and_verify_dtype`` / ``_resolve_auto_dtype`` of 0.33.0). The
#: unquantized weights are cast to it on load, and the KV cache ("auto") and the activations
#: follow it. Both releases read; between them and past 0.33.0: taken as the same.
MODEL_DTYPES = {
    "half": "float16",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float": "float32",
    "float32": "float32",
}


def model_dtype(flag: str | None, config_dtype: str) -> str:
    """The dtype vLLM runs the model in for ``--dtype flag`` (None / "auto": the config's
    ``config_dtype``, float32 downcast to 16 bits; see ``MODEL_DTYPES``); an unknown spelling,
    which vLLM refuses at startup, leaves the config's."""
    chosen = (flag or "auto").lower()
    if chosen in MODEL_DTYPES:
        return MODEL_DTYPES[chosen]
    if chosen == "auto" and config_dtype in ("float32", "float", "fp32"):
        return "bfloat16"
    return config_dtype


def utilization_refusal(value: object, v: tuple[int, ...] | None) -> str | None:
    """vLLM's refusal of ``--gpu-memory-utilization value`` at startup for release ``v``
    (None: not refused, or not known to be)."""
    import math

    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    where = "CacheConfig (vllm/config/cache.py)"
    if v is not None and v >= _release(UTILIZATION_RANGE_SINCE):
        if 0 < value <= 1:  # nan fails both comparisons
            return None
        return f"gpu_memory_utilization {value!r}: {where} requires 0 < value <= 1; the engine refuses it at startup"
    if value > 1 and not math.isnan(value):
        return f"gpu_memory_utilization {value!r}: {where} requires value <= 1; the engine refuses it at startup"
    return None


#: first release that subtracts the CUDA-graph estimate from the KV budget by default.
CUDAGRAPHS_IN_BUDGET_SINCE = ENV_DEFAULTS[ESTIMATE_CUDAGRAPHS][0][0]  # "0.20.0": the default flipped to 1
#: first release whose "Actual usage is ... GiB for peak activation" line (and
#: ``Worker.peak_activation_memory``) includes the CUDA-graph estimate it subtracts: from 0.27.0
#: v1/worker/gpu_worker.py ``determine_available_memory`` sets ``peak_activation_memory =
#: transient_peak_headroom + cudagraph_memory_estimate_applied`` (read in 0.27.0 - 0.33.0); in
#: 0.20.0 - 0.26.0 it is ``torch_peak_increase`` alone and the estimate is a term of its own
#: (read in 0.20.0, 0.22.0 - 0.26.0). The "GiB for CUDAGraph memory" figure beside it is the
#: graphs' actual capture, not the estimate. Past 0.33.0: extrapolated.
PEAK_LOG_HOLDS_CUDAGRAPH_ESTIMATE_SINCE = "0.27.0"
#: first release whose profiler takes the non-KV memory as the free-memory drop since the
#: snapshot plus the profile's torch peak over what stays allocated (vllm/utils/mem_utils.py
#: ``memory_profiling``: ``non_kv_cache_memory = total_consumed + transient_peak_headroom``,
#: ``total_consumed = before_create.free_memory - after_profile.free_memory``,
#: ``transient_peak_headroom = torch_peak - torch_allocated`` after the profile's
#: ``empty_cache``): read in 0.27.0, 0.27.1, 0.30.0 and 0.33.0; 0.26.0 adds ``non_torch_increase``
#: (device use less torch's reserved bytes) to the peak instead. The caching allocator's blocks
#: that a live tensor keeps reserved after ``empty_cache`` are in the free-memory drop *and*
#: under the peak they were carved from, so they count twice: the budget is lower by what the
#: allocator keeps — at most the profile's torch peak. Past 0.33.0: extrapolated.
CONSUMED_COUNTS_ALLOCATOR_CACHE_SINCE = "0.27.0"
#: tokens per KV block (vllm/config/cache.py ``block_size`` default for CUDA attention).
BLOCK_SIZE = 16
#: first release that logs "GPU KV cache size" as int(max_concurrency x max_model_len)
#: (vllm/v1/core/kv_cache_utils.py); before it, num_blocks // groups x block_size (0.20.0
#: and earlier, read from the wheels).
KV_TOKENS_BY_CONCURRENCY_SINCE = "0.21.0"
#: first release with the >= 160 GiB batch tier (16384 / 1024 for both usage contexts):
#: vllm/engine/arg_utils.py ``get_batch_defaults`` has no such branch in 0.19.0 - 0.27.0 and has
#: it in 0.28.0 - 0.33.0 (every wheel of 0.19.0, 0.20.0, 0.22.0 - 0.33.0 read).
BATCH_TIER_160_SINCE = "0.28.0"
#: first release that keeps DGX Spark (GB10, cc 12.1) on the small tier (``is_gb10`` in
#: ``get_batch_defaults``) and falls back to torch's total where NVML's memory query fails
#: (platforms/cuda.py ``NvmlCudaPlatform.get_device_total_memory``): absent in 0.32.0, present in
#: 0.33.0 (both wheels read).
GB10_SMALL_TIER_SINCE = "0.33.0"


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
# sorts; 0.17.0 - 0.29.x take it for >= 8 requests — ``HAS_TRITON and logits.shape[0] >= 8``
# — and sort below that, a case not modelled; 0.30.0 drops the row condition); from 0.21.0
# FlashInfer is on by default
# but ``_dummy_sampler_run`` also warms ``forward_native`` — 14 bytes either way
# (topk_topp_sampler.py, envs.py and gpu_model_runner.py of the wheels, read).
SAMPLER_BYTES_NATIVE = 38
SAMPLER_BYTES_NATIVE_FEW_ROWS = 50  # 2-127 requests: torch's full-sort path
SAMPLER_SORT_SEGMENTED_MIN_ROWS = 128  # SortStable.cu: nsegments < 128 -> full sort
SAMPLER_BYTES_FLASHINFER = 14
SAMPLER_BYTES_TRITON = 14
FLASHINFER_SAMPLER_OPT_IN_SINCE = "0.11.2"
TRITON_TOP_K_TOP_P_SINCE = "0.17.0"

#: Besides the bytes per element, the V1 runner's sampler run holds hidden states
#: (tokens or rows x hidden x model dtype), by release (v1/worker/gpu_model_runner.py):
#: from 0.9.2 ``_dummy_run`` returns the forward's ``hidden_states`` and
#: ``hidden_states[logit_indices]`` (an indexed copy), ``profile_run`` keeps both, and
#: ``_dummy_sampler_run`` computes the logits from ``torch.rand_like(hidden_states)``: the whole
#: batch's plus two copies of the rows' (read in 0.9.2, 0.10.0, 0.10.1.1, 0.11.0, 0.17.0, 0.19.0,
#: 0.23.0, 0.26.0, 0.27.0, 0.30.0 and 0.33.0); 0.9.0 returns the indexed copy alone (the batch's
#: freed) and adds ``rand_like``: two copies of the rows'; 0.8.5 the indexed copy alone, no
#: ``rand_like``: one. 0.9.1 is not read (0.9.0's rule). V0's ``compute_logits`` prunes inside
#: the logits processor and frees the copy before sampling, the batch's hidden states held by
#: ``execute_model``; the V2 runner has a sampler run of its own (``memory_runner``). Past
#: 0.33.0: extrapolated. (since, whole batch held, row copies), newest first
V1_SAMPLER_HIDDEN = (("0.9.2", True, 2), ("0.9.0", False, 2), ("0.0", False, 1))
#: Triton top-k/top-p's buffer: ``apply_top_k_top_p_triton`` (v1/sample/ops/topk_topp_triton.py)
#: caches ``(min(next_power_of_2(min(num_sm, rows)), num_sm), vocab)`` float32 in
#: ``_TRITON_BUFFER_CACHE`` for the life of the process, so it is under the sampler run's peak
#: (read in 0.17.0, 0.19.0, 0.23.0, 0.26.0, 0.27.0, 0.30.0 and 0.33.0). 0.17.0 - 0.29.x route only
#: >= 8 rows to it (topk_topp_sampler.py ``HAS_TRITON and logits.shape[0] >= 8``), 0.30.0 on any;
#: 0.30.0 - 0.33.0's split-row top-p pipeline serves <= 64 rows without top-k, and the dummy run
#: sets top-k. ``num_sm`` is the board's (``gpus.sm_count``). Past 0.33.0: extrapolated.
TRITON_SAMPLER_MIN_ROWS = 8
TRITON_SAMPLER_ANY_ROWS_SINCE = "0.30.0"

#: vllm/envs.py ``VLLM_FUSED_MOE_CHUNK_SIZE`` default: fused_moe.py processes at most this
#: many tokens at a time, so its workspaces stop growing there. 0.6.4 - 0.11.2's value; the
#: budget takes the default by release from ``memory_moe.FUSED_MOE_CHUNK_BY_RELEASE`` (16384 in
#: 0.12.0 - 0.17.1, no chunking from 0.18.0).
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
#:   budget: with cuMem on, the connections its all-gather certainly makes (the ring, or NVLS
#:   where it may run: ``nccl.allgather_bytes``) are counted by ``budget.logits_allgather``
#:   for 0.10.0 - 0.24.0 (``memory_tp.LOGITS_ALLGATHER_TORCH_GROUP``) where the interconnect is
#:   known (the H100 TP 2 points 59, 66 (0.11.0) and 23 (0.12.0) record none: unchanged).
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
#: (first release, the torch it pins) from the wheels' METADATA ``Requires-Dist: torch==`` for the
#: releases ``TORCH_BY_RELEASE`` does not list: 0.6.4 - 0.7.3 pin 2.5.1 (read in 0.6.4,
#: 0.6.4.post1, 0.6.5, 0.6.6.post1, 0.7.0 - 0.7.3; 0.6.3.post1 pins 2.4.0), 0.8.0 - 0.8.5 pin 2.6.0
#: (0.8.0, 0.8.4, 0.8.5), 0.9.0 - 0.9.2 pin 2.7.0 (0.9.0, 0.9.2). [since, until) of each.
TORCH_PINS: tuple[tuple[str, str, str], ...] = (
    ("0.6.4", "0.8.0", "2.5.1"),
    ("0.8.0", "0.9.0", "2.6.0"),
    ("0.9.0", "0.10.0", "2.7.0"),
)


def torch_pin(v: tuple[int, ...] | None) -> str | None:
    """The torch release ``v`` pins (``TORCH_BY_RELEASE``, else ``TORCH_PINS``); None where
    neither says."""
    if v is None:
        return None
    for name, torch in TORCH_BY_RELEASE.items():
        if _release(name) == v:
            return torch
    for since, until, torch in TORCH_PINS:
        if _release(since) <= v < _release(until):
            return torch
    return None


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
#: The same sampler code and the same opt-in (``if envs.VLLM_USE_FLASHINFER_SAMPLER and
#: find_spec("flashinfer")``) in 0.6.3.post1, 0.6.5, 0.6.6, 0.7.0 and 0.7.3 (sampler.py and
#: envs.py of those wheels; "0" by default until 0.6.6, ``None`` when unset from 0.7.0), and the
#: dummy request's ``top_p=0.99, top_k=vocab - 1`` in their model_runner.py ``profile_run``.


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
    stopping a launch that would start; with the release unknown too, the sort (the
    conservative side, as for the other release rules; the bound spans the rest). ``v0``: the launch runs the V0 engine
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
    if v is None and installed is None:
        # no release known: the conservative side, as for the budget's other release rules
        # (the sort runs in V0, in a plain pip install before 0.11.1 and in 0.11.2 - 0.16.0);
        # the bound's release_unknown term spans the 14-byte samplers above it
        return "sort"
    return "sort" if installed is False else "flashinfer"


def sampler_bytes_per_element(kind: str, rows: int) -> int:
    """Bytes per (request x vocabulary) element at the dummy sampler run's peak (above;
    "v2-logits": the V2 runner's default pass, the logits alone, ``memory_runner``)."""
    if kind == "v2-logits":
        return SAMPLER_BYTES_V2_DEFAULT
    if kind == "flashinfer":
        return SAMPLER_BYTES_FLASHINFER
    if kind == "triton":
        return SAMPLER_BYTES_TRITON
    return SAMPLER_BYTES_NATIVE if rows >= SAMPLER_SORT_SEGMENTED_MIN_ROWS else SAMPLER_BYTES_NATIVE_FEW_ROWS


def v1_sampler_hidden(v: tuple[int, ...] | None) -> tuple[bool, int]:
    """(whether the whole batch's hidden states are held, copies of the rows' hidden states)
    under the V1 runner's sampler run (:data:`V1_SAMPLER_HIDDEN`; unknown: the newest)."""
    # the oldest span starts at 0.0: every release has one
    return next((whole, copies) for since, whole, copies in V1_SAMPLER_HIDDEN if v is None or v >= _release(since))


def triton_sampler_buffer_bytes(v: tuple[int, ...] | None, rows: int, vocab: int, sms: int) -> int:
    """Bytes of Triton top-k/top-p's cached buffer for ``rows`` dummy requests on a board of
    ``sms`` SMs (:data:`TRITON_SAMPLER_MIN_ROWS`): 0 where the rows take the sort."""
    if rows <= 0 or sms <= 0:
        return 0
    if rows < TRITON_SAMPLER_MIN_ROWS and (v is None or v < _release(TRITON_SAMPLER_ANY_ROWS_SINCE)):
        return 0
    programs = min(sms, rows)
    return min(1 << (programs - 1).bit_length(), sms) * vocab * 4


#: 0.18.0 - 0.26.x: ``Worker.determine_available_memory`` (v1/worker/gpu_worker.py) runs
#: ``GPUModelRunner.profile_cudagraph_memory`` inside ``memory_profiling`` unless the launch is
#: eager: it captures the first two graphs of every capture mode on a minimal KV cache, then
#: clears them (``CUDAGraphWrapper.clear_all_graphs``, ``_cleanup_profiling_kv_cache``), so what
#: those captures leave outside torch's allocator — the kernels the decode shapes load, lazily
#: (CUDA_MODULE_LOADING=LAZY), and the driver's graph state — is in the profile's non-torch
#: increase. Absent in the 0.17.0 wheel; inside the context in 0.18.0, 0.19.0, 0.23.0 and 0.26.0;
#: from 0.27.0 (read in 0.27.0, 0.27.1, 0.30.0, 0.33.0) the call follows the ``with`` block, its
#: memory outside the measure. The V2 runner's estimate captures nothing in 0.20 - 0.28
#: (``memory_runner.V2_NO_CUDAGRAPH_ESTIMATE``). The sizes are the driver's, not in vLLM's code
#: (``_memory.budget.NON_TORCH``). [since, until); past 0.33.0 extrapolated (after the block).
GRAPH_PROFILE_IN_BUDGET = ("0.18.0", "0.27.0")


def graph_profile_in_budget(v: tuple[int, ...] | None, *, eager: bool, v2_runner: bool | None = False) -> bool:
    """Whether the profile's non-torch figure holds the CUDA-graph estimate's captures
    (:data:`GRAPH_PROFILE_IN_BUDGET`); unknown release: yes (the larger reserve)."""
    if eager:
        return False
    if v is None:
        return True
    lo, hi = GRAPH_PROFILE_IN_BUDGET
    if not _release(lo) <= v < _release(hi):
        return False
    return not (v2_runner is True and v2_skips_cudagraph_estimate(v))


def logged_peak_holds_cudagraph_estimate(v: tuple[int, ...] | None) -> bool:
    """Whether this release's logged activation peak includes the subtracted CUDA-graph
    estimate (:data:`PEAK_LOG_HOLDS_CUDAGRAPH_ESTIMATE_SINCE`; unknown: no)."""
    return v is not None and v >= _release(PEAK_LOG_HOLDS_CUDAGRAPH_ESTIMATE_SINCE)


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


#: Before this release every launch runs V0 (memory_v0.runs_v0 decides 0.6.4 - 0.7.3 by
#: VLLM_USE_V1); kept for the callers that ask by release alone.
V0_RULES_BEFORE = V1_DEFAULT_SINCE
#: What V0's non-torch figure is measured from (worker/worker.py ``determine_num_available_blocks``).
#: 0.6.4.post1 (read in the wheel): after the profile run, ``non_torch_allocations =
#: (total - free) - torch.cuda.memory_stats()["allocated_bytes.all.current"]`` — device-wide
#: and from process start, so the CUDA context and cuBLAS handles (and whatever other processes
#: hold on the device) are inside the budget, not before a snapshot. 0.6.0 (read) takes
#: ``peak = init_gpu_memory - free`` against the free memory ``init_device`` measured after the
#: context existed, and so do 0.6.1, 0.6.2 and 0.6.3.post1 (read); 0.6.4 has the 0.6.4.post1
#: rule (read); 0.6.5 replaced it with PR 10511's baseline (``memory_profiling``, see
#: ``memory_v0``).
V0_NON_TORCH_FROM_PROCESS_START = ("0.6.4", "0.6.5")
#: the chunked-prefill tokens of a V0 launch from 0.6.5 (memory_v0.V0_CHUNKED_TOKENS_LATE)
V0_CHUNKED_TOKENS_SINCE_0_8 = 2048


def consumed_counts_allocator_cache(v: tuple[int, ...] | None) -> bool:
    """Whether this release's profiler counts torch's reserved-but-free blocks on top of the
    profile's peak (``CONSUMED_COUNTS_ALLOCATOR_CACHE_SINCE``). Unknown release: yes — the bound
    must hold for the newest code, which does."""
    return v is None or v >= _release(CONSUMED_COUNTS_ALLOCATOR_CACHE_SINCE)


def non_torch_from_process_start(v: tuple[int, ...] | None) -> bool:
    """Whether this release's profiler counts the CUDA context (and other processes' memory on
    the device) inside the KV budget (``V0_NON_TORCH_FROM_PROCESS_START``; unknown: no)."""
    lo, hi = V0_NON_TORCH_FROM_PROCESS_START
    return v is not None and _release(lo) <= v < _release(hi)


def batch_defaults(
    v: tuple[int, ...] | None,
    total_bytes: int,
    gpu_name: str | None,
    compute_capability: str | None,
    max_model_len: int | None = None,
    *,
    v0: bool | None = None,
    mla: bool = False,
    multimodal: bool = False,
    llm_class: bool = False,
) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) the OpenAI server picks when the launch sets
    neither — vllm/engine/arg_utils.py ``EngineArgs.get_batch_defaults``: >= 160 GiB of
    device memory 16384 / 1024 (from 0.28.0, :data:`BATCH_TIER_160_SINCE`); >= 70 GiB and not
    an A100 nor a GB10 8192 / 1024 (the GB10 clause from 0.33.0); else 2048 / 256.
    ``total_bytes`` is the device memory the defaults read: NVML's ``memory.total``
    (platforms/cuda.py ``NvmlCudaPlatform.get_device_total_memory``). A GB10 (DGX Spark)
    does not implement that query: before 0.33 the NVMLError reaches
    ``get_batch_defaults``'s ``except`` and the device memory counts as 0, the small tier
    (read in the 0.15.1 wheel; point 11 of tests/fixtures/memory logs 2048 tokens); 0.33
    falls back to torch's total and keeps cc 12.1 on the small tier. Pass 0 for a GB10
    before 0.33. A launch that runs V0 (``v0``, :func:`runs_v0`; None: every release before
    0.8.0) takes the V0 rule (:func:`v0_batch`), which depends on ``max_model_len`` and on
    whether the model is MLA or multimodal. ``llm_class``: the offline ``LLM`` class
    (``UsageContext.LLM_CLASS``, :data:`LLM_CLASS_TOKENS`), not the OpenAI server."""
    if v0 is None:
        v0 = v is not None and v < _release(V0_RULES_BEFORE)
    if v is not None and v0 and max_model_len:
        return v0_batch(max_model_len, v, mla=mla, multimodal=multimodal)
    gib = total_bytes / (1 << 30)
    name = (gpu_name or "").lower()
    tier_160 = v is None or v >= _release(BATCH_TIER_160_SINCE)
    offline = llm_class and (v is None or v >= _release(LLM_CLASS_TOKENS_SINCE))
    if tier_160 and gib >= 160:
        return 16384, 1024
    gb10 = (v is None or v >= _release(GB10_SMALL_TIER_SINCE)) and compute_capability == "12.1"
    if gib >= 70 and "a100" not in name and not gb10:
        return (LLM_CLASS_TOKENS[0] if offline else 8192), 1024
    return (LLM_CLASS_TOKENS[1] if offline else 2048), 256


#: ``EngineArgs.get_batch_defaults`` (vllm/engine/arg_utils.py) keys its token defaults by usage
#: context: the offline ``LLM`` class (``UsageContext.LLM_CLASS``) batches 16384 tokens on the
#: large tier and 8192 on the small one, where the OpenAI server takes 8192 / 2048; max_num_seqs
#: is the same for both (1024 / 256). Read in the 0.8.0, 0.8.5, 0.9.2, 0.10.1.1, 0.11.0, 0.15.1,
#: 0.19.0, 0.23.0 and 0.33.0 wheels (0.33.0's >= 160 GiB tier is 16384 for both); before 0.8.0
#: the V0 rule (:func:`v0_batch`) does not depend on it. Past 0.33.0: extrapolated.
LLM_CLASS_TOKENS = (16384, 8192)
LLM_CLASS_TOKENS_SINCE = "0.8.0"


# ---- the context window (read in 0.33.0) ---------------------------------------------------
# config/model.py ``ModelConfig.__post_init__`` splits ``--hf-overrides`` into flat keys,
# applied by ``config.update`` as the config is loaded (transformers_utils/config.py
# ``get_config``), and dict values, applied after: into a sub-config (a ``PreTrainedConfig``
# attribute: ``text_config``, ``vision_config``, ...) recursively, a dict merging into a
# dict (``_update_nested``); any other dict value replaces the attribute
# (``_apply_dict_overrides``). A callable form is not expressible on the command line.
# The window is then derived from ``hf_text_config`` (transformers_utils/
# model_arch_config_convertor.py ``derive_max_model_len_and_key``): the smallest of
# WINDOW_KEYS present, ``model_max_length`` replacing it when set; times the rope factor of
# every rope type but WINDOW_UNSCALED_ROPE (not for gemma3), in ``_get_and_verify_max_len``,
# which refuses a longer --max-model-len unless it is within the config's
# ``model_max_length`` or VLLM_ALLOW_LONG_MAX_MODEL_LEN is set. Not modelled: a
# tokenizer_config.json ``model_max_length`` (it only lowers the window) and
# --disable-sliding-window (the window then is at most the sliding window).
WINDOW_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
WINDOW_UNSCALED_ROPE = frozenset({"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"})
_SUBCONFIG_NOT = frozenset({"quantization_config", "rope_scaling", "rope_parameters"})


def _number(v: object) -> float | None:
    """A finite number (a length or a factor), else None."""
    import math

    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def apply_hf_overrides(doc: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """``doc`` (config.json) as vLLM sees it after ``--hf-overrides`` (a copy; ``doc``
    itself when there are none). A config.json dict counts as a sub-config when its name
    ends in ``_config`` (transformers' convention for sub-configs) and it is not one of
    the plain dict attributes (``quantization_config``)."""
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
            and key not in _SUBCONFIG_NOT
        ):
            _update_nested(current, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _update_nested(target: dict[str, Any], updates: dict[str, Any]) -> None:
    for key, value in updates.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _update_nested(target[key], value)
        else:
            target[key] = value


def _rope_dicts(text_config: dict[str, Any]) -> list[dict[str, Any]]:
    """The rope parameters, one dict per layer type when nested (``iter_rope_parameters``)."""
    rope = text_config.get("rope_parameters") or text_config.get("rope_scaling")
    if not isinstance(rope, dict) or not rope:
        return []
    if all(isinstance(v, dict) for v in rope.values()):
        return [v for v in rope.values() if v]
    return [rope]


def context_window(text_config: dict[str, Any]) -> tuple[int | None, int | None]:
    """(vLLM's derived window of a text config, its ``model_max_length`` if any): None
    when no length key is set (vLLM then assumes 2048, or takes --max-model-len as given)."""
    # (a length or factor that is not positive is a hostile config.json: as good as absent)
    found = [n for k in WINDOW_KEYS if (n := _number(text_config.get(k))) is not None and n > 0]
    if not found:
        return None, None
    derived = min(found)
    mml = _number(text_config.get("model_max_length"))
    mml = mml if mml is not None and mml > 0 else None
    if mml:
        derived = mml
    if "gemma3" not in str(text_config.get("model_type") or ""):
        factor: float = 1.0
        for rp in _rope_dicts(text_config):
            kind = rp.get("rope_type", rp.get("type"))
            if kind not in WINDOW_UNSCALED_ROPE:
                f = rp.get("factor", factor)
                n = _number(f)
                factor = 1.0 if f is None else (n if n is not None and n > 0 else factor)
        derived *= factor
    if derived > 1 << 40:
        return None, None  # a hostile config.json: no real model
    return int(derived), int(mml) if mml else None
