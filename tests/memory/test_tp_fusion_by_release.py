"""FlashInfer's all-reduce fusion workspace inside vLLM's KV budget, release by release
(``flightcheck._knowledge.vllm.memory_tp``), and the bound of a launch whose release is unknown
(``bound.bound_terms``' ``release_unknown``).

Sources (read in the wheels of every release 0.11.0 - 0.33.0, 0.21.0 included):
vllm/config/vllm.py ``enable_allreduce_rms_fusion`` and the optimization levels,
config/compilation.py ``flashinfer_max_size``, the pass module's ``FI_ALLREDUCE_FUSION_MAX_SIZE_MB``,
distributed/device_communicators/flashinfer_all_reduce.py ``_resolve_fi_ar_backend``, envs.py
``VLLM_ALLREDUCE_USE_FLASHINFER``; FlashInfer's comm/trtllm_ar.py, comm/trtllm_mnnvl_ar.py and
comm/mnnvl.py at the tags each release pins.
"""

from __future__ import annotations

import pytest

from flightcheck._knowledge import vllm
from flightcheck._knowledge.units import GiB
from flightcheck._knowledge.vllm import memory_tp as tp_rules
from flightcheck._knowledge.vllm.memory_tp import ALLOC_GRANULARITY, MC_GRANULARITY_INFERRED
from flightcheck._memory.bound import bound_terms
from flightcheck._memory.budget import CONTEXT
from flightcheck._vocabulary.version import release

MiB = 1 << 20
LLAMA_8B = {"hidden": 4096, "dtype_bytes": 2, "batched_tokens": 8192}


def _ws(version: str | None, tp: int = 2, cc: str = "9.0", multicast: bool | None = True, **kw):
    args = {**LLAMA_8B, "eager": False, "compute_capability": cc, "multicast": multicast, **kw}
    return vllm.fusion_workspace(release(version) if version else None, tp=tp, **args)


#: (release, on by default, size table, mnnvl first, standalone on, trtllm allocation) as read
BY_RELEASE = [
    ("0.11.0", False, None, False, False, None),
    ("0.11.2", False, None, False, False, None),
    ("0.12.0", False, None, False, False, None),
    ("0.14.1", False, None, False, False, None),
    ("0.15.1", False, None, False, False, None),
    ("0.16.0", False, None, False, False, None),
    ("0.17.0", True, "0.17.0", False, False, "symm-mc"),
    ("0.18.1", True, "0.17.0", False, False, "symm-mc"),
    ("0.19.0", True, "0.19.0", False, False, "symm-mc"),
    ("0.20.2", True, "0.19.0", False, False, "symm-mc"),
    ("0.22.1", True, "0.19.0", False, False, "torch-symm"),
    ("0.23.0", True, "0.19.0", False, False, "torch-symm"),
    ("0.24.0", True, "0.19.0", False, False, "torch-symm"),
    ("0.25.1", True, "0.25.0", True, False, "torch-symm"),
    ("0.26.0", True, "0.25.0", True, False, "torch-symm"),
    ("0.27.1", True, "0.27.0", True, False, "symm"),
    ("0.28.0", True, "0.27.0", True, False, "symm"),
    ("0.29.0", True, "0.29.0", True, True, "symm"),
    ("0.32.0", True, "0.29.0", True, True, "symm"),
    ("0.33.0", True, "0.29.0", True, True, "symm"),
]


@pytest.mark.parametrize(("version", "on", "table", "mnnvl", "standalone", "alloc"), BY_RELEASE)
def test_the_rule_of_each_release_read(version, on, table, mnnvl, standalone, alloc) -> None:
    r = tp_rules.fusion_release(release(version))
    assert vllm.fusion_rule(release(version)) is on
    assert r.default_on is on
    if on:
        assert (r.table, r.mnnvl_first, r.standalone, r.trtllm_alloc) == (table, mnnvl, standalone, alloc)
    else:
        assert _ws(version) == (0, 0, 0)


def test_every_release_has_a_rule() -> None:
    """Every release 0.11.0 - 0.33.0 has a rule read from its wheel (0.21.0 included)."""
    for version in ("0.12.0", "0.13.0", "0.15.0", "0.18.0", "0.20.1", "0.21.0", "0.22.0", "0.30.0", "0.31.0"):
        assert vllm.fusion_rule(release(version)) is not None
    assert tp_rules.fusion_release(release("0.21.0")).since == "0.21.0"


