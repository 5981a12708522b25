"""NCCL's per-rank communicator memory, derived from NCCL's source (flightcheck._knowledge.nccl).

Every expected number follows from the constants and rules the module cites (NVIDIA/nccl
v2.26.2-1); the public-log figures are the confirmation named in the module docstring.
"""

from __future__ import annotations

import pytest

from flightcheck._knowledge import nccl

MiB = 1 << 20
GiB = 1 << 30


def test_protocol_buffer_sizes_follow_device_h() -> None:
    assert nccl.LL_BUFFSIZE == 512 * 1024
    assert nccl.LL128_BUFFSIZE == 4_915_200
    assert nccl.SIMPLE_BUFFSIZE == 4 * MiB


def test_p2p_connection_sides_are_rounded_to_cuda_ipc_min() -> None:
    # write (H100): the sender keeps only its 4 KiB header, the receiver LL + LL128 + SIMPLE
    assert nccl.p2p_side_bytes(read=False) == (2 * MiB, 10 * MiB)
    # read (A100 over NVLink): SIMPLE moves to the sender
    assert nccl.p2p_side_bytes(read=True) == (6 * MiB, 6 * MiB)


@pytest.mark.parametrize(
    ("cc", "links", "channels"),
    [
        ("9.0", 18, 24),  # H100 / H200 SXM: 6 x 60 GB/s, duplicated to 12, postset 24
        ("8.0", 12, 24),  # A100 SXM: 6 x 40 (= totalBw, done), duplicated to 12, 24
        ("9.0", 8, 16),  # H800: 4 x 40 (4 channels: not > 4, so duplicated) -> 8 -> 16
        ("10.0", 18, 32),  # B200: 8 x 90, duplicated to 16, 32
    ],
)
def test_nvswitch_channels(cc: str, links: int, channels: int) -> None:
    assert nccl.nvswitch_channels(cc, links, 8) == channels
    # the count does not depend on the number of GPUs on the switch (a star)
    assert nccl.nvswitch_channels(cc, links, 2) == channels


def test_unknown_compute_capability_gives_no_channel_count() -> None:
    assert nccl.nvswitch_channels(None, 18) is None


def test_nvls_buffers() -> None:
    # 16 channels x 2 x (128 KiB x 8 steps) x 8 heads, plus 64 B of credits per channel and head
    assert nccl.nvls_bytes("9.0", 18, 8) == 256 * MiB + 16 * 2 * 8 * 64
    assert nccl.nvls_bytes("9.0", 18, 2) == 0  # ncclNvlsInit: more than two GPUs
    assert nccl.nvls_bytes("8.0", 12, 8) == 0  # NVLS needs cc >= 9.0
    assert nccl.nvls_channels("10.0") == 32


def test_chain_positions() -> None:
    assert nccl.chain_connections(2, "head") == (1, 1)
    assert nccl.chain_connections(8, "head") == (1, 2)
    assert nccl.chain_connections(8, "middle") == (2, 2)
    assert nccl.chain_connections(8, "tail") == (2, 1)


def _h100(position: str, multicast: bool | None = True, at_init: bool = True) -> nccl.CommMemory:
    return nccl.communicator_bytes(
        ngpus=8,
        compute_capability="9.0",
        nvlinks=18,
        nvswitch=True,
        connect_at_init=at_init,
        multicast=multicast,
        position=position,
    )


def test_h100_tp8_per_rank_bytes() -> None:
    middle = _h100("middle")
    assert middle.derived
    assert middle.parts["rings_and_trees"] == 24 * (2 * 2 + 2 * 10) * MiB  # 576 MiB
    assert middle.low == middle.high == 576 * MiB + nccl.nvls_bytes("9.0", 18, 8)
    assert _h100("head").parts["rings_and_trees"] == 528 * MiB
    assert _h100("tail").parts["rings_and_trees"] == 336 * MiB


def test_rank_spread_matches_vllm_0_10_per_rank_budgets() -> None:
    """Two communicators (pynccl + torch's TP group) put 0.094 GiB more on the middle ranks
    than on the head and 0.469 GiB more than on the tail: the spread vLLM 0.10.0 logged on
    8 x H100 (tests/fixtures/memory points 15 and 16: 35.65 / 35.74 / 36.12 GiB)."""
    middle, head, tail = (_h100(p).low for p in ("middle", "head", "tail"))
    assert round(2 * (middle - head) / GiB, 2) == round(35.74 - 35.65, 2)
    assert round(2 * (middle - tail) / GiB, 2) == round(36.12 - 35.65, 2)


