"""The per-GPU budget: what the engine may use, what it keeps back, what is left for KV.

vLLM (0.33 semantics)::

    usable    = memory_total x gpu_memory_utilization   (default 0.92 from vLLM 0.33, 0.9 before)
    reserve   = activation peak + CUDA graphs + non-torch + communication buffers
    kv_budget = usable - weights_per_rank - reserve

SGLang: ``usable = memory_total x mem_fraction_static`` holds weights and the KV pool only
(activations and graphs live outside it), so the reserve inside is 0; the default fraction
is SGLang's own heuristic (server_args ``_handle_gpu_memory_settings``).

The default reserve (``--reserve-gib`` overrides it) is an estimate of vLLM's profiling run
at its serving defaults (8192 batched tokens, 1024 sequences):

- activations: the largest single layer's temporaries for 8192 tokens — the hidden state
  x 6 copies, q/k/v for this rank, and the MLP's (dense: 3 x intermediate / TP; MoE: top_k
  x (3 x moe_intermediate per rank + hidden), the fused-MoE caches) — plus fp32 logits for
  1024 sequences over the whole vocabulary;
- CUDA graphs 0.5 GiB (0 with ``--enforce-eager``), non-torch allocations 0.25 GiB, and
  0.5 GiB of NCCL / custom all-reduce buffers when more than one rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flightcheck._knowledge.units import GiB, version
from flightcheck._memory.config import ModelConfig
from flightcheck._memory.kv import KvShape
from flightcheck._memory.weights import Layout

MiB = 1 << 20
BATCHED_TOKENS = 8192
MAX_SEQS = 1024
CUDA_GRAPHS = GiB // 2
NON_TORCH = GiB // 4
COMM = GiB // 2
HEADROOM_MIN = 0.05  # FC403: under 5% of usable memory left over


def default_utilization(engine: str, engine_version: str | None, total: int, layout: Layout) -> tuple[float, str]:
    """(fraction, where it comes from) when the launch does not set one."""
    if engine == "sglang":
        return sglang_fraction(total, layout), "SGLang's default mem_fraction_static for this GPU and layout"
    v = version(engine_version)
    if v is None:
        return 0.9, "vLLM's default (0.9; 0.92 from vLLM 0.33 — the installed version is unknown)"
    if v.release[:2] >= (0, 33):
        return 0.92, f"vLLM {engine_version}'s default"
    return 0.9, f"vLLM {engine_version}'s default"


def sglang_fraction(total: int, layout: Layout) -> float:
    """SGLang's mem_fraction_static heuristic: GPU memory minus a reserve sized by the
    chunked-prefill size and the CUDA-graph batch size it picks for the GPU (in MiB)."""
    mem = total / MiB
    tp = layout.tp
    if mem < 20 * 1024:
        chunk, graph_bs = 2048, 8
    elif mem < 35 * 1024:
        chunk, graph_bs = 2048, (24 if tp < 4 else 80)
    elif mem < 60 * 1024:
        chunk, graph_bs = 4096, (32 if tp < 4 else 160)
    elif mem < 160 * 1024:
        chunk, graph_bs = 8192, (256 if tp < 4 else 512)
    else:
        chunk, graph_bs = 16384, 512
    reserved = 512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + tp * layout.pp / 8 * 1024
    if mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((mem - reserved) / mem, 3)


def default_reserve(
    cfg: ModelConfig, layout: Layout, engine: str, *, eager: bool = False
) -> tuple[int, dict[str, int]]:
    """(bytes, breakdown) kept back from the usable memory besides weights and KV."""
    if engine == "sglang":
        return 0, {}
    t, tp = BATCHED_TOKENS, max(1, layout.tp)
    hidden = cfg.hidden or 0
    if cfg.mla:
        qkv = (
            (cfg.heads // tp) * (cfg.qk_nope_head_dim + cfg.qk_rope_head_dim)
            + (cfg.kv_lora_rank or 0)
            + cfg.qk_rope_head_dim
        )
    else:
        qkv = (cfg.heads // tp + 2 * max(1, cfg.kv_heads // tp)) * cfg.head_dim
    dense = 3 * (cfg.intermediate or 4 * hidden) / tp
    mlp = dense
    if cfg.moe and cfg.moe_intermediate:
        inter = cfg.moe_intermediate if layout.ep else cfg.moe_intermediate / layout.moe_size
        mlp = max(dense, max(1, cfg.top_k) * (3 * inter + hidden))
    act = t * 2 * (6 * hidden + qkv + mlp)
    logits = MAX_SEQS * (cfg.vocab or 0) * 4
    parts = {
        "activations": int(act + logits),
        "cuda_graphs": 0 if eager else CUDA_GRAPHS,
        "non_torch": NON_TORCH,
        "communication": COMM if layout.tp * layout.pp > 1 else 0,
    }
    return sum(parts.values()), parts


_NO_KV = KvShape(0.0)


@dataclass(frozen=True)
class Fit:
    """One rank's budget for one launch: the rank of the PP stage with the least room."""

    total: int
    utilization: float
    usable: int
    reserve: int
    weights: float
    kv_need: float  # for one sequence of max_model_len
    max_model_len: int | None
    max_model_len_fit: int
    stage: int = 0  # which PP stage
    shape: KvShape = _NO_KV  # that stage's KV demand

    @property
    def kv_budget(self) -> float:
        return self.usable - self.weights - self.reserve

    @property
    def weights_fit(self) -> bool:
        return self.weights <= self.usable - self.reserve

    @property
    def kv_fits(self) -> bool:
        return self.max_model_len is None or self.kv_need <= self.kv_budget

    @property
    def fits(self) -> bool:
        return self.weights_fit and self.kv_fits and self.max_model_len_fit > 0

    @property
    def spare(self) -> float:
        """What is left once weights, reserve and one max-length sequence are placed."""
        return self.kv_budget - self.kv_need


def usable_bytes(total: int, utilization: float) -> int:
    """vLLM's requested memory: ceil(total x utilization)."""
    return math.ceil(total * utilization)
