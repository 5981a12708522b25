"""Speculative decoding in vLLM (vllm/config/speculative.py, vllm/engine/arg_utils.py,
v1/spec_decode/): what a launch's speculative config resolves to, a separate draft
checkpoint and what it shares with the target.
"""

from __future__ import annotations

from typing import Any

from flightcheck._knowledge.vllm.reader import _json_arg

# ---- speculative decoding (vllm/config/speculative.py, vllm/engine/arg_utils.py) ---------
#
# Read from 0.33.0's source and checked in the 0.32.0 wheel, whose ``__post_init__`` differs
# only by Medusa / MLP-speculator detection (removed in 0.33) and the Transformers-backend
# MTP (added), with the same ``--spec-method`` / ``--spec-model`` / ``--spec-tokens``; the
# memory terms (drafter on the last PP rank, MTP embedding / head sharing, the proposer's
# buffers) read the same in 0.21.0 and 0.25.0 too, but 0.21 lacks the shortcuts and keeps
# ``longcat_flash_mtp`` apart, so older versions get a note, not a figure.
SPEC_DECODE_MEMORY_SINCE = "0.32.0"
#: ``--speculative-config`` / ``-sc`` (JSON) and its shortcuts ``--spec-method``,
#: ``--spec-model``, ``--spec-tokens`` (arg_utils.py ``add_cli_args``); a shortcut and the
#: same key in the JSON are refused together (``create_speculative_config``: "... are
#: mutually exclusive"). Canonical spellings, as the reader renders the launch's flags.
SPECULATIVE_CONFIG_FLAG = "--speculative-config"
SPECULATIVE_SHORTCUTS: dict[str, str] = {
    "--spec-method": "method",
    "--spec-model": "model",
    "--spec-tokens": "num_speculative_tokens",
}
#: ``MTPModelTypes``: a method spelled as one of these is rewritten to ``"mtp"``
#: (``SpeculativeConfig.__post_init__``: "method `%s` is deprecated and replaced with mtp")
MTP_METHODS: frozenset[str] = frozenset(
    {
        "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp",
        "glm_ocr_mtp", "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp",
        "qwen4_exp_mtp", "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp", "minimax_m3_mtp",
        "bailing_hybrid_mtp", "mtp", "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp", "step5_mtp",
        "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp", "inkling_mtp", "glm5_next_mtp",
    }
)  # fmt: skip
#: methods without a draft model on the GPU: the n-gram proposers match the prompt (CPU /
#: a few index buffers), suffix decoding a CPU tree; ``custom_class`` a user module
#: (``__post_init__``: draft_model_config = the target's, no weights loaded)
NO_DRAFT_METHODS: frozenset[str] = frozenset({"ngram", "ngram_gpu", "suffix", "custom_class"})
#: a target's model_type -> the draft's when the draft is the target's own checkpoint
#: (``SpeculativeConfig.hf_config_override``), with the config key holding the number of
#: MTP layers (``n_predict``); the plain ``num_nextn_predict_layers`` cases
MTP_TARGETS: dict[str, str] = {
    "deepseek_v3": "deepseek_mtp",
    "deepseek_v32": "deepseek_mtp",
    "glm_moe_dsa": "deepseek_mtp",
    "deepseek_mtp": "deepseek_mtp",
    "kimi_k3": "kimi_k3_mtp",
    "pangu_ultra_moe": "pangu_ultra_moe_mtp",
    "ernie4_5_moe": "ernie_mtp",
    "qwen3_next": "qwen3_next_mtp",
    "longcat_flash": "longcat_flash_mtp",
    "exaone_moe": "exaone_moe_mtp",
    "hy_v3": "hy_v3_mtp",
    "hy_v4": "hy_v4_mtp",
}


