"""``--mm-encoder-tp-mode data``: the vision encoder's weights whole on every TP rank, its
batch split over the ranks, and the all-gathered outputs held in the profile run
(``flightcheck._knowledge.vllm.encoder_data_parallel``, ``_memory.budget.encoder_terms``,
``_memory.weights.encoder_replicated``), by architecture and release."""

from __future__ import annotations

import math

from flightcheck._knowledge import vllm
from flightcheck._launch.intent_read import read_options
from flightcheck._memory import MemoryModel, batch_for
from flightcheck._memory.budget import Batch, encoder_dp, encoder_terms
from flightcheck._memory.config import parse
from flightcheck._memory.weights import Layout, tally
from flightcheck._vocabulary.intent import Intent
from support.qwen_vl import IMAGE, QWEN3_CONFIG, VIDEO

R = vllm._release
OUT = 2048 * 4 * 2  # one output token: 2,048 x (1 + 3 deepstack) values, bf16


def _cfg(arch: str = "Qwen3VLMoeForConditionalGeneration"):
    return parse({**QWEN3_CONFIG, "architectures": [arch]}, None, IMAGE, VIDEO)


def test_the_mode_is_read_and_gated_by_architecture_and_release() -> None:
    assert vllm.encoder_tp_mode([]) == "weights"
    assert vllm.encoder_tp_mode(["--mm-encoder-tp-mode=data"]) == "data"
    assert vllm.encoder_tp_mode(["--mm-encoder-tp-mode=data", "--mm-encoder-tp-mode=weights"]) == "weights"
    on = vllm.encoder_data_parallel
    assert on(R("0.10.2"), ("Qwen2_5_VLForConditionalGeneration",), "data")
    assert not on(R("0.10.1"), ("Qwen2_5_VLForConditionalGeneration",), "data")  # before the wheels read
    assert not on(R("0.10.2"), ("Qwen3VLForConditionalGeneration",), "data")
    assert on(R("0.11.0"), ("Qwen3VLMoeForConditionalGeneration",), "data")
    assert on(R("0.33.0"), ("KimiK3ForConditionalGeneration",), "data") and on(
        None, ("KimiK3ForConditionalGeneration",), "data"
    )
    assert not on(R("0.33.0"), ("LlavaForConditionalGeneration",), "data")  # vLLM falls back to weights
    assert not on(R("0.33.0"), ("Qwen2_5_VLForConditionalGeneration",), "weights")
    assert not on(R("0.33.0"), (), "data")


def test_one_item_at_tp8_holds_eight_times_its_output() -> None:
    # 8,192 batched tokens, one 16,384-token image (4096 x 4096): weights mode holds its
    # output; data mode's all-gather returns 8 x the busiest rank's (padded) output, and
    # encoder_cache keeps views of all of it (vision.py run_dp_sharded_mrope_vision_model)
    cfg = _cfg()
    weights = Batch(8192, 256, max_model_len=65536, release=R("0.33.0"))
    data = Batch(8192, 256, max_model_len=65536, release=R("0.33.0"), mm_encoder_tp_mode="data")
    run_w, held_w = encoder_terms(cfg, Layout(8), weights)
    run_d, held_d = encoder_terms(cfg, Layout(8), data)
    assert held_w == 16384 * OUT
    assert held_d == 8 * 16384 * OUT
    # the busiest rank runs the whole image through unsplit layers: a larger peak
    assert run_d > run_w
    # TP 1 has nothing to split: the same either way
    assert encoder_terms(cfg, Layout(1), data) == encoder_terms(cfg, Layout(1), weights)


def test_items_that_divide_over_the_ranks_hold_what_weights_mode_holds() -> None:
    cfg = _cfg()
    # 32,768 batched tokens: two images; TP 2: one each, the gather is exactly the two outputs
    data = Batch(32768, 256, max_model_len=65536, release=R("0.33.0"), mm_encoder_tp_mode="data")
    weights = Batch(32768, 256, max_model_len=65536, release=R("0.33.0"))
    assert encoder_terms(cfg, Layout(2), data)[1] == encoder_terms(cfg, Layout(2), weights)[1] == 2 * 16384 * OUT
    # three ranks' worth of padding at TP 4 (2 items: ranks 0 and 1 busy, 2 and 3 padded)
    assert encoder_terms(cfg, Layout(4), data)[1] == 4 * 16384 * OUT


def test_a_model_without_support_falls_back_to_weights_mode() -> None:
    cfg = _cfg("SomeOtherVLForConditionalGeneration")
    data = Batch(8192, 256, max_model_len=65536, release=R("0.33.0"), mm_encoder_tp_mode="data")
    weights = Batch(8192, 256, max_model_len=65536, release=R("0.33.0"))
    assert not encoder_dp(cfg, data)
    assert encoder_terms(cfg, Layout(8), data) == encoder_terms(cfg, Layout(8), weights)


