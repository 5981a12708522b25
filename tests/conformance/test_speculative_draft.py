"""A separate draft's rules in ``flightcheck._knowledge.vllm`` against the installed vLLM:

- ``SpeculativeConfig`` (vllm/config/speculative.py) for a generated Llama target and a
  generated EAGLE / EAGLE-3 / plain draft directory (config.json only: offline, no weights,
  no GPU): the method detected, the draft TP (``_verify_and_get_draft_tp``) and a refused
  draft TP must be what ``vllm.speculative`` resolves;
- ``DraftModelProposer._raise_if_draft_tp_mismatch`` (v1/spec_decode/draft_model.py): a
  ``draft_model`` draft at another TP than the target's is refused;
- what the proposer shares with the target (v1/spec_decode/llm_base_proposer.py
  ``_maybe_share_embeddings`` / ``_maybe_share_lm_head``, and draft_model.py's overrides),
  run on small CPU modules standing for the target and the draft with the PP group size
  stood in for, must be what ``vllm.draft_shares`` says.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from flightcheck._knowledge import vllm
from support.ckptgen import load_config

TP = 8

PROBE = r"""
import json, os, sys, types
os.environ["HF_HUB_OFFLINE"] = "1"
from unittest import mock
import torch
from torch import nn
from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig
from vllm.v1.spec_decode import llm_base_proposer as base
from vllm.v1.spec_decode.draft_model import DraftModelProposer
target_path, tp, docs, cases = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
target = ModelConfig(model=target_path, tokenizer=target_path, skip_tokenizer_init=True)
par = ParallelConfig(tensor_parallel_size=tp)
resolved = []
for doc in docs:
    try:
        s = SpeculativeConfig(**doc, target_model_config=target, target_parallel_config=par)
        if s.method == "draft_model":
            DraftModelProposer._raise_if_draft_tp_mismatch(types.SimpleNamespace(speculative_config=s))
    except Exception as e:
        resolved.append({"error": type(e).__name__ + ": " + str(e)[:300]})
        continue
    resolved.append({"method": s.method, "draft_tp": s.draft_tensor_parallel_size})

V, H = 64, 8
def module(**kw):
    m = nn.Module()
    for k, v in kw.items():
        setattr(m, k, v)
    return m
shares = []
for c in cases:
    torch.manual_seed(0)
    t_embed, t_head = nn.Embedding(V, H), nn.Linear(H, V, bias=False)
    tgt = module(model=module(embed_tokens=t_embed), lm_head=t_head)
    width = H if c["same_width"] else 2 * H
    d_embed = nn.Embedding(V, width)
    if c["equal"] and c["same_width"]:
        d_embed.weight.data.copy_(t_embed.weight.data)
    inner = module(embed_tokens=d_embed)
    draft = module(model=inner)
    if c["method"] != "draft_model":
        draft.has_own_embed_tokens = c["embed_stored"]
        draft.has_own_lm_head = c["head_stored"]
    if c["method"] != "eagle":
        rows = V if c["head_same_shape"] else V // 2
        d_head = nn.Linear(H, rows, bias=False)
        if c["equal"] and c["head_same_shape"]:
            d_head.weight.data.copy_(t_head.weight.data)
        draft.lm_head = d_head
    fake = types.SimpleNamespace(model=draft, vllm_config=types.SimpleNamespace(speculative_config=None),
                                 use_local_argmax_reduction=False)
    cls = DraftModelProposer if c["method"] == "draft_model" else base.SpecDecodeBaseProposer
    pp = mock.MagicMock()
    pp.world_size = c["pp"]
    with mock.patch.object(base, "get_pp_group", return_value=pp):
        cls._maybe_share_embeddings(fake, tgt)
        cls._maybe_share_lm_head(fake, tgt)
    shares.append({
        "embed": "shared" if draft.model.embed_tokens is t_embed else "own",
        "head": "shared" if getattr(draft, "lm_head", None) is t_head else "own",
    })
print(json.dumps({"resolved": resolved, "shares": shares}))
"""

EAGLE = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 1,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-05,
    "torch_dtype": "bfloat16",
}
DRAFTS = {
    "EAGLE-LLaMA3-Instruct-8B": EAGLE,
    "EAGLE3-LLaMA3.1-Instruct-8B": {**EAGLE, "architectures": ["LlamaForCausalLMEagle3"], "draft_vocab_size": 32000},
    "small": {**EAGLE, "num_hidden_layers": 2},
}
DOCS = [
    {"model": "EAGLE-LLaMA3-Instruct-8B", "num_speculative_tokens": 3},
    {"model": "EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3},
    {"model": "EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 1},
    {"model": "EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 2},
    {"model": "small", "num_speculative_tokens": 3},
    {"model": "small", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 1},  # refused by the proposer
]


def _cases() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for method in ("eagle", "eagle3", "draft_model"):
        for pp in (1, 2):
            # an EAGLE-1 draft has no lm_head module: a stored one fails its load, not counted here
            stored = ((False, False), (True, False)) if method == "eagle" else ((False, False), (True, True))
            for embed_stored, head_stored in stored:
                for same_width, head_same_shape, equal in (
                    (True, True, True),
                    (True, True, False),
                    (False, False, False),
                    (True, False, True),
                ):
                    out.append(
                        {
                            "method": method,
                            "pp": pp,
                            "embed_stored": embed_stored,
                            "head_stored": head_stored,
                            "same_width": same_width,
                            "head_same_shape": head_same_shape,
                            "equal": equal,
                        }
                    )
    return out


def test_separate_draft_rules_match_the_installed_vllm(engine_python: str, tmp_path: Path) -> None:
    target = tmp_path / "llama"
    target.mkdir()
    cfg = load_config("llama-3-8b")
    (target / "config.json").write_text(json.dumps(cfg))
    docs = []
    for doc in DOCS:
        d = tmp_path / str(doc["model"])
        if not d.exists():
            d.mkdir()
            (d / "config.json").write_text(json.dumps(DRAFTS[str(doc["model"])]))
        docs.append({**doc, "model": str(d)})
    cases = _cases()
    run = subprocess.run(
        [engine_python, "-c", PROBE, str(target), str(TP), json.dumps(docs), json.dumps(cases)],
        capture_output=True,
        text=True,
        check=False,
        timeout=400,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    for doc, theirs in zip(docs, got["resolved"], strict=True):
        flag = f"{vllm.SPECULATIVE_CONFIG_FLAG}={json.dumps(doc)}"
        ours = vllm.speculative([flag], cfg, str(target), TP)
        assert ours is not None, doc
        if "error" in theirs:
            assert ours.error is not None, (doc, theirs)
            continue
        assert ours.error is None, (doc, ours.error)
        assert {"method": ours.method, "draft_tp": ours.draft_tp} == theirs, doc
        assert vllm.separate_draft(ours, str(target)) == doc["model"]
    for case, theirs in zip(cases, got["shares"], strict=True):
        s = vllm.draft_shares(
            str(case["method"]),
            int(case["pp"]),  # type: ignore[call-overload]
            embed_stored=bool(case["embed_stored"]),
            head_stored=bool(case["head_stored"]),
            same_width=bool(case["same_width"]),
            head_same_shape=bool(case["head_same_shape"]),
        )
        # "if_equal": shared exactly when the values are equal (the case says whether)
        mine = {
            k: ("shared" if case["equal"] else "own") if v == "if_equal" else v
            for k, v in (("embed", s.embed), ("head", s.head))
        }
        assert mine == theirs, case