class SpecDecode:
    """What a launch's speculative decoding resolves to, as far as memory cares
    (``SpeculativeConfig.__post_init__``). ``error``: the engine refuses the config."""

    __slots__ = (
        "draft_tp",
        "error",
        "kv_cache_dtype",
        "method",
        "model",
        "mtp_layers",
        "num_speculative_tokens",
        "revision",
    )

    def __init__(
        self,
        method: str | None,
        num_speculative_tokens: int | None = None,
        model: str | None = None,
        draft_tp: int | None = None,
        mtp_layers: int = 0,
        error: str | None = None,
        kv_cache_dtype: str | None = None,
        revision: str | None = None,
    ) -> None:
        self.method, self.num_speculative_tokens, self.model = method, num_speculative_tokens, model
        self.draft_tp, self.mtp_layers, self.error = draft_tp, mtp_layers, error
        #: the draft's own KV cache dtype (``SpeculativeConfig.kv_cache_dtype``: "When
        #: ``None``, the draft inherits the target model's ``--kv-cache-dtype``"; applied by
        #: llm_base_proposer.py ``_create_draft_vllm_config``), and the draft's revision
        self.kv_cache_dtype, self.revision = kv_cache_dtype, revision

    @property
    def on_gpu(self) -> bool:
        """Whether a draft is loaded onto the GPU (its weights and its KV cache layers)."""
        return self.error is None and self.method not in NO_DRAFT_METHODS

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__ if getattr(self, k) not in (None, 0)}


def _custom_path(model: str | None) -> bool:
    """``SpeculativeConfig._is_custom_proposer_path``: a dotted import path."""
    if model is None or model.startswith(("http://", "https://", "file://")) or "/" in model:
        return False
    parts = model.split(".")
    return len(parts) >= 2 and all(p.isidentifier() for p in parts)


def speculative_given(flags: list[str]) -> tuple[dict[str, Any] | None, str | None]:
    """The speculative config the flags give (arg_utils.py ``create_speculative_config``):
    the JSON, the shortcuts merged in, keys' dashes as underscores; or why vLLM refuses it.
    Read once, into ``Intent.speculative_config`` / ``speculative_error``, by the launch's
    reader (``_launch``); everything downstream resolves that with :func:`resolve_speculative`."""
    doc, err = _json_arg(flags, SPECULATIVE_CONFIG_FLAG)
    if err is not None:
        return None, err
    shortcuts: list[tuple[str, str, str]] = []
    for item in flags:
        name, _, value = item.partition("=")
        if name in SPECULATIVE_SHORTCUTS:
            shortcuts.append((name, SPECULATIVE_SHORTCUTS[name], value))
    for flag, key, value in shortcuts:
        doc = {} if doc is None else doc
        if key in doc:
            return None, f"{flag} and {SPECULATIVE_CONFIG_FLAG}['{key}'] are mutually exclusive"
        doc[key] = int(value) if key == "num_speculative_tokens" and value.isdigit() else value
    if doc is None:
        return None, None
    return {str(k).replace("-", "_"): v for k, v in doc.items()}, None


def _pos_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def speculative(
    flags: list[str], target: dict[str, Any] | None, target_model: str | None, tp: int
) -> SpecDecode | None:
    """:func:`resolve_speculative` of what ``flags`` give (:func:`speculative_given`)."""
    doc, err = speculative_given(flags)
    return resolve_speculative(doc, err, target, target_model, tp)


