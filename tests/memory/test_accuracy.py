"""The memory model against 107 public vLLM startup logs (tests/fixtures/memory): the KV
budget it predicts stays within the accuracy reached, launches that died for lack of KV
room get FC402, and launches that ran are not stopped. ``bench/memory_accuracy.py``
prints the table."""

from __future__ import annotations

from flightcheck._knowledge import vllm
from flightcheck._memory.budget import activations, forward_peak
from flightcheck._memory.config import parse
from flightcheck._memory.weights import Layout
from support.memory_accuracy import RESIDUALS, GiB, _config, evaluate, load, summary


def test_kv_budget_accuracy_on_public_logs() -> None:
    rows = evaluate()
    s = summary(rows, held_out=False)
    # Issue 23 (v0rules): V0 points 113 (DeepSeek-R1, TP 8, 8 x H200, 0.7.3: +7.03 GiB, a residual),
    # 114 (Phi-4-mini, A100 40GB, 0.7.3: -0.24), 116 (Qwen2.5-1.5B, T4, 0.7.2: -0.05), 117
    # (Qwen2.5-Math-1.5B, 0.7.2: -0.18), 119 (DeepSeek-R1-Distill-Qwen-7B, V100, 0.7.1: -0.15) and
    # 120 (Qwen2.5-Math-1.5B, L40, 0.7.2: -0.16) joined the corpus, 115 and 118 the held-out set.
    # Then 123 (held out), 124, 125: the same model at TP 4 + EP on 4 x H100 SXM in 0.20.0 at 65536 / 8192 /
    # 32768 batched tokens (a benchmark report, SEARCHES.md): the prefill MoE workspaces by release
    # (vllm.memory_moe: no chunking from 0.18.0, FP8 activation copies, the separate output from 0.11.1)
    # give the 8192 -> 65536 growth (8.70 GiB, as logged); with main's FlashInfer fusion workspace (1.5 GiB
    # at TP 4 in 0.20.0) ~0.7 GiB of TP 4 non-torch memory is left: 124 +0.69, 125 +1.43 GiB, residuals
    # (RESIDUALS), 123 (held out) +1.28. The separate MoE output moved 17 -0.14 -> -0.17 and 121 / 122 by
    # -0.06 GiB. After the merge with main (gpt-oss point 112): 87 scored, 79 within, median |error| 0.1511.
    # Then points 121 / 122 (Qwen3-235B-A22B-Instruct-2507-FP8 at TP 4 over PCIe on 4 x RTX PRO 6000,
    # 0.27.0 inferred, TP and TP + EP; SEARCHES.md) joined: +0.59 / +0.48 GiB, both within (their non-torch
    # 1.70 GiB against 0.25 modelled, activations 1.12 against 0.76 logged); median |error| 0.1487 GiB,
    # tokens 1.25 % (their +2.1 % / +1.7 %).
    # Issue 23 (moefp8): point 33 (Qwen3-235B-A22B-FP8 at TP 4, vllm issue 21348) is scored on weights
    # derived from point 15's (memory_accuracy.DERIVED_WEIGHTS): +5.17 GiB with FlashInfer's sampler, +1.70
    # once an unknown release takes the sort (vllm.sampler_kind: the conservative side), a residual of an
    # unknown release and interconnect (RESIDUALS[33]) inside its bound; median |error| 0.1471 -> 0.1479 GiB
    # from that point alone. The fused_moe workspaces by release (vllm.memory_moe) moved 17 +0.08 -> -0.08 and
    # 80 -0.30 -> -0.34 GiB (its logged activation peak 0.23: modelled 0.10 -> 0.14).
    # Merged (v0rules + moefp8): 93 scored, 84 within, median |error| 0.1511 GiB.
    assert s["scored"] == 93, [(r.index, r.excluded) for r in rows]
    # Issue 23 (gptoss): point 112 (gpt-oss-120b on one H100 at 98,304 tokens, 0.11.2, Marlin
    # MXFP4 MoE, max_num_seqs 6) joined the corpus: +0.19 GiB, within; it moves the median
    # |error| from 0.1471 to 0.1479 GiB (no existing point changed: the MXFP4 backend rules of
    # vllm.memory_gptoss move only the MoE transient of an MXFP4 checkpoint, and the corpus's
    # other gpt-oss points print their sampler, so the bound's sampler_install term is not theirs).
    # Issue 23 (memory3): points 107 (Qwen3-4B, RTX 2060, a 0.8.x V0 fallback), 108 (phi-1.5,
    # GTX 1080, 0.6.4.post1), 110 and 111 (opt-125m, the same GTX 1080) joined the corpus, 109
    # (rho-1b, H200, 0.6.4.post1) the held-out set (tests/fixtures/memory/SEARCHES.md): all
    # within. 0.6.4.x counts the CUDA context inside its non-torch figure
    # (vllm.non_torch_from_process_start, read in the 0.6.4.post1 wheel): points 30 / 31
    # +0.27 / +0.33 -> -0.08 / -0.01 GiB. 76 of 81 within; median |error| 0.1471 GiB.
    # 72 of 77 (93.5%) within max(3%, 0.5 GiB): the two Qwen3-VL-30B-A3B points moved in with
    # Qwen-VL's item from its processor configs (vllm.qwen_vl_item: 0.11.0 / 0.12.0's 24,576-frame
    # dummy video, 12,288 tokens x 12.5 = 153,600 — the budget point 104's log prints — each
    # output zero-padded to that and held): 24 (TP 2, 0.12.0) +2.95 -> +0.73 GiB, 104 (TP 4,
    # 0.11.0) +2.46 -> +0.15 GiB. Before: 70 of 77 (91%). Points 95-106 were added without selection (every
    # usable log the searches found; the queries and the candidates rejected are in the morelogs
    # branch's report): Llama-3.1-8B on an A100-80GB in 0.31.0 (95, +0.51), Qwen2.5-7B on an RTX
    # 3090 in 0.6.6 (96, -0.03), Qwen3-30B-A3B at TP 4 on 22 GB boards in 0.8.5 at 131072 and 32768
    # (97, 98), Llama-3.2-3B on a T4 in 0.8.2 (99) and as Q8_0 GGUF on a laptop RTX 4070 (100),
    # Llama-3.1-8B in fp16 on an A100 (40GB inferred, as point 20) in 0.10.1.1 (105, -0.22), all
    # within; Qwen3-VL-30B-A3B at TP 4 on RTX 3090s in 0.11.0 (104, +2.46) missed as point 24 did;
    # 101-103 (LLaVA-NeXT, Qwen3-Next, UI-TARS) lack sourced configs and 106 (a Jetson
    # Thor) its CUDA total: recorded, not scored. 97-100 are V0 fallbacks of 0.8.x; before V0's own
    # sampler (sort unless VLLM_USE_FLASHINFER_SAMPLER=1) and batch rule were modelled
    # (vllm.runs_v0) 97, 98 and 100 missed by +0.82, +0.82 and +0.55 GiB; the same change brought
    # point 34 (V0) inside by 0.03 GiB.
    # Before: 62 of 69 (90%) within max(3%, 0.5 GiB). Vision models scored since (their encoder's
    # profile-run terms: _memory.budget.encoder_terms): LLaVA-1.5-7B AWQ on an RTX 4080 (19,
    # 0.10.2) -0.07 GiB, Mistral-Small-3.2-24B on an H100 (67, 0.11.0) +0.13 GiB, both within;
    # Qwen3-VL-30B-A3B at TP 2 (24, 0.12.0) +2.95 GiB, a residual (its item size is not in
    # config.json: RESIDUALS). Before them: 60 of 66 (91%): points 15 and 16 (8 x H100 NVSwitch, vLLM 0.10.0) moved in
    # with the TP group's two NCCL communicators derived from NCCL's source (flightcheck._knowledge.nccl:
    # 24 channels, 576 MiB of ring/tree buffers on the binding rank each, + 16 MiB of custom all-reduce;
    # NVLS left out as multicast is not in the log): +2.14 -> +1.00 and +2.13 -> +0.99 GiB, inside 3% of
    # their 35.65 / 55.62 GiB. Before: 58 of 66 (88%). Points 85-94 were added afterwards without selection
    # (every usable log found): a Llama-3.1-8B fine-tune on a 48 GB board in 0.15.1, Qwen2.5-7B on a
    # 32 GB V100 in 0.18.0, Qwen3-8B on an A100-40GB in 0.19.1 (server, bench latency, throughput)
    # and 0.9.2 (bench latency, throughput), Qwen3-0.6B on an RTX 3060 (94) are all within 0.15 GiB;
    # Qwen3-30B-A3B on a GB10 next to a co-resident vLLM (92) and the RTX 3060's first launch (93)
    # logged budgets larger than their requested memory minus their weights: residuals (RESIDUALS).
    # Before them: 50 of 56 (49 before point 32 was scored as its non-driver worker) within
    # max(3%, 0.5 GiB) of the logged "Available KV cache memory". Of the
    # 35 points scored since 21, the 34 new launches (vLLM 0.10.0 - 0.26.1: an RTX 3090 series of
    # 12, an llm-d H100 series at TP 1/2, L40S TP 8, A100 eager and 80 GB, A800 TP 4, RTX PRO
    # 6000, RTX 4090, L40S FP8, H100 x 2) are all within but 58 (its source's figures contradict its
    # stated utilization); point 32 (V0 TP 2) is scored on the non-driver worker whose figure
    # it logs (vllm.V0_SAMPLER_ON_DRIVER_ONLY): -0.42 GiB (-0.83 as the driver's). Reasons for
    # the misses in RESIDUALS.
    # (21 points scored before: 16 within; before the sampler's and V0's terms: 10 of 16,
    # median 0.46 GiB; before the budget by version: 2 of 16, median 1.95 GiB)
    # the floors are what is achieved: 72 within, median |error| 0.1488 GiB, tokens 1.12 %
    # (before the Qwen-VL item: 70 within, 0.1493 GiB)
    # (before points 95-106: 62 within, 0.1488 GiB, 1.25 %)
    # (before the V0 points 113-118: 77 within, median 0.1479 GiB; the new points move the median)
    # (before the sampler run's hidden-state copies, Triton's buffer, torch's BLAS workspaces and the
    # non-torch figure by whether the profile holds the graph captures: 84 within, median 0.1511 GiB,
    # tokens 1.33 %; point 15, TP 4 in 0.10.0, went +1.00 -> +1.07 GiB, 0.003 GiB past 3 % of its 35.65)
    assert s["within"] >= 83 and s["median_abs_error_gib"] <= 0.0950
    # token capacity where logged (block-rounded, minus the null block)
    # (1.32 % after points 121 - 125 and main's 112)
    assert s["median_token_error"] is not None and s["median_token_error"] <= 0.0096


