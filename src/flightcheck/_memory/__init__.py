"""The memory model (``spec/memory.md``): will the launch's weights and one max-length
sequence of KV cache fit on each GPU it uses, and if not, what layout, KV dtype or length
would?

``build(checkpoint, intent, total=...)`` builds it from the checkpoint's grouped headers
and config.json, the launch and the smallest GPU used (the checks call it once per
evaluation, see ``flightcheck._checks.shared.memory``). Submodules: ``config`` (config.json),
``classes`` (which share of
each tensor a rank holds), ``weights`` (per-rank bytes, PP stages, padding), ``kv`` (KV
bytes per token), ``budget`` (utilization, reserve), ``layout`` (valid layouts),
``model`` (the :class:`MemoryModel`), ``suggest`` (what would fit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flightcheck._knowledge import cublas, engines, gpus, sglang, vllm
from flightcheck._memory.budget import BATCHED_TOKENS, MAX_SEQS, Batch, model_runner, release
from flightcheck._memory.config import ModelConfig, dtype_size, parse
from flightcheck._memory.model import MemoryModel, resolve_reserve, resolve_utilization
from flightcheck._memory.weights import Layout, cast_bytes, draft_tally, tally

GIB = 1 << 30

if TYPE_CHECKING:
    from flightcheck._checkpoint import Checkpoint
    from flightcheck._vocabulary.intent import Intent

__all__ = ["Layout", "MemoryModel", "ModelConfig", "build"]


def build(
    ck: Checkpoint | None,
    intent: Intent,
    *,
    total: int | None,
    gpu_name: str | None = None,
    engine_version: str | None = None,
    compute_capability: str | None = None,
    env: dict[str, str | None] | None = None,
) -> MemoryModel:
    """The memory model from a checkpoint and a launch (``total``: bytes of the smallest GPU
    used as CUDA reports them, the driver's reservation taken off)."""
    eager = bool(intent.enforce_eager) or intent.eager_given
    rules = engines.get(intent.engine).memory
    fraction_opts = rules.fraction_options(intent.memory_options, intent.model, intent.max_num_seqs)
    m = MemoryModel(
        engine=intent.engine,
        layout=Layout(
            intent.tensor_parallel_size,
            intent.pipeline_parallel_size,
            intent.data_parallel_size,
            bool(intent.enable_expert_parallel),
            pcp=max(1, intent.prefill_context_parallel_size or 1),
            dcp=max(1, intent.decode_context_parallel_size or 1),
        ),
        kv_cache_dtype=intent.kv_cache_dtype or "auto",
        requested_len=intent.max_model_len,
        total=total,
        gpu_name=gpu_name,
        eager=eager,
        engine_version=engine_version,
        batch=batch_for(intent, total, gpu_name, engine_version, compute_capability, env),
        kv_cache_memory_bytes=intent.kv_cache_memory_bytes,
        cpu_offload_bytes=int((intent.cpu_offload_gb or 0) * (1 << 30)),
        fraction_opts=fraction_opts,
        mm_reserved=rules.mm_reservation_bytes(intent.memory_options, env or {}),
    )
    if ck is not None and ck.crash:
        m.error = f"reading the checkpoint failed: {ck.crash}"
        return m
    if ck is None or not ck.found:
        m.error = (ck.unread if ck is not None else None) or "the model was not found (FC501)"
        return m
    if ck.config is None:
        m.error = f"{ck.config_error} (FC507)"
        return m
    # the config as the engine sees it: after --hf-overrides / --json-model-override-args
    m.cfg = parse(rules.apply_overrides(ck.config, intent.hf_overrides), ck.hf_quant, ck.processor, ck.video_processor)
    if m.cfg.missing:
        m.error = f"config.json lacks {', '.join(m.cfg.missing)} (FC507)"
        return m
    # the dtype the engine runs the model in (--dtype; "auto": the config's, float32 downcast):
    # the unquantized weights are cast to it on load (weights.tally), the KV cache and the
    # activations follow it
    dtype = rules.model_dtype(intent.dtype, m.cfg.dtype_name)
    if dtype != m.cfg.dtype_name:
        m.cfg.dtype_name, m.cfg.dtype_bytes = dtype, dtype_size(dtype, m.cfg.dtype_bytes)
    multimodal = m.cfg.tower is not None or m.cfg.vision is not None
    # V0's batch defaults turn chunked prefill off for MLA and multimodal models (vllm.v0_batch)
    # and the model runner follows the architecture (vllm.v2_runner): the profile needs the config
    m.batch = batch_for(
        intent,
        total,
        gpu_name,
        engine_version,
        compute_capability,
        env,
        mla=m.cfg.mla,
        multimodal=multimodal,
        cfg=m.cfg,
    )
    if rules.token_pool:  # the pool is a whole number of the attention backend's pages
        _sglang_attention(m, intent.memory_options, compute_capability)
    if ck.unread and ck.gguf_groups is None:
        m.error = f"weights not counted: {ck.gguf_uncounted or ck.unread}"
        return m
    groups = [
        (g.pattern, g.index, g.dtype, g.shape, g.nbytes, g.count, g.per_item)
        for g in (
            ck.gguf_groups
            if ck.gguf_groups is not None
            else (g for s in ck.scanned if s.scan is not None for g in s.scan.groups)
        )
    ]
    if ck.gguf_groups is not None:
        # vLLM's Flint loads the GGUF alone: its tensors, named and sized as vLLM allocates
        # them (flightcheck._checkpoint.ggufnames)
        m.weights_source = f"weights from {ck.gguf_loaded}'s header, as vLLM's Flint allocates them"
    if not groups:
        m.error = "no shard header could be read (FC5xx)"
        return m
    if m.cfg.quant.method is None and ck.gguf_groups is None:
        # an unquantized checkpoint's float tensors are allocated in the model dtype and cast
        # to it as they load (vllm.model_dtype), whatever they are stored in
        groups = [(p, i, d, s, cast_bytes(n, d, m.cfg.dtype_bytes), c, e) for p, i, d, s, n, c, e in groups]
    m.tally = tally(groups, m.cfg)
    if rules.speculative_draft:
        _speculative(m, intent, ck.config, ck.draft)
    if len(ck.scanned) < len(ck.shards):
        _scale_to_index(m, ck)
    q = (intent.quantization or "").lower()
    m.online_fp8 = q == "fp8" and m.cfg.quant.method is None and m.cfg.dtype_bytes == 2
    if m.online_fp8:
        m.notes.append(
            f"{vllm.FLAG['quantization']} fp8 on a 16-bit checkpoint: linear layers counted at 1 byte a weight"
        )
    # what is read from disk: the GGUF file as it is stored, else the headers' tensors
    loaded = ck.total_bytes if ck.gguf_groups is not None else m.tally.total - m.tally.skipped
    if m.draft is not None and ck.draft is not None:
        loaded += ck.draft.total_bytes  # the draft checkpoint is read too
    # Every rank reads the tensors (the slices) it holds, so a node reads what the ranks of
    # one replica on it hold: the whole model when a replica fits on the node (data
    # parallel across nodes reads it once per node), a share when TP x PP x PCP spans nodes.
    spans = min(max(1, intent.nnodes), -(-intent.replica_size // max(1, intent.gpus_per_node)))
    m.load_bytes = -(-loaded // max(1, spans))
    m.throughput = ck.throughput
    resolve_utilization(m, intent.gpu_memory_utilization)
    resolve_reserve(m, intent.reserve_gib)
    return m


def _speculative(m: MemoryModel, intent: Intent, config: dict[str, object], draft: Checkpoint | None) -> None:
    """The launch's speculative decoding (``_knowledge.vllm.resolve_speculative``) and what it adds:
    the target's own MTP layers (weights and KV) when it drafts with them, a separate
    draft checkpoint's (``draft``, read by the collector) otherwise. Rules read from
    vLLM 0.33.0's source (and the 0.32.0 wheel): older versions get a note, not a figure."""
    assert m.cfg is not None
    spec = vllm.resolve_speculative(
        intent.speculative_config, intent.speculative_error, config, intent.model, intent.tensor_parallel_size
    )
    if spec is None:
        return
    m.speculative = spec.as_dict()
    if spec.error is not None:
        m.notes.append(f"speculative decoding: vLLM refuses the config ({spec.error})")
        return
    if not spec.on_gpu:
        m.notes.append(f"speculative decoding ({spec.method}): no draft weights or KV cache on the GPU")
        return
    v = release(m.engine_version)
    if v is not None and v < tuple(int(p) for p in vllm.SPEC_DECODE_MEMORY_SINCE.split(".")):
        m.notes.append(
            f"speculative decoding ({spec.method}): its memory is modelled from vLLM "
            f"{vllm.SPEC_DECODE_MEMORY_SINCE}+'s code only; not counted for {m.engine_version}"
        )
        return
    if spec.method == "mtp" and spec.model == intent.model:
        assert m.tally is not None
        stored = {i for (_, i) in m.tally.mtp}
        if not stored:
            # deepseek_mtp.py ``load_weights``: "MTP speculative decoding layer ... weights
            # missing from checkpoint" -- vLLM refuses; counted as nothing here
            m.notes.append("speculative decoding (mtp): the checkpoint stores no MTP layers; vLLM refuses to load it")
            return
        m.mtp_layers = spec.mtp_layers or len(stored)
        if spec.draft_tp not in (None, intent.tensor_parallel_size):
            m.notes.append(f"speculative decoding (mtp) with draft TP {spec.draft_tp}: counted at the target's TP")
        m.notes.append(
            f"speculative decoding (mtp): {m.mtp_layers} MTP layer(s) of the checkpoint loaded on the last "
            f"pipeline stage, with their KV cache; {spec.num_speculative_tokens} speculative token(s)"
        )
        return
    why = _separate_draft(m, spec, draft) if spec.method in vllm.SEPARATE_DRAFT_METHODS else None
    if why is None and m.draft is not None:
        return
    m.notes.append(
        f"speculative decoding ({spec.method}, draft {spec.model}): the draft's weights and KV cache are "
        f"not counted ({why or 'its checkpoint is not read'})"
    )


def _separate_draft(m: MemoryModel, spec: vllm.SpecDecode, draft: Checkpoint | None) -> str | None:
    """Count a separate draft checkpoint (EAGLE / EAGLE-3 / draft_model) on the last PP
    stage: its weights at the draft's TP less what it shares with the target, the proposer's
    buffers and its attention layers' KV (see ``MemoryModel.draft_parts`` / ``draft_kv``).
    Returns why it is not counted (unread, unreadable, no config, no header), else None."""
    assert m.cfg is not None
    if draft is None:
        return None
    if draft.crash is not None:
        return f"reading it failed: {draft.crash}"
    if not draft.found:
        return f"it was not found: {draft.unread}" if draft.unread else "it was not found"
    if draft.config is None:
        return draft.config_error or "its config.json cannot be read"
    dcfg = parse(draft.config, draft.hf_quant)
    if dcfg.missing:
        return f"its config.json lacks {', '.join(dcfg.missing)}"
    if draft.unread:
        return f"its weights were not read: {draft.unread}"
    if len(draft.scanned) < len(draft.shards) or not draft.scanned:
        return "a shard header of it could not be read"
    # the draft's ModelConfig takes the target's dtype (config/speculative.py
    # ``ModelConfig(..., dtype=self.target_model_config.dtype)``): so do its KV cache and
    # its unquantized weights
    dcfg.dtype_bytes, dcfg.dtype_name = m.cfg.dtype_bytes, m.cfg.dtype_name
    groups = [
        (g.pattern, g.index, g.dtype, g.shape, g.nbytes, g.count, g.per_item)
        for s in draft.scanned
        if s.scan is not None
        for g in s.scan.groups
    ]
    assert spec.method is not None
    m.draft = draft_tally(groups, dcfg, spec.method, m.cfg.vocab, m.cfg.dtype_bytes)
    m.draft_cfg = dcfg
    m.draft_tp_one = spec.draft_tp == 1 and m.layout.tp != 1
    parts, shares = m.draft_parts()
    weights = sum(parts.values())
    kv = m.draft_kv()
    per_token = kv.per_token if kv is not None else 0.0
    text = (
        f"speculative decoding ({spec.method}, draft {spec.model}): {dcfg.layers} draft layer(s) at TP "
        f"{m.draft_tp()} on the last pipeline stage, {weights / GIB:,.2f} GiB per rank and "
        f"{per_token:,.0f} B of KV cache per token; {spec.num_speculative_tokens} speculative token(s)"
    )
    shared = [n for n, k in (("embeddings", "embed"), ("LM head", "head")) if shares[k] == "shared"]
    if shared:
        text += f"; {' and '.join(shared)} shared with the target"
    m.notes.append(text)
    for name, key in (("embeddings", "embed"), ("LM head", "head")):
        if shares[key] == "if_equal":
            m.notes.append(
                f"speculative decoding: the draft stores its own {name}; vLLM shares the target's only if their "
                "values are equal, which the headers do not tell: counted as shared"
            )
    return None


def _sglang_attention(m: MemoryModel, options: dict[str, Any], capability: str | None) -> None:
    """The attention backends SGLang picks on this GPU, and what they change: the KV pool
    is a whole number of their pages; DeepSeek-V3 on trtllm_mla captures no prefill graph
    while its fraction keeps the 1.5 GiB reserved for one (see ``_knowledge.sglang``)."""
    assert m.cfg is not None
    archs = list(m.cfg.outer_architectures or m.cfg.architectures)
    # the backends the launch gives, read once (``memory_options``; none: a launch with no flags)
    given = options["attention"] if "attention" in options else sglang.attention_flags([])
    choice = sglang.attention_backends(capability, m.cfg.mla, archs, given, dsa=m.cfg.dsa)
    m.sglang_attention = choice
    if choice is None:
        return
    if choice.refusal is not None:
        m.notes.append(f"SGLang refuses the attention backend on compute capability {capability}: {choice.refusal}")
    elif choice.prefill_graphs_off:
        m.notes.append(
            f"SGLang picks {choice.prefill} on compute capability {capability} and captures no prefill CUDA "
            "graph; mem_fraction_static still reserves 1.5 GiB for one (it is set before the backend)"
        )


def _scale_to_index(m: MemoryModel, ck: Checkpoint) -> None:
    """A partial checkpoint (missing or unreadable shards): count the weights from the
    index's ``metadata.total_size``, scaling what the present headers hold to it (each
    class and layer alike: an estimate), and say so; without a total, say they are
    undercounted."""
    assert m.tally is not None
    missing = len(ck.shards) - len(ck.scanned)
    present = sum(s.scan.data_end for s in ck.scanned if s.scan is not None)
    total = ck.index.total_size if ck.index is not None and ck.index.problem is None else None
    if not total or present <= 0 or total <= present:
        m.notes.append(f"{missing} shard(s) missing or unreadable: weights are undercounted")
        return
    factor = total / present
    t = m.tally
    t.bytes = {k: int(v * factor) for k, v in t.bytes.items()}
    t.total = sum(t.bytes.values())
    t.skipped = int(t.skipped * factor)
    m.weights_source = (
        f"{missing} of {len(ck.shards)} shard(s) missing or unreadable: weights taken from the index's "
        f"total_size ({total / 2**30:,.1f} GiB), not from the {present / 2**30:,.1f} GiB of headers present"
    )
    m.notes.append(m.weights_source)


def batch_for(
    intent: Intent,
    total: int | None,
    gpu_name: str | None,
    engine_version: str | None,
    compute_capability: str | None = None,
    env: dict[str, str | None] | None = None,
    *,
    mla: bool = False,
    multimodal: bool = False,
    cfg: ModelConfig | None = None,
) -> Batch:
    """The profiling run's size: the launch's batch limits, else vLLM's defaults for this
    GPU and version (V0's depend on whether the model is MLA or multimodal); whether the
    CUDA-graph estimate comes off the KV budget; the model runner (``cfg``: its
    architecture, None before the config is read: left open)."""
    v = release(engine_version)
    # a 0.8 - 0.10.1 launch on a pre-Ampere GPU (or GGUF on 0.8) runs V0: its batch rule and sampler
    v0 = vllm.runs_v0(v, compute_capability, intent.quantization, env)
    length = intent.max_model_len if isinstance(intent.max_model_len, int) and intent.max_model_len > 0 else None
    tokens, seqs = (
        vllm.batch_defaults(v, total, gpu_name, compute_capability, length, v0=v0, mla=mla, multimodal=multimodal)
        if total
        else (None, None)
    )
    given = [n for n, x in (("tokens", intent.max_num_batched_tokens), ("seqs", intent.max_num_seqs)) if x]
    if tokens and seqs and not v0:
        # the context's say in the default batch (vllm.batch_by_length: without chunked prefill
        # the batch is max_model_len; from 0.11.1 capped at max_num_seqs x max_model_len)
        tokens, seqs = vllm.batch_by_length(
            v,
            intent.max_num_batched_tokens or tokens,
            intent.max_num_seqs or seqs,
            length,
            chunked_prefill=intent.memory_options.get("enable_chunked_prefill"),
            tokens_given=bool(intent.max_num_batched_tokens),
            seqs_given=bool(intent.max_num_seqs),
        )
    source = "the launch's" if len(given) == 2 else ("vLLM's defaults for this GPU" if total else "assumed")
    # --skip-mm-profiling / --language-model-only / --limit-mm-per-prompt, read once by _launch
    skip_mm, mm_limits = intent.mm_profiling_off, vllm.mm_limits(intent.limit_mm_per_prompt)
    backends = vllm.mxfp4_backends(v, compute_capability, env)
    # the model runner (vllm.memory_runner), which needs the architecture: open before the config
    sampler, cudagraphs = vllm.sampler_kind(v, env, v0=v0), vllm.cudagraphs_in_budget(v, env)
    v2: bool | None = None
    if cfg is not None:
        v2, sampler, cudagraphs = model_runner(
            cfg,
            v,
            v0=v0,
            quantization=intent.quantization,
            env=env,
            speculative=bool(intent.speculative_config),
            sampler=sampler,
            cudagraphs=cudagraphs,
        )
    return Batch(
        tokens=intent.max_num_batched_tokens or tokens or BATCHED_TOKENS,
        seqs=intent.max_num_seqs or seqs or MAX_SEQS,
        cudagraphs=cudagraphs,
        source=source,
        sampler=sampler,
        v0=v0,
        encoder=vllm.encoder_profiled(v) and skip_mm is None,
        release=v,
        mm_limits=mm_limits,
        mm_image_size=vllm.mm_image_size_of(intent.limit_mm_per_prompt),
        mm_encoder_tp_mode=intent.mm_encoder_tp_mode,
        max_model_len=length,
        # the MXFP4 MoE backend's profile transient and expert weights (gpt-oss), used only
        # for an MXFP4 checkpoint (budget.forward_peak, weights.mxfp4_padding)
        mxfp4_backend=backends[0],
        mxfp4_alternates=backends[1:],
        # an FP8 layer's MLP activation under Inductor (budget.forward_peak)
        act_fp8=vllm.fp8_activation_stored_as_fp8(
            v,
            v0=v0,
            eager=bool(intent.enforce_eager) or intent.eager_given,
            env=env,
            compile_flags=bool(intent.memory_options.get("compile_flags")),
            compute_capability=compute_capability,
        ),
        online_fp8=(intent.quantization or "").lower() == "fp8",
        v2_runner=v2,
        # the sampler's Triton buffer and torch's BLAS workspaces (budget.sampler_peak, activations)
        sms=gpus.sm_count(gpu_name),
        blas_workspaces=cublas.blas_workspaces_bytes(compute_capability, env),
    )
