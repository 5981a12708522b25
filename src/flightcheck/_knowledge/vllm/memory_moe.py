"""vLLM's MoE, MLA and GPTQ terms of the profile run's transient peak, release by release.

What ``GPUModelRunner.profile_run`` (v1/worker/gpu_model_runner.py) exercises in a MoE layer:
``_dummy_run(max_num_batched_tokens)`` routes every dummy token through ``FusedMoE`` (``num_tokens
x top_k`` expert slots; the dummy tokens are identical, so they all pick the same experts, which
changes no workspace size below — each is sized by ``M x top_k``, not by the experts hit). What
the Triton experts allocate per call, read in the wheels:

- **direct** ``fused_experts_impl`` (model_executor/layers/fused_moe/fused_moe.py; the path of
  the unquantized and FP8 methods before 0.14.0 — unquantized_fused_moe_method.py /
  layer.py ``forward_cuda`` and quantization/fp8.py ``Fp8MoEMethod.apply`` call
  ``fused_experts`` in 0.9.2 - 0.13.0): ``cache13`` of ``M x top_k x max(N, K)`` and
  ``intermediate_cache2`` of ``M x top_k x N / 2`` (model dtype), ``M = min(tokens,
  VLLM_FUSED_MOE_CHUNK_SIZE)``, N = 2 x this rank's intermediate (gate and up), K = hidden; the
  output is written in place.
- **modular** ``FusedMoEModularKernel`` with ``TritonExperts`` (modular_kernel.py
  ``_allocate_buffers`` + fused_moe.py ``TritonExperts.workspace_shapes``; both methods build
  one from 0.14.0 — ``self.kernel`` in unquantized_fused_moe_method.py and fp8.py of 0.14.0,
  0.15.0, 0.16.0, 0.17.0, 0.19.0, 0.33.0): ``workspace1 (M, top_k, max(N / 2, K))`` shares
  one buffer with the ``(M_full, K)`` output when there is one chunk, and ``workspace2 (M,
  top_k, max(N, K))`` is separate — ``max(N, K)`` where the direct path has ``N / 2``: for every
  model whose hidden size exceeds the per-rank intermediate (all TP-split MoEs) the second
  buffer grows from ``N / 2`` to ``K`` per slot.
- **chunking**: ``VLLM_FUSED_MOE_CHUNK_SIZE`` (envs.py) is 32768 in 0.6.4 - 0.11.2, 16384 in
  0.12.0 - 0.17.1, and gone from 0.18.0 (0.18.0, 0.19.0, 0.33.0: no variable, ``fused_experts_impl``
  takes ``get_config_func(M)`` on the whole batch, the modular kernel one chunk).
- **the output**: written in place into the hidden states up to 0.11.0 (``fused_experts(..., inplace=True)``
  in layer.py / fp8.py of 0.9.2 and 0.10.0; 0.11.0 pins torch 2.8.0); from 0.11.1 a separate
  ``(M_full, K)`` tensor — utils.py ``disable_inplace()`` is ``is_torch_equal_or_newer("2.9")`` and the
  wheels pin torch 2.9.0 (0.11.1, 0.11.2, 0.12.0, 0.13.0) and later (0.14.0 - 0.20.0: 2.9.1 -
  2.11.0), so ``fused_experts`` / ``FusedMoEModularKernel.apply`` take
  ``torch.empty_like(hidden_states)``; 0.25.0, 0.27.0 and 0.33.0 allocate it unconditionally
  (modular_kernel.py ``empty_like`` / ``new_empty``).
- **FP8 activations** (``moe_kernel_quantize_input`` / ``per_token_group_quant_fp8``, fused_moe.py
  and utils.py, 0.9.2 - 0.33.0): with FP8 weights the Triton kernels take FP8 inputs — ``M x K``
  bytes (plus one fp32 scale per 128-wide group) before the first GEMM and ``M x top_k x N / 2``
  (plus scales) before the second, both alive with the workspaces.
- **DeepGEMM** (deep_gemm_moe.py ``DeepGemmExperts.workspace_shapes``, 0.11.0 - 0.19.0; used only
  where the ``deep_gemm`` package is installed, which no vLLM wheel requires — its METADATA
  names no deep_gemm): ``M_sum`` rows, each expert's share padded to its block — an
  install-dependent term this module does not add to the point (see ``deepgemm_extra_rows``).

MLA (DeepSeek V2/V3/R1, Kimi K2) in V1: the profile's dummy forward has no attention metadata
(``attn_metadata is None``: mla_attention.py / v1/attention/backends/mla/common.py return before
the kernels), so the prefill / decode kernels' own buffers are not exercised; the projections are
(``budget.forward_peak``). The chunked-prefill workspace (``MLACommonMetadataBuilder``:
``chunked_prefill_workspace``, ``min(max(8 x max_model_len, 4 x max_num_seqs x block_size),
cap)`` tokens, at least ``max_num_seqs x block_size``, of ``kv_lora_rank + qk_rope_head_dim``
model-dtype values; the cap 128 Ki tokens in 0.9.2 - 0.10.2, 64 Ki from 0.11.0 — read in 0.9.2,
0.10.0, 0.11.0, 0.15.0, 0.19.0, 0.33.0) is allocated when the metadata builders are made in
``initialize_kv_cache``, after ``determine_available_memory``: outside the KV budget, in the
slack (:func:`mla_prefill_workspace_bytes`). From 0.20.0 a minimal KV cache is initialized for the
CUDA-graph profile too (``_init_minimal_kv_cache_for_profiling``, 0.20.0 - 0.33.0), which builds
the same workspace once more inside that estimate; ``profile_cudagraph_memory`` (0.33.0 read) warms
the FULL-graph sizes with attention metadata (``force_attention``, ``profile_seq_lens = min(max_model_len,
max_num_batched_tokens // graph tokens)``), so the decode kernels' buffers (FlashMLA's split metadata)
land in the CUDA-graph estimate — the budget's ``cuda_graphs`` term — not in the activation peak.

GPTQ in V0 (0.6.4 wheel: model_executor/layers/quantization/gptq_marlin.py, kernels/marlin.py,
utils/marlin_utils.py): the Marlin workspace (``marlin_make_workspace``: ``output_size_per_partition
// GPTQ_MARLIN_MIN_THREAD_N (64) x GPTQ_MARLIN_MAX_PARALLEL (16)`` int32 per linear layer) is made in
``process_weights_after_loading``, inside "Loading model weights took": no profile term. Per call
``gptq_marlin_gemm`` (csrc/quantization/gptq_marlin/gptq_marlin.cu of the 0.6 series — the
``ScalarTypeTorchPtr`` signature; a public copy is search-index file 44978174, the .cu is not in the
wheel) allocates the output, ``a_tmp`` (M x K, model dtype) and, with ``use_fp32_reduce``
(``USE_FP32_REDUCE_DEFAULT = True`` in 0.6.4), ``c_tmp`` of ``determine_reduce_max_m(M) x N`` fp32 —
at most 64 x 16 = 1024 rows. At the profile's token counts the gate/up call's ``a_tmp`` plus output
(K + 2 x I / TP a token) stays below the activation step's 3 x I / TP that ``budget.forward_peak``
already takes, and ``c_tmp`` is at most 1024 x 2 x I / TP x 4 bytes (0.23 GiB for a 72B model at
TP 1): no term is added. What sizes a GPTQ launch's profile in V0 is the batch
(``max_num_batched_tokens``, from ``max_model_len`` when chunked prefill is off:
``vllm.batch_defaults``), not the kernel. (0.6.4 picks Machete on cc 9.0 before Marlin —
kernels/__init__.py ``_POSSIBLE_KERNELS`` — not read further.)

Which experts run: from 0.15.0 an oracle picks the backend (oracle/fp8.py ``select_fp8_moe_backend``,
``_get_priority_backends``; 0.27.0 read): block FP8 on cc 9.0 takes Triton for TP and FlashInfer CUTLASS
with EP; elsewhere FlashInfer TRT-LLM (cc 10.x), DeepGEMM (installed and on), CUTLASS and Triton in that
order, each with its own workspaces (experts/*.py ``workspace_shapes``; TRT-LLM's are inside FlashInfer).
The point takes Triton's; the bound's ``moe_backend`` term (``budget.moe_backend_span``) spans down to the
direct layout's smaller buffers.

Extrapolated past 0.33.0 (the newest release read).
"""

