"""Which model runner vLLM's V1 engine profiles with, release by release, and what the V2
runner (vllm/v1/worker/gpu/model_runner.py) changes in the KV budget: no CUDA-graph estimate
before 0.29.0 and a dummy sampler that holds only the logits before 0.33.0.
"""

from __future__ import annotations

from flightcheck._knowledge.vllm._versions import _release

# ---- which runner (config/vllm.py ``VllmConfig.use_v2_model_runner``) --------------------------
#
# Read in the wheels of 0.20.0 - 0.26.0, 0.27.1 and 0.28.0 - 0.33.0:
#
# - 0.20.0 - 0.21.0: the V2 runner only with VLLM_USE_V2_MODEL_RUNNER=1 (envs.py: a bool,
#   default False).
# - 0.22.0 on: the variable is tri-state (``maybe_convert_bool``: unset = the default rule,
#   "1" / "0" force it), and ``_is_default_v2_model_runner_model`` picks V2 for a generative
#   model (``runner_type == "generate"``) by ``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES``:
#   - 0.22.0: {Qwen3ForCausalLM}, not MoE and not quantized;
#   - 0.23.0: {LlamaForCausalLM, MistralForCausalLM, Qwen3ForCausalLM}, not MoE, not quantized;
#   - 0.24.0: any of {Qwen3ForCausalLM, DeepseekV2ForCausalLM, Qwen2MoeForCausalLM,
#     GraniteMoeForCausalLM, LlamaForCausalLM, MistralForCausalLM}, quantized or not;
#   - 0.25.0 - 0.26.0: not hybrid, not attention-free, and a listed architecture or not MoE
#     (every dense model; the MoE ones listed: DeepseekV2, Qwen2Moe, GraniteMoe, and in 0.26
#     Inkling, LongcatFlashNgram);
#   - 0.27.1 - 0.28.0: the same, a hybrid model too when listed (0.27.1 adds KimiK3, 0.28.0
#     DeepseekV4; 0.27.0 not read, taken as 0.27.1);
#   - 0.29.0 - 0.33.0: every model (the default rule is gone).
# - Then ``_get_v2_model_runner_unsupported_features`` falls back to V1 for what V2 lacks
#   (prefill context parallelism, stock torch.compile, sequence parallelism, PP with the external
#   launcher, ngram / parallel-drafting EAGLE speculative decoding, dual batch overlap, elastic
#   EP, routed-experts capture, custom logits processors — by release; the speculative methods it
#   refuses change from release to release: ngram in 0.22 - 0.29, draft models and MLP speculators
#   in 0.30 - 0.32). A launch with speculative decoding is left open before 0.33.0
#   (:func:`v2_runner` None); 0.33.0 refuses only parallel drafting and heterogeneous-vocabulary
#   drafts, which this rule does not see (V2 is taken).
#
# ---- what V2 changes in the budget -----------------------------------------------------------
#
# - ``GPUModelRunner.profile_cudagraph_memory`` of the V2 runner returns 0 in 0.20.0 - 0.28.0
#   ("It is TBD whether we keep this API or not"): no CUDA-graph estimate comes off the budget,
#   whatever VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS says; the graphs are captured after the KV
#   cache, out of the slack. From 0.29.0 it estimates (``_profile_cudagraph_memory``).
# - ``_dummy_sampler_run`` computes the logits (model dtype) of the dummy requests and runs the
#   sampler on an ``InputBatch.make_dummy`` batch whose sampling states are the defaults
#   (temperature 0: greedy; top_k the vocabulary, top_p 1: none) — so
#   ``_requires_logits_processing`` is false, no FP32 copy is made and ``gumbel_sample`` takes
#   the argmax in its kernel (v1/worker/gpu/sample/sampler.py, states.py; "the sampler may skip
#   top_k, top_p, and logprobs", 0.27.1): the peak holds the logits, 2 bytes an element
#   (``SAMPLER_BYTES_V2_DEFAULT``). 0.33.0 adds a second pass with
#   ``SamplingParams.for_sampler_warmup()`` ("pays for the fp32 logits pipeline"): the V1
#   runner's 14 bytes an element are kept there.
# - Persistent per-request state the V2 runner allocates on the GPU after the worker's snapshot
#   (in ``load_model``, outside "Model loading took"): the penalties' ``output_bin_counts``
#   (max_num_reqs x vocab int32, "can be very large, taking up GBs") and ``prompt_bin_mask``
#   (max_num_reqs x ceil(vocab / 32) int32, v1/worker/gpu/sample/penalties.py) — in every wheel
#   0.26.0 - 0.33.0. The request states' ``all_token_ids`` (max_num_reqs x max_model_len int32,
#   v1/worker/gpu/states.py, "can be extremely large") are a ``StagedWriteTensor`` with
#   ``uva_instead_of_gpu``: pinned host memory the GPU maps (buffer_utils.py ``UvaBuffer``:
#   ``torch.zeros(..., pin_memory=True)`` and a device view), no device memory — always in 0.26.0,
#   0.27.0, 0.27.1 and 0.30.0; in 0.33.0 except for n-gram speculative decoding
#   (``use_dense_all_token_ids = speculative_config.use_ngram()``: "ngram", "ngram_gpu"), which
#   keeps them on the GPU (``V2_DENSE_TOKEN_IDS``). From 0.30.0 a host without pinned memory
#   (vLLM's ``is_pin_memory_available``: false under WSL) falls back to the GPU as well
#   (``uva_instead_of_gpu and is_uva_available()``) — not modelled, the facts do not say WSL.
#   From 0.27.0 the budget counts what is on the GPU:
#   utils/mem_utils.py ``memory_profiling`` takes ``total_consumed`` (the free-memory drop since
#   the snapshot) for the non-KV memory (absent in 0.26.0, present in 0.27.1 and 0.33.0); before,
#   only the profile's torch peak above what was allocated when it began, which leaves them out.
#   Counted: the two penalties tensors (``v2_persistent_bytes``, a fixed part of the reserve) and,
#   where they are on the GPU, ``all_token_ids`` (``v2_token_ids_bytes``: max_num_reqs x
#   max_model_len x 4 B, 0.5 GiB at 1024 requests of 131,072 tokens), which grows with
#   max_model_len — the length FC402 and FC403 solve for — so the memory model carries it as a cost
#   per token of length (``_memory.budget.length_cost``, ``KvShape.max_len``'s ``length_cost``).
# Past 0.33.0: extrapolated.
V2_DEFAULT_SINCE = "0.22.0"
#: from this release the V2 runner takes every speculative method but parallel drafting and
#: heterogeneous-vocabulary drafts
V2_SPEC_DECODE_SINCE = "0.33.0"
V2_ENV = "VLLM_USE_V2_MODEL_RUNNER"
# DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES by release, each built from the one before it
_V2_0_22 = frozenset({"Qwen3ForCausalLM"})
_V2_0_23 = _V2_0_22 | {"LlamaForCausalLM", "MistralForCausalLM"}
_V2_0_25 = frozenset({"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"})
_V2_0_24 = _V2_0_23 | _V2_0_25
_V2_0_26 = _V2_0_25 | {"InklingForCausalLM", "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM"}
_V2_0_27 = _V2_0_26 | {"KimiK3ForConditionalGeneration"}
_V2_0_28 = _V2_0_27 | {"DeepseekV4ForCausalLM"}
#: (first release, its default architectures, the rule that reads them: see above)
V2_DEFAULT_RULES: tuple[tuple[str, frozenset[str], str], ...] = (
    ("0.22.0", _V2_0_22, "listed-dense-unquantized"),
    ("0.23.0", _V2_0_23, "listed-dense-unquantized"),
    ("0.24.0", _V2_0_24, "listed"),
    ("0.25.0", _V2_0_25, "listed-or-dense"),
    ("0.26.0", _V2_0_26, "listed-or-dense"),
    ("0.27.0", _V2_0_27, "listed-or-dense; hybrid if listed"),
    ("0.28.0", _V2_0_28, "listed-or-dense; hybrid if listed"),
    ("0.29.0", frozenset(), "all"),
)
#: the V2 runner subtracts no CUDA-graph estimate in [since, until)
V2_NO_CUDAGRAPH_ESTIMATE = ("0.20.0", "0.29.0")
#: the V2 runner's dummy sampler holds only the logits before this release
V2_SAMPLER_WARMUP_PASS_SINCE = "0.33.0"
SAMPLER_BYTES_V2_DEFAULT = 2
#: the first release whose budget counts the V2 runner's persistent request state
V2_PERSISTENT_COUNTED_SINCE = "0.27.0"
#: (first release, speculative methods) that keep ``all_token_ids`` on the GPU (see above)
V2_DENSE_TOKEN_IDS = ("0.33.0", frozenset({"ngram", "ngram_gpu"}))