def test_nvswitch_tp8_points_count_the_derived_communicators() -> None:
    """Points 15 and 16 (0.10.0, TP 8, 8 x H100 on NVSwitch): two communicators x 576 MiB
    (24 channels x (2 x 2 MiB sent + 2 x 10 MiB received) on a middle rank) + 16 MiB of custom
    all-reduce are certain; NVLS's 2 x 256 MiB only in the high end (multicast unknown)."""
    rows = {r.index: r for r in evaluate()}
    for i in (15, 16):
        lo, hi = rows[i].comm_gib or (0.0, 0.0)
        assert lo == (2 * 576 + 16) / 1024
        assert round(hi - lo, 3) == round(2 * (256 * 2**20 + 16 * 2 * 8 * 64) / GiB, 3)
    # a point without a recorded interconnect gets no such term (the low end of a range from 0)
    assert rows[3].comm_gib is None


def test_token_capacity_from_the_logged_budget_is_within_3_percent() -> None:
    """Where a log gives both the KV memory and "GPU KV cache size: N tokens", the tokens
    flightcheck computes from that logged memory (block-rounded, minus the null block, the
    hybrid allocator's pages for gpt-oss) are within 3% of vLLM's: the conversion alone,
    free of the budget's error (which the predicted tokens inherit). The logged GiB have two
    decimals, hence the small differences (at most 0.88%, point 55: 9,088 tokens)."""
    rows = evaluate()
    # the corpus only: the held-out points are scored apart (test_held_out_points_are_scored)
    conv = {r.index: (r.logged_tokens, r.tokens_from_logged) for r in rows if r.tokens_from_logged and not r.held_out}
    # 48 text-model points, and the vision models 19, 24 and 67 (LLaVA-1.5-7B 18,400 tokens
    # exactly, Qwen3-VL-30B-A3B +0.02 %, Mistral-Small-3.2-24B -0.07 %); then points 95, 104, 105;
    # then 112 (gpt-oss-120b's sliding-window / full hybrid at 98,304 tokens: 130,912 for 130,960),
    # point 33 (+1.14 %: its one "Available KV cache memory" line is one rank's, 8.11 GiB, while
    # the token count is sized by the smallest rank's budget — 178,880 tokens are 8.02 GiB at 48,128 B
    # a token; point 15's log of the same release series prints 35.65 - 36.12 GiB over its ranks)
    # and points 121 / 122 (-0.01 % / +0.01 %)
    assert len(conv) == 58, sorted(conv)
    assert abs(conv[112][1] - conv[112][0]) <= 0.001 * conv[112][0]
    off = {i: t for i, t in conv.items() if abs(t[1] - t[0]) > 0.03 * t[0]}
    assert not off, off
    # point 32 logs a V0 non-driver worker's KV memory; its tokens come from the driver's
    # smaller budget (vLLM takes the minimum over the workers), so it is not converted
    assert 32 not in conv and rows[32].logged_tokens == 81536
    s = summary(rows, held_out=False)
    assert s["conversion_within_3pct"] == s["conversion_points"] == 58
    assert s["max_conversion_error"] is not None and s["max_conversion_error"] < 0.0115


