"""Is a parallel layout valid for the model at all? (FC404, and the suggestions' filter)

The engine refuses, after the weights have loaded or at start-up, a layout where:
attention heads do not divide by TP (``Total number of attention heads must be divisible
by tensor parallel size``); KV heads neither divide by TP nor TP by them; a rank's share of
an MoE (or block-FP8 dense) intermediate size is not a multiple of the quantization block
(128 for block FP8: ``... is not divisible by weight quantization block_n``; the group size
for MXFP4 / NVFP4 / INT4); fewer experts than expert-parallel ranks; more PP stages than
layers.
"""

from __future__ import annotations

from flightcheck._memory.config import ModelConfig
from flightcheck._memory.weights import Layout


def problems(cfg: ModelConfig, layout: Layout) -> list[str]:
    """Why ``layout`` cannot run ``cfg`` (empty when it can)."""
    out: list[str] = []
    tp = layout.tp
    if cfg.heads and cfg.heads % tp:
        out.append(f"{cfg.heads} attention heads do not divide by TP {tp}")
    if not cfg.mla and cfg.kv_heads and tp > 1:
        if cfg.kv_heads >= tp and cfg.kv_heads % tp:
            out.append(f"{cfg.kv_heads} KV heads do not divide by TP {tp}")
        elif cfg.kv_heads < tp and tp % cfg.kv_heads:
            out.append(f"TP {tp} is not a multiple of the {cfg.kv_heads} KV heads")
    align = cfg.quant.alignment
    if cfg.moe and cfg.moe_intermediate:
        if cfg.experts and layout.ep and cfg.experts < layout.moe_size:
            out.append(
                f"{cfg.experts} experts cannot be spread over "
                f"{layout.moe_size} expert-parallel ranks (at least one each)"
            )
        if not layout.ep:
            per = cfg.moe_intermediate / layout.moe_size
            if per != int(per):
                out.append(
                    f"the MoE intermediate size {cfg.moe_intermediate} does not divide by {layout.moe_size} ranks"
                )
            elif align and int(per) % align:
                out.append(
                    f"the MoE intermediate size per rank, {cfg.moe_intermediate} / {layout.moe_size} = {int(per)}, "
                    f"is not a multiple of the {cfg.quant.method} block of {align}"
                )
    if cfg.quant.method == "fp8-block" and align:
        # dense MLPs (all layers of a dense model, the first layers of DeepSeek-style MoEs)
        # and shared experts are TP-split whatever EP says
        sizes = []
        if cfg.intermediate and (not cfg.moe or cfg.first_dense):
            sizes.append(("dense intermediate", cfg.intermediate))
        if cfg.moe and cfg.shared_intermediate:
            sizes.append(("shared-expert intermediate", cfg.shared_intermediate))
        for what, size in sizes:
            per = size / tp
            if per == int(per) and int(per) % align:
                out.append(
                    f"the {what} size per rank, {size} / {tp} = {int(per)}, "
                    f"is not a multiple of the FP8 block of {align}"
                )
    if cfg.layers and layout.pp > cfg.layers:
        out.append(f"PP {layout.pp} exceeds the {cfg.layers} layers")
    return out