def resolve_speculative(
    doc: dict[str, Any] | None, err: str | None, target: dict[str, Any] | None, target_model: str | None, tp: int
) -> SpecDecode | None:
    """The launch's speculative decoding (None: off), from the config the command gives
    (``doc``, or ``err``: why vLLM refuses it; :func:`speculative_given`), resolved as vLLM 0.33's
    ``SpeculativeConfig.__post_init__`` (vllm/config/speculative.py) does for what memory
    depends on: the method (inferred from ``model`` when unset: ``ngram`` / a dotted class
    path / else ``draft_model``; an ``*_mtp`` method name becomes ``mtp``; ``mtp`` without a
    model drafts with the target's own checkpoint; a draft model named ``eagle-`` /
    ``eagle3`` is EAGLE / EAGLE-3; the target's own checkpoint as draft is MTP when
    ``hf_config_override`` rewrites its model_type to an MTP one), the MTP layers
    (``n_predict`` = ``num_nextn_predict_layers``), ``num_speculative_tokens`` (defaults to
    ``n_predict``; must divide by it when larger) and the draft's TP
    (``_verify_and_get_draft_tp``: 1 or the target's, the target's when unset).
    ``target``: the target's config.json as stored (a multimodal wrapper's outer config)."""
    if doc is None:
        return SpecDecode(None, error=err) if err else None
    method = doc.get("method")
    method = method if isinstance(method, str) else None
    model = doc.get("model") if isinstance(doc.get("model"), str) else None
    n = _pos_int(doc.get("num_speculative_tokens"))
    if doc.get("num_speculative_tokens") is not None and n is None:
        return SpecDecode(method, error="num_speculative_tokens must be a positive integer")
    draft_tp = doc.get("draft_tensor_parallel_size")
    if method is None:
        method = (
            "custom_class" if _custom_path(model) else ("ngram" if model in ("ngram", "[ngram]") else "draft_model")
        )
    if method in MTP_METHODS:
        method = "mtp"
    if model is None and n is not None:
        if method == "mtp":
            model = target_model  # "use the draft model from the same model"
        elif method in ("ngram", "[ngram]", "ngram_gpu", "suffix", "extract_hidden_states"):
            model = method
        elif method != "custom_class":
            return SpecDecode(method, n, error="num_speculative_tokens was provided but without speculative model.")
    if method == "[ngram]":
        method = "ngram"
    if method in NO_DRAFT_METHODS or method == "extract_hidden_states" or model is None:
        return SpecDecode(method, n, model)
    tcfg = target or {}
    own = model == target_model
    draft_type = MTP_TARGETS.get(str(tcfg.get("model_type") or "")) if own else None
    # ``hf_config_override`` reads n_predict from the top-level config, Kimi-K3's from its
    # ``text_config`` (the top-level model_type decides the rewrite)
    raw_inner = tcfg.get("text_config")
    inner: dict[str, Any] = raw_inner if isinstance(raw_inner, dict) else {}
    n_predict = (
        _pos_int(tcfg.get("num_nextn_predict_layers")) or _pos_int(inner.get("num_nextn_predict_layers"))
        if draft_type
        else None
    )
    low = model.lower()
    if method in ("eagle", "eagle3", "dflash", "dspark"):
        pass
    elif "eagle-" in low:
        method = "eagle"
    elif "eagle3" in low:
        method = "eagle3"
    elif "dflash" in low:
        method = "dflash"
    elif "dspark" in low:
        method = "dspark"
    elif draft_type is not None:
        method = "mtp"
        if n is None:
            # the MTP branch compares ``self.num_speculative_tokens > 1`` before defaulting
            # it to n_predict: vLLM 0.33 dies with a TypeError (conformance-tested)
            return SpecDecode(method, n, model, error="num_speculative_tokens is required for MTP (vLLM 0.33 raises)")
    if method == "mtp" and n_predict is None and own:
        return SpecDecode(method, n, model, error="the target's config has no MTP layers (num_nextn_predict_layers)")
    if n_predict is not None:
        if n is None:
            n = n_predict
        elif n > n_predict and n % n_predict:
            return SpecDecode(method, n, model, error=f"num_speculative_tokens:{n} must be divisible by {n_predict=}")
    if n is None:
        return SpecDecode(
            method, n, model, error="A speculative model was provided, but `num_speculative_tokens` was not provided"
        )
    if draft_tp is None:
        draft_tp = tp
    elif draft_tp not in (1, tp):
        return SpecDecode(
            method,
            n,
            model,
            error=f"draft_tensor_parallel_size={draft_tp} cannot be other value than 1 or target model "
            "tensor_parallel_size",
        )
    if method == "draft_model" and draft_tp != tp:
        # v1/spec_decode/draft_model.py ``_raise_if_draft_tp_mismatch`` (the proposer's
        # __init__, at startup): a separate draft model runs at the target's TP only
        return SpecDecode(
            method,
            n,
            model,
            error=f"Currently, 'draft_tensor_parallel_size' and 'tensor_parallel_size' must be the same. "
            f"Got {draft_tp} and {tp}.",
        )
    kv_dtype, revision = doc.get("kv_cache_dtype"), doc.get("revision")
    return SpecDecode(
        method,
        n,
        model,
        int(draft_tp),
        (n_predict or 0) if method == "mtp" else 0,
        kv_cache_dtype=kv_dtype if isinstance(kv_dtype, str) else None,
        revision=revision if isinstance(revision, str) else None,
    )