def v2_runner(
    v: tuple[int, ...] | None,
    *,
    architectures: tuple[str, ...],
    moe: bool,
    quantized: bool,
    hybrid: bool = False,
    env: dict[str, str | None] | None = None,
    speculative: bool = False,
) -> bool | None:
    """Whether the V1 engine of release ``v`` profiles with the V2 model runner (see above):
    None where it cannot be decided (release unknown, or speculative decoding, which V2 may
    not support)."""
    if v is None:
        return None
    forced = (env or {}).get(V2_ENV)
    if forced is not None and forced.strip().lower() in ("1", "true", "0", "false"):
        return forced.strip().lower() in ("1", "true")
    if v < _release(V2_DEFAULT_SINCE):
        return False
    if speculative and v < _release(V2_SPEC_DECODE_SINCE):
        return None
    _since, archs, rule = V2_DEFAULT_RULES[0]
    for row in V2_DEFAULT_RULES:
        if v >= _release(row[0]):
            _since, archs, rule = row
    listed = any(a in archs for a in architectures)
    if rule == "all":
        return True
    if rule == "listed-dense-unquantized":
        return listed and not moe and not quantized
    if rule == "listed":
        return listed
    if rule == "listed-or-dense; hybrid if listed":
        return listed or (not hybrid and not moe)
    return not hybrid and (listed or not moe)