def test_multicast_unknown_keeps_nvls_out_of_the_low_end() -> None:
    c = _h100("middle", multicast=None)
    assert c.low == 576 * MiB
    assert c.high == 576 * MiB + nccl.nvls_bytes("9.0", 18, 8)
    assert _h100("middle", multicast=False).high == 576 * MiB


def test_lazy_connection_is_certain_of_nothing() -> None:
    c = _h100("middle", at_init=False)
    assert c.low == 0
    assert c.high == 576 * MiB + nccl.nvls_bytes("9.0", 18, 8)


def test_pcie_or_unknown_links_are_a_range_from_zero() -> None:
    c = nccl.communicator_bytes(
        ngpus=8, compute_capability="8.9", nvlinks=0, nvswitch=False, connect_at_init=True, multicast=None
    )
    assert not c.derived and c.low == 0


def test_two_gpus_joined_by_nvlink_are_derived_without_a_switch() -> None:
    c = nccl.communicator_bytes(
        ngpus=2, compute_capability="8.0", nvlinks=12, nvswitch=False, connect_at_init=True, multicast=None
    )
    assert c.derived
    assert c.low == 24 * (6 + 6) * MiB  # one send + one receive per channel, read on cc 8.0


@pytest.mark.parametrize(
    ("env", "forced", "expected"),
    [
        ({}, True, True),  # vLLM < 0.10.2 sets NCCL_CUMEM_ENABLE=0
        ({}, False, False),  # NCCL's default: cuMem on, runtime connect
        ({"NCCL_CUMEM_ENABLE": "1"}, True, False),  # env_override skips a value already set
        ({"NCCL_CUMEM_ENABLE": "0"}, False, True),
        ({"NCCL_RUNTIME_CONNECT": "0"}, False, True),
    ],
)
def test_connects_at_init(env: dict[str, str | None], forced: bool, expected: bool) -> None:
    assert nccl.connects_at_init(env, forced) is expected


# ---- across nodes: the network transport (src/transport/net.cc, NVIDIA/nccl commit 022c022a) ----


def test_a_network_connection_takes_device_memory_only_with_gpudirect_rdma() -> None:
    # sendProxyConnect: LL in host memory, LL128 + SIMPLE on the GPU with useGdr; recvProxyConnect:
    # all three on the GPU with useGdr; each side rounded up to CUDA_IPC_MIN
    assert nccl.NET_SEND_GDR == 10 * MiB  # 4,915,200 + 4 MiB -> 10 MiB
    assert nccl.NET_RECV_GDR == 10 * MiB  # 512 KiB + 4,915,200 + 4 MiB -> 10 MiB
    no_gdr = nccl.multinode_communicator_bytes(nodes=2, gdr=False)
    assert (no_gdr.low, no_gdr.high) == (0, 0)


def test_across_nodes_the_bound_spans_gdr_and_every_channel() -> None:
    # ring neighbour + at most NCCL_MAX_TREE_ARITY's one up and two down on other nodes
    assert nccl.net_peers_per_channel(1) == 0
    assert nccl.net_peers_per_channel(2) == 2
    assert nccl.net_peers_per_channel(8) == 4
    two = nccl.multinode_communicator_bytes(nodes=2)
    assert two.low == 0 and not two.derived
    assert two.high == nccl.MAXCHANNELS * 2 * 20 * MiB  # 2.5 GiB
    capped = nccl.multinode_communicator_bytes(nodes=2, max_channels=nccl.env_max_channels({"NCCL_MAX_NCHANNELS": "4"}))
    assert capped.high == 4 * 2 * 20 * MiB


def test_the_intra_node_part_adds_to_the_network_part() -> None:
    intra = nccl.communicator_bytes(
        ngpus=8, compute_capability="9.0", nvlinks=18, nvswitch=True, connect_at_init=True, multicast=False
    )
    both = nccl.multinode_communicator_bytes(nodes=2, intra=intra)
    assert both.low == intra.low and both.high == intra.high + nccl.MAXCHANNELS * 2 * 20 * MiB
    assert "network" in both.parts and "intra_rings_and_trees" in both.parts


