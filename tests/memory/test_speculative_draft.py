"""A separate draft checkpoint in the vLLM memory model: EAGLE and EAGLE-3 drafts of a
Llama-3-8B target (vLLM 0.33.0's code: model_executor/models/llama_eagle.py,
llama_eagle3.py, v1/spec_decode/llm_base_proposer.py; cited in
``flightcheck._knowledge.vllm.draft_shares`` and ``flightcheck._memory.weights.draft_per_rank``).

The drafts are generated with the published tensor names and shapes (yuhuili/EAGLE-LLaMA3-
Instruct-8B: ``layers.0.*`` without an input norm, ``fc`` 2 x hidden -> hidden, no embeddings
or head; yuhuili/EAGLE3-LLaMA3.1-Instruct-8B: ``midlayer.*`` whose q/k/v read 2 x hidden,
``fc`` 3 x hidden -> hidden, its own 32,000-row ``lm_head``, ``d2t`` / ``t2d``). Every
expected figure below is derived from these configs, not read back from the code.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from flightcheck._checkpoint import load
from flightcheck._collect.checkpoint import read_checkpoint
from flightcheck._knowledge import vllm
from flightcheck._launch.intent_read import read_options
from flightcheck._memory import build
from flightcheck._vocabulary.intent import Intent
from support.ckptgen import load_config, write_checkpoint, write_hf_cache
from support.evaluation import evaluated, facts, host_doc, results

H200 = 150754820096
GiB = 1 << 30
H, KV, HD, INTER, VOCAB, DRAFT_VOCAB = 4096, 8, 128, 14336, 128256, 32000

EAGLE_CFG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": H,
    "intermediate_size": INTER,
    "num_hidden_layers": 1,
    "num_attention_heads": 32,
    "num_key_value_heads": KV,
    "vocab_size": VOCAB,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-05,
    "torch_dtype": "float16",
}
EAGLE3_CFG = {
    **EAGLE_CFG,
    "architectures": ["LlamaForCausalLMEagle3"],
    "draft_vocab_size": DRAFT_VOCAB,
    "max_position_embeddings": 2048,
    "torch_dtype": "bfloat16",
}


def _layer(p: str, dtype: str, q_in: int, *, input_norm: bool) -> list[tuple[str, str, list[int]]]:
    t = [
        (f"{p}.self_attn.q_proj.weight", dtype, [32 * HD, q_in]),
        (f"{p}.self_attn.k_proj.weight", dtype, [KV * HD, q_in]),
        (f"{p}.self_attn.v_proj.weight", dtype, [KV * HD, q_in]),
        (f"{p}.self_attn.o_proj.weight", dtype, [H, 32 * HD]),
        (f"{p}.mlp.gate_proj.weight", dtype, [INTER, H]),
        (f"{p}.mlp.up_proj.weight", dtype, [INTER, H]),
        (f"{p}.mlp.down_proj.weight", dtype, [H, INTER]),
        (f"{p}.post_attention_layernorm.weight", dtype, [H]),
    ]
    return t + ([(f"{p}.input_layernorm.weight", dtype, [H])] if input_norm else [])


EAGLE_TENSORS = [*_layer("layers.0", "F16", H, input_norm=False), ("fc.weight", "F16", [H, 2 * H])]
EAGLE3_TENSORS = [
    *_layer("midlayer", "BF16", 2 * H, input_norm=True),
    ("midlayer.hidden_norm.weight", "BF16", [H]),
    ("norm.weight", "BF16", [H]),
    ("fc.weight", "BF16", [H, 3 * H]),
    ("lm_head.weight", "BF16", [DRAFT_VOCAB, H]),
    ("d2t", "I64", [DRAFT_VOCAB]),
    ("t2d", "BOOL", [VOCAB]),
]


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("draft")
    return {
        "target": str(write_checkpoint(root / "llama", load_config("llama-3-8b"), shards=2)),
        "eagle": str(write_checkpoint(root / "EAGLE-LLaMA3-Instruct-8B", EAGLE_CFG, tensors=EAGLE_TENSORS)),
        "eagle3": str(write_checkpoint(root / "EAGLE3-LLaMA3.1-Instruct-8B", EAGLE3_CFG, tensors=EAGLE3_TENSORS)),
        "eagle_embed": str(
            write_checkpoint(
                root / "eagle-embed",
                EAGLE_CFG,
                tensors=[*EAGLE_TENSORS, ("embed_tokens.weight", "F16", [VOCAB, H])],
            )
        ),
    }


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def sc(doc: dict[str, Any]) -> str:
    return f"{vllm.SPECULATIVE_CONFIG_FLAG}={json.dumps(doc)}"


def spec(model: str, n: int = 3, **kw: Any) -> str:
    return sc({"model": model, "num_speculative_tokens": n, **kw})


def mem(target: str, flags: list[str], *, tp: int = 1, pp: int = 1, version: str = "0.33.0", draft: bool = True):
    """The memory model as ``check`` builds it: the target read, the draft read by the
    collector (``read_checkpoint`` with no facts beyond the default)."""
    intent = read_options(Intent(model=target, tensor_parallel_size=tp, pipeline_parallel_size=pp, engine_flags=flags))
    if draft:
        ck = read_checkpoint(intent, facts("b300"))
    else:
        ck = load(target, cache_env={"FLIGHTCHECK_NO_CACHE": "1"})
    assert ck is not None
    return build(ck, intent, total=H200, engine_version=version)


def layer_per_rank(q_in: int, tp: int, *, norms: int) -> float:
    """One Llama decoder layer per rank: q / o and the MLP split by TP, k / v down to one KV
    head a rank, norms whole; 2 bytes a weight (the target's bf16)."""
    q, kv = 32 * HD * q_in / tp, 2 * KV * HD * q_in * max(1, KV // tp) / KV
    o, mlp = H * 32 * HD / tp, 3 * INTER * H / tp
    return 2 * (q + kv + o + mlp) + 2 * H * norms


def buffers(m) -> float:
    return 2 * m.batch.tokens * H * 2  # hidden_states + inputs_embeds, max tokens x hidden, bf16


@pytest.mark.parametrize("tp", [1, 8])
def test_eagle3_weights_per_rank_follow_its_config(ckpts, tp: int) -> None:
    plain, m = mem(ckpts["target"], [], tp=tp), mem(ckpts["target"], [spec(ckpts["eagle3"])], tp=tp)
    assert m.speculative is not None and m.speculative["method"] == "eagle3"
    assert m.draft is not None and m.draft_tp() == tp
    parts = m.stages()[-1]
    # the embeddings are not stored: shared with the target (PP 1); d2t: the draft
    # vocabulary as int64, replicated; t2d never loaded
    assert "draft_vocab" not in parts
    assert parts["draft_head"] == DRAFT_VOCAB / tp * H * 2  # 32,000 is a multiple of 64
    expected = (
        layer_per_rank(2 * H, tp, norms=3)  # input, hidden and post-attention norms
        + 2 * H  # the final norm
        + 3 * H * H * 2  # fc: ReplicatedLinear, whole on every rank
        + DRAFT_VOCAB * 8  # d2t
        + DRAFT_VOCAB / tp * H * 2  # its own lm_head
        + buffers(m)
    )
    added = m.weights() - plain.weights()
    assert abs(added - expected) < 1, (added, expected)
    # one more full-attention layer of the draft's KV heads at the draft's TP
    assert m.kv().per_token - plain.kv().per_token == 2 * (KV // tp) * HD * 2
    assert m.kv().n_full == 33
    doc = m.to_dict()
    assert doc["speculative"]["method"] == "eagle3"
    assert doc["weights_breakdown"]["draft_head"] == DRAFT_VOCAB // tp * H * 2
    assert doc["per_rank"]["kv_bytes_per_token"] == 32 * 2 * (KV // tp) * HD * 2 + 2 * (KV // tp) * HD * 2
    assert any("eagle3" in n and "embeddings shared with the target" in n for n in m.notes)
    block = doc["speculative"]
    assert (block["draft_layers"], block["draft_tp"]) == (1, tp)
    assert (block["draft_embeddings"], block["draft_lm_head"]) == ("shared", "own")
    assert block["draft_kv_bytes_per_token"] == 2 * (KV // tp) * HD * 2
    assert abs(block["draft_weights_bytes"] - expected) < 2


def test_the_text_report_says_what_the_draft_adds(ckpts) -> None:
    from rich.console import Console

    from flightcheck._report.memory_text import render_memory

    m = mem(ckpts["target"], [spec(ckpts["eagle3"])])
    console = Console(record=True, width=200)
    render_memory(console, m.to_dict())
    text = console.export_text()
    # under a GiB the draft is given in MiB
    want = f"{m.to_dict()['speculative']['draft_weights_bytes'] / (1 << 20):.0f} MiB of the weights"
    assert "speculative (eagle3): draft 1 layer(s) at TP 1" in text and want in text, text
    assert "4,096 B/token of the KV" in text


def test_eagle_weights_per_rank_and_fp16_stored_as_bf16(ckpts) -> None:
    """EAGLE-1: no lm_head module (the target's is used), embeddings not stored (shared),
    layer 0 without an input norm; the fp16 checkpoint is loaded in the target's bf16."""
    plain, m = mem(ckpts["target"], []), mem(ckpts["target"], [spec(ckpts["eagle"])])
    assert m.speculative is not None and m.speculative["method"] == "eagle"
    expected = layer_per_rank(H, 1, norms=1) + 2 * H * H * 2 + buffers(m)
    assert abs((m.weights() - plain.weights()) - expected) < 1
    parts = m.stages()[-1]
    assert "draft_head" not in parts and "draft_vocab" not in parts
    # the draft's file is read too: its stored (fp16) bytes join the load estimate
    stored = sum(2 * math.prod(shape) for _, _, shape in EAGLE_TENSORS)
    assert m.load_bytes is not None and plain.load_bytes is not None
    assert stored <= m.load_bytes - plain.load_bytes < stored + 4096  # + its header
    assert m.kv().per_token - plain.kv().per_token == 2 * KV * HD * 2


def test_stored_embeddings_are_not_counted_unless_pp_keeps_them(ckpts) -> None:
    """A stored embedding equal to the target's is shared (``torch.equal``); the headers do
    not tell, so it is not counted at PP 1 (no launch stopped on a copy vLLM frees), with a
    note. At PP > 1 the drafter loads its own: counted, on the last stage only."""
    m = mem(ckpts["target"], [spec(ckpts["eagle_embed"])])
    assert "draft_vocab" not in m.stages()[-1]
    assert any("only if their values are equal" in n for n in m.notes)
    pp = mem(ckpts["target"], [spec(ckpts["eagle_embed"])], pp=2)
    s = pp.stages()
    assert not any(k.startswith("draft") for k in s[0])
    assert s[1]["draft_vocab"] == VOCAB * H * 2
    # the draft's KV: the last stage only
    plain = mem(ckpts["target"], [], pp=2)
    assert pp.kv(stage=0).per_token == plain.kv(stage=0).per_token
    assert pp.kv(stage=1).per_token == plain.kv(stage=1).per_token + 2 * KV * HD * 2


def test_draft_tp_one_holds_the_whole_draft_on_every_rank(ckpts) -> None:
    m = mem(ckpts["target"], [spec(ckpts["eagle3"], draft_tensor_parallel_size=1)], tp=8)
    assert m.draft_tp() == 1
    parts = m.stages()[-1]
    assert parts["draft_head"] == DRAFT_VOCAB * H * 2
    plain = mem(ckpts["target"], [], tp=8)
    assert m.kv().per_token - plain.kv().per_token == 2 * KV * HD * 2  # all 8 KV heads


def test_a_draft_model_repo_id_is_read_from_the_engines_hf_cache(ckpts, tmp_path: Path) -> None:
    """``draft_model`` (v1/spec_decode/draft_model.py): a whole model whose embeddings and
    head are its own (both ``_maybe_share_*`` overridden to do nothing), found as the target
    is, in the engine's Hugging Face cache (``HF_HUB_CACHE`` of the facts' environment)."""
    tiny = load_config("tiny-llama")
    write_hf_cache(tmp_path / "hub", "acme/tiny-draft", tiny, shards=2)
    env = {**host_doc("b300")["env"], "HF_HUB_CACHE": str(tmp_path / "hub")}
    tp = 2
    intent = read_options(
        Intent(model=ckpts["target"], tensor_parallel_size=tp, engine_flags=[spec("acme/tiny-draft")])
    )
    ck = read_checkpoint(intent, facts("b300", env=env))
    assert ck is not None and ck.draft is not None and ck.draft.found
    m = build(ck, intent, total=H200, engine_version="0.33.0")
    plain = mem(ckpts["target"], [], tp=tp)
    assert m.speculative is not None and m.speculative["method"] == "draft_model"
    h, v, inter, kv, hd = 64, 512, 128, 2, 8
    layer = 2 * (8 * hd * h / tp + 2 * kv * hd * h / tp + h * 8 * hd / tp + 3 * inter * h / tp) + 2 * h * 2
    expected = 4 * layer + 2 * (v * h * 2 / tp) + 2 * h + 2 * m.batch.tokens * h * 2
    assert abs((m.weights() - plain.weights()) - expected) < 1
    assert m.kv().per_token - plain.kv().per_token == 4 * 2 * (kv // tp) * hd * 2
    # the same repo id without the cache the engine reads: the note, no figure
    ck = read_checkpoint(intent, facts("b300"))
    assert ck is not None and ck.draft is not None and not ck.draft.found
    m = build(ck, intent, total=H200, engine_version="0.33.0")
    assert m.draft is None and any("not counted" in n for n in m.notes)


def test_draft_model_tp_must_match_the_target() -> None:
    """draft_model.py ``_raise_if_draft_tp_mismatch``: a separate draft model at TP 1 under a
    TP 8 target is refused at startup."""
    s = vllm.speculative([spec("org/small", draft_tensor_parallel_size=1)], {}, "/m", 8)
    assert s is not None and s.error is not None and "must be the same" in s.error
    ok = vllm.speculative([spec("org/small")], {}, "/m", 8)
    assert ok is not None and ok.error is None and ok.draft_tp == 8


def test_an_unreadable_draft_keeps_the_note(ckpts, tmp_path: Path) -> None:
    missing = str(tmp_path / "EAGLE3-nowhere")
    m = mem(ckpts["target"], [spec(missing)])
    assert m.draft is None and m.error is None
    assert any("not counted" in n and "not found" in n for n in m.notes)
    broken = tmp_path / "EAGLE3-broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    m = mem(ckpts["target"], [spec(str(broken))])
    assert m.draft is None and any("not counted" in n for n in m.notes)


def test_other_versions_keep_the_note(ckpts) -> None:
    m = mem(ckpts["target"], [spec(ckpts["eagle3"])], version="0.25.0")
    assert m.draft is None and any("0.32.0+'s code only" in n for n in m.notes)
    assert mem(ckpts["target"], [spec(ckpts["eagle3"])], version="0.32.0").draft is not None


def test_no_draft_is_read_without_speculative_decoding(ckpts) -> None:
    intent = read_options(
        Intent(model=ckpts["target"], engine_flags=[sc({"method": "ngram", "num_speculative_tokens": 2})])
    )
    ck = read_checkpoint(intent, facts("b300"))
    assert ck is not None and ck.draft is None


# ------------------------------------------------------------------ FC402

LENGTH = 8192


def _util_for_slack(target: str, flags: list[str], slack: float) -> float:
    """The utilisation at which one LENGTH-token sequence leaves ``slack`` bytes of KV."""
    from flightcheck import evaluate

    intent = read_options(
        Intent(
            model=target, tensor_parallel_size=1, max_model_len=LENGTH, gpu_memory_utilization=0.5, engine_flags=flags
        )
    )
    r = evaluate(facts("b300"), intent).memory
    per = r["per_rank"]
    need = per["kv_bytes_per_token"] * LENGTH
    return 0.5 + (need + slack - per["kv_budget_bytes"]) / r["gpu"]["memory_total_bytes"]


def fc402_errors(target: str, flags: list[str], util: float, errors_only: bool = True) -> list:
    """FC402's failures (errors only, unless ``errors_only`` is False: a warning where the bound's
    high end still fits, ``bound.bound_terms``)."""
    res = results(
        facts("b300"),
        model=target,
        tensor_parallel_size=1,
        max_model_len=LENGTH,
        gpu_memory_utilization=util,
        engine_flags=flags,
    )["FC402"]
    evaluated("FC402", res)
    return [r for r in res if r.status.value == "fail" and (r.severity.value == "error" or not errors_only)]


def test_fc402_eagle3_draft_tips_a_launch_over(ckpts) -> None:
    """0.05 GiB of slack without the draft: the EAGLE-3 draft (~1 GiB a rank at TP 1 with its
    buffers, 4 KiB of KV a token) is the shortfall."""
    util = round(_util_for_slack(ckpts["target"], [], 0.05 * GiB), 4)
    assert fc402_errors(ckpts["target"], [], util) == []
    # a stop only past the bound's high end (bound.bound_terms): asserted is that it fails
    (r,) = fc402_errors(ckpts["target"], [spec(ckpts["eagle3"])], util, errors_only=False)
    assert r.evidence["kv_shortfall_bytes"] > GiB // 2


def test_fc402_does_not_stop_an_eagle3_draft_that_fits(ckpts) -> None:
    """The same launch with room for the draft (0.3 GiB past it) passes."""
    flags = [spec(ckpts["eagle3"])]
    util = round(_util_for_slack(ckpts["target"], flags, 0.3 * GiB), 4)
    assert fc402_errors(ckpts["target"], flags, util) == []


def test_fc402_does_not_stop_when_the_draft_is_unreadable(ckpts, tmp_path: Path) -> None:
    util = round(_util_for_slack(ckpts["target"], [], 0.05 * GiB), 4)
    assert fc402_errors(ckpts["target"], [spec(str(tmp_path / "EAGLE3-gone"))], util) == []


def test_a_settled_launch_whose_flags_name_a_draft_reads_it(ckpts) -> None:
    """The engine's own reading of the command (``assess(settle=...)``) may add the
    speculative config: the draft is then read without reading the target again."""
    from flightcheck._pipeline import assess

    first = Intent(model=ckpts["target"])
    final = read_options(Intent(model=ckpts["target"], engine_flags=[spec(ckpts["eagle3"])]))
    report = assess(first, facts_docs=[host_doc("b300")], settle=lambda _: final)
    block = report.memory["speculative"]
    assert block["method"] == "eagle3" and block["draft_kv_bytes_per_token"] == 2 * KV * HD * 2


def test_the_draft_kv_cache_dtype_of_the_speculative_config(ckpts) -> None:
    """``SpeculativeConfig.kv_cache_dtype`` overrides the draft's cache dtype only
    (llm_base_proposer.py ``_create_draft_vllm_config``); unset, it is the target's."""
    plain = mem(ckpts["target"], [], tp=8)
    fp8 = mem(ckpts["target"], [spec(ckpts["eagle3"], kv_cache_dtype="fp8")], tp=8)
    assert fp8.kv().per_token - plain.kv().per_token == 2 * 1 * HD * 1  # one KV head a rank, 1 byte
    inherit = mem(ckpts["target"], [spec(ckpts["eagle3"])], tp=8)
    assert inherit.kv().per_token - plain.kv().per_token == 2 * 1 * HD * 2
