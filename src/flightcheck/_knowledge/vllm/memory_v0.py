"""vLLM's V0 engine, release by release: which launches run it, the batch its profile run
sizes, and what its memory profiler counts inside the KV budget.

Read in the unpacked wheels of 0.6.1, 0.6.3.post1, 0.6.4, 0.6.4.post1, 0.6.5, 0.6.6, 0.7.0,
0.7.1, 0.7.3, 0.8.0, 0.8.4, 0.8.5, 0.9.0, 0.9.2, 0.10.0 and 0.10.1.1 (vllm/envs.py,
vllm/engine/arg_utils.py, vllm/config.py, vllm/worker/worker.py, vllm/utils.py,
vllm/model_executor/layers/logits_processor.py, vllm/distributed/parallel_state.py,
vllm/model_executor/layers/fused_moe/fused_moe.py). 0.11.0 has no V0 engine.

**Which engine runs.** ``VLLM_USE_V1`` first appears in 0.6.4 (envs.py, default "0"; absent in
0.6.3.post1) and stays "0" through 0.7.3: V0 runs unless the launch sets ``VLLM_USE_V1=1``
(the experimental V1 of those releases, whose own rules were not read: the V1 rules apply).
From 0.8.0 the default is "1" and ``EngineArgs._is_v1_supported_oracle`` falls back to V0
for compute capability below 8.0 (0.8.0 - 0.10.1.1; gone in 0.10.2) and GGUF
(``V1_UNSUPPORTED_QUANT``, 0.8.x only: absent in 0.9.0).

**The batch the profile run takes** (``worker/model_runner.py`` ``profile_run``: the
batched tokens spread over ``max_num_seqs`` dummy prompts, 256 by default): chunked prefill is
on by default only past 32K tokens (arg_utils.py ``use_long_context``), and then
``SchedulerConfig`` takes 512 tokens before 0.6.5 (0.6.1, 0.6.3.post1, 0.6.4.post1) and 2048
from 0.6.5 (0.6.5 - 0.10.1.1, ``_DEFAULT_MAX_NUM_BATCHED_TOKENS`` from 0.8.0); without it
``max(max_model_len, 2048)``, raised for a multimodal model to
``_MULTIMODAL_MODEL_MAX_NUM_BATCHED_TOKENS`` (4096 in 0.6.1 and 0.6.2, 5120 from 0.6.3).
Multimodal models never get chunked prefill by default in V0 (0.6.4.post1 - 0.10.1.1; 0.6.1's
scheduler applies the same floor). MLA models (DeepSeek V2/V3/R1): 0.7.1 - 0.7.3's
``VllmConfig.__post_init__`` turns chunked prefill off *after* the scheduler has sized its
tokens (2048 past 32K stays); from 0.8.0 ``_set_default_args_v0`` turns it off first, so an
MLA model profiles ``max(max_model_len, 2048)`` tokens. 0.7.0 has no MLA backend.

**What the profiler counts** (``Worker.determine_num_available_blocks``):

- 0.6.1 - 0.6.3.post1: ``init_gpu_memory - free`` after the profile, ``init_gpu_memory`` read
  in ``init_device`` after the CUDA context, before the distributed init.
- 0.6.4 - 0.6.4.post1: non-torch memory device-wide from process start (the CUDA context
  inside: ``memory.V0_NON_TORCH_FROM_PROCESS_START``).
- 0.6.5 - 0.6.6.post1 (PR 10511's ``memory_profiling``, vllm/utils.py): non-torch = ``(total -
  free) - baseline - weights - (allocated after - allocated before)``: *allocated* bytes, not
  reserved, so the caching allocator's blocks that stay reserved after the profile's
  ``empty_cache`` (segments a live block keeps: at most the profile's torch peak, what its
  freed tensors were carved from) count as non-torch too — its size is the allocator's state,
  not vLLM's code (:data:`V0_NON_TORCH_ALLOCATED`, a bound term).
- 0.7.0 - 0.10.1.1 (``MemorySnapshot``): non-torch = growth of ``(total - free) -
  torch.cuda.memory_reserved()`` since the baseline snapshot: the allocator's cache no longer
  counts.

In every V0 release the baseline (``init_gpu_memory`` / ``baseline_snapshot``) is taken in
``init_device`` *before* ``init_worker_distributed_environment`` (read in 0.6.5, 0.7.3, 0.8.0,
0.8.4, 0.8.5, 0.9.2, 0.10.0, 0.10.1.1): the TP group's pynccl communicator (made and warmed up
there) and custom all-reduce's IPC buffers are inside the budget. V0 gathers the logits to the
driver (logits_processor.py ``_gather_logits``: ``use_all_gather`` only on TPU, with
``VLLM_USE_V1`` or the external launcher) through ``torch.distributed.gather`` over the TP
device group (parallel_state.py ``GroupCoordinator.gather``, from 0.8 via
``DeviceCommunicatorBase.gather``), and the driver broadcasts the dummy batch's tensors over
the same group: torch's own NCCL communicator is created by the profile run, inside the budget
too — two communicators (``memory.TP_COMMUNICATORS_IN_BUDGET``), with every ring and tree
connected at init because vLLM sets NCCL_CUMEM_ENABLE=0 in every V0 release
(``memory.NCCL_CUMEM_OFF_UNTIL``: worker_base.py in 0.6.4.post1 - 0.6.6, vllm/__init__.py in
0.7.0 - 0.8.0, env_override.py from 0.8.4).

**fused_moe's workspaces** (fused_moe.py ``fused_experts_impl``): before 0.8.0 (0.6.5, 0.7.3)
three separate caches — ``intermediate_cache1`` (top_k x 2 x inter), ``intermediate_cache2``
(top_k x inter) and ``intermediate_cache3`` (top_k x hidden) per token; from 0.8.0 (0.8.0,
0.8.4, and V1 releases) caches 1 and 3 share one buffer of ``max(2 x inter, hidden)``.
"""