def test_a_pipeline_stage_converts_its_own_layers() -> None:
    """A PP 2 worker's "Available KV cache memory" holds its own stage's layers, so the tokens
    come from half the model's KV a token (point 140: Qwen3-32B, 32 of 64 layers a stage,
    0.27.1, 6.92 GiB logged by Worker_PP0 for 56,640 tokens). The conversion alone: the whole
    model's layers would give half the tokens (28,336)."""
    row = evaluate()[140]
    assert row.logged_tokens == 56640 and row.tokens_from_logged is not None
    assert abs(row.tokens_from_logged - row.logged_tokens) <= 0.01 * row.logged_tokens
    # the one-sequence check in 0.27.1 is of the stage's layers too: 32,768 tokens x 32 layers
    assert row.kv_need_gib is not None and abs(row.kv_need_gib - 4.0) < 0.01


def test_every_residual_has_its_reason() -> None:
    """The points outside max(3%, 0.5 GiB) are exactly those RESIDUALS explains."""
    rows = evaluate()
    held = {r.index for r in rows if r.held_out}
    off = {r.index for r in rows if r.within is False and not r.held_out}
    # (a held-out point's reason is recorded too, where one is known; it is not asserted)
    assert off == set(RESIDUALS) - held, off


#: launches that ran although FC402 stops them, and why
FC402_EXCEPTIONS = {
    # the source's utilization contradicts its own figures (RESIDUALS[58]); at the 0.95 they add
    # up to, FC402 does not stop it
    58: "the source's stated utilization contradicts its figures",
}
#: launches that died for want of KV room by less than the estimate's error: FC402 warns
#: (_memory.budget.NEAR_MISS), it does not stop them. 55 and 56 are the same Qwen2.5-7B launch
#: at utilization 0.65 on the same RTX 3090: it logged 0.49 GiB and ran (55), then 0.41 GiB and
#: died for want of 0.44 (56); 0.28 GiB is predicted for both, so no stop can be right for both.
NEAR_MISSES = {52, 56}


