"""Where vLLM's NCCL communicators land, by version (flightcheck._memory.budget.communication,
MemoryModel): inside the KV budget before 0.11.0, before the snapshot (FC406's slack) after."""

from __future__ import annotations

from flightcheck._memory.budget import CONTEXT, Interconnect, communication
from flightcheck._memory.model import MemoryModel
from flightcheck._memory.weights import Layout

MiB = 1 << 20
H100 = Interconnect(nvlinks=18, nvswitch=True, compute_capability="9.0", multicast=None)
NVLS = 256 * MiB + 16 * 2 * 8 * 64


def _model(version: str, **kw) -> MemoryModel:
    return MemoryModel(engine="vllm", layout=Layout(8, 1), engine_version=version, interconnect=H100, **kw)


def test_before_0_11_two_communicators_and_custom_allreduce_sit_in_the_budget() -> None:
    m = _model("0.10.0")
    # vLLM 0.10.0 sets NCCL_CUMEM_ENABLE=0: everything connected at init; NVLS uncertain
    assert m.comm_in_reserve() == 2 * 576 * MiB + 16 * MiB
    assert m.pre_snapshot() == {"cuda_context": CONTEXT}  # they come after the snapshot
    m.reserve = 1000
    m.add_comm_to_reserve()
    assert m.reserve == 1000 + 2 * 576 * MiB + 16 * MiB and "communication" in m.reserve_parts


def test_from_0_11_one_communicator_before_the_snapshot() -> None:
    lazy = _model("0.11.0")
    assert lazy.comm_in_reserve() == 0
    assert lazy.pre_snapshot()["communication"] == 576 * MiB + NVLS + 16 * MiB  # the high end
    assert lazy.pre_snapshot_certain() == CONTEXT  # NCCL 2.27's default connects on first use
    at_init = _model("0.11.0", nccl_env={"NCCL_CUMEM_ENABLE": "0"})
    assert at_init.pre_snapshot_certain() == CONTEXT + 576 * MiB
    no_nvls = _model("0.11.0", nccl_env={"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0"})
    assert no_nvls.pre_snapshot()["communication"] == 576 * MiB + 16 * MiB


def test_pcie_keeps_the_estimate_as_the_high_end_and_nothing_certain() -> None:
    pcie = Interconnect(nvlinks=0, nvswitch=False, compute_capability="8.9", multicast=False)
    c = communication(Layout(8, 1), pcie, "0.10.0", {}, 2)
    assert not c.derived and c.low == 0 and c.high == 100 * MiB
