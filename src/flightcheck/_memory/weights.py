"""Per-rank weight bytes for a parallel layout, from the checkpoint's grouped headers.

The checkpoint is first reduced to a :class:`Tally` — bytes per (class, decoder layer) —
once; every layout (the launch's, and the ones the suggestions try) is then a cheap pass
over it. Pipeline stages follow vLLM's ``get_pp_indices`` (the remainder layers go to the
stages before the last), embeddings sit on the first stage and the LM head and final norm
on the last; the largest stage is what must fit.

What vLLM allocates beyond the stored bytes is added: MXFP4 experts as the MoE backend holds
them (Marlin: hidden padded to a multiple of 256, the per-rank intermediate to 128; Triton: the
scales twice — ``flightcheck._knowledge.vllm.memory_gptoss``) and MLA's bf16 ``W_UK_T``/``W_UV``
copies (heads per rank x kv_lora_rank x (qk_nope + v_head) per layer, 2 bytes each).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from flightcheck._knowledge import engines, vllm
from flightcheck._memory.classes import classify_pattern, is_encoder, strip_wrapper, with_layer
from flightcheck._memory.config import ModelConfig

VOCAB_PAD = 64  # vLLM's pad_vocab_size


class Layout(msgspec.Struct, frozen=True):
    """A parallel layout: TP x PP x DP, expert parallel on or off; vLLM's prefill context
    parallel (PCP: more ranks, each holding the TP shard of the dense weights) and decode
    context parallel (DCP: inside the TP group, or across PCP; it shards the KV tokens)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: bool = False
    pcp: int = 1
    dcp: int = 1

    @property
    def moe_size(self) -> int:
        """Ranks the experts are spread over: vLLM flattens DP x PCP x TP for the MoE layers
        (``FusedMoEParallelConfig.flatten_tp_across_dp_and_pcp``,
        vllm/model_executor/layers/fused_moe/config.py; the EP group spans the same ranks,
        vllm/config/parallel.py)."""
        return self.tp * self.dp * self.pcp

    def describe(self, engine: str = "vllm") -> str:
        """The layout as the engine's flags."""
        return engines.layout(engine, self.tp, self.pp, self.dp, self.ep, self.moe_size, self.pcp, self.dcp)


class Tally(msgspec.Struct):
    """The checkpoint reduced to bytes per (class, layer) and what splitting them needs."""

    bytes: dict[tuple[str, int | None], int] = msgspec.field(default_factory=dict)
    expert_tensors: dict[int | None, int] = msgspec.field(default_factory=dict)  # tensors in expert blocks
    per_expert: dict[int | None, int] = msgspec.field(default_factory=dict)  # tensors one expert has
    vocab_rows: dict[str, int] = msgspec.field(default_factory=dict)  # "vocab" / "head" -> rows stored
    #: MTP layers stored after the decoder (``layers.{num_hidden_layers + i}``): (the class the
    #: tensor would have in a loaded layer, MTP layer i) -> bytes. They are ``skipped`` (vLLM's
    #: target model never loads them: deepseek_v2.py ``load_weights`` drops every name
    #: ``get_spec_layer_idx_from_weight_name`` matches) and counted again only when the launch
    #: drafts with them (:func:`mtp_per_rank`).
    mtp: dict[tuple[str, int], int] = msgspec.field(default_factory=dict)
    #: the vision / audio towers' bytes (classed "tp": split by TP unless the encoder runs
    #: data-parallel, :func:`encoder_replicated`)
    encoder: int = 0
    total: int = 0
    skipped: int = 0

    def add(self, cls: str, layer: int | None, nbytes: int) -> None:
        self.bytes[(cls, layer)] = self.bytes.get((cls, layer), 0) + nbytes
        self.total += nbytes
        if cls == "skipped":
            self.skipped += nbytes

    def of(self, cls: str) -> int:
        return sum(b for (c, _), b in self.bytes.items() if c == cls)


