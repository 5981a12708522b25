"""The KV budget's [low, high] bound (``bound.bound_terms``): which facts widen it, by release."""

from __future__ import annotations

from typing import Any

from flightcheck._knowledge.units import GiB
from flightcheck._memory.bound import bound_terms
from flightcheck._memory.budget import CUDA_GRAPHS, CUDA_GRAPHS_HIGH, Communication, usable_bytes

COMM = Communication(0, 800 << 20, {}, True)
TOTAL = int(79.18 * GiB)


def _terms(
    version: str | None, tp: int = 1, lazy: bool = True, util_set: bool = False, graphs: bool = True, **more: Any
):
    """``bound_terms`` with this file's defaults; ``more`` overrides or adds its other arguments."""
    kwargs: dict[str, Any] = {
        "engine_version": version,
        "total": TOTAL,
        "utilization_set": util_set,
        "cudagraphs_counted": graphs,
        "tp": tp,
        "comm": COMM if tp > 1 else None,
        "lazy_connect": lazy,
    }
    return bound_terms(**{**kwargs, **more})


def test_a_known_release_at_tp1_spans_only_what_the_profile_measures() -> None:
    """Even at TP 1 with the release known, the non-torch memory the profile run loads (lazy CUDA
    modules) and, from 0.20.0, the CUDA-graph estimate are not decided by the inputs."""
    t = _terms("0.33.0")
    assert set(t) == {"non_torch", "cuda_graphs"}
    assert t["cuda_graphs"].above == CUDA_GRAPHS and t["cuda_graphs"].below == CUDA_GRAPHS_HIGH - CUDA_GRAPHS
    # --enforce-eager, before 0.20.0: no graph estimate in the budget
    assert set(_terms("0.19.0", graphs=False)) == {"non_torch"}


def test_nccl_connections_after_the_snapshot_lower_the_budget_from_0_11() -> None:
    # lazily connected (cuMem on): both TP communicators' connections count (0.33.0)
    t = _terms("0.33.0", tp=8)["nccl_after_snapshot"]
    assert (t.below, t.above) == (2 * COMM.high, 0) and "gpu_worker.py" in t.source
    # connected at init: only the device group's, created by the profile run
    assert _terms("0.33.0", tp=8, lazy=False)["nccl_after_snapshot"].below == COMM.high
    # before 0.11 the snapshot precedes the distributed init: counted in the point instead
    assert "nccl_after_snapshot" not in _terms("0.10.1.1", tp=8)


def test_an_unknown_release_widens_over_the_releases_rules() -> None:
    t = _terms(None, tp=4)
    util = usable_bytes(TOTAL, 0.92) - usable_bytes(TOTAL, 0.9)
    assert t["release_unknown"].above == util + CUDA_GRAPHS and t["release_unknown"].below == 0
    assert t["nccl_after_snapshot"].below == 2 * COMM.high
    # the launch's own utilization and --enforce-eager leave nothing of that term
    assert "release_unknown" not in _terms(None, util_set=True, graphs=False)


def test_the_fusion_workspace_widens_the_bound_by_its_span() -> None:
    """vllm.fusion_workspace's (low, point, high): the point is in the reserve, the bound spans
    the rest (flashinfer/comm/mnnvl.py SymmDeviceMemory, FlashInfer 0.6.6)."""
    t = _terms("0.19.0", tp=2, util_set=True, graphs=False, comm=None, fusion=(100, 1000, 1000))["allreduce_fusion"]
    assert (t.below, t.above) == (0, 900) and "trtllm_ar.py" in t.source


def test_before_0_11_the_communicators_uncertain_part_lowers_the_budget() -> None:
    comm = Communication(100 << 20, 400 << 20, {}, True)
    t = _terms("0.10.1.1", tp=2, lazy=False, util_set=True, graphs=False, comm=comm, comm_in_budget=comm)
    assert t["nccl_in_budget"].below == 2 * (300 << 20) and "nccl_after_snapshot" not in t


def test_shared_host_memory_spans_the_slack_on_spark() -> None:
    """utils/mem_utils.py MemorySnapshot.measure (0.19.0): cc 12.1 reads psutil's available memory."""
    t = _terms("0.19.0", util_set=True, graphs=False, compute_capability="12.1", utilization=0.5)["shared_host_memory"]
    assert t.below == t.above == int(TOTAL * 0.5)


def test_an_unknown_release_spans_the_samplers_of_the_releases() -> None:
    """No release: the profile's sampler is FlashInfer / Triton (14 B an element) or the sort
    (38 - 50 B) by release (vllm.sampler_kind): the bound takes the min / max of the peak."""
    samplers = {"activations": 1000, "release_activations": (800, 1500)}
    t = _terms(None, util_set=True, graphs=False, **samplers)["release_unknown"]
    assert (t.below, t.above) == (500, 200)
    # a known release: its own sampler, no such term
    known = _terms("0.19.0", util_set=True, graphs=False, **samplers)
    assert "release_unknown" not in known


def test_across_nodes_before_0_11_the_network_buffers_widen_the_low_end() -> None:
    # vLLM 0.10.1.1: the snapshot precedes the distributed init (v1/worker/gpu_worker.py
    # init_device), NCCL_CUMEM_ENABLE=0 (env_override.py): both TP communicators' network
    # connections are inside the budget; on the GPU only with GPUDirect RDMA (src/transport/net.cc)
    from flightcheck._memory.budget import Interconnect, communication
    from flightcheck._memory.weights import Layout

    ic = Interconnect(compute_capability="8.0", nodes=2)
    one = communication(Layout(2, 1), ic, "0.10.1.1", {}, 1)
    terms = _terms("0.10.1.1", tp=2, lazy=False, util_set=True, total=40 * GiB, comm=one, comm_in_budget=one)
    assert terms["nccl_in_budget"].below == 2 * one.high == 2 * 64 * 2 * 20 * (1 << 20)
    assert "nccl_after_snapshot" not in terms


def test_0_6_4_spans_the_cuda_context_it_counts() -> None:
    # worker/worker.py determine_num_available_blocks (0.6.4.post1): the CUDA context is inside the
    # non-torch figure; the point takes the CONTEXT estimate, the bound reaches a context of 0
    from flightcheck._memory.budget import CONTEXT

    def terms(version: str) -> dict:
        return _terms(version, lazy=False, graphs=False, total=8 * GiB)

    assert terms("0.6.4.post1")["cuda_context"].above == CONTEXT
    assert "cuda_context" not in terms("0.6.6") and "cuda_context" not in terms("0.19.0")