from __future__ import annotations

from flightcheck._knowledge.vllm._versions import _release
from flightcheck._knowledge.vllm.memory_v0 import fused_moe_cache13_shared

#: ``VLLM_FUSED_MOE_CHUNK_SIZE``'s default by release (envs.py): (first release, tokens; None =
#: no chunking). Read in 0.6.4, 0.7.3, 0.8.4, 0.8.5, 0.9.2, 0.10.0 - 0.11.2 (32768), 0.12.0 -
#: 0.17.1 (16384), 0.18.0, 0.19.0, 0.33.0 (no variable).
FUSED_MOE_CHUNK_BY_RELEASE: tuple[tuple[str, int | None], ...] = (
    ("0.0.0", 32768),
    ("0.12.0", 16384),
    ("0.18.0", None),
)
#: first release whose unquantized and FP8 MoE methods run the modular TritonExperts kernel
#: (0.13.0 calls fused_experts, 0.14.0 builds FusedMoEModularKernel)
MODULAR_TRITON_SINCE = "0.14.0"
#: first release whose MoE output is a separate (M, K) tensor rather than the input overwritten
#: (torch 2.9.0 pinned and ``disable_inplace`` present in the 0.11.1 wheel; 0.11.0: torch 2.8.0, in place)
MOE_OUT_OF_PLACE_SINCE = "0.11.1"
#: per_token_group_quant_fp8's group (the block FP8 checkpoints' 128 x 128 blocks)
FP8_GROUP = 128
#: MLA's chunked-prefill workspace cap in tokens: (first release, cap)
MLA_PREFILL_WORKSPACE_CAP: tuple[tuple[str, int], ...] = (("0.0.0", 128 * 1024), ("0.11.0", 64 * 1024))
#: the releases an unknown one spans for the MoE workspace layout (one of each rule's sides)
LAYOUT_RELEASES: tuple[tuple[int, ...], ...] = ((0, 11, 0), (0, 13, 0), (0, 14, 0), (0, 18, 0))


