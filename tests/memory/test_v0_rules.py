"""vLLM's V0 engine rules by release (``flightcheck._knowledge.vllm.memory_v0``, read in the
0.6.1 - 0.10.1.1 wheels) and the public V0 startup logs they predict (tests/fixtures/memory
points 113-120, issue 23)."""

from __future__ import annotations

import pytest

from flightcheck._knowledge import vllm
from flightcheck._memory.bound import bound_terms
from flightcheck._memory.budget import Batch, forward_peak
from flightcheck._memory.config import parse
from flightcheck._memory.weights import Layout
from flightcheck._vocabulary.version import release
from support.memory_accuracy import _config, evaluate, load

GiB = 1 << 30
V1_ON = {vllm.USE_V1: "1"}
V1_OFF = {vllm.USE_V1: "0"}


@pytest.mark.parametrize(
    ("version", "cc", "quant", "env", "v0"),
    [
        # before 0.6.4 there is no VLLM_USE_V1 (envs.py 0.6.3.post1): V0 whatever the variable says
        ("0.6.3.post1", None, None, V1_ON, True),
        # 0.6.4 - 0.7.3: VLLM_USE_V1 defaults to "0"; "1" runs the experimental V1
        ("0.6.4.post1", None, None, None, True),
        ("0.6.4.post1", None, None, V1_ON, False),
        ("0.6.5", "9.0", None, None, True),
        ("0.7.0", "9.0", None, None, True),
        ("0.7.3", "9.0", None, None, True),
        ("0.7.3", "9.0", None, V1_ON, False),
        ("0.7.3", "9.0", None, V1_OFF, True),
        # 0.8.0 - 0.10.1.1: V1 unless the oracle falls back (cc < 8.0; GGUF in 0.8.x) or V1 is off
        ("0.8.0", "9.0", None, None, False),
        ("0.8.0", None, None, None, False),
        ("0.8.0", "7.5", None, None, True),
        ("0.8.0", "9.0", None, V1_OFF, True),
        ("0.8.0", "7.5", None, V1_ON, False),
        ("0.8.5", "8.6", "gguf", None, True),
        ("0.9.0", "8.6", "gguf", None, False),
        ("0.9.2", "7.5", None, None, True),
        ("0.10.1.1", "7.0", None, None, True),
        # 0.10.2 has no fallback and 0.11.0 no V0
        ("0.10.2", "7.5", None, None, False),
        ("0.11.0", "7.5", None, V1_OFF, False),
    ],
)
def test_runs_v0_by_release(version: str, cc: str | None, quant: str | None, env: dict | None, v0: bool) -> None:
    assert vllm.runs_v0(release(version), cc, quant, env) is v0


def test_runs_v0_unknown_release_is_v1() -> None:
    assert vllm.runs_v0(None, "7.5", "gguf", V1_OFF) is False


def test_v0_batch_by_release() -> None:
    """SchedulerConfig's chunked-prefill tokens: 512 before 0.6.5, 2048 from it; without chunked
    prefill max(max_model_len, 2048); 256 sequences."""
    assert vllm.v0_batch(40000, release("0.6.4.post1")) == (512, 256)
    assert vllm.v0_batch(40000, release("0.6.1")) == (512, 256)
    assert vllm.v0_batch(40000, release("0.6.5")) == (2048, 256)
    assert vllm.v0_batch(40000, release("0.7.3")) == (2048, 256)
    assert vllm.v0_batch(40000, release("0.10.1.1")) == (2048, 256)
    assert vllm.v0_batch(32768, release("0.7.2")) == (32768, 256)  # not above 32K: unchunked
    assert vllm.v0_batch(1024, release("0.7.2")) == (2048, 256)