def test_the_size_tables_by_release() -> None:
    """FI_ALLREDUCE_FUSION_MAX_SIZE_MB: 10.3 from 0.19.0, TP 16 from 0.25.0, 10.7 from 0.27.0,
    10.3 at TP 8 4 MiB from 0.29.0; a capability without an entry runs no fusion."""
    t = tp_rules.FI_FUSION_MAX_SIZE_MB
    assert 103 not in t["0.17.0"] and t["0.19.0"][103][8] == 2
    assert 16 not in t["0.19.0"][100] and t["0.25.0"][100][16] == 64
    assert 107 not in t["0.25.0"] and t["0.27.0"][107] == {2: 64, 4: 64, 8: 2}
    assert t["0.29.0"][103][8] == 4 and t["0.33.0"] == t["0.29.0"]
    # 10.3 (B300) on 0.18.1: is_device_capability(100) is exactly 10.0, and no table entry
    assert _ws("0.18.1", cc="10.3") == (0, 0, 0) and _ws("0.19.0", cc="10.3")[1] > 0
    # 10.7 only from 0.27.0
    assert _ws("0.26.0", cc="10.7") == (0, 0, 0) and _ws("0.27.0", cc="10.7")[1] > 0


def test_dp_and_pp_conditions_by_release() -> None:
    """0.17.0 - 0.20.2 need DP 1 and PP 1; 0.22.0 on not, but 0.23.0 needs PP 1."""
    for version in ("0.17.0", "0.19.0", "0.20.2"):
        assert _ws(version, dp=2) == (0, 0, 0) and _ws(version, pp=2) == (0, 0, 0)
    assert _ws("0.22.0", dp=2)[1] > 0 and _ws("0.22.0", pp=2)[1] > 0
    assert _ws("0.23.0", pp=2) == (0, 0, 0) and _ws("0.23.0", dp=2)[1] > 0
    assert _ws("0.24.0", pp=2)[1] > 0


def test_the_trtllm_workspace_by_flashinfer_pin() -> None:
    """Three buffers (data 2 x 8192 x 4096 x 2 = 128 MiB, flags, Lamport 3 x 128 MiB): FlashInfer
    0.6.6 (0.19.0) rounds each to the multicast granularity and needs multicast; 0.6.11.post2
    (0.22.0) allocates torch symmetric memory (torch's rounding, not read: up to the multicast one);
    0.6.16.post3 / 0.7.2.post1 (the 0.27.0+ trtllm fallback) the allocation granularity only."""
    small = 130 * MiB + ALLOC_GRANULARITY + 386 * MiB
    assert _ws("0.19.0") == (small, 3 * MC_GRANULARITY_INFERRED, 3 * MC_GRANULARITY_INFERRED)
    assert _ws("0.19.0", multicast=False) == (0, 0, 0)
    assert _ws("0.22.0", multicast=False) == (small, small, 3 * MC_GRANULARITY_INFERRED)
    assert _ws("0.27.0", multicast=False) == (small, small, small)


def test_mnnvl_first_from_0_25() -> None:
    """0.25.0 on: "auto" picks mnnvl on one node — one buffer of 3 x the two-shot size (3 x 128
    MiB); 0.25.x / 0.26.0 (FlashInfer 0.6.13 / 0.6.14) through torch symmetric memory, 0.27.0 on
    through McastGPUBuffer (the multicast granularity), falling back to trtllm without multicast."""
    mn = 384 * MiB + ALLOC_GRANULARITY
    assert _ws("0.25.0") == (mn, mn, MC_GRANULARITY_INFERRED)
    assert _ws("0.25.0", multicast=False) == (mn, mn, MC_GRANULARITY_INFERRED)
    assert _ws("0.27.0") == (mn, MC_GRANULARITY_INFERRED, MC_GRANULARITY_INFERRED)
    low, point, high = _ws("0.27.0", multicast=None)
    assert low == mn and point == MC_GRANULARITY_INFERRED and high == 130 * MiB + ALLOC_GRANULARITY + 386 * MiB


def test_the_standalone_all_reduce_makes_it_without_the_pass_from_0_29() -> None:
    """VLLM_ALLREDUCE_USE_FLASHINFER defaults to 1 from 0.29.0: --enforce-eager (no pass) still
    gets the workspace at the first all-reduce, sized by the table alone (not the batch)."""
    assert _ws("0.28.0", eager=True) == (0, 0, 0)
    eager = _ws("0.29.0", eager=True, batched_tokens=16)
    assert eager[1] == MC_GRANULARITY_INFERRED  # 8192 table tokens, not 16
    assert _ws("0.29.0", batched_tokens=16)[0] < eager[0]  # the pass caps it at the batch
    # the Blackwell mnnvl tuning raises it: 10.0 at TP 8 in 0.33.0 (128 MiB), not in 0.29.0
    assert _ws("0.33.0", tp=8, cc="10.0")[0] > _ws("0.29.0", tp=8, cc="10.0")[0]


def test_an_unknown_release_spans_every_rule() -> None:
    """No release: the point keeps the releases before the fusion (0), the high end the largest
    workspace any release makes (the 0.17 - 0.20 multicast rounding of three buffers)."""
    assert _ws(None) == (0, 0, 3 * MC_GRANULARITY_INFERRED)
    # eager: only 0.29.0 on make one (the standalone all-reduce)
    assert _ws(None, eager=True) == (0, 0, MC_GRANULARITY_INFERRED)
    assert _ws(None, tp=1) == (0, 0, 0)