def _by_release(table: tuple[tuple[str, int | None], ...], v: tuple[int, ...] | None) -> int | None:
    out = table[0][1]
    for since, value in table:
        if v is not None and v >= _release(since):
            out = value
    return out


def fused_moe_chunk(v: tuple[int, ...] | None) -> int | None:
    """Tokens a fused_moe call takes at a time (None: all of them). Unknown release: none — the
    newest rule, whose workspaces are the largest."""
    if v is None:
        return None
    return _by_release(FUSED_MOE_CHUNK_BY_RELEASE, v)


def modular_triton(v: tuple[int, ...] | None) -> bool:
    """Whether the release runs the modular TritonExperts layout (unknown: yes, the newest)."""
    return v is None or v >= _release(MODULAR_TRITON_SINCE)


def moe_output_bytes(v: tuple[int, ...] | None, tokens: int, hidden: int, dtype_bytes: int = 2) -> int:
    """The MoE layer's separate ``(M, K)`` output where the release no longer writes it in place
    (``MOE_OUT_OF_PLACE_SINCE``; unknown: the newest). The Marlin MoE path does the same
    (fused_marlin_moe.py ``fused_marlin_moe``: ``torch.empty_like(hidden_states)`` unless in place and
    ``disable_inplace()`` is false, 0.11.2; 0.19.0 asserts ``not disable_inplace()`` for in place;
    experts/marlin_moe.py of 0.33.0 always allocates it)."""
    if v is None or v >= _release(MOE_OUT_OF_PLACE_SINCE):
        return tokens * hidden * dtype_bytes
    return 0


def moe_workspace_bytes(
    v: tuple[int, ...] | None,
    tokens: int,
    *,
    hidden: int,
    inter: float,
    top_k: int,
    dtype_bytes: int = 2,
    fp8: bool = False,
    modular: bool | None = None,
) -> int:
    """The Triton experts' buffers alive at one MoE layer's peak for ``tokens`` dummy tokens
    (``inter`` this rank's intermediate size): the workspaces by release (module docstring),
    the FP8 activation copies where the weights are FP8. ``modular`` overrides the release's
    layout (the bound's ``moe_backend`` span)."""
    chunk = fused_moe_chunk(v)
    m = tokens if chunk is None else min(tokens, chunk)
    n = 2 * inter
    k = max(1, top_k)
    if modular_triton(v) if modular is None else modular:
        one = m * k * max(n / 2, hidden)
        out = tokens * hidden
        ws13 = max(one, out) if m == tokens else one + out
        elems = ws13 + m * k * max(n, hidden)
    else:
        # before 0.8.0 cache1 and cache3 are separate buffers (memory_v0.fused_moe_cache13_shared)
        c13 = max(n, hidden) if fused_moe_cache13_shared(v) else n + hidden
        elems = m * k * (c13 + n / 2)
    # the output, alongside the input it no longer overwrites
    total = elems * dtype_bytes + moe_output_bytes(v, tokens, hidden, dtype_bytes)
    if fp8:
        # a1q (M x K) and a2q (M x top_k x N/2), one byte each, and their fp32 group scales
        q = m * hidden + m * k * n / 2
        total += q * (1 + 4 / FP8_GROUP)
    return int(total)


def deepgemm_extra_rows(m: int, top_k: int, local_experts: int, block_m: int = 128) -> int:
    """Rows DeepGEMM's contiguous layout adds over ``M x top_k`` (deep_gemm_utils.py
    ``compute_aligned_M``: every local expert's tokens padded to ``block_m``, the worst case
    ``local_experts x (block_m - 1)`` rounded up to a block). Install-dependent: not in the point."""
    slots = m * top_k + local_experts * (block_m - 1)
    return -(-slots // block_m) * block_m - m * top_k


def mla_prefill_workspace_bytes(
    v: tuple[int, ...] | None,
    *,
    max_model_len: int,
    max_num_seqs: int,
    block_size: int,
    head_size: int,
    dtype_bytes: int = 2,
    dcp: int = 1,
) -> int:
    """MLA's chunked-prefill workspace (module docstring): made after the KV budget is fixed, so
    it must fit in the slack, not the budget. ``head_size`` is kv_lora_rank + qk_rope_head_dim;
    decode context parallel enlarges it by 1 / dcp (0.11.0 on)."""
    cap = _by_release(MLA_PREFILL_WORKSPACE_CAP, v) or 64 * 1024
    tokens = min(max(8 * max_model_len, 4 * max_num_seqs * block_size), cap)
    tokens = max(tokens, max_num_seqs * block_size)
    if dcp > 1:
        tokens += tokens // dcp
    return tokens * head_size * dtype_bytes