# ---- a separate draft checkpoint (EAGLE / EAGLE-3 / draft_model) --------------------------
#
# Read from 0.33.0's source; the files below are the same in the 0.32.0 wheel (llama_eagle.py,
# llama_eagle3.py identical; draft_model.py and llm_base_proposer.py's sharing identical but
# for a comment), so the counting is gated like the MTP terms (``SPEC_DECODE_MEMORY_SINCE``).
#
#: methods whose draft is a checkpoint of its own that flightcheck reads and counts:
#: ``eagle`` (model_executor/models/llama_eagle.py ``EagleLlamaForCausalLM``), ``eagle3``
#: (llama_eagle3.py ``Eagle3LlamaForCausalLM``) and ``draft_model`` (v1/spec_decode/
#: draft_model.py ``DraftModelProposer``: a whole model, embeddings and head its own). Other
#: methods with a draft checkpoint (dflash, dspark) keep a note.
SEPARATE_DRAFT_METHODS: frozenset[str] = frozenset({"eagle", "eagle3", "draft_model"})


def separate_draft(spec: SpecDecode | None, target_model: str | None) -> str | None:
    """The draft checkpoint a launch loads besides the target (``SpeculativeConfig.model``),
    when it is one flightcheck counts (:data:`SEPARATE_DRAFT_METHODS`); None otherwise (off,
    refused, n-gram, or the target's own MTP layers)."""
    if spec is None or not spec.on_gpu or spec.method not in SEPARATE_DRAFT_METHODS:
        return None
    if not spec.model or spec.model == target_model:
        return None
    return spec.model


class DraftShares:
    """What a separate draft shares with the target once loaded (v1/spec_decode/
    llm_base_proposer.py ``load_model``, ``_maybe_share_embeddings``,
    ``_maybe_share_lm_head``; the memory profile runs after ``empty_cache``, so a shared
    copy's bytes are freed): ``embed`` / ``head``: "own" (allocated and kept), "shared"
    (the target's is used; the draft's copy freed or never allocated), "if_equal" (kept
    unless its values equal the target's, which only the loaded tensors tell)."""

    __slots__ = ("embed", "head")

    def __init__(self, embed: str, head: str) -> None:
        self.embed, self.head = embed, head


def draft_shares(
    method: str,
    pp: int,
    *,
    embed_stored: bool,
    head_stored: bool,
    same_width: bool,
    head_same_shape: bool,
) -> DraftShares:
    """The sharing rules of vLLM 0.33's proposer for a separate draft:

    - ``draft_model``: nothing shared (draft_model.py overrides both ``_maybe_share_*`` to
      ``pass``);
    - EAGLE / EAGLE-3 embeddings (``VocabParallelEmbedding(vocab_size, hidden)``, always
      allocated): with PP 1, shared when the checkpoint has none (``has_own_embed_tokens``
      is set by ``process_eagle_weight`` only for a stored ``embed_tokens``) or when the
      stored one equals the target's, and never when the widths differ; with PP > 1 "The
      draft's vocab embedding will be loaded separately": kept;
    - the LM head: EAGLE (``EagleLlamaForCausalLM``) has none and always uses the target's;
      EAGLE-3's ``ParallelLMHead(draft_vocab_size, hidden)`` is kept when stored
      (``has_own_lm_head``) unless equal to the target's (only possible at the same shape),
      shared when not stored."""
    if method == "draft_model":
        return DraftShares("own", "own")
    if pp > 1 or not same_width:
        embed = "own"
    else:
        embed = "if_equal" if embed_stored else "shared"
    if method == "eagle" or not head_stored:
        head = "shared"
    else:
        head = "if_equal" if head_same_shape else "own"
    return DraftShares(embed, head)


#: EAGLE-3's draft-to-target vocabulary map: ``draft_id_to_target_id``, int64 of
#: ``draft_vocab_size``, a parameter only when the draft vocabulary differs from the
#: target's (llama_eagle3.py); ``t2d`` is never loaded (``load_weights``: ``continue``).
#: ``fc`` fusing the target's hidden states is a ``ReplicatedLinear`` (EAGLE: 2 x hidden ->
#: hidden; EAGLE-3: target_hidden x num_aux_hidden_states -> hidden): whole on every rank.
EAGLE3_D2T_BYTES = 8