def tally(groups: Iterable[tuple[str, int, str, tuple[int, ...], int, int, int]], cfg: ModelConfig) -> Tally:
    """Reduce (pattern, index, dtype, shape, nbytes, count, per_item) groups to a Tally."""
    t = Tally()
    seen: dict[tuple[str, str], tuple[str, bool]] = {}  # one classification a pattern, not a layer
    mtp_seen: dict[tuple[str, str], str] = {}
    for pattern, index, dtype, shape, nbytes, count, per_item in groups:
        key = (pattern, dtype)
        got = seen.get(key)
        if got is None:
            got = seen[key] = classify_pattern(pattern, dtype, cfg)
        cls, layer = with_layer(got[0], got[1], index, cfg)
        t.add(cls, layer, nbytes)
        if cls == "tp" and layer is None and is_encoder(pattern):
            t.encoder += nbytes
        if cls == "skipped" and layer is not None and cfg.layers and layer >= cfg.layers:
            inner = mtp_seen.get(key)
            if inner is None:
                inner = mtp_seen[key] = classify_pattern(pattern, dtype, cfg, mtp=True)[0]
            t.mtp[(inner, layer - cfg.layers)] = t.mtp.get((inner, layer - cfg.layers), 0) + nbytes
        if cls == "expert" and dtype == "":
            t.expert_tensors[layer] = t.expert_tensors.get(layer, 0) + count
            t.per_expert[layer] = max(t.per_expert.get(layer, 1), per_item)
        elif cls in ("vocab", "head") and shape:
            t.vocab_rows[cls] = max(t.vocab_rows.get(cls, 0), shape[0])
    return t


def encoder_replicated(stages: list[dict[str, float]], t: Tally, layout: Layout, *, online_fp8: bool = False) -> None:
    """``--mm-encoder-tp-mode data`` (``_knowledge.vllm.encoder_data_parallel``): the towers'
    layers are built unsharded, so the first stage's ranks hold them whole — moved from the
    TP-split class to ``encoder_replicated``."""
    if not t.encoder or not stages:
        return
    shrink = 0.5 if online_fp8 else 1.0
    first = stages[0]
    first["tp"] = first.get("tp", 0.0) - t.encoder / max(1, layout.tp) * shrink
    first["encoder_replicated"] = t.encoder * shrink


