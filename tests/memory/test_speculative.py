"""Speculative decoding in the vLLM memory model (vLLM 0.33.0's code, cited in
``flightcheck._knowledge.vllm.speculative`` and ``flightcheck._memory.weights.mtp_per_rank``).

The target's own MTP layers (DeepSeek-V3's ``model.layers.61``) are never loaded without
speculative decoding; with ``method: mtp`` their decoder block, norms and ``eh_proj`` load on
the last PP stage and their attention adds one full-attention layer of KV per token. N-gram
drafting puts nothing on the GPU. Checkpoints are generated (tests/support/ckptgen.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flightcheck._checkpoint import load
from flightcheck._knowledge import vllm
from flightcheck._launch.intent_read import read_options
from flightcheck._memory import build
from flightcheck._vocabulary.intent import Intent
from support.ckptgen import load_config, write_checkpoint
from support.evaluation import evaluated, facts, results

H200 = 150754820096
GiB = 1 << 30


def sc(doc: dict[str, Any]) -> str:
    return f"{vllm.SPECULATIVE_CONFIG_FLAG}={json.dumps(doc)}"


MTP1 = sc({"method": "mtp", "num_speculative_tokens": 1})
NGRAM = sc({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4})


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    """DeepSeek-V3's published config with 8 routed experts (one MTP layer, as published)."""
    cfg = {**load_config("deepseek-v3"), "n_routed_experts": 8}
    return str(write_checkpoint(tmp_path_factory.mktemp("spec") / "ds", cfg, shards=2)), cfg


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def mem(path: str, flags: list[str], *, tp: int = 8, pp: int = 1, version: str = "0.33.0"):
    ck = load(path, cache_env={"FLIGHTCHECK_NO_CACHE": "1"})
    intent = read_options(Intent(model=path, tensor_parallel_size=tp, pipeline_parallel_size=pp, engine_flags=flags))
    return build(ck, intent, total=H200, engine_version=version)