def test_v0_batch_mla_and_multimodal() -> None:
    """MLA: 0.7.1 - 0.7.3 turn chunked prefill off after the scheduler sized its tokens (2048
    stay); from 0.8.0 ``_set_default_args_v0`` turns it off first (max_model_len tokens).
    Multimodal models are never chunked by default in V0: at least 4096 tokens before 0.6.3, 5120
    from it."""
    assert vllm.v0_batch(128000, release("0.7.3"), mla=True) == (2048, 256)
    assert vllm.v0_batch(128000, release("0.8.0"), mla=True) == (128000, 256)
    assert vllm.v0_batch(8192, release("0.8.5"), mla=True) == (8192, 256)
    assert vllm.v0_batch(40000, release("0.8.5")) == (2048, 256)
    assert vllm.v0_batch(4096, release("0.7.3"), multimodal=True) == (5120, 256)
    assert vllm.v0_batch(4096, release("0.6.2"), multimodal=True) == (4096, 256)
    assert vllm.v0_batch(40000, release("0.7.3"), multimodal=True) == (40000, 256)


def test_batch_defaults_follow_the_engine_that_runs() -> None:
    """0.7.3 runs V0 by default (its batch rule depends on max_model_len); with VLLM_USE_V1=1 the
    caller passes ``v0=False`` and the GPU tiers apply."""
    h100 = int(79.19 * GiB)
    assert vllm.batch_defaults(release("0.7.3"), h100, "NVIDIA H100 80GB HBM3", "9.0", 40000) == (2048, 256)
    assert vllm.batch_defaults(release("0.7.3"), h100, "NVIDIA H100 80GB HBM3", "9.0", 20000) == (20000, 256)
    v0 = vllm.runs_v0(release("0.7.3"), "9.0", None, V1_ON)
    assert vllm.batch_defaults(release("0.7.3"), h100, "NVIDIA H100 80GB HBM3", "9.0", 20000, v0=v0) == (8192, 1024)
    fallback = vllm.runs_v0(release("0.8.5"), "7.5")
    t4 = int(14.56 * GiB)
    assert vllm.batch_defaults(release("0.8.5"), t4, "Tesla T4", "7.5", 131072, v0=fallback, mla=True) == (131072, 256)


def test_profiler_rules_by_release() -> None:
    """0.6.5 - 0.6.6 count allocated (not reserved) torch bytes: the allocator's cache is
    non-torch; 0.6.4.x counts the CUDA context; every V0 release snapshots before the distributed
    init (two TP communicators inside) and forces NCCL_CUMEM_ENABLE=0."""
    for v in ("0.6.5", "0.6.6", "0.6.6.post1"):
        assert vllm.non_torch_counts_allocator_cache(release(v))
    for v in ("0.6.4.post1", "0.7.0", "0.7.3", "0.8.0"):
        assert not vllm.non_torch_counts_allocator_cache(release(v))
    assert not vllm.non_torch_counts_allocator_cache(None)
    for v in ("0.6.5", "0.7.3", "0.8.4", "0.9.2", "0.10.1.1"):
        assert vllm.comm_in_budget(release(v)) and vllm.nccl_cumem_forced_off(release(v))
    assert vllm.TP_COMMUNICATORS_IN_BUDGET == 2


def test_allocator_cache_term_only_for_0_6_5_and_0_6_6() -> None:
    common = {
        "total": 80 * GiB,
        "utilization_set": True,
        "cudagraphs_counted": False,
        "tp": 1,
        "comm": None,
        "lazy_connect": False,
        "activations": GiB,
    }
    assert bound_terms(engine_version="0.6.5", **common)["allocator_cache"].below == GiB
    assert "allocator_cache" not in bound_terms(engine_version="0.7.0", **common)
    assert "allocator_cache" not in bound_terms(engine_version="0.6.4.post1", **common)
    assert "allocator_cache" not in bound_terms(engine_version="0.26.0", **common)


def test_allocator_cache_counted_twice_from_0_27_0() -> None:
    """From 0.27.0 the non-KV memory is the free-memory drop plus the peak over what stays
    allocated (mem_utils.py ``memory_profiling``): the blocks torch keeps reserved count in both,
    so the budget's low end drops by up to the profile's peak; an unknown release may be one."""
    for v in ("0.27.0", "0.27.1", "0.30.0", "0.33.0", "0.40.0"):
        assert vllm.consumed_counts_allocator_cache(release(v)), v
    for v in ("0.6.5", "0.11.0", "0.20.0", "0.26.0"):
        assert not vllm.consumed_counts_allocator_cache(release(v)), v
    assert vllm.consumed_counts_allocator_cache(None)
    common = {
        "total": 80 * GiB,
        "utilization_set": True,
        "cudagraphs_counted": False,
        "tp": 1,
        "comm": None,
        "lazy_connect": False,
    }
    for v in ("0.27.0", "0.33.0", None):
        term = bound_terms(engine_version=v, activations=3 * GiB, **common)["allocator_cache"]
        assert (term.below, term.above) == (3 * GiB, 0), v
        assert "total_consumed" in term.source
    # nothing profiled, nothing cached: no term
    assert "allocator_cache" not in bound_terms(engine_version="0.27.1", activations=0, **common)