def stage_layers(layers: int, pp: int) -> list[range]:
    """vLLM's default split of decoder layers over PP stages."""
    pp = max(1, min(pp, max(1, layers)))
    sizes = [layers // pp] * pp
    for i in range(2, layers % pp + 2):
        sizes[-i] += 1
    out, start = [], 0
    for s in sizes:
        out.append(range(start, start + s))
        start += s
    return out


def _experts_in(t: Tally, layer: int | None, cfg: ModelConfig) -> int:
    if cfg.experts:
        return cfg.experts
    n = t.expert_tensors.get(layer, 0) // max(1, t.per_expert.get(layer, 1))
    return max(1, n)


def _round_up(x: float, m: int) -> float:
    return -(-x // m) * m


def mxfp4_padding(cfg: ModelConfig, layout: Layout, backend: str = "marlin") -> float:
    """How much bigger vLLM allocates MXFP4 experts than they are stored, on the MoE
    ``backend`` the launch runs (``vllm.mxfp4_backends``; ``vllm.expert_weight_factor``:
    Marlin's padding, the Triton path's second copy of the scales)."""
    if cfg.quant.method != "mxfp4" or not cfg.hidden or not cfg.moe_intermediate:
        return 1.0
    inter = cfg.moe_intermediate if layout.ep else cfg.moe_intermediate / layout.moe_size
    if inter <= 0:
        return 1.0
    return vllm.expert_weight_factor(backend, cfg.hidden, inter)


def per_rank(
    t: Tally, cfg: ModelConfig, layout: Layout, *, online_fp8: bool = False, mxfp4_backend: str = "marlin"
) -> list[dict[str, float]]:
    """Bytes one rank of each PP stage holds, by class (plus ``"mla_copies"``);
    ``mxfp4_backend``: the MoE backend MXFP4 experts are held for (:func:`mxfp4_padding`)."""
    stages = stage_layers(cfg.layers or 1, layout.pp)
    where = {layer: s for s, r in enumerate(stages) for layer in r}
    out: list[dict[str, float]] = [{} for _ in stages]
    tp, kv = layout.tp, max(1, cfg.kv_heads or 1)
    kv_per_rank = max(1, kv // tp)
    pad = mxfp4_padding(cfg, layout, mxfp4_backend)
    shrink = 0.5 if online_fp8 else 1.0  # --quantization fp8 on a 16-bit checkpoint
    for (cls, layer), nbytes in t.bytes.items():
        if cls == "skipped":
            continue
        if layer is not None:
            stage = where.get(layer, len(stages) - 1)
        else:
            stage = len(stages) - 1 if cls in ("head", "replicated") else 0
        if cls == "replicated":
            share = float(nbytes)
        elif cls == "tp":
            share = nbytes / tp * shrink
        elif cls == "kv":
            share = nbytes * kv_per_rank / kv * shrink
        elif cls == "qkv":
            heads = max(1, cfg.heads)
            share = nbytes * (heads / tp + 2 * kv_per_rank) / (heads + 2 * kv) * shrink
        elif cls in ("vocab", "head"):
            rows = cfg.vocab or t.vocab_rows.get(cls) or 0
            share = nbytes * (_round_up(_round_up(rows, VOCAB_PAD) / tp, 1) / rows) if rows else nbytes / tp
        else:  # expert
            experts = _experts_in(t, layer, cfg)
            if layout.ep:
                share = nbytes * (-(-experts // layout.moe_size)) / experts
            else:
                share = nbytes / layout.moe_size
            share *= pad * shrink
        out[stage][cls] = out[stage].get(cls, 0.0) + share
    if cfg.mla and cfg.kv_lora_rank:
        heads = max(1, cfg.heads // tp)
        copy = heads * cfg.kv_lora_rank * (cfg.qk_nope_head_dim + cfg.v_head_dim) * 2
        for s, r in enumerate(stages):
            n = (
                sum(1 for i in r if i < len(cfg.layer_kinds) and cfg.layer_kinds[i] != "linear")
                if cfg.layer_kinds
                else len(r)
            )
            if n:
                out[s]["mla_copies"] = copy * n
    return out


def largest_stage(stages: list[dict[str, float]]) -> tuple[int, float]:
    """(stage, bytes) of the PP stage that holds the most."""
    totals = [sum(s.values()) for s in stages]
    i = max(range(len(totals)), key=totals.__getitem__)
    return i, totals[i]


#: parts of an MTP layer shared with the target when PP is 1 (vllm/v1/spec_decode/
#: llm_base_proposer.py ``_maybe_share_embeddings`` / ``_maybe_share_lm_head``: "Detected MTP
#: model. Sharing target model embedding / lm_head weights", ``shared_head.head`` replaced by
#: the target's lm_head): the copies the checkpoint stores are freed after loading.
MTP_SHARED = ("mtp_embed", "mtp_head")


def mtp_per_rank(t: Tally, cfg: ModelConfig, layout: Layout, n_layers: int, *, online_fp8: bool = False) -> float:
    """Bytes one rank holds of the first ``n_layers`` MTP layers (vllm/model_executor/models/
    deepseek_mtp.py ``DeepSeekMultiTokenPredictor``: layers ``num_hidden_layers`` ..
    ``+ num_nextn_predict_layers``, each a ``DeepseekV2DecoderLayer`` split like the target's
    layers at the draft's TP, plus ``enorm`` / ``hnorm`` / ``shared_head.norm`` and ``eh_proj``
    — a plain ``nn.Linear``, whole on every rank). Embeddings and head copies are shared
    with the target at PP 1 (:data:`MTP_SHARED`); with PP > 1 the drafter loads its own
    vocabulary embedding ("will be loaded separately"). MLA layers add their bf16
    ``W_UK_T``/``W_UV`` copies as the target's do."""
    sub = Tally(vocab_rows=dict(t.vocab_rows))
    for (cls, i), nbytes in t.mtp.items():
        if i >= n_layers:
            continue
        if cls in MTP_SHARED:
            if cls == "mtp_head" or layout.pp == 1:
                continue
            cls = "vocab"
        sub.add(cls, None, nbytes)
    one = Layout(layout.tp, 1, layout.dp, layout.ep, layout.pcp, layout.dcp)
    parts = per_rank(sub, cfg, one, online_fp8=online_fp8)[0]
    parts.pop("mla_copies", None)
    total = sum(parts.values())
    if cfg.mla and cfg.kv_lora_rank:
        heads = max(1, cfg.heads // max(1, layout.tp))
        total += n_layers * heads * cfg.kv_lora_rank * (cfg.qk_nope_head_dim + cfg.v_head_dim) * 2
    return total


class DraftTally(msgspec.Struct):
    """A separate draft checkpoint (EAGLE / EAGLE-3 / draft_model) reduced for the memory
    model: its tensors by class as vLLM allocates them, without the embeddings and LM head
    of an EAGLE draft (those are sized from the config: :func:`draft_per_rank`), and what
    the sharing rules need to know of the stored ones."""

    tally: Tally = msgspec.field(default_factory=Tally)
    method: str = "eagle"
    embed_stored: bool = False
    head_stored: bool = False
    head_rows: int = 0  # EAGLE-3's stored lm_head rows (its draft vocabulary)


_FLOAT_BYTES = {"F32": 4, "F16": 2, "BF16": 2}


def cast_bytes(nbytes: int, stored: str, dtype_bytes: int) -> int:
    """A stored float tensor's bytes once allocated in a model dtype of ``dtype_bytes`` bytes a
    value (other dtypes as stored)."""
    size = _FLOAT_BYTES.get(stored)
    return nbytes * dtype_bytes // size if size else nbytes


def draft_tally(
    groups: Iterable[tuple[str, int, str, tuple[int, ...], int, int, int]],
    cfg: ModelConfig,
    method: str,
    target_vocab: int | None,
    dtype_bytes: int,
) -> DraftTally:
    """Reduce a draft checkpoint's groups. ``draft_model`` drafts are whole models, tallied
    as the target is. EAGLE / EAGLE-3 (model_executor/models/llama_eagle.py,
    llama_eagle3.py): names without the ``model.`` prefix, EAGLE-3's ``midlayer.`` is
    ``layers.0.``; ``fc`` is a ``ReplicatedLinear`` (whole on every rank); ``d2t`` becomes
    ``draft_id_to_target_id`` (int64, loaded only when the draft vocabulary differs from the
    target's), ``t2d`` is never loaded. An unquantized draft's float tensors are allocated
    in the target's dtype (the draft's ModelConfig takes ``dtype=target.dtype``,
    config/speculative.py), whatever they are stored in."""
    d = DraftTally(method=method)
    cast = cfg.quant.method is None
    for pattern, index, dtype, shape, nbytes, count, per_item in groups:
        if cast:
            nbytes = cast_bytes(nbytes, dtype, dtype_bytes)
        if method == "draft_model":
            one = tally([(pattern, index, dtype, shape, nbytes, count, per_item)], cfg)
            for k, v in one.bytes.items():
                d.tally.add(k[0], k[1], v)
            for k2, v2 in one.vocab_rows.items():
                d.tally.vocab_rows[k2] = max(d.tally.vocab_rows.get(k2, 0), v2)
            for k3, v3 in one.expert_tensors.items():
                d.tally.expert_tensors[k3] = d.tally.expert_tensors.get(k3, 0) + v3
            for k4, v4 in one.per_expert.items():
                d.tally.per_expert[k4] = max(d.tally.per_expert.get(k4, 1), v4)
            continue
        # a group's pattern spells its digits ``#``: ``t2d`` is ``t#d``
        p = strip_wrapper(pattern)
        if p.startswith(("t#d", "mask_hidden")):
            continue
        if p.startswith("d#t"):
            if cfg.vocab is not None and target_vocab is not None and cfg.draft_vocab not in (None, target_vocab):
                d.tally.add("replicated", None, nbytes)
            continue
        if "embed_tokens" in p:
            d.embed_stored = True
            continue
        if p.startswith("lm_head"):
            d.head_stored = True
            d.head_rows = max(d.head_rows, shape[0] if shape else 0)
            continue
        if p.startswith(("fc.", "input_norm", "fc_norm")):
            d.tally.add("replicated", None, nbytes)
            continue
        cls, _ = classify_pattern(p.replace("midlayer.", "layers.0."), dtype, cfg)
        d.tally.add("skipped" if cls == "skipped" else cls, None, nbytes)
    return d


def draft_per_rank(
    d: DraftTally,
    cfg: ModelConfig,
    tp: int,
    pp: int,
    target_hidden: int,
    target_vocab: int | None,
    dtype_bytes: int,
) -> tuple[dict[str, float], dict[str, str]]:
    """Bytes one rank of the last PP stage holds of a separate draft at the draft's TP, by
    part, and how its embeddings / head were counted (``_knowledge.vllm.draft_shares``).
    The decoder layers are split as the target's are (``LlamaDecoderLayer`` at the draft's
    parallel config); an EAGLE draft's embeddings (``VocabParallelEmbedding(vocab_size,
    hidden)``) and EAGLE-3's head (``ParallelLMHead(draft_vocab_size, hidden)``) are sized as
    allocated: the vocabulary padded to 64, split by TP, in the model dtype. A part that
    is shared, or kept only if it differs from the target's ("if_equal"), is not counted
    (so no launch is stopped on a copy vLLM frees); the second value says which."""
    one = Layout(tp, 1)
    parts = per_rank(d.tally, cfg, one)[0]
    parts.pop("mla_copies", None)
    if cfg.mla and cfg.kv_lora_rank:
        heads = max(1, cfg.heads // max(1, tp))
        parts["mla_copies"] = cfg.layers * heads * cfg.kv_lora_rank * (cfg.qk_nope_head_dim + cfg.v_head_dim) * 2
    # "draft_tp" would read as the draft's TP: the TP-split class is "draft_split"
    names = {"tp": "split", "kv": "kv_proj", "qkv": "qkv_proj"}
    out = {f"draft_{names.get(k, k)}": v for k, v in parts.items() if k != "skipped"}
    if d.method == "draft_model":
        return out, {"embed": "own", "head": "own"}
    shares = vllm.draft_shares(
        d.method,
        pp,
        embed_stored=d.embed_stored,
        head_stored=d.head_stored,
        same_width=cfg.hidden == target_hidden,
        head_same_shape=d.head_rows == (target_vocab or 0) and cfg.hidden == target_hidden,
    )

    def vocab_share(rows: int) -> float:
        return float(_round_up(_round_up(rows, VOCAB_PAD) / tp, 1) * cfg.hidden * dtype_bytes)

    if shares.embed == "own" and cfg.vocab:
        out["draft_vocab"] = vocab_share(cfg.vocab)
    if shares.head == "own":
        out["draft_head"] = vocab_share(cfg.draft_vocab or cfg.vocab or d.head_rows)
    return out, {"embed": shares.embed, "head": shares.head}
