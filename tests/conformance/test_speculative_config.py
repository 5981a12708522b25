"""``flightcheck._knowledge.vllm.speculative`` against vLLM's own ``SpeculativeConfig``
(vllm/config/speculative.py ``__post_init__``): the installed vLLM builds the config for a
generated DeepSeek-V3 directory (config.json only: offline, no weights, no GPU — the
target ``ModelConfig`` with ``skip_tokenizer_init``), and the method, speculative tokens,
draft model, draft TP and MTP layers (``n_predict``) must be what flightcheck resolves, and
a config vLLM refuses must be one flightcheck calls refused. (``suffix`` is left out: its
validation imports the optional arctic-inference package, so vLLM's answer depends on the
host, not on the config.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from flightcheck._knowledge import vllm
from support.ckptgen import load_config

TP = 8
TARGET = "$TARGET"  # stands for the generated directory in both resolutions

PROBE = r"""
import json, os, sys
os.environ["HF_HUB_OFFLINE"] = "1"
from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig
path, tp, docs = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
target = ModelConfig(model=path, tokenizer=path, skip_tokenizer_init=True)
par = ParallelConfig(tensor_parallel_size=tp)
out = []
for doc in docs:
    doc = {k: (path if v == "$TARGET" else v) for k, v in doc.items()}
    try:
        s = SpeculativeConfig(**doc, target_model_config=target, target_parallel_config=par)
    except Exception as e:
        out.append({"error": type(e).__name__ + ": " + str(e)[:300]})
        continue
    hf = getattr(s.draft_model_config, "hf_config", None)
    out.append({
        "method": s.method,
        "num_speculative_tokens": s.num_speculative_tokens,
        "model": s.model,
        "draft_tp": s.draft_tensor_parallel_size,
        "n_predict": getattr(hf, "n_predict", None) if s.method == "mtp" else None,
    })
print(json.dumps(out))
"""

DOCS: list[dict[str, object]] = [
    {"method": "mtp", "num_speculative_tokens": 1},
    {"method": "deepseek_mtp", "num_speculative_tokens": 2},
    {"model": TARGET, "num_speculative_tokens": 1},  # method auto-detected from the draft's model_type
    {"model": TARGET},  # refused: 0.33 compares None > 1 before defaulting to n_predict
    {"method": "mtp", "num_speculative_tokens": 1, "draft_tensor_parallel_size": 1},
    {"method": "mtp", "num_speculative_tokens": 1, "draft_tensor_parallel_size": 4},  # refused
    {"model": "ngram", "num_speculative_tokens": 3},
    {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},
    {"method": "eagle", "num_speculative_tokens": 2},  # refused: no model
]


def test_speculative_resolution_matches_the_installed_vllm(engine_python: str, tmp_path: Path) -> None:
    cfg = {**load_config("deepseek-v3"), "n_routed_experts": 8}
    target = tmp_path / "ds"
    target.mkdir()
    (target / "config.json").write_text(json.dumps(cfg))
    run = subprocess.run(
        [engine_python, "-c", PROBE, str(target), str(TP), json.dumps(DOCS)],
        capture_output=True,
        text=True,
        check=False,
        timeout=400,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(got) == len(DOCS)
    for doc, theirs in zip(DOCS, got, strict=True):
        flag = f"{vllm.SPECULATIVE_CONFIG_FLAG}={json.dumps(doc).replace(TARGET, str(target))}"
        ours = vllm.speculative([flag], cfg, str(target), TP)
        assert ours is not None, doc
        if "error" in theirs:
            assert ours.error is not None, (doc, theirs)
            continue
        assert ours.error is None, (doc, ours.error)
        mine = {
            "method": ours.method,
            "num_speculative_tokens": ours.num_speculative_tokens,
            "model": ours.model,
            "draft_tp": ours.draft_tp,
            "n_predict": ours.mtp_layers or None,
        }
        assert mine == theirs, doc
