"""Kimi-K3 (vLLM 0.33's kimi_k3: KDA linear attention + MLA full attention, latent MoE,
MXFP4 experts) on 8x B300 at TP 8 with 1,048,576 tokens: predicted to fit.

The groups are the published checkpoint's tensor listing (moonshotai/Kimi-K3, 96 shards,
497,220 tensors, 1,560,936,091,448 bytes — a public model report found with find_string
'"model_type": "kimi_k3"'), fed to the model as the checkpoint scan would group them; the
config is tests/fixtures/models/kimi-k3.json, copied from the same report's config.json.
"""

from __future__ import annotations

import math

from flightcheck._memory import MemoryModel
from flightcheck._memory.config import parse
from flightcheck._memory.model import resolve_reserve, resolve_utilization
from flightcheck._memory.weights import Layout, tally
from support.ckptgen import load_config

GiB = 1 << 30
B300_BYTES = 288403439616  # src/flightcheck/_examples/b300.json
CHECKPOINT_BYTES = 1_560_936_091_448
LAYERS = 93
MLA = [i - 1 for i in (*range(4, 93, 4), 93)]  # full_attn_layers are 1-based
KDA = [i for i in range(LAYERS) if i not in MLA]
_B = {"BF16": 2, "F32": 4, "U8": 1}

P = "language_model.model."


def _t(name: str, index: int, dtype: str, *shape: int) -> tuple[str, int, str, tuple[int, ...], int, int, int]:
    return (P + name, index, dtype, shape, math.prod(shape) * _B[dtype], 1, 1)


def groups() -> list[tuple[str, int, str, tuple[int, ...], int, int, int]]:
    g = [
        ("language_model.lm_head.weight", -1, "BF16", (163840, 7168), 163840 * 7168 * 2, 1, 1),
        _t("embed_tokens.weight", -1, "BF16", 163840, 7168),
        _t("norm.weight", -1, "BF16", 7168),
        _t("output_attn_res_norm.weight", -1, "BF16", 7168),
        _t("output_attn_res_proj.weight", -1, "BF16", 1, 7168),
    ]
    for i in range(LAYERS):
        L = "layers.#."
        for n in ("input_layernorm", "mlp_res_norm", "post_attention_layernorm", "self_attention_res_norm"):
            g.append(_t(f"{L}{n}.weight", i, "BF16", 7168))
        g += [
            _t(f"{L}mlp_res_proj.weight", i, "BF16", 1, 7168),
            _t(f"{L}self_attention_res_proj.weight", i, "BF16", 1, 7168),
            _t(f"{L}self_attn.g_proj.weight", i, "BF16", 12288, 7168),
            _t(f"{L}self_attn.o_proj.weight", i, "BF16", 7168, 12288),
        ]
        if i in KDA:
            g += [
                _t(f"{L}self_attn.A_log", i, "F32", 128),
                _t(f"{L}self_attn.b_proj.weight", i, "BF16", 96, 7168),
                _t(f"{L}self_attn.dt_bias", i, "F32", 12288),
                _t(f"{L}self_attn.f_a_proj.weight", i, "BF16", 128, 7168),
                _t(f"{L}self_attn.f_b_proj.weight", i, "BF16", 12288, 128),
                _t(f"{L}self_attn.o_norm.weight", i, "F32", 128),
            ]
            for x in "qkv":
                g.append(_t(f"{L}self_attn.{x}_conv1d.weight", i, "F32", 12288, 1, 4))
                g.append(_t(f"{L}self_attn.{x}_proj.weight", i, "BF16", 12288, 7168))
        else:
            g += [
                _t(f"{L}self_attn.kv_a_layernorm.weight", i, "BF16", 512),
                _t(f"{L}self_attn.kv_a_proj_with_mqa.weight", i, "BF16", 576, 7168),
                _t(f"{L}self_attn.kv_b_proj.weight", i, "BF16", 24576, 512),
                _t(f"{L}self_attn.q_a_layernorm.weight", i, "BF16", 1536),
                _t(f"{L}self_attn.q_a_proj.weight", i, "BF16", 1536, 7168),
                _t(f"{L}self_attn.q_b_proj.weight", i, "BF16", 18432, 1536),
            ]
        if i == 0:
            g += [
                _t(f"{L}mlp.down_proj.weight", i, "BF16", 7168, 33792),
                _t(f"{L}mlp.gate_proj.weight", i, "BF16", 33792, 7168),
                _t(f"{L}mlp.up_proj.weight", i, "BF16", 33792, 7168),
            ]
            continue
        expert = 2 * (3072 * 1792 + 3072 * 112) + 3584 * 1536 + 3584 * 96  # w1, w3, w2 packed + scales
        g.append((P + f"{L}block_sparse_moe.experts.#.*", i, "", (), 896 * expert, 896 * 6, 6))
        g += [
            _t(f"{L}block_sparse_moe.gate.e_score_correction_bias", i, "F32", 896),
            _t(f"{L}block_sparse_moe.gate.weight", i, "BF16", 896, 7168),
            _t(f"{L}block_sparse_moe.routed_expert_down_proj.weight", i, "BF16", 3584, 7168),
            _t(f"{L}block_sparse_moe.routed_expert_norm.weight", i, "BF16", 3584),
            _t(f"{L}block_sparse_moe.routed_expert_up_proj.weight", i, "BF16", 7168, 3584),
            _t(f"{L}block_sparse_moe.shared_experts.down_proj.weight", i, "BF16", 7168, 6144),
            _t(f"{L}block_sparse_moe.shared_experts.gate_proj.weight", i, "BF16", 6144, 7168),
            _t(f"{L}block_sparse_moe.shared_experts.up_proj.weight", i, "BF16", 6144, 7168),
        ]
    return g


