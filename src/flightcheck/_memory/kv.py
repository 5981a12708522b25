"""KV cache bytes per rank, as vLLM's KV cache specs size them.

- Standard attention, per layer per token: ``2 x max(1, kv_heads // TP) x head_dim x
  kv_bytes`` (KV heads are replicated once TP exceeds them).
- MLA (``kv_lora_rank`` in the config): ``(kv_lora_rank + qk_rope_head_dim) x kv_bytes``
  per layer per token, on every TP rank (the latent cache is not split). ``fp8_ds_mla``
  stores 656 bytes a layer a token.
- Sliding-window layers hold at most ``sliding_window`` tokens of a sequence.
- Linear-attention layers (Mamba, gated delta net, KDA) hold a fixed state per sequence.
- ``kv_bytes``: ``auto`` = the model dtype; fp8 kinds 1 byte; bf16/fp16 2.
"""

from __future__ import annotations

import msgspec

from flightcheck._memory.config import ModelConfig

FP8_DS_MLA_BYTES = 656  # per layer per token (DeepSeek-V3.2 sparse MLA cache)


def kv_bytes(kv_cache_dtype: str, cfg: ModelConfig) -> float:
    """Bytes per cached element for ``--kv-cache-dtype``."""
    d = (kv_cache_dtype or "auto").lower()
    if d == "auto":
        return float(cfg.dtype_bytes)
    if d.startswith("fp8"):
        return 1.0
    if d == "nvfp4":
        return 0.5 + 1 / 16  # 4-bit values + an fp8 scale per 16
    if d in ("float32", "fp32"):
        return 4.0
    return 2.0


class KvShape(msgspec.Struct, frozen=True):
    """One rank's KV demand for a sequence of L tokens:
    ``full x L + sliding x min(L, window) + fixed``."""

    full: float  # bytes per token, layers that keep every token
    sliding: float = 0.0  # bytes per token, sliding-window layers
    window: int = 0
    fixed: float = 0.0  # bytes per sequence (linear-attention state)
    per_layer: float = 0.0  # bytes per token of one attention layer (full or sliding)
    n_full: int = 0
    n_sliding: int = 0
    #: decode context parallel: the ranks a sequence's cached tokens are spread over. vLLM
    #: 0.33 shards the token positions of every attention cache (``AttentionSpec.dcp_sharded``)
    #: across the DCP group: ``FullAttentionSpec.max_memory_usage_bytes`` counts
    #: ``cdiv(max_model_len, dcp)`` tokens (vllm/v1/kv_cache_interface.py) and a block spans
    #: ``block_size x dcp`` tokens (vllm/v1/core/single_type_kv_cache_manager.py). Hybrid
    #: layouts with DCP are full attention (and Mamba) only (kv_cache_coordinator.py).
    dcp: int = 1

    def bytes_for(self, length: int) -> float:
        return self.full * _cdiv(length, self.dcp) + self.sliding * min(length, self.window) + self.fixed

    @property
    def per_token(self) -> float:
        """What a token costs once past every window (the spec's kv_bytes_per_token)."""
        return self.full if (self.full or not self.sliding) else self.sliding

    def max_len(self, budget: float, multiple: int = 16, length_cost: float = 0.0) -> int:
        """The largest length that fits ``budget``, rounded down to ``multiple``. ``length_cost``:
        bytes outside the KV cache that the engine allocates per token of max_model_len (the V2
        runner's ``all_token_ids``), which a longer length takes from the same budget."""
        room = budget - self.fixed
        if room <= 0:
            return 0
        # per token of the sequence, on this rank
        full = self.full / max(1, self.dcp) + max(0.0, length_cost)
        both = full + self.sliding
        if both <= 0:
            return 1 << 62  # nothing grows with length
        n = room / both
        if self.sliding and n > self.window:
            n = (room - self.sliding * self.window) / full if full else float(1 << 62)
        return int(n) // multiple * multiple


