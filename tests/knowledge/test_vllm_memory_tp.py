"""FlashInfer's all-reduce fusion workspace inside vLLM's KV budget at TP >= 2
(``flightcheck._knowledge.vllm.memory_tp``), by release.

Sources: vllm/config/vllm.py ``enable_allreduce_rms_fusion`` and
compilation/passes/fusion/allreduce_rms_fusion.py ``AllReduceFusionPass.__init__`` (0.19.0,
0.33.0 wheels), config/compilation.py ``enable_fi_allreduce_fusion = False`` (0.11.0),
flashinfer/comm/trtllm_ar.py ``trtllm_create_ipc_workspace_for_all_reduce_fusion`` and
flashinfer/comm/mnnvl.py ``SymmDeviceMemory`` (FlashInfer 0.6.6, pinned by vLLM 0.19.0; 0.7.2.post1,
pinned by 0.33.0).
"""

from __future__ import annotations

from flightcheck._knowledge import vllm
from flightcheck._knowledge.vllm.memory_tp import ALLOC_GRANULARITY, MC_GRANULARITY_INFERRED
from flightcheck._vocabulary.version import release

MiB = 1 << 20
LLAMA_8B = {"hidden": 4096, "dtype_bytes": 2, "batched_tokens": 8192}


def _ws(version: str | None, tp: int = 2, cc: str = "9.0", multicast: bool | None = True, **kw):
    args = {**LLAMA_8B, "eager": False, "compute_capability": cc, "multicast": multicast, **kw}
    return vllm.fusion_workspace(release(version), tp=tp, **args)


def test_0_19_rounds_each_buffer_to_the_multicast_granularity() -> None:
    """FlashInfer 0.6.6: three buffers, each rounded up to CU_MULTICAST_GRANULARITY_RECOMMENDED."""
    low, point, high = _ws("0.19.0", tp=2)
    assert point == high == 3 * MC_GRANULARITY_INFERRED
    # TP 2 on SM90: 64 MiB / (4096 x 2) = 8192 tokens; data 2 x 8192 x 4096 x 2 = 128 MiB, Lamport 3 x that,
    # each with SymmDeviceMemory's 2 KiB signal pad before the 2 MiB rounding
    assert low == 130 * MiB + ALLOC_GRANULARITY + 386 * MiB
    # TP 4 (2 MiB): the same three granules, whatever the model
    assert _ws("0.19.0", tp=4)[1] == 3 * MC_GRANULARITY_INFERRED


def test_0_19_needs_multicast_and_spans_it_when_unknown() -> None:
    assert _ws("0.19.0", multicast=False) == (0, 0, 0)
    low, point, high = _ws("0.19.0", multicast=None)
    assert low == 0 and point == high == 3 * MC_GRANULARITY_INFERRED


def test_0_33_trtllm_fallback_rounds_to_the_allocation_granularity_only() -> None:
    """FlashInfer 0.7.2.post1: the trtllm workspace's multicast rounding only under
    ``enable_multicast`` (False); without multicast vLLM 0.33.0 falls back to it from mnnvl."""
    low, point, high = _ws("0.33.0", multicast=False)
    assert low == point == high == 130 * MiB + ALLOC_GRANULARITY + 386 * MiB


def test_0_33_mnnvl_is_one_multicast_buffer() -> None:
    """vLLM 0.33.0 picks mnnvl on one node (``_resolve_fi_ar_backend``): one McastGPUBuffer of
    3 x the two-shot size (2 x 8192 x 4096 x 2 = 128 MiB), rounded to the multicast granularity."""
    low, point, high = _ws("0.33.0", multicast=True)
    assert point == high == MC_GRANULARITY_INFERRED and low == 384 * MiB + ALLOC_GRANULARITY


def test_no_workspace_where_the_pass_does_not_run() -> None:
    assert _ws("0.11.0") == (0, 0, 0)  # enable_fi_allreduce_fusion = False
    assert _ws("0.19.0", tp=1) == (0, 0, 0)
    assert _ws("0.19.0", cc="8.0") == (0, 0, 0)  # Hopper / Blackwell only
    assert _ws("0.19.0", pp=2) == (0, 0, 0) and _ws("0.19.0", dp=2) == (0, 0, 0)
    assert _ws("0.33.0", pp=2)[1] > 0  # 0.33.0's enable_allreduce_rms_fusion has no DP / PP condition
    assert _ws("0.19.0", cc="12.0") == (0, 0, 0)  # no FI_ALLREDUCE_FUSION_MAX_SIZE_MB entry
    assert _ws("0.19.0", eager=True) == (0, 0, 0)  # no compilation pass


def test_an_unknown_release_spans_every_rule() -> None:
    low, point, high = _ws(None)
    assert low == point == 0 and high == 3 * MC_GRANULARITY_INFERRED
    # 0.21.0 (read): 0.22.0's conditions with 0.20's FlashInfer 0.6.8.post1, whose SymmDeviceMemory
    # needs multicast — none without it, 0.20's workspace with it, and no PP / DP condition
    assert _ws("0.21.0", multicast=False) == (0, 0, 0)
    assert _ws("0.21.0", multicast=True) == _ws("0.20.0", multicast=True) != (0, 0, 0)
    assert _ws("0.21.0", pp=2, multicast=True)[1] > 0 and _ws("0.20.0", pp=2, multicast=True) == (0, 0, 0)
    assert vllm.fusion_rule(release("0.21.0")) is True and vllm.fusion_rule(release("0.33.0")) is True
    assert vllm.fusion_rule(release("0.15.0")) is False  # read: every optimization level off