def model(max_len: int = 1_048_576, tp: int = 8) -> MemoryModel:
    cfg = parse(load_config("kimi-k3"))
    m = MemoryModel(engine="vllm", layout=Layout(tp), requested_len=max_len, total=B300_BYTES, engine_version="0.33.0")
    m.cfg, m.tally = cfg, tally(groups(), cfg)
    resolve_utilization(m, None)
    resolve_reserve(m, None)
    return m


def test_kimi_k3_listing_is_the_published_checkpoint() -> None:
    # the text model's tensors (vision tower and projector, ~1 GiB, left out) within 0.1 %
    total = sum(x[4] for x in groups())
    assert 0.998 * CHECKPOINT_BYTES < total < CHECKPOINT_BYTES


def test_kimi_k3_tp8_on_b300_fits_a_million_tokens() -> None:
    m = model()
    cfg = m.cfg
    assert cfg is not None and cfg.mla and cfg.layer_kinds.count("full") == 24 and cfg.layer_kinds.count("linear") == 69
    shape = m.kv()
    # MLA over the 24 full-attention layers only: (512 + 64) x 2 bytes each, on every rank
    assert shape.full == 24 * 576 * 2
    # KDA: a fixed state per sequence — conv (3 x 96 x 128 / 8 x 3, bf16) + recurrent
    # (96 / 8 x 128 x 128, fp32) on each of 69 layers
    assert shape.fixed == 69 * (3 * 96 * 128 / 8 * 3 * 2 + 96 / 8 * 128 * 128 * 4)
    f = m.fit()
    assert f is not None and f.fits, f
    # routed experts split 8 ways, attention and shared experts by TP, latent projections whole
    assert 170 * GiB < f.weights < 200 * GiB
    assert f.kv_need == 24 * 576 * 2 * 1_048_576 + shape.fixed
    cap = m.capacity(f)
    assert cap is not None and cap.concurrency >= 1


def test_kimi_k3_tp4_does_not_hold_the_weights() -> None:
    f = model(tp=4).fit()
    assert f is not None and not f.weights_fit


def test_kimi_k3_memory_block_shows_the_vision_encoder_term() -> None:
    """K3's vision tower (vt_* fields: 27 layers x 1024) is profiled by vLLM 0.33's
    profile_run; its image size comes from the media processor config, not config.json, so
    the term is the encoder budget's worth (_memory.budget.encoder_terms). It is in the JSON memory
    block's reserve breakdown, and the launch still fits."""
    m = model()
    assert m.cfg is not None and m.cfg.tower is not None
    assert (m.cfg.tower.layers, m.cfg.tower.hidden, m.cfg.tower.tokens_per_item) == (27, 1024, None)
    block = m.to_dict()["reserve_breakdown"]
    assert 0 < block["vision_encoder"] < 2 * GiB
    assert m.reserve == sum(block.values())
    f = m.fit()
    assert f is not None and f.fits