def test_failed_launches_get_fc402_and_ran_ones_are_not_stopped() -> None:
    # the corpus only: the held-out points are scored apart (test_held_out_points_are_scored)
    rows = [r for r in evaluate() if r.excluded is None and not r.held_out]
    for r in rows:
        if r.outcome == "ran" and r.index not in FC402_EXCEPTIONS:
            assert r.predicted_stop is False, f"point {r.index} ran but FC402 would stop it"
    stopped_that_ran = {r.index for r in rows if r.outcome == "ran" and r.predicted_stop}
    assert stopped_that_ran == set(FC402_EXCEPTIONS)
    # 55 ran at a shortfall inside the estimate's error: FC402 warns, and does not stop it
    assert {r.index for r in rows if r.outcome == "ran" and r.predicted_fail and not r.predicted_stop} == {55}
    failed = {r.index for r in rows if r.outcome == "failed-no-kv-room"}
    caught = {r.index for r in rows if r.outcome == "failed-no-kv-room" and r.predicted_fail}
    stopped = {r.index for r in rows if r.outcome == "failed-no-kv-room" and r.predicted_stop}
    # 28 gpt-oss-120b on one H100 (0.11.0, --max-num-batched-tokens 1024, util 0.95), 29 the
    # same at the defaults (0.10.1.1), 31 Llama-3.1-8B on an RTX 3090 (V0, max_model_len 29000),
    # 52 / 54 / 56 Llama-3.1-8B and Qwen2.5-7B on an RTX 3090 at utilization 0.70 / 0.60 / 0.65
    # (0.17.1), 60 Llama-3.3-70B FP8 at TP 1 on an H100 (67.72 GiB of weights), 32
    # DeepSeek-R1-Distill-Qwen-14B at TP 2 on RTX 4090s with max_model_len 131072 (V0). (Held out, not
    # asserted here: 123, Qwen3-235B-A22B-Instruct-2507-FP8 at TP 4 + EP with 65536 batched tokens and a
    # 240,000-token sequence (0.20.0): 7.40 GiB predicted, 4.15 logged, 10.76 needed — FC402 stops it.)
    assert failed == caught == {28, 29, 31, 32, 52, 54, 56, 60}
    assert stopped == failed - NEAR_MISSES
    # the launches scored since that ran (Phi-3-mini on an RTX 3090 under WSL, Qwen3-32B at
    # TP 8, gpt-oss-20b on a GB10, the RTX 3090 and H100 series, points 85-92, 94, 95-100 and
    # 105) are among those checked above: FC402 stops none of them
    assert {
        11,
        12,
        16,
        43,
        44,
        45,
        53,
        57,
        59,
        65,
        66,
        69,
        72,
        73,
        74,
        75,
        76,
        80,
        81,
        82,
        83,
        84,
        85,
        86,
        87,
        88,
        89,
        90,
        91,
        92,
        94,
        19,
        24,
        67,
        95,
        96,
        97,
        98,
        99,
        100,
        105,
    } <= {r.index for r in rows if r.outcome == "ran"}


