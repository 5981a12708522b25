"""FC402 as SGLang 0.5.23 decides it: a KV pool shorter than the context length is a
warning naming the length SGLang will serve (managers/tp_worker.py ``get_worker_info``);
only a pool of nothing is an error (kv_cache_configurator.py ``_profile_available_bytes``,
pool_configurator.py ``MemoryPoolConfig``). vLLM's verdict is unchanged."""

from __future__ import annotations

import copy

import pytest

from flightcheck._knowledge import sglang
from support.ckptgen import load_config, write_checkpoint
from support.evaluation import facts, host_doc, results

H100_BYTES = 85520809984
CONTEXT = 350 << 20  # the CUDA context a single rank allocates before SGLang measures


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(write_checkpoint(tmp_path_factory.mktemp("sgl") / "llama", load_config("llama-3-8b"), shards=4))


@pytest.fixture(autouse=True)
def own_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "sgl-xdg"))


def h100(used: int = 0):
    doc = host_doc("b300")
    gpus = copy.deepcopy(doc["gpus"])
    for g in gpus:
        g.update(name="NVIDIA H100 80GB HBM3", memory_total_bytes=H100_BYTES, compute_capability="9.0")
        g.update(memory_used_bytes=used, memory_reserved_bytes=0)
    return facts("b300", gpus=gpus)


def fc402(node, **intent):
    (r,) = results(node, **intent)["FC402"]
    return r


def test_fc402_sglang_short_pool_is_a_warning_naming_the_served_length(ckpt: str) -> None:
    r = fc402(h100(), engine="sglang", model=ckpt, gpu_memory_utilization=0.2)
    assert r.status.value == "fail" and r.severity.value == "warning"
    tokens = r.evidence["kv_tokens"]
    assert 0 < tokens < 8192
    # llama-3-8b: max_position_embeddings 8192, no rope scaling: SGLang's derived length
    assert r.evidence["context_length"] == sglang.context_length(load_config("llama-3-8b")) == 8192
    assert r.evidence["max_request_len"] == tokens - 1
    assert f"caps a request at {tokens - 1:,} tokens" in r.message
    assert r.fix.splitlines()[0] == f"--context-length {tokens}"


def test_fc402_does_not_stop_sglang_with_a_pool_shorter_than_the_context(ckpt: str) -> None:
    res = results(h100(), engine="sglang", model=ckpt, gpu_memory_utilization=0.2)
    assert [r for r in res["FC402"] if r.severity.value == "error" and r.status.value in ("fail", "unknown")] == []


def test_fc402_vllm_short_kv_is_still_an_error(ckpt: str) -> None:
    # short beyond the bound's high end (bound.bound_terms: non-torch, activations, graphs); at
    # 0.21 the V2 runner's penalties state (vllm.memory_runner, 0.5 GiB) leaves no room for the
    # reserve itself (FC401)
    r = fc402(h100(), model=ckpt, gpu_memory_utilization=0.22)
    assert r.status.value == "fail" and r.severity.value == "error"


def test_fc402_sglang_no_pool_is_an_error(ckpt: str) -> None:
    """Weights fit in the fraction with less than one token of KV left: SGLang raises."""
    res = results(h100(), engine="sglang", model=ckpt, gpu_memory_utilization=0.2)
    weights = res["FC401"][0].evidence["weights_bytes"]
    frac = (weights + 1024) / (H100_BYTES - CONTEXT)
    r = fc402(h100(), engine="sglang", model=ckpt, gpu_memory_utilization=frac)
    assert r.status.value == "fail" and r.severity.value == "error"
    assert "SGLang refuses to start" in r.message and r.evidence["kv_tokens"] == 0


def test_sglang_pool_is_the_fraction_of_free_memory(ckpt: str) -> None:
    """8 GiB held by another process: SGLang's pool is f x (free before loading) - weights,
    so it loses f x 8 GiB (kv_cache_configurator.py ``_profile_available_bytes``)."""
    frac = 0.3
    free = results(h100(), engine="sglang", model=ckpt, gpu_memory_utilization=frac)["FC402"][0].evidence
    busy = results(h100(8 << 30), engine="sglang", model=ckpt, gpu_memory_utilization=frac)["FC402"][0].evidence
    lost = free["kv_budget_bytes"] - busy["kv_budget_bytes"]
    assert abs(lost - frac * (8 << 30)) < 2
    assert free["free_before_load_bytes"] - busy["free_before_load_bytes"] == 8 << 30


def test_sglang_request_table_sits_outside_the_fraction(ckpt: str) -> None:
    ev = fc402(h100(), engine="sglang", model=ckpt, gpu_memory_utilization=0.5).evidence
    running = sglang.max_running_requests(ev["kv_tokens"], 8192)
    assert ev["max_running_requests"] == running
    assert ev["req_to_token_bytes"] == (running + 1) * 8192 * 4


def test_sglang_attention_dp_splits_kv_heads_by_attention_tp(ckpt: str) -> None:
    """TP 4 with attention DP 4: each attention-TP group is one rank holding all 8 KV heads,
    4x the per-token KV of plain TP 4 (2 heads a rank)."""
    plain = fc402(h100(), engine="sglang", model=ckpt, tensor_parallel_size=4).evidence
    dp = fc402(h100(), engine="sglang", model=ckpt, tensor_parallel_size=4, engine_flags=["--attn-dp-size=4"]).evidence
    assert dp["kv_bytes_per_token"] == 4 * plain["kv_bytes_per_token"]