def test_nccl_env_that_narrows_the_network_part() -> None:
    assert nccl.env_gdr({"NCCL_NET_GDR_LEVEL": "LOC"}) is False
    assert nccl.env_gdr({"NCCL_NET_GDR_LEVEL": "PHB"}) is None
    assert nccl.env_gdr(None) is None
    assert nccl.env_max_channels({"NCCL_MAX_NRINGS": "8"}) == 8
    assert nccl.env_max_channels({"NCCL_MAX_NCHANNELS": "999"}) == nccl.MAXCHANNELS
    assert nccl.env_max_channels({"NCCL_MAX_NCHANNELS": "x"}) == nccl.MAXCHANNELS


def test_nvls_before_2_22_is_sized_by_the_communicators_channels() -> None:
    """NCCL 2.21.5 (src/transport/nvls.cc ncclNvlsSetup at tag v2.21.5-1): comm->nChannels x 2 x
    (chunk x steps + NVLS_MEM_ALIGN_SIZE) x nHeads; from 2.22 nvlsChannels x 2 x chunk x steps x
    nHeads plus credits. 8 x H100/H200 (24 channels, 8 heads): 1152 MiB against 256 MiB."""
    assert nccl.nvls_bytes("9.0", 18, 8, (2, 21, 5), 24) == 24 * 2 * 8 * 3 * MiB
    assert nccl.nvls_bytes("9.0", 18, 8, (2, 22, 3), 24) == nccl.nvls_bytes("9.0", 18, 8)
    assert nccl.nvls_bytes("9.0", 18, 8, None, 24) == nccl.nvls_bytes("9.0", 18, 8)
    assert nccl.nvls_bytes("8.0", 12, 8, (2, 21, 5), 24) == 0  # no NVLS below cc 9.0
    old = nccl.communicator_bytes(
        ngpus=8,
        compute_capability="9.0",
        nvlinks=18,
        nvswitch=True,
        connect_at_init=True,
        multicast=True,
        version=(2, 21, 5),
    )
    assert old.parts["nvls"] == 1152 * MiB
    assert nccl.version_of(nccl.NCCL_BY_TORCH["2.5.1"]) == (2, 21, 5)
    assert nccl.version_of("x.y") is None and nccl.version_of(None) is None


def test_p2p_channels_per_peer_on_one_node() -> None:
    # paths.cc ncclTopoComputeP2pChannels (v2.21.5-1, v2.26.2-1, v2.30.7-1): pow2Up of the
    # ring channels and of 2 x the NVLinks, the smaller
    assert nccl.p2p_channels_per_peer("9.0", 18, 8) == 32
    assert nccl.p2p_channels_per_peer("8.0", 12, 8) == 32
    assert nccl.p2p_channels_per_peer("9.0", 2, 2) == 4  # 2 x 2 links, below the ring's
    assert nccl.p2p_channels_per_peer("9.0", None, 8) is None


def test_gather_bytes_root_and_peer() -> None:
    MiB = 1 << 20
    root = nccl.gather_bytes(ngpus=8, compute_capability="9.0", nvlinks=18, nvswitch=True, root=True)
    assert root.derived and root.low == root.high == 7 * 32 * 10 * MiB
    peer = nccl.gather_bytes(ngpus=8, compute_capability="8.0", nvlinks=12, nvswitch=True, root=False)
    assert peer.low == 32 * 6 * MiB  # P2P read on cc 8.0: SIMPLE on the sender
    pcie = nccl.gather_bytes(ngpus=4, compute_capability="8.9", nvlinks=0, nvswitch=False, root=True)
    assert not pcie.derived and pcie.low == 0 and pcie.high == 3 * 2 * 10 * MiB


def test_allgather_bytes_ring_or_nvls() -> None:
    MiB = 1 << 20
    ring2 = nccl.allgather_bytes(ngpus=2, compute_capability="9.0", nvlinks=18, nvswitch=True, multicast=None)
    assert ring2 == nccl.nvswitch_channels("9.0", 18, 2) * 12 * MiB
    off = nccl.allgather_bytes(ngpus=8, compute_capability="9.0", nvlinks=18, nvswitch=True, multicast=False)
    assert off == 24 * 12 * MiB  # no NVLS: the ring
    maybe = nccl.allgather_bytes(ngpus=8, compute_capability="9.0", nvlinks=18, nvswitch=True, multicast=None)
    assert maybe == nccl.nvls_bytes("9.0", 18, 8)  # the smaller of ring and NVLS
    assert nccl.allgather_bytes(ngpus=8, compute_capability="8.9", nvlinks=0, nvswitch=False, multicast=False) == 0