def test_fused_moe_workspaces_by_release() -> None:
    """Before 0.8.0 fused_moe allocates cache1 (top_k x 2 x inter) and cache3 (top_k x hidden)
    apart; from 0.8.0 they share max(2 x inter, hidden)."""
    assert not vllm.fused_moe_cache13_shared(release("0.7.3"))
    assert vllm.fused_moe_cache13_shared(release("0.8.0"))
    assert vllm.fused_moe_cache13_shared(None)
    _points, configs = load()
    cfg = parse(_config(configs["deepseek-v3"]), None)
    lay = Layout(8, 1)
    separate = forward_peak(cfg, lay, 32000, release=release("0.7.3"))
    shared = forward_peak(cfg, lay, 32000, release=release("0.8.0"))
    # DeepSeek-V3 at TP 8: inter 256 a rank, hidden 7168, top_k 8, 2 bytes: 2 x 8 x 512 per token
    assert separate - shared == 32000 * 2 * 8 * 512
    assert Batch(release=release("0.7.3")).release == release("0.7.3")


def test_v0_public_logs() -> None:
    """Points 113-120 (tests/fixtures/memory/SEARCHES.md, issue 23 v0rules): the V0 sampler and
    batch rules put 114, 116, 117, 119, 120 and the held-out 118 within 0.3 GiB; 115 (held out) within 3%;
    113 (DeepSeek-R1, TP 8, H200) is RESIDUALS[113]: of its non-torch 7.16 GiB the communicators and
    the logits gather's P2P receives (nccl.gather_bytes, 2.19 GiB) are derived, about 1.4 GiB is not."""
    rows = {r.index: r for r in evaluate()}
    for i, limit in ((114, 0.3), (116, 0.1), (117, 0.25), (118, 0.1), (119, 0.25), (120, 0.25)):
        assert rows[i].error_gib is not None and abs(rows[i].error_gib) < limit, (i, rows[i].error_gib)
    assert rows[115].held_out and rows[118].held_out
    assert rows[115].within
    # (+4.93 before the BLAS workspaces and V0's 0.125 GiB non-torch point: budget.non_torch_point)
    assert rows[113].error_gib is not None and 4 < rows[113].error_gib < 5.1
    # the activation peaks V0's dummy sampler makes: 256 x vocabulary x 38 bytes (+ the hidden states)
    assert rows[114].terms is not None and abs(rows[114].terms["activations"][0] - 1.83) < 0.05
    assert rows[118].terms is not None and abs(rows[118].terms["activations"][0] - 0.94) < 0.05


def test_torch_pins_by_release() -> None:
    """The wheels' ``Requires-Dist: torch==``: 2.4.0 in 0.6.3.post1, 2.5.1 in 0.6.4 - 0.7.3, 2.6.0
    in 0.8.x, 2.7.0 in 0.9.x; the NCCL torch 2.5.1 resolves to (2.21.5) sizes NVLS the old way."""
    assert vllm.torch_pin(release("0.6.3.post1")) is None
    assert vllm.torch_pin(release("0.6.4")) == vllm.torch_pin(release("0.7.3")) == "2.5.1"
    assert vllm.torch_pin(release("0.8.5")) == "2.6.0"
    assert vllm.torch_pin(release("0.9.2")) == "2.7.0"
    assert vllm.torch_pin(release("0.10.0")) == "2.7.1"
    assert vllm.torch_pin(None) is None


