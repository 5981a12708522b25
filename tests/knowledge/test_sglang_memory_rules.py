"""The SGLang 0.5.23 memory rules of ``_knowledge.sglang`` on their own (the conformance
suite checks the same functions against SGLang's code): the terms a launch's flags add to
mem_fraction_static, the pool helpers, the unbalanced-memory switch."""

from __future__ import annotations

from flightcheck._knowledge import sglang


def test_fraction_options_read_the_launch_terms() -> None:
    flags = [
        "--model-path=meta-llama/Llama-2-7b-hf",
        "--tensor-parallel-size=8",
        "--data-parallel-size=2",
        "--enable-dp-attention",
        "--chunked-prefill-size=4096",
        "--moe-a2a-backend=deepep",
        "--disable-cuda-graph",
    ]
    opts = sglang.fraction_options(flags, "meta-llama/Llama-2-7b-hf", 64)
    assert opts == {
        "chunked_prefill": 4096,
        "attn_dp": 2,
        "deepep": True,
        "decode_graphs": False,
        "prefill_graphs": False,
        "max_running": 64,
        "llama2": True,
    }
    assert sglang.fraction_options(["--attn-dp-size=4", "--cuda-graph-backend-decode=disabled"]) == {
        "attn_dp": 4,
        "decode_graphs": False,
    }
    # prefill graphs: an unvalidated a2a backend or TBO turns them off; an explicit backend keeps them
    assert sglang.fraction_options(["--moe-a2a-backend=mooncake"]) == {"prefill_graphs": False}
    assert sglang.fraction_options(["--enable-two-batch-overlap"]) == {"prefill_graphs": False}
    assert sglang.fraction_options(["--cuda-graph-backend-prefill=breakable", "--enable-two-batch-overlap"]) == {
        "prefill_locked": True
    }
    assert sglang.fraction_options([]) == {}


def test_fraction_terms_move_the_fraction_the_way_sglang_does() -> None:
    h100 = 80 * 1024
    base = sglang.mem_fraction_static(h100, 1, 1)
    # 8 GiB x 1.5 activations + graphs: the 10 GiB floor does not bind at 80 GiB; DeepEP adds
    # 1 GiB to the prefill graphs' reserve and 2 GiB after the floor
    reserved = 512 + 8192 * 1.5 + 1 / 8 * 1024 + 256 * 2 + len(sglang.prefill_graph_sizes(8192)) * 8
    assert base == round((h100 - reserved) / h100, 3)
    assert sglang.mem_fraction_static(h100, 1, 1, deepep=True) == round((h100 - reserved - 3072) / h100, 3)
    assert sglang.mem_fraction_static(h100, 1, 1, decode_graphs=False, prefill_graphs=False) > base
    assert sglang.mem_fraction_static(h100, 2, 1, attn_dp=2) < sglang.mem_fraction_static(h100, 2, 1)
    # PP > 1 keeps the prefill graphs off unless --cuda-graph-backend-prefill chose them
    assert sglang.mem_fraction_static(h100, 1, 2) > sglang.mem_fraction_static(h100, 1, 2, prefill_locked=True)
    assert sglang.vlm_factor() == 0.95
    assert sglang.vlm_factor(24, 3584) == 0.95 * 0.8


def test_pool_helpers() -> None:
    assert sglang.max_request_len(8192, 4096) == 4095
    assert sglang.max_request_len(8192, 100_000) == 8191
    # 1M tokens of context at the default 2048 requests: ~8 GiB of request table
    running = sglang.max_running_requests(2_000_000, 1_000_000)
    assert running == 2048
    assert sglang.req_to_token_bytes(running, 1_000_000) == 2049 * 1_000_000 * 4
    assert sglang.max_running_requests(1000, 8192) == 500  # capped at tokens // 2
    assert sglang.max_running_requests(100_000, 8192, given=64, attn_dp=2) == 32


def test_unbalanced_switch_reads_like_sglang_envbool() -> None:
    assert sglang.unbalanced_raises({})
    assert sglang.unbalanced_raises({sglang.UNBALANCED_CHECK_ENV: "1"})
    for off in ("false", "0", "No", "n"):
        assert not sglang.unbalanced_raises({sglang.UNBALANCED_CHECK_ENV: off})