def v2_skips_cudagraph_estimate(v: tuple[int, ...] | None) -> bool:
    """Whether the V2 runner of release ``v`` subtracts no CUDA-graph estimate."""
    lo, hi = V2_NO_CUDAGRAPH_ESTIMATE
    return v is not None and _release(lo) <= v < _release(hi)


def v2_sampler_holds_logits_only(v: tuple[int, ...] | None) -> bool:
    """Whether the V2 runner's dummy sampler run holds only the logits (before 0.33.0)."""
    return v is not None and v < _release(V2_SAMPLER_WARMUP_PASS_SINCE)


def v2_persistent_bytes(v: tuple[int, ...] | None, seqs: int, vocab: int) -> int:
    """The V2 runner's per-request penalties state inside the budget (see above; the
    max_model_len-long ``all_token_ids`` left out): 0 before 0.27.0 or with the release unknown."""
    if v is None or v < _release(V2_PERSISTENT_COUNTED_SINCE):
        return 0
    return seqs * 4 * (vocab + -(-vocab // 32))


def v2_token_ids_on_gpu(v: tuple[int, ...] | None, speculative_method: str | None = None) -> bool:
    """Whether the V2 runner keeps ``all_token_ids`` in device memory rather than pinned host
    memory (``V2_DENSE_TOKEN_IDS``; see above): 0.33.0 on with n-gram speculative decoding."""
    since, methods = V2_DENSE_TOKEN_IDS
    return v is not None and v >= _release(since) and speculative_method in methods


def v2_token_ids_bytes(
    v: tuple[int, ...] | None, seqs: int, max_model_len: int, speculative_method: str | None = None
) -> int:
    """The V2 runner's ``all_token_ids`` inside the budget (max_num_reqs x max_model_len int32,
    where they are on the GPU, from 0.27.0; see above): 0 in pinned host memory, before 0.27.0
    or with the release unknown."""
    if v is None or v < _release(V2_PERSISTENT_COUNTED_SINCE) or not v2_token_ids_on_gpu(v, speculative_method):
        return 0
    return seqs * max_model_len * 4