def test_lora_launches_are_recorded_not_scored() -> None:
    """--enable-lora launches (points 77-79, Kaggle 2 x T4) are in the data with their figures,
    but LoRA's buffers and the profile's dummy adapters are not modelled: not scored."""
    rows = {r.index: r for r in evaluate()}
    points, _ = load()
    for i in (77, 78, 79):
        assert points[i]["enable_lora"] and "enable-lora" in (rows[i].excluded or "")


def test_a_launch_that_died_after_logging_its_budget_is_scored_on_it() -> None:
    """Point 49 logged 5.61 GiB, then died of an OOM warming up the sampler (after the KV
    cache was allocated): its budget counts for the accuracy, not for FC402's verdicts."""
    rows = {r.index: r for r in evaluate()}
    assert rows[49].outcome == "failed-oom" and rows[49].excluded is None and rows[49].within


def test_a_launch_of_unknown_fate_is_scored_on_its_budget_only() -> None:
    """Point 34 logs its KV budget but not whether it served: it counts for the accuracy,
    not for FC402's verdicts."""
    rows = {r.index: r for r in evaluate()}
    assert rows[34].outcome == "unknown" and rows[34].excluded is None and rows[34].within is not None
    assert rows[35].excluded is not None  # the same PR's TP 2 run: its KV figure is cut off


def test_gb10_gets_the_small_batch_tier() -> None:
    """A GB10 has no NVML memory figure: before 0.33 vLLM's batch defaults read 0 and pick
    2048 / 256 (point 11 logs 'Chunked prefill is enabled with max_num_batched_tokens=2048'),
    from 0.33 cc 12.1 keeps it there despite 121.69 GiB."""
    assert vllm.batch_defaults((0, 13, 0), 0, "NVIDIA GB10", None) == (2048, 256)
    assert vllm.batch_defaults((0, 33, 0), int(121.69 * GiB), "NVIDIA GB10", "12.1") == (2048, 256)
    # an H100's 79 GiB, by contrast, gets the 8192 / 1024 tier in both
    assert vllm.batch_defaults((0, 13, 0), int(79.19 * GiB), "NVIDIA H100 80GB HBM3", None) == (8192, 1024)
    points, _ = load()
    assert points[11]["max_num_batched_tokens"] == 2048


def test_sampler_dominates_the_reserve_at_1024_sequences() -> None:
    """gpt-oss-120b at vLLM's H100 defaults: 1024 dummy requests x 201,088 logits through
    the PyTorch-native top-k/top-p sort (38 bytes an element) — 7.3 GiB of transient peak,
    what leaves -2.14 GiB for KV in point 29 — against 2.7 GiB with FlashInfer's sampler (14)."""
    _, configs = load()
    cfg = parse(_config(configs["gpt-oss-120b"]))
    native = activations(cfg, Layout(1), 8192, 1024, sampler="sort") / GiB
    fi = activations(cfg, Layout(1), 8192, 1024, sampler="flashinfer") / GiB
    assert 7.2 < native < 7.4 and 2.6 < fi < 2.8
    # the forward pass alone (fused_moe's workspaces at 8192 tokens) is far below either
    assert forward_peak(cfg, Layout(1), 8192) / GiB < 0.7


