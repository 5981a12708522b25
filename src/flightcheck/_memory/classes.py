"""Which share of each tensor a rank holds: the tensor classes of memory.md.

A group of tensors (a name pattern with digits as ``#``) is one of:

- ``replicated`` — norms, MoE routers, ``e_score_correction_bias``, MLA's ``q_a_proj`` and
  ``kv_a_proj_with_mqa``, Kimi-K3's latent MoE projections (``routed_expert_up/down_proj``),
  biases of row-parallel layers: whole on every rank;
- ``kv`` — k/v projections: split by TP down to one KV head a rank, replicated beyond;
- ``qkv`` — fused q/k/v projections: the q part split by TP, the k/v part as ``kv``;
- ``tp`` — every other linear layer of a decoder layer (q/o, dense MLP, shared experts);
- ``vocab`` / ``head`` — embeddings / the LM head: the vocabulary, padded to 64, split by
  TP (the first / the last pipeline stage);
- ``expert`` — routed experts: split by TP (EP off) or owned whole by an EP rank;
- ``skipped`` — never loaded: MTP layers (index >= num_hidden_layers), ``inv_freq``, a
  tied LM head stored anyway.

The names of Llama / Mistral / Qwen2-3 / Mixtral / Qwen-MoE / DeepSeek-V2-3 / Kimi-K2 /
gpt-oss are covered by these rules; other architectures fall back to them by name.
"""

from __future__ import annotations

import re

from flightcheck._memory.config import ModelConfig

_WRAPPERS = (
    "model.language_model.",
    "language_model.model.",
    "language_model.",
    "model.",
    "transformer.",
    "backbone.",
    "decoder.",
)
_CONTAINER = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer|decoder_layers)\.$")
_AUX = ("vision", "visual", "vit.", "image", "audio", "mm_projector", "multi_modal_projector", "patch_embed", "speech")
_VOCAB = ("embed_tokens", "wte.", "word_embeddings", "tok_embeddings", "embedding.weight", "embeddings.weight")
_HEAD = ("lm_head", "unembedding", "output.weight", "embed_out")
_ROUTER = re.compile(
    r"(?:^|\.)(?:gate|router|gating|gate_inp)\.(?:weight|bias|e_score_correction_bias)$|e_score_correction_bias|shared_expert_gate"
)
# Kimi-K3's latent MoE projections are ReplicatedLinear (vllm/models/kimi_k3/nvidia/model.py)
_REPLICATED = (
    "q_a_proj",
    "kv_a_proj_with_mqa",
    "q_a_layernorm",
    "kv_a_layernorm",
    "routed_expert_down_proj",
    "routed_expert_up_proj",
)
_ROW_BIAS = re.compile(r"(?:o_proj|down_proj|w2|dense_4h_to_h|out_proj|c_proj|fc2|wo)\.bias$")
_KV = re.compile(r"(?:^|\.)(?:k_proj|v_proj|key|value)\.")
_QKV = re.compile(r"(?:^|\.)(?:qkv_proj|query_key_value|c_attn|Wqkv|W_pack|qkv)\.")


def is_encoder(pattern: str) -> bool:
    """Whether a tensor belongs to a vision / audio tower or its projector (``_AUX``)."""
    return any(a in pattern for a in _AUX)


def strip_wrapper(pattern: str) -> str:
    """``model.layers.#.mlp`` -> ``layers.#.mlp`` (one known wrapper prefix removed)."""
    for w in _WRAPPERS:
        if pattern.startswith(w):
            return pattern[len(w) :]
    return pattern


def classify(pattern: str, index: int, dtype: str, cfg: ModelConfig) -> tuple[str, int | None]:
    """(class, decoder layer or None) of a group; see the module docstring."""
    cls, layered = classify_pattern(pattern, dtype, cfg)
    return with_layer(cls, layered, index, cfg)


def with_layer(cls: str, layered: bool, index: int, cfg: ModelConfig) -> tuple[str, int | None]:
    """:func:`classify` from :func:`classify_pattern`'s answer and the group's index."""
    if not layered:
        return cls, None
    if cfg.layers and index >= cfg.layers:
        return "skipped", index  # MTP / next-token-prediction layers: vLLM skips them
    return cls, index


def classify_pattern(pattern: str, dtype: str, cfg: ModelConfig, *, mtp: bool = False) -> tuple[str, bool]:
    """(class of the pattern in a layer vLLM loads, whether its index is a decoder layer):
    the part of :func:`classify` that does not depend on the layer, so a model's ~1,000
    groups (61 layers of the same few dozen patterns) are classified once a pattern.
    ``mtp``: the class the tensor has in vLLM's MTP draft (``deepseek_mtp.py``): ``eh_proj``
    a plain ``nn.Linear`` (whole on every rank), ``embed_tokens`` / ``shared_head.head`` the
    copies shared with the target (``mtp_embed`` / ``mtp_head``)."""
    p = strip_wrapper(pattern)
    if mtp:
        if "shared_head.head" in p:
            return "mtp_head", True
        if "embed_tokens" in p:
            return "mtp_embed", True
        if "eh_proj" in p:
            return "replicated", True
    aux = is_encoder(pattern)
    k = p.find("#")
    # the first index is a decoder layer only right after a layer container (layers.#)
    layered = bool(not aux and k > 0 and _CONTAINER.search(p[:k]))
    if p.endswith("inv_freq") or p.startswith("mtp.") or ".mtp." in p:
        return "skipped", layered
    if aux:
        return "tp", False  # vision / audio towers: TP-sharded in vLLM, first PP stage
    if not layered and any(h in p for h in _HEAD) and "embed_tokens" not in p:
        return ("skipped" if cfg.tie_embeddings else "head"), False
    if any(v in p for v in _VOCAB):
        return "vocab", layered
    if dtype == "" and p.endswith("experts.#.*"):
        return "expert", layered
    if ".experts." in p and "shared_expert" not in p:
        return "expert", layered  # fused experts (gpt-oss w13/w2 blocks, scales, biases)
    last = p.rsplit(".", 2)
    module = last[-2] if len(last) >= 2 else p
    if (
        "norm" in module
        or module.startswith("ln")
        or _ROUTER.search(p)
        or any(r in p for r in _REPLICATED)
        or _ROW_BIAS.search(p)
    ):
        return "replicated", layered
    if _QKV.search("." + p):
        return "qkv", layered
    if _KV.search("." + p) and not cfg.mla:
        return "kv", layered
    return "tp", layered