def test_v0_is_possible_for_an_unknown_release_below_blackwell() -> None:
    """V0's releases pin torch 2.4.0 - 2.6.0 (no sm_100 / sm_120 kernels)."""
    assert vllm.unknown_release_may_run_v0("9.0") and vllm.unknown_release_may_run_v0(None)
    assert not vllm.unknown_release_may_run_v0("10.0") and not vllm.unknown_release_may_run_v0("12.0")
    assert tp_rules.V0_TORCH_PINS["0.8.4"] == "2.6.0"


def _unknown(**more):
    args = {
        "engine_version": None,
        "total": int(79.18 * GiB),
        "utilization_set": True,
        "cudagraphs_counted": False,
        "tp": 1,
        "comm": None,
        "lazy_connect": True,
        "activations": 1000,
    }
    return bound_terms(**{**args, **more})


def test_the_unknown_release_bound_reaches_v0s_batch_and_context() -> None:
    """Where V0 may run, its default batch (max(max_model_len, 2048) tokens) and 0.6.4.x's CUDA
    context inside the non-torch figure may lower the budget (worker/worker.py, 0.6.4.post1)."""
    t = _unknown(release_activations=(800, 1500), v0_activations=5000)["release_unknown"]
    assert t.below == (5000 - 1000) + CONTEXT and t.above == 200
    # V0 not possible (a Blackwell): the samplers' span only
    assert _unknown(release_activations=(800, 1500))["release_unknown"].below == 500
    # a known release: none of it
    known = {"engine_version": "0.19.0", "total": GiB, "utilization_set": True, "cudagraphs_counted": False}
    assert "release_unknown" not in bound_terms(
        **known, tp=1, comm=None, lazy_connect=True, activations=1000, v0_activations=5000
    )


def _llama(version: str | None, cc: str, tp: int = 2):
    """A MemoryModel of Llama-3-8B (tests/fixtures/memory/model_configs.json) on an 80 GiB GPU."""
    import json
    from pathlib import Path

    from flightcheck._memory.budget import Batch, Interconnect
    from flightcheck._memory.config import parse
    from flightcheck._memory.model import MemoryModel
    from flightcheck._memory.weights import Layout

    doc = json.loads((Path(__file__).parents[1] / "fixtures/memory/model_configs.json").read_text())
    m = MemoryModel(
        engine="vllm",
        layout=Layout(tp, 1),
        total=80 << 30,
        engine_version=version,
        interconnect=Interconnect(compute_capability=cc, multicast=True),
    )
    m.cfg = parse(doc["llama-3-8b"]["config"], None)
    m.batch = Batch(2048, 256, source="vLLM's defaults for this GPU", max_model_len=8192, release=release(version))
    return m


def test_the_model_passes_the_v0_side_for_an_unknown_release() -> None:
    """MemoryModel.bound_terms: no release on a Hopper widens the low end by V0's batch (8192
    tokens for an 8192-token context, vllm.v0_batch) and the CUDA context; a Blackwell not."""
    hopper = _llama(None, "9.0").bound_terms()["release_unknown"]
    blackwell = _llama(None, "10.0").bound_terms()["release_unknown"]
    assert hopper.below > blackwell.below + CONTEXT
    assert "release_unknown" not in _llama("0.19.0", "9.0").bound_terms()
    # the fusion workspace: the point of 0.19.0 at TP 2 on a Hopper with multicast, none unknown
    assert _llama("0.19.0", "9.0").fusion_workspace()[1] == 3 * MC_GRANULARITY_INFERRED
    assert _llama(None, "9.0").fusion_workspace() == (0, 0, 3 * MC_GRANULARITY_INFERRED)


def test_across_nodes_only_mnnvl_and_none_at_the_point() -> None:
    """A TP group over two nodes: trtllm cannot; "auto" picks mnnvl from 0.19.0, only on 10.0 and up
    from 0.32.0; whether the nodes share an NVLink fabric is not known: (0, 0, mnnvl)."""
    assert _ws("0.18.0", tp=8, nodes=2) == (0, 0, 0)
    assert _ws("0.19.0", tp=8, nodes=2) == (0, 0, MC_GRANULARITY_INFERRED)
    assert _ws("0.31.0", tp=8, nodes=2)[2] > 0 and _ws("0.32.0", tp=8, nodes=2) == (0, 0, 0)
    assert _ws("0.32.0", tp=8, cc="10.0", nodes=2)[2] > 0
    # one node (nodes None or 1): the one-node rule
    assert _ws("0.19.0", tp=8, nodes=1) == _ws("0.19.0", tp=8)
