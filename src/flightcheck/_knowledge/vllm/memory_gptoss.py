"""gpt-oss in vLLM's memory profile: the MXFP4 MoE backend by release and GPU, what each
backend allocates for the experts' weights and in the profile run, and what the profile run
does not depend on (attention with sinks, the sliding window, ``max_model_len``).

Read in the wheels of 0.10.0 (no gpt-oss: ``model_executor/models/gpt_oss.py`` and
``layers/quantization/mxfp4.py`` first ship in 0.10.1), 0.10.1.1, 0.10.2, 0.11.0, 0.11.1,
0.11.2, 0.12.0 - 0.18.0 (``mxfp4.py`` ``get_mxfp4_backend``), 0.19.0 and 0.33.0
(``layers/fused_moe/oracle/mxfp4.py``). Past 0.33.0 the 0.33.0 rules are extrapolated.

**The backend** (``mxfp4.py`` ``Mxfp4MoEMethod._should_use_marlin`` in 0.10.1.1,
``get_mxfp4_backend`` 0.10.2 - 0.18.0, the oracle's priority list
``_get_priority_backends_for_gpt_oss`` in 0.19.0 / 0.33.0):

- compute capability below 9.0 (Ampere, Ada): Marlin in every release read.
- 9.x (Hopper): Marlin unless the OAI Triton kernels (``matmul_ogs``) run, which needs the
  ``triton_kernels`` package and torch >= 2.8. 0.10.1.1 pins torch 2.7.1 (its METADATA):
  Marlin. 0.10.2 - 0.11.2 pin torch 2.8.0 / 2.9.0 but ``triton_kernels`` is no dependency
  (``has_triton_kernels``: the optional package): Marlin or Triton, whichever the
  environment has — open (the Kaggle log of point 112 says "Using Marlin backend" on 0.11.2,
  issue 33155's 0.14.1 "Using Triton backend"). From 0.12.0 the wheel vendors
  ``vllm/third_party/triton_kernels`` (absent from 0.11.2's): Triton, unless
  ``VLLM_MXFP4_USE_MARLIN=1``. FlashInfer's SM90 path only with
  ``VLLM_USE_FLASHINFER_MOE_MXFP4_BF16=1`` (not modelled: its shapes are the Triton ones').
- 10.x (datacenter Blackwell): FlashInfer's TRT-LLM MXFP4 MoE where FlashInfer imports —
  an optional extra before 0.11.1 (``flashinfer-python ...; extra == "flashinfer"`` in the
  0.10.1.1 - 0.11.0 METADATA), a dependency from 0.11.1; without it Triton.
- 11.x / 12.x (Thor, GB10, consumer Blackwell): from 0.12.0 the Triton path is limited to
  ``(9, 0) <= cc < (11, 0)`` and 0.33.0 moves consumer Blackwell (family 120) behind Marlin:
  Marlin. Before 0.12.0 ``get_device_capability()[0] < 9`` is false there, so with
  ``triton_kernels`` installed Triton ran: open.

**The weights** (``create_weights`` and ``process_weights_after_loading``, 0.10.1.1 and
0.11.2): Marlin pads the experts at creation (hidden to 256, the per-rank intermediate to
128: "n % 256 == 0 and k % 128 == 0") and repacks into tensors of the padded shape — the
stored bytes x ``(round_up(hidden, 256) / hidden) x (round_up(inter, 128) / inter)``
(gpt-oss-120b: 60.8 GiB stored, 65.9 allocated; point 29 and 112 log 65.9651). Triton pads
the intermediate to 64 only (2880 already is), swizzles weights and scales with
``_swizzle_mxfp4`` and replaces ``layer.w13_weight`` / ``w2_weight`` by the swizzled
storage, but keeps ``layer.w13_weight_scale`` / ``w2_weight_scale`` while the swizzled
scales live in the precision config: the scales are held twice, and the biases become
float32. MXFP4 stores one E8M0 scale byte per 32 FP4 values (16 bytes): the scales are 1/17
of blocks + scales, so Triton holds ~18/17 of the stored expert bytes (gpt-oss-120b: 64.1
GiB against the 64.38 point 58 logs; the swizzled layouts' own padding is not derived).
FlashInfer (SM100) pads both to 256 (not fitted to a log).

**The profile run's MoE transient**, per token of ``max_num_batched_tokens``, model dtype:

- Marlin (``fused_marlin_moe.py``, 0.10.1.1 / 0.11.2 / 0.19.0): ``intermediate_cache13``
  of top_k x max(2N, K) and ``intermediate_cache2`` of top_k x N with N, K the *padded*
  intermediate / hidden, the whole batch at once (no chunking: ``M = hidden_states.size(0)``;
  0.10.1.1 - 0.12.0 call ``fused_marlin_moe`` directly from ``Mxfp4MoEMethod.apply``; 0.19.0's
  modular kernel allocates ``MarlinExperts.workspace_shapes`` with ``M_chunk = M_full``
  (modular_kernel.py ``_allocate_buffers``), its second workspace top_k x max(N, K): 1.4 %
  more than the direct path on gpt-oss, not modelled).
- Triton (``gpt_oss_triton_kernels_moe.py`` ``triton_kernel_fused_experts``, 0.10.1.1 /
  0.11.2; ``OAITritonExperts.workspace_shapes`` 0.19.0): ``matmul_ogs`` fuses SwiGLU into
  the first GEMM, so one top_k x N intermediate; the second GEMM scatters into the layer's
  output (``y=output_tensor``).
- FlashInfer: not derived (the generic fused_moe estimate applies).

**Not in the profile peak**: ``_dummy_run(max_num_tokens, is_profile=True)`` builds no
attention metadata unless ``force_attention`` or a FULL CUDA graph (gpu_model_runner.py,
0.10.1.1, 0.11.2, 0.19.0, 0.33.0), so the attention backends gpt-oss takes for its sinks
(FlashAttention 3 on Hopper, Triton ``TRITON_ATTN`` otherwise, FlashInfer on Blackwell)
run no kernel and size nothing by ``max_model_len`` there; their buffers are made by the
metadata builders with the KV cache, after the budget is fixed (``initialize_kv_cache`` calls
``initialize_attn_backend``, gpu_model_runner.py 0.10.1.1, 0.11.2, 0.19.0). The sliding-window layers
change the KV token count (``_memory.kv``), not the budget. ``max_model_len`` reaches the
peak only through the batch (:func:`batch_by_length`: without chunked prefill the batch is
the context). The peak is the batch's
(``max_num_batched_tokens``) MoE transient or the sampler's (``max_num_seqs`` x the
201,088-token vocabulary), whichever is larger.
"""

