"""What the reader provides reaches the memory model (issue 10, item 3): prefill context
parallel (``-pcp``), decode context parallel (``-dcp``), ``--data-parallel-size-local`` and
``--kv-cache-memory-bytes``, as vLLM 0.33 uses them.

* DCP shards the cached tokens of every attention layer over the DCP group:
  ``FullAttentionSpec.max_memory_usage_bytes`` counts ``cdiv(max_model_len, dcp)`` tokens
  (vllm/v1/kv_cache_interface.py); a block spans ``block_size x dcp`` tokens
  (vllm/v1/core/single_type_kv_cache_manager.py). The weights are the TP group's.
* PCP adds ranks (world size TP x PP x PCP, vllm/config/parallel.py); dense weights are
  the TP shard on each, the experts are spread over DP x PCP x TP
  (``flatten_tp_across_dp_and_pcp``, vllm/model_executor/layers/fused_moe/config.py); the
  KV is not divided by PCP (only DCP shards it).
"""

from __future__ import annotations

import pytest

from flightcheck._checkpoint import load
from flightcheck._memory import build
from flightcheck._memory.config import parse
from flightcheck._memory.kv import capacity, kv_shape
from flightcheck._vocabulary.intent import Intent
from support.ckptgen import load_config, write_checkpoint

B300 = 288403439616


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory):
    path = write_checkpoint(tmp_path_factory.mktemp("m") / "llama", load_config("llama-3-8b"), shards=2)
    return load(str(path), cache_env={"FLIGHTCHECK_NO_CACHE": "1"})


@pytest.fixture(scope="module")
def mixtral(tmp_path_factory: pytest.TempPathFactory):
    path = write_checkpoint(tmp_path_factory.mktemp("m") / "mixtral", load_config("mixtral-8x7b"), shards=4)
    return load(str(path), cache_env={"FLIGHTCHECK_NO_CACHE": "1"})


def mem(ck, **intent):
    return build(ck, Intent(model=str(ck.path), **intent), total=B300, engine_version="0.33.0")


def test_dcp_divides_the_kv_of_one_sequence_not_the_weights(llama) -> None:
    plain = mem(llama, tensor_parallel_size=4, max_model_len=131072)
    dcp = mem(llama, tensor_parallel_size=4, decode_context_parallel_size=4, max_model_len=131072)
    assert dcp.weights() == pytest.approx(plain.weights())
    f_plain, f_dcp = plain.fit(), dcp.fit()
    assert f_plain is not None and f_dcp is not None
    assert f_dcp.kv_need == pytest.approx(f_plain.kv_need / 4)
    # the longest sequence that fits grows by the DCP size (to the rounding of 16 tokens)
    assert f_dcp.max_model_len_fit >= 4 * f_plain.max_model_len_fit - 64
    assert dcp.to_dict()["layout"]["dcp"] == 4


def test_dcp_blocks_span_dcp_times_the_block_size() -> None:
    cfg = parse(load_config("llama-3-8b"), None)
    one, four = kv_shape(cfg, range(32), 8, "auto"), kv_shape(cfg, range(32), 8, "auto", dcp=4)
    budget = 40 * (1 << 30)
    c1, c4 = capacity(one, budget, 131072), capacity(four, budget, 131072)
    assert c1.num_blocks == c4.num_blocks  # the same pool of blocks on each rank
    assert c4.concurrency == pytest.approx(4 * c1.concurrency, rel=0.01)


def test_pcp_keeps_the_dense_tp_shard_and_spreads_experts(mixtral) -> None:
    tp2 = mem(mixtral, tensor_parallel_size=2).stages()[0]
    pcp2 = mem(mixtral, tensor_parallel_size=2, prefill_context_parallel_size=2).stages()[0]
    assert pcp2["tp"] == pytest.approx(tp2["tp"])  # attention / dense: each PCP rank has the TP shard
    assert pcp2["expert"] == pytest.approx(tp2["expert"] / 2)  # MoE flattened over PCP x TP


def test_pcp_does_not_shard_the_kv(llama) -> None:
    plain = mem(llama, tensor_parallel_size=2, max_model_len=65536).fit()
    pcp = mem(llama, tensor_parallel_size=2, prefill_context_parallel_size=2, max_model_len=65536).fit()
    assert plain is not None and pcp is not None and pcp.kv_need == pytest.approx(plain.kv_need)


def test_the_gpus_of_this_node_follow_pcp_and_the_local_dp_size() -> None:
    it = Intent(
        tensor_parallel_size=2, prefill_context_parallel_size=2, data_parallel_size=4, data_parallel_size_local=2
    )
    assert (it.world_size, it.gpus_per_node) == (16, 8)


def test_kv_cache_memory_bytes_is_the_kv_budget_whatever_the_utilization(llama) -> None:
    a = mem(llama, kv_cache_memory_bytes=8 << 30, gpu_memory_utilization=0.5, max_model_len=8192).fit()
    b = mem(llama, kv_cache_memory_bytes=8 << 30, gpu_memory_utilization=0.9, max_model_len=8192).fit()
    assert a is not None and b is not None
    assert a.kv_budget == b.kv_budget == 8 << 30


def test_a_layout_with_context_parallel_is_written_with_its_flags() -> None:
    from flightcheck._memory.weights import Layout

    assert Layout(4, 1, 1, False, pcp=2, dcp=4).describe("vllm") == "-tp 4 -pcp 2 -dcp 4"
    assert Layout(4).describe("vllm") == "-tp 4"
