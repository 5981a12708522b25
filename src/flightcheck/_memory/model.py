"""The memory model of one launch: weights, KV and budget per rank, and what-ifs.

Built once per evaluation from the checkpoint (grouped headers + config) and the facts
(GPU memory, engine version); ``fit()`` re-evaluates any layout / KV dtype / length
cheaply, which the FC4xx suggestions use.
"""

from __future__ import annotations

from typing import Any

import msgspec

from flightcheck._knowledge import engines, nccl, sglang, vllm
from flightcheck._memory.bound import Term, bound_terms
from flightcheck._memory.budget import (
    Batch,
    Communication,
    GiB,
    Interconnect,
    act_quant_span,
    communication,
    default_reserve,
    default_utilization,
    encoder_dp,
    length_cost,
    logits_allgather,
    moe_backend_span,
    non_torch_point,
    pre_snapshot,
    profile_peak,
    release,
    runner_span,
    sampler_install_span,
    sampler_span,
    usable_bytes,
    v0_peak,
)
from flightcheck._memory.config import ModelConfig
from flightcheck._memory.fit import Fit
from flightcheck._memory.kv import Capacity, KvShape, capacity, kv_bytes, kv_shape
from flightcheck._memory.weights import (
    DraftTally,
    Layout,
    Tally,
    draft_per_rank,
    encoder_replicated,
    largest_stage,
    mtp_per_rank,
    per_rank,
    stage_layers,
)
from flightcheck._vocabulary.engine import MemoryRules
from flightcheck._vocabulary.intent import AUTO