def test_a_padding_release_holds_the_padded_copies_and_peaks_with_the_gather() -> None:
    # 0.12.0 pads each output to the budget's item and keeps the padded copies; the gathered
    # tensor is alive beside them while they are made
    cfg = _cfg()
    kw = {"max_model_len": 65536, "release": R("0.12.0"), "mm_limits": {"video": 0}}
    run_d, held_d = encoder_terms(cfg, Layout(8), Batch(8192, 256, mm_encoder_tp_mode="data", **kw))
    run_w, held_w = encoder_terms(cfg, Layout(8), Batch(8192, 256, **kw))
    assert held_d == held_w == 16384 * OUT
    assert run_d - run_w > 8 * 16384 * OUT - 1


def _groups() -> list[tuple[str, int, str, tuple[int, ...], int, int, int]]:
    def t(name: str, index: int, *shape: int) -> tuple[str, int, str, tuple[int, ...], int, int, int]:
        return (name, index, "BF16", shape, math.prod(shape) * 2, 1, 1)

    g = [t("model.language_model.embed_tokens.weight", -1, 151936, 2048), t("lm_head.weight", -1, 151936, 2048)]
    for i in range(4):
        g += [
            t("model.language_model.layers.#.self_attn.q_proj.weight", i, 4096, 2048),
            t("model.language_model.layers.#.self_attn.o_proj.weight", i, 2048, 4096),
            t("model.language_model.layers.#.mlp.up_proj.weight", i, 6144, 2048),
        ]
    # the tower: 27 blocks' qkv and MLP, and the merger
    g += [
        t("model.visual.blocks.#.attn.qkv.weight", -1, 3 * 1152, 1152),
        t("model.visual.blocks.#.mlp.linear_fc1.weight", -1, 4304, 1152),
        t("model.visual.merger.linear_fc2.weight", -1, 2048, 4608),
    ]
    return g


def _model(mode: str, tp: int = 4) -> MemoryModel:
    cfg = _cfg()
    m = MemoryModel(engine="vllm", layout=Layout(tp), requested_len=65536, total=80 << 30, engine_version="0.33.0")
    m.cfg, m.tally = cfg, tally(_groups(), cfg)
    m.batch = Batch(8192, 256, max_model_len=65536, release=R("0.33.0"), mm_encoder_tp_mode=mode)
    return m


def test_the_towers_weights_are_whole_on_every_rank_in_data_mode() -> None:
    tower = sum(x[4] for x in _groups() if "visual" in x[0])
    weights, data = _model("weights"), _model("data")
    assert weights.tally is not None and weights.tally.encoder == tower
    w, d = weights.stages()[0], data.stages()[0]
    assert "encoder_replicated" not in w
    assert d["encoder_replicated"] == tower
    # the tower moved out of the TP-split class: 3/4 of it more on each of 4 ranks
    assert sum(d.values()) - sum(w.values()) == tower * 3 / 4
    # TP 1: nothing is split either way
    assert "encoder_replicated" not in _model("data", tp=1).stages()[0]


def test_the_launch_flag_reaches_the_profile_run() -> None:
    b = batch_for(
        read_options(Intent(engine_flags=["--mm-encoder-tp-mode=data"])),
        80 << 30,
        "NVIDIA H100 80GB HBM3",
        "0.33.0",
        "9.0",
    )
    assert b.mm_encoder_tp_mode == "data"
    assert batch_for(Intent(), 80 << 30, "NVIDIA H100 80GB HBM3", "0.33.0", "9.0").mm_encoder_tp_mode == "weights"


def test_the_json_memory_block_says_how_the_encoder_is_profiled() -> None:
    data = _model("data")
    data.batch = Batch(
        8192, 256, max_model_len=65536, release=R("0.33.0"), mm_encoder_tp_mode="data", mm_image_size=(512, None)
    )
    block = data.to_dict()["batch"]["vision_encoder"]
    assert block == {"tp_mode": "data", "image_size": [512, None]}
    assert data.to_dict()["weights_breakdown"]["encoder_replicated"] > 0
    assert _model("weights").to_dict()["batch"]["vision_encoder"] == {"tp_mode": "weights", "image_size": None}
    # an unsupported model: vLLM falls back, and the block says so
    fallback = _model("data")
    fallback.cfg = _cfg("SomeOtherVLForConditionalGeneration")
    assert fallback.to_dict()["batch"]["vision_encoder"]["tp_mode"] == "weights"