def test_sglang_default_context_length_rule() -> None:
    base = {"max_position_embeddings": 32768}
    assert sglang.context_length({**base, "seq_length": 8192}) == 8192
    assert sglang.context_length({**base, "rope_scaling": {"type": "linear", "factor": 4}}) == 131072
    assert sglang.context_length({**base, "rope_scaling": {"type": "yarn", "factor": 4}}) == 32768
    assert sglang.context_length({**base, "rope_scaling": {"rope_type": "llama3", "factor": 8}}) == 32768
    orig = {"rope_type": "dynamic", "factor": 2, "original_max_position_embeddings": 4096}
    assert sglang.context_length({**base, "rope_scaling": orig}) == 32768
    assert sglang.context_length({}) == 2048


def test_fc206_sglang_error_when_memory_in_use_empties_the_pool(ckpt: str) -> None:
    """At --mem-fraction-static 0.2 the 15 GiB of weights fit a free H100 with 0.8 GiB of
    pool; 8 GiB held by another process leaves 0.2 x ~71 GiB < 15 GiB: SGLang raises."""
    busy = results(h100(8 << 30), engine="sglang", model=ckpt, gpu_memory_utilization=0.2)["FC206"]
    errors = [r for r in busy if r.status.value == "fail" and r.severity.value == "error"]
    assert errors and "Loaded weights leave no GPU memory" in errors[0].message
    assert "--query-compute-apps" in errors[0].fix
    free = results(h100(), engine="sglang", model=ckpt, gpu_memory_utilization=0.2)["FC206"]
    assert {r.status.value for r in free} == {"pass"}


def test_fc402_sglang_request_table_larger_than_the_slack_is_a_warning(ckpt: str) -> None:
    """1M tokens of context at the default 2048 requests: a ~7.6 GiB int32 table, more than
    the ~6.3 GiB outside mem_fraction_static 0.92 on an H100 at TP 4, where the KV pool holds
    the 1M tokens (memory_pool.py ReqToTokenPool)."""
    doc = host_doc("b300")
    node = h100()
    node.env = {**doc["env"], sglang.ALLOW_LONG_MAX_MODEL_LEN: "1"}
    r = fc402(
        node, engine="sglang", model=ckpt, tensor_parallel_size=4, gpu_memory_utilization=0.92, max_model_len=1_000_000
    )
    assert r.status.value == "fail" and r.severity.value == "warning"
    assert r.evidence["req_to_token_bytes"] == (r.evidence["max_running_requests"] + 1) * 1_000_000 * 4
    assert "request-to-token table" in r.message and r.fix.startswith("--max-running-requests ")
    running = int(r.fix.split()[1])
    slack = 0.08 * r.evidence["free_before_load_bytes"]
    assert (running + 1) * 1_000_000 * 4 <= slack < (running + 2) * 1_000_000 * 4


def test_fc402_sglang_pool_is_whole_pages_of_the_backend_on_the_gpu(ckpt: str) -> None:
    # B300 (SM 10.3): SGLang picks trtllm_mha for Llama, which forces page size 64, and
    # pool_configurator.py rounds the pool down to whole pages; H100: fa3, page 1
    b300 = fc402(facts("b300"), engine="sglang", model=ckpt, gpu_memory_utilization=0.2)
    assert b300.evidence["page_size"] == 64
    assert b300.evidence["kv_tokens"] % 64 == 0 and b300.evidence["kv_tokens"] > 0
    assert b300.evidence["kv_tokens"] <= b300.evidence["max_model_len_fit"]
    assert b300.evidence["max_model_len_fit"] - b300.evidence["kv_tokens"] < 64
    hopper = fc402(h100(), engine="sglang", model=ckpt, gpu_memory_utilization=0.2)
    assert hopper.evidence["page_size"] == 1
    assert hopper.evidence["kv_tokens"] == hopper.evidence["max_model_len_fit"]


def test_fc402_sglang_pool_short_of_the_context_by_page_rounding(ckpt: str) -> None:
    """B300 (page 64): at this fraction the unrounded KV room holds 8,112 tokens but SGLang's
    pool of whole pages holds 8,064 (pool_configurator.py ``calculate_pool_sizes``), fewer
    than --context-length 8100: SGLang caps requests, so a warning naming what it serves,
    and no fix line that restates the launch's own layout."""
    r = fc402(facts("b300"), engine="sglang", model=ckpt, gpu_memory_utilization=0.05957, max_model_len=8100)
    assert r.evidence["max_model_len_fit"] >= 8100 > r.evidence["kv_tokens"] == 8064
    assert r.status.value == "fail" and r.severity.value == "warning"
    assert "caps a request at 8,063 tokens" in r.message and "the largest max_model_len that fits is 8,064" in r.message
    fixes = r.fix.splitlines()
    assert fixes[0] == "--context-length 8064" and "--tp 1" not in fixes