class MemoryModel(msgspec.Struct):
    """See the module docstring. ``error`` says why nothing could be computed."""

    engine: str = "vllm"
    layout: Layout = msgspec.field(default_factory=Layout)
    kv_cache_dtype: str = "auto"
    requested_len: int | None = None  # the launch's --max-model-len (None: default, -1: auto)
    cfg: ModelConfig | None = None
    tally: Tally | None = None
    total: int | None = None  # what CUDA reports of the smallest GPU used (NVML total - reserved)
    memory_reserved: int | None = None  # the driver's reservation taken off ``total``
    used_by_others: int | None = None  # memory already in use on the busiest GPU used
    nvlink: bool | None = None  # the GPUs used talk over NVLink / NVSwitch
    #: what NCCL's topology search sees of them (``budget.communication``)
    interconnect: Interconnect | None = None
    nccl_env: dict[str, str | None] = msgspec.field(default_factory=dict)  # NCCL_* of the launch
    batch: Batch = msgspec.field(default_factory=Batch)
    kv_cache_memory_bytes: int | None = None  # --kv-cache-memory-bytes (vLLM)
    cpu_offload_bytes: int = 0  # --cpu-offload-gb, per rank
    gpu_name: str | None = None
    engine_version: str | None = None
    utilization: float | None = None
    utilization_source: str = ""
    utilization_set: bool = False  # by the launch: kept for every layout tried
    reserve: int | None = None
    reserve_parts: dict[str, int] = msgspec.field(default_factory=dict)
    reserve_source: str = ""
    reserve_set: bool = False  # --reserve-gib: kept for every layout tried
    online_fp8: bool = False
    eager: bool = False
    load_bytes: int | None = None
    throughput: dict[str, Any] | None = None
    error: str | None = None
    crash: str | None = None  # a flightcheck bug while building it: the checks say "unknown"
    gpu_error: str | None = None  # why GPU memory is unknown
    #: GPUs on this node (NVML's count): a suggested TP stays within it, PP goes across nodes
    node_gpus: int | None = None
    notes: list[str] = msgspec.field(default_factory=list)
    #: how the weights were counted when not from every shard's header (a partial checkpoint).
    weights_source: str | None = None
    #: SGLang: the launch's terms of mem_fraction_static's default (chunked prefill, attention
    #: DP, DeepEP, CUDA graphs off, --max-running-requests; ``_knowledge.sglang.fraction_options``)
    fraction_opts: dict[str, Any] = msgspec.field(default_factory=dict)
    #: SGLang: what a multimodal model's KV budget loses (``_knowledge.sglang.mm_reservation_bytes``)
    mm_reserved: int = 0
    #: SGLang: the attention backends it picks for this model on the GPU used
    #: (``_knowledge.sglang.attention_backends``; None: vLLM, or the compute capability unknown)
    sglang_attention: sglang.AttentionChoice | None = None
    #: vLLM: MTP layers of the target's own checkpoint the launch drafts with
    #: (``--speculative-config`` method ``mtp``, ``_knowledge.vllm.speculative``): their weights
    #: and KV cache layers sit on the last PP stage's ranks (gpu_model_runner.py: the drafter is
    #: created only ``if self.speculative_config and get_pp_group().is_last_rank``); 0: none.
    mtp_layers: int = 0
    #: the resolved speculative decoding (``SpecDecode.as_dict``), for the report
    speculative: dict[str, Any] | None = None
    #: vLLM: a separate draft checkpoint the launch drafts with (EAGLE / EAGLE-3 /
    #: draft_model), read and reduced (``weights.draft_tally``), and its config.json; like
    #: MTP layers, its weights, buffers and KV layers sit on the last PP stage's ranks
    draft: DraftTally | None = None
    draft_cfg: ModelConfig | None = None
    #: ``draft_tensor_parallel_size: 1`` with a larger target TP: the whole draft on every
    #: rank (else it follows the layout's TP, as ``_verify_and_get_draft_tp`` defaults it)
    draft_tp_one: bool = False

    # ------------------------------------------------------------------ what-ifs

    @property
    def _rules(self) -> MemoryRules:
        """The engine's memory rules (``_knowledge/<engine>/engine.py``)."""
        return engines.get(self.engine).memory

    @property
    def max_model_len(self) -> int | None:
        """The length the launch asks for (model default resolved; None for auto or unknown)."""
        if self.requested_len == AUTO:
            return None
        if self.requested_len is not None:
            return self.requested_len
        if self.cfg is not None and self._rules.derived_context:
            return self.cfg.derived_context  # configs/model_config.py: never None (2048 at worst)
        return self.cfg.max_position if self.cfg else None

    @property
    def attn_dp(self) -> int:
        """SGLang's attention-DP size (1: off)."""
        return int(self.fraction_opts.get("attn_dp", 1))  # only an engine with attention DP sets it

    def free_before_load(self) -> int | None:
        """SGLang's ``pre_model_load_memory`` estimate: the smallest GPU's memory less what
        other processes hold and the CUDA context / communicators allocated by the
        distributed init (distributed/bootstrap.py ``measure_pre_model_load_memory``)."""
        if self.total is None:
            return None
        return self.total - (self.used_by_others or 0) - sum(self.pre_snapshot().values())

    @property
    def mxfp4_backend(self) -> str:
        """The MXFP4 MoE backend whose experts the weights are counted for: vLLM's likeliest
        for the release and GPU (``Batch.mxfp4_backend``, ``vllm.mxfp4_backends``), else
        Marlin's padded shapes (the larger)."""
        if self._rules.reserve != "profile":
            return "marlin"
        return self.batch.mxfp4_backend or "marlin"

    def stages(self, layout: Layout | None = None, mxfp4_backend: str | None = None) -> list[dict[str, float]]:
        assert self.cfg is not None and self.tally is not None
        lay = layout or self.layout
        backend = mxfp4_backend or self.mxfp4_backend
        out = per_rank(self.tally, self.cfg, lay, online_fp8=self.online_fp8, mxfp4_backend=backend)
        if lay.tp > 1 and self._rules.encoder_data_parallel and encoder_dp(self.cfg, self.batch):
            encoder_replicated(out, self.tally, lay, online_fp8=self.online_fp8)
        if self.mtp_layers:
            out[-1]["mtp_draft"] = mtp_per_rank(self.tally, self.cfg, lay, self.mtp_layers, online_fp8=self.online_fp8)
            # the proposer's persistent buffers, allocated with the drafter before the profile
            # run (vllm/v1/spec_decode/llm_base_proposer.py ``SpecDecodeBaseProposer.__init__``):
            # ``hidden_states`` and ``inputs_embeds``, max_num_batched_tokens x hidden in the
            # model dtype each (the int32/int64 index buffers beside them are a few hundred KiB)
            out[-1]["mtp_buffers"] = float(2 * self.batch.tokens * self.cfg.hidden * self.cfg.dtype_bytes)
        if self.draft is not None and self.draft_cfg is not None:
            parts, _ = self.draft_parts(lay)
            out[-1].update(parts)
            # the same proposer buffers, at the draft's hidden size (llm_base_proposer.py:
            # ``draft_model_config.get_hidden_size()``), in the target's dtype
            out[-1]["draft_buffers"] = float(2 * self.batch.tokens * self.draft_cfg.hidden * self.cfg.dtype_bytes)
        return out

    def draft_tp(self, layout: Layout | None = None) -> int:
        """The separate draft's TP on ``layout`` (1, or the target's)."""
        return 1 if self.draft_tp_one else (layout or self.layout).tp

    def draft_parts(self, layout: Layout | None = None) -> tuple[dict[str, float], dict[str, str]]:
        """The separate draft's bytes per rank by part, and how its embeddings / head count
        (``weights.draft_per_rank``)."""
        assert self.cfg is not None and self.draft is not None and self.draft_cfg is not None
        lay = layout or self.layout
        return draft_per_rank(
            self.draft,
            self.draft_cfg,
            self.draft_tp(lay),
            lay.pp,
            self.cfg.hidden,
            self.cfg.vocab,
            self.cfg.dtype_bytes,
        )

    def draft_kv(self, layout: Layout | None = None, kv_dtype: str | None = None) -> KvShape | None:
        """The separate draft's KV demand on one rank of the last stage (None: no draft).
        Its attention layers join the static forward context after the target's
        (llm_base_proposer.py ``load_model``: ``draft_attn_layer_names``), so
        gpu_model_runner.py ``get_kv_cache_spec`` gives each a spec of the draft's own heads
        at the draft's TP and the launch's --kv-cache-dtype (the draft shares the cache
        config), and the unified allocator pages them with the target's: their bytes per
        token add to the target's (v1/core/kv_cache_utils.py ``get_kv_cache_configs``)."""
        if self.draft is None or self.draft_cfg is None:
            return None
        lay = layout or self.layout
        dc = self.draft_cfg
        return kv_shape(dc, range(dc.layers), self.draft_tp(lay), self.draft_kv_dtype(kv_dtype), lay.dcp)

    def draft_kv_dtype(self, kv_dtype: str | None = None) -> str:
        """The KV cache dtype of the draft's layers (MTP or separate): the speculative
        config's ``kv_cache_dtype`` when it sets one, else the target's (``kv_dtype``, a
        what-if, or the launch's)."""
        own = (self.speculative or {}).get("kv_cache_dtype")
        return own if isinstance(own, str) else (kv_dtype or self.kv_cache_dtype)

    def weights(self, layout: Layout | None = None) -> float:
        """Bytes the busiest rank holds."""
        return largest_stage(self.stages(layout))[1]

    def kv(self, layout: Layout | None = None, kv_dtype: str | None = None, stage: int = 0) -> KvShape:
        assert self.cfg is not None
        lay = layout or self.layout
        layers = stage_layers(self.cfg.layers or 1, lay.pp)[stage]
        # SGLang with attention DP: each attention-TP group of tp / attn_dp ranks holds the KV
        # heads (srt/layers/dp_attention.py: attention TP size = tp_size // attn_dp_size)
        tp = lay.tp // self.attn_dp if self.attn_dp > 1 and lay.tp % self.attn_dp == 0 else lay.tp
        shape = kv_shape(self.cfg, layers, tp, kv_dtype or self.kv_cache_dtype, lay.dcp)
        if self.mtp_layers and stage == min(lay.pp, max(1, self.cfg.layers)) - 1:
            # Each MTP layer's attention is one more full-attention layer in the static forward
            # context, so gpu_model_runner.py ``get_kv_cache_spec`` gives it a KV cache spec of
            # the target's shape (same heads / latent, same --kv-cache-dtype unless the
            # speculative config sets one) and the unified allocator pages it with the target's
            # full-attention layers: its bytes per token add to theirs.
            per = kv_shape(self.cfg, range(0), tp, self.draft_kv_dtype(kv_dtype)).per_layer
            n = self.mtp_layers
            shape = msgspec.structs.replace(
                shape, full=shape.full + n * per, n_full=shape.n_full + n, per_layer=shape.per_layer or per
            )
        if self.draft is not None and stage == min(lay.pp, max(1, self.cfg.layers)) - 1:
            d = self.draft_kv(lay, kv_dtype)
            if d is not None:
                shape = msgspec.structs.replace(
                    shape,
                    full=shape.full + d.full,
                    sliding=shape.sliding + d.sliding,
                    window=max(shape.window, d.window),
                    fixed=shape.fixed + d.fixed,
                    n_full=shape.n_full + d.n_full,
                    n_sliding=shape.n_sliding + d.n_sliding,
                    per_layer=shape.per_layer or d.per_layer,
                )
        return shape

    def kv_checked_whole(self, layout: Layout | None = None) -> bool:
        """Whether the engine checks one max_model_len sequence's KV for the whole model (every
        PP stage's layers) against each worker's budget, the smallest binding: vLLM 0.14 - 0.16
        with PP > 1 (``vllm.PP_KV_CHECK_WHOLE_MODEL``); otherwise each stage's own layers."""
        lay = layout or self.layout
        return lay.pp > 1 and self._rules.pp_kv_check_whole_model(release(self.engine_version))

    def kv_checked(self, layout: Layout | None = None, kv_dtype: str | None = None, stage: int = 0) -> KvShape:
        """The KV demand the engine's one-sequence check uses on ``stage`` (see
        ``kv_checked_whole``)."""
        assert self.cfg is not None
        lay = layout or self.layout
        if not self.kv_checked_whole(lay):
            return self.kv(lay, kv_dtype, stage)
        return _merged([self.kv(lay, kv_dtype, i) for i in range(len(stage_layers(self.cfg.layers or 1, lay.pp)))])

    def fit(
        self,
        layout: Layout | None = None,
        kv_dtype: str | None = None,
        max_len: int | None = None,
        utilization: float | None = None,
    ) -> Fit | None:
        """The budget of the binding PP stage (the one with the least room), or None when
        GPU memory is unknown."""
        if self.total is None or self.cfg is None or self.tally is None:
            return None
        lay = layout or self.layout
        default_util, reserve = self._budget(lay)
        util = utilization or default_util
        if self._rules.budget == "free":
            usable = int(util * max(0, self.free_before_load() or 0))
        else:
            usable = usable_bytes(self.total, util)
        length = self.max_model_len if max_len is None else max_len
        worst: Fit | None = None
        override = self.kv_cache_memory_bytes if self._rules.kv_bytes_override else None
        stages = self.stages(lay)
        shapes = [self.kv(lay, kv_dtype, i) for i in range(len(stages))]
        # each stage allocates its own layers (``shape``, the token capacity), but the check
        # may be of the whole model's KV (``kv_checked_whole``)
        whole = _merged(shapes) if self.kv_checked_whole(lay) and len(shapes) > 1 else None
        terms = self.bound_terms(lay) if override is None else {}
        below, above = float(sum(t.below for t in terms.values())), float(sum(t.above for t in terms.values()))
        # what the engine holds per token of max_model_len (the V2 runner's all_token_ids,
        # budget.length_cost) is the Fit's to carry: it comes off the KV budget at the length
        # evaluated and the longest length that fits pays it per token, but it is no part of the
        # room for the weights (none with a fixed KV budget or --reserve-gib)
        cost = (
            0
            if (override is not None or self.reserve_set or self._rules.reserve != "profile")
            else length_cost(self.batch, (self.speculative or {}).get("method"))
        )
        at = length if length is not None else self.batch.max_model_len
        for i, stage in enumerate(stages):
            w = max(0.0, sum(stage.values()) - self.cpu_offload_bytes)
            shape = shapes[i]
            checked = whole or shape
            need = checked.bytes_for(length) if length else 0.0
            f = Fit(
                self.total, util, usable, reserve, w, need, length, 0, i, shape, override, below, above, cost, at or 0
            )
            f = msgspec.structs.replace(f, max_model_len_fit=f.longest(checked, f.kv_budget))
            if worst is None or (f.fits, f.max_model_len_fit, -f.weights) < (
                worst.fits,
                worst.max_model_len_fit,
                -worst.weights,
            ):
                worst = f
        return worst

    def _budget(self, layout: Layout) -> tuple[float, int]:
        """(utilization, reserve) on ``layout``: the launch's own, or for another layout the
        engine's defaults recomputed for it (SGLang's fraction and the activation reserve
        depend on TP and PP) unless the launch set them."""
        assert self.cfg is not None and self.total is not None
        if layout == self.layout:
            return self.utilization or 0.9, self.reserve or 0
        util = (
            self.utilization
            if self.utilization_set
            else default_utilization(
                self.engine, self.engine_version, self.total, layout, mla=self.cfg.mla, fraction_opts=self._opts()
            )[0]
        )
        reserve = (
            self.reserve
            if self.reserve_set
            else default_reserve(
                self.cfg, layout, self.engine, eager=self.eager, batch=self.batch, mm_reserved=self.mm_reserved
            )[0]
            + self.comm_in_reserve(layout)
            + self.fusion_workspace(layout)[1]
        )
        return util or 0.9, reserve or 0

    def _opts(self) -> dict[str, Any]:
        """SGLang's fraction terms for this model (the launch's, and a vision model's)."""
        opts = dict(self.fraction_opts)
        if self.cfg is not None and self.cfg.vision is not None:
            opts["vision"] = self.cfg.vision
            if (
                not opts.get("prefill_locked")
                and not set(self.cfg.outer_architectures) & sglang.MULTIMODAL_PREFILL_GRAPH_ARCHS
            ):
                opts["prefill_graphs"] = False  # cuda_graph_hook.py: "multimodal model"
        return opts

    def sglang_pool(self, fit: Fit | None = None) -> dict[str, int] | None:
        """SGLang's KV pool for this launch (tokens), the longest request it serves and the
        request-to-token table it allocates outside mem_fraction_static (see
        ``_knowledge.sglang``); None for vLLM or when GPU memory is unknown."""
        f = fit or self.fit()
        if f is None or not self._rules.token_pool:
            return None
        tokens = max(0, f.max_model_len_fit)
        # pool_configurator.py ``calculate_pool_sizes``: the pool is a whole number of pages
        page = (self.sglang_attention.page_size if self.sglang_attention else None) or 1
        tokens = tokens // page * page
        context = f.max_model_len or (self.cfg.derived_context if self.cfg else 2048)
        given = self.fraction_opts.get("max_running")
        running = sglang.max_running_requests(tokens, context, given, self.attn_dp) if tokens > 1 else 0
        return {
            "kv_tokens": tokens,
            "context_length": context,
            "max_request_len": max(0, sglang.max_request_len(context, tokens)),
            "max_running_requests": running,
            "req_to_token_bytes": sglang.req_to_token_bytes(running, context),
            "free_before_load_bytes": self.free_before_load() or 0,
            "page_size": page,
        }

    def capacity(self, fit: Fit | None = None) -> Capacity | None:
        """vLLM's "GPU KV cache size" and "Maximum concurrency" for this launch (None when
        the length is automatic or the GPU memory unknown)."""
        f = fit or self.fit()
        if f is None or not f.max_model_len or not self._rules.capacity_log:
            return None
        v = release(self.engine_version)
        return capacity(
            f.shape,
            f.kv_budget,
            f.max_model_len,
            block=vllm.BLOCK_SIZE,
            batched_tokens=self.batch.tokens,
            by_concurrency=v is None or v >= tuple(int(p) for p in vllm.KV_TOKENS_BY_CONCURRENCY_SINCE.split(".")),
        )

    def communication(
        self, layout: Layout | None = None, communicators: int = 1, gather: str | None = None
    ) -> Communication:
        """The TP group's NCCL communicators and custom all-reduce buffers on ``layout``
        (``budget.communication``; ``gather`` its V0 logits gather's P2P side)."""
        lay = layout or self.layout
        ic = self.interconnect
        if self.node_gpus and lay.tp > self.node_gpus:
            # a TP group larger than this node spans nodes: NCCL's network transport
            # (``nccl.multinode_communicator_bytes``)
            ic = msgspec.structs.replace(ic or Interconnect(), nodes=-(-lay.tp // self.node_gpus))
        return communication(lay, ic, self.engine_version, self.nccl_env, communicators, gather)

    def _gather(self, layout: Layout) -> str | None:
        """V0's logits gather makes the driver (rank 0) the binding rank: "root", else None."""
        return "root" if self.batch.v0 and vllm.V0_LOGITS_GATHER_P2P and layout.tp > 1 else None

    def logits_allgather(self, layout: Layout | None = None) -> int:
        """V1's logits all-gather connections inside the budget (``budget.logits_allgather``)."""
        lay = layout or self.layout
        if self.batch.v0 or self._rules.reserve != "profile" or self.reserve_set:
            return 0
        ic = self.interconnect
        if self.node_gpus and lay.tp > self.node_gpus:
            return 0
        return logits_allgather(lay, ic, self.engine_version, self.nccl_env)

    def bound_terms(self, layout: Layout | None = None) -> dict[str, Term]:
        """The facts not known before the launch that widen the KV budget into [low, high]
        (``bound.bound_terms``: vLLM's profiled budget); none for an engine whose reserve is
        not profiled (SGLang) or with GPU memory unknown."""
        if self._rules.reserve != "profile" or self.total is None:
            return {}
        lay = layout or self.layout
        v = release(self.engine_version)
        lazy = not nccl.connects_at_init(self.nccl_env, vllm.nccl_cumem_forced_off(v))
        in_budget = self._rules.communicators(v) == "in-budget" and not self.reserve_set
        acts = 0
        if not self.reserve_set and self.cfg is not None:
            acts = sum(profile_peak(self.cfg, lay, self.batch))
        util, _ = self._budget(lay)
        # counted installed (the smaller peak): without FlashInfer the profile sorts
        sampler_open = sampler_install_span(self.cfg, lay, self.batch) if acts and self.cfg is not None else 0
        return bound_terms(
            engine_version=self.engine_version,
            total=self.total,
            utilization_set=self.utilization_set,
            cudagraphs_counted=self.batch.cudagraphs and not self.eager and not self.reserve_set,
            tp=lay.tp,
            comm=None if self.reserve_set else self.communication(lay),
            lazy_connect=lazy,
            fusion=(0, 0, 0) if self.reserve_set else self.fusion_workspace(lay),
            comm_in_budget=self.communication(lay, 1, self._gather(lay)) if in_budget and lay.tp > 1 else None,
            counted_after=self.logits_allgather(lay),
            compute_capability=(self.interconnect or Interconnect()).compute_capability,
            utilization=util,
            activations=acts,
            release_activations=sampler_span(self.cfg, lay, self.batch)
            if v is None and acts and self.cfg is not None
            else None,
            v0_activations=self._v0_activations(lay) if v is None and acts else None,
            sampler_open=sampler_open,
            mxfp4_open=self.mxfp4_open(lay, acts),
            moe_backend=moe_backend_span(self.cfg, lay, self.batch) if acts and self.cfg is not None else 0,
            act_quant_open=act_quant_span(self.cfg, lay, self.batch) if acts and self.cfg is not None else 0,
            runner_open=runner_span(self.cfg, lay, self.batch) if acts and self.cfg is not None else 0,
            non_torch=non_torch_point(self.batch, eager=self.eager),
        )

    def mxfp4_open(self, layout: Layout, acts: int) -> tuple[int, int]:
        """(below, above): how far the MXFP4 MoE backends the release leaves open
        (``vllm.mxfp4_backends`` beyond the likeliest) move the KV budget — their experts'
        weights and profile-run transient against the point's (``bound.bound_terms``)."""
        if self.cfg is None or self.tally is None or self.cfg.quant.method != "mxfp4" or self.reserve_set:
            return 0, 0
        if self._rules.reserve != "profile":
            return 0, 0
        point = self.mxfp4_backend
        base = largest_stage(self.stages(layout, point))[1]
        below = above = 0
        for alt in self.batch.mxfp4_alternates:
            weights = largest_stage(self.stages(layout, alt))[1]
            peak = sum(profile_peak(self.cfg, layout, msgspec.structs.replace(self.batch, mxfp4_backend=alt)))
            delta = int((base - weights) + (acts - peak))  # > 0: more KV room with ``alt``
            above, below = max(above, delta), max(below, -delta)
        return below, above

    def _v0_activations(self, layout: Layout) -> int | None:
        """An unknown release's V0 side (``bound.bound_terms``' ``release_unknown``): the profile
        peak under V0's default batch and sort where V0 may run (``vllm.unknown_release_may_run_v0``)
        and the launch leaves the batch to the engine; None where it cannot."""
        cc = (self.interconnect or Interconnect()).compute_capability
        length = self.batch.max_model_len or (self.max_model_len if isinstance(self.max_model_len, int) else None)
        if self.cfg is None or not vllm.unknown_release_may_run_v0(cc):
            return None
        given = self.batch.source == "the launch's"
        return v0_peak(self.cfg, layout, self.batch, length, tokens_given=given, seqs_given=given)

    def fusion_workspace(self, layout: Layout | None = None) -> tuple[int, int, int]:
        """(low, point, high) of FlashInfer's all-reduce fusion workspace vLLM makes after its
        snapshot (``vllm.fusion_workspace``; none before 0.12, so none for V0); zeros for an
        engine whose reserve is not profiled or where the compute capability is not known."""
        lay = layout or self.layout
        if self._rules.reserve != "profile" or self.cfg is None:
            return 0, 0, 0
        ic = self.interconnect or Interconnect()
        # a TP group larger than this node spans nodes (as ``communication`` reads it)
        nodes = -(-lay.tp // self.node_gpus) if self.node_gpus and lay.tp > self.node_gpus else ic.nodes
        return vllm.fusion_workspace(
            release(self.engine_version),
            tp=lay.tp,
            pp=lay.pp,
            dp=lay.dp,
            compute_capability=ic.compute_capability,
            hidden=self.cfg.hidden or 0,
            dtype_bytes=self.cfg.dtype_bytes or 2,
            batched_tokens=self.batch.tokens,
            eager=self.eager,
            multicast=ic.multicast,
            nodes=nodes,
        )

    def comm_in_reserve(self, layout: Layout | None = None) -> int:
        """vLLM before 0.11.0 snapshots before the distributed init, so its communicators sit
        inside the KV budget (``vllm.comm_in_budget``): their certain size (the low end, so
        FC402 stops no launch the engine would serve); 0 otherwise."""
        lay = layout or self.layout
        gathered = self.logits_allgather(lay)
        if self._rules.communicators(release(self.engine_version)) != "in-budget":
            return gathered
        # lazily connected in the budget (0.10.2): the communicators' low is 0, the all-gather's is not
        return self.communication(lay, vllm.TP_COMMUNICATORS_IN_BUDGET, self._gather(lay)).low + gathered

    def add_comm_to_reserve(self) -> None:
        """Fold :meth:`comm_in_reserve` into the launch's default reserve (once the
        interconnect is known; ``--reserve-gib`` is kept as given)."""
        if self.reserve_set or self.reserve is None:
            return
        extra = self.comm_in_reserve()
        if extra:
            self.reserve += extra
            self.reserve_parts = {**self.reserve_parts, "communication": extra}
        fusion = self.fusion_workspace()[1]
        if fusion:
            self.reserve += fusion
            self.reserve_parts = {**self.reserve_parts, "allreduce_fusion": fusion}

    def _comm_before_snapshot(self) -> Communication | None:
        """The communicators made before vLLM's snapshot (one over the TP group: pynccl),
        None where they are inside the budget instead (before 0.11.0) or not vLLM."""
        if self._rules.communicators(release(self.engine_version)) != "before-snapshot":
            return None
        return self.communication()

    def pre_snapshot(self) -> dict[str, int]:
        """What vLLM allocates before its baseline snapshot, the high end (see
        ``budget.pre_snapshot``); before 0.11.0 the communicators come after it."""
        if self._rules.communicators(release(self.engine_version)) == "in-budget":
            return pre_snapshot(Layout(1, 1), None)
        return pre_snapshot(self.layout, self.nvlink, self._comm_before_snapshot())

    def pre_snapshot_certain(self) -> int:
        """The part of :meth:`pre_snapshot` that is certain: the CUDA context, plus the
        communicators' derived low end (0 where NCCL connects lazily or the source does not
        pin the interconnect down)."""
        comm = self._comm_before_snapshot()
        return pre_snapshot(Layout(1, 1), None)["cuda_context"] + (comm.low if comm is not None else 0)

    # ------------------------------------------------------------------ report

    def _speculative_block(self, parts: dict[str, float], stage: int) -> dict[str, Any] | None:
        """The resolved speculative config, with what its draft adds on the last PP stage
        (``draft_weights_bytes``: weights and proposer buffers per rank;
        ``draft_kv_bytes_per_token``; ``draft_layers``; for a separate draft its TP and
        whether its embeddings / head are shared) when it is counted."""
        if self.speculative is None:
            return None
        out = dict(self.speculative)
        last = len(self.stages()) - 1
        if self.draft is not None and self.draft_cfg is not None:
            kv = self.draft_kv()
            _, shares = self.draft_parts()
            out.update(
                draft_layers=self.draft_cfg.layers,
                draft_tp=self.draft_tp(),
                draft_kv_bytes_per_token=int(kv.per_token) if kv is not None else 0,
                draft_embeddings=shares["embed"],
                draft_lm_head=shares["head"],
            )
        elif self.mtp_layers and self.cfg is not None:
            out.update(draft_layers=self.mtp_layers, draft_kv_bytes_per_token=int(self.mtp_layers * self._mtp_per()))
        else:
            return out
        on_last = self.stages()[last] if stage != last else parts
        out["draft_weights_bytes"] = int(
            sum(v for k, v in on_last.items() if k.startswith(("draft_", "mtp_draft", "mtp_buffers")))
        )
        return out

    def _mtp_per(self) -> float:
        """KV bytes per token of one MTP layer (the target's attention shape)."""
        assert self.cfg is not None
        return kv_shape(self.cfg, range(0), self.layout.tp, self.draft_kv_dtype()).per_layer

    def to_dict(self) -> dict[str, Any]:
        """The report's ``memory`` block (spec shape, plus detail)."""
        per: dict[str, Any] = {
            k: None for k in ("weights_bytes", "kv_bytes_per_token", "kv_budget_bytes", "usable_bytes", "reserve_bytes")
        }
        out: dict[str, Any] = {
            "per_rank": per,
            "max_model_len": self.max_model_len if self.requested_len != AUTO else AUTO,
            "max_model_len_fit": None,
            "load_bytes": self.load_bytes,
            "load_seconds_estimate": None,
        }
        if self.error or self.cfg is None or self.tally is None:
            out["error"] = self.error
            return out
        fit = self.fit()
        # every per-rank term from one stage: the one with the least room, else the largest
        stage = fit.stage if fit is not None else largest_stage(self.stages())[0]
        shape = self.kv(stage=stage)
        parts = self.stages()[stage]
        per.update(
            weights_bytes=int(sum(parts.values())), kv_bytes_per_token=int(shape.per_token), reserve_bytes=self.reserve
        )
        if fit is not None:
            per.update(
                usable_bytes=fit.usable,
                kv_budget_bytes=int(fit.kv_budget),
                kv_budget_low_bytes=int(fit.kv_budget_low),
                kv_budget_high_bytes=int(fit.kv_budget_high),
                kv_bytes_for_max_model_len=int(fit.kv_need),
                free_bytes=int(fit.spare),
                weights_bytes=int(fit.weights),
            )
            if fit.length_cost:
                # what the engine holds per token of max_model_len outside the KV cache (the V2
                # runner's all_token_ids), already off kv_budget_bytes at this length
                per["length_bytes_per_token"] = int(fit.length_cost)
            out["max_model_len_fit"] = fit.max_model_len_fit
            cap = self.capacity(fit)
            if cap is not None:
                out["kv_tokens"] = cap.tokens
                out["kv_blocks"] = cap.num_blocks
                out["max_concurrency"] = round(cap.concurrency, 2)
        if self.throughput and self.throughput.get("bytes_per_s") and self.load_bytes:
            out["load_seconds_estimate"] = round(self.load_bytes / self.throughput["bytes_per_s"], 1)
            out["read_bytes_per_s"] = int(self.throughput["bytes_per_s"])
        out.update(
            {
                "engine": self.engine,
                "layout": {
                    "tp": self.layout.tp,
                    "pp": self.layout.pp,
                    "dp": self.layout.dp,
                    "ep": self.layout.ep,
                    "pcp": self.layout.pcp,
                    "dcp": self.layout.dcp,
                },
                "gpu": {
                    "name": self.gpu_name,
                    "memory_total_bytes": self.total,
                    "memory_reserved_bytes": self.memory_reserved,
                }
                if self.total
                else None,
                "batch": {
                    "max_num_batched_tokens": self.batch.tokens,
                    "max_num_seqs": self.batch.seqs,
                    "source": self.batch.source,
                    "cudagraphs_in_budget": self.batch.cudagraphs and not self.eager,
                    # how the vision encoder is profiled: its TP mode as vLLM runs it
                    # (--mm-encoder-tp-mode data where the model supports it, else "weights")
                    # and --limit-mm-per-prompt's image cut
                    "vision_encoder": {
                        "tp_mode": "data" if encoder_dp(self.cfg, self.batch) else "weights",
                        "image_size": list(self.batch.mm_image_size) if self.batch.mm_image_size else None,
                    }
                    if self.cfg.tower is not None and self.batch.encoder
                    else None,
                }
                if self._rules.profiles
                else None,
                "kv_cache_memory_bytes": self.kv_cache_memory_bytes,
                "cpu_offload_bytes": self.cpu_offload_bytes or None,
                "pre_snapshot_breakdown": self.pre_snapshot() if self._rules.profiles else None,
                "sglang_pool": self.sglang_pool(fit) if fit is not None else None,
                "gpu_memory_utilization": self.utilization,
                "gpu_memory_utilization_source": self.utilization_source,
                "reserve_breakdown": self.reserve_parts or None,
                # what the facts not known before the launch do to the KV budget: [low, high]
                # and each term (``bound.bound_terms``); null where nothing is undecided
                "kv_budget_bound": {
                    "low_bytes": int(fit.kv_budget_low),
                    "high_bytes": int(fit.kv_budget_high),
                    "terms": {
                        k: {"below_bytes": t.below, "above_bytes": t.above, "source": t.source}
                        for k, t in self.bound_terms().items()
                    },
                }
                if fit is not None and (fit.below or fit.above)
                else None,
                "reserve_source": self.reserve_source,
                "kv_cache_dtype": self.kv_cache_dtype,
                "speculative": self._speculative_block(parts, stage),
                "kv_bytes_per_element": kv_bytes(self.kv_cache_dtype, self.cfg),
                "attention": "mla"
                if self.cfg.mla
                else ("hybrid" if len(set(self.cfg.layer_kinds)) > 1 else "standard"),
                "kv_fixed_bytes": int(shape.fixed) or None,
                "sliding_window": shape.window or None,
                "weights_breakdown": {k: int(v) for k, v in parts.items()},
                "weights_total_bytes": self.tally.total - self.tally.skipped,
                "skipped_bytes": self.tally.skipped,
                "pp_stage": stage,
                "notes": self.notes or None,
            }
        )
        return out


def resolve_reserve(m: MemoryModel, reserve_gib: float | None) -> None:
    """The reserve: ``--reserve-gib`` when given, else the documented default."""
    assert m.cfg is not None
    if reserve_gib is not None:
        m.reserve, m.reserve_source, m.reserve_parts, m.reserve_set = int(reserve_gib * GiB), "--reserve-gib", {}, True
    else:
        m.reserve, m.reserve_parts = default_reserve(
            m.cfg, m.layout, m.engine, eager=m.eager, batch=m.batch, mm_reserved=m.mm_reserved
        )
        m.reserve_source = m._rules.reserve_source


def resolve_utilization(m: MemoryModel, given: float | None) -> None:
    """gpu_memory_utilization / mem_fraction_static: the launch's, else the engine's default."""
    if given is not None:
        m.utilization, m.utilization_set = given, True
        m.utilization_source = engines.flag(m.engine, "util")
    elif m.total is not None:
        mla = bool(m.cfg and m.cfg.mla)
        m.utilization, m.utilization_source = default_utilization(
            m.engine, m.engine_version, m.total, m.layout, mla=mla, fraction_opts=m._opts()
        )


def _merged(shapes: list[KvShape]) -> KvShape:
    """The whole model's KV demand from its PP stages' (their layers added up)."""
    first = shapes[0]
    return msgspec.structs.replace(
        first,
        full=sum(s.full for s in shapes),
        sliding=sum(s.sliding for s in shapes),
        window=max(s.window for s in shapes),
        fixed=sum(s.fixed for s in shapes),
        n_full=sum(s.n_full for s in shapes),
        n_sliding=sum(s.n_sliding for s in shapes),
    )
