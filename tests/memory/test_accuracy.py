"""The memory model against 43 public vLLM startup logs (tests/fixtures/memory): the KV
budget it predicts stays within the accuracy reached, launches that died for lack of KV
room get FC402, and launches that ran are not stopped. ``bench/memory_accuracy.py``
prints the table."""

from __future__ import annotations

from flightcheck._memory.config import parse
from flightcheck._memory.kv import capacity, kv_shape
from support.memory_accuracy import GiB, _config, evaluate, load, summary

#: failed-no-kv-room launches the model still passes, and why (see the bench's table):
#: 28 gpt-oss-120b on one H100 (vLLM's reserve there is ~7.5 GiB, ours ~1.6: its MXFP4
#: MoE path on Hopper takes memory the model does not know of — 29, the same launch at
#: the default utilization, is caught); 31 Llama-3.1-8B on an RTX 3090 (the logged budget
#: falls 0.9 GiB between max_model_len 20000 and 29000: a profile run sized by the length,
#: chunked prefill off in that unknown version, which the point does not say).
KNOWN_MISSES = {28, 31}


def test_kv_budget_accuracy_on_public_logs() -> None:
    rows = evaluate()
    s = summary(rows)
    assert s["scored"] == 16, [(r.index, r.excluded) for r in rows]
    # 10 of 16 (62%) within max(3%, 0.5 GiB) of the logged "Available KV cache memory";
    # before the budget by version: 2 of 16, median 1.95 GiB
    assert s["within"] >= 10 and s["median_abs_error_gib"] <= 0.5


def test_failed_launches_get_fc402_and_ran_ones_are_not_stopped() -> None:
    rows = [r for r in evaluate() if r.excluded is None]
    for r in rows:
        if r.outcome == "ran":
            assert r.predicted_fail is False, f"point {r.index} ran but FC402 would stop it"
    failed = {r.index for r in rows if r.outcome == "failed-no-kv-room"}
    caught = {r.index for r in rows if r.outcome == "failed-no-kv-room" and r.predicted_fail}
    assert failed - caught == KNOWN_MISSES and caught == {29}


def test_kv_tokens_as_vllm_logs_them() -> None:
    """From the logged budget, the block-rounded token count vLLM logs: Qwen2-7B (one
    group) and gpt-oss-120b at TP 4 (18 sliding + 18 full layers, two groups: before vLLM
    0.21 num_blocks // groups x 16 — half of what the full layers alone would hold)."""
    points, configs = load()
    for i, arch in ((0, "qwen2-7b"), (5, "gpt-oss-120b")):
        p = points[i]
        cfg = parse(_config(configs[arch]))
        shape = kv_shape(cfg, range(cfg.layers), p["tp"], "auto")
        cap = capacity(
            shape, p["logged"]["available_kv_gib"] * GiB, p["max_model_len"], batched_tokens=2048, by_concurrency=False
        )
        logged = p["logged"]["kv_tokens"]
        assert abs(cap.tokens - logged) <= 0.002 * logged, (i, cap.tokens, logged)  # the logged GiB has 2 decimals
    full_only = points[5]["logged"]["available_kv_gib"] * GiB / (18 * 2 * 2 * 64 * 2)
    assert abs(cap.tokens / full_only - 0.5) < 0.01