def test_v0_profile_tokens_follow_max_model_len_up_to_32k() -> None:
    """V0 (0.6.4.post1): without chunked prefill (max_model_len <= 32768) the profile run
    batches max(max_model_len, 2048) tokens, so the 29k launch of point 31 reserves more
    than the 20k one of point 30 and fails, while past 32K chunked prefill caps it at 512
    (2048 from 0.6.5: tests/memory/test_v0_rules.py)."""
    assert vllm.v0_batch(20000) == (20000, 256)
    assert vllm.v0_batch(29000) == (29000, 256)
    assert vllm.v0_batch(35000, (0, 6, 4, 1)) == (512, 256)
    assert vllm.batch_defaults((0, 6, 4), 24 << 30, "NVIDIA GeForce RTX 3090", None, max_model_len=29000)[0] == 29000
    assert vllm.batch_defaults((0, 11, 0), 24 << 30, "NVIDIA GeForce RTX 3090", None, max_model_len=29000)[0] == 2048


def test_sampler_by_version() -> None:
    """FlashInfer's sampler by default before 0.11.2 (when installed), the sort from 0.11.2,
    Triton's in-place top-k/top-p from 0.17.0 (topk_topp_triton.py first ships in the 0.17.0
    wheel; 0.16.0 sorts). The RTX 3090 series of vLLM 0.17.1 (points 45-56) is within 0.21 GiB
    with it; with the sort's 38 bytes x 256 x 128,256 it was 0.9-1.1 GiB low on every point."""
    assert vllm.sampler_kind((0, 10, 1, 1)) == "flashinfer"
    assert vllm.sampler_kind((0, 10, 1, 1), installed=False) == "sort"
    assert vllm.sampler_kind((0, 11, 2)) == "sort"
    assert vllm.sampler_kind((0, 16, 0), {vllm.USE_FLASHINFER_SAMPLER: "1"}) == "flashinfer"
    assert vllm.sampler_kind((0, 16, 0)) == "sort"
    assert vllm.sampler_kind((0, 17, 0)) == vllm.sampler_kind((0, 17, 1)) == "triton"
    assert vllm.sampler_kind((0, 19, 0)) == vllm.sampler_kind((0, 33, 0)) == "triton"
    assert vllm.sampler_bytes_per_element("sort", 1024) == 38
    assert vllm.sampler_bytes_per_element("sort", 64) == 50
    assert vllm.sampler_bytes_per_element("flashinfer", 1024) == vllm.sampler_bytes_per_element("triton", 8) == 14


def test_v0_non_driver_worker_figure_is_scored_as_that_worker() -> None:
    """Point 32 (V0, TP 2) quotes 8.69 GiB with a 0.19 GiB peak, while its 81,536-token
    capacity is 7.46 GiB per rank: the engine sizes the cache by the smallest worker, the
    driver, which alone runs the dummy sampler (vllm.V0_SAMPLER_ON_DRIVER_ONLY). The quoted
    figure is scored against the non-driver's budget; FC402 and the tokens use the driver's."""
    assert vllm.V0_SAMPLER_ON_DRIVER_ONLY
    r = {r.index: r for r in evaluate()}[32]
    assert r.binding_gib is not None and r.predicted_gib is not None
    # the non-driver's budget is larger by the sampler's share of the peak
    assert r.predicted_gib - r.binding_gib > 0.3
    assert r.within and abs(r.binding_gib - r.logged_gib) > 0.5  # as the driver's, it missed
    # FC402 on the binding (driver) rank: 12 GiB for one 131,072-token sequence does not fit
    assert r.predicted_stop and r.kv_need_gib is not None and r.kv_need_gib > r.binding_gib