from __future__ import annotations

from flightcheck._knowledge.vllm._versions import _release
from flightcheck._knowledge.vllm.memory import FLASHINFER_SAMPLER_OPT_IN_SINCE, V1_DEFAULT_SINCE

#: mxfp4.py and gpt_oss.py first ship in 0.10.1 (absent from the 0.10.0 wheel)
MXFP4_MOE_SINCE = "0.10.1"
#: the wheel pins torch 2.8.0 from 0.10.2 (torch==2.7.1 in 0.10.1.1's METADATA)
TORCH_28_SINCE = "0.10.2"
#: vllm/third_party/triton_kernels ships in the wheel (0.12.0 on; absent in 0.11.2)
TRITON_KERNELS_VENDORED_SINCE = "0.12.0"
#: flashinfer-python a dependency, not an extra (0.11.1 METADATA; 0.11.0: extra)
FLASHINFER_REQUIRED_SINCE = "0.11.1"
#: Marlin's padding (create_weights): hidden to 256, the per-rank intermediate to 128
MARLIN_HIDDEN_ALIGN = 256
MARLIN_INTER_ALIGN = 128
#: the Triton path's (and the default CUDA branch's) intermediate padding (create_weights)
TRITON_INTER_ALIGN = 64
#: FlashInfer's TRT-LLM MXFP4 MoE pads both to 256 (create_weights, 0.10.1.1 / 0.11.2)
FLASHINFER_ALIGN = 256
#: one E8M0 scale byte per 32 FP4 values (16 bytes of blocks): scales / (blocks + scales)
MXFP4_SCALE_SHARE = 1 / 17

MARLIN, TRITON, FLASHINFER = "marlin", "triton", "flashinfer"


def _cc(compute_capability: str | None) -> tuple[int, int] | None:
    try:
        major, minor = (int(x) for x in (compute_capability or "").split(".")[:2])
    except ValueError:
        return None
    return major, minor


def mxfp4_backends(
    v: tuple[int, ...] | None,
    compute_capability: str | None,
    env: dict[str, str | None] | None = None,
) -> tuple[str, ...]:
    """The MXFP4 MoE backends this launch may run (module docstring), the likeliest first;
    more than one where the release leaves it to what the environment has installed
    (``triton_kernels``, FlashInfer). Unknown GPU or release: Marlin first, then Triton —
    Marlin's padded experts are the larger weights, so the point errs toward less KV."""
    cc = _cc(compute_capability)
    marlin_forced = ((env or {}).get("VLLM_MXFP4_USE_MARLIN") or "").strip().lower() in ("1", "true")
    if cc is None or v is None:
        return (MARLIN, TRITON)
    if marlin_forced or cc < (9, 0):
        return (MARLIN,)
    vendored = v >= _release(TRITON_KERNELS_VENDORED_SINCE)
    if (10, 0) <= cc < (11, 0):
        if v >= _release(FLASHINFER_REQUIRED_SINCE):
            return (FLASHINFER,)
        return (FLASHINFER, TRITON)
    if (9, 0) <= cc < (10, 0):
        if v < _release(TORCH_28_SINCE):
            return (MARLIN,)
        return (TRITON,) if vendored else (MARLIN, TRITON)
    # 11.x / 12.x: Triton is limited to 9.0 - 10.x from 0.12.0
    return (MARLIN,) if vendored else (MARLIN, TRITON)