def mtp_layer_bytes_per_rank(c: dict[str, Any], tp: int) -> int:
    """One DeepSeek-V3 MTP layer per rank, from the config: MLA attention (q_a / kv_a and
    their norms whole, q_b / kv_b / o split), routed experts and the shared expert split by
    TP, the router whole; enorm / hnorm / shared_head.norm and eh_proj (nn.Linear) whole;
    the bf16 W_UK_T / W_UV copies of the heads on the rank. Embedding and head: shared."""
    h, heads, q_lora, kv_lora = c["hidden_size"], c["num_attention_heads"], c["q_lora_rank"], c["kv_lora_rank"]
    nope, rope, v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    e, inter = c["n_routed_experts"], c["moe_intermediate_size"]
    fp8 = 1  # the published checkpoint is block FP8: linear weights 1 byte + f32 scales per 128x128
    whole = (q_lora * h + (kv_lora + rope) * h) * fp8 + (q_lora + kv_lora) * 2
    whole += 4 * ((q_lora + 127) // 128) * ((h + 127) // 128) + 4 * ((kv_lora + rope + 127) // 128) * ((h + 127) // 128)
    whole += e * h * 2 + e * 4  # router + e_score_correction_bias
    whole += 3 * h * 2 + h * 2 * h * 2  # enorm, hnorm, shared_head.norm; eh_proj bf16
    whole += 2 * h * 2  # input / post-attention layernorms

    def lin(o: int, i: int) -> int:
        return o * i * fp8 + 4 * ((o + 127) // 128) * ((i + 127) // 128)

    split = lin(heads * (nope + rope), q_lora) + lin(heads * (nope + v), kv_lora) + lin(h, heads * v)
    split += e * (2 * lin(inter, h) + lin(h, inter)) + 2 * lin(inter, h) + lin(h, inter)
    copies = heads // tp * kv_lora * (nope + v) * 2
    return whole + split // tp + copies


def test_mtp_layers_are_not_loaded_without_speculative_decoding(ds) -> None:
    """No over-count: without a speculative config the MTP layer is skipped (deepseek_v2.py
    ``load_weights`` drops ``get_spec_layer_idx_from_weight_name`` names), with n-gram too."""
    path, _ = ds
    plain, ngram = mem(path, []), mem(path, [NGRAM])
    assert plain.mtp_layers == 0 and ngram.mtp_layers == 0
    assert "mtp_draft" not in plain.stages()[0]
    assert ngram.weights() == plain.weights() and ngram.kv().per_token == plain.kv().per_token
    assert ngram.speculative == {"method": "ngram", "model": "ngram", "num_speculative_tokens": 3}
    assert plain.tally is not None and {i for _, i in plain.tally.mtp} == {0}


@pytest.mark.parametrize("tp", [1, 8])
def test_mtp_adds_its_layer_weights_and_kv_per_rank(ds, tp: int) -> None:
    path, cfg = ds
    plain, spec = mem(path, [], tp=tp), mem(path, [MTP1], tp=tp)
    assert spec.mtp_layers == 1
    added = spec.weights() - plain.weights()
    # + the proposer's hidden_states / inputs_embeds buffers: 2 x batched tokens x hidden x 2
    assert spec.stages()[0]["mtp_buffers"] == 2 * spec.batch.tokens * 7168 * 2
    expected = mtp_layer_bytes_per_rank(cfg, tp) + 2 * spec.batch.tokens * 7168 * 2
    assert abs(added - expected) <= expected * 0.001, (added, expected)
    # the shared embedding / head copies (vocab x hidden x 2 bytes / TP each) are not in it
    assert added + 129280 * 7168 * 2 / tp > expected * 1.01
    # one more MLA layer: (kv_lora_rank + qk_rope_head_dim) x 2 bytes per token, on every rank
    assert spec.kv().per_token - plain.kv().per_token == (512 + 64) * 2
    assert spec.kv().n_full == plain.kv().n_full + 1
    block = spec.to_dict()["speculative"]
    assert block["draft_layers"] == 1 and block["draft_kv_bytes_per_token"] == (512 + 64) * 2
    assert abs(block["draft_weights_bytes"] - expected) <= expected * 0.001


def test_mtp_sits_on_the_last_pipeline_stage(ds) -> None:
    """gpu_model_runner.py creates the drafter only on the last PP rank; there it loads its
    own vocabulary embedding (not shared at PP > 1)."""
    path, cfg = ds
    plain, spec = mem(path, [], pp=2), mem(path, [MTP1], pp=2)
    s0, s1 = spec.stages(), plain.stages()
    assert s0[0] == s1[0] and "mtp_draft" in s0[1]
    embed = 129280 * 7168 * 2 / 8  # vocab (padded to 64: already a multiple) / TP
    assert abs(s0[1]["mtp_draft"] - (mtp_layer_bytes_per_rank(cfg, 8) + embed)) < 0.001 * s0[1]["mtp_draft"]
    assert "mtp_buffers" not in s0[0]
    assert spec.kv(stage=0).per_token == plain.kv(stage=0).per_token
    assert spec.kv(stage=1).per_token == plain.kv(stage=1).per_token + 1152


def test_deprecated_mtp_method_names_and_spec_shortcuts(ds) -> None:
    path, _ = ds
    for flags in (
        [sc({"method": "deepseek_mtp", "num_speculative_tokens": 1})],
        ["--spec-method=mtp", "--spec-tokens=1"],
    ):
        m = mem(path, flags)
        assert m.speculative is not None and m.speculative["method"] == "mtp" and m.mtp_layers == 1


def test_other_versions_are_not_modelled(ds) -> None:
    path, _ = ds
    m = mem(path, [MTP1], version="0.25.0")
    assert m.mtp_layers == 0 and any("0.32.0+'s code only" in n for n in m.notes)
    assert mem(path, [MTP1], version="0.32.0").mtp_layers == 1


# ------------------------------------------------------------------ resolution rules


DS = {"model_type": "deepseek_v3", "num_nextn_predict_layers": 1}


@pytest.mark.parametrize(
    ("doc", "method", "tokens", "mtp", "error"),
    [
        ({"model": "ngram", "num_speculative_tokens": 2}, "ngram", 2, 0, None),
        ({"method": "[ngram]", "num_speculative_tokens": 2}, "ngram", 2, 0, None),
        ({"method": "mtp"}, "mtp", None, 0, None),
        ({"method": "mtp", "num_speculative_tokens": 3}, "mtp", 3, 1, None),
        ({"model": "/m", "num_speculative_tokens": 1}, "mtp", 1, 1, None),  # the target itself: auto-detected
        ({"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 2}, "eagle3", 2, 0, None),
        ({"model": "yuhuili/EAGLE-LLaMA3-Instruct-8B", "num_speculative_tokens": 2}, "eagle", 2, 0, None),
        ({"model": "org/small", "num_speculative_tokens": 4}, "draft_model", 4, 0, None),
        ({"model": "org/small"}, "draft_model", None, 0, "num_speculative_tokens"),
        ({"model": "/m"}, "mtp", None, 0, "required for MTP"),
        ({"method": "eagle", "num_speculative_tokens": 2}, "eagle", 2, 0, "without speculative model"),
        ({"model": "org/small", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 4}, None, 2, 0, "1 or"),
    ],
)
def test_resolution_follows_speculative_config(doc, method, tokens, mtp, error) -> None:
    s = vllm.speculative([sc(doc)], DS, "/m", 8)
    assert s is not None
    assert (s.num_speculative_tokens, s.mtp_layers) == (tokens, mtp)
    if method is not None:
        assert s.method == method
    if error is None:
        assert s.error is None
    else:
        assert s.error is not None and error in s.error


def test_resolution_refusals() -> None:
    both = vllm.speculative([sc({"method": "ngram"}), "--spec-method=mtp"], DS, "/m", 1)
    assert both is not None and both.error is not None and "mutually exclusive" in both.error
    two = vllm.speculative(
        [sc({"model": "/m", "num_speculative_tokens": 3})], {**DS, "num_nextn_predict_layers": 2}, "/m", 1
    )
    assert two is not None and two.error is not None and "divisible" in two.error
    assert vllm.speculative([], DS, "/m", 1) is None
    assert not vllm.speculative([NGRAM], DS, "/m", 1).on_gpu  # type: ignore[union-attr]


# ------------------------------------------------------------------ FC402


def _util_for_slack(path: str, flags: list[str], length: int, slack: float) -> float:
    """The utilisation at which one sequence of ``length`` leaves ``slack`` bytes of KV."""
    node = facts("b300")
    kw: dict[str, Any] = {"model": path, "tensor_parallel_size": 8, "max_model_len": length}
    from flightcheck import evaluate

    r = evaluate(node, read_options(Intent(gpu_memory_utilization=0.5, engine_flags=flags, **kw))).memory
    per = r["per_rank"]
    total = r["gpu"]["memory_total_bytes"]
    need = per["kv_bytes_per_token"] * length
    return 0.5 + (need + slack - per["kv_budget_bytes"]) / total


def fc402_errors(path: str, flags: list[str], util: float, length: int, errors_only: bool = True) -> list:
    """FC402's failures (errors only, unless ``errors_only`` is False: a warning where the bound's
    high end still fits, ``bound.bound_terms``)."""
    res = results(
        facts("b300"),
        model=path,
        tensor_parallel_size=8,
        max_model_len=length,
        gpu_memory_utilization=util,
        engine_flags=flags,
    )["FC402"]
    evaluated("FC402", res)
    return [r for r in res if r.status.value == "fail" and (r.severity.value == "error" or not errors_only)]


def test_fc402_mtp_tips_a_launch_over(ds) -> None:
    """At a utilisation that leaves 0.05 GiB past one 131,072-token sequence, the MTP layer
    (0.28 GiB a rank, the proposer's buffers, 1,152 bytes a token) is a shortfall beyond the
    estimate's error."""
    path, _ = ds
    util = round(_util_for_slack(path, [], 131072, 0.05 * GiB), 4)
    assert fc402_errors(path, [], util, 131072) == []
    # short at the estimate; a stop only past the bound's high end (bound.bound_terms), so
    # the failure may be a warning: what is asserted is that MTP tips it over
    (r,) = fc402_errors(path, [MTP1], util, 131072, errors_only=False)
    assert r.evidence["kv_shortfall_bytes"] > GiB // 4


def test_fc402_does_not_stop_ngram_speculative_decoding(ds) -> None:
    path, _ = ds
    util = round(_util_for_slack(path, [], 131072, 0.05 * GiB), 4)
    assert fc402_errors(path, [NGRAM], util, 131072) == []


def test_short_and_dotted_spellings_read_like_the_json() -> None:
    """``-sc`` is ``--speculative-config`` (arg_utils.py), ``--speculative-config.key v`` one
    key of it (FlexibleArgumentParser); a shortcut repeating a JSON key is refused."""
    from flightcheck._launch import parse_command

    argv = ["vllm", "serve", "/m", "-tp", "8", "-sc", json.dumps({"method": "mtp", "num_speculative_tokens": 1})]
    flags = parse_command([*argv, "--spec-tokens", "2"], None).intent.engine_flags
    s = vllm.speculative(flags, DS, "/m", 8)
    assert s is not None and s.error is not None and "mutually exclusive" in s.error
    dotted = vllm.speculative(
        ["--speculative-config.method=mtp", "--speculative-config.num_speculative_tokens=2"], DS, "/m", 8
    )
    assert dotted is not None and (dotted.method, dotted.num_speculative_tokens, dotted.mtp_layers) == ("mtp", 2, 1)


def test_kimi_k3_mtp_layers_come_from_its_text_config() -> None:
    """``hf_config_override``: ``kimi_k3`` (the top level) becomes ``kimi_k3_mtp`` with
    n_predict from ``text_config.num_nextn_predict_layers``; the published K3 has none."""
    k3 = {"model_type": "kimi_k3", "text_config": {"model_type": "kimi_linear", "num_nextn_predict_layers": 2}}
    s = vllm.speculative([sc({"method": "mtp", "num_speculative_tokens": 2})], k3, "/k3", 8)
    assert s is not None and s.error is None and (s.method, s.mtp_layers) == ("mtp", 2)
    none = {"model_type": "kimi_k3", "text_config": {"model_type": "kimi_linear", "num_nextn_predict_layers": 0}}
    s = vllm.speculative([sc({"method": "mtp", "num_speculative_tokens": 1})], none, "/k3", 8)
    assert s is not None and s.error is not None and "no MTP layers" in s.error