def test_v0_fallback_of_0_8_runs_v0s_sampler_and_batch_rule() -> None:
    """From 0.8.0 V1 is the default, but until 0.10.1.1 a GPU below compute capability 8.0 (and,
    in 0.8.x, --quantization gguf) falls back to V0 (vllm/engine/arg_utils.py
    ``_is_v1_supported_oracle``, read in the 0.8.0, 0.8.5, 0.10.0 and 0.10.1.1 wheels), whose
    sampler sorts unless VLLM_USE_FLASHINFER_SAMPLER=1 and whose profile run batches
    max(max_model_len, 2048) tokens without chunked prefill (2048 with it, past 32K)."""
    t4, a100 = "7.5", "8.0"
    assert vllm.runs_v0((0, 8, 5), t4) and vllm.runs_v0((0, 10, 1, 1), "7.0")
    assert not vllm.runs_v0((0, 8, 5), a100) and not vllm.runs_v0((0, 9, 2), a100)
    assert not vllm.runs_v0((0, 10, 2), t4) and not vllm.runs_v0((0, 11, 0), t4)  # no fallback / no V0
    assert vllm.runs_v0((0, 8, 2), a100, "gguf") and not vllm.runs_v0((0, 10, 0), a100, "gguf")
    assert vllm.runs_v0((0, 6, 4)) and not vllm.runs_v0(None, t4)
    assert vllm.runs_v0((0, 8, 5), a100, env={vllm.USE_V1: "0"})
    # V0's sampler: the sort whether or not FlashInfer is installed, unless opted in
    assert vllm.sampler_kind((0, 8, 5), v0=True) == "sort"
    assert vllm.sampler_kind((0, 8, 5), {vllm.USE_FLASHINFER_SAMPLER: "1"}, v0=True) == "flashinfer"
    assert vllm.sampler_kind((0, 8, 5)) == "flashinfer"  # the same release on V1
    # V0's batch: the launch's length up to 32K; past it 0.8's chunked default is 2048, not 512
    assert vllm.batch_defaults((0, 8, 2), int(7.65 * GiB), "RTX 4070", None, 10000, v0=True) == (10000, 256)
    assert vllm.batch_defaults((0, 8, 2), int(7.65 * GiB), "RTX 4070", None, 10000) == (2048, 256)
    assert vllm.v0_batch(65536, (0, 8, 5)) == (2048, 256) and vllm.v0_batch(65536, (0, 6, 4)) == (512, 256)


def test_v0_fallback_points_are_predicted_with_v0s_terms() -> None:
    """Points 97-100 (0.8.x V0 fallbacks: TP 4 on 22 GB boards, a T4, a GGUF launch) log
    activation peaks of 1.39, 0.90 and 1.22 GiB, which V0's sort sampler reproduces (1.38, 0.88,
    1.22); with V1's FlashInfer sampler 97, 98 and 100 were off by +0.82, +0.82, +0.55 GiB.
    The engine the rule picks agrees with the one the logs show where the GPU is known."""
    rows = {r.index: r for r in evaluate()}
    points, configs = load()
    for i in (97, 98, 99, 100):
        assert points[i]["engine"] == "V0" and rows[i].within, i
        assert rows[i].error_gib is not None and abs(rows[i].error_gib) < 0.25, (i, rows[i].error_gib)
    # the rule alone (no logged engine) picks V0 for the T4 (cc 7.5) and for GGUF on 0.8.2
    assert vllm.runs_v0((0, 8, 2), points[99]["compute_capability"])
    assert vllm.runs_v0((0, 8, 2), None, points[100]["quantization"])
    cfg = parse(_config(configs["qwen3-30b-a3b"]))
    sort = activations(cfg, Layout(4), 2048, 256, sampler="sort") / GiB
    fi = activations(cfg, Layout(4), 2048, 256, sampler="flashinfer") / GiB
    assert abs(sort - points[97]["logged"]["activation_peak_gib"]) < 0.02 and fi < 0.6


def test_the_launch_path_applies_the_v0_fallback() -> None:
    """``batch_for`` (what a real check uses) takes V0's batch and sampler for a 0.8.5 launch on
    a T4 and V1's on an A100, from the compute capability the collector reports."""
    from flightcheck._memory import batch_for
    from flightcheck._vocabulary.intent import Intent

    it = Intent(max_model_len=10000)
    t4 = batch_for(it, int(14.74 * GiB), "Tesla T4", "0.8.5", "7.5")
    a100 = batch_for(it, int(39.39 * GiB), "NVIDIA A100-SXM4-40GB", "0.8.5", "8.0")
    assert (t4.tokens, t4.seqs, t4.sampler) == (10000, 256, "sort")
    assert (a100.tokens, a100.seqs, a100.sampler) == (2048, 256, "flashinfer")
    gguf = batch_for(Intent(max_model_len=10000, quantization="gguf"), int(7.65 * GiB), "RTX 4070", "0.8.2", "8.9")
    assert gguf.sampler == "sort" and gguf.tokens == 10000