def per_layer_token(cfg: ModelConfig, tp: int, kv_cache_dtype: str) -> float:
    """Bytes one attention layer caches per token on one rank."""
    b = kv_bytes(kv_cache_dtype, cfg)
    if cfg.mla:
        if (kv_cache_dtype or "").lower() == "fp8_ds_mla":
            return float(FP8_DS_MLA_BYTES)
        return (cfg.kv_lora_rank or 0) * b + cfg.qk_rope_head_dim * b
    kv_rank = max(1, (cfg.kv_heads or cfg.heads) // max(1, tp))
    return 2 * kv_rank * cfg.head_dim * b


def linear_state(cfg: ModelConfig, tp: int) -> float:
    """Bytes of one linear-attention layer's per-sequence state on one rank (0 if unknown).

    Gated delta net / KDA: a conv state ((key_dim x 2 + value_dim) / TP x (kernel - 1)) in
    the model dtype plus a recurrent state (v_heads / TP x k_dim x v_dim) in float32.
    Mamba2: conv ((d_inner + 2 x groups x d_state) / TP x (kernel - 1)) and SSM state
    (heads / TP x head_dim x d_state) in float32.
    """
    L, tp = cfg.linear, max(1, tp)

    def g(*keys: str) -> int | None:
        for k in keys:
            v = L.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
        return None

    v_heads, k_heads = g("linear_num_value_heads", "num_heads"), g("linear_num_key_heads", "num_heads")
    k_dim, v_dim = g("linear_key_head_dim", "head_dim"), g("linear_value_head_dim", "head_dim")
    kernel = g("linear_conv_kernel_dim", "short_conv_kernel_size", "conv_kernel_size") or 4
    if v_heads and k_heads and k_dim and v_dim:
        conv = (2 * k_heads * k_dim + v_heads * v_dim) / tp * (kernel - 1) * cfg.dtype_bytes
        return conv + v_heads / tp * k_dim * v_dim * 4
    d_state, heads, head_dim = (
        g("mamba_d_state", "ssm_state_size", "state_size"),
        g("mamba_num_heads", "mamba_n_heads"),
        g("mamba_head_dim"),
    )
    if d_state and heads and head_dim:
        groups = g("n_groups", "mamba_n_groups") or 1
        kernel = g("mamba_d_conv", "conv_kernel") or 4
        conv = (heads * head_dim + 2 * groups * d_state) / tp * (kernel - 1) * cfg.dtype_bytes
        return conv + heads / tp * head_dim * d_state * 4
    return 0.0


def kv_shape(cfg: ModelConfig, layers: range, tp: int, kv_cache_dtype: str, dcp: int = 1) -> KvShape:
    """The KV demand of the decoder layers in ``layers`` (one PP stage) on one rank; ``dcp``:
    the decode-context-parallel ranks the tokens are spread over (see :class:`KvShape`)."""
    per = per_layer_token(cfg, tp, kv_cache_dtype)
    kinds = [cfg.layer_kinds[i] if i < len(cfg.layer_kinds) else "full" for i in layers]
    full = sum(1 for k in kinds if k == "full")
    sliding = sum(1 for k in kinds if k == "sliding")
    linear = sum(1 for k in kinds if k == "linear")
    return KvShape(
        full * per,
        sliding * per,
        cfg.sliding_window or 0,
        linear * linear_state(cfg, tp),
        per,
        full,
        sliding,
        max(1, dcp),
    )


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class Capacity(msgspec.Struct, frozen=True):
    """What vLLM logs once the KV cache is sized: blocks, "GPU KV cache size: N tokens" and
    "Maximum concurrency for L tokens per request: Cx"."""

    num_blocks: int
    tokens: int
    concurrency: float


def capacity(
    shape: KvShape,
    budget: float,
    max_len: int,
    *,
    block: int = 16,
    batched_tokens: int = 8192,
    by_concurrency: bool = True,
) -> Capacity:
    """vLLM's KV capacity for ``budget`` bytes (vllm/v1/core/kv_cache_planning.py,
    kv_cache_utils.py): layers are grouped by kind (with full and sliding layers both
    present, groups of ``min(n_full, n_sliding)`` layers sharing one block pool); a block
    id costs ``block x per_layer x group_size`` bytes; a request of ``max_len`` takes
    ``cdiv(max_len, block)`` blocks in each full group and ``cdiv(min(window - 1 +
    batched_tokens, max_len), block) + 1`` in each sliding group. Tokens are
    ``int(num_blocks / blocks_per_request x max_len)`` (``by_concurrency``, vLLM >= 0.21),
    else ``num_blocks // groups x block``. One of the blocks is vLLM's null block."""
    n_full, n_slide = shape.n_full, shape.n_sliding
    if shape.per_layer <= 0 or (n_full + n_slide) == 0 or budget <= 0 or max_len <= 0:
        return Capacity(0, 0, 0.0)
    size = min(n_full, n_slide) if (n_full and n_slide) else (n_full or n_slide)
    g_full, g_slide = _cdiv(n_full, size) if n_full else 0, _cdiv(n_slide, size) if n_slide else 0
    per_block = block * shape.per_layer * size
    blocks = int((budget - shape.fixed) // per_block) if budget > shape.fixed else 0
    span = block * max(1, shape.dcp)  # a block holds block x dcp tokens of a sequence under DCP
    need = g_full * _cdiv(max_len, span)
    if g_slide:
        need += g_slide * (_cdiv(min(shape.window - 1 + batched_tokens, max_len), block) + 1)
    conc = blocks / need if need else 0.0
    tokens = int(conc * max_len) if by_concurrency else blocks // (g_full + g_slide) * span
    return Capacity(blocks, tokens, conc)