from __future__ import annotations

from flightcheck._knowledge.vllm._versions import _release
from flightcheck._knowledge.vllm.env import USE_V1

#: first release with ``VLLM_USE_V1`` (envs.py 0.6.4: ``bool(int(os.getenv(..., "0")))``;
#: absent in 0.6.3.post1): before it only V0 exists.
V1_OPT_IN_SINCE = "0.6.4"
#: first release whose ``VLLM_USE_V1`` defaults to "1" (envs.py 0.8.0; "0" in 0.7.3).
V1_DEFAULT_SINCE = "0.8.0"
V0_CC_FALLBACK_BEFORE = "0.10.2"
V0_GGUF_FALLBACK_BEFORE = "0.9.0"
V0_CC_BELOW = (8, 0)

#: the V0 batch rule (see above)
V0_LONG_CONTEXT = 32768
V0_CHUNKED_TOKENS = 512  # chunked prefill's tokens before 0.6.5
V0_CHUNKED_TOKENS_SINCE = "0.6.5"
V0_CHUNKED_TOKENS_LATE = 2048  # from 0.6.5 (config.py SchedulerConfig)
V0_MIN_TOKENS = 2048
V0_MULTIMODAL_TOKENS = 5120  # _MULTIMODAL_MODEL_MAX_NUM_BATCHED_TOKENS from 0.6.3
V0_MULTIMODAL_TOKENS_EARLY = 4096  # 0.6.1, 0.6.2
V0_MULTIMODAL_TOKENS_SINCE = "0.6.3"
V0_MAX_SEQS = 256
#: first release whose V0 defaults turn chunked prefill off for MLA before the scheduler
#: sizes its tokens (arg_utils.py ``_set_default_args_v0``, 0.8.0 - 0.10.1.1)
V0_MLA_UNCHUNKED_SINCE = "0.8.0"

#: [since, until): the profiler counts allocated (not reserved) torch bytes, so the caching
#: allocator's blocks left reserved after the profile count as non-torch (vllm/utils.py
#: ``memory_profiling`` of 0.6.5 and 0.6.6; ``MemorySnapshot`` with ``memory_reserved`` from 0.7.0)
V0_NON_TORCH_ALLOCATED = ("0.6.5", "0.7.0")

#: first release whose fused_moe shares ``intermediate_cache1`` and ``intermediate_cache3``
#: (fused_moe.py ``cache13``: absent in 0.7.3, present in 0.8.0)
FUSED_MOE_CACHE13_SINCE = "0.8.0"


def _env_on(env: dict[str, str | None] | None, name: str) -> bool | None:
    """A boolean variable as vLLM's envs.py reads it; None when unset or unreadable."""
    from flightcheck._knowledge import envread
    from flightcheck._knowledge.vllm.env import DECLARED

    return envread.given(DECLARED[name], env)


def runs_v0(
    v: tuple[int, ...] | None,
    compute_capability: str | None = None,
    quantization: str | None = None,
    env: dict[str, str | None] | None = None,
) -> bool:
    """Whether the launch runs vLLM's V0 engine (see above): every release before 0.8.0 unless
    ``VLLM_USE_V1=1`` (0.6.4 - 0.7.3), and a 0.8.0 - 0.10.1 launch that falls back to it
    (compute capability below 8.0; GGUF before 0.9.0; ``VLLM_USE_V1=0``). Unknown version:
    False; unknown compute capability: no fallback."""
    if v is None:
        return False
    use_v1 = _env_on(env, USE_V1)
    if v < _release(V1_DEFAULT_SINCE):
        return not (use_v1 and v >= _release(V1_OPT_IN_SINCE))
    if v >= _release(V0_CC_FALLBACK_BEFORE):
        return False
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


def v0_batch(
    max_model_len: int,
    v: tuple[int, ...] | None = None,
    *,
    mla: bool = False,
    multimodal: bool = False,
) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) of the V0 engine when the launch sets neither
    (the common case: CUDA, no sliding window, speculative model, LoRA or pooling; see above).
    ``v`` None takes the rule of the newest V0 releases."""
    late = v is None or v >= _release(V0_CHUNKED_TOKENS_SINCE)
    unchunked = max(max_model_len, V0_MIN_TOKENS)
    if multimodal:
        early = v is not None and v < _release(V0_MULTIMODAL_TOKENS_SINCE)
        return max(unchunked, V0_MULTIMODAL_TOKENS_EARLY if early else V0_MULTIMODAL_TOKENS), V0_MAX_SEQS
    if mla and (v is None or v >= _release(V0_MLA_UNCHUNKED_SINCE)):
        return unchunked, V0_MAX_SEQS
    if max_model_len > V0_LONG_CONTEXT:
        return (V0_CHUNKED_TOKENS_LATE if late else V0_CHUNKED_TOKENS), V0_MAX_SEQS
    return unchunked, V0_MAX_SEQS


def non_torch_counts_allocator_cache(v: tuple[int, ...] | None) -> bool:
    """Whether this release's profiler counts torch's reserved-but-unallocated blocks as
    non-torch memory (``V0_NON_TORCH_ALLOCATED``; unknown: no)."""
    lo, hi = V0_NON_TORCH_ALLOCATED
    return v is not None and _release(lo) <= v < _release(hi)


def fused_moe_cache13_shared(v: tuple[int, ...] | None) -> bool:
    """Whether fused_moe's first and third workspaces share one buffer (unknown: yes, the
    current code)."""
    return v is None or v >= _release(FUSED_MOE_CACHE13_SINCE)
