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
    # only the profile's logits all-gather over torch's group is certain inside the budget: the
    # ring's 288 MiB or NVLS's 256 MiB, the smaller (multicast unknown)
    assert lazy.comm_in_reserve() == NVLS
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


def test_across_nodes_the_network_buffers_are_a_range_from_zero() -> None:
    # src/transport/net.cc (nccl.multinode_communicator_bytes): on the GPU only with GPUDirect
    # RDMA, on up to MAXCHANNELS channels; no custom all-reduce across nodes
    two_nodes = Interconnect(compute_capability="8.0", nodes=2)
    c = communication(Layout(2, 1), two_nodes, "0.10.1.1", {}, 2)
    assert c.low == 0 and not c.derived
    assert c.high == 2 * 64 * 2 * 20 * MiB
    assert "custom_allreduce" not in c.parts
    off = communication(Layout(2, 1), two_nodes, "0.10.1.1", {"NCCL_NET_GDR_LEVEL": "LOC"}, 2)
    assert off.high == 0


def test_a_tp_group_larger_than_the_node_spans_nodes() -> None:
    m = MemoryModel(engine="vllm", layout=Layout(16, 1), engine_version="0.10.1.1", interconnect=H100, node_gpus=8)
    c = m.communication()
    # the 8 local GPUs' NVSwitch connections stay certain (cuMem off in 0.10.1.1); the network adds to the high end
    one_node = communication(Layout(8, 1), H100, "0.10.1.1", {}, 1)
    assert c.low == one_node.low - 16 * MiB  # custom all-reduce does not span nodes
    assert c.high == one_node.high - 16 * MiB + 64 * 2 * 20 * MiB  # two nodes: two peers a channel


A100 = Interconnect(nvlinks=12, nvswitch=True, compute_capability="8.0", multicast=False)
H200 = Interconnect(nvlinks=18, nvswitch=True, compute_capability="9.0", multicast=None)


def test_v0_logits_gather_adds_its_p2p_connections_on_the_driver() -> None:
    # V0's torch.distributed.gather to the driver: 7 peers x 32 channels x 10 MiB received
    # (nccl.gather_bytes), the driver at the chain's head (1 send + 2 receives a channel)
    root = communication(Layout(8, 1), H200, "0.7.3", {}, 2, "root")
    plain = communication(Layout(8, 1), H200, "0.7.3", {}, 2)
    head_rings = 2 * 24 * (2 + 2 * 10) * MiB
    assert root.low == head_rings + 7 * 32 * 10 * MiB + 16 * MiB
    assert plain.low == 2 * 24 * (2 * 2 + 2 * 10) * MiB + 16 * MiB  # a middle rank, no gather
    # another worker sends on 32 channels (6 MiB each with P2P read on A100)
    peer = communication(Layout(8, 1), A100, "0.7.1", {}, 2, "peer")
    assert peer.parts["nccl_p2p_gather"] == 32 * 6 * MiB


def test_the_v0_model_counts_the_gather_and_v1_does_not() -> None:
    from flightcheck._memory.budget import Batch

    kw = {"engine": "vllm", "layout": Layout(8, 1), "engine_version": "0.7.3", "interconnect": H200}
    v0 = MemoryModel(**kw, batch=Batch(v0=True))
    v1 = MemoryModel(**kw)
    assert v0.comm_in_reserve() - v1.comm_in_reserve() == 7 * 32 * 10 * MiB - 2 * 24 * 2 * MiB


def test_v1_allgather_connections_are_counted_by_release() -> None:
    two = Interconnect(nvlinks=18, nvswitch=True, compute_capability="9.0", multicast=None)
    m = MemoryModel(engine="vllm", layout=Layout(2, 1), engine_version="0.20.0", interconnect=two)
    # at TP 2 every algorithm NCCL may pick uses the ring's connections: 24 channels x 12 MiB
    assert m.comm_in_reserve() == 24 * 12 * MiB
    # from 0.25.0 the gather rides pynccl (cuda_communicator.py): not counted
    later = MemoryModel(engine="vllm", layout=Layout(2, 1), engine_version="0.25.0", interconnect=two)
    assert later.comm_in_reserve() == 0
    # connected at init (NCCL_CUMEM_ENABLE=0): before the snapshot from 0.11, not counted
    off = {"NCCL_CUMEM_ENABLE": "0"}
    at_init = MemoryModel(engine="vllm", layout=Layout(2, 1), engine_version="0.20.0", interconnect=two, nccl_env=off)
    assert at_init.comm_in_reserve() == 0
