"""The memory model against published figures and the rules of memory.md.

Checkpoints are generated from the models' published configs (real headers, sparse data):
per-rank weights must land within 3% of what vLLM reports, KV bytes per token exactly.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from flightcheck._checkpoint import load
from flightcheck._memory import build
from flightcheck._memory.budget import default_utilization, sglang_fraction
from flightcheck._memory.config import parse
from flightcheck._memory.kv import kv_shape
from flightcheck._memory.weights import Layout, mxfp4_padding, stage_layers
from flightcheck._vocabulary.intent import Intent
from support.ckptgen import load_config, write_checkpoint

GiB = 1 << 30
B300 = 288403439616
H200 = 150754820096


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory):
    """name -> loaded checkpoint, generated once for the module (Kimi-K2: 139k tensors)."""
    root = tmp_path_factory.mktemp("models")
    cache: dict[str, object] = {}

    def get(name: str, shards: int = 4, **overrides):
        key = name + repr(sorted(overrides.items()))
        if key not in cache:
            cfg = {**load_config(name), **overrides}
            path = write_checkpoint(root / f"{name}-{len(cache)}", cfg, shards=shards)
            cache[key] = load(str(path), cache_env={"FLIGHTCHECK_NO_CACHE": "1"})
        return cache[key]

    return get


def mem(ck, total: int = B300, version: str = "0.33.0", **intent):
    return build(ck, Intent(model=str(ck.path), **intent), total=total, engine_version=version)


def within(value: float, expected: float, pct: float = 3.0) -> bool:
    return abs(value - expected) <= expected * pct / 100


def test_llama3_8b_tp1_matches_vllm(models) -> None:
    m = mem(models("llama-3-8b"))
    assert within(m.weights() / GiB, 14.96)  # vLLM: "Model loading took 14.96 GiB"
    assert m.kv().per_token == 131072


def test_kimi_k2_fp8_totals_and_split(models) -> None:
    ck = models("kimi-k2-instruct", shards=61)
    assert ck.tensor_count > 139_000
    m = mem(ck, tensor_parallel_size=8)
    assert round(m.tally.total / GiB, 2) == 958.49  # the published total of its tensors
    assert within(m.weights() / GiB, 120.95)
    assert within(mem(ck, tensor_parallel_size=16).weights() / GiB, 61.06)
    for tp in (1, 8, 16):
        assert mem(ck, tensor_parallel_size=tp).kv().per_token == 70272
        assert mem(ck, tensor_parallel_size=tp, kv_cache_dtype="fp8").kv().per_token == 35136


@pytest.mark.parametrize("name", ["deepseek-v3", "kimi-k2-instruct"])
@pytest.mark.parametrize("tp", [1, 4, 8, 16])
def test_mla_kv_is_not_divided_by_tp(name: str, tp: int) -> None:
    cfg = parse(load_config(name))
    assert kv_shape(cfg, range(cfg.layers), tp, "auto").per_token == 70272
    assert kv_shape(cfg, range(cfg.layers), tp, "fp8_e4m3").per_token == 35136


@pytest.mark.parametrize("tp, expected", [(1, 57344), (2, 28672), (4, 14336), (8, 14336)])
def test_qwen2_kv_heads_replicate_beyond_tp4(tp: int, expected: int) -> None:
    cfg = parse(load_config("qwen2-7b"))  # 4 KV heads: TP 8 keeps one per rank
    assert kv_shape(cfg, range(cfg.layers), tp, "auto").per_token == expected


def test_mtp_layers_are_skipped(models) -> None:
    ck = models("deepseek-v3", n_routed_experts=8)
    m = mem(ck, tensor_parallel_size=8)
    loaded61 = sum(b for (cls, layer), b in m.tally.bytes.items() if layer == 61 and cls != "skipped")
    assert loaded61 == 0 and m.tally.skipped > 2 * 129280 * 7168 * 2  # embed + head copies of the MTP block
    assert m.tally.bytes[("skipped", 61)] == m.tally.skipped


def test_expert_parallel_owns_whole_experts(models) -> None:
    ck = models("qwen3-30b-a3b", shards=8)
    off = mem(ck, tensor_parallel_size=4).stages()[0]["expert"]
    on = mem(ck, tensor_parallel_size=4, enable_expert_parallel=True).stages()[0]["expert"]
    total = ck and mem(ck).tally.of("expert")
    assert off == pytest.approx(total / 4) and on == pytest.approx(total / 4)  # 128 experts / 4: even
    odd = models("qwen3-30b-a3b", shards=2, num_experts=10, num_hidden_layers=2)
    e_total = mem(odd).tally.of("expert")
    assert mem(odd, tensor_parallel_size=4, enable_expert_parallel=True).stages()[0]["expert"] == pytest.approx(
        e_total * 3 / 10
    )


def test_data_parallel_spreads_experts_not_attention(models) -> None:
    ck = models("mixtral-8x7b", shards=4)
    one = mem(ck, tensor_parallel_size=2).stages()[0]
    dp = mem(ck, tensor_parallel_size=2, data_parallel_size=2).stages()[0]
    assert dp["expert"] == pytest.approx(one["expert"] / 2) and dp["tp"] == pytest.approx(one["tp"])
    assert within(mem(ck, tensor_parallel_size=2).weights() / GiB, 43.5)  # vLLM's Mixtral-8x7B at TP 2


def test_pipeline_stages_follow_vllm(models) -> None:
    assert stage_layers(32, 3) == [range(11), range(11, 22), range(22, 32)]
    assert stage_layers(61, 8)[0] == range(7) and stage_layers(61, 8)[-1] == range(54, 61)
    m = mem(models("llama-3-8b"), pipeline_parallel_size=2)
    first, last = m.stages()
    assert "vocab" in first and "head" not in first and "head" in last
    assert m.weights() == pytest.approx(max(sum(first.values()), sum(last.values())))
    assert m.kv(stage=0).per_token == 131072 // 2


def test_vocab_is_padded_to_64_then_split() -> None:
    cfg = {**load_config("tiny-llama"), "vocab_size": 32001, "hidden_size": 64}
    from support.ckptgen import tensors_for

    tensors = [t for t in tensors_for(cfg) if "embed_tokens" in t[0]]
    from flightcheck._memory.weights import per_rank, tally

    mc = parse(cfg)
    t = tally([(n, -1, "BF16", tuple(s), 32001 * 64 * 2, 1, 1) for n, _, s in tensors], mc)
    share = per_rank(t, mc, Layout(8))[0]["vocab"]
    assert share == pytest.approx(32001 * 64 * 2 * (32064 // 8) / 32001)


def test_tied_head_is_stored_once(tmp_path: Path) -> None:
    from support.ckptgen import tensors_for

    cfg = {**load_config("tiny-llama"), "tie_word_embeddings": True}
    table = tensors_for(cfg)
    assert not any(n.startswith("lm_head") for n, _, _ in table)  # HF stores a tied head once
    stored_anyway = table + [("lm_head.weight", "BF16", [512, 64])]  # some exporters write it anyway
    ck = load(
        str(write_checkpoint(tmp_path / "tied", cfg, tensors=stored_anyway, shards=2)),
        cache_env={"FLIGHTCHECK_NO_CACHE": "1"},
    )
    m = mem(ck)
    assert ("head", None) not in m.tally.bytes and m.tally.skipped == 512 * 64 * 2


def test_mxfp4_padding_gpt_oss(models) -> None:
    cfg = parse(load_config("gpt-oss-120b"))
    assert mxfp4_padding(cfg, Layout(1)) == pytest.approx((3072 / 2880) * (2944 / 2880))
    m = mem(models("gpt-oss-120b", shards=8), total=H200)
    assert within(m.weights() / GiB, 64.38)  # vLLM: gpt-oss-120b at TP 1 (H100)
    assert m.weights() > m.tally.total  # padded above what is stored


def test_sliding_and_linear_layers() -> None:
    oss = parse(load_config("gpt-oss-120b"))
    shape = kv_shape(oss, range(oss.layers), 1, "auto")
    assert shape.full == 18 * 2 * 8 * 64 * 2 and shape.sliding == shape.full and shape.window == 128
    assert shape.bytes_for(1000) == shape.full * 1000 + shape.sliding * 128
    assert shape.max_len(shape.full * 5000 + shape.sliding * 128) == 5000 // 16 * 16
    hybrid = parse(
        {
            **load_config("tiny-llama"),
            "num_hidden_layers": 4,
            "layer_types": ["linear_attention"] * 3 + ["full_attention"],
            "linear_num_value_heads": 8,
            "linear_num_key_heads": 4,
            "linear_key_head_dim": 32,
            "linear_value_head_dim": 32,
            "linear_conv_kernel_dim": 4,
        }
    )
    h = kv_shape(hybrid, range(4), 2, "auto")
    assert h.full == 2 * 1 * 8 * 2 and h.fixed == 3 * ((2 * 4 * 32 + 8 * 32) / 2 * 3 * 2 + 8 / 2 * 32 * 32 * 4)


def test_online_fp8_halves_linear_layers(models) -> None:
    ck = models("llama-3-8b")
    plain, fp8 = mem(ck), mem(ck, quantization="fp8")
    assert fp8.weights() < 0.6 * plain.weights() and fp8.notes


def test_budget_defaults() -> None:
    assert default_utilization("vllm", "0.33.0", B300, Layout(8))[0] == 0.92
    assert default_utilization("vllm", "0.19.1", B300, Layout(8))[0] == 0.9
    assert default_utilization("vllm", None, B300, Layout(8))[0] == 0.9  # unknown: the conservative one
    # SGLang 0.5.23: (GPU MiB - reserved) / GPU MiB with its chunked-prefill size, decode
    # CUDA graphs (max_bs x 2 MiB) and prefill graphs (8 MiB a captured size; 1.5 GiB MLA)
    mib = B300 / (1 << 20)  # 16k chunks: 74 prefill sizes
    reserved = 512 + 16384 * 1.5 + 1024 + 512 * 2 + 74 * 8
    assert sglang_fraction(B300, Layout(8)) == round((mib - reserved) / mib, 3)
    assert sglang_fraction(B300, Layout(8), mla=True) == round((mib - (reserved - 74 * 8 + 1536)) / mib, 3)
    h100 = 85520809984 / (1 << 20)  # 80 GB class: 8k chunks (58 prefill sizes), decode graphs to 256 at TP 1
    reserved = 512 + 8192 * 1.5 + 1024 / 8 + 256 * 2 + 58 * 8
    assert sglang_fraction(85520809984, Layout(1)) == round((h100 - reserved) / h100, 3)
    rtx = 24 * 1024  # 24 GB class: 4k chunks (50 sizes), decode graphs to 48 below TP 4 (was 2k / 24)
    assert sglang_fraction(rtx << 20, Layout(2)) == round((rtx - (512 + 4096 * 1.5 + 256 + 96 + 400)) / rtx, 3)


def test_reserve_override_and_fit_rounding(models) -> None:
    ck = models("llama-3-8b")
    m = mem(ck, total=H200, reserve_gib=10.0, max_model_len=8192)
    f = m.fit()
    assert f.reserve == 10 * GiB and f.max_model_len_fit % 16 == 0
    assert f.max_model_len_fit == int((f.usable - f.weights - f.reserve) // 131072) // 16 * 16
    d = m.to_dict()
    assert d["per_rank"]["reserve_bytes"] == 10 * GiB and d["reserve_source"] == "--reserve-gib"


def test_config_errors_leave_a_reason() -> None:
    cfg = copy.deepcopy(load_config("tiny-llama"))
    del cfg["hidden_size"]
    assert parse(cfg).missing == ["hidden_size"]
    inner = {k: v for k, v in load_config("tiny-llama").items() if k != "architectures"}
    wrapped = parse({"architectures": ["X"], "text_config": inner})
    assert wrapped.layers == 4 and wrapped.architectures == ("X",)


@pytest.mark.parametrize(
    "override, missing",
    [
        ({"num_hidden_layers": 10**12}, "num_hidden_layers (got 1,000,000,000,000)"),  # was a MemoryError
        ({"num_hidden_layers": -3}, "num_hidden_layers (got -3)"),
        ({"num_attention_heads": 0}, "num_attention_heads (got 0)"),
        ({"hidden_size": "4096"}, "hidden_size (got 4096)"),
    ],
)
def test_implausible_required_fields_are_fc507(override: dict, missing: str) -> None:
    cfg = parse({**load_config("tiny-llama"), **override})
    assert cfg.missing == [missing] and cfg.layers <= 100_000


@pytest.mark.parametrize(
    "override",
    [
        {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": [1, 2]}},  # was AttributeError
        {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"g": 5, "h": {"weights": 7}}}},
        {"architectures": 5},  # was TypeError
        {"rope_scaling": {"type": "linear", "factor": 1e308}},  # the window was inf: OverflowError in FC405
        {"sliding_window": -1, "model_type": "mistral"},  # a negative window made KV bytes negative
        {"max_position_embeddings": -5, "num_key_value_heads": -1},
    ],
)
def test_hostile_config_values_never_raise(override: dict) -> None:
    cfg = parse({**load_config("tiny-llama"), **override})
    assert cfg.missing == []
    shape = kv_shape(cfg, range(cfg.layers), 1, "auto")
    assert shape.bytes_for(4096) > 0 and shape.window >= 0
    assert cfg.context_window is None or 0 < cfg.context_window < 1 << 62


def test_other_layouts_get_their_own_engine_defaults(models) -> None:
    """The layouts the suggestions try are judged as the engine would run them: SGLang's
    default mem_fraction_static and the default reserve depend on TP; what the launch set
    stays as set."""
    from flightcheck._memory.budget import default_reserve

    ck = models("llama-3-8b")
    sg = mem(ck, total=H200, engine="sglang")
    assert sg.fit().utilization == sglang_fraction(H200, Layout(1))
    assert sg.fit(Layout(8)).utilization == sglang_fraction(H200, Layout(8)) < sglang_fraction(H200, Layout(1))
    assert mem(ck, total=H200, engine="sglang", gpu_memory_utilization=0.8).fit(Layout(8)).utilization == 0.8
    v = mem(ck, total=H200, max_num_seqs=8)
    assert v.fit(Layout(8)).reserve == default_reserve(v.cfg, Layout(8), "vllm", batch=v.batch)[0] != v.fit().reserve
    # at vLLM's 1024 dummy requests the sampler's peak binds and does not shrink with TP
    # (the logits are gathered whole on every rank: issue 12, Llama-3.1-8B 1.89 GiB at TP 1, 2, 4)
    d = mem(ck, total=H200)
    assert d.fit(Layout(8)).reserve == d.fit().reserve
    assert mem(ck, total=H200, reserve_gib=3.0).fit(Layout(8)).reserve == 3 * GiB