def test_text_only_points_with_sourced_configs_are_excluded_for_what_they_lack() -> None:
    """The text-only architectures of the excluded points are sourced (model_configs.json:
    Qwen3-Coder-480B-A35B, DeepSeek-V3 for R1 / R1-0528, DeepSeek-V2-Lite; Qwen2.5-14B,
    Qwen3-30B-A3B and Llama-3.3-70B for the AWQ / FP8 / w8a8 releases): what keeps them out of
    the score is now a missing GPU total (no GPU named, or one whose CUDA total no public log
    gives: H20, RTX 5070 Ti + 5090 D) or per-rank weights the log does not print."""
    rows = {r.index: r for r in evaluate()}
    for i in (13, 25, 26, 27, 37, 41, 71):
        assert rows[i].excluded == "GPU total unknown", (i, rows[i].excluded)
    for i in (42, 68):
        assert (rows[i].excluded or "").startswith("weights per rank not logged"), (i, rows[i].excluded)
    # Qwen3.6 (a Qwen3.5-MoE vision wrapper with gated-delta-net layers and MTP) and Laguna-S-2.1
    # (with a DFlash drafter) on a GB10: no sourced config, not modelled
    for i in (8, 9, 10):
        assert rows[i].excluded == "no sourced config.json figures for this architecture"


def test_the_logged_budget_lies_inside_the_reported_bound() -> None:
    """Issue 23: the bound holds what the launch does not decide (``bound.bound_terms``). Outside
    it: 34 (a V0 development build's 1.79 GiB non-torch at TP 1), 58 (figures that do not add up
    at the stated utilization), 93 (another process released memory during the profile) — the
    RESIDUALS reasons. Point 2 (TP 2 across nodes) is inside since NCCL's network buffers are
    bounded (nccl.multinode_communicator_bytes). The held-out points are asserted apart."""
    from support.memory_accuracy import evaluate, summary

    rows = evaluate()
    s = summary(rows, held_out=False)
    assert s["inside"] >= 85 and s["within5"] >= 82
    outside = {r.index for r in rows if r.excluded is None and r.inside is False and not r.held_out}
    # 34 is inside since its build's profiler (0.6.5's memory_profiling) counts torch's
    # reserved-but-free blocks (the allocator_cache term); 113 is RESIDUALS[113]
    assert outside <= {58, 93, 113}
    assert s["median_width_gib"] < 1.2


def test_held_out_points_are_scored() -> None:
    """The held-out set (``"held_out": true``, SEARCHES.md) is scored apart from the corpus:
    point 109, every third point the rule-deriving helpers added (115, 118, 123), the 12
    points of "a genuinely held-out measurement set" (126-137), the 5 of round 3 (138-142) and
    the 25 of round 4 (143-167), each round gathered by a helper that changed no rule. Every one
    of them is scored, none excluded; how well
    flightcheck predicts them is printed by ``bench/memory_accuracy.py`` ("held-out:") and
    deliberately not asserted here, since a threshold on them would invite tuning the rules
    to them."""
    rows = evaluate()
    held = [r for r in rows if r.held_out]
    assert len(held) >= 46, [r.index for r in held]
    assert all(r.excluded is None for r in held), {r.index: r.excluded for r in held if r.excluded}
    s = summary(rows, held_out=True)
    assert s["scored"] == s["bounded"] == len(held)


def test_0_6_4_counts_the_cuda_context_inside_the_budget() -> None:
    # vllm/worker/worker.py determine_num_available_blocks (0.6.4.post1 wheel): non_torch_allocations
    # = (total - free) - torch allocated, device-wide from process start; 0.6.0 measures against
    # init_device's free memory; 0.6.5 moved to PR 10511's baseline
    from flightcheck._memory.budget import CONTEXT, Batch, default_reserve
    from flightcheck._vocabulary.version import release

    assert vllm.non_torch_from_process_start(release("0.6.4.post1"))
    assert not vllm.non_torch_from_process_start(release("0.6.0"))
    assert not vllm.non_torch_from_process_start(release("0.6.5"))
    assert not vllm.non_torch_from_process_start(None)
    _points, configs = load()
    cfg = parse(_config(configs["llama-3-8b"]), None)
    with_ctx = default_reserve(cfg, Layout(1, 1), "vllm", batch=Batch(release=release("0.6.4.post1")))[1]
    without = default_reserve(cfg, Layout(1, 1), "vllm", batch=Batch(release=release("0.6.6")))[1]
    assert with_ctx["cuda_context"] == CONTEXT and "cuda_context" not in without