def _round_up(x: float, m: int) -> float:
    return -(-x // m) * m


def expert_weight_factor(backend: str, hidden: int, inter: float) -> float:
    """How much the experts a backend holds exceed their stored bytes (module docstring):
    ``inter`` is this rank's share of the intermediate size."""
    if hidden <= 0 or inter <= 0:
        return 1.0
    if backend == TRITON:
        # the intermediate padded to 64; the swizzled scales beside the originals kept on the layer
        return (1.0 + MXFP4_SCALE_SHARE) * (_round_up(inter, TRITON_INTER_ALIGN) / inter)
    align_h, align_i = (
        (FLASHINFER_ALIGN, FLASHINFER_ALIGN) if backend == FLASHINFER else (MARLIN_HIDDEN_ALIGN, MARLIN_INTER_ALIGN)
    )
    return (_round_up(hidden, align_h) / hidden) * (_round_up(inter, align_i) / inter)


def moe_transient_per_token(backend: str, hidden: int, inter: float, top_k: int) -> float | None:
    """Elements (model dtype) one batched token's routed experts hold at the MoE's widest
    point in the profile run, for Marlin and Triton (module docstring); None for FlashInfer,
    whose workspaces are not derived (the generic fused_moe estimate applies)."""
    k = max(1, top_k)
    if backend == MARLIN:
        n = _round_up(inter, MARLIN_INTER_ALIGN)
        kk = _round_up(hidden, MARLIN_HIDDEN_ALIGN)
        return k * (max(2 * n, kk) + n)
    if backend == TRITON:
        return k * inter
    return None


def sampler_install_open(
    v: tuple[int, ...] | None, env: dict[str, str | None] | None = None, *, v0: bool = False
) -> bool:
    """Whether the V1 profile run's top-k/top-p sampler is decided by whether FlashInfer is
    importable, which the launch line does not say: 0.8 - 0.11.1 run FlashInfer's sampler when
    it imports and ``VLLM_USE_FLASHINFER_SAMPLER`` is unset, the PyTorch sort otherwise
    (v1/sample/ops/topk_topp_sampler.py ``TopKTopPSampler.__init__``, 0.10.1.1 and 0.11.0;
    opt-in from 0.11.2, ``vllm.FLASHINFER_SAMPLER_OPT_IN_SINCE``), and FlashInfer is an
    optional extra of those wheels (METADATA). With gpt-oss's 201,088-token vocabulary the two
    differ by 24 bytes x 1024 requests x 201,088 = 4.6 GiB (14 against 38 bytes an element,
    ``vllm.SAMPLER_BYTES_*``). V0 and a set variable decide it; unknown release: not this
    question (the bound's ``release_unknown`` spans the samplers)."""
    if v is None or v0:
        return False
    if ((env or {}).get("VLLM_USE_FLASHINFER_SAMPLER") or "").strip().lower() in ("0", "false"):
        return False  # set off: the sort, whatever is installed
    return _release(V1_DEFAULT_SINCE) <= v < _release(FLASHINFER_SAMPLER_OPT_IN_SINCE)


#: vllm/engine/arg_utils.py ``_set_default_args`` (read in 0.10.1.1, 0.10.2, 0.11.0): without
#: chunked prefill the default batch is ``max_model_len`` itself, and the default max_num_seqs is
#: capped by it; from 0.11.1 (read in 0.11.1, 0.11.2, 0.12.0, 0.19.0, 0.33.0) it is
#: ``max(max_model_len, default)``, and any default batch is capped at
#: ``max_num_seqs x max_model_len``. Before 0.10.1 not read (unchanged).
BATCH_BY_LENGTH_SINCE = "0.10.1"
BATCH_MAX_OF_LENGTH_SINCE = "0.11.1"


def batch_by_length(
    v: tuple[int, ...] | None,
    tokens: int,
    seqs: int,
    max_model_len: int | None,
    *,
    chunked_prefill: bool | None = None,
    tokens_given: bool = False,
    seqs_given: bool = False,
) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) once ``max_model_len`` has had its say (see
    above): how a long context enters the profile run's batch, and so its activation peak —
    with ``--no-enable-chunked-prefill`` (``chunked_prefill`` False) a 98,304-token context
    profiles 98,304 tokens at once. The launch's own ``--max-num-batched-tokens`` stands."""
    if v is None or tokens_given or not max_model_len or v < _release(BATCH_BY_LENGTH_SINCE):
        return tokens, seqs
    if v < _release(BATCH_MAX_OF_LENGTH_SINCE):
        if chunked_prefill is False:
            tokens = max_model_len
        if not seqs_given:
            seqs = min(seqs, tokens)
        return tokens, seqs
    if chunked_prefill is False:
        tokens = max(max_model_len, tokens)
    return min(seqs * max_model_len, tokens), seqs


def runs_mxfp4(v: tuple[int, ...] | None) -> bool:
    """Whether the release has the MXFP4 MoE method at all (unknown: assume so)."""
    return v is None or v >= _release(MXFP4_MOE_SINCE)
