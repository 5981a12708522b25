"""The KV budget's [low, high] bound (``budget.bound_terms``): which facts widen it, by release."""

from __future__ import annotations

from flightcheck._knowledge.units import GiB
from flightcheck._memory.budget import CUDA_GRAPHS, Communication, bound_terms, usable_bytes

COMM = Communication(0, 800 << 20, {}, True)
TOTAL = int(79.18 * GiB)


def _terms(version: str | None, tp: int = 1, lazy: bool = True, util_set: bool = False, graphs: bool = True):
    return bound_terms(
        engine_version=version,
        total=TOTAL,
        utilization_set=util_set,
        cudagraphs_counted=graphs,
        tp=tp,
        comm=COMM if tp > 1 else None,
        lazy_connect=lazy,
    )


def test_a_known_release_at_tp1_is_a_point() -> None:
    assert _terms("0.33.0") == {}


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