def test_batch_for_takes_v0s_mla_and_multimodal_rules() -> None:
    """The memory model re-sizes a V0 launch's profile once the config says MLA (``build``): a
    0.8.5 V0 fallback (T4) of an MLA model at 65,536 tokens profiles all of them; 0.7.3 keeps the
    2048 chunked-prefill tokens; a V1 release ignores the flags."""
    from flightcheck._memory import batch_for
    from flightcheck._vocabulary.intent import Intent

    it = Intent(max_model_len=65536)
    t4 = int(14.74 * GiB)
    assert batch_for(it, t4, "Tesla T4", "0.8.5", "7.5", mla=True).tokens == 65536
    assert batch_for(it, t4, "Tesla T4", "0.8.5", "7.5").tokens == 2048
    assert batch_for(it, t4, "Tesla T4", "0.7.3", "7.5", mla=True).tokens == 2048
    h100 = int(79.19 * GiB)
    assert batch_for(it, h100, "NVIDIA H100 80GB HBM3", "0.11.0", "9.0", mla=True).tokens == 8192
    assert (
        batch_for(Intent(max_model_len=4096), h100, "NVIDIA H100 80GB HBM3", "0.7.3", "9.0", multimodal=True).tokens
        == 5120
    )


def test_the_offline_llm_class_batches_more_tokens() -> None:
    """vllm/engine/arg_utils.py get_batch_defaults (0.8.0 - 0.33.0 read): UsageContext.LLM_CLASS takes
    16384 / 8192 tokens where the OpenAI server takes 8192 / 2048; max_num_seqs is the same; the V0
    rule before 0.8.0 does not depend on it; 0.33's >= 160 GiB tier is 16384 for both."""
    big, small = 96 * GiB, 24 * GiB
    for v in ("0.8.0", "0.23.0", "0.33.0"):
        assert vllm.batch_defaults(release(v), big, "NVIDIA H100", "9.0", 8192) == (8192, 1024)
        assert vllm.batch_defaults(release(v), big, "NVIDIA H100", "9.0", 8192, llm_class=True) == (16384, 1024)
        assert vllm.batch_defaults(release(v), small, "NVIDIA L4", "8.9", 8192, llm_class=True) == (8192, 256)
    assert vllm.batch_defaults(release("0.33.0"), 180 * GiB, "NVIDIA B200", "10.0", 8192, llm_class=True) == (
        16384,
        1024,
    )
    v0 = vllm.batch_defaults(release("0.7.3"), big, "NVIDIA H100", "9.0", 8192)
    assert vllm.batch_defaults(release("0.7.3"), big, "NVIDIA H100", "9.0", 8192, llm_class=True) == v0


def test_the_160_gib_tier_starts_in_0_28() -> None:
    """get_batch_defaults grows its >= 160 GiB branch (16384 / 1024 for the server too) in 0.28.0
    (absent in 0.19.0 - 0.27.0); the GB10 clause, which keeps a 121 GiB DGX Spark on the small
    tier, comes in 0.33.0. A B200 on 0.28 - 0.32 batches 16384 tokens, not 8192."""
    b200 = 179 * GiB
    assert vllm.batch_defaults(release("0.27.0"), b200, "NVIDIA B200", "10.0", 8192) == (8192, 1024)
    for v in ("0.28.0", "0.31.0", "0.33.0"):
        assert vllm.batch_defaults(release(v), b200, "NVIDIA B200", "10.0", 8192) == (16384, 1024)
    spark = int(121.69 * GiB)
    assert vllm.batch_defaults(release("0.32.0"), spark, "NVIDIA GB10", "12.1", 8192) == (8192, 1024)
    assert vllm.batch_defaults(release("0.33.0"), spark, "NVIDIA GB10", "12.1", 8192) == (2048, 256)


def test_the_logged_peak_holds_the_graph_estimate_from_0_27() -> None:
    """v1/worker/gpu_worker.py: peak_activation_memory is torch_peak_increase in 0.20.0 - 0.26.0
    and transient_peak_headroom + the applied CUDA-graph estimate from 0.27.0 (wheels read)."""
    assert not vllm.logged_peak_holds_cudagraph_estimate(release("0.26.0"))
    assert vllm.logged_peak_holds_cudagraph_estimate(release("0.27.0"))
    assert vllm.logged_peak_holds_cudagraph_estimate(release("0.33.0"))
    assert not vllm.logged_peak_holds_cudagraph_estimate(None)
